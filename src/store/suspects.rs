//! Suspects in the existing data (issue 16; README, "memscope suspects"), one judge for both
//! backends: a current `global` record whose own words or whose message's other records point
//! at one place, judged by the scope guard's core ([`crate::store::guard`]); its blast radius
//! (the repositories served its value without a rule of their own) and the ranking. The
//! backends read the records, places, siblings and read log.

use crate::model::{MemoryRecord, Scope};
use crate::store::guard::{judge, Cues, Evidence, GuardMode, Places, Verdict};
use serde::Serialize;

/// One current `global` record that looks like a rule of one place.
#[derive(Debug, Clone, Serialize)]
pub struct Suspect {
    pub record: MemoryRecord,
    /// Why, one sentence per signal.
    pub evidence: Vec<String>,
    /// Where it probably belongs: the place its evidence points at first (a rescope target).
    pub suggested_scope: Option<Scope>,
    /// Repositories memscope knows that have no rule of their own for this subject and
    /// predicate: resolution serves them this global value.
    pub blast_radius: Vec<String>,
    /// Logged reads that were served this global value.
    pub reads: i64,
}

/// A global record's place signals: its evidence and the places it points at, or `None`
/// when nothing points anywhere. `raw`: its words; `siblings`: (predicate, scope) of the
/// scoped records stored from the same message.
pub(crate) fn place_signals(
    places: &Places,
    raw: Option<&str>,
    siblings: &[(String, Scope)],
) -> Option<(Vec<String>, Vec<Scope>)> {
    let ev = Evidence {
        raw,
        words: None,
        context: None,
        known_places: places,
        siblings,
    };
    match judge(Cues::shipped(), &Scope::Global, &ev, GuardMode::Flag) {
        Verdict::Suspect { evidence, places } => Some((evidence, places)),
        _ => None,
    }
}

/// An event logged in `global` that may say a person put a version there: a pending item
/// resolved into it (`pending_resolved`), a value moved into it (`rescoped`), a revert
/// (`reverted`, with the version it brought back).
pub(crate) struct Placing {
    pub version: i64,
    pub event: String,
    /// The outcome the event's write had (`inserted`, `stale` …).
    pub outcome: Option<String>,
    /// A revert's target version.
    pub reverted_to: Option<i64>,
}

impl Placing {
    /// One event from its stored fields: its detail is read here, leniently — a detail a raw
    /// client damaged only makes the event say nothing, it never fails the scan (or `check`).
    pub(crate) fn read(version: i64, event: String, detail: Option<&str>) -> Placing {
        let detail = detail.and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok());
        let field = |name: &str| detail.as_ref().and_then(|d| d.get(name).cloned());
        Placing {
            version,
            event,
            outcome: field("outcome").and_then(|o| o.as_str().map(str::to_string)),
            reverted_to: field("reverted_to").and_then(|v| v.as_i64()),
        }
    }
}

/// The events the scan reads for [`placed_by_a_human`].
pub(crate) const PLACING_EVENTS: [&str; 3] = ["pending_resolved", "rescoped", "reverted"];

/// Whether a person placed global version `version` (README, "memscope suspects"), from the
/// identity's [`Placing`] events in `global`: a pending item resolved into `global` or a value
/// moved there by `rescope` that stored or confirmed it — the person's choice is the answer the
/// guard asks for — or a revert that brought back a version a person placed (a rescope's return
/// to the earlier value included: the choice is not undone by moving a later value away). A
/// later version is judged again; a revert to a version no person placed is judged too.
pub(crate) fn placed_by_a_human(version: i64, events: &[Placing]) -> bool {
    let mut at = version;
    loop {
        let mut earlier = None;
        for e in events.iter().filter(|e| e.version == at) {
            if !matches!(
                e.outcome.as_deref(),
                Some("inserted" | "confirmed" | "superseded")
            ) {
                continue;
            }
            match e.event.as_str() {
                "pending_resolved" | "rescoped" => return true,
                // Only backwards: a chain of reverts ends.
                "reverted" => earlier = e.reverted_to.filter(|&t| t < at).or(earlier),
                _ => {}
            }
        }
        match earlier {
            Some(t) => at = t,
            None => return false,
        }
    }
}

/// The `set` detail of a version the guard marked (README, "The scope guard", `flag`): its
/// evidence, and the places it pointed at — the place the write was made in first, which its
/// words alone do not say, so the suspects scan can still suggest it.
pub(crate) fn marked_detail(evidence: Vec<String>, places: &[Scope]) -> serde_json::Value {
    if places.is_empty() {
        return serde_json::json!({ "suspect": evidence });
    }
    let places: Vec<String> = places.iter().map(Scope::to_string).collect();
    serde_json::json!({ "suspect": evidence, "places": places })
}

/// Tells a write's outcome the evidence of the `set` detail it stored marked (`detail`, from
/// [`marked_detail`]), when it stored one: an inserted or superseded value (found by an
/// exploratory test: the write said only `superseded`, and nobody learned of the mark until
/// they looked).
pub(crate) fn tell_marked(
    out: &mut crate::model::WriteOutcome,
    detail: Option<&serde_json::Value>,
) {
    use crate::model::OutcomeKind;
    if !matches!(out.outcome, OutcomeKind::Inserted | OutcomeKind::Superseded) {
        return;
    }
    out.suspect = detail
        .and_then(|d| d.get("suspect"))
        .and_then(serde_json::Value::as_array)
        .map(|evidence| {
            evidence
                .iter()
                .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
                .collect()
        });
}

/// The places a marked version's `set` detail names ([`marked_detail`]) before those its words
/// and siblings point at (`found`), each once.
pub(crate) fn with_marked_places(detail: Option<&str>, found: Vec<Scope>) -> Vec<Scope> {
    let kept: Vec<Scope> = detail
        .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .and_then(|d| d.get("places").cloned())
        .and_then(|p| serde_json::from_value::<Vec<String>>(p).ok())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| Scope::parse(p).ok())
        .filter(|p| *p != Scope::Global)
        .collect();
    let mut out = kept;
    for p in found {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The repositories among `known` places.
pub(crate) fn repos(known: &[Scope]) -> Vec<&Scope> {
    known
        .iter()
        .filter(|s| matches!(s, Scope::Repo(_)))
        .collect()
}

/// The blast radius of a global value: every known repository, and every one whose agents
/// read it (`readers`, from the read log), less those with a rule of their own (`own`: the
/// identity's live scopes), sorted.
pub(crate) fn blast_radius(repos: &[&Scope], own: &[Scope], readers: Vec<String>) -> Vec<String> {
    let mut radius: Vec<String> = repos
        .iter()
        .filter(|r| !own.contains(r))
        .map(|r| r.to_string())
        .collect();
    for repo in readers {
        let place = Scope::Repo(repo);
        let name = place.to_string();
        if !own.contains(&place) && !radius.contains(&name) {
            radius.push(name);
        }
    }
    radius.sort();
    radius
}

impl Suspect {
    pub(crate) fn new(
        record: MemoryRecord,
        evidence: Vec<String>,
        places: Vec<Scope>,
        (blast_radius, reads): (Vec<String>, i64),
    ) -> Suspect {
        Suspect {
            record,
            evidence,
            suggested_scope: places.into_iter().next(),
            blast_radius,
            reads,
        }
    }
}

/// Widest blast radius first, then most reads, then by subject and predicate.
pub(crate) fn rank(found: &mut [Suspect]) {
    found.sort_by(|a, b| {
        (b.blast_radius.len(), b.reads)
            .cmp(&(a.blast_radius.len(), a.reads))
            .then_with(|| {
                (&a.record.subject, &a.record.predicate)
                    .cmp(&(&b.record.subject, &b.record.predicate))
            })
    });
}
