//! Tab 1, the current view: every live record grouped by scope (foldable), the fuzzy filter,
//! and the history pane (`timeline`) of the selected record. The list pages through the store
//! (`list::MemoryList`); the filter runs on the workers and its replies land here.

use super::{edit_line, Env, LineEdit, QueryLine, Shell, Status, TabComponent, View};
use crate::model::{Identity, MemoryRecord, Scope};
use crate::store::UiStore;
use crate::tui::app::{Action, DeleteDialog, Dialog, FilterState, Focus, Tab};
use crate::tui::dialogs::{RescopeDialog, RevertDialog};
use crate::tui::draw::{bold, dim, good, pane, part, plain, row_line, wrapped, Part};
use crate::tui::incident::TimelineMark;
use crate::tui::keymap::{Command, Context};
use crate::tui::layout;
use crate::tui::list::{FilterResults, ListItem, ListRow, MemoryList, Pos, Source};
use crate::tui::rows::{Motion, Row};
use crate::tui::text::{
    age, listed_value, one_line, plural, preview_size, shares, shell_lines, thousands,
    truncate_middle, width,
};
use crate::tui::timeline::Timeline;
use crate::tui::worker::{Failed, FilterJob, HeaderCounts, Reply};
use anyhow::Result;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Clone, Default)]
pub struct MemoriesTab {
    pub list: MemoryList,
    pub folded: BTreeSet<String>,
    pub filter: FilterState,
    /// The row selected when a refresh re-ran the filter: reselected when the results land.
    filter_anchor: Option<ListRow>,
    /// A typed query's first record is to be selected once its matches show one: the first
    /// reply of a long scan may hold none (found by review: after a burst the selection stayed
    /// on the group header, one `j` short of where the same keys typed slowly went).
    first_owed: bool,
    /// The database's figures (the list's title) and the records of each scope (group headers).
    counts: Option<HeaderCounts>,
    pub scope_counts: HashMap<String, i64>,
    /// The history pane.
    pub timeline: Timeline,
    /// The subject and predicate of every suspect (tab 6), marked in the list.
    /// Sorted, so a drawn row looks itself up without building a key.
    suspects: Vec<(String, String)>,
    /// This database, for the `--db` of the commands the empty view suggests (so a pasted
    /// command writes where this UI looks, not to the default database); quoted as it is drawn.
    pub db_arg: String,
    /// A database of its own for the demo the empty view suggests (`None`: `memscope demo`'s
    /// default), never this one: `demo` replaces the database it is given.
    pub demo_arg: Option<String>,
    /// What waits for the filter's matches, in words (the session's held keys, set before
    /// each frame): the filter line says it after the scan's progress.
    pub waiting: Option<String>,
}

/// The rows' source for the current mode (disjoint borrows of the tab's fields).
fn source<'a>(folded: &'a BTreeSet<String>, filter: &'a FilterState) -> Source<'a> {
    match &filter.results {
        Some(results) if filter.active() => Source::Filter {
            results,
            collapsed: folded,
        },
        _ => Source::Keyset { collapsed: folded },
    }
}

impl MemoriesTab {
    pub fn selected_record(&self) -> Option<&MemoryRecord> {
        self.list.selected_record()
    }

    /// Whether the welcome of an empty database takes the whole body (no panes to point at).
    pub fn welcome(&self) -> bool {
        self.list.is_empty() && !self.filter.active()
    }

    /// Whether the filter has results still to come.
    pub fn filtering(&self) -> bool {
        let f = &self.filter;
        f.active()
            && f.results
                .as_ref()
                .is_none_or(|r| r.generation != f.generation || !r.done)
    }

    // The loop's side: each of these is called by the session with the store.

    /// Moves in the list (`Action::Move`).
    pub fn move_by(&mut self, store: &dyn UiStore, m: Motion, page: usize) -> Result<()> {
        self.first_owed = false;
        let src = source(&self.folded, &self.filter);
        self.list.apply(&src, store, m, page)
    }

    /// Fills the window after a resize.
    pub fn fill(&mut self, store: &dyn UiStore, env: &Env) -> Result<()> {
        self.timeline.follow(env.screen());
        let src = source(&self.folded, &self.filter);
        self.list.fill(&src, store, env.page)
    }

    /// Folds or unfolds a scope group (`Action::Fold`), its header staying selected.
    pub fn fold(
        &mut self,
        store: &dyn UiStore,
        scope: String,
        folded: bool,
        page: usize,
    ) -> Result<()> {
        self.first_owed = false;
        if folded {
            self.folded.insert(scope.clone());
        } else {
            self.folded.remove(&scope);
        }
        let header = ListRow {
            pos: Pos::Key {
                scope: scope.clone(),
                record: None,
            },
            item: ListItem::Header { scope },
        };
        let anchor = self.anchor_for(&header);
        self.reload_list(store, anchor, page)
    }

    /// Where a row of the previous list sits in the current mode's list.
    fn anchor_for(&self, row: &ListRow) -> Option<Pos> {
        match &self.filter.results {
            Some(r) if self.filter.active() => r.position_of(row),
            _ => Some(row.keyset_pos()),
        }
    }

    fn reload_list(&mut self, store: &dyn UiStore, anchor: Option<Pos>, page: usize) -> Result<()> {
        let src = source(&self.folded, &self.filter);
        self.list.reload(&src, store, anchor.as_ref(), page)
    }

    /// A new query (`Action::Filter`): the job for the filter worker, or `None` when the
    /// filter was cleared (the list is back to the unfiltered view on the same row; the
    /// worker's running scan is outdated by the new generation).
    pub fn start_filter(
        &mut self,
        store: &dyn UiStore,
        query: String,
        progressive: bool,
        page: usize,
    ) -> Result<Option<FilterJob>> {
        self.filter.generation += 1;
        self.first_owed = false;
        if query.is_empty() {
            let anchor = self.list.selected().map(|r| r.keyset_pos());
            self.filter.results = None;
            self.filter.input.clear();
            self.reload_list(store, anchor, page)?;
            return Ok(None);
        }
        if progressive {
            self.filter_anchor = None;
        }
        Ok(Some(FilterJob {
            generation: self.filter.generation,
            query,
            progressive,
        }))
    }

    /// On a refresh: the filter runs again (its current results stay until the new ones are
    /// complete, and the selected row is reselected in them).
    pub fn rerun_filter(&mut self, store: &dyn UiStore, page: usize) -> Result<Option<FilterJob>> {
        if !self.filter.active() {
            return Ok(None);
        }
        self.filter_anchor = self.list.selected().cloned();
        let query = self.filter.input.clone();
        self.start_filter(store, query, false, page)
    }

    /// Drops the filter (typed or applied); the generation to cancel on the worker.
    pub fn drop_filter(&mut self) -> Option<u64> {
        let f = &mut self.filter;
        if !(f.active() || f.editing) {
            return None;
        }
        f.editing = false;
        f.input.clear();
        f.results = None;
        f.generation += 1;
        let generation = f.generation;
        self.first_owed = false;
        Some(generation)
    }

    fn take_filter(
        &mut self,
        store: &dyn UiStore,
        generation: u64,
        runs: &[(String, Vec<i64>)],
        scanned: u64,
        done: bool,
        page: usize,
    ) -> Result<()> {
        let f = &mut self.filter;
        if generation != f.generation || !f.active() {
            return Ok(());
        }
        let fresh = f
            .results
            .as_ref()
            .is_none_or(|r| r.generation != generation);
        // A typed query starts at the top; a refresh re-run reselects its anchor.
        let previous = if fresh {
            f.results = Some(FilterResults::new(&f.input, generation));
            self.filter_anchor.take()
        } else {
            None
        };
        if let Some(results) = f.results.as_mut() {
            results.append(runs.to_vec());
            results.scanned = scanned;
            results.done = done;
        }
        if fresh {
            let anchor = previous.and_then(|row| self.anchor_for(&row));
            let top = anchor.is_none();
            self.reload_list(store, anchor, page)?;
            self.first_owed = top;
        } else {
            // More matches may extend the list below what is loaded.
            self.list.at_end = false;
            let src = source(&self.folded, &self.filter);
            self.list.fill(&src, store, page)?;
        }
        if self.first_owed {
            self.list.select_first_record(page);
            self.first_owed = self.list.selected().is_none_or(|r| r.is_header());
        }
        Ok(())
    }

    /// Opens the list on the marked record with its history beside it (`Action::GoTo`); a
    /// folded group would hide it, so it unfolds (the caller drops the filter first). What
    /// to say: where it is, or why it is not there.
    pub fn go_to(
        &mut self,
        store: &dyn UiStore,
        mark: TimelineMark,
        page: usize,
    ) -> Result<Result<String, String>> {
        let id = &mark.identity;
        if !self.select(store, id, page)? {
            return Ok(Err(format!(
                "{id} holds no live record now (deleted or moved since): `memscope history` still shows its timeline"
            )));
        }
        self.timeline.detail = None;
        let said = format!(
            "history of {id}: v{} highlighted, {}",
            mark.version, mark.note
        );
        self.timeline.mark = Some(mark);
        Ok(Ok(said))
    }

    /// Selects the record `id` (its folded group unfolds); false when it is not live.
    pub fn select(&mut self, store: &dyn UiStore, id: &Identity, page: usize) -> Result<bool> {
        let scope = id.scope.to_string();
        self.folded.remove(&scope);
        let anchor = Pos::Key {
            scope,
            record: Some((id.subject.clone(), id.predicate.clone())),
        };
        self.reload_list(store, Some(anchor), page)?;
        Ok(self.selected_record().map(|r| r.identity()).as_ref() == Some(id))
    }

    /// The selected record of the list, for a curation key (`verb`): none on a read-only
    /// file or on a group header, each said in a toast.
    fn record_to_curate(&self, verb: &str, shell: &mut Shell<'_>) -> Option<MemoryRecord> {
        if !shell.writable() {
            return None;
        }
        let rec = self.selected_record().cloned();
        if rec.is_none() {
            shell.info(format!(
                "select a record to {verb} (a group header is not a memory)"
            ));
        }
        rec
    }

    fn delete(&self, shell: &mut Shell<'_>) -> Action {
        let Some(rec) = self.record_to_curate("delete", shell) else {
            return Action::None;
        };
        let (dialog, action) = DeleteDialog::open(rec.identity());
        shell.open(Dialog::Delete(dialog));
        action
    }

    /// `m`: the rescope dialog on the selected record.
    fn rescope(&self, shell: &mut Shell<'_>) -> Action {
        let Some(rec) = self.record_to_curate("rescope", shell) else {
            return Action::None;
        };
        let mut dialog = RescopeDialog::new(rec);
        // Only a global value gets a suggested target; elsewhere the human types it.
        dialog.editing = dialog.record.scope != Scope::Global;
        shell.open(Dialog::Rescope(dialog));
        Action::PreviewRescope
    }

    /// `v`: the revert dialog on the selected record, when it has an earlier version.
    fn revert(&self, shell: &mut Shell<'_>) -> Action {
        let Some(rec) = self.record_to_curate("revert", shell) else {
            return Action::None;
        };
        if rec.version <= 1 {
            shell.info(format!(
                "{} is at v1: there is no earlier version to revert to",
                rec.identity()
            ));
            return Action::None;
        }
        shell.open(Dialog::Revert(RevertDialog {
            record: rec,
            choices: None,
            choice: 0,
            no_default: None,
            typed: String::new(),
            scroll: 0,
        }));
        Action::PreviewRevert
    }

    /// `Enter`: a header folds or unfolds, a record opens its history.
    fn open(&mut self, shell: &mut Shell<'_>) -> Action {
        match self.list.selected().map(|r| &r.item) {
            Some(ListItem::Header { scope }) => Action::Fold {
                scope: scope.clone(),
                folded: !self.folded.contains(scope),
            },
            Some(ListItem::Record { .. }) => {
                *shell.focus = Focus::Detail;
                self.timeline.follow(shell.screen());
                Action::None
            }
            None => Action::None,
        }
    }

    /// The filter line: what is typed, how far the scan got, the keys.
    pub fn filter_line(&self) -> Option<QueryLine> {
        let f = &self.filter;
        if !(f.editing || f.active()) {
            return None;
        }
        let progress = match &f.results {
            Some(r) if f.active() => {
                let of = self
                    .counts
                    .map(|c| format!(" of {}", thousands(c.memories)))
                    .unwrap_or_default();
                if r.generation == f.generation && r.done {
                    plural(r.matches() as i64, "match", "matches")
                } else {
                    format!(
                        "{} so far · scanned {}{of}…",
                        plural(r.matches() as i64, "match", "matches"),
                        thousands(r.scanned as i64)
                    )
                }
            }
            _ if f.active() => "searching…".to_string(),
            _ => "type to filter subject, predicate, value and scope".to_string(),
        };
        let progress = match &self.waiting {
            Some(waiting) => format!("{progress} · {waiting}"),
            None => progress,
        };
        Some(QueryLine {
            input: f.input.clone(),
            progress,
            editing: f.editing,
        })
    }
}

impl TabComponent for MemoriesTab {
    fn title(&self) -> String {
        "Current view".into()
    }

    fn short_names(&self) -> [&'static str; 3] {
        ["Current", "View", "View"]
    }

    fn contexts(&self, focus: Focus) -> Vec<Context> {
        match focus {
            Focus::Detail => vec![Context::History],
            Focus::List => Vec::new(),
        }
    }

    fn command(&mut self, cmd: Command, shell: &mut Shell<'_>) -> Option<Action> {
        Some(match cmd {
            Command::Open => self.open(shell),
            Command::NextPane | Command::PrevPane => {
                *shell.focus = match *shell.focus {
                    Focus::List => Focus::Detail,
                    Focus::Detail => Focus::List,
                };
                self.timeline.follow(shell.screen());
                Action::None
            }
            Command::Filter => {
                self.filter.editing = true;
                *shell.focus = Focus::List;
                Action::None
            }
            Command::Back if *shell.focus == Focus::Detail => {
                *shell.focus = Focus::List;
                Action::None
            }
            Command::Back if self.filter.active() => {
                self.filter.input.clear();
                Action::Filter(String::new())
            }
            Command::Fold | Command::Unfold => match self.list.selected() {
                Some(row) => Action::Fold {
                    scope: row.scope(),
                    folded: cmd == Command::Fold,
                },
                None => Action::None,
            },
            Command::Delete => self.delete(shell),
            Command::Explain => match self.selected_record() {
                Some(r) => shell.explain(&r.subject, &r.predicate, std::slice::from_ref(&r.scope)),
                None => {
                    shell.info("select a record to explain");
                    Action::None
                }
            },
            Command::Rescope => self.rescope(shell),
            Command::Revert => self.revert(shell),
            Command::OpenEvent => self.timeline.open(shell),
            // The value as stored, read whole (the list and the pane hold previews).
            Command::Copy => match *shell.focus {
                Focus::List => Action::CopyValue(self.selected_record()?.identity()),
                Focus::Detail => self.timeline.copy()?,
            },
            _ => return None,
        })
    }

    fn motion(&mut self, m: Motion, pane: Focus, _shell: &mut Shell<'_>) -> Action {
        match pane {
            Focus::List => Action::Move(m),
            Focus::Detail => Action::MoveEvent(m),
        }
    }

    fn click(&mut self, pane: Focus, row: usize, height: usize, shell: &mut Shell<'_>) -> Action {
        match pane {
            // The rows come from the store: the click is a move the session performs.
            Focus::List => {
                let cursor = self.list.cursor;
                match self.list.row_at(row, height, 1) {
                    Some(target) if target > cursor => Action::Move(Motion::Down(target - cursor)),
                    Some(target) if target < cursor => Action::Move(Motion::Up(cursor - target)),
                    _ => Action::None,
                }
            }
            Focus::Detail => {
                self.timeline.click(row, shell.screen());
                Action::None
            }
        }
    }

    /// The list again around the selected row; the history is loaded again by `sync`.
    fn reload(&mut self, store: &dyn UiStore, env: &Env) -> Result<()> {
        let anchor = self.list.selected().and_then(|row| self.anchor_for(row));
        self.reload_list(store, anchor.clone(), env.page)?;
        // A list loaded again after it could not be (`unload`) opens on a record, as at start.
        if anchor.is_none() {
            self.list.select_first_record(env.page);
        }
        self.timeline.detail = None;
        Ok(())
    }

    fn unload(&mut self) {
        self.list = MemoryList::default();
        self.timeline.detail = None;
        self.timeline.failed = None;
        // The figures of a list it could not read are not the list's title any more.
        self.counts = None;
        self.scope_counts.clear();
    }

    /// Loads the selected record's history when the selection moved to another record. A
    /// load that fails leaves no other record's history in the pane: it says which record's
    /// could not be read, and why, and is tried again at the next sync (found by review: the
    /// pane kept the record before's value and timeline under a lock, and after it).
    fn sync(&mut self, store: &dyn UiStore, env: &Env) -> Result<()> {
        let Some(rec) = self.selected_record().cloned() else {
            self.timeline.detail = None;
            self.timeline.failed = None;
            return Ok(());
        };
        let id = rec.identity();
        if self.timeline.detail.as_ref().map(|d| d.identity()) == Some(id.clone()) {
            return Ok(());
        }
        self.timeline.detail = None;
        match self.timeline.load(store, rec, env.screen()) {
            Ok(()) => {
                self.timeline.failed = None;
                Ok(())
            }
            Err(e) => {
                self.timeline.failed = Some((id, crate::store::error_text(&e)));
                Err(e)
            }
        }
    }

    fn take(&mut self, reply: &Reply, store: &dyn UiStore, env: &Env) -> Result<(), String> {
        match reply {
            Reply::Counts { counts, scopes } => {
                self.counts = Some(*counts);
                self.scope_counts = scopes.iter().cloned().collect();
                Ok(())
            }
            Reply::Failed {
                job: Failed::Counts,
                ..
            } => {
                self.counts = None;
                self.scope_counts.clear();
                Ok(())
            }
            Reply::Suspects(Ok(list)) => {
                self.suspects = (list.iter())
                    .map(|s| (s.record.subject.clone(), s.record.predicate.clone()))
                    .collect();
                self.suspects.sort_unstable();
                Ok(())
            }
            Reply::Filter {
                generation,
                runs,
                scanned,
                done,
            } => self
                .take_filter(store, *generation, runs, *scanned, *done, env.page)
                .map_err(|e| crate::store::error_text(&e)),
            _ => Ok(()),
        }
    }

    fn typing(&self) -> bool {
        self.filter.editing
    }

    fn typing_key(&mut self, cmd: Option<Command>, c: Option<char>) -> Action {
        let f = &mut self.filter;
        match edit_line(&mut f.input, &mut f.editing, cmd, c) {
            LineEdit::Cleared | LineEdit::Changed => Action::Filter(f.input.clone()),
            LineEdit::Kept | LineEdit::Nothing => Action::None,
        }
    }

    fn status(&self) -> Status {
        Status::Filter
    }

    fn draw(&self, frame: &mut Frame<'_>, body: Rect, view: &View) {
        if self.welcome() {
            // An empty database gets the whole body to explain itself.
            let inner = pane(frame, body, "Current view · empty", true);
            frame.render_widget(Paragraph::new(self.empty(inner.width as usize)), inner);
            return;
        }
        let panes = layout::panes(body, Tab::Memories, view.focus);
        if let Some(area) = panes.list {
            self.draw_list(frame, area, view);
        }
        if let Some(area) = panes.detail {
            let hint = match self.list.selected().map(|r| &r.item) {
                Some(ListItem::Header { .. }) => "A scope group: Enter folds or unfolds it.",
                _ => "Select a record to see its history.",
            };
            self.timeline.draw(frame, area, view, hint);
        }
    }
}

// Drawing.
impl MemoriesTab {
    fn list_title(&self) -> String {
        let f = &self.filter;
        if f.active() {
            let n = f.results.as_ref().map(|r| r.matches()).unwrap_or(0);
            return format!(
                "Current view · filter “{}” · {}",
                one_line(&f.input),
                plural(n as i64, "match", "matches")
            );
        }
        match &self.counts {
            Some(c) => format!(
                "Current view · {} in {}",
                plural(c.memories, "identity", "identities"),
                plural(c.scopes, "scope", "scopes")
            ),
            None => "Current view".to_string(),
        }
    }

    fn draw_list(&self, frame: &mut Frame<'_>, area: Rect, view: &View) {
        let focused = view.focused && view.focus == Focus::List;
        self.list.draw_pane(
            frame,
            area,
            (&self.list_title(), focused),
            |_| 1,
            |max| self.empty(max),
            |_, max, _| move |row| vec![self.list_row(row, view, max)],
        );
    }

    fn list_row(&self, row: &ListRow, view: &View, max: usize) -> Line<'static> {
        match &row.item {
            ListItem::Header { scope } => {
                let folded = self.folded.contains(scope);
                let count = if self.filter.active() {
                    self.filter.results.as_ref().and_then(|r| r.count_in(scope))
                } else {
                    self.scope_counts.get(scope).copied()
                };
                let marker = if folded { "▸ " } else { "▾ " };
                let mut left = vec![
                    part(marker, dim()),
                    part(one_line(scope), bold().fg(Color::Cyan)),
                ];
                if let Some(n) = count {
                    left.push(part(format!("  {}", thousands(n)), dim()));
                }
                if folded {
                    left.push(part("  (folded: Enter or l unfolds)", dim()));
                }
                row_line(&left, &[], max)
            }
            ListItem::Record {
                record, highlight, ..
            } => {
                let value = listed_value(&record.value, record.value_bytes);
                // A suspect (tab 6) is marked where it stands.
                let key = (record.subject.as_str(), record.predicate.as_str());
                let suspect = record.scope == Scope::Global
                    && (self.suspects)
                        .binary_search_by(|(s, p)| (s.as_str(), p.as_str()).cmp(&key))
                        .is_ok();
                // A preview's size stands with the version, where the value's cut leaves it.
                let right: Vec<Part<'static>> = (preview_size(record.value_bytes).into_iter())
                    .map(|size| part(size, dim()))
                    .chain([
                        part(format!(" v{}", record.version), dim()),
                        part(format!(" {:>3}", age(view.now, &record.updated_at)), dim()),
                    ])
                    .collect();
                // A subject too long for the row is cut in its middle before the predicate —
                // what tells its records apart — loses a column; the value keeps a third of
                // the room. A cut part loses its match marks (they index the whole text).
                let (mut subject, mut predicate) =
                    (one_line(&record.subject), one_line(&record.predicate));
                let (mut subject_marks, mut predicate_marks) =
                    (&highlight.subject[..], &highlight.predicate[..]);
                // Too narrow to keep the version and age beside a predicate: they go first.
                let (right, right_w) = match right.iter().map(|p| width(&p.text)).sum::<usize>() {
                    w if max.saturating_sub(w + 8) < 8 => (&right[..0], 0),
                    w => (&right[..], w),
                };
                let id_room = max.saturating_sub(right_w + 8) * 2 / 3;
                let widths = [width(&subject), width(&predicate)];
                // Most rows fit whole. On a row too narrow for two readable halves the value
                // gets nothing and the subject goes first, down to `…`: the predicate tells
                // the rows apart (found by review: at 20 columns every row of one subject read
                // `user:42 · … v2 3d`).
                let caps = if id_room >= 16 {
                    shares(&widths, id_room)
                } else {
                    let room = max.saturating_sub(right_w + 8);
                    let predicate_cap = widths[1].min(room.saturating_sub(1));
                    [room.saturating_sub(predicate_cap), predicate_cap].to_vec()
                };
                if widths[0] > caps[0] {
                    subject = truncate_middle(&subject, caps[0].max(1));
                    subject_marks = &[];
                }
                if widths[1] > caps[1] {
                    predicate = truncate_middle(&predicate, caps[1].max(1));
                    predicate_marks = &[];
                }
                let left = [
                    if suspect {
                        part("! ", bold().fg(Color::Yellow))
                    } else {
                        part("  ", Style::new())
                    },
                    Part {
                        text: subject,
                        style: Style::new(),
                        marks: subject_marks,
                    },
                    part(" · ", dim()),
                    Part {
                        text: predicate,
                        style: bold(),
                        marks: predicate_marks,
                    },
                    part(" = ", dim()),
                    Part {
                        text: value,
                        style: Style::new().fg(Color::Green),
                        marks: &highlight.value,
                    },
                ];
                row_line(&left, right, max)
            }
        }
    }

    /// What an empty list says: an empty database explains memscope; a filter says it found
    /// nothing.
    fn empty(&self, max: usize) -> Vec<Line<'static>> {
        let f = &self.filter;
        let mut lines: Vec<Line<'static>> = Vec::new();
        if f.active() {
            let done = f
                .results
                .as_ref()
                .is_some_and(|r| r.generation == f.generation && r.done);
            let said = if done {
                format!("No record matches “{}”.", f.input)
            } else {
                format!("Searching for “{}”…", f.input)
            };
            lines.extend(wrapped(&said, bold(), max));
            lines.extend(wrapped("Esc clears the filter.", dim(), max));
        } else {
            // Every sentence wraps and every command is cut into lines a shell reads back as
            // the command, never inside a word (README, "The terminal UI": the welcome of an
            // empty database), at any width.
            let say = |lines: &mut Vec<Line<'static>>, text: &str, style: Style| {
                lines.extend(wrapped(text, style, max))
            };
            let command = |lines: &mut Vec<Line<'static>>, groups: &[&[&str]]| {
                let shell = shell_lines(groups, max);
                lines.extend(shell.iter().map(|l| plain(l, good(), max)))
            };
            let db = self.db_arg.as_str();
            say(
                &mut lines,
                "memscope: the long-term memory of your coding agents",
                bold(),
            );
            lines.push(Line::raw(""));
            say(
                &mut lines,
                "This database holds no live memories yet.",
                Style::new(),
            );
            lines.push(Line::raw(""));
            say(
                &mut lines,
                "Agents write what they learn through the one write path:",
                Style::new(),
            );
            command(
                &mut lines,
                &[
                    &["memscope", "--db", db],
                    &[
                        "write",
                        "--subject",
                        "user:42",
                        "--predicate",
                        "package_manager",
                    ],
                    &[
                        "--value",
                        "pnpm",
                        "--scope",
                        "global",
                        "--source",
                        "thread:17/message:86",
                    ],
                ],
            );
            say(
                &mut lines,
                "or many from JSON Lines, one write a line:",
                Style::new(),
            );
            command(
                &mut lines,
                &[&["memscope", "--db", db, "apply", "writes.jsonl"]],
            );
            // How agents themselves write (found by an exploratory test: the screen named the
            // CLI only, and an agent host's way in is the MCP server).
            say(
                &mut lines,
                "or, from an agent host, as an MCP server (its remember and recall tools):",
                Style::new(),
            );
            command(
                &mut lines,
                &[&[
                    "memscope",
                    "--db",
                    db,
                    "mcp",
                    "--subject",
                    "user:42",
                    "--repo",
                    "auto",
                ]],
            );
            lines.push(Line::raw(""));
            say(
                &mut lines,
                "Their writes appear here live, grouped by scope: global, then each repo:…, then each task:…",
                Style::new(),
            );
            lines.push(Line::raw(""));
            // Never this database: `demo` replaces the file it is given, and this UI has it open.
            say(
                &mut lines,
                "To look around with sample data, build the demo in a database of its own:",
                bold(),
            );
            match &self.demo_arg {
                Some(demo) => command(&mut lines, &[&["memscope", "--db", demo, "demo"]]),
                None => command(&mut lines, &[&["memscope", "demo"]]),
            }
            say(&mut lines, "? shows every key · q quits", dim());
            let (p, t) = self.counts.map_or((0, 0), |c| (c.pending, c.tombstones));
            if p + t > 0 {
                lines.push(plain("", Style::new(), max));
                lines.push(plain(
                    &format!("{p} pending item(s) wait in tab 2; {t} tombstone(s) in tab 3."),
                    bold(),
                    max,
                ));
            }
        }
        lines
    }
}
