//! The terminal UI's reads on PostgreSQL (docs/ARCHITECTURE.md, point 7): the current view by
//! keyset pages in SQLite's order (bytewise: `COLLATE "C"`, walked on schema v5's
//! `memories_view` index), the filter's scans, one identity's timeline by pages, the read log,
//! and the previews that keep a long value from costing more than its first characters — the
//! same answers as `store/sqlite/browse.rs`, each call its own short transaction, so nothing is
//! held while the UI idles.

use super::store::{
    canonical_predicate, lock_not_available, parse_value, spelled, spelled_scope, write_probe,
    Call, PgStore, SUBJECT,
};
use crate::model::{HistoryEvent, Identity, MemoryRecord, ReadRecord, Scope, Tombstone};
use crate::store::decide::{decide_write, WriteDecision};
use crate::store::events::mark_validity;
use crate::store::prepared::resolution_seq;
use crate::store::ui::json_text;
use crate::store::{
    BrowseBound, BrowseKey, BrowseRecord, FilterCandidate, HistoryFrom, StoreCounts,
};
use anyhow::{anyhow, Result};
use chrono::{DateTime, Utc};
use postgres::Row;

/// The change mark's statement: the newest ids of the logs and the open queue's size.
macro_rules! change_mark_sql {
    () => {
        "SELECT coalesce((SELECT max(id) FROM history), 0),
                coalesce((SELECT max(id) FROM reads), 0),
                coalesce((SELECT max(id) FROM pending), 0),
                (SELECT count(*) FROM pending WHERE status = 'open')"
    };
}

/// A time column as SQLite stores it (RFC 3339, milliseconds, UTC).
macro_rules! utc {
    ($c:literal) => {
        concat!(
            "to_char(",
            $c,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
        )
    };
}

/// The column `$c`, a long one as a preview: its first 1,000 characters (a value's JSON text,
/// `preview::preview_value` decodes it), as on SQLite (`PREVIEW_BYTES`, checked by a test). The
/// server reads the long text once; nothing parses or sends more than the preview.
macro_rules! preview {
    ($c:literal) => {
        concat!(
            "CASE WHEN octet_length(",
            $c,
            ") > 4096 THEN substr(",
            $c,
            ", 1, 1000) ELSE ",
            $c,
            " END"
        )
    };
}

/// The size in bytes of the column `$c` where [`preview!`] cuts it, else NULL, named `$name`
/// ([`bytes_at`] finds it by its name).
macro_rules! preview_bytes {
    ($c:literal, $name:literal) => {
        concat!(
            "CASE WHEN octet_length(",
            $c,
            ") > 4096 THEN octet_length(",
            $c,
            ")::bigint END AS ",
            $name
        )
    };
}

/// Resolution in one statement, so one round trip (README, "Running on PostgreSQL": `resolve`'s
/// latency): the subject ($1 folded, $2 as given), predicate ($3) and places ($4/$5 the repo
/// scope folded and as given, $6/$7 the task's) in their stored spellings, looked up as
/// `spelled` and `canonical_predicate` do (a read registers nothing); then each scope of the
/// chain, most specific first, with its current record (`$value` is the value's expression),
/// whether it is tombstoned and the value's size where `$value` is a preview (`$bytes`).
macro_rules! chain_sql {
    ($value:expr, $bytes:expr) => {
        concat!(
            "WITH names AS (
               SELECT coalesce((SELECT spelling FROM spellings WHERE kind = 'subject' AND folded = $1), $2) AS subject,
                      coalesce((SELECT canonical FROM predicate_aliases WHERE alias = $3), $3) AS predicate,
                      CASE WHEN $5::text IS NOT NULL THEN
                        coalesce((SELECT spelling FROM spellings WHERE kind = 'scope' AND folded = $4), $5) END AS repo,
                      CASE WHEN $7::text IS NOT NULL THEN
                        coalesce((SELECT spelling FROM spellings WHERE kind = 'scope' AND folded = $6), $7) END AS task)
             SELECT n.subject, n.predicate, n.repo, n.task, c.scope, ",
            $value,
            ", m.version, m.source, ",
            utc!("m.updated_at"),
            ", EXISTS (SELECT 1 FROM tombstones d
                       WHERE d.subject = n.subject AND d.predicate = n.predicate AND d.scope = c.scope), ",
            $bytes,
            " FROM names n
             CROSS JOIN LATERAL unnest(ARRAY[n.task, n.repo, 'global']) WITH ORDINALITY AS c(scope, nth)
             LEFT JOIN memories m ON m.subject = n.subject AND m.predicate = n.predicate AND m.scope = c.scope
             WHERE c.scope IS NOT NULL
             ORDER BY c.nth"
        )
    };
}

/// The resolution chain with its records' values (`PgStore::resolve`).
pub(super) const CHAIN_RECORDS: &str = chain_sql!("m.value", "NULL::bigint");

/// The resolution chain with long values as previews (`PgStore::resolve_preview`).
pub(super) const CHAIN_PREVIEWS: &str = chain_sql!(
    preview!("m.value"),
    preview_bytes!("m.value", "value_bytes")
);

/// A current record's columns as [`record_from_row`] reads them, value and words as previews,
/// then its id, then the sizes of a cut value and words.
macro_rules! record_preview_columns {
    () => {
        concat!(
            "subject, predicate, scope, ",
            preview!("value"),
            ", version, source, causal_seq, ",
            preview!("raw"),
            ", ",
            utc!("created_at"),
            ", ",
            utc!("updated_at"),
            ", ",
            utc!("confirmed_at"),
            ", confirm_count, id, ",
            preview_bytes!("value", "value_bytes"),
            ", ",
            preview_bytes!("raw", "raw_bytes")
        )
    };
}

/// A current record's columns as [`record_from_row`] reads them, whole, then its id.
macro_rules! record_columns {
    () => {
        concat!(
            "subject, predicate, scope, value, version, source, causal_seq, raw, ",
            utc!("created_at"),
            ", ",
            utc!("updated_at"),
            ", ",
            utc!("confirmed_at"),
            ", confirm_count, id"
        )
    };
}

/// A history row's columns as [`event_from_row`] reads them, value and words as previews.
macro_rules! event_preview_columns {
    () => {
        concat!(
            "id, event, subject, predicate, scope, version, ",
            preview!("value"),
            ", ",
            preview!("raw"),
            ", source, causal_seq, ",
            utc!("at"),
            ", detail, ",
            preview_bytes!("value", "value_bytes"),
            ", ",
            preview_bytes!("raw", "raw_bytes")
        )
    };
}

/// The live records of a subject and predicate, columns `$cols`, in view order. The identity
/// index is scope-first (and PostgreSQL skips no index prefix), so the scopes are found on the
/// history index, one seek each — a record with 50,000 versions has 50,000 entries there — and
/// then looked up point by point: not a scan of the whole table, as `WHERE subject AND
/// predicate` on `memories` would be.
macro_rules! live_scopes_sql {
    ($cols:expr) => {
        concat!(
            "WITH RECURSIVE scopes(scope) AS (
                SELECT min(scope) FROM history WHERE subject = $1 AND predicate = $2
                UNION ALL
                SELECT (SELECT min(h.scope) FROM history h
                        WHERE h.subject = $1 AND h.predicate = $2 AND h.scope > s.scope)
                FROM scopes s WHERE s.scope IS NOT NULL)
             SELECT ",
            $cols,
            " FROM memories WHERE subject = $1 AND predicate = $2 AND scope IN
                (SELECT scope FROM scopes WHERE scope IS NOT NULL)
             ORDER BY scope COLLATE \"C\""
        )
    };
}

/// The view's order (and the `memories_view` index's).
macro_rules! view_order {
    ($dir:literal) => {
        concat!(
            " ORDER BY scope COLLATE \"C\"",
            $dir,
            ", subject COLLATE \"C\"",
            $dir,
            ", predicate COLLATE \"C\"",
            $dir
        )
    };
}

/// A page of the current view: `$cond` in view order `$dir`.
macro_rules! browse_sql {
    ($cond:literal, $dir:literal) => {
        concat!(
            "SELECT ",
            record_preview_columns!(),
            " FROM memories WHERE ",
            $cond,
            view_order!($dir),
            " LIMIT $4"
        )
    };
}

/// A row's place in the view, compared bytewise.
macro_rules! view_key {
    () => {
        "(scope COLLATE \"C\", subject COLLATE \"C\", predicate COLLATE \"C\")"
    };
}

/// The current record of a row read with the record columns (its id after them).
pub(super) fn record_from_row(r: &Row) -> Result<MemoryRecord> {
    let scope: String = r.get(2);
    let value_bytes = bytes_at(r, "value_bytes");
    Ok(MemoryRecord {
        subject: r.get(0),
        predicate: r.get(1),
        value: value_of(r.get(3), value_bytes, &scope)?,
        scope: Scope::parse(&scope).map_err(|e| anyhow!(e))?,
        version: r.get(4),
        source: r.get(5),
        causal_seq: r.get(6),
        raw: r.get(7),
        created_at: r.get(8),
        updated_at: r.get(9),
        confirmed_at: r.get(10),
        confirm_count: r.get(11),
        value_bytes,
        raw_bytes: bytes_at(r, "raw_bytes"),
    })
}

/// The size of a previewed value or words in the column named `name`: `None` where the row was
/// read whole (no such column) or the text was short.
fn bytes_at(r: &Row, name: &str) -> Option<i64> {
    let i = r.columns().iter().position(|c| c.name() == name)?;
    r.get(i)
}

/// A stored value's text parsed, or a preview's first characters decoded where `bytes` says
/// the row holds only those.
pub(super) fn value_of(text: &str, bytes: Option<i64>, at: &str) -> Result<serde_json::Value> {
    match bytes {
        Some(_) => Ok(crate::store::preview::preview_value(text)),
        None => parse_value(text, at),
    }
}

fn browse_from_row(r: &Row) -> Result<BrowseRecord> {
    Ok(BrowseRecord {
        record: record_from_row(r)?,
        id: r.get(12),
    })
}

/// A history event of a row read with the event columns.
pub(super) fn event_from_row(r: &Row) -> Result<HistoryEvent> {
    let value_bytes = bytes_at(r, "value_bytes");
    let json = |i: usize, bytes: Option<i64>| -> Result<Option<serde_json::Value>> {
        r.get::<_, Option<&str>>(i)
            .map(|text| value_of(text, bytes, "history"))
            .transpose()
    };
    Ok(HistoryEvent {
        id: r.get(0),
        event: r.get(1),
        subject: r.get(2),
        predicate: r.get(3),
        scope: r.get(4),
        version: r.get(5),
        value: json(6, value_bytes)?,
        raw: r.get(7),
        source: r.get(8),
        causal_seq: r.get(9),
        at: r.get(10),
        detail: json(11, None)?,
        valid_until: None,
        value_bytes,
        raw_bytes: bytes_at(r, "raw_bytes"),
    })
}

/// A logged read of a row read with the read-log columns.
pub(super) fn read_from_row(r: &Row) -> ReadRecord {
    ReadRecord {
        id: r.get(0),
        at: r.get(1),
        agent: r.get(2),
        subject: r.get(3),
        predicate: r.get(4),
        repo: r.get(5),
        task: r.get(6),
        scope: r.get(7),
        version: r.get(8),
        shadowed: r
            .get::<_, Option<String>>(9)
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default(),
        note: r.get(10),
    }
}

/// Calls `each` for every row of a filter query (id, scope, subject, predicate, value); returns
/// how many there were and, when `keyed`, the key of the last one.
fn each_candidate(
    rows: &[Row],
    keyed: bool,
    each: &mut dyn FnMut(&FilterCandidate<'_>),
) -> (usize, Option<BrowseKey>) {
    let mut unescaped = String::new();
    for r in rows {
        each(&FilterCandidate {
            id: r.get(0),
            scope: r.get(1),
            subject: r.get(2),
            predicate: r.get(3),
            value: json_text(r.get(4), &mut unescaped),
        });
    }
    let last = rows.last().filter(|_| keyed).map(|r| BrowseKey {
        scope: r.get(1),
        subject: r.get(2),
        predicate: r.get(3),
    });
    (rows.len(), last)
}

/// Rows the filter's walk of the view fetches at a time (a newer query is noticed between).
const WALK_FETCH: i32 = 16_384;

impl PgStore {
    /// Up to `limit` records strictly after `from` (`after`), else before it nearest first.
    pub fn browse_beyond(
        &mut self,
        bound: &BrowseBound,
        limit: usize,
        after: bool,
    ) -> Result<Vec<BrowseRecord>> {
        // Unused parameters stay bound, so every statement takes the same four.
        let (sql, a, b, c): (&'static str, &str, &str, &str) = match (bound, after) {
            (BrowseBound::End, true) | (BrowseBound::Start, false) => return Ok(Vec::new()),
            (BrowseBound::Start, true) => (
                browse_sql!("$1::text IS NOT NULL AND $2::text IS NOT NULL AND $3::text IS NOT NULL", ""),
                "",
                "",
                "",
            ),
            (BrowseBound::End, false) => (
                browse_sql!("$1::text IS NOT NULL AND $2::text IS NOT NULL AND $3::text IS NOT NULL", " DESC"),
                "",
                "",
                "",
            ),
            (BrowseBound::Key(k), true) => (
                browse_sql!("(scope COLLATE \"C\", subject COLLATE \"C\", predicate COLLATE \"C\") > ($1, $2, $3)", ""),
                &k.scope,
                &k.subject,
                &k.predicate,
            ),
            (BrowseBound::Key(k), false) => (
                browse_sql!("(scope COLLATE \"C\", subject COLLATE \"C\", predicate COLLATE \"C\") < ($1, $2, $3)", " DESC"),
                &k.scope,
                &k.subject,
                &k.predicate,
            ),
            (BrowseBound::ScopeStart(s), true) => (
                browse_sql!("scope COLLATE \"C\" >= $1 AND $2::text IS NOT NULL AND $3::text IS NOT NULL", ""),
                s,
                "",
                "",
            ),
            (BrowseBound::ScopeStart(s), false) => (
                browse_sql!("scope COLLATE \"C\" < $1 AND $2::text IS NOT NULL AND $3::text IS NOT NULL", " DESC"),
                s,
                "",
                "",
            ),
            (BrowseBound::ScopeEnd(s), true) => (
                browse_sql!("scope COLLATE \"C\" > $1 AND $2::text IS NOT NULL AND $3::text IS NOT NULL", ""),
                s,
                "",
                "",
            ),
            (BrowseBound::ScopeEnd(s), false) => (
                browse_sql!("scope COLLATE \"C\" <= $1 AND $2::text IS NOT NULL AND $3::text IS NOT NULL", " DESC"),
                s,
                "",
                "",
            ),
        };
        let limit = limit as i64;
        self.read(|t| {
            t.all(sql, &[&a, &b, &c, &limit])?
                .iter()
                .map(browse_from_row)
                .collect()
        })
    }

    /// The records with these ids that still exist, in view order.
    pub fn browse_by_ids(&mut self, ids: &[i64]) -> Result<Vec<BrowseRecord>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.read(|t| {
            t.all(
                concat!(
                    "SELECT ",
                    record_preview_columns!(),
                    " FROM memories WHERE id = ANY($1)",
                    view_order!("")
                ),
                &[&ids],
            )?
            .iter()
            .map(browse_from_row)
            .collect()
        })
    }

    /// Live records per scope, in view order.
    pub fn scope_counts(&mut self) -> Result<Vec<(String, i64)>> {
        self.read(|t| {
            Ok(t.all(
                "SELECT scope, count(*) FROM memories GROUP BY scope ORDER BY scope COLLATE \"C\"",
                &[],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        })
    }

    /// The header's figures, in one snapshot.
    pub fn counts(&mut self) -> Result<StoreCounts> {
        self.read(|t| {
            let r = t.one(
                "SELECT (SELECT count(*) FROM memories),
                        (SELECT count(DISTINCT scope) FROM memories),
                        (SELECT count(*) FROM pending WHERE status = 'open'),
                        (SELECT count(*) FROM tombstones)",
                &[],
            )?;
            Ok(StoreCounts {
                memories: r.get(0),
                scopes: r.get(1),
                pending: r.get(2),
                tombstones: r.get(3),
            })
        })
    }

    /// One chunk of the filter scan in view order (as `Store::filter_scan`).
    pub fn filter_scan(
        &mut self,
        after: Option<&BrowseKey>,
        limit: usize,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<(usize, Option<BrowseKey>)> {
        // No scope is empty (a CHECK), so ('', '', '') sorts before every record.
        let (a, b, c) = match after {
            Some(k) => (k.scope.as_str(), k.subject.as_str(), k.predicate.as_str()),
            None => ("", "", ""),
        };
        let limit = limit as i64;
        let rows = self.read(|t| {
            t.all(
                concat!(
                    "SELECT id, scope, subject, predicate, value FROM memories WHERE ",
                    view_key!(),
                    " > ($1, $2, $3)",
                    view_order!(""),
                    " LIMIT $4"
                ),
                &[&a, &b, &c, &limit],
            )
        })?;
        Ok(each_candidate(&rows, true, each))
    }

    /// The filter candidates among `ids` that still live, in view order.
    pub fn filter_candidates_by_ids(
        &mut self,
        ids: &[i64],
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize> {
        if ids.is_empty() {
            return Ok(0);
        }
        let rows = self.read(|t| {
            t.all(
                concat!(
                    "SELECT id, scope, subject, predicate, value FROM memories WHERE id = ANY($1)",
                    view_order!("")
                ),
                &[&ids],
            )
        })?;
        Ok(each_candidate(&rows, false, each).0)
    }

    /// The lowest and highest record id.
    pub fn record_id_span(&mut self) -> Result<Option<(i64, i64)>> {
        self.read(|t| {
            let r = t.one("SELECT min(id), max(id) FROM memories", &[])?;
            Ok(r.get::<_, Option<i64>>(0).zip(r.get::<_, Option<i64>>(1)))
        })
    }

    /// The filter candidates with `from <= id < to`, in id order.
    pub fn filter_scan_ids(
        &mut self,
        from: i64,
        to: i64,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize> {
        let rows = self.read(|t| {
            t.all(
                "SELECT id, scope, subject, predicate, value FROM memories WHERE id >= $1 AND id < $2",
                &[&from, &to],
            )
        })?;
        Ok(each_candidate(&rows, false, each).0)
    }

    /// The ids and scopes of the records after `after` in view order, fetched a portion at a
    /// time (a cursor, not the whole view in memory), until `each` returns false.
    pub fn filter_walk(
        &mut self,
        after: Option<&BrowseKey>,
        each: &mut dyn FnMut(i64, &str) -> bool,
    ) -> Result<usize> {
        let (a, b, c) = match after {
            Some(k) => (k.scope.as_str(), k.subject.as_str(), k.predicate.as_str()),
            None => ("", "", ""),
        };
        // A portal needs a transaction; it writes nothing, so it is rolled back.
        self.dry_run(|t| {
            let s = t.statement(concat!(
                "SELECT id, scope FROM memories WHERE ",
                view_key!(),
                " > ($1, $2, $3)",
                view_order!("")
            ))?;
            let portal = t.txn()?.bind(&s, &[&a, &b, &c])?;
            let mut n = 0;
            loop {
                let rows = t.txn()?.query_portal(&portal, WALK_FETCH)?;
                for r in &rows {
                    n += 1;
                    if !each(r.get(0), r.get(1)) {
                        return Ok(n);
                    }
                }
                if rows.len() < WALK_FETCH as usize {
                    return Ok(n);
                }
            }
        })
    }

    /// One identity's current record (its stored spellings found first), whole: what `c`
    /// copies and a dialog states (README, "The terminal UI"), as SQLite's `get` reads it.
    pub fn get(&mut self, id: &Identity) -> Result<Option<MemoryRecord>> {
        self.read(|t| {
            let subject = spelled(t, SUBJECT, &id.subject, false)?;
            let predicate = canonical_predicate(t, &id.predicate)?;
            let scope = spelled_scope(t, &id.scope, false)?;
            let id = Identity {
                subject,
                predicate,
                scope,
            };
            super::store::identity_row(
                t,
                "memories",
                concat!(
                    "SELECT ",
                    record_columns!(),
                    " FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3"
                ),
                &id,
            )?
            .as_ref()
            .map(record_from_row)
            .transpose()
        })
    }

    /// Every live scope of a subject and (canonical) predicate, in view order, as previews
    /// (found as `live_scopes_sql!` finds them).
    pub fn live_scopes_of(&mut self, subject: &str, predicate: &str) -> Result<Vec<MemoryRecord>> {
        self.read(|t| {
            t.all(
                live_scopes_sql!(record_preview_columns!()),
                &[&subject, &predicate],
            )?
            .iter()
            .map(record_from_row)
            .collect()
        })
    }

    /// The events of one identity's timeline (as stored), counted: all, or those before the
    /// event `before`.
    pub fn history_count(&mut self, id: &Identity, before: Option<i64>) -> Result<usize> {
        let scope = id.scope.to_string();
        let before = before.unwrap_or(i64::MAX);
        self.read(|t| {
            let n: i64 = t
                .one(
                    "SELECT count(*) FROM history
                     WHERE subject = $1 AND predicate = $2 AND scope = $3 AND id < $4",
                    &[&id.subject, &id.predicate, &scope, &before],
                )?
                .get(0);
            Ok(n as usize)
        })
    }

    /// A page of one identity's timeline (as stored), oldest first, as on SQLite
    /// (`Store::history_page`): previews, and each `set` event's `valid_until` filled.
    pub fn history_page(
        &mut self,
        id: &Identity,
        from: HistoryFrom,
        limit: usize,
    ) -> Result<Vec<HistoryEvent>> {
        const AFTER: &str = concat!(
            "SELECT ",
            event_preview_columns!(),
            " FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3 AND id > $4
             ORDER BY id LIMIT $5"
        );
        const FROM: &str = concat!(
            "SELECT ",
            event_preview_columns!(),
            " FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3 AND id >= $4
             ORDER BY id LIMIT $5"
        );
        const BEFORE: &str = concat!(
            "SELECT ",
            event_preview_columns!(),
            " FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3 AND id < $4
             ORDER BY id DESC LIMIT $5"
        );
        let scope = id.scope.to_string();
        self.read(|t| {
            let pivot = match from {
                HistoryFrom::Version(v) => Some(
                    t.one(
                        "SELECT min(id) FROM history WHERE subject = $1 AND predicate = $2
                         AND scope = $3 AND event = 'set' AND version = $4",
                        &[&id.subject, &id.predicate, &scope, &v],
                    )?
                    .get::<_, Option<i64>>(0),
                ),
                _ => None,
            };
            let from = match (from, pivot) {
                (HistoryFrom::Version(_), Some(Some(at))) => HistoryFrom::Around(at),
                (HistoryFrom::Version(_), _) => HistoryFrom::Start,
                (from, _) => from,
            };
            let mut page = |sql: &'static str, at: i64, limit: usize| -> Result<Vec<HistoryEvent>> {
                let limit = limit as i64;
                t.all(sql, &[&id.subject, &id.predicate, &scope, &at, &limit])?
                    .iter()
                    .map(event_from_row)
                    .collect()
            };
            let rev = |mut events: Vec<HistoryEvent>| {
                events.reverse();
                events
            };
            let mut events = match from {
                HistoryFrom::Start => page(AFTER, i64::MIN, limit)?,
                HistoryFrom::After(at) => page(AFTER, at, limit)?,
                HistoryFrom::End => rev(page(BEFORE, i64::MAX, limit)?),
                HistoryFrom::Before(at) => rev(page(BEFORE, at, limit)?),
                HistoryFrom::Around(at) => {
                    let mut events = rev(page(BEFORE, at, limit / 2)?);
                    let rest = limit - events.len();
                    events.extend(page(FROM, at, rest)?);
                    events
                }
                HistoryFrom::Version(_) => unreachable!("a version is turned into its event above"),
            };
            mark_validity(&mut events);
            // A `set` still open at the page's end ended at the next event that ended it.
            if let Some(open) = events
                .iter()
                .rposition(|e| e.event == "set")
                .filter(|&i| events[i].valid_until.is_none())
            {
                let last = events.last().map_or(0, |e| e.id);
                events[open].valid_until = t
                    .opt(
                        concat!(
                            "SELECT ",
                            utc!("at"),
                            " FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3
                             AND id > $4 AND event IN ('set', 'deleted', 'removed') ORDER BY id LIMIT 1"
                        ),
                        &[&id.subject, &id.predicate, &scope, &last],
                    )?
                    .map(|r| r.get(0));
            }
            Ok(events)
        })
    }

    /// One event whole, if it is still logged.
    pub fn history_event(&mut self, event_id: i64) -> Result<Option<HistoryEvent>> {
        self.read(|t| {
            t.opt(
                concat!(
                    "SELECT h.id, h.event, h.subject, h.predicate, h.scope, h.version, h.value, h.raw,
                            h.source, h.causal_seq, ",
                    utc!("h.at"),
                    ", h.detail, CASE WHEN h.event = 'set' THEN (SELECT ",
                    utc!("n.at"),
                    " FROM history n
                       WHERE n.subject = h.subject AND n.predicate = h.predicate
                         AND n.scope = h.scope AND n.id > h.id
                         AND n.event IN ('set', 'deleted', 'removed')
                       ORDER BY n.id LIMIT 1) END
                     FROM history h WHERE h.id = $1"
                ),
                &[&event_id],
            )?
            .as_ref()
            .map(|r| {
                let mut e = event_from_row(r)?;
                e.valid_until = r.get(12);
                Ok(e)
            })
            .transpose()
        })
    }

    /// The newest `limit` logged reads since `since`, newest first, whose agent, subject,
    /// predicate, repo or task contain every one of `words` (case-insensitive).
    pub fn read_log(
        &mut self,
        words: &[String],
        since: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<ReadRecord>> {
        let words: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        let since = since.map(std::time::SystemTime::from);
        let limit = limit as i64;
        self.read(|t| {
            Ok(t.all(
                concat!(
                    "SELECT id, ",
                    utc!("at"),
                    ", agent, subject, predicate, repo, task, scope, version, shadowed, note
                     FROM reads
                     WHERE ($1::timestamptz IS NULL OR at >= $1)
                       AND NOT EXISTS (SELECT 1 FROM unnest($2::text[]) w WHERE strpos(lower(
                             coalesce(agent, '') || ' ' || subject || ' ' || predicate || ' ' ||
                             coalesce(repo, '') || ' ' || coalesce(task, '')), w) = 0)
                     ORDER BY at DESC, id DESC LIMIT $3"
                ),
                &[&since, &words, &limit],
            )?
            .iter()
            .map(read_from_row)
            .collect())
        })
    }

    /// One logged read by its id, as the read log holds it now; `None` once it is gone.
    pub fn read_record(&mut self, id: i64) -> Result<Option<ReadRecord>> {
        self.read(|t| {
            Ok(t.opt(
                concat!(
                    "SELECT id, ",
                    utc!("at"),
                    ", agent, subject, predicate, repo, task, scope, version, shadowed, note
                     FROM reads WHERE id = $1"
                ),
                &[&id],
            )?
            .as_ref()
            .map(read_from_row))
        })
    }

    /// Every (scope, predicate) a source's words wrote for a subject, first written first.
    pub fn scopes_written_by(
        &mut self,
        subject: &str,
        source: &str,
    ) -> Result<Vec<(String, String)>> {
        self.read(|t| {
            Ok(t.all(
                "SELECT scope, predicate FROM history
                 WHERE subject = $1 AND source = $2 AND event = 'set'
                 GROUP BY scope, predicate ORDER BY min(id)",
                &[&subject, &source],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        })
    }

    /// Every tombstone, the newest first.
    pub fn tombstones(&mut self) -> Result<Vec<Tombstone>> {
        self.read(|t| {
            t.all(
                concat!(
                    "SELECT subject, predicate, scope, version, reason, ",
                    utc!("deleted_at"),
                    " FROM tombstones ORDER BY deleted_at DESC, subject COLLATE \"C\",
                      predicate COLLATE \"C\", scope COLLATE \"C\""
                ),
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(Tombstone {
                    subject: r.get(0),
                    predicate: r.get(1),
                    scope: Scope::parse(r.get(2)).map_err(|e| anyhow!(e))?,
                    version: r.get(3),
                    reason: r.get(4),
                    deleted_at: r.get(5),
                })
            })
            .collect::<Result<_>>()
        })
    }

    /// Each candidate scope of pending item `pending_id` with what resolving it there would do
    /// now: the identity probed and the core's `decide_write` asked, as `resolve_pending` will.
    pub fn preview_pending(&mut self, pending_id: i64) -> Result<Vec<(Scope, WriteDecision)>> {
        self.dry_run(|t| {
            let item = super::store::pending_item_in(t, pending_id)?;
            let predicate = canonical_predicate(t, &item.predicate)?;
            let seq = match resolution_seq(&item) {
                Some(seq) => seq,
                None => super::store::clock_now(t)? + 1,
            };
            let mut out = Vec::with_capacity(item.candidates.len());
            for scope in &item.candidates {
                let id = Identity {
                    subject: item.subject.clone(),
                    predicate: predicate.clone(),
                    scope: spelled_scope(t, scope, false)?,
                };
                let probe = write_probe(t, &id)?;
                out.push((scope.clone(), decide_write(&probe, &item.value, seq)));
            }
            Ok(out)
        })
    }

    /// A number that moves when a change the UI shows was committed, for a connection that
    /// does not listen (a worker's, a standby's): the newest ids of the logs and the open
    /// queue's size, each one index lookup.
    pub fn change_mark(&mut self) -> Result<i64> {
        self.read(|t| {
            let r = t.one(CHANGE_MARK, &[])?;
            Ok(mark_of([r.get(0), r.get(1), r.get(2), r.get(3)]))
        })
    }

    /// [`PgStore::change_mark`] for a poll, which never waits behind another session's lock
    /// (README, "Running on PostgreSQL": the UI keeps handling its keys): `None` when one holds
    /// a table it reads for more than a moment — the poll looks again next time. One round
    /// trip: the lock timeout is lowered and put back around the statement in one implicit
    /// transaction, which a failure rolls back whole, the lowering with it.
    pub fn change_mark_briefly(&mut self) -> Result<Option<i64>> {
        let batch = concat!(
            "SELECT set_config('memscope.lock_timeout', current_setting('lock_timeout'), false);
             SET lock_timeout = '50ms';
             ",
            change_mark_sql!(),
            ";
             SELECT set_config('lock_timeout', current_setting('memscope.lock_timeout'), false)"
        );
        let messages = match self.connection()?.simple_query(batch) {
            Ok(messages) => messages,
            Err(e) => {
                let e = anyhow::Error::new(e);
                if lock_not_available(&e) {
                    return Ok(None);
                }
                return Err(self.failed(e, Call::Read));
            }
        };
        let row = messages.iter().find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) if r.len() == 4 => Some(r),
            _ => None,
        });
        let Some(row) = row else {
            return Err(anyhow!(
                "PostgreSQL answered the change mark's statement with no row"
            ));
        };
        let mut parts = [0i64; 4];
        for (i, part) in parts.iter_mut().enumerate() {
            *part = row.get(i).and_then(|v| v.parse().ok()).ok_or_else(|| {
                anyhow!("PostgreSQL answered the change mark with {:?}", row.get(i))
            })?;
        }
        Ok(Some(mark_of(parts)))
    }
}

/// The change mark's statement, prepared on a connection's second run.
const CHANGE_MARK: &str = change_mark_sql!();

/// The change mark's parts folded into one number.
fn mark_of(parts: [i64; 4]) -> i64 {
    parts
        .iter()
        .fold(17i64, |h, p| h.wrapping_mul(1_000_003).wrapping_add(*p))
}

#[cfg(test)]
mod tests {
    use crate::store::PREVIEW_BYTES;

    #[test]
    fn previews_cut_where_sqlite_cuts() {
        for sql in [preview!("value"), preview_bytes!("raw", "raw_bytes")] {
            assert!(sql.contains(&format!("> {PREVIEW_BYTES} THEN")), "{sql}");
        }
    }
}
