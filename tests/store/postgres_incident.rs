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
