//! The one write path (README, "The model in one minute"): tombstone → ambiguity → insert / confirm / stale / supersede.

use super::events::{Event, EventKind};
use super::rows::history_max_version;
pub(crate) use super::tx::{Here, KnownPlaces, PlaceSources, SeqBatch, TxState, WriteCtx};
use super::tx::{SOURCES_KEPT, SOURCES_ROWS_KEPT};
use super::{bump_metric, canonical_predicate, Store};
use crate::model::{
    same_value, Identity, OutcomeKind, OutcomeScope, PendingItem, Scope, ScopeChoice, WriteOutcome,
    WriteRequest,
};
use crate::store::decide::{decide_spelled, decide_write, Held, Probe, WriteDecision};
use crate::store::guard::{
    judge, judge_words, Context, Cues, Evidence, GuardMode, Places, Verdict,
};
use crate::store::intake::{Batch, InputKind, Intake, ParsedLine};
use crate::store::prepared::{
    base_outcome, resolution_seq, validate, PreparedWrite, RetryWithSavepoints,
};
use anyhow::{anyhow, bail, Result};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};
use std::io::Read;

impl TxState {
    /// Logs the `set` event of a new applied version, stamped with the clock.
    #[allow(clippy::too_many_arguments)]
    /// Logs the `set` event of a stored version; a suspect write's carries its evidence
    /// (`detail.suspect`).
    #[allow(clippy::too_many_arguments)]
    fn log_set(
        &mut self,
        conn: &Connection,
        w: &PreparedWrite,
        scope_text: &str,
        version: i64,
        seq: i64,
        now: &str,
        suspect: Option<&Value>,
    ) -> Result<()> {
        let clock = self.seqs.stamp();
        if let Some(detail) = suspect {
            let id = Identity {
                subject: w.subject.clone(),
                predicate: w.predicate.clone(),
                // Only a global write is ever a suspect.
                scope: Scope::Global,
            };
            return Event::new(EventKind::Set, &id)
                .version(Some(version))
                .content(Some(&w.value_text), w.raw.as_deref())
                .provenance(Some(&w.source), Some(seq))
                .detail(detail)
                .clock(clock)
                .log(conn, now);
        }
        self.hot.log_set(conn)?.execute(&[
            (&w.subject).into(),
            (&w.predicate).into(),
            scope_text.into(),
            version.into(),
            (&w.value_text).into(),
            w.raw.as_ref().into(),
            (&w.source).into(),
            seq.into(),
            now.into(),
            clock.into(),
        ])?;
        Ok(())
    }

    /// `w` with its predicate mapped through the alias table and its subject and scope in
    /// their stored spellings (a new spelling is registered as the first): the one place a
    /// write's identity takes the form the store keeps.
    fn canonicalize(
        &mut self,
        conn: &Connection,
        w: &mut std::borrow::Cow<'_, PreparedWrite>,
    ) -> Result<()> {
        let predicate = self.canonical_predicate(conn, &w.predicate)?;
        if predicate != w.predicate {
            w.to_mut().predicate = predicate;
        }
        if let Some(subject) = self.spellings.respell_subject(conn, &w.subject)? {
            w.to_mut().subject = subject;
        }
        match &w.choice {
            ScopeChoice::Exact(scope) => {
                if let Some(spelled) = self.spellings.respell_scope(conn, scope)? {
                    let w = w.to_mut();
                    w.scope_text = Some(spelled.to_string());
                    w.choice = ScopeChoice::Exact(spelled);
                }
            }
            ScopeChoice::Ambiguous(candidates) => {
                let mut spelled = Vec::with_capacity(candidates.len());
                for c in candidates {
                    spelled.push(self.spellings.scope(conn, c)?);
                }
                // Candidates are distinct places (`ScopeChoice::ambiguous`), so they stay so.
                if spelled != *candidates {
                    w.to_mut().choice = ScopeChoice::Ambiguous(spelled);
                }
            }
        }
        Ok(())
    }

    /// The scope guard's verdict on a global write (`guard::judge`): its mode is read once per
    /// transaction, and the known places once for as long as they stay current
    /// ([`KnownPlaces`]; never with the guard off); the siblings — the scoped records the same
    /// source (message) wrote of this subject in the place the write was made in — from what
    /// the store keeps of that place's records between write-path transactions
    /// ([`PlaceSources`]).
    /// A write that does not say where it was made is judged on its own words only (no
    /// lookups: every global write pays this), and can only be a suspect.
    fn guard(&mut self, conn: &Connection, w: &PreparedWrite) -> Result<Verdict> {
        if w.context.is_none() {
            let Some(raw) = w.raw.as_deref() else {
                return Ok(Verdict::Apply);
            };
            let mode = self.guard_mode(conn)?;
            return Ok(judge_words(Some(raw), w.words.as_ref(), mode));
        }
        // With the guard off nothing is judged: the known places are not even read.
        let mode = self.guard_mode(conn)?;
        if mode == GuardMode::Off {
            return Ok(Verdict::Apply);
        }
        if !self.places_checked {
            // The generation is read first: a change that races the read makes the places
            // look out of date next time, never current.
            let generation = super::spellings::scope_spellings_generation();
            let data_version: i64 = conn
                .prepare_cached("PRAGMA data_version")?
                .query_row([], |r| r.get(0))?;
            // Current when no other connection has committed and every change to the
            // spellings since was a place this store registered (each moved the generation
            // by one), which the places take in below.
            let own = self.spellings.new_places.len() as u64;
            self.data_version = Some(data_version);
            let current = self.places.as_ref().is_some_and(|p| {
                p.data_version == data_version && p.generation + own == generation
            });
            if !current {
                let known = super::spellings::known_places(conn)?;
                self.places = Some(KnownPlaces {
                    data_version,
                    generation,
                    places: Places::new(&known),
                });
                self.spellings.new_places.clear();
            }
            self.places_checked = true;
        }
        let here = self.places_here(conn, w.context.as_ref())?;
        // Siblings in the place the write was made in: the current records of this subject
        // there that the same message (source) wrote — never its whole history. (Siblings
        // elsewhere are the suspects scan's to find.)
        let mut siblings: Vec<(String, Scope)> = Vec::new();
        for place in &here.places {
            for predicate in self.siblings_in(conn, place, w)? {
                siblings.push((predicate, place.clone()));
            }
        }
        let Some(known) = &mut self.places else {
            return Ok(Verdict::Apply);
        };
        for place in self.spellings.new_places.drain(..) {
            known.places.add(&place);
            known.generation += 1;
        }
        self.here = Some(here);
        let ev = Evidence {
            raw: w.raw.as_deref(),
            words: w.words.as_ref(),
            context: w.context.as_ref(),
            known_places: &known.places,
            siblings: &siblings,
        };
        Ok(judge(Cues::shipped(), &Scope::Global, &ev, mode))
    }

    /// The predicates of the current records `w`'s source wrote of its subject in `place`:
    /// from the records' sources kept between transactions when the write path alone has
    /// written since ([`PlaceSources`]), read again when another connection has committed.
    fn siblings_in(
        &mut self,
        conn: &Connection,
        place: &Scope,
        w: &PreparedWrite,
    ) -> Result<Vec<String>> {
        let source = w.source.as_str();
        let (Some(data_version), true) = (self.data_version, self.keeps_sources) else {
            let read = PlaceSources::read(conn, place, &w.subject, Some(source), 0)?;
            return Ok(read.written_by(source).unwrap_or_default());
        };
        if !self
            .sources
            .may_have_written(place, &w.subject, source, data_version)
        {
            return Ok(Vec::new());
        }
        let kept = self
            .sources
            .places
            .get(place)
            .and_then(|by_subject| by_subject.get(w.subject.as_str()))
            .filter(|s| s.data_version == data_version);
        if let Some(found) = kept.and_then(|k| k.written_by(source)) {
            return Ok(found);
        }
        let kept_complete = kept.is_some();
        // Every scoped record's source, once the reads have paid for it.
        if self.sources.weigh(conn, data_version)?
            && !self
                .sources
                .may_have_written(place, &w.subject, source, data_version)
        {
            return Ok(Vec::new());
        }
        // A first question reads its answer alone; a second one about the same place and
        // subject, every record's source.
        let ask = if kept_complete { None } else { Some(source) };
        let read = PlaceSources::read(conn, place, &w.subject, ask, data_version)?;
        let found = read.written_by(source).unwrap_or_default();
        if read.len() <= SOURCES_ROWS_KEPT {
            let places = &mut self.sources.places;
            let kept: usize = places.values().map(|by_subject| by_subject.len()).sum();
            if kept >= SOURCES_KEPT {
                places.clear();
            }
            places
                .entry(place.clone())
                .or_default()
                .insert(w.subject.clone(), read);
        }
        Ok(found)
    }

    /// The places a write was made in that memscope has stored anything in (a place it never
    /// has holds no siblings), in their stored spelling; kept from one write to the next while
    /// the writes come from the same place and no spelling changes (taken: the caller puts it
    /// back in `self.here`).
    fn places_here(&mut self, conn: &Connection, context: Option<&Context>) -> Result<Here> {
        let generation = super::spellings::scope_spellings_generation();
        if let Some(here) = self.here.take() {
            if here.generation == generation && Some(&here.context) == context {
                return Ok(here);
            }
        }
        let context = context.cloned().unwrap_or_default();
        let mut places = Vec::new();
        let given = [
            context.repo.clone().map(Scope::Repo),
            context.task.clone().map(Scope::Task),
        ];
        for place in given.into_iter().flatten() {
            if let Some(place) = self.spellings.find_scope(conn, &place)? {
                places.push(place);
            }
        }
        Ok(Here {
            context,
            generation,
            places,
        })
    }

    /// The scope guard's mode (read once per transaction).
    fn guard_mode(&mut self, conn: &Connection) -> Result<GuardMode> {
        if let Some(mode) = self.guard_mode {
            return Ok(mode);
        }
        let mode = super::settings::scope_guard_of(
            conn.prepare_cached("SELECT value FROM settings WHERE key = ?1")?
                .query_row([super::settings::SCOPE_GUARD_KEY], |r| {
                    r.get::<_, String>(0)
                })
                .optional()?
                .as_deref(),
        );
        self.guard_mode = Some(mode);
        Ok(mode)
    }

    /// `predicate` normalized and mapped through the alias table.
    fn canonical_predicate(&mut self, conn: &Connection, predicate: &str) -> Result<String> {
        if let Some(c) = self.canonical.get(predicate) {
            return Ok(c.clone());
        }
        let c = canonical_predicate(conn, predicate)?;
        self.canonical.insert(predicate.to_string(), c.clone());
        Ok(c)
    }
}

/// Re-checks the identity a write touched when MEMSCOPE_ASSERT_INVARIANTS is on.
pub(crate) fn assert_written(conn: &Connection, ctx: &WriteCtx, w: &PreparedWrite) -> Result<()> {
    if !ctx.assert {
        return Ok(());
    }
    match w.identity() {
        Some(id) => super::check::assert_identity_clean(conn, &id),
        None => Ok(()),
    }
}

/// A validated write with its predicate mapped through the alias table and its names in their
/// stored spellings: ready for the transaction.
fn canonicalized(conn: &Connection, w: PreparedWrite, st: &mut TxState) -> Result<PreparedWrite> {
    let mut w = std::borrow::Cow::Owned(w);
    st.canonicalize(conn, &mut w)?;
    Ok(w.into_owned())
}

/// Decides and applies one write inside an open write transaction.
pub(crate) fn write_in_tx(
    conn: &Connection,
    w: &PreparedWrite,
    now: &str,
    st: &mut TxState,
) -> Result<WriteOutcome> {
    if let Some(refused) = brought_refusal(conn, w, st)? {
        return Err(refused.into());
    }
    write_judged(conn, w, now, st)
}

/// A number past 2^53 − 2^32 the clock has not reached, refused before anything else (README,
/// `--causal-seq`), whatever the identity holds — as on PostgreSQL, whose write judges it
/// before its look.
fn brought_refusal(
    conn: &Connection,
    w: &PreparedWrite,
    st: &mut TxState,
) -> Result<Option<crate::model::InvalidRequest>> {
    match w.causal_seq.filter(|s| *s > crate::model::MAX_BROUGHT_SEQ) {
        Some(s) => Ok(crate::model::brought_within_clock(s, st.seqs.current(conn)?).err()),
        None => Ok(None),
    }
}

/// [`write_in_tx`] past the judging of a brought number.
fn write_judged(
    conn: &Connection,
    w: &PreparedWrite,
    now: &str,
    st: &mut TxState,
) -> Result<WriteOutcome> {
    let out = decide_and_apply(conn, w, now, st)?;
    // A scoped record now written by this source: the sources the guard keeps follow it.
    if matches!(out.outcome, OutcomeKind::Inserted | OutcomeKind::Superseded) {
        if let ScopeChoice::Exact(scope) = &w.choice {
            st.sources.wrote(scope, &w.subject, &w.predicate, &w.source);
        }
    }
    Ok(out)
}

/// Whether the global identity of `w` is deleted (has a tombstone).
fn tombstoned_global(conn: &Connection, w: &PreparedWrite) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = 'global'",
        )?
        .exists(params![w.subject, w.predicate])?)
}

fn decide_and_apply(
    conn: &Connection,
    w: &PreparedWrite,
    now: &str,
    st: &mut TxState,
) -> Result<WriteOutcome> {
    let (scope, scope_text) = match (&w.choice, &w.scope_text) {
        (ScopeChoice::Exact(scope), Some(text)) => (scope, text.as_str()),
        (ScopeChoice::Ambiguous(candidates), _) => {
            return enqueue_pending(conn, w, candidates, None, now, &mut st.seqs)
        }
        (ScopeChoice::Exact(scope), None) => bail!("internal: no stored text for scope {scope}"),
    };
    // The scope guard (README, "The scope guard"): a global write whose words or message
    // point at the place it was made in waits for a human instead; one that only looks like
    // a place's rule (no place given, or the guard set to `flag`) is stored, and its `set`
    // event keeps the evidence.
    let mut suspect = None;
    if *scope == Scope::Global && !w.curated {
        match st.guard(conn, w)? {
            // A deleted memory is refused before it is judged (README, "Write rules": a
            // tombstone comes first): queued, its value and words would be stored again.
            Verdict::Queue { .. } if tombstoned_global(conn, w)? => {}
            Verdict::Queue {
                candidates,
                evidence,
            } => {
                let evidence = evidence.join("; ");
                // The places as stored (registered, as an explicit ambiguous write's are): the
                // context names them as the writer typed them.
                let candidates = candidates
                    .iter()
                    .map(|c| st.spellings.scope(conn, c))
                    .collect::<Result<Vec<_>>>()?;
                return enqueue_pending(conn, w, &candidates, Some(&evidence), now, &mut st.seqs);
            }
            Verdict::Suspect { evidence, places } => {
                // The places as stored where memscope knows them (looked up only).
                let mut spelled = Vec::with_capacity(places.len());
                for p in &places {
                    spelled.push(
                        st.spellings
                            .find_scope(conn, p)?
                            .unwrap_or_else(|| p.clone()),
                    );
                }
                suspect = Some(crate::store::suspects::marked_detail(evidence, &spelled));
            }
            Verdict::Apply => {}
        }
    }

    if st.expect_fresh {
        if let Some(mut out) = insert_if_fresh(conn, w, scope_text, now, suspect.as_ref(), st)? {
            crate::store::suspects::tell_marked(&mut out, suspect.as_ref());
            return Ok(out);
        }
        st.expect_fresh = false;
    }
    let id = Identity {
        subject: w.subject.clone(),
        predicate: w.predicate.clone(),
        scope: scope.clone(),
    };

    let (probe, has_history) = probe_identity(conn, &id, scope_text)?;
    // A refused write takes no causal number; any other takes its own or the clock's next.
    let seq = if probe.tombstone.is_some() {
        0
    } else {
        match w.causal_seq {
            Some(s) => {
                st.seqs.observe(conn, s)?;
                s
            }
            // A clock set back around memscope (a raw client's row, found by review) stands
            // at or below the number this identity holds: it moves up past it first, so the
            // write is not stale for no reason of its own — as on PostgreSQL.
            None => {
                if let Some(held) = &probe.current {
                    st.seqs.observe(conn, held.causal_seq)?;
                }
                st.seqs.alloc(conn)?
            }
        }
    };
    let decision = decide_spelled(&probe, &w.value, seq, w.spelling);
    // An insert and a supersede store the same nine values, each with its own statement, and
    // log the same `set` event.
    let set_version = |sql: &str, version: i64, st: &mut TxState| -> Result<()> {
        let changed = conn.prepare_cached(sql)?.execute(params![
            id.subject,
            id.predicate,
            scope_text,
            w.value_text,
            version,
            w.source,
            w.raw,
            seq,
            now
        ])?;
        // One record an identity; two rewritten as one is a damaged database, refused whole.
        if changed > 1 {
            return Err(crate::store::check::two_rows_of_one_identity(
                "memories", &id,
            ));
        }
        st.log_set(conn, w, scope_text, version, seq, now, suspect.as_ref())
    };
    let mut out = base_outcome(decision.kind(), &id);
    out.reason = decision.reason();
    (out.version, out.value, out.previous) = decision.reported(&w.value);
    match decision {
        WriteDecision::Reject { tombstone_version } => {
            // The event records the clock whether or not this transaction has read it yet, so
            // a line logs the same event alone or inside an `apply` batch.
            st.seqs.current(conn)?;
            Event::new(EventKind::Rejected, &id)
                .provenance(Some(&w.source), w.causal_seq)
                .detail(&json!({ "reason": "tombstoned", "tombstone_version": tombstone_version }))
                .clock(st.seqs.stamp())
                .log(conn, now)?;
            bump_metric(conn, "resurrection_blocked", 1)?;
            return Ok(out);
        }
        WriteDecision::Insert { version } => {
            st.expect_fresh = !has_history;
            set_version(
                "INSERT OR FAIL INTO memories (subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
                version,
                st,
            )?;
        }
        WriteDecision::Confirm { version, .. } => {
            // No SQL functions in the hot writes: see schema v3.
            let changed = conn.prepare_cached(
                "UPDATE OR FAIL memories SET confirmed_at = ?4, confirm_count = confirm_count + 1, confirmed_source = ?5,
                        confirmed_seq = CASE WHEN confirmed_seq >= ?6 THEN confirmed_seq ELSE ?6 END
                 WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
            )?
            .execute(params![id.subject, id.predicate, scope_text, now, w.source, seq])?;
            if changed > 1 {
                return Err(crate::store::check::two_rows_of_one_identity(
                    "memories", &id,
                ));
            }
            Event::new(EventKind::Confirmed, &id)
                .version(Some(version))
                .content(Some(&w.value_text), w.raw.as_deref())
                .provenance(Some(&w.source), Some(seq))
                .clock(st.seqs.stamp())
                .log(conn, now)?;
        }
        WriteDecision::Stale {
            version,
            current_seq,
            ..
        } => {
            Event::new(EventKind::Stale, &id)
                .content(Some(&w.value_text), w.raw.as_deref())
                .provenance(Some(&w.source), Some(seq))
                .detail(&json!({ "current_version": version, "current_causal_seq": current_seq }))
                .clock(st.seqs.stamp())
                .log(conn, now)?;
            bump_metric(conn, "stale_writes", 1)?;
        }
        WriteDecision::Supersede { version, .. } => {
            set_version(
                "UPDATE OR FAIL memories SET value = ?4, version = ?5, source = ?6, raw = ?7, causal_seq = ?8, updated_at = ?9,
                        confirmed_at = NULL, confirm_count = 0, confirmed_source = NULL, confirmed_seq = NULL
                 WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
                version,
                st,
            )?;
        }
    }
    out.causal_seq = Some(seq);
    crate::store::suspects::tell_marked(&mut out, suspect.as_ref());
    Ok(out)
}

/// What the database holds for `id` (its scope stored as `scope_text`), in one statement, and
/// whether it has any history. The last version is looked up only for a new record after a
/// past (SQLite re-prepares that aggregate as the table grows).
pub(crate) fn probe_identity(
    conn: &Connection,
    id: &Identity,
    scope_text: &str,
) -> Result<(Probe, bool)> {
    // A second current record (a client dropped the identity's guard) is refused here, before
    // a stale or confirmed write is decided against either.
    let (tombstone, version, value, causal_seq, has_history) = super::rows::identity_row_at(
        conn,
        "memories",
        "SELECT (SELECT version FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3),
                    m.version, m.value, max(m.causal_seq, coalesce(m.confirmed_seq, 0)),
                    EXISTS (SELECT 1 FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3)
             FROM (SELECT 1) LEFT JOIN memories m ON m.subject = ?1 AND m.predicate = ?2 AND m.scope = ?3",
        id,
        scope_text,
        |r| {
            Ok((
                r.get::<_, Option<i64>>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, bool>(4)?,
            ))
        },
    )?
    .ok_or_else(|| anyhow!("the probe of {id} returned no row"))?;
    let current = match (version, value, causal_seq) {
        (Some(version), Some(text), Some(causal_seq)) => Some(Held {
            version,
            value: serde_json::from_str(&text).map_err(|e| {
                anyhow!("stored value of {id} is not JSON ({e}): run `memscope check`")
            })?,
            causal_seq,
        }),
        _ => None,
    };
    let last_version = if tombstone.is_none() && current.is_none() && has_history {
        history_max_version(conn, id)?.unwrap_or(0)
    } else {
        0
    };
    Ok((
        Probe {
            tombstone,
            current,
            last_version,
        },
        has_history,
    ))
}

/// The common case of a bulk load in one statement: an identity with no tombstone and no
/// past gets its first version. Returns `None`, having changed nothing, for any other identity.
/// A suspect write's `set` event carries its evidence (`suspect`), as on the full path.
///
/// The conditions live in the value: it is NULL unless the identity has neither a tombstone
/// nor history, and `INSERT OR IGNORE` skips a row whose NOT NULL value is NULL — as it skips
/// one whose identity already has a current record. (An `INSERT … SELECT … WHERE` would say
/// the same, but SQLite runs it through a temporary table on a table with triggers.) The
/// tombstone is looked up here although the schema's trigger would refuse the row — a raw
/// client may have dropped or changed the trigger — except in a bulk load that has found the
/// trigger exactly as memscope made it: there the trigger's refusal sends the line to the
/// full decision, and the line's lookups are one fewer.
fn insert_if_fresh(
    conn: &Connection,
    w: &PreparedWrite,
    scope_text: &str,
    now: &str,
    suspect: Option<&Value>,
    st: &mut TxState,
) -> Result<Option<WriteOutcome>> {
    let seq = match w.causal_seq {
        Some(s) => s,
        None => crate::model::within_clock(st.seqs.current(conn)?.saturating_add(1))?,
    };
    // In a bulk load with the guard trigger intact, the trigger's lookup of the tombstone
    // stands in for the statement's own: a tombstoned identity is refused, and the full
    // decision reports it.
    let guarded = st.batch
        && match st.guard_intact {
            Some(intact) => intact,
            None => *st
                .guard_intact
                .insert(super::schema::memories_insert_guard_intact(conn)?),
        };
    let stmt = if guarded {
        st.hot.fresh_insert_guarded(conn)?
    } else {
        st.hot.fresh_insert(conn)?
    };
    let inserted = match stmt.execute(&[
        (&w.subject).into(),
        (&w.predicate).into(),
        scope_text.into(),
        (&w.value_text).into(),
        (&w.source).into(),
        w.raw.as_ref().into(),
        seq.into(),
        now.into(),
    ]) {
        Ok(n) => n,
        // Only the guard's own refusal, which comes before anything is written; any other
        // trigger's (a raw client's, which may fire after the row is in) is an error.
        Err(rusqlite::Error::SqliteFailure(e, Some(msg)))
            if guarded
                && e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_TRIGGER
                && msg == super::schema::TOMBSTONED_REFUSAL =>
        {
            0
        }
        Err(e) => return Err(e.into()),
    };
    if inserted == 0 {
        return Ok(None);
    }
    match w.causal_seq {
        Some(s) => st.seqs.observe(conn, s)?,
        None => {
            st.seqs.alloc(conn)?;
        }
    }
    st.log_set(conn, w, scope_text, 1, seq, now, suspect)?;
    let Some(id) = w.identity() else {
        bail!("internal: a fresh insert of an ambiguous write");
    };
    let mut out = base_outcome(OutcomeKind::Inserted, &id);
    out.version = Some(1);
    out.value = Some(w.value.clone());
    out.causal_seq = Some(seq);
    Ok(Some(out))
}

fn enqueue_pending(
    conn: &Connection,
    w: &PreparedWrite,
    candidates: &[Scope],
    // The scope guard's evidence, when the guard (not the writer) made the write ambiguous.
    guard_reason: Option<&str>,
    now: &str,
    seqs: &mut SeqBatch,
) -> Result<WriteOutcome> {
    // The candidates deleted, in one read of the identity's tombstones (the key leads with
    // subject and predicate).
    let deleted = conn
        .prepare_cached("SELECT scope FROM tombstones WHERE subject = ?1 AND predicate = ?2")?
        .query_map(params![w.subject, w.predicate], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    let queued = crate::store::decide::queued_candidates(candidates, &deleted);
    let mut out = WriteOutcome::new(
        OutcomeKind::Pending,
        &w.subject,
        &w.predicate,
        OutcomeScope::Ambiguous {
            ambiguous: queued.as_ref().map_or(candidates, |q| &q.0).to_vec(),
        },
    );
    let (candidates, left_out) = match queued {
        Ok(queued) => queued,
        Err(reason) => {
            bump_metric(conn, "resurrection_blocked", 1)?;
            out.outcome = OutcomeKind::Rejected;
            out.reason = Some(reason);
            return Ok(out);
        }
    };
    let candidates = candidates.as_slice();
    let scopes: Vec<String> = candidates.iter().map(|s| s.to_string()).collect();
    // A retried agent or a replayed file asks again what a human has not yet answered: the
    // open item is the answer, not a second one in the queue.
    if let Some(item) = open_pending_like(conn, w, candidates)? {
        out.pending_id = Some(item.id);
        out.value = Some(item.value);
        out.causal_seq = Some(item.causal_seq);
        out.reason = Some(format!(
            "the same write is already waiting as pending #{}: a human picks its scope with `memscope pending resolve`",
            item.id
        ));
        return Ok(out);
    }
    let seq = match w.causal_seq {
        Some(s) => {
            seqs.observe(conn, s)?;
            s
        }
        None => seqs.alloc(conn)?,
    };
    conn.prepare_cached(
        "INSERT INTO pending (subject, predicate, value, raw, source, causal_seq, candidates, status, created_at, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'open', ?8, ?9)",
    )?
    .execute(
        params![w.subject, w.predicate, w.value_text, w.raw, w.source, seq, serde_json::to_string(&scopes)?, now, guard_reason],
    )?;
    // The statement inserts one row and fires no trigger: the id is this connection's last.
    let id = conn.last_insert_rowid();
    out.pending_id = Some(id);
    out.value = Some(w.value.clone());
    out.causal_seq = Some(seq);
    out.reason = Some(crate::store::prepared::queued_reason(
        guard_reason,
        &left_out,
    ));
    Ok(out)
}

/// The open pending item this ambiguous write repeats: same subject, predicate, value (as
/// values compare), candidates (in any order) and source.
fn open_pending_like(
    conn: &Connection,
    w: &PreparedWrite,
    candidates: &[Scope],
) -> Result<Option<PendingItem>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id FROM pending
         WHERE subject = ?1 AND predicate = ?2 AND source = ?3 AND status = 'open' ORDER BY id",
    )?;
    let ids = stmt
        .query_map(params![w.subject, w.predicate, w.source], |r| {
            r.get::<_, i64>(0)
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let wanted: std::collections::BTreeSet<&Scope> = candidates.iter().collect();
    for id in ids {
        let Some(item) = super::rows::pending_item(conn, id)? else {
            continue;
        };
        let same_candidates = item
            .candidates
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            == wanted;
        if same_candidates && same_value(&item.value, &w.value) {
            return Ok(Some(item));
        }
    }
    Ok(None)
}

/// Counts of what an `apply` run came to.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ApplySummary {
    pub lines: u64,
    pub inserted: u64,
    pub confirmed: u64,
    pub superseded: u64,
    pub stale: u64,
    pub pending: u64,
    pub rejected: u64,
    pub errors: u64,
}

impl ApplySummary {
    pub(crate) fn count(&mut self, kind: OutcomeKind) {
        match kind {
            OutcomeKind::Inserted => self.inserted += 1,
            OutcomeKind::Confirmed => self.confirmed += 1,
            OutcomeKind::Superseded => self.superseded += 1,
            OutcomeKind::Stale => self.stale += 1,
            OutcomeKind::Pending => self.pending += 1,
            OutcomeKind::Rejected => self.rejected += 1,
            OutcomeKind::Removed => {}
            OutcomeKind::Error => self.errors += 1,
        }
    }
}

/// At most this many lines, and this many bytes of input, per transaction in `apply` (a
/// failing line still changes nothing: see `apply_batch`). Big batches matter: every commit
/// writes each index page the batch touched to the WAL again, and the indexes are touched all
/// over. 100k lines hold the write lock for about a second.
const APPLY_BATCH: usize = 100_000;
const APPLY_BATCH_BYTES: usize = 64 << 20;

impl Store {
    /// One write, one transaction.
    pub fn write(&mut self, req: &WriteRequest) -> Result<WriteOutcome> {
        self.write_prepared(req, validate)
    }

    /// One write that corrects the current value's spelling (README, `write --respell`).
    pub fn respell(&mut self, req: &WriteRequest) -> Result<WriteOutcome> {
        self.write_prepared(req, crate::store::prepared::validate_respelled)
    }

    fn write_prepared(
        &mut self,
        req: &WriteRequest,
        validate: fn(WriteRequest) -> Result<PreparedWrite, crate::model::InvalidRequest>,
    ) -> Result<WriteOutcome> {
        self.in_write_tx(|tx, ctx, st| {
            st.keeps_sources = true;
            let prepared = canonicalized(tx, validate(req.clone())?, st)?;
            let out = write_in_tx(tx, &prepared, &ctx.now, st)?;
            assert_written(tx, ctx, &prepared)?;
            Ok(out)
        })
    }

    /// Streams JSON Lines write requests, calling `emit` with the outcomes of each committed
    /// batch: one per non-blank line, in order. A bad line is an `error` outcome and changes
    /// nothing; the others land.
    ///
    /// A reader thread reads, parses and validates the lines ahead of the writer (see
    /// [`Intake`]); if the writer fails, the reader is left to end with its input. The input
    /// is taken for a stream, which may pause ([`Store::apply_from`] for a file).
    pub fn apply<R: Read + Send + 'static>(
        &mut self,
        input: R,
        emit: impl FnMut(&[WriteOutcome]) -> Result<()>,
    ) -> Result<ApplySummary> {
        self.apply_from(input, InputKind::Stream, emit)
    }

    /// [`Store::apply`] from input of a known kind: a file fills every batch.
    pub fn apply_from<R: Read + Send + 'static>(
        &mut self,
        input: R,
        kind: InputKind,
        mut emit: impl FnMut(&[WriteOutcome]) -> Result<()>,
    ) -> Result<ApplySummary> {
        let mut intake = Intake::start(input, kind)?;
        // A finished batch — its parsed lines and outcomes, half a million allocations for
        // 100k lines — is freed on a thread of its own while the writer goes on. That thread
        // is not waited for: it ends once it has freed the last batch.
        let (free_tx, free_rx) = std::sync::mpsc::channel::<FinishedBatch>();
        std::thread::Builder::new()
            .name("memscope-apply-free".into())
            .spawn(move || free_rx.into_iter().for_each(drop))?;
        let mut summary = ApplySummary::default();
        // Input is awaited outside any transaction: an idle writer holds no lock.
        while let Some(mut batch) = intake.next_batch(APPLY_BATCH, APPLY_BATCH_BYTES)? {
            let outcomes = self.apply_batch(&mut batch, &mut intake)?;
            for out in &outcomes {
                summary.lines += 1;
                summary.count(out.outcome);
            }
            emit(&outcomes)?;
            // Should the thread be gone, the batch is freed here instead.
            let _ = free_tx.send((batch.lines, outcomes));
        }
        Ok(summary)
    }

    /// One transaction for a batch of lines, taking in more while input keeps flowing (so
    /// parsing on the reader thread overlaps writing here). Lines run without savepoints;
    /// when one fails half-way, the batch is rolled back and run again with a savepoint per
    /// line, so the failing line changes nothing and the others still land.
    fn apply_batch(&mut self, batch: &mut Batch, intake: &mut Intake) -> Result<Vec<WriteOutcome>> {
        let mut savepoints = false;
        loop {
            let result = self.in_write_tx(|tx, ctx, st| {
                st.batch = true;
                st.keeps_sources = true;
                let mut outcomes = Vec::with_capacity(batch.lines.len());
                loop {
                    for (line_no, parsed) in &batch.lines[outcomes.len()..] {
                        let mut out = match parsed {
                            ParsedLine::Invalid(e) => {
                                let mut out = WriteOutcome::error(None, e.message.clone());
                                out.column = e.column;
                                out
                            }
                            ParsedLine::Ready(w) => match run_line(tx, w, ctx, st, savepoints) {
                                Ok(out) => out,
                                // SQLite may have rolled the whole transaction back on its
                                // own (out of memory, interrupted): then no later line may run.
                                Err(e) if is_fatal(&e) || tx.is_autocommit() => return Err(e),
                                Err(e) if savepoints => WriteOutcome::error(None, format!("{e:#}")),
                                Err(_) => return Err(RetryWithSavepoints.into()),
                            },
                        };
                        out.line = Some(*line_no);
                        outcomes.push(out);
                    }
                    if !batch.wants_more() {
                        return Ok(outcomes);
                    }
                    // Never wait long with the write lock held: input that pauses (an
                    // interactive writer, a line cut in two) or trickles in gets what came so
                    // far committed.
                    batch.wait_for_more(intake)?;
                }
            });
            match result {
                Err(e) if e.is::<RetryWithSavepoints>() => savepoints = true,
                other => return other,
            }
        }
    }

    /// Resolves an open pending item by writing it to `scope` through the write path. The
    /// item records what happened (a resolution may itself be `stale` or `rejected`). A scope
    /// outside the item's candidates is refused (an [`InvalidRequest`] naming them) unless
    /// `outside_candidates` says a human chose it knowingly.
    pub fn resolve_pending(
        &mut self,
        pending_id: i64,
        scope: &Scope,
        outside_candidates: bool,
    ) -> Result<WriteOutcome> {
        self.in_write_tx(|tx, ctx, st| {
            let item = super::rows::pending_item(tx, pending_id)?.ok_or_else(|| {
                anyhow!("there is no pending item #{pending_id}: list them with `memscope pending`")
            })?;
            if let Some(closed) = item.closed_sentence() {
                bail!(closed);
            }
            crate::store::prepared::new_place_within_id_limit(&item.subject, &item.predicate, scope)?;
            // A place nobody wrote yet gets its first spelling here.
            let scope = &st.spellings.scope(tx, scope)?;
            let among = crate::store::prepared::resolution_among(&item, scope, outside_candidates)?;
            // An alias added while the item waited maps it to the canonical predicate now.
            let id = Identity {
                subject: item.subject.clone(),
                predicate: canonical_predicate(tx, &item.predicate)?,
                scope: scope.clone(),
            };
            let causal_seq = resolution_seq(&item);
            let prepared = PreparedWrite::stored(
                &id,
                item.value.clone(),
                item.source.clone(),
                item.raw.clone(),
                causal_seq,
            )?;
            let mut out = write_in_tx(tx, &prepared, &ctx.now, st)?;
            out.pending_id = Some(pending_id);
            if crate::store::prepared::stays_open(&mut out, pending_id, scope) {
                assert_written(tx, ctx, &prepared)?;
                return Ok(out);
            }
            tx.execute(
                "UPDATE pending SET status = 'resolved', resolved_at = ?2, resolved_scope = ?3, resolution = ?4 WHERE id = ?1",
                params![pending_id, ctx.now, scope.to_string(), out.outcome.as_str()],
            )?;
            Event::new(EventKind::PendingResolved, &id).version(out.version).provenance(Some(&item.source), Some(item.causal_seq)).detail(&json!({ "pending_id": pending_id, "outcome": out.outcome.as_str(), "among_candidates": among })).clock(st.seqs.stamp()).log(tx, &ctx.now)?;
            assert_written(tx, ctx, &prepared)?;
            Ok(out)
        })
    }

    /// What writing `value` to `id` would come to now, decided exactly as the write path
    /// decides (README, "The write rules"), without writing: the preview every front end
    /// shows. Without a `causal_seq` the write would take the clock's next number.
    pub fn preview_write(
        &self,
        id: &Identity,
        value: &Value,
        causal_seq: Option<i64>,
    ) -> Result<WriteDecision> {
        let id = super::spellings::find_identity(
            &self.conn,
            &Identity {
                predicate: canonical_predicate(&self.conn, &id.predicate)?,
                ..id.clone()
            },
        )?;
        let (probe, _) = probe_identity(&self.conn, &id, &id.scope.to_string())?;
        let seq = match causal_seq {
            Some(s) => s,
            None => SeqBatch::default().current(&self.conn)? + 1,
        };
        Ok(decide_write(&probe, value, seq))
    }

    /// Each candidate scope of pending item `pending_id` with what resolving it there would
    /// do now — the decision [`Store::resolve_pending`] then takes.
    pub fn preview_pending(&self, pending_id: i64) -> Result<Vec<(Scope, WriteDecision)>> {
        let item = super::rows::pending_item(&self.conn, pending_id)?.ok_or_else(|| {
            anyhow!("there is no pending item #{pending_id}: list them with `memscope pending`")
        })?;
        let seq = resolution_seq(&item);
        item.candidates
            .iter()
            .map(|scope| {
                let id = Identity {
                    subject: item.subject.clone(),
                    predicate: item.predicate.clone(),
                    scope: scope.clone(),
                };
                Ok((scope.clone(), self.preview_write(&id, &item.value, seq)?))
            })
            .collect()
    }

    /// Rejects an open pending item: nothing is written to memory.
    pub fn reject_pending(&mut self, pending_id: i64) -> Result<PendingItem> {
        self.in_write_tx(|tx, ctx, _| {
            let mut item = super::rows::pending_item(tx, pending_id)?.ok_or_else(|| {
                anyhow!("there is no pending item #{pending_id}: list them with `memscope pending`")
            })?;
            if item.status != "open" {
                bail!("pending item #{pending_id} is already {}: nothing to do", item.status);
            }
            tx.execute(
                "UPDATE pending SET status = 'rejected', resolved_at = ?2, resolution = 'rejected by a human' WHERE id = ?1",
                params![pending_id, ctx.now],
            )?;
            item.status = "rejected".into();
            Ok(item)
        })
    }
}

/// What `apply` frees after a batch: its parsed lines and their outcomes.
type FinishedBatch = (Vec<(u64, ParsedLine)>, Vec<WriteOutcome>);

/// One validated line inside the batch transaction; a failure during the write is returned
/// as `Err`.
fn run_line(
    conn: &Connection,
    w: &PreparedWrite,
    ctx: &WriteCtx,
    st: &mut TxState,
    savepoint: bool,
) -> Result<WriteOutcome> {
    // Refused before it writes anything, its spellings included: the line's error at once,
    // not a second pass of its batch with savepoints (found by review).
    if let Some(refused) = brought_refusal(conn, w, st)? {
        return Ok(WriteOutcome::error(None, refused.0));
    }
    let mut w = std::borrow::Cow::Borrowed(w);
    st.canonicalize(conn, &mut w)?;
    if savepoint {
        conn.prepare_cached("SAVEPOINT apply_line")?.execute([])?;
    }
    let result = write_judged(conn, &w, &ctx.now, st)
        .and_then(|out| assert_written(conn, ctx, &w).map(|()| out));
    if savepoint {
        if result.is_err() {
            conn.execute_batch("ROLLBACK TO apply_line")?;
            // What the line wrote is undone, and the sources the guard keeps may have seen it.
            st.sources.clear();
        }
        conn.prepare_cached("RELEASE apply_line")?.execute([])?;
    }
    result
}

/// Disk-full, I/O and memory failures end the whole batch; anything else is the line's own
/// fault.
fn is_fatal(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<rusqlite::Error>(),
        Some(rusqlite::Error::SqliteFailure(f, _))
            if matches!(f.code, rusqlite::ErrorCode::DiskFull | rusqlite::ErrorCode::SystemIoFailure
                | rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                | rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::DatabaseCorrupt
                | rusqlite::ErrorCode::OutOfMemory | rusqlite::ErrorCode::OperationInterrupted)
    )
}
