//! Keys and clicks that arrive while the current view's filter is still finding its matches
//! (README, "The terminal UI"): they are held in order while the loop keeps drawing, and
//! replayed once the matches are in, as if they had arrived then; Esc drops them (Ctrl-c
//! quits), the queue has a cap, and a wait of 30 s gives up. Each burst here reaches the
//! session before the workers' replies (`WorkerMode::Deferred`): the filter runs when the test
//! pumps, as the loop does after it drained a burst and drew a frame.

use crate::probe::{toast, top};
use crate::support::tui::{ch, for_each_backend, key, render, selected, Db, Fixture};
use crossterm::event::MouseEventKind;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent};
use memscope::tui::held::{Tally, HELD_MAX};
use memscope::tui::Session;

/// The story, and twelve records whose values hold `needle 针` (with an emoji, and one very
/// long value), spread over three scopes.
fn needles() -> Fixture {
    let f = Fixture::story();
    for i in 0..12 {
        let scope = ["global", "repo:web-app", "task:t1"][i % 3];
        let tail = if i == 5 {
            "长".repeat(3000)
        } else {
            "🧷".into()
        };
        f.write(&format!(
            r#"{{"subject":"user:{}","predicate":"p{i}","value":"needle 针 {i} {tail}","scope":"{scope}","source":"s{i}"}}"#,
            i % 5
        ));
    }
    f
}

/// `/needle 针⏎`.
fn commit_filter() -> Vec<KeyEvent> {
    let mut keys = vec![ch('/')];
    keys.extend("needle 针".chars().map(ch));
    keys.push(key(KeyCode::Enter));
    keys
}

/// What the loop does with one drain of the terminal's queue: each event handled with more
/// queued behind every one but the last, then the owed detail loaded; true when it quit.
fn drain(s: &mut Session, events: &[Event]) -> bool {
    for (i, e) in events.iter().enumerate() {
        if s.handle_queued(e.clone(), i + 1 < events.len()) {
            return true;
        }
    }
    s.settle();
    false
}

fn keys(keys: &[KeyEvent]) -> Vec<Event> {
    keys.iter().map(|k| Event::Key(*k)).collect()
}

/// The filter committed by a burst, its matches not come.
fn filtering(db: &Db) -> Session {
    let mut s = db.deferred_session(120, 32);
    assert!(!drain(&mut s, &keys(&commit_filter())));
    assert!(s.app.memories().filtering(), "the matches have not come");
    s
}

/// The record a session with its replies in between selects after `/needle 针⏎` and `moves`
/// `j`s.
fn typed_selection(db: &Db, moves: usize) -> String {
    let mut s = db.session(120, 32);
    for k in commit_filter() {
        s.handle_key(k);
        s.pump();
    }
    for _ in 0..moves {
        s.handle_key(ch('j'));
    }
    selected(&s)
}

fn click(column: u16, row: u16) -> MouseEvent {
    MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }
}

#[test]
fn a_burst_behind_a_filter_is_held_while_a_frame_draws_then_acts_on_the_third_match() {
    let f = needles();
    for_each_backend(&f, |db| {
        let third = typed_selection(db, 2);
        let first = typed_selection(db, 0);
        assert!(
            third.contains(" · p") && third != first,
            "{third} / {first}"
        );
        let mut s = filtering(db);
        assert!(!drain(&mut s, &keys(&[ch('j'), ch('j'), ch('d')])));
        // Held, not blocked on: nothing acted, and a frame draws the filter line — the scan's
        // progress, and the keys that wait for it.
        assert_eq!(s.held(), Tally { keys: 3, mouse: 0 });
        assert!(s.app.dialogs.is_empty(), "d waits");
        assert!(s.busy(), "the loop polls often while keys wait");
        let screen = render(&mut s, 120, 32);
        assert!(
            screen.contains(
                "/needle 针   searching… · 3 keys wait to act on the matches; Esc drops them"
            ),
            "the filter line:\n{screen}"
        );
        // The matches come with the pump, and the keys act on them in order.
        assert!(s.pump());
        assert_eq!(s.held(), Tally::default());
        assert!(!s.app.memories().filtering());
        assert_eq!(top!(s, Delete).identity.to_string(), third);
        assert!(!s.quit_asked());
    });
}

#[test]
fn esc_during_the_hold_drops_the_keys_and_says_how_many() {
    for_each_backend(&needles(), |db| {
        let mut s = filtering(db);
        let before = selected(&s);
        drain(&mut s, &keys(&[ch('j'), ch('j'), ch('d'), ch('x')]));
        assert_eq!(s.held().keys, 4);
        // Esc is not held: it clears the filter and drops the keys at once.
        assert!(!s.handle_key(key(KeyCode::Esc)));
        assert_eq!(s.held(), Tally::default());
        assert!(!s.app.memories().filter.active(), "the filter is cleared");
        assert_eq!(
            toast(&s),
            "Esc dropped the 4 keys typed while the filter ran: none of them acted"
        );
        s.pump();
        assert!(s.app.dialogs.is_empty(), "no key acted");
        assert_eq!(selected(&s), before);
        // The next keys act at once: nothing waits.
        s.handle_key(ch('j'));
        assert_ne!(selected(&s), before);

        // Esc typed with the next key (read as Alt+key) drops them too, then the key acts.
        let mut s = filtering(db);
        drain(&mut s, &keys(&[ch('j'), ch('j')]));
        s.handle_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::ALT));
        assert_eq!(s.held(), Tally::default());
        assert!(!s.app.memories().filter.active());
        assert_ne!(selected(&s), before, "the j after Esc moved");

        // Ctrl-c quits at once, however many keys wait.
        let mut s = filtering(db);
        drain(&mut s, &keys(&[ch('j'), ch('d')]));
        assert!(s.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)));
    });
}

/// `q` quits at once when nothing waits; behind held keys it takes its turn, since in a paste
/// it may be text they type: `/needle⏎/quiet` pasted filters on `quiet`, it does not quit.
#[test]
fn q_behind_held_keys_takes_its_turn() {
    for_each_backend(&needles(), |db| {
        let mut s = filtering(db);
        assert!(s.handle_key(ch('q')), "nothing waits: q quits");

        let mut s = filtering(db);
        let mut paste = vec![ch('/')];
        paste.extend("quiet 🤫".chars().map(ch));
        assert!(!drain(&mut s, &keys(&paste)), "the q waits behind the /");
        assert_eq!(s.held().keys, paste.len());
        s.pump();
        assert!(!s.quit_asked());
        // `/` edits the query applied: the rest of the paste is typed after it.
        assert_eq!(s.app.memories().filter.input.as_str(), "needle 针quiet 🤫");
        assert!(s.app.memories().filter.editing);

        let mut s = filtering(db);
        assert!(!drain(&mut s, &keys(&[ch('j'), ch('q')])));
        assert!(s.pump());
        assert!(s.quit_asked(), "the replayed q quits");
    });
}

/// A click during the filter used to select a row the matches then moved away from: it is
/// held and lands on the row drawn at that place once the matches are in — the row a click
/// there selects when the matches were in before it.
#[test]
fn a_click_during_the_hold_lands_on_the_clicked_row_of_the_matches() {
    for_each_backend(&needles(), |db| {
        let third = typed_selection(db, 2);
        // Where the third match is drawn, once the matches are in.
        let mut typed = db.session(120, 32);
        for k in commit_filter() {
            typed.handle_key(k);
        }
        let screen = render(&mut typed, 120, 32);
        let label = third.split(" @ ").next().unwrap_or_default();
        let row = screen
            .lines()
            .position(|l| l.contains(label))
            .unwrap_or_else(|| panic!("{label} is drawn:\n{screen}")) as u16;
        typed.handle_event(Event::Mouse(click(10, row)));
        assert_eq!(selected(&typed), third, "a click there selects it");

        let mut s = filtering(db);
        // The pointer's motion is not held (it does nothing); a click is.
        let moved = MouseEvent {
            kind: MouseEventKind::Moved,
            ..click(10, row)
        };
        drain(&mut s, &[Event::Mouse(moved), Event::Mouse(click(10, row))]);
        assert_eq!(s.held(), Tally { keys: 0, mouse: 1 });
        let screen = render(&mut s, 120, 32);
        assert!(
            screen.contains("· 1 mouse event waits to act on the matches; Esc drops them"),
            "{screen}"
        );
        s.pump();
        assert_eq!(selected(&s), third);
        // Then a click and a key, held in order: the key moves from the clicked row.
        let mut s = filtering(db);
        drain(&mut s, &[Event::Mouse(click(10, row)), Event::Key(ch('j'))]);
        assert_eq!(s.held(), Tally { keys: 1, mouse: 1 });
        s.pump();
        assert_eq!(selected(&s), typed_selection(db, 3));
    });
}

/// A paste larger than the queue's cap: the first `HELD_MAX` keys wait and act, the rest are
/// dropped, and the message line says so while they wait and after they acted.
#[test]
fn a_paste_past_the_cap_drops_the_extras_and_says_so() {
    let f = needles();
    let db = Db::Sqlite(&f);
    let last = typed_selection(&db, 200);
    let mut s = filtering(&db);
    let mut paste = vec![Event::Key(ch('j')); HELD_MAX + 10];
    paste.push(Event::Mouse(click(10, 10)));
    drain(&mut s, &paste);
    assert_eq!(
        s.held(),
        Tally {
            keys: HELD_MAX,
            mouse: 0
        }
    );
    let screen = render(&mut s, 200, 32);
    assert!(
        screen.contains("searching… · 4,096 keys wait to act on the matches, 10 keys and 1 mouse event more dropped (the most held is 4,096); Esc drops them"),
        "{screen}"
    );
    s.pump();
    assert_eq!(s.held(), Tally::default());
    assert_eq!(selected(&s), last, "the held j's moved to the last match");
    // Replayed as a drained burst, settled at its end: the detail is where the motions end.
    let detail = s.app.memories().timeline.detail.as_ref();
    assert_eq!(detail.map(|d| d.identity().to_string()), Some(last.clone()));
    assert_eq!(
        toast(&s),
        "the keys held for the filter's matches acted; 10 keys and 1 mouse event typed past the 4,096 held at most were dropped"
    );
    assert!(s.app.toast.as_ref().is_some_and(|t| t.error));
    // The next burst starts from nothing dropped.
    s.handle_key(key(KeyCode::Esc));
    let mut s2 = filtering(&db);
    drain(&mut s2, &keys(&[ch('j')]));
    let screen = render(&mut s2, 120, 32);
    assert!(
        screen.contains("searching… · 1 key waits to act on the matches; Esc drops them"),
        "{screen}"
    );
}

/// Keys that waited 30 s for the matches are dropped, said in one sentence; none acts.
#[test]
fn keys_held_past_thirty_seconds_are_dropped_and_said() {
    let f = needles();
    let db = Db::Sqlite(&f);
    let mut s = filtering(&db);
    let before = selected(&s);
    drain(&mut s, &keys(&[ch('j'), ch('d')]));
    let at = |secs| {
        memscope::store::Clock::Fixed(crate::support::tui::now() + chrono::Duration::seconds(secs))
    };
    // 29 s: they still wait (the clock is the session's, fixed in tests).
    s.app.clock = at(29);
    drain(&mut s, &keys(&[ch('j')]));
    assert_eq!(s.held().keys, 3);
    s.app.clock = at(30);
    assert!(s.pump());
    assert_eq!(s.held(), Tally::default());
    assert_eq!(
        toast(&s),
        "the filter's matches did not all come within 30 s, so the list may hold rows it hides: the 3 keys typed behind it were dropped, none acted (Esc clears the filter)"
    );
    assert!(s.app.dialogs.is_empty(), "d did not act");
    assert!(!s.app.memories().filtering(), "the matches came after");
    assert_ne!(selected(&s), before, "the view shows the first match");
    assert_eq!(selected(&s), typed_selection(&db, 0));
}

/// A filter that fails while keys wait drops them, with its error; the keys after it are
/// refused until Esc clears the filter, as before.
#[test]
fn a_filter_that_fails_drops_the_held_keys() {
    let f = needles();
    let db = Db::Sqlite(&f);
    let mut s = filtering(&db);
    drain(&mut s, &keys(&[ch('j'), ch('d')]));
    // Another connection takes the table away under the queued scan.
    let conn = rusqlite::Connection::open(&f.path).unwrap();
    conn.execute_batch("ALTER TABLE memories RENAME TO memories_gone")
        .unwrap();
    s.pump();
    assert_eq!(s.held(), Tally::default());
    let said = toast(&s).to_string();
    assert!(
        said.starts_with("the filter failed: no such table"),
        "{said}"
    );
    assert!(
        said.ends_with(
            "the 2 keys typed behind the filter were dropped, none acted (Esc clears the filter)"
        ),
        "{said}"
    );
    assert!(s.app.dialogs.is_empty());
    s.handle_key(ch('d'));
    assert!(
        s.app.dialogs.is_empty(),
        "no key acts on the failed filter's list"
    );
    assert!(
        toast(&s).contains("that key was not acted on"),
        "{}",
        toast(&s)
    );
}

/// A held `j` — twenty-odd motions in one drain of the terminal's queue — reads the history pane
/// from the store once, for the record it stops on (README, "The terminal UI": each load is a
/// few round trips to a PostgreSQL server); the same motions a drain each read it each time.
#[test]
fn a_held_j_loads_the_history_once_where_it_stops() {
    for_each_backend(&needles(), |db| {
        let mut s = db.session(120, 32);
        let loads = |s: &Session| s.app.memories().timeline.loads;
        let shown_is_selected = |s: &Session| {
            let m = s.app.memories();
            m.timeline.shown.as_ref().map(ToString::to_string)
                == m.selected_record().map(|r| r.identity().to_string())
        };
        // A count of `j`s that stops on a record, not on a scope's header.
        let n = (15..=25)
            .find(|&n| {
                let mut t = db.session(120, 32);
                for _ in 0..n {
                    t.handle_key(ch('j'));
                }
                t.app.memories().selected_record().is_some()
            })
            .expect("a record 15 to 25 rows down");
        s.pump();
        s.settle();
        let before = loads(&s);
        let start = selected(&s);
        assert!(!drain(&mut s, &vec![Event::Key(ch('j')); n]));
        assert_ne!(selected(&s), start, "the selection moved");
        assert_eq!(loads(&s) - before, 1, "one load for {n} motions");
        assert!(
            shown_is_selected(&s),
            "the pane shows where the motions stopped: {:?} / {}",
            s.app.memories().timeline.shown,
            selected(&s)
        );
        // A motion a drain each: a load for each record it lands on (a scope's header shows
        // no history).
        let (before, mut on_records) = (loads(&s), 0);
        for _ in 0..5 {
            assert!(!drain(&mut s, &[Event::Key(ch('k'))]));
            on_records += u64::from(s.app.memories().selected_record().is_some());
        }
        assert!(on_records >= 3, "{on_records}");
        assert_eq!(
            loads(&s) - before,
            on_records,
            "a load for each motion drained alone"
        );
        assert!(shown_is_selected(&s));
    });
}
