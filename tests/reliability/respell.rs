//! `write --respell` under concurrency (README, `write --respell`): three threads each running
//! `memscope write --respell` processes one after another, and two connections in this process
//! calling the store's respell, all on one identity at once, each in its own spellings of one
//! value (case and inner spacing: `Helix 编辑器 🧬`, `HELIX 编辑器 🧬`, `helix  编辑器 🧬` …) and now
//! and then another value. A respell confirms only the very spelling that is current and
//! supersedes any other, so the decision must be made under the identity's lock against the
//! spelling as it stands — a writer that compared against what it read before the lock would
//! confirm a spelling no longer held, or supersede with a version another writer already took.
//!
//! Asserted against what each writer was told: every answer is `inserted` (once), `superseded`
//! or `confirmed`; the versions told as new are 1..=n, each told to one writer; each answer is
//! in history as told — its event (found by its writer's unique source), version, value in the
//! told spelling and causal number; a version told as confirmed was set in exactly that
//! spelling; the current record is the highest version, in the spelling its writer was told;
//! `check` is clean (SQLite's integrity check too). On both backends.
//!
//! Reproduce: `cargo test --release --test reliability -- respell:: --nocapture`

use crate::support::reliability::*;
use crate::support::{on_postgres, open_any_store};
use memscope::{Scope, ScopeChoice, WriteRequest};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Barrier;

const PROCESSES: usize = 3;
const THREADS: usize = 2;
const ROUNDS: usize = 14;
const SUBJECT: &str = "user:拼写";
const PREDICATE: &str = "editor";

/// Writer `c`'s value in round `n`: a spelling of one value, or now and then another.
fn value(c: usize, n: usize) -> String {
    const SPELLINGS: [&str; 5] = [
        "Helix 编辑器 🧬",
        "HELIX 编辑器 🧬",
        "helix  编辑器 🧬",
        "hElIx 编辑器 🧬",
        "helix 编辑器 🧬",
    ];
    if (c + n) % 6 == 5 {
        format!("vim {c}·{n} 🐘")
    } else {
        SPELLINGS[(c * 3 + n) % SPELLINGS.len()].to_string()
    }
}

fn source(c: usize, n: usize) -> String {
    format!("writer:{c}/round:{n}")
}

fn respell_all(db: &Db, start: &Barrier) -> Vec<Value> {
    std::thread::scope(|scope| {
        let processes: Vec<_> = (0..PROCESSES)
            .map(|c| {
                scope.spawn(move || {
                    start.wait();
                    (0..ROUNDS)
                        .map(|n| {
                            let (v, s) = (value(c, n), source(c, n));
                            let run = db.run(&[
                                "write",
                                "--subject",
                                SUBJECT,
                                "--predicate",
                                PREDICATE,
                                "--scope",
                                "global",
                                "--value",
                                &v,
                                "--source",
                                &s,
                                "--respell",
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
                    start.wait();
                    (0..ROUNDS)
                        .map(|n| {
                            let req = WriteRequest {
                                subject: SUBJECT.into(),
                                predicate: PREDICATE.into(),
                                value: json!(value(c, n)),
                                scope: ScopeChoice::Exact(Scope::Global),
                                source: source(c, n),
                                raw: None,
                                causal_seq: None,
                                context: None,
                            };
                            let out = store
                                .respell(&req)
                                .unwrap_or_else(|e| panic!("writer {c} round {n}: {e:#}"));
                            serde_json::to_value(&out).unwrap()
                        })
                        .collect::<Vec<Value>>()
                })
            })
            .collect();
        // Every writer is joined before any failure is raised, so none is left running.
        let joined: Vec<_> = processes
            .into_iter()
            .chain(threads)
            .map(|h| h.join())
            .collect();
        joined
            .into_iter()
            .flat_map(|j| j.unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

fn respells_race(db: Db) {
    let start = Barrier::new(PROCESSES + THREADS);
    let told = respell_all(&db, &start);
    assert_eq!(told.len(), (PROCESSES + THREADS) * ROUNDS);

    let history: Vec<Value> = db
        .run(&[
            "history",
            "--subject",
            SUBJECT,
            "--predicate",
            PREDICATE,
            "--scope",
            "global",
            "--json",
        ])
        .ok()
        .json()
        .as_array()
        .unwrap()
        .clone();
    let by_source: BTreeMap<&str, &Value> = history
        .iter()
        .map(|e| (e["source"].as_str().unwrap(), e))
        .collect();
    assert_eq!(
        by_source.len(),
        history.len(),
        "one event a write: {history:#?}"
    );
    let set_at: BTreeMap<i64, &str> = history
        .iter()
        .filter(|e| e["event"] == "set")
        .map(|e| (e["version"].as_i64().unwrap(), e["value"].as_str().unwrap()))
        .collect();

    let mut new_versions = BTreeSet::new();
    let mut inserted = 0;
    for (c, t) in told.iter().enumerate() {
        let (w, n) = (c / ROUNDS, c % ROUNDS);
        let outcome = t["outcome"].as_str().unwrap();
        let version = t["version"].as_i64().unwrap();
        assert_eq!(
            t["value"],
            json!(value(w, n)),
            "told the spelling it wrote: {t}"
        );
        match outcome {
            "inserted" => inserted += 1,
            "superseded" => {}
            "confirmed" => {
                // Confirmed only the very spelling that version holds.
                assert_eq!(
                    set_at.get(&version).copied(),
                    Some(value(w, n).as_str()),
                    "writer {w} round {n} was told it confirmed v{version}: {t}"
                );
            }
            other => panic!("writer {w} round {n}: a respell answered {other}: {t}"),
        }
        if outcome != "confirmed" {
            assert!(
                new_versions.insert(version),
                "v{version} told as new twice: {t}"
            );
        }
        // In history as told.
        let src = source(w, n);
        let event = by_source.get(src.as_str()).unwrap_or_else(|| {
            panic!("writer {w} round {n} was told {outcome}, and history has no event of it")
        });
        assert_eq!(
            (
                &event["event"],
                &event["version"],
                &event["value"],
                &event["causal_seq"]
            ),
            (
                &json!(event_of(outcome).unwrap()),
                &t["version"],
                &t["value"],
                &t["causal_seq"]
            ),
            "writer {w} round {n}"
        );
    }
    assert_eq!(inserted, 1, "one writer inserted");
    let n = new_versions.len() as i64;
    assert_eq!(
        new_versions,
        (1..=n).collect::<BTreeSet<i64>>(),
        "the versions told as new are contiguous"
    );
    assert!(n > 1, "the race wrote more than one version");
    // Each new version is another spelling than the one before: the very same spelling
    // confirms, it never supersedes.
    for v in 2..=n {
        assert_ne!(
            set_at.get(&(v - 1)),
            set_at.get(&v),
            "v{v} superseded v{} with the same spelling",
            v - 1
        );
    }
    let current = db
        .run(&[
            "resolve",
            "--subject",
            SUBJECT,
            "--predicate",
            PREDICATE,
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(current["version"], json!(n), "{current}");
    assert_eq!(current["value"], json!(set_at[&n]), "{current}");
    let report = db.assert_check_ok();
    if !db.is_postgres() {
        assert_eq!(report["integrity"]["ok"], true, "{report:#}");
    }
}

#[test]
fn respells_racing_on_one_identity_are_told_what_the_database_holds() {
    let db = Db::new();
    db.init();
    respells_race(db);
}

#[test]
fn respells_racing_on_one_identity_are_told_what_the_database_holds_on_postgres() {
    on_postgres(respells_race);
}
