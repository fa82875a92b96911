//! The wrong-tool incident loop in the UI, what the Reads tab (`tabs::reads`) and the as-of,
//! rescope and revert dialogs (`dialogs`) share: the `since` window, a read's context, the
//! version a read got (`TimelineMark`), and the current view's `m` and `v` keys that open
//! the repairs.

use super::app::{Action, App, Dialog};
use super::dialogs::{RescopeDialog, RevertDialog};
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
        self.tabs.reads.selected()
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
}
