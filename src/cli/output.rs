//! Every line memscope prints for a person — each command's text and JSON, its errors, and
//! `memscope mcp`'s log — leaves through here. Much of it quotes words agents and models wrote,
//! so no control character reaches the terminal raw, where an ESC sequence could clear or
//! retitle it: text shows them as Rust escapes (`\u{1b}`), JSON as JSON escapes (`\u001b`).
//! The crate denies `println!` and `eprintln!` everywhere else.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use crate::model::{escape_controls, to_json_pretty};
use anyhow::Result;
use serde::Serialize;
use std::fmt;

/// `println!` for memscope: one line on stdout, control characters escaped (a newline inside
/// the text too, so one call is always one line).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::output::stdout_line(format_args!($($arg)*))
    };
}

/// `eprintln!` for memscope: one line on stderr, control characters escaped.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::output::stderr_line(format_args!($($arg)*))
    };
}

pub(crate) use {errln, outln};

pub fn stdout_line(text: fmt::Arguments) {
    println!("{}", escape_controls(&text.to_string()));
}

pub fn stderr_line(text: fmt::Arguments) {
    eprintln!("{}", escape_controls(&text.to_string()));
}

/// A JSON document on stdout; its newlines are the layout's, every control character in a
/// string is escaped.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    println!("{}", to_json_pretty(value)?);
    Ok(())
}

/// Asks `question` on stderr (no newline) and reads one line from stdin: true for `y` or `yes`,
/// false for anything else, including the end of input.
pub fn confirm(question: &str) -> Result<bool> {
    use std::io::Write;
    eprint!("{}", escape_controls(question));
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

/// Text memscope generated itself — a completion script, a manual page — written to stdout as
/// it is: it holds no stored words, and its tabs and newlines are its layout.
pub fn print_generated(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()?;
    Ok(())
}
