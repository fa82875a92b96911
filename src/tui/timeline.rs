//! The history pane's event cursor and the event popup: `j`/`k` select a timeline event when
//! the history pane has the focus, `Enter` shows it whole — the user's words wrapped, the
//! value pretty-printed, source, causal_seq, times, detail — scrolling when it is longer than
//! the screen, and `c` copies the words. State, keys and drawing of the popup live here.

use super::app::{Action, App, Dialog, Focus, Tab};
use super::clipboard;
use super::draw::{bold, centered, dim, frame_box, labelled};
use super::keymap::{Command, Context};
use super::layout;
use super::list::Motion;
use super::text::{ago, full_time, one_line};
use crate::model::{HistoryEvent, Identity};
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use std::ops::Range;

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
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

pub fn draw(frame: &mut Frame<'_>, area: Rect, d: &EventDialog, app: &App) {
    let (rect, lines) = d.layout(area, app.now);
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
    let inner = frame_box(frame, rect, &title, Context::Event, bold().fg(Color::Cyan));
    let visible: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Paragraph::new(visible), inner);
}

impl App {
    /// The history pane's geometry: each event's lines, all lines, the pane's height.
    fn history_geometry(&self) -> Option<(Vec<Range<usize>>, usize, usize)> {
        let d = self.detail.as_ref()?;
        let s = layout::screen(Rect::new(0, 0, self.size.0, self.size.1));
        let area = layout::panes(s.body, Tab::Memories, Focus::Detail).detail?;
        let inner = layout::inner(area);
        let (lines, events) = super::draw::history_lines(d, self, inner.width as usize);
        Some((events, lines.len(), (inner.height as usize).max(1)))
    }

    /// Scrolls the history pane so the selected event is on screen: the top for the first
    /// event (the value and words above it), as far down as it goes for the last (the scopes
    /// below it), else as little as it takes.
    pub(super) fn follow_event(&mut self) {
        let Some((events, total, height)) = self.history_geometry() else {
            return;
        };
        let last = events.len().saturating_sub(1);
        self.event_cursor = self.event_cursor.min(last);
        let Some(r) = events.get(self.event_cursor) else {
            return;
        };
        let wanted = if self.event_cursor == 0 {
            0
        } else if self.event_cursor == last {
            total
        } else {
            self.detail_scroll
        };
        let lo = r.end.saturating_sub(height);
        let hi = r.start.max(lo);
        self.detail_scroll = wanted.clamp(lo, hi).min(total.saturating_sub(height));
    }

    /// A new timeline on screen: the cursor on the version an agent read, else the first.
    pub(crate) fn reset_event_cursor(&mut self) {
        let marked = match (&self.mark, &self.detail) {
            (Some(m), Some(d)) if m.identity == d.identity => d
                .history
                .iter()
                .position(|e| e.event == "set" && e.version == Some(m.version)),
            _ => None,
        };
        self.event_cursor = marked.unwrap_or(0);
        self.detail_scroll = 0;
        self.follow_event();
    }

    pub(super) fn move_event(&mut self, m: Motion) {
        let len = self.detail.as_ref().map_or(0, |d| d.history.len());
        let last = len.saturating_sub(1);
        let page = self.page();
        let c = self.event_cursor;
        self.event_cursor = match m {
            Motion::Up(n) => c.saturating_sub(n),
            Motion::Down(n) => c.saturating_add(n).min(last),
            Motion::PageUp => c.saturating_sub(page),
            Motion::PageDown => c.saturating_add(page).min(last),
            Motion::Home => 0,
            Motion::End => last,
        };
        self.follow_event();
    }

    /// The event drawn on line `row` of the history pane (counted from its top on screen).
    pub(super) fn event_on_row(&self, row: usize) -> Option<usize> {
        let (events, _, _) = self.history_geometry()?;
        let line = self.detail_scroll + row;
        events.iter().position(|r| r.contains(&line))
    }

    pub(super) fn open_event(&mut self) -> Action {
        let event = self.detail.as_ref().and_then(|d| {
            Some((
                d.identity.clone(),
                d.history.get(self.event_cursor)?.clone(),
            ))
        });
        match event {
            Some((identity, event)) => self.dialogs.push(Dialog::Event(EventDialog {
                identity,
                event,
                scroll: 0,
            })),
            None => self.info("select a record: its timeline's events open here"),
        }
        Action::None
    }

    /// The selected event's value, as `c` in the history pane copies it.
    pub(super) fn event_value(&self) -> Option<String> {
        let d = self.detail.as_ref()?;
        let e = d.history.get(self.event_cursor)?;
        e.value.as_ref().map(clipboard::value_text)
    }

    /// A key in the event popup.
    pub(super) fn event_key(&mut self, cmd: Option<Command>) -> Action {
        let Some(Dialog::Event(d)) = self.dialogs.last() else {
            return Action::None;
        };
        let (room, page) = d.scroll_room(self.size, self.now);
        let copy = d.copy_text();
        let Some(Dialog::Event(d)) = self.dialogs.last_mut() else {
            return Action::None;
        };
        match cmd {
            Some(Command::Cancel) => {
                self.dialogs.pop();
            }
            Some(Command::Down) => d.scroll = (d.scroll + 1).min(room),
            Some(Command::Up) => d.scroll = d.scroll.min(room).saturating_sub(1),
            Some(Command::PageDown) => d.scroll = (d.scroll + page).min(room),
            Some(Command::PageUp) => d.scroll = d.scroll.min(room).saturating_sub(page),
            Some(Command::Copy) => match copy {
                Some(text) => return Action::Copy(text),
                None => self.info("this event keeps no words and no value to copy"),
            },
            _ => {}
        }
        Action::None
    }
}
