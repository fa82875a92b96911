//! `apply` on PostgreSQL decides every line as line-by-line writes do (issue 17's speed work):
//! its batch is probed at once and decided in Rust against an overlay of the batch's earlier
//! lines, so one JSONL — repeated identities inside the batch, confirm, supersede, stale,
//! pending, the scope guard (with a context, and on words alone), a tombstoned identity, new
//! spellings, bad lines in the middle — goes
//! through `apply` on one PostgreSQL database and through `write`, line by line, on a second
//! one and on SQLite, and the outcomes, `list` and `history` must be the same.
//!
//! Run: `cargo test --release --test store -- postgres_apply::`

use super::postgres::{server, FreshDb};
use crate::support::relay::Relay;
use crate::support::TestDb;
use memscope::model::{
    DeleteTarget, HistoryEvent, Identity, MemoryRecord, WriteOutcome, WriteRequest,
};
use memscope::store::postgres::{Address, PgStore};
use memscope::store::AnyStore;
use memscope::store::{InputKind, ListFilter};
use memscope::{OpenMode, Scope};
use serde_json::{json, Value};
use std::ffi::OsStr;

/// The seeded past: live, confirmed, superseded, a scoped record, tombstoned identities (one
/// scoped, one global) and a restored one (history, no current record).
const SEED: [(&str, &str, &str, &str); 7] = [
    ("user:42", "package_manager", "pnpm", "global"),
    ("user:42", "package_manager", "PNPM", "global"),
    ("user:42", "package_manager", "npm", "repo:legacy-dashboard"),
    ("user:7", "coffee", "美式", "global"),
    ("user:7", "formatter", "prettier", "repo:web-app"),
    ("用户:小明", "coffee", "茶", "task:fix-1"),
    ("user:7", "diet", "素食", "global"),
];

/// The identities whose history is compared (as written; the stores respell them).
const TOUCHED: [(&str, &str, &str); 11] = [
    ("user:42", "package_manager", "global"),
    ("user:42", "package_manager", "repo:legacy-dashboard"),
    ("user:7", "coffee", "global"),
    ("user:7", "formatter", "repo:web-app"),
    ("用户:小明", "coffee", "task:fix-1"),
    ("user:1", "editor", "global"),
    ("user:1", "editor", "repo:New-App"),
    ("user:1", "shell", "global"),
    ("user:1", "theme", "task:T-9"),
    ("user:7", "diet", "global"),
    ("user:8", "font", "global"),
];

fn line(v: Value) -> String {
    v.to_string()
}

/// The input: one batch, the same identities again and again.
fn input() -> String {
    let w = |subject: &str, predicate: &str, value: &str, scope: &str, seq: Option<i64>| {
        let mut l = json!({
            "subject": subject, "predicate": predicate, "value": value, "scope": scope,
            "source": format!("thread:{value}"),
        });
        if let Some(s) = seq {
            l["causal_seq"] = json!(s);
        }
        line(l)
    };
    // A global write with the user's words and no context: judged on the words alone.
    let said = |subject: &str, predicate: &str, value: &str, seq: Option<i64>, raw: &str| {
        let mut l = json!({
            "subject": subject, "predicate": predicate, "value": value, "scope": "global",
            "source": format!("thread:{value}"), "raw": raw,
        });
        if let Some(s) = seq {
            l["causal_seq"] = json!(s);
        }
        line(l)
    };
    [
        // A new identity: inserted, confirmed twice (once causally older), superseded, stale,
        // superseded again with its own number, confirmed by another spelling.
        w("user:1", "editor", "vim", "global", None),
        w("User:1", "editor", "vim", "global", None),
        w("user:1", "editor", " VIM ", "global", Some(1)),
        w("user:1", "editor", "helix", "global", None),
        w("user:1", "editor", "emacs", "global", Some(2)),
        w("user:1", "editor", "nano", "global", Some(900)),
        w("user:1", "editor", "emacs", "global", Some(3)),
        w("user:1", "editor", "zed", "global", Some(899)),
        // Not JSON, then a value that is null: each fails alone.
        "{\"subject\": \"user:1\", \"predicate\": ".to_string(),
        line(
            json!({"subject": "user:1", "predicate": "editor", "value": null,
                    "scope": "global", "source": "s"}),
        ),
        // A new place: its first spelling is kept, the second finds it.
        w("user:1", "editor", "vim", "repo:New-App", None),
        w("user:1", "editor", "vi", "repo:new-app", None),
        w("user:1", "editor", "vi", "REPO:NEW-APP", Some(5)),
        // The seeded past: an alias, a confirmation of another spelling, a supersede, stale.
        w("user:42", "pkg_manager", "pnpm", "global", None),
        w("user:42", "package_manager", "yarn", "global", Some(4)),
        w("user:42", "package_manager", "bun", "global", None),
        w(
            "user:42",
            "package_manager",
            "npm",
            "repo:legacy-dashboard",
            Some(1),
        ),
        // A tombstoned identity, twice: rejected both times, nothing stored.
        w("用户:小明", "coffee", "咖啡", "task:fix-1", None),
        w("用户:小明", "coffee", "茶", "task:fix-1", Some(7)),
        // A restored identity continues its versions, then is confirmed.
        w("user:7", "formatter", "biome", "repo:web-app", None),
        w("user:7", "formatter", "biome", "repo:web-app", Some(2)),
        // Ambiguous: pending, then the same again (the open item repeats).
        line(
            json!({"subject": "user:1", "predicate": "shell", "value": "zsh",
                    "scope": ["global", "repo:new-app"], "source": "thread:9"}),
        ),
        line(
            json!({"subject": "user:1", "predicate": "shell", "value": "zsh",
                    "scope": ["global", "repo:new-app"], "source": "thread:9"}),
        ),
        // The scope guard queues the incident's words in the middle of the batch.
        line(
            json!({"subject": "user:1", "predicate": "shell", "value": "bash",
                    "scope": "global", "source": "thread:10",
                    "raw": "这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。",
                    "context": {"repo": "new-app"}}),
        ),
        // After it: the identities before it again.
        w("user:1", "editor", "kakoune", "global", None),
        w("user:1", "editor", "vi", "repo:new-app", None),
        w("user:7", "coffee", "拿铁", "global", None),
        w("user:7", "coffee", "美式", "global", Some(1)),
        w("user:1", "shell", "fish", "global", None),
        w("user:1", "theme", "dark", "task:T-9", None),
        w("user:1", "theme", "dark", "task:t-9", Some(999)),
        // Words without a context, in the run: plain words and a default are applied; place
        // words are applied and marked a suspect — inserted, superseded, confirmed, stale — and
        // on a deleted memory rejected.
        said(
            "user:1",
            "editor",
            "helix",
            None,
            "I moved to helix last week",
        ),
        said("user:8", "font", "mono", None, "这个仓库用等宽字体"),
        said("User:8", "font", "serif", None, "keep serif in this repo."),
        said("user:8", "font", "serif", None, "keep serif in this repo."),
        said("user:8", "font", "sans", Some(3), "this repo: sans"),
        said(
            "user:8",
            "font",
            "sans",
            None,
            "以后新建前端项目，默认用 sans。",
        ),
        said("user:7", "diet", "vegan", None, "in this repo we eat vegan"),
        w("user:1", "editor", "vim", "global", None),
    ]
    .join("\n")
        + "\n"
}

fn requests() -> Vec<Option<WriteRequest>> {
    input()
        .lines()
        .map(|l| WriteRequest::from_json_line(l).ok())
        .collect()
}

fn id(subject: &str, predicate: &str, scope: &str) -> Identity {
    Identity {
        subject: subject.into(),
        predicate: predicate.into(),
        scope: Scope::parse(scope).unwrap(),
    }
}

fn seed_request(s: &str, p: &str, v: &str, scope: &str) -> WriteRequest {
    WriteRequest::from_json_line(&line(json!({
        "subject": s, "predicate": p, "value": v, "scope": scope, "source": "seed"
    })))
    .unwrap()
}

/// An outcome as compared: its line number aside.
fn comparable(mut o: WriteOutcome) -> String {
    o.line = None;
    serde_json::to_string(&o).unwrap()
}

/// A record as compared: its times aside.
fn record(r: MemoryRecord) -> Value {
    json!([
        r.subject,
        r.predicate,
        r.scope.to_string(),
        r.value,
        r.version,
        r.source,
        r.causal_seq,
        r.raw,
        r.confirmed_at.is_some(),
        r.confirm_count
    ])
}

/// An event as compared: its id and times aside.
fn event(mut e: HistoryEvent) -> Value {
    if let Some(Value::Object(detail)) = &mut e.detail {
        detail.remove("live_intervals");
    }
    json!([
        e.event,
        e.subject,
        e.predicate,
        e.scope,
        e.version,
        e.value,
        e.raw,
        e.source,
        e.causal_seq,
        e.detail
    ])
}

fn all() -> ListFilter {
    ListFilter {
        scope: None,
        subject: None,
        predicate: None,
    }
}

/// What a store holds after the input: the current records, the touched identities' history.
type Held = (Vec<Value>, Vec<Vec<Value>>);

fn seed(store: &mut AnyStore) {
    for (s, p, v, scope) in SEED {
        store.write(&seed_request(s, p, v, scope)).unwrap();
    }
    let restored = id("user:7", "formatter", "repo:web-app");
    store
        .delete(&DeleteTarget::Identity(restored.clone()), Some("seed"))
        .unwrap();
    store.restore(&restored).unwrap();
    for (s, p, c) in [
        ("用户:小明", "coffee", "task:fix-1"),
        ("user:7", "diet", "global"),
    ] {
        store
            .delete(&DeleteTarget::Identity(id(s, p, c)), Some("seed"))
            .unwrap();
    }
}

fn held(store: &mut AnyStore) -> Held {
    let list = store
        .list(&all())
        .unwrap()
        .into_iter()
        .map(record)
        .collect();
    let history = TOUCHED
        .iter()
        .map(|(s, p, c)| {
            let scope = Scope::parse(c).unwrap();
            let events = store.history(s, p, Some(&scope)).unwrap();
            events.into_iter().map(event).collect()
        })
        .collect();
    (list, history)
}

/// One line after another through `write`, as a caller would: an unreadable line is the
/// caller's error, not the store's.
fn line_by_line(store: &mut AnyStore) -> Vec<String> {
    requests()
        .into_iter()
        .map(|r| match r {
            Some(r) => comparable(
                store
                    .write(&r)
                    .unwrap_or_else(|e| WriteOutcome::error(None, format!("{e:#}"))),
            ),
            None => "unreadable".into(),
        })
        .collect()
}

fn pending(store: &mut AnyStore) -> Vec<Value> {
    store
        .pending(true)
        .unwrap()
        .into_iter()
        .map(|p| {
            json!([
                p.id,
                p.subject,
                p.predicate,
                p.value,
                p.candidates,
                p.causal_seq
            ])
        })
        .collect()
}

/// The PostgreSQL store inside.
fn pg(store: &mut AnyStore) -> &mut PgStore {
    match store {
        AnyStore::Postgres(p) => p,
        AnyStore::Sqlite(_) => panic!("a PostgreSQL store"),
    }
}

fn open(db: &std::path::Path) -> AnyStore {
    let mut store = AnyStore::open(db, OpenMode::Create).unwrap();
    seed(&mut store);
    store
}

#[test]
fn apply_on_postgres_decides_every_line_as_writes_do_there_and_on_sqlite() {
    let Some(server) = server() else { return };
    let (applied_db, _raw_a) = FreshDb::prepared(&server);
    let (written_db, _raw_b) = FreshDb::prepared(&server);
    let file = TestDb::named("sqlite-twin.db");
    let mut applied = open(std::path::Path::new(&applied_db.url));
    let mut written = open(std::path::Path::new(&written_db.url));
    let mut sqlite = open(&file.path);
    let before = held(&mut applied);
    assert_eq!(
        before,
        held(&mut written),
        "the PostgreSQL twins start equal"
    );
    assert_eq!(
        before,
        held(&mut sqlite),
        "PostgreSQL and SQLite start equal"
    );

    let requests = requests();
    let mut from_apply = Vec::new();
    let summary = applied
        .apply(std::io::Cursor::new(input().into_bytes()), |batch| {
            from_apply.extend(batch.iter().cloned());
            Ok(())
        })
        .unwrap();
    assert_eq!(summary.lines as usize, requests.len());
    // A line `write` cannot even be given is the caller's error on that side.
    let from_apply: Vec<String> = from_apply
        .into_iter()
        .zip(&requests)
        .map(|(o, r)| match r {
            None => "unreadable".into(),
            Some(_) => comparable(o),
        })
        .collect();
    let kinds: std::collections::BTreeSet<String> = from_apply
        .iter()
        .filter_map(|o| serde_json::from_str::<Value>(o).ok())
        .filter_map(|o| o["outcome"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            "confirmed",
            "error",
            "inserted",
            "pending",
            "rejected",
            "stale",
            "superseded"
        ],
        "the input reaches every outcome"
    );
    let after = held(&mut applied);
    // Place words without a context: the font's inserted and superseding versions keep the
    // guard's mark, written by the run as a single write's look would.
    let marked = after.1[10]
        .iter()
        .filter(|e| e[9].get("suspect").is_some())
        .count();
    assert_eq!(marked, 2, "{:#?}", after.1[10]);
    for (twin, name) in [(&mut written, "PostgreSQL"), (&mut sqlite, "SQLite")] {
        for (n, (a, w)) in from_apply.iter().zip(line_by_line(twin)).enumerate() {
            assert_eq!(*a, w, "line {}: apply, and write on {name}", n + 1);
        }
        assert_eq!(
            after,
            held(twin),
            "list and history: apply, and write on {name}"
        );
        assert_eq!(pending(&mut applied), pending(twin), "pending on {name}");
    }
    let (applied, written) = (pg(&mut applied), pg(&mut written));
    for m in ["stale_writes", "resurrection_blocked"] {
        assert_eq!(
            applied.metric(m).unwrap(),
            written.metric(m).unwrap(),
            "{m}"
        );
    }
    assert_eq!(
        applied.clock().unwrap(),
        written.clock().unwrap(),
        "the clock"
    );
}

/// A global write without a context is judged on its words alone (README, "The scope guard":
/// it costs no lookup), so its words cost no round trip: `apply` writes 300 such lines — plain
/// words, a default, place words the guard marks, one identity again and again — in its run, in
/// the round trips of the same lines without words (until 2026-12-03 each left the run for the
/// single write's path: three round trips a line, 900 here, and on PostgreSQL a row updated
/// again in one transaction at every line of a repeated identity, slower at each), and a single
/// `write` of one costs what a write without words does (it looked twice). Counted through a
/// relay, not timed.
#[test]
fn words_without_a_context_cost_no_round_trip_on_postgres() {
    let Some(server) = server() else { return };
    const LINES: usize = 300;
    let words = [
        None,
        Some("words 1"),
        Some("以后新建前端项目，默认用 pnpm。"),
        Some("这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。"),
        Some("keep npm in this repo."),
    ];
    let input = |with_words: bool| -> String {
        (0..LINES)
            .map(|i| {
                // Every third line writes one identity again.
                let predicate = if i % 3 == 0 {
                    "p".to_string()
                } else {
                    format!("q{i}")
                };
                let mut l = json!({
                    "subject": "user:1", "predicate": predicate, "value": format!("v{}", i % 7),
                    "scope": "global", "source": format!("s:{i}"),
                });
                if let (true, Some(raw)) = (with_words, words[i % words.len()]) {
                    l["raw"] = json!(raw);
                }
                line(l) + "\n"
            })
            .collect()
    };
    let req = |raw: Option<&str>| WriteRequest {
        raw: raw.map(str::to_string),
        ..WriteRequest::from_json_line(&line(json!({
            "subject": "user:2", "predicate": "p", "value": 1, "scope": "global", "source": "s"
        })))
        .unwrap()
    };
    // The round trips of the apply of `input` and of a write of `one`, each on a connection
    // of its own to a database of its own, and the outcomes.
    let cost = |input: String, one: WriteRequest| -> (usize, usize, Vec<String>) {
        let (db, _raw) = FreshDb::prepared(&server);
        let relay = Relay::to(&db.url);
        let address = Address::recognise(OsStr::new(relay.url()))
            .unwrap()
            .unwrap();
        let mut store = PgStore::open(&address).unwrap();
        let before = relay.flights();
        let mut outcomes = Vec::new();
        store
            .apply_from(
                std::io::Cursor::new(input.into_bytes()),
                InputKind::File,
                |batch| {
                    outcomes.extend(batch.iter().cloned().map(comparable));
                    Ok(())
                },
            )
            .unwrap();
        let applied = relay.flights() - before;
        let mut store = PgStore::open(&address).unwrap();
        let before = relay.flights();
        let out = store.write(&one).unwrap();
        outcomes.push(comparable(out));
        (applied, relay.flights() - before, outcomes)
    };
    let (apply_plain, write_plain, plain) = cost(input(false), req(None));
    let (apply_said, write_said, said) = cost(input(true), req(Some("keep npm in this repo.")));
    eprintln!(
        "round trips: apply of {LINES} lines {apply_said} with words, {apply_plain} without; a write {write_said} with words, {write_plain} without"
    );
    // The words change no outcome; a line they mark says so (`suspect`, its evidence).
    let marked = said.iter().filter(|o| o.contains("\"suspect\":")).count();
    assert!(marked > 0, "the words mark lines");
    let said: Vec<String> = said
        .iter()
        .map(|o| {
            let mut v: Value = serde_json::from_str(o).unwrap();
            v.as_object_mut().unwrap().remove("suspect");
            v.to_string()
        })
        .collect();
    let plain: Vec<String> = plain
        .iter()
        .map(|o| serde_json::from_str::<Value>(o).unwrap().to_string())
        .collect();
    assert_eq!(said, plain, "the words change no outcome");
    assert_eq!(
        apply_said, apply_plain,
        "apply of {LINES} lines: round trips with words, without"
    );
    assert!(
        apply_said < 40,
        "apply of {LINES} lines took {apply_said} round trips"
    );
    assert_eq!(
        write_said, write_plain,
        "a write: round trips with words, without"
    );
}
