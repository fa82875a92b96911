//! The delete dialog (`d` in the current view): choose the target, read the store's exact
//! preview of what it destroys, confirm with `y`.

use super::{centered, frame_box_offering, Step};
use crate::model::{DeletePreview, DeleteTarget, Identity, StatementLine};
use crate::tui::app::{Action, Curation};
use crate::tui::draw::{bold, dim, error_style, part, plain, row_line};
use crate::tui::keymap::{Command, Context};
use crate::tui::tabs::Shell;
use crate::tui::text::{fit_identity, one_line, truncate_middle, width, wrap};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

#[derive(Debug, Clone, PartialEq)]
pub struct DeleteDialog {
    pub identity: Identity,
    /// 0 this identity, 1 the predicate in all scopes, 2 the whole subject.
    pub choice: usize,
    pub preview: Option<Result<DeletePreview, String>>,
    /// Lines scrolled off the top, on a terminal too short for the whole statement.
    pub scroll: usize,
}

impl DeleteDialog {
    /// Opens on `identity`; the action asks the store for the preview.
    pub fn open(identity: Identity) -> (DeleteDialog, Action) {
        let dialog = DeleteDialog {
            identity,
            choice: 0,
            preview: None,
            scroll: 0,
        };
        let action = Action::PreviewDelete(dialog.target());
        (dialog, action)
    }

    pub fn target(&self) -> DeleteTarget {
        let id = &self.identity;
        match self.choice {
            0 => DeleteTarget::Identity(id.clone()),
            1 => DeleteTarget::Predicate {
                subject: id.subject.clone(),
                predicate: id.predicate.clone(),
            },
            _ => DeleteTarget::Subject(id.subject.clone()),
        }
    }

    /// The store's preview, when it is of the target shown. `Some(sentence)` when it changes
    /// nothing: the dialog opened on a live record, so another process deleted what it would
    /// delete, and the dialog gives way to a message saying so.
    pub fn take(
        &mut self,
        target: &DeleteTarget,
        preview: &Result<DeletePreview, String>,
    ) -> Option<String> {
        if self.target() != *target {
            return None;
        }
        if let Ok(p) = preview {
            if p.changes_nothing() {
                return Some(format!(
                    "{} was deleted by another process: nothing is left for this delete to \
                     destroy, and the dialog closed.",
                    self.target_words()
                ));
            }
        }
        self.preview = Some(preview.clone());
        None
    }

    /// The target chosen, in words (`user:42 · package_manager @ global`), a long one cut in
    /// its middle so that the message's end stays in its box.
    fn target_words(&self) -> String {
        let id = &self.identity;
        match self.choice {
            0 => fit_identity(&id.subject, &id.predicate, &id.scope.to_string(), 60),
            1 => truncate_middle(
                &one_line(&format!("{} in all scopes of {}", id.predicate, id.subject)),
                60,
            ),
            _ => truncate_middle(&one_line(&format!("the whole subject {}", id.subject)), 60),
        }
    }

    /// `y` deletes only what the preview stated: not before it came, nor after it failed.
    pub fn offers(&self, cmd: Command) -> bool {
        cmd != Command::Confirm || matches!(self.preview, Some(Ok(_)))
    }

    pub fn key(&mut self, cmd: Option<Command>, shell: &mut Shell<'_>) -> Step {
        match cmd {
            Some(Command::NextChoice) | Some(Command::PrevChoice) => {
                self.choice = if cmd == Some(Command::NextChoice) {
                    (self.choice + 1) % 3
                } else {
                    (self.choice + 2) % 3
                };
                self.preview = None;
                self.scroll = 0;
                return Step::Stay(Action::PreviewDelete(self.target()));
            }
            Some(Command::Confirm) => match &self.preview {
                Some(Ok(_)) => return Step::Close(Action::Apply(Curation::Delete(self.target()))),
                Some(Err(why)) => {
                    shell.error(format!(
                        "nothing was deleted: y deletes what the preview states, and the preview failed ({why}) — cancel with n or Esc, or choose the target again with j/k to read it again"
                    ));
                }
                None => shell.info(
                    "nothing was deleted yet: y deletes what the preview states, and it is still loading",
                ),
            },
            Some(Command::Cancel) => {
                shell.info("cancelled: nothing was deleted");
                return Step::Close(Action::None);
            }
            // PgDn, PgUp, Home, End and the wheel (Down, Up) scroll the statement.
            _ => {
                let (room, page) = self.scroll_room(shell.size);
                self.scroll = super::scrolled(self.scroll, cmd, room, page);
            }
        }
        Step::Stay(Action::None)
    }

    /// Where the dialog goes on a screen of `area`, and all its lines at that width.
    fn layout(&self, area: Rect) -> (Rect, Vec<Line<'static>>) {
        let d = self;
        // Never over the footer, which names the keys the border has no room for: at 25×6
        // `n/Esc cancel` (found by a tester: the box covered it, and `y delete` alone showed).
        let area = super::above_footer(area);
        // As many identities as the terminal has rows for (six at least; a line says how many
        // more), and the line that skips the already deleted.
        let shown = (area.height as usize).saturating_sub(20).max(MIN_SHOWN);
        let ids = match &d.preview {
            Some(Ok(p)) => {
                let n = named(p).len();
                n.min(shown) + usize::from(n > shown) + usize::from(!p.already_deleted.is_empty())
            }
            _ => 1,
        };
        let w = area.width.min(76);
        let max = w.saturating_sub(2) as usize;
        let id = &d.identity;
        let scope = id.scope.to_string();
        let this = "this identity";
        let whole = fit_identity(&id.subject, &id.predicate, &scope, usize::MAX);
        // The identity beside its target when it fits whole there, else on a line of its own
        // below, where it has the most room: cut there only if it must, part by part, so the
        // predicate and the scope show (found by review: at 40 columns the line beside read
        // `u…:7 · f…er @ r…er` while the whole identity fitted the line below).
        let (first, below) = if 4 + width(this) + 2 + width(&whole) <= max {
            (format!("{this}  {whole}"), None)
        } else {
            let room = max.saturating_sub(4);
            (
                this.to_string(),
                Some(fit_identity(&id.subject, &id.predicate, &scope, room)),
            )
        };
        let choices = [
            first,
            format!("{} in all scopes of {}", id.predicate, id.subject),
            format!("the whole subject {}", id.subject),
        ];
        let mut lines = vec![plain("What to delete (j/k to choose):", bold(), max)];
        for (i, c) in choices.iter().enumerate() {
            let (mark, style) = if i == d.choice {
                ("(•) ", bold().fg(Color::Red))
            } else {
                ("( ) ", Style::new())
            };
            // A long subject or predicate is cut in its middle: the scope at the end says
            // which place the delete reaches.
            let text = truncate_middle(&one_line(c), max.saturating_sub(width(mark)).max(2));
            lines.push(row_line(&[part(mark, style), part(text, style)], &[], max));
            if let Some(id) = below.as_ref().filter(|_| i == 0) {
                lines.push(row_line(
                    &[part("    ", style), part(id.clone(), style)],
                    &[],
                    max,
                ));
            }
        }
        lines.push(Line::raw(""));
        match &d.preview {
            None => lines.push(plain("Reading what this would destroy…", dim(), max)),
            Some(Err(e)) => {
                lines.push(plain("The preview failed:", error_style(), max));
                // Wrapped to its end: what to do (another login, say) comes last.
                lines.extend(
                    crate::tui::text::wrap_at_most(e, max, 6)
                        .into_iter()
                        .map(|l| plain(&l, Style::new(), max)),
                );
            }
            Some(Ok(p)) => lines.extend(preview_lines(p, max, shown)),
        }
        // The box keeps its size while the preview loads, and grows when lines wrap.
        let h = (17 + ids).max(lines.len() + 2);
        let rect = centered(area, w, u16::try_from(h).unwrap_or(u16::MAX));
        (rect, lines)
    }

    /// The furthest the statement scrolls and a page, on a terminal of `size`.
    fn scroll_room(&self, size: (u16, u16)) -> (usize, usize) {
        let (rect, lines) = self.layout(Rect::new(0, 0, size.0, size.1));
        super::scroll_room(lines.len(), rect.height.saturating_sub(2) as usize)
    }

    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect) {
        let (rect, lines) = self.layout(area);
        let inner = frame_box_offering(
            frame,
            rect,
            "Delete: tombstone and purge",
            Context::DeleteDialog,
            &|cmd| self.offers(cmd),
        );
        let (rows, max) = (inner.height as usize, inner.width as usize);
        let lines = super::on_screen(lines, self.scroll, rows, max);
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

/// The fewest identities the dialog names before "… and N more".
const MIN_SHOWN: usize = 6;

/// The identities the statement names, in its order: those it tombstones, or when it changes
/// nothing, those already deleted (`DeletePreview::statement`).
fn named(p: &DeletePreview) -> &[Identity] {
    if p.changes_nothing() {
        &p.already_deleted
    } else {
        &p.identities
    }
}

/// The store's statement of what the delete destroys, as `memscope delete` prints it, with at
/// most `shown` identities named, each with its predicate and scope kept however long its
/// subject.
fn preview_lines(p: &DeletePreview, max: usize, shown: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let ids = named(p);
    let mut at = 0;
    for (kind, text) in p.statement("(tab 3, u)") {
        match kind {
            StatementLine::Heading => lines.push(plain(&text, bold(), max)),
            // An effect longer than the dialog wraps under its bullet, never cut mid-word.
            StatementLine::Effect => {
                let (bullet, rest) = match text.strip_prefix("• ") {
                    Some(rest) => ("• ", rest),
                    None => ("", text.as_str()),
                };
                let indent = " ".repeat(width(bullet));
                for (i, l) in wrap(rest, max.saturating_sub(width(bullet)))
                    .iter()
                    .enumerate()
                {
                    let lead = if i == 0 { bullet } else { indent.as_str() };
                    lines.push(plain(&format!("{lead}{l}"), Style::new(), max));
                }
            }
            StatementLine::Identity => {
                at += 1;
                if at <= shown {
                    let text = match ids.get(at - 1) {
                        Some(id) => format!(
                            "    {}",
                            fit_identity(
                                &id.subject,
                                &id.predicate,
                                &id.scope.to_string(),
                                max.saturating_sub(4)
                            )
                        ),
                        None => truncate_middle(&one_line(&text), max.max(2)),
                    };
                    lines.push(plain(&text, dim(), max));
                } else if at == shown + 1 {
                    lines.push(plain(
                        &format!("    … and {} more", ids.len() - shown),
                        dim(),
                        max,
                    ));
                }
            }
            StatementLine::Closing => {
                lines.extend(wrap(&text, max).into_iter().map(|l| plain(&l, dim(), max)))
            }
        }
    }
    lines
}
