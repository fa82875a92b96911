//! Foreign clients (issue 5, docs/SCHEMA.md): a Python `sqlite3` writer hammers the shared database
//! beside memscope's own writers, trying every raw-SQL shortcut around the write path. The
//! shortcuts docs/SCHEMA.md says the schema itself must stop (a second current record, anything
//! current or any content on a tombstoned identity, a tombstone that does not cover its
//! identity, rewriting or deleting history) must fail every time; memscope's writers meanwhile
//! never surface a busy error and `check` stays clean. Then, with the guards out of the way
//! (triggers dropped, the purge gate spoofed, or plain SQL the schema allows), each kind of
//! damage a client can do is done to a copy of the database and `check` must find it (exit 1,
//! naming the broken invariant).
//!
//! `MEMSCOPE_FOREIGN_SECS` (default 6) sets how long the hammer runs.
//!
//! Reproduce: `MEMSCOPE_ASSERT_INVARIANTS=1 cargo test --release --test reliability -- foreign:: --nocapture`

use crate::support::args_for;
use crate::support::reliability::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const COLS: &str =
    "(subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)";
const HCOLS: &str =
    "(event, subject, predicate, scope, version, value, raw, source, causal_seq, at)";

/// user:42 · package_manager @ global: "pnpm" v1 → "npm" v2 (live, the raw words on v1);
/// user:42 · package_manager @ repo:legacy: written then deleted (tombstone v2);
/// user:43 · formatter @ global: written then deleted (tombstone v2);
/// user:42 · formatter @ repo:web: "prettier" v1; user:42 · test_runner @ global: "vitest" v1.
fn base(dir: &Path) -> Db {
    let db = Db::at(dir.join("base.db"));
    db.init();
    let w = |s: &str, p: &str, v: &str, scope: &str, extra: &[&str]| {
        let mut args = args_for(
            "write",
            s,
            p,
            &["--value", v, "--scope", scope, "--source", "thread:1"],
        );
        args.extend_from_slice(extra);
        let r = db.run(&args);
        assert_eq!(r.code, 0, "{r:?}");
    };
    w(
        "user:42",
        "package_manager",
        "pnpm",
        "global",
        &["--raw", "以后新建前端项目，默认用 pnpm。"],
    );
    w("user:42", "package_manager", "npm", "global", &[]);
    w("user:42", "package_manager", "npm", "repo:legacy", &[]);
    w("user:43", "formatter", "biome", "global", &[]);
    w("user:42", "formatter", "prettier", "repo:web", &[]);
    w("user:42", "test_runner", "vitest", "global", &[]);
    for (s, p, scope) in [
        ("user:42", "package_manager", "repo:legacy"),
        ("user:43", "formatter", "global"),
    ] {
        let r = db.run(&args_for("delete", s, p, &["--scope", scope]));
        assert_eq!(r.code, 0, "{r:?}");
    }
    db.assert_check_ok();
    db
}

/// The shortcuts docs/SCHEMA.md says the schema must refuse: (name, SQL).
fn must_refuse() -> Vec<(&'static str, String)> {
    let a = "'user:42', 'package_manager', 'global'";
    let t = "'user:42', 'package_manager', 'repo:legacy'";
    vec![
        ("second current record", format!("INSERT INTO memories {COLS} VALUES ({a}, '\"yarn\"', 3, 'py', 99, 't', 't')")),
        ("insert on a tombstoned identity", format!("INSERT INTO memories {COLS} VALUES ({t}, '\"npm\"', 3, 'py', 99, 't', 't')")),
        ("insert or replace on a tombstoned identity", format!("INSERT OR REPLACE INTO memories {COLS} VALUES ({t}, '\"npm\"', 3, 'py', 99, 't', 't')")),
        ("move a record onto a tombstone", "UPDATE memories SET scope = 'repo:legacy' WHERE subject = 'user:42' AND predicate = 'package_manager' AND scope = 'global'".into()),
        ("rename a record onto a tombstone", "UPDATE memories SET subject = 'user:43', predicate = 'formatter', scope = 'global' WHERE subject = 'user:42' AND predicate = 'test_runner'".into()),
        ("upsert onto a tombstone", format!("INSERT INTO memories {COLS} VALUES ({a}, '\"yarn\"', 3, 'py', 99, 't', 't') ON CONFLICT DO UPDATE SET scope = 'repo:legacy'")),
        ("content logged on a tombstoned identity", format!("INSERT INTO history {HCOLS} VALUES ('stale', {t}, NULL, '\"npm\"', NULL, 'py', 99, 't')")),
        ("raw words logged on a tombstoned identity", format!("INSERT INTO history {HCOLS} VALUES ('confirmed', {t}, 2, NULL, 'npm please', 'py', 99, 't')")),
        ("rewrite a history value", "UPDATE history SET value = '\"hacked\"' WHERE event = 'set'".into()),
        ("blank the raw words in history", "UPDATE history SET raw = NULL".into()),
        ("delete a history row", "DELETE FROM history WHERE id = (SELECT min(id) FROM history)".into()),
        ("delete all history", "DELETE FROM history".into()),
        ("replace a history row in place", "INSERT OR REPLACE INTO history (id, event, subject, predicate, scope, version, value, raw, source, causal_seq, at) SELECT id, event, subject, predicate, scope, version, '\"hacked\"', NULL, source, causal_seq, at FROM history WHERE id = (SELECT min(id) FROM history)".into()),
        ("tombstone a live identity", format!("INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at) VALUES ({a}, 9, 'py', 't')")),
        ("lower a tombstone below its versions", "UPDATE tombstones SET version = 1 WHERE subject = 'user:42' AND predicate = 'package_manager' AND scope = 'repo:legacy'".into()),
    ]
}

/// Tries each statement in a write transaction (`BEGIN IMMEDIATE`), rolling back whatever
/// lands, in a loop for argv[3] seconds. Prints {name: {refused, landed, locked, sample}}.
const HAMMER: &str = r#"
import sqlite3, sys, json, time
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
shortcuts = json.loads(sys.argv[2])
deadline = time.time() + float(sys.argv[3])
res = {name: {"refused": 0, "landed": 0, "locked": 0, "sample": ""} for name, _ in shortcuts}
while time.time() < deadline:
    for name, sql in shortcuts:
        r = res[name]
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            r["locked"] += 1
            continue
        try:
            c.execute(sql)
            r["landed"] += 1
        except sqlite3.Error as e:
            msg = str(e)
            if "locked" in msg or "busy" in msg:
                r["locked"] += 1
            else:
                r["refused"] += 1
                r["sample"] = type(e).__name__ + ": " + msg
        finally:
            c.execute("ROLLBACK")
print(json.dumps(res, ensure_ascii=False))
"#;

/// Applies argv[2] (a JSON list of statements) in one transaction after the chosen way around
/// the guards: argv[3] is "plain", "drop_triggers" or "spoof_gate" (a function named like
/// memscope's purge gate, registered by this client, that always opens it).
const DAMAGE: &str = r#"
import sqlite3, sys, json
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
mode = sys.argv[3]
if mode == "spoof_gate":
    c.create_function("memscope_purge_gate", 0, lambda: 1)
if mode == "drop_triggers":
    for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute('DROP TRIGGER "%s"' % n)
c.execute("BEGIN IMMEDIATE")
for sql in json.loads(sys.argv[2]):
    c.execute(sql)
c.execute("COMMIT")
c.close()
print("OK")
"#;

fn python(args: &[&str]) -> Run {
    Run::from_output(
        Command::new("python3")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("python3"),
    )
}

#[test]
fn a_python_writer_hammering_raw_sql_shortcuts_is_refused_every_time() {
    if !python3() {
        eprintln!("SKIPPED: python3 with sqlite3 is not installed (.ci/run installs it)");
        return;
    }
    let secs = env_u64("MEMSCOPE_FOREIGN_SECS", 6);
    let work = tempfile::tempdir().unwrap();
    let db = Arc::new(base(work.path()));
    let shortcuts = must_refuse();
    let list: Vec<Value> = shortcuts.iter().map(|(n, s)| json!([n, s])).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let writes = Arc::new(Mutex::new(0u64));

    // memscope's own writers, beside the hammer.
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (db, stop, failures, writes) =
                (db.clone(), stop.clone(), failures.clone(), writes.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let lines: String = (0..3)
                        .map(|i| {
                            format!(
                                "{}\n",
                                json!({"subject": format!("user:w{w}"), "predicate": format!("p{}", (n + i) % 4),
                                       "value": format!("v{}", n % 5), "scope": if i == 0 { "global" } else { "repo:web" },
                                       "source": format!("w{w}:{n}:{i}")})
                            )
                        })
                        .collect();
                    let r = db.run_stdin(&["apply", "-"], lines.as_bytes());
                    let mut f = failures.lock().unwrap();
                    if r.code != 0 {
                        f.push(format!("memscope writer {w}: apply exited {}: {}", r.code, r.stderr));
                    }
                    *writes.lock().unwrap() += 3;
                    if n.is_multiple_of(7) {
                        let subject = format!("user:w{w}");
                        let d = db.run(&args_for("delete", &subject, "p0", &["--scope", "global"]));
                        let r = db.run(&args_for("restore", &subject, "p0", &["--scope", "global"]));
                        for (what, run) in [("delete", d), ("restore", r)] {
                            if run.code != 0 && !run.stderr.contains("there is no memory") && !run.stderr.contains("is not deleted") {
                                f.push(format!("memscope writer {w}: {what} exited {}: {}", run.code, run.stderr));
                            }
                        }
                    }
                }
            })
        })
        .collect();

    let hammer = python(&[
        "-c",
        HAMMER,
        db.path.to_str().unwrap(),
        &Value::Array(list).to_string(),
        &secs.to_string(),
    ]);
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(hammer.code, 0, "python hammer: {}", hammer.stderr);
    let res: BTreeMap<String, Value> = serde_json::from_str(hammer.stdout.trim()).unwrap();
    let mut landed = Vec::new();
    let mut attempts = 0;
    for (name, r) in &res {
        let (refused, got_in, locked) = (
            r["refused"].as_u64().unwrap(),
            r["landed"].as_u64().unwrap(),
            r["locked"].as_u64().unwrap(),
        );
        attempts += refused + got_in;
        eprintln!(
            "foreign: {name:<45} refused {refused:>5}  landed {got_in:>5}  locked {locked:>3}  {}",
            r["sample"].as_str().unwrap_or("")
        );
        assert!(refused + got_in > 0, "{name}: never attempted");
        if got_in > 0 {
            landed.push(name.clone());
        }
    }
    let failures = failures.lock().unwrap().clone();
    let report = db.assert_check_ok();
    eprintln!(
        "foreign: {attempts} raw-SQL attempts over {secs} s beside {} memscope writes; {} shortcut kind(s) got through; busy_retries {}",
        writes.lock().unwrap(),
        landed.len(),
        report["metrics"]["busy_retries"]
    );
    assert!(failures.is_empty(), "memscope's writers: {failures:#?}");
    assert!(
        landed.is_empty(),
        "raw-SQL shortcuts the schema must refuse (docs/SCHEMA.md) got through: {landed:?}"
    );
}

/// Damage a raw client can do once it is past the guards (or where the schema allows it), and
/// the invariant(s) `check` must name for it.
fn damages() -> Vec<(&'static str, &'static str, Vec<String>, &'static [u8])> {
    let a = "subject = 'user:42' AND predicate = 'package_manager' AND scope = 'global'";
    let t = "subject = 'user:42' AND predicate = 'package_manager' AND scope = 'repo:legacy'";
    let s = |x: &str| x.to_string();
    vec![
        ("resurrect a tombstoned identity", "drop_triggers",
         vec![format!("INSERT INTO memories {COLS} VALUES ('user:42', 'package_manager', 'repo:legacy', '\"npm\"', 3, 'py', 99, 't', 't')")], &[3]),
        ("log content on a tombstoned identity", "drop_triggers",
         vec![format!("INSERT INTO history {HCOLS} VALUES ('stale', 'user:42', 'package_manager', 'repo:legacy', NULL, '\"npm\"', 'npm!', 'py', 99, 't')")], &[3]),
        ("rewrite the current version's value in history", "spoof_gate",
         vec![format!("UPDATE history SET value = '\"hacked\"' WHERE {a} AND event = 'set' AND version = 2")], &[4]),
        ("delete an identity's history", "spoof_gate", vec![format!("DELETE FROM history WHERE {a}")], &[4]),
        ("renumber a version in history", "spoof_gate",
         vec![format!("UPDATE history SET version = 5 WHERE {a} AND event = 'set' AND version = 1")], &[5, 4]),
        ("reorder causal_seq in history", "spoof_gate",
         vec![format!("UPDATE history SET causal_seq = 1000 WHERE {a} AND event = 'set' AND version = 1")], &[2]),
        ("delete the deletion record", "spoof_gate", vec![format!("DELETE FROM history WHERE {t}")], &[3, 5]),
        ("tamper with a current value", "plain", vec![format!("UPDATE memories SET value = '\"tampered\"' WHERE {a}")], &[4]),
        ("bump a current version", "plain", vec![format!("UPDATE memories SET version = version + 3 WHERE {a}")], &[4, 5]),
        ("lower a current causal_seq", "plain", vec![format!("UPDATE memories SET causal_seq = 0 WHERE {a}")], &[2, 4]),
        ("replace a current record in place", "plain",
         vec![format!("INSERT OR REPLACE INTO memories {COLS} VALUES ('user:42', 'package_manager', 'global', '\"yarn\"', 2, 'py', 2, 't', 't')")], &[4]),
        ("drop a current record", "plain", vec![format!("DELETE FROM memories WHERE {a}")], &[4]),
        ("log an event kind memscope never writes", "plain",
         vec![format!("INSERT INTO history {HCOLS} VALUES ('zap', 'user:z', 'p', 'global', 1, '\"x\"', NULL, 'py', 1, 't')")], &[4]),
        ("make a live predicate an alias", "plain",
         vec![s("INSERT INTO predicate_aliases (alias, canonical, added_at) VALUES ('package_manager', 'pm_tool', 't')")], &[6]),
        ("store a predicate not in normal form", "drop_triggers",
         vec![format!("UPDATE memories SET predicate = 'Package Manager' WHERE {a}"),
              format!("UPDATE history SET predicate = 'Package Manager' WHERE {a}")], &[6]),
        ("a second record under an alias spelling", "plain",
         vec![format!("INSERT INTO memories {COLS} VALUES ('user:42', 'pkg_manager', 'global', '\"yarn\"', 1, 'py', 50, 't', 't')"),
              format!("INSERT INTO history {HCOLS} VALUES ('set', 'user:42', 'pkg_manager', 'global', 1, '\"yarn\"', NULL, 'py', 50, 't')")], &[1, 6]),
        ("a second record under another spelling of the scope", "plain",
         vec![format!("INSERT INTO memories {COLS} VALUES ('user:42', 'formatter', 'repo:web ', '\"biome\"', 1, 'py', 50, 't', 't')"),
              format!("INSERT INTO history {HCOLS} VALUES ('set', 'user:42', 'formatter', 'repo:web ', 1, '\"biome\"', NULL, 'py', 50, 't')")], &[1]),
        ("a tombstone over a live record", "drop_triggers",
         vec![format!("INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at) VALUES ('user:42', 'package_manager', 'global', 9, 'py', 't')")], &[3]),
        ("a tombstone below its versions", "drop_triggers", vec![format!("UPDATE tombstones SET version = 1 WHERE {t}")], &[3]),
        ("lift a tombstone and resurrect without restore", "plain",
         vec![format!("DELETE FROM tombstones WHERE {t}"),
              format!("INSERT INTO memories {COLS} VALUES ('user:42', 'package_manager', 'repo:legacy', '\"npm\"', 3, 'py', 99, 't', 't')"),
              format!("INSERT INTO history {HCOLS} VALUES ('set', 'user:42', 'package_manager', 'repo:legacy', 3, '\"npm\"', NULL, 'py', 99, 't')")], &[3]),
    ]
}

#[test]
fn whatever_damage_a_foreign_client_manages_check_finds() {
    if !python3() {
        eprintln!("SKIPPED: python3 with sqlite3 is not installed (.ci/run installs it)");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let base = base(work.path());
    let mut missed = Vec::new();
    for (i, (name, mode, sql, invariants)) in damages().into_iter().enumerate() {
        let db = Db::at(work.path().join(format!("damage{i}.db")));
        for (a, b) in base.files().iter().zip(db.files().iter()) {
            if a.exists() {
                std::fs::copy(a, b).unwrap();
            }
        }
        let r = python(&[
            "-c",
            DAMAGE,
            db.path.to_str().unwrap(),
            &json!(sql).to_string(),
            mode,
        ]);
        assert_eq!(r.code, 0, "{name}: the damage itself failed: {}", r.stderr);
        let (code, report) = db.check();
        let found: Vec<u64> = report["violations"]
            .as_array()
            .map(|v| v.iter().filter_map(|x| x["invariant"].as_u64()).collect())
            .unwrap_or_default();
        let named = invariants.iter().any(|n| found.contains(&u64::from(*n)));
        eprintln!(
            "foreign damage: {name:<50} ({mode:<13}) check exit {code}, invariants {found:?}{}",
            if code == 1 && named {
                ""
            } else {
                "  <-- NOT FOUND"
            }
        );
        if code != 1 || !named {
            missed.push(format!(
                "{name} ({mode}): check exited {code} naming {found:?}, expected invariant {invariants:?}"
            ));
        }
    }
    assert!(
        missed.is_empty(),
        "check did not find {} kind(s) of damage:\n{}",
        missed.len(),
        missed.join("\n")
    );
}
