//! The incident loop's rules, backend-neutral (README, "Debugging a wrong-tool incident"): what
//! an identity held at a past moment, read from its history; resolution as of that moment; and
//! what the two repairs do — revert (an earlier value current again, as a new version) and
//! rescope (a mis-scoped value moved, its old place returned to what it held before). A backend
//! reads the rows, locks and writes through its write path; the decisions are here, once, and
//! a refusal is a typed `store::refusal` (its sentence the command line's).

use super::decide::not_found;
use super::decide::Spelling;
use super::prepared::{base_outcome, PreparedWrite};
use super::refusal::{Instead, NothingEarlier, RescopeRefusal, RevertRefusal};
use crate::model::{Considered, Identity, OutcomeKind, Resolution, Scope, WriteOutcome};
use anyhow::{anyhow, Result};
use serde_json::{json, Value};

/// One history row as the as-of walk reads it; times are RFC 3339 text in UTC with
/// milliseconds (both backends' format), so text order is time order.
pub(crate) struct HistoryAt {
    pub event: String,
    pub version: Option<i64>,
    pub value: Option<String>,
    pub source: Option<String>,
    pub at: String,
    pub detail: Option<String>,
}

/// What one identity held at a moment, reconstructed from its history.
pub(crate) enum StateAt {
    Absent,
    Live {
        version: i64,
        value: Option<Value>,
        source: Option<String>,
        at: String,
    },
    /// It held a record then, whose content a later delete destroyed.
    PurgedLater {
        deleted_at: String,
    },
    Deleted,
}

/// The identity's state at `at`, from its history rows in log order.
pub(crate) fn state_at(rows: impl Iterator<Item = Result<HistoryAt>>, at: &str) -> Result<StateAt> {
    let mut state = StateAt::Absent;
    for row in rows {
        let r = row?;
        if r.at.as_str() > at {
            // A later delete that purged versions live at `at` still tells us it existed.
            if r.event == "deleted" && !matches!(state, StateAt::Live { .. }) {
                let was_live = r
                    .detail
                    .and_then(|d| serde_json::from_str::<Value>(&d).ok())
                    .and_then(|d| d.get("live_intervals").cloned())
                    .and_then(|v| serde_json::from_value::<Vec<[String; 2]>>(v).ok())
                    .is_some_and(|spans| {
                        spans
                            .iter()
                            .any(|[from, until]| from.as_str() <= at && at < until.as_str())
                    });
                if was_live {
                    return Ok(StateAt::PurgedLater { deleted_at: r.at });
                }
            }
            continue;
        }
        match r.event.as_str() {
            "set" => {
                state = StateAt::Live {
                    version: r.version.unwrap_or_default(),
                    value: r.value.and_then(|v| serde_json::from_str(&v).ok()),
                    source: r.source,
                    at: r.at,
                };
            }
            "deleted" => state = StateAt::Deleted,
            // A collected tombstone ends the deletion as a restore does (found by an
            // exploratory test: `--at` after gc's collection still said deleted).
            "removed" | "restored" | "tombstone_collected" => state = StateAt::Absent,
            _ => {}
        }
    }
    Ok(state)
}

/// Resolution as it stood at a moment: `states` are the chain's scopes, most specific first,
/// each with its state then. Purged content shows as existing but deleted, without a value.
pub(crate) fn resolution_at(
    subject: String,
    predicate: String,
    states: Vec<(String, StateAt)>,
) -> Resolution {
    let mut considered = Vec::new();
    // (scope, value, version, source) of the scope that wins.
    type Winner = (String, Option<Value>, Option<i64>, Option<String>);
    let mut winner: Option<Winner> = None;
    for (scope_text, state) in states {
        let wins = winner.is_none();
        let c = match state {
            StateAt::Live {
                version,
                value,
                source,
                at,
            } => {
                if wins {
                    winner = Some((
                        scope_text.clone(),
                        value.clone(),
                        Some(version),
                        source.clone(),
                    ));
                }
                let state = match (wins, value.is_some()) {
                    (true, true) => "wins",
                    (true, false) => "wins (content purged)",
                    (false, true) => "shadowed",
                    // Found by an exploratory test: a shadowed version whose content was
                    // destroyed showed no value, unmarked.
                    (false, false) => "shadowed (content purged)",
                };
                Considered {
                    scope: scope_text,
                    found: true,
                    value,
                    wins,
                    version: Some(version),
                    source,
                    updated_at: Some(at),
                    state: state.into(),
                    deleted_at: None,
                }
            }
            StateAt::PurgedLater { deleted_at } => {
                if wins {
                    winner = Some((scope_text.clone(), None, None, None));
                }
                Considered {
                    scope: scope_text,
                    found: true,
                    value: None,
                    wins,
                    version: None,
                    source: None,
                    updated_at: None,
                    state: format!(
                        "{} (existed; deleted {deleted_at}, content destroyed)",
                        if wins { "wins" } else { "shadowed" }
                    ),
                    deleted_at: Some(deleted_at),
                }
            }
            StateAt::Deleted => not_found(scope_text, "deleted"),
            StateAt::Absent => not_found(scope_text, "absent"),
        };
        considered.push(c);
    }
    Resolution {
        found: winner.is_some(),
        subject,
        predicate,
        value: winner.as_ref().and_then(|w| w.1.clone()),
        scope: winner.as_ref().map(|w| w.0.clone()),
        version: winner.as_ref().and_then(|w| w.2),
        source: winner.and_then(|w| w.3),
        considered,
    }
}

/// What a revert does to an identity.
pub(crate) enum RevertStep {
    /// No earlier version and the caller (rescope) asked for it: the current record leaves the
    /// current view (a `removed` event).
    Remove { version: i64, previous: Value },
    /// Version `target`'s content is written again, as a new version, through the write path.
    Restore { target: i64 },
}

/// What an identity's `reverted` and `removed` events since its last delete say about its
/// versions: the versions `rescope` moved out of its scope, and the versions a revert wrote,
/// with the version whose value each brought back.
#[derive(Default)]
pub(crate) struct Reverts {
    moved: Vec<i64>,
    /// (version written, version brought back, written by a rescope's move).
    written: Vec<(i64, i64, bool)>,
}

impl Reverts {
    /// Notes one event (others are ignored).
    pub(crate) fn note(&mut self, event: &str, version: Option<i64>, detail: Option<&str>) {
        let Some(detail) = detail.and_then(|d| serde_json::from_str::<Value>(d).ok()) else {
            return;
        };
        let by_rescope = detail.get("rescoped_to").is_some();
        if by_rescope {
            if let Some(moved) = detail.get("moved_version").and_then(Value::as_i64) {
                self.moved.push(moved);
            }
        }
        let back_to = detail.get("reverted_to").and_then(Value::as_i64);
        if let (Some(written), Some(back_to), "reverted") = (version, back_to, event) {
            self.written.push((written, back_to, by_rescope));
        }
    }

    /// The version whose value `version` holds, if a revert wrote it (only a rescope's move,
    /// unless `any`).
    fn back_to(&self, version: i64, any: bool) -> Option<i64> {
        self.written
            .iter()
            .rev()
            .find(|&&(w, _, by_rescope)| w == version && (any || by_rescope))
            .map(|&(_, b, _)| b)
    }
}

/// The version a revert brings back by default.
pub(crate) enum Earlier {
    Version(i64),
    /// Nothing was set before the current version since the identity was last deleted.
    None,
    /// Only values `rescope` moved to another scope came before — besides, when the current
    /// version holds an earlier one's value again (a rescope's return to it), that version.
    Moved {
        holds: Option<i64>,
    },
}

/// The last version set before `current` (`set_below(v)`: the last `set` version below `v`
/// since the identity was last deleted — a restore starts it afresh, its earlier content
/// destroyed), passing over what `rescope` moved out of this scope: a value moved away as
/// mis-scoped must not come back by a later revert or move. A moved version that a revert
/// wrote took its value from an earlier version, which is passed over too; and when the
/// current version is a move's, what came before it is what came before the value it holds.
/// (A plain revert's version keeps "the version before" — reverting it again undoes it.)
pub(crate) fn earlier_version(
    current: i64,
    reverts: &Reverts,
    mut set_below: impl FnMut(i64) -> Result<Option<i64>>,
) -> Result<Earlier> {
    // A move's version holds an earlier version's value, which may itself be a move's or a
    // revert's: follow the value back to the version that first held it.
    let first_holder = |mut v: i64| {
        while let Some(b) = reverts.back_to(v, true).filter(|&b| b < v) {
            v = b;
        }
        v
    };
    let mut below = match reverts.back_to(current, false) {
        Some(b) if b < current => first_holder(b),
        _ => current,
    };
    let holds = (below != current).then_some(below);
    let mut passed_a_move = holds.is_some();
    while let Some(v) = set_below(below)? {
        if !reverts.moved.contains(&v) {
            return Ok(Earlier::Version(v));
        }
        below = first_holder(v);
        passed_a_move = true;
    }
    Ok(if passed_a_move {
        Earlier::Moved { holds }
    } else {
        Earlier::None
    })
}

/// Decides a revert of `id` to `to_version` (default: `earlier`, see [`earlier_version`]),
/// given its current record (version and value) and whether it is tombstoned; or the
/// [`RevertRefusal`] refusing it.
pub(crate) fn revert_step(
    id: &Identity,
    to_version: Option<i64>,
    current: Option<(i64, Value)>,
    earlier: Earlier,
    tombstoned: bool,
    has_history: bool,
    remove_if_none: bool,
) -> Result<RevertStep> {
    if tombstoned {
        return Err(RevertRefusal::Deleted { id: id.clone() }.into());
    }
    if !has_history {
        return Err(RevertRefusal::NeverWritten { id: id.clone() }.into());
    }
    if let Some(version) = to_version.filter(|&n| n < 1) {
        return Err(RevertRefusal::NoSuchVersion {
            id: id.clone(),
            version,
        }
        .into());
    }
    let moved = match earlier {
        Earlier::Moved { holds } => Some(holds),
        _ => None,
    };
    let target = match (to_version, &current) {
        (Some(n), _) => Some(n),
        (None, Some(_)) => match earlier {
            Earlier::Version(v) => Some(v),
            Earlier::None | Earlier::Moved { .. } => None,
        },
        (None, None) => return Err(RevertRefusal::NoCurrentRecord { id: id.clone() }.into()),
    };
    if let (Some(target), Some((version, _))) = (target, &current) {
        if target >= *version {
            return Err(RevertRefusal::NotEarlier {
                id: id.clone(),
                current: *version,
                to_version: target,
            }
            .into());
        }
    }
    if let Some(target) = target.filter(|&t| t >= 1) {
        return Ok(RevertStep::Restore { target });
    }
    if !remove_if_none {
        let (current, because) = match (to_version, &current) {
            (None, Some((version, _))) if moved.is_some() => (
                *version,
                NothingEarlier::Moved {
                    holds: moved.flatten(),
                },
            ),
            (None, Some((version, _))) if *version > 1 => (*version, NothingEarlier::Restored),
            _ => (1, NothingEarlier::First),
        };
        return Err(RevertRefusal::NothingEarlier {
            id: id.clone(),
            current,
            because,
        }
        .into());
    }
    let (version, previous) = current.ok_or_else(|| anyhow!("{id} has no current record"))?;
    Ok(RevertStep::Remove { version, previous })
}

/// A stored version's value, raw words and source (each `None` once purged).
pub(crate) type VersionContent = (Option<String>, Option<String>, Option<String>);

/// What a [`RevertStep::Restore`] does, once its version's stored content is read.
pub(crate) enum Restoring {
    /// The write that brings the version back.
    Write(Box<PreparedWrite>),
    /// The version's content was purged and the caller (rescope's return to the earlier value)
    /// takes removal instead: the current record leaves the current view.
    Remove {
        version: i64,
        previous: Value,
        purged: i64,
    },
}

/// The write that brings version `target` back, from its stored content. When that content
/// was purged (retention, or a delete's purge of a version kept in history), a revert has
/// nothing to write and is refused; rescope's return to the earlier value — `or_remove`, the
/// current version and value — removes the record instead, as when there is no earlier value:
/// the value moved out of the scope must leave it either way (README, "Debugging a wrong-tool
/// incident").
pub(crate) fn revert_write(
    id: &Identity,
    target: i64,
    content: Option<VersionContent>,
    or_remove: Option<(i64, Value)>,
) -> Result<Restoring> {
    let (value, raw, source) = content.ok_or_else(|| RevertRefusal::NotInHistory {
        id: id.clone(),
        version: target,
    })?;
    let Some(value_text) = value else {
        return match or_remove {
            Some((version, previous)) => Ok(Restoring::Remove {
                version,
                previous,
                purged: target,
            }),
            None => Err(RevertRefusal::Purged {
                id: id.clone(),
                version: target,
            }
            .into()),
        };
    };
    let mut w = PreparedWrite::stored(
        id,
        serde_json::from_str(&value_text)?,
        source.unwrap_or_else(|| format!("revert:v{target}")),
        raw,
        None,
    )?;
    // A revert brings back the version as it was spelled: after a `--respell` the current
    // value folds alike with the one it replaced, and a folded comparison would confirm the
    // correction instead of undoing it (found by review).
    w.spelling = Spelling::Exact;
    Ok(Restoring::Write(Box::new(w)))
}

/// The outcome of removing the current record (version `version`, value `previous`): there was
/// no earlier value, or the earlier value's content — version `purged` — is gone.
pub(crate) fn removed_outcome(
    id: &Identity,
    version: i64,
    previous: Value,
    purged: Option<i64>,
) -> WriteOutcome {
    let mut out = base_outcome(OutcomeKind::Removed, id);
    out.version = Some(version);
    out.previous = Some(previous);
    out.reason = Some(match purged {
        None => "it had no earlier value, so it leaves the current view".into(),
        Some(v) => format!(
            "the content of its earlier value, v{v}, was purged (retention or delete), so it leaves the current view: write the value it should hold again if you know it"
        ),
    });
    out
}

/// After a [`RevertStep::Restore`] wrote `out`: the `reverted` event's detail (the caller's,
/// with the target and outcome), and the outcome's reason.
pub(crate) fn reverted(out: &mut WriteOutcome, mut detail: Value, target: i64) -> Value {
    if let Value::Object(map) = &mut detail {
        map.insert("reverted_to".into(), json!(target));
        map.insert("outcome".into(), json!(out.outcome.as_str()));
    }
    out.reason = Some(format!("reverted to the value of v{target}"));
    out.reverted_to = Some(target);
    detail
}

/// A rescope whose two places are one.
pub(crate) fn rescope_same_place(from: &Identity, to: &Identity) -> Result<()> {
    if from == to {
        return Err(RescopeRefusal::SamePlace { id: from.clone() }.into());
    }
    Ok(())
}

/// A rescope's source with no current record.
pub(crate) fn rescope_nothing_to_move(from: &Identity) -> anyhow::Error {
    RescopeRefusal::NothingToMove { from: from.clone() }.into()
}

/// A rescope's target that is deleted.
pub(crate) fn rescope_target_deleted(to: &Identity, tombstone: i64) -> anyhow::Error {
    RescopeRefusal::TargetDeleted {
        to: to.clone(),
        tombstone,
    }
    .into()
}

/// Whether the target took the moved value; its event's detail when it did. A refusal as
/// stale says how to get there what the move could not: `came_from` asks the history which
/// version of the target the moved value was itself moved out of, if a rescope did that.
pub(crate) fn rescope_moved(
    to: &Identity,
    from: &Scope,
    from_version: i64,
    moved: &WriteOutcome,
    came_from: impl FnOnce() -> Result<Option<i64>>,
) -> Result<Value> {
    if !matches!(
        moved.outcome,
        OutcomeKind::Inserted | OutcomeKind::Confirmed | OutcomeKind::Superseded
    ) {
        // A causally newer value there (the value a rescope away from it brought back, say)
        // is not replaced by moving an older one in. A revert makes an earlier value current —
        // one named by number: a plain revert passes over what a rescope moved out (found by
        // review: the advice named a revert that was then refused).
        let instead = match moved.outcome {
            OutcomeKind::Stale => Some(match came_from()? {
                Some(version) => Instead::RevertTo { version },
                // Nothing earlier there to revert to: the newer value is the only one it had.
                None if moved.version == Some(1) => Instead::WriteAgain,
                None => Instead::RevertByNumber,
            }),
            _ => None,
        };
        return Err(RescopeRefusal::TargetRefused {
            to: to.clone(),
            outcome: moved.outcome,
            reason: moved.reason.clone().unwrap_or_default(),
            instead,
        }
        .into());
    }
    Ok(
        json!({ "from": from.to_string(), "from_version": from_version, "outcome": moved.outcome.as_str() }),
    )
}

/// The detail of the source's revert after a move: where the value went, the version moved,
/// and the version it became there (`events::moved_copies` reads it after a delete of the
/// target purged the target's own events).
pub(crate) fn rescope_back_detail(to: &Scope, moved_version: i64, became: Option<i64>) -> Value {
    json!({ "rescoped_to": to.to_string(), "moved_version": moved_version, "became": became })
}
