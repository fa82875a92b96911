//! Rendered frames of every pane and dialog on the demo data, at a fixed clock (TestBackend +
//! insta). Also: Chinese and emoji values, a very long value, a 20×5 terminal, every size down
//! to 1×1 without a panic.

use crate::support::tui::{ch, filter, key, press, render, select, select_read, Fixture};
use crossterm::event::KeyCode;

/// Every frame is named: the files keep the names they had when this module was its own test
/// binary, `tests/snapshots/tui_snapshots__<name>.snap`, unchanged by the move into `ui`.
macro_rules! assert_snapshot {
    ($name:literal, $frame:expr) => {
        insta::with_settings!(
            { snapshot_path => "../snapshots", prepend_module_to_snapshot => false },
            { insta::assert_snapshot!(concat!("tui_snapshots__", $name), $frame) }
        )
    };
}

const W: u16 = 120;
const H: u16 = 32;

#[test]
fn current_view_with_history() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    // prettier, then biome, then a stale replay of prettier.
    select(&mut s, "user:42 · formatter @ global");
    assert_snapshot!("current_view_with_history", render(&mut s, W, H));
}

#[test]
fn history_of_a_shadowed_record_in_a_repo() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    // Node 18 in legacy-dashboard shadows the global 22 LTS there.
    select(&mut s, "team:web · node_version @ repo:legacy-dashboard");
    assert_snapshot!(
        "history_of_a_shadowed_record_in_a_repo",
        render(&mut s, W, H)
    );
}

#[test]
fn narrow_list_then_history_pane() {
    let f = Fixture::demo();
    let mut s = f.session(80, 24);
    press(&mut s, "jjj");
    assert_snapshot!("narrow_list", render(&mut s, 80, 24));
    s.handle_key(key(KeyCode::Enter));
    assert_snapshot!("narrow_history", render(&mut s, 80, 24));
}

#[test]
fn folded_group() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "k"); // the global header
    s.handle_key(key(KeyCode::Enter));
    assert_snapshot!("folded_group", render(&mut s, W, H));
}

#[test]
fn filter_highlights_matches() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "/npm");
    assert_snapshot!("filter_highlights_matches", render(&mut s, W, H));
}

#[test]
fn filter_without_matches() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    filter(&mut s, "zzzq");
    assert_snapshot!("filter_without_matches", render(&mut s, W, H));
}

#[test]
fn pending_queue_with_choices() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "2");
    assert_snapshot!("pending_queue_with_choices", render(&mut s, W, H));
}

#[test]
fn pending_queue_after_resolving() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "2gy");
    assert_snapshot!("pending_queue_after_resolving", render(&mut s, W, H));
}

#[test]
fn pending_write_confirm_at_60x15() {
    let f = Fixture::demo();
    // Too small for the preview pane: the confirm states the effect itself.
    let mut s = f.session(60, 15);
    press(&mut s, "2g");
    assert_snapshot!("pending_write_confirm_at_60x15", render(&mut s, 60, 15));
    s.handle_key(key(KeyCode::Esc));
    press(&mut s, "r");
    assert_snapshot!(
        "pending_write_confirm_repo_at_60x15",
        render(&mut s, 60, 15)
    );
}

#[test]
fn tombstones() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "3");
    assert_snapshot!("tombstones", render(&mut s, W, H));
}

#[test]
fn restore_confirm() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "3u");
    assert_snapshot!("restore_confirm", render(&mut s, W, H));
}

#[test]
fn reject_confirm() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "2x");
    assert_snapshot!("reject_confirm", render(&mut s, W, H));
}

#[test]
fn check_report() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "4");
    assert_snapshot!("check_report", render(&mut s, W, H));
}

#[test]
fn help_overlay() {
    let f = Fixture::demo();
    let mut s = f.session(W, 48);
    press(&mut s, "?");
    assert_snapshot!("help_overlay", render(&mut s, W, 48));
}

#[test]
fn delete_dialog_identity_then_predicate() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    select(&mut s, "user:42 · package_manager @ global");
    press(&mut s, "d");
    assert_snapshot!("delete_identity", render(&mut s, W, H));
    press(&mut s, "j");
    assert_snapshot!("delete_predicate", render(&mut s, W, H));
    press(&mut s, "j");
    assert_snapshot!("delete_subject", render(&mut s, W, H));
}

#[test]
fn explain_dialog() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    // The task is prefilled from the record; a repo typed in shows what the task shadows.
    select(&mut s, "user:42 · package_manager @ task:fix-lockfile-123");
    press(&mut s, "elegacy-dashboard");
    assert_snapshot!("explain_dialog", render(&mut s, W, H));
    // Narrow: each scope's source and date wrap below it instead of being cut.
    assert_snapshot!("explain_dialog_60x15", render(&mut s, 60, 15));
}

#[test]
fn error_popup_and_read_only() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    s.app.read_only = true;
    press(&mut s, "d");
    assert_snapshot!("read_only_toast", render(&mut s, W, H));
    s.app.popup("That did not work", "the database stayed locked by another process past the timeout: retry, or stop the process holding it");
    assert_snapshot!("error_popup", render(&mut s, W, H));
}

#[test]
fn empty_database() {
    let f = Fixture::empty();
    let mut s = f.session(W, H);
    assert_snapshot!("empty_database", render(&mut s, W, H));
}

#[test]
fn chinese_emoji_and_a_very_long_value() {
    let f = Fixture::demo();
    f.write(r#"{"subject":"用户:小明","predicate":"回复语言","value":"简体中文，技术名词保留英文 🧠","scope":"global","source":"thread:9/message:1","raw":"回复请用简体中文"}"#);
    f.write(r#"{"subject":"user:9","predicate":"emoji","value":"👍🏽 ok 🎉 ☕ 燕麦拿铁","scope":"global","source":"thread:9/message:2"}"#);
    let long = "very long value ".repeat(200);
    f.write(&format!(
        r#"{{"subject":"user:9","predicate":"notes","value":"{long}","scope":"global","source":"thread:9/message:3","raw":"{long}"}}"#
    ));
    let mut s = f.session(W, H);
    select(&mut s, "user:9 · notes @ global"); // a very long value and raw text
    assert_snapshot!("wide_values", render(&mut s, W, H));
    press(&mut s, "/中文");
    assert_snapshot!("wide_filter", render(&mut s, W, H));
}

#[test]
fn header_and_footer_at_100x30_and_60x15() {
    let f = Fixture::demo();
    let mut s = f.session(100, 30);
    // A path as long as a real one: cut in the middle, its file name kept.
    s.app.db_path = "/home/someone/.local/share/memscope/projects/web/demo.db".into();
    assert_snapshot!("layout_100x30", render(&mut s, 100, 30));
    assert_snapshot!("layout_60x15", render(&mut s, 60, 15));
    press(&mut s, "2");
    assert_snapshot!("layout_pending_100x30", render(&mut s, 100, 30));
    assert_snapshot!("layout_pending_60x15", render(&mut s, 60, 15));
    press(&mut s, "1");
    s.app.read_only = true;
    assert_snapshot!("layout_read_only_60x15", render(&mut s, 60, 15));
}

#[test]
fn tiny_terminal_20x5() {
    let f = Fixture::demo();
    let mut s = f.session(20, 5);
    assert_snapshot!("tiny_current_view", render(&mut s, 20, 5));
    press(&mut s, "2");
    assert_snapshot!("tiny_pending", render(&mut s, 20, 5));
    press(&mut s, "1d");
    assert_snapshot!("tiny_delete_dialog", render(&mut s, 20, 5));
}

#[test]
fn reads_tab_as_of_explain_and_the_highlighted_timeline() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "5");
    select_read(&mut s, "storefront-next");
    assert_snapshot!("reads_tab", render(&mut s, W, H));
    s.handle_key(key(KeyCode::Enter));
    assert_snapshot!("reads_as_of_explain", render(&mut s, W, H));
    press(&mut s, "g");
    assert_snapshot!("reads_go_to_highlighted_timeline", render(&mut s, W, H));
}

#[test]
fn reads_tab_filtered_and_narrow() {
    let f = Fixture::demo();
    let mut s = f.session(80, 24);
    press(&mut s, "5/cursor");
    assert_snapshot!("reads_filter_typing", render(&mut s, 80, 24));
    s.handle_key(key(KeyCode::Esc));
    press(&mut s, "ss");
    assert_snapshot!("reads_since_7d_narrow", render(&mut s, 80, 24));
}

#[test]
fn rescope_dialog_suggested_target_and_typed_target() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    select(&mut s, "user:42 · package_manager @ global");
    press(&mut s, "m");
    assert_snapshot!("rescope_dialog", render(&mut s, W, H));
    // A task-scoped record: the target is typed; it had no earlier value, so it is removed.
    s.handle_key(key(KeyCode::Esc));
    select(&mut s, "user:42 · package_manager @ task:fix-lockfile-123");
    press(&mut s, "mrepo:legacy-dashboard");
    assert_snapshot!("rescope_dialog_typed_target", render(&mut s, W, H));
}

#[test]
fn rescope_dialog_refused_target() {
    let f = Fixture::demo();
    // The target repo holds a causally newer value: the store would refuse (stale).
    f.write(r#"{"subject":"user:42","predicate":"package_manager","value":"bun","scope":"repo:newer","source":"thread:50/message:1"}"#);
    let mut s = f.session(W, H);
    select(&mut s, "user:42 · package_manager @ global");
    press(&mut s, "me");
    s.handle_key(crossterm::event::KeyEvent::new(
        KeyCode::Char('u'),
        crossterm::event::KeyModifiers::CONTROL,
    ));
    press(&mut s, "repo:newer");
    assert_snapshot!("rescope_dialog_refused", render(&mut s, W, H));
}

#[test]
fn revert_dialog() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    select(&mut s, "user:42 · package_manager @ global");
    press(&mut s, "v");
    assert_snapshot!("revert_dialog", render(&mut s, W, H));
}

#[test]
fn every_size_down_to_1x1_draws_without_panic() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
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
                render(&mut s, w, h);
            }
        }
    }
}

#[test]
fn event_popup_with_chinese_words_and_a_long_json_value() {
    let f = Fixture::demo();
    f.write(
        r#"{"subject":"user:42","predicate":"lint_config","value":{"extends":["eslint:recommended","plugin:@typescript-eslint/recommended"],"rules":{"semi":["error","always"],"quotes":["error","double",{"avoidEscape":true}],"no-console":"warn"},"ignorePatterns":["dist/","build/","coverage/","node_modules/"]},"scope":"global","source":"thread:61/message:7","raw":"这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。lint 规则照旧：分号必须有，字符串用双引号，console 只警告；dist、build、coverage 都不检查。"}"#,
    );
    let mut s = f.session(100, 30);
    select(&mut s, "user:42 · lint_config @ global");
    s.handle_key(key(KeyCode::Tab));
    s.handle_key(key(KeyCode::Enter));
    assert_snapshot!("event_popup_100x30", render(&mut s, 100, 30));
    assert_snapshot!("event_popup_60x15", render(&mut s, 60, 15));
    // Longer than the screen: it scrolls, and the title says where the view is.
    press(&mut s, "jjjjjjjjjjjj");
    assert_snapshot!("event_popup_60x15_scrolled", render(&mut s, 60, 15));
}

#[test]
fn suspects_tab_with_evidence_and_the_prefilled_rescope() {
    let f = Fixture::demo();
    let mut s = f.session(W, H);
    press(&mut s, "6");
    assert_snapshot!("suspects_tab", render(&mut s, W, H));
    s.handle_key(ch('m'));
    assert_snapshot!("suspects_rescope", render(&mut s, W, H));
    // At 60×15 the tab keeps its evidence readable (the list gives way).
    s.handle_key(key(KeyCode::Esc));
    s.handle_key(key(KeyCode::Tab));
    assert_snapshot!("suspects_tab_60x15", render(&mut s, 60, 15));
}
