//! The SQLite backend of the store (docs/ARCHITECTURE.md): the only code that speaks SQL. Every change to memory goes through
//! [`Store::write`] (or its batched and pending forms), which decides the outcome in one
//! `BEGIN IMMEDIATE` transaction.

mod browse;
mod check;
mod delete;
mod events;
mod hot;
mod incident;
mod private;
mod read;
mod rows;
pub mod schema;
mod settings;
mod spellings;
mod suspects;
mod transfer;
mod tx;
mod write;

pub use super::check::{
    CheckReport, DatedAhead, Health, Integrity, IntegrityMode, Violation, INVARIANT_NAMES,
};
pub use super::dump::ImportReport;
pub use super::gc::GcReport;
pub use super::suspects::Suspect;
/// The write path's checks of a request that need no database (front ends run them before
/// opening one, so a wrong call creates nothing).
pub(crate) use crate::store::prepared::validate;
pub use browse::{BrowseBound, BrowseKey, BrowseRecord, FilterCandidate, HistoryFrom};
pub use check::is_damage;
pub use incident::{parse_time, ReadFilter};
pub use private::Exposure;
pub use read::{ListFilter, StoreCounts};
pub use rows::PREVIEW_BYTES;
pub use settings::{Durability, DURABILITY_KEY, USER_SETTINGS};
pub use spellings::MergeReport;
pub use write::ApplySummary;

use anyhow::{anyhow, bail, Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Busy-handler retries taken by this process and not yet recorded: the next commit of any
/// of its stores takes them (so each retry is counted once, however many stores the process
/// opens) and folds them into the `busy_retries` metric that `check` reports.
static BUSY_UNRECORDED: AtomicU64 = AtomicU64::new(0);
/// How long a writer waits for the lock before giving up, in milliseconds.
static BUSY_TIMEOUT_MS: AtomicU64 = AtomicU64::new(15_000);
/// The most this process waits for a lock whatever `MEMSCOPE_BUSY_TIMEOUT_MS` says: the
/// terminal UI's [`cap_lock_wait`], so that it says so and keeps handling its keys.
static BUSY_CAP_MS: AtomicU64 = AtomicU64::new(u64::MAX);

/// How long a statement of this process waits for a lock another process holds.
fn busy_timeout_ms() -> u64 {
    BUSY_TIMEOUT_MS
        .load(Ordering::Relaxed)
        .min(BUSY_CAP_MS.load(Ordering::Relaxed))
}

/// Caps every lock wait of this process's connections, those opened later included, at
/// `limit` (the terminal UI's 2 s: README, "Waiting for locks").
pub fn cap_lock_wait(limit: std::time::Duration) {
    BUSY_CAP_MS.store(limit.as_millis() as u64, Ordering::Relaxed);
}

/// Default aliases seeded into every new database.
pub const DEFAULT_ALIASES: &str = include_str!("../../../assets/aliases.json");

/// Whether opening may create the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Create and initialize the database when it is missing (write commands).
    Create,
    /// The database must already exist (read commands, the UI).
    Existing,
}

/// The store's clock: real time, or a fixed instant for tests and snapshots.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    System,
    Fixed(DateTime<Utc>),
}

impl Clock {
    pub fn now(&self) -> DateTime<Utc> {
        match self {
            Clock::System => Utc::now(),
            Clock::Fixed(t) => *t,
        }
    }
}

/// Formats an instant the way the database stores it: RFC 3339, UTC, milliseconds.
pub fn format_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub struct Store {
    /// Statements prepared on `conn`; `Drop for Store` finalizes them before the connection
    /// closes, so the order of these fields does not matter.
    hot: hot::HotStmts,
    /// Subjects and scopes met by earlier write transactions, in their stored spelling.
    spellings: spellings::SpellingMemo,
    /// The places the scope guard read in an earlier write transaction (`tx::KnownPlaces`).
    known_places: Option<tx::KnownPlaces>,
    /// The records' sources the scope guard read in earlier write transactions
    /// (`tx::PlaceSources`).
    place_sources: tx::Sources,
    conn: Connection,
    path: PathBuf,
    /// The file `path` named when the connection opened it (`file_id`), to tell when the path
    /// names another file, or none (`file_moved`).
    opened_file: Option<(u64, u64)>,
    /// The size of the `-wal` at the last `settle_idle_log`.
    wal_seen: u64,
    /// The `-wal` at the path and `PRAGMA data_version` as they were when the path last named
    /// the opened file: the log this connection shares, and whether another connection has
    /// committed into it since (`release_moved_log`).
    log_seen: Option<((u64, u64), i64)>,
    read_only: bool,
    clock: Clock,
    assert_invariants: bool,
    purge_gate: Arc<AtomicBool>,
    /// Whether writes try the one-statement insert of a new identity first (see
    /// `write::insert_if_fresh`); off only in tests that compare it with the full decision.
    fresh_inserts: bool,
    /// What memscope's schema lost to a raw SQL client, found once as the connection opened:
    /// every write is refused with it (`ensure_writable`).
    schema_damage: Option<SchemaDamaged>,
    /// The schema version `init` set back, from what a raw client had set it to.
    version_restored: Option<(i64, i64)>,
}

impl Drop for Store {
    fn drop(&mut self) {
        // A statement still prepared makes `sqlite3_close` fail with BUSY, which rusqlite
        // ignores: the connection and its file descriptors would leak. Finalize them first.
        drop(std::mem::take(&mut self.hot));
        // A file moved over the path would adopt this connection's log (README, "Agents"):
        // closing, SQLite skips its checkpoint of a moved file and leaves the log where it is.
        if self.file_moved() {
            let _ = self.release_moved_log();
        }
    }
}

/// What a write says when the file at `path` was removed or replaced under it.
fn moved_error(path: &Path) -> anyhow::Error {
    anyhow!(
        "the database file {} was removed or replaced after memscope opened it, so nothing was written (a change would land in the old file's log, which the file now at that path would read as its own): start memscope again to open what is there now",
        path.display()
    )
}

/// The device and inode `path` names now, where the platform has them (`stat`: no descriptor).
fn file_id(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The write-ahead log SQLite keeps beside the database file.
fn wal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

fn busy_handler(attempt: i32) -> bool {
    BUSY_UNRECORDED.fetch_add(1, Ordering::Relaxed);
    let step = (attempt as u64 % 8) + 1;
    std::thread::sleep(std::time::Duration::from_millis(step));
    // Average sleep is ~4.5 ms per attempt.
    (attempt as u64) * 9 / 2 < busy_timeout_ms()
}

/// Checkpoints wait only briefly for readers: a blocked purge is recorded as debt instead.
fn short_busy_handler(attempt: i32) -> bool {
    std::thread::sleep(std::time::Duration::from_millis(5));
    attempt < 40
}

/// Whether SQLite answered "another connection holds the lock" (the busy handler is not
/// consulted for every such case: switching to WAL and WAL recovery answer at once).
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// Runs `step` again while the database is busy, as long as a write would wait for its lock
/// (`MEMSCOPE_BUSY_TIMEOUT_MS`). Each retry counts in `busy_retries`. `step` must leave no
/// transaction open when it fails.
fn retry_busy<T>(mut step: impl FnMut() -> Result<T>) -> Result<T> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(busy_timeout_ms());
    let mut attempt = 0u64;
    loop {
        match step() {
            Err(e)
                if e.downcast_ref::<rusqlite::Error>().is_some_and(is_busy)
                    && std::time::Instant::now() < deadline =>
            {
                BUSY_UNRECORDED.fetch_add(1, Ordering::Relaxed);
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(attempt % 8 + 1));
            }
            other => return other,
        }
    }
}

/// An error as the one sentence a front end prints: its contexts joined by ": ", what SQLite
/// said turned into a sentence that says what to do, and no cause said twice (rusqlite's
/// errors repeat their cause as their source: `malformed: Error code 11: malformed`).
pub fn error_text(e: &anyhow::Error) -> String {
    chain_text(e, true)
}

/// A file SQLite will not open as a database: another kind of file, or a database whose header
/// is damaged. Told apart only by `check` ([`header_problem`]), which reads the file's first
/// bytes once no connection to it is open; any other command refuses either in one sentence.
#[derive(Debug)]
pub struct NotADatabase(pub PathBuf);

impl std::fmt::Display for NotADatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is not a SQLite database: another kind of file, or a database whose header is damaged (`memscope check` says which; restore a backup of a damaged one) — point --db at a memscope database or a new file name",
            self.0.display()
        )
    }
}

impl std::error::Error for NotADatabase {}

/// memscope's schema as a raw SQL client left it (README, "check", the `SCHEMA:` line): what
/// is wrong, one item each, and what to do — `None`: restore a backup, since nothing of
/// memscope rebuilds what was dropped. Every command but `check` refuses in one sentence;
/// `check` reports it.
#[derive(Debug, Clone)]
pub struct SchemaDamaged {
    pub problems: Vec<String>,
    pub way_out: Option<String>,
}

impl SchemaDamaged {
    /// A table that lost the constraints memscope's writes rely on: reads go on, writes are
    /// refused, and an export imported into a new file has them all again.
    fn loosened(problems: Vec<String>, path: &Path) -> SchemaDamaged {
        let file = crate::model::shell_path(path);
        SchemaDamaged {
            problems,
            way_out: Some(format!(
                "memscope reads it but refuses to write to it, since a write could store a row without its id or its value — export it with `memscope --db {file} export --out dump.jsonl`, import that into a new file with `memscope --db NEW import dump.jsonl` and use NEW, or restore a backup taken before the change"
            )),
        }
    }

    /// The sentence `check` says it with, and every other command refuses with.
    pub fn sentence(&self) -> String {
        match &self.way_out {
            None => crate::store::check::schema_damaged_sentence(&self.problems),
            Some(way_out) => format!(
                "memscope's schema on this database was changed by a raw SQL client ({}): {way_out}",
                self.problems.join("; ")
            ),
        }
    }
}

impl std::fmt::Display for SchemaDamaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.sentence())
    }
}

impl std::error::Error for SchemaDamaged {}

/// What a [`Store`] is opened for, where memscope's schema was changed by a raw SQL client
/// ([`SchemaDamaged`]): a command refuses it; `check` reports it; `init` sets back a schema
/// version that was lowered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    Use,
    Check,
    Repair,
}

/// A path that names a device, a pipe or a socket, where a database was asked for: refused in
/// one sentence before SQLite touches it.
#[derive(Debug)]
pub struct NotAFile(pub PathBuf, pub &'static str);

impl std::fmt::Display for NotAFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is {}, not a regular file, so it cannot hold a database: pass a file path with --db",
            self.0.display(),
            self.1
        )
    }
}

impl std::error::Error for NotAFile {}

/// What `path` is when it exists and is neither a regular file nor a directory (`a character
/// device`, `a named pipe`…), read by `stat` alone: opening a pipe would wait for a writer.
pub(crate) fn not_a_regular_file(path: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(path).ok()?;
    let kind = meta.file_type();
    if kind.is_file() || kind.is_dir() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() {
            return Some("a character device");
        }
        if kind.is_block_device() {
            return Some("a block device");
        }
        if kind.is_fifo() {
            return Some("a named pipe");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
    }
    Some("a special file")
}

/// What is wrong with the header of the SQLite database at `path`, which SQLite refused to
/// open: `None` when the file is no SQLite database at all (or its header reads as sound).
/// A file is taken for a damaged database when enough of SQLite's header stands — its
/// signature, or both the fixed payload fractions (bytes 21–23 are 64, 32, 32 in every SQLite
/// file) and a length that is a whole number of its stated pages — and the first field that breaks
/// SQLite's file format is named. It opens the file with the OS, and closing that drops every
/// SQLite lock this process holds on it: `check` calls it only after its own open failed, with
/// no connection to the file left (`AnyStore::open` returned an error, so the connection it
/// made is gone).
pub fn header_problem(path: &Path) -> Option<String> {
    use std::io::Read;
    // A pipe would hold the open until a writer came: only a file has a header.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut h = [0u8; 100];
    f.read_exact(&mut h).ok()?;
    let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let page = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65536,
        n => u32::from(n),
    };
    let page_ok = page.is_power_of_two() && (512..=65536).contains(&page);
    let signature = h[..16] == *b"SQLite format 3\0";
    let fractions = h[21..24] == [64, 32, 32];
    let whole_pages = page_ok && len >= 512 && len % u64::from(page) == 0;
    if !(signature || (fractions && whole_pages)) {
        return None;
    }
    let problem = if !signature {
        "its first 16 bytes are not SQLite's signature (\"SQLite format 3\")".to_string()
    } else if !page_ok {
        format!("its page size (bytes 16–17) reads {page}, where SQLite keeps a power of two from 512 to 65536")
    } else if !(1..=2).contains(&h[18]) || !(1..=2).contains(&h[19]) {
        format!(
            "its file format versions (bytes 18–19) read {} and {}, where SQLite writes 1 or 2",
            h[18], h[19]
        )
    } else if !fractions {
        format!("its payload fractions (bytes 21–23) read {}, {}, {}, where SQLite always writes 64, 32, 32", h[21], h[22], h[23])
    } else if !(1..=4).contains(&be32(44)) && be32(44) != 0 {
        format!(
            "its schema format number (bytes 44–47) reads {}, where SQLite writes 1 to 4",
            be32(44)
        )
    } else if !(1..=3).contains(&be32(56)) && be32(56) != 0 {
        format!(
            "its text encoding (bytes 56–59) reads {}, where SQLite writes 1 to 3",
            be32(56)
        )
    } else if len % u64::from(page) != 0 {
        format!("it is {len} bytes long, not a whole number of its {page}-byte pages (cut short, or its page size was overwritten)")
    } else {
        return None;
    };
    Some(problem)
}

/// [`error_text`] without SQLite's refusals made sentences: the cause as SQLite said it, once
/// (for a report that says what to do itself, as `check`'s DAMAGED line does).
pub fn cause_text(e: &anyhow::Error) -> String {
    chain_text(e, false)
}

fn chain_text(e: &anyhow::Error, sentences: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        if let Some(sentence) = cause
            .downcast_ref::<rusqlite::Error>()
            .filter(|_| sentences)
            .and_then(sqlite_sentence)
        {
            parts.push(sentence);
            break;
        }
        let text = cause.to_string();
        if parts
            .last()
            .is_some_and(|last| last.contains(&text) || text.contains(last.as_str()))
        {
            // The same cause again (rusqlite's source repeats its message after a code).
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

/// What SQLite's refusal means for the user, where a sentence can say more than its message.
fn sqlite_sentence(e: &rusqlite::Error) -> Option<String> {
    match e {
        rusqlite::Error::SqliteFailure(f, message) => {
            let said = message.clone().unwrap_or_else(|| f.to_string());
            match f.code {
                rusqlite::ErrorCode::DatabaseCorrupt => Some(format!(
                    "the database file is damaged (SQLite: {said}): stop the writers, keep a copy of the file, and restore a backup — or salvage what SQLite can still read with `sqlite3 FILE .recover | sqlite3 NEW` and check NEW with `memscope --db NEW check`"
                )),
                rusqlite::ErrorCode::SystemIoFailure => Some(format!(
                    "reading or writing the database file failed (SQLite: {said}): point --db at a regular file on a disk that has room and reports no errors"
                )),
                // SQLITE_CONSTRAINT_TRIGGER: a trigger's RAISE — one of memscope's guards, or a
                // raw client's (found by review: "memscope: memscope: blocked: Error code 1811:
                // constraint failed").
                rusqlite::ErrorCode::ConstraintViolation if f.extended_code == 1811 => {
                    let said = message.as_deref().unwrap_or("no reason given");
                    let said = said.strip_prefix("memscope: ").unwrap_or(said);
                    Some(format!(
                        "a trigger on the database refused the change ({said}), so nothing was changed: memscope's own guards refuse what would break an invariant, and `memscope check` names any trigger memscope did not make"
                    ))
                }
                // A damaged page can claim a record of gigabytes, and SQLite, asked to hold
                // it, says it ran out of memory (found by review: a damaged index made `list`
                // say only "out of memory").
                rusqlite::ErrorCode::OutOfMemory => Some(format!(
                    "SQLite ran out of memory (SQLite: {said}); on a machine with memory to spare this is most often a damaged file whose page claims a huge record: run `memscope check --full`, and restore a backup if it finds damage"
                )),
                // SQLITE_READONLY_DIRECTORY: a file in WAL mode is read through its `-shm`,
                // which SQLite must make beside it.
                rusqlite::ErrorCode::ReadOnly if f.extended_code == 1544 => Some(
                    "the database cannot be read where it is: its folder cannot be written, and SQLite reads a database in WAL mode through a `-shm` file it makes beside it — copy the file to a folder you can write and open the copy".to_string(),
                ),
                _ => None,
            }
        }
        // Found by review: a blob in `memories.value` made `list` say only "Invalid column
        // type Blob at index: 2, name: value".
        rusqlite::Error::InvalidColumnType(_, column, found) => Some(format!(
            "a stored row holds {} in the column {}, where memscope stores another type, so something outside memscope changed the database: `memscope check` names the rows",
            check::storage_class(&found.to_string().to_ascii_lowercase()),
            crate::model::escape_controls(column)
        )),
        rusqlite::Error::Utf8Error(..) => Some(
            "a stored row holds text that is not UTF-8, which memscope never writes, so something outside memscope changed the database: `memscope check` names the rows".to_string(),
        ),
        rusqlite::Error::FromSqlConversionFailure(_, _, inner) => Some(format!(
            "a stored row cannot be read ({inner}), so something outside memscope changed the database: `memscope check` names what is wrong"
        )),
        _ => None,
    }
}

/// Ends a transaction a failed step left open, so that the step can be retried.
fn end_open_transaction(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

impl Store {
    /// Runs `read` in one read snapshot: a transaction of its own when none is open, so that
    /// every statement in it sees the same database, and SQLite takes its locks once rather
    /// than once a statement (a scan that looks up each of 300,000 records spent a third of
    /// its time there). Inside an open transaction, `read` runs in that one.
    pub(crate) fn read_snapshot<T>(&self, read: impl FnOnce() -> Result<T>) -> Result<T> {
        if !self.conn.is_autocommit() {
            return read();
        }
        self.conn.execute_batch("BEGIN")?;
        let out = read();
        // Nothing was written: ending the transaction either way loses nothing.
        let ended = self
            .conn
            .execute_batch(if out.is_ok() { "COMMIT" } else { "ROLLBACK" });
        end_open_transaction(&self.conn);
        let out = out?;
        ended?;
        Ok(out)
    }
}

impl Store {
    /// Opens (or creates) the database at `path`, migrating it forward. A file that is not a
    /// database, or a database from a newer memscope, is refused without being touched.
    ///
    /// The file is only ever opened by SQLite: a descriptor opened and closed beside it would
    /// drop every POSIX lock this process holds on it (SQLite's "How To Corrupt An SQLite
    /// Database File", §2.2), and another process could then checkpoint or remove the WAL
    /// under this process's live connections. Any number of processes may open a new path at
    /// the same instant: each step that needs a lock waits for it like a write does.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode) -> Result<Store> {
        Store::open_for(path, mode, Opening::Use)
    }

    /// [`Store::open`] for `check` (a schema a raw client changed is opened, for the check to
    /// report) or `init` (a schema version a raw client lowered is set back first).
    pub fn open_for(path: impl AsRef<Path>, mode: OpenMode, opening: Opening) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        // A PostgreSQL address is not a file name: never create `postgres:/…` folders. This
        // memscope can prepare a PostgreSQL database but not serve one: it connects, so a wrong
        // address gets its own sentence, then says so. (The password is never repeated.)
        if let Some(address) = super::postgres::Address::recognise(path.as_os_str()) {
            return Err(super::postgres::not_served(&address?));
        }
        if let Some(ms) = crate::store::busy_timeout_setting()? {
            BUSY_TIMEOUT_MS.store(ms, Ordering::Relaxed);
        }
        // `stat` only: it opens no descriptor.
        let exists = path.exists();
        if !exists && mode == OpenMode::Existing {
            bail!(
                "no memscope database at {}: create it with `{}`, or load the demo there with `{}`",
                path.display(),
                suggest(&path, "init"),
                suggest(&path, "demo")
            );
        }
        if path.is_dir() {
            bail!(
                "{} is a directory, not a database file: pass a file path with --db",
                path.display()
            );
        }
        // A device or a pipe is no file SQLite can keep a database in (found by review:
        // `/dev/null` was called empty, and `init` there then failed with a disk I/O error).
        if let Some(kind) = not_a_regular_file(&path) {
            return Err(NotAFile(path, kind).into());
        }
        if !exists {
            if let Some(parent) = path.parent() {
                if !parent.as_os_str().is_empty() && !parent.exists() {
                    private::create_private_dirs(parent)?;
                }
            }
        }
        // Read-write where the file allows it: SQLite falls back to read-only by itself when
        // the operating system refuses writing, and says so through `is_readonly`.
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if mode == OpenMode::Create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let connect = || Connection::open_with_flags(&path, flags);
        // SQLite creates the file as it connects; a new one is its owner's alone.
        let connected = if exists {
            connect()
        } else {
            private::create_private(connect)
        };
        let mut conn =
            connected.with_context(|| format!("cannot open the database {}", path.display()))?;
        let read_only = conn
            .is_readonly(rusqlite::MAIN_DB)
            .with_context(|| format!("cannot open the database {}", path.display()))?;
        conn.busy_handler(Some(busy_handler))?;
        let purge_gate = Arc::new(AtomicBool::new(false));
        let gate = purge_gate.clone();
        conn.create_scalar_function(
            schema::PURGE_GATE_FN,
            0,
            FunctionFlags::SQLITE_UTF8,
            move |_| Ok(gate.load(Ordering::SeqCst)),
        )?;

        // Read-only probes first, in one snapshot: nothing below may write to a file we are
        // going to refuse. SQLite reads the header here, so a file that is not a database is
        // found now, untouched.
        let probe = |conn: &Connection| -> Result<(i64, i64, Vec<String>)> {
            let read = || -> rusqlite::Result<(i64, i64, Vec<String>)> {
                conn.execute_batch("BEGIN")?;
                let version = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
                let tables = conn.query_row(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                    [],
                    |r| r.get(0),
                )?;
                let names = schema::names_in(conn)?;
                conn.execute_batch("COMMIT")?;
                Ok((version, tables, names))
            };
            read()
                .inspect_err(|_| end_open_transaction(conn))
                .map_err(Into::into)
        };
        let (version, tables, names) = retry_busy(|| probe(&conn)).map_err(|e| {
            // SQLite refuses a header it cannot read as "not a database", and one whose schema
            // format number is past what it knows as "unsupported file format".
            let not_a_database = match e.downcast_ref::<rusqlite::Error>() {
                Some(rusqlite::Error::SqliteFailure(f, message)) => {
                    f.code == rusqlite::ErrorCode::NotADatabase
                        || message.as_deref() == Some("unsupported file format")
                }
                _ => false,
            };
            if not_a_database {
                anyhow::Error::new(NotADatabase(path.to_path_buf()))
            } else {
                e.context(format!(
                    "{} is not a usable SQLite database",
                    path.display()
                ))
            }
        })?;
        // Another application's database is refused whatever its `user_version` says, before
        // anything is migrated or its journal mode changed (found by an exploratory test).
        if version != 0 && !schema::is_memscope_schema(&names) {
            bail!(
                "{} is a SQLite database but not a memscope one: point --db at a memscope database or a new file name",
                path.display()
            );
        }
        // A version a raw client set below what the tables show — lowered, 0, or negative,
        // which no memscope writes — would run migrations over tables that have them already
        // (found by an exploratory test: a raw SQL error, or a panic for -1). `init` sets it
        // back; any other command refuses with the way out, the file untouched.
        // (Up to date is the common case, and no version is above it: nothing to read.)
        let shown = if version == schema::SCHEMA_VERSION {
            version
        } else {
            schema::version_shown_by(&names)
        };
        let restore_version = if version < shown
            && (version != 0 || schema::is_memscope_schema(&names))
        {
            if opening != Opening::Repair || read_only {
                let file = crate::model::shell_path(&path);
                let problem = format!(
                    "its schema version (PRAGMA user_version) reads {version}, but its tables are those of version {shown}"
                );
                let damage = SchemaDamaged {
                    problems: vec![problem],
                    way_out: Some(format!(
                        "`memscope --db {file} init` sets the version back to {shown}"
                    )),
                };
                return Err(
                    anyhow::Error::new(damage).context(format!("{} is damaged", path.display()))
                );
            }
            Some(shown)
        } else {
            None
        };
        if version > schema::SCHEMA_VERSION {
            bail!(
                "{} uses schema version {version}, newer than this memscope understands ({}): upgrade memscope to open it",
                path.display(),
                schema::SCHEMA_VERSION
            );
        }
        if read_only && version > 0 && version < schema::SCHEMA_VERSION && restore_version.is_none()
        {
            bail!(
                "{} uses schema version {version} and is read-only, so it cannot be brought to version {}: open it once with write access (any memscope command) to migrate it",
                path.display(),
                schema::SCHEMA_VERSION
            );
        }
        if version == 0 && restore_version.is_none() {
            if tables > 0 {
                bail!(
                    "{} is a SQLite database but not a memscope one: point --db at a memscope database or a new file name",
                    path.display()
                );
            }
            if mode == OpenMode::Existing {
                bail!(
                    "{} is empty, not yet a memscope database: create it with `{}`",
                    path.display(),
                    suggest(&path, "init")
                );
            }
            if read_only {
                bail!("{} is read-only and empty: nothing to show", path.display());
            }
        }

        let opened_file = file_id(&path);
        let mut store = Store {
            hot: hot::HotStmts::default(),
            spellings: spellings::SpellingMemo::default(),
            known_places: None,
            place_sources: tx::Sources::default(),
            conn,
            opened_file,
            wal_seen: 0,
            log_seen: None,
            path,
            read_only,
            clock: Clock::System,
            assert_invariants: std::env::var("MEMSCOPE_ASSERT_INVARIANTS").is_ok_and(|v| v == "1"),
            purge_gate,
            fresh_inserts: true,
            schema_damage: None,
            version_restored: None,
        };
        store.configure_connection()?;
        if let Some(shown) = restore_version {
            // `init` only (above): the version the tables show, then the migrations after it.
            retry_busy(|| {
                let tx = store
                    .conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                tx.pragma_update(None, "user_version", shown)?;
                tx.commit()?;
                Ok(())
            })?;
            store.version_restored = Some((version, shown));
        }
        if !read_only {
            // A new database is seeded in the same transaction that creates it, so no writer
            // ever sees it without its aliases. Each step rolls back on failure, so a busy
            // step is simply run again.
            let gate = store.purge_gate.clone();
            let clock = store.clock;
            retry_busy(|| {
                schema::migrate_with_hook(&mut store.conn, schema::MIGRATIONS, &|tx, v| {
                    if v == 1 {
                        seed_defaults(tx)?;
                    }
                    if v == 4 {
                        // Spellings v3 kept apart become one (it rewrites history rows).
                        gate.store(true, Ordering::SeqCst);
                        let merged = spellings::merge_spellings(tx, &format_time(clock.now()));
                        gate.store(false, Ordering::SeqCst);
                        merged?;
                    }
                    Ok(())
                })
            })
            .map_err(|e| anyhow!("{}: {}", store.path.display(), error_text(&e)))?;
        }
        // Held to the schema once a connection (a few table descriptions, well under a
        // millisecond): a table or column a raw client dropped stops every command that reads
        // it, and one that lost its constraints lets a write store a broken row (README,
        // "check", the SCHEMA line) — found by an exploratory test.
        let missing = crate::store::check::missing_columns(|table| {
            Ok(store
                .conn
                .prepare_cached("SELECT name FROM pragma_table_info(?1)")?
                .query_map([table], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?)
        })?;
        let damage = if !missing.is_empty() {
            Some(SchemaDamaged {
                problems: missing,
                way_out: None,
            })
        } else {
            let lost = schema::lost_rules(&store.conn)?;
            (!lost.is_empty()).then(|| SchemaDamaged::loosened(lost, &store.path))
        };
        if let Some(damage) = damage {
            // A command refuses, and so does `init` (it cannot make them again); a table
            // that only lost its constraints is still read (an export is the way out).
            let refused = match opening {
                Opening::Check => false,
                Opening::Repair => true,
                Opening::Use => damage.way_out.is_none(),
            };
            if refused {
                return Err(anyhow::Error::new(damage)
                    .context(format!("{} is damaged", store.path.display())));
            }
            store.schema_damage = Some(damage);
        } else if !read_only {
            store.apply_durability()?;
            // A purge owed by an earlier delete is paid on open when nothing blocks it.
            store.pay_purge_debt()?;
        }
        store.note_log()?;
        Ok(store)
    }

    fn configure_connection(&mut self) -> Result<()> {
        let c = &self.conn;
        if !self.read_only {
            // Switching to WAL takes the lock without consulting the busy handler.
            let mode: String =
                retry_busy(|| Ok(c.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?))?;
            if !mode.eq_ignore_ascii_case("wal") {
                bail!(
                    "{} could not be switched to WAL mode (got {mode})",
                    self.path.display()
                );
            }
        }
        // Every commit that answers a client is on disk before the answer; the `durability`
        // setting may trade that away (see `apply_durability`).
        c.pragma_update(None, "synchronous", "FULL")?;
        // Deleted content must not linger in free pages (bundled SQLite defaults this off).
        c.pragma_update(None, "secure_delete", "ON")?;
        c.pragma_update(None, "foreign_keys", "ON")?;
        // Savepoints (one per `apply` line) keep their statement journal in memory.
        c.pragma_update(None, "temp_store", "MEMORY")?;
        // 32 MiB of page cache: index pages of a large database stay hot across a bulk apply.
        c.pragma_update(None, "cache_size", -32768)?;
        c.pragma_update(None, "wal_autocheckpoint", 4000)?;
        // Query-planner stability: without it SQLite re-plans (re-parses) the write path's
        // cached statements on many runs as tables grow, which doubled the cost of a write.
        c.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        c.set_prepared_statement_cache_capacity(64);
        Ok(())
    }

    /// Applies the `durability` setting: `full` (the default) syncs the WAL at every commit,
    /// so an acknowledged write survives a power loss; `normal` syncs only at checkpoints,
    /// which keeps the file consistent but may lose the last commits.
    fn apply_durability(&mut self) -> Result<()> {
        let level = Durability::from_setting(self.setting(DURABILITY_KEY)?.as_deref());
        self.conn
            .pragma_update(None, "synchronous", level.pragma())?;
        Ok(())
    }

    /// The durability in force on this connection, as `PRAGMA synchronous` reports it.
    pub fn durability(&self) -> Result<Durability> {
        let n: i64 = self
            .conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))?;
        Ok(if n >= 2 {
            Durability::Full
        } else {
            Durability::Normal
        })
    }

    /// Moves the causal clock past every number stored, where a client set it back around
    /// memscope (README, "check", invariant 2: `init` repairs it); `Some((from, to))` when it
    /// moved.
    pub fn clock_past_stored(&mut self) -> Result<Option<(i64, i64)>> {
        self.in_write_tx(|tx, _, st| {
            let highest: Option<i64> =
                tx.query_row(crate::store::check::HIGHEST_STORED_NUMBER, [], |r| r.get(0))?;
            let from = st.seqs.current(tx)?;
            match highest {
                Some(to) if to > from => {
                    st.seqs.observe(tx, to)?;
                    Ok(Some((from, to)))
                }
                _ => Ok(None),
            }
        })
    }

    /// Writes the `causal_clock` setting again where it holds what no clock is — not a whole
    /// number from 0 to 2^53 (a raw client's `9007199254740993`, or `abc`) — as the clock
    /// memscope reads it by (the highest number stored: `tx::clock_now`), so `check` is clean
    /// of it (README, "check", invariant 2: `init` repairs it); `Some((stored, clock))` when it
    /// wrote it. Numbers `seq` handed out that no row holds may be handed out again.
    pub fn clock_setting_rewritten(&mut self) -> Result<Option<(String, i64)>> {
        self.in_write_tx(|tx, _, _| {
            let stored: Option<String> = tx
                .query_row(
                    "SELECT CAST(value AS TEXT) FROM settings WHERE key = 'causal_clock'",
                    [],
                    |r| r.get(0),
                )
                .optional()?
                .flatten();
            let Some(stored) = stored else {
                return Ok(None);
            };
            let readable = stored.parse::<i64>().is_ok_and(|n| {
                n.to_string() == stored && (0..=crate::model::MAX_CAUSAL_SEQ).contains(&n)
            });
            if readable {
                return Ok(None);
            }
            let clock = tx::highest_stored(tx)?;
            tx.execute(
                "UPDATE settings SET value = ?1 WHERE key = 'causal_clock'",
                [clock.to_string()],
            )?;
            Ok(Some((stored, clock)))
        })
    }

    /// Makes every guard trigger again that is missing or not as memscope made it, and returns
    /// their names (README, "check": `init` restores the guards). Triggers of other clients
    /// are left alone: `check` names them, for their owner to remove.
    pub fn restore_guards(&mut self) -> Result<Vec<&'static str>> {
        let conn = &mut self.conn;
        let restored = retry_busy(|| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let mut restored = Vec::new();
            for name in schema::GUARD_TRIGGERS {
                let sql = schema::guard_trigger_sql(name)
                    .with_context(|| format!("the schema has no guard {name}"))?;
                let intact: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_master
                                    WHERE type = 'trigger' AND name = ?1 AND sql = ?2)",
                    rusqlite::params![name, sql],
                    |r| r.get(0),
                )?;
                if !intact {
                    tx.execute_batch(&format!("DROP TRIGGER IF EXISTS {name}; {sql};"))?;
                    restored.push(name);
                }
            }
            // The identity's unique key of each table that keeps one row an identity; refused
            // while two rows of one identity stand.
            for (table, index, sql, two_rows) in [
                (
                    "memories",
                    "memories_identity",
                    schema::IDENTITY_INDEX_SQL,
                    crate::store::check::IDENTITY_NOT_UNIQUE,
                ),
                (
                    "tombstones",
                    "tombstones_identity",
                    schema::TOMBSTONE_INDEX_SQL,
                    crate::store::check::TOMBSTONE_NOT_UNIQUE,
                ),
            ] {
                if schema::unique_on_identity(&tx, table)? {
                    continue;
                }
                match tx.execute_batch(sql) {
                    Err(rusqlite::Error::SqliteFailure(f, _))
                        if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                    {
                        bail!(two_rows)
                    }
                    done => done?,
                }
                restored.push(index);
            }
            tx.commit()?;
            Ok(restored)
        });
        restored.map_err(|e| explain_sqlite(e, &self.path))
    }

    /// Makes every index of memscope's schema again that a raw client dropped, and returns
    /// their names (README, "check": `init` makes them again).
    pub fn restore_indexes(&mut self) -> Result<Vec<&'static str>> {
        self.ensure_writable()?;
        let conn = &mut self.conn;
        let restored = retry_busy(|| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let missing = schema::missing_indexes(&tx)?;
            for (name, sql) in schema::contract_indexes() {
                if missing.contains(&name.as_str()) {
                    tx.execute_batch(sql)?;
                }
            }
            tx.commit()?;
            Ok(missing)
        });
        restored.map_err(|e| explain_sqlite(e, &self.path))
    }

    /// The schema version this open set back (`init`, [`Opening::Repair`]): from what a raw
    /// client had set it to, to what its tables show.
    pub fn version_restored(&self) -> Option<(i64, i64)> {
        self.version_restored
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Turns the per-write invariant re-check on or off (on when MEMSCOPE_ASSERT_INVARIANTS=1).
    pub fn set_assert_invariants(&mut self, on: bool) {
        self.assert_invariants = on;
    }

    /// Turns the one-statement insert of new identities off, so every write takes the full
    /// decision. For tests that hold the shortcut to the full path.
    #[doc(hidden)]
    pub fn set_fresh_inserts(&mut self, on: bool) {
        self.fresh_inserts = on;
    }

    pub(crate) fn now(&self) -> String {
        format_time(self.clock.now())
    }

    /// Direct access for read-only diagnostics in tests and benchmarks.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    fn ensure_writable(&self) -> Result<()> {
        if self.file_moved() {
            return Err(moved_error(&self.path));
        }
        if let Some(damage) = &self.schema_damage {
            return Err(anyhow::Error::new(damage.clone())
                .context(format!("{} is damaged", self.path.display())));
        }
        if self.read_only {
            bail!(
                "{} is read-only: memscope can show it but not change it (check the file's permissions)",
                self.path.display()
            );
        }
        Ok(())
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`), translating a lock timeout into a
    /// sentence.
    fn begin(&mut self) -> Result<rusqlite::Transaction<'_>> {
        self.ensure_writable()?;
        let (file, opened) = (self.path.clone(), self.opened_file);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| locked_error(e, &file.display().to_string()))?;
        // Asked again with the lock held: a write that waited for it may find the file gone —
        // a refused import removes the file it made once it holds that lock itself
        // ([`remove_made_file`]) — and must write nothing into a file no path names (found by
        // an exploratory test: such a write was told `inserted` and lost).
        if opened.is_some() && file_id(&file) != opened {
            drop(tx);
            return Err(moved_error(&file));
        }
        Ok(tx)
    }

    /// Takes the busy retries no commit has recorded yet and adds them to the metric inside
    /// `tx`. Returns how many it took: [`Store::unrecord_busy_retries`] gives them back when
    /// `tx` does not commit.
    fn record_busy_retries(tx: &rusqlite::Transaction<'_>) -> Result<u64> {
        let taken = BUSY_UNRECORDED.swap(0, Ordering::Relaxed);
        if taken > 0 {
            if let Err(e) = bump_metric(tx, "busy_retries", taken as i64) {
                Self::unrecord_busy_retries(taken);
                return Err(e);
            }
        }
        Ok(taken)
    }

    fn unrecord_busy_retries(taken: u64) {
        BUSY_UNRECORDED.fetch_add(taken, Ordering::Relaxed);
    }

    /// Allocates the next causal sequence number.
    pub fn next_seq(&mut self) -> Result<i64> {
        // No event records this number, so the transaction's flush writes it to settings.
        self.in_write_tx(|tx, _, st| st.seqs.alloc(tx))
    }

    /// Whether the path no longer names the file this connection opened: it was removed, or
    /// another file was moved over it (a backup put back with `mv`). SQLite goes on with the
    /// file it has open — and with the `-wal` and `-shm` still at the path, which a file moved
    /// there would adopt as its own log: a write now, or the checkpoint a closing connection
    /// makes, would corrupt it. So no write transaction begins (`ensure_writable`; SQLite
    /// refuses such a write only in rollback-journal mode), no WAL is truncated, and the UI says
    /// so. (Closing, SQLite itself skips its checkpoint when the file has moved.) A `stat`: no
    /// descriptor.
    pub fn file_moved(&self) -> bool {
        self.opened_file.is_some() && file_id(&self.path) != self.opened_file
    }

    /// Called by a long-lived process (the UI, the MCP server) every few hundred ms: when the
    /// `-wal` at the path holds frames and has not grown since the last call — no one wrote in
    /// between — checkpoints it and truncates it to nothing, without waiting for anyone (a
    /// reader in the way: the next idle call tries again). A CLI command's log is emptied when
    /// it closes, but while another process keeps the database open no close can, and a file
    /// moved over the path adopts whatever log it finds there (`file_moved`; README, "The
    /// terminal UI", a database file removed or replaced): an idle database keeps an empty one. Pays a purge
    /// debt the same way (README, "delete, restore, gc").
    pub fn settle_idle_log(&mut self) -> Result<()> {
        if self.file_moved() {
            return self.release_moved_log();
        }
        self.note_log()?;
        let size = std::fs::metadata(wal_path(&self.path)).map_or(0, |m| m.len());
        let seen = std::mem::replace(&mut self.wal_seen, size);
        if size == 0 || size != seen || self.read_only {
            return Ok(());
        }
        if rows::purge_debt_owed(&self.conn)? {
            self.pay_purge_debt()?;
        } else {
            self.truncate_wal_waiting(None)?;
        }
        self.wal_seen = std::fs::metadata(wal_path(&self.path)).map_or(0, |m| m.len());
        Ok(())
    }

    /// Notes the log at the path and the commits seen so far, while the path names the opened
    /// file (`release_moved_log`).
    fn note_log(&mut self) -> Result<()> {
        self.log_seen = match file_id(&wal_path(&self.path)) {
            Some(log) => Some((log, self.data_version()?)),
            None => None,
        };
        Ok(())
    }

    /// The path names another file now (`file_moved`), and the `-wal` still at it holds what
    /// this connection wrote into the file it opened — which the file at the path would read
    /// as its own pages. So the log is checkpointed into the opened file (through this
    /// connection's descriptor: the file moved aside, or removed, keeps its writes) and
    /// truncated, leaving the file at the path an empty log. Only when it is still the log
    /// noted while the path named the opened file and no other connection has committed since:
    /// a commit after the move was made on the new file, into its log, and is not ours to move.
    /// A reader in the way defers it to the next call, without waiting.
    fn release_moved_log(&mut self) -> Result<()> {
        let Some((log, version)) = self.log_seen else {
            return Ok(());
        };
        let path = wal_path(&self.path);
        if self.read_only
            || file_id(&path) != Some(log)
            || std::fs::metadata(&path).map_or(0, |m| m.len()) == 0
            || self.data_version()? != version
        {
            return Ok(());
        }
        self.checkpoint_truncate(None).map(drop)
    }

    /// `PRAGMA data_version`: changes when another connection commits. The UI polls it.
    pub fn data_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    pub fn setting(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// Sets a `settings` key (documented keys: retention_days, tombstone_safe_days, demo).
    pub fn set_setting(&mut self, key: &str, value: &str) -> Result<()> {
        self.in_write_tx(|tx, _, _| {
            tx.execute(
                "INSERT OR REPLACE INTO settings (key, value) VALUES (?1, ?2)",
                rusqlite::params![key, value],
            )?;
            Ok(())
        })
    }

    /// Adds an alias; both sides are normalized. Refuses chains and self-aliases
    /// ([`crate::store::alias`] judges).
    pub fn add_alias(
        &mut self,
        alias: &str,
        canonical: &str,
    ) -> Result<crate::store::alias::AliasAdded> {
        let (alias, canonical) = crate::store::alias::normalized_pair(alias, canonical)?;
        // A purge transaction: a moved item waiting on deleted places only is destroyed.
        let (added, _) = self.in_purge_tx(|tx, ctx, _| {
        let canonical_is_alias: Option<String> = tx
            .query_row(
                "SELECT canonical FROM predicate_aliases WHERE alias = ?1",
                [&canonical],
                |r| r.get(0),
            )
            .optional()?;
        use crate::store::alias::{
            Held, HELD_SQL, HELD_SUBJECTS_SQL, MOVED_SHADOWED_SQL, MOVE_PENDING_SQL, MOVE_READS_SQL,
            RELABEL_SHADOWED_SQL,
            TOMBSTONED_SCOPES_SQL,
        };
        let before: Option<String> = tx
            .query_row(
                "SELECT canonical FROM predicate_aliases WHERE alias = ?1",
                [&alias],
                |r| r.get(0),
            )
            .optional()?;
        let mut held = tx.query_row(HELD_SQL, [&alias], |r| {
            Ok(Held {
                live: r.get(0)?,
                deleted: r.get(1)?,
                past_values: r.get(2)?,
                past_subjects: Vec::new(),
            })
        })?;
        if held.past_values > 0 {
            held.past_subjects = tx
                .prepare(HELD_SUBJECTS_SQL)?
                .query_map([&alias], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
        }
        crate::store::alias::judge(&alias, &canonical, canonical_is_alias.as_deref(), held)?;
        let repointed = tx
            .prepare("UPDATE predicate_aliases SET canonical = ?2 WHERE canonical = ?1 RETURNING alias")?
            .query_map(rusqlite::params![alias, canonical], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<String>>>()?;
        // `?2` where PostgreSQL writes `$2`: SQLite numbers `$` parameters by first use.
        let moved: Vec<(i64, String, String, String)> = tx
            .prepare(&MOVE_PENDING_SQL.replace('$', "?"))?
            .query_map([&alias, &canonical], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let shadowed: Vec<String> = tx
            .prepare(&MOVED_SHADOWED_SQL.replace('$', "?"))?
            .query_map([&alias], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for text in shadowed {
            let relabeled = crate::store::alias::unversioned_labels(&text);
            tx.execute(
                &RELABEL_SHADOWED_SQL.replace('$', "?"),
                [&alias, &text, &relabeled],
            )?;
        }
        let reads = tx.execute(&MOVE_READS_SQL.replace('$', "?"), [&alias, &canonical])? as i64;
        tx.execute(
            "INSERT OR REPLACE INTO predicate_aliases (alias, canonical, added_at) VALUES (?1, ?2, ?3)",
            rusqlite::params![alias, canonical, ctx.now],
        )?;
        let mut added = crate::store::alias::AliasAdded::new(
            alias.clone(),
            canonical.clone(),
            repointed,
            (moved.len() as i64, reads),
            before,
        );
        let mut deleted = tx.prepare(TOMBSTONED_SCOPES_SQL)?;
        for (id, subject, candidates, status) in &moved {
            let scopes = deleted
                .query_map([subject, &canonical], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()?;
            if crate::store::alias::waits_on_deleted_only(status, candidates, &scopes) {
                added.dropped_pending +=
                    tx.execute("DELETE FROM pending WHERE id = ?1", [id])? as i64;
            }
        }
        Ok(added)
        }, |added| added.dropped_pending > 0)?;
        // Like a delete's, the purge reached the disk (the WAL truncated) or is owed.
        Ok(added)
    }

    /// Removes the alias `alias` ([`crate::store::alias::removed`] says what happened).
    pub fn remove_alias(&mut self, alias: &str) -> Result<(String, String)> {
        let alias =
            crate::model::normalize_predicate(alias).map_err(crate::model::InvalidRequest)?;
        let canonical = self.in_write_tx(|tx, _, _| {
            Ok(tx
                .query_row(crate::store::alias::REMOVE_SQL, [&alias], |r| r.get(0))
                .optional()?)
        })?;
        crate::store::alias::removed(alias, canonical)
    }

    pub fn aliases(&self) -> Result<Vec<(String, String)>> {
        pairs(
            &self.conn,
            "SELECT alias, canonical FROM predicate_aliases ORDER BY canonical, alias",
        )
    }

    /// Normalizes a predicate and maps it through the alias table.
    pub fn canonical_predicate(&self, raw: &str) -> Result<String> {
        canonical_predicate(&self.conn, raw)
    }
}

/// `memscope --db PATH COMMAND` for this very file, pasteable: a bare `memscope init` would
/// act on whatever `$MEMSCOPE_DB` or the default path says, not necessarily here.
fn suggest(path: &Path, command: &str) -> String {
    format!("memscope --db {} {command}", crate::model::shell_path(path))
}

/// The database's files and folder that group or others can reach (see `check`).
pub fn exposures(path: &Path) -> Vec<Exposure> {
    private::exposures(path)
}

/// Default aliases and settings of a new database.
fn seed_defaults(tx: &rusqlite::Transaction<'_>) -> Result<()> {
    let now = format_time(Utc::now());
    for (alias, canonical) in default_aliases()? {
        tx.execute(
            "INSERT OR REPLACE INTO predicate_aliases (alias, canonical, added_at) VALUES (?1, ?2, ?3)",
            rusqlite::params![alias, canonical, now],
        )?;
    }
    for (key, value) in DEFAULT_SETTINGS {
        tx.execute(
            "INSERT OR IGNORE INTO settings (key, value) VALUES (?1, ?2)",
            rusqlite::params![key, value],
        )?;
    }
    Ok(())
}

/// The settings every new database starts with (either backend).
pub const DEFAULT_SETTINGS: &[(&str, &str)] = &[
    ("retention_days", "0"),
    ("tombstone_safe_days", "30"),
    ("causal_clock", "0"),
];

/// Removes the database file `path` and its journals, which a refused command made where no
/// file was (README, "seq, alias, export / import") — unless another process wrote into it
/// meanwhile: a write that waited for the refused command's lock commits once that rolls back
/// (found by an exploratory test: the file went with a write whose client was told
/// `inserted`). It looks and removes under the write lock, so nothing lands in between; a write
/// that waited for that lock finds the file gone and writes nothing (`Store::begin`), and
/// closing, SQLite leaves a removed file's log alone. Returns whether the file stays.
pub fn remove_made_file(path: &Path) -> bool {
    let remove = || {
        // The database first: a connection that finds it gone neither checkpoints nor deletes
        // the log by its name, which a new file at the path may own by then.
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut file = path.as_os_str().to_owned();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    };
    let Ok(conn) = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) else {
        remove();
        return false;
    };
    let locked = conn.busy_timeout(std::time::Duration::from_secs(5)).is_ok()
        && conn.execute_batch("BEGIN IMMEDIATE").is_ok();
    if !locked {
        return true;
    }
    if made_file_untouched(&conn).unwrap_or(false) {
        remove();
        drop(conn);
        return false;
    }
    true
}

/// Whether a database file holds only what a new one does: no memory, event, tombstone,
/// pending item or logged read, and the default settings and aliases — or no schema at all.
fn made_file_untouched(conn: &Connection) -> Result<bool> {
    let schema: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'memories'",
        [],
        |r| r.get(0),
    )?;
    if schema == 0 {
        return Ok(true);
    }
    let rows: i64 = conn.query_row(
        "SELECT (SELECT count(*) FROM memories) + (SELECT count(*) FROM history)
              + (SELECT count(*) FROM tombstones) + (SELECT count(*) FROM pending)
              + (SELECT count(*) FROM reads)",
        [],
        |r| r.get(0),
    )?;
    use std::collections::BTreeSet;
    let settings: BTreeSet<(String, String)> = pairs(conn, "SELECT key, value FROM settings")?
        .into_iter()
        .collect();
    let defaults: BTreeSet<(String, String)> = DEFAULT_SETTINGS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let aliases: BTreeSet<(String, String)> =
        pairs(conn, "SELECT alias, canonical FROM predicate_aliases")?
            .into_iter()
            .collect();
    let default_aliases: BTreeSet<(String, String)> = default_aliases()?.into_iter().collect();
    Ok(rows == 0 && settings == defaults && aliases == default_aliases)
}

/// The aliases every new database starts with (either backend): `assets/aliases.json`,
/// normalized, as (alias, canonical) pairs.
pub fn default_aliases() -> Result<Vec<(String, String)>> {
    let aliases: serde_json::Map<String, serde_json::Value> = serde_json::from_str(DEFAULT_ALIASES)
        .context("assets/aliases.json is not a JSON object")?;
    let mut pairs = Vec::new();
    for (alias, canonical) in &aliases {
        if alias.starts_with('_') {
            continue; // comment keys
        }
        let canonical = canonical
            .as_str()
            .ok_or_else(|| anyhow!("alias {alias} must map to a string"))?;
        let alias =
            crate::model::normalize_predicate(alias).map_err(crate::model::InvalidRequest)?;
        let canonical =
            crate::model::normalize_predicate(canonical).map_err(crate::model::InvalidRequest)?;
        if alias != canonical {
            pairs.push((alias, canonical));
        }
    }
    Ok(pairs)
}

/// Every row of `sql` (a query without parameters) as the pair of its first two columns.
pub(crate) fn pairs<A: rusqlite::types::FromSql, B: rusqlite::types::FromSql>(
    conn: &Connection,
    sql: &str,
) -> Result<Vec<(A, B)>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(crate) fn canonical_predicate(conn: &Connection, raw: &str) -> Result<String> {
    let p = crate::model::normalize_predicate(raw).map_err(crate::model::InvalidRequest)?;
    let mapped: Option<String> = conn
        .prepare_cached("SELECT canonical FROM predicate_aliases WHERE alias = ?1")?
        .query_row([&p], |r| r.get(0))
        .optional()?;
    Ok(mapped.unwrap_or(p))
}

pub(crate) fn bump_metric(conn: &Connection, name: &str, by: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO metrics (name, value) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET value = value + ?2",
    )?
    .execute(rusqlite::params![name, by])?;
    Ok(())
}

fn locked_error(e: rusqlite::Error, path: &str) -> anyhow::Error {
    if let rusqlite::Error::SqliteFailure(f, _) = &e {
        if f.code == rusqlite::ErrorCode::DatabaseBusy
            || f.code == rusqlite::ErrorCode::DatabaseLocked
        {
            return anyhow!(
                "the database {path} stayed locked by another process past the timeout: retry, or stop the process holding it"
            );
        }
        if f.code == rusqlite::ErrorCode::ReadOnly {
            return anyhow!(read_only_sentence(path));
        }
        if f.code == rusqlite::ErrorCode::DiskFull {
            return anyhow!(
                "the disk holding {path} is full: free space and retry; nothing was written"
            );
        }
    }
    anyhow::Error::new(e).context(format!("cannot start a write on {path}"))
}

/// Why the database at `path` cannot be written, as far as its files' modes tell. A read of a
/// read-only database leaves its `-wal` and `-shm` read-only too (SQLite gives them the
/// database's mode), and after `chmod u+w` of the database alone they still refuse every write
/// (found by review): those are named. Modes only — opening a file to test it would drop the
/// locks this process holds on it.
fn read_only_sentence(path: &str) -> String {
    let read_only = |p: &str| std::fs::metadata(p).is_ok_and(|m| m.permissions().readonly());
    let side: Vec<String> = ["-wal", "-shm"]
        .iter()
        .map(|suffix| format!("{path}{suffix}"))
        .filter(|p| read_only(p))
        .collect();
    if read_only(path) {
        return format!(
            "the database {path} is read-only: check the file's and its folder's permissions"
        );
    }
    if side.is_empty() {
        // The file's mode allows writing: its folder, the file system, or the file's own
        // header (a file format write version past 2, byte 18, makes SQLite open it read-only)
        // refuses — which `check` reads once no connection is open.
        return format!(
            "the database {path} is read-only though its mode allows writing: check its folder's permissions and whether its file system is mounted read-only, and run `memscope --db {path} check`, which names a damaged header"
        );
    }
    format!(
        "the database {path} cannot be written: {} beside it {} read-only (left by a read while the database was read-only): run `chmod u+w {}` and retry",
        side.join(" and "),
        if side.len() == 1 { "is" } else { "are" },
        side.join(" ")
    )
}

/// Turns SQLite lock, read-only and disk-full failures during a write into sentences a user
/// can act on; other errors pass through unchanged.
pub(crate) fn explain_sqlite(e: anyhow::Error, path: &Path) -> anyhow::Error {
    let actionable = matches!(
        e.downcast_ref::<rusqlite::Error>(),
        Some(rusqlite::Error::SqliteFailure(f, _))
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                | rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::DiskFull)
    );
    match e.downcast::<rusqlite::Error>() {
        Ok(sq) if actionable => locked_error(sq, &path.display().to_string()),
        Ok(sq) => anyhow::Error::new(sq),
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_side_file_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("记忆 📦.db");
        let path = db.to_string_lossy().into_owned();
        let set = |p: &str, mode: u32| {
            std::fs::write(p, b"").ok();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set(&path, 0o400);
        set(&format!("{path}-shm"), 0o400);
        assert!(read_only_sentence(&path).contains("is read-only: check the file's"));
        set(&path, 0o600);
        let said = read_only_sentence(&path);
        assert!(
            said.contains(&format!("{path}-shm beside it is read-only"))
                && said.contains(&format!("chmod u+w {path}-shm`")),
            "{said}"
        );
        set(&format!("{path}-wal"), 0o400);
        let said = read_only_sentence(&path);
        assert!(
            said.contains("-wal and ") && said.contains("are read-only"),
            "{said}"
        );
    }

    /// SQLite's "out of memory" on a read is most often a damaged page claiming a huge record:
    /// the sentence sends the user to `check`, in the words of every front end.
    #[test]
    fn out_of_memory_points_at_check() {
        let e = anyhow::Error::new(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOMEM),
            Some("out of memory".into()),
        ))
        .context("cannot list the memories");
        let text = error_text(&e);
        assert!(
            text.starts_with("cannot list the memories: SQLite ran out of memory")
                && text.contains("memscope check --full"),
            "{text}"
        );
    }
}
