//! `/` filters the list of the tab it is pressed in (README, "The terminal UI", the key
//! table): the pending queue, the tombstones and the suspects narrow their own rows, and a tab
//! with nothing to filter says so and changes nothing — never the current view behind it
//! (found by a tester: `/` on the pending queue filtered the current view instead).

use crate::probe::toast;
use crate::support::tui::{key, press, render, Fixture};
use crossterm::event::KeyCode;
use memscope::tui::Tab;

#[test]
fn slash_on_the_pending_queue_filters_the_queue_not_the_current_view() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    press(&mut s, "2/");
    assert_eq!(s.app.tab, Tab::Pending, "the tab stays");
    assert!(s.app.tabs.pending.filter.editing);
    assert!(
        !s.app.memories().filter.editing,
        "the current view is not filtered"
    );
    assert_eq!(s.app.tabs.pending.rows.len(), 2);
    // The user's words, in Chinese, match (`以后都用 npm` is user:42's).
    press(&mut s, "以后");
    assert_eq!(s.app.tabs.pending.rows.len(), 1);
    assert_eq!(s.app.tabs.pending.rows[0].subject, "user:42");
    s.handle_key(key(KeyCode::Enter));
    assert!(!s.app.tabs.pending.filter.editing);
    let screen = render(&mut s, 120, 32);
    assert!(
        screen.contains("Pending queue · 1 of 2 · “以后” open"),
        "{screen}"
    );
    assert!(screen.contains("/以后   1 of 2 items match"), "{screen}");
    assert!(!screen.contains("user:7 · indentation"), "{screen}");
    // `g` acts on the item shown, the only one.
    press(&mut s, "g");
    let confirm = render(&mut s, 120, 32);
    assert!(confirm.contains("Write pending #1 to global?"), "{confirm}");
    s.handle_key(key(KeyCode::Esc));
    // Nothing matches: the pane says so, and a key says why nothing is selected.
    press(&mut s, "/🦀👩🏽‍💻");
    s.handle_key(key(KeyCode::Enter));
    assert!(s.app.tabs.pending.rows.is_empty());
    let screen = render(&mut s, 120, 32);
    assert!(screen.contains("No row matches “以后🦀👩🏽‍💻”."), "{screen}");
    assert!(!screen.contains("No ambiguous writes wait"), "{screen}");
    press(&mut s, "x");
    assert!(
        toast(&s).contains("no row matches the filter"),
        "{}",
        toast(&s)
    );
    // Esc clears it; the current view was never touched.
    s.handle_key(key(KeyCode::Esc));
    assert_eq!(s.app.tabs.pending.rows.len(), 2);
    press(&mut s, "1");
    assert!(!s.app.memories().filter.active());
    let screen = render(&mut s, 120, 32);
    assert!(screen.contains("team:web · node_version"), "{screen}");
}

#[test]
fn slash_on_the_tombstones_and_the_suspects_filters_their_lists() {
    let f = Fixture::story();
    f.write(r#"{"subject":"用户:甲🦀","predicate":"名字🎉","value":"很长的值","scope":"repo:网页","source":"s"}"#);
    let mut store = f.store();
    let target = memscope::model::DeleteTarget::Subject("用户:甲🦀".into());
    store.delete(&target, Some("用户要求忘记 🦀")).unwrap();
    let mut s = f.session(120, 32);
    press(&mut s, "3");
    assert_eq!(s.app.tabs.tombstones.rows.len(), 2);
    press(&mut s, "/忘记");
    assert_eq!(s.app.tab, Tab::Tombstones);
    assert_eq!(s.app.tabs.tombstones.rows.len(), 1);
    assert_eq!(s.app.tabs.tombstones.rows[0].subject, "用户:甲🦀");
    s.handle_key(key(KeyCode::Enter));
    let screen = render(&mut s, 120, 32);
    assert!(screen.contains("Tombstones · 1 of 2 · “忘记”"), "{screen}");
    assert!(
        screen.contains("3 Tombstones (2)"),
        "the tab bar counts them all: {screen}"
    );
    assert!(!s.app.memories().filter.active());
    s.handle_key(key(KeyCode::Esc));
    assert_eq!(s.app.tabs.tombstones.rows.len(), 2);

    let f = Fixture::incident();
    let mut s = f.session(120, 32);
    press(&mut s, "6");
    let all = s.app.tabs.suspects.rows.len();
    assert!(all > 0, "the incident has a suspect");
    press(&mut s, "/zzzz");
    assert_eq!(s.app.tab, Tab::Suspects);
    assert!(s.app.tabs.suspects.rows.is_empty());
    // Backspace brings the rows back as the line shortens.
    for _ in 0..4 {
        s.handle_key(key(KeyCode::Backspace));
    }
    assert_eq!(s.app.tabs.suspects.rows.len(), all);
    press(&mut s, "npm");
    assert_eq!(s.app.tabs.suspects.rows.len(), all);
    assert!(!s.app.memories().filter.active());
}

#[test]
fn slash_on_the_check_tab_says_there_is_nothing_to_filter() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    press(&mut s, "4/");
    assert_eq!(s.app.tab, Tab::Check, "the tab stays");
    assert!(s.app.tabs.typing().is_none(), "nothing is being typed");
    assert!(!s.app.memories().filter.editing);
    assert!(toast(&s).contains("no list to filter"), "{}", toast(&s));
    // The next keys are keys, not a filter's text.
    press(&mut s, "2");
    assert_eq!(s.app.tab, Tab::Pending);
}

/// Found by review: keys typed in one burst after a committed filter (`/words⏎jd`, a paste, a
/// slow link) acted on the rows the filter hides, its matches not come yet from the worker
/// threads — `d` opened on a record the list no longer showed. A key now waits for the
/// filter's first matches. Worker threads and 20,000 records, as the reviewer's.
#[test]
fn keys_typed_right_after_a_filter_act_on_its_matches() {
    let f = Fixture::story();
    let mut lines = String::new();
    for i in 0..20_000 {
        lines.push_str(&format!(
            "{{\"subject\":\"user:{}\",\"predicate\":\"pred{}\",\"value\":\"值 number {i}\",\"scope\":\"global\",\"source\":\"s\"}}\n",
            i % 500,
            i / 500
        ));
    }
    lines.push_str(r#"{"subject":"user:zzz","predicate":"needle","value":"针 NEEDLE 🧷","scope":"global","source":"s"}"#);
    let mut apply = std::process::Command::new(crate::support::BIN)
        .arg("--db")
        .arg(&f.path)
        .args(["apply", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut apply.stdin.take().unwrap(), lines.as_bytes()).unwrap();
    assert!(apply.wait().unwrap().success());
    let store: Box<dyn memscope::store::UiStore> = Box::new(f.store());
    let mut s = memscope::tui::session::Session::new(
        store,
        memscope::store::Clock::Fixed(crate::support::tui::now()),
        (120, 32),
        memscope::tui::session::WorkerMode::Threads,
    )
    .unwrap();
    for round in 0..3 {
        // No pump between the keys: what the loop drains from one burst.
        press(&mut s, "1/NEEDLE");
        s.handle_key(key(KeyCode::Enter));
        press(&mut s, "jd");
        // The delete's preview comes from a worker too.
        let asked = std::time::Instant::now();
        while s.app.dialogs.is_empty() && asked.elapsed().as_secs() < 20 {
            if !s.pump() {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        match s.app.dialogs.last() {
            Some(memscope::tui::dialogs::Dialog::Delete(d)) => assert_eq!(
                (d.identity.subject.as_str(), d.identity.predicate.as_str()),
                ("user:zzz", "needle"),
                "round {round}"
            ),
            other => panic!(
                "round {round}: no delete dialog: {other:?} {}",
                crate::probe::toast(&s)
            ),
        }
        s.handle_key(key(KeyCode::Esc));
        s.handle_key(key(KeyCode::Esc));
        press(&mut s, "g");
    }
}

/// A query wider than the filter line shows its end — what was just typed — after `…`, and the
/// count stays (found by review: `/` then sixty `长` and `END` showed the query's start only;
/// the typed end, the match count and the keys were cut off).
#[test]
fn a_long_query_shows_its_end_and_the_count() {
    let f = Fixture::story();
    for (tab, count) in [('1', "match"), ('2', "items match"), ('5', "reads since")] {
        for (w, h) in [(120, 32), (80, 24), (60, 15), (40, 12)] {
            let mut s = f.session(w, h);
            press(&mut s, &format!("{tab}/"));
            press(&mut s, &"长".repeat(60));
            press(&mut s, "END");
            let screen = render(&mut s, w, h);
            let line = (screen.lines())
                .find(|l| l.starts_with("\"/"))
                .unwrap_or_else(|| panic!("tab {tab} at {w}×{h}: the filter line\n{screen}"));
            assert!(
                line.starts_with("\"/…长") && line.contains("长END   "),
                "tab {tab} at {w}×{h}: the query's end after …: {line}"
            );
            assert!(
                line.contains(count),
                "tab {tab} at {w}×{h}: the count: {line}"
            );
            if w >= 80 {
                assert!(line.contains("(Enter keep · Esc clear)"), "{line}");
            }
            // Kept (Enter), the line still ends the query where it ends.
            s.handle_key(key(KeyCode::Enter));
            let screen = render(&mut s, w, h);
            assert!(
                screen.contains("长END   ") && screen.contains(count),
                "tab {tab} at {w}×{h}, kept:\n{screen}"
            );
        }
    }
}
