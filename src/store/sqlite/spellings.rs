//! One spelling per place (README, "One spelling per place"): a subject and a repository or
//! task id are compared case-insensitively — `repo:Web-App` and `--repo web-app` are one place —
//! and stored in the first spelling memscope met. The `spellings` table registers that first
//! spelling under the folded key ([`crate::spelling::fold`]); the write path registers new
//! ones, every read maps what it is asked through it, and [`merge_spellings`] brings a database
//! whose spellings were kept apart (schema v3, or an old export) to one spelling per place.

use super::check::numbered_parameters;
use super::events::{Event, EventKind};
use crate::model::{normalize_subject, Identity, Scope};
use crate::spelling::fold;
use crate::store::merge::{self, Fate, Key, Live, Member, Seen};
use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

const SUBJECT: &str = "subject";
const SCOPE: &str = "scope";

/// Bumped, before the change, whenever a connection of this process may change the scope
/// spellings (registers one, merges them, or clears them for an import): with `PRAGMA
/// data_version`, which tells of other connections' commits, it says when the places the
/// scope guard keeps between transactions ([`super::tx::KnownPlaces`]) may be out of date.
static SCOPE_SPELLINGS_GENERATION: AtomicU64 = AtomicU64::new(0);

pub(crate) fn scope_spellings_generation() -> u64 {
    SCOPE_SPELLINGS_GENERATION.load(Ordering::SeqCst)
}

pub(crate) fn scope_spellings_change() {
    SCOPE_SPELLINGS_GENERATION.fetch_add(1, Ordering::SeqCst);
}

fn lookup(conn: &Connection, kind: &str, folded: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT spelling FROM spellings WHERE kind = ?1 AND folded = ?2")?
        .query_row(params![kind, folded], |r| r.get(0))
        .optional()?)
}

/// The stored spelling of `text`; with `register`, `text` becomes the first spelling of a key
/// nobody used yet (the caller holds the write lock).
fn spelled(conn: &Connection, kind: &str, text: &str, register: bool) -> Result<String> {
    Ok(spelled_here(conn, kind, text, register)?.0)
}

/// [`spelled`], and whether this call registered the spelling.
fn spelled_here(
    conn: &Connection,
    kind: &str,
    text: &str,
    register: bool,
) -> Result<(String, bool)> {
    let folded = fold(text);
    if let Some(s) = lookup(conn, kind, &folded)? {
        return Ok((s, false));
    }
    if register {
        if kind == SCOPE {
            scope_spellings_change();
        }
        conn.prepare_cached("INSERT INTO spellings (kind, folded, spelling) VALUES (?1, ?2, ?3)")?
            .execute(params![kind, folded, text])?;
    }
    Ok((text.to_string(), register))
}

/// A subject as it is stored.
pub(crate) fn subject(conn: &Connection, subject: &str, register: bool) -> Result<String> {
    spelled(conn, SUBJECT, subject, register)
}

/// A scope as it is stored (`global` has one spelling).
pub(crate) fn scope(conn: &Connection, scope: &Scope, register: bool) -> Result<Scope> {
    if *scope == Scope::Global {
        return Ok(Scope::Global);
    }
    let text = spelled(conn, SCOPE, &scope.to_string(), register)?;
    Ok(respelled(scope, &text))
}

/// `scope` in the stored spelling `text` of its place.
fn respelled(scope: &Scope, text: &str) -> Scope {
    match (scope, text.split_once(':')) {
        (Scope::Repo(_), Some((_, id))) => Scope::Repo(id.to_string()),
        (Scope::Task(_), Some((_, id))) => Scope::Task(id.to_string()),
        _ => scope.clone(),
    }
}

/// A subject as a person gave it, normalized and in its stored spelling (looked up only: a
/// read never registers a spelling).
pub(crate) fn find_subject(conn: &Connection, raw: &str) -> Result<String> {
    let s = normalize_subject(raw).map_err(crate::model::InvalidRequest)?;
    subject(conn, &s, false)
}

/// A filter's subject in its stored spelling; one that could not be stored (control
/// characters…) is matched as given, and so matches nothing.
pub(crate) fn filter_subject(conn: &Connection, raw: &str) -> Result<String> {
    match normalize_subject(raw) {
        Ok(s) => subject(conn, &s, false),
        Err(_) => Ok(raw.trim().to_string()),
    }
}

/// An identity as it is stored; the predicate is the caller's (it goes through the aliases).
pub(crate) fn find_identity(conn: &Connection, id: &Identity) -> Result<Identity> {
    Ok(Identity {
        subject: find_subject(conn, &id.subject)?,
        predicate: id.predicate.clone(),
        scope: scope(conn, &id.scope, false)?,
    })
}

/// A repository or task id as it is stored (the id alone, as `resolve --repo` takes it).
pub(crate) fn find_context_id(
    conn: &Connection,
    kind: &str,
    id: Option<&str>,
) -> Result<Option<String>> {
    let Some(id) = id else { return Ok(None) };
    let text = spelled(conn, SCOPE, &format!("{kind}:{id}"), false)?;
    Ok(Some(
        text.split_once(':')
            .map(|(_, id)| id.to_string())
            .unwrap_or_else(|| id.to_string()),
    ))
}

/// Every repository and task scope memscope ever stored, in order: the places a database knows
/// (the scope guard looks for their ids in a write's words).
pub(crate) fn known_places(conn: &Connection) -> Result<Vec<Scope>> {
    let mut stmt = conn
        .prepare_cached("SELECT spelling FROM spellings WHERE kind = 'scope' ORDER BY spelling")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    Ok(rows
        .filter_map(|s| s.ok().and_then(|s| Scope::parse(&s).ok()))
        .collect())
}

/// Spellings a write transaction has looked up or registered (nothing else can change them
/// while it holds the write lock).
#[derive(Default)]
pub(crate) struct SpellingMemo {
    /// A subject as written → its stored spelling, `None` when it is that spelling already
    /// (the common case, which then costs no copy).
    subjects: HashMap<String, Option<String>>,
    scopes: HashMap<Scope, Option<Scope>>,
    /// Places this memo registered, in order, that the scope guard's known places have not
    /// taken in yet ([`super::tx::KnownPlaces`]); at most [`NEW_PLACES_KEPT`] (past that the
    /// guard reads the places again).
    pub(crate) new_places: Vec<Scope>,
}

/// How many newly registered places a memo keeps for the scope guard.
const NEW_PLACES_KEPT: usize = 4096;

impl SpellingMemo {
    /// The memo kept for the next transaction: forgotten whole when it has grown large (a bulk
    /// load of many subjects), so a long-lived store's memory stays bounded.
    pub(crate) fn bounded(self) -> SpellingMemo {
        if self.subjects.len() + self.scopes.len() > 50_000 {
            SpellingMemo::default()
        } else {
            self
        }
    }

    /// The stored spelling of a subject a write brings, when it differs from `text`.
    pub(crate) fn respell_subject(
        &mut self,
        conn: &Connection,
        text: &str,
    ) -> Result<Option<String>> {
        if let Some(s) = self.subjects.get(text) {
            return Ok(s.clone());
        }
        let s = subject(conn, text, true)?;
        let differs = (s != text).then_some(s);
        self.subjects.insert(text.to_string(), differs.clone());
        Ok(differs)
    }

    /// The stored spelling of a scope a write brings, when it differs from `sc`.
    pub(crate) fn respell_scope(&mut self, conn: &Connection, sc: &Scope) -> Result<Option<Scope>> {
        if *sc == Scope::Global {
            return Ok(None);
        }
        if let Some(s) = self.scopes.get(sc) {
            return Ok(s.clone());
        }
        let (text, registered) = spelled_here(conn, SCOPE, &sc.to_string(), true)?;
        let s = respelled(sc, &text);
        if registered && self.new_places.len() < NEW_PLACES_KEPT {
            self.new_places.push(s.clone());
        }
        let differs = (s != *sc).then_some(s);
        self.scopes.insert(sc.clone(), differs.clone());
        Ok(differs)
    }

    /// The stored spelling of a place memscope has stored, `None` for one it never has (so
    /// nothing is stored there). Looked up only: being where a write was made does not
    /// register a place's spelling, storing something there does.
    pub(crate) fn find_scope(&mut self, conn: &Connection, sc: &Scope) -> Result<Option<Scope>> {
        if let Some(s) = self.scopes.get(sc) {
            return Ok(Some(s.clone().unwrap_or_else(|| sc.clone())));
        }
        let Some(text) = lookup(conn, SCOPE, &fold(&sc.to_string()))? else {
            return Ok(None);
        };
        let stored = respelled(sc, &text);
        self.scopes
            .insert(sc.clone(), (stored != *sc).then(|| stored.clone()));
        Ok(Some(stored))
    }

    pub(crate) fn scope(&mut self, conn: &Connection, sc: &Scope) -> Result<Scope> {
        Ok(self.respell_scope(conn, sc)?.unwrap_or_else(|| sc.clone()))
    }

    /// An identity a write is about to touch, in its stored spelling.
    pub(crate) fn identity(&mut self, conn: &Connection, id: &Identity) -> Result<Identity> {
        Ok(Identity {
            subject: self
                .respell_subject(conn, &id.subject)?
                .unwrap_or_else(|| id.subject.clone()),
            predicate: id.predicate.clone(),
            scope: self.scope(conn, &id.scope)?,
        })
    }
}

pub use crate::store::merge::MergeReport;

/// Brings every stored subject and repository/task scope to one spelling per folded key and
/// registers each in `spellings`. The first spelling is the one already registered, else the
/// one with the oldest history event. Where two spellings of one identity both hold data, one
/// record stays (a deleted one stays deleted; else the first spelling's current record); the
/// other spellings' events are kept on it as `merged` events, and a current value that differs
/// from the one kept waits in the pending queue (`merged_from`) for a human. Runs inside the
/// caller's transaction with the purge gate open (it rewrites history rows).
pub(crate) fn merge_spellings(tx: &Connection, now: &str) -> Result<MergeReport> {
    scope_spellings_change();
    let mut report = MergeReport::default();
    // The read log's spellings are brought to a place's registered spelling too, and a place
    // only the read log names is registered (`written` 0: after every written spelling), as a
    // logged read registers it.
    let subjects = seen(
        tx,
        "SELECT s, min(f), max(w) FROM (
            SELECT subject AS s, id AS f, 1 AS w FROM history
            UNION ALL SELECT subject, 9223372036854775807, 1 FROM memories
            UNION ALL SELECT subject, 9223372036854775807, 1 FROM tombstones
            UNION ALL SELECT subject, 9223372036854775807, 1 FROM pending
            UNION ALL SELECT subject, 9223372036854775807, 0 FROM reads)
         WHERE typeof(s) = 'text'
         GROUP BY s",
    )?;
    let scopes = seen(
        tx,
        "SELECT s, min(f), max(w) FROM (
            SELECT scope AS s, id AS f, 1 AS w FROM history
            UNION ALL SELECT scope, 9223372036854775807, 1 FROM memories
            UNION ALL SELECT scope, 9223372036854775807, 1 FROM tombstones
            UNION ALL SELECT resolved_scope, 9223372036854775807, 1 FROM pending WHERE resolved_scope IS NOT NULL
            UNION ALL SELECT c.value, 9223372036854775807, 1 FROM pending p, json_each(p.candidates) c
                WHERE json_valid(p.candidates) AND c.type = 'text'
            UNION ALL SELECT scope, 9223372036854775807, 0 FROM reads WHERE scope IS NOT NULL
            UNION ALL SELECT 'repo:' || repo, 9223372036854775807, 0 FROM reads WHERE repo IS NOT NULL
            UNION ALL SELECT 'task:' || task, 9223372036854775807, 0 FROM reads WHERE task IS NOT NULL)
         WHERE typeof(s) = 'text' AND s <> 'global'
         GROUP BY s",
    )?;
    let subjects = register(tx, SUBJECT, subjects)?;
    let scopes = register(tx, SCOPE, scopes)?;
    report.merged_spellings = (subjects.renames.len() + scopes.renames.len()) as i64;
    report.respelled_reads = subjects.read_only + scopes.read_only;
    report.merged_places = subjects.places + scopes.places;
    let (subject_map, scope_map) = (subjects.renames, scopes.renames);
    if subject_map.is_empty() && scope_map.is_empty() {
        return Ok(report);
    }
    tx.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS spelling_renames (kind TEXT NOT NULL, from_spelling TEXT NOT NULL, to_spelling TEXT NOT NULL, PRIMARY KEY (kind, from_spelling));
         DELETE FROM temp.spelling_renames;",
    )?;
    {
        let mut ins = tx.prepare("INSERT INTO temp.spelling_renames VALUES (?1, ?2, ?3)")?;
        for (from, to) in &subject_map {
            ins.execute(params![SUBJECT, from, to])?;
        }
        for (from, to) in &scope_map {
            ins.execute(params![SCOPE, from, to])?;
        }
    }
    // Every identity a renamed spelling touches, grouped under the identity it becomes.
    let mut groups: BTreeMap<Key, Vec<Key>> = BTreeMap::new();
    {
        let mut stmt = tx.prepare(
            "SELECT DISTINCT subject, predicate, scope FROM (
                SELECT subject, predicate, scope FROM memories
                UNION ALL SELECT subject, predicate, scope FROM history
                UNION ALL SELECT subject, predicate, scope FROM tombstones)
             WHERE typeof(subject) = 'text' AND typeof(predicate) = 'text' AND typeof(scope) = 'text'
               AND (subject IN (SELECT from_spelling FROM temp.spelling_renames WHERE kind = 'subject')
                    OR scope IN (SELECT from_spelling FROM temp.spelling_renames WHERE kind = 'scope'))",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        for row in rows {
            let id: Key = row?;
            groups
                .entry(merge::target(&id, &subject_map, &scope_map))
                .or_default()
                .push(id);
        }
    }
    for (to, mut members) in groups {
        if has_data(tx, &to)? {
            members.push(to.clone());
        }
        merge_identity(tx, &to, members, now, &mut report)?;
    }
    rename_rest(tx, &scope_map)?;
    tx.execute_batch("DELETE FROM temp.spelling_renames;")?;
    if report.purged_spellings > 0 {
        // Content of a deleted identity was blanked: the on-disk purge is owed, as after a
        // delete (the store pays it once the transaction commits).
        tx.execute(
            "INSERT OR IGNORE INTO settings (key, value) VALUES (?1, ?2)",
            params![super::rows::DEBT_KEY, now],
        )?;
    }
    super::bump_metric(tx, "spellings_merged", report.merged_spellings)?;
    Ok(report)
}

fn seen(tx: &Connection, sql: &str) -> Result<Vec<Seen>> {
    let mut stmt = tx.prepare(sql)?;
    let rows = stmt.query_map([], |r| {
        Ok(Seen {
            spelling: r.get(0)?,
            first: r.get(1)?,
            written: r.get::<_, i64>(2)? != 0,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The spelling each place of `kind` keeps ([`merge::choose`]), registered where the registry
/// had no row for it.
fn register(tx: &Connection, kind: &str, seen: Vec<Seen>) -> Result<merge::Choice> {
    let registered: BTreeMap<String, String> = tx
        .prepare("SELECT folded, spelling FROM spellings WHERE kind = ?1")?
        .query_map([kind], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let choice = merge::choose(kind, seen, &registered);
    for (folded, spelling) in &choice.register {
        tx.execute(
            "INSERT INTO spellings (kind, folded, spelling) VALUES (?1, ?2, ?3)",
            params![kind, folded, spelling],
        )?;
    }
    Ok(choice)
}

fn has_data(tx: &Connection, id: &Key) -> Result<bool> {
    Ok(tx.query_row(
        &numbered_parameters(merge::HAS_DATA_SQL),
        params![id.0, id.1, id.2],
        |r| r.get(0),
    )?)
}

fn live(tx: &Connection, id: &Key) -> Result<Option<Live>> {
    Ok(tx
        .query_row(
            // Cast: a raw client may have stored anything (memscope check names it).
            "SELECT CAST(value AS TEXT), CAST(raw AS TEXT), CAST(source AS TEXT), CAST(causal_seq AS INTEGER)
             FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
            params![id.0, id.1, id.2],
            |r| Ok(Live::stored(r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?)
}

fn tombstoned(tx: &Connection, id: &Key) -> Result<bool> {
    Ok(tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3)",
        params![id.0, id.1, id.2],
        |r| r.get(0),
    )?)
}

fn first_event(tx: &Connection, id: &Key) -> Result<i64> {
    Ok(tx
        .query_row(
            "SELECT min(id) FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
            params![id.0, id.1, id.2],
            |r| r.get::<_, Option<i64>>(0),
        )?
        .unwrap_or(i64::MAX))
}

/// Makes `members` (spellings of the identity `to`) one identity, spelled `to`, as
/// [`merge::keep`] decides.
fn merge_identity(
    tx: &Connection,
    to: &Key,
    members: Vec<Key>,
    now: &str,
    report: &mut MergeReport,
) -> Result<()> {
    let mut seen = Vec::with_capacity(members.len());
    for key in members {
        seen.push(Member {
            first_event: first_event(tx, &key)?,
            tombstoned: tombstoned(tx, &key)?,
            live: live(tx, &key)?,
            key,
        });
    }
    let kept = merge::keep(to, seen);
    let identity = merge::identity(to);
    for (m, fate) in kept.others {
        // Its events stay, on the one identity, as `merged` events (no version: the versions
        // are the kept record's); a deleted identity keeps none of their content.
        tx.execute(
            "UPDATE history SET subject = ?4, scope = ?5, event = 'merged', version = NULL,
                 detail = json_object('from', ?6, 'event', event, 'version', version, 'detail', json(detail)),
                 value = CASE WHEN ?7 THEN NULL ELSE value END,
                 raw = CASE WHEN ?7 THEN NULL ELSE raw END
             WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
            params![m.0, m.1, m.2, to.0, to.2, merge::label(&m), kept.deleted],
        )
        .with_context(|| format!("merging the events of {}", merge::label(&m)))?;
        for sql in merge::DROP_OTHER_SQL {
            tx.execute(&numbered_parameters(sql), params![m.0, m.1, m.2])?;
        }
        let held = match fate {
            Fate::Purged => {
                report.purged_spellings += 1;
                continue;
            }
            Fate::Folded => continue,
            Fate::Queued(held) => held,
        };
        let id: i64 = tx.query_row(
            "INSERT INTO pending (subject, predicate, value, raw, source, causal_seq, candidates, status, created_at, merged_from)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'open', ?8, ?9) RETURNING id",
            params![
                to.0,
                to.1,
                held.value.to_string(),
                held.raw,
                held.source,
                held.causal_seq,
                json!([to.2]).to_string(),
                now,
                merge::label(&m)
            ],
            |r| r.get(0),
        )?;
        let detail = merge::queued_detail(&m, id);
        Event::new(EventKind::Merged, &identity)
            .detail(&detail)
            .log(tx, now)?;
        report.queued_conflicts += 1;
    }
    let o = kept.owner;
    if o != *to {
        for sql in merge::MOVE_KEPT_SQL {
            tx.execute(
                &numbered_parameters(sql),
                params![o.0, o.1, o.2, to.0, to.2],
            )?;
        }
        tx.execute(
            &numbered_parameters(merge::DROP_OTHER_SQL[0]),
            params![o.0, o.1, o.2],
        )?;
    }
    Ok(())
}

/// The pending queue and the read log take the first spellings too.
fn rename_rest(tx: &Connection, scope_map: &HashMap<String, String>) -> Result<()> {
    tx.execute_batch(
        "UPDATE pending SET subject = (SELECT to_spelling FROM temp.spelling_renames WHERE kind = 'subject' AND from_spelling = pending.subject)
           WHERE subject IN (SELECT from_spelling FROM temp.spelling_renames WHERE kind = 'subject');
         UPDATE pending SET resolved_scope = (SELECT to_spelling FROM temp.spelling_renames WHERE kind = 'scope' AND from_spelling = pending.resolved_scope)
           WHERE resolved_scope IN (SELECT from_spelling FROM temp.spelling_renames WHERE kind = 'scope');
         UPDATE reads SET subject = (SELECT to_spelling FROM temp.spelling_renames WHERE kind = 'subject' AND from_spelling = reads.subject)
           WHERE subject IN (SELECT from_spelling FROM temp.spelling_renames WHERE kind = 'subject');
         UPDATE reads SET scope = (SELECT to_spelling FROM temp.spelling_renames WHERE kind = 'scope' AND from_spelling = reads.scope)
           WHERE scope IN (SELECT from_spelling FROM temp.spelling_renames WHERE kind = 'scope');
         UPDATE reads SET repo = (SELECT substr(to_spelling, 6) FROM temp.spelling_renames WHERE kind = 'scope' AND from_spelling = 'repo:' || reads.repo)
           WHERE 'repo:' || repo IN (SELECT from_spelling FROM temp.spelling_renames WHERE kind = 'scope');
         UPDATE reads SET task = (SELECT substr(to_spelling, 6) FROM temp.spelling_renames WHERE kind = 'scope' AND from_spelling = 'task:' || reads.task)
           WHERE 'task:' || task IN (SELECT from_spelling FROM temp.spelling_renames WHERE kind = 'scope');",
    )?;
    // Candidates are a JSON list: rewritten here, keeping their order, dropping repeats.
    if !scope_map.is_empty() {
        let rows: Vec<(i64, String)> = super::pairs(
            tx,
            "SELECT id, candidates FROM pending WHERE json_valid(candidates)",
        )?;
        for (id, text) in rows {
            let Ok(list) = serde_json::from_str::<Vec<String>>(&text) else {
                continue;
            };
            let Some(out) = merge::respelled_candidates(list, scope_map) else {
                continue;
            };
            tx.execute(
                "UPDATE pending SET candidates = ?2 WHERE id = ?1",
                params![id, serde_json::to_string(&out)?],
            )?;
        }
    }
    // A finished item of a deleted identity whose resolution event the merge folded away
    // holds content written before the delete: it goes, as a delete would have taken it.
    tx.execute(
        "DELETE FROM pending WHERE status <> 'open' AND resolved_scope IS NOT NULL
           AND (subject IN (SELECT to_spelling FROM temp.spelling_renames WHERE kind = 'subject')
                OR resolved_scope IN (SELECT to_spelling FROM temp.spelling_renames WHERE kind = 'scope'))
           AND EXISTS (SELECT 1 FROM tombstones t WHERE t.subject = pending.subject
                AND t.predicate = pending.predicate AND t.scope = pending.resolved_scope)
           AND NOT EXISTS (SELECT 1 FROM history h WHERE h.subject = pending.subject
                AND h.predicate = pending.predicate AND h.scope = pending.resolved_scope
                AND h.event = 'pending_resolved' AND json_extract(h.detail, '$.pending_id') = pending.id)",
        [],
    )?;
    Ok(())
}
