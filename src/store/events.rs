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

/// The history events a delete keeps of the identity it purges: the times its deletions began
/// and ended — each `deleted` event, and the `restored` and `tombstone_collected` events that
/// ended one — content-free, so `resolve --at` still tells a deleted stretch from an absent
/// one after a later delete (found by an exploratory test: the second delete purged the first
/// cycle's `restored` event, and a moment between that restore and the next write said
/// deleted). Everything else of the identity's history goes.
macro_rules! deletion_trail {
    () => {
        "('deleted', 'restored', 'tombstone_collected')"
    };
}

/// The purge of a delete: every history row of `$1 · $2 @ $3` but its deletion trail.
pub(crate) const PURGE_HISTORY_SQL: &str = concat!(
    "DELETE FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3 AND event NOT IN ",
    deletion_trail!()
);

/// What a delete of `$1 · $2 @ $3` has left to destroy, or left undestroyed ([`Left`]'s
/// fields in order).
pub(crate) const LEFT_OF_SQL: &str = concat!(
    "SELECT (SELECT count(*) FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3
               AND event NOT IN ",
    deletion_trail!(),
    "),
            (SELECT count(*) FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3
               AND event NOT IN ('rejected', 'pending_resolved') AND event NOT IN ",
    deletion_trail!(),
    "),
            (SELECT count(*) FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3),
            (SELECT max(version) FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = $3),
            (SELECT count(*) FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = $3)"
);

/// What a delete of `$1 · $2 @ $3` destroys of its history, for its preview: the versions,
/// the distinct raw words, and the events ([`PURGE_HISTORY_SQL`]'s rows).
pub(crate) const PURGED_HISTORY_COUNTS_SQL: &str = concat!(
    "SELECT count(DISTINCT CASE WHEN event = 'set' THEN version END), count(DISTINCT raw), count(*)
       FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3 AND event NOT IN ",
    deletion_trail!()
);

/// What a delete left of one identity, read back inside its transaction ([`LEFT_OF_SQL`]):
/// history rows beyond its deletion trail, current records, the tombstone's version.
pub(crate) struct Left {
    pub history: i64,
    /// Of those, the rows that are not a tombstone's own trail either — the `rejected` and
    /// `pending_resolved` events that record writes refused because of it (no content).
    pub beyond_trail: i64,
    pub records: i64,
    /// The highest tombstone version, and how many tombstone rows there are (two only where a
    /// raw client dropped the key).
    pub tombstone: Option<i64>,
    pub tombstones: i64,
}

impl Left {
    /// The tombstone's version when the identity is already deleted with nothing of it left to
    /// destroy — tombstoned, no current record, no history but the tombstone's trail, and
    /// (`pending`) no pending item naming it: a delete covering it leaves it as it is, with no
    /// second `deleted` event, its tombstone's version unchanged and the record of refused
    /// writes kept, only their sources blanked ([`BLANK_REFUSED_SOURCES_SQL`]; README, "delete,
    /// restore, gc"). An identity holding two current records (a
    /// client dropped the guard that keeps it unique) is refused on every backend, as every
    /// other command refuses it: a delete would report one record destroyed of two. So is one
    /// holding two tombstones: which one's version stands is not known.
    pub fn nothing_to_destroy(
        &self,
        id: &crate::model::Identity,
        pending: bool,
    ) -> anyhow::Result<Option<i64>> {
        if self.records > 1 {
            return Err(crate::store::check::two_rows_of_one_identity(
                "memories", id,
            ));
        }
        if self.tombstones > 1 {
            return Err(crate::store::check::two_rows_of_one_identity(
                "tombstones",
                id,
            ));
        }
        Ok((self.beyond_trail == 0 && self.records == 0 && !pending)
            .then_some(self.tombstone)
            .flatten())
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
    if left.history == 0
        && left.records == 0
        && left.tombstones == 1
        && left.tombstone == Some(version)
    {
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

/// A history event a rescope wrote, as [`moved_copies`] reads it: `event` (`rescoped`,
/// `reverted` or `removed`), the scope and version it was logged at, and its detail text.
#[derive(Clone)]
pub(crate) struct RescopeEvent {
    pub event: String,
    pub scope: String,
    pub version: Option<i64>,
    pub detail: String,
}

/// The history rows that are [`RescopeEvent`]s.
macro_rules! rescope_events_where {
    () => {
        "event IN ('rescoped', 'reverted', 'removed') AND detail IS NOT NULL"
    };
}

/// The SQL that reads one subject and predicate's [`RescopeEvent`]s logged before event id `$3`
/// (the delete the copies are destroyed for: [`DELETED_AS_OF_SQL`]) on either backend (`$1`
/// subject, `$2` predicate).
pub(crate) const RESCOPE_EVENTS_SQL: &str = concat!(
    "SELECT event, scope, version, detail FROM history WHERE subject = $1 AND predicate = $2
        AND id < $3 AND ",
    rescope_events_where!()
);

/// The event id a delete of `$1 · $2 @ $3` destroys moved copies as of: the identity's last
/// `deleted` event while its tombstone stands (a delete run again, a gc about to collect it —
/// what was current then, and rescopes since, are not its), else the largest id (a delete now).
pub(crate) const DELETED_AS_OF_SQL: &str = "SELECT coalesce(CASE WHEN EXISTS (SELECT 1 FROM tombstones t
           WHERE t.subject = $1 AND t.predicate = $2 AND t.scope = $3)
      THEN (SELECT max(d.id) FROM history d WHERE d.subject = $1 AND d.predicate = $2 AND d.scope = $3
              AND d.event = 'deleted') END, 9223372036854775807)";

/// The SQL that reads, in one pass over history, what [`collected_copies`] needs: every
/// [`RescopeEvent`] and every `deleted` and `tombstone_collected` event, each with its id,
/// subject and predicate (`id, subject, predicate, event, scope, version, detail`; a missing
/// detail is read as empty text).
/// The first `WHERE` term is the index `history_kept_copy_events`' own, word for word (SQLite
/// schema 8, PostgreSQL 13), so the pass reads those rows alone.
pub(crate) const KEPT_COPY_EVENTS_SQL: &str = concat!(
    "SELECT id, subject, predicate, event, scope, version, coalesce(detail, '') FROM history
      WHERE event IN ('rescoped', 'reverted', 'removed', 'deleted', 'tombstone_collected')
        AND (event IN ('tombstone_collected', 'deleted') OR (",
    rescope_events_where!(),
    "))"
);

/// A row of [`KEPT_COPY_EVENTS_SQL`]: a rescope event, a delete or a tombstone's collection.
pub(crate) struct LoggedEvent {
    pub id: i64,
    pub subject: String,
    pub predicate: String,
    pub event: RescopeEvent,
}

/// A copy a rescope left of a deleted memory: the `version` logged `at` another scope holds
/// content moved into `subject · predicate @ scope`, deleted by its `deleted` event `as_of`
/// (the blanking's `$5`).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct KeptCopy {
    pub subject: String,
    pub predicate: String,
    pub scope: String,
    pub at: String,
    pub version: i64,
    pub as_of: i64,
}

impl LoggedEvent {
    fn is_rescope(&self) -> bool {
        !matches!(self.event.event.as_str(), "tombstone_collected" | "deleted")
    }
}

/// The copies of `subject · predicate @ scope` the delete with event id `as_of` destroyed:
/// [`moved_copies`] of the rescope events in `logged` (one subject and predicate's) before it.
fn copies_as_of(
    logged: &[&LoggedEvent],
    (subject, predicate, scope): (&str, &str, &str),
    as_of: i64,
    out: &mut Vec<KeptCopy>,
) {
    let before: Vec<RescopeEvent> = logged
        .iter()
        .filter(|e| e.id < as_of && e.is_rescope())
        .map(|e| e.event.clone())
        .collect();
    for (at, version) in moved_copies(scope, &before, &[]) {
        out.push(KeptCopy {
            subject: subject.to_string(),
            predicate: predicate.to_string(),
            scope: scope.to_string(),
            at,
            version,
            as_of,
        });
    }
}

/// The last `deleted` event of `scope` in `logged` before id `before`.
fn last_delete(logged: &[&LoggedEvent], scope: &str, before: i64) -> Option<i64> {
    logged
        .iter()
        .filter(|e| e.event.event == "deleted" && e.event.scope == scope && e.id < before)
        .map(|e| e.id)
        .max()
}

/// `events` by subject and predicate.
fn by_pair(events: &[LoggedEvent]) -> std::collections::BTreeMap<(&str, &str), Vec<&LoggedEvent>> {
    let mut by_pair: std::collections::BTreeMap<(&str, &str), Vec<&LoggedEvent>> =
        Default::default();
    for e in events {
        by_pair
            .entry((e.subject.as_str(), e.predicate.as_str()))
            .or_default()
            .push(e);
    }
    by_pair
}

/// The copies a rescope left of the memories `tombstones` (subject, predicate, scope) stand
/// for — [`moved_copies`] of each as of its last delete, from the rescope events in `events`
/// before it — in their order.
pub(crate) fn standing_copies(
    events: &[LoggedEvent],
    tombstones: &[(String, String, String)],
) -> Vec<KeptCopy> {
    let by_pair = by_pair(events);
    let mut out = Vec::new();
    for (subject, predicate, scope) in tombstones {
        let Some(logged) = by_pair.get(&(subject.as_str(), predicate.as_str())) else {
            continue;
        };
        let as_of = last_delete(logged, scope, i64::MAX).unwrap_or(i64::MAX);
        copies_as_of(logged, (subject, predicate, scope), as_of, &mut out);
    }
    out
}

/// Every copy a rescope left of a deleted memory, its tombstone standing (`tombstones`) or
/// collected: what an import blanks of a dump an earlier release wrote.
pub(crate) fn kept_copies(
    events: &[LoggedEvent],
    tombstones: &[(String, String, String)],
) -> Vec<KeptCopy> {
    let mut out = standing_copies(events, tombstones);
    out.extend(collected_copies(events, |_, _, _| false));
    out
}

/// The copies a rescope left of memories whose tombstones were collected ([`moved_copies`] of
/// each collected identity as of the delete its last collected tombstone stood for, from the
/// rescope events logged before that delete — later ones moved content it did not delete), for
/// identities `skip` does not name (one whose tombstone stands again, which a delete answers
/// for). A release before 2026-12-03 deleted without blanking them, and `gc` collected the
/// tombstone that was the only way to find them (README, "delete, restore, gc"): `check` names
/// them, `gc` and `import` blank them.
pub(crate) fn collected_copies(
    events: &[LoggedEvent],
    skip: impl Fn(&str, &str, &str) -> bool,
) -> Vec<KeptCopy> {
    use std::collections::BTreeMap;
    let mut out = Vec::new();
    for ((subject, predicate), logged) in by_pair(events) {
        let mut collected: BTreeMap<&str, i64> = BTreeMap::new();
        for e in logged
            .iter()
            .filter(|e| e.event.event == "tombstone_collected")
        {
            let last = collected.entry(e.event.scope.as_str()).or_insert(e.id);
            *last = (*last).max(e.id);
        }
        for (scope, last) in collected {
            if skip(subject, predicate, scope) {
                continue;
            }
            if let Some(as_of) = last_delete(&logged, scope, last) {
                copies_as_of(&logged, (subject, predicate, scope), as_of, &mut out);
            }
        }
    }
    out
}

/// The versions of other scopes whose events still keep content a rescope moved into `scope`
/// (README, "delete, restore, gc"): a rescope copies the value and its words to the scope it
/// belongs to and leaves the version it moved where it was first written (history of what the
/// agents were told). A delete of `scope` destroys those copies too: the version each rescope
/// into `scope` moved away, known by the event it left there (`reverted` or `removed`, naming
/// `scope` as `rescoped_to`); when that version had itself arrived by a rescope, the one it
/// came from; and every version a revert — a user's, or a rescope's restoring the value
/// before the one it moved — copied from one of them or that one was copied from, and so on.
/// A move into `scope` whose version there a later rescope moved on is not followed (the value
/// went on to where that move put it); a value moved out and back in is followed through
/// `scope`'s own versions to where it came from first (while the delete has not purged them). `events` are the subject and predicate's rescope and revert events.
/// (scope, version) pairs, sorted; never `scope` itself, nor a scope in `destroyed` (of the
/// same subject and predicate, which the same delete destroys whole: the chain is followed
/// through it). (Blanking skips a version that is current: a live record is its scope's
/// memory, deleted there.)
pub(crate) fn moved_copies(
    scope: &str,
    events: &[RescopeEvent],
    destroyed: &[String],
) -> Vec<(String, i64)> {
    let details: Vec<Option<serde_json::Value>> = events
        .iter()
        .map(|e| serde_json::from_str(&e.detail).ok())
        .collect();
    let text = |d: &serde_json::Value, key: &str| d.get(key)?.as_str().map(str::to_string);
    let int = |d: &serde_json::Value, key: &str| d.get(key)?.as_i64();
    // Each move into `scope` — unless the version it became there (`became`, logged since
    // 2026-12-05) was moved on by a later rescope before the delete: the value belongs where
    // that move put it (live there, perhaps as a later version of the very scope it first came
    // from), not to what the delete destroys (found by review: global → repo:r by mistake, back
    // to global, then deleting the empty repo:r blanked global's first version while its value
    // was global's current). The move on is known by the event it left where it arrived
    // (`rescoped`, `from` this scope), which a delete of `scope` does not purge — so a delete,
    // and `check` after it, decide alike. `moved_on`: where version `became` went, if it did.
    let moved_on = |became: i64| {
        events.iter().zip(&details).find_map(|(e, d)| {
            let d = d.as_ref()?;
            (e.event == "rescoped"
                && e.scope != scope
                && text(d, "from").as_deref() == Some(scope)
                && int(d, "from_version") == Some(became))
            .then(|| Some((e.scope.clone(), e.version?)))
            .flatten()
        })
    };
    // The moves into `scope`: where from, and where the value went on to.
    type Version = (String, i64);
    let mut moves_in: Vec<(Version, Option<Version>)> = events
        .iter()
        .zip(&details)
        .filter(|(e, _)| e.event == "reverted" || e.event == "removed")
        .filter_map(|(e, d)| {
            let d = d.as_ref()?;
            (text(d, "rescoped_to")?.as_str() == scope)
                .then(|| {
                    let on = int(d, "became").and_then(moved_on);
                    Some(((e.scope.clone(), int(d, "moved_version")?), on))
                })
                .flatten()
        })
        .collect();
    let mut seen: Vec<(String, i64)> = Vec::new();
    let mut todo: Vec<(String, i64)> = Vec::new();
    loop {
        // A move whose value went on is followed once where it went is destroyed too (by this
        // delete, or as a copy found below: moved out and back in again).
        let (follow, wait): (Vec<_>, Vec<_>) = moves_in.into_iter().partition(|(_, on)| {
            on.as_ref()
                .is_none_or(|on| destroyed.contains(&on.0) || seen.contains(on))
        });
        moves_in = wait;
        if follow.is_empty() {
            break;
        }
        todo.extend(follow.into_iter().map(|(from, _)| from));
        while let Some((at, version)) = todo.pop() {
            if seen.contains(&(at.clone(), version)) {
                continue;
            }
            seen.push((at.clone(), version));
            for (e, d) in events.iter().zip(&details) {
                let Some(d) = d.as_ref().filter(|_| e.scope == at) else {
                    continue;
                };
                // A version of `scope` itself is the delete's own; the chain goes on only to
                // where it came from by a rescope (a value moved out and back: its first copy).
                if at == scope && e.event != "rescoped" {
                    continue;
                }
                match e.event.as_str() {
                    // The version arrived here by a rescope: its first scope keeps a copy too.
                    "rescoped" if e.version == Some(version) => {
                        if let (Some(from), Some(v)) = (text(d, "from"), int(d, "from_version")) {
                            todo.push((from, v));
                        }
                    }
                    // A revert's new version is a copy of the one it reverted to: a user's
                    // revert, and the source side of a rescope, which restores the value before
                    // the one it moved (a copy of that earlier version, not of the moved one —
                    // but when a later rescope moves the restored copy, the version it copied
                    // holds the same value where it was first written).
                    "reverted" => {
                        let to = int(d, "reverted_to");
                        if let (Some(to), Some(new)) = (to, e.version) {
                            if to == version {
                                todo.push((at.clone(), new));
                            } else if new == version {
                                todo.push((at.clone(), to));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let mut found: Vec<(String, i64)> = seen.into_iter().filter(|(at, _)| at != scope).collect();
    found.retain(|(at, _)| !destroyed.contains(at));
    found.sort();
    found
}

/// The scopes of `id`'s subject and predicate among `covered`, the identities one delete
/// destroys whole ([`moved_copies`]' `destroyed`).
pub(crate) fn destroyed_scopes(
    id: &crate::model::Identity,
    covered: &[crate::model::Identity],
) -> Vec<String> {
    covered
        .iter()
        .filter(|c| c.subject == id.subject && c.predicate == id.predicate)
        .map(|c| c.scope.to_string())
        .collect()
}

/// Version `$4` of `$1 · $2 @ $3` is no scope's own memory: not the scope's current record,
/// nor the one current when the delete with event id `$5` ran ([`DELETED_AS_OF_SQL`]) — that
/// one was the scope's own memory, kept by that delete (found by review: a revert to the moved
/// version, current when the delete ran and superseded since, was blanked by a later gc).
macro_rules! moved_copy_is_a_copy {
    () => {
        "NOT EXISTS (SELECT 1 FROM memories m WHERE m.subject = $1 AND m.predicate = $2
                        AND m.scope = $3 AND m.version = $4)
        AND coalesce((SELECT CASE WHEN l.event = 'set' THEN l.version END FROM history l
                      WHERE l.subject = $1 AND l.predicate = $2 AND l.scope = $3 AND l.id < $5
                        AND l.event IN ('set', 'removed', 'deleted')
                      ORDER BY l.id DESC LIMIT 1), -1) <> $4"
    };
}

/// The history rows of a moved copy that keep content: the `set` and `confirmed` events of
/// version `$4` of `$1 · $2 @ $3`, the `rescoped` event that brought it there and the
/// `pending_resolved` event that wrote it, which keep the source of what they wrote (found by
/// exploratory tests: a value moved twice kept its source at the middle stop; a pending item
/// resolved there, its source) — unless the version is no copy ([`moved_copy_is_a_copy!`]).
macro_rules! moved_copy_where {
    () => {
        concat!(
            "subject = $1 AND predicate = $2 AND scope = $3 AND version = $4
        AND event IN ('set', 'confirmed', 'rescoped', 'pending_resolved')
        AND (value IS NOT NULL OR raw IS NOT NULL OR source IS NOT NULL) AND ",
            moved_copy_is_a_copy!()
        )
    };
}

/// The read-log notes of a moved copy: agents' notes on reads served that version (the
/// delete of the place it moved to takes them, as it takes its own reads' notes).
macro_rules! moved_copy_notes_where {
    () => {
        concat!(
            "subject = $1 AND predicate = $2 AND scope = $3 AND version = $4 AND note IS NOT NULL AND ",
            moved_copy_is_a_copy!()
        )
    };
}

/// The resolved pending items that wrote a moved copy: each keeps the value, words and source
/// it was resolved with (found by an exploratory test: resolved into `repo:a`, moved on to
/// `repo:b` and deleted there, the item kept them all). Known by the `pending_resolved` event
/// at that version, which carries the item's causal number.
macro_rules! moved_copy_pending_where {
    () => {
        concat!(
            "status = 'resolved' AND subject = $1 AND predicate = $2 AND resolved_scope = $3
        AND causal_seq IN (SELECT h.causal_seq FROM history h WHERE h.subject = $1
                             AND h.predicate = $2 AND h.scope = $3 AND h.version = $4
                             AND h.event = 'pending_resolved') AND ",
            moved_copy_is_a_copy!()
        )
    };
}

/// The SQL that blanks a moved copy's content (`$1` subject, `$2` predicate, `$3` scope, `$4`
/// version, `$5` the delete's event id: [`moved_copy_where!`]): its events' value, words and
/// source — free text a model wrote, which may repeat what the user deleted, as a refused
/// write's does (found by review: the source stayed) — the events stay, as retention's purge
/// leaves them; never the current record's own.
pub(crate) const BLANK_MOVED_COPY_SQL: &str = concat!(
    "UPDATE history SET value = NULL, raw = NULL, source = NULL WHERE ",
    moved_copy_where!()
);

/// The count [`BLANK_MOVED_COPY_SQL`] would blank, for a preview and for `check`.
pub(crate) const MOVED_COPY_COUNT_SQL: &str =
    concat!("SELECT count(*) FROM history WHERE ", moved_copy_where!());

/// Blanks the notes of a moved copy's reads ([`moved_copy_notes_where!`]; the same parameters).
const BLANK_MOVED_COPY_NOTES_SQL: &str = concat!(
    "UPDATE reads SET note = NULL WHERE ",
    moved_copy_notes_where!()
);

/// Drops the resolved pending items that wrote a moved copy ([`moved_copy_pending_where!`]).
const DROP_MOVED_COPY_PENDING_SQL: &str =
    concat!("DELETE FROM pending WHERE ", moved_copy_pending_where!());

/// What a moved copy keeps, or what blanking it took: history events, resolved pending items
/// and read-log notes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CopyKept {
    pub events: i64,
    pub pending: i64,
    pub notes: i64,
}

impl CopyKept {
    pub fn any(&self) -> bool {
        self.events + self.pending + self.notes > 0
    }

    /// Adds `other` in.
    pub fn add(&mut self, other: CopyKept) {
        self.events += other.events;
        self.pending += other.pending;
        self.notes += other.notes;
    }
}

/// Blanks one moved copy everywhere it is kept — its resolved pending items, its reads' notes,
/// its history events — each statement run by `exec` with the copy's five parameters (`$1`
/// subject, `$2` predicate, `$3` scope, `$4` version, `$5` the delete's event id), which
/// returns the rows it changed. Every backend's delete, gc and import blank a copy so.
pub(crate) fn blank_copy(
    mut exec: impl FnMut(&'static str) -> anyhow::Result<i64>,
) -> anyhow::Result<CopyKept> {
    Ok(CopyKept {
        pending: exec(DROP_MOVED_COPY_PENDING_SQL)?,
        notes: exec(BLANK_MOVED_COPY_NOTES_SQL)?,
        events: exec(BLANK_MOVED_COPY_SQL)?,
    })
}

/// What [`blank_copy`] would take, each count read by `count` (the same parameters): for a
/// preview and for `check`.
pub(crate) fn copy_kept(
    mut count: impl FnMut(&'static str) -> anyhow::Result<i64>,
) -> anyhow::Result<CopyKept> {
    const PENDING: &str = concat!(
        "SELECT count(*) FROM pending WHERE ",
        moved_copy_pending_where!()
    );
    const NOTES: &str = concat!(
        "SELECT count(*) FROM reads WHERE ",
        moved_copy_notes_where!()
    );
    Ok(CopyKept {
        pending: count(PENDING)?,
        notes: count(NOTES)?,
        events: count(MOVED_COPY_COUNT_SQL)?,
    })
}

/// The SQL that blanks the sources of an identity's refused writes (`$1` subject, `$2`
/// predicate, `$3` scope): a `rejected` or `pending_resolved` event keeps the refused write's
/// source — free text a model wrote, which may repeat what the user deleted — until a delete
/// covering the identity, deleted before or not, blanks it; the event stays, the history
/// log's record that a write was refused (README, "delete, restore, gc").
pub(crate) const BLANK_REFUSED_SOURCES_SQL: &str = "UPDATE history SET source = NULL
      WHERE subject = $1 AND predicate = $2 AND scope = $3
        AND event IN ('rejected', 'pending_resolved') AND source IS NOT NULL";

/// The count [`BLANK_REFUSED_SOURCES_SQL`] would blank: for a preview, and read again after
/// the blanking ([`check_sources_blanked`]).
pub(crate) const REFUSED_SOURCES_COUNT_SQL: &str = "SELECT count(*) FROM history
      WHERE subject = $1 AND predicate = $2 AND scope = $3
        AND event IN ('rejected', 'pending_resolved') AND source IS NOT NULL";

/// Which refused writes' sources (`rejected`, `pending_resolved` events) an identity kept from
/// before `gc` collected its tombstone: once the tombstone is gone no delete reaches them (the
/// identity holds nothing to delete), so `gc` blanks them as it collects (found by review: with
/// retention 0 they stayed for good), and `check` names one an earlier release kept.
macro_rules! collected_sources_where {
    () => {
        "event IN ('rejected', 'pending_resolved') AND source IS NOT NULL
        AND id < (SELECT max(c.id) FROM history c WHERE c.event = 'tombstone_collected'
                  AND c.subject = history.subject AND c.predicate = history.predicate
                  AND c.scope = history.scope)"
    };
}

/// The SQL that blanks the sources `collected_sources_where!` finds.
pub(crate) const BLANK_COLLECTED_SOURCES_SQL: &str = concat!(
    "UPDATE history SET source = NULL WHERE ",
    collected_sources_where!()
);

/// How many such sources there are (PostgreSQL's gc opens the purge gate for them).
pub(crate) const COLLECTED_SOURCES_COUNT_SQL: &str = concat!(
    "SELECT count(*) FROM history WHERE ",
    collected_sources_where!()
);

/// Refuses a delete whose blanking of refused writes' sources did not happen (`remaining`:
/// [`REFUSED_SOURCES_COUNT_SQL`] read after it), as [`check_carried_out`] refuses a purge that
/// did not: the caller's transaction rolls back.
pub(crate) fn check_sources_blanked(
    id: &crate::model::Identity,
    remaining: i64,
) -> anyhow::Result<()> {
    if remaining == 0 {
        return Ok(());
    }
    anyhow::bail!(
        "the database did not carry out the delete of {id} ({remaining} refused writes' sources remain after their blanking): a trigger, rule or row policy that is not memscope's suppressed it, so nothing was deleted — run `memscope check` and remove what a raw SQL client added"
    )
}

/// A `deleted` event's detail: the reason, how many versions' content history gave up, when
/// the identity held a record, and the version of the record it removed — which the tombstone
/// follows even where history does not account for it (a raw client's record, found by
/// review: the delete left a tombstone `check` called out of step, and nothing could clear
/// it), so `check` expects the tombstone past it (README, "check", invariant 5).
pub(crate) fn deleted_detail(
    reason: Option<&str>,
    purged: i64,
    live_intervals: Vec<[String; 2]>,
    record: Option<i64>,
) -> serde_json::Value {
    let mut detail = serde_json::json!({
        "reason": reason, "purged_versions": purged, "live_intervals": live_intervals
    });
    if let Some(v) = record {
        detail["record_version"] = v.into();
    }
    detail
}

#[cfg(test)]
mod moved_copies_tests {
    use super::{moved_copies, RescopeEvent};

    fn ev(event: &str, scope: &str, version: i64, detail: &str) -> RescopeEvent {
        RescopeEvent {
            event: event.into(),
            scope: scope.into(),
            version: Some(version),
            detail: detail.into(),
        }
    }

    #[test]
    fn a_rescope_chain_is_followed_back_to_where_the_value_was_first_written() {
        let events = [
            // task:t v1 moved to global (its v2), then global v2 moved to repo:a.
            ev(
                "rescoped",
                "global",
                2,
                r#"{"from":"task:t","from_version":1,"outcome":"superseded"}"#,
            ),
            ev(
                "removed",
                "task:t",
                1,
                r#"{"rescoped_to":"global","moved_version":1}"#,
            ),
            ev(
                "rescoped",
                "repo:a",
                1,
                r#"{"from":"global","from_version":2,"outcome":"inserted"}"#,
            ),
            ev(
                "reverted",
                "global",
                3,
                r#"{"rescoped_to":"repo:a","moved_version":2,"reverted_to":1,"outcome":"superseded"}"#,
            ),
            // Another identity's rescope, and a detail that is not JSON: neither counts.
            ev(
                "reverted",
                "global",
                5,
                r#"{"rescoped_to":"repo:b","moved_version":4}"#,
            ),
            ev("removed", "repo:c", 1, "not json"),
            // global v4 reverted to v2 (a copy of the moved value), v5 reverted to v4 (another),
            // v6 back to v3 (not one).
            ev(
                "reverted",
                "global",
                4,
                r#"{"reverted_to":2,"outcome":"superseded"}"#,
            ),
            ev(
                "reverted",
                "global",
                5,
                r#"{"reverted_to":4,"outcome":"superseded"}"#,
            ),
            ev(
                "reverted",
                "global",
                6,
                r#"{"reverted_to":3,"outcome":"superseded"}"#,
            ),
        ];
        let global = |v: i64| ("global".to_string(), v);
        assert_eq!(
            moved_copies("repo:a", &events, &[]),
            [global(2), global(4), global(5), ("task:t".to_string(), 1)]
        );
        // A delete that destroys global whole too still reaches task:t through it.
        assert_eq!(
            moved_copies("repo:a", &events, &["global".to_string()]),
            [("task:t".to_string(), 1)]
        );
        // Deleting global: the value task:t v1 moved there went on to repo:a, but the move
        // (logged before `became` was) does not say which version of global it became.
        assert_eq!(
            moved_copies("global", &events, &[]),
            [("task:t".to_string(), 1)]
        );
        assert!(moved_copies("repo:c", &events, &[]).is_empty());
        // The value a rescope restored (global v3, a copy of v1) moved by the next rescope:
        // v1 holds the same value where it was first written (found by the reliability test
        // of rescopes racing deletes: it stayed). The first rescope's moved v2 is a copy too;
        // v1 is no copy of v2.
        let twice = [
            ev(
                "reverted",
                "global",
                3,
                r#"{"rescoped_to":"repo:a","moved_version":2,"reverted_to":1,"outcome":"superseded"}"#,
            ),
            ev(
                "removed",
                "global",
                3,
                r#"{"rescoped_to":"repo:a","moved_version":3}"#,
            ),
        ];
        assert_eq!(
            moved_copies("repo:a", &twice, &[]),
            [global(1), global(2), global(3)]
        );
        assert_eq!(moved_copies("repo:a", &twice[..1], &[]), [global(2)]);
        // A chain back into the deleted scope stops there.
        let cycle = [
            ev(
                "reverted",
                "global",
                3,
                r#"{"rescoped_to":"repo:a","moved_version":2}"#,
            ),
            ev(
                "rescoped",
                "global",
                2,
                r#"{"from":"repo:a","from_version":1}"#,
            ),
        ];
        assert_eq!(
            moved_copies("repo:a", &cycle, &[]),
            [("global".to_string(), 2)]
        );
    }

    /// A rescope of `from`'s version `moved` (its only one: `removed`) that became `to`'s `became`.
    fn moved(from: &str, moved: i64, to: &str, became: i64) -> [RescopeEvent; 2] {
        [
            ev(
                "removed",
                from,
                moved,
                &format!(r#"{{"rescoped_to":"{to}","moved_version":{moved},"became":{became}}}"#),
            ),
            ev(
                "rescoped",
                to,
                became,
                &format!(r#"{{"from":"{from}","from_version":{moved},"outcome":"inserted"}}"#),
            ),
        ]
    }

    /// global v1 moved to repo:r by mistake (repo:r v1), moved back (global v2, current).
    fn there_and_back() -> Vec<RescopeEvent> {
        [
            moved("global", 1, "repo:r", 1),
            moved("repo:r", 1, "global", 2),
        ]
        .concat()
    }

    #[test]
    fn a_value_moved_in_and_out_again_is_not_the_deletes() {
        // Deleting the emptied repo:r: global's v1 holds the value global holds now — before
        // the delete purges repo:r's own events, and after (as `check` reads them).
        assert!(moved_copies("repo:r", &there_and_back(), &[]).is_empty());
        let purged = |events: Vec<RescopeEvent>| -> Vec<RescopeEvent> {
            events.into_iter().filter(|e| e.scope != "repo:r").collect()
        };
        assert!(moved_copies("repo:r", &purged(there_and_back()), &[]).is_empty());
        // Superseded in repo:r before its next version moved out: v1 was repo:r's own.
        let superseded = [
            moved("global", 1, "repo:r", 1),
            moved("repo:r", 2, "global", 2),
        ]
        .concat();
        let global = |v: i64| ("global".to_string(), v);
        assert_eq!(moved_copies("repo:r", &superseded, &[]), [global(1)]);
        assert_eq!(
            moved_copies("repo:r", &purged(superseded), &[]),
            [global(1)]
        );
    }

    #[test]
    fn a_value_moved_out_and_back_in_is_followed_to_its_first_copy() {
        // ... and then global v2 moved to repo:r again (its v2), which the delete destroys:
        // global v2 is a copy, and so is v1, by way of repo:r v1.
        let mut again = there_and_back();
        again.extend(moved("global", 2, "repo:r", 2));
        let global = |v: i64| ("global".to_string(), v);
        assert_eq!(moved_copies("repo:r", &again, &[]), [global(1), global(2)]);
        // The same after a first delete of the emptied repo:r purged its own events: global
        // v1's value went on to global v2, which this delete destroys.
        let first_purged: Vec<RescopeEvent> = again
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !matches!(i, 1 | 2))
            .map(|(_, e)| e)
            .collect();
        assert_eq!(
            moved_copies("repo:r", &first_purged, &[]),
            [global(1), global(2)]
        );
        // A value moved on to a place the same delete destroys whole is the delete's.
        // (task:t v1 moved to repo:r, on to global: deleting repo:r and global together.)
        let task = |e: RescopeEvent| RescopeEvent {
            scope: e.scope.replace("global", "task:t"),
            detail: e.detail.replace(r#""from":"global""#, r#""from":"task:t""#),
            ..e
        };
        let on: Vec<RescopeEvent> = there_and_back()
            .into_iter()
            .enumerate()
            .map(|(i, e)| if i < 2 { task(e) } else { e })
            .collect();
        assert!(moved_copies("repo:r", &on, &[]).is_empty());
        assert_eq!(
            moved_copies("repo:r", &on, &["global".to_string()]),
            [("task:t".to_string(), 1)]
        );
    }
}
