//! What the benchmarks share (`#[path]`-included by each; each uses a part of it).
#![allow(dead_code)]

use memscope::{OpenMode, Store};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    xs[xs.len() / 2]
}

/// Rates of two sides measured back to back in each round. This machine's speed swings by
/// tens of percent over seconds, so a ratio is taken within each round, where both sides met
/// the same weather, and the headline is the median of those ratios.
#[derive(Default)]
pub struct Paired {
    pub ours: Vec<f64>,
    pub baseline: Vec<f64>,
}

impl Paired {
    pub fn push(&mut self, ours: f64, baseline: f64) {
        self.ours.push(ours);
        self.baseline.push(baseline);
    }

    /// The median rate of each side.
    pub fn medians(&self) -> (f64, f64) {
        (median(self.ours.clone()), median(self.baseline.clone()))
    }

    /// The headline ratio, and what it stands on: `medians of 7 paired rounds; ratios
    /// 0.91–1.04`.
    pub fn ratio(&self) -> (f64, String) {
        let ratios: Vec<f64> = self
            .ours
            .iter()
            .zip(&self.baseline)
            .map(|(o, b)| o / b)
            .collect();
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(0.0, f64::max);
        let rounds = ratios.len();
        let spread = format!("medians of {rounds} paired rounds; ratios {lo:.2}–{hi:.2}");
        (median(ratios), spread)
    }
}

/// A new, empty folder for this run's databases: `$TMPDIR/{name}-{pid}`.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create bench dir");
    dir
}

/// Removes a database and its WAL and shared-memory files.
pub fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// A new store at `path` (any old one removed) with `settings` saved and the invariant
/// assertions off, as a user's store runs.
pub fn fresh_store(path: &Path, settings: &[(&str, &str)]) -> Store {
    remove_db(path);
    let mut store = Store::open(path, OpenMode::Create).expect("open store");
    for (key, value) in settings {
        store.set_user_setting(key, value).expect(key);
    }
    store.set_assert_invariants(false);
    store
}

/// `$var` if set, else `bench` under `cargo bench` (which passes --bench) and the quicker
/// `quick` otherwise (`cargo test --benches` runs the benches too).
pub fn size_from_env(var: &str, bench: u64, quick: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if std::env::args().any(|a| a == "--bench") {
            bench
        } else {
            quick
        })
}

/// Where a generated database named `file` is kept between runs (under target/).
pub fn under_target(file: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).expect("target tmp dir");
    dir.join(file)
}

/// The database `{name}-{n}-v1.db` of `n` records under target/, generated from `line(0..n)`
/// (see [`generate`]) unless one of that size is already there; with how it came to be.
pub fn cached_database(name: &str, n: u64, line: impl Fn(u64) -> String) -> (PathBuf, String) {
    let path = under_target(&format!("{name}-{n}-v1.db"));
    let cached = path.exists()
        && Store::open(&path, OpenMode::Existing)
            .and_then(|s| s.counts())
            .map(|c| c.memories as u64 == n)
            .unwrap_or(false);
    if cached {
        return (path, "cached".into());
    }
    eprintln!("generating {n} records through `memscope apply` (cached afterwards)…");
    let took = generate(&path, (0..n).map(line));
    (path, format!("generated in {:.1} s", took.as_secs_f64()))
}

/// Generates a database at `path` through the real write path: the `lines` are piped to
/// `memscope apply` in a child process (so its memory does not count in the bench), into a
/// temporary file moved into place once complete. Returns the time taken.
pub fn generate(path: &Path, lines: impl IntoIterator<Item = String>) -> Duration {
    let started = Instant::now();
    let tmp = path.with_extension("partial");
    remove_db(&tmp);
    let mut child = Command::new(env!("CARGO_BIN_EXE_memscope"))
        .arg("--db")
        .arg(&tmp)
        .arg("apply")
        .arg("-")
        .env_remove("MEMSCOPE_ASSERT_INVARIANTS")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("memscope apply starts");
    {
        let stdin = child.stdin.take().expect("a pipe to memscope apply");
        let mut w = BufWriter::with_capacity(1 << 20, stdin);
        for (i, line) in lines.into_iter().enumerate() {
            writeln!(w, "{line}").expect("memscope apply reads its input");
            if i > 0 && i.is_multiple_of(200_000) {
                eprintln!("  … {i} records written ({:.0?})", started.elapsed());
            }
        }
        w.flush().expect("flush");
    }
    let status = child.wait().expect("memscope apply ends");
    assert!(status.success(), "memscope apply failed: {status}");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", tmp.display()));
    }
    std::fs::rename(&tmp, path).expect("the generated database moves into place");
    started.elapsed()
}
