//! The id limit (README, "The model in one minute"): a subject, a predicate and a scope's id are
//! at most 512 bytes of UTF-8 on both backends — PostgreSQL cannot index much longer ones, so
//! SQLite refuses them too, in the same sentence, and every database moves between the two.
//! Each write path is held to it on a SQLite file and again on PostgreSQL (`…_on_postgres`); a
//! database written before the limit, which only SQLite can hold, stays readable.

use crate::support::*;
use serde_json::{json, Value};

const LIMIT: usize = 512;

/// Each part a write names, as the CLI takes it: `(part, its name in the sentence)`.
const PARTS: [&str; 4] = ["subject", "predicate", "repo", "task"];

/// Ids exactly at the limit and one byte past it, in ASCII, Chinese (3 bytes a character) and
/// emoji (4): `(what, at the limit, past it)`.
fn edges() -> Vec<(&'static str, String, String)> {
    let edges = vec![
        ("ASCII", "a".repeat(LIMIT), "a".repeat(LIMIT + 1)),
        (
            "Chinese",
            format!("ab{}", "长".repeat(170)),
            "长".repeat(171),
        ),
        ("emoji", "😀".repeat(128), format!("a{}", "😀".repeat(128))),
    ];
    for (what, at, past) in &edges {
        assert_eq!((at.len(), past.len()), (LIMIT, LIMIT + 1), "{what}");
    }
    edges
}

/// `write` of `id` as `part`, the other parts short; returns the run.
fn write_naming(db: &TestDb, part: &str, id: &str) -> Run {
    let (subject, predicate, scope) = match part {
        "subject" => (id.to_string(), "p".to_string(), "global".to_string()),
        "predicate" => ("s".to_string(), id.to_string(), "global".to_string()),
        kind => ("s".to_string(), "p".to_string(), format!("{kind}:{id}")),
    };
    db.run(&args_for(
        "write",
        &subject,
        &predicate,
        &["--value", "v", "--scope", &scope, "--source", "s", "--json"],
    ))
}

/// What the sentence calls `part`.
fn said(part: &str) -> &str {
    match part {
        "repo" | "task" => "scope id",
        other => other,
    }
}

/// The sentence every front end says of an id of `bytes` bytes.
fn refusal(what: &str, bytes: &str) -> String {
    format!(
        "{what} is {bytes} bytes long; memscope keeps subjects, predicates and scope ids to at most 512 bytes of UTF-8 (about 170 Chinese characters): shorten it"
    )
}

#[test]
fn each_part_is_written_at_the_limit_and_refused_one_byte_past_it() {
    parts_at_the_limit_on(TestDb::new());
}

#[test]
fn each_part_is_written_at_the_limit_and_refused_one_byte_past_it_on_postgres() {
    on_postgres(parts_at_the_limit_on);
}

fn parts_at_the_limit_on(db: TestDb) {
    db.init();
    for (what, at, past) in edges() {
        for part in PARTS {
            let before = db.fingerprint();
            let r = write_naming(&db, part, &past);
            r.fails_with(2, &[&refusal(said(part), "513")]);
            assert_eq!(before, db.fingerprint(), "{what} {part}: nothing written");
            let out = write_naming(&db, part, &at).ok().json();
            assert_eq!(out["outcome"], "inserted", "{what} {part}: {out}");
        }
    }
    // What was written at the limit reads back whole, and `check` has nothing to say of it.
    let (_, chinese, _) = &edges()[1];
    let r = db.resolve(chinese, "p", &[]);
    assert_eq!(r["value"], "v", "{r}");
    let r = db.resolve("s", "p", &["--repo", chinese]);
    assert_eq!(r["scope"], format!("repo:{chinese}"), "{r}");
    let report = db.assert_check_ok();
    assert_eq!(report["metrics"]["ids_past_limit"], 0, "{report:#}");
}

#[test]
fn apply_refuses_the_lines_past_the_limit_and_lands_the_others() {
    apply_mixed_batch_on(TestDb::new());
}

#[test]
fn apply_refuses_the_lines_past_the_limit_and_lands_the_others_on_postgres() {
    on_postgres(apply_mixed_batch_on);
}

fn apply_mixed_batch_on(db: TestDb) {
    // The review's subject: 3,000 random letters after `u:`, which PostgreSQL took for an
    // index row of 3,024 bytes.
    let mut seed = 1u64;
    let letters: String = (0..3000)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = (seed >> 33) % 52;
            (if n < 26 {
                b'a' + n as u8
            } else {
                b'A' + (n - 26) as u8
            }) as char
        })
        .collect();
    let long_subject = format!("u:{letters}");
    let long_scope = format!("repo:{}", "长".repeat(100_000));
    let long_value = long_text(200_000, "值");
    let line = |subject: &str, predicate: &str, scope: Value| json!({"subject": subject, "predicate": predicate, "value": "v", "scope": scope, "source": "s"});
    let mut lines = vec![
        line("u:1", "a", json!("global")),
        line(&long_subject, "a", json!("global")),
        line("u:1", "b", json!(long_scope)),
        line("u:1", &"p".repeat(LIMIT + 1), json!("global")),
        line(
            "u:1",
            "c",
            json!({"ambiguous": ["global", format!("task:{}", "😀".repeat(129))]}),
        ),
        // A long value stays unlimited: only the identity is.
        json!({"subject": "u:1", "predicate": "e", "value": long_value, "scope": "global", "source": "s"}),
    ];
    let mut in_context = line("u:1", "d", json!("global"));
    in_context["context"] = json!({"repo": "x".repeat(600)});
    lines.push(in_context);
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let r = db.run_stdin(&["apply", "-"], input.as_bytes());
    assert_eq!(r.code, 1, "an error line makes apply exit 1: {r:?}");
    let outs = r.json_lines();
    assert_eq!(
        outcomes(&outs),
        ["inserted", "error", "error", "error", "error", "inserted", "error"],
        "{outs:?}"
    );
    for (i, want) in [
        (1, refusal("subject", "3,002")),
        (2, refusal("scope id", "300,000")),
        (3, refusal("predicate", "513")),
        (4, refusal("scope id", "516")),
        (6, refusal("repository id", "600")),
    ] {
        assert_eq!(outs[i]["error"], want, "line {}", i + 1);
        assert_eq!(outs[i]["subject"], Value::Null, "line {}", i + 1);
    }
    let listed = db.list(&[]);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(
        db.list(&["--predicate", "e"])[0]["value"],
        json!(long_value)
    );
    assert_eq!(db.pending(true), Vec::<Value>::new());
    db.assert_check_ok();
}

#[test]
fn a_rescope_a_pending_resolution_or_an_alias_past_the_limit_is_refused() {
    new_places_on(TestDb::new());
}

#[test]
fn a_rescope_a_pending_resolution_or_an_alias_past_the_limit_is_refused_on_postgres() {
    on_postgres(new_places_on);
}

fn new_places_on(db: TestDb) {
    db.write_the_first_article();
    let pending = db.write_ambiguous(
        "user:42",
        "formatter",
        "biome",
        "global,repo:web-app",
        "thread:9",
        "用 biome",
    );
    let id = pending["pending_id"].to_string();
    let before = db.fingerprint();
    let past = format!("repo:{}", "长".repeat(171));
    let r = db.run(&args_for(
        "rescope",
        "user:42",
        "package_manager",
        &["--scope", "global", "--to", &past],
    ));
    r.fails_with(2, &[&refusal("scope id", "513")]);
    let r = db.run(&["pending", "resolve", &id, "--scope", &past, "--force"]);
    r.fails_with(2, &[&refusal("scope id", "513")]);
    let r = db.run(&["alias", "add", &"a".repeat(LIMIT + 1), "package_manager"]);
    r.fails_with(2, &[&refusal("alias", "513")]);
    let r = db.run(&["alias", "add", "pm", &"长".repeat(171)]);
    r.fails_with(2, &[&refusal("canonical predicate", "513")]);
    assert_eq!(before, db.fingerprint(), "nothing changed");
    assert_eq!(db.pending(false).len(), 1);
    // At the limit each goes through.
    let at = format!("task:{}", "😀".repeat(128));
    let moved = db
        .run(&args_for(
            "rescope",
            "user:42",
            "package_manager",
            &["--scope", "global", "--to", &at, "--json"],
        ))
        .ok()
        .json();
    assert_eq!(moved[0]["outcome"], "inserted", "{moved}");
    let out = db
        .run(&[
            "pending", "resolve", &id, "--scope", &at, "--force", "--json",
        ])
        .ok()
        .json();
    assert_eq!(out["outcome"], "inserted", "{out}");
    db.assert_check_ok();
}

/// A SQLite file holding `user:` + 400 × 长 (1,202 bytes) as a subject, and an open pending
/// item whose candidate's id is 600 bytes, as a memscope before the limit wrote them: written
/// short, then lengthened past the write path (history needs the purge gate to be edited), the
/// subject's spelling registered as the write path would have.
fn database_from_before_the_limit() -> (TestDb, String) {
    let db = TestDb::new();
    db.write("u:long", "p", "v", "global", "s");
    db.write("u:42", "p", "v", "repo:web-app", "s");
    db.write_ambiguous("u:42", "q", "v", "global,repo:web-app", "s", "either");
    let long = format!("u:{}", "长".repeat(400));
    let candidates = json!(["global", format!("repo:{}", "x".repeat(600))]);
    db.sql_through_purge_gate(&format!(
        "UPDATE memories SET subject = '{long}' WHERE subject = 'u:long';
         UPDATE history SET subject = '{long}' WHERE subject = 'u:long';
         UPDATE spellings SET folded = '{long}', spelling = '{long}'
          WHERE kind = 'subject' AND spelling = 'u:long';
         UPDATE pending SET candidates = '{candidates}'"
    ))
    .expect("lengthen the subject and a candidate");
    (db, long)
}

#[test]
fn a_database_from_before_the_limit_stays_readable_and_check_counts_what_cannot_move() {
    // SQLite only: PostgreSQL never could hold such an id (its index refused it).
    let (db, long) = database_from_before_the_limit();
    let report = db.assert_check_ok();
    assert_eq!(report["metrics"]["ids_past_limit"], 2, "{report:#}");
    let text = db.run(&["check"]).ok().stdout;
    let said = lines_starting(&text, "LIMIT: ");
    assert_eq!(said.len(), 1, "{text}");
    assert!(
        said[0].contains("2 identities or aliases name a subject, predicate or scope id longer than the 512 bytes")
            && said[0].contains("cannot move to PostgreSQL"),
        "{text}"
    );
    // Read, listed, its history shown, exported; a write naming it is refused as any is.
    assert_eq!(db.resolve(&long, "p", &[])["value"], "v");
    assert_eq!(db.list(&["--subject", &long]).len(), 1);
    assert_eq!(events(&db.history(&long, "p", None)), ["set"]);
    let r = db.run(&args_for(
        "write",
        &long,
        "p",
        &["--value", "w", "--scope", "global", "--source", "s"],
    ));
    r.fails_with(2, &[&refusal("subject", "1,202")]);
    let dump = db.sibling("before.jsonl");
    db.run(&["export", "--out", dump.to_str().unwrap()]).ok();
    // Deleted and restored like any memory.
    db.delete(&long, "p", "global");
    assert_eq!(db.list(&["--subject", &long]).len(), 0);
    db.run(&args_for("restore", &long, "p", &["--scope", "global"]))
        .ok();
    let report = db.assert_check_ok();
    assert_eq!(report["metrics"]["ids_past_limit"], 2, "{report:#}");
    // Its pending item is not resolved into the long place (a rejection closes it).
    let id = db.pending(false)[0]["id"].to_string();
    let r = db.run(&[
        "pending",
        "resolve",
        &id,
        "--scope",
        &format!("repo:{}", "x".repeat(600)),
    ]);
    r.fails_with(2, &[&refusal("scope id", "600")]);

    // Its export imports into a SQLite file as it is (old exports stay importable) …
    let copy = TestDb::new();
    copy.run(&["import", dump.to_str().unwrap()]).ok();
    assert_eq!(copy.resolve(&long, "p", &[])["value"], "v");
    let report = copy.assert_check_ok();
    assert_eq!(report["metrics"]["ids_past_limit"], 2, "{report:#}");
    // … and PostgreSQL refuses it, naming the line, with nothing imported.
    on_postgres(|pg| {
        let lines = std::fs::read_to_string(&dump).unwrap();
        let first = lines
            .lines()
            .position(|l| l.contains("长长长"))
            .expect("the dump holds the subject")
            + 1;
        let r = pg.run(&["import", dump.to_str().unwrap()]);
        r.fails_with(
            1,
            &[
                &format!("line {first} of the import: "),
                &refusal("subject", "1,202").replace(": shorten it", ""),
                "PostgreSQL cannot index a longer one",
                "nothing was imported",
            ],
        );
        assert_eq!(pg.sql_i64("SELECT count(*) FROM memories"), 0);
        assert_eq!(pg.sql_i64("SELECT count(*) FROM history"), 0);
        pg.assert_check_ok();
    });
}

/// Renames identity (`short`, `p`, global) to subject `long` past memscope's write path, as a
/// memscope before the limit would have stored it: its record, history and spelling (history
/// through the purge gate, on SQLite the gate function, on PostgreSQL the owner's setting).
fn lengthen_subject(db: &TestDb, short: &str, long: &str) {
    let sql = format!(
        "UPDATE memories SET subject = '{long}' WHERE subject = '{short}';
         UPDATE history SET subject = '{long}' WHERE subject = '{short}';
         UPDATE spellings SET folded = '{long}', spelling = '{long}'
          WHERE kind = 'subject' AND spelling = '{short}';"
    );
    db.sql_through_purge_gate(&sql)
        .expect("lengthen the subject");
}

#[test]
fn a_logged_read_of_a_long_name_is_logged() {
    long_reads_on(TestDb::new());
}

/// Found by review: PostgreSQL indexed the read log by the subject and predicate whole, and
/// refused a logged read whose two ran past about 2,700 bytes (`index row size … exceeds btree
/// maximum`); from PostgreSQL schema 10 it indexes their digests.
#[test]
fn a_logged_read_of_a_long_name_is_logged_on_postgres() {
    on_postgres(long_reads_on);
}

/// A read names whatever it asks for: a mistyped name kilobytes long (no memory applies), and an
/// identity written before the limit, are each logged, listed by `reads` under their whole
/// name, and a delete of the long identity blanks its reads' notes.
fn long_reads_on(db: TestDb) {
    db.init();
    db.write("u:42", "editor", "helix", "global", "s");
    let subject = format!("u:{}", incompressible(4_000, 1));
    let predicate = incompressible(3_000, 2);
    let asked = [
        (subject.as_str(), "editor"),
        ("u:42", predicate.as_str()),
        (subject.as_str(), predicate.as_str()),
    ];
    for (s, p) in asked {
        let r = db
            .run(&args_for(
                "resolve",
                s,
                p,
                &["--log", "--agent", "tester", "--json"],
            ))
            .ok()
            .json();
        assert_eq!((&r["subject"], &r["predicate"]), (&json!(s), &json!(p)));
        assert_eq!(r["value"], Value::Null, "no memory applies");
    }
    let reads = |filter: &[&str]| -> Vec<(String, String)> {
        let mut args = vec!["reads", "--json"];
        args.extend_from_slice(filter);
        as_array(db.run(&args).ok().json())
            .iter()
            .map(|r| {
                assert_eq!(r["agent"], "tester", "{r}");
                let text = |k: &str| r[k].as_str().unwrap().to_string();
                (text("subject"), text("predicate"))
            })
            .collect()
    };
    let own = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(s, p)| (s.to_string(), p.to_string()))
            .collect()
    };
    // Newest first; each filter by the index, the names compared whole.
    assert_eq!(reads(&[]), own(&[asked[2], asked[1], asked[0]]));
    assert_eq!(reads(&["--subject", &subject]), own(&[asked[2], asked[0]]));
    assert_eq!(
        reads(&["--predicate", &predicate]),
        own(&[asked[2], asked[1]])
    );
    assert_eq!(
        reads(&["--subject", &subject, "--predicate", &predicate]),
        own(&[asked[2]])
    );
    assert_eq!(reads(&["--subject", "u:42"]), own(&[asked[1]]));
    assert_eq!(
        reads(&[
            "--subject",
            &subject,
            "--predicate",
            "editor",
            "--limit",
            "1"
        ]),
        own(&[asked[0]])
    );

    // An identity written before the limit, Chinese and emoji kilobytes long (PostgreSQL's
    // unique index holds it compressed): read, logged with a note, listed.
    db.write("u:long", "p", "v", "global", "s");
    let long = format!("u:{}", long_text(4_000, "旧"));
    lengthen_subject(&db, "u:long", &long);
    let r = db
        .run(&args_for(
            "resolve",
            &long,
            "p",
            &["--log", "--agent", "tester", "--note", "笔记 📝", "--json"],
        ))
        .ok()
        .json();
    assert_eq!((&r["subject"], &r["value"]), (&json!(long), &json!("v")));
    let logged = as_array(db.run(&["reads", "--subject", &long, "--json"]).ok().json());
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(
        (&logged[0]["predicate"], &logged[0]["note"]),
        (&json!("p"), &json!("笔记 📝"))
    );
    // Its delete blanks the note of its read, and of no other.
    db.delete(&long, "p", "global");
    let logged = as_array(db.run(&["reads", "--subject", &long, "--json"]).ok().json());
    assert_eq!(
        (logged.len(), &logged[0]["note"]),
        (1, &Value::Null),
        "{logged:?}"
    );
    assert_eq!(reads(&[]).len(), 4);
    // The long identity counts against the limit; the names the reads asked for do not.
    let report = db.assert_check_ok();
    assert_eq!(report["metrics"]["ids_past_limit"], 1, "{report:#}");
}

/// A logged read's name is no stored id: a SQLite file whose read log names a mistyped
/// subject and predicate kilobytes long has nothing past the limit, and its export imports into
/// PostgreSQL (schema 10 indexes the names by their digests), the reads listed as they were.
#[test]
fn a_read_log_naming_long_names_moves_to_postgres() {
    let db = TestDb::new();
    db.write("u:42", "editor", "helix", "global", "s");
    let subject = format!("u:{}", incompressible(5_000, 3));
    let predicate = incompressible(2_000, 4);
    for (s, p) in [(subject.as_str(), "editor"), ("u:42", predicate.as_str())] {
        db.run(&args_for("resolve", s, p, &["--log", "--agent", "tester"]))
            .ok();
    }
    let report = db.assert_check_ok();
    assert_eq!(report["metrics"]["ids_past_limit"], 0, "{report:#}");
    let logged = db.run(&["reads", "--json"]).ok().json();
    let dump = db.sibling("reads.jsonl");
    db.run(&["export", "--out", dump.to_str().unwrap()]).ok();
    on_postgres(|pg| {
        pg.run(&["import", dump.to_str().unwrap()]).ok();
        let moved = pg.run(&["reads", "--json"]).ok().json();
        let names = |v: &Value| -> Vec<(Value, Value)> {
            as_array(v.clone())
                .iter()
                .map(|r| (r["subject"].clone(), r["predicate"].clone()))
                .collect()
        };
        assert_eq!(names(&moved), names(&logged));
        let found = as_array(
            pg.run(&["reads", "--subject", &subject, "--json"])
                .ok()
                .json(),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        let report = pg.assert_check_ok();
        assert_eq!(report["metrics"]["ids_past_limit"], 0, "{report:#}");
    });
}
