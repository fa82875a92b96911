//! Wrong-tool incident debugging: the read log, resolution as of a past moment, and the two
//! repairs — rescope (move a mis-scoped value) and revert (make an earlier value current again).
//! Repairs write through the same write path as everything else.

use super::check::assert_identity_clean;
use super::events::{Event, EventKind};
use super::rows::read_from_row;
use super::rows::{current, current_as, MEMORY_COLUMNS};
use super::spellings;
use super::write::{write_in_tx, TxState, WriteCtx};
use super::{format_time, Store};
use crate::model::{Identity, ReadRecord, Resolution, Scope, WriteOutcome};
use crate::store::decide::{chain_identities, resolve_looked, shadowed_labels, Looked};
use crate::store::incident::{
    self, Earlier, HistoryAt, Restoring, RevertStep, Reverts, StateAt, VersionContent,
};
use crate::store::prepared::PreparedWrite;
use anyhow::Result;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

/// Parses `--at` / `--since`: RFC 3339 (`2026-11-20T10:00:00.123Z`) or an age (`90s`, `90m`,
/// `12h`, `3d`, `2w`) counted back from `now`.
pub fn parse_time(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let t = text.trim();
    if let Some(age) = t.strip_prefix('-') {
        if parse_time(age, now).is_ok() {
            return Err(format!(
                "'{}' is not a time: an age already counts back from now, so write {} for that long ago",
                crate::model::shorten(t, 40),
                crate::model::shorten(age, 40)
            ));
        }
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.with_timezone(&Utc));
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    // The longest age of each unit: back to the earliest moment a time can name.
    let reach = now.signed_duration_since(DateTime::<Utc>::MIN_UTC);
    let (longest, unit_name) = match unit {
        "s" => (reach.num_seconds(), "seconds"),
        "m" => (reach.num_minutes(), "minutes"),
        "h" => (reach.num_hours(), "hours"),
        "d" => (reach.num_days(), "days"),
        "w" => (reach.num_weeks(), "weeks"),
        _ => return Err(bad_time(t)),
    };
    if num.is_empty() {
        return Err(bad_time(t));
    }
    // All digits: a number too long for 64 bits is as far out of range as one that fits.
    let n = num.parse::<i64>().unwrap_or(i64::MAX);
    if n > longest {
        return Err(format!(
            "the age '{}' is out of range: an age in {unit_name} counts back at most {longest}{unit} from now (to the earliest time memscope can name); use a shorter age, or an RFC 3339 time like 2026-11-20T10:00:00Z",
            crate::model::shorten(t, 40),
        ));
    }
    let age = match unit {
        "s" => chrono::Duration::try_seconds(n),
        "m" => chrono::Duration::try_minutes(n),
        "h" => chrono::Duration::try_hours(n),
        "d" => chrono::Duration::try_days(n),
        _ => chrono::Duration::try_weeks(n),
    }
    .ok_or_else(|| bad_time(t))?;
    now.checked_sub_signed(age).ok_or_else(|| bad_time(t))
}

fn bad_time(t: &str) -> String {
    format!(
        "'{}' is not a time: use RFC 3339 like 2026-11-20T10:00:00Z, or an age like 90m, 12h, 3d",
        crate::model::shorten(t, 40)
    )
}

fn state_at(conn: &Connection, id: &Identity, at: &str) -> Result<StateAt> {
    let mut stmt = conn.prepare_cached(
        "SELECT event, version, value, source, at, detail FROM history
         WHERE subject = ?1 AND predicate = ?2 AND scope = ?3 ORDER BY id",
    )?;
    let rows = stmt.query_map(
        params![id.subject, id.predicate, id.scope.to_string()],
        |r| {
            Ok(HistoryAt {
                event: r.get(0)?,
                version: r.get(1)?,
                value: r.get(2)?,
                source: r.get(3)?,
                at: r.get(4)?,
                detail: r.get(5)?,
            })
        },
    )?;
    incident::state_at(rows.map(|r| r.map_err(anyhow::Error::from)), at)
}

fn version_content(conn: &Connection, id: &Identity, n: i64) -> Result<Option<VersionContent>> {
    Ok(conn
        .prepare_cached(
            "SELECT value, raw, source FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3
             AND event = 'set' AND version = ?4 ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![id.subject, id.predicate, id.scope.to_string(), n], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?)
}

/// The version a revert brings back by default (see `store::incident::earlier_version`).
fn earlier_version(conn: &Connection, id: &Identity, current: i64) -> Result<Earlier> {
    let key = params![id.subject, id.predicate, id.scope.to_string()];
    let mut reverts = Reverts::default();
    let mut events = conn.prepare_cached(
        "SELECT event, version, detail FROM history WHERE subject = ?1 AND predicate = ?2
         AND scope = ?3 AND event IN ('reverted', 'removed')
         AND id > coalesce((SELECT max(id) FROM history WHERE subject = ?1 AND predicate = ?2
                            AND scope = ?3 AND event = 'deleted'), 0)",
    )?;
    let mut rows = events.query(key)?;
    while let Some(r) = rows.next()? {
        reverts.note(
            r.get_ref(0)?.as_str()?,
            r.get(1)?,
            r.get_ref(2)?.as_str_or_null()?,
        );
    }
    let mut set_below = conn.prepare_cached(
        "SELECT max(version) FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3
         AND event = 'set' AND version < ?4
         AND id > coalesce((SELECT max(id) FROM history WHERE subject = ?1 AND predicate = ?2
                            AND scope = ?3 AND event = 'deleted'), 0)",
    )?;
    incident::earlier_version(current, &reverts, |below| {
        Ok(set_below.query_row(
            params![id.subject, id.predicate, id.scope.to_string(), below],
            |r| r.get(0),
        )?)
    })
}

fn tombstoned(conn: &Connection, id: &Identity) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
        )?
        .exists(params![id.subject, id.predicate, id.scope.to_string()])?)
}

/// Whether `id` has any history event (an identity never written has none).
fn any_history(conn: &Connection, id: &Identity) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3 LIMIT 1",
        )?
        .exists(params![id.subject, id.predicate, id.scope.to_string()])?)
}

/// Makes version `to_version` (default: the one before the current) current again, as a new
/// version written through the write path. With `remove_if_none`, an identity with no earlier
/// version loses its current record instead (a `removed` event), which is what rescope needs.
fn revert_in_tx(
    conn: &Connection,
    id: &Identity,
    to_version: Option<i64>,
    remove_if_none: bool,
    now: &str,
    st: &mut TxState,
    detail: Value,
) -> Result<WriteOutcome> {
    let cur = current(conn, id)?.map(|c| (c.version, c.value));
    let earlier = match &cur {
        Some((version, _)) if to_version.is_none() => earlier_version(conn, id, *version)?,
        _ => Earlier::None,
    };
    let or_remove = cur
        .clone()
        .filter(|_| remove_if_none && to_version.is_none());
    let has_history = cur.is_some() || any_history(conn, id)?;
    let step = incident::revert_step(
        id,
        to_version,
        cur,
        earlier,
        tombstoned(conn, id)?,
        has_history,
        remove_if_none,
    )?;
    let (version, previous, purged) = match step {
        RevertStep::Remove { version, previous } => (version, previous, None),
        RevertStep::Restore { target } => {
            match incident::revert_write(id, target, version_content(conn, id, target)?, or_remove)?
            {
                Restoring::Write(w) => {
                    let mut out = write_in_tx(conn, &w, now, st)?;
                    let detail = incident::reverted(&mut out, detail, target);
                    Event::new(EventKind::Reverted, id)
                        .version(out.version)
                        .detail(&detail)
                        .clock(st.seqs.stamp())
                        .log(conn, now)?;
                    return Ok(out);
                }
                Restoring::Remove {
                    version,
                    previous,
                    purged,
                } => (version, previous, Some(purged)),
            }
        }
    };
    conn.prepare_cached(
        "DELETE FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
    )?
    .execute(params![id.subject, id.predicate, id.scope.to_string()])?;
    Event::new(EventKind::Removed, id)
        .version(Some(version))
        .detail(&detail)
        .clock(st.seqs.stamp())
        .log(conn, now)?;
    Ok(incident::removed_outcome(id, version, previous, purged))
}

impl Store {
    /// Resolution as it stood at `at`, from history. Purged content shows as existing but
    /// deleted, without a value.
    pub fn resolve_at(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Resolution> {
        let (subject, predicate, chain) =
            resolution_identities(&self.conn, subject, predicate, repo, task)?;
        let at_text = format_time(at);
        let states = chain
            .into_iter()
            .map(|id| Ok((id.scope.to_string(), state_at(&self.conn, &id, &at_text)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(incident::resolution_at(subject, predicate, states))
    }

    /// Resolves and records the read in the read log (identity and version, never the value).
    pub fn resolve_logged(
        &mut self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
        agent: Option<&str>,
        note: Option<&str>,
    ) -> Result<Resolution> {
        let note = crate::store::prepared::logged_read_words(agent, note)?;
        self.in_write_tx(|tx, ctx, _| {
        let (spelled, places) = crate::store::prepared::read_spellings(subject, repo, task);
        if let Some(subject) = spelled {
            spellings::subject(tx, &subject, true)?;
        }
        for place in &places {
            spellings::scope(tx, place, true)?;
        }
        // Resolve inside the write transaction so the logged version is exactly what was read.
        let r = resolve_on(tx, subject, predicate, repo, task, MEMORY_COLUMNS)?;
        // The read is logged in the places' stored spellings, as the resolution used them.
        let repo = spellings::find_context_id(tx, "repo", repo)?;
        let task = spellings::find_context_id(tx, "task", task)?;
        let shadowed = shadowed_labels(&r);
        tx.execute(
            "INSERT INTO reads (at, agent, subject, predicate, repo, task, scope, version, shadowed, note)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![ctx.now, agent, r.subject, r.predicate, repo, task, r.scope, r.version, serde_json::to_string(&shadowed)?, note],
        )?;
        Ok(r)
        })
    }

    /// The read log, newest first, filtered.
    pub fn reads(&self, filter: &ReadFilter) -> Result<Vec<ReadRecord>> {
        let predicate = match &filter.predicate {
            Some(p) => Some(self.canonical_predicate(p)?),
            None => None,
        };
        let subject = match &filter.subject {
            Some(s) => Some(spellings::filter_subject(&self.conn, s)?),
            None => None,
        };
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, at, agent, subject, predicate, repo, task, scope, version, shadowed, note FROM reads
             WHERE (?1 IS NULL OR subject = ?1) AND (?2 IS NULL OR predicate = ?2) AND (?3 IS NULL OR agent = ?3)
               AND (?4 IS NULL OR at >= ?4)
             ORDER BY at DESC, id DESC LIMIT ?5",
        )?;
        let rows = stmt.query_map(
            params![
                subject,
                predicate,
                filter.agent,
                filter.since.map(format_time),
                filter.limit.unwrap_or(i64::MAX)
            ],
            read_from_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Moves a mis-scoped current value from `from` to `to` in one transaction: writes it into
    /// `to` through the write path (keeping its source, raw words and causal_seq), then returns
    /// `from` to its previous value, or removes it when it had none. Refused, changing nothing,
    /// when `to` is tombstoned or holds a causally newer value.
    pub fn rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>> {
        self.rescope_with(subject, predicate, from, to, true)
    }

    /// What [`Store::rescope`] would do — its two outcomes (the target's, then the source's) —
    /// or the error it would refuse with (a `RescopeRefusal` when the store refuses); nothing
    /// changes. The UI's rescope preview.
    pub fn preview_rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>> {
        self.rescope_with(subject, predicate, from, to, false)
    }

    fn rescope_with(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
        commit: bool,
    ) -> Result<Vec<WriteOutcome>> {
        let subject = spellings::find_subject(&self.conn, subject)?;
        let predicate = self.canonical_predicate(predicate)?;
        let from_id = Identity {
            subject: subject.clone(),
            predicate: predicate.clone(),
            scope: spellings::scope(&self.conn, from, false)?,
        };
        let to_id = Identity {
            subject,
            predicate,
            scope: to.clone(),
        };
        crate::store::prepared::new_place_within_id_limit(&to_id.subject, &to_id.predicate, to)?;
        let body = |tx: &rusqlite::Transaction<'_>, ctx: &WriteCtx, st: &mut TxState| {
            // The target may be a place nobody wrote yet: its spelling becomes the first.
            let to_id = st.spellings.identity(tx, &to_id)?;
            incident::rescope_same_place(&from_id, &to_id)?;
            let rec = current(tx, &from_id)?
                .ok_or_else(|| incident::rescope_nothing_to_move(&from_id))?;
            if let Some(v) = super::rows::tombstone_version(tx, &to_id)? {
                return Err(incident::rescope_target_deleted(&to_id, v));
            }
            let w = PreparedWrite::stored(
                &to_id,
                rec.value.clone(),
                rec.source.clone(),
                rec.raw.clone(),
                Some(rec.causal_seq),
            )?;
            let moved = write_in_tx(tx, &w, &ctx.now, st)?;
            let detail = incident::rescope_moved(
                &to_id,
                &from_id.scope,
                rec.version,
                &moved,
                || {
                    // The move that brought this version here, if it came from the target.
                    Ok(tx
                        .query_row(
                            "SELECT json_extract(detail, '$.from_version') FROM history
                             WHERE subject = ?1 AND predicate = ?2 AND scope = ?3 AND event = 'rescoped'
                               AND version = ?4 AND json_extract(detail, '$.from') = ?5
                             ORDER BY id DESC LIMIT 1",
                            rusqlite::params![
                                from_id.subject,
                                from_id.predicate,
                                from_id.scope.to_string(),
                                rec.version,
                                to_id.scope.to_string()
                            ],
                            |r| r.get::<_, Option<i64>>(0),
                        )
                        .optional()?
                        .flatten())
                },
            )?;
            Event::new(EventKind::Rescoped, &to_id)
                .version(moved.version)
                .provenance(Some(&rec.source), Some(rec.causal_seq))
                .detail(&detail)
                .clock(st.seqs.stamp())
                .log(tx, &ctx.now)?;
            let back = revert_in_tx(
                tx,
                &from_id,
                None,
                true,
                &ctx.now,
                st,
                incident::rescope_back_detail(&to_id.scope, rec.version, moved.version),
            )?;
            if ctx.assert {
                assert_identity_clean(tx, &to_id)?;
                assert_identity_clean(tx, &from_id)?;
            }
            Ok(vec![moved, back])
        };
        if commit {
            self.in_write_tx(body)
        } else {
            self.dry_run(body)
        }
    }

    /// Makes an earlier value current again as a new version (history is never rewritten).
    pub fn revert(&mut self, id: &Identity, to_version: Option<i64>) -> Result<WriteOutcome> {
        self.revert_with(id, to_version, true)
    }

    /// What [`Store::revert`] to `to_version` would do, or the error it would refuse with (a
    /// `RevertRefusal` when the store refuses); nothing changes. The UI's revert choices.
    pub fn preview_revert(
        &mut self,
        id: &Identity,
        to_version: Option<i64>,
    ) -> Result<WriteOutcome> {
        self.revert_with(id, to_version, false)
    }

    fn revert_with(
        &mut self,
        id: &Identity,
        to_version: Option<i64>,
        commit: bool,
    ) -> Result<WriteOutcome> {
        let id = spellings::find_identity(
            &self.conn,
            &Identity {
                predicate: self.canonical_predicate(&id.predicate)?,
                ..id.clone()
            },
        )?;
        let body = |tx: &rusqlite::Transaction<'_>, ctx: &WriteCtx, st: &mut TxState| {
            let out = revert_in_tx(tx, &id, to_version, false, &ctx.now, st, json!({}))?;
            if ctx.assert {
                assert_identity_clean(tx, &id)?;
            }
            Ok(out)
        };
        if commit {
            self.in_write_tx(body)
        } else {
            self.dry_run(body)
        }
    }
}

/// Filters for [`Store::reads`].
#[derive(Debug, Clone, Default)]
pub struct ReadFilter {
    pub subject: Option<String>,
    pub predicate: Option<String>,
    pub agent: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub limit: Option<i64>,
}

/// The subject and predicate as the store spells them, and the identities a resolution visits
/// for them, most specific scope first: what `resolve_on` and `Store::resolve_at` both walk.
fn resolution_identities(
    conn: &Connection,
    subject: &str,
    predicate: &str,
    repo: Option<&str>,
    task: Option<&str>,
) -> Result<(String, String, Vec<Identity>)> {
    let subject = spellings::find_subject(conn, subject)?;
    let predicate = super::canonical_predicate(conn, predicate)?;
    let repo = spellings::find_context_id(conn, "repo", repo)?;
    let task = spellings::find_context_id(conn, "task", task)?;
    let chain = chain_identities(&subject, &predicate, repo.as_deref(), task.as_deref());
    Ok((subject, predicate, chain))
}

/// Resolution on any connection (the logged read runs it inside its transaction), each record
/// read as `columns` say: [`MEMORY_COLUMNS`], or previews for the UI's history pane.
pub(crate) fn resolve_on(
    conn: &Connection,
    subject: &str,
    predicate: &str,
    repo: Option<&str>,
    task: Option<&str>,
    columns: &str,
) -> Result<Resolution> {
    let (subject, predicate, chain) = resolution_identities(conn, subject, predicate, repo, task)?;
    let mut looked = Vec::with_capacity(chain.len());
    for id in chain {
        let l = match current_as(conn, &id, columns)? {
            Some(rec) => Looked::Found {
                value: rec.value,
                version: rec.version,
                source: rec.source,
                updated_at: rec.updated_at,
            },
            None => Looked::Missing {
                deleted: tombstoned(conn, &id)?,
            },
        };
        looked.push((id.scope.to_string(), l));
    }
    Ok(resolve_looked(subject, predicate, looked).0)
}
