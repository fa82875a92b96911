//! Shared helpers of the UI tests: a demo database at a fixed time, a session on it whose
//! background work runs inline, keys, and frames rendered on a TestBackend. A fixture is built on
//! SQLite (its fixed clock makes every time the same each run) and can be moved to PostgreSQL,
//! so that one test runs on both backends ([`for_each_backend`]).
#![allow(dead_code)]

use super::{PostgresDropper, TestDb};
use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use memscope::store::{AnyStore, Clock, OpenMode, Store, UiStore};
use memscope::tui::{Session, WorkerMode};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
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
        open_session(Box::new(self.store()), width, height)
    }

    /// The same data in a fresh PostgreSQL database, moved there by the real binary: `export`
    /// here, `import` there (which keeps ids, times and the causal clock). `None` without a
    /// PostgreSQL server (said on stderr; with CI=true it panics instead).
    pub fn on_postgres(&self) -> Option<OnPostgres> {
        let (db, dropper) = super::postgres_test_db()?;
        let exported = super::memscope_cmd(db.dir.path())
            .arg("--db")
            .arg(&self.path)
            .arg("export")
            .output()
            .expect("memscope export starts");
        assert!(exported.status.success(), "export: {exported:?}");
        let dump = db.sibling("fixture.dump");
        std::fs::write(&dump, &exported.stdout).expect("the dump is written");
        db.run(&["import", dump.to_str().expect("a utf-8 temp path")])
            .ok();
        Some(OnPostgres {
            url: db.path_str().to_string(),
            _db: db,
            _dropper: dropper,
        })
    }

    /// A write through the real write path, from a JSON request.
    pub fn write(&self, json: &str) {
        let req = memscope::model::WriteRequest::from_json_line(json).expect("a valid request");
        self.store().write(&req).expect("the write lands");
    }
}

/// A session on `store` as every UI test opens one: the fixed clock, background work inline, and
/// the database named as the snapshots name it.
pub fn open_session(store: Box<dyn UiStore>, width: u16, height: u16) -> Session {
    open_session_in(store, width, height, WorkerMode::Inline)
}

/// [`open_session`] with its background work run as `mode` says.
pub fn open_session_in(
    store: Box<dyn UiStore>,
    width: u16,
    height: u16,
    mode: WorkerMode,
) -> Session {
    let mut session =
        Session::new(store, Clock::Fixed(now()), (width, height), mode).expect("the session opens");
    session.app.name_database("demo.db".into());
    session
}

/// A fixture's data moved into a fresh PostgreSQL test database, dropped with this.
pub struct OnPostgres {
    pub url: String,
    /// Holds the dump's directory.
    _db: TestDb,
    _dropper: PostgresDropper,
}

impl OnPostgres {
    pub fn session(&self, width: u16, height: u16) -> Session {
        let store = memscope::store::open_ui(Path::new(&self.url), OpenMode::Existing)
            .expect("the PostgreSQL database opens");
        open_session(store, width, height)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }
}

/// A fixture's data on one backend: sessions open on it, and other connections write to it.
pub enum Db<'a> {
    Sqlite(&'a Fixture),
    Postgres(OnPostgres),
}

impl Db<'_> {
    pub fn backend(&self) -> Backend {
        match self {
            Db::Sqlite(_) => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    pub fn session(&self, width: u16, height: u16) -> Session {
        match self {
            Db::Sqlite(f) => f.session(width, height),
            Db::Postgres(pg) => pg.session(width, height),
        }
    }

    /// A session whose background work waits until a key waits for it or the test pumps
    /// (`WorkerMode::Deferred`): the replies of a burst's keys arrive after the burst.
    pub fn deferred_session(&self, width: u16, height: u16) -> Session {
        open_session_in(self.store(), width, height, WorkerMode::Deferred)
    }

    /// A write through the real write path on a connection of its own, as another process
    /// would make it (on PostgreSQL at the server's time, not the fixed clock).
    pub fn write(&self, json: &str) {
        let req = memscope::model::WriteRequest::from_json_line(json).expect("a valid request");
        self.commands().write(&req).expect("the write lands");
    }

    /// Another connection to the same database with the UI's reads and curations, as another
    /// process would have (on SQLite at the fixed clock): what a test checks after the session
    /// acted, and what it changes behind the session's back.
    pub fn store(&self) -> Box<dyn UiStore> {
        match self {
            Db::Sqlite(f) => Box::new(f.store()),
            Db::Postgres(pg) => memscope::store::open_ui(Path::new(&pg.url), OpenMode::Existing)
                .expect("the PostgreSQL database opens"),
        }
    }

    /// Another connection to the same database with the commands' store (logged reads, single
    /// pending items), as another process would have (on SQLite at the fixed clock).
    pub fn commands(&self) -> AnyStore {
        match self {
            Db::Sqlite(f) => AnyStore::Sqlite(f.store()),
            Db::Postgres(pg) => AnyStore::open(Path::new(&pg.url), OpenMode::Existing)
                .expect("the PostgreSQL database opens"),
        }
    }
}

impl OnPostgres {
    /// What each other connection to this database is doing (`active`, `idle`, `idle in
    /// transaction`, …) and its query, read from `pg_stat_activity` by a connection of its own:
    /// a connection left inside a transaction holds back VACUUM.
    pub fn other_connections(&self) -> Vec<(String, String)> {
        let mut client =
            postgres::Client::connect(&self.url, postgres::NoTls).expect("the test database");
        client
            .query(
                "SELECT coalesce(state, ''), left(query, 200) FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .expect("pg_stat_activity answers")
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    }
}

/// Runs `test` on `f`'s data on each backend: on SQLite, then on the same data moved to
/// PostgreSQL (skipped, said on stderr, without a server). A failure names the backend.
pub fn for_each_backend(f: &Fixture, mut test: impl FnMut(&Db)) {
    // Moved before the SQLite side runs: what the test writes there must not reach PostgreSQL.
    let postgres = f.on_postgres();
    on(&Db::Sqlite(f), &mut test);
    if let Some(pg) = postgres {
        on(&Db::Postgres(pg), &mut test);
    }
}

fn on(db: &Db, test: &mut impl FnMut(&Db)) {
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(db)));
    if let Err(e) = ran {
        eprintln!("failed on {}", db.backend().name());
        std::panic::resume_unwind(e);
    }
}

/// Polls until the session has seen another connection's commit, and says whether it did:
/// SQLite's data version answers at once, a PostgreSQL notice arrives a moment after the commit.
pub fn sees_live_change(s: &mut Session) -> bool {
    let start = Instant::now();
    while !s.poll_live() {
        if start.elapsed() > Duration::from_secs(10) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
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
