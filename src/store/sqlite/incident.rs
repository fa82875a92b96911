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
use crate::model::{
    Considered, Identity, OutcomeKind, ReadRecord, Resolution, Scope, WriteOutcome,
};
use crate::store::decide::{not_found, resolution_chain, resolve_looked, Looked};
use crate::store::prepared::PreparedWrite;
use anyhow::{anyhow, bail, Result};
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

/// Parses `--at` / `--since`: RFC 3339 (`2026-11-20T10:00:00.123Z`) or an age (`90s`, `90m`,
/// `12h`, `3d`, `2w`) counted back from `now`.
pub fn parse_time(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let t = text.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.with_timezone(&Utc));
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: i64 = num.parse().map_err(|_| bad_time(t))?;
    let age = match unit {
        "s" => chrono::Duration::try_seconds(n),
        "m" => chrono::Duration::try_minutes(n),
        "h" => chrono::Duration::try_hours(n),
        "d" => chrono::Duration::try_days(n),
        "w" => chrono::Duration::try_weeks(n),
        _ => return Err(bad_time(t)),
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

/// What one identity held at a moment, reconstructed from its history.
enum StateAt {
    Absent,
    Live {
        version: i64,
        value: Option<Value>,
        source: Option<String>,
        at: String,
    },
    /// It held a record then, whose content a later delete destroyed.
    PurgedLater {
        deleted_at: String,
    },
    Deleted,
}

fn state_at(conn: &Connection, id: &Identity, at: &str) -> Result<StateAt> {
    let mut stmt = conn.prepare_cached(
        "SELECT event, version, value, source, at, detail FROM history
         WHERE subject = ?1 AND predicate = ?2 AND scope = ?3 ORDER BY id",
    )?;
    let mut rows = stmt.query(params![id.subject, id.predicate, id.scope.to_string()])?;
    let mut state = StateAt::Absent;
    while let Some(r) = rows.next()? {
        let event: String = r.get(0)?;
        let when: String = r.get(4)?;
        if when.as_str() > at {
            // A later delete that purged versions live at `at` still tells us it existed.
            if event == "deleted" && !matches!(state, StateAt::Live { .. }) {
                let detail: Option<String> = r.get(5)?;
                let was_live = detail
                    .and_then(|d| serde_json::from_str::<Value>(&d).ok())
                    .and_then(|d| d.get("live_intervals").cloned())
                    .and_then(|v| serde_json::from_value::<Vec<[String; 2]>>(v).ok())
                    .is_some_and(|spans| {
                        spans
                            .iter()
                            .any(|[from, until]| from.as_str() <= at && at < until.as_str())
                    });
                if was_live {
                    return Ok(StateAt::PurgedLater { deleted_at: when });
                }
            }
            continue;
        }
        match event.as_str() {
            "set" => {
                let value: Option<String> = r.get(2)?;
                state = StateAt::Live {
                    version: r.get(1)?,
                    value: value.and_then(|v| serde_json::from_str(&v).ok()),
                    source: r.get(3)?,
                    at: when,
                };
            }
            "deleted" => state = StateAt::Deleted,
            "removed" | "restored" => state = StateAt::Absent,
            _ => {}
        }
    }
    Ok(state)
}

/// Reads the stored value, raw words and source of version `n` of an identity.
/// A stored version's value, raw words and source (each `None` once purged).
type VersionContent = (Option<String>, Option<String>, Option<String>);

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

fn tombstoned(conn: &Connection, id: &Identity) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
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
    if tombstoned(conn, id)? {
        bail!("{id} is deleted: restore it before reverting (`memscope restore`)");
    }
    let cur = current(conn, id)?;
    let target = match (to_version, &cur) {
        (Some(n), _) => n,
        (None, Some(c)) => c.version - 1,
        (None, None) => {
            bail!("{id} has no current record: name the version to bring back with --to-version")
        }
    };
    if let Some(c) = &cur {
        if target >= c.version {
            bail!(
                "{id} is at v{}: --to-version must name an earlier version",
                c.version
            );
        }
    }
    if target < 1 {
        if remove_if_none {
            let cur = cur.ok_or_else(|| anyhow!("{id} has no current record"))?;
            conn.prepare_cached(
                "DELETE FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
            )?
            .execute(params![id.subject, id.predicate, id.scope.to_string()])?;
            Event::new(EventKind::Removed, id)
                .version(Some(cur.version))
                .detail(&detail)
                .clock(st.seqs.stamp())
                .log(conn, now)?;
            let mut out = crate::store::prepared::base_outcome(OutcomeKind::Removed, id);
            out.version = Some(cur.version);
            out.previous = Some(cur.value);
            out.reason = Some("it had no earlier value, so it leaves the current view".into());
            return Ok(out);
        }
        bail!("{id} has no version before v1 to revert to");
    }
    let (value, raw, source) = version_content(conn, id, target)?
        .ok_or_else(|| anyhow!("{id} has no version {target} in its history"))?;
    let value_text = value.ok_or_else(|| {
        anyhow!("the content of {id} v{target} was purged (retention or delete): there is nothing to revert to")
    })?;
    let value: Value = serde_json::from_str(&value_text)?;
    let w = PreparedWrite::stored(
        id,
        value,
        source.unwrap_or_else(|| format!("revert:v{target}")),
        raw,
        None,
    )?;
    let mut out = write_in_tx(conn, &w, now, st)?;
    let mut detail = detail;
    if let Value::Object(map) = &mut detail {
        map.insert("reverted_to".into(), json!(target));
        map.insert("outcome".into(), json!(out.outcome.as_str()));
    }
    Event::new(EventKind::Reverted, id)
        .version(out.version)
        .detail(&detail)
        .clock(st.seqs.stamp())
        .log(conn, now)?;
    out.reason = Some(format!("reverted to the value of v{target}"));
    Ok(out)
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
        let mut considered = Vec::new();
        // (scope, value, version, source) of the scope that wins.
        type Winner = (String, Option<Value>, Option<i64>, Option<String>);
        let mut winner: Option<Winner> = None;
        for id in chain {
            let scope_text = id.scope.to_string();
            let wins = winner.is_none();
            let c = match state_at(&self.conn, &id, &at_text)? {
                StateAt::Live {
                    version,
                    value,
                    source,
                    at,
                } => {
                    if wins {
                        winner = Some((
                            scope_text.clone(),
                            value.clone(),
                            Some(version),
                            source.clone(),
                        ));
                    }
                    let state = match (wins, value.is_some()) {
                        (true, true) => "wins",
                        (true, false) => "wins (content purged)",
                        (false, _) => "shadowed",
                    };
                    Considered {
                        scope: scope_text,
                        found: true,
                        value,
                        wins,
                        version: Some(version),
                        source,
                        updated_at: Some(at),
                        state: state.into(),
                    }
                }
                StateAt::PurgedLater { deleted_at } => {
                    if wins {
                        winner = Some((scope_text.clone(), None, None, None));
                    }
                    Considered {
                        scope: scope_text,
                        found: true,
                        value: None,
                        wins,
                        version: None,
                        source: None,
                        updated_at: None,
                        state: format!(
                            "{} (existed; deleted {deleted_at}, content destroyed)",
                            if wins { "wins" } else { "shadowed" }
                        ),
                    }
                }
                StateAt::Deleted => not_found(scope_text, "deleted"),
                StateAt::Absent => not_found(scope_text, "absent"),
            };
            considered.push(c);
        }
        Ok(Resolution {
            found: winner.is_some(),
            subject,
            predicate,
            value: winner.as_ref().and_then(|w| w.1.clone()),
            scope: winner.as_ref().map(|w| w.0.clone()),
            version: winner.as_ref().and_then(|w| w.2),
            source: winner.and_then(|w| w.3),
            considered,
        })
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
        self.in_write_tx(|tx, ctx, _| {
        // Resolve inside the write transaction so the logged version is exactly what was read.
        let r = resolve_on(tx, subject, predicate, repo, task, MEMORY_COLUMNS)?;
        // The read is logged in the places' stored spellings, as the resolution used them.
        let repo = spellings::find_context_id(tx, "repo", repo)?;
        let task = spellings::find_context_id(tx, "task", task)?;
        let shadowed: Vec<String> = r
            .considered
            .iter()
            .filter(|c| c.found && !c.wins)
            .map(|c| format!("{}@v{}", c.scope, c.version.unwrap_or_default()))
            .collect();
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
    /// or the sentence it would refuse with; nothing changes. The UI's rescope preview.
    pub fn preview_rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>, String> {
        self.rescope_with(subject, predicate, from, to, false)
            .map_err(|e| format!("{e:#}"))
    }

    fn rescope_with(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
        commit: bool,
    ) -> Result<Vec<WriteOutcome>> {
        if from == to {
            bail!("--scope and --to are the same scope: nothing to move");
        }
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
        let body = |tx: &rusqlite::Transaction<'_>, ctx: &WriteCtx, st: &mut TxState| {
            // The target may be a place nobody wrote yet: its spelling becomes the first.
            let to_id = st.spellings.identity(tx, &to_id)?;
            if to_id == from_id {
                bail!("--scope and --to are the same scope: nothing to move");
            }
            let rec = current(tx, &from_id)?.ok_or_else(|| {
                anyhow!("{from_id} has no current record to move: see `memscope list`")
            })?;
            if let Some(v) = super::rows::tombstone_version(tx, &to_id)? {
                bail!("{to_id} is deleted (tombstone v{v}): restore it first, or choose another target; nothing changed");
            }
            let w = PreparedWrite::stored(
                &to_id,
                rec.value.clone(),
                rec.source.clone(),
                rec.raw.clone(),
                Some(rec.causal_seq),
            )?;
            let moved = write_in_tx(tx, &w, &ctx.now, st)?;
            if !matches!(
                moved.outcome,
                OutcomeKind::Inserted | OutcomeKind::Confirmed | OutcomeKind::Superseded
            ) {
                bail!(
                    "{to_id} refused the value ({}: {}); nothing changed",
                    moved.outcome,
                    moved.reason.as_deref().unwrap_or("")
                );
            }
            Event::new(EventKind::Rescoped, &to_id).version(moved.version).provenance(Some(&rec.source), Some(rec.causal_seq)).detail(
                    &json!({ "from": from.to_string(), "from_version": rec.version, "outcome": moved.outcome.as_str() }),
                ).clock(st.seqs.stamp()).log(tx, &ctx.now)?;
            let back = revert_in_tx(
                tx,
                &from_id,
                None,
                true,
                &ctx.now,
                st,
                json!({ "rescoped_to": to.to_string(), "moved_version": rec.version }),
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

    /// What [`Store::revert`] to `to_version` would do, or the sentence it would refuse with;
    /// nothing changes. The UI's revert choices.
    pub fn preview_revert(
        &mut self,
        id: &Identity,
        to_version: Option<i64>,
    ) -> Result<WriteOutcome, String> {
        self.revert_with(id, to_version, false)
            .map_err(|e| format!("{e:#}"))
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
    let chain = resolution_chain(repo.as_deref(), task.as_deref())
        .into_iter()
        .map(|scope| Identity {
            subject: subject.clone(),
            predicate: predicate.clone(),
            scope,
        })
        .collect();
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
