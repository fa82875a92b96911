//! The incident loop on PostgreSQL: resolution as of a past moment, revert and rescope, over
//! the core's rules (`store::incident`) and PostgreSQL's write path. A repair locks the
//! identities it touches (both of a rescope, in one order, so two opposite rescopes cannot
//! deadlock) before reading them, as a write does.

use super::store::{
    canonical_predicate, log_event, parse_value, spelled, spelled_scope, write_in_tx, PgStore, Tx,
    SCOPE, SUBJECT,
};
use crate::model::{Identity, Resolution, Scope, WriteOutcome};
use crate::store::decide::chain_identities;
use crate::store::events::EventKind;
use crate::store::incident::{
    self, resolution_at, revert_step, state_at, Earlier, HistoryAt, Restoring, RevertStep, Reverts,
    VersionContent,
};
use crate::store::prepared::PreparedWrite;
use anyhow::Result;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// A resolution's question as the database spells it: subject, predicate, the repository and
/// task ids, and the identities the chain visits, most specific scope first.
pub(super) struct Chain {
    pub subject: String,
    pub predicate: String,
    pub repo: Option<String>,
    pub task: Option<String>,
    pub ids: Vec<Identity>,
}

/// The chain of `subject`/`predicate` in `repo` and `task`, in stored spellings.
pub(super) fn resolution_identities(
    t: &mut Tx<'_>,
    subject: &str,
    predicate: &str,
    repo: Option<&str>,
    task: Option<&str>,
) -> Result<Chain> {
    let subject = crate::model::normalize_subject(subject).map_err(crate::model::InvalidRequest)?;
    let subject = spelled(t, SUBJECT, &subject, false)?;
    let predicate = canonical_predicate(t, predicate)?;
    let mut place = |scope: Option<Scope>| -> Result<Option<String>> {
        let Some(scope) = scope else { return Ok(None) };
        let text = spelled(t, SCOPE, &scope.to_string(), false)?;
        Ok(text.split_once(':').map(|(_, id)| id.to_string()))
    };
    let repo = place(repo.map(|r| Scope::Repo(r.to_string())))?;
    let task = place(task.map(|k| Scope::Task(k.to_string())))?;
    let ids = chain_identities(&subject, &predicate, repo.as_deref(), task.as_deref());
    Ok(Chain {
        subject,
        predicate,
        repo,
        task,
        ids,
    })
}

/// Waits for `id`'s advisory transaction lock (the one writers and the guards take).
fn lock(t: &mut Tx<'_>, id: &Identity) -> Result<()> {
    let scope = id.scope.to_string();
    t.one(
        "SELECT memscope_identity_lock($1, $2, $3)::text",
        &[&id.subject, &id.predicate, &scope],
    )?;
    Ok(())
}

/// A current record as a repair reads it: version, value, source, raw words, causal number.
type Current = (i64, Value, String, Option<String>, i64);

/// `id`'s current record.
fn current(t: &mut Tx<'_>, id: &Identity) -> Result<Option<Current>> {
    let scope = id.scope.to_string();
    super::store::identity_row(
        t,
        "memories",
        "SELECT version, value, source, raw, causal_seq FROM memories
         WHERE subject = $1 AND predicate = $2 AND scope = $3",
        id,
    )?
    .map(|r| {
        Ok((
            r.get(0),
            parse_value(&r.get::<_, String>(1), &scope)?,
            r.get(2),
            r.get(3),
            r.get(4),
        ))
    })
    .transpose()
}

/// The version a revert brings back by default (see `store::incident::earlier_version`).
fn earlier_version(t: &mut Tx<'_>, id: &Identity, current: i64) -> Result<Earlier> {
    let scope = id.scope.to_string();
    let mut reverts = Reverts::default();
    for r in t.all(
        "SELECT event, version, detail FROM history WHERE subject = $1 AND predicate = $2
         AND scope = $3 AND event IN ('reverted', 'removed')
         AND id > coalesce((SELECT max(id) FROM history WHERE subject = $1 AND predicate = $2
                            AND scope = $3 AND event = 'deleted'), 0)",
        &[&id.subject, &id.predicate, &scope],
    )? {
        reverts.note(r.get(0), r.get(1), r.get(2));
    }
    incident::earlier_version(current, &reverts, |below| {
        Ok(t.one(
            "SELECT max(version) FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3
                 AND event = 'set' AND version < $4
                 AND id > coalesce((SELECT max(id) FROM history WHERE subject = $1 AND predicate = $2
                                    AND scope = $3 AND event = 'deleted'), 0)",
            &[&id.subject, &id.predicate, &scope, &below],
        )?
        .get(0))
    })
}

/// `id`'s tombstone version, when it is deleted.
fn tombstone(t: &mut Tx<'_>, id: &Identity) -> Result<Option<i64>> {
    Ok(super::store::identity_row(
        t,
        "tombstones",
        "SELECT version FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = $3",
        id,
    )?
    .map(|r| r.get(0)))
}

/// A revert inside the caller's transaction, `id` locked (see `store::incident::revert_step`).
fn revert_in_tx(
    t: &mut Tx<'_>,
    id: &Identity,
    to_version: Option<i64>,
    remove_if_none: bool,
    detail: Value,
) -> Result<WriteOutcome> {
    let cur = current(t, id)?.map(|c| (c.0, c.1));
    let earlier = match &cur {
        Some((version, _)) if to_version.is_none() => earlier_version(t, id, *version)?,
        _ => Earlier::None,
    };
    let or_remove = cur
        .clone()
        .filter(|_| remove_if_none && to_version.is_none());
    let deleted = tombstone(t, id)?.is_some();
    let scope = id.scope.to_string();
    let has_history = cur.is_some()
        || t.opt(
            "SELECT 1 FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3 LIMIT 1",
            &[&id.subject, &id.predicate, &scope],
        )?
        .is_some();
    let (version, previous, purged) = match revert_step(
        id,
        to_version,
        cur,
        earlier,
        deleted,
        has_history,
        remove_if_none,
    )? {
        RevertStep::Remove { version, previous } => (version, previous, None),
        RevertStep::Restore { target } => {
            let content: Option<VersionContent> = t
                    .opt(
                        "SELECT value, raw, source FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3
                         AND event = 'set' AND version = $4 ORDER BY id DESC LIMIT 1",
                        &[&id.subject, &id.predicate, &scope, &target],
                    )?
                    .map(|r| (r.get(0), r.get(1), r.get(2)));
            match incident::revert_write(id, target, content, or_remove)? {
                Restoring::Write(w) => {
                    let mut out = write_in_tx(t, &w)?;
                    let detail = incident::reverted(&mut out, detail, target);
                    let clock = super::store::clock_now(t)?;
                    log_event(
                        t,
                        EventKind::Reverted,
                        id,
                        out.version,
                        None,
                        None,
                        Some(&detail),
                        Some(clock),
                    )?;
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
    t.exec(
        "DELETE FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3",
        &[&id.subject, &id.predicate, &scope],
    )?;
    let clock = super::store::clock_now(t)?;
    log_event(
        t,
        EventKind::Removed,
        id,
        Some(version),
        None,
        None,
        Some(&detail),
        Some(clock),
    )?;
    Ok(incident::removed_outcome(id, version, previous, purged))
}

impl PgStore {
    /// Resolution as it stood at `at`, from history (README, "Debugging a wrong-tool
    /// incident"). A read (`PgStore::read`): at READ COMMITTED a transaction around its
    /// statements would give each its own snapshot all the same.
    pub fn resolve_at(
        &mut self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Resolution> {
        let at = crate::store::format_time(at);
        self.read(|t| {
            let chain = resolution_identities(t, subject, predicate, repo, task)?;
            let mut states = Vec::with_capacity(chain.ids.len());
            for id in chain.ids {
                let scope = id.scope.to_string();
                let rows = t.all(
                    "SELECT event, version, value, source,
                            to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), detail
                     FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3 ORDER BY id",
                    &[&id.subject, &id.predicate, &scope],
                )?;
                let rows = rows.iter().map(|r| {
                    Ok(HistoryAt {
                        event: r.get(0),
                        version: r.get(1),
                        value: r.get(2),
                        source: r.get(3),
                        at: r.get(4),
                        detail: r.get(5),
                    })
                });
                states.push((scope, state_at(rows, &at)?));
            }
            Ok(resolution_at(chain.subject, chain.predicate, states))
        })
    }

    /// Makes an earlier value current again as a new version (history is never rewritten).
    pub fn revert(&mut self, id: &Identity, to_version: Option<i64>) -> Result<WriteOutcome> {
        self.revert_with(id, to_version, true)
    }

    /// What [`PgStore::revert`] would do, or the error it would refuse with (a
    /// `RevertRefusal` when the store refuses); nothing changes (the revert itself, rolled
    /// back).
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
        let subject =
            crate::model::normalize_subject(&id.subject).map_err(crate::model::InvalidRequest)?;
        let body = |t: &mut Tx<'_>| {
            let id = Identity {
                subject: spelled(t, SUBJECT, &subject, false)?,
                predicate: canonical_predicate(t, &id.predicate)?,
                scope: spelled_scope(t, &id.scope, false)?,
            };
            super::store::lock_and_stamp(t, &id)?;
            revert_in_tx(t, &id, to_version, false, json!({}))
        };
        if commit {
            self.in_change_tx(body)
        } else {
            self.dry_run(body)
        }
    }

    /// Moves a mis-scoped current value from `from` to `to` in one transaction: written into
    /// `to` through the write path (its source, raw words and causal number kept), then `from`
    /// back to its previous value, or out of the current view when it had none. Refused,
    /// changing nothing, when `to` is deleted or holds a causally newer value.
    pub fn rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>> {
        self.rescope_with(subject, predicate, from, to, true)
    }

    /// What [`PgStore::rescope`] would do, or the error it would refuse with (a
    /// `RescopeRefusal` when the store refuses); nothing changes (the rescope itself, rolled
    /// back).
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
        let subject =
            crate::model::normalize_subject(subject).map_err(crate::model::InvalidRequest)?;
        let body = |t: &mut Tx<'_>| {
            let subject = spelled(t, SUBJECT, &subject, false)?;
            let predicate = canonical_predicate(t, predicate)?;
            let from_id = Identity {
                subject: subject.clone(),
                predicate: predicate.clone(),
                scope: spelled_scope(t, from, false)?,
            };
            crate::store::prepared::new_place_within_id_limit(&subject, &predicate, to)?;
            // The target may be a place nobody wrote yet: its spelling becomes the first.
            let to_id = Identity {
                subject: subject.clone(),
                predicate: predicate.clone(),
                scope: spelled_scope(t, to, true)?,
            };
            incident::rescope_same_place(&from_id, &to_id)?;
            let (first, second) = if from_id.to_string() <= to_id.to_string() {
                (&from_id, &to_id)
            } else {
                (&to_id, &from_id)
            };
            lock(t, first)?;
            super::store::lock_and_stamp(t, second)?;
            let (from_version, value, source, raw, causal_seq) =
                current(t, &from_id)?.ok_or_else(|| incident::rescope_nothing_to_move(&from_id))?;
            if let Some(v) = tombstone(t, &to_id)? {
                return Err(incident::rescope_target_deleted(&to_id, v));
            }
            let w = PreparedWrite::stored(&to_id, value, source.clone(), raw, Some(causal_seq))?;
            let moved = write_in_tx(t, &w)?;
            let detail = incident::rescope_moved(
                &to_id,
                &from_id.scope,
                from_version,
                &moved,
                || {
                    // The move that brought this version here, if it came from the target.
                    Ok(t
                        .opt(
                            "SELECT (detail::json->>'from_version')::bigint FROM history
                             WHERE subject = $1 AND predicate = $2 AND scope = $3 AND event = 'rescoped'
                               AND version = $4 AND detail::json->>'from' = $5
                             ORDER BY id DESC LIMIT 1",
                            &[
                                &from_id.subject,
                                &from_id.predicate,
                                &from_id.scope.to_string(),
                                &from_version,
                                &to_id.scope.to_string(),
                            ],
                        )?
                        .and_then(|r| r.get::<_, Option<i64>>(0)))
                },
            )?;
            let to_scope = to_id.scope.to_string();
            let clock = super::store::clock_now(t)?;
            t.exec(
                "INSERT INTO history (event, subject, predicate, scope, version, source, causal_seq, at, detail, clock)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, memscope_now(), $8, $9)",
                &[
                    &EventKind::Rescoped.as_str(),
                    &to_id.subject,
                    &to_id.predicate,
                    &to_scope,
                    &moved.version,
                    &source,
                    &causal_seq,
                    &detail.to_string(),
                    &clock,
                ],
            )?;
            let back = revert_in_tx(
                t,
                &from_id,
                None,
                true,
                incident::rescope_back_detail(&to_id.scope, from_version, moved.version),
            )?;
            Ok(vec![moved, back])
        };
        if commit {
            self.in_change_tx(body)
        } else {
            self.dry_run(body)
        }
    }
}
