//! The terminal's keys, mouse and resizes, read on a thread of their own (README, "The terminal
//! UI": quitting while the database does not answer).
//!
//! The loop calls the database on its own thread. A server that stopped answering — a backend
//! stopped, a proxy that acknowledges every packet and forwards none — holds such a call
//! without bound, and a loop that read its own keys could not even quit. Here the loop takes
//! its events from a channel, and says when it goes to work and when it waits for input. Once
//! it has worked for [`STALLED`] without coming back, a quit key read here ends the process: the
//! terminal restored, one sentence on standard error saying what a change in flight may have
//! done. `Ctrl-c` quits so always; `q` only where it would quit (the loop says whether before
//! and after each event it handles: while a key that opens a dialog or the filter is handled,
//! it does not) and only when no key read before it is still untaken, since what `q` means
//! depends on those (a `/` makes it filter text).

use super::Mouse;
use crate::store::UI_LOCK_WAIT;
use anyhow::Result;
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the loop may work without coming back before a quit key ends the process: longer
/// than the UI waits for a lock, so that a key behind another session's lock is waited for
/// (README, "Waiting for locks": `q` then quits as usual, once the wait is over).
pub const STALLED: Duration = UI_LOCK_WAIT.saturating_add(Duration::from_secs(1));

/// What the loop tells the input thread.
struct Beat {
    start: Instant,
    /// When the loop last went to work, in milliseconds since `start` plus one; 0 while it
    /// waits for input.
    working_since: AtomicU64,
    /// Whether a plain `q` quits where the focus is.
    q_quits: AtomicBool,
    /// Key presses read that the loop has not started handling yet. Mouse motion, resizes and
    /// key releases count for nothing: they do not change what `q` means.
    unhandled: AtomicUsize,
}

impl Beat {
    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// How long the loop has been at work, when that is [`STALLED`] or more.
    fn stalled(&self) -> Option<Duration> {
        let since = self.working_since.load(Ordering::SeqCst);
        if since == 0 {
            return None;
        }
        let worked = Duration::from_millis(self.now().saturating_sub(since));
        (worked >= STALLED).then_some(worked)
    }

    /// Whether `key`, read while the loop is stalled, ends the process.
    fn ends(&self, key: &KeyEvent) -> bool {
        if key.kind == KeyEventKind::Release {
            return false;
        }
        if super::keymap::quits_everywhere(key) {
            return true;
        }
        key.code == KeyCode::Char('q')
            && key.modifiers.difference(KeyModifiers::SHIFT).is_empty()
            && self.unhandled.load(Ordering::SeqCst) == 0
            && self.q_quits.load(Ordering::SeqCst)
    }
}

/// Whether `event` is a key press (what [`Beat::unhandled`] counts).
fn is_key_press(event: &Event) -> bool {
    matches!(event, Event::Key(k) if k.kind != KeyEventKind::Release)
}

/// The loop's end of the input thread.
pub struct Input {
    events: Receiver<std::io::Result<Event>>,
    beat: Arc<Beat>,
}

impl Input {
    /// Starts reading the terminal. The thread lives as long as the process: it ends with the
    /// process, or when the terminal's input fails (the error is the loop's next event).
    pub fn start(mouse: Mouse) -> Input {
        let beat = Arc::new(Beat {
            start: Instant::now(),
            working_since: AtomicU64::new(0),
            q_quits: AtomicBool::new(true),
            unhandled: AtomicUsize::new(0),
        });
        let (send, events) = mpsc::channel();
        let theirs = beat.clone();
        std::thread::Builder::new()
            .name("memscope-input".into())
            .spawn(move || loop {
                let next = event::read();
                if let Ok(Event::Key(key)) = &next {
                    if let Some(waited) = theirs.stalled().filter(|_| theirs.ends(key)) {
                        quit_now(mouse, waited);
                    }
                }
                let failed = next.is_err();
                if next.as_ref().is_ok_and(is_key_press) {
                    theirs.unhandled.fetch_add(1, Ordering::SeqCst);
                }
                if send.send(next).is_err() || failed {
                    return;
                }
            })
            .expect("a thread to read the terminal");
        let input = Input { events, beat };
        input.working();
        input
    }

    /// The next event, waiting up to `timeout` (`None` when none came in that time). The loop
    /// counts as waiting for input meanwhile, and as working once this returns; the loop says
    /// when it starts handling each event ([`Input::handling`]).
    pub fn next(&self, timeout: Duration) -> Result<Option<Event>> {
        self.beat.working_since.store(0, Ordering::SeqCst);
        let got = self.events.recv_timeout(timeout);
        self.working();
        match got {
            Ok(event) => Ok(Some(event?)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => anyhow::bail!("the terminal's input ended"),
        }
    }

    /// An event already read, without waiting.
    pub fn queued(&self) -> Result<Option<Event>> {
        match self.events.try_recv() {
            Ok(event) => Ok(Some(event?)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => anyhow::bail!("the terminal's input ended"),
        }
    }

    /// The loop starts handling `event` (a call it makes may hang); `q_quits`: whether a plain
    /// `q` quits meanwhile, whatever the event does. Said in that order, so that the input
    /// thread never finds the key taken and what `q` meant before it.
    pub fn handling(&self, event: &Event, q_quits: bool) {
        self.set_q_quits(q_quits);
        if is_key_press(event) {
            self.beat.unhandled.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether a plain `q` quits where the focus is now.
    pub fn set_q_quits(&self, quits: bool) {
        self.beat.q_quits.store(quits, Ordering::SeqCst);
    }

    /// Marks the loop at work (also after it left the event loop, while the UI closes).
    pub fn working(&self) {
        self.beat
            .working_since
            .store(self.beat.now(), Ordering::SeqCst);
    }
}

/// Ends the process from the input thread: the terminal restored as the UI's own guard would,
/// and why on standard error. Nothing of the loop's runs again; the database ends the
/// connections' open transactions when it notices them gone.
fn quit_now(mouse: Mouse, waited: Duration) -> ! {
    if mouse == Mouse::Capture {
        super::release_mouse();
    }
    let _ = crossterm::execute!(std::io::stdout(), crossterm::cursor::Show);
    ratatui::restore();
    crate::frontend::output::errln!("{}", stalled_sentence(waited));
    std::process::exit(crate::frontend::EXIT_FAILED)
}

/// What a UI that quit while a database call waited says. Not why it waited: a server or a
/// network that stopped answering, a file on a disk that hangs, a long purge.
pub fn stalled_sentence(waited: Duration) -> String {
    format!(
        "memscope quit while a call to the database had waited {:.1} s without an answer; a \
         change asked for just before may or may not have been stored — `memscope history` \
         shows what was.",
        waited.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(working_for: Option<Duration>) -> Beat {
        let start = Instant::now() - Duration::from_secs(60);
        let beat = Beat {
            start,
            working_since: AtomicU64::new(0),
            q_quits: AtomicBool::new(true),
            unhandled: AtomicUsize::new(0),
        };
        if let Some(d) = working_for {
            let since = beat.now() - u64::try_from(d.as_millis()).unwrap();
            beat.working_since.store(since, Ordering::SeqCst);
        }
        beat
    }

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn a_loop_waiting_for_input_or_for_a_lock_is_not_stalled() {
        assert_eq!(beat(None).stalled(), None);
        assert_eq!(beat(Some(Duration::from_millis(200))).stalled(), None);
        // The UI's whole wait for another session's lock, and a little more.
        let lock_wait = UI_LOCK_WAIT + Duration::from_millis(500);
        assert_eq!(beat(Some(lock_wait)).stalled(), None);
        let waited = beat(Some(Duration::from_secs(4))).stalled().unwrap();
        assert!(waited >= Duration::from_secs(4), "{waited:?}");
    }

    #[test]
    fn ctrl_c_always_ends_a_stalled_ui_and_q_only_where_it_quits_with_nothing_unhandled() {
        let b = beat(Some(Duration::from_secs(4)));
        let q = key(KeyCode::Char('q'), KeyModifiers::NONE);
        let ctrl_c = key(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert!(b.ends(&q) && b.ends(&ctrl_c));
        assert!(!b.ends(&key(KeyCode::Char('j'), KeyModifiers::NONE)));
        assert!(!b.ends(&key(KeyCode::Char('q'), KeyModifiers::CONTROL)));
        let mut release = q;
        release.kind = KeyEventKind::Release;
        assert!(!b.ends(&release));
        // Typed into a filter or a dialog: a letter.
        b.q_quits.store(false, Ordering::SeqCst);
        assert!(!b.ends(&q) && b.ends(&ctrl_c));
        // Behind a `/` the loop has not handled, `q` may be the filter's.
        b.q_quits.store(true, Ordering::SeqCst);
        b.unhandled.store(1, Ordering::SeqCst);
        assert!(!b.ends(&q) && b.ends(&ctrl_c));
    }

    #[test]
    fn only_key_presses_wait_to_be_handled() {
        use crossterm::event::{MouseEvent, MouseEventKind};
        let q = key(KeyCode::Char('q'), KeyModifiers::NONE);
        let mut release = q;
        release.kind = KeyEventKind::Release;
        assert!(is_key_press(&Event::Key(q)));
        assert!(!is_key_press(&Event::Key(release)));
        assert!(!is_key_press(&Event::Resize(80, 24)));
        let moved = MouseEvent {
            kind: MouseEventKind::Moved,
            column: 3,
            row: 4,
            modifiers: KeyModifiers::NONE,
        };
        assert!(!is_key_press(&Event::Mouse(moved)));
    }

    #[test]
    fn the_sentence_says_how_long_and_what_may_have_happened() {
        let s = stalled_sentence(Duration::from_millis(3500));
        assert!(s.contains("3.5 s"), "{s}");
        assert!(s.contains("may or may not have been stored"), "{s}");
        assert!(s.contains("memscope history"), "{s}");
    }
}
