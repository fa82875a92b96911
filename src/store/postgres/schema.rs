//! The schema contract on PostgreSQL (docs/SCHEMA.md, "On PostgreSQL"): the tables and columns
//! of SQLite schema 5 in PostgreSQL types, the guards as constraints and triggers, the version
//! in `memscope_schema`, and the forward migrations — all run in one transaction.

use anyhow::{bail, Context, Result};
use postgres::{Client, Transaction};

/// The PostgreSQL schema version this build writes (1 holds the tables of SQLite schema 5; 2
/// adds the causal clock; 3 opens the purge gate to curators only; 4 adds the write path's
/// one-round-trip look and `apply`'s batched probe and clock; 5 lets the terminal UI watch:
/// the change notices and the view's index in byte order; 6 reads the time in one place,
/// `memscope_now()`, which a session may set; 7 finds the open pending item a write repeats by
/// an index, as SQLite schema 6 does; 8 lets only memscope's roles move the clock; 9 indexes
/// the repeats by a digest of the source, so a long source is no longer refused; 10 indexes the
/// read log by digests of the subject and predicate, so a read of a long name is logged; 11
/// indexes the places the scope guard cannot find by a token of the words; 12 keeps the clock's
/// last numbers for writes without their own; 13 indexes the rare events `gc` looks for; 14
/// stamps every row of one operation with one time, taken after its locks).
pub const SCHEMA_VERSION: i64 = 14;

/// Migration `i` takes a database from version `i` to `i + 1`.
pub type Migration = &'static str;

pub const MIGRATIONS: &[Migration] = &[V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14];

/// The tables memscope creates: a database holding any of them without `memscope_schema` is
/// not memscope's, and is refused.
pub const TABLES: &[&str] = &[
    "memscope_schema",
    "settings",
    "metrics",
    "predicate_aliases",
    "memories",
    "history",
    "tombstones",
    "pending",
    "reads",
    "spellings",
    "watchers",
];

/// The body of function `name` as the last migration that writes it defines it — what
/// `pg_proc.prosrc` holds for a database memscope migrated (the text between `AS $$` and
/// `$$`) — or `None` for a function no migration creates.
pub fn function_body(name: &str) -> Option<&'static str> {
    let create = last_statement(name).filter(|s| !s.starts_with("CREATE TRIGGER"))?;
    let start = create.find("AS $$")? + "AS $$".len();
    let len = create[start..].find("$$")?;
    Some(&create[start..start + len])
}

/// The statement that creates trigger `name` (`CREATE TRIGGER name …;`) or function `name`
/// (`CREATE [OR REPLACE] FUNCTION name(… $$;`) as the last migration that writes it has it.
fn last_statement(name: &str) -> Option<&'static str> {
    MIGRATIONS.iter().rev().find_map(|sql| {
        let trigger = format!("CREATE TRIGGER {name} ");
        if let Some(at) = sql.rfind(&trigger) {
            let len = sql[at..].find(';')? + 1;
            return Some(&sql[at..at + len]);
        }
        let at = [
            format!("CREATE FUNCTION {name}("),
            format!("CREATE OR REPLACE FUNCTION {name}("),
        ]
        .iter()
        .filter_map(|head| sql.rfind(head.as_str()))
        .max()?;
        let body = at + sql[at..].find("AS $$")? + "AS $$".len();
        let close = body + sql[body..].find("$$")? + 2;
        let len = close - at + sql[close..].find(';')? + 1;
        Some(&sql[at..at + len])
    })
}

/// SQL that makes memscope's guard functions and triggers (and the UI's change notices) again
/// as the migrations left them (README, "check": `init` restores the guards): each function
/// replaced in place with memscope's schema and `pg_temp` as its search_path, each trigger
/// dropped and created. `triggers` are (name, table) pairs. Run it in a transaction, as the
/// tables' owner.
pub fn guard_restore_sql(functions: &[&str], triggers: &[(&str, &str)]) -> Result<String> {
    let mut sql = String::from(
        "SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);\n",
    );
    for name in functions {
        let create = last_statement(name)
            .with_context(|| format!("no migration creates the function {name}"))?;
        let create = create
            .strip_prefix("CREATE FUNCTION ")
            .map(|rest| format!("CREATE OR REPLACE FUNCTION {rest}"))
            .unwrap_or_else(|| create.to_string());
        sql.push_str(&create);
        sql.push('\n');
    }
    for (name, table) in triggers {
        let create = last_statement(name)
            .with_context(|| format!("no migration creates the trigger {name}"))?;
        sql.push_str(&format!(
            "DROP TRIGGER IF EXISTS {name} ON {table};\n{create}\n"
        ));
    }
    Ok(sql)
}

/// The transaction-local setting that opens history to memscope's purge:
/// `SET LOCAL memscope.purge = 'on'` (it ends with the transaction). From v2 it opens it only
/// to a curator ([`CURATOR_ROLE`]) or the owner of the tables.
pub const PURGE_SETTING: &str = "memscope.purge";

/// The group role whose members may purge (`memscope roles` creates it; v2's gate names it).
pub const CURATOR_ROLE: &str = "memscope_curator";

/// Key of the advisory transaction lock that serializes preparing the schema.
const MIGRATION_LOCK: i64 = 0x6d65_6d73_636f_7065; // "memscope"

/// v1: the contract of SQLite schema 4. Times are `timestamptz(3)` (milliseconds, as SQLite's
/// RFC 3339 text); JSON is `text`, kept exactly as written (the first spelling), like SQLite.
const V1: &str = r#"
CREATE TABLE memscope_schema (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version  bigint NOT NULL CHECK (version >= 1)
);

CREATE TABLE settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE metrics (
    name  text PRIMARY KEY,
    value bigint NOT NULL DEFAULT 0
);

CREATE TABLE predicate_aliases (
    alias     text PRIMARY KEY,
    canonical text NOT NULL CHECK (canonical <> ''),
    added_at  timestamptz(3) NOT NULL,
    CHECK (alias <> canonical)
);

CREATE TABLE memories (
    id               bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    subject          text NOT NULL CHECK (subject <> ''),
    predicate        text NOT NULL CHECK (predicate <> ''),
    scope            text NOT NULL CHECK (scope = 'global' OR scope LIKE 'repo:_%' OR scope LIKE 'task:_%'),
    value            text NOT NULL,
    version          bigint NOT NULL CHECK (version >= 1),
    source           text NOT NULL CHECK (source <> ''),
    raw              text,
    causal_seq       bigint NOT NULL,
    created_at       timestamptz(3) NOT NULL,
    updated_at       timestamptz(3) NOT NULL,
    confirmed_at     timestamptz(3),
    confirm_count    bigint NOT NULL DEFAULT 0,
    confirmed_source text,
    confirmed_seq    bigint,
    -- Invariant 1; scope first, so the same index serves the current view grouped by scope.
    CONSTRAINT memories_identity UNIQUE (scope, subject, predicate)
);

-- Identity ids never go back: a purge logs its `deleted` event before removing older rows.
CREATE TABLE history (
    id         bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    event      text NOT NULL,
    subject    text NOT NULL,
    predicate  text NOT NULL,
    scope      text NOT NULL,
    version    bigint,
    value      text,
    raw        text,
    source     text,
    causal_seq bigint,
    at         timestamptz(3) NOT NULL,
    detail     text,
    clock      bigint
);
CREATE INDEX history_by_identity ON history (subject, predicate, scope, id);

CREATE TABLE tombstones (
    subject    text NOT NULL,
    predicate  text NOT NULL,
    scope      text NOT NULL,
    version    bigint NOT NULL CHECK (version >= 1),
    reason     text,
    deleted_at timestamptz(3) NOT NULL,
    PRIMARY KEY (subject, predicate, scope)
);

CREATE TABLE pending (
    id             bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    subject        text NOT NULL,
    predicate      text NOT NULL,
    value          text NOT NULL,
    raw            text,
    source         text NOT NULL,
    causal_seq     bigint NOT NULL,
    candidates     text NOT NULL CHECK (json_typeof(candidates::json) = 'array' AND json_array_length(candidates::json) >= 1),
    status         text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved', 'rejected')),
    created_at     timestamptz(3) NOT NULL,
    resolved_at    timestamptz(3),
    resolved_scope text,
    resolution     text,
    merged_from    text,
    reason         text
);
CREATE INDEX pending_open ON pending (status, id);
CREATE INDEX pending_by_identity ON pending (subject, predicate);

CREATE TABLE reads (
    id        bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at        timestamptz(3) NOT NULL,
    agent     text,
    subject   text NOT NULL,
    predicate text NOT NULL,
    repo      text,
    task      text,
    scope     text,
    version   bigint,
    shadowed  text CHECK (shadowed IS NULL OR json_typeof(shadowed::json) = 'array'),
    note      text
);
CREATE INDEX reads_by_time ON reads (at);
CREATE INDEX reads_by_identity ON reads (subject, predicate, at);

CREATE TABLE spellings (
    kind     text NOT NULL CHECK (kind IN ('subject', 'scope')),
    folded   text NOT NULL,
    spelling text NOT NULL CHECK (spelling <> ''),
    PRIMARY KEY (kind, folded)
);

-- The guards. Each function keeps the search_path it was created with (memscope's schema), so a
-- client with another search_path cannot point them at other tables.

-- One identity's advisory transaction lock. A guard that looks at another table for the same
-- identity takes it first, so a tombstone and a record committed by two transactions at once
-- cannot both pass; memscope's write path takes the same lock.
CREATE FUNCTION memscope_identity_lock(subject text, predicate text, scope text) RETURNS void
LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $$
    SELECT pg_advisory_xact_lock(hashtextextended(subject || chr(31) || predicate || chr(31) || scope, 0))
$$;

-- Whether the identity is tombstoned. VOLATILE: read with a snapshot taken after the lock above.
CREATE FUNCTION memscope_tombstoned(subject text, predicate text, scope text) RETURNS boolean
LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $$
    SELECT EXISTS (SELECT 1 FROM tombstones t
                   WHERE t.subject = $1 AND t.predicate = $2 AND t.scope = $3)
$$;

-- Invariant 3, at the lowest level: nothing becomes current on a tombstoned identity.
CREATE FUNCTION memscope_memories_no_resurrection() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM memscope_identity_lock(NEW.subject, NEW.predicate, NEW.scope);
    IF memscope_tombstoned(NEW.subject, NEW.predicate, NEW.scope) THEN
        RAISE EXCEPTION 'memscope: identity is tombstoned; restore it first'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER memories_no_resurrection BEFORE INSERT OR UPDATE ON memories
FOR EACH ROW EXECUTE FUNCTION memscope_memories_no_resurrection();

-- Content may not be logged against a tombstoned identity.
CREATE FUNCTION memscope_history_no_content_on_tombstone() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF memscope_tombstoned(NEW.subject, NEW.predicate, NEW.scope) THEN
        RAISE EXCEPTION 'memscope: identity is tombstoned; its content may not be stored'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER history_no_content_on_tombstone BEFORE INSERT ON history
FOR EACH ROW WHEN (NEW.value IS NOT NULL OR NEW.raw IS NOT NULL)
EXECUTE FUNCTION memscope_history_no_content_on_tombstone();

-- History is append-only: UPDATE, DELETE and TRUNCATE are refused unless the transaction set
-- `SET LOCAL memscope.purge = 'on'`, as memscope's purge path does.
CREATE FUNCTION memscope_history_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('memscope.purge', true) IS DISTINCT FROM 'on' THEN
        RAISE EXCEPTION 'memscope: history is append-only'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER history_append_only BEFORE UPDATE OR DELETE ON history
FOR EACH ROW EXECUTE FUNCTION memscope_history_append_only();
CREATE TRIGGER history_append_only_truncate BEFORE TRUNCATE ON history
FOR EACH STATEMENT EXECUTE FUNCTION memscope_history_append_only();

-- A tombstone is made by memscope's delete, which removes the record first.
CREATE FUNCTION memscope_tombstones_not_over_live() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM memscope_identity_lock(NEW.subject, NEW.predicate, NEW.scope);
    IF EXISTS (SELECT 1 FROM memories m
               WHERE m.subject = NEW.subject AND m.predicate = NEW.predicate AND m.scope = NEW.scope) THEN
        RAISE EXCEPTION 'memscope: delete the identity with memscope delete, not by inserting a tombstone'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER tombstones_not_over_live BEFORE INSERT ON tombstones
FOR EACH ROW EXECUTE FUNCTION memscope_tombstones_not_over_live();

CREATE FUNCTION memscope_tombstones_version_only_rises() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.version < OLD.version OR NEW.subject IS DISTINCT FROM OLD.subject
       OR NEW.predicate IS DISTINCT FROM OLD.predicate OR NEW.scope IS DISTINCT FROM OLD.scope THEN
        RAISE EXCEPTION 'memscope: a tombstone version never goes down'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER tombstones_version_only_rises BEFORE UPDATE ON tombstones
FOR EACH ROW EXECUTE FUNCTION memscope_tombstones_version_only_rises();
"#;

/// v2: the causal clock, database-wide. A write without a causal number takes the clock's
/// next ([`memscope_clock_next`]); one with a number moves the clock up to it
/// ([`memscope_clock_observe`]), so a later write without one is newer. Writers of different
/// identities run at once, so the clock is a sequence, not a row every writer would wait on;
/// moving a sequence up (`setval`) is not atomic with a concurrent `nextval`, so the two take
/// one advisory lock — shared to allocate, exclusive to move up — held only around the sequence
/// call itself, never to the end of the transaction (nothing else is waited for while it is
/// held, so it cannot take part in a deadlock). A rolled-back write leaves a gap in the clock,
/// as it may: the clock orders, it does not count.
const V2: &str = r#"
CREATE SEQUENCE memscope_clock AS bigint MINVALUE 1 START 1;

CREATE FUNCTION memscope_clock_next() RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE v bigint;
BEGIN
    PERFORM pg_advisory_lock_shared(7165349316052316227);
    v := nextval('memscope_clock');
    PERFORM pg_advisory_unlock_shared(7165349316052316227);
    RETURN v;
END
$$;

-- The clock's value now: the last number handed out (0 before the first).
CREATE FUNCTION memscope_clock_current() RETURNS bigint
LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $$
    SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM memscope_clock
$$;

CREATE FUNCTION memscope_clock_observe(seen bigint) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
    -- The clock only moves up, so one already past `seen` needs no lock.
    IF seen <= memscope_clock_current() THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_lock(7165349316052316227);
    IF seen > memscope_clock_current() THEN
        PERFORM setval('memscope_clock', seen, true);
    END IF;
    PERFORM pg_advisory_unlock(7165349316052316227);
END
$$;

-- One write's look at its identity, in one round trip: the identity's lock first (writers of
-- one identity wait here for each other), then — each query with a snapshot taken after the
-- lock, so it sees what the writer before committed — the tombstone, the current record with
-- the highest causal number that set or confirmed it, the last version ever used (only when
-- there is neither), and the write's causal number: none for a tombstoned identity, its own
-- (which moves the clock up to it), or the clock's next.
CREATE FUNCTION memscope_probe(p_subject text, p_predicate text, p_scope text, p_seen bigint,
    OUT tombstone bigint, OUT cur_version bigint, OUT cur_value text, OUT cur_seq bigint,
    OUT last_version bigint, OUT seq bigint)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM memscope_identity_lock(p_subject, p_predicate, p_scope);
    SELECT t.version INTO tombstone FROM tombstones t
     WHERE t.subject = p_subject AND t.predicate = p_predicate AND t.scope = p_scope;
    SELECT m.version, m.value, greatest(m.causal_seq, coalesce(m.confirmed_seq, 0))
      INTO cur_version, cur_value, cur_seq
      FROM memories m
     WHERE m.subject = p_subject AND m.predicate = p_predicate AND m.scope = p_scope;
    last_version := 0;
    IF tombstone IS NULL AND cur_version IS NULL THEN
        SELECT coalesce(max(h.version), 0) INTO last_version FROM history h
         WHERE h.subject = p_subject AND h.predicate = p_predicate AND h.scope = p_scope;
    END IF;
    IF tombstone IS NOT NULL THEN
        seq := 0;
    ELSIF p_seen IS NOT NULL THEN
        PERFORM memscope_clock_observe(p_seen);
        seq := p_seen;
    ELSE
        seq := memscope_clock_next();
    END IF;
END
$$;
"#;

/// v3: the purge gate asks who is purging, and the guards no longer read temporary tables.
///
/// Until v3 any client could say `SET LOCAL memscope.purge = 'on'`, so a role allowed to
/// `DELETE` history (by mistake, or through PUBLIC) could open the gate itself. Now the gate
/// also wants the *current* role — the one PostgreSQL checks privileges against, so a curator
/// who `SET ROLE memscope_agent` is an agent here too — to hold the privileges of
/// `memscope_curator` or of the tables' owner (a superuser holds every role's). A database whose
/// cluster has no `memscope_curator` yet is purged by its owner as before.
///
/// A function's search_path without `pg_temp` still reads the session's temporary tables
/// *first*: a client could shadow `tombstones` with an empty temporary table and write a
/// current record over a deleted identity. Every guard now searches `pg_temp` last.
const V3: &str = r#"
SELECT set_config('search_path', current_setting('search_path') || ', pg_temp', true);

-- Whether the current role may purge history: a curator, the tables' owner, a superuser.
-- `curator` is a role name; a role that does not exist makes no one a curator.
CREATE FUNCTION memscope_may_purge(curator text) RETURNS boolean
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT pg_has_role(current_user, (SELECT c.relowner FROM pg_class c
                                      WHERE c.oid = 'history'::regclass), 'USAGE')
        OR coalesce((SELECT pg_has_role(current_user, r.oid, 'USAGE')
                     FROM pg_roles r WHERE r.rolname = curator), false)
$$;

CREATE OR REPLACE FUNCTION memscope_history_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('memscope.purge', true) IS DISTINCT FROM 'on' THEN
        RAISE EXCEPTION 'memscope: history is append-only'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NOT memscope_may_purge('memscope_curator') THEN
        RAISE EXCEPTION 'memscope: history is append-only; only memscope_curator or the owner of memscope''s tables may purge it'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;

ALTER FUNCTION memscope_identity_lock(text, text, text) SET search_path FROM CURRENT;
ALTER FUNCTION memscope_tombstoned(text, text, text) SET search_path FROM CURRENT;
ALTER FUNCTION memscope_memories_no_resurrection() SET search_path FROM CURRENT;
ALTER FUNCTION memscope_history_no_content_on_tombstone() SET search_path FROM CURRENT;
ALTER FUNCTION memscope_tombstones_not_over_live() SET search_path FROM CURRENT;
ALTER FUNCTION memscope_tombstones_version_only_rises() SET search_path FROM CURRENT;
ALTER FUNCTION memscope_clock_next() SET search_path FROM CURRENT;
ALTER FUNCTION memscope_clock_current() SET search_path FROM CURRENT;
ALTER FUNCTION memscope_probe(text, text, text, bigint) SET search_path FROM CURRENT;

-- Moving the clock up takes UPDATE on its sequence, which would also let a writer move it
-- down (`setval`): the function runs as the owner instead, so writers need only USAGE.
ALTER FUNCTION memscope_clock_observe(bigint) SET search_path FROM CURRENT;
ALTER FUNCTION memscope_clock_observe(bigint) SECURITY DEFINER;
"#;

/// v4: fewer round trips on the write path (issue 17's speed), no new table and no new rule.
///
/// `memscope_write_look` is what a single write must know, in one round trip: its predicate
/// through the alias table, its subject's and scope's stored spellings (registered when new,
/// exactly as the write path registered them statement by statement), the scope guard's mode
/// and — unless the write must first pass the guard (`p_probe` false) — `memscope_probe`'s
/// look at the identity. `apply` probes a batch at once: `memscope_probe_many` locks every
/// identity of the batch in the order of their lock keys (two batches sharing identities lock
/// them in one order, so they cannot deadlock each other), then reads what `memscope_probe`
/// reads, one row per identity; `memscope_clock_take` hands out the batch's causal numbers in
/// its lines' order (`p_seen` null: the clock's next; a number: the clock moves up to it;
/// `p_current`: the clock's value now, for a rejected line's record). None of them decides an
/// outcome: the core does, in Rust.
const V4: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);

-- The guards and the probe, their workings inlined: each call of a function that sets its own
-- search_path switches the setting in and out, and the nested calls (the lock, the tombstone
-- check, the clock) cost a write more than its own statements. The two guards on the write
-- path check a statement's rows at once (transition tables) instead of one row at a time: the
-- record's guard takes every new identity's lock in lock-key order, then — with a snapshot
-- taken after them — looks for tombstones. Same checks, same lock keys, same refusals.
CREATE OR REPLACE FUNCTION memscope_memories_no_resurrection() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(k.k) FROM (
        SELECT DISTINCT hashtextextended(n.subject || chr(31) || n.predicate || chr(31) || n.scope, 0) AS k
        FROM memscope_new_rows n ORDER BY 1) k;
    IF EXISTS (SELECT 1 FROM memscope_new_rows n JOIN tombstones t
               ON t.subject = n.subject AND t.predicate = n.predicate AND t.scope = n.scope) THEN
        RAISE EXCEPTION 'memscope: identity is tombstoned; restore it first'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER memories_no_resurrection ON memories;
CREATE TRIGGER memories_no_resurrection AFTER INSERT ON memories
REFERENCING NEW TABLE AS memscope_new_rows
FOR EACH STATEMENT EXECUTE FUNCTION memscope_memories_no_resurrection();
CREATE TRIGGER memories_no_resurrection_update AFTER UPDATE ON memories
REFERENCING NEW TABLE AS memscope_new_rows
FOR EACH STATEMENT EXECUTE FUNCTION memscope_memories_no_resurrection();

CREATE OR REPLACE FUNCTION memscope_history_no_content_on_tombstone() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM memscope_new_rows n JOIN tombstones t
               ON t.subject = n.subject AND t.predicate = n.predicate AND t.scope = n.scope
               WHERE n.value IS NOT NULL OR n.raw IS NOT NULL) THEN
        RAISE EXCEPTION 'memscope: identity is tombstoned; its content may not be stored'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER history_no_content_on_tombstone ON history;
CREATE TRIGGER history_no_content_on_tombstone AFTER INSERT ON history
REFERENCING NEW TABLE AS memscope_new_rows
FOR EACH STATEMENT EXECUTE FUNCTION memscope_history_no_content_on_tombstone();

CREATE OR REPLACE FUNCTION memscope_probe(p_subject text, p_predicate text, p_scope text, p_seen bigint,
    OUT tombstone bigint, OUT cur_version bigint, OUT cur_value text, OUT cur_seq bigint,
    OUT last_version bigint, OUT seq bigint)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(
        p_subject || chr(31) || p_predicate || chr(31) || p_scope, 0));
    SELECT t.version INTO tombstone FROM tombstones t
     WHERE t.subject = p_subject AND t.predicate = p_predicate AND t.scope = p_scope;
    SELECT m.version, m.value, greatest(m.causal_seq, coalesce(m.confirmed_seq, 0))
      INTO cur_version, cur_value, cur_seq
      FROM memories m
     WHERE m.subject = p_subject AND m.predicate = p_predicate AND m.scope = p_scope;
    last_version := 0;
    IF tombstone IS NULL AND cur_version IS NULL THEN
        SELECT coalesce(max(h.version), 0) INTO last_version FROM history h
         WHERE h.subject = p_subject AND h.predicate = p_predicate AND h.scope = p_scope;
    END IF;
    IF tombstone IS NOT NULL THEN
        seq := 0;
    ELSIF p_seen IS NOT NULL THEN
        PERFORM memscope_clock_observe(p_seen);
        seq := p_seen;
    ELSE
        PERFORM pg_advisory_lock_shared(7165349316052316227);
        seq := nextval('memscope_clock');
        PERFORM pg_advisory_unlock_shared(7165349316052316227);
    END IF;
END
$$;

-- A spelling, registered when new (the first spelling of a key is kept).
CREATE FUNCTION memscope_spelling(p_kind text, p_folded text, p_text text) RETURNS text
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE s text;
BEGIN
    SELECT spelling INTO s FROM spellings WHERE kind = p_kind AND folded = p_folded;
    IF s IS NULL THEN
        INSERT INTO spellings (kind, folded, spelling) VALUES (p_kind, p_folded, p_text)
        ON CONFLICT (kind, folded) DO NOTHING;
        SELECT spelling INTO s FROM spellings WHERE kind = p_kind AND folded = p_folded;
    END IF;
    RETURN s;
END
$$;

CREATE FUNCTION memscope_write_look(p_predicate text, p_subject text, p_subject_folded text,
    p_scope text, p_scope_folded text, p_seen bigint, p_probe boolean,
    OUT predicate text, OUT subject text, OUT scope text, OUT guard_mode text,
    OUT tombstone bigint, OUT cur_version bigint, OUT cur_value text, OUT cur_seq bigint,
    OUT last_version bigint, OUT seq bigint, OUT clock bigint)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
    predicate := coalesce((SELECT a.canonical FROM predicate_aliases a WHERE a.alias = p_predicate),
                          p_predicate);
    subject := (SELECT s.spelling FROM spellings s
                WHERE s.kind = 'subject' AND s.folded = p_subject_folded);
    IF subject IS NULL THEN
        subject := memscope_spelling('subject', p_subject_folded, p_subject);
    END IF;
    IF p_scope_folded IS NULL THEN
        scope := p_scope;
    ELSE
        scope := (SELECT s.spelling FROM spellings s
                  WHERE s.kind = 'scope' AND s.folded = p_scope_folded);
        IF scope IS NULL THEN
            scope := memscope_spelling('scope', p_scope_folded, p_scope);
        END IF;
    END IF;
    guard_mode := (SELECT s.value FROM settings s WHERE s.key = 'scope_guard');
    IF p_probe THEN
        SELECT p.tombstone, p.cur_version, p.cur_value, p.cur_seq, p.last_version, p.seq
          INTO tombstone, cur_version, cur_value, cur_seq, last_version, seq
          FROM memscope_probe(subject, predicate, scope, p_seen) p;
    END IF;
    clock := (SELECT CASE WHEN c.is_called THEN c.last_value ELSE c.last_value - 1 END
              FROM memscope_clock c);
END
$$;

CREATE FUNCTION memscope_probe_many(p_subjects text[], p_predicates text[], p_scopes text[])
RETURNS TABLE (ord bigint, tombstone bigint, cur_version bigint, cur_value text, cur_seq bigint,
               last_version bigint)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
    -- The outer query locks the keys as the sorted subquery yields them.
    PERFORM pg_advisory_xact_lock(k.k) FROM (
        SELECT DISTINCT hashtextextended(i.s || chr(31) || i.p || chr(31) || i.c, 0) AS k
        FROM unnest(p_subjects, p_predicates, p_scopes) AS i(s, p, c) ORDER BY 1) k;
    RETURN QUERY
    SELECT i.n, t.version, m.version, m.value,
           greatest(m.causal_seq, coalesce(m.confirmed_seq, 0)),
           CASE WHEN t.version IS NULL AND m.version IS NULL THEN
                (SELECT coalesce(max(h.version), 0) FROM history h
                 WHERE h.subject = i.s AND h.predicate = i.p AND h.scope = i.c)
           ELSE 0 END
      FROM unnest(p_subjects, p_predicates, p_scopes) WITH ORDINALITY AS i(s, p, c, n)
      LEFT JOIN tombstones t ON t.subject = i.s AND t.predicate = i.p AND t.scope = i.c
      LEFT JOIN memories m ON m.subject = i.s AND m.predicate = i.p AND m.scope = i.c
     ORDER BY i.n;
END
$$;

CREATE FUNCTION memscope_clock_take(p_seen bigint[], p_current boolean[]) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE
    taken bigint[] := '{}';
    shared boolean := false;
    i int;
BEGIN
    -- The clock's shared lock is held across a run of next numbers, let go before a move up.
    FOR i IN 1 .. coalesce(array_length(p_seen, 1), 0) LOOP
        IF p_current[i] THEN
            taken[i] := (SELECT CASE WHEN c.is_called THEN c.last_value ELSE c.last_value - 1 END
                         FROM memscope_clock c);
        ELSIF p_seen[i] IS NULL THEN
            IF NOT shared THEN
                PERFORM pg_advisory_lock_shared(7165349316052316227);
                shared := true;
            END IF;
            taken[i] := nextval('memscope_clock');
        ELSE
            IF shared THEN
                PERFORM pg_advisory_unlock_shared(7165349316052316227);
                shared := false;
            END IF;
            PERFORM memscope_clock_observe(p_seen[i]);
            taken[i] := p_seen[i];
        END IF;
    END LOOP;
    IF shared THEN
        PERFORM pg_advisory_unlock_shared(7165349316052316227);
    END IF;
    RETURN taken;
END
$$;
"#;

/// v5: what the terminal UI watches (README, "Running on PostgreSQL"). A UI registers its
/// connection in `watchers` and LISTENs on `memscope_changed`; a statement that changes what
/// the UI shows sends one notice (identical notices of one transaction are folded into one,
/// delivered at its commit) — but only while some UI watches: a NOTIFY serializes the commits
/// of the transactions that send one, a price paid only when someone looks. `watchers` is
/// UNLOGGED (a crash empties it; a UI registers again when it reconnects). The function runs
/// as its owner, so a role granted before v5 writes without a grant on `watchers`. And the
/// current view's index in byte order (`COLLATE "C"`, SQLite's order, whatever the database's
/// collation), which the UI's keyset pages walk.
const V5: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);

CREATE UNLOGGED TABLE watchers (
    pid     integer PRIMARY KEY,
    started timestamptz NOT NULL
);

CREATE FUNCTION memscope_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM watchers) THEN
        PERFORM pg_notify('memscope_changed', '');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON memories
FOR EACH STATEMENT EXECUTE FUNCTION memscope_changed();
CREATE TRIGGER history_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON history
FOR EACH STATEMENT EXECUTE FUNCTION memscope_changed();
CREATE TRIGGER tombstones_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tombstones
FOR EACH STATEMENT EXECUTE FUNCTION memscope_changed();
CREATE TRIGGER pending_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON pending
FOR EACH STATEMENT EXECUTE FUNCTION memscope_changed();
CREATE TRIGGER reads_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON reads
FOR EACH STATEMENT EXECUTE FUNCTION memscope_changed();

CREATE INDEX memories_view ON memories (scope COLLATE "C", subject COLLATE "C", predicate COLLATE "C");
"#;

/// v6: the time memscope stamps and ages by, read in one place (docs/SCHEMA.md, schema 6):
/// `memscope_now()` is the server's `clock_timestamp()` unless the session set
/// `memscope.now` to an instant — what a test does to move time for one connection, as
/// SQLite's fixed clock does (the model-based test's gc over tombstones days old). It moves only
/// the timestamps that session writes and the cutoffs its gc computes; a role that may insert
/// could write any timestamp anyway. A plain SQL function (no `SET`), so the planner inlines it.
/// And `memscope_write_look` takes `memscope_probe`'s body inline (same lock, same reads, same
/// clock), as v4 did for the guards: a single write's look no longer calls a nested function.
/// v7: the open pending item an ambiguous write repeats, found by index (SQLite schema 6).
/// v8: only memscope's roles (and the owner) move the clock. `memscope_clock_observe` runs as
/// the owner, and PostgreSQL lets every login execute a new function: found by review, a login
/// with no grant at all pushed the clock past 2^53 and stopped every write. It now refuses a
/// number past 2^53 too, where the clock cannot go on.
/// v9: `pending_repeats` keys the source by its MD5 digest. A b-tree entry holds about 2,700
/// bytes, and the source is not held to the id limit: an ambiguous write with a source of a
/// few kilobytes was refused on PostgreSQL alone (found by review). The query compares the
/// digest (the index's key) and the source itself.
/// v10: `reads_by_identity` keys the read log by the MD5 digests of the subject and the
/// predicate, for the same reason: a read names whatever it asks for, and one whose subject
/// and predicate ran past about 2,700 bytes together (an identity written before the id limit,
/// a mistyped name) failed on PostgreSQL alone, its index entry refused. Two digests, not one
/// of both, so a filter on the subject alone still finds its rows by the index. Every query
/// that reads `reads` by subject or predicate compares the digest (the index's key) and the
/// column itself, so its rows are exactly those of the name, whatever two texts share a digest.
/// The scope spellings whose id the scope guard finds in a write's words other than as one of
/// its tokens: an id holding a character outside `guard::is_id_char`'s set (`[A-Za-z0-9._/-]`:
/// folding leaves an ASCII id in lower case, and a non-ASCII character is never an id
/// character). The write path's lookup of the places a write's words may name
/// (`write::PLACES_LOOKUP`) states it word for word, so that the planner takes the index below.
macro_rules! other_place {
    () => {
        "kind = 'scope' AND folded !~ '^(repo|task):[A-Za-z0-9._/-]*$'"
    };
}
pub(crate) use other_place;

/// v11: the scope guard looks up the places a global write's words may name instead of reading
/// every place the database knows at each write with a context: by their tokens through the
/// primary key, and the few other places — ids with a character no token holds, Chinese ones,
/// say — through this index, which holds them alone.
const V11: &str = concat!(
    "SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);\n",
    "CREATE INDEX spellings_other_places ON spellings (folded) WHERE ",
    other_place!(),
    ";\n"
);

/// v12: a number a writer brings moves the clock at most to 2^53 − 2^32, unless the clock has
/// already passed it (README, `--causal-seq`): the clock keeps its last 2^32 numbers for writes
/// without one of their own, also against a login that calls `memscope_clock_observe` by SQL
/// (found by review: an agent login could move the clock to 2^53 and stop every write without
/// a number). memscope's write path judges the number before it looks (`brought_refusal`), so
/// the refusal here is only ever met by SQL; `import`, which restores a dump's clock up to
/// 2^53, sets the sequence itself.
/// v14: one time for one operation (docs/SCHEMA.md, schema 14). `memscope_now()` read the
/// server's clock at each call, so the statements of one transaction stamped their rows with
/// times milliseconds apart (found by an exploratory test): a rescope's events at its two
/// scopes, or a delete's `deleted` event and its tombstone, and `resolve --at` inside the gap
/// showed a move half done. `memscope_stamp()` takes the time once — memscope calls it right
/// after an operation's identity locks (`store::lock_and_stamp`) — and `memscope_now()` returns
/// it for the rest of the transaction, as SQLite's one time per transaction. A write without a
/// stamp (the write path's own statement, `apply`'s batch) reads the clock as before, after
/// the locks its look took: a stamp taken before a later lock could date a row before the write
/// it waited for.
const V14: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);

CREATE OR REPLACE FUNCTION memscope_now() RETURNS timestamptz
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT coalesce(nullif(current_setting('memscope.stamp', true), '')::timestamptz,
                    nullif(current_setting('memscope.now', true), '')::timestamptz, clock_timestamp())
$$;

CREATE OR REPLACE FUNCTION memscope_stamp() RETURNS timestamptz
LANGUAGE sql VOLATILE AS $$
    SELECT set_config('memscope.stamp',
        coalesce(nullif(current_setting('memscope.now', true), '')::timestamptz,
                 clock_timestamp())::timestamptz(3)::text, true)::timestamptz
$$;
"#;

/// v13: SQLite schema 8's indexes of the rare events `gc`, `check` and `import` look for in the
/// whole history, so a `gc` of a million-event history reads none of the rest (0.5 s → 13 ms).
const V13: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);
CREATE INDEX IF NOT EXISTS history_kept_copy_events ON history (subject, predicate)
    WHERE event IN ('rescoped', 'reverted', 'removed', 'deleted', 'tombstone_collected');
CREATE INDEX IF NOT EXISTS history_refused_sources ON history (subject, predicate, scope)
    WHERE event IN ('rejected', 'pending_resolved') AND source IS NOT NULL;
"#;

const V12: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);

CREATE OR REPLACE FUNCTION memscope_clock_observe(seen bigint) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    -- The clock only moves up, so one already past `seen` needs no lock.
    IF seen <= memscope_clock_current() THEN
        RETURN;
    END IF;
    IF seen > 9007194959773696 THEN
        RAISE EXCEPTION 'memscope: causal number % is past 2^53 - 2^32 and ahead of the causal clock, whose last numbers are kept for writes without one of their own', seen
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    PERFORM pg_advisory_lock(7165349316052316227);
    IF seen > memscope_clock_current() THEN
        PERFORM setval('memscope_clock', seen, true);
    END IF;
    PERFORM pg_advisory_unlock(7165349316052316227);
END
$$;
"#;

const V10: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);
DROP INDEX reads_by_identity;
CREATE INDEX reads_by_identity ON reads (md5(subject), md5(predicate), at);
"#;

const V9: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);
DROP INDEX pending_repeats;
CREATE INDEX pending_repeats ON pending (subject, predicate, md5(source)) WHERE status = 'open';
"#;

const V8: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);

CREATE OR REPLACE FUNCTION memscope_clock_observe(seen bigint) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    -- The clock only moves up, so one already past `seen` needs no lock.
    IF seen <= memscope_clock_current() THEN
        RETURN;
    END IF;
    IF seen > 9007199254740992 THEN
        RAISE EXCEPTION 'memscope: causal number % is past 2^53, where the causal clock cannot go on', seen
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    PERFORM pg_advisory_lock(7165349316052316227);
    IF seen > memscope_clock_current() THEN
        PERFORM setval('memscope_clock', seen, true);
    END IF;
    PERFORM pg_advisory_unlock(7165349316052316227);
END
$$;
REVOKE EXECUTE ON FUNCTION memscope_clock_observe(bigint) FROM PUBLIC;
DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memscope_agent') THEN
        GRANT EXECUTE ON FUNCTION memscope_clock_observe(bigint) TO memscope_agent;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memscope_curator') THEN
        GRANT EXECUTE ON FUNCTION memscope_clock_observe(bigint) TO memscope_curator;
    END IF;
END $$;
"#;

const V7: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);
CREATE INDEX pending_repeats ON pending (subject, predicate, source) WHERE status = 'open';
"#;

const V6: &str = r#"
SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true);

CREATE FUNCTION memscope_now() RETURNS timestamptz
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT coalesce(nullif(current_setting('memscope.now', true), '')::timestamptz, clock_timestamp())
$$;

CREATE OR REPLACE FUNCTION memscope_write_look(p_predicate text, p_subject text, p_subject_folded text,
    p_scope text, p_scope_folded text, p_seen bigint, p_probe boolean,
    OUT predicate text, OUT subject text, OUT scope text, OUT guard_mode text,
    OUT tombstone bigint, OUT cur_version bigint, OUT cur_value text, OUT cur_seq bigint,
    OUT last_version bigint, OUT seq bigint, OUT clock bigint)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
    predicate := coalesce((SELECT a.canonical FROM predicate_aliases a WHERE a.alias = p_predicate),
                          p_predicate);
    subject := (SELECT s.spelling FROM spellings s
                WHERE s.kind = 'subject' AND s.folded = p_subject_folded);
    IF subject IS NULL THEN
        subject := memscope_spelling('subject', p_subject_folded, p_subject);
    END IF;
    IF p_scope_folded IS NULL THEN
        scope := p_scope;
    ELSE
        scope := (SELECT s.spelling FROM spellings s
                  WHERE s.kind = 'scope' AND s.folded = p_scope_folded);
        IF scope IS NULL THEN
            scope := memscope_spelling('scope', p_scope_folded, p_scope);
        END IF;
    END IF;
    guard_mode := (SELECT s.value FROM settings s WHERE s.key = 'scope_guard');
    IF p_probe THEN
        -- memscope_probe's body, inline (a nested call that sets its search_path costs a
        -- single write about a tenth of its look).
        PERFORM pg_advisory_xact_lock(hashtextextended(
            subject || chr(31) || predicate || chr(31) || scope, 0));
        SELECT t.version INTO tombstone FROM tombstones t
         WHERE t.subject = memscope_write_look.subject
           AND t.predicate = memscope_write_look.predicate AND t.scope = memscope_write_look.scope;
        SELECT m.version, m.value, greatest(m.causal_seq, coalesce(m.confirmed_seq, 0))
          INTO cur_version, cur_value, cur_seq
          FROM memories m
         WHERE m.subject = memscope_write_look.subject
           AND m.predicate = memscope_write_look.predicate AND m.scope = memscope_write_look.scope;
        last_version := 0;
        IF tombstone IS NULL AND cur_version IS NULL THEN
            SELECT coalesce(max(h.version), 0) INTO last_version FROM history h
             WHERE h.subject = memscope_write_look.subject
               AND h.predicate = memscope_write_look.predicate
               AND h.scope = memscope_write_look.scope;
        END IF;
        IF tombstone IS NOT NULL THEN
            seq := 0;
        ELSIF p_seen IS NOT NULL THEN
            PERFORM memscope_clock_observe(p_seen);
            seq := p_seen;
        ELSE
            PERFORM pg_advisory_lock_shared(7165349316052316227);
            seq := nextval('memscope_clock');
            PERFORM pg_advisory_unlock_shared(7165349316052316227);
        END IF;
    END IF;
    clock := (SELECT CASE WHEN c.is_called THEN c.last_value ELSE c.last_value - 1 END
              FROM memscope_clock c);
END
$$;
"#;

/// The objects the migrations create, as (`function` | `table` | `sequence`, name), each once
/// and in order: what `check` finds missing when a raw client dropped one.
pub(crate) fn created_objects() -> &'static [(&'static str, &'static str)] {
    static OBJECTS: std::sync::OnceLock<Vec<(&'static str, &'static str)>> =
        std::sync::OnceLock::new();
    OBJECTS.get_or_init(|| {
        let mut out: Vec<(&str, &str)> = Vec::new();
        for sql in MIGRATIONS {
            for line in sql.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                let (kind, name) = match words.as_slice() {
                    ["CREATE", "FUNCTION", name, ..]
                    | ["CREATE", "OR", "REPLACE", "FUNCTION", name, ..] => ("function", *name),
                    ["CREATE", "TABLE", name, ..] | ["CREATE", "UNLOGGED", "TABLE", name, ..] => {
                        ("table", *name)
                    }
                    ["CREATE", "SEQUENCE", name, ..] => ("sequence", *name),
                    _ => continue,
                };
                let name = name.split('(').next().unwrap_or(name);
                if !out.contains(&(kind, name)) {
                    out.push((kind, name));
                }
            }
        }
        out
    })
}

/// What a database holds, as far as memscope is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// None of memscope's tables.
    Empty,
    /// The schema of this build.
    Current,
    /// An older memscope schema: preparing brings it forward.
    Older(i64),
    /// A newer memscope schema: refused.
    Newer(i64),
    /// Tables with memscope's names but no `memscope_schema`: refused.
    Foreign(Vec<String>),
}

/// Reads what the database holds in the connection's current schema, writing nothing.
pub fn state(client: &mut Client) -> Result<State> {
    let mut tx = client.transaction()?;
    let state = state_in(&mut tx, SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(state)
}

pub(super) fn state_in(tx: &mut Transaction<'_>, target: i64) -> Result<State> {
    let names: Vec<String> = tx
        .query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = current_schema() AND c.relname = ANY($1)
             ORDER BY c.relname",
            &[&TABLES],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if names.is_empty() {
        // memscope's tables in another schema of this database, behind the first one on the
        // search path (a schema named after the login comes first by default): preparing the
        // first would make a second, empty memory beside the real one.
        let elsewhere: Vec<String> = tx
            .query(
                "SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.relname = 'memscope_schema' AND c.relkind IN ('r', 'p')
                   AND n.nspname <> current_schema() ORDER BY 1",
                &[],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if let Some(other) = elsewhere.first() {
            let first: String = tx.query_one("SELECT current_schema()::text", &[])?.get(0);
            bail!(
                "memscope's tables are in schema {other:?} of this database while this connection's first schema is {first:?} (its search_path): point the connection at {other:?} — add `?options=-csearch_path%3D{other}` to the address, or run `ALTER ROLE … SET search_path = {other}` — rather than prepare a second, empty memory in {first:?}"
            );
        }
        return Ok(State::Empty);
    }
    if !names.iter().any(|n| n == "memscope_schema") {
        return Ok(State::Foreign(names));
    }
    let version: Option<i64> = tx
        .query_opt("SELECT version FROM memscope_schema", &[])?
        .map(|r| r.get(0));
    Ok(match version {
        None => State::Foreign(names),
        Some(v) if v > target => State::Newer(v),
        Some(v) if v == target => State::Current,
        Some(v) => State::Older(v),
    })
}

/// Brings the database forward to [`SCHEMA_VERSION`]; returns the version it found.
pub fn migrate(client: &mut Client) -> Result<i64> {
    migrate_with(client, MIGRATIONS, &|_, _| Ok(()))
}

/// Brings the database forward to the last of `migrations`, all steps in one transaction, with
/// `after_step(tx, new_version)` run after each (v1 seeds the defaults). Refuses a database that
/// holds a newer schema or tables of memscope's names that memscope did not create, and leaves
/// it untouched. Returns the version it found (0: none). Processes that prepare one database at
/// the same moment wait for each other, and it is prepared once.
pub fn migrate_with(
    client: &mut Client,
    migrations: &[Migration],
    after_step: &dyn Fn(&mut Transaction<'_>, i64) -> Result<()>,
) -> Result<i64> {
    let target = migrations.len() as i64;
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    let schema: Option<String> = tx.query_one("SELECT current_schema()::text", &[])?.get(0);
    let Some(schema) = schema else {
        bail!("the database has no schema to create memscope's tables in (its search_path names none that exists): create one, or set the role's search_path");
    };
    let found = match state_in(&mut tx, target)? {
        State::Empty => 0,
        State::Current => return Ok(target),
        State::Older(v) => v,
        State::Newer(v) => bail!(
            "the database holds memscope PostgreSQL schema {v}, newer than this memscope understands ({target}): upgrade memscope to use it"
        ),
        State::Foreign(names) => bail!(
            "the database already holds tables memscope did not create ({}) in schema \"{schema}\": point the address at an empty or new database",
            names.join(", ")
        ),
    };
    // Every function created below keeps exactly this schema as its search_path.
    tx.execute(
        "SELECT set_config('search_path', quote_ident($1), true)",
        &[&schema],
    )?;
    for (step, sql) in migrations.iter().enumerate().skip(found as usize) {
        let version = step as i64 + 1;
        tx.batch_execute(sql)
            .with_context(|| format!("creating memscope's PostgreSQL schema {version}"))?;
        tx.execute(
            "INSERT INTO memscope_schema (version) VALUES ($1)
             ON CONFLICT (only_row) DO UPDATE SET version = EXCLUDED.version",
            &[&version],
        )?;
        if version == 1 {
            seed_defaults(&mut tx)?;
        }
        after_step(&mut tx, version)?;
    }
    tx.commit()?;
    Ok(found)
}

/// The aliases and settings a new database starts with, as on SQLite.
fn seed_defaults(tx: &mut Transaction<'_>) -> Result<()> {
    for (alias, canonical) in crate::store::default_aliases()? {
        tx.execute(
            "INSERT INTO predicate_aliases (alias, canonical, added_at) VALUES ($1, $2, now())
             ON CONFLICT (alias) DO UPDATE SET canonical = EXCLUDED.canonical",
            &[&alias, &canonical],
        )?;
    }
    for (key, value) in crate::store::DEFAULT_SETTINGS {
        tx.execute(
            "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            &[key, value],
        )?;
    }
    Ok(())
}
