//! `export` / `import` between SQLite and PostgreSQL (issue 17), through the real binary: a
//! database moves from a file to a server and back with `check` clean, `list` and every
//! identity's history identical, and the dump itself unchanged by the round trip; an import
//! PostgreSQL refuses leaves the database as it was.

use super::postgres::{server, FreshDb};
use super::postgres_check::every_kind_of_write;
use super::postgres_write::req;
use memscope::store::{AnyStore, OpenMode};
use serde_json::{json, Value};
use std::path::Path;

/// The binary on `--db db args…`; panics with its stderr unless it succeeds.
fn run(db: &str, args: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let out = crate::support::memscope_cmd(home.path())
        .args(["--db", db])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?} on {db}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The binary on `--db db args…`, expected to fail: its stderr.
fn refused(db: &str, args: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let out = crate::support::memscope_cmd(home.path())
        .args(["--db", db])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?} on {db} should fail");
    String::from_utf8(out.stderr).unwrap()
}

/// A dump's rows, header aside, in a comparable order — the clock's setting included: both
/// backends export the clock as it stands (a file's settings row lags the clock its history
/// events record; its dump does not).
fn rows(dump: &Path) -> Vec<String> {
    let mut rows: Vec<String> = std::fs::read_to_string(dump)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["table"] != json!("memscope_export"))
        .map(|r| r.to_string())
        .collect();
    rows.sort();
    rows
}

/// What a reader sees: the current view and every identity's history, as JSON.
fn seen(db: &str) -> (Value, Vec<Value>) {
    let list: Value = serde_json::from_str(&run(db, &["list", "--json"])).unwrap();
    let mut histories = Vec::new();
    for r in list.as_array().unwrap() {
        let h = run(
            db,
            &[
                "history",
                "--subject",
                r["subject"].as_str().unwrap(),
                "--predicate",
                r["predicate"].as_str().unwrap(),
                "--scope",
                r["scope"].as_str().unwrap(),
                "--json",
            ],
        );
        histories.push(serde_json::from_str(&h).unwrap());
    }
    (list, histories)
}

#[test]
fn a_database_moves_from_a_file_to_postgres_and_back_unchanged() {
    let Some(server) = server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.db");
    let file = file.to_str().unwrap();
    {
        let mut store = AnyStore::open(Path::new(file), OpenMode::Create).unwrap();
        every_kind_of_write(&mut store);
        // Volume, and the read log with notes.
        for i in 0..300 {
            let w = req(
                &format!("user:{i}"),
                "编辑器",
                json!(format!("vim 🚀 {i}")),
                &format!("repo:项目-{}", i % 7),
                "bulk",
            );
            store.write(&w).unwrap();
        }
        // A place only a pending item's candidates name: the registry knows it all the same.
        store
            .write(
                &memscope::model::WriteRequest::from_json_line(
                    r#"{"subject":"user:0","predicate":"编辑器","value":"nano","scope":{"ambiguous":["global","repo:只在候选"]},"source":"asked"}"#,
                )
                .unwrap(),
            )
            .unwrap();
        for i in 0..20 {
            store
                .resolve_logged(
                    &format!("user:{i}"),
                    "编辑器",
                    Some(&format!("项目-{}", i % 7)),
                    None,
                    Some("agent-🤖"),
                    Some("为什么选这个"),
                )
                .unwrap();
        }
    }
    let first = dir.path().join("first.jsonl");
    run(file, &["export", "--out", first.to_str().unwrap()]);

    // Into PostgreSQL: a database with nothing in it yet, not even memscope's schema.
    let pg = FreshDb::new(&server);
    let said = run(&pg.url, &["import", first.to_str().unwrap()]);
    assert!(said.contains("check is clean"), "{said}");
    // It names the database, never the password.
    let password = server
        .split_once("://")
        .unwrap()
        .1
        .split_once('@')
        .unwrap()
        .0;
    let password = password.split_once(':').unwrap().1;
    assert!(!said.contains(password), "{said}");
    let report: Value = serde_json::from_str(&run(&pg.url, &["check", "--json"])).unwrap();
    assert_eq!(report["ok"], json!(true), "{report}");
    same(seen(&pg.url), seen(file), "PostgreSQL after the import");
    // The places and subjects the registry knows (the scope guard's and the suspects' places).
    let on_file: Vec<(String, String)> = {
        let c = rusqlite::Connection::open(file).unwrap();
        let mut st = c
            .prepare("SELECT kind, spelling FROM spellings ORDER BY kind, spelling")
            .unwrap();
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(Result::unwrap).collect()
    };
    let on_pg: Vec<(String, String)> = postgres::Client::connect(&pg.url, postgres::NoTls)
        .unwrap()
        .query(
            "SELECT kind, spelling FROM spellings ORDER BY kind COLLATE \"C\", spelling COLLATE \"C\"",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(
        on_file.contains(&("scope".into(), "repo:只在候选".into())),
        "{on_file:?}"
    );
    same(on_pg, on_file, "the spellings registry after the import");

    // Out of PostgreSQL: the same rows; into a new file: the same view, check clean.
    let second = dir.path().join("second.jsonl");
    run(&pg.url, &["export", "--out", second.to_str().unwrap()]);
    same(rows(&second), rows(&first), "the dump PostgreSQL writes");
    let again = dir.path().join("again.db");
    let again = again.to_str().unwrap();
    run(again, &["import", second.to_str().unwrap()]);
    same(seen(again), seen(file), "the file imported from PostgreSQL");
    let report: Value = serde_json::from_str(&run(again, &["check", "--json"])).unwrap();
    assert_eq!(report["ok"], json!(true), "{report}");

    // PostgreSQL's clock and ids go on after the dump's: a new write lands as on the file.
    let next = |db: &str| -> Value {
        serde_json::from_str(&run(
            db,
            &[
                "write",
                "--subject",
                "user:1",
                "--predicate",
                "编辑器",
                "--value",
                "helix",
                "--scope",
                "repo:项目-1",
                "--source",
                "after",
                "--json",
            ],
        ))
        .unwrap()
    };
    let (on_pg, on_file) = (next(&pg.url), next(file));
    assert_eq!(on_pg["outcome"], json!("superseded"), "{on_pg}");
    assert_eq!(
        (&on_pg["version"], &on_pg["causal_seq"]),
        (&on_file["version"], &on_file["causal_seq"])
    );
}

/// Asserts `a == b`, naming the first difference only (a dump is long).
fn same<T: PartialEq + std::fmt::Debug>(a: T, b: T, what: &str) {
    if a != b {
        let (a, b) = (format!("{a:?}"), format!("{b:?}"));
        let at = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
        let near = |s: &str| {
            s.chars()
                .skip(at.saturating_sub(80))
                .take(240)
                .collect::<String>()
        };
        panic!("{what} differs:\n  {}\n  {}", near(&a), near(&b));
    }
}

#[test]
fn an_import_postgres_refuses_leaves_the_database_as_it_was() {
    let Some(server) = server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.db");
    let file = file.to_str().unwrap();
    run(
        file,
        &[
            "write",
            "--subject",
            "user:42",
            "--predicate",
            "coffee",
            "--value",
            "燕麦拿铁",
            "--scope",
            "global",
            "--source",
            "t",
            "--json",
        ],
    );
    let dump = dir.path().join("dump.jsonl");
    run(file, &["export", "--out", dump.to_str().unwrap()]);
    let text = std::fs::read_to_string(&dump).unwrap();

    // A row the write path could never have written: named by its line, nothing imported.
    let (pg, _) = FreshDb::prepared(&server);
    let bad = dir.path().join("bad.jsonl");
    let line = text
        .lines()
        .position(|l| l.contains("\"table\":\"memories\""))
        .unwrap()
        + 1;
    std::fs::write(
        &bad,
        text.replace("\"subject\":\"user:42\"", "\"subject\":\"User:42 \""),
    )
    .unwrap();
    let said = refused(&pg.url, &["import", bad.to_str().unwrap()]);
    crate::support::assert_one_sentence(
        &said,
        &[
            &format!("line {line}"),
            "not in normal form",
            "nothing was imported",
        ],
    );
    assert_eq!(run(&pg.url, &["list", "--json"]).trim(), "[]");

    // A good import, then a second one into the same database: refused, the first kept.
    run(&pg.url, &["import", dump.to_str().unwrap()]);
    let before = seen(&pg.url);
    let said = refused(&pg.url, &["import", dump.to_str().unwrap()]);
    crate::support::assert_one_sentence(
        &said,
        &[
            "already holds 1 current memory and 1 history event",
            "empty database",
        ],
    );
    assert_eq!(seen(&pg.url), before);

    // Not a dump at all.
    let (empty, _) = FreshDb::prepared(&server);
    let junk = dir.path().join("junk.jsonl");
    std::fs::write(&junk, "{\"table\":\"memories\",\"subject\":\"x\"}\n").unwrap();
    let said = refused(&empty.url, &["import", junk.to_str().unwrap()]);
    crate::support::assert_one_sentence(&said, &["does not start with a memscope export header"]);
}

#[test]
fn a_database_begun_on_postgres_with_init_moves_to_a_file() {
    let Some(server) = server() else { return };
    let pg = FreshDb::new(&server);
    run(&pg.url, &["init"]);
    run(
        &pg.url,
        &[
            "write",
            "--subject",
            "用户:1",
            "--predicate",
            "editor",
            "--value",
            "helix 🧬",
            "--scope",
            "global",
            "--source",
            "s",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump.jsonl");
    run(&pg.url, &["export", "--out", dump.to_str().unwrap()]);
    let clocks = std::fs::read_to_string(&dump)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"causal_clock\""))
        .count();
    assert_eq!(clocks, 1, "one clock in the dump");
    let file = dir.path().join("moved.db");
    let file = file.to_str().unwrap();
    run(file, &["import", dump.to_str().unwrap()]);
    assert_eq!(seen(file), seen(&pg.url));
    run(file, &["check"]);
    // The clock came along: the next write on the file is causally after the moved one.
    let out = run(
        file,
        &[
            "write",
            "--subject",
            "用户:1",
            "--predicate",
            "editor",
            "--value",
            "vim",
            "--scope",
            "global",
            "--source",
            "s",
            "--json",
        ],
    );
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["outcome"], "superseded", "{out}");
    assert!(out["causal_seq"].as_i64().unwrap() > 1, "{out}");
}

/// The same commands on a file and on PostgreSQL give the same dump, times aside — including
/// the clock each history row records (docs/SCHEMA.md, `history.clock`: the clock as it stands
/// once the write took its number): a write with an older number of its own (`stale`, an
/// `apply` line, a pending item resolved later) leaves the clock where it was, on both.
#[test]
fn the_same_commands_give_the_same_dump_on_a_file_and_on_postgres() {
    let Some(server) = server() else { return };
    let pg = FreshDb::new(&server);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("same.db");
    let file = file.to_str().unwrap();
    let w = |db: &str, predicate: &str, value: &str, scope: &str, extra: &[&str]| {
        let mut args = vec![
            "write",
            "--subject",
            "用户:钟",
            "--predicate",
            predicate,
            "--value",
            value,
            "--source",
            "s",
        ];
        if scope.contains(',') {
            args.extend(["--ambiguous", scope]);
        } else {
            args.extend(["--scope", scope]);
        }
        args.extend_from_slice(extra);
        run(db, &args);
    };
    let mut dumps = Vec::new();
    for db in [file, pg.url.as_str()] {
        run(db, &["init"]);
        w(db, "p", "a 🕰", "global", &["--causal-seq", "5"]);
        w(db, "p", "b", "global", &["--causal-seq", "1"]); // stale
        w(db, "q", "x", "global,repo:钟楼", &["--causal-seq", "2"]); // pending, older
        w(db, "p", "c", "global", &[]); // the clock's next: 6
        let lines = "{\"subject\":\"用户:钟\",\"predicate\":\"r\",\"value\":\"y\",\"scope\":\"global\",\"source\":\"s\",\"causal_seq\":3}\n\
                     {\"subject\":\"用户:钟\",\"predicate\":\"r\",\"value\":\"z\",\"scope\":\"global\",\"source\":\"s\"}\n";
        let input = dir.path().join("lines.jsonl");
        std::fs::write(&input, lines).unwrap();
        run(db, &["apply", input.to_str().unwrap()]);
        run(db, &["pending", "resolve", "1", "--scope", "repo:钟楼"]);
        let dump = dir.path().join(format!("dump{}.jsonl", dumps.len()));
        run(db, &["export", "--out", dump.to_str().unwrap()]);
        let mut rows: Vec<String> = rows(&dump)
            .into_iter()
            .map(|r| {
                let mut v: Value = serde_json::from_str(&r).unwrap();
                for time in [
                    "at",
                    "created_at",
                    "updated_at",
                    "confirmed_at",
                    "resolved_at",
                    "added_at",
                    "deleted_at",
                    "first_seen",
                ] {
                    if let Some(o) = v.as_object_mut() {
                        o.remove(time);
                    }
                }
                v.to_string()
            })
            .collect();
        rows.sort();
        dumps.push(rows);
    }
    let clocks: Vec<&String> = dumps[0]
        .iter()
        .filter(|r| r.contains("\"stale\""))
        .collect();
    assert!(
        clocks.iter().all(|r| r.contains("\"clock\":5")),
        "a stale write leaves the clock at 5: {clocks:?}"
    );
    assert_eq!(dumps[0], dumps[1]);
}
