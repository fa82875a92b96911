//! Rendered frames of every pane and dialog on the demo data, at a fixed clock (TestBackend +
//! insta). Also: Chinese and emoji values, a very long value, a 20×5 terminal, every size down
//! to 1×1 without a panic.
//!
//! Each scene is a row of `SCENES`: a fixture, a terminal, then steps — keys, a selection, and
//! the frames to compare (`Snap`). Every scene runs on SQLite, whose frames are the stored
//! snapshots, and then on the same data moved to PostgreSQL, whose frames must be the same.

use crate::dialogs::moved_chinese_versions;
use crate::support::tui::{
    ch, filter, for_each_backend, key, press, render, select, select_read, Backend, Db, Fixture,
};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use memscope::model::OnDisk;
use memscope::tui::Session;

const W: u16 = 120;
const H: u16 = 32;

/// One thing a scene does to the session.
enum Step {
    /// Keys typed as characters (`press`).
    Press(&'static str),
    Key(KeyCode),
    Ctrl(char),
    /// The current view's selection moves to this label (`select`).
    Select(&'static str),
    /// The Reads cursor moves to the read from this repository.
    SelectRead(&'static str),
    /// Typed into the filter line and kept.
    Filter(&'static str),
    ReadOnly,
    Popup(&'static str, &'static str),
    DbPath(&'static str),
    /// The frame at this size must equal the stored snapshot of this name.
    Snap(&'static str, u16, u16),
}

use Step::*;

/// A scene: its name, its fixture (with what is written before the session opens), the
/// terminal the session opens on, its steps, and whether it also runs on PostgreSQL.
struct Scene {
    name: &'static str,
    fixture: fn() -> Fixture,
    size: (u16, u16),
    steps: &'static [Step],
    on_postgres: bool,
}

const fn scene(
    name: &'static str,
    fixture: fn() -> Fixture,
    size: (u16, u16),
    steps: &'static [Step],
) -> Scene {
    Scene {
        name,
        fixture,
        size,
        steps,
        on_postgres: true,
    }
}

impl Scene {
    const fn sqlite_only(self) -> Scene {
        Scene {
            on_postgres: false,
            ..self
        }
    }
}

fn demo() -> Fixture {
    Fixture::demo()
}

fn empty() -> Fixture {
    Fixture::empty()
}

fn wide_values() -> Fixture {
    let f = Fixture::demo();
    f.write(r#"{"subject":"用户:小明","predicate":"回复语言","value":"简体中文，技术名词保留英文 🧠","scope":"global","source":"thread:9/message:1","raw":"回复请用简体中文"}"#);
    f.write(r#"{"subject":"user:9","predicate":"emoji","value":"👍🏽 ok 🎉 ☕ 燕麦拿铁","scope":"global","source":"thread:9/message:2"}"#);
    let long = "very long value ".repeat(200);
    f.write(&format!(
        r#"{{"subject":"user:9","predicate":"notes","value":"{long}","scope":"global","source":"thread:9/message:3","raw":"{long}"}}"#
    ));
    f
}

/// The target repo holds a causally newer value: the store would refuse a rescope there (stale).
fn newer_in_a_repo() -> Fixture {
    let f = Fixture::demo();
    f.write(r#"{"subject":"user:42","predicate":"package_manager","value":"bun","scope":"repo:newer","source":"thread:50/message:1"}"#);
    f
}

fn long_json_value() -> Fixture {
    let f = Fixture::demo();
    f.write(
        r#"{"subject":"user:42","predicate":"lint_config","value":{"extends":["eslint:recommended","plugin:@typescript-eslint/recommended"],"rules":{"semi":["error","always"],"quotes":["error","double",{"avoidEscape":true}],"no-console":"warn"},"ignorePatterns":["dist/","build/","coverage/","node_modules/"]},"scope":"global","source":"thread:61/message:7","raw":"这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。lint 规则照旧：分号必须有，字符串用双引号，console 只警告；dist、build、coverage 都不检查。"}"#,
    );
    f
}

#[rustfmt::skip]
const SCENES: &[Scene] = &[
    // prettier, then biome, then a stale replay of prettier.
    scene("current_view_with_history", demo, (W, H), &[
        Select("user:42 · formatter @ global"), Snap("current_view_with_history", W, H)]),
    // Node 18 in legacy-dashboard shadows the global 22 LTS there.
    scene("history_of_a_shadowed_record_in_a_repo", demo, (W, H), &[
        Select("team:web · node_version @ repo:legacy-dashboard"),
        Snap("history_of_a_shadowed_record_in_a_repo", W, H)]),
    scene("narrow_list_then_history_pane", demo, (80, 24), &[
        Press("jjj"), Snap("narrow_list", 80, 24), Key(KeyCode::Enter), Snap("narrow_history", 80, 24)]),
    // k: the global header.
    scene("folded_group", demo, (W, H), &[
        Press("k"), Key(KeyCode::Enter), Snap("folded_group", W, H)]),
    scene("filter_highlights_matches", demo, (W, H), &[
        Press("/npm"), Snap("filter_highlights_matches", W, H)]),
    scene("filter_without_matches", demo, (W, H), &[
        Filter("zzzq"), Snap("filter_without_matches", W, H)]),
    scene("pending_queue_with_choices", demo, (W, H), &[
        Press("2"), Snap("pending_queue_with_choices", W, H)]),
    scene("pending_queue_after_resolving", demo, (W, H), &[
        Press("2gy"), Snap("pending_queue_after_resolving", W, H)]),
    // Too small for the preview pane: the confirm states the effect itself.
    scene("pending_write_confirm_at_60x15", demo, (60, 15), &[
        Press("2g"), Snap("pending_write_confirm_at_60x15", 60, 15),
        Key(KeyCode::Esc), Press("r"), Snap("pending_write_confirm_repo_at_60x15", 60, 15)]),
    scene("tombstones", demo, (W, H), &[Press("3"), Snap("tombstones", W, H)]),
    scene("restore_confirm", demo, (W, H), &[Press("3u"), Snap("restore_confirm", W, H)]),
    scene("reject_confirm", demo, (W, H), &[Press("2x"), Snap("reject_confirm", W, H)]),
    // SQLite only: PostgreSQL's Check tab rightly differs (no file to call intact; its health
    // rows name the server, the test's own database and the server's durability setting).
    scene("check_report", demo, (W, H), &[Press("4"), Snap("check_report", W, H)]).sqlite_only(),
    scene("help_overlay", demo, (W, 48), &[Press("?"), Snap("help_overlay", W, 48)]),
    scene("delete_dialog_identity_then_predicate", demo, (W, H), &[
        Select("user:42 · package_manager @ global"), Press("d"), Snap("delete_identity", W, H),
        Press("j"), Snap("delete_predicate", W, H), Press("j"), Snap("delete_subject", W, H)]),
    // The task is prefilled from the record; a repo typed in shows what the task shadows.
    // Narrow: each scope's source and date wrap below it instead of being cut.
    scene("explain_dialog", demo, (W, H), &[
        Select("user:42 · package_manager @ task:fix-lockfile-123"), Press("elegacy-dashboard"),
        Snap("explain_dialog", W, H), Snap("explain_dialog_60x15", 60, 15)]),
    scene("error_popup_and_read_only", demo, (W, H), &[
        ReadOnly, Press("d"), Snap("read_only_toast", W, H),
        Popup("That did not work", "the database stayed locked by another process past the timeout: retry, or stop the process holding it"),
        Snap("error_popup", W, H)]),
    scene("empty_database", empty, (W, H), &[Snap("empty_database", W, H)]),
    // A very long value and raw text; then a filter in Chinese.
    scene("chinese_emoji_and_a_very_long_value", wide_values, (W, H), &[
        Select("user:9 · notes @ global"), Snap("wide_values", W, H),
        Press("/中文"), Snap("wide_filter", W, H)]),
    // A path as long as a real one: cut in the middle, its file name kept.
    scene("header_and_footer_at_100x30_and_60x15", demo, (100, 30), &[
        DbPath("/home/someone/.local/share/memscope/projects/web/demo.db"),
        Snap("layout_100x30", 100, 30), Snap("layout_60x15", 60, 15),
        Press("2"), Snap("layout_pending_100x30", 100, 30), Snap("layout_pending_60x15", 60, 15),
        Press("1"), ReadOnly, Snap("layout_read_only_60x15", 60, 15)]),
    scene("tiny_terminal_20x5", demo, (20, 5), &[
        Snap("tiny_current_view", 20, 5), Press("2"), Snap("tiny_pending", 20, 5),
        Press("1d"), Snap("tiny_delete_dialog", 20, 5)]),
    scene("reads_tab_as_of_explain_and_the_highlighted_timeline", demo, (W, H), &[
        Press("5"), SelectRead("storefront-next"), Snap("reads_tab", W, H),
        Key(KeyCode::Enter), Snap("reads_as_of_explain", W, H),
        Press("g"), Snap("reads_go_to_highlighted_timeline", W, H)]),
    scene("reads_tab_filtered_and_narrow", demo, (80, 24), &[
        Press("5/cursor"), Snap("reads_filter_typing", 80, 24),
        Key(KeyCode::Esc), Press("ss"), Snap("reads_since_7d_narrow", 80, 24)]),
    // Then a task-scoped record: the target is typed; it had no earlier value, so it is removed.
    scene("rescope_dialog_suggested_target_and_typed_target", demo, (W, H), &[
        Select("user:42 · package_manager @ global"), Press("m"), Snap("rescope_dialog", W, H),
        Key(KeyCode::Esc), Select("user:42 · package_manager @ task:fix-lockfile-123"),
        Press("mrepo:legacy-dashboard"), Snap("rescope_dialog_typed_target", W, H)]),
    scene("rescope_dialog_refused_target", newer_in_a_repo, (W, H), &[
        Select("user:42 · package_manager @ global"), Press("me"), Ctrl('u'), Press("repo:newer"),
        Snap("rescope_dialog_refused", W, H)]),
    scene("revert_dialog", demo, (W, H), &[
        Select("user:42 · package_manager @ global"), Press("v"), Snap("revert_dialog", W, H)]),
    // The event in full; longer than the screen it scrolls, and the title says where the view is.
    scene("event_popup_with_chinese_words_and_a_long_json_value", long_json_value, (100, 30), &[
        Select("user:42 · lint_config @ global"), Key(KeyCode::Tab), Key(KeyCode::Enter),
        Snap("event_popup_100x30", 100, 30), Snap("event_popup_60x15", 60, 15),
        Press("jjjjjjjjjjjj"), Snap("event_popup_60x15_scrolled", 60, 15)]),
    // At 60×15 the tab keeps its evidence readable (the list gives way).
    scene("suspects_tab_with_evidence_and_the_prefilled_rescope", demo, (W, H), &[
        Press("6"), Snap("suspects_tab", W, H), Press("m"), Snap("suspects_rescope", W, H),
        Key(KeyCode::Esc), Key(KeyCode::Tab), Snap("suspects_tab_60x15", 60, 15)]),
    // Found by review at odd sizes: no note of the cut lines at 25×6, `e …` at 40×9, the
    // footer covered at 200×10. The place the suspects scan points at, suggested.
    scene("rescope_dialog_at_odd_sizes", demo, (W, H), &[
        Select("user:42 · package_manager @ global"), Press("m"),
        Snap("rescope_20x5", 20, 5), Snap("rescope_25x6", 25, 6), Snap("rescope_40x9", 40, 9),
        Snap("rescope_60x12", 60, 12), Snap("rescope_200x10", 200, 10),
        Snap("rescope_200x60", 200, 60)]),
    // Chinese and emoji: a typed target, then typing one (the hint beside it gives way whole).
    scene("rescope_dialog_chinese_target_at_odd_sizes", moved_chinese_versions, (W, H), &[
        Select("用户:小明 · language @ global"), Press("m"), Snap("rescope_typing_40x9", 40, 9),
        Press("repo:很长的仓库名字🦀很长的仓库名字很长的仓库名字"), Key(KeyCode::Enter),
        Snap("rescope_chinese_25x6", 25, 6), Snap("rescope_chinese_40x9", 40, 9),
        Snap("rescope_chinese_80x24", 80, 24)]),
    // The version a rescope moved says where, its columns in line with the others'.
    scene("revert_dialog_after_a_rescope_at_odd_sizes", moved_chinese_versions, (W, H), &[
        Select("用户:小明 · language @ global"), Press("v"),
        Snap("revert_moved", W, H), Snap("revert_moved_80x24", 80, 24),
        Snap("revert_moved_60x12", 60, 12), Snap("revert_moved_40x9", 40, 9),
        Snap("revert_moved_25x6", 25, 6), Snap("revert_moved_20x5", 20, 5),
        Snap("revert_moved_200x10", 200, 10), Snap("revert_moved_200x60", 200, 60)]),
];

/// Plays a scene's steps. On SQLite each frame it names must equal its stored snapshot and is
/// kept in `frames`; on PostgreSQL each must equal SQLite's frame of the same name.
fn play(s: &mut Session, steps: &[Step], backend: Backend, frames: &mut Vec<String>) {
    let mut shown = 0;
    for step in steps {
        match step {
            Press(keys) => press(s, keys),
            Key(code) => {
                s.handle_key(key(*code));
            }
            Ctrl(c) => {
                s.handle_key(KeyEvent::new(KeyCode::Char(*c), KeyModifiers::CONTROL));
            }
            Select(label) => select(s, label),
            SelectRead(repo) => select_read(s, repo),
            Filter(words) => filter(s, words),
            ReadOnly => s.app.read_only = true,
            Popup(title, text) => s.app.popup(title, *text),
            DbPath(path) => s.app.db_path = (*path).into(),
            // The files keep the names they had when this module was its own test binary,
            // `tests/snapshots/tui_snapshots__<name>.snap`.
            Snap(name, w, h) => {
                let frame = render(s, *w, *h);
                match backend {
                    Backend::Sqlite => {
                        insta::with_settings!(
                            { snapshot_path => "../snapshots", prepend_module_to_snapshot => false },
                            { insta::assert_snapshot!(format!("tui_snapshots__{name}"), &frame) }
                        );
                        frames.push(frame);
                    }
                    Backend::Postgres => {
                        // What a delete does past the tables is each backend's own
                        // (`DeletePreview::on_disk`): its line differs, whole, nothing else.
                        let (files, vacuumed) = (OnDisk::Files.effect(), OnDisk::Vacuumed.effect());
                        // Padded to one width, so each stands in its row's place whole.
                        let width = files.chars().count().max(vacuumed.chars().count());
                        let pad = |t: &str| format!("{t:<width$}");
                        // Wrapped in a narrow dialog, the two lines may take a different
                        // number of rows: the count of rows below (`… 34 more`) may differ too.
                        let same = |frame: &str| -> Vec<String> {
                            frame
                                .lines()
                                .map(|l| uncounted(&l.replace(&pad(vacuumed), &pad(files))))
                                .collect()
                        };
                        assert!(
                            same(&frame) == same(&frames[shown])
                                && frame.contains(vacuumed) == frames[shown].contains(files),
                            "{name} on PostgreSQL:\n{frame}\non SQLite:\n{}",
                            frames[shown]
                        );
                    }
                }
                shown += 1;
            }
        }
    }
}

/// `line` with the number in a dialog's `… N more` row left out.
fn uncounted(line: &str) -> String {
    match line.split_once("… ") {
        Some((before, after)) => {
            let rest = after.trim_start_matches(|c: char| c.is_ascii_digit());
            match rest.starts_with(" more") && rest.len() < after.len() {
                true => format!("{before}… N{rest}"),
                false => line.to_string(),
            }
        }
        None => line.to_string(),
    }
}

/// Every scene, each on its own fixture, on both backends; a failure names the scene.
#[test]
fn every_scene_renders_as_its_snapshots() {
    std::thread::scope(|threads| {
        for scene in SCENES {
            threads.spawn(move || {
                let f = (scene.fixture)();
                let mut frames = Vec::new();
                let played = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut run = |db: &Db| {
                        let mut s = db.session(scene.size.0, scene.size.1);
                        play(&mut s, scene.steps, db.backend(), &mut frames);
                    };
                    if scene.on_postgres {
                        for_each_backend(&f, &mut run);
                    } else {
                        run(&Db::Sqlite(&f));
                    }
                }));
                if let Err(e) = played {
                    eprintln!("scene {} failed", scene.name);
                    std::panic::resume_unwind(e);
                }
            });
        }
    });
}

#[test]
fn every_size_down_to_1x1_draws_without_panic() {
    for_each_backend(&Fixture::demo(), |db| {
        draws_every_size(&mut db.session(W, H))
    });
}

fn draws_every_size(s: &mut Session) {
    let screens: &[&str] = &[
        "",
        "j",
        "?",
        "\u{1b}2",
        "3",
        "4",
        "1d",
        "\u{1b}e",
        "\u{1b}/np",
        "\u{1b}\u{1b}5",
        "\n",
        "g",
        "m",
        "\u{1b}v",
        "\u{1b}5/cur",
        // The history pane, an event in full.
        "\u{1b}\u{1b}1\t\n",
    ];
    for keys in screens {
        for c in keys.chars() {
            if c == '\u{1b}' {
                s.handle_key(key(KeyCode::Esc));
            } else if c == '\n' {
                s.handle_key(key(KeyCode::Enter));
            } else if c == '\t' {
                s.handle_key(key(KeyCode::Tab));
            } else {
                s.handle_key(ch(c));
            }
        }
        for w in (1..=40).chain([79, 80, 99, 100, 160]) {
            for h in (1..=12).chain([24, 50]) {
                render(s, w, h);
            }
        }
    }
}
