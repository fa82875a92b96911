//! The incident loop on PostgreSQL (issue 17): resolution as of a past moment, rescope and
//! revert, run on both backends from the same requests — the same outcomes, the same
//! resolutions, the same history, `check` clean — and the refusals in the same sentences.

use super::postgres::{server, FreshDb};
use super::postgres_write::req;
use memscope::model::Identity;
use memscope::store::{AnyStore, IntegrityMode, OpenMode};
use memscope::Scope;
use serde_json::{json, Value};
use std::path::Path;

/// A JSON value with every time field blanked (the two runs happen at different moments).
fn timeless(mut v: Value) -> Value {
    match &mut v {
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if matches!(
                    k.as_str(),
                    "at" | "updated_at" | "created_at" | "confirmed_at"
                ) || k.ends_with("_at")
                    || k.starts_with("valid_")
                {
                    *x = Value::Null;
                } else {
                    *x = timeless(x.take());
                }
            }
        }
        Value::Array(items) => {
            for x in items.iter_mut() {
                *x = timeless(x.take());
            }
        }
        _ => {}
    }
    v
}

/// The first seed article's incident and its repair, on `store`: what each step answered.
fn incident_and_repair(store: &mut AnyStore) -> Vec<Value> {
    let mut said = Vec::new();
    let mut note = |v: Value| said.push(timeless(v));
    let pm = |scope: &str| Identity {
        subject: "user:42".into(),
        predicate: "package_manager".into(),
        scope: Scope::parse(scope).unwrap(),
    };
    store.set_user_setting("scope_guard", "off").unwrap();
    store
        .write(&req(
            "user:42",
            "package_manager",
            json!("pnpm"),
            "global",
            "thread:17/message:86",
        ))
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let before = store.now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut incident = req(
        "user:42",
        "包管理器",
        json!("npm"),
        "global",
        "thread:23/message:14",
    );
    incident.raw = Some("这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。".into());
    note(serde_json::to_value(store.write(&incident).unwrap()).unwrap());
    // Before the incident the global default was pnpm; now npm wins everywhere.
    for repo in ["new-app-🚀", "legacy-dashboard"] {
        let r = store
            .resolve_at("user:42", "package_manager", Some(repo), None, before)
            .unwrap();
        note(serde_json::to_value(r).unwrap());
        let r = store
            .resolve("user:42", "package_manager", Some(repo), None)
            .unwrap();
        note(serde_json::to_value(r).unwrap());
    }
    // The repair: the value moves to its repository, the global default comes back.
    let moved = store
        .rescope(
            "user:42",
            "pm",
            &Scope::parse("global").unwrap(),
            &Scope::parse("repo:legacy-dashboard").unwrap(),
        )
        .unwrap();
    note(serde_json::to_value(moved).unwrap());
    for repo in ["new-app-🚀", "legacy-dashboard"] {
        let r = store
            .resolve("user:42", "package_manager", Some(repo), None)
            .unwrap();
        note(serde_json::to_value(r).unwrap());
    }
    // Revert, by default and to a named version; the refusals.
    note(serde_json::to_value(store.revert(&pm("global"), Some(2)).unwrap()).unwrap());
    note(serde_json::to_value(store.revert(&pm("global"), None).unwrap()).unwrap());
    for (id, to) in [
        (pm("global"), Some(9)),
        (pm("repo:nowhere"), None),
        (pm("global"), Some(7)),
    ] {
        note(json!(format!("{:#}", store.revert(&id, to).unwrap_err())));
    }
    for (from, to) in [("global", "global"), ("repo:nowhere", "global")] {
        let e = store
            .rescope(
                "user:42",
                "package_manager",
                &Scope::parse(from).unwrap(),
                &Scope::parse(to).unwrap(),
            )
            .unwrap_err();
        note(json!(format!("{e:#}")));
    }
    // A deleted target refuses the move, changing nothing.
    store
        .write(&req(
            "user:42",
            "package_manager",
            json!("yarn"),
            "task:t-1",
            "t",
        ))
        .unwrap();
    store
        .delete(
            &memscope::model::DeleteTarget::Identity(pm("task:t-1")),
            None,
        )
        .unwrap();
    let e = store
        .rescope(
            "user:42",
            "package_manager",
            &Scope::parse("global").unwrap(),
            &Scope::parse("task:t-1").unwrap(),
        )
        .unwrap_err();
    note(json!(format!("{e:#}")));
    for scope in ["global", "repo:legacy-dashboard"] {
        let h = store
            .history(
                "user:42",
                "package_manager",
                Some(&Scope::parse(scope).unwrap()),
            )
            .unwrap();
        note(serde_json::to_value(h).unwrap());
    }
    // Found by review: deleting the moved memory left its words in the global event the
    // rescope moved it from. The delete blanks that copy too (the event stays).
    let moved = memscope::model::DeleteTarget::Identity(pm("repo:legacy-dashboard"));
    let preview = store.delete_preview(&moved).unwrap();
    // global v2, moved, and v4, a revert's copy of it.
    assert_eq!(preview.moved_copies, 2, "{preview:?}");
    let report = store.delete(&moved, None).unwrap();
    note(json!([report.blanked_copies, report.tombstoned]));
    let global = store
        .history("user:42", "package_manager", Some(&Scope::Global))
        .unwrap();
    let text = serde_json::to_string(&global).unwrap();
    assert!(!text.contains("这个仓库保留"), "{text}");
    note(serde_json::to_value(global).unwrap());
    let report = store.check(IntegrityMode::Quick).unwrap();
    assert!(report.ok, "{:?}", report.violations);
    said
}

#[test]
fn the_incident_loop_on_postgres_answers_as_on_sqlite() {
    let Some(server) = server() else { return };
    let (pg, _) = FreshDb::prepared(&server);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.db");
    let mut runs = Vec::new();
    for address in [pg.url.as_str(), file.to_str().unwrap()] {
        let mut store = AnyStore::open(Path::new(address), OpenMode::Create).unwrap();
        runs.push(incident_and_repair(&mut store));
    }
    assert_eq!(runs[0].len(), runs[1].len());
    for (i, (on_pg, on_file)) in runs[0].iter().zip(&runs[1]).enumerate() {
        assert_eq!(on_pg, on_file, "step {i} differs");
    }
    // The as-of reads saw pnpm before the incident, the rescope returned it.
    assert_eq!(runs[0][1]["value"], json!("pnpm"), "{}", runs[0][1]);
    assert_eq!(runs[0][2]["value"], json!("npm"), "{}", runs[0][2]);
    assert_eq!(runs[0][6]["value"], json!("pnpm"), "{}", runs[0][6]);
    assert_eq!(runs[0][7]["value"], json!("npm"), "{}", runs[0][7]);
}

/// Runs `op` while a foreign session holds `memories`' row of `scope` (user:42 ·
/// package_manager) for 400 ms, so a statement in the middle of `op` waits for it.
fn while_a_row_is_held<T>(db: &FreshDb, scope: &str, op: impl FnOnce() -> T) -> T {
    let (held, wait) = std::sync::mpsc::channel();
    let url = db.url.clone();
    let scope = scope.to_string();
    let holder = std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let mut tx = client.transaction().unwrap();
        let rows = tx
            .execute(
                "SELECT 1 FROM memories WHERE subject = 'user:42' AND scope = $1 FOR UPDATE",
                &[&scope],
            )
            .unwrap();
        assert_eq!(rows, 1, "the row to hold exists");
        held.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        tx.rollback().unwrap();
    });
    wait.recv().unwrap();
    let out = op();
    holder.join().unwrap();
    out
}

/// Found by an exploratory test: PostgreSQL stamped each statement of one operation with its own
/// time, so a rescope's events (or a delete's end of the live interval, its `deleted` event and
/// its tombstone) were milliseconds apart, and `resolve --at` inside that gap showed a move half
/// done. Every row one operation writes carries the time taken after its locks, as on SQLite —
/// here even when a statement in its middle waits 400 ms on another session's row lock.
#[test]
fn one_rescope_or_delete_carries_one_time_while_a_statement_waits_on_postgres() {
    let Some(server) = server() else { return };
    let (db, mut raw) = FreshDb::prepared(&server);
    let mut store = AnyStore::open(Path::new(&db.url), OpenMode::Create).unwrap();
    store.set_user_setting("scope_guard", "off").unwrap();
    for (value, source) in [
        ("pnpm", "thread:17/message:86"),
        ("npm", "thread:23/message:14"),
    ] {
        store
            .write(&req(
                "user:42",
                "package_manager",
                json!(value),
                "global",
                source,
            ))
            .unwrap();
    }
    let stamps = |raw: &mut postgres::Client, after: i64| -> Vec<(String, String, String)> {
        raw.query(
            "SELECT event, scope, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')
             FROM history WHERE id > $1 ORDER BY id",
            &[&after],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
    };
    let last_id = |raw: &mut postgres::Client| -> i64 {
        raw.query_one("SELECT coalesce(max(id), 0) FROM history", &[])
            .unwrap()
            .get(0)
    };

    // The rescope writes into the repository, then waits to put the global row back.
    let before = last_id(&mut raw);
    while_a_row_is_held(&db, "global", || {
        store
            .rescope(
                "user:42",
                "package_manager",
                &Scope::parse("global").unwrap(),
                &Scope::parse("repo:legacy-dashboard").unwrap(),
            )
            .unwrap()
    });
    let events = stamps(&mut raw, before);
    let scopes: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
    assert!(
        scopes.contains(&"global") && scopes.contains(&"repo:legacy-dashboard"),
        "{events:?}"
    );
    assert!(
        events.iter().all(|e| e.2 == events[0].2),
        "one rescope, one time: {events:#?}"
    );
    let record_times: Vec<String> = raw
        .query(
            "SELECT to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')
             FROM memories ORDER BY scope",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(record_times, vec![events[0].2.clone(); 2], "{events:#?}");

    // The delete logs its `deleted` event, then waits to remove the record, then tombstones it.
    let before = last_id(&mut raw);
    let moved = memscope::model::DeleteTarget::Identity(Identity {
        subject: "user:42".into(),
        predicate: "package_manager".into(),
        scope: Scope::parse("repo:legacy-dashboard").unwrap(),
    });
    while_a_row_is_held(&db, "repo:legacy-dashboard", || {
        store.delete(&moved, None).unwrap()
    });
    let events = stamps(&mut raw, before);
    assert_eq!(events.len(), 1, "{events:?}");
    let deleted_at: String = raw
        .query_one(
            "SELECT to_char(deleted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')
             FROM tombstones",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(deleted_at, events[0].2, "the tombstone and its event");
    let detail: String = raw
        .query_one("SELECT detail FROM history WHERE event = 'deleted'", &[])
        .unwrap()
        .get(0);
    let detail: Value = serde_json::from_str(&detail).unwrap();
    let end = detail["live_intervals"]
        .as_array()
        .and_then(|i| i.last())
        .map(|i| i[1].as_str().unwrap().trim_end_matches('Z').to_string())
        .unwrap();
    assert_eq!(
        format!("{end}000"),
        events[0].2,
        "the live interval ends as the identity is deleted: {detail}"
    );
    let report = store.check(IntegrityMode::Quick).unwrap();
    assert!(report.ok, "{:?}", report.violations);
}

/// Found by review: a revert after `write --respell` confirmed the correction (the two
/// spellings fold alike) and said it had reverted. It brings the earlier spelling back as a
/// new version, on both backends.
#[test]
fn a_revert_brings_back_the_spelling_a_respell_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.db");
    let pg = server().map(|s| FreshDb::prepared(&s).0);
    let mut addresses = vec![file.to_str().unwrap().to_string()];
    addresses.extend(pg.as_ref().map(|db| db.url.clone()));
    for address in &addresses {
        let mut store = AnyStore::open(Path::new(address), OpenMode::Create).unwrap();
        let write = |value: &str, source: &str| req("u", "p", json!(value), "global", source);
        store.write(&write("pnpm 📦", "s1")).unwrap();
        let corrected = store.respell(&write("PNPM 📦", "s2")).unwrap();
        assert_eq!(corrected.version, Some(2), "{corrected:?}");
        let id = Identity {
            subject: "u".into(),
            predicate: "p".into(),
            scope: Scope::Global,
        };
        for (to, version, value) in [(None, 3, "pnpm 📦"), (Some(2), 4, "PNPM 📦")] {
            let out = store.revert(&id, to).unwrap();
            assert_eq!(
                (out.outcome.as_str(), out.version, out.value.clone()),
                ("superseded", Some(version), Some(json!(value))),
                "{address}: {out:?}"
            );
            let current = store.resolve("u", "p", None, None).unwrap();
            assert_eq!(current.value, Some(json!(value)), "{address}");
        }
        let report = store.check(IntegrityMode::Quick).unwrap();
        assert!(report.ok, "{:?}", report.violations);
    }
}
