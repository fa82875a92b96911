//! The store: the one judge of what memory holds (docs/ARCHITECTURE.md). `decide` is its
//! backend-neutral core — the write rules and the resolution chain, no SQL; `sqlite` is the
//! backend that probes, applies and keeps the data (schema, guards, statements, the
//! transaction runner, checkpoint and purge debt). A second backend is a folder beside it:
//! `postgres` holds PostgreSQL's groundwork (address, connection, schema and guards).

pub(crate) mod alias;
pub use alias::AliasAdded;
pub(crate) mod check;
pub mod decide;
pub(crate) mod dump;
pub(crate) mod events;
pub(crate) mod fields;
pub(crate) mod gc;
pub mod guard;
pub(crate) mod incident;
pub(crate) mod intake;
pub(crate) mod merge;
pub mod postgres;
pub(crate) mod prepared;
pub(crate) mod preview;
pub mod refusal;
mod sqlite;
pub(crate) mod suspects;
pub mod ui;
pub(crate) mod user_settings;

pub use intake::InputKind;
pub use refusal::{Instead, NothingEarlier, RescopeRefusal, RevertRefusal};
pub use sqlite::*;
pub use ui::{open_ui, UiStore, UI_LOCK_WAIT};
pub use user_settings::stored_setting_problem;

/// The queries `gc`, `check` and `import` run over the whole history, each with the index that
/// holds its rows alone (SQLite schema 8, PostgreSQL 13): tests read their plans on both
/// backends.
#[doc(hidden)]
pub const WHOLE_HISTORY_SCANS: [(&str, &str); 2] = [
    ("history_kept_copy_events", events::KEPT_COPY_EVENTS_SQL),
    (
        "history_refused_sources",
        events::COLLECTED_SOURCES_COUNT_SQL,
    ),
];

use crate::model::{HistoryEvent, MemoryRecord, Resolution, Scope, WriteOutcome, WriteRequest};
use anyhow::Result;
use std::path::Path;

/// A call that failed after it reached the database, with its commit neither seen nor ruled
/// out (PostgreSQL's connection lost mid-call): a front end says "may or may not have been
/// stored", never "nothing was written". The sentence says what to do.
#[derive(Debug)]
pub struct CommitUnknown(pub String);

impl std::fmt::Display for CommitUnknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CommitUnknown {}

/// Whether `e` is (or wraps) a [`CommitUnknown`].
pub fn commit_unknown(e: &anyhow::Error) -> bool {
    e.downcast_ref::<CommitUnknown>().is_some()
}

/// A memscope database chosen by its address alone (README, "Running on PostgreSQL"): a
/// `postgres://` or `postgresql://` address is PostgreSQL, anything else a SQLite file. Every
/// command but `demo` takes this.
pub enum AnyStore {
    Sqlite(Store),
    Postgres(postgres::PgStore),
}

impl AnyStore {
    pub fn open(db: &Path, mode: OpenMode) -> Result<AnyStore> {
        match postgres::Address::recognise(db.as_os_str()) {
            Some(address) => Ok(AnyStore::Postgres(postgres::PgStore::open(&address?)?)),
            None => Ok(AnyStore::Sqlite(Store::open(db, mode)?)),
        }
    }

    /// [`AnyStore::open`] for `check`: a SQLite schema a raw client changed is opened for the
    /// check to report ([`Opening::Check`]).
    pub fn open_for_check(db: &Path) -> Result<AnyStore> {
        match postgres::Address::recognise(db.as_os_str()) {
            Some(address) => Ok(AnyStore::Postgres(postgres::PgStore::open(&address?)?)),
            None => Ok(AnyStore::Sqlite(Store::open_for(
                db,
                OpenMode::Existing,
                Opening::Check,
            )?)),
        }
    }

    /// Whether it may only be read: a SQLite file opened read-only; a PostgreSQL standby or a
    /// connection whose transactions are read-only by default.
    pub fn is_read_only(&self) -> bool {
        match self {
            AnyStore::Sqlite(s) => s.is_read_only(),
            AnyStore::Postgres(p) => p.is_read_only(),
        }
    }

    /// A long-lived connection (an MCP server's) that waits for a lock another session holds
    /// at most once: on PostgreSQL, after one call gave up waiting its whole lock timeout, the
    /// calls after it give up at once, each saying so, until a [`AnyStore::turn`] finds every
    /// table free again (`PgStore::turn`) — the UI's rule. SQLite waits its busy timeout per
    /// call, as before.
    pub fn wait_for_a_held_lock_once(&mut self) -> Result<()> {
        match self {
            AnyStore::Sqlite(_) => Ok(()),
            AnyStore::Postgres(p) => p.set_lock_timeout(postgres::lock_timeout()),
        }
    }

    /// Starts a call of a long-lived connection ([`AnyStore::wait_for_a_held_lock_once`]).
    pub fn turn(&mut self) {
        if let AnyStore::Postgres(p) = self {
            p.turn();
        }
    }

    /// Whether a SQLite file was removed or replaced since it was opened (`Store::file_moved`).
    pub fn file_moved(&self) -> bool {
        match self {
            AnyStore::Sqlite(s) => s.file_moved(),
            AnyStore::Postgres(_) => false,
        }
    }

    /// Empties a SQLite file's write-ahead log once no one has written since the last call
    /// (`Store::settle_idle_log`): long-lived front ends call it when idle. PostgreSQL: nothing.
    pub fn settle_idle_log(&mut self) -> Result<()> {
        match self {
            AnyStore::Sqlite(s) => s.settle_idle_log(),
            AnyStore::Postgres(_) => Ok(()),
        }
    }

    /// Every invariant and the health figures; `mode` is SQLite's integrity check of the file
    /// (PostgreSQL has no file for memscope to examine: the server guards its pages).
    pub fn check(&mut self, mode: IntegrityMode) -> Result<CheckReport> {
        match self {
            AnyStore::Sqlite(s) => s.check_with(mode),
            AnyStore::Postgres(p) => p.check(),
        }
    }

    /// The whole database as a dump (`store::dump`); returns the rows written.
    pub fn export(&mut self, out: &mut dyn std::io::Write) -> Result<u64> {
        match self {
            AnyStore::Sqlite(s) => s.export(out),
            AnyStore::Postgres(p) => p.export(out),
        }
    }

    /// Loads a dump into this empty database, checked before it commits.
    pub fn import(&mut self, input: &mut dyn std::io::BufRead) -> Result<ImportReport> {
        match self {
            AnyStore::Sqlite(s) => s.import(input),
            AnyStore::Postgres(p) => p.import(input),
        }
    }

    /// Resolution as it stood at `at` (README, "Debugging a wrong-tool incident").
    pub fn resolve_at(
        &mut self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<Resolution> {
        match self {
            AnyStore::Sqlite(s) => s.resolve_at(subject, predicate, repo, task, at),
            AnyStore::Postgres(p) => p.resolve_at(subject, predicate, repo, task, at),
        }
    }

    /// Moves a mis-scoped current value from `from` to `to` (README, "rescope").
    pub fn rescope(
        &mut self,
        subject: &str,
        predicate: &str,
        from: &Scope,
        to: &Scope,
    ) -> Result<Vec<WriteOutcome>> {
        match self {
            AnyStore::Sqlite(s) => s.rescope(subject, predicate, from, to),
            AnyStore::Postgres(p) => p.rescope(subject, predicate, from, to),
        }
    }

    /// Makes an earlier value current again as a new version.
    pub fn revert(
        &mut self,
        id: &crate::model::Identity,
        to_version: Option<i64>,
    ) -> Result<WriteOutcome> {
        match self {
            AnyStore::Sqlite(s) => s.revert(id, to_version),
            AnyStore::Postgres(p) => p.revert(id, to_version),
        }
    }

    pub fn write(&mut self, req: &WriteRequest) -> Result<WriteOutcome> {
        match self {
            AnyStore::Sqlite(s) => s.write(req),
            AnyStore::Postgres(p) => p.write(req),
        }
    }

    /// A write that corrects the current value's spelling (README, `write --respell`): a value
    /// that differs from it only in case or spacing supersedes it.
    pub fn respell(&mut self, req: &WriteRequest) -> Result<WriteOutcome> {
        match self {
            AnyStore::Sqlite(s) => s.respell(req),
            AnyStore::Postgres(p) => p.respell(req),
        }
    }

    /// `apply` from a stream (README, "apply"): [`AnyStore::apply_from`] for a file.
    pub fn apply<R: std::io::Read + Send + 'static>(
        &mut self,
        input: R,
        emit: impl FnMut(&[WriteOutcome]) -> Result<()>,
    ) -> Result<ApplySummary> {
        self.apply_from(input, InputKind::Stream, emit)
    }

    pub fn apply_from<R: std::io::Read + Send + 'static>(
        &mut self,
        input: R,
        kind: InputKind,
        emit: impl FnMut(&[WriteOutcome]) -> Result<()>,
    ) -> Result<ApplySummary> {
        match self {
            AnyStore::Sqlite(s) => s.apply_from(input, kind, emit),
            AnyStore::Postgres(p) => p.apply_from(input, kind, emit),
        }
    }

    pub fn resolve(
        &mut self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution> {
        match self {
            AnyStore::Sqlite(s) => s.resolve(subject, predicate, repo, task),
            AnyStore::Postgres(p) => p.resolve(subject, predicate, repo, task),
        }
    }

    pub fn resolve_logged(
        &mut self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
        agent: Option<&str>,
        note: Option<&str>,
    ) -> Result<Resolution> {
        match self {
            AnyStore::Sqlite(s) => s.resolve_logged(subject, predicate, repo, task, agent, note),
            AnyStore::Postgres(p) => p.resolve_logged(subject, predicate, repo, task, agent, note),
        }
    }

    pub fn list(&mut self, filter: &ListFilter) -> Result<Vec<MemoryRecord>> {
        match self {
            AnyStore::Sqlite(s) => s.list(filter),
            AnyStore::Postgres(p) => p.list(filter),
        }
    }

    pub fn history(
        &mut self,
        subject: &str,
        predicate: &str,
        scope: Option<&Scope>,
    ) -> Result<Vec<HistoryEvent>> {
        match self {
            AnyStore::Sqlite(s) => s.history(subject, predicate, scope),
            AnyStore::Postgres(p) => p.history(subject, predicate, scope),
        }
    }

    pub fn pending(&mut self, all: bool) -> Result<Vec<crate::model::PendingItem>> {
        match self {
            AnyStore::Sqlite(s) => s.pending(all),
            AnyStore::Postgres(p) => p.pending(all),
        }
    }

    pub fn open_pending_of(
        &mut self,
        subject: &str,
        predicate: &str,
    ) -> Result<Vec<crate::model::PendingItem>> {
        match self {
            AnyStore::Sqlite(s) => s.open_pending_of(subject, predicate),
            AnyStore::Postgres(p) => p.open_pending_of(subject, predicate),
        }
    }

    pub fn pending_item(&mut self, id: i64) -> Result<Option<crate::model::PendingItem>> {
        match self {
            AnyStore::Sqlite(s) => s.pending_item(id),
            AnyStore::Postgres(p) => p.pending_item(id),
        }
    }

    pub fn resolve_pending(
        &mut self,
        id: i64,
        scope: &Scope,
        outside_candidates: bool,
    ) -> Result<WriteOutcome> {
        match self {
            AnyStore::Sqlite(s) => s.resolve_pending(id, scope, outside_candidates),
            AnyStore::Postgres(p) => p.resolve_pending(id, scope, outside_candidates),
        }
    }

    pub fn reject_pending(&mut self, id: i64) -> Result<crate::model::PendingItem> {
        match self {
            AnyStore::Sqlite(s) => s.reject_pending(id),
            AnyStore::Postgres(p) => p.reject_pending(id),
        }
    }

    /// The time ages are shown against: the store's clock (fixed in tests), else now.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        match self {
            AnyStore::Sqlite(s) => s.clock().now(),
            AnyStore::Postgres(p) => p.wall_clock().now(),
        }
    }

    /// Sets the clock the store stamps and ages by (tests: a fixed instant on either backend).
    pub fn set_clock(&mut self, clock: Clock) -> Result<()> {
        match self {
            AnyStore::Sqlite(s) => {
                s.set_clock(clock);
                Ok(())
            }
            AnyStore::Postgres(p) => p.set_clock(clock),
        }
    }

    pub fn delete(
        &mut self,
        target: &crate::model::DeleteTarget,
        reason: Option<&str>,
    ) -> Result<crate::model::DeleteReport> {
        match self {
            AnyStore::Sqlite(s) => s.delete(target, reason),
            AnyStore::Postgres(p) => p.delete(target, reason),
        }
    }

    pub fn reads(&mut self, filter: &ReadFilter) -> Result<Vec<crate::model::ReadRecord>> {
        match self {
            AnyStore::Sqlite(s) => s.reads(filter),
            AnyStore::Postgres(p) => p.reads(filter),
        }
    }

    pub fn restore(&mut self, id: &crate::model::Identity) -> Result<crate::model::TombstoneRef> {
        match self {
            AnyStore::Sqlite(s) => s.restore(id),
            AnyStore::Postgres(p) => p.restore(id),
        }
    }

    pub fn delete_preview(
        &mut self,
        target: &crate::model::DeleteTarget,
    ) -> Result<crate::model::DeletePreview> {
        match self {
            AnyStore::Sqlite(s) => s.delete_preview(target),
            AnyStore::Postgres(p) => p.delete_preview(target),
        }
    }

    pub fn user_settings(&mut self) -> Result<Vec<(String, String)>> {
        match self {
            AnyStore::Sqlite(s) => s.user_settings(),
            AnyStore::Postgres(p) => p.user_settings(),
        }
    }

    pub fn set_user_setting(&mut self, key: &str, value: &str) -> Result<String> {
        match self {
            AnyStore::Sqlite(s) => s.set_user_setting(key, value),
            AnyStore::Postgres(p) => p.set_user_setting(key, value),
        }
    }

    pub fn canonical_predicate(&mut self, raw: &str) -> Result<String> {
        match self {
            AnyStore::Sqlite(s) => s.canonical_predicate(raw),
            AnyStore::Postgres(p) => p.canonical_predicate(raw),
        }
    }

    pub fn next_seq(&mut self) -> Result<i64> {
        match self {
            AnyStore::Sqlite(s) => s.next_seq(),
            AnyStore::Postgres(p) => p.next_seq(),
        }
    }

    /// Adds `alias → canonical` ([`alias`] judges).
    pub fn add_alias(&mut self, alias: &str, canonical: &str) -> Result<AliasAdded> {
        match self {
            AnyStore::Sqlite(s) => s.add_alias(alias, canonical),
            AnyStore::Postgres(p) => p.add_alias(alias, canonical),
        }
    }

    /// Removes the alias `alias` (normalized): `(alias, the canonical name it stood for)`; a
    /// name that is no alias is refused.
    pub fn remove_alias(&mut self, alias: &str) -> Result<(String, String)> {
        match self {
            AnyStore::Sqlite(s) => s.remove_alias(alias),
            AnyStore::Postgres(p) => p.remove_alias(alias),
        }
    }

    /// The alias table, by canonical then alias.
    pub fn aliases(&mut self) -> Result<Vec<(String, String)>> {
        match self {
            AnyStore::Sqlite(s) => s.aliases(),
            AnyStore::Postgres(p) => p.aliases(),
        }
    }

    /// Retention purge and tombstone collection ([`gc`] decides).
    pub fn gc(&mut self, retention: Option<i64>, tombstone_safe: Option<i64>) -> Result<GcReport> {
        match self {
            AnyStore::Sqlite(s) => s.gc(retention, tombstone_safe),
            AnyStore::Postgres(p) => p.gc(retention, tombstone_safe),
        }
    }

    /// Global records that look like the rule of one place ([`suspects`] judges).
    pub fn suspects(&mut self) -> Result<Vec<Suspect>> {
        match self {
            AnyStore::Sqlite(s) => s.suspects(),
            AnyStore::Postgres(p) => p.suspects(),
        }
    }
}

/// The most `MEMSCOPE_BUSY_TIMEOUT_MS` may say: PostgreSQL's `lock_timeout` takes no more
/// (about 24.8 days).
const BUSY_TIMEOUT_MAX_MS: u64 = i32::MAX as u64;

/// `MEMSCOPE_BUSY_TIMEOUT_MS` (README, "Environment"): `None` when unset or empty. A value that
/// is no whole number of milliseconds a lock wait can take is refused in one sentence, before
/// anything is opened, rather than replaced by the default without a word (found by review).
pub fn busy_timeout_setting() -> Result<Option<u64>> {
    let Some(raw) = std::env::var_os("MEMSCOPE_BUSY_TIMEOUT_MS") else {
        return Ok(None);
    };
    let text = raw.to_string_lossy();
    if text.trim().is_empty() {
        return Ok(None);
    }
    match text.trim().parse::<u64>() {
        Ok(ms) if ms <= BUSY_TIMEOUT_MAX_MS => Ok(Some(ms)),
        _ => anyhow::bail!(
            "MEMSCOPE_BUSY_TIMEOUT_MS is {text:?}, not a whole number of milliseconds from 0 to {BUSY_TIMEOUT_MAX_MS}: set it to one (15000, the default, waits 15 s) or unset it"
        ),
    }
}
