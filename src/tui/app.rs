//! The UI state and its key handling. A key becomes a command through the key map; a command
//! becomes a change of state plus an [`Action`] that the loop performs (queries, writes). The
//! focused dialog gets the key first. Nothing here touches the store.

use super::dialogs::Step;
use super::incident::TimelineMark;
use super::keymap::{self, Command, Context};
use super::list::{FilterResults, ListItem, MemoryList, Motion};
use super::tabs::{Shell, Tabs};
use super::worker::HeaderCounts;
use crate::model::{DeleteTarget, HistoryEvent, Identity, MemoryRecord, Resolution, Scope};
use crate::store::Clock;
use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::collections::{BTreeSet, HashMap};

pub use super::dialogs::{
    ConfirmDialog, DeleteDialog, Dialog, ExplainDialog, ExplainField, ExplainQuery,
};
pub use super::tabs::check::CheckState;
pub use super::tabs::pending::{Choice, PendingPreview};
pub use super::tabs::Tab;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    List,
    Detail,
}

/// A change to memory that a human asked for; the loop runs it through the store's own write
/// paths (delete, restore, resolve_pending, reject_pending, rescope, revert).
#[derive(Debug, Clone, PartialEq)]
pub enum Curation {
    Delete(DeleteTarget),
    Restore(Identity),
    Resolve {
        pending_id: i64,
        scope: Scope,
    },
    Reject {
        pending_id: i64,
    },
    /// Move the current value of `identity` into `to`; its scope goes back a version.
    Rescope {
        identity: Identity,
        to: Scope,
    },
    /// Make the value of `to_version` current again, as a new version.
    Revert {
        identity: Identity,
        to_version: i64,
    },
}

/// What the loop must do after a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    None,
    Quit,
    /// Move in the current view (pages through the store).
    Move(Motion),
    Fold {
        scope: String,
        folded: bool,
    },
    /// Run the fuzzy filter (an empty query clears it).
    Filter(String),
    /// A tab was opened: load what it shows.
    ShowTab(Tab),
    /// The delete dialog needs the exact preview of this target.
    PreviewDelete(DeleteTarget),
    /// Confirmed: run it.
    Apply(Curation),
    Explain(ExplainQuery),
    /// The Reads tab's filter or window changed: load the read log again.
    LoadReads,
    /// Resolve the read with this id as of its time (the as-of dialog on top shows it).
    ExplainRead(i64),
    /// Open a record's history in the current view with one version highlighted.
    GoTo(TimelineMark),
    /// The rescope dialog on top needs its suggestions and the preview of its target.
    PreviewRescope,
    /// The revert dialog on top needs the earlier versions and what each would do.
    PreviewRevert,
    /// Put this text on the clipboard (OSC 52, written to the terminal by the loop).
    Copy(String),
}

/// The selected record's history and its other scopes.
#[derive(Debug, Clone, PartialEq)]
pub struct Detail {
    pub identity: Identity,
    pub record: MemoryRecord,
    pub history: Vec<HistoryEvent>,
    /// Every live scope of the same subject and predicate (this one included).
    pub others: Vec<MemoryRecord>,
    /// The resolution in the selected record's own context (its repo or task).
    pub resolution: Option<Resolution>,
}

#[derive(Debug, Clone, Default)]
pub struct FilterState {
    /// What is typed in the filter line.
    pub input: String,
    pub editing: bool,
    /// The newest query sent to the worker.
    pub generation: u64,
    /// Results on screen (possibly of an older generation until the newer one reports).
    pub results: Option<FilterResults>,
}

impl FilterState {
    pub fn active(&self) -> bool {
        !self.input.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toast {
    pub text: String,
    pub error: bool,
}

pub const READ_ONLY: &str =
    "read-only database: memscope can show it but not change it (d, u, g, r, t, x, m and v are off)";

pub struct App {
    pub db_path: String,
    pub read_only: bool,
    pub clock: Clock,
    /// The clock's reading for this frame: every age on screen is relative to it.
    pub now: DateTime<Utc>,
    pub size: (u16, u16),
    pub tab: Tab,
    pub focus: Focus,
    pub counts: Option<HeaderCounts>,
    pub scope_counts: HashMap<String, i64>,
    pub refreshed_at: Option<DateTime<Utc>>,
    pub list: MemoryList,
    pub folded: BTreeSet<String>,
    pub filter: FilterState,
    pub detail: Option<Detail>,
    pub detail_scroll: usize,
    /// The selected event of the history pane's timeline …
    pub event_cursor: usize,
    /// … and the identity of that timeline (a refresh of the same one keeps the event).
    pub shown_identity: Option<Identity>,
    /// The tabs that are components (pending, tombstones, check).
    pub tabs: Tabs,
    /// A version to highlight in the history timeline (the one an agent read).
    pub mark: Option<TimelineMark>,
    pub dialogs: Vec<Dialog>,
    pub toast: Option<Toast>,
}

impl App {
    pub fn new(db_path: String, read_only: bool, clock: Clock, size: (u16, u16)) -> App {
        App {
            db_path,
            read_only,
            clock,
            now: clock.now(),
            size,
            tab: Tab::Memories,
            focus: Focus::List,
            counts: None,
            scope_counts: HashMap::new(),
            refreshed_at: None,
            list: MemoryList::default(),
            folded: BTreeSet::new(),
            filter: FilterState::default(),
            detail: None,
            detail_scroll: 0,
            event_cursor: 0,
            shown_identity: None,
            tabs: Tabs::default(),
            mark: None,
            dialogs: Vec::new(),
            toast: None,
        }
    }

    /// The key-map contexts in force, most specific first.
    pub fn contexts(&self) -> Vec<Context> {
        if let Some(d) = self.dialogs.last() {
            return vec![d.context()];
        }
        if self.filter.editing || self.tabs.typing().is_some() {
            return vec![Context::Filter];
        }
        match self.tab {
            Tab::Memories if self.focus == Focus::Detail => vec![
                Context::History,
                Context::Memories,
                Context::Lists,
                Context::Global,
            ],
            Tab::Memories => vec![Context::Memories, Context::Lists, Context::Global],
            tab => {
                let own = self.tabs.get(tab).and_then(|c| c.context());
                own.into_iter()
                    .chain([Context::Lists, Context::Global])
                    .collect()
            }
        }
    }

    pub fn page(&self) -> usize {
        super::layout::page(self.size, self.tab, self.focus)
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.toast = Some(Toast {
            text: text.into(),
            error: false,
        });
    }

    pub fn error(&mut self, text: impl Into<String>) {
        self.toast = Some(Toast {
            text: text.into(),
            error: true,
        });
    }

    /// An error the user must read and dismiss.
    pub fn popup(&mut self, title: &str, text: impl Into<String>) {
        self.dialogs.push(Dialog::Message {
            title: title.to_string(),
            text: text.into(),
        });
    }

    /// The tab bar: each tab's number and title.
    pub fn tab_titles(&self) -> Vec<(Tab, String)> {
        Tab::ALL
            .iter()
            .enumerate()
            .map(|(i, &tab)| {
                let title = match tab {
                    Tab::Memories => "Current view".to_string(),
                    _ => self.tabs.get(tab).map(|c| c.title()).unwrap_or_default(),
                };
                (tab, format!("{} {title}", i + 1))
            })
            .collect()
    }

    /// The component tabs, and what a tab or dialog may do besides changing its own state.
    fn parts(&mut self) -> (&mut Tabs, Shell<'_>) {
        let shell = Shell {
            read_only: self.read_only,
            focus: &mut self.focus,
            now: self.now,
            size: self.size,
            dialogs: &mut self.dialogs,
            toast: &mut self.toast,
        };
        (&mut self.tabs, shell)
    }

    /// Whether the tab shown has a detail pane to focus (the check report is one pane).
    pub(super) fn has_detail(&self) -> bool {
        self.tabs.get(self.tab).is_none_or(|c| c.has_detail())
    }

    /// The key on the tab that is a component, when it takes it.
    fn tab_command(&mut self, cmd: Command) -> Option<Action> {
        let tab = self.tab;
        let (tabs, mut shell) = self.parts();
        tabs.get_mut(tab)?.command(cmd, &mut shell)
    }

    pub fn handle_key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        self.toast = None;
        if !self.dialogs.is_empty() {
            return self.dialog_key(key);
        }
        let tab = self.tab;
        if let Some(c) = self.tabs.get_mut(tab).filter(|c| c.typing()) {
            let cmd = keymap::lookup(&[Context::Filter], &key);
            return c.typing_key(cmd, typed(&key));
        }
        if self.filter.editing {
            return self.filter_key(key);
        }
        match keymap::lookup(&self.contexts(), &key) {
            Some(cmd) => self.command(cmd),
            None => Action::None,
        }
    }

    fn filter_key(&mut self, key: KeyEvent) -> Action {
        match keymap::lookup(&[Context::Filter], &key) {
            Some(Command::KeepFilter) => {
                self.filter.editing = false;
                Action::None
            }
            Some(Command::ClearFilter) => {
                self.filter.editing = false;
                self.filter.input.clear();
                Action::Filter(String::new())
            }
            Some(Command::Erase) => {
                self.filter.input.pop();
                Action::Filter(self.filter.input.clone())
            }
            Some(Command::Up) => Action::Move(Motion::Up(1)),
            Some(Command::Down) => Action::Move(Motion::Down(1)),
            _ => match typed(&key) {
                Some(c) => {
                    self.filter.input.push(c);
                    Action::Filter(self.filter.input.clone())
                }
                None => Action::None,
            },
        }
    }

    fn dialog_key(&mut self, key: KeyEvent) -> Action {
        let cmd = keymap::lookup(&self.contexts(), &key);
        self.top_dialog_key(cmd, &key)
    }

    /// The dialog on top takes `cmd` (typed as `key`). It is off the stack meanwhile, so that
    /// it may open another on top of itself.
    pub(super) fn top_dialog_key(&mut self, cmd: Option<Command>, key: &KeyEvent) -> Action {
        let Some(mut dialog) = self.dialogs.pop() else {
            return Action::None;
        };
        let depth = self.dialogs.len();
        let (_, mut shell) = self.parts();
        match dialog.key(cmd, key, &mut shell) {
            Some(Step::Close(action)) => action,
            Some(Step::Stay(action)) => {
                self.dialogs.insert(depth, dialog);
                action
            }
            None => {
                self.dialogs.insert(depth, dialog);
                Action::None
            }
        }
    }

    /// Runs a key-map command.
    pub fn command(&mut self, cmd: Command) -> Action {
        if let Some(action) = self.tab_command(cmd) {
            return action;
        }
        match cmd {
            Command::Quit => Action::Quit,
            Command::Help => {
                self.dialogs.push(Dialog::Help { scroll: 0 });
                Action::None
            }
            Command::Filter => {
                self.filter.editing = true;
                self.focus = Focus::List;
                if self.tab != Tab::Memories {
                    self.tab = Tab::Memories;
                    return Action::ShowTab(Tab::Memories);
                }
                Action::None
            }
            Command::NextPane | Command::PrevPane => {
                if self.has_detail() {
                    self.focus = match self.focus {
                        Focus::List => Focus::Detail,
                        Focus::Detail => Focus::List,
                    };
                    self.follow_event();
                }
                Action::None
            }
            Command::Up => self.motion(Motion::Up(1)),
            Command::Down => self.motion(Motion::Down(1)),
            Command::PageUp => self.motion(Motion::PageUp),
            Command::PageDown => self.motion(Motion::PageDown),
            Command::Home => self.motion(Motion::Home),
            Command::End => self.motion(Motion::End),
            Command::Open => match self.list.selected().map(|r| &r.item) {
                Some(ListItem::Header { scope }) => Action::Fold {
                    scope: scope.clone(),
                    folded: !self.folded.contains(scope),
                },
                Some(ListItem::Record { .. }) => {
                    self.focus = Focus::Detail;
                    self.follow_event();
                    Action::None
                }
                None => Action::None,
            },
            Command::Back => {
                if self.focus == Focus::Detail {
                    self.focus = Focus::List;
                    Action::None
                } else if self.filter.active() && self.tab == Tab::Memories {
                    self.filter.input.clear();
                    Action::Filter(String::new())
                } else {
                    Action::None
                }
            }
            Command::Show(tab) => self.show(tab),
            Command::Fold | Command::Unfold => match self.list.selected() {
                Some(row) => Action::Fold {
                    scope: row.scope(),
                    folded: cmd == Command::Fold,
                },
                None => Action::None,
            },
            Command::Delete => self.delete(),
            Command::Explain => self.explain(),
            Command::Rescope => self.rescope(),
            Command::Revert => self.revert(),
            Command::OpenEvent => self.open_event(),
            Command::Copy => self.copy(),
            // Tab commands run in their tabs (`tab_command`); dialog and filter-line commands
            // where those have the focus.
            Command::ResolveGlobal
            | Command::ResolveRepo
            | Command::ResolveTask
            | Command::Reject
            | Command::Restore
            | Command::CycleSince
            | Command::ExplainRead
            | Command::GoToRecord
            | Command::EditField
            | Command::DoneEditing
            | Command::ClearField
            | Command::Digit
            | Command::Confirm
            | Command::Cancel
            | Command::NextChoice
            | Command::PrevChoice
            | Command::NextField
            | Command::Erase
            | Command::KeepFilter
            | Command::ClearFilter => Action::None,
        }
    }

    pub(super) fn show(&mut self, tab: Tab) -> Action {
        self.tab = tab;
        self.focus = Focus::List;
        Action::ShowTab(tab)
    }

    fn motion(&mut self, m: Motion) -> Action {
        self.motion_in(self.focus, m)
    }

    /// Moves in one pane of the current tab (the focused one for keys, the one under the
    /// pointer for the mouse wheel).
    pub(super) fn motion_in(&mut self, pane: Focus, m: Motion) -> Action {
        let page = self.page();
        match (self.tab, pane) {
            (Tab::Memories, Focus::List) => return Action::Move(m),
            (Tab::Memories, Focus::Detail) => self.move_event(m),
            (tab, _) => {
                if let Some(c) = self.tabs.get_mut(tab) {
                    c.motion(m, page);
                }
            }
        }
        Action::None
    }

    /// `c`: the selected value, exactly as stored, for the clipboard.
    fn copy(&mut self) -> Action {
        let text = match (self.tab, self.focus) {
            (Tab::Memories, Focus::List) => self
                .list
                .selected_record()
                .map(|r| super::clipboard::value_text(&r.value)),
            (Tab::Memories, Focus::Detail) => self.event_value(),
            (tab, _) => self.tabs.get(tab).and_then(|c| c.copy_text()),
        };
        match text {
            Some(text) => Action::Copy(text),
            None => {
                self.info("nothing selected here holds a value to copy");
                Action::None
            }
        }
    }

    /// Curation keys on a read-only file explain themselves instead of failing later.
    pub(super) fn writable(&mut self) -> bool {
        if self.read_only {
            self.error(READ_ONLY);
        }
        !self.read_only
    }

    /// The selected record of the current view, for a curation key (`verb`): none on a
    /// read-only file or on a group header, each said in a toast.
    pub(super) fn record_to_curate(&mut self, verb: &str) -> Option<MemoryRecord> {
        if !self.writable() {
            return None;
        }
        let rec = self.list.selected_record().cloned();
        if rec.is_none() {
            self.info(format!(
                "select a record to {verb} (a group header is not a memory)"
            ));
        }
        rec
    }

    fn delete(&mut self) -> Action {
        let Some(rec) = self.record_to_curate("delete") else {
            return Action::None;
        };
        let (dialog, action) = DeleteDialog::open(rec.identity());
        self.dialogs.push(Dialog::Delete(dialog));
        action
    }

    /// `e` in the current view: the selected record's chain in its own repo or task. (The
    /// pending and tombstone tabs open the same dialog on their own selection.)
    fn explain(&mut self) -> Action {
        if self.tab != Tab::Memories {
            return Action::None;
        }
        let Some(r) = self.list.selected_record() else {
            self.info("select a record to explain");
            return Action::None;
        };
        let (dialog, action) =
            ExplainDialog::open(&r.subject, &r.predicate, std::slice::from_ref(&r.scope));
        self.dialogs.push(Dialog::Explain(dialog));
        action
    }
}

/// A printable character typed without Ctrl or Alt.
pub(crate) fn typed(key: &KeyEvent) -> Option<char> {
    match key.code {
        KeyCode::Char(c)
            if !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
                && !c.is_control() =>
        {
            Some(c)
        }
        _ => None,
    }
}
