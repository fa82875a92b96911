//! What a rescope or a revert would do, worked out before `y` from the store's own data
//! (current records, tombstones, history) with the write path's rules, so the dialog can state
//! the effect. The store stays the judge: it refuses the same cases when the change runs.

use super::incident::{RescopePreview, RevertChoice, Suggestion};
use super::text::{ago, value_text};
use crate::model::{same_value, Identity, MemoryRecord, Scope};
use crate::store::{ReadFilter, Store};
use anyhow::Result;
use chrono::{DateTime, Utc};

/// Reads looked at for suggestions: the newest of this identity's read log.
const SUGGESTION_READS: i64 = 200;

/// Targets worth proposing for `rec`, best first: the scopes where the same words (its source)
/// wrote other memories of the subject — where they were said — then the repos of the newest
/// reads that got this very version, then `global` for a scoped record.
pub fn rescope_suggestions(
    store: &Store,
    rec: &MemoryRecord,
    now: DateTime<Utc>,
) -> Result<Vec<Suggestion>> {
    let mut out: Vec<Suggestion> = Vec::new();
    let mut push = |scope: Scope, why: String| {
        if scope != rec.scope && !out.iter().any(|s| s.scope == scope) {
            out.push(Suggestion { scope, why });
        }
    };
    for (scope, predicate) in store.scopes_written_by(&rec.subject, &rec.source)? {
        match Scope::parse(&scope) {
            Ok(Scope::Global) | Err(_) => {}
            Ok(scope) => push(
                scope,
                format!("the same words ({}) wrote {predicate} there", rec.source),
            ),
        }
    }
    let reads = store.reads(&ReadFilter {
        subject: Some(rec.subject.clone()),
        predicate: Some(rec.predicate.clone()),
        limit: Some(SUGGESTION_READS),
        ..Default::default()
    })?;
    let scope = rec.scope.to_string();
    for r in reads
        .iter()
        .filter(|r| r.scope.as_deref() == Some(scope.as_str()) && r.version == Some(rec.version))
    {
        let why = format!(
            "{} read v{} there {}",
            r.agent.as_deref().unwrap_or("an agent"),
            rec.version,
            ago(now, &r.at)
        );
        if let Some(repo) = &r.repo {
            push(Scope::Repo(repo.clone()), why);
        } else if let Some(task) = &r.task {
            push(Scope::Task(task.clone()), why);
        }
    }
    if rec.scope != Scope::Global {
        push(
            Scope::Global,
            "everywhere: a preference of the subject, not of one repo or task".into(),
        );
    }
    Ok(out)
}

/// What moving `rec` to the scope typed in `target` would do. `Err`: the target is no scope.
pub fn rescope_preview(
    store: &Store,
    rec: &MemoryRecord,
    target: &str,
) -> Result<RescopePreview, String> {
    let t = target.trim();
    if t.is_empty() {
        return Err("type the target scope: repo:<id>, task:<id> or global".into());
    }
    let to = Scope::parse(t)?;
    rescope_effects(store, rec, to).map_err(|e| format!("{e:#}"))
}

fn rescope_effects(store: &Store, rec: &MemoryRecord, to: Scope) -> Result<RescopePreview> {
    let from = &rec.scope;
    let value = value_text(&rec.value);
    let mut preview = RescopePreview {
        to: to.clone(),
        effects: Vec::new(),
        refusal: None,
    };
    if to == *from {
        preview.refusal = Some(format!("{to} is where it is now: choose another scope"));
        return Ok(preview);
    }
    let to_id = Identity {
        subject: rec.subject.clone(),
        predicate: rec.predicate.clone(),
        scope: to.clone(),
    };
    let keeps = format!(
        "keeps source {}, raw words and causal_seq {}",
        rec.source, rec.causal_seq
    );
    if let Some(t) = store.tombstone(&to_id)? {
        preview.refusal = Some(format!(
            "{to_id} is deleted (tombstone v{}): restore it first (tab 3, u), or choose another target; nothing changes",
            t.version
        ));
        return Ok(preview);
    }
    match store.get(&to_id)? {
        None => {
            let next = store
                .history(&rec.subject, &rec.predicate, Some(&to))?
                .iter()
                .filter_map(|e| e.version)
                .max()
                .unwrap_or(0)
                + 1;
            preview.effects.push(format!(
                "moves {value} to {to} as v{next} (inserted; {keeps})"
            ));
        }
        Some(cur) if same_value(&cur.value, &rec.value) => preview.effects.push(format!(
            "{to} already holds {value} (v{}): confirmed there, not duplicated",
            cur.version
        )),
        Some(cur) if cur.causal_seq >= rec.causal_seq => {
            preview.refusal = Some(format!(
                "{to} holds {} (v{}) with causal_seq {} ≥ {}: the store never lets a causally older value replace it (stale); nothing changes",
                value_text(&cur.value),
                cur.version,
                cur.causal_seq,
                rec.causal_seq
            ));
            return Ok(preview);
        }
        Some(cur) => preview.effects.push(format!(
            "moves {value} to {to}, superseding {} (v{}) as v{} ({keeps})",
            value_text(&cur.value),
            cur.version,
            cur.version + 1
        )),
    }
    match back_to_previous(store, rec)? {
        Ok(effect) => preview.effects.push(effect),
        Err(why) => preview.refusal = Some(why),
    }
    Ok(preview)
}

/// What the rescoped record's own scope becomes: its previous version's value as a new
/// version, or nothing when it had none.
fn back_to_previous(store: &Store, rec: &MemoryRecord) -> Result<Result<String, String>> {
    let from = &rec.scope;
    let previous = rec.version - 1;
    if previous < 1 {
        return Ok(Ok(format!("{from} is removed — it had no earlier value")));
    }
    let history = store.history(&rec.subject, &rec.predicate, Some(from))?;
    let set = history
        .iter()
        .rev()
        .find(|e| e.event == "set" && e.version == Some(previous));
    Ok(match set.map(|e| &e.value) {
        Some(Some(v)) if same_value(v, &rec.value) => Ok(format!(
            "{from} keeps {} (v{previous} held the same value): confirmed",
            value_text(v)
        )),
        Some(Some(v)) => Ok(format!(
            "{from} goes back to {} (value of v{previous}) as v{}",
            value_text(v),
            rec.version + 1
        )),
        Some(None) => Err(format!(
            "the content of {from} v{previous} was purged (retention or delete): there is nothing to go back to; nothing changes"
        )),
        None => Err(format!(
            "{from} has no v{previous} in its history: there is nothing to go back to; nothing changes"
        )),
    })
}

/// The earlier versions of `rec`'s identity, newest first, each with what reverting to it
/// would do.
pub fn revert_choices(store: &Store, rec: &MemoryRecord) -> Result<Vec<RevertChoice>> {
    let history = store.history(&rec.subject, &rec.predicate, Some(&rec.scope))?;
    let scope = &rec.scope;
    let mut out: Vec<RevertChoice> = Vec::new();
    for e in history.iter().rev().filter(|e| e.event == "set") {
        let Some(version) = e.version else {
            continue;
        };
        if version >= rec.version || out.iter().any(|c| c.version == version) {
            continue;
        }
        let effect = match &e.value {
            Some(v) if same_value(v, &rec.value) => Ok(format!(
                "{scope} already holds {}: v{} is confirmed, no new version",
                value_text(v),
                rec.version
            )),
            Some(v) => Ok(format!(
                "{scope} becomes {} (value of v{version}) as v{}",
                value_text(v),
                rec.version + 1
            )),
            None => Err(format!(
                "the content of v{version} was purged (retention or delete): there is nothing to revert to"
            )),
        };
        out.push(RevertChoice {
            version,
            value: e.value.clone(),
            at: e.at.clone(),
            source: e.source.clone(),
            valid_until: e.valid_until.clone(),
            effect,
        });
    }
    Ok(out)
}

/// One line for a write outcome in a toast: `inserted repo:legacy-dashboard v1 = npm`.
pub fn outcome_text(o: &crate::model::WriteOutcome) -> String {
    let scope = match &o.scope {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    match o.outcome {
        crate::model::OutcomeKind::Removed => {
            format!("removed {scope} (it had no earlier value)")
        }
        kind => {
            let mut s = format!("{kind} {scope}");
            if let Some(v) = o.version {
                s.push_str(&format!(" v{v}"));
            }
            if let Some(v) = &o.value {
                s.push_str(&format!(" = {}", value_text(v)));
            }
            s
        }
    }
}
