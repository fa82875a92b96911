//! The built-in demo: the first seed article's story, loaded from `assets/demo.jsonl` through
//! the real write path — writes, a confirmation, the incident (the legacy-dashboard rule written
//! as a global change that superseded the pnpm default, then agents in new projects reading npm),
//! a stale replay, a delete, logged reads and two ambiguous writes waiting for a human. Each step
//! carries its age so the UI shows real times.

use crate::model::{DeleteTarget, Identity, Scope, WriteRequest};
use crate::store::{Clock, Store};
use anyhow::{anyhow, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;

pub const DEMO_DATA: &str = include_str!("../assets/demo.jsonl");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DemoDelete {
    subject: String,
    predicate: Option<String>,
    scope: Option<Scope>,
    reason: Option<String>,
}

/// An agent's logged read (the read log of the incident).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DemoRead {
    agent: String,
    subject: String,
    predicate: String,
    repo: Option<String>,
    task: Option<String>,
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DemoStep {
    days_ago: i64,
    #[serde(default)]
    write: Option<WriteRequest>,
    #[serde(default)]
    delete: Option<DemoDelete>,
    #[serde(default)]
    read: Option<DemoRead>,
}

/// Loads the demo into `store` (normally a fresh database) and returns a summary.
pub fn load(store: &mut Store) -> Result<String> {
    load_at(store, chrono::Utc::now())
}

/// Loads the demo with ages counted back from `now` (fixed in snapshot tests).
pub fn load_at(store: &mut Store, now: chrono::DateTime<chrono::Utc>) -> Result<String> {
    let previous = store.clock();
    let mut outcomes: BTreeMap<String, u32> = BTreeMap::new();
    // Steps are applied oldest first, so the causal clock follows the story.
    let mut steps: Vec<(usize, DemoStep)> = Vec::new();
    for (i, line) in DEMO_DATA.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let step: DemoStep = serde_json::from_str(line)
            .with_context(|| format!("assets/demo.jsonl line {} is not a demo step", i + 1))?;
        steps.push((i, step));
    }
    steps.sort_by_key(|(i, s)| (-s.days_ago, *i));
    for (i, step) in steps {
        // Spread same-day steps by minutes so the timeline reads in order.
        let at = now - chrono::Duration::days(step.days_ago) - chrono::Duration::hours(2)
            + chrono::Duration::minutes(i as i64);
        store.set_clock(Clock::Fixed(at));
        if let Some(w) = &step.write {
            let out = store.write(w)?;
            *outcomes.entry(out.outcome.to_string()).or_default() += 1;
        }
        if let Some(d) = &step.delete {
            let target = match (&d.predicate, &d.scope) {
                (Some(p), Some(s)) => DeleteTarget::Identity(Identity {
                    subject: d.subject.clone(),
                    predicate: p.clone(),
                    scope: s.clone(),
                }),
                (Some(p), None) => DeleteTarget::Predicate {
                    subject: d.subject.clone(),
                    predicate: p.clone(),
                },
                (None, None) => DeleteTarget::Subject(d.subject.clone()),
                (None, Some(_)) => {
                    return Err(anyhow!("demo step {}: a scope needs a predicate", i + 1))
                }
            };
            store.delete(&target, d.reason.as_deref())?;
            *outcomes.entry("deleted".into()).or_default() += 1;
        }
        if let Some(r) = &step.read {
            store.resolve_logged(
                &r.subject,
                &r.predicate,
                r.repo.as_deref(),
                r.task.as_deref(),
                Some(&r.agent),
                r.note.as_deref(),
            )?;
            *outcomes.entry("logged reads".into()).or_default() += 1;
        }
    }
    store.set_clock(previous);
    store.set_setting("demo", "1")?;
    let counts = store.counts()?;
    let parts: Vec<String> = outcomes.iter().map(|(k, v)| format!("{v} {k}")).collect();
    Ok(format!(
        "{} live memories in {} scopes, {} pending for a human, {} tombstone(s) ({})",
        counts.memories,
        counts.scopes,
        counts.pending,
        counts.tombstones,
        parts.join(", ")
    ))
}
