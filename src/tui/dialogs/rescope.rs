//! The rescope dialog (`m` in the current view): move a mis-scoped value where it belongs.
//! It states what `y` will do, or why the store would refuse, from the store's own preview.

use super::{record_lines, Step, FIELD};
use crate::model::{MemoryRecord, Scope};
use crate::tui::app::{typed, Action, Curation};
use crate::tui::dialogs::{centered, frame_box_offering};
use crate::tui::draw::{bold, dim, part, plain, row_line};
use crate::tui::keymap::{Command, Context};
use crate::tui::tabs::Shell;
use crate::tui::text::{
    fit, fit_identity, input_field, one_line, truncate_middle, width, Statement,
};
use crossterm::event::KeyEvent;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// A target scope worth proposing, and the evidence for it (its stored words as values: cut
/// first, escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    pub scope: Scope,
    pub why: Statement,
}

/// What a rescope to one target would do, read from the store with the write path's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RescopePreview {
    pub to: Scope,
    /// What `y` does, each effect a sentence naming the values it moves.
    pub effects: Vec<Statement>,
    /// Why the store would refuse it (nothing would change).
    pub refusal: Option<String>,
}

/// The target field's label.
const TO: &str = "to ";

#[derive(Debug, Clone, PartialEq)]
pub struct RescopeDialog {
    pub record: MemoryRecord,
    /// The target scope as typed (or suggested).
    pub target: String,
    /// Typing into the target (the keys are text) rather than y/n.
    pub editing: bool,
    /// Loaded with the first preview.
    pub suggestions: Option<Vec<Suggestion>>,
    /// Which suggestion the target holds, when it holds one.
    pub suggestion: Option<usize>,
    /// `Err`: the target is not a scope.
    pub preview: Option<Result<RescopePreview, String>>,
    /// Lines scrolled off the top, on a terminal too short for the whole statement.
    pub scroll: usize,
}

impl RescopeDialog {
    pub fn new(record: MemoryRecord) -> RescopeDialog {
        RescopeDialog {
            record,
            target: String::new(),
            editing: false,
            suggestions: None,
            suggestion: None,
            preview: None,
            scroll: 0,
        }
    }

    /// The dialog with `target` filled in (the suspects tab opens it on the place the scan
    /// points at); the suggestions, loaded as from the current view, say why.
    pub fn suggesting(record: MemoryRecord, target: &Scope) -> RescopeDialog {
        let mut d = RescopeDialog::new(record);
        d.target = target.to_string();
        d
    }

    /// Its suggested targets (loaded once): a global record's target starts at the best one;
    /// with no target, the human types one.
    pub fn take_suggestions(&mut self, list: Vec<Suggestion>) {
        // A target filled in by the opener is that suggestion, and says so.
        if self.suggestion.is_none() && !self.target.is_empty() {
            self.suggestion = list.iter().position(|s| s.scope.to_string() == self.target);
        }
        if self.target.is_empty() && self.record.scope == Scope::Global {
            if let Some(first) = list.first() {
                self.target = first.scope.to_string();
                self.suggestion = Some(0);
            }
        }
        if self.target.is_empty() {
            self.editing = true;
        }
        self.suggestions = Some(list);
    }

    /// `y` moves only what the store's preview states it would: not before the preview came,
    /// nor once it refused (the target is no scope, or the store would refuse the move) — the
    /// dialog then offers what works, another target; `Tab` only when there is a suggestion.
    pub fn offers(&self, cmd: Command) -> bool {
        match cmd {
            Command::Confirm => {
                matches!(&self.preview, Some(Ok(p)) if p.refusal.is_none())
            }
            Command::NextChoice | Command::PrevChoice => {
                self.suggestions.as_ref().is_none_or(|s| !s.is_empty())
            }
            _ => true,
        }
    }

    /// What `y` says on a refused target, in one sentence: nothing moves, and what does.
    fn why_y_does_nothing(&self) -> String {
        let why = match &self.preview {
            Some(Err(_)) => "the target is not a scope",
            _ => "the store refuses this move",
        };
        let tab = if self.offers(Command::NextChoice) {
            ", Tab takes a suggestion"
        } else {
            ""
        };
        format!(
            "nothing was moved: {why}, as the dialog says — e types another target{tab}, n or Esc cancels"
        )
    }

    pub fn key(&mut self, cmd: Option<Command>, key: &KeyEvent, shell: &mut Shell<'_>) -> Step {
        // PgDn, PgUp, Home, End and the wheel (Down, Up) scroll the statement on a terminal too
        // short for it (j/k choose a suggestion: the key map never sends them as Down/Up here).
        if super::scrolls(cmd) {
            let (room, page) = self.scroll_room(shell.size);
            self.scroll = super::scrolled(self.scroll, cmd, room, page);
            return Step::Stay(Action::None);
        }
        let typed = typed(key);
        let d = self;
        let cycle = |d: &mut RescopeDialog, forward: bool| -> bool {
            let n = d.suggestions.as_ref().map_or(0, |s| s.len());
            if n == 0 {
                return false;
            }
            let i = match (d.suggestion, forward) {
                (None, true) => 0,
                (None, false) => n - 1,
                (Some(i), true) => (i + 1) % n,
                (Some(i), false) => (i + n - 1) % n,
            };
            if let Some(s) = d.suggestions.as_ref().and_then(|s| s.get(i)) {
                d.target = s.scope.to_string();
            }
            d.suggestion = Some(i);
            d.scroll = 0;
            true
        };
        if d.editing {
            match cmd {
                Some(Command::DoneEditing) => {
                    d.editing = false;
                    return Step::Stay(Action::None);
                }
                Some(Command::Erase) => {
                    crate::tui::text::erase_grapheme(&mut d.target);
                }
                Some(Command::ClearField) => d.target.clear(),
                Some(Command::NextChoice) => {
                    if !cycle(d, true) {
                        return Step::Stay(Action::None);
                    }
                    return Step::Stay(Action::PreviewRescope);
                }
                // A space is typed as any character is: the target shows what was typed, and
                // the preview says it is no scope (`Scope::parse`: ids are single words) rather
                // than the key vanishing (found by review: `repo:my app` became `repo:myapp`).
                _ => match typed {
                    Some(c) => d.target.push(c),
                    None => return Step::Stay(Action::None),
                },
            }
            d.suggestion = None;
            d.scroll = 0;
            return Step::Stay(Action::PreviewRescope);
        }
        match cmd {
            Some(Command::Confirm) => match &d.preview {
                Some(Ok(p)) if p.refusal.is_none() => {
                    let curation = Curation::Rescope {
                        identity: d.record.identity(),
                        to: p.to.clone(),
                    };
                    return Step::Close(Action::Apply(curation));
                }
                // Not offered: the refusal is on screen, so `y` says why it does nothing
                // rather than repeating it (found by review: `y` read the store's sentence
                // again, as if it had tried).
                Some(_) => shell.error(d.why_y_does_nothing()),
                None => shell.info(
                    "nothing was moved yet: y moves what the dialog states, and it is still being worked out",
                ),
            },
            Some(Command::Cancel) => {
                shell.info("cancelled: nothing changed");
                return Step::Close(Action::None);
            }
            Some(Command::EditField) => d.editing = true,
            Some(Command::NextChoice) | Some(Command::PrevChoice) => {
                if cycle(d, cmd == Some(Command::NextChoice)) {
                    return Step::Stay(Action::PreviewRescope);
                }
                shell.info("no suggested target: e types one (repo:<id>, task:<id> or global)");
            }
            _ => {}
        }
        Step::Stay(Action::None)
    }

    /// The dialog's lines on a screen of `area`, the row of its target field among them, the
    /// field's width, and its box (above the footer: [`super::above_footer`]). A statement here (the first sentence, each effect) takes a fifth of the
    /// screen's rows as everywhere, or the rows its words need with its values cut, when
    /// those are more: the dialog scrolls, so no word of what `y` does is cut (found by review:
    /// at 40×12 the effect lost its middle, `…rce …`).
    fn layout(&self, area: Rect) -> (Rect, Vec<Line<'static>>, usize, usize) {
        let d = self;
        let area = super::above_footer(area);
        let rec = &d.record;
        let max_w = 96.min(area.width);
        let max = max_w.saturating_sub(2) as usize;
        let rows = super::rows_a_line(area.height);
        let tail = format!(
            " (v{}, {}) out of {}.",
            rec.version,
            one_line(&rec.source),
            rec.scope
        );
        let first = Statement::new()
            .says("Move ")
            .names(&crate::tui::text::value_text(&rec.value))
            .says(tail.clone());
        let mut lines: Vec<Line<'static>> =
            record_lines("Move ", rec, tail, max, rows.max(first.least_rows(max)));
        if let Some(raw) = &rec.raw {
            lines.push(plain(&format!("said: “{raw}”"), dim(), max));
        }
        lines.push(Line::raw(""));
        let field_row = lines.len();
        let field_style = if d.editing {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new().add_modifier(Modifier::UNDERLINED)
        };
        // The field narrows with the dialog; the hint beside it shows whole or not at all
        // (found by review: at 40×9 it read `e …`).
        let field = FIELD.min(max.saturating_sub(width(TO))).max(1);
        let hint = if d.editing {
            "  repo:<id>, task:<id> or global"
        } else {
            "  e edits"
        };
        let hint = if width(TO) + field + width(hint) <= max {
            hint
        } else {
            ""
        };
        lines.push(row_line(
            &[
                part(TO, bold()),
                // Typing shows the end (where the cursor is); otherwise both ends, so a long
                // target still says its kind and which place it names.
                part(
                    if d.editing {
                        input_field(&one_line(&d.target), field).0
                    } else {
                        fit(&truncate_middle(&one_line(&d.target), field), field)
                    },
                    field_style,
                ),
                part(hint, dim()),
            ],
            &[],
            max,
        ));
        // Why the target is suggested wraps under it, never cut but for its stored words
        // (found by review: from the suspects tab it was cut at `… in repo:le…` at any width).
        let why = match (&d.suggestions, d.suggestion) {
            (Some(s), Some(i)) if i < s.len() => Some(
                Statement::new()
                    .says(format!("suggested {}/{}: ", i + 1, s.len()))
                    .and(s[i].why.clone()),
            ),
            (Some(s), _) if !s.is_empty() => {
                let names: Vec<String> = s.iter().map(|x| x.scope.to_string()).collect();
                Some(
                    Statement::new()
                        .says("suggestions (Tab): ")
                        .names(&names.join(", ")),
                )
            }
            _ => None,
        };
        match why {
            Some(why) => {
                let room = max.saturating_sub(3);
                let rows = rows.max(why.least_rows(room));
                lines.extend(
                    (why.lines(room, rows).into_iter())
                        .map(|l| plain(&format!("   {l}"), dim(), max)),
                );
            }
            None => lines.push(plain("   typed by you", dim(), max)),
        }
        lines.push(Line::raw(""));
        match &d.preview {
            None => lines.push(plain("working out what this would do…", dim(), max)),
            // A refused target, wrapped whole (the dialog scrolls): its end says what to type
            // instead (found by review: at 40×9 it read `type the tar…<id>, task:<id> …`).
            Some(Err(e)) => lines.extend(crate::tui::draw::wrapped(
                e,
                Style::new().fg(Color::Yellow),
                max,
            )),
            Some(Ok(p)) => {
                lines.extend(super::outcome_lines_in_words(
                    &p.effects,
                    p.refusal.as_deref(),
                    max,
                    rows,
                ));
                if p.refusal.is_none() {
                    lines.extend(crate::tui::draw::wrapped(
                        "History keeps every version; rescoped and reverted events point at each other.",
                        dim(),
                        max,
                    ));
                }
            }
        }
        // Too tall for the screen, the blank rows between the parts go first: what `y` does
        // keeps them (found with the rescope dialog scrolling: at 100×12 they pushed the
        // second effect below the screen).
        let (lines, field_row) = if lines.len() + 2 > area.height as usize {
            let above = lines[..field_row].iter().filter(|l| l.width() > 0).count();
            (lines.into_iter().filter(|l| l.width() > 0).collect(), above)
        } else {
            (lines, field_row)
        };
        let rect = centered(
            area,
            max_w,
            u16::try_from(lines.len() + 2).unwrap_or(u16::MAX),
        );
        (rect, lines, field_row, field)
    }

    /// The furthest the statement scrolls and a page, on a terminal of `size`.
    fn scroll_room(&self, size: (u16, u16)) -> (usize, usize) {
        let (rect, lines, _, _) = self.layout(Rect::new(0, 0, size.0, size.1));
        let rows = rect.height.saturating_sub(2) as usize;
        super::scroll_room(lines.len(), rows)
    }

    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect, top: bool) {
        let d = self;
        let rec = &d.record;
        let (rect, lines, field_row, field) = self.layout(area);
        // A long identity is cut part by part, as the delete dialog cuts it: the predicate and
        // the scope stay in the title.
        let room = (rect.width as usize).saturating_sub(4 + width("Rescope · "));
        let scope = rec.scope.to_string();
        let title = format!(
            "Rescope · {}",
            fit_identity(&rec.subject, &rec.predicate, &scope, room)
        );
        let ctx = if d.editing {
            Context::RescopeInput
        } else {
            Context::Rescope
        };
        let inner = frame_box_offering(frame, rect, &title, ctx, &|cmd| self.offers(cmd));
        let (rows, max) = (inner.height as usize, inner.width as usize);
        let scroll = super::shown_scroll(lines.len(), self.scroll, rows);
        // The rows of the statement on screen: the note, when there is one, is not the field.
        let page = super::scroll_room(lines.len(), rows).1.min(rows);
        frame.render_widget(
            Paragraph::new(super::on_screen(lines, self.scroll, rows, max)),
            inner,
        );
        let field_row = field_row.checked_sub(scroll).filter(|r| *r < page);
        if let Some(row) = field_row.filter(|_| top && d.editing) {
            let x = width(TO) + input_field(&one_line(&d.target), field).1;
            if x < inner.width as usize {
                frame.set_cursor_position(Position::new(inner.x + x as u16, inner.y + row as u16));
            }
        }
    }
}
