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
use serde_json::{json, Value};
use std::collections::BTreeSet;

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

/// Client `c`'s request lines, without what they say.
fn lines(c: usize) -> Vec<Value> {
    requests(c).into_iter().map(|(line, _)| line).collect()
}

#[test]
fn concurrent_guarded_writers_are_told_what_the_database_holds() {
    let db = Db::new();
    db.init();
    // What each client sent beside what it was told, in order.
    let told: Vec<(Value, Said, Value)> = write_concurrently(&db, lines)
        .into_iter()
        .enumerate()
        .flat_map(|(c, answers)| {
            requests(c)
                .into_iter()
                .zip(answers)
                .map(|((l, k), a)| (l, k, a))
        })
        .collect();

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
    let applied: BTreeSet<String> = db
        .sql_rows(
            "SELECT value FROM history WHERE event = 'set' AND scope = 'global'",
            |r| r.get(0),
        )
        .into_iter()
        .collect();
    for (line, kind, _) in &told {
        if matches!(kind, Said::Place | Said::Sibling) && line["scope"] == "global" {
            assert!(!applied.contains(&line["value"].to_string()), "{line}");
        }
    }
    let open = db.sql_i64("SELECT count(*) FROM pending WHERE status = 'open'");
    assert_eq!(
        open as usize,
        pending_seen.len(),
        "no item nobody was told of"
    );
    let report = db.assert_check_ok();
    assert_eq!(report["integrity"]["ok"], true, "{report:#}");
}
