//! The rows every store operation reads the same way: one identity's current record,
//! tombstone and versions, a pending item, a logged read — each parsed once, here — and the
//! record of an owed on-disk purge. The operations (`read`, `write`, `incident`, `delete`,
//! `browse`, `spellings`, `tx`) import this module; it imports none of them.

use crate::model::{HistoryEvent, Identity, MemoryRecord, PendingItem, ReadRecord, Scope};
pub(crate) use crate::store::events::mark_validity;
use anyhow::Result;
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;

pub(crate) const MEMORY_COLUMNS: &str = "subject, predicate, scope, value, version, source, causal_seq, raw, created_at, updated_at, confirmed_at, confirm_count";

/// Values and words longer than this many bytes are read as a preview where a screen lists
/// them (the UI's current view, its history pane and scopes): README, "The terminal UI".
pub const PREVIEW_BYTES: usize = 4096;
/// The characters of the stored text a preview keeps.
const PREVIEW_CHARS: usize = 1000;

/// The SQL for the column `col`, a long one as a preview: its first characters (a value's
/// JSON text, `preview::preview_value` decodes it). SQLite reads the long text from its pages
/// once (for `substr`; `octet_length` of a column reads only its header), and nothing parses,
/// copies or draws more than the preview.
fn preview(col: &str) -> String {
    format!(
        "CASE WHEN octet_length({col}) > {PREVIEW_BYTES} THEN substr({col}, 1, {PREVIEW_CHARS})
         ELSE {col} END"
    )
}

/// The SQL for the size in bytes of the column `col` where [`preview`] cuts it, else NULL,
/// named `name` ([`bytes_at`] finds it by its name).
fn preview_bytes(col: &str, name: &str) -> String {
    format!(
        "CASE WHEN octet_length({col}) > {PREVIEW_BYTES} THEN octet_length({col}) END AS {name}"
    )
}

/// `MEMORY_COLUMNS` with the value and the words as previews and their sizes after them
/// (`memory_from_row` reads them all).
pub(crate) fn memory_preview_columns() -> String {
    format!(
        "subject, predicate, scope, {}, version, source, causal_seq, {}, created_at, updated_at, confirmed_at, confirm_count, {}, {}",
        preview("value"),
        preview("raw"),
        preview_bytes("value", "value_bytes"),
        preview_bytes("raw", "raw_bytes"),
    )
}

/// The history columns `event_from_row` reads, the value and the words as previews.
pub(crate) fn event_preview_columns() -> String {
    format!(
        "id, event, subject, predicate, scope, version, {}, {}, source, causal_seq, at, detail, {}, {}",
        preview("value"),
        preview("raw"),
        preview_bytes("value", "value_bytes"),
        preview_bytes("raw", "raw_bytes"),
    )
}

/// The size of a previewed value or words in the column named `name`: `None` where the row was
/// read whole (no such column) or the text was short.
fn bytes_at(r: &Row<'_>, name: &str) -> rusqlite::Result<Option<i64>> {
    match r.as_ref().column_index(name) {
        Ok(i) => r.get(i),
        Err(_) => Ok(None),
    }
}

/// The value in column `idx`: parsed, or a preview's first characters decoded where `bytes`
/// says the row holds only those.
fn value_at(r: &Row<'_>, idx: usize, bytes: Option<i64>, what: &str) -> rusqlite::Result<Value> {
    match bytes {
        Some(_) => Ok(crate::store::preview::preview_value(
            &r.get::<_, String>(idx)?,
        )),
        None => json_at(r, idx, what),
    }
}

fn parse_json(text: &str, what: &str) -> rusqlite::Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            format!("{what} is not valid JSON: {e}").into(),
        )
    })
}

/// The JSON text in column `idx`, parsed; `what` names it in the error.
fn json_at(r: &Row<'_>, idx: usize, what: &str) -> rusqlite::Result<Value> {
    parse_json(&r.get::<_, String>(idx)?, what)
}

/// The JSON text in column `idx`, parsed, or `None` where it is NULL.
fn optional_json_at(r: &Row<'_>, idx: usize, what: &str) -> rusqlite::Result<Option<Value>> {
    r.get::<_, Option<String>>(idx)?
        .map(|text| parse_json(&text, what))
        .transpose()
}

pub(crate) fn parse_scope(text: &str) -> rusqlite::Result<Scope> {
    Scope::parse(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.into())
    })
}

pub(crate) fn memory_from_row(r: &Row<'_>) -> rusqlite::Result<MemoryRecord> {
    let value_bytes = bytes_at(r, "value_bytes")?;
    Ok(MemoryRecord {
        subject: r.get(0)?,
        predicate: r.get(1)?,
        scope: parse_scope(&r.get::<_, String>(2)?)?,
        value: value_at(r, 3, value_bytes, "a stored value")?,
        version: r.get(4)?,
        source: r.get(5)?,
        causal_seq: r.get(6)?,
        raw: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
        confirmed_at: r.get(10)?,
        confirm_count: r.get(11)?,
        value_bytes,
        raw_bytes: bytes_at(r, "raw_bytes")?,
    })
}

pub(crate) fn event_from_row(r: &Row<'_>) -> rusqlite::Result<HistoryEvent> {
    let value_bytes = bytes_at(r, "value_bytes")?;
    Ok(HistoryEvent {
        id: r.get(0)?,
        event: r.get(1)?,
        subject: r.get(2)?,
        predicate: r.get(3)?,
        scope: r.get(4)?,
        version: r.get(5)?,
        value: match value_bytes {
            Some(_) => Some(value_at(r, 6, value_bytes, "a history value")?),
            None => optional_json_at(r, 6, "a history value")?,
        },
        raw: r.get(7)?,
        source: r.get(8)?,
        causal_seq: r.get(9)?,
        at: r.get(10)?,
        detail: optional_json_at(r, 11, "a history detail")?,
        valid_until: None,
        value_bytes,
        raw_bytes: bytes_at(r, "raw_bytes")?,
    })
}

pub(crate) const PENDING_COLUMNS: &str = "id, subject, predicate, value, raw, source, causal_seq, candidates, status, created_at, resolved_scope, resolution, merged_from, reason";

pub(crate) fn pending_from_row(r: &Row<'_>) -> rusqlite::Result<PendingItem> {
    let candidates: Vec<String> = serde_json::from_value(json_at(r, 7, "pending candidates")?)
        .map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(7, rusqlite::types::Type::Text, e.into())
        })?;
    Ok(PendingItem {
        id: r.get(0)?,
        subject: r.get(1)?,
        predicate: r.get(2)?,
        value: json_at(r, 3, "a pending value")?,
        raw: r.get(4)?,
        source: r.get(5)?,
        causal_seq: r.get(6)?,
        candidates: candidates
            .iter()
            .map(|c| parse_scope(c))
            .collect::<rusqlite::Result<_>>()?,
        status: r.get(8)?,
        created_at: r.get(9)?,
        resolved_scope: r.get(10)?,
        resolution: r.get(11)?,
        merged_from: r.get(12)?,
        reason: r.get(13)?,
    })
}

pub(crate) fn pending_item(conn: &Connection, id: i64) -> Result<Option<PendingItem>> {
    Ok(conn
        .query_row(
            &format!("SELECT {PENDING_COLUMNS} FROM pending WHERE id = ?1"),
            [id],
            pending_from_row,
        )
        .optional()?)
}

/// The one row `sql` selects for `id` (bound as ?1 subject, ?2 predicate, ?3 scope) from
/// `table`, mapped by `f`, if there is one; a second row — a damaged database, in a table that
/// keeps one row an identity — is refused
/// ([`two_rows_of_one_identity`](crate::store::check::two_rows_of_one_identity)), never
/// answered by whichever came first.
pub(crate) fn identity_row<T>(
    conn: &Connection,
    table: &str,
    sql: &str,
    id: &Identity,
    f: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>> {
    identity_row_at(conn, table, sql, id, &id.scope.to_string(), f)
}

/// [`identity_row`] with `id`'s scope already as text (`scope_text`), as the write path holds it.
pub(crate) fn identity_row_at<T>(
    conn: &Connection,
    table: &str,
    sql: &str,
    id: &Identity,
    scope_text: &str,
    f: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params![id.subject, id.predicate, scope_text])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let found = f(row)?;
    if rows.next()?.is_some() {
        return Err(crate::store::check::two_rows_of_one_identity(table, id));
    }
    Ok(Some(found))
}

pub(crate) fn current(conn: &Connection, id: &Identity) -> Result<Option<MemoryRecord>> {
    current_as(conn, id, MEMORY_COLUMNS)
}

/// The current record of `id`, read as `columns` say (`MEMORY_COLUMNS` or the preview ones).
pub(crate) fn current_as(
    conn: &Connection,
    id: &Identity,
    columns: &str,
) -> Result<Option<MemoryRecord>> {
    identity_row(
        conn,
        "memories",
        &format!(
            "SELECT {columns} FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3"
        ),
        id,
        memory_from_row,
    )
}

pub(crate) fn tombstone_version(conn: &Connection, id: &Identity) -> Result<Option<i64>> {
    identity_row(
        conn,
        "tombstones",
        "SELECT version FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
        id,
        |r| r.get(0),
    )
}

/// The highest version an identity ever used (applied versions and tombstones).
pub(crate) fn max_version(conn: &Connection, id: &Identity) -> Result<i64> {
    let from_memory: Option<i64> = identity_row(
        conn,
        "memories",
        "SELECT version FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
        id,
        |r| r.get(0),
    )?;
    Ok([
        history_max_version(conn, id)?,
        from_memory,
        tombstone_version(conn, id)?,
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(0))
}

/// The highest version number in an identity's log, if it has one.
pub(crate) fn history_max_version(conn: &Connection, id: &Identity) -> Result<Option<i64>> {
    // Callers probe for any history first: SQLite re-prepares this aggregate on every run as
    // the table grows, which would cost a parse on every new identity.
    // An aggregate always returns its one row: NULL when the log is empty.
    Ok(identity_row(
        conn,
        "history",
        "SELECT max(version) FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
        id,
        |r| r.get::<_, Option<i64>>(0),
    )?
    .flatten())
}

/// A `reads` row, selected as `id, at, agent, subject, predicate, repo, task, scope, version,
/// shadowed, note`.
pub(crate) fn read_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ReadRecord> {
    let shadowed: Option<String> = r.get(9)?;
    Ok(ReadRecord {
        id: r.get(0)?,
        at: r.get(1)?,
        agent: r.get(2)?,
        subject: r.get(3)?,
        predicate: r.get(4)?,
        repo: r.get(5)?,
        task: r.get(6)?,
        scope: r.get(7)?,
        version: r.get(8)?,
        shadowed: shadowed
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default(),
        note: r.get(10)?,
    })
}

pub(crate) const DEBT_KEY: &str = "purge_debt_since";

pub(crate) fn purge_debt_owed(conn: &Connection) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM settings WHERE key = ?1")?
        .exists([DEBT_KEY])?)
}
