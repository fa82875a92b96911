//! The history pane of the current view: the selected record's value, words and timeline, and
//! which of its scopes wins. It owns the timeline's event cursor (`j`/`k` when the pane has the
//! focus, `Enter` opens the event whole in `dialogs::event`) and draws itself; the scroll and
//! clicks map through the same lines drawing makes, so they match what is on screen.

use super::app::{Action, Detail, EventWindow, Focus, Tab};
use super::draw::{
    bold, dim, error_style, good, labelled, pane, part, plain, row_line, selected, wrapped, Part,
};
use super::incident::TimelineMark;
use super::layout;
use super::rows::Motion;
use super::tabs::{Shell, View};
use super::text::{
    ago, fit, listed_value, month_day_time, one_line, plural, preview_size, thousands, width, wrap,
};
use crate::model::{HistoryEvent, Identity, MemoryRecord, Scope};
use crate::store::{HistoryFrom, UiStore};
use anyhow::Result;
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use std::ops::Range;

/// Events read at a time: more than any page of the pane.
const CHUNK: usize = 120;
/// The most events kept in memory: the window moves, the rest stays in the store.
const KEEP: usize = 3 * CHUNK;

/// The history pane's state: what is loaded for the selected record and where its cursor is.
/// A timeline may hold 50,000 events: a window of them is loaded around the cursor and moves
/// with it by key (`Store::history_page`), never the whole history.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub detail: Option<Detail>,
    /// Lines scrolled off the pane's top.
    pub scroll: usize,
    /// The selected event, counted in the whole timeline …
    pub cursor: usize,
    /// … and its id in the log, so a refresh of the same timeline reopens on it.
    cursor_event: Option<i64>,
    /// The identity of the timeline shown.
    pub shown: Option<Identity>,
    /// A version to highlight (the one an agent read).
    pub mark: Option<TimelineMark>,
    /// The selected record whose history could not be loaded, and why: the pane says so
    /// rather than show another record's.
    pub failed: Option<(Identity, String)>,
    /// How many times a record's history pane was read from the store — a few queries, each a
    /// round trip to a PostgreSQL server: a held `j` reads it once, where it stops (README,
    /// "The terminal UI").
    pub loads: u64,
}

/// The history pane's rect inside its border on a terminal of `size`.
fn pane_inner(size: (u16, u16)) -> Option<Rect> {
    let s = layout::screen(Rect::new(0, 0, size.0, size.1));
    let area = layout::panes(s.body, Tab::Memories, Focus::Detail).detail?;
    Some(layout::inner(area))
}

/// Where the screen is: the terminal's size and the clock's reading.
#[derive(Debug, Clone, Copy)]
pub struct Screen {
    pub size: (u16, u16),
    pub now: DateTime<Utc>,
}

impl Timeline {
    /// Loads the history pane of `record`: its scopes, how it resolves in its own place, and
    /// a window of its timeline — around the event selected before when the same timeline is
    /// shown again, around the version an agent read when one is marked, else from the start.
    pub fn load(
        &mut self,
        store: &dyn UiStore,
        record: MemoryRecord,
        screen: Screen,
    ) -> Result<()> {
        self.loads += 1;
        let id = record.identity();
        let same = self.shown.as_ref() == Some(&id);
        // A highlighted version belongs to its identity's timeline only.
        if self.mark.as_ref().is_some_and(|m| m.identity != id) {
            self.mark = None;
        }
        let from = match (&self.mark, self.cursor_event) {
            (Some(m), _) => HistoryFrom::Version(m.version),
            (None, Some(at)) if same => HistoryFrom::Around(at),
            _ => HistoryFrom::Start,
        };
        let total = store.history_count(&id, None)?;
        let history = store.history_page(&id, from, CHUNK)?;
        let first = match history.first() {
            Some(e) if from != HistoryFrom::Start => store.history_count(&id, Some(e.id))?,
            _ => 0,
        };
        let others = store.live_scopes_of(&id.subject, &id.predicate)?;
        let (repo, task) = match &id.scope {
            Scope::Repo(r) => (Some(r.as_str()), None),
            Scope::Task(t) => (None, Some(t.as_str())),
            Scope::Global => (None, None),
        };
        let resolution = store
            .resolve_preview(&id.subject, &id.predicate, repo, task)
            .ok();
        let at = |wanted: &dyn Fn(&HistoryEvent) -> bool| {
            history.iter().position(wanted).map(|i| first + i)
        };
        let cursor = match (&self.mark, self.cursor_event) {
            (Some(m), _) => at(&|e| e.event == "set" && e.version == Some(m.version)),
            (None, Some(ev)) if same => at(&|e| e.id == ev),
            _ => None,
        };
        let keep_scroll = same && self.mark.is_none();
        self.detail = Some(Detail {
            record,
            events: EventWindow {
                history,
                first,
                total,
            },
            others,
            resolution,
        });
        self.shown = Some(id);
        self.cursor = cursor.unwrap_or(if keep_scroll { self.cursor } else { first });
        if !keep_scroll {
            self.scroll = 0;
        }
        self.follow(screen);
        Ok(())
    }

    /// The pane's geometry: each loaded event's lines, all lines, the pane's height.
    fn geometry(&self, screen: Screen) -> Option<(Vec<Range<usize>>, usize, usize)> {
        let d = self.detail.as_ref()?;
        let inner = pane_inner(screen.size)?;
        let (lines, events) = self.lines(d, screen.now, true, inner.width as usize);
        Some((events, lines.len(), (inner.height as usize).max(1)))
    }

    /// Scrolls so the selected event is on screen: the top for the first event (the value
    /// and words above it), as far down as it goes for the last (the scopes below it), else
    /// as little as it takes.
    pub fn follow(&mut self, screen: Screen) {
        let Some((events, lines, height)) = self.geometry(screen) else {
            return;
        };
        let Some(d) = self.detail.as_ref() else {
            return;
        };
        let (first, total) = (d.events.first, d.events.total);
        self.cursor = self
            .cursor
            .clamp(first, (first + events.len()).saturating_sub(1).max(first));
        self.cursor_event = d.events.history.get(self.cursor - first).map(|e| e.id);
        let Some(r) = events.get(self.cursor - first) else {
            return;
        };
        let wanted = if self.cursor == 0 {
            0
        } else if self.cursor + 1 == total {
            lines
        } else {
            self.scroll
        };
        let lo = r.end.saturating_sub(height);
        let hi = r.start.max(lo);
        self.scroll = wanted.clamp(lo, hi).min(lines.saturating_sub(height));
    }

    /// Moves the event cursor (`Action::MoveEvent`); `page` events make a page. The window
    /// of loaded events follows the cursor.
    pub fn step(
        &mut self,
        store: &dyn UiStore,
        m: Motion,
        page: usize,
        screen: Screen,
    ) -> Result<()> {
        let Some(total) = self.detail.as_ref().map(|d| d.events.total) else {
            return Ok(());
        };
        let mut target = self.cursor;
        super::rows::step(&mut target, total, m, page);
        self.reach(store, target)?;
        self.cursor = target;
        self.follow(screen);
        Ok(())
    }

    /// Loads events until `target` (an index in the whole timeline) is in the window, and
    /// trims the window to `KEEP` events on the far side.
    fn reach(&mut self, store: &dyn UiStore, target: usize) -> Result<()> {
        let Some(d) = self.detail.as_mut() else {
            return Ok(());
        };
        let id = d.identity();
        let w = &mut d.events;
        let end = |w: &EventWindow| w.first + w.history.len();
        if (w.first..end(w)).contains(&target) {
            return Ok(());
        }
        if target == 0 || target + 1 >= w.total {
            // Home and End read the page at that end.
            let from = if target == 0 {
                HistoryFrom::Start
            } else {
                HistoryFrom::End
            };
            w.history = store.history_page(&id, from, CHUNK)?;
            w.first = if target == 0 {
                0
            } else {
                w.total.saturating_sub(w.history.len())
            };
            return Ok(());
        }
        while target >= end(w) {
            let Some(last) = w.history.last().map(|e| e.id) else {
                break;
            };
            let more = store.history_page(&id, HistoryFrom::After(last), CHUNK)?;
            if more.is_empty() {
                break;
            }
            w.history.extend(more);
            let drop = w.history.len().saturating_sub(KEEP);
            w.history.drain(..drop);
            w.first += drop;
        }
        while target < w.first {
            let Some(first) = w.history.first().map(|e| e.id) else {
                break;
            };
            let mut more = store.history_page(&id, HistoryFrom::Before(first), CHUNK)?;
            if more.is_empty() {
                break;
            }
            w.first = w.first.saturating_sub(more.len());
            more.append(&mut w.history);
            more.truncate(KEEP);
            w.history = more;
        }
        Ok(())
    }

    /// The selected event, when it is loaded.
    fn selected(&self) -> Option<&HistoryEvent> {
        let d = self.detail.as_ref()?;
        d.events
            .history
            .get(self.cursor.checked_sub(d.events.first)?)
    }

    /// A click on line `row` of the pane (counted from its top on screen) selects the event
    /// drawn there.
    pub fn click(&mut self, row: usize, screen: Screen) {
        let Some((events, _, _)) = self.geometry(screen) else {
            return;
        };
        let line = self.scroll + row;
        if let (Some(i), Some(d)) = (
            events.iter().position(|r| r.contains(&line)),
            self.detail.as_ref(),
        ) {
            self.cursor = d.events.first + i;
            self.follow(screen);
        }
    }

    /// `Enter`: the selected event whole, read from the store into the event popup.
    pub fn open(&self, shell: &mut Shell<'_>) -> Action {
        match self.selected() {
            Some(e) => Action::OpenEvent(e.id),
            None => {
                shell.info("select a record: its timeline's events open here");
                Action::None
            }
        }
    }

    /// `c`: the selected event's value, read whole from the store.
    pub fn copy(&self) -> Option<Action> {
        self.selected().map(|e| Action::CopyEvent(e.id))
    }

    /// Draws the pane in `area`; `hint` is what it says without a record.
    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect, view: &View, hint: &str) {
        let focused = view.focused && view.focus == Focus::Detail;
        let title = match (&self.detail, &self.failed) {
            (Some(d), _) => format!("History · {}", d.record.identity()),
            (None, Some((id, _))) => format!("History · {id} · not loaded"),
            (None, None) => "History".to_string(),
        };
        let inner = pane(frame, area, &title, focused);
        if inner.width == 0 || inner.height == 0 {
            return;
        }
        let max = inner.width as usize;
        let lines = match (&self.detail, &self.failed) {
            (Some(d), _) => self.lines(d, view.now, view.focus == Focus::Detail, max).0,
            (None, Some((_, why))) => {
                let mut lines = wrapped(
                    &format!("This record's history could not be loaded: {why}"),
                    error_style(),
                    max,
                );
                lines.push(Line::raw(""));
                lines.extend(wrapped(
                    "It is read again when the selection moves, at every refresh, and as soon as a lock that stopped it is gone.",
                    bold(),
                    max,
                ));
                lines
            }
            (None, None) => vec![plain(hint, dim(), max)],
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
        let mut events = Vec::with_capacity(d.events.history.len());
        lines.push(row_line(
            &[
                label("value"),
                part(
                    listed_value(&r.value, r.value_bytes),
                    bold().fg(Color::Green),
                ),
            ],
            &size_part(r.value_bytes),
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
            // Words read as a preview are cut: no closing quote.
            let close = if r.raw_bytes.is_some() { "…" } else { "”" };
            let mut said = labelled("said", &format!("“{raw}{close}"), Style::new(), 9, max);
            // Words read as a preview point to the rest, and say their size, even when short.
            if said.len() > SAID_LINES || r.raw_bytes.is_some() {
                said.truncate(SAID_LINES);
                let size = match r.raw_bytes {
                    Some(n) => format!(" ({} bytes in all)", thousands(n)),
                    None => String::new(),
                };
                said.push(plain(
                    &format!("{:9}… the rest{size}: Tab, select the event, Enter", ""),
                    dim(),
                    max,
                ));
            }
            lines.extend(said);
        }
        lines.push(Line::raw(""));
        lines.push(plain(
            &format!(
                "Timeline, oldest first · {}",
                plural(d.events.total as i64, "event", "events")
            ),
            bold(),
            max,
        ));
        if d.events.first > 0 {
            lines.push(plain(
                &format!(
                    "  … {} before (k, Home)",
                    plural(d.events.first as i64, "event", "events")
                ),
                dim(),
                max,
            ));
        }
        let mark = self
            .mark
            .as_ref()
            .filter(|m| m.identity == d.record.identity());
        let cursor = cursor
            .then(|| self.cursor.checked_sub(d.events.first))
            .flatten();
        let event_w = event_column(&d.events.history);
        for (i, e) in d.events.history.iter().enumerate() {
            let start = lines.len();
            let mut line = event_line(e, event_w, max);
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
        let after = d
            .events
            .total
            .saturating_sub(d.events.first + d.events.history.len());
        if after > 0 {
            lines.push(plain(
                &format!(
                    "  … {} after (j, End)",
                    plural(after as i64, "event", "events")
                ),
                dim(),
                max,
            ));
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
                    part(
                        listed_value(&o.value, o.value_bytes),
                        Style::new().fg(Color::Green),
                    ),
                    part(format!("  v{}", o.version), dim()),
                ],
                &[
                    size_part(o.value_bytes),
                    vec![part(format!(" {state_text}"), style)],
                ]
                .concat(),
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

/// The narrowest the timeline's event column is: `confirmed`, the longest name of a write.
const EVENT_MIN: usize = 9;
/// The widest it grows: a name longer than this (only a raw client writes one) is cut with `…`.
const EVENT_MAX: usize = 20;

/// The event column's width for `events`: the longest name among them (`pending_resolved`),
/// within [`EVENT_MIN`] and [`EVENT_MAX`], so a long name never runs into the version beside it
/// (found by review: `pending_resolvedv1`).
fn event_column(events: &[HistoryEvent]) -> usize {
    (events.iter())
        .map(|e| width(&one_line(&e.event)))
        .max()
        .unwrap_or(0)
        .clamp(EVENT_MIN, EVENT_MAX)
}

/// One event of the timeline, its name in a column `event_w` wide and a space.
fn event_line(e: &HistoryEvent, event_w: usize, max: usize) -> Line<'static> {
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
            Some(v) => listed_value(v, e.value_bytes),
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
                format!("{} ", fit(&one_line(&e.event), event_w)),
                style.add_modifier(Modifier::BOLD),
            ),
            part(format!("{version:<3} "), dim()),
            part(text, style),
            part(format!("  {seq}"), dim()),
            part(
                format!("  {}", one_line(e.source.as_deref().unwrap_or(""))),
                dim(),
            ),
        ],
        &suspect_and_size(detail, e.value_bytes),
        max,
    )
}

/// What a timeline row keeps at its right edge, before its value and source: `! suspect` on a
/// write the scope guard found suspect when it was stored (its evidence is in the event
/// popup's detail) — a long value is cut before it (found by an exploratory test: the mark
/// after the value showed only at 200 columns) — and a preview's size.
fn suspect_and_size(detail: Option<&serde_json::Value>, bytes: Option<i64>) -> Vec<Part<'static>> {
    let mut right = Vec::new();
    if detail.is_some_and(|d| d.get("suspect").is_some()) {
        right.push(part(" ! suspect", bold().fg(Color::Yellow)));
    }
    right.extend(size_part(bytes));
    right
}

/// A preview's size as a part a row keeps beside its right edge (none for a whole value).
fn size_part(bytes: Option<i64>) -> Vec<Part<'static>> {
    (preview_size(bytes).into_iter())
        .map(|size| part(size, dim()))
        .collect()
}
