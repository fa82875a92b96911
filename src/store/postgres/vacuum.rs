//! The VACUUM after a purge (README, "Running on PostgreSQL"), shared by `delete` and `gc`:
//! the touched tables' dead row versions marked free for reuse, the index pass forced (a plain
//! VACUUM skips it when few pages changed), and the planner statistics taken again — `pg_stats`
//! shows any role with SELECT on a table its most common values and histogram bounds, which
//! held the purged values until the next ANALYZE.

use anyhow::Result;
use postgres::{Client, GenericClient};

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
            "{done}, but {why}, so the dead row versions stay in the table files, and values of it in the planner statistics (pg_stats), until a VACUUM and ANALYZE or autovacuum replace them: the purge is owed (`purge_debt_since` in `memscope check`) until the database's owner runs `memscope gc` (or `VACUUM (INDEX_CLEANUP ON, ANALYZE) {}`)",
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

/// The setting that records a purge whose VACUUM has not run yet (docs/SCHEMA.md,
/// `purge_debt_since`; the same key as SQLite's purge debt).
const DEBT_KEY: &str = "purge_debt_since";

/// Every table a purge rewrites — a delete's, `gc`'s, `alias add`'s — which paying an earlier
/// purge's debt vacuums, not knowing which of them that purge touched.
pub(super) const EVERY_PURGED_TABLE: [&str; 5] =
    ["memories", "history", "pending", "reads", "tombstones"];

/// A purge's debt, recorded by [`owe`] in the purge's own transaction.
pub(super) struct Owed {
    /// The transaction that recorded it last: the debt row's `xmin`. A later purge records it
    /// again, and its row version is then that purge's.
    xmin: String,
    /// Whether an earlier purge's debt was there already (its VACUUM never ran).
    earlier: bool,
}

/// Records in the purge's transaction that its VACUUM is owed (found by an exploratory test: a
/// curator's delete said the owner's VACUUM was owed, and nothing kept that — the owner's `gc`
/// said `disk_purged: true` while `pg_stats` still showed the deleted values). Recorded before
/// the VACUUM, not after it fails: a connection lost between the commit and the VACUUM leaves
/// it owed, as SQLite's debt does. The earliest date stays.
pub(super) fn owe(t: &mut impl GenericClient) -> Result<Owed> {
    let r = t.query_one(
        "INSERT INTO settings (key, value)
         VALUES ('purge_debt_since', to_char(memscope_now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))
         ON CONFLICT (key) DO UPDATE SET value = settings.value
         RETURNING xmin::text, xmax::text <> '0'",
        &[],
    )?;
    Ok(Owed {
        xmin: r.get(0),
        earlier: r.get(1),
    })
}

/// After a purge's transaction committed: [`after_purge`] of the tables it touched — of every
/// table a purge rewrites when an earlier purge's VACUUM is owed too — and, when the VACUUM
/// ran, the debt cleared, unless a purge recorded it again since: that purge's dead row
/// versions may have been committed after the VACUUM began, which cannot remove them.
pub(super) fn after_purge_paying(client: &mut Client, tables: &[&str], owed: &Owed) -> AfterPurge {
    let tables = if owed.earlier {
        &EVERY_PURGED_TABLE[..]
    } else {
        tables
    };
    let cleanup = after_purge(client, tables);
    if cleanup.vacuumed {
        // Left owed if this fails: the next `gc` vacuums again, which does no harm.
        let _ = client.execute(
            "DELETE FROM settings WHERE key = $1 AND xmin::text = $2",
            &[&DEBT_KEY, &owed.xmin],
        );
    }
    cleanup
}

/// An earlier purge's owed VACUUM, paid where the role may (`gc`): `None` when nothing is owed.
pub(super) fn pay_debt(client: &mut Client) -> Result<Option<AfterPurge>> {
    let Some(row) = client.query_opt(
        "SELECT xmin::text FROM settings WHERE key = $1",
        &[&DEBT_KEY],
    )?
    else {
        return Ok(None);
    };
    let owed = Owed {
        xmin: row.get(0),
        earlier: true,
    };
    Ok(Some(after_purge_paying(client, &[], &owed)))
}

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
