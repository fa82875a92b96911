//! A write request made ready for a backend's transaction, with no database: validated and
//! normalized (`validate`), its words read for the scope guard — the same for every backend,
//! and run ahead of the writer by `apply`'s parse thread. What a backend adds inside its
//! transaction (the alias table, the stored spellings) it adds to the [`PreparedWrite`].

use crate::model::{
    named_context_id, normalize_subject, within_id_limit, ContextKind, Identity, InvalidRequest,
    LineError, OutcomeKind, OutcomeScope, PendingItem, Scope, ScopeChoice, WriteOutcome,
    WriteRequest, MAX_BROUGHT_SEQ_WORDS, MAX_CAUSAL_SEQ,
};
use crate::store::decide::Spelling;
use crate::store::guard::{Context, Words};
use anyhow::Result;
use serde_json::Value;

/// A request after validation and normalization: ready for the transaction.
#[derive(Debug, Clone)]
pub(crate) struct PreparedWrite {
    pub subject: String,
    pub predicate: String,
    pub value: Value,
    pub value_text: String,
    pub choice: ScopeChoice,
    /// The exact scope as stored (`None` for an ambiguous write), made once off the writer.
    pub scope_text: Option<String>,
    pub source: String,
    pub raw: Option<String>,
    pub causal_seq: Option<i64>,
    /// Where the write was made (the scope guard's context), ids in their scope form's id.
    pub context: Option<Context>,
    /// A global write's words as the scope guard reads them, read ahead (by the `apply`
    /// pipeline's parse thread) so the writer need not.
    pub words: Option<Words>,
    /// A person's curation — a pending item resolved into a scope, a value moved by `rescope`, a
    /// revert — of content memscope already holds: the person chose its scope, so the scope
    /// guard does not judge it (README, "memscope suspects": a version a human placed is no
    /// suspect, and its `set` event carries no mark).
    pub curated: bool,
    /// How the value is compared with the current one (`write --respell`: exactly).
    pub spelling: Spelling,
}

impl PreparedWrite {
    /// A write of content memscope already holds (a pending item, a moved or reverted
    /// version) into one identity: nothing to validate again.
    pub(crate) fn stored(
        id: &Identity,
        value: Value,
        source: String,
        raw: Option<String>,
        causal_seq: Option<i64>,
    ) -> Result<PreparedWrite> {
        Ok(PreparedWrite {
            subject: id.subject.clone(),
            predicate: id.predicate.clone(),
            value_text: serde_json::to_string(&value)?,
            value,
            choice: ScopeChoice::Exact(id.scope.clone()),
            scope_text: Some(id.scope.to_string()),
            source,
            raw,
            causal_seq,
            context: None,
            words: None,
            curated: true,
            spelling: Spelling::Folded,
        })
    }

    /// The identity an exact write touches; `None` for an ambiguous one.
    pub(crate) fn identity(&self) -> Option<Identity> {
        match &self.choice {
            ScopeChoice::Exact(scope) => Some(Identity {
                subject: self.subject.clone(),
                predicate: self.predicate.clone(),
                scope: scope.clone(),
            }),
            ScopeChoice::Ambiguous(_) => None,
        }
    }
}

/// Validates and normalizes a request: everything but the alias table, so it needs no
/// database and can run ahead of the writer (`apply` does it on its reader thread). The
/// predicate comes back normalized, not yet mapped through the aliases.
pub(crate) fn validate(req: WriteRequest) -> Result<PreparedWrite, InvalidRequest> {
    let subject = normalize_subject(&req.subject).map_err(InvalidRequest)?;
    let predicate = crate::model::normalize_predicate(&req.predicate).map_err(InvalidRequest)?;
    // The parts as stored, within the one limit of both backends (README, "The model in one
    // minute"): a write names no new identity PostgreSQL could not index.
    within_id_limit("subject", &subject).map_err(InvalidRequest)?;
    within_id_limit("predicate", &predicate).map_err(InvalidRequest)?;
    match &req.scope {
        ScopeChoice::Exact(scope) => scope.within_id_limit(),
        ScopeChoice::Ambiguous(candidates) => {
            candidates.iter().try_for_each(Scope::within_id_limit)
        }
    }
    .map_err(InvalidRequest)?;
    let source = req.source.trim();
    if source.is_empty() {
        return Err(InvalidRequest(
            "source is empty: every write needs its provenance, e.g. thread:23/message:14".into(),
        ));
    }
    if source.chars().any(char::is_control) {
        return Err(InvalidRequest(
            "source contains control characters: use plain text like thread:23/message:14".into(),
        ));
    }
    if req.value.is_null() {
        return Err(InvalidRequest(
            "value is null: to forget a memory use `memscope delete`, not a null write".into(),
        ));
    }
    if let Some(seq) = req.causal_seq {
        // The range every JSON reader holds exactly; one above 2^53 − 2^32 is judged against
        // the clock inside the write's transaction (`brought_within_clock`).
        if !(1..=MAX_CAUSAL_SEQ).contains(&seq) {
            return Err(InvalidRequest(format!(
                "causal_seq {seq} is out of range (1 to 2^53, and above {MAX_BROUGHT_SEQ_WORDS} only a number `memscope seq` handed out): leave it out, and the clock orders the write"
            )));
        }
    }
    let depth = crate::model::value_depth(&req.value);
    if depth > crate::model::MAX_VALUE_DEPTH {
        return Err(InvalidRequest(format!(
            "value is nested {depth} levels deep; memscope keeps values nested at most {} levels: store a flatter value",
            crate::model::MAX_VALUE_DEPTH
        )));
    }
    // A context's place may become a candidate of the write (the scope guard's): its id is a
    // scope id the write names.
    let context_id = |kind: ContextKind, id: &str| {
        let id = named_context_id(kind, id, &format!("context.{}", kind.name()))?;
        within_id_limit(&format!("{} id", kind.noun()), &id)?;
        Ok(id)
    };
    let context = match &req.context {
        Some(c) => Some(Context {
            repo: c
                .repo
                .as_deref()
                .map(|r| context_id(ContextKind::Repo, r))
                .transpose()
                .map_err(InvalidRequest)?,
            task: c
                .task
                .as_deref()
                .map(|t| context_id(ContextKind::Task, t))
                .transpose()
                .map_err(InvalidRequest)?,
        }),
        None => None,
    };
    // Words that say nothing are no words: absent, whichever front end sent them.
    let raw = req.raw.filter(|r| !r.trim().is_empty());
    if let Some(raw) = &raw {
        if raw.contains('\0') {
            return Err(InvalidRequest(
                "raw text contains a NUL byte: send the user's words as plain text".into(),
            ));
        }
    }
    Ok(PreparedWrite {
        subject,
        predicate,
        // Serializing a `Value` cannot fail (its map keys are strings).
        value_text: req.value.to_string(),
        source: source.to_string(),
        value: req.value,
        scope_text: match &req.scope {
            ScopeChoice::Exact(scope) => Some(scope.to_string()),
            ScopeChoice::Ambiguous(_) => None,
        },
        // Only a global write's words are judged.
        words: match (&req.scope, &raw) {
            (ScopeChoice::Exact(Scope::Global), Some(raw)) => Some(Words::read(raw)),
            _ => None,
        },
        choice: req.scope,
        curated: false,
        raw,
        causal_seq: req.causal_seq,
        context,
        spelling: Spelling::Folded,
    })
}

/// `req` prepared as a correction of its value's spelling (`write --respell`): one identity,
/// its value compared exactly.
pub(crate) fn validate_respelled(req: WriteRequest) -> Result<PreparedWrite, InvalidRequest> {
    if matches!(req.scope, ScopeChoice::Ambiguous(_)) {
        return Err(InvalidRequest(
            "a spelling correction (--respell) writes to one scope, and this write names candidates: pass --scope".into(),
        ));
    }
    // A person's correction, not an agent's words: with a place to weigh them against, the scope
    // guard could queue it, and the pending item would not keep the spelling (found by review).
    if req.context.is_some() {
        return Err(InvalidRequest(
            "a spelling correction (--respell) is a person's and names no place its words were said in: leave out --in-repo and --in-task".into(),
        ));
    }
    let mut w = validate(req)?;
    w.spelling = Spelling::Exact;
    Ok(w)
}

/// Refuses an agent's name or a note of a read to log that holds a NUL, which PostgreSQL cannot
/// store — the same on every backend, whichever front end logs the read. (A name an agent gave
/// itself, an MCP client's, is kept as given otherwise and shown escaped; the names a person
/// types, `--agent`, are held to [`crate::model::agent_name`] where they are read.) Returns the
/// note to log: one that says nothing (empty, or only spaces) is no note, as words that say
/// nothing are none in a write (found by review: `--note ''` was logged and shown as “”).
pub(crate) fn logged_read_words<'a>(
    agent: Option<&str>,
    note: Option<&'a str>,
) -> Result<Option<&'a str>, InvalidRequest> {
    if let Some(agent) = agent {
        crate::model::refuse_nul("the agent's name", agent)?;
    }
    if let Some(note) = note {
        crate::model::refuse_nul("the read's note", note)?;
    }
    Ok(note.filter(|n| !n.trim().is_empty()))
}

/// Whether `text` is a name of `kind` (`subject`, `scope`) a write could store as it stands:
/// in normal form and within the id limit — what an import registers of the names only the
/// read log holds (a raw client's `reads.repo` may hold anything).
pub(crate) fn registrable(kind: &str, text: &str) -> bool {
    match kind {
        "subject" => {
            normalize_subject(text).is_ok_and(|s| s == text)
                && within_id_limit("subject", text).is_ok()
        }
        _ => Scope::parse(text).is_ok_and(|s| {
            s != Scope::Global && s.to_string() == text && s.within_id_limit().is_ok()
        }),
    }
}

/// The spellings a logged read registers, as a write of its names would (README, "The read
/// log"): its subject and the places it names, each one a write could store. So the read log
/// holds one spelling per subject and place, and a later write in another case, a filter or
/// a delete finds the read under it (found by an exploratory test: a read logged before its
/// subject was written kept the reader's case, and `delete --subject` then left its note). A
/// name no write could store (past the id limit, say) is logged as given and registers nothing.
pub(crate) fn read_spellings(
    subject: &str,
    repo: Option<&str>,
    task: Option<&str>,
) -> (Option<String>, Vec<Scope>) {
    let subject = normalize_subject(subject)
        .ok()
        .filter(|s| within_id_limit("subject", s).is_ok());
    let places = [
        repo.map(|r| format!("repo:{r}")),
        task.map(|t| format!("task:{t}")),
    ]
    .into_iter()
    .flatten()
    .filter_map(|text| Scope::parse(&text).ok())
    .filter(|place| place.within_id_limit().is_ok())
    .collect();
    (subject, places)
}

/// Refuses to write a value memscope holds into a place a person names — a rescope's target,
/// a pending item's resolution — when the identity it would make has a part past the id limit
/// (README, "The model in one minute"), as a write naming it is refused. Asked before the
/// place's spelling is registered.
pub(crate) fn new_place_within_id_limit(
    subject: &str,
    predicate: &str,
    scope: &Scope,
) -> Result<(), InvalidRequest> {
    within_id_limit("subject", subject)
        .and_then(|()| within_id_limit("predicate", predicate))
        .and_then(|()| scope.within_id_limit())
        .map_err(InvalidRequest)
}

/// The outcome of a write to `id`, before the decision's details are filled in.
pub(crate) fn base_outcome(kind: OutcomeKind, id: &Identity) -> WriteOutcome {
    WriteOutcome::new(
        kind,
        &id.subject,
        &id.predicate,
        OutcomeScope::Exact(id.scope.clone()),
    )
}

/// One line of `apply` input, parsed and validated (`None`: a blank line).
pub(crate) fn parse_line(bytes: &[u8]) -> Option<std::result::Result<PreparedWrite, LineError>> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Some(Err(LineError {
            message: "line is not valid UTF-8: send JSON text encoded as UTF-8".into(),
            column: None,
        }));
    };
    let text = text.trim_end_matches(['\n', '\r']);
    if text.trim().is_empty() {
        return None;
    }
    Some(WriteRequest::from_json_line(text).and_then(|r| {
        validate(r).map_err(|e| LineError {
            message: e.0,
            column: None,
        })
    }))
}

/// A line failed half-way through a batch without savepoints: run the batch again with them.
#[derive(Debug)]
pub(crate) struct RetryWithSavepoints;

impl std::fmt::Display for RetryWithSavepoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a line failed half-way; the batch is retried line by line")
    }
}

impl std::error::Error for RetryWithSavepoints {}

/// The causal number a pending item is resolved with: its own, taken when the write arrived —
/// except a value a spelling merge queued, a human's choice between two current values made
/// now (the clock's next), so it is never `stale` against the value it replaces.
pub(crate) fn resolution_seq(item: &PendingItem) -> Option<i64> {
    item.merged_from.is_none().then_some(item.causal_seq)
}

/// Why a write waits in the pending queue, as its outcome says it: the scope guard's evidence,
/// or the writer's own ambiguity.
pub(crate) fn queued_reason(guard_reason: Option<&str>, left_out: &[Scope]) -> String {
    let queued = match guard_reason {
        Some(evidence) => format!(
            "the scope guard queued it for a human: {evidence}; it was not applied, do not write it again"
        ),
        None => "the scope is ambiguous: a human picks one with `memscope pending resolve`".into(),
    };
    // The candidates `decide::queued_candidates` left out.
    let names: Vec<String> = left_out.iter().map(Scope::to_string).collect();
    match names.as_slice() {
        [] => queued,
        [one] => format!(
            "{queued}; {one} is not offered: this identity was deleted there (restore it to offer it)"
        ),
        more => format!(
            "{queued}; {} are not offered: this identity was deleted there (restore them to offer them)",
            more.join(", ")
        ),
    }
}

/// A resolution the write path rejected (its scope is deleted) wrote nothing, so the human's
/// question is still open (README, "pending resolve"): the item stays in the queue, and the
/// outcome says so and what to do. `true` when `out` is such a rejection.
pub(crate) fn stays_open(out: &mut WriteOutcome, pending_id: i64, scope: &Scope) -> bool {
    if out.outcome != OutcomeKind::Rejected {
        return false;
    }
    let said = out.reason.take().unwrap_or_default();
    out.reason = Some(format!(
        "{}pending #{pending_id} stays open: resolve it to another candidate, or to {scope} again once it is restored",
        if said.is_empty() { String::new() } else { format!("{said}; ") }
    ));
    true
}

/// Whether `scope` is among pending item `item`'s candidates; refused (nothing changes) when it
/// is not and the human did not ask to write it there anyway (`outside_candidates`, `--force`).
pub(crate) fn resolution_among(
    item: &PendingItem,
    scope: &Scope,
    outside_candidates: bool,
) -> Result<bool> {
    // A place in any spelling is that place (README, "One spelling per place"): a candidate a
    // raw client stored in another case is still the one the human names (found by an
    // exploratory test: every spelling of it was refused as no candidate).
    let place = crate::spelling::fold(&scope.to_string());
    let among = item
        .candidates
        .iter()
        .any(|c| c == scope || crate::spelling::fold(&c.to_string()) == place);
    if !among && !outside_candidates {
        let names: Vec<String> = item.candidates.iter().map(|c| c.to_string()).collect();
        return Err(InvalidRequest(format!(
            "{scope} is not a candidate of pending #{}, whose candidates are {}: pick one of them, or pass --force to write it to {scope} anyway",
            item.id,
            names.join(", ")
        ))
        .into());
    }
    Ok(among)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spelling correction names one scope and no place its words were said in: each refusal
    /// is its own sentence (the CLI's clap refuses `--ambiguous` first, so only a library
    /// caller meets the first).
    #[test]
    fn a_respell_refuses_candidates_and_a_context() {
        let req = |json: &str| WriteRequest::from_json_line(json).expect("a request");
        let ambiguous = req(
            r#"{"subject":"u:1","predicate":"分支","value":"main","scope":{"ambiguous":["global","repo:网页"]},"source":"s"}"#,
        );
        let err = validate_respelled(ambiguous).unwrap_err().0;
        assert!(err.contains("names candidates: pass --scope"), "{err}");
        let placed = req(
            r#"{"subject":"u:1","predicate":"分支","value":"main","scope":"global","source":"s","context":{"repo":"网页"}}"#,
        );
        let err = validate_respelled(placed).unwrap_err().0;
        assert!(err.contains("leave out --in-repo and --in-task"), "{err}");
        let plain = req(
            r#"{"subject":"u:1","predicate":"分支","value":"main","scope":"global","source":"s"}"#,
        );
        assert_eq!(validate_respelled(plain).unwrap().spelling, Spelling::Exact);
    }
}
