//! Store benchmark (issue 2): `cargo bench --bench store`.
//!
//! Prints, measured in one run on this machine:
//! - single-write transactions/s through the full write path vs a raw one-row INSERT
//!   transaction on the same settings (target ratio ≥ 0.5);
//! - `apply` of 100k lines vs a raw bulk INSERT of the same rows (target ratio ≥ 0.3);
//! - resolve latency p50/p99 on a 1M-record database (target p99 ≤ 1 ms);
//! - `check` on that database (target ≤ 10 s).
//!
//! Set MEMSCOPE_BENCH_RECORDS to change the big database's size (default 1,000,000).

#[path = "support/mod.rs"]
mod support;

use memscope::model::{ScopeChoice, WriteRequest};
use memscope::store::InputKind;
use memscope::{OpenMode, Store};
use rusqlite::Connection;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{fresh_dir, fresh_store, remove_db, Paired};

/// `p`'s rates (memscope's, and `baseline`'s) and their ratio. (The best round of each side,
/// also printed, favours the shorter baseline: it more often fits in a quiet moment.)
fn report(p: &Paired, what: &str, unit: &str, baseline: &str, target: Option<f64>) -> String {
    let (ours, theirs) = p.medians();
    let (ratio, spread) = p.ratio();
    let best = |xs: &[f64]| xs.iter().copied().fold(0.0, f64::max);
    let target = target.map_or(String::new(), |t| format!(" (target ≥ {t})"));
    format!(
        "{what}: {ours:.0} {unit}/s, {baseline} {theirs:.0}/s, ratio {ratio:.2}{target} — {spread}, best rounds {:.0} vs {:.0}/s",
        best(&p.ours),
        best(&p.baseline),
    )
}

/// The baseline connection with the store's default settings (durability full).
fn raw_connection(path: &Path) -> Connection {
    raw_connection_synced(path, "FULL")
}

/// The baseline connection, syncing as `synchronous` says (FULL or NORMAL).
fn raw_connection_synced(path: &Path, synchronous: &str) -> Connection {
    remove_db(path);
    let c = Connection::open(path).expect("open raw db");
    c.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .expect("wal");
    c.pragma_update(None, "synchronous", synchronous)
        .expect("sync");
    c.pragma_update(None, "secure_delete", "ON")
        .expect("secure_delete");
    // The same connection settings the store uses.
    c.pragma_update(None, "temp_store", "MEMORY")
        .expect("temp_store");
    c.pragma_update(None, "cache_size", -32768)
        .expect("cache_size");
    c.pragma_update(None, "wal_autocheckpoint", 4000)
        .expect("autocheckpoint");
    c.execute_batch(
        // The baseline a naive client would write: the same rows into a table keyed by identity.
        "CREATE TABLE t (id INTEGER PRIMARY KEY, subject TEXT, predicate TEXT, scope TEXT, value TEXT, version INTEGER,
                         source TEXT, raw TEXT, causal_seq INTEGER, created_at TEXT, updated_at TEXT,
                         UNIQUE (scope, subject, predicate))",
    )
    .expect("create");
    c
}

/// The baseline row: the same columns as the current view, bound the same way.
const RAW_INSERT: &str = "INSERT INTO t (subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at)
                          VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?8)";

/// Runs `stmt` (a [`RAW_INSERT`]) for request `r`, stored as `subject` in `scope`.
fn raw_insert(
    stmt: &mut rusqlite::Statement<'_>,
    subject: &str,
    scope: &str,
    r: &WriteRequest,
    seq: i64,
) {
    stmt.execute(rusqlite::params![
        subject,
        r.predicate,
        scope,
        r.value.to_string(),
        r.source,
        r.raw,
        seq,
        "2026-11-29T00:00:00.000Z"
    ])
    .expect("insert");
}

/// The one scope a bench request names.
fn exact_scope(r: &WriteRequest) -> String {
    match &r.scope {
        ScopeChoice::Exact(s) => s.to_string(),
        ScopeChoice::Ambiguous(_) => unreachable!("bench rows have one scope"),
    }
}

fn request(i: usize, identities: usize) -> WriteRequest {
    let k = i % identities;
    WriteRequest {
        subject: format!("user:{}", k % 1000),
        predicate: format!("pref_{}", k / 1000),
        value: json!(format!("value {i} 值")),
        scope: ScopeChoice::Exact(memscope::Scope::Repo(format!("r{}", k % 7))),
        source: format!("thread:{i}/message:1"),
        raw: Some(format!("用户原话 {i}")),
        causal_seq: None,
        context: None,
    }
}

/// Single writes, one transaction each, at `durability` (full | normal), against raw one-row
/// INSERT transactions that sync the same way.
fn bench_single_writes(dir: &Path, n: usize, durability: &str) -> Paired {
    let mut rates = Paired::default();
    for round in 0..5 {
        let path = dir.join(format!("single-{durability}-{round}.db"));
        let mut store = fresh_store(&path, &[("durability", durability)]);
        // Half inserts, half supersedes: identities repeat once.
        let reqs: Vec<WriteRequest> = (0..n).map(|i| request(i, n / 2)).collect();
        let t = Instant::now();
        for r in &reqs {
            store.write(r).expect("write");
        }
        let store_rate = n as f64 / t.elapsed().as_secs_f64();
        drop(store);

        let raw_path = dir.join(format!("raw-single-{durability}-{round}.db"));
        let c = raw_connection_synced(&raw_path, &durability.to_ascii_uppercase());
        let t = Instant::now();
        for (i, r) in reqs.iter().enumerate() {
            c.execute_batch("BEGIN IMMEDIATE").expect("begin");
            let mut stmt = c.prepare_cached(RAW_INSERT).expect("prep");
            raw_insert(&mut stmt, &format!("raw:{i}"), "global", r, i as i64);
            c.execute_batch("COMMIT").expect("commit");
        }
        rates.push(store_rate, n as f64 / t.elapsed().as_secs_f64());
    }
    rates
}

fn jsonl(n: usize, identities: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(n * 200);
    for i in 0..n {
        serde_json::to_writer(&mut buf, &request(i, identities)).expect("json");
        buf.push(b'\n');
    }
    buf
}

/// The rows `apply` stores for each line — a current-view row and its `set` event — written
/// with raw SQL into memscope's own schema (indexes and triggers), in one transaction, with
/// `OR FAIL` as the write path says it (a plain INSERT would pay a statement journal).
fn raw_schema_rate(dir: &Path, round: usize, reqs: &[WriteRequest]) -> f64 {
    let path = dir.join(format!("raw-schema-{round}.db"));
    remove_db(&path);
    let store = Store::open(&path, OpenMode::Create).expect("open");
    let c = store.connection();
    let t = Instant::now();
    c.execute_batch("BEGIN IMMEDIATE").expect("begin");
    {
        let mut mem = c
            .prepare("INSERT OR FAIL INTO memories (subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at)
                      VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?8)")
            .expect("prep");
        let mut hist = c
            .prepare("INSERT OR FAIL INTO history (event, subject, predicate, scope, version, value, raw, source, causal_seq, at, clock)
                      VALUES ('set', ?1, ?2, ?3, 1, ?4, ?6, ?5, ?7, ?8, ?7)")
            .expect("prep");
        for (i, r) in reqs.iter().enumerate() {
            let scope = exact_scope(r);
            let row = rusqlite::params![
                r.subject,
                r.predicate,
                scope,
                r.value.to_string(),
                r.source,
                r.raw,
                i as i64 + 1,
                "2026-11-29T00:00:00.000Z"
            ];
            mem.execute(row).expect("insert");
            hist.execute(row).expect("insert");
        }
    }
    c.execute_batch("COMMIT").expect("commit");
    reqs.len() as f64 / t.elapsed().as_secs_f64()
}

/// `apply` against the raw bulk INSERT, and against the same rows written raw into memscope's
/// own tables.
fn bench_apply(dir: &Path, n: usize) -> (Paired, Paired) {
    let input = jsonl(n, n);
    let mut vs_bulk = Paired::default();
    let mut vs_schema = Paired::default();
    for round in 0..9 {
        let path = dir.join(format!("apply-{round}.db"));
        let mut store = fresh_store(&path, &[]);
        let mut sink = std::io::sink();
        let owned = std::io::Cursor::new(input.clone());
        let t = Instant::now();
        let summary = store
            // In memory, never pausing: read as `memscope apply FILE` reads a file.
            .apply_from(owned, InputKind::File, |batch| {
                for o in batch {
                    serde_json::to_writer(&mut sink, o)?;
                }
                Ok(())
            })
            .expect("apply");
        let apply_rate = n as f64 / t.elapsed().as_secs_f64();
        assert_eq!(summary.inserted as usize, n);
        drop(store);

        let c = raw_connection(&dir.join(format!("raw-bulk-{round}.db")));
        let reqs: Vec<WriteRequest> = (0..n).map(|i| request(i, n)).collect();
        let t = Instant::now();
        c.execute_batch("BEGIN IMMEDIATE").expect("begin");
        {
            let mut stmt = c.prepare(RAW_INSERT).expect("prep");
            for (i, r) in reqs.iter().enumerate() {
                raw_insert(&mut stmt, &r.subject, &exact_scope(r), r, i as i64);
            }
        }
        c.execute_batch("COMMIT").expect("commit");
        vs_bulk.push(apply_rate, n as f64 / t.elapsed().as_secs_f64());
        vs_schema.push(apply_rate, raw_schema_rate(dir, round, &reqs));
    }
    (vs_bulk, vs_schema)
}

/// Builds (or reuses) the big database through the real `apply` path.
fn big_database(records: usize) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("bench-data");
    std::fs::create_dir_all(&dir).expect("bench-data dir");
    let path = dir.join(format!("store-{records}.db"));
    if path.exists() {
        if let Ok(store) = Store::open(&path, OpenMode::Existing) {
            if store
                .counts()
                .map(|c| c.memories as usize == records)
                .unwrap_or(false)
            {
                return path;
            }
        }
    }
    remove_db(&path);
    eprintln!(
        "building a {records}-record database through `apply` (cached in {})…",
        path.display()
    );
    let mut store = Store::open(&path, OpenMode::Create).expect("open big");
    store.set_assert_invariants(false);
    let chunk = 100_000;
    let t = Instant::now();
    for start in (0..records).step_by(chunk) {
        let mut buf = Vec::with_capacity(chunk * 200);
        for i in start..(start + chunk).min(records) {
            let scope = match i % 10 {
                0..=5 => "global".to_string(),
                6..=8 => format!("repo:repo-{}", i % 500),
                _ => format!("task:task-{}", i % 2000),
            };
            let line = json!({
                "subject": format!("user:{}", i % 20_000),
                "predicate": format!("pref_{}", i / 20_000),
                "value": format!("value {i} 值"),
                "scope": scope,
                "source": format!("thread:{i}/message:1"),
                "raw": format!("用户原话 {i}"),
            });
            serde_json::to_writer(&mut buf, &line).expect("json");
            buf.push(b'\n');
        }
        store
            .apply(std::io::Cursor::new(buf), |_| Ok(()))
            .expect("apply chunk");
    }
    eprintln!("built in {:.1} s", t.elapsed().as_secs_f64());
    path
}

fn bench_resolve(path: &Path, records: usize) -> (Duration, Duration) {
    let store = Store::open(path, OpenMode::Existing).expect("open");
    let mut lat = Vec::with_capacity(20_000);
    for q in 0..20_000usize {
        let i = (q * 7919) % records;
        let subject = format!("user:{}", i % 20_000);
        let predicate = format!("pref_{}", i / 20_000);
        let repo = format!("repo-{}", q % 500);
        let task = format!("task-{}", q % 2000);
        let t = Instant::now();
        let r = store
            .resolve(&subject, &predicate, Some(&repo), Some(&task))
            .expect("resolve");
        lat.push(t.elapsed());
        std::hint::black_box(r);
    }
    lat.sort();
    (lat[lat.len() / 2], lat[lat.len() * 99 / 100])
}

fn main() {
    // `cargo bench` passes --bench; ignore arguments.
    let records = support::size_from_env("MEMSCOPE_BENCH_RECORDS", 1_000_000, 1_000_000) as usize;
    let dir = fresh_dir("memscope-bench");

    // Acknowledged means durable by default: every commit syncs the WAL.
    let full = bench_single_writes(&dir, 2_000, "full");
    println!(
        "{}",
        report(
            &full,
            "single writes, durability full (the default)",
            "writes",
            "raw one-row INSERT, synchronous = FULL",
            Some(0.5)
        )
    );
    let normal = bench_single_writes(&dir, 5_000, "normal");
    println!(
        "{}",
        report(
            &normal,
            "single writes, durability normal",
            "writes",
            "raw one-row INSERT, synchronous = NORMAL",
            Some(0.5)
        )
    );

    let (vs_bulk, vs_schema) = bench_apply(&dir, 100_000);
    println!(
        "{}",
        report(
            &vs_bulk,
            "apply 100k lines",
            "lines",
            "raw bulk INSERT",
            Some(0.3)
        )
    );
    println!(
        "  {}",
        report(
            &vs_schema,
            "the write path's own share",
            "lines",
            "the same rows (current view + history) raw into memscope's own tables",
            None
        )
    );

    if std::env::var_os("MEMSCOPE_BENCH_QUICK").is_some() {
        return;
    }
    let big = big_database(records);
    let (p50, p99) = bench_resolve(&big, records);
    println!(
        "resolve on {records} records (task+repo+global chain): p50 {:.3} ms, p99 {:.3} ms (target p99 ≤ 1 ms)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );

    let store = Store::open(&big, OpenMode::Existing).expect("open");
    let t = Instant::now();
    let report = store.check().expect("check");
    println!(
        "check on {records} records: {:.2} s, ok = {} (target ≤ 10 s)",
        t.elapsed().as_secs_f64(),
        report.ok
    );
    let _ = std::fs::remove_dir_all(&dir);
}
