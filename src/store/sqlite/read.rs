//! Reads: the current view, history, precedence resolution, the pending queue, tombstones.

use super::rows::{
    current, event_from_row, mark_validity, memory_from_row, parse_scope, pending_from_row,
    pending_item, MEMORY_COLUMNS, PENDING_COLUMNS,
};
use super::spellings;
use super::Store;
use crate::model::{
    HistoryEvent, Identity, MemoryRecord, PendingItem, Resolution, Scope, Tombstone,
};
use anyhow::Result;
use rusqlite::params;

/// Filters for `list`; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub scope: Option<Scope>,
    pub subject: Option<String>,
    pub predicate: Option<String>,
}

impl Store {
    /// The current view, ordered by scope group (global, repo:…, task:…), then subject and
    /// predicate.
    pub fn list(&self, filter: &ListFilter) -> Result<Vec<MemoryRecord>> {
        let predicate = match &filter.predicate {
            Some(p) => Some(self.canonical_predicate(p)?),
            None => None,
        };
        // Only the filters given, so SQLite can use the scope-first identity index; ordering
        // by scope text is already the group order (global < repo:… < task:…).
        let mut clauses: Vec<&str> = Vec::new();
        let mut values: Vec<String> = Vec::new();
        let scope = match &filter.scope {
            Some(s) => Some(spellings::scope(&self.conn, s, false)?.to_string()),
            None => None,
        };
        let subject = match &filter.subject {
            Some(s) => Some(spellings::filter_subject(&self.conn, s)?),
            None => None,
        };
        for (clause, value) in [
            ("scope = ?", scope),
            ("subject = ?", subject),
            ("predicate = ?", predicate),
        ] {
            if let Some(v) = value {
                clauses.push(clause);
                values.push(v);
            }
        }
        let filter_sql = if clauses.is_empty() {
            "1".to_string()
        } else {
            clauses.join(" AND ")
        };
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE {filter_sql} ORDER BY scope, subject, predicate"
        ))?;
        let rows = stmt.query_map(rusqlite::params_from_iter(values.iter()), memory_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn get(&self, id: &Identity) -> Result<Option<MemoryRecord>> {
        current(&self.conn, &spellings::find_identity(&self.conn, id)?)
    }

    /// The event log of a subject and predicate (one scope or all), oldest first.
    pub fn history(
        &self,
        subject: &str,
        predicate: &str,
        scope: Option<&Scope>,
    ) -> Result<Vec<HistoryEvent>> {
        let predicate = self.canonical_predicate(predicate)?;
        let subject = spellings::filter_subject(&self.conn, subject)?;
        let scope = match scope {
            Some(s) => Some(spellings::scope(&self.conn, s, false)?),
            None => None,
        };
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, event, subject, predicate, scope, version, value, raw, source, causal_seq, at, detail
             FROM history WHERE subject = ?1 AND predicate = ?2 AND (?3 IS NULL OR scope = ?3)
             ORDER BY id",
        )?;
        let rows = stmt.query_map(
            params![subject, predicate, scope.map(|s| s.to_string())],
            event_from_row,
        )?;
        let mut events: Vec<HistoryEvent> = rows.collect::<Result<_, _>>()?;
        mark_validity(&mut events);
        Ok(events)
    }

    /// Precedence resolution (task > repo > global) with every scope it considered.
    pub fn resolve(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution> {
        super::incident::resolve_on(&self.conn, subject, predicate, repo, task, MEMORY_COLUMNS)
    }

    /// Open pending items, oldest first (`all` includes resolved and rejected ones).
    pub fn pending(&self, all: bool) -> Result<Vec<PendingItem>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {PENDING_COLUMNS} FROM pending WHERE (?1 OR status = 'open') ORDER BY id"
        ))?;
        let rows = stmt.query_map([all], pending_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The open pending items of one identity's subject and predicate (as stored), oldest first:
    /// what MCP's `recall` names beside its answer, by the open queue's index.
    pub fn open_pending_of(&self, subject: &str, predicate: &str) -> Result<Vec<PendingItem>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {PENDING_COLUMNS} FROM pending
             WHERE subject = ?1 AND predicate = ?2 AND status = 'open' ORDER BY id"
        ))?;
        let rows = stmt.query_map([subject, predicate], pending_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn pending_item(&self, id: i64) -> Result<Option<PendingItem>> {
        pending_item(&self.conn, id)
    }

    pub fn tombstones(&self) -> Result<Vec<Tombstone>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT subject, predicate, scope, version, reason, deleted_at FROM tombstones ORDER BY deleted_at DESC, subject, predicate, scope",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Tombstone {
                subject: r.get(0)?,
                predicate: r.get(1)?,
                scope: parse_scope(&r.get::<_, String>(2)?)?,
                version: r.get(3)?,
                reason: r.get(4)?,
                deleted_at: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Live identities, distinct scopes, open pending items, tombstones: the UI header.
    pub fn counts(&self) -> Result<StoreCounts> {
        Ok(self.conn.query_row(
            "SELECT (SELECT count(*) FROM memories),
                    (SELECT count(DISTINCT scope) FROM memories),
                    (SELECT count(*) FROM pending WHERE status = 'open'),
                    (SELECT count(*) FROM tombstones)",
            [],
            |r| {
                Ok(StoreCounts {
                    memories: r.get(0)?,
                    scopes: r.get(1)?,
                    pending: r.get(2)?,
                    tombstones: r.get(3)?,
                })
            },
        )?)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreCounts {
    pub memories: i64,
    pub scopes: i64,
    pub pending: i64,
    pub tombstones: i64,
}
