//! The help overlay (`?`), generated from the key map.

use super::{centered, frame_box, Step};
use crate::tui::app::Action;
use crate::tui::draw::{bold, dim, part, plain, row_line};
use crate::tui::keymap::{self, Command, Context};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// The help's box on a terminal of `height` rows, and the lines of text it shows at once.
fn box_height(height: u16) -> (u16, usize) {
    let h = height.saturating_sub(2).max(3);
    (h, h.saturating_sub(2).max(1) as usize)
}

/// Scrolls by lines and pages, never past the last screen of text (`size`: the terminal's).
pub fn key(scroll: &mut usize, cmd: Option<Command>, size: (u16, u16)) -> Step {
    if cmd == Some(Command::Cancel) {
        return Step::Close(Action::None);
    }
    let (_, page) = box_height(size.1);
    let room = keymap::help_lines().saturating_sub(page);
    *scroll = super::scrolled(*scroll, cmd, room, page);
    Step::Stay(Action::None)
}

pub fn draw(frame: &mut Frame<'_>, area: Rect, scroll: usize) {
    let rect = centered(area, 84, box_height(area.height).0);
    let inner = frame_box(frame, rect, "Keys", Context::Help);
    let max = inner.width as usize;
    let mut lines: Vec<Line<'static>> = vec![plain(
        "memscope inspects and curates the memory your coding agents share.",
        dim(),
        max,
    )];
    for (title, rows) in keymap::help_sections() {
        if rows.is_empty() {
            continue;
        }
        lines.push(Line::raw(""));
        lines.push(plain(title, bold().fg(Color::Cyan), max));
        for (keys, help) in rows {
            lines.push(row_line(
                &[
                    part(format!("  {keys:<14}"), bold()),
                    part(help, Style::new()),
                ],
                &[],
                max,
            ));
        }
    }
    let scroll = scroll.min(lines.len().saturating_sub(inner.height as usize));
    let lines: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
