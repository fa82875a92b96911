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
        // Each part, once gone, stays gone as the terminal narrows — but the folders, which
        // take the room the time's long form leaves.
        if let Some(w) = wider {
            for (now, then) in shown.parts().into_iter().zip(w.parts()).skip(1) {
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
