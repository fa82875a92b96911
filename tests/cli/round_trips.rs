//! What a command costs over a network link to PostgreSQL, counted in round trips through a
//! relay (README, "Running on PostgreSQL"): the login, one statement that checks the server,
//! one that checks the schema and the login's rights, then the command's own statements, each
//! in one round trip on its first run (typed, not prepared first).

use crate::support::relay::Relay;
use crate::support::*;
use std::path::PathBuf;

#[test]
fn a_write_a_resolve_and_a_list_cost_few_round_trips_on_postgres() {
    on_postgres(|db| {
        fn write(value: &str) -> Vec<&str> {
            args_for(
                "write",
                "user:42",
                "package_manager",
                &["--value", value, "--scope", "global", "--source", "s:1"],
            )
        }
        assert_eq!(db.run(&write("pnpm")).code, 0);
        let relay = Relay::to(db.path_str());
        let via = TestDb::at(PathBuf::from(relay.url()));
        let cost = |args: &[&str]| {
            let before = relay.flights();
            let r = via.run(args);
            assert_eq!(r.code, 0, "{args:?}: {r:?}");
            relay.flights() - before
        };
        // The startup message and the two SCRAM steps (no TLS offer on this address).
        let login = 3;
        let write_trips = cost(&write("npm"));
        let resolve_trips = cost(&args_for(
            "resolve",
            "user:42",
            "package_manager",
            &["--repo", "web-app"],
        ));
        let list_trips = cost(&["list", "--subject", "user:42"]);
        eprintln!("round trips: write {write_trips}, resolve {resolve_trips}, list {list_trips}");
        // The login, the server's check, the schema's; BEGIN, the look, the write, COMMIT.
        assert!(
            write_trips <= login + 2 + 4,
            "a write took {write_trips} round trips"
        );
        // The resolve and its read-log row in one statement.
        assert!(
            resolve_trips <= login + 2 + 1,
            "a resolve took {resolve_trips} round trips"
        );
        // The subject as stored, then the view.
        assert!(
            list_trips <= login + 2 + 2,
            "a list took {list_trips} round trips"
        );
    });
}

#[test]
fn a_delete_after_a_rescope_counts_each_copy_once() {
    a_delete_after_a_rescope_counts_each_copy_once_on(TestDb::new());
}

#[test]
fn a_delete_after_a_rescope_counts_each_copy_once_on_postgres() {
    on_postgres(a_delete_after_a_rescope_counts_each_copy_once_on);
}

/// The copy a rescope leaves where the value was first written: a delete of the identity it
/// moved to blanks it (one event), a delete of the whole predicate destroys it among the events
/// of the scope it sits in — the same on both backends, the preview as the delete.
fn a_delete_after_a_rescope_counts_each_copy_once_on(db: TestDb) {
    let (u, pm) = ("用户:42", "包管理器");
    db.write_with(
        (u, pm),
        "npm 🚀",
        "global",
        "thread:23",
        &["--raw", "这个仓库保留 npm"],
    );
    db.run(&args_for(
        "rescope",
        u,
        pm,
        &["--scope", "global", "--to", "repo:老仪表盘"],
    ))
    .ok();
    let one = args_for(
        "delete",
        u,
        pm,
        &["--scope", "repo:老仪表盘", "--dry-run", "--json"],
    );
    assert_eq!(db.json(&one)["moved_copies"], 1);
    let all = args_for("delete", u, pm, &["--dry-run", "--json"]);
    let preview = db.json(&all);
    assert_eq!(preview["moved_copies"], 0, "{preview:#}");
    let done = db.json(&args_for("delete", u, pm, &["--yes", "--json"]));
    assert_eq!(done["blanked_copies"], 0, "{done:#}");
    assert_eq!(done["tombstoned"].as_array().unwrap().len(), 2, "{done:#}");
    db.assert_check_ok();
}
