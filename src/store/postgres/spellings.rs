//! `init`'s merge of a place stored in two spellings on PostgreSQL (README, "check", invariant
//! 6): the decisions of [`crate::store::merge`] as SQLite takes them
//! (`sqlite::spellings::merge_spellings`) — the same spelling kept, the same record, the same
//! `merged` events and pending items — in one transaction, history rewritten through the
//! schema's purge gate as `delete` does; then the touched tables are vacuumed as after a delete
//! when a deleted memory's content went.

use super::schema;
use super::store::{bump_metric, log_event, PgStore, Tx};
use crate::store::events::EventKind;
use crate::store::merge::{self, Choice, Fate, Key, Live, Member, MergeReport, Seen};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};

const SUBJECT: &str = "subject";
const SCOPE: &str = "scope";

/// Every spelling of a subject the database holds, with its first event and whether a write
/// stored it (the read log's only name it).
const SEEN_SUBJECTS: &str = "SELECT s, min(f), bool_or(w) FROM (
        SELECT subject AS s, id AS f, true AS w FROM history
        UNION ALL SELECT subject, 9223372036854775807, true FROM memories
        UNION ALL SELECT subject, 9223372036854775807, true FROM tombstones
        UNION ALL SELECT subject, 9223372036854775807, true FROM pending
        UNION ALL SELECT subject, 9223372036854775807, false FROM reads) seen
     GROUP BY s";

/// [`SEEN_SUBJECTS`] for repository and task scopes.
const SEEN_SCOPES: &str = "SELECT s, min(f), bool_or(w) FROM (
        SELECT scope AS s, id AS f, true AS w FROM history
        UNION ALL SELECT scope, 9223372036854775807, true FROM memories
        UNION ALL SELECT scope, 9223372036854775807, true FROM tombstones
        UNION ALL SELECT resolved_scope, 9223372036854775807, true FROM pending WHERE resolved_scope IS NOT NULL
        UNION ALL SELECT c #>> '{}', 9223372036854775807, true FROM pending p, json_array_elements(p.candidates::json) c
            WHERE json_typeof(c) = 'string'
        UNION ALL SELECT scope, 9223372036854775807, false FROM reads WHERE scope IS NOT NULL
        UNION ALL SELECT 'repo:' || repo, 9223372036854775807, false FROM reads WHERE repo IS NOT NULL
        UNION ALL SELECT 'task:' || task, 9223372036854775807, false FROM reads WHERE task IS NOT NULL) seen
     WHERE s <> 'global'
     GROUP BY s";

impl PgStore {
    /// `init`'s merge of a place stored in two spellings, when one is (SQLite's
    /// `Store::merge_places`); a login that may not purge history is refused in one sentence.
    pub fn merge_places(&mut self) -> Result<MergeReport> {
        let user = self.address().user().to_string();
        let (mut report, owed) = self.in_change_tx(|t| {
            if !crate::store::check::stored_twice(&mut super::check::Pg(t.txn()?))? {
                return Ok((MergeReport::default(), None));
            }
            let may: bool = t
                .one("SELECT memscope_may_purge($1)", &[&schema::CURATOR_ROLE])?
                .get(0);
            if !may {
                bail!(
                    "a place is stored in two spellings, and merging them rewrites history, which only {} or the owner of memscope's tables may do, and user \"{user}\" is neither: run init with the owner's connection string",
                    schema::CURATOR_ROLE
                );
            }
            // History may be rewritten by this transaction only (the schema's append-only guard).
            t.txn()?
                .batch_execute(&format!("SET LOCAL {} = 'on'", schema::PURGE_SETTING))?;
            let report = merge_spellings(t)?;
            let owed = match report.purged_spellings {
                0 => None,
                _ => Some(super::vacuum::owe(t.txn()?)?),
            };
            Ok((report, owed))
        })?;
        if let Some(owed) = owed {
            let cleanup = super::vacuum::after_purge_paying(
                self.connection()?,
                &super::vacuum::PURGED_TABLES,
                &owed,
            );
            if !cleanup.vacuumed {
                report.disk_note =
                    Some(cleanup.not_vacuumed_note("merged", &user, &super::vacuum::PURGED_TABLES));
            }
        }
        Ok(report)
    }
}

/// Brings every stored subject and repository/task scope to one spelling per place, as
/// SQLite's `merge_spellings` does; the purge gate is open.
fn merge_spellings(t: &mut Tx<'_>) -> Result<MergeReport> {
    let mut report = MergeReport::default();
    let subjects = seen(t, SEEN_SUBJECTS)?;
    let subjects = register(t, SUBJECT, subjects)?;
    let scopes = seen(t, SEEN_SCOPES)?;
    let scopes = register(t, SCOPE, scopes)?;
    report.merged_spellings = (subjects.renames.len() + scopes.renames.len()) as i64;
    report.respelled_reads = subjects.read_only + scopes.read_only;
    report.merged_places = subjects.places + scopes.places;
    let (subject_map, scope_map) = (subjects.renames, scopes.renames);
    if subject_map.is_empty() && scope_map.is_empty() {
        return Ok(report);
    }
    let from_subjects: Vec<String> = subject_map.keys().cloned().collect();
    let from_scopes: Vec<String> = scope_map.keys().cloned().collect();
    // Every identity a renamed spelling touches, grouped under the identity it becomes.
    let mut groups: BTreeMap<Key, Vec<Key>> = BTreeMap::new();
    for r in t.all(
        "SELECT DISTINCT subject, predicate, scope FROM (
            SELECT subject, predicate, scope FROM memories
            UNION ALL SELECT subject, predicate, scope FROM history
            UNION ALL SELECT subject, predicate, scope FROM tombstones) ids
         WHERE subject = ANY($1) OR scope = ANY($2)",
        &[&from_subjects, &from_scopes],
    )? {
        let id: Key = (r.get(0), r.get(1), r.get(2));
        groups
            .entry(merge::target(&id, &subject_map, &scope_map))
            .or_default()
            .push(id);
    }
    for (to, mut members) in groups {
        if has_data(t, &to)? {
            members.push(to.clone());
        }
        merge_identity(t, &to, members, &mut report)?;
    }
    rename_rest(t, &subject_map, &scope_map)?;
    bump_metric(t, "spellings_merged", report.merged_spellings)?;
    Ok(report)
}

fn seen(t: &mut Tx<'_>, sql: &'static str) -> Result<Vec<Seen>> {
    Ok(t.all(sql, &[])?
        .iter()
        .map(|r| Seen {
            spelling: r.get(0),
            first: r.get(1),
            written: r.get(2),
        })
        .collect())
}

/// The spelling each place of `kind` keeps ([`merge::choose`]), registered where the registry
/// had no row for it.
fn register(t: &mut Tx<'_>, kind: &str, seen: Vec<Seen>) -> Result<Choice> {
    let registered: BTreeMap<String, String> = t
        .all(
            "SELECT folded, spelling FROM spellings WHERE kind = $1",
            &[&kind],
        )?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let choice = merge::choose(kind, seen, &registered);
    for (folded, spelling) in &choice.register {
        t.exec(
            "INSERT INTO spellings (kind, folded, spelling) VALUES ($1, $2, $3)",
            &[&kind, folded, spelling],
        )?;
    }
    Ok(choice)
}

fn has_data(t: &mut Tx<'_>, id: &Key) -> Result<bool> {
    Ok(t.one(merge::HAS_DATA_SQL, &[&id.0, &id.1, &id.2])?.get(0))
}

/// One spelling of an identity as it stands: its first event, its tombstone, its record.
fn member(t: &mut Tx<'_>, key: Key) -> Result<Member> {
    let r = t.one(
        "SELECT (SELECT min(id) FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3),
                EXISTS (SELECT 1 FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = $3)",
        &[&key.0, &key.1, &key.2],
    )?;
    let (first_event, tombstoned): (Option<i64>, bool) = (r.get(0), r.get(1));
    let live = t
        .opt(
            "SELECT value, raw, source, causal_seq FROM memories
             WHERE subject = $1 AND predicate = $2 AND scope = $3",
            &[&key.0, &key.1, &key.2],
        )?
        .map(|r| Live::stored(r.get(0), r.get(1), r.get(2), r.get(3)));
    Ok(Member {
        key,
        first_event: first_event.unwrap_or(i64::MAX),
        tombstoned,
        live,
    })
}

/// Makes `members` (spellings of the identity `to`) one identity, spelled `to`, as
/// [`merge::keep`] decides.
fn merge_identity(
    t: &mut Tx<'_>,
    to: &Key,
    members: Vec<Key>,
    report: &mut MergeReport,
) -> Result<()> {
    // Every spelling's lock, in one order, as a write takes its identity's.
    let mut locks: Vec<&Key> = members.iter().chain([to]).collect();
    locks.sort();
    locks.dedup();
    for k in locks {
        t.exec(
            "SELECT memscope_identity_lock($1, $2, $3)",
            &[&k.0, &k.1, &k.2],
        )?;
    }
    let mut seen = Vec::with_capacity(members.len());
    for key in members {
        seen.push(member(t, key)?);
    }
    let kept = merge::keep(to, seen);
    let identity = merge::identity(to);
    for (m, fate) in kept.others {
        // Its events stay, on the one identity, as `merged` events (no version: the versions
        // are the kept record's); a deleted identity keeps none of their content. The detail
        // as SQLite's `json_object` writes it.
        t.exec(
            r#"UPDATE history SET subject = $4, scope = $5, event = 'merged', version = NULL,
                 detail = '{"from":' || to_json($6::text)::text || ',"event":' || to_json(event)::text
                     || ',"version":' || coalesce(version::text, 'null')
                     || ',"detail":' || coalesce(detail::json::text, 'null') || '}',
                 value = CASE WHEN $7 THEN NULL ELSE value END,
                 raw = CASE WHEN $7 THEN NULL ELSE raw END
             WHERE subject = $1 AND predicate = $2 AND scope = $3"#,
            &[&m.0, &m.1, &m.2, &to.0, &to.2, &merge::label(&m), &kept.deleted],
        )
        .with_context(|| format!("merging the events of {}", merge::label(&m)))?;
        for sql in merge::DROP_OTHER_SQL {
            t.exec(sql, &[&m.0, &m.1, &m.2])?;
        }
        let held = match fate {
            Fate::Purged => {
                report.purged_spellings += 1;
                continue;
            }
            Fate::Folded => continue,
            Fate::Queued(held) => held,
        };
        let id: i64 = t
            .one(
                "INSERT INTO pending (subject, predicate, value, raw, source, causal_seq, candidates, status, created_at, merged_from)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'open', memscope_now(), $8) RETURNING id",
                &[
                    &to.0,
                    &to.1,
                    &held.value.to_string(),
                    &held.raw,
                    &held.source,
                    &held.causal_seq,
                    &json!([to.2]).to_string(),
                    &merge::label(&m),
                ],
            )?
            .get(0);
        let detail = merge::queued_detail(&m, id);
        log_event(
            t,
            EventKind::Merged,
            &identity,
            None,
            None,
            None,
            Some(&detail),
            None,
        )?;
        report.queued_conflicts += 1;
    }
    let o = kept.owner;
    if o != *to {
        for sql in merge::MOVE_KEPT_SQL {
            t.exec(sql, &[&o.0, &o.1, &o.2, &to.0, &to.2])?;
        }
        t.exec(merge::DROP_OTHER_SQL[0], &[&o.0, &o.1, &o.2])?;
    }
    Ok(())
}

/// The pending queue and the read log take the first spellings too.
fn rename_rest(
    t: &mut Tx<'_>,
    subjects: &HashMap<String, String>,
    scopes: &HashMap<String, String>,
) -> Result<()> {
    for (from, to) in subjects {
        t.exec(
            "UPDATE pending SET subject = $2 WHERE subject = $1",
            &[from, to],
        )?;
        t.exec(
            "UPDATE reads SET subject = $2 WHERE subject = $1",
            &[from, to],
        )?;
    }
    for (from, to) in scopes {
        t.exec(
            "UPDATE pending SET resolved_scope = $2 WHERE resolved_scope = $1",
            &[from, to],
        )?;
        t.exec("UPDATE reads SET scope = $2 WHERE scope = $1", &[from, to])?;
        t.exec(
            "UPDATE reads SET repo = substr($2, 6) WHERE 'repo:' || repo = $1",
            &[from, to],
        )?;
        t.exec(
            "UPDATE reads SET task = substr($2, 6) WHERE 'task:' || task = $1",
            &[from, to],
        )?;
    }
    // Candidates are a JSON list: rewritten here, keeping their order, dropping repeats.
    if !scopes.is_empty() {
        for r in t.all("SELECT id, candidates FROM pending", &[])? {
            let (id, text): (i64, String) = (r.get(0), r.get(1));
            let Ok(list) = serde_json::from_str::<Vec<String>>(&text) else {
                continue;
            };
            let Some(out) = merge::respelled_candidates(list, scopes) else {
                continue;
            };
            t.exec(
                "UPDATE pending SET candidates = $2 WHERE id = $1",
                &[&id, &serde_json::to_string(&out)?],
            )?;
        }
    }
    // A finished item of a deleted identity whose resolution event the merge folded away
    // holds content written before the delete: it goes, as a delete would have taken it.
    let to_subjects: Vec<String> = subjects.values().cloned().collect();
    let to_scopes: Vec<String> = scopes.values().cloned().collect();
    t.exec(
        r#"DELETE FROM pending WHERE status <> 'open' AND resolved_scope IS NOT NULL
           AND (subject = ANY($1) OR resolved_scope = ANY($2))
           AND EXISTS (SELECT 1 FROM tombstones t WHERE t.subject = pending.subject
                AND t.predicate = pending.predicate AND t.scope = pending.resolved_scope)
           AND NOT EXISTS (SELECT 1 FROM history h WHERE h.subject = pending.subject
                AND h.predicate = pending.predicate AND h.scope = pending.resolved_scope
                AND h.event = 'pending_resolved'
                AND (substring(h.detail from '"pending_id"\s*:\s*(\d{1,18})'))::bigint = pending.id)"#,
        &[&to_subjects, &to_scopes],
    )?;
    Ok(())
}
