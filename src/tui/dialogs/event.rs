//! The event popup (`Enter` on a history event): the event whole — the user's words wrapped,
//! the value pretty-printed, source, causal_seq, times, detail — scrolling when it is longer
//! than the screen, and `c` copies the words.

use super::{centered, frame_box, Step};
use crate::model::{HistoryEvent, Identity};
use crate::tui::app::Action;
use crate::tui::clipboard;
use crate::tui::draw::{bold, dim, labelled, labelled_row, labelled_rows};
use crate::tui::keymap::{Command, Context};
use crate::tui::tabs::Shell;
use crate::tui::text::{ago, full_time, one_line};
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// One event of a timeline, shown whole.
#[derive(Debug, Clone)]
pub struct EventDialog {
    pub identity: Identity,
    /// The event as last read from the store ([`EventDialog::set_event`] replaces it).
    event: HistoryEvent,
    /// Lines scrolled off the top.
    pub scroll: usize,
    /// Its stored texts laid out at the popup's width: made when first needed and again only
    /// when that width or those texts change, never per frame or key (found by review: a 5 MB
    /// value wrapped at every frame kept a core busy while idle and each key waited 1.6 s).
    layout: Option<EventLayout>,
    /// How many times the texts were laid out.
    layouts: usize,
}

/// The layout is made from the event: two popups on the same event at the same scroll are equal.
impl PartialEq for EventDialog {
    fn eq(&self, other: &Self) -> bool {
        (&self.identity, &self.event, self.scroll) == (&other.identity, &other.event, other.scroll)
    }
}

/// The popup's stored texts (source, causal_seq, words, value, detail) wrapped at `max`
/// columns, kept as the rows' words back to back and where each row starts: a frame makes
/// `Line`s only of the rows on screen.
#[derive(Clone, PartialEq)]
struct EventLayout {
    /// The columns inside the popup's border it was laid out for.
    max: usize,
    /// Each labelled text's label and style, by [`Row::text`].
    texts: Vec<(&'static str, Style)>,
    /// Every row's words, back to back.
    words: String,
    rows: Vec<Row>,
}

#[derive(Clone, Copy, PartialEq)]
struct Row {
    /// Where its words start in [`EventLayout::words`]; they end where the next row's start.
    start: usize,
    /// The spaces its paragraph starts with (indented JSON).
    lead: u16,
    /// Its text in [`EventLayout::texts`]; `None` for the blank row between two texts.
    text: Option<u8>,
    /// The text's first row, which carries its label.
    first: bool,
}

impl std::fmt::Debug for EventLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("EventLayout"))
            .field("max", &self.max)
            .field("rows", &self.rows.len())
            .finish()
    }
}

impl EventLayout {
    fn new(e: &HistoryEvent, max: usize) -> EventLayout {
        let mut layout = EventLayout {
            max,
            texts: Vec::new(),
            words: String::new(),
            rows: Vec::new(),
        };
        let plain = Style::new();
        let source = e.source.as_deref().unwrap_or("none recorded");
        layout.labelled("source", source, plain);
        let seq = e
            .causal_seq
            .map_or("none recorded".to_string(), |s| s.to_string());
        layout.labelled("causal_seq", &seq, plain);
        layout.blank();
        match &e.raw {
            Some(raw) => layout.labelled("said", raw, plain),
            None => layout.labelled("said", "(no words recorded)", dim()),
        }
        layout.blank();
        let green = Style::new().fg(Color::Green);
        match &e.value {
            // A string is shown as its text; anything else as indented JSON.
            Some(serde_json::Value::String(s)) => layout.labelled("value", s, green),
            Some(v) => layout.labelled("value", &pretty(v), green),
            None => layout.labelled("value", "(no content kept)", dim()),
        }
        if let Some(d) = &e.detail {
            layout.blank();
            layout.labelled("detail", &pretty(d), plain);
        }
        layout
    }

    /// `text` after `label`, as [`labelled`] lays it out.
    fn labelled(&mut self, label: &'static str, text: &str, style: Style) {
        let index = u8::try_from(self.texts.len()).ok();
        self.texts.push((label, style));
        let (rows, words) = (&mut self.rows, &mut self.words);
        let mut first = true;
        labelled_rows(text, LABEL, self.max, |lead, row| {
            rows.push(Row {
                start: words.len(),
                lead: u16::try_from(lead).unwrap_or(u16::MAX),
                text: index,
                first: std::mem::take(&mut first),
            });
            words.push_str(&row);
        });
    }

    fn blank(&mut self) {
        self.rows.push(Row {
            start: self.words.len(),
            lead: 0,
            text: None,
            first: false,
        });
    }

    fn len(&self) -> usize {
        self.rows.len()
    }

    /// Row `i`, drawn.
    fn line(&self, i: usize) -> Line<'static> {
        let Some(row) = self.rows.get(i) else {
            return Line::raw("");
        };
        let end = self.rows.get(i + 1).map_or(self.words.len(), |r| r.start);
        match row.text.and_then(|t| self.texts.get(usize::from(t))) {
            Some(&(label, style)) => labelled_row(
                label,
                row.first,
                usize::from(row.lead),
                &self.words[row.start..end],
                style,
                LABEL,
                self.max,
            ),
            None => Line::raw(""),
        }
    }
}

/// Columns of the popup's labels (`causal_seq` and a space).
const LABEL: usize = 11;
/// The popup's widest box.
const WIDTH: u16 = 92;

/// Whether `a` and `b` hold the same texts [`EventLayout`] lays out.
fn same_texts(a: &HistoryEvent, b: &HistoryEvent) -> bool {
    (a.source == b.source && a.causal_seq == b.causal_seq && a.raw == b.raw)
        && (a.value == b.value && a.detail == b.detail)
}

/// The columns inside the popup's border on a screen `width` columns wide.
fn text_width(width: u16) -> usize {
    width.min(WIDTH).saturating_sub(2) as usize
}

impl EventDialog {
    pub fn new(identity: Identity, event: HistoryEvent) -> EventDialog {
        EventDialog {
            identity,
            event,
            scroll: 0,
            layout: None,
            layouts: 0,
        }
    }

    pub fn event(&self) -> &HistoryEvent {
        &self.event
    }

    /// The event as the store holds it now (a refresh): its texts are laid out again only when
    /// one of them changed (not when, say, a newer version only ended its `valid_until`).
    pub fn set_event(&mut self, event: HistoryEvent) {
        if !same_texts(&event, &self.event) {
            self.layout = None;
        }
        self.event = event;
    }

    /// How many times its stored texts were laid out: once when first drawn or scrolled, then
    /// once per change of the popup's width or of the event.
    pub fn layouts(&self) -> usize {
        self.layouts
    }

    /// Lays its stored texts out for a screen `width` columns wide, unless they are already:
    /// before a frame is drawn and before a key scrolls.
    pub fn lay_out(&mut self, width: u16) {
        let max = text_width(width);
        if self.layout.as_ref().is_some_and(|l| l.max == max) {
            return;
        }
        self.layout = Some(EventLayout::new(&self.event, max));
        self.layouts += 1;
    }

    /// What `c` copies: the user's words exactly as stored, else the value as stored.
    pub fn copy_text(&self) -> Option<String> {
        self.event
            .raw
            .clone()
            .or_else(|| self.event.value.as_ref().map(clipboard::value_text))
    }

    fn title(&self) -> String {
        let version = self
            .event
            .version
            .map(|v| format!(" v{v}"))
            .unwrap_or_default();
        one_line(&format!(
            "{}{version} · {}",
            self.event.event, self.identity
        ))
    }

    /// The popup's first lines at `max` columns, those that say when (the age moves on with
    /// the clock, so they are made at each frame; the stored texts after them are laid out
    /// once, [`EventLayout`]).
    fn head(&self, now: DateTime<Utc>, max: usize) -> Vec<Line<'static>> {
        let e = &self.event;
        let plain = Style::new();
        let mut lines = Vec::new();
        let version = e.version.map(|v| format!(" · v{v}")).unwrap_or_default();
        lines.extend(labelled(
            "event",
            &format!("{}{version} · {}", e.event, e.scope),
            bold(),
            LABEL,
            max,
        ));
        lines.extend(labelled(
            "when",
            &format!("{} · {}", full_time(&e.at), ago(now, &e.at)),
            plain,
            LABEL,
            max,
        ));
        if e.event == "set" {
            let until = match &e.valid_until {
                Some(t) => format!("{} · {} (then replaced)", full_time(t), ago(now, t)),
                None => "still current".to_string(),
            };
            lines.extend(labelled("current", &until, plain, LABEL, max));
        }
        lines
    }

    /// Where the popup goes on a screen of `area` with its texts laid out as `layout`: its
    /// box, its first lines ([`EventDialog::head`]) and how many lines it has in all.
    fn frame(
        &self,
        area: Rect,
        now: DateTime<Utc>,
        layout: &EventLayout,
    ) -> (Rect, Vec<Line<'static>>, usize) {
        let w = area.width.min(WIDTH);
        let head = self.head(now, text_width(area.width));
        let total = head.len() + layout.len();
        // The header and footer stay in sight when there is room for them.
        let room = if area.height >= 20 {
            area.height - 2
        } else {
            area.height
        };
        let h = u16::try_from(total + 2)
            .unwrap_or(u16::MAX)
            .min(room)
            .max(8);
        (centered(area, w, h), head, total)
    }

    /// The furthest it scrolls and a page, on a terminal of `size`.
    fn scroll_room(&mut self, size: (u16, u16), now: DateTime<Utc>) -> (usize, usize) {
        let area = Rect::new(0, 0, size.0, size.1);
        self.lay_out(size.0);
        let Some(layout) = &self.layout else {
            return (0, 1);
        };
        let (rect, _, total) = self.frame(area, now, layout);
        let page = rect.height.saturating_sub(2).max(1) as usize;
        (total.saturating_sub(page), page)
    }

    pub fn key(&mut self, cmd: Option<Command>, shell: &mut Shell<'_>) -> Step {
        let (room, page) = self.scroll_room(shell.size, shell.now);
        let d = self;
        match cmd {
            Some(Command::Cancel) => return Step::Close(Action::None),
            Some(
                Command::Down
                | Command::Up
                | Command::PageDown
                | Command::PageUp
                | Command::Home
                | Command::End,
            ) => d.scroll = super::scrolled(d.scroll, cmd, room, page),
            Some(Command::Copy) => match d.copy_text() {
                Some(text) => return Step::Stay(Action::Copy(text)),
                None => shell.info("this event keeps no words and no value to copy"),
            },
            _ => {}
        }
        Step::Stay(Action::None)
    }

    /// Draws the rows on screen only, from the layout made before the frame
    /// ([`EventDialog::lay_out`]); one for another width (a frame no one laid out for) is
    /// made for this frame alone.
    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect, now: DateTime<Utc>) {
        let d = self;
        let fresh;
        let layout = match &d.layout {
            Some(l) if l.max == text_width(area.width) => l,
            _ => {
                fresh = EventLayout::new(&d.event, text_width(area.width));
                &fresh
            }
        };
        let (rect, head, total) = d.frame(area, now, layout);
        let page = rect.height.saturating_sub(2) as usize;
        let scroll = d.scroll.min(total.saturating_sub(page));
        let mut title = format!("Event · {}", d.title());
        if total > page {
            // Where the view is, first: a long title is cut at its end.
            title = format!(
                "lines {}–{} of {} · {title}",
                scroll + 1,
                (scroll + page).min(total),
                total
            );
        }
        let inner = frame_box(frame, rect, &title, Context::Event);
        let shown = (scroll..total).take(inner.height as usize);
        let visible: Vec<Line<'static>> = shown
            .map(|i| match head.get(i) {
                Some(line) => line.clone(),
                None => layout.line(i - head.len()),
            })
            .collect();
        frame.render_widget(Paragraph::new(visible), inner);
    }
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(raw: Option<&str>, value: Option<serde_json::Value>) -> HistoryEvent {
        HistoryEvent {
            id: 1,
            event: "set".into(),
            subject: "user:42".into(),
            predicate: "shell".into(),
            scope: "global".into(),
            version: Some(2),
            value,
            raw: raw.map(str::to_string),
            source: Some("thread:1/message:2 很长的来源".into()),
            causal_seq: Some(7),
            at: "2026-11-20T09:00:00Z".into(),
            detail: Some(json!({"reason": "user said so", "purged": 0})),
            valid_until: None,
            value_bytes: None,
            raw_bytes: None,
        }
    }

    /// The stored texts as the popup drew them before they were laid out once: each labelled
    /// whole, a blank line between.
    fn whole(e: &HistoryEvent, max: usize) -> Vec<Line<'static>> {
        let plain = Style::new();
        let mut lines = Vec::new();
        lines.extend(labelled(
            "source",
            e.source.as_deref().unwrap_or("none recorded"),
            plain,
            LABEL,
            max,
        ));
        let seq = e
            .causal_seq
            .map_or("none recorded".to_string(), |s| s.to_string());
        lines.extend(labelled("causal_seq", &seq, plain, LABEL, max));
        lines.push(Line::raw(""));
        match &e.raw {
            Some(raw) => lines.extend(labelled("said", raw, plain, LABEL, max)),
            None => lines.extend(labelled("said", "(no words recorded)", dim(), LABEL, max)),
        }
        lines.push(Line::raw(""));
        let green = Style::new().fg(Color::Green);
        match &e.value {
            Some(serde_json::Value::String(s)) => {
                lines.extend(labelled("value", s, green, LABEL, max))
            }
            Some(v) => lines.extend(labelled("value", &pretty(v), green, LABEL, max)),
            None => lines.extend(labelled("value", "(no content kept)", dim(), LABEL, max)),
        }
        if let Some(d) = &e.detail {
            lines.push(Line::raw(""));
            lines.extend(labelled("detail", &pretty(d), plain, LABEL, max));
        }
        lines
    }

    /// Each row drawn from the layout is the line the whole text gave at that width: hostile
    /// text escaped, wide characters and flags kept whole, indented JSON indented, a paragraph
    /// break a new row — at every width from one column up.
    #[test]
    fn the_layouts_rows_are_the_lines_of_the_whole_text() {
        let hostile =
            "clear \u{1b}[2J\u{1b}[H then\nring \u{7} twice\u{200b} \u{202e}evil\u{202c} 🇨🇳国旗 \
                       这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。\r\n\tend";
        let events = [
            event(
                Some(hostile),
                Some(json!({"cmd": "echo \u{1b}]0;pwned\u{7}", "list": [1, {"a": "很长"}]})),
            ),
            event(None, Some(json!(format!("🇨🇳中文{}", "x".repeat(500))))),
            event(Some(""), None),
        ];
        for e in &events {
            for max in (0..=40).chain([77, 90, 200]) {
                let layout = EventLayout::new(e, max);
                let rows: Vec<Line<'static>> = (0..layout.len()).map(|i| layout.line(i)).collect();
                assert_eq!(rows, whole(e, max), "{max} columns");
            }
        }
    }

    /// Laid out once per width: frames and keys reuse it, a new width or a changed event lays
    /// it out again, the same event read again does not.
    #[test]
    fn the_text_is_laid_out_once_per_width_and_event() {
        let e = event(Some("words"), Some(json!("x".repeat(10_000))));
        let identity = Identity {
            subject: "user:42".into(),
            predicate: "shell".into(),
            scope: crate::model::Scope::Global,
        };
        let mut d = EventDialog::new(identity, e.clone());
        assert_eq!(d.layouts(), 0);
        for _ in 0..10 {
            d.lay_out(120);
        }
        d.lay_out(100); // both wider than the box: the same columns inside it
        assert_eq!(d.layouts(), 1);
        d.lay_out(60);
        assert_eq!(d.layouts(), 2);
        d.set_event(e.clone());
        d.lay_out(60);
        assert_eq!(d.layouts(), 2);
        // A newer version ends this one: only the line that says when changes.
        let ended = HistoryEvent {
            valid_until: Some("2026-11-20T09:30:00Z".into()),
            ..e.clone()
        };
        d.set_event(ended);
        d.lay_out(60);
        assert_eq!(d.layouts(), 2);
        d.set_event(event(None, None));
        d.lay_out(60);
        assert_eq!(d.layouts(), 3);
    }
}
