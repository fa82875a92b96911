//! The Reads tab (what agents were told, newest first) and a read explained as of its time.

use super::{bold, dim, good, pane, part, plain, row_line, selected, Part};
use crate::model::{Considered, ReadRecord, Resolution};
use crate::tui::app::{App, Focus, Tab};
use crate::tui::incident::{read_context, READS_LIMIT};
use crate::tui::layout;
use crate::tui::text::{
    age, ago, fit, month_day_time, one_line, plural, short_time, value_text, width,
};
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub fn draw(frame: &mut Frame<'_>, body: Rect, app: &App) {
    let panes = layout::panes(body, Tab::Reads, app.focus);
    let focused = app.dialogs.is_empty();
    if let Some(area) = panes.list {
        list(frame, area, app, focused && app.focus == Focus::List);
    }
    if let Some(area) = panes.detail {
        let inner = pane(
            frame,
            area,
            "The read",
            focused && app.focus == Focus::Detail,
        );
        let max = inner.width as usize;
        let lines = match app.selected_read() {
            Some(r) => detail_lines(r, app, max),
            None => Vec::new(),
        };
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

fn title(app: &App) -> String {
    let r = &app.reads;
    let mut t = format!("Reads · newest first · {}", r.since.label());
    if r.active() {
        t.push_str(&format!(" · “{}”", one_line(r.input.trim())));
    }
    if r.shown.is_some() {
        t.push_str(&format!(
            " · {}",
            plural(r.rows.len() as i64, "read", "reads")
        ));
        if r.rows.len() >= READS_LIMIT {
            t.push_str(" (the newest; / or s narrows)");
        }
    }
    t
}

/// The text of a read's result: `global v2`, or `nothing`.
pub(crate) fn got(r: &ReadRecord) -> String {
    match (&r.scope, r.version) {
        (Some(s), Some(v)) => format!("{s} v{v}"),
        (Some(s), None) => s.clone(),
        _ => "nothing".into(),
    }
}

fn list(frame: &mut Frame<'_>, area: Rect, app: &App, focused: bool) {
    let inner = pane(frame, area, &title(app), focused);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let max = inner.width as usize;
    let r = &app.reads;
    if r.rows.is_empty() {
        let lines = if r.shown.is_none() {
            vec![plain("Reading the read log…", dim(), max)]
        } else if r.active() || r.since.start(app.now).is_some() {
            vec![
                plain("No logged read matches.", bold(), max),
                plain("Esc clears the filter; s widens the window.", dim(), max),
            ]
        } else {
            vec![
                plain("No agent has logged a read yet.", bold(), max),
                plain(
                    "Agents log what they were told with `memscope resolve --log --agent NAME`:",
                    dim(),
                    max,
                ),
                plain(
                    "  identity and version, never the value (a delete still destroys it).",
                    dim(),
                    max,
                ),
            ]
        };
        frame.render_widget(Paragraph::new(lines), inner);
        return;
    }
    let per_read = layout::read_lines(inner.height as usize);
    let height = inner.height as usize / per_read;
    let shown = r.rows.window(height);
    let start = shown.start;
    let rows = &r.rows[shown];
    // Columns as wide as their widest visible cell, within limits.
    let col = |f: &dyn Fn(&ReadRecord) -> String, cap: usize| {
        rows.iter()
            .map(|x| width(&f(x)))
            .max()
            .unwrap_or(0)
            .min(cap)
    };
    let agent_w = col(&|x| x.agent.clone().unwrap_or_default(), 14);
    let what_w = col(&|x| format!("{} · {}", x.subject, x.predicate), 34);
    let ctx_w = col(&read_context, 26);
    let got_w = col(&got, 26);
    // What the read got matters most: on a narrow screen the context, then the subject and
    // predicate, then the agent give up columns first.
    let mut widths = [agent_w, what_w, ctx_w, got_w];
    let mins = [6, 14, 10, got_w];
    let mut over = (6 + 2 + 2 + 4 + widths.iter().sum::<usize>()).saturating_sub(max);
    for i in [2, 1, 0] {
        let cut = over.min(widths[i].saturating_sub(mins[i]));
        widths[i] -= cut;
        over -= cut;
    }
    let mut lines: Vec<Line<'static>> = Vec::new();
    for (i, x) in rows.iter().enumerate() {
        let style = if start + i == r.rows.cursor() {
            selected()
        } else {
            Style::new()
        };
        for line in read_row(x, app, max, widths, per_read) {
            lines.push(line.style(style));
        }
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// A read on `per_read` lines (columns `widths`: agent, what, context, result): its note and
/// what it shadowed go on the second line, or after the result on a single line.
fn read_row(
    x: &ReadRecord,
    app: &App,
    max: usize,
    widths: [usize; 4],
    per_read: usize,
) -> Vec<Line<'static>> {
    let [agent_w, what_w, ctx_w, got_w] = widths;
    let agent = x.agent.as_deref().unwrap_or("-");
    let got_style = if x.scope.is_some() {
        good()
    } else {
        Style::new().fg(Color::Yellow)
    };
    let mut first = vec![
        part(format!("{:>4}  ", age(app.now, &x.at)), dim()),
        part(fit(&one_line(agent), agent_w), Style::new().fg(Color::Cyan)),
        part("  ", Style::new()),
        part(
            fit(
                &one_line(&format!("{} · {}", x.subject, x.predicate)),
                what_w,
            ),
            bold(),
        ),
        part("  ", Style::new()),
        part(fit(&one_line(&read_context(x)), ctx_w), Style::new()),
        part("  → ", dim()),
        part(fit(&got(x), got_w), got_style),
    ];
    let mut more = Vec::new();
    if let Some(n) = &x.note {
        more.push(part(format!("“{}”  ", one_line(n)), dim()));
    }
    if !x.shadowed.is_empty() {
        more.push(part(
            format!("shadowed {}", one_line(&x.shadowed.join(", "))),
            Style::new().fg(Color::Yellow),
        ));
    }
    if per_read == 2 {
        more.insert(0, part("      ", Style::new()));
        vec![row_line(&first, &[], max), row_line(&more, &[], max)]
    } else {
        first.push(part("  ", Style::new()));
        first.extend(more);
        vec![row_line(&first, &[], max)]
    }
}

fn label(name: &str) -> Part<'static> {
    part(format!("{name:<10}"), dim())
}

fn detail_lines(r: &ReadRecord, app: &App, max: usize) -> Vec<Line<'static>> {
    let mut lines = vec![row_line(
        &[
            label("read"),
            part(
                format!(
                    "#{} · {} UTC ({})",
                    r.id,
                    short_time(&r.at),
                    ago(app.now, &r.at)
                ),
                Style::new(),
            ),
        ],
        &[],
        max,
    )];
    lines.push(row_line(
        &[
            label("agent"),
            part(
                one_line(r.agent.as_deref().unwrap_or("(not named)")),
                Style::new().fg(Color::Cyan),
            ),
        ],
        &[],
        max,
    ));
    lines.push(row_line(
        &[
            label("asked"),
            part(
                one_line(&format!("{} · {}", r.subject, r.predicate)),
                bold(),
            ),
            part(format!(" in {}", read_context(r)), Style::new()),
        ],
        &[],
        max,
    ));
    let (got_text, got_style) = match r.scope {
        Some(_) => (got(r), good().add_modifier(Modifier::BOLD)),
        None => (
            "nothing: no scope of this context held a memory".to_string(),
            Style::new().fg(Color::Yellow),
        ),
    };
    lines.push(row_line(
        &[label("got"), part(got_text, got_style)],
        &[],
        max,
    ));
    lines.push(row_line(
        &[
            label("shadowed"),
            if r.shadowed.is_empty() {
                part("nothing", dim())
            } else {
                part(
                    one_line(&r.shadowed.join(", ")),
                    Style::new().fg(Color::Yellow),
                )
            },
        ],
        &[],
        max,
    ));
    if let Some(n) = &r.note {
        lines.push(row_line(
            &[
                label("note"),
                part(format!("“{}”", one_line(n)), Style::new()),
            ],
            &[],
            max,
        ));
    }
    lines.push(Line::raw(""));
    let key = |k: &str| part(format!("{k:<6}"), bold().fg(Color::Cyan));
    lines.push(row_line(
        &[
            key("Enter"),
            part(
                "the explain chain as it stood then: what won, what it shadowed",
                Style::new(),
            ),
        ],
        &[],
        max,
    ));
    if let (Some(scope), Some(v)) = (&r.scope, r.version) {
        lines.push(row_line(
            &[
                key("g"),
                part(
                    format!("the history of {scope}, v{v} highlighted"),
                    Style::new(),
                ),
            ],
            &[],
            max,
        ));
    }
    lines.push(plain(
        "The read log keeps identity and version, never the value: history holds the value.",
        dim(),
        max,
    ));
    lines
}

/// One scope of a resolution chain: its mark, scope, value, version, source and time.
pub(crate) fn considered_line(c: &Considered, now: DateTime<Utc>, max: usize) -> Line<'static> {
    let (mark, style) = if c.state.starts_with("wins") {
        ("★ wins     ", good().add_modifier(Modifier::BOLD))
    } else if c.state.starts_with("shadowed") {
        ("  shadowed ", Style::new().fg(Color::Yellow))
    } else if c.state == "deleted" {
        ("  deleted  ", Style::new().fg(Color::Red))
    } else {
        ("  absent   ", dim())
    };
    let mut parts = vec![part(mark, style), part(format!("{:<24}", c.scope), bold())];
    match &c.value {
        Some(v) => parts.push(part(value_text(v), Style::new().fg(Color::Green))),
        // Purged since: it existed, its content is gone.
        None if c.found => parts.push(part(
            c.state
                .split_once(' ')
                .map(|(_, rest)| rest.to_string())
                .unwrap_or_default(),
            Style::new().fg(Color::Red),
        )),
        None => {}
    }
    if let Some(v) = c.version {
        parts.push(part(format!("  v{v}"), dim()));
    }
    if let Some(s) = &c.source {
        parts.push(part(format!("  {}", one_line(s)), dim()));
    }
    if let Some(t) = &c.updated_at {
        parts.push(part(
            format!("  since {} ({})", month_day_time(t), ago(now, t)),
            dim(),
        ));
    }
    row_line(&parts, &[], max)
}

pub(crate) fn winner(r: &Resolution) -> String {
    match (&r.value, &r.scope, r.version) {
        (Some(v), Some(s), Some(n)) => format!("{} from {s} v{n}", value_text(v)),
        (None, Some(s), _) => format!("a value from {s} whose content was destroyed since"),
        _ => "nothing".into(),
    }
}
