//! `pending`, `pending resolve ID --scope S`, `pending reject ID`.

use super::number::WholeNumber;
use super::{outln, print_json, scope_arg, EXIT_FAILED, EXIT_OK};
use crate::model::{ago, shorten, value_text, OutcomeKind};
use crate::store::AnyStore;
use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct PendingArgs {
    #[command(subcommand)]
    pub command: Option<PendingCommand>,
    /// Include resolved and rejected items
    #[arg(long)]
    pub all: bool,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

/// A pending item's number, as `memscope pending` lists it.
const ITEM_NUMBER: WholeNumber =
    WholeNumber::new("a whole number from 1, as `memscope pending` lists it")
        .at_least(1)
        .named("a pending item's number");

#[derive(Debug, Subcommand)]
pub enum PendingCommand {
    /// Write the item to the chosen scope through the write path
    #[command(after_help = "Example:\n  memscope pending resolve 1 --scope repo:web-app")]
    Resolve {
        /// The item's number, as `memscope pending` lists it
        #[arg(value_parser = ITEM_NUMBER, allow_negative_numbers = true)]
        id: i64,
        /// One of the item's candidate scopes (another scope needs --force); may be left out
        /// when the item has one candidate
        #[arg(long)]
        scope: Option<String>,
        /// Write it to a scope outside the item's candidates
        #[arg(long)]
        force: bool,
        /// Print the outcome as JSON
        #[arg(long)]
        json: bool,
    },
    /// Drop the item without writing anything
    #[command(after_help = "Example:\n  memscope pending reject 1")]
    Reject {
        /// The item's number, as `memscope pending` lists it
        #[arg(value_parser = ITEM_NUMBER, allow_negative_numbers = true)]
        id: i64,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

pub fn run(store: &mut AnyStore, a: PendingArgs) -> Result<i32> {
    match a.command {
        None => {
            let items = store.pending(a.all)?;
            if a.json {
                print_json(&items)?;
                return Ok(EXIT_OK);
            }
            if items.is_empty() {
                outln!("no pending items: nothing waits for a human");
            }
            // Ages are against the store's clock, so a fixed clock prints the same every run.
            let now = store.now();
            for p in &items {
                let cands: Vec<String> = p.candidates.iter().map(|c| c.to_string()).collect();
                let mut parts = vec![
                    format!(
                        "#{} {} · {} = {}",
                        p.id,
                        p.subject,
                        p.predicate,
                        shorten(&value_text(&p.value), 60)
                    ),
                    format!("[{}]", cands.join(" | ")),
                    p.source.clone(),
                    ago(now, &p.created_at),
                ];
                if p.status != "open" {
                    parts.push(format!(
                        "({} → {})",
                        p.status,
                        p.resolution.as_deref().unwrap_or("")
                    ));
                }
                let parts: Vec<&str> = parts
                    .iter()
                    .map(|s| s.trim())
                    .filter(|s| !s.is_empty())
                    .collect();
                outln!("{}", parts.join("  "));
                if let Some(raw) = &p.raw {
                    let why = p.reason.as_deref().unwrap_or("");
                    outln!("    “{}”", crate::model::excerpt_with_cue(raw, why, 100));
                }
                if let Some(reason) = &p.reason {
                    outln!("    why: {}", shorten(reason, 200));
                }
                if let Some(from) = &p.merged_from {
                    outln!(
                        "    two spellings of one memory disagreed: this value was held under {from}; resolve to make it current, reject to keep the current one"
                    );
                }
            }
            Ok(EXIT_OK)
        }
        Some(PendingCommand::Resolve {
            id,
            scope,
            force,
            json,
        }) => {
            let scope = match scope {
                Some(s) => scope_arg(&s)?,
                None => match store.pending_item(id)? {
                    Some(item) => match item.closed_sentence() {
                        // A closed item is said to be closed first: which scope it would need
                        // no longer matters (found by review: it asked for --scope, then
                        // refused with "already resolved").
                        Some(closed) => anyhow::bail!(closed),
                        None if item.candidates.len() == 1 => item.candidates[0].clone(),
                        None => {
                            let names: Vec<String> =
                                item.candidates.iter().map(|c| c.to_string()).collect();
                            // The caller left out what this item needs: a usage error, as a
                            // scope that is no candidate is.
                            return Err(super::usage(format!(
                                "pending #{id} has candidates {}: pass --scope with the one it belongs to",
                                names.join(", ")
                            )));
                        }
                    },
                    None => anyhow::bail!(
                        "there is no pending item #{id}: list them with `memscope pending`"
                    ),
                },
            };
            let out = store.resolve_pending(id, &scope, force)?;
            if json {
                print_json(&out)?;
            } else {
                outln!("{}", out.human());
            }
            Ok(if out.outcome == OutcomeKind::Rejected {
                EXIT_FAILED
            } else {
                EXIT_OK
            })
        }
        Some(PendingCommand::Reject { id, json }) => {
            let item = store.reject_pending(id)?;
            if json {
                print_json(&item)?;
            } else {
                outln!("rejected pending #{}: nothing was written", item.id);
            }
            Ok(EXIT_OK)
        }
    }
}
