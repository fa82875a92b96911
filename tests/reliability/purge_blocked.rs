//! A purge blocked by a reader (issue 5, README, "delete, restore, gc").
//!
//! A reader holding a read transaction during a delete blocks `wal_checkpoint(TRUNCATE)`. The
//! delete must still succeed, say the on-disk purge is pending (`DeleteReport.disk_purged ==
//! false`; the CLI says so on stderr and exits 0), record the debt (`purge_debt()` and `check`'s
//! `purge_debt_since`), while the canary bytes are still in the `-wal`. Once the reader lets go,
//! the next operation that can — a write, an open, or `gc` — pays it: the canary is in no
//! database file and the debt is cleared. Each payer is tested with a rusqlite reader against
//! the library and with a Python `sqlite3` reader against the CLI.
//!
//! Reproduce: `MEMSCOPE_ASSERT_INVARIANTS=1 cargo test --release --test reliability -- purge_blocked::`

use crate::support::reliability::*;
use crate::support::{args_for, PyHolder};
use memscope::{DeleteTarget, Identity, OpenMode, Scope, ScopeChoice, Store, WriteRequest};
use serde_json::json;
use std::io::Write;

#[derive(Debug, Clone, Copy)]
enum Payer {
    Write,
    Open,
    Gc,
}

struct Canary {
    value: String,
    raw: String,
}

impl Canary {
    fn new() -> Canary {
        Canary {
            value: unique("canary-value"),
            raw: unique("canary-raw-words"),
        }
    }

    fn needles(&self) -> [&str; 2] {
        [&self.value, &self.raw]
    }
}

/// Where each canary is found among the database files.
fn found(db: &Db, c: &Canary) -> Vec<(String, Vec<std::path::PathBuf>)> {
    c.needles()
        .iter()
        .map(|n| (n.to_string(), files_containing(&db.files(), n.as_bytes())))
        .filter(|(_, files)| !files.is_empty())
        .collect()
}

fn wal_holds(db: &Db, c: &Canary) -> bool {
    let wal = &db.files()[1];
    c.needles()
        .iter()
        .any(|n| files_containing(std::slice::from_ref(wal), n.as_bytes()).len() == 1)
}

fn debt_in_settings(db: &Db) -> Option<String> {
    db.sql()
        .query_row(
            "SELECT value FROM settings WHERE key = 'purge_debt_since'",
            [],
            |r| r.get(0),
        )
        .ok()
}

fn request(subject: &str, predicate: &str, value: &str, raw: Option<&str>) -> WriteRequest {
    WriteRequest {
        subject: subject.into(),
        predicate: predicate.into(),
        value: json!(value),
        scope: ScopeChoice::Exact(Scope::Global),
        source: "purge-test".into(),
        raw: raw.map(str::to_string),
        causal_seq: None,
        context: None,
    }
}

fn open(db: &Db) -> Store {
    let mut s = Store::open(&db.path, OpenMode::Create).unwrap();
    s.set_assert_invariants(true);
    s
}

/// Library: a rusqlite connection holds a read transaction across `Store::delete`.
fn library_round(payer: Payer) {
    let db = Db::new();
    let c = Canary::new();
    let mut store = open(&db);
    // A second, idle connection stays open throughout, so no connection's close checkpoints
    // the WAL on memscope's behalf: only the payer can.
    let bystander = open(&db);
    store
        .write(&request(
            "user:7",
            "package_manager",
            &c.value,
            Some(&c.raw),
        ))
        .unwrap();
    store
        .write(&request("user:7", "formatter", "biome", None))
        .unwrap();
    assert!(wal_holds(&db, &c), "setup: the canary is in the WAL");

    let reader = rusqlite::Connection::open(&db.path).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let n: i64 = query_one(&reader, "SELECT count(*) FROM history");
    assert!(n > 0);

    let report = store
        .delete(
            &DeleteTarget::Identity(Identity {
                subject: "user:7".into(),
                predicate: "package_manager".into(),
                scope: Scope::Global,
            }),
            Some("purge test"),
        )
        .unwrap();
    assert!(
        !report.disk_purged,
        "{payer:?}: the blocked purge is reported pending: {report:?}"
    );
    assert_eq!(report.tombstoned.len(), 1);
    assert!(
        store.purge_debt().unwrap().is_some(),
        "{payer:?}: debt recorded"
    );
    let check = store.check().unwrap();
    assert!(check.ok, "{:?}", check.violations);
    assert!(
        check.metrics["purge_debt_since"].is_string(),
        "{payer:?}: check reports the debt: {:?}",
        check.metrics
    );
    assert!(
        wal_holds(&db, &c),
        "{payer:?}: while the reader holds on, the canary is still in the -wal"
    );
    // Another write while the reader still holds on cannot pay it either.
    store
        .write(&request("user:7", "test_runner", "vitest", None))
        .unwrap();
    assert!(
        store.purge_debt().unwrap().is_some(),
        "{payer:?}: still owed"
    );

    reader.execute_batch("COMMIT").unwrap();
    drop(reader);
    let payer_store = match payer {
        Payer::Write => {
            store
                .write(&request("user:7", "formatter", "prettier", None))
                .unwrap();
            None
        }
        Payer::Open => Some(open(&db)),
        Payer::Gc => {
            let r = store.gc(None, None).unwrap();
            assert!(r.disk_purged, "{r:?}");
            None
        }
    };
    assert_eq!(
        found(&db, &c),
        vec![],
        "{payer:?}: after the reader let go and the next operation ran, the canary is in no file"
    );
    assert_eq!(store.purge_debt().unwrap(), None, "{payer:?}: debt cleared");
    let check = store.check().unwrap();
    assert!(check.ok, "{:?}", check.violations);
    assert!(check.metrics["purge_debt_since"].is_null());
    drop(payer_store);
    drop(bystander);
    drop(store);
    assert_eq!(found(&db, &c), vec![]);
}

/// A Python `sqlite3` reader driven line by line: `read` opens the file, `begin` starts and
/// holds a read transaction, `commit` ends it (the connection stays open), `quit` exits.
const PY_READER: &str = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
for cmd in sys.stdin:
    cmd = cmd.strip()
    if cmd == "read":
        c.execute("SELECT count(*) FROM sqlite_master").fetchone()
    elif cmd == "begin":
        c.execute("BEGIN")
        c.execute("SELECT count(*) FROM history").fetchone()
    elif cmd == "commit":
        c.execute("COMMIT")
    elif cmd == "quit":
        break
    print("OK", cmd, flush=True)
c.close()
"#;

/// The Python reader, told one command a line; it answers `OK <command>` to each.
struct PyReader(PyHolder);

impl PyReader {
    fn start(db: &Db) -> PyReader {
        PyReader(PyHolder::start(PY_READER, &db.path))
    }

    fn send(&mut self, cmd: &str) {
        self.0.say(cmd);
        assert_eq!(self.0.line().trim(), format!("OK {cmd}"), "python reader");
    }
}

impl Drop for PyReader {
    fn drop(&mut self) {
        if let Some(stdin) = self.0.child.stdin.as_mut() {
            let _ = writeln!(stdin, "quit");
        }
        let _ = self.0.child.wait();
    }
}

fn cli_round(payer: Payer) {
    if !python3() {
        eprintln!("SKIPPED: python3 with sqlite3 is not installed (.ci/run installs it)");
        return;
    }
    let db = Db::new();
    let c = Canary::new();
    db.init();
    let mut py = PyReader::start(&db);
    py.send("read"); // keeps the WAL from being checkpointed away when memscope exits
    let w = db.run(&args_for(
        "write",
        "user:9",
        "package_manager",
        &[
            "--value", &c.value, "--raw", &c.raw, "--scope", "repo:web", "--source", "thread:1",
        ],
    ));
    assert_eq!(w.code, 0, "{w:?}");
    assert!(wal_holds(&db, &c), "setup: the canary is in the WAL");

    py.send("begin");
    let d = db.run(&args_for(
        "delete",
        "user:9",
        "package_manager",
        &["--scope", "repo:web"],
    ));
    assert_eq!(d.code, 0, "{payer:?}: the delete itself succeeds: {d:?}");
    let lines: Vec<&str> = d.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one sentence on stderr: {:?}", d.stderr);
    assert!(
        lines[0].contains("pending"),
        "{payer:?}: the user is told the on-disk purge is pending: {:?}",
        d.stderr
    );
    assert!(debt_in_settings(&db).is_some(), "{payer:?}: debt recorded");
    let (code, report) = db.check();
    assert_eq!(code, 0, "{report:#}");
    assert!(
        report["metrics"]["purge_debt_since"].is_string(),
        "{payer:?}: check reports the debt: {report:#}"
    );
    assert!(
        wal_holds(&db, &c),
        "{payer:?}: while the reader holds on, the canary is still in the -wal"
    );

    py.send("commit"); // the reader lets go but stays connected
    match payer {
        Payer::Write => {
            let w = db.run(&args_for(
                "write",
                "user:9",
                "formatter",
                &[
                    "--value", "biome", "--scope", "global", "--source", "thread:2",
                ],
            ));
            assert_eq!(w.code, 0, "{w:?}");
        }
        Payer::Open => {
            let l = db.run(&["list", "--json"]);
            assert_eq!(l.code, 0, "{l:?}");
        }
        Payer::Gc => {
            let g = db.run(&["gc"]);
            assert_eq!(g.code, 0, "{g:?}");
            assert!(!g.stdout.contains("still pending"), "{g:?}");
        }
    }
    assert_eq!(
        found(&db, &c),
        vec![],
        "{payer:?}: after the reader let go and the next operation ran, the canary is in no file"
    );
    assert_eq!(debt_in_settings(&db), None, "{payer:?}: debt cleared");
    let report = db.assert_check_ok();
    assert!(
        report["metrics"]["purge_debt_since"].is_null(),
        "{report:#}"
    );
    drop(py);
    assert_eq!(found(&db, &c), vec![]);
}

// Each payer, through the library and through the CLI.

#[test]
fn blocked_purge_is_paid_by_the_next_write() {
    library_round(Payer::Write);
    cli_round(Payer::Write);
}

#[test]
fn blocked_purge_is_paid_by_the_next_open() {
    library_round(Payer::Open);
    cli_round(Payer::Open);
}

#[test]
fn blocked_purge_is_paid_by_gc() {
    library_round(Payer::Gc);
    cli_round(Payer::Gc);
}
