//! A causal clock set back around memscope while writers run (README, "check": a login's
//! `setval('memscope_clock', 1)` on PostgreSQL; on SQLite a raw client's `causal_clock` row):
//! three `memscope write` processes — or three `memscope apply` processes, each line of a batch
//! taking its number in one statement the `setval` may land inside — and two connections in this
//! process write new values to three shared identities, none bringing a number of its own, while
//! another connection sets the clock back again and again. No write is told `stale` — each moves the clock past what its
//! memory holds — and every answer is in history as told (event, version, value, causal number,
//! found by its writer's unique source); the versions told as new are contiguous per identity;
//! the current record is the highest version with its writer's value; after `init`, `check` is
//! clean (SQLite's integrity check too). On both backends.
//!
//! Reproduce: `cargo test --release --test reliability -- clock:: --nocapture`

use crate::support::reliability::*;
use crate::support::{on_postgres, open_any_store};
use memscope::{Scope, ScopeChoice, WriteRequest};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};

const PROCESSES: usize = 3;
const THREADS: usize = 2;
const ROUNDS: usize = 12;
const SUBJECT: &str = "user:时钟";

fn predicate(n: usize) -> String {
    format!("p{}", n % 3)
}

fn value(c: usize, n: usize) -> String {
    format!("v {c}·{n} 🕰️")
}

fn source(c: usize, n: usize) -> String {
    format!("writer:{c}/round:{n}")
}

/// How the three processes write.
#[derive(Clone, Copy)]
enum Processes {
    /// `memscope write`, one per round.
    Write,
    /// `memscope apply`, [`APPLY_RUNS`] runs of [`APPLY_LINES`] lines.
    Apply,
}

const APPLY_RUNS: usize = 6;
const APPLY_LINES: usize = 100;

/// Sets the causal clock back to 1 over one connection, held; whether it did.
fn set_clock_back(db: &Db) -> Box<dyn FnMut() -> bool + '_> {
    if db.is_postgres() {
        let mut client = postgres::Client::connect(db.path_str(), postgres::NoTls)
            .expect("the test database answers");
        Box::new(move || {
            client
                .batch_execute("SELECT setval('memscope_clock', 1)")
                .is_ok()
        })
    } else {
        let conn = rusqlite::Connection::open(&db.path).expect("open the database");
        Box::new(move || {
            conn.execute_batch("UPDATE settings SET value = '1' WHERE key = 'causal_clock'")
                .is_ok()
        })
    }
}

/// Every client's answers, each with its client and round.
fn write_all(db: &Db, how: Processes) -> Vec<(usize, usize, Value)> {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let setter = scope.spawn(|| {
            // One connection, held: a connection a `setval` would land too seldom inside the
            // one statement an `apply` batch takes its numbers in.
            let mut set_back = set_clock_back(db);
            let mut set = 0;
            while !done.load(Ordering::SeqCst) {
                // A locked SQLite file refuses now and then: the next try comes soon.
                if set_back() {
                    set += 1;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            set
        });
        let processes: Vec<_> = (0..PROCESSES)
            .map(|c| {
                scope.spawn(move || match how {
                    Processes::Write => (0..ROUNDS)
                        .map(|n| {
                            let run = db.run(&[
                                "write",
                                "--subject",
                                SUBJECT,
                                "--predicate",
                                &predicate(n),
                                "--scope",
                                "global",
                                "--value",
                                &value(c, n),
                                "--source",
                                &source(c, n),
                                "--json",
                            ]);
                            assert_eq!(run.code, 0, "writer {c} round {n}: {run:?}");
                            (c, n, run.json())
                        })
                        .collect::<Vec<_>>(),
                    Processes::Apply => (0..APPLY_RUNS)
                        .flat_map(|r| {
                            let rounds = r * APPLY_LINES..(r + 1) * APPLY_LINES;
                            let input: String = rounds
                                .clone()
                                .map(|n| {
                                    json!({
                                        "subject": SUBJECT,
                                        "predicate": predicate(n),
                                        "scope": "global",
                                        "value": value(c, n),
                                        "source": source(c, n),
                                    })
                                    .to_string()
                                        + "\n"
                                })
                                .collect();
                            let run = db.run_stdin(&["apply", "-"], input.as_bytes());
                            assert_eq!(run.code, 0, "apply {c} run {r}: {run:?}");
                            let answers = json_lines(&run.stdout);
                            assert_eq!(answers.len(), APPLY_LINES, "apply {c} run {r}");
                            rounds
                                .zip(answers)
                                .map(|(n, a)| (c, n, a))
                                .collect::<Vec<_>>()
                        })
                        .collect(),
                })
            })
            .collect();
        let threads: Vec<_> = (PROCESSES..PROCESSES + THREADS)
            .map(|c| {
                scope.spawn(move || {
                    let mut store = open_any_store(db);
                    store.set_user_setting("scope_guard", "off").unwrap();
                    (0..ROUNDS)
                        .map(|n| {
                            let req = WriteRequest {
                                subject: SUBJECT.into(),
                                predicate: predicate(n),
                                value: json!(value(c, n)),
                                scope: ScopeChoice::Exact(Scope::Global),
                                source: source(c, n),
                                raw: None,
                                causal_seq: None,
                                context: None,
                            };
                            let out = store
                                .write(&req)
                                .unwrap_or_else(|e| panic!("writer {c} round {n}: {e:#}"));
                            (c, n, serde_json::to_value(&out).unwrap())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let joined: Vec<_> = processes
            .into_iter()
            .chain(threads)
            .map(|h| h.join())
            .collect();
        done.store(true, Ordering::SeqCst);
        let set = setter.join().unwrap();
        assert!(set > 0, "the clock was set back");
        joined
            .into_iter()
            .flat_map(|j| j.unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

fn clock_set_back_while_writing(db: Db, how: Processes) {
    let told = write_all(&db, how);
    let per_process = match how {
        Processes::Write => ROUNDS,
        Processes::Apply => APPLY_RUNS * APPLY_LINES,
    };
    assert_eq!(told.len(), PROCESSES * per_process + THREADS * ROUNDS);
    let mut new_versions: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    let mut histories: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for p in (0..3).map(predicate) {
        let h = db
            .run(&[
                "history",
                "--subject",
                SUBJECT,
                "--predicate",
                &p,
                "--scope",
                "global",
                "--json",
            ])
            .ok()
            .json();
        histories.insert(p, h.as_array().unwrap().clone());
    }
    for (c, n, t) in &told {
        let (c, n) = (*c, *n);
        let outcome = t["outcome"].as_str().unwrap();
        assert!(
            matches!(outcome, "inserted" | "superseded"),
            "writer {c} round {n} was told {outcome}: {t}"
        );
        let p = predicate(n);
        let version = t["version"].as_i64().unwrap();
        assert!(
            new_versions.entry(p.clone()).or_default().insert(version),
            "v{version} of {p} told as new twice"
        );
        let src = source(c, n);
        let event = histories[&p]
            .iter()
            .find(|e| e["source"] == json!(src))
            .unwrap_or_else(|| panic!("writer {c} round {n} was told {outcome}; no event"));
        assert_eq!(
            (
                &event["event"],
                &event["version"],
                &event["value"],
                &event["causal_seq"]
            ),
            (&json!("set"), &t["version"], &t["value"], &t["causal_seq"]),
            "writer {c} round {n}"
        );
    }
    for (p, versions) in &new_versions {
        let n = versions.len() as i64;
        assert_eq!(*versions, (1..=n).collect::<BTreeSet<i64>>(), "{p}");
        let current = db
            .run(&["resolve", "--subject", SUBJECT, "--predicate", p, "--json"])
            .ok()
            .json();
        assert_eq!(current["version"], json!(n), "{current}");
        let set = histories[p]
            .iter()
            .find(|e| e["event"] == "set" && e["version"] == json!(n))
            .unwrap();
        assert_eq!(current["value"], set["value"], "{current}");
    }
    // The clock may stand set back at the end: `init` moves it past every stored number.
    db.run(&["init"]).ok();
    let report = db.assert_check_ok();
    if !db.is_postgres() {
        assert_eq!(report["integrity"]["ok"], true, "{report:#}");
    }
}

#[test]
fn writers_are_never_stale_while_the_clock_is_set_back() {
    let db = Db::new();
    db.init();
    db.run(&["settings", "set", "scope_guard", "off"]).ok();
    clock_set_back_while_writing(db, Processes::Write);
}

#[test]
fn apply_runs_are_never_stale_while_the_clock_is_set_back() {
    let db = Db::new();
    db.init();
    db.run(&["settings", "set", "scope_guard", "off"]).ok();
    clock_set_back_while_writing(db, Processes::Apply);
}

#[test]
fn writers_are_never_stale_while_the_clock_is_set_back_on_postgres() {
    on_postgres(|db| {
        db.run(&["settings", "set", "scope_guard", "off"]).ok();
        clock_set_back_while_writing(db, Processes::Write)
    });
}

#[test]
fn apply_runs_are_never_stale_while_the_clock_is_set_back_on_postgres() {
    on_postgres(|db| {
        db.run(&["settings", "set", "scope_guard", "off"]).ok();
        clock_set_back_while_writing(db, Processes::Apply)
    });
}
