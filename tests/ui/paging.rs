//! The current view pages through the store with keyset queries and a bounded window: every
//! motion must land where a plain in-memory list would, with folded groups and with a filter.
//! Each test runs on SQLite and on the same data moved to PostgreSQL; the plain list is read
//! from the SQLite file.

use crate::support::tui::{
    ch, filter, for_each_backend, key, press, render, sees_live_change, selected, Fixture,
};
use crossterm::event::KeyCode;
use fuzzy_matcher::skim::SkimMatcherV2;
use fuzzy_matcher::FuzzyMatcher;
use memscope::store::{ListFilter, Store};
use memscope::tui::list::{haystack, ListItem};
use memscope::tui::text::value_text;
use memscope::tui::Session;
use std::collections::BTreeSet;

fn fixture() -> Fixture {
    let f = Fixture::empty();
    let mut lines = String::new();
    let scopes = [
        "global",
        "repo:alpha",
        "repo:beta",
        "repo:gamma",
        "task:t-1",
        "task:t-2",
        "task:t-3",
    ];
    for i in 0..1400 {
        let scope = scopes[(i * 7 + i / 3) % scopes.len()];
        let value = if i % 5 == 0 {
            format!("值 {i} 中文")
        } else {
            format!("value {i}")
        };
        lines.push_str(&format!(
            r#"{{"subject":"user:{}","predicate":"p{}","value":"{value}","scope":"{scope}","source":"s:{i}"}}"#,
            i % 97,
            i
        ));
        lines.push('\n');
    }
    f.store()
        .apply(std::io::Cursor::new(lines.into_bytes()), |_| Ok(()))
        .expect("the fixture applies");
    f
}

/// The list a plain implementation would show: headers, and the records of unfolded groups.
fn expected(store: &Store, folded: &BTreeSet<String>, query: Option<&str>) -> Vec<String> {
    let matcher = SkimMatcherV2::default();
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut hay = String::new();
    for r in store.list(&ListFilter::default()).expect("the list") {
        let scope = r.scope.to_string();
        if let Some(q) = query {
            haystack(
                &mut hay,
                &r.subject,
                &r.predicate,
                &value_text(&r.value),
                &scope,
            );
            if matcher.fuzzy_match(&hay, q).is_none() {
                continue;
            }
        }
        if current.as_deref() != Some(&scope) {
            out.push(format!("[{scope}]"));
            current = Some(scope.clone());
        }
        if !folded.contains(&scope) {
            out.push(format!("{} · {} @ {}", r.subject, r.predicate, r.scope));
        }
    }
    out
}

/// The rows met pressing `step` from `start` until the cursor stops moving, in the order met.
fn walk(s: &mut Session, start: KeyCode, step: char) -> Vec<String> {
    s.handle_key(key(start));
    let mut seen = vec![selected(s)];
    loop {
        s.handle_key(ch(step));
        let now = selected(s);
        if now == *seen.last().unwrap() {
            return seen;
        }
        seen.push(now);
    }
}

/// Walking the whole list down from its top and up from its end meets exactly `want`.
#[track_caller]
fn assert_walks(s: &mut Session, want: &[String]) {
    assert_eq!(walk(s, KeyCode::Home, 'j'), want, "walking down");
    let mut up = walk(s, KeyCode::End, 'k');
    up.reverse();
    assert_eq!(up, want, "walking up");
}

/// The window shows what it can: the selection on screen, with its group header when both
/// fit, and never blank rows below the end while rows wait above it.
fn assert_window(s: &Session, what: &str) {
    let page = s.app.page();
    let l = &s.app.memories().list;
    assert!(
        l.cursor >= l.offset && l.cursor < l.offset + page,
        "{what}: the selection is off screen (cursor {}, offset {}, page {page})",
        l.cursor,
        l.offset
    );
    let shown = l.rows.len() - l.offset;
    if l.at_end && (l.offset > 0 || !l.at_start) {
        assert!(
            shown >= page,
            "{what}: {} blank rows below the end while rows wait above (offset {})",
            page - shown,
            l.offset
        );
    }
    let header = (0..=l.cursor)
        .rev()
        .find(|&i| matches!(l.rows[i].item, ListItem::Header { .. }));
    if let Some(h) = header {
        if l.cursor - h < page {
            assert!(
                l.offset <= h,
                "{what}: the group header is hidden above the selection (header {h}, offset {})",
                l.offset
            );
        }
    }
}

/// The window walks the whole list both ways and moves at random (`seed`) as a plain list of
/// `want` would.
fn moves_as(s: &mut Session, want: &[String], seed: u64) {
    assert_walks(s, want);
    random_motions(s, want, seed);
}

/// Home, then Enter on the first group's header.
fn fold_the_first_group(s: &mut Session) {
    s.handle_key(key(KeyCode::Home));
    s.handle_key(key(KeyCode::Enter));
}

/// Random motions against a model of the cursor; the window must always agree with it.
fn random_motions(s: &mut Session, want: &[String], seed: u64) {
    let mut x = seed;
    let mut idx = 0usize;
    s.handle_key(key(KeyCode::Home));
    let page = s.app.page();
    let last = want.len() - 1;
    for step in 0..400 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (code, label) = match (x >> 33) % 7 {
            0 => (KeyCode::PageDown, "PgDn"),
            1 => (KeyCode::PageUp, "PgUp"),
            2 => (KeyCode::End, "End"),
            3 => (KeyCode::Home, "Home"),
            4 | 5 => (KeyCode::Down, "Down"),
            _ => (KeyCode::Up, "Up"),
        };
        idx = match code {
            KeyCode::PageDown => (idx + page).min(last),
            KeyCode::PageUp => idx.saturating_sub(page),
            KeyCode::End => last,
            KeyCode::Home => 0,
            KeyCode::Down => (idx + 1).min(last),
            _ => idx.saturating_sub(1),
        };
        s.handle_key(key(code));
        assert_eq!(selected(s), want[idx], "step {step} ({label}), seed {seed}");
        let l = &s.app.memories().list;
        assert!(
            l.cursor >= l.offset && l.cursor < l.offset + page,
            "the cursor stays on screen"
        );
        assert_window(s, &format!("step {step} ({label}), seed {seed}"));
        assert!(
            l.rows.len() <= 6 * page + 2,
            "the window stays bounded: {} rows",
            l.rows.len()
        );
    }
}

#[test]
fn keyset_paging_matches_a_plain_list() {
    let f = fixture();
    let want = expected(&f.store(), &BTreeSet::new(), None);
    assert_eq!(want.len(), 1400 + 7);
    for_each_backend(&f, |db| moves_as(&mut db.session(60, 12), &want, 7));
}

#[test]
fn folded_groups_are_skipped_in_both_directions() {
    let f = fixture();
    let folded: BTreeSet<String> = ["global".to_string(), "repo:beta".to_string()].into();
    let want = expected(&f.store(), &folded, None);
    for_each_backend(&f, |db| {
        let mut s = db.session(60, 12);
        // Fold the big global group and a repo in the middle.
        fold_the_first_group(&mut s);
        for _ in 0..400 {
            if selected(&s) == "[repo:beta]" {
                break;
            }
            press(&mut s, "j");
        }
        s.handle_key(key(KeyCode::Left));
        assert_eq!(s.app.memories().folded, folded);
        moves_as(&mut s, &want, 11);
    });
}

#[test]
fn filtered_paging_matches_a_plain_list() {
    let f = fixture();
    let want = expected(&f.store(), &BTreeSet::new(), Some("中文"));
    assert!(want.len() > 200, "{}", want.len());
    let folded: BTreeSet<String> = ["global".to_string()].into();
    let want_folded = expected(&f.store(), &folded, Some("中文"));
    for_each_backend(&f, |db| {
        let mut s = db.session(60, 12);
        filter(&mut s, "中文");
        moves_as(&mut s, &want, 3);
        // Folding works on filtered results too.
        fold_the_first_group(&mut s);
        assert_walks(&mut s, &want_folded);
    });
}

#[test]
fn clearing_a_filter_leaves_no_rows_hidden_above_blank_lines() {
    for_each_backend(&Fixture::story(), |db| {
        let mut s = db.session(100, 30);
        filter(&mut s, "npm");
        // The last match sits low in the filtered list, and lower still in the whole one.
        s.handle_key(key(KeyCode::End));
        let chosen = selected(&s);
        assert_eq!(chosen, "user:42 · package_manager @ task:fix-lockfile-123");
        s.handle_key(key(KeyCode::Esc));
        if s.app.memories().filter.active() {
            s.handle_key(key(KeyCode::Esc));
        }
        assert!(!s.app.memories().filter.active());
        assert_eq!(selected(&s), chosen);
        // The whole story fits on one screen: nothing may hide above it.
        assert!(s.app.memories().list.rows.len() < s.app.page());
        assert_eq!(s.app.memories().list.offset, 0);
        assert_window(&s, "after the filter is cleared");
        let screen = render(&mut s, 100, 30);
        assert!(screen.contains("▾ global"), "{screen}");
    });
}

#[test]
fn a_live_insert_keeps_the_selection_visible_without_scrolling_past_the_end() {
    for_each_backend(&Fixture::story(), |db| {
        let mut s = db.session(100, 30);
        // The last row, at the bottom of a list that fits the screen.
        s.handle_key(key(KeyCode::End));
        let chosen = selected(&s);
        // Another process writes a record that sorts above it.
        db.write(r#"{"subject":"team:api","predicate":"linter","value":"ruff","scope":"global","source":"thread:1/message:1"}"#);
        assert!(sees_live_change(&mut s));
        assert_eq!(selected(&s), chosen);
        assert_eq!(
            s.app.memories().list.offset,
            0,
            "the list fits: nothing scrolls"
        );
        assert_window(&s, "after a live insert");
    });

    // A long list: the first record selected under its header, then a write sorts above it.
    for_each_backend(&fixture(), |db| {
        let mut s = db.session(60, 12);
        s.handle_key(key(KeyCode::Home));
        press(&mut s, "j");
        let chosen = selected(&s);
        assert_eq!(s.app.memories().list.offset, 0);
        db.write(
            r#"{"subject":"aaa:first","predicate":"p","value":"v","scope":"global","source":"s:new"}"#,
        );
        assert!(sees_live_change(&mut s));
        assert_eq!(selected(&s), chosen);
        assert_window(&s, "after a live insert above the selection");
        assert_eq!(
            s.app.memories().list.offset,
            0,
            "the group header stays on screen"
        );
        // At the end of the long list, a write below the window: still no blank rows.
        s.handle_key(key(KeyCode::End));
        db.write(
            r#"{"subject":"zzz:last","predicate":"p","value":"v","scope":"task:t-3","source":"s:end"}"#,
        );
        assert!(sees_live_change(&mut s));
        assert_window(&s, "after a live insert at the end");
    });
}

#[test]
fn going_to_a_record_from_reads_shows_it_under_its_header() {
    for_each_backend(&Fixture::incident(), |db| {
        let mut s = db.session(100, 30);
        s.handle_key(key(KeyCode::Home));
        press(&mut s, "5");
        s.handle_key(key(KeyCode::Home));
        s.handle_key(ch('g'));
        assert_eq!(s.app.tab, memscope::tui::Tab::Memories);
        assert_eq!(selected(&s), "user:42 · package_manager @ global");
        assert_eq!(s.app.memories().list.offset, 0);
        assert_window(&s, "after g from Reads");
        // And back again from further down the list.
        s.handle_key(key(KeyCode::Esc)); // back from the history to the list
        s.handle_key(key(KeyCode::End));
        assert_eq!(selected(&s), "user:42 · package_manager @ repo:newer");
        press(&mut s, "5");
        s.handle_key(ch('g'));
        assert_window(&s, "after g from Reads, from the end of the list");
    });
}

/// A loaded list is the same component as the current view: moving up keeps the window where
/// it is while the cursor stays on screen, and a click selects without scrolling.
#[test]
fn a_loaded_list_keeps_its_window_like_the_current_view() {
    use memscope::tui::rows::{Motion, Row, Rows};
    #[derive(Debug)]
    struct Item;
    impl Row for Item {}
    let mut rows = Rows::default();
    rows.set((0..100).map(|_| Item).collect());
    rows.step(Motion::End, 10);
    assert_eq!((rows.cursor, rows.window(10)), (99, 90..100));
    rows.step(Motion::Up(3), 10);
    assert_eq!((rows.cursor, rows.window(10)), (96, 90..100));
    rows.step(Motion::PageUp, 10);
    assert_eq!((rows.cursor, rows.window(10)), (86, 86..96));
    rows.pick(7, 10, 1);
    assert_eq!((rows.cursor, rows.window(10)), (93, 86..96));
    // Two lines a row (the Reads list): line 3 is the second row on screen.
    rows.pick(3, 20, 2);
    assert_eq!((rows.cursor, rows.window(10)), (87, 86..96));
    rows.step(Motion::Home, 10);
    assert_eq!((rows.cursor, rows.window(10)), (0, 0..10));
}
