//! The rescope and revert dialogs as a reviewer found them wanting: what they offer once the
//! store refuses, how they scroll on a small terminal, where their suggestions point, how they
//! take digits and spaces. Each test runs on SQLite and on the same data moved to PostgreSQL.

use crate::dialogs::dialog_rows;
use crate::probe::{toast, top};
use crate::support::tui::{ch, for_each_backend, key, press, render, select, selected, Fixture};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use memscope::model::Scope;
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

/// The rows of the dialog titled `title`, read page by page with PgDn from its top: the note
/// a page ends with (what is below or above, and the key) checked and left out, the rows two
/// pages share read once. `noted`: whether a page said more was below.
fn read_pages(s: &mut Session, w: u16, h: u16, title: &str) -> (String, bool) {
    let mut read: Vec<String> = Vec::new();
    let mut noted = false;
    s.handle_key(key(KeyCode::Home));
    for page in 0..8 {
        let screen = render(s, w, h);
        let mut rows = dialog_rows(&screen, title);
        assert!(!rows.is_empty(), "{w}×{h}, page {page}:\n{screen}");
        if rows
            .last()
            .is_some_and(|r| r.starts_with("… ") || r.starts_with("↑ "))
        {
            let note = rows.pop().unwrap_or_default();
            assert!(note.contains("PgDn") || note.contains("PgUp"), "{note}");
            noted |= note.starts_with("… ");
        }
        let overlap = (0..=rows.len().min(read.len()))
            .rev()
            .find(|&n| read[read.len() - n..] == rows[..n])
            .unwrap_or(0);
        read.extend(rows.into_iter().skip(overlap));
        s.handle_key(key(KeyCode::PageDown));
    }
    let squashed = read.join(" ").split_whitespace().collect::<String>();
    (squashed, noted)
}

/// Found by review: the revert dialog did not scroll as the delete and rescope dialogs do —
/// at 40×12 after the incident's fix, what a plain revert brings back and the effect of `y`
/// fell below its box, with nothing saying so. Its last row now says how many lines are below,
/// PgDn/End/the wheel show them, and each sentence keeps every word.
#[test]
fn the_revert_dialog_says_what_is_below_and_scrolls_to_it() {
    let f = Fixture::incident();
    f.store()
        .rescope(
            "user:42",
            "package_manager",
            &Scope::Global,
            &Scope::Repo("legacy-dashboard".into()),
        )
        .expect("the incident's fix");
    for_each_backend(&f, |db| {
        let squash = |s: &str| s.split_whitespace().collect::<String>();
        for (w, h) in [(40, 12), (50, 14), (60, 12), (120, 32)] {
            let mut s = db.session(w, h);
            select(&mut s, "user:42 · package_manager @ global");
            press(&mut s, "v");
            let (read, noted) = read_pages(&mut s, w, h, "┌ Revert · ");
            assert_eq!(noted, w < 120, "{w}×{h}: a note says more is below");
            for said in [
                "Now pnpm (v3, thread:17/message:86",
                "Make an earlier value current again, as a new version (history is never rewritten):",
                "A plain revert brings nothing back: user:42 · package_manager @ global has no earlier value to revert to",
                // It names v1, which the list offers (found by review: "what came before v3
                // was moved" while v1 was listed beside it).
                "v3 holds the value of v1 again, and every other value before it was moved to another scope by a rescope (its history says where)",
                "choosing a moved version in the revert dialog (j/k or its number) brings it back on purpose",
                "(•) v1",
                "In one transaction:",
                "• global already holds pnpm: v3 is confirmed, no new version",
            ] {
                assert!(read.contains(&squash(said)), "{w}×{h}: {said:?} in\n{read}");
            }
            // Home is the top again; the wheel scrolls too.
            let first = |s: &mut Session| {
                let rows = dialog_rows(&render(s, w, h), "┌ Revert · ");
                rows.first().cloned().unwrap_or_default()
            };
            s.handle_key(key(KeyCode::Home));
            assert!(first(&mut s).starts_with("Now pnpm"), "{w}×{h}");
            if w == 40 {
                let wheel = MouseEvent {
                    kind: MouseEventKind::ScrollDown,
                    column: w / 2,
                    row: h / 2,
                    modifiers: KeyModifiers::NONE,
                };
                s.handle_event(Event::Mouse(wheel));
                assert!(!first(&mut s).starts_with("Now pnpm"), "{w}×{h}: the wheel");
                // Scrolled, k still chooses a version: the newer v2, the moved one.
                press(&mut s, "k");
                let d = top!(s, Revert);
                assert_eq!(d.chosen().map(|c| c.version), Some(2));
                s.handle_key(key(KeyCode::End));
                let screen = render(&mut s, w, h);
                let rows = dialog_rows(&screen, "┌ Revert · ");
                assert!(
                    squash(&rows.join(" ")).contains(&squash("becomes npm (value of v2) as v4")),
                    "{screen}"
                );
            }
        }
    });
}

/// The rows of the rescope dialog on `screen` that say why its target is suggested: from
/// `suggested …` to the blank row under it.
fn suggestion_rows(screen: &str) -> Vec<String> {
    let rows = dialog_rows(screen, "┌ Rescope · ");
    let from = rows.iter().position(|r| r.starts_with("   suggested "));
    (from.map(|i| &rows[i..]).unwrap_or_default().iter())
        .take_while(|r| !r.is_empty())
        .cloned()
        .collect()
}

fn suggested(s: &Session) -> Vec<String> {
    let d = top!(s, Rescope);
    (d.suggestions.iter().flatten())
        .map(|x| x.scope.to_string())
        .collect()
}

/// Found by review: the incident's rescope dialog suggested, after the repository the words were
/// said in, the repositories whose agents only read the value (docs-site, storefront-next) —
/// where it was wrongly served, not where the rule belongs. And opened from tab 6 its reason
/// was another sentence, cut even at 220 columns (`… wrote install_command in repo:le…`). It
/// suggests where the words were said, and says why in one sentence from either tab, wrapped.
#[test]
fn rescope_suggests_where_the_words_were_said_the_same_from_either_tab() {
    for_each_backend(&Fixture::incident(), |db| {
        for (w, h) in [(220, 40), (120, 32), (60, 24), (40, 30)] {
            let mut s = db.session(w, h);
            select(&mut s, "user:42 · package_manager @ global");
            press(&mut s, "m");
            assert_eq!(suggested(&s), ["repo:legacy-dashboard"], "{w}×{h}");
            let from_view = suggestion_rows(&render(&mut s, w, h));
            s.handle_key(key(KeyCode::Esc));
            press(&mut s, "6m");
            assert_eq!(suggested(&s), ["repo:legacy-dashboard"], "{w}×{h}");
            let d = top!(s, Rescope);
            assert_eq!(
                (d.target.as_str(), d.suggestion),
                ("repo:legacy-dashboard", Some(0))
            );
            let screen = render(&mut s, w, h);
            let from_suspects = suggestion_rows(&screen);
            assert_eq!(from_view, from_suspects, "{w}×{h}:\n{screen}");
            let said = from_suspects
                .iter()
                .map(|r| r.trim())
                .collect::<Vec<_>>()
                .join(" ");
            assert_eq!(
                said,
                "suggested 1/1: the same message (thread:23/message:14) wrote install_command there",
                "{w}×{h}:\n{screen}"
            );
        }
    });
}

/// Where the same message wrote long hostile names (Chinese, emoji, a direction control), why a
/// target is suggested wraps under it to its end, its stored words escaped; a place the scope
/// guard marked at write time (`flag`, the write's own repository) is suggested too; reads
/// from other repositories are not.
#[test]
fn why_a_target_is_suggested_wraps_and_names_the_marked_place() {
    let f = Fixture::empty();
    f.store()
        .set_user_setting("scope_guard", "flag")
        .expect("flag mode");
    let predicate = format!("安装命令🦀{}尾", "很长的名字👩🏽‍💻".repeat(6));
    f.write(&format!(
        r#"{{"subject":"user:42","predicate":"{predicate}","value":"pnpm i","scope":"repo:遗留仪表盘","source":"thread:5\u202e/message:1"}}"#
    ));
    f.write(
        r#"{"subject":"user:42","predicate":"package_manager","value":"pnpm","scope":"global","source":"thread:5\u202e/message:1","raw":"这个仓库用 pnpm 🎉","context":{"repo":"web-app"}}"#,
    );
    let mut store = f.store();
    store
        .resolve_logged(
            "user:42",
            "package_manager",
            Some("docs-site"),
            None,
            Some("cursor"),
            None,
        )
        .expect("a read");
    drop(store);
    for_each_backend(&f, |db| {
        for (w, h) in [(120, 32), (60, 30), (40, 40)] {
            let mut s = db.session(w, h);
            select(&mut s, "user:42 · package_manager @ global");
            press(&mut s, "m");
            assert_eq!(
                suggested(&s),
                ["repo:web-app", "repo:遗留仪表盘"],
                "{w}×{h}"
            );
            let screen = render(&mut s, w, h);
            let said = suggestion_rows(&screen).join(" ");
            let squashed: String = said.split_whitespace().collect();
            assert_eq!(
                squashed, "suggested1/2:thescopeguardmarkedv1aspointingherewhenitwaswritten",
                "{w}×{h}:\n{screen}"
            );
            s.handle_key(key(KeyCode::Tab));
            let screen = render(&mut s, w, h);
            let rows = suggestion_rows(&screen);
            let squashed: String = rows.join(" ").split_whitespace().collect();
            assert!(
                squashed
                    .starts_with("suggested2/2:thesamemessage(thread:5�/message:1)wrote安装命令🦀")
                    && squashed.ends_with("there"),
                "{w}×{h}:\n{screen}"
            );
            assert!(!screen.contains('\u{202e}'), "escaped: {screen}");
            assert!(rows.len() > 1 || w >= 120, "{w}×{h}: wrapped\n{screen}");
        }
    });
}

/// Found by review: in the revert dialog, a digit that named no version said so only when it
/// was the first; after `1`, a `5` that made no v15 chose v5 silently, and after `2` a `0`
/// said there was no v0. Digits make one number: each digit that makes a number no version
/// has says so in one toast naming that number, and the choice stays.
#[test]
fn every_digit_that_names_no_version_says_so() {
    let f = Fixture::empty();
    for n in 1..=13 {
        f.write(&format!(
            r#"{{"subject":"user:42","predicate":"package_manager","value":"包管理器 {n} 🦀","scope":"global","source":"thread:{n}/message:1"}}"#
        ));
    }
    for_each_backend(&f, |db| {
        let mut s = db.session(120, 40);
        select(&mut s, "user:42 · package_manager @ global");
        press(&mut s, "v");
        let chosen = |s: &Session| top!(s, Revert).chosen().map(|c| c.version);
        assert_eq!(chosen(&s), Some(12));
        let no_version = |s: &Session| s.app.toast.as_ref().map(|t| t.text.clone());
        // Each step: the digit, the version chosen after it, what the toast says (if any).
        for (digit, version, said) in [
            ('1', 1, None),
            ('5', 1, Some("no earlier version v15 (v1 stays chosen): the choices are v12, v11, v10, v9, v8 … v1 (12 versions)")),
            ('5', 5, None),
            ('0', 5, Some("no earlier version v50 (v5 stays chosen): the choices are v12, v11, v10, v9, v8 … v1 (12 versions)")),
            ('2', 2, None),
            ('0', 2, Some("no earlier version v20 (v2 stays chosen): the choices are v12, v11, v10, v9, v8 … v1 (12 versions)")),
            ('1', 1, None),
            ('2', 12, None),
            ('3', 12, Some("no earlier version v123 (v12 stays chosen): the choices are v12, v11, v10, v9, v8 … v1 (12 versions)")),
            ('9', 9, None),
            ('0', 9, Some("no earlier version v90 (v9 stays chosen): the choices are v12, v11, v10, v9, v8 … v1 (12 versions)")),
            ('0', 9, Some("no earlier version v0 (v9 stays chosen): the choices are v12, v11, v10, v9, v8 … v1 (12 versions)")),
        ] {
            s.handle_key(ch(digit));
            assert_eq!(chosen(&s), Some(version), "after {digit}");
            assert_eq!(no_version(&s).as_deref(), said, "after {digit}");
        }
        // The version chosen is the one y reverts to, its effect stated.
        let screen = render(&mut s, 120, 40);
        assert!(
            screen.contains("global becomes 包管理器 9 🦀 (value of v9) as v14"),
            "{screen}"
        );
    });
}

/// Found by review: a space typed into the rescope dialog's target vanished (`repo:my app`
/// became `repo:myapp`, a place nobody named). It is typed as any character, and the preview
/// says that a scope id is one word; `y` is not offered and moves nothing.
#[test]
fn a_space_in_the_rescope_target_is_shown_and_refused_by_the_preview() {
    for_each_backend(&Fixture::incident(), |db| {
        let mut s = db.session(120, 32);
        select(&mut s, "user:42 · package_manager @ global");
        press(&mut s, "m");
        for typed in ["repo:my app", "repo:遗留\u{3000}仪表盘"] {
            retarget(&mut s, typed);
            let d = top!(s, Rescope);
            assert_eq!(d.target, typed);
            let why = match &d.preview {
                Some(Err(why)) => why.clone(),
                other => panic!("{typed}: refused as no scope, got {other:?}"),
            };
            assert!(
                why.contains("contains whitespace") && why.contains("ids are single words"),
                "{why}"
            );
            let screen = render(&mut s, 120, 32);
            assert!(screen.contains("ids are single words"), "{screen}");
            assert!(!screen.contains("y rescope"), "{screen}");
            assert_eq!(s.app.handle_key(ch('y')), Action::None);
            assert!(toast(&s).starts_with("nothing was moved: the target is not a scope"));
        }
        // Spaces around a scope are no part of it.
        retarget(&mut s, " repo:legacy-dashboard ");
        assert!(render(&mut s, 120, 32).contains("y rescope"));
    });
}

/// After a delete and a restore the versions before it are gone: v1 is no choice, v10–v16 are.
/// A `1` says it names no version yet and waits for the next digit, so `1` `6` is v16 (they
/// were `no v1`, then v6).
#[test]
fn a_digit_that_begins_a_version_waits_for_the_next() {
    let f = Fixture::empty();
    let write = |n: i64| {
        f.write(&format!(
            r#"{{"subject":"user:42","predicate":"工具🦀","value":"x{n}","scope":"global","source":"thread:{n}/message:1"}}"#
        ))
    };
    (1..=3).for_each(write);
    let id = memscope::model::Identity {
        subject: "user:42".into(),
        predicate: "工具🦀".into(),
        scope: Scope::Global,
    };
    let mut store = f.store();
    store
        .delete(&memscope::model::DeleteTarget::Identity(id.clone()), None)
        .expect("the delete");
    store.restore(&id).expect("the restore");
    drop(store);
    (4..=17).for_each(write);
    for_each_backend(&f, |db| {
        let mut s = db.session(120, 40);
        select(&mut s, "user:42 · 工具🦀 @ global");
        press(&mut s, "v");
        let versions = |s: &Session| -> Vec<i64> {
            let d = top!(s, Revert);
            (d.choices.iter().flatten().flatten())
                .map(|c| c.version)
                .collect()
        };
        assert_eq!(versions(&s), (5..=17).rev().collect::<Vec<i64>>());
        let chosen = |s: &Session| top!(s, Revert).chosen().map(|c| c.version);
        press(&mut s, "1");
        assert_eq!(chosen(&s), Some(17));
        assert_eq!(
            toast(&s),
            "v1 names no earlier version: v17, v16, v15, v14, v13, v12, v11, v10 begin with it — type the next digit"
        );
        press(&mut s, "6");
        assert_eq!(chosen(&s), Some(16));
        assert!(s.app.toast.is_none());
        press(&mut s, "3");
        assert_eq!(chosen(&s), Some(16));
        assert!(toast(&s).starts_with("no earlier version v163 (v16 stays chosen)"));
    });
}

/// The UI words none of the command line's flags: `--to-version N`, `memscope revert …`,
/// `memscope restore`, `memscope history`, `memscope list`.
#[track_caller]
fn assert_no_cli_advice(text: &str) {
    for flag in [
        "--to-version",
        "memscope revert",
        "memscope restore",
        "memscope history",
        "memscope list",
    ] {
        assert!(!text.contains(flag), "{flag}: {text}");
    }
}

/// Found by review: after a rescope the revert dialog said why a plain revert brings nothing
/// back in the store's sentence, whose advice is the CLI's (`--to-version N brings a moved
/// value back on purpose`), and a line beside it said how a version is chosen here. The
/// store's refusal is data now (`RevertRefusal::NothingEarlier`), and the dialog words its
/// advice in keys, once.
#[test]
fn the_revert_dialog_says_how_a_version_is_chosen_here() {
    let f = Fixture::incident();
    for_each_backend(&f, |db| {
        let mut s = db.session(120, 32);
        select(&mut s, "user:42 · package_manager @ global");
        press(&mut s, "v");
        // A plain revert brings v1 back: nothing to say.
        let screen = render(&mut s, 120, 32);
        assert!(
            !screen.contains("A plain revert brings nothing back"),
            "{screen}"
        );
        s.handle_key(key(KeyCode::Esc));
        db.commands()
            .rescope(
                "user:42",
                "package_manager",
                &Scope::Global,
                &Scope::Repo("legacy-dashboard".into()),
            )
            .expect("the incident's fix");
        press(&mut s, "v");
        let screen = render(&mut s, 120, 32);
        let rows = dialog_rows(&screen, "┌ Revert · ");
        let at = rows
            .iter()
            .position(|r| r.starts_with("A plain revert brings nothing back"))
            .unwrap_or_else(|| panic!("{screen}"));
        let said = rows[at..]
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            said.contains("v3 holds the value of v1 again, and every other value before it was moved to another scope by a rescope")
                && said.contains(
                    "choosing a moved version in the revert dialog (j/k or its number) brings it back on purpose"
                ),
            "{screen}"
        );
        assert_no_cli_advice(&screen);
        assert_no_cli_advice(top!(s, Revert).no_default.as_deref().unwrap_or_default());
    });
}

/// Found by review: a rescope refused as stale gave the CLI's advice in the dialog
/// (`memscope revert --subject … --to-version 2`). The refusal says which revert would do it
/// (`Instead::RevertTo`), and the dialog names the keys: the target's record, `v`, the number.
#[test]
fn a_stale_rescope_names_the_revert_that_does_it_in_keys() {
    let f = Fixture::incident();
    f.store()
        .rescope(
            "user:42",
            "package_manager",
            &Scope::Global,
            &Scope::Repo("legacy-dashboard".into()),
        )
        .expect("the incident's fix");
    for_each_backend(&f, |db| {
        let mut s = db.session(120, 40);
        select(&mut s, "user:42 · package_manager @ repo:legacy-dashboard");
        press(&mut s, "m");
        retarget(&mut s, "global");
        let refusal = match &top!(s, Rescope).preview {
            Some(Ok(p)) => p.refusal.clone().unwrap_or_default(),
            other => panic!("{other:?}"),
        };
        assert!(
            refusal.contains("this value was moved out of global as its v2")
                && refusal.ends_with(
                    "revert global to v2 — v on its record in tab 1, Current view, then 2 and y"
                ),
            "{refusal}"
        );
        assert_no_cli_advice(&refusal);
        let screen = render(&mut s, 120, 40);
        assert!(screen.contains("The store would refuse this"), "{screen}");
        assert_no_cli_advice(&screen);
    });
}

/// A refusal that comes only at `y` — another process changed the database after the preview
/// — is a toast in the UI's words: the revert by number a stale move needs, the restore a
/// deleted record needs, in keys, not the CLI's commands.
#[test]
fn a_late_refusal_toast_gives_the_uis_advice() {
    for_each_backend(&Fixture::incident(), |db| {
        let mut s = db.session(120, 32);
        select(&mut s, "user:42 · package_manager @ global");
        press(&mut s, "m");
        retarget(&mut s, "repo:late");
        assert!(render(&mut s, 120, 32).contains("y rescope"));
        // Two causally newer versions land in the target before `y`.
        for value in ["bun", "deno"] {
            db.write(&format!(
                r#"{{"subject":"user:42","predicate":"package_manager","value":"{value}","scope":"repo:late","source":"x:1"}}"#
            ));
        }
        press(&mut s, "y");
        let said = toast(&s).to_string();
        assert!(
            said.starts_with("rescope refused: ")
                && said.contains("(stale: ")
                && said.ends_with(
                    "revert to it by number — v on its record in tab 1, Current view, then the version's number (its history lists them) and y"
                ),
            "{said}"
        );
        assert_no_cli_advice(&said);

        // A revert whose record another process deletes before `y`.
        select(&mut s, "user:7 · formatter @ global");
        db.write(r#"{"subject":"user:7","predicate":"formatter","value":"biome","scope":"global","source":"x:2"}"#);
        assert!(crate::support::tui::sees_live_change(&mut s));
        select(&mut s, "user:7 · formatter @ global");
        press(&mut s, "v");
        assert!(render(&mut s, 120, 32).contains("y revert"));
        let formatter = memscope::model::Identity {
            subject: "user:7".into(),
            predicate: "formatter".into(),
            scope: Scope::Global,
        };
        db.store()
            .delete(&memscope::model::DeleteTarget::Identity(formatter), None)
            .expect("the delete");
        press(&mut s, "y");
        let said = toast(&s).to_string();
        assert!(
            said.starts_with("revert refused: ")
                && said
                    .ends_with("is deleted: restore it before reverting (u in tab 3, Tombstones)"),
            "{said}"
        );
        assert_no_cli_advice(&said);
    });
}

/// Found by review: the revert dialog offered `y` on a version whose preview the store
/// refused, and `y` only repeated the refusal. As the rescope dialog does, it offers `y` (in
/// its border and the footer) only on a version the store's preview says it can bring back,
/// and `y` on another says in one sentence why nothing happens and what works.
#[test]
fn the_revert_dialog_offers_y_only_on_a_version_the_store_brings_back() {
    let f = Fixture::empty();
    let write = |value: &str| {
        f.write(&format!(
            r#"{{"subject":"user:7","predicate":"editor","value":"{value}","scope":"global","source":"thread:1/message:1"}}"#
        ))
    };
    write("vim");
    write("emacs");
    // Retention, a year on, purges v1's content; then v3 is written.
    let mut store = f.store();
    store.set_clock(memscope::store::Clock::Fixed(
        crate::support::tui::now() + chrono::Duration::days(400),
    ));
    store.gc(Some(30), None).expect("gc");
    drop(store);
    write("helix");
    for_each_backend(&f, |db| {
        let mut s = db.session(120, 32);
        select(&mut s, "user:7 · editor @ global");
        press(&mut s, "v");
        let chosen = |s: &Session| top!(s, Revert).chosen().map(|c| c.version);
        assert_eq!(chosen(&s), Some(2));
        assert!(render(&mut s, 120, 32).contains("y revert"));
        // v1's content is gone: the store refuses it, and the dialog offers no `y`.
        press(&mut s, "j");
        assert_eq!(chosen(&s), Some(1));
        let screen = render(&mut s, 120, 32);
        assert!(screen.contains("The store would refuse this"), "{screen}");
        assert!(screen.contains("was purged"), "{screen}");
        assert!(!screen.contains("y revert"), "border and footer: {screen}");
        assert!(screen.contains("n/Esc cancel"), "{screen}");
        assert_eq!(s.app.handle_key(ch('y')), Action::None);
        let said = toast(&s).to_string();
        assert_eq!(
            said,
            "nothing was reverted: the store refuses this version, as the dialog says — j/k or a number chooses another, n or Esc cancels"
        );
        top!(s, Revert);
        // Back on v2: offered again, and `y` reverts.
        press(&mut s, "k");
        assert!(render(&mut s, 120, 32).contains("y revert"));
        press(&mut s, "y");
        assert!(s.app.dialogs.is_empty());
        assert!(toast(&s).starts_with("reverted "), "{}", toast(&s));
    });
}

/// A place the words name, which only the suspects scan finds (a write without a context is
/// judged on its words alone): the scan's finding is the suggestion, from the current view as
/// from tab 6, and its evidence says why.
#[test]
fn a_place_only_the_suspects_scan_finds_is_suggested_from_either_tab() {
    let f = Fixture::empty();
    f.write(
        r#"{"subject":"user:7","predicate":"formatter","value":"biome","scope":"repo:storefront-next","source":"thread:1/message:1"}"#,
    );
    f.write(
        r#"{"subject":"user:42","predicate":"package_manager","value":"yarn","scope":"global","source":"thread:2/message:1","raw":"the storefront-next repo uses yarn 🧶"}"#,
    );
    for_each_backend(&f, |db| {
        let mut s = db.session(120, 32);
        let listed = &s.app.tabs.suspects.rows;
        assert_eq!(listed.len(), 1, "the scan lists it");
        select(&mut s, "user:42 · package_manager @ global");
        press(&mut s, "m");
        assert_eq!(suggested(&s), ["repo:storefront-next"]);
        let from_view = suggestion_rows(&render(&mut s, 120, 32));
        s.handle_key(key(KeyCode::Esc));
        press(&mut s, "6m");
        let from_suspects = suggestion_rows(&render(&mut s, 120, 32));
        assert_eq!(from_view, from_suspects);
        assert_eq!(
            from_view
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            "suggested 1/1: memscope suspects points here: the words name repo:storefront-next"
        );
    });
}

/// A version the scope guard marked suspect when it was written is marked `!` in the revert
/// dialog, as the timeline marks it, and choosing it says why before `y` brings it back (found
/// by review: the dialog listed it as any other version).
#[test]
fn the_revert_dialog_marks_a_version_the_scope_guard_found_suspect() {
    let f = Fixture::incident();
    for_each_backend(&f, |db| {
        db.write(r#"{"subject":"user:42","predicate":"package_manager","value":"bun 🥟","scope":"global","source":"thread:31/message:2"}"#);
        let mut s = db.session(120, 32);
        select(&mut s, "user:42 · package_manager @ global");
        press(&mut s, "v");
        let screen = render(&mut s, 120, 32);
        let rows = dialog_rows(&screen, "┌ Revert · ");
        let row = |value: &str| {
            rows.iter()
                .find(|r| r.contains(&format!(" {value} ")))
                .unwrap_or_else(|| panic!("no row of {value}:\n{screen}"))
                .clone()
        };
        assert!(row("npm").starts_with("(•) v2 !"), "{screen}");
        assert!(row("pnpm").starts_with("( ) v1 "), "{screen}");
        assert!(!row("pnpm").contains('!'), "{screen}");
        let said = |rows: &[String]| rows.concat().replace(char::is_whitespace, "");
        let why = "!Thescopeguardmarkedv2suspectwhenitwaswritten:thewordssay“这个仓库”";
        assert!(said(&rows).contains(why), "{screen}");
        // The next version down is no suspect: the dialog says nothing of the guard.
        press(&mut s, "j");
        let screen = render(&mut s, 120, 32);
        let rows = dialog_rows(&screen, "┌ Revert · ");
        assert!(!said(&rows).contains("Thescopeguardmarked"), "{screen}");
    });
}

/// Found by an exploratory test: rescoping a group's last record from the UI left that group's
/// header in the list with nothing under it (the selection on it, `j` stopping there), while
/// the title counted one scope fewer. The list reads again as the store holds it: no empty
/// group, the selection on a record. A group that keeps a record keeps its header.
#[test]
fn rescoping_a_groups_last_record_leaves_no_empty_group() {
    let f = Fixture::empty();
    let write = |predicate: &str, scope: &str| {
        f.write(&format!(
            r#"{{"subject":"用户:搬🧳","predicate":"{predicate}","value":"值 📦","scope":"{scope}","source":"thread:1"}}"#
        ))
    };
    write("a", "global");
    write("b", "repo:只有一条🦀");
    write("c", "repo:两条");
    write("d", "repo:两条");
    for_each_backend(&f, |db| {
        let headers = |s: &Session| -> Vec<String> {
            use memscope::tui::list::ListItem;
            s.app
                .memories()
                .list
                .iter()
                .filter_map(|r| match &r.item {
                    ListItem::Header { scope } => Some(scope.to_string()),
                    ListItem::Record { .. } => None,
                })
                .collect()
        };
        let mut s = db.session(100, 24);
        assert_eq!(headers(&s), ["global", "repo:两条", "repo:只有一条🦀"]);
        for (label, left) in [
            (
                "用户:搬🧳 · b @ repo:只有一条🦀",
                vec!["global", "repo:两条"],
            ),
            ("用户:搬🧳 · c @ repo:两条", vec!["global", "repo:两条"]),
            ("用户:搬🧳 · d @ repo:两条", vec!["global"]),
        ] {
            select(&mut s, label);
            press(&mut s, "m");
            retarget(&mut s, "global");
            press(&mut s, "y");
            assert!(toast(&s).starts_with("rescoped "), "{}", toast(&s));
            assert_eq!(headers(&s), left, "after moving {label}");
            assert!(!selected(&s).starts_with('['), "{}", selected(&s));
            let screen = render(&mut s, 100, 24);
            assert!(!screen.contains("▾ repo:只有一条"), "{screen}");
        }
    });
}
