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

/// The ratios of paired rounds (`ours[i] / baseline[i]`): this machine's speed swings by tens
/// of percent over seconds, so a ratio is taken within each round, where both sides met the
/// same weather, and the headline is the median of those ratios.
pub struct Ratios {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
    pub rounds: usize,
}

impl Ratios {
    pub fn of(ours: &[f64], baseline: &[f64]) -> Ratios {
        let ratios: Vec<f64> = ours.iter().zip(baseline).map(|(o, b)| o / b).collect();
        Ratios {
            lo: ratios.iter().copied().fold(f64::INFINITY, f64::min),
            hi: ratios.iter().copied().fold(0.0, f64::max),
            rounds: ratios.len(),
            median: median(ratios),
        }
    }

    /// `medians of 7 paired rounds; ratios 0.91–1.04`: what the headline ratio stands on.
    pub fn spread(&self) -> String {
        format!(
            "medians of {} paired rounds; ratios {:.2}–{:.2}",
            self.rounds, self.lo, self.hi
        )
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
