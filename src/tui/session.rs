//! The loop's side of the UI: it owns the store and the workers, performs the actions that keys
//! return, hands worker replies and loaded previews to the tab or dialog that owns them
//! (`TabComponent::take`, `Dialog::take`), and watches `PRAGMA data_version` for other
//! processes' commits. Every query and write of the UI starts here (the tabs' `reload` and
//! `sync` are called from here with the store); `app` holds state and `draw` only reads it.

use super::app::{Action, App, Curation, Dialog, Focus, Tab};
use super::dialogs::EventDialog;
use super::dialogs::Loaded;
use super::held::{Held, HELD_MAX, HOLD_LIMIT};
use super::incident::TimelineMark;
use super::refresh;
use super::repair;
use super::text::{plural, thousands};
use super::worker::{
    run_filter, run_load, Failed, Job, Load, LoadKind, NarrowCache, Reply, Workers,
};
use crate::model::Identity;
use crate::store::{Clock, UiStore};
use anyhow::Result;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::Frame;
use std::collections::BTreeSet;

/// Where background work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerMode {
    /// Worker threads with their own connections (the real UI, the benchmark).
    Threads,
    /// Synchronously on the UI's store, when the loop pumps (tests and snapshots).
    Inline,
    /// Inline, but run only when the caller pumps: a test feeds a burst of keys before the
    /// workers' replies arrive, as a slow worker does.
    Deferred,
}

/// What becomes of an event as it arrives ([`Session::admit`]).
enum Admit {
    /// Handled now.
    Now(Event),
    /// Held for the filter's matches, or refused with a sentence saying why.
    Taken,
    Quit,
}

/// Whether a key or click would act on a list the filter has not finished with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FilterWait {
    Ready,
    /// Its matches are still coming: events are held.
    Running,
    /// It failed (or its workers went): the list holds rows it may hide, and stays so.
    Failed,
}

pub struct Session {
    pub app: App,
    store: Box<dyn UiStore>,
    workers: Workers,
    data_version: i64,
    /// Loader jobs sent and not answered yet.
    loads_waiting: BTreeSet<LoadKind>,
    narrow_cache: NarrowCache,
    /// Whether mouse events are taken (`--no-mouse` leaves the mouse to the terminal).
    pub mouse: bool,
    /// Bytes for the terminal itself (an OSC 52 copy), written by the loop after the key.
    output: Vec<u8>,
    /// A list motion with more keys queued behind it moved the selection without loading its
    /// detail: the detail of where the keys end is loaded once ([`Session::settle`]).
    sync_owed: bool,
    /// The generation of the filter whose run failed last (or whose workers went): a key
    /// waits for no match of it.
    failed_filter: Option<u64>,
    /// What could not be read is to be read again at the next poll: a lock that stopped the
    /// loads is gone ([`UiStore::turn`]), or the database could not be polled.
    owed: bool,
    /// [`WorkerMode::Deferred`]: actions leave the jobs queued.
    deferred: bool,
    /// Keys and clicks that wait for the filter's matches ([`Session::admit`]).
    held: Held,
    /// A replayed key quit: the loop ends ([`Session::quit_asked`]).
    quit: bool,
}

/// The title of the message shown when the database file is removed or replaced.
pub const MOVED_TITLE: &str = "Database file removed or replaced";

const DELETE_REASON: &str = "deleted in the memscope UI";

impl Session {
    /// Opens the UI state on `store`: the first page and the small lists load now; counts and
    /// anything slow are handed to the workers, so the first frame does not wait for them.
    pub fn new(
        store: Box<dyn UiStore>,
        clock: Clock,
        size: (u16, u16),
        mode: WorkerMode,
    ) -> Result<Session> {
        let workers = match mode {
            WorkerMode::Threads => Workers::threads(store.reopen())?,
            WorkerMode::Inline | WorkerMode::Deferred => Workers::Inline(Vec::new()),
        };
        let app = App::new(store.label(), store.is_read_only(), clock, size);
        let data_version = store.data_version()?;
        let mut session = Session {
            app,
            store,
            workers,
            data_version,
            loads_waiting: BTreeSet::new(),
            narrow_cache: NarrowCache::default(),
            mouse: true,
            output: Vec::new(),
            sync_owed: false,
            failed_filter: None,
            owed: false,
            deferred: false,
            held: Held::default(),
            quit: false,
        };
        let opened = session.reload().and_then(|()| {
            let page = session.app.page();
            session.app.tabs.memories.list.select_first_record(page);
            session.sync()
        });
        if let Err(e) = opened {
            // A row a raw client damaged stops a list from loading, not the UI: it opens on the
            // Check tab, which names what is wrong.
            session.app.tab = Tab::Check;
            session.start_tab();
            session.app.popup(
                "The database cannot be read whole",
                format!(
                    "{}; the Check tab shows it here.",
                    crate::store::error_text(&e)
                ),
            );
        }
        session.pump_workers();
        session.deferred = mode == WorkerMode::Deferred;
        Ok(session)
    }

    /// Selects the live record `id` in the current view (the filter and a folded group give
    /// way); a record that is not live leaves the selection where it was.
    pub fn select(&mut self, id: &Identity) -> Result<()> {
        self.app.tab = Tab::Memories;
        self.app.focus = Focus::List;
        if let Some(generation) = self.app.tabs.memories.drop_filter() {
            self.workers.cancel_filter(generation);
        }
        let page = self.app.page();
        self.app.tabs.memories.select(&*self.store, id, page)?;
        self.after_change();
        Ok(())
    }

    pub fn store(&self) -> &dyn UiStore {
        &*self.store
    }

    /// Handles one event of a drain of the terminal's queue; true when the UI should quit.
    /// With `more_queued` (more events already waiting), a list motion moves the selection
    /// and leaves the selected record's detail — its history, other scopes and resolution, a
    /// few queries, each a round trip to a PostgreSQL server — to [`Session::settle`], so a
    /// held `j` loads the detail of where it stops, not of every row it passes. Any other key
    /// settles first: what it does may read the detail.
    ///
    /// A key or a click behind a filter whose matches have not all come is held, not
    /// handled: [`Session::pump`] replays it once they are in (`Session::admit`).
    pub fn handle_queued(&mut self, event: Event, more_queued: bool) -> bool {
        if let Event::Key(key) = event {
            // Esc and a key typed right after it arrive together and read as Alt+key: take
            // them as the two keys they were.
            if let (KeyCode::Char(c), KeyModifiers::ALT) = (key.code, key.modifiers) {
                let esc = KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE);
                let plain = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
                return self.handle_queued(Event::Key(esc), true)
                    || self.handle_queued(Event::Key(plain), more_queued);
            }
            // Esc drops what waits behind the filter, and cancels it as it always does.
            if key.code == KeyCode::Esc
                && key.kind != KeyEventKind::Release
                && !self.held.is_empty()
            {
                let dropped = self.held.drop_all();
                let quit = self.act(event, more_queued);
                self.app.info(format!(
                    "Esc dropped the {} typed while the filter ran: none of them acted",
                    dropped.words()
                ));
                return quit;
            }
        }
        match self.admit(event) {
            Admit::Quit => true,
            Admit::Taken => false,
            Admit::Now(event) => self.act(event, more_queued),
        }
    }

    /// Handles one terminal event; true when the UI should quit.
    pub fn handle_event(&mut self, event: Event) -> bool {
        self.handle_queued(event, false)
    }

    pub fn handle_key(&mut self, key: KeyEvent) -> bool {
        self.handle_queued(Event::Key(key), false)
    }

    /// Whether `event` is handled now, quits, or waits for the filter's matches (README, "The
    /// terminal UI"): until they are in, the list holds the rows the filter hides, or part of
    /// its matches, and keys typed in one burst (`/text⏎jd`, a paste, a slow link) moved and
    /// deleted there (found by review, on 40,000 records), a click selected a row the matches
    /// then moved away from. Waiting is holding, not blocking: the loop keeps drawing, Esc is
    /// seen at once. Ctrl-c quits at once, before any database call (found by review: `q`
    /// waited behind a lock); `q` too, unless keys wait ahead of it (in a paste it may be text
    /// they type). A filter that failed takes no key until Esc clears it.
    fn admit(&mut self, event: Event) -> Admit {
        let now = self.app.clock.now();
        self.expire_held(now);
        match &event {
            Event::Key(key) => {
                if key.kind == KeyEventKind::Release {
                    return Admit::Now(event);
                }
                if super::keymap::quits_everywhere(key)
                    || (self.held.is_empty() && self.app.quits(key))
                {
                    return Admit::Quit;
                }
                // Esc cancels the filter (or closes what is open): it never waits.
                if key.code == KeyCode::Esc {
                    return Admit::Now(event);
                }
            }
            Event::Mouse(m) if self.mouse && super::mouse::acts(m) => {}
            // Nothing a filter's matches change: a resize, a pointer's motion.
            _ => return Admit::Now(event),
        }
        let waits = match self.filter_wait() {
            FilterWait::Ready => !self.held.is_empty(),
            FilterWait::Running => true,
            FilterWait::Failed => {
                // Events held before the failure were dropped with it (`apply_reply`).
                self.app.error(
                    "the filter failed before its matches all came, so the list may hold rows it hides: that key was not acted on (Esc clears the filter)",
                );
                return Admit::Taken;
            }
        };
        if !waits {
            return Admit::Now(event);
        }
        // The filter line says how many wait (`Session::draw`); a toast would hide its progress.
        self.held.push(event, now);
        Admit::Taken
    }

    /// Handles an admitted event.
    fn act(&mut self, event: Event, more_queued: bool) -> bool {
        let mut motion = false;
        if let Event::Key(key) = event {
            motion = self.is_list_motion(&key) && !self.app.memories().filtering();
            if more_queued && motion {
                self.begin_turn();
                let action = self.app.handle_key(key);
                if let Err(e) = self.try_perform(action) {
                    self.app
                        .popup("That did not work", crate::store::error_text(&e));
                }
                self.sync_owed = true;
                return false;
            }
        }
        if motion {
            // The last motion of a burst loads the detail where it lands (its `perform`
            // syncs): settling first would load the row before it too (found by a test
            // counting the loads of a held `j`).
            self.sync_owed = false;
        } else {
            self.settle();
        }
        match event {
            Event::Key(key) => {
                self.begin_turn();
                let action = self.app.handle_key(key);
                if action == Action::Quit {
                    return true;
                }
                self.perform(action);
                false
            }
            Event::Resize(w, h) => {
                self.begin_turn();
                self.resize(w, h);
                false
            }
            Event::Mouse(m) if self.mouse => {
                self.begin_turn();
                let action = self.app.handle_mouse(m);
                self.perform(action);
                false
            }
            _ => false,
        }
    }

    /// Whether a key or click now would act on a list the filter has not finished with. A
    /// line being typed, or a dialog, takes keys for itself: they do not wait.
    fn filter_wait(&self) -> FilterWait {
        let memories = self.app.memories();
        if self.app.tab != Tab::Memories
            || self.app.tabs.typing().is_some()
            || !self.app.dialogs.is_empty()
            || !memories.filtering()
        {
            FilterWait::Ready
        } else if self.failed_filter == Some(memories.filter.generation) {
            FilterWait::Failed
        } else {
            FilterWait::Running
        }
    }

    /// Held events that waited past [`HOLD_LIMIT`] are dropped, and the message line says so;
    /// true when they were.
    fn expire_held(&mut self, now: chrono::DateTime<chrono::Utc>) -> bool {
        if !self.held.expired(now) {
            return false;
        }
        let dropped = self.held.drop_all();
        self.app.error(format!(
            "the filter's matches did not all come within {} s, so the list may hold rows it hides: the {} typed behind it were dropped, none acted (Esc clears the filter)",
            HOLD_LIMIT.num_seconds(),
            dropped.words()
        ));
        true
    }

    /// Replays the held events, in order, once the filter's matches are in; true when any
    /// was. A replayed key that commits another filter holds the rest again. Motions are
    /// replayed as a drained burst is: the detail is loaded where they end.
    fn release_held(&mut self) -> bool {
        if self.held.is_empty() {
            return false;
        }
        let mut replayed = false;
        loop {
            match self.filter_wait() {
                FilterWait::Running => {
                    if replayed {
                        self.held.restart(self.app.clock.now());
                    }
                    break;
                }
                FilterWait::Failed => {
                    let dropped = self.held.drop_all();
                    self.app.error(format!(
                        "the filter failed before its matches all came: the {} typed behind it were dropped, none acted (Esc clears the filter)",
                        dropped.words()
                    ));
                    break;
                }
                FilterWait::Ready => {}
            }
            let Some(event) = self.held.pop() else {
                break;
            };
            replayed = true;
            let more = !self.held.is_empty();
            if self.act(event, more) {
                self.held = Held::default();
                self.quit = true;
                break;
            }
        }
        self.settle();
        let overflow = self.held.overflow();
        if self.held.is_empty() && overflow.total() > 0 {
            self.held.forget_overflow();
            self.app.error(format!(
                "the keys held for the filter's matches acted; {} typed past the {} held at most were dropped",
                overflow.words(),
                thousands(HELD_MAX as i64)
            ));
        }
        replayed
    }

    /// A held `q` (or another key that quits) was replayed: the loop ends.
    pub fn quit_asked(&self) -> bool {
        self.quit
    }

    /// Whether a plain `q` quits where the focus is now (a list), rather than closing a dialog
    /// or being typed — and waits behind no held key, which may make it text.
    pub fn q_quits(&self) -> bool {
        use super::keymap::{lookup, Command};
        let q = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
        self.held.is_empty() && lookup(&self.app.contexts(), &q) == Some(Command::Quit)
    }

    /// Whether a plain `q` quits while `event` is handled: where it quits now, and `event` is
    /// no key that could make it something else (a dialog, the filter, a held key's text) —
    /// a motion, a tab or a pane.
    pub fn q_quits_while(&self, event: &Event) -> bool {
        use super::keymap::{lookup, Command as C};
        let quits = self.q_quits();
        match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => {
                quits
                    && lookup(&self.app.contexts(), key).is_some_and(|c| {
                        c.is_motion()
                            || matches!(
                                c,
                                C::Show(_) | C::NextPane | C::PrevPane | C::Fold | C::Unfold
                            )
                    })
            }
            _ => quits,
        }
    }

    /// What waits for the filter's matches ([`Session::admit`]).
    pub fn held(&self) -> super::held::Tally {
        self.held.tally()
    }

    /// Loads the detail a deferred list motion owes ([`Session::handle_queued`]).
    pub fn settle(&mut self) {
        if std::mem::take(&mut self.sync_owed) {
            self.after_change();
        }
    }

    /// Whether `key` moves the current view's list selection and does nothing else.
    fn is_list_motion(&self, key: &KeyEvent) -> bool {
        let motion =
            super::keymap::lookup(&self.app.contexts(), key).is_some_and(|c| c.is_motion());
        motion
            && self.app.dialogs.is_empty()
            && self.app.tab == Tab::Memories
            && self.app.focus == Focus::List
            && self.app.tabs.typing().is_none()
    }

    /// Starts the calls of one key (or poll): a store that gave up on a lock looks, without
    /// waiting, whether it is gone; if it is, what could not be read is read again at the next
    /// poll (README, "Waiting for locks": one wait a key, however many loads it makes).
    fn begin_turn(&mut self) {
        if self.store.turn() {
            self.owed = true;
        }
    }

    pub fn resize(&mut self, width: u16, height: u16) {
        self.app.size = (width, height);
        // The window fills the new height; the selected event stays in sight.
        let env = self.app.env();
        if let Err(e) = self.app.tabs.memories.fill(&*self.store, &env) {
            self.app.error(crate::store::error_text(&e));
        }
    }

    /// What the loop must write to the terminal (and then flush), emptied by the call.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// Whether background work is still running (the loop then polls more often).
    pub fn busy(&self) -> bool {
        !self.loads_waiting.is_empty() || self.app.memories().filtering() || !self.held.is_empty()
    }

    /// Draws a frame at the clock's current reading.
    pub fn draw(&mut self, frame: &mut Frame<'_>) {
        self.app.now = self.app.clock.now();
        self.app.tabs.memories.waiting = self.held.waiting_words();
        for dialog in &mut self.app.dialogs {
            dialog.lay_out(frame.area());
        }
        super::draw::draw(frame, &self.app);
    }

    pub fn perform(&mut self, action: Action) {
        if let Err(e) = self.try_perform(action) {
            self.app
                .popup("That did not work", crate::store::error_text(&e));
        }
        self.after_change();
    }

    fn after_change(&mut self) {
        if let Err(e) = self.sync() {
            self.app.error(crate::store::error_text(&e));
        }
        self.collect();
    }

    fn try_perform(&mut self, action: Action) -> Result<()> {
        match action {
            Action::None | Action::Quit => {}
            Action::Move(m) => {
                let page = self.app.page();
                self.app.tabs.memories.move_by(&*self.store, m, page)?;
            }
            Action::Fold { scope, folded } => {
                let page = self.app.page();
                self.app
                    .tabs
                    .memories
                    .fold(&*self.store, scope, folded, page)?;
            }
            Action::Filter(query) => self.start_filter(query, true)?,
            Action::ShowTab(tab) => {
                // A database that cannot be polled is not asked again here: the next poll does
                // (an unreachable server would hold each tab's load for the connect timeout).
                if tab != Tab::Memories && self.app.lost.is_none() {
                    // A list that cannot be read says so in its own pane (`App::unloaded`),
                    // and the others list what they hold.
                    let _ = self.reload_tabs();
                    self.start_tab();
                }
            }
            Action::LoadReads => self.start_tab(),
            Action::ExplainRead(id) => self.explain_read(id),
            Action::GoTo(mark) => self.go_to(mark)?,
            Action::PreviewRescope => self.preview_rescope()?,
            Action::PreviewRevert => self.preview_revert(),
            Action::PreviewDelete(target) => self.submit(Job::Load(Load::DeletePreview(target))),
            Action::Apply(curation) => self.apply(curation)?,
            Action::Copy(text) => self.copy(&text),
            Action::CopyValue(id) => match self.store.get(&id)? {
                Some(rec) => self.copy(&super::clipboard::value_text(&rec.value)),
                None => self
                    .app
                    .error(format!("{id} holds no live record now: nothing to copy")),
            },
            Action::CopyEvent(event) => {
                match self.store.history_event(event)?.and_then(|e| e.value) {
                    Some(v) => self.copy(&super::clipboard::value_text(&v)),
                    None => self.app.info("this event holds no value to copy"),
                }
            }
            Action::OpenEvent(event) => match self.store.history_event(event)? {
                Some(event) => {
                    let identity = self
                        .app
                        .memories()
                        .timeline
                        .detail
                        .as_ref()
                        .map(|d| d.identity());
                    if let Some(identity) = identity {
                        (self.app.dialogs).push(Dialog::Event(EventDialog::new(identity, event)));
                    }
                }
                None => self
                    .app
                    .error("that event is no longer logged (purged since): the timeline reloads"),
            },
            Action::MoveEvent(m) => {
                let (page, screen) = (self.app.page(), self.app.env().screen());
                let timeline = &mut self.app.tabs.memories.timeline;
                timeline.step(&*self.store, m, page, screen)?;
            }
            Action::Explain(q) => {
                let result = refresh::explain(&*self.store, &q);
                self.hand_top(Loaded::Explain(&q, &result));
            }
        }
        Ok(())
    }

    /// Puts `text` on the clipboard: an OSC 52 sequence the loop writes, and a toast.
    fn copy(&mut self, text: &str) {
        match super::clipboard::osc52(text) {
            Ok(bytes) => {
                self.output.extend_from_slice(&bytes);
                let n = text.chars().count() as i64;
                self.app.info(format!(
                    "copied {} to the clipboard (OSC 52)",
                    plural(n, "character", "characters")
                ));
            }
            Err(why) => self.app.error(why),
        }
    }

    /// Runs a confirmed change through the store's own write paths, says what happened, and
    /// reloads everything it may have touched.
    fn apply(&mut self, curation: Curation) -> Result<()> {
        if let Some(why) = self.app.refusal() {
            self.app.error(why);
            return Ok(());
        }
        let message = match &curation {
            Curation::Delete(target) => {
                let r = self.store.delete(target, Some(DELETE_REASON))?;
                repair::deleted_message(&r)
            }
            Curation::Restore(id) => {
                self.store.restore(id)?;
                format!("restored {id}: writes to it are accepted again")
            }
            Curation::Resolve { pending_id, scope } => {
                // g/r/t pick among the candidates only.
                let out = self.store.resolve_pending(*pending_id, scope, false)?;
                format!("#{pending_id} → {scope}: {}", repair::outcome_words(&out))
            }
            Curation::Reject { pending_id } => {
                self.store.reject_pending(*pending_id)?;
                format!("#{pending_id} rejected: nothing was written")
            }
            // A refusal (tombstoned target, a causally newer value, purged content) changed
            // nothing: why, in the UI's words, is the message.
            Curation::Rescope { identity, to } => {
                match self.store.rescope(
                    &identity.subject,
                    &identity.predicate,
                    &identity.scope,
                    to,
                ) {
                    Ok(outcomes) => {
                        let parts: Vec<String> =
                            outcomes.iter().map(repair::outcome_text).collect();
                        format!(
                            "rescoped {} · {}: {}",
                            identity.subject,
                            identity.predicate,
                            parts.join("; ")
                        )
                    }
                    Err(e) => {
                        self.app
                            .error(format!("rescope refused: {}", repair::refusal_words(&e)));
                        return Ok(());
                    }
                }
            }
            Curation::Revert {
                identity,
                to_version,
            } => match self.store.revert(identity, Some(*to_version)) {
                Ok(out) => format!(
                    "reverted {identity} to the value of v{to_version}: {}",
                    repair::outcome_text(&out)
                ),
                Err(e) => {
                    self.app
                        .error(format!("revert refused: {}", repair::refusal_words(&e)));
                    return Ok(());
                }
            },
        };
        // Done: a list that cannot be read again afterwards (a row damaged meanwhile) does not
        // make it look undone (found by review: "That did not work" after a delete went through).
        match self.reload() {
            Ok(()) => self.app.info(message),
            Err(e) => self.app.popup(
                "Done, but the lists could not be read again",
                format!(
                    "{message}. Then reading the lists again failed: {}",
                    crate::store::error_text(&e)
                ),
            ),
        }
        Ok(())
    }

    /// Reloads everything from the store, keeping the selection and the filter.
    pub fn reload(&mut self) -> Result<()> {
        self.app.now = self.app.clock.now();
        // Polled again: each list says for itself whether it could be read. An error said while
        // the database could not be reached is old news now (found by an exploratory test: a
        // failed suspects scan's sentence stayed on screen after the database came back).
        if self.app.lost.take().is_some() && self.app.toast.as_ref().is_some_and(|t| t.error) {
            self.app
                .info("the database answers again: everything was read again");
        }
        self.app.counts_unknown = false;
        self.submit(Job::Load(Load::Counts));
        let page = self.app.page();
        if let Some(job) = self.app.tabs.memories.rerun_filter(&*self.store, page)? {
            self.submit(Job::Filter(job));
        }
        let loaded = match self.reload_tabs() {
            Ok(()) => {
                refresh::refresh_dialogs(&mut *self.store, &mut self.app.dialogs).map(|target| {
                    if let Some(target) = target {
                        self.submit(Job::Load(Load::DeletePreview(target)));
                    }
                })
            }
            // A dialog that would change data was opened on rows this refresh could not read
            // again: it closes, so `y` cannot act on a selection no pane shows (found by
            // review: the delete went through, then the reload's failure said it had not).
            Err(e) => {
                refresh::close_acting_dialogs(&mut self.app.dialogs, &crate::store::error_text(&e));
                Err(e)
            }
        };
        // The background work starts even when a tab could not load what it lists (a row a raw
        // client damaged): the Check tab then says what is wrong, not its last report.
        self.start_tabs();
        loaded?;
        self.app.refreshed_at = Some(self.app.now);
        self.sync()?;
        Ok(())
    }

    /// Checks for another process's commit; reloads when there was one. A database file
    /// removed or replaced since it was opened is told once, in a message: its connection
    /// reads the old file and cannot write it, and nothing at the path reaches this screen.
    pub fn poll_live(&mut self) -> bool {
        let moved = self.store.moved_away();
        if moved != self.app.file_gone {
            self.app.file_gone = moved;
            self.app.read_only = moved || self.store.is_read_only();
            if moved {
                self.app.popup(
                    MOVED_TITLE,
                    format!(
                        "{} was removed, or another file was put in its place, after this UI \
                         opened it. The screen shows the file as it was, and nothing can be \
                         changed from here any more; press q and start memscope again to open \
                         what is at that path now.",
                        self.app.db_path
                    ),
                );
                return true;
            }
        }
        if moved {
            return false;
        }
        // Between polls that saw no write, the file's log is emptied (README, "The terminal UI").
        if let Err(e) = self.store.settle_idle_log() {
            self.app.error(format!(
                "cannot empty the database's write-ahead log: {}",
                crate::store::error_text(&e)
            ));
        }
        self.begin_turn();
        match self.store.data_version() {
            Ok(v) => {
                let changed = v != self.data_version;
                self.data_version = v;
                if !(changed || std::mem::take(&mut self.owed)) {
                    return false;
                }
                if let Err(e) = self.reload() {
                    self.app
                        .error(format!("refresh failed: {}", crate::store::error_text(&e)));
                }
                self.collect();
                true
            }
            Err(e) => {
                self.lose(crate::store::error_text(&e));
                true
            }
        }
    }

    /// The database could not be polled (dropped, unreachable): what the screen holds goes
    /// (README, "The terminal UI", Check) — every tab drops its rows and says why, the
    /// header's counts are unknown, a dialog that would change data closes — so that no key
    /// acts on rows the database may no longer hold. Everything is read again once a poll
    /// reaches it.
    fn lose(&mut self, why: String) {
        if self.app.lost.as_deref() != Some(why.as_str()) {
            self.app.error(format!("cannot poll the database: {why}"));
        }
        for &tab in Tab::ALL {
            self.app.tabs.get_mut(tab).unload();
        }
        refresh::close_acting_dialogs(&mut self.app.dialogs, &why);
        self.app.counts = None;
        self.app.counts_unknown = true;
        self.app.lost = Some(why);
        self.owed = true;
    }

    /// Every tab loads what it lists (the tab bar counts them all). One that cannot (a row a
    /// raw client damaged) does not stop the others: each failure is kept for its tab to show
    /// (`App::unloaded`), and the first is returned.
    fn reload_tabs(&mut self) -> Result<()> {
        let env = self.app.env();
        let mut first = None;
        self.app.unloaded.clear();
        for &tab in Tab::ALL {
            let component = self.app.tabs.get_mut(tab);
            if let Err(e) = component.reload(&*self.store, &env) {
                component.unload();
                let why = crate::store::error_text(&e);
                self.app.unloaded.push((tab, why));
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The shown tab's slow work goes to the workers.
    fn start_tab(&mut self) {
        self.app.now = self.app.clock.now();
        let now = self.app.now;
        let load = self.app.tabs.get_mut(self.app.tab).start(now);
        if let Some(load) = load {
            self.submit(Job::Load(load));
        }
    }

    /// On a refresh: the shown tab's slow work, and that of the tabs that follow every refresh.
    fn start_tabs(&mut self) {
        self.start_tab();
        let (shown, now) = (self.app.tab, self.app.now);
        let mut loads = Vec::new();
        for &tab in Tab::ALL.iter().filter(|&&t| t != shown) {
            let c = self.app.tabs.get_mut(tab);
            if c.start_on_refresh() {
                loads.extend(c.start(now));
            }
        }
        for load in loads {
            self.submit(Job::Load(load));
        }
    }

    fn start_filter(&mut self, query: String, progressive: bool) -> Result<()> {
        let page = self.app.page();
        let memories = &mut self.app.tabs.memories;
        match memories.start_filter(&*self.store, query, progressive, page)? {
            Some(job) => self.submit(Job::Filter(job)),
            None => self.workers.cancel_filter(memories.filter.generation),
        }
        Ok(())
    }

    fn submit(&mut self, job: Job) {
        if let Job::Load(load) = &job {
            self.loads_waiting.insert(load.kind());
        }
        self.workers.submit(job);
    }

    /// Applies what the workers sent, unless they are deferred ([`WorkerMode::Deferred`]).
    fn collect(&mut self) -> bool {
        !self.deferred && self.pump_workers()
    }

    /// Applies what the workers sent (inline: runs the queued jobs now), then replays the
    /// keys and clicks that waited for the filter's matches, if they are in (or drops them,
    /// when they waited too long). True when anything changed on screen; a replayed key may
    /// have quit ([`Session::quit_asked`]).
    pub fn pump(&mut self) -> bool {
        let expired = self.expire_held(self.app.clock.now());
        let changed = self.pump_workers();
        self.release_held() || changed || expired
    }

    /// Applies what the workers sent (inline: runs the queued jobs now). True when anything
    /// changed on screen.
    fn pump_workers(&mut self) -> bool {
        let replies = match &mut self.workers {
            Workers::Inline(queue) => {
                let mut jobs = std::mem::take(queue);
                if self.deferred {
                    // Latest wins, as on the filter thread: only the newest query is scanned.
                    let last = jobs.iter().rposition(|j| matches!(j, Job::Filter(_)));
                    let mut at = 0;
                    jobs.retain(|j| {
                        at += 1;
                        !matches!(j, Job::Filter(_)) || Some(at - 1) == last
                    });
                }
                let mut out = Vec::new();
                for job in jobs {
                    match job {
                        Job::Filter(f) => {
                            let r = run_filter(
                                &*self.store,
                                &f,
                                &|| false,
                                &mut |reply| {
                                    out.push(reply);
                                    true
                                },
                                &mut self.narrow_cache,
                            );
                            if let Err(e) = r {
                                out.push(Reply::Failed {
                                    job: Failed::Filter,
                                    error: crate::store::error_text(&e),
                                });
                            }
                        }
                        Job::Load(l) => out.push(run_load(&*self.store, l)),
                    }
                }
                out
            }
            Workers::Threads(_) => self.workers.try_replies(),
        };
        let changed = !replies.is_empty();
        for reply in replies {
            if let Err(e) = self.apply_reply(reply) {
                self.app.error(crate::store::error_text(&e));
            }
        }
        if changed {
            if let Err(e) = self.sync() {
                self.app.error(crate::store::error_text(&e));
            }
        }
        changed
    }

    fn apply_reply(&mut self, reply: Reply) -> Result<()> {
        let env = self.app.env();
        let errors: Vec<String> = (self.app.tabs.all_mut().into_iter())
            .filter_map(|tab| tab.take(&reply, &*self.store, &env).err())
            .collect();
        for e in errors {
            self.app.error(e);
        }
        self.hand_top(Loaded::Reply(&reply));
        match reply {
            Reply::Filter { .. } => {}
            Reply::Counts { counts, .. } => {
                self.loads_waiting.remove(&LoadKind::Counts);
                self.app.counts = Some(counts);
                self.app.counts_unknown = false;
            }
            Reply::Check(_) => {
                self.loads_waiting.remove(&LoadKind::Check);
            }
            Reply::DeletePreview { .. } => {
                self.loads_waiting.remove(&LoadKind::DeletePreview);
            }
            Reply::Reads { .. } => {
                self.loads_waiting.remove(&LoadKind::Reads);
            }
            Reply::Suspects(_) => {
                self.loads_waiting.remove(&LoadKind::Suspects);
            }
            Reply::Failed { job, error } => {
                match job {
                    Failed::Filter => {
                        self.failed_filter = Some(self.app.tabs.memories.filter.generation)
                    }
                    Failed::Counts => {
                        self.loads_waiting.remove(&LoadKind::Counts);
                        // Not the figures of before: they may be wrong now.
                        self.app.counts = None;
                        self.app.counts_unknown = true;
                    }
                    Failed::Check => {
                        self.loads_waiting.remove(&LoadKind::Check);
                    }
                    // The threads are gone (or could not open the database): what they had
                    // in hand will not come back.
                    Failed::Workers => {
                        self.loads_waiting.clear();
                        self.failed_filter = Some(self.app.tabs.memories.filter.generation);
                    }
                }
                let mut said = format!("{job} failed: {error}");
                if matches!(job, Failed::Filter | Failed::Workers) && !self.held.is_empty() {
                    let dropped = self.held.drop_all();
                    said.push_str(&format!(
                        "; the {} typed behind the filter were dropped, none acted (Esc clears the filter)",
                        dropped.words()
                    ));
                }
                self.app.error(said);
            }
        }
        Ok(())
    }

    /// Loads what the state shows and does not have yet: the selected record's history, the
    /// selected pending item's choices.
    fn sync(&mut self) -> Result<()> {
        let env = self.app.env();
        self.app.tabs.get_mut(self.app.tab).sync(&*self.store, &env)
    }

    /// Resolves the read on top (the as-of dialog) as it stood at its time, and as it would
    /// resolve now.
    fn explain_read(&mut self, id: i64) {
        let Some(Dialog::AsOf(d)) = self.app.dialogs.last() else {
            return;
        };
        if d.read.id != id {
            return;
        }
        let result = refresh::as_of(&*self.store, &d.read);
        self.hand_top(Loaded::AsOf(id, &result));
    }

    /// Opens the current view on the marked record with its history beside it. The filter
    /// and a folded group would hide it, so they give way.
    fn go_to(&mut self, mark: TimelineMark) -> Result<()> {
        // A record deleted or moved since: say so where the user is, and move nothing (the
        // list would open on a neighbour, its history beside it, as if it were the one).
        if self.store.get(&mark.identity)?.is_none() {
            self.app.error(format!(
                "{} holds no live record now (deleted or moved since): `memscope history` still shows its timeline",
                mark.identity
            ));
            return Ok(());
        }
        self.app.tab = Tab::Memories;
        self.app.focus = Focus::List;
        let memories = &mut self.app.tabs.memories;
        if let Some(generation) = memories.drop_filter() {
            self.workers.cancel_filter(generation);
        }
        let page = self.app.page();
        match self.app.tabs.memories.go_to(&*self.store, mark, page)? {
            Ok(said) => {
                self.app.focus = Focus::Detail;
                self.app.info(said);
            }
            Err(why) => self.app.error(why),
        }
        Ok(())
    }

    /// Loads the rescope dialog's suggestions (once) and the preview of its target.
    fn preview_rescope(&mut self) -> Result<()> {
        let Some(Dialog::Rescope(d)) = self.app.dialogs.last() else {
            return Ok(());
        };
        let record = d.record.clone();
        if d.suggestions.is_none() {
            // The suspects scan's finding on it, when the last scan listed it: the same
            // suggestions whichever tab opened the dialog.
            let suspect = self.app.tabs.suspects.listed(&record);
            let list = repair::rescope_suggestions(&*self.store, &record, suspect)?;
            self.hand_top(Loaded::Suggestions(list));
        }
        // The suggestions may have set the target.
        let Some(Dialog::Rescope(d)) = self.app.dialogs.last() else {
            return Ok(());
        };
        let preview = repair::rescope_preview(&mut *self.store, &record, &d.target);
        self.hand_top(Loaded::Rescope(preview));
        Ok(())
    }

    /// Loads the revert dialog's earlier versions, or what choosing the chosen one does.
    fn preview_revert(&mut self) {
        let Some(Dialog::Revert(d)) = self.app.dialogs.last() else {
            return;
        };
        let record = d.record.clone();
        if let Some(version) = d.effect_wanted() {
            let effect = repair::revert_effect(&mut *self.store, &record, version);
            self.hand_top(Loaded::RevertEffect(version, effect));
            return;
        }
        let choices = repair::revert_choices(&mut *self.store, &record)
            .map_err(|e| crate::store::error_text(&e));
        self.hand_top(Loaded::Revert(choices));
    }

    /// Hands what was loaded to the dialog on top; it keeps what is its own.
    fn hand_top(&mut self, loaded: Loaded<'_>) {
        if let Some(top) = self.app.dialogs.last_mut() {
            top.take(loaded);
        }
    }
}
