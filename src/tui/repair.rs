//! What a rescope or a revert would do, stated before `y`: the store runs the operation itself
//! and rolls it back (`Store::preview_rescope`, `Store::preview_revert`), and this file only
//! words the outcomes. No write rule is restated here; the store is the one judge.

use super::dialogs::{RescopePreview, RevertChoice, RevertChoices, Suggestion};
use super::text::{plural, value_text, Statement};
use crate::model::{MemoryRecord, OutcomeKind, Scope};
use crate::store::{
    HistoryFrom, Instead, NothingEarlier, RescopeRefusal, RevertRefusal, Suspect, UiStore,
};
use anyhow::Result;

/// Targets worth proposing for `rec`, best first: where its words were said, never where the
/// value was only served — an agent's read in a repository got it by resolution, which is
/// evidence of the harm, not of the rule's place (found by review: the incident's dialog
/// suggested docs-site and storefront-next, the repositories it was wrongly served in). The
/// place the suspects scan points at (`suspect`: its finding on this version, when it listed
/// it), then each place the scope guard marked this version's write as pointing at (its `set`
/// event's `places`: the place the write was made in first), then each scope where the same
/// message (its source) wrote other memories of the subject; `global` last for a scoped
/// record. Why each is suggested names the one fact that points there, whichever tab opened
/// the dialog.
pub fn rescope_suggestions(
    store: &dyn UiStore,
    rec: &MemoryRecord,
    suspect: Option<&Suspect>,
) -> Result<Vec<Suggestion>> {
    // The same message's other memories, by scope (each scope's predicates in their order).
    let mut siblings: Vec<(Scope, Vec<String>)> = Vec::new();
    for (scope, predicate) in store.scopes_written_by(&rec.subject, &rec.source)? {
        let scope = match Scope::parse(&scope) {
            Ok(Scope::Global) | Err(_) => continue,
            Ok(scope) => scope,
        };
        match siblings.iter_mut().find(|(s, _)| *s == scope) {
            Some((_, predicates)) => predicates.push(predicate),
            None => siblings.push((scope, vec![predicate])),
        }
    }
    let marked = marked_places(store, rec)?;
    let suspect = suspect
        .filter(|s| s.record.identity() == rec.identity() && s.record.version == rec.version);
    let pointed = suspect.and_then(|s| s.suggested_scope.clone());
    let why = |scope: &Scope| -> Statement {
        if let Some((_, predicates)) = siblings.iter().find(|(s, _)| s == scope) {
            return Statement::new()
                .says("the same message (")
                .names(&rec.source)
                .says(") wrote ")
                .names(&predicates.join(", "))
                .says(" there");
        }
        if marked.contains(scope) {
            return Statement::new().says(format!(
                "the scope guard marked v{} as pointing here when it was written",
                rec.version
            ));
        }
        let evidence = suspect.map(|s| s.evidence.join("; ")).unwrap_or_default();
        Statement::new()
            .says("memscope suspects points here: ")
            .names(&evidence)
    };
    let mut out: Vec<Suggestion> = Vec::new();
    let places = (pointed.iter())
        .chain(marked.iter())
        .chain(siblings.iter().map(|(s, _)| s));
    for scope in places {
        if *scope != rec.scope && !out.iter().any(|s| s.scope == *scope) {
            out.push(Suggestion {
                scope: scope.clone(),
                why: why(scope),
            });
        }
    }
    if rec.scope != Scope::Global {
        out.push(Suggestion {
            scope: Scope::Global,
            why: Statement::new()
                .says("everywhere: a preference of the subject, not of one repo or task"),
        });
    }
    Ok(out)
}

/// The places the scope guard's mark on `rec`'s `set` event names (README, "The scope guard",
/// `flag`: the place the write was made in first, then those its evidence pointed at), read
/// leniently: a detail a raw client damaged names none.
fn marked_places(store: &dyn UiStore, rec: &MemoryRecord) -> Result<Vec<Scope>> {
    let events = store.history_page(&rec.identity(), HistoryFrom::Version(rec.version), 2)?;
    let set = (events.iter()).find(|e| e.event == "set" && e.version == Some(rec.version));
    let places = set
        .and_then(|e| e.detail.as_ref())
        .and_then(|d| d.get("places"))
        .and_then(|p| p.as_array());
    Ok((places.into_iter().flatten())
        .filter_map(|p| Scope::parse(p.as_str()?).ok())
        .filter(|p| *p != Scope::Global)
        .collect())
}

/// What moving `rec` to the scope typed in `target` would do. `Err`: the target is no scope.
pub fn rescope_preview(
    store: &mut dyn UiStore,
    rec: &MemoryRecord,
    target: &str,
) -> Result<RescopePreview, String> {
    let t = target.trim();
    if t.is_empty() {
        return Err("type the target scope: repo:<id>, task:<id> or global".into());
    }
    let to = Scope::parse(t)?;
    let mut preview = RescopePreview {
        to: to.clone(),
        effects: Vec::new(),
        refusal: None,
    };
    match store.preview_rescope(&rec.subject, &rec.predicate, &rec.scope, &to) {
        Ok(outcomes) => {
            let value = value_text(&rec.value);
            // What the moved version keeps; its raw words only when it has any.
            let keeps = |s: Statement| {
                let s = s.says("keeps source ").names(&rec.source);
                let raw = if rec.raw.is_some() { ", raw words" } else { "" };
                s.says(format!("{raw} and causal_seq {})", rec.causal_seq))
            };
            for (i, o) in outcomes.iter().enumerate() {
                let v = o.version.unwrap_or_default();
                let shown =
                    |x: &Option<serde_json::Value>| x.as_ref().map(value_text).unwrap_or_default();
                let at = if i == 0 { &to } else { &rec.scope };
                preview.effects.push(match (i, o.outcome) {
                    (0, OutcomeKind::Inserted) => keeps(
                        Statement::new()
                            .says("moves ")
                            .names(&value)
                            .says(format!(" to {at} as v{v} (inserted; ")),
                    ),
                    (0, OutcomeKind::Confirmed) => Statement::new()
                        .says(format!("{at} already holds "))
                        .names(&value)
                        .says(format!(" (v{v}): confirmed there, not duplicated")),
                    (0, OutcomeKind::Superseded) => keeps(
                        Statement::new()
                            .says("moves ")
                            .names(&value)
                            .says(format!(" to {at}, superseding "))
                            .names(&shown(&o.previous))
                            .says(format!(" (v{}) as v{v} (", v - 1)),
                    ),
                    (_, OutcomeKind::Removed) => Statement::new().says(format!(
                        "{at} is removed — {}",
                        o.reason.as_deref().unwrap_or("it had no earlier value")
                    )),
                    (_, OutcomeKind::Confirmed) => Statement::new()
                        .says(format!("{at} keeps "))
                        .names(&shown(&o.value))
                        .says(format!(
                            " (v{} held the same value): confirmed",
                            rec.version - 1
                        )),
                    _ => Statement::new()
                        .says(format!("{at} goes back to "))
                        .names(&shown(&o.value))
                        .says(format!(" (value of v{}) as v{v}", rec.version - 1)),
                });
            }
        }
        Err(why) => preview.refusal = Some(refusal_words(&why)),
    }
    Ok(preview)
}

/// The earlier versions of `rec`, newest first, each once, those `rescope` moved out named; the
/// one chosen first is the one the store's plain revert brings back (its preview says which, or
/// why none), and what choosing it does is asked of the store at once — the others' when
/// chosen, so a timeline of thousands of versions opens as fast as one of two.
pub fn revert_choices(store: &mut dyn UiStore, rec: &MemoryRecord) -> Result<RevertChoices> {
    let history = store.history(&rec.subject, &rec.predicate, Some(&rec.scope))?;
    // A rescope's return to the earlier value names the version it moved, and where.
    let moved: std::collections::HashMap<i64, String> = history
        .iter()
        .filter(|e| e.event == "reverted")
        .filter_map(|e| {
            let d = e.detail.as_ref()?;
            Some((
                d.get("moved_version")?.as_i64()?,
                d.get("rescoped_to")?.as_str()?.to_string(),
            ))
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<RevertChoice> = Vec::new();
    for e in history.iter().rev().filter(|e| e.event == "set") {
        let Some(version) = e.version else {
            continue;
        };
        if version >= rec.version || !seen.insert(version) {
            continue;
        }
        out.push(RevertChoice {
            version,
            value: e.value.clone(),
            at: e.at.clone(),
            source: e.source.clone(),
            valid_until: e.valid_until.clone(),
            effect: None,
            moved_to: moved.get(&version).cloned(),
            suspect: e
                .detail
                .as_ref()
                .and_then(|d| d.get("suspect"))
                .map(evidence_words),
        });
    }
    let (default, no_default) = match store.preview_revert(&rec.identity(), None) {
        Ok(o) => (
            o.reverted_to
                .and_then(|v| out.iter().position(|c| c.version == v))
                .unwrap_or(0),
            None,
        ),
        // Nothing by default: the newest version not moved out is chosen, to look at.
        Err(why) => (
            out.iter().position(|c| c.moved_to.is_none()).unwrap_or(0),
            Some(refusal_words(&why)),
        ),
    };
    if let Some(first) = out.get_mut(default) {
        first.effect = Some(revert_effect(store, rec, first.version));
    }
    Ok(RevertChoices {
        list: out,
        default,
        no_default,
    })
}

/// The scope guard's evidence as a `set` detail keeps it (a list of sentences), in one line.
fn evidence_words(evidence: &serde_json::Value) -> String {
    match evidence.as_array() {
        Some(list) => list
            .iter()
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join("; "),
        None => evidence.to_string(),
    }
}

/// What reverting `rec` to `version` does, from the store's preview, or why it refuses: the
/// values it names may be cut on a small screen, its other words never are.
pub fn revert_effect(
    store: &mut dyn UiStore,
    rec: &MemoryRecord,
    version: i64,
) -> Result<Statement, String> {
    let scope = &rec.scope;
    store
        .preview_revert(&rec.identity(), Some(version))
        .map(|o| {
            let shown = o.value.as_ref().map(value_text).unwrap_or_default();
            let now = o.version.unwrap_or_default();
            match o.outcome {
                OutcomeKind::Confirmed => Statement::new()
                    .says(format!("{scope} already holds "))
                    .names(&shown)
                    .says(format!(": v{now} is confirmed, no new version")),
                _ => Statement::new()
                    .says(format!("{scope} becomes "))
                    .names(&shown)
                    .says(format!(" (value of v{version}) as v{now}")),
            }
        })
        .map_err(|why| refusal_words(&why))
}

/// Why the store refuses a rescope or a revert, in the UI's words: the store decided it and
/// says what the advice needs (`store::refusal`); where the command line's sentence names its
/// flags (`--to-version N`, `memscope restore`), this names the keys that do it here. Any
/// other error reads as the store said it.
pub fn refusal_words(e: &anyhow::Error) -> String {
    if let Some(r) = RevertRefusal::of(e) {
        return revert_refusal_words(r);
    }
    if let Some(r) = RescopeRefusal::of(e) {
        return rescope_refusal_words(r);
    }
    crate::store::error_text(e)
}

/// How a version is chosen here.
const CHOOSE_A_VERSION: &str = "in the revert dialog (j/k or its number)";

/// How a deleted identity comes back here.
const RESTORE: &str = "u in tab 3, Tombstones";

/// Where `v` reverts a record, named as the tab it is in: a rescope refused from tab 6, which
/// has no `v`, said "in the current view" as if that were where the user was (found by
/// review). The record's place is named, and its tab, as [`RESTORE`] names its own.
const REVERT_ON_ITS_RECORD: &str = "v on its record in tab 1, Current view";

fn revert_refusal_words(r: &RevertRefusal) -> String {
    match r {
        RevertRefusal::Deleted { id } => {
            format!("{id} is deleted: restore it before reverting ({RESTORE})")
        }
        RevertRefusal::NeverWritten { id } => format!(
            "{id} has no history: nothing was ever stored there, so there is nothing to revert"
        ),
        RevertRefusal::NoSuchVersion { id, version } => format!(
            "{id} has no version {version}: versions start at 1 (its history lists them)"
        ),
        RevertRefusal::NoCurrentRecord { id } => format!(
            "{id} has no current record: choose the version to bring back {CHOOSE_A_VERSION}"
        ),
        RevertRefusal::NotEarlier {
            id,
            current,
            to_version,
        } => format!(
            "{id} is at v{current}, so v{to_version} is no earlier version: choose an earlier one {CHOOSE_A_VERSION}"
        ),
        RevertRefusal::NothingEarlier {
            id,
            current,
            because: NothingEarlier::Moved { holds },
        } => format!(
            "{id} has no earlier value to revert to: {} (its history says where) — choosing a moved version {CHOOSE_A_VERSION} brings it back on purpose",
            crate::store::refusal::moved_before(*current, *holds)
        ),
        RevertRefusal::NotInHistory { id, version } => format!(
            "{id} has no version {version} in its history (a delete destroys the versions before it): its history lists the versions it has"
        ),
        // These name no command: the store's sentence is the UI's too.
        RevertRefusal::NothingEarlier { .. } | RevertRefusal::Purged { .. } => r.to_string(),
    }
}

fn rescope_refusal_words(r: &RescopeRefusal) -> String {
    match r {
        RescopeRefusal::SamePlace { id } => format!(
            "{id} is already in {}: rescoping it there moves nothing — choose another target",
            id.scope
        ),
        RescopeRefusal::NothingToMove { from } => format!(
            "{from} has no current record to move: what it holds now is in tab 1, Current view"
        ),
        RescopeRefusal::TargetDeleted { to, tombstone } => format!(
            "{to} is deleted (tombstone v{tombstone}): restore it first ({RESTORE}), or choose another target; nothing changed"
        ),
        RescopeRefusal::TargetRefused {
            to,
            outcome,
            reason,
            instead,
        } => {
            let refused = format!("{to} refused the value ({outcome}: {reason}); nothing changed");
            let scope = &to.scope;
            // The revert that does it, in keys: the target's record, `v`, the version, `y`.
            match instead {
                Some(Instead::RevertTo { version }) => format!(
                    "{refused}: this value was moved out of {scope} as its v{version}; to bring it back there on purpose, revert {scope} to v{version} — {REVERT_ON_ITS_RECORD}, then {version} and y"
                ),
                Some(Instead::RevertByNumber) => format!(
                    "{refused}: to make an earlier value current in {scope} again, revert to it by number — {REVERT_ON_ITS_RECORD}, then the version's number (its history lists them) and y"
                ),
                Some(Instead::WriteAgain) => r.to_string(),
                None => refused,
            }
        }
    }
}

/// A write outcome as the UI says it: the store's sentence, with the command that restores a
/// deleted identity named by the keys that do it here (found by an exploratory test: a pending
/// item resolved into a deleted scope told the UI's user to run `memscope restore`).
pub fn outcome_words(o: &crate::model::WriteOutcome) -> String {
    o.human().replace(
        crate::store::decide::RESTORE_BEFORE_WRITING,
        &format!("restore it first ({RESTORE})"),
    )
}

/// One line for a write outcome in a toast: `inserted repo:legacy-dashboard v1 = npm`.
pub fn outcome_text(o: &crate::model::WriteOutcome) -> String {
    let scope = o.scope.as_ref().map(|s| s.to_string()).unwrap_or_default();
    match o.outcome {
        crate::model::OutcomeKind::Removed => format!(
            "removed {scope} ({})",
            o.reason.as_deref().unwrap_or("it had no earlier value")
        ),
        kind => {
            let mut s = format!("{kind} {scope}");
            // A stale write's version holds another value (the model's `human` says why).
            if let Some(v) = o
                .version
                .filter(|_| kind != crate::model::OutcomeKind::Stale)
            {
                s.push_str(&format!(" v{v}"));
            }
            if let Some(v) = &o.value {
                s.push_str(&format!(" = {}", value_text(v)));
            }
            s
        }
    }
}

/// What the UI says after a delete went through: what it destroyed, what it blanked, and what
/// is still owed on disk — in the store's words where it gave them.
pub fn deleted_message(r: &crate::model::DeleteReport) -> String {
    let already = || {
        r.already_deleted
            .iter()
            .map(|t| t.label())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut m = if r.changed_nothing() {
        format!("already deleted, nothing left to destroy: {}", already())
    } else if r.tombstoned.is_empty() && r.purged_versions + r.purged_pending + r.purged_notes == 0
    {
        // Only what a rescope left elsewhere (the blanked sentence follows).
        format!("already deleted: {}", already())
    } else {
        format!(
            "deleted: {} tombstoned, {} purged, {} dropped, {} blanked",
            plural(r.tombstoned.len() as i64, "identity", "identities"),
            plural(r.purged_versions, "version", "versions"),
            plural(r.purged_pending, "pending item", "pending items"),
            plural(r.purged_notes, "read-log note", "read-log notes"),
        )
    };
    if let Some(blanked) = r.blanked_sentence() {
        m.push_str("; ");
        m.push_str(&blanked);
    }
    if !r.disk_purged {
        m.push_str("; ");
        // PostgreSQL says why itself (a login that may not VACUUM); a SQLite reader holds the WAL
        // (found by an exploratory test: a curator's delete on PostgreSQL was told of the WAL).
        m.push_str(match &r.disk_note {
            Some(note) => note.strip_prefix("deleted: ").unwrap_or(note),
            None => "another reader holds the WAL, so the on-disk purge is owed and the next write or `memscope gc` pays it",
        });
    }
    if r.guards_missing {
        m.push_str("; but ");
        m.push_str(crate::model::GUARDS_MISSING_AFTER_DELETE);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::deleted_message;
    use crate::model::DeleteReport;

    fn report(disk_purged: bool, disk_note: Option<&str>) -> DeleteReport {
        DeleteReport {
            tombstoned: vec![],
            already_deleted: vec![],
            purged_versions: 2,
            purged_pending: 0,
            purged_notes: 0,
            disk_purged,
            disk_note: disk_note.map(str::to_string),
            guards_missing: false,
            blanked_copies: 0,
            blanked_sources: 0,
        }
    }

    /// What is owed on disk in the backend's own words: a PostgreSQL login that may not VACUUM
    /// is told so, never of SQLite's WAL; a SQLite reader holding the WAL is.
    #[test]
    fn the_disk_purge_owed_is_said_in_the_backends_words() {
        let pg = "deleted: no row holds the content any more, but curator may not VACUUM or ANALYZE memscope's tables";
        let said = deleted_message(&report(false, Some(pg)));
        assert!(
            said.contains("; no row holds the content any more, but curator may not VACUUM"),
            "{said}"
        );
        assert!(!said.contains("WAL"), "{said}");
        let said = deleted_message(&report(false, None));
        assert!(said.contains("another reader holds the WAL"), "{said}");
        let said = deleted_message(&report(true, Some("vacuumed")));
        assert!(
            !said.contains("vacuumed") && !said.contains("WAL"),
            "{said}"
        );
    }

    /// A write refused by a tombstone — a pending item resolved into a deleted scope — names
    /// the UI's key for restoring, not the command line's.
    #[test]
    fn a_refused_resolution_names_the_uis_restore_key() {
        use crate::model::{OutcomeKind, OutcomeScope, Scope, WriteOutcome};
        use crate::store::decide::WriteDecision;
        let mut out = WriteOutcome::new(
            OutcomeKind::Rejected,
            "user:42",
            "package_manager",
            OutcomeScope::Exact(Scope::Repo("web".into())),
        );
        out.reason = WriteDecision::Reject {
            tombstone_version: 2,
        }
        .reason();
        let said = super::outcome_words(&out);
        assert!(
            said.contains("restore it first (u in tab 3, Tombstones)"),
            "{said}"
        );
        assert!(!said.contains("memscope restore"), "{said}");
        assert!(said.contains("tombstone v2"), "{said}");
    }
}
