//! memscope prints words that agents and models wrote — values, raw words, read-log notes, agent
//! names, delete reasons — on a person's terminal. A control character among them must never
//! reach the terminal raw (ESC sequences clear or retitle it): every command, in text and in
//! JSON, and every error shows them escaped, while CJK and emoji stay as they are.

use crate::support::mcp_session::RawSession;
use crate::support::*;
use serde_json::{json, Value};

/// Words that must stay readable, then a zero-width space (a value ending in one looks like
/// the value without it), a right-to-left override (what follows shows reversed), sequences that retitle the terminal and clear the screen (once with the C1
/// control CSI), a bell, a carriage return, NEL, DEL, a tab and a newline. The controls come
/// early: error messages shorten what they quote.
const HOSTILE: &str = "中文🧠\u{200B}\u{202E}\x1b]0;pwned\x07\u{9b}2J\x1b[2J\r\u{85}\x7f\t\nend";
const READABLE: &str = "中文🧠";

/// Neither stream holds a control character other than the newlines between lines, nor a
/// character that prints as nothing where it stands.
#[track_caller]
fn assert_no_raw_controls(what: &str, run: &Run) {
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let chars: Vec<char> = text.chars().collect();
        if let Some((at, &c)) = chars.iter().enumerate().find(|&(i, &c)| {
            (c.is_control() && c != '\n')
                || memscope::model::reorders_text(c)
                || memscope::spelling::prints_as_nothing(&chars, i)
        }) {
            panic!(
                "{what}: {stream} holds the raw control character {c:?} at character {at}:\n{text:?}"
            );
        }
    }
}

/// The hostile words are shown — escaped, not dropped — in `text`.
#[track_caller]
fn assert_shown_escaped(what: &str, text: &str) {
    assert!(
        text.contains(READABLE),
        "{what}: CJK and emoji shown as they are: {text:?}"
    );
    for (name, escapes) in [
        ("ESC", ["\\u{1b}", "\\u001b"]),
        ("CSI", ["\\u{9b}", "\\u009b"]),
        ("RLO", ["\\u{202e}", "\\u202e"]),
        ("ZWSP", ["\\u{200b}", "\\u200b"]),
    ] {
        assert!(
            escapes.iter().any(|e| text.contains(e)),
            "{what}: {name} shown as an escape: {text:?}"
        );
    }
}

/// A command that prints the hostile words: nothing raw, and the words visible.
#[track_caller]
fn shows(what: &str, run: Run) -> Run {
    assert_no_raw_controls(what, &run);
    assert_shown_escaped(what, &format!("{}{}", run.stdout, run.stderr));
    run
}

/// A `--json` command: valid JSON with nothing raw, holding the hostile words exactly.
#[track_caller]
fn shows_json(what: &str, run: Run) -> Value {
    assert_no_raw_controls(what, &run);
    let v = run.json();
    assert!(
        holds_hostile(&v),
        "{what}: the words survive JSON intact: {v:#}"
    );
    v
}

/// Some string (or object key) in `v` contains the hostile words, byte for byte.
fn holds_hostile(v: &Value) -> bool {
    match v {
        // Stored values and event details are JSON text inside an export row.
        Value::String(s) => {
            s.contains(HOSTILE) || serde_json::from_str(s).is_ok_and(|inner| holds_hostile(&inner))
        }
        Value::Array(items) => items.iter().any(holds_hostile),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.contains(HOSTILE) || holds_hostile(v)),
        _ => false,
    }
}

/// `COMMAND --subject user:42 --predicate PREDICATE REST…`
fn about<'a>(command: &'a str, predicate: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let head = [command, "--subject", "user:42", "--predicate", predicate];
    [&head[..], rest].concat()
}

/// What `memscope mcp` printed besides the protocol.
fn log_only(code: i32, stderr: String) -> Run {
    let stdout = String::new();
    Run {
        code,
        stdout,
        stderr,
    }
}

fn write(db: &TestDb, predicate: &str, value: &[&str], scope: &[&str], json: bool) -> Run {
    let mut args = about("write", predicate, value);
    args.extend_from_slice(scope);
    args.extend_from_slice(&["--source", "thread:1/message:2", "--raw", HOSTILE]);
    if json {
        args.push("--json");
    }
    db.run(&args).ok()
}

#[test]
fn stored_words_never_reach_the_terminal_raw() {
    hostile_words_shown_escaped(TestDb::new());
}

#[test]
fn stored_words_never_reach_the_terminal_raw_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        hostile_words_shown_escaped(db);
    }
}

fn hostile_words_shown_escaped(db: TestDb) {
    let h = HOSTILE;
    let global = ["--scope", "global"];
    let ambiguous = ["--ambiguous", "global,repo:web-app"];
    let object = json!({ h: h }).to_string();

    // Every field that keeps free text, through the CLI: values (a string; an object's key and
    // value), raw words, pending raw words, the read log's agent and note, a delete's reason.
    shows(
        "write",
        write(&db, "package_manager", &["--value", h], &global, false),
    );
    shows_json(
        "write --json",
        write(&db, "style", &["--value-json", &object], &global, true),
    );
    write(&db, "coffee", &["--value", h], &global, true);
    shows(
        "ambiguous write",
        write(&db, "editor", &["--value", h], &ambiguous, false),
    );
    write(&db, "editor", &["--value", "vim"], &ambiguous, true);
    write(&db, "editor", &["--value", "emacs"], &ambiguous, true);
    let resolve = about("resolve", "package_manager", &[]);
    // `--agent` is a plain name (refused with control characters, `bad_input`); the name an
    // MCP client gives itself below is an agent's hostile name in the read log.
    let logged = about(
        "resolve",
        "package_manager",
        &["--log", "--agent", "克劳德 🤖", "--note", h],
    );
    shows("resolve --log", db.run(&logged).ok());
    // The delete prints no stored words; its reason shows in the history below.
    let delete = about("delete", "coffee", &["--reason", h, "--yes"]);
    assert_no_raw_controls("delete", &db.run(&delete).ok());

    // Through MCP, with no --agent: the client's name (escaped) is the agent of its reads, and
    // an unsure remember queues its raw words for a human.
    let mut mcp = db.command(&["mcp", "--subject", "user:42", "--repo", "web-app"]);
    mcp.env_remove("MEMSCOPE_AGENT");
    let mut s = RawSession::start(mcp);
    s.initialize_as(h);
    let recall = s.request(
        2,
        "tools/call",
        json!({"name": "recall", "arguments": {"predicate": "package_manager"}}),
    );
    assert_eq!(recall["result"]["isError"], false, "{recall}");
    let remember = s.request(
        3,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": "formatter", "value": h, "scope": "unsure", "raw": h,
            "source": "thread:9/message:1"}}),
    );
    assert_eq!(
        remember["result"]["structuredContent"]["outcome"], "pending",
        "{remember}"
    );
    let (code, stderr) = s.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_no_raw_controls("mcp log", &log_only(code, stderr));

    // Every command that prints, in text and in JSON.
    let text = [
        ("list", vec!["list"]),
        ("history", about("history", "package_manager", &[])),
        ("history of an object", about("history", "style", &[])),
        ("history of a delete", about("history", "coffee", &[])),
        ("pending", vec!["pending"]),
        ("reads", vec!["reads"]),
        ("resolve", resolve.clone()),
        (
            "resolve --at",
            about("resolve", "package_manager", &["--at", "0s"]),
        ),
    ];
    for (what, args) in &text {
        shows(what, db.run(args).ok());
        let json = [&args[..], &["--json"]].concat();
        shows_json(&format!("{what} --json"), db.run(&json).ok());
    }
    let agents: Vec<Value> = as_array(db.json(&["reads", "--json"]))
        .into_iter()
        .map(|r| r["agent"].clone())
        .collect();
    assert_eq!(
        agents,
        [
            // The name a client gives itself is kept escaped (a NUL in it could not be stored
            // on PostgreSQL), cut to 100 characters.
            json!(memscope::model::shorten(
                &memscope::model::escape_controls(h),
                100
            )),
            json!("克劳德 🤖")
        ],
        "the MCP client's read, then the CLI's"
    );

    // Outputs that print what a repair or a resolution wrote.
    shows(
        "pending resolve",
        db.run(&["pending", "resolve", "1", "--scope", "global"])
            .ok(),
    );
    let resolved = db
        .run(&["pending", "resolve", "2", "--scope", "global", "--json"])
        .ok();
    shows_json("pending resolve --json", resolved);
    shows_json(
        "pending reject --json",
        db.run(&["pending", "reject", "3", "--json"]).ok(),
    );
    for args in [&["pending", "--all"][..], &["pending", "--all", "--json"]] {
        let r = db.run(args).ok();
        assert_no_raw_controls("pending --all", &r);
        assert_shown_escaped("pending --all", &r.stdout);
    }
    write(&db, "package_manager", &["--value", "pnpm"], &global, true);
    let revert = about("revert", "package_manager", &["--scope", "global"]);
    shows("revert", db.run(&revert).ok());
    shows_json(
        "revert --json",
        db.run(&[&revert[..], &["--json"]].concat()).ok(),
    );
    let rescope = about(
        "rescope",
        "style",
        &["--scope", "global", "--to", "repo:web-app"],
    );
    shows("rescope", db.run(&rescope).ok());
    let rescope = about(
        "rescope",
        "style",
        &["--scope", "repo:web-app", "--to", "task:t-1"],
    );
    shows_json(
        "rescope --json",
        db.run(&[&rescope[..], &["--json"]].concat()).ok(),
    );

    // apply: hostile values, and a line whose unknown field quotes hostile words in its error.
    let lines = [
        json!({"subject": "user:42", "predicate": "shell", "value": h, "scope": "global", "source": "s"}),
        json!({"subject": "user:42", "predicate": "shell", "value": 1, "scope": "global", "source": "s", h: 1}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    let applied = db.run_stdin(&["apply", "-"], lines.as_bytes());
    assert_no_raw_controls("apply", &applied);
    let outcomes = applied.json_lines();
    assert!(holds_hostile(&outcomes[0]), "{outcomes:?}");
    assert_eq!(outcomes[1]["outcome"], "error", "{outcomes:?}");
    assert_shown_escaped("apply's error line", &applied.stdout);

    // Commands whose output holds no stored words still print nothing raw.
    for args in [
        &["check"][..],
        &["check", "--json"],
        &["gc"],
        &["gc", "--json"],
        &["alias", "list"],
        &["alias", "list", "--json"],
        &["settings"],
        &["settings", "--json"],
    ] {
        assert_no_raw_controls(&args.join(" "), &db.run(args).ok());
    }
    let export = db.run(&["export"]).ok();
    assert_no_raw_controls("export", &export);
    let rows = export.json_lines();
    assert!(
        rows.iter().any(holds_hostile),
        "export keeps the words intact"
    );

    // Errors and echoes that quote what the caller typed.
    let repo_scope = format!("repo:{h}");
    let echoes: &[(&str, &[&str])] = &[
        ("settings set", &["settings", "set", "retention_days", h]),
        ("reads --since", &["reads", "--since", h]),
        ("list --scope", &["list", "--scope", &repo_scope]),
    ];
    for (what, args) in echoes {
        shows(what, db.run(args));
    }
    // Fields that refuse control characters say so without quoting them raw.
    let plain = ["--predicate", "p", "--value", "v", "--scope", "global"];
    for args in [
        vec!["alias", "add", h, "package_manager"],
        [&["write", "--subject", h, "--source", "s"][..], &plain].concat(),
        [&["write", "--subject", "u", "--source", h][..], &plain].concat(),
        about("delete", "x", &["--reason", h, "--yes"]),
        vec!["history", "--subject", h, "--predicate", "x"],
    ] {
        let refused = db.run(&args);
        assert_ne!(refused.code, 0, "{refused:?}");
        assert_no_raw_controls(&args.join(" "), &refused);
    }
    let bad_id = db.run(&["pending", "resolve", h, "--scope", "global"]);
    assert_eq!(bad_id.code, 2, "{bad_id:?}");
    assert_no_raw_controls("pending resolve of a hostile id", &bad_id);
    assert!(bad_id.stderr.contains(READABLE), "{bad_id:?}");
}

#[test]
fn paths_with_control_characters_are_shown_escaped() {
    let home = tempfile::tempdir().expect("tempdir");
    let named = |suffix: &str| {
        home.path()
            .join(format!("{HOSTILE}{suffix}"))
            .display()
            .to_string()
    };
    let (db, missing) = (named(".db"), named(".jsonl"));
    let memscope = |args: &[&str]| {
        let mut c = memscope_cmd(home.path());
        c.arg("--db").arg(&db).args(args);
        c
    };
    for (what, args) in [
        ("init", &["init"][..]),
        ("import of a missing file", &["import", &missing]),
        ("apply of a missing file", &["apply", &missing]),
        ("demo", &["demo", "--no-tui"]),
    ] {
        shows(
            what,
            Run::from_output(memscope(args).output().expect("spawn")),
        );
    }
    let mut s = RawSession::start(memscope(&["mcp", "--subject", "user:42"]));
    s.initialize();
    let (code, stderr) = s.finish();
    shows("mcp log", log_only(code, stderr));
}

#[test]
fn a_value_reads_as_one_json_text_in_every_line() {
    a_value_reads_as_one_json_text(TestDb::new());
}

#[test]
fn a_value_reads_as_one_json_text_in_every_line_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        a_value_reads_as_one_json_text(db);
    }
}

/// A stored value in a text line is JSON text with JSON's escapes for every character a terminal
/// acts on — `\u001b` and `\u202e` alike, never Rust's `\u{202e}` beside serde_json's `\u001b` —
/// so what a person copies from a line parses back to the value it shows.
fn a_value_reads_as_one_json_text(db: TestDb) {
    let value = "a\u{1b}[31mRED\u{202e}evil\u{200b}x";
    let shown = r#""a\u001b[31mRED\u202eevil\u200bx""#;
    assert_eq!(
        serde_json::from_str::<String>(shown).unwrap(),
        value,
        "the oracle is the value's JSON text"
    );
    let one_style = |what: &str, run: Run| {
        assert_no_raw_controls(what, &run);
        assert!(
            run.stdout.contains(shown),
            "{what}: the value as its JSON text {shown}: {:?}",
            run.stdout
        );
        assert!(
            !run.stdout.contains("\\u{"),
            "{what}: no Rust escape in a line of values: {:?}",
            run.stdout
        );
    };
    let indentation = ["--subject", "user:7", "--predicate", "indentation"];
    let write = |v: &str, scope: &[&str], raw: &str| {
        let args = [
            &indentation[..],
            &["--value", v, "--source", "thread:2", "--raw", raw],
            scope,
        ]
        .concat();
        db.run(&[&["write"][..], &args].concat()).ok()
    };
    let global = ["--scope", "global"];
    one_style("write", write(value, &global, "Use tabs in this repo"));
    db.write("user:7", "editor", "vim", "repo:api-server", "thread:3");
    one_style("list", db.run(&["list"]).ok());
    one_style(
        "history",
        db.run(&[&["history"][..], &indentation].concat()).ok(),
    );
    one_style(
        "resolve",
        db.run(&[&["resolve"][..], &indentation].concat()).ok(),
    );
    one_style("suspects", db.run(&["suspects"]).ok());
    one_style("superseded (was …)", write("spaces", &global, "spaces"));
    one_style(
        "revert",
        db.run(&[&["revert"][..], &indentation, &global].concat())
            .ok(),
    );
    one_style(
        "ambiguous write",
        write(value, &["--ambiguous", "task:t-1,repo:api-server"], "tabs"),
    );
    one_style("pending", db.run(&["pending"]).ok());
    one_style(
        "pending resolve",
        db.run(&["pending", "resolve", "1", "--scope", "task:t-1"])
            .ok(),
    );
}
