//! The history pane's event cursor: `j`/`k` select a timeline event when the history pane has
//! the focus, `Enter` opens it whole in the event popup (`dialogs::event`).

use super::app::{Action, App, Dialog, Focus, Tab};
use super::clipboard;
use super::dialogs::EventDialog;
use super::layout;
use super::list::Motion;
use ratatui::layout::Rect;
use std::ops::Range;

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
}
