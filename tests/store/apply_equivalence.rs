//! `apply` decides every line exactly as `write` would, one transaction per line.
//!
//! `apply` runs a batch of lines in one transaction and takes shortcuts there: the alias lookup
//! is remembered per transaction, and while identities keep coming in new, each is written with
//! a one-statement insert before the full decision is even looked at. This property test feeds
//! the same random lines to `apply` on one database and to `write`, one by one and with the
//! shortcut turned off, on a twin (same seeded past: deletions, a restore, aliases,
//! confirmations; same fixed clock), and demands the same outcomes and byte-identical exports.
//!
//! Reproduce: `cargo test --release --test store -- apply_equivalence::`

use crate::support::TestDb;
use chrono::{TimeZone, Utc};
use memscope::{
    Clock, DeleteTarget, Identity, OpenMode, Scope, ScopeChoice, Store, WriteOutcome, WriteRequest,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::json;

const SUBJECTS: [&str; 3] = ["user:42", "user:7", "用户:小明"];
/// Spellings, an alias (`pkg_manager`) and a non-ASCII alias (`包管理器`) of one predicate,
/// and two more predicates.
const PREDICATES: [&str; 6] = [
    "package_manager",
    "Package Manager",
    "pkg_manager",
    "包管理器",
    "coffee",
    "formatter",
];
const SCOPES: [&str; 4] = [
    "global",
    "repo:legacy-dashboard",
    "repo:web-app",
    "task:fix-1",
];
const VALUES: [&str; 4] = ["pnpm", "npm", " PNPM ", "燕麦拿铁 ☕"];

#[derive(Debug, Clone)]
struct Line {
    subject: usize,
    predicate: usize,
    /// `None`: ambiguous between global and the first repo.
    scope: Option<usize>,
    value: usize,
    causal_seq: Option<i64>,
}

fn line() -> impl Strategy<Value = Line> {
    (
        0..SUBJECTS.len(),
        0..PREDICATES.len(),
        prop::option::weighted(0.9, 0..SCOPES.len()),
        0..VALUES.len(),
        prop::option::weighted(0.3, 1i64..60),
    )
        .prop_map(|(subject, predicate, scope, value, causal_seq)| Line {
            subject,
            predicate,
            scope,
            value,
            causal_seq,
        })
}

fn request(l: &Line) -> WriteRequest {
    WriteRequest {
        subject: SUBJECTS[l.subject].into(),
        predicate: PREDICATES[l.predicate].into(),
        value: json!(VALUES[l.value]),
        scope: match l.scope {
            Some(s) => ScopeChoice::Exact(Scope::parse(SCOPES[s]).unwrap()),
            None => ScopeChoice::Ambiguous(vec![Scope::Global, Scope::parse(SCOPES[1]).unwrap()]),
        },
        source: format!("thread:{}", l.value),
        raw: Some(format!("原话 {} 🚀", l.value)),
        causal_seq: l.causal_seq,
        context: None,
    }
}

fn id(subject: &str, predicate: &str, scope: &str) -> Identity {
    Identity {
        subject: subject.into(),
        predicate: predicate.into(),
        scope: Scope::parse(scope).unwrap(),
    }
}

/// A past with every kind of identity the write path tells apart: live, confirmed,
/// superseded, tombstoned, restored (history but no current record), never seen.
fn seeded(db: &TestDb) -> Store {
    let mut store = Store::open(&db.path, OpenMode::Create).unwrap();
    store.set_clock(Clock::Fixed(
        Utc.with_ymd_and_hms(2026, 11, 29, 8, 0, 0).unwrap(),
    ));
    for (s, p, v, scope) in [
        ("user:42", "package_manager", "pnpm", "global"),
        ("user:42", "package_manager", "PNPM", "global"),
        ("user:42", "package_manager", "npm", "repo:legacy-dashboard"),
        ("user:7", "coffee", "美式", "global"),
        ("user:7", "coffee", "拿铁", "global"),
        ("user:7", "formatter", "prettier", "repo:web-app"),
        ("用户:小明", "coffee", "茶", "task:fix-1"),
    ] {
        store
            .write(&WriteRequest {
                subject: s.into(),
                predicate: p.into(),
                value: json!(v),
                scope: ScopeChoice::Exact(Scope::parse(scope).unwrap()),
                source: "seed".into(),
                raw: None,
                causal_seq: None,
                context: None,
            })
            .unwrap();
    }
    let gone = id("user:7", "formatter", "repo:web-app");
    store
        .delete(&DeleteTarget::Identity(gone.clone()), Some("seed"))
        .unwrap();
    store.restore(&gone).unwrap();
    store
        .delete(
            &DeleteTarget::Identity(id("用户:小明", "coffee", "task:fix-1")),
            Some("seed"),
        )
        .unwrap();
    store.set_assert_invariants(true);
    store
}

/// Every row of the database, but the aliases seeded on init (stamped with the wall clock) and
/// `settings.causal_clock`: the clock is the larger of it and the newest event's `clock`, and a
/// transaction writes it only when no event of its own recorded it — one transaction per line
/// and one per batch store the same clock in different places (compared through `next_seq`).
fn export(store: &Store) -> String {
    let mut out = Vec::new();
    store.export(&mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .filter(|l| !l.contains(r#""table":"predicate_aliases""#))
        .filter(|l| !l.contains(r#""key":"causal_clock""#))
        .collect::<Vec<_>>()
        .join("\n")
}

fn comparable(mut o: WriteOutcome) -> String {
    o.line = None;
    serde_json::to_string(&o).unwrap()
}

/// 48 cases each. Shrunk failures are kept beside this file, in
/// `apply_equivalence.proptest-regressions`, and replayed first: proptest's default would look in
/// `tests/proptest-regressions/` now that this file sits next to a `main.rs`.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 48,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn apply_decides_every_line_as_single_writes_do(lines in prop::collection::vec(line(), 1..40)) {
        let (a, b) = (TestDb::named("apply.db"), TestDb::named("write.db"));
        let (mut applied, mut written) = (seeded(&a), seeded(&b));
        written.set_fresh_inserts(false);
        prop_assert_eq!(export(&applied), export(&written), "the twins start equal");

        let mut input = Vec::new();
        for l in &lines {
            serde_json::to_writer(&mut input, &request(l)).unwrap();
            input.push(b'\n');
        }
        let mut from_apply = Vec::new();
        applied
            .apply(std::io::Cursor::new(input), |batch| {
                from_apply.extend(batch.iter().cloned().map(comparable));
                Ok(())
            })
            .unwrap();
        let from_write: Vec<String> = lines
            .iter()
            .map(|l| comparable(written.write(&request(l)).unwrap()))
            .collect();

        prop_assert_eq!(from_apply, from_write);
        prop_assert_eq!(export(&applied), export(&written));
        prop_assert!(applied.check().unwrap().ok);
        prop_assert_eq!(applied.next_seq().unwrap(), written.next_seq().unwrap(), "the same clock");
    }
}

/// What a line does beside writing: resolve a pending item into one of its candidates.
#[derive(Debug, Clone)]
enum Step {
    Write(Line),
    /// The n-th open pending item (mod their number), into its c-th candidate.
    Resolve(usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => line().prop_map(Step::Write),
        1 => (0usize..8, 0usize..2).prop_map(|(n, c)| Step::Resolve(n, c)),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// One judge: on any state the seeded past and random writes reach, the store's preview of
    /// a write or of a pending resolution — what every front end shows — is the decision the
    /// write then takes (same outcome, version and value).
    #[test]
    fn previews_decide_as_the_writes_then_do(steps in prop::collection::vec(step(), 1..40)) {
        let db = TestDb::named("preview.db");
        let mut store = seeded(&db);
        for st in &steps {
            match st {
                Step::Write(l) => {
                    let r = request(l);
                    let ScopeChoice::Exact(scope) = &r.scope else {
                        store.write(&r).unwrap();
                        continue;
                    };
                    let target = Identity {
                        subject: r.subject.clone(),
                        predicate: r.predicate.clone(),
                        scope: scope.clone(),
                    };
                    let preview = store.preview_write(&target, &r.value, r.causal_seq).unwrap();
                    let out = store.write(&r).unwrap();
                    prop_assert_eq!(out.outcome, preview.kind(), "{:?} → {:?}", l, preview);
                    prop_assert_eq!(out.reason.clone(), preview.reason());
                    let version = match &preview {
                        memscope::store::decide::WriteDecision::Reject { .. } => None,
                        memscope::store::decide::WriteDecision::Insert { version }
                        | memscope::store::decide::WriteDecision::Confirm { version, .. }
                        | memscope::store::decide::WriteDecision::Stale { version, .. }
                        | memscope::store::decide::WriteDecision::Supersede { version, .. } => Some(*version),
                    };
                    prop_assert_eq!(out.version, version);
                }
                Step::Resolve(n, c) => {
                    let open = store.pending(false).unwrap();
                    if open.is_empty() {
                        continue;
                    }
                    let item = &open[n % open.len()];
                    let choices = store.preview_pending(item.id).unwrap();
                    let (scope, preview) = &choices[c % choices.len()];
                    let out = store.resolve_pending(item.id, scope, false).unwrap();
                    prop_assert_eq!(out.outcome, preview.kind(), "#{} into {} → {:?}", item.id, scope, preview);
                }
            }
        }
        prop_assert!(store.check().unwrap().ok);
    }
}

/// Input that yields its first lines, then panics inside `read`.
struct PanicsAfterFirstRead(Option<Vec<u8>>);

impl std::io::Read for PanicsAfterFirstRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.take() {
            Some(data) => {
                buf[..data.len()].copy_from_slice(&data);
                Ok(data.len())
            }
            None => panic!("the input source broke"),
        }
    }
}

/// The reader thread dying is an error, never a quiet end of input: the lines read before it
/// died are applied and reported, and `apply` says the rest was not.
#[test]
fn apply_reports_a_reader_that_died_instead_of_ending_quietly() {
    let db = TestDb::named("broken-input.db");
    let mut store = Store::open(&db.path, OpenMode::Create).unwrap();
    let first = b"{\"subject\":\"user:1\",\"predicate\":\"editor\",\"value\":\"vim\",\"scope\":\"global\",\"source\":\"s\"}\n".to_vec();
    let mut seen = 0;
    let err = store
        .apply(PanicsAfterFirstRead(Some(first)), |batch| {
            seen += batch.len();
            Ok(())
        })
        .expect_err("a dead reader is an error");
    assert!(
        format!("{err:#}").contains("reading the input failed"),
        "{err:#}"
    );
    assert_eq!(
        seen, 1,
        "the line read before the failure was applied and reported"
    );
    assert_eq!(store.counts().unwrap().memories, 1);
}
