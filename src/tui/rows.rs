//! The list every loaded list pane shares (the pending queue, the tombstones, the read log):
//! its rows, the cursor, the window on screen, a click on a row and the drawn lines. The
//! current view pages through the store instead and keeps its own window (`list`).

use super::app::{Focus, Tab};
use super::draw::{pane, plain, selected};
use super::layout;
use super::list::Motion;
use super::tabs::View;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use std::ops::{Deref, Range};

/// Loaded rows and the selected one.
#[derive(Debug, Clone)]
pub struct Rows<T> {
    items: Vec<T>,
    cursor: usize,
}

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Rows {
            items: Vec::new(),
            cursor: 0,
        }
    }
}

/// The slice of rows, so a list reads like one (`len`, `is_empty`, `[i]`, `iter`).
impl<T> Deref for Rows<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.items
    }
}

impl<T> Rows<T> {
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn selected(&self) -> Option<&T> {
        self.items.get(self.cursor)
    }

    /// New rows; the cursor stays on the same index, or the last row when the list shrank.
    pub fn set(&mut self, items: Vec<T>) {
        self.items = items;
        self.cursor = self.cursor.min(self.items.len().saturating_sub(1));
    }

    /// New rows; the row `same` as the selected one stays selected when it is still listed.
    pub fn set_keeping(&mut self, items: Vec<T>, same: impl Fn(&T, &T) -> bool) {
        let kept = self
            .selected()
            .and_then(|old| items.iter().position(|new| same(old, new)));
        self.cursor = kept.unwrap_or(self.cursor);
        self.set(items);
    }

    /// Moves the cursor; `page` rows make a page.
    pub fn step(&mut self, m: Motion, page: usize) {
        step(&mut self.cursor, self.items.len(), m, page);
    }

    /// Selects the row drawn on screen line `row` of a pane `height` lines tall, each row
    /// `per_row` lines (the window drawing uses).
    pub fn pick(&mut self, row: usize, height: usize, per_row: usize) {
        let shown = self.window(height / per_row.max(1));
        let index = shown.start + row / per_row.max(1);
        if shown.contains(&index) {
            self.cursor = index;
        }
    }

    /// The rows on screen in a pane `height` rows tall.
    pub fn window(&self, height: usize) -> Range<usize> {
        layout::window(self.items.len(), self.cursor, height)
    }

    /// The lines of the rows on screen, the selected one highlighted.
    pub fn lines(
        &self,
        height: usize,
        mut line: impl FnMut(&T) -> Line<'static>,
    ) -> Vec<Line<'static>> {
        self.window(height)
            .map(|i| {
                let l = line(&self.items[i]);
                if i == self.cursor {
                    l.style(selected())
                } else {
                    l
                }
            })
            .collect()
    }
}

/// The two panes of a list tab: the rows, and the selected row in detail.
pub struct ListPanes<'a> {
    pub tab: Tab,
    pub title: String,
    /// What the list pane says when there are no rows.
    pub empty: &'a [(&'a str, Style)],
    pub detail_title: &'a str,
}

impl<T> Rows<T> {
    /// Draws the list pane (a `row` line each, `max` columns) and the detail pane (the
    /// `detail` lines of the selected row), as the tab's layout places them.
    pub fn draw(
        &self,
        frame: &mut Frame<'_>,
        body: Rect,
        view: &View,
        panes: &ListPanes<'_>,
        row: impl Fn(&T, usize) -> Line<'static>,
        detail: impl Fn(&T, usize) -> Vec<Line<'static>>,
    ) {
        let areas = layout::panes(body, panes.tab, view.focus);
        let focused = |pane: Focus| view.focused && view.focus == pane;
        if let Some(area) = areas.list {
            let inner = pane(frame, area, &panes.title, focused(Focus::List));
            let max = inner.width as usize;
            let lines = if self.is_empty() {
                panes
                    .empty
                    .iter()
                    .map(|(text, style)| plain(text, *style, max))
                    .collect()
            } else {
                self.lines(inner.height as usize, |t| row(t, max))
            };
            frame.render_widget(Paragraph::new(lines), inner);
        }
        if let Some(area) = areas.detail {
            let inner = pane(frame, area, panes.detail_title, focused(Focus::Detail));
            let max = inner.width as usize;
            let lines = self.selected().map(|t| detail(t, max)).unwrap_or_default();
            frame.render_widget(Paragraph::new(lines), inner);
        }
    }
}

/// A list's moves, whatever its rows hold (what a tab's default keys and clicks drive).
pub trait Cursor {
    fn step(&mut self, m: Motion, page: usize);
    fn pick(&mut self, row: usize, height: usize, per_row: usize);
}

impl<T> Cursor for Rows<T> {
    fn step(&mut self, m: Motion, page: usize) {
        Rows::step(self, m, page);
    }

    fn pick(&mut self, row: usize, height: usize, per_row: usize) {
        Rows::pick(self, row, height, per_row);
    }
}

/// Moves `cursor` in `len` items (or lines of a scrolled pane) as `m` says.
pub fn step(cursor: &mut usize, len: usize, m: Motion, page: usize) {
    let last = len.saturating_sub(1);
    *cursor = match m {
        Motion::Up(n) => cursor.saturating_sub(n),
        Motion::Down(n) => (*cursor + n).min(last),
        Motion::PageUp => cursor.saturating_sub(page),
        Motion::PageDown => (*cursor + page).min(last),
        Motion::Home => 0,
        Motion::End => last,
    };
}
