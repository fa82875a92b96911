//! The wrong-tool incident loop (issue 4): resolution as of a past moment (from history), the
//! validity interval of each version, the read log (identity and version, never a value),
//! rescope (move a mis-scoped value, in one transaction) and revert (an earlier value becomes
//! current again as a new version). Everything runs on real database files, through the real
//! binary and the library; the store's clock is fixed where times must be deterministic. The
//! as-of, history, read-log and revert tests run on PostgreSQL too (`…_on_postgres`, the clock
//! moved by the session's `memscope.now`); the rest look at the SQLite file itself (bytes on
//! disk, every table's rows) and stay on it — tests/store/postgres_incident.rs runs the rescope
//! and revert loop on both backends.

use crate::support::*;
use chrono::{DateTime, Duration, FixedOffset, SecondsFormat, TimeZone, Utc};
use memscope::store::{format_time, parse_time, AnyStore, IntegrityMode, ReadFilter};
use memscope::{Clock, DeleteReport, DeleteTarget, Identity, OutcomeKind, Resolution, Scope};
use rusqlite::types::ValueRef;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

const U: &str = "user:42";
const PM: &str = "package_manager";
const LEGACY: &str = "repo:legacy-dashboard";

// ---------------------------------------------------------------------------------------------
// Helpers of this file
// ---------------------------------------------------------------------------------------------

/// A fixed moment: 2026-03-01T00:00:00Z plus `minutes`.
fn t(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap() + Duration::minutes(minutes)
}

fn scope(text: &str) -> Scope {
    Scope::parse(text).expect("scope")
}

fn ident(subject: &str, predicate: &str, scope_text: &str) -> Identity {
    Identity {
        subject: subject.into(),
        predicate: predicate.into(),
        scope: scope(scope_text),
    }
}

/// Writes through the library with the clock fixed at `at`.
#[track_caller]
fn put(
    store: &mut AnyStore,
    at: DateTime<Utc>,
    scope_text: &str,
    value: impl Into<Value>,
    source: &str,
) -> memscope::WriteOutcome {
    store.set_clock(Clock::Fixed(at)).expect("the clock");
    store
        .write(&req(U, PM, value.into(), scope_text, source))
        .expect("write")
}

/// `put` with the words the value was said in.
fn put_said(
    store: &mut AnyStore,
    at: DateTime<Utc>,
    scope_text: &str,
    value: Value,
    source: &str,
    raw: &str,
) -> memscope::WriteOutcome {
    store.set_clock(Clock::Fixed(at)).expect("the clock");
    let mut r = req(U, PM, value, scope_text, source);
    r.raw = Some(raw.to_string());
    store.write(&r).expect("write")
}

#[track_caller]
fn delete_identity(store: &mut AnyStore, at: DateTime<Utc>, scope_text: &str) {
    delete_report(store, at, scope_text);
}

#[track_caller]
fn delete_report(store: &mut AnyStore, at: DateTime<Utc>, scope_text: &str) -> DeleteReport {
    store.set_clock(Clock::Fixed(at)).expect("the clock");
    store
        .delete(
            &DeleteTarget::Identity(ident(U, PM, scope_text)),
            Some("the user asked"),
        )
        .expect("delete")
}

#[track_caller]
fn as_of(
    store: &mut AnyStore,
    repo: Option<&str>,
    task: Option<&str>,
    at: DateTime<Utc>,
) -> Resolution {
    store.resolve_at(U, PM, repo, task, at).expect("resolve_at")
}

/// The considered entry of one scope.
#[track_caller]
fn considered<'a>(r: &'a Resolution, scope_text: &str) -> &'a memscope::Considered {
    r.considered
        .iter()
        .find(|c| c.scope == scope_text)
        .unwrap_or_else(|| panic!("{scope_text} was not considered: {r:#?}"))
}

/// Resolution at the store's current moment from history must be exactly what `resolve`
/// answers from the current view.
#[track_caller]
fn assert_as_of_now_matches_resolve(store: &mut AnyStore, now: DateTime<Utc>, repo: Option<&str>) {
    let live = store.resolve(U, PM, repo, None).expect("resolve");
    let then = as_of(store, repo, None, now);
    assert_eq!(
        then, live,
        "resolve --at NOW must answer what resolve answers now"
    );
}

/// Every table of the database, every row, sorted: a change anywhere shows up here.
fn table_fingerprint(path: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open read-only");
    let version: i64 = query_one(&conn, "PRAGMA user_version");
    let mut out = vec![format!("user_version {version}")];
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        tables.iter().any(|t| t == "reads"),
        "schema v2 has a reads table: {tables:?}"
    );
    for table in tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let n = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                let mut cells = Vec::with_capacity(n);
                for i in 0..n {
                    cells.push(match r.get_ref(i)? {
                        ValueRef::Null => "NULL".to_string(),
                        ValueRef::Integer(x) => x.to_string(),
                        ValueRef::Real(x) => x.to_string(),
                        ValueRef::Text(s) => format!("{:?}", String::from_utf8_lossy(s)),
                        ValueRef::Blob(b) => format!("blob{b:?}"),
                    });
                }
                Ok(cells.join(" | "))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        rows.sort();
        out.push(format!("table {table}: {} rows", rows.len()));
        out.extend(rows.into_iter().map(|r| format!("{table}: {r}")));
    }
    out
}

/// A store whose global package manager was `first`, then `second` (sources s:1 and s:2).
fn global_versions(first: &str, second: &str) -> TestDb {
    let db = TestDb::new();
    db.write(U, PM, first, "global", "s:1");
    db.write(U, PM, second, "global", "s:2");
    db
}

/// Runs `f` and asserts that it left every table as it was (`what` names it when it did not).
#[track_caller]
fn assert_unchanged_by(db: &TestDb, what: &str, f: impl FnOnce()) {
    let before = table_fingerprint(&db.path);
    f();
    let after = table_fingerprint(&db.path);
    if before != after {
        let gone: Vec<&String> = before.iter().filter(|r| !after.contains(r)).collect();
        let new: Vec<&String> = after.iter().filter(|r| !before.contains(r)).collect();
        panic!("{what} changed the database\nrows gone: {gone:#?}\nrows new: {new:#?}");
    }
}

/// `set` events of one scope's history: (version, value).
fn sets(history: &[Value]) -> Vec<(i64, Value)> {
    history
        .iter()
        .filter(|e| e["event"] == "set")
        .map(|e| (e["version"].as_i64().unwrap(), e["value"].clone()))
        .collect()
}

fn one_event<'a>(history: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = history.iter().filter(|e| e["event"] == name).collect();
    assert_eq!(found.len(), 1, "expected one {name} event: {history:#?}");
    found[0]
}

/// `reads --json` with extra filters.
#[track_caller]
fn reads(db: &TestDb, filters: &[&str]) -> Vec<Value> {
    let mut args = vec!["reads", "--json"];
    args.extend_from_slice(filters);
    as_array(db.json(&args))
}

#[track_caller]
fn assert_no_text(hay: &str, needle: &str, what: &str) {
    assert!(
        !hay.contains(needle),
        "{what} must not contain {needle:?}:\n{hay}"
    );
}

/// `rescope … --json`: the outcomes it caused.
#[track_caller]
fn rescope(db: &TestDb, from: &str, to: &str) -> Vec<Value> {
    as_array(db.json(&args_for(
        "rescope",
        U,
        PM,
        &["--scope", from, "--to", to, "--json"],
    )))
}

fn rescope_run(db: &TestDb, from: &str, to: &str) -> Run {
    db.run(&args_for("rescope", U, PM, &["--scope", from, "--to", to]))
}

fn revert_run(db: &TestDb, scope_text: &str, to_version: Option<&str>) -> Run {
    let mut args = args_for("revert", U, PM, &["--scope", scope_text, "--json"]);
    if let Some(v) = to_version {
        args.push("--to-version");
        args.push(v);
    }
    db.run(&args)
}

/// Purges the content of every superseded version with the retention policy, run from a clock
/// far in the future (the current version keeps its value).
fn purge_old_content(db: &TestDb) {
    let mut store = open_store(&db.path);
    store.set_clock(Clock::Fixed(Utc::now() + Duration::days(400)));
    let report = store.gc(Some(30), None).expect("gc");
    assert!(report.purged_events >= 1, "{report:?}");
}

/// Global holds v1 "pnpm 📦" and then `current`, and retention purged v1's content: `refuse`
/// (`what`) changes nothing, `current` stays and `check` passes.
#[track_caller]
fn refused_on_purged_content(current: &str, what: &str, refuse: impl FnOnce(&TestDb)) -> TestDb {
    let db = global_versions("pnpm 📦", current);
    purge_old_content(&db);
    assert_unchanged_by(&db, what, || refuse(&db));
    assert_eq!(db.list(&["--scope", "global"])[0]["value"], current);
    db.assert_check_ok();
    db
}

// ---------------------------------------------------------------------------------------------
// 1. As-of resolution
// ---------------------------------------------------------------------------------------------

#[test]
fn parse_time_takes_rfc3339_and_ages_and_rejects_the_rest_in_one_sentence() {
    let now = t(10_000);
    assert_eq!(parse_time("3d", now), Ok(now - Duration::days(3)));
    assert_eq!(parse_time("90m", now), Ok(now - Duration::minutes(90)));
    assert_eq!(parse_time("12h", now), Ok(now - Duration::hours(12)));
    assert_eq!(parse_time("2w", now), Ok(now - Duration::weeks(2)));
    assert_eq!(parse_time("45s", now), Ok(now - Duration::seconds(45)));
    assert_eq!(parse_time("  3d ", now), Ok(now - Duration::days(3)));
    let exact = Utc.with_ymd_and_hms(2026, 11, 20, 10, 0, 0).unwrap() + Duration::milliseconds(123);
    assert_eq!(parse_time("2026-11-20T10:00:00.123Z", now), Ok(exact));
    assert_eq!(
        parse_time("2026-11-20T18:00:00.123+08:00", now),
        Ok(exact),
        "an offset is converted to UTC"
    );
    for bad in [
        "",
        "yesterday",
        "3",
        "3x",
        "d",
        "-3.5d",
        "3.5d",
        "2026-13-01",
        "99999999999999999999d",
    ] {
        let e = parse_time(bad, now).expect_err(bad);
        assert_eq!(e.lines().count(), 1, "one sentence for {bad:?}: {e}");
        assert!(e.contains("RFC 3339"), "{bad:?}: {e}");
    }
    // An age past the earliest time a time can name is out of range, not "not a time".
    let e = parse_time("99999999999999999999d", now).unwrap_err();
    assert!(
        e.contains("out of range") && !e.contains("not a time"),
        "{e}"
    );
    // A negative age is told the age it meant.
    let e = parse_time("-3d", now).unwrap_err();
    assert!(e.contains("write 3d for that long ago"), "{e}");
}

/// Insert, supersede, confirm, delete and restore: what resolve would have answered at each
/// moment, and never the destroyed content.
#[test]
fn as_of_follows_insert_supersede_confirm_delete_and_restore() {
    as_of_follows_insert_supersede_confirm_delete_and_restore_on(TestDb::new());
}

#[test]
fn as_of_follows_insert_supersede_confirm_delete_and_restore_on_postgres() {
    on_postgres(as_of_follows_insert_supersede_confirm_delete_and_restore_on);
}

fn as_of_follows_insert_supersede_confirm_delete_and_restore_on(db: TestDb) {
    let canary = unique("金丝雀🐤-asof-");
    let raw_canary = unique("原话-raw-asof-");
    let bun = format!("bun 🥟 {canary}");
    let mut store = open_any_store(&db);

    // Before anything: absent.
    put(&mut store, t(60), "global", "pnpm", "s:v1");
    assert_as_of_now_matches_resolve(&mut store, t(60), None);
    let r = as_of(&mut store, None, None, t(0));
    assert!(!r.found, "{r:#?}");
    assert_eq!(r.value, None);
    assert_eq!(considered(&r, "global").state, "absent");

    // Supersede.
    let o = put_said(
        &mut store,
        t(180),
        "global",
        json!(bun),
        "s:v2",
        &raw_canary,
    );
    assert_eq!(o.outcome, OutcomeKind::Superseded);
    assert_as_of_now_matches_resolve(&mut store, t(180), None);
    let r = as_of(&mut store, None, None, t(120));
    assert_eq!(
        (r.found, r.value.clone(), r.version, r.source.as_deref()),
        (true, Some(json!("pnpm")), Some(1), Some("s:v1")),
        "between v1 and v2 → v1: {r:#?}"
    );
    assert_eq!(r.scope.as_deref(), Some("global"));
    let r = as_of(&mut store, None, None, t(60));
    assert_eq!(r.version, Some(1), "at the exact instant of v1, v1 holds");
    let r = as_of(&mut store, None, None, t(240));
    assert_eq!((r.value.clone(), r.version), (Some(json!(bun)), Some(2)));

    // Confirm: same value, new source — the as-of answer does not change.
    let o = put(
        &mut store,
        t(300),
        "global",
        json!(format!("  BUN 🥟   {canary} ")),
        "s:confirm",
    );
    assert_eq!(o.outcome, OutcomeKind::Confirmed);
    assert_as_of_now_matches_resolve(&mut store, t(300), None);
    for at in [t(240), t(300), t(360)] {
        let r = as_of(&mut store, None, None, at);
        assert_eq!(
            (r.value.clone(), r.version, r.source.as_deref()),
            (Some(json!(bun)), Some(2), Some("s:v2")),
            "a confirmation is no new version: {r:#?}"
        );
    }

    // Delete: afterwards deleted; before it, it existed — without its content.
    delete_identity(&mut store, t(420), "global");
    assert_as_of_now_matches_resolve(&mut store, t(420), None);
    let r = as_of(&mut store, None, None, t(480));
    assert!(!r.found, "after the delete nothing applies: {r:#?}");
    assert_eq!(r.value, None);
    assert_eq!(considered(&r, "global").state, "deleted");
    for at in [t(120), t(240), t(360)] {
        let r = as_of(&mut store, None, None, at);
        assert!(r.found, "before the delete the memory existed: {r:#?}");
        assert_eq!(r.value, None, "destroyed content must not come back");
        assert_eq!(r.scope.as_deref(), Some("global"));
        let c = considered(&r, "global");
        assert!(c.found && c.wins && c.value.is_none(), "{c:#?}");
        assert!(c.state.contains("deleted"), "state says deleted: {c:#?}");
        // The delete's time as a field of its own, the one the sentence names (README,
        // "resolve"): front ends word it without reading the sentence.
        let deleted_at = (c.deleted_at.as_deref())
            .and_then(|d| DateTime::parse_from_rfc3339(d).ok())
            .map(|d| d.with_timezone(&Utc));
        assert_eq!(deleted_at, Some(t(420)), "{c:#?}");
        assert!(c.state.contains(c.deleted_at.as_deref().unwrap()), "{c:#?}");
        let text = serde_json::to_string(&r).unwrap();
        assert_no_text(&text, &canary, "as-of output after a delete");
        assert_no_text(&text, &raw_canary, "as-of output after a delete");
    }
    let r = as_of(&mut store, None, None, t(0));
    assert!(
        !r.found,
        "before it was ever written it did not exist: {r:#?}"
    );

    // Restore, then a new write.
    store.set_clock(Clock::Fixed(t(540))).unwrap();
    store.restore(&ident(U, PM, "global")).expect("restore");
    assert_as_of_now_matches_resolve(&mut store, t(540), None);
    let r = as_of(&mut store, None, None, t(570));
    assert!(!r.found, "restored but not yet written: {r:#?}");
    assert_eq!(considered(&r, "global").state, "absent");
    let o = put(&mut store, t(600), "global", "豆包 🫘", "s:v4");
    assert_eq!(o.outcome, OutcomeKind::Inserted);
    assert_eq!(o.version, Some(4), "the tombstone took v3");
    assert_as_of_now_matches_resolve(&mut store, t(600), None);
    let r = as_of(&mut store, None, None, t(660));
    assert_eq!(
        (r.value.clone(), r.version, r.source.as_deref()),
        (Some(json!("豆包 🫘")), Some(4), Some("s:v4"))
    );
    // The moments of the first life still say: existed, deleted, no content.
    let r = as_of(&mut store, None, None, t(240));
    assert!(r.found && r.value.is_none(), "{r:#?}");
    let r = as_of(&mut store, None, None, t(480));
    assert!(!r.found, "between delete and restore: {r:#?}");
    drop(store);
    db.assert_check_ok();
}

/// A shadowed version whose content retention purged says so after its word, as a winning one
/// does, in JSON and in the text (found by an exploratory test: it showed no value, unmarked).
#[test]
fn as_of_marks_a_shadowed_version_whose_content_was_purged() {
    as_of_marks_a_shadowed_version_whose_content_was_purged_on(TestDb::new());
}

#[test]
fn as_of_marks_a_shadowed_version_whose_content_was_purged_on_postgres() {
    on_postgres(as_of_marks_a_shadowed_version_whose_content_was_purged_on);
}

fn as_of_marks_a_shadowed_version_whose_content_was_purged_on(db: TestDb) {
    let mut store = open_any_store(&db);
    put(&mut store, t(0), LEGACY, "npm ci 📦", "s:r");
    put(&mut store, t(10), "global", "pnpm 旧", "s:g1");
    put(&mut store, t(20), "global", "bun", "s:g2");
    store
        .set_clock(Clock::Fixed(t(0) + Duration::days(400)))
        .unwrap();
    assert!(store.gc(Some(30), None).unwrap().purged_events >= 1);
    let r = as_of(&mut store, Some("legacy-dashboard"), None, t(15));
    assert_eq!(r.scope.as_deref(), Some(LEGACY), "{r:#?}");
    assert_eq!(r.value, Some(json!("npm ci 📦")), "{r:#?}");
    let g = considered(&r, "global");
    assert_eq!(
        (g.state.as_str(), g.found, g.version, &g.value),
        ("shadowed (content purged)", true, Some(1), &None),
        "{g:#?}"
    );
    // Bun was current then, and kept its content: plainly shadowed.
    let r = as_of(&mut store, Some("legacy-dashboard"), None, t(30));
    assert_eq!(considered(&r, "global").state, "shadowed", "{r:#?}");
    drop(store);
    let at = t(15).to_rfc3339_opts(SecondsFormat::Millis, true);
    let text = db.run(&args_for(
        "resolve",
        U,
        PM,
        &["--repo", "legacy-dashboard", "--at", &at],
    ));
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout
            .lines()
            .any(|l| l.contains("shadowed (content purged)") && l.contains("global v1")),
        "{}",
        text.stdout
    );
}

/// A repo rule written later must not appear as of a moment before it existed; the chain as it
/// stood then is task, repo, global.
#[test]
fn as_of_precedence_uses_the_chain_as_it_stood_then() {
    as_of_precedence_uses_the_chain_as_it_stood_then_on(TestDb::new());
}

#[test]
fn as_of_precedence_uses_the_chain_as_it_stood_then_on_postgres() {
    on_postgres(as_of_precedence_uses_the_chain_as_it_stood_then_on);
}

fn as_of_precedence_uses_the_chain_as_it_stood_then_on(db: TestDb) {
    let mut store = open_any_store(&db);
    put(&mut store, t(60), "global", "pnpm", "s:g");
    put(&mut store, t(300), LEGACY, "npm", "s:r");
    put(
        &mut store,
        t(540),
        "task:fix-lockfile-123",
        "不执行任何安装命令 🚫",
        "s:t",
    );
    let ctx = (Some("legacy-dashboard"), Some("fix-lockfile-123"));

    let r = as_of(&mut store, ctx.0, ctx.1, t(180));
    assert_eq!(r.scope.as_deref(), Some("global"), "{r:#?}");
    assert_eq!(r.value, Some(json!("pnpm")));
    let scopes: Vec<&str> = r.considered.iter().map(|c| c.scope.as_str()).collect();
    assert_eq!(scopes, ["task:fix-lockfile-123", LEGACY, "global"]);
    assert!(
        !considered(&r, LEGACY).found,
        "the repo rule did not exist yet"
    );
    assert_eq!(considered(&r, LEGACY).value, None);
    assert_eq!(considered(&r, LEGACY).state, "absent");

    let r = as_of(&mut store, ctx.0, ctx.1, t(400));
    assert_eq!(
        (r.scope.as_deref(), r.value.clone()),
        (Some(LEGACY), Some(json!("npm")))
    );
    let g = considered(&r, "global");
    assert!(g.found && !g.wins && g.state == "shadowed", "{g:#?}");
    assert_eq!(g.value, Some(json!("pnpm")));
    assert!(!considered(&r, "task:fix-lockfile-123").found);

    let r = as_of(&mut store, ctx.0, ctx.1, t(600));
    assert_eq!(r.scope.as_deref(), Some("task:fix-lockfile-123"));
    assert_eq!(r.value, Some(json!("不执行任何安装命令 🚫")));
    let wins: Vec<bool> = r.considered.iter().map(|c| c.wins).collect();
    assert_eq!(wins, [true, false, false]);

    // Another repo never sees the legacy rule, at any time.
    let r = as_of(&mut store, Some("brand-new-app"), None, t(600));
    assert_eq!(r.value, Some(json!("pnpm")));
    assert!(r.considered.iter().all(|c| c.scope != LEGACY));
}

/// After a delete → restore → write → delete cycle, a moment when the second life was current
/// must still say the memory existed (and won), not that it was deleted — otherwise the chain
/// shows a lower scope winning where the agent really got the repo rule.
#[test]
fn as_of_after_a_second_delete_still_says_the_second_life_existed() {
    as_of_after_a_second_delete_still_says_the_second_life_existed_on(TestDb::new());
}

#[test]
fn as_of_after_a_second_delete_still_says_the_second_life_existed_on_postgres() {
    on_postgres(as_of_after_a_second_delete_still_says_the_second_life_existed_on);
}

fn as_of_after_a_second_delete_still_says_the_second_life_existed_on(db: TestDb) {
    let mut store = open_any_store(&db);
    put(&mut store, t(0), "global", "pnpm", "s:g");
    put(&mut store, t(60), LEGACY, "npm", "s:r1");
    delete_identity(&mut store, t(120), LEGACY);
    store.set_clock(Clock::Fixed(t(180))).unwrap();
    store.restore(&ident(U, PM, LEGACY)).unwrap();
    put(&mut store, t(240), LEGACY, "yarn 🧶", "s:r2");
    // What an agent in legacy-dashboard got at t(270): the repo rule.
    let before = as_of(&mut store, Some("legacy-dashboard"), None, t(270));
    assert_eq!(before.scope.as_deref(), Some(LEGACY));
    delete_identity(&mut store, t(300), LEGACY);

    let r = as_of(&mut store, Some("legacy-dashboard"), None, t(270));
    assert_eq!(
        r.scope.as_deref(),
        Some(LEGACY),
        "at t(270) the repo rule won; as-of must not hand the win to global: {r:#?}"
    );
    assert!(r.found && r.value.is_none(), "{r:#?}");
    assert!(considered(&r, LEGACY).state.contains("deleted"), "{r:#?}");
    assert!(considered(&r, LEGACY).deleted_at.is_some(), "{r:#?}");
    // Between the first delete and the restore it really was deleted.
    let r = as_of(&mut store, Some("legacy-dashboard"), None, t(150));
    assert_eq!(r.scope.as_deref(), Some("global"), "{r:#?}");
    assert_eq!(considered(&r, LEGACY).state, "deleted");
    // Between the restore and the second life's write it was neither deleted nor held: the
    // second delete keeps the first cycle's `restored` event (found by an exploratory test:
    // it purged it, and this moment said deleted).
    let r = as_of(&mut store, Some("legacy-dashboard"), None, t(210));
    assert_eq!(r.scope.as_deref(), Some("global"), "{r:#?}");
    assert_eq!(considered(&r, LEGACY).state, "absent", "{r:#?}");
    // During the first life it existed.
    let r = as_of(&mut store, Some("legacy-dashboard"), None, t(90));
    assert_eq!(r.scope.as_deref(), Some(LEGACY), "{r:#?}");
    // A delete of what is already deleted, with nothing left of it, changes nothing: the kept
    // `restored` event is the tombstone's trail, not content left to destroy.
    let report = delete_report(&mut store, t(330), LEGACY);
    assert!(report.tombstoned.is_empty(), "{report:#?}");
    assert_eq!(report.already_deleted.len(), 1, "{report:#?}");
    drop(store);
    db.assert_check_ok();
}

/// The same for a tombstone `gc` collected: between the collection and the next write the
/// identity was absent, and a later delete keeps the `tombstone_collected` event that says so.
#[test]
fn as_of_after_a_second_delete_keeps_the_first_tombstones_collection() {
    as_of_after_a_second_delete_keeps_the_first_tombstones_collection_on(TestDb::new());
}

#[test]
fn as_of_after_a_second_delete_keeps_the_first_tombstones_collection_on_postgres() {
    on_postgres(as_of_after_a_second_delete_keeps_the_first_tombstones_collection_on);
}

fn as_of_after_a_second_delete_keeps_the_first_tombstones_collection_on(db: TestDb) {
    const DAY: i64 = 24 * 60;
    let mut store = open_any_store(&db);
    put(&mut store, t(0), "global", "pnpm", "s:g");
    put(&mut store, t(60), LEGACY, "npm 📦", "s:r1");
    delete_identity(&mut store, t(120), LEGACY);
    store.set_clock(Clock::Fixed(t(120 + 2 * DAY))).unwrap();
    let gc = serde_json::to_value(store.gc(None, Some(1)).expect("gc")).unwrap();
    assert_eq!(gc["collected_tombstones"], 1, "{gc:#}");
    put(&mut store, t(4 * DAY), LEGACY, "yarn 🧶", "s:r2");
    delete_identity(&mut store, t(5 * DAY), LEGACY);

    let r = as_of(&mut store, Some("legacy-dashboard"), None, t(3 * DAY));
    assert_eq!(r.scope.as_deref(), Some("global"), "{r:#?}");
    assert_eq!(considered(&r, LEGACY).state, "absent", "{r:#?}");
    let r = as_of(&mut store, Some("legacy-dashboard"), None, t(DAY));
    assert_eq!(considered(&r, LEGACY).state, "deleted", "{r:#?}");
    let r = as_of(&mut store, Some("legacy-dashboard"), None, t(4 * DAY + 60));
    assert_eq!(r.scope.as_deref(), Some(LEGACY), "{r:#?}");
    assert!(r.found && r.value.is_none(), "{r:#?}");
    drop(store);
    db.assert_check_ok();
}

/// A scope that held nothing for a while (its value was rescoped away) and was later written and
/// deleted: as of the empty stretch, nothing applied there.
#[test]
fn as_of_does_not_invent_a_record_in_a_stretch_where_the_scope_was_empty() {
    as_of_does_not_invent_a_record_in_a_stretch_where_the_scope_was_empty_on(TestDb::new());
}

#[test]
fn as_of_does_not_invent_a_record_in_a_stretch_where_the_scope_was_empty_on_postgres() {
    on_postgres(as_of_does_not_invent_a_record_in_a_stretch_where_the_scope_was_empty_on);
}

fn as_of_does_not_invent_a_record_in_a_stretch_where_the_scope_was_empty_on(db: TestDb) {
    let mut store = open_any_store(&db);
    put(&mut store, t(0), "global", "🚫 no installs", "s:1");
    store.set_clock(Clock::Fixed(t(60))).unwrap();
    let outs = store
        .rescope(U, PM, &Scope::Global, &scope("task:check-lockfile-7"))
        .unwrap();
    assert_eq!(outs[1].outcome, OutcomeKind::Removed);
    put(&mut store, t(120), "global", "pnpm", "s:2");
    let r = as_of(&mut store, None, None, t(90));
    assert!(
        !r.found,
        "before the delete: nothing in global at t(90): {r:#?}"
    );
    delete_identity(&mut store, t(180), "global");
    let r = as_of(&mut store, None, None, t(90));
    assert!(
        !r.found,
        "global held nothing at t(90); the later delete must not make it 'existed': {r:#?}"
    );
    let r = as_of(&mut store, None, None, t(150));
    assert!(r.found && r.value.is_none(), "{r:#?}");
}

/// The CLI: `resolve --at` with relative ages and RFC 3339, the same JSON shape as `resolve`.
#[test]
fn cli_resolve_at_answers_from_history_with_the_resolve_shape() {
    cli_resolve_at_answers_from_history_with_the_resolve_shape_on(TestDb::new());
}

#[test]
fn cli_resolve_at_answers_from_history_with_the_resolve_shape_on_postgres() {
    on_postgres(cli_resolve_at_answers_from_history_with_the_resolve_shape_on);
}

fn cli_resolve_at_answers_from_history_with_the_resolve_shape_on(db: TestDb) {
    let now = Utc::now();
    let mut store = open_any_store(&db);
    put(
        &mut store,
        now - Duration::days(10),
        "global",
        "pnpm",
        "s:g1",
    );
    put(&mut store, now - Duration::days(5), LEGACY, "npm", "s:r");
    put(
        &mut store,
        now - Duration::days(2),
        "global",
        "bun 包管理器 🥟",
        "s:g2",
    );
    drop(store);
    let at = |when: &str, repo: Option<&str>| {
        let mut args = args_for("resolve", U, PM, &["--at", when, "--json"]);
        if let Some(r) = repo {
            args.push("--repo");
            args.push(r);
        }
        db.json(&args)
    };

    let r = at("11d", Some("legacy-dashboard"));
    assert_eq!(r["found"], false, "11 days ago nothing existed: {r:#}");
    assert_eq!(r["value"], Value::Null);

    let r = at("7d", Some("legacy-dashboard"));
    assert_eq!(
        (&r["scope"], &r["value"]),
        (&json!("global"), &json!("pnpm"))
    );
    assert_eq!(r["version"], 1, "{r:#}");

    let r = at("3d", Some("legacy-dashboard"));
    assert_eq!((&r["scope"], &r["value"]), (&json!(LEGACY), &json!("npm")));
    let chain = r["considered"].as_array().unwrap();
    assert_eq!(chain[1]["scope"], "global");
    assert_eq!(chain[1]["value"], "pnpm", "global v1 was shadowed then");
    assert_eq!(chain[1]["wins"], false);

    let r = at("90m", None);
    assert_eq!(
        (&r["value"], &r["version"]),
        (&json!("bun 包管理器 🥟"), &json!(2))
    );

    // RFC 3339, with an offset and milliseconds, 4 days ago.
    let four_days = (now - Duration::days(4))
        .with_timezone(&FixedOffset::east_opt(8 * 3600).unwrap())
        .to_rfc3339_opts(SecondsFormat::Millis, false);
    let r = at(&four_days, None);
    assert_eq!((&r["value"], &r["version"]), (&json!("pnpm"), &json!(1)));

    // Same fields as plain resolve, at the top and in the chain.
    let live = db.resolve(U, PM, &["--repo", "legacy-dashboard"]);
    let then = at("3d", Some("legacy-dashboard"));
    let keys = |v: &Value| -> BTreeSet<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&then), keys(&live));
    for k in RESOLUTION_KEYS {
        assert!(
            then.get(k).is_some(),
            "resolve --at --json lacks {k}: {then:#}"
        );
    }
    for c in then["considered"].as_array().unwrap() {
        for k in ["scope", "found", "value", "wins"] {
            assert!(c.get(k).is_some(), "considered entry lacks {k}: {c:#}");
        }
    }
}

#[test]
fn cli_resolve_at_with_a_bad_time_is_one_sentence_and_exit_2() {
    let db = TestDb::new();
    db.write(U, PM, "pnpm", "global", "s:1");
    for bad in ["yesterday", "3x", "2026-13-45T10:00:00Z"] {
        let r = db.run(&args_for("resolve", U, PM, &["--at", bad, "--json"]));
        r.fails_with(2, &[bad, "RFC 3339"]);
        assert!(
            r.stdout.trim().is_empty(),
            "no answer on a bad --at: {}",
            r.stdout
        );
    }
    // --at reads the past; --log records a read now: both at once is a usage error.
    let r = db.run(&args_for("resolve", U, PM, &["--at", "3d", "--log"]));
    assert_eq!(r.code, 2, "{r:?}");
    let r = db.run(&["reads", "--since", "last tuesday"]);
    r.fails_with(2, &["last tuesday", "RFC 3339"]);
}

// ---------------------------------------------------------------------------------------------
// 2. Validity intervals in history
// ---------------------------------------------------------------------------------------------

#[test]
fn history_json_gives_each_set_event_its_validity_interval() {
    history_json_gives_each_set_event_its_validity_interval_on(TestDb::new());
}

#[test]
fn history_json_gives_each_set_event_its_validity_interval_on_postgres() {
    on_postgres(history_json_gives_each_set_event_its_validity_interval_on);
}

fn history_json_gives_each_set_event_its_validity_interval_on(db: TestDb) {
    let mut store = open_any_store(&db);
    put(&mut store, t(60), "global", "pnpm", "s:1");
    put(&mut store, t(120), "global", "pnpm", "s:confirm");
    put(&mut store, t(180), "global", "npm", "s:2");
    put(&mut store, t(200), LEGACY, "yarn 🧶", "s:r");
    put(&mut store, t(240), "global", "豆包 🫘", "s:3");
    put(&mut store, t(260), "task:t-1", "bun", "s:t");
    store.set_clock(Clock::Fixed(t(300))).unwrap();
    store
        .rescope(U, PM, &scope("task:t-1"), &scope("task:t-2"))
        .unwrap();
    drop(store);

    let history = db.history(U, PM, None);
    let until = |scope_text: &str, version: i64| -> Value {
        let e = history
            .iter()
            .find(|e| e["event"] == "set" && e["scope"] == scope_text && e["version"] == version)
            .unwrap_or_else(|| panic!("no set v{version} in {scope_text}: {history:#?}"));
        e.get("valid_until").cloned().unwrap_or(Value::Null)
    };
    assert_eq!(until("global", 1), json!(format_time(t(180))));
    assert_eq!(until("global", 2), json!(format_time(t(240))));
    assert_eq!(until("global", 3), Value::Null, "current: no end");
    assert_eq!(
        until(LEGACY, 1),
        Value::Null,
        "a write in another scope does not end it"
    );
    assert_eq!(
        until("task:t-1", 1),
        json!(format_time(t(300))),
        "rescoped away: ends at the removal"
    );
    assert_eq!(until("task:t-2", 1), Value::Null);
    for e in history.iter().filter(|e| e["event"] != "set") {
        assert!(
            e.get("valid_until").is_none_or(Value::is_null),
            "only set events have a validity: {e:#}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. The read log
// ---------------------------------------------------------------------------------------------

const READ_FIELDS: [&str; 10] = [
    "at",
    "agent",
    "subject",
    "predicate",
    "repo",
    "task",
    "scope",
    "version",
    "note",
    "shadowed",
];

#[track_caller]
fn assert_read_row_shape(row: &Value) {
    let obj = row.as_object().expect("a read row is an object");
    for k in READ_FIELDS {
        assert!(obj.contains_key(k), "read row lacks {k}: {row:#}");
    }
    for k in ["value", "raw", "previous", "source"] {
        assert!(!obj.contains_key(k), "read row must not carry {k}: {row:#}");
    }
}

/// The CLI records a read: `resolve --log --agent … --note …`.
#[test]
fn cli_resolve_log_records_the_read_without_its_value() {
    cli_resolve_log_records_the_read_without_its_value_on(TestDb::new());
}

#[test]
fn cli_resolve_log_records_the_read_without_its_value_on_postgres() {
    on_postgres(cli_resolve_log_records_the_read_without_its_value_on);
}

fn cli_resolve_log_records_the_read_without_its_value_on(db: TestDb) {
    let canary = unique("npm-canary-🐤-");
    db.write(U, PM, "pnpm", "global", "thread:17/message:86");
    db.write(U, PM, &canary, "global", "thread:23/message:14");
    let r = db.json(&args_for(
        "resolve",
        U,
        PM,
        &[
            "--repo",
            "web-app",
            "--log",
            "--agent",
            "claude-code",
            "--note",
            "ran npm install 🚨",
            "--json",
        ],
    ));
    assert_eq!(r["value"], json!(canary), "the agent gets its answer");
    let out = db.run(&["reads", "--json"]).ok();
    assert_no_text(&out.stdout, &canary, "reads --json");
    let rows = as_array(out.json());
    assert_eq!(rows.len(), 1, "one logged read: {rows:#?}");
    let row = &rows[0];
    assert_read_row_shape(row);
    assert_eq!(row["agent"], "claude-code");
    assert_eq!(row["note"], "ran npm install 🚨");
    assert_eq!(
        (&row["subject"], &row["predicate"]),
        (&json!(U), &json!(PM))
    );
    assert_eq!(
        (&row["repo"], &row["task"]),
        (&json!("web-app"), &Value::Null)
    );
    assert_eq!(
        (&row["scope"], &row["version"]),
        (&json!("global"), &json!(2))
    );
}

/// Reads logged through the library, listed and filtered through the CLI; the canary value the
/// agents got appears nowhere in the listing.
#[test]
fn reads_list_identity_and_version_never_a_value_and_filter() {
    reads_list_identity_and_version_never_a_value_and_filter_on(TestDb::new());
}

#[test]
fn reads_list_identity_and_version_never_a_value_and_filter_on_postgres() {
    on_postgres(reads_list_identity_and_version_never_a_value_and_filter_on);
}

fn reads_list_identity_and_version_never_a_value_and_filter_on(db: TestDb) {
    let canary = unique("金丝雀-npm-🐤-");
    let now = Utc::now();
    let mut store = open_any_store(&db);
    put(&mut store, now - Duration::days(9), "global", "pnpm", "s:g");
    put_said(
        &mut store,
        now - Duration::days(8),
        LEGACY,
        json!(canary),
        "s:r",
        &canary,
    );
    // Three reads: (when, predicate, repo, agent, note, the value it got; None: nothing found).
    let logged = [
        (
            now - Duration::days(3),
            PM,
            "legacy-dashboard",
            "claude-code",
            Some("kept npm ci"),
            Some(json!(canary)),
        ),
        (
            now - Duration::hours(2),
            "Package Manager",
            "new-app",
            "cursor",
            None,
            Some(json!("pnpm")),
        ),
        (
            now - Duration::minutes(30),
            "test_runner",
            "new-app",
            "claude-code",
            Some("nothing known 🤷"),
            None,
        ),
    ];
    for (at, pred, repo, agent, note, got) in logged {
        store.set_clock(Clock::Fixed(at)).unwrap();
        let r = store
            .resolve_logged(U, pred, Some(repo), None, Some(agent), note)
            .expect("resolve_logged");
        match got {
            Some(value) => assert_eq!(r.value, Some(value)),
            None => assert!(!r.found, "{r:#?}"),
        }
    }
    drop(store);

    let out = db.run(&["reads", "--json"]).ok();
    assert_no_text(&out.stdout, &canary, "reads --json");
    let text = db.run(&["reads"]).ok();
    assert_no_text(&text.stdout, &canary, "reads (text)");
    let rows = as_array(out.json());
    assert_eq!(rows.len(), 3, "{rows:#?}");
    rows.iter().for_each(assert_read_row_shape);
    // Newest first.
    assert_eq!(rows[0]["predicate"], "test_runner");
    assert_eq!(
        (&rows[0]["scope"], &rows[0]["version"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(rows[1]["predicate"], PM, "predicates are normalized");
    assert_eq!(
        (&rows[1]["scope"], &rows[1]["version"]),
        (&json!("global"), &json!(1))
    );
    assert_eq!(rows[1]["shadowed"], json!([]));
    let legacy = &rows[2];
    assert_eq!(
        (&legacy["scope"], &legacy["version"]),
        (&json!(LEGACY), &json!(1))
    );
    assert_eq!(legacy["repo"], "legacy-dashboard");
    assert_eq!(legacy["agent"], "claude-code");
    assert_eq!(legacy["note"], "kept npm ci");
    assert_eq!(legacy["shadowed"], json!(["global@v1"]));
    assert_eq!(legacy["at"], json!(format_time(now - Duration::days(3))));

    let count = |filters: &[&str]| reads(&db, filters).len();
    assert_eq!(count(&["--agent", "claude-code"]), 2);
    assert_eq!(count(&["--agent", "cursor"]), 1);
    assert_eq!(count(&["--agent", "nobody"]), 0);
    assert_eq!(
        count(&["--predicate", "package-manager"]),
        2,
        "aliases apply"
    );
    assert_eq!(count(&["--predicate", "test_runner"]), 1);
    assert_eq!(count(&["--subject", U]), 3);
    assert_eq!(count(&["--subject", "user:7"]), 0);
    assert_eq!(count(&["--since", "1d"]), 2);
    assert_eq!(count(&["--since", "90m"]), 1);
    assert_eq!(count(&["--since", "4d"]), 3);
    let since = format_time(now - Duration::hours(3));
    assert_eq!(count(&["--since", &since]), 2);
    assert_eq!(
        count(&["--since", "4d", "--agent", "claude-code", "--predicate", PM]),
        1
    );
}

/// Deleting the identity keeps its read rows, content-free: the canary (value and raw words)
/// is in no database file and not in `reads`.
#[test]
fn read_rows_stay_content_free_after_the_identity_is_deleted() {
    let db = TestDb::new();
    let value = unique("金丝雀值🐤-value-");
    let raw = unique("用户原话🗣-raw-");
    db.write(U, PM, "pnpm", "global", "s:g");
    db.write_with(
        (U, PM),
        &value,
        LEGACY,
        "thread:23/message:14",
        &["--raw", &raw],
    );
    let mut store = open_store(&db.path);
    for agent in ["claude-code", "cursor"] {
        let r = store
            .resolve_logged(
                U,
                PM,
                Some("legacy-dashboard"),
                None,
                Some(agent),
                Some("note"),
            )
            .unwrap();
        assert_eq!(r.value, Some(json!(value)));
    }
    let before_delete = Utc::now();
    drop(store);
    assert!(
        !find_on_disk(&db.path, &value).is_empty(),
        "the canary is on disk before the delete (else this test proves nothing)"
    );

    db.delete(U, PM, LEGACY);
    for canary in [&value, &raw] {
        let hits = find_on_disk(&db.path, canary);
        assert!(
            hits.is_empty(),
            "deleted content {canary:?} survives in {hits:?}"
        );
    }
    let out = db.run(&["reads", "--json"]).ok();
    let rows = as_array(out.json());
    assert_eq!(
        rows.len(),
        2,
        "read rows are kept after the delete: {rows:#?}"
    );
    for row in &rows {
        assert_read_row_shape(row);
        assert_eq!(
            (&row["scope"], &row["version"]),
            (&json!(LEGACY), &json!(1))
        );
    }
    let text = db.run(&["reads"]).ok();
    for canary in [&value, &raw] {
        assert_no_text(&out.stdout, canary, "reads --json after delete");
        assert_no_text(&text.stdout, canary, "reads after delete");
    }
    // As of a moment before the delete: it existed, without content.
    let store = open_store(&db.path);
    let r = store
        .resolve_at(U, PM, Some("legacy-dashboard"), None, before_delete)
        .unwrap();
    assert_eq!(r.scope.as_deref(), Some(LEGACY), "{r:#?}");
    assert_eq!(r.value, None);
    let text = serde_json::to_string(&r).unwrap();
    assert_no_text(&text, &value, "as-of after delete");
    drop(store);
    db.assert_check_ok();
}

/// The read log is subject to the retention policy: `gc --retention-days` drops older rows.
#[test]
fn gc_retention_applies_to_the_read_log() {
    gc_retention_applies_to_the_read_log_on(TestDb::new());
}

#[test]
fn gc_retention_applies_to_the_read_log_on_postgres() {
    on_postgres(gc_retention_applies_to_the_read_log_on);
}

fn gc_retention_applies_to_the_read_log_on(db: TestDb) {
    let now = Utc::now();
    db.write(U, PM, "pnpm", "global", "s:g");
    let mut store = open_any_store(&db);
    for (age, agent) in [
        (Duration::days(40), "old-agent"),
        (Duration::days(1), "new-agent"),
    ] {
        store.set_clock(Clock::Fixed(now - age)).unwrap();
        store
            .resolve_logged(U, PM, None, None, Some(agent), None)
            .unwrap();
    }
    drop(store);
    assert_eq!(reads(&db, &[]).len(), 2);
    db.json(&["gc", "--retention-days", "30", "--json"]);
    let rows = reads(&db, &[]);
    let agents: Vec<&str> = rows.iter().map(|r| r["agent"].as_str().unwrap()).collect();
    assert_eq!(
        agents,
        ["new-agent"],
        "reads older than the retention period are purged"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Rescope
// ---------------------------------------------------------------------------------------------

/// The incident of the first article, and its fix.
#[test]
fn rescope_fixes_the_wrong_tool_incident() {
    let db = TestDb::new();
    db.write_with(
        (U, PM),
        "pnpm",
        "global",
        "thread:17/message:86",
        &["--raw", "以后新前端项目默认用 pnpm"],
    );
    let seq = db.run(&["seq"]).ok().stdout.trim().to_string();
    let raw = "legacy-dashboard 这个仓库继续用 npm ci，别动 lockfile 🔒";
    let o = db.write_with(
        (U, PM),
        "npm",
        "global",
        "thread:23/message:14",
        &["--raw", raw, "--causal-seq", &seq],
    );
    assert_eq!(
        (&o["outcome"], &o["version"]),
        (&json!("superseded"), &json!(2))
    );
    // The incident: an agent in a new project gets npm (and the read is logged).
    assert_eq!(
        db.resolve(U, PM, &["--repo", "brand-new-app"])["value"],
        "npm"
    );
    let mut store = open_store(&db.path);
    let r = store
        .resolve_logged(
            U,
            PM,
            Some("brand-new-app"),
            None,
            Some("claude-code"),
            Some("ran npm install"),
        )
        .unwrap();
    assert_eq!(r.value, Some(json!("npm")));
    drop(store);
    std::thread::sleep(std::time::Duration::from_millis(5));

    let outs = rescope(&db, "global", LEGACY);
    assert_eq!(outs.len(), 2, "{outs:#?}");
    assert_eq!(
        (&outs[0]["outcome"], &outs[0]["scope"], &outs[0]["version"]),
        (&json!("inserted"), &json!(LEGACY), &json!(1))
    );
    assert_eq!(
        (&outs[1]["outcome"], &outs[1]["scope"], &outs[1]["version"]),
        (&json!("superseded"), &json!("global"), &json!(3))
    );

    let repo = db.list(&["--scope", LEGACY]);
    assert_eq!(repo.len(), 1, "{repo:#?}");
    assert_eq!(repo[0]["value"], "npm");
    assert_eq!(repo[0]["version"], 1);
    assert_eq!(
        repo[0]["source"], "thread:23/message:14",
        "original source kept"
    );
    assert_eq!(repo[0]["raw"], raw, "the user's words move with it");
    assert_eq!(
        repo[0]["causal_seq"].to_string(),
        seq,
        "the original causal_seq is kept"
    );
    let global = db.list(&["--scope", "global"]);
    assert_eq!(global.len(), 1);
    assert_eq!(
        (&global[0]["value"], &global[0]["version"]),
        (&json!("pnpm"), &json!(3))
    );
    assert_eq!(global[0]["source"], "thread:17/message:86");
    assert_eq!(global[0]["raw"], "以后新前端项目默认用 pnpm");

    // History intact: v1, v2, v3.
    let gh = db.history(U, PM, Some("global"));
    assert_eq!(
        sets(&gh),
        [(1, json!("pnpm")), (2, json!("npm")), (3, json!("pnpm"))]
    );
    let v2 = gh
        .iter()
        .find(|e| e["event"] == "set" && e["version"] == 2)
        .unwrap();
    assert_eq!(
        v2["raw"], raw,
        "history keeps the mis-scoped version as it was"
    );
    let reverted = one_event(&gh, "reverted");
    let rh = db.history(U, PM, Some(LEGACY));
    assert_eq!(sets(&rh), [(1, json!("npm"))]);
    let rescoped = one_event(&rh, "rescoped");
    // The two events point at each other.
    assert_eq!(rescoped["detail"]["from"], "global", "{rescoped:#}");
    assert_eq!(rescoped["detail"]["from_version"], 2);
    assert_eq!(rescoped["version"], 1);
    assert_eq!(reverted["detail"]["rescoped_to"], LEGACY, "{reverted:#}");
    assert_eq!(reverted["detail"]["moved_version"], 2);
    assert_eq!(reverted["version"], 3);
    assert_eq!(
        rescoped["at"], reverted["at"],
        "one transaction, one moment"
    );

    db.assert_check_ok();
    let r = db.resolve(U, PM, &["--repo", "brand-new-app"]);
    assert_eq!(
        (&r["value"], &r["scope"]),
        (&json!("pnpm"), &json!("global"))
    );
    let r = db.resolve(U, PM, &["--repo", "legacy-dashboard"]);
    assert_eq!((&r["value"], &r["scope"]), (&json!("npm"), &json!(LEGACY)));

    // After the fix, the logged read still explains what the agent saw then: global v2, npm.
    let rows = reads(&db, &["--agent", "claude-code"]);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (&rows[0]["scope"], &rows[0]["version"]),
        (&json!("global"), &json!(2))
    );
    let read_at = parse_time(rows[0]["at"].as_str().unwrap(), Utc::now()).unwrap();
    let store = open_store(&db.path);
    let then = store
        .resolve_at(U, PM, Some("brand-new-app"), None, read_at)
        .unwrap();
    assert_eq!(
        (then.value.clone(), then.scope.as_deref(), then.version),
        (Some(json!("npm")), Some("global"), Some(2)),
        "as of the read, the agent got the mis-scoped global npm"
    );
    let then = store
        .resolve_at(U, PM, Some("legacy-dashboard"), None, read_at)
        .unwrap();
    assert!(
        !considered(&then, LEGACY).found,
        "the repo rule did not exist before the rescope"
    );
    drop(store);

    // Moving it back into global is refused: the pnpm the fix brought back there is causally
    // newer. The sentence names the revert that brings it back on purpose — by number, since a
    // plain revert passes over a moved value (found by review: it named the plain one, which
    // was then refused) — and that command does it.
    let before = db.fingerprint();
    let advice = "`memscope revert --subject user:42 --predicate package_manager --scope global --to-version 2`";
    let refused = rescope_run(&db, LEGACY, "global");
    refused.fails_with(
        1,
        &[
            "stale",
            "nothing changed",
            "this value was moved out of global as its v2",
            advice,
        ],
    );
    assert_eq!(before, db.fingerprint());
    let args: Vec<&str> = advice
        .trim_matches('`')
        .split(' ')
        .skip(1)
        .chain(["--json"])
        .collect();
    let back = as_array(db.run(&args).ok().json());
    assert_eq!(
        (&back[0]["value"], &back[0]["reverted_to"]),
        (&json!("npm"), &json!(2)),
        "{back:#?}"
    );
}

/// Moving a moved value back where it came from is refused as stale (the value the fix
/// brought back is newer); the sentence names the numbered revert that brings it back, found in
/// the history of the move, on both backends.
#[test]
fn moving_a_value_back_names_the_version_it_was_moved_out_of() {
    moving_a_value_back_names_the_version_on(TestDb::new());
}

#[test]
fn moving_a_value_back_names_the_version_it_was_moved_out_of_on_postgres() {
    on_postgres(moving_a_value_back_names_the_version_on);
}

fn moving_a_value_back_names_the_version_on(db: TestDb) {
    db.write(U, PM, "pnpm 📦", "global", "thread:1");
    db.write(U, PM, "npm 仓库", "global", "thread:2");
    rescope(&db, "global", "repo:旧仓库");
    let before = db.fingerprint();
    rescope_run(&db, "repo:旧仓库", "global").fails_with(
        1,
        &[
            "stale",
            "this value was moved out of global as its v2",
            "--scope global --to-version 2`",
        ],
    );
    assert_eq!(before, db.fingerprint());
}

/// A move refused as stale into a scope whose newer value is its only version names no revert
/// (there is nothing earlier to revert to there): it says how to replace that value instead.
#[test]
fn a_stale_move_into_a_first_version_suggests_no_revert() {
    let db = TestDb::new();
    db.write(U, PM, "旧值 old", "global", "thread:1");
    db.write(U, PM, "newer 🆕", "repo:x", "thread:2");
    let before = db.fingerprint();
    let refused = rescope_run(&db, "global", "repo:x");
    refused.fails_with(
        1,
        &[
            "stale",
            "nothing changed",
            "repo:x keeps its newer value — to replace it with this one, write the value there again",
        ],
    );
    assert!(!refused.stderr.contains("revert"), "{refused:?}");
    assert_eq!(before, db.fingerprint());
    // With an earlier version there, the revert is named by number.
    db.write(U, PM, "newest 🆕", "repo:x", "thread:3");
    rescope_run(&db, "global", "repo:x").fails_with(
        1,
        &[
            "to make an earlier value current in repo:x again, revert to it by number",
            "--scope repo:x --to-version N",
        ],
    );
}

/// A mis-scoped value with no earlier version leaves FROM's current view (`removed`); a later
/// write to FROM takes the next version.
#[test]
fn rescope_of_a_first_version_removes_it_from_the_old_scope() {
    let db = TestDb::new();
    let value = "不执行任何安装命令 🚫";
    db.write(U, PM, value, "global", "thread:26/message:5");
    let outs = rescope(&db, "global", "task:check-lockfile-7");
    assert_eq!(
        (&outs[0]["outcome"], &outs[0]["scope"], &outs[0]["version"]),
        (
            &json!("inserted"),
            &json!("task:check-lockfile-7"),
            &json!(1)
        )
    );
    assert_eq!(
        (&outs[1]["outcome"], &outs[1]["scope"]),
        (&json!("removed"), &json!("global")),
        "{outs:#?}"
    );
    assert!(db.list(&["--scope", "global"]).is_empty());
    let gh = db.history(U, PM, Some("global"));
    let removed = one_event(&gh, "removed");
    assert_eq!(
        removed["value"],
        Value::Null,
        "a removal carries no content"
    );
    assert_eq!(removed["detail"]["rescoped_to"], "task:check-lockfile-7");
    assert_eq!(sets(&gh), [(1, json!(value))], "history keeps v1");
    assert!(
        !db.sql()
            .query_row("SELECT EXISTS (SELECT 1 FROM tombstones)", [], |r| r
                .get::<_, bool>(0))
            .unwrap(),
        "removal is no tombstone"
    );
    db.assert_check_ok();
    assert_eq!(
        db.resolve(U, PM, &["--task", "check-lockfile-7"])["value"],
        json!(value)
    );
    assert_eq!(db.resolve(U, PM, &["--repo", "web-app"])["found"], false);

    let o = db.write(U, PM, "pnpm", "global", "thread:30/message:1");
    assert_eq!(
        (&o["outcome"], &o["version"]),
        (&json!("inserted"), &json!(2))
    );
    db.assert_check_ok();
}

/// After a `removed`, the scope holds no record: a value moved back (with its own causal
/// number) or a causally older write is decided against nothing, and `check` agrees — the
/// database exports and imports (into a file and into PostgreSQL) with `list` identical.
#[test]
fn a_scope_emptied_by_a_rescope_takes_any_causal_number_and_check_agrees() {
    a_scope_emptied_by_a_rescope_takes_any_causal_number_and_check_agrees_on(TestDb::new());
}

#[test]
fn a_scope_emptied_by_a_rescope_takes_any_causal_number_and_check_agrees_on_postgres() {
    on_postgres(a_scope_emptied_by_a_rescope_takes_any_causal_number_and_check_agrees_on);
}

#[test]
fn a_value_moved_out_of_a_scope_never_comes_back_by_a_later_move_or_revert() {
    a_value_moved_out_of_a_scope_never_comes_back_by_a_later_move_or_revert_on(TestDb::new());
}

#[test]
fn a_value_moved_out_of_a_scope_never_comes_back_by_a_later_move_or_revert_on_postgres() {
    on_postgres(a_value_moved_out_of_a_scope_never_comes_back_by_a_later_move_or_revert_on);
}

/// Global held "pnpm 📦" then "npm ci" (v2), moved to the legacy repo: global went back to
/// v1's value (v3). Reverting global, or moving v3 on too, must not bring "npm ci" back into
/// global — the incident `rescope` fixed. After v3 moves on, global has nothing left (the
/// value v3 held was v1's, moved with it), so a later write reverts to nothing either; an
/// explicit `--to-version` still brings a moved value back on purpose.
fn a_value_moved_out_of_a_scope_never_comes_back_by_a_later_move_or_revert_on(db: TestDb) {
    db.write(U, PM, "pnpm 📦", "global", "s:1");
    db.write(U, PM, "npm ci", "global", "s:2");
    rescope(&db, "global", LEGACY);
    assert_eq!(db.list(&["--scope", "global"])[0]["value"], "pnpm 📦");

    let refused = revert_run(&db, "global", None);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("v3 holds the value of v1 again, and every other value before it was moved to another scope by a rescope"),
        "{refused:?}"
    );
    assert_eq!(db.list(&["--scope", "global"])[0]["value"], "pnpm 📦");

    let outs = rescope(&db, "global", "repo:web-app");
    assert_eq!(
        (&outs[1]["outcome"], &outs[1]["scope"]),
        (&json!("removed"), &json!("global")),
        "{outs:#?}"
    );
    assert_eq!(
        db.resolve(U, PM, &["--repo", "new-project"])["found"],
        false
    );

    db.write(U, PM, "yarn", "global", "s:3");
    let refused = revert_run(&db, "global", None);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert_eq!(db.list(&["--scope", "global"])[0]["value"], "yarn");

    let back = revert_run(&db, "global", Some("2"));
    assert_eq!(back.code, 0, "{back:?}");
    assert_eq!(db.list(&["--scope", "global"])[0]["value"], "npm ci");
    db.assert_check_ok();
}

#[test]
fn two_moves_in_a_row_leave_nothing_earlier_than_the_value_they_went_back_to() {
    two_moves_in_a_row_leave_nothing_earlier_than_the_value_they_went_back_to_on(TestDb::new());
}

#[test]
fn two_moves_in_a_row_leave_nothing_earlier_than_the_value_they_went_back_to_on_postgres() {
    on_postgres(two_moves_in_a_row_leave_nothing_earlier_than_the_value_they_went_back_to_on);
}

/// a, b; b moved out (global v3 = a, "the value of v1"); c; c moved out (global v5 = a, "the
/// value of v3"). v5 holds v1's value through v3: nothing came before it that was not moved,
/// so revert refuses and moving v5 on empties global.
fn two_moves_in_a_row_leave_nothing_earlier_than_the_value_they_went_back_to_on(db: TestDb) {
    db.write(U, PM, "a 甲", "global", "s:1");
    db.write(U, PM, "b", "global", "s:2");
    rescope(&db, "global", "repo:r1");
    db.write(U, PM, "c 🧪", "global", "s:3");
    let outs = rescope(&db, "global", "repo:r2");
    assert_eq!(outs[1]["value"], "a 甲", "{outs:#?}");
    let refused = revert_run(&db, "global", None);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("moved to another scope"),
        "{refused:?}"
    );
    let outs = rescope(&db, "global", "task:t1");
    assert_eq!(
        (&outs[1]["outcome"], &outs[1]["scope"]),
        (&json!("removed"), &json!("global")),
        "{outs:#?}"
    );
    assert!(db.list(&["--scope", "global"]).is_empty());
    db.assert_check_ok();
}

#[test]
fn a_rescope_typed_in_another_case_records_the_stored_spellings() {
    a_rescope_typed_in_another_case_records_the_stored_spellings_on(TestDb::new());
}

#[test]
fn a_rescope_typed_in_another_case_records_the_stored_spellings_on_postgres() {
    on_postgres(a_rescope_typed_in_another_case_records_the_stored_spellings_on);
}

/// `--scope Repo:Web-App --to REPO:Legacy-Dashboard` names the places stored as
/// `repo:web-app` and `repo:legacy-dashboard`: the events' details say those, as every other
/// column does, so a reader of history finds one place under one name.
fn a_rescope_typed_in_another_case_records_the_stored_spellings_on(db: TestDb) {
    db.write(U, "install_command", "npm ci", LEGACY, "s:0");
    db.write(U, PM, "npm", "repo:web-app", "s:1");
    rescope(&db, "repo:Web-App", "repo:Legacy-Dashboard");
    let events = as_array(db.json(&["history", "--subject", U, "--predicate", PM, "--json"]));
    let detail = |kind: &str| {
        events
            .iter()
            .find(|e| e["event"] == kind)
            .map(|e| e["detail"].clone())
            .unwrap_or_else(|| panic!("a {kind} event: {events:#?}"))
    };
    assert_eq!(detail("rescoped")["from"], json!("repo:web-app"));
    assert_eq!(detail("removed")["rescoped_to"], json!(LEGACY));
    assert!(
        events
            .iter()
            .all(|e| e["scope"] == json!("repo:web-app") || e["scope"] == json!(LEGACY)),
        "{events:#?}"
    );
    db.assert_check_ok();
}

fn a_scope_emptied_by_a_rescope_takes_any_causal_number_and_check_agrees_on(db: TestDb) {
    let value = "仓库专用 📦";
    db.write_with(
        (U, PM),
        value,
        "repo:旧仓库",
        "s:1",
        &["--causal-seq", "50"],
    );
    rescope(&db, "repo:旧仓库", "task:修-1");
    // Back where it was, with its own causal number 50: v2 after v1's 50.
    let outs = rescope(&db, "task:修-1", "repo:旧仓库");
    assert_eq!(
        (&outs[0]["outcome"], &outs[0]["version"]),
        (&json!("inserted"), &json!(2)),
        "{outs:#?}"
    );
    db.assert_check_ok();
    // Another identity emptied the same way, then a causally older write into it: there is
    // nothing to be older than.
    let f = "formatter";
    db.write_with(
        (U, f),
        "biome",
        "repo:旧仓库",
        "s:2",
        &["--causal-seq", "60"],
    );
    db.run(&args_for(
        "rescope",
        U,
        f,
        &["--scope", "repo:旧仓库", "--to", "task:修-1"],
    ))
    .ok();
    let o = db.write_with(
        (U, f),
        "prettier",
        "repo:旧仓库",
        "s:3",
        &["--causal-seq", "30"],
    );
    assert_eq!(
        (&o["outcome"], &o["version"]),
        (&json!("inserted"), &json!(2)),
        "{o:#}"
    );
    db.assert_check_ok();
    let dump = db.sibling("emptied.jsonl");
    db.run(&["export", "--out", dump.to_str().unwrap()]).ok();
    let (fresh, pg) = (TestDb::named("moved.db"), postgres_test_db());
    for dst in std::iter::once(&fresh).chain(pg.as_ref().map(|(d, _)| d)) {
        dst.run(&["import", dump.to_str().unwrap()]).ok();
        dst.assert_check_ok();
        assert_eq!(dst.list(&[]), db.list(&[]));
    }
}

#[test]
fn rescope_into_a_tombstoned_identity_is_refused_and_changes_nothing() {
    let db = global_versions("pnpm", "npm");
    db.write(U, PM, "npm", LEGACY, "s:r");
    db.delete(U, PM, LEGACY);
    assert_unchanged_by(&db, "a refused rescope", || {
        let r = rescope_run(&db, "global", LEGACY);
        r.fails_with(1, &["legacy-dashboard", "restore"]);
        assert!(
            r.stderr.contains("deleted") || r.stderr.contains("tombstone"),
            "{}",
            r.stderr
        );
    });
    assert_eq!(db.list(&["--scope", "global"])[0]["value"], "npm");
    db.assert_check_ok();
}

/// The target already holds the same value: a confirmation there, not a second record.
#[test]
fn rescope_onto_the_same_value_confirms_instead_of_duplicating() {
    let db = TestDb::new();
    db.write(U, PM, "pnpm 📦", "global", "s:1");
    db.write(U, PM, "NPM  ci", LEGACY, "s:r");
    db.write(U, PM, " npm CI ", "global", "s:2");
    let outs = rescope(&db, "global", LEGACY);
    assert_eq!(
        (&outs[0]["outcome"], &outs[0]["version"]),
        (&json!("confirmed"), &json!(1)),
        "{outs:#?}"
    );
    assert_eq!(
        (&outs[1]["outcome"], &outs[1]["version"]),
        (&json!("superseded"), &json!(3))
    );
    let repo = db.list(&["--scope", LEGACY]);
    assert_eq!(repo.len(), 1);
    assert_eq!(repo[0]["value"], "NPM  ci", "the first spelling stays");
    assert_eq!(repo[0]["version"], 1);
    let rh = db.history(U, PM, Some(LEGACY));
    assert_eq!(sets(&rh).len(), 1, "no second version: {rh:#?}");
    assert_eq!(one_event(&rh, "rescoped")["detail"]["outcome"], "confirmed");
    assert_eq!(db.sql_i64("SELECT count(*) FROM memories"), 2);
    assert_eq!(db.list(&["--scope", "global"])[0]["value"], "pnpm 📦");
    db.assert_check_ok();
}

/// The incident's repair after retention purged the value before the mis-scoped one: the
/// rescope still moves the value out of global, and global, with no earlier value left to go
/// back to, leaves the current view — `removed`, saying why — as when there was none. A revert
/// of global is still refused (below): it has nothing to write.
fn rescope_after_retention_purged_the_earlier_value_on(db: TestDb) {
    db.write(U, PM, "pnpm 📦", "global", "s:1");
    db.write(U, PM, "npm ✨", "global", "s:2");
    let mut store = open_any_store(&db);
    store
        .set_clock(Clock::Fixed(Utc::now() + Duration::days(400)))
        .unwrap();
    assert!(store.gc(Some(30), None).unwrap().purged_events >= 1);
    drop(store);
    let outs = rescope(&db, "global", LEGACY);
    assert_eq!(
        (&outs[0]["outcome"], &outs[0]["version"], &outs[0]["value"]),
        (&json!("inserted"), &json!(1), &json!("npm ✨")),
        "{outs:#?}"
    );
    assert_eq!(
        (&outs[1]["outcome"], &outs[1]["version"]),
        (&json!("removed"), &json!(2)),
        "{outs:#?}"
    );
    let reason = outs[1]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("v1") && reason.contains("purged"),
        "{reason}"
    );
    assert!(db.list(&["--scope", "global"]).is_empty());
    assert_eq!(db.list(&["--scope", LEGACY])[0]["value"], "npm ✨");
    let elsewhere = db.json(&args_for("resolve", U, PM, &["--repo", "web", "--json"]));
    assert_eq!(elsewhere["found"], json!(false), "{elsewhere:#}");
    db.assert_check_ok();
}

#[test]
fn rescope_after_retention_purged_the_earlier_value() {
    rescope_after_retention_purged_the_earlier_value_on(TestDb::new());
}

#[test]
fn rescope_after_retention_purged_the_earlier_value_on_postgres() {
    on_postgres(rescope_after_retention_purged_the_earlier_value_on);
}

/// Half-way failure injected with a trigger (a foreign client's raw SQL) that refuses the
/// `reverted` event, the very last insert of a rescope. Nothing changes; without the trigger the
/// same command succeeds.
#[test]
fn rescope_failing_at_its_last_step_changes_nothing() {
    let db = global_versions("pnpm", "npm 🧨");
    let add = python(
        "import sqlite3, sys\n\
         c = sqlite3.connect(sys.argv[1])\n\
         c.execute(\"CREATE TRIGGER inject_failure BEFORE INSERT ON history WHEN NEW.event = 'reverted' \
         BEGIN SELECT RAISE(ABORT, 'injected failure for the atomicity test'); END\")\n\
         c.commit()\n",
        &[db.path_str()],
    );
    assert_eq!(add.code, 0, "{add:?}");
    assert_unchanged_by(&db, "a failed rescope", || {
        let r = rescope_run(&db, "global", LEGACY);
        assert_eq!(r.code, 1, "{r:?}");
        assert!(r.stderr.contains("injected failure"), "{}", r.stderr);
    });
    db.assert_check_ok();

    let drop_it = python(
        "import sqlite3, sys\n\
         c = sqlite3.connect(sys.argv[1])\n\
         c.execute('DROP TRIGGER inject_failure')\n\
         c.commit()\n",
        &[db.path_str()],
    );
    assert_eq!(drop_it.code, 0, "{drop_it:?}");
    let outs = rescope(&db, "global", LEGACY);
    assert_eq!(outs[0]["outcome"], "inserted");
    assert_eq!(db.list(&["--scope", LEGACY])[0]["value"], "npm 🧨");
    db.assert_check_ok();
}

// ---------------------------------------------------------------------------------------------
// 5. Revert
// ---------------------------------------------------------------------------------------------

#[test]
fn revert_makes_an_earlier_value_current_as_a_new_version() {
    let db = TestDb::new();
    db.write_with(
        (U, PM),
        "豆包 🫘",
        "global",
        "s:1",
        &["--raw", "默认用豆包"],
    );
    db.write(U, PM, "npm", "global", "s:2");
    let outs = as_array(revert_run(&db, "global", None).ok().json());
    assert_eq!(outs.len(), 1);
    assert_eq!(
        (
            &outs[0]["outcome"],
            &outs[0]["version"],
            &outs[0]["reverted_to"]
        ),
        (&json!("superseded"), &json!(3), &json!(1)),
        "the outcome names the version it brought back: {outs:#?}"
    );
    let cur = db.list(&["--scope", "global"]);
    assert_eq!(
        (&cur[0]["value"], &cur[0]["version"]),
        (&json!("豆包 🫘"), &json!(3))
    );
    assert_eq!(cur[0]["raw"], "默认用豆包");
    let h = db.history(U, PM, Some("global"));
    assert_eq!(
        sets(&h),
        [
            (1, json!("豆包 🫘")),
            (2, json!("npm")),
            (3, json!("豆包 🫘"))
        ],
        "history keeps every earlier row"
    );
    assert_eq!(one_event(&h, "reverted")["detail"]["reverted_to"], 1);
    db.assert_check_ok();

    // --to-version N.
    let outs = as_array(revert_run(&db, "global", Some("2")).ok().json());
    assert_eq!(
        (&outs[0]["outcome"], &outs[0]["version"]),
        (&json!("superseded"), &json!(4))
    );
    assert_eq!(db.list(&["--scope", "global"])[0]["value"], "npm");
    let h = db.history(U, PM, Some("global"));
    assert_eq!(sets(&h).len(), 4);
    assert_eq!(
        sets(&h)[..3],
        [
            (1, json!("豆包 🫘")),
            (2, json!("npm")),
            (3, json!("豆包 🫘"))
        ]
    );
    db.assert_check_ok();

    // The current version or a later one, or no version at all: refused, nothing changes.
    assert_unchanged_by(&db, "refused reverts", || {
        // Version 0 is a usage error, refused before the database opens (exit 2).
        for (v, code, word) in [
            ("4", 1, "earlier"),
            ("9", 1, "earlier"),
            ("0", 2, "a version number from 1"),
        ] {
            let r = revert_run(&db, "global", Some(v));
            r.fails_with(code, &[word]);
            assert!(r.stdout.trim().is_empty(), "{r:?}");
        }
    });
    db.assert_check_ok();
}

#[test]
fn revert_to_purged_content_is_refused_in_one_sentence() {
    refused_on_purged_content("npm", "a refused revert", |db| {
        revert_run(db, "global", None).fails_with(1, &["purged", "v1"]);
        revert_run(db, "global", Some("1")).fails_with(1, &["purged"]);
    });
}

#[test]
fn revert_of_a_tombstoned_identity_is_refused() {
    let db = global_versions("pnpm", "npm");
    db.delete(U, PM, "global");
    assert_unchanged_by(&db, "a refused revert", || {
        revert_run(&db, "global", None).fails_with(1, &["deleted", "restore"]);
        revert_run(&db, "global", Some("1")).fails_with(1, &["deleted"]);
    });
    assert!(db.list(&[]).is_empty());
    db.assert_check_ok();
}

#[test]
fn after_a_delete_and_restore_the_first_value_has_no_earlier_one() {
    after_a_delete_and_restore_the_first_value_has_no_earlier_one_on(TestDb::new());
}

#[test]
fn after_a_delete_and_restore_the_first_value_has_no_earlier_one_on_postgres() {
    on_postgres(after_a_delete_and_restore_the_first_value_has_no_earlier_one_on);
}

/// A restore starts an identity afresh: the versions before the delete were destroyed, so the
/// value written after it has no earlier one. A revert says so; a rescope moves it out and the
/// old scope is left without a record (`removed`), as for a first version.
fn after_a_delete_and_restore_the_first_value_has_no_earlier_one_on(db: TestDb) {
    db.write(U, PM, "pnpm", "global", "s:1");
    db.write(U, PM, "npm", "global", "s:2");
    db.delete(U, PM, "global");
    db.run(&args_for("restore", U, PM, &["--scope", "global"]))
        .ok();
    let o = db.write(U, PM, "yarn 🧶", "global", "s:3");
    assert_eq!(o["version"], json!(4), "{o:#}");
    let before = db.fingerprint();
    revert_run(&db, "global", None).fails_with(
        1,
        &[
            "no earlier value",
            "v4 is the first since it was deleted and restored",
        ],
    );
    revert_run(&db, "global", Some("1")).fails_with(
        1,
        &["no version 1", "a delete destroys the versions before it"],
    );
    assert_eq!(before, db.fingerprint(), "a refused revert changed nothing");
    let outs = rescope(&db, "global", LEGACY);
    assert_eq!(
        (
            &outs[0]["outcome"],
            &outs[1]["outcome"],
            &outs[1]["version"]
        ),
        (&json!("inserted"), &json!("removed"), &json!(4)),
        "{outs:#?}"
    );
    let rows = db.list(&[]);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(
        (&rows[0]["scope"], &rows[0]["value"]),
        (&json!(LEGACY), &json!("yarn 🧶"))
    );
    // The next write to global starts at v5, against no current record.
    let o = db.write(U, PM, "bun", "global", "s:4");
    assert_eq!(
        (&o["outcome"], &o["version"]),
        (&json!("inserted"), &json!(5)),
        "{o:#}"
    );
    db.assert_check_ok();
}

/// Revert through the library lands as a new version and keeps every earlier row.
#[test]
fn library_revert_never_rewrites_history() {
    library_revert_never_rewrites_history_on(TestDb::new());
}

#[test]
fn library_revert_never_rewrites_history_on_postgres() {
    on_postgres(library_revert_never_rewrites_history_on);
}

fn library_revert_never_rewrites_history_on(db: TestDb) {
    let mut store = open_any_store(&db);
    put(
        &mut store,
        t(0),
        "global",
        json!({"tool": "pnpm", "备注": "默认"}),
        "s:1",
    );
    put(&mut store, t(60), "global", "npm", "s:2");
    let before: Vec<_> = store.history(U, PM, None).unwrap();
    store.set_clock(Clock::Fixed(t(120))).unwrap();
    let o = store.revert(&ident(U, PM, "global"), None).unwrap();
    assert_eq!((o.outcome, o.version), (OutcomeKind::Superseded, Some(3)));
    let after = store.history(U, PM, None).unwrap();
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            (
                b.id,
                &b.event,
                b.version,
                &b.value,
                &b.raw,
                &b.source,
                b.causal_seq,
                &b.at
            ),
            (
                a.id,
                &a.event,
                a.version,
                &a.value,
                &a.raw,
                &a.source,
                a.causal_seq,
                &a.at
            ),
            "an earlier row changed"
        );
    }
    assert!(after.len() > before.len());
    let r = as_of(&mut store, None, None, t(90));
    assert_eq!(r.value, Some(json!("npm")), "as of before the revert: v2");
    let r = as_of(&mut store, None, None, t(150));
    assert_eq!(r.value, Some(json!({"tool": "pnpm", "备注": "默认"})));
    assert_eq!(r.version, Some(3));
    let report = store.check(IntegrityMode::Quick).unwrap();
    assert!(report.ok, "{:?}", report.violations);
    let reads_now = store.reads(&ReadFilter::default()).unwrap();
    assert!(reads_now.is_empty(), "a revert is no read");
}

// ---------------------------------------------------------------------------------------------
// 6. Refusals as data
// ---------------------------------------------------------------------------------------------

/// Every rescope and revert refusal carries what its advice needs — the identity as stored,
/// the versions, the target and its tombstone, the outcome that refused and what would do it
/// instead — inside the error, its sentence unchanged: a front end with keys words the advice
/// its own way (the UI), one that prints shows the command line's.
#[test]
fn refusals_carry_their_fields() {
    refusals_carry_their_fields_on(TestDb::new());
}

#[test]
fn refusals_carry_their_fields_on_postgres() {
    on_postgres(refusals_carry_their_fields_on);
}

fn refusals_carry_their_fields_on(db: TestDb) {
    use memscope::store::{Instead, NothingEarlier, RescopeRefusal, RevertRefusal};
    let mut store = open_any_store(&db);
    let revert_refusal = |store: &mut AnyStore, id: &Identity, to: Option<i64>| {
        let e = store.revert(id, to).expect_err("refused");
        let r = RevertRefusal::of(&e).unwrap_or_else(|| panic!("no refusal: {e:#}"));
        assert_eq!(
            r.to_string(),
            format!("{e:#}"),
            "the sentence is the refusal's"
        );
        r.clone()
    };
    let rescope_refusal = |store: &mut AnyStore, predicate: &str, from: &str, to: &str| {
        let e = (store.rescope(U, predicate, &scope(from), &scope(to))).expect_err("refused");
        let r = RescopeRefusal::of(&e).unwrap_or_else(|| panic!("no refusal: {e:#}"));
        assert_eq!(
            r.to_string(),
            format!("{e:#}"),
            "the sentence is the refusal's"
        );
        r.clone()
    };
    let global = ident(U, PM, "global");
    put(&mut store, t(0), "global", "pnpm", "s:1");
    put(&mut store, t(1), "global", "npm", "s:2");

    assert_eq!(
        revert_refusal(&mut store, &global, Some(0)),
        RevertRefusal::NoSuchVersion {
            id: global.clone(),
            version: 0
        }
    );
    assert_eq!(
        revert_refusal(&mut store, &global, Some(2)),
        RevertRefusal::NotEarlier {
            id: global.clone(),
            current: 2,
            to_version: 2
        }
    );
    let nowhere = ident(U, PM, "repo:nowhere");
    assert_eq!(
        revert_refusal(&mut store, &nowhere, None),
        RevertRefusal::NeverWritten {
            id: nowhere.clone()
        }
    );
    assert_eq!(
        rescope_refusal(&mut store, PM, "global", "global"),
        RescopeRefusal::SamePlace { id: global.clone() }
    );
    assert_eq!(
        rescope_refusal(&mut store, PM, "repo:nowhere", "global"),
        RescopeRefusal::NothingToMove { from: nowhere }
    );

    // The incident's fix: what came before global's pnpm was moved, and npm cannot move back.
    store.set_clock(Clock::Fixed(t(2))).expect("the clock");
    store
        .rescope(U, PM, &Scope::Global, &scope(LEGACY))
        .expect("the fix");
    assert_eq!(
        revert_refusal(&mut store, &global, None),
        RevertRefusal::NothingEarlier {
            id: global.clone(),
            current: 3,
            because: NothingEarlier::Moved { holds: Some(1) }
        }
    );
    match rescope_refusal(&mut store, PM, LEGACY, "global") {
        RescopeRefusal::TargetRefused {
            to,
            outcome,
            reason,
            instead,
        } => {
            assert_eq!(to, global);
            assert_eq!(outcome, OutcomeKind::Stale);
            assert!(reason.contains("causal_seq"), "{reason}");
            assert_eq!(instead, Some(Instead::RevertTo { version: 2 }));
        }
        other => panic!("{other:?}"),
    }

    // A deleted target, and a revert of it.
    put(&mut store, t(3), "repo:old-app", "yarn", "s:3");
    delete_identity(&mut store, t(4), "repo:old-app");
    let old_app = ident(U, PM, "repo:old-app");
    assert_eq!(
        rescope_refusal(&mut store, PM, LEGACY, "repo:old-app"),
        RescopeRefusal::TargetDeleted {
            to: old_app.clone(),
            tombstone: 2
        }
    );
    assert_eq!(
        revert_refusal(&mut store, &old_app, None),
        RevertRefusal::Deleted { id: old_app }
    );

    // Restored: the versions before the delete are gone.
    store
        .restore(&ident(U, PM, "repo:old-app"))
        .expect("restore");
    put(&mut store, t(5), "repo:old-app", "bun", "s:4");
    let old_app = ident(U, PM, "repo:old-app");
    assert_eq!(
        revert_refusal(&mut store, &old_app, Some(1)),
        RevertRefusal::NotInHistory {
            id: old_app.clone(),
            version: 1
        }
    );
    assert_eq!(
        revert_refusal(&mut store, &old_app, None),
        RevertRefusal::NothingEarlier {
            id: old_app,
            current: 3,
            because: NothingEarlier::Restored
        }
    );

    // A causally newer value in the target: its only version, or one of several.
    let editor = |store: &mut AnyStore, at: i64, scope_text: &str, value: &str| {
        store.set_clock(Clock::Fixed(t(at))).expect("the clock");
        (store.write(&req(U, "editor", json!(value), scope_text, "s:e"))).expect("write");
    };
    editor(&mut store, 10, "global", "vim");
    editor(&mut store, 11, "repo:one", "emacs");
    editor(&mut store, 12, "repo:two", "helix");
    editor(&mut store, 13, "repo:two", "zed");
    for (target, instead) in [
        ("repo:one", Instead::WriteAgain),
        ("repo:two", Instead::RevertByNumber),
    ] {
        match rescope_refusal(&mut store, "editor", "global", target) {
            RescopeRefusal::TargetRefused {
                to,
                outcome,
                instead: got,
                ..
            } => {
                assert_eq!(to, ident(U, "editor", target));
                assert_eq!(outcome, OutcomeKind::Stale);
                assert_eq!(got, Some(instead), "{target}");
            }
            other => panic!("{target}: {other:?}"),
        }
    }
    let report = store.check(IntegrityMode::Quick).unwrap();
    assert!(report.ok, "{:?}", report.violations);
}
