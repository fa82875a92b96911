//! The VACUUM after a purge (README, "Running on PostgreSQL"), shared by `delete` and `gc`:
//! the touched tables' dead row versions marked free for reuse, the index pass forced (a plain
//! VACUUM skips it when few pages changed), and the planner statistics taken again — `pg_stats`
//! shows any role with SELECT on a table its most common values and histogram bounds, which
//! held the purged values until the next ANALYZE.

use anyhow::Result;
use postgres::Client;

/// What the clean-up after a purge reached.
pub(super) struct AfterPurge {
    /// Whether the VACUUM (and its ANALYZE) ran.
    pub vacuumed: bool,
    /// The server's words when the role may VACUUM but the VACUUM failed (a statement or lock
    /// timeout, say).
    pub failed: Option<String>,
    /// Tables the purge left empty whose old statistics could not be dropped, with the server's
    /// reason (the lock not granted in time, say): `pg_stats` may still show purged values.
    pub statistics_kept: Vec<(String, String)>,
}

impl AfterPurge {
    /// The report's note when the VACUUM did not run: `done` says what was purged and that no
    /// row holds it, `user` is the login and `tables` what wants vacuuming.
    pub(super) fn not_vacuumed_note(&self, done: &str, user: &str, tables: &[&str]) -> String {
        let why = match &self.failed {
            // Found by a test: a VACUUM that timed out was reported as one the login may not run.
            Some(words) => format!("the VACUUM of memscope's tables failed ({words})"),
            None => format!(
                "{user} may not VACUUM or ANALYZE memscope's tables (only their owner may, before PostgreSQL 17)"
            ),
        };
        format!(
            "{done}, but {why}, so the dead row versions stay in the table files, and values of it in the planner statistics (pg_stats), until a VACUUM and ANALYZE or autovacuum replace them: ask the database's owner to run `VACUUM (INDEX_CLEANUP ON, ANALYZE) {}`",
            tables.join(", ")
        )
    }

    /// The sentence a report adds when some statistics were kept, if any.
    pub(super) fn statistics_note(&self) -> Option<String> {
        (!self.statistics_kept.is_empty()).then(|| {
            let tables: Vec<String> = self
                .statistics_kept
                .iter()
                .map(|(table, why)| format!("{table} ({why})"))
                .collect();
            format!(
                "but the planner statistics (pg_stats) of {} may still show values of it: the purge left the table empty, so ANALYZE keeps its old statistics, and memscope could not drop them; they go at the next purge that can, or the first ANALYZE once rows are back",
                tables.join(", ")
            )
        })
    }
}

/// Whether the current role may VACUUM every table of `$1` (their owner, or a member of it).
pub(super) const MAY_VACUUM_SQL: &str =
    "SELECT coalesce(bool_and(pg_has_role(current_user, c.relowner, 'USAGE')), false)
     FROM pg_class c WHERE c.oid = ANY($1::text[]::regclass[])";

/// The VACUUM a purge runs on the tables it touched (their names follow).
pub(crate) const VACUUM_AFTER_PURGE: &str = "VACUUM (INDEX_CLEANUP ON, ANALYZE, TRUNCATE false)";

/// The tables a delete touches, which it vacuums after.
pub(super) const PURGED_TABLES: [&str; 4] = ["memories", "history", "pending", "reads"];

/// VACUUMs and ANALYZEs `tables` (memscope's own names, never a user's text) when the current
/// role may — only their owner (or a superuser) may before PostgreSQL 17; for anyone else
/// PostgreSQL skips them with a warning, so ask first.
pub(super) fn after_purge(client: &mut Client, tables: &[&str]) -> AfterPurge {
    let names: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
    let may_vacuum: bool = client
        .query_one(MAY_VACUUM_SQL, &[&names])
        .map(|r| r.get(0))
        .unwrap_or(false);
    // TRUNCATE false: cutting a table's empty tail pages off asks for its exclusive lock, which
    // a second delete's VACUUM queued on the table keeps from being granted — the first retries
    // for 5 s a table, holding up the second, and every later call of both connections waits
    // behind them (found by an exploratory test: concurrent deletes stalled every call of three
    // MCP servers for 15 s). Every dead row version is still removed; an emptied tail page stays
    // in the file, like any emptied page, until rows reuse it (README, "What deletion means on
    // PostgreSQL"). Never SKIP_LOCKED, nor skipped while another VACUUM runs: a VACUUM removes
    // only what was dead when it began.
    let ran = may_vacuum.then(|| {
        client
            .batch_execute(&format!("{VACUUM_AFTER_PURGE} {}", tables.join(", ")))
            .map_err(|e| server_words(&e.into()))
    });
    let (vacuumed, failed) = match ran {
        Some(Ok(())) => (true, None),
        Some(Err(words)) => (false, Some(words)),
        None => (false, None),
    };
    let statistics_kept = if vacuumed {
        tables
            .iter()
            .filter_map(|t| {
                drop_statistics_if_empty(client, t)
                    .err()
                    .map(|e| (t.to_string(), server_words(&e)))
            })
            .collect()
    } else {
        Vec::new()
    };
    AfterPurge {
        vacuumed,
        failed,
        statistics_kept,
    }
}

/// How long one try for a table's exclusive lock waits, how many tries are made and the pause
/// between them: a session waiting for ACCESS EXCLUSIVE makes every later reader and writer of
/// the table wait behind it, so no one waits behind a try for longer than it does (found by
/// review: one wait of 2 s queued every agent's reads and writes of the table behind it).
const LOCK_TRY: &str = "100ms";
const LOCK_TRIES: u32 = 10;
const LOCK_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// ANALYZE replaces a column's statistics only from the rows it samples: a table the purge left
/// empty keeps its old ones, the purged values among them. Without a superuser the only way to
/// drop them is to redefine each text column as the type it already is (no rewrite; the indexes
/// on it are rebuilt, empty), which needs the table's exclusive lock — brief on an empty table,
/// and tried for in short waits ([`LOCK_TRY`]), as readers queue behind a wait for it.
fn drop_statistics_if_empty(client: &mut Client, table: &str) -> Result<()> {
    let empty = format!("SELECT NOT EXISTS (SELECT 1 FROM {table})");
    if !client.query_one(&empty, &[])?.get::<_, bool>(0) {
        return Ok(());
    }
    let mut tries = 1;
    loop {
        match drop_statistics_under_lock(client, table, &empty) {
            Err(e) if tries < LOCK_TRIES && lock_not_granted(&e) => {
                tries += 1;
                std::thread::sleep(LOCK_PAUSE);
            }
            done => return done,
        }
    }
}

/// Whether `e` is the server giving up on a lock (`lock_timeout`).
fn lock_not_granted(e: &anyhow::Error) -> bool {
    e.downcast_ref::<postgres::Error>()
        .and_then(postgres::Error::code)
        == Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE)
}

/// One try of [`drop_statistics_if_empty`]: the lock waited for [`LOCK_TRY`] at most.
fn drop_statistics_under_lock(client: &mut Client, table: &str, empty: &str) -> Result<()> {
    let mut tx = client.transaction()?;
    tx.batch_execute(&format!(
        "SET LOCAL lock_timeout = '{LOCK_TRY}'; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"
    ))?;
    if !tx.query_one(empty, &[])?.get::<_, bool>(0) {
        // Rows came back since the ANALYZE: sample them instead.
        tx.batch_execute(&format!("ANALYZE {table}"))?;
        return Ok(tx.commit()?);
    }
    let columns: Option<String> = tx
        .query_one(
            "SELECT string_agg(format('ALTER COLUMN %I TYPE text COLLATE %s', a.attname, a.attcollation::regcollation),
                               ', ' ORDER BY a.attnum)
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                  JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.oid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped
               AND a.atttypid = 'text'::regtype
               AND EXISTS (SELECT 1 FROM pg_stats s
                           WHERE s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = a.attname)",
            &[&table],
        )?
        .get(0);
    if let Some(columns) = columns {
        tx.batch_execute(&format!("ALTER TABLE {table} {columns}"))?;
    }
    Ok(tx.commit()?)
}

/// The server's own message of a failed clean-up step (a lock not granted in time), else the
/// error as it stands.
fn server_words(e: &anyhow::Error) -> String {
    e.downcast_ref::<postgres::Error>()
        .and_then(postgres::Error::as_db_error)
        .map(|db| db.message().to_string())
        .unwrap_or_else(|| e.to_string())
}
