//! What the key tests read off a session: the toast, the dialog on top (sessions open on each
//! backend through `support::tui::for_each_backend`).

use memscope::model::{Identity, Scope};
use memscope::tui::Session;

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
