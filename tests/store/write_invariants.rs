//! The four write-time invariants of the second seed article (唯一性, 因果单调, 删除单调, 语义归一),
//! on real databases: concurrent OS processes, causal sequence numbers, tombstones and
//! predicate normalization. Each test runs on a SQLite file and again on PostgreSQL
//! (`…_on_postgres`).

use crate::support::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Stdio};

const U: &str = "user:42";
const PM: &str = "package_manager";

fn spawn_write(db: &TestDb, value: &str, source: &str, extra: &[&str]) -> Child {
    let mut args = args_for(
        "write",
        U,
        PM,
        &[
            "--value", value, "--scope", "global", "--source", source, "--json",
        ],
    );
    args.extend_from_slice(extra);
    db.command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memscope write")
}

fn wait(child: Child) -> Run {
    let o = child.wait_with_output().expect("wait");
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The `set` events of the global identity: (version, causal_seq, source, value).
fn applied(db: &TestDb) -> Vec<(i64, i64, String, Value)> {
    db.history(U, PM, Some("global"))
        .iter()
        .filter(|e| e["event"] == "set")
        .map(|e| {
            (
                e["version"].as_i64().unwrap(),
                e["causal_seq"].as_i64().unwrap(),
                e["source"].as_str().unwrap().to_string(),
                e["value"].clone(),
            )
        })
        .collect()
}

/// [`applied`], asserted to read back in causal order (causal_seq increasing with the version).
fn applied_in_causal_order(db: &TestDb) -> Vec<(i64, i64, String, Value)> {
    let sets = applied(db);
    let seqs: Vec<i64> = sets.iter().map(|s| s.1).collect();
    assert_increasing(&seqs, "applied versions must read back in causal order");
    sets
}

/// 唯一性 under real concurrency: ten processes write the same identity at once with different
/// values. Exactly one current record, versions 1..10, every process accounted for, nobody sees
/// a busy error.
#[test]
fn concurrent_writer_processes_lose_nothing_and_keep_one_current_record() {
    concurrent_writer_processes_lose_nothing_and_keep_one_current_record_on(TestDb::new());
}

#[test]
fn concurrent_writer_processes_lose_nothing_and_keep_one_current_record_on_postgres() {
    on_postgres(concurrent_writer_processes_lose_nothing_and_keep_one_current_record_on);
}

fn concurrent_writer_processes_lose_nothing_and_keep_one_current_record_on(db: TestDb) {
    const N: usize = 10;
    db.init();
    let values: Vec<String> = (0..N).map(|i| format!("工具-{i} 🔧 tool-{i}")).collect();
    let children: Vec<Child> = (0..N)
        .map(|i| spawn_write(&db, &values[i], &format!("proc:{i}/写入"), &[]))
        .collect();
    let runs: Vec<Run> = children.into_iter().map(wait).collect();

    let mut by_version: BTreeMap<i64, usize> = BTreeMap::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r.code, 0, "process {i} failed: {r:?}");
        assert!(
            !r.stderr.to_lowercase().contains("busy") && !r.stderr.to_lowercase().contains("lock"),
            "process {i} surfaced a lock error: {}",
            r.stderr
        );
        let out = r.json();
        *kinds
            .entry(out["outcome"].as_str().unwrap().to_string())
            .or_default() += 1;
        assert_eq!(out["value"], values[i].as_str());
        let v = out["version"].as_i64().expect("version");
        assert!(
            by_version.insert(v, i).is_none(),
            "version {v} handed out twice"
        );
    }
    assert_eq!(
        kinds,
        BTreeMap::from([
            ("inserted".to_string(), 1),
            ("superseded".to_string(), N - 1)
        ])
    );
    assert_eq!(
        by_version.keys().copied().collect::<Vec<_>>(),
        (1..=N as i64).collect::<Vec<_>>(),
        "versions are contiguous"
    );

    assert_eq!(
        db.sql_i64("SELECT count(*) FROM memories WHERE subject = 'user:42' AND predicate = 'package_manager'"),
        1
    );
    let last = by_version[&(N as i64)];
    let current = db.list(&[]);
    assert_eq!(current.len(), 1);
    assert_eq!(current[0]["value"], values[last].as_str());
    assert_eq!(current[0]["version"], N as i64);

    // Every process's write is in history under the version it was told.
    let sets = applied_in_causal_order(&db);
    assert_eq!(sets.len(), N);
    for (version, _, source, value) in &sets {
        let i = by_version[version];
        assert_eq!(source, &format!("proc:{i}/写入"));
        assert_eq!(value, &json!(values[i]));
    }
    db.assert_check_ok();
}

/// Retried operations keep the causal_seq they were given when they started: ten processes
/// with pre-allocated sequence numbers race in reverse order. The highest number's value
/// stands; every other process is either applied or kept as a `stale` event.
#[test]
fn concurrent_writers_with_preallocated_seqs_end_on_the_causally_newest_value() {
    concurrent_writers_with_preallocated_seqs_end_on_the_causally_newest_value_on(TestDb::new());
}

#[test]
fn concurrent_writers_with_preallocated_seqs_end_on_the_causally_newest_value_on_postgres() {
    on_postgres(concurrent_writers_with_preallocated_seqs_end_on_the_causally_newest_value_on);
}

fn concurrent_writers_with_preallocated_seqs_end_on_the_causally_newest_value_on(db: TestDb) {
    const N: usize = 10;
    let seqs: Vec<i64> = (0..N).map(|_| db.seq()).collect();
    assert_increasing(&seqs, "seq is monotonic");
    // Launch the causally newest first, so the race really has to resolve by causal_seq.
    let children: Vec<(usize, Child)> = (0..N)
        .rev()
        .map(|i| {
            let seq = seqs[i].to_string();
            (
                i,
                spawn_write(
                    &db,
                    &format!("值-{i}"),
                    &format!("proc:{i}"),
                    &["--causal-seq", &seq],
                ),
            )
        })
        .collect();
    let mut outcomes: BTreeMap<usize, String> = BTreeMap::new();
    for (i, c) in children {
        let r = wait(c);
        assert_eq!(r.code, 0, "process {i}: {r:?}");
        let out = r.json();
        assert_eq!(out["causal_seq"], seqs[i]);
        outcomes.insert(i, out["outcome"].as_str().unwrap().to_string());
    }
    assert_ne!(outcomes[&(N - 1)], "stale", "{outcomes:?}");

    let current = db.list(&[]);
    assert_eq!(current.len(), 1);
    assert_eq!(current[0]["value"], format!("值-{}", N - 1));
    assert_eq!(current[0]["causal_seq"], seqs[N - 1]);

    let hist = db.history(U, PM, Some("global"));
    for (i, outcome) in &outcomes {
        let want_event = match outcome.as_str() {
            "inserted" | "superseded" => "set",
            "stale" => "stale",
            other => panic!("process {i}: unexpected outcome {other}"),
        };
        let hits: Vec<&Value> = hist
            .iter()
            .filter(|e| e["source"] == format!("proc:{i}").as_str())
            .collect();
        assert_eq!(hits.len(), 1, "process {i} in history: {hits:?}");
        assert_eq!(hits[0]["event"], want_event);
        assert_eq!(hits[0]["causal_seq"], seqs[*i]);
    }
    let sets = applied_in_causal_order(&db);
    let versions: Vec<i64> = sets.iter().map(|s| s.0).collect();
    assert_eq!(versions, (1..=sets.len() as i64).collect::<Vec<_>>());
    db.assert_check_ok();
}

/// Eight `apply` processes stream twenty writes each into the same identity.
#[test]
fn concurrent_apply_processes_account_for_every_line() {
    concurrent_apply_processes_account_for_every_line_on(TestDb::new());
}

#[test]
fn concurrent_apply_processes_account_for_every_line_on_postgres() {
    on_postgres(concurrent_apply_processes_account_for_every_line_on);
}

fn concurrent_apply_processes_account_for_every_line_on(db: TestDb) {
    const P: usize = 8;
    const L: usize = 20;
    db.init();
    let mut files = Vec::new();
    for p in 0..P {
        let path = db.sibling(&format!("batch-{p}.jsonl"));
        let mut text = String::new();
        for l in 0..L {
            text.push_str(
                &json!({
                    "subject": U, "predicate": PM, "scope": "global",
                    "value": format!("p{p}-l{l}-值"), "source": format!("apply:{p}:{l}"),
                })
                .to_string(),
            );
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        files.push(path);
    }
    let children: Vec<Child> = files
        .iter()
        .map(|f| {
            db.command(&["apply", f.to_str().unwrap()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut versions = BTreeSet::new();
    for (p, c) in children.into_iter().enumerate() {
        let r = wait(c);
        assert_eq!(r.code, 0, "apply {p}: {r:?}");
        assert!(!r.stderr.to_lowercase().contains("locked"), "{}", r.stderr);
        let lines = r.json_lines();
        assert_eq!(lines.len(), L);
        for (l, out) in lines.iter().enumerate() {
            assert_eq!(out["line"], l as i64 + 1);
            assert!(
                out["outcome"] == "inserted" || out["outcome"] == "superseded",
                "{out}"
            );
            assert!(versions.insert(out["version"].as_i64().unwrap()));
        }
    }
    assert_eq!(
        versions.into_iter().collect::<Vec<_>>(),
        (1..=(P * L) as i64).collect::<Vec<_>>()
    );
    let sets = applied(&db);
    assert_eq!(sets.len(), P * L);
    let sources: BTreeSet<&str> = sets.iter().map(|s| s.2.as_str()).collect();
    assert_eq!(sources.len(), P * L, "every line's write is in history");
    assert_eq!(db.list(&[]).len(), 1);
    db.assert_check_ok();
}

/// Agents start at the same moment on a machine where the database does not exist yet: write
/// commands create a missing database, so all of them must succeed.
#[test]
fn concurrent_writers_creating_the_database_all_succeed() {
    for round in 0..3 {
        first_writers_at_once_all_succeed(&TestDb::new(), round);
    }
}

/// On PostgreSQL a write never prepares the schema (it asks for `init`), so the agents'
/// `init`s race on the bare database first, then their first writes.
#[test]
fn concurrent_inits_then_writers_on_a_bare_postgres_database_all_succeed() {
    for round in 0..3 {
        let Some((db, _drop)) = postgres_bare_db() else {
            return;
        };
        let children: Vec<Child> = (0..FIRST_WRITERS)
            .map(|_| {
                db.command(&["init"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn memscope init")
            })
            .collect();
        for (i, c) in children.into_iter().enumerate() {
            let r = wait(c);
            assert_eq!(r.code, 0, "round {round}, init {i} failed: {}", r.stderr);
        }
        first_writers_at_once_all_succeed(&db, round);
    }
}

const FIRST_WRITERS: usize = 8;

fn first_writers_at_once_all_succeed(db: &TestDb, round: usize) {
    let children: Vec<Child> = (0..FIRST_WRITERS)
        .map(|i| spawn_write(db, &format!("v{i}"), &format!("proc:{i}"), &[]))
        .collect();
    let runs: Vec<Run> = children.into_iter().map(wait).collect();
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(
            r.code, 0,
            "round {round}, process {i}'s first write failed: {}",
            r.stderr
        );
    }
    assert_eq!(applied(db).len(), FIRST_WRITERS);
    db.assert_check_ok();
}

/// 因果单调: sequence numbers 3, then 1, then 2 → the value of 3 stands, the others are stale
/// and kept for audit with their own (older) numbers.
#[test]
fn causal_order_3_then_1_then_2_keeps_the_value_of_3() {
    causal_order_3_then_1_then_2_keeps_the_value_of_3_on(TestDb::new());
}

#[test]
fn causal_order_3_then_1_then_2_keeps_the_value_of_3_on_postgres() {
    on_postgres(causal_order_3_then_1_then_2_keeps_the_value_of_3_on);
}

fn causal_order_3_then_1_then_2_keeps_the_value_of_3_on(db: TestDb) {
    let o3 = db.write_with(
        (U, PM),
        "三 three",
        "global",
        "op:3",
        &["--causal-seq", "3"],
    );
    let o1 = db.write_with((U, PM), "一 one", "global", "op:1", &["--causal-seq", "1"]);
    let o2 = db.write_with((U, PM), "二 two", "global", "op:2", &["--causal-seq", "2"]);
    assert_eq!(o3["outcome"], "inserted");
    for o in [&o1, &o2] {
        assert_eq!(o["outcome"], "stale", "{o:#}");
        assert!(o["reason"].is_string(), "stale carries a reason: {o:#}");
    }
    let cur = &db.list(&[])[0];
    assert_eq!(cur["value"], "三 three");
    assert_eq!(cur["causal_seq"], 3);
    assert_eq!(cur["version"], 1);

    let hist = db.history(U, PM, Some("global"));
    assert_eq!(
        project(&hist, &["event", "causal_seq", "value"]),
        [
            json!(["set", 3, "三 three"]),
            json!(["stale", 1, "一 one"]),
            json!(["stale", 2, "二 two"]),
        ]
    );
    // The database clock moved past 3: the next number handed out is above it.
    let next: i64 = db.seq();
    assert!(next > 3, "seq after observing 3 gave {next}");
    let (_, report) = db.check();
    assert_eq!(report["metrics"]["stale_writes"], 2);
    db.assert_check_ok();
}

/// Applied versions read back in causal order even when writes arrive out of order; an equal
/// causal_seq with another value is stale; a write without a number gets the next one.
#[test]
fn applied_versions_read_back_in_causal_order() {
    applied_versions_read_back_in_causal_order_on(TestDb::new());
}

#[test]
fn applied_versions_read_back_in_causal_order_on_postgres() {
    on_postgres(applied_versions_read_back_in_causal_order_on);
}

fn applied_versions_read_back_in_causal_order_on(db: TestDb) {
    let steps = [
        (10, "a", "inserted"),
        (30, "c", "superseded"),
        (20, "b", "stale"),
        (30, "c-prime", "stale"),
        (40, "d", "superseded"),
        (35, "D", "confirmed"), // same value as current (case folded): a confirmation
    ];
    for (seq, value, want) in steps {
        let out = db.write_with(
            (U, PM),
            value,
            "global",
            &format!("op:{seq}"),
            &["--causal-seq", &seq.to_string()],
        );
        assert_eq!(out["outcome"], want, "seq {seq} {value}: {out:#}");
    }
    let auto = db.write(U, PM, "e", "global", "op:auto");
    assert_eq!(auto["outcome"], "superseded");
    assert!(auto["causal_seq"].as_i64().unwrap() > 40, "{auto:#}");
    let sets: Vec<(i64, i64, Value)> = applied(&db)
        .into_iter()
        .map(|(v, s, _, val)| (v, s, val))
        .collect();
    assert_eq!(
        sets.iter().map(|s| (s.0, s.2.clone())).collect::<Vec<_>>(),
        vec![
            (1, json!("a")),
            (2, json!("c")),
            (3, json!("d")),
            (4, json!("e"))
        ]
    );
    assert!(sets.windows(2).all(|w| w[0].1 < w[1].1), "{sets:?}");
    assert_eq!(db.list(&[])[0]["value"], "e");
    db.assert_check_ok();
}

/// 删除单调: a write after a tombstone is rejected, logged as a content-free `rejected` event
/// and counted; nothing becomes current.
#[test]
fn write_after_tombstone_is_rejected_and_logged_without_content() {
    write_after_tombstone_is_rejected_and_logged_without_content_on(TestDb::new());
}

#[test]
fn write_after_tombstone_is_rejected_and_logged_without_content_on_postgres() {
    on_postgres(write_after_tombstone_is_rejected_and_logged_without_content_on);
}

fn write_after_tombstone_is_rejected_and_logged_without_content_on(db: TestDb) {
    let scope = "repo:旧仪表盘";
    db.write_with(
        (U, PM),
        "npm",
        scope,
        "thread:1",
        &["--raw", "这个仓库用 npm"],
    );
    db.run(&args_for(
        "delete",
        U,
        PM,
        &["--scope", scope, "--reason", "用户要求"],
    ))
    .ok();
    let secret = unique("复活-secret-");
    let out = db.write_with(
        (U, PM),
        &secret,
        scope,
        "thread:2",
        &["--raw", &secret, "--causal-seq", "999"],
    );
    assert_eq!(out["outcome"], "rejected", "{out:#}");
    assert!(out["reason"].as_str().unwrap().contains("restore"));

    // Through apply too: an outcome, not an error (exit 0).
    let line = json!({"subject": U, "predicate": "pkg_manager", "value": secret, "scope": scope,
                      "source": "thread:3", "raw": secret})
    .to_string();
    let r = db.run_stdin(&["apply", "-"], format!("{line}\n").as_bytes());
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json_lines()[0]["outcome"], "rejected");

    assert!(db.list(&[]).is_empty());
    let hist = db.history(U, PM, Some(scope));
    assert_eq!(events(&hist), ["deleted", "rejected", "rejected"]);
    for e in &hist {
        assert!(e["value"].is_null() && e["raw"].is_null(), "{e:#}");
    }
    assert!(!db.fingerprint().join("\n").contains(&secret));
    let (code, report) = db.check();
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["metrics"]["resurrection_blocked"], 2);

    // Through the library: same refusal.
    let mut store = open_any_store(&db);
    let out = store
        .write(&req(U, PM, json!("pnpm"), scope, "lib:1"))
        .unwrap();
    assert_eq!(out.outcome, memscope::OutcomeKind::Rejected);
    drop(store);
    assert!(db.list(&[]).is_empty());
}

/// A pending item resolved into a tombstoned scope the human named explicitly (outside the
/// candidates, so with --force) is rejected too (exit 1); nothing was written, so the item
/// stays open for another choice.
#[test]
fn pending_resolution_into_a_tombstoned_scope_is_rejected() {
    pending_resolution_into_a_tombstoned_scope_is_rejected_on(TestDb::new());
}

#[test]
fn pending_resolution_into_a_tombstoned_scope_is_rejected_on_postgres() {
    on_postgres(pending_resolution_into_a_tombstoned_scope_is_rejected_on);
}

fn pending_resolution_into_a_tombstoned_scope_is_rejected_on(db: TestDb) {
    db.write(U, PM, "pnpm", "repo:old", "thread:1");
    db.run(&args_for("delete", U, PM, &["--scope", "repo:old"]))
        .ok();
    let p = db.write_ambiguous(
        U,
        PM,
        "npm",
        "global,repo:web-app",
        "thread:2",
        "以后都用 npm",
    );
    let id = p["pending_id"].as_i64().unwrap().to_string();
    let r = db.run(&[
        "pending", "resolve", &id, "--scope", "repo:old", "--force", "--json",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["outcome"], "rejected");
    assert!(db.list(&[]).is_empty());
    let item = &db.pending(true)[0];
    assert_eq!(item["status"], "open", "{item}");
    assert_eq!(item["resolution"], serde_json::Value::Null, "{item}");
    db.assert_check_ok();
}

/// 语义归一: five spellings of one predicate (including the alias `pkg_manager` and the Chinese
/// alias `包管理器`) are one identity, `package_manager`.
#[test]
fn predicate_spellings_and_aliases_are_one_identity() {
    predicate_spellings_and_aliases_are_one_identity_on(TestDb::new());
}

#[test]
fn predicate_spellings_and_aliases_are_one_identity_on_postgres() {
    on_postgres(predicate_spellings_and_aliases_are_one_identity_on);
}

fn predicate_spellings_and_aliases_are_one_identity_on(db: TestDb) {
    let spellings = [
        "Package Manager",
        "package-manager",
        "packageManager",
        "pkg_manager",
        "包管理器",
        "  PACKAGE.manager ",
    ];
    let mut kinds = Vec::new();
    for (i, p) in spellings.iter().enumerate() {
        let out = db.write(U, p, "pnpm", "global", &format!("thread:{i}"));
        assert_eq!(out["predicate"], PM, "{p:?} → {out:#}");
        kinds.push(out["outcome"].as_str().unwrap().to_string());
    }
    assert_eq!(
        kinds,
        [
            "inserted",
            "confirmed",
            "confirmed",
            "confirmed",
            "confirmed",
            "confirmed"
        ]
    );
    assert_eq!(
        db.sql_i64("SELECT count(DISTINCT predicate) FROM memories"),
        1
    );
    let rec = &db.list(&[])[0];
    assert_eq!(rec["predicate"], PM);
    assert_eq!(rec["confirm_count"], 5);
    // Reads normalize too.
    for p in spellings {
        assert_eq!(db.resolve(U, p, &[])["value"], "pnpm", "{p}");
        assert_eq!(db.history(U, p, None).len(), 6, "{p}");
        assert_eq!(db.list(&["--predicate", p]).len(), 1, "{p}");
    }

    // A new alias, added by a human, joins future spellings.
    db.run(&["alias", "add", "套件管理器", "Package Manager"])
        .ok();
    let out = db.write(U, "套件管理器", "npm", "global", "thread:9");
    assert_eq!(out["predicate"], PM);
    assert_eq!(out["outcome"], "superseded");
    let aliases = as_array(db.json(&["alias", "list", "--json"]));
    assert!(aliases
        .iter()
        .any(|a| a["alias"] == "套件管理器" && a["canonical"] == PM));
    assert!(aliases
        .iter()
        .any(|a| a["alias"] == "包管理器" && a["canonical"] == PM));
    db.assert_check_ok();
}

/// Near-duplicate predicates that no alias joins are reported by `check`, never merged.
#[test]
fn near_duplicate_predicates_are_reported_not_merged() {
    near_duplicate_predicates_are_reported_not_merged_on(TestDb::new());
}

#[test]
fn near_duplicate_predicates_are_reported_not_merged_on_postgres() {
    on_postgres(near_duplicate_predicates_are_reported_not_merged_on);
}

fn near_duplicate_predicates_are_reported_not_merged_on(db: TestDb) {
    db.write(U, PM, "pnpm", "global", "thread:1");
    db.write(U, "package_manger", "npm", "global", "thread:2");
    assert_eq!(db.list(&[]).len(), 2, "never merged silently");
    let (code, report) = db.check();
    assert_eq!(code, 0, "{report:#}");
    let dups = report["metrics"]["duplicate_candidates"].to_string();
    assert!(
        dups.contains("package_manger") && dups.contains(PM),
        "near-duplicates reported: {report:#}"
    );
}

/// The causal clock never runs backwards, even after a write carrying the largest possible
/// number: either such a write is refused, or every later number stays above it.
#[test]
fn the_causal_clock_never_goes_backwards() {
    the_causal_clock_never_goes_backwards_on(TestDb::new());
}

#[test]
fn the_causal_clock_never_goes_backwards_on_postgres() {
    on_postgres(the_causal_clock_never_goes_backwards_on);
}

fn the_causal_clock_never_goes_backwards_on(db: TestDb) {
    let big = i64::MAX.to_string();
    let r = db.run(&args_for(
        "write",
        U,
        PM,
        &[
            "--value",
            "pnpm",
            "--scope",
            "global",
            "--source",
            "thread:1",
            "--causal-seq",
            &big,
            "--json",
        ],
    ));
    if r.code != 0 {
        assert_one_sentence(&r.stderr, &["causal"]);
        return;
    }
    // Accepted: the clock has observed i64::MAX; nothing above it can be handed out.
    let seq = db.run(&["seq"]);
    if seq.code == 0 {
        let n: i64 = seq.stdout.trim().parse().unwrap();
        panic!("after observing causal_seq {big}, `memscope seq` handed out {n}: the clock went backwards");
    }
    assert_one_sentence(&seq.stderr, &[]);
}

/// Writers and a deleter race on one identity: whatever the interleaving, the delete wins for
/// good — no current record, no content in history or on disk, every rejected write logged.
#[test]
fn concurrent_writers_and_a_delete_end_deleted_with_nothing_left() {
    concurrent_writers_and_a_delete_end_deleted_with_nothing_left_on(TestDb::new());
}

#[test]
fn concurrent_writers_and_a_delete_end_deleted_with_nothing_left_on_postgres() {
    on_postgres(concurrent_writers_and_a_delete_end_deleted_with_nothing_left_on);
}

fn concurrent_writers_and_a_delete_end_deleted_with_nothing_left_on(db: TestDb) {
    const P: usize = 6;
    const L: usize = 30;
    let tag = unique("并发删除-");
    db.write(U, PM, &format!("{tag}-first"), "global", "first");
    let mut files = Vec::new();
    for p in 0..P {
        let path = db.sibling(&format!("w{p}.jsonl"));
        let text: String = (0..L)
            .map(|l| {
                format!(
                    "{}\n",
                    json!({"subject": U, "predicate": PM, "scope": "global",
                           "value": format!("{tag}-{p}-{l}"), "source": format!("w:{p}:{l}"),
                           "raw": format!("原话 {tag}-{p}-{l}")})
                )
            })
            .collect();
        std::fs::write(&path, text).unwrap();
        files.push(path);
    }
    let mut children: Vec<Child> = Vec::new();
    for (p, f) in files.iter().enumerate() {
        children.push(
            db.command(&["apply", f.to_str().unwrap()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        if p == P / 2 {
            children.push(
                db.command(&args_for("delete", U, PM, &["--yes", "--json"]))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
        }
    }
    let mut rejected = 0;
    for c in children {
        let r = wait(c);
        assert_eq!(r.code, 0, "{r:?}");
        if r.stdout.trim_start().starts_with('{') && r.stdout.contains("tombstoned") {
            continue; // the delete report
        }
        for out in r.json_lines() {
            let k = out["outcome"].as_str().unwrap();
            assert!(matches!(k, "inserted" | "superseded" | "rejected"), "{out}");
            if k == "rejected" {
                rejected += 1;
            }
        }
    }
    println!("{rejected} of {} writes came after the delete", P * L);
    db.run(&["gc"]).ok();
    assert!(db.list(&[]).is_empty(), "the delete wins for good");
    let hist = db.history(U, PM, None);
    for e in &hist {
        assert!(
            e["event"] == "deleted" || e["event"] == "rejected",
            "only content-free events remain: {e}"
        );
        assert!(e["value"].is_null() && e["raw"].is_null());
    }
    assert_eq!(
        hist.iter().filter(|e| e["event"] == "rejected").count(),
        rejected
    );
    let (code, report) = db.check();
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["metrics"]["resurrection_blocked"], rejected as i64);
    db.assert_not_stored(&tag, "a written-then-deleted value");
}

/// The clock lives in the newest history event: purging the events that held its highest
/// value must not let it run backwards.
#[test]
fn the_causal_clock_survives_a_purge_of_its_newest_events() {
    the_causal_clock_survives_a_purge_of_its_newest_events_on(TestDb::new());
}

#[test]
fn the_causal_clock_survives_a_purge_of_its_newest_events_on_postgres() {
    on_postgres(the_causal_clock_survives_a_purge_of_its_newest_events_on);
}

fn the_causal_clock_survives_a_purge_of_its_newest_events_on(db: TestDb) {
    let mut store = open_any_store(&db);
    let req = |predicate: &str, value: &str| memscope::WriteRequest {
        subject: "user:42".into(),
        predicate: predicate.into(),
        value: serde_json::json!(value),
        scope: memscope::ScopeChoice::Exact(memscope::Scope::Global),
        source: "thread:1".into(),
        raw: Some("用户原话 🧪".into()),
        causal_seq: None,
        context: None,
    };
    store.write(&req("formatter", "biome")).unwrap();
    let newest = store
        .write(&req("coffee", "燕麦拿铁"))
        .unwrap()
        .causal_seq
        .unwrap();
    store
        .delete(
            &memscope::DeleteTarget::Predicate {
                subject: "user:42".into(),
                predicate: "coffee".into(),
            },
            Some("forget"),
        )
        .unwrap();
    let next = store.next_seq().unwrap();
    assert!(
        next > newest,
        "seq {next} must be above the purged write's {newest}"
    );
    let after = store.write(&req("formatter", "prettier")).unwrap();
    assert_eq!(after.outcome, memscope::OutcomeKind::Superseded);
    assert!(after.causal_seq.unwrap() > next);
    drop(store);
    // A second process sees the same clock.
    let other = memscope::store::AnyStore::open(&db.path, memscope::OpenMode::Existing).unwrap();
    drop(other);
    let seq: i64 = db.seq();
    assert!(seq > after.causal_seq.unwrap());
    db.assert_check_ok();
}

/// The places the scope guard keeps from one write transaction to the next (issue 16) follow
/// new ones: a repository this store registers, another store of this process registers, or
/// another client adds behind memscope's back is named evidence in the very next write.
#[test]
fn the_scope_guard_sees_places_registered_after_it_read_them() {
    the_scope_guard_sees_places_registered_after_it_read_them_on(TestDb::new());
}

#[test]
fn the_scope_guard_sees_places_registered_after_it_read_them_on_postgres() {
    on_postgres(the_scope_guard_sees_places_registered_after_it_read_them_on);
}

fn the_scope_guard_sees_places_registered_after_it_read_them_on(db: TestDb) {
    use memscope::model::{OutcomeKind, ScopeChoice, WriteContext, WriteRequest};
    use memscope::store::AnyStore;
    use memscope::{OpenMode, Scope};
    let req = |subject: &str, scope: Scope, raw: &str| WriteRequest {
        subject: subject.into(),
        predicate: "test_runner".into(),
        value: json!("vitest"),
        scope: ScopeChoice::Exact(scope),
        source: format!("thread:{subject}/message:1"),
        raw: Some(raw.into()),
        causal_seq: None,
        context: Some(WriteContext {
            repo: Some("home-repo".into()),
            task: None,
        }),
    };
    // A global rule whose words name `repo` is queued with that repository as evidence.
    let assert_queued_to = |store: &mut AnyStore, subject: &str, repo: &str| {
        let words = format!("run the {repo} tests with vitest");
        let out = store.write(&req(subject, Scope::Global, &words)).unwrap();
        let queued = out.outcome == OutcomeKind::Pending
            && serde_json::to_string(&out)
                .unwrap()
                .contains(&format!("repo:{repo}"));
        assert!(queued, "{out:?}");
    };
    let mut store = open_any_store(&db);
    // The first guarded write reads the places (none yet).
    let out = store
        .write(&req("user:1", Scope::Global, "run the tests with vitest"))
        .unwrap();
    assert_eq!(out.outcome, OutcomeKind::Inserted);
    // This store registers a repository.
    store
        .write(&req("user:2", Scope::Repo("alpha-web".into()), "vitest"))
        .unwrap();
    assert_queued_to(&mut store, "user:3", "alpha-web");
    // Another store in this process registers one.
    let mut other = AnyStore::open(&db.path, OpenMode::Existing).unwrap();
    other
        .write(&req("user:4", Scope::Repo("beta-api".into()), "vitest"))
        .unwrap();
    assert_queued_to(&mut store, "user:5", "beta-api");
    // Another client adds one straight into the table.
    db.sql_execute(
        "INSERT INTO spellings (kind, folded, spelling) VALUES ('scope', 'repo:gamma-db', 'repo:gamma-db')",
    )
    .unwrap();
    assert_queued_to(&mut store, "user:6", "gamma-db");
}
