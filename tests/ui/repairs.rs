//! The rescope and revert dialogs as a reviewer found them wanting: what they offer once the
//! store refuses, how they scroll on a small terminal, where their suggestions point, how they
//! take digits and spaces. Each test runs on SQLite and on the same data moved to PostgreSQL.

use crate::probe::{toast, top};
use crate::support::tui::{ch, for_each_backend, key, press, render, select, Fixture};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use memscope::tui::app::Action;
use memscope::tui::Session;

fn ctrl_u(s: &mut Session) {
    s.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
}

/// Types `target` into the rescope dialog's field (cleared first) and ends typing.
fn retarget(s: &mut Session, target: &str) {
    press(s, "e");
    ctrl_u(s);
    press(s, target);
    s.handle_key(key(KeyCode::Enter));
}

/// Found by review: once the store's preview refused a target, the dialog still offered
/// `y rescope`, and `y` only read the refusal again. It offers what works now — cancel,
/// another target, a suggestion — and `y` says in one sentence why nothing happens.
#[test]
fn a_refused_rescope_offers_only_what_works_and_y_says_why_it_does_nothing() {
    for_each_backend(&Fixture::incident(), |db| {
        let mut s = db.session(120, 32);
        select(&mut s, "user:42 · package_manager @ global");
        press(&mut s, "m");
        assert!(render(&mut s, 120, 32).contains("y rescope"));
        // A deleted target: the store refuses.
        retarget(&mut s, "repo:old-app");
        let screen = render(&mut s, 120, 32);
        assert!(screen.contains("The store would refuse this"), "{screen}");
        assert!(!screen.contains("y rescope"), "border and footer: {screen}");
        for offered in ["n/Esc cancel", "e edit target", "Tab suggestion"] {
            assert!(screen.contains(offered), "{offered}: {screen}");
        }
        assert_eq!(s.app.handle_key(ch('y')), Action::None);
        let said = toast(&s).to_string();
        assert!(
            said.starts_with("nothing was moved: the store refuses this move, as the dialog says")
                && said.contains("e types another target, Tab takes a suggestion"),
            "{said}"
        );
        // One sentence, and not the refusal again.
        assert!(
            !said.contains("tombstone") && !said.contains(". "),
            "{said}"
        );
        top!(s, Rescope);
        // A target that is no scope: the same.
        retarget(&mut s, "repo");
        let screen = render(&mut s, 120, 32);
        assert!(!screen.contains("y rescope"), "{screen}");
        press(&mut s, "y");
        assert!(
            toast(&s).starts_with("nothing was moved: the target is not a scope"),
            "{}",
            toast(&s)
        );
        // A target the store takes: y is offered again.
        retarget(&mut s, "repo:legacy-dashboard");
        assert!(render(&mut s, 120, 32).contains("y rescope"));

        // A record nothing suggests a target for offers no Tab.
        s.handle_key(key(KeyCode::Esc));
        select(&mut s, "user:7 · formatter @ global");
        press(&mut s, "m");
        assert_eq!(top!(s, Rescope).suggestions.as_deref(), Some(&[][..]));
        retarget(&mut s, "repo");
        let screen = render(&mut s, 120, 32);
        assert!(
            !screen.contains("y rescope") && !screen.contains("Tab suggestion"),
            "{screen}"
        );
        press(&mut s, "y");
        assert!(!toast(&s).contains("Tab"), "{}", toast(&s));
    });
}
