//! The dump `export` writes and `import` reads, on every backend (README, "export / import"):
//! JSON Lines, a header, then one table row per line in [`TABLES`]' order, columns by name,
//! times as RFC 3339 text with milliseconds, JSON as the text it was written as. A dump moves
//! a database between SQLite and PostgreSQL; an import is refused when its rows break a field
//! rule or an invariant, naming the line to fix.

use super::check::{check_report, collect, CheckDb};
use super::fields::field_problems;
use anyhow::{anyhow, bail, Result};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The version of the dump's columns: SQLite's schema version (PostgreSQL's schema has the
/// same tables and columns).
pub(crate) const DUMP_VERSION: i64 = super::schema::SCHEMA_VERSION;

/// The oldest export `import` reads: v3 changed constraints and an index, not columns, so a v2
/// export's rows fit as they are.
pub(crate) const OLDEST_IMPORTABLE: i64 = 2;

/// The first schema with one spelling per place (SQLite schema 4): an older dump may spell one
/// place several ways, which SQLite's import merges (rewriting history rows, as its migration
/// does) and PostgreSQL's refuses (when it does), pointing through a file.
pub(crate) const ONE_SPELLING: i64 = 4;

/// Tables in dependency order; `metrics` last.
pub(crate) const TABLES: &[&str] = &[
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

/// Refuses to import into `db` unless it is as `init` leaves a database: no rows, and the
/// settings and aliases a new database starts with — an import replaces both with the dump's
/// (found by review: importing into a database whose retention and aliases the user had set
/// dropped both without a word). `place` names the database; `fresh` says how to make one.
pub(crate) fn refuse_unless_new(db: &mut dyn CheckDb, place: &str, fresh: &str) -> Result<()> {
    // What it holds, said as it is (found by review: a database holding one logged read was
    // said to hold memories).
    let counts = collect(
        db,
        "SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM history),
                (SELECT count(*) FROM tombstones), (SELECT count(*) FROM pending),
                (SELECT count(*) FROM reads)",
        &[],
        1,
        &|r| (0..5).map(|i| r.int(i).unwrap_or(0)).collect::<Vec<i64>>(),
    )?
    .into_iter()
    .next()
    .unwrap_or_default();
    let held: Vec<String> = counts
        .iter()
        .zip([
            ("current memory", "current memories"),
            ("history event", "history events"),
            ("tombstone", "tombstones"),
            ("pending item", "pending items"),
            ("logged read", "logged reads"),
        ])
        .filter(|(n, _)| **n > 0)
        .map(|(&n, (one, many))| {
            format!(
                "{} {}",
                crate::model::thousands(n),
                if n == 1 { one } else { many }
            )
        })
        .collect();
    if let Some((last, rest)) = held.split_last() {
        let holds = match rest {
            [] => last.clone(),
            _ => format!("{} and {last}", rest.join(", ")),
        };
        bail!("{place} already holds {holds}: import only into a new, empty database ({fresh})");
    }
    let show = |v: &str| crate::model::to_json(&crate::model::shorten(v, 40)).unwrap_or_default();
    let mut own = Vec::new();
    let settings = collect(
        db,
        "SELECT key, value FROM settings ORDER BY key",
        &[],
        usize::MAX,
        &|r| (r.show(0), r.show(1)),
    )?;
    for (key, value) in &settings {
        // The clock is the dump's to set; every other row is a default or the user's choice.
        let default = super::DEFAULT_SETTINGS
            .iter()
            .any(|(k, v)| k == key && v == value);
        if key != "causal_clock" && !default {
            own.push(format!("the setting {} = {}", show(key), show(value)));
        }
    }
    let aliases: std::collections::BTreeSet<(String, String)> = collect(
        db,
        "SELECT alias, canonical FROM predicate_aliases",
        &[],
        usize::MAX,
        &|r| (r.show(0), r.show(1)),
    )?
    .into_iter()
    .collect();
    let defaults: std::collections::BTreeSet<(String, String)> =
        super::default_aliases()?.into_iter().collect();
    for (alias, canonical) in aliases.difference(&defaults) {
        own.push(format!("the alias {} → {}", show(alias), show(canonical)));
    }
    for (alias, canonical) in defaults.difference(&aliases) {
        own.push(format!(
            "no default alias {} → {}",
            show(alias),
            show(canonical)
        ));
    }
    if own.is_empty() {
        return Ok(());
    }
    let more = match own.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    own.truncate(3);
    bail!(
        "{place} is not new (it has {}{more}): an import replaces a database's settings and aliases with the export's, so import into a new database ({fresh}) and set them there again",
        own.join("; ")
    )
}

/// The columns of `table` that hold JSON text (the schema's `json_valid` checks).
fn json_columns(table: &str) -> &'static [&'static str] {
    match table {
        "memories" => &["value"],
        "history" => &["value", "detail"],
        "pending" => &["value", "candidates"],
        "reads" => &["shadowed"],
        _ => &[],
    }
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ImportReport {
    pub rows: std::collections::BTreeMap<String, u64>,
    /// Whether the dump counted its rows in an end line (every export since 2026-12-03), so
    /// the import knows it had them all; an older export's import cannot tell.
    pub counted: bool,
    /// History events an earlier release's delete or gc kept content in — a source of a write
    /// refused before a tombstone was collected, what a rescope left of a deleted memory —
    /// blanked as this release's delete and gc blank them (README, "export / import").
    pub blanked: i64,
}

/// What every refusal of an import says: the import is one transaction.
pub(crate) const NOTHING_IMPORTED: &str = "nothing was imported";

/// An import's refusal as the user reads it, saying that nothing was imported — added here to a
/// sentence that does not say so already (found by review: the refusal of a number past
/// 2^63 − 1 did not), so every refusal says it, those of the database (a row it refused, a
/// connection lost before the commit) included.
pub(crate) fn nothing_imported(e: anyhow::Error) -> anyhow::Error {
    let said = super::error_text(&e);
    if said.contains(NOTHING_IMPORTED) {
        return e;
    }
    anyhow!("{said} — {NOTHING_IMPORTED}")
}

/// Line `line_no` of a dump as read, or the sentence saying why it cannot be.
pub(crate) fn dump_line(line_no: usize, read: std::io::Result<String>) -> Result<String> {
    // An editor's byte order mark before the header is not part of the dump.
    let read = read.map(|line| match line.strip_prefix('\u{FEFF}') {
        Some(rest) if line_no == 1 => rest.to_string(),
        _ => line,
    });
    read.map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => anyhow!(
            "line {line_no} of the import is not UTF-8 text (a dump cut mid-character, or a file memscope did not write): pass a file written by `memscope export`"
        ),
        _ => anyhow!("cannot read line {line_no} of the import ({e}): pass a file written by `memscope export`"),
    })
}

/// The dump's last line's `table`: it counts the rows of every table, so `import` tells a whole
/// dump from one cut short at a line's end (found by review: a dump cut in its pending or
/// read-log rows imported as "check is clean", without them, and one cut in its aliases as an
/// empty database).
const END: &str = "memscope_export_end";

/// Writes a dump: its header, its rows, and the end line counting them.
pub(crate) struct DumpWriter<'a> {
    out: &'a mut dyn std::io::Write,
    rows: std::collections::BTreeMap<&'static str, u64>,
}

impl<'a> DumpWriter<'a> {
    /// Writes the header: the schema version, when, and that an end line follows.
    pub(crate) fn start(out: &'a mut dyn std::io::Write, exported_at: &str) -> Result<Self> {
        let header = json!({
            "table": "memscope_export",
            "schema_version": DUMP_VERSION,
            "exported_at": exported_at,
            "end_line": true,
        });
        writeln!(out, "{}", crate::model::to_json(&header)?)?;
        let rows = TABLES.iter().map(|t| (*t, 0)).collect();
        Ok(DumpWriter { out, rows })
    }

    /// Writes `row` (its `table` key included) of `table`.
    pub(crate) fn row(&mut self, table: &'static str, row: &Map<String, Value>) -> Result<()> {
        writeln!(self.out, "{}", crate::model::to_json(row)?)?;
        *self.rows.entry(table).or_default() += 1;
        Ok(())
    }

    /// Writes the end line; returns how many rows the dump holds.
    pub(crate) fn finish(self) -> Result<u64> {
        let end = json!({ "table": END, "rows": self.rows });
        writeln!(self.out, "{}", crate::model::to_json(&end)?)?;
        Ok(self.rows.values().sum())
    }
}

/// Refuses line `line_no`'s row of `table` when it names a subject, predicate or scope id past
/// the limit, which PostgreSQL cannot index: its import asks of every row before inserting it.
/// SQLite's import takes such a row, as a database written before the limit holds it (README,
/// "export / import").
pub(crate) fn refuse_past_id_limit(
    line_no: usize,
    table: &str,
    obj: &Map<String, Value>,
) -> Result<()> {
    for (column, v) in obj {
        let Some(text) = v.as_str() else {
            continue;
        };
        if let Some(said) = super::fields::stored_id_past_limit(table, column, text) {
            bail!(
                "line {line_no} of the import: {said}, and PostgreSQL cannot index a longer one: import the dump into a SQLite file (`memscope --db moved.db import FILE`), write that memory again there under a shorter name and delete the old one (`check` counts them), then export it again — nothing was imported"
            );
        }
    }
    Ok(())
}

/// Reads a dump line by line: the header first, then rows of known tables. Remembers which
/// line each row came from, so a rule broken after loading names the line to fix.
#[derive(Default)]
pub(crate) struct DumpReader {
    seen_header: bool,
    /// The schema version its header names.
    version: i64,
    /// The header promises an end line (`DumpWriter`).
    end_promised: bool,
    /// When the export was taken, as its header says (a hand-made header may leave it out).
    exported_at: Option<Deadline>,
    /// The end line's number and its row counts, once read.
    end: Option<(usize, std::collections::BTreeMap<String, u64>)>,
    /// The last line read.
    last_line: usize,
    /// (table, key columns as text) → line number.
    row_lines: HashMap<(String, Vec<String>), usize>,
    /// The highest causal clock the dump states — its `causal_clock` setting, or a history
    /// event's `clock` — with its line and what it is.
    clock: Option<(usize, &'static str, i64)>,
    /// The highest causal number a write left in the dump's rows.
    numbers: i64,
    pub report: ImportReport,
}

impl DumpReader {
    /// Line `line_no`'s row: `None` for a blank line or the header; an error for anything a
    /// dump cannot hold.
    pub(crate) fn row(
        &mut self,
        line_no: usize,
        line: &str,
    ) -> Result<Option<(&'static str, Map<String, Value>)>> {
        self.last_line = line_no;
        if line.trim().is_empty() {
            return Ok(None);
        }
        if let Some((end, _)) = self.end {
            bail!("line {line_no} follows the export's end line (line {end}): pass a file written by `memscope export`, one export a file — nothing was imported");
        }
        // Keys read once, as every write path reads them (found by an exploratory test: a
        // line naming `agent` twice imported its last).
        let parsed = crate::strict_json::from_str(line).and_then(|v| match v {
            Value::Object(obj) => Ok(obj),
            other => serde_json::from_value::<Map<String, Value>>(other),
        });
        let mut obj: Map<String, Value> = parsed.map_err(|e| {
            if e.is_eof() {
                return anyhow!("line {line_no} of the import ends in the middle of a row: the file was cut short (a copy, a download or an `export > FILE` that stopped early) — nothing was imported; export the database again");
            }
            let (msg, column) = crate::model::json_error(&e, line);
            let at = column.map(|c| format!(", column {c},")).unwrap_or_default();
            if crate::strict_json::is_duplicate_key(&e) {
                return anyhow!("line {line_no}{at} of the import is a row in which {msg}, which memscope never writes — nothing was imported; pass a file written by `memscope export`");
            }
            anyhow!("line {line_no}{at} of the import is not a JSON object ({msg}): pass a file written by `memscope export`")
        })?;
        // The JSON columns are JSON text inside the line, read once each: their keys once, as
        // the write path reads a value's (`{"a":1,"a":2}` is refused, not read as its last),
        // and their numbers as they are. Text that does not read is the field rules' to name.
        let mut json_texts = Vec::new();
        for column in ["value", "detail", "shadowed", "candidates"] {
            let Some(text) = obj.get(column).and_then(Value::as_str) else {
                continue;
            };
            match crate::strict_json::from_str(text) {
                Ok(v) if crate::model::has_float(&v) => json_texts.push(text),
                Err(e) if crate::strict_json::is_duplicate_key(&e) => bail!(
                    "line {line_no} of the import: {column} holds JSON in which {e}: memscope never stores one (a write refuses it) — nothing was imported; pass a file written by `memscope export`"
                ),
                _ => {}
            }
        }
        let line_floats = obj.values().any(crate::model::has_float).then_some(line);
        for text in line_floats.into_iter().chain(json_texts) {
            if let Some((_, literal)) = crate::model::inexact_number(text.as_bytes()) {
                bail!(
                    "line {line_no} of the import: {}",
                    crate::model::inexact_number_sentence(literal)
                );
            }
        }
        // A column's whole number past 64 signed bits fits no column (SQLite would keep it as
        // a float; PostgreSQL's bigint refuses it).
        if let Some((column, n)) = obj.iter().find(|(_, v)| v.is_u64() && !v.is_i64()) {
            bail!(
                "line {line_no} of the import: {column} is {n}, past the largest whole number a column holds (2^63 - 1): pass a file written by `memscope export`"
            );
        }
        let table = obj.remove("table");
        let table = table.as_ref().and_then(|t| t.as_str()).unwrap_or("");
        if table == "memscope_export" {
            let v = match obj.get("schema_version") {
                Some(v) if v.is_i64() => v.as_i64().unwrap_or(0),
                Some(other) => bail!("line {line_no}: the export header's schema_version holds {other}, not a whole number: pass a file written by `memscope export` — nothing was imported"),
                None => 0,
            };
            if !(OLDEST_IMPORTABLE..=DUMP_VERSION).contains(&v) {
                bail!("the export is from schema version {v}, this memscope reads exports of versions {OLDEST_IMPORTABLE} to {DUMP_VERSION}: import it with a matching memscope");
            }
            self.seen_header = true;
            self.version = v;
            self.end_promised = obj.get("end_line") == Some(&Value::Bool(true));
            self.exported_at = obj
                .get("exported_at")
                .and_then(Value::as_str)
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| Deadline::new(t.with_timezone(&chrono::Utc)));
            return Ok(None);
        }
        if !self.seen_header {
            bail!("line {line_no}: the import does not start with a memscope export header: pass a file written by `memscope export`");
        }
        if table == END {
            self.end = Some((line_no, end_counts(line_no, &obj)?));
            return Ok(None);
        }
        let Some(table) = TABLES.iter().copied().find(|t| *t == table) else {
            bail!("line {line_no} names an unknown table '{table}': pass a file written by `memscope export`");
        };
        refuse_after_export(line_no, table, &obj, self.exported_at.as_ref())?;
        // A value is kept as the JSON text it was written as: a hand edit that writes `"tea"`
        // where the dump had `"\"tea\""` is named here, with the spelling it wants, rather
        // than as an unreadable value after loading.
        for column in json_columns(table) {
            if let Some(Value::String(text)) = obj.get(*column) {
                if serde_json::from_str::<Value>(text).is_err() {
                    // The text as the line holds it, and as it must be spelled there.
                    let held = crate::model::to_json(text).unwrap_or_default();
                    let wanted = crate::model::to_json(&held).unwrap_or_default();
                    bail!(
                        "line {line_no}: {table}.{column} holds {held}, which is not JSON text — a dump keeps each value as the JSON it was written as ({wanted} for the text {held}): pass a file written by `memscope export` — nothing was imported",
                    );
                }
            }
        }
        // PostgreSQL's text cannot hold a NUL, and memscope never writes one (found by review:
        // SQLite's import took one in a read's note, so its export could not move to
        // PostgreSQL, whose import said only "invalid byte sequence"): refused on both
        // backends, before the row is inserted, naming its column.
        let nul = obj
            .iter()
            .find(|(_, v)| v.as_str().is_some_and(|t| t.contains('\0')))
            .map(|(column, _)| format!("{table}.{column}"))
            .or_else(|| {
                obj.get("detail")
                    .and_then(Value::as_str)
                    .filter(|d| table == "history" && super::fields::reason_holds_nul(d))
                    .map(|_| "the reason in history.detail".to_string())
            });
        if let Some(column) = nul {
            bail!(
                "line {line_no} of the import: {column} holds a NUL character (\\u0000), which memscope never writes and PostgreSQL cannot store: take it out of that line and import again — nothing was imported"
            );
        }
        Ok(Some((table, obj)))
    }

    /// The schema version the dump's header names (0 before the header).
    pub(crate) fn version(&self) -> i64 {
        self.version
    }

    /// Row `obj` of `table` from line `line_no` was loaded; `inserted_id` is the id the
    /// database gave it when the dump had none.
    pub(crate) fn loaded(
        &mut self,
        line_no: usize,
        table: &str,
        obj: &Map<String, Value>,
        inserted_id: impl FnOnce() -> i64,
    ) {
        let key_cols = super::fields::key_columns(table);
        let key = if key_cols == ["id"] && !obj.contains_key("id") {
            vec![inserted_id().to_string()]
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
        self.row_lines.insert((table.to_string(), key), line_no);
        *self.report.rows.entry(table.to_string()).or_default() += 1;
        // A number as a column holds it, or as the clock's setting spells it; one that is
        // neither is the field rules' to name.
        let number = |column: &str| match obj.get(column) {
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) if table == "settings" => s.parse().ok(),
            _ => None,
        };
        let stated = match table {
            "settings" if obj.get("key") == Some(&json!("causal_clock")) => {
                number("value").map(|n| ("the causal_clock setting", n))
            }
            "history" => number("clock").map(|n| ("history.clock", n)),
            _ => None,
        };
        if let Some((what, n)) = stated {
            if self.clock.is_none_or(|(_, _, c)| n > c) {
                self.clock = Some((line_no, what, n));
            }
        }
        let columns: &[&str] = match table {
            "memories" => &["causal_seq", "confirmed_seq"],
            "history" | "pending" => &["causal_seq"],
            _ => &[],
        };
        for column in columns {
            self.numbers = self.numbers.max(number(column).unwrap_or(0));
        }
    }

    /// Refuses a clock the dump states past what its rows and `memscope seq` could have brought
    /// it to. The clock may stand above every number the rows hold — `seq` hands out numbers
    /// and stores none, a delete destroys the rows that held some — but a writer brings none
    /// past [`crate::model::MAX_BROUGHT_SEQ`], whose last 2^32 numbers the clock keeps for
    /// writes without one: a clock there with no row as high was written by hand, and would
    /// leave later writes few numbers or none (found by review: a dump whose clock was edited
    /// to 2^53 imported, and every write after it was refused).
    fn refuse_clock_past_rows(&self) -> Result<()> {
        let Some((line_no, what, clock)) = self.clock else {
            return Ok(());
        };
        let room = crate::model::MAX_BROUGHT_SEQ.max(self.numbers);
        if clock <= room {
            return Ok(());
        }
        bail!(
            "line {line_no} of the import: {what} is {clock}, past {}, the highest number a writer may bring, while no causal number in the dump's rows is above {}: no export holds such a clock, which would leave writes without a number of their own few or none to take — set it to {room} or lower with a text editor and import again — nothing was imported",
            crate::model::MAX_BROUGHT_SEQ_WORDS,
            self.numbers
        )
    }

    /// After the last line, before the import does anything with the rows it loaded: the dump
    /// had a header and was not cut short. A dump cut short breaks invariants too, and would be
    /// blamed for them — or for what the import's blanking needs ([`DumpReader::finish`] asks
    /// again).
    pub(crate) fn refuse_incomplete(&self) -> Result<()> {
        if !self.seen_header {
            bail!("the import is empty: pass a file written by `memscope export`");
        }
        if self.end_promised && self.end.is_none() {
            bail!(
                "the import ends at line {} without the export's end line: the file was cut short (a copy, a download or an `export > FILE` that stopped early) — nothing was imported; export the database again",
                self.last_line
            );
        }
        Ok(())
    }

    /// After the last line: the dump had a header, and the rows loaded into `db` break no
    /// field rule (naming the first one's line) and no invariant.
    pub(crate) fn finish(self, db: &mut dyn CheckDb) -> Result<ImportReport> {
        self.refuse_incomplete()?;
        if let Some(p) = field_problems(db, 1)?.into_iter().next() {
            let at = self
                .row_lines
                .get(&(p.table.to_string(), p.key.clone()))
                .map(|n| format!("line {n}"))
                .unwrap_or_else(|| format!("a row of {}", p.table));
            bail!(
                "{at} of the import breaks invariant {}: {} — nothing was imported",
                p.invariant,
                crate::model::escape_controls(&p.detail)
            );
        }
        self.refuse_clock_past_rows()?;
        let checked = check_report(db, None)?;
        if let Some(v) = checked.violations.first() {
            // A database an earlier release left so (a source its delete or gc kept, say) is
            // repaired where it is, by this release, and exported again.
            bail!(
                "the import would break invariant {} ({}): {} — nothing was imported; if the file is an export of a memscope database, run `memscope check` on that database, do what it says there, and export it again",
                v.invariant,
                v.name,
                v.detail
            );
        }
        // Rows taken out or put in by hand, last: a row that breaks a rule is named above by
        // its line.
        if let Some((end, counted)) = &self.end {
            for table in TABLES {
                let said = counted.get(*table).copied().unwrap_or(0);
                let held = self.report.rows.get(*table).copied().unwrap_or(0);
                if said != held {
                    bail!(
                        "the export's end line (line {end}) counts {said} {table} row(s), the file holds {held}: rows are missing or were added — nothing was imported; export the database again"
                    );
                }
            }
        }
        let mut report = self.report;
        report.counted = self.end.is_some();
        Ok(report)
    }
}

/// The columns that date a row of `table`: when a history event or a read was logged, a
/// tombstone laid, a pending item queued or resolved. No row an export holds is dated after the
/// export was taken (it takes its time once its snapshot has started), so `import` refuses one,
/// and `check` names one dated after now, whose export would not import until then.
pub(crate) fn dated_columns(table: &str) -> &'static [&'static str] {
    match table {
        "history" | "reads" => &["at"],
        "tombstones" => &["deleted_at"],
        "pending" => &["created_at", "resolved_at"],
        _ => &[],
    }
}

/// A moment no row of a database may be dated after ([`dated_columns`]): when its export was
/// taken, for `import`; now, for `check` (README, "export / import").
#[derive(Debug, Clone)]
pub(crate) struct Deadline {
    at: chrono::DateTime<chrono::Utc>,
    /// `at` as memscope stores a time (RFC 3339, UTC, milliseconds cut), which sorts as text.
    text: String,
}

impl Deadline {
    pub(crate) fn new(at: chrono::DateTime<chrono::Utc>) -> Deadline {
        let text = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        Deadline { at, text }
    }

    /// The moment as memscope stores a time.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Whether `stored`, a dated column's time as stored, is after the deadline. A stored time
    /// has milliseconds, so it is after the moment exactly when it is after the moment's
    /// milliseconds: one in memscope's spelling compares as text, the rest are parsed. A time
    /// that does not parse is the field rules' to name.
    pub(crate) fn passed_by(&self, stored: &str) -> bool {
        if super::fields::is_canonical_time(stored) {
            return stored > self.text.as_str();
        }
        chrono::DateTime::parse_from_rfc3339(stored).is_ok_and(|t| t > self.at)
    }
}

/// Refuses line `line_no`'s row of `table` when it is dated after the export was taken: a later
/// one was written by hand, or by a writer whose clock ran ahead (README, "export / import").
fn refuse_after_export(
    line_no: usize,
    table: &str,
    obj: &Map<String, Value>,
    exported_at: Option<&Deadline>,
) -> Result<()> {
    let Some(exported_at) = exported_at else {
        return Ok(());
    };
    for column in dated_columns(table) {
        let Some(at) = obj.get(*column).and_then(Value::as_str) else {
            continue;
        };
        if exported_at.passed_by(at) {
            bail!(
                "line {line_no} of the import: {table}.{column} is {}, after the export was taken ({}): a row cannot be written after its export — fix its time with a text editor, or export the database again once its writers' clocks are right — nothing was imported",
                crate::model::to_json(at).unwrap_or_default(),
                exported_at.text()
            );
        }
    }
    Ok(())
}

/// The row counts of the end line on line `line_no`: a whole number for each known table.
fn end_counts(
    line_no: usize,
    obj: &Map<String, Value>,
) -> Result<std::collections::BTreeMap<String, u64>> {
    let bad = || {
        anyhow!("line {line_no}: the export's end line does not count its rows as memscope writes them: pass a file written by `memscope export` — nothing was imported")
    };
    let Some(Value::Object(rows)) = obj.get("rows") else {
        return Err(bad());
    };
    rows.iter()
        .map(
            |(table, n)| match (TABLES.contains(&table.as_str()), n.as_u64()) {
                (true, Some(n)) => Ok((table.clone(), n)),
                _ => Err(bad()),
            },
        )
        .collect()
}
