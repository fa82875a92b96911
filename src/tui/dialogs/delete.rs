//! The delete dialog (`d` in the current view): choose the target, read the store's exact
//! preview of what it destroys, confirm with `y`.

use super::{centered, frame_box, Step};
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
}

impl DeleteDialog {
    /// Opens on `identity`; the action asks the store for the preview.
    pub fn open(identity: Identity) -> (DeleteDialog, Action) {
        let dialog = DeleteDialog {
            identity,
            choice: 0,
            preview: None,
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

    pub fn key(&mut self, cmd: Option<Command>, shell: &mut Shell<'_>) -> Step {
        match cmd {
            Some(Command::NextChoice) | Some(Command::PrevChoice) => {
                self.choice = if cmd == Some(Command::NextChoice) {
                    (self.choice + 1) % 3
                } else {
                    (self.choice + 2) % 3
                };
                self.preview = None;
                return Step::Stay(Action::PreviewDelete(self.target()));
            }
            Some(Command::Confirm) => match &self.preview {
                Some(Ok(_)) => return Step::Close(Action::Apply(Curation::Delete(self.target()))),
                Some(Err(_)) => {
                    shell.error(
                        "the preview failed, so nothing can be confirmed: cancel with n or Esc",
                    );
                }
                None => shell.info("the preview is still loading"),
            },
            Some(Command::Cancel) => {
                shell.info("cancelled: nothing was deleted");
                return Step::Close(Action::None);
            }
            _ => {}
        }
        Step::Stay(Action::None)
    }

    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect) {
        let d = self;
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
        let rect = centered(area, 76, 17 + ids as u16);
        let inner = frame_box(
            frame,
            rect,
            "Delete: tombstone and purge",
            Context::DeleteDialog,
        );
        let max = inner.width as usize;
        let id = &d.identity;
        let this = "this identity  ";
        let room = max.saturating_sub(4 + this.len());
        let choices = [
            // Each part cut in its middle, the longest first: the predicate and the scope stay
            // (on a dialog too narrow for that, the line's middle goes, as below).
            if room < 16 {
                format!("{this}{id}")
            } else {
                let scope = id.scope.to_string();
                format!(
                    "{this}{}",
                    fit_identity(&id.subject, &id.predicate, &scope, room)
                )
            },
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
        // On a terminal too short for all of it, the last row says that more of what `y`
        // destroys is hidden, rather than the statement ending mid-way as if complete (once
        // the three targets fit: below that, they matter more).
        let rows = inner.height as usize;
        if lines.len() > rows && rows > 5 {
            let hidden = lines.len() - (rows - 1);
            lines.truncate(rows - 1);
            lines.push(plain(
                &format!(
                    "… {hidden} more line{} of what y does: make the terminal taller to read them",
                    if hidden == 1 { "" } else { "s" }
                ),
                error_style(),
                max,
            ));
        }
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
            StatementLine::Effect => lines.push(plain(&text, Style::new(), max)),
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
