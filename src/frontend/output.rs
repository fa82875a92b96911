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
        $crate::frontend::output::stdout_line(format_args!($($arg)*))
    };
}

/// `eprintln!` for memscope: one line on stderr, control characters escaped.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::frontend::output::stderr_line(format_args!($($arg)*))
    };
}

pub(crate) use {errln, outln};

pub fn stdout_line(text: fmt::Arguments) {
    write_stdout(&escape_controls(&text.to_string()));
}

/// Says `text` on stderr; a stderr no one reads (a closed pipe, a full disk) loses it
/// silently — there is nowhere left to say it (`println!` would panic).
pub fn stderr_line(text: fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr().lock(),
        "{}",
        escape_controls(&text.to_string())
    );
}

/// A JSON document on stdout; its newlines are the layout's, every control character in a
/// string is escaped.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    write_stdout(&to_json_pretty(value)?);
    Ok(())
}

/// Why the first line that could not be written to stdout was lost (`exit_code` says it).
static STDOUT_LOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// One line on stdout. A failed write (a full disk, `> /dev/full`) does not panic as `println!`
/// would: the first failure is kept, the command goes on — its change, if any, is made or not
/// by the store alone — and [`exit_code`] says the answer was lost.
fn write_stdout(line: &str) {
    use std::io::Write;
    if let Err(e) = writeln!(std::io::stdout().lock(), "{line}") {
        let _ = STDOUT_LOST.set(e.to_string());
    }
}

/// The process's exit code for a command that ended with `code`: a lost answer is a failure,
/// said in one sentence on stderr (a broken pipe never gets here: the CLI dies of SIGPIPE as
/// other Unix tools do).
pub fn exit_code(code: i32) -> i32 {
    match STDOUT_LOST.get() {
        Some(why) => {
            stderr_line(format_args!(
                "memscope: cannot write the answer to standard output ({why}): free space or send the output elsewhere — whatever the command changed stands, so look with `memscope list` or `history` before running it again"
            ));
            code.max(1)
        }
        None => code,
    }
}

/// Asks `question` on stderr (no newline) and reads one line from stdin: true for `y` or `yes`,
/// false for anything else, including the end of input.
pub fn confirm(question: &str) -> Result<bool> {
    use std::io::Write;
    // A stderr no one reads does not stop the question: the answer is still read.
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{}", escape_controls(question)).and_then(|()| err.flush());
    drop(err);
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

/// How a column's cells sit in their width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// Columns `s` takes in a terminal: CJK and most emoji take two.
pub fn text_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// Cuts `s` to at most `max` terminal columns, marking a cut with `…`.
pub fn cut_to_width(s: &str, max: usize) -> String {
    if text_width(s) <= max {
        return s.to_string();
    }
    // Cluster by cluster, each measured as the line's padding measures it (found by review:
    // counted by code point, a family emoji took six columns, so the value was cut a dozen
    // columns early — and a cut could fall inside it, leaving a bare joiner before `…`).
    use unicode_segmentation::UnicodeSegmentation;
    let mut out = String::new();
    let mut used = 0;
    for cluster in s.graphemes(true) {
        let w = text_width(cluster);
        if used + w + 1 > max {
            break;
        }
        out.push_str(cluster);
        used += w;
    }
    out.push('…');
    out
}

/// Rows of cells as lines whose columns line up on screen: a cell is padded by the columns it
/// takes, not the characters it holds (CJK and emoji are two wide). The last column is not
/// padded, a column empty in every row is left out, and no line ends in spaces. Cells are
/// measured as `outln!` prints them, control characters escaped.
pub fn columns(rows: &[Vec<String>], align: &[Align], gap: &str) -> Vec<String> {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escape_controls(c)).collect())
        .collect();
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| text_width(c))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let shown: Vec<usize> = (0..n).filter(|&i| widths[i] > 0).collect();
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (k, &i) in shown.iter().enumerate() {
                let cell = r.get(i).map(String::as_str).unwrap_or("");
                if k > 0 {
                    line.push_str(gap);
                }
                let pad = " ".repeat(widths[i] - text_width(cell));
                match align.get(i).copied().unwrap_or(Align::Left) {
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                    Align::Left => {
                        line.push_str(cell);
                        if k + 1 < shown.len() {
                            line.push_str(&pad);
                        }
                    }
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_by_display_width() {
        let rows = vec![
            vec![
                "set".into(),
                "global".into(),
                "\"npm\"".into(),
                "seq 1".into(),
            ],
            vec![
                "set".into(),
                "repo:仓库".into(),
                "\"这个仓库\"".into(),
                "seq 12".into(),
            ],
            vec![
                "deleted".into(),
                "task:🚀".into(),
                "∅".into(),
                String::new(),
            ],
        ];
        let lines = columns(&rows, &[Align::Left], "  ");
        let at: Vec<usize> = lines[..2]
            .iter()
            .map(|l| text_width(&l[..l.find("seq").unwrap()]))
            .collect();
        assert_eq!(at[0], at[1], "{lines:#?}");
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{lines:#?}");
        assert_eq!(cut_to_width("这个仓库保留", 7), "这个仓…");
    }

    /// A family emoji is one cluster two columns wide: the cut counts it so and never falls
    /// inside it (found by review: counted by code point it took six, and the cut came early).
    #[test]
    fn a_cut_measures_and_keeps_whole_clusters() {
        let family = "👨\u{200d}👩\u{200d}👧";
        let text = format!("{family}{family}{family} family emoji and more text past the cut");
        let cut = cut_to_width(&text, 20);
        assert_eq!(cut, format!("{family}{family}{family} family emoji…"));
        assert_eq!(text_width(&cut), 20);
        assert_eq!(cut_to_width(&format!("ab{family}c"), 4), "ab…");
    }
}
