//! Tab 5, the reads: what agents were told, newest first, narrowed by words (`/`) and a time
//! window (`s`); `Enter` explains a read as of its time, `g` opens the record it got.

use super::{edit_line, Env, LineEdit, QueryLine, Shell, Status, TabComponent, View};
use crate::model::{Considered, ReadRecord, Resolution};
use crate::store::UiStore;
use crate::tui::app::{Action, Dialog, Focus, Tab};
use crate::tui::dialogs::AsOfDialog;
use crate::tui::draw::{bold, dim, good, not_loaded, pane, part, plain, row_line, Part};
use crate::tui::incident::{read_context, Since, TimelineMark, NO_RECORD, READS_LIMIT};
use crate::tui::keymap::Command;
use crate::tui::layout;
use crate::tui::rows::{wrapped_lines, Cursor, Row, Rows};
use crate::tui::text::{
    age, ago, fit, month_day_time, one_line, plural, short_time, value_text, width, wrap,
};
use crate::tui::worker::{Load, ReadsQuery, Reply};
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// The Reads tab: the read log, newest first, narrowed by words and a time window.
#[derive(Debug, Clone, Default)]
pub struct ReadsTab {
    pub rows: Rows<ReadRecord>,
    /// What is typed in the filter line (words matched in agent, subject, predicate, context).
    pub input: String,
    pub editing: bool,
    pub since: Since,
    /// The newest query sent to the loader, and the one whose rows are on screen.
    pub wanted: Option<ReadsQuery>,
    pub shown: Option<ReadsQuery>,
    /// Why the last load of the read log failed, if it did (the list is then empty).
    pub error: Option<String>,
}

impl Row for ReadRecord {}

impl ReadsTab {
    pub fn selected(&self) -> Option<&ReadRecord> {
        self.rows.selected()
    }

    /// The query for the read log as the filter and window want it now; the newest asked.
    pub fn request(&mut self, now: DateTime<Utc>) -> ReadsQuery {
        let query = self.query(now);
        self.wanted = Some(query.clone());
        query
    }

    /// The loader's rows for `query`, unless a newer query was asked since; the same read
    /// stays selected when it is still listed. An error is the loader's, to show.
    pub fn take_rows(
        &mut self,
        query: ReadsQuery,
        rows: Result<Vec<ReadRecord>, String>,
    ) -> Result<(), String> {
        if self.wanted.as_ref() != Some(&query) {
            return Ok(());
        }
        self.shown = Some(query);
        match rows {
            Ok(rows) => {
                self.error = None;
                self.rows.set_keeping(rows, |old, new| old.id == new.id);
                Ok(())
            }
            // No key acts on a read of an older load the pane no longer lists.
            Err(e) => {
                self.rows.set(Vec::new());
                self.error = Some(e.clone());
                Err(e)
            }
        }
    }

    pub fn active(&self) -> bool {
        !self.input.trim().is_empty()
    }

    pub fn loading(&self) -> bool {
        self.wanted.is_some() && self.wanted != self.shown
    }

    /// The query for what the tab should show at `now`.
    pub fn query(&self, now: DateTime<Utc>) -> ReadsQuery {
        ReadsQuery {
            words: self.input.split_whitespace().map(str::to_string).collect(),
            since: self.since.start(now),
            limit: READS_LIMIT,
        }
    }

    /// Says why there is no read to act on.
    fn no_read(&self, shell: &mut Shell<'_>) {
        if let Some(e) = &self.error {
            shell.error(format!(
                "the read log could not be read, so no read is listed: {e}"
            ));
        } else if self.loading() {
            shell.info("the read log is still loading");
        } else {
            shell.info(
                "no logged read here: agents log them with `memscope resolve --log --agent NAME`",
            );
        }
    }

    fn explain_read(&self, shell: &mut Shell<'_>) -> Action {
        let Some(read) = self.selected().cloned() else {
            self.no_read(shell);
            return Action::None;
        };
        let id = read.id;
        shell.open(Dialog::AsOf(AsOfDialog { read, result: None }));
        Action::ExplainRead(id)
    }

    /// Opens the history of the record a read got, with the version it got highlighted.
    fn go_to_read_record(read: &ReadRecord, shell: &mut Shell<'_>) -> Action {
        match TimelineMark::of_read(read, shell.now) {
            Some(mark) => {
                shell.dialogs.clear();
                Action::GoTo(mark)
            }
            None => {
                shell.info(NO_RECORD);
                Action::None
            }
        }
    }

    /// Back on the Reads tab: leave the detail, then clear the filter.
    fn back(&mut self, shell: &mut Shell<'_>) -> Action {
        if *shell.focus == Focus::Detail {
            *shell.focus = Focus::List;
            Action::None
        } else if self.active() {
            self.input.clear();
            Action::LoadReads
        } else {
            Action::None
        }
    }
}

impl TabComponent for ReadsTab {
    fn title(&self) -> String {
        "Reads".into()
    }

    fn short_names(&self) -> [&'static str; 3] {
        ["Reads", "Reads", "Read"]
    }

    fn command(&mut self, cmd: Command, shell: &mut Shell<'_>) -> Option<Action> {
        Some(match cmd {
            Command::Filter => {
                self.editing = true;
                *shell.focus = Focus::List;
                Action::None
            }
            Command::CycleSince => {
                self.since = self.since.next();
                Action::LoadReads
            }
            Command::ExplainRead => self.explain_read(shell),
            Command::GoToRecord => match self.selected() {
                Some(read) => ReadsTab::go_to_read_record(read, shell),
                None => {
                    self.no_read(shell);
                    Action::None
                }
            },
            Command::Back => self.back(shell),
            _ => return None,
        })
    }

    fn typing(&self) -> bool {
        self.editing
    }

    /// A key in the Reads filter line.
    fn typing_key(&mut self, cmd: Option<Command>, c: Option<char>) -> Action {
        match edit_line(&mut self.input, &mut self.editing, cmd, c) {
            LineEdit::Cleared | LineEdit::Changed => Action::LoadReads,
            LineEdit::Kept | LineEdit::Nothing => Action::None,
        }
    }

    fn list(&mut self) -> Option<&mut dyn Cursor> {
        Some(&mut self.rows)
    }

    fn click(&mut self, pane: Focus, row: usize, height: usize, _shell: &mut Shell<'_>) -> Action {
        if pane == Focus::List {
            self.rows.pick(row, height, layout::read_lines(height));
        }
        Action::None
    }

    fn start(&mut self, now: DateTime<Utc>) -> Option<Load> {
        Some(Load::Reads(self.request(now)))
    }

    /// The database could not be read: no read of an older load stays to act on.
    fn unload(&mut self) {
        self.rows.set(Vec::new());
    }

    fn start_on_refresh(&self) -> bool {
        // Once shown, the read log follows every refresh.
        self.shown.is_some()
    }

    fn take(&mut self, reply: &Reply, _store: &dyn UiStore, _env: &Env) -> Result<(), String> {
        match reply {
            Reply::Reads { query, rows } => self
                .take_rows(query.clone(), rows.clone())
                .map_err(|e| format!("the read log could not be read: {e}")),
            _ => Ok(()),
        }
    }

    fn status(&self) -> Status {
        if !(self.editing || self.active()) {
            return Status::Own(None);
        }
        let progress = if self.loading() {
            "reading…".to_string()
        } else if self.error.is_some() {
            // A failed read counts nothing (the pane says why).
            "not loaded".to_string()
        } else {
            format!(
                "{} since {}",
                plural(self.rows.len() as i64, "read", "reads"),
                self.since.label()
            )
        };
        Status::Query(QueryLine {
            input: self.input.clone(),
            progress,
            editing: self.editing,
        })
    }

    fn draw(&self, frame: &mut Frame<'_>, body: Rect, view: &View) {
        draw_tab(self, frame, body, view);
    }
}

fn draw_tab(reads: &ReadsTab, frame: &mut Frame<'_>, body: Rect, view: &View) {
    // A failed read of the log counts nothing: the tab says so as a list that could not be
    // loaded does (README, "The terminal UI", Check), never `· 0 reads`.
    if let Some(why) = &reads.error {
        not_loaded(frame, body, &reads.title(), why);
        return;
    }
    let panes = layout::panes(body, Tab::Reads, view.focus);
    let focused = view.focused;
    if let Some(area) = panes.list {
        list(
            frame,
            area,
            reads,
            view.now,
            focused && view.focus == Focus::List,
        );
    }
    if let Some(area) = panes.detail {
        let inner = pane(
            frame,
            area,
            "The read",
            focused && view.focus == Focus::Detail,
        );
        let max = inner.width as usize;
        let lines = match reads.selected() {
            Some(r) => detail_lines(r, view.now, max),
            None => Vec::new(),
        };
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

fn title(r: &ReadsTab) -> String {
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
fn list(frame: &mut Frame<'_>, area: Rect, r: &ReadsTab, now: DateTime<Utc>, focused: bool) {
    r.rows.draw_pane(
        frame,
        area,
        (&title(r), focused),
        layout::read_lines,
        |max| {
            let text: &[(&str, Style)] = if r.shown.is_none() {
                &[("Reading the read log…", dim())]
            } else if r.active() || r.since.start(now).is_some() {
                &[
                    ("No logged read matches.", bold()),
                    ("Esc clears the filter; s widens the window.", dim()),
                ]
            } else {
                &[
                    ("No agent has logged a read yet.", bold()),
                    (
                        "Agents log what they were told with `memscope resolve --log --agent NAME`:",
                        dim(),
                    ),
                    (
                        "  identity and version, never the value (a delete still destroys it).",
                        dim(),
                    ),
                ]
            };
            wrapped_lines(text, max)
        },
        |rows, max, per_read| {
            let widths = column_widths(rows, max);
            move |x| read_row(x, now, max, widths, per_read)
        },
    );
}

/// The columns' widths (agent, what, context, result) for the reads on screen: as wide as
/// their widest cell, within limits, and narrower on a narrow screen.
fn column_widths(rows: &[ReadRecord], max: usize) -> [usize; 4] {
    // Columns as wide as their widest visible cell, within limits.
    let col = |f: &dyn Fn(&ReadRecord) -> String, cap: usize| {
        rows.iter()
            .map(|x| width(&f(x)))
            .max()
            .unwrap_or(0)
            .min(cap)
    };
    // As wide as `memscope reads` makes it (32): two hosts of one agent differ at the end
    // (found by an exploratory test: `claude-code@l…` twice, at 14).
    let agent_w = col(&|x| one_line(x.agent.as_deref().unwrap_or("-")), 32);
    let what_w = col(&|x| format!("{} · {}", x.subject, x.predicate), 34);
    let ctx_w = col(&read_context, 26);
    let got_w = col(&ReadRecord::got, 26);
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
    widths
}

/// A read on `per_read` lines (columns `widths`: agent, what, context, result): its note and
/// what it shadowed go on the second line, or after the result on a single line.
fn read_row(
    x: &ReadRecord,
    now: DateTime<Utc>,
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
        part(format!("{:>4}  ", age(now, &x.at)), dim()),
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
        part(fit(&x.got(), got_w), got_style),
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

fn detail_lines(r: &ReadRecord, now: DateTime<Utc>, max: usize) -> Vec<Line<'static>> {
    let mut lines = vec![row_line(
        &[
            label("read"),
            part(
                format!(
                    "#{} · {} UTC ({})",
                    r.id,
                    short_time(&r.at),
                    ago(now, &r.at)
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
        Some(_) => (r.got(), good().add_modifier(Modifier::BOLD)),
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
/// One scope of a replayed chain: its mark, its scope, and what it held. A scope whose content
/// was destroyed since says so, its time in the timeline's form; when that does not fit beside
/// the scope it wraps under it, never cut (found by review: "…content destro…" and a raw
/// RFC 3339 time in the explain-as-of-read dialog).
pub(crate) fn considered_lines(
    c: &Considered,
    now: DateTime<Utc>,
    max: usize,
) -> Vec<Line<'static>> {
    let (mark, style) = if c.state.starts_with("wins") {
        ("★ wins     ", good().add_modifier(Modifier::BOLD))
    } else if c.state.starts_with("shadowed") {
        ("  shadowed ", Style::new().fg(Color::Yellow))
    } else if c.state == "deleted" {
        ("  deleted  ", Style::new().fg(Color::Red))
    } else {
        ("  absent   ", dim())
    };
    let scope = fit(&one_line(&c.scope), 24);
    let mut parts = vec![part(mark, style), part(scope.clone(), bold())];
    match &c.value {
        Some(v) => parts.push(part(value_text(v), Style::new().fg(Color::Green))),
        // Purged since: it existed, its content is gone.
        None if c.found => {
            let note = match &c.deleted_at {
                Some(at) => format!(
                    "(existed; deleted {}, content destroyed)",
                    month_day_time(at)
                ),
                None => {
                    (c.state.split_once(' ').map(|(_, rest)| rest.to_string())).unwrap_or_default()
                }
            };
            let lead = width(mark) + width(&scope);
            if lead + width(&note) <= max {
                parts.push(part(note, Style::new().fg(Color::Red)));
            } else {
                // Under the scope when there is room for words there, else under the mark.
                let indent = if max.saturating_sub(lead) >= 16 {
                    lead
                } else {
                    width(mark)
                };
                let mut wrapped = wrap(&note, max.saturating_sub(indent)).into_iter();
                if indent == lead {
                    let first = wrapped.next().unwrap_or_default();
                    parts.push(part(first, Style::new().fg(Color::Red)));
                }
                let mut lines = vec![row_line(&parts, &[], max)];
                for l in wrapped {
                    lines.push(row_line(
                        &[
                            part(" ".repeat(indent), Style::new()),
                            part(l, Style::new().fg(Color::Red)),
                        ],
                        &[],
                        max,
                    ));
                }
                return lines;
            }
        }
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
    vec![row_line(&parts, &[], max)]
}

pub(crate) fn winner(r: &Resolution) -> String {
    match (&r.value, &r.scope, r.version) {
        (Some(v), Some(s), Some(n)) => format!("{} from {s} v{n}", value_text(v)),
        (None, Some(s), _) => format!("a value from {s} whose content was destroyed since"),
        _ => "nothing".into(),
    }
}
