//! The scope guard inside one `apply` batch (issue 16): what it keeps from line to line — the
//! places the database knows, the siblings a message wrote — follows the batch's own writes.

use memscope::model::{OutcomeKind, WriteOutcome};
use memscope::{OpenMode, Store};
use serde_json::json;

fn apply(store: &mut Store, lines: &[serde_json::Value]) -> Vec<WriteOutcome> {
    let mut input = Vec::new();
    for line in lines {
        serde_json::to_writer(&mut input, line).unwrap();
        input.push(b'\n');
    }
    let mut outcomes = Vec::new();
    store
        .apply(std::io::Cursor::new(input), |batch| {
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
    let mut store = Store::open(dir.path().join("batch.db"), OpenMode::Create).unwrap();
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
        ],
    );
    let kinds: Vec<OutcomeKind> = outcomes.iter().map(|o| o.outcome).collect();
    use OutcomeKind::*;
    assert_eq!(
        kinds,
        [Inserted, Inserted, Inserted, Inserted, Pending, Pending],
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
}
