//! `reads`, `rescope`, `revert`: the wrong-tool incident loop.

use super::number::WholeNumber;
use super::{outln, print_json, scope_arg, SubjectPredicate, EXIT_FAILED, EXIT_OK};
use crate::model::WriteOutcome;
use crate::store::{parse_time, AnyStore, ReadFilter};
use anyhow::Result;
use clap::Args;

#[derive(Debug, Args)]
pub struct ReadsArgs {
    /// Only reads about this subject
    #[arg(long)]
    pub subject: Option<String>,
    /// Only reads of this predicate
    #[arg(long)]
    pub predicate: Option<String>,
    /// Only reads by this agent
    #[arg(long)]
    pub agent: Option<String>,
    /// Only reads since this time: RFC 3339 or an age like 90m, 12h, 3d
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub since: Option<String>,
    /// At most this many, newest first (1 or more)
    #[arg(
        long,
        allow_negative_numbers = true,
        value_parser = WholeNumber::new("a whole number from 1 to 9223372036854775807, e.g. --limit 20").at_least(1)
    )]
    pub limit: Option<i64>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RescopeArgs {
    #[command(flatten)]
    pub about: SubjectPredicate,
    /// Where the value is now (mis-scoped)
    #[arg(long)]
    pub scope: String,
    /// Where it belongs
    #[arg(long)]
    pub to: String,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RevertArgs {
    #[command(flatten)]
    pub about: SubjectPredicate,
    /// The scope of the record to revert: global, repo:<id> or task:<id>
    #[arg(long)]
    pub scope: String,
    /// The version whose value becomes current again (default: the one before the current)
    #[arg(
        long,
        allow_negative_numbers = true,
        value_parser = WholeNumber::new("a version number from 1, as `memscope history` lists them")
            .at_least(1)
    )]
    pub to_version: Option<i64>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

/// The most columns `reads` gives an agent's name.
const AGENT_COLUMNS_MOST: usize = 32;

pub fn reads(store: &mut AnyStore, a: ReadsArgs) -> Result<i32> {
    let since = match &a.since {
        Some(t) => Some(parse_time(t, store.now()).map_err(super::usage)?),
        None => None,
    };
    let filter = ReadFilter {
        subject: a.subject.as_deref().map(super::subject_arg).transpose()?,
        predicate: a.predicate,
        // Held to the rule `resolve --log --agent` is (found by review: `--agent ''` was
        // taken, and matched nothing).
        agent: (a.agent.as_deref())
            .map(crate::model::agent_name)
            .transpose()
            .map_err(|e| super::usage(format!("--agent {e}")))?,
        since,
        limit: a.limit,
    };
    let rows = store.reads(&filter)?;
    if a.json {
        print_json(&rows)?;
        return Ok(EXIT_OK);
    }
    if rows.is_empty() {
        outln!(
            "no logged reads match (agents log reads with `memscope resolve --log --agent NAME`)"
        );
    }
    // The agent column is as wide as the widest name shown, from 14 to 32 columns; a longer
    // name is cut with `…` (`--json` has it whole). Found by review: a fixed 14 let a longer
    // name push the rest of its row out of line.
    let agents: Vec<String> = rows
        .iter()
        .map(|r| {
            let agent = crate::model::escape_controls(r.agent.as_deref().unwrap_or("-"));
            crate::frontend::output::cut_to_width(&agent, AGENT_COLUMNS_MOST)
        })
        .collect();
    let agent_columns = agents
        .iter()
        .map(|a| crate::tui::text::width(a))
        .max()
        .unwrap_or(0)
        .max(14);
    for (r, agent) in rows.iter().zip(agents) {
        let got = r.got();
        let ctx = [
            r.repo.as_ref().map(|x| format!("repo:{x}")),
            r.task.as_ref().map(|x| format!("task:{x}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
        let shadowed = if r.shadowed.is_empty() {
            String::new()
        } else {
            format!(" (shadowed {})", r.shadowed.join(", "))
        };
        // Padded as it will show: escaped first, then by display columns (found by review: a
        // name with a control character or Chinese pushed the rest of its row out of line).
        let pad = " ".repeat(agent_columns.saturating_sub(crate::tui::text::width(&agent)));
        outln!(
            "{}  {agent}{pad} {} · {}  [{}] → {got}{shadowed}{}",
            r.at,
            r.subject,
            r.predicate,
            if ctx.is_empty() {
                "no context".to_string()
            } else {
                ctx
            },
            r.note
                .as_ref()
                .map(|n| format!("  “{n}”"))
                .unwrap_or_default()
        );
    }
    Ok(EXIT_OK)
}

fn print_outcomes(outcomes: &[WriteOutcome], json: bool) -> Result<()> {
    if json {
        print_json(&outcomes)?;
    } else {
        for o in outcomes {
            outln!("{}", o.human());
        }
    }
    Ok(())
}

pub fn rescope(store: &mut AnyStore, a: RescopeArgs) -> Result<i32> {
    let (from, to) = (scope_arg(&a.scope)?, scope_arg(&a.to)?);
    let outcomes = store.rescope(&a.about.subject, &a.about.predicate, &from, &to)?;
    print_outcomes(&outcomes, a.json)?;
    Ok(EXIT_OK)
}

pub fn revert(store: &mut AnyStore, a: RevertArgs) -> Result<i32> {
    let out = store.revert(&a.about.at(&a.scope)?, a.to_version)?;
    print_outcomes(std::slice::from_ref(&out), a.json)?;
    Ok(if out.outcome == crate::model::OutcomeKind::Rejected {
        EXIT_FAILED
    } else {
        EXIT_OK
    })
}
