//! The terminal UI (README, "The terminal UI"): inspect and curate the memory database.
//! docs/ARCHITECTURE.md ("The terminal UI") follows a key press through these modules.
//!
//! - `app`: the state and key handling (keys → commands → actions), no IO;
//! - `keymap`: the bindings as data, which also generate the help overlay and the footer;
//! - `tabs`: the tabs (the current view, pending, tombstones, check, reads), one file each,
//!   each registered by one line; `dialogs`: the dialogs, one file each (state, keys, drawing);
//! - `session`: the loop's side — performs actions on the store, hands worker replies and
//!   loaded previews to the tab or dialog that owns them, polls `PRAGMA data_version` for
//!   other processes' commits; `held`: the keys and clicks it holds while the filter runs;
//! - `rows`: the list the loaded lists share (cursor, window, click, panes); `list`: the
//!   current view as a keyset-paged window; `worker`: the filter and slow loads off the UI
//!   thread; `draw`: the frame around the tabs and the drawing helpers, reading the state only;
//! - `incident`: what the Reads tab and the repair dialogs share (the `since` window, the
//!   version a read got); `repair`: what a rescope or revert would do, from the store;
//!   `refresh`: open dialogs after a refresh (stored words read again, or the dialog gone);
//! - `timeline`: the current view's history pane (its event cursor, drawing); `clipboard`: `c` as an OSC 52 sequence the
//!   loop writes; `mouse`: wheel and clicks, hit-tested with `layout`;
//! - `input`: the terminal's events, read on a thread of their own that can still quit while
//!   the loop waits on a database that stopped answering.

pub mod app;
pub mod clipboard;
pub mod dialogs;
pub mod draw;
pub mod fuzzy;
pub mod held;
pub mod incident;
pub mod input;
pub mod keymap;
pub mod layout;
pub mod list;
mod mouse;
pub mod refresh;
pub mod repair;
pub mod rows;
pub mod session;
pub mod tabs;
pub mod text;
pub mod timeline;
pub mod worker;

pub use app::{Action, App, Curation, Focus, Tab};
pub use session::{Session, WorkerMode};

use crate::model::Identity;
use crate::store::{Clock, UiStore};
use anyhow::{Context, Result};
use ratatui::DefaultTerminal;
use std::time::{Duration, Instant};

/// How often the UI looks for other processes' commits.
pub const LIVE_POLL: Duration = Duration::from_millis(300);
/// How often the loop looks for worker replies while background work runs.
const BUSY_POLL: Duration = Duration::from_millis(10);

/// Whether the UI takes the mouse. Capturing it gives the wheel and clicks to the UI and takes
/// text selection from the terminal (most terminals still select with Shift held).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mouse {
    Capture,
    /// `--no-mouse`: the terminal keeps the mouse.
    Off,
}

/// Restores the terminal however the UI ends: on drop (quit, error) and, through the panic hook
/// `ratatui::try_init` chains in front of the previous one, on panic. Mouse capture is turned
/// off on both paths too: a shell left in mouse mode prints escape codes on every click.
struct TerminalGuard {
    terminal: DefaultTerminal,
    mouse: Mouse,
}

fn release_mouse() {
    let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableMouseCapture);
}

impl TerminalGuard {
    fn enter(mouse: Mouse) -> Result<TerminalGuard> {
        const NEEDS_A_TERMINAL: &str =
            "the terminal UI needs an interactive terminal; use the CLI (memscope --help) from scripts";
        // Not a terminal (a pipe, a file): nothing to set up, and nothing to undo — restoring
        // would write escape codes into the pipe.
        if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            anyhow::bail!(NEEDS_A_TERMINAL);
        }
        match ratatui::try_init() {
            Ok(terminal) => {
                let guard = TerminalGuard { terminal, mouse };
                if mouse == Mouse::Capture {
                    // In front of ratatui's hook, which restores the rest.
                    let previous = std::panic::take_hook();
                    std::panic::set_hook(Box::new(move |info| {
                        release_mouse();
                        previous(info);
                    }));
                    crossterm::execute!(std::io::stdout(), crossterm::event::EnableMouseCapture)
                        .context(
                            "cannot turn on mouse capture (memscope --no-mouse goes without)",
                        )?;
                }
                Ok(guard)
            }
            Err(e) => {
                ratatui::restore();
                Err(e).context(NEEDS_A_TERMINAL)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        if self.mouse == Mouse::Capture {
            release_mouse();
        }
        let _ = self.terminal.show_cursor();
        ratatui::restore();
    }
}

/// Opens the UI on `store` (on the record `select`, when given and live) and runs until the
/// user quits; returns the exit code.
pub fn run(store: Box<dyn UiStore>, mouse: Mouse, select: Option<Identity>) -> Result<i32> {
    // A file another process holds locked makes the UI say so within 2 s and keep handling
    // its keys, as on PostgreSQL (README, "Waiting for locks"); every connection of this
    // process, the workers' included, waits no longer.
    crate::store::cap_lock_wait(crate::store::UI_LOCK_WAIT);
    let mut guard = TerminalGuard::enter(mouse)?;
    // Before the session's first calls: a server that hangs at start can be left too.
    let input = input::Input::start(mouse);
    let size = guard.terminal.size()?;
    let mut session = Session::new(
        store,
        Clock::System,
        (size.width, size.height),
        WorkerMode::Threads,
    )?;
    session.mouse = mouse == Mouse::Capture;
    if let Some(id) = select {
        session.select(&id)?;
    }
    event_loop(&mut guard.terminal, &mut session, &input)?;
    // Closing says goodbye to the database (PostgreSQL's change notices): while the terminal
    // is still the UI's, so that a server that stopped answering cannot keep it.
    input.working();
    drop(session);
    drop(guard);
    Ok(crate::frontend::EXIT_OK)
}

fn event_loop(
    terminal: &mut DefaultTerminal,
    session: &mut Session,
    input: &input::Input,
) -> Result<()> {
    let mut last_live = Instant::now();
    let mut dirty = true;
    loop {
        if dirty {
            terminal.draw(|frame| session.draw(frame))?;
            dirty = false;
        }
        let until_live = LIVE_POLL.saturating_sub(last_live.elapsed());
        let timeout = if session.busy() {
            until_live.min(BUSY_POLL)
        } else {
            until_live
        };
        if let Some(mut next) = input.next(timeout)? {
            // Handle everything already queued before drawing again (key repeat, pastes); a
            // run of list motions loads the detail of where it ends, once.
            loop {
                let following = input.queued()?;
                input.handling(&next, session.q_quits_while(&next));
                if session.handle_queued(next, following.is_some()) {
                    return Ok(());
                }
                input.set_q_quits(session.q_quits());
                write_output(terminal, session);
                match following {
                    Some(event) => next = event,
                    None => break,
                }
            }
            session.settle();
            dirty = true;
        }
        // The workers' replies; and, once the filter's matches are in, the keys and clicks
        // that waited for them (`Session::admit`), replayed in order — a frame was drawn
        // while they waited.
        if session.pump() {
            write_output(terminal, session);
            if session.quit_asked() {
                return Ok(());
            }
            dirty = true;
        }
        if last_live.elapsed() >= LIVE_POLL {
            last_live = Instant::now();
            session.poll_live();
            // Ages and the refresh time move on even when nothing changed.
            dirty = true;
        }
    }
}

/// Writes what the session has for the terminal itself (an OSC 52 copy) between frames; a
/// failure is the user's to know, so it becomes a toast.
fn write_output(terminal: &mut DefaultTerminal, session: &mut Session) {
    use std::io::Write;
    let bytes = session.take_output();
    if bytes.is_empty() {
        return;
    }
    let backend = terminal.backend_mut();
    if let Err(e) = backend.write_all(&bytes).and_then(|()| backend.flush()) {
        session
            .app
            .error(format!("the copy could not be sent to the terminal: {e}"));
    }
}
