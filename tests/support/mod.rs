//! Shared helpers for the integration tests, one module for every test binary (each binary's
//! `main.rs` includes it with `#[path = "../support/mod.rs"] mod support;`): a database in a
//! temporary directory, the real `memscope` binary, a Python `sqlite3` client, raw-byte searches
//! over the database files; a raw JSON-RPC session with `memscope mcp` (`mcp_session`), a
//! terminal in tmux (`tmux`), the long-running tests' knobs and PRNG (`reliability`), the UI
//! fixture (`tui`), a PostgreSQL cluster of a test's own (`pg_cluster`) and network hosts made of
//! network namespaces (`netns`).
#![allow(dead_code)]

pub mod mcp_session;
pub mod netns;
pub mod pg_cluster;
pub mod relay;
pub mod reliability;
pub mod tmux;
pub mod tui;

use memscope::{OpenMode, ScopeChoice, Store, WriteRequest};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_memscope");

/// A finished process: exit code and its two streams.
#[derive(Debug, Clone)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from_output(o: std::process::Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Asserts exit 0 and returns self.
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "expected exit 0\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    /// stdout as one JSON document.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e})\nstdout: {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    /// stdout as JSON Lines.
    #[track_caller]
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("outcome line is not JSON ({e}): {l}"))
            })
            .collect()
    }

    /// The complete JSON lines of stdout: a torn last line (of a killed process) and lines that
    /// are not JSON are skipped.
    pub fn complete_json_lines(&self) -> Vec<Value> {
        reliability::json_lines(&self.stdout)
    }

    /// Asserts that the process failed with `code` and said so in one line on stderr that
    /// contains every one of `words` (case-insensitive).
    #[track_caller]
    pub fn fails_with(&self, code: i32, words: &[&str]) {
        assert_eq!(
            self.code, code,
            "expected exit {code}\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        assert_one_sentence(&self.stderr, words);
    }
}

/// stderr holds exactly one non-empty line that mentions every one of `words`.
#[track_caller]
pub fn assert_one_sentence(stderr: &str, words: &[&str]) {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one sentence on stderr, got {} line(s):\n{stderr}",
        lines.len()
    );
    let lower = lines[0].to_lowercase();
    for w in words {
        assert!(
            lower.contains(&w.to_lowercase()),
            "stderr should mention {w:?}: {stderr}"
        );
    }
}

/// A `memscope` command with a clean, test-controlled environment.
pub fn memscope_cmd(home: &Path) -> Command {
    let mut c = Command::new(BIN);
    clean_env(&mut c, home);
    c
}

/// The environment every test runs memscope in: invariant assertions on, no database or busy
/// timeout from the caller's environment, `home` as HOME (and its `xdg` as XDG_DATA_HOME), no
/// colour, nothing on stdin.
pub fn clean_env(c: &mut Command, home: &Path) {
    c.env("MEMSCOPE_ASSERT_INVARIANTS", "1")
        .env_remove("MEMSCOPE_DB")
        .env_remove("MEMSCOPE_BUSY_TIMEOUT_MS")
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("xdg"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
}

/// Spawns `c` with nothing on stdin and both output streams piped (drain them with [`drain`]).
pub fn spawn_piped(c: &mut Command, what: &str) -> Child {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Reads a child's stream to its end on a thread of its own, so that a child with a lot to say
/// cannot block on a full pipe.
pub fn drain(r: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        buf
    })
}

/// A database path in its own temporary directory (the file is not created).
pub struct TestDb {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Default for TestDb {
    fn default() -> Self {
        Self::new()
    }
}

impl TestDb {
    pub fn new() -> TestDb {
        Self::named("memory.db")
    }

    pub fn named(name: &str) -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(name);
        TestDb { dir, path }
    }

    /// A database at `path` (whose directory the caller owns); `dir` is a scratch directory.
    pub fn at(path: PathBuf) -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        TestDb { dir, path }
    }

    pub fn path_str(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }

    /// A sibling path in the same temporary directory.
    pub fn sibling(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = memscope_cmd(self.dir.path());
        c.arg("--db").arg(&self.path).args(args);
        c
    }

    /// Runs `memscope --db PATH args…`.
    pub fn run(&self, args: &[&str]) -> Run {
        Run::from_output(self.command(args).output().expect("spawn memscope"))
    }

    /// Runs with extra environment variables.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut c = self.command(args);
        for (k, v) in env {
            c.env(k, v);
        }
        Run::from_output(c.output().expect("spawn memscope"))
    }

    /// Runs with `input` on stdin.
    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Run {
        run_with_stdin(self.command(args), input)
    }

    /// `run(args)`, asserting exit 0, stdout parsed as JSON.
    #[track_caller]
    pub fn json(&self, args: &[&str]) -> Value {
        self.run(args).ok().json()
    }

    pub fn init(&self) {
        self.run(&["init"]).ok();
    }

    /// `write … --json` with an exact scope; asserts exit 0; returns the outcome.
    #[track_caller]
    pub fn write(
        &self,
        subject: &str,
        predicate: &str,
        value: &str,
        scope: &str,
        source: &str,
    ) -> Value {
        self.write_with((subject, predicate), value, scope, source, &[])
    }

    /// `write … --json` with an exact scope and `extra` arguments; asserts exit 0; returns the
    /// outcome.
    #[track_caller]
    pub fn write_with<'a>(
        &self,
        (subject, predicate): (&str, &str),
        value: impl Into<ValueArg<'a>>,
        scope: &str,
        source: &str,
        extra: &[&str],
    ) -> Value {
        let (value_flag, value) = match value.into() {
            ValueArg::Text(text) => ("--value", text),
            ValueArg::Json(json) => ("--value-json", json),
        };
        let rest = [
            value_flag, value, "--scope", scope, "--source", source, "--json",
        ];
        let mut args = args_for("write", subject, predicate, &rest);
        args.extend_from_slice(extra);
        self.json(&args)
    }

    /// `write --ambiguous …`; returns the outcome.
    #[track_caller]
    pub fn write_ambiguous(
        &self,
        subject: &str,
        predicate: &str,
        value: &str,
        candidates: &str,
        source: &str,
        raw: &str,
    ) -> Value {
        self.json(&args_for(
            "write",
            subject,
            predicate,
            &[
                "--value",
                value,
                "--ambiguous",
                candidates,
                "--source",
                source,
                "--raw",
                raw,
                "--json",
            ],
        ))
    }

    /// The story's ambiguous "以后都用 npm" (thread 31): global, or the rule of repo:web-app?
    #[track_caller]
    pub fn ask_npm(&self) -> Value {
        self.write_ambiguous(
            "user:42",
            "package_manager",
            "npm",
            "global,repo:web-app",
            "thread:31/message:2",
            "以后都用 npm",
        )
    }

    /// `delete --subject S --predicate P --scope SCOPE --json`; asserts exit 0; returns the report.
    #[track_caller]
    pub fn delete(&self, subject: &str, predicate: &str, scope: &str) -> Value {
        self.json(&args_for(
            "delete",
            subject,
            predicate,
            &["--scope", scope, "--json"],
        ))
    }

    /// `rescope --subject S --predicate P --scope FROM --to TO --json`; asserts exit 0; returns
    /// the report.
    #[track_caller]
    pub fn rescope(&self, subject: &str, predicate: &str, from: &str, to: &str) -> Value {
        self.json(&args_for(
            "rescope",
            subject,
            predicate,
            &["--scope", from, "--to", to, "--json"],
        ))
    }

    /// The first article's two writes: `user:42 package_manager` is `pnpm` at global (thread 17,
    /// with the sentence that said it) and `npm` in repo:legacy-dashboard (thread 23).
    pub fn write_the_first_article(&self) {
        self.write_first_default();
        self.write(
            "user:42",
            "package_manager",
            "npm",
            "repo:legacy-dashboard",
            "thread:23/message:14",
        );
    }

    /// The first article's default: `user:42 package_manager` is `pnpm` at global, said in
    /// thread 17 as [`FIRST_RAW`]; returns the outcome.
    #[track_caller]
    pub fn write_first_default(&self) -> Value {
        self.write_with(
            ("user:42", "package_manager"),
            "pnpm",
            "global",
            "thread:17/message:86",
            &["--raw", FIRST_RAW],
        )
    }

    /// `list --json` with optional filters.
    #[track_caller]
    pub fn list(&self, filters: &[&str]) -> Vec<Value> {
        let mut args = vec!["list", "--json"];
        args.extend_from_slice(filters);
        as_array(self.json(&args))
    }

    /// `history --json`.
    #[track_caller]
    pub fn history(&self, subject: &str, predicate: &str, scope: Option<&str>) -> Vec<Value> {
        let mut args = args_for("history", subject, predicate, &["--json"]);
        if let Some(s) = scope {
            args.push("--scope");
            args.push(s);
        }
        as_array(self.json(&args))
    }

    /// `resolve --json`, in the context `context` (e.g. `&["--repo", "web-app"]`, or none).
    #[track_caller]
    pub fn resolve(&self, subject: &str, predicate: &str, context: &[&str]) -> Value {
        let mut args = args_for("resolve", subject, predicate, &["--json"]);
        args.extend_from_slice(context);
        self.json(&args)
    }

    /// `pending --json` (open items; `--all` for every item).
    #[track_caller]
    pub fn pending(&self, all: bool) -> Vec<Value> {
        let mut args = vec!["pending", "--json"];
        if all {
            args.push("--all");
        }
        as_array(self.json(&args))
    }

    /// `pending resolve ID --scope SCOPE --json`, whatever its exit code.
    pub fn resolve_pending(&self, id: &str, scope: &str) -> Run {
        self.run(&["pending", "resolve", id, "--scope", scope, "--json"])
    }

    /// `seq`: a fresh causal sequence number.
    #[track_caller]
    pub fn seq(&self) -> i64 {
        let out = self.run(&["seq"]).ok().stdout;
        out.trim()
            .parse()
            .unwrap_or_else(|e| panic!("seq prints an integer ({e}): {out:?}"))
    }

    /// `check --json`, whatever its exit code; returns (exit code, report).
    #[track_caller]
    pub fn check(&self) -> (i32, Value) {
        let r = self.run(&["check", "--json"]);
        let v = r.json();
        (r.code, v)
    }

    /// Asserts that `check` passes; returns its report.
    #[track_caller]
    pub fn assert_check_ok(&self) -> Value {
        let (code, report) = self.check();
        assert_eq!(
            (code, &report["ok"]),
            (0, &Value::Bool(true)),
            "check failed: {report:#}"
        );
        assert_eq!(report["violations"], Value::Array(vec![]), "{report:#}");
        report
    }

    /// The whole database as exported, minus the header line (which carries a timestamp) and
    /// the end line (which counts the rows).
    #[track_caller]
    pub fn fingerprint(&self) -> Vec<String> {
        let r = self.run(&["export"]).ok();
        r.stdout
            .lines()
            .filter(|l| !l.contains("\"table\":\"memscope_export"))
            .map(str::to_string)
            .collect()
    }

    /// Paths of the database file and its WAL and shared-memory files.
    pub fn files(&self) -> [PathBuf; 3] {
        db_files(&self.path)
    }

    /// A read-only SQL connection (for assertions on the public schema).
    pub fn sql(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            &self.path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .expect("open the database read-only")
    }

    /// Whether this database is a PostgreSQL address (see [`postgres_test_db`]), not a file.
    pub fn is_postgres(&self) -> bool {
        let path = self.path.to_string_lossy().to_ascii_lowercase();
        path.starts_with("postgres://") || path.starts_with("postgresql://")
    }

    /// One integer from SQL, on either backend.
    #[track_caller]
    pub fn sql_i64(&self, sql: &str) -> i64 {
        if self.is_postgres() {
            self.pg_row(sql).get(0)
        } else {
            self.sql_one(sql)
        }
    }

    /// One text (or NULL) from SQL, on either backend.
    #[track_caller]
    pub fn sql_text(&self, sql: &str) -> Option<String> {
        if self.is_postgres() {
            self.pg_row(sql).get(0)
        } else {
            self.sql_one(sql)
        }
    }

    /// Every row `sql` returns, on either backend, each column as text or NULL: the query casts
    /// each column that is not text (`CAST(id AS TEXT)`, which both backends read alike).
    #[track_caller]
    pub fn sql_text_rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        if self.is_postgres() {
            let mut client = postgres::Client::connect(self.path_str(), postgres::NoTls)
                .expect("the test database answers");
            let rows = client
                .query(sql, &[])
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            return rows
                .iter()
                .map(|r| {
                    (0..r.len())
                        .map(|i| r.get::<_, Option<String>>(i))
                        .collect()
                })
                .collect();
        }
        let conn = self.sql();
        let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                (0..n)
                    .map(|i| r.get::<_, Option<String>>(i))
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>());
        rows.unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Runs `sql` as a client other than memscope would (past its write path), on either
    /// backend; the database's own refusal is the error.
    pub fn sql_execute(&self, sql: &str) -> Result<(), String> {
        if self.is_postgres() {
            let mut client = postgres::Client::connect(self.path_str(), postgres::NoTls)
                .expect("the test database answers");
            client.batch_execute(sql).map_err(|e| e.to_string())
        } else {
            let conn = rusqlite::Connection::open(&self.path).expect("open the database");
            conn.execute_batch(sql).map_err(|e| e.to_string())
        }
    }

    /// Runs `sql` as a raw client that passes memscope's purge gate — on SQLite the gate
    /// function, on PostgreSQL the owner's setting — as a database an earlier release wrote.
    pub fn sql_through_purge_gate(&self, sql: &str) -> Result<(), String> {
        if self.is_postgres() {
            return self.sql_execute(&format!(
                "BEGIN; SET LOCAL memscope.purge = 'on'; {sql}; COMMIT;"
            ));
        }
        let conn = rusqlite::Connection::open(&self.path).expect("open the database");
        conn.create_scalar_function(
            "memscope_purge_gate",
            0,
            rusqlite::functions::FunctionFlags::SQLITE_UTF8,
            |_| Ok(1),
        )
        .expect("the purge gate");
        conn.execute_batch(sql).map_err(|e| e.to_string())
    }

    /// Asserts that `text` is nowhere memscope keeps data: on SQLite in no database file (db,
    /// -wal, -shm) in any encoding; on PostgreSQL, whose files are the server's, in no row of
    /// any table. `what` says which content it is.
    #[track_caller]
    pub fn assert_not_stored(&self, text: &str, what: &str) {
        if !self.is_postgres() {
            return assert_not_on_disk(&self.path, text, what);
        }
        let mut client = postgres::Client::connect(self.path_str(), postgres::NoTls)
            .expect("the test database answers");
        let tables: Vec<String> = client
            .query(
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
                &[],
            )
            .expect("the tables")
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(!tables.is_empty(), "no tables to search");
        let holding: Vec<&String> = tables
            .iter()
            .filter(|t| {
                // A table name from the catalog, quoted; the text is bound.
                let sql =
                    format!("SELECT count(*) FROM \"{t}\" AS r WHERE strpos(r::text, $1) > 0");
                let n: i64 = client
                    .query_one(sql.as_str(), &[&text])
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
                    .get(0);
                n > 0
            })
            .collect();
        assert!(
            holding.is_empty(),
            "{what} {text:?} is still in rows of {holding:?}"
        );
    }

    /// The one row `sql` returns on this PostgreSQL database.
    #[track_caller]
    fn pg_row(&self, sql: &str) -> postgres::Row {
        let mut client = postgres::Client::connect(self.path_str(), postgres::NoTls)
            .expect("the test database answers");
        client
            .query_one(sql, &[])
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Every row a SQL query returns, each read by `row`.
    #[track_caller]
    pub fn sql_rows<T>(
        &self,
        sql: &str,
        row: impl FnMut(&rusqlite::Row) -> rusqlite::Result<T>,
    ) -> Vec<T> {
        let conn = self.sql();
        let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let rows = stmt
            .query_map([], row)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<T>>>());
        rows.unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The one value a SQL query returns.
    #[track_caller]
    pub fn sql_one<T: rusqlite::types::FromSql>(&self, sql: &str) -> T {
        query_one(&self.sql(), sql)
    }
}

/// The one value `sql` returns on `conn`.
#[track_caller]
pub fn query_one<T: rusqlite::types::FromSql>(conn: &rusqlite::Connection, sql: &str) -> T {
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// A value as `write` takes it: text (`--value`) or JSON (`--value-json`).
pub enum ValueArg<'a> {
    Text(&'a str),
    Json(&'a str),
}

impl<'a> From<&'a str> for ValueArg<'a> {
    fn from(text: &'a str) -> ValueArg<'a> {
        ValueArg::Text(text)
    }
}

impl<'a> From<&'a String> for ValueArg<'a> {
    fn from(text: &'a String) -> ValueArg<'a> {
        ValueArg::Text(text)
    }
}

/// The fields of `resolve --json`, at the top and in the chain it considered.
pub const RESOLUTION_KEYS: [&str; 8] = [
    "found",
    "subject",
    "predicate",
    "value",
    "scope",
    "version",
    "source",
    "considered",
];

/// The sentence in which the first article's user made pnpm the default.
pub const FIRST_RAW: &str = "以后新建前端项目，默认用 pnpm。";

/// `COMMAND --subject SUBJECT --predicate PREDICATE` followed by `rest`: the arguments of a command
/// about one subject and predicate.
pub fn args_for<'a>(
    command: &'a str,
    subject: &'a str,
    predicate: &'a str,
    rest: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![command, "--subject", subject, "--predicate", predicate];
    args.extend_from_slice(rest);
    args
}

#[track_caller]
/// A hand-edited dump's rows (parsed lines) with its end line counting them again: what a
/// test that takes rows out of an export, or adds some, must do for `import` to judge the
/// rows rather than refuse the file as edited.
pub fn recount_dump(rows: &mut [Value]) {
    let mut counts = serde_json::Map::new();
    for row in rows.iter() {
        if let Some(table) = row["table"]
            .as_str()
            .filter(|t| !t.starts_with("memscope_export"))
        {
            let n = counts.get(table).and_then(Value::as_u64).unwrap_or(0);
            counts.insert(table.to_string(), (n + 1).into());
        }
    }
    for row in rows.iter_mut() {
        if row["table"] == "memscope_export_end" {
            for (_, n) in row["rows"]
                .as_object_mut()
                .expect("the end line's counts")
                .iter_mut()
            {
                *n = 0.into();
            }
            for (table, n) in &counts {
                row["rows"][table] = n.clone();
            }
        }
    }
}

pub fn as_array(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        other => panic!("expected a JSON array, got {other:#}"),
    }
}

/// `<db>`, `<db>-wal`, `<db>-shm`.
pub fn db_files(path: &Path) -> [PathBuf; 3] {
    let s = path.display().to_string();
    [
        path.to_path_buf(),
        PathBuf::from(format!("{s}-wal")),
        PathBuf::from(format!("{s}-shm")),
    ]
}

/// A value unique to this test run, for canaries.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}{:x}{:x}", std::process::id(), nanos)
}

pub fn contains_bytes(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The encodings a text could be stored in: UTF-8 and both UTF-16 byte orders.
pub fn encodings(text: &str) -> Vec<(&'static str, Vec<u8>)> {
    let le: Vec<u8> = text.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
    let be: Vec<u8> = text.encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
    vec![
        ("utf-8", text.as_bytes().to_vec()),
        ("utf-16le", le),
        ("utf-16be", be),
    ]
}

/// Every database file (db, -wal, -shm) and encoding in which `text` appears.
pub fn find_on_disk(path: &Path, text: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for f in db_files(path) {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        for (enc, needle) in encodings(text) {
            if contains_bytes(&bytes, &needle) {
                hits.push(format!("{} ({enc})", f.display()));
            }
        }
    }
    hits
}

/// Asserts that `text` is in no database file (db, -wal, -shm) in any encoding; `what` says
/// which content it is.
#[track_caller]
pub fn assert_not_on_disk(path: &Path, text: &str, what: &str) {
    let hits = find_on_disk(path, text);
    assert!(
        hits.is_empty(),
        "{what} {text:?} is still on disk: {hits:?}"
    );
}

/// Runs `c` to its end and asserts that it succeeded; a failure names `what` and shows its
/// stderr.
#[track_caller]
pub fn output_ok(c: &mut Command, what: &str) -> std::process::Output {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{what} does not run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs a Python 3 script (`python3 -c`) with `args` as `sys.argv[1:]`.
pub fn python(script: &str, args: &[&str]) -> Run {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("python3 is needed by these tests (its sqlite3 module is the foreign client)");
    Run::from_output(out)
}

/// A Python 3 script (`python3 -c`) that holds the database (a transaction, an open read) while
/// the test acts: the database path is its `sys.argv[1]`; the test talks to it line by line.
pub struct PyHolder {
    pub child: Child,
    out: BufReader<ChildStdout>,
}

impl PyHolder {
    /// Spawns `script` on `db` with stdin and stdout piped.
    pub fn start(script: &str, db: &Path) -> PyHolder {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        PyHolder { child, out }
    }

    /// The next line the script printed (empty at its end).
    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.out
            .read_line(&mut line)
            .expect("read the script's stdout");
        line
    }

    /// Sends the script one line.
    pub fn say(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("write to the script");
        stdin.flush().expect("flush the script's stdin");
    }
}

/// Opens the store through the library with the invariant assertion on.
pub fn open_store(path: &Path) -> Store {
    let mut s = Store::open(path, OpenMode::Create).expect("open store");
    s.set_assert_invariants(true);
    s
}

/// A write request with an exact scope.
pub fn req(
    subject: &str,
    predicate: &str,
    value: Value,
    scope: &str,
    source: &str,
) -> WriteRequest {
    WriteRequest {
        subject: subject.into(),
        predicate: predicate.into(),
        value,
        scope: ScopeChoice::Exact(memscope::Scope::parse(scope).expect("scope")),
        source: source.into(),
        raw: None,
        causal_seq: None,
        context: None,
    }
}

/// A write request whose scope a human must choose.
pub fn ambiguous_req(
    subject: &str,
    predicate: &str,
    value: Value,
    candidates: &[&str],
    source: &str,
) -> WriteRequest {
    let scopes = candidates
        .iter()
        .map(|c| memscope::Scope::parse(c).expect("scope"))
        .collect();
    WriteRequest {
        subject: subject.into(),
        predicate: predicate.into(),
        value,
        scope: ScopeChoice::ambiguous(scopes).expect("two candidates"),
        source: source.into(),
        raw: None,
        causal_seq: None,
        context: None,
    }
}

/// Each row's `keys`, in order, as one JSON array a row.
pub fn project(rows: &[Value], keys: &[&str]) -> Vec<Value> {
    rows.iter()
        .map(|r| Value::Array(keys.iter().map(|k| r[*k].clone()).collect()))
        .collect()
}

/// Asserts that `values` strictly increase; `what` says what they are.
#[track_caller]
pub fn assert_increasing(values: &[i64], what: &str) {
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{what}: {values:?}");
}

/// The `outcome` of each outcome line, in order.
#[track_caller]
pub fn outcomes(outs: &[Value]) -> Vec<&str> {
    outs.iter()
        .map(|o| o["outcome"].as_str().expect("an outcome"))
        .collect()
}

/// A JSON array of strings, as strings.
#[track_caller]
pub fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a JSON array, got {v:#}"))
        .iter()
        .map(|s| s.as_str().unwrap_or_else(|| panic!("not a string: {s}")))
        .collect()
}

/// Events of a history listing, by name.
pub fn events(history: &[Value]) -> Vec<String> {
    history
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// A long text mixing CJK, emoji and ASCII, of at least `bytes` UTF-8 bytes.
pub fn long_text(bytes: usize, marker: &str) -> String {
    let unit = "长期记忆🧠memory-";
    let mut s = String::with_capacity(bytes + 64);
    s.push_str(marker);
    while s.len() < bytes {
        s.push_str(unit);
    }
    s.push_str(marker);
    s
}

/// Text no compression brings under PostgreSQL's b-tree entry of about 2,700 bytes: ideographs
/// drawn at random, an emoji now and then, at least `bytes` bytes of UTF-8 (the same text for
/// the same `seed`).
pub fn incompressible(bytes: usize, seed: u64) -> String {
    let mut x = seed;
    let mut text = String::with_capacity(bytes + 4);
    while text.len() < bytes {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = (x >> 33) as u32;
        let c = if n.is_multiple_of(5) {
            0x1F600 + n / 5 % 0x50
        } else {
            0x4E00 + n % 0x5000
        };
        text.push(char::from_u32(c).unwrap());
    }
    text
}

/// Asserts that a Python MCP client script (`what`) found the `mcp` package and exited 0;
/// returns its stdout and stderr. The failure shows stdout and the end of stderr.
#[track_caller]
pub fn assert_mcp_client_ok(out: &std::process::Output, what: &str) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !stderr.contains("MISSING_MCP"),
        "the Python `mcp` package is not installed: run `python3 -m pip install mcp`\n{stderr}"
    );
    assert!(
        out.status.success(),
        "{what} failed ({})\nstdout: {stdout}\nstderr: {}",
        out.status,
        tail(&stderr, 6000)
    );
    (stdout, stderr)
}

/// Runs the Python MCP client `script` (after [`require_python_mcp`]) against `memscope mcp`
/// on `db`; asserts it succeeded (as [`assert_mcp_client_ok`], naming it `what`) and returns
/// its stdout and stderr.
#[track_caller]
pub fn run_python_mcp_client(script: &str, db: &Path, what: &str) -> (String, String) {
    require_python_mcp();
    // The story takes seconds; an assertion failing inside the SDK's session can leave its
    // task group waiting forever, so a hung client is stopped and reported, not waited for.
    let out = Command::new("timeout")
        .args(["--kill-after=10", "300", "python3"])
        .arg(script)
        .arg(BIN)
        .arg(db)
        .output()
        .unwrap_or_else(|e| panic!("run python3 {script}: {e}"));
    assert_mcp_client_ok(&out, what)
}

/// The last `n` bytes of `s` (or a little less, to start on a character).
pub fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// The lines of `text` that start with `prefix`.
pub fn lines_starting<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// Fails (never skips) when Python or its `mcp` package is missing: CI installs both.
pub fn require_python_mcp() {
    let probe = Command::new("python3")
        .args(["-c", "import mcp"])
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 is needed to run the MCP client tests ({e}): install Python 3, then `python3 -m pip install mcp`")
        });
    assert!(
        probe.status.success(),
        "the Python `mcp` package is not installed, so the MCP server cannot be tested with a real client: \
         run `python3 -m pip install mcp` (.ci/run installs it)\n{}",
        String::from_utf8_lossy(&probe.stderr)
    );
}

/// A fresh database on the PostgreSQL test server (`MEMSCOPE_TEST_POSTGRES`), with memscope's
/// schema, as a [`TestDb`] whose path is its address — every helper that runs the binary with
/// `--db` then runs it on PostgreSQL. Dropped with the returned guard. `None` (said loudly)
/// without a server outside CI; under `CI=true` a missing server fails the test.
pub fn postgres_test_db() -> Option<(TestDb, PostgresDropper)> {
    let (db, dropper) = postgres_bare_db()?;
    db.run(&["init"]).ok();
    Some((db, dropper))
}

/// The PostgreSQL test server's address (`MEMSCOPE_TEST_POSTGRES`); `None` (said loudly)
/// without one outside CI; under `CI=true` a missing server fails the test.
fn postgres_server() -> Option<String> {
    match std::env::var("MEMSCOPE_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("no PostgreSQL for the tests: CI=true and MEMSCOPE_TEST_POSTGRES is unset (.ci/run starts one with .ci/postgres)");
            }
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED (the PostgreSQL side): no PostgreSQL (set MEMSCOPE_TEST_POSTGRES or run .ci/postgres)"
            );
            None
        }
    }
}

/// A fresh, empty database on the PostgreSQL test server — no memscope schema yet, as a
/// [`postgres_test_db`] before its `init`.
pub fn postgres_bare_db() -> Option<(TestDb, PostgresDropper)> {
    postgres_server().map(|server| bare_db_on(&server))
}

fn bare_db_on(server: &str) -> (TestDb, PostgresDropper) {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = format!(
        "memscope_s_{}_{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let mut admin = postgres::Client::connect(server, postgres::NoTls).expect("the test server");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("a test database");
    let (base, _) = server.rsplit_once('/').expect("an address with a database");
    let db = TestDb::at(PathBuf::from(format!("{base}/{name}")));
    let dropper = PostgresDropper {
        server: server.to_string(),
        name,
    };
    (db, dropper)
}

/// The databases of one side of a test that needs several (an export's source and its
/// destinations): each [`Databases::fresh`] is a new SQLite file, or a new `init`ed PostgreSQL
/// database dropped with this.
pub struct Databases {
    server: Option<String>,
    droppers: std::cell::RefCell<Vec<PostgresDropper>>,
}

impl Databases {
    /// SQLite files, each in a temporary directory of its own.
    pub fn sqlite() -> Databases {
        Databases {
            server: None,
            droppers: Default::default(),
        }
    }

    /// A database no one has used yet (a SQLite file is not created).
    pub fn fresh(&self) -> TestDb {
        match &self.server {
            None => TestDb::new(),
            Some(server) => {
                let (db, dropper) = bare_db_on(server);
                db.run(&["init"]).ok();
                self.droppers.borrow_mut().push(dropper);
                db
            }
        }
    }
}

/// Runs `body` with [`Databases`] on the PostgreSQL test server: the PostgreSQL side of a test
/// whose SQLite side runs the same body with [`Databases::sqlite`].
pub fn on_postgres_databases(body: impl FnOnce(&Databases)) {
    if let Some(server) = postgres_server() {
        let dbs = Databases {
            server: Some(server),
            droppers: Default::default(),
        };
        body(&dbs);
    }
}

/// Opens either backend through the library ([`memscope::store::AnyStore`]), with SQLite's
/// per-write invariant assertion on.
pub fn open_any_store(db: &TestDb) -> memscope::store::AnyStore {
    let mut store =
        memscope::store::AnyStore::open(&db.path, OpenMode::Create).expect("open the store");
    if let memscope::store::AnyStore::Sqlite(s) = &mut store {
        s.set_assert_invariants(true);
    }
    store
}

/// Runs `body` on a fresh PostgreSQL database of its own ([`postgres_test_db`]): the
/// PostgreSQL side of a test whose SQLite side runs the same body on a file.
pub fn on_postgres(body: impl FnOnce(TestDb)) {
    if let Some((db, _drop)) = postgres_test_db() {
        body(db);
    }
}

/// Ends every other session of the database and waits until they are gone.
pub fn end_other_sessions(raw: &mut postgres::Client) {
    raw.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
        &[],
    )
    .unwrap();
    // The signal is sent at once; the backend ends a moment later.
    for _ in 0..500 {
        let others: i64 = raw
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0);
        if others == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the other sessions did not end");
}

/// Drops a [`postgres_test_db`] database when the test ends.
pub struct PostgresDropper {
    server: String,
    name: String,
}

impl Drop for PostgresDropper {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&self.server, postgres::NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// Runs `c` (memscope) with `input` on its standard input, fed while it runs.
pub fn run_with_stdin(mut c: Command, input: &[u8]) -> Run {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn memscope");
    let mut stdin = child.stdin.take().expect("stdin");
    let data = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait memscope");
    feeder.join().expect("stdin feeder");
    Run::from_output(out)
}

/// The lines of a screen (a tmux capture, or a test backend's frame) between each line's first
/// and last `│` — inside a pane's borders — trimmed at the end; lines without both are left out.
pub fn inside_borders(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| {
            let (start, end) = (l.find('│')?, l.rfind('│')?);
            (start < end).then(|| l[start + '│'.len_utf8()..end].trim_end().to_string())
        })
        .collect()
}
