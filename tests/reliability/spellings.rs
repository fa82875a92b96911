//! One spelling per place under concurrency (issue 12): three `memscope apply` processes and two
//! connections inside this process write the same new subjects and places at the same time,
//! each in its own case (`user:7`, `User:7`, `USER:7`; `repo:web-app-1`, `repo:Web-App-1` …).
//! Every client must have been told the one spelling the database stores, every place must hold
//! one spelling, every acknowledged version must be in the history with its value, and the file
//! must pass `check` (which runs SQLite's quick check and the one-spelling rule).
//!
//! Reproduce: `cargo test --release --test reliability -- spellings:: --nocapture`

use crate::support::reliability::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const SUBJECTS: usize = 12;
const ROUNDS: usize = 3;
const PREDICATES: [&str; 2] = ["package_manager", "editor"];

/// Client `c`'s spelling of a subject or a place id.
fn spell(c: usize, text: &str) -> String {
    match c % 5 {
        0 => text.to_string(),
        1 => text.to_uppercase(),
        2 => {
            let mut s = text.to_string();
            s[..1].make_ascii_uppercase();
            s
        }
        3 => text
            .chars()
            .enumerate()
            .map(|(i, ch)| {
                if i % 2 == 0 {
                    ch.to_ascii_uppercase()
                } else {
                    ch
                }
            })
            .collect(),
        _ => text.replace('-', "\u{2011}"),
    }
}

/// Client `c`'s `apply` lines, `ROUNDS` rounds over every subject and predicate.
fn lines(c: usize) -> Vec<Value> {
    // Clients 0–2 are `apply` processes, 3–4 connections in this process.
    let source = if c < 3 {
        format!("proc:{c}")
    } else {
        format!("conn:{c}")
    };
    let mut out = Vec::new();
    for n in 0..ROUNDS {
        for s in 0..SUBJECTS {
            for p in PREDICATES {
                out.push(json!({
                    "subject": spell(c, &format!("user:{s}")),
                    "predicate": p,
                    "scope": format!("repo:{}", spell(c, &format!("web-app-{}", s % 3))),
                    "value": format!("client {c} round {n} 值"),
                    "source": source,
                }));
            }
        }
    }
    out
}

fn fold(text: &str) -> String {
    memscope::spelling::fold(text)
}

#[test]
fn concurrent_writers_in_every_case_are_told_the_one_stored_spelling() {
    let db = Db::new();
    db.init();
    // Three processes, started together, each feeding its lines to `apply`; two connections
    // in this process, writing one request per transaction meanwhile.
    let told: Vec<Value> = write_concurrently(&db, lines).concat();
    assert_eq!(told.len(), 5 * ROUNDS * SUBJECTS * PREDICATES.len());

    // One spelling per place in the database, and it is what every client was told.
    let conn = db.sql();
    let stored: Vec<(String, String, String, i64, String)> = conn
        .prepare("SELECT subject, predicate, scope, version, value FROM memories")
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        stored.len(),
        SUBJECTS * PREDICATES.len(),
        "one record per identity"
    );
    let subjects: BTreeMap<String, BTreeSet<String>> =
        stored.iter().fold(BTreeMap::new(), |mut m, r| {
            m.entry(fold(&r.0)).or_default().insert(r.0.clone());
            m
        });
    assert!(subjects.values().all(|s| s.len() == 1), "{subjects:?}");
    let spelling_of = |text: &str| -> String {
        let key = fold(text);
        stored
            .iter()
            .find_map(|r| {
                if fold(&r.0) == key {
                    Some(r.0.clone())
                } else if fold(&r.2) == key {
                    Some(r.2.clone())
                } else {
                    None
                }
            })
            .unwrap_or_else(|| panic!("{text} is stored nowhere"))
    };
    let mut highest: BTreeMap<(String, String, String), (i64, Value)> = BTreeMap::new();
    for t in &told {
        let (s, p, scope) = (
            t["subject"].as_str().unwrap(),
            t["predicate"].as_str().unwrap(),
            t["scope"].as_str().unwrap(),
        );
        assert_eq!(
            s,
            spelling_of(s),
            "told a spelling the database does not keep: {t}"
        );
        assert_eq!(
            scope,
            spelling_of(scope),
            "told a place spelling the database does not keep: {t}"
        );
        assert!(
            ["inserted", "confirmed", "superseded", "stale"]
                .contains(&t["outcome"].as_str().unwrap()),
            "{t}"
        );
        if let (Some(v), "inserted" | "superseded") =
            (t["version"].as_i64(), t["outcome"].as_str().unwrap())
        {
            let key = (s.to_string(), p.to_string(), scope.to_string());
            let e = highest.entry(key).or_insert((0, Value::Null));
            if v > e.0 {
                *e = (v, t["value"].clone());
            }
        }
    }
    // What the last acknowledged version said is what the database holds.
    for (s, p, scope, version, value) in &stored {
        let (v, said) = &highest[&(s.clone(), p.clone(), scope.clone())];
        assert_eq!(
            (version, value),
            (v, &said.to_string()),
            "{s} · {p} @ {scope}"
        );
    }
    let report = db.assert_check_ok();
    assert_eq!(report["integrity"]["ok"], true, "{report:#}");
}
