//! `check` on SQLite: the rules of `store::check` over this connection's rows, after SQLite's
//! own integrity check of the file (physical damage), plus who may reach the file.

use super::Store;
use crate::model::Identity;
use crate::store::check::{
    CheckDb, CheckReport, CheckRow, CurrentRow, Filter, Health, HistoryRow, Integrity,
    IntegrityMode, Key, Step,
};
use crate::store::fields::{key_columns, type_invariant, FieldProblem};
use anyhow::Result;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};
use std::collections::BTreeMap;

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

/// A connection lent to the check.
pub(crate) struct Sqlite<'a>(pub(crate) &'a Connection);

/// `$1`… as SQLite's `?1`… (a `$` before a digit is a parameter in the check's SQL).
pub(crate) fn numbered_parameters(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(|n| n.is_ascii_digit()) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

impl CheckRow for rusqlite::Row<'_> {
    fn text(&self, i: usize) -> Option<&str> {
        match self.get_ref(i).ok()? {
            ValueRef::Text(t) => std::str::from_utf8(t).ok(),
            _ => None,
        }
    }

    fn int(&self, i: usize) -> Option<i64> {
        match self.get_ref(i).ok()? {
            ValueRef::Integer(n) => Some(n),
            _ => None,
        }
    }

    fn is_null(&self, i: usize) -> bool {
        matches!(self.get_ref(i), Ok(ValueRef::Null))
    }

    fn show(&self, i: usize) -> String {
        match self.get_ref(i) {
            Ok(ValueRef::Null) | Err(_) => String::new(),
            Ok(ValueRef::Integer(n)) => n.to_string(),
            Ok(ValueRef::Real(f)) => f.to_string(),
            Ok(ValueRef::Text(t) | ValueRef::Blob(t)) => String::from_utf8_lossy(t).into_owned(),
        }
    }
}

impl CheckDb for Sqlite<'_> {
    fn each(
        &mut self,
        sql: &str,
        params: &[&str],
        each: &mut dyn FnMut(&dyn CheckRow) -> Result<bool>,
    ) -> Result<()> {
        let mut stmt = self.0.prepare(&numbered_parameters(sql))?;
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        while let Some(r) = rows.next()? {
            if !each(r)? {
                break;
            }
        }
        Ok(())
    }

    fn json_int(&self, expr: &str, key: &str) -> String {
        format!("(CASE WHEN json_valid({expr}) THEN json_extract({expr}, '$.{key}') END)")
    }

    fn clock(&mut self) -> Result<i64> {
        // The write path's clock, whatever the settings row says.
        super::tx::clock_now(self.0)
    }

    fn schema_problems(&mut self) -> Result<Vec<String>> {
        let missing = crate::store::check::missing_columns(|table| {
            Ok(self
                .0
                .prepare_cached("SELECT name FROM pragma_table_info(?1)")?
                .query_map([table], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?)
        })?;
        if !missing.is_empty() {
            return Ok(missing);
        }
        // A table rebuilt without its constraints keeps every column (found by an
        // exploratory test: check said ok, and a write stored a row with a NULL id and value).
        Ok(super::schema::lost_rules(self.0)?)
    }

    fn guard_problems(&mut self) -> Result<Vec<String>> {
        // Each guard on its table, word for word as memscope created it: one dropped and made
        // again with another condition or body by a raw client guards something else.
        let mut problems = Vec::new();
        let mut stored = self
            .0
            .prepare_cached("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?1")?;
        for name in super::schema::GUARD_TRIGGERS {
            let sql = super::schema::guard_trigger_sql(name).unwrap_or_default();
            let found: Option<Option<String>> =
                stored.query_row([name], |r| r.get(0)).optional()?;
            match found {
                None => problems.push(format!("trigger {name} is missing")),
                Some(text) if text.as_deref() != Some(sql) => {
                    problems.push(format!("trigger {name} is not as memscope made it"))
                }
                Some(_) => {}
            }
        }
        for (table, problem) in [
            ("memories", "memories has no unique index on the identity (scope, subject, predicate)"),
            ("tombstones", "tombstones has no primary key or unique index on the identity (subject, predicate, scope)"),
        ] {
            if !super::schema::unique_on_identity(self.0, table)? {
                problems.push(problem.into());
            }
        }
        // And no trigger of a raw client's on the guarded tables, nor on the tables a delete
        // purges: one can make memscope's statements do nothing (`RAISE(IGNORE)`), undo what
        // they did, or copy what a delete destroys.
        let names = serde_json::to_string(&super::schema::GUARD_TRIGGERS)?;
        let mut foreign = self.0.prepare(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'
               AND tbl_name IN ('memories', 'history', 'tombstones', 'pending', 'reads')
               AND name NOT IN (SELECT value FROM json_each(?1)) ORDER BY name",
        )?;
        let mut rows = foreign.query([names])?;
        while let Some(r) = rows.next()? {
            let (name, table): (String, String) = (r.get(0)?, r.get(1)?);
            problems.push(format!(
                "trigger {name} on {table} was not made by memscope"
            ));
        }
        Ok(problems)
    }

    fn type_problems(&mut self, limit: usize) -> Result<Vec<FieldProblem>> {
        let mut out = Vec::new();
        for table in TYPED_TABLES {
            // Each column declared TEXT or INTEGER, as the database says it is declared: one
            // scan of the table finds every row with a field of another storage class.
            let columns = {
                let mut stmt = self.0.prepare(
                    "SELECT name, upper(type), \"notnull\" FROM pragma_table_info(?1) ORDER BY cid",
                )?;
                let rows = stmt.query_map([table], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, bool>(2)?,
                    ))
                })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()?
                    .into_iter()
                    .filter_map(|(name, declared, not_null)| {
                        let class = match declared.as_str() {
                            "TEXT" => "text",
                            "INTEGER" => "integer",
                            _ => return None,
                        };
                        Some((name, class, not_null))
                    })
                    .collect::<Vec<_>>()
            };
            if columns.is_empty() {
                continue;
            }
            let quoted = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
            let keys = key_columns(table);
            let mut select: Vec<String> = keys.iter().map(|k| quoted(k)).collect();
            let named = columns.iter().any(|(n, ..)| n == "subject")
                && columns.iter().any(|(n, ..)| n == "predicate");
            if named {
                select.push("subject".into());
                select.push("predicate".into());
                select.push(if columns.iter().any(|(n, ..)| n == "scope") {
                    "scope".into()
                } else {
                    "NULL".into()
                });
            }
            let first_type = select.len();
            select.extend(columns.iter().map(|(name, ..)| quoted(name)));
            // Every row, each value's class read here rather than by `typeof` in a WHERE: a
            // function call per column per row in SQL cost more than the whole scan.
            let sql = format!("SELECT {} FROM {table}", select.join(", "));
            let mut stmt = self.0.prepare(&sql)?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let class_at = |i: usize| storage_class_of(r.get_ref(first_type + i));
                let fits = |i: usize| {
                    let found = class_at(i);
                    found == columns[i].1 || (found == "null" && !columns[i].2)
                };
                if (0..columns.len()).all(fits) {
                    continue;
                }
                let mut said = Vec::new();
                let mut invariant = 6;
                // Whether every field said holds readable text with a NUL in it.
                let mut only_nul = true;
                for (i, (name, class, _)) in columns.iter().enumerate() {
                    if fits(i) {
                        continue;
                    }
                    let found = class_at(i);
                    if said.is_empty() {
                        invariant = type_invariant(table, name);
                    }
                    let nul = found == "text with nul" && *class == "text";
                    only_nul &= nul;
                    said.push(if found == "bad utf-8" {
                        format!("{name} holds text that is not UTF-8")
                    } else if nul {
                        format!("{name} holds a NUL character")
                    } else {
                        format!(
                            "{name} holds {} where memscope stores {}",
                            storage_class(found),
                            storage_class(class)
                        )
                    });
                }
                let key = (0..keys.len()).map(|i| r.show(i)).collect::<Vec<_>>();
                let row = match keys {
                    ["id"] => format!("{table} row #{}", key[0]),
                    ["subject", "predicate", "scope"] => {
                        format!("{table} row {} · {} @ {}", key[0], key[1], key[2])
                    }
                    _ => format!("{table} row {}", key.join(" · ")),
                };
                let identity = if named && keys != ["subject", "predicate", "scope"] {
                    let (s, p, sc) = (
                        r.show(keys.len()),
                        r.show(keys.len() + 1),
                        r.show(keys.len() + 2),
                    );
                    if sc.is_empty() {
                        format!(" ({s} · {p})")
                    } else {
                        format!(" ({s} · {p} @ {sc})")
                    }
                } else {
                    String::new()
                };
                out.push(FieldProblem {
                    invariant,
                    table,
                    named: None,
                    key,
                    detail: if only_nul {
                        format!(
                            "{row}{identity}: {}, which memscope never writes and PostgreSQL cannot store — an export of this database would not import; take the character out with a SQL client",
                            said.join(", ")
                        )
                    } else {
                        format!(
                            "{row}{identity}: {} — a client outside memscope wrote it, and memscope's commands cannot read the row",
                            said.join(", ")
                        )
                    },
                });
                if out.len() >= limit {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    fn walk(
        &mut self,
        f: &Filter<'_>,
        on: &mut dyn FnMut(&Key, Step<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut current = self.0.prepare(
            "SELECT version, causal_seq, value, raw, source, confirm_count, confirmed_source FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
        )?;
        let mut tombstone = self.0.prepare(
            "SELECT 1 FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
        )?;
        let mut stmt = self.0.prepare(&numbered_parameters(&format!(
            "SELECT h.subject, h.predicate, h.scope, h.event, h.version, h.causal_seq, h.detail, h.value, h.raw, h.source, h.at FROM history h
             WHERE {} ORDER BY h.subject, h.predicate, h.scope, h.id", f.sql("h"))))?;
        let mut rows = stmt.query(rusqlite::params_from_iter(f.params()))?;
        let mut group: Option<Key> = None;
        loop {
            let row = rows.next()?;
            // Loosely: a row of another type is `type_problems`' to name, not an error that
            // ends the check. A key is made only where an identity begins (three strings a row
            // cost more than comparing).
            let same = match (row, group.as_ref()) {
                (Some(r), Some(g)) => {
                    shows_as(r.get_ref(0)?, &g.0)
                        && shows_as(r.get_ref(1)?, &g.1)
                        && shows_as(r.get_ref(2)?, &g.2)
                }
                (None, None) => true,
                _ => false,
            };
            if !same {
                let key: Option<Key> = row.map(|r| (r.show(0), r.show(1), r.show(2)));
                if let Some(g) = group.take() {
                    let mem: Option<CurrentRow> = current
                        .query_row(rusqlite::params![g.0, g.1, g.2], |r| {
                            Ok(CurrentRow {
                                version: r.int(0).unwrap_or(0),
                                causal_seq: r.int(1).unwrap_or(0),
                                value: r.show(2),
                                raw: loose_text(r.get_ref(3)?),
                                source: loose_text(r.get_ref(4)?),
                                confirm_count: r.get_ref(5)?.as_i64().ok(),
                                confirmed_source: loose_text(r.get_ref(6)?),
                            })
                        })
                        .optional()?;
                    let mut there = || Ok(tombstone.exists(rusqlite::params![g.0, g.1, g.2])?);
                    on(
                        &g,
                        Step::End {
                            current: mem,
                            tombstone: &mut there,
                        },
                    )?;
                }
                group = key;
            }
            let (Some(r), Some(g)) = (row, group.as_ref()) else {
                break;
            };
            on(
                g,
                Step::Event(HistoryRow {
                    event: r.show(3),
                    version: r.int(4),
                    seq: r.int(5),
                    detail: lossy_text(r.get_ref(6)?),
                    value: lossy_text(r.get_ref(7)?),
                    raw: loose_text(r.get_ref(8)?),
                    source: loose_text(r.get_ref(9)?),
                    at: loose_text(r.get_ref(10)?),
                }),
            )?;
        }
        Ok(())
    }
}

/// The full check on `conn`, inside whatever transaction the caller holds; rows dated after
/// `now` are a health finding.
pub(crate) fn check_report(
    conn: &Connection,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<CheckReport> {
    crate::store::check::check_report(&mut Sqlite(conn), Some(now))
}

/// The per-write assertion (MEMSCOPE_ASSERT_INVARIANTS=1) on `conn`'s transaction.
pub(crate) fn assert_identity_clean(conn: &Connection, id: &Identity) -> Result<()> {
    crate::store::check::assert_identity_clean(&mut Sqlite(conn), id)
}

impl Store {
    /// `init`'s repair of the spellings registry ([`crate::store::check::registry_repairs`]):
    /// the places whose registered spelling it set to the one stored.
    pub fn repair_registry(&mut self) -> Result<Vec<(String, String, String)>> {
        // Before the change, as every change of the scope spellings is announced.
        super::spellings::scope_spellings_change();
        self.in_write_tx(|tx, _, _| {
            let repairs = crate::store::check::registry_repairs(&mut Sqlite(tx))?;
            for (kind, key, spelling) in &repairs {
                tx.execute(
                    "INSERT INTO spellings (kind, folded, spelling) VALUES (?1, ?2, ?3)
                     ON CONFLICT (kind, folded) DO UPDATE SET spelling = excluded.spelling",
                    rusqlite::params![kind, key, spelling],
                )?;
            }
            Ok(repairs)
        })
    }

    /// `init`'s merge of a place stored in two spellings (README, "check", invariant 6), when
    /// one is: the other spellings become the registered one, as the v4 migration merges them
    /// ([`super::spellings::merge_spellings`]) — in one transaction, history rewritten through
    /// the purge gate, and the on-disk purge paid when a deleted memory's content went.
    pub fn merge_places(&mut self) -> Result<crate::store::merge::MergeReport> {
        if !crate::store::check::stored_twice(&mut Sqlite(&self.conn))? {
            return Ok(Default::default());
        }
        let (report, _) = self.in_purge_tx(
            |tx, ctx, st| {
                // The spellings this store met are about to change.
                st.spellings = Default::default();
                if !crate::store::check::stored_twice(&mut Sqlite(tx))? {
                    return Ok(Default::default());
                }
                super::spellings::merge_spellings(tx, &ctx.now)
            },
            |report| report.purged_spellings > 0,
        )?;
        Ok(report)
    }

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
            .and_then(
                |integrity| match check_report(&self.conn, self.clock.now()) {
                    Ok(mut report) => {
                        report.ok &= integrity.ok;
                        report.integrity = Some(integrity);
                        Ok(report)
                    }
                    Err(e) if !integrity.ok || is_damage(&e) => {
                        let mut integrity = integrity;
                        integrity.ok = false;
                        integrity.problems.push(format!(
                            "the invariants could not be read: {}",
                            super::cause_text(&e)
                        ));
                        Ok(CheckReport {
                            ok: false,
                            integrity: Some(integrity),
                            violations: Vec::new(),
                            metrics: BTreeMap::new(),
                            health: Vec::new(),
                        })
                    }
                    Err(e) => Err(e),
                },
            )
            .map(|mut report| {
                // A health figure, not an invariant: global records that look like one
                // place's rule (`memscope suspects` lists them), in the same snapshot. A file
                // too damaged to scan has none to report.
                if report.integrity.as_ref().is_none_or(|i| i.ok) {
                    if let Ok(found) = self.suspect_count() {
                        report
                            .metrics
                            .insert("suspects".into(), serde_json::json!(found));
                    }
                }
                report
            });
        let _ = self.conn.execute_batch("COMMIT");
        let mut report = result?;
        // The way out of a schema that lost constraints is not a backup alone: an export
        // imported into a new file has them again (README, "check").
        if report.metrics.contains_key("schema_problems") {
            if let Some(way_out) = self.schema_damage.as_ref().and_then(|d| d.way_out.clone()) {
                report
                    .metrics
                    .insert("schema_way_out".into(), serde_json::json!(way_out));
            }
        } else {
            // Not a violation: every command still works, slower (README, "check").
            let missing = super::schema::missing_indexes(&self.conn)?;
            if !missing.is_empty() {
                report
                    .metrics
                    .insert("missing_indexes".into(), serde_json::json!(missing));
            }
        }
        report.metrics.insert(
            "durability".into(),
            serde_json::json!(self.durability()?.as_str()),
        );
        // The files' modes first, then what the rows hold.
        let mut health: Vec<Health> = super::exposures(&self.path)
            .into_iter()
            .map(Health::from)
            .collect();
        health.append(&mut report.health);
        report.health = health;
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
                unchecked: false,
            }),
            Ok(rows) => Ok(Integrity {
                mode,
                ok: false,
                problems: rows,
                unchecked: false,
            }),
            Err(e) => {
                let e = anyhow::Error::new(e);
                if is_damage(&e) {
                    Ok(Integrity::unreadable(mode, super::cause_text(&e)))
                } else {
                    Err(e)
                }
            }
        }
    }
}

/// memscope's tables whose columns `check` proves hold the type each is declared with.
const TYPED_TABLES: [&str; 9] = [
    "memories",
    "history",
    "tombstones",
    "pending",
    "reads",
    "predicate_aliases",
    "settings",
    "metrics",
    "spellings",
];

/// A value's storage class as `typeof` names it, or `bad utf-8` for text memscope's readers
/// refuse (SQLite stores what a raw client casts, and `list` then fails on "invalid utf-8
/// sequence"), or `text with nul` for text holding a NUL character.
fn storage_class_of(v: rusqlite::Result<ValueRef<'_>>) -> &'static str {
    match v {
        Ok(ValueRef::Null) | Err(_) => "null",
        Ok(ValueRef::Integer(_)) => "integer",
        Ok(ValueRef::Real(_)) => "real",
        Ok(ValueRef::Text(t)) if std::str::from_utf8(t).is_err() => "bad utf-8",
        // Text PostgreSQL cannot store, which memscope never writes (a raw client's, or an
        // import's before import refused it).
        Ok(ValueRef::Text(t)) if t.contains(&0) => "text with nul",
        Ok(ValueRef::Text(_)) => "text",
        Ok(ValueRef::Blob(_)) => "blob",
    }
}

/// A storage class as `typeof` names it (rusqlite's `Type`, lowercased, names the same), in
/// words.
pub(super) fn storage_class(class: &str) -> &'static str {
    match class {
        "text" | "text with nul" => "text",
        "integer" => "an integer",
        "real" => "a floating-point number",
        "blob" => "a blob",
        "null" => "NULL",
        _ => "a value of another type",
    }
}

/// Whether a column reads as `text` by [`CheckRow::show`], without making its string.
fn shows_as(v: ValueRef<'_>, text: &str) -> bool {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t) == text,
        _ => lossy_text(v).unwrap_or_default() == text,
    }
}

/// A column as text, whatever it holds (a blob as lossy UTF-8); NULL reads as `None`.
fn lossy_text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    }
}

/// A column as text when it holds text; NULL and any other type (damaged data) read as `None`.
fn loose_text(v: rusqlite::types::ValueRef<'_>) -> Option<String> {
    v.as_str().ok().map(str::to_string)
}
