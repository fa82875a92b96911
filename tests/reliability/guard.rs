//! The scope guard under concurrency (issue 16), on a SQLite file and on PostgreSQL: three
//! `memscope apply` processes, two connections in this process and two `memscope mcp` servers
//! write global rules at the same time, each from its own repository (`"context"`, the servers'
//! `--repo`), on the same subjects: some in words that point at the repository (queued for a
//! human), some stating a default or saying nothing (applied), some after a repo-scoped sibling
//! from the same message (queued).
//!
//! Meanwhile every client asks the same eight questions again and again (README, "write": an
//! ambiguous write that repeats an open pending item — same subject, predicate, value as values
//! compare, candidates in any order, and source — is that item): guard-queued and explicitly
//! ambiguous writes in `repo-shared` (spelled in three cases: README, "The scope guard": a retry
//! in another case joins the item), one of them queued by the guard for half the clients and
//! asked as ambiguous by the others (the same candidates: one item), with values spelled alike
//! (`NPM`, `3.0`), sources of kilobytes of Chinese and emoji that do not compress (past the
//! ~2,700 bytes of a PostgreSQL index entry: schema 9 keys `pending_repeats` by `md5(source)`;
//! with schema 8's index these writes fail), two sources that differ only in their last
//! character, and one source asked with two values (two questions).
//!
//! Every client must have been told what the database holds at the end — each queued write an
//! open pending item with its id, value, causal number, candidates and evidence; each applied
//! one a version with its value in the history; each repeat the one item of its question, which
//! exactly one writer queued, the others told it was already waiting — no write whose words point
//! at a place may be current anywhere, `memscope pending` must list exactly the items someone was
//! told of, and `check` must pass (on SQLite with its full integrity check too; PostgreSQL
//! guards its own pages).
//!
//! Reproduce: `cargo test --release --test reliability -- guard:: --nocapture`
//! (`MEMSCOPE_TEST_POSTGRES=postgres://…` for the PostgreSQL side).

use crate::support::mcp_session::RawSession;
use crate::support::reliability::*;
use crate::support::{long_text, on_postgres};
use memscope::model::same_value;
use memscope::spelling::fold;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SUBJECTS: usize = 4;
const ROUNDS: usize = 6;
/// Clients 0–2 are `apply` processes, 3–4 connections in this process ([`write_concurrently`]),
/// 5–6 MCP servers.
const MCP: [usize; 2] = [5, 6];
const CLIENTS: usize = 7;
/// The subject the MCP servers serve, and every repeated question's.
const REPEATER: &str = "user:repeat";
/// What the writer that queues an ambiguous write is told, and how the guard's reason begins.
const EXPLICIT: &str = "the scope is ambiguous: a human picks one with `memscope pending resolve`";
const GUARD: &str = "the scope guard queued it for a human: ";
/// The guard's evidence for "这个仓库" (this repository).
const HERE: &str = "the words say “这个仓库”";

/// What a repeat is told (README, "write"): the item it joined.
fn joined(id: i64) -> String {
    format!("the same write is already waiting as pending #{id}: a human picks its scope with `memscope pending resolve`")
}

/// What a line says, by its number: a place word, a default, nothing, or a sibling first; or
/// the repeated question it asks.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Said {
    Place,
    Default,
    Nothing,
    Sibling,
    Repeat(usize),
}

fn said(n: usize) -> Said {
    [Said::Place, Said::Default, Said::Nothing, Said::Sibling][n % 4]
}

/// The repository the questions are asked in, as client `c` spells it.
fn shared_repo(c: usize) -> &'static str {
    ["repo-shared", "Repo-Shared", "REPO-SHARED"][c % 3]
}

/// A write every client repeats while it waits for a human.
struct Question {
    predicate: &'static str,
    /// The value as each client spells it (`c % 3`): values that compare as one.
    values: [Value; 3],
    source: String,
    raw: Option<String>,
    /// How it is made ambiguous.
    how: How,
}

/// How a question is made ambiguous.
#[derive(Clone, Copy, PartialEq)]
enum How {
    /// By the scope guard: a global write whose words say "this repository".
    Guard,
    /// As written: `{"ambiguous": [...]}` (MCP: `scope: "unsure"`).
    Asked,
    /// Each way by half the clients (even: the guard): the same candidates, so the same item.
    Both,
}

impl Question {
    /// Whether client `c` asks it as a global write the guard queues.
    fn guarded(&self, c: usize) -> bool {
        match self.how {
            How::Guard => true,
            How::Asked => false,
            How::Both => c.is_multiple_of(2),
        }
    }
}

/// At least `bytes` of Chinese and emoji drawn by a PRNG seeded with `seed`, after `marker`:
/// text PostgreSQL cannot compress into the ~2,700 bytes of an index entry, as it does a
/// repeated phrase ([`long_text`]).
fn noisy_text(seed: u64, bytes: usize, marker: &str) -> String {
    let mut rng = Rng::new(seed);
    let mut s = marker.to_string();
    while s.len() < bytes {
        let c = if rng.chance(20) {
            0x1F300 + rng.below(0x250) as u32
        } else {
            0x4E00 + rng.below(0x5000) as u32
        };
        s.push(char::from_u32(c).expect("a character"));
    }
    s
}

fn questions() -> Vec<Question> {
    let here = |tool: &str| Some(format!("这个仓库继续用 {tool}"));
    let long = noisy_text(1, 6000, "来源A:");
    let prefix = noisy_text(2, 8000, "来源B:");
    let config = [
        json!({"tool": "pnpm", "retries": 3}),
        json!({"retries": 3.0, "tool": "PNPM"}),
        json!({"tool": "Pnpm", "retries": 3e0}),
    ];
    vec![
        Question {
            predicate: "package_manager",
            values: [json!("npm"), json!("NPM"), json!("Npm")],
            source: "thread:r/message:1".into(),
            raw: here("npm"),
            how: How::Guard,
        },
        Question {
            predicate: "package_manager",
            values: [
                json!("yarn 值 🧶"),
                json!("YARN 值 🧶"),
                json!("yarn  值 🧶"),
            ],
            source: long.clone(),
            raw: here("yarn"),
            how: How::Guard,
        },
        // The same source with another value: another question, another item.
        Question {
            predicate: "package_manager",
            values: [json!("bun 值"), json!("Bun 值"), json!("BUN 值")],
            source: long,
            raw: here("bun"),
            how: How::Guard,
        },
        Question {
            predicate: "package_manager",
            values: config.clone(),
            source: format!("{prefix}甲"),
            raw: Some("pnpm 是全局的还是这个项目的？".into()),
            how: How::Asked,
        },
        // Its source differs from the one before in its last character only.
        Question {
            predicate: "package_manager",
            values: config,
            source: format!("{prefix}乙"),
            raw: None,
            how: How::Asked,
        },
        Question {
            predicate: "shell",
            values: [json!("zsh"), json!("ZSH"), json!("zsh ")],
            source: "thread:🧠/message:5".into(),
            raw: Some(long_text(4000, "这个仓库继续用 zsh。")),
            how: How::Guard,
        },
        Question {
            predicate: "shell",
            values: [json!(42), json!(42.0), json!(4.2e1)],
            source: format!("{}{}", "🧠🚀🧶".repeat(100), noisy_text(3, 3000, "来源C:")),
            raw: None,
            how: How::Asked,
        },
        // Queued by the guard from some clients, asked as ambiguous by the others.
        Question {
            predicate: "shell",
            values: [json!("fish 🐟"), json!("FISH 🐟"), json!("Fish 🐟")],
            source: noisy_text(4, 5000, "来源D:"),
            raw: here("fish"),
            how: How::Both,
        },
    ]
}

/// Client `c`'s line asking question `q`.
fn ask(q: &Question, c: usize) -> Value {
    let repo = shared_repo(c);
    let scope = if q.guarded(c) {
        json!("global")
    } else {
        let mut candidates = vec!["global".to_string(), format!("repo:{repo}")];
        if c % 2 == 1 {
            candidates.reverse();
        }
        json!({ "ambiguous": candidates })
    };
    let mut line = json!({"subject": REPEATER, "predicate": q.predicate,
        "value": q.values[c % 3], "scope": scope, "source": q.source,
        "context": {"repo": repo}});
    if let Some(raw) = &q.raw {
        line["raw"] = json!(raw);
    }
    line
}

/// Client `c`'s requests, in order: (request JSON, what its words say). An MCP server writes
/// for its one subject in its one repository; the others write for every subject, each from a
/// repository of its own. Each round, every client asks two of the questions again.
fn requests(c: usize) -> Vec<(Value, Said)> {
    let qs = questions();
    let mut out = Vec::new();
    for n in 0..ROUNDS {
        if MCP.contains(&c) {
            for (kind, words) in [
                (Said::Place, "这个仓库继续用"),
                (Said::Default, "以后新建项目默认用"),
            ] {
                let value = format!("vim {c}-{n}-{} 值", words.chars().count());
                out.push((
                    json!({"subject": REPEATER, "predicate": "editor", "value": value,
                        "scope": "global", "source": format!("mcp:{c}/round:{n}/{words}"),
                        "raw": format!("{words} {value}"), "context": {"repo": shared_repo(c)}}),
                    kind,
                ));
            }
        } else {
            out.extend(round(c, n));
        }
        for q in [(n + c) % qs.len(), (n + c + 3) % qs.len()] {
            out.push((ask(&qs[q], c), Said::Repeat(q)));
        }
    }
    out
}

/// Round `n` of client `c` (not a server): every subject, from `repo-{c}`.
fn round(c: usize, n: usize) -> Vec<(Value, Said)> {
    let repo = format!("repo-{c}");
    let mut out = Vec::new();
    for s in 0..SUBJECTS {
        let subject = format!("user:{s}");
        let source = format!("client:{c}/round:{n}/subject:{s}");
        let value = format!("tool {c}-{n}-{s} 值");
        let kind = said(n + s);
        let raw = match kind {
            Said::Place => Some(format!("这个仓库继续用 {value}")),
            Said::Default => Some(format!("以后新建项目默认用 {value}")),
            _ => None,
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
    out
}

/// Client `c`'s request lines, without what they say.
fn lines(c: usize) -> Vec<Value> {
    requests(c).into_iter().map(|(line, _)| line).collect()
}

/// MCP client `c`: its server on `db` (`--subject user:repeat --repo …`), started and
/// initialized, says `ready` and waits for `go`; then each request as a `remember` call, one at a
/// time. What it was told (`structuredContent`), one answer a request.
fn remember_all(db: &Db, c: usize, ready: mpsc::Sender<()>, go: mpsc::Receiver<()>) -> Vec<Value> {
    let mut cmd = db.command(&["mcp", "--subject", REPEATER, "--repo", shared_repo(c)]);
    cmd.current_dir(db.dir.path());
    let mut session = RawSession::start(cmd);
    session.initialize();
    let _ = ready.send(());
    let _ = go.recv();
    let mut told = Vec::new();
    for (i, (line, _)) in requests(c).into_iter().enumerate() {
        assert_eq!(
            (line["subject"].as_str(), line["context"]["repo"].as_str()),
            (Some(REPEATER), Some(shared_repo(c))),
            "what the server {c} cannot write: {}",
            shown(&line)
        );
        // The server makes `unsure` ambiguous between global and its repository.
        let scope = if line["scope"].is_string() {
            line["scope"].clone()
        } else {
            json!("unsure")
        };
        let mut args = json!({"predicate": line["predicate"], "value": line["value"],
            "source": line["source"], "scope": scope});
        if let Some(raw) = line.get("raw") {
            args["raw"] = raw.clone();
        }
        let r = session.request(
            i as i64 + 2,
            "tools/call",
            json!({"name": "remember", "arguments": args}),
        );
        assert!(
            r["result"]["isError"] != true && r["result"]["structuredContent"].is_object(),
            "MCP client {c}: {} → {r}",
            shown(&line)
        );
        told.push(r["result"]["structuredContent"].clone());
    }
    let (code, stderr) = session.finish();
    assert_eq!(code, 0, "memscope mcp {c} ended badly: {stderr}");
    told
}

/// A pending row as stored.
#[derive(Debug)]
struct Item {
    subject: String,
    predicate: String,
    value: Value,
    raw: Option<String>,
    source: String,
    causal_seq: i64,
    candidates: Vec<String>,
    status: String,
    reason: Option<String>,
}

fn stored_items(db: &Db) -> BTreeMap<i64, Item> {
    db.sql_text_rows(
        "SELECT CAST(id AS TEXT), subject, predicate, value, raw, source,
                CAST(causal_seq AS TEXT), candidates, status, reason FROM pending",
    )
    .into_iter()
    .map(|r| {
        let text = |i: usize| r[i].clone().unwrap_or_else(|| panic!("NULL in {r:?}"));
        let item = Item {
            subject: text(1),
            predicate: text(2),
            value: serde_json::from_str(&text(3)).expect("a stored value is JSON"),
            raw: r[4].clone(),
            source: text(5),
            causal_seq: text(6).parse().unwrap(),
            candidates: serde_json::from_str(&text(7)).expect("candidates are a JSON list"),
            status: text(8),
            reason: r[9].clone(),
        };
        (text(0).parse().unwrap(), item)
    })
    .collect()
}

/// (subject, predicate, scope, version) → value of every `set` event.
fn stored_sets(db: &Db) -> BTreeMap<(String, String, String, i64), Value> {
    db.sql_text_rows(
        "SELECT subject, predicate, scope, CAST(version AS TEXT), value FROM history
         WHERE event = 'set'",
    )
    .into_iter()
    .map(|r| {
        let text = |i: usize| r[i].clone().unwrap_or_else(|| panic!("NULL in {r:?}"));
        let key = (text(0), text(1), text(2), text(3).parse().unwrap());
        (
            key,
            serde_json::from_str(&text(4)).expect("a stored value is JSON"),
        )
    })
    .collect()
}

fn set_of(candidates: &Value) -> BTreeSet<String> {
    candidates
        .as_array()
        .unwrap_or_else(|| panic!("a candidate list: {candidates}"))
        .iter()
        .map(|c| c.as_str().expect("a scope").to_string())
        .collect()
}

/// `global` and the place `repo` names, in its one stored spelling, as the item's candidates.
#[track_caller]
fn assert_candidates(item: &Item, repo: &str, id: i64) {
    let places: Vec<&String> = item.candidates.iter().filter(|c| *c != "global").collect();
    assert!(
        item.candidates.len() == 2
            && places.len() == 1
            && fold(places[0]) == fold(&format!("repo:{repo}")),
        "#{id}: candidates {:?}, expected global and repo:{repo}",
        item.candidates
    );
}

#[test]
fn concurrent_guarded_writers_are_told_what_the_database_holds() {
    let db = Db::new();
    db.init();
    guarded_writers(db);
}

#[test]
fn concurrent_guarded_writers_are_told_what_the_database_holds_on_postgres() {
    on_postgres(guarded_writers);
}

fn guarded_writers(db: Db) {
    let backend = if db.is_postgres() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let started = Instant::now();
    let answers = write_from_every_client(&db);
    let written = started.elapsed();
    // What each client sent beside what it was told, in order.
    let told: Vec<(usize, Value, Said, Value)> = answers
        .into_iter()
        .enumerate()
        .flat_map(|(c, answers)| {
            let asked = requests(c);
            assert_eq!(
                asked.len(),
                answers.len(),
                "client {c}: one answer a request"
            );
            asked
                .into_iter()
                .zip(answers)
                .map(move |((l, k), a)| (c, l, k, a))
        })
        .collect();

    let items = stored_items(&db);
    let sets = stored_sets(&db);
    // Every item someone was told of, and to whom; the writes that were queued, with the value
    // their item holds.
    let mut told_items: BTreeMap<i64, String> = BTreeMap::new();
    let mut note = |id: i64, whom: String| {
        let earlier = told_items.insert(id, whom.clone());
        assert!(
            earlier.is_none(),
            "#{id} was told to {earlier:?} and to {whom}"
        );
    };
    let mut queued: Vec<(&Value, &Value)> = Vec::new();
    let mut repeats: BTreeMap<usize, Vec<(usize, &Value, &Value)>> = BTreeMap::new();
    for (c, line, kind, answer) in &told {
        match kind {
            Said::Repeat(q) => repeats.entry(*q).or_default().push((*c, line, answer)),
            // Words or a sibling that point at the writer's own repository: queued.
            Said::Place | Said::Sibling if line["scope"] == "global" => {
                let id = assert_queued(*c, line, *kind, answer, &items);
                note(id, format!("client {c}: {line}"));
                queued.push((line, &items[&id].value));
            }
            // A default, or nothing: applied.
            _ => assert_applied(*c, line, answer, &sets),
        }
    }
    let qs = questions();
    let mut first_by = Vec::new();
    for (q, question) in qs.iter().enumerate() {
        let answers = &repeats[&q];
        let (id, first) = assert_one_answer(q, question, answers, &items);
        note(id, format!("question {q}"));
        queued.push((answers[0].1, &items[&id].value));
        first_by.push(first);
    }
    // One item for each question, and none more for any question's subject, predicate and
    // source (two of them share a source, so two items there).
    for question in &qs {
        let asked = qs
            .iter()
            .filter(|o| (o.predicate, &o.source) == (question.predicate, &question.source))
            .count();
        let held = items
            .values()
            .filter(|i| {
                (i.subject.as_str(), i.predicate.as_str(), &i.source)
                    == (REPEATER, question.predicate, &question.source)
            })
            .count();
        assert_eq!(
            held,
            asked,
            "items of {REPEATER} · {} from a source of {} bytes",
            question.predicate,
            question.source.len()
        );
    }
    // No queued value was ever applied.
    for (line, value) in &queued {
        let applied: Vec<_> = sets
            .iter()
            .filter(|((subject, predicate, scope, _), v)| {
                (subject, predicate) == (&s(&line["subject"]), &s(&line["predicate"]))
                    && scope == "global"
                    && same_value(v, value)
            })
            .collect();
        assert!(
            applied.is_empty(),
            "{} was queued, and applied: {applied:?}",
            shown(line)
        );
    }
    // No item nobody was told of, and `memscope pending` lists each as stored.
    assert_eq!(
        items.keys().copied().collect::<Vec<_>>(),
        told_items.keys().copied().collect::<Vec<_>>(),
        "the items are the ones the clients were told of"
    );
    let listed = db.pending(false);
    assert_eq!(
        listed.len(),
        items.len(),
        "`memscope pending` lists every open item"
    );
    for l in &listed {
        let id = l["id"].as_i64().expect("an id");
        let item = &items[&id];
        assert_eq!(
            (&l["value"], l["source"].as_str(), &set_of(&l["candidates"])),
            (
                &item.value,
                Some(item.source.as_str()),
                &set_of(&json!(item.candidates))
            ),
            "#{id} as listed"
        );
    }

    let report = db.assert_check_ok();
    if db.is_postgres() {
        // The server guards its pages: there is no file for memscope to examine.
        assert!(report["integrity"].is_null(), "{report:#}");
    } else {
        assert_eq!(report["integrity"]["ok"], true, "{report:#}");
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
    let asked: usize = repeats.values().map(Vec::len).sum();
    eprintln!(
        "guard ({backend}): {} writes from {CLIENTS} clients in {written:.1?} — {} items ({} queued by the guard's words or a sibling, {} questions asked {asked} times, first by clients {first_by:?}), {} set events; check clean",
        told.len(),
        items.len(),
        items.len() - qs.len(),
        qs.len(),
        sets.len()
    );
}

/// Every client writes at once: the `apply` processes and the connections in this process
/// ([`write_concurrently`]) and the MCP servers, started before them and waiting until they
/// go. What each client was told, in client order.
fn write_from_every_client(db: &Db) -> Vec<Vec<Value>> {
    std::thread::scope(|scope| {
        let (ready_tx, ready) = mpsc::channel();
        let mut go = Vec::new();
        let servers: Vec<_> = MCP
            .iter()
            .map(|&c| {
                let (go_tx, go_rx) = mpsc::channel();
                go.push(go_tx);
                let ready = ready_tx.clone();
                scope.spawn(move || remember_all(db, c, ready, go_rx))
            })
            .collect();
        for _ in MCP {
            ready
                .recv_timeout(Duration::from_secs(60))
                .expect("the MCP servers start");
        }
        for g in &go {
            let _ = g.send(());
        }
        let mut told = write_concurrently(db, lines);
        for server in servers {
            told.push(server.join().expect("an MCP client"));
        }
        told
    })
}

/// A global write whose words or sibling point at the writer's repository was queued: told
/// `pending` with an item the database holds as it was told — value, causal number,
/// candidates (global and that repository) — with the evidence. Returns the item's id.
#[track_caller]
fn assert_queued(
    c: usize,
    line: &Value,
    kind: Said,
    answer: &Value,
    items: &BTreeMap<i64, Item>,
) -> i64 {
    assert_eq!(
        answer["outcome"], "pending",
        "client {c}: {line} → {answer}"
    );
    let id = answer["pending_id"].as_i64().expect("a pending id");
    let item = items
        .get(&id)
        .unwrap_or_else(|| panic!("told pending #{id}, the database has none: {answer}"));
    assert_eq!(
        (
            &item.subject,
            &item.predicate,
            &item.source,
            item.status.as_str()
        ),
        (
            &s(&line["subject"]),
            &s(&line["predicate"]),
            &s(&line["source"]),
            "open"
        ),
        "#{id}"
    );
    assert_eq!(item.raw.as_deref(), line["raw"].as_str(), "#{id}");
    assert_eq!(
        (&item.value, &item.value),
        (&line["value"], &answer["value"]),
        "#{id}: {answer}"
    );
    assert_eq!(
        answer["causal_seq"].as_i64(),
        Some(item.causal_seq),
        "#{id}: {answer}"
    );
    assert_eq!(
        answer["scope"]["ambiguous"],
        json!(item.candidates),
        "#{id}: {answer}"
    );
    assert_eq!(item.candidates[0], "global", "#{id}");
    assert_candidates(item, line["context"]["repo"].as_str().unwrap(), id);
    let evidence = if kind == Said::Place {
        HERE
    } else {
        "the same message wrote install_command in repo:"
    };
    let reason = item.reason.as_deref().unwrap_or_default();
    assert!(reason.contains(evidence), "#{id}: {reason}");
    let told = answer["reason"].as_str().unwrap_or_default();
    assert!(
        told.starts_with(GUARD) && told.contains(evidence),
        "#{id}: {answer}"
    );
    id
}

/// A default, or nothing: applied, and the history holds that version's value.
#[track_caller]
fn assert_applied(
    c: usize,
    line: &Value,
    answer: &Value,
    sets: &BTreeMap<(String, String, String, i64), Value>,
) {
    let outcome = answer["outcome"].as_str().unwrap_or("?");
    assert!(
        ["inserted", "superseded", "confirmed"].contains(&outcome),
        "client {c}: {line} → {answer}"
    );
    let version = answer["version"].as_i64().expect("a version");
    let key = (
        s(&line["subject"]),
        s(&line["predicate"]),
        s(&line["scope"]),
        version,
    );
    let value = sets
        .get(&key)
        .unwrap_or_else(|| panic!("told v{version}, not in the history: {answer}"));
    assert_eq!(value, &answer["value"], "{answer}");
    if outcome != "confirmed" {
        assert_eq!(value, &line["value"], "{answer}");
    }
}

/// Question `q`, asked by every client: one item holds it as asked, queued by one writer;
/// every other writer was told it joined that item (README, "write"), with the item's value (as
/// first spelled), causal number and candidates. Returns the item's id and the client that
/// queued it.
#[track_caller]
fn assert_one_answer(
    q: usize,
    question: &Question,
    answers: &[(usize, &Value, &Value)],
    items: &BTreeMap<i64, Item>,
) -> (i64, usize) {
    let askers: BTreeSet<usize> = answers.iter().map(|(c, _, _)| *c).collect();
    assert_eq!(
        askers.len(),
        CLIENTS,
        "question {q} is asked by every client"
    );
    let told = |answers: &[&(usize, &Value, &Value)]| -> Vec<String> {
        answers
            .iter()
            .map(|(c, _, a)| format!("client {c}: {a}"))
            .collect()
    };
    let ids: BTreeSet<Option<i64>> = answers
        .iter()
        .map(|(_, _, a)| a["pending_id"].as_i64())
        .collect();
    let [Some(id)] = ids.iter().copied().collect::<Vec<_>>()[..] else {
        let all: Vec<_> = answers.iter().collect();
        panic!(
            "question {q} was told {ids:?}, not one item: {:#?}",
            told(&all)
        );
    };
    let item = items
        .get(&id)
        .unwrap_or_else(|| panic!("question {q} was told pending #{id}, the database has none"));
    assert_eq!(
        (
            item.subject.as_str(),
            item.predicate.as_str(),
            item.status.as_str()
        ),
        (REPEATER, question.predicate, "open"),
        "#{id}"
    );
    assert!(
        item.source == question.source,
        "#{id}: its source is not the one asked with ({} bytes stored, {} asked)",
        item.source.len(),
        question.source.len()
    );
    assert_eq!(item.raw, question.raw, "#{id}");
    assert!(
        same_value(&item.value, &question.values[0]),
        "#{id}: {} is not {}",
        item.value,
        question.values[0]
    );
    assert_candidates(item, "repo-shared", id);
    let queued_by: Vec<&(usize, &Value, &Value)> = answers
        .iter()
        .filter(|(_, _, a)| a["reason"] != joined(id).as_str())
        .collect();
    assert_eq!(
        queued_by.len(),
        1,
        "question {q}: one writer queues #{id}, the others are told it already waits: {:#?}",
        told(&queued_by)
    );
    let (first, _, answer) = queued_by[0];
    let reason = answer["reason"].as_str().unwrap_or_default();
    if question.guarded(*first) {
        assert!(
            reason.starts_with(GUARD) && reason.contains(HERE),
            "#{id}: {reason}"
        );
        let stored = item.reason.as_deref().unwrap_or_default();
        assert!(stored.contains(HERE), "#{id}: {stored}");
    } else {
        assert_eq!(reason, EXPLICIT, "#{id}");
        assert_eq!(item.reason, None, "#{id}");
    }
    for (c, line, answer) in answers {
        let what = format!("question {q}, client {c}: {} → {answer}", shown(line));
        assert_eq!(answer["outcome"], "pending", "{what}");
        assert!(same_value(&line["value"], &item.value), "{what}");
        assert_eq!(answer["value"], item.value, "told the item's value: {what}");
        assert_eq!(
            answer["causal_seq"].as_i64(),
            Some(item.causal_seq),
            "{what}"
        );
        assert_eq!(
            set_of(&answer["scope"]["ambiguous"]),
            set_of(&json!(item.candidates)),
            "told the item's candidates: {what}"
        );
    }
    (id, *first)
}

/// `v` with every string past 80 bytes cut (and its length said): a line as a failure shows it.
fn shown(v: &Value) -> Value {
    match v {
        Value::String(t) if t.len() > 80 => {
            let mut end = 60;
            while !t.is_char_boundary(end) {
                end -= 1;
            }
            json!(format!("{}… ({} bytes)", &t[..end], t.len()))
        }
        Value::Array(items) => Value::Array(items.iter().map(shown).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shown(v))).collect()),
        other => other.clone(),
    }
}

fn s(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("a string: {v}"))
        .to_string()
}
