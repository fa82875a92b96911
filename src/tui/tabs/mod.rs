//! The tabs that are components: each is one file that owns its state, turns its keys into
//! actions, takes what the session loads for it and draws itself. A tab is registered by one
//! line in `register!` at the end of this file (which also declares its module), beside its
//! variant in [`Tab`]; its key bindings are rows of the key map (`keymap`).
//!
//! The current view (1) still lives in `App`, `list`, `timeline` and `draw`.

use super::app::{Action, Dialog, ExplainDialog, Focus, Toast, READ_ONLY};
use super::keymap::{Command, Context};
use super::list::Motion;
use super::rows::Cursor;
use super::text::thousands;
use super::worker::{Load, Reply};
use crate::model::Scope;
use crate::store::Store;
use anyhow::Result;
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::Frame;

/// The tabs, in the tab bar's order (its number is the key that opens it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Memories,
    Pending,
    Tombstones,
    Check,
    Reads,
}

impl Tab {
    pub const ALL: [Tab; 5] = [
        Tab::Memories,
        Tab::Pending,
        Tab::Tombstones,
        Tab::Check,
        Tab::Reads,
    ];
}

/// A tab: its state, its keys, what it loads and its drawing. Only the session calls `reload`,
/// `start`, `sync` and `take` (the loop's side); drawing only reads.
pub trait TabComponent {
    /// The tab bar's title after its number: `Tombstones (1)`.
    fn title(&self) -> String;
    /// The key-map context of the tab's own bindings (the list keys and the global ones follow).
    fn context(&self) -> Option<Context> {
        None
    }
    /// A key's command on this tab; `None` leaves it to the global handling.
    fn command(&mut self, _cmd: Command, _shell: &mut Shell<'_>) -> Option<Action> {
        None
    }
    /// Whether the tab has a detail pane beside its list (Tab switches between them).
    fn has_detail(&self) -> bool {
        true
    }
    /// The tab's list, when it shows one: the default motion and click move its cursor.
    fn list(&mut self) -> Option<&mut dyn Cursor> {
        None
    }
    /// Moves in the tab; `page` rows make a page.
    fn motion(&mut self, m: Motion, page: usize) {
        if let Some(list) = self.list() {
            list.step(m, page);
        }
    }
    /// A click on line `row` of the pane `pane`, `height` lines tall inside its border.
    fn click(&mut self, pane: Focus, row: usize, height: usize) {
        if let Some(list) = self.list().filter(|_| pane == Focus::List) {
            list.pick(row, height, 1);
        }
    }
    /// Loads what the tab lists: when a tab is shown and on every refresh.
    fn reload(&mut self, _store: &Store) -> Result<()> {
        Ok(())
    }
    /// Slow work for the workers when the tab is shown (or refreshed while shown).
    fn start(&mut self, _now: DateTime<Utc>) -> Option<Load> {
        None
    }
    /// Whether a refresh starts the tab's slow work even while another tab is shown.
    fn start_on_refresh(&self) -> bool {
        false
    }
    /// Loads what the selection shows and the tab does not have yet.
    fn sync(&mut self, _store: &Store) -> Result<()> {
        Ok(())
    }
    /// A worker's reply; the tab keeps what is its own. An error is a sentence to show.
    fn take(&mut self, _reply: &Reply) -> Result<(), String> {
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
    /// The line being typed, for the terminal's cursor.
    fn typed_line(&self) -> Option<&str> {
        None
    }
    /// What the status line shows on this tab (a toast goes first).
    fn status(&self) -> Status {
        Status::Filter
    }
    /// The value the selection holds, for `c`.
    fn copy_text(&self) -> Option<String> {
        None
    }
    fn draw(&self, frame: &mut Frame<'_>, body: Rect, view: &View);
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
    /// The tab's own line, or nothing.
    Own(Option<String>),
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
    /// Which pane of the tab has the focus.
    pub focus: &'a mut Focus,
    /// The frame's clock reading and the terminal's size.
    pub now: DateTime<Utc>,
    pub size: (u16, u16),
    pub dialogs: &'a mut Vec<Dialog>,
    pub toast: &'a mut Option<Toast>,
}

impl Shell<'_> {
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

    /// Curation keys on a read-only file explain themselves instead of failing later.
    pub fn writable(&mut self) -> bool {
        if self.read_only {
            self.error(READ_ONLY);
        }
        !self.read_only
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

/// Declares the component tabs, one line each: `Variant => module::Type` (the module is the
/// tab's file and its field in `Tabs`).
macro_rules! register {
    ($($tab:ident => $field:ident::$component:ident,)*) => {
        $(pub mod $field;)*

        /// The state of every component tab, one field each.
        #[derive(Default)]
        pub struct Tabs {
            $(pub $field: $field::$component,)*
        }

        impl Tabs {
            pub fn get(&self, tab: Tab) -> Option<&dyn TabComponent> {
                match tab {
                    $(Tab::$tab => Some(&self.$field),)*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            pub fn get_mut(&mut self, tab: Tab) -> Option<&mut dyn TabComponent> {
                match tab {
                    $(Tab::$tab => Some(&mut self.$field),)*
                    #[allow(unreachable_patterns)]
                    _ => None,
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

register! {
    Pending => pending::PendingTab,
    Tombstones => tombstones::TombstonesTab,
    Check => check::CheckTab,
    Reads => reads::ReadsTab,
}
