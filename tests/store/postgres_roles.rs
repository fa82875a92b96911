//! `memscope roles` against a real server, and what its roles may do from a foreign client:
//! `psql` (PostgreSQL's own client, from `pg_config --bindir`), logged in as a member of
//! `memscope_agent` or `memscope_curator`, every refusal checked for its SQLSTATE and words so
//! that a syntax error or a missing table cannot pass for one.
//!
//! The group roles belong to the whole test server and are shared by every test (and every
//! run): these tests never assert that `roles` created them, only what they may do; each test
//! works in a database of its own, and each login it makes is unique and dropped at its end.

use super::postgres::{server, FreshDb};
use crate::support::{assert_one_sentence, memscope_cmd, Run};
use ::postgres::{Client, NoTls};
use memscope::store::postgres::schema;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// `psql` of the server's installation.
pub(crate) fn psql() -> String {
    let bindir = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match bindir {
        Some(dir) if std::path::Path::new(&dir).join("psql").exists() => format!("{dir}/psql"),
        _ => "psql".to_string(),
    }
}

/// A login role of this test's own, dropped when the test ends (after its database: declare
/// it first).
pub(crate) struct TestLogin {
    server: String,
    pub(crate) name: String,
    pub(crate) password: String,
}

impl TestLogin {
    pub(crate) fn unique(server: &str, what: &str) -> TestLogin {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        TestLogin {
            server: server.to_string(),
            name: format!(
                "memscope_t_{what}_{}_{}_{nanos}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ),
            password: format!("pw-{nanos}-{}", N.load(Ordering::SeqCst)),
        }
    }
}

impl Drop for TestLogin {
    fn drop(&mut self) {
        if let Ok(mut admin) = Client::connect(&self.server, NoTls) {
            let _ = admin.batch_execute(&format!("DROP ROLE IF EXISTS {}", self.name));
        }
    }
}

/// What psql printed and whether every statement succeeded.
struct Psql {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `sql` (statements, one session) through psql, logged in as `login` to `db`.
fn psql_as(login: &TestLogin, db: &FreshDb, sql: &str) -> Psql {
    let rest = db.url.split_once('@').unwrap().1;
    let (hostport, dbname) = rest.split_once('/').unwrap();
    let (host, port) = hostport.rsplit_once(':').unwrap();
    let mut child = Command::new(psql())
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-v"])
        .arg("VERBOSITY=verbose")
        .args([
            "-h",
            host,
            "-p",
            port,
            "-U",
            &login.name,
            "-d",
            dbname,
            "-f",
            "-",
        ])
        .env("PGPASSWORD", &login.password)
        .env("PGCLIENTENCODING", "UTF8")
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql runs (PostgreSQL's client, in `pg_config --bindir`)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    // The server ends the login's backend a moment after psql exits; the test database's
    // DROP … WITH (FORCE) may not end another role's session, so wait for it to go.
    let mut admin = Client::connect(&login.server, NoTls).expect("the test server answers");
    for _ in 0..200 {
        let live: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = $1",
                &[&login.name],
            )
            .unwrap()
            .get(0);
        if live == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let run = Psql {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !run.stderr.contains("FATAL"),
        "{} could not log in: {}",
        login.name,
        run.stderr
    );
    run
}

/// `sql` succeeds as `login`.
#[track_caller]
fn allowed(login: &TestLogin, db: &FreshDb, sql: &str) -> String {
    let run = psql_as(login, db, sql);
    assert!(run.ok, "{} may: {sql}\n{}", login.name, run.stderr);
    run.stdout
}

/// `sql` fails as `login`, and its first error is SQLSTATE `code` with a message holding
/// `words` (psql's verbose form: `ERROR:  42501: permission denied for table history`).
#[track_caller]
fn refused(login: &TestLogin, db: &FreshDb, sql: &str, code: &str, words: &str) {
    let run = psql_as(login, db, sql);
    assert!(!run.ok, "{} was allowed: {sql}", login.name);
    let first = run
        .stderr
        .lines()
        .find(|l| l.contains("ERROR:"))
        .unwrap_or_else(|| panic!("{sql}: no error in {}", run.stderr));
    assert!(
        first.contains(&format!("ERROR:  {code}: ")) && first.contains(words),
        "{sql}: expected {code} {words:?}, got {first}"
    );
}

const PERMISSION: &str = "42501"; // insufficient_privilege
const GUARD: &str = "23000"; // integrity_constraint_violation, memscope's guards

/// Runs `memscope --db URL roles ARGS…` with the login's password in `$TEST_LOGIN_PW`.
pub(crate) fn roles(db: &FreshDb, login: Option<&TestLogin>, args: &[&str]) -> Run {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = memscope_cmd(home.path());
    cmd.arg("--db").arg(&db.url).arg("roles").args(args);
    if let Some(l) = login {
        cmd.env("TEST_LOGIN_PW", &l.password);
    }
    Run::from_output(cmd.output().expect("memscope runs"))
}

/// Makes `agent` a login of `memscope_agent` with `roles`, its password from the environment.
pub(crate) fn make_agent_login(db: &FreshDb, agent: &TestLogin) {
    roles(
        db,
        Some(agent),
        &[
            "--agent-login",
            &agent.name,
            "--password-from-env",
            "TEST_LOGIN_PW",
        ],
    )
    .ok();
}

/// `db`'s address, logging in as `login`.
pub(crate) fn login_url(db: &FreshDb, login: &TestLogin) -> String {
    let rest = db.url.split_once('@').unwrap().1;
    format!("postgres://{}:{}@{rest}", login.name, login.password)
}

/// Runs `memscope --db URL ARGS…`.
pub(crate) fn memscope_at(url: &str, args: &[&str]) -> Run {
    let home = tempfile::tempdir().unwrap();
    let out = memscope_cmd(home.path())
        .arg("--db")
        .arg(url)
        .args(args)
        .output()
        .expect("memscope runs");
    Run::from_output(out)
}

const WRITE_AS_AGENT: &[&str] = &[
    "write",
    "--subject",
    "用户:9",
    "--predicate",
    "编辑器",
    "--value",
    "\"helix 🧬\"",
    "--scope",
    "global",
    "--source",
    "thread:代理/message:9",
    "--raw",
    "以后都用 helix 🧬",
];

const DELETE_IT: &[&str] = &[
    "delete",
    "--subject",
    "用户:9",
    "--predicate",
    "编辑器",
    "--scope",
    "global",
    "--yes",
];

/// A memory, its events and a tombstone on another identity, in Chinese and emoji, written by
/// the owner (memscope's write path on PostgreSQL is not there yet).
fn seed(owner: &mut Client) {
    owner
        .batch_execute(
            r#"
INSERT INTO memories (subject, predicate, scope, value, version, source, raw, causal_seq, created_at, updated_at)
VALUES ('用户:42', '包管理器', 'repo:网页-app🚀', '"pnpm 🚀"', 1, 'thread:中文/message:1', '以后都用 pnpm 👍', 1, now(), now());
INSERT INTO history (event, subject, predicate, scope, version, value, raw, source, causal_seq, at, clock)
VALUES ('set', '用户:42', '包管理器', 'repo:网页-app🚀', 1, '"pnpm 🚀"', '以后都用 pnpm 👍', 'thread:中文/message:1', 1, now(), 1),
       ('set', '用户:42', '咖啡', 'global', 1, '"拿铁 ☕"', '我喜欢拿铁 ☕', 'thread:中文/message:2', 2, now(), 2),
       ('deleted', '用户:42', '咖啡', 'global', 1, NULL, NULL, NULL, NULL, now(), 3);
INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at)
VALUES ('用户:42', '咖啡', 'global', 1, '用户要求删除 🗑️', now());
"#,
        )
        .unwrap();
}

fn count(owner: &mut Client, sql: &str) -> i64 {
    owner.query_one(sql, &[]).unwrap().get(0)
}

#[test]
fn an_agent_login_writes_but_cannot_rewrite_history_lift_a_tombstone_or_drop_a_guard() {
    let Some(server) = server() else { return };
    let agent = TestLogin::unique(&server, "agent");
    let (db, mut owner) = FreshDb::prepared(&server);
    seed(&mut owner);

    let run = roles(
        &db,
        Some(&agent),
        &[
            "--agent-login",
            &agent.name,
            "--password-from-env",
            "TEST_LOGIN_PW",
        ],
    )
    .ok();
    assert!(
        run.stdout.contains(&format!(
            "created the login {}, a member of memscope_agent",
            agent.name
        )),
        "{run:?}"
    );
    assert!(!run.stdout.contains(&agent.password), "{run:?}");
    // Again, without a password: nothing changes, and it says so.
    let again = roles(&db, None, &["--agent-login", &agent.name, "--json"]).ok();
    let report: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(report["changed"], false, "{report}");
    assert_eq!(report["grants_changed"], false, "{report}");
    assert_eq!(report["login"]["created"], false, "{report}");
    assert_eq!(report["login"]["granted"], false, "{report}");
    assert_eq!(report["login"]["member_of"], "memscope_agent", "{report}");
    let text = roles(&db, None, &[]).ok();
    assert!(text.stdout.contains("nothing changed"), "{text:?}");
    // Named as a curator's login, the agent's is refused, not quietly given delete: the run is
    // rolled back.
    let promoted = roles(&db, None, &["--curator-login", &agent.name]);
    promoted.fails_with(
        1,
        &[&agent.name, "member of memscope_agent", "another login"],
    );
    assert_one_sentence(&promoted.stderr, &[]);
    let curator: bool = owner
        .query_one(
            "SELECT pg_has_role($1::text, 'memscope_curator', 'MEMBER')",
            &[&agent.name],
        )
        .unwrap()
        .get(0);
    assert!(!curator, "the refused run was rolled back");
    // The agent itself may not run it — not even where nothing would change (its grants
    // would only warn): one sentence naming the login and whom to ask.
    let by_agent = memscope_at(&login_url(&db, &agent), &["roles"]);
    by_agent.fails_with(1, &["may not grant privileges", &agent.name, "owner"]);
    assert_one_sentence(&by_agent.stderr, &[]);
    assert!(!by_agent.stderr.contains(&agent.password), "{by_agent:?}");

    // What memscope's write path does, it may: read, write records, log events, queue, log a
    // read, register a spelling, count.
    let read = allowed(
        &agent,
        &db,
        "SELECT value FROM memories WHERE subject = '用户:42';",
    );
    assert_eq!(read.trim(), "\"pnpm 🚀\"");
    allowed(
        &agent,
        &db,
        r#"
INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
VALUES ('用户:7', '编辑器', 'global', '"helix 🧬"', 1, 'thread:代理/message:1', 5, now(), now());
UPDATE memories SET value = '"vim 📝"', version = 2 WHERE subject = '用户:7';
INSERT INTO history (event, subject, predicate, scope, version, value, source, causal_seq, at)
VALUES ('set', '用户:7', '编辑器', 'global', 2, '"vim 📝"', 'thread:代理/message:1', 5, now());
INSERT INTO pending (subject, predicate, value, source, causal_seq, candidates, created_at)
VALUES ('用户:7', '语言', '"中文 🀄"', 'thread:代理/message:2', 6, '["global", "repo:网页-app🚀"]', now());
INSERT INTO reads (at, agent, subject, predicate, scope, version) VALUES (now(), '代理 🤖', '用户:7', '编辑器', 'global', 2);
INSERT INTO spellings (kind, folded, spelling) VALUES ('subject', '用户:7', '用户:7');
INSERT INTO metrics (name, value) VALUES ('busy_retries', 1)
    ON CONFLICT (name) DO UPDATE SET value = metrics.value + 1;
"#,
    );
    let history = count(&mut owner, "SELECT count(*) FROM history");
    assert_eq!(history, 4);

    // History: neither rewritten nor deleted — not even with the purge gate's setting, which
    // any client may say.
    refused(
        &agent,
        &db,
        "UPDATE history SET value = NULL, raw = NULL;",
        PERMISSION,
        "permission denied for table history",
    );
    refused(
        &agent,
        &db,
        "DELETE FROM history WHERE subject = '用户:42';",
        PERMISSION,
        "permission denied for table history",
    );
    refused(
        &agent,
        &db,
        "BEGIN; SET LOCAL memscope.purge = 'on'; DELETE FROM history WHERE subject = '用户:42'; COMMIT;",
        PERMISSION,
        "permission denied for table history",
    );
    refused(
        &agent,
        &db,
        "SET memscope.purge = 'on'; UPDATE history SET raw = '伪造 🎭';",
        PERMISSION,
        "permission denied for table history",
    );
    refused(
        &agent,
        &db,
        "TRUNCATE history;",
        PERMISSION,
        "permission denied for table history",
    );
    // A tombstone is neither lifted, moved nor forged; a record is not deleted.
    refused(
        &agent,
        &db,
        "DELETE FROM tombstones WHERE subject = '用户:42';",
        PERMISSION,
        "permission denied for table tombstones",
    );
    refused(
        &agent,
        &db,
        "UPDATE tombstones SET version = version + 1;",
        PERMISSION,
        "permission denied for table tombstones",
    );
    refused(
        &agent,
        &db,
        "INSERT INTO tombstones (subject, predicate, scope, version, deleted_at) VALUES ('用户:7', '语言', 'global', 1, now());",
        PERMISSION,
        "permission denied for table tombstones",
    );
    refused(
        &agent,
        &db,
        "DELETE FROM memories WHERE subject = '用户:42';",
        PERMISSION,
        "permission denied for table memories",
    );
    // Nor a guard dropped or switched off, nor a table altered: only the owner may.
    refused(
        &agent,
        &db,
        "ALTER TABLE history DISABLE TRIGGER history_append_only;",
        PERMISSION,
        "must be owner of table history",
    );
    refused(
        &agent,
        &db,
        "DROP TRIGGER history_append_only ON history;",
        PERMISSION,
        "must be owner of relation history",
    );
    refused(
        &agent,
        &db,
        "ALTER TABLE memories ADD COLUMN 后门 text;",
        PERMISSION,
        "must be owner of table memories",
    );
    refused(
        &agent,
        &db,
        "DROP FUNCTION memscope_history_append_only() CASCADE;",
        PERMISSION,
        "must be owner of function",
    );
    // A temporary table named like memscope's does not blind a guard (v2: pg_temp last).
    refused(
        &agent,
        &db,
        r#"
CREATE TEMP TABLE tombstones (subject text, predicate text, scope text);
INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
VALUES ('用户:42', '咖啡', 'global', '"复活 🧟"', 1, 'thread:代理/message:3', 7, now(), now());
"#,
        GUARD,
        "identity is tombstoned",
    );

    // Through memscope itself: the agent writes, and its delete is refused by the server.
    let url = login_url(&db, &agent);
    let wrote = memscope_at(&url, WRITE_AS_AGENT).ok();
    assert!(wrote.stdout.starts_with("inserted"), "{wrote:?}");
    let run = memscope_at(&url, DELETE_IT);
    run.fails_with(1, &["permission denied"]);
    // The sentence says what to do: a curator login deletes.
    assert_one_sentence(
        &run.stderr,
        &[
            "permission denied",
            "memscope_curator login",
            "memscope roles",
        ],
    );
    assert!(!run.stderr.contains("changed by hand"), "{run:?}");
    // A rescope takes the record away from its scope: refused too, and the sentence names it
    // among a curator's (found by review: it named delete, restore, gc and purges only).
    let run = memscope_at(
        &url,
        &[
            "rescope",
            "--subject",
            "用户:9",
            "--predicate",
            "编辑器",
            "--scope",
            "global",
            "--to",
            "repo:网站",
        ],
    );
    run.fails_with(1, &["permission denied"]);
    assert_one_sentence(
        &run.stderr,
        &["a rescope or revert that takes a record away need a memscope_curator login"],
    );
    // The identity's own delete reads its preview first, and its --dry-run is that preview:
    // both say the same sentence, not the server's raw error.
    for extra in [&[][..], &["--dry-run"][..]] {
        let args: Vec<&str> = DELETE_IT[..DELETE_IT.len() - 1]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        let run = memscope_at(&url, &args);
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        assert_one_sentence(
            &run.stderr,
            &["permission denied", "memscope_curator login"],
        );
        assert!(!run.stderr.contains("db error"), "{args:?}: {run:?}");
    }
    assert_eq!(
        count(
            &mut owner,
            "SELECT count(*) FROM memories WHERE subject = '用户:9'"
        ),
        1
    );
    assert_eq!(
        count(
            &mut owner,
            "SELECT count(*) FROM tombstones WHERE subject = '用户:9'"
        ),
        0
    );
    let history = history + 1; // the agent's write
                               // The causal clock: moved up to a writer's own number through memscope, never set by hand.
    let mut own = WRITE_AS_AGENT.to_vec();
    own[2] = "用户:10";
    own.extend(["--causal-seq", "1000"]);
    memscope_at(&url, &own).ok();
    let clock = allowed(&agent, &db, "SELECT memscope_clock_current();");
    assert_eq!(clock.trim(), "1000");
    refused(
        &agent,
        &db,
        "SELECT setval('memscope_clock', 1);",
        PERMISSION,
        "permission denied for sequence memscope_clock",
    );
    let history = history + 1;

    // Seen by the owner: nothing of it happened.
    assert_eq!(count(&mut owner, "SELECT count(*) FROM history"), history);
    assert_eq!(
        count(
            &mut owner,
            "SELECT count(*) FROM history WHERE raw IS NOT NULL"
        ),
        4
    );
    assert_eq!(count(&mut owner, "SELECT count(*) FROM tombstones"), 1);
    assert_eq!(
        count(
            &mut owner,
            "SELECT count(*) FROM memories WHERE subject = '用户:42'"
        ),
        1
    );
    let triggers = count(
        &mut owner,
        "SELECT count(*) FROM pg_trigger WHERE tgname = 'history_append_only' AND tgenabled = 'O'",
    );
    assert_eq!(triggers, 1);
}

#[test]
fn a_curator_login_purges_history_and_lifts_a_tombstone() {
    let Some(server) = server() else { return };
    let curator = TestLogin::unique(&server, "curator");
    let (db, mut owner) = FreshDb::prepared(&server);
    seed(&mut owner);
    let run = roles(
        &db,
        Some(&curator),
        &[
            "--curator-login",
            &curator.name,
            "--password-from-env",
            "TEST_LOGIN_PW",
        ],
    )
    .ok();
    assert!(
        run.stdout.contains("a member of memscope_curator"),
        "{run:?}"
    );

    // The gate stays shut to a curator that did not open it, and TRUNCATE is no one's.
    refused(
        &curator,
        &db,
        "DELETE FROM history WHERE subject = '用户:42';",
        GUARD,
        "memscope: history is append-only",
    );
    refused(
        &curator,
        &db,
        "TRUNCATE history;",
        PERMISSION,
        "permission denied for table history",
    );
    // A purge as memscope's delete does it: the content goes, in one transaction.
    allowed(
        &curator,
        &db,
        r#"
BEGIN;
SET LOCAL memscope.purge = 'on';
UPDATE history SET value = NULL, raw = NULL WHERE subject = '用户:42' AND predicate = '咖啡';
DELETE FROM history WHERE subject = '用户:42' AND predicate = '咖啡' AND event = 'set';
COMMIT;
"#,
    );
    assert_eq!(
        count(
            &mut owner,
            "SELECT count(*) FROM history WHERE predicate = '咖啡'"
        ),
        1
    );
    assert_eq!(
        count(
            &mut owner,
            "SELECT count(*) FROM history WHERE raw LIKE '%拿铁%' OR value LIKE '%拿铁%'"
        ),
        0
    );
    // memscope restore: the tombstone is lifted and the identity is writable again.
    allowed(
        &curator,
        &db,
        "DELETE FROM tombstones WHERE subject = '用户:42' AND predicate = '咖啡';
         INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
         VALUES ('用户:42', '咖啡', 'global', '\"抹茶 🍵\"', 2, 'thread:管理员/message:1', 9, now(), now());
         DELETE FROM memories WHERE subject = '用户:42' AND predicate = '包管理器';",
    );
    assert_eq!(count(&mut owner, "SELECT count(*) FROM tombstones"), 0);
    assert_eq!(count(&mut owner, "SELECT count(*) FROM memories"), 1);

    // And through memscope: a memory written with the curator's login, deleted by it.
    let url = login_url(&db, &curator);
    memscope_at(&url, WRITE_AS_AGENT).ok();
    // Its preview does not promise the vacuum either; the owner's does.
    let dry_run = |url: &str| {
        let mut args = DELETE_IT.to_vec();
        args.extend(["--dry-run", "--json"]);
        let run = memscope_at(url, &args).ok();
        serde_json::from_str::<serde_json::Value>(&run.stdout).unwrap()["on_disk"].clone()
    };
    assert_eq!(dry_run(&url), "vacuum_owed");
    assert_eq!(dry_run(&db.url), "vacuumed");
    let deleted = memscope_at(&url, DELETE_IT).ok();
    assert!(deleted.stdout.contains("tombstoned"), "{deleted:?}");
    // The curator is not the tables' owner: the vacuum after the purge is not its to run, and
    // the delete says so instead of claiming the disk purged.
    assert!(
        deleted.stderr.contains("may not VACUUM") && deleted.stderr.contains("owner"),
        "{deleted:?}"
    );
    assert_eq!(
        count(
            &mut owner,
            "SELECT count(*) FROM history WHERE raw LIKE '%helix%' OR value LIKE '%helix%'"
        ),
        0
    );
    assert_eq!(
        count(
            &mut owner,
            "SELECT count(*) FROM tombstones WHERE subject = '用户:9'"
        ),
        1
    );
    let again = memscope_at(&url, WRITE_AS_AGENT).ok();
    assert!(again.stdout.starts_with("rejected"), "{again:?}");
}

#[test]
fn the_purge_gate_wants_a_curator_or_the_owner_not_only_a_privilege() {
    let Some(server) = server() else { return };
    let stranger = TestLogin::unique(&server, "stranger");
    let (db, mut owner) = FreshDb::prepared(&server);
    seed(&mut owner);
    roles(&db, None, &[]).ok();
    // DELETE on history granted by hand, outside memscope's roles.
    owner
        .batch_execute(&format!(
            "CREATE ROLE {0} LOGIN PASSWORD '{1}';
             GRANT SELECT, UPDATE, DELETE ON history TO {0};",
            stranger.name, stranger.password
        ))
        .unwrap();
    refused(
        &stranger,
        &db,
        "BEGIN; SET LOCAL memscope.purge = 'on'; DELETE FROM history; COMMIT;",
        GUARD,
        "only memscope_curator or the owner",
    );
    // The gate's question, with a curator role that does not exist: the owner yes, others no.
    let asked = "SELECT memscope_may_purge('memscope_no_such_role');";
    assert_eq!(allowed(&stranger, &db, asked).trim(), "f");
    let owner_may: bool = owner
        .query_one("SELECT memscope_may_purge('memscope_no_such_role')", &[])
        .unwrap()
        .get(0);
    assert!(owner_may);
    // The owner purges as before.
    let mut tx = owner.transaction().unwrap();
    tx.batch_execute(
        "SET LOCAL memscope.purge = 'on'; DELETE FROM history WHERE event = 'deleted'",
    )
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(count(&mut owner, "SELECT count(*) FROM history"), 2);

    // `roles` will not make this role an agent: it may delete history, which no agent may.
    let run = roles(&db, None, &["--agent-login", &stranger.name]);
    run.fails_with(1, &["may still", "history"]);
    assert_one_sentence(&run.stderr, &[&stranger.name]);
    let member: bool = owner
        .query_one(
            "SELECT pg_has_role($1::text, 'memscope_agent', 'MEMBER')",
            &[&stranger.name],
        )
        .unwrap()
        .get(0);
    assert!(!member, "the refused run was rolled back");
}

#[test]
fn roles_says_in_one_sentence_what_it_needs() {
    let Some(server) = server() else { return };
    // A SQLite file has no roles.
    let home = tempfile::tempdir().unwrap();
    let out = memscope_cmd(home.path())
        .arg("--db")
        .arg(home.path().join("memory.db"))
        .arg("roles")
        .output()
        .unwrap();
    let run = Run::from_output(out);
    run.fails_with(1, &["SQLite file", "postgres://"]);
    assert_one_sentence(&run.stderr, &["postgres://"]);
    assert!(!home.path().join("memory.db").exists());

    // A database without memscope's schema.
    let empty = FreshDb::new(&server);
    let run = roles(&empty, None, &[]);
    run.fails_with(1, &["no memscope schema", "init"]);

    // A schema 1 database: `init` brings it forward first (its gate trusts the setting alone).
    let v1 = FreshDb::new(&server);
    schema::migrate_with(&mut v1.client(), &schema::MIGRATIONS[..1], &|_, _| Ok(())).unwrap();
    let run = roles(&v1, None, &[]);
    run.fails_with(1, &["schema 1", "init"]);

    // A password variable that is not set: a usage error, before connecting.
    let (db, _owner) = FreshDb::prepared(&server);
    let run = roles(
        &db,
        None,
        &[
            "--agent-login",
            "someone",
            "--password-from-env",
            "MEMSCOPE_TEST_NO_SUCH_VARIABLE",
        ],
    );
    run.fails_with(2, &["MEMSCOPE_TEST_NO_SUCH_VARIABLE", "is not set"]);
    // A group role is not a login.
    let run = roles(&db, None, &["--curator-login", "memscope_curator"]);
    run.fails_with(1, &["group roles"]);

    // The tables' owner without CREATEROLE may grant, but not create a login.
    let owner = TestLogin::unique(&server, "owner");
    let fresh = TestLogin::unique(&server, "fresh");
    let other = FreshDb::new(&server);
    other
        .client()
        .batch_execute(&format!(
            "CREATE ROLE {0} LOGIN PASSWORD '{1}'; GRANT CREATE ON SCHEMA public TO {0};",
            owner.name, owner.password
        ))
        .unwrap();
    let (_, rest) = other.url.split_once('@').unwrap();
    let owner_url = format!("postgres://{}:{}@{rest}", owner.name, owner.password);
    let home = tempfile::tempdir().unwrap();
    let init = memscope_cmd(home.path())
        .args(["--db", &owner_url, "init"])
        .output()
        .unwrap();
    Run::from_output(init).ok();
    let out = memscope_cmd(home.path())
        .args(["--db", &owner_url, "roles", "--agent-login", &fresh.name])
        .output()
        .unwrap();
    let run = Run::from_output(out);
    run.fails_with(1, &["CREATEROLE", &owner.name]);
    assert_one_sentence(&run.stderr, &["may not create"]);
    assert!(!run.stderr.contains(&owner.password));
    let exists: bool = Client::connect(&server, NoTls)
        .unwrap()
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)",
            &[&fresh.name],
        )
        .unwrap()
        .get(0);
    assert!(!exists, "no login was created");
    // Dropped before the owner role (it owns the tables in it).
    drop(other);
}

#[test]
fn roles_in_several_databases_at_once_and_a_hand_grant_is_taken_back() {
    let Some(server) = server() else { return };
    let dbs: Vec<(FreshDb, Client)> = (0..3).map(|_| FreshDb::prepared(&server)).collect();
    // Roles are the server's: processes granting them in three databases at once all succeed.
    let runs: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = dbs
            .iter()
            .map(|(db, _)| s.spawn(|| roles(db, None, &["--json"])))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for run in runs {
        let run = run.ok();
        let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(report["grants_changed"], true, "{report}");
    }
    // A privilege added by hand to the agent goes at the next run, which says it changed.
    let (db, owner) = &mut dbs.into_iter().next().unwrap();
    owner
        .batch_execute("GRANT DELETE ON tombstones TO memscope_agent")
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&roles(db, None, &["--json"]).ok().stdout).unwrap();
    assert_eq!(report["changed"], true, "{report}");
    assert_eq!(report["grants_changed"], true, "{report}");
    let may: bool = owner
        .query_one(
            "SELECT has_table_privilege('memscope_agent', 'tombstones', 'DELETE')",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(!may);
    let report: serde_json::Value =
        serde_json::from_str(&roles(db, None, &["--json"]).ok().stdout).unwrap();
    assert_eq!(report["changed"], false, "{report}");
}

#[test]
fn only_memscope_roles_move_the_clock_and_never_past_2_53() {
    // Found by review: `memscope_clock_observe` runs as the owner and every login could call
    // it, so one with no grant at all pushed the clock past 2^53 and stopped every write,
    // while `check` said ok.
    let Some(server) = server() else { return };
    let stranger = TestLogin::unique(&server, "stranger");
    let agent = TestLogin::unique(&server, "agent");
    let (db, mut owner) = FreshDb::prepared(&server);
    owner
        .batch_execute(&format!(
            "CREATE ROLE {0} LOGIN PASSWORD '{1}'; GRANT SELECT ON ALL TABLES IN SCHEMA public TO {0};",
            stranger.name, stranger.password
        ))
        .unwrap();
    make_agent_login(&db, &agent);
    refused(
        &stranger,
        &db,
        "SELECT memscope_clock_observe(9007199254740993);",
        PERMISSION,
        "permission denied for function memscope_clock_observe",
    );
    // An agent's write that brings its own causal number moves the clock up to it …
    let url = login_url(&db, &agent);
    let mut write = WRITE_AS_AGENT.to_vec();
    write.extend(["--causal-seq", "500"]);
    memscope_at(&url, &write).ok();
    assert_eq!(memscope_at(&url, &["seq"]).ok().stdout.trim(), "501");
    // … and not into the clock's last 2^32 numbers, kept for writes without one of their
    // own, even by SQL (schema v12; before it an agent could move it to 2^53 and stop them).
    for past in ["9007194959773697", "9007199254740992", "9007199254740993"] {
        refused(
            &agent,
            &db,
            &format!("SELECT memscope_clock_observe({past});"),
            "22003",
            "past 2^53 - 2^32 and ahead of the causal clock",
        );
    }
    assert_eq!(memscope_at(&url, &["seq"]).ok().stdout.trim(), "502");
    // The owner may still move it anywhere (`setval`); a write then says what stops it.
    owner
        .batch_execute("SELECT setval('memscope_clock', 9007199254740993)")
        .unwrap();
    let run = memscope_at(&url, WRITE_AS_AGENT);
    assert!(
        run.code == 1 && run.stderr.contains("or a client moved it there"),
        "{run:?}"
    );
    owner
        .batch_execute("SELECT setval('memscope_clock', 502)")
        .unwrap();
    // A grant to every login is a guard gone; `init` takes it back.
    owner
        .batch_execute("GRANT EXECUTE ON FUNCTION memscope_clock_observe(bigint) TO PUBLIC")
        .unwrap();
    let run = memscope_at(&db.url, &["check", "--json"]);
    assert_eq!(
        run.json()["metrics"]["schema_guards"],
        "missing",
        "{}",
        run.stdout
    );
    memscope_at(&db.url, &["init"]).ok();
    let run = memscope_at(&db.url, &["check", "--json"]).ok();
    assert_eq!(
        run.json()["metrics"]["schema_guards"],
        "present",
        "{}",
        run.stdout
    );
    refused(
        &stranger,
        &db,
        "SELECT memscope_clock_observe(600);",
        PERMISSION,
        "permission denied for function memscope_clock_observe",
    );
}

/// A login that may only read runs `apply`: the refusal is the login's, not a line's — said
/// once, on stderr, as "apply wrote nothing" with the roles to use, exit 1, no outcome lines and
/// no "applied N" (found by review: it repeated the same error for every line and summed them up
/// as applied).
#[test]
fn a_read_only_logins_apply_is_refused_once_and_writes_nothing() {
    let Some(server) = server() else { return };
    let reader = TestLogin::unique(&server, "reader");
    let (db, mut owner) = FreshDb::prepared(&server);
    owner
        .batch_execute(&format!(
            "CREATE ROLE {0} LOGIN PASSWORD '{1}'; GRANT SELECT ON ALL TABLES IN SCHEMA public TO {0};",
            reader.name, reader.password
        ))
        .unwrap();
    let lines: String = ["编辑器", "formatter", "package_manager"]
        .iter()
        .map(|p| {
            format!(
                "{}\n",
                serde_json::json!({"subject": "user:42", "predicate": p, "value": "值 🚀", "scope": "global", "source": "t:1"})
            )
        })
        .collect();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = memscope_cmd(home.path());
    cmd.arg("--db")
        .arg(login_url(&db, &reader))
        .args(["apply", "-"]);
    let run = crate::support::run_with_stdin(cmd, lines.as_bytes());
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "no line's outcome: {run:?}");
    crate::support::assert_one_sentence(
        &run.stderr,
        &["apply wrote nothing", "permission denied", "memscope_agent"],
    );
    assert!(!run.stderr.contains("applied"), "{run:?}");
    let n: i64 = owner
        .query_one("SELECT count(*) FROM history", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "nothing was written");
}

/// `import` on PostgreSQL wants a login that may write every table as the dump holds it: an
/// agent's is told so in one sentence naming the curator's, and nothing is imported (found by
/// review: it printed the raw `permission denied for table history`). An export holding content
/// an earlier release's delete kept (a rescope's moved copy with its source), which the import
/// blanks, also wants a login that may open the purge gate: a login granted the tables by hand
/// is told to use the curator's — but a copy of that export cut short is refused as cut short
/// first, which is what there is to mend (found by review: the blanking ran before the cut was
/// looked for, and blamed the login).
#[test]
fn an_import_names_the_curator_login_it_needs_unless_the_file_is_cut_short() {
    let Some(server) = server() else { return };
    let agent = TestLogin::unique(&server, "importer");
    let granted = TestLogin::unique(&server, "granted");
    let (db, mut owner) = FreshDb::prepared(&server);
    make_agent_login(&db, &agent);
    owner
        .batch_execute(&format!(
            "CREATE ROLE {0} LOGIN PASSWORD '{1}';
             GRANT ALL ON ALL TABLES IN SCHEMA public TO {0};
             GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {0};",
            granted.name, granted.password
        ))
        .unwrap();
    let source = crate::support::TestDb::new();
    let (who, pm) = ("用户:搬家🚚", "package_manager");
    source.write(who, pm, "pnpm", "global", "thread:1");
    source.write(who, pm, "npm", "global", "thread:2");
    source.rescope(who, pm, "global", "repo:旧仓库");
    source.delete(who, pm, "repo:旧仓库");
    // As an earlier release's delete left it: the moved version's source kept.
    let kept = crate::support::unique("搬走的来源-📦-");
    source
        .sql_through_purge_gate(&format!(
            "UPDATE history SET source = '{kept}' WHERE subject = '{who}' AND scope = 'global' AND version = 2 AND event = 'set'"
        ))
        .unwrap();
    let whole = source.run(&["export"]).ok().stdout;
    let dir = tempfile::tempdir().unwrap();
    let (whole_file, cut_file) = (dir.path().join("whole.jsonl"), dir.path().join("cut.jsonl"));
    std::fs::write(&whole_file, &whole).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    std::fs::write(&cut_file, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
    let held = |owner: &mut Client| count(owner, "SELECT count(*) FROM history");

    let by_agent = memscope_at(
        &login_url(&db, &agent),
        &["import", whole_file.to_str().unwrap()],
    );
    by_agent.fails_with(
        1,
        &[
            &agent.name,
            "permission denied",
            "memscope_curator",
            "nothing was imported",
        ],
    );
    assert_one_sentence(&by_agent.stderr, &[]);
    assert_eq!(held(&mut owner), 0);

    let url = login_url(&db, &granted);
    let cut = memscope_at(&url, &["import", cut_file.to_str().unwrap()]);
    cut.fails_with(1, &["cut short", "nothing was imported"]);
    assert_one_sentence(&cut.stderr, &[]);
    assert_eq!(held(&mut owner), 0);

    let refused = memscope_at(&url, &["import", whole_file.to_str().unwrap()]);
    refused.fails_with(
        1,
        &[
            "earlier release",
            "memscope_curator",
            "nothing was imported",
        ],
    );
    assert_one_sentence(&refused.stderr, &[]);
    assert!(!refused.stderr.contains(&kept), "{refused:?}");
    assert_eq!(held(&mut owner), 0);

    // The owner imports it, blanked.
    let done = memscope_at(&db.url, &["import", whole_file.to_str().unwrap()]).ok();
    assert!(done.stdout.contains("blanked"), "{done:?}");
    let left = count(
        &mut owner,
        &format!("SELECT count(*) FROM history WHERE source = '{kept}'"),
    );
    assert_eq!(left, 0);
}

/// A login the owner has not granted memscope's roles yet — every new database needs its own
/// grants — is told so in one sentence naming the `roles` run that grants them, by every
/// command (found by an exploratory test: the driver's `permission denied for table
/// memscope_schema`).
#[test]
fn a_login_not_granted_memscopes_roles_is_told_to_run_roles() {
    let Some(server) = server() else { return };
    let stranger = TestLogin::unique(&server, "ungranted");
    let (db, mut owner) = FreshDb::prepared(&server);
    seed(&mut owner);
    owner
        .batch_execute(&format!(
            "CREATE ROLE {0} LOGIN PASSWORD '{1}'",
            stranger.name, stranger.password
        ))
        .unwrap();
    let url = login_url(&db, &stranger);
    for args in [&["list"][..], &["check"], WRITE_AS_AGENT] {
        let run = memscope_at(&url, args);
        run.fails_with(
            1,
            &[
                "may not read memscope's tables",
                &format!("roles --agent-login {}", stranger.name),
            ],
        );
        assert_one_sentence(&run.stderr, &[&stranger.name]);
    }
}

/// A login already in one of memscope's roles — made for another database: roles belong to the
/// server — is told of the one `roles` run that grants it in this database, as what it is
/// (found by review: an agent's login was offered `--curator-login` too, which `roles` then
/// refused because it is a member of memscope_agent).
#[test]
fn a_login_in_one_role_is_told_only_the_roles_run_that_works_for_it() {
    let Some(server) = server() else { return };
    let agent = TestLogin::unique(&server, "agent_elsewhere");
    let curator = TestLogin::unique(&server, "curator_elsewhere");
    let (first, _) = FreshDb::prepared(&server);
    make_agent_login(&first, &agent);
    roles(
        &first,
        Some(&curator),
        &[
            "--curator-login",
            &curator.name,
            "--password-from-env",
            "TEST_LOGIN_PW",
        ],
    )
    .ok();
    for (login, works, refused) in [
        (&agent, "--agent-login", "--curator-login"),
        (&curator, "--curator-login", "--agent-login"),
    ] {
        // A database of its own: `roles` grants both group roles theirs.
        let (second, _) = FreshDb::prepared(&server);
        let run = memscope_at(&login_url(&second, login), &["list"]);
        run.fails_with(
            1,
            &[
                "may not read memscope's tables",
                &format!("roles {works} {}", login.name),
            ],
        );
        assert!(!run.stderr.contains(refused), "{run:?}");
        assert_one_sentence(&run.stderr, &[&login.name]);
        // What it names works.
        roles(&second, None, &[works, &login.name]).ok();
        memscope_at(&login_url(&second, login), &["list"]).ok();
    }
}

/// A curator's `init` on a database whose guards were disabled cannot make them again — only
/// the owner of memscope's tables may — and is told to run `init` as that owner, not to be
/// granted CREATE, which rebuilds no guard and widens the curator's rights (found by review).
#[test]
fn a_curators_init_over_disabled_guards_names_the_tables_owner() {
    let Some(server) = server() else { return };
    let curator = TestLogin::unique(&server, "curator_init");
    let (db, mut owner) = FreshDb::prepared(&server);
    roles(
        &db,
        Some(&curator),
        &[
            "--curator-login",
            &curator.name,
            "--password-from-env",
            "TEST_LOGIN_PW",
        ],
    )
    .ok();
    owner
        .batch_execute("ALTER TABLE history DISABLE TRIGGER history_append_only")
        .unwrap();
    let tables_owner: String = owner
        .query_one(
            "SELECT relowner::regrole::text FROM pg_class WHERE oid = 'history'::regclass",
            &[],
        )
        .unwrap()
        .get(0);
    let run = memscope_at(&login_url(&db, &curator), &["init"]);
    run.fails_with(
        1,
        &[
            &format!("user \"{}\"", curator.name),
            "run `memscope init` as the database's owner",
            &format!("(\"{tables_owner}\")"),
        ],
    );
    assert!(!run.stderr.contains("GRANT CREATE"), "{run:?}");
    assert_one_sentence(&run.stderr, &[]);
    // The owner's init makes them again.
    memscope_at(&db.url, &["init"]).ok();
}
