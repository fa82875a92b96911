//! What every front end — the command line, the MCP server, the terminal UI — shares and the
//! store knows nothing of: the exit codes of the command-line contract, the usage error (exit
//! 2), and [`output`], the one path every printed line leaves through. Front ends import it;
//! it imports no front end (docs/ARCHITECTURE.md, "Modules").

pub mod output;

pub(crate) use output::{errln, outln, print_json};

/// Exit codes of the CLI contract (README, "Command line").
pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

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
