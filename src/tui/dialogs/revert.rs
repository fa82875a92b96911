//! The revert dialog (`v` in the current view): make an earlier value current again, as a new
//! version; each earlier version states what choosing it does, from the store.

use super::{outcome_lines_in_words, record_lines, Step};
use crate::model::MemoryRecord;
use crate::tui::app::{Action, Curation};
use crate::tui::dialogs::{centered, frame_box_offering};
use crate::tui::draw::{bold, dim, error_style, part, plain, row_line, wrapped};
use crate::tui::keymap::{Command, Context};
use crate::tui::tabs::Shell;
use crate::tui::text::{
    ago, fit, fit_identity, month_day_time, one_line, value_text, width, Statement,
};
use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use serde_json::Value;

/// An earlier version to revert to.
#[derive(Debug, Clone, PartialEq)]
pub struct RevertChoice {
    pub version: i64,
    /// `None` when its content was purged.
    pub value: Option<Value>,
    pub at: String,
    pub source: Option<String>,
    pub valid_until: Option<String>,
    /// What choosing it does, or why the store would refuse it — asked of the store when the
    /// version is chosen (`None` until then: each answer is a rolled-back write).
    pub effect: Option<Result<Statement, String>>,
    /// Where `rescope` moved this version's value (a mis-scoped value the store's default
    /// revert passes over; choosing it brings it back on purpose).
    pub moved_to: Option<String>,
    /// The scope guard's evidence, when it marked this version suspect as it was written
    /// (README, "The scope guard", `flag`): the list marks it `!`, as the timeline does, and
    /// choosing it says why before `y` brings it back.
    pub suspect: Option<String>,
}

/// What the store says of a revert's choices: the versions, newest first, and which one a
/// plain revert brings back — or, when it brings back none, why (the store's refusal, in the
/// UI's words).
#[derive(Debug, Clone, PartialEq)]
pub struct RevertChoices {
    pub list: Vec<RevertChoice>,
    pub default: usize,
    pub no_default: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RevertDialog {
    pub record: MemoryRecord,
    /// Earlier versions, newest first (the default is the previous one).
    pub choices: Option<Result<Vec<RevertChoice>, String>>,
    pub choice: usize,
    /// Why a plain revert brings back no version (the store's refusal, in the UI's words).
    pub no_default: Option<String>,
    /// Digits typed so far (a version number).
    pub typed: String,
    /// Lines scrolled off the top, on a terminal too short for the whole statement.
    pub scroll: usize,
}

impl RevertDialog {
    pub fn chosen(&self) -> Option<&RevertChoice> {
        match &self.choices {
            Some(Ok(c)) => c.get(self.choice),
            _ => None,
        }
    }

    /// The earlier versions; the one a plain revert brings back is chosen (the store's
    /// default: never a value `rescope` moved out, README "Debugging a wrong-tool incident").
    pub fn take_choices(&mut self, choices: Result<RevertChoices, String>) {
        self.choice = 0;
        self.no_default = None;
        self.choices = Some(choices.map(|c| {
            self.choice = c.default;
            self.no_default = c.no_default;
            c.list
        }));
    }

    /// What choosing `version` does, from the store.
    pub fn take_effect(&mut self, version: i64, effect: Result<Statement, String>) {
        if let Some(Ok(choices)) = &mut self.choices {
            if let Some(c) = choices.iter_mut().find(|c| c.version == version) {
                c.effect = Some(effect);
            }
        }
    }

    /// The chosen version, when what choosing it does is not known yet.
    pub fn effect_wanted(&self) -> Option<i64> {
        self.chosen()
            .filter(|c| c.effect.is_none())
            .map(|c| c.version)
    }

    /// `y` reverts only to a version whose effect the store's preview states: not before the
    /// preview came, nor once the store refused it — as the rescope dialog offers it.
    pub fn offers(&self, cmd: Command) -> bool {
        match cmd {
            Command::Confirm => self
                .chosen()
                .is_some_and(|c| matches!(c.effect, Some(Ok(_)))),
            _ => true,
        }
    }

    pub fn key(&mut self, cmd: Option<Command>, key: &KeyEvent, shell: &mut Shell<'_>) -> Step {
        // PgDn, PgUp, Home, End and the wheel (Down, Up) scroll the statement on a terminal too
        // short for it (j/k choose a version: the key map never sends them as Down/Up here).
        if super::scrolls(cmd) {
            let (room, page) = self.scroll_room(shell.size, shell.now);
            self.scroll = super::scrolled(self.scroll, cmd, room, page);
            return Step::Stay(Action::None);
        }
        let d = self;
        let len = match &d.choices {
            Some(Ok(c)) => c.len(),
            _ => 0,
        };
        match cmd {
            Some(Command::Confirm) => match (d.chosen(), &d.choices) {
                (Some(c), _) => match &c.effect {
                    Some(Ok(_)) => {
                        let curation = Curation::Revert {
                            identity: d.record.identity(),
                            to_version: c.version,
                        };
                        return Step::Close(Action::Apply(curation));
                    }
                    // Not offered: the refusal is on screen, so `y` says why it does nothing
                    // rather than repeating it, and what works.
                    Some(Err(_)) => shell.error(
                        "nothing was reverted: the store refuses this version, as the dialog says — j/k or a number chooses another, n or Esc cancels",
                    ),
                    None => {
                        shell.info("still working out what reverting does: press y again");
                        return Step::Stay(Action::PreviewRevert);
                    }
                },
                (None, Some(Err(e))) => shell.error(e.clone()),
                (None, Some(Ok(_))) => shell.error("there is no earlier version to revert to"),
                (None, None) => shell.info("the versions are still loading"),
            },
            Some(Command::Cancel) => {
                shell.info("cancelled: nothing changed");
                return Step::Close(Action::None);
            }
            Some(Command::NextChoice) => {
                d.typed.clear();
                d.choice = (d.choice + 1).min(len.saturating_sub(1));
            }
            Some(Command::PrevChoice) => {
                d.typed.clear();
                d.choice = d.choice.saturating_sub(1);
            }
            Some(Command::Digit) => {
                let Some(c) = digit(key) else {
                    return Step::Stay(Action::None);
                };
                let Some(Ok(choices)) = &d.choices else {
                    return Step::Stay(Action::None);
                };
                // Digits make one number: "1" then "2" is v12. A digit that makes a number no
                // version has (nor begins) says so, and the choice stays; the next digit starts
                // a new number (found by review: after "1", a "5" that made no v15 chose v5
                // silently — only a first digit said it named no version).
                let number = format!("{}{c}", d.typed);
                let parsed = number
                    .parse::<i64>()
                    .ok()
                    .filter(|_| !number.starts_with('0'));
                let named = parsed.and_then(|n| choices.iter().position(|x| x.version == n));
                let begins = parsed.is_some()
                    && choices
                        .iter()
                        .any(|x| x.version.to_string().starts_with(&number));
                match named {
                    Some(i) => {
                        d.choice = i;
                        d.typed = number;
                    }
                    None if begins => {
                        let longer: Vec<i64> = (choices.iter())
                            .map(|x| x.version)
                            .filter(|v| v.to_string().starts_with(&number))
                            .collect();
                        let text = format!(
                            "v{number} names no earlier version: {} begin with it — type the next digit",
                            version_names(&longer)
                        );
                        d.typed = number;
                        shell.info(text);
                    }
                    None => {
                        d.typed.clear();
                        let stays = match choices.get(d.choice) {
                            Some(c) => format!(" (v{} stays chosen)", c.version),
                            None => String::new(),
                        };
                        let versions: Vec<i64> = choices.iter().map(|x| x.version).collect();
                        let text = format!(
                            "no earlier version v{number}{stays}: the choices are {}",
                            version_names(&versions)
                        );
                        shell.info(text);
                    }
                }
            }
            _ => {}
        }
        // A newly chosen version: the store says what choosing it does.
        if d.effect_wanted().is_some() {
            return Step::Stay(Action::PreviewRevert);
        }
        Step::Stay(Action::None)
    }

    /// The dialog's lines on a screen of `area`, and its box. As in the rescope dialog, a
    /// statement (the first sentence, the effect) takes a fifth of the screen's rows, or the
    /// rows its words need with its values cut when those are more, and the dialog scrolls:
    /// on a small terminal its end is never cut off unsaid (found by review: at 40×12 the
    /// effect of `y` was below the box, with nothing saying so).
    fn layout(&self, area: Rect, now: DateTime<Utc>) -> (Rect, Vec<Line<'static>>) {
        let d = self;
        let area = super::above_footer(area);
        let rec = &d.record;
        let max_w = 96.min(area.width);
        let max = max_w.saturating_sub(2) as usize;
        let rows = super::rows_a_line(area.height);
        let tail = format!(
            " (v{}, {}, {})",
            rec.version,
            one_line(&rec.source),
            ago(now, &rec.updated_at)
        );
        let first = Statement::new()
            .says("Now ")
            .names(&value_text(&rec.value))
            .says(tail.clone());
        let mut lines: Vec<Line<'static>> =
            record_lines("Now ", rec, tail, max, rows.max(first.least_rows(max)));
        lines.extend(wrapped(
            "Make an earlier value current again, as a new version (history is never rewritten):",
            dim(),
            max,
        ));
        lines.push(Line::raw(""));
        let warning = Style::new().fg(Color::Yellow);
        match &d.choices {
            None => lines.push(plain("reading the history…", dim(), max)),
            Some(Err(e)) => lines.extend(wrapped(e, error_style(), max)),
            Some(Ok(choices)) if choices.is_empty() => lines.extend(wrapped(
                "This identity has no earlier version in its history.",
                warning,
                max,
            )),
            Some(Ok(choices)) => {
                if let Some(why) = &d.no_default {
                    lines.extend(wrapped(
                        &format!("A plain revert brings nothing back: {why}"),
                        warning,
                        max,
                    ));
                }
                let effect = match d.chosen() {
                    Some(c) => {
                        let mut marked = Vec::new();
                        if let Some(evidence) = &c.suspect {
                            marked = wrapped(
                                &format!(
                                    "! The scope guard marked v{} suspect when it was written: {evidence}",
                                    c.version
                                ),
                                warning,
                                max,
                            );
                        }
                        let (effects, refusal) = match &c.effect {
                            Some(Ok(e)) => (vec![e.clone()], None),
                            Some(Err(why)) => (Vec::new(), Some(why.as_str())),
                            None => (
                                vec![Statement::new().says("working out what choosing it does…")],
                                None,
                            ),
                        };
                        marked.extend(outcome_lines_in_words(&effects, refusal, max, rows));
                        marked
                    }
                    None => Vec::new(),
                };
                // The choices take the rows the rest leaves, at least the chosen one and a
                // marker each side: the dialog scrolls to the rest.
                let room = (area.height as usize).saturating_sub(2);
                let rows = room.saturating_sub(lines.len() + 1 + effect.len()).max(3);
                let shown = choice_window(choices.len(), d.choice, rows);
                if shown.start > 0 {
                    lines.push(plain(&format!("    ↑ {} more", shown.start), dim(), max));
                }
                let below = choices.len() - shown.end;
                let columns = Columns::of(choices, max);
                for (i, c) in choices.iter().enumerate().take(shown.end).skip(shown.start) {
                    lines.push(choice_line(c, i == d.choice, &columns, max));
                }
                if below > 0 {
                    lines.push(plain(&format!("    ↓ {below} more"), dim(), max));
                }
                lines.push(Line::raw(""));
                lines.extend(effect);
            }
        }
        // Too tall for the screen, the blank rows go first: what `y` does keeps them.
        if lines.len() + 2 > area.height as usize {
            lines.retain(|l| l.width() > 0);
        }
        let rect = centered(
            area,
            max_w,
            u16::try_from(lines.len() + 2).unwrap_or(u16::MAX),
        );
        (rect, lines)
    }

    /// The furthest the statement scrolls and a page, on a terminal of `size`.
    fn scroll_room(&self, size: (u16, u16), now: DateTime<Utc>) -> (usize, usize) {
        let (rect, lines) = self.layout(Rect::new(0, 0, size.0, size.1), now);
        let rows = rect.height.saturating_sub(2) as usize;
        super::scroll_room(lines.len(), rows)
    }

    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect, now: DateTime<Utc>) {
        let rec = &self.record;
        let (rect, lines) = self.layout(area, now);
        // A long identity is cut part by part, as the delete dialog cuts it.
        let room = (rect.width as usize).saturating_sub(4 + width("Revert · "));
        let scope = rec.scope.to_string();
        let title = format!(
            "Revert · {}",
            fit_identity(&rec.subject, &rec.predicate, &scope, room)
        );
        let inner = frame_box_offering(frame, rect, &title, Context::Revert, &|cmd| {
            self.offers(cmd)
        });
        let (rows, max) = (inner.height as usize, inner.width as usize);
        frame.render_widget(
            Paragraph::new(super::on_screen(lines, self.scroll, rows, max)),
            inner,
        );
    }
}

/// The widths of the revert dialog's columns, the same in every row of its choices (found by
/// review: a `(moved to task:…)` note widened its row and pushed its times and source right).
struct Columns {
    version: usize,
    value: usize,
    at: usize,
    until: usize,
}

/// The most columns a value takes in the list …
const VALUE: usize = 16;
/// … and a value with the note of where `rescope` moved it.
const VALUE_MOVED: usize = 36;

impl Columns {
    /// Measured over every choice (not the ones on screen: the columns stay put as `j`/`k`
    /// scroll), in display columns — a Chinese character or an emoji takes two.
    fn of(choices: &[RevertChoice], max: usize) -> Columns {
        let most = |f: &dyn Fn(&RevertChoice) -> usize| choices.iter().map(f).max().unwrap_or(0);
        let version = most(&|c| width(&version_label(c))).max(4);
        let at = most(&|c| width(&month_day_time(&c.at)));
        let until = most(&|c| width(&until(c)));
        let value = most(&|c| width(&choice_value(c)));
        let cap = if choices.iter().any(|c| c.moved_to.is_some()) {
            VALUE_MOVED
        } else {
            VALUE
        };
        // On a narrow dialog the value keeps what the mark, the number and the times leave it
        // (and the source, some), never less than a plain value's columns.
        let rest = width(CHOSEN) + version + 1 + 2 + at + width(" → ") + until + 2 + 8;
        let room = max.saturating_sub(rest).max(VALUE);
        Columns {
            version,
            value: value.min(cap).min(room),
            at,
            until,
        }
    }
}

const CHOSEN: &str = "(•) ";
const NOT_CHOSEN: &str = "( ) ";

/// A choice's value as the list shows it: with where `rescope` moved it.
fn choice_value(c: &RevertChoice) -> String {
    match (&c.value, &c.moved_to) {
        (Some(v), None) => value_text(v),
        (Some(v), Some(to)) => format!("{}{}", value_text(v), moved_note(to)),
        (None, _) => "(content purged)".into(),
    }
}

fn moved_note(to: &str) -> String {
    format!(" (moved to {})", one_line(to))
}

/// Until when a choice was current.
fn until(c: &RevertChoice) -> String {
    c.valid_until
        .as_deref()
        .map(month_day_time)
        .unwrap_or_else(|| "now".into())
}

/// A choice's value in exactly `cols` columns. A moved value is cut before the note of where
/// it was moved, which stays whole when it fits; when it does not, the value keeps a third of
/// the columns and the note is cut with `…` — the row still says the value was moved.
fn value_cell(c: &RevertChoice, cols: usize) -> String {
    if let (Some(v), Some(to)) = (&c.value, &c.moved_to) {
        let (value, note) = (value_text(v), moved_note(to));
        let (vw, nw) = (width(&value), width(&note));
        if vw + nw > cols {
            let keep = if nw + 2 <= cols {
                cols - nw
            } else {
                vw.min((cols / 3).max(2))
            };
            let cut = crate::tui::text::truncate(&value, keep);
            return fit(&format!("{cut}{note}"), cols);
        }
    }
    fit(&choice_value(c), cols)
}

/// A choice's number, and `!` when the scope guard marked it suspect.
fn version_label(c: &RevertChoice) -> String {
    match c.suspect {
        Some(_) => format!("v{} !", c.version),
        None => format!("v{}", c.version),
    }
}

/// One version to choose, in [`Columns`]: its number (`!` when the scope guard marked it),
/// value (or where `rescope` moved it), when it was current and its source.
fn choice_line(c: &RevertChoice, chosen: bool, cols: &Columns, max: usize) -> Line<'static> {
    let (mark, style) = if chosen {
        (CHOSEN, bold().fg(Color::Yellow))
    } else {
        (NOT_CHOSEN, Style::new())
    };
    let version_style = match c.suspect {
        Some(_) => bold().fg(Color::Yellow),
        None => style,
    };
    row_line(
        &[
            part(mark, style),
            part(
                format!("{} ", fit(&version_label(c), cols.version)),
                version_style,
            ),
            part(
                value_cell(c, cols.value),
                Style::new().fg(if c.moved_to.is_some() {
                    Color::Yellow
                } else {
                    Color::Green
                }),
            ),
            part(
                format!(
                    "  {} → {}",
                    fit(&month_day_time(&c.at), cols.at),
                    fit(&until(c), cols.until)
                ),
                dim(),
            ),
            part(
                format!("  {}", one_line(c.source.as_deref().unwrap_or(""))),
                dim(),
            ),
        ],
        &[],
        max,
    )
}

/// Versions to choose from, named — the first few and the last when there are many.
fn version_names(versions: &[i64]) -> String {
    let name = |v: &i64| format!("v{v}");
    if versions.len() <= 8 {
        return versions.iter().map(name).collect::<Vec<_>>().join(", ");
    }
    let first: Vec<String> = versions.iter().take(5).map(name).collect();
    format!(
        "{} … {} ({} versions)",
        first.join(", "),
        name(&versions[versions.len() - 1]),
        versions.len()
    )
}

fn digit(key: &KeyEvent) -> Option<char> {
    match key.code {
        KeyCode::Char(c) if c.is_ascii_digit() => Some(c),
        _ => None,
    }
}

/// The choices shown in `rows` lines with `at` among them: all when they fit, else a window
/// around it, leaving a line for each "more" marker it needs (at least the chosen one shows).
fn choice_window(len: usize, at: usize, rows: usize) -> std::ops::Range<usize> {
    if len <= rows {
        return 0..len;
    }
    let at = at.min(len.saturating_sub(1));
    let inner = rows.saturating_sub(2).max(1);
    let start = at.saturating_sub(inner / 2).min(len - inner);
    start..start + inner
}

#[cfg(test)]
mod tests {
    use super::choice_window;

    #[test]
    fn the_window_holds_the_choice_and_room_for_its_markers() {
        assert_eq!(choice_window(5, 4, 10), 0..5);
        for len in [3, 40, 800] {
            for rows in [0, 1, 2, 3, 10] {
                for at in [0, len / 2, len - 1] {
                    let w = choice_window(len, at, rows);
                    assert!(w.contains(&at), "{len} {rows} {at}: {w:?}");
                    assert!(w.end <= len && !w.is_empty());
                    if len > rows {
                        assert!(w.len() <= rows.saturating_sub(2).max(1));
                    }
                }
            }
        }
    }
}
