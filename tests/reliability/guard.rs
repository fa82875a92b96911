//! The scope guard under concurrency (issue 16): three `memscope apply` processes and two
//! connections in this process write global rules at the same time, each from its own
//! repository (`"context"`), on the same subjects: some in words that point at the repository
//! (queued for a human), some stating a default or saying nothing (applied), some after a
//! repo-scoped sibling from the same message (queued). Every client must have been told what the
//! database holds at the end — each queued write an open pending item with its id, value,
//! candidates and evidence; each applied one a version with its value in the history — no write
//! whose words point at a place may be current anywhere, and `check` (with SQLite's quick check)
//! must pass.
//!
//! Reproduce: `cargo test --release --test reliability -- guard:: --nocapture`

use crate::support::reliability::*;
use memscope::{OpenMode, Scope, ScopeChoice, Store, WriteContext, WriteRequest};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::process::Stdio;

const SUBJECTS: usize = 4;
const ROUNDS: usize = 6;

/// What a line says, by its number: a place word, a default, nothing, or a sibling first.
#[derive(Clone, Copy, PartialEq)]
enum Said {
    Place,
    Default,
    Nothing,
    Sibling,
}

fn said(n: usize) -> Said {
    [Said::Place, Said::Default, Said::Nothing, Said::Sibling][n % 4]
}

/// Client `c`'s requests, in order: (request JSON, what its words say).
fn requests(c: usize) -> Vec<(Value, Said)> {
    let repo = format!("repo-{c}");
    let mut out = Vec::new();
    for n in 0..ROUNDS {
        for s in 0..SUBJECTS {
            let subject = format!("user:{s}");
            let source = format!("client:{c}/round:{n}/subject:{s}");
            let value = format!("tool {c}-{n}-{s} 值");
            let kind = said(n + s);
            let raw = match kind {
                Said::Place => Some(format!("这个仓库继续用 {value}")),
                Said::Default => Some(format!("以后新建项目默认用 {value}")),
                Said::Nothing | Said::Sibling => None,
            };
            if kind == Said::Sibling {
                out.push((
                    // A new value each time: a confirmation would keep the first message's
                    // source on the record, and only the message that wrote it is a sibling.
                    json!({"subject": subject, "predicate": "install_command",
                        "value": format!("npm ci --prefix {n}"),
                        "scope": format!("repo:{repo}"), "source": source}),
                    Said::Nothing,
                ));
            }
            let mut line = json!({"subject": subject, "predicate": "package_manager",
                "value": value, "scope": "global", "source": source,
                "context": {"repo": repo}});
            if let Some(raw) = raw {
                line["raw"] = json!(raw);
            }
            out.push((line, kind));
        }
    }
    out
}

fn request(line: &Value) -> WriteRequest {
    WriteRequest {
        subject: line["subject"].as_str().unwrap().into(),
        predicate: line["predicate"].as_str().unwrap().into(),
        value: line["value"].clone(),
        scope: ScopeChoice::Exact(Scope::parse(line["scope"].as_str().unwrap()).unwrap()),
        source: line["source"].as_str().unwrap().into(),
        raw: line["raw"].as_str().map(str::to_string),
        causal_seq: None,
        context: line["context"]["repo"].as_str().map(|r| WriteContext {
            repo: Some(r.into()),
            task: None,
        }),
    }
}

#[test]
fn concurrent_guarded_writers_are_told_what_the_database_holds() {
    let db = Db::new();
    db.init();
    let mut children = Vec::new();
    for c in 0..3 {
        let mut cmd = db.command(&["apply"]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        children.push((c, cmd.spawn().expect("spawn memscope apply")));
    }
    let mut feeders = Vec::new();
    for (c, child) in &mut children {
        let mut stdin = child.stdin.take().expect("stdin");
        let input: String = requests(*c)
            .into_iter()
            .map(|(line, _)| format!("{line}\n"))
            .collect();
        feeders.push(std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        }));
    }
    let threads: Vec<_> = (3..5)
        .map(|c| {
            let path = db.path.clone();
            std::thread::spawn(move || {
                let mut store = Store::open(&path, OpenMode::Existing).expect("open");
                store.set_assert_invariants(true);
                requests(c)
                    .into_iter()
                    .map(|(line, _)| {
                        let out = store
                            .write(&request(&line))
                            .expect("a write in a busy database succeeds");
                        serde_json::to_value(&out).expect("outcome")
                    })
                    .collect::<Vec<Value>>()
            })
        })
        .collect();
    // What each client sent beside what it was told, in order.
    let mut told: Vec<(Value, Said, Value)> = Vec::new();
    for f in feeders {
        f.join().expect("feeder");
    }
    for (c, child) in children {
        let out = child.wait_with_output().expect("apply ends");
        assert!(
            out.status.success(),
            "apply {c} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answers = json_lines(&String::from_utf8_lossy(&out.stdout));
        let sent = requests(c);
        assert_eq!(answers.len(), sent.len(), "one answer a line");
        told.extend(sent.into_iter().zip(answers).map(|((l, k), a)| (l, k, a)));
    }
    for (c, t) in (3..5).zip(threads) {
        let answers = t.join().expect("writer thread");
        told.extend(
            requests(c)
                .into_iter()
                .zip(answers)
                .map(|((l, k), a)| (l, k, a)),
        );
    }

    let conn = db.sql();
    let mut pending_seen = BTreeSet::new();
    for (line, kind, answer) in &told {
        let outcome = answer["outcome"].as_str().unwrap();
        let global = line["scope"] == "global";
        match (global, kind) {
            // Words or a sibling that point at the writer's own repository: queued.
            (true, Said::Place | Said::Sibling) => {
                assert_eq!(outcome, "pending", "{line} → {answer}");
                let id = answer["pending_id"].as_i64().expect("a pending id");
                assert!(pending_seen.insert(id), "one item a queued write: {answer}");
                let (value, status, candidates, reason): (String, String, String, String) = conn
                    .query_row(
                        "SELECT value, status, candidates, reason FROM pending WHERE id = ?1",
                        [id],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                    )
                    .unwrap_or_else(|e| panic!("told pending #{id}, the database has none: {e}"));
                assert_eq!(value, line["value"].to_string());
                assert_eq!(status, "open");
                let repo = format!("repo:{}", line["context"]["repo"].as_str().unwrap());
                let candidates: Vec<String> = serde_json::from_str(&candidates).unwrap();
                assert_eq!(candidates, ["global".to_string(), repo], "#{id}");
                let expected = if *kind == Said::Place {
                    "the words say “这个仓库”"
                } else {
                    "the same message wrote install_command in repo:"
                };
                assert!(reason.contains(expected), "#{id}: {reason}");
            }
            // A default, or nothing: applied, and the history holds that version's value.
            _ => {
                assert!(
                    ["inserted", "superseded", "confirmed"].contains(&outcome),
                    "{line} → {answer}"
                );
                let version = answer["version"].as_i64().expect("a version");
                let value: String = conn
                    .query_row(
                        "SELECT value FROM history WHERE subject = ?1 AND predicate = ?2
                         AND scope = ?3 AND version = ?4 AND event = 'set'",
                        rusqlite::params![
                            line["subject"].as_str().unwrap(),
                            line["predicate"].as_str().unwrap(),
                            line["scope"].as_str().unwrap(),
                            version
                        ],
                        |r| r.get(0),
                    )
                    .unwrap_or_else(|e| {
                        panic!("told v{version}, not in the history: {answer}: {e}")
                    });
                if outcome != "confirmed" {
                    assert_eq!(value, line["value"].to_string(), "{answer}");
                }
            }
        }
    }
    // No queued value was ever applied.
    let applied: BTreeSet<String> = conn
        .prepare("SELECT value FROM history WHERE event = 'set' AND scope = 'global'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (line, kind, _) in &told {
        if matches!(kind, Said::Place | Said::Sibling) && line["scope"] == "global" {
            assert!(!applied.contains(&line["value"].to_string()), "{line}");
        }
    }
    let open: i64 = conn
        .query_row(
            "SELECT count(*) FROM pending WHERE status = 'open'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        open as usize,
        pending_seen.len(),
        "no item nobody was told of"
    );
    let report = db.assert_check_ok();
    assert_eq!(report["integrity"]["ok"], true, "{report:#}");
}
