//! Curation racing writes (README, "list, history, pending": `pending resolve` writes an item
//! through the write path with its original causal number; "Debugging a wrong-tool incident":
//! `revert` makes an earlier value current again as a new version), as real clients race them,
//! on a SQLite file and on PostgreSQL. Six writers — two `memscope write` processes, an `apply`
//! process fed one line at a time, two connections in this process and a `memscope mcp` server
//! — each queue ambiguous writes (`global` or `repo:前端-甲`) and write plain values to the same
//! identities. Meanwhile three resolvers — two `memscope pending` processes and a connection in
//! this process — race each other through the open queue (in its order, from its end,
//! shuffled; each picking its own candidate; two of them rejecting every sixth item, which the
//! third resolves), and two reverters — a `memscope revert` process and a connection — bring
//! back earlier versions, the one before or one by number, all at once.
//!
//! Every value is written once, so where it is at the end says what happened to it. Compared
//! with what every client was told: each plain write told `inserted`/`superseded` is the `set`
//! event of its version with its value and causal number (and what it replaced is the version
//! before); each ambiguous write is an item of its own; each item was told settled to exactly
//! one resolver — resolved: the item records that resolver's scope and outcome, one
//! `pending_resolved` event says the same, and the value is stored at the version it was told
//! with the item's causal number (or logged `stale`); rejected: no event, its value nowhere —
//! and every other resolver that tried it was told it already is, and how; each revert told
//! version N holds at N the value of the version it was told it brought back (the one before the
//! current, unless it named one); no `set`, `stale`, `confirmed`, `reverted` or
//! `pending_resolved` event is there that no client was told of; each identity's versions run
//! 1, 2, 3 … with rising causal numbers and one current record at the last; `check` is clean
//! (on SQLite with its full integrity check).
//!
//! Reproduce: `cargo test --release --test reliability -- curation_race:: --nocapture`
//! (`MEMSCOPE_TEST_POSTGRES=postgres://…` for the PostgreSQL side;
//! `MEMSCOPE_CURATION_SEED` replays the reverters' choices and a resolver's order;
//! `MEMSCOPE_CURATION_ROUNDS`, 40 by default, lengthens the race).

use crate::support::mcp_session::RawSession;
use crate::support::reliability::*;
use crate::support::{on_postgres, open_any_store};
use memscope::model::{same_value, Identity, Scope};
use memscope::spelling::fold;
use memscope::store::{error_text, AnyStore};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const SUBJECT: &str = "用户:竞速";
/// The repository every ambiguous write offers beside `global` (the MCP server's too), as the
/// clients spell it: one place (README, "one spelling per place"), stored as whichever spelling
/// came first.
const REPO_SPELLINGS: [&str; 3] = ["Front-甲", "front-甲", "FRONT-甲"];
/// Each predicate as written, and as stored: `格式化工具` is a default alias of `formatter`
/// (assets/aliases.json), which every client — a reverter too — writes it as.
const PREDICATES: [&str; 2] = ["package_manager", "格式化工具"];
const STORED: [&str; 2] = ["package_manager", "formatter"];
/// Rounds of each writer — one ambiguous and one plain write each — by default.
const ROUNDS: u64 = 40;

/// Rounds of each writer (`MEMSCOPE_CURATION_ROUNDS`, else [`ROUNDS`]).
fn rounds() -> usize {
    env_u64("MEMSCOPE_CURATION_ROUNDS", ROUNDS).max(1) as usize
}

/// The pause of a client of this process (a connection, the MCP server's client, `apply`'s
/// feeder) after each request: it answers in microseconds where a process takes milliseconds
/// to start, and would otherwise be done before the processes began.
const PACE: Duration = Duration::from_millis(40);
/// The pause of the connection resolving items after each try, for the same reason.
const RESOLVER_PACE: Duration = Duration::from_millis(12);

/// How a writer reaches the database.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Via {
    /// A `memscope write` process for each write.
    Process,
    /// One `memscope apply` process, fed a round at a time.
    Apply,
    /// A connection in this process.
    Connection,
    /// A `memscope mcp` server serving [`SUBJECT`] in the repository.
    Mcp,
}

const WRITERS: [Via; 6] = [
    Via::Process,
    Via::Process,
    Via::Apply,
    Via::Connection,
    Via::Connection,
    Via::Mcp,
];
/// Resolver `r` goes through the queue in its own order ([`resolve_all`]) and picks its own
/// candidate ([`pick`]).
const RESOLVERS: [Via; 3] = [Via::Process, Via::Process, Via::Connection];
const REVERTERS: [Via; 2] = [Via::Process, Via::Connection];

/// The repository's scope in spelling `k`.
fn repo_scope(k: usize) -> String {
    format!("repo:{}", REPO_SPELLINGS[k % REPO_SPELLINGS.len()])
}

/// Where predicate `p`'s plain writes go (the repository in spelling `k`): each predicate's
/// other scope takes only resolutions and reverts, so not every resolution comes out `stale`
/// against a newer plain write.
fn plain_scope(p: usize, k: usize) -> String {
    if p == 0 {
        "global".into()
    } else {
        repo_scope(k)
    }
}

/// What a writer's line is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Line {
    /// An ambiguous write.
    Ask,
    /// A write to one scope.
    Plain,
    /// The ambiguous write of the writer's line `n` again, as a retried agent asks it: its
    /// candidates in the other order, the repository in another case — the same write (README,
    /// "write"), which joins that item while it is open.
    Repeat(usize),
}

/// Writer `w`'s requests as `apply` lines, a round at a time: an ambiguous write, then a plain
/// one, of one predicate, the repository in the writer's spelling, then the previous round's
/// ambiguous write again. `apply` writes the plain value twice, the second time a new one: two
/// lines of one identity in one transaction.
fn requests(w: usize) -> Vec<(Value, Line)> {
    let mut out: Vec<(Value, Line)> = Vec::new();
    let mut asked_before: Option<usize> = None;
    for n in 0..rounds() {
        let p = (n + w) % 2;
        let asked = format!("候选-{w}-{n}-🧭");
        let ask = out.len();
        out.push((
            json!({"subject": SUBJECT, "predicate": PREDICATES[p], "value": asked,
                "scope": {"ambiguous": ["global", repo_scope(w)]},
                "source": format!("写者:{w}/消息:{n}/待定"),
                "raw": format!("{asked} 放全局还是放{}？🤔", REPO_SPELLINGS[w % 3])}),
            Line::Ask,
        ));
        let again = if WRITERS[w] == Via::Apply { 2 } else { 1 };
        for k in 0..again {
            out.push((
                // With the user's words: a global line is judged by the scope guard on them
                // (in `apply`'s run on both backends), neutral words that point at no place.
                json!({"subject": SUBJECT, "predicate": PREDICATES[p],
                    "value": format!("工具-{w}-{n}-{k}-🚀"), "scope": plain_scope(p, w),
                    "source": format!("写者:{w}/消息:{n}/{k}"),
                    "raw": format!("就用 工具-{w}-{n}-{k}-🚀 吧 👍")}),
                Line::Plain,
            ));
        }
        if let Some(before) = asked_before {
            let mut line: Value = out[before].0.clone();
            line["scope"] = json!({"ambiguous": [repo_scope(w + 1), "global"]});
            out.push((line, Line::Repeat(before)));
        }
        asked_before = Some(ask);
    }
    out
}

/// What a command was told, and when it ran (this process's clock): its answer, or the sentence
/// it was refused with.
#[derive(Debug)]
struct Told {
    start: Instant,
    end: Instant,
    answer: Result<Value, String>,
}

fn timed(f: impl FnOnce() -> Result<Value, String>) -> Told {
    let start = Instant::now();
    let answer = f();
    Told {
        start,
        end: Instant::now(),
        answer,
    }
}

/// A curating client: `memscope` processes on the database, or a connection of this process.
enum Client<'a> {
    Process(&'a Db),
    Connection(Box<AnyStore>),
}

impl Client<'_> {
    fn new(db: &Db, via: Via) -> Client<'_> {
        match via {
            Via::Process => Client::Process(db),
            Via::Connection => Client::Connection(Box::new(open_any_store(db))),
            other => unreachable!("no curating client {other:?}"),
        }
    }

    /// `args` with `--json`: the answer on success, else the one sentence it was refused with.
    fn run(db: &Db, args: &[&str]) -> Result<Value, String> {
        let mut all = args.to_vec();
        all.push("--json");
        let r = db.run(&all);
        if r.code != 0 {
            return Err(r.stderr.trim().to_string());
        }
        Ok(serde_json::from_str(&r.stdout)
            .unwrap_or_else(|e| panic!("{args:?} answered {:?}: {e}", r.stdout)))
    }

    /// The open items of [`SUBJECT`], by id: (id, predicate, candidates).
    fn open_items(&mut self) -> Vec<(i64, String, Vec<String>)> {
        let items: Vec<Value> = match self {
            Client::Process(db) => as_items(db.json(&["pending", "--json"])),
            Client::Connection(store) => store
                .pending(false)
                .expect("the queue is listed")
                .iter()
                .map(|i| serde_json::to_value(i).expect("an item"))
                .collect(),
        };
        let mut open: Vec<(i64, String, Vec<String>)> = items
            .iter()
            .filter(|i| i["subject"] == SUBJECT && i["status"] == "open")
            .map(|i| {
                let candidates = i["candidates"].as_array().expect("candidates");
                (
                    i["id"].as_i64().expect("an id"),
                    s(&i["predicate"]),
                    candidates.iter().map(s).collect(),
                )
            })
            .collect();
        open.sort();
        open
    }

    fn resolve(&mut self, id: i64, scope: &str) -> Told {
        match self {
            Client::Process(db) => timed(|| {
                Client::run(
                    db,
                    &["pending", "resolve", &id.to_string(), "--scope", scope],
                )
            }),
            Client::Connection(store) => {
                let scope = Scope::parse(scope).expect("a scope");
                timed(|| {
                    store
                        .resolve_pending(id, &scope, false)
                        .map(|out| serde_json::to_value(out).expect("an outcome"))
                        .map_err(|e| error_text(&e))
                })
            }
        }
    }

    /// The item as rejected.
    fn reject(&mut self, id: i64) -> Told {
        match self {
            Client::Process(db) => {
                timed(|| Client::run(db, &["pending", "reject", &id.to_string()]))
            }
            Client::Connection(store) => timed(|| {
                store
                    .reject_pending(id)
                    .map(|item| serde_json::to_value(item).expect("an item"))
                    .map_err(|e| error_text(&e))
            }),
        }
    }

    /// The one outcome of a revert.
    fn revert(&mut self, predicate: &str, scope: &str, to: Option<i64>) -> Told {
        match self {
            Client::Process(db) => timed(|| {
                let to = to.map(|n| n.to_string());
                let mut args = vec![
                    "revert",
                    "--subject",
                    SUBJECT,
                    "--predicate",
                    predicate,
                    "--scope",
                    scope,
                ];
                if let Some(n) = &to {
                    args.extend(["--to-version", n]);
                }
                Client::run(db, &args).map(|outs| {
                    assert_eq!(outs.as_array().map(Vec::len), Some(1), "{outs}");
                    outs[0].clone()
                })
            }),
            Client::Connection(store) => {
                let id = Identity {
                    subject: SUBJECT.into(),
                    predicate: predicate.into(),
                    scope: Scope::parse(scope).expect("a scope"),
                };
                timed(|| {
                    store
                        .revert(&id, to)
                        .map(|out| serde_json::to_value(out).expect("an outcome"))
                        .map_err(|e| error_text(&e))
                })
            }
        }
    }
}

fn as_items(v: Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items,
        other => panic!("not a list: {other}"),
    }
}

/// What writer `w` was told for each line, and when the line ran where the writer knows it
/// (not in `apply`'s batches).
type Written = Vec<(Value, Option<(Instant, Instant)>)>;

/// Writer `w` writes its requests through `via`, each line at a time; what it was told, a
/// line each. It waits at `start` (an MCP server and an `apply` process once started).
fn write_all(db: &Db, w: usize, via: Via, start: &Barrier) -> Written {
    let lines: Vec<Value> = requests(w).into_iter().map(|(line, _)| line).collect();
    let times = |t: Told| -> (Value, Option<(Instant, Instant)>) {
        let answer = t
            .answer
            .unwrap_or_else(|e| panic!("writer {w} was refused: {e}"));
        (answer, Some((t.start, t.end)))
    };
    match via {
        Via::Process => {
            start.wait();
            lines
                .iter()
                .map(|line| {
                    let mut args = vec![
                        "write".to_string(),
                        "--subject".into(),
                        s(&line["subject"]),
                        "--predicate".into(),
                        s(&line["predicate"]),
                        "--value".into(),
                        s(&line["value"]),
                        "--source".into(),
                        s(&line["source"]),
                    ];
                    match line["scope"]["ambiguous"].as_array() {
                        Some(c) => args.extend([
                            "--ambiguous".into(),
                            c.iter().map(s).collect::<Vec<_>>().join(","),
                        ]),
                        None => args.extend(["--scope".into(), s(&line["scope"])]),
                    }
                    if let Some(raw) = line["raw"].as_str() {
                        args.extend(["--raw".into(), raw.into()]);
                    }
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    times(timed(|| Client::run(db, &args)))
                })
                .collect()
        }
        Via::Apply => {
            let mut cmd = db.command(&["apply"]);
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("spawn memscope apply");
            let mut stdin = child.stdin.take().expect("stdin");
            start.wait();
            // A round at a time from a pipe (each begins with its ambiguous write): committed
            // as soon as no more input waits, among the other writers.
            let mut batches: Vec<String> = Vec::new();
            for (line, kind) in requests(w) {
                if kind == Line::Ask {
                    batches.push(String::new());
                }
                if let Some(round) = batches.last_mut() {
                    round.push_str(&format!("{line}\n"));
                }
            }
            for round in batches {
                stdin
                    .write_all(round.as_bytes())
                    .and_then(|()| stdin.flush())
                    .expect("apply reads its input");
                std::thread::sleep(PACE * 2);
            }
            drop(stdin);
            let out = child.wait_with_output().expect("apply ends");
            assert!(
                out.status.success(),
                "apply failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let told = json_lines(&String::from_utf8_lossy(&out.stdout));
            assert_eq!(told.len(), lines.len(), "apply: one answer a line");
            told.into_iter().map(|answer| (answer, None)).collect()
        }
        Via::Connection => {
            let mut store = open_any_store(db);
            start.wait();
            lines
                .iter()
                .map(|line| {
                    let told = times(timed(|| {
                        store
                            .write(&request(line))
                            .map(|out| serde_json::to_value(out).expect("an outcome"))
                            .map_err(|e| format!("{line}: {e:#}"))
                    }));
                    std::thread::sleep(PACE);
                    told
                })
                .collect()
        }
        Via::Mcp => {
            let repo = REPO_SPELLINGS[w % REPO_SPELLINGS.len()];
            let mut cmd = db.command(&["mcp", "--subject", SUBJECT, "--repo", repo]);
            cmd.current_dir(db.dir.path());
            let mut session = RawSession::start(cmd);
            session.initialize();
            start.wait();
            let told = lines
                .iter()
                .enumerate()
                .map(|(i, line)| {
                    let scope = match line["scope"].as_str() {
                        Some("global") => "global",
                        Some(_) => "repo",
                        None => "unsure",
                    };
                    let mut args = json!({"predicate": line["predicate"], "value": line["value"],
                        "source": line["source"], "scope": scope});
                    if let Some(raw) = line.get("raw") {
                        args["raw"] = raw.clone();
                    }
                    let told = times(timed(|| {
                        let r = session.request(
                            i as i64 + 2,
                            "tools/call",
                            json!({"name": "remember", "arguments": args}),
                        );
                        match &r["result"]["structuredContent"] {
                            out if r["result"]["isError"] != true && out.is_object() => {
                                Ok(out.clone())
                            }
                            _ => Err(format!("MCP: {line} → {r}")),
                        }
                    }));
                    std::thread::sleep(PACE);
                    told
                })
                .collect();
            let (code, stderr) = session.finish();
            assert_eq!(code, 0, "memscope mcp ended badly: {stderr}");
            told
        }
    }
}

/// Resolver `r`'s pick among an item's candidates, the repository in its own spelling:
/// resolvers 0 and 2 the scope no plain write of its predicate goes to (where a resolution of
/// the newest item supersedes), resolver 1 the other (where a newer plain write has mostly come
/// first: `stale`).
fn pick(r: usize, predicate: &str, candidates: &[String]) -> String {
    let p = STORED
        .iter()
        .position(|s| *s == predicate)
        .unwrap_or_else(|| panic!("an item of {predicate}"));
    let plain = fold(&plain_scope(p, 0));
    let scope = candidates
        .iter()
        .find(|c| (fold(c) == plain) == (r == 1))
        .unwrap_or_else(|| panic!("no pick for resolver {r} among {candidates:?}"));
    if scope == "global" {
        scope.clone()
    } else {
        repo_scope(r + 1)
    }
}

/// Whether resolver `r` rejects item `id` rather than resolve it: resolvers 1 and 2 reject every
/// sixth, which resolver 0 resolves meanwhile.
fn rejects(r: usize, id: i64) -> bool {
    r != 0 && id % 6 == 0
}

/// What the writer of a [`Line::Repeat`] was told.
struct Repeat {
    who: String,
    /// The item of the write it repeats.
    first: i64,
    /// The item it was told.
    told: i64,
    when: Option<(Instant, Instant)>,
}

/// What the writer of an ambiguous write is told (README, "write"): queued, or the open item it
/// repeats.
const EXPLICIT: &str = "the scope is ambiguous: a human picks one with `memscope pending resolve`";

fn joined(id: i64) -> String {
    format!("the same write is already waiting as pending #{id}: a human picks its scope with `memscope pending resolve`")
}

/// One resolver's try at one item.
#[derive(Debug)]
struct Resolving {
    by: usize,
    id: i64,
    /// A `pending reject` rather than a resolution.
    rejects: bool,
    scope: String,
    told: Told,
}

/// Resolver `r` resolves every open item it finds — each to its own pick of the candidates, in
/// its own order: the queue's, from its end, or shuffled — until the writers are `done` and the
/// queue is empty.
fn resolve_all(db: &Db, r: usize, seed: u64, done: &AtomicBool, start: &Barrier) -> Vec<Resolving> {
    let mut client = Client::new(db, RESOLVERS[r]);
    let mut rng = Rng::new(seed ^ (0x100 + r as u64));
    start.wait();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut tries = Vec::new();
    loop {
        let finished = done.load(Ordering::SeqCst);
        let mut open = client.open_items();
        if open.is_empty() {
            if finished {
                return tries;
            }
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        match r % 3 {
            0 => {}
            1 => open.reverse(),
            _ => {
                for i in (1..open.len()).rev() {
                    open.swap(i, rng.below(i as u64 + 1) as usize);
                }
            }
        }
        for (id, predicate, candidates) in open {
            let scope = pick(r, &predicate, &candidates);
            let rejects = rejects(r, id);
            let told = if rejects {
                client.reject(id)
            } else {
                client.resolve(id, &scope)
            };
            if RESOLVERS[r] == Via::Connection {
                std::thread::sleep(RESOLVER_PACE);
            }
            tries.push(Resolving {
                by: r,
                id,
                rejects,
                scope,
                told,
            });
        }
        assert!(
            Instant::now() < deadline,
            "resolver {r}: items still open after five minutes"
        );
    }
}

/// One revert as asked.
#[derive(Debug)]
struct Reverting {
    by: usize,
    /// As stored (it was asked as written).
    predicate: &'static str,
    /// As asked.
    scope: String,
    to: Option<i64>,
    told: Told,
}

/// What a plain revert (the version before the current) may be refused for here: an identity
/// nothing was written to yet, or one at v1.
const REVERT_REFUSALS: [&str; 2] = ["has no history", "has no version before v1 to revert to"];

/// Reverter `v` reverts an identity it picks, to the version before or to one it names, until
/// the writers are `done`; now and then it asks a revert that landed again, by number — a
/// confirmation unless a write came between.
fn revert_while(
    db: &Db,
    v: usize,
    seed: u64,
    done: &AtomicBool,
    start: &Barrier,
) -> Vec<Reverting> {
    let mut client = Client::new(db, REVERTERS[v]);
    let mut rng = Rng::new(seed ^ (v as u64 + 1));
    start.wait();
    let mut tries = Vec::new();
    let mut again = None;
    while !done.load(Ordering::SeqCst) {
        let (p, scope, to) = match again.take() {
            Some(asked) => asked,
            None => {
                let p = rng.below(2) as usize;
                let scope = match rng.below(4) {
                    0 | 1 => "global".to_string(),
                    k => repo_scope(k as usize),
                };
                // The test's own look at the version, to name an earlier one: versions only
                // rise here. (SQL's `lower` folds ASCII only: enough for these spellings.)
                let current = db.sql_i64(&format!(
                    "SELECT coalesce(max(version), 0) FROM memories
                     WHERE subject = '{SUBJECT}' AND predicate = '{}'
                       AND lower(scope) = '{}'",
                    STORED[p],
                    scope.to_lowercase()
                ));
                let to = (current >= 2 && rng.chance(50))
                    .then(|| 1 + rng.below(current as u64 - 1) as i64);
                (p, scope, to)
            }
        };
        let told = client.revert(PREDICATES[p], &scope, to);
        match &told.answer {
            Ok(out) if out["outcome"] == "superseded" && rng.chance(40) => {
                again = Some((p, scope.clone(), out["reverted_to"].as_i64()));
            }
            Ok(_) => {}
            Err(e) => assert!(
                to.is_none() && REVERT_REFUSALS.iter().any(|r| e.contains(r)),
                "reverter {v}: revert of {} @ {scope} to {to:?} was refused: {e}",
                PREDICATES[p]
            ),
        }
        tries.push(Reverting {
            by: v,
            predicate: STORED[p],
            scope,
            to,
            told,
        });
        std::thread::sleep(Duration::from_millis(20));
    }
    tries
}

/// A history event of [`SUBJECT`].
#[derive(Debug)]
struct Event {
    event: String,
    predicate: String,
    scope: String,
    version: Option<i64>,
    value: Option<Value>,
    source: Option<String>,
    causal_seq: Option<i64>,
    detail: Value,
    raw: Option<String>,
}

fn stored_events(db: &Db) -> Vec<Event> {
    db.sql_text_rows(&format!(
        "SELECT event, predicate, scope, CAST(version AS TEXT), value, source,
                CAST(causal_seq AS TEXT), detail, raw
         FROM history WHERE subject = '{SUBJECT}' ORDER BY id"
    ))
    .into_iter()
    .map(|r| Event {
        event: r[0].clone().expect("an event"),
        predicate: r[1].clone().expect("a predicate"),
        scope: r[2].clone().expect("a scope"),
        version: r[3].as_deref().map(|v| v.parse().expect("a version")),
        value: r[4]
            .as_deref()
            .map(|v| serde_json::from_str(v).expect("a stored value is JSON")),
        source: r[5].clone(),
        causal_seq: r[6].as_deref().map(|v| v.parse().expect("a causal number")),
        detail: r[7]
            .as_deref()
            .map(|d| serde_json::from_str(d).expect("a detail is JSON"))
            .unwrap_or(Value::Null),
        raw: r[8].clone(),
    })
    .collect()
}

/// A pending row as stored.
#[derive(Debug)]
struct Item {
    predicate: String,
    candidates: Vec<String>,
    value: Value,
    source: String,
    causal_seq: i64,
    status: String,
    resolved_scope: Option<String>,
    resolution: Option<String>,
}

fn stored_items(db: &Db) -> BTreeMap<i64, Item> {
    db.sql_text_rows(&format!(
        "SELECT CAST(id AS TEXT), predicate, value, source, CAST(causal_seq AS TEXT), status,
                resolved_scope, resolution, candidates
         FROM pending WHERE subject = '{SUBJECT}'"
    ))
    .into_iter()
    .map(|r| {
        let text = |i: usize| r[i].clone().unwrap_or_else(|| panic!("NULL in {r:?}"));
        let item = Item {
            predicate: text(1),
            value: serde_json::from_str(&text(2)).expect("a stored value is JSON"),
            source: text(3),
            causal_seq: text(4).parse().expect("a causal number"),
            status: text(5),
            resolved_scope: r[6].clone(),
            resolution: r[7].clone(),
            candidates: serde_json::from_str(&text(8)).expect("candidates are a JSON list"),
        };
        (text(0).parse().expect("an id"), item)
    })
    .collect()
}

/// Item `id`, resolved by `winner`: the item, its one `pending_resolved` event and the history
/// hold what the winner was told. Returns the outcome.
#[track_caller]
fn assert_resolved(id: i64, item: &Item, winner: &Resolving, ledger: &mut Ledger) -> String {
    let who = format!("resolver {} (#{id} → {})", winner.by, winner.scope);
    let told = winner.told.answer.as_ref().expect("told");
    let outcome = s(&told["outcome"]);
    // Resolved to the scope asked, as stored.
    let scope = ledger.stored_scope(&winner.scope);
    assert_eq!(
        (
            told["pending_id"].as_i64(),
            &told["scope"],
            &told["predicate"]
        ),
        (Some(id), &json!(scope), &json!(item.predicate)),
        "{who}: {told}"
    );
    assert_eq!(
        (
            item.status.as_str(),
            item.resolved_scope.as_deref(),
            item.resolution.as_deref()
        ),
        ("resolved", Some(scope.as_str()), Some(outcome.as_str())),
        "{who} was told {told}; the item holds {item:?}"
    );
    let resolved = ledger.resolutions_of(id);
    let [event] = resolved[..] else {
        panic!(
            "#{id} has {} pending_resolved events: {resolved:#?}",
            resolved.len()
        );
    };
    assert_eq!(
        (
            &event.predicate,
            &event.scope,
            event.version,
            &event.detail["outcome"]
        ),
        (
            &item.predicate,
            &scope,
            told["version"].as_i64(),
            &told["outcome"]
        ),
        "{who} was told {told}"
    );
    match outcome.as_str() {
        "inserted" | "superseded" => {
            assert_eq!(
                told["causal_seq"].as_i64(),
                Some(item.causal_seq),
                "{who}: {told}"
            );
            ledger.claim(told, &item.value, Some(&item.source), who.clone())
        }
        // Its causal number is the item's, from when it was queued: a newer value won.
        "stale" => {
            let logged = ledger.count("stale", |e| {
                (
                    &e.predicate,
                    &e.scope,
                    e.value.as_ref(),
                    e.source.as_deref(),
                    e.causal_seq,
                ) == (
                    &item.predicate,
                    &scope,
                    Some(&item.value),
                    Some(item.source.as_str()),
                    Some(item.causal_seq),
                )
            });
            assert_eq!(logged, 1, "{who} was told {told}: its stale event");
            assert!(same_value(&told["value"], &item.value), "{who}: {told}");
        }
        "confirmed" => {
            let at = (
                item.predicate.clone(),
                scope.clone(),
                told["version"].as_i64().expect("a version"),
            );
            let set = ledger.set_at(&at);
            assert!(
                same_value(set.value.as_ref().expect("a value"), &item.value),
                "{who} was told {told}; v{} holds {set:?}",
                at.2
            );
        }
        _ => panic!("{who} was told {told}"),
    }
    outcome
}

/// Item `id`, rejected by `winner`: closed as rejected, its value not written.
#[track_caller]
fn assert_rejected(id: i64, item: &Item, winner: &Resolving, ledger: &Ledger) {
    let told = winner.told.answer.as_ref().expect("told");
    let who = format!("resolver {} rejecting #{id}", winner.by);
    assert_eq!(
        (told["id"].as_i64(), &told["status"], &told["value"]),
        (Some(id), &json!("rejected"), &item.value),
        "{who}: {told}"
    );
    assert_eq!(
        (
            item.status.as_str(),
            item.resolved_scope.as_deref(),
            item.resolution.as_deref()
        ),
        ("rejected", None, Some("rejected by a human")),
        "{who} was told {told}; the item holds {item:?}"
    );
    assert!(ledger.resolutions_of(id).is_empty(), "{who}: and resolved");
    // A resolution writes with the item's causal number (its twin — a repeat queued anew — and
    // a revert of a version it wrote have their own).
    let written = |kind| {
        ledger.count(kind, |e| {
            (e.value.as_ref(), e.causal_seq) == (Some(&item.value), Some(item.causal_seq))
        })
    };
    assert_eq!(
        (written("set"), written("stale")),
        (0, 0),
        "{who}: and its value was written"
    );
}

/// (predicate, scope, version) of an identity's version.
type At = (String, String, i64);

/// The database at the end, and which client's answer accounts for each of its events.
struct Ledger {
    events: Vec<Event>,
    /// The repository's one spelling, as stored.
    repo: String,
    /// The `set` event of each version.
    sets: BTreeMap<At, usize>,
    /// Which told answer accounts for each `set` event (by its index in `events`).
    claimed: BTreeMap<usize, String>,
}

impl Ledger {
    fn read(db: &Db) -> Ledger {
        let events = stored_events(db);
        let mut sets = BTreeMap::new();
        for (i, e) in events.iter().enumerate() {
            if e.event != "set" {
                continue;
            }
            let at = (
                e.predicate.clone(),
                e.scope.clone(),
                e.version.expect("a version"),
            );
            if let Some(j) = sets.insert(at.clone(), i) {
                panic!("two set events of {at:?}: {:?} and {:?}", events[j], e);
            }
        }
        // One spelling of the repository in every table, whichever writer's came first.
        let spellings: BTreeSet<String> = db
            .sql_text_rows(&format!(
                "SELECT scope FROM history WHERE subject = '{SUBJECT}' AND scope <> 'global'
                 UNION SELECT scope FROM memories WHERE subject = '{SUBJECT}' AND scope <> 'global'
                 UNION SELECT resolved_scope FROM pending
                 WHERE subject = '{SUBJECT}' AND resolved_scope <> 'global'"
            ))
            .into_iter()
            .map(|r| r[0].clone().expect("a scope"))
            .collect();
        let [repo] = spellings.iter().collect::<Vec<_>>()[..] else {
            panic!("the repository is stored as {spellings:?}");
        };
        assert!(
            REPO_SPELLINGS.iter().any(|r| format!("repo:{r}") == *repo),
            "the repository is stored as {repo}"
        );
        Ledger {
            events,
            repo: repo.clone(),
            sets,
            claimed: BTreeMap::new(),
        }
    }

    /// `scope` as a client spelled it, as stored.
    fn stored_scope(&self, scope: &str) -> String {
        if scope == "global" {
            scope.into()
        } else {
            assert_eq!(fold(scope), fold(&self.repo), "a scope of this test");
            self.repo.clone()
        }
    }

    #[track_caller]
    fn set_at(&self, at: &At) -> &Event {
        let i = self
            .sets
            .get(at)
            .unwrap_or_else(|| panic!("no set event of {at:?}"));
        &self.events[*i]
    }

    /// `told` — a `set` outcome of `who` — is the set event of its version, holding `value`;
    /// what it replaced is the version before. Each set event is told to one client only.
    #[track_caller]
    /// The user's words a write was told it stored are its `set` event's.
    fn assert_words(&self, told: &Value, raw: Option<&str>, who: &str) {
        let at = (
            s(&told["predicate"]),
            s(&told["scope"]),
            told["version"].as_i64().expect("a version"),
        );
        let set = self.set_at(&at);
        assert_eq!(set.raw.as_deref(), raw, "{who} was told {told}: {set:?}");
    }

    fn claim(&mut self, told: &Value, value: &Value, source: Option<&str>, who: String) {
        let at = (
            s(&told["predicate"]),
            s(&told["scope"]),
            told["version"].as_i64().expect("a version"),
        );
        let i = *self
            .sets
            .get(&at)
            .unwrap_or_else(|| panic!("{who} was told {told}, and {at:?} has no set event"));
        let set = &self.events[i];
        assert_eq!(
            (set.value.as_ref(), &told["value"]),
            (Some(value), value),
            "{who} was told {told}; the history holds {set:?}"
        );
        if let Some(source) = source {
            assert_eq!(set.source.as_deref(), Some(source), "{who}: {set:?}");
        }
        assert_eq!(
            set.causal_seq,
            told["causal_seq"].as_i64(),
            "{who} was told {told}; the history holds {set:?}"
        );
        match told["outcome"].as_str() {
            Some("inserted") => assert_eq!(at.2, 1, "{who} was told {told}"),
            Some("superseded") => {
                let before = self.set_at(&(at.0.clone(), at.1.clone(), at.2 - 1));
                assert_eq!(
                    before.value.as_ref(),
                    Some(&told["previous"]),
                    "{who} was told {told}: it replaced {before:?}"
                );
            }
            _ => panic!("{who}: {told} sets no version"),
        }
        if let Some(earlier) = self.claimed.insert(i, who.clone()) {
            panic!("{at:?} was told to {earlier} and to {who}");
        }
    }

    /// The `pending_resolved` events of item `id`.
    fn resolutions_of(&self, id: i64) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|e| e.event == "pending_resolved" && e.detail["pending_id"] == id)
            .collect()
    }

    /// Events of `kind` matching `which`.
    fn count(&self, kind: &str, which: impl Fn(&Event) -> bool) -> usize {
        self.events
            .iter()
            .filter(|e| e.event == kind && which(e))
            .count()
    }
}

#[test]
fn curation_racing_writes_is_told_what_the_database_holds() {
    let db = Db::new();
    db.init();
    curation_race(db);
}

#[test]
fn curation_racing_writes_is_told_what_the_database_holds_on_postgres() {
    on_postgres(curation_race);
}

fn curation_race(db: Db) {
    let backend = if db.is_postgres() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let seed = seed_from_env("MEMSCOPE_CURATION_SEED");
    let started = Instant::now();
    let done = AtomicBool::new(false);
    let start = Barrier::new(WRITERS.len() + RESOLVERS.len() + REVERTERS.len());
    let (written, resolvings, revertings) = std::thread::scope(|s| {
        let (db, done, start) = (&db, &done, &start);
        let writers: Vec<_> = WRITERS
            .iter()
            .enumerate()
            .map(|(w, &via)| s.spawn(move || write_all(db, w, via, start)))
            .collect();
        let resolvers: Vec<_> = (0..RESOLVERS.len())
            .map(|r| s.spawn(move || resolve_all(db, r, seed, done, start)))
            .collect();
        let reverters: Vec<_> = (0..REVERTERS.len())
            .map(|v| s.spawn(move || revert_while(db, v, seed, done, start)))
            .collect();
        // Every writer ends before the curators are told to, whether it failed or not.
        let written: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
        done.store(true, Ordering::SeqCst);
        let resolvings: Vec<Resolving> = resolvers
            .into_iter()
            .flat_map(|h| h.join().expect("a resolver"))
            .collect();
        let revertings: Vec<Reverting> = reverters
            .into_iter()
            .flat_map(|h| h.join().expect("a reverter"))
            .collect();
        let written: Vec<Written> = written.into_iter().map(|w| w.expect("a writer")).collect();
        (written, resolvings, revertings)
    });
    let raced = started.elapsed();

    let mut ledger = Ledger::read(&db);
    let items = stored_items(&db);

    // The writers: each ambiguous write an item of its own, each plain one a version, each
    // repeat the item it repeats or a new one (when, is checked below).
    let mut told_items = BTreeSet::new();
    let mut repeats: Vec<Repeat> = Vec::new();
    for (w, told) in written.iter().enumerate() {
        let who = |n: usize| format!("writer {w} ({:?}), line {}", WRITERS[w], n + 1);
        let asked = requests(w);
        assert_eq!(told.len(), asked.len(), "{}: one answer a write", who(0));
        let mut item_of: BTreeMap<usize, i64> = BTreeMap::new();
        for (n, ((line, kind), (answer, when))) in asked.iter().zip(told).enumerate() {
            if *kind == Line::Plain {
                let outcome = answer["outcome"].as_str().unwrap_or("?");
                // A write without a causal number takes the clock's next: never stale.
                assert!(
                    ["inserted", "superseded"].contains(&outcome),
                    "{}: {line} → {answer}",
                    who(n)
                );
                assert_eq!(
                    (&answer["predicate"], &answer["scope"]),
                    (
                        &json!(stored(&line["predicate"])),
                        &json!(ledger.stored_scope(&s(&line["scope"])))
                    ),
                    "{}: {answer}",
                    who(n)
                );
                ledger.assert_words(answer, line["raw"].as_str(), &who(n));
                ledger.claim(answer, &line["value"], line["source"].as_str(), who(n));
                continue;
            }
            assert_eq!(
                answer["outcome"],
                "pending",
                "{}: {line} → {answer}",
                who(n)
            );
            let id = answer["pending_id"].as_i64().expect("a pending id");
            item_of.insert(n, id);
            let new = match kind {
                Line::Repeat(first) => {
                    let first = item_of[first];
                    repeats.push(Repeat {
                        who: who(n),
                        first,
                        told: id,
                        when: *when,
                    });
                    id != first
                }
                _ => true,
            };
            let reason = if new {
                EXPLICIT.to_string()
            } else {
                joined(id)
            };
            assert_eq!(answer["reason"], reason, "{}: {line} → {answer}", who(n));
            if new {
                assert!(told_items.insert(id), "{}: told #{id}, told before", who(n));
            }
            let item = items
                .get(&id)
                .unwrap_or_else(|| panic!("{}: told #{id}, not stored", who(n)));
            assert_eq!(
                (item.predicate.as_str(), &item.value, &item.source),
                (
                    stored(&line["predicate"]),
                    &line["value"],
                    &s(&line["source"])
                ),
                "{}: #{id}",
                who(n)
            );
            assert_eq!(
                answer["causal_seq"].as_i64(),
                Some(item.causal_seq),
                "{}: #{id}",
                who(n)
            );
            // Global and the repository, as stored, whoever spelled it first.
            let candidates: BTreeSet<&String> = item.candidates.iter().collect();
            assert_eq!(
                candidates,
                BTreeSet::from([&"global".to_string(), &ledger.repo]),
                "{}: #{id}",
                who(n)
            );
        }
    }
    assert_eq!(
        items.keys().copied().collect::<BTreeSet<_>>(),
        told_items,
        "the items are the ones the writers were told of"
    );

    // The resolvers: each item settled by one try — a resolution or a rejection — and every
    // other try told it already was, and how.
    let mut by_item: BTreeMap<i64, Vec<&Resolving>> = BTreeMap::new();
    for t in &resolvings {
        by_item.entry(t.id).or_default().push(t);
    }
    let (mut collided, mut rejected) = (0, 0);
    let mut outcomes = BTreeMap::<String, usize>::new();
    let mut by_whom = [0; RESOLVERS.len()];
    let mut winners: BTreeMap<i64, &Resolving> = BTreeMap::new();
    for (&id, item) in &items {
        let tries = by_item.get(&id).map(Vec::as_slice).unwrap_or_default();
        let won: Vec<&&Resolving> = tries.iter().filter(|t| t.told.answer.is_ok()).collect();
        let [winner] = won[..] else {
            panic!(
                "#{id}: {} tries were told they settled it: {tries:#?}",
                won.len()
            );
        };
        by_whom[winner.by] += 1;
        winners.insert(id, winner);
        if winner.rejects {
            assert_rejected(id, item, winner, &ledger);
            rejected += 1;
        } else {
            let outcome = assert_resolved(id, item, winner, &mut ledger);
            *outcomes.entry(outcome).or_default() += 1;
        }
        // None was told before the winner began.
        let status = format!("pending item #{id} is already {}", item.status);
        let resolution = item.resolution.as_deref().unwrap_or_default();
        for t in tries.iter().filter(|t| t.told.answer.is_err()) {
            collided += 1;
            let said = if t.rejects {
                format!("{status}: nothing to do")
            } else {
                format!("{status} ({resolution}): nothing to do")
            };
            let e = t.told.answer.as_ref().unwrap_err();
            assert!(
                e.contains(&said),
                "resolver {} on #{id} was told {e:?}, not {said:?}",
                t.by
            );
            assert!(
                t.told.end > winner.told.start,
                "resolver {} was told #{id} was settled before resolver {} began",
                t.by,
                winner.by
            );
        }
    }

    // A repeat joined its item only while it was open — not once settled before the repeat
    // began — and queued a new one only once it was settled.
    let (mut joined_open, mut queued_anew) = (0, 0);
    for r in &repeats {
        let settled = &winners[&r.first].told;
        if r.told == r.first {
            joined_open += 1;
        } else {
            queued_anew += 1;
        }
        let Some((start, end)) = r.when else {
            continue;
        };
        if r.told == r.first {
            assert!(
                settled.end > start,
                "{} joined #{}, settled before the repeat began",
                r.who,
                r.first
            );
        } else {
            assert!(
                settled.start < end,
                "{} queued #{} anew while #{} was still open",
                r.who,
                r.told,
                r.first
            );
        }
    }
    assert!(joined_open > 0, "no repeat joined an open item");

    // The reverters: the version told holds the value of the version told brought back.
    let (mut reverted, mut confirmed_reverts, mut refused) = (0, 0, 0);
    let mut told_reverts: BTreeMap<(String, String, i64, i64, String), usize> = BTreeMap::new();
    for t in &revertings {
        let who = format!(
            "reverter {} ({} @ {} to {:?})",
            t.by, t.predicate, t.scope, t.to
        );
        let Ok(told) = &t.told.answer else {
            refused += 1;
            continue;
        };
        let outcome = s(&told["outcome"]);
        let version = told["version"].as_i64().expect("a version");
        let back_to = told["reverted_to"].as_i64().expect("reverted_to");
        let scope = ledger.stored_scope(&t.scope);
        assert_eq!(
            (&told["predicate"], &told["scope"]),
            (&json!(t.predicate), &json!(scope)),
            "{who}: {told}"
        );
        let at = |v: i64| (t.predicate.to_string(), scope.clone(), v);
        let brought = ledger.set_at(&at(back_to));
        let (value, source) = (
            brought.value.clone().expect("a value"),
            brought.source.clone(),
        );
        match (outcome.as_str(), t.to) {
            (_, Some(n)) => assert_eq!(back_to, n, "{who} was told {told}"),
            // The version before the current one: the current one was the version before it.
            ("superseded", None) => assert_eq!(back_to, version - 2, "{who} was told {told}"),
            (_, None) => assert_eq!(back_to, version - 1, "{who} was told {told}"),
        }
        match outcome.as_str() {
            "superseded" => {
                reverted += 1;
                ledger.claim(told, &value, source.as_deref(), who.clone());
            }
            "confirmed" => {
                confirmed_reverts += 1;
                let set = ledger.set_at(&at(version));
                assert!(
                    same_value(set.value.as_ref().unwrap(), &value)
                        && same_value(&told["value"], &value),
                    "{who} was told {told}; v{version} holds {set:?}"
                );
            }
            _ => panic!("{who} was told {told}"),
        }
        *told_reverts
            .entry((at(0).0, at(0).1, version, back_to, outcome))
            .or_default() += 1;
    }
    let mut logged_reverts = BTreeMap::new();
    for e in ledger.events.iter().filter(|e| e.event == "reverted") {
        let key = (
            e.predicate.clone(),
            e.scope.clone(),
            e.version.expect("a version"),
            e.detail["reverted_to"].as_i64().expect("reverted_to"),
            s(&e.detail["outcome"]),
        );
        *logged_reverts.entry(key).or_default() += 1;
    }
    assert_eq!(
        logged_reverts, told_reverts,
        "the reverted events are the reverts told"
    );

    // Nothing stored that no client was told of.
    let unclaimed: Vec<&Event> = ledger
        .sets
        .values()
        .filter(|i| !ledger.claimed.contains_key(i))
        .map(|&i| &ledger.events[i])
        .collect();
    assert!(
        unclaimed.is_empty(),
        "set events no client was told of: {unclaimed:#?}"
    );
    let told_stale = outcomes.get("stale").copied().unwrap_or(0);
    let told_confirmed = outcomes.get("confirmed").copied().unwrap_or(0) + confirmed_reverts;
    assert_eq!(
        (
            ledger.count("stale", |_| true),
            ledger.count("confirmed", |_| true),
            ledger.count("pending_resolved", |_| true)
        ),
        (told_stale, told_confirmed, items.len() - rejected),
        "stale, confirmed and pending_resolved events against what was told"
    );

    // Each identity: versions 1, 2, 3 … and one current record, at the last.
    let current = db.sql_text_rows(&format!(
        "SELECT predicate, scope, CAST(version AS TEXT), value FROM memories
         WHERE subject = '{SUBJECT}'"
    ));
    let mut seen = BTreeSet::new();
    for r in &current {
        let (p, sc) = (r[0].clone().unwrap(), r[1].clone().unwrap());
        assert!(
            seen.insert((p.clone(), sc.clone())),
            "two current records of {p} @ {sc}"
        );
        let version: i64 = r[2].as_deref().unwrap().parse().unwrap();
        let versions: Vec<i64> = ledger
            .sets
            .keys()
            .filter(|(sp, ss, _)| (sp, ss) == (&p, &sc))
            .map(|at| at.2)
            .collect();
        assert_eq!(
            versions,
            (1..=version).collect::<Vec<_>>(),
            "{p} @ {sc}: its set versions, current v{version}"
        );
        // A value supersedes only one set or confirmed at a lower causal number.
        let seqs: Vec<i64> = versions
            .iter()
            .map(|&v| {
                let set = ledger.set_at(&(p.clone(), sc.clone(), v));
                set.causal_seq.expect("a causal number")
            })
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{p} @ {sc}: causal numbers by version {seqs:?}"
        );
        let value: Value = serde_json::from_str(r[3].as_deref().unwrap()).unwrap();
        let last = ledger.set_at(&(p.clone(), sc.clone(), version));
        assert_eq!(
            last.value.as_ref(),
            Some(&value),
            "{p} @ {sc}: current v{version}"
        );
    }
    let identities: BTreeSet<(String, String)> = ledger
        .sets
        .keys()
        .map(|(p, sc, _)| (p.clone(), sc.clone()))
        .collect();
    assert_eq!(
        identities, seen,
        "every identity with a version has a current record"
    );

    // The race happened: resolvers collided, and every kind of client got through.
    assert!(collided > 0, "no two resolvers tried one item");
    assert!(rejected > 0, "no rejection won a race");
    assert!(
        by_whom.iter().all(|&n| n > 0),
        "items resolved by each resolver: {by_whom:?}"
    );
    assert!(reverted > 0, "no revert made a new version");

    // `memscope pending` agrees: nothing waits, and every item is listed as it is settled.
    assert_eq!(
        db.pending(false),
        Vec::<Value>::new(),
        "open items at the end"
    );
    let listed: BTreeMap<i64, (String, Option<String>)> = db
        .pending(true)
        .iter()
        .map(|i| {
            let id = i["id"].as_i64().expect("an id");
            let scope = i["resolved_scope"].as_str().map(str::to_string);
            (id, (s(&i["status"]), scope))
        })
        .collect();
    let stored: BTreeMap<i64, (String, Option<String>)> = items
        .iter()
        .map(|(&id, i)| (id, (i.status.clone(), i.resolved_scope.clone())))
        .collect();
    assert_eq!(
        listed, stored,
        "`memscope pending --all` lists the items as stored"
    );
    let report = db.assert_check_ok();
    if db.is_postgres() {
        assert!(report["integrity"].is_null(), "{report:#}");
    } else {
        let full = db.run(&["check", "--full", "--json"]).ok().json();
        assert_eq!(
            (
                &full["ok"],
                &full["integrity"]["ok"],
                &full["integrity"]["mode"]
            ),
            (&json!(true), &json!(true), &json!("full")),
            "{full:#}"
        );
    }
    eprintln!(
        "curation_race ({backend}): {} writes from {} writers ({joined_open} repeats joined an open item, {queued_anew} queued anew), {} items resolved as {outcomes:?} or rejected ({rejected}) (settled by resolver {by_whom:?}; {collided} tries told already settled), {} reverts ({reverted} new versions, {confirmed_reverts} confirmations, {refused} refused), {} set events in {raced:.1?}; check clean",
        written.iter().map(Vec::len).sum::<usize>(),
        WRITERS.len(),
        items.len(),
        revertings.len(),
        ledger.sets.len()
    );
}

/// A predicate as written, as stored.
fn stored(written: &Value) -> &'static str {
    let p = PREDICATES
        .iter()
        .position(|p| written == p)
        .unwrap_or_else(|| panic!("not a predicate of this test: {written}"));
    STORED[p]
}

fn s(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("a string: {v}"))
        .to_string()
}
