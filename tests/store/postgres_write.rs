//! The write path and resolution on PostgreSQL (issue 17), against a real server: every
//! outcome of the write rules decided by the same core as on SQLite, the scope guard, and
//! writers on several connections at once — what each was told is what the database holds.

use super::postgres::{server, FreshDb};
use memscope::model::{OutcomeKind, ScopeChoice, WriteContext, WriteRequest};
use memscope::store::postgres::PgStore;
use serde_json::{json, Value};

pub(crate) fn req(
    subject: &str,
    predicate: &str,
    value: Value,
    scope: &str,
    source: &str,
) -> WriteRequest {
    WriteRequest {
        subject: subject.into(),
        predicate: predicate.into(),
        value,
        scope: if scope.contains(',') {
            ScopeChoice::parse_candidates(scope).unwrap()
        } else {
            ScopeChoice::Exact(memscope::Scope::parse(scope).unwrap())
        },
        source: source.into(),
        raw: None,
        causal_seq: None,
        context: None,
    }
}

/// The words of the first seed article's incident.
const INCIDENT_WORDS: &str = "这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。";

/// The incident: `package_manager = npm` stored as global by an agent working in
/// `legacy-dashboard`, whose words say "this repository", from message `source`.
pub(crate) fn incident(source: &str) -> WriteRequest {
    let mut w = req("user:42", "package_manager", json!("npm"), "global", source);
    w.raw = Some(INCIDENT_WORDS.into());
    w.context = Some(WriteContext {
        repo: Some("legacy-dashboard".into()),
        task: None,
    });
    w
}

/// The incident's sibling from the same message: `install_command = npm ci` in
/// `repo:legacy-dashboard`, the same words.
pub(crate) fn incident_sibling(source: &str) -> WriteRequest {
    let mut w = req(
        "user:42",
        "install_command",
        json!("npm ci"),
        "repo:legacy-dashboard",
        source,
    );
    w.raw = Some(INCIDENT_WORDS.into());
    w
}

/// The real binary on `db` in `home`, run to its end.
fn memscope_on(db: &FreshDb, home: &std::path::Path, args: &[&str]) -> std::process::Output {
    crate::support::memscope_cmd(home)
        .args(["--db", &db.url])
        .args(args)
        .output()
        .unwrap()
}

/// What a writer was told: predicate (as stored), value written, outcome, version, causal number.
type Told = (String, String, OutcomeKind, Option<i64>, Option<i64>);

#[test]
fn every_outcome_of_the_write_rules_on_postgres() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let mut store = PgStore::open(&db.address()).unwrap();
    let w = |store: &mut PgStore, r: &WriteRequest| store.write(r).unwrap();
    // Inserted, confirmed, superseded; the alias table maps 包管理器.
    let first = w(
        &mut store,
        &req(
            "user:42",
            "包管理器",
            json!("pnpm 📦"),
            "global",
            "thread:1",
        ),
    );
    assert_eq!(first.outcome, OutcomeKind::Inserted, "{first:?}");
    assert_eq!(first.predicate.as_deref(), Some("package_manager"));
    assert_eq!(first.version, Some(1));
    let again = w(
        &mut store,
        &req(
            "User:42",
            "package_manager",
            json!("pnpm 📦"),
            "global",
            "thread:2",
        ),
    );
    assert_eq!(again.outcome, OutcomeKind::Confirmed, "{again:?}");
    assert_eq!(
        again.subject.as_deref(),
        Some("user:42"),
        "one spelling per subject"
    );
    let newer = w(
        &mut store,
        &req(
            "user:42",
            "package_manager",
            json!("npm"),
            "global",
            "thread:3",
        ),
    );
    assert_eq!(newer.outcome, OutcomeKind::Superseded, "{newer:?}");
    assert_eq!(
        (newer.version, newer.previous.clone()),
        (Some(2), Some(json!("pnpm 📦")))
    );
    // A causally older write is stale.
    let mut old = req(
        "user:42",
        "package_manager",
        json!("yarn"),
        "global",
        "thread:0",
    );
    old.causal_seq = Some(1);
    let stale = w(&mut store, &old);
    assert_eq!(stale.outcome, OutcomeKind::Stale, "{stale:?}");
    // A write with a causal number far ahead moves the clock: the next write is newer.
    let mut ahead = req(
        "user:7",
        "editor",
        json!("vim"),
        "repo:编辑器-🚀",
        "thread:9",
    );
    ahead.causal_seq = Some(1_000_000);
    assert_eq!(w(&mut store, &ahead).outcome, OutcomeKind::Inserted);
    assert!(store.clock().unwrap() >= 1_000_000);
    let after = w(
        &mut store,
        &req(
            "user:7",
            "editor",
            json!("helix"),
            "repo:编辑器-🚀",
            "thread:10",
        ),
    );
    assert_eq!(after.outcome, OutcomeKind::Superseded, "{after:?}");
    assert!(after.causal_seq.unwrap() > 1_000_000);
    // An ambiguous scope waits for a human, once.
    let amb = req(
        "user:42",
        "test_runner",
        json!("vitest"),
        "global,repo:web-app",
        "thread:4",
    );
    let p1 = w(&mut store, &amb);
    assert_eq!(p1.outcome, OutcomeKind::Pending, "{p1:?}");
    let p2 = w(&mut store, &amb);
    assert_eq!(
        (p2.outcome, p2.pending_id),
        (OutcomeKind::Pending, p1.pending_id)
    );
    // A tombstone keeps a deleted identity deleted (made here by raw SQL as the owner).
    raw.batch_execute(
        "DELETE FROM memories WHERE subject = 'user:7' AND predicate = 'editor';
         INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at)
         VALUES ('user:7', 'editor', 'repo:编辑器-🚀', 2, '删除 🗑', now());",
    )
    .unwrap();
    let refused = w(
        &mut store,
        &req(
            "user:7",
            "editor",
            json!("emacs"),
            "repo:编辑器-🚀",
            "thread:11",
        ),
    );
    assert_eq!(refused.outcome, OutcomeKind::Rejected, "{refused:?}");
    assert_eq!(store.metric("resurrection_blocked").unwrap(), 1);
    assert_eq!(store.metric("stale_writes").unwrap(), 1);
    let events: Vec<String> = raw
        .query("SELECT event FROM history WHERE subject = 'user:42' AND predicate = 'package_manager' ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(events, ["set", "confirmed", "set", "stale"]);
}

#[test]
fn resolution_on_postgres_explains_the_chain() {
    let Some(server) = server() else { return };
    let (db, _raw) = FreshDb::prepared(&server);
    let mut store = PgStore::open(&db.address()).unwrap();
    for (value, scope) in [
        ("pnpm", "global"),
        ("npm ci", "repo:Legacy-Dashboard"),
        ("bun 🥯", "task:迁移"),
    ] {
        store
            .write(&req(
                "user:42",
                "package_manager",
                json!(value),
                scope,
                "thread:1",
            ))
            .unwrap();
    }
    let r = store
        .resolve(
            "user:42",
            "包管理器",
            Some("legacy-dashboard"),
            Some("迁移"),
        )
        .unwrap();
    assert_eq!(r.value, Some(json!("bun 🥯")));
    assert_eq!(r.scope.as_deref(), Some("task:迁移"));
    let states: Vec<(&str, &str)> = r
        .considered
        .iter()
        .map(|c| (c.scope.as_str(), c.state.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("task:迁移", "wins"),
            ("repo:Legacy-Dashboard", "shadowed"),
            ("global", "shadowed")
        ]
    );
    let r = store
        .resolve("user:42", "package_manager", Some("other"), None)
        .unwrap();
    assert_eq!(
        (r.value, r.scope.as_deref()),
        (Some(json!("pnpm")), Some("global"))
    );
}

/// The incident of the first seed article, on PostgreSQL: the words say "this repository" and
/// the write says where it was made — queued, not superseding the default; without a place it
/// is stored and its event keeps the evidence.
#[test]
fn the_scope_guard_on_postgres_queues_the_incident() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let mut store = PgStore::open(&db.address()).unwrap();
    let default = req(
        "user:42",
        "package_manager",
        json!("pnpm"),
        "global",
        "thread:1",
    );
    assert_eq!(
        store.write(&default).unwrap().outcome,
        OutcomeKind::Inserted
    );
    let sibling = incident_sibling("thread:2/message:1");
    assert_eq!(
        store.write(&sibling).unwrap().outcome,
        OutcomeKind::Inserted
    );
    let mut incident = incident("thread:2/message:1");
    let out = store.write(&incident).unwrap();
    assert_eq!(out.outcome, OutcomeKind::Pending, "{out:?}");
    let reason = out.reason.unwrap();
    assert!(reason.contains("这个仓库"), "{reason}");
    assert!(
        reason.contains("the same message wrote install_command in repo:legacy-dashboard"),
        "{reason}"
    );
    let r = store
        .resolve("user:42", "package_manager", Some("new-app"), None)
        .unwrap();
    assert_eq!(r.value, Some(json!("pnpm")), "the default still stands");
    // Without a place: stored, a suspect.
    incident.context = None;
    let out = store.write(&incident).unwrap();
    assert_eq!(out.outcome, OutcomeKind::Superseded, "{out:?}");
    let detail: String = raw
        .query_one("SELECT detail FROM history WHERE event = 'set' AND version = 2 AND predicate = 'package_manager'", &[])
        .unwrap()
        .get(0);
    assert!(
        detail.contains("suspect") && detail.contains("这个仓库"),
        "{detail}"
    );
}

/// Writers on eight connections at once, to one identity and to their own: every write each
/// was told was stored is in history exactly once, versions are contiguous, one record is
/// current, and no two writes took the same causal number.
#[test]
fn concurrent_writers_on_postgres_lose_nothing_they_were_told() {
    let Some(server) = server() else { return };
    let (db, raw) = FreshDb::prepared(&server);
    drop(raw);
    let address = db.address();
    const WRITERS: usize = 8;
    const EACH: usize = 40;
    let told: Vec<Vec<Told>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|n| {
                let address = address.clone();
                s.spawn(move || {
                    let mut store = PgStore::open(&address).unwrap();
                    let mut told = Vec::new();
                    for i in 0..EACH {
                        for predicate in ["shared 共享", &format!("own_{n}")] {
                            let value = json!(format!("writer {n} 写 {i} 🙂"));
                            let out = store
                                .write(&req(
                                    "user:1",
                                    predicate,
                                    value.clone(),
                                    "global",
                                    &format!("w{n}:{i}"),
                                ))
                                .unwrap();
                            told.push((
                                out.predicate.clone().unwrap_or_default(),
                                value.to_string(),
                                out.outcome,
                                out.version,
                                out.causal_seq,
                            ));
                        }
                    }
                    told
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut raw = db.client();
    let told: Vec<_> = told.into_iter().flatten().collect();
    let mut seqs: Vec<i64> = told.iter().filter_map(|t| t.4).collect();
    seqs.sort_unstable();
    let n = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), n, "no two writes took the same causal number");
    // As stored (predicates are normalized): the shared one and each writer's own.
    let predicates: std::collections::BTreeSet<String> = told.iter().map(|t| t.0.clone()).collect();
    assert_eq!(predicates.len(), WRITERS + 1, "{predicates:?}");
    for predicate in &predicates {
        let mut stored: Vec<(i64, String)> = told
            .iter()
            .filter(|t| {
                &t.0 == predicate && matches!(t.2, OutcomeKind::Inserted | OutcomeKind::Superseded)
            })
            .map(|t| (t.3.unwrap(), t.1.clone()))
            .collect();
        stored.sort();
        let history: Vec<(i64, String)> = raw
            .query(
                "SELECT version, value FROM history WHERE predicate = $1 AND event = 'set' ORDER BY version",
                &[predicate],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert_eq!(
            history, stored,
            "{predicate}: history holds exactly what the writers were told"
        );
        let versions: Vec<i64> = history.iter().map(|h| h.0).collect();
        assert_eq!(
            versions,
            (1..=versions.len() as i64).collect::<Vec<_>>(),
            "{predicate}: contiguous"
        );
        let current: Vec<(i64, String)> = raw
            .query(
                "SELECT version, value FROM memories WHERE predicate = $1",
                &[predicate],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert_eq!(
            current,
            vec![history.last().unwrap().clone()],
            "{predicate}: one current record, the last told"
        );
    }
    let shared = told.iter().filter(|t| !t.0.starts_with("own_")).count();
    assert_eq!(
        shared,
        WRITERS * EACH,
        "every write to the shared identity was answered"
    );
}

/// The commands on a `postgres://` address, from several real processes at once: each
/// `memscope apply` is told an outcome per line, and `memscope history --json` and `list
/// --json` (more processes) show exactly what they were told — versions contiguous, one
/// current record — and `resolve --log` serves the value and logs the read.
#[test]
fn several_memscope_processes_apply_to_one_postgres_database() {
    use std::io::Write;
    let Some(server) = server() else { return };
    let (db, _raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    const PROCESSES: usize = 4;
    const LINES: usize = 60;
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let mut child = crate::support::memscope_cmd(home.path())
                .args(["--db", &db.url, "apply", "-"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut input = String::new();
            for i in 0..LINES {
                let predicate = if i % 2 == 0 {
                    "包管理器".to_string()
                } else {
                    format!("own_{p}")
                };
                input.push_str(&serde_json::to_string(&json!({
                    "subject": "user:42", "predicate": predicate, "scope": "global",
                    "value": format!("进程 {p} 行 {i} 🚀"), "source": format!("proc:{p}/line:{i}"),
                })).unwrap());
                input.push('\n');
            }
            input.push_str("{not json}\n");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            child
        })
        .collect();
    let mut told: Vec<Value> = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1), "a line was malformed: {out:?}");
        let lines: Vec<Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), LINES + 1);
        assert_eq!(lines[LINES]["outcome"], "error");
        told.extend(lines.into_iter().take(LINES));
    }
    let run = |args: &[&str]| -> Value {
        let out = memscope_on(&db, home.path(), args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let history = run(&[
        "history",
        "--subject",
        "user:42",
        "--predicate",
        "package_manager",
        "--json",
    ]);
    let mut stored: Vec<(i64, Value)> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "set")
        .map(|e| (e["version"].as_i64().unwrap(), e["value"].clone()))
        .collect();
    stored.sort_by_key(|s| s.0);
    let mut answered: Vec<(i64, Value)> = told
        .iter()
        .filter(|o| {
            o["predicate"] == "package_manager"
                && (o["outcome"] == "inserted" || o["outcome"] == "superseded")
        })
        .map(|o| (o["version"].as_i64().unwrap(), o["value"].clone()))
        .collect();
    answered.sort_by_key(|s| s.0);
    assert_eq!(
        stored, answered,
        "history holds exactly what the processes were told"
    );
    let versions: Vec<i64> = stored.iter().map(|s| s.0).collect();
    assert_eq!(
        versions,
        (1..=(PROCESSES * LINES / 2) as i64).collect::<Vec<_>>()
    );
    let list = run(&["list", "--json"]);
    let current: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["predicate"] == "package_manager")
        .collect();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0]["version"].as_i64(), versions.last().copied());
    assert_eq!(list.as_array().unwrap().len(), 1 + PROCESSES);
    let r = run(&[
        "resolve",
        "--subject",
        "user:42",
        "--predicate",
        "包管理器",
        "--repo",
        "shop",
        "--log",
        "--json",
    ]);
    assert_eq!(r["value"], current[0]["value"]);
    let reads = run(&["reads", "--predicate", "包管理器", "--json"]);
    let reads = reads.as_array().unwrap();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(
        (reads[0]["repo"].as_str(), reads[0]["version"].as_i64()),
        (Some("shop"), current[0]["version"].as_i64())
    );
}

/// Four `apply` processes at once, each a batch of 3,000 lines drawn from one pool of
/// identities and new spellings in every kind of scope, so every pair of batches shares
/// hundreds of identities and spellings in different orders: batches take turns, so none
/// deadlocks (not even once, retried), and every identity's history holds exactly the writes
/// its writers were told stored.
#[test]
fn overlapping_applies_never_deadlock_on_postgres() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    const PROCESSES: usize = 4;
    const LINES: usize = 3_000;
    let scopes = ["global", "repo:甲", "repo:b", "task:t-1"];
    let pool: Vec<(String, String, &str)> = (0..150)
        .flat_map(|s| (0..6).map(move |p| (s, p)))
        .flat_map(|(s, p)| {
            scopes
                .iter()
                .map(move |c| (format!("user:{s}"), format!("偏好_{p}"), *c))
        })
        .collect();
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let mut x = 7 + p as u64 * 7_919;
            let input: String = (0..LINES)
                .map(|i| {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    let (subject, predicate, scope) = &pool[(x >> 33) as usize % pool.len()];
                    format!(
                        "{}\n",
                        json!({"subject": subject, "predicate": predicate, "scope": scope,
                               "value": format!("进程 {p} 行 {i} 🔁"), "source": format!("proc:{p}/{i}")})
                    )
                })
                .collect();
            let path = files.path().join(format!("批 {p}.jsonl"));
            std::fs::write(&path, input).unwrap();
            crate::support::memscope_cmd(home.path())
                .args(["--db", &db.url, "apply"])
                .arg(&path)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut told: std::collections::BTreeMap<(String, String, String), Vec<i64>> =
        Default::default();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "an apply gave up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let o: Value = serde_json::from_str(line).unwrap();
            if o["outcome"] == "inserted" || o["outcome"] == "superseded" {
                told.entry((
                    o["subject"].as_str().unwrap().into(),
                    o["predicate"].as_str().unwrap().into(),
                    o["scope"].as_str().unwrap().into(),
                ))
                .or_default()
                .push(o["version"].as_i64().unwrap());
            }
        }
    }
    let mut stored: std::collections::BTreeMap<(String, String, String), Vec<i64>> =
        Default::default();
    for r in raw
        .query(
            "SELECT subject, predicate, scope, version FROM history WHERE event = 'set' ORDER BY id",
            &[],
        )
        .unwrap()
    {
        stored
            .entry((r.get(0), r.get(1), r.get(2)))
            .or_default()
            .push(r.get(3));
    }
    for versions in told.values_mut() {
        versions.sort_unstable();
    }
    assert_eq!(
        told, stored,
        "history holds exactly what the writers were told"
    );
    // Not one deadlock retried, let alone given up on: batches take turns.
    let retries: Option<i64> = raw
        .query_opt("SELECT value FROM metrics WHERE name = 'busy_retries'", &[])
        .unwrap()
        .map(|r| r.get(0));
    assert_eq!(
        retries.unwrap_or(0),
        0,
        "batches deadlocked and were run again"
    );
    let out = memscope_on(&db, home.path(), &["check"]);
    assert!(out.status.success(), "{out:?}");
}

/// What `pg_stats` shows any role that may read memscope's tables forgets what a purge
/// destroyed (README, "Running on PostgreSQL"): after MCP `forget`, after a subject delete that
/// leaves `memories` and `pending` empty (where ANALYZE alone keeps the old statistics), and
/// after `gc`'s retention purge — each time with the canary in the statistics first.
#[test]
fn the_planner_statistics_forget_what_forget_delete_and_gc_purged() {
    use crate::support::mcp_session::{tool_text, RawSession};
    use memscope::store::Clock;
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    let analyzed = |raw: &mut postgres::Client, canary: &str| {
        raw.batch_execute("ANALYZE").unwrap();
        let held = stats_holding(raw, canary);
        assert!(
            !held.is_empty(),
            "{canary} is in no statistic to begin with"
        );
        held
    };

    // MCP forget: two versions of the canary, among other memories.
    let forgot = "FORGOT-忘れた-🧽";
    let mut s = RawSession::serve(&db.url, &["--subject", "user:42", "--allow-forget"]);
    let mut id = 1;
    let mut call = |s: &mut RawSession, name: &str, args: Value| {
        id += 1;
        s.request(id, "tools/call", json!({"name": name, "arguments": args}))
    };
    for (predicate, value) in [
        ("coffee", format!("{forgot} oat latte")),
        ("coffee", format!("{forgot} flat white")),
        ("editor", "helix".into()),
        ("shell", "zsh".into()),
        ("pager", "less".into()),
    ] {
        let r = call(
            &mut s,
            "remember",
            json!({"predicate": predicate, "value": value, "scope": "global",
                   "source": format!("{value} said so"), "raw": format!("{value} every day")}),
        );
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    analyzed(&mut raw, forgot);
    let r = call(
        &mut s,
        "forget",
        json!({"predicate": "coffee", "scope": "global"}),
    );
    assert!(tool_text(&r).contains("forgotten"), "{r}");
    drop(s);
    assert_eq!(stats_holding(&mut raw, forgot), Vec::<String>::new());

    // A subject delete that empties the current records and the queue.
    let emptied = "EMPTIED-清空-🫙";
    let mut store = PgStore::open(&db.address()).unwrap();
    for i in 0..6 {
        let mut w = req(
            "user:42",
            &format!("p{i}"),
            json!(format!("{emptied} {}", i % 2)),
            if i < 3 { "global" } else { "global,repo:shop" },
            &format!("{emptied} source"),
        );
        w.raw = Some(format!("{emptied} words"));
        store.write(&w).unwrap();
    }
    analyzed(&mut raw, emptied);
    let out = memscope_on(
        &db,
        home.path(),
        &["delete", "--subject", "user:42", "--yes"],
    );
    assert!(out.status.success(), "{out:?}");
    for table in ["memories", "pending"] {
        let n: i64 = raw
            .query_one(format!("SELECT count(*) FROM {table}").as_str(), &[])
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table} is empty, the case ANALYZE leaves alone");
    }
    assert_eq!(stats_holding(&mut raw, emptied), Vec::<String>::new());
    // The tables are memscope's as before: its guards stand, writes land.
    assert!(store.check().unwrap().ok);
    let w = store
        .write(&req("user:7", "coffee", json!("美式 ☕"), "global", "t:9"))
        .unwrap();
    assert_eq!(w.outcome, OutcomeKind::Inserted);
    let queued = store
        .write(&req(
            "user:7",
            "tea",
            json!("绿茶"),
            "global,repo:shop",
            "t:10",
        ))
        .unwrap();
    assert_eq!(queued.outcome, OutcomeKind::Pending);

    // gc's retention purge of versions superseded 400 days ago.
    let old = "RETAINED-旧的-🦴";
    store
        .set_clock(Clock::Fixed(
            chrono::Utc::now() - chrono::Duration::days(400),
        ))
        .unwrap();
    for i in 0..4 {
        let mut w = req(
            "user:8",
            "coffee",
            json!(format!("{old} {i}")),
            "global",
            "t:old",
        );
        w.raw = Some(format!("{old} words {i}"));
        store.write(&w).unwrap();
    }
    store.set_clock(Clock::System).unwrap();
    store
        .write(&req(
            "user:8",
            "coffee",
            json!("tea now"),
            "global",
            "t:new",
        ))
        .unwrap();
    analyzed(&mut raw, old);
    let report = store.gc(Some(30), Some(0)).unwrap();
    assert!(report.purged_events >= 4, "{:?}", report.purged_events);
    assert!(report.disk_purged);
    assert_eq!(stats_holding(&mut raw, old), Vec::<String>::new());
}

/// A delete's VACUUM does not wait to cut the emptied end of a table off (README, "What
/// deletion means on PostgreSQL"): that cut asks for the table's exclusive lock, which any open
/// reader (or a second delete's VACUUM queued on the table) withholds, and PostgreSQL retries
/// it for 5 s a table while the connection waits — concurrent deletes stalled every call of
/// three MCP servers for 15 s. Here a reader holds `memories` open across a delete that empties
/// the end of it, on a connection that gives any statement 3 s: the VACUUM completes (with
/// the cut it ran into the timeout, and the delete said its purge never reached the disk).
#[test]
fn a_delete_vacuums_past_an_open_reader_without_waiting_to_truncate_on_postgres() {
    use memscope::DeleteTarget;
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let url = format!("{}?options=-c%20statement_timeout%3D3000", db.url);
    let address = memscope::store::postgres::Address::recognise(std::ffi::OsStr::new(&url))
        .unwrap()
        .unwrap();
    let mut store = PgStore::open(&address).unwrap();
    let filler = "填充 filler 🧱 ".repeat(40);
    let w = |subject: &str, i: usize| {
        req(
            subject,
            &format!("p{i}"),
            json!(format!("{filler}{i}")),
            "global",
            "t:1",
        )
    };
    for i in 0..60 {
        store.write(&w("user:kept", i)).unwrap();
    }
    // Written last, so they fill the end of the table's file.
    for i in 0..120 {
        store.write(&w("user:tail", i)).unwrap();
    }
    let pages = |raw: &mut postgres::Client| -> i64 {
        raw.query_one("SELECT pg_relation_size('memories') / 8192", &[])
            .unwrap()
            .get(0)
    };
    let before = pages(&mut raw);
    assert!(before >= 8, "{before} pages");
    // A reader's open transaction holds `memories` (its lock, not an old snapshot, which would
    // keep the deleted rows from the VACUUM).
    let mut reader = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let mut open = reader.transaction().unwrap();
    open.batch_execute("LOCK TABLE memories IN ACCESS SHARE MODE")
        .unwrap();
    let report = store
        .delete(&DeleteTarget::Subject("user:tail".into()), None)
        .unwrap();
    assert_eq!(report.tombstoned.len(), 120, "{report:?}");
    assert!(
        report.disk_purged,
        "the VACUUM completed: {:?}",
        report.disk_note
    );
    open.commit().unwrap();
    // Every dead row version is gone; the emptied pages stay in the file until rows reuse them.
    let dead: i64 = raw
        .query_one(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'memories'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(dead, 0);
    assert_eq!(
        pages(&mut raw),
        before,
        "the end of the file was not cut off"
    );
}

/// A delete that only blanks refused writes' sources — of an identity deleted before — is a
/// purge like any other (README, "Running on PostgreSQL"): the touched tables are vacuumed and
/// analyzed after it, so `pg_stats` forgets a source that repeated what the user deleted, as
/// no row holds it. (With the vacuum skipped after a source-only blank — the preview not
/// counting it as a change — the source stayed in `pg_stats`.)
#[test]
fn a_delete_that_only_blanks_refused_sources_vacuums_on_postgres() {
    use memscope::{DeleteTarget, Identity, Scope};
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let mut store = PgStore::open(&db.address()).unwrap();
    let secret = "REFUSED-拒绝的来源-🤐";
    let target = DeleteTarget::Identity(Identity {
        subject: "user:42".into(),
        predicate: "coffee".into(),
        scope: Scope::Global,
    });
    store
        .write(&req(
            "user:42",
            "coffee",
            json!("oat latte"),
            "global",
            "t:1",
        ))
        .unwrap();
    store.delete(&target, None).unwrap();
    for i in 0..5 {
        let w = req(
            "user:42",
            "coffee",
            json!(format!("latte {i}")),
            "global",
            &format!("{secret} said so"),
        );
        assert_eq!(store.write(&w).unwrap().outcome, OutcomeKind::Rejected);
    }
    for i in 0..5 {
        let w = req("user:7", &format!("p{i}"), json!("茶"), "global", "t:other");
        store.write(&w).unwrap();
    }
    raw.batch_execute("ANALYZE").unwrap();
    assert!(!stats_holding(&mut raw, secret).is_empty(), "planted");

    let preview = store.delete_preview(&target).unwrap();
    assert_eq!(preview.refused_sources, 5, "{preview:?}");
    assert!(preview.identities.is_empty(), "{preview:?}");
    let report = store.delete(&target, None).unwrap();
    assert_eq!(report.blanked_sources, 5, "{report:?}");
    assert!(report.tombstoned.is_empty(), "{report:?}");
    assert!(report.disk_purged, "{report:?}");
    let kept: i64 = raw
        .query_one(
            "SELECT count(*) FROM history h WHERE strpos(h::text, $1) > 0",
            &[&secret],
        )
        .unwrap()
        .get(0);
    assert_eq!(kept, 0, "no row holds the source");
    assert_eq!(stats_holding(&mut raw, secret), Vec::<String>::new());
    let rejected: i64 = raw
        .query_one("SELECT count(*) FROM history WHERE event = 'rejected'", &[])
        .unwrap()
        .get(0);
    assert_eq!(rejected, 5, "the events stay");
    assert!(store.check().unwrap().ok);
}

/// `memscope mcp --db postgres://…` serves agents from PostgreSQL: the incident replayed by an
/// agent in `legacy-dashboard` is queued (the agent told not to retry), recall answers with the
/// default, list_memories counts the waiting item, and forget deletes it for good.
#[test]
fn the_mcp_server_serves_agents_from_postgres() {
    use crate::support::mcp_session::{tool_text, RawSession};
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let mut s = RawSession::serve(
        &db.url,
        &[
            "--subject",
            "user:42",
            "--repo",
            "legacy-dashboard",
            "--allow-forget",
        ],
    );
    let call = |s: &mut RawSession, id: i64, name: &str, args: Value| {
        s.request(id, "tools/call", json!({"name": name, "arguments": args}))
    };
    let r = call(
        &mut s,
        2,
        "remember",
        json!({
        "predicate": "package_manager", "value": "pnpm", "scope": "global", "source": "thread:1",
        "raw": "以后新建前端项目，默认用 pnpm。"}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "inserted",
        "{r}"
    );
    let r = call(
        &mut s,
        3,
        "remember",
        json!({
        "predicate": "package_manager", "value": "npm", "scope": "global", "source": "thread:2",
        "raw": INCIDENT_WORDS}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "pending",
        "{r}"
    );
    assert!(tool_text(&r).contains("do not write it again"), "{r}");
    let r = call(&mut s, 4, "recall", json!({"predicate": "package_manager"}));
    assert_eq!(r["result"]["structuredContent"]["value"], "pnpm", "{r}");
    let r = call(&mut s, 5, "list_memories", json!({}));
    assert!(tool_text(&r).contains("1 write(s) of"), "{r}");
    let r = call(
        &mut s,
        6,
        "forget",
        json!({"predicate": "package_manager", "scope": "global"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(tool_text(&r).contains("forgotten"), "{r}");
    let r = call(
        &mut s,
        7,
        "remember",
        json!({"predicate": "package_manager", "value": "yarn", "scope": "global", "source": "thread:3"}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "rejected",
        "{r}"
    );
    let reads: i64 = raw
        .query_one(
            "SELECT count(*) FROM reads WHERE repo = 'legacy-dashboard'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(reads, 1, "the recall was logged");
}

/// A line PostgreSQL refuses (here a constraint the test adds; ids are held to memscope's own
/// limit before they get there, and a long source is indexed by its digest) fails alone in
/// `apply`, with a sentence; the lines around it land. A queued write whose source is
/// kilobytes long — refused by PostgreSQL's index until schema 9, found by review — is stored.
#[test]
fn a_line_postgres_refuses_fails_alone_in_apply() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    raw.batch_execute("ALTER TABLE pending ADD CONSTRAINT test_refuses CHECK (predicate <> 'b')")
        .unwrap();
    let mut store = PgStore::open(&db.address()).unwrap();
    // Random ideographs do not compress below the index's limit.
    let mut x: u32 = 7;
    let long: String = (0..3000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            char::from_u32(0x4e00 + (x >> 8) % 0x5000).unwrap()
        })
        .collect();
    let lines = [
        json!({"subject": "user:1", "predicate": "a", "value": "一", "scope": "global", "source": "t:1"}),
        json!({"subject": "user:1", "predicate": "b", "value": "二", "scope": {"ambiguous": ["global", "repo:x"]}, "source": "t:2"}),
        json!({"subject": "user:1", "predicate": "c", "value": "三 🎉", "scope": "global", "source": "t:3"}),
        json!({"subject": "user:1", "predicate": "d", "value": "四", "scope": {"ambiguous": ["global", "repo:x"]}, "source": format!("t:{long}")}),
        json!({"subject": "user:1", "predicate": "d", "value": "四", "scope": {"ambiguous": ["global", "repo:x"]}, "source": format!("t:{long}")}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut outcomes = Vec::new();
    let summary = store
        .apply(std::io::Cursor::new(input.into_bytes()), |batch| {
            outcomes.extend(batch.iter().cloned());
            Ok(())
        })
        .unwrap();
    assert_eq!(
        (summary.inserted, summary.pending, summary.errors),
        (2, 2, 1),
        "{outcomes:?}"
    );
    assert!(outcomes[1].error.is_some(), "{outcomes:?}");
    // The long source's write is queued once: its repeat is that item (found by the index).
    assert_eq!(
        outcomes[3].pending_id, outcomes[4].pending_id,
        "{outcomes:?}"
    );
    let n: i64 = raw
        .query_one("SELECT count(*) FROM memories", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 2);
    let h: i64 = raw
        .query_one("SELECT count(*) FROM history", &[])
        .unwrap()
        .get(0);
    assert_eq!(h, 2, "the refused line left no event");
    let p: i64 = raw
        .query_one("SELECT count(*) FROM pending", &[])
        .unwrap()
        .get(0);
    assert_eq!(p, 1, "only the long source's item");
}

/// The pending queue on PostgreSQL through the commands: the guard's queued write is listed
/// with its evidence, resolved into the repository through the write path (once, though two
/// people resolve it at once), and another item rejected.
#[test]
fn the_pending_queue_on_postgres() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    let memscope = |args: &[&str]| memscope_on(&db, home.path(), args);
    let mut store = PgStore::open(&db.address()).unwrap();
    let incident = incident("thread:2");
    let queued = store.write(&incident).unwrap();
    assert_eq!(queued.outcome, OutcomeKind::Pending);
    let other = store
        .write(&req(
            "user:42",
            "editor",
            json!("vim ✍"),
            "global,task:t1",
            "thread:3",
        ))
        .unwrap();
    let listed = memscope(&["pending"]);
    let text = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(
        listed.status.success() && text.contains("why: ") && text.contains("这个仓库"),
        "{listed:?}"
    );
    let id = queued.pending_id.unwrap().to_string();
    // Two resolve it at once: one resolves it, the other is told it already is.
    let both: Vec<std::process::Output> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    memscope(&[
                        "pending",
                        "resolve",
                        &id,
                        "--scope",
                        "repo:legacy-dashboard",
                        "--json",
                    ])
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let ok: Vec<&std::process::Output> = both.iter().filter(|o| o.status.success()).collect();
    assert_eq!(ok.len(), 1, "{both:?}");
    let out: Value = serde_json::from_slice(&ok[0].stdout).unwrap();
    assert_eq!(
        (out["outcome"].as_str(), out["scope"].as_str()),
        (Some("inserted"), Some("repo:legacy-dashboard")),
        "{out}"
    );
    let refused = both.iter().find(|o| !o.status.success()).unwrap();
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("already resolved"),
        "{refused:?}"
    );
    let r = store
        .resolve("user:42", "package_manager", Some("legacy-dashboard"), None)
        .unwrap();
    assert_eq!(r.value, Some(json!("npm")));
    let rejected = memscope(&["pending", "reject", &other.pending_id.unwrap().to_string()]);
    assert!(rejected.status.success(), "{rejected:?}");
    assert!(store.pending(false).unwrap().is_empty());
    let events: i64 = raw
        .query_one(
            "SELECT count(*) FROM history WHERE event = 'pending_resolved'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(events, 1);
}

/// Pending resolutions racing deletes of the scope they resolve into, in separate processes:
/// two resolvers force 24 items (candidates `global`, `task:t`) into `repo:r` while a third
/// process deletes and restores `repo:r` in a loop. What each was told is what the database
/// holds at the end: an item told `rejected` (the scope was deleted) is still open — the user's
/// words kept for another choice — since no delete of `repo:r` names it; an item told written is
/// resolved into `repo:r` with its event in history, or was destroyed by a later delete (which
/// counted it); no command failed; `check` is clean.
#[test]
fn pending_resolves_racing_deletes_of_their_scope_land_as_told_on_postgres() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    let memscope = |args: &[&str]| memscope_on(&db, home.path(), args);
    let mut store = PgStore::open(&db.address()).unwrap();
    const ITEMS: usize = 24;
    // Two more, resolved after the race: the deleter's last step was a restore, so they land
    // and stay.
    let ids: Vec<i64> = (0..ITEMS + 2)
        .map(|i| {
            let mut w = req(
                "race:1",
                "runner",
                json!(format!("跑 {i} 🏃")),
                "global,task:t",
                &format!("q:{i}"),
            );
            w.raw = Some(format!("用第 {i} 个"));
            store.write(&w).unwrap().pending_id.unwrap()
        })
        .collect();
    let stop = AtomicBool::new(false);
    let (told, deletes) = std::thread::scope(|s| {
        let resolvers: Vec<_> = (0..2)
            .map(|r| {
                let ids = &ids;
                let memscope = &memscope;
                s.spawn(move || {
                    ids[..ITEMS]
                        .iter()
                        .skip(r)
                        .step_by(2)
                        .map(|id| {
                            let out = memscope(&[
                                "pending",
                                "resolve",
                                &id.to_string(),
                                "--scope",
                                "repo:r",
                                "--force",
                                "--json",
                            ]);
                            (*id, out)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let deleter = s.spawn(|| {
            let mut reports = Vec::new();
            while !stop.load(Ordering::SeqCst) || reports.len() < 3 {
                let d = memscope(&[
                    "delete",
                    "--subject",
                    "race:1",
                    "--predicate",
                    "runner",
                    "--scope",
                    "repo:r",
                    "--json",
                ]);
                let r = memscope(&[
                    "restore",
                    "--subject",
                    "race:1",
                    "--predicate",
                    "runner",
                    "--scope",
                    "repo:r",
                ]);
                reports.push((d, r));
            }
            reports
        });
        // The deleter stopped before a failed resolver's panic is raised: raised first, it left
        // the deleter looping and the scope waiting on it for ever.
        let joined: Vec<_> = resolvers.into_iter().map(|r| r.join()).collect();
        stop.store(true, Ordering::SeqCst);
        let deletes = deleter.join().unwrap();
        let told: Vec<(i64, std::process::Output)> = joined
            .into_iter()
            .flat_map(|r| r.unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect();
        (told, deletes)
    });
    let mut told = told;
    for id in &ids[ITEMS..] {
        let id_text = id.to_string();
        let args = [
            "pending", "resolve", &id_text, "--scope", "repo:r", "--force", "--json",
        ];
        told.push((*id, memscope(&args)));
    }

    // Deletes and restores: each succeeded, or was refused in one sentence because the
    // identity had nothing yet (no resolution had landed) or was not deleted.
    let mut purged = 0;
    for (d, r) in &deletes {
        if d.status.success() {
            let report: Value = serde_json::from_slice(&d.stdout).unwrap();
            purged += report["purged_pending"].as_i64().unwrap();
        } else {
            let e = String::from_utf8_lossy(&d.stderr);
            assert!(e.contains("no memory") && e.lines().count() == 1, "{d:?}");
        }
        let e = String::from_utf8_lossy(&r.stderr);
        assert!(
            r.status.success() || (e.contains("not deleted") && e.lines().count() == 1),
            "{r:?}"
        );
    }
    let state = |raw: &mut postgres::Client, id: i64| -> Option<(String, Option<String>, String)> {
        raw.query_opt(
            "SELECT status, resolved_scope, source FROM pending WHERE id = $1",
            &[&id],
        )
        .unwrap()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
    };
    let (mut rejected, mut landed, mut gone) = (0, 0, 0);
    for (id, out) in &told {
        let o: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("item {id}: {e}: {out:?}"));
        let outcome = o["outcome"].as_str().unwrap().to_string();
        // A rejected write exits 1, as `write` does; every other outcome 0.
        let code = if outcome == "rejected" { 1 } else { 0 };
        assert_eq!(out.status.code(), Some(code), "item {id}: {out:?}");
        match (outcome.as_str(), state(&mut raw, *id)) {
            ("rejected", Some((status, None, _))) if status == "open" => rejected += 1,
            ("rejected", other) => panic!("item {id} told rejected, holds {other:?}"),
            ("inserted" | "superseded" | "confirmed" | "stale", None) => gone += 1,
            (
                "inserted" | "superseded" | "confirmed" | "stale",
                Some((status, Some(scope), source)),
            ) if status == "resolved" && scope == "repo:r" => {
                let events: i64 = raw
                    .query_one(
                        "SELECT count(*) FROM history WHERE subject = 'race:1' AND scope = 'repo:r'
                         AND source = $1 AND event IN ('set', 'confirmed', 'stale') AND value IS NOT NULL",
                        &[&source],
                    )
                    .unwrap()
                    .get(0);
                assert!(
                    events >= 1,
                    "item {id} told {outcome}: its event is in history"
                );
                landed += 1;
            }
            (outcome, other) => panic!("item {id} told {outcome}, holds {other:?}"),
        }
    }
    assert_eq!(told.len(), ITEMS + 2);
    assert!(
        landed >= 2,
        "the items resolved after the race landed and stayed"
    );
    assert_eq!(
        purged, gone,
        "every item gone was counted by the delete that destroyed it"
    );
    let report = store.check().unwrap();
    assert!(report.ok, "{:?}", report.violations);
    eprintln!(
        "{} delete rounds; resolutions: {landed} landed and kept, {gone} landed then deleted, {rejected} rejected and kept open",
        deletes.len()
    );
}

/// The columns whose planner statistics (`pg_stats`: most common values, histogram bounds …)
/// hold `needle`, as `table.column` — what any role with SELECT on the table can read.
pub(crate) fn stats_holding(raw: &mut postgres::Client, needle: &str) -> Vec<String> {
    raw.query(
        "SELECT s.tablename || '.' || s.attname FROM pg_stats s
         WHERE s.schemaname = current_schema() AND strpos(s::text, $1) > 0 ORDER BY 1",
        &[&needle],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// A delete on PostgreSQL destroys the content in every table that held it, in one
/// transaction: the record, its history (a content-free `deleted` event stays), the pending item
/// naming it, the note of a read — a later write is rejected, the preview (`--dry-run`) counts
/// what the delete then destroys, and nothing else of the subject is touched.
#[test]
fn a_delete_on_postgres_destroys_the_content_everywhere_it_was() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    let memscope = |args: &[&str]| memscope_on(&db, home.path(), args);
    let mut store = PgStore::open(&db.address()).unwrap();
    let canary = "CANARY-秘密-🦜-4417";
    for (value, source) in [
        (format!("{canary} v1"), "t:1"),
        (format!("{canary} v2"), "t:2"),
    ] {
        let mut w = req("user:42", "api_token", json!(value), "repo:shop", source);
        w.raw = Some(format!("the token is {canary}"));
        store.write(&w).unwrap();
    }
    store
        .write(&req(
            "user:42",
            "api_token",
            json!(format!("{canary} queued")),
            "global,repo:shop",
            "t:3",
        ))
        .unwrap();
    store
        .resolve_logged(
            "user:42",
            "api_token",
            Some("shop"),
            None,
            Some("agent"),
            Some(&format!("note {canary}")),
        )
        .unwrap();
    store
        .write(&req("user:42", "editor", json!("vim"), "repo:shop", "t:4"))
        .unwrap();
    let target = [
        "delete",
        "--subject",
        "user:42",
        "--predicate",
        "api_token",
        "--scope",
        "repo:shop",
    ];
    let preview = memscope(&[&target[..], &["--dry-run", "--json"]].concat());
    assert!(preview.status.success(), "{preview:?}");
    let preview: Value = serde_json::from_slice(&preview.stdout).unwrap();
    let counts = |v: &Value, keys: [&str; 4]| keys.map(|k| v[k].as_i64());
    assert_eq!(
        counts(
            &preview,
            ["live_records", "versions", "pending_items", "read_notes"]
        ),
        [Some(1), Some(2), Some(1), Some(1)],
        "{preview}"
    );
    // What the preview promises past the tables is PostgreSQL's, not a SQLite file's.
    assert_eq!(preview["on_disk"], "vacuumed", "{preview}");
    let said = memscope(&[&target[..], &["--dry-run"]].concat());
    let said = String::from_utf8_lossy(&said.stdout);
    assert!(
        said.contains("vacuum the tables; the WAL and backups may still hold it"),
        "{said}"
    );
    assert!(!said.contains("no copy stays in any file"), "{said}");
    // The planner's statistics hold the canary once the tables are analyzed, as autovacuum
    // does by itself on a busy database.
    raw.batch_execute("ANALYZE").unwrap();
    assert!(
        !stats_holding(&mut raw, "CANARY").is_empty(),
        "the canary is in the statistics before the delete"
    );
    let out = memscope(&[&target[..], &["--json"]].concat());
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        counts(
            &report,
            [
                "purged_versions",
                "purged_pending",
                "purged_notes",
                "purged_versions"
            ]
        ),
        [Some(2), Some(1), Some(1), Some(2)],
        "{report}"
    );
    assert_eq!(report["disk_purged"], true, "{report}");
    let note = report["disk_note"].as_str().unwrap_or_default();
    assert!(
        note.contains("vacuumed") && note.contains("WAL, replicas and backups"),
        "{report}"
    );
    // What the README promises past the rows: the touched tables were vacuumed.
    for table in ["memories", "history", "pending", "reads"] {
        let vacuumed: bool = raw
            .query_one(
                "SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relname = $1",
                &[&table],
            )
            .unwrap()
            .get(0);
        assert!(vacuumed, "{table} was not vacuumed after the delete");
    }
    // No row anywhere still holds the canary.
    for (table, cols) in [
        ("memories", "value || coalesce(raw, '')"),
        (
            "history",
            "coalesce(value, '') || coalesce(raw, '') || coalesce(detail, '')",
        ),
        ("pending", "value || coalesce(raw, '')"),
        ("reads", "coalesce(note, '')"),
        ("tombstones", "coalesce(reason, '')"),
    ] {
        let sql = format!("SELECT count(*) FROM {table} WHERE {cols} LIKE '%CANARY%'");
        let n: i64 = raw.query_one(sql.as_str(), &[]).unwrap().get(0);
        assert_eq!(n, 0, "{table} still holds the canary");
    }
    // Nor does any statistic `pg_stats` shows a role that may read the tables.
    assert_eq!(stats_holding(&mut raw, "CANARY"), Vec::<String>::new());
    let events: Vec<String> = raw
        .query(
            "SELECT event FROM history WHERE predicate = 'api_token'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(events, ["deleted"]);
    let again = store
        .write(&req(
            "user:42",
            "api_token",
            json!("new"),
            "repo:shop",
            "t:5",
        ))
        .unwrap();
    assert_eq!(again.outcome, OutcomeKind::Rejected);
    let r = store
        .resolve("user:42", "api_token", Some("shop"), None)
        .unwrap();
    assert_eq!(r.considered[0].state, "deleted");
    // Restored: writes are accepted again, from the version after the deleted ones.
    let restored = memscope(&[
        "restore",
        "--subject",
        "user:42",
        "--predicate",
        "api_token",
        "--scope",
        "repo:shop",
    ]);
    assert!(restored.status.success(), "{restored:?}");
    let back = store
        .write(&req(
            "user:42",
            "api_token",
            json!("new 🆕"),
            "repo:shop",
            "t:6",
        ))
        .unwrap();
    assert_eq!(
        (back.outcome, back.version),
        (OutcomeKind::Inserted, Some(4)),
        "{back:?}"
    );
    let kept = store
        .resolve("user:42", "editor", Some("shop"), None)
        .unwrap();
    assert_eq!(
        kept.value,
        Some(json!("vim")),
        "the rest of the subject is untouched"
    );
    let none = memscope(&[
        "delete",
        "--subject",
        "user:42",
        "--predicate",
        "never",
        "--scope",
        "global",
    ]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("there is no memory"),
        "{none:?}"
    );
}

/// Ends the session of the database that waits for a lock, once one does.
fn end_the_waiting_session(raw: &mut postgres::Client) {
    for _ in 0..1000 {
        let ended = raw
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .unwrap();
        if !ended.is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("no session came to wait for the lock");
}

/// A foreign session's transaction holding `subject`'s records.
fn holding<'a>(client: &'a mut postgres::Client, subject: &str) -> postgres::Transaction<'a> {
    let mut tx = client.transaction().unwrap();
    tx.execute(
        "SELECT 1 FROM memories WHERE subject = $1 FOR UPDATE",
        &[&subject],
    )
    .unwrap();
    tx
}

/// A connection the server closed under a long-lived store (an MCP server's) while it was idle
/// — a restart, an administrator, an idle timeout — is opened again by the next call, which
/// runs on it: nothing of it had reached the server (found by an exploratory test: that call
/// failed, a read saying a write might have landed). A call cut in the middle of its
/// transaction fails with one sentence saying the server rolled it back, stores nothing, and
/// the next call works.
#[test]
fn a_store_reconnects_after_the_server_closed_its_connection() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let mut store = PgStore::open(&db.address()).unwrap();
    store
        .write(&req("user:1", "editor", json!("vim"), "global", "t:1"))
        .unwrap();
    crate::support::end_other_sessions(&mut raw);
    let out = store
        .write(&req("user:1", "editor", json!("helix 🧬"), "global", "t:2"))
        .expect("a write after an idle cut runs on a new connection");
    assert!(matches!(out.outcome, OutcomeKind::Superseded), "{out:?}");
    crate::support::end_other_sessions(&mut raw);
    let r = store
        .resolve("user:1", "editor", None, None)
        .expect("a read after an idle cut runs on a new connection");
    assert_eq!(r.value, Some(json!("helix 🧬")));

    // Cut while it waits for a row another session holds.
    let events = |raw: &mut postgres::Client| -> i64 {
        raw.query_one("SELECT count(*) FROM history", &[])
            .unwrap()
            .get(0)
    };
    let before = events(&mut raw);
    let mut locker = db.client();
    let held = holding(&mut locker, "user:1");
    let cut = std::thread::scope(|s| {
        s.spawn(|| end_the_waiting_session(&mut raw));
        store.write(&req("user:1", "editor", json!("emacs 🐃"), "global", "t:3"))
    });
    held.rollback().unwrap();
    let said = format!("{:#}", cut.expect_err("the cut connection fails the call"));
    crate::support::assert_one_sentence(
        &said,
        &["was lost", "rolls that transaction back", "run it again"],
    );
    assert!(!said.contains("may or may not"), "{said}");
    assert_eq!(events(&mut raw), before, "the cut write stored nothing");
    let out = store
        .write(&req("user:1", "editor", json!("emacs 🐃"), "global", "t:3"))
        .unwrap();
    assert!(matches!(out.outcome, OutcomeKind::Superseded), "{out:?}");
    let r = store.resolve("user:1", "editor", None, None).unwrap();
    assert_eq!(r.value, Some(json!("emacs 🐃")));
}

/// A write's record and its history event carry one time. Each column used to call the clock
/// when it was filled, so a record could be dated a millisecond before its `set` event (rare
/// on a quiet server; every time behind a trigger that takes a few milliseconds, as here).
#[test]
fn a_record_and_its_event_are_dated_alike_on_postgres() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    raw.batch_execute(
        "CREATE FUNCTION slow_record() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM pg_sleep(0.005); RETURN NEW; END $$;
         CREATE TRIGGER slow_record BEFORE INSERT OR UPDATE ON memories
             FOR EACH ROW EXECUTE FUNCTION slow_record();",
    )
    .unwrap();
    let mut store = PgStore::open(&db.address()).unwrap();
    for (value, source, outcome) in [
        ("vim 🖊", "t:1", "inserted"),
        ("helix 🧬", "t:2", "superseded"),
        ("helix 🧬", "t:3", "confirmed"),
    ] {
        let out = store
            .write(&req("user:1", "editor", json!(value), "global", source))
            .unwrap();
        assert_eq!(out.outcome.to_string(), outcome, "{out:?}");
        let row = raw
            .query_one(
                "SELECT m.created_at = s.at, m.updated_at = s.at,
                        m.confirmed_at IS NOT DISTINCT FROM c.at,
                        m.updated_at::text, s.at::text, c.at::text
                 FROM memories m
                 JOIN LATERAL (SELECT at FROM history WHERE event = 'set' AND version = m.version
                               AND subject = m.subject AND predicate = m.predicate
                               AND scope = m.scope) s ON true
                 LEFT JOIN LATERAL (SELECT max(at) AS at FROM history WHERE event = 'confirmed'
                                    AND version = m.version AND subject = m.subject
                                    AND predicate = m.predicate AND scope = m.scope) c ON true
                 WHERE m.subject = 'user:1'",
                &[],
            )
            .unwrap();
        let (updated, set, confirmed): (Option<String>, Option<String>, Option<String>) =
            (row.get(3), row.get(4), row.get(5));
        if outcome == "inserted" {
            assert!(row.get::<_, bool>(0), "created {updated:?}, set {set:?}");
        }
        assert!(
            row.get::<_, bool>(1),
            "{outcome}: updated {updated:?}, set {set:?}"
        );
        assert!(row.get::<_, bool>(2), "{outcome}: confirmed {confirmed:?}");
    }
    // `apply`'s batches: every record the batch stored or moved, dated as its event.
    let lines: String = (0..6)
        .map(|i| {
            format!(
                "{{\"subject\":\"user:1\",\"predicate\":\"p{}\",\"value\":\"v{i} 值\",\"scope\":\"global\",\"source\":\"a:{i}\"}}\n",
                i % 3
            )
        })
        .collect();
    store
        .apply(std::io::Cursor::new(lines.into_bytes()), |_| Ok(()))
        .unwrap();
    let apart: Vec<String> = raw
        .query(
            "SELECT m.predicate || ' v' || m.version || ': ' || m.updated_at::text || ' / '
                    || h.at::text
             FROM memories m JOIN history h ON h.event = 'set' AND h.version = m.version
                  AND h.subject = m.subject AND h.predicate = m.predicate AND h.scope = m.scope
             WHERE m.predicate LIKE 'p%' AND m.updated_at <> h.at",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        apart.is_empty(),
        "apply dated records apart from their events: {apart:?}"
    );
}

/// A connection the server ends while a call's COMMIT is on its way leaves the commit unknown,
/// and the call says so in its own terms: a write "may or may not have been committed" (run it
/// again: a stored one comes back `confirmed`), a logged read "may or may not have been logged"
/// (found by an exploratory run: a `recall` cut inside its COMMIT was given the write's advice),
/// and any other change that it may or may not have landed, to look before running it again.
/// The cut comes from a deferred trigger that ends its own session at COMMIT.
#[test]
fn a_call_cut_inside_its_commit_says_what_it_may_have_stored() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let mut store = PgStore::open(&db.address()).unwrap();
    store
        .write(&req("user:1", "editor", json!("vim"), "global", "t:1"))
        .unwrap();
    raw.batch_execute(
        "CREATE FUNCTION cut_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); RETURN NULL; END $$;
         CREATE CONSTRAINT TRIGGER cut_at_commit AFTER INSERT ON reads
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION cut_at_commit();
         CREATE CONSTRAINT TRIGGER cut_at_commit AFTER INSERT ON history
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION cut_at_commit();",
    )
    .unwrap();
    let read = store
        .resolve_logged(
            "user:1",
            "editor",
            Some("shop 🛒"),
            None,
            Some("agent"),
            None,
        )
        .expect_err("the logged read's COMMIT was cut");
    assert!(memscope::store::commit_unknown(&read), "{read:#}");
    let said = format!("{read:#}");
    crate::support::assert_one_sentence(
        &said,
        &[
            "was lost",
            "may or may not have been logged",
            "run it again",
        ],
    );
    assert!(
        !said.contains("confirmed"),
        "a read is given no write's advice: {said}"
    );

    let write = store
        .write(&req("user:1", "editor", json!("helix 🧬"), "global", "t:2"))
        .expect_err("the write's COMMIT was cut");
    assert!(memscope::store::commit_unknown(&write), "{write:#}");
    let said = format!("{write:#}");
    crate::support::assert_one_sentence(
        &said,
        &[
            "was lost",
            "may or may not have been committed",
            "`confirmed`",
        ],
    );
    // Found by review: a delete was given the write's advice too.
    let target = memscope::DeleteTarget::Subject("user:1".into());
    let delete = store
        .delete(&target, None)
        .expect_err("the delete's COMMIT was cut");
    assert!(memscope::store::commit_unknown(&delete), "{delete:#}");
    let said = format!("{delete:#}");
    crate::support::assert_one_sentence(
        &said,
        &[
            "was lost",
            "may or may not have been",
            "look before running it again",
        ],
    );
    assert!(
        !said.contains("confirmed"),
        "a delete is given no write's advice: {said}"
    );
    raw.batch_execute("DROP TRIGGER cut_at_commit ON reads; DROP TRIGGER cut_at_commit ON history")
        .unwrap();
    let r = store
        .resolve_logged("user:1", "editor", None, None, Some("agent"), None)
        .expect("the next call connects again");
    assert_eq!(r.value, Some(json!("vim")), "the cut write rolled back");
}

/// The same under an MCP server: after the server ended its idle connection, `remember` and
/// `recall` work on a new one; a `remember` cut while it waits for a lock tells the agent its
/// transaction was rolled back (never that it may have landed, which it cannot have), and the
/// next call works.
#[test]
fn an_mcp_server_reconnects_and_says_a_cut_call_was_rolled_back_on_postgres() {
    use crate::support::mcp_session::{tool_text, RawSession};
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let mut mcp = RawSession::serve(&db.url, &["--subject", "user:42", "--repo", "shop"]);
    let remember =
        |value: &str, id: i64| crate::support::mcp_session::remember_test_runner(id, value);
    let call = |mcp: &mut RawSession, msg: Value| {
        let id = msg["id"].as_i64().unwrap();
        mcp.send(msg);
        mcp.until_id(id).0
    };
    let first = call(&mut mcp, remember("vitest", 2));
    assert_eq!(first["result"]["isError"], false, "{first}");
    crate::support::end_other_sessions(&mut raw);
    let next = call(&mut mcp, remember("jest 🃏", 3));
    assert_eq!(next["result"]["isError"], false, "{next}");
    assert_eq!(
        next["result"]["structuredContent"]["outcome"], "superseded",
        "{next}"
    );
    crate::support::end_other_sessions(&mut raw);
    let recall = call(
        &mut mcp,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "recall", "arguments": {"predicate": "test_runner"}}}),
    );
    assert_eq!(recall["result"]["isError"], false, "{recall}");
    assert!(tool_text(&recall).contains("jest 🃏"), "{recall}");

    let mut locker = db.client();
    let held = holding(&mut locker, "user:42");
    mcp.send(remember("mocha ☕", 5));
    end_the_waiting_session(&mut raw);
    let cut = mcp.until_id(5).0;
    held.rollback().unwrap();
    assert_eq!(cut["result"]["isError"], true, "{cut}");
    let said = tool_text(&cut);
    assert!(
        said.contains("rolls that transaction back") && said.contains("run it again"),
        "{said}"
    );
    assert!(!said.contains("may or may not"), "{said}");
    let last = call(&mut mcp, remember("mocha ☕", 6));
    assert_eq!(last["result"]["isError"], false, "{last}");
    assert_eq!(
        last["result"]["structuredContent"]["outcome"], "superseded",
        "{last}"
    );
}

/// Found by an exploratory test: with the database dropped and made again under an MCP server,
/// its next `remember` said "function memscope_write_look(...) does not exist". A call now says
/// the database no longer holds memscope's schema and to prepare it with `init`; once it is
/// prepared, the next call works.
#[test]
fn an_mcp_server_whose_database_was_made_again_says_to_prepare_it_on_postgres() {
    use crate::support::mcp_session::{tool_text, RawSession};
    let Some(server) = server() else { return };
    let (db, raw) = FreshDb::prepared(&server);
    drop(raw);
    let mut mcp = RawSession::serve(&db.url, &["--subject", "user:42", "--repo", "shop"]);
    let remember = |mcp: &mut RawSession, id: i64| {
        mcp.request(
            id,
            "tools/call",
            json!({"name": "remember", "arguments": {
                "predicate": "test_runner", "value": "vitest 🧪", "scope": "repo",
                "source": format!("mcp:{id}")}}),
        )
    };
    let first = remember(&mut mcp, 2);
    assert_eq!(first["result"]["isError"], false, "{first}");
    let mut admin = postgres::Client::connect(&server, postgres::NoTls).unwrap();
    // FORCE may not end a session of another role in it — an autovacuum worker that came by
    // (found by CI): the drop is tried again once it has gone.
    let drop = format!("DROP DATABASE {} WITH (FORCE)", db.name);
    let mut dropped = admin.batch_execute(&drop);
    for _ in 0..100 {
        if dropped.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        dropped = admin.batch_execute(&drop);
    }
    dropped.unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {}", db.name))
        .unwrap();
    let recall = mcp.request(
        3,
        "tools/call",
        json!({"name": "recall", "arguments": {"predicate": "test_runner"}}),
    );
    for (said, call) in [(remember(&mut mcp, 4), "remember"), (recall, "recall")] {
        assert_eq!(said["result"]["isError"], true, "{call}: {said}");
        let text = tool_text(&said);
        assert!(
            text.contains("no longer holds memscope's schema") && text.contains("init"),
            "{call}: {text}"
        );
        assert!(!text.contains("memscope check"), "{call}: {text}");
    }
    memscope::store::postgres::schema::migrate(&mut db.client()).unwrap();
    let again = remember(&mut mcp, 5);
    assert_eq!(again["result"]["isError"], false, "{again}");
    assert_eq!(
        again["result"]["structuredContent"]["outcome"], "inserted",
        "{again}"
    );
}

/// Found by an exploratory test: behind another session's `LOCK TABLE`, an MCP server's queued
/// calls each waited the whole lock timeout in turn (the third answered after 39 s, past a
/// host's tool timeout). After one call gave up, the calls after it give up at once, saying the
/// lock is still held and that they changed nothing; once it is gone, calls work again.
#[test]
fn an_mcp_server_waits_for_a_held_lock_once_on_postgres() {
    use crate::support::mcp_session::{tool_text, RawSession};
    let Some(server) = server() else { return };
    let (db, _raw) = FreshDb::prepared(&server);
    let mut mcp = RawSession::serve_with(
        &db.url,
        &["--subject", "user:42", "--repo", "shop"],
        &[("MEMSCOPE_BUSY_TIMEOUT_MS", "700")],
    );
    let remember = crate::support::mcp_session::remember_test_runner;
    mcp.send(remember(2, "vitest 🧪"));
    assert_eq!(mcp.until_id(2).0["result"]["isError"], false);
    let mut locker = db.client();
    locker
        .batch_execute(
            "BEGIN; LOCK TABLE memories, history, pending, tombstones, reads IN ACCESS EXCLUSIVE MODE",
        )
        .unwrap();
    mcp.send(remember(3, "jest 🃏"));
    mcp.send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "recall", "arguments": {"predicate": "test_runner"}}}),
    );
    mcp.send(remember(5, "mocha ☕"));
    // The calls take turns in the order they were sent (before 2026-12-05 in whichever order
    // the server's threads reached the store: the clean-clone CI saw the recall go first):
    // the first waits, the two after it give up at once.
    let waited = tool_text(&mcp.until_id(3).0);
    assert!(
        waited.contains("held by another session for more than 700 ms"),
        "{waited}"
    );
    for id in [4, 5] {
        let answer = mcp.until_id(id).0;
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let said = tool_text(&answer);
        assert!(
            said.contains("still has a lock")
                && said.contains("gave up at once and changed nothing"),
            "{id}: {said}"
        );
    }
    locker.batch_execute("COMMIT").unwrap();
    mcp.send(remember(6, "mocha ☕"));
    let last = mcp.until_id(6).0;
    assert_eq!(last["result"]["isError"], false, "{last}");
    assert_eq!(
        last["result"]["structuredContent"]["outcome"], "superseded",
        "{last}"
    );
}

/// Writers killed with SIGKILL in the middle of their `apply` transactions, twenty rounds (a
/// few let it finish): the server rolls each cut transaction back whole — after every round
/// the log grew by all of the batch or by none of it, every identity's versions are contiguous
/// and its current record is its last event — and a final replay converges on the input's
/// last values.
#[test]
fn writers_killed_mid_apply_leave_nothing_half_written_on_postgres() {
    use std::io::Write;
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    // One batch: `apply` commits 10,000 lines at a time.
    const LINES: usize = 10_000;
    const PREDICATES: usize = 60;
    let mut input = String::new();
    for i in 0..LINES {
        input.push_str(
            &serde_json::to_string(&json!({
                "subject": "user:1", "predicate": format!("p_{}", i % PREDICATES), "scope": "global",
                "value": format!("值 {i} 🔪"), "source": format!("s:{i}"),
            }))
            .unwrap(),
        );
        input.push('\n');
    }
    let run = |kill_after: Option<u64>| {
        let mut child = crate::support::memscope_cmd(home.path())
            .args(["--db", &db.url, "apply", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let text = input.clone();
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(text.as_bytes());
        });
        if let Some(ms) = kill_after {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            let _ = child.kill(); // SIGKILL
        }
        let status = child.wait().unwrap();
        let _ = feeder.join();
        status
    };
    let sets = |raw: &mut postgres::Client| -> i64 {
        raw.query_one("SELECT count(*) FROM history WHERE event = 'set'", &[])
            .unwrap()
            .get(0)
    };
    // The kills land at fractions of how long a whole run takes here, not at fixed times: the
    // faster `apply` gets, the earlier they land.
    let started = std::time::Instant::now();
    assert!(run(None).success(), "a first, whole apply");
    let whole_run = started.elapsed().as_millis() as u64;
    let (mut cut, mut whole) = (0, 0);
    for round in 0..20u64 {
        let before = sets(&mut raw);
        // Most rounds are killed within the transaction; every fifth runs to its end.
        run((round % 5 != 4).then_some(whole_run * (5 + (round * 37) % 70) / 100));
        let grew = sets(&mut raw) - before;
        match grew {
            0 => cut += 1,
            n if n == LINES as i64 => whole += 1,
            n => panic!("round {round}: the log grew by {n} set events, not 0 or {LINES}"),
        }
        let broken: i64 = raw
            .query_one(
                "SELECT count(*) FROM (
                   SELECT count(*) AS n, count(DISTINCT h.version) AS d, max(h.version) AS top,
                          (SELECT m.version FROM memories m WHERE m.subject = h.subject AND m.predicate = h.predicate
                             AND m.scope = h.scope) AS cur
                   FROM history h WHERE h.event = 'set' GROUP BY h.subject, h.predicate, h.scope) g
                 WHERE n <> d OR top <> n OR cur IS DISTINCT FROM top",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(
            broken, 0,
            "round {round}: an identity was left half-written"
        );
    }
    assert!(
        cut >= 10,
        "the kills landed inside transactions ({cut} cut, {whole} whole)"
    );
    assert!(run(None).success(), "a replay");
    let mut store = PgStore::open(&db.address()).unwrap();
    for k in 0..PREDICATES {
        let last = (0..LINES).rev().find(|i| i % PREDICATES == k).unwrap();
        let r = store
            .resolve("user:1", &format!("p_{k}"), None, None)
            .unwrap();
        assert_eq!(r.value, Some(json!(format!("值 {last} 🔪"))), "p_{k}");
    }
}

/// `memscope settings` on PostgreSQL: the same checks as on SQLite, the scope guard's mode
/// changed for every writer of the database, durability refused as the file's setting.
#[test]
fn settings_on_postgres_change_the_guard_for_every_writer() {
    let Some(server) = server() else { return };
    let (db, _raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    let memscope = |args: &[&str]| memscope_on(&db, home.path(), args);
    let shown = memscope(&["settings", "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["scope_guard"], "queue", "{shown}");
    assert!(shown.get("durability").is_none(), "{shown}");
    let bad = memscope(&["settings", "set", "scope_guard", "maybe 🤔"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("queue, flag or off"),
        "{bad:?}"
    );
    let durability = memscope(&["settings", "set", "durability", "normal"]);
    assert_eq!(durability.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&durability.stderr).contains("synchronous_commit"),
        "{durability:?}"
    );
    assert!(memscope(&["settings", "set", "scope_guard", "OFF"])
        .status
        .success());
    // Another writer's next incident write is applied, no longer queued.
    let mut store = PgStore::open(&db.address()).unwrap();
    let incident = incident("thread:2");
    assert_eq!(
        store.write(&incident).unwrap().outcome,
        OutcomeKind::Inserted
    );
}

/// Two `memscope mcp` servers on one PostgreSQL database, each sent its `remember` calls all at
/// once (as a host forwards a model's parallel tool calls): every call is answered, and the
/// database holds exactly what the agents were told — each `inserted`/`superseded` version in
/// history once, versions contiguous, the last one current.
#[test]
fn parallel_tool_calls_on_two_mcp_servers_land_as_told_on_postgres() {
    use crate::support::mcp_session::RawSession;
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    const CALLS: i64 = 25;
    let mut sessions: Vec<RawSession> = (0..2)
        .map(|_| RawSession::serve(&db.url, &["--subject", "user:42", "--repo", "shop"]))
        .collect();
    for (n, s) in sessions.iter_mut().enumerate() {
        for i in 0..CALLS {
            s.send(
                json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {
                "name": "remember", "arguments": {
                    "predicate": "test_runner", "value": format!("server {n} 调用 {i} 🧪"),
                    "scope": "repo", "source": format!("mcp:{n}/{i}")}}}),
            );
        }
    }
    let mut told: Vec<(String, i64, Value)> = Vec::new();
    for s in &mut sessions {
        let mut answers: std::collections::BTreeMap<i64, Value> = Default::default();
        for id in 100..100 + CALLS {
            if answers.contains_key(&id) {
                continue;
            }
            let (answer, others) = s.until_id(id);
            for m in others.into_iter().chain([answer]) {
                if let Some(k) = m["id"].as_i64() {
                    answers.insert(k, m);
                }
            }
        }
        assert_eq!(answers.len() as i64, CALLS);
        for a in answers.values() {
            let got = &a["result"]["structuredContent"];
            assert_eq!(a["result"]["isError"], false, "{a}");
            told.push((
                got["outcome"].as_str().unwrap().to_string(),
                got["version"].as_i64().unwrap(),
                got["value"].clone(),
            ));
        }
    }
    let mut stored: Vec<(i64, String)> = raw
        .query(
            "SELECT version, value FROM history WHERE predicate = 'test_runner' AND event = 'set' ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let mut answered: Vec<(i64, String)> = told
        .iter()
        .filter(|t| t.0 == "inserted" || t.0 == "superseded")
        .map(|t| (t.1, t.2.to_string()))
        .collect();
    answered.sort();
    stored.sort();
    assert_eq!(
        stored, answered,
        "history holds exactly what the agents were told"
    );
    let versions: Vec<i64> = stored.iter().map(|s| s.0).collect();
    assert_eq!(versions, (1..=2 * CALLS).collect::<Vec<_>>());
    let current: i64 = raw
        .query_one(
            "SELECT version FROM memories WHERE predicate = 'test_runner' AND scope = 'repo:shop'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(current, 2 * CALLS);
}

/// A connection the server takes no writes on (a standby; here `default_transaction_read_only`,
/// as a replica's connections are): recall answers without logging the read, a write is
/// refused in one sentence naming the primary, nothing is written.
#[test]
fn a_read_only_connection_answers_reads_and_refuses_writes_in_one_sentence() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    let mut primary = PgStore::open(&db.address()).unwrap();
    assert!(!primary.is_read_only());
    primary
        .write(&req(
            "user:42",
            "package_manager",
            json!("pnpm"),
            "global",
            "t1",
        ))
        .unwrap();
    let replica_url = format!("{}?options=-c%20default_transaction_read_only%3Don", db.url);
    let address = memscope::store::postgres::Address::recognise(std::ffi::OsStr::new(&replica_url))
        .unwrap()
        .unwrap();
    let mut replica = PgStore::open(&address).unwrap();
    assert!(replica.is_read_only());
    let r = replica
        .resolve("user:42", "package_manager", Some("web"), None)
        .unwrap();
    assert_eq!(r.value, Some(json!("pnpm")));

    // The MCP server there: recall answers, says the read was not logged.
    let home = tempfile::tempdir().unwrap();
    let mut mcp = crate::support::memscope_cmd(home.path());
    mcp.args([
        "--db",
        &replica_url,
        "mcp",
        "--subject",
        "user:42",
        "--repo",
        "web",
    ])
    .env_remove("MEMSCOPE_AGENT");
    let mut session = crate::support::mcp_session::RawSession::start(mcp);
    session.initialize();
    let recall = session.request(
        2,
        "tools/call",
        json!({"name": "recall", "arguments": {"predicate": "package_manager"}}),
    );
    let text = crate::support::mcp_session::tool_text(&recall);
    assert!(
        text.contains("pnpm") && text.contains("not logged"),
        "{recall}"
    );
    let (code, stderr) = session.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("read-only"), "{stderr}");

    // A write: one sentence, exit 1, nothing written.
    let out = memscope_on_url(
        &replica_url,
        home.path(),
        &[
            "write",
            "--subject",
            "user:42",
            "--predicate",
            "editor",
            "--value",
            "vim",
            "--scope",
            "global",
            "--source",
            "t2",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    crate::support::assert_one_sentence(
        &String::from_utf8_lossy(&out.stderr),
        &[
            "takes no writes on this connection",
            "point writers at the primary",
        ],
    );
    assert_eq!(primary.current().unwrap().len(), 1);
    assert_eq!(primary.reads(&Default::default()).unwrap().len(), 0);
}

/// The real binary on `--db url`, run to its end.
fn memscope_on_url(url: &str, home: &std::path::Path, args: &[&str]) -> std::process::Output {
    crate::support::memscope_cmd(home)
        .args(["--db", url])
        .args(args)
        .output()
        .unwrap()
}

/// A session that holds a lock memscope needs — a curator's `psql` left mid-transaction —
/// makes a writer give up after `MEMSCOPE_BUSY_TIMEOUT_MS` in one sentence that says what to
/// do, as a busy SQLite file does, instead of waiting forever; nothing of the refused call is
/// stored, writers of other identities go on meanwhile, and once the session ends the same
/// calls land.
#[test]
fn a_lock_held_by_another_session_times_out_in_one_sentence_on_postgres() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    // Each call bounded: a writer that waits forever fails the test instead of hanging it.
    let run = |args: &[&str], stdin: Option<&str>| {
        use std::io::Write;
        let mut child = crate::support::memscope_cmd(home.path())
            .args(["--db", &db.url])
            .args(args)
            .env("MEMSCOPE_BUSY_TIMEOUT_MS", "700")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
        drop(input);
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > std::time::Duration::from_secs(60) {
                child.kill().unwrap();
                panic!("memscope {args:?} still waits for the lock after a minute");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        crate::support::Run::from_output(child.wait_with_output().unwrap())
    };
    let write = |subject: &str, value: &str| {
        run(
            &[
                "write",
                "--subject",
                subject,
                "--predicate",
                "编辑器",
                "--value",
                value,
                "--scope",
                "global",
                "--source",
                "t:1",
            ],
            None,
        )
    };
    write("user:锁", "vim").ok();
    let events = |raw: &mut postgres::Client| -> i64 {
        raw.query_one("SELECT count(*) FROM history", &[])
            .unwrap()
            .get(0)
    };
    let gave_up = |r: &crate::support::Run| {
        assert_eq!(r.code, 1, "{r:?}");
        crate::support::assert_one_sentence(
            &r.stderr,
            &[
                "held by another session",
                "700 ms",
                "pg_stat_activity",
                "MEMSCOPE_BUSY_TIMEOUT_MS",
            ],
        );
    };

    // One identity's record locked by a foreign session: its writer gives up, another
    // identity's writer goes on.
    let mut foreign = db.client();
    let mut tx = foreign.transaction().unwrap();
    tx.execute(
        "SELECT 1 FROM memories WHERE subject = 'user:锁' FOR UPDATE",
        &[],
    )
    .unwrap();
    let before = events(&mut raw);
    gave_up(&write("user:锁", "emacs ✍️"));
    assert_eq!(events(&mut raw), before, "the refused write stored nothing");
    write("user:其他", "helix").ok();
    tx.rollback().unwrap();
    write("user:锁", "emacs ✍️").ok();

    // The whole table locked: `write` and `apply` give up, and apply says how far it came.
    let mut tx = foreign.transaction().unwrap();
    tx.batch_execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let before = events(&mut raw);
    gave_up(&write("user:锁", "nano"));
    let lines: String = (0..3)
        .map(|i| {
            format!(
                "{}\n",
                json!({"subject": "user:批", "predicate": format!("p{i}"), "value": "值 🚀", "scope": "global", "source": "t:2"})
            )
        })
        .collect();
    let r = run(&["apply", "-"], Some(&lines));
    gave_up(&r);
    assert!(r.stdout.is_empty(), "{r:?}");
    assert!(r.stderr.contains("apply wrote nothing"), "{r:?}");
    assert_eq!(events(&mut raw), before, "the refused calls stored nothing");
    tx.rollback().unwrap();
    let r = run(&["apply", "-"], Some(&lines)).ok();
    assert_eq!(r.stdout.lines().count(), 3, "{r:?}");
    write("user:锁", "nano").ok();
    assert_eq!(run(&["check"], None).code, 0);
}

/// A delete that empties `memories` while another session keeps a transaction that read it
/// open: memscope tries for the exclusive lock that drops the table's planner statistics in
/// short waits (100 ms, ten tries), so a reader that gives up after 1.5 s — less than the one
/// wait of 2 s memscope made before, which queued every reader of the table behind it (found by
/// review) — is never refused meanwhile. The lock never granted, the delete still succeeds and
/// says that the statistics of `memories` may still show values of it, and why.
#[test]
fn emptying_memories_under_an_open_reader_queues_no_reader_for_long_on_postgres() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let home = tempfile::tempdir().unwrap();
    for i in 0..3 {
        let out = memscope_on(
            &db,
            home.path(),
            &[
                "write",
                "--subject",
                "user:排队",
                "--predicate",
                &format!("p{i}"),
                "--value",
                "队列 🚦",
                "--scope",
                "global",
                "--source",
                "s",
            ],
        );
        assert!(out.status.success(), "{out:?}");
    }
    raw.batch_execute("ANALYZE memories").unwrap();
    let mut holder = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let mut open = holder.transaction().unwrap();
    open.query("SELECT count(*) FROM memories", &[]).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = std::thread::spawn({
        let (url, done) = (db.url.clone(), done.clone());
        move || {
            let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            c.batch_execute("SET lock_timeout = '1500ms'").unwrap();
            let (mut reads, mut refused) = (0, Vec::new());
            while !done.load(Ordering::SeqCst) {
                match c.query_one("SELECT count(*) FROM memories", &[]) {
                    Ok(_) => reads += 1,
                    Err(e) => refused.push(format!("{e:?}")),
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            (reads, refused)
        }
    });
    let out = memscope_on(
        &db,
        home.path(),
        &["delete", "--subject", "user:排队", "--yes"],
    );
    done.store(true, Ordering::SeqCst);
    let (reads, refused) = reader.join().unwrap();
    open.rollback().unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("the planner statistics (pg_stats) of memories (")
            && said.contains("lock timeout"),
        "{said}"
    );
    assert!(reads > 0, "the reader read meanwhile");
    assert!(refused.is_empty(), "a reader was refused: {refused:?}");
}

/// A read logged beside concurrent writes of its chain is dated where history places what it
/// was served (README, "The read log": the UI's `Enter` replays a read from history and says
/// whether the log agrees). A write takes its time under its identity's lock and commits after,
/// so a read that did not wait for it could miss a write dated before it: a quarter of the
/// reads logged beside three writers disagreed with `resolve --at` (found by an exploratory
/// test; SQLite, whose logged read takes the write lock, never did). Three writers — two on
/// global, one on `repo:x` — and two readers in `repo:x`, each on its own connection; then
/// every logged read is replayed as of its time. A write and a read in one millisecond are
/// one instant to history (times are kept to the millisecond): such a tie is let through.
#[test]
fn logged_reads_beside_concurrent_writes_agree_with_history_on_postgres() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let address = db.address();
    // What each reader was told, in order.
    type Served = (Option<String>, Option<i64>, Vec<String>);
    let told: std::sync::Mutex<[Vec<Served>; 2]> = Default::default();
    std::thread::scope(|s| {
        for (w, scope) in [(0, "global"), (1, "repo:x"), (2, "global")] {
            let address = address.clone();
            s.spawn(move || {
                let mut store = PgStore::open(&address).unwrap();
                for i in 0..40 {
                    let value = json!(format!("写 {w}-{i} ✍️"));
                    store
                        .write(&req(
                            "user:1",
                            "package_manager",
                            value,
                            scope,
                            &format!("w{w}"),
                        ))
                        .unwrap();
                }
            });
        }
        for r in 0..2 {
            let address = address.clone();
            let told = &told;
            s.spawn(move || {
                let mut store = PgStore::open(&address).unwrap();
                for _ in 0..40 {
                    let got = store
                        .resolve_logged(
                            "user:1",
                            "package_manager",
                            Some("x"),
                            None,
                            Some(&format!("reader {r}")),
                            None,
                        )
                        .unwrap();
                    told.lock().unwrap()[r].push((
                        got.scope.clone(),
                        got.version,
                        memscope::store::decide::shadowed_labels(&got),
                    ));
                }
            });
        }
    });
    let mut store = PgStore::open(&address).unwrap();
    let reads = store
        .reads(&memscope::store::ReadFilter::default())
        .unwrap();
    assert_eq!(reads.len(), 80);
    // The log holds what each reader was told, read by read.
    let told = told.into_inner().unwrap();
    for (r, served) in told.iter().enumerate() {
        let mut logged: Vec<&memscope::model::ReadRecord> = reads
            .iter()
            .filter(|x| x.agent.as_deref() == Some(format!("reader {r}").as_str()))
            .collect();
        logged.sort_by_key(|x| x.id);
        let logged: Vec<Served> = logged
            .iter()
            .map(|x| (x.scope.clone(), x.version, x.shadowed.clone()))
            .collect();
        assert_eq!(&logged, served, "reader {r}: the log is what it was told");
    }
    // When each version was set, to the millisecond, as reads are dated.
    let set_at: std::collections::BTreeMap<(String, i64), String> = raw
        .query(
            "SELECT scope, version,
                    to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
               FROM history WHERE event = 'set'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| ((r.get(0), r.get(1)), r.get(2)))
        .collect();
    // Whether `scope` vN was current at some instant of the millisecond `at`: set no later,
    // and the next version set no earlier.
    let current_in = |scope: &str, v: i64, at: &str| {
        let key = |v| (scope.to_string(), v);
        set_at.get(&key(v)).is_some_and(|t| t.as_str() <= at)
            && set_at.get(&key(v + 1)).is_none_or(|t| t.as_str() >= at)
    };
    let mut disagree = Vec::new();
    let mut ties = 0;
    for read in &reads {
        let at = chrono::DateTime::parse_from_rfc3339(&read.at)
            .unwrap()
            .with_timezone(&chrono::Utc);
        let replay = store
            .resolve_at("user:1", "package_manager", Some("x"), None, at)
            .unwrap();
        let replayed = (
            replay.scope.clone(),
            replay.version,
            memscope::store::decide::shadowed_labels(&replay),
        );
        if replayed == (read.scope.clone(), read.version, read.shadowed.clone()) {
            continue;
        }
        let served = read
            .scope
            .iter()
            .zip(read.version)
            .map(|(s, v)| (s.clone(), v));
        let shadowed = read.shadowed.iter().map(|l| {
            let (s, v) = l.rsplit_once("@v").unwrap();
            (s.to_string(), v.parse::<i64>().unwrap())
        });
        let tie = served
            .chain(shadowed)
            .all(|(s, v)| current_in(&s, v, &read.at));
        if tie {
            ties += 1;
        } else {
            disagree.push(format!("{read:?}: history replays {replayed:?}"));
        }
    }
    eprintln!("{ties} of 80 reads share their millisecond with a write they did not see");
    assert!(
        disagree.is_empty(),
        "{} of 80 disagree: {disagree:#?}",
        disagree.len()
    );
}

/// Found by review: a login that may set the clock (`setval('memscope_clock', 1)`, which the
/// curator may, for an import) made every later write of a memory come back `stale`, exit 0,
/// nothing stored; the same damage on SQLite (its `causal_clock` row set back) was harmless.
/// A write and an `apply` without numbers of their own take numbers past what each identity
/// holds, on both backends, and `check` is clean after.
#[test]
fn a_clock_set_back_around_memscope_makes_no_write_stale() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.db");
    let pg = server().map(|s| FreshDb::prepared(&s));
    let mut places: Vec<(String, Box<dyn Fn()>)> = Vec::new();
    let path = file.clone();
    places.push((
        file.to_str().unwrap().to_string(),
        Box::new(move || {
            rusqlite::Connection::open(&path)
                .unwrap()
                .execute(
                    "UPDATE settings SET value = '1' WHERE key = 'causal_clock'",
                    [],
                )
                .unwrap();
        }),
    ));
    if let Some((db, _)) = &pg {
        let url = db.url.clone();
        let client = std::sync::Mutex::new(db.client());
        places.push((
            url,
            Box::new(move || {
                client
                    .lock()
                    .unwrap()
                    .execute("SELECT setval('memscope_clock', 1)::text", &[])
                    .unwrap();
            }),
        ));
    }
    for (address, set_back) in &places {
        let mut store = memscope::store::AnyStore::open(
            std::path::Path::new(address),
            memscope::store::OpenMode::Create,
        )
        .unwrap();
        store.set_user_setting("scope_guard", "off").unwrap();
        for round in 0..3 {
            for p in ["p1", "p2", "p3", "p4"] {
                let w = req("user:2", p, json!(format!("old {round} 🕰️")), "global", "s");
                store.write(&w).unwrap();
            }
        }
        set_back();
        let out = store
            .write(&req("user:2", "p1", json!("new 🆕"), "global", "s"))
            .unwrap();
        assert_eq!(out.outcome, OutcomeKind::Superseded, "{address}: {out:?}");
        // And again under a run of `apply`.
        set_back();
        let lines: String = ["p2", "p3", "p4", "p2"]
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!(
                    "{}\n",
                    json!({"subject": "user:2", "predicate": p, "value": format!("new {i}"),
                           "scope": "global", "source": "s"})
                )
            })
            .collect();
        let mut told = Vec::new();
        store
            .apply(std::io::Cursor::new(lines.into_bytes()), |batch| {
                told.extend(batch.iter().map(|o| o.outcome));
                Ok(())
            })
            .unwrap();
        assert_eq!(told, [OutcomeKind::Superseded; 4], "{address}");
        for p in ["p1", "p2", "p3", "p4"] {
            let r = store.resolve("user:2", p, None, None).unwrap();
            assert!(
                r.value
                    .as_ref()
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .starts_with("new"),
                "{address}: {r:?}"
            );
        }
        let report = store.check(memscope::store::IntegrityMode::Quick).unwrap();
        assert!(report.ok, "{address}: {:?}", report.violations);
    }
}
