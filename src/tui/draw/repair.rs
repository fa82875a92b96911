//! The rescope and revert dialogs: each states what `y` will do, or why the store would refuse.

use super::{bold, dim, error_style, part, plain, row_line};
use crate::tui::app::App;
use crate::tui::dialogs::{centered, frame_box};
use crate::tui::incident::{RescopeDialog, RevertDialog};
use crate::tui::keymap;
use crate::tui::text::{ago, month_day_time, one_line, value_text, width, wrap};
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

const FIELD: usize = 30;

/// `text` as bullet lines of at most `max` columns.
fn bullet(lines: &mut Vec<Line<'static>>, text: &str, style: Style, max: usize) {
    for (i, l) in wrap(text, max.saturating_sub(2)).into_iter().enumerate() {
        let lead = if i == 0 { "• " } else { "  " };
        lines.push(Line::styled(format!("{lead}{l}"), style));
    }
}

/// What the dialog says `y` will do (or why it would be refused), as lines.
fn outcome_lines(effects: &[String], refusal: Option<&str>, max: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    match refusal {
        Some(why) => {
            lines.push(plain("The store would refuse this:", error_style(), max));
            bullet(&mut lines, why, Style::new(), max);
        }
        None => {
            lines.push(plain("This will, in one transaction:", bold(), max));
            for e in effects {
                bullet(&mut lines, e, Style::new(), max);
            }
        }
    }
    lines
}

pub fn rescope(frame: &mut Frame<'_>, area: Rect, d: &RescopeDialog, top: bool) {
    let rec = &d.record;
    let max_w = 96.min(area.width);
    let max = max_w.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = vec![row_line(
        &[
            part("Move ", Style::new()),
            part(value_text(&rec.value), bold().fg(Color::Green)),
            part(
                format!(
                    " (v{}, {}) out of {}.",
                    rec.version,
                    one_line(&rec.source),
                    rec.scope
                ),
                Style::new(),
            ),
        ],
        &[],
        max,
    )];
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
    lines.push(row_line(
        &[
            part("to ", bold()),
            part(format!("{:<FIELD$}", one_line(&d.target)), field_style),
            part(
                if d.editing {
                    "  repo:<id>, task:<id> or global"
                } else {
                    "  e edits"
                },
                dim(),
            ),
        ],
        &[],
        max,
    ));
    match (&d.suggestions, d.suggestion) {
        (Some(s), Some(i)) if i < s.len() => {
            lines.push(plain(
                &format!("   suggested {}/{}: {}", i + 1, s.len(), s[i].why),
                dim(),
                max,
            ));
        }
        (Some(s), _) if !s.is_empty() => {
            let names: Vec<String> = s.iter().map(|x| x.scope.to_string()).collect();
            lines.push(plain(
                &format!("   suggestions (Tab): {}", names.join(", ")),
                dim(),
                max,
            ));
        }
        _ => lines.push(plain("   typed by you", dim(), max)),
    }
    lines.push(Line::raw(""));
    match &d.preview {
        None => lines.push(plain("working out what this would do…", dim(), max)),
        Some(Err(e)) => lines.push(plain(e, Style::new().fg(Color::Yellow), max)),
        Some(Ok(p)) => {
            lines.extend(outcome_lines(&p.effects, p.refusal.as_deref(), max));
            if p.refusal.is_none() {
                lines.push(plain(
                    "History keeps every version; rescoped and reverted events point at each other.",
                    dim(),
                    max,
                ));
            }
        }
    }
    let rect = centered(area, max_w, lines.len() as u16 + 2);
    let title = format!(
        "Rescope · {} · {} @ {}",
        rec.subject, rec.predicate, rec.scope
    );
    let ctx = if d.editing {
        keymap::Context::RescopeInput
    } else {
        keymap::Context::Rescope
    };
    let inner = frame_box(frame, rect, &title, ctx, bold().fg(Color::Yellow));
    frame.render_widget(Paragraph::new(lines), inner);
    if top && d.editing && (field_row as u16) < inner.height {
        let x = 3 + width(&one_line(&d.target)).min(FIELD);
        if x < inner.width as usize {
            frame.set_cursor_position(Position::new(
                inner.x + x as u16,
                inner.y + field_row as u16,
            ));
        }
    }
}

pub fn revert(frame: &mut Frame<'_>, area: Rect, d: &RevertDialog, app: &App) {
    let rec = &d.record;
    let max_w = 96.min(area.width);
    let max = max_w.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = vec![
        row_line(
            &[
                part("Now ", Style::new()),
                part(value_text(&rec.value), bold().fg(Color::Green)),
                part(
                    format!(
                        " (v{}, {}, {})",
                        rec.version,
                        one_line(&rec.source),
                        ago(app.now, &rec.updated_at)
                    ),
                    Style::new(),
                ),
            ],
            &[],
            max,
        ),
        plain(
            "Make an earlier value current again, as a new version (history is never rewritten):",
            dim(),
            max,
        ),
        Line::raw(""),
    ];
    match &d.choices {
        None => lines.push(plain("reading the history…", dim(), max)),
        Some(Err(e)) => lines.push(plain(e, error_style(), max)),
        Some(Ok(choices)) if choices.is_empty() => lines.push(plain(
            "This identity has no earlier version in its history.",
            Style::new().fg(Color::Yellow),
            max,
        )),
        Some(Ok(choices)) => {
            for (i, c) in choices.iter().enumerate() {
                let chosen = i == d.choice;
                let (mark, style) = if chosen {
                    ("(•) ", bold().fg(Color::Yellow))
                } else {
                    ("( ) ", Style::new())
                };
                let value = match &c.value {
                    Some(v) => value_text(v),
                    None => "(content purged)".into(),
                };
                let until = c
                    .valid_until
                    .as_deref()
                    .map(month_day_time)
                    .unwrap_or_else(|| "now".into());
                lines.push(row_line(
                    &[
                        part(mark, style),
                        part(format!("v{:<3} ", c.version), style),
                        part(format!("{value:<16}"), Style::new().fg(Color::Green)),
                        part(format!("  {} → {}", month_day_time(&c.at), until), dim()),
                        part(
                            format!("  {}", one_line(c.source.as_deref().unwrap_or(""))),
                            dim(),
                        ),
                    ],
                    &[],
                    max,
                ));
            }
            lines.push(Line::raw(""));
            if let Some(c) = d.chosen() {
                let (effects, refusal) = match &c.effect {
                    Ok(e) => (vec![e.clone()], None),
                    Err(why) => (Vec::new(), Some(why.as_str())),
                };
                lines.extend(outcome_lines(&effects, refusal, max));
            }
        }
    }
    let rect = centered(area, max_w, lines.len() as u16 + 2);
    let title = format!(
        "Revert · {} · {} @ {}",
        rec.subject, rec.predicate, rec.scope
    );
    let inner = frame_box(
        frame,
        rect,
        &title,
        keymap::Context::Revert,
        bold().fg(Color::Yellow),
    );
    frame.render_widget(Paragraph::new(lines), inner);
}
