//! Memory on PostgreSQL (issue 17): the write path and resolution over the same core as
//! SQLite's — [`validate`] makes a request ready, [`guard::judge`] judges a global write's
//! words and siblings, [`decide_write`] decides, [`resolve_looked`] resolves — with
//! PostgreSQL's own statements, its transactions and its locks.
//!
//! Writers of one identity are serialized by the identity's advisory transaction lock (the
//! same one the schema's guards take), taken before the identity is probed, under READ
//! COMMITTED: every statement after the lock sees what the previous holder committed. The
//! causal clock is the schema's sequence (`memscope_clock_next`, `memscope_clock_observe`).
//! A transaction the server aborts for a deadlock or a serialization failure is run again, and
//! counted into the `busy_retries` metric. What is not served here yet is listed in the README
//! ("Running on PostgreSQL").

#[path = "write.rs"]
mod write;

use super::{schema, Address};
use crate::model::{
    DeletePreview, DeleteReport, DeleteTarget, HistoryEvent, Identity, MemoryRecord, PendingItem,
    ReadRecord, Resolution, Scope, TombstoneRef, WriteOutcome, WriteRequest,
};
use crate::spelling::fold;
use crate::store::decide::{resolve_looked, shadowed_labels, Looked};
use crate::store::events::mark_validity;
use crate::store::events::EventKind;
use crate::store::intake::{InputKind, Intake, ParsedLine};
use crate::store::prepared::{resolution_seq, validate, PreparedWrite, RetryWithSavepoints};
use crate::store::user_settings::{
    checked_user_setting, shown_user_setting, DURABILITY_KEY, USER_SETTINGS,
};
use crate::store::Clock;
use anyhow::{anyhow, bail, Result};
use postgres::error::SqlState;
use postgres::types::{ToSql, Type};
use postgres::{Client, Row, Statement, Transaction};
use serde_json::{json, Value};
use std::collections::HashMap;
use write::{apply_batch, line_error};
pub(super) use write::{write_in_tx, write_probe};

/// The pending columns as [`pending_from_row`] reads them.
macro_rules! pending_select {
    () => {
        "SELECT id, subject, predicate, value, raw, source, causal_seq, candidates, status,
                to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                resolved_scope, resolution, merged_from, reason
         FROM pending"
    };
}

/// What a delete on PostgreSQL says once its vacuum ran: what it reached, and what it cannot.
const VACUUMED: &str = "deleted and the tables vacuumed and analyzed: no row and no planner statistic holds the content any more; PostgreSQL may keep its bytes in the tables' free space until reused, and in its WAL, replicas and backups until they are recycled or expire (README, \"Running on PostgreSQL\")";

/// Lines, and bytes of input, an `apply` transaction takes at most: a batch travels as arrays
/// of parameters, so big values make short batches.
const APPLY_BATCH: usize = 10_000;
const APPLY_BATCH_BYTES: usize = 16 << 20;

/// How often a transaction the server aborted (deadlock, serialization failure) is run again.
const RETRIES: usize = 20;

/// One connection to a memscope database on PostgreSQL, its statements prepared once.
pub struct PgStore {
    client: Client,
    address: Address,
    statements: Statements,
    /// The server takes no writes on this connection: a standby, or a connection whose
    /// transactions are read-only by default (README, docs/SCALING.md "read replicas").
    read_only: bool,
    /// How many times the connection was opened again after the server closed it (what a
    /// connection had set up — a LISTEN — is gone then).
    reconnects: u64,
    /// The clock this connection stamps and ages by: the server's, or an instant a test set
    /// (the session's `memscope.now`, read by `memscope_now()`; set again on a new connection).
    clock: Clock,
    /// A lock timeout of this connection's own (the terminal UI's), set again on a new
    /// connection; `None`: `MEMSCOPE_BUSY_TIMEOUT_MS`'s, set by every connection.
    lock_timeout: Option<std::time::Duration>,
    /// A call of this connection (one with a lock timeout of its own: the UI's) waited that
    /// whole timeout for another session's lock and gave up: until [`PgStore::turn`] finds the
    /// tables free, its statements wait for no lock ([`HELD_WAIT`]), so that the next calls
    /// of the same key fail at once instead of each waiting again (README, "Running on
    /// PostgreSQL", waiting for locks).
    held_back: bool,
    /// How many calls gave up after waiting the whole lock timeout.
    lock_waits: u64,
}

/// The lock wait of a connection held back ([`PgStore::held_back`]): none worth the name.
const HELD_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

/// Every table a UI's read may take a lock on: a statement over them all, planned, takes each
/// table's lock (and gives up at once, held back, when another session holds one), and returns
/// no row.
const ALL_TABLES_FREE: &str = "SELECT 1 FROM memories, history, pending, tombstones, reads,
    spellings, predicate_aliases, settings, metrics LIMIT 0";

/// Whether the server gave up on a lock another session holds (the session's `lock_timeout`).
pub(super) fn lock_not_available(e: &anyhow::Error) -> bool {
    e.downcast_ref::<postgres::Error>()
        .and_then(|p| p.code())
        .is_some_and(|c| *c == SqlState::LOCK_NOT_AVAILABLE)
}

/// Where a [`Tx`]'s statements run: inside a transaction, or each on its own (autocommit).
pub(super) enum Conn<'a> {
    Tx(Transaction<'a>),
    Auto(&'a mut Client),
}

/// A statement parameter whose PostgreSQL type follows from its Rust type, so that a statement
/// can run before it is prepared: in one round trip (`query_typed`) instead of two (prepare,
/// then execute). A command that runs once over a network — a CLI write, the UI's first frame —
/// pays a round trip per statement instead of two (README, "Running on PostgreSQL").
pub(super) trait Param: ToSql + Sync {
    fn pg_type(&self) -> Type;
    fn sql(&self) -> &(dyn ToSql + Sync);
}

/// The PostgreSQL type a Rust type binds as, where memscope binds it.
pub(super) trait Typed {
    const TYPE: Type;
}

impl<T: Typed + ToSql + Sync> Param for T {
    fn pg_type(&self) -> Type {
        T::TYPE
    }
    fn sql(&self) -> &(dyn ToSql + Sync) {
        self
    }
}

macro_rules! typed {
    ($($t:ty => $pg:ident),* $(,)?) => {
        $(impl Typed for $t {
            const TYPE: Type = Type::$pg;
        })*
    };
}

typed! {
    String => TEXT,
    &str => TEXT,
    &String => TEXT,
    i64 => INT8,
    i32 => INT4,
    bool => BOOL,
    f64 => FLOAT8,
    Vec<String> => TEXT_ARRAY,
    Vec<&str> => TEXT_ARRAY,
    &[String] => TEXT_ARRAY,
    &[&str] => TEXT_ARRAY,
    Vec<i64> => INT8_ARRAY,
    Vec<Option<i64>> => INT8_ARRAY,
    Vec<Option<String>> => TEXT_ARRAY,
    Vec<Option<&str>> => TEXT_ARRAY,
    Vec<bool> => BOOL_ARRAY,
    &[i64] => INT8_ARRAY,
    std::time::SystemTime => TIMESTAMPTZ,
    chrono::DateTime<chrono::Utc> => TIMESTAMPTZ,
}

impl<T: Typed> Typed for Option<T> {
    const TYPE: Type = T::TYPE;
}

/// A connection's statements: those prepared, and those run once without being prepared (the
/// second run of one prepares it, so a long-lived connection — the UI, an MCP server —
/// executes each in one round trip with its plan kept, and a short-lived one never prepares).
#[derive(Default)]
pub(super) struct Statements {
    /// `None`: run once, typed, not prepared.
    by_sql: HashMap<&'static str, Option<Statement>>,
}

impl Statements {
    fn clear(&mut self) {
        self.by_sql.clear();
    }
}

/// A transaction (or, for reads, a connection whose every statement commits alone) and the
/// store's prepared statements, together.
pub(super) struct Tx<'a> {
    conn: Conn<'a>,
    statements: &'a mut Statements,
}

/// How [`Tx`] runs a statement: prepared, or typed by its parameters (its first run).
enum Run {
    Prepared(Statement),
    Typed,
}

/// `params` as the driver binds a prepared statement's.
fn untyped<'p>(params: &'p [&'p dyn Param]) -> Vec<&'p (dyn ToSql + Sync)> {
    params.iter().map(|p| p.sql()).collect()
}

/// `params` with their types, for a statement not prepared.
fn typed<'p>(params: &'p [&'p dyn Param]) -> Vec<(&'p (dyn ToSql + Sync), Type)> {
    params.iter().map(|p| (p.sql(), p.pg_type())).collect()
}

impl<'a> Tx<'a> {
    /// The transaction, for what needs one (a portal, a savepoint, `SET LOCAL`). A read run
    /// by [`PgStore::read`] has none: asking is a mistake in memscope, said as an error.
    pub(super) fn txn(&mut self) -> Result<&mut Transaction<'a>> {
        match &mut self.conn {
            Conn::Tx(tx) => Ok(tx),
            Conn::Auto(_) => {
                bail!("memscope asked for a transaction inside a read that runs without one")
            }
        }
    }

    /// `sql` prepared on this connection (once), for a portal.
    pub(super) fn statement(&mut self, sql: &'static str) -> Result<Statement> {
        if let Some(Some(s)) = self.statements.by_sql.get(sql) {
            return Ok(s.clone());
        }
        let s = match &mut self.conn {
            Conn::Tx(tx) => tx.prepare(sql)?,
            Conn::Auto(c) => c.prepare(sql)?,
        };
        self.statements.by_sql.insert(sql, Some(s.clone()));
        Ok(s)
    }

    /// How to run `sql` now: typed on its first run on this connection, prepared after.
    fn run(&mut self, sql: &'static str) -> Result<Run> {
        match self.statements.by_sql.get(sql) {
            Some(Some(s)) => Ok(Run::Prepared(s.clone())),
            Some(None) => Ok(Run::Prepared(self.statement(sql)?)),
            None => {
                self.statements.by_sql.insert(sql, None);
                Ok(Run::Typed)
            }
        }
    }

    pub(super) fn all(&mut self, sql: &'static str, params: &[&dyn Param]) -> Result<Vec<Row>> {
        Ok(match (self.run(sql)?, &mut self.conn) {
            (Run::Prepared(s), Conn::Tx(tx)) => tx.query(&s, &untyped(params))?,
            (Run::Prepared(s), Conn::Auto(c)) => c.query(&s, &untyped(params))?,
            (Run::Typed, Conn::Tx(tx)) => tx.query_typed(sql, &typed(params))?,
            (Run::Typed, Conn::Auto(c)) => c.query_typed(sql, &typed(params))?,
        })
    }

    pub(super) fn opt(&mut self, sql: &'static str, params: &[&dyn Param]) -> Result<Option<Row>> {
        Ok(match (self.run(sql)?, &mut self.conn) {
            (Run::Prepared(s), Conn::Tx(tx)) => tx.query_opt(&s, &untyped(params))?,
            (Run::Prepared(s), Conn::Auto(c)) => c.query_opt(&s, &untyped(params))?,
            (Run::Typed, Conn::Tx(tx)) => tx.query_typed_opt(sql, &typed(params))?,
            (Run::Typed, Conn::Auto(c)) => c.query_typed_opt(sql, &typed(params))?,
        })
    }

    pub(super) fn one(&mut self, sql: &'static str, params: &[&dyn Param]) -> Result<Row> {
        Ok(match (self.run(sql)?, &mut self.conn) {
            (Run::Prepared(s), Conn::Tx(tx)) => tx.query_one(&s, &untyped(params))?,
            (Run::Prepared(s), Conn::Auto(c)) => c.query_one(&s, &untyped(params))?,
            (Run::Typed, Conn::Tx(tx)) => tx.query_typed_one(sql, &typed(params))?,
            (Run::Typed, Conn::Auto(c)) => c.query_typed_one(sql, &typed(params))?,
        })
    }

    pub(super) fn exec(&mut self, sql: &'static str, params: &[&dyn Param]) -> Result<u64> {
        Ok(match (self.run(sql)?, &mut self.conn) {
            (Run::Prepared(s), Conn::Tx(tx)) => tx.execute(&s, &untyped(params))?,
            (Run::Prepared(s), Conn::Auto(c)) => c.execute(&s, &untyped(params))?,
            (Run::Typed, Conn::Tx(tx)) => tx.execute_typed(sql, &typed(params))?,
            (Run::Typed, Conn::Auto(c)) => c.execute_typed(sql, &typed(params))?,
        })
    }
}

/// The one row `sql` selects for `id` (bound as $1 subject, $2 predicate, $3 scope) from
/// `table`, if there is one; a second row — a damaged database, in a table that keeps one row
/// an identity — is refused in SQLite's sentence
/// ([`two_rows_of_one_identity`](crate::store::check::two_rows_of_one_identity)), never
/// answered by whichever came first.
pub(super) fn identity_row(
    t: &mut Tx<'_>,
    table: &str,
    sql: &'static str,
    id: &Identity,
) -> Result<Option<Row>> {
    let mut rows = t.all(sql, &[&id.subject, &id.predicate, &id.scope.to_string()])?;
    if rows.len() > 1 {
        return Err(crate::store::check::two_rows_of_one_identity(table, id));
    }
    Ok(rows.pop())
}

/// Takes `id`'s lock, then the time every row the transaction writes from here on carries
/// (`memscope_stamp`, schema 14: one time for one operation, as on SQLite), returned as
/// history's time text. Called after the operation's last lock: a row written after a later
/// lock must not be dated before the write that lock waited for.
pub(super) fn lock_and_stamp(t: &mut Tx<'_>, id: &Identity) -> Result<String> {
    let scope = id.scope.to_string();
    // The lock in a subquery the planner keeps (it is volatile), so it is taken first.
    Ok(t.one(
        "SELECT to_char(memscope_stamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
         FROM (SELECT memscope_identity_lock($1, $2, $3)) l",
        &[&id.subject, &id.predicate, &scope],
    )?
    .get(0))
}

/// The causal clock's value, the last number handed out, as it stands for every reader
/// ([`crate::model::clock_as_it_stands`]: never past 2^53, where the sequence may be).
pub(super) fn clock_now(t: &mut Tx<'_>) -> Result<i64> {
    Ok(crate::model::clock_as_it_stands(
        t.one("SELECT memscope_clock_current()", &[])?.get(0),
    ))
}

/// What a call to the server may have done, for what its failure says: a lost connection
/// leaves a write's commit unknown, and a read's is nothing to wonder about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Call {
    /// It reads only, or runs in a transaction it rolls back (a preview, a dry run).
    Read,
    /// It commits what it wrote: a write, an `apply` batch.
    Write,
    /// It commits another change: a delete, a restore, a rescope, a revert, a pending item's
    /// resolution, an alias, a setting, gc.
    Change,
    /// It reads, and commits a row of the read log saying so (a logged resolve).
    LoggedRead,
    /// It wrote in a transaction whose COMMIT was never sent: the server rolls it back.
    Uncommitted,
}

/// A refusal of the server as one sentence naming the database and what to do; `call` says
/// whether a lost connection may have taken a commit with it.
fn explain(e: anyhow::Error, address: &Address, call: Call) -> anyhow::Error {
    explain_waited(e, address, super::lock_timeout(), call)
}

/// [`explain`] on a connection whose lock timeout is `lock_wait`.
fn explain_waited(
    e: anyhow::Error,
    address: &Address,
    lock_wait: std::time::Duration,
    call: Call,
) -> anyhow::Error {
    let pg = e.downcast_ref::<postgres::Error>();
    let db = pg.and_then(|p| p.as_db_error());
    if connection_lost(&e) {
        let cause = db.map_or_else(|| e.to_string(), |d| d.message().to_string());
        // Only a write can have been committed unseen; a read said so scares a user into
        // running a write again that never ran (found by review: the UI's suspects scan).
        return match call {
            Call::Write => anyhow::Error::new(crate::store::CommitUnknown(format!(
                "the connection to PostgreSQL at {} was lost ({cause}): what this call wrote may or may not have been committed — run it again (a write already stored comes back `confirmed`); the next call connects again",
                address.describe()
            ))),
            // Found by review: a delete cut inside its COMMIT was told that a write already
            // stored comes back `confirmed` — a write's advice, for an operation that has none.
            Call::Change => anyhow::Error::new(crate::store::CommitUnknown(format!(
                "the connection to PostgreSQL at {} was lost ({cause}) while this call's changes were being committed: they may or may not have been — look before running it again (`memscope history` shows a delete, restore, rescope, revert or pending resolution that landed; `memscope aliases` and `memscope settings` theirs); the next call connects again",
                address.describe()
            ))),
            // Found by an exploratory run: a `recall` cut inside its COMMIT was given a
            // write's advice.
            Call::LoggedRead => anyhow::Error::new(crate::store::CommitUnknown(format!(
                "the connection to PostgreSQL at {} was lost ({cause}) while this read's row of the read log was being committed: the read may or may not have been logged, and its answer did not arrive — run it again (a read logged twice shows twice in `memscope reads`); the next call connects again",
                address.describe()
            ))),
            Call::Read => anyhow!(
                "the connection to PostgreSQL at {} was lost ({cause}): this call only reads, so nothing was written — run it again; the next call connects again",
                address.describe()
            ),
            Call::Uncommitted => anyhow!(
                "the connection to PostgreSQL at {} was lost ({cause}) before this call's open transaction committed, so the server rolls that transaction back (at once, or once it notices the connection is gone) and nothing of it was stored — run it again; the next call connects again",
                address.describe()
            ),
        };
    }
    match db {
        Some(d) if *d.code() == SqlState::LOCK_NOT_AVAILABLE => anyhow!(
            "PostgreSQL at {} had a lock this call needs held by another session for more than {} ms, so memscope gave up and its open transaction changed nothing: find that session (an open transaction in `SELECT pid, state, query FROM pg_stat_activity`) and end it, then run this again{}",
            address.describe(),
            lock_wait.as_millis(),
            // Only where the variable sets the wait: the terminal UI waits 2 s at most,
            // whatever it says (found by an exploratory test: the UI told a user to raise it).
            if lock_wait == super::lock_timeout() {
                " — or wait longer with MEMSCOPE_BUSY_TIMEOUT_MS"
            } else {
                ""
            }
        ),
        Some(d) if *d.code() == SqlState::READ_ONLY_SQL_TRANSACTION => anyhow!(
            "PostgreSQL at {} takes no writes on this connection ({}): it is a standby or its transactions are read-only by default — point writers at the primary",
            address.describe(),
            d.message()
        ),
        // Ids are held to 512 bytes before they get here (`model::MAX_ID_BYTES`), and the text
        // memscope does not limit is indexed by its digest (a queued write's source since
        // schema 9, a logged read's subject and predicate since schema 10): what is left is an
        // index memscope did not make.
        Some(d) if *d.code() == SqlState::PROGRAM_LIMIT_EXCEEDED => anyhow!(
            "PostgreSQL at {} cannot index a row this long ({}): shorten what this call names — its subject, predicate, scope or source (an index entry holds about 2,700 bytes after compression; memscope keeps subjects, predicates and scope ids to 512 bytes each)",
            address.describe(),
            d.message()
        ),
        // A dashboard login granted SELECT on the tables alone: the clock is a sequence, which
        // `GRANT SELECT ON ALL TABLES` leaves out, and `check` and `export` read it; a write
        // takes a number from it, which no GRANT SELECT allows (found by review: a write was
        // told the GRANT SELECT that would not let it write).
        // A write of such a login is told it may not write (found by review: it was told the
        // GRANT SELECT it already had).
        Some(d)
            if *d.code() == SqlState::INSUFFICIENT_PRIVILEGE
                && d.message().contains("memscope_clock")
                && call != Call::Read =>
        {
            anyhow!(
                "PostgreSQL at {} refused the login \"{}\" a number from the causal clock, the sequence memscope_clock ({}): that login may not write — writes need a memscope_agent or memscope_curator login (`memscope roles --help`)",
                address.describe(),
                address.user(),
                d.message()
            )
        }
        Some(d)
            if *d.code() == SqlState::INSUFFICIENT_PRIVILEGE
                && d.message().contains("memscope_clock") =>
        {
            anyhow!(
                "PostgreSQL at {} refused the login \"{}\" the causal clock, the sequence memscope_clock ({}): for `check` and `export` let it read the clock with `GRANT SELECT ON SEQUENCE memscope_clock TO \"{}\"`; to write, use a memscope_agent or memscope_curator login (`memscope roles --help`)",
                address.describe(),
                address.user(),
                d.message(),
                address.user()
            )
        }
        // memscope's tables or functions gone under a connection that found them at open: the
        // database dropped and made again, say (found by an exploratory test: an MCP server
        // said "function memscope_write_look(...) does not exist").
        Some(d)
            if *d.code() == SqlState::UNDEFINED_TABLE
                || (*d.code() == SqlState::UNDEFINED_FUNCTION && d.message().contains("memscope_")) =>
        {
            anyhow!(
                "PostgreSQL at {} no longer holds memscope's schema ({}): the database was dropped and made again, or its tables were dropped, so this call changed nothing — prepare it with `memscope --db … init` (or point --db at the database that holds the memories), then run this again",
                address.describe(),
                d.message()
            )
        }
        Some(d) if *d.code() == SqlState::INSUFFICIENT_PRIVILEGE => anyhow!(
            "PostgreSQL at {} refused it to the login \"{}\" ({}): that login may not do this — a memscope_agent login writes and reads; deletes, restores, gc, purges, pending resolutions, aliases, settings, and a rescope or revert that takes a record away need a memscope_curator login (`memscope roles --help`)",
            address.describe(),
            address.user(),
            d.message()
        ),
        Some(d) => anyhow!(
            "PostgreSQL at {} refused it ({}): run `memscope check` if the database was changed by hand",
            address.describe(),
            d.message()
        ),
        // A refusal of memscope's own (a rule's sentence) is complete as it is.
        None if pg.is_none() => e,
        None => e.context(format!("on {}", address.describe())),
    }
}

/// The advisory lock every `apply` batch holds for its transaction: one batch at a time per
/// database. A batch takes its spellings, aliases and identity locks statement by statement, run
/// by run, in an order no other batch shares, so two batches at once deadlocked over the
/// identities and new spellings they shared (four overlapping applies gave up after 20
/// retries). A single write holds one identity's lock and waits for nothing while holding it,
/// so it cannot close a cycle with the batch. Waiting for the turn is not bounded by the lock
/// timeout: the batch ahead never waits for its client (its lines were read before it began),
/// and a batch stuck on another session's lock gives up after the timeout, passing the turn on.
const APPLY_TURN: i64 = 0x6d65_6d73_6170_706c; // "memsappl"

fn take_apply_turn(t: &mut Tx<'_>) -> Result<()> {
    t.txn()?.batch_execute(&format!(
        "SELECT set_config('memscope.lock_timeout', current_setting('lock_timeout'), true);
         SET LOCAL lock_timeout = 0;
         SELECT pg_advisory_xact_lock({APPLY_TURN});
         SELECT set_config('lock_timeout', current_setting('memscope.lock_timeout'), true)"
    ))?;
    Ok(())
}

/// Whether an error in `apply`'s batch ends the batch rather than its line: the batch runs
/// again ([`retryable`]), or the call fails ([`connection_lost`], a lock timeout).
fn stops_batch(e: &anyhow::Error) -> bool {
    retryable(e)
        || connection_lost(e)
        || e.downcast_ref::<postgres::Error>()
            .and_then(|p| p.code())
            .is_some_and(|c| {
                *c == SqlState::LOCK_NOT_AVAILABLE
                    // The login's refusal, not the line's: every line would meet it (found by
                    // review: a read-only login's apply repeated it per line and still said
                    // "applied N").
                    || *c == SqlState::INSUFFICIENT_PRIVILEGE
                    || *c == SqlState::READ_ONLY_SQL_TRANSACTION
            })
}

/// Whether the connection is gone (a restart, an administrator, a network cut): what the call
/// sent may or may not have been committed, so it is said, not retried.
fn connection_lost(e: &anyhow::Error) -> bool {
    let pg = e.downcast_ref::<postgres::Error>();
    let db = pg.and_then(|p| p.as_db_error());
    // The driver calls a connection closed only when it saw the end; a socket that failed
    // under it (reset by a server killed mid-statement) is "error communicating with the
    // server", an I/O error (found by the restart test: such a batch was run again on a new
    // connection instead of being said as lost).
    let io = pg
        .and_then(std::error::Error::source)
        .is_some_and(|s| s.is::<std::io::Error>());
    pg.is_some_and(|p| p.is_closed())
        || io
        || db.is_some_and(|d| d.severity() == "FATAL" || *d.code() == SqlState::ADMIN_SHUTDOWN)
}

/// A BEGIN that found the connection lost: nothing of the call reached the server.
#[derive(Debug)]
struct LostAtBegin;

impl std::fmt::Display for LostAtBegin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the connection was lost before the call began")
    }
}

impl LostAtBegin {
    /// A BEGIN's failure, marked when it found the connection lost.
    fn marked(e: postgres::Error) -> anyhow::Error {
        let e = anyhow::Error::from(e);
        if connection_lost(&e) {
            e.context(LostAtBegin)
        } else {
            e
        }
    }

    /// `e` without the mark, for what its failure says.
    fn unwrapped(e: anyhow::Error) -> anyhow::Error {
        if !e.is::<LostAtBegin>() {
            return e;
        }
        match e.downcast::<postgres::Error>() {
            Ok(lost) => lost.into(),
            Err(e) => e,
        }
    }
}

/// Whether the server aborted the transaction for a reason that a second run may not meet.
fn retryable(e: &anyhow::Error) -> bool {
    e.downcast_ref::<postgres::Error>()
        .and_then(|p| p.code())
        .is_some_and(|c| {
            *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
        })
}

/// Sets the session's `lock_timeout` ([`PgStore::set_lock_timeout`]).
fn apply_lock_timeout(client: &mut Client, timeout: std::time::Duration) -> Result<()> {
    let timeout = format!("{}ms", timeout.as_millis().max(1));
    client.execute_typed(
        "SELECT set_config('lock_timeout', $1, false)",
        &[(&timeout, Type::TEXT)],
    )?;
    Ok(())
}

/// Sets (or resets) the session's `memscope.now`, which `memscope_now()` reads.
fn apply_clock(client: &mut Client, clock: Clock) -> Result<()> {
    let instant = match clock {
        Clock::System => String::new(),
        Clock::Fixed(t) => crate::store::format_time(t),
    };
    client.execute_typed(
        "SELECT set_config('memscope.now', $1, false)",
        &[(&instant, Type::TEXT)],
    )?;
    Ok(())
}

/// Whether the server takes no writes from this login: a standby, read-only transactions by
/// default, or a login that may not add a record, its history or a read (one granted SELECT
/// only) — its UI shows READ-ONLY and offers no curation, and its reads are served without
/// being logged, where they would be refused.
macro_rules! read_only_sql {
    () => {
        "pg_is_in_recovery()
         OR current_setting('default_transaction_read_only') = 'on'
         OR NOT (has_table_privilege('memories', 'INSERT')
             AND has_table_privilege('history', 'INSERT')
             AND has_table_privilege('reads', 'INSERT'))"
    };
}

/// The sentence for a login that may not read memscope's tables in this database: the owner
/// runs `roles` here once, naming the login as what it already is — roles belong to the
/// server, and `roles` refuses to make an agent's login a curator, or a curator's an agent
/// (found by review: both were offered to a member of memscope_agent, and the second refused).
fn not_granted(client: &mut Client, address: &Address) -> String {
    let user = address.user();
    let member = client
        .query_one(
            "SELECT coalesce(pg_has_role(current_user, to_regrole($1), 'MEMBER'), false),
                    coalesce(pg_has_role(current_user, to_regrole($2), 'MEMBER'), false)",
            &[&super::roles::AGENT_ROLE, &schema::CURATOR_ROLE],
        )
        .map(|r| (r.get::<_, bool>(0), r.get::<_, bool>(1)));
    let run = |flag: &str| format!("`memscope --db OWNER-ADDRESS roles --{flag}-login {user}`");
    let grant = match member {
        Ok((true, false)) => format!(
            "each database's owner grants memscope's roles once, with {}",
            run("agent")
        ),
        Ok((false, true)) => format!(
            "each database's owner grants memscope's roles once, with {}",
            run("curator")
        ),
        // `roles` refuses a login in both, whichever it is named as.
        Ok((true, true)) => format!(
            "it is a member of both {} and {}, which `roles` refuses for any login: REVOKE the one it should not hold, and the database's owner then grants memscope's roles with `roles --agent-login {user}` or `--curator-login {user}`",
            super::roles::AGENT_ROLE,
            schema::CURATOR_ROLE,
        ),
        _ => format!(
            "each database's owner grants memscope's roles once, with {} (or `--curator-login {user}`)",
            run("agent")
        ),
    };
    format!(
        "the PostgreSQL address reaches {}, but the login \"{user}\" may not read memscope's tables there: {grant} — see README, \"Running on PostgreSQL\"",
        address.describe()
    )
}

/// The usual open in one statement (a round trip, where the careful path below takes six): the
/// database holds this memscope's schema in the connection's first schema, and whether the
/// login takes writes (see [`open_slowly`]). `None` when anything else holds — no schema, an
/// older or newer one, tables memscope did not make, a refusal — and the careful path says what.
fn current_schema_read_only(client: &mut Client) -> Option<bool> {
    let row = client
        .query_typed_one(
            concat!(
                "SELECT EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                            WHERE n.nspname = current_schema() AND c.relname = 'memscope_schema'),
                    (SELECT version FROM memscope_schema),
                    ",
                read_only_sql!()
            ),
            &[],
        )
        .ok()?;
    let (here, version): (bool, Option<i64>) = (row.get(0), row.get(1));
    (here && version == Some(schema::SCHEMA_VERSION)).then(|| row.get(2))
}

/// The open that says what is wrong: the schema's state read as `init` reads it, each case
/// other than the current schema one sentence; then whether the login takes writes.
fn open_slowly(client: &mut Client, address: &Address) -> Result<bool> {
    let state = match schema::state(client) {
        Ok(state) => state,
        Err(e) => {
            let code = e
                .downcast_ref::<postgres::Error>()
                .and_then(postgres::Error::code);
            if code != Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
                return Err(e);
            }
            // A login the owner has not granted memscope's roles to (found by an exploratory
            // test: the driver's `permission denied for table memscope_schema`).
            bail!(not_granted(client, address))
        }
    };
    match state {
        schema::State::Current => {}
        schema::State::Empty => bail!(
            "the PostgreSQL address reaches {}, which holds no memscope schema yet: prepare it with `memscope --db … init`",
            address.describe()
        ),
        schema::State::Older(v) => bail!(
            "the PostgreSQL address reaches {}, which holds memscope PostgreSQL schema {v}: bring it to {} with `memscope --db … init`",
            address.describe(),
            schema::SCHEMA_VERSION
        ),
        schema::State::Newer(v) => bail!(
            "the PostgreSQL address reaches {}, which holds memscope PostgreSQL schema {v}, newer than this memscope understands ({}): upgrade memscope to use it",
            address.describe(),
            schema::SCHEMA_VERSION
        ),
        schema::State::Foreign(names) => bail!(
            "the PostgreSQL address reaches {}, which holds tables memscope did not create ({}): point the address at a memscope database",
            address.describe(),
            names.join(", ")
        ),
    }
    client
        .query_one(concat!("SELECT ", read_only_sql!()), &[])
        .map_err(|e| explain(e.into(), address, Call::Read))
        .map(|r| r.get(0))
}

impl PgStore {
    /// Connects and makes sure the database holds this memscope's schema; anything else is
    /// one sentence saying what to do.
    pub fn open(address: &Address) -> Result<PgStore> {
        let mut client = address.connect()?;
        let read_only = match current_schema_read_only(&mut client) {
            Some(read_only) => read_only,
            None => open_slowly(&mut client, address)?,
        };
        Ok(PgStore {
            client,
            address: address.clone(),
            statements: Statements::default(),
            read_only,
            reconnects: 0,
            clock: Clock::System,
            lock_timeout: None,
            held_back: false,
            lock_waits: 0,
        })
    }

    /// The lock timeout this connection's session has: its own, or none worth the name while
    /// it is held back; `None`: the one every connection sets.
    fn session_lock_wait(&self) -> Option<std::time::Duration> {
        match self.held_back {
            true => Some(HELD_WAIT),
            false => self.lock_timeout,
        }
    }

    /// `e`, a call's failure, as one sentence ([`explain`]); a UI's connection whose call gave
    /// up on a lock is held back from then on ([`PgStore::held_back`]).
    pub(super) fn failed(&mut self, e: anyhow::Error, call: Call) -> anyhow::Error {
        if !lock_not_available(&e) || self.lock_timeout.is_none() {
            return explain_waited(e, &self.address, self.lock_wait(), call);
        }
        if self.held_back {
            return anyhow!(
                "PostgreSQL at {} still has a lock this call needs held by another session: this connection waited {} ms for it once and waits for no lock until it is released, so this call gave up at once and changed nothing — find that session (an open transaction in `SELECT pid, state, query FROM pg_stat_activity`) and end it",
                self.address.describe(),
                self.lock_wait().as_millis()
            );
        }
        let said = explain_waited(e, &self.address, self.lock_wait(), call);
        self.lock_waits += 1;
        self.held_back = true;
        // Best effort: a connection that is gone gets it when it connects again.
        let _ = apply_lock_timeout(&mut self.client, HELD_WAIT);
        said
    }

    /// Starts a turn of calls (a key's, a poll's): a connection held back by a lock looks,
    /// without waiting, whether every table is free again, and if so waits for locks again as
    /// before. True when it was held back and is not any more: what its calls could not read
    /// is to be read again.
    pub fn turn(&mut self) -> bool {
        if !self.held_back {
            return false;
        }
        // Only a lock keeps it held back: a refusal of the probe (a login not granted every
        // table) says nothing about locks; a lost connection stays held back until a turn has
        // opened it again.
        let probe = self
            .connection()
            .and_then(|c| Ok(c.batch_execute(ALL_TABLES_FREE)?));
        if probe.as_ref().is_err_and(lock_not_available) {
            return false;
        }
        if let Some(wait) = self.lock_timeout {
            if apply_lock_timeout(&mut self.client, wait).is_err() {
                return false;
            }
        }
        self.held_back = false;
        true
    }

    /// How many calls of this connection waited its whole lock timeout and gave up.
    pub fn lock_waits(&self) -> u64 {
        self.lock_waits
    }

    /// How long this connection's statements wait for a lock ([`PgStore::set_lock_timeout`]).
    fn lock_wait(&self) -> std::time::Duration {
        self.lock_timeout.unwrap_or_else(super::lock_timeout)
    }

    /// How long this connection's statements wait for a lock another session holds (the
    /// session's `lock_timeout`), kept across reconnections.
    pub fn set_lock_timeout(&mut self, timeout: std::time::Duration) -> Result<()> {
        self.lock_timeout = Some(timeout);
        self.held_back = false;
        let client = self.connection()?;
        apply_lock_timeout(client, timeout)
    }

    /// Sets the clock this connection stamps and ages by (docs/SCHEMA.md, PostgreSQL schema 6):
    /// `Fixed` makes every timestamp it writes, and every cutoff its gc computes, that instant,
    /// as a fixed clock does on SQLite; `System` is the server's clock again. For tests.
    pub fn set_clock(&mut self, clock: Clock) -> Result<()> {
        self.clock = clock;
        let client = self.connection()?;
        apply_clock(client, clock)
    }

    /// The clock set by [`PgStore::set_clock`] (not the causal clock: [`PgStore::clock`]).
    pub fn wall_clock(&self) -> Clock {
        self.clock
    }

    /// Whether the server takes no writes on this connection (a standby, read-only
    /// transactions by default, or a login without INSERT on memscope's tables): reads are not
    /// logged, writes are refused by the server.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The address it was opened with.
    pub(super) fn address(&self) -> &Address {
        &self.address
    }

    /// The connection, opened again when the server closed it (a restart, an administrator,
    /// a network cut): the call that met the cut said so and was not retried, since its commit
    /// may or may not have landed.
    pub(super) fn connection(&mut self) -> Result<&mut Client> {
        if self.client.is_closed() {
            self.reopen()?;
        }
        Ok(&mut self.client)
    }

    /// Opens the connection again, with the session settings memscope gave the last one.
    fn reopen(&mut self) -> Result<()> {
        self.client = self.address.connect().map_err(|e| {
            anyhow!(
                "the connection to PostgreSQL at {} was lost, and connecting again failed — {e:#}",
                self.address.describe()
            )
        })?;
        self.statements.clear();
        self.reconnects += 1;
        if matches!(self.clock, Clock::Fixed(_)) {
            apply_clock(&mut self.client, self.clock)?;
        }
        if let Some(timeout) = self.session_lock_wait() {
            apply_lock_timeout(&mut self.client, timeout)?;
        }
        Ok(())
    }

    /// Whether the server closed the connection (the next call opens it again).
    pub(super) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// How many times the connection was opened again (see [`PgStore::connection`]).
    pub(super) fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// A token that stops this connection's running query from another thread.
    pub(super) fn cancel_token(&self) -> postgres::CancelToken {
        self.client.cancel_token()
    }

    /// Moves the causal clock past every number stored, where a login set it back around
    /// memscope (README, "check", invariant 2: `init` repairs it), by the function that only
    /// moves it up; `Some((from, to))` when it moved.
    pub fn clock_past_stored(&mut self) -> Result<Option<(i64, i64)>> {
        self.in_change_tx(|t| {
            let from = clock_now(t)?;
            let highest: Option<i64> = t
                .one(crate::store::check::HIGHEST_STORED_NUMBER, &[])?
                .get(0);
            match highest {
                Some(to) if to > from => {
                    t.one("SELECT memscope_clock_observe($1)::text", &[&to])?;
                    Ok(Some((from, to)))
                }
                _ => Ok(None),
            }
        })
    }

    /// Runs `body` in a READ COMMITTED transaction and commits, again when the server aborted
    /// it for a deadlock or a serialization failure (counted into `busy_retries`).
    pub(super) fn in_tx<T>(&mut self, body: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        self.run_tx(Call::Write, body)
    }

    /// [`PgStore::in_tx`] for a change other than a write: a failure says so ([`Call::Change`]).
    pub(super) fn in_change_tx<T>(
        &mut self,
        body: impl FnMut(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        self.run_tx(Call::Change, body)
    }

    /// [`PgStore::in_tx`] for a read that logs itself: a failure says so ([`Call::LoggedRead`]).
    pub(super) fn in_logged_read_tx<T>(
        &mut self,
        body: impl FnMut(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        self.run_tx(Call::LoggedRead, body)
    }

    /// Runs a read without a transaction around it: each statement commits alone, one round
    /// trip instead of BEGIN, the statement and COMMIT. What a read sees does not change — at
    /// READ COMMITTED every statement takes its own snapshot inside a transaction too. For
    /// reads — the UI's pages and polls, `resolve` — and at most one write that stands alone as
    /// a statement (a logged resolve's read-log row): no portal, no savepoint, no lock held past
    /// its statement.
    pub(super) fn read<T>(&mut self, body: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        self.statements_as(Call::Read, body)
    }

    /// [`PgStore::read`] for a call whose statements may write (one that stands alone as a
    /// statement: a logged resolve's read-log row): a lost connection leaves it unknown.
    pub(super) fn statements_as<T>(
        &mut self,
        call: Call,
        mut body: impl FnMut(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        self.connection()?;
        let mut out = body(&mut Tx {
            conn: Conn::Auto(&mut self.client),
            statements: &mut self.statements,
        });
        // A connection the server closed while it was idle (a restart, an administrator, an
        // idle timeout) is found by the call's first statement: a read runs again, once, on a
        // new one (found by an exploratory test: an MCP `recall` failed after the server had
        // ended its idle connection).
        if call == Call::Read && out.as_ref().is_err_and(connection_lost) && self.reopen().is_ok() {
            out = body(&mut Tx {
                conn: Conn::Auto(&mut self.client),
                statements: &mut self.statements,
            });
        }
        out.map_err(|e| self.failed(e, call))
    }

    /// Runs `body` in one read-only snapshot (REPEATABLE READ) and commits: every statement
    /// in it sees the same database — a read of several statements whose answers must agree
    /// (`suspects`, `check`).
    pub(super) fn snapshot<T>(&mut self, body: impl FnOnce(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        self.connection()?;
        let mut body = Some(body);
        // A connection the server closed while idle: see `run_tx`.
        let out = match self.snapshot_once(&mut body) {
            Err(e) if e.is::<LostAtBegin>() => {
                self.reopen()?;
                self.snapshot_once(&mut body)
            }
            done => done,
        };
        out.map_err(|e| {
            let e = LostAtBegin::unwrapped(e);
            self.failed(e, Call::Read)
        })
    }

    /// [`PgStore::snapshot`] on the connection as it is: a BEGIN that found it lost is a
    /// [`LostAtBegin`], `body` not yet called.
    fn snapshot_once<T, F: FnOnce(&mut Tx<'_>) -> Result<T>>(
        &mut self,
        body: &mut Option<F>,
    ) -> Result<T> {
        let tx = self
            .client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(LostAtBegin::marked)?;
        let mut t = Tx {
            conn: Conn::Tx(tx),
            statements: &mut self.statements,
        };
        let body = body
            .take()
            .expect("called once: a BEGIN that failed did not call it");
        let out = body(&mut t)?;
        if let Conn::Tx(tx) = t.conn {
            tx.commit()?;
        }
        Ok(out)
    }

    /// `r`, a refusal of the server in it made [`explain`]'s one sentence: for a read that
    /// runs its own transaction rather than [`PgStore::read`]'s (`check`, `export`).
    pub(super) fn explained<T>(&mut self, r: Result<T>) -> Result<T> {
        r.map_err(|e| self.failed(e, Call::Read))
    }

    /// Runs `body` in a transaction and rolls it back: what an operation would do, with
    /// nothing changed (the UI's previews of a rescope or a revert run the operation itself).
    pub(super) fn dry_run<T>(&mut self, body: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        self.run_tx(Call::Read, body)
    }

    /// Runs `body` in a transaction, committed unless `call` is a [`Call::Read`] (rolled back).
    fn run_tx<T>(
        &mut self,
        call: Call,
        mut body: impl FnMut(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        self.connection()?;
        match self.run_tx_once(call, &mut body) {
            // The server closed the connection while it was idle (a restart, an administrator,
            // an idle timeout): nothing of this call reached it, so it runs on a new
            // connection, once (see `statements_as`).
            Err(e) if e.is::<LostAtBegin>() => {
                self.reopen()?;
                self.run_tx_once(call, body)
            }
            done => done,
        }
        .map_err(|e| {
            if !e.is::<LostAtBegin>() {
                return e;
            }
            let call = match call {
                Call::Read => Call::Read,
                _ => Call::Uncommitted,
            };
            explain(LostAtBegin::unwrapped(e), &self.address, call)
        })
    }

    /// [`PgStore::run_tx`] on the connection as it is: a BEGIN that found it lost is a
    /// [`LostAtBegin`].
    fn run_tx_once<T>(
        &mut self,
        call: Call,
        mut body: impl FnMut(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        let commit = call != Call::Read;
        let mut retries = 0i64;
        loop {
            let tx = self.client.transaction().map_err(|e| {
                let e = LostAtBegin::marked(e);
                if e.is::<LostAtBegin>() {
                    e
                } else {
                    explain(e, &self.address, call)
                }
            })?;
            let mut t = Tx {
                conn: Conn::Tx(tx),
                statements: &mut self.statements,
            };
            let mut committing = false;
            let out = body(&mut t).and_then(|out| {
                if commit && retries > 0 {
                    bump_metric(&mut t, "busy_retries", retries)?;
                }
                if let Conn::Tx(tx) = t.conn {
                    if commit {
                        committing = true;
                        tx.commit()?;
                    } else {
                        tx.rollback()?;
                    }
                }
                Ok(out)
            });
            // A write whose COMMIT was never sent changed nothing, whatever else it sent.
            let call = if commit && !committing {
                Call::Uncommitted
            } else {
                call
            };
            match out {
                Err(e) if retryable(&e) && (retries as usize) < RETRIES => retries += 1,
                Err(e) => {
                    // The retries of a call that failed count too; its transaction is gone, so
                    // they are counted on their own (best effort: the connection may be gone).
                    if commit && retries > 0 && !connection_lost(&e) {
                        let _ = self.read(|t| bump_metric(t, "busy_retries", retries));
                    }
                    return Err(self.failed(e, call));
                }
                Ok(out) => return Ok(out),
            }
        }
    }

    /// One write, one transaction: the write path of README "The model in one minute".
    pub fn write(&mut self, req: &WriteRequest) -> Result<WriteOutcome> {
        let prepared = validate(req.clone())?;
        self.in_tx(|t| write_in_tx(t, &prepared))
    }

    /// One write that corrects the current value's spelling (README, `write --respell`).
    pub fn respell(&mut self, req: &WriteRequest) -> Result<WriteOutcome> {
        let prepared = crate::store::prepared::validate_respelled(req.clone())?;
        self.in_tx(|t| write_in_tx(t, &prepared))
    }

    /// What `subject`/`predicate` resolves to in `repo` and `task`, with the chain explained.
    pub fn resolve(
        &mut self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution> {
        self.read(|t| {
            Ok(resolve_in(
                t,
                subject,
                predicate,
                repo,
                task,
                super::browse::CHAIN_RECORDS,
            )?
            .0)
        })
    }

    /// `resolve` with long values as previews: what the UI's history pane shows.
    pub fn resolve_preview(
        &mut self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Result<Resolution> {
        let sql = super::browse::CHAIN_PREVIEWS;
        self.read(|t| Ok(resolve_in(t, subject, predicate, repo, task, sql)?.0))
    }

    /// `apply`: one write per JSON line of `input`, as on SQLite (README, "apply"): each line
    /// lands or fails alone (a savepoint per line), batches of lines commit together, and
    /// `emit` gets each batch's outcomes once it is committed. A batch is gathered before its
    /// transaction begins and runs as soon as no more input is waiting ([`Intake`]), so an
    /// interactive writer gets each outcome at once and an idle one holds nothing. The input
    /// is taken for a stream, which may pause ([`PgStore::apply_from`] for a file).
    pub fn apply<R: std::io::Read + Send + 'static>(
        &mut self,
        input: R,
        emit: impl FnMut(&[WriteOutcome]) -> Result<()>,
    ) -> Result<crate::store::ApplySummary> {
        self.apply_from(input, InputKind::Stream, emit)
    }

    /// [`PgStore::apply`] from input of a known kind: a file fills every batch.
    pub fn apply_from<R: std::io::Read + Send + 'static>(
        &mut self,
        input: R,
        kind: InputKind,
        mut emit: impl FnMut(&[WriteOutcome]) -> Result<()>,
    ) -> Result<crate::store::ApplySummary> {
        let mut intake = Intake::start(input, kind)?;
        let mut summary = crate::store::ApplySummary::default();
        while let Some(mut batch) = intake.next_batch(APPLY_BATCH, APPLY_BATCH_BYTES)? {
            while batch.wants_more() {
                batch.wait_for_more(&mut intake)?;
            }
            let batch = batch.lines;
            // Lines run without savepoints (two round trips each saved); when one fails, the
            // batch is rolled back and run again with a savepoint per line, so the failing line
            // changes nothing and the others still land.
            let mut savepoints = false;
            let address = self.address.clone();
            let outcomes = loop {
                let run = self.in_tx(|t| {
                    take_apply_turn(t)?;
                    if !savepoints {
                        return match apply_batch(t, &batch) {
                            // A lost connection is said as it is: a run with savepoints
                            // would connect again and hide it. A lock held elsewhere past
                            // the timeout would hold up every line of it in turn.
                            Err(e) if stops_batch(&e) => Err(e),
                            Err(_) => Err(RetryWithSavepoints.into()),
                            ok => ok,
                        };
                    }
                    let mut outcomes = Vec::with_capacity(batch.len());
                    for (n, parsed) in &batch {
                        let mut out = match parsed {
                            ParsedLine::Invalid(e) => line_error(e),
                            ParsedLine::Ready(w) => {
                                t.txn()?.execute("SAVEPOINT apply_line", &[])?;
                                match write_in_tx(t, w) {
                                    Ok(out) => {
                                        t.txn()?.execute("RELEASE apply_line", &[])?;
                                        out
                                    }
                                    // The whole batch again (a deadlock or a serialization
                                    // failure), or not at all.
                                    Err(e) if stops_batch(&e) => return Err(e),
                                    Err(e) => {
                                        t.txn()?.execute("ROLLBACK TO apply_line", &[])?;
                                        let e = explain(e, &address, Call::Write);
                                        WriteOutcome::error(None, format!("{e:#}"))
                                    }
                                }
                            }
                        };
                        out.line = Some(*n);
                        outcomes.push(out);
                    }
                    Ok(outcomes)
                });
                match run {
                    Err(e) if e.is::<RetryWithSavepoints>() && !savepoints => savepoints = true,
                    other => break other?,
                }
            };
            for out in &outcomes {
                summary.lines += 1;
                summary.count(out.outcome);
            }
            emit(&outcomes)?;
        }
        Ok(summary)
    }

    /// Resolves as [`PgStore::resolve`] and logs the read (README, "The read log").
    pub fn resolve_logged(
        &mut self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
        agent: Option<&str>,
        note: Option<&str>,
    ) -> Result<Resolution> {
        // The read is logged in the places' stored spellings, as the resolution used them (as
        // on SQLite). Its time must order it among the writes of the chain's identities as
        // history does (README, "The read log": `Enter` replays it from history): a write takes
        // its time under its identity's lock and commits later, so a read that did not wait
        // could miss a write dated before it (found by an exploratory test: a quarter of the
        // reads logged beside concurrent writers disagreed with `resolve --at`). So the read
        // holds the chain's locks, shared, from before its snapshot to its commit — found by a
        // first look at the chain, in lock-key order, as the batch writes take theirs; a
        // deadlock with a rescope (which takes its two in another order) is retried by `in_tx`.
        let note = crate::store::prepared::logged_read_words(agent, note)?;
        // The names it reads are registered first, in a statement of their own (as a write
        // registers its own before its identity's lock): inside the read's transaction, a new
        // name's row held while it waits for the chain's locks deadlocked with an `apply`
        // batch registering the same name while it held them (found by review).
        let (spelled, places) = crate::store::prepared::read_spellings(subject, repo, task);
        let names: Vec<(&str, String)> = spelled
            .into_iter()
            .map(|s| (SUBJECT, s))
            .chain(places.iter().map(|p| (SCOPE, p.to_string())))
            .collect();
        if !names.is_empty() {
            let kinds: Vec<&str> = names.iter().map(|n| n.0).collect();
            let folded: Vec<String> = names.iter().map(|n| fold(&n.1)).collect();
            let texts: Vec<&str> = names.iter().map(|n| n.1.as_str()).collect();
            // Registering a name twice changes nothing, so the statement runs again on a new
            // connection as a read does (`statements_as`).
            self.read(|t| {
                t.exec(
                    "INSERT INTO spellings (kind, folded, spelling)
                     SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                     ON CONFLICT (kind, folded) DO NOTHING",
                    &[&kinds, &folded, &texts],
                )
            })?;
        }
        self.in_logged_read_tx(|t| {
            let (first, _) = resolve_in(t, subject, predicate, repo, task, super::browse::CHAIN_RECORDS)?;
            let scopes: Vec<String> = first.considered.iter().map(|c| c.scope.clone()).collect();
            t.exec(
                "SELECT pg_advisory_xact_lock_shared(k.k) FROM (
                     SELECT DISTINCT hashtextextended($1 || chr(31) || $2 || chr(31) || s, 0) AS k
                     FROM unnest($3::text[]) AS s ORDER BY 1) k",
                &[&first.subject, &first.predicate, &scopes],
            )?;
            let (r, chain) = resolve_in(t, subject, predicate, repo, task, super::browse::CHAIN_RECORDS)?;
            let shadowed = serde_json::to_string(&shadowed_labels(&r))?;
            t.exec(
                "INSERT INTO reads (at, agent, subject, predicate, repo, task, scope, version, shadowed, note)
                 VALUES (memscope_now(), $1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[&agent, &r.subject, &r.predicate, &chain.repo, &chain.task, &r.scope, &r.version, &shadowed, &note],
            )?;
            Ok(r)
        })
    }

    /// The current records, filtered, grouped by scope (README, `list`).
    pub fn list(&mut self, filter: &crate::store::ListFilter) -> Result<Vec<MemoryRecord>> {
        self.read(|t| {
            let (subject, predicate) =
                stored_filter(t, filter.subject.as_deref(), filter.predicate.as_deref())?;
            let scope = match &filter.scope {
                Some(s) => Some(spelled_scope(t, s, false)?.to_string()),
                None => None,
            };
            let rows = t.all(
                "SELECT subject, predicate, scope, value, version, source, causal_seq, raw,
                        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        to_char(confirmed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        confirm_count
                 FROM memories
                 WHERE ($1::text IS NULL OR scope = $1) AND ($2::text IS NULL OR subject = $2)
                   AND ($3::text IS NULL OR predicate = $3)
                 ORDER BY scope COLLATE \"C\", subject COLLATE \"C\", predicate COLLATE \"C\"",
                &[&scope, &subject, &predicate],
            )?;
            rows.iter().map(super::browse::record_from_row).collect()
        })
    }

    /// One identity's events, oldest first (README, `history`).
    pub fn history(
        &mut self,
        subject: &str,
        predicate: &str,
        scope: Option<&Scope>,
    ) -> Result<Vec<HistoryEvent>> {
        // A filter's subject that could not be stored (control characters…) is matched as
        // given, and so matches nothing: "no history for …", as on SQLite.
        let (subject, storable) = match crate::model::normalize_subject(subject) {
            Ok(s) => (s, true),
            Err(_) => (subject.trim().to_string(), false),
        };
        self.read(|t| {
            let predicate = canonical_predicate(t, predicate)?;
            let subject = if storable {
                spelled(t, SUBJECT, &subject, false)?
            } else {
                subject.clone()
            };
            let scope = scope
                .map(|s| spelled_scope(t, s, false).map(|s| s.to_string()))
                .transpose()?;
            let rows = t.all(
                "SELECT id, event, subject, predicate, scope, version, value, raw, source, causal_seq,
                        to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), detail
                 FROM history WHERE subject = $1 AND predicate = $2 AND ($3::text IS NULL OR scope = $3)
                 ORDER BY id",
                &[&subject, &predicate, &scope],
            )?;
            let mut events = rows
                .iter()
                .map(super::browse::event_from_row)
                .collect::<Result<Vec<_>>>()?;
            mark_validity(&mut events);
            Ok(events)
        })
    }

    /// Pending items, oldest first: the open ones (`all`: every one).
    pub fn pending(&mut self, all: bool) -> Result<Vec<PendingItem>> {
        self.read(|t| {
            let rows = t.all(
                concat!(
                    pending_select!(),
                    " WHERE $1 OR status = 'open' ORDER BY id"
                ),
                &[&all],
            )?;
            rows.iter().map(pending_from_row).collect()
        })
    }

    /// [`crate::store::sqlite::Store::open_pending_of`] on PostgreSQL.
    pub fn open_pending_of(&mut self, subject: &str, predicate: &str) -> Result<Vec<PendingItem>> {
        self.read(|t| {
            let rows = t.all(
                concat!(
                    pending_select!(),
                    " WHERE subject = $1 AND predicate = $2 AND status = 'open' ORDER BY id"
                ),
                &[&subject, &predicate],
            )?;
            rows.iter().map(pending_from_row).collect()
        })
    }

    pub fn pending_item(&mut self, id: i64) -> Result<Option<PendingItem>> {
        self.read(|t| pending_item(t, id, false))
    }

    /// Resolves an open pending item by writing it to `scope` through the write path (README,
    /// "The pending queue"); `outside_candidates` allows a scope it did not name.
    pub fn resolve_pending(
        &mut self,
        pending_id: i64,
        scope: &Scope,
        outside_candidates: bool,
    ) -> Result<WriteOutcome> {
        self.in_change_tx(|t| {
            // The item's row lock: two humans resolving it at once resolve it once.
            let item = pending_item(t, pending_id, true)?.ok_or_else(|| no_item(pending_id))?;
            if let Some(closed) = item.closed_sentence() {
                bail!(closed);
            }
            crate::store::prepared::new_place_within_id_limit(&item.subject, &item.predicate, scope)?;
            let scope = spelled_scope(t, scope, true)?;
            let among = crate::store::prepared::resolution_among(&item, &scope, outside_candidates)?;
            let id = Identity {
                subject: item.subject.clone(),
                predicate: canonical_predicate(t, &item.predicate)?,
                scope: scope.clone(),
            };
            let prepared = PreparedWrite::stored(
                &id,
                item.value.clone(),
                item.source.clone(),
                item.raw.clone(),
                resolution_seq(&item),
            )?;
            lock_and_stamp(t, &id)?;
            let mut out = write_in_tx(t, &prepared)?;
            out.pending_id = Some(pending_id);
            if crate::store::prepared::stays_open(&mut out, pending_id, &scope) {
                return Ok(out);
            }
            t.exec(
                "UPDATE pending SET status = 'resolved', resolved_at = memscope_now(), resolved_scope = $2, resolution = $3
                 WHERE id = $1",
                &[&pending_id, &scope.to_string(), &out.outcome.as_str()],
            )?;
            let detail = json!({ "pending_id": pending_id, "outcome": out.outcome.as_str(), "among_candidates": among });
            let clock = clock_now(t)?;
            let scope_text = scope.to_string();
            t.exec(
                "INSERT INTO history (event, subject, predicate, scope, version, source, causal_seq, at, detail, clock)
                 VALUES ('pending_resolved', $1, $2, $3, $4, $5, $6, memscope_now(), $7, $8)",
                &[&id.subject, &id.predicate, &scope_text, &out.version, &item.source, &item.causal_seq, &detail.to_string(), &clock],
            )?;
            Ok(out)
        })
    }

    /// Rejects an open pending item: nothing is written to memory.
    pub fn reject_pending(&mut self, pending_id: i64) -> Result<PendingItem> {
        self.in_change_tx(|t| {
            let mut item = pending_item(t, pending_id, true)?.ok_or_else(|| no_item(pending_id))?;
            if item.status != "open" {
                bail!("pending item #{pending_id} is already {}: nothing to do", item.status);
            }
            t.exec(
                "UPDATE pending SET status = 'rejected', resolved_at = memscope_now(), resolution = 'rejected by a human'
                 WHERE id = $1",
                &[&pending_id],
            )?;
            item.status = "rejected".into();
            Ok(item)
        })
    }

    /// Deletes `target` (README, "Deletion"): each covered identity's current record and its
    /// whole history go, a content-free `deleted` event and a tombstone stay, the pending items
    /// naming it and the notes of its reads are destroyed — in one transaction, under the
    /// identities' locks. Then the touched tables are vacuumed, the index pass forced (a plain
    /// VACUUM skips it when few pages changed), so the dead row versions' space is marked free
    /// for reuse — marked, not overwritten — and analyzed, so the planner statistics forget the
    /// values too: what that does and does not reach on PostgreSQL is README, "Running on
    /// PostgreSQL"; `disk_purged` says whether the vacuum ran.
    pub fn delete(&mut self, target: &DeleteTarget, reason: Option<&str>) -> Result<DeleteReport> {
        // The server cannot store a NUL: refused in one sentence, as SQLite refuses it, not as
        // its encoding error.
        if let Some(reason) = reason {
            crate::model::refuse_nul("the delete's reason", reason)?;
        }
        let (mut report, _, owed) = self.in_change_tx(|t| {
            let (report, preview) = delete_in_tx(t, target, reason)?;
            // Already deleted: no row was touched, so there is nothing to vacuum.
            let owed = match preview.changes_nothing() {
                true => None,
                false => Some(super::vacuum::owe(t.txn()?)?),
            };
            Ok((report, preview, owed))
        })?;
        let Some(owed) = owed else {
            return Ok(report);
        };
        // Whether what was destroyed stayed destroyed rests on the guards (README, "Running on
        // PostgreSQL"): a trigger another client added may have copied it.
        report.guards_missing = !self.guards_present().unwrap_or(true);
        let cleanup = super::vacuum::after_purge_paying(
            &mut self.client,
            &super::vacuum::PURGED_TABLES,
            &owed,
        );
        report.disk_purged = cleanup.vacuumed;
        report.disk_note = Some(if !report.disk_purged {
            cleanup.not_vacuumed_note(
                "deleted: no row holds the content any more",
                self.address.user(),
                &super::vacuum::PURGED_TABLES,
            )
        } else if let Some(kept) = cleanup.statistics_note() {
            format!("{VACUUMED}; {kept}")
        } else {
            VACUUMED.to_string()
        });
        Ok(report)
    }

    /// Lifts a tombstone: later writes to the identity are accepted again (its content stays
    /// destroyed).
    pub fn restore(&mut self, id: &Identity) -> Result<TombstoneRef> {
        let subject =
            crate::model::normalize_subject(&id.subject).map_err(crate::model::InvalidRequest)?;
        self.in_change_tx(|t| {
            let id = Identity {
                subject: spelled(t, SUBJECT, &subject, false)?,
                predicate: canonical_predicate(t, &id.predicate)?,
                scope: spelled_scope(t, &id.scope, false)?,
            };
            lock_and_stamp(t, &id)?;
            let Some(r) = identity_row(
                t,
                "tombstones",
                "DELETE FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = $3 RETURNING version",
                &id,
            )?
            else {
                bail!("{id} is not deleted: there is no tombstone to restore (see `memscope list` or the UI's tombstones tab)");
            };
            let version: i64 = r.get(0);
            let detail = json!({ "tombstone_version": version });
            log_event(t, EventKind::Restored, &id, None, None, None, Some(&detail), None)?;
            Ok(TombstoneRef::of(&id, version))
        })
    }

    /// What a delete of `target` would destroy: the delete itself, rolled back.
    /// A refusal of the server (a permission, another session's lock) is the same sentence as
    /// the delete's own.
    pub fn delete_preview(&mut self, target: &DeleteTarget) -> Result<DeletePreview> {
        self.dry_run(|t| delete_in_tx(t, target, None).map(|(_, preview)| preview))
    }

    /// The read log, newest first, filtered (README, "The read log").
    pub fn reads(&mut self, filter: &crate::store::ReadFilter) -> Result<Vec<ReadRecord>> {
        self.read(|t| {
            let (subject, predicate) =
                stored_filter(t, filter.subject.as_deref(), filter.predicate.as_deref())?;
            let since = filter.since.map(std::time::SystemTime::from);
            let limit = filter.limit.unwrap_or(i64::MAX);
            // A name is looked up by its digest, the key of `reads_by_identity` (schema 10: a
            // read of a long name is logged), and compared whole.
            let rows = t.all(
                "SELECT id, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        agent, subject, predicate, repo, task, scope, version, shadowed, note
                 FROM reads
                 WHERE ($1::text IS NULL OR (md5(subject) = md5($1) AND subject = $1))
                   AND ($2::text IS NULL OR (md5(predicate) = md5($2) AND predicate = $2))
                   AND ($3::text IS NULL OR agent = $3) AND ($4::timestamptz IS NULL OR at >= $4)
                 ORDER BY at DESC, id DESC LIMIT $5",
                &[&subject, &predicate, &filter.agent, &since, &limit],
            )?;
            Ok(rows.iter().map(super::browse::read_from_row).collect())
        })
    }

    /// The user settings and their values (defaults where no row exists). `durability` is
    /// SQLite's: on PostgreSQL the server's `synchronous_commit` decides, and it is not listed.
    pub fn user_settings(&mut self) -> Result<Vec<(String, String)>> {
        self.read(|t| {
            let mut out = Vec::new();
            for (key, _) in USER_SETTINGS {
                if key == DURABILITY_KEY {
                    continue;
                }
                let stored = t
                    .opt("SELECT value FROM settings WHERE key = $1", &[&key])?
                    .map(|r| r.get::<_, String>(0));
                out.push((key.to_string(), shown_user_setting(key, stored)));
            }
            Ok(out)
        })
    }

    /// Sets a user setting after checking its value (the same checks as on SQLite); returns the
    /// value as stored.
    pub fn set_user_setting(&mut self, key: &str, value: &str) -> Result<String> {
        if key == DURABILITY_KEY {
            return Err(crate::model::InvalidRequest("durability is a SQLite file's setting: on PostgreSQL the server's synchronous_commit decides when a commit reaches the disk (ask its administrator)".into()).into());
        }
        let stored = checked_user_setting(key, value)?;
        self.in_change_tx(|t| {
            t.exec(
                "INSERT INTO settings (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[&key, &stored],
            )?;
            Ok(())
        })?;
        Ok(stored)
    }

    /// A predicate as stored: normalized and mapped through the alias table.
    pub fn canonical_predicate(&mut self, raw: &str) -> Result<String> {
        self.read(|t| canonical_predicate(t, raw))
    }

    /// The causal clock's next number, for a writer to order its writes (`memscope seq`).
    pub fn next_seq(&mut self) -> Result<i64> {
        self.in_change_tx(|t| causal_seq(t, None))
    }

    /// Every current record: (identity, value, version), in identity order.
    pub fn current(&mut self) -> Result<Vec<(Identity, Value, i64)>> {
        self.read(|t| {
            let rows = t.all(
                "SELECT subject, predicate, scope, value, version FROM memories
                 ORDER BY subject, predicate, scope",
                &[],
            )?;
            rows.iter()
                .map(|r| {
                    let scope: String = r.get(2);
                    Ok((
                        Identity {
                            subject: r.get(0),
                            predicate: r.get(1),
                            scope: Scope::parse(&scope).map_err(|e| anyhow!(e))?,
                        },
                        parse_value(&r.get::<_, String>(3), &scope)?,
                        r.get(4),
                    ))
                })
                .collect()
        })
    }

    /// The causal clock's value: the last number handed out.
    pub fn clock(&mut self) -> Result<i64> {
        self.read(clock_now)
    }

    /// A metric's value (0 when never counted).
    pub fn metric(&mut self, name: &str) -> Result<i64> {
        self.read(|t| {
            Ok(
                t.opt("SELECT value FROM metrics WHERE name = $1", &[&name])?
                    .map_or(0, |r| r.get(0)),
            )
        })
    }
}

fn resolve_in(
    t: &mut Tx<'_>,
    subject: &str,
    predicate: &str,
    repo: Option<&str>,
    task: Option<&str>,
    sql: &'static str,
) -> Result<(Resolution, super::incident::Chain)> {
    let subject = crate::model::normalize_subject(subject).map_err(crate::model::InvalidRequest)?;
    let predicate =
        crate::model::normalize_predicate(predicate).map_err(crate::model::InvalidRequest)?;
    let place = |scope: Option<Scope>| scope.map(|s| s.to_string());
    let repo_text = place(repo.map(|r| Scope::Repo(r.to_string())));
    let task_text = place(task.map(|k| Scope::Task(k.to_string())));
    let folded = |text: &Option<String>| text.as_deref().map(fold);
    let rows = t.all(
        sql,
        &[
            &fold(&subject),
            &subject,
            &predicate,
            &folded(&repo_text),
            &repo_text,
            &folded(&task_text),
            &task_text,
        ],
    )?;
    // The global scope is always in the chain: there is a first row.
    let first = rows
        .first()
        .ok_or_else(|| anyhow!("the resolution query returned no chain"))?;
    let id_of =
        |text: Option<String>| text.and_then(|t| t.split_once(':').map(|(_, id)| id.to_string()));
    let chain = super::incident::Chain {
        subject: first.get(0),
        predicate: first.get(1),
        repo: id_of(first.get(2)),
        task: id_of(first.get(3)),
        ids: Vec::new(),
    };
    let chain = super::incident::Chain {
        ids: crate::store::decide::chain_identities(
            &chain.subject,
            &chain.predicate,
            chain.repo.as_deref(),
            chain.task.as_deref(),
        ),
        ..chain
    };
    let mut looked = Vec::with_capacity(rows.len());
    for r in &rows {
        let scope_text: String = r.get(4);
        // A scope seen twice holds two current records (a client dropped the identity's
        // guard): refused, never answered from either.
        if looked.iter().any(|(seen, _)| *seen == scope_text) {
            let id = write::identity_of(&chain.subject, &chain.predicate, &scope_text)?;
            return Err(crate::store::check::two_rows_of_one_identity(
                "memories", &id,
            ));
        }
        let l = match r.get::<_, Option<String>>(5) {
            Some(v) => Looked::Found {
                value: super::browse::value_of(&v, r.get(10), &scope_text)?,
                version: r.get(6),
                source: r.get(7),
                updated_at: r.get(8),
            },
            None => Looked::Missing { deleted: r.get(9) },
        };
        looked.push((scope_text, l));
    }
    let r = resolve_looked(chain.subject.clone(), chain.predicate.clone(), looked).0;
    Ok((r, chain))
}

pub(super) const SUBJECT: &str = "subject";
pub(super) const SCOPE: &str = "scope";

/// The delete of `target`, inside a transaction: the report, and what it destroyed counted as
/// a preview states it.
fn delete_in_tx(
    t: &mut Tx<'_>,
    target: &DeleteTarget,
    reason: Option<&str>,
) -> Result<(DeleteReport, DeletePreview)> {
    let subject_of = |t: &mut Tx<'_>, s: &str| -> Result<String> {
        let s = crate::model::normalize_subject(s).map_err(crate::model::InvalidRequest)?;
        spelled(t, SUBJECT, &s, false)
    };
    let (subject, predicate, exact) = match target {
        DeleteTarget::Identity(id) => {
            let subject = subject_of(t, &id.subject)?;
            let predicate = canonical_predicate(t, &id.predicate)?;
            let scope = spelled_scope(t, &id.scope, false)?;
            (subject, Some(predicate), Some(scope))
        }
        DeleteTarget::Predicate { subject, predicate } => (
            subject_of(t, subject)?,
            Some(canonical_predicate(t, predicate)?),
            None,
        ),
        DeleteTarget::Subject(subject) => (subject_of(t, subject)?, None, None),
    };
    let ids: Vec<Identity> = match (&predicate, &exact) {
        (Some(p), Some(scope)) => {
            let scope_text = scope.to_string();
            let ever = t
                .opt(
                    "SELECT 1 FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3
                     UNION ALL SELECT 1 FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3
                     LIMIT 1",
                    &[&subject, p, &scope_text],
                )?
                .is_some();
            // An identity that never held a record is still the user's to delete when a
            // pending item names its scope: the item holds their words for it.
            if !ever && pending_naming(t, &subject, p, &scope_text)?.is_empty() {
                bail!("there is no memory {subject} · {p} @ {scope} to delete, and no pending item names its scope: see `memscope list` and `memscope pending`");
            }
            vec![Identity {
                subject: subject.clone(),
                predicate: p.clone(),
                scope: scope.clone(),
            }]
        }
        _ => t
            .all(
                "SELECT predicate, scope FROM memories WHERE subject = $1 AND ($2::text IS NULL OR predicate = $2)
                 UNION SELECT predicate, scope FROM history WHERE subject = $1 AND ($2::text IS NULL OR predicate = $2)
                   AND event IN ('set', 'confirmed', 'stale')
                 UNION SELECT predicate, scope FROM tombstones WHERE subject = $1 AND ($2::text IS NULL OR predicate = $2)
                 UNION SELECT p.predicate, c.value #>> '{}' FROM pending p, jsonb_array_elements(p.candidates::jsonb) c
                   WHERE p.subject = $1 AND ($2::text IS NULL OR p.predicate = $2) AND jsonb_typeof(c.value) = 'string'
                 UNION SELECT predicate, resolved_scope FROM pending
                   WHERE subject = $1 AND ($2::text IS NULL OR predicate = $2) AND resolved_scope IS NOT NULL
                 ORDER BY 1, 2",
                &[&subject, &predicate],
            )?
            .iter()
            .map(|r| {
                Ok(Identity {
                    subject: subject.clone(),
                    predicate: r.get(0),
                    scope: Scope::parse(&r.get::<_, String>(1)).map_err(|e| {
                        anyhow!("a stored scope is invalid ({e}): run `memscope check`")
                    })?,
                })
            })
            .collect::<Result<_>>()?,
    };
    // A predicate or subject delete also destroys every pending item of it.
    let mut pending: std::collections::BTreeSet<i64> = std::collections::BTreeSet::new();
    if exact.is_none() {
        for r in t.all(
            "SELECT id FROM pending WHERE subject = $1 AND ($2::text IS NULL OR predicate = $2)",
            &[&subject, &predicate],
        )? {
            pending.insert(r.get(0));
        }
        if ids.is_empty() && pending.is_empty() {
            bail!("nothing matches that delete: see `memscope list` and `memscope pending`");
        }
    }
    // History may be rewritten by this transaction only (the schema's append-only guard).
    t.txn()?
        .batch_execute(&format!("SET LOCAL {} = 'on'", schema::PURGE_SETTING))?;
    let clock = clock_now(t)?;
    let mut report = DeleteReport {
        tombstoned: vec![],
        already_deleted: vec![],
        purged_versions: 0,
        purged_pending: 0,
        purged_notes: 0,
        disk_purged: true,
        disk_note: None,
        guards_missing: false,
        blanked_copies: 0,
        blanked_sources: 0,
    };
    // What the delete can do on disk after: the tables' owner vacuums them, anyone else leaves
    // it owed (found by an exploratory test: a curator's preview promised the vacuum).
    let tables: Vec<String> = super::vacuum::PURGED_TABLES
        .iter()
        .map(|t| t.to_string())
        .collect();
    let may_vacuum: bool = t.one(super::vacuum::MAY_VACUUM_SQL, &[&tables])?.get(0);
    let mut preview = DeletePreview {
        on_disk: if may_vacuum {
            crate::model::OnDisk::Vacuumed
        } else {
            crate::model::OnDisk::VacuumOwed
        },
        ..DeletePreview::default()
    };
    let mut moved_notes = 0;
    for id in &ids {
        let scope = id.scope.to_string();
        let now = lock_and_stamp(t, id)?;
        let naming = pending_naming(t, &id.subject, &id.predicate, &scope)?;
        // Copies a rescope left elsewhere go even when the identity itself was deleted before
        // (by a release that left them), as on SQLite.
        let (as_of, copies) = moved_copies(t, id, &ids)?;
        for (scope, version) in copies {
            let took = blank_copy(t, (&id.subject, &id.predicate, &scope, version, as_of))?;
            report.blanked_copies += took.events;
            preview.moved_copies += took.events;
            report.purged_pending += took.pending;
            moved_notes += took.notes;
        }
        if let Some(version) = left_of(t, id)?.nothing_to_destroy(id, !naming.is_empty())? {
            // Its refused writes' sources are all that can be left of it, as on SQLite.
            let n = blank_refused_sources(t, id)?;
            report.blanked_sources += n;
            preview.refused_sources += n;
            preview.already_deleted.push(id.clone());
            report.already_deleted.push(TombstoneRef::of(id, version));
            continue;
        }
        let r = t.one(
            "SELECT (SELECT count(*) FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3),
                    greatest((SELECT max(version) FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3),
                             (SELECT version FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3),
                             (SELECT version FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = $3), 0) + 1,
                    (SELECT max(version) FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3)",
            &[&id.subject, &id.predicate, &scope],
        )?;
        let (live, version, record): (i64, i64, Option<i64>) = (r.get(0), r.get(1), r.get(2));
        let r = t.one(
            crate::store::events::PURGED_HISTORY_COUNTS_SQL,
            &[&id.subject, &id.predicate, &scope],
        )?;
        let (purged, raws, events): (i64, i64, i64) = (r.get(0), r.get(1), r.get(2));
        let at = |t: &mut Tx<'_>| -> Result<Vec<(String, String)>> {
            Ok(t.all(
                "SELECT event, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
                     FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3
                       AND event IN ('set', 'removed', 'deleted') ORDER BY id",
                &[&id.subject, &id.predicate, &scope],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        };
        let intervals = crate::store::events::live_intervals(at(t)?, &now);
        let detail = crate::store::events::deleted_detail(reason, purged, intervals, record);
        // Logged first, so the newest history id is never the one purged.
        log_event(
            t,
            EventKind::Deleted,
            id,
            Some(version),
            None,
            None,
            Some(&detail),
            Some(clock),
        )?;
        t.exec(
            crate::store::events::PURGE_HISTORY_SQL,
            &[&id.subject, &id.predicate, &scope],
        )?;
        t.exec(
            "DELETE FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3",
            &[&id.subject, &id.predicate, &scope],
        )?;
        t.exec(
            "INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at)
             VALUES ($1, $2, $3, $4, $5, memscope_now())
             ON CONFLICT (subject, predicate, scope) DO UPDATE
             SET version = EXCLUDED.version, reason = EXCLUDED.reason, deleted_at = EXCLUDED.deleted_at",
            &[&id.subject, &id.predicate, &scope, &version, &reason],
        )
        .map_err(|e| {
            // No key to conflict on: the server says so as it plans the statement.
            let code = e.downcast_ref::<postgres::Error>().and_then(postgres::Error::code);
            if code == Some(&postgres::error::SqlState::INVALID_COLUMN_REFERENCE) {
                anyhow::anyhow!(crate::store::check::TOMBSTONE_KEY_GONE)
            } else {
                e
            }
        })?;
        crate::store::events::check_carried_out(id, left_of(t, id)?, version)?;
        // Purged with this identity, as on SQLite: a later identity of this delete that only
        // these items named has nothing left (`nothing_to_destroy`), and is left as it is.
        for pid in &naming {
            report.purged_pending += t.exec("DELETE FROM pending WHERE id = $1", &[pid])? as i64;
        }
        pending.extend(naming);
        report.purged_versions += purged;
        preview.live_records += live;
        preview.versions += purged;
        preview.raw_texts += raws;
        preview.events += events;
        report.tombstoned.push(TombstoneRef::of(id, version));
        preview.identities.push(id.clone());
    }
    // The rest: a predicate or subject delete's items that no identity named.
    for pid in &pending {
        report.purged_pending += t.exec("DELETE FROM pending WHERE id = $1", &[pid])? as i64;
    }
    let pending_ids: Vec<i64> = pending.iter().copied().collect();
    let remaining: Vec<i64> = t
        .all(
            "SELECT id FROM pending WHERE id = ANY($1) ORDER BY id",
            &[&pending_ids],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    crate::store::events::check_pending_gone(&remaining)?;
    // The reads stay (who read which version when); their notes, which may repeat the
    // content, do not. Found by the digests `reads_by_identity` holds (schema 10).
    let (repo, task) = match &exact {
        Some(Scope::Repo(r)) => (Some(r.clone()), None),
        Some(Scope::Task(k)) => (None, Some(k.clone())),
        _ => (None, None),
    };
    report.purged_notes = moved_notes + t.exec(
        "UPDATE reads SET note = NULL WHERE note IS NOT NULL AND md5(subject) = md5($1) AND subject = $1
           AND ($2::text IS NULL OR (md5(predicate) = md5($2) AND predicate = $2))
           AND ($3::text IS NULL OR repo = $3)
           AND ($4::text IS NULL OR task = $4)",
        &[&subject, &predicate, &repo, &task],
    )? as i64;
    preview.pending_items = report.purged_pending;
    preview.read_notes = report.purged_notes;
    Ok((report, preview))
}

/// Blanks one moved copy everywhere it is kept (`events::blank_copy`): `(subject, predicate,
/// scope, version, the delete's event id)`.
pub(super) fn blank_copy(
    t: &mut Tx<'_>,
    (subject, predicate, at, version, as_of): (&String, &String, &String, i64, i64),
) -> Result<crate::store::events::CopyKept> {
    crate::store::events::blank_copy(|sql| {
        Ok(t.exec(sql, &[subject, predicate, at, &version, &as_of])? as i64)
    })
}

/// The versions of other scopes that keep content a rescope moved into `id`
/// (`events::moved_copies`), none of an identity in `covered`, which this delete destroys whole.
/// With the event id they are destroyed as of (`events::DELETED_AS_OF_SQL`, the blanking's `$5`).
pub(super) fn moved_copies(
    t: &mut Tx<'_>,
    id: &Identity,
    covered: &[Identity],
) -> Result<(i64, Vec<(String, i64)>)> {
    let scope = id.scope.to_string();
    let as_of: i64 = t
        .one(
            crate::store::events::DELETED_AS_OF_SQL,
            &[&id.subject, &id.predicate, &scope],
        )?
        .get(0);
    let events = rescope_events(&t.all(
        crate::store::events::RESCOPE_EVENTS_SQL,
        &[&id.subject, &id.predicate, &as_of],
    )?);
    Ok((
        as_of,
        crate::store::events::moved_copies(
            &scope,
            &events,
            &crate::store::events::destroyed_scopes(id, covered),
        ),
    ))
}

/// The rows `events::RESCOPE_EVENTS_SQL` read, as [`crate::store::events::RescopeEvent`]s.
pub(super) fn rescope_events(rows: &[Row]) -> Vec<crate::store::events::RescopeEvent> {
    rows.iter().map(|r| rescope_event(r, 0)).collect()
}

/// The rows `events::KEPT_COPY_EVENTS_SQL` read, as [`crate::store::events::LoggedEvent`]s.
pub(super) fn logged_events(rows: &[Row]) -> Vec<crate::store::events::LoggedEvent> {
    rows.iter()
        .map(|r| crate::store::events::LoggedEvent {
            id: r.get(0),
            subject: r.get(1),
            predicate: r.get(2),
            event: rescope_event(r, 3),
        })
        .collect()
}

/// One such row whose event starts at column `first`.
pub(super) fn rescope_event(r: &Row, first: usize) -> crate::store::events::RescopeEvent {
    crate::store::events::RescopeEvent {
        event: r.get(first),
        scope: r.get(first + 1),
        version: r.get(first + 2),
        detail: r.get(first + 3),
    }
}

/// Open or closed pending items of this subject and predicate naming `scope`.
fn pending_naming(t: &mut Tx<'_>, subject: &str, predicate: &str, scope: &str) -> Result<Vec<i64>> {
    let scopes = [scope.to_string()];
    Ok(t.all(
        "SELECT id, candidates, resolved_scope FROM pending WHERE subject = $1 AND predicate = $2",
        &[&subject, &predicate],
    )?
    .iter()
    .filter(|r| {
        crate::store::events::pending_names(
            &r.get::<_, String>(1),
            r.get::<_, Option<String>>(2).as_deref(),
            &scopes,
        )
    })
    .map(|r| r.get(0))
    .collect())
}

/// Blanks the sources of `id`'s refused writes (`events::BLANK_REFUSED_SOURCES_SQL`), and
/// refuses when the database did not (`events::check_sources_blanked`); how many.
fn blank_refused_sources(t: &mut Tx<'_>, id: &Identity) -> Result<i64> {
    use crate::store::events::{BLANK_REFUSED_SOURCES_SQL, REFUSED_SOURCES_COUNT_SQL};
    let scope = id.scope.to_string();
    let params: [&dyn Param; 3] = [&id.subject, &id.predicate, &scope];
    let n = t.exec(BLANK_REFUSED_SOURCES_SQL, &params)? as i64;
    let remaining: i64 = t.one(REFUSED_SOURCES_COUNT_SQL, &params)?.get(0);
    crate::store::events::check_sources_blanked(id, remaining)?;
    Ok(n)
}

/// What is left of an identity: content rows of history, current records, the tombstone's
/// version — before a delete (is there anything to destroy?) and after it (was it carried out?).
fn left_of(t: &mut Tx<'_>, id: &Identity) -> Result<crate::store::events::Left> {
    let r = t.one(
        crate::store::events::LEFT_OF_SQL,
        &[&id.subject, &id.predicate, &id.scope.to_string()],
    )?;
    Ok(crate::store::events::Left {
        history: r.get(0),
        beyond_trail: r.get(1),
        records: r.get(2),
        tombstone: r.get(3),
        tombstones: r.get(4),
    })
}

/// A filter's subject and predicate as stored (looked up only: a read registers nothing).
fn stored_filter(
    t: &mut Tx<'_>,
    subject: Option<&str>,
    predicate: Option<&str>,
) -> Result<(Option<String>, Option<String>)> {
    let predicate = predicate.map(|p| canonical_predicate(t, p)).transpose()?;
    let subject = match subject {
        Some(s) => {
            let s = crate::model::normalize_subject(s).map_err(crate::model::InvalidRequest)?;
            Some(spelled(t, SUBJECT, &s, false)?)
        }
        None => None,
    };
    Ok((subject, predicate))
}

/// An existing pending item (any status), else the sentence that there is none.
pub(super) fn pending_item_in(t: &mut Tx<'_>, id: i64) -> Result<PendingItem> {
    pending_item(t, id, false)?.ok_or_else(|| no_item(id))
}

fn no_item(id: i64) -> anyhow::Error {
    anyhow!("there is no pending item #{id}: list them with `memscope pending`")
}

/// One pending item; `lock`: its row locked until the transaction ends.
fn pending_item(t: &mut Tx<'_>, id: i64, lock: bool) -> Result<Option<PendingItem>> {
    let sql = if lock {
        concat!(pending_select!(), " WHERE id = $1 FOR UPDATE")
    } else {
        concat!(pending_select!(), " WHERE id = $1")
    };
    t.opt(sql, &[&id])?
        .as_ref()
        .map(pending_from_row)
        .transpose()
}

fn pending_from_row(r: &Row) -> Result<PendingItem> {
    let candidates: Vec<String> = serde_json::from_str(&r.get::<_, String>(7)).map_err(|e| {
        anyhow!("pending candidates are not a JSON list ({e}): run `memscope check`")
    })?;
    Ok(PendingItem {
        id: r.get(0),
        subject: r.get(1),
        predicate: r.get(2),
        value: parse_value(&r.get::<_, String>(3), "pending")?,
        raw: r.get(4),
        source: r.get(5),
        causal_seq: r.get(6),
        candidates: candidates
            .iter()
            .map(|c| Scope::parse(c).map_err(|e| anyhow!(e)))
            .collect::<Result<_>>()?,
        status: r.get(8),
        created_at: r.get(9),
        resolved_scope: r.get(10),
        resolution: r.get(11),
        merged_from: r.get(12),
        reason: r.get(13),
    })
}

pub(super) fn parse_value(text: &str, at: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| anyhow!("a stored value in {at} is not JSON ({e}): run `memscope check`"))
}

pub(super) fn bump_metric(t: &mut Tx<'_>, name: &str, by: i64) -> Result<()> {
    t.exec(
        "INSERT INTO metrics (name, value) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET value = metrics.value + EXCLUDED.value",
        &[&name, &by],
    )?;
    Ok(())
}

pub(super) fn canonical_predicate(t: &mut Tx<'_>, raw: &str) -> Result<String> {
    let p = crate::model::normalize_predicate(raw).map_err(crate::model::InvalidRequest)?;
    Ok(t.opt(
        "SELECT canonical FROM predicate_aliases WHERE alias = $1",
        &[&p],
    )?
    .map_or(p, |r| r.get(0)))
}

/// The stored spelling of `text` (README, "One spelling per place"); with `register`, `text`
/// becomes the first spelling of a key nobody used yet. Two writers registering one key at
/// once: the second's insert waits for the first's commit and does nothing, and its next
/// statement (a new snapshot, READ COMMITTED) reads the first's spelling.
pub(super) fn spelled(t: &mut Tx<'_>, kind: &str, text: &str, register: bool) -> Result<String> {
    let folded = fold(text);
    let lookup = "SELECT spelling FROM spellings WHERE kind = $1 AND folded = $2";
    if let Some(r) = t.opt(lookup, &[&kind, &folded])? {
        return Ok(r.get(0));
    }
    if !register {
        return Ok(text.to_string());
    }
    t.exec(
        "INSERT INTO spellings (kind, folded, spelling) VALUES ($1, $2, $3)
         ON CONFLICT (kind, folded) DO NOTHING",
        &[&kind, &folded, &text],
    )?;
    Ok(t.one(lookup, &[&kind, &folded])?.get(0))
}

fn respelled(scope: &Scope, text: &str) -> Scope {
    match (scope, text.split_once(':')) {
        (Scope::Repo(_), Some((_, id))) => Scope::Repo(id.to_string()),
        (Scope::Task(_), Some((_, id))) => Scope::Task(id.to_string()),
        _ => scope.clone(),
    }
}

/// A scope in its stored spelling (registered when `register`).
pub(super) fn spelled_scope(t: &mut Tx<'_>, scope: &Scope, register: bool) -> Result<Scope> {
    if *scope == Scope::Global {
        return Ok(Scope::Global);
    }
    let text = spelled(t, SCOPE, &scope.to_string(), register)?;
    Ok(respelled(scope, &text))
}

/// The causal number of a write: its own, which moves the clock up to it, or the clock's next.
fn causal_seq(t: &mut Tx<'_>, own: Option<i64>) -> Result<i64> {
    match own {
        Some(s) => {
            t.exec("SELECT memscope_clock_observe($1)", &[&s])
                .map_err(|e| write::clock_refusal(e, own))?;
            Ok(s)
        }
        None => crate::model::within_clock(t.one("SELECT memscope_clock_next()", &[])?.get(0)),
    }
}

/// One history row.
#[allow(clippy::too_many_arguments)]
pub(super) fn log_event(
    t: &mut Tx<'_>,
    kind: EventKind,
    id: &Identity,
    version: Option<i64>,
    w: Option<&PreparedWrite>,
    causal_seq: Option<i64>,
    detail: Option<&Value>,
    clock: Option<i64>,
) -> Result<()> {
    let scope = id.scope.to_string();
    let detail = detail.map(Value::to_string);
    t.exec(
        "INSERT INTO history (event, subject, predicate, scope, version, value, raw, source, causal_seq, at, detail, clock)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, memscope_now(), $10, $11)",
        &[
            &kind.as_str(),
            &id.subject,
            &id.predicate,
            &scope,
            &version,
            &w.map(|w| w.value_text.as_str()),
            &w.and_then(|w| w.raw.as_deref()),
            &w.map(|w| w.source.as_str()),
            &causal_seq,
            &detail,
            &clock,
        ],
    )?;
    Ok(())
}
