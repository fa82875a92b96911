//! Model-based property test of the store (issue 5).
//!
//! Random sequences of operations — writes reaching all six outcomes, ambiguous writes and their
//! replays, pending resolutions (to a candidate, or forced outside them) and rejections, deletes of an identity / a predicate / a subject, restores, gc
//! with a moving clock, alias changes and reopening — run against two connections to one
//! database, interleaved: two `Store`s on one SQLite file, and the same body again on a fresh
//! PostgreSQL database (`MEMSCOPE_TEST_POSTGRES`, skipped loudly without one). A small reference
//! model written here (no memscope code) predicts every outcome. After every step: `check()` is
//! clean, no purge debt is left (SQLite), and the current view, every `resolve` chain, the open
//! pending queue and the tombstones equal the model's.
//!
//! The clock is fixed and moved by `Advance` on both backends: SQLite's store clock, and on
//! PostgreSQL the session's `memscope.now` (schema 6), so gc collects tombstones days old there
//! too.
//!
//! Cases: 64 sequences of at most 40 steps on SQLite by default, `MEMSCOPE_PROPTEST_CASES=N`;
//! 32 on PostgreSQL (a round trip per query: ~25 s), `MEMSCOPE_PROPTEST_PG_CASES=N`. Shrunk
//! failures are persisted to tests/regressions/reliability_model.txt and replayed first, on both.
//!
//! Reproduce: `MEMSCOPE_ASSERT_INVARIANTS=1 cargo test --release --test reliability -- model::`

use crate::support::reliability::env_u64;
use crate::support::{postgres_test_db, PostgresDropper, TestDb};
use chrono::{DateTime, Duration, TimeZone, Utc};
use memscope::store::{AnyStore, IntegrityMode, ListFilter};
use memscope::{
    Clock, DeleteTarget, Identity, OpenMode, OutcomeKind, Scope, ScopeChoice, WriteOutcome,
    WriteRequest,
};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestRunner};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

// ---------------------------------------------------------------------------------------------
// The vocabulary: small on purpose, so that operations collide on the same identities.

const SUBJECTS: [&str; 2] = ["user:1", "  user:2 "];

/// (spelling sent to memscope, its normal form). The model's own normalizer for this vocabulary.
const PREDICATES: [(&str, &str); 8] = [
    ("package_manager", "package_manager"),
    ("Package Manager", "package_manager"),
    ("pkg_manager", "pkg_manager"),
    ("testRunner", "test_runner"),
    ("formatter", "formatter"),
    ("fmt_tool", "fmt_tool"),
    ("linter", "linter"),
    ("lint-tool", "lint_tool"),
];

/// Normal forms that `resolve` is asked about after every step.
const RESOLVE_PREDICATES: [&str; 7] = [
    "package_manager",
    "pkg_manager",
    "test_runner",
    "formatter",
    "fmt_tool",
    "linter",
    "lint_tool",
];

/// (repo, task) contexts for `resolve`.
const CONTEXTS: [(Option<&str>, Option<&str>); 5] = [
    (None, None),
    (Some("a"), None),
    (Some("b"), Some("t")),
    (None, Some("t")),
    (Some("c"), None),
];

fn scope(i: u8) -> Scope {
    match i % 4 {
        0 => Scope::Global,
        1 => Scope::Repo("a".into()),
        2 => Scope::Repo("b".into()),
        _ => Scope::Task("t".into()),
    }
}

fn value(i: u8) -> Value {
    match i % 10 {
        0 => json!("npm"),
        1 => json!(" NPM "),
        2 => json!("pnpm"),
        3 => json!("Pnpm"),
        4 => json!("yarn  berry"),
        5 => json!({"k": "V", "n": 1}),
        6 => json!({"n": 1, "k": " v "}),
        7 => json!(3),
        8 => json!(3.0),
        _ => json!(["x", "Y"]),
    }
}

/// Whether the model takes two values for one: strings alike once trimmed, lower-cased and
/// their inner whitespace collapsed; numbers equal in value (`3` and `3.0`); arrays item by
/// item; objects key by key, in any order.
/// Stated pairwise, independently of the store's comparison key, so that a fault in either shows.
fn same(a: &Value, b: &Value) -> bool {
    let words = |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_lowercase).collect() };
    match (a, b) {
        (Value::String(x), Value::String(y)) => words(x) == words(y),
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Operations.

#[derive(Debug, Clone)]
enum Seq {
    /// No causal_seq: the store hands out the next one.
    Fresh,
    /// A fixed small number (often stale once the clock has moved on).
    Abs(i64),
    /// `clock - k` (at least 1): causally older than most of what is stored.
    Behind(i64),
    /// `clock + k`: causally newer than everything.
    Ahead(i64),
}

#[derive(Debug, Clone)]
enum Op {
    Write {
        conn: u8,
        s: u8,
        p: u8,
        v: u8,
        scope: u8,
        seq: Seq,
        raw: bool,
    },
    Ambiguous {
        conn: u8,
        s: u8,
        p: u8,
        v: u8,
        scopes: Vec<u8>,
        seq: Seq,
    },
    ResolvePending {
        conn: u8,
        pick: u8,
        scope: u8,
        /// Resolve even to a scope outside the candidates.
        force: bool,
    },
    /// One of the ambiguous writes sent before, sent again exactly (a retried agent).
    ReplayAmbiguous {
        conn: u8,
        pick: u8,
    },
    RejectPending {
        conn: u8,
        pick: u8,
    },
    DeleteIdentity {
        conn: u8,
        s: u8,
        p: u8,
        scope: u8,
    },
    DeletePredicate {
        conn: u8,
        s: u8,
        p: u8,
    },
    DeleteSubject {
        conn: u8,
        s: u8,
    },
    Restore {
        conn: u8,
        s: u8,
        p: u8,
        scope: u8,
    },
    Gc {
        conn: u8,
        retention: Option<i64>,
        safe: Option<i64>,
    },
    AddAlias {
        conn: u8,
        alias: u8,
        canonical: u8,
    },
    Advance {
        hours: i64,
    },
    Reopen {
        conn: u8,
    },
}

fn seq_strategy() -> impl Strategy<Value = Seq> {
    prop_oneof![
        4 => Just(Seq::Fresh),
        2 => (1i64..=40).prop_map(Seq::Abs),
        2 => (0i64..=6).prop_map(Seq::Behind),
        2 => (1i64..=5).prop_map(Seq::Ahead),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let conn = 0u8..2;
    let s = 0u8..SUBJECTS.len() as u8;
    let p = 0u8..PREDICATES.len() as u8;
    let sc = 0u8..4;
    prop_oneof![
        30 => (conn.clone(), s.clone(), p.clone(), 0u8..9, sc.clone(), seq_strategy(), any::<bool>())
            .prop_map(|(conn, s, p, v, scope, seq, raw)| Op::Write { conn, s, p, v, scope, seq, raw }),
        6 => (conn.clone(), s.clone(), p.clone(), 0u8..9,
              proptest::sample::subsequence(vec![0u8, 1, 2, 3], 2..=3), seq_strategy())
            .prop_map(|(conn, s, p, v, scopes, seq)| Op::Ambiguous { conn, s, p, v, scopes, seq }),
        6 => (conn.clone(), any::<u8>(), sc.clone(), any::<bool>())
            .prop_map(|(conn, pick, scope, force)| Op::ResolvePending { conn, pick, scope, force }),
        3 => (conn.clone(), any::<u8>()).prop_map(|(conn, pick)| Op::ReplayAmbiguous { conn, pick }),
        2 => (conn.clone(), any::<u8>()).prop_map(|(conn, pick)| Op::RejectPending { conn, pick }),
        4 => (conn.clone(), s.clone(), p.clone(), sc.clone())
            .prop_map(|(conn, s, p, scope)| Op::DeleteIdentity { conn, s, p, scope }),
        3 => (conn.clone(), s.clone(), p.clone()).prop_map(|(conn, s, p)| Op::DeletePredicate { conn, s, p }),
        1 => (conn.clone(), s.clone()).prop_map(|(conn, s)| Op::DeleteSubject { conn, s }),
        5 => (conn.clone(), s.clone(), p.clone(), sc.clone())
            .prop_map(|(conn, s, p, scope)| Op::Restore { conn, s, p, scope }),
        // gc and time weigh enough that sequences reach gc collecting what aged (a delete,
        // then more than a day or two, then gc with a period set): the run says how often.
        5 => (conn.clone(), proptest::option::of(0i64..=2), proptest::option::of(0i64..=2))
            .prop_map(|(conn, retention, safe)| Op::Gc { conn, retention, safe }),
        3 => (conn.clone(), p.clone(), p.clone())
            .prop_map(|(conn, alias, canonical)| Op::AddAlias { conn, alias, canonical }),
        5 => (1i64..=96).prop_map(|hours| Op::Advance { hours }),
        1 => conn.prop_map(|conn| Op::Reopen { conn }),
    ]
}

// ---------------------------------------------------------------------------------------------
// The reference model.

type Key = (String, String, Scope);

#[derive(Debug, Clone)]
struct Cur {
    value: Value,
    seq: i64,
    version: i64,
    source: String,
    raw: Option<String>,
    confirms: i64,
    /// Highest causal_seq among the confirmations of this version (0 when none).
    confirmed_seq: i64,
}

#[derive(Debug, Clone, Default)]
struct IdState {
    cur: Option<Cur>,
    /// Highest version the identity ever used (applied versions and tombstones).
    max_version: i64,
    /// Tombstone version and when it was laid.
    tomb: Option<(i64, DateTime<Utc>)>,
    /// Has any history row (so an identity delete finds it).
    touched: bool,
    /// Holds set/confirmed/stale events since its last delete (so predicate/subject deletes find it).
    content: bool,
}

#[derive(Debug, Clone)]
struct PendingM {
    subject: String,
    predicate: String,
    value: Value,
    raw: Option<String>,
    source: String,
    seq: i64,
    candidates: Vec<Scope>,
}

#[derive(Debug, PartialEq)]
enum Expect {
    /// Outcome kind, version, and (for superseded) the replaced value.
    Outcome(OutcomeKind, Option<i64>, Option<Value>),
    Error,
}

/// A resolved or rejected pending item: it no longer matters to the queue, but deletes and
/// retention still find it.
#[derive(Debug, Clone)]
struct ClosedM {
    subject: String,
    predicate: String,
    candidates: Vec<Scope>,
    resolved_scope: Option<Scope>,
    closed_at: DateTime<Utc>,
}

struct Model {
    ids: BTreeMap<Key, IdState>,
    aliases: BTreeMap<String, String>,
    clock: i64,
    open: BTreeMap<i64, PendingM>,
    closed: BTreeMap<i64, ClosedM>,
    seen_pending: Vec<i64>,
    now: DateTime<Utc>,
    retention_days: i64,
    safe_days: i64,
}

impl Model {
    fn new() -> Model {
        let defaults: BTreeMap<String, Value> =
            serde_json::from_str(include_str!("../../assets/aliases.json")).expect("aliases.json");
        let aliases = defaults
            .into_iter()
            .filter(|(k, _)| !k.starts_with('_'))
            .map(|(k, v)| (k, v.as_str().expect("alias target").to_string()))
            .collect();
        Model {
            ids: BTreeMap::new(),
            aliases,
            clock: 0,
            open: BTreeMap::new(),
            closed: BTreeMap::new(),
            seen_pending: Vec::new(),
            now: t0(),
            retention_days: 0,
            safe_days: 30,
        }
    }

    fn canon(&self, normal: &str) -> String {
        self.aliases
            .get(normal)
            .cloned()
            .unwrap_or_else(|| normal.to_string())
    }

    fn key(&self, s: u8, p: u8, sc: u8) -> Key {
        (
            SUBJECTS[s as usize].trim().to_string(),
            self.canon(PREDICATES[p as usize].1),
            scope(sc),
        )
    }

    fn seq_of(&self, spec: &Seq) -> Option<i64> {
        match spec {
            Seq::Fresh => None,
            Seq::Abs(n) => Some(*n),
            Seq::Behind(k) => Some((self.clock - k).max(1)),
            Seq::Ahead(k) => Some(self.clock + k),
        }
    }

    fn take_seq(&mut self, requested: Option<i64>) -> i64 {
        let seq = requested.unwrap_or(self.clock + 1);
        self.clock = self.clock.max(seq);
        seq
    }

    fn tombstoned(&self, k: &Key) -> bool {
        self.ids.get(k).is_some_and(|st| st.tomb.is_some())
    }

    /// The write rules (README, "The model in one minute") for one exact write.
    fn exact_write(
        &mut self,
        key: Key,
        value: &Value,
        source: &str,
        raw: Option<&str>,
        requested: Option<i64>,
    ) -> Expect {
        if self.tombstoned(&key) {
            self.ids.get_mut(&key).unwrap().touched = true;
            return Expect::Outcome(OutcomeKind::Rejected, None, None);
        }
        let seq = self.take_seq(requested);
        let st = self.ids.entry(key).or_default();
        st.touched = true;
        st.content = true;
        let new_cur = |version| Cur {
            value: value.clone(),
            seq,
            version,
            source: source.to_string(),
            raw: raw.map(str::to_string),
            confirms: 0,
            confirmed_seq: 0,
        };
        match &mut st.cur {
            None => {
                let version = st.max_version + 1;
                st.max_version = version;
                st.cur = Some(new_cur(version));
                Expect::Outcome(OutcomeKind::Inserted, Some(version), None)
            }
            Some(c) if same(&c.value, value) => {
                c.confirms += 1;
                c.confirmed_seq = c.confirmed_seq.max(seq);
                Expect::Outcome(OutcomeKind::Confirmed, Some(c.version), None)
            }
            // A confirmation guards the value against causally older writes too.
            Some(c) if c.seq.max(c.confirmed_seq) >= seq => {
                Expect::Outcome(OutcomeKind::Stale, Some(c.version), None)
            }
            Some(c) => {
                let previous = c.value.clone();
                let version = c.version + 1;
                st.max_version = version;
                st.cur = Some(new_cur(version));
                Expect::Outcome(OutcomeKind::Superseded, Some(version), Some(previous))
            }
        }
    }

    /// Whether a pending item (open, or closed and resolved there) names the identity's scope.
    fn pending_names(&self, k: &Key) -> bool {
        let names = |p: &String, q: &String, c: &[Scope], r: Option<&Scope>| {
            *p == k.0 && *q == k.1 && (c.contains(&k.2) || r == Some(&k.2))
        };
        self.open
            .values()
            .any(|p| names(&p.subject, &p.predicate, &p.candidates, None))
            || self.closed.values().any(|p| {
                names(
                    &p.subject,
                    &p.predicate,
                    &p.candidates,
                    p.resolved_scope.as_ref(),
                )
            })
    }

    fn delete_keys(&mut self, keys: &[Key]) -> Vec<(String, String, String, i64)> {
        let mut tombstoned = Vec::new();
        for k in keys {
            let now = self.now;
            // Already deleted with nothing left — no record, no content since, no pending item
            // naming it: the delete leaves it as it is (README, "delete, restore, gc").
            let named = self.pending_names(k);
            if self
                .ids
                .get(k)
                .is_some_and(|st| st.tomb.is_some() && st.cur.is_none() && !st.content && !named)
            {
                continue;
            }
            let st = self.ids.entry(k.clone()).or_default();
            let version = st.max_version + 1;
            st.max_version = version;
            st.tomb = Some((version, now));
            st.cur = None;
            st.content = false;
            st.touched = true;
            self.open.retain(|_, p| {
                !(p.subject == k.0 && p.predicate == k.1 && p.candidates.contains(&k.2))
            });
            self.closed.retain(|_, p| {
                !(p.subject == k.0
                    && p.predicate == k.1
                    && (p.candidates.contains(&k.2) || p.resolved_scope.as_ref() == Some(&k.2)))
            });
            tombstoned.push((k.0.clone(), k.1.clone(), k.2.to_string(), version));
        }
        tombstoned.sort();
        tombstoned
    }

    /// Whether any pending item (open or closed) belongs to a predicate or subject target.
    fn has_pending_of(&self, subject: &str, predicate: Option<&str>) -> bool {
        let hit = |s: &String, p: &String| s == subject && predicate.is_none_or(|q| p == q);
        self.open.values().any(|p| hit(&p.subject, &p.predicate))
            || self.closed.values().any(|p| hit(&p.subject, &p.predicate))
    }

    /// A predicate or subject delete destroys every pending item of it.
    fn purge_pending_of(&mut self, subject: &str, predicate: Option<&str>) {
        let keep = |s: &String, p: &String| !(s == subject && predicate.is_none_or(|q| p == q));
        self.open.retain(|_, p| keep(&p.subject, &p.predicate));
        self.closed.retain(|_, p| keep(&p.subject, &p.predicate));
    }

    /// Identities a predicate or subject delete covers: those that hold or held a record or
    /// are tombstoned, and every scope a pending item of the target names (its candidates, the
    /// scope it was resolved into) — in the store's order, the identities' own.
    fn delete_targets(&self, subject: &str, predicate: Option<&str>) -> Vec<Key> {
        let of_target = |s: &String, p: &String| s == subject && predicate.is_none_or(|q| p == q);
        let mut keys: std::collections::BTreeSet<Key> = self
            .ids
            .iter()
            .filter(|(k, st)| {
                of_target(&k.0, &k.1) && (st.cur.is_some() || st.content || st.tomb.is_some())
            })
            .map(|(k, _)| k.clone())
            .collect();
        for p in self
            .open
            .values()
            .filter(|p| of_target(&p.subject, &p.predicate))
        {
            keys.extend(
                p.candidates
                    .iter()
                    .map(|c| (p.subject.clone(), p.predicate.clone(), c.clone())),
            );
        }
        for p in self
            .closed
            .values()
            .filter(|p| of_target(&p.subject, &p.predicate))
        {
            keys.extend(
                p.candidates
                    .iter()
                    .chain(p.resolved_scope.as_ref())
                    .map(|c| (p.subject.clone(), p.predicate.clone(), c.clone())),
            );
        }
        keys.into_iter().collect()
    }

    fn current_view(&self) -> Vec<Value> {
        self.ids
            .iter()
            .filter_map(|(k, st)| st.cur.as_ref().map(|c| (k, c)))
            .map(|(k, c)| {
                json!({
                    "subject": k.0, "predicate": k.1, "scope": k.2.to_string(), "value": c.value,
                    "version": c.version, "causal_seq": c.seq, "source": c.source, "raw": c.raw,
                    "confirm_count": c.confirms,
                })
            })
            .collect()
    }

    fn resolve(
        &self,
        subject: &str,
        predicate: &str,
        repo: Option<&str>,
        task: Option<&str>,
    ) -> Value {
        let p = self.canon(predicate);
        let mut chain = Vec::new();
        if let Some(t) = task {
            chain.push(Scope::Task(t.into()));
        }
        if let Some(r) = repo {
            chain.push(Scope::Repo(r.into()));
        }
        chain.push(Scope::Global);
        let mut winner: Option<(String, &Cur)> = None;
        let mut considered = Vec::new();
        for sc in chain {
            let k = (subject.to_string(), p.clone(), sc.clone());
            let st = self.ids.get(&k);
            match st.and_then(|st| st.cur.as_ref()) {
                Some(c) => {
                    let wins = winner.is_none();
                    if wins {
                        winner = Some((sc.to_string(), c));
                    }
                    considered.push(json!({"scope": sc.to_string(), "found": true, "wins": wins,
                        "value": c.value, "state": if wins { "wins" } else { "shadowed" }}));
                }
                None => {
                    let deleted = st.is_some_and(|st| st.tomb.is_some());
                    considered.push(
                        json!({"scope": sc.to_string(), "found": false, "wins": false,
                        "value": null, "state": if deleted { "deleted" } else { "absent" }}),
                    );
                }
            }
        }
        json!({
            "found": winner.is_some(),
            "predicate": p,
            "value": winner.as_ref().map(|(_, c)| c.value.clone()),
            "scope": winner.as_ref().map(|(s, _)| s.clone()),
            "version": winner.as_ref().map(|(_, c)| c.version),
            "considered": considered,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Running a sequence against two connections and the model.

/// The backend a sequence runs against.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// What keeps the database alive for the run: the SQLite file's temp dir, or the PostgreSQL
/// database and the guard that drops it.
enum Database {
    File { _dir: tempfile::TempDir },
    Server { _db: TestDb, _drop: PostgresDropper },
}

struct Harness {
    /// What gc did over the run, as the model predicted it (and the store matched).
    ran: Ran,
    /// Declared before `_db`, so the connections close before the database goes.
    stores: [Option<AnyStore>; 2],
    path: std::path::PathBuf,
    _db: Database,
    model: Model,
    sources: u64,
    /// Every ambiguous write sent, for replays.
    sent_ambiguous: Vec<SentAmbiguous>,
}

/// An ambiguous write as it was sent, with the indexes it was made from.
#[derive(Debug, Clone)]
struct SentAmbiguous {
    s: u8,
    p: u8,
    v: u8,
    candidates: Vec<Scope>,
    req: WriteRequest,
}

/// A SQLite file is opened as `Store` always was here (per-write assert); a PostgreSQL address
/// by the same `AnyStore::open` the commands use. Both on the model's fixed clock.
fn open_store(path: &Path, now: DateTime<Utc>) -> AnyStore {
    let mut store = match AnyStore::open(path, OpenMode::Create).expect("open the store") {
        AnyStore::Sqlite(mut s) => {
            s.set_assert_invariants(true);
            AnyStore::Sqlite(s)
        }
        pg => pg,
    };
    store
        .set_clock(Clock::Fixed(now))
        .expect("the clock is set");
    store
}

fn outcome_matches(out: &WriteOutcome, expect: &Expect) -> bool {
    match expect {
        Expect::Outcome(kind, version, previous) => {
            out.outcome == *kind
                && out.version == *version
                && (previous.is_none() || out.previous.as_ref() == previous.as_ref())
        }
        _ => false,
    }
}

impl Harness {
    /// `None` when PostgreSQL is asked for and no test server is set (said loudly).
    fn new(backend: Backend) -> Option<Harness> {
        let (path, db) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("tempdir");
                (dir.path().join("model.db"), Database::File { _dir: dir })
            }
            Backend::Postgres => {
                let (db, dropper) = postgres_test_db()?;
                (
                    db.path.clone(),
                    Database::Server {
                        _db: db,
                        _drop: dropper,
                    },
                )
            }
        };
        let model = Model::new();
        let a = open_store(&path, model.now);
        let b = open_store(&path, model.now);
        Some(Harness {
            ran: Ran {
                ran: true,
                ..Ran::default()
            },
            stores: [Some(a), Some(b)],
            path,
            _db: db,
            model,
            sources: 0,
            sent_ambiguous: Vec::new(),
        })
    }

    fn store(&mut self, conn: u8) -> &mut AnyStore {
        self.stores[(conn % 2) as usize].as_mut().unwrap()
    }

    /// Resolves pending item `id` to `target` on `conn` and compares what the store said with
    /// what the model expects.
    fn check_resolution(
        &mut self,
        conn: u8,
        id: i64,
        target: &Scope,
        force: bool,
        expect: &Expect,
    ) -> Result<(), String> {
        let got = self.store(conn).resolve_pending(id, target, force);
        match (expect, got) {
            (Expect::Error, Err(_)) => Ok(()),
            (_, Ok(out)) if outcome_matches(&out, expect) => Ok(()),
            (_, other) => Err(format!(
                "resolve pending #{id} to {target}: expected {expect:?}, got {other:?}"
            )),
        }
    }

    fn source(&mut self) -> String {
        self.sources += 1;
        format!("op:{}", self.sources)
    }

    /// An ambiguous write, sent for the first time or again: a repeat of an open item (same
    /// subject, predicate, value, candidates and source) answers with that item.
    fn ambiguous(&mut self, conn: u8, sent: &SentAmbiguous) -> Result<(), String> {
        let req = &sent.req;
        let candidates = &sent.candidates;
        let (subject, predicate, _) = self.model.key(sent.s, sent.p, 0);
        // The item offers the candidates not deleted; with fewer than two, the write is
        // rejected (README, "delete, restore, gc").
        let candidates: Vec<Scope> = candidates
            .iter()
            .filter(|c| {
                !self
                    .model
                    .tombstoned(&(subject.clone(), predicate.clone(), (*c).clone()))
            })
            .cloned()
            .collect();
        let got = self.store(conn).write(req);
        if candidates.len() < 2 {
            return match got {
                Ok(out) if out.outcome == OutcomeKind::Rejected => Ok(()),
                other => Err(format!(
                    "ambiguous write with fewer than two scopes not deleted {req:?}: expected rejected, got {other:?}"
                )),
            };
        }
        let wanted: BTreeSet<&Scope> = candidates.iter().collect();
        let repeat = self.model.open.iter().find(|(_, item)| {
            item.subject == subject
                && item.predicate == predicate
                && item.source == req.source
                && same(&item.value, &req.value)
                && item.candidates.iter().collect::<BTreeSet<_>>() == wanted
        });
        if let Some((&id, item)) = repeat {
            return match got {
                Ok(out)
                    if out.outcome == OutcomeKind::Pending
                        && out.pending_id == Some(id)
                        && out.causal_seq == Some(item.seq) =>
                {
                    Ok(())
                }
                other => Err(format!(
                    "replayed ambiguous write {req:?}: expected open pending #{id} (seq {}), got {other:?}",
                    item.seq
                )),
            };
        }
        let seq = self.model.take_seq(req.causal_seq);
        match got {
            Ok(out) if out.outcome == OutcomeKind::Pending => {
                let id = out.pending_id.ok_or("pending outcome without pending_id")?;
                if self.model.seen_pending.contains(&id) {
                    return Err(format!("pending id {id} handed out twice"));
                }
                if out.causal_seq != Some(seq) {
                    return Err(format!(
                        "pending #{id} took causal_seq {:?}, the model expected {seq}",
                        out.causal_seq
                    ));
                }
                self.model.seen_pending.push(id);
                self.model.open.insert(
                    id,
                    PendingM {
                        subject,
                        predicate,
                        value: value(sent.v),
                        raw: req.raw.clone(),
                        source: req.source.clone(),
                        seq,
                        candidates,
                    },
                );
                Ok(())
            }
            other => Err(format!(
                "ambiguous write {req:?}: expected pending, got {other:?}"
            )),
        }
    }

    /// Runs one operation on the store and the model; Err describes a disagreement.
    fn step(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Write {
                conn,
                s,
                p,
                v,
                scope: sc,
                seq,
                raw,
            } => {
                let source = self.source();
                let raw_text = raw.then(|| format!("the user's words for {source}"));
                let requested = self.model.seq_of(seq);
                let req = WriteRequest {
                    subject: SUBJECTS[*s as usize].into(),
                    predicate: PREDICATES[*p as usize].0.into(),
                    value: value(*v),
                    scope: ScopeChoice::Exact(scope(*sc)),
                    source: source.clone(),
                    raw: raw_text.clone(),
                    causal_seq: requested,
                    context: None,
                };
                let key = self.model.key(*s, *p, *sc);
                let expect = self.model.exact_write(
                    key,
                    &value(*v),
                    &source,
                    raw_text.as_deref(),
                    requested,
                );
                let got = self.store(*conn).write(&req);
                match got {
                    Ok(out) if outcome_matches(&out, &expect) => Ok(()),
                    other => Err(format!("write {req:?}: expected {expect:?}, got {other:?}")),
                }
            }
            Op::Ambiguous {
                conn,
                s,
                p,
                v,
                scopes,
                seq,
            } => {
                let source = self.source();
                let candidates: Vec<Scope> = scopes.iter().map(|i| scope(*i)).collect();
                let sent = SentAmbiguous {
                    s: *s,
                    p: *p,
                    v: *v,
                    req: WriteRequest {
                        subject: SUBJECTS[*s as usize].into(),
                        predicate: PREDICATES[*p as usize].0.into(),
                        value: value(*v),
                        scope: ScopeChoice::ambiguous(candidates.clone()).expect("distinct"),
                        source: source.clone(),
                        raw: Some(format!("maybe everywhere? ({source})")),
                        causal_seq: self.model.seq_of(seq),
                        context: None,
                    },
                    candidates,
                };
                self.sent_ambiguous.push(sent.clone());
                self.ambiguous(*conn, &sent)
            }
            Op::ReplayAmbiguous { conn, pick } => {
                if self.sent_ambiguous.is_empty() {
                    return Ok(());
                }
                let sent = self.sent_ambiguous[*pick as usize % self.sent_ambiguous.len()].clone();
                self.ambiguous(*conn, &sent)
            }
            Op::ResolvePending {
                conn,
                pick,
                scope: sc,
                force,
            } => {
                if self.model.seen_pending.is_empty() {
                    return Ok(());
                }
                let seen = &self.model.seen_pending;
                let id = seen[*pick as usize % seen.len()];
                let target = scope(*sc);
                // A scope outside the candidates is refused unless forced; the item stays open.
                let refused = self
                    .model
                    .open
                    .get(&id)
                    .is_some_and(|item| !*force && !item.candidates.contains(&target));
                let expect = match self.model.open.remove(&id) {
                    None => Expect::Error,
                    Some(item) if refused => {
                        self.model.open.insert(id, item);
                        Expect::Error
                    }
                    Some(item) => {
                        self.model.closed.insert(
                            id,
                            ClosedM {
                                subject: item.subject.clone(),
                                predicate: item.predicate.clone(),
                                candidates: item.candidates.clone(),
                                resolved_scope: Some(target.clone()),
                                closed_at: self.model.now,
                            },
                        );
                        // The resolution goes through the write path: the predicate is the
                        // canonical one at resolution time.
                        let key = (
                            item.subject.clone(),
                            self.model.canon(&item.predicate),
                            target.clone(),
                        );
                        let e = self.model.exact_write(
                            key,
                            &item.value,
                            &item.source,
                            item.raw.as_deref(),
                            Some(item.seq),
                        );
                        if matches!(e, Expect::Outcome(OutcomeKind::Rejected, ..)) {
                            // Its scope is deleted: nothing was written, and the item stays
                            // open for another candidate (README, "pending resolve").
                            self.model.closed.remove(&id);
                            self.model.open.insert(id, item);
                            self.ran.kept_open += 1;
                            return self.check_resolution(*conn, id, &target, *force, &e);
                        }
                        // The pending_resolved event is logged on the item's own identity.
                        self.model
                            .ids
                            .entry((item.subject.clone(), item.predicate.clone(), target.clone()))
                            .or_default()
                            .touched = true;
                        e
                    }
                };
                self.check_resolution(*conn, id, &target, *force, &expect)
            }
            Op::RejectPending { conn, pick } => {
                if self.model.seen_pending.is_empty() {
                    return Ok(());
                }
                let seen = &self.model.seen_pending;
                let id = seen[*pick as usize % seen.len()];
                let removed = self.model.open.remove(&id);
                let was_open = removed.is_some();
                if let Some(item) = removed {
                    self.model.closed.insert(
                        id,
                        ClosedM {
                            subject: item.subject,
                            predicate: item.predicate,
                            candidates: item.candidates,
                            resolved_scope: None,
                            closed_at: self.model.now,
                        },
                    );
                }
                match (was_open, self.store(*conn).reject_pending(id)) {
                    (true, Ok(item)) if item.status == "rejected" => Ok(()),
                    (false, Err(_)) => Ok(()),
                    (open, other) => Err(format!(
                        "reject pending #{id} (open in the model: {open}): got {other:?}"
                    )),
                }
            }
            Op::DeleteIdentity {
                conn,
                s,
                p,
                scope: sc,
            } => {
                let key = self.model.key(*s, *p, *sc);
                // An identity that never held a record is deleted when a pending item names it.
                let known = self
                    .model
                    .ids
                    .get(&key)
                    .is_some_and(|st| st.touched || st.cur.is_some())
                    || self.model.pending_names(&key);
                let target = DeleteTarget::Identity(Identity {
                    subject: SUBJECTS[*s as usize].into(),
                    predicate: PREDICATES[*p as usize].0.into(),
                    scope: scope(*sc),
                });
                let expect = known.then(|| self.model.delete_keys(std::slice::from_ref(&key)));
                self.delete(*conn, &target, expect)
            }
            Op::DeletePredicate { conn, s, p } => {
                let (subject, predicate, _) = self.model.key(*s, *p, 0);
                let keys = self.model.delete_targets(&subject, Some(&predicate));
                let matches =
                    !keys.is_empty() || self.model.has_pending_of(&subject, Some(&predicate));
                let expect = matches.then(|| {
                    let t = self.model.delete_keys(&keys);
                    self.model.purge_pending_of(&subject, Some(&predicate));
                    t
                });
                let target = DeleteTarget::Predicate {
                    subject: SUBJECTS[*s as usize].into(),
                    predicate: PREDICATES[*p as usize].0.into(),
                };
                self.delete(*conn, &target, expect)
            }
            Op::DeleteSubject { conn, s } => {
                let subject = SUBJECTS[*s as usize].trim().to_string();
                let keys = self.model.delete_targets(&subject, None);
                let matches = !keys.is_empty() || self.model.has_pending_of(&subject, None);
                let expect = matches.then(|| {
                    let t = self.model.delete_keys(&keys);
                    self.model.purge_pending_of(&subject, None);
                    t
                });
                let target = DeleteTarget::Subject(SUBJECTS[*s as usize].into());
                self.delete(*conn, &target, expect)
            }
            Op::Restore {
                conn,
                s,
                p,
                scope: sc,
            } => {
                let key = self.model.key(*s, *p, *sc);
                let expect = match self.model.ids.get_mut(&key) {
                    Some(st) if st.tomb.is_some() => {
                        let (v, _) = st.tomb.take().unwrap();
                        st.touched = true;
                        Some(v)
                    }
                    _ => None,
                };
                let id = Identity {
                    subject: SUBJECTS[*s as usize].into(),
                    predicate: PREDICATES[*p as usize].0.into(),
                    scope: scope(*sc),
                };
                match (expect, self.store(*conn).restore(&id)) {
                    (Some(v), Ok(t)) if t.version == v => Ok(()),
                    (None, Err(_)) => Ok(()),
                    (e, other) => Err(format!("restore {id}: expected {e:?}, got {other:?}")),
                }
            }
            Op::Gc {
                conn,
                retention,
                safe,
            } => {
                if let Some(r) = retention {
                    self.model.retention_days = *r;
                }
                if let Some(s) = safe {
                    self.model.safe_days = *s;
                }
                if self.model.retention_days > 0 {
                    let cutoff = self.model.now - Duration::days(self.model.retention_days);
                    let before = self.model.closed.len();
                    self.model.closed.retain(|_, p| p.closed_at >= cutoff);
                    self.ran.purged_pending += (before - self.model.closed.len()) as i64;
                }
                let mut collected = 0;
                if self.model.safe_days > 0 {
                    let cutoff = self.model.now - Duration::days(self.model.safe_days);
                    for st in self.model.ids.values_mut() {
                        if st.tomb.is_some_and(|(_, at)| at < cutoff) {
                            st.tomb = None;
                            collected += 1;
                        }
                    }
                }
                self.ran.collected_tombstones += collected;
                match self.store(*conn).gc(*retention, *safe) {
                    Ok(r) if r.collected_tombstones == collected && r.disk_purged => Ok(()),
                    other => Err(format!(
                        "gc({retention:?}, {safe:?}): expected {collected} tombstone(s) collected and the disk purged, got {other:?}"
                    )),
                }
            }
            Op::AddAlias {
                conn,
                alias,
                canonical,
            } => {
                let a = PREDICATES[*alias as usize].1.to_string();
                let c = PREDICATES[*canonical as usize].1.to_string();
                let live = self
                    .model
                    .ids
                    .iter()
                    .any(|(k, st)| k.1 == a && st.cur.is_some());
                // Nor over a name with deleted memories: their writes would escape the tombstones.
                let deleted = self
                    .model
                    .ids
                    .iter()
                    .any(|(k, st)| k.1 == a && st.tomb.is_some());
                let ok = a != c && !self.model.aliases.contains_key(&c) && !live && !deleted;
                if ok {
                    for v in self.model.aliases.values_mut() {
                        if *v == a {
                            *v = c.clone();
                        }
                    }
                    self.model.aliases.insert(a.clone(), c.clone());
                    // The name's pending items, open and closed, move to the canonical name;
                    // a moved open one whose every candidate is a deleted memory there goes.
                    for p in self.model.closed.values_mut().filter(|p| p.predicate == a) {
                        p.predicate = c.clone();
                    }
                    let ids = &self.model.ids;
                    self.model.open.retain(|_, p| {
                        if p.predicate != a {
                            return true;
                        }
                        p.predicate = c.clone();
                        !p.candidates.iter().all(|sc| {
                            ids.get(&(p.subject.clone(), c.clone(), sc.clone()))
                                .is_some_and(|st| st.tomb.is_some())
                        })
                    });
                }
                match (ok, self.store(*conn).add_alias(&a, &c)) {
                    (true, Ok(_)) | (false, Err(_)) => Ok(()),
                    (ok, other) => Err(format!(
                        "alias add {a} → {c}: the model expected {}, got {other:?}",
                        if ok { "success" } else { "a refusal" }
                    )),
                }
            }
            Op::Advance { hours } => {
                self.model.now += Duration::hours(*hours);
                let now = self.model.now;
                for s in self.stores.iter_mut().flatten() {
                    s.set_clock(Clock::Fixed(now))
                        .map_err(|e| format!("moving the clock: {e:#}"))?;
                }
                Ok(())
            }
            Op::Reopen { conn } => {
                let i = (*conn % 2) as usize;
                self.stores[i] = None;
                self.stores[i] = Some(open_store(&self.path, self.model.now));
                Ok(())
            }
        }
    }

    fn delete(
        &mut self,
        conn: u8,
        target: &DeleteTarget,
        expect: Option<Vec<(String, String, String, i64)>>,
    ) -> Result<(), String> {
        let got = self.store(conn).delete(target, Some("model test"));
        match (expect, got) {
            (None, Err(_)) => Ok(()),
            (Some(want), Ok(report)) => {
                let mut have: Vec<_> = report
                    .tombstoned
                    .iter()
                    .map(|t| {
                        (
                            t.subject.clone(),
                            t.predicate.clone(),
                            t.scope.clone(),
                            t.version,
                        )
                    })
                    .collect();
                have.sort();
                if have != want {
                    return Err(format!(
                        "delete {target:?}: tombstoned {have:?}, the model expected {want:?}"
                    ));
                }
                if !report.disk_purged {
                    return Err(format!(
                        "delete {target:?}: nothing holds a read transaction, yet the on-disk purge is pending"
                    ));
                }
                Ok(())
            }
            (want, got) => Err(format!("delete {target:?}: expected {want:?}, got {got:?}")),
        }
    }

    /// Everything observable equals the model; `check` is clean.
    fn verify(&mut self, conn: u8) -> Result<(), String> {
        let store = self.stores[(conn % 2) as usize].as_mut().unwrap();
        let report = store
            .check(IntegrityMode::Quick)
            .map_err(|e| format!("check failed to run: {e:#}"))?;
        if !report.ok || !report.violations.is_empty() {
            return Err(format!("check is not clean: {:?}", report.violations));
        }
        // PostgreSQL keeps no purge debt: its delete vacuums in the call, which `disk_purged`
        // reports and `delete` checks.
        if let AnyStore::Sqlite(s) = store {
            if let Some(since) = s.purge_debt().map_err(|e| e.to_string())? {
                return Err(format!("a purge debt since {since} was left unpaid"));
            }
        }

        let mut have: Vec<Value> = store
            .list(&ListFilter::default())
            .map_err(|e| format!("list: {e:#}"))?
            .into_iter()
            .map(|r| {
                json!({
                    "subject": r.subject, "predicate": r.predicate, "scope": r.scope.to_string(),
                    "value": r.value, "version": r.version, "causal_seq": r.causal_seq,
                    "source": r.source, "raw": r.raw, "confirm_count": r.confirm_count,
                })
            })
            .collect();
        let mut want = self.model.current_view();
        let sort_key = |v: &Value| {
            (
                v["subject"].to_string(),
                v["predicate"].to_string(),
                v["scope"].to_string(),
            )
        };
        have.sort_by_key(sort_key);
        want.sort_by_key(sort_key);
        if have != want {
            return Err(format!(
                "current view differs\n  store: {}\n  model: {}",
                Value::Array(have),
                Value::Array(want)
            ));
        }

        for subject in SUBJECTS {
            for predicate in RESOLVE_PREDICATES {
                for (repo, task) in CONTEXTS {
                    let r = store
                        .resolve(subject, predicate, repo, task)
                        .map_err(|e| format!("resolve: {e:#}"))?;
                    let have = json!({
                        "found": r.found, "predicate": r.predicate, "value": r.value,
                        "scope": r.scope, "version": r.version,
                        "considered": r.considered.iter().map(|c| json!({
                            "scope": c.scope, "found": c.found, "wins": c.wins,
                            "value": c.value, "state": c.state,
                        })).collect::<Vec<_>>(),
                    });
                    let want = self.model.resolve(subject.trim(), predicate, repo, task);
                    if have != want {
                        return Err(format!(
                            "resolve({subject:?}, {predicate}, repo {repo:?}, task {task:?}) differs\n  store: {have}\n  model: {want}"
                        ));
                    }
                }
            }
        }

        let open: BTreeMap<i64, (String, String, Value, Vec<Scope>, i64)> = store
            .pending(false)
            .map_err(|e| format!("pending: {e:#}"))?
            .into_iter()
            .map(|p| {
                (
                    p.id,
                    (p.subject, p.predicate, p.value, p.candidates, p.causal_seq),
                )
            })
            .collect();
        let want_open: BTreeMap<i64, (String, String, Value, Vec<Scope>, i64)> = self
            .model
            .open
            .iter()
            .map(|(id, p)| {
                (
                    *id,
                    (
                        p.subject.clone(),
                        p.predicate.clone(),
                        p.value.clone(),
                        p.candidates.clone(),
                        p.seq,
                    ),
                )
            })
            .collect();
        if open != want_open {
            return Err(format!(
                "open pending items differ\n  store: {open:?}\n  model: {want_open:?}"
            ));
        }

        let tombs: BTreeSet<(String, String, String, i64)> = match store {
            AnyStore::Sqlite(s) => s.tombstones(),
            AnyStore::Postgres(p) => p.tombstones(),
        }
        .map_err(|e| format!("tombstones: {e:#}"))?
        .into_iter()
        .map(|t| (t.subject, t.predicate, t.scope.to_string(), t.version))
        .collect();
        let want_tombs: BTreeSet<(String, String, String, i64)> = self
            .model
            .ids
            .iter()
            .filter_map(|(k, st)| {
                st.tomb
                    .map(|(v, _)| (k.0.clone(), k.1.clone(), k.2.to_string(), v))
            })
            .collect();
        if tombs != want_tombs {
            return Err(format!(
                "tombstones differ\n  store: {tombs:?}\n  model: {want_tombs:?}"
            ));
        }
        Ok(())
    }
}

/// Runs `ops` on a fresh database of `backend`; Ok without running when PostgreSQL is asked
/// for and no server is set.
/// What a sequence did that a test may want to know happened, not only that it matched.
#[derive(Debug, Default, Clone, Copy)]
struct Ran {
    /// False when the backend was skipped (no PostgreSQL server).
    ran: bool,
    collected_tombstones: i64,
    purged_pending: i64,
    /// Resolutions into a deleted scope: rejected, the item left open.
    kept_open: i64,
}

fn run_sequence(backend: Backend, ops: &[Op]) -> Result<Ran, String> {
    let Some(mut h) = Harness::new(backend) else {
        return Ok(Ran::default());
    };
    h.verify(0).map_err(|e| format!("fresh database: {e}"))?;
    for (i, op) in ops.iter().enumerate() {
        h.step(op).map_err(|e| format!("step {i} {op:?}: {e}"))?;
        h.verify(i as u8 % 2)
            .map_err(|e| format!("after step {i} {op:?}: {e}"))?;
    }
    Ok(h.ran)
}

fn config(cases: u64) -> ProptestConfig {
    ProptestConfig {
        cases: cases as u32,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/regressions/reliability_model.txt"
        )))),
        max_shrink_iters: 4096,
        ..ProptestConfig::default()
    }
}

fn sequence_strategy() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op_strategy(), 1..=40)
}

/// Runs the property on `backend` for `cases` random sequences (shrunk failures persisted and
/// replayed first), and says what gc did over the run — a property whose gc never collected
/// anything proved little about collecting.
fn property(backend: Backend, cases: u64) {
    let mut runner = TestRunner::new(config(cases));
    let total = std::cell::Cell::new(Ran::default());
    let result = runner.run(&sequence_strategy(), |ops| {
        let ran = run_sequence(backend, &ops).map_err(TestCaseError::fail)?;
        let mut t = total.get();
        t.collected_tombstones += ran.collected_tombstones;
        t.purged_pending += ran.purged_pending;
        t.kept_open += ran.kept_open;
        total.set(t);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{backend:?}: {e}");
    }
    let t = total.get();
    eprintln!(
        "{backend:?}: {cases} sequences; gc collected {} tombstone(s) and purged {} closed pending item(s) the model predicted; {} resolution(s) into a deleted scope rejected and left open",
        t.collected_tombstones, t.purged_pending, t.kept_open
    );
}

/// Any interleaving of operations over two connections keeps every invariant and matches the
/// reference model at every step.
#[test]
fn store_matches_the_reference_model() {
    property(Backend::Sqlite, env_u64("MEMSCOPE_PROPTEST_CASES", 64));
}

/// The same property on PostgreSQL, each case on a database of its own; a missing server skips
/// once, not once per case.
#[test]
fn postgres_matches_the_reference_model() {
    let Some(probe) = postgres_test_db() else {
        return;
    };
    drop(probe);
    property(Backend::Postgres, env_u64("MEMSCOPE_PROPTEST_PG_CASES", 32));
}

/// Shrunk from the property above (kept in tests/regressions/reliability_model.txt): an
/// ambiguous write queued under `fmt_tool`, then `fmt_tool` made an alias of `formatter` (which
/// moves the item to `formatter`, so a delete of `formatter` reaches it), then the item
/// resolved. It must land under `formatter`, not be refused (or, without the per-write assert,
/// leave a current record under an alias — invariant 6).
#[test]
fn a_pending_item_resolved_after_its_predicate_became_an_alias() {
    let ops = vec![
        Op::Ambiguous {
            conn: 0,
            s: 0,
            p: 5, // fmt_tool
            v: 0,
            scopes: vec![1, 3],
            seq: Seq::Fresh,
        },
        Op::AddAlias {
            conn: 1,
            alias: 5,     // fmt_tool
            canonical: 4, // formatter
        },
        Op::ResolvePending {
            conn: 0,
            pick: 0,
            scope: 0,
            force: true,
        },
    ];
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if let Err(e) = run_sequence(backend, &ops) {
            panic!("{backend:?}: {e}");
        }
    }
}

/// Shrunk from the property above: an item the write path queued under `package_manager`
/// with one of its places deleted (the other still open to an answer), then another name made
/// an alias of `package_manager`. The item was never the alias's: it stays (an alias add that
/// dropped every item beside a tombstone of the canonical name lost it).
#[test]
fn an_item_beside_a_deleted_place_of_the_canonical_name_stays_when_an_alias_is_added() {
    let ops = vec![
        Op::Write {
            conn: 0,
            s: 1,
            p: 0,
            v: 0,
            scope: 1,
            seq: Seq::Fresh,
            raw: false,
        },
        Op::DeletePredicate {
            conn: 0,
            s: 1,
            p: 0,
        },
        Op::Ambiguous {
            conn: 0,
            s: 1,
            p: 0,
            v: 0,
            scopes: vec![1, 3],
            seq: Seq::Fresh,
        },
        Op::AddAlias {
            conn: 0,
            alias: 2,
            canonical: 0,
        },
    ];
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if let Err(e) = run_sequence(backend, &ops) {
            panic!("{backend:?}: {e}");
        }
    }
}

/// Time moves on both backends (PostgreSQL through the session's `memscope.now`, schema 6): a
/// tombstone younger than the safe period survives gc, one older is collected, and the write
/// that follows inserts anew; a rejected pending item older than the retention is purged. The
/// model predicts each count and the run must have seen them happen, so a clock that did not
/// move (every row "now") fails here.
#[test]
fn gc_collects_what_aged_past_its_period_on_both_backends() {
    let write = |v| Op::Write {
        conn: 0,
        s: 0,
        p: 0,
        v,
        scope: 0,
        seq: Seq::Fresh,
        raw: true,
    };
    let ops = vec![
        write(0),
        Op::Ambiguous {
            conn: 1,
            s: 1,
            p: 1,
            v: 1,
            scopes: vec![1, 2],
            seq: Seq::Fresh,
        },
        Op::RejectPending { conn: 0, pick: 0 },
        Op::DeleteIdentity {
            conn: 1,
            s: 0,
            p: 0,
            scope: 0,
        },
        Op::Advance { hours: 30 },
        Op::Gc {
            conn: 0,
            retention: Some(2),
            safe: Some(2),
        },
        Op::Advance { hours: 30 },
        Op::Gc {
            conn: 1,
            retention: None,
            safe: None,
        },
        write(1),
    ];
    for backend in [Backend::Sqlite, Backend::Postgres] {
        match run_sequence(backend, &ops) {
            Err(e) => panic!("{backend:?}: {e}"),
            Ok(ran) if !ran.ran => {}
            Ok(ran) => assert_eq!(
                (ran.collected_tombstones, ran.purged_pending),
                (1, 1),
                "{backend:?}: gc after 60 hours with 2-day periods"
            ),
        }
    }
}
