//! The header's narrowing order (README, "The terminal UI", Header): as the terminal narrows,
//! the path's folders give way first, then the time shortens, the counts take short labels,
//! the time goes, the product's name goes, the counts are cut and go; the file name and the
//! READ-ONLY badge go last (found by a tester: the code dropped the file name before the time
//! and the product's name, unlike the README).

use crate::support::tui::{render, Fixture};

/// What the header shows at one width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shown {
    folders: bool,
    long_time: bool,
    time: bool,
    long_labels: bool,
    product: bool,
    counts: bool,
    name: bool,
    badge: bool,
}

impl Shown {
    fn of(header: &str) -> Shown {
        Shown {
            folders: header.contains("/home/"),
            long_time: header.contains("refreshed 10:00:00 UTC"),
            time: header.contains("10:00:00"),
            long_labels: header.contains("identities"),
            product: header.contains("memscope"),
            counts: header.contains("15 id") && header.contains("1 tomb"),
            name: header.contains("记忆🦀.db"),
            badge: header.contains("READ-ONLY"),
        }
    }

    fn parts(self) -> [bool; 8] {
        [
            self.folders,
            self.long_time,
            self.time,
            self.long_labels,
            self.product,
            self.counts,
            self.name,
            self.badge,
        ]
    }
}

#[test]
fn the_header_gives_way_in_the_readmes_order_and_keeps_the_file_name_and_badge() {
    let f = Fixture::demo();
    let mut s = f.session(140, 30);
    s.app.name_database("/home/用户/项目/记忆🦀.db".into());
    s.app.read_only = true;
    let mut wider: Option<Shown> = None;
    for width in (14..=140u16).rev() {
        let screen = render(&mut s, width, 30);
        let header = screen.lines().next().unwrap().trim_matches('"').to_string();
        let shown = Shown::of(&header);
        let at = format!("at {width}: {header}");
        // Each part, once gone, stays gone as the terminal narrows (the folders too: found by
        // review, they came back in the room the time's short form left).
        if let Some(w) = wider {
            for (now, then) in shown.parts().into_iter().zip(w.parts()) {
                assert!(!now || then, "{at}: came back ({shown:?} after {w:?})");
            }
        }
        // The order in which they go.
        assert!(
            !shown.long_time || width < 140 || shown.folders,
            "{at}: the folders go first"
        );
        assert!(
            !shown.long_time || shown.long_labels,
            "{at}: the time shortens first"
        );
        assert!(
            !shown.long_labels || shown.time,
            "{at}: the labels shorten before the time goes"
        );
        assert!(
            !shown.time || shown.product,
            "{at}: the time goes before the product's name"
        );
        assert!(
            !shown.product || shown.counts,
            "{at}: the product's name before the counts"
        );
        assert!(
            !shown.counts || shown.name,
            "{at}: the counts before the file name"
        );
        assert!(shown.badge, "{at}: the badge stays");
        wider = Some(shown);
    }
    // At 80 columns the counts, the file name and the badge all show; at 60 the counts are
    // cut, after their first figures.
    let screen = render(&mut s, 80, 30);
    let header = Shown::of(screen.lines().next().unwrap());
    assert!(
        header.counts && header.name && header.badge,
        "at 80: {header:?}"
    );
    let screen = render(&mut s, 60, 30);
    let line = screen.lines().next().unwrap();
    let header = Shown::of(line);
    assert!(line.contains("1 susp · 15 ids"), "{line}");
    assert!(header.name && header.badge, "at 60: {line}");
    // At 40 the file name and the badge, the counts cut.
    let screen = render(&mut s, 40, 30);
    let header = screen.lines().next().unwrap();
    assert!(Shown::of(header).name && header.contains('…'), "{header}");
}

/// The first line of `s` drawn `width` columns wide.
fn header_at(s: &mut memscope::tui::Session, width: u16) -> String {
    let screen = render(s, width, 30);
    // The TestBackend quotes each row (and may add a note after it, with quotes of its own).
    let line = screen.lines().next().unwrap_or_default();
    let line = match line.split_once("\" Hidden by multi-width symbols") {
        Some((row, _)) => format!("{row}\""),
        None => line.to_string(),
    };
    let (_, quoted) = line.split_once('"').unwrap_or_default();
    let (row, _) = quoted.rsplit_once('"').unwrap_or_default();
    row.to_string()
}

/// Found by review: the path's folders left at one width came back at narrower ones, where the
/// time's short form or the counts' short labels left room. From the widest header down to one
/// column, every part — the folders, the file name whole, a long file name's columns — once
/// gone at a width stays gone at every narrower one, on a writable and on a read-only file.
#[test]
fn a_part_of_the_header_once_gone_stays_gone_at_every_narrower_width() {
    let f = Fixture::demo();
    let mut s = f.session(160, 30);
    let long = format!("{}.db", "很长的数据库名字🦀".repeat(3));
    for (path, name) in [
        (
            "/home/用户/项目/记忆🦀.db".to_string(),
            "记忆🦀.db".to_string(),
        ),
        (format!("/srv/团队/共享/{long}"), long.clone()),
    ] {
        for read_only in [false, true] {
            s.app.name_database(path.clone());
            s.app.read_only = read_only;
            let mut wider: Option<(Vec<(&str, bool)>, usize)> = None;
            for width in (1..=160u16).rev() {
                let header = header_at(&mut s, width);
                let parts = vec![
                    // A folder, or its `…`, before the name: `/home/…/记忆🦀.db`.
                    ("folders", header.contains(&format!("/{name}"))),
                    ("the long time", header.contains("refreshed")),
                    ("the time", header.contains("10:00:00")),
                    ("the long labels", header.contains("identities")),
                    ("the product's name", header.contains("memscope")),
                    ("the counts", header.contains("15 id")),
                    ("the file name whole", header.contains(name.as_str())),
                ];
                // How many of the file name's characters show (the rest cut with `…`).
                let name_chars = name.chars().filter(|c| header.contains(*c)).count();
                let at = format!("{path} (read-only: {read_only}) at {width}: {header}");
                if let Some((then, then_chars)) = &wider {
                    for ((part, now), (_, before)) in parts.iter().zip(then) {
                        assert!(!now || *before, "{at}: {part} came back");
                    }
                    assert!(name_chars <= *then_chars, "{at}: the file name grew back");
                }
                wider = Some((parts, name_chars));
            }
        }
    }
}

/// Found by review: at 8 columns the badge read `READ-O…`. It is never cut: whole with its
/// padding while it fits, then without it (9 columns), then as its short word (`R/O`, `GONE`);
/// narrower than that word the row is blank, never a piece of the badge.
#[test]
fn the_badge_is_never_cut() {
    let f = Fixture::demo();
    let mut s = f.session(140, 30);
    s.app.read_only = true;
    for (file_gone, whole, short) in [(false, "READ-ONLY", "R/O"), (true, "FILE GONE", "GONE")] {
        s.app.file_gone = file_gone;
        for width in (1..=140u16).rev() {
            let header = header_at(&mut s, width);
            let at = format!("at {width}: {header}");
            let words = header.split_whitespace().collect::<Vec<_>>().join(" ");
            if usize::from(width) >= whole.len() {
                assert!(header.contains(whole), "{at}: the badge whole");
            } else if usize::from(width) >= short.len() {
                assert_eq!(words, short, "{at}: the badge's short word, alone");
            } else {
                assert_eq!(words, "", "{at}: nothing narrower than the short word");
            }
            // `READ-O…`, `FILE G…`: a piece of the badge.
            assert!(
                !header.contains(&whole[..4]) || header.contains(whole),
                "{at}: a piece of the badge"
            );
        }
    }
}

/// Found by review: at 13 to 17 columns a read-only database's header read ` READ-ONLY  …`,
/// `…db` or `d….db` (and a writable one's, at 1 to 6, `d…o.db` down to `…`) — a file name cut
/// until it names nothing. The file name is shown whole or cut in its middle to 8 columns at
/// the fewest (`很…🦀.db`); with less room it is left out, and the header says what is left (the
/// badge, or nothing).
#[test]
fn a_file_name_is_never_cut_to_a_stub() {
    use memscope::tui::text::width;
    let f = Fixture::demo();
    let mut s = f.session(60, 30);
    let long = format!("{}.db", "很长的数据库名字🦀".repeat(3));
    for name in ["demo.db", "记忆🦀.db", long.as_str()] {
        s.app.name_database(format!("/home/用户/项目/{name}"));
        for read_only in [false, true] {
            s.app.read_only = read_only;
            for w in 1..=60u16 {
                let header = header_at(&mut s, w);
                let at = format!("{name} (read-only: {read_only}) at {w}: {header:?}");
                // Where the time shows, the name has its room; narrower, it is the last word.
                if header.contains("10:00:00") {
                    continue;
                }
                let last = header.split_whitespace().last().unwrap_or_default();
                if ["", "READ-ONLY", "R/O"].contains(&last) {
                    assert!(!header.contains(".db"), "{at}");
                    continue;
                }
                let (head, tail) = last.split_once('…').unwrap_or((last, ""));
                assert!(
                    last == name
                        || (width(last) >= 8
                            && !head.is_empty()
                            && name.starts_with(head)
                            && name.ends_with(tail)
                            && tail.ends_with(".db")),
                    "{at}: a stub of the file name"
                );
            }
        }
    }
    // The reviewer's widths: the badge alone.
    s.app.name_database("/home/someone/demo.db".into());
    s.app.read_only = true;
    for w in 13..=17u16 {
        let header = header_at(&mut s, w);
        let words: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(words, ["READ-ONLY"], "at {w}: {header:?}");
    }
    assert!(header_at(&mut s, 19).ends_with("READ-ONLY  demo.db"));
}

/// The tab bar keeps every tab's number at every width down to 18 columns: it takes shorter
/// names, then the numbers with their counts, then the numbers alone, rather than cut its end
/// (found by review: at 60 columns it read `… 4 Che…`, tab 6 `Suspects (1)` gone). A click on
/// a tab's label opens that tab at every width.
#[test]
fn the_tab_bar_shows_every_tab_number_at_every_width() {
    use crossterm::event::KeyModifiers;
    use crossterm::event::{Event, MouseButton, MouseEvent, MouseEventKind};
    use memscope::tui::Tab;
    let f = Fixture::demo();
    let mut s = f.session(120, 24);
    for w in 18..=130u16 {
        let screen = render(&mut s, w, 24);
        let bar = screen
            .lines()
            .nth(1)
            .expect("the tab bar")
            .trim_matches('"');
        assert!(!bar.contains('…'), "{w}: nothing cut: {bar}");
        let numbers: Vec<&str> = bar
            .split_whitespace()
            .filter(|t| t.len() == 1 && t.chars().all(|c| c.is_ascii_digit()))
            .collect();
        assert_eq!(numbers, ["1", "2", "3", "4", "5", "6"], "{w}: {bar}");
        if w >= 60 {
            assert!(bar.contains("6 Susp"), "{w}: the suspects' name: {bar}");
        }
        if w >= 90 {
            assert!(
                bar.contains("6 Suspects (1)") && bar.contains("1 Current view"),
                "{w}"
            );
        }
        // A click on each number opens its tab.
        for (n, tab) in ["1", "2", "3", "4", "5", "6"].iter().zip(Tab::ALL) {
            let x = bar
                .split(' ')
                .scan(0, |at, t| {
                    let here = *at;
                    *at += memscope::tui::text::width(t) + 1;
                    Some((here, t))
                })
                .find(|(_, t)| t == n)
                .map(|(x, _)| x)
                .expect("the number");
            let click = MouseEvent {
                kind: MouseEventKind::Down(MouseButton::Left),
                column: x as u16,
                row: 1,
                modifiers: KeyModifiers::NONE,
            };
            s.handle_event(Event::Mouse(click));
            assert_eq!(s.app.tab, *tab, "{w}: a click on {n}: {bar}");
        }
        s.handle_event(Event::Key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('1'),
            KeyModifiers::NONE,
        )));
    }
}
