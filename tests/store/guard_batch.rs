//! The scope guard inside one `apply` batch (issue 16): what it keeps from line to line — the
//! places the database knows, the siblings a message wrote — follows the batch's own writes.

use super::postgres::{server, FreshDb};
use memscope::model::{OutcomeKind, WriteOutcome};
use memscope::store::{AnyStore, InputKind};
use memscope::{OpenMode, Store};
use serde_json::json;

/// The lines as one batch (read as a file is: never split by a pause).
fn apply(store: &mut AnyStore, lines: &[serde_json::Value]) -> Vec<WriteOutcome> {
    let mut input = Vec::new();
    for line in lines {
        serde_json::to_writer(&mut input, line).unwrap();
        input.push(b'\n');
    }
    let mut outcomes = Vec::new();
    store
        .apply_from(std::io::Cursor::new(input), InputKind::File, |batch| {
            outcomes.extend(batch.iter().cloned());
            Ok(())
        })
        .unwrap();
    outcomes
}

fn line(subject: &str, predicate: &str, scope: &str, source: &str, raw: &str) -> serde_json::Value {
    json!({
        "subject": subject, "predicate": predicate, "value": "vitest", "scope": scope,
        "source": source, "raw": raw, "context": {"repo": "home-repo"}
    })
}

#[test]
fn a_place_or_a_sibling_written_earlier_in_the_batch_is_evidence_later_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("batch.db");
    a_place_or_a_sibling_written_earlier_in_the_batch_is_evidence_later_in_it_on(
        AnyStore::open(&path, OpenMode::Create).unwrap(),
    );
}

/// On PostgreSQL the batch reads the places the database knows once, at its first line with a
/// context, and adds those its own lines register: a place a later line of the batch names.
#[test]
fn a_place_or_a_sibling_written_earlier_in_the_batch_is_evidence_later_in_it_on_postgres() {
    let Some(server) = server() else { return };
    let (db, _raw) = FreshDb::prepared(&server);
    a_place_or_a_sibling_written_earlier_in_the_batch_is_evidence_later_in_it_on(
        AnyStore::open(std::path::Path::new(&db.url), OpenMode::Create).unwrap(),
    );
}

fn a_place_or_a_sibling_written_earlier_in_the_batch_is_evidence_later_in_it_on(
    mut store: AnyStore,
) {
    let outcomes = apply(
        &mut store,
        &[
            // The guard reads the places the database knows (none yet) and the message's
            // siblings in home-repo (none yet) …
            line("user:1", "a", "global", "m:1", "run the tests with vitest"),
            line("user:1", "b", "global", "m:1", "format with prettier"),
            // … then the batch registers a repository and writes a sibling of message m:1 …
            line("user:2", "c", "repo:gamma-db", "m:2", "vitest"),
            line("user:1", "d", "repo:home-repo", "m:1", "vitest"),
            // … which the next lines' judgements see.
            line(
                "user:3",
                "e",
                "global",
                "m:3",
                "run the gamma-db tests with vitest",
            ),
            line("user:1", "f", "global", "m:1", "lint with eslint"),
            // A place an ambiguous write registers, and one the guard queues a write into, are
            // known to the lines after them.
            json!({"subject": "user:4", "predicate": "g", "value": "x",
                   "scope": {"ambiguous": ["global", "repo:delta-ui"]}, "source": "m:4"}),
            line("user:5", "h", "global", "m:5", "delta-ui pins node 18"),
            json!({"subject": "user:6", "predicate": "i", "value": "x", "scope": "global",
                   "source": "m:6", "raw": "这个仓库用 x", "context": {"repo": "epsilon-api"}}),
            line("user:7", "j", "global", "m:7", "epsilon-api runs on deno"),
        ],
    );
    let kinds: Vec<OutcomeKind> = outcomes.iter().map(|o| o.outcome).collect();
    use OutcomeKind::*;
    assert_eq!(
        kinds,
        [
            Inserted, Inserted, Inserted, Inserted, Pending, Pending, Pending, Pending, Pending,
            Pending
        ],
        "{outcomes:?}"
    );
    let reason = |i: usize| outcomes[i].reason.clone().unwrap_or_default();
    assert!(
        reason(4).contains("the words name repo:gamma-db"),
        "{}",
        reason(4)
    );
    assert!(
        reason(5).contains("the same message wrote d in repo:home-repo"),
        "{}",
        reason(5)
    );
    for (i, place) in [(7, "repo:delta-ui"), (9, "repo:epsilon-api")] {
        assert!(
            reason(i).contains(&format!("the words name {place}")),
            "{}",
            reason(i)
        );
    }
}

/// The sources of a place's records, which the guard keeps from one write to the next so an MCP
/// server (one subject, one place) does not walk all its records at every guarded write, follow
/// what happens to them: a scoped write of this store, a supersede by another message, another
/// connection's write, a delete.
#[test]
fn the_siblings_kept_between_writes_follow_the_records() {
    use memscope::model::{DeleteTarget, Identity, ScopeChoice, WriteContext, WriteRequest};
    use memscope::Scope;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kept.db");
    let mut store = Store::open(&path, OpenMode::Create).unwrap();
    let req = |predicate: &str, scope: Scope, source: &str| WriteRequest {
        subject: "user:1".into(),
        predicate: predicate.into(),
        value: json!(format!("{predicate} by {source}")),
        scope: ScopeChoice::Exact(scope),
        source: source.into(),
        raw: Some("use the usual tools".into()),
        causal_seq: None,
        context: Some(WriteContext {
            repo: Some("shop".into()),
            task: None,
        }),
    };
    let shop = || Scope::Repo("shop".into());
    // Many records of the subject in the place, and a first guarded write that reads them.
    for i in 0..50 {
        store
            .write(&req(&format!("old_{i}"), shop(), "m:old"))
            .unwrap();
    }
    let out = store.write(&req("g0", Scope::Global, "m:1")).unwrap();
    assert_eq!(out.outcome, OutcomeKind::Inserted, "{out:?}");
    // This store writes a scoped record for message m:1: its next global write has a sibling.
    store.write(&req("install", shop(), "m:1")).unwrap();
    let out = store.write(&req("g1", Scope::Global, "m:1")).unwrap();
    assert_eq!(out.outcome, OutcomeKind::Pending, "{out:?}");
    assert!(format!("{:?}", out.reason).contains("the same message wrote install in repo:shop"));
    // Another message supersedes that record: m:1 has no sibling there any more.
    store.write(&req("install", shop(), "m:2")).unwrap();
    let out = store.write(&req("g2", Scope::Global, "m:1")).unwrap();
    assert_eq!(out.outcome, OutcomeKind::Inserted, "{out:?}");
    // Another connection writes a sibling for m:3.
    let mut other = Store::open(&path, OpenMode::Existing).unwrap();
    other.write(&req("deploy", shop(), "m:3")).unwrap();
    let out = store.write(&req("g3", Scope::Global, "m:3")).unwrap();
    assert_eq!(out.outcome, OutcomeKind::Pending, "{out:?}");
    // This store deletes m:2's record: m:2's next global write has no sibling.
    let out = store.write(&req("g4", Scope::Global, "m:2")).unwrap();
    assert_eq!(out.outcome, OutcomeKind::Pending, "{out:?}");
    store
        .delete(
            &DeleteTarget::Identity(Identity {
                subject: "user:1".into(),
                predicate: "install".into(),
                scope: shop(),
            }),
            None,
        )
        .unwrap();
    let out = store.write(&req("g5", Scope::Global, "m:2")).unwrap();
    assert_eq!(out.outcome, OutcomeKind::Inserted, "{out:?}");
}

/// Once enough sibling reads have paid for it, the store reads every scoped record's source
/// at once and answers "no sibling" without a read; that set follows the write path's own
/// scoped writes (a rescope's too) and is dropped when another connection commits. (Each
/// question here is about a subject new to the place, which what is kept of one place's
/// subject cannot answer.)
#[test]
fn the_scoped_sources_read_at_once_follow_the_records() {
    use memscope::model::{ScopeChoice, WriteContext, WriteRequest};
    use memscope::Scope;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scoped.db");
    let mut store = Store::open(&path, OpenMode::Create).unwrap();
    let req = |subject: &str, predicate: &str, scope: Scope, source: &str| WriteRequest {
        subject: subject.into(),
        predicate: predicate.into(),
        value: json!(format!("{predicate} by {source} 值")),
        scope: ScopeChoice::Exact(scope),
        source: source.into(),
        raw: Some("use the usual tools 🙂".into()),
        causal_seq: None,
        context: Some(WriteContext {
            repo: Some("shop".into()),
            task: None,
        }),
    };
    let shop = || Scope::Repo("shop".into());
    store
        .write(&req("user:0", "install", shop(), "m:seed"))
        .unwrap();
    // Global writes of many subjects from messages that wrote nothing in the place: each one
    // asks, until the asking has paid for reading every scoped record's source.
    let warm = |store: &mut Store, round: &str| {
        for i in 0..200 {
            let subject = format!("user:{round}{i}");
            let source = format!("m:{round}:{i}");
            let out = store
                .write(&req(&subject, "pref", Scope::Global, &source))
                .unwrap();
            assert_eq!(out.outcome, OutcomeKind::Inserted, "{out:?}");
        }
    };
    warm(&mut store, "a");
    // This store writes a scoped record for m:1: its global write has a sibling.
    store
        .write(&req("user:1", "deploy", shop(), "m:1"))
        .unwrap();
    let out = store
        .write(&req("user:1", "g", Scope::Global, "m:1"))
        .unwrap();
    assert_eq!(out.outcome, OutcomeKind::Pending, "{out:?}");
    assert!(format!("{:?}", out.reason).contains("the same message wrote deploy in repo:shop"));
    // Another connection writes one for m:2.
    let mut other = Store::open(&path, OpenMode::Existing).unwrap();
    other.write(&req("user:2", "lint", shop(), "m:2")).unwrap();
    let out = store
        .write(&req("user:2", "g", Scope::Global, "m:2"))
        .unwrap();
    assert_eq!(out.outcome, OutcomeKind::Pending, "{out:?}");
    // A rescope moves m:a:7's global record into the place: now it is m:a:7's sibling there.
    warm(&mut store, "b");
    store
        .rescope("user:a7", "pref", &Scope::Global, &shop())
        .unwrap();
    let out = store
        .write(&req("user:a7", "g", Scope::Global, "m:a:7"))
        .unwrap();
    assert_eq!(out.outcome, OutcomeKind::Pending, "{out:?}");
    assert!(format!("{:?}", out.reason).contains("wrote pref in repo:shop"));
    // And the messages that wrote nothing there still write without a sibling.
    let out = store
        .write(&req("user:b3", "g", Scope::Global, "m:b:3"))
        .unwrap();
    assert_eq!(out.outcome, OutcomeKind::Inserted, "{out:?}");
}
