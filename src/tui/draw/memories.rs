//! The current view (grouped by scope, foldable, filterable) and the history pane beside it.

use super::{bold, dim, good, labelled, pane, part, plain, row_line, selected, Part};
use crate::model::HistoryEvent;
use crate::tui::app::{App, Detail, Focus, Tab};
use crate::tui::layout;
use crate::tui::list::{ListItem, ListRow};
use crate::tui::text::{age, ago, month_day_time, one_line, plural, thousands, value_text, wrap};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use std::ops::Range;

pub fn draw(frame: &mut Frame<'_>, body: Rect, app: &App) {
    if app.list.is_empty() && !app.filter.active() {
        // An empty database gets the whole body to explain itself.
        let inner = pane(frame, body, "Current view · empty", true);
        empty(frame, inner, app);
        return;
    }
    let panes = layout::panes(body, Tab::Memories, app.focus);
    if let Some(area) = panes.list {
        list(frame, area, app);
    }
    if let Some(area) = panes.detail {
        detail(frame, area, app);
    }
}

fn list_title(app: &App) -> String {
    let f = &app.filter;
    if f.active() {
        let n = f.results.as_ref().map(|r| r.matches()).unwrap_or(0);
        return format!(
            "Current view · filter “{}” · {}",
            one_line(&f.input),
            plural(n as i64, "match", "matches")
        );
    }
    match &app.counts {
        Some(c) => format!(
            "Current view · {} identities in {} scopes",
            thousands(c.memories),
            thousands(c.scopes)
        ),
        None => "Current view".to_string(),
    }
}

fn list(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let focused = app.focus == Focus::List && app.dialogs.is_empty();
    let inner = pane(frame, area, &list_title(app), focused);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    if app.list.is_empty() {
        empty(frame, inner, app);
        return;
    }
    let max = inner.width as usize;
    let height = inner.height as usize;
    let mut lines = Vec::with_capacity(height);
    for (i, row) in app.list.visible(height).iter().enumerate() {
        let is_cursor = app.list.offset + i == app.list.cursor;
        let mut line = list_row(row, app, max);
        if is_cursor {
            line = line.style(selected());
        }
        lines.push(line);
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

fn list_row(row: &ListRow, app: &App, max: usize) -> Line<'static> {
    match &row.item {
        ListItem::Header { scope } => {
            let folded = app.folded.contains(scope);
            let count = if app.filter.active() {
                app.filter.results.as_ref().and_then(|r| r.count_in(scope))
            } else {
                app.scope_counts.get(scope).copied()
            };
            let marker = if folded { "▸ " } else { "▾ " };
            let mut left = vec![
                part(marker, dim()),
                part(one_line(scope), bold().fg(Color::Cyan)),
            ];
            if let Some(n) = count {
                left.push(part(format!("  {}", thousands(n)), dim()));
            }
            if folded {
                left.push(part("  (folded: Enter or l unfolds)", dim()));
            }
            row_line(&left, &[], max)
        }
        ListItem::Record {
            record, highlight, ..
        } => {
            let value = value_text(&record.value);
            let left = [
                part("  ", Style::new()),
                Part {
                    text: one_line(&record.subject),
                    style: Style::new(),
                    marks: &highlight.subject,
                },
                part(" · ", dim()),
                Part {
                    text: one_line(&record.predicate),
                    style: bold(),
                    marks: &highlight.predicate,
                },
                part(" = ", dim()),
                Part {
                    text: value,
                    style: Style::new().fg(Color::Green),
                    marks: &highlight.value,
                },
            ];
            let right = [
                part(format!(" v{}", record.version), dim()),
                part(format!(" {:>3}", age(app.now, &record.updated_at)), dim()),
            ];
            row_line(&left, &right, max)
        }
    }
}

/// What an empty list says: an empty database explains memscope; a filter says it found nothing.
fn empty(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let max = area.width as usize;
    let f = &app.filter;
    let mut lines: Vec<Line<'static>> = Vec::new();
    if f.active() {
        let done = f
            .results
            .as_ref()
            .is_some_and(|r| r.generation == f.generation && r.done);
        lines.push(plain(
            &if done {
                format!("No record matches “{}”.", f.input)
            } else {
                format!("Searching for “{}”…", f.input)
            },
            bold(),
            max,
        ));
        lines.push(plain("Esc clears the filter.", dim(), max));
    } else {
        let text = [
            (
                "memscope: the long-term memory of your coding agents",
                bold(),
            ),
            ("", Style::new()),
            ("This database holds no live memories yet.", Style::new()),
            ("", Style::new()),
            (
                "Agents write what they learn through the one write path:",
                Style::new(),
            ),
            (
                "  memscope write --subject user:42 --predicate package_manager \\",
                good(),
            ),
            (
                "      --value pnpm --scope global --source thread:17/message:86",
                good(),
            ),
            (
                "  memscope apply writes.jsonl    (JSON Lines, one write each)",
                good(),
            ),
            ("", Style::new()),
            (
                "Their writes appear here live, grouped by scope:",
                Style::new(),
            ),
            ("global, then each repo:…, then each task:…", Style::new()),
            ("", Style::new()),
            ("To look around with sample data:  memscope demo", bold()),
            ("? shows every key · q quits", dim()),
        ];
        for (t, s) in text {
            lines.push(plain(t, s, max));
        }
        let (p, t) = (app.tabs.pending.rows.len(), app.tabs.tombstones.rows.len());
        if p + t > 0 {
            lines.push(plain("", Style::new(), max));
            lines.push(plain(
                &format!("{p} pending item(s) wait in tab 2; {t} tombstone(s) in tab 3."),
                bold(),
                max,
            ));
        }
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn detail(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let focused = app.focus == Focus::Detail && app.dialogs.is_empty();
    let title = match &app.detail {
        Some(d) => format!("History · {}", d.identity),
        None => "History".to_string(),
    };
    let inner = pane(frame, area, &title, focused);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let max = inner.width as usize;
    let lines = match &app.detail {
        Some(d) => history_lines(d, app, max).0,
        None => vec![plain(
            match app.list.selected() {
                Some(ListRow {
                    item: ListItem::Header { .. },
                    ..
                }) => "A scope group: Enter folds or unfolds it.",
                _ => "Select a record to see its history.",
            },
            dim(),
            max,
        )],
    };
    let scroll = app.detail_scroll.min(lines.len().saturating_sub(1));
    let visible: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Paragraph::new(visible), inner);
}

/// Lines of the user's words the history pane shows before it points to the event popup.
const SAID_LINES: usize = 3;

fn label(name: &str) -> Part<'static> {
    part(format!("{name:<9}"), dim())
}

/// The history pane's lines at `max` columns, and the lines each timeline event takes (the
/// event cursor and mouse clicks map through them, so they match what is drawn).
pub(crate) fn history_lines(
    d: &Detail,
    app: &App,
    max: usize,
) -> (Vec<Line<'static>>, Vec<Range<usize>>) {
    let r = &d.record;
    let mut lines = Vec::new();
    let mut events = Vec::with_capacity(d.history.len());
    lines.push(row_line(
        &[
            label("value"),
            part(value_text(&r.value), bold().fg(Color::Green)),
        ],
        &[],
        max,
    ));
    lines.push(row_line(
        &[
            label("version"),
            part(
                format!("v{} · causal_seq {}", r.version, r.causal_seq),
                Style::new(),
            ),
        ],
        &[],
        max,
    ));
    lines.extend(labelled("source", &r.source, Style::new(), 9, max));
    let mut when = format!("written {}", ago(app.now, &r.updated_at));
    if r.confirm_count > 0 {
        if let Some(c) = &r.confirmed_at {
            when.push_str(&format!(
                " · confirmed {}× (last {})",
                r.confirm_count,
                ago(app.now, c)
            ));
        }
    }
    lines.push(row_line(
        &[label("when"), part(when, Style::new())],
        &[],
        max,
    ));
    if let Some(raw) = &r.raw {
        // A few lines of the words here; the event popup (Enter on an event) has them all.
        let mut said = labelled("said", &format!("“{raw}”"), Style::new(), 9, max);
        if said.len() > SAID_LINES {
            said.truncate(SAID_LINES);
            said.push(plain(
                &format!("{:9}… the rest: Tab, select the event, Enter", ""),
                dim(),
                max,
            ));
        }
        lines.extend(said);
    }
    lines.push(Line::raw(""));
    lines.push(plain("Timeline, oldest first", bold(), max));
    let mark = app.mark.as_ref().filter(|m| m.identity == d.identity);
    let cursor = (app.focus == Focus::Detail).then_some(app.event_cursor);
    for (i, e) in d.history.iter().enumerate() {
        let start = lines.len();
        let mut line = event_line(e, max);
        if cursor == Some(i) {
            line = line.style(selected().add_modifier(Modifier::BOLD));
        }
        match mark {
            // The version an agent read: highlighted, with who read it and how long it held.
            Some(m) if e.event == "set" && e.version == Some(m.version) => {
                lines.push(line.style(Style::new().add_modifier(Modifier::REVERSED)));
                let held = match &e.valid_until {
                    Some(t) => format!("current until {}", month_day_time(t)),
                    None => "still current".into(),
                };
                let note = format!("↑ v{} {} · {held}", m.version, m.note);
                for l in wrap(&note, max.saturating_sub(6)) {
                    lines.push(Line::styled(
                        format!("      {l}"),
                        Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
                    ));
                }
            }
            _ => lines.push(line),
        }
        events.push(start..lines.len());
    }
    lines.push(Line::raw(""));
    let context = match &r.scope {
        crate::model::Scope::Global => "with no repo or task".to_string(),
        s => format!("in {s}"),
    };
    lines.push(plain(&format!("Scopes · what wins {context}"), bold(), max));
    let considered = d.resolution.as_ref().map(|r| &r.considered);
    for o in &d.others {
        let scope = o.scope.to_string();
        let state = considered
            .and_then(|c| c.iter().find(|c| c.scope == scope))
            .map(|c| c.state.as_str())
            .unwrap_or("other context");
        let (mark, style) = match state {
            "wins" => ("★ ", good().add_modifier(Modifier::BOLD)),
            "shadowed" => ("  ", Style::new()),
            _ => ("  ", dim()),
        };
        let this = if o.scope == r.scope { " (this)" } else { "" };
        let state_text = match state {
            "wins" => "wins here".to_string(),
            "shadowed" => "shadowed".to_string(),
            s => s.to_string(),
        };
        lines.push(row_line(
            &[
                part(mark, style),
                part(format!("{scope}{this}"), style),
                part("  ", Style::new()),
                part(value_text(&o.value), Style::new().fg(Color::Green)),
                part(format!("  v{}", o.version), dim()),
            ],
            &[part(format!(" {state_text}"), style)],
            max,
        ));
    }
    (lines, events)
}

/// A field of an event's detail as text (`?` when missing).
fn text_of(detail: Option<&serde_json::Value>, key: &str) -> String {
    match detail.and_then(|d| d.get(key)) {
        Some(serde_json::Value::String(s)) => one_line(s),
        Some(v) => v.to_string(),
        None => "?".into(),
    }
}

fn event_line(e: &HistoryEvent, max: usize) -> Line<'static> {
    let detail = e.detail.as_ref();
    let text = match e.event.as_str() {
        "deleted" => format!(
            "content purged ({} versions)",
            detail
                .and_then(|d| d.get("purged_versions"))
                .and_then(|v| v.as_i64())
                .unwrap_or(0)
        ),
        "pending_resolved" => format!(
            "pending #{} → {}",
            detail
                .and_then(|d| d.get("pending_id"))
                .map(|v| v.to_string())
                .unwrap_or_default(),
            detail
                .and_then(|d| d.get("outcome"))
                .and_then(|v| v.as_str())
                .unwrap_or("?")
        ),
        "restored" => "tombstone lifted".to_string(),
        // The incident repairs: where a value went and what came back.
        "rescoped" => format!(
            "moved here from {} v{}",
            text_of(detail, "from"),
            text_of(detail, "from_version")
        ),
        "reverted" => {
            let mut t = format!("to the value of v{}", text_of(detail, "reverted_to"));
            if let Some(to) = detail.and_then(|d| d.get("rescoped_to")) {
                t.push_str(&format!(
                    " (its v{} moved to {})",
                    text_of(detail, "moved_version"),
                    to.as_str().unwrap_or("?")
                ));
            }
            t
        }
        "removed" => match detail.and_then(|d| d.get("rescoped_to")) {
            Some(to) => format!(
                "left the current view (moved to {})",
                to.as_str().unwrap_or("?")
            ),
            None => "left the current view".to_string(),
        },
        _ => match &e.value {
            Some(v) => value_text(v),
            None => "(no content kept)".to_string(),
        },
    };
    let style = match e.event.as_str() {
        "set" => Style::new().fg(Color::Green),
        "stale" | "rejected" => Style::new().fg(Color::Yellow),
        "deleted" => Style::new().fg(Color::Red),
        _ => Style::new(),
    };
    let version = e.version.map(|v| format!("v{v}")).unwrap_or_default();
    let seq = e.causal_seq.map(|s| format!("seq {s}")).unwrap_or_default();
    row_line(
        &[
            part(format!("{} ", month_day_time(&e.at)), dim()),
            part(
                format!("{:<10}", e.event),
                style.add_modifier(Modifier::BOLD),
            ),
            part(format!("{version:<4}"), dim()),
            part(text, style),
            part(format!("  {seq}"), dim()),
            part(
                format!("  {}", one_line(e.source.as_deref().unwrap_or(""))),
                dim(),
            ),
        ],
        &[],
        max,
    )
}
