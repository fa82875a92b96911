//! Timelines no writer could have made (README, "check"): a foreign client — Python's `sqlite3`
//! on SQLite, `psql` on PostgreSQL, with the guards out of its way — dates events out of order,
//! resolves a pending item before it was created, reopens a resolved one, logs a read of a
//! version never held or before it was written, or makes a counter negative; `check` names the
//! invariant on both backends. And `import` refuses a row dated after its export.

use crate::support::*;
use serde_json::Value;

/// Runs `sql` as a foreign client: on SQLite from Python after dropping every trigger, on
/// PostgreSQL from `psql` with the guarded tables' triggers disabled for it.
fn foreign(db: &TestDb, sql: &str) {
    if db.path_str().starts_with("postgres") {
        let tables = ["memories", "history", "tombstones", "pending", "reads"];
        let off: String = tables
            .iter()
            .map(|t| format!("ALTER TABLE {t} DISABLE TRIGGER USER;"))
            .collect();
        let on: String = tables
            .iter()
            .map(|t| format!("ALTER TABLE {t} ENABLE TRIGGER USER;"))
            .collect();
        super::postgres_check::psql_run(db.path_str(), &format!("{off} {sql} {on}"));
    } else {
        super::foreign_client::damage(db, sql);
    }
}

/// pm@global pnpm→npm (v1, v2), pm@repo:legacy-dashboard npm then deleted, a pending item
/// resolved into repo:web-app, and a logged read of the global record — in Chinese and emoji.
fn timeline(db: &TestDb) {
    db.write_with(
        ("user:42", "package_manager"),
        "pnpm 📦",
        "global",
        "thread:17",
        &["--raw", "以后新建前端项目，默认用 pnpm。"],
    );
    db.write("user:42", "package_manager", "npm", "global", "thread:30");
    db.write(
        "user:42",
        "package_manager",
        "npm",
        "repo:legacy-dashboard",
        "thread:23",
    );
    db.delete("user:42", "package_manager", "repo:legacy-dashboard");
    let queued = db.write_ambiguous(
        "user:42",
        "formatter",
        "biome 🧹",
        "global,repo:web-app",
        "thread:31",
        "这个仓库用 biome",
    );
    let id = queued["pending_id"].to_string();
    db.resolve_pending(&id, "repo:web-app").ok();
    db.json(&args_for(
        "resolve",
        "user:42",
        "package_manager",
        &["--log", "--agent", "claude-code 🤖", "--json"],
    ));
    db.assert_check_ok();
}

/// `check` after the foreign client ran `sql` on [`timeline`]: exit 1, and a violation of
/// `invariant` whose detail holds `words`.
#[track_caller]
fn found(db: TestDb, sql: &str, invariant: u64, words: &str) {
    timeline(&db);
    foreign(&db, sql);
    let (code, report) = db.check();
    assert_eq!(code, 1, "{sql}: {report:#}");
    let violations = report["violations"].as_array().expect("violations");
    assert!(
        violations.iter().any(|v| v["invariant"] == invariant
            && v["detail"].as_str().is_some_and(|d| d.contains(words))),
        "{sql}: wanted invariant {invariant} saying {words:?}: {violations:#?}"
    );
    let text = db.run(&["check"]);
    assert_eq!(text.code, 1);
    assert!(
        text.stdout.contains(&format!("invariant {invariant}")),
        "{}",
        text.stdout
    );
}

const LONG_AGO: &str = "2000-01-01T00:00:00.000Z";

/// Each damage: its SQL (the same text on both backends), the invariant and the words.
fn damages() -> Vec<(String, u64, &'static str)> {
    let pm = "subject = 'user:42' AND predicate = 'package_manager'";
    vec![
        (
            format!("UPDATE history SET at = '{LONG_AGO}' WHERE {pm} AND scope = 'global' AND event = 'set' AND version = 2;"),
            2,
            "its set event of v2 is dated 2000-01-01T00:00:00.000Z, before its set event of v1",
        ),
        (
            format!("UPDATE history SET at = '{LONG_AGO}' WHERE {pm} AND event = 'deleted';"),
            2,
            "before the live interval it ends",
        ),
        (
            format!("UPDATE pending SET resolved_at = '{LONG_AGO}' WHERE predicate = 'formatter';"),
            2,
            "is resolved at 2000-01-01T00:00:00.000Z, before it was created",
        ),
        (
            "UPDATE pending SET status = 'open', resolved_scope = NULL, resolution = NULL, resolved_at = NULL WHERE predicate = 'formatter';".into(),
            4,
            "is open, but history event #",
        ),
        (
            "UPDATE reads SET version = 7;".into(),
            4,
            "names v7, which the identity never held",
        ),
        (
            format!("UPDATE reads SET at = '{LONG_AGO}';"),
            4,
            "is dated 2000-01-01T00:00:00.000Z, before v2 was written",
        ),
        (
            "UPDATE metrics SET value = -3 WHERE name = 'stale_writes'; INSERT INTO metrics (name, value) SELECT 'stale_writes', -3 WHERE NOT EXISTS (SELECT 1 FROM metrics WHERE name = 'stale_writes');".into(),
            6,
            "the counter stale_writes is -3",
        ),
    ]
}

#[test]
fn check_finds_each_impossible_timeline_on_sqlite() {
    for (sql, invariant, words) in damages() {
        found(TestDb::new(), &sql, invariant, words);
    }
}

#[test]
fn check_finds_each_impossible_timeline_on_postgres() {
    for (sql, invariant, words) in damages() {
        on_postgres(|db| found(db, &sql, invariant, words));
    }
}

/// Events of one millisecond are two writes in it, not a clock set back.
#[test]
fn events_of_one_millisecond_are_in_time() {
    let db = TestDb::new();
    timeline(&db);
    foreign(
        &db,
        "UPDATE history SET at = '2026-01-01T00:00:00.000Z' WHERE event <> 'deleted'; UPDATE pending SET created_at = '2026-01-01T00:00:00.000Z', resolved_at = '2026-01-01T00:00:00.000Z'; UPDATE reads SET at = '2026-01-01T00:00:00.000Z';",
    );
    let (code, report) = db.check();
    let timed: Vec<&Value> = report["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter(|v| {
            v["detail"]
                .as_str()
                .is_some_and(|d| d.contains("dated") || d.contains("resolved at"))
        })
        .collect();
    assert!(timed.is_empty(), "{code}: {timed:#?}");
}

/// The dump of [`timeline`], its lines.
fn exported(db: &TestDb) -> Vec<String> {
    let out = db.run(&["export"]).ok();
    out.stdout.lines().map(str::to_string).collect()
}

/// `import` refuses a dump whose `table` row carries `column` dated after the export,
/// naming its line, and writes nothing: the untouched dump then imports into the same
/// database.
fn refused_after_export(target: &TestDb, table: &str, column: &str) {
    let source = TestDb::new();
    timeline(&source);
    let lines = exported(&source);
    let mut edited = lines.clone();
    let at = edited
        .iter()
        .position(|l| {
            let row: Value = serde_json::from_str(l).unwrap();
            row["table"] == table && row[column].is_string()
        })
        .unwrap_or_else(|| panic!("a {table} row with {column}"));
    let mut row: Value = serde_json::from_str(&edited[at]).unwrap();
    row[column] = "2099-01-01T00:00:00.000Z".into();
    edited[at] = row.to_string();
    let file = target.sibling(&format!("edited-{table}-{column}.jsonl"));
    std::fs::write(&file, edited.join("\n") + "\n").unwrap();
    let r = target.run(&["import", file.to_str().unwrap()]);
    r.fails_with(
        1,
        &[
            &format!("line {} of the import: {table}.{column}", at + 1),
            "after the export was taken",
            "nothing was imported",
        ],
    );
    let whole = target.sibling(&format!("whole-{table}-{column}.jsonl"));
    std::fs::write(&whole, lines.join("\n") + "\n").unwrap();
    target.run(&["import", whole.to_str().unwrap()]).ok();
    target.assert_check_ok();
}

const DATED: [(&str, &str); 5] = [
    ("history", "at"),
    ("tombstones", "deleted_at"),
    ("pending", "created_at"),
    ("pending", "resolved_at"),
    ("reads", "at"),
];

#[test]
fn import_refuses_rows_dated_after_the_export_on_sqlite() {
    for (table, column) in DATED {
        refused_after_export(&TestDb::new(), table, column);
    }
}

#[test]
fn import_refuses_rows_dated_after_the_export_on_postgres() {
    for (table, column) in DATED {
        on_postgres(|db| refused_after_export(&db, table, column));
    }
}

/// `check` tells of rows dated after now — which an export taken now carries, and `import`
/// refuses — before the export is made: a health finding naming the latest, with `ok` and the
/// exit code kept, since nothing is inconsistent and time mends it (README, "check"; found by
/// review: `check` said ok, and the export would not import).
fn dated_ahead_is_told(db: TestDb) {
    timeline(&db);
    let reads = db.run(&["reads", "--json"]).json();
    let reads = reads.as_array().map_or(0, Vec::len);
    foreign(
        &db,
        "UPDATE history SET at = '2099-01-01T00:00:00.000Z' WHERE id = (SELECT max(id) FROM history);
         UPDATE tombstones SET deleted_at = '2099-01-01T00:00:00.000Z';
         UPDATE pending SET created_at = '2099-01-01T00:00:00.000Z', resolved_at = '2099-01-02T00:00:00.000Z';
         UPDATE reads SET at = '2099-01-01T00:00:00.000Z';",
    );
    let (code, report) = db.check();
    assert_eq!((code, &report["ok"]), (0, &Value::Bool(true)), "{report:#}");
    let ahead: Vec<&Value> = report["health"]
        .as_array()
        .expect("health")
        .iter()
        .filter(|h| h["kind"] == "dated_ahead")
        .collect();
    assert_eq!(ahead.len(), 1, "{report:#}");
    let ahead = ahead[0];
    assert_eq!(ahead["rows"], 3 + reads, "{ahead:#}");
    assert_eq!(
        (&ahead["table"], &ahead["column"], &ahead["at"]),
        (
            &Value::from("pending"),
            &Value::from("resolved_at"),
            &Value::from("2099-01-02T00:00:00.000Z")
        ),
        "{ahead:#}"
    );
    let text = db.run(&["check"]);
    assert_eq!(text.code, 0, "{text:?}");
    let said = text
        .stdout
        .lines()
        .find(|l| l.contains("dated after now"))
        .unwrap_or_else(|| panic!("{}", text.stdout));
    for words in [
        "HEALTH: ",
        &format!("{} rows are dated after now", 3 + reads),
        "the latest, pending row #",
        "at 2099-01-02T00:00:00.000Z (pending.resolved_at)",
        "will not import until then",
        "a writer's clock ran ahead",
    ] {
        assert!(said.contains(words), "{words:?} in {said}");
    }
    // What it foretold: the export is refused.
    let dump = db.sibling("dated-ahead.jsonl");
    db.run(&["export", "--out", dump.to_str().unwrap()]).ok();
    TestDb::new()
        .run(&["import", dump.to_str().unwrap()])
        .fails_with(1, &["after the export was taken", "nothing was imported"]);
}

#[test]
fn check_tells_rows_dated_after_now_on_sqlite() {
    dated_ahead_is_told(TestDb::new());
}

#[test]
fn check_tells_rows_dated_after_now_on_postgres() {
    on_postgres(dated_ahead_is_told);
}
