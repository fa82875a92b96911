//! The confirm of a destructive change (`ConfirmAction` → the dialog states the effect →
//! `y` hands the curation to the loop).

use super::{centered, frame_box_offering, Step};
use crate::tui::app::{Action, Curation};
use crate::tui::draw::{bold, part, plain, row_line};
use crate::tui::keymap::{Command, Context};
use crate::tui::tabs::pending::Choice;
use crate::tui::tabs::Shell;
use crate::tui::text::{width, wrap, wrap_at_most};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmDialog {
    pub title: String,
    pub lines: Vec<String>,
    /// What `y` does, in a word or two.
    pub yes: String,
    pub curation: Curation,
    /// A pending item's candidates of the kind this confirm writes to, when it has several:
    /// `Tab` and `Shift-Tab` move the confirm among them.
    pub alternatives: Option<Alternatives>,
}

/// The candidates of one kind (`repo`, say) a pending item offers, and the one a confirm states.
#[derive(Debug, Clone, PartialEq)]
pub struct Alternatives {
    pub choices: Vec<Choice>,
    pub at: usize,
}

impl ConfirmDialog {
    /// The confirm of writing pending item `pending_id` (named by `item`) to the chosen one of
    /// `alternatives`, in the words of the store's preview.
    pub fn resolve(pending_id: i64, item: String, alternatives: Alternatives) -> ConfirmDialog {
        let Alternatives { choices, at } = &alternatives;
        let choice = &choices[*at];
        let mut lines = vec![item];
        if let Some(next) = (choices.len() > 1).then(|| &choices[(at + 1) % choices.len()]) {
            lines.push(format!(
                "{} candidate {} of {}; Tab: {} instead",
                choice.scope.kind(),
                at + 1,
                choices.len(),
                next.scope
            ));
        }
        lines.push(choice.statement());
        ConfirmDialog {
            title: format!("Write pending #{pending_id} to {}?", choice.scope),
            lines,
            yes: format!("write to {}", choice.scope),
            curation: Curation::Resolve {
                pending_id,
                scope: choice.scope.clone(),
            },
            alternatives: (choices.len() > 1).then_some(alternatives.clone()),
        }
    }

    /// The confirm moved `by` places among its alternatives (none: it stays).
    fn step(&mut self, by: isize) {
        let (Some(alt), Curation::Resolve { pending_id, .. }) =
            (&self.alternatives, &self.curation)
        else {
            return;
        };
        let n = alt.choices.len() as isize;
        let at = (alt.at as isize + by).rem_euclid(n) as usize;
        let alternatives = Alternatives {
            choices: alt.choices.clone(),
            at,
        };
        *self = ConfirmDialog::resolve(*pending_id, self.lines[0].clone(), alternatives);
    }

    /// `Tab` moves only a confirm with alternatives: the border and the footer offer it on no
    /// other (found by review: in a reject or a restore confirm it was offered, and did nothing).
    pub fn offers(&self, cmd: Command) -> bool {
        match cmd {
            Command::NextChoice | Command::PrevChoice => self.alternatives.is_some(),
            _ => true,
        }
    }

    pub fn key(&mut self, cmd: Option<Command>, shell: &mut Shell<'_>) -> Step {
        match cmd {
            Some(Command::Confirm) => Step::Close(Action::Apply(self.curation.clone())),
            Some(Command::NextChoice | Command::PrevChoice)
                if !self.offers(Command::NextChoice) =>
            {
                shell.info(match self.curation {
                    Curation::Resolve { .. } => "Tab: the pending item has no other candidate of this kind; y writes, n cancels",
                    _ => "Tab moves only among a pending item's candidates; y confirms, n cancels",
                });
                Step::Stay(Action::None)
            }
            Some(Command::NextChoice) => {
                self.step(1);
                Step::Stay(Action::None)
            }
            Some(Command::PrevChoice) => {
                self.step(-1);
                Step::Stay(Action::None)
            }
            Some(Command::Cancel) => {
                shell.info("cancelled: nothing changed");
                Step::Close(Action::None)
            }
            _ => Step::Stay(Action::None),
        }
    }

    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect) {
        let c = self;
        let w = (c
            .lines
            .iter()
            .map(|l| width(l))
            .max()
            .unwrap_or(0)
            .max(width(&c.title) + 4)
            .max(40) as u16
            + 4)
        .min(area.width);
        // The effect is what the user came to read: a narrow box wraps it rather than cut it,
        // on as many rows as the terminal has beside the header and the footer — the last
        // line (the effect) served first, every other line one row and then at most its share
        // (`rows_a_line`) — and only what does not fit then is cut, keeping each line's head
        // and end (found by review: at 40×10 the effect lost its middle while the dialog had
        // three rows to spare).
        let max = w.saturating_sub(4) as usize;
        let need: Vec<usize> = c.lines.iter().map(|l| wrap(l, max).len().max(1)).collect();
        let mut rows: Vec<usize> = need.iter().map(|_| 1).collect();
        // The box: the text, a blank row, the `y` line, the border; the header and the footer
        // stay in view.
        let mut left = (area.height as usize)
            .saturating_sub(6)
            .saturating_sub(rows.len());
        let last = need.len().saturating_sub(1);
        for (i, n) in need.iter().enumerate().rev() {
            let cap = if i == last {
                *n
            } else {
                (*n).min(super::rows_a_line(area.height))
            };
            let more = cap.saturating_sub(1).min(left);
            rows[i] += more;
            left -= more;
        }
        let text: Vec<String> = (c.lines.iter().zip(rows))
            .flat_map(|(l, rows)| wrap_at_most(l, max, rows))
            .collect();
        let rect = centered(area, w, text.len() as u16 + 4);
        let inner = frame_box_offering(frame, rect, &c.title, Context::Confirm, &|cmd| {
            c.offers(cmd)
        });
        let max = inner.width as usize;
        let mut lines: Vec<Line<'static>> =
            text.iter().map(|l| plain(l, Style::new(), max)).collect();
        lines.push(Line::raw(""));
        lines.push(row_line(
            &[
                part("y ", bold().fg(Color::Cyan)),
                part(c.yes.clone(), Style::new()),
                part("   n ", bold().fg(Color::Cyan)),
                part("cancel", Style::new()),
            ],
            &[],
            max,
        ));
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
