//! The two statements every new memory runs — its current-view row and its `set` event —
//! prepared once per [`Store`](super::Store) and bound without copying their text.
//!
//! rusqlite binds every text with `SQLITE_TRANSIENT`, so SQLite copies it into memory of its
//! own: a `malloc`, a copy and a `free` per value. These two statements bind about twenty texts
//! per line of a bulk load, and those copies were a tenth of `apply`'s work (callgrind). A
//! [`HotStmt`] binds with `SQLITE_STATIC`: SQLite reads the caller's text in place. That is
//! sound because the texts are borrowed for exactly one call of [`HotStmt::execute`], which
//! runs the statement to completion, resets it and clears its bindings before it returns.

use rusqlite::ffi;
use rusqlite::Connection;
use std::ffi::{c_int, CStr};
use std::ptr::NonNull;

/// One value bound to a [`HotStmt`] parameter, in order from `?1`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Text(&'a str),
    Int(i64),
    Null,
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(s: &'a str) -> Self {
        Arg::Text(s)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(s: &'a String) -> Self {
        Arg::Text(s)
    }
}

impl From<i64> for Arg<'_> {
    fn from(n: i64) -> Self {
        Arg::Int(n)
    }
}

impl<'a, T: Into<Arg<'a>>> From<Option<T>> for Arg<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Arg::Null, Into::into)
    }
}

/// A prepared statement on a connection it does not borrow. Whoever holds one keeps it
/// with its connection and drops it first: [`Store`](super::Store) finalizes its statements
/// in its own `Drop`, before its connection closes, and hands them to a transaction only for
/// the transaction's life (a test opens and drops a thousand stores and counts the process's
/// file descriptors).
pub(crate) struct HotStmt {
    stmt: NonNull<ffi::sqlite3_stmt>,
}

// SAFETY: a statement may be used from any thread as long as its connection is used from only
// one thread at a time; a `HotStmt` only ever moves together with the `Store` that owns its
// connection (rusqlite's `Connection` is `Send` for the same reason).
unsafe impl Send for HotStmt {}

impl HotStmt {
    /// Prepares `sql` (one statement) on `conn`.
    pub(crate) fn prepare(conn: &Connection, sql: &str) -> rusqlite::Result<HotStmt> {
        // SAFETY: the handle is used only for this call, on the thread that holds `conn`.
        let db = unsafe { conn.handle() };
        let len = c_int::try_from(sql.len()).map_err(|_| rusqlite::Error::InvalidQuery)?;
        let mut stmt = std::ptr::null_mut();
        // SAFETY: `sql` outlives the call and its length is passed, so no NUL is needed.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                db,
                sql.as_ptr().cast(),
                len,
                ffi::SQLITE_PREPARE_PERSISTENT as _,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(last_error(db, rc));
        }
        NonNull::new(stmt)
            .map(|stmt| HotStmt { stmt })
            .ok_or(rusqlite::Error::InvalidQuery)
    }

    /// Binds `args` to `?1`, `?2`, …, runs the statement to completion and returns the number
    /// of rows it changed. The statement is reset with its bindings cleared whatever happens,
    /// so nothing it was given is read after this returns.
    pub(crate) fn execute(&mut self, args: &[Arg<'_>]) -> rusqlite::Result<usize> {
        let stmt = self.stmt.as_ptr();
        // SAFETY: `stmt` is a live statement (finalized only on drop).
        let db = unsafe { ffi::sqlite3_db_handle(stmt) };
        let result = self.bind_and_step(stmt, db, args);
        // SAFETY: as above; after this no binding points at the caller's texts.
        unsafe {
            ffi::sqlite3_reset(stmt);
            ffi::sqlite3_clear_bindings(stmt);
        }
        result
    }

    fn bind_and_step(
        &self,
        stmt: *mut ffi::sqlite3_stmt,
        db: *mut ffi::sqlite3,
        args: &[Arg<'_>],
    ) -> rusqlite::Result<usize> {
        // SAFETY: `stmt` is live; the parameter count is a plain read.
        let expected = unsafe { ffi::sqlite3_bind_parameter_count(stmt) } as usize;
        if args.len() != expected {
            return Err(rusqlite::Error::InvalidParameterCount(args.len(), expected));
        }
        for (i, arg) in args.iter().enumerate() {
            let index = (i + 1) as c_int;
            // SAFETY: every text outlives this call (see `execute`), and its length is passed.
            let rc = unsafe {
                match *arg {
                    Arg::Text(s) => ffi::sqlite3_bind_text64(
                        stmt,
                        index,
                        s.as_ptr().cast(),
                        s.len() as ffi::sqlite3_uint64,
                        ffi::SQLITE_STATIC(),
                        ffi::SQLITE_UTF8 as _,
                    ),
                    Arg::Int(n) => ffi::sqlite3_bind_int64(stmt, index, n),
                    Arg::Null => ffi::sqlite3_bind_null(stmt, index),
                }
            };
            if rc != ffi::SQLITE_OK {
                return Err(last_error(db, rc));
            }
        }
        // SAFETY: `stmt` is live and fully bound.
        match unsafe { ffi::sqlite3_step(stmt) } {
            // SAFETY: a plain read of the connection's change counter.
            ffi::SQLITE_DONE => Ok(unsafe { ffi::sqlite3_changes64(db) } as usize),
            ffi::SQLITE_ROW => Err(rusqlite::Error::ExecuteReturnedResults),
            rc => Err(last_error(db, rc)),
        }
    }
}

impl Drop for HotStmt {
    fn drop(&mut self) {
        // SAFETY: the statement is live and finalized exactly once.
        unsafe {
            ffi::sqlite3_finalize(self.stmt.as_ptr());
        }
    }
}

/// The error `rc` with the connection's message, as rusqlite reports it.
fn last_error(db: *mut ffi::sqlite3, rc: c_int) -> rusqlite::Error {
    // SAFETY: `db` is live; the message is copied before anything else touches the connection.
    let msg = unsafe {
        let p = ffi::sqlite3_errmsg(db);
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    };
    // The step's own result carries the primary code; the extended one is more precise.
    // SAFETY: a plain read.
    let code = match unsafe { ffi::sqlite3_extended_errcode(db) } {
        ext if ext & 0xff == rc & 0xff => ext,
        _ => rc,
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), msg)
}

/// The statements a [`Store`](super::Store) keeps prepared, each on first use.
#[derive(Default)]
pub(crate) struct HotStmts {
    fresh_insert: Option<HotStmt>,
    fresh_insert_guarded: Option<HotStmt>,
    log_set: Option<HotStmt>,
}

/// Inserts the first version of an identity that has no current record, no tombstone and no
/// history; any other identity leaves the row out (see `write::insert_if_fresh`).
/// Parameters: subject, predicate, scope, value, source, raw, causal_seq, now.
const FRESH_INSERT: &str = "INSERT OR IGNORE INTO memories (subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at)
     VALUES (?1, ?2, ?3,
             CASE WHEN EXISTS (SELECT 1 FROM tombstones WHERE subject = ?1 AND predicate = ?2 AND scope = ?3)
                    OR EXISTS (SELECT 1 FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3)
                  THEN NULL ELSE ?4 END,
             1, ?5, ?6, ?7, ?8, ?8)";

/// [`FRESH_INSERT`] leaving the tombstone to the schema's intact guard trigger, which refuses
/// the row with `SQLITE_CONSTRAINT_TRIGGER` (see `write::insert_if_fresh`).
const FRESH_INSERT_GUARDED: &str = "INSERT OR IGNORE INTO memories (subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at)
     VALUES (?1, ?2, ?3,
             CASE WHEN EXISTS (SELECT 1 FROM history WHERE subject = ?1 AND predicate = ?2 AND scope = ?3)
                  THEN NULL ELSE ?4 END,
             1, ?5, ?6, ?7, ?8, ?8)";

/// Logs the `set` event of a new applied version. Parameters: subject, predicate, scope,
/// version, value, raw, source, causal_seq, at, clock.
const LOG_SET: &str = "INSERT OR FAIL INTO history (event, subject, predicate, scope, version, value, raw, source, causal_seq, at, clock)
     VALUES ('set', ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

impl HotStmts {
    pub(crate) fn fresh_insert(&mut self, conn: &Connection) -> rusqlite::Result<&mut HotStmt> {
        held(&mut self.fresh_insert, conn, FRESH_INSERT)
    }

    pub(crate) fn fresh_insert_guarded(
        &mut self,
        conn: &Connection,
    ) -> rusqlite::Result<&mut HotStmt> {
        held(&mut self.fresh_insert_guarded, conn, FRESH_INSERT_GUARDED)
    }

    pub(crate) fn log_set(&mut self, conn: &Connection) -> rusqlite::Result<&mut HotStmt> {
        held(&mut self.log_set, conn, LOG_SET)
    }
}

fn held<'s>(
    slot: &'s mut Option<HotStmt>,
    conn: &Connection,
    sql: &str,
) -> rusqlite::Result<&'s mut HotStmt> {
    if slot.is_none() {
        *slot = Some(HotStmt::prepare(conn, sql)?);
    }
    Ok(slot.as_mut().expect("just prepared"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (a TEXT NOT NULL, b INTEGER, UNIQUE (a))")
            .unwrap();
        c
    }

    #[test]
    fn binds_text_int_and_null_and_reports_changes() {
        let c = conn();
        let mut s = HotStmt::prepare(&c, "INSERT OR IGNORE INTO t (a, b) VALUES (?1, ?2)").unwrap();
        let long = "以后都用 npm 🚀".repeat(5000);
        {
            let owned = String::from("一");
            assert_eq!(s.execute(&[(&owned).into(), Arg::Int(7)]).unwrap(), 1);
        } // the text is gone: the row must hold SQLite's own copy
        assert_eq!(s.execute(&[long.as_str().into(), Arg::Null]).unwrap(), 1);
        assert_eq!(
            s.execute(&["一".into(), Arg::Int(8)]).unwrap(),
            0,
            "ignored duplicate"
        );
        let rows: Vec<(String, Option<i64>)> = c
            .prepare("SELECT a, b FROM t ORDER BY rowid")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, vec![("一".to_string(), Some(7)), (long, None)]);
    }

    #[test]
    fn errors_carry_code_and_message_and_leave_the_statement_usable() {
        let c = conn();
        let mut s = HotStmt::prepare(&c, "INSERT OR FAIL INTO t (a, b) VALUES (?1, ?2)").unwrap();
        s.execute(&["x".into(), Arg::Int(1)]).unwrap();
        match s.execute(&["x".into(), Arg::Int(2)]) {
            Err(rusqlite::Error::SqliteFailure(e, Some(msg))) => {
                assert_eq!(e.code, rusqlite::ErrorCode::ConstraintViolation);
                assert!(msg.contains("UNIQUE"), "{msg}");
            }
            other => panic!("expected a constraint error, got {other:?}"),
        }
        match s.execute(&[Arg::Null, Arg::Int(2)]) {
            Err(rusqlite::Error::SqliteFailure(e, Some(msg))) => {
                assert_eq!(e.code, rusqlite::ErrorCode::ConstraintViolation);
                assert!(msg.contains("NOT NULL"), "{msg}");
            }
            other => panic!("expected a NOT NULL error, got {other:?}"),
        }
        assert!(matches!(
            s.execute(&["y".into()]),
            Err(rusqlite::Error::InvalidParameterCount(1, 2))
        ));
        assert_eq!(s.execute(&["y".into(), Arg::Int(3)]).unwrap(), 1);
        // A statement reset after every call holds no transaction open.
        assert!(c.is_autocommit());
    }

    #[test]
    fn bad_sql_is_an_error_not_a_panic() {
        let c = conn();
        assert!(HotStmt::prepare(&c, "INSERT INTO nowhere VALUES (?1)").is_err());
        assert!(HotStmt::prepare(&c, "").is_err());
    }
}
