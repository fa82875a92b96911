//! The terminal UI's reads on PostgreSQL (issue 17, README "Running on PostgreSQL"): the same
//! database on both backends answers every `UiStore` read the same; another host's commit
//! reaches the UI's connection as a change notice (LISTEN/NOTIFY) only while a UI watches; no
//! transaction is left open between calls.

use super::postgres::{server, FreshDb};
use memscope::model::{DeleteTarget, Identity};
use memscope::store::{
    open_ui, AnyStore, BrowseBound, BrowseKey, HistoryFrom, IntegrityMode, OpenMode, UiStore,
};
use memscope::Scope;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// The demo database, built by the real binary, exported and imported into `url` (ids, times
/// and clock kept), and the SQLite file it came from.
fn demo_on_both(url: &str, dir: &Path) -> std::path::PathBuf {
    let file = dir.join("demo.db");
    let dump = dir.join("demo.dump");
    let bin = env!("CARGO_BIN_EXE_memscope");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(args)
            .env("HOME", dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        out.stdout
    };
    run(&["demo", "--no-tui", "--db", file.to_str().unwrap()]);
    let dumped = run(&["--db", file.to_str().unwrap(), "export"]);
    std::fs::write(&dump, dumped).unwrap();
    run(&["--db", url, "import", dump.to_str().unwrap()]);
    // Places and names whose bytewise order is not a language's (case, accents, symbols,
    // Chinese, emoji), written to both through the write path, in the same order.
    let more = [
        ("user:42", "editor", "repo:Zeta"),
        ("user:42", "editor", "repo:alpha"),
        ("user:42", "editor", "repo:_tools"),
        ("User:Émile", "editor", "repo:alpha"),
        ("user:émile", "formatter", "global"),
        ("团队:前端", "包管理器", "repo:网站"),
        ("user:42", "coffee ☕", "task:🔥-hotfix"),
    ];
    let lines: String = more
        .iter()
        .enumerate()
        .map(|(i, (subject, predicate, scope))| {
            format!(
                "{}\n",
                json!({"subject": subject, "predicate": predicate, "value": format!("v{i} {scope}"),
                       "scope": scope, "source": format!("test:{i}")})
            )
        })
        .collect();
    let batch = dir.join("more.jsonl");
    std::fs::write(&batch, lines).unwrap();
    for db in [file.to_str().unwrap(), url] {
        run(&["--db", db, "apply", batch.to_str().unwrap()]);
    }
    file
}

/// `v` with every time at or after `since` (RFC 3339, UTC) replaced by "(during the test)".
fn after_blanked(v: Value, since: &str) -> Value {
    match v {
        Value::String(t)
            if t.len() == since.len() && t.as_bytes()[10] == b'T' && t.as_str() >= since =>
        {
            Value::String("(during the test)".into())
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|x| after_blanked(x, since)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, x)| (k, after_blanked(x, since)))
                .collect(),
        ),
        other => other,
    }
}

/// One write to `user:1 · editor @ global` by another connection (another host, as far as the
/// UI can tell).
fn write_elsewhere(url: &str, value: &str, source: &str) {
    AnyStore::open(Path::new(url), OpenMode::Existing)
        .unwrap()
        .write(&super::postgres_write::req(
            "user:1",
            "editor",
            json!(value),
            "global",
            source,
        ))
        .unwrap();
}

fn js<T: serde::Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap()
}

/// Everything the UI reads, as JSON, from one backend.
fn ui_reads(s: &mut dyn UiStore) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut note = |what: &str, v: Value| out.push((what.to_string(), v));
    let records = |rows: Vec<memscope::store::BrowseRecord>| {
        js(rows
            .into_iter()
            .map(|r| (r.id, r.record))
            .collect::<Vec<_>>())
    };
    note(
        "first page",
        records(s.browse_after(&BrowseBound::Start, 5).unwrap()),
    );
    note(
        "whole view",
        records(s.browse_after(&BrowseBound::Start, 1000).unwrap()),
    );
    note(
        "last page",
        records(s.browse_before(&BrowseBound::End, 5).unwrap()),
    );
    let key = BrowseKey {
        scope: "repo:legacy-dashboard".into(),
        subject: "user:42".into(),
        predicate: "install_command".into(),
    };
    note(
        "after a key",
        records(s.browse_after(&BrowseBound::Key(key.clone()), 4).unwrap()),
    );
    note(
        "before a key",
        records(s.browse_before(&BrowseBound::Key(key.clone()), 4).unwrap()),
    );
    for scope in ["repo:legacy-dashboard", "task:zzz", "global"] {
        for bound in [
            BrowseBound::ScopeStart(scope.into()),
            BrowseBound::ScopeEnd(scope.into()),
        ] {
            note(
                &format!("after {bound:?}"),
                records(s.browse_after(&bound, 3).unwrap()),
            );
            note(
                &format!("before {bound:?}"),
                records(s.browse_before(&bound, 3).unwrap()),
            );
        }
    }
    note(
        "by ids",
        records(s.browse_by_ids(&[3, 1, 9999, 5]).unwrap()),
    );
    note("scope counts", js(s.scope_counts().unwrap()));
    note("counts", js(s.counts().unwrap()));
    let mut seen = Vec::new();
    let (n, last) = s
        .filter_scan(None, 7, &mut |c| {
            seen.push((
                c.id,
                c.scope.to_string(),
                c.subject.to_string(),
                c.value.to_string(),
            ))
        })
        .unwrap();
    note(
        "filter scan",
        json!([n, last.map(|k| (k.scope, k.subject, k.predicate)), seen]),
    );
    let mut seen = Vec::new();
    s.filter_candidates_by_ids(&[2, 4, 6, 8000], &mut |c| {
        seen.push((c.id, c.value.to_string()))
    })
    .unwrap();
    note("candidates by id", js(seen));
    note("id span", js(s.record_id_span().unwrap()));
    let mut seen = Vec::new();
    s.filter_scan_ids(1, 8, &mut |c| seen.push(c.id)).unwrap();
    seen.sort();
    note("scan by ids", js(seen));
    let mut walked = Vec::new();
    s.filter_walk(Some(&key), &mut |id, scope| {
        walked.push((id, scope.to_string()));
        walked.len() < 6
    })
    .unwrap();
    note("walk", js(walked));
    let pm = Identity {
        subject: "user:42".into(),
        predicate: "package_manager".into(),
        scope: Scope::Global,
    };
    note("get", js(s.get(&pm).unwrap()));
    note(
        "scopes",
        js(s.live_scopes_of("user:42", "package_manager").unwrap()),
    );
    note(
        "resolve",
        js(s.resolve(
            "user:42",
            "package_manager",
            Some("web-app"),
            Some("fix-lockfile-123"),
        )
        .unwrap()),
    );
    note(
        "resolve preview",
        js(
            s.resolve_preview("user:42", "package_manager", Some("web-app"), None)
                .unwrap(),
        ),
    );
    let history = s.history("user:42", "package_manager", None).unwrap();
    // The event popup reads each event whole, and says until when a `set` was current exactly
    // as the history pane does (v1 of the incident: "then replaced", not "still current").
    assert!(history
        .iter()
        .any(|e| e.event == "set" && e.valid_until.is_some()));
    for e in &history {
        let whole = s.history_event(e.id).unwrap().expect("still logged");
        assert_eq!(whole.valid_until, e.valid_until, "{e:?}");
    }
    note("history", js(history));
    note("history count", js(s.history_count(&pm, None).unwrap()));
    for from in [
        HistoryFrom::Start,
        HistoryFrom::End,
        HistoryFrom::Version(1),
        HistoryFrom::Version(99),
    ] {
        let page = s.history_page(&pm, from, 2).unwrap();
        note(&format!("page {from:?}"), js(&page));
        if let Some(e) = page.first() {
            note("event", js(s.history_event(e.id).unwrap()));
            for from in [
                HistoryFrom::After(e.id),
                HistoryFrom::Before(e.id),
                HistoryFrom::Around(e.id),
            ] {
                note(
                    &format!("page {from:?}"),
                    js(s.history_page(&pm, from, 3).unwrap()),
                );
            }
            note(
                "count before",
                js(s.history_count(&pm, Some(e.id)).unwrap()),
            );
        }
    }
    note(
        "written by",
        js(s.scopes_written_by("user:42", "thread:17/message:86")
            .unwrap()),
    );
    let pending = s.pending(true).unwrap();
    for p in &pending {
        note(
            "pending preview",
            js(format!("{:?}", s.preview_pending(p.id).unwrap())),
        );
    }
    note("pending", js(pending));
    note("tombstones", js(s.tombstones().unwrap()));
    note("read log", js(s.read_log(&[], None, 50).unwrap()));
    note(
        "read log words",
        js(s.read_log(&["CLAUDE".into(), "npm".into()], None, 50)
            .unwrap()),
    );
    note("suspects", js(s.suspects().unwrap()));
    note(
        "radius",
        js(s.blast_radius("user:42", "package_manager").unwrap()),
    );
    // What a delete does past the tables is each backend's own (README, "Running on
    // PostgreSQL"): compared apart from that.
    let mut preview = s
        .delete_preview(&DeleteTarget::Predicate {
            subject: "user:42".into(),
            predicate: "package_manager".into(),
        })
        .unwrap();
    preview.on_disk = Default::default();
    note("delete preview", js(preview));
    let rescope = s.preview_rescope(
        "user:42",
        "package_manager",
        &Scope::Global,
        &Scope::Repo("web-app".into()),
    );
    // A preview runs the operation and rolls it back; on PostgreSQL the causal clock is a
    // sequence, which a rollback does not turn back, so the numbers a preview shows are the
    // next ones free then, not a promise: compared without them.
    let unnumbered = |text: String| {
        let mut out = String::new();
        for (i, part) in text.split("causal_seq: Some(").enumerate() {
            if i == 0 {
                out += part;
            } else {
                out += "causal_seq: Some(…";
                out += &part[part.find(')').unwrap()..];
            }
        }
        out
    };
    note("rescope preview", js(unnumbered(format!("{rescope:?}"))));
    let revert = s.preview_revert(&pm, Some(1));
    note("revert preview", js(unnumbered(format!("{revert:?}"))));
    // The previews changed nothing.
    let mut preview = s
        .delete_preview(&DeleteTarget::Subject("user:7".into()))
        .unwrap();
    preview.on_disk = Default::default();
    note("subject preview", js(preview));
    note(
        "after previews",
        js(s.history("user:42", "package_manager", None).unwrap()),
    );
    out
}

#[test]
fn the_ui_reads_the_same_on_both_backends() {
    let Some(server) = server() else { return };
    // A language's collation, where "repo:Zeta" sorts after "repo:alpha": the view's order
    // must still be SQLite's, bytewise.
    let db = FreshDb::collated(&server, "en-US").unwrap_or_else(|| FreshDb::new(&server));
    let dir = tempfile::tempdir().unwrap();
    let started = chrono::Utc::now()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        .replace("+00:00", "Z");
    memscope::store::postgres::schema::migrate(&mut db.client()).unwrap();
    let file = demo_on_both(&db.url, dir.path());
    let mut sqlite = open_ui(&file, OpenMode::Existing).unwrap();
    let mut pg = open_ui(Path::new(&db.url), OpenMode::Existing).unwrap();
    // The test's own writes were made on each side at its own moment.
    let blank = |reads: Vec<(String, Value)>| -> Vec<(String, Value)> {
        reads
            .into_iter()
            .map(|(what, v)| (what, after_blanked(v, &started)))
            .collect()
    };
    let (a, b) = (blank(ui_reads(&mut *sqlite)), blank(ui_reads(&mut *pg)));
    assert_eq!(a.len(), b.len());
    for ((what, x), (_, y)) in a.iter().zip(&b) {
        assert_eq!(x, y, "{what}: SQLite, then PostgreSQL");
    }
    // The reads were not empty answers on both sides.
    let first = &a[0].1;
    assert_eq!(first.as_array().map(Vec::len), Some(5), "{first}");
}

#[test]
fn another_hosts_commit_reaches_the_watching_ui() {
    let Some(server) = server() else { return };
    let (db, mut admin) = FreshDb::prepared(&server);
    let watchers = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT count(*) FROM watchers", &[])
            .unwrap()
            .get(0)
    };
    let ui = open_ui(Path::new(&db.url), OpenMode::Existing).unwrap();
    assert_eq!(watchers(&mut admin), 1);
    let before = ui.data_version().unwrap();
    // Nothing happened: the number stays (and asking costs no round trip).
    assert_eq!(ui.data_version().unwrap(), before);
    write_elsewhere(&db.url, "helix 🧬", "test:1");
    let start = Instant::now();
    while ui.data_version().unwrap() == before {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the UI never heard of another connection's commit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A worker's connection (no LISTEN) sees the change by its mark.
    let worker = (ui.reopen())().unwrap();
    let mark = worker.data_version().unwrap();
    write_elsewhere(&db.url, "kakoune", "test:2");
    assert_ne!(worker.data_version().unwrap(), mark);
    // Closing the UI unregisters it: writers stop notifying.
    drop(worker);
    drop(ui);
    assert_eq!(watchers(&mut admin), 0);
}

/// A UI on a connection that takes no writes (a standby; here `default_transaction_read_only`,
/// as the write tests emulate one): it cannot register or LISTEN, so it polls the change mark —
/// and still sees another connection's commit; curation is refused by the UI's read-only mode.
#[test]
fn a_read_only_ui_polls_the_change_mark() {
    let Some(server) = server() else { return };
    let (db, mut admin) = FreshDb::prepared(&server);
    let replica_url = format!("{}?options=-c%20default_transaction_read_only%3Don", db.url);
    let ui = open_ui(Path::new(&replica_url), OpenMode::Existing).unwrap();
    assert!(ui.is_read_only());
    let watchers: i64 = admin
        .query_one("SELECT count(*) FROM watchers", &[])
        .unwrap()
        .get(0);
    assert_eq!(watchers, 0, "a read-only connection registers nothing");
    let before = ui.data_version().unwrap();
    assert_eq!(ui.data_version().unwrap(), before);
    write_elsewhere(&db.url, "helix", "test:1");
    assert_ne!(ui.data_version().unwrap(), before);
    assert_eq!(ui.browse_after(&BrowseBound::Start, 10).unwrap().len(), 1);
}

/// A login granted only SELECT (a dashboard's, made by hand) takes no writes either: its UI
/// is read-only (the READ-ONLY badge, no curation keys) and polls the change mark, and its
/// store says so, which is how `recall` over MCP knows to serve reads without logging them
/// (logging would be refused). A login that may write is not read-only.
#[test]
fn a_login_that_may_only_select_is_read_only() {
    use super::postgres_roles::{login_url, TestLogin};
    let Some(server) = server() else { return };
    let reader = TestLogin::unique(&server, "uiselect");
    let (db, mut admin) = FreshDb::prepared(&server);
    admin
        .batch_execute(&format!(
            "CREATE ROLE {0} LOGIN PASSWORD '{1}';
             GRANT CONNECT ON DATABASE {2} TO {0};
             GRANT SELECT ON ALL TABLES IN SCHEMA public TO {0};",
            reader.name, reader.password, db.name
        ))
        .unwrap();
    write_elsewhere(&db.url, "helix", "test:1");
    let url = login_url(&db, &reader);
    let ui = open_ui(Path::new(&url), OpenMode::Existing).unwrap();
    assert!(ui.is_read_only());
    let before = ui.data_version().unwrap();
    write_elsewhere(&db.url, "kakoune", "test:2");
    assert_ne!(ui.data_version().unwrap(), before);
    let mut store = AnyStore::open(Path::new(&url), OpenMode::Existing).unwrap();
    assert!(store.is_read_only());
    let r = store
        .resolve("user:1", "editor", None, None)
        .expect("a reader resolves");
    assert_eq!(r.value, Some(json!("kakoune")));
    // `check` and `export` read the causal clock, a sequence `GRANT SELECT ON ALL TABLES`
    // leaves out: the refusal is one sentence naming the login and the grant that lets it,
    // not the driver's text; once granted, both run.
    let grant = format!(
        "GRANT SELECT ON SEQUENCE memscope_clock TO \"{}\"",
        reader.name
    );
    let refused = format!("{:#}", store.check(IntegrityMode::Quick).unwrap_err());
    assert!(
        refused.contains(&format!("refused the login \"{}\"", reader.name))
            && refused.contains(&grant)
            && !refused.contains("db error"),
        "{refused}"
    );
    let refused = format!("{:#}", store.export(&mut Vec::new()).unwrap_err());
    assert!(refused.contains(&grant), "{refused}");
    // A write takes a number from the clock, which that grant would not allow: its refusal
    // names the login a write needs, not the grant — before it and after it (found by review:
    // a login granted it was told to grant it).
    let write_refused = |store: &mut AnyStore| {
        let refused = format!(
            "{:#}",
            store
                .write(&super::postgres_write::req(
                    "user:1",
                    "editor",
                    json!("vim 📝"),
                    "global",
                    "t:3"
                ))
                .unwrap_err()
        );
        assert!(
            refused.contains(
                "that login may not write — writes need a memscope_agent or memscope_curator login"
            ) && !refused.contains("GRANT SELECT"),
            "{refused}"
        );
    };
    write_refused(&mut store);
    admin.batch_execute(&grant).unwrap();
    let mut store = AnyStore::open(Path::new(&url), OpenMode::Existing).unwrap();
    assert!(store.check(IntegrityMode::Quick).unwrap().ok);
    store.export(&mut Vec::new()).unwrap();
    write_refused(&mut store);
    // Granted INSERT on the record, its history and the read log, it takes writes.
    admin
        .batch_execute(&format!(
            "GRANT INSERT ON memories, history, reads TO {}",
            reader.name
        ))
        .unwrap();
    assert!(!open_ui(Path::new(&url), OpenMode::Existing)
        .unwrap()
        .is_read_only());
}

/// A team's UIs log in as different roles (README, "Roles"): an agent's and a curator's UI
/// both register (neither may update `watchers`, and neither sees the other session's start
/// time), neither forgets the other's registration, and both hear a commit.
#[test]
fn an_agents_ui_and_a_curators_ui_both_watch() {
    use super::postgres_roles::{login_url, roles, TestLogin};
    let Some(server) = server() else { return };
    let agent = TestLogin::unique(&server, "uiagent");
    let curator = TestLogin::unique(&server, "uicurator");
    let (db, mut admin) = FreshDb::prepared(&server);
    for (flag, login) in [("--agent-login", &agent), ("--curator-login", &curator)] {
        roles(
            &db,
            Some(login),
            &[flag, &login.name, "--password-from-env", "TEST_LOGIN_PW"],
        )
        .ok();
    }
    let agents = open_ui(Path::new(&login_url(&db, &agent)), OpenMode::Existing).unwrap();
    let curators = open_ui(Path::new(&login_url(&db, &curator)), OpenMode::Existing).unwrap();
    let watchers = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT count(*) FROM watchers", &[])
            .unwrap()
            .get(0)
    };
    assert_eq!(
        watchers(&mut admin),
        2,
        "both registered, neither forgot the other"
    );
    let (a0, c0) = (
        agents.data_version().unwrap(),
        curators.data_version().unwrap(),
    );
    write_elsewhere(&db.url, "helix", "test:1");
    let start = Instant::now();
    while agents.data_version().unwrap() == a0 || curators.data_version().unwrap() == c0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a UI never heard of the commit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(agents);
    assert_eq!(watchers(&mut admin), 1);
    drop(curators);
    assert_eq!(watchers(&mut admin), 0);
}

/// A role that may not register in `watchers` (grants made by hand) still opens the UI, which
/// then reads the change mark: it still sees another connection's commit.
#[test]
fn a_role_without_watchers_polls_instead() {
    use super::postgres_roles::{login_url, make_agent_login, TestLogin};
    let Some(server) = server() else { return };
    let agent = TestLogin::unique(&server, "uinowatch");
    let (db, mut admin) = FreshDb::prepared(&server);
    make_agent_login(&db, &agent);
    // This database's table only: the group role's grants elsewhere stay.
    admin
        .batch_execute("REVOKE ALL ON watchers FROM memscope_agent")
        .unwrap();
    let ui = open_ui(Path::new(&login_url(&db, &agent)), OpenMode::Existing).unwrap();
    assert!(!ui.is_read_only());
    let registered: i64 = admin
        .query_one("SELECT count(*) FROM watchers", &[])
        .unwrap()
        .get(0);
    assert_eq!(registered, 0);
    let before = ui.data_version().unwrap();
    write_elsewhere(&db.url, "helix", "test:1");
    assert_ne!(ui.data_version().unwrap(), before);
}

/// A UI whose registration is gone (deleted by hand, or by any role that may delete watchers)
/// hears no notice, but its backstop — the change mark, every few seconds — still shows the
/// change, and it registers again.
#[test]
fn a_ui_whose_registration_was_removed_still_sees_changes_and_registers_again() {
    let Some(server) = server() else { return };
    let (db, mut admin) = FreshDb::prepared(&server);
    let ui = open_ui(Path::new(&db.url), OpenMode::Existing).unwrap();
    let before = ui.data_version().unwrap();
    admin.batch_execute("DELETE FROM watchers").unwrap();
    write_elsewhere(&db.url, "helix", "test:1");
    let start = Instant::now();
    while ui.data_version().unwrap() == before {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the backstop never saw the change"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let watchers: i64 = admin
        .query_one("SELECT count(*) FROM watchers", &[])
        .unwrap()
        .get(0);
    assert_eq!(watchers, 1, "registered again");
}

/// Behind another session's lock on the table (a `VACUUM FULL` after a delete, a `psql` left
/// in a transaction) the UI's reads give up after the UI's own two seconds, not a writer's
/// fifteen, and say so — the UI handles its keys (`q` too) again — and read again once the
/// lock is gone.
#[test]
fn the_ui_gives_up_on_a_lock_held_elsewhere_after_two_seconds() {
    let Some(server) = server() else { return };
    let (db, mut admin) = FreshDb::prepared(&server);
    let ui = open_ui(Path::new(&db.url), OpenMode::Existing).unwrap();
    let mut tx = admin.transaction().unwrap();
    tx.batch_execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let said = format!("{:#}", ui.scope_counts().expect_err("the lock is held"));
    assert!(
        said.contains("held by another session for more than 2000 ms"),
        "{said}"
    );
    tx.rollback().unwrap();
    ui.scope_counts().unwrap();
}
