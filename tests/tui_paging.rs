//! The current view pages through the store with keyset queries and a bounded window: every
//! motion must land where a plain in-memory list would, with folded groups and with a filter.

mod tui_support;

use crossterm::event::KeyCode;
use fuzzy_matcher::skim::SkimMatcherV2;
use fuzzy_matcher::FuzzyMatcher;
use memscope::store::{ListFilter, Store};
use memscope::tui::list::haystack;
use memscope::tui::text::value_text;
use memscope::tui::Session;
use std::collections::BTreeSet;
use tui_support::{ch, key, press, selected, Fixture};

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

fn walk_down(s: &mut Session) -> Vec<String> {
    s.handle_key(key(KeyCode::Home));
    let mut seen = vec![selected(s)];
    loop {
        s.handle_key(ch('j'));
        let now = selected(s);
        if now == *seen.last().unwrap() {
            return seen;
        }
        seen.push(now);
    }
}

fn walk_up(s: &mut Session) -> Vec<String> {
    s.handle_key(key(KeyCode::End));
    let mut seen = vec![selected(s)];
    loop {
        s.handle_key(ch('k'));
        let now = selected(s);
        if now == *seen.last().unwrap() {
            seen.reverse();
            return seen;
        }
        seen.push(now);
    }
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
        let l = &s.app.list;
        assert!(
            l.cursor >= l.offset && l.cursor < l.offset + page,
            "the cursor stays on screen"
        );
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
    let mut s = f.session(60, 12);
    let store = f.store();
    let want = expected(&store, &BTreeSet::new(), None);
    assert_eq!(want.len(), 1400 + 7);
    assert_eq!(walk_down(&mut s), want);
    assert_eq!(walk_up(&mut s), want);
    random_motions(&mut s, &want, 7);
}

#[test]
fn folded_groups_are_skipped_in_both_directions() {
    let f = fixture();
    let mut s = f.session(60, 12);
    // Fold the big global group and a repo in the middle.
    s.handle_key(key(KeyCode::Home));
    s.handle_key(key(KeyCode::Enter));
    for _ in 0..400 {
        if selected(&s) == "[repo:beta]" {
            break;
        }
        press(&mut s, "j");
    }
    s.handle_key(key(KeyCode::Left));
    let folded: BTreeSet<String> = ["global".to_string(), "repo:beta".to_string()].into();
    assert_eq!(s.app.folded, folded);
    let want = expected(&f.store(), &folded, None);
    assert_eq!(walk_down(&mut s), want);
    assert_eq!(walk_up(&mut s), want);
    random_motions(&mut s, &want, 11);
}

#[test]
fn filtered_paging_matches_a_plain_list() {
    let f = fixture();
    let mut s = f.session(60, 12);
    press(&mut s, "/中文");
    s.handle_key(key(KeyCode::Enter));
    let want = expected(&f.store(), &BTreeSet::new(), Some("中文"));
    assert!(want.len() > 200, "{}", want.len());
    assert_eq!(walk_down(&mut s), want);
    assert_eq!(walk_up(&mut s), want);
    random_motions(&mut s, &want, 3);
    // Folding works on filtered results too.
    s.handle_key(key(KeyCode::Home));
    s.handle_key(key(KeyCode::Enter));
    let folded: BTreeSet<String> = ["global".to_string()].into();
    let want = expected(&f.store(), &folded, Some("中文"));
    assert_eq!(walk_down(&mut s), want);
    assert_eq!(walk_up(&mut s), want);
}
