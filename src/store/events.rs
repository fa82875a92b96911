//! The history log's vocabulary (docs/SCHEMA.md, "history"), the same on every backend: each
//! event a store operation logs is named by an [`EventKind`].

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
