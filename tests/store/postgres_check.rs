//! `check` on PostgreSQL (issue 17): the same rules as on SQLite, judged from outside. A
//! history of every kind of write checks clean on both backends with the same figures, and a
//! database `psql` damaged after disabling the guards is caught, invariant by invariant.

use super::postgres::{server, FreshDb};
use super::postgres_roles::psql;
use super::postgres_write::req;
use memscope::model::{DeleteTarget, Identity, OutcomeKind};
use memscope::store::{AnyStore, IntegrityMode, OpenMode};
use memscope::Scope;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// Every kind of write, on `store`: inserted, confirmed, superseded, stale, pending (then
/// resolved, and one rejected), deleted, restored and written again, deleted for good — in
/// Chinese, emoji and a very long value.
pub(crate) fn every_kind_of_write(store: &mut AnyStore) {
    let long = "很长的记忆 🚀 ".repeat(2_000);
    let writes = [
        req("user:42", "package_manager", json!("pnpm"), "global", "t1"),
        req("user:42", "package_manager", json!("pnpm"), "global", "t2"),
        req(
            "user:42",
            "package_manager",
            json!("npm"),
            "repo:legacy-dashboard",
            "t3",
        ),
        req("user:42", "coffee", json!("燕麦拿铁 ☕"), "global", "t4"),
        req("user:42", "coffee", json!(long), "global", "t5"),
        req("user:42", "editor", json!("vim"), "global,repo:web", "t6"),
        req("user:42", "shell", json!("fish"), "global,task:t1", "t7"),
        req(
            "user:7",
            "reply_language",
            json!("中文"),
            "task:重构-🚀",
            "t8",
        ),
    ];
    for w in &writes {
        store.write(w).unwrap();
    }
    let mut stale = req("user:42", "coffee", json!("espresso"), "global", "t9");
    stale.causal_seq = Some(1);
    assert_eq!(store.write(&stale).unwrap().outcome, OutcomeKind::Stale);
    let queue = store.pending(false).unwrap();
    assert_eq!(queue.len(), 2);
    store
        .resolve_pending(queue[0].id, &Scope::parse("repo:web").unwrap(), false)
        .unwrap();
    store.reject_pending(queue[1].id).unwrap();
    let dashboard = Identity {
        subject: "user:42".into(),
        predicate: "package_manager".into(),
        scope: Scope::parse("repo:legacy-dashboard").unwrap(),
    };
    store
        .delete(
            &DeleteTarget::Identity(dashboard.clone()),
            Some("rescoped by hand"),
        )
        .unwrap();
    store.restore(&dashboard).unwrap();
    store
        .write(&req(
            "user:42",
            "package_manager",
            json!("npm ci"),
            "repo:legacy-dashboard",
            "t10",
        ))
        .unwrap();
    store
        .delete(&DeleteTarget::Subject("user:7".into()), None)
        .unwrap();
}

/// The counts of a report that both backends must agree on.
fn figures(report: &Value) -> Vec<(String, Value)> {
    [
        "memories",
        "history_events",
        "tombstones",
        "pending_open",
        "stale_writes",
        "schema_guards",
    ]
    .iter()
    .map(|k| (k.to_string(), report["metrics"][k].clone()))
    .collect()
}

#[test]
fn every_kind_of_write_checks_clean_on_postgres_as_on_sqlite() {
    let Some(server) = server() else { return };
    let (pg_db, _) = FreshDb::prepared(&server);
    let file = tempfile::tempdir().unwrap();
    let sqlite_path = file.path().join("memory.db");
    let mut reports = Vec::new();
    for address in [pg_db.url.as_str(), sqlite_path.to_str().unwrap()] {
        let mut store = AnyStore::open(Path::new(address), OpenMode::Create).unwrap();
        every_kind_of_write(&mut store);
        let report = store.check(IntegrityMode::Quick).unwrap();
        assert!(report.ok, "{address}: {:?}", report.violations);
        reports.push(serde_json::to_value(&report).unwrap());
    }
    assert_eq!(figures(&reports[0]), figures(&reports[1]));
    // user:7's one identity; the dashboard's tombstone was lifted by its restore.
    assert_eq!(reports[0]["metrics"]["tombstones"], json!(1));
    assert_eq!(reports[0]["metrics"]["schema_guards"], json!("present"));
    // No file to examine on PostgreSQL: no integrity section, the server's durability.
    assert!(reports[0].get("integrity").is_none(), "{}", reports[0]);
    assert!(reports[1]["integrity"]["ok"] == json!(true));
    assert!(
        reports[0]["metrics"]["durability"]
            .as_str()
            .unwrap()
            .starts_with("server: synchronous_commit="),
        "{}",
        reports[0]
    );
}

/// The real binary on the database at `url`, with a home of its own.
fn memscope_on(url: &str, args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    crate::support::memscope_cmd(home.path())
        .args(["--db", url])
        .args(args)
        .output()
        .unwrap()
}

/// `check` on the database at `url` exits 0.
#[track_caller]
fn assert_check_clean(url: &str) {
    let out = memscope_on(url, &["check"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// What `check` says of the guards of the database at `url` (`metrics.schema_guards`).
fn schema_guards(url: &str) -> Value {
    let out = memscope_on(url, &["check", "--json"]);
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["metrics"]["schema_guards"].clone()
}

/// Runs `sql` with psql on `url`, stopping at the first error.
pub(crate) fn psql_run(url: &str, sql: &str) {
    let out = Command::new(psql())
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql refused {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `init` on an up-to-date PostgreSQL database makes memscope's guards again when a raw
/// client dropped, disabled or changed them — triggers, the functions they run (body, search
/// path, security), the identity constraint, the change notices — and leaves a rule of another
/// client's for `check` to go on naming.
#[test]
fn init_on_postgres_makes_the_guards_again() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    let mut store = AnyStore::open(Path::new(&db.url), OpenMode::Create).unwrap();
    every_kind_of_write(&mut store);
    drop(store);
    let run = |args: &[&str]| memscope_on(&db.url, args);
    let guards = || {
        let out = run(&["check", "--json"]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["metrics"]["schema_guards"]
            .as_str()
            .unwrap()
            .to_string()
    };
    psql_run(
        &db.url,
        "DROP TRIGGER history_append_only ON history;
         ALTER TABLE memories DISABLE TRIGGER memories_no_resurrection;
         CREATE OR REPLACE FUNCTION memscope_tombstoned(subject text, predicate text, scope text)
           RETURNS boolean LANGUAGE sql AS $$ SELECT false $$;
         ALTER FUNCTION memscope_may_purge(text) SECURITY DEFINER;
         ALTER TABLE memories DROP CONSTRAINT memories_identity;
         ALTER TABLE memories ADD CONSTRAINT memories_identity CHECK (true);
         DROP TRIGGER reads_changed ON reads;
         CREATE RULE keep AS ON DELETE TO history DO INSTEAD NOTHING",
    );
    assert_eq!(guards(), "missing");
    let text = String::from_utf8(run(&["check"]).stdout).unwrap();
    assert!(
        text.contains("GUARDS: memscope's guards on this database are not intact"),
        "{text}"
    );
    let out = run(&["init"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && said.contains("made its guard functions, triggers and identity constraint again"),
        "{said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The rule is another client's: still named.
    assert_eq!(guards(), "missing");
    psql_run(&db.url, "DROP RULE keep ON history");
    assert_eq!(guards(), "present");
    let said = String::from_utf8(run(&["init"]).stdout).unwrap();
    assert!(said.contains("(up to date);"), "{said}");
    let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let notices: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_trigger WHERE tgname = 'reads_changed'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(notices, 1, "the UI's change notice is back");
    let refused = client.batch_execute("DELETE FROM history").unwrap_err();
    assert!(
        format!("{refused:?}").contains("append-only"),
        "{refused:?}"
    );
    assert_check_clean(&db.url);
}

/// `init` that brings a database forward makes a guard a raw client dropped before in the
/// same run (found by review: tombstones' key came back only at a second `init`).
#[test]
fn init_bringing_a_database_forward_makes_its_guards_again_on_postgres() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    psql_run(
        &db.url,
        "ALTER TABLE tombstones DROP CONSTRAINT tombstones_pkey;
         UPDATE memscope_schema SET version = version - 1",
    );
    let guards = || schema_guards(&db.url);
    let keys = || -> i64 {
        let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        c.query_one(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = 'tombstones'::regclass AND contype = 'p'",
            &[],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(keys(), 0);
    let out = memscope_on(&db.url, &["init"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(keys(), 1, "one init made the key again");
    assert_eq!(guards(), json!("present"));
}

/// A primary key a raw client put on tombstones under another name, on other columns, in
/// place of memscope's: `check` says the guards are missing, and `init` replaces it with the
/// identity's key instead of failing with the server's raw error (found by review); a delete
/// then records its tombstone and a second tombstone of the identity is refused.
#[test]
fn init_replaces_a_raw_clients_primary_key_on_tombstones_on_postgres() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    psql_run(
        &db.url,
        "ALTER TABLE tombstones DROP CONSTRAINT tombstones_pkey;
         ALTER TABLE tombstones ADD CONSTRAINT 墓碑_key PRIMARY KEY (subject, predicate, scope, version)",
    );
    let guards = || schema_guards(&db.url);
    assert_eq!(guards(), json!("missing"));
    let out = memscope_on(&db.url, &["init"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(guards(), json!("present"));
    let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let keys: Vec<String> = c
        .query(
            "SELECT conname::text FROM pg_constraint WHERE conrelid = 'tombstones'::regclass AND contype = 'p'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(keys, ["tombstones_pkey"]);
    let id = [
        "--subject",
        "user:墓 🪦",
        "--predicate",
        "editor",
        "--scope",
        "global",
    ];
    let mut write = vec!["write", "--value", "helix", "--source", "s:1"];
    write.extend(id);
    assert!(memscope_on(&db.url, &write).status.success());
    let mut delete = vec!["delete"];
    delete.extend(id);
    let out = memscope_on(&db.url, &delete);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = c
        .batch_execute(
            "INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at) \
             SELECT subject, predicate, scope, version + 1, reason, deleted_at FROM tombstones",
        )
        .unwrap_err();
    assert_eq!(
        second.code(),
        Some(&postgres::error::SqlState::UNIQUE_VIOLATION),
        "{second:?}"
    );
    assert_check_clean(&db.url);
}

/// A constraint of another client's in the place of tombstones' key or memories' identity
/// constraint, with a foreign key depending on it: `init` cannot drop it and says so in one
/// sentence, naming the dependent object, exit 1, nothing changed — not the server's raw error
/// (found by review).
#[test]
fn init_names_what_depends_on_a_raw_clients_constraint_on_postgres() {
    let Some(server) = server() else { return };
    for (sql, said_table) in [
        (
            "ALTER TABLE tombstones DROP CONSTRAINT tombstones_pkey;
             ALTER TABLE tombstones ADD CONSTRAINT 墓碑_key PRIMARY KEY (subject, predicate, scope, version);
             CREATE TABLE 引用 (s text, p text, sc text, v bigint,
               FOREIGN KEY (s, p, sc, v) REFERENCES tombstones (subject, predicate, scope, version))",
            "cannot give tombstones its identity key again",
        ),
        (
            "ALTER TABLE memories DROP CONSTRAINT memories_identity;
             ALTER TABLE memories ADD CONSTRAINT memories_identity UNIQUE (scope, subject, predicate, version);
             CREATE TABLE 引用 (s text, p text, sc text, v bigint,
               FOREIGN KEY (sc, s, p, v) REFERENCES memories (scope, subject, predicate, version))",
            "cannot give memories its identity constraint again",
        ),
    ] {
        let (db, _) = FreshDb::prepared(&server);
        psql_run(&db.url, sql);
        let out = memscope_on(&db.url, &["init"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains(said_table)
                && said.contains("another object depends on it")
                && said.contains("引用")
                && said.contains("then run init again")
                && said.trim_end().lines().count() == 1,
            "{said}"
        );
        assert_eq!(schema_guards(&db.url), json!("missing"));
    }
}

/// The clock set back between a write's judging of its number and its look — here by a raw
/// client's trigger on `spellings`, which a new subject's write inserts into — meets schema 12's
/// refusal in the clock's function: said in the write path's sentence, exit 2, nothing written,
/// not as the server's raw error (found by review).
#[test]
fn a_clock_set_back_under_a_write_is_refused_in_its_sentence_on_postgres() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    let past = (1i64 << 53) - (1i64 << 32) + 10;
    psql_run(
        &db.url,
        &format!(
            "SELECT setval('memscope_clock', {past});
             CREATE FUNCTION set_back() RETURNS trigger LANGUAGE plpgsql
               AS $$ BEGIN PERFORM setval('memscope_clock', 5); RETURN NEW; END $$;
             CREATE TRIGGER set_back BEFORE INSERT ON spellings
               FOR EACH ROW EXECUTE FUNCTION set_back();"
        ),
    );
    let out = memscope_on(
        &db.url,
        &[
            "write",
            "--subject",
            "user:新来的 🆕",
            "--predicate",
            "editor",
            "--scope",
            "global",
            "--value",
            "helix",
            "--source",
            "s",
            "--causal-seq",
            &past.to_string(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "causal_seq {past} is past 2^53 − 2^32 (9007194959773696) and ahead of the causal clock: "
        )),
        "{stderr}"
    );
    psql_run(
        &db.url,
        "DROP TRIGGER set_back ON spellings; DROP FUNCTION set_back();",
    );
    let listed = memscope_on(&db.url, &["list", "--json"]);
    assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "[]");
}

#[test]
fn check_on_postgres_finds_what_psql_did_after_disabling_the_guards() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    let mut store = AnyStore::open(Path::new(&db.url), OpenMode::Create).unwrap();
    every_kind_of_write(&mut store);
    assert!(store.check(IntegrityMode::Quick).unwrap().ok);

    // A guard that is there but does not fire counts as missing: disabled (the update's guard
    // too), fired only for replication, or calling another function.
    let guards = |store: &mut AnyStore| {
        let report = serde_json::to_value(store.check(IntegrityMode::Quick).unwrap()).unwrap();
        report["metrics"]["schema_guards"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for (off, on) in [
        (
            "ALTER TABLE memories DISABLE TRIGGER memories_no_resurrection_update",
            "ALTER TABLE memories ENABLE TRIGGER memories_no_resurrection_update",
        ),
        (
            "ALTER TABLE memories ENABLE REPLICA TRIGGER memories_no_resurrection",
            "ALTER TABLE memories ENABLE ALWAYS TRIGGER memories_no_resurrection",
        ),
        (
            "CREATE FUNCTION pg_temp_noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
             DROP TRIGGER tombstones_version_only_rises ON tombstones;
             CREATE TRIGGER tombstones_version_only_rises BEFORE UPDATE ON tombstones
             FOR EACH ROW EXECUTE FUNCTION pg_temp_noop()",
            "DROP TRIGGER tombstones_version_only_rises ON tombstones;
             CREATE TRIGGER tombstones_version_only_rises BEFORE UPDATE ON tombstones
             FOR EACH ROW EXECUTE FUNCTION memscope_tombstones_version_only_rises();
             DROP FUNCTION pg_temp_noop()",
        ),
        (
            // A condition that never holds.
            "DROP TRIGGER tombstones_not_over_live ON tombstones;
             CREATE TRIGGER tombstones_not_over_live BEFORE INSERT ON tombstones
             FOR EACH ROW WHEN (false) EXECUTE FUNCTION memscope_tombstones_not_over_live()",
            "DROP TRIGGER tombstones_not_over_live ON tombstones;
             CREATE TRIGGER tombstones_not_over_live BEFORE INSERT ON tombstones
             FOR EACH ROW EXECUTE FUNCTION memscope_tombstones_not_over_live()",
        ),
        (
            // A function the guards run, pointed at other tables of the same names.
            "CREATE SCHEMA evil; CREATE TABLE evil.tombstones (LIKE public.tombstones);
             ALTER FUNCTION memscope_memories_no_resurrection() SET search_path = evil, public",
            "ALTER FUNCTION memscope_memories_no_resurrection() SET search_path = public, pg_temp;
             DROP SCHEMA evil CASCADE",
        ),
        (
            // The purge gate run with its owner's rights, whoever calls it.
            "ALTER FUNCTION memscope_may_purge(text) SECURITY DEFINER",
            "ALTER FUNCTION memscope_may_purge(text) SECURITY INVOKER",
        ),
        (
            // The identity's constraint swapped for one of the same name that holds nothing.
            "ALTER TABLE memories DROP CONSTRAINT memories_identity;
             ALTER TABLE memories ADD CONSTRAINT memories_identity CHECK (true)",
            "ALTER TABLE memories DROP CONSTRAINT memories_identity;
             ALTER TABLE memories ADD CONSTRAINT memories_identity UNIQUE (scope, subject, predicate)",
        ),
        (
            "CREATE RULE keep AS ON DELETE TO history DO INSTEAD NOTHING",
            "DROP RULE keep ON history",
        ),
        (
            // A row policy that hides every tombstone from the guards.
            "ALTER TABLE tombstones ENABLE ROW LEVEL SECURITY; ALTER TABLE tombstones FORCE ROW LEVEL SECURITY;
             CREATE POLICY hide ON tombstones FOR SELECT USING (false)",
            "DROP POLICY hide ON tombstones; ALTER TABLE tombstones NO FORCE ROW LEVEL SECURITY;
             ALTER TABLE tombstones DISABLE ROW LEVEL SECURITY",
        ),
        (
            // Another BEFORE trigger, which can make a guarded statement do nothing.
            "CREATE FUNCTION pg_temp_skip() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
             CREATE TRIGGER a_skip BEFORE DELETE ON history FOR EACH ROW EXECUTE FUNCTION pg_temp_skip()",
            "DROP TRIGGER a_skip ON history; DROP FUNCTION pg_temp_skip()",
        ),
        (
            // An AFTER trigger that copies what a delete destroys into a table of its own.
            "CREATE TABLE shadow (t text);
             CREATE FUNCTION steal() RETURNS trigger LANGUAGE plpgsql AS
               $$BEGIN INSERT INTO shadow VALUES (OLD::text); RETURN OLD; END$$;
             CREATE TRIGGER zz AFTER DELETE OR UPDATE ON history FOR EACH ROW EXECUTE FUNCTION steal()",
            "DROP TRIGGER zz ON history; DROP FUNCTION steal(); DROP TABLE shadow",
        ),
        (
            // The same on the pending queue, whose items hold raw words a delete purges.
            "CREATE FUNCTION steal() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN OLD; END$$;
             CREATE TRIGGER zz AFTER DELETE ON pending FOR EACH ROW EXECUTE FUNCTION steal()",
            "DROP TRIGGER zz ON pending; DROP FUNCTION steal()",
        ),
        (
            // A change notice's trigger pointed at another function …
            "CREATE FUNCTION steal() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
             DROP TRIGGER memories_changed ON memories;
             CREATE TRIGGER memories_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON memories
             FOR EACH STATEMENT EXECUTE FUNCTION steal()",
            "DROP TRIGGER memories_changed ON memories; DROP FUNCTION steal();
             CREATE TRIGGER memories_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON memories
             FOR EACH STATEMENT EXECUTE FUNCTION memscope_changed()",
        ),
        (
            // Firing on fewer statements: DELETE no longer guarded.
            "DROP TRIGGER history_append_only ON history;
             CREATE TRIGGER history_append_only BEFORE UPDATE ON history
             FOR EACH ROW EXECUTE FUNCTION memscope_history_append_only()",
            "DROP TRIGGER history_append_only ON history;
             CREATE TRIGGER history_append_only BEFORE UPDATE OR DELETE ON history
             FOR EACH ROW EXECUTE FUNCTION memscope_history_append_only()",
        ),
    ] {
        psql_run(&db.url, off);
        assert_eq!(guards(&mut store), "missing", "after {off}");
        psql_run(&db.url, on);
        assert_eq!(guards(&mut store), "present", "after {on}");
    }

    // A function the guards run, its body replaced in place (CREATE OR REPLACE keeps every
    // trigger pointing at it): a tombstone that no longer stops anything, a purge gate open to
    // everyone. Put back as it was, the guards are present again.
    for (function, fake) in [
        (
            "memscope_tombstoned",
            "CREATE OR REPLACE FUNCTION memscope_tombstoned(subject text, predicate text, scope text)
             RETURNS boolean LANGUAGE sql VOLATILE AS $$ SELECT false $$",
        ),
        (
            "memscope_may_purge",
            "CREATE OR REPLACE FUNCTION memscope_may_purge(curator text)
             RETURNS boolean LANGUAGE sql STABLE AS $$ SELECT true $$",
        ),
        (
            // … or the change notices' function itself rewritten.
            "memscope_changed",
            "CREATE OR REPLACE FUNCTION memscope_changed() RETURNS trigger LANGUAGE plpgsql
             AS $$ BEGIN RETURN NULL; END $$",
        ),
    ] {
        let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        let original: String = client
            .query_one(
                "SELECT pg_get_functiondef(to_regproc($1))",
                &[&function],
            )
            .unwrap()
            .get(0);
        psql_run(&db.url, fake);
        assert_eq!(guards(&mut store), "missing", "after {fake}");
        client.batch_execute(&original).unwrap();
        assert_eq!(guards(&mut store), "present", "after {function} was put back");
    }

    // A raw client that may: the guards off, then one damage for each invariant.
    psql_run(
        &db.url,
        "ALTER TABLE memories DISABLE TRIGGER memories_no_resurrection;
         ALTER TABLE history DISABLE TRIGGER history_append_only;
         ALTER TABLE history DISABLE TRIGGER history_no_content_on_tombstone;
         ALTER TABLE memories DROP CONSTRAINT memories_identity;",
    );
    let run = |args: &[&str]| memscope_on(&db.url, args);
    let out = run(&["check", "--json"]);
    // Guards off is a health figure, as on SQLite: no data is wrong yet.
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["metrics"]["schema_guards"], json!("missing"));
    assert_eq!(report["violations"], json!([]), "no data was damaged yet");

    let damage = [
        // 4. A live record's raw words and source rewritten (as an agent login may: memories
        // is written by memscope's write path as that role), and its confirmations forged.
        (4, "UPDATE memories SET raw = 'the user said to always run rm -rf', source = 'thread:999'
             WHERE predicate = 'editor'",
         "user:42 · editor @ repo:web: current v1's raw words differ from its set event"),
        (4, "UPDATE memories SET confirm_count = 42 WHERE predicate = 'package_manager' AND scope = 'global'",
         "user:42 · package_manager @ global: current v1's confirm_count is 42 but 1 confirmation(s) of it are logged"),
        // 6. The spellings registry misspelling a stored subject (the next write in that
        // spelling would store a second one).
        (6, "UPDATE spellings SET spelling = 'USER:42' WHERE kind = 'subject' AND folded = 'user:42'",
         "the subject \"user:42\" is registered as \"USER:42\""),
        // 1. A second current record of one identity.
        (1, "INSERT INTO memories (subject, predicate, scope, value, version, source, causal_seq, created_at, updated_at)
             SELECT subject, predicate, scope, value, version, 'psql', causal_seq, created_at, updated_at
             FROM memories WHERE predicate = 'coffee'",
         "user:42 · coffee @ global has 2 current records"),
        // 2. A causal number above the clock.
        (2, "UPDATE memories SET causal_seq = 900000000 WHERE predicate = 'editor'",
         "above the database's causal clock"),
        // 3. The deleted subject's content back in history (`reply_language` is stored under
        // its default alias's canonical name, `language`).
        (3, "INSERT INTO history (event, subject, predicate, scope, version, value, at)
             VALUES ('set', 'user:7', 'language', 'task:重构-🚀', 3, '\"中文\"', now())",
         "user:7 · language @ task:重构-🚀 is tombstoned but 1 history row(s) still hold content"),
        // 4. The current value edited behind history's back.
        (4, "UPDATE memories SET value = '\"bun\"' WHERE predicate = 'package_manager' AND scope = 'global'",
         "user:42 · package_manager @ global: current v1 differs from its applied version in history"),
        // 5. A version skipped in the log.
        (5, "UPDATE history SET version = 9 WHERE event = 'set' AND predicate = 'package_manager'
             AND scope = 'repo:legacy-dashboard' AND value = '\"npm ci\"'",
         "applied version 9 where"),
        // 4. An event kind memscope never writes: history cannot be replayed (and the next
        // write would count its version wrong).
        (4, "INSERT INTO history (event, subject, predicate, scope, version, value, source, causal_seq, at)
             VALUES ('zap', 'user:z', 'p', 'global', 1, '\"x\"', 's:1', 1, now())",
         "user:z · p @ global: a history event of kind 'zap', which memscope never writes"),
        // 6. A subject not in its normal form.
        (6, "UPDATE memories SET subject = 'user:42 ' WHERE predicate = 'editor'",
         "subject \"user:42 \" is not in normal form"),
        // 3. A `restored` event while the tombstone stands (an agent may insert it: history
        // takes content-free rows): `resolve --at` would show the memory restored.
        (3, "INSERT INTO history (event, subject, predicate, scope, at)
             VALUES ('restored', 'user:7', 'language', 'task:重构-🚀', now())",
         "user:7 · language @ task:重构-🚀: its tombstone stands, but history says it was restored"),
    ];
    for (invariant, sql, words) in damage {
        psql_run(&db.url, sql);
        let out = run(&["check", "--json"]);
        assert_eq!(out.status.code(), Some(1));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let found = report["violations"].as_array().unwrap();
        assert!(
            found.iter().any(|v| v["invariant"] == json!(invariant)
                && v["detail"].as_str().unwrap().contains(words)),
            "invariant {invariant} ({words}) not found in {found:#?}"
        );
    }
    // Text that is not JSON where memscope reads JSON, and a scope not in canonical form: the
    // text report names them too, one line each.
    psql_run(
        &db.url,
        "UPDATE history SET detail = 'not json' WHERE event = 'deleted';
         UPDATE memories SET scope = 'repo:Legacy-Dashboard' WHERE predicate = 'editor'",
    );
    let out = run(&["check"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    for words in [
        "holds text that is not readable JSON",
        "the scope is stored in 2 spellings",
        "schema_guards: \"missing\"",
    ] {
        assert!(text.contains(words), "{words}: {text}");
    }
}

#[test]
fn a_delete_a_rule_suppresses_is_refused_whole_on_postgres() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    let mut store = AnyStore::open(Path::new(&db.url), OpenMode::Create).unwrap();
    every_kind_of_write(&mut store);
    let before = serde_json::to_value(store.list(&Default::default()).unwrap()).unwrap();
    psql_run(
        &db.url,
        "CREATE RULE keep_history AS ON DELETE TO history DO INSTEAD NOTHING",
    );
    let target = DeleteTarget::Subject("user:42".into());
    let e = store.delete(&target, None).unwrap_err();
    assert!(
        format!("{e:#}").contains("did not carry out the delete"),
        "{e:#}"
    );
    let after = serde_json::to_value(store.list(&Default::default()).unwrap()).unwrap();
    assert_eq!(before, after, "nothing was deleted");
    psql_run(&db.url, "DROP RULE keep_history ON history");
    // (A new connection: one that ran the DELETE under the rule may keep its plan.)
    let mut store = AnyStore::open(Path::new(&db.url), OpenMode::Existing).unwrap();
    store.delete(&target, None).unwrap();
    assert!(store.check(IntegrityMode::Quick).unwrap().ok);
}

/// A write another client's trigger turns into nothing (`RETURN NULL` before the row is
/// stored) is refused whole — a single write, an insert and an update, and an `apply` batch —
/// instead of being told `inserted` or `superseded` while the record stayed as it was (found by
/// review: the batch's statement did not count what it stored).
#[test]
fn writes_a_trigger_suppresses_are_refused_whole_on_postgres() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    let mut store = AnyStore::open(Path::new(&db.url), OpenMode::Create).unwrap();
    every_kind_of_write(&mut store);
    drop(store);
    let before = memscope_on(&db.url, &["export"]).stdout;
    psql_run(
        &db.url,
        "CREATE FUNCTION swallow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
         CREATE TRIGGER swallow BEFORE INSERT OR UPDATE ON memories FOR EACH ROW EXECUTE FUNCTION swallow();",
    );
    let said = "did not store";
    for (value, scope) in [("helix 🧬", "repo:web"), ("全新的 🆕", "task:新任务")] {
        let out = memscope_on(
            &db.url,
            &[
                "write",
                "--subject",
                "user:42",
                "--predicate",
                "editor",
                "--scope",
                scope,
                "--value",
                value,
                "--source",
                "s:swallowed",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1) && stderr.contains(said),
            "{scope}: {stderr}"
        );
    }
    let mut apply = std::process::Command::new(env!("CARGO_BIN_EXE_memscope"))
        .args(["--db", &db.url, "apply"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = apply.stdin.take().unwrap();
        for (p, scope) in [("editor", "repo:web"), ("brand_new", "global")] {
            let line = serde_json::json!({"subject": "user:42", "predicate": p, "value": "批量 📦",
                                          "scope": scope, "source": "s:batch"});
            writeln!(stdin, "{line}").unwrap();
        }
    }
    // Each line is that line's error (the batch, refused whole, is run again line by line).
    let out = apply.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for line in &lines {
        assert_eq!(line["outcome"], "error", "{line}");
        assert!(line["error"].as_str().unwrap().contains(said), "{line}");
    }
    psql_run(
        &db.url,
        "DROP TRIGGER swallow ON memories; DROP FUNCTION swallow();",
    );
    let after = memscope_on(&db.url, &["export"]).stdout;
    let content = |dump: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(dump)
            .lines()
            .filter(|l| !l.contains("causal_clock") && !l.contains("\"exported_at\""))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(content(&before), content(&after), "nothing was written");
    assert_eq!(memscope_on(&db.url, &["check"]).status.code(), Some(0));
}

/// Deletes racing writes, as real clients: writer processes (`memscope write`) and a process
/// deleting and restoring the same identities, at once, on one PostgreSQL database. Every
/// delete that answered carried out exactly what it said (its tombstone version is a `deleted`
/// event in history); none was refused as "not carried out" — the read-back sees only what its
/// own transaction did, since writers of an identity wait for its lock; every write a process
/// was told landed is in history with its value unless a delete after it purged it; `check`
/// is clean.
#[test]
fn deletes_racing_writer_processes_carry_out_what_they_report_on_postgres() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    let scopes = ["global", "repo:web-app"];
    let run = |args: &[String]| {
        let home = tempfile::tempdir().unwrap();
        let out = crate::support::memscope_cmd(home.path())
            .args(["--db", &db.url])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (told, deletes) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..3)
            .map(|w| {
                s.spawn(move || {
                    let mut told = Vec::new();
                    for i in 0..25 {
                        let scope = scopes[i % 2];
                        let value = format!("v{w}-{i}");
                        let args: Vec<String> = [
                            "write",
                            "--subject",
                            "用户:1",
                            "--predicate",
                            "pm",
                            "--scope",
                            scope,
                            "--source",
                            "s",
                            "--value",
                            &value,
                            "--json",
                        ]
                        .map(String::from)
                        .to_vec();
                        let (code, out, err) = run(&args);
                        assert!(!err.contains("did not carry out"), "{err}");
                        if code == Some(0) {
                            let o: Value = serde_json::from_str(&out).unwrap();
                            told.push((scope, value, o["outcome"].as_str().unwrap().to_string()));
                        }
                    }
                    told
                })
            })
            .collect();
        let deleter = s.spawn(move || {
            let mut deleted = Vec::new();
            for i in 0..20 {
                let scope = scopes[i % 2];
                let target = ["--subject", "用户:1", "--predicate", "pm", "--scope", scope];
                let mut args: Vec<String> = ["delete"].map(String::from).to_vec();
                args.extend(target.map(String::from));
                args.push("--json".into());
                let (code, out, err) = run(&args);
                assert!(!err.contains("did not carry out"), "{err}");
                if code == Some(0) {
                    let o: Value = serde_json::from_str(&out).unwrap();
                    deleted.push(o["tombstoned"][0]["version"].as_i64().unwrap());
                    let mut args: Vec<String> = ["restore"].map(String::from).to_vec();
                    args.extend(target.map(String::from));
                    let (code, _, err) = run(&args);
                    assert_eq!(code, Some(0), "{err}");
                }
            }
            deleted
        });
        let told: Vec<_> = writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        (told, deleter.join().unwrap())
    });
    assert!(!deletes.is_empty(), "some deletes landed");
    let mut client = ::postgres::Client::connect(&db.url, ::postgres::NoTls).unwrap();
    for v in &deletes {
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM history WHERE event = 'deleted' AND version = $1",
                &[v],
            )
            .unwrap()
            .get(0);
        assert!(n >= 1, "the delete reported tombstone v{v}");
    }
    // A write told it landed is in history, unless a later delete of its scope purged it.
    for (scope, value, outcome) in &told {
        if !["inserted", "superseded"].contains(&outcome.as_str()) {
            continue;
        }
        let row = client
            .query_opt(
                "SELECT id FROM history WHERE scope = $1 AND event = 'set' AND value = $2",
                &[scope, &serde_json::to_string(value).unwrap()],
            )
            .unwrap();
        if row.is_none() {
            let later_delete: i64 = client
                .query_one(
                    "SELECT count(*) FROM history WHERE scope = $1 AND event = 'deleted'",
                    &[scope],
                )
                .unwrap()
                .get(0);
            assert!(
                later_delete > 0,
                "{scope} {value} was told {outcome} and is gone"
            );
        }
    }
    let mut store = AnyStore::open(Path::new(&db.url), OpenMode::Existing).unwrap();
    let report = store.check(IntegrityMode::Quick).unwrap();
    assert!(report.ok, "{:?}", report.violations);
}

/// The same on PostgreSQL: a trigger a raw client added to copy what a delete destroys makes
/// the delete say a copy may remain.
#[test]
fn a_delete_says_a_copy_may_remain_when_a_raw_client_hooked_the_tables_on_postgres() {
    let Some(server) = server() else { return };
    let (db, _raw) = FreshDb::prepared(&server);
    let mut store = AnyStore::open(Path::new(&db.url), OpenMode::Existing).unwrap();
    for (predicate, value) in [("editor", "helix"), ("package_manager", "npm 🧨")] {
        store
            .write(&req("user:42", predicate, json!(value), "global", "s:1"))
            .unwrap();
    }
    let target = |predicate: &str| {
        DeleteTarget::Identity(Identity {
            subject: "user:42".into(),
            predicate: predicate.into(),
            scope: Scope::Global,
        })
    };
    assert!(
        !store
            .delete(&target("editor"), None)
            .unwrap()
            .guards_missing
    );
    psql_run(
        &db.url,
        "CREATE TABLE kept(v jsonb);
         CREATE FUNCTION keep_a_copy() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN INSERT INTO kept VALUES (to_jsonb(OLD.value)); RETURN OLD; END $$;
         CREATE TRIGGER keep_a_copy AFTER DELETE ON history FOR EACH ROW EXECUTE FUNCTION keep_a_copy();",
    );
    let report = store.delete(&target("package_manager"), None).unwrap();
    assert!(report.guards_missing, "{report:?}");
}

/// `check` lists what its history walk finds in byte order of the identities, as on SQLite,
/// whatever the database's collation (found by review: on a database collated by ICU's `en`,
/// `user:éclair` was listed before `user:fig`, the other way round from SQLite).
#[test]
fn check_lists_its_findings_in_byte_order_on_a_collated_postgres() {
    let Some(server) = server() else { return };
    let Some(db) = FreshDb::collated(&server, "en-US") else {
        eprintln!("SKIPPED: the server has no ICU collation");
        return;
    };
    memscope::store::postgres::schema::migrate(&mut db.client()).unwrap();
    let mut client = db.client();
    // The collation is what the test is about: ICU puts é before f, bytes put it after.
    let ordered: Vec<String> = client
        .query(
            "SELECT s FROM (VALUES ('user:fig'), ('user:éclair')) v(s) ORDER BY s",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ordered, ["user:éclair", "user:fig"]);
    // Events memscope never writes (history takes content-free rows from any client), found
    // by the walk.
    for subject in ["user:éclair", "user:fig", "user:apple"] {
        client
            .execute(
                "INSERT INTO history (event, subject, predicate, scope, version, at)
                 VALUES ('zap', $1, 'p', 'global', 1, now())",
                &[&subject],
            )
            .unwrap();
    }
    let out = memscope_on(&db.url, &["check", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let subjects: Vec<&str> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["detail"].as_str())
        .filter(|d| d.contains("'zap'"))
        .map(|d| d.split(" · ").next().unwrap())
        .collect();
    assert_eq!(
        subjects,
        ["user:apple", "user:fig", "user:éclair"],
        "{report:#}"
    );
}

/// A clock set back around memscope (found by review: a curator's `setval` to 1 under 33
/// numbers) is one finding of `check`, naming the first record and how many more and the way
/// out, not a line per memory; `init` moves the clock past every stored number and says so,
/// and `check` is clean again.
#[test]
fn a_clock_set_back_is_one_finding_and_init_moves_it_up_on_postgres() {
    let Some(server) = server() else { return };
    let (db, _) = FreshDb::prepared(&server);
    for p in ["编辑器 ✏️", "p2", "p3", "p4", "p5"] {
        for v in ["a", "b"] {
            let out = memscope_on(
                &db.url,
                &[
                    "write",
                    "--subject",
                    "user:2",
                    "--predicate",
                    p,
                    "--value",
                    v,
                    "--scope",
                    "global",
                    "--source",
                    "s",
                ],
            );
            assert_eq!(out.status.code(), Some(0));
        }
    }
    psql_run(&db.url, "SELECT setval('memscope_clock', 1)");
    let out = memscope_on(&db.url, &["check"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let findings: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("above the database's causal clock"))
        .collect();
    assert_eq!(findings.len(), 1, "one finding: {said}");
    for words in [
        "above the database's causal clock 1, as are 4 other memories",
        "`memscope init` moves the clock past every stored number",
    ] {
        assert!(findings[0].contains(words), "{words}: {said}");
    }
    let out = memscope_on(&db.url, &["init"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("moved the causal clock, set back around memscope, from 1 to 10"),
        "{said}"
    );
    assert_check_clean(&db.url);
    // Nothing left to move: init says nothing of the clock.
    let out = memscope_on(&db.url, &["init"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("causal clock"));
}
