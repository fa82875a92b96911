//! What the benchmarks share (`#[path]`-included by each).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Generates a database of `n` records at `path` through the real write path: the lines
/// `line(0..n)` are piped to `memscope apply` in a child process (so its memory does not count
/// in the bench), into a temporary file moved into place once complete. Returns the time taken.
pub fn generate(path: &Path, n: u64, line: impl Fn(u64) -> String) -> Duration {
    let started = Instant::now();
    let tmp = path.with_extension("partial");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", tmp.display()));
    }
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
        for i in 0..n {
            writeln!(w, "{}", line(i)).expect("memscope apply reads its input");
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
