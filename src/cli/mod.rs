//! The command line: argument definitions and dispatch. Each command lives in a small file and
//! prints what the store returns, through [`output`].

mod admin;
mod delete;
mod incident;
mod number;
mod pending;
mod read;
mod roles;
mod suspects;
mod write;

pub(crate) use crate::frontend::output;
pub(crate) use crate::frontend::{errln, outln, print_json};
pub use crate::frontend::{usage, UsageError, EXIT_FAILED, EXIT_OK, EXIT_USAGE};

use crate::store::{AnyStore, OpenMode};
use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Prints a command-line parsing failure as one sentence naming `help`, the help of the
/// command it was for (help and version print as usual); returns the exit code.
pub fn usage_failure(e: clap::Error, help: &str) -> i32 {
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
    // A number an argument refused is said by the argument's own sentence (`number`).
    if let Some(refused) =
        std::error::Error::source(&e).and_then(|s| s.downcast_ref::<number::ValueRefused>())
    {
        errln!("memscope: {refused} (see `{help}`)");
        return EXIT_USAGE;
    }
    // clap says "a value is required … but none was supplied" of an empty one too, which was
    // supplied (found by review): the sentence is true of both.
    if let (
        ErrorKind::InvalidValue,
        Some(clap::error::ContextValue::String(typed)),
        Some(clap::error::ContextValue::String(arg)),
    ) = (
        e.kind(),
        e.get(clap::error::ContextKind::InvalidValue),
        e.get(clap::error::ContextKind::InvalidArg),
    ) {
        if typed.is_empty() {
            errln!("memscope: {arg} was given no value, or an empty one: give it one, or leave the option out (see `{help}`)");
            return EXIT_USAGE;
        }
    }
    let mut text = e.render().to_string();
    // Rendering strips what looks like a terminal escape — from what the user typed too, so
    // `1<ESC>` was called "invalid value '1'" and a subcommand `<ESC>]0;x<BEL>` "''": the
    // word goes back in, raw, and is escaped once like every other line.
    use clap::error::{ContextKind, ContextValue};
    for kind in [
        ContextKind::InvalidValue,
        ContextKind::InvalidSubcommand,
        ContextKind::InvalidArg,
    ] {
        if let Some(ContextValue::String(typed)) = e.get(kind) {
            let stripped = clap::builder::StyledStr::from(typed.clone()).to_string();
            if stripped != *typed {
                text = text.replacen(&format!("'{stripped}'"), &format!("'{typed}'"), 1);
            }
        }
    }
    // clap's lines in one sentence; its "tip:" becomes a clause of it.
    let mut sentence = String::new();
    for l in text.lines().map(str::trim).filter(|l| {
        !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
    }) {
        let l = l.strip_prefix("error: ").unwrap_or(l);
        match l.strip_prefix("tip: ") {
            Some(tip) if !sentence.is_empty() => {
                sentence.push_str("; ");
                sentence.push_str(tip);
            }
            _ => {
                if !sentence.is_empty() {
                    sentence.push(' ');
                }
                sentence.push_str(l);
            }
        }
    }
    errln!("memscope: {sentence} (see `{help}`)");
    EXIT_USAGE
}

/// Prints the error a command failed with as one line and returns the exit code; a usage
/// error names `help`, the help of the command that was called wrongly.
pub fn failure(e: anyhow::Error, help: &str) -> i32 {
    if e.is::<UsageError>() || e.is::<crate::model::InvalidRequest>() {
        errln!("memscope: {} (see `{help}`)", crate::store::error_text(&e));
        EXIT_USAGE
    } else {
        errln!("memscope: {}", crate::store::error_text(&e));
        EXIT_FAILED
    }
}

/// `memscope pending resolve --help` for `memscope --db x pending resolve 7 --scope global`:
/// the help of the deepest command the arguments name, found even when they do not parse
/// (options and their values are stepped over).
pub fn help_for(args: &[std::ffi::OsString]) -> String {
    let mut root = command();
    // Built, so that every subcommand knows the global `--db` and its value is stepped over.
    root.build();
    let mut at = &root;
    let mut words = vec!["memscope".to_string()];
    // A word that is not UTF-8 names no command, but it still takes its place.
    let mut rest = args.iter().skip(1).map(|a| a.to_str().unwrap_or(""));
    while let Some(arg) = rest.next() {
        if let Some(long) = arg.strip_prefix("--") {
            let takes_value = !long.contains('=')
                && at
                    .get_arguments()
                    .find(|a| a.get_long() == Some(long))
                    .is_some_and(|a| a.get_action().takes_values());
            if takes_value {
                rest.next();
            }
        } else if let Some(sub) = at.find_subcommand(arg) {
            words.push(sub.get_name().to_string());
            at = sub;
        }
    }
    format!("{} --help", words.join(" "))
}

/// What `memscope --version` prints after the name: the program's version and the versions
/// of the database schemas it reads and writes — each backend has its own line (docs/SCHEMA.md;
/// found by review: `init` on PostgreSQL said schema 8 where this said only 7).
fn version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{} (database schema {} on SQLite, {} on PostgreSQL)",
            env!("CARGO_PKG_VERSION"),
            crate::store::schema::SCHEMA_VERSION,
            crate::store::postgres::schema::SCHEMA_VERSION
        )
    })
}

/// The command line as it is parsed, completed (`memscope completions`) and documented
/// (`memscope man`).
pub fn command() -> clap::Command {
    let root = <Cli as clap::CommandFactory>::command().version(version());
    // `--db` is global, and its help names the database every command opens by default; the
    // commands that open none say what it means to them instead (clap propagates a global
    // argument only to a subcommand that lacks one of its name).
    let db = root
        .get_arguments()
        .find(|a| a.get_id() == "db")
        .cloned()
        .expect("the global --db");
    let demo = db.clone().help(
        "Database file to build (default: ~/.local/share/memscope/demo.db; $MEMSCOPE_DB is not \
         read, so the demo never replaces your memory)",
    );
    let hidden = db.hide(true);
    root.mut_subcommand("demo", |c| c.arg(demo))
        .mut_subcommand("completions", |c| c.arg(hidden.clone()))
        .mut_subcommand("man", |c| c.arg(hidden))
}

/// Parses a command line (the program's name first).
pub fn parse(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(args)?;
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

#[derive(Debug, Parser)]
#[command(
    name = "memscope",
    about = "Inspect and curate the long-term memory of coding agents",
    long_about = "memscope owns the shared memory database of coding agents (a SQLite file, or \
                  PostgreSQL for a team): a correct write path (identity = subject, predicate, \
                  scope), precedence resolution (task > repo > global), deletion that really \
                  destroys content, and a terminal UI.\n\n\
                  Without a command it opens the terminal UI.",
    after_help = "Examples:\n  \
                  memscope                      open the UI on ~/.local/share/memscope/memory.db\n  \
                  memscope demo                 build the demo database and open the UI on it\n  \
                  memscope --db ./mem.db list   list the current view of another database"
)]
pub struct Cli {
    /// Database file (default: $MEMSCOPE_DB, else ~/.local/share/memscope/memory.db), or a
    /// postgres:// (postgresql://) address: every command serves either, `demo` builds a file
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// UI: leave the mouse to the terminal (its own text selection), no wheel or clicks
    #[arg(long)]
    pub no_mouse: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the terminal UI
    #[command(
        after_help = "Example:\n  memscope --db ~/.local/share/memscope/demo.db tui --no-mouse"
    )]
    Tui {
        /// Leave the mouse to the terminal (its own text selection), no wheel or clicks
        #[arg(long)]
        no_mouse: bool,
    },
    /// Build the demo database through the real write path, then open the UI
    #[command(
        after_help = "Example:\n  memscope demo --no-tui   # builds ~/.local/share/memscope/demo.db"
    )]
    Demo {
        /// Only build it and print a summary
        #[arg(long)]
        no_tui: bool,
        /// Leave the mouse to the terminal (its own text selection), no wheel or clicks
        #[arg(long)]
        no_mouse: bool,
    },
    /// Create an empty database
    #[command(after_help = "Example:\n  memscope --db ~/work/agents.db init")]
    Init,
    /// Write one memory through the write path and print its outcome
    #[command(
        after_help = "Example:\n  memscope write --subject user:42 --predicate package_manager --value pnpm \\\n    --scope global --source thread:17/message:86 --raw \"default to pnpm\""
    )]
    Write(write::WriteArgs),
    /// Apply write requests from JSON Lines (a file or - for stdin), one outcome line per line
    #[command(
        after_help = "Example:\n  echo '{\"subject\":\"user:42\",\"predicate\":\"editor\",\"value\":\"helix\",\"scope\":\"global\",\"source\":\"s\"}' | memscope apply -"
    )]
    Apply {
        /// File of JSON Lines, or - for standard input
        #[arg(default_value = "-")]
        file: String,
    },
    /// Resolve by precedence (task > repo > global) and show the considered chain
    #[command(
        after_help = "Example:\n  memscope resolve --subject user:42 --predicate package_manager --repo legacy-dashboard"
    )]
    Resolve(read::ResolveArgs),
    /// The read log: what resolve returned to agents, newest first
    #[command(
        after_help = "Example:\n  memscope reads --subject user:42 --predicate package_manager --since 7d"
    )]
    Reads(incident::ReadsArgs),
    /// Move a mis-scoped current value to the scope it belongs to, restoring the old one
    #[command(
        after_help = "Example:\n  memscope rescope --subject user:42 --predicate package_manager --scope global \\\n    --to repo:legacy-dashboard"
    )]
    Rescope(incident::RescopeArgs),
    /// Make an earlier value current again as a new version
    #[command(
        after_help = "Example:\n  memscope revert --subject user:42 --predicate package_manager --scope global --to-version 1"
    )]
    Revert(incident::RevertArgs),
    /// List the current view
    #[command(after_help = "Example:\n  memscope list --subject user:42 --scope repo:web-app")]
    List(read::ListArgs),
    /// Show the event log of a subject and predicate, oldest first
    #[command(
        after_help = "Example:\n  memscope history --subject user:42 --predicate package_manager --scope global"
    )]
    History(read::HistoryArgs),
    /// The ambiguity queue: list, resolve, reject
    #[command(after_help = "Example:\n  memscope pending --all --json")]
    Pending(pending::PendingArgs),
    /// Tombstone and purge an identity, a predicate in every scope, or a whole subject
    #[command(after_help = "Examples:\n  \
                            memscope delete --subject user:42 --predicate coffee --scope global\n  \
                            memscope delete --subject user:42 --dry-run   # what a subject delete destroys\n  \
                            memscope delete --subject user:42 --yes       # destroy it without asking")]
    Delete(delete::DeleteArgs),
    /// Lift a tombstone so that writes to the identity are accepted again
    #[command(
        after_help = "Example:\n  memscope restore --subject user:42 --predicate coffee --scope global"
    )]
    Restore(delete::RestoreArgs),
    /// Current global records whose words or message point at one place, widest blast radius first
    #[command(after_help = "Example:\n  memscope suspects --json")]
    Suspects {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Verify the file's integrity and the invariants, and report the health figures (exit 1 on damage or a violation)
    #[command(after_help = "Example:\n  memscope check --full")]
    Check(admin::CheckArgs),
    /// Show the settings, or change one: `memscope settings set durability normal`
    #[command(after_help = "Example:\n  memscope settings set retention_days 90")]
    Settings {
        #[command(subcommand)]
        command: Option<admin::SettingsCommand>,
        /// Print JSON instead of text (before or after `set KEY VALUE`)
        #[arg(long, global = true)]
        json: bool,
    },
    /// Allocate a causal sequence number
    #[command(
        after_help = "Example:\n  SEQ=$(memscope seq)   # take it when the agent's operation starts; pass --causal-seq $SEQ"
    )]
    Seq,
    /// The predicate alias table
    #[command(after_help = "Example:\n  memscope alias add pkg-mgr package_manager")]
    Alias {
        #[command(subcommand)]
        command: admin::AliasCommand,
    },
    /// Retention purge, tombstone collection and any owed on-disk purge
    #[command(after_help = "Example:\n  memscope gc --retention-days 180")]
    Gc(delete::GcArgs),
    /// Write the whole database as JSON Lines to stdout (or --out FILE, created 0600)
    #[command(after_help = "Example:\n  memscope export --out backup.jsonl")]
    Export {
        /// Write to this file (created readable by you alone) instead of stdout
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Load an export into a new, empty database
    #[command(
        after_help = "Examples:\n  memscope --db ~/restored.db import backup.jsonl\n  memscope --db old.db export | memscope --db new.db import -"
    )]
    Import {
        /// A file written by `memscope export`, or - for standard input
        file: PathBuf,
    },
    /// Serve the memory to coding agents over MCP on stdio (remember, recall, list_memories, forget)
    #[command(
        after_help = "Example:\n  claude mcp add memscope -- memscope mcp --subject user:42 --repo auto"
    )]
    Mcp(crate::mcp::McpArgs),
    /// PostgreSQL: create the roles memscope_agent and memscope_curator, grant their privileges, optionally a login
    #[command(after_help = "Examples:\n  \
                            memscope --db postgres://owner@db.example/memory roles\n  \
                            memscope --db postgres://owner@db.example/memory roles --agent-login ci_agent \\\n    \
                            --password-from-env AGENT_PASSWORD --json")]
    Roles(roles::RolesArgs),
    /// Print a shell completion script: bash, zsh, fish, powershell or elvish
    #[command(
        after_help = "Example:\n  memscope completions bash > ~/.local/share/bash-completion/completions/memscope"
    )]
    Completions {
        /// The shell to complete for
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one page per command into a folder
    #[command(after_help = "Example:\n  memscope man | man -l -")]
    Man {
        /// Write memscope.1 and memscope-COMMAND.1 … into this existing folder instead
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

/// `--db`, else `$MEMSCOPE_DB`, else the user's data directory.
pub fn database_path(db: Option<PathBuf>) -> Result<PathBuf> {
    match named_database(db) {
        Some(named) => Ok(named),
        None => Ok(data_dir()?.join("memory.db")),
    }
}

/// The database the user named, with `--db` or `$MEMSCOPE_DB`; `None` means the default.
fn named_database(db: Option<PathBuf>) -> Option<PathBuf> {
    db.or_else(|| {
        std::env::var_os("MEMSCOPE_DB")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    })
}

/// `$XDG_DATA_HOME/memscope`, else `~/.local/share/memscope`. Either must be an absolute path
/// (the XDG base directory rule): a relative one, or neither set, would put the default
/// database wherever the command happened to run, a different one in every folder.
pub fn data_dir() -> Result<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(x) = absolute("XDG_DATA_HOME") {
        return Ok(x.join("memscope"));
    }
    match absolute("HOME") {
        Some(home) => Ok(home.join(".local").join("share").join("memscope")),
        None => bail!(
            "no database was named and HOME is not set to an absolute folder, so memscope has no default place for one: pass --db PATH or set MEMSCOPE_DB (or HOME)"
        ),
    }
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<i32> {
    let named = named_database(cli.db.clone()).is_some();
    // The commands that open no database run where the default one has no place.
    let path = match cli.command {
        Some(Command::Completions { .. } | Command::Man { .. }) => PathBuf::new(),
        _ => database_path(cli.db.clone())?,
    };
    // The commands PostgreSQL serves too (README, "Running on PostgreSQL").
    let open_any = |mode: OpenMode| AnyStore::open(&path, mode);
    // Capture is the default; `--no-mouse` before or after the command turns it off.
    let mouse = |sub: bool| {
        if cli.no_mouse || sub {
            crate::tui::Mouse::Off
        } else {
            crate::tui::Mouse::Capture
        }
    };
    match cli.command {
        // The default database is where agents write: the UI creates it and welcomes the user.
        // A path the user named must exist — a typo must not become a new, empty database.
        None | Some(Command::Tui { .. }) => {
            let no_mouse = matches!(cli.command, Some(Command::Tui { no_mouse: true }));
            let store = crate::store::open_ui(
                &path,
                if named {
                    OpenMode::Existing
                } else {
                    OpenMode::Create
                },
            )?;
            crate::tui::run(store, mouse(no_mouse), None)
        }
        Some(Command::Demo { no_tui, no_mouse }) => admin::demo(cli.db, no_tui, mouse(no_mouse)),
        Some(Command::Init) => admin::init(&path),
        Some(Command::Write(args)) => write::write(|| open_any(OpenMode::Create), args),
        Some(Command::Apply { file }) => {
            write::check_input(&file, &path)?;
            write::apply(&mut open_any(OpenMode::Create)?, &file)
        }
        Some(Command::Seq) => {
            outln!("{}", open_any(OpenMode::Create)?.next_seq()?);
            Ok(EXIT_OK)
        }
        Some(Command::Resolve(args)) => read::resolve(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::Reads(args)) => incident::reads(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::Rescope(args)) => incident::rescope(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::Revert(args)) => incident::revert(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::List(args)) => read::list(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::History(args)) => read::history(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::Pending(args)) => pending::run(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::Delete(args)) => delete::delete(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::Restore(args)) => delete::restore(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::Gc(args)) => delete::gc(&mut open_any(OpenMode::Existing)?, args),
        Some(Command::Suspects { json }) => suspects::run(&mut open_any(OpenMode::Existing)?, json),
        Some(Command::Check(args)) => admin::check(&path, args),
        Some(Command::Settings { command, json }) => admin::settings(&path, command, json),
        Some(Command::Alias { command }) => admin::alias(&path, command),
        Some(Command::Export { out }) => admin::export(&path, out),
        Some(Command::Import { file }) => admin::import(&path, &file),
        Some(Command::Mcp(args)) => crate::mcp::run(&path, args),
        Some(Command::Roles(args)) => roles::run(&path, args),
        Some(Command::Completions { shell }) => admin::completions(shell),
        Some(Command::Man { dir }) => admin::man(dir),
    }
}

/// Parses a `--repo` or `--task` id (`web-app` or `repo:web-app`); a bad one is a usage error.
pub(crate) fn context_arg(
    kind: crate::model::ContextKind,
    text: Option<&str>,
) -> Result<Option<String>> {
    text.map(|t| {
        crate::model::named_context_id(kind, t, &format!("--{}", kind.name())).map_err(usage)
    })
    .transpose()
}

/// Parses a scope argument; a bad one is a usage error.
/// `--subject` and `--predicate`: which memory a command is about.
#[derive(Debug, Args)]
pub struct SubjectPredicate {
    /// Who the memory is about, e.g. user:42
    #[arg(long)]
    pub subject: String,
    /// What it says about them, e.g. package_manager (normalized, aliases applied)
    #[arg(long)]
    pub predicate: String,
}

impl SubjectPredicate {
    /// The identity of this memory at `scope` (global, repo:<id> or task:<id>).
    pub(crate) fn at(self, scope: &str) -> Result<crate::model::Identity> {
        Ok(crate::model::Identity {
            subject: self.subject,
            predicate: self.predicate,
            scope: scope_arg(scope)?,
        })
    }
}

pub(crate) fn scope_arg(text: &str) -> Result<crate::model::Scope> {
    crate::model::Scope::parse(text).map_err(usage)
}

/// Checks a subject a read names (`history`, or the `list` and `reads` filters): one that no
/// write could have stored — empty, or holding an invisible character — is a usage error, as
/// it is for the commands that change memory, not an empty answer.
pub(crate) fn subject_arg(text: &str) -> Result<String> {
    crate::model::normalize_subject(text).map_err(usage)?;
    Ok(text.to_string())
}
