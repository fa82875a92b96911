//! `write`, `apply`.

use super::number::WholeNumber;
use super::{errln, outln, print_json, usage, SubjectPredicate, EXIT_FAILED, EXIT_OK};
use crate::model::{to_json, ContextKind, OutcomeKind, ScopeChoice, WriteContext, WriteRequest};
use crate::store::{AnyStore, InputKind};
use anyhow::{Context, Result};
use clap::{ArgGroup, Args};
use std::io::Write;
use std::path::Path;

/// One of each pair is required: a missing value names both `--value` and `--value-json`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("value_given").required(true).args(["value", "value_json"])))]
#[command(group(ArgGroup::new("scope_given").required(true).args(["scope", "ambiguous"])))]
pub struct WriteArgs {
    #[command(flatten)]
    pub about: SubjectPredicate,
    /// The value as a string (it may start with `-`: `--value --frozen-lockfile`)
    #[arg(long, allow_hyphen_values = true)]
    pub value: Option<String>,
    /// The value as JSON (an object, number, list …; `--value-json -5`)
    #[arg(long, value_name = "JSON", allow_hyphen_values = true)]
    pub value_json: Option<String>,
    /// global, repo:<id> or task:<id>
    #[arg(long)]
    pub scope: Option<String>,
    /// Candidate scopes when the scope is unclear: queues the write for a human
    #[arg(long, value_name = "SCOPE,SCOPE…")]
    pub ambiguous: Option<String>,
    /// Provenance, e.g. thread:23/message:14
    #[arg(long)]
    pub source: String,
    /// The user's own words (they may start with `-`, as a list item does)
    #[arg(long, allow_hyphen_values = true)]
    pub raw: Option<String>,
    /// Causal sequence number from `memscope seq`, taken when the operation started
    #[arg(
        long,
        allow_negative_numbers = true,
        value_parser = WholeNumber::new("a whole number from `memscope seq`")
    )]
    pub causal_seq: Option<i64>,
    /// The repository the words were said in (not the scope): the scope guard queues a global
    /// write whose words point at it
    #[arg(long, value_name = "ID")]
    pub in_repo: Option<String>,
    /// The task the words were said in
    #[arg(long, value_name = "ID")]
    pub in_task: Option<String>,
    /// Correct the current value's spelling: a value that differs from it only in case or
    /// spacing (`main` for `Main`) replaces it as a new version instead of confirming it
    #[arg(long, conflicts_with = "ambiguous")]
    pub respell: bool,
    /// Print the outcome as JSON
    #[arg(long)]
    pub json: bool,
}

/// Builds and checks the request before `open` runs, so a wrong call leaves no database behind.
pub fn write(open: impl FnOnce() -> Result<AnyStore>, a: WriteArgs) -> Result<i32> {
    let value = match (&a.value, &a.value_json) {
        (Some(v), _) => serde_json::Value::String(v.clone()),
        (None, Some(j)) => {
            let value = crate::strict_json::from_str(j).map_err(|e| {
                if e.to_string().starts_with("recursion limit exceeded") {
                    // serde_json stops reading at its limit, memscope's own.
                    return usage(format!(
                        "--value-json is nested deeper than memscope keeps values (at most {} levels of arrays and objects): store a flatter value",
                        crate::model::MAX_VALUE_DEPTH
                    ));
                }
                if e.to_string().starts_with("number out of range") {
                    return usage(format!("--value-json: {}", crate::model::OUT_OF_RANGE));
                }
                if crate::strict_json::is_duplicate_key(&e) {
                    return usage(format!(
                        "--value-json: {e}: name each key of an object once, with the value meant"
                    ));
                }
                usage(format!(
                    "--value-json is not valid JSON ({e}): quote strings, e.g. '\"npm\"'"
                ))
            })?;
            match crate::model::inexact_number(j.as_bytes()) {
                Some((_, literal)) if crate::model::has_float(&value) => {
                    return Err(usage(format!(
                        "--value-json: {}",
                        crate::model::inexact_number_sentence(literal)
                    )))
                }
                _ => value,
            }
        }
        (None, None) => return Err(usage("give the value with --value or --value-json")),
    };
    let scope = match (&a.scope, &a.ambiguous) {
        (Some(s), _) => ScopeChoice::Exact(super::scope_arg(s)?),
        (None, Some(c)) => ScopeChoice::parse_candidates(c).map_err(usage)?,
        (None, None) => {
            return Err(usage(
                "give --scope, or --ambiguous with two or more candidate scopes",
            ))
        }
    };
    // Where the words were said, refused under the flag's name (the store names a request's
    // `context` field, which this command has not).
    for (kind, flag, id) in [
        (ContextKind::Repo, "--in-repo", &a.in_repo),
        (ContextKind::Task, "--in-task", &a.in_task),
    ] {
        if let Some(id) = id {
            crate::model::named_context_id(kind, id, flag).map_err(usage)?;
        }
    }
    let req = WriteRequest {
        subject: a.about.subject,
        predicate: a.about.predicate,
        value,
        scope,
        source: a.source,
        raw: a.raw,
        causal_seq: a.causal_seq,
        context: (a.in_repo.is_some() || a.in_task.is_some()).then_some(WriteContext {
            repo: a.in_repo,
            task: a.in_task,
        }),
    };
    crate::store::validate(req.clone())?;
    let mut store = open()?;
    let out = if a.respell {
        store.respell(&req)?
    } else {
        store.write(&req)?
    };
    if a.json {
        print_json(&out)?;
    } else {
        outln!("{}", out.human());
        // A confirmation of another spelling keeps the stored one: said, with the way to
        // change it (found by review: a correction of case read as if it had landed).
        if let (OutcomeKind::Confirmed, Some(held)) = (out.outcome, &out.value) {
            if !crate::model::same_spelling(held, &req.value) {
                outln!(
                    "the stored spelling {} stays: values that differ only in case or spacing are one value; to store {} instead, write it again with --respell",
                    crate::model::value_text(held),
                    crate::model::value_text(&req.value)
                );
            }
        }
    }
    Ok(EXIT_OK)
}

/// `apply`'s input file, opened for reading — or why it cannot be.
fn open_input(file: &str) -> Result<std::fs::File> {
    if Path::new(file).is_dir() {
        anyhow::bail!(
            "cannot read {file}: it is a folder, not a file: pass a JSON Lines file or - for standard input"
        );
    }
    std::fs::File::open(file).with_context(|| {
        format!("cannot read {file}: pass a JSON Lines file or - for standard input")
    })
}

/// Refuses an input `apply` cannot read before a database that does not exist yet is created,
/// so a refused apply leaves no new file (the input is closed again at once: no lock of this
/// process is held yet). An existing database is opened first, as before: its own files are
/// refused by name there.
pub fn check_input(file: &str, db: &Path) -> Result<()> {
    let new_file =
        crate::store::postgres::Address::recognise(db.as_os_str()).is_none() && !db.exists();
    if file != "-" && new_file {
        open_input(file)?;
    }
    Ok(())
}

pub fn apply(store: &mut AnyStore, file: &str) -> Result<i32> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut printed = 0usize;
    // One flush per committed batch keeps an interactive writer in step with its outcomes.
    let mut emit = |batch: &[crate::model::WriteOutcome]| -> Result<()> {
        for o in batch {
            out.write_all(to_json(o)?.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        printed += batch.len();
        Ok(())
    };
    let on_server = matches!(store, AnyStore::Postgres(_));
    // A regular file (or stdin redirected from one) never pauses, so its batches fill up.
    let summary = if file == "-" {
        // Standard input redirected from the database's own file (`apply < memory.db`): the
        // same refusal as for its name, before a byte of it is read.
        #[cfg(unix)]
        if let AnyStore::Sqlite(s) = store {
            if let Some(which) =
                super::admin::database_file_named(s.path(), Path::new("/dev/stdin"))
            {
                return Err(usage(format!(
                    "standard input is the database's own {which}: apply reads write requests as JSON Lines; pass the file that holds them, or pipe them in"
                )));
            }
        }
        store.apply_from(std::io::stdin(), InputKind::of_stdin(), &mut emit)
    } else {
        // Opening the database's own file and closing it would drop this process's locks on it.
        if let AnyStore::Sqlite(s) = store {
            if let Some(which) = super::admin::database_file_named(s.path(), Path::new(file)) {
                return Err(usage(format!(
                    "{file} is the database's own {which}: apply reads write requests as JSON Lines; pass the file that holds them, or - for standard input"
                )));
            }
        }
        let f = open_input(file)?;
        let kind = InputKind::of(&f);
        store.apply_from(f, kind, &mut emit)
    };
    // A server can go away in the middle (a restart, a network cut): say what stands.
    let summary = match summary {
        Err(e) if on_server => {
            // A lost connection's commit may have landed: its own sentence says so.
            let nothing = printed == 0 && !crate::store::commit_unknown(&e);
            return Err(e.context(if nothing {
                "apply wrote nothing".to_string()
            } else {
                format!(
                    "apply stopped after the outcomes of {printed} line(s) were printed, and those lines are stored (run the same apply again to write the rest: lines already stored come back `confirmed`)"
                )
            }));
        }
        other => other?,
    };
    errln!(
        "applied {} line(s): {} inserted, {} confirmed, {} superseded, {} stale, {} pending, {} rejected, {} error(s)",
        summary.lines, summary.inserted, summary.confirmed, summary.superseded, summary.stale,
        summary.pending, summary.rejected, summary.errors
    );
    Ok(if summary.errors > 0 {
        EXIT_FAILED
    } else {
        EXIT_OK
    })
}
