//! Ids as a person reads them (issue #12, item 5, first part): a composed and a decomposed
//! spelling are one predicate, subject and scope id; look-alike dashes fold; an invisible or
//! direction-changing character in an id is refused with one sentence naming it and where it
//! stands — from the CLI and from MCP; `check` flags such ids stored another way and reports
//! subjects and scopes a reader could take for one another. Subjects and repository/task ids
//! compare case-insensitively, stored in their first spelling (item 5, second part), and a
//! database written by the v3 release, which kept such spellings apart, is merged on open:
//! disagreeing values wait in the pending queue for a human. Each test runs on a SQLite file and
//! again on PostgreSQL (`…_on_postgres`), but the v3 file's merge on open, which is SQLite's.

use crate::support::mcp_session::{tool_text, RawSession};
use crate::support::*;
use serde_json::{json, Value};

const U: &str = "user:42";

#[test]
fn composed_and_decomposed_spellings_are_one_identity() {
    composed_and_decomposed_spellings_are_one_identity_on(TestDb::new());
}

#[test]
fn composed_and_decomposed_spellings_are_one_identity_on_postgres() {
    on_postgres(composed_and_decomposed_spellings_are_one_identity_on);
}

fn composed_and_decomposed_spellings_are_one_identity_on(db: TestDb) {
    let nfc = db.write(U, "café", "oat latte", "global", "t:1");
    assert_eq!(nfc["outcome"], "inserted");
    let nfd = db.write(U, "cafe\u{301}", "oat latte", "global", "t:2");
    assert_eq!(nfd["outcome"], "confirmed", "{nfd}");
    // Subjects and scope ids too.
    db.write("用户:小明", "editor", "helix", "repo:café-app", "t:3");
    let again = db.write(
        "用户:小明",
        "editor",
        "helix",
        "repo:cafe\u{301}-app",
        "t:4",
    );
    assert_eq!(again["outcome"], "confirmed", "{again}");
    assert_eq!(db.list(&[]).len(), 2);
    db.assert_check_ok();
}

#[test]
fn look_alike_dashes_fold_into_the_ascii_one() {
    look_alike_dashes_fold_into_the_ascii_one_on(TestDb::new());
}

#[test]
fn look_alike_dashes_fold_into_the_ascii_one_on_postgres() {
    on_postgres(look_alike_dashes_fold_into_the_ascii_one_on);
}

fn look_alike_dashes_fold_into_the_ascii_one_on(db: TestDb) {
    db.write(U, "package_manager", "npm", "repo:web-app", "t:1");
    for dash in ['\u{2011}', '\u{2013}', '\u{2212}', '\u{FF0D}'] {
        let out = db.write(
            U,
            "package_manager",
            "npm",
            &format!("repo:web{dash}app"),
            "t:2",
        );
        assert_eq!(out["outcome"], "confirmed", "{dash:?}: {out}");
        assert_eq!(out["scope"], "repo:web-app");
    }
    let out = db.write(U, "package_manager", "npm", "repo\u{FF1A}web-app", "t:3");
    assert_eq!(
        out["scope"], "repo:web-app",
        "a full-width colon reads as a colon"
    );
    // Reads take the same spelling: the repository's rule wins for a look-alike --repo.
    let r = db.resolve(U, "package_manager", &["--repo", "web\u{2011}app"]);
    assert_eq!(r["scope"], "repo:web-app", "{r}");
}

#[test]
fn invisible_characters_in_ids_are_refused_naming_the_character() {
    invisible_characters_in_ids_are_refused_naming_the_character_on(TestDb::new());
}

#[test]
fn invisible_characters_in_ids_are_refused_naming_the_character_on_postgres() {
    on_postgres(invisible_characters_in_ids_are_refused_naming_the_character_on);
}

fn invisible_characters_in_ids_are_refused_naming_the_character_on(db: TestDb) {
    db.init();
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            U,
            "pm\u{200B}",
            "global",
            &["zero-width space", "U+200B", "position 3"],
        ),
        (U, "\u{200B}", "global", &["zero-width space"]),
        (U, "\u{00AD}", "global", &["soft hyphen"]),
        (U, "\u{0301}", "global", &["lone combining mark"]),
        (
            "u\u{200B}",
            "editor",
            "global",
            &["subject", "zero-width space"],
        ),
        (
            "us\u{202E}er",
            "editor",
            "global",
            &["subject", "direction", "U+202E"],
        ),
        (U, "editor", "repo:web\u{2060}app", &["scope id", "U+2060"]),
    ];
    for (subject, predicate, scope, words) in cases {
        let r = db.run(&args_for(
            "write",
            subject,
            predicate,
            &["--value", "x", "--scope", scope, "--source", "t:1"],
        ));
        r.fails_with(2, words);
    }
    assert!(db.list(&[]).is_empty(), "nothing was written");
    // Emoji sequences keep their joiners.
    let family = "user:👨\u{200D}👩\u{200D}👧";
    assert_eq!(
        db.write(family, "editor", "helix", "global", "t:2")["outcome"],
        "inserted"
    );
}

#[test]
fn mcp_refuses_invisible_predicates_as_a_tool_error() {
    mcp_refuses_invisible_predicates_as_a_tool_error_on(TestDb::new());
}

#[test]
fn mcp_refuses_invisible_predicates_as_a_tool_error_on_postgres() {
    on_postgres(mcp_refuses_invisible_predicates_as_a_tool_error_on);
}

fn mcp_refuses_invisible_predicates_as_a_tool_error_on(db: TestDb) {
    let mut s = RawSession::serve(db.path_str(), &["--subject", U]);
    let r = s.request(
        2,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": "pm\u{200B}", "value": "npm", "scope": "global", "source": "t:1"}}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(tool_text(&r).contains("zero-width space"), "{r}");
    let r = s.request(
        3,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": "cafe\u{301}", "value": "oat latte", "scope": "global", "source": "t:1"}}),
    );
    assert_eq!(r["result"]["structuredContent"]["predicate"], "café", "{r}");
    let (code, _) = s.finish();
    assert_eq!(code, 0);
}

#[test]
fn check_flags_ids_stored_another_way_and_reports_look_alikes() {
    check_flags_ids_stored_another_way_and_reports_look_alikes_on(TestDb::new());
}

#[test]
fn check_flags_ids_stored_another_way_and_reports_look_alikes_on_postgres() {
    on_postgres(check_flags_ids_stored_another_way_and_reports_look_alikes_on);
}

fn check_flags_ids_stored_another_way_and_reports_look_alikes_on(db: TestDb) {
    db.write(U, "editor", "helix", "repo:web-app", "t:1");
    db.write(U, "editor", "vim", "repo:web_app", "t:2");
    db.write("user_42", "editor", "emacs", "global", "t:3");
    let (code, report) = db.check();
    assert_eq!(
        code, 0,
        "look-alikes are a health finding, not a violation: {report:#}"
    );
    assert_eq!(
        report["metrics"]["similar_scopes"],
        json!([["repo:web-app", "repo:web_app"]])
    );
    assert_eq!(
        report["metrics"]["similar_subjects"],
        json!([["user:42", "user_42"]])
    );

    // A raw client stores a decomposed predicate and an invisible subject: check says so.
    db.sql_execute(
        "UPDATE memories SET subject = 'u\u{200B}' WHERE subject = 'user_42';
         INSERT INTO reads (at, agent, subject, predicate) VALUES ('2026-01-01T00:00:00.000Z', 'a', 'user:42', 'cafe\u{301}');",
    )
    .unwrap();
    let (code, report) = db.check();
    assert_eq!(code, 1, "{report:#}");
    let details = report["violations"].to_string();
    assert!(details.contains("zero-width space"), "{details}");
    assert!(details.contains("reads.predicate"), "{details}");
}

#[test]
fn case_spellings_of_a_subject_and_a_place_are_one_identity() {
    case_spellings_of_a_subject_and_a_place_are_one_identity_on(TestDb::new());
}

#[test]
fn case_spellings_of_a_subject_and_a_place_are_one_identity_on_postgres() {
    on_postgres(case_spellings_of_a_subject_and_a_place_are_one_identity_on);
}

fn case_spellings_of_a_subject_and_a_place_are_one_identity_on(db: TestDb) {
    let first = db.write(U, "package_manager", "npm", "repo:Web-App", "thread:23");
    assert_eq!(first["outcome"], "inserted");
    db.write(U, "package_manager", "pnpm", "global", "thread:17");
    // The seed article's failure, by spelling: the repository's rule must win for `web-app`.
    for repo in ["web-app", "WEB-APP", "repo:web-app", "Web\u{2011}App"] {
        let r = db.resolve("USER:42", "package_manager", &["--repo", repo]);
        assert_eq!(r["scope"], "repo:Web-App", "--repo {repo}: {r}");
        assert_eq!(r["value"], "npm", "--repo {repo}: {r}");
        assert_eq!(r["subject"], U, "the first spelling is shown: {r}");
    }
    // A write in another spelling is the same identity: confirmed, kept as first spelled.
    let again = db.write(
        "User:42",
        "package_manager",
        "npm",
        "repo:WEB-APP",
        "thread:31",
    );
    assert_eq!(again["outcome"], "confirmed", "{again}");
    assert_eq!(again["scope"], "repo:Web-App");
    assert_eq!(again["subject"], U);
    let moved = db.write("ÜSER:42", "editor", "vim", "task:Fix-1", "t:9");
    assert_eq!(
        moved["subject"], "ÜSER:42",
        "a new subject keeps its own spelling"
    );
    let same = db.write("üser:42", "editor", "helix", "task:FIX-1", "t:10");
    assert_eq!(
        (&same["outcome"], &same["subject"], &same["scope"]),
        (
            &json!("superseded"),
            &json!("ÜSER:42"),
            &json!("task:Fix-1")
        ),
        "{same}"
    );
    assert_eq!(db.list(&[]).len(), 3, "{:#?}", db.list(&[]));
    // Every read takes any spelling.
    assert_eq!(db.list(&["--subject", "user:42"]).len(), 2);
    assert_eq!(db.list(&["--scope", "repo:web-app"]).len(), 1);
    assert_eq!(
        db.history("USER:42", "package_manager", Some("repo:web-app"))
            .len(),
        2
    );
    let ambiguous = db.run(&args_for(
        "write",
        U,
        "indent",
        &[
            "--value",
            "2",
            "--ambiguous",
            "repo:Web-App, repo:web-app",
            "--source",
            "t:11",
        ],
    ));
    ambiguous.fails_with(2, &["two distinct candidate scopes"]);
    // Delete and restore in another spelling reach the identity.
    db.json(&args_for(
        "delete",
        "USER:42",
        "package_manager",
        &["--scope", "repo:WEB-APP", "--yes", "--json"],
    ));
    let r = db.resolve(U, "package_manager", &["--repo", "web-app"]);
    assert_eq!(r["scope"], "global", "deleted, so global serves: {r}");
    let refused = db.write("User:42", "package_manager", "yarn", "repo:web-app", "t:12");
    assert_eq!(
        refused["outcome"], "rejected",
        "the tombstone holds for every spelling: {refused}"
    );
    db.json(&args_for(
        "restore",
        "user:42",
        "package_manager",
        &["--scope", "repo:web-APP", "--json"],
    ));
    assert_eq!(db.sql_i64("SELECT count(*) FROM tombstones"), 0);
    db.assert_check_ok();
}

#[test]
fn mcp_hosts_name_the_repository_in_any_case() {
    mcp_hosts_name_the_repository_in_any_case_on(TestDb::new());
}

#[test]
fn mcp_hosts_name_the_repository_in_any_case_on_postgres() {
    on_postgres(mcp_hosts_name_the_repository_in_any_case_on);
}

fn mcp_hosts_name_the_repository_in_any_case_on(db: TestDb) {
    db.write(U, "package_manager", "npm", "repo:Web-App", "thread:23");
    db.write(U, "package_manager", "pnpm", "global", "thread:17");
    let mut s = RawSession::serve(
        db.path_str(),
        &["--subject", "User:42", "--repo", "WEB-APP"],
    );
    let r = s.request(
        2,
        "tools/call",
        json!({"name": "recall", "arguments": {"predicate": "package_manager"}}),
    );
    let got = &r["result"]["structuredContent"];
    assert_eq!(got["scope"], "repo:Web-App", "{r}");
    assert_eq!(got["value"], "npm", "{r}");
    let r = s.request(
        3,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": "package_manager", "value": "npm", "scope": "repo", "source": "t:2"}}),
    );
    let out = &r["result"]["structuredContent"];
    assert_eq!(
        (&out["outcome"], &out["scope"], &out["subject"]),
        (&json!("confirmed"), &json!("repo:Web-App"), &json!(U)),
        "{r}"
    );
    let (code, _) = s.finish();
    assert_eq!(code, 0);
    assert_eq!(db.list(&[]).len(), 2);
    db.assert_check_ok();
}

/// A copy of the database the v3 release wrote (tests/fixtures/make_v3_spellings.sh).
fn v3_database() -> TestDb {
    let db = TestDb::new();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/v3_spellings.db"
    );
    std::fs::copy(fixture, &db.path).expect("copy the v3 fixture");
    db
}

/// What the merge must leave, whichever way the v3 data arrived (opened or imported).
#[track_caller]
fn assert_merged(db: &TestDb) {
    db.assert_check_ok();
    let list = db.list(&[]);
    let rows: Vec<String> = list
        .iter()
        .map(|r| {
            format!(
                "{} · {} @ {} = {}",
                r["subject"].as_str().unwrap(),
                r["predicate"].as_str().unwrap(),
                r["scope"].as_str().unwrap(),
                r["value"]
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            "user:42 · coffee @ global = \"燕麦拿铁 ☕\"",
            "user:42 · package_manager @ global = \"pnpm\"",
            "Ünïcode:Ärger · language @ global = \"de\"",
            "user:9 · shell @ repo:API = \"zsh\"",
            "user:42 · package_manager @ repo:Web-App = \"npm\"",
            "user:42 · test_runner @ task:Fix-1 = \"vitest\"",
        ],
        "one record per place, in the first spelling"
    );
    // The seed failure is gone: any spelling of the repository gets its rule.
    let r = db.resolve("USER:42", "package_manager", &["--repo", "web-app"]);
    assert_eq!(
        (&r["scope"], &r["value"]),
        (&json!("repo:Web-App"), &json!("npm")),
        "{r}"
    );
    // Two values of one memory wait for a human, each saying where it came from.
    let pending = db.pending(false);
    let merged: Vec<Value> = pending
        .iter()
        .filter(|p| p["merged_from"].is_string())
        .cloned()
        .collect();
    assert_eq!(
        project(&merged, &["merged_from", "value", "candidates"]),
        [
            json!(["User:42 · coffee @ global", "espresso", ["global"]]),
            json!(["user:9 · shell @ repo:api", "fish", ["repo:API"]]),
        ],
        "{pending:#?}"
    );
    // The ambiguous write queued under other spellings names the first ones now.
    let indent = pending
        .iter()
        .find(|p| p["predicate"] == "indentation")
        .expect("the indentation item");
    assert_eq!(
        (&indent["subject"], &indent["candidates"]),
        (&json!(U), &json!(["global", "repo:Web-App"]))
    );
    // The second spelling's events stay on the one identity, marked as merged.
    let events = events(&db.history(U, "package_manager", Some("repo:Web-App")));
    assert!(events.contains(&"merged".to_string()), "{events:?}");
    // Deletion wins over a live second spelling, and its words are gone from the file.
    let r = db.resolve(U, "editor", &[]);
    assert_eq!(r["found"], false, "{r}");
    assert_eq!(db.sql_i64("SELECT count(*) FROM tombstones"), 1);
    db.assert_not_stored("second-spelling-canary", "deleted content");
    // The read log names the places as they are stored now.
    let place = (
        db.sql_text("SELECT repo FROM reads"),
        db.sql_text("SELECT task FROM reads"),
    );
    assert_eq!(
        place,
        (Some("Web-App".to_string()), Some("Fix-1".to_string()))
    );
}

// SQLite only: a v3 file migrated on open (PostgreSQL's schema began after v3; its merge is the
// import through a file, `a_v3_export_goes_to_postgres_through_a_file`).
#[test]
fn a_v3_database_is_merged_on_open_and_conflicts_wait_for_a_human() {
    let db = v3_database();
    assert_eq!(db.sql_i64("PRAGMA user_version"), 3);
    assert_eq!(
        db.sql_i64(
            "SELECT count(*) FROM memories WHERE subject = 'User:42' OR scope = 'repo:web-app'"
        ),
        2,
        "the fixture holds the v3 release's second spellings"
    );
    assert_merged(&db);
    assert_eq!(
        db.sql_i64("PRAGMA user_version"),
        memscope::store::schema::SCHEMA_VERSION
    );
    // Resolving a conflict makes the other value current, even though it was written first.
    let pending = db.pending(false);
    let coffee = pending.iter().find(|p| p["predicate"] == "coffee").unwrap();
    let id = coffee["id"].to_string();
    let out = db.json(&["pending", "resolve", &id, "--json"]);
    assert_eq!(out["outcome"], "superseded", "{out}");
    let r = db.resolve("user:42", "coffee", &[]);
    assert_eq!(r["value"], "espresso");
    // Rejecting the other keeps the current value.
    let shell = pending.iter().find(|p| p["predicate"] == "shell").unwrap();
    db.json(&["pending", "reject", &shell["id"].to_string(), "--json"]);
    assert_eq!(
        db.resolve("user:9", "shell", &["--repo", "api"])["value"],
        "zsh"
    );
    db.assert_check_ok();
    // Opening again changes nothing.
    let before = db.fingerprint();
    db.assert_check_ok();
    assert_eq!(db.fingerprint(), before);
}

#[test]
fn a_v3_export_is_merged_on_import() {
    let db = TestDb::new();
    let dump = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/v3_spellings.jsonl"
    );
    db.run(&["import", dump]).ok();
    assert_merged(&db);
}

/// PostgreSQL's import does not merge spellings: it refuses a v3 export that spells a place
/// several ways in one sentence, importing nothing, and names the way through a file — which
/// this test then takes: into SQLite (merged), exported again, into PostgreSQL, merged the same.
/// (A v2 export whose places have one spelling each imports as it is: `transfer`'s test.)
#[test]
fn a_v3_export_goes_to_postgres_through_a_file() {
    on_postgres(|db| {
        let dump = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/v3_spellings.jsonl"
        );
        db.run(&["import", dump]).fails_with(
            1,
            &[
                "schema version 3",
                "import it into a SQLite file first",
                "nothing was imported",
            ],
        );
        assert_eq!(db.sql_i64("SELECT count(*) FROM history"), 0);
        let file = TestDb::new();
        file.run(&["import", dump]).ok();
        let moved = file.dir.path().join("merged.jsonl");
        file.run(&["export", "--out", moved.to_str().unwrap()]).ok();
        db.run(&["import", moved.to_str().unwrap()]).ok();
        assert_merged(&db);
    });
}

#[test]
fn check_names_a_second_spelling_written_around_memscope() {
    check_names_a_second_spelling_written_around_memscope_on(TestDb::new());
}

#[test]
fn check_names_a_second_spelling_written_around_memscope_on_postgres() {
    on_postgres(check_names_a_second_spelling_written_around_memscope_on);
}

fn check_names_a_second_spelling_written_around_memscope_on(db: TestDb) {
    db.write(U, "editor", "helix", "repo:Web-App", "t:1");
    db.write(U, "shell", "zsh", "global", "t:2");
    db.assert_check_ok();
    // A raw client copies rows in other spellings, past the spellings table.
    db.sql_execute(
        "INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
           SELECT 'USER:42', predicate, 'repo:web-app', value, version, source, causal_seq, created_at, updated_at FROM memories WHERE predicate = 'editor';",
    )
    .unwrap();
    let (code, report) = db.check();
    assert_eq!(code, 1, "{report:#}");
    let details = report["violations"].to_string();
    assert!(
        details.contains("subject is stored in 2 spellings"),
        "{details}"
    );
    assert!(
        details.contains("scope is stored in 2 spellings"),
        "{details}"
    );
}
