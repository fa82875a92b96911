//! The dialogs over the panes. Each is one file that owns its state, its keys and its
//! drawing, and takes what the session loaded for it; `Dialog` is their registry (one
//! variant each). The focused (top) dialog gets the key first.

pub mod as_of;
pub mod confirm;
pub mod delete;
pub mod event;
pub mod explain;
pub mod help;
pub mod message;
pub mod rescope;
pub mod revert;

pub use as_of::{AsOf, AsOfDialog};
pub use confirm::ConfirmDialog;
pub use delete::DeleteDialog;
pub use event::EventDialog;
pub use explain::{ExplainDialog, ExplainField, ExplainQuery};
pub use rescope::{RescopeDialog, RescopePreview, Suggestion};
pub use revert::{RevertChoice, RevertChoices, RevertDialog};

use super::app::{Action, App};
use super::keymap::{self, Command, Context};
use super::tabs::Shell;
use super::worker::Reply;
use crate::model::MemoryRecord;
use crate::tui::draw::{bold, dim, error_style, part, plain, row_line};
use crate::tui::text::{value_text, width, Statement};
use crossterm::event::KeyEvent;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear};
use ratatui::Frame;

/// What a key did to the dialog that took it.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The dialog stays open; the loop performs the action.
    Stay(Action),
    /// The dialog closes; the loop performs the action.
    Close(Action),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Dialog {
    Help { scroll: usize },
    Delete(DeleteDialog),
    Confirm(ConfirmDialog),
    Explain(ExplainDialog),
    AsOf(AsOfDialog),
    Rescope(RescopeDialog),
    Revert(RevertDialog),
    Event(EventDialog),
    Message { title: String, text: String },
}

impl Dialog {
    /// Whether `cmd` can run in this dialog now: the footer and the border offer no other.
    pub fn offers(&self, cmd: Command) -> bool {
        match self {
            Dialog::Delete(d) => d.offers(cmd),
            Dialog::Rescope(d) => d.offers(cmd),
            Dialog::Revert(d) => d.offers(cmd),
            Dialog::Confirm(d) => d.offers(cmd),
            _ => true,
        }
    }

    pub fn context(&self) -> Context {
        match self {
            Dialog::Help { .. } => Context::Help,
            Dialog::Delete(_) => Context::DeleteDialog,
            Dialog::Confirm(_) => Context::Confirm,
            Dialog::Explain(_) => Context::Explain,
            Dialog::AsOf(_) => Context::AsOf,
            Dialog::Rescope(d) if d.editing => Context::RescopeInput,
            Dialog::Rescope(_) => Context::Rescope,
            Dialog::Revert(_) => Context::Revert,
            Dialog::Event(_) => Context::Event,
            Dialog::Message { .. } => Context::Message,
        }
    }
}

/// What the session loaded for the dialog on top.
pub enum Loaded<'a> {
    /// A worker's reply (the delete preview).
    Reply(&'a Reply),
    /// The store's resolution for the explain dialog's question.
    Explain(
        &'a ExplainQuery,
        &'a Result<crate::model::Resolution, String>,
    ),
    /// A read resolved as of its time and now.
    AsOf(i64, &'a Result<AsOf, String>),
    /// The rescope dialog's suggested targets …
    Suggestions(Vec<Suggestion>),
    /// … and the preview of its target.
    Rescope(Result<RescopePreview, String>),
    /// The revert dialog's earlier versions …
    Revert(Result<RevertChoices, String>),
    /// … and what choosing one of them does.
    RevertEffect(i64, Result<Statement, String>),
}

impl Dialog {
    /// A key for the dialog; `None` for the dialogs whose keys `App` still handles.
    pub fn key(
        &mut self,
        cmd: Option<Command>,
        key: &KeyEvent,
        shell: &mut Shell<'_>,
    ) -> Option<Step> {
        Some(match self {
            Dialog::Help { scroll } => help::key(scroll, cmd, shell.size),
            Dialog::Message { .. } => message::key(cmd),
            Dialog::Delete(d) => d.key(cmd, shell),
            Dialog::Rescope(d) => d.key(cmd, key, shell),
            Dialog::Revert(d) => d.key(cmd, key, shell),
            Dialog::Confirm(c) => c.key(cmd, shell),
            Dialog::Explain(e) => e.key(cmd, key),
            Dialog::Event(d) => d.key(cmd, shell),
            Dialog::AsOf(d) => d.key(cmd, shell),
        })
    }

    /// Takes what the session loaded, when it is this dialog's.
    pub fn take(&mut self, loaded: Loaded<'_>) {
        match (&mut *self, loaded) {
            (Dialog::Delete(d), Loaded::Reply(Reply::DeletePreview { target, preview })) => {
                if let Some(gone) = d.take(target, preview) {
                    *self = Dialog::Message {
                        title: crate::tui::refresh::GONE_TITLE.to_string(),
                        text: gone,
                    };
                }
            }
            (Dialog::Explain(e), Loaded::Explain(query, result)) => e.take(query, result),
            (Dialog::AsOf(d), Loaded::AsOf(id, result)) if d.read.id == id => {
                d.result = Some(result.clone())
            }
            (Dialog::Rescope(d), Loaded::Suggestions(list)) => d.take_suggestions(list),
            (Dialog::Rescope(d), Loaded::Rescope(preview)) => d.preview = Some(preview),
            (Dialog::Revert(d), Loaded::Revert(choices)) => d.take_choices(choices),
            (Dialog::Revert(d), Loaded::RevertEffect(version, effect)) => {
                d.take_effect(version, effect)
            }
            _ => {}
        }
    }

    /// Makes ready, before a frame on a screen of `area`, what the dialog's drawing only reads:
    /// the event popup's stored texts laid out at its width (once per width, not per frame).
    pub fn lay_out(&mut self, area: Rect) {
        if let Dialog::Event(d) = self {
            d.lay_out(area.width);
        }
    }

    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect, app: &App, top: bool) {
        match self {
            Dialog::Help { scroll } => help::draw(frame, area, *scroll),
            Dialog::Delete(d) => d.draw(frame, area),
            Dialog::Confirm(c) => c.draw(frame, area),
            Dialog::Explain(e) => e.draw(frame, area, app.now, top),
            Dialog::AsOf(d) => d.draw(frame, area, app.now),
            Dialog::Rescope(d) => d.draw(frame, area, top),
            Dialog::Revert(d) => d.draw(frame, area, app.now),
            Dialog::Message { title, text } => message::draw(frame, area, title, text),
            Dialog::Event(d) => d.draw(frame, area, app.now),
        }
    }
}

pub(crate) const FIELD: usize = 30;

/// The most rows one bullet, or one line of a confirm, takes on a screen `height` rows high:
/// a long value in it is cut (its head and the sentence's end kept) so the rest of the
/// statement and `y`'s line stay on screen — six rows on a 30-row screen, fewer below.
pub(crate) fn rows_a_line(height: u16) -> usize {
    (height as usize / 5).clamp(1, 6)
}

/// `text` as bullet lines of at most `max` columns and `rows` rows (a long value in it cut,
/// the sentence's end kept: [`Statement::lines`]).
pub(crate) fn bullet(
    lines: &mut Vec<Line<'static>>,
    text: &Statement,
    style: Style,
    max: usize,
    rows: usize,
) {
    for (i, l) in text
        .lines(max.saturating_sub(2), rows)
        .into_iter()
        .enumerate()
    {
        let lead = if i == 0 { "• " } else { "  " };
        lines.push(Line::styled(format!("{lead}{l}"), style));
    }
}

/// A record dialog's first sentence: `lead`, the record's value in bold green, then `tail`.
/// One longer than the dialog wraps, in at most `rows` rows, a long value cut with `…` so that
/// the sentence's end — its version, source and scope — stays on screen, as every statement
/// that names a long value does (README, "The terminal UI", Pending queue).
pub(crate) fn record_lines(
    lead: &'static str,
    rec: &MemoryRecord,
    tail: String,
    max: usize,
    rows: usize,
) -> Vec<Line<'static>> {
    let value = value_text(&rec.value);
    if width(lead) + width(&value) + width(&tail) <= max {
        return vec![row_line(
            &[
                part(lead, Style::new()),
                part(value, bold().fg(Color::Green)),
                part(tail, Style::new()),
            ],
            &[],
            max,
        )];
    }
    let sentence = Statement::new().says(lead).names(&value).says(tail);
    (sentence.lines(max, rows).into_iter())
        .map(|l| plain(&l, Style::new(), max))
        .collect()
}

/// What a dialog that scrolls says `y` will do (or why it would be refused), as lines: each
/// statement takes `rows`, or the rows its words need with its values cut
/// ([`Statement::least_rows`]), when those are more — no word of it is cut.
pub(crate) fn outcome_lines_in_words(
    effects: &[Statement],
    refusal: Option<&str>,
    max: usize,
    rows: usize,
) -> Vec<Line<'static>> {
    let rows_of = |s: &Statement| rows.max(s.least_rows(max.saturating_sub(2)));
    let mut lines = Vec::new();
    match refusal {
        Some(why) => {
            lines.push(plain("The store would refuse this:", error_style(), max));
            let why = Statement::new().says(why);
            bullet(&mut lines, &why, Style::new(), max, rows_of(&why));
        }
        None => {
            // The store says each effect as a statement ("moves npm to …", "global goes back
            // to …"), so the heading does not ask for a verb.
            lines.push(plain("In one transaction:", bold(), max));
            for e in effects {
                bullet(&mut lines, e, Style::new(), max, rows_of(e));
            }
        }
    }
    lines
}

/// The furthest a scrolling dialog's `lines` (of `len`) scroll in `rows`, and a page: a row
/// goes to the note that says what is hidden ([`on_screen`]).
pub(crate) fn scroll_room(len: usize, rows: usize) -> (usize, usize) {
    let page = if noted(len, rows) { rows - 1 } else { rows };
    (len.saturating_sub(page), page.max(1))
}

/// Whether `rows` too few for `len` lines give their last to the note: whenever a line of the
/// statement is left beside it, in every dialog that scrolls — the delete, rescope and revert
/// dialogs alike (found by review: at 25×6 the rescope dialog cut its lines and said nothing
/// of them; found by a tester: so did the delete dialog at 25×6 and 25×7).
fn noted(len: usize, rows: usize) -> bool {
    len > rows && rows >= 2
}

/// The lines [`on_screen`] skips at the top for `scroll`.
pub(crate) fn shown_scroll(len: usize, scroll: usize, rows: usize) -> usize {
    scroll.min(scroll_room(len, rows).0)
}

/// The `rows` of `lines` on screen, `scroll` lines down. On a terminal too short for all of
/// them, the last row says how many lines of what `y` does are below (or above) and which key
/// shows them, rather than the statement ending mid-way as if complete ([`noted`]).
pub(crate) fn on_screen(
    lines: Vec<Line<'static>>,
    scroll: usize,
    rows: usize,
    max: usize,
) -> Vec<Line<'static>> {
    let scroll = shown_scroll(lines.len(), scroll, rows);
    if !noted(lines.len(), rows) {
        return lines.into_iter().skip(scroll).take(rows).collect();
    }
    let page = rows - 1;
    let below = lines.len() - page - scroll;
    let s = |n: usize| if n == 1 { "" } else { "s" };
    // The longest wording that fits: a cut one would end mid-word.
    let notes = if below > 0 {
        [
            format!(
                "… {below} more line{} of what y does: PgDn shows them",
                s(below)
            ),
            format!("… {below} more line{}: PgDn", s(below)),
            format!("… {below} more: PgDn"),
            format!("… {below} more"),
            format!("↓ {below}"),
        ]
    } else {
        [
            format!("↑ {scroll} line{} above: PgUp shows them", s(scroll)),
            format!("↑ {scroll} line{} above: PgUp", s(scroll)),
            format!("↑ {scroll} above: PgUp"),
            format!("↑ {scroll} above"),
            format!("↑ {scroll}"),
        ]
    };
    let note = notes.iter().find(|n| width(n) <= max).unwrap_or(&notes[4]);
    let mut shown: Vec<Line<'static>> = lines.into_iter().skip(scroll).take(page).collect();
    shown.push(plain(note, error_style(), max));
    shown
}

/// Whether `cmd` scrolls a popup (`scrolled` moves it): lines, pages, top and bottom.
pub(crate) fn scrolls(cmd: Option<Command>) -> bool {
    matches!(
        cmd,
        Some(
            Command::PageDown
                | Command::PageUp
                | Command::Home
                | Command::End
                | Command::Down
                | Command::Up
        )
    )
}

/// A scrolling popup's offset after `cmd`: lines, pages, top and bottom, never past `room`
/// (the furthest it scrolls) — so scrolling back starts moving at once.
pub(crate) fn scrolled(scroll: usize, cmd: Option<Command>, room: usize, page: usize) -> usize {
    let scroll = scroll.min(room);
    match cmd {
        Some(Command::Down) => (scroll + 1).min(room),
        Some(Command::Up) => scroll.saturating_sub(1),
        Some(Command::PageDown) => (scroll + page.max(1)).min(room),
        Some(Command::PageUp) => scroll.saturating_sub(page.max(1)),
        Some(Command::Home) => 0,
        Some(Command::End) => room,
        _ => scroll,
    }
}

/// Draws the open dialogs, bottom first; only the top one is focused.
pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App) {
    for (i, dialog) in app.dialogs.iter().enumerate() {
        dialog.draw(frame, area, app, i + 1 == app.dialogs.len());
    }
}

/// The part of `area` a dialog may cover: all but the footer, which says the dialog's keys
/// (found by review: at 200×10 the rescope dialog's border covered `Tab suggestion`).
pub(crate) fn above_footer(area: Rect) -> Rect {
    match crate::tui::layout::screen(area).footer {
        Some(f) => Rect::new(area.x, area.y, area.width, f.y.saturating_sub(area.y)),
        None => area,
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

/// A dialog's border says what it does: it reads (cyan), changes a record (yellow), destroys or
/// reports a failure (red); the help is plain.
fn border(ctx: Context) -> Style {
    match ctx {
        Context::Explain | Context::AsOf | Context::Event => bold().fg(Color::Cyan),
        Context::Confirm | Context::Rescope | Context::RescopeInput | Context::Revert => {
            bold().fg(Color::Yellow)
        }
        Context::DeleteDialog | Context::Message => error_style(),
        _ => bold(),
    }
}

/// Clears `rect` for a popup, and blanks a wide character (CJK, emoji) that starts just left of
/// it: its second half lies under the popup's left border, and the terminal, drawing the
/// character, would cover the border — ratatui sends no cell a wide character covers (found by
/// review: the `│` missing on each row where a `用` sat under it).
fn clear_for_popup(buf: &mut ratatui::buffer::Buffer, rect: Rect) {
    use ratatui::widgets::Widget;
    Clear.render(rect, buf);
    let Some(left) = rect.x.checked_sub(1) else {
        return;
    };
    for y in rect.top()..rect.bottom() {
        if let Some(cell) = buf.cell_mut((left, y)) {
            if width(cell.symbol()) > 1 {
                cell.set_symbol(" ");
            }
        }
    }
}

/// Clears `rect`, draws a titled border in the dialog's colour (`border`) with its key hints
/// (`ctx`), returns the inside.
pub(crate) fn frame_box(frame: &mut Frame<'_>, rect: Rect, title: &str, ctx: Context) -> Rect {
    frame_box_offering(frame, rect, title, ctx, &|_| true)
}

/// [`frame_box`], its border without the keys `offered` says cannot run now.
pub(crate) fn frame_box_offering(
    frame: &mut Frame<'_>,
    rect: Rect,
    title: &str,
    ctx: Context,
    offered: &dyn Fn(Command) -> bool,
) -> Rect {
    let style = border(ctx);
    clear_for_popup(frame.buffer_mut(), rect);
    if rect.width < 4 || rect.height < 3 {
        return rect;
    }
    // As many of the dialog's keys as the border holds, most important first: a narrow
    // dialog still says what `y` does.
    let room = (rect.width as usize).saturating_sub(2);
    let said = |kept: &[keymap::Hint]| -> String {
        (kept.iter())
            .map(|h| format!(" {} {} ", h.keys, h.text))
            .collect::<Vec<_>>()
            .join("·")
    };
    let hints = keymap::hints(&[ctx], false, offered);
    let hint_text = said(&keymap::fitting(&hints, |kept| width(&said(kept)) <= room));
    let max_title = rect.width.saturating_sub(4) as usize;
    let mut block = Block::new()
        .borders(Borders::ALL)
        .border_style(style)
        .title(Span::styled(
            format!(" {} ", crate::tui::text::truncate(title, max_title)),
            bold(),
        ));
    if !hint_text.is_empty() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::buffer::Buffer;
    use ratatui::widgets::Widget;

    #[test]
    fn a_wide_character_under_a_popups_left_edge_leaves_the_border_drawn() {
        let area = Rect::new(0, 0, 12, 3);
        let before = Buffer::empty(area);
        let mut buf = Buffer::empty(area);
        for y in 0..3 {
            buf.set_string(0, y, "用户名字很长", Style::default());
        }
        // A popup from column 3: `户` starts at column 2 and covers column 3.
        let rect = Rect::new(3, 0, 6, 3);
        clear_for_popup(&mut buf, rect);
        Block::default()
            .borders(Borders::ALL)
            .render(rect, &mut buf);
        for y in 0..3 {
            assert_eq!(buf[(2, y)].symbol(), " ", "row {y}");
            // What ratatui sends the terminal includes the border's cell.
            assert!(
                before
                    .diff(&buf)
                    .iter()
                    .any(|(x, cy, _)| (*x, *cy) == (3, y)),
                "the border at row {y} is drawn"
            );
        }
        // A character wholly left of the popup stays.
        assert_eq!(buf[(0, 1)].symbol(), "用");
    }
}
