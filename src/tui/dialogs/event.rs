//! The event popup (`Enter` on a history event): the event whole — the user's words wrapped,
//! the value pretty-printed, source, causal_seq, times, detail — scrolling when it is longer
//! than the screen, and `c` copies the words.

use super::{centered, frame_box, Step};
use crate::model::{HistoryEvent, Identity};
use crate::tui::app::Action;
use crate::tui::clipboard;
use crate::tui::draw::{bold, dim, labelled};
use crate::tui::keymap::{Command, Context};
use crate::tui::tabs::Shell;
use crate::tui::text::{ago, full_time, one_line};
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// One event of a timeline, shown whole.
#[derive(Debug, Clone, PartialEq)]
pub struct EventDialog {
    pub identity: Identity,
    pub event: HistoryEvent,
    /// Lines scrolled off the top.
    pub scroll: usize,
}

/// Columns of the popup's labels (`causal_seq` and a space).
const LABEL: usize = 11;
/// The popup's widest box.
const WIDTH: u16 = 92;

impl EventDialog {
    /// What `c` copies: the user's words exactly as stored, else the value as stored.
    pub fn copy_text(&self) -> Option<String> {
        self.event
            .raw
            .clone()
            .or_else(|| self.event.value.as_ref().map(clipboard::value_text))
    }

    fn title(&self) -> String {
        let version = self
            .event
            .version
            .map(|v| format!(" v{v}"))
            .unwrap_or_default();
        one_line(&format!(
            "{}{version} · {}",
            self.event.event, self.identity
        ))
    }

    /// The popup's text at `max` columns, every stored text wrapped, never cut.
    pub fn lines(&self, now: DateTime<Utc>, max: usize) -> Vec<Line<'static>> {
        let e = &self.event;
        let plain = Style::new();
        let mut lines = Vec::new();
        let version = e.version.map(|v| format!(" · v{v}")).unwrap_or_default();
        lines.extend(labelled(
            "event",
            &format!("{}{version} · {}", e.event, e.scope),
            bold(),
            LABEL,
            max,
        ));
        lines.extend(labelled(
            "when",
            &format!("{} · {}", full_time(&e.at), ago(now, &e.at)),
            plain,
            LABEL,
            max,
        ));
        if e.event == "set" {
            let until = match &e.valid_until {
                Some(t) => format!("{} · {} (then replaced)", full_time(t), ago(now, t)),
                None => "still current".to_string(),
            };
            lines.extend(labelled("current", &until, plain, LABEL, max));
        }
        let source = e.source.as_deref().unwrap_or("none recorded");
        lines.extend(labelled("source", source, plain, LABEL, max));
        let seq = e
            .causal_seq
            .map_or("none recorded".to_string(), |s| s.to_string());
        lines.extend(labelled("causal_seq", &seq, plain, LABEL, max));
        lines.push(Line::raw(""));
        match &e.raw {
            Some(raw) => lines.extend(labelled("said", raw, plain, LABEL, max)),
            None => lines.extend(labelled("said", "(no words recorded)", dim(), LABEL, max)),
        }
        lines.push(Line::raw(""));
        let green = Style::new().fg(Color::Green);
        match &e.value {
            // A string is shown as its text; anything else as indented JSON.
            Some(serde_json::Value::String(s)) => {
                lines.extend(labelled("value", s, green, LABEL, max))
            }
            Some(v) => lines.extend(labelled("value", &pretty(v), green, LABEL, max)),
            None => lines.extend(labelled("value", "(no content kept)", dim(), LABEL, max)),
        }
        if let Some(d) = &e.detail {
            lines.push(Line::raw(""));
            lines.extend(labelled("detail", &pretty(d), plain, LABEL, max));
        }
        lines
    }

    /// Where the popup goes on a screen of `area`, and its text at that width.
    fn layout(&self, area: Rect, now: DateTime<Utc>) -> (Rect, Vec<Line<'static>>) {
        let w = area.width.min(WIDTH);
        let lines = self.lines(now, w.saturating_sub(2) as usize);
        // The header and footer stay in sight when there is room for them.
        let room = if area.height >= 20 {
            area.height - 2
        } else {
            area.height
        };
        let h = u16::try_from(lines.len() + 2)
            .unwrap_or(u16::MAX)
            .min(room)
            .max(8);
        (centered(area, w, h), lines)
    }

    /// The furthest it scrolls and a page, on a terminal of `size`.
    fn scroll_room(&self, size: (u16, u16), now: DateTime<Utc>) -> (usize, usize) {
        let (rect, lines) = self.layout(Rect::new(0, 0, size.0, size.1), now);
        let page = rect.height.saturating_sub(2).max(1) as usize;
        (lines.len().saturating_sub(page), page)
    }

    pub fn key(&mut self, cmd: Option<Command>, shell: &mut Shell<'_>) -> Step {
        let (room, page) = self.scroll_room(shell.size, shell.now);
        let copy = self.copy_text();
        let d = self;
        match cmd {
            Some(Command::Cancel) => return Step::Close(Action::None),
            Some(
                Command::Down
                | Command::Up
                | Command::PageDown
                | Command::PageUp
                | Command::Home
                | Command::End,
            ) => d.scroll = super::scrolled(d.scroll, cmd, room, page),
            Some(Command::Copy) => match copy {
                Some(text) => return Step::Stay(Action::Copy(text)),
                None => shell.info("this event keeps no words and no value to copy"),
            },
            _ => {}
        }
        Step::Stay(Action::None)
    }

    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect, now: DateTime<Utc>) {
        let d = self;
        let (rect, lines) = d.layout(area, now);
        let page = rect.height.saturating_sub(2) as usize;
        let scroll = d.scroll.min(lines.len().saturating_sub(page));
        let mut title = format!("Event · {}", d.title());
        if lines.len() > page {
            // Where the view is, first: a long title is cut at its end.
            title = format!(
                "lines {}–{} of {} · {title}",
                scroll + 1,
                (scroll + page).min(lines.len()),
                lines.len()
            );
        }
        let inner = frame_box(frame, rect, &title, Context::Event);
        let visible: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
        frame.render_widget(Paragraph::new(visible), inner);
    }
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}
