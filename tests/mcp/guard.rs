//! The scope guard through the official Python MCP SDK (`tests/mcp_guard.py`): an agent in
//! `legacy-dashboard` that stores the first seed article's repo rule as `global` is told its
//! write waits for a human, and the database shows pnpm untouched, the item queued with its
//! evidence, the invariants intact (README, "The scope guard"). On a SQLite file and again on
//! PostgreSQL.

use crate::support::*;
use serde_json::Value;

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_guard.py");

#[test]
fn the_incident_replayed_by_an_agent_in_the_repo_is_queued_not_applied() {
    the_incident_replayed_by_an_agent_in_the_repo_is_queued_not_applied_on(TestDb::new());
}

#[test]
fn the_incident_replayed_by_an_agent_in_the_repo_is_queued_not_applied_on_postgres() {
    on_postgres(the_incident_replayed_by_an_agent_in_the_repo_is_queued_not_applied_on);
}

fn the_incident_replayed_by_an_agent_in_the_repo_is_queued_not_applied_on(db: TestDb) {
    let (stdout, _) = run_python_mcp_client(CLIENT, &db.path, "the Python MCP client");
    let facts: Value = serde_json::from_str(stdout.trim()).expect("the client's facts");
    let told = facts["incident"]["text"].as_str().unwrap();
    assert!(told.contains("the words say “这个仓库”"), "{told}");
    assert!(
        told.contains("the same message wrote install_command in repo:legacy-dashboard"),
        "{told}"
    );
    // What the agent was told is what the database holds: pnpm is still the only global
    // version, the npm rule waits with its evidence.
    let global = db.history("user:42", "package_manager", Some("global"));
    let sets: Vec<(&Value, &Value)> = global
        .iter()
        .filter(|e| e["event"] == "set")
        .map(|e| (&e["version"], &e["value"]))
        .collect();
    assert_eq!(
        sets,
        [(&Value::from(1), &Value::from("pnpm"))],
        "{global:?}"
    );
    let pending = db.pending(false);
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["value"], "npm");
    assert_eq!(
        pending[0]["id"], facts["incident"]["data"]["pending_id"],
        "the id the agent was told"
    );
    let reason = pending[0]["reason"].as_str().unwrap();
    assert!(reason.contains("这个仓库"), "{reason}");
    assert_eq!(facts["recall_new"]["value"], "pnpm");
    db.assert_check_ok();
}
