//! Why the store refuses a revert or a rescope, as data. The decision is the store's
//! (`store::incident`); a refusal travels inside the `anyhow::Error` the call returns, so a front
//! end that only prints shows its `Display` — the command line's sentence, advice in flags —
//! and one that has keys instead (the UI) finds it with [`RevertRefusal::of`] or
//! [`RescopeRefusal::of`] and words the same advice its own way.

use crate::model::{shell_word, Identity, OutcomeKind};
use std::fmt;

/// Why a revert changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevertRefusal {
    /// The identity is tombstoned.
    Deleted { id: Identity },
    /// Nothing was ever stored at the identity.
    NeverWritten { id: Identity },
    /// A version number below 1 was named.
    NoSuchVersion { id: Identity, version: i64 },
    /// No version was named, and the identity has no current record to go back from.
    NoCurrentRecord { id: Identity },
    /// The version named is the current one or a later one.
    NotEarlier {
        id: Identity,
        current: i64,
        to_version: i64,
    },
    /// No version was named, and no earlier value comes back by default.
    NothingEarlier {
        id: Identity,
        current: i64,
        because: NothingEarlier,
    },
    /// The version named is not in the history (a delete destroyed it).
    NotInHistory { id: Identity, version: i64 },
    /// The content of the version named was purged (retention or a delete's purge).
    Purged { id: Identity, version: i64 },
}

/// Why no earlier value comes back by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NothingEarlier {
    /// What came before was moved to another scope by a rescope (a revert to it by number
    /// brings it back on purpose); `holds`: the earlier version whose value the current one
    /// holds again, when a rescope's return made it (found by review: the dialog listed that
    /// version while the sentence said everything before was moved).
    Moved { holds: Option<i64> },
    /// The current version is the first since a delete and a restore.
    Restored,
    /// The current version is the first.
    First,
}

/// Why a rescope moves nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RescopeRefusal {
    /// The target is the scope the record is in.
    SamePlace { id: Identity },
    /// The source has no current record.
    NothingToMove { from: Identity },
    /// The target is tombstoned (its tombstone's version).
    TargetDeleted { to: Identity, tombstone: i64 },
    /// The target's write path did not take the value (`outcome`, with the write path's
    /// reason); for a stale move, what gets the value there instead.
    TargetRefused {
        to: Identity,
        outcome: OutcomeKind,
        reason: String,
        instead: Option<Instead>,
    },
}

/// What gets a value into a rescope's target when the target holds a causally newer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instead {
    /// The value was moved out of the target as its version `version`: a revert of the target
    /// to that version brings it back.
    RevertTo { version: i64 },
    /// The newer value is the target's only version: write the value there again.
    WriteAgain,
    /// A revert of the target to an earlier version, named by number.
    RevertByNumber,
}

/// The refusal `e` carries, itself or as one of its causes.
fn find<T: std::error::Error + Send + Sync + 'static>(e: &anyhow::Error) -> Option<&T> {
    e.chain().find_map(|c| c.downcast_ref::<T>())
}

impl RevertRefusal {
    /// The revert refusal `e` carries, if it is one.
    pub fn of(e: &anyhow::Error) -> Option<&RevertRefusal> {
        find(e)
    }
}

impl RescopeRefusal {
    /// The rescope refusal `e` carries, if it is one.
    pub fn of(e: &anyhow::Error) -> Option<&RescopeRefusal> {
        find(e)
    }
}

/// The command line's revert of `id` to version `n`, quoted.
fn revert_command(id: &Identity, n: &str) -> String {
    format!(
        "`memscope revert --subject {} --predicate {} --scope {} --to-version {n}`",
        shell_word(&id.subject),
        shell_word(&id.predicate),
        shell_word(&id.scope.to_string()),
    )
}

impl fmt::Display for RevertRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RevertRefusal::Deleted { id } => write!(
                f,
                "{id} is deleted: restore it before reverting (`memscope restore`)"
            ),
            RevertRefusal::NeverWritten { id } => write!(
                f,
                "{id} has no history: nothing was ever stored there, so there is nothing to revert (check its subject, predicate and scope: `memscope list`)"
            ),
            RevertRefusal::NoSuchVersion { id, version } => write!(
                f,
                "{id} has no version {version}: versions start at 1 (`memscope history` lists them)"
            ),
            RevertRefusal::NoCurrentRecord { id } => write!(
                f,
                "{id} has no current record: name the version to bring back with --to-version"
            ),
            RevertRefusal::NotEarlier { id, current, .. } => write!(
                f,
                "{id} is at v{current}: --to-version must name an earlier version"
            ),
            RevertRefusal::NothingEarlier {
                id,
                current,
                because,
            } => match because {
                NothingEarlier::Moved { holds } => write!(
                    f,
                    "{id} has no earlier value to revert to: {} (see `memscope history`; --to-version N brings a moved value back on purpose)",
                    moved_before(*current, *holds)
                ),
                NothingEarlier::Restored => write!(
                    f,
                    "{id} has no earlier value to revert to: v{current} is the first since it was deleted and restored (a delete destroys the versions before it)"
                ),
                NothingEarlier::First => write!(f, "{id} has no version before v1 to revert to"),
            },
            RevertRefusal::NotInHistory { id, version } => write!(
                f,
                "{id} has no version {version} in its history (a delete destroys the versions before it): see `memscope history`"
            ),
            RevertRefusal::Purged { id, version } => write!(
                f,
                "the content of {id} v{version} was purged (retention or delete): there is nothing to revert to"
            ),
        }
    }
}

impl fmt::Display for RescopeRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RescopeRefusal::SamePlace { id } => write!(
                f,
                "{id} is already in {}: rescoping it there moves nothing — choose another scope",
                id.scope
            ),
            RescopeRefusal::NothingToMove { from } => write!(
                f,
                "{from} has no current record to move: see `memscope list`"
            ),
            RescopeRefusal::TargetDeleted { to, tombstone } => write!(
                f,
                "{to} is deleted (tombstone v{tombstone}): restore it first, or choose another target; nothing changed"
            ),
            RescopeRefusal::TargetRefused {
                to,
                outcome,
                reason,
                instead,
            } => {
                write!(f, "{to} refused the value ({outcome}: {reason}); nothing changed")?;
                match instead {
                    None => Ok(()),
                    Some(Instead::RevertTo { version }) => write!(
                        f,
                        ": this value was moved out of {} as its v{version}; to bring it back there on purpose, revert to that version ({})",
                        to.scope,
                        revert_command(to, &version.to_string())
                    ),
                    Some(Instead::WriteAgain) => write!(
                        f,
                        ": {} keeps its newer value — to replace it with this one, write the value there again (a new write is causally newer)",
                        to.scope
                    ),
                    Some(Instead::RevertByNumber) => write!(
                        f,
                        ": to make an earlier value current in {} again, revert to it by number ({}; `memscope history` lists them)",
                        to.scope,
                        revert_command(to, "N")
                    ),
                }
            }
        }
    }
}

impl std::error::Error for RevertRefusal {}
impl std::error::Error for RescopeRefusal {}

/// Why a plain revert of a version at `current` finds nothing: what came before it was moved by
/// a rescope — besides v`holds`, whose value it holds again.
pub(crate) fn moved_before(current: i64, holds: Option<i64>) -> String {
    match holds {
        Some(h) => format!(
            "v{current} holds the value of v{h} again, and every other value before it was moved to another scope by a rescope"
        ),
        None => format!("what came before v{current} was moved to another scope by a rescope"),
    }
}
