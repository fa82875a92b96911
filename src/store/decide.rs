//! The write rules (README, "The model in one minute": the write rules, in order), as one pure
//! function of what the database holds for an identity — the [`Probe`] — and what a write
//! brings. No SQL and no backend here: the SQLite write path probes, decides with
//! [`decide_write`] and applies; every preview (`Store::preview_write`, `Store::preview_pending`,
//! the UI's pending choices and rescope) probes and decides the same way without applying. A
//! front end never restates a rule: it shows the [`WriteDecision`] the store returns.

use crate::model::{same_value, Considered, Identity, OutcomeKind, Resolution, Scope};
use serde_json::Value;

/// The current record of an identity, as the decision needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub version: i64,
    pub value: Value,
    /// The highest causal_seq that set or confirmed the value: a write causally older than a
    /// confirmation must not replace the value it confirmed.
    pub causal_seq: i64,
}

/// What the database holds for one identity.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Probe {
    /// The tombstone's version, when the identity is deleted.
    pub tombstone: Option<i64>,
    pub current: Option<Held>,
    /// The highest version the identity's history ever used (0 for none): a new record after a
    /// removal continues from it.
    pub last_version: i64,
}

/// What a write to one identity comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteDecision {
    /// The identity is deleted: nothing changes.
    Reject { tombstone_version: i64 },
    /// No current record: the value becomes `version`.
    Insert { version: i64 },
    /// The same value is current: no new version, a confirmation.
    Confirm { version: i64, current: Value },
    /// The current value was set or confirmed at `current_seq` ≥ the write's `seq`.
    Stale {
        version: i64,
        current: Value,
        current_seq: i64,
        seq: i64,
    },
    /// The value replaces `previous` as `version`.
    Supersede {
        version: i64,
        previous_version: i64,
        previous: Value,
    },
}

/// What a write refused by a tombstone says to do, in the command line's words (the UI names
/// its own keys instead: `tui::repair::outcome_words`).
pub const RESTORE_BEFORE_WRITING: &str = "restore it with `memscope restore` before writing";

/// The scopes an ambiguous write queues (README, "delete, restore, gc"): its candidates but
/// those the identity is deleted in (`deleted`, their scopes as stored), so the queued item
/// offers no deleted scope and keeps no words for one (found by an exploratory test: a delete of
/// `repo:web` destroyed the item offering it, and the same write sent again queued it, words and
/// all). The left-out scopes come second. An item offers two scopes at least (invariant 6), so
/// a write with fewer left is refused, with the reason: the identity is deleted there.
pub fn queued_candidates(
    candidates: &[Scope],
    deleted: &[String],
) -> Result<(Vec<Scope>, Vec<Scope>), String> {
    let (left_out, kept): (Vec<Scope>, Vec<Scope>) = candidates
        .iter()
        .cloned()
        .partition(|c| deleted.contains(&c.to_string()));
    match kept.as_slice() {
        [] => Err("every candidate scope of this identity was deleted; restore one first".into()),
        [one] => Err(format!(
            "this identity was deleted in {}, which leaves {one} the only scope to offer: write it to {one} if that is where it belongs, or restore the deleted one first",
            left_out.iter().map(Scope::to_string).collect::<Vec<_>>().join(", ")
        )),
        _ => Ok((kept, left_out)),
    }
}

/// The rules, in order: tombstone → no record → same value → causal order → supersede.
/// `seq` is the write's causal number (a write without one takes the clock's next, which is
/// above every stored number).
pub fn decide_write(probe: &Probe, value: &Value, seq: i64) -> WriteDecision {
    decide_spelled(probe, value, seq, Spelling::Folded)
}

/// How a write's value is compared with the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spelling {
    /// One value however it is spelled (README, "value"): a restatement in another case or
    /// spacing confirms, and the first spelling stays.
    #[default]
    Folded,
    /// A correction of the spelling (`write --respell`): a value that differs from the current
    /// one only in case or spacing replaces it as a new version, by the same causal rule as any
    /// other value; the very same spelling still confirms, and numbers are still compared by
    /// value (`1e0` is `1`: [`crate::model::same_spelling`]).
    Exact,
}

/// [`decide_write`] with the value compared as `spelling` says.
pub fn decide_spelled(probe: &Probe, value: &Value, seq: i64, spelling: Spelling) -> WriteDecision {
    if let Some(tombstone_version) = probe.tombstone {
        return WriteDecision::Reject { tombstone_version };
    }
    let same = |held: &Value| match spelling {
        Spelling::Folded => same_value(held, value),
        Spelling::Exact => crate::model::same_spelling(held, value),
    };
    match &probe.current {
        None => WriteDecision::Insert {
            version: probe.last_version + 1,
        },
        Some(cur) if same(&cur.value) => WriteDecision::Confirm {
            version: cur.version,
            current: cur.value.clone(),
        },
        Some(cur) if cur.causal_seq >= seq => WriteDecision::Stale {
            version: cur.version,
            current: cur.value.clone(),
            current_seq: cur.causal_seq,
            seq,
        },
        Some(cur) => WriteDecision::Supersede {
            version: cur.version + 1,
            previous_version: cur.version,
            previous: cur.value.clone(),
        },
    }
}

impl Probe {
    /// What the identity holds once `decision` — a write of `value` at causal number `seq` — is
    /// applied: a batch decides its next write to the same identity against this, as if the
    /// earlier one had been committed and probed again.
    pub fn after(&mut self, decision: &WriteDecision, value: &Value, seq: i64) {
        match decision {
            WriteDecision::Insert { version } | WriteDecision::Supersede { version, .. } => {
                self.current = Some(Held {
                    version: *version,
                    value: value.clone(),
                    causal_seq: seq,
                });
                self.last_version = *version;
            }
            WriteDecision::Confirm { .. } => {
                if let Some(cur) = &mut self.current {
                    cur.causal_seq = cur.causal_seq.max(seq);
                }
            }
            WriteDecision::Reject { .. } | WriteDecision::Stale { .. } => {}
        }
    }
}

impl WriteDecision {
    /// Whether the written value is the current one after the write: inserted, superseding,
    /// or confirmed — not a stale or refused write, which leaves another value (or none).
    pub fn leaves_value_current(&self) -> bool {
        matches!(
            self,
            WriteDecision::Insert { .. }
                | WriteDecision::Supersede { .. }
                | WriteDecision::Confirm { .. }
        )
    }

    pub fn kind(&self) -> OutcomeKind {
        match self {
            WriteDecision::Reject { .. } => OutcomeKind::Rejected,
            WriteDecision::Insert { .. } => OutcomeKind::Inserted,
            WriteDecision::Confirm { .. } => OutcomeKind::Confirmed,
            WriteDecision::Stale { .. } => OutcomeKind::Stale,
            WriteDecision::Supersede { .. } => OutcomeKind::Superseded,
        }
    }

    /// What the outcome of writing `written` reports once this decision is applied: the
    /// identity's version, its value now (the current one for a confirmation) and, for a
    /// supersede, the value replaced. Nothing for a rejected write.
    pub fn reported(&self, written: &Value) -> (Option<i64>, Option<Value>, Option<Value>) {
        match self {
            WriteDecision::Reject { .. } => (None, None, None),
            WriteDecision::Insert { version } | WriteDecision::Stale { version, .. } => {
                (Some(*version), Some(written.clone()), None)
            }
            WriteDecision::Confirm { version, current } => {
                (Some(*version), Some(current.clone()), None)
            }
            WriteDecision::Supersede {
                version, previous, ..
            } => (
                Some(*version),
                Some(written.clone()),
                Some(previous.clone()),
            ),
        }
    }

    /// Why a write that changes nothing changed nothing, in the words the write path reports.
    pub fn reason(&self) -> Option<String> {
        match self {
            WriteDecision::Reject { tombstone_version } => Some(format!(
                "this identity was deleted (tombstone v{tombstone_version}); {RESTORE_BEFORE_WRITING}"
            )),
            WriteDecision::Stale {
                version,
                current_seq,
                seq,
                ..
            } => Some(format!(
                "current v{version} was set or confirmed at causal_seq {current_seq} ≥ {seq}: a causally older write never replaces a newer value"
            )),
            _ => None,
        }
    }

    /// One line saying what writing `value` into `scope` would do, for a preview (values shown
    /// with `show`, which the front end passes so its escaping applies).
    pub fn effect(&self, scope: &Scope, value: &Value, show: &dyn Fn(&Value) -> String) -> String {
        match self {
            WriteDecision::Reject { tombstone_version } => format!(
                "rejected: {scope} is deleted (tombstone v{tombstone_version}); restore it first"
            ),
            WriteDecision::Insert { .. } => format!("new record {}", show(value)),
            WriteDecision::Confirm { version, current } => {
                format!("confirms {} (v{version}); no new version", show(current))
            }
            WriteDecision::Stale {
                version,
                current,
                current_seq,
                seq,
            } => format!(
                "stale: keeps {} (v{version}), its causal_seq {current_seq} ≥ {seq}",
                show(current)
            ),
            WriteDecision::Supersede {
                previous_version,
                previous,
                ..
            } => format!(
                "supersedes {} (v{previous_version}) with {}",
                show(previous),
                show(value)
            ),
        }
    }
}

/// The precedence chain for a context: task, then repo, then global.
pub fn resolution_chain(repo: Option<&str>, task: Option<&str>) -> Vec<Scope> {
    let mut chain = Vec::with_capacity(3);
    if let Some(t) = task {
        chain.push(Scope::Task(t.to_string()));
    }
    if let Some(r) = repo {
        chain.push(Scope::Repo(r.to_string()));
    }
    chain.push(Scope::Global);
    chain
}

/// The identities a resolution of `subject`/`predicate` visits, most specific scope first.
pub fn chain_identities(
    subject: &str,
    predicate: &str,
    repo: Option<&str>,
    task: Option<&str>,
) -> Vec<Identity> {
    resolution_chain(repo, task)
        .into_iter()
        .map(|scope| Identity {
            subject: subject.to_string(),
            predicate: predicate.to_string(),
            scope,
        })
        .collect()
}

/// What a logged read records as shadowed: each found scope that did not win, `scope@vN`.
pub fn shadowed_labels(r: &Resolution) -> Vec<String> {
    r.considered
        .iter()
        .filter(|c| c.found && !c.wins)
        .map(|c| format!("{}@v{}", c.scope, c.version.unwrap_or_default()))
        .collect()
}

/// A scope of the chain that holds no live value: `state` says why ("deleted", "absent").
pub fn not_found(scope: String, state: &str) -> Considered {
    Considered {
        scope,
        found: false,
        value: None,
        wins: false,
        version: None,
        source: None,
        updated_at: None,
        state: state.into(),
        deleted_at: None,
    }
}

/// What a backend found in one scope of the resolution chain.
pub enum Looked {
    /// The current record.
    Found {
        value: Value,
        version: i64,
        source: String,
        updated_at: String,
    },
    /// No current record; the identity is deleted (`true`) or was never written (`false`).
    Missing { deleted: bool },
}

/// The resolution of `subject`/`predicate` from what was found along its chain (most specific
/// first, [`resolution_chain`]): the first scope holding a record wins, the later ones it
/// shadows; a scope without one says why. Returns the winner's place in `looked` too.
pub fn resolve_looked(
    subject: String,
    predicate: String,
    looked: Vec<(String, Looked)>,
) -> (Resolution, Option<usize>) {
    let mut considered = Vec::with_capacity(looked.len());
    let mut winner: Option<usize> = None;
    for (i, (scope, l)) in looked.into_iter().enumerate() {
        considered.push(match l {
            Looked::Found {
                value,
                version,
                source,
                updated_at,
            } => {
                let wins = winner.is_none();
                if wins {
                    winner = Some(i);
                }
                Considered {
                    scope,
                    found: true,
                    value: Some(value),
                    wins,
                    version: Some(version),
                    source: Some(source),
                    updated_at: Some(updated_at),
                    state: if wins { "wins" } else { "shadowed" }.into(),
                    deleted_at: None,
                }
            }
            Looked::Missing { deleted } => {
                not_found(scope, if deleted { "deleted" } else { "absent" })
            }
        });
    }
    let win = winner.map(|i| &considered[i]);
    let resolution = Resolution {
        found: win.is_some(),
        subject,
        predicate,
        value: win.and_then(|w| w.value.clone()),
        scope: win.map(|w| w.scope.clone()),
        version: win.and_then(|w| w.version),
        source: win.and_then(|w| w.source.clone()),
        considered,
    };
    (resolution, winner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn held(version: i64, value: Value, causal_seq: i64) -> Option<Held> {
        Some(Held {
            version,
            value,
            causal_seq,
        })
    }

    #[test]
    fn a_tombstone_comes_before_everything() {
        let p = Probe {
            tombstone: Some(4),
            current: None,
            last_version: 3,
        };
        assert_eq!(
            decide_write(&p, &json!("npm"), 99),
            WriteDecision::Reject {
                tombstone_version: 4
            }
        );
    }

    #[test]
    fn a_new_record_continues_after_its_history() {
        assert_eq!(
            decide_write(&Probe::default(), &json!(1), 1),
            WriteDecision::Insert { version: 1 }
        );
        let removed = Probe {
            last_version: 5,
            ..Probe::default()
        };
        assert_eq!(
            decide_write(&removed, &json!(1), 1),
            WriteDecision::Insert { version: 6 }
        );
    }

    #[test]
    fn the_same_value_confirms_even_when_causally_older() {
        let p = Probe {
            current: held(2, json!(" PNPM "), 10),
            ..Probe::default()
        };
        assert!(matches!(
            decide_write(&p, &json!("pnpm"), 3),
            WriteDecision::Confirm { version: 2, .. }
        ));
    }

    #[test]
    fn an_exact_spelling_supersedes_what_folding_confirms() {
        let p = Probe {
            current: held(2, json!("Main"), 10),
            ..Probe::default()
        };
        let folded = decide_spelled(&p, &json!(" main"), 11, Spelling::Folded);
        assert!(matches!(folded, WriteDecision::Confirm { version: 2, .. }));
        let exact = decide_spelled(&p, &json!(" main"), 11, Spelling::Exact);
        assert!(matches!(
            exact,
            WriteDecision::Supersede {
                version: 3,
                previous_version: 2,
                ..
            }
        ));
        // The causal rule holds for a correction as for any value; the same bytes confirm.
        let older = decide_spelled(&p, &json!("main"), 10, Spelling::Exact);
        assert!(matches!(older, WriteDecision::Stale { .. }));
        let same = decide_spelled(&p, &json!("Main"), 11, Spelling::Exact);
        assert!(matches!(same, WriteDecision::Confirm { .. }));
    }

    #[test]
    fn causal_order_decides_between_stale_and_supersede() {
        let p = Probe {
            current: held(2, json!("pnpm"), 10),
            ..Probe::default()
        };
        let stale = decide_write(&p, &json!("npm"), 10);
        assert!(matches!(
            stale,
            WriteDecision::Stale {
                current_seq: 10,
                seq: 10,
                ..
            }
        ));
        assert_eq!(stale.kind(), OutcomeKind::Stale);
        assert!(stale.reason().unwrap().contains("≥ 10"));
        assert_eq!(
            decide_write(&p, &json!("npm"), 11),
            WriteDecision::Supersede {
                version: 3,
                previous_version: 2,
                previous: json!("pnpm")
            }
        );
    }

    #[test]
    fn a_batch_decides_its_next_write_against_what_the_last_one_did() {
        let mut p = Probe {
            last_version: 2,
            ..Probe::default()
        };
        // value, causal number, the decision, the current record after it
        let steps = [
            ("vim", 5, OutcomeKind::Inserted, (3, "vim", 5)),
            (" VIM ", 9, OutcomeKind::Confirmed, (3, "vim", 9)),
            ("nano", 7, OutcomeKind::Stale, (3, "vim", 9)),
            ("helix", 10, OutcomeKind::Superseded, (4, "helix", 10)),
        ];
        for (value, seq, kind, (version, now, at)) in steps {
            let decision = decide_write(&p, &json!(value), seq);
            assert_eq!(decision.kind(), kind, "{value} at {seq}");
            p.after(&decision, &json!(value), seq);
            assert_eq!(p.current, held(version, json!(now), at), "after {value}");
        }
    }

    #[test]
    fn effects_read_as_sentences() {
        let show = |v: &Value| v.to_string();
        let p = Probe {
            current: held(1, json!("pnpm"), 1),
            ..Probe::default()
        };
        assert_eq!(
            decide_write(&p, &json!("npm"), 2).effect(&Scope::Global, &json!("npm"), &show),
            "supersedes \"pnpm\" (v1) with \"npm\""
        );
    }
}
