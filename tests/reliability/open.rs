//! Opening the database under concurrency (issue #11), with the real binary:
//!
//! - processes started at the same instant on a database path that does not exist yet — plain
//!   `memscope write`s and `memscope mcp` servers driven by the official Python MCP SDK — all
//!   succeed: none exits with "database is locked" (the switch to WAL must wait like any other
//!   lock), and every write is in the database afterwards;
//! - two MCP servers, each with several calls in flight (several connections open at once in
//!   one process) committing against each other: no call fails, nothing acknowledged is lost,
//!   the file passes `integrity_check`;
//! - the `busy_retries` metric counts waits once: uncontended calls after a contended phase do
//!   not move it, on the server that contended, on a new server, or from the CLI;
//! - the terminal UI open on the database, its worker threads kept busy (the filter, the Check
//!   tab), while writer processes commit: every acknowledged write is in the database with its
//!   value, `check` and SQLite's `integrity_check` pass, the UI shows the final state live and
//!   is still running, and the UI process keeps its POSIX lock on the database file throughout
//!   (read from `/proc/locks`: closing any other descriptor of the file in the process — a
//!   `std::fs` open of it — silently drops the lock its SQLite connections hold).
//!
//! The starts are released together by a gate: each process is a shell that opens a FIFO for
//! reading, drops a ready file, blocks on the FIFO, then execs memscope. The test holds the FIFO
//! open read+write from before the spawns (so the shells' opens do not block) and closes it when
//! all are ready: every shell reads end-of-file at once.
//!
//! `MEMSCOPE_TEST_BIN` runs the tests against another build of memscope (e.g. an older one, to
//! see them fail). Reproduce:
//! `cargo test --release --test reliability -- open:: --nocapture`

use crate::support::tmux::Tmux;
use crate::support::{args_for, assert_mcp_client_ok, clean_env, drain, require_python_mcp};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const STARTS_CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_starts.py");
/// The gate: `sh -c GATE sh FIFO READY_DIR BIN ARGS…`.
const GATE: &str = r#"exec 3<"$1"; : > "$2/$$"; read x <&3; exec 3<&-; shift 2; exec "$@""#;
/// How long any one process of these tests may take before it is killed and the test fails.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(60);
const SCREEN_TIMEOUT: Duration = Duration::from_secs(30);

/// The binary under test: this build, or `MEMSCOPE_TEST_BIN`.
fn bin() -> String {
    std::env::var("MEMSCOPE_TEST_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_memscope").to_string())
}

// ---------------------------------------------------------------------------------------------
// Processes

/// A `memscope` command with a clean, test-controlled environment.
fn memscope(home: &Path, db: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    clean_env(&mut c, home);
    c.arg("--db").arg(db).args(args);
    c
}

/// Children killed (and reaped) when dropped, also when a test panics.
#[derive(Default)]
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// Waits for a child until `deadline`, killing it then; returns its output. Its pipes are
/// drained while it runs, so a child with a lot to say cannot block on a full pipe.
fn finish(child: &mut Child, deadline: Instant) -> Output {
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = loop {
        match child.try_wait().expect("try_wait") {
            Some(s) => break s,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                break child.wait().expect("wait after kill");
            }
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// Runs a command to completion, bounded by `PROCESS_TIMEOUT`.
fn run(mut c: Command) -> Output {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut procs = Procs::default();
    procs.0.push(c.spawn().expect("spawn"));
    finish(&mut procs.0[0], Instant::now() + PROCESS_TIMEOUT)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `memscope … --json` that must succeed; stdout parsed.
#[track_caller]
fn json_ok(home: &Path, db: &Path, args: &[&str]) -> Value {
    let out = run(memscope(home, db, args));
    assert!(
        out.status.success(),
        "memscope {args:?} on {} failed ({})\nstdout: {}\nstderr: {}",
        db.display(),
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "memscope {args:?}: stdout is not JSON ({e}): {}",
            text(&out.stdout)
        )
    })
}

/// `check --json`: the report, asserted clean.
#[track_caller]
fn check_ok(home: &Path, db: &Path) -> Value {
    let out = run(memscope(home, db, &["check", "--json"]));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(
        out.status.success() && report["ok"] == Value::Bool(true),
        "check failed on {} ({})\nstdout: {}\nstderr: {}",
        db.display(),
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    report
}

fn busy_retries(home: &Path, db: &Path) -> i64 {
    let report = check_ok(home, db);
    report["metrics"]["busy_retries"]
        .as_i64()
        .unwrap_or_else(|| panic!("check --json has no metrics.busy_retries: {report:#}"))
}

/// The current view as `(subject, predicate, scope) → (value, version)`.
fn current_view(home: &Path, db: &Path) -> BTreeMap<(String, String, String), (Value, i64)> {
    let list = json_ok(home, db, &["list", "--json"]);
    let rows = list.as_array().expect("list --json is an array");
    rows.iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (
                (s("subject"), s("predicate"), s("scope")),
                (r["value"].clone(), r["version"].as_i64().unwrap_or(-1)),
            )
        })
        .collect()
}

const INTEGRITY_CHECK: &str = r#"
import sqlite3, sys
try:
    c = sqlite3.connect(sys.argv[1])
    print("\n".join(r[0] for r in c.execute("PRAGMA integrity_check")))
    c.close()
except sqlite3.DatabaseError as e:
    print(f"sqlite3 refused the file: {e}")
"#;

/// SQLite's own verdict on the file, from a client that is not ours (Python's `sqlite3`).
fn integrity_check(db: &Path) -> String {
    let mut c = Command::new("python3");
    c.args(["-c", INTEGRITY_CHECK]).arg(db).stdin(Stdio::null());
    let out = run(c);
    assert!(
        out.status.success(),
        "python3 sqlite3 integrity_check could not run: {}",
        text(&out.stderr)
    );
    text(&out.stdout).trim().to_string()
}

/// Runs `tests/mcp_starts.py MODE BIN DB ARGS…`; its JSON result.
fn starts_client(mode: &str, db: &Path, args: &[&str]) -> Value {
    let mut c = Command::new("python3");
    c.arg(STARTS_CLIENT)
        .arg(mode)
        .arg(bin())
        .arg(db)
        .args(args)
        .env_remove("MEMSCOPE_DB")
        .env_remove("MEMSCOPE_BUSY_TIMEOUT_MS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Procs::default();
    child
        .0
        .push(c.spawn().expect("run python3 tests/mcp_starts.py"));
    let out = finish(&mut child.0[0], Instant::now() + Duration::from_secs(240));
    let (stdout, _) = assert_mcp_client_ok(&out, &format!("tests/mcp_starts.py {mode}"));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("tests/mcp_starts.py {mode}: stdout is not JSON ({e}): {stdout}")
    })
}

// ---------------------------------------------------------------------------------------------
// The gate

/// A FIFO held open read+write by the test, and a directory of ready files.
struct Gate {
    fifo: PathBuf,
    ready: PathBuf,
    holder: Option<File>,
}

impl Gate {
    fn new(dir: &Path) -> Gate {
        let fifo = dir.join("gate");
        let ready = dir.join("ready");
        std::fs::create_dir(&ready).expect("ready dir");
        let c = CString::new(fifo.as_os_str().as_bytes()).expect("fifo path");
        // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(rc, 0, "mkfifo: {}", std::io::Error::last_os_error());
        // Opened read+write (and close-on-exec, as std opens everything): the shells' opens for
        // reading return at once, and no child holds a writer.
        let holder = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .expect("open the gate read+write");
        Gate {
            fifo,
            ready,
            holder: Some(holder),
        }
    }

    /// `sh -c GATE sh FIFO READY BIN --db DB ARGS…`.
    fn memscope(&self, home: &Path, db: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("sh");
        clean_env(&mut c, home);
        c.arg("-c")
            .arg(GATE)
            .arg("sh")
            .arg(&self.fifo)
            .arg(&self.ready)
            .arg(bin())
            .arg("--db")
            .arg(db)
            .args(args);
        c
    }

    fn ready_count(&self) -> usize {
        std::fs::read_dir(&self.ready).map_or(0, |d| d.count())
    }

    /// Waits until `n` processes are at the gate, then releases them all at once.
    fn release_when_ready(&mut self, n: usize, procs: &mut Procs) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.ready_count() < n {
            let exited = procs
                .0
                .iter_mut()
                .filter_map(|c| c.try_wait().ok().flatten())
                .count();
            assert!(
                exited == 0,
                "{exited} process(es) exited before the gate opened"
            );
            assert!(
                Instant::now() < deadline,
                "only {} of {n} processes reached the gate",
                self.ready_count()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        self.holder = None; // the last writer closes: every reader sees end-of-file now
    }
}

// ---------------------------------------------------------------------------------------------
// Simultaneous starts

/// After a round in which every start was answered: `check` passes and the current view holds
/// exactly `expected` (predicate, value) for user:s in `scope`, each as v1. What differs, one
/// line each, `round` naming the round.
fn view_failures(
    home: &Path,
    db: &Path,
    scope: &str,
    expected: &[(String, String)],
    round: &str,
) -> Vec<String> {
    check_ok(home, db);
    let view = current_view(home, db);
    let mut failures = Vec::new();
    for (predicate, value) in expected {
        let key = ("user:s".to_string(), predicate.clone(), scope.to_string());
        match view.get(&key) {
            Some((v, 1)) if v == &Value::String(value.clone()) => {}
            other => failures.push(format!(
                "{round}: {key:?} was answered inserted but the database has {other:?}"
            )),
        }
    }
    if view.len() != expected.len() {
        failures.push(format!(
            "{round}: {} records, expected {}",
            view.len(),
            expected.len()
        ));
    }
    failures
}

/// One round: `n` `memscope write`s released at one instant on `db`, which does not exist.
/// Returns a description of each failure.
fn cli_round(n: usize, round: usize, db: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    assert!(!db.exists());
    let mut gate = Gate::new(home);
    let mut procs = Procs::default();
    let mut expected = Vec::new();
    for i in 0..n {
        let predicate = format!("start_{i}");
        let value = format!("value-{n}-{round}-{i}");
        let source = format!("start:{n}:{round}:{i}");
        let mut c = gate.memscope(
            home,
            db,
            &args_for(
                "write",
                "user:s",
                &predicate,
                &[
                    "--value", &value, "--scope", "global", "--source", &source, "--json",
                ],
            ),
        );
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        procs
            .0
            .push(c.spawn().expect("spawn a gated memscope write"));
        expected.push((predicate, value));
    }
    gate.release_when_ready(n, &mut procs);
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    let mut failures = Vec::new();
    for (i, child) in procs.0.iter_mut().enumerate() {
        let out = finish(child, deadline);
        let outcome: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if !out.status.success() || outcome["outcome"] != "inserted" {
            failures.push(format!(
                "{n} processes, round {round}, writer {i}: {} — stdout {:?} stderr {:?}",
                out.status,
                text(&out.stdout).trim(),
                text(&out.stderr).trim()
            ));
        }
    }
    if failures.is_empty() {
        let round = format!("{n} processes, round {round}");
        failures = view_failures(home, db, "global", &expected, &round);
    }
    failures
}

/// What went wrong in rounds of simultaneous starts, and how many rounds failed by the number
/// of processes each round started.
struct RoundFailures {
    started: Instant,
    failures: Vec<String>,
    failed_rounds: BTreeMap<usize, usize>,
}

impl RoundFailures {
    fn new() -> RoundFailures {
        RoundFailures {
            started: Instant::now(),
            failures: Vec::new(),
            failed_rounds: BTreeMap::new(),
        }
    }

    /// One round of `n` processes and what went wrong in it.
    fn record(&mut self, n: usize, failures: Vec<String>) {
        if !failures.is_empty() {
            *self.failed_rounds.entry(n).or_insert(0) += 1;
        }
        self.failures.extend(failures);
    }

    /// Prints `done` with the time taken; fails when a round failed (`what` failed, counted by
    /// `per` per round).
    #[track_caller]
    fn assert_none(self, done: &str, what: &str, per: &str) {
        let failed_rounds = &self.failed_rounds;
        eprintln!(
            "{done} in {:.1} s; rounds with a failure: {failed_rounds:?}",
            self.started.elapsed().as_secs_f64()
        );
        assert!(
            self.failures.is_empty(),
            "{what} failed — rounds with a failure by {per} per round: {failed_rounds:?}\n{}",
            self.failures.join("\n")
        );
    }
}

#[test]
fn simultaneous_cli_starts_on_a_new_path() {
    let mut failures = RoundFailures::new();
    for (n, rounds) in [(2usize, 20usize), (8, 20)] {
        for round in 0..rounds {
            let dir = tempfile::tempdir().expect("tempdir");
            // Odd rounds: the parent directories are missing too, and created concurrently.
            let db = if round % 2 == 1 {
                dir.path().join("a").join("b").join("new.db")
            } else {
                dir.path().join("new.db")
            };
            failures.record(n, cli_round(n, round, &db));
        }
    }
    failures.assert_none(
        "simultaneous CLI starts: 20 rounds of 2 and 20 of 8",
        "simultaneous `memscope write`s on a new path",
        "processes",
    );
}

#[test]
fn simultaneous_mcp_starts_on_a_new_path() {
    require_python_mcp();
    let mut failures = RoundFailures::new();
    for (n, rounds, tag) in [(2usize, 30usize, "a"), (8, 15, "b")] {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        let base = home.join("new.db");
        let result = starts_client(
            "starts",
            &base,
            &[
                "--servers",
                &n.to_string(),
                "--rounds",
                &rounds.to_string(),
                "--tag",
                tag,
            ],
        );
        let rounds_out = result["rounds"].as_array().expect("rounds");
        assert_eq!(rounds_out.len(), rounds, "{result:#}");
        for (k, r) in rounds_out.iter().enumerate() {
            let db = PathBuf::from(r["db"].as_str().expect("db"));
            let mut round_failures = Vec::new();
            let servers = r["servers"].as_array().expect("servers");
            assert_eq!(servers.len(), n);
            for s in servers {
                let i = s["index"].as_u64().unwrap_or(0);
                let value = format!("value-{tag}{k}-{i}");
                if s["initialized"] != true
                    || s["outcome"] != "inserted"
                    || s["recall_value"] != Value::String(value)
                    || !s["error"].is_null()
                {
                    round_failures.push(format!(
                        "{n} servers, round {k}, server {i}: initialized {}, remember {}, recall {}, error {}; server stderr: {:?}",
                        s["initialized"],
                        s["outcome"],
                        s["recall_value"],
                        s["error"],
                        s["stderr"].as_str().unwrap_or("").trim()
                    ));
                }
            }
            if round_failures.is_empty() {
                let expected: Vec<(String, String)> = (0..n)
                    .map(|i| (format!("start_{tag}{k}_{i}"), format!("value-{tag}{k}-{i}")))
                    .collect();
                let round = format!("{n} servers, round {k}");
                round_failures = view_failures(home, &db, "repo:r", &expected, &round);
            }
            failures.record(n, round_failures);
        }
    }
    failures.assert_none(
        "simultaneous MCP starts: 30 rounds of 2 and 15 of 8 servers",
        "simultaneous `memscope mcp` starts on a new path",
        "servers",
    );
}

// ---------------------------------------------------------------------------------------------
// busy_retries

#[test]
fn busy_retries_unchanged_by_uncontended_calls() {
    require_python_mcp();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("busy.db");
    // One call in flight per server: the metric alone is under test here (calls in flight on
    // one server are `mcp_servers_with_calls_in_flight_lose_nothing`).
    let r = starts_client(
        "contend_then_idle",
        &db,
        &["--secs", "3", "--in-flight", "1", "--calls", "20"],
    );
    eprintln!("busy_retries over MCP: {r}");
    let get = |k: &str| r[k].as_i64().unwrap_or_else(|| panic!("no {k} in {r}"));
    let (b0, b1, b2, b3) = (get("b0"), get("b1"), get("b2"), get("b3"));
    assert!(
        b1 > b0,
        "two servers with calls in flight for 3 s never waited on each other ({r}): the test needs contention"
    );
    assert_eq!(
        b2, b1,
        "20 uncontended remember+recall pairs on the server that had contended moved busy_retries from {b1} to {b2} ({r})"
    );
    assert_eq!(
        b3, b1,
        "20 uncontended remember+recall pairs on a new server moved busy_retries from {b1} to {b3} ({r})"
    );
    check_ok(dir.path(), &db);
}

/// Two MCP servers, each with several calls in flight (so each process has several
/// connections open at once, on blocking threads), committing against each other: no call
/// fails, every recall returns the value just remembered, every remember answered inserted is
/// in the database afterwards, and the file is sound.
#[test]
fn mcp_servers_with_calls_in_flight_lose_nothing() {
    require_python_mcp();
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let db = home.join("inflight.db");
    let r = starts_client("contend", &db, &["--secs", "3", "--in-flight", "4"]);
    let errors: Vec<&str> = r["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let acked = r["acknowledged"].as_array().expect("acknowledged");
    eprintln!(
        "two MCP servers, 4 calls in flight each for 3 s: {} remember+recall pairs, {} remembers acknowledged, {} failed calls",
        r["calls"],
        acked.len(),
        errors.len()
    );
    let integrity = integrity_check(&db);
    let check = run(memscope(home, &db, &["check", "--json"]));
    let view = if check.status.success() {
        current_view(home, &db)
    } else {
        BTreeMap::new()
    };
    let missing: Vec<String> = acked
        .iter()
        .filter(|a| {
            let key = (
                "user:s".to_string(),
                a[0].as_str().unwrap_or_default().to_string(),
                "global".to_string(),
            );
            view.get(&key).map(|(v, _)| v) != Some(&a[1])
        })
        .map(|a| a.to_string())
        .take(20)
        .collect();
    assert!(
        errors.is_empty(),
        "{} call(s) failed while two servers with calls in flight committed (integrity_check: {integrity}); the first ones:\n{}",
        errors.len(),
        errors.iter().take(10).copied().collect::<Vec<_>>().join("\n")
    );
    assert!(
        acked.len() >= 20,
        "too few calls completed to mean anything: {r}"
    );
    assert_eq!(
        integrity, "ok",
        "SQLite integrity_check on the database file"
    );
    assert!(
        check.status.success(),
        "check failed: {} {}",
        text(&check.stdout),
        text(&check.stderr)
    );
    assert!(
        missing.is_empty(),
        "remembers answered inserted are missing from the database (first 20): {missing:?}"
    );
}

#[test]
fn busy_retries_unchanged_by_uncontended_cli_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let db = home.join("busy.db");
    let out = run(memscope(home, &db, &["init"]));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    // Contention: `apply` streams and `write` loops at the same time.
    let stop_writes = Arc::new(AtomicBool::new(false));
    let mut procs = Procs::default();
    for a in 0..2 {
        let lines: String = (0..3000)
            .map(|i| {
                format!(
                    "{{\"subject\":\"user:a{a}\",\"predicate\":\"bulk_{i}\",\"value\":{i},\"scope\":\"global\",\"source\":\"contend\"}}\n"
                )
            })
            .collect();
        let mut c = memscope(home, &db, &["apply", "-"]);
        c.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn apply");
        let mut stdin = child.stdin.take().expect("stdin");
        procs.0.push(child);
        std::thread::spawn(move || {
            for chunk in lines.as_bytes().chunks(4096) {
                if stdin.write_all(chunk).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
    }
    let loops: Vec<_> = (0..3)
        .map(|w| {
            let home = home.to_path_buf();
            let db = db.clone();
            let stop = stop_writes.clone();
            std::thread::spawn(move || {
                let mut failed = Vec::new();
                for i in 0..40 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let out = run(memscope(
                        &home,
                        &db,
                        &args_for(
                            "write",
                            &format!("user:w{w}"),
                            &format!("loop_{i}"),
                            &[
                                "--value", "x", "--scope", "global", "--source", "contend",
                                "--json",
                            ],
                        ),
                    ));
                    if !out.status.success() {
                        failed.push(text(&out.stderr));
                    }
                }
                failed
            })
        })
        .collect();
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    let mut apply_failures = Vec::new();
    for child in &mut procs.0 {
        let out = finish(child, deadline);
        if !out.status.success() {
            apply_failures.push(format!("{}: {}", out.status, text(&out.stderr)));
        }
    }
    stop_writes.store(true, Ordering::SeqCst);
    let loop_failures: Vec<String> = loops
        .into_iter()
        .flat_map(|h| h.join().expect("writer loop"))
        .collect();
    assert!(
        apply_failures.is_empty() && loop_failures.is_empty(),
        "writers failed under contention: {apply_failures:?} {loop_failures:?}"
    );
    let b1 = busy_retries(home, &db);
    assert!(
        b1 > 0,
        "the contended phase took no busy retries: the test needs contention"
    );
    for i in 0..20 {
        let o = json_ok(
            home,
            &db,
            &args_for(
                "write",
                "user:idle",
                &format!("idle_{i}"),
                &[
                    "--value", "y", "--scope", "global", "--source", "idle", "--json",
                ],
            ),
        );
        assert_eq!(o["outcome"], "inserted", "{o}");
    }
    let b2 = busy_retries(home, &db);
    eprintln!("busy_retries over the CLI: after contention {b1}, after 20 uncontended writes {b2}");
    assert_eq!(
        b2, b1,
        "20 uncontended `memscope write`s moved busy_retries from {b1} to {b2}"
    );
}

// ---------------------------------------------------------------------------------------------
// The UI beside committing writers

/// The pid of the program running in the pane's shell (the UI).
fn pane_child(t: &Tmux) -> u32 {
    let shell = text(
        &t.tmux(&["display-message", "-p", "-t", "e2e", "#{pane_pid}"])
            .stdout,
    );
    let shell = shell.trim();
    let start = Instant::now();
    loop {
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .unwrap_or_default();
        if let Some(pid) = children
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .next_back()
        {
            return pid;
        }
        assert!(
            start.elapsed() < SCREEN_TIMEOUT,
            "the shell in the pane ({shell}) started no program"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `pid` holds a POSIX lock on the file with inode `ino` (Linux: `/proc/locks`). A
/// SQLite connection in WAL mode holds a shared lock on the database file from its first read
/// until it closes; closing any other descriptor of the file in the same process drops it.
///
/// `/proc/locks` is generated as it is read, and the list moves while the writers take and
/// drop their locks, so one reading can miss a line: a sample looks up to five times. A lock
/// dropped by a stray `close` stays dropped (SQLite never takes it again), so a real loss is
/// still seen in every sample.
fn holds_lock_on(pid: u32, ino: u64) -> bool {
    let pid = pid.to_string();
    let ino = format!(":{ino}");
    (0..5).any(|attempt| {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks (Linux)");
        locks.lines().filter(|l| !l.contains("->")).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.windows(2).any(|w| w[0] == pid && w[1].ends_with(&ino))
        })
    })
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// "1,234" as the UI prints counts.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One write a writer was told about.
#[derive(Debug, Clone)]
struct Ack {
    subject: String,
    predicate: String,
    value: String,
    outcome: String,
    version: i64,
}

/// What the writers were told: each acknowledged write, and each write that failed.
#[derive(Default)]
struct Told {
    acks: Mutex<Vec<Ack>>,
    errors: Mutex<Vec<String>>,
}

impl Told {
    /// One `memscope write --scope global --json` of `[subject, predicate, value, source]`;
    /// `who` names it among the errors.
    fn write_global(
        &self,
        home: &Path,
        db: &Path,
        who: &str,
        [subject, predicate, value, source]: [&str; 4],
    ) {
        let out = run(memscope(
            home,
            db,
            &args_for(
                "write",
                subject,
                predicate,
                &[
                    "--value", value, "--scope", "global", "--source", source, "--json",
                ],
            ),
        ));
        let o: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if out.status.success() && o["outcome"].is_string() {
            self.acks.lock().unwrap().push(Ack {
                subject: subject.into(),
                predicate: predicate.into(),
                value: value.into(),
                outcome: o["outcome"].as_str().unwrap_or_default().into(),
                version: o["version"].as_i64().unwrap_or(-1),
            });
        } else {
            self.errors.lock().unwrap().push(format!(
                "{who}: {} {} {}",
                out.status,
                text(&out.stdout).trim(),
                text(&out.stderr).trim()
            ));
        }
    }
}

const WRITERS: usize = 3;
const WRITES_EACH: usize = 300;
const PREDICATES_EACH: usize = 180;
/// A pause between one writer's writes, so the writers overlap the UI's work for seconds.
const WRITE_PAUSE: Duration = Duration::from_millis(4);

#[test]
fn ui_open_with_busy_workers_while_writers_commit() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().to_path_buf();
    let db = home.join("ui.db");

    // Something for the filter to scan.
    let seed: String = (0..400)
        .map(|i| {
            format!(
                "{{\"subject\":\"user:seed{}\",\"predicate\":\"seed_{i}\",\"value\":\"seed value {i}\",\"scope\":\"global\",\"source\":\"seed\"}}\n",
                i % 7
            )
        })
        .collect();
    let seed_file = home.join("seed.jsonl");
    std::fs::write(&seed_file, seed).expect("seed file");
    let out = run(memscope(
        &home,
        &db,
        &["apply", seed_file.to_str().expect("utf-8")],
    ));
    assert!(
        out.status.success(),
        "seeding failed: {}",
        text(&out.stderr)
    );

    let t = Tmux::start(100, 30);
    t.type_text("PS1='$ '; clear");
    t.key("Enter");
    t.type_text(&format!(
        "MEMSCOPE_ASSERT_INVARIANTS=1 HOME={} {} --db {}; echo \"EXIT\"\":$?\"",
        shell_quote(home.to_str().expect("utf-8")),
        shell_quote(&bin()),
        shell_quote(db.to_str().expect("utf-8"))
    ));
    t.key("Enter");
    t.wait_for("Current view · ");
    t.wait_for("400 identities");
    let ui_pid = pane_child(&t);
    let db_ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&db).expect("db"));

    // Writers: each its own subject, a `memscope write` process per write, some identities
    // written twice (superseded). What each was told is recorded.
    let told: Arc<Told> = Arc::default();
    let done = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (home, db) = (home.clone(), db.clone());
            let (told, done) = (told.clone(), done.clone());
            std::thread::spawn(move || {
                for i in 0..WRITES_EACH {
                    let subject = format!("user:w{w}");
                    let predicate = format!("item_{}", i % PREDICATES_EACH);
                    let value = format!("w{w} write {i}");
                    let source = format!("writer:{w}:{i}");
                    let who = format!("writer {w}, write {i}");
                    told.write_global(&home, &db, &who, [&subject, &predicate, &value, &source]);
                    std::thread::sleep(WRITE_PAUSE);
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();

    // Meanwhile: keep the UI's worker threads busy — the filter (typing, erasing, clearing)
    // and the Check tab — and the UI's own refreshes.
    let mut cycles = 0;
    let mut lock_samples = (0usize, 0usize); // (held, missing)
    let queries = ["w1 item", "seed 3", "item_1", "w2 write 4", "user:w0"];
    while done.load(Ordering::SeqCst) < WRITERS {
        let q = queries[cycles % queries.len()];
        t.key("1");
        t.key("/");
        for ch in q.chars() {
            t.type_text(&ch.to_string());
            std::thread::sleep(Duration::from_millis(15));
        }
        t.key("BSpace");
        t.key("BSpace");
        t.type_text("1");
        std::thread::sleep(Duration::from_millis(40));
        if cycles % 2 == 0 {
            t.key("Escape"); // clear the filter
        } else {
            t.key("Enter"); // keep it …
            t.key("Escape"); // … then clear it from the list
        }
        t.key("4");
        t.wait_for("Check · invariants and health");
        std::thread::sleep(Duration::from_millis(40));
        t.key("1");
        // Both worker threads have their connections by now (a filter ran, a check was asked
        // for): the UI's own connections must still hold their lock on the database file.
        if holds_lock_on(ui_pid, db_ino) {
            lock_samples.0 += 1;
        } else {
            lock_samples.1 += 1;
        }
        cycles += 1;
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "the writers did not finish in time"
        );
    }
    for h in writers {
        h.join().expect("writer thread");
    }
    // Two more writes with the UI left alone: it must show them by itself (it polls
    // `PRAGMA data_version`), without a key press to make it reload.
    for i in 0..2 {
        let (predicate, value) = (format!("late_{i}"), format!("late {i}"));
        let who = format!("late write {i}");
        told.write_global(&home, &db, &who, ["user:late", &predicate, &value, "late"]);
    }
    let acks = told.acks.lock().unwrap().clone();
    let errors = told.errors.lock().unwrap().clone();

    // Every acknowledged write is there, with its value; versions have no gaps.
    let view = current_view(&home, &db);
    let mut last: BTreeMap<(String, String), &Ack> = BTreeMap::new();
    let mut count: BTreeMap<(String, String), i64> = BTreeMap::new();
    for a in &acks {
        let k = (a.subject.clone(), a.predicate.clone());
        *count.entry(k.clone()).or_default() += 1;
        last.insert(k, a); // each writer's writes are sequential: the last one is current
    }
    let mut lost = Vec::new();
    for ((subject, predicate), a) in &last {
        let key = (subject.clone(), predicate.clone(), "global".to_string());
        let n = count[&(subject.clone(), predicate.clone())];
        match view.get(&key) {
            Some((v, version))
                if *v == Value::String(a.value.clone()) && *version == a.version && *version == n => {}
            other => lost.push(format!(
                "{subject} · {predicate}: last acknowledged {} v{} = {:?} ({n} acknowledged writes), database has {other:?}",
                a.outcome, a.version, a.value
            )),
        }
    }
    let wrong_outcomes: Vec<&Ack> = acks
        .iter()
        .filter(|a| {
            let expect = if a.version == 1 {
                "inserted"
            } else {
                "superseded"
            };
            a.outcome != expect
        })
        .collect();
    let integrity = integrity_check(&db);
    let report = run(memscope(&home, &db, &["check", "--json"]));

    // The UI shows the final state live and is still running.
    let expected_total = view.len();
    let header = format!("{} identities", thousands(expected_total));
    let live = {
        let start = Instant::now();
        loop {
            let s = t.screen();
            if s.contains(&header) {
                break Ok(s);
            }
            if start.elapsed() > Duration::from_secs(15) {
                break Err(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let alive_screen = t.screen();
    let lock_at_end = holds_lock_on(ui_pid, db_ino);
    eprintln!(
        "UI beside {WRITERS} writers: {} writes acknowledged, {} failed, {cycles} filter/check cycles, \
         UI's lock on the database file held in {} of {} samples (at the end: {lock_at_end}), {:.1} s",
        acks.len(),
        errors.len(),
        lock_samples.0,
        lock_samples.0 + lock_samples.1,
        started.elapsed().as_secs_f64()
    );

    assert!(
        lost.is_empty(),
        "acknowledged writes are missing or wrong:\n{}",
        lost.join("\n")
    );
    assert!(
        errors.is_empty(),
        "writes failed while the UI was open:\n{}",
        errors.join("\n")
    );
    assert_eq!(acks.len(), WRITERS * WRITES_EACH + 2);
    assert!(
        wrong_outcomes.is_empty(),
        "unexpected outcomes: {wrong_outcomes:?}"
    );
    assert_eq!(
        expected_total,
        400 + WRITERS * PREDICATES_EACH + 2,
        "the current view has records nobody wrote"
    );
    assert_eq!(
        integrity, "ok",
        "SQLite integrity_check on the database file"
    );
    let report_json: Value = serde_json::from_slice(&report.stdout).unwrap_or(Value::Null);
    assert!(
        report.status.success() && report_json["ok"] == true,
        "check failed after the run: {} {}",
        text(&report.stdout),
        text(&report.stderr)
    );
    assert!(
        !alive_screen.contains("EXIT:") && alive_screen.contains(" memscope "),
        "the UI is no longer running; the screen:\n{alive_screen}"
    );
    assert!(
        lock_samples.1 == 0 && lock_at_end,
        "the UI process (pid {ui_pid}) lost its POSIX lock on the database file in {} of {} samples \
         (at the end: held {lock_at_end}): something in it closed a descriptor of the file, which drops \
         every lock the process's SQLite connections hold, so other processes no longer see its connections",
        lock_samples.1,
        lock_samples.0 + lock_samples.1
    );
    if let Err(s) = live {
        panic!("the UI never showed the final {header:?} within 15 s of the last commit (it stopped seeing other processes' commits); the screen:\n{s}");
    }

    // The Check tab agrees, and the UI quits cleanly.
    t.key("4");
    let s = t.wait("the UI's check result", |s| {
        s.contains("all six invariants hold") || s.contains("violation")
    });
    assert!(s.contains("all six invariants hold"), "the UI's check: {s}");
    t.key("q");
    let s = t.wait_for("EXIT:");
    assert!(s.contains("EXIT:0"), "the UI did not exit 0:\n{s}");
}

/// Python 3 and its `mcp` package are installed (CI installs both): a missing one fails the
/// suite here by name rather than letting the MCP tests pass vacuously.
#[test]
fn python_and_the_mcp_sdk_are_installed() {
    require_python_mcp();
}

/// The gate itself: processes held at it leave it together.
#[test]
fn gate_releases_all_processes_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut gate = Gate::new(dir.path());
    let mut procs = Procs::default();
    let stamps = dir.path().join("stamps");
    std::fs::create_dir(&stamps).expect("stamps dir");
    for i in 0..4 {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(GATE)
            .arg("sh")
            .arg(&gate.fifo)
            .arg(&gate.ready)
            .arg("sh")
            .arg("-c")
            .arg(format!("date +%s%N > {}/{i}", stamps.display()))
            .stdin(Stdio::null());
        procs.0.push(c.spawn().expect("spawn"));
    }
    gate.release_when_ready(4, &mut procs);
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    for c in &mut procs.0 {
        assert!(finish(c, deadline).status.success());
    }
    let times: Vec<u128> = (0..4)
        .map(|i| {
            let f = File::open(stamps.join(i.to_string())).expect("stamp");
            let mut line = String::new();
            BufReader::new(f).read_line(&mut line).expect("read stamp");
            line.trim().parse().expect("nanoseconds")
        })
        .collect();
    let spread = times.iter().max().unwrap() - times.iter().min().unwrap();
    assert!(
        spread < 1_000_000_000,
        "the gate let processes through {spread} ns apart"
    );
}

/// A write request of one exact scope.
fn req(
    subject: &str,
    predicate: &str,
    value: Value,
    scope: &str,
    source: &str,
) -> memscope::WriteRequest {
    memscope::WriteRequest {
        subject: subject.into(),
        predicate: predicate.into(),
        value,
        scope: memscope::ScopeChoice::Exact(memscope::Scope::parse(scope).unwrap()),
        source: source.into(),
        raw: None,
        causal_seq: None,
        context: None,
    }
}

/// Descriptors of this process open on files under `dir`.
fn fds_under(dir: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|entries| {
            entries
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|target| target.starts_with(dir))
                .count()
        })
        .unwrap_or(0)
}

/// The MCP server and the UI's workers open and drop stores for the process's whole life: a
/// store must give back every descriptor it took, including after its prepared statements
/// ran (a statement left unfinalized makes `sqlite3_close` fail, and the connection leaks).
#[test]
fn a_thousand_stores_opened_and_dropped_leave_no_descriptor_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fds.db");
    let mut keep = memscope::Store::open(&path, memscope::OpenMode::Create).unwrap();
    keep.write(&req(
        "user:1",
        "editor",
        serde_json::json!("helix"),
        "global",
        "s",
    ))
    .unwrap();
    let before = fds_under(dir.path());
    assert!(before >= 1, "the open store holds the file");
    for i in 0..1000 {
        let mut store = memscope::Store::open(&path, memscope::OpenMode::Existing).unwrap();
        // New identities take the prepared statements (the one-statement insert and its event).
        store
            .write(&req(
                "user:1",
                &format!("p{i}"),
                serde_json::json!(i),
                "global",
                "s",
            ))
            .unwrap();
        store.resolve("user:1", "editor", None, None).unwrap();
    }
    // While another connection of the process holds a lock, SQLite keeps a closed
    // connection's descriptor for the next open to reuse (closing it would drop the process's
    // locks): one at most, never one per store.
    let after = fds_under(dir.path());
    assert!(
        after <= before + 1,
        "{after} descriptors on the database after 1,000 stores were opened and dropped ({before} before)"
    );
    assert_eq!(keep.list(&Default::default()).unwrap().len(), 1001);
    drop(keep);
    assert_eq!(fds_under(dir.path()), 0, "the last store closed every file");
}

/// A refused `import` into a path where no file was removes the file it made — but not a
/// write another process committed into it meanwhile (README, "seq, alias, export / import"):
/// a write that waited for the import's lock commits once the import rolls back, and the
/// removal that followed took the file with a write its client was told was `inserted` (found
/// by an exploratory test, through the CLI and through MCP). A dump cut short — a big one, so
/// the import takes a while to refuse it — imports into a new path while writers start on that
/// path; every writer told `inserted` finds its write in the file at the end, `check` and
/// SQLite's integrity check clean; a writer refused was told nothing was written.
#[test]
fn a_refused_import_keeps_what_another_process_wrote_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let source = dir.path().join("source.db");
    assert!(run(memscope(&home, &source, &["init"])).status.success());
    json_ok(
        &home,
        &source,
        &args_for(
            "write",
            "user:1",
            "package_manager",
            &[
                "--value", "pnpm", "--scope", "global", "--source", "s:1", "--json",
            ],
        ),
    );
    json_ok(
        &home,
        &source,
        &args_for(
            "resolve",
            "user:1",
            "package_manager",
            &["--log", "--agent", "读者 📖", "--json"],
        ),
    );
    let dump = run(memscope(&home, &source, &["export"]));
    assert!(dump.status.success(), "{}", text(&dump.stderr));
    let lines: Vec<Value> = text(&dump.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let read = lines
        .iter()
        .find(|l| l["table"] == "reads")
        .expect("the export holds the read")
        .clone();
    // Every line but the end line, and many reads after them: the import reads them all, then
    // finds no end line and refuses the whole file.
    let cut = dir.path().join("cut.jsonl");
    let mut out = std::io::BufWriter::new(File::create(&cut).unwrap());
    for l in lines
        .iter()
        .filter(|l| l["table"] != "reads" && l["table"] != "memscope_export_end")
    {
        writeln!(out, "{l}").unwrap();
    }
    for id in 1..=200_000 {
        let mut r = read.clone();
        r["id"] = id.into();
        writeln!(out, "{r}").unwrap();
    }
    out.flush().unwrap();
    drop(out);

    let target = dir.path().join("race.db");
    let mut procs = Procs::default();
    let mut import = memscope(&home, &target, &["import", cut.to_str().unwrap()]);
    import.stdout(Stdio::piped()).stderr(Stdio::piped());
    procs.0.push(import.spawn().unwrap());
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    while !target.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(target.exists(), "the import made its file");
    std::thread::sleep(Duration::from_millis(200));
    let mut writers = Vec::new();
    for i in 0..3 {
        assert!(
            matches!(procs.0[0].try_wait(), Ok(None)),
            "the import is still running when writer {i} starts"
        );
        let value = format!("写入 {i} ✍️");
        let mut w = memscope(
            &home,
            &target,
            &args_for(
                "write",
                "user:2",
                &format!("p{i}"),
                &[
                    "--value", &value, "--scope", "global", "--source", "s:w", "--json",
                ],
            ),
        );
        w.stdout(Stdio::piped()).stderr(Stdio::piped());
        writers.push((value, w.spawn().unwrap()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let imported = finish(&mut procs.0[0], deadline);
    assert_eq!(
        imported.status.code(),
        Some(1),
        "{}",
        text(&imported.stderr)
    );
    assert!(
        text(&imported.stderr).contains("cut short"),
        "{}",
        text(&imported.stderr)
    );
    let mut told_inserted = Vec::new();
    for (i, (value, mut w)) in writers.into_iter().enumerate() {
        let out = finish(&mut w, deadline);
        let said: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        eprintln!(
            "writer {i}: {} {} {}",
            out.status,
            said["outcome"],
            text(&out.stderr).trim()
        );
        if out.status.success() {
            assert_eq!(said["outcome"], "inserted", "{said:#}");
            told_inserted.push((format!("p{i}"), value));
        } else {
            let err = text(&out.stderr);
            assert!(
                err.contains("nothing was written") || err.contains("no memscope database"),
                "a refused writer is told nothing was written: {err}"
            );
        }
    }
    if told_inserted.is_empty() {
        return;
    }
    let view = current_view(&home, &target);
    for (predicate, value) in &told_inserted {
        let key = (
            "user:2".to_string(),
            predicate.clone(),
            "global".to_string(),
        );
        assert_eq!(
            view.get(&key).map(|(v, _)| v.clone()),
            Some(Value::String(value.clone())),
            "a write told `inserted` is in the file: {view:?}"
        );
    }
    check_ok(&home, &target);
    assert_eq!(integrity_check(&target), "ok");
}
