//! Key handling on the state: each key → the action it returns → the state after the session
//! performed it (inline workers, a small fixed story at a fixed clock).

mod tui_support;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use memscope::model::{DeleteTarget, Identity, Scope};
use memscope::tui::app::{Dialog, ExplainField, READ_ONLY};
use memscope::tui::list::{ListItem, Motion};
use memscope::tui::{Action, Curation, Focus, Tab};
use tui_support::{ch, key, press, render, select, selected as selected_label, Fixture};

#[test]
fn quit_keys_and_help_takes_keys_first() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    assert_eq!(s.app.handle_key(ch('q')), Action::Quit);
    assert_eq!(
        s.app
            .handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Action::Quit
    );
    assert_eq!(s.app.handle_key(ch('?')), Action::None);
    assert!(matches!(s.app.dialogs.last(), Some(Dialog::Help { .. })));
    // The help has the focus: q closes it instead of quitting.
    assert_eq!(s.app.handle_key(ch('q')), Action::None);
    assert!(s.app.dialogs.is_empty());
}

#[test]
fn moving_selects_records_and_loads_their_history() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    // The first record is selected at start, not its group header.
    assert_eq!(selected_label(&s), "team:web · node_version @ global");
    assert_eq!(s.app.handle_key(ch('j')), Action::Move(Motion::Down(1)));
    assert_eq!(
        s.app.handle_key(key(KeyCode::Down)),
        Action::Move(Motion::Down(1))
    );
    assert_eq!(
        s.app.handle_key(key(KeyCode::PageDown)),
        Action::Move(Motion::PageDown)
    );
    press(&mut s, "j");
    assert_eq!(selected_label(&s), "user:42 · formatter @ global");
    let d = s.app.detail.as_ref().expect("the history is loaded");
    let events: Vec<&str> = d.history.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["set", "set", "stale"]);
    press(&mut s, "kk");
    assert_eq!(selected_label(&s), "[global]");
    assert!(s.app.detail.is_none());
    s.handle_key(key(KeyCode::End));
    assert_eq!(
        selected_label(&s),
        "user:7 · test_runner @ task:flaky-ci-88"
    );
    s.handle_key(key(KeyCode::PageUp));
    assert_eq!(selected_label(&s), "[global]");
    s.handle_key(key(KeyCode::End));
    s.handle_key(key(KeyCode::Home));
    assert_eq!(selected_label(&s), "[global]");
}

#[test]
fn enter_opens_history_tab_switches_pane_esc_goes_back() {
    let f = Fixture::story();
    let mut s = f.session(80, 24);
    assert_eq!(s.app.handle_key(key(KeyCode::Enter)), Action::None);
    assert_eq!(s.app.focus, Focus::Detail);
    assert_eq!(s.app.handle_key(key(KeyCode::Esc)), Action::None);
    assert_eq!(s.app.focus, Focus::List);
    s.app.handle_key(key(KeyCode::Tab));
    assert_eq!(s.app.focus, Focus::Detail);
    // j scrolls the history pane instead of moving the list.
    assert_eq!(s.app.handle_key(ch('j')), Action::None);
    assert_eq!(s.app.detail_scroll, 1);
    s.app.handle_key(key(KeyCode::BackTab));
    assert_eq!(s.app.focus, Focus::List);
}

#[test]
fn enter_on_a_header_folds_the_group() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    press(&mut s, "k");
    assert_eq!(
        s.app.handle_key(key(KeyCode::Enter)),
        Action::Fold {
            scope: "global".into(),
            folded: true
        }
    );
    s.handle_key(key(KeyCode::Enter));
    assert!(s.app.folded.contains("global"));
    press(&mut s, "j");
    // The next row after a folded group is the next group's header.
    assert_eq!(selected_label(&s), "[repo:legacy-dashboard]");
    s.handle_key(key(KeyCode::Left));
    assert!(s.app.folded.contains("repo:legacy-dashboard"));
    press(&mut s, "j");
    assert_eq!(selected_label(&s), "[task:fix-lockfile-123]");
    press(&mut s, "k");
    press(&mut s, "k");
    s.handle_key(key(KeyCode::Right));
    assert!(!s.app.folded.contains("global"));
    assert_eq!(selected_label(&s), "[global]");
}

#[test]
fn number_keys_switch_tabs() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    assert_eq!(s.app.handle_key(ch('2')), Action::ShowTab(Tab::Pending));
    assert_eq!(s.app.tab, Tab::Pending);
    assert_eq!(s.app.handle_key(ch('3')), Action::ShowTab(Tab::Tombstones));
    assert_eq!(s.app.handle_key(ch('4')), Action::ShowTab(Tab::Check));
    s.perform(Action::ShowTab(Tab::Check));
    assert!(matches!(s.app.check, memscope::tui::app::CheckState::Done(ref r) if r.ok));
    assert_eq!(s.app.handle_key(ch('1')), Action::ShowTab(Tab::Memories));
}

#[test]
fn filter_line_types_keeps_and_clears() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    assert_eq!(s.app.handle_key(ch('/')), Action::None);
    assert!(s.app.filter.editing);
    // While typing, letters are text, not keys: q does not quit.
    assert_eq!(s.app.handle_key(ch('q')), Action::Filter("q".into()));
    assert_eq!(
        s.app.handle_key(key(KeyCode::Backspace)),
        Action::Filter(String::new())
    );
    s.perform(Action::Filter(String::new()));
    for c in "yarn".chars() {
        s.handle_key(ch(c));
    }
    let r = s.app.filter.results.as_ref().expect("results");
    assert!(r.done);
    assert_eq!(r.matches(), 1);
    assert_eq!(selected_label(&s), "user:7 · package_manager @ global");
    match &s.app.list.selected().expect("a row").item {
        ListItem::Record { highlight, .. } => assert_eq!(highlight.value, vec![0, 1, 2, 3]),
        other => panic!("expected a record, got {other:?}"),
    }
    // Enter keeps the filter and gives the keys back to the list.
    assert_eq!(s.app.handle_key(key(KeyCode::Enter)), Action::None);
    assert!(!s.app.filter.editing && s.app.filter.active());
    assert_eq!(s.app.handle_key(ch('j')), Action::Move(Motion::Down(1)));
    // Esc clears it; the list comes back unfiltered on the same record.
    assert_eq!(
        s.app.handle_key(key(KeyCode::Esc)),
        Action::Filter(String::new())
    );
    s.perform(Action::Filter(String::new()));
    assert!(!s.app.filter.active());
    assert_eq!(selected_label(&s), "user:7 · package_manager @ global");
    // Esc in the filter line clears it too.
    press(&mut s, "/npm");
    assert_eq!(
        s.app.handle_key(key(KeyCode::Esc)),
        Action::Filter(String::new())
    );
    assert!(!s.app.filter.editing);
}

#[test]
fn pending_keys_resolve_to_the_matching_candidate_or_explain() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    press(&mut s, "2");
    let first = s.app.pending[0].clone();
    assert_eq!(
        first.candidates,
        vec![Scope::Global, Scope::Repo("web-app".into())]
    );
    // Nothing moved: the keys act on the first item.
    assert_eq!(
        s.app.handle_key(ch('r')),
        Action::Apply(Curation::Resolve {
            pending_id: first.id,
            scope: Scope::Repo("web-app".into())
        })
    );
    assert_eq!(
        s.app.handle_key(ch('g')),
        Action::Apply(Curation::Resolve {
            pending_id: first.id,
            scope: Scope::Global
        })
    );
    assert_eq!(s.app.handle_key(ch('t')), Action::None);
    let toast = s.app.toast.clone().expect("t explains itself");
    assert!(toast.text.contains("no task candidate"), "{}", toast.text);
    // The preview states every choice before a key is pressed.
    let preview = s.app.pending_preview.as_ref().expect("a preview");
    let effects: Vec<String> = preview
        .choices
        .iter()
        .map(|c| format!("{:?} {}", c.key, c.effect))
        .collect();
    assert_eq!(
        effects,
        [
            "Some('g') supersedes pnpm (v1) with npm",
            "Some('r') new record npm"
        ]
    );

    press(&mut s, "r");
    let toast = s.app.toast.clone().expect("the outcome is shown");
    assert!(toast.text.contains("inserted"), "{}", toast.text);
    let store = f.store();
    assert!(store
        .pending(false)
        .unwrap()
        .iter()
        .all(|p| p.id != first.id));
    let h = store
        .history(
            "user:42",
            "package_manager",
            Some(&Scope::Repo("web-app".into())),
        )
        .unwrap();
    assert_eq!(
        h.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
        ["set", "pending_resolved"]
    );
}

#[test]
fn reject_goes_through_a_confirm() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    press(&mut s, "2j");
    assert_eq!(s.app.pending_cursor, 1);
    let second = s.app.pending[1].id;
    assert_eq!(s.app.handle_key(ch('x')), Action::None);
    assert!(matches!(s.app.dialogs.last(), Some(Dialog::Confirm(_))));
    assert_eq!(s.app.handle_key(ch('n')), Action::None);
    assert!(s.app.dialogs.is_empty());
    s.app.handle_key(ch('x'));
    assert_eq!(
        s.app.handle_key(ch('y')),
        Action::Apply(Curation::Reject { pending_id: second })
    );
    s.perform(Action::Apply(Curation::Reject { pending_id: second }));
    assert_eq!(s.app.pending.len(), 1);
    let item = f.store().pending_item(second).unwrap().unwrap();
    assert_eq!(item.status, "rejected");
}

#[test]
fn delete_dialog_chooses_a_target_previews_and_confirms() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    select(&mut s, "user:42 · package_manager @ global");
    let id = Identity {
        subject: "user:42".into(),
        predicate: "package_manager".into(),
        scope: Scope::Global,
    };
    assert_eq!(
        s.app.handle_key(ch('d')),
        Action::PreviewDelete(DeleteTarget::Identity(id.clone()))
    );
    s.perform(Action::PreviewDelete(DeleteTarget::Identity(id.clone())));
    let Some(Dialog::Delete(d)) = s.app.dialogs.last() else {
        panic!("the delete dialog is open")
    };
    let p = d.preview.clone().unwrap().unwrap();
    assert_eq!((p.identities.len(), p.live_records, p.versions), (1, 1, 1));
    // Pending #1 names global among its candidates: it goes with the content.
    assert_eq!(p.pending_items, 1);
    let predicate = DeleteTarget::Predicate {
        subject: "user:42".into(),
        predicate: "package_manager".into(),
    };
    assert_eq!(
        s.app.handle_key(ch('j')),
        Action::PreviewDelete(predicate.clone())
    );
    s.perform(Action::PreviewDelete(predicate.clone()));
    let Some(Dialog::Delete(d)) = s.app.dialogs.last() else {
        panic!("still open")
    };
    assert_eq!(d.preview.clone().unwrap().unwrap().identities.len(), 3);
    assert_eq!(
        s.app.handle_key(ch('k')),
        Action::PreviewDelete(DeleteTarget::Identity(id.clone()))
    );
    s.perform(Action::PreviewDelete(DeleteTarget::Identity(id.clone())));
    // n cancels and nothing changes.
    assert_eq!(s.app.handle_key(ch('n')), Action::None);
    assert!(s.app.dialogs.is_empty());
    assert!(f
        .store()
        .tombstones()
        .unwrap()
        .iter()
        .all(|t| t.predicate != "package_manager"));
    // d, y: tombstoned, and the selection moves to the next record.
    press(&mut s, "dy");
    let tombs = f.store().tombstones().unwrap();
    assert!(tombs.iter().any(|t| t.subject == "user:42"
        && t.predicate == "package_manager"
        && t.scope == Scope::Global));
    assert_eq!(selected_label(&s), "user:7 · package_manager @ global");
    assert!(s
        .app
        .toast
        .as_ref()
        .unwrap()
        .text
        .starts_with("deleted: 1 identity tombstoned"));
}

#[test]
fn restore_and_explain() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    press(&mut s, "3");
    assert_eq!(s.app.handle_key(ch('u')), Action::None);
    let coffee = Identity {
        subject: "user:42".into(),
        predicate: "coffee".into(),
        scope: Scope::Global,
    };
    assert_eq!(
        s.app.handle_key(ch('y')),
        Action::Apply(Curation::Restore(coffee.clone()))
    );
    s.perform(Action::Apply(Curation::Restore(coffee)));
    assert!(f.store().tombstones().unwrap().is_empty());
    assert!(s.app.tombstones.is_empty());

    press(&mut s, "1");
    select(&mut s, "user:42 · package_manager @ repo:legacy-dashboard");
    let action = s.app.handle_key(ch('e'));
    let Action::Explain(q) = &action else {
        panic!("e explains, got {action:?}")
    };
    assert_eq!(
        (q.repo.as_deref(), q.task.as_deref()),
        (Some("legacy-dashboard"), None)
    );
    s.perform(action);
    let Some(Dialog::Explain(e)) = s.app.dialogs.last() else {
        panic!("explain is open")
    };
    let r = e.result.clone().unwrap().unwrap();
    assert_eq!(r.scope.as_deref(), Some("repo:legacy-dashboard"));
    // Typing goes into the field, even letters that are keys elsewhere.
    s.handle_key(key(KeyCode::Tab));
    let Some(Dialog::Explain(e)) = s.app.dialogs.last() else {
        panic!()
    };
    assert_eq!(e.field, ExplainField::Task);
    press(&mut s, "fix-lockfile-123");
    let Some(Dialog::Explain(e)) = s.app.dialogs.last() else {
        panic!()
    };
    assert_eq!(e.task, "fix-lockfile-123");
    let r = e.result.clone().unwrap().unwrap();
    assert_eq!(r.scope.as_deref(), Some("task:fix-lockfile-123"));
    s.handle_key(key(KeyCode::Esc));
    assert!(s.app.dialogs.is_empty());
}

#[test]
fn read_only_curation_keys_explain_themselves() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    s.app.read_only = true;
    for (tab, k) in [('1', 'd'), ('2', 'g'), ('2', 'r'), ('2', 'x'), ('3', 'u')] {
        press(&mut s, &tab.to_string());
        assert_eq!(s.app.handle_key(ch(k)), Action::None);
        assert!(s.app.dialogs.is_empty());
        assert_eq!(
            s.app.toast.as_ref().map(|t| t.text.as_str()),
            Some(READ_ONLY)
        );
    }
}

#[test]
fn live_refresh_keeps_selection_and_filter() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    select(&mut s, "user:42 · package_manager @ global");
    assert!(!s.poll_live(), "nothing changed yet");
    // Another process writes a record that sorts before the selection.
    f.write(r#"{"subject":"team:api","predicate":"linter","value":"ruff","scope":"global","source":"thread:1/message:1"}"#);
    assert!(s.poll_live());
    assert_eq!(selected_label(&s), "user:42 · package_manager @ global");
    let screen = render(&mut s, 120, 32);
    assert!(screen.contains("team:api · linter = ruff"), "{screen}");
    // With a filter on, a matching write appears and the filter stays.
    press(&mut s, "/ruff");
    s.handle_key(key(KeyCode::Enter));
    f.write(r#"{"subject":"team:ml","predicate":"formatter","value":"ruff format","scope":"repo:models","source":"thread:2/message:1"}"#);
    assert!(s.poll_live());
    assert_eq!(s.app.filter.input, "ruff");
    let screen = render(&mut s, 120, 32);
    assert!(
        screen.contains("team:ml · formatter = ruff format"),
        "{screen}"
    );
    assert!(!screen.contains("package_manager"), "{screen}");
    // The selected record deleted elsewhere: the selection moves to its neighbour.
    s.handle_key(key(KeyCode::Esc));
    s.perform(Action::Filter(String::new()));
    let selected = selected_label(&s);
    let mut other = f.store();
    let rec = s.app.list.selected_record().unwrap().identity();
    other.delete(&DeleteTarget::Identity(rec), None).unwrap();
    assert!(s.poll_live());
    assert_ne!(selected_label(&s), selected);
    assert_ne!(selected_label(&s), "nothing");
}

#[test]
fn an_idle_ui_holds_no_read_transaction_so_a_purge_completes() {
    use memscope::store::Clock;
    use memscope::tui::{Session, WorkerMode};
    let f = Fixture::story();
    // Real worker threads with their own connections, as in the terminal.
    let mut s = Session::new(
        f.store(),
        Clock::Fixed(tui_support::now()),
        (120, 32),
        WorkerMode::Threads,
    )
    .expect("the session opens");
    let settle = |s: &mut Session| {
        let t = std::time::Instant::now();
        while s.busy() && t.elapsed() < std::time::Duration::from_secs(20) {
            s.pump();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        s.pump();
    };
    settle(&mut s);
    press(&mut s, "/npm");
    settle(&mut s);
    assert!(s
        .app
        .filter
        .results
        .as_ref()
        .is_some_and(|r| r.done && r.matches() > 0));
    s.handle_key(key(KeyCode::Enter));
    press(&mut s, "4");
    settle(&mut s);
    assert!(matches!(
        s.app.check,
        memscope::tui::app::CheckState::Done(_)
    ));
    assert!(
        s.store().connection().is_autocommit(),
        "no transaction is open on the UI's connection"
    );
    // Another process deletes: the WAL truncation is not blocked by the UI or its workers.
    let mut other = f.store();
    let target = DeleteTarget::Identity(Identity {
        subject: "user:7".into(),
        predicate: "package_manager".into(),
        scope: Scope::Global,
    });
    let report = other.delete(&target, None).expect("the delete lands");
    assert!(
        report.disk_purged,
        "the purge completed while the UI was open"
    );
    assert!(s.poll_live());
    settle(&mut s);
    assert_eq!(s.app.filter.input, "npm");
}

#[test]
fn esc_typed_just_before_a_key_is_not_alt() {
    let f = Fixture::story();
    let mut s = f.session(120, 32);
    press(&mut s, "/yarn");
    // The terminal delivers "Esc j" as Alt+j when they come in one read.
    s.handle_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::ALT));
    assert!(!s.app.filter.active() && !s.app.filter.editing);
    assert_eq!(selected_label(&s), "[repo:legacy-dashboard]");
}
