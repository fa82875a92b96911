//! `gc` on PostgreSQL (README, "delete, restore, gc"): the decisions of [`crate::store::gc`]
//! as on SQLite — retention's purge of old content, the collection of safe tombstones — in one
//! transaction, history rewritten through the schema's purge gate as `delete` does; then the
//! touched tables are vacuumed and analyzed as after a delete, when the role may.

use super::schema;
use super::store::{log_event, PgStore};
use crate::model::{Identity, Scope};
use crate::store::events::EventKind;
use crate::store::gc::{tombstone_collectable, GcPlan, GcReport};
use anyhow::{anyhow, bail, Result};
use chrono::{DateTime, Utc};

/// The tables a purge by `gc` rewrites.
const TOUCHED: [&str; 4] = ["history", "pending", "reads", "tombstones"];

impl PgStore {
    /// Retention purge and tombstone collection in one transaction, then the VACUUM of the
    /// touched tables (`disk_purged`; `disk_note` says why not when the role may not).
    pub fn gc(&mut self, retention: Option<i64>, tombstone_safe: Option<i64>) -> Result<GcReport> {
        let user = self.address().user().to_string();
        let (mut report, owed) = self.in_change_tx(|t| {
            let plan = GcPlan::new(retention, tombstone_safe, |key| {
                Ok(t.opt("SELECT value FROM settings WHERE key = $1", &[&key])?
                    .map(|r| r.get(0)))
            })?;
            // Sources an earlier release kept at a collected tombstone's identity are blanked
            // by any run (found by review: with both periods 0 the purge gate stayed shut).
            let leftovers: i64 = t
                .one(crate::store::events::COLLECTED_SOURCES_COUNT_SQL, &[])?
                .get(0);
            // And the copies a rescope left of memories whose tombstones an earlier release's
            // gc collected (`events::collected_copies`): counted only when nothing else opens
            // the gate, and only until one still holds content.
            let logged = super::store::logged_events(
                &t.all(crate::store::events::KEPT_COPY_EVENTS_SQL, &[])?,
            );
            let kept_copies = crate::store::events::collected_copies(&logged, |_, _, _| false);
            let mut acts = plan.retention_days > 0 || plan.tombstone_safe_days > 0 || leftovers > 0;
            for c in &kept_copies {
                if acts {
                    break;
                }
                acts = crate::store::events::copy_kept(|sql| {
                    Ok(t.one(sql, &[&c.subject, &c.predicate, &c.at, &c.version, &c.as_of])?
                        .get(0))
                })?
                .any();
            }
            if acts {
                let may: bool = t
                    .one("SELECT memscope_may_purge($1)", &[&schema::CURATOR_ROLE])?
                    .get(0);
                if !may {
                    bail!(
                        "gc purges history, which only {} or the owner of memscope's tables may do, and user \"{user}\" is neither: run gc with the curator's connection string",
                        schema::CURATOR_ROLE
                    );
                }
                t.txn()?
                    .batch_execute(&format!("SET LOCAL {} = 'on'", schema::PURGE_SETTING))?;
            }
            for (key, days) in &plan.saved {
                t.exec(
                    "INSERT INTO settings (key, value) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    &[key, days],
                )?;
            }
            let now: DateTime<Utc> = t.one("SELECT memscope_now()", &[])?.get(0);
            let mut report = plan.report();
            if let Some(cutoff) = plan.retention_cutoff(now) {
                // Content and sources of old events, but the live memory's provenance.
                report.purged_events = t.exec(
                    crate::store::gc::RETENTION_PURGE_SQL,
                    &[&cutoff],
                )? as i64;
                report.purged_pending = t.exec(
                    "DELETE FROM pending WHERE status <> 'open' AND coalesce(resolved_at, created_at) < $1",
                    &[&cutoff],
                )? as i64;
                report.purged_reads =
                    t.exec("DELETE FROM reads WHERE at < $1", &[&cutoff])? as i64;
            }
            if let Some(cutoff) = plan.tombstone_cutoff(now) {
                let old = t.all(
                    "SELECT subject, predicate, scope FROM tombstones WHERE deleted_at < $1
                     ORDER BY subject COLLATE \"C\", predicate COLLATE \"C\", scope COLLATE \"C\"",
                    &[&cutoff],
                )?;
                for r in old {
                    let (subject, predicate, scope): (String, String, String) =
                        (r.get(0), r.get(1), r.get(2));
                    // The identity's lock: a write waiting on it sees the tombstone gone. What
                    // decides is read under it: a restore, a delete again (a tombstone young
                    // again) or a write committed since the list was read (found by review: a
                    // restore committed in between was "collected" — a tombstone_collected
                    // event and a count for a tombstone gc never removed).
                    t.exec(
                        "SELECT memscope_identity_lock($1, $2, $3)",
                        &[&subject, &predicate, &scope],
                    )?;
                    let Some(now_old) = t.opt(
                        "SELECT EXISTS (SELECT 1 FROM history h WHERE h.subject = t.subject AND h.predicate = t.predicate
                                        AND h.scope = t.scope AND (h.value IS NOT NULL OR h.raw IS NOT NULL)),
                                EXISTS (SELECT 1 FROM memories m WHERE m.subject = t.subject AND m.predicate = t.predicate AND m.scope = t.scope)
                         FROM tombstones t WHERE subject = $1 AND predicate = $2 AND scope = $3 AND deleted_at < $4",
                        &[&subject, &predicate, &scope, &cutoff],
                    )?
                    else {
                        continue;
                    };
                    if !tombstone_collectable(now_old.get(0), now_old.get(1)) {
                        continue;
                    }
                    let id = Identity {
                        subject: subject.clone(),
                        predicate: predicate.clone(),
                        scope: Scope::parse(&scope).map_err(|e| anyhow!(e))?,
                    };
                    // Once the tombstone is gone nothing finds the copies a rescope left of
                    // it: an earlier release's delete may have kept some. As of the delete it
                    // stands for, so before it goes.
                    let (as_of, copies) = super::store::moved_copies(t, &id, &[])?;
                    for (at, version) in copies {
                        report.blanked_copies += super::store::blank_copy(
                            t,
                            (&id.subject, &id.predicate, &at, version, as_of),
                        )?
                        .events;
                    }
                    t.exec(
                        "DELETE FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = $3",
                        &[&subject, &predicate, &scope],
                    )?;
                    log_event(t, EventKind::TombstoneCollected, &id, None, None, None, None, None)?;
                    report.collected_tombstones += 1;
                }
            }
            // Every run that opened the gate — any that found such a source, so one an earlier
            // release left is blanked too (`check` says so). Only then: one committed since the
            // count would meet the shut gate (found by review).
            if acts {
                report.blanked_sources =
                    t.exec(crate::store::events::BLANK_COLLECTED_SOURCES_SQL, &[])? as i64;
            }
            for c in kept_copies.iter().filter(|_| acts) {
                report.blanked_copies += super::store::blank_copy(
                    t,
                    (&c.subject, &c.predicate, &c.at, c.version, c.as_of),
                )?
                .events;
            }
            let owed = match report.purged_content() {
                true => Some(super::vacuum::owe(t.txn()?)?),
                false => None,
            };
            Ok((report, owed))
        })?;
        report.disk_purged = true;
        // What this run purged is vacuumed as after a delete; else a VACUUM an earlier purge
        // still owes (a curator's delete, found by review) is paid here, where the role may.
        let (cleanup, done, tables) = match owed {
            Some(owed) => (
                super::vacuum::after_purge_paying(self.connection()?, &TOUCHED, &owed),
                "gc purged: no row holds that content any more",
                &TOUCHED[..],
            ),
            None => match super::vacuum::pay_debt(self.connection()?)? {
                Some(cleanup) => (
                    cleanup,
                    "gc purged nothing new; an earlier purge's VACUUM is owed (no row holds its content any more)",
                    &super::vacuum::EVERY_PURGED_TABLE[..],
                ),
                None => return Ok(report),
            },
        };
        report.disk_purged = cleanup.vacuumed;
        if !report.disk_purged {
            let user = self.address().user().to_string();
            report.disk_note = Some(cleanup.not_vacuumed_note(done, &user, tables));
        } else if let Some(kept) = cleanup.statistics_note() {
            report.disk_note = Some(format!(
                "gc purged and the tables vacuumed and analyzed, {kept}"
            ));
        }
        Ok(report)
    }
}
