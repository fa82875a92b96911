//! Tab 2, the pending queue: writes that named candidate scopes wait here for a human; `g`,
//! `r`, `t` write one to a candidate and `x` rejects it, each after a confirm that states the
//! store's own preview of the effect.

use super::{counted, Env, Shell, TabComponent, View};
use crate::model::{PendingItem, Scope};
use crate::store::UiStore;
use crate::tui::app::{Action, ConfirmDialog, Curation, Dialog, Focus, Tab};
use crate::tui::dialogs::confirm::Alternatives;
use crate::tui::draw::{bold, dim, part, plain, row_line};
use crate::tui::keymap::Command;
use crate::tui::rows::{filter_line, Cursor, Filtered, ListFilter, ListPanes, Row, Rows};
use crate::tui::text::{
    age, ago, one_line, plural, truncate, value_text, width, wrap, wrap_at_most,
};
use anyhow::Result;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::Frame;
use std::cell::RefCell;
use std::sync::Arc;

/// What one choice for a pending item would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// `g`, `r` or `t`: the key of the choice's kind.
    pub key: char,
    /// Which of the item's candidates of that kind it is, from 0: the key opens the confirm on
    /// the first, and `Tab` there moves to the next (an item the scope guard queued offers the
    /// current repository and the one the words name — both must be reachable).
    pub nth: usize,
    pub scope: Scope,
    pub effect: String,
}

impl Choice {
    /// `r`, `r Tab`, `r Tab Tab`: the keys that reach this choice's confirm (past three Tabs,
    /// `r Tab*4`: ASCII, so its width is the same on every terminal).
    pub fn keys(&self) -> String {
        match self.nth {
            n @ 0..=3 => format!("{}{}", self.key, " Tab".repeat(n)),
            n => format!("{} Tab*{n}", self.key),
        }
    }

    /// `global: supersedes pnpm (v1) with npm`: the scope and what writing there does, as the
    /// preview pane and the confirm both state it.
    pub fn statement(&self) -> String {
        format!("{}: {}", self.scope, self.effect)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingPreview {
    pub pending_id: i64,
    pub choices: Vec<Choice>,
}

#[derive(Debug, Clone, Default)]
pub struct PendingTab {
    pub rows: Rows<PendingItem>,
    /// The filter line (`/`): the list holds the items it matches.
    pub filter: ListFilter<PendingItem>,
    /// What each choice for the selected item would do (loaded by `sync`).
    pub preview: Option<PendingPreview>,
    /// The user's words of the item drawn last, wrapped to the pane: a long message (100 kB)
    /// is wrapped once, not at every frame.
    said: RefCell<Option<Said>>,
}

/// [`said_lines`] of one item's words at one width.
#[derive(Debug, Clone)]
struct Said {
    id: i64,
    max: usize,
    bytes: usize,
    lines: Arc<Vec<Line<'static>>>,
}

impl Row for PendingItem {}

impl Filtered for PendingItem {
    fn fields(&self) -> Vec<String> {
        let candidates: Vec<String> = self.candidates.iter().map(|c| c.to_string()).collect();
        vec![
            self.subject.clone(),
            self.predicate.clone(),
            value_text(&self.value),
            candidates.join(" "),
            self.raw.clone().unwrap_or_default(),
        ]
    }

    fn same(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl PendingTab {
    /// `g`, `r`, `t`: a confirm that states the preview pane's sentence for this key.
    fn resolve(&self, key: char, shell: &mut Shell<'_>) -> Action {
        // Items resolved or rejected leave it empty too: it says nothing waits, not why.
        let empty =
            (self.filter).why_empty("the pending queue is empty: nothing waits for a human");
        let Some(item) = shell.curating(&self.rows, &empty) else {
            return Action::None;
        };
        let wanted = match key {
            'g' => "global",
            'r' => "repo",
            _ => "task",
        };
        if !item.candidates.iter().any(|c| c.kind() == wanted) {
            let names: Vec<String> = item.candidates.iter().map(|c| c.to_string()).collect();
            let text = format!(
                "{key} does nothing here: #{} has no {wanted} candidate (its candidates are {})",
                item.id,
                names.join(", ")
            );
            shell.info(text);
            return Action::None;
        }
        // The pane may be hidden at small sizes, and the effect is the store's to say, once.
        let dialog = self
            .preview
            .as_ref()
            .filter(|p| p.pending_id == item.id)
            .and_then(|p| {
                let first = p.choices.iter().find(|c| c.key == key)?;
                resolve_confirm(item, p, &first.scope)
            });
        let Some(dialog) = dialog else {
            shell.info("the preview of its choices is still loading: press it again");
            return Action::None;
        };
        shell.open(Dialog::Confirm(dialog));
        Action::None
    }

    fn reject(&self, shell: &mut Shell<'_>) -> Action {
        let empty = (self.filter).why_empty("the pending queue is empty: nothing to reject");
        let Some(item) = shell.curating(&self.rows, &empty) else {
            return Action::None;
        };
        shell.open(Dialog::Confirm(ConfirmDialog {
            title: format!("Reject pending #{}?", item.id),
            lines: vec![
                pending_line(item),
                "Nothing is written to memory; the item is kept as rejected.".into(),
            ],
            yes: "reject".into(),
            curation: Curation::Reject {
                pending_id: item.id,
            },
            alternatives: None,
        }));
        Action::None
    }
}

impl TabComponent for PendingTab {
    filter_line!(filter narrows rows, ("item", "items"));

    fn title(&self) -> String {
        counted("Pending", self.title_count())
    }

    fn short_names(&self) -> [&'static str; 3] {
        ["Pending", "Pending", "Pend"]
    }

    fn title_count(&self) -> usize {
        self.filter.total()
    }

    fn command(&mut self, cmd: Command, shell: &mut Shell<'_>) -> Option<Action> {
        Some(match cmd {
            Command::ResolveGlobal => self.resolve('g', shell),
            Command::ResolveRepo => self.resolve('r', shell),
            Command::ResolveTask => self.resolve('t', shell),
            Command::Reject => self.reject(shell),
            Command::Explain => match self.rows.selected() {
                Some(p) => shell.explain(&p.subject, &p.predicate, &p.candidates),
                // Said, as g/r/t/x say it (found by review: `e` here did nothing, silently).
                None => {
                    shell.info(
                        (self.filter).why_empty("the pending queue is empty: nothing to explain"),
                    );
                    Action::None
                }
            },
            _ => return self.filter.command(&mut self.rows, cmd, shell.focus),
        })
    }

    fn list(&mut self) -> Option<&mut dyn Cursor> {
        Some(&mut self.rows)
    }

    fn reload(&mut self, store: &dyn UiStore, _env: &Env) -> Result<()> {
        self.filter.load(&mut self.rows, store.pending(false)?);
        self.preview = None;
        Ok(())
    }

    fn unload(&mut self) {
        self.filter.unload(&mut self.rows);
        self.preview = None;
    }

    fn sync(&mut self, store: &dyn UiStore, _env: &Env) -> Result<()> {
        let want = self.rows.selected();
        if want.map(|p| p.id) != self.preview.as_ref().map(|p| p.pending_id) {
            self.preview = match want {
                Some(item) => Some(preview(store, item)?),
                None => None,
            };
        }
        Ok(())
    }

    fn copy_text(&self, _focus: Focus) -> Option<String> {
        self.rows
            .selected()
            .map(|p| crate::tui::clipboard::value_text(&p.value))
    }

    fn draw(&self, frame: &mut Frame<'_>, body: Rect, view: &View) {
        let empty = self.filter.empty_lines(&[
            ("No ambiguous writes wait for a human.", bold()),
            (
                "A write that names candidate scopes (--ambiguous global,repo:x; MCP's scope unsure) or that the scope guard queued lands here.",
                dim(),
            ),
        ]);
        let panes = ListPanes {
            tab: Tab::Pending,
            title: format!(
                "Pending queue · {} open",
                self.filter.count(self.rows.len())
            ),
            empty: &empty,
            detail_title: "What each choice does",
        };
        let row = |p: &PendingItem, max| {
            let age = part(format!(" {:>3}", age(view.now, &p.created_at)), dim());
            row_line(&item_parts(p, Style::new()), &[age], max)
        };
        let detail = |p: &PendingItem, max| self.detail_lines(p, view, max);
        self.rows.draw(frame, body, view, &panes, row, detail);
    }
}

/// The user's words as the detail pane shows them: whole, wrapped under their label (the pane
/// scrolls: Tab, then j/k) — on a pane too narrow to hang them, below it.
fn said_lines(raw: &str, max: usize) -> Vec<Line<'static>> {
    let label = "said      ";
    let text = format!("“{}”", one_line(raw));
    if max <= width(label) + 8 {
        let mut lines = vec![plain(label.trim_end(), dim(), max)];
        lines.extend(
            wrap(&text, max)
                .into_iter()
                .map(|l| plain(&l, Style::new(), max)),
        );
        return lines;
    }
    hanging(label, &text, Style::new(), usize::MAX, max)
}

/// `text` wrapped under its first column in at most `rows` rows (the end kept, as in every
/// sentence the UI cuts), `label` before its first row — on a pane wider than the label.
fn hanging(label: &str, text: &str, style: Style, rows: usize, max: usize) -> Vec<Line<'static>> {
    let hang = width(label);
    wrap_at_most(text, max - hang, rows)
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| {
            let lead = if i == 0 {
                part(label.to_string(), dim())
            } else {
                part(" ".repeat(hang), Style::new())
            };
            row_line(&[lead, part(chunk, style)], &[], max)
        })
        .collect()
}

impl PendingTab {
    /// [`said_lines`] of `p`, wrapped again only when the item or the width changed.
    fn said(&self, p: &PendingItem, raw: &str, max: usize) -> Arc<Vec<Line<'static>>> {
        let mut cache = self.said.borrow_mut();
        let fresh = cache
            .as_ref()
            .is_some_and(|c| c.id == p.id && c.max == max && c.bytes == raw.len());
        if !fresh {
            *cache = Some(Said {
                id: p.id,
                max,
                bytes: raw.len(),
                lines: Arc::new(said_lines(raw, max)),
            });
        }
        match cache.as_ref() {
            Some(c) => Arc::clone(&c.lines),
            None => Arc::new(Vec::new()),
        }
    }

    fn detail_lines(&self, p: &PendingItem, view: &View, max: usize) -> Vec<Line<'static>> {
        let mut lines = vec![row_line(&item_parts(p, bold()), &[], max)];
        // A label and its text, wrapped under the text's first column in at most a few rows
        // (the end kept, as in every sentence the UI cuts): a source, the words, the guard's
        // evidence are read to their end.
        let labelled_in =
            |label: &str, text: String, style: Style, rows: usize| -> Vec<Line<'static>> {
                if max <= width(label) + 8 {
                    return vec![row_line(
                        &[part(label.to_string(), dim()), part(text, style)],
                        &[],
                        max,
                    )];
                }
                hanging(label, &text, style, rows, max)
            };
        let labelled = |label: &str, text: String, style: Style| labelled_in(label, text, style, 3);
        if let Some(raw) = &p.raw {
            // The user's words decide the scope: read whole, however long.
            lines.extend(self.said(p, raw, max).iter().cloned());
        }
        let source = format!(
            "{} · causal_seq {} · {}",
            one_line(&p.source),
            p.causal_seq,
            ago(view.now, &p.created_at)
        );
        lines.extend(labelled("source    ", source, Style::new()));
        if let Some(reason) = &p.reason {
            // The scope guard's evidence: why memscope, not the writer, queued it.
            lines.extend(labelled(
                "guard     ",
                one_line(reason),
                Style::new().fg(Color::Yellow),
            ));
        }
        if let Some(from) = &p.merged_from {
            // A value the v4 spelling merge queued: two spellings of one memory disagreed.
            let yellow = Style::new().fg(Color::Yellow);
            lines.extend(labelled(
                "merged    ",
                format!("from {}", one_line(from)),
                yellow,
            ));
            let why = "two spellings disagreed: resolving makes this value current, x keeps the current one";
            lines.extend(labelled("          ", why.to_string(), yellow));
        }
        let names: Vec<String> = p.candidates.iter().map(|c| c.to_string()).collect();
        lines.extend(labelled("choices   ", names.join(" | "), Style::new()));
        lines.push(Line::raw(""));
        match &self.preview {
            Some(preview) if preview.pending_id == p.id => {
                lines.extend(choice_lines(preview, max));
            }
            _ => lines.push(plain("loading the choices…", dim(), max)),
        }
        lines
    }
}

/// `#7 user:42 · package_manager = npm`, the value in `value_style`'s weight.
fn item_parts(p: &PendingItem, weight: Style) -> Vec<crate::tui::draw::Part<'static>> {
    vec![
        part(format!("#{} ", p.id), dim()),
        part(one_line(&p.subject), Style::new()),
        part(" · ", dim()),
        part(one_line(&p.predicate), bold()),
        part(" = ", dim()),
        part(value_text(&p.value), weight.fg(Color::Green)),
    ]
}

/// `g → global: supersedes …` for each choice, the keys that do nothing, and `x`.
fn choice_lines(preview: &PendingPreview, max: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let keys = preview
        .choices
        .iter()
        .map(|c| width(&c.keys()))
        .max()
        .unwrap_or(1);
    for c in &preview.choices {
        let key = format!("{:<keys$} → ", c.keys());
        let style = if c.effect.starts_with("rejected") || c.effect.starts_with("stale") {
            Style::new().fg(Color::Yellow)
        } else {
            Style::new()
        };
        // The effect wraps under itself: it may name a blast radius.
        let head = format!("{}: ", c.scope);
        let hang = width(&key) + width(&head);
        for (i, chunk) in wrap_at_most(&c.effect, max.saturating_sub(hang).max(12), 6)
            .into_iter()
            .enumerate()
        {
            let lead = if i == 0 {
                vec![
                    part(key.clone(), bold().fg(Color::Cyan)),
                    part(head.clone(), bold()),
                ]
            } else {
                vec![part(" ".repeat(hang), Style::new())]
            };
            let mut parts = lead;
            parts.push(part(chunk, style));
            lines.push(row_line(&parts, &[], max));
        }
    }
    for (key, kind) in [('g', "global"), ('r', "repo"), ('t', "task")] {
        if !preview.choices.iter().any(|c| c.key == key) {
            lines.push(row_line(
                &[
                    part(format!("{key:<keys$}   "), dim()),
                    part(format!("no {kind} candidate: does nothing"), dim()),
                ],
                &[],
                max,
            ));
        }
    }
    lines.push(row_line(
        &[
            part(format!("{:<keys$} → ", 'x'), bold().fg(Color::Cyan)),
            part("reject: nothing is written", Style::new()),
        ],
        &[],
        max,
    ));
    lines
}

/// The widest a value runs inside a choice's sentence. The item's detail above shows it whole;
/// a sentence that names it twice (what it supersedes, who else would get it) must keep its
/// every clause on screen, the blast radius above all, at any length of value.
const VALUE_IN_SENTENCE: usize = 40;

/// `v` as a choice's sentence names it: one line, at most [`VALUE_IN_SENTENCE`] columns.
fn in_sentence(v: &serde_json::Value) -> String {
    truncate(&value_text(v), VALUE_IN_SENTENCE)
}

/// What each candidate scope of `item` would do: the store's own decision
/// (`Store::preview_pending`), never a rule restated here.
pub(crate) fn preview(store: &dyn UiStore, item: &PendingItem) -> Result<PendingPreview> {
    let mut choices: Vec<Choice> = Vec::new();
    for (scope, decision) in store.preview_pending(item.id)? {
        let key = match scope {
            Scope::Global => 'g',
            Scope::Repo(_) => 'r',
            Scope::Task(_) => 't',
        };
        let nth = choices.iter().filter(|c| c.key == key).count();
        let mut effect = decision.effect(&scope, &item.value, &in_sentence);
        // Who else would get the item's value: said only when global would hold it.
        if scope == Scope::Global && decision.leaves_value_current() {
            // Who else would get it: the repositories without a rule of their own.
            let n = store.blast_radius(&item.subject, &item.predicate)?.len();
            if n > 0 {
                effect.push_str(&format!(
                    "; {} without a rule of {} own would get {}",
                    plural(n as i64, "repository", "repositories"),
                    if n == 1 { "its" } else { "their" },
                    in_sentence(&item.value)
                ));
            }
        }
        choices.push(Choice {
            key,
            nth,
            scope,
            effect,
        });
    }
    Ok(PendingPreview {
        pending_id: item.id,
        choices,
    })
}

/// The confirm of writing `item` to `scope`, stating `preview`'s sentence for it, with the
/// item's other candidates of that kind a `Tab` away. `None` when the preview no longer offers
/// `scope`.
pub(crate) fn resolve_confirm(
    item: &PendingItem,
    preview: &PendingPreview,
    scope: &Scope,
) -> Option<ConfirmDialog> {
    let kind: Vec<Choice> = (preview.choices.iter())
        .filter(|c| c.scope.kind() == scope.kind())
        .cloned()
        .collect();
    let at = kind.iter().position(|c| &c.scope == scope)?;
    Some(ConfirmDialog::resolve(
        item.id,
        pending_line(item),
        Alternatives { choices: kind, at },
    ))
}

/// `user:42 · package_manager = npm`: a pending item as its confirms name it.
pub(crate) fn pending_line(item: &PendingItem) -> String {
    format!(
        "{} · {} = {}",
        item.subject,
        item.predicate,
        value_text(&item.value)
    )
}
