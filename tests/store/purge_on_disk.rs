//! Deletion destroys the bytes (README, "delete"): canary strings placed in `raw`, in a
//! superseded value, in a stale event, in a confirmation, in a pending item and in the note of
//! an agent's read appear in no database file
//! (`.db`, `-wal`, `-shm`) after the delete — and are found there before it, so these tests can
//! fail.

use crate::support::*;
use memscope::{DeleteTarget, Identity, OutcomeKind, Scope};
use serde_json::json;

const U: &str = "user:42";
const PM: &str = "package_manager";

struct Canaries {
    raw: String,
    superseded: String,
    stale: String,
    confirmed: String,
    pending: String,
    long: String,
    note: String,
}

impl Canaries {
    fn new() -> Canaries {
        Canaries {
            raw: unique("canary-raw-"),
            superseded: unique("金丝雀-旧值-old-"),
            stale: unique("canary-stale-🐤-"),
            confirmed: unique("确认-canary-"),
            pending: unique("待定金丝雀-pending-"),
            long: unique("长金丝雀-overflow-"),
            note: unique("读日志-note-canary-"),
        }
    }

    fn all(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("raw", &self.raw),
            ("superseded value", &self.superseded),
            ("stale event", &self.stale),
            ("confirmation raw", &self.confirmed),
            ("pending item", &self.pending),
            ("100 KB superseded value", &self.long),
            ("read-log note", &self.note),
        ]
    }
}

/// A new database with every canary written through the CLI: raw text, a superseded value, a
/// stale replay, a confirmation, a pending item naming the scope, and a 100 KB value (overflow
/// pages).
fn planted_with_cli() -> (TestDb, Canaries) {
    let db = TestDb::new();
    let c = Canaries::new();
    let out = db.write_with(
        (U, PM),
        &format!("pnpm {}", c.superseded),
        "global",
        "thread:17/message:86",
        &[
            "--raw",
            &format!("以后新建前端项目，默认用 pnpm。{}", c.raw),
        ],
    );
    assert_eq!(out["outcome"], "inserted");
    let out = db.write_with(
        (U, PM),
        &format!("PNPM {}", c.superseded.to_uppercase()),
        "global",
        "thread:19/message:3",
        &["--raw", &format!("还是 pnpm {}", c.confirmed)],
    );
    assert_eq!(out["outcome"], "confirmed");
    let out = db.write(U, PM, "npm", "global", "thread:30/message:2");
    assert_eq!(out["outcome"], "superseded");
    let out = db.write_with(
        (U, PM),
        &format!("bower {}", c.stale),
        "global",
        "thread:2/message:1",
        &["--causal-seq", "1", "--raw", &c.stale],
    );
    assert_eq!(out["outcome"], "stale");
    let out = ask_npm_marked(&db, &c.pending, "global,repo:web-app");
    assert_eq!(out["outcome"], "pending");
    let long = long_text(100 * 1024, &c.long);
    let r = db.run(&args_for(
        "write",
        U,
        PM,
        &[
            "--value",
            &long,
            "--scope",
            "repo:legacy-dashboard",
            "--source",
            "thread:23/message:14",
            "--json",
        ],
    ));
    assert_eq!(r.ok().json()["outcome"], "inserted");
    let out = db.write(
        U,
        PM,
        "npm ci",
        "repo:legacy-dashboard",
        "thread:23/message:15",
    );
    assert_eq!(out["outcome"], "superseded");
    // An agent's note repeats what it was told, in the repository (its chain has global too).
    db.run(&args_for(
        "resolve",
        U,
        PM,
        &[
            "--repo",
            "legacy-dashboard",
            "--log",
            "--agent",
            "claude-code",
            "--note",
            &format!("installs with npm ci {}", c.note),
        ],
    ))
    .ok();
    // A neighbour that must survive the delete.
    db.write(U, "formatter", "biome", "global", "thread:27/message:11");
    (db, c)
}

#[track_caller]
fn assert_present(db: &TestDb, c: &Canaries) {
    for (what, canary) in c.all() {
        assert!(
            !find_on_disk(&db.path, canary).is_empty(),
            "the {what} canary should be on disk before the delete (else this test proves nothing)"
        );
    }
}

#[track_caller]
fn assert_gone(db: &TestDb, c: &Canaries) {
    let mut leaks = Vec::new();
    for (what, canary) in c.all() {
        for hit in find_on_disk(&db.path, canary) {
            leaks.push(format!("{what} canary {canary:?} in {hit}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "deleted content is still on disk:\n{}",
        leaks.join("\n")
    );
}

/// The story's ambiguous "以后都用 npm" (thread 31), value and words marked with `canary`, asked
/// between `candidates`; returns the outcome.
fn ask_npm_marked(db: &TestDb, canary: &str, candidates: &str) -> serde_json::Value {
    let (value, raw) = (format!("npm {canary}"), format!("以后都用 npm {canary}"));
    db.write_ambiguous(U, PM, &value, candidates, "thread:31/message:2", &raw)
}

#[test]
fn deleting_a_predicate_leaves_its_content_in_no_database_file() {
    let (db, c) = planted_with_cli();
    assert_present(&db, &c);

    let report = db.json(&args_for(
        "delete",
        U,
        PM,
        &["--yes", "--reason", "用户要求删除", "--json"],
    ));
    assert_eq!(report["purged_pending"], 1, "{report:#}");
    assert_eq!(report["purged_notes"], 1, "{report:#}");
    assert_gone(&db, &c);
    // The read itself stays in the log, without its words.
    let reads = as_array(db.json(&["reads", "--json"]));
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert!(reads[0]["note"].is_null(), "{reads:?}");

    // A write to the tombstone carrying a fresh canary is rejected and stores none of it.
    let late = unique("复活金丝雀-");
    let out = db.write_with((U, PM), &late, "global", "thread:50", &["--raw", &late]);
    assert_eq!(out["outcome"], "rejected");
    assert!(find_on_disk(&db.path, &late).is_empty());
    assert_gone(&db, &c);

    assert_eq!(db.list(&[]).len(), 1, "the neighbour survives");
    db.assert_check_ok();
}

#[test]
fn deleting_one_identity_purges_the_pending_items_that_name_it() {
    let (db, c) = planted_with_cli();
    db.delete(U, PM, "global");
    // Everything of the global identity, including the pending item naming it, is gone …
    for (what, canary) in c.all() {
        if what.starts_with("100 KB") {
            continue;
        }
        assert_not_on_disk(
            &db.path,
            canary,
            &format!("after the identity delete, the {what} canary"),
        );
    }
    // … while the repo identity was not deleted and keeps its history.
    assert!(!find_on_disk(&db.path, &c.long).is_empty());
    assert_eq!(db.list(&["--scope", "repo:legacy-dashboard"]).len(), 1);
    db.assert_check_ok();
}

#[test]
fn deleting_a_whole_subject_leaves_nothing_on_disk() {
    let (db, c) = planted_with_cli();
    let coffee = unique("燕麦拿铁☕-");
    db.write_with(
        (U, "咖啡"),
        &coffee,
        "global",
        "thread:20",
        &["--raw", &coffee],
    );
    db.write("user:7", PM, "yarn", "global", "thread:44");
    assert!(!find_on_disk(&db.path, &coffee).is_empty());

    let report = db.json(&["delete", "--yes", "--subject", U, "--json"]);
    let scopes = report["tombstoned"].as_array().unwrap().len();
    assert_eq!(
        scopes, 5,
        "package_manager at global, the repo and the place the pending item offered, formatter, coffee: {report:#}"
    );
    assert_gone(&db, &c);
    assert!(find_on_disk(&db.path, &coffee).is_empty());
    assert_eq!(db.list(&[]).len(), 1, "another subject is untouched");
    db.assert_check_ok();
}

/// The same through the library, with the writer still open: the WAL is truncated so the bytes
/// are gone while memscope keeps running.
#[test]
fn library_delete_purges_while_the_store_stays_open() {
    let db = TestDb::new();
    let c = Canaries::new();
    let mut store = open_store(&db.path);
    let mut w = req(
        U,
        PM,
        json!(format!("pnpm {}", c.superseded)),
        "global",
        "s:1",
    );
    w.raw = Some(c.raw.clone());
    store.write(&w).unwrap();
    let mut w = req(
        U,
        PM,
        json!(format!(" PNPM  {} ", c.superseded.to_uppercase())),
        "global",
        "s:2",
    );
    w.raw = Some(c.confirmed.clone());
    assert_eq!(store.write(&w).unwrap().outcome, OutcomeKind::Confirmed);
    store
        .write(&req(U, PM, json!("npm"), "global", "s:3"))
        .unwrap();
    let mut w = req(U, PM, json!(c.stale), "global", "s:4");
    w.causal_seq = Some(1);
    assert_eq!(store.write(&w).unwrap().outcome, OutcomeKind::Stale);
    let mut w = ambiguous_req(U, PM, json!(c.pending), &["repo:web-app", "global"], "s:5");
    w.raw = Some(c.pending.clone());
    assert_eq!(store.write(&w).unwrap().outcome, OutcomeKind::Pending);
    store
        .write(&req(
            U,
            PM,
            json!(long_text(100 * 1024, &c.long)),
            "global",
            "s:6",
        ))
        .unwrap();
    store
        .write(&req(U, PM, json!("npm again"), "global", "s:7"))
        .unwrap();
    store
        .resolve_logged(U, PM, Some("web-app"), None, Some("agent"), Some(&c.note))
        .unwrap();
    assert_present(&db, &c);

    let report = store
        .delete(
            &DeleteTarget::Identity(Identity {
                subject: U.into(),
                predicate: "pkg_manager".into(),
                scope: Scope::Global,
            }),
            Some("forget it"),
        )
        .unwrap();
    assert!(report.disk_purged, "{report:?}");
    assert_eq!(report.purged_pending, 1);
    assert_eq!(report.purged_versions, 4);
    // The store is still open: -wal and -shm exist and must hold nothing of it either.
    assert_gone(&db, &c);
    assert!(store.purge_debt().unwrap().is_none());
    drop(store);
    assert_gone(&db, &c);
}

/// A reader holding a read transaction blocks the WAL truncation: the delete still succeeds,
/// says the on-disk purge is pending, `check` reports the debt, and `gc` pays it once the
/// reader is gone.
#[test]
fn a_blocked_purge_is_recorded_and_paid_later() {
    let (db, c) = planted_with_cli();

    let script = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN")
n = c.execute("SELECT count(*) FROM history").fetchone()[0]
print("READY", n, flush=True)
sys.stdin.readline()
c.execute("COMMIT")
c.close()
"#;
    let mut reader = PyHolder::start(script, &db.path);
    let line = reader.line();
    assert!(line.starts_with("READY"), "python reader: {line:?}");

    let r = db.run(&args_for("delete", U, PM, &["--yes", "--json"]));
    assert_eq!(r.code, 0, "the delete itself succeeds: {r:?}");
    assert!(
        r.stderr.to_lowercase().contains("pending"),
        "the user is told the on-disk purge is pending: {:?}",
        r.stderr
    );
    assert!(db.list(&["--predicate", PM]).is_empty());
    let (_, report) = db.check();
    assert!(
        report["metrics"]["purge_debt_since"].is_string(),
        "check reports the debt: {report:#}"
    );

    reader.say("");
    let status = reader.child.wait().unwrap();
    assert!(status.success());

    db.run(&["gc"]).ok();
    let (code, report) = db.check();
    assert_eq!(code, 0, "{report:#}");
    assert!(
        report["metrics"]["purge_debt_since"].is_null(),
        "{report:#}"
    );
    assert_gone(&db, &c);
}

/// The user's words can live only in the pending queue (nothing was ever written to a scope).
/// Deleting the preference must still destroy them.
#[test]
fn deleting_a_preference_that_only_waits_in_the_pending_queue_destroys_it() {
    let db = TestDb::new();
    let canary = unique("只在队列里-queued-");
    let out = ask_npm_marked(&db, &canary, "global,repo:web-app");
    assert_eq!(out["outcome"], "pending");
    db.write(U, "formatter", "biome", "global", "thread:27");
    assert!(!find_on_disk(&db.path, &canary).is_empty());

    let r = db.run(&args_for("delete", U, PM, &["--yes", "--json"]));
    assert_eq!(
        r.code, 0,
        "deleting the package-manager preference must succeed while its only copy is a pending item: {r:?}"
    );
    assert_eq!(r.json()["purged_pending"], 1);
    assert!(db.pending(true).is_empty());
    assert_not_on_disk(&db.path, &canary, "deleted content");
}

/// After `delete --predicate`, no pending item of that predicate may survive to be resolved
/// later (which would write the deleted preference back), whatever scopes it names.
#[test]
fn a_predicate_delete_leaves_no_pending_item_of_that_predicate() {
    let db = TestDb::new();
    db.write(U, PM, "pnpm", "global", "thread:17");
    let canary = unique("别的仓库-other-repos-");
    let out = ask_npm_marked(&db, &canary, "repo:a,repo:b");
    let id = out["pending_id"].as_i64().unwrap().to_string();
    db.run(&["delete", "--yes", "--subject", U, "--predicate", PM])
        .ok();
    assert!(db.list(&["--predicate", PM]).is_empty());
    let resurrect = db.resolve_pending(&id, "repo:a");
    assert!(
        db.list(&["--predicate", PM]).is_empty(),
        "a pending item written after the delete brought the deleted preference back: {}",
        resurrect.stdout
    );
    assert_not_on_disk(&db.path, &canary, "deleted content");
}

/// Retention (`gc --retention-days`) purges old history content the same way: gone from disk,
/// current records intact.
#[test]
fn retention_gc_purges_old_history_content_from_disk() {
    use chrono::{Duration, Utc};
    use memscope::Clock;
    let db = TestDb::new();
    let old_raw = unique("四十天前-old-raw-");
    let old_value = unique("旧值-old-value-");
    let stale = unique("陈旧-stale-");
    let recent = unique("最近-recent-");
    let now = Utc::now();
    let mut store = open_store(&db.path);
    store.set_clock(Clock::Fixed(now - Duration::days(40)));
    let mut w = req(U, PM, json!(old_value), "global", "s:old");
    w.raw = Some(old_raw.clone());
    store.write(&w).unwrap();
    store.set_clock(Clock::Fixed(now - Duration::days(35)));
    let mut w = req(U, PM, json!(stale), "global", "s:stale");
    w.causal_seq = Some(1);
    assert_eq!(store.write(&w).unwrap().outcome, OutcomeKind::Stale);
    store.set_clock(Clock::Fixed(now - Duration::days(1)));
    let mut w = req(U, PM, json!("npm"), "global", "s:new");
    w.raw = Some(recent.clone());
    store.write(&w).unwrap();
    store.set_clock(Clock::System);
    drop(store);
    for c in [&old_raw, &old_value, &stale, &recent] {
        assert!(!find_on_disk(&db.path, c).is_empty());
    }

    let r = db.json(&["gc", "--retention-days", "30", "--json"]);
    assert!(r["purged_events"].as_i64().unwrap() >= 2, "{r:#}");
    for c in [&old_raw, &old_value, &stale] {
        assert_not_on_disk(&db.path, c, "old content past retention");
    }
    assert!(
        !find_on_disk(&db.path, &recent).is_empty(),
        "recent content is kept"
    );
    let cur = db.list(&[]);
    assert_eq!(cur[0]["value"], "npm");
    assert_eq!(cur[0]["raw"], recent.as_str());
    db.assert_check_ok();
}

#[test]
fn a_delete_blanks_exactly_the_notes_that_can_have_seen_its_content() {
    let db = TestDb::new();
    db.write(U, PM, "pnpm", "global", "t:1");
    db.write(U, PM, "npm", "repo:legacy-dashboard", "t:2");
    db.write(U, "formatter", "biome", "global", "t:3");
    let read = |predicate: &str, repo: &str, note: &str| {
        db.run(&args_for(
            "resolve",
            U,
            predicate,
            &["--repo", repo, "--log", "--agent", "a", "--note", note],
        ))
        .ok();
    };
    let in_repo = unique("在仓库里读到 npm-");
    let elsewhere = unique("web-app read pnpm-");
    let other = unique("formatter biome-");
    read(PM, "legacy-dashboard", &in_repo);
    read(PM, "web-app", &elsewhere);
    read("formatter", "legacy-dashboard", &other);

    // The preview counts what the delete will blank.
    let target = DeleteTarget::Identity(Identity {
        subject: U.into(),
        predicate: PM.into(),
        scope: Scope::Repo("legacy-dashboard".into()),
    });
    let preview = open_store(&db.path).delete_preview(&target).unwrap();
    assert_eq!(preview.read_notes, 1, "{preview:?}");

    let report = db.delete(U, PM, "repo:legacy-dashboard");
    assert_eq!(report["purged_notes"], 1, "{report:#}");
    assert!(find_on_disk(&db.path, &in_repo).is_empty());
    // A read in another repository never saw repo:legacy-dashboard; another predicate neither.
    assert!(!find_on_disk(&db.path, &elsewhere).is_empty());
    assert!(!find_on_disk(&db.path, &other).is_empty());

    // Deleting the global identity reaches every read of the predicate.
    let report = db.delete(U, PM, "global");
    assert_eq!(report["purged_notes"], 1, "{report:#}");
    assert!(find_on_disk(&db.path, &elsewhere).is_empty());
    assert!(!find_on_disk(&db.path, &other).is_empty());
    assert_eq!(
        as_array(db.json(&["reads", "--json"])).len(),
        3,
        "the reads stay"
    );
    db.assert_check_ok();
}

#[test]
fn a_value_a_rescope_restored_and_the_next_moved_is_destroyed_where_it_was_first_written() {
    // Found by the reliability test of rescopes racing deletes (and no race is needed): the
    // first rescope moves v2 and restores v1's value as v3; the second moves v3. A delete of
    // the repository blanked v2 and v3 and kept the value in v1, where it was first written.
    let db = TestDb::new();
    let first = unique("最早的金丝雀-🐤-");
    let second = unique("second-canary-");
    // The sources too: free text a model wrote, which may repeat what the user deleted.
    let (first_source, second_source) = (unique("来源-🧵-"), unique("source-"));
    db.write_with(
        (U, PM),
        first.as_str(),
        "global",
        &first_source,
        &["--raw", &format!("说 {first}")],
    );
    db.write(U, PM, &second, "global", &second_source);
    let rescope = args_for(
        "rescope",
        U,
        PM,
        &["--scope", "global", "--to", "repo:web-app"],
    );
    db.run(&rescope).ok();
    db.run(&rescope).ok();
    assert!(
        db.list(&["--scope", "global"]).is_empty(),
        "global left the view"
    );
    let done = db.json(&args_for(
        "delete",
        U,
        PM,
        &["--scope", "repo:web-app", "--yes", "--json"],
    ));
    assert_eq!(done["blanked_copies"], 3, "{done:#}");
    for canary in [&first, &second, &first_source, &second_source] {
        assert!(find_on_disk(&db.path, canary).is_empty(), "{canary} stays");
    }
    db.assert_check_ok();
}

#[test]
fn deleting_a_rescoped_memory_destroys_the_copies_its_first_scope_kept() {
    // Found by review: the README's repair (rescope the mis-scoped value, then delete it) left
    // the value and words in the global `set` event the rescope moved them from — in
    // `history`, the UI's timeline and the file — after a dry run that said no copy stays.
    let db = TestDb::new();
    let canary = unique("搬走的金丝雀-🚚-");
    let words = format!("这个仓库保留 package-lock.json {canary}");
    db.write(U, PM, "pnpm", "global", "thread:17");
    db.write_with((U, PM), "npm", "global", "thread:23", &["--raw", &words]);
    db.run(&args_for(
        "rescope",
        U,
        PM,
        &["--scope", "global", "--to", "repo:legacy-dashboard"],
    ))
    .ok();
    // The global default back at npm for a while (a revert's copy), then pnpm again.
    db.run(&args_for(
        "revert",
        U,
        PM,
        &["--scope", "global", "--to-version", "2"],
    ))
    .ok();
    db.run(&args_for(
        "revert",
        U,
        PM,
        &["--scope", "global", "--to-version", "1"],
    ))
    .ok();
    assert!(!find_on_disk(&db.path, &canary).is_empty(), "planted");
    let delete = args_for("delete", U, PM, &["--scope", "repo:legacy-dashboard"]);
    let mut dry = delete.clone();
    dry.push("--dry-run");
    let said = db.run(&dry).ok();
    assert!(
        format!("{}{}", said.stdout, said.stderr)
            .contains("• blank 2 history events a rescope left where the value was first written"),
        "{said:?}"
    );
    let mut yes = delete.clone();
    yes.push("--yes");
    let done = db.run(&yes).ok();
    assert!(
        done.stdout
            .contains("blanked 2 history events a rescope had left"),
        "{}",
        done.stdout
    );
    assert!(
        find_on_disk(&db.path, &canary).is_empty(),
        "no copy stays in any file"
    );
    db.assert_check_ok();
    // The global memory itself stays: its current record and the events of its versions.
    assert_eq!(db.list(&[]).len(), 1);

    // A database an earlier release left so (the words back in the global event, put there by
    // a raw client through memscope's purge gate): check names it, and the delete, run again
    // on the deleted memory, blanks it.
    let r = python(
        "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nc.create_function('memscope_purge_gate', 0, lambda: 1)\nc.execute(\"UPDATE history SET raw = ? WHERE scope = 'global' AND version = 2 AND event = 'set'\", (sys.argv[2],))\nc.commit()\n",
        &[db.path_str(), &words],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (code, report) = db.check();
    assert_eq!(code, 1, "{report:#}");
    let text = report.to_string();
    assert!(
        text.contains("repo:legacy-dashboard is deleted, but 1 history event(s) of version 2 @ global, which a rescope moved into it, still hold its content"),
        "{report:#}"
    );
    // Its statement says what it does, and nothing it does not (no "tombstone 0 identities",
    // no "nothing of it is left" beside the event it blanks).
    let said = db.run(&dry).ok();
    let statement = format!("{}{}", said.stdout, said.stderr);
    for words in [
        "• skip 1 identity already deleted (its versions are gone already)\n    user:42 · package_manager @ repo:legacy-dashboard\n",
        "• blank 1 history event a rescope left where the value was first written",
    ] {
        assert!(statement.contains(words), "{words}: {statement}");
    }
    for words in ["tombstone 0", "remove 0", "destroy 0", "drop 0", "blank 0"] {
        assert!(!statement.contains(words), "{words}: {statement}");
    }
    let again = db.run(&yes).ok();
    assert_eq!(
        again.stdout.lines().collect::<Vec<_>>(),
        [
            "already deleted user:42 · package_manager @ repo:legacy-dashboard (tombstone v2): its versions were gone already",
            "blanked 1 history event a rescope had left where the value was first written",
        ],
        "{}",
        again.stdout
    );
    assert!(find_on_disk(&db.path, &canary).is_empty());
    db.assert_check_ok();
}

#[test]
fn a_predicate_delete_counts_no_rescope_copy_of_a_scope_it_destroys_whole() {
    // The copy a rescope left at global is global's history, which a delete of the whole
    // predicate destroys anyway: the statement counts it once, among the events destroyed.
    let db = TestDb::new();
    let canary = unique("整个谓词-🧹-");
    db.write_with((U, PM), "npm", "global", "thread:23", &["--raw", &canary]);
    db.run(&args_for(
        "rescope",
        U,
        PM,
        &["--scope", "global", "--to", "repo:legacy-dashboard"],
    ))
    .ok();
    let dry = db.json(&args_for("delete", U, PM, &["--dry-run", "--json"]));
    assert_eq!(dry["moved_copies"], 0, "{dry:#}");
    let done = db.json(&args_for("delete", U, PM, &["--yes", "--json"]));
    assert_eq!(done["blanked_copies"], 0, "{done:#}");
    assert!(find_on_disk(&db.path, &canary).is_empty());
    db.assert_check_ok();
}

/// A refused write's source is free text a model wrote — here it repeats the secret the user
/// deleted. A delete covering its identity leaves it in no file: of an identity deleted before,
/// the `rejected` event stays without it; of one live again, the whole history goes. Found on
/// disk before each delete, so the test can fail (it did, with the blanking taken out of the
/// delete: the already-deleted identity's canary stayed in the database file).
#[test]
fn a_delete_leaves_no_refused_writes_source_in_any_file() {
    let db = TestDb::new();
    let secret = |tag: &str| unique(&format!("拒绝的来源-{tag}-🤫-"));
    db.write(U, PM, "pnpm", "global", "thread:1");
    db.delete(U, PM, "global");

    // Already deleted: a refused write, then the delete again.
    let canary = secret("deleted");
    let source = format!("thread:9 用户说 {canary}");
    let refused = db.write(U, PM, "npm", "global", &source);
    assert_eq!(refused["outcome"], "rejected", "{refused:#}");
    assert!(!find_on_disk(&db.path, &canary).is_empty(), "planted");
    let report = db.delete(U, PM, "global");
    assert_eq!(report["tombstoned"], json!([]), "{report:#}");
    assert_eq!(report["already_deleted"][0]["version"], 2, "{report:#}");
    assert_eq!(report["blanked_sources"], 1, "{report:#}");
    assert_eq!(report["disk_purged"], true, "{report:#}");
    assert_not_on_disk(&db.path, &canary, "a refused write's source");
    let history = db.history(U, PM, Some("global"));
    assert_eq!(events(&history), ["deleted", "rejected"], "{history:#?}");
    assert!(history[1]["source"].is_null(), "{history:#?}");

    // Live again: restored and written after another refused write.
    let canary = secret("live");
    let refused = db.write(U, PM, "yarn", "global", &canary);
    assert_eq!(refused["outcome"], "rejected", "{refused:#}");
    db.run(&args_for("restore", U, PM, &["--scope", "global"]))
        .ok();
    assert_eq!(
        db.write(U, PM, "bun", "global", "thread:12")["outcome"],
        "inserted"
    );
    assert!(!find_on_disk(&db.path, &canary).is_empty(), "planted");
    let report = db.delete(U, PM, "global");
    assert_eq!(report["tombstoned"][0]["scope"], "global", "{report:#}");
    assert_not_on_disk(&db.path, &canary, "a refused write's source");
    db.assert_check_ok();
}

/// Retention blanks the sources of old events too — a superseded version's, a stale write's,
/// a confirmation's — but not the live memory's provenance: its own `set` event's source and
/// its latest confirmation's, which the record repeats (`check` stays clean). (With the
/// sources left out of retention's purge, the old ones stayed on disk.)
#[test]
fn retention_gc_blanks_old_sources_but_the_live_memorys_provenance() {
    use chrono::{Duration, Utc};
    use memscope::Clock;
    let db = TestDb::new();
    let src = |tag: &str| unique(&format!("来源-{tag}-📎-"));
    let (superseded, current, first_confirm, last_confirm, stale) = (
        src("superseded"),
        src("current"),
        src("first-confirm"),
        src("last-confirm"),
        src("stale"),
    );
    let now = Utc::now();
    let mut store = open_store(&db.path);
    let at = |store: &mut memscope::Store, days: i64| {
        store.set_clock(Clock::Fixed(now - Duration::days(days)));
    };
    at(&mut store, 40);
    store
        .write(&req(U, PM, json!("pnpm"), "global", &superseded))
        .unwrap();
    at(&mut store, 38);
    store
        .write(&req(U, PM, json!("npm"), "global", &current))
        .unwrap();
    for (days, source) in [(36, &first_confirm), (35, &last_confirm)] {
        at(&mut store, days);
        let out = store
            .write(&req(U, PM, json!("npm"), "global", source))
            .unwrap();
        assert_eq!(out.outcome, OutcomeKind::Confirmed);
    }
    at(&mut store, 34);
    let mut w = req(U, PM, json!("yarn"), "global", &stale);
    w.causal_seq = Some(1);
    assert_eq!(store.write(&w).unwrap().outcome, OutcomeKind::Stale);
    store.set_clock(Clock::System);
    drop(store);
    for s in [&superseded, &first_confirm, &stale] {
        assert!(!find_on_disk(&db.path, s).is_empty(), "planted {s}");
    }

    let r = db.json(&["gc", "--retention-days", "30", "--json"]);
    assert_eq!(r["disk_purged"], true, "{r:#}");
    for s in [&superseded, &first_confirm, &stale] {
        assert_not_on_disk(&db.path, s, "an old event's source past retention");
    }
    let history = db.history(U, PM, Some("global"));
    let sources: Vec<(&str, Option<&str>)> = history
        .iter()
        .map(|e| (e["event"].as_str().unwrap(), e["source"].as_str()))
        .collect();
    assert_eq!(
        sources,
        [
            ("set", None),
            ("set", Some(current.as_str())),
            ("confirmed", None),
            ("confirmed", Some(last_confirm.as_str())),
            ("stale", None),
        ],
        "{history:#?}"
    );
    let live = db.list(&[]);
    assert_eq!(live[0]["source"], current.as_str(), "{live:#?}");
    db.assert_check_ok();
    // Nothing left to blank: a second run touches no row.
    let r = db.json(&["gc", "--retention-days", "30", "--json"]);
    assert_eq!(r["purged_events"], 0, "{r:#}");
}
