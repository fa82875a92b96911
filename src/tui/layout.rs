//! Where things go on screen, shared by drawing and by key handling (a page is as tall as the
//! list on screen). Every size down to 1×1 gets a layout; small screens drop chrome first.

use super::app::{Focus, Tab};
use ratatui::layout::Rect;
use std::ops::Range;

pub struct Screen {
    pub header: Option<Rect>,
    pub tabs: Option<Rect>,
    pub body: Rect,
    /// The filter line or a toast; on short screens they take the footer's place.
    pub status: Option<Rect>,
    pub footer: Option<Rect>,
}

fn row(area: Rect, y: u16) -> Rect {
    Rect::new(area.x, area.y + y, area.width, 1)
}

pub fn screen(area: Rect) -> Screen {
    let h = area.height;
    if h >= 8 {
        Screen {
            header: Some(row(area, 0)),
            tabs: Some(row(area, 1)),
            body: Rect::new(area.x, area.y + 2, area.width, h - 4),
            status: Some(row(area, h - 2)),
            footer: Some(row(area, h - 1)),
        }
    } else if h >= 4 {
        Screen {
            header: Some(row(area, 0)),
            tabs: None,
            body: Rect::new(area.x, area.y + 1, area.width, h - 2),
            status: None,
            footer: Some(row(area, h - 1)),
        }
    } else if h >= 2 {
        Screen {
            header: None,
            tabs: None,
            body: Rect::new(area.x, area.y, area.width, h - 1),
            status: None,
            footer: Some(row(area, h - 1)),
        }
    } else {
        Screen {
            header: None,
            tabs: None,
            body: area,
            status: None,
            footer: None,
        }
    }
}

/// Panes get a border only when there is room for one and some content.
pub fn bordered(area: Rect) -> bool {
    area.width >= 20 && area.height >= 5
}

pub fn inner(area: Rect) -> Rect {
    if bordered(area) {
        Rect::new(
            area.x + 1,
            area.y + 1,
            area.width.saturating_sub(2),
            area.height.saturating_sub(2),
        )
    } else {
        area
    }
}

/// The list and the detail pane of a tab: side by side when wide, one at a time when narrow.
pub struct Panes {
    pub list: Option<Rect>,
    pub detail: Option<Rect>,
}

pub fn panes(body: Rect, tab: Tab, focus: Focus) -> Panes {
    match tab {
        Tab::Check => Panes {
            list: Some(body),
            detail: None,
        },
        // A read is a long line: the list takes the width, the read's detail goes below.
        Tab::Reads => split(body, focus, 150, body.width * 3 / 5, Some(body.height / 2)),
        Tab::Memories => split(body, focus, 100, body.width / 2, None),
        // A list with its detail (pending, tombstones).
        _ => split(
            body,
            focus,
            90,
            body.width * 11 / 20,
            Some(body.height * 2 / 5),
        ),
    }
}

/// Side by side from `wide` columns, the list `left` columns wide; else, from 16 rows and
/// when `top` is given, the list `top` rows tall above the detail; else the focused pane.
fn split(body: Rect, focus: Focus, wide: u16, left: u16, top: Option<u16>) -> Panes {
    if body.width >= wide {
        Panes {
            list: Some(Rect::new(body.x, body.y, left, body.height)),
            detail: Some(Rect::new(
                body.x + left,
                body.y,
                body.width - left,
                body.height,
            )),
        }
    } else if let Some(top) = top.filter(|_| body.height >= 16) {
        Panes {
            list: Some(Rect::new(body.x, body.y, body.width, top)),
            detail: Some(Rect::new(
                body.x,
                body.y + top,
                body.width,
                body.height - top,
            )),
        }
    } else if focus == Focus::Detail {
        Panes {
            list: None,
            detail: Some(body),
        }
    } else {
        Panes {
            list: Some(body),
            detail: None,
        }
    }
}

/// Screen lines per read in the Reads list: two (the note below) when the list has room.
pub fn read_lines(list_height: usize) -> usize {
    if list_height >= 6 {
        2
    } else {
        1
    }
}

/// Items of the focused list (or lines of a scrolled pane) on a terminal of `size`: one page.
pub fn page(size: (u16, u16), tab: Tab, focus: Focus) -> usize {
    let s = screen(Rect::new(0, 0, size.0, size.1));
    let p = panes(s.body, tab, focus);
    let area = match focus {
        Focus::List => p.list.or(p.detail),
        Focus::Detail => p.detail.or(p.list),
    };
    let lines = area.map(|a| inner(a).height as usize).unwrap_or(1).max(1);
    if tab == Tab::Reads && focus == Focus::List {
        (lines / read_lines(lines)).max(1)
    } else {
        lines
    }
}

/// The items of a list of `len` on screen in a pane `height` rows tall: the cursor's row is
/// the last one when it is below the first screenful.
pub fn window(len: usize, cursor: usize, height: usize) -> Range<usize> {
    let height = height.max(1);
    let start = (cursor + 1).saturating_sub(height);
    start..(start + height).min(len)
}
