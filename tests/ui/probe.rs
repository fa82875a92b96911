//! What the key tests open and read off a session: the fixture's session on the usual
//! terminal, the toast, the dialog on top.

use crate::support::tui::Fixture;
use memscope::model::{Identity, Scope};
use memscope::tui::Session;

/// A fixture and its session on a 120×32 terminal (the fixture owns the database: keep it).
pub fn open(fixture: fn() -> Fixture) -> (Fixture, Session) {
    open_sized(fixture, 120, 32)
}

/// A fixture and its session on a terminal `width`×`height`.
pub fn open_sized(fixture: fn() -> Fixture, width: u16, height: u16) -> (Fixture, Session) {
    let f = fixture();
    let s = f.session(width, height);
    (f, s)
}

pub fn identity(subject: &str, predicate: &str, scope: Scope) -> Identity {
    Identity {
        subject: subject.into(),
        predicate: predicate.into(),
        scope,
    }
}

/// The toast's text; a toast must be showing.
#[track_caller]
pub fn toast(s: &Session) -> &str {
    match &s.app.toast {
        Some(t) => &t.text,
        None => panic!("a toast is showing"),
    }
}

/// The dialog on top, which must be a `Dialog::$variant`.
macro_rules! top {
    ($s:expr, $variant:ident) => {
        match $s.app.dialogs.last() {
            Some(memscope::tui::app::Dialog::$variant(d)) => d,
            other => panic!(
                "the {} dialog is on top, got {other:?}",
                stringify!($variant)
            ),
        }
    };
}
pub(crate) use top;
