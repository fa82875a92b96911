//! The terminal UI on PostgreSQL (README, "Running on PostgreSQL"): [`PgUi`] answers
//! [`UiStore`] with a [`PgStore`]'s reads and writes, and watches for other hosts' commits.
//!
//! Watching: the UI's own connection registers in `watchers` (schema v5) and LISTENs on
//! `memscope_changed`; while any UI is registered, a statement that changes what the UI shows
//! sends a notice, delivered when its transaction commits. [`UiStore::data_version`] counts the
//! notices that arrived — a look at what the connection received, no round trip — so the
//! loop's poll costs a millisecond while nothing changes, and a commit reaches the screen within
//! one poll. Every call is its own short transaction: nothing is held while the UI idles. A
//! connection that cannot take writes (a standby: LISTEN is refused there) and the workers'
//! connections (which nobody drains between jobs, so they must not pile notices up) read a
//! change mark instead ([`PgStore::change_mark`]); a listening connection reads it too, every
//! few seconds, as a backstop (a change no notice announced still shows, and the connection
//! registers again). A connection the server closed is opened again by the next call; the
//! watch is set up again and counts as a change.

use super::{Address, PgStore};
use crate::model::{
    DeletePreview, DeleteReport, DeleteTarget, HistoryEvent, Identity, MemoryRecord, PendingItem,
    ReadRecord, Resolution, Scope, Tombstone, TombstoneRef, WriteOutcome,
};
use crate::store::decide::WriteDecision;
use crate::store::ui::{Interrupt, Reopen, UiStore};
use crate::store::{
    BrowseBound, BrowseKey, BrowseRecord, CheckReport, FilterCandidate, HistoryFrom, ReadFilter,
    StoreCounts, Suspect,
};
use anyhow::{anyhow, Result};
use chrono::{DateTime, Utc};
use fallible_iterator::FallibleIterator;
use postgres::error::SqlState;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// The channel the schema's `memscope_changed()` notifies.
const CHANNEL: &str = "memscope_changed";

/// How often a listening UI also reads the change mark (the backstop in `data_version`).
const MARK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a poll waits for notices that already arrived to be read off the socket.
const NOTICE_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

/// Why a connection does not watch.
enum Watch {
    /// Its role may not register in `watchers`: it reads the change mark instead.
    NotAllowed,
    Failed(anyhow::Error),
}

/// A PostgreSQL database as the UI sees it (module comment).
pub struct PgUi {
    store: RefCell<PgStore>,
    address: Address,
    /// Whether this connection listens for the change notices (else it reads the change mark).
    listens: bool,
    /// Notices received so far, and the reconnect count the watch was set up at.
    notices: Cell<i64>,
    watching_since: Cell<Option<u64>>,
    /// The change mark when the backstop last read it, and when.
    mark: Cell<Option<i64>>,
    mark_checked: Cell<Option<std::time::Instant>>,
    /// `notices` when the backstop last read the mark.
    notices_at_mark: Cell<i64>,
}

impl PgUi {
    /// Opens the UI's connection; `watch`: this is the connection the loop polls, which
    /// listens for change notices when the server takes writes from it.
    pub fn open(address: &Address, watch: bool) -> Result<PgUi> {
        let mut store = PgStore::open(address)?;
        // The UI waits for its reads: behind another session's lock (a `VACUUM FULL`, a
        // `psql` left in a transaction) it gives up soon and says so, so keys — `q` too —
        // are handled again within two seconds.
        store.set_lock_timeout(crate::store::UI_LOCK_WAIT.min(super::lock_timeout()))?;
        let listens = watch && !store.is_read_only();
        let mut ui = PgUi {
            store: RefCell::new(store),
            address: address.clone(),
            listens,
            notices: Cell::new(0),
            watching_since: Cell::new(None),
            mark: Cell::new(None),
            mark_checked: Cell::new(None),
            notices_at_mark: Cell::new(0),
        };
        if listens {
            match ui.watch() {
                Ok(()) => {}
                // A role not given `watchers` (one made by hand, not by `memscope roles`)
                // still sees other hosts' commits: by the change mark.
                Err(Watch::NotAllowed) => ui.listens = false,
                Err(Watch::Failed(e)) => return Err(e),
            }
        }
        Ok(ui)
    }

    /// Registers this connection as a watcher (and forgets watchers whose connection is gone),
    /// then listens. Done again after a reconnect.
    fn watch(&self) -> Result<(), Watch> {
        let mut store = self.store.borrow_mut();
        let client = store.connection().map_err(Watch::Failed)?;
        // Another role's session shows its pid but not its start (NULL) to a role that may
        // not read all statistics: such a row is kept while its pid lives. The roles may insert
        // and delete watchers, not update them: this connection's old row goes, a new one comes.
        client.batch_execute(&format!(
            "DELETE FROM watchers w WHERE w.pid = pg_backend_pid()
                 OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.pid
                     AND (a.backend_start IS NULL OR a.backend_start = w.started));
             INSERT INTO watchers (pid, started)
                 SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid();
             LISTEN {CHANNEL};"
        ))
        .map_err(|e| match e.code() {
            Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => Watch::NotAllowed,
            _ => Watch::Failed(anyhow!(
                "cannot listen for other hosts' changes on PostgreSQL at {} ({}): check the connection and that the schema is memscope's (`memscope check`)",
                self.address.describe(),
                e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string())
            )),
        })?;
        self.watching_since.set(Some(store.reconnects()));
        Ok(())
    }

    fn with<T>(&self, f: impl FnOnce(&mut PgStore) -> Result<T>) -> Result<T> {
        f(&mut self.store.borrow_mut())
    }

    /// One look for other connections' commits ([`UiStore::data_version`]).
    fn look(&self) -> Result<i64> {
        if !self.listens {
            // Behind another session's lock the poll sees no change, and looks again next time.
            let mark = self.with(|s| s.change_mark_briefly())?;
            if let Some(mark) = mark {
                self.mark.set(Some(mark));
            }
            return Ok(self.mark.get().unwrap_or(0));
        }
        let reconnects = {
            let mut store = self.store.borrow_mut();
            store.connection()?;
            store.reconnects()
        };
        if self.watching_since.get() != Some(reconnects) {
            // What was committed while the connection was down was never announced. Set up
            // once per connection, even when not allowed (the backstop below still looks).
            self.watching_since.set(Some(reconnects));
            match self.watch() {
                Ok(()) | Err(Watch::NotAllowed) => {}
                Err(Watch::Failed(e)) => return Err(e),
            }
            self.notices.set(self.notices.get() + 1);
        }
        let mut arrived = 0;
        {
            let mut store = self.store.borrow_mut();
            let mut notices = store.connection()?.notifications();
            // Not `iter()`: its one poll never lets the driver's runtime look at the socket,
            // so a notice the server sent while the connection idled is only found by a wait,
            // however short (the runtime parks, sees the socket readable, reads what is there).
            let mut pending = notices.timeout_iter(NOTICE_WAIT);
            while let Some(n) = pending.next()? {
                if n.channel() == CHANNEL {
                    arrived += 1;
                }
            }
        }
        self.notices.set(self.notices.get() + arrived);
        // The backstop: every few seconds the change mark too. A change no notice announced
        // (this connection's row in `watchers` removed by hand or by a role that may delete
        // it) still reaches the screen, and the connection registers again.
        let due = self
            .mark_checked
            .get()
            .is_none_or(|at| at.elapsed() >= MARK_EVERY);
        // Behind another session's lock it is not read (the poll never waits for one): it is
        // due again at the next poll.
        let mark = match due {
            true => self.with(|s| s.change_mark_briefly())?,
            false => None,
        };
        if let Some(mark) = mark {
            // Announced: some notice arrived since the last look at the mark.
            let heard = self.notices.get() != self.notices_at_mark.get();
            let unannounced = self.mark.get().is_some_and(|m| m != mark) && !heard;
            self.mark.set(Some(mark));
            self.mark_checked.set(Some(std::time::Instant::now()));
            if unannounced {
                self.notices.set(self.notices.get() + 1);
                match self.watch() {
                    Ok(()) | Err(Watch::NotAllowed) => {}
                    Err(Watch::Failed(e)) => return Err(e),
                }
            }
            self.notices_at_mark.set(self.notices.get());
        }
        Ok(self.notices.get())
    }
}

impl Drop for PgUi {
    fn drop(&mut self) {
        if self.listens {
            if let Ok(client) = self.store.get_mut().connection() {
                let _ = client.batch_execute(
                    "DELETE FROM watchers WHERE pid = pg_backend_pid(); UNLISTEN *;",
                );
            }
        }
    }
}

impl UiStore for PgUi {
    fn label(&self) -> String {
        self.address.describe()
    }
    fn is_read_only(&self) -> bool {
        self.store.borrow().is_read_only()
    }
    fn reopen(&self) -> Reopen {
        let address = self.address.clone();
        Arc::new(move || Ok(Box::new(PgUi::open(&address, false)?) as Box<dyn UiStore>))
    }
    fn interrupt(&self) -> Interrupt {
        let token = std::sync::Arc::new(self.store.borrow().cancel_token());
        let address = self.address.clone();
        // A cancel is a connection of its own to the server: on a thread of its own, so a UI
        // that quits while the server is unreachable does not wait for the connect timeout.
        Box::new(move || {
            let (token, address) = (token.clone(), address.clone());
            std::thread::spawn(move || address.cancel(&token));
        })
    }
    fn turn(&self) -> bool {
        self.store.borrow_mut().turn()
    }
    fn lock_waits(&self) -> u64 {
        self.store.borrow().lock_waits()
    }
    fn data_version(&self) -> Result<i64> {
        // A connection the server ended (an administrator, a restart) is found closed by the
        // first look, and opened again by a second: only a database that cannot be reached is
        // an error. One that was closed already was tried again by the first look.
        let was_open = !self.store.borrow().is_closed();
        match self.look() {
            Err(_) if was_open && self.store.borrow().is_closed() => self.look(),
            seen => seen,
        }
    }

    fn browse_after(&self, from: &BrowseBound, limit: usize) -> Result<Vec<BrowseRecord>> {
        self.with(|s| s.browse_beyond(from, limit, true))
    }
    fn browse_before(&self, to: &BrowseBound, limit: usize) -> Result<Vec<BrowseRecord>> {
        self.with(|s| s.browse_beyond(to, limit, false))
    }
    fn browse_by_ids(&self, ids: &[i64]) -> Result<Vec<BrowseRecord>> {
        self.with(|s| s.browse_by_ids(ids))
    }
    fn scope_counts(&self) -> Result<Vec<(String, i64)>> {
        self.with(|s| s.scope_counts())
    }
    fn counts(&self) -> Result<StoreCounts> {
        self.with(|s| s.counts())
    }
    fn filter_scan(
        &self,
        after: Option<&BrowseKey>,
        limit: usize,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<(usize, Option<BrowseKey>)> {
        self.with(|s| s.filter_scan(after, limit, each))
    }
    fn filter_candidates_by_ids(
        &self,
        ids: &[i64],
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize> {
        self.with(|s| s.filter_candidates_by_ids(ids, each))
    }
    fn record_id_span(&self) -> Result<Option<(i64, i64)>> {
        self.with(|s| s.record_id_span())
    }
    fn filter_scan_ids(
        &self,
        from: i64,
        to: i64,
        each: &mut dyn FnMut(&FilterCandidate<'_>),
    ) -> Result<usize> {
        self.with(|s| s.filter_scan_ids(from, to, each))
    }
    fn filter_walk(
        &self,
        after: Option<&BrowseKey>,
        each: &mut dyn FnMut(i64, &str) -> bool,
    ) -> Result<usize> {
        self.with(|s| s.filter_walk(after, each))
    }
    fn get(&self, id: &Identity) -> Result<Option<MemoryRecord>> {
        self.with(|s| s.get(id))
    }
    fn live_scopes_of(&self, subject: &str, predicate: &str) -> Result<Vec<MemoryRecord>> {
        self.with(|s| s.live_scopes_of(subject, predicate))
    }
    fn resolve(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution> {
        self.with(|s| s.resolve(subject, predicate, repo, task))
    }
    fn resolve_preview(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution> {
        self.with(|s| s.resolve_preview(subject, predicate, repo, task))
    }
    fn resolve_at(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Resolution> {
        self.with(|s| s.resolve_at(subject, predicate, repo, task, at))
    }
    fn history(
        &self,
        subject: &str,
        predicate: &str,
        scope: Option<&Scope>,
    ) -> Result<Vec<HistoryEvent>> {
        self.with(|s| s.history(subject, predicate, scope))
    }
    fn history_count(&self, id: &Identity, before: Option<i64>) -> Result<usize> {
        self.with(|s| s.history_count(id, before))
    }
    fn history_page(
        &self,
        id: &Identity,
        from: HistoryFrom,
        limit: usize,
    ) -> Result<Vec<HistoryEvent>> {
        self.with(|s| s.history_page(id, from, limit))
    }
    fn history_event(&self, event_id: i64) -> Result<Option<HistoryEvent>> {
        self.with(|s| s.history_event(event_id))
    }
    fn scopes_written_by(&self, subject: &str, source: &str) -> Result<Vec<(String, String)>> {
        self.with(|s| s.scopes_written_by(subject, source))
    }
    fn pending(&self, all: bool) -> Result<Vec<PendingItem>> {
        self.with(|s| s.pending(all))
    }
    fn preview_pending(&self, pending_id: i64) -> Result<Vec<(Scope, WriteDecision)>> {
        self.with(|s| s.preview_pending(pending_id))
    }
    fn tombstones(&self) -> Result<Vec<Tombstone>> {
        self.with(|s| s.tombstones())
    }
    fn reads(&self, filter: &ReadFilter) -> Result<Vec<ReadRecord>> {
        self.with(|s| s.reads(filter))
    }
    fn read_record(&self, id: i64) -> Result<Option<ReadRecord>> {
        self.with(|s| s.read_record(id))
    }
    fn read_log(
        &self,
        words: &[String],
        since: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<ReadRecord>> {
        self.with(|s| s.read_log(words, since, limit))
    }
    fn check(&self) -> Result<CheckReport> {
        self.with(|s| s.check())
    }
    fn suspects(&self) -> Result<Vec<Suspect>> {
        self.with(|s| s.suspects())
    }
    fn blast_radius(&self, subject: &str, predicate: &str) -> Result<Vec<String>> {
        self.with(|s| s.blast_radius(subject, predicate))
    }
    fn delete_preview(&self, target: &DeleteTarget) -> Result<DeletePreview> {
        self.with(|s| s.delete_preview(target))
    }
    fn delete(&mut self, target: &DeleteTarget, reason: Option<&str>) -> Result<DeleteReport> {
        self.store.get_mut().delete(target, reason)
    }
    fn restore(&mut self, id: &Identity) -> Result<TombstoneRef> {
        self.store.get_mut().restore(id)
    }
    fn resolve_pending(
        &mut self,
        pending_id: i64,
        scope: &Scope,
        outside_candidates: bool,
    ) -> Result<WriteOutcome> {
        self.store
            .get_mut()
            .resolve_pending(pending_id, scope, outside_candidates)
    }
    fn reject_pending(&mut self, pending_id: i64) -> Result<PendingItem> {
        self.store.get_mut().reject_pending(pending_id)
    }
    fn rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>> {
        self.store.get_mut().rescope(subject, predicate, from, to)
    }
    fn preview_rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>> {
        self.store
            .get_mut()
            .preview_rescope(subject, predicate, from, to)
    }
    fn revert(&mut self, id: &Identity, to_version: Option<i64>) -> Result<WriteOutcome> {
        self.store.get_mut().revert(id, to_version)
    }
    fn preview_revert(&mut self, id: &Identity, to_version: Option<i64>) -> Result<WriteOutcome> {
        self.store.get_mut().preview_revert(id, to_version)
    }
}
