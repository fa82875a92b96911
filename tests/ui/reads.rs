//! The Reads tab (5) when the read log cannot be read (README, "The terminal UI", Check).

use crate::support::tui::{filter, press, render, sees_live_change, Fixture};

/// Found by review: when reading the log failed, the pane's title said `· 0 reads` — a count
/// the tab did not know — as the Suspects tab's did after a failed scan. Like a list that could
/// not be loaded, the pane says `not loaded` and why; no `0 reads` in the title or in the filter's
/// status line. The next read that succeeds brings the count back.
#[test]
fn a_failed_read_of_the_log_claims_no_count() {
    let f = Fixture::incident();
    let mut s = f.session(120, 30);
    press(&mut s, "5");
    let screen = render(&mut s, 120, 30);
    assert!(screen.contains(" · all time · 3 reads "), "{screen}");
    // A read's version damaged by a raw client: the log cannot be read.
    let c = rusqlite::Connection::open(&f.path).unwrap();
    c.execute_batch("UPDATE reads SET version = 'v二' WHERE agent = 'cursor'")
        .unwrap();
    assert!(sees_live_change(&mut s));
    assert!(s.app.tabs.reads.error.is_some(), "the read failed");
    let screen = render(&mut s, 120, 30);
    assert!(!screen.contains("0 reads"), "{screen}");
    assert!(screen.contains("┌ Reads · not loaded "), "{screen}");
    assert!(screen.contains("Reads could not be loaded: "), "{screen}");
    // An applied filter's status line counts nothing either.
    filter(&mut s, "package");
    let screen = render(&mut s, 120, 30);
    assert!(!screen.contains("0 reads"), "{screen}");
    assert!(screen.contains("/package   not loaded"), "{screen}");
    // Repaired, the count is back.
    c.execute_batch("UPDATE reads SET version = 2 WHERE version = 'v二'")
        .unwrap();
    assert!(sees_live_change(&mut s));
    let screen = render(&mut s, 120, 30);
    assert!(screen.contains(" · “package” · 3 reads "), "{screen}");
    assert!(
        screen.contains("/package   3 reads since all time"),
        "{screen}"
    );
}
