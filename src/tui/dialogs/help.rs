//! The help overlay (`?`), generated from the key map.

use super::{centered, frame_box, Step};
use crate::tui::app::Action;
use crate::tui::draw::{bold, dim, part, row_line, wrapped};
use crate::tui::keymap::{self, Command, Context};
use crate::tui::text::{width, wrap};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

const INTRO: &str = "memscope inspects and curates the memory your coding agents share.";

/// The columns of the keys before each description.
const KEYS: usize = 16;

/// The help's box on a screen of `area`: as wide as its longest line, or the screen (found by
/// review: it stayed 84 columns wide and cut its lines even at 220), as tall as the screen but
/// the header and the footer.
fn help_box(area: Rect) -> Rect {
    let widest = (keymap::help_sections().iter())
        .flat_map(|(title, rows)| {
            let rows = rows.iter().map(|(_, help)| KEYS + width(help));
            rows.chain([width(title)])
        })
        .chain([width(INTRO)])
        .max()
        .unwrap_or(0);
    let h = area.height.saturating_sub(2).max(3);
    centered(area, u16::try_from(widest + 2).unwrap_or(u16::MAX), h)
}

/// The help's lines at `max` columns: a description longer than the box wraps under itself,
/// after its keys; a box too narrow for that puts it under them.
fn lines(max: usize) -> Vec<Line<'static>> {
    let mut lines = wrapped(INTRO, dim(), max);
    for (title, rows) in keymap::help_sections() {
        if rows.is_empty() {
            continue;
        }
        lines.push(Line::raw(""));
        lines.extend(wrapped(title, bold().fg(Color::Cyan), max));
        for (keys, help) in rows {
            let keys = format!("  {keys}");
            // Beside its keys when they leave the description room, else under them.
            let beside = max >= KEYS + 20 && width(&keys) < KEYS;
            let indent = if beside { KEYS } else { 4 };
            if !beside {
                lines.push(row_line(&[part(keys.clone(), bold())], &[], max));
            }
            for (i, l) in wrap(help, max.saturating_sub(indent))
                .into_iter()
                .enumerate()
            {
                let head = if i == 0 && beside {
                    format!("{keys:<KEYS$}")
                } else {
                    " ".repeat(indent)
                };
                lines.push(row_line(
                    &[part(head, bold()), part(l, Style::new())],
                    &[],
                    max,
                ));
            }
        }
    }
    lines
}

/// How far the help scrolls on a screen of `size`, and a page.
pub fn room(size: (u16, u16)) -> (usize, usize) {
    let rect = help_box(Rect::new(0, 0, size.0, size.1));
    let inner = (rect.width.saturating_sub(2), rect.height.saturating_sub(2));
    let page = usize::from(inner.1).max(1);
    (lines(usize::from(inner.0)).len().saturating_sub(page), page)
}

/// Scrolls by lines and pages, never past the last screen of text (`size`: the terminal's).
pub fn key(scroll: &mut usize, cmd: Option<Command>, size: (u16, u16)) -> Step {
    if cmd == Some(Command::Cancel) {
        return Step::Close(Action::None);
    }
    let (room, page) = room(size);
    *scroll = super::scrolled(*scroll, cmd, room, page);
    Step::Stay(Action::None)
}

pub fn draw(frame: &mut Frame<'_>, area: Rect, scroll: usize) {
    let rect = help_box(area);
    let inner = frame_box(frame, rect, "Keys", Context::Help);
    let lines = lines(inner.width as usize);
    let scroll = scroll.min(lines.len().saturating_sub(inner.height as usize));
    let lines: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
