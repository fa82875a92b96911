//! The command line: argument definitions and dispatch. Each command lives in a small file and
//! prints what the store returns, through [`output`].

mod admin;
mod delete;
mod incident;
pub mod output;
mod pending;
mod read;
mod write;

pub(crate) use output::{errln, outln, print_json};

use crate::store::{OpenMode, Store};
use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// An error in how the command was called: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// Prints a command-line parsing failure as one sentence (help and version print as usual) and
/// returns the exit code.
pub fn usage_failure(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            EXIT_USAGE
        } else {
            EXIT_OK
        };
    }
    let text = e.render().to_string();
    let sentence = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join(" ");
    errln!("memscope: {sentence} (see `memscope --help`)");
    EXIT_USAGE
}

/// Prints the error a command failed with as one line and returns the exit code.
pub fn failure(e: anyhow::Error) -> i32 {
    errln!("memscope: {e:#}");
    if e.is::<UsageError>() || e.is::<crate::model::InvalidRequest>() {
        EXIT_USAGE
    } else {
        EXIT_FAILED
    }
}

/// Exit codes of the CLI contract.
pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "memscope",
    version,
    about = "Inspect and curate the long-term memory of coding agents",
    long_about = "memscope owns one shared SQLite memory database: a correct write path \
                  (identity = subject, predicate, scope), precedence resolution \
                  (task > repo > global), deletion that really destroys content, and a terminal UI.\n\n\
                  Without a command it opens the terminal UI."
)]
pub struct Cli {
    /// Database file (default: $MEMSCOPE_DB, else ~/.local/share/memscope/memory.db)
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the terminal UI
    Tui,
    /// Build the demo database through the real write path, then open the UI
    Demo {
        /// Only build it and print a summary
        #[arg(long)]
        no_tui: bool,
    },
    /// Create an empty database
    Init,
    /// Write one memory through the write path and print its outcome
    Write(write::WriteArgs),
    /// Apply write requests from JSON Lines (a file or - for stdin), one outcome line per line
    Apply {
        /// File of JSON Lines, or - for standard input
        #[arg(default_value = "-")]
        file: String,
    },
    /// Resolve by precedence (task > repo > global) and show the considered chain
    Resolve(read::ResolveArgs),
    /// The read log: what resolve returned to agents, newest first
    Reads(incident::ReadsArgs),
    /// Move a mis-scoped current value to the scope it belongs to, restoring the old one
    Rescope(incident::RescopeArgs),
    /// Make an earlier value current again as a new version
    Revert(incident::RevertArgs),
    /// List the current view
    List(read::ListArgs),
    /// Show the event log of a subject and predicate, oldest first
    History(read::HistoryArgs),
    /// The ambiguity queue: list, resolve, reject
    Pending(pending::PendingArgs),
    /// Tombstone and purge an identity, a predicate in every scope, or a whole subject
    Delete(delete::DeleteArgs),
    /// Lift a tombstone so that writes to the identity are accepted again
    Restore(delete::RestoreArgs),
    /// Verify the file's integrity and the invariants, and report the health figures (exit 1 on damage or a violation)
    Check(admin::CheckArgs),
    /// Show the settings, or change one: `memscope settings set durability normal`
    Settings {
        #[command(subcommand)]
        command: Option<admin::SettingsCommand>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Allocate a causal sequence number
    Seq,
    /// The predicate alias table
    Alias {
        #[command(subcommand)]
        command: admin::AliasCommand,
    },
    /// Retention purge, tombstone collection and any owed on-disk purge
    Gc(delete::GcArgs),
    /// Write the whole database as JSON Lines to stdout (or --out FILE)
    Export {
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Load an export into a new, empty database
    Import { file: PathBuf },
    /// Serve the memory to coding agents over MCP on stdio (remember, recall, list_memories, forget)
    Mcp(crate::mcp::McpArgs),
}

#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

/// `--db`, else `$MEMSCOPE_DB`, else the user's data directory.
pub fn database_path(db: Option<PathBuf>) -> PathBuf {
    if let Some(p) = db {
        return p;
    }
    if let Some(p) = std::env::var_os("MEMSCOPE_DB").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    data_dir().join("memory.db")
}

/// `$XDG_DATA_HOME/memscope`, else `~/.local/share/memscope`.
pub fn data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(x).join("memscope");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local").join("share").join("memscope")
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<i32> {
    let path = database_path(cli.db.clone());
    let open = |mode: OpenMode| Store::open(&path, mode);
    match cli.command {
        None | Some(Command::Tui) => crate::tui::run(open(OpenMode::Existing)?),
        Some(Command::Demo { no_tui }) => admin::demo(cli.db, no_tui),
        Some(Command::Init) => admin::init(&path),
        Some(Command::Write(args)) => write::write(&mut open(OpenMode::Create)?, args),
        Some(Command::Apply { file }) => write::apply(&mut open(OpenMode::Create)?, &file),
        Some(Command::Seq) => {
            outln!("{}", open(OpenMode::Create)?.next_seq()?);
            Ok(EXIT_OK)
        }
        Some(Command::Resolve(args)) => read::resolve(&mut open(OpenMode::Existing)?, args),
        Some(Command::Reads(args)) => incident::reads(&open(OpenMode::Existing)?, args),
        Some(Command::Rescope(args)) => incident::rescope(&mut open(OpenMode::Existing)?, args),
        Some(Command::Revert(args)) => incident::revert(&mut open(OpenMode::Existing)?, args),
        Some(Command::List(args)) => read::list(&open(OpenMode::Existing)?, args),
        Some(Command::History(args)) => read::history(&open(OpenMode::Existing)?, args),
        Some(Command::Pending(args)) => pending::run(&mut open(OpenMode::Existing)?, args),
        Some(Command::Delete(args)) => delete::delete(&mut open(OpenMode::Existing)?, args),
        Some(Command::Restore(args)) => delete::restore(&mut open(OpenMode::Existing)?, args),
        Some(Command::Gc(args)) => delete::gc(&mut open(OpenMode::Existing)?, args),
        Some(Command::Check(args)) => admin::check(&path, args),
        Some(Command::Settings { command, json }) => admin::settings(&path, command, json),
        Some(Command::Alias { command }) => admin::alias(&path, command),
        Some(Command::Export { out }) => admin::export(&open(OpenMode::Existing)?, out),
        Some(Command::Import { file }) => admin::import(&path, &file),
        Some(Command::Mcp(args)) => crate::mcp::run(&path, args),
    }
}

/// Parses a `--repo` or `--task` id (`web-app` or `repo:web-app`); a bad one is a usage error.
pub(crate) fn context_arg(
    kind: crate::model::ContextKind,
    text: Option<&str>,
) -> Result<Option<String>> {
    text.map(|t| {
        crate::model::parse_context_id(kind, t)
            .map_err(|e| usage(format!("--{}: {e}", kind.name())))
    })
    .transpose()
}

/// Parses a scope argument; a bad one is a usage error.
pub(crate) fn scope_arg(text: &str) -> Result<crate::model::Scope> {
    crate::model::Scope::parse(text).map_err(usage)
}
