//! The wrong-tool incident loop in the UI: the Reads tab (what agents were told), a read
//! explained as of its time, a jump to the winning record's timeline, and the two repairs on a
//! record — rescope (`m`) and revert (`v`) — each through a dialog that states the effect
//! before `y`. State and key handling only: the session loads and previews from the store.

use super::app::{Action, App, Curation, Dialog, Focus, Tab};
use super::keymap::Command;
use super::list::Motion;
use super::rows::Rows;
use super::worker::ReadsQuery;
use crate::model::{Identity, MemoryRecord, ReadRecord, Resolution, Scope};
use chrono::{DateTime, Duration, Utc};
use crossterm::event::{KeyCode, KeyEvent};
use serde_json::Value;

/// The Reads tab shows at most this many reads (the newest); `/` and `s` narrow it.
pub const READS_LIMIT: usize = 500;

/// How far back the Reads tab looks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Since {
    #[default]
    All,
    Day,
    Week,
    Month,
}

impl Since {
    pub fn next(self) -> Since {
        match self {
            Since::All => Since::Day,
            Since::Day => Since::Week,
            Since::Week => Since::Month,
            Since::Month => Since::All,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Since::All => "all time",
            Since::Day => "24h",
            Since::Week => "7d",
            Since::Month => "30d",
        }
    }

    /// The earliest time shown, counted back from `now`.
    pub fn start(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let days = match self {
            Since::All => return None,
            Since::Day => 1,
            Since::Week => 7,
            Since::Month => 30,
        };
        now.checked_sub_signed(Duration::days(days))
    }
}

/// The Reads tab: the read log, newest first, narrowed by words and a time window.
#[derive(Debug, Clone, Default)]
pub struct ReadsState {
    pub rows: Rows<ReadRecord>,
    /// What is typed in the filter line (words matched in agent, subject, predicate, context).
    pub input: String,
    pub editing: bool,
    pub since: Since,
    /// The newest query sent to the loader, and the one whose rows are on screen.
    pub wanted: Option<ReadsQuery>,
    pub shown: Option<ReadsQuery>,
}

impl ReadsState {
    pub fn selected(&self) -> Option<&ReadRecord> {
        self.rows.selected()
    }

    pub fn active(&self) -> bool {
        !self.input.trim().is_empty()
    }

    pub fn loading(&self) -> bool {
        self.wanted.is_some() && self.wanted != self.shown
    }

    /// The query for what the tab should show at `now`.
    pub fn query(&self, now: DateTime<Utc>) -> ReadsQuery {
        ReadsQuery {
            words: self.input.split_whitespace().map(str::to_string).collect(),
            since: self.since.start(now),
            limit: READS_LIMIT,
        }
    }
}

/// A read's context as the CLI writes it: `repo:web-app task:x`, or `no context`.
pub fn read_context(r: &ReadRecord) -> String {
    let parts: Vec<String> = [
        r.repo.as_ref().map(|x| format!("repo:{x}")),
        r.task.as_ref().map(|x| format!("task:{x}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "no context".into()
    } else {
        parts.join(" ")
    }
}

/// A version of one identity to highlight in its timeline: the one an agent read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineMark {
    pub identity: Identity,
    pub version: i64,
    /// Who read it, when and where, for the line under the highlighted event.
    pub note: String,
}

impl TimelineMark {
    /// The record a read got, or `None` when nothing applied to it.
    pub fn of_read(r: &ReadRecord, now: DateTime<Utc>) -> Option<TimelineMark> {
        let scope = Scope::parse(r.scope.as_deref()?).ok()?;
        Some(TimelineMark {
            identity: Identity {
                subject: r.subject.clone(),
                predicate: r.predicate.clone(),
                scope,
            },
            version: r.version?,
            note: format!(
                "read by {} {} in {}",
                r.agent.as_deref().unwrap_or("an agent"),
                super::text::ago(now, &r.at),
                read_context(r)
            ),
        })
    }
}

/// A read's resolution as it stood then, and the same read today.
#[derive(Debug, Clone, PartialEq)]
pub struct AsOf {
    pub then: Resolution,
    pub now: Resolution,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AsOfDialog {
    pub read: ReadRecord,
    pub result: Option<Result<AsOf, String>>,
}

/// A target scope worth proposing, and the evidence for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    pub scope: Scope,
    pub why: String,
}

/// What a rescope to one target would do, read from the store with the write path's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RescopePreview {
    pub to: Scope,
    pub effects: Vec<String>,
    /// Why the store would refuse it (nothing would change).
    pub refusal: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RescopeDialog {
    pub record: MemoryRecord,
    /// The target scope as typed (or suggested).
    pub target: String,
    /// Typing into the target (the keys are text) rather than y/n.
    pub editing: bool,
    /// Loaded with the first preview.
    pub suggestions: Option<Vec<Suggestion>>,
    /// Which suggestion the target holds, when it holds one.
    pub suggestion: Option<usize>,
    /// `Err`: the target is not a scope.
    pub preview: Option<Result<RescopePreview, String>>,
}

impl RescopeDialog {
    pub fn new(record: MemoryRecord) -> RescopeDialog {
        RescopeDialog {
            record,
            target: String::new(),
            editing: false,
            suggestions: None,
            suggestion: None,
            preview: None,
        }
    }
}

/// An earlier version to revert to.
#[derive(Debug, Clone, PartialEq)]
pub struct RevertChoice {
    pub version: i64,
    /// `None` when its content was purged.
    pub value: Option<Value>,
    pub at: String,
    pub source: Option<String>,
    pub valid_until: Option<String>,
    /// What choosing it does, or why the store would refuse it.
    pub effect: Result<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RevertDialog {
    pub record: MemoryRecord,
    /// Earlier versions, newest first (the default is the previous one).
    pub choices: Option<Result<Vec<RevertChoice>, String>>,
    pub choice: usize,
    /// Digits typed so far (a version number).
    pub typed: String,
}

impl RevertDialog {
    pub fn chosen(&self) -> Option<&RevertChoice> {
        match &self.choices {
            Some(Ok(c)) => c.get(self.choice),
            _ => None,
        }
    }
}

fn digit(key: &KeyEvent) -> Option<char> {
    match key.code {
        KeyCode::Char(c) if c.is_ascii_digit() => Some(c),
        _ => None,
    }
}

impl App {
    pub fn selected_read(&self) -> Option<&ReadRecord> {
        self.reads.selected()
    }

    /// A key in the Reads filter line.
    pub(super) fn reads_filter_key(&mut self, cmd: Option<Command>, c: Option<char>) -> Action {
        let r = &mut self.reads;
        match cmd {
            Some(Command::KeepFilter) => {
                r.editing = false;
                Action::None
            }
            Some(Command::ClearFilter) => {
                r.editing = false;
                r.input.clear();
                Action::LoadReads
            }
            Some(Command::Erase) => {
                r.input.pop();
                Action::LoadReads
            }
            Some(Command::Up) => {
                r.rows.step(Motion::Up(1), 1);
                Action::None
            }
            Some(Command::Down) => {
                r.rows.step(Motion::Down(1), 1);
                Action::None
            }
            _ => match c {
                Some(c) => {
                    r.input.push(c);
                    Action::LoadReads
                }
                None => Action::None,
            },
        }
    }

    /// Says why there is no read to act on.
    fn no_read(&mut self) {
        if self.reads.loading() {
            self.info("the read log is still loading");
        } else {
            self.info(
                "no logged read here: agents log them with `memscope resolve --log --agent NAME`",
            );
        }
    }

    pub(super) fn explain_read(&mut self) -> Action {
        let Some(read) = self.selected_read().cloned() else {
            self.no_read();
            return Action::None;
        };
        let id = read.id;
        self.dialogs
            .push(Dialog::AsOf(AsOfDialog { read, result: None }));
        Action::ExplainRead(id)
    }

    /// Opens the history of the record a read got, with the version it got highlighted.
    pub(super) fn go_to_read_record(&mut self, read: &ReadRecord) -> Action {
        match TimelineMark::of_read(read, self.now) {
            Some(mark) => {
                self.dialogs.clear();
                Action::GoTo(mark)
            }
            None => {
                self.info("nothing applied to this read: there is no record to go to");
                Action::None
            }
        }
    }

    pub(super) fn as_of_key(&mut self, cmd: Option<Command>) -> Action {
        let Some(Dialog::AsOf(d)) = self.dialogs.last() else {
            return Action::None;
        };
        match cmd {
            Some(Command::GoToRecord) => {
                let read = d.read.clone();
                self.go_to_read_record(&read)
            }
            Some(Command::Cancel) => {
                self.dialogs.pop();
                Action::None
            }
            _ => Action::None,
        }
    }

    pub(super) fn rescope(&mut self) -> Action {
        if !self.writable() {
            return Action::None;
        }
        let Some(rec) = self.list.selected_record().cloned() else {
            self.info("select a record to rescope (a group header is not a memory)");
            return Action::None;
        };
        let mut dialog = RescopeDialog::new(rec);
        // Only a global value gets a suggested target; elsewhere the human types it.
        dialog.editing = dialog.record.scope != Scope::Global;
        self.dialogs.push(Dialog::Rescope(dialog));
        Action::PreviewRescope
    }

    pub(super) fn rescope_key(&mut self, cmd: Option<Command>, key: &KeyEvent) -> Action {
        let typed = super::app::typed(key);
        let Some(Dialog::Rescope(d)) = self.dialogs.last_mut() else {
            return Action::None;
        };
        let cycle = |d: &mut RescopeDialog, forward: bool| -> bool {
            let n = d.suggestions.as_ref().map_or(0, |s| s.len());
            if n == 0 {
                return false;
            }
            let i = match (d.suggestion, forward) {
                (None, true) => 0,
                (None, false) => n - 1,
                (Some(i), true) => (i + 1) % n,
                (Some(i), false) => (i + n - 1) % n,
            };
            if let Some(s) = d.suggestions.as_ref().and_then(|s| s.get(i)) {
                d.target = s.scope.to_string();
            }
            d.suggestion = Some(i);
            true
        };
        if d.editing {
            match cmd {
                Some(Command::DoneEditing) => {
                    d.editing = false;
                    return Action::None;
                }
                Some(Command::Erase) => {
                    d.target.pop();
                }
                Some(Command::ClearField) => d.target.clear(),
                Some(Command::NextChoice) => {
                    if !cycle(d, true) {
                        return Action::None;
                    }
                    return Action::PreviewRescope;
                }
                _ => match typed.filter(|c| !c.is_whitespace()) {
                    Some(c) => d.target.push(c),
                    None => return Action::None,
                },
            }
            d.suggestion = None;
            return Action::PreviewRescope;
        }
        match cmd {
            Some(Command::Confirm) => match &d.preview {
                Some(Ok(p)) => match &p.refusal {
                    None => {
                        let curation = Curation::Rescope {
                            identity: d.record.identity(),
                            to: p.to.clone(),
                        };
                        self.dialogs.pop();
                        return Action::Apply(curation);
                    }
                    Some(why) => {
                        let why = why.clone();
                        self.error(why);
                    }
                },
                Some(Err(e)) => {
                    let e = e.clone();
                    self.error(e);
                }
                None => self.info("the preview is still loading"),
            },
            Some(Command::Cancel) => {
                self.dialogs.pop();
                self.info("cancelled: nothing changed");
            }
            Some(Command::EditField) => d.editing = true,
            Some(Command::NextChoice) | Some(Command::PrevChoice) => {
                if cycle(d, cmd == Some(Command::NextChoice)) {
                    return Action::PreviewRescope;
                }
                self.info("no suggested target: e types one (repo:<id>, task:<id> or global)");
            }
            _ => {}
        }
        Action::None
    }

    pub(super) fn revert(&mut self) -> Action {
        if !self.writable() {
            return Action::None;
        }
        let Some(rec) = self.list.selected_record().cloned() else {
            self.info("select a record to revert (a group header is not a memory)");
            return Action::None;
        };
        if rec.version <= 1 {
            self.info(format!(
                "{} is at v1: there is no earlier version to revert to",
                rec.identity()
            ));
            return Action::None;
        }
        self.dialogs.push(Dialog::Revert(RevertDialog {
            record: rec,
            choices: None,
            choice: 0,
            typed: String::new(),
        }));
        Action::PreviewRevert
    }

    pub(super) fn revert_key(&mut self, cmd: Option<Command>, key: &KeyEvent) -> Action {
        let Some(Dialog::Revert(d)) = self.dialogs.last_mut() else {
            return Action::None;
        };
        let len = match &d.choices {
            Some(Ok(c)) => c.len(),
            _ => 0,
        };
        match cmd {
            Some(Command::Confirm) => match (d.chosen(), &d.choices) {
                (Some(c), _) => match &c.effect {
                    Ok(_) => {
                        let curation = Curation::Revert {
                            identity: d.record.identity(),
                            to_version: c.version,
                        };
                        self.dialogs.pop();
                        return Action::Apply(curation);
                    }
                    Err(why) => {
                        let why = why.clone();
                        self.error(why);
                    }
                },
                (None, Some(Err(e))) => {
                    let e = e.clone();
                    self.error(e);
                }
                (None, Some(Ok(_))) => self.error("there is no earlier version to revert to"),
                (None, None) => self.info("the versions are still loading"),
            },
            Some(Command::Cancel) => {
                self.dialogs.pop();
                self.info("cancelled: nothing changed");
            }
            Some(Command::NextChoice) => {
                d.typed.clear();
                d.choice = (d.choice + 1).min(len.saturating_sub(1));
            }
            Some(Command::PrevChoice) => {
                d.typed.clear();
                d.choice = d.choice.saturating_sub(1);
            }
            Some(Command::Digit) => {
                let Some(c) = digit(key) else {
                    return Action::None;
                };
                let Some(Ok(choices)) = &d.choices else {
                    return Action::None;
                };
                // "1" then "2" means v12 when there is one, else v2.
                let find = |text: &str| {
                    let n: i64 = text.parse().ok()?;
                    choices.iter().position(|x| x.version == n)
                };
                let longer = format!("{}{c}", d.typed);
                let (text, found) = match find(&longer) {
                    Some(i) => (longer, Some(i)),
                    None => (c.to_string(), find(&c.to_string())),
                };
                match found {
                    Some(i) => {
                        d.choice = i;
                        d.typed = text;
                    }
                    None => {
                        let names: Vec<String> =
                            choices.iter().map(|x| format!("v{}", x.version)).collect();
                        d.typed.clear();
                        let text = format!(
                            "no earlier version v{text}: the choices are {}",
                            names.join(", ")
                        );
                        self.info(text);
                    }
                }
            }
            _ => {}
        }
        Action::None
    }

    /// Back on the Reads tab: leave the detail, then clear the filter.
    pub(super) fn reads_back(&mut self) -> Action {
        if self.focus == Focus::Detail {
            self.focus = Focus::List;
            Action::None
        } else if self.reads.active() {
            self.reads.input.clear();
            Action::LoadReads
        } else {
            Action::None
        }
    }

    pub(super) fn reads_command(&mut self, cmd: Command) -> Option<Action> {
        if self.tab != Tab::Reads {
            return None;
        }
        Some(match cmd {
            Command::Filter => {
                self.reads.editing = true;
                self.focus = Focus::List;
                Action::None
            }
            Command::CycleSince => {
                self.reads.since = self.reads.since.next();
                Action::LoadReads
            }
            Command::ExplainRead => self.explain_read(),
            Command::GoToRecord => match self.selected_read().cloned() {
                Some(read) => self.go_to_read_record(&read),
                None => {
                    self.no_read();
                    Action::None
                }
            },
            Command::Back => self.reads_back(),
            _ => return None,
        })
    }
}
