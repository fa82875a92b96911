//! Issue 16, suspects in the existing data: `memscope suspects` names the current global records
//! whose words or whose message point at one place, with the evidence, the repositories the
//! value reaches without a rule of their own, and the rescope that fixes it.

use crate::support::*;
use serde_json::{json, Value};

#[test]
fn the_demo_incident_is_the_one_suspect_and_rescoping_it_clears_it() {
    let db = TestDb::new();
    db.run(&["demo", "--no-tui"]).ok();
    let found = as_array(db.json(&["suspects", "--json"]));
    assert_eq!(found.len(), 1, "only the incident: {found:#?}");
    let s = &found[0];
    assert_eq!(
        (
            &s["record"]["subject"],
            &s["record"]["predicate"],
            &s["record"]["scope"]
        ),
        (
            &json!("user:42"),
            &json!("package_manager"),
            &json!("global")
        )
    );
    let evidence = s["evidence"].to_string();
    assert!(evidence.contains("the words say “这个仓库”"), "{evidence}");
    assert!(
        evidence.contains("the same message wrote install_command in repo:legacy-dashboard"),
        "{evidence}"
    );
    assert_eq!(s["suggested_scope"], "repo:legacy-dashboard");
    let radius = strs(&s["blast_radius"]);
    assert!(radius.contains(&"repo:web-app"), "{radius:?}");
    // The reads served this version (v2, npm): three; the fourth, eleven days ago, got v1
    // (pnpm) and is not counted against it (found by review: it was).
    assert_eq!(s["reads"], 3, "{s:#}");
    // `check` counts them as a health figure, not a violation.
    let (code, report) = db.check();
    assert_eq!(
        (code, &report["metrics"]["suspects"]),
        (0, &json!(1)),
        "{report:#}"
    );
    // The text names the fix as a command that can be pasted.
    let text = db.run(&["suspects"]).ok().stdout;
    assert!(
        text.contains("fix: memscope rescope --subject user:42 --predicate package_manager --scope global --to repo:legacy-dashboard"),
        "{text}"
    );
    // The fix it suggests clears it.
    db.json(&args_for(
        "rescope",
        "user:42",
        "package_manager",
        &[
            "--scope",
            "global",
            "--to",
            "repo:legacy-dashboard",
            "--json",
        ],
    ));
    assert_eq!(
        as_array(db.json(&["suspects", "--json"])),
        Vec::<serde_json::Value>::new()
    );
    assert!(db.run(&["suspects"]).ok().stdout.contains("no suspects"));
    assert_eq!(db.check().1["metrics"]["suspects"], 0);
}

#[test]
fn a_default_stated_as_a_default_is_no_suspect_and_words_print_escaped() {
    a_default_stated_as_a_default_is_no_suspect_and_words_print_escaped_on(TestDb::new());
}

#[test]
fn a_default_stated_as_a_default_is_no_suspect_and_words_print_escaped_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        a_default_stated_as_a_default_is_no_suspect_and_words_print_escaped_on(db);
    }
}

fn a_default_stated_as_a_default_is_no_suspect_and_words_print_escaped_on(db: TestDb) {
    db.write_first_default();
    db.write_with(
        ("user:7", "indentation"),
        "tabs",
        "global",
        "thread:2",
        &["--raw", "Use tabs in this repo \u{1b}]0;pwned\u{7}"],
    );
    db.write("user:7", "editor", "vim", "repo:api-server", "thread:3");
    let found = as_array(db.json(&["suspects", "--json"]));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["record"]["subject"], "user:7");
    assert_eq!(found[0]["blast_radius"], json!(["repo:api-server"]));
    let text = db.run(&["suspects"]).ok().stdout;
    assert!(
        !text.contains('\u{1b}'),
        "the words print escaped: {text:?}"
    );
}

#[test]
fn a_sibling_counts_only_for_its_own_subject() {
    a_sibling_counts_only_for_its_own_subject_on(TestDb::new());
}

#[test]
fn a_sibling_counts_only_for_its_own_subject_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        a_sibling_counts_only_for_its_own_subject_on(db);
    }
}

/// One message wrote another subject's record into a repository: that is no evidence about
/// this subject's global rule (the write-time guard and the rescope dialog's suggestions look
/// at the subject's own records too). The subject's own record there is.
fn a_sibling_counts_only_for_its_own_subject_on(db: TestDb) {
    db.write(
        "用户:二",
        "install_command",
        "npm ci",
        "repo:中文仓库",
        "thread:9/msg:1",
    );
    db.write(
        "user:1",
        "package_manager",
        "pnpm 📦",
        "global",
        "thread:9/msg:1",
    );
    let found = as_array(db.json(&["suspects", "--json"]));
    assert!(found.is_empty(), "{found:#?}");
    db.write(
        "user:1",
        "install_command",
        "npm ci",
        "repo:中文仓库",
        "thread:9/msg:1",
    );
    let found = as_array(db.json(&["suspects", "--json"]));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["record"]["subject"], "user:1");
    assert_eq!(found[0]["suggested_scope"], "repo:中文仓库");
}

#[test]
fn a_message_about_several_places_points_at_none() {
    a_message_about_several_places_points_at_none_on(TestDb::new());
}

#[test]
fn a_message_about_several_places_points_at_none_on_postgres() {
    on_postgres(a_message_about_several_places_points_at_none_on);
}

/// Found by review: a message that wrote rules for two repositories and a global default made
/// the default a suspect, and its `fix:` moved it into the first repository. Siblings point at
/// a place only when they name no two places of one kind — two of them in one place still do,
/// and so do a repository's and a task's (where one message was said).
fn a_message_about_several_places_points_at_none_on(db: TestDb) {
    let msg = "thread:7/msg:3 💬";
    db.write("user:1", "editor", "helix", "global", msg);
    db.write("user:1", "test_runner", "jest", "repo:前端", msg);
    db.write("user:1", "test_runner", "pytest", "repo:backend", msg);
    let found = as_array(db.json(&["suspects", "--json"]));
    assert!(found.is_empty(), "{found:#?}");
    let text = db.run(&["suspects"]).ok().stdout;
    assert!(!text.contains("fix:"), "{text}");
    // The same message's rules all in one place point there.
    let one = "thread:7/msg:4";
    db.write("user:1", "formatter", "biome", "global", one);
    db.write("user:1", "linter", "oxlint", "repo:前端", one);
    db.write("user:1", "build_command", "vite build", "repo:前端", one);
    let found = as_array(db.json(&["suspects", "--json"]));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["record"]["predicate"], "formatter");
    assert_eq!(found[0]["suggested_scope"], "repo:前端");
    assert_eq!(
        found[0]["evidence"].as_array().unwrap().len(),
        2,
        "{found:#?}"
    );
    let here = "thread:7/msg:5";
    db.write("user:1", "shell", "fish 🐟", "global", here);
    db.write("user:1", "node_version", "16", "repo:后端", here);
    db.write("user:1", "retry_count", "3", "task:修复-42", here);
    let found = as_array(db.json(&["suspects", "--json"]));
    let shell = found
        .iter()
        .find(|s| s["record"]["predicate"] == "shell")
        .unwrap_or_else(|| panic!("{found:#?}"));
    assert_eq!(shell["suggested_scope"], "repo:后端", "{shell:#}");
    db.assert_check_ok();
}

#[test]
fn a_chinese_or_scope_written_place_name_makes_a_suspect() {
    a_chinese_or_scope_written_place_name_makes_a_suspect_on(TestDb::new());
}

#[test]
fn a_chinese_or_scope_written_place_name_makes_a_suspect_on_postgres() {
    on_postgres(a_chinese_or_scope_written_place_name_makes_a_suspect_on);
}

/// The scan names places by the write-time guard's rule (README, "memscope suspects"): a
/// Chinese id of two characters inside unspaced Chinese, a short id written as a scope; not a
/// short id bare.
fn a_chinese_or_scope_written_place_name_makes_a_suspect_on(db: TestDb) {
    for (n, place) in ["repo:后端服务", "repo:ab"].iter().enumerate() {
        db.write("user:9", "editor", "vim", place, &format!("m:{n}"));
    }
    for (predicate, raw) in [
        ("a", "后端服务用 yarn"),
        ("b", "repo:ab 固定用 node 18"),
        ("c", "ab testing 的结果记在周报里"),
    ] {
        db.write_with(
            ("user:7", predicate),
            "x",
            "global",
            &format!("s:{predicate}"),
            &["--raw", raw],
        );
    }
    let found = as_array(db.json(&["suspects", "--json"]));
    let mut got: Vec<(&str, &str)> = found
        .iter()
        .map(|f| {
            (
                f["record"]["predicate"].as_str().unwrap_or_default(),
                f["suggested_scope"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    got.sort_unstable();
    assert_eq!(
        got,
        [("a", "repo:后端服务"), ("b", "repo:ab")],
        "{found:#?}"
    );
}

/// A human's choice of `global` for a queued write is the answer the guard asked for: that
/// version is no suspect (list, `check`'s count); a later version is judged again.
#[test]
fn a_version_a_human_placed_in_global_is_no_suspect() {
    a_version_a_human_placed_in_global_is_no_suspect_on(TestDb::new());
}

#[test]
fn a_version_a_human_placed_in_global_is_no_suspect_on_postgres() {
    on_postgres(a_version_a_human_placed_in_global_is_no_suspect_on);
}

fn a_version_a_human_placed_in_global_is_no_suspect_on(db: TestDb) {
    let u = "用户:7";
    db.write(u, "test_runner", "jest", "task:修-1", "m:2");
    let q = db.write_with(
        (u, "lint"),
        "eslint 🧹",
        "global",
        "m:2",
        &["--in-task", "修-1"],
    );
    assert_eq!(q["outcome"], "pending", "{q:#}");
    let id = q["pending_id"].as_i64().unwrap().to_string();
    db.run(&["pending", "resolve", &id, "--scope", "global"])
        .ok();
    let listed = db.json(&["suspects", "--json"]);
    assert_eq!(listed, json!([]), "{listed:#}");
    assert_eq!(db.check().1["metrics"]["suspects"], 0);
    // The same message's next value for it, applied without a human (the guard off): a new
    // version, judged again.
    db.run(&["settings", "set", "scope_guard", "off"]).ok();
    db.write(u, "lint", "biome", "global", "m:2");
    let listed = db.json(&["suspects", "--json"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed:#}");
    assert_eq!(listed[0]["record"]["version"], 2);
}

/// A person's choice outlives a fix of a later suspect (found by review): moving the agent's
/// later value away brings the human's version back, and that is still no suspect — nor a
/// revert to it, nor a value a person moved into `global` with `rescope`. The choice's `set`
/// event carries no suspect mark. A revert to a version no person placed is judged again.
#[test]
fn a_human_placed_version_stays_placed_through_rescope_and_revert() {
    a_human_placed_version_stays_placed_on(TestDb::new());
}

#[test]
fn a_human_placed_version_stays_placed_through_rescope_and_revert_on_postgres() {
    on_postgres(a_human_placed_version_stays_placed_on);
}

fn a_human_placed_version_stays_placed_on(db: TestDb) {
    let u = "用户:8";
    let lint = (u, "lint");
    let suspects = |db: &TestDb| -> Vec<(Value, Value)> {
        as_array(db.json(&["suspects", "--json"]))
            .iter()
            .map(|s| (s["record"]["value"].clone(), s["record"]["version"].clone()))
            .collect()
    };
    let q = db.write_with(
        lint,
        "eslint 🧹",
        "global",
        "m:1",
        &["--raw", "这个仓库 uses eslint", "--in-repo", "web"],
    );
    assert_eq!(q["outcome"], "pending", "{q:#}");
    let id = q["pending_id"].as_i64().unwrap().to_string();
    db.run(&["pending", "resolve", &id, "--scope", "global"])
        .ok();
    let placed = db.history(u, "lint", Some("global"));
    assert_eq!(placed[0]["event"], "set", "{placed:#?}");
    assert_eq!(
        placed[0]["detail"],
        Value::Null,
        "a person's choice is not marked a suspect: {placed:#?}"
    );
    assert!(suspects(&db).is_empty());

    // An agent's later value, flagged; the suggested fix moves it away and brings v1 back.
    db.write_with(
        lint,
        "biome",
        "global",
        "m:3",
        &["--raw", "this repo uses biome"],
    );
    assert_eq!(suspects(&db), [(json!("biome"), json!(2))]);
    db.run(&args_for(
        "rescope",
        u,
        "lint",
        &["--scope", "global", "--to", "repo:web"],
    ))
    .ok();
    assert_eq!(
        db.resolve(u, "lint", &[])["value"],
        "eslint 🧹",
        "the human's value is back"
    );
    assert!(suspects(&db).is_empty(), "{:?}", suspects(&db));
    assert_eq!(db.check().1["metrics"]["suspects"], 0);

    // The agent writes again; a person reverts to the placed version: still no suspect.
    db.write_with(
        lint,
        "oxlint",
        "global",
        "m:4",
        &["--raw", "this repo uses oxlint"],
    );
    assert_eq!(suspects(&db).len(), 1);
    db.run(&args_for(
        "revert",
        u,
        "lint",
        &["--scope", "global", "--to-version", "3"],
    ))
    .ok();
    assert!(suspects(&db).is_empty(), "{:?}", suspects(&db));

    // A revert to the agent's own suspect version is judged again.
    db.run(&args_for(
        "revert",
        u,
        "lint",
        &["--scope", "global", "--to-version", "4"],
    ))
    .ok();
    assert_eq!(suspects(&db), [(json!("oxlint"), json!(6))]);

    // A value a person moves into global with rescope is their choice of global.
    db.write_with(
        (u, "formatter"),
        "prettier",
        "task:t-1",
        "m:5",
        &["--raw", "这个仓库 uses prettier"],
    );
    db.run(&args_for(
        "rescope",
        u,
        "formatter",
        &["--scope", "task:t-1", "--to", "global"],
    ))
    .ok();
    assert_eq!(
        suspects(&db),
        [(json!("oxlint"), json!(6))],
        "the moved formatter is no suspect"
    );
    db.assert_check_ok();
}

/// With the guard set to `flag`, a write said in a repository is applied and marked; its `set`
/// event keeps the place it was said in (which its words — "this repo" — do not name), so
/// `suspects` suggests it as the fix.
#[test]
fn a_flagged_write_keeps_the_place_it_was_said_in() {
    a_flagged_write_keeps_the_place_it_was_said_in_on(TestDb::new());
}

#[test]
fn a_flagged_write_keeps_the_place_it_was_said_in_on_postgres() {
    on_postgres(a_flagged_write_keeps_the_place_it_was_said_in_on);
}

fn a_flagged_write_keeps_the_place_it_was_said_in_on(db: TestDb) {
    db.write("v", "test_runner", "jest", "repo:web-app", "f:0");
    db.run(&["settings", "set", "scope_guard", "flag"]).ok();
    let out = db.write_with(
        ("v", "package_manager"),
        "yarn 🧶",
        "global",
        "f:1",
        &["--raw", "this repo uses yarn", "--in-repo", "Web-App"],
    );
    assert_eq!(out["outcome"], "inserted", "{out:#}");
    let found = as_array(db.json(&["suspects", "--json"]));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["suggested_scope"], "repo:web-app", "{found:#?}");
    let text = db.run(&["suspects"]).ok().stdout;
    assert!(
        text.contains("fix: memscope rescope --subject v --predicate package_manager --scope global --to repo:web-app"),
        "{text}"
    );
    let history = db.history("v", "package_manager", Some("global"));
    assert_eq!(history[0]["detail"]["places"], json!(["repo:web-app"]));
}

/// A suspect's reads are the reads of its version: reads of the value it replaced are not
/// damage it did (found by review: every read of the global identity was counted).
#[test]
fn a_suspect_counts_only_the_reads_of_its_own_version() {
    a_suspect_counts_only_the_reads_of_its_own_version_on(TestDb::new());
}

#[test]
fn a_suspect_counts_only_the_reads_of_its_own_version_on_postgres() {
    on_postgres(a_suspect_counts_only_the_reads_of_its_own_version_on);
}

fn a_suspect_counts_only_the_reads_of_its_own_version_on(db: TestDb) {
    db.write("u", "pm", "pnpm", "global", "s1");
    let read = |repo: &str| {
        db.run(&args_for(
            "resolve",
            "u",
            "pm",
            &["--repo", repo, "--log", "--agent", "x"],
        ))
        .ok();
    };
    for repo in ["a", "b", "c"] {
        read(repo);
    }
    db.write_with(
        ("u", "pm"),
        "npm",
        "global",
        "s2",
        &["--raw", "this repo keeps npm ci"],
    );
    read("d");
    let found = as_array(db.json(&["suspects", "--json"]));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["reads"], 1, "{:#}", found[0]);
    assert!(db
        .run(&["suspects"])
        .ok()
        .stdout
        .contains("1 logged read(s) got this global value"));
}

#[test]
fn many_messages_keep_their_own_siblings_in_stored_order() {
    many_messages_keep_their_own_siblings_in_stored_order_on(TestDb::new());
}

#[test]
fn many_messages_keep_their_own_siblings_in_stored_order_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        many_messages_keep_their_own_siblings_in_stored_order_on(db);
    }
}

/// The scan groups every scoped record by its message without a query per sibling: each global
/// record gets exactly its own subject's records of its own message, in the order they were
/// stored, however many messages share a subject or a source; `check`'s count is the list's.
fn many_messages_keep_their_own_siblings_in_stored_order_on(db: TestDb) {
    let mut lines = String::new();
    let mut line = |subject: &str, predicate: &str, scope: &str, source: &str| {
        lines.push_str(
            &json!({
                "subject": subject, "predicate": predicate, "value": "值 ✓",
                "scope": scope, "source": source,
            })
            .to_string(),
        );
        lines.push('\n');
    };
    for i in 0..40usize {
        let subject = format!("用户:{i}");
        // Every message shares one source; only even subjects wrote scoped records there, both
        // in one place (a message about several places points at none) and `test_command` first,
        // so stored order is not name order; odd ones elsewhere.
        let shared = "thread:1/msg:1";
        let own = if i % 2 == 0 {
            shared.to_string()
        } else {
            format!("thread:2/msg:{i}")
        };
        let place = format!("repo:仓库-{}", i % 3 + 2);
        line(&subject, "test_command", &place, &own);
        line(&subject, "install_command", &place, &own);
        line(&subject, "package_manager", "global", shared);
        // The same subject's global record of another message has no siblings.
        line(&subject, "editor", "global", "thread:3/msg:1");
        // A rule of its own in one repository (another message): out of the blast radius.
        if i.is_multiple_of(4) {
            line(&subject, "package_manager", "repo:仓库-1", "thread:4/msg:1");
        }
    }
    db.run_stdin(&["apply", "-"], lines.as_bytes()).ok();
    let found = as_array(db.json(&["suspects", "--json"]));
    assert_eq!(found.len(), 20, "{found:#?}");
    for s in &found {
        assert_eq!(s["record"]["predicate"], "package_manager", "{s:#}");
        let subject = s["record"]["subject"].as_str().unwrap();
        let i: usize = subject.trim_start_matches("用户:").parse().unwrap();
        assert_eq!(i % 2, 0, "{s:#}");
        let evidence: Vec<&str> = strs(&s["evidence"]);
        let place = format!("repo:仓库-{}", i % 3 + 2);
        assert_eq!(
            evidence,
            [
                format!("the same message wrote test_command in {place}"),
                format!("the same message wrote install_command in {place}"),
            ],
            "{s:#}"
        );
        assert_eq!(s["suggested_scope"], format!("repo:仓库-{}", i % 3 + 2));
        let radius = strs(&s["blast_radius"]);
        let own_rule = i.is_multiple_of(4);
        assert_eq!(radius.contains(&"repo:仓库-1"), !own_rule, "{s:#}");
        assert_eq!(radius.len(), if own_rule { 3 } else { 4 }, "{s:#}");
    }
    let (code, report) = db.check();
    assert_eq!(
        (code, &report["metrics"]["suspects"]),
        (0, &json!(20)),
        "{report:#}"
    );
}

#[test]
fn a_suspect_scan_that_cannot_read_leaves_the_check_whole() {
    a_suspect_scan_that_cannot_read_leaves_the_check_whole_on(TestDb::new());
}

#[test]
fn a_suspect_scan_that_cannot_read_leaves_the_check_whole_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        a_suspect_scan_that_cannot_read_leaves_the_check_whole_on(db);
    }
}

/// `check` counts suspects in its own snapshot: what a raw client wrote where the scan looks (a
/// suspect's pending resolution whose detail is not JSON) says nothing to it — the version is
/// not placed by that event, so it is still counted — and the report is whole, the unreadable
/// row named, rather than the check failing (on PostgreSQL a failed statement would abort the
/// report's transaction). `suspects` reads it the same way.
fn a_suspect_scan_that_cannot_read_leaves_the_check_whole_on(db: TestDb) {
    db.write(
        "用户:7",
        "install_command",
        "npm ci",
        "repo:旧仓库",
        "thread:1/msg:1",
    );
    db.write(
        "用户:7",
        "package_manager",
        "pnpm 📦",
        "global",
        "thread:1/msg:1",
    );
    assert_eq!(db.check().1["metrics"]["suspects"], 1);
    db.sql_execute(
        "INSERT INTO history (event, subject, predicate, scope, version, detail, at)
         SELECT 'pending_resolved', subject, predicate, scope, version, 'not json', at
         FROM history WHERE event = 'set' AND scope = 'global'",
    )
    .unwrap();
    let (code, report) = db.check();
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["metrics"]["suspects"], 1, "{report:#}");
    let violations = report["violations"].to_string();
    assert!(violations.contains("not readable JSON"), "{report:#}");
    assert_eq!(as_array(db.json(&["suspects", "--json"])).len(), 1);
}

/// The `fix:` line is a command to paste: every word of it is one shell word, the target scope
/// too — an agent can store a scope id holding `;`, `$` or `'` (found by review: pasting
/// `--to repo:x;touch${IFS}PWN` ran `touch`). bash reads the line back as exactly the argv meant.
#[test]
fn the_fix_line_pastes_as_the_command_it_names() {
    let db = TestDb::new();
    let target = "repo:x;touch${IFS}PWN$(id)'`仓库`";
    let subject = "用户:it's 🧪";
    db.write_with(
        (subject, "lint"),
        "eslint",
        "global",
        "thread:1",
        &["--raw", "this repo only"],
    );
    db.write(subject, "build", "make", target, "thread:1");
    let text = db.run(&["suspects"]).ok().stdout;
    let fix = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("fix: memscope "))
        .unwrap_or_else(|| panic!("a fix line: {text}"));
    let dir = tempfile::tempdir().unwrap();
    let argv = std::process::Command::new("bash")
        .current_dir(dir.path())
        .arg("-c")
        .arg(format!("printf '%s\\n' {fix}"))
        .output()
        .unwrap();
    assert!(argv.status.success(), "{argv:?}");
    assert_eq!(
        String::from_utf8(argv.stdout).unwrap(),
        [
            "rescope",
            "--subject",
            subject,
            "--predicate",
            "lint",
            "--scope",
            "global",
            "--to",
            target,
            ""
        ]
        .join("\n"),
        "{fix}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "pasting ran nothing"
    );
}

/// A suspect whose evidence names no place (its words say only "this repo", written without a
/// context) still gets a `fix:` line: the rescope, with the place for the person to put in
/// (found by an exploratory test: no `fix:` line and no next step).
#[test]
fn a_suspect_that_names_no_place_still_gets_its_fix_line() {
    let db = TestDb::new();
    db.write_with(
        ("user:5", "package_manager"),
        "npm",
        "global",
        "thread:9 💬",
        &[
            "--raw",
            "这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。",
        ],
    );
    let found = as_array(db.json(&["suspects", "--json"]));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["suggested_scope"], serde_json::Value::Null);
    let text = db.run(&["suspects"]).ok().stdout;
    assert!(
        text.contains("fix: memscope rescope --subject user:5 --predicate package_manager --scope global --to repo:ID")
            && text.contains("the words name no place"),
        "{text}"
    );
}
