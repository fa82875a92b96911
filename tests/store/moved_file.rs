//! A database file removed, or replaced by another moved over it, while a connection has it
//! open (README, "The terminal UI", live refresh; `Store::file_moved`). SQLite goes on with the
//! file it has open and with the `-wal` and `-shm` still at the path — which the file now at the
//! path adopts as its own log. So the old connection must neither write (its frames would be
//! read as the new file's pages) nor, closing, checkpoint that log into the old file and delete
//! it (the new file's committed writes, still in the log, would be lost).

use crate::support::*;
use memscope::model::WriteRequest;
use memscope::store::{OpenMode, Store};

fn request(subject: &str, value: &str) -> WriteRequest {
    WriteRequest::from_json_line(&format!(
        r#"{{"subject":"{subject}","predicate":"package_manager","value":"{value}","scope":"global","source":"thread:1/message:1"}}"#
    ))
    .expect("a valid request")
}

/// The file at `db`'s path: its memories as `subject = value`, after `check` and SQLite's
/// integrity check pass.
fn intact_memories(db: &TestDb) -> Vec<String> {
    db.assert_check_ok();
    db.list(&[])
        .iter()
        .map(|m| {
            format!(
                "{} = {}",
                m["subject"].as_str().unwrap(),
                m["value"].as_str().unwrap()
            )
        })
        .collect()
}

/// Moves `db`'s file aside (returned) and another database, holding `user:new = pnpm`, onto its
/// path — `mv backup.db memory.db`.
fn move_another_database_over(db: &TestDb) -> std::path::PathBuf {
    let new = TestDb::named("new.db");
    new.write(
        "user:new",
        "package_manager",
        "pnpm",
        "global",
        "thread:2/message:1",
    );
    let aside = db.sibling("aside.db");
    std::fs::rename(&db.path, &aside).unwrap();
    std::fs::rename(&new.path, &db.path).unwrap();
    aside
}

/// `old` open on the path, its log checkpointed (empty) — then the file moved aside and
/// another database (`new`, closed) moved to the path.
fn swapped() -> (TestDb, Store, std::path::PathBuf) {
    let db = TestDb::new();
    let mut old = Store::open(&db.path, OpenMode::Create).unwrap();
    old.write(&request("user:old", "npm")).unwrap();
    old.connection()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let aside = move_another_database_over(&db);
    assert!(old.file_moved());
    (db, old, aside)
}

#[test]
fn a_connection_whose_file_was_replaced_refuses_to_write_and_the_new_file_stays_intact() {
    let (db, mut old, aside) = swapped();
    let e = old.write(&request("user:ghost", "yarn")).unwrap_err();
    let said = format!("{e:#}");
    assert!(
        said.contains("was removed or replaced after memscope opened it")
            && said.contains("nothing was written")
            && said.contains(db.path_str()),
        "{said}"
    );
    // A reader of the path while the old connection is still open: the new file, whole.
    assert_eq!(intact_memories(&db), ["user:new = pnpm"]);
    drop(old);
    assert_eq!(intact_memories(&db), ["user:new = pnpm"]);
    // The old file kept what it had.
    let was = TestDb::at(aside);
    assert_eq!(intact_memories(&was), ["user:old = npm"]);
}

#[test]
fn a_connection_whose_file_was_replaced_closes_without_taking_the_new_files_log() {
    let (db, old, _aside) = swapped();
    // The new file's writer commits into the log at the path — the one the old connection
    // has open too — and stays open, so nothing checkpoints it yet.
    let mut writer = Store::open(&db.path, OpenMode::Existing).unwrap();
    writer.write(&request("user:late", "bun")).unwrap();
    // The old connection closes: it must not checkpoint that log into the old file and delete
    // it, or a new reader of the path would not see the committed write. (SQLite's pager skips
    // the checkpoint on close of a moved file by itself; memscope relies on it, and this holds
    // it to that.)
    drop(old);
    assert!(
        std::fs::metadata(format!("{}-wal", db.path_str())).is_ok(),
        "the log at the path is still there"
    );
    assert_eq!(intact_memories(&db), ["user:late = bun", "user:new = pnpm"]);
    drop(writer);
    assert_eq!(intact_memories(&db), ["user:late = bun", "user:new = pnpm"]);
}

#[test]
fn a_removed_file_is_told_and_a_file_moved_back_is_written_again() {
    let db = TestDb::new();
    let mut store = Store::open(&db.path, OpenMode::Create).unwrap();
    store.write(&request("user:1", "npm")).unwrap();
    let aside = db.sibling("aside.db");
    std::fs::rename(&db.path, &aside).unwrap();
    assert!(store.file_moved());
    assert!(store.write(&request("user:2", "pnpm")).is_err());
    std::fs::rename(&aside, &db.path).unwrap();
    assert!(!store.file_moved());
    store.write(&request("user:2", "pnpm")).unwrap();
    drop(store);
    assert_eq!(intact_memories(&db), ["user:1 = npm", "user:2 = pnpm"]);
}

/// The size of the write-ahead log at `db`'s path (0 when there is none).
fn wal_len(db: &TestDb) -> u64 {
    std::fs::metadata(format!("{}-wal", db.path_str())).map_or(0, |m| m.len())
}

/// A long-lived process empties the log once no one has written for one of its polls
/// (`Store::settle_idle_log`), never while the log is still growing, and without waiting for
/// a reader in the way — it tries again at its next poll.
#[test]
fn an_idle_log_is_emptied_once_it_stops_growing_and_a_reader_only_defers_it() {
    let db = TestDb::new();
    let mut store = Store::open(&db.path, OpenMode::Create).unwrap();
    store.write(&request("user:1", "npm")).unwrap();
    assert!(wal_len(&db) > 0, "a write leaves frames in the log");
    store.settle_idle_log().unwrap();
    assert!(wal_len(&db) > 0, "the first sight of a log is not yet idle");
    store.write(&request("user:2", "pnpm")).unwrap();
    store.settle_idle_log().unwrap();
    assert!(
        wal_len(&db) > 0,
        "a log that grew since the last poll is left alone"
    );
    store.settle_idle_log().unwrap();
    assert_eq!(wal_len(&db), 0, "a log that did not grow is emptied");

    // A reader in another connection holds a snapshot that reads the log: the truncation
    // gives up at once and is tried again.
    store.write(&request("user:3", "bun")).unwrap();
    let reader = rusqlite::Connection::open(&db.path).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let _: i64 = reader
        .query_row("SELECT count(*) FROM memories", [], |r| r.get(0))
        .unwrap();
    store.settle_idle_log().unwrap();
    store.settle_idle_log().unwrap();
    assert!(
        wal_len(&db) > 0,
        "a reader in the way defers the truncation"
    );
    reader.execute_batch("COMMIT").unwrap();
    store.settle_idle_log().unwrap();
    assert_eq!(wal_len(&db), 0, "the next idle poll empties it");
    drop(reader);
    drop(store);
    assert_eq!(
        intact_memories(&db),
        ["user:1 = npm", "user:2 = pnpm", "user:3 = bun"]
    );
}

/// The real MCP server, idle after a write: its log is emptied, so a database moved over the
/// path while it still runs (`mv backup.db memory.db`) adopts no log of the old file's — it
/// reads as itself, before and after the server exits. (Before the idle truncation, the
/// server's frames stayed at the path and the moved file read them as its own pages.)
#[test]
fn an_mcp_server_left_idle_leaves_no_log_for_a_file_moved_over_its_database() {
    use crate::support::mcp_session::RawSession;
    use serde_json::json;
    let db = TestDb::new();
    db.write("user:old", "editor", "vim", "global", "thread:0/message:1");
    let mut server = RawSession::serve(db.path_str(), &["--subject", "user:old"]);
    for (i, value) in ["npm", "pnpm", "yarn 🧶"].iter().enumerate() {
        let r = server.request(
            10 + i as i64,
            "tools/call",
            json!({"name": "remember", "arguments": {
                "predicate": "package_manager", "value": value, "scope": "global",
                "source": format!("thread:1/message:{i}")}}),
        );
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    assert!(wal_len(&db) > 0, "the server's writes are in the log");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while wal_len(&db) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle server never emptied the log ({} bytes)",
            wal_len(&db)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let aside = move_another_database_over(&db);
    assert_eq!(intact_memories(&db), ["user:new = pnpm"]);
    // The server answers from no database now: not the old file's memories (what the user
    // replaced), nor a write into the new file's log — every tool says so.
    for (id, name, arguments) in [
        (20, "list_memories", json!({})),
        (21, "recall", json!({"predicate": "package_manager"})),
        (
            22,
            "remember",
            json!({"predicate": "editor", "value": "helix", "scope": "global", "source": "thread:3"}),
        ),
    ] {
        let r = server.request(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        );
        assert_eq!(r["result"]["isError"], true, "{name}: {r}");
        let text = crate::support::mcp_session::tool_text(&r);
        assert!(
            text.contains("removed or replaced") && !text.contains("yarn"),
            "{name}: {text}"
        );
    }
    let (code, _) = server.finish();
    assert_eq!(code, 0);
    assert_eq!(intact_memories(&db), ["user:new = pnpm"]);
    assert_eq!(
        intact_memories(&TestDb::at(aside)),
        ["user:old = vim", "user:old = yarn 🧶"]
    );
}

/// `old` wrote and its frames are still in the log at the path (no idle poll emptied it) when
/// another database is moved over the path — the reviewer's `mv backup.db memory.db` under an
/// agent that had just written.
fn swapped_with_frames_in_the_log() -> (TestDb, Store, std::path::PathBuf) {
    let db = TestDb::new();
    let mut old = Store::open(&db.path, OpenMode::Create).unwrap();
    old.write(&request("user:old", "npm")).unwrap();
    old.write(&request("user:old2", "bun 🥟")).unwrap();
    assert!(wal_len(&db) > 0, "the writes are in the log");
    let aside = move_another_database_over(&db);
    assert!(old.file_moved());
    (db, old, aside)
}

/// The connection notices the move at its next idle poll and takes its frames out of the log
/// at the path — into the file it opened, now aside — so the file at the path reads as itself.
/// (Before, the log stayed: the next process to open the path read the old file's pages as
/// the backup's, and the backup lost its memories or failed SQLite's check.)
#[test]
fn a_connection_whose_file_was_replaced_takes_its_own_log_away_at_its_next_idle_poll() {
    let (db, mut old, aside) = swapped_with_frames_in_the_log();
    old.settle_idle_log().unwrap();
    assert_eq!(wal_len(&db), 0, "the old connection's frames left the path");
    assert_eq!(intact_memories(&db), ["user:new = pnpm"]);
    drop(old);
    assert_eq!(intact_memories(&db), ["user:new = pnpm"]);
    assert_eq!(
        intact_memories(&TestDb::at(aside)),
        ["user:old = npm", "user:old2 = bun 🥟"],
        "the file moved aside kept every write"
    );
}

/// A process that exits without an idle poll between its last write and the move (an MCP
/// server whose host closed it right after the `mv`) does the same as it closes.
#[test]
fn a_connection_whose_file_was_replaced_takes_its_own_log_away_as_it_closes() {
    let (db, old, aside) = swapped_with_frames_in_the_log();
    drop(old);
    assert_eq!(wal_len(&db), 0, "the old connection's frames left the path");
    assert_eq!(intact_memories(&db), ["user:new = pnpm"]);
    assert_eq!(
        intact_memories(&TestDb::at(aside)),
        ["user:old = npm", "user:old2 = bun 🥟"]
    );
}

/// A file removed under the connection keeps the writes its log held: they are checkpointed
/// into it through the open descriptor, and a file moved back reads them.
#[test]
fn a_removed_file_gets_its_log_back_before_the_connection_closes() {
    let db = TestDb::new();
    let mut store = Store::open(&db.path, OpenMode::Create).unwrap();
    store.write(&request("user:1", "npm")).unwrap();
    let aside = db.sibling("aside.db");
    std::fs::rename(&db.path, &aside).unwrap();
    store.settle_idle_log().unwrap();
    drop(store);
    assert_eq!(wal_len(&db), 0);
    assert_eq!(intact_memories(&TestDb::at(aside)), ["user:1 = npm"]);
}

/// The real MCP server, a backup moved over its database right after a write (no idle poll
/// in between): whether its next poll or its exit comes first, the moved file reads as itself
/// and the old file kept the write. (Before, the server's frames stayed at the path after it
/// exited, and the next command read them as the backup's pages: the reviewer's backup of 15
/// memories listed only the server's one.)
#[test]
fn an_mcp_server_that_just_wrote_leaves_no_log_for_a_file_moved_over_its_database() {
    use crate::support::mcp_session::RawSession;
    use serde_json::json;
    for wait_for_a_poll in [false, true] {
        let db = TestDb::new();
        db.write("user:old", "editor", "vim", "global", "thread:0/message:1");
        let mut server = RawSession::serve(db.path_str(), &["--subject", "user:old"]);
        let r = server.request(
            10,
            "tools/call",
            json!({"name": "remember", "arguments": {
                "predicate": "package_manager", "value": "yarn 🧶", "scope": "global",
                "source": "thread:1/message:1"}}),
        );
        assert_eq!(r["result"]["isError"], false, "{r}");
        assert!(wal_len(&db) > 0, "the server's write is in the log");
        let aside = move_another_database_over(&db);
        if wait_for_a_poll {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while wal_len(&db) > 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the server never took its log away"
                );
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        let (code, _) = server.finish();
        assert_eq!(code, 0);
        assert_eq!(wal_len(&db), 0, "poll first: {wait_for_a_poll}");
        assert_eq!(intact_memories(&db), ["user:new = pnpm"]);
        assert_eq!(
            intact_memories(&TestDb::at(aside)),
            ["user:old = vim", "user:old = yarn 🧶"]
        );
    }
}
