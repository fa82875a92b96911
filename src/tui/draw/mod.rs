//! Rendering. Drawing only reads the state: no queries, no writes, no changes — what is on
//! screen was loaded by the session before the frame.

use super::app::{App, Focus, Tab};
use super::keymap;
use super::layout::{self, Screen};
use super::tabs::{Status, View};
use super::text::{
    each_grapheme, file_name, fit, one_line, plural, thousands, truncate, truncate_middle,
    truncate_path, width, wrap,
};
use ratatui::buffer::{Buffer, CellDiffOption};
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

pub(crate) fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

pub(crate) fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

pub(crate) fn selected() -> Style {
    Style::new().add_modifier(Modifier::REVERSED)
}

pub(crate) fn matched() -> Style {
    Style::new()
        .fg(Color::Yellow)
        .add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
}

pub(crate) fn error_style() -> Style {
    Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
}

pub(crate) fn good() -> Style {
    Style::new().fg(Color::Green)
}

/// A piece of a line: text, its style, and which of its chars the filter matched.
#[derive(Clone)]
pub(crate) struct Part<'a> {
    pub text: String,
    pub style: Style,
    pub marks: &'a [usize],
}

pub(crate) fn part(text: impl Into<String>, style: Style) -> Part<'static> {
    Part {
        text: text.into(),
        style,
        marks: &[],
    }
}

/// Lays `parts` into at most `max` columns, cutting with `…` (wide chars never split), and
/// returns the spans and the columns used.
pub(crate) fn fit_parts(parts: &[Part<'_>], max: usize) -> (Vec<Span<'static>>, usize) {
    let total: usize = parts.iter().map(|p| width(&p.text)).sum();
    let limit = if total > max {
        max.saturating_sub(1)
    } else {
        max
    };
    let mut spans = Vec::new();
    let mut used = 0;
    let mut full = false;
    for p in parts {
        if full {
            break;
        }
        let mut buf = String::new();
        let mut buf_marked = false;
        each_grapheme(&p.text, |g, index, w| {
            if used + w > limit {
                full = true;
                return false;
            }
            let marked = (index..index + g.chars().count()).any(|i| p.marks.contains(&i));
            if marked != buf_marked && !buf.is_empty() {
                spans.push(styled(std::mem::take(&mut buf), p.style, buf_marked));
            }
            buf_marked = marked;
            buf.push_str(g);
            used += w;
            true
        });
        if !buf.is_empty() {
            spans.push(styled(buf, p.style, buf_marked));
        }
    }
    if total > max && max > 0 {
        spans.push(Span::styled("…", dim()));
        used += 1;
    }
    (spans, used)
}

fn styled(text: String, style: Style, marked: bool) -> Span<'static> {
    if marked {
        Span::styled(text, style.patch(matched()))
    } else {
        Span::styled(text, style)
    }
}

/// A line of exactly `max` columns: `left` cut to fit, `right` flush right when it fits.
pub(crate) fn row_line(left: &[Part<'_>], right: &[Part<'_>], max: usize) -> Line<'static> {
    let right_w: usize = right.iter().map(|p| width(&p.text)).sum();
    let (right_spans, right_w) = if right_w + 8 <= max {
        fit_parts(right, right_w)
    } else {
        (Vec::new(), 0)
    };
    let (mut spans, used) = fit_parts(left, max - right_w);
    let pad = max.saturating_sub(used + right_w);
    if pad > 0 {
        spans.push(Span::raw(" ".repeat(pad)));
    }
    spans.extend(right_spans);
    Line::from(spans)
}

/// A plain line cut to `max` columns.
pub(crate) fn plain(text: &str, style: Style, max: usize) -> Line<'static> {
    Line::styled(truncate(&one_line(text), max), style)
}

/// `text` wrapped (never cut) after a dim `label` padded to `indent` columns; the lines
/// after the first are indented as far. Newlines in `text` start new lines.
pub(crate) fn labelled(
    label: &str,
    text: &str,
    style: Style,
    indent: usize,
    max: usize,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    labelled_rows(text, indent, max, |lead, words| {
        let first = lines.is_empty();
        lines.push(labelled_row(label, first, lead, &words, style, indent, max));
    });
    lines
}

/// How [`labelled`] lays `text` out, row by row: `row(lead, words)` for each, `lead` the
/// spaces its paragraph starts with (indented JSON indents every row of its paragraph).
pub(crate) fn labelled_rows(
    text: &str,
    indent: usize,
    max: usize,
    mut row: impl FnMut(usize, String),
) {
    let room = max.saturating_sub(indent).max(1);
    for paragraph in text.split('\n') {
        let body = paragraph.trim_start_matches(' ');
        let lead = (paragraph.len() - body.len()).min(room / 2);
        for l in wrap(body, room - lead) {
            row(lead, l);
        }
    }
}

/// One row of [`labelled`]: the dim label on the `first` row (blank on the others), then the
/// row's `words` after `lead` spaces.
pub(crate) fn labelled_row(
    label: &str,
    first: bool,
    lead: usize,
    words: &str,
    style: Style,
    indent: usize,
    max: usize,
) -> Line<'static> {
    let head = if first {
        format!("{label:<indent$}")
    } else {
        " ".repeat(indent)
    };
    let text = format!("{}{words}", " ".repeat(lead));
    row_line(&[part(head, dim()), part(text, style)], &[], max)
}

/// `text` on as many lines of `max` columns as it takes.
pub(crate) fn wrapped(text: &str, style: Style, max: usize) -> Vec<Line<'static>> {
    wrap(text, max)
        .into_iter()
        .map(|l| plain(&l, style, max))
        .collect()
}

/// A pane's frame: a titled border when there is room, and the area inside it.
pub(crate) fn pane(frame: &mut Frame<'_>, area: Rect, title: &str, focused: bool) -> Rect {
    if !layout::bordered(area) {
        return area;
    }
    let style = if focused { bold() } else { dim() };
    let title = truncate(title, area.width.saturating_sub(4) as usize);
    let block = Block::new()
        .borders(Borders::ALL)
        .border_style(style)
        .title(Span::styled(format!(" {title} "), bold()));
    frame.render_widget(block, area);
    layout::inner(area)
}

pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let area = frame.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let s: Screen = layout::screen(area);
    if let Some(r) = s.header {
        header(frame, r, app);
    }
    if let Some(r) = s.tabs {
        tabs(frame, r, app);
    }
    let view = View {
        now: app.now,
        focus: app.focus,
        focused: app.dialogs.is_empty(),
    };
    match app.unloaded(app.tab) {
        Some(why) => unloaded(frame, s.body, app, why),
        None => app.tabs.get(app.tab).draw(frame, s.body, &view),
    }
    let status_text = status(app, area.width as usize);
    match (s.status, s.footer) {
        (Some(st), Some(f)) => {
            status_line(frame, st, app, status_text.as_ref());
            footer(frame, f, app);
        }
        // One row for both: an open dialog's keys win it over the tab's line (found by review:
        // at 25×6 `/pnpm   4 matches` hid the revert dialog's `n/Esc cancel`); a toast still
        // shows over them, below.
        (None, Some(f)) => match status_text {
            Some(_) if app.dialogs.is_empty() => status_line(frame, f, app, status_text.as_ref()),
            _ => footer(frame, f, app),
        },
        _ => {}
    }
    crate::tui::dialogs::draw(frame, area, app);
    // What a key in a dialog said (a copy, its refusal) shows over the dialog, which may cover
    // the status line: the message lasts until the next key, and its end says what to do.
    if app.toast.is_some() && !app.dialogs.is_empty() {
        if let Some(r) = s.status.or(s.footer) {
            frame.render_widget(ratatui::widgets::Clear, r);
            status_line(frame, r, app, status_text.as_ref());
        }
    }
    split_flags(frame.buffer_mut());
}

/// A flag (two regional indicators, `🇨🇳`) is one grapheme two columns wide to ratatui, which
/// writes it into one cell and, when the next frame blanks that cell, writes only that column:
/// a terminal that clears a wide character whole is fine, but tmux keeps each indicator in a
/// column of its own and left the flag's second half on screen. Each indicator gets a cell of
/// its own (one column each, as tmux and `unicode-width` count a lone one), so a frame that
/// blanks the flag writes both columns; and both are written at every frame, side by side, so
/// any terminal receives the pair together and shows it as the flag it is.
fn split_flags(buf: &mut Buffer) {
    let area = buf.area;
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right().saturating_sub(1) {
            let mut chars = buf[(x, y)].symbol().chars();
            let (Some(first), Some(second), None) = (chars.next(), chars.next(), chars.next())
            else {
                continue;
            };
            if !(regional_indicator(first) && regional_indicator(second)) {
                continue;
            }
            let style = buf[(x, y)].style();
            (buf[(x, y)].set_char(first)).set_diff_option(CellDiffOption::AlwaysUpdate);
            (buf[(x + 1, y)].set_char(second))
                .set_style(style)
                .set_diff_option(CellDiffOption::AlwaysUpdate);
        }
    }
}

fn regional_indicator(c: char) -> bool {
    ('\u{1F1E6}'..='\u{1F1FF}').contains(&c)
}

/// A tab whose list could not be loaded says so where the list would be — never that the
/// database holds nothing — and where to read what is wrong.
fn unloaded(frame: &mut Frame<'_>, area: Rect, app: &App, why: &str) {
    let title = app.tabs.get(app.tab).title();
    not_loaded_saying(frame, area, &title, why, app.read_again());
}

/// The pane of a tab (`title`) whose list could not be loaded (`why`): also a tab's own, when
/// the work that fills it failed (the suspects scan, the read log).
pub(crate) fn not_loaded(frame: &mut Frame<'_>, area: Rect, title: &str, why: &str) {
    let again = crate::tui::app::READ_AGAIN_AT_REFRESH;
    not_loaded_saying(frame, area, title, why, again);
}

/// [`not_loaded`], saying `again`: when it is read again.
fn not_loaded_saying(frame: &mut Frame<'_>, area: Rect, title: &str, why: &str, again: &str) {
    let inner = pane(frame, area, &format!("{title} · not loaded"), true);
    let max = inner.width as usize;
    let mut lines = wrapped(
        &format!("{title} could not be loaded: {why}"),
        error_style(),
        max,
    );
    lines.push(Line::raw(""));
    lines.extend(wrapped(again, bold(), max));
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The fewest columns the header cuts a file name to (`很…🦀.db`): a name that must be cut
/// shorter is left out rather than shown as a stub (`…db`, `d….db`), and a name this narrow or
/// narrower is shown whole or not at all.
const NAME_MIN: usize = 8;

/// A bold black-on-`bg` badge in the header.
fn badge_part(text: &'static str, bg: Color) -> Part<'static> {
    part(
        text,
        Style::new()
            .fg(Color::Black)
            .bg(bg)
            .add_modifier(Modifier::BOLD),
    )
}

fn header(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let line = header_line(app, area.width as usize);
    frame.render_widget(Paragraph::new(line), area);
}

/// The header (README, "The terminal UI", Header): the product's name, the counts and the
/// database's path at the left, the READ-ONLY (or FILE GONE) badge and the refresh time at the
/// right. As the terminal narrows, what matters least gives way first: the path's folders, the
/// time's long form, the counts' long labels, the time, the product's name; then the counts are
/// cut and go. The file name (a long one cut in its middle) and the badge go last: they say
/// which database this is and that nothing can be changed from it; the badge is never cut, and
/// the file name is not cut below [`NAME_MIN`] columns. A part gone at one width stays gone at
/// every narrower one. Every part is kept at least two columns from the next.
fn header_line(app: &App, max: usize) -> Line<'static> {
    let product = badge_part(" memscope ", Color::Cyan);
    let figures: Vec<String> = match &app.counts {
        Some(c) => {
            // The long labels, then the short ones the header takes when it is narrow.
            let figures = |memory: [&str; 2], tombstone: [&str; 2]| {
                format!(
                    "{} · {} · {} pending · {}",
                    plural(c.memories, memory[0], memory[1]),
                    plural(c.scopes, "scope", "scopes"),
                    thousands(c.pending),
                    plural(c.tombstones, tombstone[0], tombstone[1])
                )
            };
            vec![
                figures(["identity", "identities"], ["tombstone", "tombstones"]),
                figures(["id", "ids"], ["tomb", "tombs"]),
            ]
        }
        // Figures it could not read are not repeated from before (README, Header).
        None if app.counts_unknown => vec!["counts unknown".to_string()],
        None => vec!["counting…".to_string()],
    };
    // Suspects first among the figures when there are any: they are the incident's shape.
    let figures: Vec<String> = match app.tabs.suspects.count() {
        Some(n) if n > 0 => {
            let n = n as i64;
            let (long, short) = (plural(n, "suspect", "suspects"), format!("{n} susp"));
            (figures.iter().enumerate())
                .map(|(i, f)| format!("{} · {f}", if i == 0 { &long } else { &short }))
                .collect()
        }
        _ => figures,
    };
    let path = one_line(&app.db_path);
    // The file name whole, a long one down to 20 columns (cut in its middle), until the end.
    let name_need = width(file_name(&path)).min(20);
    let long_time = (app.refreshed_at).map(|t| format!("refreshed {}", t.format("%H:%M:%S UTC")));
    let short_time = (app.refreshed_at).map(|t| t.format("%H:%M:%S").to_string());
    // The badge, then its narrower forms: without its padding, then its short word.
    let (status, narrower) = if app.file_gone {
        let f = |text| badge_part(text, Color::Red);
        (f(" FILE GONE "), [f("FILE GONE"), f("GONE")])
    } else {
        let f = |text| badge_part(text, Color::Yellow);
        (f(" READ-ONLY "), [f("READ-ONLY"), f("R/O")])
    };
    let right = |time: Option<&String>| -> Vec<Part<'static>> {
        let mut r = Vec::new();
        if app.read_only {
            r.push(status.clone());
        }
        if let Some(time) = time {
            if app.read_only {
                r.push(part(" ", Style::new()));
            }
            r.push(part(time.clone(), dim()));
        }
        r
    };
    // The forms, fullest first: (the product's name, which figures, which time).
    let short = figures.len() - 1;
    let forms = [
        (true, 0, long_time.as_ref()),
        (true, 0, short_time.as_ref()),
        (true, short, short_time.as_ref()),
        (true, short, None),
        (false, short, None),
    ];
    for (form, (with_product, fi, time)) in forms.into_iter().enumerate() {
        let right = right(time);
        let rw: usize = right.iter().map(|p| width(&p.text)).sum();
        let product_w = if with_product {
            width(&product.text) + 1
        } else {
            0
        };
        let used = product_w + width(&figures[fi]) + if rw > 0 { 2 + rw } else { 0 };
        if used + 2 + name_need > max {
            continue;
        }
        let mut left = Vec::new();
        if with_product {
            left.push(product.clone());
            left.push(part(" ", Style::new()));
        }
        left.push(part(figures[fi].clone(), bold()));
        let (mut spans, mut filled) = fit_parts(&left, max);
        // The path takes what is left, two columns from the counts and from the right side:
        // its folders give way first (`/home/…/demo.db`). Only the fullest form shows them:
        // the room a shorter time or label leaves must not bring back what went first
        // (README, Header), so the later forms show the file name as the last ones do.
        let shown = if form == 0 {
            truncate_path(&path, max - used - 2)
        } else {
            truncate_middle(file_name(&path), name_need)
        };
        if !shown.is_empty() {
            filled += 2 + width(&shown);
            spans.push(Span::raw("  "));
            spans.push(Span::styled(shown, dim()));
        }
        if !right.is_empty() {
            spans.push(Span::raw(
                " ".repeat(max.saturating_sub(filled + rw).max(2)),
            ));
            spans.extend(fit_parts(&right, rw).0);
        }
        return Line::from(spans);
    }
    // Narrower than every form: the badge, the counts cut to what the file name leaves them
    // (gone below a few columns), the file name.
    let mut parts = Vec::new();
    let mut room = max;
    if app.read_only {
        // The badge is never cut (README, Header): alone once nothing fits beside it, then
        // without its padding, then as its short word; narrower than that, the row is blank.
        if max <= width(&status.text) {
            let mut badge = std::iter::once(status).chain(narrower);
            let fits = badge.find(|b| width(&b.text) <= max);
            return Line::from(fit_parts(fits.as_slice(), max).0);
        }
        room -= width(&status.text) + 1;
        parts.extend([status, part(" ", Style::new())]);
    }
    let name_w = name_need.min(room);
    // Cut below NAME_MIN columns, the file name would name nothing (`…db`, `d….db`): it goes,
    // after the counts (README, Header).
    if name_w < name_need.min(NAME_MIN) {
        return Line::from(fit_parts(&parts, max).0);
    }
    let counts_room = room.saturating_sub(name_w + 2);
    if counts_room >= 6 {
        let (counts, _) = fit_parts(&[part(figures[short].clone(), bold())], counts_room);
        let counts: String = counts.iter().map(|s| s.content.as_ref()).collect();
        parts.push(part(counts, bold()));
        parts.push(part("  ", Style::new()));
    } else if name_need == 0 {
        parts.push(part(figures[short].clone(), bold()));
    }
    if name_w > 0 {
        parts.push(part(truncate_middle(file_name(&path), name_w), dim()));
    }
    Line::from(fit_parts(&parts, max).0)
}

fn tabs(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let bar = app.tab_bar(area.width as usize);
    let mut parts = Vec::new();
    for (tab, name) in bar.titles {
        let style = if tab == app.tab {
            selected().add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        parts.push(part(" ".repeat(bar.gap), Style::new()));
        parts.push(part(format!(" {name} "), style));
    }
    let (spans, _) = fit_parts(&parts, area.width as usize);
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// What the status line says, and where the terminal's cursor goes on it (after a query being
/// typed).
struct StatusText {
    text: String,
    style: Style,
    cursor: Option<usize>,
}

/// The status line in `max` columns: a toast when there is one (an error must not hide behind
/// the filter), else the filter line while a filter is typed or applied.
fn status(app: &App, max: usize) -> Option<StatusText> {
    if let Some(t) = &app.toast {
        let style = if t.error { error_style() } else { good() };
        return Some(StatusText {
            text: t.text.clone(),
            style,
            cursor: None,
        });
    }
    let query = match app.tabs.get(app.tab).status() {
        Status::Own(line) => {
            return line.map(|text| StatusText {
                text,
                style: Style::new(),
                cursor: None,
            })
        }
        Status::Query(query) => query,
        Status::Filter => app.memories().filter_line()?,
    };
    let (text, cursor) = query.fit(max);
    let typing = query.editing && app.dialogs.is_empty();
    Some(StatusText {
        text,
        style: Style::new(),
        cursor: typing.then_some(cursor),
    })
}

/// The most rows a toast takes: a longer one ends in `…`.
const TOAST_ROWS: usize = 6;

fn status_line(frame: &mut Frame<'_>, area: Rect, app: &App, status: Option<&StatusText>) {
    let Some(StatusText {
        text,
        style,
        cursor,
    }) = status
    else {
        return;
    };
    let max = area.width as usize;
    if app.toast.is_some() && width(text) > max {
        toast_over_the_body(frame, area, text, *style);
        return;
    }
    frame.render_widget(Paragraph::new(plain(text, *style, max)), area);
    if let Some(x) = cursor.filter(|x| *x < max) {
        frame.set_cursor_position(Position::new(area.x + x as u16, area.y));
    }
}

/// A toast wider than the status line, wrapped and drawn upward from it over the body's last
/// rows (at most [`TOAST_ROWS`], never over the header): a sentence's remedy comes last, and
/// cutting it at the edge would hide what to do.
fn toast_over_the_body(frame: &mut Frame<'_>, area: Rect, text: &str, style: Style) {
    let max = area.width as usize;
    let mut lines = wrap(text, max);
    let rows = lines.len().min(TOAST_ROWS).min(area.y as usize + 1).max(1);
    if lines.len() > rows {
        lines.truncate(rows);
        if let Some(last) = lines.last_mut() {
            *last = truncate(&format!("{last} …"), max);
        }
    }
    let top = area.y + 1 - rows as u16;
    let rect = Rect::new(area.x, top, area.width, rows as u16);
    let text: Vec<Line<'_>> = lines
        .into_iter()
        .map(|l| Line::from(Span::styled(fit(&l, max), style)))
        .collect();
    frame.render_widget(ratatui::widgets::Clear, rect);
    frame.render_widget(Paragraph::new(text), rect);
}

/// The footer: hints in order of importance, the least important dropped whole until the
/// rest fit, the help key always last.
fn footer(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let max = area.width as usize;
    let top = app.dialogs.last();
    let offered = |cmd| match top {
        Some(d) => d.offers(cmd),
        None => app.tab_offers(cmd),
    };
    let mut hints = keymap::hints(&app.contexts(), app.read_only, &offered);
    let help = match hints.last() {
        Some(h) if h.keys == keymap::HELP_LABEL => hints.pop(),
        _ => None,
    };
    let cost = |h: &keymap::Hint| width(h.keys) + 1 + width(h.text);
    let mut used = help.as_ref().map_or(0, cost);
    if app.tab == Tab::Memories && app.focus == Focus::Detail && app.dialogs.is_empty() {
        used += width("history  ");
    }
    // Two columns between hints.
    let gaps = |n: usize| (n + usize::from(help.is_some())).saturating_sub(1) * 2;
    let mut hints = keymap::fitting(&hints, |kept| {
        used + kept.iter().map(cost).sum::<usize>() + gaps(kept.len()) <= max
    });
    hints.extend(help);
    let mut parts = Vec::new();
    if app.tab == Tab::Memories && app.focus == Focus::Detail && app.dialogs.is_empty() {
        parts.push(part("history  ", bold()));
    }
    for (i, h) in hints.into_iter().enumerate() {
        if i > 0 {
            parts.push(part("  ", Style::new()));
        }
        parts.push(part(h.keys, bold().fg(Color::Cyan)));
        parts.push(part(format!(" {}", h.text), dim()));
    }
    let (spans, _) = fit_parts(&parts, max);
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
