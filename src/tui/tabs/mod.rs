//! The tabs: each is one file that owns its state, turns its keys into actions, takes what
//! the session loads for it and draws itself. A tab is its module, declared below, and one
//! line in `register!` at the end of this file, which makes its variant of [`Tab`] (in the
//! tab bar's order) and its field in [`Tabs`]; its key bindings are rows of the key map
//! (`keymap`). docs/ARCHITECTURE-ui.md walks through adding one.

// Declared here, not by `register!`: rustfmt formats only the modules it can see.
pub mod check;
pub mod memories;
pub mod pending;
pub mod reads;
pub mod suspects;
pub mod tombstones;

use super::app::{refusal, Action, Dialog, ExplainDialog, Focus, Toast};
use super::keymap::{Command, Context};
use super::rows::Motion;
use super::rows::{Cursor, Rows};
use super::text::{input_field, one_line, thousands, width};
use super::timeline::Screen;
use super::worker::{Load, Reply};
use crate::model::Scope;
use crate::store::UiStore;
use anyhow::Result;
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::Frame;

/// A tab: its state, its keys, what it loads and its drawing. Only the session calls `reload`,
/// `start`, `sync` and `take` (the loop's side); drawing only reads.
pub trait TabComponent {
    /// The tab bar's title after its number: `Tombstones (1)`.
    fn title(&self) -> String;
    /// Shorter names for the tab bar, one for each narrower form (`Tombs`, `Tomb`): on a narrow
    /// terminal it takes the first form that holds every tab (README, "The terminal UI").
    fn short_names(&self) -> [&'static str; 3];
    /// The count its title shows after the name (0: none).
    fn title_count(&self) -> usize {
        0
    }
    /// The key-map contexts of the pane with `focus`, most specific first, where the pane has
    /// bindings of its own besides the tab's (`Tab::context`; the list keys and the global ones
    /// follow).
    fn contexts(&self, _focus: Focus) -> Vec<Context> {
        Vec::new()
    }
    /// A key's command on this tab; `None` leaves it to the global handling.
    fn command(&mut self, _cmd: Command, _shell: &mut Shell<'_>) -> Option<Action> {
        None
    }
    /// Whether the tab has a detail pane beside its list (Tab switches between them).
    fn has_detail(&self) -> bool {
        true
    }
    /// Whether `/` filters something on this tab (the footer offers it only then).
    fn has_filter(&self) -> bool {
        true
    }
    /// The tab's list, when it shows one: the default motion and click move its cursor.
    fn list(&mut self) -> Option<&mut dyn Cursor> {
        None
    }
    /// Moves in the pane `pane` of the tab (`shell.page` rows make a page).
    fn motion(&mut self, m: Motion, pane: Focus, shell: &mut Shell<'_>) -> Action {
        if let Some(list) = self.list() {
            // The detail pane focused (Tab) scrolls; the list keeps its selection.
            if pane == Focus::Detail {
                list.scroll_detail(m);
            } else {
                list.step(m, shell.page);
            }
        }
        Action::None
    }
    /// A click on line `row` of the pane `pane`, `height` lines tall inside its border.
    fn click(&mut self, pane: Focus, row: usize, height: usize, _shell: &mut Shell<'_>) -> Action {
        if let Some(list) = self.list().filter(|_| pane == Focus::List) {
            list.pick(row, height, 1);
        }
        Action::None
    }
    /// Loads what the tab lists: when a tab is shown and on every refresh.
    fn reload(&mut self, _store: &dyn UiStore, _env: &Env) -> Result<()> {
        Ok(())
    }
    /// `reload` failed (a row a raw client damaged): the tab drops what it held, so that no
    /// key acts on rows the screen no longer shows (README, "The terminal UI", Check).
    fn unload(&mut self) {}
    /// Slow work for the workers when the tab is shown (or refreshed while shown).
    fn start(&mut self, _now: DateTime<Utc>) -> Option<Load> {
        None
    }
    /// Whether a refresh starts the tab's slow work even while another tab is shown.
    fn start_on_refresh(&self) -> bool {
        false
    }
    /// Loads what the selection shows and the tab does not have yet.
    fn sync(&mut self, _store: &dyn UiStore, _env: &Env) -> Result<()> {
        Ok(())
    }
    /// A worker's reply; the tab keeps what is its own (and may load what it needs with it).
    /// An error is a sentence to show.
    fn take(&mut self, _reply: &Reply, _store: &dyn UiStore, _env: &Env) -> Result<(), String> {
        Ok(())
    }
    /// Whether a line of the tab is being typed: it takes every key (the `Filter` context).
    fn typing(&self) -> bool {
        false
    }
    /// A key while `typing`: its command in the `Filter` context and the character typed.
    fn typing_key(&mut self, _cmd: Option<Command>, _c: Option<char>) -> Action {
        Action::None
    }
    /// What the status line shows on this tab (a toast goes first).
    fn status(&self) -> Status {
        Status::Filter
    }
    /// The value the selection of pane `focus` holds, for `c`.
    fn copy_text(&self, _focus: Focus) -> Option<String> {
        None
    }
    fn draw(&self, frame: &mut Frame<'_>, body: Rect, view: &View);
}

/// What a key did to a filter line being typed.
pub enum LineEdit {
    /// Enter: typing ends, the line stays.
    Kept,
    /// Esc: typing ends, the line is empty.
    Cleared,
    /// A character typed or erased.
    Changed,
    Nothing,
}

/// A key in a filter line (`input`, typed while `editing`), as the `Filter` context binds it.
pub fn edit_line(
    input: &mut String,
    editing: &mut bool,
    cmd: Option<Command>,
    c: Option<char>,
) -> LineEdit {
    match cmd {
        Some(Command::KeepFilter) => {
            *editing = false;
            LineEdit::Kept
        }
        Some(Command::ClearFilter) => {
            *editing = false;
            input.clear();
            LineEdit::Cleared
        }
        Some(Command::Erase) => {
            super::text::erase_grapheme(input);
            LineEdit::Changed
        }
        _ => match c {
            Some(c) => {
                input.push(c);
                LineEdit::Changed
            }
            None => LineEdit::Nothing,
        },
    }
}

/// A tab bar title with its count: `Pending (2)`, or `Pending` when there are none.
pub fn counted(name: &str, n: usize) -> String {
    match n {
        0 => name.to_string(),
        n => format!("{name} ({})", thousands(n as i64)),
    }
}

/// The status line of a tab.
pub enum Status {
    /// The current view's filter line, while a filter is typed or applied.
    Filter,
    /// The tab's own filter line, while one is typed or applied.
    Query(QueryLine),
    /// The tab's own line, or nothing.
    Own(Option<String>),
}

/// A filter line: `/`, what is typed, how far the filter got (`3 of 15 memories match`), and
/// its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryLine {
    pub input: String,
    pub progress: String,
    /// The line is being typed (the terminal's cursor sits after the query).
    pub editing: bool,
}

/// The fewest columns a query is cut to before the line drops its key hint, then its count.
const QUERY_MIN: usize = 12;

impl QueryLine {
    fn hint(&self) -> &'static str {
        if self.editing {
            "  (Enter keep · Esc clear)"
        } else {
            "  (/ edit · Esc clear)"
        }
    }

    /// The line whole.
    pub fn text(&self) -> String {
        self.fit(usize::MAX).0
    }

    /// The line in at most `max` columns, and the column after the query (the cursor's). A
    /// query wider than the room shows its end — where typing happens — after `…`, and the
    /// count stays (found by review: a long query pushed what was typed, the count and the keys
    /// off the line): the keys go before the query is cut below [`QUERY_MIN`] columns, the
    /// count only when even that leaves the query no room.
    pub fn fit(&self, max: usize) -> (String, usize) {
        let query = one_line(&self.input);
        let tails = [
            format!("   {}{}", self.progress, self.hint()),
            format!("   {}", self.progress),
        ];
        let room = |tail: &str| max.saturating_sub(1 + width(tail));
        // Whole, with the keys, then without them.
        for tail in &tails {
            if width(&query) <= room(tail) {
                return (format!("/{query}{tail}"), 1 + width(&query));
            }
        }
        // Its end, with the keys, then without them, then alone.
        let alone = String::new();
        let tail = (tails.iter())
            .find(|t| room(t) >= QUERY_MIN)
            .unwrap_or(&alone);
        if room(tail) < 2 {
            return ("/".to_string(), 1);
        }
        let (shown, cursor) = input_field(&query, room(tail));
        let shown = if tail.is_empty() {
            shown.trim_end().to_string()
        } else {
            shown
        };
        (format!("/{shown}{tail}"), 1 + cursor)
    }
}

/// What the loop's side of a tab (loading, replies) needs besides the store.
pub struct Env {
    /// The clock's reading.
    pub now: DateTime<Utc>,
    /// The terminal's size and the rows of a page in the focused pane.
    pub size: (u16, u16),
    pub page: usize,
}

impl Env {
    pub fn screen(&self) -> Screen {
        Screen {
            size: self.size,
            now: self.now,
        }
    }
}

/// What a tab's drawing needs besides its own state.
pub struct View {
    /// The clock's reading for this frame.
    pub now: DateTime<Utc>,
    pub focus: Focus,
    /// No dialog is open: the focused pane's border is bold.
    pub focused: bool,
}

/// What a tab's key handling may do besides changing its own state: open a dialog, say
/// something in a toast.
pub struct Shell<'a> {
    pub read_only: bool,
    /// The database file was removed or replaced under the UI (`App::file_gone`).
    pub file_gone: bool,
    /// Which pane of the tab has the focus.
    pub focus: &'a mut Focus,
    /// The frame's clock reading, the terminal's size and the rows of a page in the pane the
    /// key moves in.
    pub now: DateTime<Utc>,
    pub size: (u16, u16),
    pub page: usize,
    pub dialogs: &'a mut Vec<Dialog>,
    pub toast: &'a mut Option<Toast>,
}

impl Shell<'_> {
    pub fn screen(&self) -> Screen {
        Screen {
            size: self.size,
            now: self.now,
        }
    }

    pub fn error(&mut self, text: impl Into<String>) {
        *self.toast = Some(Toast {
            text: text.into(),
            error: true,
        });
    }

    pub fn info(&mut self, text: impl Into<String>) {
        *self.toast = Some(Toast {
            text: text.into(),
            error: false,
        });
    }

    /// Curation keys on a read-only file, or on one removed or replaced under the UI,
    /// explain themselves instead of failing later.
    pub fn writable(&mut self) -> bool {
        match refusal(self.read_only, self.file_gone) {
            Some(why) => {
                self.error(why);
                false
            }
            None => true,
        }
    }

    /// The selected row of `rows` to curate; `None`, having said why, when the store is
    /// read-only or nothing is selected (`empty` says why the list is empty).
    pub fn curating<'r, T>(&mut self, rows: &'r Rows<T>, empty: &str) -> Option<&'r T> {
        if !self.writable() {
            return None;
        }
        let selected = rows.selected();
        if selected.is_none() {
            self.info(empty);
        }
        selected
    }

    pub fn open(&mut self, dialog: Dialog) {
        self.dialogs.push(dialog);
    }

    /// Opens the explain dialog on a subject and predicate, its fields filled from `scopes`.
    pub fn explain(&mut self, subject: &str, predicate: &str, scopes: &[Scope]) -> Action {
        let (dialog, action) = ExplainDialog::open(subject, predicate, scopes);
        self.dialogs.push(Dialog::Explain(dialog));
        action
    }
}

/// Declares the tabs, one line each in the tab bar's order: `Variant => module::Type` (the
/// module is the tab's file and its field in `Tabs`).
macro_rules! register {
    ($($tab:ident => $field:ident::$component:ident,)*) => {
        /// The tabs, in the tab bar's order (its number is the key that opens it).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Tab {
            $($tab,)*
        }

        impl Tab {
            pub const ALL: &'static [Tab] = &[$(Tab::$tab,)*];
        }

        /// The state of every component tab, one field each.
        #[derive(Default)]
        pub struct Tabs {
            $(pub $field: $field::$component,)*
        }

        impl Tabs {
            pub fn get(&self, tab: Tab) -> &dyn TabComponent {
                match tab {
                    $(Tab::$tab => &self.$field,)*
                }
            }

            pub fn get_mut(&mut self, tab: Tab) -> &mut dyn TabComponent {
                match tab {
                    $(Tab::$tab => &mut self.$field,)*
                }
            }

            /// The tab whose line is being typed, if any.
            pub fn typing(&self) -> Option<&dyn TabComponent> {
                [$(&self.$field as &dyn TabComponent,)*]
                    .into_iter()
                    .find(|c| c.typing())
            }

            pub fn all_mut(&mut self) -> Vec<&mut dyn TabComponent> {
                vec![$(&mut self.$field as &mut dyn TabComponent,)*]
            }
        }
    };
}

impl Tab {
    /// The key-map context of the tab's own bindings, on any of its panes.
    pub fn context(self) -> Option<Context> {
        match self {
            Tab::Memories => Some(Context::Memories),
            Tab::Pending => Some(Context::Pending),
            Tab::Tombstones => Some(Context::Tombstones),
            Tab::Check => None,
            Tab::Reads => Some(Context::Reads),
            Tab::Suspects => Some(Context::Suspects),
        }
    }
}

register! {
    Memories => memories::MemoriesTab,
    Pending => pending::PendingTab,
    Tombstones => tombstones::TombstonesTab,
    Check => check::CheckTab,
    Reads => reads::ReadsTab,
    Suspects => suspects::SuspectsTab,
}

#[cfg(test)]
mod tests {
    use super::QueryLine;
    use crate::tui::text::width;

    /// A long query shows its end and the cursor stands right after it; the count stays.
    #[test]
    fn a_long_query_line_keeps_its_end_the_cursor_and_the_count() {
        let q = QueryLine {
            input: format!("{}END", "长".repeat(60)),
            progress: "0 of 15 memories match".into(),
            editing: true,
        };
        assert!(!q.fit(200).0.contains('…'), "whole at 200 columns");
        for max in [40, 60, 80, 120] {
            let (line, cursor) = q.fit(max);
            assert!(width(&line) <= max, "{max}: {line}");
            assert!(line.starts_with("/…"), "{max}: {line}");
            let end = line.find("END").expect("the end") + "END".len();
            assert_eq!(cursor, width(&line[..end]), "{max}: {line}");
            assert!(line.contains("   0 of 15 memories match"), "{max}: {line}");
            assert_eq!(
                line.contains("(Enter keep · Esc clear)"),
                max >= 80,
                "{max}"
            );
        }
        // One that fits is whole, the keys after the count.
        let q = QueryLine {
            input: "npm".into(),
            ..q
        };
        assert_eq!(
            q.fit(80),
            (
                "/npm   0 of 15 memories match  (Enter keep · Esc clear)".to_string(),
                4
            )
        );
        // Narrower, the keys go before the query is cut.
        assert_eq!(q.fit(40).0, "/npm   0 of 15 memories match");
        // With no room beside the count, the query's end alone.
        let (line, cursor) = QueryLine {
            input: "长".repeat(30),
            ..q
        }
        .fit(20);
        assert!(line.starts_with("/…长") && width(&line) <= 20, "{line}");
        assert_eq!(cursor, width(&line), "{line}");
    }
}
