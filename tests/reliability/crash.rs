//! Crash safety of `memscope apply` (issue 5).
//!
//! A 10,000-line JSON Lines file, `causal_seq` on every line (fresh writes, causally late
//! writes, retries of earlier lines with their own number, writes to a deleted identity and bad
//! lines), is applied by the real binary and killed with SIGKILL (`Child::kill`) at a random
//! moment, at least 20 times. After each kill:
//! - `check` is clean and SQLite's integrity check passes;
//! - no line is half-applied: the lines that left an event are exactly a prefix of the file,
//!   each with exactly one event of the kind an uninterrupted run gives it, and the current
//!   view equals the reference simulation of that prefix;
//! - re-running the whole file converges to the state of an uninterrupted run: replayed lines
//!   come out `confirmed` or `stale` (never a new version), new lines as in the uninterrupted
//!   run, `list --json` equals the reference run's and no identity has a duplicate version.
//!
//! `MEMSCOPE_CRASH_ROUNDS=N` (default 20) sets how many kills must land mid-run;
//! `MEMSCOPE_CRASH_SEED` replays a run.
//!
//! Reproduce: `MEMSCOPE_ASSERT_INVARIANTS=1 cargo test --release --test reliability -- crash::`

use crate::support::reliability::*;
use crate::support::{args_for, outcomes};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const LINES: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Fresh,
    Retry,
    Tombstoned,
    Invalid,
}

#[derive(Debug, Clone)]
struct Line {
    kind: Kind,
    subject: String,
    predicate: String,
    scope: String,
    value: String,
    seq: i64,
    raw: Option<String>,
    text: String,
}

type Key = (String, String, String);

#[derive(Debug, Clone, PartialEq)]
struct Rec {
    value: String,
    seq: i64,
    version: i64,
    source: String,
    raw: Option<String>,
}

/// The outcome an uninterrupted run gives each line: (outcome, version).
type Expected = (String, Option<i64>);

fn source(i: usize) -> String {
    format!("crash:L{i}")
}

/// Builds the file. Fresh writes take unique numbers from a moving clock (15% of them
/// causally late); a retry repeats an earlier write with its own number and value; every
/// value of a fresh write is its own.
fn generate(rng: &mut Rng) -> Vec<Line> {
    let subjects: Vec<String> = (0..300).map(|i| format!("crash:s{i}")).collect();
    let predicates = ["p0", "p1"];
    let scopes = ["global", "repo:r0"];
    let mut used: HashSet<i64> = HashSet::new();
    let mut clock: i64 = 1000;
    let mut lines: Vec<Line> = Vec::with_capacity(LINES);
    for i in 1..=LINES {
        let roll = rng.below(100);
        let mut line = if roll < 1 {
            Line {
                kind: Kind::Tombstoned,
                subject: "crash:gone".into(),
                predicate: "p0".into(),
                scope: "global".into(),
                value: format!("v{i}"),
                seq: 0,
                raw: Some(format!("deleted words {i}")),
                text: String::new(),
            }
        } else if roll < 2 {
            Line {
                kind: Kind::Invalid,
                subject: String::new(),
                predicate: "p0".into(),
                scope: "global".into(),
                value: format!("v{i}"),
                seq: 0,
                raw: None,
                text: String::new(),
            }
        } else if roll < 12 && lines.iter().any(|l| l.kind == Kind::Fresh) {
            let mut j = rng.below(lines.len() as u64) as usize;
            while lines[j].kind != Kind::Fresh {
                j = (j + 1) % lines.len();
            }
            let mut l = lines[j].clone();
            l.kind = Kind::Retry;
            l
        } else {
            Line {
                kind: Kind::Fresh,
                subject: rng.pick(&subjects).clone(),
                predicate: rng.pick(&predicates).to_string(),
                scope: rng.pick(&scopes).to_string(),
                value: format!("v{i}"),
                seq: 0,
                raw: rng
                    .chance(30)
                    .then(|| format!("the user said so on line {i}")),
                text: String::new(),
            }
        };
        if line.kind != Kind::Retry {
            let late = rng.chance(15) && clock > 1300;
            let mut seq = if late {
                clock - 1 - rng.below(300) as i64
            } else {
                clock += 1 + rng.below(3) as i64;
                clock
            };
            while used.contains(&seq) {
                seq += 1;
                clock = clock.max(seq);
            }
            used.insert(seq);
            line.seq = seq;
        }
        line.text = match line.kind {
            Kind::Invalid if i % 2 == 0 => format!(
                r#"{{"subject":"crash:s1","predicate":"p0","value":"v{i}","scope":"global","causal_seq":{},"source":"#,
                line.seq
            ),
            _ => {
                let mut o = json!({
                    "subject": line.subject, "predicate": line.predicate, "value": line.value,
                    "scope": line.scope, "source": source(i), "causal_seq": line.seq,
                });
                if let Some(raw) = &line.raw {
                    o["raw"] = json!(raw);
                }
                o.to_string()
            }
        };
        lines.push(line);
    }
    lines
}

/// The write rules (README, "The model in one minute") over the first `upto` lines: the current view and each line's outcome.
fn simulate(lines: &[Line], upto: usize) -> (BTreeMap<Key, Rec>, Vec<Expected>) {
    let mut cur: BTreeMap<Key, Rec> = BTreeMap::new();
    let mut max_version: HashMap<Key, i64> = HashMap::new();
    let mut outs = Vec::with_capacity(upto);
    for (i, l) in lines.iter().take(upto).enumerate() {
        let key = (l.subject.clone(), l.predicate.clone(), l.scope.clone());
        let out = match l.kind {
            Kind::Invalid => ("error".to_string(), None),
            Kind::Tombstoned => ("rejected".to_string(), None),
            Kind::Fresh | Kind::Retry => {
                let mv = max_version.entry(key.clone()).or_insert(0);
                let new = |version| Rec {
                    value: l.value.clone(),
                    seq: l.seq,
                    version,
                    source: source(i + 1),
                    raw: l.raw.clone(),
                };
                match cur.get(&key) {
                    None => {
                        *mv += 1;
                        cur.insert(key, new(*mv));
                        ("inserted".to_string(), Some(*mv))
                    }
                    Some(c) if c.value == l.value => ("confirmed".to_string(), Some(c.version)),
                    Some(c) if c.seq >= l.seq => ("stale".to_string(), Some(c.version)),
                    Some(c) => {
                        let v = c.version + 1;
                        *mv = v;
                        cur.insert(key, new(v));
                        ("superseded".to_string(), Some(v))
                    }
                }
            }
        };
        outs.push(out);
    }
    (cur, outs)
}

/// A database with the deleted identity the file's `Tombstoned` lines hit.
fn base_database(dir: &Path) -> std::path::PathBuf {
    let db = Db::at(dir.join("base.db"));
    db.init();
    let w = db.run(&args_for(
        "write",
        "crash:gone",
        "p0",
        &[
            "--value",
            "secret",
            "--scope",
            "global",
            "--source",
            "setup",
            "--causal-seq",
            "1",
        ],
    ));
    assert_eq!(w.code, 0, "{w:?}");
    let d = db.run(&args_for("delete", "crash:gone", "p0", &["--yes"]));
    assert_eq!(d.code, 0, "{d:?}");
    db.path.clone()
}

fn copy_db(from: &Path, to: &Path) {
    for (a, b) in db_files(from).iter().zip(db_files(to).iter()) {
        if a.exists() {
            std::fs::copy(a, b).expect("copy database file");
        }
    }
}

/// (line number → (event, count)) for every event the file's lines left.
fn events_by_line(db: &Db) -> BTreeMap<usize, Vec<(String, i64)>> {
    let rows: Vec<(String, String, i64)> = db.sql_rows(
        "SELECT source, event, count(*) FROM history WHERE source LIKE 'crash:L%' GROUP BY source, event",
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    );
    let mut out: BTreeMap<usize, Vec<(String, i64)>> = BTreeMap::new();
    for (src, event, n) in rows {
        let line: usize = src.trim_start_matches("crash:L").parse().unwrap();
        out.entry(line).or_default().push((event, n));
    }
    out
}

fn view(db: &Db) -> Vec<Value> {
    let mut v: Vec<Value> = db.list(&[]).iter().map(record_key).collect();
    v.sort_by_key(|r| r.to_string());
    v
}

fn model_view(cur: &BTreeMap<Key, Rec>) -> Vec<Value> {
    let mut v: Vec<Value> = cur
        .iter()
        .map(|(k, r)| {
            json!({
                "subject": k.0, "predicate": k.1, "scope": k.2, "value": r.value,
                "version": r.version, "source": r.source, "causal_seq": r.seq, "raw": r.raw,
            })
        })
        .collect();
    v.sort_by_key(|r| r.to_string());
    v
}

fn set_versions(db: &Db) -> Vec<(String, String, String, i64, i64)> {
    let conn = db.sql();
    let mut stmt = conn
        .prepare(
            "SELECT subject, predicate, scope, count(*), count(DISTINCT version) FROM history
             WHERE event = 'set' GROUP BY subject, predicate, scope ORDER BY 1, 2, 3",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

#[track_caller]
fn assert_sound(db: &Db, what: &str) {
    let (code, report) = db.check();
    assert_eq!(code, 0, "{what}: check is not clean: {report:#}");
    let integrity: String = db
        .sql()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok", "{what}: SQLite integrity check");
}

/// The file's text in chunks of 150..900 whole lines.
fn chunk_lines(lines: &[Line], rng: &mut Rng) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let n = 150 + rng.below(750) as usize;
        let end = (i + n).min(lines.len());
        chunks.push(
            lines[i..end]
                .iter()
                .map(|l| format!("{}\n", l.text))
                .collect(),
        );
        i = end;
    }
    chunks
}

/// `apply FILE` (or `apply -` when `file` is None) with stdout to `out`; `assert` turns the
/// per-write invariant re-check on.
fn apply_cmd(db: &Db, file: Option<&Path>, out: &Path, assert: bool) -> std::process::Command {
    let arg = file.map_or("-".to_string(), |f| f.display().to_string());
    let mut c = db.command(&["apply", &arg]);
    c.env("MEMSCOPE_ASSERT_INVARIANTS", if assert { "1" } else { "0" })
        .stdout(Stdio::from(std::fs::File::create(out).unwrap()))
        .stderr(Stdio::null());
    if file.is_none() {
        c.stdin(Stdio::piped());
    }
    c
}

#[test]
fn kill_9_during_apply_never_half_applies_and_a_rerun_converges() {
    let seed = seed_from_env("MEMSCOPE_CRASH_SEED");
    let want_kills = env_u64("MEMSCOPE_CRASH_ROUNDS", 20) as usize;
    let mut rng = Rng::new(seed);
    let work = tempfile::tempdir().unwrap();
    let lines = generate(&mut rng);
    let file = work.path().join("writes.jsonl");
    let text: String = lines.iter().map(|l| format!("{}\n", l.text)).collect();
    std::fs::write(&file, &text).unwrap();
    let base = base_database(work.path());
    let (full_state, full_outs) = simulate(&lines, LINES);

    // The reference: one uninterrupted run, which the simulation must predict line by line.
    let reference = Db::at(work.path().join("reference.db"));
    copy_db(&base, &reference.path);
    let out_path = work.path().join("reference.out");
    let started = Instant::now();
    let status = apply_cmd(&reference, Some(&file), &out_path, true)
        .status()
        .unwrap();
    let full_run = started.elapsed();
    assert_eq!(
        status.code(),
        Some(1),
        "the file has bad lines: apply exits 1"
    );
    let outs = json_lines(&std::fs::read_to_string(&out_path).unwrap());
    assert_eq!(outs.len(), LINES, "one outcome per line");
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(o["line"], json!(i + 1));
        let want = &full_outs[i];
        assert_eq!(
            (o["outcome"].as_str().unwrap(), o["version"].as_i64()),
            (want.0.as_str(), want.1),
            "reference run, line {}: {}",
            i + 1,
            lines[i].text
        );
    }
    assert_sound(&reference, "reference run");
    let reference_view = view(&reference);
    assert_eq!(reference_view, model_view(&full_state));
    let reference_versions = set_versions(&reference);
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for (o, _) in &full_outs {
        *tally.entry(o.clone()).or_default() += 1;
    }
    eprintln!(
        "crash: reference run of {LINES} lines took {:.2} s: {tally:?}",
        full_run.as_secs_f64()
    );

    // The killed runs and their re-runs skip the per-write re-check by default (it makes a run
    // ~10x slower; every round ends with a full `check`): MEMSCOPE_CRASH_ASSERT=1 keeps it.
    let assert_in_rounds = env_u64("MEMSCOPE_CRASH_ASSERT", 0) == 1;
    let timing = Db::at(work.path().join("timing.db"));
    copy_db(&base, &timing.path);
    let timing_out = work.path().join("timing.out");
    let started = Instant::now();
    apply_cmd(&timing, Some(&file), &timing_out, assert_in_rounds)
        .status()
        .unwrap();
    let window_ms = (started.elapsed().as_millis() as u64).max(20);
    assert_eq!(
        view(&timing),
        reference_view,
        "the same file applied without the per-write re-check gives another state"
    );
    let piped_window_ms = window_ms + 15 * (LINES as u64 / 500);
    let (mut kills, mut attempts) = (0usize, 0usize);
    let (mut min_prefix, mut max_prefix) = (usize::MAX, 0usize);
    let mut replay_tally: BTreeMap<String, usize> = BTreeMap::new();
    while kills < want_kills {
        attempts += 1;
        assert!(
            attempts <= want_kills * 4,
            "only {kills} of {attempts} attempts killed apply before it finished"
        );
        let db = Db::at(work.path().join(format!("round{attempts}.db")));
        copy_db(&base, &db.path);
        let killed_out = work.path().join(format!("round{attempts}.out"));
        // Odd rounds: `apply FILE`. Even rounds: `apply -` fed in chunks that end on line
        // boundaries, so that apply commits many batches before the kill lands.
        let piped = attempts % 2 == 0;
        let window = if piped { piped_window_ms } else { window_ms };
        let delay = Duration::from_millis(rng.below(window));
        let input = (!piped).then_some(file.as_path());
        let mut child = apply_cmd(&db, input, &killed_out, assert_in_rounds)
            .spawn()
            .unwrap();
        let feeder = child.stdin.take().map(|mut stdin| {
            let chunks = chunk_lines(&lines, &mut rng);
            std::thread::spawn(move || {
                use std::io::Write;
                for chunk in chunks {
                    if stdin.write_all(chunk.as_bytes()).is_err() {
                        return;
                    }
                    let _ = stdin.flush();
                    std::thread::sleep(Duration::from_millis(15));
                }
            })
        });
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_some() {
            eprintln!("crash: attempt {attempts}: apply finished before the kill at {delay:?}");
            if let Some(f) = feeder {
                f.join().unwrap();
            }
            continue;
        }
        child.kill().expect("SIGKILL");
        let status = child.wait().unwrap();
        if let Some(f) = feeder {
            f.join().unwrap();
        }
        assert!(!status.success(), "a killed process does not exit 0");
        kills += 1;
        let what = format!(
            "round {kills} ({}, seed {seed}, killed at {delay:?})",
            if piped {
                "apply - fed in chunks"
            } else {
                "apply FILE"
            }
        );

        // After the crash: sound, and exactly a prefix of the file applied, once each.
        assert_sound(&db, &what);
        let events = events_by_line(&db);
        let prefix = events.keys().next_back().copied().unwrap_or(0);
        let (prefix_state, _) = simulate(&lines, prefix);
        for i in 1..=LINES {
            let have = events.get(&i).cloned().unwrap_or_default();
            let want: Vec<(String, i64)> = match (i <= prefix, event_of(&full_outs[i - 1].0)) {
                (true, Some(e)) => vec![(e.to_string(), 1)],
                _ => vec![],
            };
            assert_eq!(
                have,
                want,
                "{what}: line {i} (applied prefix 1..{prefix}): {}",
                lines[i - 1].text
            );
        }
        assert_eq!(
            view(&db),
            model_view(&prefix_state),
            "{what}: the current view is not the state after lines 1..{prefix}"
        );
        for o in json_lines(&std::fs::read_to_string(&killed_out).unwrap()) {
            let line = o["line"].as_u64().unwrap() as usize;
            let want = &full_outs[line - 1];
            assert_eq!(
                (o["outcome"].as_str().unwrap(), o["version"].as_i64()),
                (want.0.as_str(), want.1),
                "{what}: printed outcome of line {line}"
            );
            if event_of(&want.0).is_some() {
                assert!(
                    line <= prefix,
                    "{what}: line {line} was reported but is not in the database"
                );
            }
        }
        min_prefix = min_prefix.min(prefix);
        max_prefix = max_prefix.max(prefix);

        // Re-run the whole file: replays are confirmed or stale; the end state is the reference.
        let rerun_out = work.path().join(format!("round{attempts}.rerun"));
        let status = apply_cmd(&db, Some(&file), &rerun_out, assert_in_rounds)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(1), "{what}: re-run exit code");
        let outs = json_lines(&std::fs::read_to_string(&rerun_out).unwrap());
        assert_eq!(outs.len(), LINES, "{what}: one outcome per line on re-run");
        for (i, o) in outs.iter().enumerate() {
            let got = o["outcome"].as_str().unwrap();
            let line = &lines[i];
            if i < prefix && matches!(line.kind, Kind::Fresh | Kind::Retry) {
                assert!(
                    got == "confirmed" || got == "stale",
                    "{what}: replayed line {} came out {got}: {o}",
                    i + 1
                );
                *replay_tally.entry(got.to_string()).or_default() += 1;
            } else if i >= prefix {
                let want = &full_outs[i];
                assert_eq!(
                    (got, o["version"].as_i64()),
                    (want.0.as_str(), want.1),
                    "{what}: re-run, line {} after the crash point",
                    i + 1
                );
            } else {
                assert_eq!(got, full_outs[i].0, "{what}: re-run, line {}", i + 1);
            }
        }
        assert_sound(&db, &format!("{what}, after the re-run"));
        assert_eq!(
            view(&db),
            reference_view,
            "{what}: the re-run did not converge to the uninterrupted run's state"
        );
        assert_eq!(
            set_versions(&db),
            reference_versions,
            "{what}: applied versions differ from the uninterrupted run's"
        );
        eprintln!(
            "crash: round {kills} ({}): killed at {} ms, {prefix} line(s) had committed; re-run converged",
            if piped { "stdin" } else { "file" },
            delay.as_millis()
        );
    }
    eprintln!(
        "crash: {kills} kill -9 rounds ({attempts} attempts) of a {LINES}-line apply; committed prefix {min_prefix}..{max_prefix} lines; replays {replay_tally:?}; violations found: 0"
    );
}

/// Re-running a file whose later line confirms a value with a newer causal_seq must not change
/// the outcome of the run: a replay is `confirmed` or `stale` and the state stays the same.
///
/// Line 2 confirms "a" with seq 20; line 3 ("b", seq 15) is causally older than that
/// confirmation. Replaying the file (as after a crash that lost only the outcome lines) must
/// converge to the same state.
#[test]
fn a_replayed_file_with_a_newer_confirmation_converges() {
    let db = Db::new();
    db.init();
    let lines = [
        r#"{"subject":"u","predicate":"pm","value":"a","scope":"global","source":"L1","causal_seq":10}"#,
        r#"{"subject":"u","predicate":"pm","value":"a","scope":"global","source":"L2","causal_seq":20}"#,
        r#"{"subject":"u","predicate":"pm","value":"b","scope":"global","source":"L3","causal_seq":15}"#,
    ];
    let input = lines.join("\n") + "\n";
    let first = db.run_stdin(&["apply", "-"], input.as_bytes()).ok();
    let first_lines = first.complete_json_lines();
    let first_outcomes = outcomes(&first_lines);
    let after_first = view(&db);
    let replay = db.run_stdin(&["apply", "-"], input.as_bytes()).ok();
    let replay_lines = replay.complete_json_lines();
    let replay_outcomes = outcomes(&replay_lines);
    db.assert_check_ok();
    assert!(
        replay_outcomes
            .iter()
            .all(|&o| o == "confirmed" || o == "stale"),
        "first run {first_outcomes:?}; the replay came out {replay_outcomes:?}: a replay must be confirmed or stale"
    );
    assert_eq!(
        view(&db),
        after_first,
        "replaying the same file changed the current view"
    );
}
