//! `check`: proves the six invariants (README, "Invariants") from outside, on any database
//! (including one a raw-SQL client damaged after dropping the triggers), runs SQLite's own
//! integrity check for physical damage, and reports the health figures.

use super::Store;
use crate::model::{normalize_predicate, Identity};
use anyhow::{bail, Result};
use fuzzy_matcher::skim::SkimMatcherV2;
use fuzzy_matcher::FuzzyMatcher;
use rusqlite::{Connection, OptionalExtension, ToSql};
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
    /// that group or others can reach, each with the `chmod` that fixes it.
    pub health: Vec<super::Exposure>,
}

/// How thoroughly SQLite examines the file: `quick_check` (the default) verifies every page
/// and record but not that indexes match their tables; `integrity_check` does that too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IntegrityMode {
    Quick,
    Full,
}

/// SQLite's verdict on the file: `ok`, or the problems it found (at most 100).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Integrity {
    pub mode: IntegrityMode,
    pub ok: bool,
    pub problems: Vec<String>,
}

impl Integrity {
    /// A file SQLite could not even open or read: damage found before any check ran.
    pub fn unreadable(mode: IntegrityMode, problem: String) -> Integrity {
        Integrity {
            mode,
            ok: false,
            problems: vec![problem],
        }
    }

    /// One sentence for a damaged file, naming the first problem and what to do.
    pub fn sentence(&self) -> String {
        let first = self.problems.first().map(String::as_str).unwrap_or("");
        format!(
            "the database file is damaged: SQLite's {} check found {} problem(s), first: {}; stop the writers, keep a copy of the file, and restore a backup or `memscope export` what is still readable into a new database",
            match self.mode {
                IntegrityMode::Quick => "quick",
                IntegrityMode::Full => "full integrity",
            },
            self.problems.len(),
            crate::model::escape_controls(first)
        )
    }
}

/// Whether an error is SQLite finding the file damaged (as opposed to busy, full, or absent).
pub fn is_damage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<rusqlite::Error>(),
            Some(rusqlite::Error::SqliteFailure(f, _))
                if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
    })
}

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
enum Filter<'a> {
    All,
    One(&'a Identity, String),
}

impl Filter<'_> {
    /// A WHERE fragment over `alias.subject/predicate/scope`, bound to ?1..?3.
    fn sql(&self, alias: &str) -> String {
        match self {
            Filter::All => "1".into(),
            Filter::One(..) => {
                format!("{alias}.subject = ?1 AND {alias}.predicate = ?2 AND {alias}.scope = ?3")
            }
        }
    }
    fn params(&self) -> Vec<&dyn ToSql> {
        match self {
            Filter::All => vec![],
            Filter::One(id, scope) => vec![&id.subject, &id.predicate, scope],
        }
    }
}

struct Checker<'a> {
    conn: &'a Connection,
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
        describe: &dyn Fn(&rusqlite::Row<'_>) -> rusqlite::Result<String>,
    ) -> Result<()> {
        let mut stmt = self.conn.prepare(sql)?;
        let mut rows = stmt.query(f.params().as_slice())?;
        let mut found = Vec::new();
        while let Some(r) = rows.next()? {
            found.push(describe(r)?);
            if found.len() >= self.limit {
                break;
            }
        }
        for d in found {
            self.push(invariant, d);
        }
        Ok(())
    }

    fn run(&mut self, f: &Filter<'_>) -> Result<()> {
        let ident = |r: &rusqlite::Row<'_>| -> rusqlite::Result<String> {
            Ok(format!(
                "{} · {} @ {}",
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?
            ))
        };
        // 1. Uniqueness.
        self.rows(1, &format!(
            "SELECT subject, predicate, scope, count(*) FROM memories m WHERE {} GROUP BY scope, subject, predicate HAVING count(*) > 1",
            f.sql("m")), f,
            &|r| Ok(format!("{} has {} current records", ident(r)?, r.get::<_, i64>(3)?)))?;

        // 3. Deletion monotonicity.
        self.rows(
            3,
            &format!(
                "SELECT m.subject, m.predicate, m.scope FROM memories m JOIN tombstones t
             ON t.subject = m.subject AND t.predicate = m.predicate AND t.scope = m.scope WHERE {}",
                f.sql("m")
            ),
            f,
            &|r| {
                Ok(format!(
                    "{} is tombstoned but has a current record",
                    ident(r)?
                ))
            },
        )?;
        self.rows(3, &format!(
            "SELECT h.subject, h.predicate, h.scope, count(*) FROM history h JOIN tombstones t
             ON t.subject = h.subject AND t.predicate = h.predicate AND t.scope = h.scope
             WHERE {} AND (h.value IS NOT NULL OR h.raw IS NOT NULL) GROUP BY h.subject, h.predicate, h.scope", f.sql("h")), f,
            &|r| Ok(format!("{} is tombstoned but {} history row(s) still hold content", ident(r)?, r.get::<_, i64>(3)?)))?;
        self.rows(3, &format!(
            "SELECT t.subject, t.predicate, t.scope, t.version, max(h.version) FROM tombstones t JOIN history h
             ON t.subject = h.subject AND t.predicate = h.predicate AND t.scope = h.scope AND h.event = 'set'
             WHERE {} GROUP BY t.subject, t.predicate, t.scope HAVING max(h.version) >= t.version", f.sql("t")), f,
            &|r| Ok(format!("{}: tombstone v{} is not above version {}", ident(r)?, r.get::<_, i64>(3)?, r.get::<_, i64>(4)?)))?;
        self.rows(3, &format!(
            "SELECT t.subject, t.predicate, t.scope, t.version, max(h.version) FROM tombstones t JOIN history h
             ON t.subject = h.subject AND t.predicate = h.predicate AND t.scope = h.scope AND h.version IS NOT NULL
             WHERE {} GROUP BY t.subject, t.predicate, t.scope HAVING max(h.version) > t.version", f.sql("t")), f,
            &|r| Ok(format!("{}: tombstone v{} is below version {} in its history", ident(r)?, r.get::<_, i64>(3)?, r.get::<_, i64>(4)?)))?;
        self.rows(3, &format!(
            "SELECT p.subject, p.predicate, t.scope, p.id FROM pending p JOIN tombstones t
             ON t.subject = p.subject AND t.predicate = p.predicate
             WHERE {} AND p.status <> 'open' AND p.resolved_scope = t.scope
               -- A delete purges the items resolved into it and their events; an item whose
               -- resolution event is gone was resolved before the delete (commit order, not clocks).
               AND NOT EXISTS (SELECT 1 FROM history h WHERE h.subject = p.subject AND h.predicate = p.predicate
                   AND h.scope = t.scope AND h.event = 'pending_resolved'
                   AND json_extract(h.detail, '$.pending_id') = p.id)",
            match f { Filter::All => "1".to_string(), Filter::One(..) => "p.subject = ?1 AND p.predicate = ?2 AND t.scope = ?3".to_string() }), f,
            &|r| Ok(format!("{}: pending item #{} still holds content written before the delete", ident(r)?, r.get::<_, i64>(3)?)))?;

        // 2, 4, 5 per identity: walk the log oldest first, comparing with the current record.
        let with_history = self.walk_history(f)?;
        let (current_count,): (i64,) = self.conn.query_row(
            &format!("SELECT count(*) FROM memories m WHERE {}", f.sql("m")),
            f.params().as_slice(),
            |r| Ok((r.get(0)?,)),
        )?;
        if current_count != with_history {
            // 4. Some current records have no history at all: name them.
            self.rows(4, &format!(
                "SELECT m.subject, m.predicate, m.scope, m.version FROM memories m WHERE {} AND NOT EXISTS (
                    SELECT 1 FROM history h WHERE h.subject = m.subject AND h.predicate = m.predicate AND h.scope = m.scope)",
                f.sql("m")), f,
                &|r| Ok(format!("{}: current v{} has no history", ident(r)?, r.get::<_, i64>(3)?)))?;
        }

        // 4. Values are JSON that memscope can read (since schema v3 no CHECK says so, and
        // SQLite's json_valid accepts what serde refuses: 1e400, lone surrogates, deep nesting).
        self.unreadable_json(
            &format!(
                "SELECT m.subject, m.predicate, m.scope, 'current v' || m.version, m.value FROM memories m WHERE {}",
                f.sql("m")
            ),
            f,
        )?;
        self.unreadable_json(
            &format!(
                "SELECT h.subject, h.predicate, h.scope, 'history event #' || h.id || ' (' || h.event || ')', h.value
                 FROM history h WHERE {} AND h.value IS NOT NULL
                 UNION ALL
                 SELECT h.subject, h.predicate, h.scope, 'the detail of history event #' || h.id || ' (' || h.event || ')', h.detail
                 FROM history h WHERE {} AND h.detail IS NOT NULL",
                f.sql("h"),
                f.sql("h")
            ),
            f,
        )?;

        // 5. Every tombstone's version is accounted for by its `deleted` event.
        self.rows(5, &format!(
            "SELECT t.subject, t.predicate, t.scope, t.version FROM tombstones t WHERE {} AND NOT EXISTS (
                SELECT 1 FROM history h WHERE h.subject = t.subject AND h.predicate = t.predicate AND h.scope = t.scope
                AND h.event = 'deleted' AND h.version = t.version)", f.sql("t")), f,
            &|r| Ok(format!("{}: tombstone v{} has no `deleted` event accounting for its versions", ident(r)?, r.get::<_, i64>(3)?)))?;

        // 1 and 6: every stored scope is in canonical form; a second spelling of a scope is a
        // second current record of the same identity.
        let mut stmt = self.conn.prepare(&format!(
            "SELECT DISTINCT m.scope FROM memories m WHERE {}",
            f.sql("m")
        ))?;
        let scopes: Vec<String> = stmt
            .query_map(f.params().as_slice(), |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        for stored in scopes {
            match crate::model::Scope::parse(&stored) {
                Ok(canonical) if canonical.to_string() == stored => {}
                Ok(canonical) => {
                    let twins: i64 = self.conn.query_row(
                        "SELECT count(*) FROM memories a JOIN memories b ON a.subject = b.subject AND a.predicate = b.predicate
                         WHERE a.scope = ?1 AND b.scope = ?2",
                        [&stored, &canonical.to_string()],
                        |r| r.get(0),
                    )?;
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
        let mut stmt = self.conn.prepare(&format!(
            "SELECT DISTINCT m.predicate, a.canonical FROM memories m LEFT JOIN predicate_aliases a ON a.alias = m.predicate WHERE {}",
            f.sql("m")))?;
        let preds: Vec<(String, Option<String>)> = stmt
            .query_map(f.params().as_slice(), |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for (p, canonical) in preds {
            if let Some(c) = canonical {
                self.push(6, format!("current predicate '{p}' is an alias of '{c}'"));
            } else if normalize_predicate(&p).ok().as_deref() != Some(p.as_str()) {
                self.push(6, format!("current predicate '{p}' is not in normal form"));
            }
        }
        Ok(())
    }

    /// Invariant 6, one spelling per place: no two stored subjects, and no two stored
    /// repository or task scopes, fold alike (`spelling::fold`). memscope's write path stores
    /// the first spelling; a second one was written around it.
    fn one_spelling_per_place(&mut self) -> Result<()> {
        for (what, sql) in [
            // The current view, tombstones and the queue: every identity's history hangs off
            // one of them (a full scan of history would double check's time on 1M records).
            (
                "subject",
                "SELECT subject FROM memories UNION SELECT subject FROM tombstones
                 UNION SELECT subject FROM pending",
            ),
            (
                "scope",
                "SELECT DISTINCT scope FROM memories UNION SELECT scope FROM tombstones",
            ),
        ] {
            let mut stmt = self.conn.prepare(sql)?;
            let ids: Vec<String> = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for id in ids {
                by_key
                    .entry(crate::spelling::fold(&id))
                    .or_default()
                    .push(id);
            }
            for spellings in by_key.into_values().filter(|s| s.len() > 1) {
                self.push(6, format!(
                    "the {what} is stored in {} spellings ({}): one place has one spelling; they were written around memscope's write path",
                    spellings.len(),
                    spellings.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Invariant 4 for stored JSON: `sql` selects subject, predicate, scope, a label and the
    /// text; every text memscope's readers could not parse is a violation.
    fn unreadable_json(&mut self, sql: &str, f: &Filter<'_>) -> Result<()> {
        let mut stmt = self.conn.prepare(sql)?;
        let mut rows = stmt.query(f.params().as_slice())?;
        let mut found = Vec::new();
        while let Some(r) = rows.next()? {
            let readable = match r.get_ref(4)? {
                rusqlite::types::ValueRef::Text(t) => std::str::from_utf8(t)
                    .ok()
                    .is_some_and(|t| serde_json::from_str::<serde_json::Value>(t).is_ok()),
                _ => false,
            };
            if !readable {
                found.push(format!(
                    "{} · {} @ {}: {} holds text that is not readable JSON",
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?
                ));
                if found.len() >= self.limit {
                    break;
                }
            }
        }
        for d in found {
            self.push(4, d);
        }
        Ok(())
    }

    /// Version contiguity (5), causal order of applied versions (2) and that the latest applied
    /// version is what is current (4), one identity at a time, walking the log in identity
    /// order. (Current records with no history at all are found by the invariant-4 query.)
    /// Returns how many current records it met (each has history).
    fn walk_history(&mut self, f: &Filter<'_>) -> Result<i64> {
        let mut current = self.conn.prepare(
            "SELECT version, causal_seq, value FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
        )?;
        let mut tombstone = self.conn.prepare(
            "SELECT 1 FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
        )?;
        let mut met = 0;
        let mut stmt = self.conn.prepare(&format!(
            "SELECT h.subject, h.predicate, h.scope, h.event, h.version, h.causal_seq, h.detail, h.value FROM history h
             WHERE {} ORDER BY h.subject, h.predicate, h.scope, h.id", f.sql("h")))?;
        let mut rows = stmt.query(f.params().as_slice())?;
        let mut group: Option<Key> = None;
        let mut st = WalkState::default();
        let mut found: Vec<(u8, String)> = Vec::new();
        loop {
            let row = rows.next()?;
            let key: Option<Key> = match row {
                Some(r) => Some((r.get(0)?, r.get(1)?, r.get(2)?)),
                None => None,
            };
            if key != group {
                if let Some(g) = group.take() {
                    let mem: Option<CurrentRow> = current
                        .query_row(rusqlite::params![g.0, g.1, g.2], |r| {
                            Ok(CurrentRow {
                                version: r.get(0)?,
                                causal_seq: r.get(1)?,
                                value: r.get(2)?,
                            })
                        })
                        .optional()?;
                    met += i64::from(mem.is_some());
                    st.finish(&g, mem.as_ref(), &mut found);
                    // Deleted and never restored: the tombstone must still be there.
                    if st.tombstoned && !tombstone.exists(rusqlite::params![g.0, g.1, g.2])? {
                        found.push((3, format!("{}: history says it was deleted and never restored, but its tombstone is gone", label(&g))));
                    }
                }
                st = WalkState::default();
                group = key;
            }
            let (Some(r), Some(g)) = (row, group.as_ref()) else {
                break;
            };
            let event: String = r.get(3)?;
            let version: Option<i64> = r.get(4)?;
            let seq: Option<i64> = r.get(5)?;
            match event.as_str() {
                "set" => {
                    let v = version.unwrap_or(-1);
                    if v != st.expected {
                        found.push((
                            5,
                            format!(
                                "{}: applied version {v} where {} was expected",
                                label(g),
                                st.expected
                            ),
                        ));
                    }
                    if let (Some(prev), Some(s)) = (st.last_seq, seq) {
                        if s <= prev {
                            found.push((2, format!("{}: v{v} has causal_seq {s}, not above the previous version's {prev}", label(g))));
                        }
                    }
                    st.last_seq = seq.or(st.last_seq);
                    st.max_seq = st.max_seq.max(seq);
                    st.expected = v.max(st.expected) + 1;
                    st.live = Some(v);
                    st.live_seq = seq;
                    st.live_value = r.get(7)?;
                }
                "deleted" => {
                    let detail: Option<String> = r.get(6)?;
                    let purged = detail
                        .and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok())
                        .and_then(|d| d.get("purged_versions").and_then(|p| p.as_i64()))
                        .unwrap_or(0);
                    let v = version.unwrap_or(-1);
                    let want = st.expected + purged;
                    if v != want {
                        found.push((
                            5,
                            format!(
                                "{}: tombstone v{v} where {want} was expected ({purged} purged)",
                                label(g)
                            ),
                        ));
                    }
                    st.expected = v.max(want) + 1;
                    st.live = None;
                    st.last_seq = None;
                    st.max_seq = None;
                    st.tombstoned = true;
                }
                "removed" => st.live = None,
                "restored" | "tombstone_collected" => st.tombstoned = false,
                _ => {}
            }
        }
        for (i, d) in found {
            self.push(i, d);
        }
        Ok(met)
    }
}

/// The current record's fields the walk compares with history.
struct CurrentRow {
    version: i64,
    causal_seq: i64,
    value: String,
}

type Key = (String, String, String);

fn label(k: &Key) -> String {
    format!("{} · {} @ {}", k.0, k.1, k.2)
}

struct WalkState {
    expected: i64,
    last_seq: Option<i64>,
    /// Highest causal_seq among applied versions since the last tombstone.
    max_seq: Option<i64>,
    /// The latest applied version (None after a tombstone), its causal_seq and stored value.
    live: Option<i64>,
    live_seq: Option<i64>,
    live_value: Option<String>,
    /// The last deletion was not followed by a restore or a collection.
    tombstoned: bool,
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
            tombstoned: false,
        }
    }
}

impl WalkState {
    fn finish(&self, g: &Key, mem: Option<&CurrentRow>, found: &mut Vec<(u8, String)>) {
        let label = label(g);
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

fn metric(conn: &Connection, name: &str) -> Result<i64> {
    Ok(conn
        .query_row("SELECT value FROM metrics WHERE name = ?1", [name], |r| {
            r.get(0)
        })
        .or_else(|e| {
            if e == rusqlite::Error::QueryReturnedNoRows {
                Ok(0)
            } else {
                Err(e)
            }
        })?)
}

impl Store {
    /// Every invariant over the whole database, plus the health figures.
    /// The quick check: SQLite's `quick_check`, then the invariants and health figures.
    pub fn check(&self) -> Result<CheckReport> {
        self.check_with(IntegrityMode::Quick)
    }

    /// SQLite's integrity check of the chosen depth, then the invariants and the health
    /// figures, all in one read snapshot. A damaged file is a failed report, not an error:
    /// when the damage also stops the invariant queries, the report says so among the
    /// integrity problems.
    pub fn check_with(&self, mode: IntegrityMode) -> Result<CheckReport> {
        self.conn.execute_batch("BEGIN")?;
        let result = self
            .integrity(mode)
            .and_then(|integrity| match check_report(&self.conn) {
                Ok(mut report) => {
                    report.ok &= integrity.ok;
                    report.integrity = Some(integrity);
                    Ok(report)
                }
                Err(e) if !integrity.ok || is_damage(&e) => {
                    let mut integrity = integrity;
                    integrity.ok = false;
                    integrity
                        .problems
                        .push(format!("the invariants could not be read: {e:#}"));
                    Ok(CheckReport {
                        ok: false,
                        integrity: Some(integrity),
                        violations: Vec::new(),
                        metrics: BTreeMap::new(),
                        health: Vec::new(),
                    })
                }
                Err(e) => Err(e),
            });
        let _ = self.conn.execute_batch("COMMIT");
        let mut report = result?;
        report.metrics.insert(
            "durability".into(),
            serde_json::json!(self.durability()?.as_str()),
        );
        // A health figure, not an invariant: global records that look like one place's rule
        // (`memscope suspects` lists them). A file too damaged to scan has none to report.
        if report.integrity.as_ref().is_none_or(|i| i.ok) {
            if let Ok(found) = self.suspects() {
                report
                    .metrics
                    .insert("suspects".into(), serde_json::json!(found.len()));
            }
        }
        report.health = super::exposures(&self.path);
        Ok(report)
    }

    /// Runs `quick_check` or `integrity_check`; an error that is itself damage is a problem.
    fn integrity(&self, mode: IntegrityMode) -> Result<Integrity> {
        let sql = match mode {
            IntegrityMode::Quick => "PRAGMA quick_check(100)",
            IntegrityMode::Full => "PRAGMA integrity_check(100)",
        };
        let run = || -> rusqlite::Result<Vec<String>> {
            let mut stmt = self.conn.prepare(sql)?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect()
        };
        match run() {
            Ok(rows) if rows.len() == 1 && rows[0] == "ok" => Ok(Integrity {
                mode,
                ok: true,
                problems: Vec::new(),
            }),
            Ok(rows) => Ok(Integrity {
                mode,
                ok: false,
                problems: rows,
            }),
            Err(e) => {
                let e = anyhow::Error::new(e);
                if is_damage(&e) {
                    Ok(Integrity::unreadable(mode, format!("{e:#}")))
                } else {
                    Err(e)
                }
            }
        }
    }
}

/// The full check on `conn`, inside whatever transaction the caller holds.
pub(crate) fn check_report(conn: &Connection) -> Result<CheckReport> {
    let mut c = Checker {
        conn,
        violations: Vec::new(),
        limit: 1000,
    };
    c.run(&Filter::All)?;
    for p in super::fields::field_problems(conn, c.limit)? {
        c.push(p.invariant, p.detail);
    }
    c.one_spelling_per_place()?;
    let violations = c.violations;
    let mut metrics = BTreeMap::new();
    let count = |sql: &str| -> Result<i64> { Ok(conn.query_row(sql, [], |r| r.get(0))?) };
    for (name, sql) in [
        ("memories", "SELECT count(*) FROM memories"),
        ("history_events", "SELECT count(*) FROM history"),
        ("tombstones", "SELECT count(*) FROM tombstones"),
        (
            "pending_open",
            "SELECT count(*) FROM pending WHERE status = 'open'",
        ),
    ] {
        metrics.insert(name.into(), count(sql)?.into());
    }
    for name in ["busy_retries", "resurrection_blocked", "stale_writes"] {
        metrics.insert(name.into(), metric(conn, name)?.into());
    }
    let mut stmt = conn.prepare("SELECT DISTINCT predicate FROM memories ORDER BY predicate")?;
    let preds: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let dups = duplicate_candidates(&preds);
    metrics.insert(
        "duplicate_candidates".into(),
        serde_json::json!(dups
            .iter()
            .map(|(a, b)| serde_json::json!([a, b]))
            .collect::<Vec<_>>()),
    );
    // Subjects and scope ids a reader could take for one another (web-app, web_app, Web-App):
    // reported, never merged.
    let distinct = |sql: &str| -> Result<Vec<String>> {
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    };
    for (name, sql) in [
        ("similar_subjects", "SELECT DISTINCT subject FROM memories"),
        (
            "similar_scopes",
            "SELECT DISTINCT scope FROM memories WHERE scope <> 'global'",
        ),
    ] {
        let ids = distinct(sql)?;
        let pairs = crate::spelling::look_alike_pairs(ids.iter().map(String::as_str));
        metrics.insert(
            name.into(),
            serde_json::json!(pairs
                .iter()
                .map(|(a, b)| serde_json::json!([a, b]))
                .collect::<Vec<_>>()),
        );
    }
    let debt: Option<String> = conn
        .query_row(
            "SELECT value FROM settings WHERE key = 'purge_debt_since'",
            [],
            |r| r.get(0),
        )
        .or_else(|e| {
            if e == rusqlite::Error::QueryReturnedNoRows {
                Ok(None)
            } else {
                Err(e)
            }
        })?;
    metrics.insert("purge_debt_since".into(), serde_json::json!(debt));
    let triggers: i64 = count("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ('memories_no_resurrection_insert','memories_no_resurrection_update','history_no_content_on_tombstone','history_append_only_update','history_append_only_delete','tombstones_not_over_live','tombstones_version_only_rises','history_ids_never_reused')")?;
    metrics.insert(
        "schema_guards".into(),
        serde_json::json!(if triggers == 8 { "present" } else { "missing" }),
    );
    Ok(CheckReport {
        ok: violations.is_empty(),
        integrity: None,
        violations,
        metrics,
        health: Vec::new(),
    })
}

/// The per-write assertion (MEMSCOPE_ASSERT_INVARIANTS=1): re-checks the identity a write
/// touched, inside its transaction, and refuses to commit a violation.
pub(crate) fn assert_identity_clean(conn: &Connection, id: &Identity) -> Result<()> {
    let scope_text = id.scope.to_string();
    let mut c = Checker {
        conn,
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
