//! How the CLI's text lines up for a person: `history` columns by display width (CJK and emoji
//! take two columns), `pending` with each item's age and no trailing spaces, and the welcome
//! screen's two-line example command pasting into a shell as it is shown.

use crate::support::{ambiguous_req, args_for, open_store, req, TestDb};
use chrono::{Duration, Utc};
use memscope::Clock;
use serde_json::json;
use unicode_width::UnicodeWidthStr;

/// Display columns before the first `needle` in `line`.
fn column_of(line: &str, needle: &str) -> usize {
    let at = line
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} in {line:?}"));
    line[..at].width()
}

#[track_caller]
fn assert_no_trailing_spaces(text: &str) {
    for line in text.lines() {
        assert!(!line.ends_with(' '), "trailing spaces: {line:?}\n{text}");
    }
}

#[test]
fn history_columns_line_up_for_cjk_and_emoji() {
    history_columns_line_up_for_cjk_and_emoji_on(TestDb::new());
}

fn history_columns_line_up_for_cjk_and_emoji_on(db: TestDb) {
    let mut store = open_store(&db.path);
    for (value, scope, source) in [
        ("pnpm", "global", "thread:1/message:1"),
        ("这个仓库保留现有的 npm", "global", "thread:2/message:2"),
        ("🚀 bun", "global", "thread:3/message:3"),
        ("yarn", "repo:老项目", "thread:4/message:4"),
        ("npm", "task:修复-1", "thread:5/message:5"),
    ] {
        store
            .write(&req(
                "user:42",
                "package_manager",
                json!(value),
                scope,
                source,
            ))
            .expect("the write lands");
    }
    drop(store);
    let out = db
        .run(&args_for("history", "user:42", "package_manager", &[]))
        .ok()
        .stdout;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    // Each column starts at the same screen column on every line, whatever the value and the
    // scope hold: the value (its opening quote), the causal_seq, the source.
    for needle in ["\"", "seq ", "thread:"] {
        let cols: Vec<usize> = lines.iter().map(|l| column_of(l, needle)).collect();
        assert!(
            cols.windows(2).all(|w| w[0] == w[1]),
            "{needle}: {cols:?}\n{out}"
        );
    }
    assert_no_trailing_spaces(&out);
}

#[test]
fn pending_shows_each_items_age_and_no_trailing_spaces() {
    pending_shows_each_items_age_and_no_trailing_spaces_on(TestDb::new());
}

fn pending_shows_each_items_age_and_no_trailing_spaces_on(db: TestDb) {
    let mut store = open_store(&db.path);
    let now = Utc::now();
    for (ago, subject, source) in [
        (Duration::days(3), "user:42", "thread:31/message:2"),
        (Duration::hours(2), "user:7", "thread:48/message:6"),
    ] {
        store.set_clock(Clock::Fixed(now - ago));
        store
            .write(&ambiguous_req(
                subject,
                "package_manager",
                json!("npm"),
                &["global", "repo:web-app"],
                source,
            ))
            .expect("the write is queued");
    }
    drop(store);
    let out = db.run(&["pending"]).ok().stdout;
    let first = out.lines().find(|l| l.starts_with("#1 ")).expect("#1");
    let second = out.lines().find(|l| l.starts_with("#2 ")).expect("#2");
    assert!(
        first.contains("thread:31/message:2  3d ago"),
        "{first}\n{out}"
    );
    assert!(second.ends_with("2h ago"), "{second}\n{out}");
    assert_no_trailing_spaces(&out);

    // A closed item keeps its age and says how it closed, still without trailing spaces.
    db.run(&["pending", "reject", "2"]).ok();
    let all = db.run(&["pending", "--all"]).ok().stdout;
    let second = all.lines().find(|l| l.starts_with("#2 ")).expect("#2");
    assert!(second.contains("2h ago  (rejected"), "{second}\n{all}");
    assert_no_trailing_spaces(&all);
}

/// The welcome's example, pasted into a shell as shown, writes into the database this UI
/// shows (it names it with `--db`; a path with a space is quoted), not the default one.
#[test]
fn the_welcome_screens_example_pastes_into_a_shell() {
    let f = crate::support::tui::Fixture::empty();
    let spaced = f.dir.path().join("my memory.db");
    std::fs::rename(&f.path, &spaced).unwrap();
    let mut s = crate::support::tui::open_session(
        Box::new(
            memscope::store::Store::open(&spaced, memscope::store::OpenMode::Existing).unwrap(),
        ),
        160,
        30,
    );
    s.app.name_database(spaced.display().to_string());
    let screen = crate::support::tui::render(&mut s, 160, 30);
    // The rendered rows, without the frame's quotes and the pane's border.
    let rows: Vec<String> = screen
        .lines()
        .map(|l| {
            let l = l.trim_start_matches('"');
            let l = l.rsplit_once('"').map_or(l, |(l, _)| l);
            l.trim_matches(|c| c == '│' || c == ' ').to_string()
        })
        .collect();
    let at = rows
        .iter()
        .position(|r| r.starts_with("memscope --db"))
        .unwrap_or_else(|| panic!("the example is on the welcome screen:\n{screen}"));
    let mut pasted = rows[at].clone();
    let mut next = at + 1;
    while pasted.ends_with('\\') {
        pasted.push('\n');
        pasted.push_str(&rows[next]);
        next += 1;
    }
    assert!(pasted.contains("--value pnpm"), "{pasted}");
    drop(s);
    // As a shell reads it: each backslash-newline joins the lines into one command.
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&pasted)
        .env(
            "PATH",
            format!(
                "{}:{}",
                env!("CARGO_BIN_EXE_memscope").rsplit_once('/').unwrap().0,
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", f.dir.path())
        .env_remove("MEMSCOPE_DB")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("inserted user:42 · package_manager @ global v1"),
        "{pasted}\n{out:?}"
    );
    let db = TestDb::at(spaced);
    assert_eq!(
        db.list(&[]).len(),
        1,
        "the write landed in the database the UI shows"
    );
}
