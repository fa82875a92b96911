//! Soak (issue 5): 8 writer threads each driving the real binary — `apply -`, `write` (exact
//! and `--ambiguous`), `delete` (identity and predicate), `restore`, `pending resolve/reject` —
//! on overlapping identities, beside a reader that polls like the UI (`PRAGMA data_version`,
//! then short reads) and a loop of `memscope check`, for a bounded time.
//!
//! Asserts: no command surfaces a busy/locked error or fails unexpectedly; every `check` in the
//! loop and at the end is clean; no lost write: every outcome line is accounted for in the
//! database (its `set`/`confirmed`/`stale`/`rejected` event, its pending item) unless a delete
//! that ended after the write started purged it; and no phantom write: every event carrying a
//! soak source was reported by some command. Prints ops/s and the worst write latency.
//!
//! `MEMSCOPE_SOAK_SECS` (default 20) sets the duration; `MEMSCOPE_SOAK_SEED` replays the
//! operation mix. Reproduce:
//! `MEMSCOPE_ASSERT_INVARIANTS=1 MEMSCOPE_SOAK_SECS=60 cargo test --release --test reliability -- soak:: --nocapture`

use crate::support::reliability::*;
use crate::support::{args_for, strs};
use chrono::{DateTime, SecondsFormat, Utc};
use memscope::{OpenMode, Store};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

const WRITERS: usize = 8;
const SUBJECTS: [&str; 6] = ["soak:0", "soak:1", "soak:2", "soak:3", "soak:4", "soak:5"];
/// Deletes and restores touch only these subjects: the outcomes written to the others must
/// every one be found in the database directly.
const DELETABLE: [&str; 3] = ["soak:3", "soak:4", "soak:5"];
const PREDICATES: [&str; 3] = ["package_manager", "formatter", "test_runner"];
const SCOPES: [&str; 4] = ["global", "repo:r0", "repo:r1", "task:t0"];
const VALUES: [&str; 7] = ["npm", "NPM ", "pnpm", "yarn", "bun", "biome", "vitest"];

fn stamp(t: SystemTime) -> String {
    DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// One outcome a command reported.
#[derive(Debug, Clone)]
struct Reported {
    outcome: Value,
    source: String,
    /// When the command that produced it started (RFC 3339, ms, 5 ms early for clock skew).
    started: String,
}

/// A delete that succeeded: what it targeted and when it ended.
#[derive(Debug, Clone)]
struct DeleteDone {
    subject: String,
    predicate: Option<String>,
    scope: Option<String>,
    ended: String,
}

#[derive(Default)]
struct Tally {
    reported: Vec<Reported>,
    deletes: Vec<DeleteDone>,
    /// Pending items a writer resolved, and the scope it chose (a delete of that scope purges
    /// the item too).
    resolved: HashMap<i64, String>,
    violations: Vec<String>,
    ops: u64,
    refusals: u64,
    write_latencies: Vec<Duration>,
    by_kind: BTreeMap<String, u64>,
}

fn random_line(rng: &mut Rng, source: &str) -> Value {
    let mut o = json!({
        "subject": rng.pick(&SUBJECTS),
        "predicate": rng.pick(&PREDICATES),
        "value": rng.pick(&VALUES),
        "source": source,
    });
    if rng.chance(15) {
        let a = rng.below(4) as usize;
        let b = (a + 1 + rng.below(3) as usize) % 4;
        o["scope"] = json!({ "ambiguous": [SCOPES[a], SCOPES[b]] });
        o["raw"] = json!(format!("not sure where this applies ({source})"));
    } else {
        o["scope"] = json!(rng.pick(&SCOPES));
    }
    if rng.chance(50) {
        o["causal_seq"] = json!(1 + rng.below(3000));
    }
    o
}

fn is_busy(text: &str) -> bool {
    let t = text.to_lowercase();
    t.contains("locked") || t.contains("busy")
}

/// One writer: a random mix of commands until `deadline`.
fn writer(db: &Db, w: usize, seed: u64, deadline: Instant, tally: &Mutex<Tally>) {
    let mut rng = Rng::new(seed ^ (w as u64 + 1).wrapping_mul(0x9E37));
    let mut n = 0u64;
    let mut my_pending: Vec<(i64, String)> = Vec::new();
    while Instant::now() < deadline {
        n += 1;
        let roll = rng.below(100);
        let started_at = SystemTime::now();
        let started = stamp(started_at - Duration::from_millis(5));
        let clock = Instant::now();
        let (kind, run, sources): (&str, Run, Vec<String>) = if roll < 45 {
            let k = 1 + rng.below(8) as usize;
            let sources: Vec<String> = (0..k).map(|i| format!("soak:w{w}:{n}:{i}")).collect();
            let input: String = sources
                .iter()
                .map(|s| format!("{}\n", random_line(&mut rng, s)))
                .collect();
            (
                "apply",
                db.run_stdin(&["apply", "-"], input.as_bytes()),
                sources,
            )
        } else if roll < 70 {
            let source = format!("soak:w{w}:{n}");
            let line = random_line(&mut rng, &source);
            let value = line["value"].as_str().unwrap().to_string();
            let mut args: Vec<String> = vec![
                "write".into(),
                "--subject".into(),
                line["subject"].as_str().unwrap().into(),
                "--predicate".into(),
                line["predicate"].as_str().unwrap().into(),
                "--value".into(),
                value,
                "--source".into(),
                source.clone(),
                "--json".into(),
            ];
            match &line["scope"] {
                Value::String(s) => args.extend(["--scope".into(), s.clone()]),
                other => {
                    let c = strs(&other["ambiguous"]);
                    args.extend(["--ambiguous".into(), c.join(",")]);
                }
            }
            if let Some(seq) = line["causal_seq"].as_u64() {
                args.extend(["--causal-seq".into(), seq.to_string()]);
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            ("write", db.run(&args), vec![source])
        } else if roll < 75 {
            let subject = rng.pick(&DELETABLE).to_string();
            let predicate = rng.pick(&PREDICATES).to_string();
            let identity = rng.chance(85);
            let scope = rng.pick(&SCOPES).to_string();
            let mut args = args_for("delete", &subject, &predicate, &["--yes"]);
            if identity {
                args.extend(["--scope", &scope]);
            }
            args.extend(["--reason", "soak", "--json"]);
            let run = db.run(&args);
            if run.code == 0 {
                tally.lock().unwrap().deletes.push(DeleteDone {
                    subject: subject.clone(),
                    predicate: Some(predicate.clone()),
                    scope: identity.then(|| scope.clone()),
                    ended: stamp(SystemTime::now()),
                });
            }
            ("delete", run, vec![])
        } else if roll < 90 {
            let args = [
                "restore",
                "--subject",
                *rng.pick(&DELETABLE),
                "--predicate",
                *rng.pick(&PREDICATES),
                "--scope",
                *rng.pick(&SCOPES),
                "--json",
            ];
            ("restore", db.run(&args), vec![])
        } else if !my_pending.is_empty() {
            let i = rng.below(my_pending.len() as u64) as usize;
            let (id, source) = my_pending.swap_remove(i);
            let id = id.to_string();
            if rng.chance(75) {
                // Any scope, candidate or not: the soak chooses knowingly (--force).
                let scope = *rng.pick(&SCOPES);
                let args = [
                    "pending", "resolve", &id, "--scope", scope, "--force", "--json",
                ];
                let run = db.run(&args);
                if run.stdout.trim_start().starts_with('{') {
                    let mut t = tally.lock().unwrap();
                    t.resolved.insert(id.parse().unwrap(), scope.to_string());
                }
                ("pending resolve", run, vec![source])
            } else {
                (
                    "pending reject",
                    db.run(&["pending", "reject", &id, "--json"]),
                    vec![],
                )
            }
        } else {
            continue;
        };
        let latency = clock.elapsed();

        let mut t = tally.lock().unwrap();
        t.ops += 1;
        *t.by_kind.entry(kind.to_string()).or_default() += 1;
        if is_busy(&run.stderr) {
            t.violations.push(format!(
                "writer {w}: {kind} surfaced a busy error: {}",
                run.stderr.trim()
            ));
            continue;
        }
        let mut outcomes: Vec<Value> = Vec::new();
        match kind {
            "apply" => {
                outcomes = run.complete_json_lines();
                t.write_latencies.push(latency);
                if run.code != 0 || outcomes.len() != sources.len() {
                    t.violations.push(format!(
                        "writer {w}: apply exited {} with {} outcome(s) for {} line(s): {}",
                        run.code,
                        outcomes.len(),
                        sources.len(),
                        run.stderr.trim()
                    ));
                }
            }
            "write" => {
                t.write_latencies.push(latency);
                if run.code == 0 {
                    outcomes = vec![run.json()];
                } else {
                    t.violations.push(format!(
                        "writer {w}: write exited {}: {}",
                        run.code,
                        run.stderr.trim()
                    ));
                }
            }
            "pending resolve" => {
                t.write_latencies.push(latency);
                if run.code == 0 || (run.code == 1 && run.stdout.trim_start().starts_with('{')) {
                    // Exit 1 with an outcome: the chosen scope was deleted (rejected).
                    outcomes = vec![run.json()];
                } else if run.stderr.contains("no pending item") || run.stderr.contains("already") {
                    t.refusals += 1; // purged by a delete, or resolved meanwhile
                } else {
                    t.violations.push(format!(
                        "writer {w}: pending resolve exited {}: {}",
                        run.code,
                        run.stderr.trim()
                    ));
                }
            }
            _ => {
                let expected_refusal = [
                    "nothing matches",
                    "there is no memory",
                    "is not deleted",
                    "no pending item",
                    "already",
                ];
                if run.code != 0 {
                    if run.code == 1 && expected_refusal.iter().any(|r| run.stderr.contains(r)) {
                        t.refusals += 1;
                    } else {
                        t.violations.push(format!(
                            "writer {w}: {kind} exited {}: {}",
                            run.code,
                            run.stderr.trim()
                        ));
                    }
                }
            }
        }
        for (i, o) in outcomes.into_iter().enumerate() {
            let source = sources.get(i).cloned().unwrap_or_default();
            if o["outcome"] == "error" {
                t.violations
                    .push(format!("writer {w}: {kind} reported an error outcome: {o}"));
            }
            if o["outcome"] == "pending" && kind != "pending resolve" {
                my_pending.push((o["pending_id"].as_i64().unwrap(), source.clone()));
            }
            t.reported.push(Reported {
                outcome: o,
                source,
                started: started.clone(),
            });
        }
    }
}

/// A reader polling like the UI: `PRAGMA data_version`, and on a change a few short reads.
fn reader(db: &Db, stop: &AtomicBool, polls: &AtomicU64, refreshes: &AtomicU64) -> Vec<String> {
    let mut violations = Vec::new();
    let store = match Store::open(&db.path, OpenMode::Existing) {
        Ok(s) => s,
        Err(e) => return vec![format!("reader: cannot open: {e:#}")],
    };
    let mut last = -1;
    while !stop.load(Ordering::Relaxed) {
        polls.fetch_add(1, Ordering::Relaxed);
        match store.data_version() {
            Ok(v) if v != last => {
                last = v;
                refreshes.fetch_add(1, Ordering::Relaxed);
                let reads = (|| -> anyhow::Result<()> {
                    store.counts()?;
                    store.list(&memscope::store::ListFilter::default())?;
                    store.resolve("soak:0", "package_manager", Some("r0"), Some("t0"))?;
                    store.pending(false)?;
                    Ok(())
                })();
                if let Err(e) = reads {
                    violations.push(format!("reader: {e:#}"));
                }
            }
            Ok(_) => {}
            Err(e) => violations.push(format!("reader: data_version: {e:#}")),
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    violations
}

/// (event, subject, predicate, scope, version) of one history row.
type Event = (String, String, String, String, Option<i64>);

/// Every event the soak's sources left, keyed by source.
fn events_by_source(db: &Db) -> HashMap<String, Vec<Event>> {
    let rows: Vec<(String, Event)> = db.sql_rows(
        "SELECT source, event, subject, predicate, scope, version FROM history WHERE source LIKE 'soak:%'",
        |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))),
    );
    let mut out: HashMap<String, Vec<Event>> = HashMap::new();
    for (source, e) in rows {
        out.entry(source).or_default().push(e);
    }
    out
}

#[test]
fn eight_writers_a_polling_reader_and_check_in_a_loop() {
    let secs = env_u64("MEMSCOPE_SOAK_SECS", 20);
    let seed = seed_from_env("MEMSCOPE_SOAK_SEED");
    let db = Arc::new(Db::new());
    db.init();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let stop = Arc::new(AtomicBool::new(false));
    let (polls, refreshes, checks) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, tally) = (db.clone(), tally.clone());
            std::thread::spawn(move || writer(&db, w, seed, deadline, &tally))
        })
        .collect();
    let reader_thread = {
        let (db, stop, polls, refreshes) =
            (db.clone(), stop.clone(), polls.clone(), refreshes.clone());
        std::thread::spawn(move || reader(&db, &stop, &polls, &refreshes))
    };
    let checker = {
        let (db, stop, checks) = (db.clone(), stop.clone(), checks.clone());
        std::thread::spawn(move || {
            let mut bad = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let r = db.run(&["check", "--json"]);
                checks.fetch_add(1, Ordering::Relaxed);
                if r.code != 0 {
                    bad.push(format!(
                        "check in the loop exited {}: {}{}",
                        r.code, r.stdout, r.stderr
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            bad
        })
    };
    for w in writers {
        w.join().expect("writer thread");
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut violations = reader_thread.join().expect("reader thread");
    violations.extend(checker.join().expect("check thread"));

    let final_report = db.assert_check_ok();
    let mut t = std::mem::take(&mut *tally.lock().unwrap());
    violations.append(&mut t.violations);

    // No lost write, no phantom write.
    let events = events_by_source(&db);
    let pending_ids: HashSet<i64> = {
        let conn = db.sql();
        let mut stmt = conn.prepare("SELECT id FROM pending").unwrap();
        let ids = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        ids
    };
    let purged_after = |subject: &str, predicate: &str, scopes: &[&str], since: &str| {
        t.deletes.iter().any(|d| {
            d.subject == subject
                && d.predicate.as_deref().is_none_or(|p| p == predicate)
                && d.scope.as_deref().is_none_or(|s| scopes.contains(&s))
                && d.ended.as_str() >= since
        })
    };
    let mut outcome_tally: BTreeMap<String, u64> = BTreeMap::new();
    let mut accounted_by_purge = 0u64;
    let mut accounted_directly = 0u64;
    let mut reported_events: HashMap<(String, String), u64> = HashMap::new();
    for r in &t.reported {
        let o = &r.outcome;
        let kind = o["outcome"].as_str().unwrap_or("?").to_string();
        *outcome_tally.entry(kind.clone()).or_default() += 1;
        let subject = o["subject"].as_str().unwrap_or_default();
        let predicate = o["predicate"].as_str().unwrap_or_default();
        match (&o["scope"], event_of(&kind)) {
            (Value::String(scope), Some(event)) => {
                *reported_events
                    .entry((r.source.clone(), event.to_string()))
                    .or_default() += 1;
                let found = events.get(&r.source).is_some_and(|es| {
                    es.iter().any(|(e, s, p, sc, v)| {
                        e == event
                            && s == subject
                            && p == predicate
                            && sc == scope
                            && (event != "set" || *v == o["version"].as_i64())
                    })
                });
                if found {
                    accounted_directly += 1;
                } else {
                    if purged_after(subject, predicate, &[scope], &r.started) {
                        accounted_by_purge += 1;
                    } else {
                        violations.push(format!(
                            "lost write: {o} (source {}) has no {event} event and no later delete purged it",
                            r.source
                        ));
                    }
                }
            }
            (Value::Object(c), None) if kind == "pending" => {
                let id = o["pending_id"].as_i64().unwrap_or(-1);
                if pending_ids.contains(&id) {
                    accounted_directly += 1;
                } else {
                    let mut cands: Vec<&str> = c["ambiguous"]
                        .as_array()
                        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                        .unwrap_or_default();
                    if let Some(chosen) = t.resolved.get(&id) {
                        cands.push(chosen);
                    }
                    if purged_after(subject, predicate, &cands, &r.started) {
                        accounted_by_purge += 1;
                    } else {
                        violations.push(format!(
                            "lost pending item: {o} (source {}) is gone and no later delete purged it",
                            r.source
                        ));
                    }
                }
            }
            _ => {} // an ambiguous write refused (fewer than two candidates not deleted): no event
        }
    }
    for (source, es) in &events {
        for (event, ..) in es {
            if !["set", "confirmed", "stale", "rejected"].contains(&event.as_str()) {
                continue;
            }
            let reported = reported_events
                .get(&(source.clone(), event.clone()))
                .copied()
                .unwrap_or(0);
            if reported == 0 {
                violations.push(format!(
                    "phantom write: a {event} event with source {source} that no command reported"
                ));
            }
        }
    }

    let total_outcomes = t.reported.len() as u64;
    let mut lat = t.write_latencies.clone();
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or_default()
    };
    eprintln!(
        "soak: {secs} s, {WRITERS} writer threads, {} commands ({:.1} commands/s) {:?}, {total_outcomes} outcomes ({:.1} outcomes/s) {outcome_tally:?}",
        t.ops,
        t.ops as f64 / elapsed.as_secs_f64(),
        t.by_kind,
        total_outcomes as f64 / elapsed.as_secs_f64(),
    );
    eprintln!(
        "soak: write latency per command (process wall time) p50 {:.1} ms, p99 {:.1} ms, worst {:.1} ms; {} refusals (nothing to delete/restore/resolve); {accounted_directly} outcome(s) found in the database, {accounted_by_purge} purged by later deletes",
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        lat.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        t.refusals,
    );
    eprintln!(
        "soak: reader {} polls, {} refreshes; {} checks in the loop; busy_retries {}; violations found: {}",
        polls.load(Ordering::Relaxed),
        refreshes.load(Ordering::Relaxed),
        checks.load(Ordering::Relaxed),
        final_report["metrics"]["busy_retries"],
        violations.len()
    );
    assert!(t.ops > 0 && total_outcomes > 0, "the soak did nothing");
    assert!(
        violations.is_empty(),
        "{} violation(s):\n{}",
        violations.len(),
        violations.join("\n")
    );

    // Whatever purge a reader blocked during the soak is paid by the next operation.
    db.run(&["gc"]).ok();
    let report = db.assert_check_ok();
    assert!(
        report["metrics"]["purge_debt_since"].is_null(),
        "purge debt left after gc: {report:#}"
    );
}

/// Found by the soak: a pending resolution that took its timestamp, then waited for the write
/// lock while another process deleted the scope it resolves into. Its `resolved_at` is older
/// than the tombstone's `deleted_at` although it committed after the delete. Made deterministic
/// here with two fixed clocks (the resolver's one second behind the deleter's). The resolution
/// must come out `rejected` (the scope is deleted) and leave `check` clean; it must not be
/// refused as an invariant-3 violation, nor (without the per-write assert) leave one behind.
#[test]
fn a_resolution_that_waited_behind_a_delete_is_rejected_and_check_stays_clean() {
    use chrono::{TimeZone, Utc};
    use memscope::{Clock, DeleteTarget, Identity, OutcomeKind, Scope, ScopeChoice, WriteRequest};
    let db = Db::new();
    let t2 = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 1).unwrap();
    let t1 = t2 - chrono::Duration::seconds(1);
    let mut deleter = Store::open(&db.path, OpenMode::Create).unwrap();
    let mut resolver = Store::open(&db.path, OpenMode::Create).unwrap();
    deleter.set_assert_invariants(true);
    resolver.set_assert_invariants(true);
    deleter.set_clock(Clock::Fixed(t1));
    let write = |store: &mut Store, scope: ScopeChoice, source: &str| {
        store
            .write(&WriteRequest {
                subject: "soak:3".into(),
                predicate: "test_runner".into(),
                value: json!("vitest"),
                scope,
                source: source.into(),
                raw: Some("use vitest".into()),
                causal_seq: None,
                context: None,
            })
            .unwrap()
    };
    write(
        &mut deleter,
        ScopeChoice::Exact(Scope::Repo("r0".into())),
        "s:1",
    );
    let pending = write(
        &mut deleter,
        ScopeChoice::ambiguous(vec![Scope::Global, Scope::Task("t0".into())]).unwrap(),
        "s:2",
    );
    let id = pending.pending_id.unwrap();

    // The resolver read its clock (t1) first; the delete (t2) got the lock first.
    deleter.set_clock(Clock::Fixed(t2));
    resolver.set_clock(Clock::Fixed(t1));
    deleter
        .delete(
            &DeleteTarget::Identity(Identity {
                subject: "soak:3".into(),
                predicate: "test_runner".into(),
                scope: Scope::Repo("r0".into()),
            }),
            None,
        )
        .unwrap();
    // repo:r0 is outside the item's candidates: the resolver chooses it knowingly.
    let out = resolver.resolve_pending(id, &Scope::Repo("r0".into()), true);
    match &out {
        Ok(o) => assert_eq!(o.outcome, OutcomeKind::Rejected, "{o:?}"),
        Err(e) => panic!("resolving into a deleted scope must come out rejected, got: {e:#}"),
    }
    let report = resolver.check().unwrap();
    assert!(report.ok, "{:?}", report.violations);
}
