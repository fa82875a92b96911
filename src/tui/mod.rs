//! The terminal UI (README, "The terminal UI"): inspect and curate the memory database.
//!
//! - `app`: the state and key handling (keys → commands → actions), no IO;
//! - `keymap`: the bindings as data, which also generate the help overlay and the footer;
//! - `session`: the loop's side — performs actions on the store, applies worker replies,
//!   polls `PRAGMA data_version` for other processes' commits;
//! - `list`: the current view as a keyset-paged window; `worker`: the filter and slow loads
//!   off the UI thread; `draw`: rendering, which only reads the state;
//! - `incident`: the Reads tab, a read explained as of its time, the rescope and revert
//!   dialogs (state and keys); `repair`: what a rescope or revert would do, from the store.

pub mod app;
pub mod draw;
pub mod incident;
pub mod keymap;
pub mod layout;
pub mod list;
pub mod repair;
pub mod session;
pub mod text;
pub mod worker;

pub use app::{Action, App, Curation, Focus, Tab};
pub use session::{Session, WorkerMode};

use crate::store::{Clock, Store};
use anyhow::{Context, Result};
use crossterm::event;
use ratatui::DefaultTerminal;
use std::time::{Duration, Instant};

/// How often the UI looks for other processes' commits.
pub const LIVE_POLL: Duration = Duration::from_millis(300);
/// How often the loop looks for worker replies while background work runs.
const BUSY_POLL: Duration = Duration::from_millis(10);

/// Restores the terminal however the UI ends: on drop (quit, error) and, through the panic hook
/// `ratatui::try_init` chains in front of the previous one, on panic.
struct TerminalGuard {
    terminal: DefaultTerminal,
}

impl TerminalGuard {
    fn enter() -> Result<TerminalGuard> {
        match ratatui::try_init() {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                ratatui::restore();
                Err(e).context(
                    "the terminal UI needs an interactive terminal; use the CLI (memscope --help) from scripts",
                )
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let _ = self.terminal.show_cursor();
        ratatui::restore();
    }
}

/// Opens the UI on `store` and runs until the user quits; returns the exit code.
pub fn run(store: Store) -> Result<i32> {
    let mut guard = TerminalGuard::enter()?;
    let size = guard.terminal.size()?;
    let mut session = Session::new(
        store,
        Clock::System,
        (size.width, size.height),
        WorkerMode::Threads,
    )?;
    event_loop(&mut guard.terminal, &mut session)?;
    drop(guard);
    Ok(crate::cli::EXIT_OK)
}

fn event_loop(terminal: &mut DefaultTerminal, session: &mut Session) -> Result<()> {
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
        if event::poll(timeout)? {
            // Handle everything already queued before drawing again (key repeat, pastes).
            loop {
                if session.handle_event(event::read()?) {
                    return Ok(());
                }
                if !event::poll(Duration::ZERO)? {
                    break;
                }
            }
            dirty = true;
        }
        if session.pump() {
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
