//! `resolve`, `list`, `history`.

use super::output::{columns, cut_to_width, Align};
use super::{context_arg, outln, print_json, scope_arg, SubjectPredicate, EXIT_OK};
use crate::model::{shorten, value_text, ContextKind};
use crate::store::{AnyStore, ListFilter};
use anyhow::Result;
use clap::Args;

#[derive(Debug, Args)]
pub struct ResolveArgs {
    #[command(flatten)]
    pub about: SubjectPredicate,
    /// The repository the agent is working in: its id, e.g. web-app (repo:web-app is the same)
    #[arg(long, value_name = "ID")]
    pub repo: Option<String>,
    /// The task the agent is working on: its id, e.g. fix-1 (task:fix-1 is the same)
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Resolve as it stood at this time: RFC 3339 or an age like 90m, 12h, 3d
    #[arg(
        long,
        value_name = "TIME",
        conflicts_with = "log",
        allow_hyphen_values = true
    )]
    pub at: Option<String>,
    /// Record this read in the read log (identity and version, never the value)
    #[arg(long)]
    pub log: bool,
    /// The agent making the read (with --log)
    #[arg(long, requires = "log")]
    pub agent: Option<String>,
    /// A note to keep with the logged read
    #[arg(long, requires = "log", allow_hyphen_values = true)]
    pub note: Option<String>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this scope: global, repo:<id> or task:<id>
    #[arg(long)]
    pub scope: Option<String>,
    /// Only memories about this subject
    #[arg(long)]
    pub subject: Option<String>,
    /// Only this predicate
    #[arg(long)]
    pub predicate: Option<String>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub about: SubjectPredicate,
    /// Only this scope (default: every scope)
    #[arg(long)]
    pub scope: Option<String>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

/// How much of each considered value the chain's lines show (README, "resolve"): the first
/// line gives the winner whole, `--json` every value whole.
const CHAIN_VALUE: usize = 80;

pub fn resolve(store: &mut AnyStore, a: ResolveArgs) -> Result<i32> {
    let repo = context_arg(ContextKind::Repo, a.repo.as_deref())?;
    let task = context_arg(ContextKind::Task, a.task.as_deref())?;
    let (repo, task) = (repo.as_deref(), task.as_deref());
    // The rule `mcp --agent` holds an agent's name to (found by review: the CLI logged
    // `a<ESC>b` as an agent).
    let agent = a
        .agent
        .as_deref()
        .map(crate::model::agent_name)
        .transpose()
        .map_err(|e| super::usage(format!("--agent {e}")))?;
    let r = if let Some(at) = &a.at {
        let now = store.now();
        let at = crate::store::parse_time(at, now).map_err(super::usage)?;
        if at > now {
            // History holds no future: resolving "then" would show today's answer under a
            // date it has not reached (a year typed wrong, most likely).
            return Err(super::usage(format!(
                "--at {} is in the future (it is {} now): --at replays a past moment; leave it out for the answer now",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )));
        }
        store.resolve_at(&a.about.subject, &a.about.predicate, repo, task, at)?
    } else if a.log {
        store.resolve_logged(
            &a.about.subject,
            &a.about.predicate,
            repo,
            task,
            agent.as_deref(),
            a.note.as_deref(),
        )?
    } else {
        store.resolve(&a.about.subject, &a.about.predicate, repo, task)?
    };
    if a.json {
        print_json(&r)?;
        return Ok(EXIT_OK);
    }
    match (&r.value, &r.scope) {
        (None, Some(s)) => outln!(
            "{} · {}: {s} applied, but its content has since been destroyed",
            r.subject,
            r.predicate
        ),
        (Some(v), Some(s)) => outln!(
            "{} · {} = {} (from {s} v{}, source {})",
            r.subject,
            r.predicate,
            value_text(v),
            r.version.unwrap_or_default(),
            r.source.as_deref().unwrap_or("")
        ),
        _ => outln!("{} · {}: no memory applies here", r.subject, r.predicate),
    }
    for c in &r.considered {
        let arrow = if c.wins { "→" } else { " " };
        let value = c
            .value
            .as_ref()
            .map(|v| format!(" = {}", crate::model::shorten(&value_text(v), CHAIN_VALUE)))
            .unwrap_or_default();
        let version = c.version.map(|v| format!(" v{v}")).unwrap_or_default();
        outln!("  {arrow} {:<9} {}{value}{version}", c.state, c.scope);
    }
    Ok(EXIT_OK)
}

pub fn list(store: &mut AnyStore, a: ListArgs) -> Result<i32> {
    let filter = ListFilter {
        scope: a.scope.as_deref().map(scope_arg).transpose()?,
        subject: a.subject.as_deref().map(super::subject_arg).transpose()?,
        predicate: a.predicate,
    };
    let records = store.list(&filter)?;
    if a.json {
        print_json(&records)?;
        return Ok(EXIT_OK);
    }
    if records.is_empty() {
        outln!("no live memories match");
    }
    let mut last_scope = None;
    for r in &records {
        if last_scope.as_ref() != Some(&r.scope) {
            outln!("{}", r.scope);
            last_scope = Some(r.scope.clone());
        }
        outln!(
            "  {} · {} = {}  v{}  ({})",
            r.subject,
            r.predicate,
            shorten(&value_text(&r.value), 80),
            r.version,
            r.updated_at
        );
    }
    Ok(EXIT_OK)
}

pub fn history(store: &mut AnyStore, a: HistoryArgs) -> Result<i32> {
    let scope = a.scope.as_deref().map(scope_arg).transpose()?;
    super::subject_arg(&a.about.subject)?;
    let events = store.history(&a.about.subject, &a.about.predicate, scope.as_ref())?;
    if a.json {
        print_json(&events)?;
        return Ok(EXIT_OK);
    }
    if events.is_empty() {
        outln!(
            "no history for {} · {}{}",
            a.about.subject.trim(),
            store.canonical_predicate(&a.about.predicate)?,
            scope
                .as_ref()
                .map(|s| format!(" @ {s}"))
                .unwrap_or_default()
        );
    }
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            let version = e
                .version
                .map(|v| format!("v{v}"))
                .unwrap_or_else(|| "-".into());
            let value = e
                .value
                .as_ref()
                .map(|v| cut_to_width(&value_text(v), 60))
                .unwrap_or_else(|| "∅".into());
            let seq = e.causal_seq.map(|s| format!("seq {s}")).unwrap_or_default();
            let detail = e
                .detail
                .as_ref()
                .map(|d| format!(" {}", value_text(d)))
                .unwrap_or_default();
            let validity = match (e.event.as_str(), &e.valid_until) {
                ("set", Some(until)) => format!("  [valid until {until}]"),
                ("set", None) => "  [current]".to_string(),
                _ => String::new(),
            };
            let source = e.source.as_deref().unwrap_or("");
            vec![
                e.at.clone(),
                e.event.clone(),
                e.scope.clone(),
                version,
                value,
                seq,
                format!("{source}{detail}{validity}")
                    .trim_start()
                    .to_string(),
            ]
        })
        .collect();
    let align = [
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Right,
        Align::Left,
        Align::Left,
    ];
    for line in columns(&rows, &align, "  ") {
        outln!("{line}");
    }
    Ok(EXIT_OK)
}
