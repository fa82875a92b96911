//! `delete`, `restore`, `gc`.

use super::{errln, outln, print_json, scope_arg, usage, EXIT_OK};
use crate::model::{DeleteTarget, Identity};
use crate::store::Store;
use anyhow::Result;
use clap::Args;

#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[arg(long)]
    pub subject: String,
    /// Only this predicate (every scope unless --scope)
    #[arg(long)]
    pub predicate: Option<String>,
    /// Only this identity (needs --predicate)
    #[arg(long, requires = "predicate")]
    pub scope: Option<String>,
    #[arg(long)]
    pub reason: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    #[arg(long)]
    pub subject: String,
    #[arg(long)]
    pub predicate: String,
    #[arg(long)]
    pub scope: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Purge history content older than this many days (0 keeps it); saved in settings
    #[arg(long)]
    pub retention_days: Option<i64>,
    /// Collect tombstones older than this many days whose identity holds nothing; saved
    #[arg(long)]
    pub tombstone_safe_days: Option<i64>,
    #[arg(long)]
    pub json: bool,
}

pub fn delete(store: &mut Store, a: DeleteArgs) -> Result<i32> {
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
        outln!(
            "purged {} version(s), {} pending item(s) and {} read-log note(s)",
            report.purged_versions,
            report.purged_pending,
            report.purged_notes
        );
    }
    if !report.disk_purged {
        errln!(
            "memscope: deleted, but the on-disk purge is pending: another process holds a read transaction open on the database; \
             the purge is recorded and the next write, open or `memscope gc` completes it"
        );
    }
    Ok(EXIT_OK)
}

pub fn restore(store: &mut Store, a: RestoreArgs) -> Result<i32> {
    let id = Identity {
        subject: a.subject,
        predicate: a.predicate,
        scope: scope_arg(&a.scope)?,
    };
    let t = store.restore(&id)?;
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

pub fn gc(store: &mut Store, a: GcArgs) -> Result<i32> {
    let r = store.gc(a.retention_days, a.tombstone_safe_days)?;
    if a.json {
        print_json(&r)?;
    } else {
        outln!(
            "gc: purged content of {} event(s), {} closed pending item(s) and {} logged read(s), collected {} tombstone(s) (retention {} days, tombstone safe period {} days)",
            r.purged_events, r.purged_pending, r.purged_reads, r.collected_tombstones, r.retention_days, r.tombstone_safe_days
        );
        if !r.disk_purged {
            outln!("the on-disk purge is still pending: a reader holds the database open");
        }
    }
    Ok(EXIT_OK)
}
