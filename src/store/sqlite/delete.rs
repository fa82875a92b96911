//! Deletion with purge (README, "delete, restore, gc"): tombstones, destroying every stored copy of the content, and
//! making the bytes unrecoverable on disk. Also restore, retention and gc.

use super::check::numbered_parameters;
use super::events::{Event, EventKind};
use super::rows::max_version;
use super::rows::purge_debt_owed;
use super::rows::DEBT_KEY;
use super::{busy_handler, format_time, short_busy_handler, Store};
use crate::model::{DeletePreview, DeleteReport, DeleteTarget, Identity, Scope, TombstoneRef};
use crate::store::check::CheckDb;
use crate::store::events::{CopyKept, KeptCopy};
use crate::store::gc::{tombstone_collectable, GcPlan, GcReport};
use anyhow::{anyhow, bail, Result};
use rusqlite::{params, Connection};
use serde_json::json;
use std::collections::BTreeSet;

/// Every identity the target covers that holds or ever held a record, is tombstoned, or that a
/// pending item of the target names (a candidate, or the scope it was resolved into): a
/// predicate or subject delete tombstones those too, as a delete of one of them does, so the
/// words it destroys cannot come back through the same write again (README, "delete").
fn target_identities(conn: &Connection, target: &DeleteTarget) -> Result<Vec<Identity>> {
    let (subject, predicate) = match target {
        DeleteTarget::Identity(id) => return Ok(vec![id.clone()]),
        DeleteTarget::Predicate { subject, predicate } => {
            (subject.as_str(), Some(predicate.as_str()))
        }
        DeleteTarget::Subject(subject) => (subject.as_str(), None),
    };
    let mut stmt = conn.prepare_cached(
        "SELECT predicate, scope FROM memories WHERE subject = ?1 AND (?2 IS NULL OR predicate = ?2)
         UNION SELECT predicate, scope FROM history WHERE subject = ?1 AND (?2 IS NULL OR predicate = ?2) AND event IN ('set', 'confirmed', 'stale')
         UNION SELECT predicate, scope FROM tombstones WHERE subject = ?1 AND (?2 IS NULL OR predicate = ?2)
         UNION SELECT p.predicate, c.value FROM pending p, json_each(p.candidates) c
           WHERE p.subject = ?1 AND (?2 IS NULL OR p.predicate = ?2) AND c.type = 'text'
         UNION SELECT predicate, resolved_scope FROM pending
           WHERE subject = ?1 AND (?2 IS NULL OR predicate = ?2) AND resolved_scope IS NOT NULL
         ORDER BY 1, 2",
    )?;
    let rows = stmt.query_map(params![subject, predicate], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (predicate, scope) = row?;
        let scope = Scope::parse(&scope)
            .map_err(|e| anyhow!("a stored scope is invalid ({e}): run `memscope check`"))?;
        out.push(Identity {
            subject: subject.to_string(),
            predicate,
            scope,
        });
    }
    Ok(out)
}

/// The identities a delete of `target` tombstones; refuses a target that matches nothing (an
/// identity that never held a record and that no pending item names, a predicate or subject
/// with neither records nor pending items), so that the preview and the delete give the same answer.
fn covered_identities(conn: &Connection, target: &DeleteTarget) -> Result<Vec<Identity>> {
    let ids = target_identities(conn, target)?;
    match target {
        DeleteTarget::Identity(id) => {
            let ever: bool = conn
                .prepare_cached("SELECT 1 FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3
                                 UNION ALL SELECT 1 FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3")?
                .exists(params![id.subject, id.predicate, id.scope.to_string()])?;
            // An identity that never held a record is still the user's to delete when a
            // pending item names its scope: the item holds their words for it.
            if !ever
                && pending_naming(conn, &id.subject, &id.predicate, &[id.scope.to_string()])?
                    .is_empty()
            {
                bail!("there is no memory {id} to delete, and no pending item names its scope: see `memscope list` and `memscope pending`");
            }
        }
        _ if ids.is_empty() && pending_of_target(conn, target)?.is_empty() => {
            bail!("nothing matches that delete: see `memscope list` and `memscope pending`")
        }
        _ => {}
    }
    Ok(ids)
}

/// Open or closed pending items of this subject/predicate naming one of `scopes`.
fn pending_naming(
    conn: &Connection,
    subject: &str,
    predicate: &str,
    scopes: &[String],
) -> Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, candidates, resolved_scope FROM pending WHERE subject = ?1 AND predicate = ?2",
    )?;
    let rows = stmt.query_map(params![subject, predicate], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, Option<String>>(2)?,
        ))
    })?;
    let mut ids = Vec::new();
    for row in rows {
        let (id, candidates, resolved) = row?;
        if crate::store::events::pending_names(&candidates, resolved.as_deref(), scopes) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// The stretches of time in which the identity held a current record, as `[from, until]`
/// pairs, from the events a delete is about to purge (the last one ends at the delete).
fn live_intervals(conn: &Connection, id: &Identity, now: &str) -> Result<Vec<[String; 2]>> {
    let mut stmt = conn.prepare_cached(
        "SELECT event, at FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3
         AND event IN ('set', 'removed', 'deleted') ORDER BY id",
    )?;
    let events = stmt
        .query_map(
            params![id.subject, id.predicate, id.scope.to_string()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?
        .collect::<rusqlite::Result<Vec<(String, String)>>>()?;
    Ok(crate::store::events::live_intervals(events, now))
}

/// The versions of other scopes that keep content a rescope moved into `id`
/// (`events::moved_copies`) with the event id they are destroyed as of
/// (`events::DELETED_AS_OF_SQL`) — but none of an identity in `covered`, which the same delete
/// destroys whole.
fn moved_copies(
    conn: &Connection,
    id: &Identity,
    covered: &[Identity],
) -> Result<(i64, Vec<(String, i64)>)> {
    use crate::store::events::{DELETED_AS_OF_SQL, RESCOPE_EVENTS_SQL};
    let as_of: i64 = conn
        .prepare_cached(&numbered_parameters(DELETED_AS_OF_SQL))?
        .query_row(
            params![id.subject, id.predicate, id.scope.to_string()],
            |r| r.get(0),
        )?;
    let events = conn
        .prepare_cached(&numbered_parameters(RESCOPE_EVENTS_SQL))?
        .query_map(params![id.subject, id.predicate, as_of], |r| {
            rescope_event(r, 0)
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let destroyed = crate::store::events::destroyed_scopes(id, covered);
    Ok((
        as_of,
        crate::store::events::moved_copies(&id.scope.to_string(), &events, &destroyed),
    ))
}

/// What the copies a rescope left of `id`'s content still keep (`events::copy_kept`), for the
/// preview: what [`blank_moved_copies`] would take.
fn moved_copies_kept(conn: &Connection, id: &Identity, covered: &[Identity]) -> Result<CopyKept> {
    let (as_of, copies) = moved_copies(conn, id, covered)?;
    let mut kept = CopyKept::default();
    for (scope, version) in copies {
        kept.add(crate::store::events::copy_kept(|sql| {
            Ok(conn.prepare_cached(&numbered_parameters(sql))?.query_row(
                params![id.subject, id.predicate, scope, version, as_of],
                |r| r.get(0),
            )?)
        })?);
    }
    Ok(kept)
}

/// Blanks the copies a rescope left of `id`'s content in other scopes (none in `covered`);
/// what it took.
fn blank_moved_copies(conn: &Connection, id: &Identity, covered: &[Identity]) -> Result<CopyKept> {
    let (as_of, copies) = moved_copies(conn, id, covered)?;
    blank_copies(
        conn,
        copies.into_iter().map(|(at, version)| KeptCopy {
            subject: id.subject.clone(),
            predicate: id.predicate.clone(),
            scope: id.scope.to_string(),
            at,
            version,
            as_of,
        }),
    )
}

/// Blanks what an earlier release's delete or gc kept of deleted content — the sources of writes
/// refused before a tombstone was collected, the copies a rescope left of a tombstoned memory —
/// as this release's delete and gc blank them; how many events. `import` runs it on what it
/// loaded, so a dump of such a database imports (found by review: it was refused, with nothing
/// left to repair when the dump is all there is).
pub(super) fn blank_kept_content(conn: &Connection) -> Result<i64> {
    use crate::store::events::kept_copies;
    let n = conn.execute(crate::store::events::BLANK_COLLECTED_SOURCES_SQL, [])? as i64;
    // One pass over history for every tombstone, standing or collected, as on PostgreSQL (a
    // scope memscope could not have stored is blanked as written, and left to the field rules
    // to name by its line).
    let logged = logged_events(conn)?;
    let tombstoned: Vec<(String, String, String)> = conn
        .prepare("SELECT subject, predicate, scope FROM tombstones")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(n + blank_copies(conn, kept_copies(&logged, &tombstoned))?.events)
}

/// A row's [`crate::store::events::RescopeEvent`] whose event starts at column `first`
/// (`event, scope, version, detail`).
fn rescope_event(
    r: &rusqlite::Row<'_>,
    first: usize,
) -> rusqlite::Result<crate::store::events::RescopeEvent> {
    Ok(crate::store::events::RescopeEvent {
        event: r.get(first)?,
        scope: r.get(first + 1)?,
        version: r.get(first + 2)?,
        detail: r.get(first + 3)?,
    })
}

/// Blanks the copies a rescope left of memories whose tombstones were collected
/// (`events::collected_copies`); how many events.
fn blank_collected_copies(conn: &Connection) -> Result<i64> {
    let logged = logged_events(conn)?;
    Ok(blank_copies(
        conn,
        crate::store::events::collected_copies(&logged, |_, _, _| false),
    )?
    .events)
}

/// The rows `events::KEPT_COPY_EVENTS_SQL` reads.
fn logged_events(conn: &Connection) -> Result<Vec<crate::store::events::LoggedEvent>> {
    Ok(conn
        .prepare_cached(crate::store::events::KEPT_COPY_EVENTS_SQL)?
        .query_map([], |r| {
            Ok(crate::store::events::LoggedEvent {
                id: r.get(0)?,
                subject: r.get(1)?,
                predicate: r.get(2)?,
                event: rescope_event(r, 3)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Blanks `copies` everywhere they are kept (`events::blank_copy`); what it took.
fn blank_copies(conn: &Connection, copies: impl IntoIterator<Item = KeptCopy>) -> Result<CopyKept> {
    let mut took = CopyKept::default();
    for c in copies {
        took.add(crate::store::events::blank_copy(|sql| {
            Ok(conn
                .prepare_cached(&numbered_parameters(sql))?
                .execute(params![c.subject, c.predicate, c.at, c.version, c.as_of])?
                as i64)
        })?);
    }
    Ok(took)
}

/// How many of `id`'s refused writes keep their source (`events::REFUSED_SOURCES_COUNT_SQL`).
fn refused_sources(conn: &Connection, id: &Identity) -> Result<i64> {
    Ok(conn
        .prepare_cached(&numbered_parameters(
            crate::store::events::REFUSED_SOURCES_COUNT_SQL,
        ))?
        .query_row(
            params![id.subject, id.predicate, id.scope.to_string()],
            |r| r.get(0),
        )?)
}

/// Blanks the sources of `id`'s refused writes, and refuses when the database did not
/// (`events::check_sources_blanked`); how many.
fn blank_refused_sources(conn: &Connection, id: &Identity) -> Result<i64> {
    let n = conn
        .prepare_cached(&numbered_parameters(
            crate::store::events::BLANK_REFUSED_SOURCES_SQL,
        ))?
        .execute(params![id.subject, id.predicate, id.scope.to_string()])? as i64;
    crate::store::events::check_sources_blanked(id, refused_sources(conn, id)?)?;
    Ok(n)
}

/// What is left of an identity: content rows of history, current records, the tombstone's
/// version — before a delete (is there anything to destroy?) and after it (was it carried out?).
fn left_of(conn: &Connection, id: &Identity) -> Result<crate::store::events::Left> {
    Ok(conn.query_row(
        &numbered_parameters(crate::store::events::LEFT_OF_SQL),
        params![id.subject, id.predicate, id.scope.to_string()],
        |r| {
            Ok(crate::store::events::Left {
                history: r.get(0)?,
                beyond_trail: r.get(1)?,
                records: r.get(2)?,
                tombstone: r.get(3)?,
                tombstones: r.get(4)?,
            })
        },
    )?)
}

/// Pending items a predicate or subject delete destroys whatever their candidates.
fn pending_of_target(conn: &Connection, target: &DeleteTarget) -> Result<Vec<i64>> {
    let (subject, predicate) = match target {
        DeleteTarget::Identity(_) => return Ok(vec![]),
        DeleteTarget::Predicate { subject, predicate } => (subject, Some(predicate)),
        DeleteTarget::Subject(subject) => (subject, None),
    };
    let mut stmt = conn.prepare_cached(
        "SELECT id FROM pending WHERE subject = ?1 AND (?2 IS NULL OR predicate = ?2) ORDER BY id",
    )?;
    let ids = stmt
        .query_map(params![subject, predicate], |r| r.get(0))?
        .collect::<Result<Vec<i64>, _>>()?;
    Ok(ids)
}

/// The reads whose notes a delete destroys (README, "delete"): an agent's note may repeat the
/// value it was told, so every note that can have seen the deleted content goes with it —
/// every read of the subject (a subject delete), of the predicate (a predicate delete), or
/// whose resolution chain included the identity: a global identity is in every chain of its
/// predicate, `repo:X` in the chains of reads made in X, `task:Y` likewise.
/// Returns a WHERE clause over `reads` and its parameters.
fn covered_reads(target: &DeleteTarget) -> (&'static str, Vec<String>) {
    match target {
        DeleteTarget::Subject(s) => ("subject = ?1", vec![s.clone()]),
        DeleteTarget::Predicate { subject, predicate } => (
            "subject = ?1 AND predicate = ?2",
            vec![subject.clone(), predicate.clone()],
        ),
        DeleteTarget::Identity(id) => {
            let (sql, place) = match &id.scope {
                Scope::Global => ("subject = ?1 AND predicate = ?2", None),
                Scope::Repo(r) => ("subject = ?1 AND predicate = ?2 AND repo = ?3", Some(r)),
                Scope::Task(t) => ("subject = ?1 AND predicate = ?2 AND task = ?3", Some(t)),
            };
            let mut params = vec![id.subject.clone(), id.predicate.clone()];
            params.extend(place.cloned());
            (sql, params)
        }
    }
}

/// How many notes a delete of `target` would destroy.
fn covered_notes(conn: &Connection, target: &DeleteTarget) -> Result<i64> {
    let (filter, params) = covered_reads(target);
    Ok(conn.query_row(
        &format!("SELECT count(*) FROM reads WHERE note IS NOT NULL AND {filter}"),
        rusqlite::params_from_iter(params.iter()),
        |r| r.get(0),
    )?)
}

/// Destroys the notes a delete of `target` covers; the reads themselves stay (who read what
/// version when), their words do not.
fn purge_covered_notes(conn: &Connection, target: &DeleteTarget) -> Result<i64> {
    let (filter, params) = covered_reads(target);
    Ok(conn.execute(
        &format!("UPDATE reads SET note = NULL WHERE note IS NOT NULL AND {filter}"),
        rusqlite::params_from_iter(params.iter()),
    )? as i64)
}

fn normalize_target(store: &Store, target: &DeleteTarget) -> Result<DeleteTarget> {
    let subj = |s: &str| super::spellings::find_subject(&store.conn, s);
    Ok(match target {
        DeleteTarget::Identity(id) => DeleteTarget::Identity(super::spellings::find_identity(
            &store.conn,
            &Identity {
                predicate: store.canonical_predicate(&id.predicate)?,
                ..id.clone()
            },
        )?),
        DeleteTarget::Predicate { subject, predicate } => DeleteTarget::Predicate {
            subject: subj(subject)?,
            predicate: store.canonical_predicate(predicate)?,
        },
        DeleteTarget::Subject(s) => DeleteTarget::Subject(subj(s)?),
    })
}

/// What a delete of the (normalized) target would destroy, read inside the caller's snapshot.
fn preview_in(conn: &Connection, target: &DeleteTarget) -> Result<DeletePreview> {
    let ids = covered_identities(conn, target)?;
    let covered = ids.clone();
    let mut p = DeletePreview::default();
    let mut pending: BTreeSet<i64> = BTreeSet::new();
    // Resolved items that wrote a moved copy, and its reads' notes, go with it.
    let mut moved_pending = 0;
    for id in ids {
        let scope = id.scope.to_string();
        // An item an identity earlier in this delete names goes with that one (the delete
        // purges it there), so it leaves nothing of this one.
        let naming: Vec<i64> = pending_naming(
            conn,
            &id.subject,
            &id.predicate,
            std::slice::from_ref(&scope),
        )?
        .into_iter()
        .filter(|pid| !pending.contains(pid))
        .collect();
        // Copies a rescope left elsewhere go even when the identity itself was deleted
        // before (by a release that left them).
        let kept = moved_copies_kept(conn, &id, &covered)?;
        p.moved_copies += kept.events;
        moved_pending += kept.pending;
        p.read_notes += kept.notes;
        let left = left_of(conn, &id)?;
        if left.nothing_to_destroy(&id, !naming.is_empty())?.is_some() {
            p.refused_sources += refused_sources(conn, &id)?;
            p.already_deleted.push(id);
            continue;
        }
        let (versions, raws, events): (i64, i64, i64) = conn.query_row(
            &numbered_parameters(crate::store::events::PURGED_HISTORY_COUNTS_SQL),
            params![id.subject, id.predicate, scope],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        p.live_records += left.records;
        p.versions += versions;
        p.raw_texts += raws;
        p.events += events;
        pending.extend(naming);
        p.identities.push(id);
    }
    pending.extend(pending_of_target(conn, target)?);
    p.pending_items = pending.len() as i64 + moved_pending;
    p.read_notes += covered_notes(conn, target)?;
    Ok(p)
}

impl Store {
    /// What a delete would destroy — the decision `delete` takes, run without writing: the
    /// same identities, pending items and read-log notes, and the same refusal of a target
    /// that matches nothing. For confirm dialogs and `delete --dry-run`.
    pub fn delete_preview(&self, target: &DeleteTarget) -> Result<DeletePreview> {
        let target = normalize_target(self, target)?;
        // One read snapshot, so the counts agree with each other.
        self.conn.execute_batch("BEGIN")?;
        let preview = preview_in(&self.conn, &target);
        super::end_open_transaction(&self.conn);
        preview
    }

    /// Tombstones and purges the target in one transaction, then truncates the WAL so the
    /// deleted bytes are in no file. A reader that blocks the truncation leaves a recorded debt.
    pub fn delete(&mut self, target: &DeleteTarget, reason: Option<&str>) -> Result<DeleteReport> {
        // A reason PostgreSQL could not store would keep this database from moving there.
        if let Some(reason) = reason {
            crate::model::refuse_nul("the delete's reason", reason)?;
        }
        let path = self.path.clone();
        let mut report = self
            .delete_in_tx(target, reason)
            .map_err(|e| super::explain_sqlite(e, &path))?;
        // Whether what was destroyed stayed destroyed rests on the guards (README, "Deletion").
        report.guards_missing = !report.changed_nothing()
            && !super::check::Sqlite(&self.conn)
                .guards_present()
                .unwrap_or(true);
        Ok(report)
    }

    fn delete_in_tx(
        &mut self,
        target: &DeleteTarget,
        reason: Option<&str>,
    ) -> Result<DeleteReport> {
        let target = normalize_target(self, target)?;
        let (mut report, disk_purged) = self.in_purge_tx(|tx, ctx, st| {
        let now = ctx.now.clone();
        let ids = covered_identities(tx, &target)?;
        let mut report = DeleteReport {
            tombstoned: vec![],
            already_deleted: vec![],
            purged_versions: 0,
            purged_pending: 0,
            purged_notes: 0,
            disk_purged: true,
            disk_note: None,
            guards_missing: false,
            blanked_copies: 0,
            blanked_sources: 0,
        };
        // The `deleted` events record the causal clock: the events they purge may be the ones
        // that held its latest value.
        let clock = st.seqs.current(tx)?;
        let mut purged_ids: Vec<i64> = Vec::new();
        let mut moved_notes = 0;
        let result = (|| -> Result<()> {
            for id in &ids {
                let scope = id.scope.to_string();
                let pending = pending_naming(tx, &id.subject, &id.predicate, std::slice::from_ref(&scope))?;
                let took = blank_moved_copies(tx, id, &ids)?;
                report.blanked_copies += took.events;
                report.purged_pending += took.pending;
                moved_notes += took.notes;
                if let Some(version) = left_of(tx, id)?.nothing_to_destroy(id, !pending.is_empty())? {
                    // Its refused writes' sources are all that can be left of it; a delete
                    // now takes them with the rest of its history.
                    report.blanked_sources += blank_refused_sources(tx, id)?;
                    report.already_deleted.push(TombstoneRef::of(id, version));
                    continue;
                }
                let version = max_version(tx, id)? + 1;
                // How many versions are destroyed, and when the identity held a record:
                // times, not content, so that as-of resolution can still say it existed.
                let purged: i64 = tx.query_row(
                    "SELECT count(DISTINCT version) FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3 AND event = 'set'",
                    params![id.subject, id.predicate, scope],
                    |r| r.get(0),
                )?;
                let live_intervals = live_intervals(tx, id, &now)?;
                let record: Option<i64> = tx.query_row(
                    "SELECT max(version) FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
                    params![id.subject, id.predicate, scope],
                    |r| r.get(0),
                )?;
                let detail = crate::store::events::deleted_detail(reason, purged, live_intervals, record);
                // Logged first, so the newest history id is never the one purged (ids never reused).
                Event::new(EventKind::Deleted, id).version(Some(version)).detail(&detail)
                    .clock(Some(clock)).log(tx, &now)?;
                tx.execute(
                    &numbered_parameters(crate::store::events::PURGE_HISTORY_SQL),
                    params![id.subject, id.predicate, scope],
                )?;
                tx.execute(
                    "DELETE FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
                    params![id.subject, id.predicate, scope],
                )?;
                tx.execute(
                    "INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT(subject, predicate, scope) DO UPDATE SET version = ?4, reason = ?5, deleted_at = ?6",
                    params![id.subject, id.predicate, scope, version, reason, now],
                )
                .map_err(|e| match &e {
                    // SQLite finds no key to conflict on when it prepares the statement.
                    rusqlite::Error::SqliteFailure(_, Some(m)) if m.contains("ON CONFLICT clause does not match") => {
                        anyhow::anyhow!(crate::store::check::TOMBSTONE_KEY_GONE)
                    }
                    _ => e.into(),
                })?;
                crate::store::events::check_carried_out(id, left_of(tx, id)?, version)?;
                for pid in pending {
                    report.purged_pending +=
                        tx.execute("DELETE FROM pending WHERE id = ?1", [pid])? as i64;
                    purged_ids.push(pid);
                }
                report.purged_versions += purged;
                report.tombstoned.push(TombstoneRef::of(id, version));
            }
            Ok(())
        })();
        result?;
        // A predicate or subject delete also destroys every pending item of it, including
        // items whose candidate scopes never held a record.
        for pid in pending_of_target(tx, &target)? {
            report.purged_pending += tx.execute("DELETE FROM pending WHERE id = ?1", [pid])? as i64;
            purged_ids.push(pid);
        }
        let remaining = tx
            .prepare("SELECT id FROM pending WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id")?
            .query_map([serde_json::to_string(&purged_ids)?], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?;
        crate::store::events::check_pending_gone(&remaining)?;
        report.purged_notes = moved_notes + purge_covered_notes(tx, &target)?;
        Ok(report)
        }, |_| true)?;
        report.disk_purged = disk_purged;
        Ok(report)
    }

    /// Lifts a tombstone; later writes to the identity are accepted again.
    pub fn restore(&mut self, id: &Identity) -> Result<TombstoneRef> {
        let path = self.path.clone();
        self.restore_in_tx(id)
            .map_err(|e| super::explain_sqlite(e, &path))
    }

    fn restore_in_tx(&mut self, id: &Identity) -> Result<TombstoneRef> {
        let id = super::spellings::find_identity(
            &self.conn,
            &Identity {
                predicate: self.canonical_predicate(&id.predicate)?,
                ..id.clone()
            },
        )?;
        self.in_write_tx(|tx, ctx, _| {
        let now = &ctx.now;
        // Every row RETURNING names is deleted by its first step: a second tombstone (a raw
        // client dropped the key) is refused, and the transaction rolls both back.
        let version: Option<i64> = super::rows::identity_row(
            tx,
            "tombstones",
            "DELETE FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3 RETURNING version",
            &id,
            |r| r.get(0),
        )?;
        let Some(version) = version else {
            bail!("{id} is not deleted: there is no tombstone to restore (see `memscope list` or the UI's tombstones tab)");
        };
        Event::new(EventKind::Restored, &id)
            .detail(&json!({ "tombstone_version": version }))
            .log(tx, now)?;
        Ok(TombstoneRef {
            subject: id.subject.clone(),
            predicate: id.predicate.clone(),
            scope: id.scope.to_string(),
            version,
        })
        })
    }

    /// Tries to checkpoint and truncate the WAL. Returns true when no purge debt remains.
    pub fn pay_purge_debt(&mut self) -> Result<bool> {
        if self.read_only || !purge_debt_owed(&self.conn)? {
            return Ok(true);
        }
        if self.truncate_wal()? {
            // Clearing the debt writes a WAL frame; truncate again so the WAL ends empty.
            self.conn
                .execute("DELETE FROM settings WHERE key = ?1", [DEBT_KEY])?;
            if self.truncate_wal()? {
                return Ok(true);
            }
            let now = self.now();
            self.conn.execute(
                "INSERT OR IGNORE INTO settings (key, value) VALUES (?1, ?2)",
                params![DEBT_KEY, now],
            )?;
        }
        Ok(false)
    }

    /// `wal_checkpoint(TRUNCATE)`, waiting only briefly for readers.
    fn truncate_wal(&mut self) -> Result<bool> {
        self.truncate_wal_waiting(Some(short_busy_handler))
    }

    /// `wal_checkpoint(TRUNCATE)`, with `wait` as the busy handler while it runs (`None`: it
    /// gives up at once when a reader or writer is in the way). Whether the log ended empty.
    pub(super) fn truncate_wal_waiting(&mut self, wait: Option<fn(i32) -> bool>) -> Result<bool> {
        if self.file_moved() {
            // The `-wal` at the path may be another database's now (`Store::file_moved`).
            return Ok(false);
        }
        self.checkpoint_truncate(wait)
    }

    /// `PRAGMA wal_checkpoint(TRUNCATE)` with `wait` as the busy handler; `Ok(false)` when a
    /// reader or writer was in the way.
    pub(super) fn checkpoint_truncate(&mut self, wait: Option<fn(i32) -> bool>) -> Result<bool> {
        self.conn.busy_handler(wait)?;
        let result: rusqlite::Result<(i64, i64, i64)> =
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                });
        self.conn.busy_handler(Some(busy_handler))?;
        match result {
            Ok((busy, _log, _done)) => Ok(busy == 0),
            Err(rusqlite::Error::SqliteFailure(f, _))
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// When the purge debt was recorded, if one is owed.
    pub fn purge_debt(&self) -> Result<Option<String>> {
        self.setting(DEBT_KEY)
    }

    /// Retention purge and tombstone collection, then pays any purge debt.
    pub fn gc(
        &mut self,
        retention_days: Option<i64>,
        tombstone_days: Option<i64>,
    ) -> Result<GcReport> {
        let path = self.path.clone();
        self.gc_in_tx(retention_days, tombstone_days)
            .map_err(|e| super::explain_sqlite(e, &path))
    }

    fn gc_in_tx(
        &mut self,
        retention_days: Option<i64>,
        tombstone_days: Option<i64>,
    ) -> Result<GcReport> {
        let plan = GcPlan::new(retention_days, tombstone_days, |key| self.setting(key))?;
        let clock = self.clock;
        let (mut report, disk_purged) = self.in_purge_tx(|tx, ctx, _| {
        let now_t = clock.now();
        let now = ctx.now.clone();
        for (key, days) in &plan.saved {
            tx.execute(
                "INSERT OR REPLACE INTO settings (key, value) VALUES (?1, ?2)",
                params![key, days],
            )?;
        }
        let mut report = plan.report();
        let result = (|| -> Result<()> {
            if let Some(cutoff) = plan.retention_cutoff(now_t) {
                let cutoff = format_time(cutoff);
                // Content and sources of old events, but the live memory's provenance.
                report.purged_events = tx.execute(
                    &numbered_parameters(crate::store::gc::RETENTION_PURGE_SQL),
                    [&cutoff],
                )? as i64;
                report.purged_pending = tx.execute(
                    "DELETE FROM pending WHERE status <> 'open' AND coalesce(resolved_at, created_at) < ?1",
                    [&cutoff],
                )? as i64;
                report.purged_reads =
                    tx.execute("DELETE FROM reads WHERE at < ?1", [&cutoff])? as i64;
            }
            if let Some(cutoff) = plan.tombstone_cutoff(now_t) {
                let cutoff = format_time(cutoff);
                let mut stmt = tx.prepare(
                    "SELECT subject, predicate, scope,
                            EXISTS (SELECT 1 FROM history h WHERE h.subject = t.subject AND h.predicate = t.predicate
                                    AND h.scope = t.scope AND (h.value IS NOT NULL OR h.raw IS NOT NULL)),
                            EXISTS (SELECT 1 FROM memories m WHERE m.subject = t.subject AND m.predicate = t.predicate AND m.scope = t.scope)
                     FROM tombstones t WHERE deleted_at < ?1",
                )?;
                let old: Vec<(String, String, String, bool, bool)> = stmt
                    .query_map([&cutoff], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                    })?
                    .collect::<Result<_, _>>()?;
                for (subject, predicate, scope, content, live) in old {
                    if !tombstone_collectable(content, live) {
                        continue;
                    }
                    let id = Identity {
                        subject,
                        predicate,
                        scope: Scope::parse(&scope).map_err(|e| anyhow!(e))?,
                    };
                    // Once the tombstone is gone nothing finds the copies a rescope left of
                    // it: an earlier release's delete may have kept some. As of the delete it
                    // stands for, so before it goes.
                    report.blanked_copies += blank_moved_copies(tx, &id, &[])?.events;
                    tx.execute(
                        "DELETE FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
                        params![id.subject, id.predicate, id.scope.to_string()],
                    )?;
                    Event::new(EventKind::TombstoneCollected, &id).log(tx, &now)?;
                    report.collected_tombstones += 1;
                }
            }
            // Every run, so one an earlier release left is blanked too (`check` says so).
            report.blanked_sources =
                tx.execute(crate::store::events::BLANK_COLLECTED_SOURCES_SQL, [])? as i64;
            report.blanked_copies += blank_collected_copies(tx)?;
            Ok(())
        })();
        result?;
        Ok(report)
        }, GcReport::purged_content)?;
        report.disk_purged = disk_purged;
        Ok(report)
    }
}
