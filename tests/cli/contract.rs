//! The command-line contract scripts and agents rely on (README, "Command line"): `apply` streaming JSON Lines
//! with one outcome per line in order, the `--json` shapes, exit codes, `--db` / `$MEMSCOPE_DB`,
//! and text that is Chinese, emoji or very long.

use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

const U: &str = "user:42";
const PM: &str = "package_manager";

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("expected an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

#[track_caller]
fn assert_has_keys(v: &Value, want: &[&str]) {
    let have = keys(v);
    for k in want {
        assert!(
            have.iter().any(|h| h == k),
            "missing {k:?} in {v:#} (has {have:?})"
        );
    }
}

/// Every kind of outcome, in order, with the fields the contract names.
fn story() -> Vec<Value> {
    vec![
        json!({"subject": U, "predicate": PM, "value": "pnpm", "scope": "global", "source": "t:1", "raw": "以后新建前端项目，默认用 pnpm。"}),
        json!({"subject": U, "predicate": "Package Manager", "value": "PNPM", "scope": "global", "source": "t:2"}),
        json!({"subject": U, "predicate": PM, "value": "npm", "scope": "repo:legacy-dashboard", "source": "t:3", "causal_seq": 50}),
        json!({"subject": U, "predicate": PM, "value": "yarn", "scope": "repo:legacy-dashboard", "source": "t:4", "causal_seq": 40}),
        json!({"subject": U, "predicate": PM, "value": "npm 🚀", "scope": "global", "source": "t:5"}),
        json!({"subject": U, "predicate": PM, "value": "npm", "scope": {"ambiguous": ["global", "repo:web-app"]}, "source": "t:6", "raw": "以后都用 npm"}),
    ]
}

fn jsonl(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[track_caller]
fn assert_story_outcomes(outs: &[Value]) {
    let kinds = outcomes(outs);
    assert_eq!(
        kinds,
        [
            "inserted",
            "confirmed",
            "inserted",
            "stale",
            "superseded",
            "pending"
        ]
    );
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(o["line"], i as i64 + 1);
        assert_has_keys(o, &["outcome", "subject", "predicate", "scope"]);
        assert_eq!(o["subject"], U);
        assert_eq!(o["predicate"], PM);
    }
    assert_eq!(outs[0]["version"], 1);
    assert_eq!(outs[0]["scope"], "global");
    assert_eq!(outs[1]["version"], 1);
    assert!(outs[3]["reason"].is_string(), "stale has a reason");
    assert_eq!(outs[4]["previous"], "pnpm");
    assert_eq!(outs[4]["version"], 2);
    assert!(outs[5]["pending_id"].is_i64());
    assert_eq!(
        outs[5]["scope"],
        json!({"ambiguous": ["global", "repo:web-app"]})
    );
}

#[test]
fn apply_from_stdin_gives_one_outcome_per_line_in_order() {
    apply_from_stdin_gives_one_outcome_per_line_in_order_on(TestDb::new());
}

#[test]
fn apply_from_stdin_gives_one_outcome_per_line_in_order_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        apply_from_stdin_gives_one_outcome_per_line_in_order_on(db);
    }
}

fn apply_from_stdin_gives_one_outcome_per_line_in_order_on(db: TestDb) {
    let r = db.run_stdin(&["apply", "-"], jsonl(&story()).as_bytes());
    assert_eq!(
        r.code, 0,
        "stale and pending are outcomes, not errors: {r:?}"
    );
    assert_story_outcomes(&r.json_lines());
    db.assert_check_ok();
}

#[test]
fn apply_from_a_file_gives_the_same_outcomes() {
    let db = TestDb::new();
    let f = db.sibling("写入 requests.jsonl");
    // CRLF line ends and blank lines are tolerated; blank lines get no outcome but count.
    let mut text = String::from("\r\n");
    for l in story() {
        text.push_str(&format!("{l}\r\n"));
    }
    std::fs::write(&f, text).unwrap();
    let r = db.run(&["apply", f.to_str().unwrap()]).ok();
    let mut outs = r.json_lines();
    for o in &mut outs {
        let n = o["line"].as_i64().unwrap();
        o["line"] = json!(n - 1);
    }
    assert_story_outcomes(&outs);
    // Default is stdin.
    let db2 = TestDb::new();
    let r = db2.run_stdin(&["apply"], jsonl(&story()).as_bytes()).ok();
    assert_eq!(r.json_lines().len(), 6);
}

#[test]
fn apply_across_batches_keeps_order_and_line_numbers() {
    apply_across_batches_keeps_order_and_line_numbers_on(TestDb::new());
}

fn apply_across_batches_keeps_order_and_line_numbers_on(db: TestDb) {
    let n = 2500;
    let mut lines = Vec::with_capacity(n);
    for i in 0..n {
        if i % 500 == 250 {
            lines.push(json!({"subject": U, "predicate": "p", "value": "x", "scope": "nowhere", "source": "s"}));
        } else {
            lines.push(json!({"subject": format!("用户:{}", i % 97), "predicate": format!("pred_{}", i % 13),
                              "value": format!("值 {i} 🎯"), "scope": "global", "source": format!("bulk:{i}")}));
        }
    }
    let r = db.run_stdin(&["apply", "-"], jsonl(&lines).as_bytes());
    assert_eq!(r.code, 1, "five error lines");
    let outs = r.json_lines();
    assert_eq!(outs.len(), n);
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(o["line"], i as i64 + 1, "{o}");
        if i % 500 == 250 {
            assert_eq!(o["outcome"], "error");
        } else {
            assert_eq!(
                o["value"],
                format!("值 {i} 🎯"),
                "outcome {i} is for line {i}"
            );
        }
    }
    let distinct: std::collections::BTreeSet<(usize, usize)> = (0..n)
        .filter(|i| i % 500 != 250)
        .map(|i| (i % 97, i % 13))
        .collect();
    assert_eq!(db.list(&[]).len(), distinct.len());
    assert_eq!(
        db.sql_i64("SELECT count(*) FROM history WHERE event = 'set'"),
        (n - 5) as i64
    );
    db.assert_check_ok();
}

/// `memscope apply -` with a pipe to its stdin and its outcome lines arriving on `rx`.
struct Streaming {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    rx: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

impl Streaming {
    fn start(db: &TestDb) -> Streaming {
        let mut child = db
            .command(&["apply", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Streaming {
            child,
            stdin,
            rx,
            reader,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next outcome line; panics naming `what` if none comes within 20 s.
    fn outcome(&self, what: &str) -> Value {
        let got = self
            .rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no outcome for {what}"));
        serde_json::from_str(&got).unwrap()
    }

    /// Closes stdin and waits: whether apply exited 0.
    fn finish(mut self) -> bool {
        drop(self.stdin);
        let ok = self.child.wait().unwrap().success();
        self.reader.join().unwrap();
        ok
    }
}

/// An agent streaming requests sees each outcome before it sends the next line.
#[test]
fn apply_answers_each_line_before_stdin_closes() {
    apply_answers_each_line_before_stdin_closes_on(TestDb::new());
}

#[test]
fn apply_answers_each_line_before_stdin_closes_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        apply_answers_each_line_before_stdin_closes_on(db);
    }
}

fn apply_answers_each_line_before_stdin_closes_on(db: TestDb) {
    let mut apply = Streaming::start(&db);
    for (i, v) in ["pnpm", "npm", "燕麦拿铁 ☕"].iter().enumerate() {
        let line = json!({"subject": U, "predicate": PM, "value": v, "scope": "global", "source": format!("live:{i}")});
        apply.send(format!("{line}\n").as_bytes());
        let out = apply.outcome(&format!("line {} while stdin is open", i + 1));
        assert_eq!(out["line"], i as i64 + 1);
        assert_eq!(out["value"], *v);
    }
    assert!(apply.finish());
}

/// A line that arrives in two parts with a pause between them holds no lock while the agent
/// pauses: the lines before it are answered, and another writer gets through.
#[test]
fn apply_holds_no_lock_while_a_line_waits_for_its_end() {
    apply_holds_no_lock_while_a_line_waits_for_its_end_on(TestDb::new());
}

#[test]
fn apply_holds_no_lock_while_a_line_waits_for_its_end_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        apply_holds_no_lock_while_a_line_waits_for_its_end_on(db);
    }
}

fn apply_holds_no_lock_while_a_line_waits_for_its_end_on(db: TestDb) {
    db.init();
    let mut apply = Streaming::start(&db);
    let line = |i: usize| {
        json!({"subject": U, "predicate": format!("偏好_{i}"), "value": format!("值 {i} 🚀"),
               "scope": "repo:大仓库", "source": format!("burst:{i}")})
        .to_string()
    };
    // 3,000 whole lines and the first half of one more, in one write.
    let mut burst: Vec<u8> = (0..3000)
        .flat_map(|i| format!("{}\n", line(i)).into_bytes())
        .collect();
    let last = line(3000).into_bytes();
    let (head, tail) = last.split_at(last.len() / 2);
    burst.extend_from_slice(head);
    apply.send(&burst);
    for i in 0..3000 {
        let out = apply.outcome(&format!("line {} while the next one is unfinished", i + 1));
        assert_eq!(out["line"], i as i64 + 1);
        assert_eq!(out["outcome"], "inserted");
    }
    // Another process writes meanwhile; a held write lock would fail it after the timeout.
    Run::from_output(other_writer(&db, "2000").output().expect("spawn memscope")).ok();
    apply.send(&[tail, b"\n"].concat());
    let out = apply.outcome("the finished line");
    assert_eq!(
        (out["line"].clone(), out["value"].clone()),
        (json!(3001), json!("值 3000 🚀"))
    );
    assert!(apply.finish());
    assert_eq!(db.list(&[]).len(), 3002);
    db.assert_check_ok();
}

/// Another process's `write` (pnpm to global, from other:1) that waits at most `busy_ms`
/// milliseconds for the write lock.
fn other_writer(db: &TestDb, busy_ms: &str) -> std::process::Command {
    let mut c = db.command(&args_for(
        "write",
        U,
        PM,
        &[
            "--value", "pnpm", "--scope", "global", "--source", "other:1",
        ],
    ));
    c.env("MEMSCOPE_BUSY_TIMEOUT_MS", busy_ms);
    c
}

/// A source that trickles in, its writes ending part-way through lines (ssh, sockets, rate-
/// limited pipes), gets its outcomes as it goes and never keeps other writers out for long.
#[test]
fn apply_of_trickling_input_answers_as_it_goes_and_lets_others_write() {
    apply_of_trickling_input_answers_as_it_goes_and_lets_others_write_on(TestDb::new());
}

#[test]
fn apply_of_trickling_input_answers_as_it_goes_and_lets_others_write_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        apply_of_trickling_input_answers_as_it_goes_and_lets_others_write_on(db);
    }
}

fn apply_of_trickling_input_answers_as_it_goes_and_lets_others_write_on(db: TestDb) {
    db.init();
    let mut apply = Streaming::start(&db);
    let text: Vec<u8> = (0..100)
        .flat_map(|i| {
            let line = json!({"subject": U, "predicate": format!("笔记_{i}"), "value": "📝",
                              "scope": "global", "source": format!("trickle:{i}")});
            format!("{line}\n").into_bytes()
        })
        .collect();
    let piece = text.len() / 100;
    let mut other = None;
    for (n, part) in text.chunks(piece).enumerate() {
        apply.send(part);
        std::thread::sleep(Duration::from_millis(20));
        if n == 30 {
            // A second writer, a third of the way through, with a 1 s busy timeout; the
            // trickle goes on meanwhile.
            let mut c = other_writer(&db, "1000");
            other = Some(std::thread::spawn(move || c.output().unwrap()));
        }
    }
    let answered_early = apply.rx.try_iter().count();
    let other = other.unwrap().join().unwrap();
    assert!(
        other.status.success(),
        "another writer was kept out: {}",
        String::from_utf8_lossy(&other.stderr)
    );
    assert!(
        answered_early > 0,
        "no outcome came while the input trickled in"
    );
    assert!(apply.finish());
    assert_eq!(db.list(&[]).len(), 101);
    db.assert_check_ok();
}

#[test]
fn chinese_emoji_and_100kb_values_round_trip_through_write_and_apply() {
    let db = TestDb::new();
    // ~100 KB through a command-line argument (below the 128 KiB per-argument limit).
    let via_arg = long_text(100_000, "🧪参数");
    let out = db.write_with(
        ("用户:小明 🐼", "笔记"),
        &via_arg,
        "repo:仓库-一",
        "对话:7/消息:3",
        &["--raw", &long_text(20_000, "原话")],
    );
    assert_eq!(out["outcome"], "inserted");
    // ~300 KB through apply.
    let via_apply = long_text(300 * 1024, "📦apply");
    let line = json!({"subject": "用户:小明 🐼", "predicate": "笔记", "value": via_apply,
                      "scope": "task:任务-二", "source": "对话:8", "raw": "很长很长的话"});
    let r = db
        .run_stdin(&["apply"], format!("{line}\n").as_bytes())
        .ok();
    assert_eq!(r.json_lines()[0]["outcome"], "inserted");

    let repo = db.list(&["--scope", "repo:仓库-一"]);
    assert_eq!(repo[0]["value"].as_str().unwrap(), via_arg);
    assert_eq!(repo[0]["subject"], "用户:小明 🐼");
    assert_eq!(repo[0]["source"], "对话:7/消息:3");
    assert_eq!(repo[0]["raw"].as_str().unwrap(), long_text(20_000, "原话"));
    let r = db.resolve(
        "用户:小明 🐼",
        "笔记",
        &["--repo", "仓库-一", "--task", "任务-二"],
    );
    assert_eq!(r["value"].as_str().unwrap(), via_apply);
    assert_eq!(r["considered"][1]["value"].as_str().unwrap(), via_arg);
    let h = db.history("用户:小明 🐼", "笔记", Some("task:任务-二"));
    assert_eq!(h[0]["value"].as_str().unwrap(), via_apply);
    // Same long value again (with different outer whitespace) is a confirmation.
    let again = db.write(
        "用户:小明 🐼",
        "笔记",
        &format!("  {via_arg}  "),
        "repo:仓库-一",
        "对话:9",
    );
    assert_eq!(again["outcome"], "confirmed");
    // Text output does not choke on it either.
    let t = db.run(&["list"]).ok();
    assert!(t.stdout.contains("仓库-一"));
    db.run(&args_for("history", "用户:小明 🐼", "笔记", &[]))
        .ok();
    db.run(&["pending"]).ok();
    // resolve's text: the winner whole on its first line, once; the chain's values cut.
    let t = db
        .run(&args_for(
            "resolve",
            "用户:小明 🐼",
            "笔记",
            &["--repo", "仓库-一", "--task", "任务-二"],
        ))
        .ok();
    let lines: Vec<&str> = t.stdout.lines().collect();
    assert!(
        lines[0].contains(&*via_apply),
        "the first line holds the value whole"
    );
    assert_eq!(t.stdout.matches(&*via_apply).count(), 1);
    assert_eq!(lines.len(), 4, "{}", t.stdout.len());
    for line in &lines[1..] {
        assert!(
            (line.chars().count() < 160 && line.contains('…')) || line.contains("absent"),
            "{line}"
        );
    }
    db.assert_check_ok();
}

#[test]
fn json_shapes_of_list_history_pending_check_and_delete() {
    json_shapes_of_list_history_pending_check_and_delete_on(TestDb::new());
}

#[test]
fn json_shapes_of_list_history_pending_check_and_delete_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        json_shapes_of_list_history_pending_check_and_delete_on(db);
    }
}

fn json_shapes_of_list_history_pending_check_and_delete_on(db: TestDb) {
    db.run_stdin(&["apply"], jsonl(&story()).as_bytes()).ok();

    let list = db.list(&[]);
    assert_eq!(list.len(), 2);
    for r in &list {
        assert_has_keys(
            r,
            &[
                "subject",
                "predicate",
                "scope",
                "value",
                "version",
                "source",
                "causal_seq",
                "raw",
                "updated_at",
            ],
        );
    }
    // Grouped by scope: global before repo:.
    assert_eq!(list[0]["scope"], "global");
    assert_eq!(list[1]["scope"], "repo:legacy-dashboard");

    let hist = db.history(U, PM, None);
    for e in &hist {
        assert_has_keys(
            e,
            &[
                "event",
                "subject",
                "predicate",
                "scope",
                "version",
                "value",
                "source",
                "causal_seq",
                "at",
            ],
        );
    }
    let ats: Vec<&str> = hist.iter().map(|e| e["at"].as_str().unwrap()).collect();
    let mut sorted = ats.clone();
    sorted.sort();
    assert_eq!(ats, sorted, "oldest first");
    assert_eq!(events(&hist), ["set", "confirmed", "set", "stale", "set"]);

    let pending = db.pending(false);
    assert_eq!(pending.len(), 1);
    assert_has_keys(
        &pending[0],
        &[
            "id",
            "subject",
            "predicate",
            "value",
            "raw",
            "source",
            "causal_seq",
            "candidates",
            "status",
        ],
    );

    let (code, check) = db.check();
    assert_eq!(code, 0);
    assert_has_keys(&check, &["ok", "violations", "metrics"]);
    for m in [
        "busy_retries",
        "resurrection_blocked",
        "stale_writes",
        "duplicate_candidates",
        "purge_debt_since",
        "ids_past_limit",
    ] {
        assert!(
            check["metrics"].get(m).is_some(),
            "check metric {m}: {check:#}"
        );
    }
    assert_eq!(check["metrics"]["stale_writes"], 1);

    let del = db.json(&args_for("delete", U, PM, &["--yes", "--json"]));
    assert_has_keys(&del, &["tombstoned", "purged_versions", "purged_pending"]);
    for t in del["tombstoned"].as_array().unwrap() {
        assert_has_keys(t, &["subject", "predicate", "scope", "version"]);
    }
    assert_eq!(del["purged_versions"], 3);
    assert_eq!(del["purged_pending"], 1);
}

#[test]
fn the_database_comes_from_db_else_memscope_db() {
    let db = TestDb::new();
    let mut c = memscope_cmd(db.dir.path());
    c.env("MEMSCOPE_DB", &db.path).args(args_for(
        "write",
        U,
        PM,
        &["--value", "pnpm", "--scope", "global", "--source", "env"],
    ));
    let o = c.output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(db.path.exists(), "$MEMSCOPE_DB names the database");
    assert_eq!(db.list(&[])[0]["source"], "env");
    // --db wins over the environment.
    let other = db.sibling("other.db");
    let mut c = memscope_cmd(db.dir.path());
    c.env("MEMSCOPE_DB", &db.path)
        .arg("--db")
        .arg(&other)
        .args(["init"]);
    assert!(c.output().unwrap().status.success());
    assert!(other.exists());
    assert_eq!(db.list(&[]).len(), 1);
    // Without either, the data directory is used (here: a temporary $XDG_DATA_HOME).
    let mut c = memscope_cmd(db.dir.path());
    c.args(["init"]);
    assert!(c.output().unwrap().status.success());
    assert!(db.dir.path().join("xdg/memscope/memory.db").exists());
    // A relative XDG_DATA_HOME is not a place (the XDG rule): HOME's folder is used instead.
    let mut c = memscope_cmd(db.dir.path());
    c.env("XDG_DATA_HOME", "相对 xdg")
        .current_dir(db.dir.path())
        .args(["init"]);
    assert!(c.output().unwrap().status.success());
    assert!(db
        .dir
        .path()
        .join(".local/share/memscope/memory.db")
        .exists());
    assert!(!db.dir.path().join("相对 xdg").exists());
    // Neither set (a cron job, a stripped service environment): one sentence asking for --db,
    // and no database in the folder the command ran in; commands that open none still run.
    let cwd = db.sibling("工作 folder");
    std::fs::create_dir(&cwd).unwrap();
    for cmd in [
        &["init"][..],
        &["list"],
        &[
            "write",
            "--subject",
            U,
            "--predicate",
            PM,
            "--value",
            "x",
            "--scope",
            "global",
            "--source",
            "s",
        ],
    ] {
        let mut c = memscope_cmd(db.dir.path());
        c.env_remove("XDG_DATA_HOME")
            .env_remove("HOME")
            .current_dir(&cwd)
            .args(cmd);
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        assert_one_sentence(&String::from_utf8_lossy(&o.stderr), &["HOME", "--db"]);
    }
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "nothing made where it ran"
    );
    let mut c = memscope_cmd(db.dir.path());
    c.env_remove("XDG_DATA_HOME")
        .env_remove("HOME")
        .args(["completions", "bash"]);
    assert!(c.output().unwrap().status.success());
}

#[test]
fn seq_hands_out_increasing_numbers_and_write_takes_one_at_commit() {
    seq_hands_out_increasing_numbers_and_write_takes_one_at_commit_on(TestDb::new());
}

#[test]
fn seq_hands_out_increasing_numbers_and_write_takes_one_at_commit_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        seq_hands_out_increasing_numbers_and_write_takes_one_at_commit_on(db);
    }
}

fn seq_hands_out_increasing_numbers_and_write_takes_one_at_commit_on(db: TestDb) {
    let a: i64 = db.seq();
    let b: i64 = db.seq();
    assert!(b > a);
    let out = db.write(U, PM, "pnpm", "global", "t");
    assert!(out["causal_seq"].as_i64().unwrap() > b);
    // A write carrying an old number from `seq` keeps it (retries reuse the same number).
    let out = db.write_with(
        (U, "formatter"),
        "biome",
        "global",
        "t",
        &["--causal-seq", &a.to_string()],
    );
    assert_eq!(out["causal_seq"], a);
}

#[test]
fn usage_errors_exit_2() {
    let db = TestDb::new();
    for args in [
        vec!["no-such-command"],
        vec!["write", "--subject", U],
        vec!["resolve", "--predicate", PM],
        vec!["delete", "--subject", U, "--scope", "global"],
        // Zero reads asked for is a mistake, not "no logged reads match".
        vec!["reads", "--limit", "0"],
    ] {
        let r = db.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(!r.stderr.trim().is_empty());
    }
    assert!(!db.path.exists(), "usage errors create nothing");
}

/// `memscope list | head -1`: a reader that goes away early is not a crash.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let db = TestDb::new();
    let lines: Vec<Value> = (0..300)
        .map(|i| json!({"subject": format!("user:{i}"), "predicate": PM, "value": format!("值 {i}"), "scope": "global", "source": "s"}))
        .collect();
    db.run_stdin(&["apply"], jsonl(&lines).as_bytes()).ok();
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["export"],
        vec!["check"],
    ] {
        let mut child = db
            .command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader is gone before memscope prints anything
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !stderr.contains("panicked"),
            "`memscope {}` into a closed pipe panicked: {stderr}",
            args.join(" ")
        );
        assert_ne!(o.status.code(), Some(101), "{args:?}");
    }
}

#[test]
fn an_empty_raw_is_absent_in_write_and_apply_alike() {
    an_empty_raw_is_absent_in_write_and_apply_alike_on(TestDb::new());
}

#[test]
fn an_empty_raw_is_absent_in_write_and_apply_alike_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        an_empty_raw_is_absent_in_write_and_apply_alike_on(db);
    }
}

fn an_empty_raw_is_absent_in_write_and_apply_alike_on(db: TestDb) {
    db.write_with((U, "editor"), "helix", "global", "t:1", &["--raw", ""]);
    db.write_with((U, "shell"), "fish", "global", "t:2", &["--raw", "   "]);
    let line = json!({"subject": U, "predicate": "pager", "value": "less", "scope": "global", "source": "t:3", "raw": ""});
    let outs = db
        .run_stdin(&["apply", "-"], format!("{line}\n").as_bytes())
        .ok()
        .json_lines();
    assert_eq!(outs[0]["outcome"], "inserted", "{outs:?}");
    let list = db.list(&[]);
    assert_eq!(list.len(), 3);
    for r in &list {
        assert!(r["raw"].is_null(), "empty words are no words: {r}");
    }
}

/// Overwrites `len` bytes of the database file at `offset` (no other process has it open).
fn scribble(db: &TestDb, offset: u64, len: usize) {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&db.path)
        .unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(&vec![0xA5; len]).unwrap();
}

/// A database of a few hundred records, checkpointed into the main file.
fn filled() -> TestDb {
    let db = TestDb::new();
    let lines: String = (0..400)
        .map(|i| {
            format!(
                "{}\n",
                json!({"subject": U, "predicate": format!("p{i}"), "value": "v".repeat(200), "scope": "global", "source": "s"})
            )
        })
        .collect();
    db.run_stdin(&["apply", "-"], lines.as_bytes()).ok();
    // The last connection to close checkpoints the WAL and removes it.
    assert!(!db
        .sibling(&format!(
            "{}-wal",
            db.path.file_name().unwrap().to_str().unwrap()
        ))
        .exists());
    db
}

#[test]
fn check_reports_physical_damage_as_a_failed_check() {
    let db = filled();
    let report = db.check().1;
    assert_eq!(report["integrity"]["ok"], true, "{report}");
    assert_eq!(report["integrity"]["mode"], "quick");
    let pages = std::fs::metadata(&db.path).unwrap().len() / 4096;
    assert!(pages > 8, "{pages} pages");
    // Damage a page in the middle of the data.
    scribble(&db, (pages / 2) * 4096, 4096);
    for args in [&["check", "--json"][..], &["check", "--json", "--full"]] {
        let r = db.run(args);
        assert_eq!(r.code, 1, "{r:?}");
        let report = r.json();
        assert_eq!(report["ok"], false, "{report}");
        assert_eq!(report["integrity"]["ok"], false, "{report}");
        assert!(!report["integrity"]["problems"]
            .as_array()
            .unwrap()
            .is_empty());
    }
    let r = db.run(&["check"]);
    assert_eq!(r.code, 1);
    let damaged = lines_starting(&r.stdout, "DAMAGED");
    assert_eq!(damaged.len(), 1, "{}", r.stdout);
    assert!(damaged[0].contains("restore a backup"), "{}", damaged[0]);
}

#[test]
fn check_reports_a_file_too_damaged_to_open() {
    let db = filled();
    // The schema's own page, past the 100-byte header: SQLite cannot read what tables exist.
    scribble(&db, 100, 4096 - 100);
    let r = db.run(&["check", "--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.is_empty(),
        "the damage is the answer, not an error: {}",
        r.stderr
    );
    let report = r.json();
    assert_eq!(report["ok"], false);
    assert_eq!(report["integrity"]["ok"], false);
    let r = db.run(&["check"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout
            .starts_with("DAMAGED: the database file is damaged"),
        "{}",
        r.stdout
    );
    // Its header itself: the same answer, in JSON too (a script reads `ok`), while any
    // other command refuses the file in one sentence that says it is a damaged database.
    scribble(&db, 0, 16);
    let r = db.run(&["check", "--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    let report = r.json();
    assert_eq!(report["ok"], false, "{report}");
    assert!(
        report["integrity"]["problems"][0]
            .as_str()
            .unwrap()
            .contains("header is damaged"),
        "{report}"
    );
    let r = db.run(&["list"]);
    assert_eq!(r.code, 1);
    assert_one_sentence(&r.stderr, &["header is damaged", "restore a backup"]);
}

/// Found by review: `check` took a header with one field damaged for another kind of file
/// (byte 21), answered SQLite's raw "SQL logic error" (bytes 44–47), or said its first bytes
/// were not SQLite's when only the page size was wrong. Each names the field it found broken.
#[test]
fn check_names_the_header_field_that_is_damaged() {
    let sound = filled();
    let bytes = std::fs::read(&sound.path).unwrap();
    /// What is damaged, the bytes written over (offset, byte), and what check says.
    type Damage<'a> = (&'a str, &'a [(usize, u8)], &'a str);
    let cases: [Damage; 6] = [
        (
            "signature",
            &[(0, 0), (5, b'X')],
            "first 16 bytes are not SQLite's signature",
        ),
        (
            "page size 768",
            &[(16, 3), (17, 0)],
            "page size (bytes 16–17) reads 768",
        ),
        (
            "format version",
            &[(19, 7)],
            "file format versions (bytes 18–19) read 2 and 7",
        ),
        // A write version past 2: SQLite opens the file read-only, so every read passed and
        // check said ok while every write blamed permissions (found by review).
        (
            "write version",
            &[(18, 3)],
            "file format versions (bytes 18–19) read 3 and 2",
        ),
        (
            "payload fraction",
            &[(21, 0)],
            "payload fractions (bytes 21–23) read 0, 32, 32",
        ),
        (
            "schema format",
            &[(44, 0), (45, 0), (46, 0), (47, 9)],
            "schema format number (bytes 44–47) reads 9",
        ),
    ];
    for (what, edits, says) in cases {
        let db = TestDb::new();
        let mut damaged = bytes.clone();
        for &(at, b) in edits {
            damaged[at] = b;
        }
        std::fs::write(&db.path, &damaged).unwrap();
        let r = db.run(&["check"]);
        assert_eq!(r.code, 1, "{what}: {r:?}");
        assert!(
            r.stderr.is_empty(),
            "{what}: the damage is the answer: {}",
            r.stderr
        );
        assert!(
            r.stdout.starts_with("DAMAGED: ")
                && r.stdout.contains("header is damaged")
                && r.stdout.contains(says),
            "{what}: {}",
            r.stdout
        );
        let r = db.run(&["check", "--json"]);
        assert_eq!(r.json()["ok"], false, "{what}");
        assert_eq!(
            std::fs::read(&db.path).unwrap(),
            damaged,
            "{what}: check changed the file"
        );
    }
    // The write-version damage refuses writes without blaming the file's mode alone.
    let db = TestDb::new();
    let mut damaged = bytes.clone();
    damaged[18] = 3;
    std::fs::write(&db.path, &damaged).unwrap();
    db.run(&args_for(
        "write",
        "user:42",
        "editor",
        &["--value", "helix", "--scope", "global", "--source", "s"],
    ))
    .fails_with(1, &["read-only though its mode allows writing", "check"]);
    // Another kind of file — text, or a file of another format — is still not a database.
    let db = TestDb::new();
    std::fs::write(&db.path, "记忆 notes 📝\n".repeat(400)).unwrap();
    db.run(&["check"])
        .fails_with(1, &["not a SQLite database", "another kind of file"]);
}

#[test]
fn durability_is_full_unless_traded_away_and_check_says_which() {
    let db = TestDb::new();
    db.init();
    let (_, report) = db.check();
    assert_eq!(report["metrics"]["durability"], "full", "{report}");
    let r = db.run(&["settings", "--json"]).ok();
    assert_eq!(r.json()["durability"], "full");
    // Day counts are numbers in JSON, as scripts compare them.
    assert_eq!(
        (
            &r.json()["retention_days"],
            &r.json()["tombstone_safe_days"]
        ),
        (&serde_json::json!(0), &serde_json::json!(30))
    );
    let r = db
        .run(&["settings", "--json", "set", "retention_days", "90"])
        .ok();
    assert_eq!(r.json()["value"], 90);
    // `--json` after the value too, as the README's example writes it.
    let r = db
        .run(&["settings", "set", "retention_days", "91", "--json"])
        .ok();
    assert_eq!(r.json()["value"], 91);
    // `check` names the setting, and a connection opened after it syncs as it says (with
    // `normal`, at checkpoints only).
    let set = |word: &str, named: &str, syncs: memscope::store::Durability| {
        db.run(&["settings", "set", "durability", word]).ok();
        assert_eq!(db.check().1["metrics"]["durability"], named);
        assert_eq!(open_store(&db.path).durability().unwrap(), syncs);
    };
    set("normal", "normal", memscope::store::Durability::Normal);
    set("FULL", "full", memscope::store::Durability::Full);
    db.run(&["settings", "set", "durability", "sometimes"])
        .fails_with(2, &["durability must be full or normal"]);
    db.run(&["settings", "set", "colour", "red"])
        .fails_with(2, &["unknown setting", "durability"]);
}

/// A database without a day-count row (a dump that left it out, a raw client's DELETE) runs gc
/// with the default `settings` shows — not 0, which turned tombstone collection off while
/// `settings` said 30 (found by review).
#[test]
fn a_missing_day_count_is_the_default_settings_shows_for_gc_too() {
    a_missing_day_count_is_the_default_settings_shows_for_gc_too_on(TestDb::new());
}

#[test]
fn a_missing_day_count_is_the_default_settings_shows_for_gc_too_on_postgres() {
    on_postgres(a_missing_day_count_is_the_default_settings_shows_for_gc_too_on);
}

fn a_missing_day_count_is_the_default_settings_shows_for_gc_too_on(db: TestDb) {
    db.init();
    db.sql_execute("DELETE FROM settings WHERE key IN ('tombstone_safe_days', 'retention_days')")
        .unwrap();
    let shown = db.run(&["settings", "--json"]).ok().json();
    let gc = db.run(&["gc", "--json"]).ok().json();
    for key in ["tombstone_safe_days", "retention_days"] {
        assert_eq!(gc[key], shown[key], "{key}: gc {gc} / settings {shown}");
    }
    assert_eq!(gc["tombstone_safe_days"], 30, "{gc}");
}

/// Values and words that start with a hyphen — a flag an agent should remember, a negative
/// number, a list item — are taken as what they are, not as an unknown option.
#[test]
fn values_and_words_that_start_with_a_hyphen_are_taken_as_given() {
    let db = TestDb::new();
    let write = |predicate: &str, value_flag: &str, value: &str| {
        db.run(&[
            "write",
            "--subject",
            "user:42",
            "--predicate",
            predicate,
            value_flag,
            value,
            "--scope",
            "global",
            "--source",
            "s:1",
            "--raw",
            "- 装依赖时加上 --frozen-lockfile",
            "--json",
        ])
        .ok()
        .json()
    };
    assert_eq!(
        write("install_flags", "--value", "--frozen-lockfile")["value"],
        "--frozen-lockfile"
    );
    assert_eq!(write("retries", "--value-json", "-5")["value"], -5);
    let listed = db.list(&["--scope", "global"]);
    assert!(
        listed
            .iter()
            .all(|m| m["raw"] == "- 装依赖时加上 --frozen-lockfile"),
        "{listed:?}"
    );
    let run = db.run(&[
        "delete",
        "--subject",
        "user:42",
        "--predicate",
        "retries",
        "--scope",
        "global",
        "--reason",
        "-- asked by the user",
        "--yes",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    db.assert_check_ok();
}
