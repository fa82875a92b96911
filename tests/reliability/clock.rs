//! A causal clock set back around memscope while writers run (README, "check": a login's
//! `setval('memscope_clock', 1)` on PostgreSQL; on SQLite a raw client's `causal_clock` row):
//! three `memscope write` processes and two connections in this process write new values to
//! three shared identities, none bringing a number of its own, while another connection sets the
//! clock back again and again. No write is told `stale` — each moves the clock past what its
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

fn write_all(db: &Db) -> Vec<Value> {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let setter = scope.spawn(|| {
            let mut set = 0;
            while !done.load(Ordering::SeqCst) {
                let sql = if db.is_postgres() {
                    "SELECT setval('memscope_clock', 1)"
                } else {
                    "UPDATE settings SET value = '1' WHERE key = 'causal_clock'"
                };
                // A locked SQLite file refuses now and then: the next try comes soon.
                if db.sql_execute(sql).is_ok() {
                    set += 1;
                }
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
            set
        });
        let processes: Vec<_> = (0..PROCESSES)
            .map(|c| {
                scope.spawn(move || {
                    (0..ROUNDS)
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
                            run.json()
                        })
                        .collect::<Vec<Value>>()
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
                            serde_json::to_value(&out).unwrap()
                        })
                        .collect::<Vec<Value>>()
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

fn clock_set_back_while_writing(db: Db) {
    let told = write_all(&db);
    assert_eq!(told.len(), (PROCESSES + THREADS) * ROUNDS);
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
    for (i, t) in told.iter().enumerate() {
        let (c, n) = (i / ROUNDS, i % ROUNDS);
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
    clock_set_back_while_writing(db);
}

#[test]
fn writers_are_never_stale_while_the_clock_is_set_back_on_postgres() {
    on_postgres(|db| {
        db.run(&["settings", "set", "scope_guard", "off"]).ok();
        clock_set_back_while_writing(db)
    });
}
