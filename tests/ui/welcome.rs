//! The welcome of an empty database (README, "The terminal UI"): at 80 and 100 columns, and
//! narrower, its sentences wrap and its commands are cut into lines a shell reads back — never
//! cut at the edge nor inside a word — and the demo it suggests goes to a database of its own, not the one this
//! UI has open (found by a tester: the advice was cut at 80–100 columns, and followed, it
//! replaced the open database with the demo).

use crate::support::inside_borders;
use crate::support::tui::{press, render, Fixture};

/// The welcome's lines, inside the pane's border, trimmed at the end (each line of a test
/// backend's frame is quoted, a note on wide characters after it).
fn welcome(screen: &str) -> Vec<String> {
    inside_borders(screen)
}

/// The shell command that starts at the line after `after`, its ` \` lines joined.
fn command_after(lines: &[String], after: &str) -> String {
    let at = lines
        .iter()
        .position(|l| l.contains(after))
        .unwrap_or_else(|| panic!("{after:?} in {lines:#?}"));
    let mut words = Vec::new();
    for l in &lines[at + 1..] {
        let (text, more) = match l.strip_suffix(" \\") {
            Some(text) => (text, true),
            None => (l.as_str(), false),
        };
        words.push(text.trim().to_string());
        if !more {
            break;
        }
    }
    words.join(" ")
}

#[test]
fn the_welcome_fits_at_80_and_100_columns_and_its_demo_goes_elsewhere() {
    let f = Fixture::empty();
    let mut s = f.session(100, 30);
    let folder = "/home/用户/agents 的记忆 🦀";
    s.app.name_database(format!("{folder}/memory.db"));
    for width in [100u16, 80] {
        let screen = render(&mut s, width, 30);
        let lines = welcome(&screen);
        let text = lines.join("\n");
        assert!(
            text.contains("This database holds no live memories yet."),
            "{screen}"
        );
        for l in &lines {
            let cut = l.replace("repo:…", "").replace("task:…", "");
            assert!(
                !cut.contains('…'),
                "at {width}, a line is cut: {l:?}\n{screen}"
            );
        }
        assert_eq!(
            command_after(&lines, "through the one write path"),
            format!(
                "memscope --db '{folder}/memory.db' write --subject user:42 --predicate package_manager --value pnpm --scope global --source thread:17/message:86"
            ),
            "at {width}\n{screen}"
        );
        assert_eq!(
            command_after(&lines, "from JSON Lines"),
            format!("memscope --db '{folder}/memory.db' apply writes.jsonl"),
            "at {width}\n{screen}"
        );
        assert_eq!(
            command_after(&lines, "in a database of its own"),
            format!("memscope --db '{folder}/demo.db' demo"),
            "at {width}: the demo goes beside this database, not into it\n{screen}"
        );
        assert!(text.contains("? shows every key"), "at {width}\n{screen}");
    }
    // A database named demo.db gets its demo beside it under another name.
    s.app.name_database("/srv/demo.db".into());
    let lines = welcome(&render(&mut s, 80, 30));
    assert_eq!(
        command_after(&lines, "in a database of its own"),
        "memscope --db /srv/memscope-demo.db demo"
    );
    // PostgreSQL: `memscope demo` builds its own SQLite file.
    s.app
        .name_database("postgres://memscope@db.example:5432/团队".into());
    let lines = welcome(&render(&mut s, 80, 30));
    assert_eq!(
        command_after(&lines, "in a database of its own"),
        "memscope demo"
    );
}

/// Narrower than 80 columns nothing is cut either (a word longer than a line is spelled in
/// pieces a `\` joins: `the_welcome_commands_paste_as_the_command_at_30_columns`), and no size
/// panics.
#[test]
fn the_welcome_is_never_cut_down_to_a_narrow_terminal() {
    let f = Fixture::empty();
    let mut s = f.session(60, 30);
    s.app
        .name_database("/home/用户/一个很长很长很长很长的文件夹名字/👩🏽‍💻/memory.db".into());
    for width in [60u16, 50, 40, 30, 20] {
        let screen = render(&mut s, width, 100);
        let lines = welcome(&screen);
        for l in &lines {
            let cut = l.replace("repo:…", "").replace("task:…", "");
            assert!(
                !cut.contains('…'),
                "at {width}, a line is cut: {l:?}\n{screen}"
            );
        }
        assert!(
            lines.iter().any(|l| l.contains("demo")),
            "at {width}\n{screen}"
        );
    }
    for (w, h) in [(1, 1), (2, 5), (7, 3), (12, 20)] {
        render(&mut s, w, h);
    }
}

/// An empty list's sentences wrap to the pane instead of being cut (found by review: `No global
/// record's words or message point at one pla…`, `A write that names candidate scopes
/// (--ambiguous glo…`).
#[test]
fn an_empty_lists_sentences_wrap_at_every_width() {
    let f = Fixture::empty();
    let squash = |s: &str| -> String {
        // The pane's inside, its borders and the quotes of each row dropped.
        (s.lines())
            .flat_map(|l| l.split('│').skip(1).step_by(2))
            .collect::<Vec<_>>()
            .join(" ")
            .split_whitespace()
            .collect()
    };
    let said = [
        (
            '2',
            "A write that names candidate scopes (--ambiguous global,repo:x; MCP's scope unsure) or that the scope guard queued lands here.",
        ),
        ('3', "Nothing has been deleted."),
        (
            '5',
            "Agents log what they were told with `memscope resolve --log --agent NAME`:",
        ),
        (
            '6',
            "No global record's words or message point at one place.",
        ),
    ];
    for (w, h) in [(120, 32), (60, 20), (40, 16), (30, 16)] {
        let mut s = f.session(w, h);
        for (tab, sentence) in said {
            press(&mut s, &tab.to_string());
            let screen = render(&mut s, w, h);
            assert!(
                squash(&screen).contains(&sentence.split_whitespace().collect::<String>()),
                "tab {tab} at {w}×{h}: {sentence}\n{screen}"
            );
        }
    }
}

/// The shell command that starts at the first `  memscope` after the line holding `after`, its
/// lines as drawn (each up to the pane's right border, the columns left of it kept), down to
/// the first line that does not end in `\`.
fn command_lines_after(lines: &[String], after: &str) -> String {
    let at = lines
        .iter()
        .position(|l| l.contains(after))
        .unwrap_or_else(|| panic!("{after:?} in {lines:#?}"));
    let start = (lines[at..].iter())
        .position(|l| l.starts_with("  memscope"))
        .unwrap_or_else(|| panic!("a command after {after:?} in {lines:#?}"));
    let mut out = Vec::new();
    for l in &lines[at + start..] {
        out.push(l.as_str());
        if !l.ends_with('\\') {
            break;
        }
    }
    out.join("\n")
}

/// The words bash reads from `command` pasted at its prompt (`\` at a line's end joins the
/// next line), NUL-separated by its `printf` so that any byte of a word shows.
fn words_bash_reads(command: &str) -> Vec<String> {
    let out = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c"])
        .arg(format!("printf '%s\\0' {command}"))
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "bash read {command:?}: {out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8 words");
    let mut words: Vec<String> = text.split('\0').map(str::to_string).collect();
    words.pop();
    words
}

/// Found by a tester at 30 columns: a path longer than a line was broken mid-word with no `\`,
/// and a quoted path with a space broke inside its quotes — pasted, the newline became part of
/// the file name. Now each command, as drawn at 30 columns (and narrower, and wider), is read
/// by bash as the very command: a long word is spelled in pieces a `\` joins, the quoting of a
/// hostile path (space, quote, `$`, `;`, Chinese) as it was.
#[test]
fn the_welcome_commands_paste_as_the_command_at_30_columns() {
    let f = Fixture::empty();
    let mut s = f.session(30, 80);
    let long = format!("/tmp/x/{}", "a".repeat(39));
    for folder in [long.as_str(), "/tmp/x/my db's $HOME;中", "/tmp/x"] {
        let db = format!("{folder}/x.db");
        s.app.name_database(db.clone());
        let write = [
            "memscope",
            "--db",
            &db,
            "write",
            "--subject",
            "user:42",
            "--predicate",
            "package_manager",
            "--value",
            "pnpm",
            "--scope",
            "global",
            "--source",
            "thread:17/message:86",
        ];
        let apply = ["memscope", "--db", &db, "apply", "writes.jsonl"];
        let mcp = [
            "memscope",
            "--db",
            &db,
            "mcp",
            "--subject",
            "user:42",
            "--repo",
            "auto",
        ];
        let demo_db = format!("{folder}/demo.db");
        let demo = ["memscope", "--db", &demo_db, "demo"];
        for width in [30u16, 24, 40, 80] {
            let screen = render(&mut s, width, 80);
            let lines = welcome(&screen);
            for (after, command) in [
                ("path:", &write[..]),
                ("JSON", &apply[..]),
                ("tools):", &mcp[..]),
                ("own:", &demo[..]),
            ] {
                let drawn = command_lines_after(&lines, after);
                assert_eq!(
                    words_bash_reads(&drawn),
                    command,
                    "at {width} columns, {db:?}: bash reads\n{drawn}\n{screen}"
                );
            }
        }
        for w in (1..=40).chain([60, 120, 300]) {
            for h in [1, 2, 5, 12, 40, 100] {
                render(&mut s, w, h);
            }
        }
    }
}
