//! Tab 6, the suspects: current `global` records whose words or message point at one place —
//! the shape of a repo rule stored as everyone's default (README, "memscope suspects"). The
//! store judges (`Store::suspects`, on the loader thread: it reads the whole current view);
//! this tab lists them widest blast radius first, shows the evidence, and `m` opens the
//! rescope dialog on the record with the suggested target filled in.

use super::{counted, Env, Shell, TabComponent, View};
use crate::model::{MemoryRecord, Scope};
use crate::store::{Suspect, UiStore};
use crate::tui::app::{Action, Dialog, Focus, Tab};
use crate::tui::dialogs::RescopeDialog;
use crate::tui::draw::{bold, dim, good, labelled, not_loaded, part, plain, row_line, wrapped};
use crate::tui::incident::TimelineMark;
use crate::tui::keymap::Command;
use crate::tui::rows::{filter_line, Cursor, Filtered, ListFilter, ListPanes, Row, Rows};
use crate::tui::text::{one_line, plural, value_text};
use crate::tui::worker::{Load, Reply};
use anyhow::Result;
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::Frame;

#[derive(Debug, Clone, Default)]
pub struct SuspectsTab {
    pub rows: Rows<Suspect>,
    /// The filter line (`/`): the list holds the suspects it matches.
    pub filter: ListFilter<Suspect>,
    /// Whether the scan has answered since the database was opened.
    pub loaded: bool,
    /// Why the last scan failed, if it did.
    pub error: Option<String>,
}

impl Row for Suspect {}

impl Filtered for Suspect {
    fn fields(&self) -> Vec<String> {
        let r = &self.record;
        vec![
            r.subject.clone(),
            r.predicate.clone(),
            value_text(&r.value),
            self.evidence.join(" "),
        ]
    }

    fn same(&self, other: &Self) -> bool {
        self.record.identity() == other.record.identity()
    }
}

impl SuspectsTab {
    /// How many suspects the last scan found (the header's figure), once it has answered —
    /// `None` when it failed: it found none it could say.
    pub fn count(&self) -> Option<usize> {
        (self.loaded && self.error.is_none()).then(|| self.filter.total())
    }

    fn selected_or_say(&self, shell: &mut Shell<'_>) -> Option<&Suspect> {
        let s = self.rows.selected();
        if let (None, Some(e)) = (s, &self.error) {
            shell.error(format!("the suspects scan failed, so none is listed: {e}"));
        } else if s.is_none() {
            shell.info(if self.loaded {
                self.filter.why_empty(
                    "no suspects: no global record's words or message point at one place",
                )
            } else {
                "the suspects are still being looked for".to_string()
            });
        }
        s
    }

    /// The scan's finding on `rec` as it is now (its version), when the last scan listed it.
    pub fn listed(&self, rec: &MemoryRecord) -> Option<&Suspect> {
        (self.filter.all().iter())
            .find(|s| s.record.identity() == rec.identity() && s.record.version == rec.version)
    }

    /// `m`: the rescope dialog on the suspect, its target the place the evidence points at.
    fn rescope(&self, shell: &mut Shell<'_>) -> Action {
        if !shell.writable() {
            return Action::None;
        }
        let Some(s) = self.selected_or_say(shell) else {
            return Action::None;
        };
        let dialog = match &s.suggested_scope {
            Some(to) => RescopeDialog::suggesting(s.record.clone(), to),
            None => RescopeDialog {
                editing: true,
                ..RescopeDialog::new(s.record.clone())
            },
        };
        shell.open(Dialog::Rescope(dialog));
        Action::PreviewRescope
    }

    /// `g`: the record in the current view, its current version highlighted.
    fn go_to(&self, shell: &mut Shell<'_>) -> Action {
        let Some(s) = self.selected_or_say(shell) else {
            return Action::None;
        };
        Action::GoTo(TimelineMark {
            identity: s.record.identity(),
            version: s.record.version,
            note: "the suspect's current value".into(),
        })
    }
}

impl TabComponent for SuspectsTab {
    filter_line!(filter narrows rows, ("suspect", "suspects"));

    fn title(&self) -> String {
        counted("Suspects", self.title_count())
    }

    fn short_names(&self) -> [&'static str; 3] {
        ["Suspects", "Suspects", "Susp"]
    }

    fn title_count(&self) -> usize {
        self.filter.total()
    }

    fn command(&mut self, cmd: Command, shell: &mut Shell<'_>) -> Option<Action> {
        Some(match cmd {
            Command::Rescope => self.rescope(shell),
            Command::GoToRecord => self.go_to(shell),
            Command::Explain => match self.selected_or_say(shell) {
                Some(s) => {
                    let r = &s.record;
                    shell.explain(&r.subject, &r.predicate, std::slice::from_ref(&r.scope))
                }
                None => Action::None,
            },
            _ => return self.filter.command(&mut self.rows, cmd, shell.focus),
        })
    }

    fn list(&mut self) -> Option<&mut dyn Cursor> {
        Some(&mut self.rows)
    }

    fn start(&mut self, _now: DateTime<Utc>) -> Option<Load> {
        Some(Load::Suspects)
    }

    /// The database could not be read: no suspect of an older scan stays to act on, and the
    /// header counts none it cannot vouch for.
    fn unload(&mut self) {
        self.filter.unload(&mut self.rows);
        self.loaded = false;
    }

    /// The header counts suspects and the current view marks them: the scan follows every
    /// refresh (on the loader thread; repeats queued meanwhile run once).
    fn start_on_refresh(&self) -> bool {
        true
    }

    fn take(&mut self, reply: &Reply, _store: &dyn UiStore, _env: &Env) -> Result<(), String> {
        if let Reply::Suspects(found) = reply {
            match found {
                Ok(list) => {
                    self.filter.load(&mut self.rows, list.clone());
                    self.loaded = true;
                    self.error = None;
                }
                Err(e) => {
                    // No key acts on a suspect of an older scan the pane no longer lists.
                    self.filter.unload(&mut self.rows);
                    self.error = Some(e.clone());
                    return Err(format!("the suspects scan failed: {e}"));
                }
            }
        }
        Ok(())
    }

    fn copy_text(&self, _focus: Focus) -> Option<String> {
        self.rows
            .selected()
            .map(|s| crate::tui::clipboard::value_text(&s.record.value))
    }

    fn draw(&self, frame: &mut Frame<'_>, body: Rect, view: &View) {
        // A failed scan counts nothing: the tab says so as a list that could not be loaded
        // does (README, "The terminal UI", Check), never `Suspects · 0`.
        if let Some(why) = &self.error {
            not_loaded(frame, body, &self.title(), why);
            return;
        }
        let empty = if !self.loaded {
            vec![("Looking for suspects…".to_string(), bold())]
        } else {
            self.filter.empty_lines(&[
                ("No suspects.", bold()),
                ("", Style::new()),
                (
                    "No global record's words or message point at one place.",
                    Style::new(),
                ),
            ])
        };
        let panes = ListPanes {
            tab: Tab::Suspects,
            title: format!("Suspects · {}", self.filter.count(self.rows.len())),
            empty: &empty,
            detail_title: "Why it looks like the rule of one place",
        };
        self.rows
            .draw(frame, body, view, &panes, list_line, detail_lines);
    }
}

/// `user:42 · package_manager = npm   5 repos · 3 reads`
fn list_line(s: &Suspect, max: usize) -> Line<'static> {
    let r = &s.record;
    let mut right = format!(" {}", plural(s.blast_radius.len() as i64, "repo", "repos"));
    if s.reads > 0 {
        right.push_str(&format!(" · {}", plural(s.reads, "read", "reads")));
    }
    row_line(
        &[
            part("! ", bold().fg(Color::Yellow)),
            part(one_line(&r.subject), Style::new()),
            part(" · ", dim()),
            part(one_line(&r.predicate), bold()),
            part(" = ", dim()),
            part(value_text(&r.value), Style::new().fg(Color::Green)),
        ],
        &[part(right, dim())],
        max,
    )
}

fn detail_lines(s: &Suspect, max: usize) -> Vec<Line<'static>> {
    let r = &s.record;
    let mut lines = Vec::new();
    lines.extend(wrapped(
        &format!(
            "{} · {} @ global = {}",
            r.subject,
            r.predicate,
            value_text(&r.value)
        ),
        bold(),
        max,
    ));
    lines.extend(labelled(
        "written",
        &format!("v{} · {}", r.version, r.source),
        dim(),
        10,
        max,
    ));
    if let Some(raw) = &r.raw {
        lines.extend(labelled("said", &format!("“{raw}”"), Style::new(), 10, max));
    }
    lines.push(Line::raw(""));
    lines.push(plain("Evidence", bold(), max));
    for e in &s.evidence {
        lines.extend(labelled("•", e, Style::new(), 2, max));
    }
    lines.push(Line::raw(""));
    let n = s.blast_radius.len();
    lines.extend(wrapped(
        &format!(
            "Blast radius: {} without a rule of {} own {} it",
            plural(n as i64, "repository", "repositories"),
            if n == 1 { "its" } else { "their" },
            if n == 1 { "gets" } else { "get" }
        ),
        bold(),
        max,
    ));
    if n > 0 {
        lines.extend(wrapped(&s.blast_radius.join(", "), Style::new(), max));
    }
    if s.reads > 0 {
        lines.extend(wrapped(
            &format!(
                "{} in the read log got this global value",
                plural(s.reads, "read", "reads")
            ),
            Style::new(),
            max,
        ));
    }
    lines.push(Line::raw(""));
    let fix = match &s.suggested_scope {
        Some(Scope::Global) | None => "m rescopes it (type the place it belongs to)".to_string(),
        Some(to) => format!("m rescopes it to {to} (a confirm states the effect first)"),
    };
    lines.extend(wrapped(&fix, good(), max));
    lines.extend(wrapped(
        "g shows it in the current view · e explains how it resolves",
        dim(),
        max,
    ));
    lines
}
