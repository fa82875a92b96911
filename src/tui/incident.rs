//! The wrong-tool incident loop in the UI: the Reads tab (what agents were told), a read
//! explained as of its time, a jump to the winning record's timeline, and the two repairs on a
//! record — rescope (`m`) and revert (`v`) — each through a dialog that states the effect
//! before `y`. State and key handling only: the session loads and previews from the store.

use super::app::{Action, App, Dialog, Focus, Tab};
use super::dialogs::{AsOfDialog, RescopeDialog, RevertDialog};
use super::keymap::Command;
use super::list::Motion;
use super::rows::Rows;
use super::worker::ReadsQuery;
use crate::model::{Identity, ReadRecord, Scope};
use chrono::{DateTime, Duration, Utc};

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

    /// The query for the read log as the filter and window want it now; the newest asked.
    pub fn request(&mut self, now: DateTime<Utc>) -> ReadsQuery {
        let query = self.query(now);
        self.wanted = Some(query.clone());
        query
    }

    /// The loader's rows for `query`, unless a newer query was asked since; the same read
    /// stays selected when it is still listed. An error is the loader's, to show.
    pub fn take(
        &mut self,
        query: ReadsQuery,
        rows: Result<Vec<ReadRecord>, String>,
    ) -> Result<(), String> {
        if self.wanted.as_ref() != Some(&query) {
            return Ok(());
        }
        self.shown = Some(query);
        let rows = rows?;
        self.rows.set_keeping(rows, |old, new| old.id == new.id);
        Ok(())
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

/// What `g` on a read says when nothing applied to it.
pub const NO_RECORD: &str = "nothing applied to this read: there is no record to go to";

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
                self.info(NO_RECORD);
                Action::None
            }
        }
    }

    pub(super) fn rescope(&mut self) -> Action {
        let Some(rec) = self.record_to_curate("rescope") else {
            return Action::None;
        };
        let mut dialog = RescopeDialog::new(rec);
        // Only a global value gets a suggested target; elsewhere the human types it.
        dialog.editing = dialog.record.scope != Scope::Global;
        self.dialogs.push(Dialog::Rescope(dialog));
        Action::PreviewRescope
    }

    pub(super) fn revert(&mut self) -> Action {
        let Some(rec) = self.record_to_curate("revert") else {
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
