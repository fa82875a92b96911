//! Queries the terminal UI needs over large databases (keyset paging, per-scope counts, the
//! filter scan). Reads only, and every statement is finished before a call returns, so no read
//! transaction outlives a call (an idle reader would block the purge's WAL truncation).
//!
//! The view's order is `scope, subject, predicate` in byte order. Because a scope is `global`,
//! `repo:…` or `task:…` (the schema's CHECK), byte order already puts the global group first,
//! then every repo, then every task — and the `memories_by_scope` index serves it directly.

use super::rows::{
    event_from_row, event_preview_columns, identity_row, mark_validity, memory_from_row,
    memory_preview_columns,
};
use super::{format_time, Store};
use crate::model::{
    HistoryEvent, Identity, MemoryRecord, ReadRecord, Resolution, Scope, Tombstone,
};
use crate::store::ui::json_text;
use anyhow::{anyhow, Result};
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension};

/// Where a page of a timeline starts (`Store::history_page`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryFrom {
    /// The oldest events.
    Start,
    /// The newest events.
    End,
    /// The events after the event with this id.
    After(i64),
    /// The events before the event with this id.
    Before(i64),
    /// The event with this id in the middle of the page (or the nearest after it).
    Around(i64),
    /// The `set` event of this version in the middle (from the start when it is not logged).
    Version(i64),
}

fn rev(mut events: Vec<HistoryEvent>) -> Vec<HistoryEvent> {
    events.reverse();
    events
}

/// A record's place in the current view's order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrowseKey {
    pub scope: String,
    pub subject: String,
    pub predicate: String,
}

impl BrowseKey {
    pub fn of(record: &MemoryRecord) -> BrowseKey {
        BrowseKey {
            scope: record.scope.to_string(),
            subject: record.subject.clone(),
            predicate: record.predicate.clone(),
        }
    }

    pub fn identity(&self) -> Result<Identity> {
        Ok(Identity {
            subject: self.subject.clone(),
            predicate: self.predicate.clone(),
            scope: Scope::parse(&self.scope).map_err(|e| anyhow!(e))?,
        })
    }
}

/// A position between records of the current view, for keyset paging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrowseBound {
    /// Before every record.
    Start,
    /// After every record.
    End,
    /// At a record (the record itself is excluded in both directions).
    Key(BrowseKey),
    /// Just before the first record of a scope.
    ScopeStart(String),
    /// Just after the last record of a scope.
    ScopeEnd(String),
}

/// A current record with its row id (stable while the identity lives; the filter keeps ids).
#[derive(Debug, Clone, PartialEq)]
pub struct BrowseRecord {
    pub id: i64,
    pub record: MemoryRecord,
}

/// What the fuzzy filter scores, borrowed from the current row: the searchable text of one
/// record, the value as display text. Borrowed so that a scan of a million rows allocates
/// nothing per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterCandidate<'a> {
    pub id: i64,
    pub scope: &'a str,
    pub subject: &'a str,
    pub predicate: &'a str,
    pub value: &'a str,
}

fn browse_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BrowseRecord> {
    Ok(BrowseRecord {
        record: memory_from_row(r)?,
        id: r.get("id")?,
    })
}

/// Calls `each` for every row of a filter query; returns how many rows there were and, when
/// `keyed`, the key of the last one.
fn each_candidate(
    mut rows: rusqlite::Rows<'_>,
    keyed: bool,
    each: &mut dyn FnMut(&FilterCandidate<'_>),
) -> Result<(usize, Option<BrowseKey>)> {
    let mut n = 0;
    let mut last: Option<BrowseKey> = None;
    let mut unescaped = String::new();
    while let Some(r) = rows.next()? {
        let text = |i: usize| -> Result<&str> { Ok(r.get_ref(i)?.as_str()?) };
        let c = FilterCandidate {
            id: r.get(0)?,
            scope: text(1)?,
            subject: text(2)?,
            predicate: text(3)?,
            value: json_text(text(4)?, &mut unescaped),
        };
        each(&c);
        n += 1;
        if !keyed {
            continue;
        }
        let key = last.get_or_insert_with(|| BrowseKey {
            scope: String::new(),
            subject: String::new(),
            predicate: String::new(),
        });
        for (to, from) in [
            (&mut key.scope, c.scope),
            (&mut key.subject, c.subject),
            (&mut key.predicate, c.predicate),
        ] {
            to.clear();
            to.push_str(from);
        }
    }
    Ok((n, last))
}

impl Store {
    /// Up to `limit` records strictly after `from`, in view order (here and in the other
    /// `browse_` reads, a long value or words are a preview: `PREVIEW_BYTES`).
    pub fn browse_after(&self, from: &BrowseBound, limit: usize) -> Result<Vec<BrowseRecord>> {
        self.browse_beyond(from, limit, true)
    }

    /// Up to `limit` records strictly before `to`, nearest first (descending view order).
    pub fn browse_before(&self, to: &BrowseBound, limit: usize) -> Result<Vec<BrowseRecord>> {
        self.browse_beyond(to, limit, false)
    }

    /// Up to `limit` records beyond `bound`, nearest first: after it in view order (`after`),
    /// else before it in descending view order.
    fn browse_beyond(
        &self,
        bound: &BrowseBound,
        limit: usize,
        after: bool,
    ) -> Result<Vec<BrowseRecord>> {
        // Past the key; from a scope's start (after) or before it; past a scope's end (after)
        // or up to it; the order of the rows.
        let (past, from_start, to_end, order) = if after {
            (">", ">=", ">", "")
        } else {
            ("<", "<", "<=", " DESC")
        };
        // Unused slots of ?1..?3 stay bound; SQLite counts parameters up to the highest index.
        let (cond, a, b, c) = match bound {
            BrowseBound::End if after => return Ok(Vec::new()),
            BrowseBound::Start if !after => return Ok(Vec::new()),
            BrowseBound::Start | BrowseBound::End => ("1".to_string(), "", "", ""),
            BrowseBound::Key(k) => (
                format!("(scope, subject, predicate) {past} (?1, ?2, ?3)"),
                k.scope.as_str(),
                k.subject.as_str(),
                k.predicate.as_str(),
            ),
            BrowseBound::ScopeStart(s) => (format!("scope {from_start} ?1"), s.as_str(), "", ""),
            BrowseBound::ScopeEnd(s) => (format!("scope {to_end} ?1"), s.as_str(), "", ""),
        };
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {}, id FROM memories WHERE {cond}
             ORDER BY scope{order}, subject{order}, predicate{order} LIMIT ?4",
            memory_preview_columns()
        ))?;
        let rows = stmt.query_map(params![a, b, c, limit as i64], browse_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The records with these ids that still exist, in view order.
    pub fn browse_by_ids(&self, ids: &[i64]) -> Result<Vec<BrowseRecord>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let list = serde_json::to_string(ids)?;
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {}, id FROM memories WHERE id IN (SELECT value FROM json_each(?1))
             ORDER BY scope, subject, predicate",
            memory_preview_columns()
        ))?;
        let rows = stmt.query_map([list], browse_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Live records per scope, in view order (a full index scan: run it off the UI thread).
    pub fn scope_counts(&self) -> Result<Vec<(String, i64)>> {
        super::pairs(
            &self.conn,
            "SELECT scope, count(*) FROM memories GROUP BY scope ORDER BY scope",
        )
    }

    /// One chunk of the filter scan: calls `each` for up to `limit` records after `after` (from
    /// the start when `None`), in view order. Returns how many it saw and the last one's key.
    pub fn filter_scan(
        &self,
        after: Option<&BrowseKey>,
        limit: usize,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<(usize, Option<BrowseKey>)> {
        // No scope is empty (CHECK), so ('', '', '') sorts before every record.
        let (a, b, c) = match after {
            Some(k) => (k.scope.as_str(), k.subject.as_str(), k.predicate.as_str()),
            None => ("", "", ""),
        };
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, scope, subject, predicate, value
             FROM memories WHERE (scope, subject, predicate) > (?1, ?2, ?3)
             ORDER BY scope, subject, predicate LIMIT ?4",
        )?;
        let rows = stmt.query(params![a, b, c, limit as i64])?;
        each_candidate(rows, true, each)
    }

    /// The filter candidates among `ids` that still live, in view order (a longer query
    /// rescoring the last matches).
    pub fn filter_candidates_by_ids(
        &self,
        ids: &[i64],
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize> {
        if ids.is_empty() {
            return Ok(0);
        }
        let list = serde_json::to_string(ids)?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, scope, subject, predicate, value
             FROM memories WHERE id IN (SELECT value FROM json_each(?1))
             ORDER BY scope, subject, predicate",
        )?;
        let rows = stmt.query([list])?;
        Ok(each_candidate(rows, false, each)?.0)
    }

    /// The lowest and highest record id (None when there is no record): the span of the filter
    /// scan in table order.
    pub fn record_id_span(&self) -> Result<Option<(i64, i64)>> {
        // Two subqueries: SQLite answers a lone min() or max() from the end of the table.
        let mut stmt = self.conn.prepare_cached(
            "SELECT (SELECT min(id) FROM memories), (SELECT max(id) FROM memories)",
        )?;
        let span: (Option<i64>, Option<i64>) =
            stmt.query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(span.0.zip(span.1))
    }

    /// The filter candidates with `from <= id < to`, in table order (a sequential read of the
    /// table, much cheaper per row than view order, which looks every row up by its id).
    pub fn filter_scan_ids(
        &self,
        from: i64,
        to: i64,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, scope, subject, predicate, value FROM memories WHERE id >= ?1 AND id < ?2",
        )?;
        let rows = stmt.query(params![from, to])?;
        Ok(each_candidate(rows, false, each)?.0)
    }

    /// The ids and scopes of the records after `after` (from the start when `None`), in view
    /// order, from the view's index alone (no row is looked up), until `each` returns false.
    /// Returns how many it saw.
    pub fn filter_walk(
        &self,
        after: Option<&BrowseKey>,
        each: &mut dyn FnMut(i64, &str) -> bool,
    ) -> Result<usize> {
        // From the start without the row-value bound: SQLite tests that bound on every row,
        // which would double the cost of the walk.
        let mut stmt;
        let mut rows = match after {
            Some(k) => {
                stmt = self.conn.prepare_cached(
                    "SELECT id, scope FROM memories WHERE (scope, subject, predicate) > (?1, ?2, ?3)
                     ORDER BY scope, subject, predicate",
                )?;
                stmt.query(params![k.scope, k.subject, k.predicate])?
            }
            None => {
                stmt = self.conn.prepare_cached(
                    "SELECT id, scope FROM memories ORDER BY scope, subject, predicate",
                )?;
                stmt.query([])?
            }
        };
        let mut n = 0;
        while let Some(r) = rows.next()? {
            n += 1;
            if !each(r.get(0)?, r.get_ref(1)?.as_str()?) {
                break;
            }
        }
        Ok(n)
    }

    /// Every live scope of a subject and (canonical) predicate, in view order, long values as
    /// previews. The identity index is scope-first, so the scopes are found through the
    /// history index (every live record has its `set` event there) and then looked up point
    /// by point.
    pub fn live_scopes_of(&self, subject: &str, predicate: &str) -> Result<Vec<MemoryRecord>> {
        // The distinct scopes by one index seek each (a record with 50,000 versions has
        // 50,000 index entries, and DISTINCT would read them all).
        let mut stmt = self.conn.prepare_cached(&format!(
            "WITH RECURSIVE scopes(scope) AS (
                SELECT min(scope) FROM history WHERE subject = ?1 AND predicate = ?2
                UNION ALL
                SELECT (SELECT min(scope) FROM history
                        WHERE subject = ?1 AND predicate = ?2 AND scope > scopes.scope)
                FROM scopes WHERE scopes.scope IS NOT NULL)
             SELECT {} FROM memories WHERE subject = ?1 AND predicate = ?2 AND scope IN
                (SELECT scope FROM scopes WHERE scope IS NOT NULL)
             ORDER BY scope",
            memory_preview_columns()
        ))?;
        let rows = stmt.query_map(params![subject, predicate], memory_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How a subject and predicate resolve in a repo and task (`resolve`'s chain and winner),
    /// long values as previews: what the history pane shows.
    pub fn resolve_preview(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution> {
        let columns = memory_preview_columns();
        super::incident::resolve_on(&self.conn, subject, predicate, repo, task, &columns)
    }

    /// The events of one identity's timeline (`id` as stored), counted: all of them, or those
    /// before the event `before`.
    pub fn history_count(&self, id: &Identity, before: Option<i64>) -> Result<usize> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM history
             WHERE subject = ?1 AND predicate = ?2 AND scope = ?3 AND (?4 IS NULL OR id < ?4)",
            )?
            .query_row(
                params![id.subject, id.predicate, id.scope.to_string(), before],
                |r| r.get(0),
            )?;
        Ok(n as usize)
    }

    /// A page of one identity's timeline (`id` as stored), oldest first, at most `limit`
    /// events, long values and words as previews (`history_event` reads one whole). Each
    /// `set` event's `valid_until` is filled, from beyond the page where it ended later.
    pub fn history_page(
        &self,
        id: &Identity,
        from: HistoryFrom,
        limit: usize,
    ) -> Result<Vec<HistoryEvent>> {
        let page = |cond: &str,
                    order: &str,
                    at: Option<i64>,
                    limit: usize|
         -> Result<Vec<HistoryEvent>> {
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT {} FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3 AND {cond}
                 ORDER BY id {order} LIMIT ?5",
                event_preview_columns()
            ))?;
            let rows = stmt.query_map(
                params![
                    id.subject,
                    id.predicate,
                    id.scope.to_string(),
                    at,
                    limit as i64
                ],
                event_from_row,
            )?;
            Ok(rows.collect::<Result<_, _>>()?)
        };
        let mut events = match from {
            HistoryFrom::Start => page("?4 IS NULL", "ASC", None, limit)?,
            HistoryFrom::After(at) => page("id > ?4", "ASC", Some(at), limit)?,
            HistoryFrom::End => rev(page("?4 IS NULL", "DESC", None, limit)?),
            HistoryFrom::Before(at) => rev(page("id < ?4", "DESC", Some(at), limit)?),
            HistoryFrom::Around(at) => {
                let mut events = rev(page("id < ?4", "DESC", Some(at), limit / 2)?);
                let rest = limit - events.len();
                events.extend(page("id >= ?4", "ASC", Some(at), rest)?);
                events
            }
            HistoryFrom::Version(v) => {
                let pivot: Option<i64> = self
                    .conn
                    .prepare_cached(
                        "SELECT min(id) FROM history WHERE subject = ?1 AND predicate = ?2
                         AND scope = ?3 AND event = 'set' AND version = ?4",
                    )?
                    .query_row(
                        params![id.subject, id.predicate, id.scope.to_string(), v],
                        |r| r.get(0),
                    )?;
                let from = pivot.map_or(HistoryFrom::Start, HistoryFrom::Around);
                return self.history_page(id, from, limit);
            }
        };
        mark_validity(&mut events);
        // A `set` still open at the page's end ended at the next event that ended it.
        if let Some(open) = events
            .iter()
            .rposition(|e| e.event == "set")
            .filter(|&i| events[i].valid_until.is_none())
        {
            let last = events.last().map_or(0, |e| e.id);
            let ended: Option<String> = self
                .conn
                .prepare_cached(
                    "SELECT at FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3
                     AND id > ?4 AND event IN ('set', 'deleted', 'removed') ORDER BY id LIMIT 1",
                )?
                .query_row(
                    params![id.subject, id.predicate, id.scope.to_string(), last],
                    |r| r.get(0),
                )
                .optional()?;
            events[open].valid_until = ended;
        }
        Ok(events)
    }

    /// One event whole (the event popup, `c` in the history pane), if it is still logged; a
    /// `set` with its `valid_until`, as in a history page.
    pub fn history_event(&self, event_id: i64) -> Result<Option<HistoryEvent>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT h.id, h.event, h.subject, h.predicate, h.scope, h.version, h.value, h.raw,
                        h.source, h.causal_seq, h.at, h.detail,
                        CASE WHEN h.event = 'set' THEN
                            (SELECT n.at FROM history n
                             WHERE n.subject = h.subject AND n.predicate = h.predicate
                               AND n.scope = h.scope AND n.id > h.id
                               AND n.event IN ('set', 'deleted', 'removed')
                             ORDER BY n.id LIMIT 1) END
                 FROM history h WHERE h.id = ?1",
            )?
            .query_row([event_id], |r| {
                let mut e = event_from_row(r)?;
                e.valid_until = r.get(12)?;
                Ok(e)
            })
            .optional()?)
    }

    /// Caps this connection's page cache, in KiB: a background reader that scans the whole
    /// database needs little cache and should not hold on to much memory.
    pub fn limit_page_cache(&self, kib: i64) -> Result<()> {
        self.conn.pragma_update(None, "cache_size", -kib.abs())?;
        Ok(())
    }

    /// A handle that stops this connection's running query from another thread (a background
    /// scan that is no longer wanted).
    pub fn interrupt_handle(&self) -> rusqlite::InterruptHandle {
        self.conn.get_interrupt_handle()
    }

    /// The newest `limit` logged reads since `since`, newest first, whose agent, subject,
    /// predicate, repo or task contain every one of `words` (ASCII case-insensitive). Walks
    /// the time index from the newest read and stops at `limit`.
    pub fn read_log(
        &self,
        words: &[String],
        since: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<ReadRecord>> {
        let words: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, at, agent, subject, predicate, repo, task, scope, version, shadowed, note
             FROM reads
             WHERE (?1 IS NULL OR at >= ?1)
               AND NOT EXISTS (SELECT 1 FROM json_each(?2) w WHERE instr(lower(
                     coalesce(agent, '') || ' ' || subject || ' ' || predicate || ' ' ||
                     coalesce(repo, '') || ' ' || coalesce(task, '')), w.value) = 0)
             ORDER BY at DESC, id DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            params![
                since.map(format_time),
                serde_json::to_string(&words)?,
                limit as i64
            ],
            super::rows::read_from_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One logged read by its id, as the read log holds it now (a delete may have blanked its
    /// note since it was listed); `None` once it is gone.
    pub fn read_record(&self, id: i64) -> Result<Option<ReadRecord>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, at, agent, subject, predicate, repo, task, scope, version, shadowed, note
             FROM reads WHERE id = ?1",
        )?;
        Ok(stmt
            .query_row(params![id], super::rows::read_from_row)
            .optional()?)
    }

    /// Every (scope, predicate) that a source's words wrote for a subject, first written
    /// first: where one message of the user landed (a rescope looks here for the scope a
    /// mis-scoped value was said in).
    pub fn scopes_written_by(&self, subject: &str, source: &str) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT scope, predicate FROM history
             WHERE subject = ?1 AND source = ?2 AND event = 'set'
             GROUP BY scope, predicate ORDER BY min(id)",
        )?;
        let rows = stmt.query_map(params![subject, source], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The tombstone of one identity, if it is deleted.
    pub fn tombstone(&self, id: &Identity) -> Result<Option<Tombstone>> {
        let id = &super::spellings::find_identity(&self.conn, id)?;
        identity_row(
            &self.conn,
            "tombstones",
            "SELECT version, reason, deleted_at FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3",
            id,
            |r| {
                Ok(Tombstone {
                    subject: id.subject.clone(),
                    predicate: id.predicate.clone(),
                    scope: id.scope.clone(),
                    version: r.get(0)?,
                    reason: r.get(1)?,
                    deleted_at: r.get(2)?,
                })
            },
        )
    }
}
