//! The current view as a window over a list that may hold a million records. Rows are group
//! headers (one per scope) and records; a folded group shows only its header. Nothing loads the
//! whole list: unfiltered, the window pages with keyset queries in view order (never OFFSET);
//! filtered, it pages over the match list the filter worker produced and fetches the records on
//! screen by id.

use super::rows::{Motion, Row, Rows};
use crate::model::MemoryRecord;
use crate::store::{BrowseBound, BrowseKey, BrowseRecord, UiStore};
use anyhow::Result;
use fuzzy_matcher::skim::SkimMatcherV2;
use fuzzy_matcher::FuzzyMatcher;
use std::collections::{BTreeSet, HashMap};

/// Where a row sits in the list it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pos {
    /// Unfiltered: a group header (`record: None`) or a record's (subject, predicate).
    Key {
        scope: String,
        record: Option<(String, String)>,
    },
    /// Filtered: a group and, for a record, its index in the match list.
    Filter { group: usize, index: Option<usize> },
}

/// Which characters the filter matched, per displayed field (char indices).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Highlight {
    pub subject: Vec<usize>,
    pub predicate: Vec<usize>,
    pub value: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ListItem {
    Header {
        scope: String,
    },
    Record {
        id: i64,
        record: Box<MemoryRecord>,
        highlight: Highlight,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListRow {
    pub pos: Pos,
    pub item: ListItem,
}

impl ListRow {
    pub fn scope(&self) -> String {
        match &self.item {
            ListItem::Header { scope } => scope.clone(),
            ListItem::Record { record, .. } => record.scope.to_string(),
        }
    }

    /// The same row's position in the unfiltered list.
    pub fn keyset_pos(&self) -> Pos {
        match &self.item {
            ListItem::Header { scope } => Pos::Key {
                scope: scope.clone(),
                record: None,
            },
            ListItem::Record { record, .. } => Pos::Key {
                scope: record.scope.to_string(),
                record: Some((record.subject.clone(), record.predicate.clone())),
            },
        }
    }
}

/// A run of consecutive matches in one scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub scope: String,
    pub start: usize,
    pub len: usize,
}

/// The filter worker's answer so far: matching record ids in view order, grouped by scope.
/// Append-only while a scan runs, so positions already on screen stay valid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterResults {
    pub query: String,
    pub generation: u64,
    pub ids: Vec<i64>,
    pub groups: Vec<Group>,
    pub scanned: u64,
    pub done: bool,
}

impl FilterResults {
    pub fn new(query: &str, generation: u64) -> FilterResults {
        FilterResults {
            query: query.to_string(),
            generation,
            ..Default::default()
        }
    }

    pub fn append(&mut self, runs: Vec<(String, Vec<i64>)>) {
        for (scope, ids) in runs {
            if ids.is_empty() {
                continue;
            }
            match self.groups.last_mut() {
                Some(g) if g.scope == scope => g.len += ids.len(),
                _ => self.groups.push(Group {
                    scope,
                    start: self.ids.len(),
                    len: ids.len(),
                }),
            }
            self.ids.extend(ids);
        }
    }

    pub fn matches(&self) -> usize {
        self.ids.len()
    }

    pub fn count_in(&self, scope: &str) -> Option<i64> {
        self.groups
            .iter()
            .find(|g| g.scope == scope)
            .map(|g| g.len as i64)
    }

    /// Where a record or header of the previous list sits in this one.
    pub fn position_of(&self, row: &ListRow) -> Option<Pos> {
        match &row.item {
            ListItem::Record { id, .. } => {
                let index = self.ids.iter().position(|x| x == id)?;
                let group = self
                    .groups
                    .iter()
                    .position(|g| index >= g.start && index < g.start + g.len)?;
                Some(Pos::Filter {
                    group,
                    index: Some(index),
                })
            }
            ListItem::Header { scope } => {
                let group = self.groups.iter().position(|g| &g.scope == scope)?;
                Some(Pos::Filter { group, index: None })
            }
        }
    }
}

/// The text the filter scores, built the same way by the worker and for highlighting.
pub fn haystack(out: &mut String, subject: &str, predicate: &str, value: &str, scope: &str) {
    out.clear();
    for (i, part) in [subject, predicate, value, scope].iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(part);
    }
}

/// What the rows come from.
pub enum Source<'a> {
    Keyset {
        collapsed: &'a BTreeSet<String>,
    },
    Filter {
        results: &'a FilterResults,
        collapsed: &'a BTreeSet<String>,
    },
}

/// Smallest keyset query: headers and folded groups cost a query each, so do not ask for 1.
const MIN_BATCH: usize = 32;

fn header(scope: &str, pos: Pos) -> ListRow {
    ListRow {
        pos,
        item: ListItem::Header {
            scope: scope.to_string(),
        },
    }
}

fn key_header(scope: &str) -> ListRow {
    header(
        scope,
        Pos::Key {
            scope: scope.to_string(),
            record: None,
        },
    )
}

fn key_record(r: BrowseRecord) -> ListRow {
    ListRow {
        pos: Pos::Key {
            scope: r.record.scope.to_string(),
            record: Some((r.record.subject.clone(), r.record.predicate.clone())),
        },
        item: ListItem::Record {
            id: r.id,
            record: Box::new(r.record),
            highlight: Highlight::default(),
        },
    }
}

/// The rows a walk read, and whether it reached the list's end in its direction.
type Walked = Result<(Vec<ListRow>, bool)>;

impl Source<'_> {
    /// Up to about `n` rows strictly after `from` (from the start when `None`), in order, and
    /// whether the list ended.
    pub fn after(&self, store: &dyn UiStore, from: Option<&Pos>, n: usize) -> Walked {
        self.walk(store, Dir::Forward, from, n)
    }

    /// Up to about `n` rows strictly before `to` (from the end when `None`), nearest first, and
    /// whether the list's start was reached.
    pub fn before(&self, store: &dyn UiStore, to: Option<&Pos>, n: usize) -> Walked {
        self.walk(store, Dir::Backward, to, n)
    }

    fn walk(&self, store: &dyn UiStore, dir: Dir, from: Option<&Pos>, n: usize) -> Walked {
        match self {
            Source::Keyset { collapsed } => keyset(store, collapsed, dir, from, n),
            Source::Filter { results, collapsed } => {
                let step = match dir {
                    Dir::Forward => filter_next,
                    Dir::Backward => filter_prev,
                };
                let (positions, ended) = filter_walk(results, collapsed, from, n, step);
                Ok((materialize(store, results, positions)?, ended))
            }
        }
    }
}

/// Which way a keyset walk reads the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// In view order, each group's header before its records.
    Forward,
    /// Against it, nearest first: a group's header after its records (it is above them).
    Backward,
}

/// Up to about `n` rows of the unfiltered list strictly beyond `from` in direction `dir` (from
/// the list's start or end when `None`), and whether the list ended. Headers are made where
/// the scope changes; a folded group is its header alone, skipped with one index seek.
fn keyset(
    store: &dyn UiStore,
    collapsed: &BTreeSet<String>,
    dir: Dir,
    from: Option<&Pos>,
    n: usize,
) -> Walked {
    let forward = dir == Dir::Forward;
    let mut out = Vec::new();
    // `group`: the group being walked through. Backward, its header is still ahead.
    let (mut bound, mut group) = match from {
        Some(Pos::Key {
            scope,
            record: Some((subject, predicate)),
        }) => (
            BrowseBound::Key(BrowseKey {
                scope: scope.clone(),
                subject: subject.clone(),
                predicate: predicate.clone(),
            }),
            Some(scope.clone()),
        ),
        Some(Pos::Key {
            scope,
            record: None,
        }) if forward && collapsed.contains(scope) => {
            (BrowseBound::ScopeEnd(scope.clone()), Some(scope.clone()))
        }
        Some(Pos::Key {
            scope,
            record: None,
        }) => (
            BrowseBound::ScopeStart(scope.clone()),
            forward.then(|| scope.clone()),
        ),
        None | Some(Pos::Filter { .. }) if forward => (BrowseBound::Start, None),
        None | Some(Pos::Filter { .. }) => (BrowseBound::End, None),
    };
    // Backward from a record, the group it was in is left without a record of it read yet:
    // its header belongs above only if the group still holds one (found by an exploratory
    // test: a group's last record rescoped from the UI left its header standing, empty).
    let mut unconfirmed = group.clone().filter(|_| !forward);
    loop {
        if out.len() >= n {
            return Ok((out, false));
        }
        let want = (n - out.len()).max(MIN_BATCH);
        let batch = if forward {
            store.browse_after(&bound, want)?
        } else {
            store.browse_before(&bound, want)?
        };
        let full = batch.len() == want;
        let mut jumped = false;
        for r in batch {
            let scope = r.record.scope.to_string();
            if group.as_deref() != Some(scope.as_str()) {
                if let Some(done) = group.take().filter(|_| !forward) {
                    out.extend(header_above(store, &mut unconfirmed, done)?);
                    if out.len() >= n {
                        return Ok((out, false));
                    }
                }
                let folded = collapsed.contains(&scope);
                if forward || folded {
                    out.push(key_header(&scope));
                }
                if folded {
                    bound = if forward {
                        BrowseBound::ScopeEnd(scope)
                    } else {
                        BrowseBound::ScopeStart(scope)
                    };
                    jumped = true;
                    break;
                }
                group = Some(scope);
            }
            // A record of the group read: it stands.
            if group.as_ref() == unconfirmed.as_ref() {
                unconfirmed = None;
            }
            bound = BrowseBound::Key(BrowseKey::of(&r.record));
            out.push(key_record(r));
            if out.len() >= n {
                return Ok((out, false));
            }
        }
        if !jumped && !full {
            if let Some(done) = group.filter(|_| !forward) {
                out.extend(header_above(store, &mut unconfirmed, done)?);
            }
            return Ok((out, true));
        }
    }
}

/// The header of group `done`, which a backward walk just left — none when it is the group of
/// the record the walk started from (`unconfirmed`), no record of it was read, and the group
/// holds none now.
fn header_above(
    store: &dyn UiStore,
    unconfirmed: &mut Option<String>,
    done: String,
) -> Result<Option<ListRow>> {
    if unconfirmed.take().as_ref() == Some(&done) {
        let first = store.browse_after(&BrowseBound::ScopeStart(done.clone()), 1)?;
        if first
            .first()
            .is_none_or(|r| r.record.scope.to_string() != done)
        {
            return Ok(None);
        }
    }
    Ok(Some(key_header(&done)))
}

/// The position after `pos` in a filtered list.
fn filter_next(r: &FilterResults, collapsed: &BTreeSet<String>, pos: Option<&Pos>) -> Option<Pos> {
    let header = |group: usize| Some(Pos::Filter { group, index: None });
    match pos {
        None | Some(Pos::Key { .. }) => (!r.groups.is_empty()).then_some(Pos::Filter {
            group: 0,
            index: None,
        }),
        Some(Pos::Filter { group, index }) => {
            let g = r.groups.get(*group)?;
            let next_in_group = match index {
                None if collapsed.contains(&g.scope) || g.len == 0 => None,
                None => Some(g.start),
                Some(i) if i + 1 < g.start + g.len => Some(i + 1),
                Some(_) => None,
            };
            match next_in_group {
                Some(i) => Some(Pos::Filter {
                    group: *group,
                    index: Some(i),
                }),
                None if group + 1 < r.groups.len() => header(group + 1),
                None => None,
            }
        }
    }
}

/// The last position of a group: its last match, or its header when folded.
fn group_last(r: &FilterResults, collapsed: &BTreeSet<String>, group: usize) -> Pos {
    let g = &r.groups[group];
    let index = if collapsed.contains(&g.scope) || g.len == 0 {
        None
    } else {
        Some(g.start + g.len - 1)
    };
    Pos::Filter { group, index }
}

fn filter_prev(r: &FilterResults, collapsed: &BTreeSet<String>, pos: Option<&Pos>) -> Option<Pos> {
    match pos {
        None | Some(Pos::Key { .. }) => {
            (!r.groups.is_empty()).then(|| group_last(r, collapsed, r.groups.len() - 1))
        }
        Some(Pos::Filter { group, index }) => {
            let g = r.groups.get(*group)?;
            match index {
                Some(i) if *i > g.start => Some(Pos::Filter {
                    group: *group,
                    index: Some(i - 1),
                }),
                Some(_) => Some(Pos::Filter {
                    group: *group,
                    index: None,
                }),
                None if *group > 0 => Some(group_last(r, collapsed, group - 1)),
                None => None,
            }
        }
    }
}

/// Up to `n` positions stepping from `from` with `step` (`filter_next` or `filter_prev`), and
/// whether the list's end in that direction was reached. From the end (`None`), the first step
/// of `filter_prev` is the last position itself.
fn filter_walk(
    r: &FilterResults,
    collapsed: &BTreeSet<String>,
    from: Option<&Pos>,
    n: usize,
    step: fn(&FilterResults, &BTreeSet<String>, Option<&Pos>) -> Option<Pos>,
) -> (Vec<Pos>, bool) {
    let mut out = Vec::new();
    let mut at = from.cloned();
    while out.len() < n {
        match step(r, collapsed, at.as_ref()) {
            Some(p) => {
                out.push(p.clone());
                at = Some(p);
            }
            None => return (out, true),
        }
    }
    let ended = step(r, collapsed, at.as_ref()).is_none();
    (out, ended)
}

/// Fetches the records at `positions` by id and highlights what the query matched. A record
/// deleted since the scan is skipped.
fn materialize(
    store: &dyn UiStore,
    r: &FilterResults,
    positions: Vec<Pos>,
) -> Result<Vec<ListRow>> {
    let ids: Vec<i64> = positions
        .iter()
        .filter_map(|p| match p {
            Pos::Filter { index: Some(i), .. } => r.ids.get(*i).copied(),
            _ => None,
        })
        .collect();
    let mut by_id: HashMap<i64, BrowseRecord> = store
        .browse_by_ids(&ids)?
        .into_iter()
        .map(|b| (b.id, b))
        .collect();
    let matcher = SkimMatcherV2::default();
    let mut out = Vec::with_capacity(positions.len());
    for pos in positions {
        match pos {
            Pos::Filter { group, index: None } => {
                if let Some(g) = r.groups.get(group) {
                    out.push(header(&g.scope, pos.clone()));
                }
            }
            Pos::Filter { index: Some(i), .. } => {
                let Some(b) = r.ids.get(i).and_then(|id| by_id.remove(id)) else {
                    continue;
                };
                let highlight = highlight(&matcher, &r.query, &b.record);
                out.push(ListRow {
                    pos,
                    item: ListItem::Record {
                        id: b.id,
                        record: Box::new(b.record),
                        highlight,
                    },
                });
            }
            Pos::Key { .. } => {}
        }
    }
    Ok(out)
}

/// Maps the matcher's char indices over the haystack back onto the displayed fields.
pub fn highlight(matcher: &SkimMatcherV2, query: &str, rec: &MemoryRecord) -> Highlight {
    let value = super::text::value_text(&rec.value);
    let scope = rec.scope.to_string();
    let mut hay = String::new();
    haystack(&mut hay, &rec.subject, &rec.predicate, &value, &scope);
    // Each word's matched chars (the filter matches the words one by one, in any order).
    let mut indices = Vec::new();
    for word in query.split_whitespace() {
        match matcher.fuzzy_indices(&hay, word) {
            Some((_, found)) => indices.extend(found),
            None => return Highlight::default(),
        }
    }
    indices.sort_unstable();
    indices.dedup();
    let ns = rec.subject.chars().count();
    let np = rec.predicate.chars().count();
    let nv = value.chars().count();
    let mut h = Highlight::default();
    for i in indices {
        if i < ns {
            h.subject.push(i);
        } else if i > ns && i <= ns + np {
            h.predicate.push(i - ns - 1);
        } else if i > ns + np + 1 && i <= ns + np + 1 + nv {
            h.value.push(i - ns - np - 2);
        }
    }
    h
}

/// The current view's list: the shared list component over a window of a few pages, filled
/// from a `Source` (the store by keyset, or the filter's matches) as the cursor moves.
pub type MemoryList = Rows<ListRow>;

impl Row for ListRow {
    fn is_header(&self) -> bool {
        matches!(self.item, ListItem::Header { .. })
    }
}

impl Rows<ListRow> {
    pub fn selected_record(&self) -> Option<&MemoryRecord> {
        match &self.selected()?.item {
            ListItem::Record { record, .. } => Some(record),
            ListItem::Header { .. } => None,
        }
    }

    /// Moves as `motion` says, loading first the rows it moves onto.
    pub fn apply(
        &mut self,
        src: &Source<'_>,
        store: &dyn UiStore,
        motion: Motion,
        page: usize,
    ) -> Result<()> {
        let page = page.max(1);
        match motion {
            Motion::Down(n) => self.load_below(src, store, n, page)?,
            Motion::Up(n) => self.load_up_to(src, store, n, page)?,
            Motion::PageDown => self.load_below(src, store, page, page)?,
            Motion::PageUp => self.load_up_to(src, store, page, page)?,
            Motion::Home => {
                let (rows, ended) = src.after(store, None, 2 * page)?;
                self.replace(rows, true, ended);
            }
            Motion::End => {
                let (rows, started) = src.before(store, None, 2 * page)?;
                self.replace(rows.into_iter().rev().collect(), started, true);
            }
        }
        self.step(motion, page);
        self.trim(page);
        Ok(())
    }

    /// A new window at the list's start or end, with the cursor on its first row.
    fn replace(&mut self, rows: Vec<ListRow>, at_start: bool, at_end: bool) {
        self.rows = rows;
        self.at_start = at_start;
        self.at_end = at_end;
        self.cursor = 0;
        self.offset = 0;
    }

    /// Loads the rows `n` below the cursor and a page more, when the window ends before them.
    fn load_below(
        &mut self,
        src: &Source<'_>,
        store: &dyn UiStore,
        n: usize,
        page: usize,
    ) -> Result<()> {
        let target = self.cursor + n;
        if target >= self.rows.len() && !self.at_end {
            self.load_after(src, store, target + 1 - self.rows.len() + page)?;
        }
        Ok(())
    }

    /// Loads the rows `n` above the cursor and a page more, when the window starts after them.
    fn load_up_to(
        &mut self,
        src: &Source<'_>,
        store: &dyn UiStore,
        n: usize,
        page: usize,
    ) -> Result<()> {
        if n > self.cursor && !self.at_start && !self.rows.is_empty() {
            self.load_above(src, store, n - self.cursor + page)?;
        }
        Ok(())
    }

    /// Reloads the window around `anchor` (the top when `None`): the anchor row, or the next
    /// one when it is gone, becomes the selection, kept at the same height on screen.
    pub fn reload(
        &mut self,
        src: &Source<'_>,
        store: &dyn UiStore,
        anchor: Option<&Pos>,
        page: usize,
    ) -> Result<()> {
        let page = page.max(1);
        let screen_row = self.cursor.saturating_sub(self.offset).min(page - 1);
        match anchor {
            None => {
                let (rows, ended) = src.after(store, None, 2 * page)?;
                self.replace(rows, true, ended);
            }
            Some(anchor) => {
                let (before, started) = src.before(store, Some(anchor), page)?;
                let start = before.first().map(|r| r.pos.clone());
                let (after, ended) = src.after(store, start.as_ref(), 2 * page)?;
                let k = before.len();
                self.rows = before.into_iter().rev().chain(after).collect();
                self.at_start = started;
                self.at_end = ended;
                self.cursor = k.min(self.rows.len().saturating_sub(1));
                self.offset = self.cursor.saturating_sub(screen_row);
            }
        }
        self.settle_window(page);
        self.fill_above(src, store, page)
    }

    /// Moves off a group header onto the record right below it (the first selection).
    pub fn select_first_record(&mut self, page: usize) {
        let on_header = self.selected().is_some_and(Row::is_header);
        let next_is_record = self
            .rows
            .get(self.cursor + 1)
            .is_some_and(|r| !r.is_header());
        if on_header && next_is_record {
            self.cursor += 1;
            self.settle_window(page.max(1));
        }
    }

    /// Loads more rows when the screen is not full but the list goes on (a filter that is
    /// still producing results, a window trimmed short).
    pub fn fill(&mut self, src: &Source<'_>, store: &dyn UiStore, page: usize) -> Result<()> {
        let page = page.max(1);
        if self.rows.len() < self.offset + page + 1 && !self.at_end {
            self.load_after(src, store, self.offset + 2 * page - self.rows.len())?;
        }
        self.settle_window(page);
        self.fill_above(src, store, page)
    }

    /// Loads up to `need` rows after the window's last row (from the start when empty).
    fn load_after(&mut self, src: &Source<'_>, store: &dyn UiStore, need: usize) -> Result<()> {
        let last = self.rows.last().map(|r| r.pos.clone());
        let (more, ended) = src.after(store, last.as_ref(), need)?;
        if self.rows.is_empty() {
            self.at_start = true;
        }
        self.rows.extend(more);
        self.at_end = ended;
        Ok(())
    }

    /// Loads rows above the window when the list ended short of a screen but has rows before
    /// it, so the screen shows them instead of blank lines below the last row.
    fn fill_above(&mut self, src: &Source<'_>, store: &dyn UiStore, page: usize) -> Result<()> {
        let shown = self.rows.len().saturating_sub(self.offset);
        if !self.at_end || self.at_start || shown >= page || self.rows.is_empty() {
            return Ok(());
        }
        self.load_above(src, store, page - shown + page)?;
        self.settle_window(page);
        Ok(())
    }

    /// Loads up to `need` rows before the window's first row (which must exist), keeping the
    /// cursor and offset on the rows they were on.
    fn load_above(&mut self, src: &Source<'_>, store: &dyn UiStore, need: usize) -> Result<()> {
        let first = self.rows[0].pos.clone();
        let (more, started) = src.before(store, Some(&first), need)?;
        let k = more.len();
        let mut rows: Vec<ListRow> = more.into_iter().rev().collect();
        rows.append(&mut self.rows);
        self.rows = rows;
        self.cursor += k;
        self.offset += k;
        self.at_start = started;
        Ok(())
    }

    fn settle_window(&mut self, page: usize) {
        self.settle(page);
        self.trim(page);
    }

    /// Keeps the window bounded: a few pages around the cursor (the source reloads the rest).
    fn trim(&mut self, page: usize) {
        if self.offset > 3 * page {
            let drop = self.offset - page;
            self.rows.drain(..drop);
            self.cursor -= drop;
            self.offset -= drop;
            self.at_start = false;
        }
        let keep = self.offset + 3 * page;
        if self.rows.len() > keep + page {
            self.rows.truncate(keep);
            self.at_end = false;
        }
    }
}
