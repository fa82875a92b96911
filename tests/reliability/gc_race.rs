//! `gc` collecting tombstones while real clients act on the same identities (README, "delete,
//! restore, gc": gc collects tombstones older than `tombstone_safe_days` whose identity holds
//! nothing; on PostgreSQL each under its identity's lock, so a restore or a write that committed
//! while gc waited is seen), on a SQLite file and on PostgreSQL.
//!
//! Each round, six identities (three subjects in Chinese and emoji × `global` and `repo:甲`) are
//! written and deleted, and their tombstones — the first tombstones of the round — aged: some
//! past 2,000 days, the others past a day (but, some rounds, one left young). Then, all at once,
//! as separate processes: three `memscope gc`, two with `--tombstone-safe-days 1` and one with
//! 2,000, a `restore` of some identities, `write`s of new values to some (each value written
//! once, so where it is at the end says what happened to it) and a second `delete` of some.
//!
//! Asserted against what each process was told. An identity's first tombstone was collected
//! when no restore was told it lifted it and it no longer stands; then: the gcs'
//! `collected_tombstones` add up to the identities collected (no phantom collection, no
//! tombstone collected twice), the 2,000-day gc's to no more than the tombstones that old, and
//! each such identity logged exactly one `tombstone_collected` event in the round (a later
//! delete keeps it; none at all for a tombstone restored, or one left young, which is never
//! collected). A restore told success lifted the tombstone it named (the first
//! or the second delete's), logged its `restored` event, and no collection was logged after it;
//! a restore refused found the tombstone collected. A write told `inserted`/`superseded` came
//! after the tombstone was lifted (restored or collected — the event before its `set` event
//! says which), and its value is its version's `set` event, or, when the second delete came
//! after it, stored nowhere; a write told `rejected` names a tombstone that stood and stores its
//! value nowhere. A second delete is told `already_deleted` of the first tombstone or
//! `tombstoned` at a version logged as its `deleted` event. No `set`, `restored`, `deleted` or
//! `rejected` event is there that no client was told of, and none is missing but those a later
//! delete destroyed; no write was rejected by the first tombstone after gc logged its
//! collection, and the writes it refused before keep no source (gc blanks them). At the end of
//! each round every identity holds a tombstone or not, never a tombstone and a current record at
//! once; a standing tombstone is the last `deleted` event; the current record is the last value
//! a write was told it stored; the first values, deleted before the race, are stored nowhere;
//! `check` (with SQLite's quick check) is clean.
//!
//! Reproduce: `cargo test --release --test reliability -- gc_race:: --nocapture`
//! (`MEMSCOPE_TEST_POSTGRES=postgres://…` for the PostgreSQL side; `MEMSCOPE_GC_RACE_SEED`
//! replays the clients' choices; `MEMSCOPE_GC_RACE_ROUNDS`, 12 by default, lengthens the race).

use crate::support::reliability::{env_u64, seed_from_env, Rng};
use crate::support::{postgres_test_db, Run, TestDb};
use serde_json::{json, Value};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const SUBJECTS: [&str; 3] = ["用户:回收🧹", "用户:清扫🧽", "用户:归档📦"];
const SCOPES: [&str; 2] = ["global", "repo:甲"];
const PREDICATE: &str = "package_manager";
/// Rounds by default (`MEMSCOPE_GC_RACE_ROUNDS`).
const ROUNDS: u64 = 12;
/// The `gc` processes racing in each round, by their `--tombstone-safe-days`: two of a day,
/// and one of 2,000 days, which only the tombstones aged to [`ANCIENT`] are older than.
const GC_DAYS: [u32; 3] = [1, 1, 2000];
/// When an ancient tombstone was deleted: more than 2,000 days ago.
const ANCIENT: &str = "2020-01-01T00:00:00.000Z";
/// How old the other aged tombstones are: past a day, not 2,000 days.
const RECENT_DAYS: i64 = 10;

/// How old an identity's tombstone is made before the race.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Age {
    /// As the delete left it: younger than any period.
    Young,
    /// [`RECENT_DAYS`] old.
    Recent,
    /// Deleted at [`ANCIENT`].
    Ancient,
}

/// The identities of the race, as (subject, scope).
fn identities() -> Vec<(&'static str, &'static str)> {
    SUBJECTS
        .iter()
        .flat_map(|s| SCOPES.iter().map(move |c| (*s, *c)))
        .collect()
}

/// One client of a round.
#[derive(Debug, Clone)]
enum Job {
    Gc(u32),
    Restore(usize),
    Write(usize, String),
    Delete(usize),
}

impl Job {
    fn args(&self, round: usize) -> Vec<String> {
        let ids = identities();
        let about = |i: usize| {
            let (s, c) = ids[i];
            ["--subject", s, "--predicate", PREDICATE, "--scope", c].map(String::from)
        };
        let mut args: Vec<String> = match self {
            Job::Gc(days) => vec![
                "gc".into(),
                "--tombstone-safe-days".into(),
                days.to_string(),
            ],
            Job::Restore(i) => std::iter::once("restore".into()).chain(about(*i)).collect(),
            Job::Write(i, v) => std::iter::once("write".into())
                .chain(about(*i))
                .chain([
                    "--value".into(),
                    v.clone(),
                    "--raw".into(),
                    format!("以后默认用 {v}"),
                    "--source".into(),
                    format!("thread:gc-{round}/msg:{i}"),
                ])
                .collect(),
            Job::Delete(i) => std::iter::once("delete".into())
                .chain(about(*i))
                .chain(["--reason".into(), "user asked again".into()])
                .collect(),
        };
        args.push("--json".into());
        args
    }
}

/// What a client was told, and when it ran (from the start of the race).
struct Told {
    job: Job,
    run: Run,
    from: Duration,
    to: Duration,
}

impl Told {
    fn line(&self) -> String {
        let said = if self.run.code == 0 {
            self.run
                .stdout
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            self.run.stderr.trim().to_string()
        };
        format!(
            "{:>5}–{:>5} ms {:?}: exit {} {said}",
            self.from.as_millis(),
            self.to.as_millis(),
            self.job,
            self.run.code
        )
    }

    /// The answer of a client that must have succeeded.
    fn out(&self, ctx: &str) -> Value {
        assert_eq!(self.run.code, 0, "{:?} failed: {ctx}", self.job);
        serde_json::from_str(&self.run.stdout)
            .unwrap_or_else(|e| panic!("{:?} answered no JSON ({e}): {ctx}", self.job))
    }
}

/// One history event of an identity.
struct Event {
    id: i64,
    event: String,
    version: Option<i64>,
    value: Option<Value>,
    source: Option<String>,
    detail: Value,
}

/// One line: `#id event vN value source detail`.
impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{} {}", self.id, self.event)?;
        if let Some(v) = self.version {
            write!(f, " v{v}")?;
        }
        if let Some(v) = &self.value {
            write!(f, " value {v}")?;
        }
        if let Some(s) = &self.source {
            write!(f, " source {s:?}")?;
        }
        write!(f, " {}", self.detail)
    }
}

fn lit(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn where_identity(i: usize) -> String {
    let (s, c) = identities()[i];
    format!(
        "subject = {} AND predicate = {} AND scope = {}",
        lit(s),
        lit(PREDICATE),
        lit(c)
    )
}

fn int(v: &Option<String>) -> Option<i64> {
    v.as_deref()
        .map(|t| t.parse().unwrap_or_else(|e| panic!("{t:?}: {e}")))
}

/// The identity's events logged after `after`, in order.
fn events_after(db: &TestDb, i: usize, after: i64) -> Vec<Event> {
    db.sql_text_rows(&format!(
        "SELECT CAST(id AS TEXT), event, CAST(version AS TEXT), value, source, detail FROM history
         WHERE {} AND id > {after} ORDER BY id",
        where_identity(i)
    ))
    .into_iter()
    .map(|r| Event {
        id: int(&r[0]).unwrap(),
        event: r[1].clone().unwrap(),
        version: int(&r[2]),
        value: r[3].as_deref().map(|v| serde_json::from_str(v).unwrap()),
        source: r[4].clone(),
        detail: r[5]
            .as_deref()
            .map_or(Value::Null, |d| serde_json::from_str(d).unwrap()),
    })
    .collect()
}

/// The identity's tombstone version, if one stands.
fn tombstone(db: &TestDb, i: usize) -> Option<i64> {
    let rows = db.sql_text_rows(&format!(
        "SELECT CAST(version AS TEXT) FROM tombstones WHERE {}",
        where_identity(i)
    ));
    assert!(rows.len() <= 1, "two tombstones of one identity: {rows:?}");
    rows.first().and_then(|r| int(&r[0]))
}

/// The identity's current record (value, version), if one stands.
fn record(db: &TestDb, i: usize) -> Option<(Value, i64)> {
    let rows = db.sql_text_rows(&format!(
        "SELECT value, CAST(version AS TEXT) FROM memories WHERE {}",
        where_identity(i)
    ));
    assert!(rows.len() <= 1, "two records of one identity: {rows:?}");
    rows.first().map(|r| {
        (
            serde_json::from_str(r[0].as_deref().unwrap()).unwrap(),
            int(&r[1]).unwrap(),
        )
    })
}

/// The identity's last `deleted`, `restored` or `tombstone_collected` event (its whole history).
fn last_lifecycle(db: &TestDb, i: usize) -> Option<(String, Option<i64>)> {
    db.sql_text_rows(&format!(
        "SELECT event, CAST(version AS TEXT) FROM history WHERE {}
           AND event IN ('deleted', 'restored', 'tombstone_collected') ORDER BY id DESC LIMIT 1",
        where_identity(i)
    ))
    .first()
    .map(|r| (r[0].clone().unwrap(), int(&r[1])))
}

/// How many rows of memscope's tables hold `text` as (part of) a value, words or source.
fn held(db: &TestDb, text: &str) -> i64 {
    let like = lit(&format!("%{text}%"));
    db.sql_i64(&format!(
        "SELECT (SELECT count(*) FROM history WHERE value LIKE {like} OR raw LIKE {like} OR source LIKE {like})
              + (SELECT count(*) FROM memories WHERE value LIKE {like} OR raw LIKE {like} OR source LIKE {like})
              + (SELECT count(*) FROM pending WHERE value LIKE {like} OR raw LIKE {like})"
    ))
}

/// Asserts `text` is stored nowhere: in no row; and, on PostgreSQL or where the SQLite delete
/// that destroyed it said the disk was purged, in no row of any table and no byte of the files.
#[track_caller]
fn assert_gone(db: &TestDb, text: &str, what: &str, disk_purged: bool, ctx: &str) {
    assert_eq!(held(db, text), 0, "{what} {text:?} is still stored: {ctx}");
    if db.is_postgres() || disk_purged {
        db.assert_not_stored(text, what);
    }
}

/// Totals over the rounds, for the report and the coverage asserted at the end.
#[derive(Default, Debug)]
struct Totals {
    collected: i64,
    /// Rounds in which more than one gc collected some tombstone.
    gcs_sharing: usize,
    young: usize,
    restored: usize,
    restore_refused: usize,
    stored: usize,
    rejected: usize,
    destroyed: usize,
    deleted_again: usize,
    already_deleted: usize,
}

fn gc_race(db: TestDb) {
    let backend = if db.is_postgres() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let seed = seed_from_env("MEMSCOPE_GC_RACE_SEED");
    let rounds = env_u64("MEMSCOPE_GC_RACE_ROUNDS", ROUNDS).max(1) as usize;
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let mut totals = Totals::default();
    for round in 0..rounds {
        one_round(&db, round, &mut rng, &mut totals, backend, seed);
    }
    eprintln!(
        "gc_race ({backend}): {rounds} rounds in {:.1} s; {totals:?}",
        started.elapsed().as_secs_f64()
    );
    assert!(totals.collected > 0, "no gc collected anything: {totals:?}");
    assert!(
        totals.stored > 0,
        "no write landed on a lifted tombstone: {totals:?}"
    );
}

/// Writes a first value to every identity and deletes it (restoring a tombstone left by the
/// round before first), then ages each tombstone as `ages` says. Returns each identity's
/// tombstone version, the first values, and whether each delete said the disk was purged.
fn set_up(db: &TestDb, round: usize, ages: &[Age]) -> (Vec<i64>, Vec<String>, bool) {
    let ids = identities();
    for (i, (s, c)) in ids.iter().enumerate() {
        if tombstone(db, i).is_some() {
            db.run(&[
                "restore",
                "--subject",
                s,
                "--predicate",
                PREDICATE,
                "--scope",
                c,
            ])
            .ok();
        }
    }
    let first: Vec<String> = (0..ids.len())
        .map(|i| format!("旧值#{round}.{i}#🗑️"))
        .collect();
    let lines: String = ids
        .iter()
        .zip(&first)
        .map(|((s, c), v)| {
            json!({"subject": s, "predicate": PREDICATE, "scope": c, "value": v,
                   "source": format!("thread:setup-{round}"), "raw": format!("以前用 {v}")})
            .to_string()
                + "\n"
        })
        .collect();
    let applied = db.run_stdin(&["apply", "-"], lines.as_bytes()).ok();
    assert_eq!(applied.json_lines().len(), ids.len(), "{}", applied.stdout);
    for out in applied.json_lines() {
        assert!(
            ["inserted", "superseded"].contains(&out["outcome"].as_str().unwrap_or("")),
            "a first value was not stored: {out}"
        );
    }
    let mut v0 = vec![0; ids.len()];
    let mut purged = true;
    for s in SUBJECTS {
        let out = db.json(&["delete", "--subject", s, "--yes", "--json"]);
        purged &= out["disk_purged"] == true;
        for t in out["tombstoned"].as_array().unwrap() {
            let i = ids
                .iter()
                .position(|(s, c)| t["subject"] == *s && t["scope"] == *c)
                .unwrap_or_else(|| panic!("a tombstone of no identity of the race: {t}"));
            v0[i] = t["version"].as_i64().unwrap();
        }
    }
    assert!(v0.iter().all(|&v| v > 0), "every identity deleted: {v0:?}");
    let recent = (chrono::Utc::now() - chrono::Duration::days(RECENT_DAYS))
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    let aging: String = ages
        .iter()
        .enumerate()
        .filter_map(|(i, age)| {
            let at = match age {
                Age::Young => return None,
                Age::Recent => &recent,
                Age::Ancient => ANCIENT,
            };
            Some(format!(
                "UPDATE tombstones SET deleted_at = '{at}' WHERE {};\n",
                where_identity(i)
            ))
        })
        .collect();
    db.sql_execute(&aging).unwrap();
    (v0, first, purged)
}

fn one_round(
    db: &TestDb,
    round: usize,
    rng: &mut Rng,
    totals: &mut Totals,
    backend: &str,
    seed: u64,
) {
    let n = identities().len();
    let young = rng.chance(50).then(|| rng.below(n as u64) as usize);
    let ages: Vec<Age> = (0..n)
        .map(|i| match () {
            _ if young == Some(i) => Age::Young,
            _ if rng.chance(50) => Age::Ancient,
            _ => Age::Recent,
        })
        .collect();
    let (v0, first, first_purged) = set_up(db, round, &ages);
    let start_id = db.sql_i64("SELECT coalesce(max(id), 0) FROM history");

    // The clients, each after a pause of its own so the orders vary.
    let mut jobs: Vec<Job> = GC_DAYS.iter().map(|&d| Job::Gc(d)).collect();
    for i in 0..n {
        if rng.chance(45) {
            jobs.push(Job::Restore(i));
        }
        for k in 0..rng.below(3) {
            jobs.push(Job::Write(i, format!("新值#{round}.{i}.{k}#🧹")));
        }
        if rng.chance(35) {
            jobs.push(Job::Delete(i));
        }
    }
    let pauses: Vec<u64> = jobs.iter().map(|_| rng.below(30)).collect();
    let barrier = Barrier::new(jobs.len());
    let race_start = Instant::now();
    let told: Vec<Told> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .iter()
            .zip(&pauses)
            .map(|(job, &pause)| {
                let barrier = &barrier;
                s.spawn(move || {
                    let args = job.args(round);
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let mut command = db.command(&args);
                    barrier.wait();
                    std::thread::sleep(Duration::from_millis(pause));
                    let from = race_start.elapsed();
                    let run = Run::from_output(command.output().expect("spawn memscope"));
                    Told {
                        job: job.clone(),
                        run,
                        from,
                        to: race_start.elapsed(),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a client"))
            .collect()
    });

    let mut timeline: Vec<&Told> = told.iter().collect();
    timeline.sort_by_key(|t| t.to);
    let timeline: String = timeline
        .iter()
        .map(|t| format!("\n  {}", t.line()))
        .collect();
    let ctx = format!(
        "{backend}, round {round} (MEMSCOPE_GC_RACE_SEED={seed}), tombstones {v0:?} aged {ages:?}, clients by end:{timeline}"
    );

    // What the gcs were told.
    let mut told_collected = 0;
    let mut gcs_collecting = 0;
    let ancient = ages.iter().filter(|&&a| a == Age::Ancient).count() as i64;
    for t in told.iter() {
        let Job::Gc(days) = t.job else { continue };
        let out = t.out(&ctx);
        let n = out["collected_tombstones"].as_i64().unwrap();
        assert!(n >= 0, "{out}: {ctx}");
        assert!(
            days == 1 || n <= ancient,
            "a gc of {days} days collected {n} tombstones, and only {ancient} are that old: {ctx}"
        );
        told_collected += n;
        gcs_collecting += usize::from(n > 0);
    }
    totals.gcs_sharing += usize::from(gcs_collecting > 1);

    let mut collected_total = 0;
    for i in 0..n {
        let mine = |f: fn(&Job) -> Option<usize>| told.iter().filter(move |t| f(&t.job) == Some(i));
        let events = events_after(db, i, start_id);
        let tomb = tombstone(db, i);
        let rec = record(db, i);
        let ctx = format!(
            "{ctx}\nidentity {i} {:?}: first tombstone v{} ({:?}), now tombstone {tomb:?}, record {rec:?}, events since the race began:{}",
            identities()[i],
            v0[i],
            ages[i],
            events
                .iter()
                .map(|e| format!("\n  {e:?}"))
                .collect::<String>()
        );
        let v0 = v0[i];

        // The restore.
        let restore: Option<Result<i64, &Told>> = mine(|j| match j {
            Job::Restore(i) => Some(*i),
            _ => None,
        })
        .next()
        .map(|t| {
            if t.run.code == 0 {
                let out = t.out(&ctx);
                assert_eq!(
                    (out["subject"].as_str(), out["scope"].as_str()),
                    (Some(identities()[i].0), Some(identities()[i].1)),
                    "{ctx}"
                );
                Ok(out["version"].as_i64().unwrap())
            } else {
                Err(t)
            }
        });
        // The second delete: the version it tombstoned, or the one it found deleted already.
        let mut deleted_anew: Option<(i64, bool)> = None;
        if let Some(t) = mine(|j| match j {
            Job::Delete(i) => Some(*i),
            _ => None,
        })
        .next()
        {
            let out = t.out(&ctx);
            let (new, old) = (
                out["tombstoned"].as_array().unwrap(),
                out["already_deleted"].as_array().unwrap(),
            );
            assert_eq!(new.len() + old.len(), 1, "{out}: {ctx}");
            if let Some(t) = new.first() {
                let v = t["version"].as_i64().unwrap();
                assert!(v > v0, "a delete again tombstoned v{v} below v{v0}: {ctx}");
                deleted_anew = Some((v, out["disk_purged"] == true));
                totals.deleted_again += 1;
            } else {
                assert_eq!(
                    old[0]["version"].as_i64(),
                    Some(v0),
                    "told already deleted, at a version no delete gave it: {ctx}"
                );
                totals.already_deleted += 1;
            }
        }
        let vd = deleted_anew.map(|(v, _)| v);

        // Collected: the first tombstone is gone, and no restore was told it lifted it.
        let collected = restore.as_ref().is_none_or(|r| r.ok() != Some(v0)) && tomb != Some(v0);
        collected_total += i64::from(collected);
        if ages[i] == Age::Young {
            assert!(
                !collected,
                "gc collected a tombstone younger than a day: {ctx}"
            );
            totals.young += 1;
        }
        let collections: Vec<&Event> = events
            .iter()
            .filter(|e| e.event == "tombstone_collected")
            .collect();
        // A delete after the collection keeps it, as it keeps every `deleted` and `restored`
        // event: the times a deletion began and ended.
        assert_eq!(
            collections.len(),
            usize::from(collected),
            "tombstone_collected events of the identity, collected = {collected}: {ctx}"
        );

        match &restore {
            Some(Ok(v)) => {
                totals.restored += 1;
                assert!(
                    *v == v0 || Some(*v) == vd,
                    "the restore lifted tombstone v{v}, which no delete gave it: {ctx}"
                );
                let event = events
                    .iter()
                    .find(|e| e.event == "restored" && e.detail["tombstone_version"] == *v);
                match event {
                    Some(e) => assert!(
                        !collections.iter().any(|c| c.id > e.id),
                        "a tombstone_collected event after a restore told success: {ctx}"
                    ),
                    // A delete after it keeps the restored event.
                    None => panic!("the restore told success logged no restored event: {ctx}"),
                }
            }
            Some(Err(t)) => {
                totals.restore_refused += 1;
                assert!(
                    t.run.stderr.contains("is not deleted"),
                    "the restore failed unexpectedly: {ctx}"
                );
                assert!(
                    collected,
                    "a restore was told there is no tombstone, but none was collected: {ctx}"
                );
            }
            None => {}
        }
        // Every restored and deleted event is one a client was told of.
        for e in &events {
            match e.event.as_str() {
                "restored" => assert_eq!(
                    restore.as_ref().and_then(|r| r.ok()),
                    e.detail["tombstone_version"].as_i64(),
                    "a restored event no restore was told of: {e:?}: {ctx}"
                ),
                "deleted" => assert_eq!(
                    vd, e.version,
                    "a deleted event no delete was told of: {e:?}: {ctx}"
                ),
                _ => {}
            }
        }
        if let Some(vd) = vd {
            assert!(
                events
                    .iter()
                    .any(|e| e.event == "deleted" && e.version == Some(vd)),
                "the delete told it tombstoned v{vd} logged no deleted event of it: {ctx}"
            );
        }

        // The writes.
        let mut stored: Vec<(Value, i64)> = Vec::new();
        let mut rejected_by: Vec<i64> = Vec::new();
        for t in told.iter() {
            let Job::Write(j, v) = &t.job else { continue };
            if *j != i {
                continue;
            }
            let out = t.out(&ctx);
            let value = Value::String(v.clone());
            match out["outcome"].as_str().unwrap_or("") {
                "inserted" | "superseded" => {
                    totals.stored += 1;
                    let w = out["version"].as_i64().unwrap();
                    assert!(
                        restore.as_ref().is_some_and(|r| r.is_ok()) || collected,
                        "{v} was told {} at v{w}, but the tombstone was neither restored nor collected: {ctx}",
                        out["outcome"]
                    );
                    if vd.is_some_and(|vd| vd > w) {
                        totals.destroyed += 1;
                        let purged = deleted_anew.is_some_and(|(_, p)| p);
                        assert_gone(db, v, "a value a later delete destroyed", purged, &ctx);
                        continue;
                    }
                    let set = events
                        .iter()
                        .find(|e| e.event == "set" && e.version == Some(w))
                        .unwrap_or_else(|| panic!("{v} was told v{w}: no set event of it: {ctx}"));
                    assert_eq!(
                        set.value.as_ref(),
                        Some(&value),
                        "the set event of v{w}: {ctx}"
                    );
                    let before = events.iter().rev().find(|e| {
                        e.id < set.id
                            && ["deleted", "restored", "tombstone_collected"]
                                .contains(&e.event.as_str())
                    });
                    assert!(
                        before.is_some_and(|e| e.event != "deleted"),
                        "{v} was stored at v{w} while the tombstone stood (the event before it: {before:?}): {ctx}"
                    );
                    assert!(
                        held(db, v) > 0,
                        "{v} has a set event, and is not found: {ctx}"
                    );
                    stored.push((value, w));
                }
                "rejected" => {
                    totals.rejected += 1;
                    let reason = out["reason"].as_str().unwrap_or("");
                    let named = reason
                        .split("tombstone v")
                        .nth(1)
                        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                        .and_then(|n| n.parse::<i64>().ok());
                    assert!(
                        named == Some(v0) || (named.is_some() && named == vd),
                        "{v} was rejected for a tombstone that did not stand ({reason}): {ctx}"
                    );
                    assert_gone(db, v, "a value told rejected", true, &ctx);
                    rejected_by.extend(named);
                }
                other => panic!("{v} was told {other}: {out}: {ctx}"),
            }
        }
        // Every set event is a write a client was told stored.
        for e in events.iter().filter(|e| e.event == "set") {
            assert!(
                stored
                    .iter()
                    .any(|(v, w)| Some(v) == e.value.as_ref() && Some(*w) == e.version),
                "a set event no write was told of: {e:?}: {ctx}"
            );
        }

        // Every rejected event is a write a client was told was rejected, by the tombstone it
        // names; a delete after the first tombstone was lifted destroys the events of the writes
        // it refused. A write refused before gc collected the tombstone keeps no source.
        for e in events.iter().filter(|e| e.event == "rejected") {
            let by = e.detail["tombstone_version"].as_i64();
            assert!(
                by == Some(v0) || (by.is_some() && by == vd),
                "a rejected event naming a tombstone that did not stand: {e:?}: {ctx}"
            );
            if let Some(c) = collections.first() {
                assert!(
                    by != Some(v0) || e.id < c.id,
                    "a write was rejected by the first tombstone after gc collected it: {ctx}"
                );
                assert!(
                    e.id > c.id || e.source.is_none(),
                    "a write refused by a collected tombstone keeps its source: {e:?}: {ctx}"
                );
            }
        }
        for by in [Some(v0), vd].into_iter().flatten() {
            let told = rejected_by.iter().filter(|&&n| n == by).count();
            let logged = events
                .iter()
                .filter(|e| e.event == "rejected" && e.detail["tombstone_version"] == by)
                .count();
            if by == v0 && vd.is_some() {
                assert!(
                    logged <= told,
                    "{logged} rejected events of v{by}, {told} writes told: {ctx}"
                );
            } else {
                assert_eq!(
                    logged, told,
                    "rejected events of tombstone v{by}, against writes told rejected by it: {ctx}"
                );
            }
        }

        // The end of the round: a tombstone or not, never one over a record.
        assert!(
            tomb.is_none() || rec.is_none(),
            "a tombstone and a current record at once: {ctx}"
        );
        if let Some(t) = tomb {
            assert!(
                t == v0 || Some(t) == vd,
                "a tombstone v{t} no delete was told of: {ctx}"
            );
            assert!(
                restore.as_ref().is_none_or(|r| r.ok() != Some(t)),
                "the restore told it lifted v{t}, which stands: {ctx}"
            );
            assert_eq!(
                last_lifecycle(db, i),
                Some(("deleted".to_string(), Some(t))),
                "the standing tombstone is not the last thing logged of the identity: {ctx}"
            );
        } else if let Some(vd) = vd {
            assert_eq!(
                restore.as_ref().and_then(|r| r.ok()),
                Some(vd),
                "the tombstone a delete was told it made is gone, and no restore was told it lifted it: {ctx}"
            );
        }
        let last = stored.iter().max_by_key(|(_, w)| *w).cloned();
        assert_eq!(
            rec, last,
            "the current record is not the last value a write was told it stored: {ctx}"
        );
        assert_gone(
            db,
            &first[i],
            "a first value, deleted before the race",
            first_purged,
            &ctx,
        );
    }
    assert_eq!(
        told_collected, collected_total,
        "the gcs were told they collected {told_collected} tombstone(s); {collected_total} were: {ctx}"
    );
    let logged = db.sql_i64(&format!(
        "SELECT count(*) FROM history WHERE event = 'tombstone_collected' AND id > {start_id}"
    ));
    assert_eq!(
        logged, told_collected,
        "{logged} tombstone_collected events, {told_collected} told: {ctx}"
    );
    totals.collected += told_collected;
    db.assert_check_ok();
}

#[test]
fn gc_racing_clients_collects_only_what_no_one_lifted() {
    let db = TestDb::new();
    db.init();
    gc_race(db);
}

#[test]
fn gc_racing_clients_collects_only_what_no_one_lifted_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        gc_race(db);
    }
}
