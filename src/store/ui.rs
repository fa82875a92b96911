//! What the terminal UI asks of a database (docs/ARCHITECTURE.md, point 7), whichever backend
//! holds it: [`UiStore`]. The UI opens one with [`open_ui`] and never names a backend; SQLite's
//! [`Store`] and PostgreSQL's `postgres::PgUi` each answer every call with their own queries
//! over the same rules. Reads take `&self` (the UI's panes read while it draws); the curation
//! writes take `&mut self` and go through the backend's one write path.

use super::{
    BrowseBound, BrowseKey, BrowseRecord, CheckReport, FilterCandidate, HistoryFrom, OpenMode,
    ReadFilter, Store, StoreCounts, Suspect,
};
use crate::model::{
    DeletePreview, DeleteReport, DeleteTarget, HistoryEvent, Identity, MemoryRecord, PendingItem,
    ReadRecord, Resolution, Scope, Tombstone, TombstoneRef, WriteOutcome,
};
use crate::store::decide::WriteDecision;
use anyhow::Result;
use chrono::{DateTime, Utc};
use std::path::Path;
use std::sync::Arc;

/// Opens another connection to the same database (a worker's own).
pub type Reopen = Arc<dyn Fn() -> Result<Box<dyn UiStore>> + Send + Sync>;

/// Stops the running query of one connection from another thread.
pub type Interrupt = Box<dyn Fn() + Send + Sync>;

/// The terminal UI's reads and curation writes, one backend's answers (module comment).
pub trait UiStore: Send {
    /// What the header shows for the database (a path; an address without its password).
    fn label(&self) -> String;
    fn is_read_only(&self) -> bool;
    /// How a worker opens its own connection to this database.
    fn reopen(&self) -> Reopen;
    /// How another thread stops this connection's running query.
    fn interrupt(&self) -> Interrupt;
    /// A number that moves when another connection committed a change the UI shows (SQLite's
    /// `data_version`; PostgreSQL's change notices). Never a transaction left open.
    fn data_version(&self) -> Result<i64>;
    /// Starts a turn of calls — a key's, a poll's (README, "Waiting for locks"). Once a call
    /// waited the whole lock wait for another session's lock and gave up, the connection waits
    /// for no lock (the next calls of the same key fail at once instead of each waiting again)
    /// until a turn finds, without waiting, that the lock is gone. True when that happened now:
    /// what the calls since could not read is to be read again. PostgreSQL's, where a table
    /// lock stops reads; a SQLite file in WAL mode is read behind any other process's write,
    /// and a key makes at most one write, which waits once.
    fn turn(&self) -> bool {
        false
    }
    /// How many calls of this connection waited the whole lock wait and gave up.
    fn lock_waits(&self) -> u64 {
        0
    }
    /// Whether the database this connection reads is no longer the one its label names (a
    /// SQLite file removed or replaced since it was opened, `Store::file_moved`).
    fn moved_away(&self) -> bool {
        false
    }
    /// Empties a SQLite file's write-ahead log once no one has written for a poll
    /// (`Store::settle_idle_log`); PostgreSQL has no log of memscope's to empty.
    fn settle_idle_log(&mut self) -> Result<()> {
        Ok(())
    }
    /// The SQLite store underneath, for what only SQLite has (tests of the file).
    fn as_sqlite(&self) -> Option<&Store> {
        None
    }

    // The current view, by keyset pages in view order (`scope, subject, predicate` bytewise).
    fn browse_after(&self, from: &BrowseBound, limit: usize) -> Result<Vec<BrowseRecord>>;
    fn browse_before(&self, to: &BrowseBound, limit: usize) -> Result<Vec<BrowseRecord>>;
    fn browse_by_ids(&self, ids: &[i64]) -> Result<Vec<BrowseRecord>>;
    fn scope_counts(&self) -> Result<Vec<(String, i64)>>;
    fn counts(&self) -> Result<StoreCounts>;

    // The filter's scans (`tui::worker`).
    fn filter_scan(
        &self,
        after: Option<&BrowseKey>,
        limit: usize,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<(usize, Option<BrowseKey>)>;
    fn filter_candidates_by_ids(
        &self,
        ids: &[i64],
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize>;
    fn record_id_span(&self) -> Result<Option<(i64, i64)>>;
    fn filter_scan_ids(
        &self,
        from: i64,
        to: i64,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize>;
    fn filter_walk(
        &self,
        after: Option<&BrowseKey>,
        each: &mut dyn FnMut(i64, &str) -> bool,
    ) -> Result<usize>;

    // One record: its scopes, its resolution, its timeline.
    fn get(&self, id: &Identity) -> Result<Option<MemoryRecord>>;
    fn live_scopes_of(&self, subject: &str, predicate: &str) -> Result<Vec<MemoryRecord>>;
    fn resolve(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution>;
    fn resolve_preview(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution>;
    fn resolve_at(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Resolution>;
    fn history(
        &self,
        subject: &str,
        predicate: &str,
        scope: Option<&Scope>,
    ) -> Result<Vec<HistoryEvent>>;
    fn history_count(&self, id: &Identity, before: Option<i64>) -> Result<usize>;
    fn history_page(
        &self,
        id: &Identity,
        from: HistoryFrom,
        limit: usize,
    ) -> Result<Vec<HistoryEvent>>;
    fn history_event(&self, event_id: i64) -> Result<Option<HistoryEvent>>;
    fn scopes_written_by(&self, subject: &str, source: &str) -> Result<Vec<(String, String)>>;

    // The other tabs.
    fn pending(&self, all: bool) -> Result<Vec<PendingItem>>;
    fn preview_pending(&self, pending_id: i64) -> Result<Vec<(Scope, WriteDecision)>>;
    fn tombstones(&self) -> Result<Vec<Tombstone>>;
    fn reads(&self, filter: &ReadFilter) -> Result<Vec<ReadRecord>>;
    fn read_log(
        &self,
        words: &[String],
        since: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<ReadRecord>>;
    /// One logged read as the read log holds it now.
    fn read_record(&self, id: i64) -> Result<Option<ReadRecord>>;
    fn check(&self) -> Result<CheckReport>;
    fn suspects(&self) -> Result<Vec<Suspect>>;
    fn blast_radius(&self, subject: &str, predicate: &str) -> Result<Vec<String>>;
    fn delete_preview(&self, target: &DeleteTarget) -> Result<DeletePreview>;

    // Curation, through the write path.
    fn delete(&mut self, target: &DeleteTarget, reason: Option<&str>) -> Result<DeleteReport>;
    fn restore(&mut self, id: &Identity) -> Result<TombstoneRef>;
    fn resolve_pending(
        &mut self,
        pending_id: i64,
        scope: &Scope,
        outside_candidates: bool,
    ) -> Result<WriteOutcome>;
    fn reject_pending(&mut self, pending_id: i64) -> Result<PendingItem>;
    fn rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>>;
    /// What `rescope` would do, nothing changed; a refusal is a `RescopeRefusal` in the error.
    fn preview_rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>>;
    fn revert(&mut self, id: &Identity, to_version: Option<i64>) -> Result<WriteOutcome>;
    /// What `revert` would do, nothing changed; a refusal is a `RevertRefusal` in the error.
    fn preview_revert(&mut self, id: &Identity, to_version: Option<i64>) -> Result<WriteOutcome>;
}

/// The longest a terminal UI's statement waits for a lock another process or session holds.
pub const UI_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Opens the database at `db` for the UI: a `postgres://` address on PostgreSQL, else the
/// SQLite file (`mode` as for every command).
pub fn open_ui(db: &Path, mode: OpenMode) -> Result<Box<dyn UiStore>> {
    match super::postgres::Address::recognise(db.as_os_str()) {
        Some(address) => Ok(Box::new(super::postgres::PgUi::open(&address?, true)?)),
        None => Ok(Box::new(Store::open(db, mode)?)),
    }
}

/// A stored JSON value as the UI shows it: a string unwrapped to its text, anything else as
/// stored. Cheaper than parsing on the filter's full scan: most strings hold no escape, so the
/// quotes are simply dropped; the rest are decoded into `buf`.
pub(crate) fn json_text<'a>(raw: &'a str, buf: &'a mut String) -> &'a str {
    if raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') {
        if !raw.contains('\\') {
            return &raw[1..raw.len() - 1];
        }
        if let Ok(text) = serde_json::from_str::<String>(raw) {
            *buf = text;
            return buf;
        }
    }
    raw
}

/// Page cache of a worker's SQLite connection: its scans are sequential and need little.
const WORKER_CACHE_KIB: i64 = 4096;

impl UiStore for Store {
    fn label(&self) -> String {
        self.path().display().to_string()
    }
    fn is_read_only(&self) -> bool {
        Store::is_read_only(self)
    }
    fn reopen(&self) -> Reopen {
        let path = self.path().to_path_buf();
        Arc::new(move || {
            let s = Store::open(&path, OpenMode::Existing)?;
            s.limit_page_cache(WORKER_CACHE_KIB)?;
            Ok(Box::new(s) as Box<dyn UiStore>)
        })
    }
    fn interrupt(&self) -> Interrupt {
        let handle = self.interrupt_handle();
        Box::new(move || handle.interrupt())
    }
    fn data_version(&self) -> Result<i64> {
        Store::data_version(self)
    }
    fn moved_away(&self) -> bool {
        self.file_moved()
    }
    fn settle_idle_log(&mut self) -> Result<()> {
        Store::settle_idle_log(self)
    }
    fn as_sqlite(&self) -> Option<&Store> {
        Some(self)
    }
    fn browse_after(&self, from: &BrowseBound, limit: usize) -> Result<Vec<BrowseRecord>> {
        Store::browse_after(self, from, limit)
    }
    fn browse_before(&self, to: &BrowseBound, limit: usize) -> Result<Vec<BrowseRecord>> {
        Store::browse_before(self, to, limit)
    }
    fn browse_by_ids(&self, ids: &[i64]) -> Result<Vec<BrowseRecord>> {
        Store::browse_by_ids(self, ids)
    }
    fn scope_counts(&self) -> Result<Vec<(String, i64)>> {
        Store::scope_counts(self)
    }
    fn counts(&self) -> Result<StoreCounts> {
        Store::counts(self)
    }
    fn filter_scan(
        &self,
        after: Option<&BrowseKey>,
        limit: usize,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<(usize, Option<BrowseKey>)> {
        Store::filter_scan(self, after, limit, each)
    }
    fn filter_candidates_by_ids(
        &self,
        ids: &[i64],
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize> {
        Store::filter_candidates_by_ids(self, ids, each)
    }
    fn record_id_span(&self) -> Result<Option<(i64, i64)>> {
        Store::record_id_span(self)
    }
    fn filter_scan_ids(
        &self,
        from: i64,
        to: i64,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize> {
        Store::filter_scan_ids(self, from, to, each)
    }
    fn filter_walk(
        &self,
        after: Option<&BrowseKey>,
        each: &mut dyn FnMut(i64, &str) -> bool,
    ) -> Result<usize> {
        Store::filter_walk(self, after, each)
    }
    fn get(&self, id: &Identity) -> Result<Option<MemoryRecord>> {
        Store::get(self, id)
    }
    fn live_scopes_of(&self, subject: &str, predicate: &str) -> Result<Vec<MemoryRecord>> {
        Store::live_scopes_of(self, subject, predicate)
    }
    fn resolve(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution> {
        Store::resolve(self, subject, predicate, repo, task)
    }
    fn resolve_preview(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution> {
        Store::resolve_preview(self, subject, predicate, repo, task)
    }
    fn resolve_at(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Resolution> {
        Store::resolve_at(self, subject, predicate, repo, task, at)
    }
    fn history(
        &self,
        subject: &str,
        predicate: &str,
        scope: Option<&Scope>,
    ) -> Result<Vec<HistoryEvent>> {
        Store::history(self, subject, predicate, scope)
    }
    fn history_count(&self, id: &Identity, before: Option<i64>) -> Result<usize> {
        Store::history_count(self, id, before)
    }
    fn history_page(
        &self,
        id: &Identity,
        from: HistoryFrom,
        limit: usize,
    ) -> Result<Vec<HistoryEvent>> {
        Store::history_page(self, id, from, limit)
    }
    fn history_event(&self, event_id: i64) -> Result<Option<HistoryEvent>> {
        Store::history_event(self, event_id)
    }
    fn scopes_written_by(&self, subject: &str, source: &str) -> Result<Vec<(String, String)>> {
        Store::scopes_written_by(self, subject, source)
    }
    fn pending(&self, all: bool) -> Result<Vec<PendingItem>> {
        Store::pending(self, all)
    }
    fn preview_pending(&self, pending_id: i64) -> Result<Vec<(Scope, WriteDecision)>> {
        Store::preview_pending(self, pending_id)
    }
    fn tombstones(&self) -> Result<Vec<Tombstone>> {
        Store::tombstones(self)
    }
    fn reads(&self, filter: &ReadFilter) -> Result<Vec<ReadRecord>> {
        Store::reads(self, filter)
    }
    fn read_record(&self, id: i64) -> Result<Option<ReadRecord>> {
        Store::read_record(self, id)
    }
    fn read_log(
        &self,
        words: &[String],
        since: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<ReadRecord>> {
        Store::read_log(self, words, since, limit)
    }
    fn check(&self) -> Result<CheckReport> {
        Store::check(self)
    }
    fn suspects(&self) -> Result<Vec<Suspect>> {
        Store::suspects(self)
    }
    fn blast_radius(&self, subject: &str, predicate: &str) -> Result<Vec<String>> {
        Store::blast_radius(self, subject, predicate)
    }
    fn delete_preview(&self, target: &DeleteTarget) -> Result<DeletePreview> {
        Store::delete_preview(self, target)
    }
    fn delete(&mut self, target: &DeleteTarget, reason: Option<&str>) -> Result<DeleteReport> {
        Store::delete(self, target, reason)
    }
    fn restore(&mut self, id: &Identity) -> Result<TombstoneRef> {
        Store::restore(self, id)
    }
    fn resolve_pending(
        &mut self,
        pending_id: i64,
        scope: &Scope,
        outside_candidates: bool,
    ) -> Result<WriteOutcome> {
        Store::resolve_pending(self, pending_id, scope, outside_candidates)
    }
    fn reject_pending(&mut self, pending_id: i64) -> Result<PendingItem> {
        Store::reject_pending(self, pending_id)
    }
    fn rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>> {
        Store::rescope(self, subject, predicate, from, to)
    }
    fn preview_rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>> {
        Store::preview_rescope(self, subject, predicate, from, to)
    }
    fn revert(&mut self, id: &Identity, to_version: Option<i64>) -> Result<WriteOutcome> {
        Store::revert(self, id, to_version)
    }
    fn preview_revert(&mut self, id: &Identity, to_version: Option<i64>) -> Result<WriteOutcome> {
        Store::preview_revert(self, id, to_version)
    }
}

#[cfg(test)]
mod tests {
    use super::json_text;

    #[test]
    fn unwraps_strings_for_the_filter() {
        let mut buf = String::new();
        assert_eq!(json_text(r#""npm ci""#, &mut buf), "npm ci");
        assert_eq!(json_text(r#""中文 ☕""#, &mut buf), "中文 ☕");
        assert_eq!(json_text(r#""say \"hi\"\n""#, &mut buf), "say \"hi\"\n");
        assert_eq!(json_text(r#"{"width":2}"#, &mut buf), r#"{"width":2}"#);
        assert_eq!(json_text("42", &mut buf), "42");
    }
}
