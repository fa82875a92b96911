//! Helpers shared by the `reliability` tests: the real `memscope` binary, a database in a
//! temporary directory, a small deterministic PRNG, byte searches over the database files and
//! the environment knobs that lengthen the long-running tests.
#![allow(dead_code)]

use memscope::store::AnyStore;
use memscope::{OpenMode, Scope, ScopeChoice, WriteContext, WriteRequest};
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// A `memscope` command with a clean environment (invariant asserts on), `<db>`, `<db>-wal`,
/// `<db>-shm`, a byte search, a finished process and a database in a temporary directory: the
/// same as every other test's (re-exported for the reliability tests; the other binaries that
/// include this module do not use them).
#[allow(unused_imports)]
pub use super::{contains_bytes as contains, db_files, memscope_cmd, query_one, Run, TestDb as Db};

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

/// The history event a write outcome leaves (`None` for outcomes that leave none).
pub fn event_of(outcome: &str) -> Option<&'static str> {
    match outcome {
        "inserted" | "superseded" => Some("set"),
        "confirmed" => Some("confirmed"),
        "stale" => Some("stale"),
        "rejected" => Some("rejected"),
        _ => None,
    }
}

/// The write request an `apply` line asks for (`"context": {"repo": …}` as `apply` reads it; a
/// scope `{"ambiguous": [...]}` as a choice for a human).
pub fn request(line: &Value) -> WriteRequest {
    WriteRequest {
        subject: line["subject"].as_str().unwrap().into(),
        predicate: line["predicate"].as_str().unwrap().into(),
        value: line["value"].clone(),
        scope: match line["scope"]["ambiguous"].as_array() {
            Some(candidates) => ScopeChoice::ambiguous(
                candidates
                    .iter()
                    .map(|c| Scope::parse(c.as_str().unwrap()).unwrap())
                    .collect(),
            )
            .unwrap(),
            None => ScopeChoice::Exact(Scope::parse(line["scope"].as_str().unwrap()).unwrap()),
        },
        source: line["source"].as_str().unwrap().into(),
        raw: line["raw"].as_str().map(str::to_string),
        causal_seq: None,
        context: line["context"]["repo"].as_str().map(|r| WriteContext {
            repo: Some(r.into()),
            task: None,
        }),
    }
}

/// Five clients write at once: clients 0–2 are `memscope apply` processes, started together,
/// each fed its `lines(c)`; clients 3–4 are connections in this process writing one line per
/// transaction meanwhile, on either backend (a SQLite file or a PostgreSQL address). What each
/// client was told, one answer a line, in client order.
pub fn write_concurrently(db: &Db, lines: fn(usize) -> Vec<Value>) -> Vec<Vec<Value>> {
    let mut children = Vec::new();
    for c in 0..3 {
        let mut cmd = db.command(&["apply"]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        children.push((c, cmd.spawn().expect("spawn memscope apply")));
    }
    let mut feeders = Vec::new();
    for (c, child) in &mut children {
        let mut stdin = child.stdin.take().expect("stdin");
        let input: String = lines(*c)
            .into_iter()
            .map(|line| format!("{line}\n"))
            .collect();
        feeders.push(std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        }));
    }
    let threads: Vec<_> = (3..5)
        .map(|c| {
            let path = db.path.clone();
            std::thread::spawn(move || {
                let mut store = AnyStore::open(&path, OpenMode::Existing).expect("open");
                if let AnyStore::Sqlite(s) = &mut store {
                    s.set_assert_invariants(true);
                }
                lines(c)
                    .iter()
                    .map(|line| {
                        let out = store
                            .write(&request(line))
                            .expect("a write in a busy database succeeds");
                        serde_json::to_value(&out).expect("outcome")
                    })
                    .collect::<Vec<Value>>()
            })
        })
        .collect();
    for f in feeders {
        f.join().expect("feeder");
    }
    let mut told = Vec::new();
    for (c, child) in children {
        let out = child.wait_with_output().expect("apply ends");
        assert!(
            out.status.success(),
            "apply {c} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answers = json_lines(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(answers.len(), lines(c).len(), "one answer a line");
        told.push(answers);
    }
    for t in threads {
        told.push(t.join().expect("writer thread"));
    }
    told
}
