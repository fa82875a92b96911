//! The write path on PostgreSQL (issue 17): a single write in four round trips (BEGIN, one
//! look, one write, COMMIT), and `apply` pipelined by batch.
//!
//! A single write asks `memscope_write_look` (schema v4) for everything it must know at once —
//! the predicate through the aliases, the stored spellings, the scope guard's mode and the
//! identity's probe under its advisory lock — then the core decides ([`decide_write`]) and one
//! statement of the write's own ([`flush_one`]: an update or an insert of the record with its
//! history row, or the history row alone) writes it; a metric, when the write counts one.
//!
//! `apply` takes a batch's exact writes as one *run* — those the scope guard does not judge, and
//! the global ones without a context, which it judges on their words alone (no lookup: applied,
//! or applied with the suspect's mark on their `set` event) — the spellings
//! and aliases of the whole run in two statements, every identity locked (in lock-key order)
//! and probed in one (`memscope_probe_many`), the run's causal numbers handed out in line order
//! in one (`memscope_clock_take`), each line decided by the core in order against a [`Slot`]
//! overlay of what the run's earlier lines did, and the run written by one multi-row statement.
//! A line that needs the guard's lookups (a global write with a context, which it may queue) or a
//! human (ambiguous) ends the run: the run is written, then that line takes the single write's
//! path, so it sees everything before it. Any failure of a line
//! throws the batch back to `apply`, which runs it again line by line with savepoints.

use super::{bump_metric, parse_value, respelled, spelled_scope, Param, Tx};
use crate::model::{
    same_value, Identity, InvalidRequest, LineError, OutcomeKind, OutcomeScope, Scope, ScopeChoice,
    WriteOutcome, MAX_BROUGHT_SEQ,
};
use crate::spelling::fold;
use crate::store::decide::{decide_spelled, Held, Probe, WriteDecision};
use crate::store::events::EventKind;
use crate::store::guard::{judge, judge_words, Cues, Evidence, GuardMode, Places, Verdict, Words};
use crate::store::intake::ParsedLine;
use crate::store::prepared::{base_outcome, PreparedWrite};
use anyhow::Result;
use postgres::Row;
use serde_json::{json, Value};
use std::collections::HashMap;

/// An identity as stored: subject, predicate, scope text.
type Key = (String, String, String);

/// What a run has done to one identity so far: what its next write is decided against, and what
/// the run's statement writes to its record.
struct Slot {
    probe: Probe,
    /// The record existed before the run (an UPDATE) or not (an INSERT).
    existed: bool,
    /// The last value the run stored (inserted or superseded).
    set: Option<SetRow>,
    /// Confirmations since `set` (or since the run began).
    confirms: i64,
    confirmed_source: Option<String>,
    confirmed_seq: Option<i64>,
}

struct SetRow {
    value: String,
    version: i64,
    source: String,
    raw: Option<String>,
    causal_seq: i64,
}

impl Slot {
    fn new(probe: Probe) -> Slot {
        Slot {
            existed: probe.current.is_some(),
            probe,
            set: None,
            confirms: 0,
            confirmed_source: None,
            confirmed_seq: None,
        }
    }
}

/// One history row a run logs.
struct Event {
    kind: EventKind,
    key: Key,
    version: Option<i64>,
    content: bool,
    source: String,
    raw: Option<String>,
    value: String,
    causal_seq: Option<i64>,
    detail: Option<String>,
    clock: i64,
}

/// The history rows and metrics of a run, in line order.
#[derive(Default)]
struct Writes {
    events: Vec<Event>,
    stale: i64,
    rejected: i64,
}

/// The probe's columns of a row from `at` on: tombstone, current version, value and causal
/// number, last version, the write's causal number, the clock now.
fn probe_from_row(r: &Row, at: usize, scope_text: &str) -> Result<(Probe, i64, i64)> {
    let current = match (
        r.get::<_, Option<i64>>(at + 1),
        r.get::<_, Option<String>>(at + 2),
        r.get::<_, Option<i64>>(at + 3),
    ) {
        (Some(version), Some(text), Some(causal_seq)) => Some(Held {
            version,
            value: parse_value(&text, scope_text)?,
            causal_seq,
        }),
        _ => None,
    };
    let probe = Probe {
        tombstone: r.get(at),
        current,
        last_version: r.get::<_, Option<i64>>(at + 4).unwrap_or(0),
    };
    Ok((
        probe,
        crate::model::within_clock(r.get::<_, Option<i64>>(at + 5).unwrap_or(0))?,
        r.get::<_, Option<i64>>(at + 6).unwrap_or(0),
    ))
}

/// The identity of a stored key (subject, predicate, scope as stored).
pub(in crate::store::postgres) fn identity_of(
    subject: &str,
    predicate: &str,
    scope: &str,
) -> Result<Identity> {
    Ok(Identity {
        subject: subject.to_string(),
        predicate: predicate.to_string(),
        scope: Scope::parse(scope).map_err(|e| {
            anyhow::anyhow!("a stored scope is invalid ({e}): run `memscope check`")
        })?,
    })
}

/// One identity's probe as the write path reads it (`memscope_probe_many`), for a preview that
/// asks the core's `decide_write` what a write would do.
pub(in crate::store::postgres) fn write_probe(t: &mut Tx<'_>, id: &Identity) -> Result<Probe> {
    let scope = id.scope.to_string();
    let r = t.one(
        "SELECT tombstone, cur_version, cur_value, cur_seq, last_version, NULL::bigint, NULL::bigint
         FROM memscope_probe_many(ARRAY[$1::text], ARRAY[$2::text], ARRAY[$3::text])",
        &[&id.subject, &id.predicate, &scope],
    )?;
    Ok(probe_from_row(&r, 0, &scope)?.0)
}

/// Has the core decide one exact write against its identity's slot, and records what the
/// decision writes. `number` is the write's causal number — for a tombstoned identity the
/// clock's value now, which its `rejected` row records; `clock` the causal clock as it stands
/// once the write took its number (docs/SCHEMA.md, `history.clock`: a write with an older
/// number of its own leaves the clock where it was), which its history row records.
#[allow(clippy::too_many_arguments)]
fn decide_into(
    slot: &mut Slot,
    writes: &mut Writes,
    key: &Key,
    id: &Identity,
    w: &PreparedWrite,
    number: i64,
    clock: i64,
    suspect: Option<&Value>,
) -> WriteOutcome {
    let decision = decide_spelled(&slot.probe, &w.value, number, w.spelling);
    let mut out = base_outcome(decision.kind(), id);
    out.reason = decision.reason();
    (out.version, out.value, out.previous) = decision.reported(&w.value);
    let mut event = Event {
        kind: EventKind::Set,
        key: key.clone(),
        version: None,
        content: true,
        source: w.source.clone(),
        raw: w.raw.clone(),
        value: w.value_text.clone(),
        causal_seq: Some(number),
        detail: None,
        clock,
    };
    match &decision {
        WriteDecision::Reject { tombstone_version } => {
            writes.rejected += 1;
            event.kind = EventKind::Rejected;
            event.content = false;
            event.causal_seq = w.causal_seq;
            event.detail = Some(
                json!({ "reason": "tombstoned", "tombstone_version": tombstone_version })
                    .to_string(),
            );
        }
        WriteDecision::Insert { version } | WriteDecision::Supersede { version, .. } => {
            slot.set = Some(SetRow {
                value: w.value_text.clone(),
                version: *version,
                source: w.source.clone(),
                raw: w.raw.clone(),
                causal_seq: number,
            });
            slot.confirms = 0;
            slot.confirmed_source = None;
            slot.confirmed_seq = None;
            event.version = Some(*version);
            event.detail = suspect.map(Value::to_string);
        }
        WriteDecision::Confirm { version, .. } => {
            slot.confirms += 1;
            slot.confirmed_source = Some(w.source.clone());
            slot.confirmed_seq = Some(slot.confirmed_seq.map_or(number, |s| s.max(number)));
            event.kind = EventKind::Confirmed;
            event.version = Some(*version);
        }
        WriteDecision::Stale {
            version,
            current_seq,
            ..
        } => {
            writes.stale += 1;
            event.kind = EventKind::Stale;
            event.detail = Some(
                json!({ "current_version": version, "current_causal_seq": current_seq })
                    .to_string(),
            );
        }
    }
    if decision.kind() != OutcomeKind::Rejected {
        out.causal_seq = Some(number);
    }
    crate::store::suspects::tell_marked(&mut out, suspect);
    slot.probe.after(&decision, &w.value, number);
    writes.events.push(event);
    out
}

/// Writes a run in one statement: the new records, the changed ones, the history rows in line
/// order, the metrics. [`flush_one`] restates the record's columns for a single write; the two
/// must stay in step (tests/store/postgres_apply.rs compares `apply` with line-by-line writes).
fn flush(t: &mut Tx<'_>, slots: &[(Key, Slot)], writes: &Writes) -> Result<()> {
    if writes.events.is_empty() {
        return Ok(());
    }
    let mut m_subject = Vec::new();
    let mut m_predicate = Vec::new();
    let mut m_scope = Vec::new();
    let mut m_value: Vec<Option<&str>> = Vec::new();
    let mut m_version: Vec<Option<i64>> = Vec::new();
    let mut m_source: Vec<Option<&str>> = Vec::new();
    let mut m_raw: Vec<Option<&str>> = Vec::new();
    let mut m_seq: Vec<Option<i64>> = Vec::new();
    let mut m_confirms = Vec::new();
    let mut m_confirmed_source: Vec<Option<&str>> = Vec::new();
    let mut m_confirmed_seq: Vec<Option<i64>> = Vec::new();
    let mut m_new = Vec::new();
    for ((s, p, c), slot) in slots {
        if slot.set.is_none() && slot.confirms == 0 {
            continue;
        }
        m_subject.push(s.as_str());
        m_predicate.push(p.as_str());
        m_scope.push(c.as_str());
        m_value.push(slot.set.as_ref().map(|r| r.value.as_str()));
        m_version.push(slot.set.as_ref().map(|r| r.version));
        m_source.push(slot.set.as_ref().map(|r| r.source.as_str()));
        m_raw.push(slot.set.as_ref().and_then(|r| r.raw.as_deref()));
        m_seq.push(slot.set.as_ref().map(|r| r.causal_seq));
        m_confirms.push(slot.confirms);
        m_confirmed_source.push(slot.confirmed_source.as_deref());
        m_confirmed_seq.push(slot.confirmed_seq);
        m_new.push(!slot.existed);
    }
    let ev = &writes.events;
    let e_kind: Vec<&str> = ev.iter().map(|e| e.kind.as_str()).collect();
    let e_subject: Vec<&str> = ev.iter().map(|e| e.key.0.as_str()).collect();
    let e_predicate: Vec<&str> = ev.iter().map(|e| e.key.1.as_str()).collect();
    let e_scope: Vec<&str> = ev.iter().map(|e| e.key.2.as_str()).collect();
    let e_version: Vec<Option<i64>> = ev.iter().map(|e| e.version).collect();
    let e_value: Vec<Option<&str>> = ev
        .iter()
        .map(|e| e.content.then_some(e.value.as_str()))
        .collect();
    let e_raw: Vec<Option<&str>> = ev
        .iter()
        .map(|e| e.raw.as_deref().filter(|_| e.content))
        .collect();
    let e_source: Vec<&str> = ev.iter().map(|e| e.source.as_str()).collect();
    let e_seq: Vec<Option<i64>> = ev.iter().map(|e| e.causal_seq).collect();
    let e_detail: Vec<Option<&str>> = ev.iter().map(|e| e.detail.as_deref()).collect();
    let e_clock: Vec<i64> = ev.iter().map(|e| e.clock).collect();
    let mut metric_names = Vec::new();
    let mut metric_counts = Vec::new();
    for (name, count) in [
        ("stale_writes", writes.stale),
        ("resurrection_blocked", writes.rejected),
    ] {
        if count > 0 {
            metric_names.push(name);
            metric_counts.push(count);
        }
    }
    let counts = t.one(
        "WITH u AS (
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[],
                                  $6::text[], $7::text[], $8::int8[], $9::int8[], $10::text[],
                                  $11::int8[], $12::bool[])
                 AS u(s, p, c, v, ver, src, raw, cs, n, csrc, cseq, new)),
         now AS MATERIALIZED (SELECT memscope_now() AS at),
         ins AS (
             INSERT INTO memories (subject, predicate, scope, value, version, source, raw, causal_seq,
                                   created_at, updated_at, confirmed_at, confirm_count,
                                   confirmed_source, confirmed_seq)
             SELECT s, p, c, v, ver, src, raw, cs, now.at, now.at,
                    CASE WHEN n > 0 THEN now.at END, n, csrc, cseq
             FROM u, now WHERE new
             RETURNING 1),
         upd AS (
             UPDATE memories m SET
                 value = coalesce(u.v, m.value),
                 version = coalesce(u.ver, m.version),
                 source = coalesce(u.src, m.source),
                 raw = CASE WHEN u.ver IS NULL THEN m.raw ELSE u.raw END,
                 causal_seq = coalesce(u.cs, m.causal_seq),
                 updated_at = CASE WHEN u.ver IS NULL THEN m.updated_at ELSE now.at END,
                 confirmed_at = CASE WHEN u.n > 0 THEN now.at
                                     WHEN u.ver IS NULL THEN m.confirmed_at END,
                 confirm_count = CASE WHEN u.ver IS NULL THEN m.confirm_count ELSE 0 END + u.n,
                 confirmed_source = CASE WHEN u.n > 0 THEN u.csrc
                                         WHEN u.ver IS NULL THEN m.confirmed_source END,
                 confirmed_seq = CASE WHEN u.ver IS NULL THEN greatest(m.confirmed_seq, u.cseq)
                                      ELSE u.cseq END
             FROM u, now
             WHERE NOT u.new AND m.subject = u.s AND m.predicate = u.p AND m.scope = u.c
             RETURNING 1),
         met AS (
             INSERT INTO metrics (name, value)
             SELECT * FROM unnest($13::text[], $14::int8[])
             ON CONFLICT (name) DO UPDATE SET value = metrics.value + EXCLUDED.value
             RETURNING 1),
         h AS (
             INSERT INTO history (event, subject, predicate, scope, version, value, raw, source,
                                  causal_seq, at, detail, clock)
             SELECT ev, s, p, c, ver, v, raw, src, cs, now.at, detail, clock
             FROM unnest($15::text[], $16::text[], $17::text[], $18::text[], $19::int8[],
                         $20::text[], $21::text[], $22::text[], $23::int8[], $24::text[], $25::int8[])
                 WITH ORDINALITY AS e(ev, s, p, c, ver, v, raw, src, cs, detail, clock, ord), now
             ORDER BY ord
             RETURNING 1)
         SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM upd), (SELECT count(*) FROM h)",
        &[
            &m_subject,
            &m_predicate,
            &m_scope,
            &m_value,
            &m_version,
            &m_source,
            &m_raw,
            &m_seq,
            &m_confirms,
            &m_confirmed_source,
            &m_confirmed_seq,
            &m_new,
            &metric_names,
            &metric_counts,
            &e_kind,
            &e_subject,
            &e_predicate,
            &e_scope,
            &e_version,
            &e_value,
            &e_raw,
            &e_source,
            &e_seq,
            &e_detail,
            &e_clock,
        ],
    )?;
    // Each record and event the statement was given is stored, each existing record updated
    // once: a trigger of another client's that turned a row into nothing (`RETURN NULL`) would
    // otherwise leave lines told `superseded` with their records unchanged (found by review).
    let inserted = m_new.iter().filter(|n| **n).count() as i64;
    let wanted = (inserted, m_new.len() as i64 - inserted, ev.len() as i64);
    let stored = (counts.get(0), counts.get(1), counts.get(2));
    if stored != wanted {
        return Err(not_stored(&format!(
            "this batch ({} of {} new records, {} of {} updates, {} of {} history events)",
            stored.0, wanted.0, stored.1, wanted.1, stored.2, wanted.2
        )));
    }
    Ok(())
}

/// A single write's record and history row: the statements [`flush`] would run for a run of
/// one line, with scalar parameters instead of arrays, and only the parts this write has (a
/// run's statement carries every part, and an empty one still costs its setup and its
/// statement triggers — about half of a single write's time in the database).
fn flush_one(t: &mut Tx<'_>, key: &Key, slot: &Slot, writes: &Writes) -> Result<()> {
    let [e] = writes.events.as_slice() else {
        anyhow::bail!(
            "memscope decided a single write into {} history rows instead of one; nothing was written",
            writes.events.len()
        );
    };
    let (s, p, c) = key;
    let e_value = e.content.then_some(e.value.as_str());
    let e_raw = e.raw.as_deref().filter(|_| e.content);
    let kind = e.kind.as_str();
    let history: [&dyn Param; 11] = [
        &kind,
        s,
        p,
        c,
        &e.version,
        &e_value,
        &e_raw,
        &e.source,
        &e.causal_seq,
        &e.detail,
        &e.clock,
    ];
    if slot.set.is_none() && slot.confirms == 0 {
        // A stale or refused write changes no record, but was decided against one: logged only
        // while the identity holds at most one.
        let logged = t.exec(
            "INSERT INTO history (event, subject, predicate, scope, version, value, raw, source,
                                  causal_seq, at, detail, clock)
             SELECT $1::text, $2::text, $3::text, $4::text, $5::int8, $6::text, $7::text,
                    $8::text, $9::int8, memscope_now(), $10::text, $11::int8
             WHERE (SELECT count(*) FROM memories m
                    WHERE m.subject = $2::text AND m.predicate = $3::text AND m.scope = $4::text) < 2",
            &history,
        )?;
        one_record(t, logged, key)?;
    } else {
        let set = slot.set.as_ref();
        let value = set.map(|r| r.value.as_str());
        let version = set.map(|r| r.version);
        let source = set.map(|r| r.source.as_str());
        let raw = set.and_then(|r| r.raw.as_deref());
        let seq = set.map(|r| r.causal_seq);
        let confirmed_source = slot.confirmed_source.as_deref();
        let mut params: Vec<&dyn Param> = history.to_vec();
        params.extend_from_slice(&[
            &value,
            &version,
            &source,
            &raw,
            &seq,
            &slot.confirms,
            &confirmed_source,
            &slot.confirmed_seq,
        ]);
        // The record and its history row take one time: `memscope_now()` is the clock as it
        // reads when called, and a statement that called it per column could date the record
        // and its event a millisecond apart.
        let sql = if slot.existed {
            "WITH now AS MATERIALIZED (SELECT memscope_now() AS at),
             upd AS (
                 UPDATE memories m SET
                     value = coalesce($12::text, m.value),
                     version = coalesce($13::int8, m.version),
                     source = coalesce($14::text, m.source),
                     raw = CASE WHEN $13::int8 IS NULL THEN m.raw ELSE $15::text END,
                     causal_seq = coalesce($16::int8, m.causal_seq),
                     updated_at = CASE WHEN $13::int8 IS NULL THEN m.updated_at ELSE now.at END,
                     confirmed_at = CASE WHEN $17::int8 > 0 THEN now.at
                                         WHEN $13::int8 IS NULL THEN m.confirmed_at END,
                     confirm_count = CASE WHEN $13::int8 IS NULL THEN m.confirm_count ELSE 0 END
                                     + $17::int8,
                     confirmed_source = CASE WHEN $17::int8 > 0 THEN $18::text
                                             WHEN $13::int8 IS NULL THEN m.confirmed_source END,
                     confirmed_seq = CASE WHEN $13::int8 IS NULL
                                          THEN greatest(m.confirmed_seq, $19::int8)
                                          ELSE $19::int8 END
                 FROM now
                 WHERE m.subject = $2::text AND m.predicate = $3::text AND m.scope = $4::text
                 RETURNING 1)
             INSERT INTO history (event, subject, predicate, scope, version, value, raw, source,
                                  causal_seq, at, detail, clock)
             SELECT $1::text, $2::text, $3::text, $4::text, $5::int8, $6::text, $7::text,
                    $8::text, $9::int8, now.at, $10::text, $11::int8
             FROM now
             WHERE (SELECT count(*) FROM upd) = 1"
        } else {
            "WITH now AS MATERIALIZED (SELECT memscope_now() AS at),
             ins AS (
                 INSERT INTO memories (subject, predicate, scope, value, version, source, raw,
                                       causal_seq, created_at, updated_at, confirmed_at,
                                       confirm_count, confirmed_source, confirmed_seq)
                 SELECT $2::text, $3::text, $4::text, $12::text, $13::int8, $14::text,
                        $15::text, $16::int8, now.at, now.at,
                        CASE WHEN $17::int8 > 0 THEN now.at END, $17::int8, $18::text,
                        $19::int8
                 FROM now
                 RETURNING 1)
             INSERT INTO history (event, subject, predicate, scope, version, value, raw, source,
                                  causal_seq, at, detail, clock)
             SELECT $1::text, $2::text, $3::text, $4::text, $5::int8, $6::text, $7::text,
                    $8::text, $9::int8, now.at, $10::text, $11::int8
             FROM now
             WHERE (SELECT count(*) FROM ins) = 1"
        };
        // The statement logs only when it stored or changed exactly one record; two rewritten
        // as one, or none, is refused, rolled back whole.
        let logged = t.exec(sql, &params)?;
        one_record(t, logged, key)?;
    }
    for (name, count) in [
        ("stale_writes", writes.stale),
        ("resurrection_blocked", writes.rejected),
    ] {
        if count > 0 {
            bump_metric(t, name, count)?;
        }
    }
    Ok(())
}

/// Refuses a single write whose statement logged no event: its identity holds two current
/// records (a client dropped the guard that keeps it unique), or another client's trigger
/// turned its row into nothing.
fn one_record(t: &mut Tx<'_>, logged: u64, (s, p, c): &Key) -> Result<()> {
    if logged == 1 {
        return Ok(());
    }
    let id = identity_of(s, p, c)?;
    let records: i64 = t
        .one(
            "SELECT count(*) FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3",
            &[s, p, c],
        )?
        .get(0);
    if records > 1 {
        return Err(crate::store::check::two_rows_of_one_identity(
            "memories", &id,
        ));
    }
    Err(not_stored(&format!("the write of {id}")))
}

/// The refusal of a write the database did not store as memscope wrote it (`what`: the write
/// or the batch, with its counts): the transaction rolls back whole.
fn not_stored(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "the database did not store {what} as memscope wrote it: a trigger, rule or row policy that is not memscope's changed the statement, so nothing of it was written — run `memscope check` and remove what a raw SQL client added"
    )
}

/// Whether the scope guard judges an exact write (`mode`: as far as it is known).
fn guarded(w: &PreparedWrite, mode: Option<GuardMode>) -> bool {
    matches!(w.choice, ScopeChoice::Exact(Scope::Global))
        && !w.curated
        && (w.context.is_some() || w.raw.is_some())
        && mode != Some(GuardMode::Off)
}

/// Whether the guard may queue a write, so it is probed only once the guard let it through: a
/// judged write with a context. Without one, its words alone decide and it is never queued.
fn may_queue(w: &PreparedWrite) -> bool {
    guarded(w, None) && w.context.is_some()
}

/// The suspect's mark of a version the guard let through, for its `set` event: the evidence
/// and the places it points at, as stored where memscope knows them (looked up only).
fn mark(t: &mut Tx<'_>, evidence: Vec<String>, places: &[Scope]) -> Result<Value> {
    let mut spelled = Vec::with_capacity(places.len());
    for p in places {
        spelled.push(spelled_scope(t, p, false)?);
    }
    Ok(crate::store::suspects::marked_detail(evidence, &spelled))
}

/// Where a line of `apply` is written.
enum Route {
    /// In the run, its `set` event keeping this suspect's mark, if any.
    Run(Option<Value>),
    /// By the single write's path, after the run before it.
    Alone,
}

/// The run takes every exact write but one the guard may queue: a global write without a
/// context is judged here, on its words alone, as [`write_in_tx`] judges it — applied, or
/// applied and marked. (It took the single write's path until 2026-12-03: three round trips a
/// line, and a row updated again and again in one transaction when an identity repeats.)
fn route(w: &PreparedWrite, mode: GuardMode) -> Route {
    if !matches!(w.choice, ScopeChoice::Exact(_)) || may_queue(w) {
        return Route::Alone;
    }
    if !guarded(w, Some(mode)) {
        return Route::Run(None);
    }
    match judge_words(w.raw.as_deref(), w.words.as_ref(), mode) {
        Verdict::Apply => Route::Run(None),
        // Its words name no place it knows (it knows none), so there is none to look up.
        Verdict::Suspect { evidence, places } if places.is_empty() => {
            Route::Run(Some(crate::store::suspects::marked_detail(evidence, &[])))
        }
        _ => Route::Alone,
    }
}

/// The refusal of a brought number past 2^53 − 2^32 that the clock has not reached
/// (`brought_within_clock`), asked before the write looks at anything: the clock only rises,
/// so a number found within it is still within it when the look observes it. Only such a
/// number costs the clock's read.
fn brought_refusal(t: &mut Tx<'_>, seen: Option<i64>) -> Result<Option<InvalidRequest>> {
    match seen {
        Some(s) if s > MAX_BROUGHT_SEQ => {
            Ok(crate::model::brought_within_clock(s, super::clock_now(t)?).err())
        }
        _ => Ok(None),
    }
}

/// The clock's own refusal of a brought number (schema 12's `memscope_clock_observe`), said as
/// the write path says it. The write judged the number against the clock before its look
/// ([`brought_refusal`]); the clock refuses it only when it went down in between — the owner's
/// `setval`, a refused import putting it back — which the write cannot see coming.
pub(in crate::store::postgres) fn clock_refusal(
    e: anyhow::Error,
    seen: Option<i64>,
) -> anyhow::Error {
    let refused = e
        .downcast_ref::<postgres::Error>()
        .and_then(postgres::Error::as_db_error)
        .is_some_and(|d| {
            *d.code() == postgres::error::SqlState::NUMERIC_VALUE_OUT_OF_RANGE
                && d.message().starts_with("memscope: causal number")
        });
    match (refused, seen) {
        (true, Some(s)) => crate::model::brought_ahead(s, None).into(),
        _ => e,
    }
}

/// Decides and applies one write inside an open transaction (README, the write rules: the
/// tombstone, the scope guard, no record → same value → causal order → supersede).
pub(in crate::store::postgres) fn write_in_tx(
    t: &mut Tx<'_>,
    w: &PreparedWrite,
) -> Result<WriteOutcome> {
    if let Some(refused) = brought_refusal(t, w.causal_seq)? {
        return Err(refused.into());
    }
    write_judged(t, w)
}

/// [`write_in_tx`] once its brought number was judged ([`brought_refusal`]).
fn write_judged(t: &mut Tx<'_>, w: &PreparedWrite) -> Result<WriteOutcome> {
    let mut w = w.clone();
    let scope_in = match &w.choice {
        ScopeChoice::Exact(scope) => Some(scope.to_string()),
        ScopeChoice::Ambiguous(_) => None,
    };
    let scope_key = match &w.choice {
        ScopeChoice::Exact(Scope::Global) | ScopeChoice::Ambiguous(_) => None,
        ScopeChoice::Exact(scope) => Some(fold(&scope.to_string())),
    };
    // A write the guard may queue is probed only once the guard let it through.
    let probe_now = scope_in.is_some() && !may_queue(&w);
    let (asked_predicate, asked_subject) = (w.predicate.clone(), w.subject.clone());
    let subject_key = fold(&w.subject);
    let seen = w.causal_seq;
    let look = |t: &mut Tx<'_>, probe: bool| {
        t.one(
            "SELECT predicate, subject, scope, guard_mode,
                    tombstone, cur_version, cur_value, cur_seq, last_version, seq, clock
             FROM memscope_write_look($1, $2, $3, $4, $5, $6, $7)",
            &[
                &asked_predicate,
                &asked_subject,
                &subject_key,
                &scope_in,
                &scope_key,
                &seen,
                &probe,
            ],
        )
    };
    let r = look(t, probe_now).map_err(|e| clock_refusal(e, seen))?;
    w.predicate = r.get(0);
    w.subject = r.get(1);
    let mode = r
        .get::<_, Option<String>>(3)
        .and_then(|m| GuardMode::parse(&m))
        .unwrap_or(GuardMode::Queue);
    let scope = match &w.choice {
        ScopeChoice::Ambiguous(candidates) => {
            let mut spelled = Vec::with_capacity(candidates.len());
            for c in candidates {
                spelled.push(spelled_scope(t, c, true)?);
            }
            return enqueue_pending(t, &w, &spelled, None);
        }
        ScopeChoice::Exact(scope) => respelled(scope, &r.get::<_, String>(2)),
    };
    w.choice = ScopeChoice::Exact(scope.clone());
    let scope_text = scope.to_string();
    let mut suspect = None;
    let (probe, seq, clock) = if probe_now {
        // Judged on its words alone, which need no lookup (README, "The scope guard").
        if guarded(&w, Some(mode)) {
            if let Verdict::Suspect { evidence, places } =
                judge_words(w.raw.as_deref(), w.words.as_ref(), mode)
            {
                suspect = Some(mark(t, evidence, &places)?);
            }
        }
        probe_from_row(&r, 4, &scope_text)?
    } else {
        match guard(t, &w, mode)? {
            // A deleted memory is refused before it is judged (README, "Write rules": a
            // tombstone comes first): queued, its value and words would be stored again.
            Verdict::Queue { .. }
                if t.opt(
                    "SELECT 1 FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = 'global'",
                    &[&w.subject, &w.predicate],
                )?
                .is_some() => {}
            Verdict::Queue {
                candidates,
                evidence,
            } => {
                // The places as stored (registered, as an explicit ambiguous write's are): the
                // context names them as the writer typed them.
                let mut spelled = Vec::with_capacity(candidates.len());
                for c in &candidates {
                    spelled.push(spelled_scope(t, c, true)?);
                }
                return enqueue_pending(t, &w, &spelled, Some(&evidence.join("; ")));
            }
            Verdict::Suspect { evidence, places } => {
                suspect = Some(mark(t, evidence, &places)?);
            }
            Verdict::Apply => {}
        }
        // Writers of this identity wait for each other inside the look's probe; what it reads,
        // it reads after the writer before committed. The same look again: the spellings it
        // registered are found now.
        let r = look(t, true)?;
        probe_from_row(&r, 4, &scope_text)?
    };
    let id = Identity {
        subject: w.subject.clone(),
        predicate: w.predicate.clone(),
        scope,
    };
    let key = (id.subject.clone(), id.predicate.clone(), scope_text);
    // The clock as it stands: the sequence may have been asked past 2^53, where it ends.
    let clock = crate::model::clock_as_it_stands(clock);
    let (number, clock) = match (probe.tombstone, w.causal_seq) {
        (Some(_), _) => (clock, clock),
        // Its own number moved the clock up to it, if it was behind; the look read it after.
        (None, Some(_)) => (seq, clock.max(seq)),
        (None, None) => (seq, seq),
    };
    // A clock set back around memscope (a login's `setval`, found by review) hands out a
    // number at or below the one this identity holds, and the write would be stale for no
    // reason of its own: the clock moves up past it and the write takes the next number, as
    // on SQLite, whose clock reads past the numbers its last event handed out.
    let (number, clock) = match (&probe.current, w.causal_seq, probe.tombstone) {
        (Some(held), None, None) if held.causal_seq >= number => {
            let next = clock_past(t, held.causal_seq)?;
            (next, next)
        }
        _ => (number, clock),
    };
    let mut slot = Slot::new(probe);
    let mut writes = Writes::default();
    let out = decide_into(
        &mut slot,
        &mut writes,
        &key,
        &id,
        &w,
        number,
        clock,
        suspect.as_ref(),
    );
    flush_one(t, &key, &slot, &writes)?;
    Ok(out)
}

/// Moves the causal clock up to `held` (a number stored on a record, which a clock set back
/// around memscope stands at or below) and takes the next number. `memscope_clock_observe`
/// runs as the owner and only moves the clock up, so any writer may call it.
fn clock_past(t: &mut Tx<'_>, held: i64) -> Result<i64> {
    // The sequence is no transaction's: a login may set it back again between the two
    // statements, and then the number is taken again.
    for _ in 0..CLOCK_PAST_TRIES {
        t.one("SELECT memscope_clock_observe($1)::text", &[&held])?;
        let next = crate::model::within_clock(t.one("SELECT memscope_clock_next()", &[])?.get(0))?;
        if next > held {
            return Ok(next);
        }
    }
    anyhow::bail!(
        "the causal clock was set back {CLOCK_PAST_TRIES} times while this write moved it past causal number {held}, so nothing was written: stop whatever sets `memscope_clock` back, then write again"
    )
}

/// Whether a causal clock set back inside `memscope_clock_take` handed a line without a number
/// of its own (`seen` `None`, not `now`) a number at or below one handed out, or held by a
/// memory, before it: without a `setval` each such number is past every one before it.
fn set_back_midway(held: Option<i64>, seen: &[Option<i64>], now: &[bool], numbers: &[i64]) -> bool {
    let mut floor = held.unwrap_or(i64::MIN);
    for ((own, now), &number) in seen.iter().zip(now).zip(numbers) {
        if *now {
            continue;
        }
        if own.is_none() && number <= floor {
            return true;
        }
        floor = floor.max(number);
    }
    false
}

/// How often [`clock_past`] moves the clock up before it gives up.
const CLOCK_PAST_TRIES: usize = 100;

/// One line of `apply` that could not be read or validated: its outcome.
pub(super) fn line_error(e: &LineError) -> WriteOutcome {
    let mut out = WriteOutcome::error(None, e.message.clone());
    out.column = e.column;
    out
}

/// `apply`'s batch in the open transaction, pipelined (the module's comment); any error is
/// returned as it is, and the caller decides whether to run the batch again.
pub(super) fn apply_batch(
    t: &mut Tx<'_>,
    batch: &[(u64, ParsedLine)],
) -> Result<Vec<WriteOutcome>> {
    let mode = t
        .opt("SELECT value FROM settings WHERE key = 'scope_guard'", &[])?
        .and_then(|r| GuardMode::parse(&r.get::<_, String>(0)));
    let mode = mode.unwrap_or(GuardMode::Queue);
    let mut outcomes: Vec<Option<WriteOutcome>> = vec![None; batch.len()];
    let mut run: Vec<(usize, &PreparedWrite, Option<Value>)> = Vec::new();
    for (i, (_, parsed)) in batch.iter().enumerate() {
        let w = match parsed {
            ParsedLine::Invalid(e) => {
                outcomes[i] = Some(line_error(e));
                continue;
            }
            ParsedLine::Ready(w) => w,
        };
        match route(w, mode) {
            Route::Run(mark) => run.push((i, w, mark)),
            Route::Alone => {
                write_run(t, &run, &mut outcomes)?;
                run.clear();
                // The clock's refusal comes after the look, before anything is written: the
                // line's error, as in a run.
                let out = match brought_refusal(t, w.causal_seq)? {
                    Some(refused) => WriteOutcome::error(None, refused.0),
                    None => match write_judged(t, w) {
                        Err(e) if e.is::<crate::model::ClockExhausted>() => {
                            WriteOutcome::error(None, e.to_string())
                        }
                        other => other?,
                    },
                };
                outcomes[i] = Some(out);
            }
        }
    }
    write_run(t, &run, &mut outcomes)?;
    Ok(batch
        .iter()
        .zip(outcomes)
        .map(|((n, _), out)| {
            let mut out =
                out.unwrap_or_else(|| WriteOutcome::error(None, String::from("not written")));
            out.line = Some(*n);
            out
        })
        .collect())
}

/// Looks up, probes, decides and writes a run of exact writes the guard needs no lookup for,
/// each with its suspect's mark if it has one (the module's comment).
fn write_run(
    t: &mut Tx<'_>,
    run: &[(usize, &PreparedWrite, Option<Value>)],
    outcomes: &mut [Option<WriteOutcome>],
) -> Result<()> {
    if run.is_empty() {
        return Ok(());
    }
    // The spellings: each new key registered by its first line, as line by line.
    let mut spelling_at: HashMap<(&str, String), usize> = HashMap::new();
    let (mut kinds, mut folded, mut texts) = (Vec::new(), Vec::new(), Vec::new());
    let mut wanted = |kind: &'static str, text: &str| {
        let key = (kind, fold(text));
        if !spelling_at.contains_key(&key) {
            spelling_at.insert(key.clone(), texts.len());
            kinds.push(kind);
            folded.push(key.1);
            texts.push(text.to_string());
        }
    };
    for (_, w, _) in run {
        wanted("subject", &w.subject);
        if let ScopeChoice::Exact(scope) = &w.choice {
            if *scope != Scope::Global {
                wanted("scope", &scope.to_string());
            }
        }
    }
    let spellings: Vec<String> = t
        .all(
            "SELECT memscope_spelling(k, f, s)
             FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS i(k, f, s, n)
             ORDER BY n",
            &[&kinds, &folded, &texts],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let spelled = |kind: &'static str, text: &str| -> String {
        spelling_at
            .get(&(kind, fold(text)))
            .map_or_else(|| text.to_string(), |&i| spellings[i].clone())
    };
    let mut predicates: Vec<&str> = run.iter().map(|(_, w, _)| w.predicate.as_str()).collect();
    predicates.sort_unstable();
    predicates.dedup();
    let canonical: HashMap<&str, String> = predicates
        .iter()
        .copied()
        .zip(
            t.all(
                "SELECT coalesce((SELECT a.canonical FROM predicate_aliases a WHERE a.alias = i.p), i.p)
                 FROM unnest($1::text[]) WITH ORDINALITY AS i(p, n) ORDER BY n",
                &[&predicates],
            )?
            .iter()
            .map(|r| r.get(0)),
        )
        .collect();
    // Each line's identity as stored; the run's identities in the order first met.
    let mut lines = Vec::with_capacity(run.len());
    let mut slot_of: HashMap<Key, usize> = HashMap::new();
    let mut slots: Vec<(Key, Slot)> = Vec::new();
    for (i, w, mark) in run {
        let ScopeChoice::Exact(scope) = &w.choice else {
            continue;
        };
        let scope = match scope {
            Scope::Global => Scope::Global,
            s => respelled(s, &spelled("scope", &s.to_string())),
        };
        let id = Identity {
            subject: spelled("subject", &w.subject),
            predicate: canonical
                .get(w.predicate.as_str())
                .cloned()
                .unwrap_or_else(|| w.predicate.clone()),
            scope,
        };
        let key = (
            id.subject.clone(),
            id.predicate.clone(),
            id.scope.to_string(),
        );
        let at = *slot_of.entry(key.clone()).or_insert_with(|| {
            slots.push((key.clone(), Slot::new(Probe::default())));
            slots.len() - 1
        });
        lines.push((*i, *w, mark.as_ref(), id, at));
    }
    // Every identity locked (in lock-key order, inside the function) and probed, at once.
    let rows = t.all(
        "SELECT tombstone, cur_version, cur_value, cur_seq, last_version, 0::bigint, 0::bigint, ord
         FROM memscope_probe_many($1::text[], $2::text[], $3::text[]) ORDER BY ord",
        &[
            &slots.iter().map(|(k, _)| k.0.as_str()).collect::<Vec<_>>(),
            &slots.iter().map(|(k, _)| k.1.as_str()).collect::<Vec<_>>(),
            &slots.iter().map(|(k, _)| k.2.as_str()).collect::<Vec<_>>(),
        ],
    )?;
    // One row a position, unless an identity holds two current records (a client dropped its
    // guard): the whole run is refused, never decided against either record.
    for pair in rows.windows(2) {
        let ord: i64 = pair[0].get(7);
        if pair[1].get::<_, i64>(7) == ord {
            let (s, p, c) = &slots[usize::try_from(ord - 1)?].0;
            return Err(crate::store::check::two_rows_of_one_identity(
                "memories",
                &identity_of(s, p, c)?,
            ));
        }
    }
    for ((key, slot), r) in slots.iter_mut().zip(&rows) {
        *slot = Slot::new(probe_from_row(r, 0, &key.2)?.0);
    }
    // A line that brings a number past 2^53 − 2^32 the clock has not reached is that line's
    // error, as on SQLite and in a single write (`brought_within_clock`, judged before the
    // write looks at its identity, so a tombstoned one's too): against the clock before the
    // run and the numbers the lines before it take or bring — the least the clock can then
    // stand at (a tombstoned identity's line takes none).
    if lines
        .iter()
        .any(|(_, w, ..)| w.causal_seq.is_some_and(|s| s > MAX_BROUGHT_SEQ))
    {
        let mut bound = super::clock_now(t)?;
        lines.retain(|(i, w, _, _, at)| {
            let takes = slots[*at].1.probe.tombstone.is_none();
            let Some(s) = w.causal_seq else {
                if takes {
                    bound = bound.saturating_add(1);
                }
                return true;
            };
            match crate::model::brought_within_clock(s, bound) {
                Ok(()) => {
                    if takes {
                        bound = bound.max(s);
                    }
                    true
                }
                Err(e) => {
                    outcomes[*i] = Some(WriteOutcome::error(None, e.0));
                    false
                }
            }
        });
    }
    // The causal numbers, in line order, taken under the locks: a tombstoned identity's line
    // takes none (its rejected row records the clock now), as a single write's probe does.
    let (mut seen, mut now): (Vec<Option<i64>>, Vec<bool>) = lines
        .iter()
        .map(|(_, w, _, _, at)| {
            let tombstoned = slots[*at].1.probe.tombstone.is_some();
            (w.causal_seq.filter(|_| !tombstoned), tombstoned)
        })
        .unzip();
    // The clock as it stands before the run, when a line's own number may be behind it: each
    // line's history row records the clock once the line took its number.
    let mut clock = if seen.iter().any(Option::is_some) {
        super::clock_now(t)?
    } else {
        0
    };
    // A clock set back around memscope (a login's `setval`, found by review) would hand lines
    // numbers at or below what their identities hold, and they would be stale for no reason of
    // their own: the run's first number moves the clock up past the highest of them (nothing,
    // for a clock that stands past it) in the same statement, and is dropped.
    let held = lines
        .iter()
        .filter(|(_, w, ..)| w.causal_seq.is_none())
        .filter_map(|(.., at)| slots[*at].1.probe.current.as_ref())
        .map(|held| held.causal_seq)
        .max();
    if let Some(held) = held {
        seen.insert(0, Some(held));
        now.insert(0, false);
    }
    let mut numbers: Vec<i64> = t
        .one("SELECT memscope_clock_take($1, $2)", &[&seen, &now])?
        .get(0);
    if held.is_some() {
        numbers.remove(0);
        now.remove(0);
        seen.remove(0);
    }
    // The sequence is no transaction's: a login's `setval` may land inside that one statement,
    // between two lines' numbers, and a later line would be handed a number at or below an
    // earlier one's (and be stale for no reason of its own). Then the batch is run again a line
    // at a time (the caller's savepoints), each line taking its number as a single write does,
    // again until past what its memory holds ([`clock_past`]).
    if set_back_midway(held, &seen, &now, &numbers) {
        anyhow::bail!("the causal clock was set back while this batch took its numbers");
    }
    let mut writes = Writes::default();
    for (((i, w, mark, id, at), number), clock_now) in lines.iter().zip(numbers).zip(now) {
        // A tombstoned identity's line records the clock as it stands. Any other line past
        // the clock's end (an earlier line brought 2^53) is refused alone, as when written by
        // itself; the batch is not run again, for the sequence cannot go back.
        let number = if clock_now {
            crate::model::clock_as_it_stands(number)
        } else {
            match crate::model::within_clock(number) {
                Ok(n) => n,
                Err(e) => {
                    outcomes[*i] = Some(WriteOutcome::error(None, e.to_string()));
                    continue;
                }
            }
        };
        clock = clock.max(number);
        let (key, slot) = &mut slots[*at];
        outcomes[*i] = Some(decide_into(
            slot,
            &mut writes,
            key,
            id,
            w,
            number,
            clock,
            *mark,
        ));
    }
    flush(t, &slots, &writes)
}

/// The places the scope guard looks for in a global write's words, looked up by what the words
/// hold (`Words::tokens`, `Words::folded`) with the places the write was made in: one
/// statement, the same whatever how many places the database knows. (Until 2026-12-03 every
/// such write read every place the database holds — 28–31 ms a write at 20,000 task scopes,
/// 1.9–3.9 ms since, `cargo bench --bench postgres`; `apply` read them once a batch.)
/// Being a statement of the write's transaction, it sees the places the transaction itself
/// registered, as SQLite's guard does. In byte order, as SQLite reads them.
const PLACES_LOOKUP: &str = concat!(
    "SELECT folded, spelling FROM (
       SELECT folded, spelling FROM spellings WHERE kind = 'scope' AND folded = ANY($1)
       UNION
       SELECT folded, spelling FROM spellings WHERE ",
    super::schema::other_place!(),
    " AND strpos($2, substr(folded, 6)) > 0
     ) p ORDER BY spelling COLLATE \"C\""
);

/// The scope guard's verdict on a global write (README, "The scope guard"): its words alone
/// without a context; with one, also the places the database knows that the words may name
/// ([`PLACES_LOOKUP`]) and the scoped records the same message wrote of this subject in the
/// place the write was made in.
fn guard(t: &mut Tx<'_>, w: &PreparedWrite, mode: GuardMode) -> Result<Verdict> {
    if mode == GuardMode::Off {
        return Ok(Verdict::Apply);
    }
    let Some(context) = &w.context else {
        return Ok(match w.raw {
            Some(_) => judge_words(w.raw.as_deref(), w.words.as_ref(), mode),
            None => Verdict::Apply,
        });
    };
    let given: Vec<Scope> = [
        context.repo.clone().map(Scope::Repo),
        context.task.clone().map(Scope::Task),
    ]
    .into_iter()
    .flatten()
    .collect();
    let read;
    let words = match (&w.words, &w.raw) {
        (Some(words), _) => Some(words),
        (None, Some(raw)) => {
            read = Words::read(raw);
            Some(&read)
        }
        (None, None) => None,
    };
    let mut keys: Vec<String> = given.iter().map(|p| fold(&p.to_string())).collect();
    for token in words.iter().flat_map(|words| words.tokens()) {
        keys.push(format!("repo:{token}"));
        keys.push(format!("task:{token}"));
    }
    keys.sort_unstable();
    keys.dedup();
    let mut stored: HashMap<String, String> = HashMap::new();
    let mut named = Vec::new();
    for r in t.all(PLACES_LOOKUP, &[&keys, &words.map(Words::folded)])? {
        let spelling: String = r.get(1);
        if let Ok(place) = Scope::parse(&spelling) {
            named.push(place);
        }
        stored.insert(r.get(0), spelling);
    }
    let mut siblings = Vec::new();
    for place in given {
        let Some(text) = stored.get(&fold(&place.to_string())) else {
            continue; // memscope never stored anything there: no siblings
        };
        for s in t.all(
            "SELECT predicate FROM memories WHERE scope = $1 AND subject = $2 AND source = $3
             ORDER BY predicate",
            &[text, &w.subject, &w.source],
        )? {
            siblings.push((s.get::<_, String>(0), respelled(&place, text)));
        }
    }
    let ev = Evidence {
        raw: w.raw.as_deref(),
        words,
        context: w.context.as_ref(),
        known_places: &Places::new(&named),
        siblings: &siblings,
    };
    Ok(judge(Cues::shipped(), &Scope::Global, &ev, mode))
}

/// An ambiguous write waits for a human (or repeats the open item that already waits).
fn enqueue_pending(
    t: &mut Tx<'_>,
    w: &PreparedWrite,
    candidates: &[Scope],
    guard_reason: Option<&str>,
) -> Result<WriteOutcome> {
    // Two identical writes at once must not both queue an item: one waits for the other.
    t.exec(
        "SELECT memscope_identity_lock($1, $2, '')",
        &[&w.subject, &w.predicate],
    )?;
    let deleted: Vec<String> = t
        .all(
            "SELECT scope FROM tombstones WHERE subject = $1 AND predicate = $2",
            &[&w.subject, &w.predicate],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
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
            bump_metric(t, "resurrection_blocked", 1)?;
            out.outcome = OutcomeKind::Rejected;
            out.reason = Some(reason);
            return Ok(out);
        }
    };
    let scopes: Vec<String> = candidates.iter().map(Scope::to_string).collect();
    let wanted: std::collections::BTreeSet<&String> = scopes.iter().collect();
    for r in t.all(
        "SELECT id, value, candidates, causal_seq FROM pending
         WHERE subject = $1 AND predicate = $2 AND md5(source) = md5($3) AND source = $3
           AND status = 'open' ORDER BY id",
        &[&w.subject, &w.predicate, &w.source],
    )? {
        let held: Vec<String> = serde_json::from_str(&r.get::<_, String>(2)).unwrap_or_default();
        let value: Value = serde_json::from_str(&r.get::<_, String>(1)).unwrap_or(Value::Null);
        if held.iter().collect::<std::collections::BTreeSet<_>>() == wanted
            && same_value(&value, &w.value)
        {
            let id: i64 = r.get(0);
            out.pending_id = Some(id);
            out.value = Some(value);
            out.causal_seq = Some(r.get(3));
            out.reason = Some(format!(
                "the same write is already waiting as pending #{id}: a human picks its scope with `memscope pending resolve`"
            ));
            return Ok(out);
        }
    }
    let seq = super::causal_seq(t, w.causal_seq)?;
    let candidates_text = serde_json::to_string(&scopes)?;
    let id: i64 = t
        .one(
            "INSERT INTO pending (subject, predicate, value, raw, source, causal_seq, candidates, status, created_at, reason)
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'open', memscope_now(), $8) RETURNING id",
            &[&w.subject, &w.predicate, &w.value_text, &w.raw, &w.source, &seq, &candidates_text, &guard_reason],
        )?
        .get(0);
    out.pending_id = Some(id);
    out.value = Some(w.value.clone());
    out.causal_seq = Some(seq);
    out.reason = Some(crate::store::prepared::queued_reason(
        guard_reason,
        &left_out,
    ));
    Ok(out)
}
