//! Text for cells: display widths (CJK and emoji take two columns), truncation with an
//! ellipsis, one-line values, ages relative to an injected clock.

use chrono::{DateTime, Utc};
use ratatui::buffer::CellWidth;
use ratatui::style::Style;
use ratatui::text::Span;
use serde_json::Value;

/// Calls `f(grapheme, index of its first char, width in cells)` for each grapheme cluster of
/// `s`, measured exactly as ratatui draws it (a flag or a skin-toned emoji is one cluster of
/// two cells, not two); `f` returns false to stop.
pub fn each_grapheme(s: &str, mut f: impl FnMut(&str, usize, usize) -> bool) {
    let span = Span::raw(s);
    let mut index = 0;
    for g in span.styled_graphemes(Style::default()) {
        if !f(g.symbol, index, g.symbol.cell_width() as usize) {
            break;
        }
        index += g.symbol.chars().count();
    }
}

/// Erases the last extended grapheme cluster of `s`, what one Backspace takes: `👩🏽‍💻` or
/// `🇯🇵` whole, never one of its code points (which would leave a lone joiner or half a flag).
pub fn erase_grapheme(s: &mut String) {
    use unicode_segmentation::UnicodeSegmentation;
    if let Some((at, _)) = s.grapheme_indices(true).next_back() {
        s.truncate(at);
    }
}

/// Columns `s` takes on screen.
pub fn width(s: &str) -> usize {
    let mut total = 0;
    each_grapheme(s, |_, _, w| {
        total += w;
        true
    });
    total
}

/// `s` itself when it fits in `max` columns, nothing when `max` is 0; `None` when it must be cut.
fn uncut(s: &str, max: usize) -> Option<String> {
    if width(s) <= max {
        Some(s.to_string())
    } else if max == 0 {
        Some(String::new())
    } else {
        None
    }
}

/// The longest start of `s` that fits in `max` columns (a wide char is never split).
fn prefix(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    each_grapheme(s, |g, _, w| {
        if used + w > max {
            return false;
        }
        out.push_str(g);
        used += w;
        true
    });
    out
}

/// Cuts the middle out of `s` to fit `max` columns, marking the cut with `…`: both ends of a
/// path say where it is (the root) and what it is (the file name), so both are kept.
pub fn truncate_middle(s: &str, max: usize) -> String {
    if let Some(s) = uncut(s, max) {
        return s;
    }
    // A third of the room for the head, the rest for the tail (the file name).
    let room = max - 1;
    // At least one column of the head once there are two: `a…b`, not `…ab`.
    let head = if room >= 2 { (room / 3).max(1) } else { 0 };
    let (tail, tail_used) = suffix(s, room - head);
    // Room a wide char at the tail's edge could not take goes to the head.
    let mut out = prefix(s, room - tail_used);
    out.push('…');
    out.push_str(&tail);
    out
}

/// The widths `parts` may take in `room` columns, cutting the longest first (water-filling): a
/// part is cut only below the level where the rest fit whole, so one very long part (a
/// subject) gives way before a short one (the predicate that tells its records apart) loses a
/// column.
pub fn shares(parts: &[usize], room: usize) -> Vec<usize> {
    if parts.iter().sum::<usize>() <= room {
        return parts.to_vec();
    }
    let mut sorted = parts.to_vec();
    sorted.sort_unstable();
    // The level: the widest cap for which the parts, each capped, fit the room.
    let (mut left, mut level) = (room, 0);
    for (i, &w) in sorted.iter().enumerate() {
        let rest = sorted.len() - i;
        if w * rest <= left {
            left -= w;
            continue;
        }
        level = left / rest;
        break;
    }
    parts.iter().map(|&w| w.min(level)).collect()
}

/// The file name of a path: what follows its last `/` (the whole of a bare name).
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A path cut to `max` columns with its file name kept whole where it fits (`/home/…/demo.db`):
/// the folders give way first, then the file name is cut in its middle.
pub fn truncate_path(path: &str, max: usize) -> String {
    if let Some(s) = uncut(path, max) {
        return s;
    }
    let name = file_name(path);
    let name_w = width(name);
    // The folders' start, `…/`, the name.
    if name.len() == path.len() || name_w + 3 > max {
        return truncate_middle(name, max);
    }
    let folders = &path[..path.len() - name.len() - 1];
    let mut out = prefix(folders, max - name_w - 2);
    out.push_str("…/");
    out.push_str(name);
    out
}

/// The longest end of `s` that fits in `max` columns (a wide char is never split), and its
/// width.
fn suffix(s: &str, max: usize) -> (String, usize) {
    let mut cells: Vec<(String, usize)> = Vec::new();
    each_grapheme(s, |g, _, w| {
        cells.push((g.to_string(), w));
        true
    });
    let mut tail = Vec::new();
    let mut used = 0;
    for (g, w) in cells.iter().rev() {
        if used + w > max {
            break;
        }
        tail.push(g.as_str());
        used += w;
    }
    (tail.into_iter().rev().collect(), used)
}

/// An identity as `subject · predicate @ scope` in at most `max` columns: each part is cut in
/// its middle, the longest first ([`shares`]), so however long the subject, the predicate and
/// the scope — which tell one record of it from another, and where the record applies — show.
pub fn fit_identity(subject: &str, predicate: &str, scope: &str, max: usize) -> String {
    let parts = [one_line(subject), one_line(predicate), one_line(scope)];
    let widths: Vec<usize> = parts.iter().map(|p| width(p)).collect();
    // A part cut to fewer than 3 columns keeps only its end (`…b`), not its middle: narrow, the
    // separators give up their spaces first (found by review: `…b · …n @ …l` at 20 columns).
    for (dot, at) in [(" · ", " @ "), ("·", "@")] {
        let caps = shares(&widths, max.saturating_sub(width(dot) + width(at)));
        if (caps.iter().zip(&widths)).any(|(&c, &w)| c < w && c < 3) {
            continue;
        }
        let cut: Vec<String> = (parts.iter().zip(caps))
            .map(|(p, c)| truncate_middle(p, c))
            .collect();
        return format!("{}{dot}{}{at}{}", cut[0], cut[1], cut[2]);
    }
    let whole = format!("{} · {} @ {}", parts[0], parts[1], parts[2]);
    truncate_middle(&whole, max)
}

/// Cuts `s` to at most `max` columns, marking a cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    if let Some(s) = uncut(s, max) {
        return s;
    }
    let mut out = prefix(s, max - 1);
    out.push('…');
    out
}

/// An input field's text in exactly `cols` columns, and the cursor's column after it: the end
/// of `s` (where typing happens) when it does not fit, its start marked with `…`; padded by
/// display width, so Chinese and emoji keep what follows the field in place.
pub fn input_field(s: &str, cols: usize) -> (String, usize) {
    if width(s) < cols {
        return (fit(s, cols), width(s));
    }
    // Room for the `…` and a cursor cell after the text.
    let shown = format!("…{}", suffix(s, cols.saturating_sub(2)).0);
    let cursor = width(&shown).min(cols.saturating_sub(1));
    (fit(&shown, cols), cursor)
}

/// `s` truncated or padded with spaces to exactly `cols` columns.
pub fn fit(s: &str, cols: usize) -> String {
    let mut t = truncate(s, cols);
    let w = width(&t);
    t.extend(std::iter::repeat_n(' ', cols.saturating_sub(w)));
    t
}

/// Control characters (newlines, tabs, escapes), direction controls and characters that
/// print as nothing where they stand (a zero-width space; a joiner outside an emoji) never
/// reach the terminal raw: a stored value could otherwise move the cursor, break the layout,
/// show its words in another order than they are stored, or look like another value.
pub fn one_line(s: &str) -> String {
    // The characters the CLI prints escaped (`model::escape_controls`), decided in one place.
    let Some((chars, escaped)) = crate::model::escaped_chars(s) else {
        return s.to_string();
    };
    let mut out = String::with_capacity(s.len());
    let mut after_cr = false;
    for (c, escaped) in chars.into_iter().zip(escaped) {
        match c {
            // One line break is one ⏎, whether it is written \n, \r or \r\n.
            '\n' if after_cr => {}
            '\n' | '\r' => out.push('⏎'),
            // A tab is not a space: `a\tb` and `a b` are two spellings, shown as two.
            '\t' => out.push('⇥'),
            _ if escaped => out.push('�'),
            c => out.push(c),
        }
        after_cr = c == '\r';
    }
    out
}

/// A value as the UI shows it: strings as their text, anything else as compact JSON.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => one_line(s),
        other => one_line(&other.to_string()),
    }
}

/// A value as a row lists it: a preview (the store read only its start; `bytes` is the whole's
/// size) ends with `…`, so it reads as cut however wide the row is.
pub fn listed_value(v: &Value, bytes: Option<i64>) -> String {
    let mut text = value_text(v);
    if bytes.is_some() {
        text.push('…');
    }
    text
}

/// The size a row draws after a preview, on the side its cut never reaches (README, "The
/// terminal UI": ` (5,242,881 bytes)`); nothing for a value read whole.
pub fn preview_size(bytes: Option<i64>) -> Option<String> {
    bytes.map(|n| format!(" ({} bytes)", thousands(n)))
}

// Ages are the CLI's too (`memscope pending`): one wording, kept with the model.
pub use crate::model::{age, ago};

/// `2026-11-20 10:04` from a stored RFC 3339 time (UTC).
pub fn short_time(at: &str) -> String {
    match DateTime::parse_from_rfc3339(at) {
        Ok(t) => t.with_timezone(&Utc).format("%Y-%m-%d %H:%M").to_string(),
        Err(_) => one_line(at),
    }
}

/// `2026-11-20 10:04:31 UTC` from a stored RFC 3339 time: the event popup's exact form.
pub fn full_time(at: &str) -> String {
    match DateTime::parse_from_rfc3339(at) {
        Ok(t) => t
            .with_timezone(&Utc)
            .format("%Y-%m-%d %H:%M:%S UTC")
            .to_string(),
        Err(_) => one_line(at),
    }
}

/// `11-20 10:04` from a stored RFC 3339 time (UTC): the timeline's compact form.
pub fn month_day_time(at: &str) -> String {
    match DateTime::parse_from_rfc3339(at) {
        Ok(t) => t.with_timezone(&Utc).format("%m-%d %H:%M").to_string(),
        Err(_) => one_line(at),
    }
}

/// `s` on lines of at most `max` columns, broken at spaces where it can be, between two
/// Chinese (or other wide) characters when a word does not fit (CJK text has no spaces), and
/// anywhere in a word longer than a line.
pub fn wrap(s: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    for word in one_line(s).split(' ') {
        // A word that fits goes on whole; one that does not breaks between its units.
        for (i, (unit, uw)) in break_units(word).iter().enumerate() {
            let gap = if i == 0 {
                usize::from(!line.is_empty())
            } else {
                0
            };
            if used + gap + uw <= max {
                if gap == 1 {
                    line.push(' ');
                }
                line.push_str(unit);
                used += gap + uw;
                continue;
            }
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
                used = 0;
            }
            each_grapheme(unit, |g, _, gw| {
                if used + gw > max && !line.is_empty() {
                    lines.push(std::mem::take(&mut line));
                    used = 0;
                }
                line.push_str(g);
                used += gw;
                true
            });
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// [`wrap`], in at most `rows` lines: a longer text keeps its first `rows - 1` lines and ends
/// with `…` and its own end, so a sentence that names a long value keeps what it says after
/// the value (a dialog's effect must not push its own statement off the screen).
pub fn wrap_at_most(s: &str, max: usize, rows: usize) -> Vec<String> {
    let mut lines = wrap(s, max);
    if lines.len() <= rows.max(1) {
        return lines;
    }
    let flat = one_line(s);
    if rows <= 1 {
        return vec![truncate_middle(&flat, max.max(2))];
    }
    lines.truncate(rows - 1);
    lines.push(format!("…{}", suffix(&flat, max.max(2) - 1).0));
    lines
}

/// A sentence that names values (a record's value, the one it supersedes, a source): what a
/// dialog states `y` does. Said in fewer rows than it needs, its values are cut with `…`, the
/// longest first, and the rest — the end above all, the scope a value moves to — stays whole
/// (README, "The terminal UI", Pending queue: the value is cut and the sentence's end kept).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Statement {
    /// The sentence in pieces, each with whether it is a value (which may be cut).
    pieces: Vec<(String, bool)>,
}

impl Statement {
    pub fn new() -> Statement {
        Statement::default()
    }

    /// Words the sentence says as they are.
    pub fn says(mut self, words: impl Into<String>) -> Statement {
        self.pieces.push((words.into(), false));
        self
    }

    /// A value it names, on one line: cut first when the sentence is too long.
    pub fn names(mut self, value: &str) -> Statement {
        self.pieces.push((one_line(value), true));
        self
    }

    /// The sentence followed by `more`, its values still values.
    pub fn and(mut self, more: Statement) -> Statement {
        self.pieces.extend(more.pieces);
        self
    }

    /// The sentence whole.
    pub fn text(&self) -> String {
        self.with_values(None)
    }

    /// The sentence with its values cut to the columns `caps` gives each, in order.
    fn with_values(&self, caps: Option<&[usize]>) -> String {
        let mut caps = caps.unwrap_or_default().iter();
        let mut out = String::new();
        for (text, value) in &self.pieces {
            match caps.next().filter(|_| *value) {
                Some(&cap) => out.push_str(&truncate(text, cap.max(1))),
                None => out.push_str(text),
            }
        }
        out
    }

    /// The fewest lines of `max` columns the sentence takes with no word of its own cut: its
    /// values cut down to `…`.
    pub fn least_rows(&self, max: usize) -> usize {
        let stubs: Vec<usize> = self.pieces.iter().map(|_| 1).collect();
        wrap(&self.with_values(Some(&stubs)), max).len()
    }

    /// The sentence wrapped in at most `rows` lines of `max` columns: whole when it fits, else
    /// its values cut as little as lets the rest fit whole; words too long for even that keep
    /// the sentence's head and end ([`wrap_at_most`]).
    pub fn lines(&self, max: usize, rows: usize) -> Vec<String> {
        let rows = rows.max(1);
        let whole = self.text();
        let lines = wrap(&whole, max);
        if lines.len() <= rows {
            return lines;
        }
        let widths: Vec<usize> = (self.pieces.iter())
            .filter(|(_, value)| *value)
            .map(|(text, _)| width(text))
            .collect();
        let cut = |budget: usize| {
            let shares = shares(&widths, budget);
            let mut shares = shares.iter();
            let caps: Vec<usize> = (self.pieces.iter())
                .map(|(_, value)| {
                    if *value {
                        shares.next().copied().unwrap_or(0)
                    } else {
                        0
                    }
                })
                .collect();
            self.with_values(Some(&caps))
        };
        let fits = |budget: usize| wrap(&cut(budget), max).len() <= rows;
        if !fits(0) {
            return wrap_at_most(&cut(0), max, rows);
        }
        // The most columns the values may keep: no more than the rows hold.
        let (mut fit, mut over) = (0, widths.iter().sum::<usize>().min(max * rows) + 1);
        while over - fit > 1 {
            let mid = (fit + over) / 2;
            if fits(mid) {
                fit = mid;
            } else {
                over = mid;
            }
        }
        wrap(&cut(fit), max)
    }
}

impl std::fmt::Display for Statement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

impl std::fmt::Debug for Statement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.text())
    }
}

/// A statement reads as its whole sentence.
impl PartialEq<&str> for Statement {
    fn eq(&self, other: &&str) -> bool {
        self.text() == *other
    }
}

/// A shell command on lines of at most `max` columns, as a shell reads them back: the first
/// after two spaces, the rest after six, each line but the last ending in ` \`, so the lines
/// paste into a shell as the one command. Each of `groups` (arguments that read together: the
/// database, the command and its subject, the value) starts a line; a group too long for one
/// wraps between its words. Each argument is quoted as one shell word ([`shell_word`]), and a
/// line breaks inside no word: a word wider than a line of its own is spelled in pieces, each
/// quoted alone and ended by a `\` that joins the next line to it, its lines starting at the
/// edge — a shell reads the pieces back as the one word (found by a tester: a long path was
/// broken mid-word, and a quoted one inside its quotes, so that pasted, the newline became part
/// of the file name). Nothing is cut, except that on a line too narrow for a single quoted
/// character that line runs past `max`.
pub fn shell_lines(groups: &[&[&str]], max: usize) -> Vec<String> {
    const FIRST: &str = "  ";
    const NEXT: &str = "      ";
    let args: Vec<(bool, &str)> = (groups.iter())
        .flat_map(|g| g.iter().enumerate().map(|(i, a)| (i == 0, *a)))
        .collect();
    let mut lines: Vec<String> = Vec::new();
    let mut line = FIRST.to_string();
    for (i, (starts_group, arg)) in args.iter().enumerate() {
        let word = shell_word(arg);
        // Room for the word and, unless it ends the command, the ` \` after it.
        let tail = if i + 1 == args.len() { 0 } else { 2 };
        let fresh = line.trim().is_empty();
        if !fresh && (*starts_group || width(&line) + 1 + width(&word) + tail > max) {
            lines.push(format!("{line} \\"));
            line = NEXT.to_string();
        }
        if !line.trim().is_empty() {
            line.push(' ');
        }
        if width(&line) + width(&word) + tail <= max {
            line.push_str(&word);
            continue;
        }
        // Too wide for any line: in pieces from the edge, each before a `\` (an indent
        // there would split the word).
        line.clear();
        let graphemes: Vec<&str> = arg.graphemes(true).collect();
        let mut from = 0;
        loop {
            let rest = shell_word(&graphemes[from..].concat());
            if width(&line) + width(&rest) + tail <= max {
                line.push_str(&rest);
                break;
            }
            let room = max.saturating_sub(width(&line) + 1);
            // The most graphemes whose quoted piece fits; one at least, so the word ends.
            let mut to = from + 1;
            while to < graphemes.len() && width(&shell_word(&graphemes[from..=to].concat())) <= room
            {
                to += 1;
            }
            // After a `/` when that keeps half the room, so a path breaks between its names.
            let slash = (from + 1..to).rev().find(|&i| graphemes[i - 1] == "/");
            if let Some(i) =
                slash.filter(|&i| 2 * width(&shell_word(&graphemes[from..i].concat())) >= room)
            {
                to = i;
            } else if to == graphemes.len() {
                // The rest fits beside a `\` but not beside the ` \` after it: its last
                // grapheme goes to the next line.
                to -= 1;
                if to == from {
                    line.push_str(&rest);
                    break;
                }
            }
            line.push_str(&shell_word(&graphemes[from..to].concat()));
            line.push('\\');
            lines.push(std::mem::take(&mut line));
            from = to;
        }
    }
    lines.push(line);
    lines
}

/// A word's pieces a line may break between: each wide character alone, the narrow runs
/// between them whole (`package-lock.json` stays one piece), with their widths.
fn break_units(word: &str) -> Vec<(String, usize)> {
    let mut units: Vec<(String, usize)> = Vec::new();
    let mut run = String::new();
    let mut run_w = 0;
    each_grapheme(word, |g, _, gw| {
        // Closing punctuation never starts a line: it stays with what it closes.
        let closing = gw >= 2 && "，。、；：！？）」』》】".contains(g);
        if closing && !run.is_empty() {
            run.push_str(g);
            units.push((std::mem::take(&mut run), run_w + gw));
            run_w = 0;
            return true;
        }
        if let (true, Some((last, lw))) = (closing, units.last_mut()) {
            last.push_str(g);
            *lw += gw;
            return true;
        }
        if gw >= 2 {
            if !run.is_empty() {
                units.push((std::mem::take(&mut run), run_w));
                run_w = 0;
            }
            units.push((g.to_string(), gw));
        } else {
            run.push_str(g);
            run_w += gw;
        }
        true
    });
    if !run.is_empty() || units.is_empty() {
        units.push((run, run_w));
    }
    units
}

pub use crate::model::{plural, shell_word, thousands};
use unicode_segmentation::UnicodeSegmentation;

#[cfg(test)]
mod tests {

    /// A command cut into lines fits every width and reads back, pasted into bash, as the one
    /// command — a word wider than a line too, in pieces a `\` joins.
    #[test]
    fn shell_lines_fit_and_read_back_as_the_command() {
        let db = "/home/用户/agents 的记忆 🦀/it's $HOME;x/memory.db";
        let groups: &[&[&str]] = &[
            &["memscope", "--db", db],
            &["write", "--subject", "user:42"],
            &["--value", "很长的值👩🏽‍💻"],
        ];
        let whole: Vec<&str> = groups.concat();
        for max in 1..100 {
            let lines = super::shell_lines(groups, max);
            // One quoted character and its `\` fit from 8 columns.
            if max >= 8 {
                for l in &lines {
                    assert!(super::width(l) <= max, "{max}: {l:?}");
                }
            }
            let out = std::process::Command::new("bash")
                .args(["--norc", "--noprofile", "-c"])
                .arg(format!("printf '%s\\0' {}", lines.join("\n")))
                .output()
                .expect("bash runs");
            let read = String::from_utf8(out.stdout).expect("UTF-8");
            let read: Vec<&str> = read.split_terminator('\0').collect();
            assert_eq!(read, whole, "at {max}: {lines:#?}");
            if max >= 80 {
                assert!(lines.len() == groups.len(), "each group starts a line");
            }
        }
    }

    #[test]
    fn an_input_field_keeps_its_width_and_shows_where_typing_goes() {
        for (typed, cols) in [
            ("", 18),
            ("web", 18),
            ("仓库🚀", 18),
            ("长长长长长长长长长长长长", 18),
            ("abcdefghijklmnopqrstuvwxyz0123", 18),
            ("x", 2),
            ("仓库", 3),
        ] {
            let (shown, cursor) = super::input_field(typed, cols);
            assert_eq!(super::width(&shown), cols, "{typed:?} → {shown:?}");
            assert!(cursor < cols || cols == 0, "{typed:?}: cursor {cursor}");
            if super::width(typed) < cols {
                assert_eq!(cursor, super::width(typed));
                assert!(shown.starts_with(typed));
            } else {
                assert!(shown.starts_with('…'), "{shown:?}");
                let last = typed.chars().last().unwrap();
                assert!(shown.trim_end().ends_with(last) || cols < 4, "{shown:?}");
            }
        }
    }

    use super::*;

    #[test]
    fn wrap_at_most_keeps_the_head_and_the_end_of_a_long_sentence() {
        let text = format!(
            "global: new record {}; 3 repositories would get it",
            "中".repeat(300)
        );
        let lines = wrap_at_most(&text, 40, 3);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("global: new record 中"), "{lines:?}");
        assert!(lines[2].starts_with('…') && lines[2].ends_with("3 repositories would get it"));
        assert!(lines.iter().all(|l| width(l) <= 40), "{lines:?}");
        // A text that fits is wrapped as it is; one row cuts the middle.
        assert_eq!(wrap_at_most("a b", 40, 3), wrap("a b", 40));
        let one = wrap_at_most(&text, 20, 1);
        assert_eq!(one.len(), 1);
        assert!(width(&one[0]) <= 20 && one[0].contains('…'), "{one:?}");
        // A hostile value stays escaped, and no row is empty at a width of one.
        let hostile = format!("x\u{1b}[2J{}", "🎉".repeat(50));
        for rows in 1..4 {
            for max in 1..6 {
                for l in wrap_at_most(&hostile, max, rows) {
                    assert!(!l.contains('\u{1b}'), "{l:?}");
                }
            }
        }
    }

    #[test]
    fn a_statement_cuts_its_values_and_keeps_the_rest_whole() {
        let value = "保留 package-lock.json 🎉👩🏽‍💻 ".repeat(60);
        let source = "thread:来源🦀/".repeat(30);
        let statement = Statement::new()
            .says("moves ")
            .names(&value)
            .says(" to repo:遗留的仪表盘🦀 as v1 (inserted; keeps source ")
            .names(&source)
            .says(" and causal_seq 7)");
        assert_eq!(statement.text(), format!("{statement}"));
        // Compared without spaces: a line may break between two Chinese characters.
        let squash = |s: &str| s.split_whitespace().collect::<String>();
        for max in [30, 40, 60, 94] {
            for rows in 3..=6 {
                let lines = statement.lines(max, rows);
                let said = squash(&lines.concat());
                let at = format!("{max}x{rows}: {lines:#?}");
                assert!(lines.len() <= rows, "{at}");
                assert!(lines.iter().all(|l| width(l) <= max), "{at}");
                assert!(said.starts_with("moves保留"), "{at}");
                assert!(
                    said.contains("…torepo:遗留的仪表盘🦀asv1(inserted;keepssource"),
                    "{at}"
                );
                assert!(said.ends_with("…andcausal_seq7)"), "{at}");
            }
        }
        // One that fits is wrapped as it is; words alone too long keep their head and end.
        let short = Statement::new()
            .says("moves ")
            .names("npm")
            .says(" to repo:a");
        assert_eq!(short.lines(40, 1), vec!["moves npm to repo:a"]);
        let words = Statement::new()
            .says("中".repeat(300))
            .names("npm")
            .says(" end");
        let lines = words.lines(40, 3);
        assert!(lines.len() == 3 && lines[2].ends_with("… end"), "{lines:?}");
    }

    #[test]
    fn one_line_shows_no_control_or_direction_control_raw() {
        let shown = one_line("npm\u{202E}ic\u{2066}仓库\u{2069}\x1b[2J\n🧠\u{200D}💻");
        assert_eq!(shown, "npm�ic�仓库��[2J⏎🧠\u{200D}💻");
        assert_eq!(wrap("a\u{202E}b c", 3), vec!["a�b", "c"]);
        // A line break is one ⏎ however it is written.
        assert_eq!(one_line("a\r\nb\nc\rd\n\ne"), "a⏎b⏎c⏎d⏎⏎e");
        // A tab is not a space.
        assert_eq!(one_line("a\tb"), "a⇥b");
        assert_ne!(one_line("a\tb"), one_line("a b"));
    }

    #[test]
    fn one_line_shows_line_separators_as_one_column_each() {
        // A terminal draws U+2028 and U+2029 as nothing: raw, they let the screen's old
        // text show through.
        let shown = one_line(&format!("b{}.", "\u{2028}\u{2029}".repeat(20)));
        assert_eq!(shown, format!("b{}.", "\u{fffd}".repeat(40)));
    }

    #[test]
    fn one_line_shows_what_prints_as_nothing() {
        // Two values that would look alike: the second ends in a zero-width space.
        assert_eq!(one_line("pnpm\u{200B}"), "pnpm�");
        assert_eq!(one_line("p\u{00AD}npm\u{FEFF}\u{2060}"), "p�npm��");
        // A joiner outside an emoji prints as nothing; inside one it is part of it.
        assert_eq!(one_line("npm\u{200D}"), "npm�");
        assert_eq!(one_line("👩\u{200D}💻 ❤\u{FE0F}"), "👩\u{200D}💻 ❤\u{FE0F}");
        assert_eq!(one_line("燕麦拿铁"), "燕麦拿铁");
    }

    #[test]
    fn truncates_by_columns() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("燕麦拿铁", 5), "燕麦…");
        assert_eq!(width(&truncate("燕麦拿铁", 4)), 3);
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("abc", 0), "");
        assert_eq!(fit("中文", 5), "中文 ");
        assert_eq!(wrap("moves npm to repo:x", 9), ["moves npm", "to repo:x"]);
        assert_eq!(
            wrap("这个仓库保留现有的", 8),
            ["这个仓库", "保留现有", "的"]
        );
        assert_eq!(wrap("", 5), [""]);
        // A line breaks between Chinese characters rather than leave its end empty, keeps a
        // Latin run whole, and never starts with a closing mark (装。 stay together).
        assert_eq!(
            wrap("说 这个仓库保留现有的package-lock.json，安装。", 24),
            ["说 这个仓库保留现有的", "package-lock.json，安", "装。"]
        );
        assert_eq!(width("👍🏽 ok"), 5);
        assert_eq!(truncate("👍🏽👍🏽👍🏽", 5), "👍🏽👍🏽…");
    }

    #[test]
    fn cuts_the_middle_of_a_path() {
        let path = "/home/someone/projects/memscope/demo.db";
        let cut = truncate_middle(path, 20);
        assert_eq!(width(&cut), 20);
        assert!(
            cut.starts_with("/home") && cut.ends_with("/demo.db"),
            "{cut}"
        );
        assert_eq!(truncate_middle("demo.db", 7), "demo.db");
        assert_eq!(truncate_middle("demo.db", 1), "…");
        assert_eq!(truncate_middle("demo.db", 0), "");
        // A wide char never splits: the cut stays within the columns.
        let wide = truncate_middle("/数据/记忆/仓库/demo.db", 12);
        assert!(width(&wide) <= 12 && wide.ends_with("demo.db"), "{wide}");
    }

    #[test]
    fn a_path_keeps_its_file_name_while_it_can() {
        let path = "/tmp/review2/demo.db";
        assert_eq!(truncate_path(path, 40), path);
        assert_eq!(truncate_path(path, 15), "/tmp/r…/demo.db");
        assert_eq!(truncate_path(path, 10), "/…/demo.db");
        assert_eq!(truncate_path(path, 7), "demo.db");
        assert_eq!(truncate_path(path, 5), "d….db");
        assert_eq!(truncate_path("demo.db", 5), "d….db");
        let wide = truncate_path("/数据/记忆/仓库/记忆.db", 12);
        assert!(width(&wide) <= 12 && wide.ends_with("…/记忆.db"), "{wide}");
    }

    #[test]
    fn a_long_identity_keeps_its_predicate_and_scope() {
        assert_eq!(shares(&[10, 5, 6], 30), [10, 5, 6]);
        assert_eq!(shares(&[100, 5, 6], 30), [19, 5, 6]);
        assert_eq!(shares(&[100, 40, 6], 30), [12, 12, 6]);
        let long = "user:中文名字很长".repeat(17);
        let a = fit_identity(&long, "名字🎉", "repo:仓库", 60);
        let b = fit_identity(&long, "other_pred", "repo:仓库", 60);
        assert!(width(&a) <= 60 && width(&b) <= 60, "{a} / {b}");
        assert!(a.contains(" · 名字🎉 @ repo:仓库"), "{a}");
        assert!(b.contains(" · other_pred @ repo:仓库"), "{b}");
        assert!(a.starts_with("user:中文") && a.contains('…'), "{a}");
        assert_eq!(
            fit_identity("user:42", "package_manager", "global", 60),
            "user:42 · package_manager @ global"
        );
        // Too narrow for three parts: the whole line cut in its middle.
        assert!(width(&fit_identity(&long, "p", "global", 7)) <= 7);
        // Narrow, each part still cut in its middle, the separators giving up their spaces
        // (found by review: the delete dialog at 20×5 read `…b · …n @ …l`).
        assert_eq!(
            fit_identity("team:web", "node_version", "global", 14),
            "t…eb·n…on@g…al"
        );
        assert_eq!(truncate_middle("abcdef", 3), "a…f");
    }

    #[test]
    fn formats_numbers_and_ages() {
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(999), "999");
        let now = DateTime::parse_from_rfc3339("2026-11-20T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(age(now, "2026-11-16T10:00:00.000Z"), "4d");
        assert_eq!(age(now, "2026-11-20T09:00:00.000Z"), "1h");
        assert_eq!(ago(now, "2026-11-20T10:00:00.000Z"), "just now");
    }
}
