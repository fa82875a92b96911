//! `export` / `import` on PostgreSQL: the dump of `store::dump` (the same lines SQLite writes and
//! reads), so a database moves between a file and a server either way. Export reads one
//! REPEATABLE READ snapshot; import loads an empty database in one transaction and commits only
//! when every field rule and invariant holds (`DumpReader::finish`, the same judge as SQLite's
//! import and `check`).

use super::check::Pg;
use super::store::PgStore;
use crate::spelling::fold;
use crate::store::dump::{DumpReader, DumpWriter, ImportReport, ONE_SPELLING, TABLES};
use crate::store::fields::key_columns;
use crate::store::user_settings::DURABILITY_KEY;
use anyhow::{anyhow, bail, Result};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{IsolationLevel, Statement, Transaction};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::io::{BufRead, Write};

/// A time as the dump writes it: RFC 3339, UTC, milliseconds (as SQLite stores them).
const TIME_TEXT: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"#;

/// The kinds of column a dump's values go into.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Integer,
    Time,
}

/// `table`'s columns in their order, with their kinds (memscope's schema only: the first one
/// on the search path).
fn columns(tx: &mut Transaction<'_>, table: &str) -> Result<Vec<(String, Kind)>> {
    let rows = tx.query(
        "SELECT column_name::text, data_type::text FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
        &[&table],
    )?;
    Ok(rows
        .iter()
        .map(|r| {
            let kind = match r.get::<_, &str>(1) {
                "bigint" | "integer" | "smallint" => Kind::Integer,
                "timestamp with time zone" => Kind::Time,
                _ => Kind::Text,
            };
            (r.get(0), kind)
        })
        .collect())
}

impl PgStore {
    /// The whole database as a dump, from one snapshot; returns the rows written. A refusal of
    /// the server (a login that may not read the clock) is one sentence.
    pub fn export(&mut self, out: &mut dyn Write) -> Result<u64> {
        let rows = self.export_snapshot(out);
        self.explained(rows)
    }

    fn export_snapshot(&mut self, out: &mut dyn Write) -> Result<u64> {
        let client = self.connection()?;
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        let now: String = tx
            .query_one(
                // Rounded to the millisecond as a row's time is stored (`timestamptz(3)`), not
                // cut: a row written in the same millisecond, stored rounded up, would otherwise
                // be dated after its export (found by review).
                &format!(
                    "SELECT to_char(memscope_now()::timestamptz(3) AT TIME ZONE 'UTC', {TIME_TEXT})"
                ),
                &[],
            )?
            .get(0);
        let mut dump = DumpWriter::start(out, &now)?;
        for table in TABLES {
            if *table == "settings" {
                // The clock is a sequence here, a setting in a file.
                let clock = crate::model::clock_as_it_stands(
                    tx.query_one("SELECT memscope_clock_current()", &[])?.get(0),
                );
                let row = Map::from_iter([
                    ("table".to_string(), json!("settings")),
                    ("key".to_string(), json!("causal_clock")),
                    ("value".to_string(), json!(clock.to_string())),
                ]);
                dump.row(table, &row)?;
            }
            let cols = columns(&mut tx, table)?;
            let select = cols
                .iter()
                .map(|(c, kind)| match kind {
                    Kind::Time => format!("to_char({c} AT TIME ZONE 'UTC', {TIME_TEXT})"),
                    _ => c.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ");
            let order = key_columns(table).join(", ");
            // The clock was written above, from the sequence: a `causal_clock` row a database
            // was seeded with is stale, and a second one would not import.
            let only = match *table {
                "settings" => "WHERE key <> 'causal_clock'",
                _ => "",
            };
            let sql = format!("SELECT {select} FROM {table} {only} ORDER BY {order}");
            let mut rows = tx.query_raw(&sql, std::iter::empty::<&str>())?;
            while let Some(r) = rows.next()? {
                let mut row = Map::new();
                row.insert("table".into(), json!(table));
                for (i, (c, kind)) in cols.iter().enumerate() {
                    let v = match kind {
                        Kind::Integer => json!(r.get::<_, Option<i64>>(i)),
                        Kind::Text | Kind::Time => json!(r.get::<_, Option<&str>>(i)),
                    };
                    row.insert(c.clone(), v);
                }
                dump.row(table, &row)?;
            }
        }
        drop(tx);
        dump.finish()
    }

    /// Loads a dump into this (empty) database in one transaction; refuses a database that
    /// holds memories, a dump of another version, or one that breaks a rule or an invariant.
    pub fn import(&mut self, input: &mut dyn BufRead) -> Result<ImportReport> {
        let mut moved = None;
        let address = self.address().clone();
        let mut owed = None;
        let result = match self.import_moving(input, &mut moved, &mut owed) {
            // Every refusal before the commit says that nothing was imported.
            Err(e) => Err(crate::store::dump::nothing_imported(refused_import(
                e, &address,
            ))),
            // A commit whose answer was lost is no refusal: it is said as it is.
            Ok((tx, report)) => tx
                .commit()
                .map(|()| report)
                .map_err(|e| refused_import(e.into(), &address)),
        };
        // Content an earlier release kept, blanked by the import: its dead row versions go as
        // after a delete (a role that may not VACUUM leaves them to autovacuum).
        if let (Ok(_), Some(owed)) = (&result, &owed) {
            if let Ok(client) = self.connection() {
                super::vacuum::after_purge_paying(client, &["history"], owed);
            }
        }
        // A sequence moves outside transactions: a refused import, rolled back by now, puts
        // the clock back where it found it — unless another session moved it since.
        if let (Err(_), Some((before, target))) = (&result, moved) {
            if let Ok(client) = self.connection() {
                let _ = client.execute(
                    "SELECT setval('memscope_clock', greatest($1::bigint, 1), $1::bigint > 0)
                     WHERE memscope_clock_current() = $2::bigint",
                    &[&before, &target],
                );
            }
        }
        result
    }

    /// [`PgStore::import`]'s transaction, loaded and judged, for it to commit; `moved` says where
    /// the clock was and where the import set it, once it has.
    fn import_moving(
        &mut self,
        input: &mut dyn BufRead,
        moved: &mut Option<(i64, i64)>,
        owed: &mut Option<super::vacuum::Owed>,
    ) -> Result<(Transaction<'_>, ImportReport)> {
        let place = self.address().describe();
        let client = self.connection()?;
        let mut tx = client.transaction()?;
        // Nobody writes while the dump goes in; readers go on.
        tx.batch_execute(
            "LOCK TABLE memories, history, tombstones, pending, reads, settings, predicate_aliases,
                        metrics, spellings IN EXCLUSIVE MODE",
        )?;
        crate::store::dump::refuse_unless_new(
            &mut Pg(&mut tx),
            &place,
            "CREATE DATABASE, then --db with its address",
        )?;
        tx.batch_execute(
            "DELETE FROM settings; DELETE FROM predicate_aliases; DELETE FROM metrics; DELETE FROM spellings;",
        )?;
        let mut dump = DumpReader::default();
        let mut cols: HashMap<&str, HashMap<String, Kind>> = HashMap::new();
        let mut statements: HashMap<String, Statement> = HashMap::new();
        let mut clock = 0i64;
        let mut read_settings: HashMap<String, usize> = HashMap::new();
        for (i, line) in input.lines().enumerate() {
            let line_no = i + 1;
            let line = crate::store::dump::dump_line(line_no, line)?;
            let Some((table, obj)) = dump.row(line_no, &line)? else {
                continue;
            };
            // Two settings are read here rather than inserted: the clock (its sequence is set
            // at the end) and durability (a file's setting: on a server, `synchronous_commit`
            // decides). Each is still one row, as the table's key makes every other setting.
            if let (true, Some(key @ ("causal_clock" | DURABILITY_KEY))) =
                (table == "settings", obj.get("key").and_then(Value::as_str))
            {
                if let Some(first) = read_settings.insert(key.to_string(), line_no) {
                    bail!(
                        "line {line_no}: cannot insert the settings row (a second {key}; the first is on line {first}) — nothing was imported"
                    );
                }
                if key == "causal_clock" {
                    clock = clock.max(seq_setting(&obj, line_no)?);
                }
                dump.loaded(line_no, table, &obj, || 0);
                continue;
            }
            crate::store::dump::refuse_past_id_limit(line_no, table, &obj)?;
            if !cols.contains_key(table) {
                let known = columns(&mut tx, table)?.into_iter().collect();
                cols.insert(table, known);
            }
            let known = &cols[table];
            let mut names = Vec::new();
            let mut values: Vec<Box<dyn ToSql + Sync>> = Vec::new();
            for (k, v) in &obj {
                let Some(kind) = known.get(k) else {
                    bail!("line {line_no}: table {table} has no column {}: pass a file written by `memscope export` — nothing was imported", crate::model::to_json(k).unwrap_or_default());
                };
                names.push(k.as_str());
                values
                    .push(param(*kind, v).map_err(|e| anyhow!("line {line_no}: {table}.{k} {e}: pass a file written by `memscope export` — nothing was imported"))?);
            }
            let returning = key_columns(table) == ["id"] && !obj.contains_key("id");
            let placeholders = (1..=names.len())
                .map(|i| format!("${i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO {table} ({}) VALUES ({placeholders}){}",
                names.join(", "),
                if returning { " RETURNING id" } else { "" }
            );
            let statement = match statements.get(&sql) {
                Some(s) => s.clone(),
                None => {
                    let s = tx.prepare(&sql)?;
                    statements.insert(sql, s.clone());
                    s
                }
            };
            let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|b| b.as_ref()).collect();
            let rows = tx
                .query(&statement, &params)
                .map_err(|e| inserting(e, line_no, table))?;
            let id = rows.first().map_or(0, |r| r.get::<_, i64>(0));
            dump.loaded(line_no, table, &obj, || id);
        }
        // Ids go on after the dump's; the clock from the dump's, or its last event's.
        for table in ["memories", "history", "pending", "reads"] {
            tx.execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'id'),
                                   coalesce((SELECT max(id) FROM {table}), 1),
                                   (SELECT max(id) FROM {table}) IS NOT NULL)"
                ),
                &[],
            )?;
        }
        // A dump without the clock's row has the highest number its rows hold, as SQLite
        // reads such a file (`sqlite::tx::clock_now`).
        let last_event: i64 = tx
            .query_one(
                if read_settings.contains_key("causal_clock") {
                    "SELECT coalesce((SELECT clock FROM history WHERE clock IS NOT NULL ORDER BY id DESC LIMIT 1), 0)"
                } else {
                    "SELECT greatest(coalesce((SELECT max(clock) FROM history), 0),
                                     coalesce((SELECT max(causal_seq) FROM history), 0),
                                     coalesce((SELECT max(greatest(causal_seq, coalesce(confirmed_seq, 0))) FROM memories), 0),
                                     coalesce((SELECT max(causal_seq) FROM pending), 0))"
                },
                &[],
            )?
            .get(0);
        let clock_before: i64 = tx.query_one("SELECT memscope_clock_current()", &[])?.get(0);
        let target = clock.max(last_event);
        // Up to 2^53 (a database an earlier release let a writer bring there): past what
        // `memscope_clock_observe` lets a writer's number move it, so set here, under the
        // clock's lock as that function sets it. The lock is the session's: a failed `setval`
        // is rolled back to the savepoint so that the unlock still runs.
        tx.batch_execute("SAVEPOINT clock; SELECT pg_advisory_lock(7165349316052316227)")?;
        let set = tx.execute(
            "SELECT setval('memscope_clock', $1::bigint, true) WHERE $1::bigint > memscope_clock_current()",
            &[&target],
        );
        if set.is_err() {
            tx.batch_execute("ROLLBACK TO SAVEPOINT clock")?;
        }
        tx.batch_execute(
            "SELECT pg_advisory_unlock(7165349316052316227); RELEASE SAVEPOINT clock",
        )?;
        if set? == 1 {
            *moved = Some((clock_before, target));
        }
        register_spellings(&mut tx)?;
        respell_reads(&mut tx)?;
        dump.refuse_incomplete()?;
        let blanked = blank_kept_content(&mut tx)?;
        if blanked > 0 {
            *owed = Some(super::vacuum::owe(&mut tx)?);
        }
        let version = dump.version();
        let finished = dump.finish(&mut Pg(&mut tx)).map(|mut report| {
            report.blanked = blanked;
            report
        });
        let report = finished.map_err(|e| {
            if version < ONE_SPELLING && format!("{e:#}").contains("spellings") {
                anyhow!(
                    "the export is from schema version {version}, from before one spelling per place, and spells a place several ways, which SQLite's import merges and PostgreSQL's does not: import it into a SQLite file first (`memscope --db moved.db import FILE`), export that, and import the new file here — nothing was imported"
                )
            } else {
                e
            }
        })?;
        Ok((tx, report))
    }
}

/// A refusal of the server during an import in one sentence: a login that may not write every
/// table as the dump holds it (an agent's may not even lock `history`) is told whose may —
/// before, the raw `permission denied for table history`.
fn refused_import(e: anyhow::Error, address: &super::Address) -> anyhow::Error {
    let denied = e
        .downcast_ref::<postgres::Error>()
        .and_then(postgres::Error::as_db_error)
        .filter(|d| *d.code() == postgres::error::SqlState::INSUFFICIENT_PRIVILEGE);
    match denied {
        Some(d) => anyhow!(
            "PostgreSQL at {} refused the login \"{}\" what an import does ({}): an import writes every table's rows as the dump holds them, which only {} or the owner of memscope's tables may do — import with the curator's connection string; nothing was imported",
            address.describe(),
            address.user(),
            d.message(),
            super::schema::CURATOR_ROLE
        ),
        // Anything else as before: the import's own sentences say that nothing was imported,
        // and a lost connection is no unknown commit to write again (found by review).
        None => e,
    }
}

/// What an earlier release's delete or gc kept of deleted content in the rows an import loaded —
/// the sources of writes refused before a tombstone was collected, the copies a rescope left of
/// a tombstoned memory — blanked as this release's delete and gc blank them, as SQLite's import
/// does (`sqlite::delete::blank_kept_content`); how many events. Under the purge gate, which only
/// memscope's curator or the owner of its tables may open.
fn blank_kept_content(tx: &mut Transaction<'_>) -> Result<i64> {
    use crate::store::events::{kept_copies, BLANK_COLLECTED_SOURCES_SQL, KEPT_COPY_EVENTS_SQL};
    let may: bool = tx
        .query_one(
            "SELECT memscope_may_purge($1)",
            &[&super::schema::CURATOR_ROLE],
        )?
        .get(0);
    if may {
        tx.batch_execute(&format!(
            "SET LOCAL {} = 'on'",
            super::schema::PURGE_SETTING
        ))?;
    }
    let mut blank = || -> Result<i64> {
        let mut n = tx.execute(BLANK_COLLECTED_SOURCES_SQL, &[])? as i64;
        // One pass over history for every tombstone, standing or collected.
        let logged = super::store::logged_events(&tx.query(KEPT_COPY_EVENTS_SQL, &[])?);
        let tombstoned: Vec<(String, String, String)> = tx
            .query("SELECT subject, predicate, scope FROM tombstones", &[])?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        for c in kept_copies(&logged, &tombstoned) {
            n += crate::store::events::blank_copy(|sql| {
                Ok(tx.execute(
                    sql,
                    &[&c.subject, &c.predicate, &c.at, &c.version, &c.as_of],
                )? as i64)
            })?
            .events;
        }
        Ok(n)
    };
    blank().map_err(|e| {
        let guard = e.downcast_ref::<postgres::Error>().and_then(postgres::Error::code)
            == Some(&postgres::error::SqlState::INTEGRITY_CONSTRAINT_VIOLATION);
        if may || !guard {
            return e;
        }
        anyhow!(
            "the export holds content an earlier release's delete or gc kept (a source of a refused write, or what a rescope left of a deleted memory), which the import blanks, and only {} or the owner of memscope's tables may blank history: import with the curator's connection string — nothing was imported",
            super::schema::CURATOR_ROLE
        )
    })
}

/// The dump's causal clock setting.
fn seq_setting(obj: &Map<String, Value>, line_no: usize) -> Result<i64> {
    match obj.get("value") {
        Some(Value::String(s)) => s.parse().ok(),
        Some(Value::Number(n)) => n.as_i64(),
        _ => None,
    }
    .filter(|n| (0..=crate::model::MAX_CAUSAL_SEQ).contains(n))
    .ok_or_else(|| anyhow!("line {line_no}: the causal_clock setting is not a causal number (a whole number from 0 to 2^53): pass a file written by `memscope export` — nothing was imported"))
}

/// A dump's value as the parameter its column takes.
fn param(kind: Kind, v: &Value) -> Result<Box<dyn ToSql + Sync>, String> {
    Ok(match (kind, v) {
        (Kind::Integer, Value::Null) => Box::new(None::<i64>),
        (Kind::Integer, Value::Number(n)) if n.is_i64() => Box::new(n.as_i64()),
        (Kind::Integer, other) => return Err(format!("holds {other}, not a whole number")),
        (Kind::Time, Value::Null) => Box::new(None::<chrono::DateTime<chrono::Utc>>),
        (Kind::Time, Value::String(s)) => match chrono::DateTime::parse_from_rfc3339(s) {
            // The column keeps milliseconds: a finer time would be stored as another moment
            // (found by review: `…25.6639Z` imported as `.664`, where SQLite refuses it).
            Ok(t) if t.timestamp_subsec_nanos() % 1_000_000 != 0 => {
                return Err(format!(
                    "holds {s:?}, a time finer than the milliseconds memscope keeps"
                ))
            }
            Ok(t) => Box::new(t.with_timezone(&chrono::Utc)),
            Err(_) => return Err(format!("holds {s:?}, not an RFC 3339 time")),
        },
        (Kind::Time, other) => return Err(format!("holds {other}, not a time")),
        (Kind::Text, Value::Null) => Box::new(None::<String>),
        (Kind::Text, Value::String(s)) => Box::new(s.clone()),
        (Kind::Text, other) => Box::new(other.to_string()),
    })
}

/// A row the server refused, naming the line.
fn inserting(e: postgres::Error, line_no: usize, table: &str) -> anyhow::Error {
    let why = e
        .as_db_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_string());
    anyhow!("line {line_no}: cannot insert the {table} row ({why}) — nothing was imported")
}

/// The read log's names in the registered spellings, as SQLite's import brings them
/// (`sqlite::spellings::merge_spellings`): a name only the read log holds is registered — as a
/// logged read registers it — unless no write could store it (`prepared::registrable`), and a row
/// naming a place in another spelling (an earlier release logged a read in the reader's case
/// until a write registered another) names it as registered.
fn respell_reads(tx: &mut Transaction<'_>) -> Result<()> {
    // In byte order, as SQLite's import takes them: the first spelling of a name only the read
    // log holds is the one registered.
    let places = format!(
        "SELECT place FROM ({}) s ORDER BY place COLLATE \"C\"",
        crate::store::check::READ_LOG_PLACES_SQL
    );
    for (kind, sql) in [
        (
            "subject",
            "SELECT subject FROM (SELECT DISTINCT subject FROM reads) r ORDER BY subject COLLATE \"C\"",
        ),
        ("scope", places.as_str()),
    ] {
        let named: Vec<String> = tx
            .query(sql, &[])?
            .iter()
            .map(|r| r.get::<_, String>(0))
            .filter(|text| crate::store::prepared::registrable(kind, text))
            .collect();
        let registered = tx.prepare(
            "INSERT INTO spellings (kind, folded, spelling) VALUES ($1, $2, $3)
             ON CONFLICT (kind, folded) DO UPDATE SET spelling = spellings.spelling
             RETURNING spelling",
        )?;
        for text in named {
            let spelling: String = tx
                .query_one(&registered, &[&kind, &fold(&text), &text])?
                .get(0);
            if spelling == text {
                continue;
            }
            let updates: &[&str] = match kind {
                "subject" => &["UPDATE reads SET subject = $2 WHERE subject = $1"],
                _ => &[
                    "UPDATE reads SET scope = $2 WHERE scope = $1",
                    "UPDATE reads SET repo = substr($2, 6) WHERE 'repo:' || repo = $1",
                    "UPDATE reads SET task = substr($2, 6) WHERE 'task:' || task = $1",
                ],
            };
            for sql in updates {
                tx.execute(*sql, &[&text, &spelling])?;
            }
        }
    }
    Ok(())
}

/// The spellings registry from the loaded rows: each subject and repository or task scope, in
/// the order history first met it, as the write path would have registered them.
fn register_spellings(tx: &mut Transaction<'_>) -> Result<()> {
    for (kind, sql) in [
        (
            "subject",
            "SELECT subject FROM (
                 SELECT subject, min(id) AS first FROM history GROUP BY subject
                 UNION ALL SELECT subject, NULL FROM memories
                 UNION ALL SELECT subject, NULL FROM tombstones
                 UNION ALL SELECT subject, NULL FROM pending) s
             GROUP BY subject ORDER BY min(first) NULLS LAST, subject",
        ),
        (
            // Every place the write path registers: also those only a pending item names (its
            // candidates, its resolution) — the scope guard and the suspects' blast radius know
            // places from here. The read log's names come after every written one
            // (`respell_reads`).
            "scope",
            "SELECT scope FROM (
                 SELECT scope, min(id) AS first FROM history GROUP BY scope
                 UNION ALL SELECT scope, NULL FROM memories
                 UNION ALL SELECT scope, NULL FROM tombstones
                 UNION ALL SELECT resolved_scope, NULL FROM pending WHERE resolved_scope IS NOT NULL
                 UNION ALL SELECT c.value #>> '{}', NULL FROM pending p,
                     jsonb_array_elements(p.candidates::jsonb) c WHERE jsonb_typeof(c.value) = 'string'
) s
             WHERE scope <> 'global'
             GROUP BY scope ORDER BY min(first) NULLS LAST, scope",
        ),
    ] {
        let found: Vec<String> = tx.query(sql, &[])?.iter().map(|r| r.get(0)).collect();
        let insert = tx.prepare(
            "INSERT INTO spellings (kind, folded, spelling) VALUES ($1, $2, $3)
             ON CONFLICT (kind, folded) DO NOTHING",
        )?;
        for text in found {
            tx.execute(&insert, &[&kind, &fold(&text), &text])?;
        }
    }
    Ok(())
}
