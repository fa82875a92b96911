//! The mouse: the wheel scrolls the pane under the pointer, a click selects a row, a tab or a
//! pane. Hit-testing uses the layout functions drawing uses (`layout`, and the history pane's
//! own lines), on the terminal size of the last resize, so a click lands where the row was
//! drawn. Any coordinates are safe: a point outside every rect does nothing.

use super::app::{Action, App, Dialog, Focus, Tab};
use super::keymap::Command;
use super::layout;
use super::rows::Motion;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};

/// Rows (or lines) one notch of the wheel moves.
pub const WHEEL_STEP: usize = 3;

/// Whether `m` is of a kind [`App::handle_mouse`] acts on (motion and releases are not): only
/// these wait behind a running filter, so moving the pointer fills no queue.
pub(super) fn acts(m: &MouseEvent) -> bool {
    matches!(
        m.kind,
        MouseEventKind::ScrollDown
            | MouseEventKind::ScrollUp
            | MouseEventKind::Down(MouseButton::Left)
    )
}

impl App {
    pub fn handle_mouse(&mut self, m: MouseEvent) -> Action {
        let at = Position::new(m.column, m.row);
        match m.kind {
            MouseEventKind::ScrollDown => self.wheel(at, true),
            MouseEventKind::ScrollUp => self.wheel(at, false),
            MouseEventKind::Down(MouseButton::Left) => {
                self.toast = None;
                self.click(at)
            }
            _ => Action::None,
        }
    }

    fn wheel(&mut self, at: Position, down: bool) -> Action {
        let cmd = if down { Command::Down } else { Command::Up };
        // A dialog that scrolls takes the wheel (the delete, rescope and revert dialogs'
        // statements, on a short terminal); the others ignore it (their j/k choose).
        match self.dialogs.last_mut() {
            Some(Dialog::Help { scroll }) => {
                *scroll = if down {
                    (*scroll + WHEEL_STEP).min(super::dialogs::help::room(self.size).0)
                } else {
                    scroll.saturating_sub(WHEEL_STEP)
                };
                return Action::None;
            }
            Some(Dialog::Event(_) | Dialog::Delete(_) | Dialog::Rescope(_) | Dialog::Revert(_)) => {
                let wheel = KeyEvent::new(KeyCode::Null, KeyModifiers::NONE);
                for _ in 0..WHEEL_STEP {
                    self.top_dialog_key(Some(cmd), &wheel);
                }
                return Action::None;
            }
            Some(_) => return Action::None,
            None => {}
        }
        let Some((pane, _)) = self.pane_at(at) else {
            return Action::None;
        };
        let m = if down {
            Motion::Down(WHEEL_STEP)
        } else {
            Motion::Up(WHEEL_STEP)
        };
        self.motion_in(pane, m)
    }

    fn click(&mut self, at: Position) -> Action {
        // A dialog or a line being typed keeps the focus until it is closed.
        if !self.dialogs.is_empty() || self.tabs.typing().is_some() {
            return Action::None;
        }
        let screen = layout::screen(self.area());
        if let Some(bar) = screen.tabs.filter(|r| r.contains(at)) {
            let tab = self.tab_bar(bar.width as usize).tab_at(at.x - bar.x);
            return match tab {
                Some(tab) => self.show(tab),
                None => Action::None,
            };
        }
        let Some((pane, rect)) = self.pane_at(at) else {
            return Action::None;
        };
        if self.has_detail() {
            self.focus = pane;
        }
        let inner = layout::inner(rect);
        if !inner.contains(at) {
            // The border: the pane takes the focus, nothing else.
            return Action::None;
        }
        let row = usize::from(at.y - inner.y);
        let height = usize::from(inner.height);
        let tab = self.tab;
        let (tabs, mut shell) = self.parts(layout::page(self.size, tab, pane));
        tabs.get_mut(tab).click(pane, row, height, &mut shell)
    }

    fn area(&self) -> Rect {
        Rect::new(0, 0, self.size.0, self.size.1)
    }

    /// The pane under `at` and its rect, as the last draw laid it out.
    fn pane_at(&self, at: Position) -> Option<(Focus, Rect)> {
        let screen = layout::screen(self.area());
        // An empty database's welcome takes the whole body: no pane to point at.
        if self.tab == Tab::Memories && self.tabs.memories.welcome() {
            return None;
        }
        // Nor a tab whose list could not be loaded: its message takes the body.
        if self.unloaded(self.tab).is_some() {
            return None;
        }
        let panes = layout::panes(screen.body, self.tab, self.focus);
        [(Focus::List, panes.list), (Focus::Detail, panes.detail)]
            .into_iter()
            .find_map(|(pane, rect)| rect.filter(|r| r.contains(at)).map(|r| (pane, r)))
    }
}
