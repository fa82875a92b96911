//! Tab 3, the tombstones: what was deleted, and `u` to lift a tombstone after a confirm.

use super::{counted, Env, Shell, TabComponent, View};
use crate::model::{Identity, Tombstone};
use crate::store::UiStore;
use crate::tui::app::{Action, ConfirmDialog, Curation, Dialog, Tab};
use crate::tui::draw::{bold, dim, labelled, part, row_line, wrapped};
use crate::tui::keymap::Command;
use crate::tui::rows::{filter_line, Cursor, Filtered, ListFilter, ListPanes, Row, Rows};
use crate::tui::text::{age, ago, one_line, short_time};
use anyhow::Result;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::Frame;

#[derive(Debug, Clone, Default)]
pub struct TombstonesTab {
    pub rows: Rows<Tombstone>,
    /// The filter line (`/`): the list holds the tombstones it matches.
    pub filter: ListFilter<Tombstone>,
}

impl Row for Tombstone {}

impl Filtered for Tombstone {
    fn fields(&self) -> Vec<String> {
        vec![
            self.subject.clone(),
            self.predicate.clone(),
            self.scope.to_string(),
            self.reason.clone().unwrap_or_default(),
        ]
    }

    fn same(&self, other: &Self) -> bool {
        (&self.subject, &self.predicate, &self.scope)
            == (&other.subject, &other.predicate, &other.scope)
    }
}

impl TombstonesTab {
    /// `u`: a confirm that states what a restore does and does not bring back.
    fn restore(&self, shell: &mut Shell<'_>) -> Action {
        let empty = self.filter.why_empty("there are no tombstones to restore");
        let Some(t) = shell.curating(&self.rows, &empty) else {
            return Action::None;
        };
        let id = Identity {
            subject: t.subject.clone(),
            predicate: t.predicate.clone(),
            scope: t.scope.clone(),
        };
        shell.open(Dialog::Confirm(ConfirmDialog {
            title: "Restore this identity?".into(),
            lines: vec![
                format!("{id}"),
                "Lifts the tombstone: later writes to it are accepted again.".into(),
                "The purged values and raw texts do not come back.".into(),
            ],
            yes: "restore".into(),
            curation: Curation::Restore(id),
            alternatives: None,
        }));
        Action::None
    }
}

impl TabComponent for TombstonesTab {
    filter_line!(filter narrows rows, ("tombstone", "tombstones"));

    fn title(&self) -> String {
        counted("Tombstones", self.title_count())
    }

    fn short_names(&self) -> [&'static str; 3] {
        ["Tombstones", "Tombs", "Tomb"]
    }

    fn title_count(&self) -> usize {
        self.filter.total()
    }

    fn command(&mut self, cmd: Command, shell: &mut Shell<'_>) -> Option<Action> {
        match cmd {
            Command::Restore => Some(self.restore(shell)),
            Command::Explain => Some(match self.rows.selected() {
                Some(t) => shell.explain(&t.subject, &t.predicate, std::slice::from_ref(&t.scope)),
                None => {
                    shell.info(self.filter.why_empty("there are no tombstones to explain"));
                    Action::None
                }
            }),
            _ => self.filter.command(&mut self.rows, cmd, shell.focus),
        }
    }

    fn list(&mut self) -> Option<&mut dyn Cursor> {
        Some(&mut self.rows)
    }

    fn reload(&mut self, store: &dyn UiStore, _env: &Env) -> Result<()> {
        self.filter.load(&mut self.rows, store.tombstones()?);
        Ok(())
    }

    fn unload(&mut self) {
        self.filter.unload(&mut self.rows);
    }

    fn draw(&self, frame: &mut Frame<'_>, body: Rect, view: &View) {
        let empty = (self.filter).empty_lines(&[("Nothing has been deleted.", bold())]);
        let panes = ListPanes {
            tab: Tab::Tombstones,
            title: format!("Tombstones · {}", self.filter.count(self.rows.len())),
            empty: &empty,
            detail_title: "Tombstone",
        };
        self.rows.draw(
            frame,
            body,
            view,
            &panes,
            |t, max| list_line(t, view, max),
            |t, max| detail_lines(t, view, max),
        );
    }
}

/// `user:42 · package_manager @ global  reason   v3 2d`
fn list_line(t: &Tombstone, view: &View, max: usize) -> Line<'static> {
    let reason = one_line(t.reason.as_deref().unwrap_or("no reason given"));
    row_line(
        &[
            part(one_line(&t.subject), Style::new()),
            part(" · ", dim()),
            part(one_line(&t.predicate), bold()),
            part(" @ ", dim()),
            part(t.scope.to_string(), Style::new().fg(Color::Cyan)),
            part(format!("  {reason}"), dim()),
        ],
        &[part(
            format!(" v{} {:>3}", t.version, age(view.now, &t.deleted_at)),
            dim(),
        )],
        max,
    )
}

fn detail_lines(t: &Tombstone, view: &View, max: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    lines.extend(wrapped(
        &format!("{} · {} @ {}", t.subject, t.predicate, t.scope),
        bold(),
        max,
    ));
    let deleted = format!(
        "{} ({})",
        short_time(&t.deleted_at),
        ago(view.now, &t.deleted_at)
    );
    lines.extend(labelled("deleted", &deleted, Style::new(), 10, max));
    let reason = t.reason.as_deref().unwrap_or("no reason given");
    lines.extend(labelled("reason", reason, Style::new(), 10, max));
    lines.push(row_line(
        &[
            part("tombstone ", dim()),
            part(format!("v{}", t.version), Style::new()),
        ],
        &[],
        max,
    ));
    lines.push(Line::raw(""));
    // The pane's own help is wrapped, never cut: it says what u will and will not do.
    lines.extend(wrapped(
        "Writes to this identity are rejected while it is deleted.",
        Style::new(),
        max,
    ));
    lines.extend(wrapped(
        "u restores it (after a confirm); the purged content does not come back.",
        dim(),
        max,
    ));
    lines
}
