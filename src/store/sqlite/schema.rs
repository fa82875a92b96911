//! Schema v1, the public contract of the database (documented in docs/SCHEMA.md), and the
//! forward-migration mechanism keyed on `PRAGMA user_version`.

use anyhow::{bail, Context, Result};
use rusqlite::Connection;

/// The schema version this build writes. A database with a higher `user_version` is refused.
pub const SCHEMA_VERSION: i64 = 8;

/// Name of the connection-local SQL function that gates history rewrites. memscope registers it
/// on its own connections; any other client fails closed with "no such function".
pub const PURGE_GATE_FN: &str = "memscope_purge_gate";

/// Migration `i` takes a database from version `i` to `i + 1`.
pub type Migration = &'static str;

pub const MIGRATIONS: &[Migration] = &[V1, V2, V3, V4, V5, V6, V7, V8];

const V1: &str = r#"
CREATE TABLE settings (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE metrics (
    name  TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE predicate_aliases (
    alias     TEXT PRIMARY KEY NOT NULL,
    canonical TEXT NOT NULL CHECK (length(canonical) > 0),
    added_at  TEXT NOT NULL,
    CHECK (alias <> canonical)
) WITHOUT ROWID;

CREATE TABLE memories (
    id            INTEGER PRIMARY KEY,
    subject       TEXT NOT NULL CHECK (length(subject) > 0),
    predicate     TEXT NOT NULL CHECK (length(predicate) > 0),
    scope         TEXT NOT NULL CHECK (scope = 'global' OR (scope GLOB 'repo:?*') OR (scope GLOB 'task:?*')),
    value         TEXT NOT NULL CHECK (json_valid(value)),
    version       INTEGER NOT NULL CHECK (version >= 1),
    source        TEXT NOT NULL CHECK (length(source) > 0),
    raw           TEXT,
    causal_seq    INTEGER NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    confirmed_at  TEXT,
    confirm_count INTEGER NOT NULL DEFAULT 0,
    confirmed_source TEXT,
    -- Uniqueness of the identity (invariant 1), in scope-first order so the same index serves
    -- the current view grouped by scope (`global` < `repo:…` < `task:…` sort as text).
    UNIQUE (scope, subject, predicate)
);

-- Ids only grow: a purge always logs its `deleted` event before removing older rows, so the
-- highest id is never deleted and never reused (no AUTOINCREMENT page to write per event).
CREATE TABLE history (
    id         INTEGER PRIMARY KEY,
    event      TEXT NOT NULL,
    subject    TEXT NOT NULL,
    predicate  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    version    INTEGER,
    value      TEXT CHECK (value IS NULL OR json_valid(value)),
    raw        TEXT,
    source     TEXT,
    causal_seq INTEGER,
    at         TEXT NOT NULL,
    detail     TEXT CHECK (detail IS NULL OR json_valid(detail))
);
CREATE INDEX history_by_identity ON history (subject, predicate, scope, id);

CREATE TABLE tombstones (
    subject    TEXT NOT NULL,
    predicate  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    reason     TEXT,
    deleted_at TEXT NOT NULL,
    PRIMARY KEY (subject, predicate, scope)
) WITHOUT ROWID;

CREATE TABLE pending (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    subject        TEXT NOT NULL,
    predicate      TEXT NOT NULL,
    value          TEXT NOT NULL CHECK (json_valid(value)),
    raw            TEXT,
    source         TEXT NOT NULL,
    causal_seq     INTEGER NOT NULL,
    candidates     TEXT NOT NULL CHECK (json_valid(candidates) AND json_array_length(candidates) >= 2),
    status         TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved', 'rejected')),
    created_at     TEXT NOT NULL,
    resolved_at    TEXT,
    resolved_scope TEXT,
    resolution     TEXT
);
CREATE INDEX pending_open ON pending (status, id);
CREATE INDEX pending_by_identity ON pending (subject, predicate);

-- Invariant 3, at the lowest level: nothing becomes current on a tombstoned identity.
CREATE TRIGGER memories_no_resurrection_insert BEFORE INSERT ON memories
WHEN EXISTS (SELECT 1 FROM tombstones t
             WHERE t.subject = NEW.subject AND t.predicate = NEW.predicate AND t.scope = NEW.scope)
BEGIN SELECT RAISE(ABORT, 'memscope: identity is tombstoned; restore it first'); END;

CREATE TRIGGER memories_no_resurrection_update BEFORE UPDATE ON memories
WHEN EXISTS (SELECT 1 FROM tombstones t
             WHERE t.subject = NEW.subject AND t.predicate = NEW.predicate AND t.scope = NEW.scope)
BEGIN SELECT RAISE(ABORT, 'memscope: identity is tombstoned; restore it first'); END;

-- Content may not be logged against a tombstoned identity.
CREATE TRIGGER history_no_content_on_tombstone BEFORE INSERT ON history
WHEN (NEW.value IS NOT NULL OR NEW.raw IS NOT NULL)
 AND EXISTS (SELECT 1 FROM tombstones t
             WHERE t.subject = NEW.subject AND t.predicate = NEW.predicate AND t.scope = NEW.scope)
BEGIN SELECT RAISE(ABORT, 'memscope: identity is tombstoned; its content may not be stored'); END;

-- History is append-only. Only memscope's purge path, which sets a connection-local gate, may
-- rewrite it; a client without the gate function fails with "no such function".
CREATE TRIGGER history_append_only_update BEFORE UPDATE ON history
WHEN NOT memscope_purge_gate()
BEGIN SELECT RAISE(ABORT, 'memscope: history is append-only'); END;

CREATE TRIGGER history_append_only_delete BEFORE DELETE ON history
WHEN NOT memscope_purge_gate()
BEGIN SELECT RAISE(ABORT, 'memscope: history is append-only'); END;
"#;

/// v2: the read log. A read records what resolve returned — identity and version, never the
/// value — so deletion still destroys content; the value is found through history.
const V2: &str = r#"
CREATE TABLE reads (
    id        INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    agent     TEXT,
    subject   TEXT NOT NULL,
    predicate TEXT NOT NULL,
    repo      TEXT,
    task      TEXT,
    scope     TEXT,
    version   INTEGER,
    shadowed  TEXT CHECK (shadowed IS NULL OR json_valid(shadowed)),
    note      TEXT
);
CREATE INDEX reads_by_time ON reads (at);

-- The causal clock as it stood when each event was logged: writes keep the clock in the event
-- they log instead of rewriting settings.causal_clock in every transaction.
ALTER TABLE history ADD COLUMN clock INTEGER;

-- The highest causal_seq among the current version's confirmations: a causally older write
-- must not replace a value that was confirmed later.
ALTER TABLE memories ADD COLUMN confirmed_seq INTEGER;

-- More guards against raw-SQL clients.
CREATE TRIGGER tombstones_not_over_live BEFORE INSERT ON tombstones
WHEN EXISTS (SELECT 1 FROM memories m
             WHERE m.subject = NEW.subject AND m.predicate = NEW.predicate AND m.scope = NEW.scope)
BEGIN SELECT RAISE(ABORT, 'memscope: delete the identity with memscope delete, not by inserting a tombstone'); END;

CREATE TRIGGER tombstones_version_only_rises BEFORE UPDATE ON tombstones
WHEN NEW.version < OLD.version OR NEW.subject <> OLD.subject OR NEW.predicate <> OLD.predicate OR NEW.scope <> OLD.scope
BEGIN SELECT RAISE(ABORT, 'memscope: a tombstone version never goes down'); END;

-- INSERT OR REPLACE deletes the old row without firing the delete trigger: refuse reused ids.
CREATE TRIGGER history_ids_never_reused BEFORE INSERT ON history
WHEN NEW.id IS NOT NULL AND EXISTS (SELECT 1 FROM history WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'memscope: history is append-only'); END;
CREATE INDEX reads_by_identity ON reads (subject, predicate, at);
"#;

/// v3: the hot tables without SQL functions in their guards.
///
/// SQLite gives a statement a statement journal (a copy of every page it touches, so it can be
/// undone alone) when the statement may write several rows — any table with an insert trigger
/// counts — and may abort half-way: an `ABORT` conflict, `RAISE(ABORT)`, or *any* SQL function
/// call, since a function can fail. v1's `length()`, `GLOB` and `json_valid()` CHECKs made every
/// write to `memories` and `history` pay that copy. v3 swaps them in place for text comparisons
/// (SQLite's documented way to change CHECK constraints: edit the table's definition in
/// `sqlite_schema`, then reload the schema; rows are not touched, so nothing a raw client added
/// — columns, views, triggers, indexes, odd rows — gets in the way, and a million records
/// migrate in moments). If a definition was changed by hand and a text is not found, that old
/// CHECK stays: still correct, only slower. JSON validity of values moves to `memscope check`.
/// The insert guards raise `FAIL`, which for the single-row writes of the write path undoes
/// exactly as much as `ABORT` (nothing had been written yet). Every guard trigger is created
/// again, so a database whose triggers a raw-SQL client dropped gets them back; and the history
/// index drops its explicit `id` (SQLite appends the rowid to every index key anyway).
const V3: &str = r#"
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql =
    replace(replace(replace(replace(replace(sql,
        'CHECK (length(subject) > 0)', 'CHECK (subject <> '''')'),
        'CHECK (length(predicate) > 0)', 'CHECK (predicate <> '''')'),
        'CHECK (length(source) > 0)', 'CHECK (source <> '''')'),
        'CHECK (scope = ''global'' OR (scope GLOB ''repo:?*'') OR (scope GLOB ''task:?*''))',
        -- 'repo:' < scope < 'repo;' holds exactly for the texts that start with `repo:` and go
        -- on (':' and ';' are neighbours).
        'CHECK (scope = ''global'' OR (scope > ''repo:'' AND scope < ''repo;'') OR (scope > ''task:'' AND scope < ''task;''))'),
        'TEXT NOT NULL CHECK (json_valid(value))', 'TEXT NOT NULL')
WHERE type = 'table' AND name = 'memories';
UPDATE sqlite_schema SET sql =
    replace(replace(sql,
        'TEXT CHECK (value IS NULL OR json_valid(value))', 'TEXT'),
        'TEXT CHECK (detail IS NULL OR json_valid(detail))', 'TEXT')
WHERE type = 'table' AND name = 'history';
PRAGMA writable_schema = RESET;

DROP INDEX IF EXISTS history_by_identity;
CREATE INDEX history_by_identity ON history (subject, predicate, scope);

DROP TRIGGER IF EXISTS memories_no_resurrection_insert;
DROP TRIGGER IF EXISTS memories_no_resurrection_update;
DROP TRIGGER IF EXISTS history_no_content_on_tombstone;
DROP TRIGGER IF EXISTS history_append_only_update;
DROP TRIGGER IF EXISTS history_append_only_delete;
DROP TRIGGER IF EXISTS history_ids_never_reused;
DROP TRIGGER IF EXISTS tombstones_not_over_live;
DROP TRIGGER IF EXISTS tombstones_version_only_rises;

-- A row with a NULL value never lands (NOT NULL), so the guard leaves it to that constraint:
-- the write path's one-statement insert turns its value to NULL to back off quietly.
CREATE TRIGGER memories_no_resurrection_insert BEFORE INSERT ON memories
WHEN NEW.value IS NOT NULL
 AND EXISTS (SELECT 1 FROM tombstones t
             WHERE t.subject = NEW.subject AND t.predicate = NEW.predicate AND t.scope = NEW.scope)
BEGIN SELECT RAISE(FAIL, 'memscope: identity is tombstoned; restore it first'); END;

CREATE TRIGGER memories_no_resurrection_update BEFORE UPDATE ON memories
WHEN EXISTS (SELECT 1 FROM tombstones t
             WHERE t.subject = NEW.subject AND t.predicate = NEW.predicate AND t.scope = NEW.scope)
BEGIN SELECT RAISE(FAIL, 'memscope: identity is tombstoned; restore it first'); END;

CREATE TRIGGER history_no_content_on_tombstone BEFORE INSERT ON history
WHEN (NEW.value IS NOT NULL OR NEW.raw IS NOT NULL)
 AND EXISTS (SELECT 1 FROM tombstones t
             WHERE t.subject = NEW.subject AND t.predicate = NEW.predicate AND t.scope = NEW.scope)
BEGIN SELECT RAISE(FAIL, 'memscope: identity is tombstoned; its content may not be stored'); END;

-- A BEFORE INSERT trigger sees NEW.id = -1 while SQLite has yet to pick the id, so only an
-- explicit id is looked up. (memscope never writes id -1: a row with it is a raw client's.)
CREATE TRIGGER history_ids_never_reused BEFORE INSERT ON history
WHEN NEW.id <> -1 AND EXISTS (SELECT 1 FROM history WHERE id = NEW.id)
BEGIN SELECT RAISE(FAIL, 'memscope: history is append-only'); END;

CREATE TRIGGER history_append_only_update BEFORE UPDATE ON history
WHEN NOT memscope_purge_gate()
BEGIN SELECT RAISE(ABORT, 'memscope: history is append-only'); END;

CREATE TRIGGER history_append_only_delete BEFORE DELETE ON history
WHEN NOT memscope_purge_gate()
BEGIN SELECT RAISE(ABORT, 'memscope: history is append-only'); END;

CREATE TRIGGER tombstones_not_over_live BEFORE INSERT ON tombstones
WHEN EXISTS (SELECT 1 FROM memories m
             WHERE m.subject = NEW.subject AND m.predicate = NEW.predicate AND m.scope = NEW.scope)
BEGIN SELECT RAISE(ABORT, 'memscope: delete the identity with memscope delete, not by inserting a tombstone'); END;

CREATE TRIGGER tombstones_version_only_rises BEFORE UPDATE ON tombstones
WHEN NEW.version < OLD.version OR NEW.subject <> OLD.subject OR NEW.predicate <> OLD.predicate OR NEW.scope <> OLD.scope
BEGIN SELECT RAISE(ABORT, 'memscope: a tombstone version never goes down'); END;
"#;

/// v4: one spelling per place. `spellings` registers, for each subject and each repository or
/// task scope, the first spelling memscope met under its case-folded key (`spelling::fold`):
/// every later spelling of that key is stored as the first. A pending item may now also hold a
/// value that a spelling merge could not place (`merged_from`: the identity as it was spelled),
/// with the one scope it belongs to as its only candidate. The merge of a v3 database's
/// coinciding spellings runs in Rust in the same step (`store::spellings::merge_spellings`).
const V4: &str = r#"
CREATE TABLE spellings (
    kind     TEXT NOT NULL CHECK (kind IN ('subject', 'scope')),
    folded   TEXT NOT NULL,
    spelling TEXT NOT NULL CHECK (spelling <> ''),
    PRIMARY KEY (kind, folded)
) WITHOUT ROWID;

ALTER TABLE pending ADD COLUMN merged_from TEXT;
ALTER TABLE pending ADD COLUMN reason TEXT;

PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql =
    replace(sql, 'json_array_length(candidates) >= 2', 'json_array_length(candidates) >= 1')
WHERE type = 'table' AND name = 'pending';
PRAGMA writable_schema = RESET;
"#;

/// v5: the same CHECK, cheaper to run. SQLite compiles `status IN ('open', 'resolved',
/// 'rejected')` (a list of three or more) inside a CHECK into a temporary table built and
/// dropped for every row written — for each pending item, a third of what the whole write
/// cost — so it becomes comparisons joined by OR, which accept exactly the same texts. Edited in place as v3 did; a definition
/// changed by hand keeps its old CHECK (still correct, only slower).
const V5: &str = r#"
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql =
    replace(sql, 'CHECK (status IN (''open'', ''resolved'', ''rejected''))',
                 'CHECK (status = ''open'' OR status = ''resolved'' OR status = ''rejected'')')
WHERE type = 'table' AND name = 'pending';
PRAGMA writable_schema = RESET;
"#;

/// v6: an ambiguous write that repeats an open item joins it (`write::open_pending_like`); the
/// item is found by subject, predicate and source among the open ones, without reading every
/// item of the identity — an `apply` of many ambiguous or guard-queued lines for one subject
/// took time quadratic in its open items. An index only: the same tables and columns.
const V6: &str = r#"
CREATE INDEX pending_repeats ON pending (subject, predicate, source) WHERE status = 'open';
"#;

/// v7: a tombstone's version never goes down by `INSERT OR REPLACE` either, nor are its reason
/// and time rewritten under a lower version (found by review): REPLACE deletes the old row
/// without firing a delete or update trigger, so `tombstones_version_only_rises` never saw it.
/// A BEFORE INSERT trigger still sees the old row. memscope's own delete raises the version.
const V7: &str = r#"
CREATE TRIGGER tombstones_never_replaced_lower BEFORE INSERT ON tombstones
WHEN EXISTS (SELECT 1 FROM tombstones t
             WHERE t.subject = NEW.subject AND t.predicate = NEW.predicate AND t.scope = NEW.scope
               AND t.version > NEW.version)
BEGIN SELECT RAISE(ABORT, 'memscope: a tombstone version never goes down'); END;
"#;

/// v8: the events `gc`, `check` and `import` look for in the whole history — a rescope's, a
/// delete's, a tombstone's collection (`events::KEPT_COPY_EVENTS_SQL`), a refused write's kept
/// source (`events::COLLECTED_SOURCES_COUNT_SQL`) — each by an index of those rows alone, so a
/// `gc` of a million-event history reads none of the rest. SQLite uses a partial index only
/// for a query that repeats its `WHERE` terms word for word: those queries do, and a test
/// reads their plans.
const V8: &str = r#"
CREATE INDEX IF NOT EXISTS history_kept_copy_events ON history (subject, predicate)
    WHERE event IN ('rescoped', 'reverted', 'removed', 'deleted', 'tombstone_collected');
CREATE INDEX IF NOT EXISTS history_refused_sources ON history (subject, predicate, scope)
    WHERE event IN ('rejected', 'pending_resolved') AND source IS NOT NULL;
"#;

/// The guard triggers (README, "check"): what keeps a raw SQL client from breaking the
/// invariants. V3 creates the first eight as they stand, V7 the ninth.
pub const GUARD_TRIGGERS: [&str; 9] = [
    "memories_no_resurrection_insert",
    "memories_no_resurrection_update",
    "history_no_content_on_tombstone",
    "history_append_only_update",
    "history_append_only_delete",
    "history_ids_never_reused",
    "tombstones_not_over_live",
    "tombstones_version_only_rises",
    "tombstones_never_replaced_lower",
];

/// The index `init` makes when `memories` lost the uniqueness of its identity (a raw client
/// rebuilt the table without `UNIQUE (scope, subject, predicate)`): a unique index is the same
/// guard, and `ON CONFLICT` on the identity still finds it.
pub const IDENTITY_INDEX_SQL: &str =
    "CREATE UNIQUE INDEX memories_identity ON memories (scope, subject, predicate)";

/// The index `init` makes when `tombstones` lost its primary key (a raw client rebuilt the
/// table without it): the same guard, found by `ON CONFLICT` as the key was.
pub const TOMBSTONE_INDEX_SQL: &str =
    "CREATE UNIQUE INDEX tombstones_identity ON tombstones (subject, predicate, scope)";

/// Whether some unique index of `table` — `memories` (its own constraint, or
/// `memories_identity`) or `tombstones` (its primary key, or `tombstones_identity`) — holds
/// exactly the identity's three columns, whole (not partial).
pub fn unique_on_identity(conn: &rusqlite::Connection, table: &str) -> rusqlite::Result<bool> {
    let mut indexes = conn
        .prepare("SELECT name FROM pragma_index_list(?1) WHERE \"unique\" = 1 AND partial = 0")?;
    let names: Vec<String> = indexes
        .query_map([table], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut columns = conn.prepare("SELECT name FROM pragma_index_info(?1)")?;
    for name in names {
        let mut held: Vec<Option<String>> = columns
            .query_map([&name], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        held.sort();
        if held
            == [
                Some("predicate".into()),
                Some("scope".into()),
                Some("subject".into()),
            ]
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The text of guard trigger `name` as SQLite keeps it in `sqlite_schema.sql` (the statement
/// the last migration that creates it has, without its `;`), or `None` for a name that is not
/// a guard.
pub fn guard_trigger_sql(name: &str) -> Option<&'static str> {
    let start = format!("CREATE TRIGGER {name} ");
    MIGRATIONS.iter().rev().find_map(|sql| {
        let from = sql.find(&start)?;
        let len = sql[from..].find("END;")? + "END".len();
        Some(&sql[from..from + len])
    })
}

/// The text of the guard trigger that refuses a current record on a tombstoned identity, as
/// SQLite keeps it in `sqlite_schema.sql` (the last migration creates it).
pub fn memories_insert_guard_sql() -> &'static str {
    guard_trigger_sql("memories_no_resurrection_insert").expect("V3 creates the insert guard")
}

/// The message the insert guard refuses a tombstoned identity with.
pub const TOMBSTONED_REFUSAL: &str = "memscope: identity is tombstoned; restore it first";

/// Whether `conn`'s database has the insert guard exactly as memscope made it — not dropped,
/// not replaced by a raw-SQL client.
pub fn memories_insert_guard_intact(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema
                        WHERE type = 'trigger' AND name = 'memories_no_resurrection_insert'
                          AND tbl_name = 'memories' AND sql = ?1)",
    )?
    .query_row([memories_insert_guard_sql()], |r| r.get(0))
}

/// Brings `conn` forward to the last of `migrations`, each step in its own transaction.
/// Refuses a database newer than this build knows.
pub fn migrate_with(conn: &mut Connection, migrations: &[Migration]) -> Result<i64> {
    migrate_with_hook(conn, migrations, &|_, _| Ok(()))
}

/// As [`migrate_with`], running `after_step(tx, new_version)` inside each step's transaction.
/// The version is re-read inside the write lock, so processes that open a new database at the
/// same moment migrate it exactly once.
pub fn migrate_with_hook(
    conn: &mut Connection,
    migrations: &[Migration],
    after_step: &dyn Fn(&rusqlite::Transaction<'_>, i64) -> Result<()>,
) -> Result<i64> {
    let target = migrations.len() as i64;
    // Up to date is the common case: answer it without taking the write lock, so readers
    // open while another process writes.
    let seen: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if seen == target {
        return Ok(target);
    }
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        // A version no memscope writes (a raw client's `PRAGMA user_version = -1`) names no
        // migration to run: said, never looked up (found by an exploratory test: it panicked).
        if current < 0 {
            bail!(
                "this database's schema version (PRAGMA user_version) reads {current}, which no memscope writes: a raw SQL client changed it — `memscope init` sets it back when the tables are memscope's"
            );
        }
        if current > target {
            bail!(
                "this database uses schema version {current}, newer than this memscope understands ({target}): upgrade memscope to open it"
            );
        }
        if current == target {
            return Ok(target);
        }
        if current == 0 {
            let tables: i64 = tx.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )?;
            if tables > 0 {
                bail!("the database is a SQLite database but not a memscope one: point --db at a memscope database or a new file name");
            }
        }
        let sql = migrations[current as usize];
        tx.execute_batch(sql)
            .with_context(|| format!("migrating the schema to version {}", current + 1))?;
        tx.pragma_update(None, "user_version", current + 1)?;
        after_step(&tx, current + 1)?;
        tx.commit()?;
    }
}

pub fn migrate(conn: &mut Connection) -> Result<i64> {
    migrate_with(conn, MIGRATIONS)
}

/// The tables and columns memscope's schema holds, each table's in order: those of a fresh
/// database migrated to this release ([`CONTRACT`]) — the contract both backends keep
/// (docs/SCHEMA.md), which `check` holds a database to before it reads it (a table or column a
/// raw client dropped stops every command that reads it).
pub(crate) fn contract_columns() -> &'static [(String, Vec<String>)] {
    static COLUMNS: std::sync::OnceLock<Vec<(String, Vec<String>)>> = std::sync::OnceLock::new();
    COLUMNS.get_or_init(|| {
        CONTRACT
            .iter()
            .map(|t| {
                let columns = t.columns.iter().map(|c| c.to_string()).collect();
                (t.table.to_string(), columns)
            })
            .collect()
    })
}

/// One table of the schema this build writes: its columns in order, and what its rows rely on
/// beside them — the columns declared `NOT NULL`, the column that is the table's rowid
/// (`INTEGER PRIMARY KEY`: an id SQLite picks when none is given), and the key that keeps one
/// row per key (`INSERT OR IGNORE` and `ON CONFLICT` find it). The identity keys of `memories`
/// and `tombstones` are guards (`unique_on_identity`): `init` makes them again as indexes.
/// Written out rather than read from a database migrated in memory, which cost every command
/// milliseconds as it opened: a test holds the two to each other.
pub(crate) struct TableContract {
    pub table: &'static str,
    pub columns: &'static [&'static str],
    pub not_null: &'static [&'static str],
    pub rowid: Option<&'static str>,
    pub key: &'static [&'static str],
}

pub(crate) const CONTRACT: &[TableContract] = &[
    TableContract {
        table: "history",
        columns: &[
            "id",
            "event",
            "subject",
            "predicate",
            "scope",
            "version",
            "value",
            "raw",
            "source",
            "causal_seq",
            "at",
            "detail",
            "clock",
        ],
        not_null: &["event", "subject", "predicate", "scope", "at"],
        rowid: Some("id"),
        key: &[],
    },
    TableContract {
        table: "memories",
        columns: &[
            "id",
            "subject",
            "predicate",
            "scope",
            "value",
            "version",
            "source",
            "raw",
            "causal_seq",
            "created_at",
            "updated_at",
            "confirmed_at",
            "confirm_count",
            "confirmed_source",
            "confirmed_seq",
        ],
        not_null: &[
            "subject",
            "predicate",
            "scope",
            "value",
            "version",
            "source",
            "causal_seq",
            "created_at",
            "updated_at",
            "confirm_count",
        ],
        rowid: Some("id"),
        key: &[],
    },
    TableContract {
        table: "metrics",
        columns: &["name", "value"],
        not_null: &["name", "value"],
        rowid: None,
        key: &["name"],
    },
    TableContract {
        table: "pending",
        columns: &[
            "id",
            "subject",
            "predicate",
            "value",
            "raw",
            "source",
            "causal_seq",
            "candidates",
            "status",
            "created_at",
            "resolved_at",
            "resolved_scope",
            "resolution",
            "merged_from",
            "reason",
        ],
        not_null: &[
            "subject",
            "predicate",
            "value",
            "source",
            "causal_seq",
            "candidates",
            "status",
            "created_at",
        ],
        rowid: Some("id"),
        key: &[],
    },
    TableContract {
        table: "predicate_aliases",
        columns: &["alias", "canonical", "added_at"],
        not_null: &["alias", "canonical", "added_at"],
        rowid: None,
        key: &["alias"],
    },
    TableContract {
        table: "reads",
        columns: &[
            "id",
            "at",
            "agent",
            "subject",
            "predicate",
            "repo",
            "task",
            "scope",
            "version",
            "shadowed",
            "note",
        ],
        not_null: &["at", "subject", "predicate"],
        rowid: Some("id"),
        key: &[],
    },
    TableContract {
        table: "settings",
        columns: &["key", "value"],
        not_null: &["key", "value"],
        rowid: None,
        key: &["key"],
    },
    TableContract {
        table: "spellings",
        columns: &["kind", "folded", "spelling"],
        not_null: &["kind", "folded", "spelling"],
        rowid: None,
        key: &["kind", "folded"],
    },
    TableContract {
        table: "tombstones",
        columns: &[
            "subject",
            "predicate",
            "scope",
            "version",
            "reason",
            "deleted_at",
        ],
        not_null: &["subject", "predicate", "scope", "version", "deleted_at"],
        rowid: None,
        // The identity's key: a guard (`unique_on_identity`).
        key: &[],
    },
];

/// The tables schema version 1 makes: a file holding at least half of them is memscope's
/// ([`is_memscope_schema`]).
const V1_TABLES: [&str; 7] = [
    "history",
    "memories",
    "metrics",
    "pending",
    "predicate_aliases",
    "settings",
    "tombstones",
];

/// The names (tables, indexes, triggers) each migration brings that no earlier one had, in
/// order: `new_names()[v - 1]` are version `v`'s. A file holding any of version `v`'s names
/// has been migrated to `v` at least, whatever its `user_version` says.
fn new_names() -> &'static [Vec<String>] {
    static NAMES: std::sync::OnceLock<Vec<Vec<String>>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let read = || -> Result<Vec<Vec<String>>> {
            let mut conn = Connection::open_in_memory()?;
            let mut seen = std::collections::BTreeSet::new();
            let mut out = Vec::new();
            for v in 1..=MIGRATIONS.len() {
                migrate_with(&mut conn, &MIGRATIONS[..v])?;
                let mut new = Vec::new();
                for name in schema_names(&conn)? {
                    if seen.insert(name.clone()) {
                        new.push(name);
                    }
                }
                out.push(new);
            }
            Ok(out)
        };
        read().expect("the schema this build writes migrates an empty database in memory")
    })
}

/// The names of `conn`'s tables, indexes and triggers, SQLite's own left out.
fn schema_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.prepare(
        "SELECT name FROM sqlite_schema WHERE type IN ('table', 'index', 'trigger')
           AND name NOT LIKE 'sqlite%' ORDER BY name",
    )?
    .query_map([], |r| r.get(0))?
    .collect()
}

/// Whether a file holding the tables `names` (beside any other of its objects) is memscope's:
/// at least half of the tables schema version 1 makes. Another application's database is
/// refused before anything is migrated or its journal mode changed (found by an exploratory
/// test: one whose `user_version` was 3 was taken for memscope's, migrated, and left in WAL
/// mode by `check`); one table dropped by a raw client still leaves the file memscope's.
pub(crate) fn is_memscope_schema(names: &[String]) -> bool {
    let held = V1_TABLES
        .iter()
        .filter(|t| names.iter().any(|n| n == *t))
        .count();
    held * 2 >= V1_TABLES.len()
}

/// The schema version the objects `names` of a file show it was migrated to: the last version
/// any of whose own tables, indexes or triggers the file holds (0: none).
pub(crate) fn version_shown_by(names: &[String]) -> i64 {
    new_names()
        .iter()
        .rposition(|new| new.iter().any(|n| names.contains(n)))
        .map_or(0, |i| i as i64 + 1)
}

/// The names of `conn`'s tables, indexes and triggers (see [`version_shown_by`]).
pub(crate) fn names_in(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    schema_names(conn)
}

/// One column as `pragma_table_info` describes it.
struct ColumnInfo {
    name: String,
    declared: String,
    not_null: bool,
    pk: i64,
}

fn table_columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<ColumnInfo>> {
    conn.prepare_cached(
        "SELECT name, upper(type), \"notnull\", pk FROM pragma_table_info(?1) ORDER BY cid",
    )?
    .query_map([table], |r| {
        Ok(ColumnInfo {
            name: r.get(0)?,
            declared: r.get(1)?,
            not_null: r.get(2)?,
            pk: r.get(3)?,
        })
    })?
    .collect()
}

/// Whether `table`'s primary key is its rowid: one column declared exactly `INTEGER`, in a
/// table with a rowid (a `WITHOUT ROWID` table keeps its key as an index of origin `pk`).
fn rowid_alias(conn: &Connection, table: &str, columns: &[ColumnInfo]) -> rusqlite::Result<bool> {
    let keyed: Vec<&ColumnInfo> = columns.iter().filter(|c| c.pk > 0).collect();
    if keyed.len() != 1 || keyed[0].declared != "INTEGER" {
        return Ok(false);
    }
    let key_index: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM pragma_index_list(?1) WHERE origin = 'pk')")?
        .query_row([table], |r| r.get(0))?;
    Ok(!key_index)
}

/// Whether some whole unique index of `table` (its primary key's included) holds exactly
/// `columns`.
fn unique_on(conn: &Connection, table: &str, columns: &[&str]) -> rusqlite::Result<bool> {
    let names: Vec<String> = conn
        .prepare_cached(
            "SELECT name FROM pragma_index_list(?1) WHERE \"unique\" = 1 AND partial = 0",
        )?
        .query_map([table], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut want: Vec<&str> = columns.to_vec();
    want.sort_unstable();
    for name in names {
        let mut held: Vec<Option<String>> = conn
            .prepare_cached("SELECT name FROM pragma_index_info(?1)")?
            .query_map([&name], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        held.sort();
        if held.len() == want.len()
            && held
                .iter()
                .zip(&want)
                .all(|(h, w)| h.as_deref() == Some(*w))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// What `conn`'s tables lost of the [`TableRules`] memscope's writes rely on — a table a raw
/// client rebuilt (`CREATE TABLE … AS SELECT`) keeps its columns and none of them — one line
/// a table. Tables or columns that are missing are [`crate::store::check::missing_columns`]'.
/// Found by an exploratory test: a write into a rebuilt `memories` said `inserted` and stored
/// a row whose id and value were NULL.
pub(crate) fn lost_rules(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut out = Vec::new();
    for rules in CONTRACT {
        let columns = table_columns(conn, rules.table)?;
        if columns.is_empty() {
            continue;
        }
        let mut lost = Vec::new();
        if let Some(rowid) = rules.rowid {
            let kept = columns.iter().any(|c| c.name == rowid && c.pk > 0)
                && rowid_alias(conn, rules.table, &columns)?;
            if !kept {
                lost.push(format!("{rowid} is no longer its INTEGER PRIMARY KEY"));
            }
        }
        if !rules.key.is_empty() && !unique_on(conn, rules.table, rules.key)? {
            lost.push(format!(
                "no primary key or unique index on ({})",
                rules.key.join(", ")
            ));
        }
        let nullable: Vec<&str> = rules
            .not_null
            .iter()
            .filter(|n| columns.iter().any(|c| c.name == **n && !c.not_null))
            .copied()
            .collect();
        if !nullable.is_empty() {
            lost.push(format!("{} may hold NULL", nullable.join(", ")));
        }
        if !lost.is_empty() {
            out.push(format!(
                "table {} lost its constraints: {}",
                rules.table,
                lost.join("; ")
            ));
        }
    }
    Ok(out)
}

/// memscope's indexes (a fresh database's, migrated to this release), each by name with the
/// statement that makes it when it is missing.
pub(crate) fn contract_indexes() -> &'static [(String, String)] {
    static INDEXES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    INDEXES.get_or_init(|| {
        let read = || -> Result<Vec<(String, String)>> {
            let mut conn = Connection::open_in_memory()?;
            migrate(&mut conn)?;
            let rows = conn
                .prepare(
                    "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL
                       ORDER BY name",
                )?
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows
                .into_iter()
                .map(|(name, sql)| {
                    let sql = if sql.starts_with("CREATE INDEX IF NOT EXISTS ") {
                        sql
                    } else {
                        sql.replacen("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1)
                    };
                    (name, sql)
                })
                .collect())
        };
        read().expect("the schema this build writes migrates an empty database in memory")
    })
}

/// memscope's indexes `conn`'s database does not hold (README, "check": a raw client dropped
/// them; every command still works, slower, and `init` makes them again).
pub(crate) fn missing_indexes(conn: &Connection) -> rusqlite::Result<Vec<&'static str>> {
    let mut there = conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = ?1)",
    )?;
    let mut out = Vec::new();
    for (name, _) in contract_indexes() {
        if !there.query_row([name], |r| r.get::<_, bool>(0))? {
            out.push(name.as_str());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`CONTRACT`] and [`V1_TABLES`] say what a database migrated in memory holds.
    #[test]
    fn the_written_contract_is_the_migrated_schema() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let written: Vec<&str> = CONTRACT.iter().map(|t| t.table).collect();
        assert_eq!(tables, written);
        for t in CONTRACT {
            let columns = table_columns(&conn, t.table).unwrap();
            let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names, t.columns, "{}", t.table);
            let not_null: Vec<&str> = columns
                .iter()
                .filter(|c| c.not_null)
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(not_null, t.not_null, "{}", t.table);
            let keyed: Vec<&str> = columns
                .iter()
                .filter(|c| c.pk > 0)
                .map(|c| c.name.as_str())
                .collect();
            if rowid_alias(&conn, t.table, &columns).unwrap() {
                assert_eq!(Some(keyed[0]), t.rowid, "{}", t.table);
                assert!(t.key.is_empty(), "{}", t.table);
            } else if t.table != "tombstones" {
                assert_eq!(keyed, t.key, "{}", t.table);
                assert_eq!(t.rowid, None, "{}", t.table);
            }
        }
        assert!(lost_rules(&conn).unwrap().is_empty());
        assert!(missing_indexes(&conn).unwrap().is_empty());
        let first: Vec<&str> = new_names()[0]
            .iter()
            .map(String::as_str)
            .filter(|n| written.contains(n))
            .collect();
        assert_eq!(first, V1_TABLES);
        assert_eq!(version_shown_by(&names_in(&conn).unwrap()), SCHEMA_VERSION);
    }
}
