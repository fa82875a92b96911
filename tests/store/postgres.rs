//! The PostgreSQL groundwork against a real server: addresses and connection failures (one
//! sentence, no password, nothing created), the schema and its version row, the migration
//! runner, and the guards refusing a raw SQL client.
//!
//! The server is `MEMSCOPE_TEST_POSTGRES` (`source .ci/postgres` starts one and sets it; `.ci/run`
//! does that). Without it the tests fail under `CI=true` and say loudly that they skipped
//! elsewhere. Each test works in a database of its own, created and dropped around it.

use crate::support::{assert_one_sentence, memscope_cmd, Run};
use ::postgres::error::SqlState;
use ::postgres::{Client, NoTls};
use memscope::store::postgres::{self as pg, schema, Address};
use memscope::store::{AnyStore, IntegrityMode, OpenMode};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The test server's address, or `None` (after saying so) when there is none outside CI.
pub(crate) fn server() -> Option<String> {
    match std::env::var("MEMSCOPE_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("no PostgreSQL for the tests: CI=true and MEMSCOPE_TEST_POSTGRES is unset (.ci/run starts one with .ci/postgres)");
            }
            // Straight to stderr: the test harness captures `eprintln!` of a passing test.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: no PostgreSQL (set MEMSCOPE_TEST_POSTGRES or run .ci/postgres)"
            );
            None
        }
    }
}

/// The password in a `postgres://user:password@…` address.
fn password_of(url: &str) -> String {
    let creds = url.split_once("://").unwrap().1.split_once('@').unwrap().0;
    creds.split_once(':').unwrap().1.to_string()
}

/// `url` with its database replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, _) = url.rsplit_once('/').unwrap();
    format!("{base}/{db}")
}

/// A database of its own on the test server, dropped when the test ends.
pub(crate) struct FreshDb {
    server: String,
    pub(crate) name: String,
    pub(crate) url: String,
}

impl FreshDb {
    pub(crate) fn new(server: &str) -> FreshDb {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "memscope_t_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let mut admin = Client::connect(server, NoTls).expect("the test server answers");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("a test database");
        FreshDb {
            server: server.to_string(),
            url: with_database(server, &name),
            name,
        }
    }

    /// A fresh database whose default collation is ICU's `locale` (not bytewise, unlike the
    /// test cluster's C.UTF-8), or None when the server has no ICU.
    pub(crate) fn collated(server: &str, locale: &str) -> Option<FreshDb> {
        let db = FreshDb::new(server);
        let mut admin = Client::connect(server, NoTls).expect("the test server answers");
        admin
            .batch_execute(&format!("DROP DATABASE {}", db.name))
            .expect("the plain database goes");
        admin
            .batch_execute(&format!(
                "CREATE DATABASE {} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '{locale}' LOCALE 'C.UTF-8'",
                db.name
            ))
            .ok()?;
        Some(db)
    }

    pub(crate) fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).expect("the test database answers")
    }

    pub(crate) fn address(&self) -> Address {
        Address::recognise(OsStr::new(&self.url)).unwrap().unwrap()
    }

    /// The tables in the database's public schema, sorted.
    fn tables(&self) -> Vec<String> {
        self.client()
            .query(
                "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// A fresh database with memscope's schema.
    pub(crate) fn prepared(server: &str) -> (FreshDb, Client) {
        let db = FreshDb::new(server);
        let mut client = db.client();
        assert_eq!(schema::migrate(&mut client).unwrap(), 0);
        (db, client)
    }
}

impl Drop for FreshDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = Client::connect(&self.server, NoTls) {
            // FORCE may not end another role's session (a login a test used), which the server
            // closes a moment after its client went: try again for a while.
            for _ in 0..50 {
                let dropped = admin.batch_execute(&format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    self.name
                ));
                if dropped.is_ok() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

/// Runs the real binary on `--db ADDRESS args…` in an empty folder; returns the run and
/// whether the folder stayed empty.
fn memscope_at(address: &str, args: &[&str]) -> (Run, bool) {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let out = memscope_cmd(home.path())
        .current_dir(cwd.path())
        .arg("--db")
        .arg(address)
        .args(args)
        .output()
        .expect("memscope runs");
    let empty = std::fs::read_dir(cwd.path()).unwrap().count() == 0;
    (Run::from_output(out), empty)
}

/// The binary fails with exit 1 and one sentence holding `words`, repeats no password, and
/// creates nothing where the address would be a path.
#[track_caller]
fn refused(address: &str, args: &[&str], words: &[&str]) -> String {
    let (run, empty) = memscope_at(address, args);
    assert_eq!(run.code, 1, "{address} {args:?}: {run:?}");
    assert_one_sentence(&run.stderr, words);
    assert!(
        run.stderr.contains("PostgreSQL address"),
        "names the PostgreSQL address: {}",
        run.stderr
    );
    if let Some(pw) = address
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .and_then(|(creds, _)| creds.split_once(':'))
        .map(|(_, pw)| pw)
    {
        assert!(
            !run.stderr.contains(pw),
            "repeats the password: {}",
            run.stderr
        );
    }
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(empty, "created something in the working folder");
    run.stderr
}

fn db_error(e: &::postgres::Error) -> (SqlState, String) {
    let db = e
        .as_db_error()
        .unwrap_or_else(|| panic!("not a server error: {e}"));
    (db.code().clone(), db.message().to_string())
}

/// `sql` run by a raw client fails with `code` and a message holding `words`.
#[track_caller]
fn raw_refused(client: &mut Client, sql: &str, code: SqlState, words: &str) {
    let e = client
        .batch_execute(sql)
        .expect_err(&format!("the server refuses: {sql}"));
    let (got, message) = db_error(&e);
    assert_eq!(got, code, "{sql}: {message}");
    assert!(message.contains(words), "{sql}: {message}");
}

#[test]
fn addresses_are_recognised_and_never_show_their_password() {
    for text in [
        "postgres://agent:s3cret@db.example:5432/memory",
        "postgresql://agent:s3cret@db.example/memory",
        "PostgreSQL://agent:s3cret@db.example/memory",
    ] {
        assert!(pg::is_address(OsStr::new(text)), "{text}");
        let address = Address::recognise(OsStr::new(text)).unwrap().unwrap();
        assert_eq!(address.describe(), "agent@db.example:5432/memory");
        assert!(!format!("{address:?}").contains("s3cret"));
    }
    for path in ["memory.db", "/tmp/postgres/memory.db", "./postgres:/x.db"] {
        assert!(!pg::is_address(OsStr::new(path)), "{path}");
        assert!(Address::recognise(OsStr::new(path)).is_none(), "{path}");
    }
    for (text, words) in [
        (
            "postgres://agent:s3cret@db:notaport/memory",
            "cannot be read",
        ),
        ("postgres://agent:s3cret@db.example:5432", "no database"),
        ("postgres://db.example:5432/memory", "no user"),
        // An unescaped @ in the password: no part of it is repeated as a host.
        ("postgres://agent:s3@cret@db.example/memory", "%40"),
        // The // forgotten: refused, never a file named after the password.
        ("postgres:/agent:s3cret@db.example/memory", "without the //"),
        ("PostgreSQL:agent:s3cret@db/memory", "without the //"),
    ] {
        let e = Address::recognise(OsStr::new(text))
            .unwrap()
            .expect_err(text)
            .to_string();
        assert!(e.contains(words), "{text}: {e}");
        assert!(!e.contains("s3cret") && !e.contains("cret@"), "{e}");
    }
    // A server older than 13 is refused in one sentence (the test server is newer).
    let address = Address::recognise(OsStr::new("postgres://a@h:5433/d"))
        .unwrap()
        .unwrap();
    let e = pg::require_version(&address, 120_011)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("PostgreSQL 12") && e.contains("13 or newer") && e.contains("h:5433"),
        "{e}"
    );
    assert!(pg::require_version(&address, 130_000).is_ok());
}

#[test]
fn each_connection_failure_is_one_sentence_and_creates_nothing() {
    let Some(server) = server() else { return };
    let db = FreshDb::new(&server);
    let password = password_of(&db.url);

    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let closed = format!("postgres://memscope_test:{password}@127.0.0.1:{port}/memory");
    for args in [&["init"][..], &["list"], WRITE] {
        refused(
            &closed,
            args,
            &["connection refused", &format!("127.0.0.1:{port}")],
        );
    }

    // A wrong password, for the right user.
    let wrong = db
        .url
        .replace(&format!(":{password}@"), ":not-the-password@");
    refused(
        &wrong,
        &["init"],
        &["refused the password", "memscope_test"],
    );
    // No password at all, where the server asks for one.
    let none = db.url.replace(&format!(":{password}@"), "@");
    refused(&none, &["init"], &["password"]);

    // A database that does not exist: named, and not created.
    let missing_name = format!("{}_missing", db.name);
    let missing = with_database(&db.url, &missing_name);
    refused(&missing, &["init"], &["does not exist", &missing_name]);
    let exists: bool = Client::connect(&server, NoTls)
        .unwrap()
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
            &[&missing_name],
        )
        .unwrap()
        .get(0);
    assert!(!exists, "the missing database was created");

    // Malformed addresses, before any connection.
    refused(
        &format!("postgres://memscope_test:{password}@127.0.0.1:notaport/x"),
        &["init"],
        &[
            "cannot be read",
            "postgres://USER:PASSWORD@HOST:PORT/DATABASE",
        ],
    );
    refused(
        &format!("postgresql://memscope_test:{password}@127.0.0.1:{port}"),
        &["list"],
        &["no database"],
    );

    // Something that answers but is not PostgreSQL.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = listener.local_addr().unwrap().port();
    let answering = std::thread::spawn(move || {
        use std::io::{Read, Write};
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    refused(
        &format!("postgres://memscope_test:{password}@127.0.0.1:{http}/x"),
        &["init"],
        &["does not speak PostgreSQL", &format!("127.0.0.1:{http}")],
    );
    answering.join().unwrap();

    // None of the refused attempts wrote into the one database that exists.
    assert!(db.tables().is_empty(), "{:?}", db.tables());
}

/// A server (or proxy, or tunnel) that takes the connection and then says nothing: the
/// driver's `connect_timeout` bounds only the socket's connect, memscope bounds the whole
/// handshake by it too. Needs no PostgreSQL server.
#[test]
fn a_server_that_never_answers_the_handshake_is_given_up_in_one_sentence() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let silent = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => held.push(s),
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
                }
            }
        })
    };
    let address = format!("postgres://memscope_test:s3cret@127.0.0.1:{port}/x?connect_timeout=1");
    let started = std::time::Instant::now();
    let run =
        std::thread::spawn(move || refused(&address, &["list"], &["did not finish connecting"]));
    while !run.is_finished() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "memscope still waits for a silent server after a minute"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let said = run.join().expect("refused in one sentence");
    assert!(said.contains(&format!("127.0.0.1:{port}")), "{said}");
    // The time the address allowed, as the user wrote it.
    assert!(said.contains("within 1 s"), "{said}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "{said}"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    silent.join().unwrap();
}

#[test]
fn init_creates_the_schema_once_with_its_version_row_and_defaults() {
    let Some(server) = server() else { return };
    let db = FreshDb::new(&server);
    let (run, empty) = memscope_at(&db.url, &["init"]);
    let run = run.ok();
    assert!(empty);
    assert!(
        run.stdout.contains(&format!(
            "created memscope's PostgreSQL schema {}",
            schema::SCHEMA_VERSION
        )) && run
            .stdout
            .contains("every command runs on it, the terminal UI included"),
        "{run:?}"
    );
    assert!(!run.stdout.contains(&password_of(&db.url)));
    let mut expected: Vec<String> = schema::TABLES.iter().map(|t| t.to_string()).collect();
    expected.sort();
    assert_eq!(db.tables(), expected);

    let counts = |client: &mut Client| -> (i64, i64, i64, i64) {
        let r = client
            .query_one(
                "SELECT (SELECT count(*) FROM memscope_schema),
                        (SELECT max(version) FROM memscope_schema),
                        (SELECT count(*) FROM predicate_aliases),
                        (SELECT count(*) FROM settings)",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1), r.get(2), r.get(3))
    };
    let mut client = db.client();
    let aliases = memscope::store::default_aliases().unwrap().len() as i64;
    assert!(aliases > 0);
    let first = counts(&mut client);
    assert_eq!(first, (1, schema::SCHEMA_VERSION, aliases, 3));
    let clock: String = client
        .query_one("SELECT value FROM settings WHERE key = 'causal_clock'", &[])
        .unwrap()
        .get(0);
    assert_eq!(clock, "0");

    // Again: nothing changes, and it says so.
    let again = memscope_at(&db.url, &["init"]).0.ok();
    assert!(
        again.stdout.contains(&format!(
            "already holds memscope's PostgreSQL schema {}",
            schema::SCHEMA_VERSION
        )),
        "{again:?}"
    );
    assert_eq!(counts(&mut client), first);
    assert_eq!(
        schema::migrate(&mut client).unwrap(),
        schema::SCHEMA_VERSION
    );
    assert_eq!(schema::state(&mut client).unwrap(), schema::State::Current);
    assert_eq!(counts(&mut client), first);

    // `demo`, which builds a SQLite file, connects, then says the truth: it needs a file.
    let said = refused(
        &db.url,
        &["demo", "--no-tui"],
        &[
            "holds a memscope schema",
            "builds a SQLite file",
            "every other command runs on PostgreSQL",
            "file path with --db",
        ],
    );
    assert!(said.contains(&db.name), "{said}");
    assert!(
        said.contains(&format!("PostgreSQL schema {}", schema::SCHEMA_VERSION)),
        "{said}"
    );
    // Through MEMSCOPE_DB as well, and on an empty database it points at `init`.
    let empty_db = FreshDb::new(&server);
    let home = tempfile::tempdir().unwrap();
    let out = memscope_cmd(home.path())
        .env("MEMSCOPE_DB", &empty_db.url)
        .arg("list")
        .output()
        .unwrap();
    let run = Run::from_output(out);
    run.fails_with(1, &["holds no memscope schema yet", "init"]);
    assert!(empty_db.tables().is_empty());
    assert_eq!(counts(&mut client), first);
}

#[test]
fn processes_preparing_one_database_at_once_prepare_it_once() {
    let Some(server) = server() else { return };
    let db = FreshDb::new(&server);
    let address = db.address();
    let found: Vec<pg::Prepared> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| pg::prepare(&address).unwrap()))
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(
        found
            .iter()
            .filter(|p| **p == pg::Prepared::Created { from: 0 })
            .count(),
        1,
        "{found:?}"
    );
    assert_eq!(
        found
            .iter()
            .filter(|p| **p
                == pg::Prepared::UpToDate {
                    restored_guards: false
                })
            .count(),
        3,
        "{found:?}"
    );
    let rows: i64 = db
        .client()
        .query_one("SELECT count(*) FROM memscope_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
}

#[test]
fn migrations_run_forward_in_one_transaction_and_a_newer_schema_is_refused() {
    let Some(server) = server() else { return };
    let noop = |_: &mut ::postgres::Transaction<'_>, _: i64| Ok(());

    // A step that fails leaves nothing: the steps before it are rolled back with it.
    let db = FreshDb::new(&server);
    let mut client = db.client();
    let broken = [
        schema::MIGRATIONS[0],
        "ALTER TABLE no_such_table ADD COLUMN x text",
    ];
    assert!(schema::migrate_with(&mut client, &broken, &noop).is_err());
    assert!(db.tables().is_empty(), "{:?}", db.tables());

    // v1, then this build's steps on the v1 database (v3 replaces the purge gate).
    assert_eq!(
        schema::migrate_with(&mut client, &schema::MIGRATIONS[..1], &noop).unwrap(),
        0
    );
    assert_eq!(schema::state(&mut client).unwrap(), schema::State::Older(1));
    assert_eq!(schema::migrate(&mut client).unwrap(), 1);
    assert_eq!(schema::state(&mut client).unwrap(), schema::State::Current);
    let gate: bool = client
        .query_one(
            "SELECT prosrc LIKE '%memscope_may_purge%' FROM pg_proc WHERE proname = 'memscope_history_append_only'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(gate, "v3 replaced the history guard");
    // Brought forward step by step, the guards are what check expects of a new database.
    let report = AnyStore::open(Path::new(&db.url), OpenMode::Existing)
        .unwrap()
        .check(IntegrityMode::Quick)
        .unwrap();
    assert_eq!(report.metrics["schema_guards"], "present", "{report:?}");

    // A later step runs on a database of this build's schema, and the version row follows.
    let now = schema::SCHEMA_VERSION;
    let later: Vec<schema::Migration> = schema::MIGRATIONS
        .iter()
        .copied()
        .chain(["ALTER TABLE memories ADD COLUMN later text"])
        .collect();
    let steps = std::cell::RefCell::new(Vec::new());
    let found = schema::migrate_with(&mut client, &later, &|_, v| {
        steps.borrow_mut().push(v);
        Ok(())
    })
    .unwrap();
    assert_eq!(found, now);
    assert_eq!(*steps.borrow(), vec![now + 1]);
    let version: i64 = client
        .query_one("SELECT version FROM memscope_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, now + 1);
    client
        .execute("SELECT later FROM memories", &[])
        .expect("the later step's column");

    // This build does not know that step: it refuses the database, touching nothing.
    let e = schema::migrate(&mut client).unwrap_err().to_string();
    assert!(e.contains("newer than this memscope understands"), "{e}");
    assert_eq!(
        schema::state(&mut client).unwrap(),
        schema::State::Newer(now + 1)
    );
    let newer = format!("schema {}", now + 1);
    refused(&db.url, &["init"], &[&newer, "newer"]);
    refused(&db.url, &["list"], &[&newer, "newer"]);
    let version: i64 = client
        .query_one("SELECT version FROM memscope_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, now + 1);
}

/// `reads_by_identity`'s definition, as the server holds it.
fn reads_index(client: &mut Client) -> String {
    client
        .query_one(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'reads_by_identity'",
            &[],
        )
        .unwrap()
        .get(0)
}

/// PostgreSQL schema 10: the read log is indexed by digests of the subject and predicate, so a
/// logged read of a name kilobytes long is logged — schema 9, whose index held them whole,
/// refused it (found by review; a read names whatever it asks for). A schema 9 database is
/// brought forward keeping its reads, which the new index finds.
#[test]
fn schema_10_logs_a_read_of_a_long_name_and_migrates_a_schema_9_read_log() {
    let Some(server) = server() else { return };
    let noop = |_: &mut ::postgres::Transaction<'_>, _: i64| Ok(());
    let db = FreshDb::new(&server);
    let mut client = db.client();
    assert_eq!(
        schema::migrate_with(&mut client, &schema::MIGRATIONS[..9], &noop).unwrap(),
        0
    );
    assert_eq!(schema::state(&mut client).unwrap(), schema::State::Older(9));
    let def = reads_index(&mut client);
    assert!(
        def.ends_with("USING btree (subject, predicate, at)"),
        "{def}"
    );
    let insert = "INSERT INTO reads (at, agent, subject, predicate, scope, version)
                  VALUES (now(), 'tester', $1, $2, NULL, NULL)";
    client.execute(insert, &[&"user:42", &"editor"]).unwrap();
    let long = format!("u:{}", crate::support::incompressible(4_000, 5));
    // What schema 9 did with a long name: its index refused the row.
    let e = client.execute(insert, &[&long, &"editor"]).unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::PROGRAM_LIMIT_EXCEEDED), "{e}");

    assert_eq!(schema::migrate(&mut client).unwrap(), 9);
    assert_eq!(schema::state(&mut client).unwrap(), schema::State::Current);
    let def = reads_index(&mut client);
    assert!(
        def.ends_with("USING btree (md5(subject), md5(predicate), at)"),
        "{def}"
    );
    let mut store = pg::PgStore::open(&db.address()).unwrap();
    let r = store
        .resolve_logged(&long, "editor", None, None, Some("tester"), Some("笔记 📝"))
        .unwrap();
    assert_eq!((r.subject.as_str(), r.value), (long.as_str(), None));
    let predicate = crate::support::incompressible(3_000, 6);
    store
        .resolve_logged("user:42", &predicate, None, None, Some("tester"), None)
        .unwrap();
    let reads = |store: &mut pg::PgStore, subject: Option<&str>, predicate: Option<&str>| {
        let filter = memscope::store::ReadFilter {
            subject: subject.map(str::to_string),
            predicate: predicate.map(str::to_string),
            ..Default::default()
        };
        store
            .reads(&filter)
            .unwrap()
            .into_iter()
            .map(|r| (r.subject, r.predicate, r.note))
            .collect::<Vec<_>>()
    };
    let row = |s: &str, p: &str, note: Option<&str>| {
        (s.to_string(), p.to_string(), note.map(str::to_string))
    };
    // The read schema 9 logged, found by the new index; the long names, compared whole.
    assert_eq!(
        reads(&mut store, Some("user:42"), None),
        [
            row("user:42", &predicate, None),
            row("user:42", "editor", None)
        ]
    );
    assert_eq!(
        reads(&mut store, Some("user:42"), Some("editor")),
        [row("user:42", "editor", None)]
    );
    assert_eq!(
        reads(&mut store, Some(&long), None),
        [row(&long, "editor", Some("笔记 📝"))]
    );
    assert_eq!(
        reads(&mut store, None, Some(&predicate)),
        [row("user:42", &predicate, None)]
    );
    assert_eq!(reads(&mut store, None, None).len(), 3);
    let report = AnyStore::open(Path::new(&db.url), OpenMode::Existing)
        .unwrap()
        .check(IntegrityMode::Quick)
        .unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.metrics["schema_guards"], "present", "{report:?}");
    assert_eq!(report.metrics["ids_past_limit"], 0, "{report:?}");
}

#[test]
fn a_database_with_foreign_tables_of_memscope_names_is_refused() {
    let Some(server) = server() else { return };
    let db = FreshDb::new(&server);
    let mut client = db.client();
    client
        .batch_execute("CREATE TABLE memories (note text); CREATE TABLE unrelated (x int)")
        .unwrap();
    refused(&db.url, &["init"], &["did not create", "memories"]);
    refused(&db.url, &["list"], &["did not create", "memories"]);
    assert_eq!(db.tables(), vec!["memories", "unrelated"]);
    // A database with only other tables is fine to prepare.
    let other = FreshDb::new(&server);
    other
        .client()
        .batch_execute("CREATE TABLE unrelated (x int)")
        .unwrap();
    memscope_at(&other.url, &["init"]).0.ok();
    assert!(other.tables().contains(&"memories".to_string()));
}

/// A `memscope write` of one memory.
const WRITE: &[&str] = &[
    "write",
    "--subject",
    "user:42",
    "--predicate",
    "pm",
    "--value",
    "pnpm",
    "--scope",
    "global",
    "--source",
    "t",
];

const INSERT_MEMORY: &str = "INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 1, 'raw:client', 1, now(), now())";

fn insert_memory(
    client: &mut Client,
    subject: &str,
    predicate: &str,
    scope: &str,
) -> Result<u64, ::postgres::Error> {
    client.execute(INSERT_MEMORY, &[&subject, &predicate, &scope, &"\"npm\""])
}

#[test]
fn the_guards_refuse_a_raw_client() {
    let Some(server) = server() else { return };
    let (_db, mut c) = FreshDb::prepared(&server);
    let guard = SqlState::INTEGRITY_CONSTRAINT_VIOLATION;

    // The identity is unique.
    insert_memory(&mut c, "user:42", "package_manager", "global").unwrap();
    let e = insert_memory(&mut c, "user:42", "package_manager", "global").unwrap_err();
    assert_eq!(db_error(&e).0, SqlState::UNIQUE_VIOLATION);
    // The CHECKs of the contract.
    for (subject, scope) in [
        ("", "global"),
        ("user:42", "repo:"),
        ("user:42", "team:web"),
        ("user:42", "Global"),
    ] {
        let e = insert_memory(&mut c, subject, "coffee", scope).unwrap_err();
        assert_eq!(
            db_error(&e).0,
            SqlState::CHECK_VIOLATION,
            "{subject:?} {scope:?}"
        );
    }

    // A tombstone only where no record is: memscope's delete removes the record first.
    let tomb = "INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at)
                VALUES ('user:42', 'package_manager', 'global', 2, 'test', now())";
    raw_refused(&mut c, tomb, guard.clone(), "memscope delete");
    c.batch_execute("DELETE FROM memories WHERE subject = 'user:42'")
        .unwrap();
    c.batch_execute(tomb).unwrap();

    // Nothing becomes current on a tombstoned identity: not inserted …
    let e = insert_memory(&mut c, "user:42", "package_manager", "global").unwrap_err();
    assert_eq!(
        db_error(&e),
        (
            guard.clone(),
            "memscope: identity is tombstoned; restore it first".into()
        )
    );
    // … nor moved onto it by an update.
    insert_memory(&mut c, "user:42", "package_manager", "repo:web-app").unwrap();
    raw_refused(
        &mut c,
        "UPDATE memories SET scope = 'global' WHERE scope = 'repo:web-app'",
        guard.clone(),
        "tombstoned",
    );
    // No content is logged against it; a content-free event is.
    for (column, content) in [("value", "'\"npm\"'"), ("raw", "'use npm'")] {
        raw_refused(
            &mut c,
            &format!(
                "INSERT INTO history (event, subject, predicate, scope, {column}, at)
                 VALUES ('set', 'user:42', 'package_manager', 'global', {content}, now())"
            ),
            guard.clone(),
            "its content may not be stored",
        );
    }
    c.batch_execute(
        "INSERT INTO history (event, subject, predicate, scope, at)
         VALUES ('rejected', 'user:42', 'package_manager', 'global', now())",
    )
    .unwrap();

    // A tombstone's version only rises, and it stays on its identity.
    raw_refused(
        &mut c,
        "UPDATE tombstones SET version = 1",
        guard.clone(),
        "never goes down",
    );
    raw_refused(
        &mut c,
        "UPDATE tombstones SET scope = 'repo:x'",
        guard.clone(),
        "never goes down",
    );
    c.batch_execute("UPDATE tombstones SET version = 3")
        .unwrap();
    // Lifting it (memscope restore) makes the identity writable again.
    c.batch_execute("DELETE FROM tombstones").unwrap();
    insert_memory(&mut c, "user:42", "package_manager", "global").unwrap();

    // History is append-only for every statement that would rewrite it …
    c.batch_execute(
        "INSERT INTO history (event, subject, predicate, scope, value, raw, at)
         VALUES ('set', 'user:42', 'package_manager', 'global', '\"npm\"', 'use npm', now())",
    )
    .unwrap();
    for sql in [
        "UPDATE history SET value = '\"pnpm\"'",
        "UPDATE history SET raw = NULL WHERE raw IS NOT NULL",
        "DELETE FROM history",
        "TRUNCATE history",
        "INSERT INTO history (id, event, subject, predicate, scope, at)
         SELECT id, 'set', subject, predicate, scope, at FROM history
         ON CONFLICT (id) DO UPDATE SET event = 'forged'",
    ] {
        raw_refused(
            &mut c,
            sql,
            guard.clone(),
            "memscope: history is append-only",
        );
    }
    let e = c
        .batch_execute("INSERT INTO history (id, event, subject, predicate, scope, at) SELECT id, 'set', subject, predicate, scope, at FROM history")
        .unwrap_err();
    assert_eq!(
        db_error(&e).0,
        SqlState::UNIQUE_VIOLATION,
        "ids are never reused"
    );
    let count = |c: &mut Client| -> i64 {
        c.query_one("SELECT count(*) FROM history", &[])
            .unwrap()
            .get(0)
    };
    assert_eq!(count(&mut c), 2);

    // … except inside a transaction that opened memscope's purge gate; the gate closes with it.
    let mut tx = c.transaction().unwrap();
    tx.batch_execute(&format!("SET LOCAL {} = 'on'", schema::PURGE_SETTING))
        .unwrap();
    tx.batch_execute("UPDATE history SET value = NULL, raw = NULL WHERE event = 'set'")
        .unwrap();
    tx.batch_execute("DELETE FROM history WHERE event = 'rejected'")
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(count(&mut c), 1);
    let kept: (Option<String>, Option<String>) = {
        let r = c.query_one("SELECT value, raw FROM history", &[]).unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(kept, (None, None));
    raw_refused(&mut c, "DELETE FROM history", guard.clone(), "append-only");
    // A session-wide setting other than 'on' does not open it.
    c.batch_execute("SET memscope.purge = 'yes'").unwrap();
    raw_refused(&mut c, "DELETE FROM history", guard, "append-only");
}

#[test]
fn a_tombstone_and_a_record_committed_at_once_cannot_both_land() {
    let Some(server) = server() else { return };
    let (db, mut first) = FreshDb::prepared(&server);
    let mut second = db.client();
    // The first transaction tombstones the identity and holds its lock, uncommitted.
    let mut tx = first.transaction().unwrap();
    tx.batch_execute(
        "INSERT INTO tombstones (subject, predicate, scope, version, deleted_at)
         VALUES ('user:7', 'coffee', 'global', 1, now())",
    )
    .unwrap();
    // The second inserts the record meanwhile: it waits for the lock, then sees the tombstone.
    let writer = std::thread::spawn(move || {
        let r = insert_memory(&mut second, "user:7", "coffee", "global");
        r.map_err(|e| db_error(&e))
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !writer.is_finished(),
        "the record waits for the identity's lock"
    );
    tx.commit().unwrap();
    let (code, message) = writer.join().unwrap().unwrap_err();
    assert_eq!(code, SqlState::INTEGRITY_CONSTRAINT_VIOLATION);
    assert!(message.contains("tombstoned"), "{message}");
}

#[test]
fn chinese_emoji_and_very_long_text_round_trip() {
    let Some(server) = server() else { return };
    let (_db, mut c) = FreshDb::prepared(&server);
    let subject = "用户:42";
    let scope = "repo:网页-app🚀";
    let value =
        serde_json::to_string("这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。👨‍👩‍👧 ❤️")
            .unwrap();
    let raw: String = "以后都用 npm 👍🏽 — café\u{301} 𝄞 ".repeat(40_000); // ~1.3 MB
    assert!(raw.len() > 1_000_000);
    c.execute(
        "INSERT INTO memories (subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at)
         VALUES ($1, '包管理器', $2, $3, 1, 'thread:中文/message:1', $4, 1, now(), now())",
        &[&subject, &scope, &value, &raw],
    )
    .unwrap();
    c.execute(
        "INSERT INTO history (event, subject, predicate, scope, version, value, raw, source, at, detail)
         VALUES ('set', $1, '包管理器', $2, 1, $3, $4, 'thread:中文/message:1', now(), '{\"note\":\"🙂\"}')",
        &[&subject, &scope, &value, &raw],
    )
    .unwrap();
    let candidates = serde_json::to_string(&[scope, "global"]).unwrap();
    c.execute(
        "INSERT INTO pending (subject, predicate, value, raw, source, causal_seq, candidates, created_at)
         VALUES ($1, '包管理器', $2, $3, 's', 2, $4, now())",
        &[&subject, &value, &raw, &candidates],
    )
    .unwrap();
    c.execute(
        "INSERT INTO spellings (kind, folded, spelling) VALUES ('scope', lower($1), $1)",
        &[&scope],
    )
    .unwrap();
    for (sql, what) in [
        (
            "SELECT subject, scope, value, raw FROM memories",
            "memories",
        ),
        ("SELECT subject, scope, value, raw FROM history", "history"),
    ] {
        let r = c.query_one(sql, &[]).unwrap();
        let got: (String, String, String, String) = (r.get(0), r.get(1), r.get(2), r.get(3));
        assert_eq!(got.0, subject, "{what}");
        assert_eq!(got.1, scope, "{what}");
        assert_eq!(got.2, value, "{what}");
        assert!(got.3 == raw, "{what}: the long raw text came back changed");
    }
    let r = c
        .query_one("SELECT value, raw, candidates FROM pending", &[])
        .unwrap();
    let (v, w, k): (String, String, String) = (r.get(0), r.get(1), r.get(2));
    assert!(v == value && w == raw && k == candidates);
    let spelling: String = c
        .query_one("SELECT spelling FROM spellings", &[])
        .unwrap()
        .get(0);
    assert_eq!(spelling, scope);
    // A pending item's candidates must be a JSON array of at least one.
    for bad in ["[]", "\"global\"", "not json"] {
        let e = c
            .execute(
                "INSERT INTO pending (subject, predicate, value, source, causal_seq, candidates, created_at)
                 VALUES ('u', 'p', '1', 's', 1, $1, now())",
                &[&bad],
            )
            .unwrap_err();
        assert!(e.as_db_error().is_some(), "{bad}: {e}");
    }
}

#[test]
fn a_role_that_may_not_create_tables_is_told_so_and_nothing_is_created() {
    let Some(server) = server() else { return };
    // A role that may connect but not create in `public` (PostgreSQL 15's default for a role
    // that does not own the database).
    let role = format!(
        "memscope_reader_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    // Roles belong to the whole server: this one goes when the test ends, passed or not.
    struct DropRole<'a>(&'a str, String);
    impl Drop for DropRole<'_> {
        fn drop(&mut self) {
            if let Ok(mut admin) = Client::connect(self.0, NoTls) {
                let _ = admin.batch_execute(&format!("DROP ROLE IF EXISTS {}", self.1));
            }
        }
    }
    // Declared before the database, so it is dropped after it (the grant goes with the database).
    let _role = DropRole(&server, role.clone());
    let db = FreshDb::new(&server);
    let mut owner = db.client();
    owner
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD 'reader-pw';
             GRANT CONNECT ON DATABASE {} TO {role};
             REVOKE CREATE ON SCHEMA public FROM PUBLIC;",
            db.name
        ))
        .unwrap();
    let (_, rest) = db.url.split_once('@').unwrap();
    let reader = format!("postgres://{role}:reader-pw@{rest}");
    let said = refused(
        &reader,
        &["init"],
        &["may not create", &role, "GRANT CREATE"],
    );
    assert!(!said.contains("reader-pw"), "{said}");
    assert!(db.tables().is_empty(), "{:?}", db.tables());
}

#[test]
fn a_schema_named_after_the_login_does_not_hide_memscope_behind_an_empty_second_memory() {
    let Some(server) = server() else { return };
    let (db, mut client) = FreshDb::prepared(&server);
    let (run, _) = memscope_at(
        &db.url,
        &[
            "write",
            "--subject",
            "用户:1",
            "--predicate",
            "editor",
            "--value",
            "helix",
            "--scope",
            "global",
            "--source",
            "s",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    // PostgreSQL's own per-user pattern: a schema named after the login comes first on the
    // default search_path ("$user", public).
    client
        .batch_execute("CREATE SCHEMA AUTHORIZATION CURRENT_USER")
        .unwrap();
    for args in [&["list"][..], &["init"][..]] {
        let (run, _) = memscope_at(&db.url, args);
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        assert_one_sentence(
            &run.stderr,
            &["tables are in schema \"public\"", "search_path%3Dpublic"],
        );
    }
    // Nothing was prepared in the login's schema; the address the sentence names works.
    let made: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = current_user",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(made, 0);
    let pointed = format!("{}?options=-csearch_path%3Dpublic", db.url);
    let (run, _) = memscope_at(&pointed, &["list", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("用户:1"), "{}", run.stdout);
}
