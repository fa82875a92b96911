//! Keys and mouse events that arrive while the current view's filter is still finding its
//! matches (README, "The terminal UI"): they wait here in order while the loop keeps drawing
//! and pumping the workers, and the session replays them once the matches are all in — so
//! none acts on a row the filter hides, and the screen never freezes behind them.

use super::text::{plural, thousands};
use chrono::{DateTime, Utc};
use crossterm::event::Event;
use std::collections::VecDeque;

/// The most events held: the ones past it are dropped, so a pasted megabyte cannot grow the
/// queue without limit.
pub const HELD_MAX: usize = 4096;

/// How long held events wait for the matches: a key that acted half a minute after it was
/// typed would surprise more than one dropped with a sentence saying so.
pub const HOLD_LIMIT: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

/// How many keys and mouse events, for a sentence.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub keys: usize,
    pub mouse: usize,
}

impl Tally {
    fn count(&mut self, event: &Event) {
        match event {
            Event::Mouse(_) => self.mouse += 1,
            _ => self.keys += 1,
        }
    }

    pub fn total(self) -> usize {
        self.keys + self.mouse
    }

    /// `3 keys`, `1 mouse event`, `2 keys and 1 mouse event`.
    pub fn words(self) -> String {
        let keys = plural(self.keys as i64, "key", "keys");
        let mouse = plural(self.mouse as i64, "mouse event", "mouse events");
        match (self.keys, self.mouse) {
            (_, 0) => keys,
            (0, _) => mouse,
            _ => format!("{keys} and {mouse}"),
        }
    }
}

#[derive(Debug, Default)]
pub struct Held {
    events: VecDeque<Event>,
    /// What came while `events` was full, dropped.
    overflow: Tally,
    /// When the oldest held event arrived (or the wait began again, after a replayed key
    /// committed another filter).
    since: Option<DateTime<Utc>>,
}

impl Held {
    /// Holds `event`, arrived at `now`; false when the queue is full and it was dropped.
    pub fn push(&mut self, event: Event, now: DateTime<Utc>) -> bool {
        if self.events.len() >= HELD_MAX {
            self.overflow.count(&event);
            return false;
        }
        self.since.get_or_insert(now);
        self.events.push_back(event);
        true
    }

    /// The oldest held event, handed back to be handled.
    pub fn pop(&mut self) -> Option<Event> {
        let event = self.events.pop_front();
        if self.events.is_empty() {
            self.since = None;
        }
        event
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// What is held, by kind.
    pub fn tally(&self) -> Tally {
        let mut t = Tally::default();
        for e in &self.events {
            t.count(e);
        }
        t
    }

    /// What was dropped past [`HELD_MAX`] since the queue was last emptied.
    pub fn overflow(&self) -> Tally {
        self.overflow
    }

    /// Whether the held events have waited past [`HOLD_LIMIT`] at `now`.
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.since.is_some_and(|t| now - t >= HOLD_LIMIT)
    }

    /// The wait begins again at `now` (a replayed key committed another filter).
    pub fn restart(&mut self, now: DateTime<Utc>) {
        if !self.events.is_empty() {
            self.since = Some(now);
        }
    }

    /// The overflow was told: it starts from nothing again.
    pub fn forget_overflow(&mut self) {
        self.overflow = Tally::default();
    }

    /// Drops everything held, and what overflowed: how many there were.
    pub fn drop_all(&mut self) -> Tally {
        let mut t = self.tally();
        t.keys += self.overflow.keys;
        t.mouse += self.overflow.mouse;
        *self = Held::default();
        t
    }

    /// What the filter line says while events wait (`None`: none do): how many, and the way
    /// out.
    pub fn waiting_words(&self) -> Option<String> {
        let held = self.tally();
        if held.total() == 0 {
            return None;
        }
        let verb = if held.total() == 1 { "waits" } else { "wait" };
        let mut s = format!("{} {verb} to act on the matches", held.words());
        if self.overflow.total() > 0 {
            s.push_str(&format!(
                ", {} more dropped (the most held is {})",
                self.overflow.words(),
                thousands(HELD_MAX as i64)
            ));
        }
        s.push_str("; Esc drops them");
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

    fn key() -> Event {
        Event::Key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE))
    }

    fn click() -> Event {
        Event::Mouse(MouseEvent {
            kind: MouseEventKind::ScrollDown,
            column: 0,
            row: 0,
            modifiers: KeyModifiers::NONE,
        })
    }

    #[test]
    fn the_queue_keeps_order_up_to_its_cap_and_counts_the_rest() {
        let t = chrono::DateTime::UNIX_EPOCH;
        let mut h = Held::default();
        for i in 0..HELD_MAX + 5 {
            let kept = h.push(if i % 2 == 0 { key() } else { click() }, t);
            assert_eq!(kept, i < HELD_MAX);
        }
        assert_eq!(h.tally().total(), HELD_MAX);
        assert_eq!(h.overflow(), Tally { keys: 3, mouse: 2 });
        let words = h.waiting_words().unwrap_or_default();
        assert!(
            words.contains(", 3 keys and 2 mouse events more dropped"),
            "{words}"
        );
        assert_eq!(h.pop(), Some(key()));
        assert_eq!(h.pop(), Some(click()));
        assert!(!h.expired(t + HOLD_LIMIT - chrono::TimeDelta::milliseconds(1)));
        assert!(h.expired(t + HOLD_LIMIT));
        assert_eq!(h.drop_all().total(), HELD_MAX - 2 + 5);
        assert!(h.is_empty() && !h.expired(t + HOLD_LIMIT));
        assert_eq!(h.waiting_words(), None);
    }
}
