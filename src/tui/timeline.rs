//! The history pane of the current view: the selected record's value, words and timeline, and
//! which of its scopes wins. It owns the timeline's event cursor (`j`/`k` when the pane has the
//! focus, `Enter` opens the event whole in `dialogs::event`) and draws itself; the scroll and
//! clicks map through the same lines drawing makes, so they match what is on screen.

use super::app::{Action, Detail, Dialog, Focus, Tab};
use super::clipboard;
use super::dialogs::EventDialog;
use super::draw::{bold, dim, good, labelled, pane, part, plain, row_line, selected, Part};
use super::incident::TimelineMark;
use super::layout;
use super::list::Motion;
use super::tabs::{Shell, View};
use super::text::{ago, month_day_time, one_line, value_text, wrap};
use crate::model::{HistoryEvent, Identity};
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use std::ops::Range;

/// The history pane's state: what is loaded for the selected record and where its cursor is.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub detail: Option<Detail>,
    /// Lines scrolled off the pane's top.
    pub scroll: usize,
    /// The selected event of the timeline …
    pub cursor: usize,
    /// … and the identity of that timeline (a refresh of the same one keeps the event).
    pub shown: Option<Identity>,
    /// A version to highlight (the one an agent read).
    pub mark: Option<TimelineMark>,
}

/// The history pane's rect inside its border on a terminal of `size`.
fn pane_inner(size: (u16, u16)) -> Option<Rect> {
    let s = layout::screen(Rect::new(0, 0, size.0, size.1));
    let area = layout::panes(s.body, Tab::Memories, Focus::Detail).detail?;
    Some(layout::inner(area))
}

impl Timeline {
    /// A record's history loaded: the same timeline keeps its event, a new one starts on the
    /// version an agent read, else the first event.
    pub fn show(&mut self, detail: Detail, size: (u16, u16), now: DateTime<Utc>) {
        let id = detail.identity.clone();
        let same = self.shown.as_ref() == Some(&id);
        // A highlighted version belongs to its identity's timeline only.
        if self.mark.as_ref().is_some_and(|m| m.identity != id) {
            self.mark = None;
        }
        self.detail = Some(detail);
        if same && self.mark.is_none() {
            self.follow(size, now);
        } else {
            self.reset(size, now);
        }
        self.shown = Some(id);
    }

    /// The pane's geometry: each event's lines, all lines, the pane's height.
    fn geometry(
        &self,
        size: (u16, u16),
        now: DateTime<Utc>,
    ) -> Option<(Vec<Range<usize>>, usize, usize)> {
        let d = self.detail.as_ref()?;
        let inner = pane_inner(size)?;
        let (lines, events) = self.lines(d, now, true, inner.width as usize);
        Some((events, lines.len(), (inner.height as usize).max(1)))
    }

    /// Scrolls so the selected event is on screen: the top for the first event (the value
    /// and words above it), as far down as it goes for the last (the scopes below it), else
    /// as little as it takes.
    pub fn follow(&mut self, size: (u16, u16), now: DateTime<Utc>) {
        let Some((events, total, height)) = self.geometry(size, now) else {
            return;
        };
        let last = events.len().saturating_sub(1);
        self.cursor = self.cursor.min(last);
        let Some(r) = events.get(self.cursor) else {
            return;
        };
        let wanted = if self.cursor == 0 {
            0
        } else if self.cursor == last {
            total
        } else {
            self.scroll
        };
        let lo = r.end.saturating_sub(height);
        let hi = r.start.max(lo);
        self.scroll = wanted.clamp(lo, hi).min(total.saturating_sub(height));
    }

    /// A new timeline on screen: the cursor on the version an agent read, else the first.
    fn reset(&mut self, size: (u16, u16), now: DateTime<Utc>) {
        let marked = match (&self.mark, &self.detail) {
            (Some(m), Some(d)) if m.identity == d.identity => d
                .history
                .iter()
                .position(|e| e.event == "set" && e.version == Some(m.version)),
            _ => None,
        };
        self.cursor = marked.unwrap_or(0);
        self.scroll = 0;
        self.follow(size, now);
    }

    /// Moves the event cursor; `page` events make a page.
    pub fn step(&mut self, m: Motion, page: usize, size: (u16, u16), now: DateTime<Utc>) {
        let len = self.detail.as_ref().map_or(0, |d| d.history.len());
        super::rows::step(&mut self.cursor, len, m, page);
        self.follow(size, now);
    }

    /// A click on line `row` of the pane (counted from its top on screen) selects the event
    /// drawn there.
    pub fn click(&mut self, row: usize, size: (u16, u16), now: DateTime<Utc>) {
        let Some((events, _, _)) = self.geometry(size, now) else {
            return;
        };
        let line = self.scroll + row;
        if let Some(i) = events.iter().position(|r| r.contains(&line)) {
            self.cursor = i;
            self.follow(size, now);
        }
    }

    /// `Enter`: the selected event whole, in the event popup.
    pub fn open(&self, shell: &mut Shell<'_>) -> Action {
        let event = self
            .detail
            .as_ref()
            .and_then(|d| Some((d.identity.clone(), d.history.get(self.cursor)?.clone())));
        match event {
            Some((identity, event)) => shell.open(Dialog::Event(EventDialog {
                identity,
                event,
                scroll: 0,
            })),
            None => shell.info("select a record: its timeline's events open here"),
        }
        Action::None
    }

    /// The selected event's value, as `c` in the history pane copies it.
    pub fn value(&self) -> Option<String> {
        let d = self.detail.as_ref()?;
        let e = d.history.get(self.cursor)?;
        e.value.as_ref().map(clipboard::value_text)
    }

    /// Draws the pane in `area`; `hint` is what it says without a record.
    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect, view: &View, hint: &str) {
        let focused = view.focused && view.focus == Focus::Detail;
        let title = match &self.detail {
            Some(d) => format!("History · {}", d.identity),
            None => "History".to_string(),
        };
        let inner = pane(frame, area, &title, focused);
        if inner.width == 0 || inner.height == 0 {
            return;
        }
        let max = inner.width as usize;
        let lines = match &self.detail {
            Some(d) => self.lines(d, view.now, view.focus == Focus::Detail, max).0,
            None => vec![plain(hint, dim(), max)],
        };
        let scroll = self.scroll.min(lines.len().saturating_sub(1));
        let visible: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
        frame.render_widget(Paragraph::new(visible), inner);
    }
}

/// Lines of the user's words the history pane shows before it points to the event popup.
const SAID_LINES: usize = 3;

fn label(name: &str) -> Part<'static> {
    part(format!("{name:<9}"), dim())
}

impl Timeline {
    /// The pane's lines at `max` columns, and the lines each timeline event takes (the
    /// event cursor and mouse clicks map through them, so they match what is drawn).
    /// `cursor` when the selected event is shown (the pane has the focus).
    fn lines(
        &self,
        d: &Detail,
        now: DateTime<Utc>,
        cursor: bool,
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
        let mut when = format!("written {}", ago(now, &r.updated_at));
        if r.confirm_count > 0 {
            if let Some(c) = &r.confirmed_at {
                when.push_str(&format!(
                    " · confirmed {}× (last {})",
                    r.confirm_count,
                    ago(now, c)
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
        let mark = self.mark.as_ref().filter(|m| m.identity == d.identity);
        let cursor = cursor.then_some(self.cursor);
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
