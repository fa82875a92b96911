//! Reading is precedence, not recency (README, "resolve"): task beats repo beats global, a repo rule never
//! leaks into another repo, and `resolve --json` explains the chain it considered.
//! Each test runs on a SQLite file and again on PostgreSQL (`…_on_postgres`).

use crate::support::*;
use serde_json::{json, Value};

const U: &str = "user:42";
const PM: &str = "package_manager";

/// global pnpm, legacy-dashboard npm, one task that must not install anything.
fn seeded(db: TestDb) -> TestDb {
    db.write(U, PM, "pnpm", "global", "thread:17/message:86");
    db.write(
        U,
        PM,
        "npm",
        "repo:legacy-dashboard",
        "thread:23/message:14",
    );
    db.write(
        U,
        PM,
        "不执行任何安装命令 🚫",
        "task:check-lockfile-7",
        "thread:26/message:5",
    );
    db
}

fn chain(r: &Value) -> Vec<(String, bool, bool, Value)> {
    r["considered"]
        .as_array()
        .expect("considered")
        .iter()
        .map(|c| {
            (
                c["scope"].as_str().unwrap().to_string(),
                c["found"].as_bool().unwrap(),
                c["wins"].as_bool().unwrap(),
                c["value"].clone(),
            )
        })
        .collect()
}

#[test]
fn task_beats_repo_beats_global() {
    task_beats_repo_beats_global_on(TestDb::new());
}

#[test]
fn task_beats_repo_beats_global_on_postgres() {
    on_postgres(task_beats_repo_beats_global_on);
}

fn task_beats_repo_beats_global_on(db: TestDb) {
    let db = seeded(db);
    // The three situations of the first article.
    let new_project = db.resolve(U, PM, &["--repo", "brand-new-app"]);
    assert_eq!(new_project["value"], "pnpm");
    assert_eq!(new_project["scope"], "global");

    let legacy = db.resolve(U, PM, &["--repo", "legacy-dashboard"]);
    assert_eq!(legacy["value"], "npm");
    assert_eq!(legacy["scope"], "repo:legacy-dashboard");

    let task = db.resolve(
        U,
        PM,
        &["--repo", "legacy-dashboard", "--task", "check-lockfile-7"],
    );
    assert_eq!(task["value"], "不执行任何安装命令 🚫");
    assert_eq!(task["scope"], "task:check-lockfile-7");
    assert_eq!(
        chain(&task),
        vec![
            (
                "task:check-lockfile-7".into(),
                true,
                true,
                json!("不执行任何安装命令 🚫")
            ),
            ("repo:legacy-dashboard".into(), true, false, json!("npm")),
            ("global".into(), true, false, json!("pnpm")),
        ]
    );

    // A task alone skips the repo level.
    let task_only = db.resolve(U, PM, &["--task", "check-lockfile-7"]);
    assert_eq!(task_only["scope"], "task:check-lockfile-7");
    assert_eq!(chain(&task_only).len(), 2);

    // An unrelated task in the legacy repo falls back to the repo rule.
    let other_task = db.resolve(U, PM, &["--repo", "legacy-dashboard", "--task", "other"]);
    assert_eq!(other_task["scope"], "repo:legacy-dashboard");
    assert_eq!(
        chain(&other_task),
        vec![
            ("task:other".into(), false, false, Value::Null),
            ("repo:legacy-dashboard".into(), true, true, json!("npm")),
            ("global".into(), true, false, json!("pnpm")),
        ]
    );
}

#[test]
fn a_repo_rule_never_leaks_into_another_repo() {
    a_repo_rule_never_leaks_into_another_repo_on(TestDb::new());
}

#[test]
fn a_repo_rule_never_leaks_into_another_repo_on_postgres() {
    on_postgres(a_repo_rule_never_leaks_into_another_repo_on);
}

fn a_repo_rule_never_leaks_into_another_repo_on(db: TestDb) {
    let db = seeded(db);
    for other in [
        "web-app",
        "legacy-dashboard-v2",
        "legacy",
        // (`LEGACY-DASHBOARD` is the same repository: ids compare case-insensitively, see
        // tests/store/spelling.rs.)
        "legacy_dashboard",
        "旧仪表盘",
    ] {
        let r = db.resolve(U, PM, &["--repo", other]);
        assert_eq!(r["value"], "pnpm", "repo {other}: {r:#}");
        assert_eq!(r["scope"], "global");
        assert_eq!(
            chain(&r)[0],
            (format!("repo:{other}"), false, false, Value::Null)
        );
    }
    // Nor into another subject.
    let r = db.resolve("user:7", PM, &["--repo", "legacy-dashboard"]);
    assert_eq!(r["found"], false, "{r:#}");
}

#[test]
fn the_latest_write_never_outranks_the_scope_that_applies() {
    the_latest_write_never_outranks_the_scope_that_applies_on(TestDb::new());
}

#[test]
fn the_latest_write_never_outranks_the_scope_that_applies_on_postgres() {
    on_postgres(the_latest_write_never_outranks_the_scope_that_applies_on);
}

fn the_latest_write_never_outranks_the_scope_that_applies_on(db: TestDb) {
    let db = seeded(db);
    // A newer global change does not override the older repo rule inside the repo.
    let out = db.write(U, PM, "yarn", "global", "thread:40/message:1");
    assert_eq!(out["outcome"], "superseded");
    let r = db.resolve(U, PM, &["--repo", "legacy-dashboard"]);
    assert_eq!(r["value"], "npm");
    assert_eq!(
        chain(&r)[1],
        ("global".into(), true, false, json!("yarn")),
        "the newer global value is shadowed here"
    );
    assert_eq!(db.resolve(U, PM, &["--repo", "web-app"])["value"], "yarn");
}

#[test]
fn resolve_json_has_the_contract_shape() {
    resolve_json_has_the_contract_shape_on(TestDb::new());
}

#[test]
fn resolve_json_has_the_contract_shape_on_postgres() {
    on_postgres(resolve_json_has_the_contract_shape_on);
}

fn resolve_json_has_the_contract_shape_on(db: TestDb) {
    let db = seeded(db);
    let r = db.resolve(U, "Package Manager", &["--repo", "legacy-dashboard"]);
    for key in RESOLUTION_KEYS {
        assert!(r.get(key).is_some(), "resolve --json lacks {key}: {r:#}");
    }
    assert_eq!(r["found"], true);
    assert_eq!(r["subject"], U);
    assert_eq!(r["predicate"], PM, "the predicate is normalized");
    assert_eq!(r["value"], "npm");
    assert_eq!(r["scope"], "repo:legacy-dashboard");
    assert_eq!(r["version"], 1);
    assert_eq!(r["source"], "thread:23/message:14");
    for c in r["considered"].as_array().unwrap() {
        for key in ["scope", "found", "value", "wins"] {
            assert!(c.get(key).is_some(), "considered entry lacks {key}: {c:#}");
        }
        assert!(c["found"].is_boolean() && c["wins"].is_boolean());
    }
    let winners = r["considered"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["wins"] == true)
        .count();
    assert_eq!(winners, 1);
}

#[test]
fn resolve_that_finds_nothing_exits_zero_with_found_false() {
    resolve_that_finds_nothing_exits_zero_with_found_false_on(TestDb::new());
}

#[test]
fn resolve_that_finds_nothing_exits_zero_with_found_false_on_postgres() {
    on_postgres(resolve_that_finds_nothing_exits_zero_with_found_false_on);
}

fn resolve_that_finds_nothing_exits_zero_with_found_false_on(db: TestDb) {
    let db = seeded(db);
    let r = db.run(&args_for(
        "resolve",
        U,
        "咖啡",
        &["--repo", "web-app", "--task", "t-1", "--json"],
    ));
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["found"], false);
    assert!(v["value"].is_null() && v["scope"].is_null() && v["version"].is_null());
    assert_eq!(v["predicate"], "coffee", "the Chinese alias maps to coffee");
    assert_eq!(
        chain(&v),
        vec![
            ("task:t-1".into(), false, false, Value::Null),
            ("repo:web-app".into(), false, false, Value::Null),
            ("global".into(), false, false, Value::Null),
        ]
    );
    // The text form says so in words, also exit 0.
    let t = db.run(&["resolve", "--subject", "nobody", "--predicate", "x"]);
    assert_eq!(t.code, 0, "{t:?}");
    assert!(!t.stdout.trim().is_empty());
}

#[test]
fn a_deleted_repo_rule_falls_back_to_the_default_and_says_so() {
    a_deleted_repo_rule_falls_back_to_the_default_and_says_so_on(TestDb::new());
}

#[test]
fn a_deleted_repo_rule_falls_back_to_the_default_and_says_so_on_postgres() {
    on_postgres(a_deleted_repo_rule_falls_back_to_the_default_and_says_so_on);
}

fn a_deleted_repo_rule_falls_back_to_the_default_and_says_so_on(db: TestDb) {
    let db = seeded(db);
    db.run(&args_for(
        "delete",
        U,
        PM,
        &["--scope", "repo:legacy-dashboard"],
    ))
    .ok();
    let r = db.resolve(U, PM, &["--repo", "legacy-dashboard"]);
    assert_eq!(r["value"], "pnpm");
    assert_eq!(r["scope"], "global");
    let repo = &r["considered"][0];
    assert_eq!(repo["found"], false);
    assert_eq!(repo["state"], "deleted", "{r:#}");
}

#[test]
fn resolve_rejects_a_malformed_context_as_a_usage_error() {
    resolve_rejects_a_malformed_context_as_a_usage_error_on(TestDb::new());
}

#[test]
fn resolve_rejects_a_malformed_context_as_a_usage_error_on_postgres() {
    on_postgres(resolve_rejects_a_malformed_context_as_a_usage_error_on);
}

fn resolve_rejects_a_malformed_context_as_a_usage_error_on(db: TestDb) {
    let db = seeded(db);
    db.run(&args_for("resolve", U, PM, &["--repo", "two words"]))
        .fails_with(2, &["whitespace"]);
}
