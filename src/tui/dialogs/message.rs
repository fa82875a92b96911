//! An error the user must read and dismiss.

use super::{centered, frame_box, Step};
use crate::tui::app::Action;
use crate::tui::keymap::{Command, Context};
use crate::tui::text::{one_line, truncate, width, wrap};
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn key(cmd: Option<Command>) -> Step {
    match cmd {
        Some(Command::Cancel) => Step::Close(Action::None),
        _ => Step::Stay(Action::None),
    }
}

/// The fewest rows the box takes, a short message included.
const MIN_HEIGHT: u16 = 7;

pub fn draw(frame: &mut Frame<'_>, area: Rect, title: &str, text: &str) {
    let w = (width(text) as u16 + 4).clamp(30, 80).min(area.width);
    let lines = wrap(&one_line(text), w.saturating_sub(2) as usize);
    // As tall as the message, up to the screen (found by review: a box of five rows cut a
    // long identity's message before its last words, what to do).
    let h = (lines.len() as u16).saturating_add(2).max(MIN_HEIGHT);
    let rect = centered(area, w, h);
    let inner = frame_box(frame, rect, title, Context::Message);
    let shown = fitted(lines, inner.height as usize, inner.width as usize);
    frame.render_widget(Paragraph::new(shown), inner);
}

/// `lines` in `rows`: all of them when they fit, else their start and their end — what
/// happened and what to do — with the cut marked `…` at the end of the start's last row.
fn fitted(lines: Vec<String>, rows: usize, max: usize) -> Vec<Line<'static>> {
    if lines.len() <= rows {
        return lines.into_iter().map(Line::raw).collect();
    }
    let head = rows / 2;
    let tail = rows - head;
    let mut shown: Vec<Line<'static>> = Vec::with_capacity(rows);
    for (i, l) in lines[..head].iter().enumerate() {
        if i + 1 == head {
            let cut = truncate(l, max.saturating_sub(1));
            shown.push(Line::raw(format!("{}…", cut.trim_end_matches('…'))));
        } else {
            shown.push(Line::raw(l.clone()));
        }
    }
    shown.extend(lines[lines.len() - tail..].iter().cloned().map(Line::raw));
    shown
}
