//! An error the user must read and dismiss.

use super::{centered, frame_box, Step};
use crate::tui::app::Action;
use crate::tui::keymap::{Command, Context};
use crate::tui::text::{one_line, width};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn key(cmd: Option<Command>) -> Step {
    match cmd {
        Some(Command::Cancel) => Step::Close(Action::None),
        _ => Step::Stay(Action::None),
    }
}

pub fn draw(frame: &mut Frame<'_>, area: Rect, title: &str, text: &str) {
    let w = (width(text) as u16 + 4).clamp(30, 80);
    let rect = centered(area, w, 7);
    let inner = frame_box(frame, rect, title, Context::Message);
    let paragraph = Paragraph::new(one_line(text))
        .style(Style::new())
        .wrap(ratatui::widgets::Wrap { trim: true });
    frame.render_widget(paragraph, inner);
}
