//! The history pane on a long timeline and on large values (README, "The terminal UI"): the pane
//! holds a window of events around its cursor and pages through the store by key; long values
//! are previews in the panes and whole in the event popup and the clipboard. Both run on SQLite
//! and on the same data moved to PostgreSQL.

use crate::support::tui::{
    ch, detail, for_each_backend, key, render, sees_live_change, select, Db, Fixture,
};
use crossterm::event::KeyCode;
use memscope::store::PREVIEW_BYTES;
use memscope::tui::app::Dialog;
use memscope::tui::text::thousands;
use memscope::tui::Session;

/// A record written `n` times (values alternating, so each write is a new version).
fn long_timeline(n: usize) -> Fixture {
    let f = Fixture::empty();
    let lines: String = (0..n)
        .map(|i| {
            format!(
                r#"{{"subject":"user:flip","predicate":"package_manager","value":"v_{i}","scope":"global","source":"t:{i}"}}"#
            ) + "\n"
        })
        .collect();
    f.store()
        .apply(std::io::Cursor::new(lines), |_| Ok(()))
        .expect("the writes land");
    f
}

fn cursor_version(s: &Session) -> Option<i64> {
    let d = detail(s);
    let t = &s.app.memories().timeline;
    d.events
        .history
        .get(t.cursor - d.events.first)
        .and_then(|e| e.version)
}

#[test]
fn a_long_timeline_pages_by_key_and_never_loads_whole() {
    let n = 2_000;
    for_each_backend(&long_timeline(n), |db| pages_by_key(db, n));
}

fn pages_by_key(db: &Db, n: usize) {
    let mut s = db.session(100, 30);
    select(&mut s, "user:flip · package_manager @ global");
    let d = detail(&s);
    assert_eq!(d.events.total, n);
    assert!(
        d.events.history.len() < 500,
        "a window, not {} events",
        d.events.history.len()
    );
    let screen = render(&mut s, 100, 30);
    assert!(
        screen.contains("Timeline, oldest first · 2,000 events"),
        "{screen}"
    );
    // Six-digit versions do not run into the value (v100000pnpm).
    assert!(screen.contains("v1  v_0"), "{screen}");

    s.handle_key(key(KeyCode::Tab));
    // j walks event by event across page boundaries: every version in order.
    for v in 1..=400 {
        assert_eq!(cursor_version(&s), Some(v));
        s.handle_key(ch('j'));
    }
    assert!(detail(&s).events.history.len() < 500);
    // End: the newest event, loaded from the end; k walks back across a boundary.
    s.handle_key(key(KeyCode::End));
    assert_eq!(s.app.memories().timeline.cursor, n - 1);
    assert_eq!(cursor_version(&s), Some(n as i64));
    let screen = render(&mut s, 100, 30);
    assert!(
        detail(&s).events.first > 0,
        "the window starts late in the timeline"
    );
    assert!(
        screen.contains("v_1999"),
        "the cursor's event is on screen:\n{screen}"
    );
    for back in 1..=300 {
        s.handle_key(ch('k'));
        assert_eq!(cursor_version(&s), Some((n - back) as i64));
    }
    // PgDn/PgUp and Home stay in step with the versions.
    s.handle_key(key(KeyCode::Home));
    assert_eq!(cursor_version(&s), Some(1));
    for _ in 0..30 {
        s.handle_key(key(KeyCode::PageDown));
    }
    let at = s.app.memories().timeline.cursor;
    assert_eq!(cursor_version(&s), Some(at as i64 + 1));
    for _ in 0..30 {
        s.handle_key(key(KeyCode::PageUp));
    }
    assert_eq!(cursor_version(&s), Some(1));
    // Enter opens the selected event, read whole from the store.
    s.handle_key(key(KeyCode::End));
    s.handle_key(key(KeyCode::Enter));
    let Some(Dialog::Event(e)) = s.app.dialogs.last() else {
        panic!("the event popup: {:?}", s.app.dialogs)
    };
    assert_eq!(e.event().version, Some(n as i64));
    // A refresh (another process's write) keeps the selected event.
    s.handle_key(key(KeyCode::Esc));
    s.handle_key(key(KeyCode::PageUp));
    let before = (s.app.memories().timeline.cursor, cursor_version(&s));
    db.write(r#"{"subject":"user:other","predicate":"editor","value":"helix","scope":"global","source":"t"}"#);
    assert!(sees_live_change(&mut s));
    assert_eq!(
        (s.app.memories().timeline.cursor, cursor_version(&s)),
        before
    );
}

#[test]
fn a_large_value_is_a_preview_in_the_panes_and_whole_when_opened_or_copied() {
    let f = Fixture::empty();
    let big = format!("{}尾", "大".repeat(3 * PREVIEW_BYTES));
    let line = serde_json::json!({"subject": "user:big", "predicate": "notes", "value": big,
        "scope": "global", "source": "t:1", "raw": big})
    .to_string();
    f.store()
        .apply(std::io::Cursor::new(line + "\n"), |_| Ok(()))
        .expect("the write lands");
    for_each_backend(&f, |db| shows_a_preview_and_opens_whole(db, &big));
}

fn shows_a_preview_and_opens_whole(db: &Db, big: &str) {
    let mut s = db.session(100, 30);
    select(&mut s, "user:big · notes @ global");
    let record = &detail(&s).record;
    let shown = record.value.as_str().unwrap().to_string();
    assert!(shown.len() < 4 * 1024, "a preview: {} bytes", shown.len());
    assert!(big.starts_with(&shown), "{shown}");
    assert_eq!(record.value_bytes, Some(big.len() as i64 + 2));
    let event = &detail(&s).events.history[0];
    assert!(event.raw.as_deref().unwrap().len() < 4 * 1024);
    assert_eq!(event.raw_bytes, Some(big.len() as i64));
    // The popup reads the event whole; c copies the value whole.
    s.handle_key(key(KeyCode::Tab));
    s.handle_key(key(KeyCode::Enter));
    let Some(Dialog::Event(e)) = s.app.dialogs.last() else {
        panic!("the event popup")
    };
    assert_eq!(e.event().value, Some(serde_json::Value::from(big)));
    assert_eq!(e.event().raw.as_deref(), Some(big));
    s.handle_key(key(KeyCode::Esc));
    s.handle_key(key(KeyCode::Esc));
    s.handle_key(ch('c'));
    let out = s.take_output();
    // Past the clipboard's limit: refused whole rather than cut — but the store's text was read.
    if big.len() <= memscope::tui::clipboard::COPY_LIMIT {
        assert!(!out.is_empty());
    } else {
        assert!(out.is_empty());
        assert!(
            s.app.toast.as_ref().is_some_and(|t| t.error),
            "{:?}",
            s.app.toast
        );
    }
}

/// The event column fits the longest event name shown, a space after it: `pending_resolved`
/// (16 columns) ran into the version at every width (`pending_resolvedv2  pending #1 → …`,
/// found by review), its version a column off every other event's.
#[test]
fn a_long_event_name_keeps_its_space_and_the_version_column() {
    for_each_backend(&Fixture::demo(), |db| {
        let mut s = db.session(120, 32);
        // The demo's pending #1 into global: a `pending_resolved` event on the record there.
        crate::support::tui::press(&mut s, "2gy1");
        select(&mut s, "user:42 · package_manager @ global");
        for (w, h) in [(120, 32), (160, 40), (100, 30)] {
            let screen = render(&mut s, w, h);
            // The column, on screen, where each event's version starts.
            let column = |what: &str| {
                let line = (screen.lines())
                    .find(|l| l.contains(what))
                    .unwrap_or_else(|| panic!("{what} at {w}×{h}:\n{screen}"));
                let at = line.find(what).expect("found");
                memscope::tui::text::width(&line[..at])
            };
            let resolved = column("pending_resolved v2  pending #1");
            let set = column("v1  pnpm");
            let confirmed = column("v2  npm  seq 21");
            assert_eq!(
                (resolved + "pending_resolved ".len(), set),
                (confirmed, confirmed),
                "{w}×{h}:\n{screen}"
            );
        }
    });
}

/// A long value lists as a short one does — a newline `⏎`, an escape `�`, quotes as themselves,
/// not its JSON text's `\n` and `\u001b` — cut with `…` and its size beside it, in the list row,
/// the history pane's value line and its timeline (found by an exploratory tester: the JSON
/// escapes showed, and the size never did at any width).
#[test]
fn a_long_value_lists_its_own_characters_and_its_size() {
    let f = Fixture::empty();
    let value = format!("A\nB \"q\" \u{1b}[31m 仓库 🧠 {}", "y".repeat(5000));
    let words = format!("remember {value}");
    let line = serde_json::json!({"subject": "user:3", "predicate": "realnl", "value": value,
        "scope": "global", "source": "s:1", "raw": words})
    .to_string();
    f.store()
        .apply(std::io::Cursor::new(line + "\n"), |_| Ok(()))
        .expect("the write lands");
    // The size as stored: the value's JSON text.
    let stored = serde_json::to_string(&value).unwrap().len();
    let size = format!("({} bytes)", thousands(stored as i64));
    let said = format!("({} bytes in all)", thousands(words.len() as i64));
    for_each_backend(&f, |db| {
        let mut s = db.session(120, 40);
        select(&mut s, "user:3 · realnl @ global");
        let screen = render(&mut s, 120, 40);
        // The list row: its own characters, cut, the size and the version beside them.
        let row = (screen.lines())
            .find(|l| l.contains("user:3 · realnl = "))
            .unwrap_or_else(|| panic!("the row:\n{screen}"));
        assert!(row.contains("realnl = A⏎B \"q\" �[31m 仓"), "{row}");
        assert!(row.contains(&format!("… {size} v1")), "{row}");
        // The row, the value line, the timeline's `set` event and the scopes line, each cut
        // with `…` and the size after it.
        assert_eq!(screen.matches("A⏎B \"q\" �[31m 仓").count(), 4, "{screen}");
        let sizes: Vec<usize> = screen.match_indices(&size).map(|(at, _)| at).collect();
        assert_eq!(sizes.len(), 4, "{size}:\n{screen}");
        for at in sizes {
            assert!(screen[..at].trim_end().ends_with('…'), "{screen}");
        }
        assert!(
            !screen.contains("\\n") && !screen.contains("\\u001b"),
            "{screen}"
        );
        // The words' size, where the pane points to the rest.
        assert_eq!(screen.matches(&said).count(), 1, "{said}:\n{screen}");
    });
}

/// The open event popup's text laid out how many times so far.
fn layouts(s: &Session) -> usize {
    match s.app.dialogs.last() {
        Some(Dialog::Event(d)) => d.layouts(),
        _ => panic!("no event popup on top"),
    }
}

/// Found by review: on a 5 MB value the event popup wrapped its whole text at every frame (the
/// loop draws one at each poll, three a second) and at every key, so an idle UI kept a core
/// busy and each `j` waited 1.6 s. It lays its text out once per width: frames, polls, scrolls
/// and `c` reuse that layout; a resize lays it out again, and what it shows then is what a
/// popup opened at that size shows — hostile text still escaped, flags and CJK in place.
#[test]
fn the_event_popup_lays_its_text_out_once_per_width() {
    let f = Fixture::empty();
    let value = format!("🇨🇳中文{}", "x".repeat(100_000));
    let raw = format!(
        "这个仓库 \u{1b}[2J\u{202e}reversed\u{202c} {}",
        "很长的话".repeat(2_000)
    );
    let line = serde_json::json!({"subject": "user:big", "predicate": "blob", "value": value,
        "scope": "global", "source": "big:1", "raw": raw})
    .to_string();
    f.store()
        .apply(std::io::Cursor::new(line + "\n"), |_| Ok(()))
        .expect("the write lands");
    let open = |w: u16, h: u16| {
        let mut s = f.session(w, h);
        select(&mut s, "user:big · blob @ global");
        s.handle_key(key(KeyCode::Tab));
        s.handle_key(key(KeyCode::Enter));
        s
    };
    let mut s = open(120, 40);
    let first = render(&mut s, 120, 40);
    assert!(first.contains("lines 1–36 of "), "{first}");
    assert!(first.contains("这个仓库 �[2J�reversed�"), "{first}");
    assert!(
        !first.chars().any(|c| c.is_control() && c != '\n') && !first.contains('\u{202e}'),
        "{first}"
    );
    for _ in 0..30 {
        render(&mut s, 120, 40);
        s.poll_live();
    }
    for k in [
        ch('j'),
        ch('j'),
        key(KeyCode::PageDown),
        key(KeyCode::End),
        ch('k'),
        key(KeyCode::PageUp),
        ch('c'),
        key(KeyCode::Home),
    ] {
        s.handle_key(k);
        render(&mut s, 120, 40);
    }
    assert!(!s.take_output().is_empty(), "c copied the words");
    assert_eq!(layouts(&s), 1, "laid out once at 120 columns");
    assert_eq!(render(&mut s, 120, 40), first);
    // Another process writes v2: the popup, read again, says v1 was replaced; its stored texts
    // are the same, and so is their layout.
    f.write(r#"{"subject":"user:big","predicate":"blob","value":"small","scope":"global","source":"big:2"}"#);
    assert!(sees_live_change(&mut s));
    let replaced = render(&mut s, 120, 40);
    assert!(replaced.contains("(then replaced)"), "{replaced}");
    assert_eq!(layouts(&s), 1, "the same texts, not laid out again");
    let first = replaced;
    // Narrower: laid out again, once, as a popup opened at that width is.
    let narrow = render(&mut s, 60, 20);
    assert_eq!(layouts(&s), 2);
    let mut fresh = open(60, 20);
    assert_eq!(narrow, render(&mut fresh, 60, 20));
    for _ in 0..5 {
        render(&mut s, 60, 20);
    }
    s.handle_key(key(KeyCode::End));
    fresh.handle_key(key(KeyCode::End));
    let end = render(&mut s, 60, 20);
    assert_eq!(end, render(&mut fresh, 60, 20));
    assert!(end.contains("xxx"), "the value's last rows: {end}");
    assert_eq!(layouts(&s), 2);
    // A height change alone keeps the layout; the width back lays it out for that width again.
    render(&mut s, 60, 30);
    assert_eq!(layouts(&s), 2);
    s.handle_key(key(KeyCode::Home));
    assert_eq!(render(&mut s, 120, 40), first);
    assert_eq!(layouts(&s), 3);
}
