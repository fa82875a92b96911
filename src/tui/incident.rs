//! The wrong-tool incident loop in the UI, what the Reads tab (`tabs::reads`) and the as-of,
//! rescope and revert dialogs (`dialogs`) share: the `since` window, a read's context, the
//! version a read got (`TimelineMark`),

use super::app::App;
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
}
