//! `check`: proves the six invariants (README, "Invariants") from outside, on any database
//! (including one a raw-SQL client damaged after dropping the guards), and reports the health
//! figures. The rules are here, once; a backend lends its rows through [`CheckDb`] — SQLite
//! (`sqlite/check.rs`, which adds its integrity check of the file) and PostgreSQL
//! (`postgres/check.rs`) — so both are judged alike.

use crate::model::{normalize_predicate, Identity};
use anyhow::{bail, Result};
use fuzzy_matcher::skim::SkimMatcherV2;
use fuzzy_matcher::FuzzyMatcher;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// 1..=6, as numbered in the README's "Invariants".
    pub invariant: u8,
    pub name: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// No violation and no physical damage.
    pub ok: bool,
    /// SQLite's verdict on the file itself; absent only from the per-write assertion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub integrity: Option<Integrity>,
    pub violations: Vec<Violation>,
    pub metrics: BTreeMap<String, serde_json::Value>,
    /// Findings that are not violations and leave `ok` alone: the database's files or folder
    /// that group or others can reach, each with the `chmod` that fixes it; rows dated after
    /// now.
    pub health: Vec<Health>,
}

/// A health finding (README, "check"): nothing is inconsistent, `ok` and the exit code stay,
/// but the user has something to do. In `--json`, each is its own object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Health {
    /// A file or folder of the database that group or others can reach.
    Exposed(super::Exposure),
    /// Rows dated after now.
    DatedAhead(DatedAhead),
}

impl Health {
    /// The finding in one sentence, with what to do.
    pub fn sentence(&self) -> String {
        match self {
            Health::Exposed(e) => e.sentence(),
            Health::DatedAhead(d) => d.sentence(),
        }
    }
}

impl From<super::Exposure> for Health {
    fn from(e: super::Exposure) -> Health {
        Health::Exposed(e)
    }
}

/// Rows dated after now, by the rule `import` holds a dump to (`dump::dated_columns`): the
/// export of this database would be refused until then. memscope dates a row by the writer's
/// clock, so one that ran ahead writes them; nothing is inconsistent, and time mends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatedAhead {
    /// `dated_ahead`.
    pub kind: &'static str,
    /// How many rows are dated after now.
    pub rows: i64,
    /// The latest of them: its table and column, its row (`#7`, or a tombstone's identity)
    /// and its time as stored.
    pub table: &'static str,
    pub column: &'static str,
    pub row: String,
    pub at: String,
    /// Now, as the check took it (the time an export taken now would carry).
    pub now: String,
}

impl DatedAhead {
    fn from_scan(rows: i64, latest: super::fields::DatedField, now: &str) -> DatedAhead {
        let row = match latest.key.as_slice() {
            [id] => format!("#{id}"),
            [subject, predicate, scope] => format!("{subject} · {predicate} @ {scope}"),
            other => other.join(" · "),
        };
        DatedAhead {
            kind: "dated_ahead",
            rows,
            table: latest.table,
            column: latest.column,
            row,
            at: latest.at,
            now: now.to_string(),
        }
    }

    /// `1 row is dated after now (…) — the latest, history row #2, at 2099-… (history.at) — so
    /// …`.
    pub fn sentence(&self) -> String {
        let rows = match self.rows {
            1 => "1 row is".to_string(),
            n => format!("{} rows are", crate::model::thousands(n)),
        };
        let row = match self.table {
            "tombstones" => format!("the tombstone of {}", self.row),
            table => format!("{table} row {}", self.row),
        };
        format!(
            "{rows} dated after now ({}) — the latest, {row}, at {} ({}.{}) — so an export of this database will not import until then: a writer's clock ran ahead, or a client wrote the time; set that clock right, and to move the database sooner, correct those times in the export with a text editor before importing it",
            self.now, self.at, self.table, self.column
        )
    }
}

/// How thoroughly SQLite examines the file: `quick_check` (the default) verifies every page
/// and record but not that indexes match their tables; `integrity_check` does that too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IntegrityMode {
    Quick,
    Full,
}

/// How a damaged header begins its problem ([`Integrity::header_damaged`]).
pub const HEADER_DAMAGED: &str = "its header is damaged: ";

/// SQLite's verdict on the file: `ok`, or the problems it found (at most 100).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Integrity {
    pub mode: IntegrityMode,
    pub ok: bool,
    pub problems: Vec<String>,
    /// The problem stopped SQLite before its check could run (the file would not open, or
    /// a page the check needed could not be read): the sentence does not claim a check found it.
    #[serde(skip)]
    pub unchecked: bool,
}

impl Integrity {
    /// A file SQLite could not even open or read: damage found before any check ran.
    pub fn unreadable(mode: IntegrityMode, problem: String) -> Integrity {
        Integrity {
            mode,
            ok: false,
            problems: vec![problem],
            unchecked: true,
        }
    }

    /// A damaged header, said first among the problems: `HEADER_DAMAGED` and the field.
    pub fn header_damaged(&mut self, field: &str) {
        self.ok = false;
        self.problems.insert(0, format!("{HEADER_DAMAGED}{field}"));
    }

    /// One sentence for a damaged file, naming the first problem and what to do.
    pub fn sentence(&self) -> String {
        // SQLite states one problem over several lines.
        let first = self
            .problems
            .first()
            .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        let found = if self.unchecked {
            "SQLite stopped before its check could run".to_string()
        } else if first.starts_with(HEADER_DAMAGED) {
            // Read by memscope once the check's connection was closed, not by SQLite's check.
            "memscope read its header".to_string()
        } else {
            format!(
                "SQLite's {} check found {} problem(s), first",
                match self.mode {
                    IntegrityMode::Quick => "quick",
                    IntegrityMode::Full => "full integrity",
                },
                self.problems.len()
            )
        };
        format!(
            "the database file is damaged: {found}: {first}; stop the writers, keep a copy of the file, and restore a backup — or salvage what SQLite can still read with `sqlite3 FILE .recover | sqlite3 NEW` and check NEW with `memscope --db NEW check`"
        )
    }
}

/// The refusal of a command that meets two rows of one identity in a table memscope keeps one
/// in — which only a client that removed the identity's unique guard can store (found by
/// review: `resolve` answered one of the two current records at random, and a write rewrote
/// both). Nothing is answered from such a table and nothing is changed: `check` names the rows
/// (invariant 1), a SQL client keeps the right one, `init` restores the guard (README, "check").
pub(crate) fn two_rows_of_one_identity(table: &str, id: &crate::model::Identity) -> anyhow::Error {
    anyhow::anyhow!(
        "{table} holds two rows of {} where memscope keeps one (a client removed the guard that keeps an identity unique): nothing was read or changed; `memscope check` names them — keep the right one with a SQL client, then run `memscope init` to restore the guard",
        crate::model::to_json(&crate::model::shorten(&id.to_string(), 120)).unwrap_or_default()
    )
}

/// `init`'s refusal to make the identity's unique guard again while two current records of one
/// identity stand (the guard cannot be built over them), on both backends: nothing is changed.
/// The repository and task scopes the read log names, one column `place`: the won scope and the
/// context a read was asked in — what `check` holds to the registry (invariant 6) and what
/// PostgreSQL's import brings to it (`postgres::transfer::respell_reads`).
pub(crate) const READ_LOG_PLACES_SQL: &str =
    "SELECT scope AS place FROM reads WHERE scope IS NOT NULL AND scope <> 'global'
     UNION SELECT 'repo:' || repo FROM reads WHERE repo IS NOT NULL
     UNION SELECT 'task:' || task FROM reads WHERE task IS NOT NULL";

/// The places memscope stores, by kind: the statement that reads their stored spellings — the
/// current view, tombstones and the queue, off which every identity's history hangs (a full
/// scan of history would double check's time on 1M records) — and the read log's.
const STORED_PLACES: [(&str, &str, &str); 2] = [
    (
        "subject",
        "SELECT subject FROM memories UNION SELECT subject FROM tombstones
         UNION SELECT subject FROM pending",
        "SELECT DISTINCT subject FROM reads",
    ),
    (
        "scope",
        "SELECT DISTINCT scope FROM memories UNION SELECT scope FROM tombstones",
        READ_LOG_PLACES_SQL,
    ),
];

/// Stored spellings by folded key, and the registry's spelling by folded key.
type StoredSpellings = (BTreeMap<String, Vec<String>>, BTreeMap<String, String>);

/// The stored spellings of the places of kind `what` (read by `sql`), by folded key, and the
/// registry the write path spells every later write by: each stored place should have its row
/// there, holding the spelling stored — else the next write in another case stores a second.
fn stored_spellings(db: &mut dyn CheckDb, what: &str, sql: &str) -> Result<StoredSpellings> {
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for id in collect(db, sql, &[], usize::MAX, &|r| r.show(0))? {
        by_key
            .entry(crate::spelling::fold(&id))
            .or_default()
            .push(id);
    }
    let registered = collect(
        db,
        "SELECT folded, spelling FROM spellings WHERE kind = $1",
        &[what],
        usize::MAX,
        &|r| (r.show(0), r.show(1)),
    )?
    .into_iter()
    .collect();
    Ok((by_key, registered))
}

/// What `init` sets in the registry (README, "check", one spelling per place): for each place
/// stored in one spelling whose row is missing or names another spelling (a raw client's
/// change, found by review: the next write of the stored spelling then stored a second one, and
/// a delete of the subject missed the memory), `(kind, folded key, the spelling stored)`. A
/// place stored in two spellings is `init`'s merge's ([`stored_twice`]).
pub(crate) fn registry_repairs(db: &mut dyn CheckDb) -> Result<Vec<(String, String, String)>> {
    let mut out = Vec::new();
    for (what, sql, _) in STORED_PLACES {
        let (by_key, registered) = stored_spellings(db, what, sql)?;
        for (key, stored, _) in misregistered(&by_key, &registered) {
            out.push((what.to_string(), key.clone(), stored.clone()));
        }
    }
    Ok(out)
}

/// Whether a place is stored in more than one spelling (invariant 6): what `init` then merges
/// into one (`merge`), a cheap look first — the merge itself reads history whole. A pending
/// item's candidate in another spelling than the registered one is such a second spelling:
/// the merge respells it (`merge::respelled_candidates`).
pub(crate) fn stored_twice(db: &mut dyn CheckDb) -> Result<bool> {
    for (what, sql, _) in STORED_PLACES {
        let (by_key, _) = stored_spellings(db, what, sql)?;
        if by_key.values().any(|s| s.len() > 1) {
            return Ok(true);
        }
    }
    Ok(!candidates_misspelled(db, 1)?.is_empty())
}

/// A pending item's candidate stored in another spelling than its place's registered one:
/// the item's id, subject and predicate, the candidate and the registered spelling.
type MisspelledCandidate = (String, String, String, String, String);

/// The pending items' candidates stored in another spelling than the registry's (a raw
/// client's change, found by an exploratory test: `check` was clean, and `pending resolve`
/// refused every spelling of the candidate) — at most `limit`, in item order.
fn candidates_misspelled(db: &mut dyn CheckDb, limit: usize) -> Result<Vec<MisspelledCandidate>> {
    let registered: BTreeMap<String, String> = collect(
        db,
        "SELECT folded, spelling FROM spellings WHERE kind = 'scope'",
        &[],
        usize::MAX,
        &|r| (r.show(0), r.show(1)),
    )?
    .into_iter()
    .collect();
    let mut out = Vec::new();
    db.each(
        "SELECT id, subject, predicate, candidates FROM pending ORDER BY id",
        &[],
        &mut |r| {
            // Candidates that are not a list of texts are the field rules' to name.
            let list: Vec<String> = r
                .text(3)
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or_default();
            for c in list {
                if let Some(spelling) = registered.get(&crate::spelling::fold(&c)) {
                    if *spelling != c && out.len() < limit {
                        out.push((r.show(0), r.show(1), r.show(2), c, spelling.clone()));
                    }
                }
            }
            Ok(out.len() < limit)
        },
    )?;
    Ok(out)
}

/// The places stored in one spelling that the registry does not hold as stored: the folded
/// key, the spelling stored and the one registered, if any. `check` names them and `init`
/// sets them ([`registry_repairs`]).
fn misregistered<'a>(
    by_key: &'a BTreeMap<String, Vec<String>>,
    registered: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = (&'a String, &'a String, Option<&'a String>)> {
    by_key
        .iter()
        .filter_map(move |(key, spellings)| match spellings.as_slice() {
            [stored] if stored != "global" => {
                let found = registered.get(key);
                (found != Some(stored)).then_some((key, stored, found))
            }
            _ => None,
        })
}

/// The highest causal number any row holds within 2^53, where the clock ends: what `init`
/// moves a clock set back around memscope past (README, "check", invariant 2). A number past
/// 2^53 is no clock's (the field rules name its row): each is passed over row by row, so the
/// numbers beside it still count (found by an exploratory test: one memory at 2^63 − 1 hid
/// every number `memories` held, and `init` moved nothing while `check` said it would). One
/// statement both backends run.
pub(crate) const HIGHEST_STORED_NUMBER: &str = "SELECT max(n) FROM (
        SELECT max(causal_seq) AS n FROM history WHERE causal_seq <= 9007199254740992
        UNION ALL SELECT max(causal_seq) FROM memories WHERE causal_seq <= 9007199254740992
        UNION ALL SELECT max(confirmed_seq) FROM memories WHERE confirmed_seq <= 9007199254740992
        UNION ALL SELECT max(causal_seq) FROM pending WHERE causal_seq <= 9007199254740992) numbers";

pub(crate) const IDENTITY_NOT_UNIQUE: &str = "cannot make the identity unique again: memories holds two current records of one identity (`memscope check` names them); delete the wrong one with a SQL client, then run init again";

/// A delete's refusal when tombstones lost its key (a raw client rebuilt or altered the table):
/// the tombstone cannot be recorded by its identity, so nothing is deleted.
pub(crate) const TOMBSTONE_KEY_GONE: &str = "tombstones has lost its key on the identity (a client rebuilt or altered the table), so memscope cannot record a delete: nothing was deleted; run `memscope init` to make the key again (`memscope check` reports schema_guards)";

/// The same refusal for tombstones' primary key, which a raw client dropped and then stored a
/// second tombstone of one identity under.
pub(crate) const TOMBSTONE_NOT_UNIQUE: &str = "cannot make the tombstones' identity unique again: tombstones holds two tombstones of one identity (`memscope check` names them); delete the wrong one with a SQL client, then run init again";

/// The six invariants `check` proves, by number (README, "check"); index 0 is unused.
pub const INVARIANT_NAMES: [&str; 7] = [
    "",
    "uniqueness",
    "causal monotonicity",
    "deletion monotonicity",
    "current view = history",
    "version contiguity",
    "normalization",
];

/// Which rows a check looks at: the whole database, or one identity (the per-write assert).
pub(crate) enum Filter<'a> {
    All,
    One(&'a Identity, String),
}

impl Filter<'_> {
    /// A WHERE fragment over `alias.subject/predicate/scope`, bound to $1..$3.
    pub(crate) fn sql(&self, alias: &str) -> String {
        match self {
            Filter::All => "1 = 1".into(),
            Filter::One(..) => {
                format!("{alias}.subject = $1 AND {alias}.predicate = $2 AND {alias}.scope = $3")
            }
        }
    }

    pub(crate) fn params(&self) -> Vec<&str> {
        match self {
            Filter::All => vec![],
            Filter::One(id, scope) => vec![&id.subject, &id.predicate, scope],
        }
    }
}

/// One row a backend hands the check. Damaged data is data: a column of an unexpected type
/// reads as `None` from [`text`](CheckRow::text) or [`int`](CheckRow::int), never an error.
pub(crate) trait CheckRow {
    /// The column when it holds text (valid UTF-8); `None` for NULL and any other type.
    fn text(&self, i: usize) -> Option<&str>;
    /// The column when it holds an integer.
    fn int(&self, i: usize) -> Option<i64>;
    /// Whether the column is NULL (a rule skips a field without a value).
    fn is_null(&self, i: usize) -> bool;
    /// Any value as text, for a report or a field rule: a number's digits, a time in RFC 3339,
    /// bytes read loosely; empty for NULL.
    fn show(&self, i: usize) -> String;
}

/// One step of the history walk ([`CheckDb::walk`]).
pub(crate) enum Step<'a> {
    /// A history row of the identity, in log order.
    Event(HistoryRow),
    /// The identity's last row was met: its current record, and a question the walk asks only
    /// when history says the identity is deleted — is its tombstone there?
    End {
        current: Option<CurrentRow>,
        tombstone: &'a mut dyn FnMut() -> Result<bool>,
    },
}

/// The columns of a history row the walk reads.
pub(crate) struct HistoryRow {
    pub event: String,
    pub version: Option<i64>,
    pub seq: Option<i64>,
    pub detail: Option<String>,
    pub value: Option<String>,
    pub raw: Option<String>,
    pub source: Option<String>,
    /// When it was logged, as stored (RFC 3339 text).
    pub at: Option<String>,
}

/// What `check` needs of a backend: its rows, read inside one snapshot the caller holds.
/// SQL given to it is written once for both backends: `$1`… parameters, `1 = 1` for true, no
/// dialect's functions (what differs is a method here).
pub(crate) trait CheckDb {
    /// Runs `sql` with `params` bound as text and hands each row to `each` until it returns
    /// false.
    fn each(
        &mut self,
        sql: &str,
        params: &[&str],
        each: &mut dyn FnMut(&dyn CheckRow) -> Result<bool>,
    ) -> Result<()>;
    /// SQL for the integer at `key` of the JSON object in the text `expr`, or NULL; never an
    /// error, whatever the text.
    fn json_int(&self, expr: &str, key: &str) -> String;
    /// The causal clock: the last number handed out.
    fn clock(&mut self) -> Result<i64>;
    /// What is wrong with the schema's guards, each in a few words naming the guard or the
    /// foreign object; empty when every guard is in place.
    fn guard_problems(&mut self) -> Result<Vec<String>>;
    /// Every row holding, in a column memscope gives one type, a value of another (a blob
    /// where it stores text, text where it stores an integer) — at most `limit`. memscope's
    /// readers cannot read such a row, so the rest of `check` reads every column loosely.
    /// PostgreSQL's columns are typed and cannot hold another type: none there.
    fn type_problems(&mut self, _limit: usize) -> Result<Vec<super::fields::FieldProblem>> {
        Ok(Vec::new())
    }
    /// memscope's tables, columns and (on PostgreSQL) functions and clock that are missing,
    /// each in a few words (`table reads lacks column note`); empty when all are there.
    fn schema_problems(&mut self) -> Result<Vec<String>>;
    /// Whether every guard of the schema is in place.
    fn guards_present(&mut self) -> Result<bool> {
        Ok(self.guard_problems()?.is_empty())
    }
    /// Every history row of `f`'s identities, identity by identity in log order, each
    /// identity's rows followed by its [`Step::End`].
    fn walk(
        &mut self,
        f: &Filter<'_>,
        on: &mut dyn FnMut(&Key, Step<'_>) -> Result<()>,
    ) -> Result<()>;
}

/// The rows of `sql`, each made a `T` by `read` (at most `limit`).
pub(crate) fn collect<T>(
    db: &mut dyn CheckDb,
    sql: &str,
    params: &[&str],
    limit: usize,
    read: &dyn Fn(&dyn CheckRow) -> T,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    db.each(sql, params, &mut |r| {
        out.push(read(r));
        Ok(out.len() < limit)
    })?;
    Ok(out)
}

struct Checker<'a> {
    db: &'a mut dyn CheckDb,
    violations: Vec<Violation>,
    limit: usize,
}

impl Checker<'_> {
    fn push(&mut self, invariant: u8, detail: String) {
        if self.violations.len() < self.limit {
            self.violations.push(Violation {
                invariant,
                name: INVARIANT_NAMES[invariant as usize],
                detail,
            });
        }
    }

    /// Runs `sql` and records one violation per row, described by the row's columns.
    fn rows(
        &mut self,
        invariant: u8,
        sql: &str,
        f: &Filter<'_>,
        describe: &dyn Fn(&dyn CheckRow) -> String,
    ) -> Result<()> {
        for d in collect(self.db, sql, &f.params(), self.limit, describe)? {
            self.push(invariant, d);
        }
        Ok(())
    }

    fn run(&mut self, f: &Filter<'_>) -> Result<()> {
        // 1. Uniqueness: one current record an identity, and one tombstone (a second only a
        // client that removed tombstones' key stores; a delete or restore of it is refused,
        // `two_rows_of_one_identity`).
        for (table, alias, rows) in [
            ("memories", "m", "current records"),
            ("tombstones", "t", "tombstones"),
        ] {
            self.rows(
                1,
                &format!(
                    "SELECT subject, predicate, scope, count(*) FROM {table} {alias} WHERE {}
                     GROUP BY scope, subject, predicate HAVING count(*) > 1",
                    f.sql(alias)
                ),
                f,
                &|r| format!("{} has {} {rows}", ident(r), r.show(3)),
            )?;
        }

        // 3. Deletion monotonicity.
        self.rows(
            3,
            &format!(
                "SELECT m.subject, m.predicate, m.scope FROM memories m JOIN tombstones t
                 ON t.subject = m.subject AND t.predicate = m.predicate AND t.scope = m.scope WHERE {}",
                f.sql("m")
            ),
            f,
            &|r| format!("{} is tombstoned but has a current record", ident(r)),
        )?;
        // Each tombstone's history looked up from the tombstone: as a join, SQLite read all of
        // history and looked each row up among the (few) tombstones.
        self.rows(
            3,
            &format!(
                "SELECT subject, predicate, scope, n FROM (
               SELECT t.subject, t.predicate, t.scope, (SELECT count(*) FROM history h
                 WHERE h.subject = t.subject AND h.predicate = t.predicate AND h.scope = t.scope
                 AND (h.value IS NOT NULL OR h.raw IS NOT NULL)) AS n
               FROM tombstones t WHERE {}) x WHERE n > 0",
                f.sql("t")
            ),
            f,
            &|r| {
                format!(
                    "{} is tombstoned but {} history row(s) still hold content",
                    ident(r),
                    r.show(3)
                )
            },
        )?;
        self.rows(3, &format!(
            "SELECT subject, predicate, scope, version, top FROM (
               SELECT t.subject, t.predicate, t.scope, t.version, (SELECT max(h.version) FROM history h
                 WHERE h.subject = t.subject AND h.predicate = t.predicate AND h.scope = t.scope
                 AND h.event = 'set') AS top
               FROM tombstones t WHERE {}) x WHERE top >= version", f.sql("t")), f,
            &|r| format!("{}: tombstone v{} is not above version {}", ident(r), r.show(3), r.show(4)))?;
        self.rows(3, &format!(
            "SELECT subject, predicate, scope, version, top FROM (
               SELECT t.subject, t.predicate, t.scope, t.version, (SELECT max(h.version) FROM history h
                 WHERE h.subject = t.subject AND h.predicate = t.predicate AND h.scope = t.scope
                 AND h.version IS NOT NULL) AS top
               FROM tombstones t WHERE {}) x WHERE top > version", f.sql("t")), f,
            &|r| format!("{}: tombstone v{} is below version {} in its history", ident(r), r.show(3), r.show(4)))?;
        let pending_id = self.db.json_int("h.detail", "pending_id");
        self.rows(3, &format!(
            "SELECT p.subject, p.predicate, t.scope, p.id FROM pending p JOIN tombstones t
             ON t.subject = p.subject AND t.predicate = p.predicate
             WHERE {} AND p.status <> 'open' AND p.resolved_scope = t.scope
               -- A delete purges the items resolved into it and their events; an item whose
               -- resolution event is gone was resolved before the delete (commit order, not clocks).
               AND NOT EXISTS (SELECT 1 FROM history h WHERE h.subject = p.subject AND h.predicate = p.predicate
                   AND h.scope = t.scope AND h.event = 'pending_resolved'
                   AND {pending_id} = p.id)",
            match f { Filter::All => "1 = 1".to_string(), Filter::One(..) => "p.subject = $1 AND p.predicate = $2 AND t.scope = $3".to_string() }), f,
            &|r| format!("{}: pending item #{} still holds content written before the delete", ident(r), r.show(3)))?;

        // 2, 4, 5 per identity: walk the log oldest first, comparing with the current record.
        let with_history = self.walk_history(f)?;
        let current_count = collect(
            self.db,
            &format!("SELECT count(*) FROM memories m WHERE {}", f.sql("m")),
            &f.params(),
            1,
            &|r| r.int(0).unwrap_or(0),
        )?
        .first()
        .copied()
        .unwrap_or(0);
        if current_count != with_history {
            // 4. Some current records have no history at all: name them.
            self.rows(4, &format!(
                "SELECT m.subject, m.predicate, m.scope, m.version FROM memories m WHERE {} AND NOT EXISTS (
                    SELECT 1 FROM history h WHERE h.subject = m.subject AND h.predicate = m.predicate AND h.scope = m.scope)",
                f.sql("m")), f,
                &|r| format!("{}: current v{} has no history", ident(r), r.show(3)))?;
        }

        // 4. Values are JSON that memscope can read (no CHECK in the schema says so, and
        // SQLite's json_valid accepts what serde refuses: 1e400, lone surrogates, deep nesting).
        self.unreadable_json(
            &format!(
                "SELECT m.subject, m.predicate, m.scope, 'current v' || m.version, m.value FROM memories m WHERE {}",
                f.sql("m")
            ),
            f,
            &[("", None)],
        )?;
        // A history row's value and its detail in one scan of history; a detail's reason as
        // the write path writes it (no NUL, which PostgreSQL could not store).
        self.unreadable_json(
            &format!(
                "SELECT h.subject, h.predicate, h.scope, 'history event #' || h.id || ' (' || h.event || ')', h.value, h.detail
                 FROM history h WHERE {} AND (h.value IS NOT NULL OR h.detail IS NOT NULL)",
                f.sql("h"),
            ),
            f,
            &[("", None), ("the detail of ", Some(reason_with_nul))],
        )?;

        // 5. Every tombstone's version is accounted for by its `deleted` event.
        self.rows(5, &format!(
            "SELECT t.subject, t.predicate, t.scope, t.version FROM tombstones t WHERE {} AND NOT EXISTS (
                SELECT 1 FROM history h WHERE h.subject = t.subject AND h.predicate = t.predicate AND h.scope = t.scope
                AND h.event = 'deleted' AND h.version = t.version)", f.sql("t")), f,
            &|r| format!("{}: tombstone v{} has no `deleted` event accounting for its versions", ident(r), r.show(3)))?;

        // 1 and 6: every stored scope is in canonical form; a second spelling of a scope is a
        // second current record of the same identity.
        let scopes = collect(
            self.db,
            &format!(
                "SELECT DISTINCT m.scope FROM memories m WHERE {}",
                f.sql("m")
            ),
            &f.params(),
            usize::MAX,
            &|r| r.show(0),
        )?;
        for stored in scopes {
            match crate::model::Scope::parse(&stored) {
                Ok(canonical) if canonical.to_string() == stored => {}
                Ok(canonical) => {
                    let canonical_text = canonical.to_string();
                    let twins = collect(
                        self.db,
                        "SELECT count(*) FROM memories a JOIN memories b ON a.subject = b.subject AND a.predicate = b.predicate
                         WHERE a.scope = $1 AND b.scope = $2",
                        &[&stored, &canonical_text],
                        1,
                        &|r| r.int(0).unwrap_or(0),
                    )?
                    .first()
                    .copied()
                    .unwrap_or(0);
                    if twins > 0 {
                        self.push(1, format!("{twins} identity(ies) have a second current record under the scope spelling {:?} of {canonical}", stored));
                    }
                    self.push(
                        6,
                        format!(
                            "stored scope {:?} is not in canonical form ({canonical})",
                            stored
                        ),
                    );
                }
                Err(e) => self.push(6, format!("stored scope {:?} is invalid: {e}", stored)),
            }
        }

        // 6. Normalization.
        let preds = collect(
            self.db,
            &format!(
                "SELECT DISTINCT m.predicate, a.canonical FROM memories m
                 LEFT JOIN predicate_aliases a ON a.alias = m.predicate WHERE {}",
                f.sql("m")
            ),
            &f.params(),
            usize::MAX,
            &|r| (r.show(0), r.text(1).map(str::to_string)),
        )?;
        for (p, canonical) in preds {
            let (wrong, way_out) = if let Some(c) = canonical {
                (
                    format!("is an alias of '{c}'"),
                    format!(
                        "no command reaches it under either name — remove the alias (`memscope alias remove {}`) to reach it",
                        crate::model::shell_word(&p)
                    ),
                )
            } else {
                match normalize_predicate(&p) {
                    Ok(n) if n == p => continue,
                    Ok(n) => (
                        format!("is not in normal form ('{n}')"),
                        format!("no command reaches it by that name — a client outside memscope wrote it: set it to '{n}' with a SQL client in memories and in its identity's history (history is append-only: drop its guard triggers first, and `memscope init` makes them again)"),
                    ),
                    Err(e) => (
                        format!("is not a valid predicate ({e})"),
                        "no command reaches it — a client outside memscope wrote it: delete its rows with a SQL client, or give them a valid predicate".to_string(),
                    ),
                }
            };
            // The memories it names: the first, by identity, and how many more (one finding
            // for one stored name).
            let mut filter = format!("m.predicate = ${}", f.params().len() + 1);
            if matches!(f, Filter::One(..)) {
                filter = format!("{} AND {filter}", f.sql("m"));
            }
            let mut params = f.params();
            params.push(&p);
            let named = collect(
                self.db,
                &format!(
                    "SELECT m.subject, m.predicate, m.scope, count(*) OVER () FROM memories m
                     WHERE {filter} ORDER BY m.subject, m.scope LIMIT 1"
                ),
                &params,
                1,
                &|r| {
                    let more = match r.int(3).unwrap_or(1) - 1 {
                        0 => String::new(),
                        1 => ", and 1 other memory".to_string(),
                        n => format!(", and {n} other memories"),
                    };
                    format!("{}{more}", ident(r))
                },
            )?;
            let named = named.first().cloned().unwrap_or_default();
            self.push(
                6,
                format!("current predicate '{p}' {wrong}: {named} — {way_out}"),
            );
        }
        Ok(())
    }

    /// What the pending queue, the read log and the counters say against history and time
    /// (README, "check"): a pending item is resolved no earlier than it was created (2); an
    /// open item has no resolution event (4); a logged read names a version its identity held,
    /// read no earlier than that version was written (4); no counter is negative (6). Times
    /// compare as stored: canonical text on SQLite (field rules name any other spelling),
    /// `timestamptz` on PostgreSQL.
    fn queue_and_read_log_in_time(&mut self) -> Result<()> {
        let f = Filter::All;
        self.rows(
            2,
            "SELECT subject, predicate, id, created_at, resolved_at FROM pending
             WHERE resolved_at IS NOT NULL AND resolved_at < created_at",
            &f,
            &|r| {
                format!(
                    "{} · {}: pending item #{} is resolved at {}, before it was created ({}): a client wrote it out of time, or a writer's clock was set back",
                    r.show(0), r.show(1), r.show(2), r.show(4), r.show(3)
                )
            },
        )?;
        let pending_id = self.db.json_int("h.detail", "pending_id");
        self.rows(
            4,
            &format!(
                "SELECT p.subject, p.predicate, h.scope, p.id, h.id FROM pending p JOIN history h
                   ON h.subject = p.subject AND h.predicate = p.predicate AND h.event = 'pending_resolved'
                  AND {pending_id} = p.id
                 WHERE p.status = 'open'"
            ),
            &f,
            &|r| {
                format!(
                    "{}: pending item #{} is open, but history event #{} resolved it: set its status, resolution and resolved_at as the event says, or remove the event's row, with a SQL client",
                    ident(r), r.show(3), r.show(4)
                )
            },
        )?;
        let merged_version = self.db.json_int("h.detail", "version");
        self.rows(
            4,
            &format!(
                "SELECT r.subject, r.predicate, r.scope, r.id, r.version FROM reads r
                 WHERE r.scope IS NOT NULL AND r.version IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM history h WHERE h.subject = r.subject AND h.predicate = r.predicate
                      AND h.scope = r.scope
                      AND ((h.event IN ('set', 'confirmed', 'rescoped', 'reverted') AND h.version = r.version)
                           -- A delete destroys the events of the versions below its tombstone.
                           OR (h.event = 'deleted' AND h.version > r.version)
                           OR (h.event = 'merged' AND {merged_version} = r.version)))"
            ),
            &f,
            &|r| {
                format!(
                    "{}: reads row #{} names v{}, which the identity never held",
                    ident(r),
                    r.show(3),
                    r.show(4)
                )
            },
        )?;
        self.rows(
            4,
            "SELECT subject, predicate, scope, id, version, at, written FROM (
               SELECT r.subject, r.predicate, r.scope, r.id, r.version, r.at,
                      (SELECT min(h.at) FROM history h WHERE h.subject = r.subject
                         AND h.predicate = r.predicate AND h.scope = r.scope
                         AND h.event IN ('set', 'rescoped', 'reverted') AND h.version = r.version) AS written
               FROM reads r WHERE r.scope IS NOT NULL AND r.version IS NOT NULL) x
             WHERE at < written",
            &f,
            &|r| {
                format!(
                    "{}: reads row #{} is dated {}, before v{} was written ({}): a client wrote it out of time, or a writer's clock was set back",
                    ident(r), r.show(3), r.show(5), r.show(4), r.show(6)
                )
            },
        )?;
        self.rows(
            6,
            "SELECT name, value FROM metrics WHERE value < 0",
            &f,
            &|r| {
                format!(
                    "the counter {} is {}: a count is never negative — set it to 0 with a SQL client",
                    r.show(0),
                    r.show(1)
                )
            },
        )
    }

    /// Invariant 3 for rescoped content: a deleted identity's content stays in no copy a
    /// rescope left where the value was first written (`events::moved_copies`; a delete blanks
    /// them, and one by a release before that did not) — nor does a collected one's
    /// (`events::collected_copies`, which `gc` blanks). One pass over history reads both.
    fn moved_copies_of_deleted(&mut self) -> Result<()> {
        use crate::store::events::{
            collected_copies, standing_copies, KeptCopy, LoggedEvent, RescopeEvent,
            KEPT_COPY_EVENTS_SQL,
        };
        let logged = collect(self.db, KEPT_COPY_EVENTS_SQL, &[], usize::MAX, &|r| {
            LoggedEvent {
                id: r.int(0).unwrap_or(0),
                subject: r.show(1),
                predicate: r.show(2),
                event: RescopeEvent {
                    event: r.show(3),
                    scope: r.show(4),
                    version: r.int(5),
                    detail: r.show(6),
                },
            }
        })?;
        // In byte order, as every message `check` lists, whatever the database's collation.
        let mut standing = collect(
            self.db,
            "SELECT subject, predicate, scope FROM tombstones",
            &[],
            usize::MAX,
            &|r| (r.show(0), r.show(1), r.show(2)),
        )?;
        standing.sort_unstable();
        let mut found: Vec<(KeptCopy, bool)> = standing_copies(&logged, &standing)
            .into_iter()
            .map(|c| (c, false))
            .collect();
        let stands = |s: &str, p: &str, sc: &str| {
            standing
                .binary_search_by(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()).cmp(&(s, p, sc)))
                .is_ok()
        };
        found.extend(
            collected_copies(&logged, stands)
                .into_iter()
                .map(|c| (c, true)),
        );
        for (c, collected) in found {
            let KeptCopy {
                subject,
                predicate,
                scope,
                at,
                version,
                as_of,
            } = c;
            // The numbers inline: numbers this code parsed, never text from the row.
            let kept = crate::store::events::copy_kept(|sql| {
                let sql = sql
                    .replace("$4", &version.to_string())
                    .replace("$5", &as_of.to_string());
                count(self.db, &sql, &[&subject, &predicate, &at])
            })?;
            if !kept.any() {
                continue;
            }
            let n = [
                (kept.events, "history event(s)"),
                (kept.notes, "read-log note(s)"),
                (kept.pending, "resolved pending item(s)"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect::<Vec<_>>()
            .join(" and ");
            self.push(3, if collected {
                format!(
                    "{subject} · {predicate} @ {scope} was deleted and its tombstone collected, but {n} of version {version} @ {at}, which a rescope moved into it, still hold its content: run `memscope gc` to blank them"
                )
            } else {
                format!(
                    "{subject} · {predicate} @ {scope} is deleted, but {n} of version {version} @ {at}, which a rescope moved into it, still hold its content: run `memscope delete --subject {} --predicate {} --scope {}` again to blank them",
                    crate::model::shell_word(&subject),
                    crate::model::shell_word(&predicate),
                    crate::model::shell_word(&scope),
                )
            });
        }
        Ok(())
    }

    /// Invariant 6, one spelling per place: no two stored subjects, and no two stored
    /// repository or task scopes, fold alike (`spelling::fold`). memscope's write path stores
    /// the first spelling; a second one was written around it.
    fn one_spelling_per_place(&mut self) -> Result<()> {
        for (what, sql, read_sql) in STORED_PLACES {
            let (by_key, registered) = stored_spellings(self.db, what, sql)?;
            for spellings in by_key.values().filter(|s| s.len() > 1) {
                self.push(6, format!(
                    "the {what} is stored in {} spellings ({}): one place has one spelling; they were written around memscope's write path, and `memscope init` merges them into the registered spelling (a value they disagree on waits in the pending queue)",
                    spellings.len(),
                    spellings.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ")
                ));
            }
            for (_, stored, found) in misregistered(&by_key, &registered) {
                self.push(6, format!(
                    "the {what} {stored:?} {}: the next write spelled another way would store a second spelling; `memscope init` sets the registry to the spelling stored",
                    match found {
                        Some(r) => format!("is registered as {r:?} in the spellings table"),
                        None => "has no row in the spellings table".to_string(),
                    }
                ));
            }
            if what == "scope" {
                for (id, subject, predicate, named, r) in
                    candidates_misspelled(self.db, self.limit)?
                {
                    self.push(6, format!(
                        "{subject} · {predicate}: pending item #{id} names the scope {named:?} among its candidates, which is registered as {r:?}: one place has one spelling; `memscope init` respells it to the registered spelling (and `memscope pending resolve {id} --scope` takes the place in any spelling)"
                    ));
                }
            }
            // The read log names places too: a row in another spelling than the registered one
            // is out of the reach of a filter or a delete of that name (an earlier release
            // logged a read in the reader's case until a write registered another).
            for named in collect(self.db, read_sql, &[], usize::MAX, &|r| r.show(0))? {
                if let Some(r) = registered.get(&crate::spelling::fold(&named)) {
                    if *r != named {
                        self.push(6, format!(
                            "the read log names the {what} {named:?}, which is registered as {r:?}: `reads` filtered by it and a delete of it miss those reads (their notes too); `memscope export` and `import` bring them to the registered spelling"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Invariant 4 for stored JSON: `sql` selects subject, predicate, scope, a label and
    /// texts, the label of the text at 4 + i prefixed by `what[i].0`; every text memscope's
    /// readers could not parse is a violation — the first text's, then the second's — and so is
    /// one `what[i].1` finds wrong (what it returns follows the label).
    fn unreadable_json(
        &mut self,
        sql: &str,
        f: &Filter<'_>,
        what: &[(&str, Option<JsonRule>)],
    ) -> Result<()> {
        let limit = self.limit;
        let mut found: Vec<Vec<String>> = what.iter().map(|_| Vec::new()).collect();
        self.db.each(sql, &f.params(), &mut |r| {
            for (i, (prefix, rule)) in what.iter().enumerate() {
                // A value that is not text at all is `type_problems`' to name. Keys are read
                // once, as every write path reads them (found by an exploratory test: a value
                // naming a key twice, imported, passed).
                let wrong = r
                    .text(4 + i)
                    .and_then(|t| match crate::strict_json::from_str(t) {
                        Ok(_) => rule.and_then(|rule| rule(t)),
                        Err(e) if crate::strict_json::is_duplicate_key(&e) => {
                            Some("holds JSON that names a key twice, which no write stores")
                        }
                        Err(_) => Some("holds text that is not readable JSON"),
                    });
                if let Some(wrong) = wrong.filter(|_| found[i].len() < limit) {
                    // The label as SQL made it: NULL (shown empty) stays NULL with a prefix.
                    let label = if r.is_null(3) {
                        String::new()
                    } else {
                        format!("{prefix}{}", r.show(3))
                    };
                    found[i].push(format!("{}: {label} {wrong}", ident(r)));
                }
            }
            // Past the first text's `limit` nothing more would be reported.
            Ok(found[0].len() < limit)
        })?;
        for d in found.into_iter().flatten().take(limit) {
            self.push(4, d);
        }
        Ok(())
    }

    /// Version contiguity (5), causal order of applied versions (2) and that the latest applied
    /// version is what is current (4), one identity at a time, walking the log in identity
    /// order. (Current records with no history at all are found by the invariant-4 query.)
    /// Returns how many current records it met (each has history).
    fn walk_history(&mut self, f: &Filter<'_>) -> Result<i64> {
        let mut met = 0;
        let timeline = matches!(f, Filter::All);
        let fresh = || WalkState {
            timeline,
            ..WalkState::default()
        };
        let mut st = fresh();
        let mut found: Vec<(u8, String)> = Vec::new();
        // Each identity's findings, listed by identity in byte order — SQLite's order, which
        // PostgreSQL's walk follows only where the database's collation is `C`.
        let mut by_identity: Vec<(Key, Vec<(u8, String)>)> = Vec::new();
        self.db.walk(f, &mut |g, step| {
            match step {
                Step::Event(row) => st.event(g, row, &mut found),
                Step::End { current, tombstone } => {
                    met += i64::from(current.is_some());
                    st.finish(g, current.as_ref(), &mut found);
                    // Deleted and never restored: the tombstone must still be there.
                    if st.tombstoned && !tombstone()? {
                        found.push((3, format!("{}: history says it was deleted and never restored, but its tombstone is gone", label(g))));
                    } else if !st.tombstoned && st.deleted_once && tombstone()? {
                        // A `restored` event memscope did not write (a restore removes the
                        // tombstone in the same transaction): history would show the memory
                        // as it was before the delete (`resolve --at`).
                        found.push((3, format!("{}: its tombstone stands, but history says it was restored or collected since its delete", label(g))));
                    }
                    if !found.is_empty() {
                        by_identity.push((g.clone(), std::mem::take(&mut found)));
                    }
                    st = fresh();
                }
            }
            Ok(())
        })?;
        by_identity.sort_by(|a, b| a.0.cmp(&b.0));
        for (i, d) in by_identity.into_iter().flat_map(|(_, f)| f).chain(found) {
            self.push(i, d);
        }
        Ok(met)
    }
}

/// What is wrong with a stored JSON text that reads, said after its label; `None` if nothing.
type JsonRule = fn(&str) -> Option<&'static str>;

/// What is wrong with an event's detail that reads: a reason holding a NUL, which only a raw
/// client or an import before this check writes (a delete refuses one).
fn reason_with_nul(detail: &str) -> Option<&'static str> {
    super::fields::reason_holds_nul(detail).then_some(
        "gives a reason holding a NUL character, which memscope never writes and PostgreSQL cannot store: an export of this database would not import; take the character out with a SQL client",
    )
}

/// A row's first three columns as an identity's label.
fn ident(r: &dyn CheckRow) -> String {
    format!("{} · {} @ {}", r.show(0), r.show(1), r.show(2))
}

/// The current record's fields the walk compares with history.
pub(crate) struct CurrentRow {
    pub version: i64,
    pub causal_seq: i64,
    pub value: String,
    pub raw: Option<String>,
    pub source: Option<String>,
    pub confirm_count: Option<i64>,
    pub confirmed_source: Option<String>,
}

/// An identity as the walk meets it: subject, predicate, scope as stored.
pub(crate) type Key = (String, String, String);

fn label(k: &Key) -> String {
    format!("{} · {} @ {}", k.0, k.1, k.2)
}

struct WalkState {
    expected: i64,
    last_seq: Option<i64>,
    /// Highest causal_seq among applied versions since the last tombstone or removal.
    max_seq: Option<i64>,
    /// The latest applied version (None after a tombstone), its causal_seq and stored value.
    live: Option<i64>,
    live_seq: Option<i64>,
    live_value: Option<String>,
    /// The latest applied version's raw words and source, as its `set` event logged them.
    live_raw: Option<String>,
    live_source: Option<String>,
    /// The `confirmed` events of the latest applied version, and the last one's source.
    confirms: i64,
    confirmed_source: Option<String>,
    /// The last deletion was not followed by a restore or a collection.
    tombstoned: bool,
    /// A deletion was logged at all (only then is the tombstone asked after a restore).
    deleted_once: bool,
    /// Refused writes (`rejected`, `pending_resolved`) that keep their source since the last
    /// collection of a tombstone, and those logged before one (which `gc` blanks: invariant 3).
    refused_sources: i64,
    kept_at_collection: i64,
    /// Whether event times are judged (the whole-database check; the per-write assertion
    /// leaves them to it: a clock set back is not the write's doing).
    timeline: bool,
    /// The last `set`, `deleted`, `restored` or `removed` event: its kind, version and time.
    last_dated: Option<(String, Option<i64>, chrono::DateTime<chrono::FixedOffset>)>,
}

impl Default for WalkState {
    fn default() -> Self {
        WalkState {
            expected: 1,
            last_seq: None,
            max_seq: None,
            live: None,
            live_seq: None,
            live_value: None,
            live_raw: None,
            live_source: None,
            confirms: 0,
            confirmed_source: None,
            tombstoned: false,
            deleted_once: false,
            refused_sources: 0,
            kept_at_collection: 0,
            timeline: false,
            last_dated: None,
        }
    }
}

impl WalkState {
    /// One history row of identity `g`, in log order.
    fn event(&mut self, g: &Key, row: HistoryRow, found: &mut Vec<(u8, String)>) {
        let HistoryRow {
            event,
            version,
            seq,
            detail,
            value,
            raw,
            source,
            at,
        } = row;
        if self.timeline {
            self.in_time(g, &event, version, at.as_deref(), detail.as_deref(), found);
        }
        match event.as_str() {
            "set" => {
                let Some(v) = version else {
                    found.push((5, format!("{}: a set event without a version", label(g))));
                    return;
                };
                if v != self.expected {
                    found.push((
                        5,
                        format!(
                            "{}: applied version {v} where {} was expected",
                            label(g),
                            self.expected
                        ),
                    ));
                }
                if let (Some(prev), Some(s)) = (self.last_seq, seq) {
                    if s <= prev {
                        found.push((2, format!("{}: v{v} has causal_seq {s}, not above the previous version's {prev}", label(g))));
                    }
                }
                self.last_seq = seq.or(self.last_seq);
                self.max_seq = self.max_seq.max(seq);
                self.expected = v.max(self.expected) + 1;
                self.live = Some(v);
                self.live_seq = seq;
                self.live_value = value;
                self.live_raw = raw;
                self.live_source = source;
                self.confirms = 0;
                self.confirmed_source = None;
            }
            // A confirmation of the current version: counted, its source kept on the record.
            "confirmed" if version.is_some() && version == self.live => {
                self.confirms += 1;
                self.confirmed_source = source;
            }
            "deleted" => {
                let detail =
                    detail.and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok());
                let number = |key: &str| detail.as_ref().and_then(|d| d.get(key)?.as_i64());
                let purged = number("purged_versions").unwrap_or(0);
                let v = version.unwrap_or(-1);
                // Past the record it removed, too, where history did not account for it.
                let want =
                    (self.expected + purged).max(number("record_version").map_or(0, |r| r + 1));
                if v != want {
                    found.push((
                        5,
                        format!(
                            "{}: tombstone v{v} where {want} was expected ({purged} purged)",
                            label(g)
                        ),
                    ));
                }
                self.expected = v.max(want) + 1;
                self.live = None;
                self.last_seq = None;
                self.max_seq = None;
                self.tombstoned = true;
                self.deleted_once = true;
            }
            // The record left this scope (a rescope moved it, a revert removed its only
            // version): the next version is decided against no current record, as the write
            // path decides it, so it is not compared with the causal numbers before (README,
            // "check": causal monotonicity).
            "removed" => {
                self.live = None;
                self.last_seq = None;
                self.max_seq = None;
            }
            "restored" => self.tombstoned = false,
            "tombstone_collected" => {
                self.tombstoned = false;
                self.kept_at_collection += std::mem::take(&mut self.refused_sources);
            }
            "rejected" | "pending_resolved" => {
                self.refused_sources += i64::from(source.is_some());
            }
            // A kind memscope never writes cannot be replayed: what it did to the identity is
            // unknown, so the current view cannot be proved from history (and the next write
            // would count its version wrong).
            other if !crate::store::events::EventKind::is_known(other) => found.push((
                4,
                format!(
                    "{}: a history event of kind '{}', which memscope never writes",
                    label(g),
                    other
                ),
            )),
            _ => {}
        }
    }

    /// Invariant 2 in time: an identity's `set`, `deleted`, `restored` and `removed` events
    /// are dated in the order they were logged (memscope takes a write's time inside its
    /// lock, so one identity's events follow commit order; equal times are two writes in one
    /// millisecond), and a delete is dated no earlier than the live intervals it ends. A time
    /// that does not parse is the field rules' to name.
    fn in_time(
        &mut self,
        g: &Key,
        event: &str,
        version: Option<i64>,
        at: Option<&str>,
        detail: Option<&str>,
        found: &mut Vec<(u8, String)>,
    ) {
        if !matches!(event, "set" | "deleted" | "restored" | "removed") {
            return;
        }
        let Some(t) = at.and_then(|a| chrono::DateTime::parse_from_rfc3339(a).ok()) else {
            return;
        };
        let shown = |event: &str, version: Option<i64>| match version {
            Some(v) => format!("its {event} event of v{v}"),
            None => format!("its {event} event"),
        };
        if let Some((before, before_version, before_at)) = &self.last_dated {
            if t < *before_at {
                found.push((2, format!(
                    "{}: {} is dated {}, before {} logged ahead of it ({}): a client wrote it out of time, or a writer's clock was set back",
                    label(g),
                    shown(event, version),
                    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    shown(before, *before_version),
                    before_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                )));
            }
        }
        if event == "deleted" {
            let ended = detail
                .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                .and_then(|d| d.get("live_intervals").cloned())
                .and_then(|i| serde_json::from_value::<Vec<Vec<String>>>(i).ok())
                .unwrap_or_default()
                .into_iter()
                .flatten()
                .filter_map(|a| chrono::DateTime::parse_from_rfc3339(&a).ok())
                .max();
            if let Some(end) = ended.filter(|end| t < *end) {
                found.push((2, format!(
                    "{}: {} is dated {}, before the live interval it ends ({}): a client wrote it out of time, or a writer's clock was set back",
                    label(g),
                    shown(event, version),
                    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    end.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                )));
            }
        }
        self.last_dated = Some((event.to_string(), version, t));
    }

    /// What of the current record's provenance history does not say: its raw words and
    /// source are its `set` event's, its confirmation count and last confirming source are its
    /// `confirmed` events'. (Retention never purges the current version's `set` event, and
    /// purges only the value and raw words of a confirmation, not its source.)
    fn provenance_differs(&self, m: &CurrentRow) -> Option<String> {
        if m.raw != self.live_raw {
            return Some("raw words differ from its set event".into());
        }
        if m.source != self.live_source {
            return Some("source differs from its set event".into());
        }
        if m.confirm_count != Some(self.confirms) {
            return Some(format!(
                "confirm_count is {} but {} confirmation(s) of it are logged",
                m.confirm_count
                    .map_or_else(|| "not a number".into(), |c| c.to_string()),
                self.confirms
            ));
        }
        if self.confirms > 0 && m.confirmed_source != self.confirmed_source {
            return Some("last confirming source differs from its last confirmed event".into());
        }
        None
    }

    fn finish(&self, g: &Key, mem: Option<&CurrentRow>, found: &mut Vec<(u8, String)>) {
        let label = label(g);
        // Once a tombstone is collected no delete reaches the writes it refused: `gc` blanks
        // their sources as it collects (README, "delete, restore, gc"). The whole-database
        // check's: a write's own assertion does not answer for an earlier release's gc.
        if self.timeline && self.kept_at_collection > 0 {
            found.push((
                3,
                format!(
                    "{label} had its tombstone collected, but {} write(s) refused before keep their source: run `memscope gc` to blank them",
                    self.kept_at_collection
                ),
            ));
        }
        match (self.live, mem) {
            (Some(h), Some(m)) => {
                if h != m.version {
                    found.push((
                        4,
                        format!(
                            "{label}: current is v{} but the latest applied version is v{h}",
                            m.version
                        ),
                    ));
                } else if self.live_seq != Some(m.causal_seq)
                    || self.live_value.as_ref().is_some_and(|v| *v != m.value)
                {
                    found.push((
                        4,
                        format!(
                            "{label}: current v{h} differs from its applied version in history"
                        ),
                    ));
                } else if let Some(what) = self.provenance_differs(m) {
                    found.push((4, format!("{label}: current v{h}'s {what} in history")));
                }
                if let Some(max) = self.max_seq {
                    if m.causal_seq < max {
                        found.push((2, format!("{label}: current causal_seq {} is below an applied version's {max}", m.causal_seq)));
                    }
                }
            }
            (Some(h), None) => found.push((
                4,
                format!("{label}: history says v{h} is current but there is no current record"),
            )),
            (None, Some(m)) => found.push((
                4,
                format!(
                    "{label}: current v{} is not the latest applied version in history",
                    m.version
                ),
            )),
            (None, None) => {}
        }
    }
}

/// Near-duplicate predicates no alias joins yet (reported, never merged).
pub fn duplicate_candidates(predicates: &[String]) -> Vec<(String, String)> {
    let matcher = SkimMatcherV2::default();
    let squash = |p: &str| p.replace('_', "");
    let mut out = Vec::new();
    let limit = predicates.len().min(2000);
    for i in 0..limit {
        for j in (i + 1)..limit {
            let (a, b) = (&predicates[i], &predicates[j]);
            let (sa, sb) = (squash(a), squash(b));
            // A numbered series (`step_1`, `step_2`) is deliberate, not a near-duplicate.
            let no_digits = |p: &str| {
                p.chars()
                    .filter(|c| !c.is_ascii_digit())
                    .collect::<String>()
            };
            if sa != sb && no_digits(&sa) == no_digits(&sb) {
                continue;
            }
            let (long, short) = if sa.chars().count() >= sb.chars().count() {
                (&sa, &sb)
            } else {
                (&sb, &sa)
            };
            let (ll, sl) = (long.chars().count(), short.chars().count());
            if sl < 3 || sl * 10 < ll * 6 {
                continue;
            }
            let best = matcher.fuzzy_match(short, short).unwrap_or(1).max(1);
            if let Some(score) = matcher.fuzzy_match(long, short) {
                if sa == sb || score * 10 >= best * 6 {
                    out.push((a.clone(), b.clone()));
                }
            }
        }
    }
    out
}

/// The first column of the first row of `sql`, an integer (0 when there is none).
pub(crate) fn count(db: &mut dyn CheckDb, sql: &str, params: &[&str]) -> Result<i64> {
    Ok(collect(db, sql, params, 1, &|r| r.int(0).unwrap_or(0))?
        .first()
        .copied()
        .unwrap_or(0))
}

/// The first column of every row of `sql`, as text.
fn texts(db: &mut dyn CheckDb, sql: &str) -> Result<Vec<String>> {
    collect(db, sql, &[], usize::MAX, &|r| r.show(0))
}

/// Pairs as JSON arrays of two, for the metrics.
fn pairs_json(pairs: &[(String, String)]) -> serde_json::Value {
    serde_json::json!(pairs
        .iter()
        .map(|(a, b)| serde_json::json!([a, b]))
        .collect::<Vec<_>>())
}

/// The full check on `db`, inside whatever snapshot the caller holds: the violations and the
/// health figures every backend reports; with `now`, the rows dated after it (a health finding:
/// an export taken now would carry that time, and `import` would refuse them).
pub(crate) fn check_report(
    db: &mut dyn CheckDb,
    now: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<CheckReport> {
    // A table or column a raw client dropped stops every query that reads it: said first, and
    // alone (found by an exploratory test: check said ok, or failed naming itself as the fix).
    let missing = db.schema_problems()?;
    if !missing.is_empty() {
        return Ok(CheckReport {
            ok: false,
            integrity: None,
            violations: Vec::new(),
            metrics: BTreeMap::from([("schema_problems".into(), serde_json::json!(missing))]),
            health: Vec::new(),
        });
    }
    let mut c = Checker {
        db,
        violations: Vec::new(),
        limit: 1000,
    };
    // First what makes rows unreadable to memscope's other commands (`list` would fail on
    // them): the rest of the check reads such rows loosely and goes on.
    for p in c.db.type_problems(c.limit)? {
        c.push(p.invariant, p.sentence());
    }
    c.run(&Filter::All)?;
    let now = now.map(super::dump::Deadline::new);
    let fields = super::fields::scan_fields(c.db, c.limit, now.as_ref())?;
    for p in fields.problems {
        c.push(p.invariant, p.sentence());
    }
    c.one_spelling_per_place()?;
    c.moved_copies_of_deleted()?;
    c.queue_and_read_log_in_time()?;
    let Checker { db, violations, .. } = c;
    let mut metrics = BTreeMap::new();
    for (name, sql) in [
        ("memories", "SELECT count(*) FROM memories"),
        ("history_events", "SELECT count(*) FROM history"),
        ("tombstones", "SELECT count(*) FROM tombstones"),
        (
            "pending_open",
            "SELECT count(*) FROM pending WHERE status = 'open'",
        ),
    ] {
        metrics.insert(name.into(), count(db, sql, &[])?.into());
    }
    for name in ["busy_retries", "resurrection_blocked", "stale_writes"] {
        let value = count(db, "SELECT value FROM metrics WHERE name = $1", &[name])?;
        metrics.insert(name.into(), value.into());
    }
    let mut preds = texts(db, "SELECT DISTINCT predicate FROM memories")?;
    preds.sort_unstable();
    metrics.insert(
        "duplicate_candidates".into(),
        pairs_json(&duplicate_candidates(&preds)),
    );
    // Subjects and scope ids a reader could take for one another (web-app, web_app, Web-App):
    // reported, never merged.
    for (name, sql) in [
        ("similar_subjects", "SELECT DISTINCT subject FROM memories"),
        (
            "similar_scopes",
            "SELECT DISTINCT scope FROM memories WHERE scope <> 'global'",
        ),
    ] {
        let ids = texts(db, sql)?;
        let pairs = crate::spelling::look_alike_pairs(ids.iter().map(String::as_str));
        metrics.insert(name.into(), pairs_json(&pairs));
    }
    // Not a violation either: ids written before the limit stay readable here, but they keep
    // the database from moving to PostgreSQL (said by `check`'s text too).
    metrics.insert("ids_past_limit".into(), fields.ids_past_limit.into());
    let debt = collect(
        db,
        "SELECT value FROM settings WHERE key = 'purge_debt_since'",
        &[],
        1,
        &|r| r.show(0),
    )?;
    metrics.insert("purge_debt_since".into(), serde_json::json!(debt.first()));
    // Not a violation (nothing is inconsistent), but every write without a causal number of
    // its own is refused until it changes: said as a figure, and by `check`'s text.
    let clock = db.clock()?;
    metrics.insert(
        "clock_exhausted".into(),
        serde_json::json!(clock >= crate::model::MAX_CAUSAL_SEQ),
    );
    let problems = db.guard_problems()?;
    let guards = if problems.is_empty() {
        "present"
    } else {
        "missing"
    };
    metrics.insert("schema_guards".into(), serde_json::json!(guards));
    if !problems.is_empty() {
        metrics.insert("schema_guard_problems".into(), serde_json::json!(problems));
    }
    let health = match (fields.latest_dated_after, &now) {
        (Some(latest), Some(now)) => vec![Health::DatedAhead(DatedAhead::from_scan(
            fields.dated_after,
            latest,
            now.text(),
        ))],
        _ => Vec::new(),
    };
    Ok(CheckReport {
        ok: violations.is_empty(),
        integrity: None,
        violations,
        metrics,
        health,
    })
}

/// The per-write assertion (MEMSCOPE_ASSERT_INVARIANTS=1): re-checks the identity a write
/// touched, inside its transaction, and refuses to commit a violation.
pub(crate) fn assert_identity_clean(db: &mut dyn CheckDb, id: &Identity) -> Result<()> {
    let scope_text = id.scope.to_string();
    let mut c = Checker {
        db,
        violations: Vec::new(),
        limit: 20,
    };
    c.run(&Filter::One(id, scope_text))?;
    if let Some(v) = c.violations.first() {
        bail!(
            "refusing to commit: the write would break invariant {} ({}): {}",
            v.invariant,
            v.name,
            v.detail
        );
    }
    Ok(())
}

/// What is missing of memscope's tables and columns, given each table's `present` columns
/// (none: the table is missing) — the neutral half of [`CheckDb::schema_problems`].
pub(crate) fn missing_columns(
    mut present: impl FnMut(&str) -> Result<Vec<String>>,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for (table, columns) in crate::store::schema::contract_columns() {
        let have = present(table)?;
        if have.is_empty() {
            out.push(format!("table {table} is missing"));
            continue;
        }
        let lacking: Vec<&str> = columns
            .iter()
            .filter(|c| !have.contains(c))
            .map(String::as_str)
            .collect();
        if !lacking.is_empty() {
            out.push(format!(
                "table {table} lacks column(s) {}",
                lacking.join(", ")
            ));
        }
    }
    Ok(out)
}

/// The sentence `check` says a schema a raw client changed with (`problems`: what
/// [`CheckDb::schema_problems`] found).
pub fn schema_damaged_sentence(problems: &[String]) -> String {
    format!(
        "memscope's schema on this database was changed by a raw SQL client ({}): nothing of memscope reads or writes it safely until it is whole again, and `memscope init` does not rebuild what was dropped — restore the database from a backup taken before the change",
        problems.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::duplicate_candidates;

    fn pairs(preds: &[&str]) -> Vec<(String, String)> {
        let preds: Vec<String> = preds.iter().map(|p| p.to_string()).collect();
        duplicate_candidates(&preds)
    }

    #[test]
    fn near_duplicates_are_reported_and_series_are_not() {
        let found = pairs(&[
            "package_manager",
            "pkg_manager",
            "test_runner",
            "reply_language",
            "step_1",
            "step_2",
        ]);
        assert!(
            found.contains(&("package_manager".into(), "pkg_manager".into())),
            "{found:?}"
        );
        assert!(
            !found.iter().any(|(a, _)| a.starts_with("step")),
            "{found:?}"
        );
        assert!(
            !found
                .iter()
                .any(|(a, b)| a == "test_runner" || b == "test_runner"),
            "{found:?}"
        );
        assert!(pairs(&["formatter", "code_formatter"]).len() == 1);
    }
}
