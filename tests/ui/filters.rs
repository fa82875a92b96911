//! `/` filters the list of the tab it is pressed in (README, "The terminal UI", the key
//! table): the pending queue, the tombstones and the suspects narrow their own rows, and a tab
//! with nothing to filter says so and changes nothing — never the current view behind it
//! (found by a tester: `/` on the pending queue filtered the current view instead).

use crate::probe::toast;
use crate::support::tui::{ch, for_each_backend, key, press, render, Fixture};
use crossterm::event::{KeyCode, KeyEvent};
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
    press(&mut s, "4");
    // Its footer offers neither `/` nor Tab, which do nothing here (found by an exploratory
    // test: it offered both).
    let screen = render(&mut s, 120, 32);
    let footer = screen.lines().last().unwrap();
    assert!(footer.contains("q quit"), "{footer}");
    assert!(
        !footer.contains("/ filter") && !footer.contains("Tab pane"),
        "{footer}"
    );
    press(&mut s, "/");
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
/// threads — `d` opened on a record the list no longer showed. A key now waits (held, the
/// pump replays it) for the filter's matches. Worker threads and 20,000 records, as the reviewer's.
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

/// The keys of a burst (a paste, a fast typist): each handled as the loop drains them, with
/// more queued behind every one but the last.
fn burst(s: &mut memscope::tui::Session, keys: &[KeyEvent]) {
    for (i, k) in keys.iter().enumerate() {
        s.handle_queued(crossterm::event::Event::Key(*k), i + 1 < keys.len());
    }
}

/// `Home /needle ⏎ j j j d`.
fn needle_keys() -> Vec<KeyEvent> {
    let mut keys = vec![key(KeyCode::Home), ch('/')];
    keys.extend("needle 针".chars().map(ch));
    keys.extend([key(KeyCode::Enter), ch('j'), ch('j'), ch('j'), ch('d')]);
    keys
}

fn delete_target(s: &memscope::tui::Session) -> String {
    crate::probe::top!(s, Delete).identity.to_string()
}

/// Found by review (50,000 records, worker threads): `Home /v1234 值⏎jjjd` pasted opened the
/// delete on the first match (every `j` lost) or on another row, where typed slowly it opened
/// on the fourth: a list motion with more keys queued behind it moved in the rows the filter
/// hides, before its matches came, and the matches then reset the selection. The burst here
/// reaches the session before the workers' replies (`WorkerMode::Deferred`), so the keys act
/// on the same record as the same keys typed one by one with the replies in between — also
/// after an earlier filter was kept, moved in and cleared.
#[test]
fn a_burst_after_a_filter_acts_on_the_record_the_same_keys_typed_do() {
    let f = Fixture::story();
    for i in 0..12 {
        let scope = ["global", "repo:web-app", "task:t1"][i % 3];
        f.write(&format!(
            r#"{{"subject":"user:{}","predicate":"p{i}","value":"needle 针 {i}","scope":"{scope}","source":"s{i}"}}"#,
            i % 5
        ));
    }
    for_each_backend(&f, |db| {
        // Typed one key at a time, the workers' replies in between.
        let mut typed = db.session(120, 32);
        for k in needle_keys() {
            typed.handle_key(k);
            typed.pump();
        }
        let want = delete_target(&typed);
        // Without the `j`s the delete opens elsewhere: the moves are what the test follows.
        let mut first = db.session(120, 32);
        for k in needle_keys().into_iter().filter(|k| *k != ch('j')) {
            first.handle_key(k);
        }
        assert_ne!(delete_target(&first), want);
        for earlier in [false, true] {
            let mut s = db.deferred_session(120, 32);
            if earlier {
                // `/user⏎ j Tab End Esc Esc Esc`, typed: a filter kept, moved in, cleared.
                let mut keys = vec![ch('/')];
                keys.extend("user".chars().map(ch));
                keys.extend([key(KeyCode::Enter), ch('j'), key(KeyCode::Tab)]);
                keys.extend([key(KeyCode::End), key(KeyCode::Esc), key(KeyCode::Esc)]);
                keys.push(key(KeyCode::Esc));
                for k in keys {
                    s.handle_key(k);
                    s.pump();
                }
                assert!(!s.app.memories().filter.active(), "the filter is cleared");
            }
            let keys = needle_keys();
            let (typed_part, rest) = keys.split_at(keys.len() - 4);
            burst(&mut s, typed_part);
            assert!(
                s.app.memories().filtering(),
                "the burst goes on before the filter's matches came"
            );
            burst(&mut s, rest);
            // The keys wait for the matches; the loop's pump brings them and replays the keys.
            s.pump();
            assert_eq!(
                delete_target(&s),
                want,
                "after an earlier filter: {earlier}"
            );
        }
    });
}

/// Found by review, after the fix above: on 50,000 records the burst still ended one row short
/// of the typed keys. A typed query scanned from scratch (the burst left no earlier query's
/// matches to narrow) sent its first reply before any match — the first rows of the view hold
/// none — so the selection stayed on the group header the later matches came under, where a
/// query narrowed from the last one got its matches at once and selected the first record.
/// The first record is selected once the matches show one, however they arrive.
#[test]
fn a_burst_after_a_filter_on_a_long_scan_starts_on_the_first_match() {
    let f = Fixture::empty();
    let mut lines = String::new();
    for i in 0..25_000 {
        lines.push_str(&format!(
            "{{\"subject\":\"user:a{i:05}\",\"predicate\":\"p\",\"value\":\"filler {i}\",\"scope\":\"global\",\"source\":\"s\"}}\n"
        ));
    }
    for i in 0..12 {
        let scope = ["global", "repo:web-app", "task:t1"][i % 3];
        lines.push_str(&format!(
            "{{\"subject\":\"user:z{i}\",\"predicate\":\"p{i}\",\"value\":\"needle 针 {i}\",\"scope\":\"{scope}\",\"source\":\"s\"}}\n"
        ));
    }
    let jsonl = f.dir.path().join("writes.jsonl");
    std::fs::write(&jsonl, lines).unwrap();
    let applied = std::process::Command::new(crate::support::BIN)
        .arg("--db")
        .arg(&f.path)
        .arg("apply")
        .arg(&jsonl)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(applied.success());
    let mut typed = f.session(120, 32);
    for k in needle_keys() {
        typed.handle_key(k);
        typed.pump();
    }
    let want = delete_target(&typed);
    assert_eq!(
        want, "user:z9 · p9 @ global",
        "the typed keys: the fourth match"
    );
    let mut s = crate::support::tui::open_session_in(
        Box::new(f.store()),
        120,
        32,
        memscope::tui::WorkerMode::Deferred,
    );
    let keys = needle_keys();
    let (typed_part, rest) = keys.split_at(keys.len() - 4);
    burst(&mut s, typed_part);
    assert!(s.app.memories().filtering());
    burst(&mut s, rest);
    s.pump();
    assert_eq!(delete_target(&s), want);
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

/// The current view's filter takes a query's words in any order: the scope is shown first, so
/// a user types it first (found by an exploratory test: `legacy npm` matched nothing where
/// `npm legacy` matched, and the pane said no record matches).
#[test]
fn the_current_views_filter_takes_words_in_any_order() {
    let f = Fixture::story();
    for_each_backend(&f, |db| {
        let mut seen = Vec::new();
        for query in ["npm legacy", "legacy npm", "legacy 42 npm"] {
            let mut s = db.session(120, 32);
            press(&mut s, "/");
            press(&mut s, query);
            s.handle_key(key(KeyCode::Enter));
            s.settle();
            let screen = render(&mut s, 120, 32);
            assert!(
                screen.contains("user:42 · package_manager") && screen.contains("legacy-dashboard"),
                "{query}: {screen}"
            );
            assert!(!screen.contains("No record matches"), "{query}: {screen}");
            assert!(screen.contains("· 1 match "), "{query}: {screen}");
            seen.push(s.app.memories().list.rows.len());
        }
        assert!(seen.iter().all(|n| *n == seen[0]), "{seen:?}");
    });
}
