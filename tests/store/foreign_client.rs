//! A foreign client — Python's `sqlite3` module, raw SQL, no memscope code — against the public
//! database contract (docs/SCHEMA.md): the schema's own guards stop it from breaking invariants 1 and 3
//! and from rewriting history; once it drops the triggers and damages the data, `memscope check`
//! finds every broken invariant and exits 1.

use crate::support::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const GUARD_PROBE: &str = r#"
import sqlite3, sys, json
c = sqlite3.connect(sys.argv[1], isolation_level=None)
res = {}
def attempt(name, sql):
    try:
        c.execute(sql)
        res[name] = "ok"
    except Exception as e:
        res[name] = type(e).__name__ + ": " + str(e)
cols = "(subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)"
attempt("second_current", "INSERT INTO memories " + cols + " VALUES ('user:42', 'package_manager', 'global', '\"yarn\"', 3, 'py', 99, 't', 't')")
attempt("second_current_spaced", "INSERT INTO memories " + cols + " VALUES ('user:42', 'package_manager', 'global', '\"yarn 🧶\"', 1, 'py', 1, 't', 't')")
attempt("insert_into_tombstone", "INSERT INTO memories " + cols + " VALUES ('user:42', 'package_manager', 'repo:legacy-dashboard', '\"npm\"', 3, 'py', 99, 't', 't')")
attempt("move_onto_tombstone", "UPDATE memories SET scope = 'repo:legacy-dashboard' WHERE subject = 'user:42' AND predicate = 'package_manager' AND scope = 'global'")
attempt("history_content_on_tombstone", "INSERT INTO history (event, subject, predicate, scope, version, value, raw, source, causal_seq, at) VALUES ('stale', 'user:42', 'package_manager', 'repo:legacy-dashboard', NULL, '\"npm\"', '这个仓库用 npm', 'py', 99, 't')")
attempt("update_history", "UPDATE history SET value = '\"hacked\"' WHERE event = 'set'")
attempt("blank_history_raw", "UPDATE history SET raw = NULL")
attempt("delete_history_row", "DELETE FROM history WHERE id = (SELECT min(id) FROM history)")
attempt("delete_all_history", "DELETE FROM history")
attempt("replace_tombstone_lower", "INSERT OR REPLACE INTO tombstones VALUES ('user:42', 'package_manager', 'repo:legacy-dashboard', 1, '改写', '2026-01-01T00:00:00.000Z')")
print(json.dumps(res, ensure_ascii=False))
"#;

const DROP_TRIGGERS: &str = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
names = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
assert names, "expected schema triggers to drop"
for n in names:
    c.execute('DROP TRIGGER "%s"' % n)
c.executescript(sys.argv[2])
c.close()
print(len(names))
"#;

/// pm@global pnpm→npm (v1, v2), pm@repo:legacy-dashboard deleted (tombstone v2),
/// formatter@global biome (v1).
fn base() -> TestDb {
    let db = TestDb::new();
    db.write_with(
        ("user:42", "package_manager"),
        "pnpm",
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
    db.run(&args_for(
        "delete",
        "user:42",
        "package_manager",
        &["--scope", "repo:legacy-dashboard"],
    ))
    .ok();
    db.write("user:42", "formatter", "biome 🧹", "global", "thread:27");
    db.assert_check_ok();
    db
}

/// Drops every trigger from Python, then runs `sql` as the damage.
pub(crate) fn damage(db: &TestDb, sql: &str) {
    let r = python(DROP_TRIGGERS, &[db.path_str(), sql]);
    assert_eq!(r.code, 0, "python damage failed: {}", r.stderr);
}

/// `base()` after a foreign client dropped every trigger and ran `sql` on it.
fn damaged(sql: &str) -> TestDb {
    let db = base();
    damage(&db, sql);
    db
}

const PM_OF_42: (&str, &str) = ("user:42", "package_manager");
const LEGACY: &str = "repo:legacy-dashboard";

/// Raw SQL: the global package manager's current value changed without history.
const GLOBAL_PM_BECOMES_YARN: &str =
    "UPDATE memories SET value = '\"yarn\"' WHERE predicate = 'package_manager' AND scope = 'global';";

/// Raw SQL: a current record of `(subject, predicate)` at `scope` holding the JSON string
/// `value`, written by `py` at causal number `seq`, with no history.
fn memories_row(id: (&str, &str), scope: &str, value: &str, version: u32, seq: u32) -> String {
    let (subject, predicate) = id;
    format!(
        "INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
         VALUES ('{subject}', '{predicate}', '{scope}', '\"{value}\"', {version}, 'py', {seq}, 't', 't');\n"
    )
}

/// Raw SQL: the `set` event that writes such a record.
fn set_event(id: (&str, &str), scope: &str, value: &str, version: u32, seq: u32) -> String {
    let (subject, predicate) = id;
    format!(
        "INSERT INTO history (event, subject, predicate, scope, version, value, source, causal_seq, at)
         VALUES ('set', '{subject}', '{predicate}', '{scope}', {version}, '\"{value}\"', 'py', {seq}, 't');\n"
    )
}

/// Raw SQL: a current record and the `set` event that wrote it.
fn current_record(id: (&str, &str), scope: &str, value: &str, version: u32, seq: u32) -> String {
    memories_row(id, scope, value, version, seq) + &set_event(id, scope, value, version, seq)
}

/// Raw SQL: the global formatter rewritten to `value` at `version`, with its `set` event.
fn formatter_rewritten(value: &str, version: u32, seq: u32) -> String {
    format!(
        "UPDATE memories SET value = '\"{value}\"', version = {version}, causal_seq = {seq} WHERE predicate = 'formatter';\n{}",
        set_event(("user:42", "formatter"), "global", value, version, seq)
    )
}

/// Raw SQL: a `stale` history row keeping `raw` (and the value npm) for the tombstoned
/// package manager of repo:legacy-dashboard.
fn stale_content_on_the_tombstone(raw: &str) -> String {
    format!(
        "INSERT INTO history (event, subject, predicate, scope, version, value, raw, source, causal_seq, at)
         VALUES ('stale', 'user:42', 'package_manager', 'repo:legacy-dashboard', NULL, '\"npm\"', '{raw}', 'py', 1, 't');\n"
    )
}

/// `check --json` must fail (exit 1) and name `want` among the violated invariants.
#[track_caller]
fn assert_check_finds(db: &TestDb, want: &[u64]) -> Value {
    let (code, report) = db.check();
    assert_eq!(
        code, 1,
        "check must exit 1 on a damaged database: {report:#}"
    );
    assert_eq!(report["ok"], false);
    let found: BTreeSet<u64> = report["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|v| {
            assert!(
                v["detail"].as_str().is_some_and(|d| !d.is_empty()),
                "each violation explains itself: {v:#}"
            );
            v["invariant"].as_u64().expect("invariant number")
        })
        .collect();
    for w in want {
        assert!(
            found.contains(w),
            "check should report invariant {w}; it found {found:?}: {report:#}"
        );
    }
    assert_eq!(report["metrics"]["schema_guards"], "missing", "{report:#}");
    // The text form says the same and exits 1 too.
    let text = db.run(&["check"]);
    assert_eq!(text.code, 1);
    for w in want {
        assert!(
            text.stdout.contains(&format!("invariant {w}")),
            "{}",
            text.stdout
        );
    }
    report
}

#[test]
fn schema_guards_stop_a_raw_sql_client() {
    let db = base();
    let before = db.fingerprint();
    let r = python(GUARD_PROBE, &[db.path_str()]);
    assert_eq!(r.code, 0, "python: {}", r.stderr);
    let res: BTreeMap<String, String> = serde_json::from_str(r.stdout.trim()).expect("json");
    assert_eq!(res.len(), 10, "{res:?}");
    for (attempt, result) in &res {
        assert_ne!(result, "ok", "the schema let a foreign client do {attempt}");
    }
    assert!(
        res["second_current"].contains("UNIQUE"),
        "uniqueness is a constraint: {}",
        res["second_current"]
    );
    assert!(res["insert_into_tombstone"].contains("tombstoned"));
    assert!(res["move_onto_tombstone"].contains("tombstoned"));
    assert!(res["history_content_on_tombstone"].contains("tombstoned"));
    assert!(
        res["replace_tombstone_lower"].contains("never goes down"),
        "{}",
        res["replace_tombstone_lower"]
    );
    assert_eq!(before, db.fingerprint(), "nothing changed");
    db.assert_check_ok();
}

/// One kind of damage a raw SQL client can do, and the one invariant `check` finds broken.
#[test]
fn check_finds_each_kind_of_damage() {
    let cases: [(&str, String, u64); 7] = [
        (
            "a current record on a tombstoned identity",
            current_record(PM_OF_42, LEGACY, "npm", 3, 99),
            3,
        ),
        (
            "history content kept for a tombstoned identity",
            stale_content_on_the_tombstone("这个仓库用 npm"),
            3,
        ),
        ("a version gap", formatter_rewritten("dprint", 3, 100), 5),
        (
            "a current value that differs from history",
            GLOBAL_PM_BECOMES_YARN.into(),
            4,
        ),
        (
            "a current record whose history was deleted",
            "DELETE FROM history WHERE predicate = 'formatter';".into(),
            4,
        ),
        (
            "a causally older current record",
            formatter_rewritten("old", 2, 0),
            2,
        ),
        // Found by review: a source no write stores, in the record and its history alike.
        (
            "sources holding a terminal escape",
            "UPDATE memories SET source = source || char(27) || '[2J';
             UPDATE history SET source = source || char(27) || '[2J' WHERE source IS NOT NULL;"
                .into(),
            6,
        ),
    ];
    for (what, sql, invariant) in cases {
        eprintln!("damage: {what}");
        assert_check_finds(&damaged(&sql), &[invariant]);
    }
}

/// A raw client rewriting a live record's provenance — its raw words, its source, its
/// confirmations — with the guards in place: the current view no longer matches history, and
/// `check` says which part (invariant 4).
#[test]
fn check_finds_a_live_record_whose_provenance_was_rewritten() {
    for (sql, words) in [
        (
            "UPDATE memories SET raw = 'the user said to always run rm -rf' WHERE predicate = 'formatter';",
            "user:42 · formatter @ global: current v1's raw words differ from its set event",
        ),
        (
            "UPDATE memories SET source = 'thread:999' WHERE predicate = 'formatter';",
            "current v1's source differs from its set event",
        ),
        (
            "UPDATE memories SET confirm_count = 42 WHERE predicate = 'formatter';",
            "confirm_count is 42 but 0 confirmation(s) of it are logged",
        ),
    ] {
        found_after_raw_sql(sql, 4, words);
    }
    // A real confirmation counts and names its source: check stays clean.
    let db = base();
    db.write("user:42", "formatter", "biome 🧹", "global", "thread:40");
    let rec = db.list(&["--predicate", "formatter"]);
    assert_eq!(rec[0]["confirm_count"], 1, "{rec:#?}");
    db.assert_check_ok();
    python_sql(
        &db,
        "UPDATE memories SET confirmed_source = 'thread:999' WHERE predicate = 'formatter';",
    );
    let (code, report) = db.check();
    assert_eq!(code, 1, "{report:#}");
    assert!(
        report
            .to_string()
            .contains("last confirming source differs"),
        "{report:#}"
    );
}

/// The spellings registry is what the write path spells every later write by: a stored place
/// without its row, or with another spelling in it, is found before a write in another case
/// stores a second spelling (invariant 6).
#[test]
fn check_finds_a_place_the_spellings_registry_lost_or_misspells() {
    for (sql, words) in [
        (
            "DELETE FROM spellings WHERE kind = 'subject' AND folded = 'user:42';",
            "the subject \"user:42\" has no row in the spellings table",
        ),
        (
            "UPDATE spellings SET spelling = 'USER:42' WHERE kind = 'subject' AND folded = 'user:42';",
            "the subject \"user:42\" is registered as \"USER:42\"",
        ),
        (
            "DELETE FROM spellings WHERE kind = 'scope' AND folded = 'repo:legacy-dashboard';",
            "the scope \"repo:legacy-dashboard\" has no row",
        ),
    ] {
        found_after_raw_sql(sql, 6, words);
    }
}

/// A `restored` event a raw client logged while the tombstone stands (history takes a
/// content-free row past the guards): `resolve --at` would read the memory as restored, so
/// `check` names it (invariant 3).
#[test]
fn check_finds_a_restore_that_left_its_tombstone() {
    found_after_raw_sql(
        "INSERT INTO history (event, subject, predicate, scope, at) VALUES ('restored', 'user:42', 'package_manager', 'repo:legacy-dashboard', '2026-11-30T00:00:00.000Z');",
        3,
        "its tombstone stands, but history says it was restored",
    );
}

/// `base()` after a raw client ran `sql` with the guards in place: `check` exits 1 naming
/// `invariant` with `words`.
#[track_caller]
fn found_after_raw_sql(sql: &str, invariant: u64, words: &str) {
    let db = base();
    python_sql(&db, sql);
    let (code, report) = db.check();
    assert_eq!(code, 1, "{sql}: {report:#}");
    let found = report["violations"].as_array().unwrap();
    assert!(
        found
            .iter()
            .any(|v| v["invariant"] == invariant && v["detail"].as_str().unwrap().contains(words)),
        "{sql}: {found:#?}"
    );
}

#[test]
fn check_finds_a_tombstone_not_above_its_versions() {
    let db = damaged("UPDATE tombstones SET version = 1 WHERE scope = 'repo:legacy-dashboard';");
    let report = assert_check_finds(&db, &[]);
    assert!(
        report["violations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["invariant"] == 3 || v["invariant"] == 5),
        "{report:#}"
    );
}

#[test]
fn check_finds_a_current_predicate_that_is_an_alias() {
    let db = damaged(
        &[
            current_record(("user:9", "pkg_manager"), "global", "npm", 1, 500),
            current_record(("user:9", "包管理器"), "repo:x", "npm", 1, 501),
        ]
        .concat(),
    );
    let report = assert_check_finds(&db, &[6]);
    let details: Vec<&str> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["invariant"] == 6)
        .map(|v| v["detail"].as_str().unwrap())
        .collect();
    assert!(
        details.iter().any(|d| d.contains("pkg_manager")),
        "{details:?}"
    );
    assert!(
        details.iter().any(|d| d.contains("包管理器")),
        "{details:?}"
    );
}

#[test]
fn check_finds_a_predicate_not_in_normal_form() {
    let db = damaged(&current_record(
        ("user:9", "Package Manager"),
        "global",
        "npm",
        1,
        500,
    ));
    assert_check_finds(&db, &[6]);
}

/// The unique constraint cannot be dropped, but a determined client can rebuild the table
/// without it; `check` still finds the second current record.
#[test]
fn check_finds_a_second_current_record_after_the_table_is_rebuilt() {
    let db = damaged(
        "ALTER TABLE memories RENAME TO memories_old;
         CREATE TABLE memories (
            id INTEGER PRIMARY KEY, subject TEXT NOT NULL, predicate TEXT NOT NULL, scope TEXT NOT NULL,
            value TEXT NOT NULL, version INTEGER NOT NULL, source TEXT NOT NULL, raw TEXT,
            causal_seq INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            confirmed_at TEXT, confirm_count INTEGER NOT NULL DEFAULT 0, confirmed_source TEXT,
            confirmed_seq INTEGER);
         INSERT INTO memories SELECT * FROM memories_old;
         DROP TABLE memories_old;
         INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
         SELECT subject, predicate, scope, '\"yarn\"', version, 'py', causal_seq, created_at, updated_at
         FROM memories WHERE predicate = 'package_manager' AND scope = 'global';",
    );
    assert_check_finds(&db, &[1]);
}

/// All of it at once: every invariant number shows up.
#[test]
fn check_reports_every_violated_invariant_of_a_heavily_damaged_database() {
    let db = damaged(
        &[
            memories_row(PM_OF_42, LEGACY, "npm", 3, 99),
            stale_content_on_the_tombstone("raw words"),
            GLOBAL_PM_BECOMES_YARN.to_string(),
            formatter_rewritten("old", 3, 0),
            current_record(("user:9", "pkg_manager"), "global", "npm", 1, 500),
        ]
        .concat(),
    );
    assert_check_finds(&db, &[2, 3, 4, 5, 6]);
}

/// With the invariant assertion on, memscope refuses to commit a write that would leave a
/// (foreign-)damaged identity violating an invariant; inside `apply` only that line fails and
/// the lines around it still land.
#[test]
fn writes_to_a_damaged_identity_are_refused_and_the_rest_of_apply_lands() {
    let db = damaged(&formatter_rewritten("dprint", 3, 100));
    let before = db.list(&["--predicate", "formatter"]);

    let r = db.run(&args_for(
        "write",
        "user:42",
        "formatter",
        &[
            "--value",
            "prettier",
            "--scope",
            "global",
            "--source",
            "thread:60",
        ],
    ));
    r.fails_with(1, &["invariant"]);
    assert_eq!(before, db.list(&["--predicate", "formatter"]));

    let lines = [
        serde_json::json!({"subject": "user:8", "predicate": "editor", "value": "helix", "scope": "global", "source": "a"}),
        serde_json::json!({"subject": "user:42", "predicate": "formatter", "value": "prettier", "scope": "global", "source": "b"}),
        serde_json::json!({"subject": "user:8", "predicate": "editor", "value": "zed ⚡", "scope": "repo:新项目", "source": "c"}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let r = db.run_stdin(&["apply"], input.as_bytes());
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(outcomes(&r.json_lines()), ["inserted", "error", "inserted"]);
    assert_eq!(before, db.list(&["--predicate", "formatter"]));
    assert_eq!(db.list(&["--subject", "user:8"]).len(), 2);
    assert_eq!(
        db.history("user:42", "formatter", None)
            .iter()
            .filter(|e| e["source"] == "b")
            .count(),
        0,
        "the refused line left nothing in history"
    );
}

/// A raw client may plant a tombstone for an identity memscope never saw (no history, so the
/// write path's one-statement insert does not see it coming): the schema's guard refuses the
/// insert, and the write comes out `rejected` — alone and inside an `apply` batch of new
/// memories — with nothing stored. (The planted tombstone has no `deleted` event, itself a
/// violation of invariant 5, so the per-write assertion would refuse every write: it is off.)
#[test]
fn a_tombstone_planted_without_history_rejects_writes_in_write_and_apply() {
    let db = TestDb::new();
    db.init();
    python(
        "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.execute(\"INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at) VALUES ('用户:小明', 'coffee', 'global', 1, 'planted 🪦', 't')\")\n",
        &[db.path_str()],
    )
    .ok();
    let no_assert = [("MEMSCOPE_ASSERT_INVARIANTS", "0")];
    let out = db
        .run_env(
            &args_for(
                "write",
                "用户:小明",
                "coffee",
                &[
                    "--value",
                    "燕麦拿铁 ☕",
                    "--scope",
                    "global",
                    "--source",
                    "thread:1",
                    "--json",
                ],
            ),
            &no_assert,
        )
        .ok()
        .json();
    assert_eq!(out["outcome"], "rejected", "{out:#}");

    let lines = [
        r#"{"subject":"user:1","predicate":"editor","value":"vim","scope":"global","source":"s:1"}"#,
        r#"{"subject":"用户:小明","predicate":"coffee","value":"美式","scope":"global","source":"s:2"}"#,
        r#"{"subject":"user:2","predicate":"editor","value":"helix","scope":"global","source":"s:3"}"#,
    ]
    .join("\n");
    assert_eq!(
        apply_outcomes(&db, "planted.jsonl", &lines, &no_assert),
        ["inserted", "rejected", "inserted"]
    );
    assert!(db.list(&["--subject", "用户:小明"]).is_empty());
    let rows = db.fingerprint().join("\n");
    assert!(
        !rows.contains("美式") && !rows.contains("燕麦拿铁"),
        "{rows}"
    );
}

/// memscope's own shortcut for new identities must not lean on the schema's guards: with every
/// trigger dropped by a raw client, a write to an identity tombstoned without history (also
/// planted raw) still comes out `rejected`, alone and in an `apply` batch, and nothing becomes
/// current.
#[test]
fn with_the_guards_dropped_memscope_still_refuses_a_tombstoned_identity() {
    let db = TestDb::new();
    db.init();
    python(
        DROP_TRIGGERS,
        &[
            db.path_str(),
            "INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at) VALUES ('user:9', 'editor', 'global', 1, 'planted', 't')",
        ],
    )
    .ok();
    assert_tombstoned_identity_refused(&db);
}

/// A bulk load leans on the insert guard only when it is exactly memscope's: one a raw client
/// replaced with a same-named trigger that lets everything through does not count.
#[test]
fn with_the_insert_guard_replaced_apply_still_refuses_a_tombstoned_identity() {
    let db = TestDb::new();
    db.init();
    python(
        "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.executescript(sys.argv[2])\n",
        &[
            db.path_str(),
            "DROP TRIGGER memories_no_resurrection_insert;
             CREATE TRIGGER memories_no_resurrection_insert BEFORE INSERT ON memories
             WHEN 0 BEGIN SELECT RAISE(FAIL, 'never'); END;
             INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at) VALUES ('user:9', 'editor', 'global', 1, 'planted', 't');",
        ],
    )
    .ok();
    assert_tombstoned_identity_refused(&db);
}

/// Only the tombstone guard's own refusal sends a bulk line to the full decision: a raw
/// client's trigger that refuses after the row is in (RAISE(FAIL) keeps what the statement
/// did) makes the line an error that leaves nothing behind, as it does for a single write.
#[test]
fn a_foreign_trigger_refusal_in_a_bulk_load_is_an_error_not_a_confirmation() {
    let db = TestDb::new();
    db.init();
    python(
        "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.executescript(sys.argv[2])\n",
        &[
            db.path_str(),
            "CREATE TRIGGER quota AFTER INSERT ON memories WHEN NEW.subject = 'user:over'
             BEGIN SELECT RAISE(FAIL, 'quota exceeded 🚫'); END;",
        ],
    )
    .ok();
    let lines = [
        r#"{"subject":"user:8","predicate":"editor","value":"vim","scope":"global","source":"s:1"}"#,
        r#"{"subject":"user:over","predicate":"editor","value":"emacs","scope":"global","source":"s:2"}"#,
        r#"{"subject":"user:10","predicate":"editor","value":"helix","scope":"global","source":"s:3"}"#,
    ];
    let file = db.sibling("quota.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let r = db.run(&["apply", file.to_str().unwrap()]);
    assert_eq!(r.code, 1, "an error line makes apply exit 1");
    let outs = r.json_lines();
    assert_eq!(outcomes(&outs), ["inserted", "error", "inserted"]);
    assert!(
        outs[1]["error"]
            .as_str()
            .unwrap()
            .contains("quota exceeded"),
        "{:#}",
        outs[1]
    );
    assert!(db.list(&["--subject", "user:over"]).is_empty());
    assert_eq!(db.history("user:over", "editor", None).len(), 0);
    db.assert_check_ok();
}

/// The outcome kinds of `memscope apply` on a file named `name` holding `lines`.
fn apply_outcomes(db: &TestDb, name: &str, lines: &str, env: &[(&str, &str)]) -> Vec<String> {
    let file = db.sibling(name);
    std::fs::write(&file, lines).unwrap();
    db.run_env(&["apply", file.to_str().unwrap()], env)
        .ok()
        .json_lines()
        .iter()
        .map(|o| o["outcome"].as_str().unwrap().to_string())
        .collect()
}

/// `user:9`/editor@global is tombstoned (planted raw): a write and an `apply` line to it are
/// `rejected`, the new identities around it land, and nothing of it becomes current.
fn assert_tombstoned_identity_refused(db: &TestDb) {
    let no_assert = [("MEMSCOPE_ASSERT_INVARIANTS", "0")];
    let lines = [
        r#"{"subject":"user:8","predicate":"editor","value":"vim","scope":"global","source":"s:1"}"#,
        r#"{"subject":"user:9","predicate":"editor","value":"emacs 🐃","scope":"global","source":"s:2"}"#,
        r#"{"subject":"user:10","predicate":"editor","value":"helix","scope":"global","source":"s:3"}"#,
    ];
    assert_eq!(
        apply_outcomes(
            db,
            "around-the-tombstone.jsonl",
            &lines.join("\n"),
            &no_assert
        ),
        ["inserted", "rejected", "inserted"]
    );
    assert!(db.list(&["--subject", "user:9"]).is_empty());
    assert!(!db.fingerprint().join("\n").contains("emacs"));
    let out = db
        .run_env(
            &args_for(
                "write",
                "user:9",
                "editor",
                &[
                    "--value", "vim", "--scope", "global", "--source", "s", "--json",
                ],
            ),
            &no_assert,
        )
        .ok()
        .json();
    assert_eq!(out["outcome"], "rejected", "{out:#}");
    assert!(db.list(&["--subject", "user:9"]).is_empty());
}

/// Runs `sql` from Python's sqlite3 on `db`, as a raw client would.
fn python_sql(db: &TestDb, sql: &str) {
    let r = python(
        "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nc.executescript(sys.argv[2])\nc.commit()\n",
        &[db.path_str(), sql],
    );
    assert_eq!(r.code, 0, "python: {}", r.stderr);
}

#[test]
fn a_guard_made_again_with_another_condition_or_body_counts_as_missing() {
    let db = base();
    let guards = |db: &TestDb| db.check().1["metrics"]["schema_guards"].clone();
    assert_eq!(guards(&db), "present");
    let original: String = db
        .sql()
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'history_append_only_delete'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for fake in [
        // The same name, a condition that never holds.
        "CREATE TRIGGER history_append_only_delete BEFORE DELETE ON history WHEN 0 \
         BEGIN SELECT RAISE(ABORT, 'memscope: history is append-only'); END",
        // The same condition, a body that refuses nothing.
        "CREATE TRIGGER history_append_only_delete BEFORE DELETE ON history \
         WHEN NOT memscope_purge_gate() BEGIN SELECT 1; END",
    ] {
        python_sql(
            &db,
            &format!("DROP TRIGGER history_append_only_delete; {fake};"),
        );
        assert_eq!(guards(&db), "missing", "after {fake}");
        // History is open to a raw DELETE now; made again word for word, it is guarded.
        python_sql(
            &db,
            &format!("DROP TRIGGER history_append_only_delete; {original};"),
        );
        assert_eq!(guards(&db), "present");
    }
    // A trigger of a raw client's beside the guards, which can make memscope's DELETE do
    // nothing, counts against them too.
    python_sql(
        &db,
        "CREATE TRIGGER keep BEFORE DELETE ON history BEGIN SELECT RAISE(IGNORE); END;",
    );
    assert_eq!(guards(&db), "missing");
    python_sql(&db, "DROP TRIGGER keep;");
    assert_eq!(guards(&db), "present");
    db.assert_check_ok();
}

#[test]
fn a_delete_a_foreign_trigger_suppresses_is_refused_whole() {
    let db = base();
    let before = db.fingerprint();
    // A raw client's trigger that makes every DELETE of history do nothing, without an error.
    python_sql(
        &db,
        "CREATE TRIGGER keep_history BEFORE DELETE ON history BEGIN SELECT RAISE(IGNORE); END;",
    );
    let run = db.run(&args_for(
        "delete",
        "user:42",
        "formatter",
        &["--scope", "global"],
    ));
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_one_sentence(
        &run.stderr,
        &["did not carry out the delete", "memscope check"],
    );
    assert_eq!(
        before,
        db.fingerprint(),
        "nothing was deleted, nothing half-done"
    );
    // A tombstone a trigger takes away again is caught the same way.
    python_sql(
        &db,
        "DROP TRIGGER keep_history;
         CREATE TRIGGER drop_tombstone AFTER INSERT ON tombstones
         BEGIN DELETE FROM tombstones WHERE subject = NEW.subject AND predicate = NEW.predicate AND scope = NEW.scope; END;",
    );
    let run = db.run(&args_for(
        "delete",
        "user:42",
        "formatter",
        &["--scope", "global"],
    ));
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_one_sentence(&run.stderr, &["tombstone missing"]);
    assert_eq!(before, db.fingerprint());
    python_sql(&db, "DROP TRIGGER drop_tombstone;");
    db.run(&args_for(
        "delete",
        "user:42",
        "formatter",
        &["--scope", "global"],
    ))
    .ok();
    db.assert_check_ok();
}

/// A delete on a database whose guards a raw client changed — here a trigger of its own that
/// copies the pending items memscope destroys — still destroys what it can, and says a copy may remain
/// (`guards_missing`, one sentence naming `check`), where a delete on an intact database says
/// nothing of the kind.
#[test]
fn a_delete_says_a_copy_may_remain_when_a_raw_client_hooked_the_tables() {
    let db = TestDb::new();
    db.write("user:42", "editor", "helix", "global", "s:1");
    db.write("user:42", "package_manager", "npm 🧨", "global", "s:2");
    db.write_ambiguous(
        "user:42",
        "package_manager",
        "yarn",
        "global,repo:web",
        "s:3",
        "以后都用 yarn",
    );
    let intact = db.run(&args_for(
        "delete",
        "user:42",
        "editor",
        &["--scope", "global", "--json"],
    ));
    assert_eq!(intact.code, 0, "{intact:?}");
    assert!(intact.json().get("guards_missing").is_none(), "{intact:?}");
    assert!(!intact.stderr.contains("guards"), "{intact:?}");
    python(
        "import sqlite3, sys\n\
         c = sqlite3.connect(sys.argv[1])\n\
         c.executescript('CREATE TABLE kept(v); CREATE TRIGGER keep_a_copy AFTER DELETE ON pending \
         BEGIN INSERT INTO kept VALUES (OLD.raw); END;')\n\
         c.commit()\n",
        &[db.path_str()],
    )
    .ok();
    let hooked = db.run(&args_for(
        "delete",
        "user:42",
        "package_manager",
        &["--scope", "global", "--json"],
    ));
    assert_eq!(hooked.code, 0, "{hooked:?}");
    assert_eq!(hooked.json()["guards_missing"], true, "{hooked:?}");
    assert!(
        hooked
            .stderr
            .contains("guards on this database are missing or changed")
            && hooked.stderr.contains("memscope check"),
        "{hooked:?}"
    );
    assert!(db.list(&[]).is_empty());
}

/// Found by review: the advice after a delete on a database whose guards are gone was "restore
/// the guards (`memscope init`)", and `init` on an up-to-date database did nothing. It makes
/// every guard trigger that is missing or changed again and names them; a trigger of another
/// client's is left alone and `check` names it (README, "check").
#[test]
fn init_makes_the_guards_again_and_check_names_what_is_wrong() {
    let db = base();
    python_sql(
        &db,
        "DROP TRIGGER history_append_only_delete;
         DROP TRIGGER memories_no_resurrection_insert;
         CREATE TRIGGER memories_no_resurrection_insert BEFORE INSERT ON memories WHEN 0
         BEGIN SELECT 1; END;
         CREATE TRIGGER \"间谍 📎\u{1b}]0;pwn\u{7}\u{202e}\" AFTER DELETE ON history BEGIN SELECT 1; END;",
    );
    let (_, report) = db.check();
    assert_eq!(report["metrics"]["schema_guards"], "missing");
    assert_eq!(
        report["metrics"]["schema_guard_problems"],
        json!([
            "trigger memories_no_resurrection_insert is not as memscope made it",
            "trigger history_append_only_delete is missing",
            "trigger 间谍 📎\u{1b}]0;pwn\u{7}\u{202e} on history was not made by memscope"
        ]),
        "the JSON parses to the name as stored (found by review: it held the text `\\u{{1b}}`): {report:#}"
    );
    let text = db.run(&["check"]).stdout;
    assert!(
        text.contains("GUARDS: memscope's guards on this database are not intact (trigger memories_no_resurrection_insert")
            && text.contains(&format!("`memscope --db {} init` makes memscope's own again", db.path.display()))
            && text.contains("trigger 间谍 📎\\u{1b}]0;pwn\\u{7}\\u{202e} on history")
            && !text.contains('\u{1b}'),
        "the file named, the name escaped once: {text}"
    );
    let said = db.run(&["init"]).ok().stdout;
    assert!(
        said.contains(
            "restored its guard(s) memories_no_resurrection_insert, history_append_only_delete"
        ),
        "{said}"
    );
    assert_eq!(
        db.check().1["metrics"]["schema_guard_problems"],
        json!(["trigger 间谍 📎\u{1b}]0;pwn\u{7}\u{202e} on history was not made by memscope"])
    );
    python_sql(&db, "DROP TRIGGER \"间谍 📎\u{1b}]0;pwn\u{7}\u{202e}\";");
    db.assert_check_ok();
    assert_eq!(db.check().1["metrics"]["schema_guards"], "present");
    assert!(db
        .run(&["init"])
        .ok()
        .stdout
        .contains("(schema up to date)\n"));
    // Guarded again: a raw client's DELETE of history is refused.
    let r = python(
        "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\ntry:\n    c.execute('DELETE FROM history')\n    print('deleted')\nexcept Exception as e:\n    print(e)\n",
        &[db.path_str()],
    );
    assert!(r.stdout.contains("memscope_purge_gate"), "{}", r.stdout);
}

/// A raw client that rebuilt `memories` without `UNIQUE (scope, subject, predicate)` took away
/// the guard of invariant 1: `check` names it (found by review: after `init` made the dropped
/// triggers again, `schema_guards` said `present` and a raw duplicate went in), and `init`
/// makes it again as a unique index — or, while two current records of one identity stand,
/// says so in one sentence and changes nothing.
#[test]
fn a_memories_table_rebuilt_without_its_unique_identity_is_a_missing_guard_init_restores() {
    let db = base();
    rebuild_memories_without_unique_identity(&db);
    let said = db.run(&["init"]).ok().stdout;
    assert!(said.contains("memories_identity"), "{said}");
    db.assert_check_ok();
    assert_eq!(db.check().1["metrics"]["schema_guards"], "present");
    let duplicate = "INSERT INTO memories (subject, predicate, scope, value, version, source, \
                     causal_seq, created_at, updated_at) SELECT subject, predicate, scope, '\"鬼 👻\"', \
                     version, source, causal_seq, created_at, updated_at FROM memories LIMIT 1";
    let r = python(
        "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\ntry:\n    c.execute(sys.argv[2])\n    c.commit()\n    print('inserted')\nexcept Exception as e:\n    print(e)\n",
        &[db.path_str(), duplicate],
    );
    assert!(
        r.stdout.contains("UNIQUE constraint failed"),
        "{}",
        r.stdout
    );

    // Without it again, and a duplicate in: check names both, init refuses in one sentence.
    python_sql(&db, &format!("DROP INDEX memories_identity; {duplicate};"));
    let (_, report) = db.check();
    assert_eq!(report["metrics"]["schema_guards"], "missing");
    assert_eq!(
        report["metrics"]["schema_guard_problems"],
        json!(["memories has no unique index on the identity (scope, subject, predicate)"])
    );
    let before = db.fingerprint();
    db.run(&["init"]).fails_with(
        1,
        &["two current records of one identity", "memscope check"],
    );
    assert_eq!(db.fingerprint(), before, "nothing changed");

    // Nor does anything else answer from one of the two at random, or rewrite both as one
    // (found by review: `resolve` answered the lower version, a write reported `superseded`
    // and made the two alike).
    let twice = db.sql_text_rows(
        "SELECT subject, predicate, scope FROM memories GROUP BY 1, 2, 3 HAVING count(*) > 1",
    );
    assert_eq!(twice.len(), 1, "{twice:?}");
    let [subject, predicate, scope] = [0, 1, 2].map(|i| twice[0][i].clone().unwrap());
    let repo = scope.strip_prefix("repo:").unwrap_or("elsewhere");
    let said = [
        "memories holds two rows of",
        "memscope check",
        "memscope init",
    ];
    db.run(&[
        "resolve",
        "--subject",
        &subject,
        "--predicate",
        &predicate,
        "--repo",
        repo,
    ])
    .fails_with(1, &said);
    for value in ["鬼 👻", "新的值 🆕"] {
        db.run(&[
            "write",
            "--subject",
            &subject,
            "--predicate",
            &predicate,
            "--value",
            value,
            "--scope",
            &scope,
            "--source",
            "s:after",
        ])
        .fails_with(1, &said);
    }
    assert_eq!(db.fingerprint(), before, "nothing changed");
}

/// The reader docs/SCHEMA.md gives other languages ("Reading it from another language") answers
/// as memscope does: the repository's rule for a repository typed in another case, through an
/// alias (found by review: it answered `global`).
#[test]
fn the_schema_documents_python_reader_answers_as_memscope_does() {
    let db = TestDb::new();
    db.write("User:42", "package_manager", "pnpm 📦", "global", "s");
    db.write("User:42", "package_manager", "npm", "repo:Web-App", "s");
    db.run(&["alias", "add", "pkg_mgr", "package_manager"]).ok();
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/SCHEMA.md")).unwrap();
    let start = doc
        .find("```python\nimport sqlite3")
        .expect("the python reader")
        + "```python\n".len();
    let code = &doc[start..start + doc[start..].find("```").unwrap()];
    let opened = "\"file:memory.db?mode=ro\"";
    assert!(code.contains(opened), "{code}");
    let script = format!(
        "import sys\n{}\nprint(json.dumps([resolve('user:42', 'pkg_mgr', repo='web-app'), resolve('USER:42', 'package_manager', repo='其他')]))\n",
        code.replace(opened, "\"file:\" + sys.argv[1] + \"?mode=ro\"")
    );
    let r = python(&script, &[db.path_str()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let got: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(got, json!([["repo:Web-App", "npm"], ["global", "pnpm 📦"]]));
    let memscope = db
        .run(&[
            "resolve",
            "--subject",
            "user:42",
            "--predicate",
            "pkg_mgr",
            "--repo",
            "web-app",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(memscope["value"], "npm", "{memscope}");
}

#[test]
fn check_names_each_row_holding_a_type_memscope_never_stores_and_commands_say_so() {
    // Found by review: a blob in `memories.value` made the whole report "Invalid column type
    // Blob at index: 2" (exit 1, nothing on stdout with --json); a blob in `pending.raw`
    // passed check while `memscope pending` failed on it.
    let db = base();
    db.write("用户:甲", "编辑器", "vim 🚀", "global", "thread:9");
    damage(
        &db,
        "UPDATE memories SET value = CAST(value AS BLOB) WHERE subject = '用户:甲';
         UPDATE memories SET version = 'two' WHERE predicate = 'formatter';
         UPDATE history SET causal_seq = 2.5 WHERE id = (SELECT min(id) FROM history);
         UPDATE tombstones SET version = X'00ff';
         INSERT INTO pending (subject, predicate, value, raw, source, causal_seq, candidates, created_at)
           VALUES ('user:42', 'editor', '\"vim\"', CAST('这个仓库用 vim 🚀' AS BLOB), 'py', 1,
                   '[\"repo:a\",\"repo:b\"]', '2026-01-01T00:00:00.000Z');
         UPDATE history SET source = CAST(X'7468e4bd' AS TEXT) WHERE subject = '用户:甲';",
    );
    let report = assert_check_finds(&db, &[2, 3, 4, 5]);
    let details: Vec<(u64, String)> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["invariant"].as_u64().unwrap(),
                v["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (invariant, words) in [
        (4, "(用户:甲 · 编辑器 @ global): value holds a blob where memscope stores text"),
        (5, "(user:42 · formatter @ global): version holds text where memscope stores an integer"),
        (2, "causal_seq holds a floating-point number where memscope stores an integer"),
        (3, "tombstones row user:42 · package_manager @ repo:legacy-dashboard: version holds a blob"),
        (6, "(user:42 · editor): raw holds a blob where memscope stores text"),
        // Text of bytes that are not UTF-8: `history` and `export` failed on it, check passed.
        (4, "(用户:甲 · 编辑器 @ global): source holds text that is not UTF-8"),
    ] {
        assert!(
            details.iter().any(|(i, d)| *i == invariant && d.contains(words)),
            "invariant {invariant} {words:?} in {details:#?}"
        );
    }
    // Named once, by its type: not also as "text that is not readable JSON".
    assert!(
        !details
            .iter()
            .any(|(_, d)| d.contains("用户:甲") && d.contains("not readable JSON")),
        "{details:#?}"
    );
    db.run(&["export"]).fails_with(
        1,
        &[
            "memories.value holds a blob, which memscope never writes",
            "memscope check",
        ],
    );
    // Each command that meets such a row says so in one sentence and points at check.
    for args in [&["list"][..], &["pending"]] {
        let r = db.run(args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stdout);
        assert!(
            r.stderr.starts_with("memscope: a stored row holds ")
                && r.stderr.contains(" in the column ")
                && r.stderr.contains("`memscope check` names the rows")
                && r.stderr.lines().count() == 1,
            "{args:?}: {}",
            r.stderr
        );
    }
}

#[test]
fn text_that_is_not_utf8_is_named_by_check_and_refused_by_export() {
    // Found by review: a raw client's invalid UTF-8 in a read's note passed check, `reads`
    // failed on "invalid utf-8 sequence", and `export` wrote U+FFFD in its place, so the
    // import of the changed dump said "check is clean".
    let db = base();
    damage(&db, "UPDATE history SET raw = CAST(X'e4bda0ff' AS TEXT) WHERE id = (SELECT min(id) FROM history);");
    let report = assert_check_finds(&db, &[4]);
    assert!(
        report["violations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["detail"].as_str().unwrap().contains(
                "(user:42 · package_manager @ global): raw holds text that is not UTF-8"
            )),
        "{report:#}"
    );
    db.run(&["export"]).fails_with(
        1,
        &[
            "history.raw holds text that is not UTF-8, which memscope never writes",
            "memscope check",
        ],
    );
    db.run(&[
        "history",
        "--subject",
        "user:42",
        "--predicate",
        "package_manager",
        "--scope",
        "global",
    ])
    .fails_with(
        1,
        &[
            "a stored row holds text that is not UTF-8",
            "`memscope check` names the rows",
        ],
    );
}

#[test]
fn a_raw_clients_trigger_that_refuses_a_delete_is_one_sentence() {
    // Found by review: "memscope: memscope: blocked: Error code 1811: constraint failed".
    let db = base();
    python_sql(
        &db,
        "CREATE TRIGGER keep_it BEFORE DELETE ON memories
         BEGIN SELECT RAISE(ABORT, 'memscope: 策略不许删 🚫'); END;",
    );
    let before = db.fingerprint();
    db.run(&args_for(
        "delete",
        "user:42",
        "formatter",
        &["--scope", "global"],
    ))
    .fails_with(
        1,
        &[
            "a trigger on the database refused the change (策略不许删 🚫), so nothing was changed",
            "`memscope check` names any trigger memscope did not make",
        ],
    );
    assert_eq!(before, db.fingerprint());
}

/// Rebuilds the SQLite `memories` table without its `UNIQUE (scope, subject, predicate)`, from
/// Python, as a raw client can.
fn rebuild_memories_without_unique_identity(db: &TestDb) {
    let r = python(
        "import sqlite3, sys\n\
         c = sqlite3.connect(sys.argv[1])\n\
         sql = c.execute(\"SELECT sql FROM sqlite_master WHERE name = 'memories'\").fetchone()[0]\n\
         assert 'UNIQUE (scope, subject, predicate)' in sql\n\
         c.executescript('PRAGMA legacy_alter_table = ON; ALTER TABLE memories RENAME TO m_old; '\n\
           + sql.replace('UNIQUE (scope, subject, predicate)', 'CHECK (1)')\n\
           + '; INSERT INTO memories SELECT * FROM m_old; DROP TABLE m_old;')\n\
         c.commit()\n",
        &[db.path_str()],
    );
    assert_eq!(r.code, 0, "python: {}", r.stderr);
}

/// Takes away the guard that keeps one current record an identity, as a raw client can: on
/// SQLite the table rebuilt without its `UNIQUE` (then `init`'s index dropped), on PostgreSQL
/// the constraint dropped.
fn drop_identity_guard(db: &TestDb) {
    if db.is_postgres() {
        db.sql_execute("ALTER TABLE memories DROP CONSTRAINT memories_identity")
            .unwrap();
        return;
    }
    rebuild_memories_without_unique_identity(db);
    db.run(&["init"]).ok();
    db.sql_execute("DROP INDEX memories_identity").unwrap();
}

/// Two current records of one identity — stored by a raw client that dropped the guard — are
/// refused in one sentence by every command that meets them, on either backend: resolve (the
/// scope seen twice in its chain), a write that would confirm, supersede or be stale against
/// either, apply, revert, rescope, delete and its preview; `init` cannot make the guard again
/// and says how to repair; `check` names them. Nothing is answered from either record and
/// nothing changes (found by review: on PostgreSQL resolve answered one at random, a write
/// rewrote both, a stale write was counted against one).
fn two_current_records_refused(db: &TestDb) {
    let (s, p) = ("user:7", "editor");
    db.write(s, p, "vim 🐘", "global", "s:1");
    db.write(s, p, "helix 🧬", "repo:网站", "s:2");
    db.write(s, p, "helix 第二版 🧬", "repo:网站", "s:3");
    drop_identity_guard(db);
    db.sql_execute(
        "INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, \
         created_at, updated_at) SELECT subject, predicate, scope, '\"鬼 👻\"', version, source, \
         causal_seq, created_at, updated_at FROM memories WHERE scope = 'repo:网站'",
    )
    .unwrap();
    let (code, report) = db.check();
    assert_eq!(code, 1, "{report:#}");
    assert!(
        report["violations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v.to_string().contains("has 2 current records")),
        "{report:#}"
    );
    // PostgreSQL's clock is a sequence, which a refused write's rollback does not take back.
    let content = || -> Vec<String> {
        db.fingerprint()
            .into_iter()
            .filter(|l| !l.contains("\"key\":\"causal_clock\""))
            .collect()
    };
    let before = content();
    let said = [
        "memories holds two rows of",
        "网站",
        "memscope check",
        "memscope init",
    ];
    let scope = ["--scope", "repo:网站"];
    db.run(&[
        "resolve",
        "--subject",
        s,
        "--predicate",
        p,
        "--repo",
        "网站",
    ])
    .fails_with(1, &said);
    let write = |value: &str, extra: &[&str]| {
        let mut args = vec!["write", "--subject", s, "--predicate", p, "--value", value];
        args.extend_from_slice(&scope);
        args.extend_from_slice(&["--source", "s:after"]);
        args.extend_from_slice(extra);
        db.run(&args)
    };
    // Confirms one of them, supersedes both, is stale against either.
    for (value, extra) in [
        ("鬼 👻", &[][..]),
        ("helix 第二版 🧬", &[][..]),
        ("新的值 🆕", &[][..]),
        ("旧的值 🕰", &["--causal-seq", "1"][..]),
    ] {
        write(value, extra).fails_with(1, &said);
    }
    let line = json!({"subject": s, "predicate": p, "value": "新的值 🆕", "scope": "repo:网站", "source": "s:apply"});
    let r = db.run_stdin(&["apply"], format!("{line}\n").as_bytes());
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        format!("{}{}", r.stdout, r.stderr).contains("memories holds two rows of"),
        "{r:?}"
    );
    let id = ["--subject", s, "--predicate", p, "--scope", "repo:网站"];
    db.run(&[&["revert"][..], &id].concat())
        .fails_with(1, &said);
    db.run(&[&["rescope"][..], &id, &["--to", "task:迁移"]].concat())
        .fails_with(1, &said);
    db.run(&[&["delete"][..], &id, &["--dry-run"]].concat())
        .fails_with(1, &said);
    db.run(&[&["delete"][..], &id].concat())
        .fails_with(1, &said);
    assert_eq!(content(), before, "nothing changed");
    db.run(&["init"]).fails_with(
        1,
        &[
            "two current records of one identity",
            "memscope check",
            "SQL client",
        ],
    );
    assert_eq!(content(), before, "init changed nothing");
}

#[test]
fn two_current_records_of_one_identity_are_refused_never_answered_from_either() {
    two_current_records_refused(&TestDb::new());
}

#[test]
fn two_current_records_of_one_identity_are_refused_never_answered_from_either_on_postgres() {
    on_postgres(|db| two_current_records_refused(&db));
}

/// Takes away tombstones' primary key, as a raw client can: on SQLite the table rebuilt
/// without it (its guard triggers go with the old table), on PostgreSQL the constraint dropped.
fn drop_tombstone_key(db: &TestDb) {
    if db.is_postgres() {
        db.sql_execute("ALTER TABLE tombstones DROP CONSTRAINT tombstones_pkey")
            .unwrap();
        return;
    }
    let r = python(
        "import re, sqlite3, sys\n\
         c = sqlite3.connect(sys.argv[1])\n\
         sql = c.execute(\"SELECT sql FROM sqlite_master WHERE name = 'tombstones'\").fetchone()[0]\n\
         keyless = re.sub(r',\\s*PRIMARY KEY \\(subject, predicate, scope\\)\\s*\\)\\s*WITHOUT ROWID', ')', sql)\n\
         assert keyless != sql, sql\n\
         c.executescript('PRAGMA legacy_alter_table = ON; ALTER TABLE tombstones RENAME TO t_old; '\n\
           + keyless + '; INSERT INTO tombstones SELECT * FROM t_old; DROP TABLE t_old;')\n\
         c.commit()\n",
        &[db.path_str()],
    );
    assert_eq!(r.code, 0, "python: {}", r.stderr);
}

/// Two tombstones of one identity — stored by a raw client that dropped tombstones' key (found
/// by review: `check` saw nothing) — are named by `check` (invariant 1, and the guards as
/// missing); a restore or delete of the identity is refused in one sentence and changes
/// nothing; `init` cannot make the key again and says how to repair; once a SQL client removed
/// the extra row, `init` makes the key again, `check` is clean and the restore works.
fn two_tombstones_found(db: &TestDb) {
    let (s, p) = ("user:7", "editor");
    db.write(s, p, "helix 第二版 🧬", "repo:网站", "s:1");
    db.run(&[
        "delete",
        "--subject",
        s,
        "--predicate",
        p,
        "--scope",
        "repo:网站",
    ])
    .ok();
    db.assert_check_ok();
    drop_tombstone_key(db);
    // A delete cannot record its tombstone without the key: refused in one sentence.
    db.write(s, "theme", "暗色 🌑", "global", "s:2");
    db.run(&[
        "delete",
        "--subject",
        s,
        "--predicate",
        "theme",
        "--scope",
        "global",
    ])
    .fails_with(
        1,
        &[
            "tombstones has lost its key",
            "nothing was deleted",
            "memscope init",
        ],
    );
    db.sql_execute(
        "INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at) \
         SELECT subject, predicate, scope, version, '第二块墓碑 🪦', deleted_at FROM tombstones",
    )
    .unwrap();
    let (code, report) = db.check();
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["metrics"]["schema_guards"], json!("missing"));
    let named = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["invariant"] == 1 && v.to_string().contains("@ repo:网站 has 2 tombstones"));
    assert!(named, "{report:#}");
    let before = db.fingerprint();
    let id = ["--subject", s, "--predicate", p, "--scope", "repo:网站"];
    let said = ["tombstones holds two rows of", "网站", "memscope check"];
    db.run(&[&["restore"][..], &id].concat())
        .fails_with(1, &said);
    db.run(&[&["delete"][..], &id].concat())
        .fails_with(1, &said);
    assert_eq!(db.fingerprint(), before, "nothing changed");
    db.run(&["init"]).fails_with(
        1,
        &[
            "two tombstones of one identity",
            "memscope check",
            "SQL client",
        ],
    );
    assert_eq!(db.fingerprint(), before, "init changed nothing");
    db.sql_execute("DELETE FROM tombstones WHERE reason = '第二块墓碑 🪦'")
        .unwrap();
    db.run(&["init"]).ok();
    let (code, report) = db.check();
    assert_eq!(
        (code, &report["metrics"]["schema_guards"]),
        (0, &json!("present")),
        "{report:#}"
    );
    // The key is back: a second tombstone is refused again.
    let again = db.sql_execute(
        "INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at) \
         SELECT subject, predicate, scope, version, 'x', deleted_at FROM tombstones",
    );
    assert!(again.is_err(), "the key refuses a second tombstone");
    db.run(&[&["restore"][..], &id].concat()).ok();
    db.assert_check_ok();
}

#[test]
fn two_tombstones_of_one_identity_are_found_and_refused() {
    two_tombstones_found(&TestDb::new());
}

#[test]
fn two_tombstones_of_one_identity_are_found_and_refused_on_postgres() {
    on_postgres(|db| two_tombstones_found(&db));
}

/// Rebuilds `table` as a raw client can in one line (`CREATE TABLE … AS SELECT`): the same
/// columns and rows, none of the constraints — no `INTEGER PRIMARY KEY`, no `NOT NULL`, no key.
fn rebuild_without_constraints(db: &TestDb, table: &str) {
    python_sql(
        db,
        &format!(
            "CREATE TABLE rebuilt AS SELECT * FROM {table}; DROP TABLE {table}; \
             ALTER TABLE rebuilt RENAME TO {table};"
        ),
    );
}

/// A table a raw client rebuilt without its constraints — each of memscope's — is a SCHEMA
/// problem `check` names with its way out, and no write lands (found by an exploratory test:
/// after `init` made the identity's unique index, check said ok and a write into the rebuilt
/// `memories` said `inserted v1` and stored a row whose id and value were NULL). The way out
/// works: an export imported into a new file is whole, and checks clean.
#[test]
fn a_table_rebuilt_without_its_constraints_is_a_schema_problem_and_no_write_lands() {
    for table in [
        "memories",
        "history",
        "tombstones",
        "pending",
        "reads",
        "settings",
        "metrics",
        "spellings",
        "predicate_aliases",
    ] {
        let db = base();
        db.ask_npm();
        let before = db.fingerprint();
        damage(&db, "");
        rebuild_without_constraints(&db, table);
        let (code, report) = db.check();
        assert_eq!(code, 1, "{table}: {report:#}");
        let problems = report["metrics"]["schema_problems"].as_array().unwrap();
        assert_eq!(problems.len(), 1, "{table}: {report:#}");
        let problem = problems[0].as_str().unwrap();
        assert!(
            problem.starts_with(&format!("table {table} lost its constraints: ")),
            "{problem}"
        );
        let text = db.run(&["check"]).stdout;
        assert!(
            text.starts_with("SCHEMA: ")
                && text.contains(problem)
                && text.contains(&format!(
                    "`memscope --db {} export --out dump.jsonl`",
                    db.path.display()
                ))
                && text.contains("import dump.jsonl"),
            "{table}: {text}"
        );

        // Every write is refused in one sentence, and nothing changes; reads go on.
        let rows = |t: &str| db.sql_i64(&format!("SELECT count(*) FROM {t}"));
        let counts: Vec<i64> = ["memories", "history", "tombstones", "pending"]
            .iter()
            .map(|t| rows(t))
            .collect();
        for args in [
            args_for(
                "write",
                "user:42",
                "theme",
                &["--value", "dark 🌙", "--scope", "global", "--source", "s:9"],
            ),
            args_for(
                "write",
                "user:42",
                "package_manager",
                &["--value", "bun", "--scope", "global", "--source", "s:9"],
            ),
            args_for(
                "delete",
                "user:42",
                "formatter",
                &["--scope", "global", "--yes"],
            ),
            vec!["alias", "add", "pm2", "package_manager"],
            vec!["init"],
        ] {
            db.run(&args).fails_with(
                1,
                &[&format!("table {table} lost its constraints"), "export"],
            );
        }
        let after: Vec<i64> = ["memories", "history", "tombstones", "pending"]
            .iter()
            .map(|t| rows(t))
            .collect();
        assert_eq!(counts, after, "{table}: a refused write changed the rows");
        assert!(db.list(&[]).len() >= 2, "{table}: reads go on");

        let dump = db.sibling("dump.jsonl");
        db.run(&["export", "--out", dump.to_str().unwrap()]).ok();
        let new = TestDb::at(db.sibling("new.db"));
        new.run(&["import", dump.to_str().unwrap()]).ok();
        new.assert_check_ok();
        assert_eq!(before, new.fingerprint(), "{table}");
    }
}

/// A dropped `settings` table, or its `value` column, stopped `check` with a raw SQL error
/// ("no such table: settings") where any other table gave the SCHEMA line (found by an
/// exploratory test); every other command refuses in one sentence.
#[test]
fn a_dropped_settings_table_or_column_is_the_schema_line() {
    for (sql, problem) in [
        ("DROP TABLE settings", "table settings is missing"),
        (
            "ALTER TABLE settings DROP COLUMN value",
            "table settings lacks column(s) value",
        ),
        ("DROP TABLE metrics", "table metrics is missing"),
    ] {
        let db = base();
        python_sql(&db, sql);
        let (code, report) = db.check();
        assert_eq!(code, 1, "{sql}: {report:#}");
        assert_eq!(
            report["metrics"]["schema_problems"],
            json!([problem]),
            "{sql}"
        );
        let r = db.run(&["check"]);
        assert!(
            r.stdout.starts_with(&format!(
                "SCHEMA: memscope's schema on this database was changed by a raw SQL client ({problem})"
            )),
            "{sql}: {r:?}"
        );
        for args in [
            vec!["list"],
            vec![
                "resolve",
                "--subject",
                "user:42",
                "--predicate",
                "package_manager",
            ],
            vec!["init"],
        ] {
            db.run(&args).fails_with(1, &[problem, "backup"]);
        }
    }
}

/// An index of memscope's a raw client dropped was unseen by `check` and left missing by
/// `init` (found by an exploratory test): `check` names it — a speed problem, not a broken
/// invariant, so the report stays ok — and `init` makes it again.
#[test]
fn a_dropped_index_is_named_by_check_and_made_again_by_init() {
    let db = base();
    python_sql(
        &db,
        "DROP INDEX history_by_identity; DROP INDEX reads_by_identity; DROP INDEX pending_repeats;",
    );
    let (code, report) = db.check();
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        report["metrics"]["missing_indexes"],
        json!([
            "history_by_identity",
            "pending_repeats",
            "reads_by_identity"
        ])
    );
    let text = db.run(&["check"]).stdout;
    assert!(
        text.contains("INDEXES: memscope's index(es) history_by_identity, pending_repeats, reads_by_identity are missing")
            && text.contains(&format!("`memscope --db {} init` makes them again", db.path.display())),
        "{text}"
    );
    let said = db.run(&["init"]).ok().stdout;
    assert!(
        said.contains(
            "made its index(es) history_by_identity, pending_repeats, reads_by_identity again"
        ),
        "{said}"
    );
    let (code, report) = db.check();
    assert_eq!(code, 0);
    assert!(
        report["metrics"].get("missing_indexes").is_none(),
        "{report:#}"
    );
    assert_eq!(
        db.sql_i64("SELECT count(*) FROM sqlite_master WHERE name IN ('history_by_identity', 'pending_repeats', 'reads_by_identity')"),
        3
    );
    assert!(db
        .run(&["init"])
        .ok()
        .stdout
        .contains("(schema up to date)\n"));
}
