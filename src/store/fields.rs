//! The rules every stored field obeys that the write path guarantees by construction: ids in
//! normal form, times memscope can read, causal numbers within the clock, aliases one step
//! deep, no open pending item the user has deleted every place of, settings memscope can read.
//! `check` proves them on the whole database; `import` runs the same rules on the rows it
//! loads and names the line of the first row that breaks one (README, "check").

use super::check::{collect, CheckDb, CheckRow};
use crate::model::{normalize_predicate, normalize_subject, Scope, MAX_CAUSAL_SEQ};
use anyhow::Result;

/// One broken field: which invariant it breaks, the row (its table and key columns, as
/// [`row_key`] spells them) and what is wrong.
#[derive(Debug, Clone)]
pub(crate) struct FieldProblem {
    pub invariant: u8,
    pub table: &'static str,
    pub key: Vec<String>,
    pub detail: String,
    /// For a field rule's problem: the row as `check` names it (`history row #2 (u · editor @
    /// global)`) and the way out, which its detail leaves to `check` (`import` names the line
    /// instead, and refuses the file). `None` where the detail says both.
    pub named: Option<(String, String)>,
}

impl FieldProblem {
    /// The problem as `check` says it: the row with its table, id and identity, what is wrong,
    /// and a way out (README, "check"; found by an exploratory test: `history.at: time … is not
    /// an RFC 3339 time` named neither).
    pub(crate) fn sentence(&self) -> String {
        match &self.named {
            Some((row, way_out)) if row.is_empty() => format!("{} — {way_out}", self.detail),
            Some((row, way_out)) => format!("{row}: {} — {way_out}", self.detail),
            None => self.detail.clone(),
        }
    }
}

/// A row as `check` names it: its table and key (`#7` for an id), and the identity it holds
/// when its key is not that identity.
fn row_label(table: &str, key: &[String], identity: &[String]) -> String {
    let row = match key {
        [id] if key_columns(table) == ["id"] => format!("{table} row #{id}"),
        [s, p, sc] => format!("{table} row {s} · {p} @ {sc}"),
        other => format!("{table} row {}", other.join(" · ")),
    };
    match identity {
        [s, p, sc] => format!("{row} ({s} · {p} @ {sc})"),
        [s, p] => format!("{row} ({s} · {p})"),
        _ => row,
    }
}

/// The columns naming the identity a row of `table` holds, where its key does not.
fn identity_columns(table: &str) -> &'static [&'static str] {
    match table {
        "memories" | "history" | "reads" => &["subject", "predicate", "scope"],
        "pending" => &["subject", "predicate"],
        _ => &[],
    }
}

/// What a client outside memscope must do to a field that breaks its rule, by what the field
/// holds; `identity` is the row's ([`identity_columns`]).
fn way_out(table: &str, column: &str, identity: &[String]) -> String {
    let fix = match column {
        "subject" | "predicate" | "scope" | "alias" | "canonical" | "resolved_scope" => {
            "set it to its normal form in every row that names it"
        }
        "candidates" => "set them to a JSON list of scopes in canonical form",
        "shadowed" => "set it to the JSON array of the scopes the read shadowed, or to NULL",
        "source" | "confirmed_source" => "set it to the source trimmed, without control characters",
        "causal_seq" | "confirmed_seq" | "clock" => {
            "set it to a number from 0 to 2^53, the one the identity's history holds for it"
        }
        _ => "set it to the time in memscope's spelling, RFC 3339 in UTC with milliseconds (2026-12-05T19:49:24.000Z)",
    };
    let guarded = match table {
        "history" => {
            " (history is append-only: drop its guard triggers first, and `memscope init` makes them again)"
        }
        _ => "",
    };
    // A current record's number: its delete clears the record with no SQL (`restore` lifts the
    // tombstone after), as no write can — every write of it is decided against that number.
    let delete = match (table, column, identity) {
        ("memories", "causal_seq" | "confirmed_seq", [s, p, sc]) => format!(
            ", or delete the memory (`memscope delete --subject {} --predicate {} --scope {}`)",
            crate::model::shell_word(s),
            crate::model::shell_word(p),
            crate::model::shell_word(sc)
        ),
        _ => String::new(),
    };
    format!("a client outside memscope wrote it: with a SQL client, {fix}{guarded}{delete}")
}

/// The key columns of each table, as [`row_key`] reads them from a row.
pub(crate) fn key_columns(table: &str) -> &'static [&'static str] {
    match table {
        "predicate_aliases" => &["alias"],
        "settings" => &["key"],
        "metrics" => &["name"],
        "tombstones" => &["subject", "predicate", "scope"],
        "spellings" => &["kind", "folded"],
        _ => &["id"],
    }
}

/// A field rule: the table, the field's column (or a SQL expression over the row), and
/// what makes it wrong (`None` when the value is fine).
struct Rule {
    invariant: u8,
    table: &'static str,
    column: &'static str,
    /// Rows without a value (NULL) are skipped.
    test: FieldTest,
    /// For a field stored as an integer: whether `test` would pass its digits, answered
    /// without writing them out.
    int_ok: Option<fn(i64) -> bool>,
}

/// What is wrong with a stored text, or `None`.
type FieldTest = fn(&str) -> Option<String>;

/// A `what` field must be stored as its normal form: `normalized` is what the write path
/// makes of `v`; `invalid` says what a value it refuses is not.
fn normal_form_rule(
    what: &str,
    v: &str,
    normalized: Result<String, String>,
    invalid: &str,
) -> Option<String> {
    match normalized {
        Ok(n) if n == v => None,
        Ok(n) => Some(format!(
            "{what} {} is not in normal form ({n:?})",
            quoted(v)
        )),
        Err(e) => Some(format!("{what} {} is not {invalid}: {e}", quoted(v))),
    }
}

fn subject_rule(v: &str) -> Option<String> {
    normal_form_rule("subject", v, normalize_subject(v), "a valid subject")
}

fn predicate_rule(v: &str) -> Option<String> {
    normal_form_rule("predicate", v, normalize_predicate(v), "valid")
}

fn scope_rule(v: &str) -> Option<String> {
    match Scope::parse(v) {
        Ok(s) if s.to_string() == v => None,
        Ok(s) => Some(format!(
            "scope {} is not in canonical form ({s})",
            quoted(v)
        )),
        Err(e) => Some(format!("scope {} is not valid: {e}", quoted(v))),
    }
}

fn candidates_rule(v: &str) -> Option<String> {
    let scopes: Vec<String> = match serde_json::from_str(v) {
        Ok(s) => s,
        Err(_) => return Some(format!("candidates {} are not a list of scopes", quoted(v))),
    };
    // One candidate: a value a spelling merge queued (`merged_from`); an ambiguous write's
    // two are checked with the row (`rows_problems`).
    if scopes.is_empty() {
        return Some(format!("candidates {} name no scope", quoted(v)));
    }
    scopes.iter().find_map(|s| scope_rule(s))
}

/// The scopes a logged read's winner shadowed: a JSON array, as docs/SCHEMA.md says and
/// PostgreSQL's CHECK holds it to (SQLite's asks only for JSON: found by an exploratory test,
/// an object there passed `check`, and its export would not import into PostgreSQL).
fn shadowed_rule(v: &str) -> Option<String> {
    match serde_json::from_str::<serde_json::Value>(v) {
        Ok(serde_json::Value::Array(_)) => None,
        _ => Some(format!("shadowed {} is not a JSON array", quoted(v))),
    }
}

/// A time as memscope writes it: RFC 3339 in UTC with milliseconds (`…T23:34:02.278Z`), the
/// one spelling that sorts as text (docs/SCHEMA.md).
fn time_rule(v: &str) -> Option<String> {
    if is_canonical_time(v) {
        return None;
    }
    time_rule_in_full(v)
}

/// Whether `v` is `YYYY-MM-DDTHH:MM:SS.mmmZ` naming a day of the calendar and a time of day
/// that is not a leap second: what [`time_rule_in_full`] parses and formats back as it is,
/// read without either (`check` reads four times per record).
pub(crate) fn is_canonical_time(v: &str) -> bool {
    const SHAPE: &[u8; 24] = b"9999-99-99T99:99:99.999Z";
    let b = v.as_bytes();
    let shaped = b.len() == SHAPE.len()
        && b.iter().zip(SHAPE).all(|(&c, &s)| {
            if s == b'9' {
                c.is_ascii_digit()
            } else {
                c == s
            }
        });
    if !shaped {
        return false;
    }
    let n = |from: usize, to: usize| {
        b[from..to]
            .iter()
            .fold(0u32, |n, &c| n * 10 + u32::from(c - b'0'))
    };
    // Four digits: the year is 0 to 9999, well within chrono's range.
    chrono::NaiveDate::from_ymd_opt(n(0, 4) as i32, n(5, 7), n(8, 10)).is_some()
        && n(11, 13) < 24
        && n(14, 16) < 60
        && n(17, 19) < 60
}

/// [`time_rule`] without its shortcut.
fn time_rule_in_full(v: &str) -> Option<String> {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(v) else {
        return Some(format!("time {} is not an RFC 3339 time", quoted(v)));
    };
    let utc = t
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    (utc != v).then(|| {
        format!(
            "time {} is not in UTC with milliseconds ({utc}), the spelling memscope sorts by",
            quoted(v)
        )
    })
}

fn seq_ok(n: i64) -> bool {
    (0..=MAX_CAUSAL_SEQ).contains(&n)
}

fn seq_rule(v: &str) -> Option<String> {
    match v.parse::<i64>() {
        Ok(n) if seq_ok(n) => None,
        _ => Some(format!(
            "causal number {} is outside 0 to 2^53, so the causal clock could not go on",
            quoted(v)
        )),
    }
}

/// A write's provenance as the write path stores it: trimmed, not empty, no control character
/// (`prepared::validate`); a copy of it (a confirmation's, a pending item's) likewise. A
/// purged one is NULL, not checked.
fn source_rule(v: &str) -> Option<String> {
    if v.trim().is_empty() {
        Some(format!("source {} is empty", quoted(v)))
    } else if v.chars().any(char::is_control) {
        Some(format!(
            "source {} holds a control character, which no write stores",
            quoted(v)
        ))
    } else if v.trim() != v {
        Some(format!(
            "source {} has white space around it, which a write trims",
            quoted(v)
        ))
    } else {
        None
    }
}

fn days_rule(v: &str) -> Option<String> {
    match v.parse::<u32>() {
        Ok(_) => None,
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Some(format!(
            "{} days is more than the {} a setting keeps",
            quoted(v),
            u32::MAX
        )),
        Err(_) => Some(format!("{} is not a whole number of days", quoted(v))),
    }
}

fn durability_rule(v: &str) -> Option<String> {
    (!matches!(v, "full" | "normal"))
        .then(|| format!("durability {} is not full or normal", quoted(v)))
}

fn scope_guard_rule(v: &str) -> Option<String> {
    crate::store::guard::GuardMode::parse(v)
        .is_none()
        .then(|| format!("scope_guard {} is not queue, flag or off", quoted(v)))
}

/// Whether an event's detail (JSON text) gives a reason holding a NUL character: only a
/// delete writes a reason there, and it refuses one, which PostgreSQL could not store in the
/// tombstone beside it.
pub(crate) fn reason_holds_nul(detail: &str) -> bool {
    // Most details hold no escape at all: read only those that may.
    detail.contains("\\u0000")
        && serde_json::from_str::<serde_json::Value>(detail).is_ok_and(|d| {
            d.get("reason")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|r| r.contains('\0'))
        })
}

fn quoted(v: &str) -> String {
    crate::model::shorten(&serde_json::Value::from(v).to_string(), 80)
}

const RULES: &[Rule] = &[
    // 6. Identities are stored in normal form everywhere, not only in the current view.
    rule(6, "memories", "subject", subject_rule),
    rule(6, "history", "subject", subject_rule),
    rule(6, "history", "predicate", predicate_rule),
    rule(6, "history", "scope", scope_rule),
    rule(6, "tombstones", "subject", subject_rule),
    rule(6, "tombstones", "predicate", predicate_rule),
    rule(6, "tombstones", "scope", scope_rule),
    rule(6, "pending", "subject", subject_rule),
    rule(6, "pending", "predicate", predicate_rule),
    rule(6, "pending", "candidates", candidates_rule),
    rule(6, "pending", "resolved_scope", scope_rule),
    rule(6, "reads", "subject", subject_rule),
    rule(6, "reads", "predicate", predicate_rule),
    rule(6, "reads", "scope", scope_rule),
    rule(6, "reads", "shadowed", shadowed_rule),
    rule(6, "predicate_aliases", "alias", predicate_rule),
    rule(6, "predicate_aliases", "canonical", predicate_rule),
    // 6. Sources as a write stores them.
    rule(6, "memories", "source", source_rule),
    rule(6, "memories", "confirmed_source", source_rule),
    rule(6, "history", "source", source_rule),
    rule(6, "pending", "source", source_rule),
    // 6. Times memscope can read (as-of resolution and the timeline compare them).
    rule(6, "memories", "created_at", time_rule),
    rule(6, "memories", "updated_at", time_rule),
    rule(6, "memories", "confirmed_at", time_rule),
    rule(6, "history", "at", time_rule),
    rule(6, "tombstones", "deleted_at", time_rule),
    rule(6, "pending", "created_at", time_rule),
    rule(6, "pending", "resolved_at", time_rule),
    rule(6, "reads", "at", time_rule),
    rule(6, "predicate_aliases", "added_at", time_rule),
    // 2. Causal numbers the clock can go on from.
    int_rule(2, "memories", "causal_seq", seq_rule, seq_ok),
    int_rule(2, "memories", "confirmed_seq", seq_rule, seq_ok),
    int_rule(2, "history", "causal_seq", seq_rule, seq_ok),
    int_rule(2, "history", "clock", seq_rule, seq_ok),
    int_rule(2, "pending", "causal_seq", seq_rule, seq_ok),
];

const fn rule(
    invariant: u8,
    table: &'static str,
    column: &'static str,
    test: fn(&str) -> Option<String>,
) -> Rule {
    Rule {
        invariant,
        table,
        column,
        test,
        int_ok: None,
    }
}

const fn int_rule(
    invariant: u8,
    table: &'static str,
    column: &'static str,
    test: fn(&str) -> Option<String>,
    int_ok: fn(i64) -> bool,
) -> Rule {
    Rule {
        int_ok: Some(int_ok),
        ..rule(invariant, table, column, test)
    }
}

/// How a stored column holds the ids the id limit measures ([`crate::model::MAX_ID_BYTES`]).
#[derive(Clone, Copy)]
enum IdColumn {
    Subject,
    Predicate,
    /// `global`, or a kind and its id: the id is measured.
    Scope,
    /// A JSON list of scopes (a pending item's).
    Scopes,
}

/// Every column holding a subject, a predicate or a scope, by table. The id limit is no field
/// rule: a database written before it may hold longer ids, and they stay readable; but
/// PostgreSQL cannot index them, so `check` counts them and an import into PostgreSQL refuses
/// them (README, "The model in one minute"). A logged read's subject and predicate are not
/// among them: a read names whatever it asks for (a mistyped name, kilobytes long), and
/// PostgreSQL indexes them by their digests from its schema 10; the scope it was served is a
/// stored one.
const ID_COLUMNS: &[(&str, &str, IdColumn)] = &[
    ("predicate_aliases", "alias", IdColumn::Predicate),
    ("predicate_aliases", "canonical", IdColumn::Predicate),
    ("memories", "subject", IdColumn::Subject),
    ("memories", "predicate", IdColumn::Predicate),
    ("memories", "scope", IdColumn::Scope),
    ("history", "subject", IdColumn::Subject),
    ("history", "predicate", IdColumn::Predicate),
    ("history", "scope", IdColumn::Scope),
    ("tombstones", "subject", IdColumn::Subject),
    ("tombstones", "predicate", IdColumn::Predicate),
    ("tombstones", "scope", IdColumn::Scope),
    ("pending", "subject", IdColumn::Subject),
    ("pending", "predicate", IdColumn::Predicate),
    ("pending", "candidates", IdColumn::Scopes),
    ("pending", "resolved_scope", IdColumn::Scope),
    ("reads", "scope", IdColumn::Scope),
];

/// The id past the limit that `table.column` holds in `text`, said as
/// [`crate::model::past_id_limit`] says it (`memories.subject is 3,002 bytes long; …`);
/// `None` when it holds none (or is no id column).
pub(crate) fn stored_id_past_limit(table: &str, column: &str, text: &str) -> Option<String> {
    let (_, _, kind) = ID_COLUMNS
        .iter()
        .find(|(t, c, _)| *t == table && *c == column)?;
    let scope_id = |scope: &str| {
        let id = scope.split_once(':').map_or(scope, |(_, id)| id);
        crate::model::past_id_limit(&format!("the scope id in {table}.{column}"), id)
    };
    match kind {
        IdColumn::Subject | IdColumn::Predicate => {
            crate::model::past_id_limit(&format!("{table}.{column}"), text)
        }
        IdColumn::Scope => scope_id(text),
        // A list that does not read is the field rules' to name.
        IdColumn::Scopes => serde_json::from_str::<Vec<String>>(text)
            .ok()?
            .iter()
            .find_map(|s| scope_id(s)),
    }
}

/// Settings memscope reads, with their rules.
const SETTINGS: &[(&str, u8, FieldTest)] = &[
    ("causal_clock", 2, seq_rule),
    ("retention_days", 6, days_rule),
    ("tombstone_safe_days", 6, days_rule),
    ("durability", 6, durability_rule),
    ("scope_guard", 6, scope_guard_rule),
    ("purge_debt_since", 6, time_rule),
];

/// The key of `table`'s row `r`, read from its columns `from..`.
fn row_key(table: &str, r: &dyn CheckRow, from: usize) -> Vec<String> {
    (from..from + key_columns(table).len())
        .map(|i| r.show(i))
        .collect()
}

/// The invariant a field of another storage type than its column's breaks, by what the
/// column holds: a record's content (4), a version (5, a tombstone's 3), a causal number (2),
/// an identity or anything else memscope stores in one form (6).
pub(crate) fn type_invariant(table: &str, column: &str) -> u8 {
    match (table, column) {
        ("tombstones", "version") => 3,
        (_, "version") => 5,
        (_, "causal_seq" | "confirmed_seq" | "clock") => 2,
        (
            "memories" | "history",
            "value" | "raw" | "source" | "detail" | "event" | "confirm_count" | "confirmed_source",
        ) => 4,
        _ => 6,
    }
}

/// Every field that breaks a rule, at most `limit`: each rule's in its table's row order, the
/// rules in [`RULES`]' order.
pub(crate) fn field_problems(db: &mut dyn CheckDb, limit: usize) -> Result<Vec<FieldProblem>> {
    Ok(scan_fields(db, limit, None)?.problems)
}

/// What one look at every stored field finds: the fields that break a rule, and the ids past
/// the limit, which break none.
pub(crate) struct FieldScan {
    /// [`field_problems`].
    pub problems: Vec<FieldProblem>,
    /// How many identities — in history, tombstones, pending items or the scopes the read log
    /// was served — and aliases name a subject, predicate or scope id past the limit: written before it,
    /// readable, but not movable to PostgreSQL (`check`'s `ids_past_limit`). A current record
    /// is counted by its history (invariant 4). Past `limit` problems in a table's first rule,
    /// the rest of that table is not read, and its ids not counted.
    pub ids_past_limit: i64,
    /// The rows dated after the deadline [`scan_fields`] was given (by the rule `import` holds
    /// a dump to: `dump::dated_columns`), counted, and the latest time among them; none without
    /// a deadline. Read past `limit` problems as `ids_past_limit` is.
    pub dated_after: i64,
    pub latest_dated_after: Option<DatedField>,
}

/// A time a row is dated by ([`crate::store::dump::dated_columns`]): the row's table, the
/// column, the row's key and the time as stored.
#[derive(Debug, Clone)]
pub(crate) struct DatedField {
    pub table: &'static str,
    pub column: &'static str,
    pub key: Vec<String>,
    pub at: String,
}

/// [`field_problems`], and in the same scans the ids past the limit and the rows dated after
/// `deadline`.
pub(crate) fn scan_fields(
    db: &mut dyn CheckDb,
    limit: usize,
    deadline: Option<&crate::store::dump::Deadline>,
) -> Result<FieldScan> {
    // One scan of each table for all its rules (a scan per rule read `history` and `memories`
    // six times each), every rule's problems kept apart and put in order after.
    let mut found: Vec<Vec<FieldProblem>> = RULES.iter().map(|_| Vec::new()).collect();
    // Each identity (`false`) or alias (`true`) past the limit, once, whichever tables name it.
    let mut past_limit: std::collections::BTreeSet<(bool, Vec<String>)> = Default::default();
    let mut dated_after = 0;
    let mut latest: Option<(chrono::DateTime<chrono::FixedOffset>, DatedField)> = None;
    let mut tables: Vec<&'static str> = Vec::new();
    for r in RULES {
        if !tables.contains(&r.table) {
            tables.push(r.table);
        }
    }
    for table in tables {
        let rules: Vec<usize> = (0..RULES.len())
            .filter(|&i| RULES[i].table == table)
            .collect();
        let columns: Vec<&str> = rules.iter().map(|&i| RULES[i].column).collect();
        // The id columns among them, and the ones that say which identity (or alias) a row
        // names: its subject, predicate and place (a pending item's resolution, else its
        // candidates). `memories` reads only its subject here: its history counts it.
        let at = |name: &str| columns.iter().position(|c| *c == name);
        let ids: Vec<usize> = (0..columns.len())
            .filter(|&i| {
                ID_COLUMNS
                    .iter()
                    .any(|(t, c, _)| *t == table && *c == columns[i])
            })
            .collect();
        let names: Vec<usize> = match table {
            "memories" => Vec::new(),
            "predicate_aliases" => [at("alias"), at("canonical")]
                .into_iter()
                .flatten()
                .collect(),
            "pending" => [
                at("subject"),
                at("predicate"),
                at("resolved_scope"),
                at("candidates"),
            ]
            .into_iter()
            .flatten()
            .collect(),
            _ => [at("subject"), at("predicate"), at("scope")]
                .into_iter()
                .flatten()
                .collect(),
        };
        // The columns that date a row, each read by its time rule (a test holds them to it).
        let dated: Vec<(usize, &'static str)> = match deadline {
            Some(_) => crate::store::dump::dated_columns(table)
                .iter()
                .filter_map(|c| Some((at(c)?, *c)))
                .collect(),
            None => Vec::new(),
        };
        let identity_at = rules.len() + key_columns(table).len();
        let mut select = columns.clone();
        select.extend(key_columns(table));
        select.extend(identity_columns(table));
        let sql = format!("SELECT {} FROM {table}", select.join(", "));
        db.each(&sql, &[], &mut |row| {
            for (at, &i) in rules.iter().enumerate() {
                let r = &RULES[i];
                // Rows without a value are skipped; past `limit` a rule's problems are not
                // reported.
                if found[i].len() >= limit || row.is_null(at) {
                    continue;
                }
                if let (Some(ok), Some(n)) = (r.int_ok, row.int(at)) {
                    if ok(n) {
                        continue;
                    }
                }
                let wrong = match row.text(at) {
                    Some(text) => (r.test)(text),
                    None => (r.test)(&row.show(at)),
                };
                if let Some(detail) = wrong {
                    let key = row_key(r.table, row, rules.len());
                    let identity: Vec<String> = (0..identity_columns(table).len())
                        .map(|i| row.show(identity_at + i))
                        .collect();
                    found[i].push(FieldProblem {
                        invariant: r.invariant,
                        table: r.table,
                        named: Some((
                            row_label(table, &key, &identity),
                            way_out(table, r.column, &identity),
                        )),
                        key,
                        detail: format!("{}.{}: {detail}", r.table, r.column),
                    });
                }
            }
            // An id within the limit is no longer than it in bytes: only a longer one is read.
            let past = !names.is_empty()
                && ids.iter().any(|&i| {
                    row.text(i).is_some_and(|text| {
                        text.len() > crate::model::MAX_ID_BYTES
                            && stored_id_past_limit(table, columns[i], text).is_some()
                    })
                });
            if past {
                let mut name: Vec<String> = names.iter().map(|&i| row.show(i)).collect();
                if table == "pending" && !row.is_null(names[2]) {
                    name.pop(); // resolved: its place is the resolution
                }
                past_limit.insert((table == "predicate_aliases", name));
            }
            // A row counts once, by its latest time.
            let mut row_after: Option<(chrono::DateTime<chrono::FixedOffset>, DatedField)> = None;
            for &(i, column) in &dated {
                if row.is_null(i) {
                    continue;
                }
                let stored = match row.text(i) {
                    Some(text) => std::borrow::Cow::Borrowed(text),
                    None => std::borrow::Cow::Owned(row.show(i)),
                };
                if !deadline.is_some_and(|d| d.passed_by(&stored)) {
                    continue;
                }
                // Rare: parsed only when found.
                let Ok(t) = chrono::DateTime::parse_from_rfc3339(&stored) else {
                    continue;
                };
                if row_after.as_ref().is_none_or(|(l, _)| t > *l) {
                    let key = row_key(table, row, rules.len());
                    let field = DatedField {
                        table,
                        column,
                        key,
                        at: stored.into_owned(),
                    };
                    row_after = Some((t, field));
                }
            }
            if let Some((t, field)) = row_after {
                dated_after += 1;
                if latest.as_ref().is_none_or(|(l, _)| t > *l) {
                    latest = Some((t, field));
                }
            }
            // Once this table's first rule has `limit` problems, nothing after it is reported.
            Ok(found[rules[0]].len() < limit)
        })?;
    }
    let ids_past_limit = past_limit.len() as i64;
    let latest_dated_after = latest.map(|(_, field)| field);
    let mut out: Vec<FieldProblem> = found.into_iter().flatten().take(limit).collect();
    if out.len() >= limit {
        return Ok(FieldScan {
            problems: out,
            ids_past_limit,
            dated_after,
            latest_dated_after,
        });
    }
    for (name, invariant, test) in SETTINGS {
        let value = collect(
            db,
            "SELECT value FROM settings WHERE key = $1",
            &[name],
            1,
            &|r| r.show(0),
        )?;
        if let Some(detail) = value.first().and_then(|v| test(v)) {
            let way_out = match *name {
                // Read as no setting until then (`sqlite::tx::clock_now`): nothing of it is copied.
                "causal_clock" => "memscope reads the clock from the numbers stored instead, and `memscope init` sets it to the highest of them".to_string(),
                "purge_debt_since" => "a client outside memscope wrote it: delete the setting with a SQL client, and `memscope gc` records the debt again if a purge is owed".to_string(),
                _ => format!("set it again with `memscope settings set {name} VALUE`"),
            };
            out.push(FieldProblem {
                invariant: *invariant,
                table: "settings",
                key: vec![name.to_string()],
                detail: format!("setting {name}: {detail}"),
                // The detail names the row (`setting causal_clock: …`).
                named: Some((String::new(), way_out)),
            });
        }
    }
    cross_row_problems(db, limit, &mut out)?;
    out.truncate(limit);
    Ok(FieldScan {
        problems: out,
        ids_past_limit,
        dated_after,
        latest_dated_after,
    })
}

/// What a number stored above the causal clock means, and the way out.
const CLOCK_SET_BACK: &str = "the clock was set back around memscope, so a number `memscope seq` hands out may be older than one stored; `memscope init` moves the clock past every stored number";

/// The rules that compare a row with other rows.
fn cross_row_problems(
    db: &mut dyn CheckDb,
    limit: usize,
    out: &mut Vec<FieldProblem>,
) -> Result<()> {
    let clock = db.clock()?;
    let mut query = |db: &mut dyn CheckDb,
                     invariant: u8,
                     table: &'static str,
                     sql: &str,
                     what: &dyn Fn(&dyn CheckRow) -> Option<String>|
     -> Result<()> {
        db.each(sql, &[], &mut |row| {
            if out.len() >= limit {
                return Ok(false);
            }
            if let Some(detail) = what(row) {
                out.push(FieldProblem {
                    invariant,
                    table,
                    key: row_key(table, row, 0),
                    detail,
                    named: None,
                });
            }
            Ok(true)
        })
    };
    // 6. An alias points at a canonical predicate, never at another alias: a chain would let
    // an ordinary write store a predicate that is itself an alias.
    query(
        db,
        6,
        "predicate_aliases",
        "SELECT a.alias, a.canonical, b.canonical FROM predicate_aliases a
         JOIN predicate_aliases b ON b.alias = a.canonical",
        &|r| {
            Some(format!(
                "alias {} points at {}, itself an alias of {}: aliases are one step deep",
                quoted(&r.show(0)),
                quoted(&r.show(1)),
                quoted(&r.show(2))
            ))
        },
    )?;
    // 6. Nothing is stored under an alias's name: every command maps the name to its
    // canonical one, so no command could show, resolve or delete such a row (`alias add`
    // refuses a name that holds memories and moves its pending items and reads; a database
    // made before that, or by a raw client, may hold some). Tombstones, history events that
    // keep a value, pending items, logged reads — one scan of each, every row looked up in the
    // alias table (a union of the four tables joined once would be materialized first: 2.5
    // times slower on 300k events).
    query(
        db,
        6,
        "predicate_aliases",
        "SELECT a.alias, a.canonical, 1, count(*) FROM tombstones x
             JOIN predicate_aliases a ON a.alias = x.predicate GROUP BY a.alias, a.canonical
         UNION ALL SELECT a.alias, a.canonical, 2, count(*) FROM history x
             JOIN predicate_aliases a ON a.alias = x.predicate
             WHERE x.value IS NOT NULL OR x.raw IS NOT NULL GROUP BY a.alias, a.canonical
         UNION ALL SELECT a.alias, a.canonical, 3, count(*) FROM pending x
             JOIN predicate_aliases a ON a.alias = x.predicate GROUP BY a.alias, a.canonical
         UNION ALL SELECT a.alias, a.canonical, 4, count(*) FROM reads x
             JOIN predicate_aliases a ON a.alias = x.predicate GROUP BY a.alias, a.canonical
         ORDER BY 1, 3",
        &|r| {
            let n = r.int(3).unwrap_or(0);
            let (alias, canonical) = (r.show(0), r.show(1));
            let remove = format!(
                "`memscope alias remove {}`",
                crate::model::shell_word(&alias)
            );
            let (one, many, why, way_out) = match r.int(2) {
                Some(1) => (
                    "tombstone",
                    "tombstones",
                    format!(
                        "a write of {} is stored under {}, out of its reach",
                        quoted(&alias),
                        quoted(&canonical)
                    ),
                    format!("remove the alias ({remove})"),
                ),
                Some(2) => (
                    "history event that keeps a value",
                    "history events that keep a value",
                    "no command can show or delete them under either name".to_string(),
                    format!("remove the alias ({remove}) and delete those memories"),
                ),
                kind => {
                    let (one, many) = if kind == Some(3) {
                        ("pending item", "pending items")
                    } else {
                        ("logged read", "logged reads")
                    };
                    let way_out = format!(
                        "remove the alias ({remove}) and add it again, which moves them to {}",
                        quoted(&canonical)
                    );
                    (
                        one,
                        many,
                        "no command reaches them under either name".to_string(),
                        way_out,
                    )
                }
            };
            Some(format!(
                "{n} {} stored under {}, an alias of {}: {why} — {way_out}",
                if n == 1 { one } else { many },
                quoted(&alias),
                quoted(&canonical),
            ))
        },
    )?;
    // 6. An ambiguous write waits on two or more places; only a value a spelling merge queued
    // (`merged_from`) waits on its one. (Candidates that are not a list of scopes break
    // `candidates_rule` already.)
    query(
        db,
        6,
        "pending",
        "SELECT id, candidates FROM pending WHERE merged_from IS NULL",
        &|r| {
            let few = candidates(r.text(1)).is_some_and(|c| c.len() < 2);
            few.then(|| {
                format!(
                    "pending item #{} is an ambiguous write with fewer than two candidate scopes",
                    r.show(0)
                )
            })
        },
    )?;
    // 2. Nothing was confirmed or written at a causal number the clock never reached: such a
    // number would make every later write of the identity stale. One past 2^53 is no clock's
    // to reach, and `init` moves the clock past none: the field rules name its row and the
    // way out (found by an exploratory test: this finding said `init` would mend it).
    query(
        db,
        2,
        "memories",
        &format!(
            "SELECT id, subject, predicate, scope, causal_seq, confirmed_seq, count(*) OVER ()
             FROM memories WHERE causal_seq BETWEEN {clock} + 1 AND {MAX_CAUSAL_SEQ}
                OR confirmed_seq BETWEEN {clock} + 1 AND {MAX_CAUSAL_SEQ}
             ORDER BY id LIMIT 1"
        ),
        &|r| {
            let within = |n: Option<i64>| n.filter(|n| seq_ok(*n));
            let at = within(r.int(4)).max(within(r.int(5))).unwrap_or(0);
            // One finding for one cause (found by review: a clock set back from 33 to 1 was 22
            // lines), naming the first record and how many more.
            let more = match r.int(6).unwrap_or(1) - 1 {
                0 => String::new(),
                1 => ", as is 1 other memory".to_string(),
                n => format!(", as are {n} other memories"),
            };
            Some(format!(
                "{} · {} @ {}: written or confirmed at causal number {at}, above the database's causal clock {clock}{more}: {CLOCK_SET_BACK}",
                r.show(1),
                r.show(2),
                r.show(3),
            ))
        },
    )?;
    // An open item's number is the one its resolution writes at (found by review: an imported
    // item past the clock passed `check`, and resolving it used the clock up).
    query(
        db,
        2,
        "pending",
        &format!(
            "SELECT id, subject, predicate, causal_seq, count(*) OVER () FROM pending
             WHERE status = 'open' AND causal_seq BETWEEN {clock} + 1 AND {MAX_CAUSAL_SEQ}
             ORDER BY id LIMIT 1"
        ),
        &|r| {
            let more = match r.int(4).unwrap_or(1) - 1 {
                0 => String::new(),
                1 => ", as does 1 other open item".to_string(),
                n => format!(", as do {n} other open items"),
            };
            Some(format!(
                "{} · {}: open pending item #{} holds causal number {}, above the database's causal clock {clock}{more}: resolving it would write at that number — {CLOCK_SET_BACK}",
                r.show(1),
                r.show(2),
                r.show(0),
                r.show(3),
            ))
        },
    )?;
    // 3. An open pending item keeps at least one candidate the user has not deleted: the
    // write path refuses to queue one whose every place is tombstoned.
    let deleted: std::collections::HashSet<(String, String, String)> = collect(
        db,
        "SELECT t.subject, t.predicate, t.scope FROM tombstones t WHERE EXISTS (
             SELECT 1 FROM pending p WHERE p.status = 'open'
             AND p.subject = t.subject AND p.predicate = t.predicate)",
        &[],
        usize::MAX,
        &|r| (r.show(0), r.show(1), r.show(2)),
    )?
    .into_iter()
    .collect();
    query(
        db,
        3,
        "pending",
        "SELECT id, subject, predicate, candidates FROM pending WHERE status = 'open'",
        &|r| {
            let (subject, predicate) = (r.show(1), r.show(2));
            let all_deleted = candidates(r.text(3)).is_some_and(|c| {
                c.into_iter()
                    .all(|s| deleted.contains(&(subject.clone(), predicate.clone(), s)))
            });
            all_deleted.then(|| {
                format!(
                    "{subject} · {predicate}: open pending item #{} names only deleted scopes",
                    r.show(0)
                )
            })
        },
    )?;
    Ok(())
}

/// A pending item's candidate scopes, when its text is a list of texts.
fn candidates(text: Option<&str>) -> Option<Vec<String>> {
    text.and_then(|t| serde_json::from_str(t).ok())
}

#[cfg(test)]
mod tests {
    use super::{seq_ok, seq_rule, time_rule, time_rule_in_full, RULES};
    use crate::model::MAX_CAUSAL_SEQ;

    /// `check` reads the times rows are dated by (`dump::dated_columns`) in the scan of its
    /// time rules: a dated column without one would go unread.
    #[test]
    fn every_dated_column_has_a_time_rule() {
        for table in crate::store::dump::TABLES {
            for column in crate::store::dump::dated_columns(table) {
                assert!(
                    RULES.iter().any(|r| r.table == *table
                        && r.column == *column
                        && (r.test)("2026-12-05T10:00:00.000Z").is_none()
                        && (r.test)("2026-12-05 10:00").is_some()),
                    "{table}.{column}"
                );
            }
        }
    }

    /// A time after the deadline is told alike whether it compares as text (memscope's
    /// spelling) or parsed (any other RFC 3339 spelling), a deadline finer than milliseconds
    /// included.
    #[test]
    fn a_deadline_is_passed_alike_by_text_and_by_time() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-12-05T10:00:00.000500Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let deadline = crate::store::dump::Deadline::new(at);
        for (stored, after) in [
            ("2026-12-05T10:00:00.000Z", false),
            ("2026-12-05T10:00:00.001Z", true),
            ("2026-12-05T09:59:59.999Z", false),
            ("2026-12-05T11:00:00.001+01:00", true),
            ("2026-12-05T11:00:00.000+01:00", false),
            ("2099-01-01T00:00:00Z", true),
            ("not a time", false),
        ] {
            assert_eq!(deadline.passed_by(stored), after, "{stored}");
        }
    }

    #[test]
    fn an_integer_passes_the_causal_rule_as_its_digits_do() {
        for n in [
            i64::MIN,
            -1,
            0,
            1,
            42,
            MAX_CAUSAL_SEQ - 1,
            MAX_CAUSAL_SEQ,
            MAX_CAUSAL_SEQ + 1,
            i64::MAX,
        ] {
            assert_eq!(seq_ok(n), seq_rule(&n.to_string()).is_none(), "{n}");
        }
    }

    #[test]
    fn time_shortcut_answers_as_the_full_path_does() {
        let mut times: Vec<String> = [
            "2026-12-03T07:09:42.775Z",
            "0000-01-01T00:00:00.000Z",
            "9999-12-31T23:59:59.999Z",
            "2024-02-29T12:00:00.000Z",
            "2023-02-29T12:00:00.000Z",
            "2100-02-29T12:00:00.000Z",
            "2000-02-29T12:00:00.000Z",
            "2026-04-31T12:00:00.000Z",
            "2026-00-10T12:00:00.000Z",
            "2026-13-10T12:00:00.000Z",
            "2026-12-00T12:00:00.000Z",
            "2026-12-32T12:00:00.000Z",
            "2026-12-03T24:00:00.000Z",
            "2026-12-03T23:60:00.000Z",
            "2026-12-03T23:59:60.000Z",
            "2016-12-31T23:59:60.500Z",
            "2026-12-03t07:09:42.775Z",
            "2026-12-03T07:09:42.775z",
            "2026-12-03 07:09:42.775Z",
            "2026-12-03T07:09:42.77Z",
            "2026-12-03T07:09:42.7750Z",
            "2026-12-03T07:09:42Z",
            "2026-12-03T07:09:42.775+00:00",
            "2026-12-03T08:09:42.775+01:00",
            "+2026-12-03T07:09:42.775Z",
            "２026-12-03T07:09:42.775Z",
            "",
        ]
        .map(String::from)
        .to_vec();
        // Every day of a leap year and a common one, and every hour and minute boundary.
        for year in [1900, 2024, 2026] {
            for month in 1..=13 {
                for day in [1, 28, 29, 30, 31] {
                    times.push(format!("{year:04}-{month:02}-{day:02}T00:00:00.000Z"));
                }
            }
        }
        for (h, m, s) in [(0, 0, 0), (23, 59, 59), (9, 5, 7), (12, 30, 45)] {
            times.push(format!("2026-06-15T{h:02}:{m:02}:{s:02}.123Z"));
        }
        for t in &times {
            assert_eq!(time_rule(t), time_rule_in_full(t), "{t:?}");
        }
    }
}
