//! Scaling benchmark (issue 17, "Speed" and docs/SCALING.md): `cargo bench --bench scaling`.
//!
//! Prints, measured in one run:
//! - **writers**: single writes through the full write path (`Store::write` / `PgStore::write`,
//!   one transaction each) from 1, 8 and 32 writer *processes* at once, on SQLite (durability
//!   `full`, the default, and `normal`) and on PostgreSQL: writes/s of each, and the
//!   concurrency beyond which each stops rising by more than 10% (where it saturates). Each
//!   process writes its own identities (`agent:{n}`, 50 predicates, global or one of 7
//!   repositories) and, one write in 8, one of 4 identities every process shares
//!   (`team:web` · `rule_0..3` @ global), so writers of one identity also meet;
//! - **resolve on PostgreSQL**: p50/p99/max of `PgStore::resolve` (a task → repo → global
//!   chain) over loopback on a database of 1M records, loaded by `COPY` of the rows the write
//!   path would have stored (a record and its `set` event each, the spellings, the clock); the
//!   generator is proven by `PgStore::check()` on a smaller database of the same rows, every run;
//!   then the same resolves again while 8 writer processes write into that database;
//! - **resolve on SQLite** on the same 1M records (built through `memscope apply`, cached under
//!   target/), the same queries, for comparison.
//!
//! Needs a PostgreSQL server for the PostgreSQL parts: `MEMSCOPE_BENCH_POSTGRES` or
//! `MEMSCOPE_TEST_POSTGRES`, an address whose role may create databases. Every database it
//! creates is named `memscope_bench_scaling_*_{pid}` and dropped after use, on failure too.
//! Without a server it says so and measures SQLite only.
//!
//! Environment: MEMSCOPE_BENCH_SCALE_WRITES=N writes per writer process (default 300),
//! MEMSCOPE_BENCH_SCALE_ROUNDS=N rounds per figure (default 3), MEMSCOPE_BENCH_SCALE_RECORDS=N
//! records for resolve (default 1,000,000), MEMSCOPE_BENCH_SCALE_RESOLVES=N timed resolves
//! (default 5,000), MEMSCOPE_BENCH_SCALE_CHECK_RECORDS=N size of the database `check` proves
//! the generator on (default 20,000), MEMSCOPE_BENCH_SCALE_PARTS=writers,postgres,sqlite to
//! measure only some parts.

#[path = "support/pg.rs"]
mod pg;
#[path = "support/mod.rs"]
mod support;

use memscope::model::{ScopeChoice, WriteRequest};
use memscope::spelling::fold;
use memscope::store::postgres::{Address, PgStore};
use memscope::{OpenMode, Scope, Store};
use pg::{env_usize, BenchDb};
use serde_json::json;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{fresh_dir, fresh_store, median};

const CONCURRENCY: [usize; 3] = [1, 8, 32];

/// Write `i` of writer process `writer`: its own identities, and one write in 8 on one of the
/// 4 identities every writer shares.
fn request(writer: usize, i: usize) -> WriteRequest {
    let (subject, predicate, scope) = if i % 8 == 7 {
        (
            "team:web".to_string(),
            format!("rule_{}", (i / 8) % 4),
            Scope::Global,
        )
    } else {
        let scope = if i.is_multiple_of(3) {
            Scope::Repo(format!("repo-{}", i % 7))
        } else {
            Scope::Global
        };
        (format!("agent:{writer}"), format!("pref_{}", i % 50), scope)
    };
    WriteRequest {
        subject,
        predicate,
        value: json!(format!("value {i} of writer {writer}")),
        scope: ScopeChoice::Exact(scope),
        source: format!("bench:{writer}/{i}"),
        raw: None,
        causal_seq: None,
        context: None,
    }
}

/// The backends the writer figure compares.
#[derive(Clone, Copy, PartialEq)]
enum Backend {
    SqliteFull,
    SqliteNormal,
    Postgres,
}

impl Backend {
    fn label(self) -> &'static str {
        match self {
            Backend::SqliteFull => "SQLite, durability full (default)",
            Backend::SqliteNormal => "SQLite, durability normal",
            Backend::Postgres => "PostgreSQL (loopback, fsync off)",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Backend::Postgres => "pg",
            _ => "sqlite",
        }
    }
}

/// A writer process: opens the store, says it is ready, waits for `go`, writes `n` times.
fn child(kind: &str, target: &str, writer: usize, n: usize, dir: &Path) {
    let ready = dir.join(format!("ready-{writer}"));
    let go = dir.join("go");
    let wait = || {
        std::fs::write(&ready, b"").expect("the ready mark");
        while !go.exists() {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    if kind == "pg" {
        let address = Address::recognise(OsStr::new(target)).unwrap().unwrap();
        let mut store = PgStore::open(&address).expect("the store opens");
        wait();
        for i in 0..n {
            store.write(&request(writer, i)).expect("write");
        }
    } else {
        let mut store = Store::open(target, OpenMode::Existing).expect("the store opens");
        store.set_assert_invariants(false);
        wait();
        for i in 0..n {
            store.write(&request(writer, i)).expect("write");
        }
    }
}

/// `writers` writer processes on `target`, `n` writes each, from one start: writes/s.
/// `writing`, when given, is set once they start and cleared when the last has ended.
fn processes(
    kind: &str,
    target: &str,
    writers: usize,
    n: usize,
    writing: Option<&AtomicBool>,
) -> f64 {
    let dir = tempfile::tempdir().expect("a temp dir");
    let exe: PathBuf = std::env::current_exe().expect("the bench binary");
    let children: Vec<_> = (0..writers)
        .map(|w| {
            Command::new(&exe)
                .args(["--child", kind, target, &w.to_string(), &n.to_string()])
                .arg(dir.path())
                .env_remove("MEMSCOPE_ASSERT_INVARIANTS")
                .spawn()
                .expect("a writer process")
        })
        .collect();
    // The clock starts once every writer has connected.
    let started = Instant::now();
    while std::fs::read_dir(dir.path()).map_or(0, |d| d.count()) < writers {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "writers not ready"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = Instant::now();
    std::fs::write(dir.path().join("go"), b"go").expect("go");
    if let Some(w) = writing {
        w.store(true, Ordering::SeqCst);
    }
    for mut c in children {
        assert!(
            c.wait().expect("a writer ends").success(),
            "a writer failed"
        );
    }
    let rate = (writers * n) as f64 / t.elapsed().as_secs_f64();
    if let Some(w) = writing {
        w.store(false, Ordering::SeqCst);
    }
    rate
}

/// One round of one backend at one concurrency, on a fresh database: writes/s. Every write
/// must have logged one event.
fn round(backend: Backend, server: Option<&str>, dir: &Path, writers: usize, n: usize) -> f64 {
    let expected = (writers * n) as i64;
    match backend {
        Backend::Postgres => {
            let db = BenchDb::new(server.expect("a server"), "scaling_w");
            let rate = processes(backend.kind(), &db.url, writers, n, None);
            let events: i64 = db
                .client()
                .query_one("SELECT count(*) FROM history", &[])
                .expect("count")
                .get(0);
            assert_eq!(events, expected, "every write logged once");
            rate
        }
        _ => {
            let durability = if backend == Backend::SqliteFull {
                "full"
            } else {
                "normal"
            };
            let path = dir.join(format!("writers-{durability}-{writers}.db"));
            drop(fresh_store(&path, &[("durability", durability)]));
            let rate = processes(
                backend.kind(),
                path.to_str().expect("a UTF-8 temp path"),
                writers,
                n,
                None,
            );
            let store = Store::open(&path, OpenMode::Existing).expect("open");
            let events: i64 = store
                .connection()
                .query_row("SELECT count(*) FROM history", [], |r| r.get(0))
                .expect("count");
            assert_eq!(events, expected, "every write logged once");
            support::remove_db(&path);
            rate
        }
    }
}

/// Where the rates stop rising by more than 10%, as measured.
fn saturation(rates: &[f64]) -> String {
    for k in 0..rates.len() - 1 {
        if rates[k + 1] < rates[k] * 1.10 {
            return format!(
                "saturates at {} writer(s): {}→{} gives ×{:.2}",
                CONCURRENCY[k],
                CONCURRENCY[k],
                CONCURRENCY[k + 1],
                rates[k + 1] / rates[k]
            );
        }
    }
    let last = rates.len() - 1;
    format!(
        "still rising at {} (×{:.2} from {})",
        CONCURRENCY[last],
        rates[last] / rates[last - 1],
        CONCURRENCY[last - 1]
    )
}

fn bench_writers(server: Option<&str>, dir: &Path) {
    let n = env_usize("MEMSCOPE_BENCH_SCALE_WRITES", 300);
    let rounds = env_usize("MEMSCOPE_BENCH_SCALE_ROUNDS", 3);
    let mut backends = vec![Backend::SqliteFull, Backend::SqliteNormal];
    if server.is_some() {
        backends.push(Backend::Postgres);
    }
    // rates[backend][concurrency] = each round's writes/s
    let mut rates = vec![vec![Vec::new(); CONCURRENCY.len()]; backends.len()];
    let t = Instant::now();
    for (c, &writers) in CONCURRENCY.iter().enumerate() {
        for r in 0..rounds {
            // Each round starts with another backend: all meet the machine's weather alike.
            for k in 0..backends.len() {
                let b = (k + r) % backends.len();
                rates[b][c].push(round(backends[b], server, dir, writers, n));
            }
        }
    }
    println!(
        "single writes through the full write path, {n} per writer process, one transaction each; \
         7 of 8 on the process's own identities, 1 of 8 on 4 identities all share; \
         median of {rounds} rounds (range) — {:.0} s:",
        t.elapsed().as_secs_f64()
    );
    println!(
        "  {:<36} {:>22} {:>22} {:>22}",
        "writes/s", "1 writer", "8 writers", "32 writers"
    );
    for (b, backend) in backends.iter().enumerate() {
        let medians: Vec<f64> = rates[b].iter().map(|xs| median(xs.clone())).collect();
        let cells: Vec<String> = rates[b]
            .iter()
            .zip(&medians)
            .map(|(xs, m)| {
                let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = xs.iter().copied().fold(0.0, f64::max);
                format!("{m:.0} ({lo:.0}–{hi:.0})")
            })
            .collect();
        println!(
            "  {:<36} {:>22} {:>22} {:>22}   {}",
            backend.label(),
            cells[0],
            cells[1],
            cells[2],
            saturation(&medians)
        );
    }
}

/// Record `i` of the big database: the layout of benches/store.rs (20,000 subjects; 60%
/// global, 30% in one of 500 repositories, 10% in one of 2,000 tasks; every identity once).
fn record(i: usize) -> (String, String, String) {
    let scope = match i % 10 {
        0..=5 => "global".to_string(),
        6..=8 => format!("repo:repo-{}", i % 500),
        _ => format!("task:task-{}", i % 2000),
    };
    (
        format!("user:{}", i % 20_000),
        format!("pref_{}", i / 20_000),
        scope,
    )
}

fn record_line(i: usize) -> String {
    let (subject, predicate, scope) = record(i);
    json!({
        "subject": subject,
        "predicate": predicate,
        "value": format!("value {i} 值"),
        "scope": scope,
        "source": format!("thread:{i}/message:1"),
        "raw": format!("用户原话 {i}"),
    })
    .to_string()
}

/// A text field of COPY's text format.
fn copy_field(out: &mut Vec<u8>, text: &str) {
    for b in text.bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

fn copy_row(out: &mut Vec<u8>, fields: &[&str]) {
    for (k, f) in fields.iter().enumerate() {
        if k > 0 {
            out.push(b'\t');
        }
        copy_field(out, f);
    }
    out.push(b'\n');
}

/// Loads `n` records as the write path would have stored them — each a current record at
/// version 1 and its `set` event, causal number `i + 1`, the subjects' and places' spellings
/// registered, the clock at `n` — by COPY in one transaction, the guard triggers off for the
/// load (each takes an advisory lock per row, which a million rows in one transaction would
/// exhaust) and on again before it commits. Returns the time taken.
fn load(db: &BenchDb, n: usize) -> Duration {
    let t = Instant::now();
    let mut c = db.client();
    let mut tx = c.transaction().expect("begin");
    tx.batch_execute(
        "ALTER TABLE memories DISABLE TRIGGER USER; ALTER TABLE history DISABLE TRIGGER USER;",
    )
    .expect("guards off for the load");
    let at = "2026-11-29 00:00:00.000+00";
    let chunk = 50_000;
    for table in ["memories", "history"] {
        let sql = if table == "memories" {
            "COPY memories (subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at) FROM STDIN"
        } else {
            "COPY history (event, subject, predicate, scope, version, value, raw, source, causal_seq, at, clock) FROM STDIN"
        };
        let mut w = tx.copy_in(sql).expect("copy");
        let mut buf = Vec::with_capacity(chunk * 160);
        for i in 0..n {
            let (subject, predicate, scope) = record(i);
            let value = serde_json::to_string(&format!("value {i} 值")).expect("json");
            let source = format!("thread:{i}/message:1");
            let raw = format!("用户原话 {i}");
            let seq = (i + 1).to_string();
            if table == "memories" {
                copy_row(
                    &mut buf,
                    &[
                        &subject, &predicate, &scope, &value, "1", &source, &raw, &seq, at, at,
                    ],
                );
            } else {
                copy_row(
                    &mut buf,
                    &[
                        "set", &subject, &predicate, &scope, "1", &value, &raw, &source, &seq, at,
                        &seq,
                    ],
                );
            }
            if buf.len() > 4 << 20 {
                w.write_all(&buf).expect("copy rows");
                buf.clear();
            }
        }
        w.write_all(&buf).expect("copy rows");
        w.finish().expect("copy ends");
    }
    let mut subjects = BTreeSet::new();
    let mut scopes = BTreeSet::new();
    for i in 0..n {
        let (subject, _, scope) = record(i);
        subjects.insert(subject);
        if scope != "global" {
            scopes.insert(scope);
        }
    }
    let mut w = tx
        .copy_in("COPY spellings (kind, folded, spelling) FROM STDIN")
        .expect("copy");
    let mut buf = Vec::new();
    for (kind, texts) in [("subject", &subjects), ("scope", &scopes)] {
        for text in texts {
            copy_row(&mut buf, &[kind, &fold(text), text]);
        }
    }
    w.write_all(&buf).expect("copy rows");
    w.finish().expect("copy ends");
    tx.batch_execute(
        "ALTER TABLE memories ENABLE TRIGGER USER; ALTER TABLE history ENABLE TRIGGER USER;",
    )
    .expect("guards on again");
    tx.execute("SELECT memscope_clock_observe($1)", &[&(n as i64)])
        .expect("the clock");
    tx.commit().expect("commit");
    c.batch_execute("ANALYZE memories, history, tombstones, spellings, predicate_aliases")
        .expect("analyze");
    t.elapsed()
}

/// The queries of benches/store.rs: query `q` asks for record `(q × 7919) mod n` from task
/// `task-{q mod 2000}` in repository `repo-{q mod 500}`.
fn query(q: usize, n: usize) -> (String, String, String, String) {
    let (subject, predicate, _) = record((q * 7919) % n);
    (
        subject,
        predicate,
        format!("repo-{}", q % 500),
        format!("task-{}", q % 2000),
    )
}

/// p50, p99 and max of `count` timed calls of `resolve(q)`, after 500 untimed ones.
fn latencies(count: usize, mut resolve: impl FnMut(usize)) -> (f64, f64, f64) {
    for q in 0..500 {
        resolve(q + count);
    }
    let mut lat = Vec::with_capacity(count);
    for q in 0..count {
        let t = Instant::now();
        resolve(q);
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    percentiles(lat)
}

/// p50, p99 and max of latencies in ms.
fn percentiles(mut lat: Vec<f64>) -> (f64, f64, f64) {
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    (
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100],
        lat[lat.len() - 1],
    )
}

fn bench_resolve_postgres(server: &str) {
    let records = env_usize("MEMSCOPE_BENCH_SCALE_RECORDS", 1_000_000);
    let resolves = env_usize("MEMSCOPE_BENCH_SCALE_RESOLVES", 5_000);
    let small = env_usize("MEMSCOPE_BENCH_SCALE_CHECK_RECORDS", 20_000);

    // The generator, proven on a smaller database of the same rows.
    {
        let db = BenchDb::new(server, "scaling_c");
        load(&db, small);
        let mut store = db.store();
        let t = Instant::now();
        let report = store.check().expect("check runs");
        assert!(
            report.ok,
            "the generated database breaks an invariant: {}",
            serde_json::to_string_pretty(&report.violations).unwrap_or_default()
        );
        println!(
            "generator proven: `check` ok on {small} loaded records ({:.2} s)",
            t.elapsed().as_secs_f64()
        );
    }

    let db = BenchDb::new(server, "scaling_r");
    let took = load(&db, records);
    let size: i64 = db
        .client()
        .query_one("SELECT pg_database_size(current_database())", &[])
        .expect("size")
        .get(0);
    let mut store = db.store();
    let (p50, p99, max) = latencies(resolves, |q| {
        let (subject, predicate, repo, task) = query(q, records);
        let r = store
            .resolve(&subject, &predicate, Some(&repo), Some(&task))
            .expect("resolve");
        std::hint::black_box(r);
    });
    println!(
        "resolve on PostgreSQL, {records} records (loaded by COPY in {:.1} s, {} MB), {resolves} calls (task → repo → global chain, over loopback): \
         p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms (target p99 ≤ 2 ms) {}",
        took.as_secs_f64(),
        size >> 20,
        if p99 <= 2.0 { "✓" } else { "✗" }
    );

    bench_ui_postgres(&db, records);

    if std::env::var_os("MEMSCOPE_BENCH_SCALE_CHECK_BIG").is_some() {
        let t = Instant::now();
        let report = store.check().expect("check runs");
        println!(
            "  check on PostgreSQL, {records} records: {:.1} s, ok = {}",
            t.elapsed().as_secs_f64(),
            report.ok
        );
    }

    // The same resolves while writer processes write into the same database (their own
    // identities, as in the writers figure): what a reader meets on a busy primary.
    let writers = 8;
    let writes = env_usize("MEMSCOPE_BENCH_SCALE_LOAD_WRITES", 1_000);
    let writing = Arc::new(AtomicBool::new(false));
    let (url, flag) = (db.url.clone(), Arc::clone(&writing));
    let load = std::thread::spawn(move || processes("pg", &url, writers, writes, Some(&flag)));
    while !writing.load(Ordering::SeqCst) && !load.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut lat = Vec::with_capacity(resolves);
    let mut q = 0;
    while writing.load(Ordering::SeqCst) && lat.len() < resolves {
        let (subject, predicate, repo, task) = query(q, records);
        let t = Instant::now();
        let r = store
            .resolve(&subject, &predicate, Some(&repo), Some(&task))
            .expect("resolve");
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(r);
        q += 1;
    }
    let rate = load.join().expect("the writers' thread");
    if lat.len() >= 100 {
        let (p50, p99, max) = percentiles(lat.clone());
        println!(
            "  the same while {writers} writer processes write ({rate:.0} writes/s meanwhile): {} resolves, p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms",
            lat.len()
        );
    } else {
        println!("  under {writers} writers: too few resolves while they wrote ({}); raise MEMSCOPE_BENCH_SCALE_LOAD_WRITES", lat.len());
    }
}

/// The terminal UI on the PostgreSQL database of `records` records, headless (ratatui's
/// TestBackend, as `benches/ui.rs` drives it on SQLite): open → first frame (the UI's own
/// connection, LISTEN, the first page; the workers' connections open on their first job), the
/// median of 5 opens after a warm-up; then page-down keystroke → frame.
fn bench_ui_postgres(db: &BenchDb, records: usize) {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use memscope::store::{open_ui, Clock};
    use memscope::tui::{Session, WorkerMode};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("a test terminal");
    let open = |terminal: &mut Terminal<TestBackend>| {
        let t = Instant::now();
        let store = open_ui(Path::new(&db.url), OpenMode::Existing).expect("the UI's store");
        let mut session = Session::new(store, Clock::System, (120, 40), WorkerMode::Threads)
            .expect("the UI opens");
        terminal.draw(|f| session.draw(f)).expect("a frame");
        (session, t.elapsed().as_secs_f64() * 1e3)
    };
    let mut opens = Vec::new();
    for _ in 0..6 {
        let (session, took) = open(&mut terminal);
        opens.push(took);
        drop(session);
    }
    let first = opens.remove(0);
    let open_ms = median(opens);
    let (mut session, _) = open(&mut terminal);
    // The counts and the suspects scan run on the workers right after opening; paging is
    // timed once they are done, as on SQLite.
    let t = Instant::now();
    while session.busy() && t.elapsed() < Duration::from_secs(300) {
        session.pump();
        std::thread::sleep(Duration::from_millis(5));
    }
    let background = t.elapsed().as_secs_f64();
    let downs: Vec<f64> = (0..300)
        .map(|_| {
            let t = Instant::now();
            session.handle_key(KeyEvent::new(KeyCode::PageDown, KeyModifiers::NONE));
            terminal.draw(|f| session.draw(f)).expect("a frame");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let (p50, p99, max) = percentiles(downs);
    println!(
        "UI on PostgreSQL, {records} records (over loopback): open → first frame {open_ms:.1} ms (median of 5; first, cold {first:.1} ms; target ≤ 150 ms) {}; \
         page-down → frame p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms; counts and suspects done {background:.1} s after opening",
        if open_ms <= 150.0 { "✓" } else { "✗" }
    );
}

fn bench_resolve_sqlite() {
    let records = env_usize("MEMSCOPE_BENCH_SCALE_RECORDS", 1_000_000);
    let resolves = env_usize("MEMSCOPE_BENCH_SCALE_RESOLVES", 5_000);
    let (path, how) = support::cached_database("memscope-scaling-bench", records as u64, |i| {
        record_line(i as usize)
    });
    let store = Store::open(&path, OpenMode::Existing).expect("open");
    let (p50, p99, max) = latencies(resolves, |q| {
        let (subject, predicate, repo, task) = query(q, records);
        let r = store
            .resolve(&subject, &predicate, Some(&repo), Some(&task))
            .expect("resolve");
        std::hint::black_box(r);
    });
    println!(
        "resolve on SQLite, the same {records} records ({how}) and queries: p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(
            &args[2],
            &args[3],
            args[4].parse().expect("a writer number"),
            args[5].parse().expect("a count"),
            Path::new(&args[6]),
        );
        return;
    }
    let server = std::env::var("MEMSCOPE_BENCH_POSTGRES")
        .or_else(|_| std::env::var("MEMSCOPE_TEST_POSTGRES"))
        .ok()
        .filter(|s| !s.is_empty());
    if server.is_none() {
        println!(
            "NO POSTGRESQL: set MEMSCOPE_BENCH_POSTGRES (or source .ci/postgres); measuring SQLite only"
        );
    }
    let dir = fresh_dir("memscope-scaling-bench");
    // MEMSCOPE_BENCH_SCALE_PARTS=writers,postgres,sqlite (default: all) measures only those.
    let parts = std::env::var("MEMSCOPE_BENCH_SCALE_PARTS").unwrap_or_default();
    let part = |name: &str| parts.is_empty() || parts.split(',').any(|p| p.trim() == name);
    if part("writers") {
        bench_writers(server.as_deref(), &dir);
    }
    if let Some(server) = server.as_deref().filter(|_| part("postgres")) {
        bench_resolve_postgres(server);
    }
    if part("sqlite") {
        bench_resolve_sqlite();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
