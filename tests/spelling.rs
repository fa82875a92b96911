//! Ids as a person reads them (issue #12, item 5, first part): a composed and a decomposed
//! spelling are one predicate, subject and scope id; look-alike dashes fold; an invisible or
//! direction-changing character in an id is refused with one sentence naming it and where it
//! stands — from the CLI and from MCP; `check` flags such ids stored another way and reports
//! subjects and scopes a reader could take for one another.

mod common;

use common::mcp_session::{tool_text, RawSession};
use common::*;
use serde_json::json;

const U: &str = "user:42";

#[test]
fn composed_and_decomposed_spellings_are_one_identity() {
    let db = TestDb::new();
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
    let db = TestDb::new();
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
    let r = db.resolve(U, "package_manager", Some("web\u{2011}app"), None);
    assert_eq!(r["scope"], "repo:web-app", "{r}");
}

#[test]
fn invisible_characters_in_ids_are_refused_naming_the_character() {
    let db = TestDb::new();
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
        let r = db.run(&[
            "write",
            "--subject",
            subject,
            "--predicate",
            predicate,
            "--value",
            "x",
            "--scope",
            scope,
            "--source",
            "t:1",
        ]);
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
    let db = TestDb::new();
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memscope"));
    cmd.current_dir(tmp.path())
        .env_remove("MEMSCOPE_DB")
        .env("HOME", tmp.path())
        .args(["--db", db.path_str(), "mcp", "--subject", U]);
    let mut s = RawSession::start(cmd);
    s.initialize();
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
    let db = TestDb::new();
    db.write(U, "editor", "helix", "repo:web-app", "t:1");
    db.write(U, "editor", "vim", "repo:web_app", "t:2");
    db.write("User:42", "editor", "emacs", "global", "t:3");
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
        json!([["User:42", "user:42"]])
    );

    // A raw client stores a decomposed predicate and an invisible subject: check says so.
    rusqlite::Connection::open(&db.path)
        .unwrap()
        .execute_batch(
            "UPDATE memories SET subject = 'u' || char(8203) WHERE subject = 'User:42';
             INSERT INTO reads (at, agent, subject, predicate) VALUES ('2026-01-01T00:00:00.000Z', 'a', 'user:42', 'cafe' || char(769));",
        )
        .unwrap();
    let (code, report) = db.check();
    assert_eq!(code, 1, "{report:#}");
    let details = report["violations"].to_string();
    assert!(details.contains("zero-width space"), "{details}");
    assert!(details.contains("reads.predicate"), "{details}");
}
