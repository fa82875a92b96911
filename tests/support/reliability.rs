//! Helpers shared by the `reliability` tests: the real `memscope` binary, a database in a
//! temporary directory, a small deterministic PRNG, byte searches over the database files and
//! the environment knobs that lengthen the long-running tests.
#![allow(dead_code)]

use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// A `memscope` command with a clean environment (invariant asserts on), `<db>`, `<db>-wal`,
/// `<db>-shm` and a byte search: the same as every other test's.
pub use super::{contains_bytes as contains, db_files, memscope_cmd};

/// `$name` parsed as a number, else `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// A seed from `$name` when set, else from the clock; printed so a failure can be replayed.
pub fn seed_from_env(name: &str) -> u64 {
    let seed = std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x5eed)
        });
    eprintln!("{name}={seed} (set it to replay this run)");
    seed
}

/// xorshift64*: small, deterministic, good enough to pick operations and kill moments.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A finished process: exit code and its two streams.
#[derive(Debug, Clone)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from_output(o: std::process::Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "expected exit 0\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e})\nstdout: {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    /// Complete JSON lines of stdout (a torn last line of a killed process is skipped).
    pub fn json_lines(&self) -> Vec<Value> {
        json_lines(&self.stdout)
    }
}

/// Every complete line of `text` that parses as JSON.
pub fn json_lines(text: &str) -> Vec<Value> {
    let complete = match text.rfind('\n') {
        Some(i) => &text[..i],
        None => "",
    };
    complete
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A database path in its own temporary directory.
pub struct Db {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Default for Db {
    fn default() -> Self {
        Self::new()
    }
}

impl Db {
    pub fn new() -> Db {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("memory.db");
        Db { dir, path }
    }

    /// A database at `path` (whose directory the caller owns); `dir` is a scratch directory.
    pub fn at(path: PathBuf) -> Db {
        let dir = tempfile::tempdir().expect("tempdir");
        Db { dir, path }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = memscope_cmd(self.dir.path());
        c.arg("--db").arg(&self.path).args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run::from_output(self.command(args).output().expect("spawn memscope"))
    }

    /// Runs with `input` on stdin.
    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Run {
        let mut c = self.command(args);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn memscope");
        let mut stdin = child.stdin.take().expect("stdin");
        let data = input.to_vec();
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(&data);
        });
        let out = child.wait_with_output().expect("wait memscope");
        feeder.join().expect("stdin feeder");
        Run::from_output(out)
    }

    pub fn init(&self) {
        self.run(&["init"]).ok();
    }

    /// `check --json`: (exit code, report).
    #[track_caller]
    pub fn check(&self) -> (i32, Value) {
        let r = self.run(&["check", "--json"]);
        let v = r.json();
        (r.code, v)
    }

    #[track_caller]
    pub fn assert_check_ok(&self) -> Value {
        let (code, report) = self.check();
        assert_eq!(
            (code, &report["ok"]),
            (0, &Value::Bool(true)),
            "check failed: {report:#}"
        );
        assert_eq!(report["violations"], Value::Array(vec![]), "{report:#}");
        report
    }

    /// `list --json` as an array.
    #[track_caller]
    pub fn list(&self) -> Vec<Value> {
        match self.run(&["list", "--json"]).ok().json() {
            Value::Array(a) => a,
            other => panic!("list --json is not an array: {other:#}"),
        }
    }

    pub fn files(&self) -> [PathBuf; 3] {
        db_files(&self.path)
    }

    /// A read-only SQL connection (for assertions on the public schema).
    pub fn sql(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            &self.path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .expect("open the database read-only")
    }
}

/// Which of `files` contain `needle` (missing files contain nothing).
pub fn files_containing(files: &[PathBuf], needle: &[u8]) -> Vec<PathBuf> {
    files
        .iter()
        .filter(|f| {
            std::fs::read(f)
                .map(|bytes| contains(&bytes, needle))
                .unwrap_or(false)
        })
        .cloned()
        .collect()
}

/// A value unique to this run, for canaries and sources.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{nanos:x}-{}", std::process::id())
}

/// Whether `python3` with its `sqlite3` module runs here.
pub fn python3() -> bool {
    Command::new("python3")
        .args(["-c", "import sqlite3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Fields of a `list --json` record that do not depend on when or how often it was confirmed.
pub fn record_key(r: &Value) -> Value {
    serde_json::json!({
        "subject": r["subject"],
        "predicate": r["predicate"],
        "scope": r["scope"],
        "value": r["value"],
        "version": r["version"],
        "source": r["source"],
        "causal_seq": r["causal_seq"],
        "raw": r["raw"],
    })
}
