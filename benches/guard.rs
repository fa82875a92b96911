//! Scope guard benchmark (issue 16): `cargo bench --bench guard`.
//!
//! Prints, measured in one run on this machine:
//! - write throughput with `scope_guard` = `queue` (the default) against `off`, back to back in
//!   each round: `apply` of a JSONL batch, and single writes (`Store::write`, one transaction
//!   each, as the MCP server and the CLI write), each without and with a write context
//!   (target ratio on/off ≥ 0.9);
//! - `memscope suspects` (`Store::suspects`) on a 1M-record database in which about one global
//!   record in a thousand is a suspect (target ≤ 2 s).
//!
//! The writes mix what the guard judges: global writes whose words carry a place cue (Chinese
//! and English), name a known repository, state a default, say nothing of a place, or bring no
//! words at all, and repo- and task-scoped writes — some from the same message as a global
//! one (its siblings); see [`request`] for the share of each. With a context and the guard
//! on, some writes are queued: the outcomes of both sides are printed.
//!
//! MEMSCOPE_BENCH_RECORDS=N changes the big database's size (default 1,000,000; generated once
//! through `memscope apply` in a child process and cached under target/);
//! MEMSCOPE_BENCH_QUICK=1 skips it.

#[path = "support/mod.rs"]
mod support;

use memscope::model::{OutcomeKind, ScopeChoice, WriteContext, WriteRequest};
use memscope::store::InputKind;
use memscope::{OpenMode, Scope, Store};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;
use support::{fresh_dir, fresh_store, median, remove_db, Paired};

/// Rates with the guard on (`ours`) and off (`baseline`), measured back to back in each round
/// (which side goes first alternates), and the outcomes of the last round of each side.
#[derive(Default)]
struct GuardRounds {
    rates: Paired,
    outcomes_on: BTreeMap<String, u64>,
    outcomes_off: BTreeMap<String, u64>,
}

impl GuardRounds {
    /// `rounds` rounds of `once(guard)` with the guard on (`queue`) and `off`.
    fn measure(
        rounds: usize,
        mut once: impl FnMut(&str) -> (f64, BTreeMap<String, u64>),
    ) -> GuardRounds {
        let mut p = GuardRounds::default();
        for round in 0..rounds {
            let (on, off) = if round % 2 == 0 {
                let on = once("queue");
                (on, once("off"))
            } else {
                let off = once("off");
                (once("queue"), off)
            };
            p.rates.push(on.0, off.0);
            (p.outcomes_on, p.outcomes_off) = (on.1, off.1);
        }
        p
    }

    fn report(&self, what: &str, unit: &str) -> String {
        let (on, off) = self.rates.medians();
        let (ratio, spread) = self.rates.ratio();
        let counts = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{what}: guard on (queue) {on:.0} {unit}/s, off {off:.0} {unit}/s, ratio on/off {ratio:.2} (target ≥ 0.9) — {spread}\n    outcomes on: {}\n    outcomes off: {}",
            counts(&self.outcomes_on),
            counts(&self.outcomes_off),
        )
    }
}

/// Repositories and tasks the writes are made in and scoped to.
const REPOS: usize = 50;
const TASKS: usize = 200;

/// What the global writes of a stream say of a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mix {
    /// No place signal anywhere: every global write is judged and none is queued — what the
    /// guard costs a write it lets through.
    Clean,
    /// One group in ten has words with a place signal, one in twenty a message that also
    /// wrote its scoped records.
    Usual,
    /// Every group's words have a place signal.
    Heavy,
}

impl Mix {
    fn describe(self) -> &'static str {
        match self {
            Mix::Clean => "clean mix (no place signal: every global write judged, none queued)",
            Mix::Usual => "usual mix (~1 global write in 10 with a place signal)",
            Mix::Heavy => "heavy mix (~1 global write in 2 with a place signal)",
        }
    }
}

/// Write `i` of a bench stream. Writes come in groups of ten from one message (one source, one
/// subject): first its scoped writes — which become the siblings of the global writes after
/// them — then seven global ones, whose words vary as the guard sees them. In the usual mix
/// one group in ten has words with a place signal (three of its global writes: a Chinese cue,
/// an English cue, a known repository's name; the other groups say the same without the
/// place), and one group in twenty comes from a message that also wrote its scoped records
/// (all seven global writes have siblings): about one global write in ten has a place
/// signal. In the `heavy` mix every group's words have one (about one in two); in the `clean`
/// mix none has, and no message wrote scoped records beside its global ones.
fn request(i: usize, with_context: bool, mix: Mix) -> WriteRequest {
    let group = i / 10;
    let repo = format!("repo-{}", group % REPOS);
    let task = format!("task-{}", group % TASKS);
    let cued = mix == Mix::Heavy || (mix == Mix::Usual && group.is_multiple_of(10));
    // Scoped writes from their own message, except one group in twenty, whose message also
    // wrote its global records (siblings).
    let shared = mix != Mix::Clean && group % 20 == 5;
    let (scope, raw, own_source): (Scope, Option<String>, bool) = match i % 10 {
        0 => (
            Scope::Repo(repo.clone()),
            Some(format!("这个仓库的测试用 vitest 跑 {i}")),
            !shared,
        ),
        1 => (
            Scope::Repo(repo.clone()),
            Some(format!("in this repo we deploy with make release {i}")),
            !shared,
        ),
        2 => (Scope::Task(task.clone()), None, !shared),
        k => (Scope::Global, global_words(k, i, cued), false),
    };
    let source = if own_source {
        format!("thread:{group}/message:{i}")
    } else {
        format!("thread:{group}/message:said")
    };
    WriteRequest {
        subject: format!("user:{}", group % 1000),
        predicate: format!("pref_{}_{}", i % 10, group / 1000),
        value: json!(format!("value {i} 值")),
        scope: ScopeChoice::Exact(scope),
        source,
        raw,
        causal_seq: None,
        context: with_context.then(|| WriteContext {
            repo: Some(repo),
            task: group.is_multiple_of(2).then_some(task),
        }),
    }
}

/// The words of global write `i` (the `k`th of its group of ten), `cued` when its group's
/// words carry a place signal.
fn global_words(k: usize, i: usize, cued: bool) -> Option<String> {
    let group = i / 10;
    Some(match k {
        3 if cued => "这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。".into(),
        3 => "保留现有的 package-lock.json，安装依赖继续用 npm ci。".into(),
        4 if cued => "keep npm ci in this repo".into(),
        4 => "keep npm ci over npm install".into(),
        5 => "以后新建前端项目，默认用 pnpm。".into(),
        6 if cued => format!(
            "run the tests of repo-{} with cargo nextest",
            (group + 1) % REPOS
        ),
        6 => "run the tests with cargo nextest".into(),
        7 => format!("prefer tabs over spaces, said on day {i}"),
        8 => format!("用户原话 {i}：回答用中文"),
        _ => return None,
    })
}

fn jsonl(n: usize, with_context: bool, mix: Mix) -> Vec<u8> {
    let mut buf = Vec::with_capacity(n * 250);
    for i in 0..n {
        serde_json::to_writer(&mut buf, &request(i, with_context, mix)).expect("json");
        buf.push(b'\n');
    }
    buf
}

/// One side of a round: `run` on a fresh database `{what}-{guard}.db` with the guard and
/// durability set, timed; its rate (of what `run` returns it did) and the outcomes it counted.
fn once(
    dir: &Path,
    what: &str,
    guard: &str,
    durability: &str,
    run: impl FnOnce(&mut Store, &mut dyn FnMut(OutcomeKind)) -> usize,
) -> (f64, BTreeMap<String, u64>) {
    let path = dir.join(format!("{what}-{guard}.db"));
    let mut store = fresh_store(&path, &[("scope_guard", guard), ("durability", durability)]);
    let mut outcomes = BTreeMap::new();
    let mut count = |kind: OutcomeKind| {
        *outcomes.entry(kind.as_str().to_string()).or_default() += 1;
    };
    let t = Instant::now();
    let done = run(&mut store, &mut count);
    let rate = done as f64 / t.elapsed().as_secs_f64();
    drop(store);
    remove_db(&path);
    (rate, outcomes)
}

/// `apply` of a JSONL batch into a fresh database, guard on and off: lines/s and the outcomes.
fn bench_apply(dir: &Path, n: usize, with_context: bool, mix: Mix, rounds: usize) -> GuardRounds {
    let input = jsonl(n, with_context, mix);
    GuardRounds::measure(rounds, |guard| {
        let owned = std::io::Cursor::new(input.clone());
        once(dir, "apply", guard, "full", |store, count| {
            let summary = store
                // In memory, never pausing: read as `memscope apply FILE` reads a file.
                .apply_from(owned, InputKind::File, |batch| {
                    batch.iter().for_each(|o| count(o.outcome));
                    Ok(())
                })
                .expect("apply");
            assert_eq!(summary.errors, 0, "bench lines are valid");
            summary.lines as usize
        })
    })
}

/// `n` single writes (one transaction each) into a fresh database, guard on and off.
fn bench_single(
    dir: &Path,
    n: usize,
    with_context: bool,
    mix: Mix,
    durability: &str,
    rounds: usize,
) -> GuardRounds {
    let reqs: Vec<WriteRequest> = (0..n).map(|i| request(i, with_context, mix)).collect();
    GuardRounds::measure(rounds, |guard| {
        once(dir, "single", guard, durability, |store, count| {
            for r in &reqs {
                count(store.write(r).expect("write").outcome);
            }
            reqs.len()
        })
    })
}

/// Line `i` of the big database: 60% global, 30% repo (500 repositories), 10% task (2,000
/// tasks). About one global record in a thousand is a suspect: one in 2,000 carries a place
/// cue in its words (Chinese, English, or a known repository's name), and in one group of ten
/// in 2,000 every record comes from one message, so its global records have scoped siblings.
fn big_line(i: usize) -> String {
    let group = i / 10;
    let scope = match i % 10 {
        0..=5 => "global".to_string(),
        6..=8 => format!("repo:repo-{}", i % 500),
        _ => format!("task:task-{}", i % 2000),
    };
    let raw = match (i % 2000, (i / 2000) % 3) {
        (3, 0) => "这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。".to_string(),
        (3, 1) => "keep npm ci in this repo".to_string(),
        (3, _) => format!("run the tests of repo-{} with cargo nextest", i % 500),
        (13, _) => "以后新建前端项目，默认用 pnpm。".to_string(),
        _ => format!("用户原话 {i}"),
    };
    let source = if group % 2000 == 7 {
        format!("thread:{group}/message:1")
    } else {
        format!("thread:{i}/message:1")
    };
    json!({
        "subject": format!("user:{}", i % 20_000),
        "predicate": format!("pref_{}", i / 20_000),
        "value": format!("value {i} 值"),
        "scope": scope,
        "source": source,
        "raw": raw,
    })
    .to_string()
}

fn main() {
    // `cargo bench` passes --bench; ignore arguments.
    let records = support::size_from_env("MEMSCOPE_BENCH_RECORDS", 1_000_000, 1_000_000);
    let dir = fresh_dir("memscope-guard-bench");

    for (mix, rounds) in [(Mix::Clean, 7), (Mix::Usual, 7), (Mix::Heavy, 5)] {
        for with_context in [false, true] {
            let how = if with_context {
                "with a context"
            } else {
                "without a context"
            };
            let p = bench_apply(&dir, 100_000, with_context, mix, rounds);
            println!(
                "{}",
                p.report(
                    &format!("apply 100k lines, {}, {how}", mix.describe()),
                    "lines"
                )
            );
        }
    }
    // Single writes as an MCP server makes them: the usual mix, and with a context the clean
    // one too (what the guard costs a write it lets through).
    let singles = [
        ("full", 1_000, false, Mix::Usual),
        ("full", 1_000, true, Mix::Usual),
        ("full", 1_000, true, Mix::Clean),
        ("normal", 4_000, false, Mix::Usual),
        ("normal", 4_000, true, Mix::Usual),
        ("normal", 4_000, true, Mix::Clean),
    ];
    for (durability, n, with_context, mix) in singles {
        let how = if with_context {
            "with a context"
        } else {
            "without a context"
        };
        let p = bench_single(&dir, n, with_context, mix, durability, 7);
        let default = if durability == "full" {
            " (the default)"
        } else {
            ""
        };
        let mix = if mix == Mix::Clean { ", clean mix" } else { "" };
        println!(
            "{}",
            p.report(
                &format!("single writes, durability {durability}{default}, {how}{mix}"),
                "writes"
            )
        );
    }
    let _ = std::fs::remove_dir_all(&dir);

    if std::env::var_os("MEMSCOPE_BENCH_QUICK").is_some() {
        return;
    }
    let (big, how) =
        support::cached_database("memscope-guard-bench", records, |i| big_line(i as usize));
    let store = Store::open(&big, OpenMode::Existing).expect("open");
    let globals: i64 = store
        .connection()
        .query_row(
            "SELECT count(*) FROM memories WHERE scope = 'global'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    let mut times = Vec::new();
    let mut found = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let suspects = store.suspects().expect("suspects");
        times.push(t.elapsed().as_secs_f64());
        found = suspects.len();
        std::hint::black_box(suspects);
    }
    println!(
        "suspects on {records} records ({globals} global; database {how}): {:.2} s (median of 3; runs {}) (target ≤ 2 s), {found} suspects found",
        median(times.clone()),
        times
            .iter()
            .map(|t| format!("{t:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}
