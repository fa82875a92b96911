//! The history log's vocabulary (docs/SCHEMA.md, "history"), the same on every backend: each
//! event a store operation logs is named by an [`EventKind`].

use crate::model::HistoryEvent;

/// What happened to an identity (the `event` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// A version stored (the write path logs most through its prepared statement; this is
    /// for one that carries a detail: a suspect's evidence).
    Set,
    Confirmed,
    Stale,
    Rejected,
    Deleted,
    Restored,
    PendingResolved,
    TombstoneCollected,
    Rescoped,
    Reverted,
    Removed,
    Merged,
}

impl EventKind {
    /// Every kind memscope writes.
    pub(crate) const ALL: [EventKind; 12] = [
        EventKind::Set,
        EventKind::Confirmed,
        EventKind::Stale,
        EventKind::Rejected,
        EventKind::Deleted,
        EventKind::Restored,
        EventKind::PendingResolved,
        EventKind::TombstoneCollected,
        EventKind::Rescoped,
        EventKind::Reverted,
        EventKind::Removed,
        EventKind::Merged,
    ];

    /// Whether `kind` is one memscope writes (`check` flags any other).
    pub(crate) fn is_known(kind: &str) -> bool {
        EventKind::ALL.iter().any(|k| k.as_str() == kind)
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventKind::Set => "set",
            EventKind::Confirmed => "confirmed",
            EventKind::Stale => "stale",
            EventKind::Rejected => "rejected",
            EventKind::Deleted => "deleted",
            EventKind::Restored => "restored",
            EventKind::PendingResolved => "pending_resolved",
            EventKind::TombstoneCollected => "tombstone_collected",
            EventKind::Rescoped => "rescoped",
            EventKind::Reverted => "reverted",
            EventKind::Removed => "removed",
            EventKind::Merged => "merged",
        }
    }
}

/// Fills `valid_until` of each `set` event: the time of the next event that ended it in the
/// same scope (a newer version, a delete, a removal).
pub(crate) fn mark_validity(events: &mut [HistoryEvent]) {
    let mut open: std::collections::HashMap<String, usize> = Default::default();
    for i in 0..events.len() {
        let ends = matches!(events[i].event.as_str(), "set" | "deleted" | "removed");
        if ends {
            if let Some(j) = open.remove(&events[i].scope) {
                events[j].valid_until = Some(events[i].at.clone());
            }
        }
        if events[i].event == "set" {
            open.insert(events[i].scope.clone(), i);
        }
    }
}

/// The stretches of time in which an identity held a current record, as `[from, until]`,
/// from its `set`, `removed` and `deleted` events (`(event, at)`, oldest first); one still
/// open ends `now`.
pub(crate) fn live_intervals(events: Vec<(String, String)>, now: &str) -> Vec<[String; 2]> {
    let mut out = Vec::new();
    let mut open: Option<String> = None;
    for (event, at) in events {
        match event.as_str() {
            "set" if open.is_none() => open = Some(at),
            "removed" | "deleted" => {
                if let Some(from) = open.take() {
                    out.push([from, at]);
                }
            }
            _ => {}
        }
    }
    if let Some(from) = open {
        out.push([from, now.to_string()]);
    }
    out
}

/// Whether a pending item (its `candidates` as stored, and the scope it was resolved into)
/// names one of `scopes`: a delete of those destroys it.
pub(crate) fn pending_names(candidates: &str, resolved: Option<&str>, scopes: &[String]) -> bool {
    let candidates: Vec<String> = serde_json::from_str(candidates).unwrap_or_default();
    candidates.iter().any(|c| scopes.contains(c))
        || resolved.is_some_and(|r| scopes.iter().any(|s| s == r))
}

/// What a delete left of one identity, read back inside its transaction: content rows of
/// history, current records, the tombstone's version.
pub(crate) struct Left {
    pub history: i64,
    /// Of those, the rows that are not a tombstone's own trail — `deleted`, and the `rejected`
    /// and `pending_resolved` events that record writes refused because of it (no content).
    pub beyond_trail: i64,
    pub records: i64,
    pub tombstone: Option<i64>,
}

impl Left {
    /// The tombstone's version when the identity is already deleted with nothing of it left to
    /// destroy — tombstoned, no current record, no history but the tombstone's trail, and
    /// (`pending`) no pending item naming it: a delete covering it leaves it as it is, with no
    /// second `deleted` event, its tombstone's version unchanged and the record of refused
    /// writes kept (README, "delete, restore, gc").
    pub fn nothing_to_destroy(&self, pending: bool) -> Option<i64> {
        (self.beyond_trail == 0 && self.records == 0 && !pending)
            .then_some(self.tombstone)
            .flatten()
    }
}

/// Refuses a delete the database did not carry out: a trigger, rule or row policy that is not
/// memscope's can make a DELETE do nothing (or undo a tombstone) without an error, and the
/// report would claim a purge that did not happen. The caller's transaction rolls back.
pub(crate) fn check_carried_out(
    id: &crate::model::Identity,
    left: Left,
    version: i64,
) -> anyhow::Result<()> {
    if left.history == 0 && left.records == 0 && left.tombstone == Some(version) {
        return Ok(());
    }
    anyhow::bail!(
        "the database did not carry out the delete of {id} ({} history rows with content and {} current records remain, tombstone {}): a trigger, rule or row policy that is not memscope's suppressed it, so nothing was deleted — run `memscope check` and remove what a raw SQL client added",
        left.history,
        left.records,
        match left.tombstone {
            Some(v) if v == version => format!("v{v} in place"),
            Some(v) => format!("at v{v} instead of v{version}"),
            None => "missing".to_string(),
        }
    )
}

/// Refuses a delete whose pending items outlived their DELETE (see [`check_carried_out`]).
pub(crate) fn check_pending_gone(remaining: &[i64]) -> anyhow::Result<()> {
    if remaining.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "the database did not carry out the delete: pending items {remaining:?} remain after their DELETE (a trigger, rule or row policy that is not memscope's suppressed it), so nothing was deleted — run `memscope check` and remove what a raw SQL client added"
    )
}
