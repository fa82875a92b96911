//! The UI state and its key handling. A key becomes a command through the key map; a command
//! becomes a change of state plus an [`Action`] that the loop performs (queries, writes). The
//! focused dialog gets the key first. Nothing here touches the store.

use super::dialogs::Step;
use super::incident::TimelineMark;
use super::keymap::{self, Command, Context};
use super::list::FilterResults;
use super::rows::Motion;
use super::tabs::{counted, Env, Shell, Tabs};
use super::worker::HeaderCounts;
use crate::model::{DeleteTarget, HistoryEvent, Identity, MemoryRecord, Resolution, Scope};
use crate::store::Clock;
use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

pub use super::dialogs::{
    ConfirmDialog, DeleteDialog, Dialog, ExplainDialog, ExplainField, ExplainQuery,
};
pub use super::tabs::check::CheckState;
pub use super::tabs::memories::MemoriesTab;
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
    /// Copy the current value of this identity, read whole from the store.
    CopyValue(Identity),
    /// Copy the value of this history event, read whole from the store.
    CopyEvent(i64),
    /// Open this history event whole in the event popup.
    OpenEvent(i64),
    /// Move the history pane's event cursor (its window of events pages through the store).
    MoveEvent(Motion),
}

/// The selected record's history and its other scopes (long values as previews).
#[derive(Debug, Clone, PartialEq)]
pub struct Detail {
    pub record: MemoryRecord,
    /// The events loaded: a window of the timeline.
    pub events: EventWindow,
    /// Every live scope of the same subject and predicate (this one included).
    pub others: Vec<MemoryRecord>,
    /// The resolution in the selected record's own context (its repo or task).
    pub resolution: Option<Resolution>,
}

impl Detail {
    /// The identity whose history this is.
    pub fn identity(&self) -> Identity {
        self.record.identity()
    }
}

/// A window of one record's timeline: `history` holds its events from event number `first`,
/// of `total`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventWindow {
    pub history: Vec<HistoryEvent>,
    pub first: usize,
    pub total: usize,
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

/// What a curation key says once the database file was removed or replaced under the UI
/// (`App::file_gone`): not a read-only file, and quitting is the way on.
pub const FILE_GONE: &str =
    "the database file was removed or replaced after memscope opened it: nothing can be changed from here (d, u, g, r, t, x, m and v are off); quit and start memscope again to open what is at its path now";

/// When a list that could not be read is read again: one a damaged row or a lock stopped …
pub const READ_AGAIN_AT_REFRESH: &str = "The Check tab (4) says what is wrong. This list is read again at every refresh, and as soon as a lock that stopped it is gone.";
/// … and every list, when the database could not be polled at all (`App::lost`).
pub const READ_AGAIN_WHEN_IT_ANSWERS: &str =
    "memscope reads everything again as soon as the database answers (it asks at every poll).";

pub struct App {
    pub db_path: String,
    pub read_only: bool,
    /// The database file was removed or replaced since it was opened: nothing can be changed
    /// (`read_only` is on too) and the header says so.
    pub file_gone: bool,
    pub clock: Clock,
    /// The clock's reading for this frame: every age on screen is relative to it.
    pub now: DateTime<Utc>,
    pub size: (u16, u16),
    pub tab: Tab,
    pub focus: Focus,
    pub counts: Option<HeaderCounts>,
    /// The last count failed (or the database could not be polled): the header says the
    /// counts are unknown rather than repeat figures it could not read.
    pub counts_unknown: bool,
    pub refreshed_at: Option<DateTime<Utc>>,
    /// Every tab's state (`tabs::register!`).
    pub tabs: Tabs,
    pub dialogs: Vec<Dialog>,
    pub toast: Option<Toast>,
    /// The tabs whose list the last load could not read, each with the reason: each says so
    /// where its list would be, never that it is empty.
    pub unloaded: Vec<(Tab, String)>,
    /// Why the database could not be polled (dropped, unreachable), while it cannot: every tab
    /// has dropped what it held and says so, and nothing on screen takes a key (README, "The
    /// terminal UI", Check).
    pub lost: Option<String>,
}

impl App {
    pub fn new(db_path: String, read_only: bool, clock: Clock, size: (u16, u16)) -> App {
        let mut app = App {
            db_path: String::new(),
            read_only,
            file_gone: false,
            clock,
            now: clock.now(),
            size,
            tab: Tab::Memories,
            focus: Focus::List,
            counts: None,
            counts_unknown: false,
            refreshed_at: None,
            tabs: Tabs::default(),
            dialogs: Vec::new(),
            toast: None,
            unloaded: Vec::new(),
            lost: None,
        };
        app.name_database(db_path);
        app
    }

    /// Names the database on screen: the header's label, the `--db` of the commands the
    /// empty view suggests, and the demo's database beside it.
    pub fn name_database(&mut self, label: String) {
        let memories = &mut self.tabs.memories;
        memories.db_arg = label.clone();
        memories.demo_arg = demo_database(&label);
        self.db_path = label;
    }

    /// Why nothing can be changed from the screen, when it cannot: the file gone from its path,
    /// or a read-only database.
    pub fn refusal(&self) -> Option<&'static str> {
        refusal(self.read_only, self.file_gone)
    }

    /// The key-map contexts in force, most specific first.
    pub fn contexts(&self) -> Vec<Context> {
        if let Some(d) = self.dialogs.last() {
            return vec![d.context()];
        }
        if self.tabs.typing().is_some() {
            return vec![Context::Filter];
        }
        let mut contexts = self.tabs.get(self.tab).contexts(self.focus);
        contexts.extend(self.tab.context());
        contexts.extend([Context::Lists, Context::Global]);
        contexts
    }

    /// Whether the tab shown does something with `cmd`, for the footer, which offers nothing
    /// that does nothing (found by an exploratory test: the Check tab's footer offered `/`,
    /// which says it has nothing to filter, and Tab, which has no pane to go to).
    pub fn tab_offers(&self, cmd: Command) -> bool {
        match cmd {
            Command::Filter => self.tabs.get(self.tab).has_filter(),
            Command::NextPane | Command::PrevPane => self.has_detail(),
            _ => true,
        }
    }

    /// Why `tab`'s list could not be loaded, when it could not: the database could not be
    /// polled at all, or this list could not be read.
    pub fn unloaded(&self, tab: Tab) -> Option<&str> {
        self.lost.as_deref().or_else(|| {
            (self.unloaded.iter())
                .find(|(t, _)| *t == tab)
                .map(|(_, why)| why.as_str())
        })
    }

    /// When a list that could not be loaded is read again, and where to look meanwhile.
    pub fn read_again(&self) -> &'static str {
        match self.lost {
            Some(_) => READ_AGAIN_WHEN_IT_ANSWERS,
            None => READ_AGAIN_AT_REFRESH,
        }
    }

    /// Whether `key` quits the UI: it needs no database, so nothing is loaded for it first.
    pub fn quits(&self, key: &KeyEvent) -> bool {
        key.kind != KeyEventKind::Release
            && (keymap::quits_everywhere(key)
                || (self.dialogs.is_empty()
                    && self.tabs.typing().is_none()
                    && keymap::lookup(&self.contexts(), key) == Some(Command::Quit)))
    }

    /// The current view (tab 1).
    pub fn memories(&self) -> &MemoriesTab {
        &self.tabs.memories
    }

    /// What the loop's side of a tab needs: the clock, the size, a page of the focused pane.
    pub fn env(&self) -> Env {
        Env {
            now: self.now,
            size: self.size,
            page: self.page(),
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

    /// The tab bar in `width` columns: each tab's number and title, or in the first shorter
    /// form that holds every tab — shorter names, then the numbers with their counts, then the
    /// numbers alone — so every number stays on screen (found by review: at 60 columns the bar
    /// was cut at `4 Che…`, tab 6 gone).
    pub fn tab_bar(&self, width: usize) -> TabBar {
        let bar = |gap: usize, label: &dyn Fn(usize, Tab) -> String| TabBar {
            gap,
            titles: (Tab::ALL.iter().enumerate())
                .map(|(i, &tab)| (tab, label(i + 1, tab)))
                .collect(),
        };
        // Built one at a time, widest first: on a usual terminal the first fits (every frame
        // draws the bar).
        let full = bar(1, &|n, tab| format!("{n} {}", self.tabs.get(tab).title()));
        if full.width() <= width {
            return full;
        }
        // Shorter names (three steps), then no name: each with the tab's count.
        for step in 0..4 {
            let shorter = bar(0, &|n, tab| {
                let t = self.tabs.get(tab);
                let name = t.short_names().get(step).copied().unwrap_or("");
                match counted(name, t.title_count()).trim_start() {
                    "" => n.to_string(),
                    name => format!("{n} {name}"),
                }
            });
            if shorter.width() <= width {
                return shorter;
            }
        }
        bar(0, &|n, _| n.to_string())
    }

    /// The tabs, and what a tab or dialog may do besides changing its own state (`page`: the
    /// rows of a page in the pane a key moves in).
    pub(super) fn parts(&mut self, page: usize) -> (&mut Tabs, Shell<'_>) {
        let shell = Shell {
            read_only: self.read_only,
            file_gone: self.file_gone,
            focus: &mut self.focus,
            now: self.now,
            size: self.size,
            page,
            dialogs: &mut self.dialogs,
            toast: &mut self.toast,
        };
        (&mut self.tabs, shell)
    }

    /// Whether the tab shown has a detail pane to focus (the check report is one pane).
    pub(super) fn has_detail(&self) -> bool {
        self.tabs.get(self.tab).has_detail()
    }

    /// The key on the tab shown, when it takes it.
    fn tab_command(&mut self, cmd: Command) -> Option<Action> {
        let (tab, page) = (self.tab, self.page());
        let (tabs, mut shell) = self.parts(page);
        tabs.get_mut(tab).command(cmd, &mut shell)
    }

    pub fn handle_key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        self.toast = None;
        // Ctrl-c quits from every state, a dialog or a text input included (`q` keeps its
        // local meaning there: it closes a popup, or is typed).
        if keymap::quits_everywhere(&key) {
            return Action::Quit;
        }
        if !self.dialogs.is_empty() {
            return self.dialog_key(key);
        }
        let tab = self.tab;
        let c = self.tabs.get_mut(tab);
        if c.typing() {
            let cmd = keymap::lookup(&[Context::Filter], &key);
            // ↑/↓ move in the list being filtered, as they do when not typing.
            return match cmd {
                Some(Command::Up) => self.motion_in(Focus::List, Motion::Up(1)),
                Some(Command::Down) => self.motion_in(Focus::List, Motion::Down(1)),
                _ => c.typing_key(cmd, typed(&key)),
            };
        }
        match keymap::lookup(&self.contexts(), &key) {
            Some(cmd) => self.command(cmd),
            None => {
                self.say_unbound(&key);
                Action::None
            }
        }
    }

    /// A printable key that does nothing on the tab shown says so, and where it does something
    /// (found by review: `u` or `g` in the current view, `d` or `c` on the reads, did nothing and
    /// said nothing — as `t` on a pending item with no task candidate says why).
    fn say_unbound(&mut self, key: &KeyEvent) {
        // Enter too (found by review: Enter on the Check tab said nothing).
        let name = match (typed(key), key.code) {
            (Some(' '), _) => "Space".to_string(),
            (Some(c), _) => c.to_string(),
            (None, KeyCode::Enter) if key.modifiers.is_empty() => "Enter".to_string(),
            _ => return,
        };
        let places: Vec<(Tab, &str)> = (keymap::elsewhere(key).into_iter())
            .filter(|(tab, _)| *tab != self.tab)
            .collect();
        if places.is_empty() {
            self.info(format!("{name} does nothing here: ? lists every key"));
            return;
        }
        // Tabs where it does the same thing, together: `in tabs 5 and 6, “go to record”`.
        let mut said: Vec<(&str, Vec<usize>)> = Vec::new();
        for (tab, what) in places {
            let n = Tab::ALL.iter().position(|t| *t == tab).unwrap_or(0) + 1;
            match said.iter_mut().find(|(w, _)| *w == what) {
                Some((_, tabs)) => tabs.push(n),
                None => said.push((what, vec![n])),
            }
        }
        let parts: Vec<String> = (said.iter().enumerate())
            .map(|(i, (what, tabs))| {
                let numbers: Vec<String> = tabs.iter().map(|n| n.to_string()).collect();
                let tabs = match numbers.split_last() {
                    Some((last, [])) => format!("tab {last}"),
                    Some((last, rest)) => format!("tabs {} and {last}", rest.join(", ")),
                    None => String::new(),
                };
                if i == 0 {
                    format!("in {tabs} it is “{what}”")
                } else {
                    format!("in {tabs}, “{what}”")
                }
            })
            .collect();
        self.info(format!(
            "{name} does nothing in this tab: {}",
            parts.join("; ")
        ));
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
        let page = self.page();
        let (_, mut shell) = self.parts(page);
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
        // A tab whose list could not be loaded has no selection for a key to act on: it says
        // so (README, "The terminal UI", Check), and nothing is done to a row it does not show.
        if let Some(why) = self.unloaded(self.tab).filter(|_| cmd.acts_on_selection()) {
            let title = self.tabs.get(self.tab).title();
            let again = self.read_again();
            self.error(format!(
                "{title} could not be loaded, so nothing is selected here and that key does nothing: {why}. {again}"
            ));
            return Action::None;
        }
        if let Some(action) = self.tab_command(cmd) {
            return action;
        }
        match cmd {
            Command::Quit => Action::Quit,
            Command::Help => {
                self.dialogs.push(Dialog::Help { scroll: 0 });
                Action::None
            }
            // A tab with a list filters it (`TabComponent::command`); the others say so and
            // change nothing (README, "The terminal UI": `/` never filters another tab).
            Command::Filter => {
                let title = self.tabs.get(self.tab).title();
                self.info(format!(
                    "{title} has no list to filter: / filters the current view (1), the pending queue (2), the tombstones (3), the reads (5) and the suspects (6)"
                ));
                Action::None
            }
            Command::NextPane | Command::PrevPane => {
                if self.has_detail() {
                    self.focus = match self.focus {
                        Focus::List => Focus::Detail,
                        Focus::Detail => Focus::List,
                    };
                }
                Action::None
            }
            Command::Up => self.motion(Motion::Up(1)),
            Command::Down => self.motion(Motion::Down(1)),
            Command::PageUp => self.motion(Motion::PageUp),
            Command::PageDown => self.motion(Motion::PageDown),
            Command::Home => self.motion(Motion::Home),
            Command::End => self.motion(Motion::End),
            Command::Back => {
                self.focus = Focus::List;
                Action::None
            }
            Command::Show(tab) => self.show(tab),
            Command::Copy => self.copy(),
            // Tab commands run in their tabs (`tab_command`); dialog and filter-line commands
            // where those have the focus.
            Command::Open
            | Command::Fold
            | Command::Unfold
            | Command::Delete
            | Command::Explain
            | Command::Rescope
            | Command::Revert
            | Command::OpenEvent
            | Command::ResolveGlobal
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
        let tab = self.tab;
        let page = super::layout::page(self.size, tab, pane);
        let (tabs, mut shell) = self.parts(page);
        tabs.get_mut(tab).motion(m, pane, &mut shell)
    }

    /// `c`: the selected value, exactly as stored, for the clipboard.
    fn copy(&mut self) -> Action {
        let text = self.tabs.get(self.tab).copy_text(self.focus);
        match text {
            Some(text) => Action::Copy(text),
            None => {
                self.info("nothing selected here holds a value to copy");
                Action::None
            }
        }
    }
}

/// The tab bar as drawn: each tab's label (drawn as ` label `, the selected one highlighted),
/// `gap` spaces before each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabBar {
    pub gap: usize,
    pub titles: Vec<(Tab, String)>,
}

impl TabBar {
    /// The columns it takes.
    pub fn width(&self) -> usize {
        (self.titles.iter())
            .map(|(_, t)| self.gap + super::text::width(t) + 2)
            .sum()
    }

    /// The tab whose label is `x` columns from the bar's left edge.
    pub fn tab_at(&self, x: u16) -> Option<Tab> {
        let x = usize::from(x);
        let mut at = 0;
        for (tab, title) in &self.titles {
            at += self.gap;
            let w = super::text::width(title) + 2;
            if (at..at + w).contains(&x) {
                return Some(*tab);
            }
            at += w;
        }
        None
    }
}

/// Where the empty view suggests building the demo: `demo.db` beside the database `label`
/// names (`memscope-demo.db` beside a `demo.db`), never the database itself, which `demo` would
/// replace under the open UI; `None` for a PostgreSQL address (`memscope demo` then builds its
/// default, `~/.local/share/memscope/demo.db`).
fn demo_database(label: &str) -> Option<String> {
    if label.contains("://") {
        return None;
    }
    let path = std::path::Path::new(label);
    // The same file by another name (a symbolic link either way) is the database too (found
    // by review: opened through a link, the advice named the file the link points at).
    let same_file = |other: &std::path::Path| {
        std::fs::canonicalize(other)
            .ok()
            .is_some_and(|o| std::fs::canonicalize(path).ok() == Some(o))
    };
    let name = if path.file_name().is_some_and(|n| n == "demo.db")
        || same_file(&path.with_file_name("demo.db"))
    {
        "memscope-demo.db"
    } else {
        "demo.db"
    };
    Some(path.with_file_name(name).display().to_string())
}

/// [`App::refusal`] of a database that is `read_only`, its file `gone` or not.
pub(crate) fn refusal(read_only: bool, gone: bool) -> Option<&'static str> {
    if gone {
        Some(FILE_GONE)
    } else if read_only {
        Some(READ_ONLY)
    } else {
        None
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

#[cfg(test)]
mod tests {
    use super::demo_database;

    /// The demo never goes to the open database, whatever name it was opened by.
    #[test]
    fn the_demo_is_never_the_open_database_even_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name).display().to_string();
        std::fs::write(at("demo.db"), b"").unwrap();
        std::os::unix::fs::symlink(at("demo.db"), at("链接.db")).unwrap();
        assert_eq!(demo_database(&at("链接.db")), Some(at("memscope-demo.db")));
        assert_eq!(demo_database(&at("demo.db")), Some(at("memscope-demo.db")));
        assert_eq!(demo_database(&at("记忆.db")), Some(at("demo.db")));
        assert_eq!(demo_database("postgres://u@h/db"), None);
    }
}
