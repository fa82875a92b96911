//! Tab 4, the check: every invariant and the health figures, run off the UI thread each time
//! the tab is shown.

use super::{Env, Shell, Status, TabComponent, View};
use crate::store::CheckReport;
use crate::store::UiStore;
use crate::tui::app::{Action, Focus};
use crate::tui::draw::{bold, dim, error_style, good, pane, part, plain, row_line};
use crate::tui::rows::step;
use crate::tui::rows::Motion;
use crate::tui::text::{one_line, wrap};
use crate::tui::worker::{Failed, Load, Reply};
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

#[derive(Debug, Clone)]
pub enum CheckState {
    NotRun,
    Running,
    Done(Box<CheckReport>),
    Failed(String),
}

#[derive(Debug, Clone)]
pub struct CheckTab {
    pub state: CheckState,
    pub scroll: usize,
}

impl Default for CheckTab {
    fn default() -> Self {
        CheckTab {
            state: CheckState::NotRun,
            scroll: 0,
        }
    }
}

impl TabComponent for CheckTab {
    fn title(&self) -> String {
        "Check".into()
    }

    fn short_names(&self) -> [&'static str; 3] {
        ["Check", "Check", "Chk"]
    }

    fn has_detail(&self) -> bool {
        false
    }

    fn has_filter(&self) -> bool {
        false
    }

    fn motion(&mut self, m: Motion, _pane: Focus, shell: &mut Shell<'_>) -> Action {
        let page = shell.page;
        // The report stops where its text ends: its last screen is as far as it scrolls.
        let width = (shell.size.0 as usize).saturating_sub(2);
        let lines = self.lines(width).len();
        step(&mut self.scroll, lines.saturating_sub(page) + 1, m, page);
        Action::None
    }

    fn start(&mut self, _now: DateTime<Utc>) -> Option<Load> {
        if !matches!(self.state, CheckState::Done(_)) {
            self.state = CheckState::Running;
        }
        Some(Load::Check)
    }

    /// The database could not be read: the report of before is not what it holds now.
    fn unload(&mut self) {
        self.state = CheckState::NotRun;
    }

    fn take(&mut self, reply: &Reply, _store: &dyn UiStore, _env: &Env) -> Result<(), String> {
        match reply {
            Reply::Check(report) => self.state = CheckState::Done(report.clone()),
            Reply::Failed {
                job: Failed::Check,
                error,
            } => self.state = CheckState::Failed(error.clone()),
            _ => {}
        }
        Ok(())
    }

    /// The report has no filter line: the current view's is not shown here.
    fn status(&self) -> Status {
        Status::Own(None)
    }

    fn draw(&self, frame: &mut Frame<'_>, body: Rect, view: &View) {
        let inner = pane(frame, body, "Check · invariants and health", view.focused);
        let lines = self.lines(inner.width as usize);
        let scroll = self
            .scroll
            .min(lines.len().saturating_sub(inner.height as usize));
        let lines: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

impl CheckTab {
    /// The tab's text at `max` columns, sentences wrapped to their end.
    fn lines(&self, max: usize) -> Vec<Line<'static>> {
        match &self.state {
            CheckState::NotRun | CheckState::Running => vec![
                plain("Checking every invariant…", bold(), max),
                plain(
                    "This scans the whole database off the UI thread; keep working meanwhile.",
                    dim(),
                    max,
                ),
            ],
            CheckState::Failed(e) => {
                let mut lines = vec![plain("The check could not run:", error_style(), max)];
                wrapped(&mut lines, e, "", Style::new(), max);
                lines
            }
            CheckState::Done(report) => report_lines(report, max),
        }
    }
}

/// `text` wrapped to `max` columns, each line after `indent`.
fn wrapped(lines: &mut Vec<Line<'static>>, text: &str, indent: &str, style: Style, max: usize) {
    let width = max.saturating_sub(indent.chars().count()).max(1);
    for l in wrap(text, width) {
        lines.push(plain(&format!("{indent}{l}"), style, max));
    }
}

fn report_lines(report: &CheckReport, max: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let damage = report.integrity.as_ref().filter(|i| !i.ok);
    if let Some(integrity) = damage {
        lines.push(plain("✗ the file is damaged", error_style(), max));
        // The whole sentence: what to do comes at its end.
        wrapped(&mut lines, &integrity.sentence(), "", Style::new(), max);
    } else if report.ok {
        // PostgreSQL has no file for memscope to examine (the server guards its pages).
        let said = match report.integrity {
            Some(_) => "✓ the file is intact and all six invariants hold",
            None => "✓ all six invariants hold",
        };
        lines.push(plain(said, good(), max));
    } else {
        lines.push(plain(
            &format!("✗ {} violation(s)", report.violations.len()),
            error_style(),
            max,
        ));
    }
    lines.push(Line::raw(""));
    for (i, name) in crate::store::INVARIANT_NAMES[1..].iter().enumerate() {
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
        let verdict = if n == 0 {
            "holds".to_string()
        } else {
            format!("{n} violation(s)")
        };
        lines.push(row_line(
            &[
                part(format!(" {mark} {} ", i + 1), style),
                part(name.to_string(), Style::new()),
            ],
            &[part(verdict, style)],
            max,
        ));
    }
    for v in &report.violations {
        let said = format!("invariant {} ({}): {}", v.invariant, v.name, v.detail);
        wrapped(&mut lines, &said, "   ", error_style(), max);
    }
    lines.push(Line::raw(""));
    lines.push(plain("Health", bold(), max));
    for e in &report.health {
        let sentence = format!("! {}", e.sentence());
        wrapped(&mut lines, &sentence, "   ", bold().fg(Color::Yellow), max);
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
    lines
}
