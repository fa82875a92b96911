//! The one list component: rows, the cursor, the window on screen, a click on a row, the moves
//! and the drawn pane. Every list uses it. A loaded list (the pending queue, the tombstones, the
//! read log, the suspects) holds all its rows; the current view holds a window of a few pages of
//! a list that may have a million rows, filled from the store by its source (`list`), and says
//! with `at_start` and `at_end` whether more rows wait beyond the window.

use super::app::{Action, Focus, Tab};
use super::draw::{bold, dim, pane, plain, selected};
use super::keymap::Command;
use super::layout;
use super::tabs::{edit_line, LineEdit, QueryLine, Status, View};
use super::text::{one_line, plural, thousands, wrap};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use std::ops::{Deref, Range};

/// Cursor movements in a list (the same keys and wheel for every list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Motion {
    Up(usize),
    Down(usize),
    PageUp,
    PageDown,
    Home,
    End,
}

/// A row of a list. A group header stays on screen with a selection below it.
pub trait Row {
    fn is_header(&self) -> bool {
        false
    }
}

/// The rows a list holds, the selected one and the window on screen (indices into `rows`).
#[derive(Debug, Clone, PartialEq)]
pub struct Rows<T> {
    pub rows: Vec<T>,
    pub cursor: usize,
    /// The first row on screen (the window keeps it while the cursor stays in view).
    pub offset: usize,
    /// Whether `rows` starts where the list starts, and ends where it ends (a loaded list:
    /// both, once set).
    pub at_start: bool,
    pub at_end: bool,
    /// How far the detail pane beside the list is scrolled (its first line on screen); back
    /// to the top when the selection moves.
    pub detail_scroll: usize,
    /// The detail's last drawn length and height in lines: how far it can scroll.
    detail_extent: std::cell::Cell<(usize, usize)>,
}

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Rows {
            rows: Vec::new(),
            cursor: 0,
            offset: 0,
            at_start: false,
            at_end: false,
            detail_scroll: 0,
            detail_extent: std::cell::Cell::new((0, 0)),
        }
    }
}

/// The slice of rows, so a list reads like one (`len`, `is_empty`, `[i]`, `iter`).
impl<T> Deref for Rows<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.rows
    }
}

impl<T> Rows<T> {
    pub fn selected(&self) -> Option<&T> {
        self.rows.get(self.cursor)
    }

    /// The whole list, loaded; the cursor stays on the same index, or the last row when the
    /// list shrank.
    pub fn set(&mut self, rows: Vec<T>) {
        self.rows = rows;
        self.at_start = true;
        self.at_end = true;
        self.cursor = self.cursor.min(self.rows.len().saturating_sub(1));
    }

    /// The whole list, loaded; the row `same` as the selected one stays selected when it is
    /// still listed.
    pub fn set_keeping(&mut self, rows: Vec<T>, same: impl Fn(&T, &T) -> bool) {
        let kept = self
            .selected()
            .and_then(|old| rows.iter().position(|new| same(old, new)));
        self.cursor = kept.unwrap_or(self.cursor);
        self.set(rows);
    }

    /// The rows on screen in a pane `height` rows tall: from the offset, moved just enough to
    /// show the cursor.
    pub fn window(&self, height: usize) -> Range<usize> {
        let height = height.max(1);
        let start = self
            .offset
            .min(self.cursor)
            .max((self.cursor + 1).saturating_sub(height))
            .min(self.rows.len());
        start..(start + height).min(self.rows.len())
    }

    /// The row drawn on screen line `line` of a pane `height` lines tall, each row `per_row`
    /// lines (the window drawing uses).
    pub fn row_at(&self, line: usize, height: usize, per_row: usize) -> Option<usize> {
        let shown = self.window(height / per_row.max(1));
        let index = shown.start + line / per_row.max(1);
        shown.contains(&index).then_some(index)
    }

    /// The lines of the rows on screen (`per_row` lines each in a pane `height` lines tall),
    /// the selected one highlighted; `line` turns a row into its lines.
    pub fn lines(
        &self,
        height: usize,
        per_row: usize,
        mut line: impl FnMut(&T) -> Vec<Line<'static>>,
    ) -> Vec<Line<'static>> {
        let shown = self.window(height / per_row.max(1));
        let mut out = Vec::with_capacity(shown.len() * per_row);
        for i in shown {
            let lines = line(&self.rows[i]);
            if i == self.cursor {
                out.extend(lines.into_iter().map(|l| l.style(selected())));
            } else {
                out.extend(lines);
            }
        }
        out
    }

    /// Draws the list into a pane: its border and `title`, the rows on screen (`per_row(height)`
    /// lines each; `row` is given the rows on screen, the width and the lines a row, which a
    /// table sizes its columns by), or `empty`'s lines (given the width) when there are none.
    pub fn draw_pane<F: FnMut(&T) -> Vec<Line<'static>>>(
        &self,
        frame: &mut Frame<'_>,
        area: Rect,
        (title, focused): (&str, bool),
        per_row: fn(usize) -> usize,
        empty: impl FnOnce(usize) -> Vec<Line<'static>>,
        row: impl FnOnce(&[T], usize, usize) -> F,
    ) {
        let inner = pane(frame, area, title, focused);
        if inner.width == 0 || inner.height == 0 {
            return;
        }
        let max = inner.width as usize;
        let lines = if self.is_empty() {
            empty(max)
        } else {
            let height = inner.height as usize;
            let per_row = per_row(height);
            let line = row(
                &self.rows[self.window(height / per_row.max(1))],
                max,
                per_row,
            );
            self.lines(height, per_row, line)
        };
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

impl<T: Row> Rows<T> {
    /// Moves the cursor; `page` rows make a page (the rows on screen).
    pub fn step(&mut self, m: Motion, page: usize) {
        let was = self.cursor;
        step(&mut self.cursor, self.rows.len(), m, page);
        self.settle(page.max(1));
        if self.cursor != was {
            self.detail_scroll = 0;
        }
    }

    /// Scrolls the detail pane (its focus): no further than its last screen as last drawn.
    pub fn scroll_detail(&mut self, m: Motion) {
        let (lines, height) = self.detail_extent.get();
        let last = lines.saturating_sub(height);
        step(&mut self.detail_scroll, last + 1, m, height.max(1));
    }

    /// Selects the row drawn on screen line `line` of a pane `height` lines tall, each row
    /// `per_row` lines; the window stays where it is.
    pub fn pick(&mut self, line: usize, height: usize, per_row: usize) {
        if let Some(index) = self.row_at(line, height, per_row) {
            self.offset = self.window(height / per_row.max(1)).start;
            if self.cursor != index {
                self.detail_scroll = 0;
            }
            self.cursor = index;
        }
    }

    /// Keeps the cursor on a row and on a screen of `page` rows: the selection's group header
    /// stays on screen with it when both fit, and no blank rows show below the list's end
    /// while rows wait above.
    pub fn settle(&mut self, page: usize) {
        if self.rows.is_empty() {
            self.cursor = 0;
            self.offset = 0;
            return;
        }
        self.cursor = self.cursor.min(self.rows.len() - 1);
        if self.cursor < self.offset {
            self.offset = self.cursor;
        }
        if self.cursor >= self.offset + page {
            self.offset = self.cursor + 1 - page;
        }
        if let Some(h) = self.header_above(self.cursor, page) {
            self.offset = self.offset.min(h);
        }
        if self.at_end {
            self.offset = self.offset.min(self.rows.len().saturating_sub(page));
        }
    }

    /// The loaded header of the group holding row `at`, when it is less than `page` rows up.
    fn header_above(&self, at: usize, page: usize) -> Option<usize> {
        let from = at.saturating_sub(page - 1);
        (from..=at).rev().find(|&i| self.rows[i].is_header())
    }
}

/// The two panes of a list tab: the rows, and the selected row in detail.
pub struct ListPanes<'a, S: AsRef<str> = &'a str> {
    pub tab: Tab,
    pub title: String,
    /// What the list pane says when there are no rows (a filter's own lines are `String`s:
    /// [`ListFilter::empty_lines`]).
    pub empty: &'a [(S, Style)],
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
        panes: &ListPanes<'_, impl AsRef<str>>,
        row: impl Fn(&T, usize) -> Line<'static>,
        detail: impl Fn(&T, usize) -> Vec<Line<'static>>,
    ) {
        let areas = layout::panes(body, panes.tab, view.focus);
        let focused = |pane: Focus| view.focused && view.focus == pane;
        if let Some(area) = areas.list {
            self.draw_pane(
                frame,
                area,
                (&panes.title, focused(Focus::List)),
                |_| 1,
                |max| wrapped_lines(panes.empty, max),
                |_, max, _| move |t| vec![row(t, max)],
            );
        }
        if let Some(area) = areas.detail {
            let inner = pane(frame, area, panes.detail_title, focused(Focus::Detail));
            let max = inner.width as usize;
            let lines = self.selected().map(|t| detail(t, max)).unwrap_or_default();
            let height = inner.height as usize;
            self.detail_extent.set((lines.len(), height));
            // Scrolled (Tab, then j/k, PgDn, End): no further than the last screen.
            let skip = self.detail_scroll.min(lines.len().saturating_sub(height));
            let lines: Vec<Line<'static>> = lines.into_iter().skip(skip).collect();
            frame.render_widget(Paragraph::new(lines), inner);
        }
    }
}

/// Lines of styled text wrapped to `max` columns, each line's leading spaces indenting all
/// of its rows (found by review: an empty list's sentences were cut, `… point at one pla…`).
pub fn wrapped_lines(text: &[(impl AsRef<str>, Style)], max: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for (t, style) in text {
        let t = t.as_ref();
        let body = t.trim_start_matches(' ');
        let lead = (t.len() - body.len()).min(max / 2);
        for l in wrap(body, max.saturating_sub(lead)) {
            lines.push(plain(&format!("{}{l}", " ".repeat(lead)), *style, max));
        }
    }
    lines
}

/// A list's moves, whatever its rows hold (what a tab's default keys and clicks drive).
pub trait Cursor {
    fn step(&mut self, m: Motion, page: usize);
    fn pick(&mut self, line: usize, height: usize, per_row: usize);
    /// Scrolls the detail pane beside the list, when there is one.
    fn scroll_detail(&mut self, _m: Motion) {}
}

impl<T: Row> Cursor for Rows<T> {
    fn step(&mut self, m: Motion, page: usize) {
        Rows::step(self, m, page);
    }
    fn scroll_detail(&mut self, m: Motion) {
        Rows::scroll_detail(self, m);
    }

    fn pick(&mut self, line: usize, height: usize, per_row: usize) {
        Rows::pick(self, line, height, per_row);
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

/// A row a loaded list's filter line narrows: the fields `/` matches in, and whether a row of
/// a new load is the same one (it stays selected).
pub trait Filtered: Row + Clone {
    fn fields(&self) -> Vec<String>;
    fn same(&self, other: &Self) -> bool;
}

/// A list tab's share of [`TabComponent`](super::tabs::TabComponent) that its filter line
/// (`$filter`, a [`ListFilter`] narrowing `$rows`) answers: whether a line is typed, a key typed
/// into it, the line for the cursor and the status line counting `$noun`. Each such tab says it
/// once, in its `impl TabComponent`; `/` and `Esc` go to [`ListFilter::command`].
macro_rules! filter_line {
    ($filter:ident narrows $rows:ident, $noun:expr) => {
        fn typing(&self) -> bool {
            self.$filter.editing
        }

        fn typing_key(
            &mut self,
            cmd: Option<$crate::tui::keymap::Command>,
            c: Option<char>,
        ) -> $crate::tui::app::Action {
            self.$filter.key(&mut self.$rows, cmd, c)
        }

        fn status(&self) -> $crate::tui::tabs::Status {
            self.$filter.status(self.$rows.len(), $noun)
        }
    };
}
pub(crate) use filter_line;

/// A loaded list's filter line (`/` on the pending queue, the tombstones and the suspects):
/// what is typed, and every row the store gave; the list's `Rows` hold those the line matches,
/// fuzzily as the current view's filter matches (`fuzzy::Pattern`: the query's characters in
/// order, smart case).
#[derive(Debug, Clone)]
pub struct ListFilter<T> {
    pub input: String,
    pub editing: bool,
    all: Vec<T>,
    /// The store gave the rows (`load`); a list that could not be read counts none.
    loaded: bool,
}

impl<T> Default for ListFilter<T> {
    fn default() -> Self {
        ListFilter {
            input: String::new(),
            editing: false,
            loaded: false,
            all: Vec::new(),
        }
    }
}

impl<T: Filtered> ListFilter<T> {
    /// Every row the store gave, whatever the filter shows.
    pub fn all(&self) -> &[T] {
        &self.all
    }

    /// Whether a filter is typed or applied (it narrows the list).
    pub fn active(&self) -> bool {
        !self.input.is_empty()
    }

    /// How many rows are loaded, shown or not.
    pub fn total(&self) -> usize {
        self.all.len()
    }

    /// The store's rows: `rows` holds those the line matches, the selected one kept.
    pub fn load(&mut self, rows: &mut Rows<T>, all: Vec<T>) {
        self.all = all;
        self.loaded = true;
        self.narrow(rows);
    }

    /// The list could not be read (or was let go): no rows, and no count claimed for them —
    /// the line says `not loaded`, not `0 of 0 match`.
    pub fn unload(&mut self, rows: &mut Rows<T>) {
        self.all = Vec::new();
        self.loaded = false;
        self.narrow(rows);
    }

    fn narrow(&self, rows: &mut Rows<T>) {
        let shown: Vec<T> = if self.active() {
            let pattern = super::fuzzy::Pattern::new(&self.input);
            (self.all.iter())
                .filter(|row| {
                    let fields = row.fields();
                    let parts: Vec<&str> = fields.iter().map(String::as_str).collect();
                    pattern.matches_joined(&parts)
                })
                .cloned()
                .collect()
        } else {
            self.all.clone()
        };
        rows.set_keeping(shown, T::same);
    }

    /// A key typed into the line (the `Filter` context's command and the character typed).
    pub fn key(&mut self, rows: &mut Rows<T>, cmd: Option<Command>, c: Option<char>) -> Action {
        match edit_line(&mut self.input, &mut self.editing, cmd, c) {
            LineEdit::Cleared | LineEdit::Changed => self.narrow(rows),
            LineEdit::Kept | LineEdit::Nothing => {}
        }
        Action::None
    }

    /// `/` and `Esc` on the tab's list (README, "The terminal UI": `/` filters the list of the
    /// tab it is pressed in): `/` starts typing, `Esc` on the list clears an applied filter;
    /// `None` leaves the key to the tab and the global handling.
    pub fn command(
        &mut self,
        rows: &mut Rows<T>,
        cmd: Command,
        focus: &mut Focus,
    ) -> Option<Action> {
        match cmd {
            Command::Filter => {
                self.editing = true;
                *focus = Focus::List;
                Some(Action::None)
            }
            Command::Back if *focus == Focus::List && self.clear(rows) => Some(Action::None),
            _ => None,
        }
    }

    /// `Esc` on the list: the applied filter goes (false when there was none).
    pub fn clear(&mut self, rows: &mut Rows<T>) -> bool {
        if !self.active() {
            return false;
        }
        self.input.clear();
        self.narrow(rows);
        true
    }

    /// The filter line: what is typed, how many of the rows match, the keys.
    pub fn status(&self, shown: usize, noun: (&str, &str)) -> Status {
        if !(self.editing || self.active()) {
            return Status::Own(None);
        }
        let progress = if self.active() && !self.loaded {
            "not loaded".to_string()
        } else if self.active() {
            format!(
                "{} of {} match",
                thousands(shown as i64),
                plural(self.total() as i64, noun.0, noun.1)
            )
        } else {
            "type to filter".to_string()
        };
        Status::Query(QueryLine {
            input: self.input.clone(),
            progress,
            editing: self.editing,
        })
    }

    /// A pane title's count: `3`, or `1 of 3 · “npm”` while the filter narrows the list.
    pub fn count(&self, shown: usize) -> String {
        if self.active() {
            format!(
                "{} of {} · “{}”",
                thousands(shown as i64),
                thousands(self.total() as i64),
                one_line(&self.input)
            )
        } else {
            thousands(self.total() as i64)
        }
    }

    /// Why the list shows no row: `empty` (the list holds none), or that none matches.
    pub fn why_empty(&self, empty: &str) -> String {
        if self.active() && self.total() > 0 {
            format!(
                "no row matches the filter “{}”: Esc clears it",
                one_line(&self.input)
            )
        } else {
            empty.to_string()
        }
    }

    /// What the list pane says when it shows no row: that none matches when the filter hides
    /// them all, else `empty` (the list holds none).
    pub fn empty_lines(&self, empty: &[(&str, Style)]) -> Vec<(String, Style)> {
        if self.active() && self.total() > 0 {
            return vec![
                (format!("No row matches “{}”.", self.input), bold()),
                ("Esc clears the filter.".to_string(), dim()),
            ];
        }
        (empty.iter())
            .map(|&(text, style)| (text.to_string(), style))
            .collect()
    }
}

#[cfg(test)]
mod list_filter_tests {
    use super::{Filtered, ListFilter, Row, Rows};
    use crate::tui::tabs::Status;

    #[derive(Debug, Clone, PartialEq)]
    struct Word(&'static str);
    impl Row for Word {}
    impl Filtered for Word {
        fn fields(&self) -> Vec<String> {
            vec![self.0.to_string()]
        }
        fn same(&self, other: &Self) -> bool {
            self == other
        }
    }

    fn line(f: &ListFilter<Word>, rows: &Rows<Word>) -> String {
        match f.status(rows.len(), ("suspect", "suspects")) {
            Status::Query(line) => line.text(),
            _ => panic!("no line of its own"),
        }
    }

    /// Found by the UI's helper: after a failed scan, a typed filter said `0 of 0 suspects
    /// match` — a count of a list that could not be read.
    #[test]
    fn a_list_that_could_not_be_read_counts_nothing() {
        let (mut f, mut rows) = (ListFilter::<Word>::default(), Rows::default());
        f.load(&mut rows, vec![Word("npm 🚀"), Word("pnpm")]);
        f.input = "npm".into();
        f.load(&mut rows, vec![Word("npm 🚀"), Word("pnpm")]);
        assert!(
            line(&f, &rows).contains("2 of 2 suspects match"),
            "{}",
            line(&f, &rows)
        );
        f.unload(&mut rows);
        assert!(rows.is_empty());
        let said = line(&f, &rows);
        assert!(said.starts_with("/npm   not loaded"), "{said}");
        assert!(!said.contains("0 of"), "{said}");
        f.load(&mut rows, Vec::new());
        assert!(line(&f, &rows).contains("0 of 0 suspects match"));
    }
}
