//! Rescopes racing deletes (README, "delete, restore, gc": a delete blanks the copies a rescope
//! left where the value was first written), as real clients race them: two processes writing
//! one identity's global value, one rescoping that value into `repo:a` again and again, one
//! deleting `repo:a` and restoring it, all at once, on SQLite and on PostgreSQL (where the
//! delete blanks another scope's history without that identity's lock).
//!
//! Every value is written once, so where it is at the end says what happened to it. Asserted
//! against what each process was told: a value no rescope moved keeps its `set` event in
//! `global`; a value a rescope moved is in both places (its `set` event in `global` and in
//! `repo:a`) or in neither — never blanked in one and kept in the other; a value moved before a
//! delete of `repo:a` began is stored nowhere (and, on SQLite, where the delete said the disk
//! was purged, in no byte of the files); a value moved after the last delete that could have
//! seen it is in both places; each delete's tombstone version is a `deleted` event; a fifth
//! process reads the global value with a note each time: the note of a read served a value
//! moved then deleted is gone, that of a value never moved kept; `check` (with SQLite's quick
//! check) is clean.
//!
//! Reproduce: `cargo test --release --test reliability -- rescope_delete:: --nocapture`

use crate::support::{postgres_test_db, TestDb};
use serde_json::Value;
use std::time::Instant;

const WRITERS: usize = 2;
const WRITES: usize = 24;
const RESCOPES: usize = 24;
const DELETES: usize = 8;
const READS: usize = 40;
const SUBJECT: &str = "用户:七";
const PREDICATE: &str = "package_manager";

/// One command a client ran: when it started and ended (this process's clock), and what it was
/// told when it succeeded.
struct Told {
    start: Instant,
    end: Instant,
    out: Value,
}

fn value(w: usize, i: usize) -> String {
    format!("工具-{w}-{i}-🚀")
}

/// Runs `args` with `--json`; `Some` with the answer when it succeeded. A refusal must say one
/// of `refusals` (the races this test makes: a rescope onto the deleted `repo:a` or of a global
/// value a rescope just moved away, a delete with nothing in `repo:a` yet); anything else fails
/// the test.
fn run(db: &TestDb, args: &[&str], refusals: &[&str]) -> Option<Told> {
    let start = Instant::now();
    let mut all = args.to_vec();
    all.push("--json");
    let r = db.run(&all);
    let end = Instant::now();
    if r.code == 0 {
        let out = serde_json::from_str(&r.stdout)
            .unwrap_or_else(|e| panic!("{args:?} answered {:?}: {e}", r.stdout));
        return Some(Told { start, end, out });
    }
    assert!(
        refusals.iter().any(|w| r.stderr.contains(w)),
        "{args:?} failed unexpectedly (exit {}): {}",
        r.code,
        r.stderr
    );
    None
}

/// What a rescope may be refused for here.
const RESCOPE_RACES: [&str; 3] = [
    "restore it first",
    "has no current record to move",
    "is deleted (tombstone",
];

/// Whether a `set` event in `scope` holds `value` (as its value or in its words).
fn kept(db: &TestDb, scope: &str, value: &str) -> bool {
    let quoted = serde_json::to_string(value).unwrap();
    let sql = format!(
        "SELECT count(*) FROM history WHERE event = 'set' AND scope = '{scope}'
         AND (value = '{quoted}' OR raw LIKE '%{value}%')"
    );
    db.sql_i64(&sql) > 0
}

/// The identity's history, one event a line: what a failure shows.
fn events(db: &TestDb) -> String {
    let concat = if db.is_postgres() {
        "string_agg"
    } else {
        "group_concat"
    };
    let sql = format!(
        "SELECT {concat}(id || ' ' || event || ' ' || scope || ' v' || coalesce(version, 0) || ' ' || coalesce(value, '-') || ' ' || coalesce(detail, ''), '\n') FROM (SELECT * FROM history ORDER BY id) h"
    );
    format!("\n{}", db.sql_text(&sql).unwrap_or_default())
}

fn race(db: TestDb) {
    let target = ["--subject", SUBJECT, "--predicate", PREDICATE];
    let (writes, rescopes, deletes, reads) = std::thread::scope(|s| {
        let db = &db;
        // An agent reading the global value all along, a note with each read: a note on a read
        // served a value later moved and deleted goes with it; one on a value never moved stays.
        let reader = s.spawn(move || {
            let mut told = Vec::new();
            for i in 0..READS {
                let note = format!("读到的笔记-{i}-📝");
                let mut args = vec!["resolve"];
                args.extend(target);
                args.extend(["--log", "--agent", "读者", "--note", &note]);
                let t = run(db, &args, &[]).expect("a logged read is never refused");
                if let Some(v) = t.out["value"].as_str() {
                    told.push((note, v.to_string()));
                }
            }
            told
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    let mut told = Vec::new();
                    for i in 0..WRITES {
                        let v = value(w, i);
                        let raw = format!("以后默认用 {v}");
                        let mut args = vec!["write"];
                        args.extend(target);
                        let source = format!("thread:{w}/msg:{i}");
                        args.extend([
                            "--scope", "global", "--value", &v, "--raw", &raw, "--source", &source,
                        ]);
                        let t = run(db, &args, &[]).expect("a global write is never refused here");
                        told.push((v, t));
                    }
                    told
                })
            })
            .collect();
        let rescoper = s.spawn(move || {
            let mut told = Vec::new();
            for _ in 0..RESCOPES {
                let mut args = vec!["rescope"];
                args.extend(target);
                args.extend(["--scope", "global", "--to", "repo:a"]);
                told.extend(run(db, &args, &RESCOPE_RACES));
            }
            told
        });
        let deleter = s.spawn(move || {
            let mut told = Vec::new();
            for _ in 0..DELETES {
                std::thread::sleep(std::time::Duration::from_millis(40));
                let mut args = vec!["delete"];
                args.extend(target);
                args.extend(["--scope", "repo:a", "--yes"]);
                // Nothing to delete yet is no race: try again.
                let Some(t) = run(db, &args, &["no memory"]) else {
                    continue;
                };
                // Nothing live in `repo:a` tombstones nothing: no delete of a value.
                if t.out["tombstoned"].as_array().is_none_or(|t| t.is_empty()) {
                    continue;
                }
                told.push(t);
                let mut args = vec!["restore"];
                args.extend(target);
                args.extend(["--scope", "repo:a"]);
                run(db, &args, &[]).expect("the restore of what this process deleted");
            }
            told
        });
        let writes: Vec<(String, Told)> = writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        (
            writes,
            rescoper.join().unwrap(),
            deleter.join().unwrap(),
            reader.join().unwrap(),
        )
    });
    // And once more after every delete: a value moved then must stay in both places.
    let mut writes = writes;
    let mut rescopes = rescopes;
    for i in 0..2 {
        let v = value(WRITERS, i);
        let mut args = vec!["write"];
        args.extend(target);
        args.extend([
            "--scope",
            "global",
            "--value",
            &v,
            "--source",
            "thread:after",
        ]);
        writes.push((
            v.clone(),
            run(&db, &args, &[]).expect("a write after the race"),
        ));
        let mut args = vec!["rescope"];
        args.extend(target);
        args.extend(["--scope", "global", "--to", "repo:a"]);
        rescopes.push(run(&db, &args, &[]).expect("a rescope after the race"));
    }
    assert!(!rescopes.is_empty(), "some rescopes landed");
    assert!(!deletes.is_empty(), "some deletes landed");
    for d in &deletes {
        let v = d.out["tombstoned"][0]["version"].as_i64().unwrap();
        let n = db.sql_i64(&format!(
            "SELECT count(*) FROM history WHERE event = 'deleted' AND scope = 'repo:a' AND version = {v}"
        ));
        assert!(n >= 1, "the delete reported tombstone v{v}: {}", d.out);
    }
    // The value each rescope moved (its first outcome, in `repo:a`), and when it was told.
    let moved: Vec<(String, &Told)> = rescopes
        .iter()
        .map(|t| {
            let first = &t.out[0];
            assert_eq!(first["scope"], "repo:a", "{}", t.out);
            (first["value"].as_str().unwrap().to_string(), t)
        })
        .collect();
    let (mut gone, mut both) = (0, 0);
    let (mut destroyed, mut never_moved) = (Vec::new(), Vec::new());
    for (v, w) in &writes {
        let outcome = w.out["outcome"].as_str().unwrap();
        assert!(
            ["inserted", "superseded"].contains(&outcome),
            "{v} was told {outcome}"
        );
        let in_global = kept(&db, "global", v);
        let Some((_, r)) = moved.iter().find(|(m, _)| m == v) else {
            assert!(
                in_global,
                "{v}: told {outcome}, never moved, and its set event is gone"
            );
            never_moved.push(v.clone());
            continue;
        };
        let in_repo = kept(&db, "repo:a", v);
        assert_eq!(
            in_global,
            in_repo,
            "{v}: moved into repo:a, its copy in global kept = {in_global} but in repo:a = {in_repo}; told {}; history: {}",
            r.out,
            events(&db)
        );
        // A delete that began after the rescope was told destroyed every copy.
        if let Some(d) = deletes.iter().find(|d| d.start > r.end) {
            assert!(!in_global, "{v}: moved, then deleted, and still stored");
            gone += 1;
            destroyed.push(v.clone());
            if d.out["disk_purged"] == true && !db.is_postgres() {
                db.assert_not_stored(v, "a value moved into repo:a before a delete of it");
            }
        }
        // No delete ended after the rescope began: nothing could have destroyed it.
        if !deletes.iter().any(|d| d.end > r.start) {
            assert!(
                in_global && in_repo,
                "{v}: moved after the last delete, and gone"
            );
            both += 1;
        }
    }
    let (mut notes_gone, mut notes_kept) = (0, 0);
    for (note, v) in &reads {
        let stored = db.sql_i64(&format!("SELECT count(*) FROM reads WHERE note = '{note}'"));
        if destroyed.contains(v) {
            assert_eq!(
                stored,
                0,
                "the note {note:?} of a read served {v}, moved then deleted, is still stored{}",
                events(&db)
            );
            notes_gone += 1;
        } else if never_moved.contains(v) {
            assert_eq!(
                stored, 1,
                "the note {note:?} of a read served {v}, never moved, is lost"
            );
            notes_kept += 1;
        }
    }
    eprintln!(
        "rescope_delete: {} logged reads, {notes_gone} notes gone with their deleted value, {notes_kept} kept",
        reads.len()
    );
    eprintln!(
        "rescope_delete ({}): {} writes, {} rescopes, {} deletes; {gone} moved values destroyed by a later delete, {both} moved after the last",
        if db.is_postgres() { "PostgreSQL" } else { "SQLite" },
        writes.len(),
        rescopes.len(),
        deletes.len()
    );
    db.assert_check_ok();
}

#[test]
fn rescopes_racing_deletes_leave_no_copy_and_lose_nothing() {
    let db = TestDb::new();
    db.run(&["init"]).ok();
    race(db);
}

#[test]
fn rescopes_racing_deletes_leave_no_copy_and_lose_nothing_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        race(db);
    }
}
