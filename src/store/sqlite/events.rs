//! The history log's events (docs/SCHEMA.md, "history"): every event a store operation logs is
//! named by an [`EventKind`] and built with [`Event`], so a call says which facts it records
//! instead of passing a row of positional `None`s.

use crate::model::Identity;
pub(crate) use crate::store::events::EventKind;
use anyhow::Result;
use rusqlite::{params, Connection};
use serde_json::Value;

/// One history row, built fact by fact, then logged. (`set`, the hot event of every new
/// version, has its own prepared statement: `TxState::log_set`.)
#[must_use = "an event is only recorded by `log`"]
pub(crate) struct Event<'a> {
    kind: EventKind,
    id: &'a Identity,
    version: Option<i64>,
    value: Option<&'a str>,
    raw: Option<&'a str>,
    source: Option<&'a str>,
    causal_seq: Option<i64>,
    detail: Option<&'a Value>,
    clock: Option<i64>,
}

impl<'a> Event<'a> {
    pub(crate) fn new(kind: EventKind, id: &'a Identity) -> Self {
        Event {
            kind,
            id,
            version: None,
            value: None,
            raw: None,
            source: None,
            causal_seq: None,
            detail: None,
            clock: None,
        }
    }

    /// The version the event concerns (see docs/SCHEMA.md for each event's meaning).
    pub(crate) fn version(mut self, version: Option<i64>) -> Self {
        self.version = version;
        self
    }

    /// The content of the write it records: the value's JSON text and the user's words.
    pub(crate) fn content(mut self, value: Option<&'a str>, raw: Option<&'a str>) -> Self {
        self.value = value;
        self.raw = raw;
        self
    }

    /// The write's provenance and causal number.
    pub(crate) fn provenance(mut self, source: Option<&'a str>, causal_seq: Option<i64>) -> Self {
        self.source = source;
        self.causal_seq = causal_seq;
        self
    }

    pub(crate) fn detail(mut self, detail: &'a Value) -> Self {
        self.detail = Some(detail);
        self
    }

    /// The database's causal clock when logged (`SeqBatch::stamp`), if the transaction read it.
    pub(crate) fn clock(mut self, clock: Option<i64>) -> Self {
        self.clock = clock;
        self
    }

    pub(crate) fn log(self, conn: &Connection, at: &str) -> Result<()> {
        let detail = self.detail.map(|d| d.to_string());
        conn.prepare_cached(
            "INSERT OR FAIL INTO history (event, subject, predicate, scope, version, value, raw, source, causal_seq, at, detail, clock)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )?
        .execute(params![
            self.kind.as_str(),
            self.id.subject,
            self.id.predicate,
            self.id.scope.to_string(),
            self.version,
            self.value,
            self.raw,
            self.source,
            self.causal_seq,
            at,
            detail,
            self.clock
        ])?;
        Ok(())
    }
}
