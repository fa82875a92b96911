//! Shared helpers of the UI tests: a demo database at a fixed time, a session on it whose
//! background work runs inline, keys, and frames rendered on a TestBackend.
#![allow(dead_code)]

use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use memscope::store::{Clock, OpenMode, Store};
use memscope::tui::{Session, WorkerMode};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::PathBuf;
use tempfile::TempDir;

/// Every snapshot is drawn at this instant, and the demo's ages count back from it.
pub fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-20T10:00:00Z")
        .expect("a fixed time")
        .with_timezone(&Utc)
}

pub struct Fixture {
    pub dir: TempDir,
    pub path: PathBuf,
}

impl Fixture {
    pub fn empty() -> Fixture {
        let dir = tempfile::tempdir().expect("a temp dir");
        // Private, as memscope makes its own folders: the Check tab has no finding to show.
        let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o700);
        std::fs::set_permissions(dir.path(), private).expect("a private temp dir");
        let path = dir.path().join("memory.db");
        let mut store = Store::open(&path, OpenMode::Create).expect("a new database");
        store.set_clock(Clock::Fixed(now()));
        Fixture { dir, path }
    }

    pub fn demo() -> Fixture {
        let f = Fixture::empty();
        let mut store = f.store();
        memscope::demo::load_at(&mut store, now()).expect("the demo loads");
        f
    }

    /// A small story that does not change when the demo does (for key-handling tests): a
    /// superseded and a stale write, the same predicate in three scopes, a tombstone, two
    /// ambiguous writes waiting for a human.
    pub fn story() -> Fixture {
        let f = Fixture::empty();
        for line in [
            r#"{"subject":"team:web","predicate":"node_version","value":"22 LTS","scope":"global","source":"doc:handbook"}"#,
            r#"{"subject":"team:web","predicate":"node_version","value":"18","scope":"repo:legacy-dashboard","source":"doc:handbook"}"#,
            r#"{"subject":"user:42","predicate":"formatter","value":"prettier","scope":"global","source":"thread:9/message:4"}"#,
            r#"{"subject":"user:42","predicate":"package_manager","value":"pnpm","scope":"global","source":"thread:17/message:86","raw":"以后新建前端项目，默认用 pnpm。"}"#,
            r#"{"subject":"user:42","predicate":"formatter","value":"biome","scope":"global","source":"thread:27/message:11"}"#,
            r#"{"subject":"user:42","predicate":"formatter","value":"prettier","scope":"global","source":"thread:24/message:30","causal_seq":1}"#,
            r#"{"subject":"user:42","predicate":"package_manager","value":"npm","scope":"repo:legacy-dashboard","source":"thread:23/message:14"}"#,
            r#"{"subject":"user:42","predicate":"package_manager","value":"npm","scope":"task:fix-lockfile-123","source":"thread:26/message:5"}"#,
            r#"{"subject":"user:42","predicate":"coffee","value":"燕麦拿铁","scope":"global","source":"thread:20/message:2"}"#,
            r#"{"subject":"user:7","predicate":"package_manager","value":"yarn","scope":"global","source":"thread:44/message:9"}"#,
            r#"{"subject":"user:7","predicate":"test_runner","value":"pytest -x","scope":"task:flaky-ci-88","source":"thread:47/message:2"}"#,
            r#"{"subject":"user:42","predicate":"package_manager","value":"npm","scope":{"ambiguous":["global","repo:web-app"]},"source":"thread:31/message:2","raw":"以后都用 npm"}"#,
            r#"{"subject":"user:7","predicate":"indentation","value":"tabs","scope":{"ambiguous":["global","repo:api-server"]},"source":"thread:48/message:6"}"#,
        ] {
            f.write(line);
        }
        let coffee = memscope::model::DeleteTarget::Predicate {
            subject: "user:42".into(),
            predicate: "coffee".into(),
        };
        f.store()
            .delete(&coffee, Some("user asked to forget"))
            .expect("the delete lands");
        f
    }

    /// The wrong-tool incident, small and independent of the demo (for key-handling tests),
    /// each step at its own time: pnpm written global; web-app read it; the legacy-dashboard
    /// message wrote npm global (v2) and install_command in the repo; new projects read npm;
    /// repo:old-app deleted (a tombstoned target); repo:newer holds a causally newer value.
    pub fn incident() -> Fixture {
        let f = Fixture::empty();
        let hours = |h: i64| now() - chrono::Duration::hours(h);
        let write = |h: i64, json: &str| {
            let mut store = f.store();
            store.set_clock(Clock::Fixed(hours(h)));
            let req = memscope::model::WriteRequest::from_json_line(json).expect("a valid request");
            store.write(&req).expect("the write lands");
        };
        let read = |h: i64, agent: &str, repo: &str, note: &str| {
            let mut store = f.store();
            store.set_clock(Clock::Fixed(hours(h)));
            store
                .resolve_logged(
                    "user:42",
                    "package_manager",
                    Some(repo),
                    None,
                    Some(agent),
                    Some(note),
                )
                .expect("the read is logged");
        };
        write(
            14 * 24,
            r#"{"subject":"user:42","predicate":"package_manager","value":"pnpm","scope":"global","source":"thread:17/message:86","raw":"以后新建前端项目，默认用 pnpm。"}"#,
        );
        write(
            13 * 24,
            r#"{"subject":"user:7","predicate":"formatter","value":"prettier","scope":"global","source":"thread:9/message:4"}"#,
        );
        read(11 * 24, "claude-code", "web-app", "pnpm install in web-app");
        write(
            7 * 24,
            r#"{"subject":"user:42","predicate":"package_manager","value":"npm","scope":"global","source":"thread:23/message:14","raw":"这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。"}"#,
        );
        write(
            7 * 24 - 1,
            r#"{"subject":"user:42","predicate":"install_command","value":"npm ci","scope":"repo:legacy-dashboard","source":"thread:23/message:14"}"#,
        );
        write(
            5 * 24,
            r#"{"subject":"user:42","predicate":"package_manager","value":"npm","scope":"repo:old-app","source":"thread:24/message:1"}"#,
        );
        let mut store = f.store();
        store.set_clock(Clock::Fixed(hours(4 * 24)));
        let old_app = memscope::model::DeleteTarget::Identity(memscope::model::Identity {
            subject: "user:42".into(),
            predicate: "package_manager".into(),
            scope: memscope::model::Scope::Repo("old-app".into()),
        });
        store
            .delete(&old_app, Some("old-app retired"))
            .expect("the delete lands");
        read(
            3 * 24,
            "claude-code",
            "storefront-next",
            "scaffolding a new project: ran npm install",
        );
        write(
            2 * 24,
            r#"{"subject":"user:42","predicate":"package_manager","value":"yarn","scope":"repo:newer","source":"thread:30/message:1"}"#,
        );
        read(
            20,
            "cursor",
            "docs-site",
            "new docs site: npm install again",
        );
        f
    }

    /// Another connection to the same database, as another process would have.
    pub fn store(&self) -> Store {
        let mut store = Store::open(&self.path, OpenMode::Existing).expect("the database opens");
        store.set_clock(Clock::Fixed(now()));
        store
    }

    pub fn session(&self, width: u16, height: u16) -> Session {
        let mut session = Session::new(
            Box::new(self.store()),
            Clock::Fixed(now()),
            (width, height),
            WorkerMode::Inline,
        )
        .expect("the session opens");
        session.app.db_path = "demo.db".into();
        session
    }

    /// A write through the real write path, from a JSON request.
    pub fn write(&self, json: &str) {
        let req = memscope::model::WriteRequest::from_json_line(json).expect("a valid request");
        self.store().write(&req).expect("the write lands");
    }
}

pub fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

pub fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

/// Types each character of `keys` as a key press through the session.
pub fn press(session: &mut Session, keys: &str) {
    for c in keys.chars() {
        session.handle_key(ch(c));
    }
}

/// Types `words` into the filter line (`/`) and applies them (Enter).
pub fn filter(session: &mut Session, words: &str) {
    session.handle_key(ch('/'));
    press(session, words);
    session.handle_key(key(KeyCode::Enter));
}

pub fn render(session: &mut Session, width: u16, height: u16) -> String {
    session.resize(width, height);
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("a test terminal");
    terminal.draw(|f| session.draw(f)).expect("a frame");
    terminal.backend().to_string()
}

/// The selected row as "subject · predicate @ scope", or "[scope]" for a group header.
pub fn selected(s: &Session) -> String {
    use memscope::tui::list::ListItem;
    match s.app.memories().list.selected().map(|r| &r.item) {
        Some(ListItem::Record { record, .. }) => {
            format!(
                "{} · {} @ {}",
                record.subject, record.predicate, record.scope
            )
        }
        Some(ListItem::Header { scope }) => format!("[{scope}]"),
        None => "nothing".into(),
    }
}

/// Moves the selection to `label` (as [`selected`] writes it) from the top of the list.
pub fn select(s: &mut Session, label: &str) {
    s.handle_key(key(KeyCode::Home));
    for _ in 0..200 {
        if selected(s) == label {
            return;
        }
        s.handle_key(ch('j'));
    }
    panic!("{label} is not in the list");
}

/// Moves the Reads cursor to the read from `repo`.
pub fn select_read(s: &mut Session, repo: &str) {
    s.handle_key(key(KeyCode::Home));
    for _ in 0..50 {
        if s.app.selected_read().and_then(|r| r.repo.as_deref()) == Some(repo) {
            return;
        }
        s.handle_key(ch('j'));
    }
    panic!("no read from {repo}");
}

/// The selected record's history, as the history pane holds it.
pub fn detail(s: &Session) -> &memscope::tui::app::Detail {
    s.app
        .memories()
        .timeline
        .detail
        .as_ref()
        .expect("the selected record's history is loaded")
}
