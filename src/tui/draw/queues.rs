//! The pending queue, the tombstones and the check report.

use super::{
    bold, dim, error_style, good, labelled, pane, part, plain, row_line, selected, wrapped,
};
use crate::tui::app::{App, CheckState, Focus, Tab};
use crate::tui::layout;
use crate::tui::text::{age, ago, one_line, short_time, value_text, wrap};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

fn list_lines(
    app_cursor: usize,
    len: usize,
    height: usize,
    mut line: impl FnMut(usize) -> Line<'static>,
) -> Vec<Line<'static>> {
    layout::window(len, app_cursor, height)
        .map(|i| {
            let l = line(i);
            if i == app_cursor {
                l.style(selected())
            } else {
                l
            }
        })
        .collect()
}

pub fn pending(frame: &mut Frame<'_>, body: Rect, app: &App) {
    let panes = layout::panes(body, Tab::Pending, app.focus);
    let focused = app.dialogs.is_empty();
    if let Some(area) = panes.list {
        let inner = pane(
            frame,
            area,
            &format!("Pending queue · {} open", app.pending.len()),
            focused && app.focus == Focus::List,
        );
        let max = inner.width as usize;
        let lines = if app.pending.is_empty() {
            vec![
                plain("No ambiguous writes wait for a human.", bold(), max),
                plain(
                    "A write that names candidate scopes (--ambiguous global,repo:x) lands here.",
                    dim(),
                    max,
                ),
            ]
        } else {
            list_lines(
                app.pending_cursor,
                app.pending.len(),
                inner.height as usize,
                |i| {
                    let p = &app.pending[i];
                    row_line(
                        &[
                            part(format!("#{} ", p.id), dim()),
                            part(one_line(&p.subject), Style::new()),
                            part(" · ", dim()),
                            part(one_line(&p.predicate), bold()),
                            part(" = ", dim()),
                            part(value_text(&p.value), Style::new().fg(Color::Green)),
                        ],
                        &[part(format!(" {:>3}", age(app.now, &p.created_at)), dim())],
                        max,
                    )
                },
            )
        };
        frame.render_widget(Paragraph::new(lines), inner);
    }
    if let Some(area) = panes.detail {
        let inner = pane(
            frame,
            area,
            "What each choice does",
            focused && app.focus == Focus::Detail,
        );
        let max = inner.width as usize;
        let mut lines = Vec::new();
        if let Some(p) = app.selected_pending() {
            lines.push(row_line(
                &[
                    part(format!("#{} ", p.id), dim()),
                    part(one_line(&p.subject), Style::new()),
                    part(" · ", dim()),
                    part(one_line(&p.predicate), bold()),
                    part(" = ", dim()),
                    part(value_text(&p.value), bold().fg(Color::Green)),
                ],
                &[],
                max,
            ));
            if let Some(raw) = &p.raw {
                lines.push(row_line(
                    &[
                        part("said      ", dim()),
                        part(format!("“{}”", one_line(raw)), Style::new()),
                    ],
                    &[],
                    max,
                ));
            }
            lines.push(row_line(
                &[
                    part("source    ", dim()),
                    part(
                        format!(
                            "{} · causal_seq {} · {}",
                            one_line(&p.source),
                            p.causal_seq,
                            ago(app.now, &p.created_at)
                        ),
                        Style::new(),
                    ),
                ],
                &[],
                max,
            ));
            if let Some(from) = &p.merged_from {
                // A value the v4 spelling merge queued: two spellings of one memory disagreed.
                for (label, text) in [
                    ("merged    ", format!("from {}", one_line(from))),
                    ("          ", "two spellings disagreed: resolving makes this value current, x keeps the current one".to_string()),
                ] {
                    lines.push(row_line(
                        &[part(label, dim()), part(text, Style::new().fg(Color::Yellow))],
                        &[],
                        max,
                    ));
                }
            }
            let names: Vec<String> = p.candidates.iter().map(|c| c.to_string()).collect();
            lines.push(row_line(
                &[
                    part("choices   ", dim()),
                    part(names.join(" | "), Style::new()),
                ],
                &[],
                max,
            ));
            lines.push(Line::raw(""));
            match &app.pending_preview {
                Some(preview) if preview.pending_id == p.id => {
                    for c in &preview.choices {
                        let key = c
                            .key
                            .map(|k| format!("{k} → "))
                            .unwrap_or_else(|| "    ".into());
                        let style =
                            if c.effect.starts_with("rejected") || c.effect.starts_with("stale") {
                                Style::new().fg(Color::Yellow)
                            } else {
                                Style::new()
                            };
                        lines.push(row_line(
                            &[
                                part(key, bold().fg(Color::Cyan)),
                                part(format!("{}: ", c.scope), bold()),
                                part(c.effect.clone(), style),
                            ],
                            &[],
                            max,
                        ));
                    }
                    for (key, kind) in [('g', "global"), ('r', "repo"), ('t', "task")] {
                        if !preview.choices.iter().any(|c| c.key == Some(key)) {
                            lines.push(row_line(
                                &[
                                    part(format!("{key}   "), dim()),
                                    part(format!("no {kind} candidate: does nothing"), dim()),
                                ],
                                &[],
                                max,
                            ));
                        }
                    }
                    lines.push(row_line(
                        &[
                            part("x → ", bold().fg(Color::Cyan)),
                            part("reject: nothing is written", Style::new()),
                        ],
                        &[],
                        max,
                    ));
                }
                _ => lines.push(plain("loading the choices…", dim(), max)),
            }
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

pub fn tombstones(frame: &mut Frame<'_>, body: Rect, app: &App) {
    let panes = layout::panes(body, Tab::Tombstones, app.focus);
    let focused = app.dialogs.is_empty();
    if let Some(area) = panes.list {
        let inner = pane(
            frame,
            area,
            &format!("Tombstones · {}", app.tombstones.len()),
            focused && app.focus == Focus::List,
        );
        let max = inner.width as usize;
        let lines = if app.tombstones.is_empty() {
            vec![plain("Nothing has been deleted.", bold(), max)]
        } else {
            list_lines(
                app.tomb_cursor,
                app.tombstones.len(),
                inner.height as usize,
                |i| {
                    let t = &app.tombstones[i];
                    row_line(
                        &[
                            part(one_line(&t.subject), Style::new()),
                            part(" · ", dim()),
                            part(one_line(&t.predicate), bold()),
                            part(" @ ", dim()),
                            part(t.scope.to_string(), Style::new().fg(Color::Cyan)),
                            part(
                                format!(
                                    "  {}",
                                    one_line(t.reason.as_deref().unwrap_or("no reason given"))
                                ),
                                dim(),
                            ),
                        ],
                        &[part(
                            format!(" v{} {:>3}", t.version, age(app.now, &t.deleted_at)),
                            dim(),
                        )],
                        max,
                    )
                },
            )
        };
        frame.render_widget(Paragraph::new(lines), inner);
    }
    if let Some(area) = panes.detail {
        let inner = pane(
            frame,
            area,
            "Tombstone",
            focused && app.focus == Focus::Detail,
        );
        let max = inner.width as usize;
        let mut lines = Vec::new();
        if let Some(t) = app.selected_tombstone() {
            lines.extend(wrapped(
                &format!("{} · {} @ {}", t.subject, t.predicate, t.scope),
                bold(),
                max,
            ));
            lines.extend(labelled(
                "deleted",
                &format!(
                    "{} ({})",
                    short_time(&t.deleted_at),
                    ago(app.now, &t.deleted_at)
                ),
                Style::new(),
                10,
                max,
            ));
            lines.extend(labelled(
                "reason",
                t.reason.as_deref().unwrap_or("no reason given"),
                Style::new(),
                10,
                max,
            ));
            lines.push(row_line(
                &[
                    part("tombstone ", dim()),
                    part(format!("v{}", t.version), Style::new()),
                ],
                &[],
                max,
            ));
            lines.push(Line::raw(""));
            // The pane's own help is wrapped, never cut: it says what u will and will not do.
            lines.extend(wrapped(
                "Writes to this identity are rejected while it is deleted.",
                Style::new(),
                max,
            ));
            lines.extend(wrapped(
                "u restores it (after a confirm); the purged content does not come back.",
                dim(),
                max,
            ));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

const INVARIANTS: [&str; 6] = [
    "uniqueness",
    "causal monotonicity",
    "deletion monotonicity",
    "current view = history",
    "version contiguity",
    "normalization",
];

pub fn check(frame: &mut Frame<'_>, body: Rect, app: &App) {
    let inner = pane(
        frame,
        body,
        "Check · invariants and health",
        app.dialogs.is_empty(),
    );
    let max = inner.width as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    match &app.check {
        CheckState::NotRun | CheckState::Running => {
            lines.push(plain("Checking every invariant…", bold(), max));
            lines.push(plain(
                "This scans the whole database off the UI thread; keep working meanwhile.",
                dim(),
                max,
            ));
        }
        CheckState::Failed(e) => {
            lines.push(plain("The check could not run:", error_style(), max));
            lines.push(plain(e, Style::new(), max));
        }
        CheckState::Done(report) => {
            let damage = report.integrity.as_ref().filter(|i| !i.ok);
            if let Some(integrity) = damage {
                lines.push(plain("✗ the file is damaged", error_style(), max));
                lines.push(plain(&integrity.sentence(), Style::new(), max));
            } else if report.ok {
                lines.push(plain(
                    "✓ the file is intact and all six invariants hold",
                    good(),
                    max,
                ));
            } else {
                lines.push(plain(
                    &format!("✗ {} violation(s)", report.violations.len()),
                    error_style(),
                    max,
                ));
            }
            lines.push(Line::raw(""));
            for (i, name) in INVARIANTS.iter().enumerate() {
                let n = report
                    .violations
                    .iter()
                    .filter(|v| v.invariant as usize == i + 1)
                    .count();
                let (mark, style) = if n == 0 {
                    ("✓", good())
                } else {
                    ("✗", error_style())
                };
                lines.push(row_line(
                    &[
                        part(format!(" {mark} {} ", i + 1), style),
                        part(name.to_string(), Style::new()),
                    ],
                    &[part(
                        if n == 0 {
                            "holds".to_string()
                        } else {
                            format!("{n} violation(s)")
                        },
                        style,
                    )],
                    max,
                ));
            }
            for v in &report.violations {
                lines.push(plain(
                    &format!("   invariant {} ({}): {}", v.invariant, v.name, v.detail),
                    error_style(),
                    max,
                ));
            }
            lines.push(Line::raw(""));
            lines.push(plain("Health", bold(), max));
            for e in &report.health {
                let sentence = format!("! {}", e.sentence());
                for l in wrap(&sentence, max.saturating_sub(3)) {
                    lines.push(plain(&format!("   {l}"), bold().fg(Color::Yellow), max));
                }
            }
            for (k, v) in &report.metrics {
                let text = match v {
                    serde_json::Value::Null => "none".to_string(),
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Array(a) if a.is_empty() => "none".to_string(),
                    other => other.to_string(),
                };
                lines.push(row_line(
                    &[
                        part(format!("   {k:<22}"), dim()),
                        part(one_line(&text), Style::new()),
                    ],
                    &[],
                    max,
                ));
            }
        }
    }
    let scroll = app.check_scroll.min(lines.len().saturating_sub(1));
    let lines: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
