//! The key map is data: every binding names where it applies, its keys, the command it runs
//! and what it does. Key handling looks commands up here, and the help overlay and the footer
//! hints are generated from the same table, so they cannot drift apart.

use super::tabs::Tab;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where a binding applies. Lookup walks the active contexts in order; the first match wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Global,
    Lists,
    Memories,
    /// The history pane of the current view, when it has the focus.
    History,
    Pending,
    Tombstones,
    Reads,
    Suspects,
    Filter,
    DeleteDialog,
    Confirm,
    Explain,
    AsOf,
    Rescope,
    RescopeInput,
    Revert,
    Event,
    Help,
    Message,
}

impl Context {
    pub fn title(self) -> &'static str {
        match self {
            Context::Global => "Everywhere",
            Context::Lists => "Lists",
            Context::Memories => "Current view (1)",
            Context::History => "History pane (Tab, or Enter on a record)",
            Context::Pending => "Pending queue (2)",
            Context::Tombstones => "Tombstones (3)",
            Context::Reads => "Reads (5): what agents were told",
            Context::Suspects => "Suspects (6): global records that look like one place's rule",
            Context::Filter => "Filter line (/)",
            Context::DeleteDialog => "Delete dialog",
            Context::Confirm => "Confirm dialog",
            Context::Explain => "Explain (e)",
            Context::AsOf => "As of a read (Enter on a read)",
            Context::Rescope => "Rescope dialog (m)",
            Context::RescopeInput => "Rescope dialog, typing the target (e)",
            Context::Revert => "Revert dialog (v)",
            Context::Event => "An event in full (Enter on an event)",
            Context::Help => "Help",
            Context::Message => "Message",
        }
    }

    /// The order of sections in the help overlay.
    pub const HELP_ORDER: [Context; 18] = [
        Context::Global,
        Context::Lists,
        Context::Memories,
        Context::History,
        Context::Pending,
        Context::Tombstones,
        Context::Reads,
        Context::Suspects,
        Context::Filter,
        Context::DeleteDialog,
        Context::Confirm,
        Context::Explain,
        Context::AsOf,
        Context::Rescope,
        Context::RescopeInput,
        Context::Revert,
        Context::Event,
        Context::Help,
    ];
}

/// What a key asks for; the app turns a command into a state change and an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Quit,
    Help,
    Filter,
    NextPane,
    PrevPane,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Open,
    Back,
    /// Open a tab.
    Show(Tab),
    Fold,
    Unfold,
    ResolveGlobal,
    ResolveRepo,
    ResolveTask,
    Reject,
    Delete,
    Restore,
    Explain,
    /// Reads tab: the next `since` window (all, 24h, 7d, 30d).
    CycleSince,
    /// Explain a read as of its time.
    ExplainRead,
    /// Open the winning record's history, the version the agent read highlighted.
    GoToRecord,
    Rescope,
    Revert,
    /// History pane: open the selected event in full.
    OpenEvent,
    /// Copy the selected value (in the event popup: the raw words) with OSC 52.
    Copy,
    Confirm,
    Cancel,
    NextChoice,
    PrevChoice,
    NextField,
    Erase,
    KeepFilter,
    ClearFilter,
    /// Rescope dialog: start typing the target scope.
    EditField,
    /// Rescope dialog: stop typing, back to y/n.
    DoneEditing,
    ClearField,
    /// Revert dialog: a digit of a version number.
    Digit,
}

impl Command {
    /// Whether it moves a list's selection and does nothing else.
    pub fn is_motion(self) -> bool {
        use Command::*;
        matches!(self, Up | Down | PageUp | PageDown | Home | End)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A printable character, without Ctrl or Alt (Shift is part of the character).
    Char(char),
    Ctrl(char),
    Code(KeyCode),
}

impl Key {
    pub fn matches(self, ev: &KeyEvent) -> bool {
        let ctrl_alt = ev
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        match self {
            Key::Char(c) => ev.code == KeyCode::Char(c) && !ctrl_alt,
            Key::Ctrl(c) => {
                ev.code == KeyCode::Char(c) && ev.modifiers.contains(KeyModifiers::CONTROL)
            }
            Key::Code(code) => ev.code == code && !ctrl_alt,
        }
    }
}

pub struct Binding {
    pub context: Context,
    pub keys: &'static [Key],
    /// How the keys are written in help and footer.
    pub label: &'static str,
    pub command: Command,
    pub help: &'static str,
    /// The footer's short hint, when the binding is worth a footer slot.
    pub hint: Option<&'static str>,
}

use Command as C;
use Context as X;
use Key::{Char, Code, Ctrl};

const fn b(
    context: Context,
    keys: &'static [Key],
    label: &'static str,
    command: Command,
    help: &'static str,
    hint: Option<&'static str>,
) -> Binding {
    Binding {
        context,
        keys,
        label,
        command,
        help,
        hint,
    }
}

#[rustfmt::skip]
pub static BINDINGS: &[Binding] = &[
    // Dialogs first: the focused dialog gets the key before anything else.
    b(X::DeleteDialog, &[Char('y')], "y", C::Confirm, "delete what the dialog states", Some("delete")),
    b(X::DeleteDialog, &[Char('n'), Code(KeyCode::Esc), Char('q')], "n/Esc", C::Cancel, "cancel (q too): nothing is deleted", Some("cancel")),
    b(X::DeleteDialog, &[Char('j'), Code(KeyCode::Down), Code(KeyCode::Tab)], "j/↓/Tab", C::NextChoice, "next target: this identity, the predicate in all scopes, the whole subject", Some("target")),
    b(X::DeleteDialog, &[Char('k'), Code(KeyCode::Up), Code(KeyCode::BackTab)], "k/↑", C::PrevChoice, "previous target", None),
    b(X::DeleteDialog, &[Code(KeyCode::PageDown), Char(' ')], "PgDn/Space", C::PageDown, "scroll the statement down (a short terminal)", None),
    b(X::DeleteDialog, &[Code(KeyCode::PageUp)], "PgUp", C::PageUp, "scroll the statement up", None),
    b(X::DeleteDialog, &[Code(KeyCode::Home)], "Home", C::Home, "the statement's top", None),
    b(X::DeleteDialog, &[Code(KeyCode::End)], "End", C::End, "the statement's end", None),
    b(X::Confirm, &[Char('y')], "y", C::Confirm, "do it", Some("yes")),
    b(X::Confirm, &[Char('n'), Code(KeyCode::Esc), Char('q')], "n/Esc", C::Cancel, "cancel (q too): nothing changes", Some("no")),
    b(X::Confirm, &[Code(KeyCode::Tab)], "Tab", C::NextChoice, "writing a pending item with several candidates of one kind: the next of them", None),
    b(X::Confirm, &[Code(KeyCode::BackTab)], "S-Tab", C::PrevChoice, "the previous of them", None),
    b(X::Explain, &[Code(KeyCode::Tab), Code(KeyCode::BackTab)], "Tab", C::NextField, "switch between the repo and task fields", Some("field")),
    b(X::Explain, &[Code(KeyCode::Enter)], "Enter", C::Confirm, "resolve again (it also resolves as you type)", None),
    b(X::Explain, &[Code(KeyCode::Backspace)], "Backspace", C::Erase, "erase a character", None),
    b(X::Explain, &[Ctrl('u')], "Ctrl-u", C::ClearField, "clear the field", Some("clear")),
    b(X::Explain, &[Code(KeyCode::Esc)], "Esc", C::Cancel, "close", Some("close")),
    b(X::AsOf, &[Char('g'), Code(KeyCode::Enter)], "g/Enter", C::GoToRecord, "the winning record's history, the version read highlighted", Some("go to history")),
    b(X::AsOf, &[Code(KeyCode::Esc), Char('q')], "Esc/q", C::Cancel, "close", Some("close")),
    b(X::Rescope, &[Char('y')], "y", C::Confirm, "rescope as the dialog states", Some("rescope")),
    b(X::Rescope, &[Char('n'), Code(KeyCode::Esc), Char('q')], "n/Esc", C::Cancel, "cancel (q too): nothing changes", Some("cancel")),
    b(X::Rescope, &[Char('e')], "e", C::EditField, "type another target: repo:<id>, task:<id> or global", Some("edit target")),
    b(X::Rescope, &[Code(KeyCode::Tab), Char('j'), Code(KeyCode::Down)], "Tab", C::NextChoice, "next suggested target", Some("suggestion")),
    b(X::Rescope, &[Code(KeyCode::BackTab), Char('k'), Code(KeyCode::Up)], "S-Tab", C::PrevChoice, "previous suggested target", None),
    b(X::Rescope, &[Code(KeyCode::PageDown), Char(' ')], "PgDn/Space", C::PageDown, "scroll the statement down (a short terminal)", None),
    b(X::Rescope, &[Code(KeyCode::PageUp)], "PgUp", C::PageUp, "scroll the statement up", None),
    b(X::Rescope, &[Code(KeyCode::Home)], "Home", C::Home, "the statement's top", None),
    b(X::Rescope, &[Code(KeyCode::End)], "End", C::End, "the statement's end", None),
    b(X::RescopeInput, &[Code(KeyCode::Enter), Code(KeyCode::Esc)], "Enter/Esc", C::DoneEditing, "done typing: back to y/n", Some("done")),
    b(X::RescopeInput, &[Code(KeyCode::Backspace)], "Backspace", C::Erase, "erase a character", None),
    b(X::RescopeInput, &[Ctrl('u')], "Ctrl-u", C::ClearField, "clear the target", Some("clear")),
    b(X::RescopeInput, &[Code(KeyCode::Tab)], "Tab", C::NextChoice, "next suggested target", Some("suggestion")),
    b(X::RescopeInput, &[Code(KeyCode::PageDown)], "PgDn", C::PageDown, "scroll the statement down (a short terminal)", None),
    b(X::RescopeInput, &[Code(KeyCode::PageUp)], "PgUp", C::PageUp, "scroll the statement up", None),
    b(X::Revert, &[Char('y')], "y", C::Confirm, "revert as the dialog states", Some("revert")),
    b(X::Revert, &[Char('n'), Code(KeyCode::Esc), Char('q')], "n/Esc", C::Cancel, "cancel (q too): nothing changes", Some("cancel")),
    b(X::Revert, &[Char('j'), Code(KeyCode::Down)], "j/↓", C::NextChoice, "an older version", Some("version")),
    b(X::Revert, &[Char('k'), Code(KeyCode::Up)], "k/↑", C::PrevChoice, "a newer version", None),
    b(X::Revert, DIGITS, "0-9", C::Digit, "choose a version by its number", Some("version no.")),
    b(X::Revert, &[Code(KeyCode::PageDown), Char(' ')], "PgDn/Space", C::PageDown, "scroll the statement down (a short terminal)", None),
    b(X::Revert, &[Code(KeyCode::PageUp)], "PgUp", C::PageUp, "scroll the statement up", None),
    b(X::Revert, &[Code(KeyCode::Home)], "Home", C::Home, "the statement's top", None),
    b(X::Revert, &[Code(KeyCode::End)], "End", C::End, "the statement's end", None),
    b(X::Event, &[Char('c')], "c", C::Copy, "copy the raw words (else the value) to the clipboard (OSC 52)", Some("copy words")),
    b(X::Event, &[Char('j'), Code(KeyCode::Down)], "j/↓", C::Down, "scroll down", Some("scroll")),
    b(X::Event, &[Char('k'), Code(KeyCode::Up)], "k/↑", C::Up, "scroll up", None),
    b(X::Event, &[Code(KeyCode::PageDown), Char(' ')], "PgDn/Space", C::PageDown, "page down", None),
    b(X::Event, &[Code(KeyCode::PageUp)], "PgUp", C::PageUp, "page up", None),
    b(X::Event, &[Code(KeyCode::Home)], "Home", C::Home, "top", None),
    b(X::Event, &[Code(KeyCode::End)], "End", C::End, "bottom", None),
    b(X::Event, &[Code(KeyCode::Esc), Code(KeyCode::Enter), Char('q')], "Esc/Enter/q", C::Cancel, "close", Some("close")),
    b(X::Help, &[Code(KeyCode::Esc), Code(KeyCode::Enter), Char('q'), Char('?')], "Esc/Enter/q", C::Cancel, "close the help (? too)", Some("close")),
    b(X::Help, &[Char('j'), Code(KeyCode::Down)], "j/↓", C::Down, "scroll down", Some("scroll")),
    b(X::Help, &[Char('k'), Code(KeyCode::Up)], "k/↑", C::Up, "scroll up", None),
    b(X::Help, &[Code(KeyCode::PageDown), Char(' ')], "PgDn/Space", C::PageDown, "page down", None),
    b(X::Help, &[Code(KeyCode::PageUp)], "PgUp", C::PageUp, "page up", None),
    b(X::Help, &[Code(KeyCode::Home)], "Home", C::Home, "top", None),
    b(X::Help, &[Code(KeyCode::End)], "End", C::End, "bottom", None),
    b(X::Message, &[Code(KeyCode::Esc), Code(KeyCode::Enter), Char('q')], "Esc/Enter", C::Cancel, "dismiss", Some("dismiss")),
    // The filter line: printable keys are typed into it.
    b(X::Filter, &[Code(KeyCode::Enter)], "Enter", C::KeepFilter, "keep the filter, back to the list", Some("keep")),
    b(X::Filter, &[Code(KeyCode::Esc)], "Esc", C::ClearFilter, "clear the filter", Some("clear")),
    b(X::Filter, &[Code(KeyCode::Backspace)], "Backspace", C::Erase, "erase a character", None),
    b(X::Filter, &[Code(KeyCode::Down)], "↓", C::Down, "move down the results", None),
    b(X::Filter, &[Code(KeyCode::Up)], "↑", C::Up, "move up the results", None),
    // Panes.
    b(X::Memories, &[Code(KeyCode::Enter)], "Enter", C::Open, "open the history of a record / fold or unfold a group", Some("open")),
    b(X::Memories, &[Char('h'), Code(KeyCode::Left)], "h/←", C::Fold, "fold the selected group", None),
    b(X::Memories, &[Char('l'), Code(KeyCode::Right)], "l/→", C::Unfold, "unfold the selected group", None),
    b(X::Memories, &[Char('d')], "d", C::Delete, "delete: choose the target, see what is destroyed, confirm with y", Some("delete")),
    b(X::Memories, &[Char('e')], "e", C::Explain, "explain: the resolution chain for a repo/task", Some("explain")),
    b(X::Memories, &[Char('m')], "m", C::Rescope, "rescope: move a mis-scoped value where it belongs (y confirms)", Some("rescope")),
    b(X::Memories, &[Char('v')], "v", C::Revert, "revert: make an earlier value current again, as a new version", Some("revert")),
    b(X::Memories, &[Char('c')], "c", C::Copy, "copy the value (OSC 52 clipboard; tmux: set -g set-clipboard on)", Some("copy")),
    b(X::History, &[Char('j'), Code(KeyCode::Down)], "j/↓", C::Down, "select the next (newer) event", None),
    b(X::History, &[Char('k'), Code(KeyCode::Up)], "k/↑", C::Up, "select the previous (older) event", Some("event")),
    b(X::History, &[Code(KeyCode::Enter)], "Enter", C::OpenEvent, "the event in full: words, whole value, source, causal_seq, times", Some("full event")),
    b(X::History, &[Char('c')], "c", C::Copy, "copy the selected event's value to the clipboard (OSC 52)", Some("copy")),
    b(X::Pending, &[Char('g')], "g", C::ResolveGlobal, "write the selected item to global (a confirm states the effect)", Some("global")),
    b(X::Pending, &[Char('r')], "r", C::ResolveRepo, "write it to its repo candidate (after a confirm)", Some("repo")),
    b(X::Pending, &[Char('t')], "t", C::ResolveTask, "write it to its task candidate (after a confirm)", Some("task")),
    b(X::Pending, &[Char('x')], "x", C::Reject, "reject it: nothing is written (after a confirm)", Some("reject")),
    b(X::Pending, &[Char('e')], "e", C::Explain, "explain its subject and predicate", Some("explain")),
    b(X::Pending, &[Char('c')], "c", C::Copy, "copy its value to the clipboard (OSC 52)", Some("copy")),
    b(X::Pending, &[Char('/')], "/", C::Filter, "filter the queue: subject, predicate, value, candidates, words", Some("filter")),
    b(X::Tombstones, &[Char('u')], "u", C::Restore, "restore the selected tombstone (after a confirm)", Some("restore")),
    b(X::Tombstones, &[Char('e')], "e", C::Explain, "explain its subject and predicate", Some("explain")),
    b(X::Tombstones, &[Char('/')], "/", C::Filter, "filter the tombstones: subject, predicate, scope, reason", Some("filter")),
    b(X::Reads, &[Code(KeyCode::Enter)], "Enter", C::ExplainRead, "the explain chain as it stood when the agent read", Some("as of then")),
    b(X::Reads, &[Char('g')], "g", C::GoToRecord, "the winning record's history, the version read highlighted", Some("go to record")),
    b(X::Reads, &[Char('/')], "/", C::Filter, "filter: words in agent, subject, predicate, repo or task", Some("filter")),
    b(X::Reads, &[Char('s')], "s", C::CycleSince, "since: all time → 24h → 7d → 30d", Some("since")),
    b(X::Suspects, &[Char('m')], "m", C::Rescope, "rescope it: the target the evidence points at is filled in (y confirms)", Some("rescope")),
    b(X::Suspects, &[Char('g')], "g", C::GoToRecord, "the record in the current view, with its history", Some("go to record")),
    b(X::Suspects, &[Char('e')], "e", C::Explain, "explain how it resolves (type a repo)", Some("explain")),
    b(X::Suspects, &[Char('c')], "c", C::Copy, "copy its value (OSC 52)", Some("copy")),
    b(X::Suspects, &[Char('/')], "/", C::Filter, "filter the suspects: subject, predicate, value, evidence", Some("filter")),
    b(X::Lists, &[Char('j'), Code(KeyCode::Down)], "j/↓", C::Down, "move down", None),
    b(X::Lists, &[Char('k'), Code(KeyCode::Up)], "k/↑", C::Up, "move up", Some("move")),
    b(X::Lists, &[Code(KeyCode::PageDown), Ctrl('f'), Ctrl('d')], "PgDn/Ctrl-f", C::PageDown, "page down (Ctrl-d too)", None),
    b(X::Lists, &[Code(KeyCode::PageUp), Ctrl('b'), Ctrl('u')], "PgUp/Ctrl-b", C::PageUp, "page up (Ctrl-u too)", None),
    b(X::Lists, &[Code(KeyCode::Home)], "Home", C::Home, "first row", None),
    b(X::Lists, &[Code(KeyCode::End)], "End", C::End, "last row", None),
    // Everywhere.
    b(X::Global, &[Char('q')], "q", C::Quit, "quit (the terminal is restored)", Some("quit")),
    b(X::Global, &[Ctrl('c')], "Ctrl-c", C::Quit, "quit from anywhere, a dialog or a text input included", None),
    b(X::Global, &[Char('?')], "?", C::Help, "this help", Some("help")),
    b(X::Global, &[Char('/')], "/", C::Filter, "filter the list of the tab shown, fuzzily (the check has none)", Some("filter")),
    b(X::Global, &[Code(KeyCode::Tab)], "Tab", C::NextPane, "next pane (list ↔ history/detail)", Some("pane")),
    b(X::Global, &[Code(KeyCode::BackTab)], "S-Tab", C::PrevPane, "previous pane", None),
    b(X::Global, &[Code(KeyCode::Esc)], "Esc", C::Back, "back: leave the detail pane, clear the filter", None),
    b(X::Global, &[Char('1')], "1", C::Show(Tab::Memories), "current view", Some("views")),
    b(X::Global, &[Char('2')], "2", C::Show(Tab::Pending), "pending queue", None),
    b(X::Global, &[Char('3')], "3", C::Show(Tab::Tombstones), "tombstones", None),
    b(X::Global, &[Char('4')], "4", C::Show(Tab::Check), "check: invariants and health figures", None),
    b(X::Global, &[Char('5')], "5", C::Show(Tab::Reads), "reads: what agents were told, as of then", None),
    b(X::Global, &[Char('6')], "6", C::Show(Tab::Suspects), "suspects: global records that look like one place's rule", None),
];

const DIGITS: &[Key] = &[
    Char('0'),
    Char('1'),
    Char('2'),
    Char('3'),
    Char('4'),
    Char('5'),
    Char('6'),
    Char('7'),
    Char('8'),
    Char('9'),
];

/// The command for `key` in the first of `contexts` that binds it.
pub fn lookup(contexts: &[Context], key: &KeyEvent) -> Option<Command> {
    contexts.iter().find_map(|ctx| {
        BINDINGS
            .iter()
            .filter(|b| b.context == *ctx)
            .find(|b| b.keys.iter().any(|k| k.matches(key)))
            .map(|b| b.command)
    })
}

/// The tabs whose own keys bind `key`, each with what it does there (its footer hint, else its
/// help), in the tab bar's order: what a key that does nothing on the tab shown points to.
pub fn elsewhere(key: &KeyEvent) -> Vec<(Tab, &'static str)> {
    let tab_of = |ctx: Context| match ctx {
        Context::Memories | Context::History => Some(Tab::Memories),
        Context::Pending => Some(Tab::Pending),
        Context::Tombstones => Some(Tab::Tombstones),
        Context::Reads => Some(Tab::Reads),
        Context::Suspects => Some(Tab::Suspects),
        _ => None,
    };
    let mut found: Vec<(Tab, &'static str)> = Vec::new();
    for b in BINDINGS
        .iter()
        .filter(|b| b.keys.iter().any(|k| k.matches(key)))
    {
        if let Some(tab) = tab_of(b.context) {
            if !found.iter().any(|(t, _)| *t == tab) {
                found.push((tab, b.hint.unwrap_or(b.help)));
            }
        }
    }
    found.sort_by_key(|(tab, _)| Tab::ALL.iter().position(|t| t == tab));
    found
}

/// Whether `key` quits whatever has the focus: the global quit bindings held with Ctrl
/// (`Ctrl-c`), which no dialog or text input binds or types.
pub fn quits_everywhere(key: &KeyEvent) -> bool {
    BINDINGS.iter().any(|b| {
        b.context == Context::Global
            && b.command == Command::Quit
            && b.keys
                .iter()
                .any(|k| matches!(k, Key::Ctrl(_)) && k.matches(key))
    })
}

/// How much a footer hint matters (lower first): the pane's own keys in table order, then
/// quit and filter, then copying a list's value and the keys anyone guesses (moving, panes, the numbered tabs the tab
/// bar already shows). Help comes last and is never dropped: it leads to everything else.
fn footer_rank(b: &Binding) -> u8 {
    match (b.context, b.command) {
        (_, Command::Help) => u8::MAX,
        (Context::Global, Command::Quit) => 1,
        (
            Context::Global | Context::Pending | Context::Tombstones | Context::Suspects,
            Command::Filter,
        ) => 2,
        // Copying a list's value is handy, not the pane's purpose (in the history pane and
        // the event popup it keeps its pane's rank).
        (Context::Memories | Context::Pending | Context::Suspects, Command::Copy) => 3,
        // Explaining a queued item or a tombstone's identity is a side trip from the pane's
        // decision, not the decision.
        (Context::Pending | Context::Tombstones, Command::Explain) => 3,
        (Context::Lists, _) => 3,
        (Context::Global, Command::NextPane) => 4,
        (Context::Global, _) => 5,
        _ => 0,
    }
}

/// The label of the help key, which the footer keeps at any width.
pub const HELP_LABEL: &str = "?";

impl Command {
    /// The keys that change the database: off on a read-only one (`READ_ONLY` names them).
    pub fn changes_data(self) -> bool {
        matches!(
            self,
            Command::Delete
                | Command::Restore
                | Command::ResolveGlobal
                | Command::ResolveRepo
                | Command::ResolveTask
                | Command::Reject
                | Command::Rescope
                | Command::Revert
        )
    }
}

impl Command {
    /// The keys that act on a list's selection or move it: nothing to do on a tab whose list
    /// could not be loaded (`App::unloaded`).
    pub fn acts_on_selection(self) -> bool {
        self.changes_data()
            || matches!(
                self,
                Command::Open
                    | Command::Fold
                    | Command::Unfold
                    | Command::Explain
                    | Command::OpenEvent
                    | Command::Copy
                    | Command::ExplainRead
                    | Command::GoToRecord
                    | Command::Filter
                    | Command::NextPane
                    | Command::PrevPane
                    | Command::Up
                    | Command::Down
                    | Command::PageUp
                    | Command::PageDown
                    | Command::Home
                    | Command::End
            )
    }
}

/// Footer hints for the active contexts, most important first, help last (see
/// `footer_rank`). A binding whose keys a more specific context already takes never fires,
/// so it gets no hint; on a `read_only` database neither do the keys that would change it
/// (they only say the database is read-only), nor the commands `offered` says cannot run now
/// (a delete dialog's `y` before its preview came, or after it failed): a hint never offers
/// what does nothing.
pub fn hints(
    contexts: &[Context],
    read_only: bool,
    offered: &dyn Fn(Command) -> bool,
) -> Vec<Hint> {
    let mut out = Vec::new();
    let mut taken: Vec<Key> = Vec::new();
    for ctx in contexts {
        let mut mine: Vec<Key> = Vec::new();
        for b in BINDINGS.iter().filter(|b| b.context == *ctx) {
            mine.extend_from_slice(b.keys);
            if b.keys.iter().all(|k| taken.contains(k)) {
                continue;
            }
            if (read_only && b.command.changes_data()) || !offered(b.command) {
                continue;
            }
            if let Some(h) = b.hint {
                // The tab keys and the two move keys share one footer slot each.
                let label = match b.command {
                    Command::Show(Tab::Memories) => "1-6",
                    Command::Up if matches!(b.context, Context::Lists | Context::History) => "j/k",
                    _ => b.label,
                };
                out.push((
                    footer_rank(b),
                    Hint {
                        keys: label,
                        text: h,
                        command: b.command,
                    },
                ));
            }
        }
        taken.extend(mine);
    }
    out.sort_by_key(|(rank, _)| *rank);
    out.into_iter().map(|(_, hint)| hint).collect()
}

/// One key's hint in the footer or a dialog's border.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    /// The keys, as the footer shows them (`n/Esc`).
    pub keys: &'static str,
    /// What they do, in a word or two (`cancel`).
    pub text: &'static str,
    pub command: Command,
}

/// As many of `hints` as `fits` takes, most important first — but a dialog's confirm key never
/// without its cancel key: when the two do not fit together the cancel shows alone (found by a
/// tester: at 25×6 the delete dialog offered `y delete` and said `n/Esc cancel` nowhere).
pub fn fitting(hints: &[Hint], fits: impl Fn(&[Hint]) -> bool) -> Vec<Hint> {
    let cancel = hints.iter().find(|h| h.command == Command::Cancel);
    let mut kept: Vec<Hint> = Vec::new();
    for h in hints {
        if kept.contains(h) {
            continue;
        }
        let mut next = kept.clone();
        next.push(*h);
        let confirm = h.command == Command::Confirm;
        if let Some(c) = cancel.filter(|c| confirm && !next.contains(c)) {
            next.push(*c);
        }
        if !fits(&next) {
            // Without its cancel beside it the confirm is left out; the cancel is tried next.
            if confirm {
                continue;
            }
            break;
        }
        kept = next;
    }
    kept
}

/// What the mouse does, for the help (it is no key: the key map cannot bind it).
pub const MOUSE_HELP: (&str, &[(&str, &str)]) = (
    "Mouse (memscope --no-mouse leaves it to the terminal)",
    &[
        ("wheel", "scroll the pane under the pointer (a list's selection, the history's event, a popup's text)"),
        ("click", "select a row, an event, a tab or a pane"),
        ("--no-mouse", "start memscope with it to select text the terminal's way (or hold Shift)"),
    ],
);

/// Help overlay sections: (title, [(keys, description)]), the mouse last.
pub fn help_sections() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    let mut sections: Vec<_> = Context::HELP_ORDER
        .iter()
        .map(|ctx| {
            let rows = BINDINGS
                .iter()
                .filter(|b| b.context == *ctx)
                .map(|b| (b.label, b.help))
                .collect();
            (ctx.title(), rows)
        })
        .collect();
    sections.push((MOUSE_HELP.0, MOUSE_HELP.1.to_vec()));
    sections
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEventKind;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new_with_kind(code, KeyModifiers::NONE, KeyEventKind::Press)
    }

    #[test]
    fn specific_context_wins() {
        let k = key(KeyCode::Char('r'));
        assert_eq!(
            lookup(&[Context::Pending, Context::Lists, Context::Global], &k),
            Some(Command::ResolveRepo)
        );
        assert_eq!(
            lookup(&[Context::Memories, Context::Lists, Context::Global], &k),
            None
        );
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(lookup(&[Context::Global], &ctrl_c), Some(Command::Quit));
    }

    #[test]
    fn every_binding_is_documented() {
        for b in BINDINGS {
            assert!(!b.help.is_empty() && !b.label.is_empty() && !b.keys.is_empty());
        }
        let help: usize =
            help_sections().iter().map(|(_, r)| r.len()).sum::<usize>() - MOUSE_HELP.1.len();
        let documented = BINDINGS
            .iter()
            .filter(|b| b.context != Context::Message)
            .count();
        assert_eq!(help, documented);
    }
}
