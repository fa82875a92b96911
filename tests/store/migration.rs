//! The versioned schema contract (docs/SCHEMA.md): forward migrations keyed on `PRAGMA user_version`
//! keep the data, and a database from a newer schema is refused without touching its bytes.

use crate::support::*;
use memscope::store::schema::{
    memories_insert_guard_intact, migrate_with, Migration, MIGRATIONS, SCHEMA_VERSION,
};
use memscope::{OpenMode, Store};
use rusqlite::Connection;
use serde_json::json;

/// The version a future migration would reach.
const NEXT: i64 = SCHEMA_VERSION + 1;

/// A test migration one step past this build's schema: a new column and a new table.
const V2: Migration = "ALTER TABLE memories ADD COLUMN confidence REAL;
CREATE TABLE v2_notes (id INTEGER PRIMARY KEY, note TEXT NOT NULL);
INSERT INTO v2_notes (note) VALUES ('迁移到 v2 ✅');";

fn user_version(conn: &Connection) -> i64 {
    query_one(conn, "PRAGMA user_version")
}

/// A database migrated only to schema `version`, with `sql` run on it by a raw client.
fn database_at(version: i64, sql: &str) -> TestDb {
    let db = TestDb::new();
    let mut conn = Connection::open(&db.path).unwrap();
    let steps = &MIGRATIONS[..version as usize];
    assert_eq!(migrate_with(&mut conn, steps).unwrap(), version);
    conn.execute_batch(sql).unwrap();
    assert_eq!(user_version(&conn), version);
    db
}

/// A database at the current schema with a few memories in it, written by the real write path.
fn v1_database() -> TestDb {
    let db = TestDb::new();
    db.write_the_first_article();
    db.write("user:42", "coffee", "燕麦拿铁 ☕", "global", "thread:20");
    db
}

#[test]
fn the_current_schema_is_version_8_and_fresh_databases_are_migrated_to_it() {
    assert_eq!(SCHEMA_VERSION, 8);
    assert_eq!(MIGRATIONS.len() as i64, SCHEMA_VERSION);
    let db = TestDb::new();
    db.init();
    assert_eq!(db.sql_i64("PRAGMA user_version"), SCHEMA_VERSION);
    for table in [
        "reads",
        "spellings",
        "memories",
        "history",
        "tombstones",
        "pending",
        "predicate_aliases",
        "settings",
    ] {
        assert_eq!(
            db.sql_i64(&format!(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '{table}'"
            )),
            1,
            "the public table {table} exists"
        );
    }
    // The alias table is seeded from assets/ on init.
    assert_eq!(
        db.sql_i64("SELECT count(*) FROM predicate_aliases WHERE alias = '包管理器' AND canonical = 'package_manager'"),
        1
    );
    // Bulk loads lean on the insert guard only when it is exactly as memscope made it.
    assert!(memories_insert_guard_intact(&db.sql()).unwrap());
    // Opening again is a no-op migration.
    let before = std::fs::read(&db.path).unwrap();
    db.run(&["init"]).ok();
    assert_eq!(db.sql_i64("PRAGMA user_version"), SCHEMA_VERSION);
    assert_eq!(before.len(), std::fs::read(&db.path).unwrap().len());
}

#[test]
fn a_future_migration_moves_user_version_forward_and_keeps_the_data() {
    let db = v1_database();
    let migrations: Vec<Migration> = MIGRATIONS.iter().copied().chain([V2]).collect();

    let mut conn = Connection::open(&db.path).unwrap();
    assert_eq!(user_version(&conn), SCHEMA_VERSION);
    let reached = migrate_with(&mut conn, &migrations).expect("migrate one step forward");
    assert_eq!(reached, NEXT);
    assert_eq!(user_version(&conn), NEXT);
    // The new column exists and the old rows are all there, untouched.
    let n: i64 = query_one(
        &conn,
        "SELECT count(*) FROM memories WHERE confidence IS NULL",
    );
    assert_eq!(n, 3);
    let note: String = query_one(&conn, "SELECT note FROM v2_notes");
    assert_eq!(note, "迁移到 v2 ✅");
    let raw: String = query_one(
        &conn,
        "SELECT raw FROM memories WHERE scope = 'global' AND predicate = 'package_manager'",
    );
    assert_eq!(raw, "以后新建前端项目，默认用 pnpm。");
    let coffee: String = query_one(
        &conn,
        "SELECT value FROM memories WHERE predicate = 'coffee'",
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&coffee).unwrap(),
        json!("燕麦拿铁 ☕")
    );
    let history: i64 = query_one(&conn, "SELECT count(*) FROM history");
    assert_eq!(history, 3);
    // Migrating again is a no-op.
    assert_eq!(migrate_with(&mut conn, &migrations).unwrap(), NEXT);
    assert_eq!(user_version(&conn), NEXT);
    drop(conn);

    // This build does not know that version: the database is refused, bytes unchanged.
    let wal = db.files()[1].clone();
    assert!(
        !wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0,
        "the migrating connection closed cleanly"
    );
    let bytes = std::fs::read(&db.path).unwrap();
    for mode in [OpenMode::Create, OpenMode::Existing] {
        let err = match Store::open(&db.path, mode) {
            Ok(_) => panic!("a newer database must be refused ({mode:?})"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            err.contains("newer") && err.contains(&NEXT.to_string()),
            "the refusal names the newer version: {err}"
        );
    }
    assert_eq!(
        bytes,
        std::fs::read(&db.path).unwrap(),
        "refusing must not write"
    );
    db.run(&["list"]).fails_with(1, &["newer"]);
    db.run(&args_for(
        "write",
        "u",
        "p",
        &["--value", "v", "--scope", "global", "--source", "s"],
    ))
    .fails_with(1, &["newer"]);
    assert_eq!(bytes, std::fs::read(&db.path).unwrap());

    // And migrate_with itself refuses to go backwards.
    let mut conn = Connection::open(&db.path).unwrap();
    assert!(migrate_with(&mut conn, MIGRATIONS).is_err());
    assert_eq!(user_version(&conn), NEXT);
}

#[test]
fn a_fresh_database_migrates_through_every_step_in_order() {
    let db = TestDb::new();
    let migrations: Vec<Migration> = MIGRATIONS.iter().copied().chain([V2]).collect();
    let mut conn = Connection::open(&db.path).unwrap();
    assert_eq!(user_version(&conn), 0);
    assert_eq!(migrate_with(&mut conn, &migrations).unwrap(), NEXT);
    assert_eq!(user_version(&conn), NEXT);
    let cols: i64 = query_one(
        &conn,
        "SELECT count(*) FROM pragma_table_info('memories') WHERE name = 'confidence'",
    );
    assert_eq!(cols, 1);
}

#[test]
fn a_failing_migration_step_changes_nothing() {
    let db = v1_database();
    let rows_before = db.fingerprint();
    let broken: Migration = "ALTER TABLE memories ADD COLUMN half_done TEXT;
                             ALTER TABLE no_such_table ADD COLUMN x TEXT;";
    let migrations: Vec<Migration> = MIGRATIONS.iter().copied().chain([broken]).collect();
    let mut conn = Connection::open(&db.path).unwrap();
    let err = migrate_with(&mut conn, &migrations).expect_err("a broken step fails");
    assert!(
        format!("{err:#}").contains(&format!("version {NEXT}")),
        "{err:#}"
    );
    assert_eq!(
        user_version(&conn),
        SCHEMA_VERSION,
        "the version did not move"
    );
    let half: i64 = query_one(
        &conn,
        "SELECT count(*) FROM pragma_table_info('memories') WHERE name = 'half_done'",
    );
    assert_eq!(half, 0, "the failed step was rolled back as a whole");
    drop(conn);
    assert_eq!(rows_before, db.fingerprint());
    db.assert_check_ok();
}

/// The real v1 → v2 step (the read log): a database written at v1 opens under this build,
/// gains the `reads` table, keeps its memories and passes `check`.
#[test]
fn a_v1_database_is_migrated_on_open_and_keeps_its_memories() {
    let db = database_at(
        1,
        "INSERT INTO settings (key, value) VALUES ('causal_clock', '1'), ('retention_days', '0'), ('tombstone_safe_days', '30');
             INSERT INTO memories (subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at)
             VALUES ('user:42', 'package_manager', 'global', '\"pnpm\"', 1, 'thread:17/message:86', '以后新建前端项目，默认用 pnpm。', 1,
                     '2026-11-01T00:00:00.000Z', '2026-11-01T00:00:00.000Z');
             INSERT INTO history (event, subject, predicate, scope, version, value, raw, source, causal_seq, at)
             VALUES ('set', 'user:42', 'package_manager', 'global', 1, '\"pnpm\"', '以后新建前端项目，默认用 pnpm。',
                     'thread:17/message:86', 1, '2026-11-01T00:00:00.000Z');",
    );
    let store = Store::open(&db.path, OpenMode::Existing).expect("a v1 database opens");
    assert_eq!(user_version(store.connection()), SCHEMA_VERSION);
    let reads = db.sql_i64("SELECT count(*) FROM sqlite_master WHERE name = 'reads'");
    assert_eq!(reads, 1, "v2 adds the read log");
    let r = store
        .resolve("user:42", "package_manager", Some("web-app"), None)
        .unwrap();
    assert_eq!(r.value, Some(json!("pnpm")));
    assert!(store.check().unwrap().ok);
}

/// Every row of the tables v3 rebuilds, as text, in id order.
fn rebuilt_rows(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for sql in [
        "SELECT id, subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at,
                confirmed_at, confirm_count, confirmed_source, confirmed_seq FROM memories ORDER BY id",
        "SELECT id, event, subject, predicate, scope, version, value, raw, source, causal_seq, at, detail, clock
         FROM history ORDER BY id",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                (0..n)
                    .map(|i| r.get::<_, rusqlite::types::Value>(i).map(|v| format!("{v:?}")))
                    .collect::<Result<Vec<_>, _>>()
                    .map(|cols| cols.join("|"))
            })
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

/// The real v2 → v3 step gives `memories` and `history` function-free guards in place. A v2
/// database — with a confirmation, a superseded version, a deletion, and one guard a raw-SQL
/// client dropped — keeps every row byte for byte, gets all its guards back, and passes `check`.
#[test]
fn a_v2_database_is_migrated_to_v3_on_open_keeping_every_row_and_restoring_dropped_guards() {
    let db = database_at(
        2,
        r#"INSERT INTO settings (key, value) VALUES ('causal_clock', '5'), ('retention_days', '0'), ('tombstone_safe_days', '30');
             INSERT INTO memories (id, subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at,
                                   confirmed_at, confirm_count, confirmed_source, confirmed_seq)
             VALUES (7, 'user:42', 'package_manager', 'global', '"pnpm"', 2, 'thread:30', '以后都用 pnpm 🚀', 3,
                     '2026-11-01T00:00:00.000Z', '2026-11-02T00:00:00.000Z', '2026-11-03T00:00:00.000Z', 1, 'thread:31', 4),
                    (9, 'user:42', 'package_manager', 'repo:legacy-dashboard', '{"tool":"npm","ci":true}', 1, 'thread:23/message:14',
                     NULL, 1, '2026-11-01T00:00:00.000Z', '2026-11-01T00:00:00.000Z', NULL, 0, NULL, NULL);
             INSERT INTO history (id, event, subject, predicate, scope, version, value, raw, source, causal_seq, at, detail, clock) VALUES
               (1, 'set', 'user:42', 'package_manager', 'repo:legacy-dashboard', 1, '{"tool":"npm","ci":true}', NULL, 'thread:23/message:14', 1, '2026-11-01T00:00:00.000Z', NULL, 1),
               (2, 'set', 'user:42', 'package_manager', 'global', 1, '"npm"', '默认 npm', 'thread:17', 2, '2026-11-01T00:00:00.000Z', NULL, 2),
               (3, 'set', 'user:42', 'package_manager', 'global', 2, '"pnpm"', '以后都用 pnpm 🚀', 'thread:30', 3, '2026-11-02T00:00:00.000Z', NULL, 3),
               (4, 'confirmed', 'user:42', 'package_manager', 'global', 2, '"PNPM"', NULL, 'thread:31', 4, '2026-11-03T00:00:00.000Z', NULL, 4),
               (5, 'deleted', 'user:42', 'coffee', 'global', 2, NULL, NULL, NULL, NULL, '2026-11-04T00:00:00.000Z', '{"reason":"user asked","purged_versions":1}', 5);
             INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at)
             VALUES ('user:42', 'coffee', 'global', 2, 'user asked', '2026-11-04T00:00:00.000Z');
             DROP TRIGGER memories_no_resurrection_insert;"#,
    );
    let before = rebuilt_rows(&Connection::open(&db.path).unwrap());
    assert_eq!(before.len(), 7);

    let mut store = Store::open(&db.path, OpenMode::Existing).expect("a v2 database opens");
    let conn = store.connection();
    assert_eq!(user_version(conn), SCHEMA_VERSION);
    assert_eq!(
        rebuilt_rows(conn),
        before,
        "every row survives the rebuild unchanged"
    );
    let triggers: i64 = query_one(
        conn,
        "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'",
    );
    assert_eq!(
        triggers,
        memscope::store::schema::GUARD_TRIGGERS.len() as i64,
        "every guard exists again, the dropped one included (and v7's)"
    );
    assert!(
        memories_insert_guard_intact(conn).unwrap(),
        "the re-created insert guard is memscope's own, for bulk loads to lean on"
    );
    let definitions: String = query_one(
        conn,
        "SELECT group_concat(sql, ' ') FROM sqlite_master WHERE name IN ('memories', 'history')",
    );
    for gone in ["json_valid", "length(", "GLOB"] {
        assert!(
            !definitions.contains(gone),
            "{gone} is out of the CHECKs: {definitions}"
        );
    }
    let report = store.check().unwrap();
    assert!(report.ok, "{:?}", report.violations);

    // The restored guard works again, for memscope and for a raw client.
    let out = store
        .write(&req(
            "user:42",
            "coffee",
            json!("美式"),
            "global",
            "thread:40",
        ))
        .unwrap();
    assert_eq!(out.outcome.as_str(), "rejected");
    let raw = Connection::open(&db.path).unwrap();
    let err = raw
        .execute(
            "INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
             VALUES ('user:42', 'coffee', 'global', '\"美式\"', 3, 'raw', 9, 'x', 'x')",
            [],
        )
        .unwrap_err();
    assert!(err.to_string().contains("tombstoned"), "{err}");
    // And the new writes land on the rebuilt tables.
    let out = store
        .write(&req(
            "user:42",
            "package_manager",
            json!("yarn"),
            "global",
            "thread:41",
        ))
        .unwrap();
    assert_eq!(out.outcome.as_str(), "superseded");
    assert_eq!(out.version, Some(3));
    assert!(store.check().unwrap().ok);
}

/// v3's guards hold without SQL functions: the same refusals as before for a raw client, and
/// text that is not JSON — no longer refused by a CHECK — is found by `check`.
#[test]
fn v3_guards_refuse_bad_scopes_and_check_finds_values_that_are_not_json() {
    let db = TestDb::new();
    db.write("user:42", "coffee", "燕麦拿铁 ☕", "global", "thread:20");
    let raw = Connection::open(&db.path).unwrap();
    let insert = |scope: &str, value: &str| {
        raw.execute(
            "INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
             VALUES ('user:7', 'editor', ?1, ?2, 1, 'raw', 1, 'x', 'x')",
            [scope, value],
        )
    };
    for bad in ["repo:", "task:", "galaxy:x", "Global", "repo", "repo;x", ""] {
        let err = insert(bad, "\"vim\"").expect_err(bad);
        assert!(err.to_string().contains("CHECK"), "{bad:?}: {err}");
    }
    for (subject, predicate, source) in [("", "p", "s"), ("u", "", "s"), ("u", "p", "")] {
        let err = raw
            .execute(
                "INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
                 VALUES (?1, ?2, 'global', '1', 1, ?3, 1, 'x', 'x')",
                [subject, predicate, source],
            )
            .unwrap_err();
        assert!(err.to_string().contains("CHECK"), "{err}");
    }
    insert("repo:编辑器-🚀", "\"vim\"").expect("a scope with any id is fine");
    insert("task:t1", "vim, not JSON").expect("no CHECK refuses non-JSON text any more");
    // SQLite's json_valid takes these; memscope's readers (serde) do not, so check must not.
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for (scope, value) in [
        ("task:t2", "1e400"),
        ("task:t3", r#""\ud800""#),
        ("task:t4", deep.as_str()),
    ] {
        insert(scope, value).expect("stored raw");
    }
    let (code, report) = db.check();
    assert_eq!(code, 1);
    let text = report.to_string();
    for scope in ["task:t1", "task:t2", "task:t3", "task:t4"] {
        assert!(
            text.contains(&format!(
                "{scope}: current v1 holds text that is not readable JSON"
            )),
            "{scope}: {text}"
        );
    }
}

/// A v2 database as a raw-SQL client may leave it: v3 edits the table definitions in place, so
/// the client's view and trigger that name the tables, its extra column and index, and a row
/// v2's GLOB CHECK let in but v3's text comparison would not (a blob scope) all survive the
/// migration, and memscope opens the database.
#[test]
fn the_v3_step_keeps_what_a_raw_client_added_to_a_v2_database() {
    let db = database_at(
        2,
        r#"INSERT INTO settings (key, value) VALUES ('causal_clock', '1'), ('retention_days', '0'), ('tombstone_safe_days', '30');
             INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
               VALUES ('user:42', 'coffee', 'global', '"燕麦拿铁 ☕"', 1, 'thread:1', 1, '2026-11-01T00:00:00.000Z', '2026-11-01T00:00:00.000Z'),
                      ('user:7', 'editor', CAST('repo:x' AS BLOB), '"vim"', 1, 'raw', 1, 'x', 'x');
             INSERT INTO history (event, subject, predicate, scope, version, value, source, causal_seq, at, clock)
               VALUES ('set', 'user:42', 'coffee', 'global', 1, '"燕麦拿铁 ☕"', 'thread:1', 1, '2026-11-01T00:00:00.000Z', 1);
             CREATE VIEW agent_prefs AS SELECT subject, predicate, value FROM memories WHERE scope = 'global';
             CREATE TABLE audit (n INTEGER);
             CREATE TRIGGER audit_reads AFTER INSERT ON reads BEGIN INSERT INTO audit SELECT count(*) FROM history; END;
             ALTER TABLE memories ADD COLUMN agent_note TEXT;
             UPDATE memories SET agent_note = '别删 🙏' WHERE subject = 'user:42';
             CREATE INDEX agent_by_note ON memories (agent_note);"#,
    );
    let store = Store::open(&db.path, OpenMode::Existing).expect("the v2 database opens");
    let conn = store.connection();
    assert_eq!(user_version(conn), SCHEMA_VERSION);
    let note: String = query_one(
        conn,
        "SELECT agent_note FROM memories WHERE subject = 'user:42'",
    );
    assert_eq!(note, "别删 🙏", "the client's column keeps its data");
    let value: String = query_one(conn, "SELECT value FROM agent_prefs");
    assert_eq!(
        value, "\"燕麦拿铁 ☕\"",
        "the client's view still reads the table"
    );
    for name in ["agent_prefs", "audit_reads", "agent_by_note"] {
        let n: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1, "{name} survives");
    }
    let blob: i64 = query_one(
        conn,
        "SELECT count(*) FROM memories WHERE typeof(scope) = 'blob'",
    );
    assert_eq!(blob, 1, "rows are not re-validated");
    let r = store
        .resolve("user:42", "coffee", Some("web-app"), None)
        .unwrap();
    assert_eq!(r.value, Some(json!("燕麦拿铁 ☕")));
}

/// v5 writes the pending queue's `status IN (…)` CHECK as comparisons: a v4 database's open
/// item survives, the same texts are refused and accepted as before, and an insert no longer
/// builds a temporary table for the CHECK.
#[test]
fn the_v5_step_keeps_the_same_checks_without_a_temporary_table_per_row() {
    let db = database_at(
        4,
        r#"INSERT INTO pending (subject, predicate, value, raw, source, causal_seq, candidates, status, created_at)
             VALUES ('user:42', 'package_manager', '"npm"', '这个仓库继续用 npm ci 📦', 'thread:1', 1, '["global","repo:legacy-dashboard"]', 'open', 'x');"#,
    );
    let plan = |conn: &Connection, sql: &str| -> Vec<String> {
        let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let n = stmt.parameter_count();
        stmt.query_map(
            rusqlite::params_from_iter(vec![rusqlite::types::Null; n]),
            |r| r.get::<_, String>(1),
        )
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    let pending_insert = "INSERT INTO pending (subject, predicate, value, source, causal_seq, candidates, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    {
        let conn = Connection::open(&db.path).unwrap();
        let v4 = plan(&conn, pending_insert);
        assert!(v4.iter().any(|op| op == "OpenEphemeral"), "v4 builds one");
    }
    let store = Store::open(&db.path, OpenMode::Existing).expect("the v4 database opens");
    let conn = store.connection();
    assert_eq!(user_version(conn), SCHEMA_VERSION);
    let v5 = plan(conn, pending_insert);
    assert!(!v5.iter().any(|op| op == "OpenEphemeral"), "v5 does not");
    assert_eq!(query_one::<i64>(conn, "SELECT count(*) FROM pending WHERE status = 'open' AND raw = '这个仓库继续用 npm ci 📦'"), 1);
    let put_status = |status: &str| {
        conn.execute(
            r#"INSERT INTO pending (subject, predicate, value, source, causal_seq, candidates, status, created_at)
               VALUES ('user:7', 'editor', '"vim"', 'raw', 2, '["global","repo:x"]', ?1, 'x')"#,
            [status],
        )
    };
    for good in ["open", "resolved", "rejected"] {
        put_status(good).expect(good);
    }
    for bad in ["Open", "closed", "", "open "] {
        let err = put_status(bad).expect_err(bad);
        assert!(err.to_string().contains("CHECK"), "{bad:?}: {err}");
    }
}
