//! `delete`, `restore`, `gc`.

use super::number::WholeNumber;
use super::{errln, outln, print_json, scope_arg, usage, SubjectPredicate, EXIT_FAILED, EXIT_OK};
use crate::model::{DeletePreview, DeleteTarget, Identity};
use crate::store::AnyStore;
use anyhow::Result;
use clap::Args;
use std::io::IsTerminal;

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The subject to delete from (all of it unless --predicate)
    #[arg(long)]
    pub subject: String,
    /// Only this predicate (every scope unless --scope)
    #[arg(long)]
    pub predicate: Option<String>,
    /// Only this identity (needs --predicate)
    #[arg(long, requires = "predicate")]
    pub scope: Option<String>,
    /// Why, kept with the tombstones (never the content)
    #[arg(long, allow_hyphen_values = true)]
    pub reason: Option<String>,
    /// Print what the delete would destroy and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Delete more than one identity without asking (needed when stdin is not a terminal)
    #[arg(long)]
    pub yes: bool,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub about: SubjectPredicate,
    /// Its scope: global, repo:<id> or task:<id>
    #[arg(long)]
    pub scope: String,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Purge history content older than this many days (0 keeps it); saved in settings
    #[arg(
        long,
        allow_negative_numbers = true,
        value_parser = WholeNumber::new("a whole number of days from 0 to 4294967295 (0 keeps history content)").at_least(0).at_most(crate::store::gc::MAX_GC_DAYS)
    )]
    pub retention_days: Option<i64>,
    /// Collect tombstones older than this many days whose identity holds nothing (0 never collects); saved
    #[arg(
        long,
        allow_negative_numbers = true,
        value_parser = WholeNumber::new("a whole number of days from 0 to 4294967295 (0 never collects)").at_least(0).at_most(crate::store::gc::MAX_GC_DAYS)
    )]
    pub tombstone_safe_days: Option<i64>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn delete(store: &mut AnyStore, a: DeleteArgs) -> Result<i32> {
    let target = match (a.predicate, a.scope) {
        (Some(p), Some(s)) => DeleteTarget::Identity(Identity {
            subject: a.subject,
            predicate: p,
            scope: scope_arg(&s)?,
        }),
        (Some(p), None) => DeleteTarget::Predicate {
            subject: a.subject,
            predicate: p,
        },
        (None, None) => DeleteTarget::Subject(a.subject),
        (None, Some(_)) => return Err(usage("--scope needs --predicate")),
    };
    if a.dry_run {
        let preview = store.delete_preview(&target)?;
        if a.json {
            print_json(&preview)?;
        } else {
            statement(&preview).for_each(|line| outln!("{line}"));
            outln!("dry run: nothing was deleted");
        }
        return Ok(EXIT_OK);
    }
    if !a.yes {
        // A single identity is what the user named; more than one deserves a second look.
        let preview = store.delete_preview(&target)?;
        let n = preview.identities.len();
        if n > 1 {
            if !std::io::stdin().is_terminal() {
                return Err(usage(format!(
                    "this delete destroys {n} identities: pass --yes to delete them, or --dry-run to see what it would destroy"
                )));
            }
            // On stderr, with the question: stdout stays the command's output (`--json`).
            statement(&preview).for_each(|line| errln!("{line}"));
            if !super::output::confirm(&format!("Delete these {n} identities? [y/N] "))? {
                errln!("memscope: nothing was deleted");
                return Ok(EXIT_FAILED);
            }
        }
    }
    let report = store.delete(&target, a.reason.as_deref())?;
    if a.json {
        print_json(&report)?;
    } else {
        for t in &report.tombstoned {
            outln!(
                "tombstoned {} · {} @ {} (v{})",
                t.subject,
                t.predicate,
                t.scope,
                t.version
            );
        }
        // Of an identity deleted before, this delete may still blank what a rescope left
        // elsewhere: "nothing left to destroy" only when it changes nothing.
        let before = if report.changed_nothing() {
            "nothing left to destroy"
        } else {
            "its versions were gone already"
        };
        for t in &report.already_deleted {
            outln!("already deleted {}: {before}", t.label());
        }
        if report.changed_nothing() {
            outln!("nothing was changed");
        } else if !report.tombstoned.is_empty()
            || report.purged_versions + report.purged_pending + report.purged_notes > 0
        {
            outln!(
                "purged {} version(s), {} pending item(s) and {} read-log note(s)",
                report.purged_versions,
                report.purged_pending,
                report.purged_notes
            );
        }
        if let Some(blanked) = report.blanked_sentence() {
            outln!("{blanked}");
        }
    }
    if report.guards_missing {
        errln!("memscope: {}", crate::model::GUARDS_MISSING_AFTER_DELETE);
    }
    if let Some(note) = &report.disk_note {
        errln!("memscope: {note}");
    } else if !report.disk_purged {
        errln!(
            "memscope: deleted, but the on-disk purge is pending: another process holds a read transaction open on the database; \
             the purge is recorded and the next write, open or `memscope gc` completes it"
        );
    }
    Ok(EXIT_OK)
}

/// The store's statement of what the delete destroys, every identity named — what the UI's
/// delete dialog says.
fn statement(preview: &DeletePreview) -> impl Iterator<Item = String> {
    preview
        .statement("with `memscope restore`")
        .into_iter()
        .map(|(_, line)| line)
}

pub fn restore(store: &mut AnyStore, a: RestoreArgs) -> Result<i32> {
    let t = store.restore(&a.about.at(&a.scope)?)?;
    if a.json {
        print_json(&t)?;
    } else {
        outln!(
            "restored {} · {} @ {}: writes are accepted again (its content stays destroyed)",
            t.subject,
            t.predicate,
            t.scope
        );
    }
    Ok(EXIT_OK)
}

pub fn gc(store: &mut AnyStore, a: GcArgs) -> Result<i32> {
    let r = store.gc(a.retention_days, a.tombstone_safe_days)?;
    if a.json {
        print_json(&r)?;
    } else {
        outln!(
            "gc: purged content of {} event(s), {} closed pending item(s) and {} logged read(s), collected {} tombstone(s) (retention {} days, tombstone safe period {} days)",
            r.purged_events, r.purged_pending, r.purged_reads, r.collected_tombstones, r.retention_days, r.tombstone_safe_days
        );
        if r.blanked_copies > 0 {
            outln!(
                "gc: blanked {} history event(s) a rescope had left of memories whose tombstones were collected (the events stay)",
                r.blanked_copies
            );
        }
        if r.blanked_sources > 0 {
            outln!(
                "gc: blanked the sources of {} write(s) refused at identities whose tombstones were collected (the events stay)",
                r.blanked_sources
            );
        }
        if r.disk_note.is_none() && !r.disk_purged {
            outln!("the on-disk purge is still pending: a reader holds the database open");
        }
    }
    // PostgreSQL: the role may not VACUUM (said as after a delete).
    if let Some(note) = &r.disk_note {
        errln!("memscope: {note}");
    }
    Ok(EXIT_OK)
}
