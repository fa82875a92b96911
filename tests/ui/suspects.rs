//! The Suspects tab (6), the marks and the header count, and what the pending queue says a
//! global resolution would reach (README, "memscope suspects"; docs/ARCHITECTURE-ui.md). Each
//! test runs on SQLite and on the same data moved to PostgreSQL.

use crate::probe::{identity, top};
use crate::support::tui::{ch, for_each_backend, key, press, render, selected, Fixture};
use crossterm::event::KeyCode;
use memscope::model::{Identity, Scope};
use memscope::tui::app::{Action, Curation, Dialog};
use memscope::tui::Tab;
use serde_json::json;

fn incident() -> Identity {
    identity("user:42", "package_manager", Scope::Global)
}

#[test]
fn the_demo_marks_its_suspect_counts_it_and_m_rescopes_it_where_its_words_point() {
    for_each_backend(&Fixture::demo(), |db| {
        let mut s = db.session(120, 32);
        // The header counts it first; the current view marks its row, and only its row.
        let screen = render(&mut s, 120, 32);
        assert!(
            screen.lines().next().unwrap().contains("1 suspect · "),
            "{screen}"
        );
        assert!(
            screen.contains("│! user:42 · package_manager = npm"),
            "{screen}"
        );
        assert_eq!(screen.matches("│! ").count(), 1, "{screen}");
        assert!(screen.contains("6 Suspects (1)"), "{screen}");

        // 6: the suspect with its evidence, blast radius and the reads that got it.
        press(&mut s, "6");
        assert_eq!(s.app.tab, Tab::Suspects);
        let screen = render(&mut s, 120, 40);
        assert!(
            screen.contains("│! user:42 · package_manager = npm"),
            "{screen}"
        );
        assert!(screen.contains("5 repos · 3 reads││"), "{screen}");
        let pane = right_pane(&screen);
        for said in [
            "the words say “这个仓库”",
            "install_command in",
            "Blast radius: 5 repositories without a rule of their own get it",
            "m rescopes it to repo:legacy-dashboard",
        ] {
            assert!(pane.contains(said), "{said:?} is not shown:\n{screen}");
        }
        // The store's list, in the store's order: the tab restates nothing.
        let store = db.store();
        let found = store.suspects().unwrap();
        assert_eq!(s.app.tabs.suspects.rows.len(), found.len());
        assert_eq!(found[0].record.identity(), incident());

        // m: the rescope dialog on it, its target the place the evidence points at, the store's
        // preview of the effect; y moves it.
        assert_eq!(s.app.handle_key(ch('m')), Action::PreviewRescope);
        s.perform(Action::PreviewRescope);
        let d = top!(s, Rescope);
        assert_eq!(d.record.identity(), incident());
        assert_eq!(d.target, "repo:legacy-dashboard");
        assert!(!d.editing);
        let preview = d.preview.clone().expect("a preview").expect("a scope");
        assert_eq!(preview.refusal, None);
        // The filled-in target is labelled as the suggestion it is, with its evidence — the
        // same first suggestion `m` gives in the current view.
        let screen = render(&mut s, 120, 40);
        assert!(screen.contains("suggested 1/"), "{screen}");
        assert!(!screen.contains("typed by you"), "{screen}");
        let to = Scope::Repo("legacy-dashboard".into());
        let y = s.app.handle_key(ch('y'));
        assert_eq!(
            y,
            Action::Apply(Curation::Rescope {
                identity: incident(),
                to: to.clone()
            })
        );
        s.perform(y);
        // The suspect is gone everywhere: tab, marks, header.
        assert!(s.app.tabs.suspects.rows.is_empty());
        let screen = render(&mut s, 120, 32);
        assert!(screen.contains("No suspects."), "{screen}");
        assert!(
            !screen.lines().next().unwrap().contains("suspect"),
            "{screen}"
        );
        let moved = store.get(&Identity {
            scope: to,
            ..incident()
        });
        assert_eq!(moved.unwrap().unwrap().value, json!("npm"));
        assert_eq!(
            store.get(&incident()).unwrap().unwrap().value,
            json!("pnpm")
        );
    });
}

/// The detail pane focused (Tab) scrolls to the evidence's end on a short terminal: j and End
/// move the pane, not the list's selection, and a new selection starts at the top again.
#[test]
fn the_suspect_detail_scrolls_when_focused_on_a_short_terminal() {
    for_each_backend(&Fixture::demo(), |db| {
        let mut s = db.session(100, 24);
        press(&mut s, "6");
        let before = render(&mut s, 100, 24);
        assert!(
            !before.contains("g shows it in the current view"),
            "the pane is too short for the whole detail:\n{before}"
        );
        s.handle_key(key(KeyCode::Tab));
        let selected_before = s.app.tabs.suspects.rows.cursor;
        s.handle_key(key(KeyCode::End));
        let end = render(&mut s, 100, 24);
        assert!(end.contains("g shows it in the current view"), "{end}");
        assert_eq!(s.app.tabs.suspects.rows.cursor, selected_before);
        // Past the end it stays on its last screen; Home goes back.
        for _ in 0..10 {
            s.handle_key(ch('j'));
        }
        assert_eq!(render(&mut s, 100, 24), end);
        s.handle_key(key(KeyCode::Home));
        assert_eq!(render(&mut s, 100, 24), before);
    });
}

#[test]
fn g_opens_the_suspect_in_the_current_view_and_e_explains_it() {
    for_each_backend(&Fixture::demo(), |db| {
        let mut s = db.session(120, 32);
        press(&mut s, "6");
        s.handle_key(ch('g'));
        assert_eq!(s.app.tab, Tab::Memories);
        assert_eq!(selected(&s), "user:42 · package_manager @ global");
        let screen = render(&mut s, 120, 32);
        assert!(
            screen.contains("History · user:42 · package_manager @ global"),
            "{screen}"
        );
        press(&mut s, "6");
        s.handle_key(ch('e'));
        assert!(matches!(s.app.dialogs.last(), Some(Dialog::Explain(_))));
        s.handle_key(key(KeyCode::Esc));
        // A read-only file shows it but will not rescope it.
        s.app.read_only = true;
        assert_eq!(s.app.handle_key(ch('m')), Action::None);
        assert!(s.app.dialogs.is_empty());
        assert!(s.app.toast.as_ref().is_some_and(|t| t.error));
    });
}

#[test]
fn the_session_opens_on_a_record_as_the_demo_opens_on_its_incident() {
    for_each_backend(&Fixture::demo(), |db| {
        let mut s = db.session(120, 32);
        press(&mut s, "/coffee");
        s.select(&incident()).unwrap();
        assert_eq!(s.app.tab, Tab::Memories);
        assert!(!s.app.memories().filter.active(), "the filter gives way");
        assert_eq!(selected(&s), "user:42 · package_manager @ global");
        assert_eq!(
            s.app
                .memories()
                .timeline
                .detail
                .as_ref()
                .map(|d| d.identity()),
            Some(incident())
        );
        // A record that is not live leaves the selection on a record.
        let gone = Identity {
            subject: "user:nobody".into(),
            ..incident()
        };
        s.select(&gone).unwrap();
        assert_ne!(selected(&s), "nothing");
    });
}

/// The text of the right-hand pane, its wrapped lines joined by a space.
fn right_pane(screen: &str) -> String {
    screen
        .lines()
        .filter_map(|l| l.rsplit_once("││").map(|(_, r)| r))
        .map(|r| r.trim_end_matches(['│', '"', ' ']).trim())
        .filter(|r| !r.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_clean_database_has_no_suspects_and_says_so() {
    let f = Fixture::empty();
    f.write(r#"{"subject":"user:42","predicate":"package_manager","value":"pnpm","scope":"global","source":"thread:17/message:86","raw":"以后新建前端项目，默认用 pnpm。"}"#);
    f.write(r#"{"subject":"user:42","predicate":"install_command","value":"npm ci","scope":"repo:legacy-dashboard","source":"thread:23/message:14","raw":"这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。"}"#);
    for_each_backend(&f, |db| {
        let mut s = db.session(100, 30);
        let screen = render(&mut s, 100, 30);
        assert!(!screen.contains("suspect"), "{screen}");
        assert!(!screen.contains("│! "), "{screen}");
        press(&mut s, "6");
        let screen = render(&mut s, 100, 30);
        assert!(screen.contains("No suspects."), "{screen}");
        // m on nothing says why, and opens nothing.
        assert_eq!(s.app.handle_key(ch('m')), Action::None);
        assert!(s.app.dialogs.is_empty());
    });
}

#[test]
fn the_pending_preview_of_g_states_the_blast_radius_from_the_store() {
    for_each_backend(&Fixture::demo(), |db| {
        let mut s = db.session(120, 32);
        press(&mut s, "2");
        let store = db.store();
        let item = store.pending(false).unwrap().remove(0);
        assert_eq!(item.subject, "user:42");
        let n = store
            .blast_radius(&item.subject, &item.predicate)
            .unwrap()
            .len();
        assert!(n >= 2, "the demo knows several repositories without a rule");
        let sentence = format!("{n} repositories without a rule of their own would get npm");
        let screen = render(&mut s, 120, 32);
        assert!(
            right_pane(&screen).contains(&sentence),
            "{sentence:?}:\n{screen}"
        );
        // The confirm of g says it too, before anything is written.
        s.handle_key(ch('g'));
        let c = top!(s, Confirm);
        assert!(c.lines.join(" ").contains(&sentence), "{:?}", c.lines);
    });
}

/// Found by review: when the scan failed, the pane's title said `Suspects · 0` — a count of
/// suspects it did not know. Like a list that could not be loaded (README, "The terminal UI",
/// Check), the pane says `not loaded` and why, and claims no count; the tab bar and the header
/// count none either. The next scan that succeeds brings the count back.
#[test]
fn a_failed_suspects_scan_claims_no_count() {
    let f = Fixture::demo();
    let mut s = f.session(120, 32);
    press(&mut s, "6");
    let screen = render(&mut s, 120, 32);
    assert!(screen.contains("┌ Suspects · 1 "), "{screen}");
    // The incident's record damaged by a raw client: the scan cannot read it.
    let c = rusqlite::Connection::open(&f.path).unwrap();
    let damage = "UPDATE memories SET value = '{坏 json' WHERE subject = 'user:42'
                  AND predicate = 'package_manager' AND scope = 'global'";
    c.execute_batch(damage).unwrap();
    assert!(crate::support::tui::sees_live_change(&mut s));
    assert!(s.app.tabs.suspects.error.is_some(), "the scan failed");
    let screen = render(&mut s, 120, 32);
    assert!(!screen.contains("Suspects · 0"), "{screen}");
    assert!(screen.contains("┌ Suspects · not loaded "), "{screen}");
    assert!(
        screen.contains("Suspects could not be loaded: "),
        "{screen}"
    );
    assert!(screen.contains("6 Suspects "), "{screen}");
    assert!(!screen.contains("6 Suspects ("), "{screen}");
    assert_eq!(s.app.tabs.suspects.count(), None, "the header's figure");
    // Repaired, the count is back.
    c.execute_batch("UPDATE memories SET value = '\"npm\"' WHERE value = '{坏 json'")
        .unwrap();
    assert!(crate::support::tui::sees_live_change(&mut s));
    let screen = render(&mut s, 120, 32);
    assert!(screen.contains("┌ Suspects · 1 "), "{screen}");
}

/// A write the scope guard found suspect keeps its `! suspect` mark in the timeline however
/// long its value: the value is cut before the mark (found by an exploratory test: at 120
/// columns a long value pushed the mark off the row; it showed only at 200).
#[test]
fn a_suspect_keeps_its_timeline_mark_however_long_its_value() {
    let f = Fixture::demo();
    f.write(r#"{"subject":"user:9","predicate":"install_command","value":"npm ci --prefer-offline --no-audit --loglevel=error 🚀🚀🚀 这个仓库的安装命令","scope":"global","source":"thread:1/message:1","raw":"这个仓库保留 npm ci"}"#);
    for_each_backend(&f, |db| {
        let mut s = db.session(120, 32);
        press(&mut s, "/user:9 install");
        s.handle_key(key(KeyCode::Enter));
        s.settle();
        let screen = render(&mut s, 120, 32);
        let row = screen
            .lines()
            .find(|l| l.contains(" set ") && l.contains("npm ci"))
            .unwrap_or_else(|| panic!("no set event shown:\n{screen}"));
        assert!(row.contains("… ! suspect│"), "{row}\n{screen}");
    });
}
