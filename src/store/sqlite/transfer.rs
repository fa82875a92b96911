//! `export` / `import`: the whole database as JSON Lines, one table row per line, and back into
//! an empty database. Import is a restore of a dump, checked before it commits: it refuses a
//! dump that would break an invariant.

use super::Store;
use crate::store::dump::{DumpReader, DumpWriter, ImportReport, TABLES};
use anyhow::{bail, Result};
use rusqlite::types::ValueRef;
use serde_json::{json, Map, Value};
use std::io::{BufRead, Write};

fn columns(conn: &rusqlite::Connection, table: &str) -> Result<Vec<String>> {
    Ok(typed_columns(conn, table)?
        .into_iter()
        .map(|(name, _)| name)
        .collect())
}

/// `table`'s columns in their order, each with whether it holds whole numbers (its declared
/// type says INTEGER).
fn typed_columns(conn: &rusqlite::Connection, table: &str) -> Result<Vec<(String, bool)>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let cols = stmt
        .query_map([], |r| {
            let kind: String = r.get(2)?;
            Ok((
                r.get::<_, String>(1)?,
                kind.to_ascii_uppercase().contains("INT"),
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(cols)
}

impl Store {
    pub fn export(&self, out: &mut dyn Write) -> Result<u64> {
        self.conn.execute_batch("BEGIN")?;
        let result = (|| -> Result<u64> {
            // The snapshot starts at the first read, the time after it: a write committed in
            // between is in the dump and dated no later than its header (`import` refuses rows
            // dated after it).
            self.conn
                .query_row("SELECT count(*) FROM settings", [], |_| Ok(()))?;
            let mut dump = DumpWriter::start(out, &self.now())?;
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
                            // Found by review: invalid UTF-8 a raw client stored was
                            // exported as U+FFFD, and the import then said check was clean.
                            ValueRef::Text(t) => match std::str::from_utf8(t) {
                                Ok(t) => json!(t),
                                Err(_) => bail!("{table}.{c} holds text that is not UTF-8, which memscope never writes: run `memscope check`"),
                            },
                            ValueRef::Blob(_) => bail!("{table}.{c} holds a blob, which memscope never writes: run `memscope check`"),
                        };
                        row.insert(c.clone(), v);
                    }
                    // The clock as it stands, as PostgreSQL's dump has it: the settings row
                    // lags the clock its history events record (`tx::clock_now`).
                    if *table == "settings" && row.get("key") == Some(&json!("causal_clock")) {
                        let clock = super::tx::clock_now(&self.conn)?;
                        row.insert("value".into(), json!(clock.to_string()));
                    }
                    dump.row(table, &row)?;
                }
            }
            dump.finish()
        })();
        self.conn.execute_batch("COMMIT")?;
        result
    }

    /// Loads an export into this (empty) database in one transaction; refuses a non-empty
    /// database, a dump from another schema version, or a dump that fails `check`.
    pub fn import(&mut self, input: &mut dyn BufRead) -> Result<ImportReport> {
        // One transaction: whatever stops it, nothing was imported, and every refusal says so.
        self.import_all_or_nothing(input)
            .map_err(crate::store::dump::nothing_imported)
    }

    fn import_all_or_nothing(&mut self, input: &mut dyn BufRead) -> Result<ImportReport> {
        crate::store::dump::refuse_unless_new(
            &mut super::check::Sqlite(&self.conn),
            &self.path.display().to_string(),
            "e.g. --db fresh.db",
        )?;
        let (report, _) = self.in_purge_tx(
            |tx, ctx, _| {
                let now = &ctx.now;
                // The clock of a new database may have moved (`seq` hands out numbers and
                // writes nothing else): the import never takes it back, as on PostgreSQL, where
                // the dump's clock is observed by the sequence (found by review: `seq` handed
                // out 1 again after an import of a dump whose clock was 0).
                let clock_before = super::tx::clock_now(tx)?;
                tx.execute_batch(
                    "DELETE FROM settings; DELETE FROM predicate_aliases; DELETE FROM metrics;",
                )?;
                let mut cols_cache: std::collections::HashMap<String, Vec<(String, bool)>> =
                    Default::default();
                let mut dump = DumpReader::default();
                for (i, line) in input.lines().enumerate() {
                    let line_no = i + 1;
                    let line = crate::store::dump::dump_line(line_no, line)?;
                    let Some((table, obj)) = dump.row(line_no, &line)? else {
                        continue;
                    };
                    if !cols_cache.contains_key(table) {
                        cols_cache.insert(table.to_string(), typed_columns(tx, table)?);
                    }
                    let cols = &cols_cache[table];
                    let mut names = Vec::new();
                    let mut values: Vec<rusqlite::types::Value> = Vec::new();
                    for (k, v) in &obj {
                        let Some(&(_, whole)) = cols.iter().find(|(name, _)| name == k) else {
                            bail!("line {line_no}: table {table} has no column {}: pass a file written by `memscope export` — nothing was imported", crate::model::to_json(k).unwrap_or_default());
                        };
                        // SQLite's column affinity would turn "1" into 1 and keep 1.5 as it
                        // is; PostgreSQL's import refuses both, and so does this one.
                        if whole && !(v.is_null() || v.is_i64()) {
                            bail!("line {line_no}: {table}.{k} holds {v}, not a whole number: pass a file written by `memscope export` — nothing was imported");
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
                        .map_err(|e| inserting(&e, line_no, table))?;
                    dump.loaded(line_no, table, &obj, || tx.last_insert_rowid());
                }
                // A dump from before schema v4 may hold two spellings of one place: they become one,
                // as the migration does it (it rewrites history rows). A later dump holding two
                // was written around the write path, and is refused as PostgreSQL's import
                // refuses it (found by an exploratory test: it was merged here in silence, a
                // pending item and `merged` events made up at import time).
                super::spellings::scope_spellings_change();
                tx.execute("DELETE FROM spellings", [])?;
                let merged = super::spellings::merge_spellings(tx, now)?;
                // The read log's rows are brought to the registered spelling in silence: an
                // earlier release logged a read in the reader's case until a write registered
                // another.
                // Counted as places, not as the merge's steps (it said "2 places" of one place
                // whose two spellings held two values).
                let spelled_twice = merged.merged_places;
                if dump.version() >= 4 && spelled_twice > 0 {
                    bail!(
                        "the import would break invariant 6 (normalization): the dump (schema v{}) stores {spelled_twice} place(s) in more than one spelling, which memscope has not written since schema v4 — nothing was imported; if the file is an export of a memscope database, run `memscope init` on that database (it merges them), then export it again",
                        dump.version()
                    );
                }
                // The higher of the two clocks; a dump's clock memscope cannot read is left for
                // the field rules to name.
                if super::tx::clock_now(tx)? < clock_before {
                    tx.execute(
                        "INSERT INTO settings (key, value) VALUES ('causal_clock', ?1)
                         ON CONFLICT (key) DO UPDATE SET value = excluded.value
                         WHERE CAST(CAST(value AS INTEGER) AS TEXT) = value",
                        [clock_before.to_string()],
                    )?;
                }
                // What an earlier release's delete or gc kept, blanked as this release's would
                // — in a dump that is whole.
                dump.refuse_incomplete()?;
                let blanked = super::delete::blank_kept_content(tx)?;
                // Every row as the write path could have written it, naming the first line that breaks
                // a rule; then every invariant.
                dump.finish(&mut super::check::Sqlite(tx)).map(|mut report| {
                    report.blanked = blanked;
                    report
                })
                // A second spelling of a deleted identity was blanked by the merge, which records
                // that debt itself; content an earlier release kept, blanked here, is this one's:
                // the WAL is truncated after it (the pages before the blanking may be in it).
            },
            |report| report.blanked > 0,
        )?;
        Ok(report)
    }
}

/// A row SQLite refused (a constraint, a guard), naming the line — the words PostgreSQL's
/// import uses.
fn inserting(e: &rusqlite::Error, line_no: usize, table: &str) -> anyhow::Error {
    let why = match e {
        rusqlite::Error::SqliteFailure(_, Some(message)) => message.clone(),
        other => other.to_string(),
    };
    let why = why.strip_prefix("memscope: ").unwrap_or(&why);
    anyhow::anyhow!(
        "line {line_no}: cannot insert the {table} row ({}) — nothing was imported",
        crate::model::escape_controls(why)
    )
}
