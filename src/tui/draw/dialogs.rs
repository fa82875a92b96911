//! Dialogs over the panes: help, delete, confirm, explain, messages (and, drawn by `reads` and
//! `repair`, the as-of, rescope and revert dialogs). Only the top one is drawn focused; each
//! states its keys (from the key map) on its bottom line.

use super::{bold, dim, error_style, good, labelled, part, plain, row_line, wrapped};
use crate::model::{DeletePreview, StatementLine};
use crate::tui::app::{App, ConfirmDialog, DeleteDialog, Dialog, ExplainDialog, ExplainField};
use crate::tui::keymap;
use crate::tui::text::{ago, one_line, short_time, value_text, width, wrap};
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App) {
    for (i, dialog) in app.dialogs.iter().enumerate() {
        let top = i + 1 == app.dialogs.len();
        match dialog {
            Dialog::Help { scroll } => help(frame, area, *scroll),
            Dialog::Delete(d) => delete(frame, area, d),
            Dialog::Confirm(c) => confirm(frame, area, c),
            Dialog::Explain(e) => explain(frame, area, e, app, top),
            Dialog::AsOf(d) => super::reads::as_of(frame, area, d, app),
            Dialog::Rescope(d) => super::repair::rescope(frame, area, d, top),
            Dialog::Revert(d) => super::repair::revert(frame, area, d, app),
            Dialog::Message { title, text } => message(frame, area, title, text),
            Dialog::Event(d) => crate::tui::timeline::draw(frame, area, d, app),
        }
    }
}

/// A box of at most `w`×`h` centred in `area`.
pub(crate) fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// Clears `rect`, draws a titled border with the dialog's key hints, returns the inside.
pub(crate) fn frame_box(
    frame: &mut Frame<'_>,
    rect: Rect,
    title: &str,
    ctx: keymap::Context,
    style: Style,
) -> Rect {
    frame.render_widget(Clear, rect);
    if rect.width < 4 || rect.height < 3 {
        return rect;
    }
    let mut hints = Vec::new();
    for (keys, hint) in keymap::hints(&[ctx]) {
        hints.push(format!("{keys} {hint}"));
    }
    let hint_text = format!(" {} ", hints.join(" · "));
    let max_title = rect.width.saturating_sub(4) as usize;
    let mut block = Block::new()
        .borders(Borders::ALL)
        .border_style(style)
        .title(Span::styled(
            format!(" {} ", crate::tui::text::truncate(title, max_title)),
            bold(),
        ));
    if width(&hint_text) + 2 <= rect.width as usize {
        block = block.title_bottom(Line::styled(hint_text, dim()).right_aligned());
    }
    frame.render_widget(block, rect);
    Rect::new(
        rect.x + 1,
        rect.y + 1,
        rect.width.saturating_sub(2),
        rect.height.saturating_sub(2),
    )
}

fn help(frame: &mut Frame<'_>, area: Rect, scroll: usize) {
    let rect = centered(area, 84, area.height.saturating_sub(2).max(3));
    let inner = frame_box(frame, rect, "Keys", keymap::Context::Help, bold());
    let max = inner.width as usize;
    let mut lines: Vec<Line<'static>> = vec![plain(
        "memscope inspects and curates the memory your coding agents share.",
        dim(),
        max,
    )];
    for (title, rows) in keymap::help_sections() {
        if rows.is_empty() {
            continue;
        }
        lines.push(Line::raw(""));
        lines.push(plain(title, bold().fg(Color::Cyan), max));
        for (keys, help) in rows {
            lines.push(row_line(
                &[
                    part(format!("  {keys:<14}"), bold()),
                    part(help, Style::new()),
                ],
                &[],
                max,
            ));
        }
    }
    let scroll = scroll.min(lines.len().saturating_sub(inner.height as usize));
    let lines: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The store's statement of what the delete destroys, as `memscope delete` prints it, with at
/// most six identities named.
fn preview_lines(p: &DeletePreview, max: usize) -> Vec<Line<'static>> {
    const SHOWN: usize = 6;
    let mut lines = Vec::new();
    let mut named = 0;
    for (kind, text) in p.statement("(tab 3, u)") {
        match kind {
            StatementLine::Heading => lines.push(plain(&text, bold(), max)),
            StatementLine::Effect => lines.push(plain(&text, Style::new(), max)),
            StatementLine::Identity => {
                named += 1;
                if named <= SHOWN {
                    lines.push(plain(&text, dim(), max));
                } else if named == SHOWN + 1 {
                    lines.push(plain(
                        &format!("    … and {} more", p.identities.len() - SHOWN),
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

fn delete(frame: &mut Frame<'_>, area: Rect, d: &DeleteDialog) {
    let ids = match &d.preview {
        Some(Ok(p)) => p.identities.len().min(7),
        _ => 1,
    };
    let rect = centered(area, 76, 17 + ids as u16);
    let inner = frame_box(
        frame,
        rect,
        "Delete: tombstone and purge",
        keymap::Context::DeleteDialog,
        error_style(),
    );
    let max = inner.width as usize;
    let id = &d.identity;
    let choices = [
        format!("this identity  {id}"),
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
        lines.push(row_line(
            &[part(mark, style), part(one_line(c), style)],
            &[],
            max,
        ));
    }
    lines.push(Line::raw(""));
    match &d.preview {
        None => lines.push(plain("Reading what this would destroy…", dim(), max)),
        Some(Err(e)) => {
            lines.push(plain("The preview failed:", error_style(), max));
            lines.push(plain(e, Style::new(), max));
        }
        Some(Ok(p)) => lines.extend(preview_lines(p, max)),
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

fn confirm(frame: &mut Frame<'_>, area: Rect, c: &ConfirmDialog) {
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
    // The effect is what the user came to read: a narrow box wraps it rather than cut it.
    let text: Vec<String> = c
        .lines
        .iter()
        .flat_map(|l| wrap(l, w.saturating_sub(4) as usize))
        .collect();
    let rect = centered(area, w, text.len() as u16 + 5);
    let inner = frame_box(
        frame,
        rect,
        &c.title,
        keymap::Context::Confirm,
        bold().fg(Color::Yellow),
    );
    let max = inner.width as usize;
    let mut lines: Vec<Line<'static>> = text.iter().map(|l| plain(l, Style::new(), max)).collect();
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

fn explain(frame: &mut Frame<'_>, area: Rect, e: &ExplainDialog, app: &App, top: bool) {
    let w = area.width.min(90);
    let lines = explain_lines(e, app, w.saturating_sub(2) as usize);
    // As tall as its text (sources and dates wrap), at least as tall as it always was.
    let h = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX).max(18);
    let rect = centered(area, w, h);
    let title = format!("Explain · {} · {}", e.subject, e.predicate);
    let inner = frame_box(
        frame,
        rect,
        &title,
        keymap::Context::Explain,
        bold().fg(Color::Cyan),
    );
    let max = inner.width as usize;
    frame.render_widget(Paragraph::new(lines), inner);
    if top && inner.height > 0 {
        let (offset, text) = match e.field {
            ExplainField::Repo => (5, &e.repo),
            ExplainField::Task => (5 + 18 + 2 + 5, &e.task),
        };
        let x = offset + width(&one_line(text)).min(18);
        if x < max {
            frame.set_cursor_position(Position::new(inner.x + x as u16, inner.y));
        }
    }
}

fn explain_lines(e: &ExplainDialog, app: &App, max: usize) -> Vec<Line<'static>> {
    let field = |name: &str, value: &str, active: bool| {
        let style = if active {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new().add_modifier(Modifier::UNDERLINED)
        };
        vec![
            part(format!("{name} "), bold()),
            part(format!("{:<18}", one_line(value)), style),
            part("  ", Style::new()),
        ]
    };
    let mut inputs = field("repo", &e.repo, e.field == ExplainField::Repo);
    inputs.extend(field("task", &e.task, e.field == ExplainField::Task));
    let mut lines = vec![row_line(&inputs, &[], max), Line::raw("")];
    match &e.result {
        None => lines.push(plain("resolving…", dim(), max)),
        Some(Err(err)) => lines.extend(wrapped(err, error_style(), max)),
        Some(Ok(r)) => {
            lines.extend(wrapped(
                "Precedence: task, then repo, then global. The first scope found wins.",
                dim(),
                max,
            ));
            for c in &r.considered {
                let (mark, style) = match c.state.as_str() {
                    "wins" => ("★ wins     ", good().add_modifier(Modifier::BOLD)),
                    "shadowed" => ("  shadowed ", Style::new().fg(Color::Yellow)),
                    "deleted" => ("  deleted  ", Style::new().fg(Color::Red)),
                    _ => ("  absent   ", dim()),
                };
                let mut parts = vec![part(mark, style), part(format!("{:<24}", c.scope), bold())];
                if let Some(v) = &c.value {
                    parts.push(part(value_text(v), Style::new().fg(Color::Green)));
                }
                if let Some(v) = c.version {
                    parts.push(part(format!("  v{v}"), dim()));
                }
                lines.push(row_line(&parts, &[], max));
                // Where it came from and when, on its own lines: wrapped, never cut.
                let mut from = Vec::new();
                if let Some(s) = &c.source {
                    from.push(s.clone());
                }
                if let Some(t) = &c.updated_at {
                    from.push(format!("{} ({})", short_time(t), ago(app.now, t)));
                }
                if !from.is_empty() {
                    lines.extend(labelled("", &from.join(" · "), dim(), 11, max));
                }
            }
            lines.push(Line::raw(""));
            match (&r.value, &r.scope) {
                (Some(v), Some(scope)) => {
                    lines.push(row_line(
                        &[
                            part("→ an agent here uses ", Style::new()),
                            part(value_text(v), bold().fg(Color::Green)),
                            part(format!(" from {scope}"), Style::new()),
                        ],
                        &[],
                        max,
                    ));
                    let shadowed: Vec<String> = r
                        .considered
                        .iter()
                        .filter(|c| c.state == "shadowed")
                        .map(|c| {
                            format!(
                                "{} ({})",
                                c.scope,
                                c.value.as_ref().map(value_text).unwrap_or_default()
                            )
                        })
                        .collect();
                    if !shadowed.is_empty() {
                        lines.extend(labelled(
                            "",
                            &format!("and it shadows {}", shadowed.join(", ")),
                            dim(),
                            2,
                            max,
                        ));
                    }
                }
                _ => lines.push(plain(
                    "→ nothing applies here: an agent has no memory of this",
                    Style::new().fg(Color::Yellow),
                    max,
                )),
            }
        }
    }
    lines
}

fn message(frame: &mut Frame<'_>, area: Rect, title: &str, text: &str) {
    let w = (width(text) as u16 + 4).clamp(30, 80);
    let rect = centered(area, w, 7);
    let inner = frame_box(frame, rect, title, keymap::Context::Message, error_style());
    let paragraph = Paragraph::new(one_line(text))
        .style(Style::new())
        .wrap(ratatui::widgets::Wrap { trim: true });
    frame.render_widget(paragraph, inner);
}
