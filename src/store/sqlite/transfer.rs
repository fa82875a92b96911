//! `export` / `import`: the whole database as JSON Lines, one table row per line, and back into
//! an empty database. Import is a restore of a dump, checked before it commits: it refuses a
//! dump that would break an invariant.

use super::schema::SCHEMA_VERSION;

/// The oldest export `import` reads: v3 changed constraints and an index, not columns, so a v2
/// export's rows fit as they are.
const OLDEST_IMPORTABLE: i64 = 2;
use super::Store;
use crate::model::to_json;
use anyhow::{anyhow, bail, Context, Result};
use rusqlite::types::ValueRef;
use serde_json::{json, Map, Value};
use std::io::{BufRead, Write};

/// Tables in dependency order; `metrics` last. Columns come from the schema itself.
const TABLES: &[&str] = &[
    "settings",
    "predicate_aliases",
    "memories",
    "history",
    "pending",
    "tombstones",
    // The read log: the audit trail of every incident travels with the memory it explains.
    "reads",
    "metrics",
];

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ImportReport {
    pub rows: std::collections::BTreeMap<String, u64>,
}

fn columns(conn: &rusqlite::Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let cols = stmt
        .query_map([], |r| r.get::<_, String>(1))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(cols)
}

impl Store {
    pub fn export(&self, out: &mut dyn Write) -> Result<u64> {
        self.conn.execute_batch("BEGIN")?;
        let result = (|| -> Result<u64> {
            let mut n = 0;
            let header = json!({ "table": "memscope_export", "schema_version": SCHEMA_VERSION, "exported_at": self.now() });
            writeln!(out, "{}", to_json(&header)?)?;
            for table in TABLES {
                let cols = columns(&self.conn, table)?;
                let order = if cols.iter().any(|c| c == "id") {
                    "id"
                } else {
                    "1"
                };
                let mut stmt = self
                    .conn
                    .prepare(&format!("SELECT * FROM {table} ORDER BY {order}"))?;
                let mut rows = stmt.query([])?;
                while let Some(r) = rows.next()? {
                    let mut row = Map::new();
                    row.insert("table".into(), json!(table));
                    for (i, c) in cols.iter().enumerate() {
                        let v = match r.get_ref(i)? {
                            ValueRef::Null => Value::Null,
                            ValueRef::Integer(x) => json!(x),
                            ValueRef::Real(x) => json!(x),
                            ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
                            ValueRef::Blob(_) => bail!("{table}.{c} holds a blob, which the schema never writes: run `memscope check`"),
                        };
                        row.insert(c.clone(), v);
                    }
                    writeln!(out, "{}", to_json(&row)?)?;
                    n += 1;
                }
            }
            Ok(n)
        })();
        self.conn.execute_batch("COMMIT")?;
        result
    }

    /// Loads an export into this (empty) database in one transaction; refuses a non-empty
    /// database, a dump from another schema version, or a dump that fails `check`.
    pub fn import(&mut self, input: &mut dyn BufRead) -> Result<ImportReport> {
        let (has_rows,): (i64,) = self.conn.query_row(
            "SELECT (SELECT count(*) FROM memories) + (SELECT count(*) FROM history) + (SELECT count(*) FROM tombstones) + (SELECT count(*) FROM pending) + (SELECT count(*) FROM reads)",
            [],
            |r| Ok((r.get(0)?,)),
        )?;
        if has_rows > 0 {
            bail!("{} already holds memories: import only into a new, empty database (e.g. --db fresh.db)", self.path.display());
        }
        let (report, _) = self.in_purge_tx(|tx, ctx, _| {
        let now = &ctx.now;
        tx.execute_batch(
            "DELETE FROM settings; DELETE FROM predicate_aliases; DELETE FROM metrics;",
        )?;
        let mut report = ImportReport::default();
        let mut cols_cache: std::collections::HashMap<String, Vec<String>> = Default::default();
        let mut seen_header = false;
        // Which line each row came from, by table and key columns: a rule broken after
        // loading names the line to fix.
        let mut row_lines: std::collections::HashMap<(String, Vec<String>), usize> =
            Default::default();
        for (i, line) in input.lines().enumerate() {
            let line_no = i + 1;
            let line = line.with_context(|| format!("reading line {line_no} of the import"))?;
            if line.trim().is_empty() {
                continue;
            }
            let obj: Map<String, Value> = serde_json::from_str(&line).map_err(|e| {
                let (msg, column) = crate::model::json_error(&e, &line);
                let at = column.map(|c| format!(", column {c},")).unwrap_or_default();
                anyhow!("line {line_no}{at} of the import is not a JSON object ({msg}): pass a file written by `memscope export`")
            })?;
            let table = obj.get("table").and_then(|t| t.as_str()).unwrap_or("");
            if table == "memscope_export" {
                let v = obj
                    .get("schema_version")
                    .and_then(|v| v.as_i64())
                    .unwrap_or(0);
                if !(OLDEST_IMPORTABLE..=SCHEMA_VERSION).contains(&v) {
                    bail!("the export is from schema version {v}, this memscope reads exports of versions {OLDEST_IMPORTABLE} to {SCHEMA_VERSION}: import it with a matching memscope");
                }
                seen_header = true;
                continue;
            }
            if !seen_header {
                bail!("line {line_no}: the import does not start with a memscope export header: pass a file written by `memscope export`");
            }
            if !TABLES.contains(&table) {
                bail!("line {line_no} names an unknown table '{table}': pass a file written by `memscope export`");
            }
            if !cols_cache.contains_key(table) {
                cols_cache.insert(table.to_string(), columns(tx, table)?);
            }
            let cols = &cols_cache[table];
            let mut names = Vec::new();
            let mut values: Vec<rusqlite::types::Value> = Vec::new();
            for (k, v) in &obj {
                if k == "table" {
                    continue;
                }
                if !cols.contains(k) {
                    bail!("line {line_no}: table {table} has no column '{k}'");
                }
                names.push(k.clone());
                values.push(match v {
                    Value::Null => rusqlite::types::Value::Null,
                    Value::Number(n) if n.is_i64() => {
                        rusqlite::types::Value::Integer(n.as_i64().unwrap_or_default())
                    }
                    Value::Number(n) => {
                        rusqlite::types::Value::Real(n.as_f64().unwrap_or_default())
                    }
                    Value::String(s) => rusqlite::types::Value::Text(s.clone()),
                    other => rusqlite::types::Value::Text(other.to_string()),
                });
            }
            let placeholders = (1..=names.len())
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO {table} ({}) VALUES ({placeholders})",
                names.join(", ")
            );
            tx.prepare_cached(&sql)?
                .execute(rusqlite::params_from_iter(values.iter()))
                .with_context(|| format!("line {line_no}: cannot insert the {table} row"))?;
            let key_cols = crate::store::fields::key_columns(table);
            let key = if key_cols == ["id"] && !obj.contains_key("id") {
                vec![tx.last_insert_rowid().to_string()]
            } else {
                key_cols
                    .iter()
                    .map(|c| match obj.get(*c) {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Null) | None => String::new(),
                        Some(other) => other.to_string(),
                    })
                    .collect()
            };
            row_lines.insert((table.to_string(), key), line_no);
            *report.rows.entry(table.to_string()).or_default() += 1;
        }
        if !seen_header {
            bail!("the import is empty: pass a file written by `memscope export`");
        }
        // A dump from before schema v4 may hold two spellings of one place: they become one,
        // as the migration does it (it rewrites history rows).
        super::spellings::scope_spellings_change();
        tx.execute("DELETE FROM spellings", [])?;
        super::spellings::merge_spellings(tx, now)?;
        // Every row as the write path could have written it, naming the first line that breaks
        // a rule.
        if let Some(p) = super::check::field_problems(tx, 1)?.into_iter().next() {
            let at = row_lines
                .get(&(p.table.to_string(), p.key.clone()))
                .map(|n| format!("line {n}"))
                .unwrap_or_else(|| format!("a row of {}", p.table));
            bail!(
                "{at} of the import breaks invariant {}: {} — nothing was imported",
                p.invariant,
                crate::model::escape_controls(&p.detail)
            );
        }
        let checked = super::check::check_report(tx)?;
        if let Some(v) = checked.violations.first() {
            bail!(
                "the import would break invariant {} ({}): {} — nothing was imported",
                v.invariant,
                v.name,
                v.detail
            );
        }
        Ok(report)
        // A second spelling of a deleted identity was blanked by the merge, which records
        // that debt itself; a restore destroys nothing else.
        }, |_| false)?;
        Ok(report)
    }
}
