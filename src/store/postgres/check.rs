//! `check` on PostgreSQL: the rules of `store::check` over one REPEATABLE READ, READ ONLY
//! snapshot, plus whether the schema's guards (triggers, the identity's unique constraint) are
//! all there and enabled. The server guards its own pages; there is no file for memscope to
//! examine, so the report has no integrity section (README, "Running on PostgreSQL").

use super::store::PgStore;
use crate::store::check::{
    check_report, CheckDb, CheckReport, CheckRow, CurrentRow, Filter, HistoryRow, Key, Step,
};
use anyhow::{bail, Result};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::Type;
use postgres::{Row, Transaction};

/// `pg_trigger.tgtype` bits (PostgreSQL's `catalog/pg_trigger.h`).
const ROW: i16 = 1;
const BEFORE: i16 = 2;
const INSERT: i16 = 4;
const DELETE: i16 = 8;
const UPDATE: i16 = 16;
const TRUNCATE: i16 = 32;

/// One guard trigger as the migrations leave it.
struct Guard {
    name: &'static str,
    table: &'static str,
    function: &'static str,
    /// When and on what it fires, as `pg_trigger.tgtype` (no bit: AFTER, FOR EACH STATEMENT).
    kind: i16,
}

const fn guard(
    name: &'static str,
    table: &'static str,
    function: &'static str,
    kind: i16,
) -> Guard {
    Guard {
        name,
        table,
        function,
        kind,
    }
}

/// The guard triggers (schema v1, the statement-level ones since v4).
const TRIGGERS: [Guard; 7] = [
    guard(
        "memories_no_resurrection",
        "memories",
        "memscope_memories_no_resurrection",
        INSERT,
    ),
    guard(
        "memories_no_resurrection_update",
        "memories",
        "memscope_memories_no_resurrection",
        UPDATE,
    ),
    guard(
        "history_no_content_on_tombstone",
        "history",
        "memscope_history_no_content_on_tombstone",
        INSERT,
    ),
    guard(
        "history_append_only",
        "history",
        "memscope_history_append_only",
        BEFORE | ROW | UPDATE | DELETE,
    ),
    guard(
        "history_append_only_truncate",
        "history",
        "memscope_history_append_only",
        BEFORE | TRUNCATE,
    ),
    guard(
        "tombstones_not_over_live",
        "tombstones",
        "memscope_tombstones_not_over_live",
        BEFORE | ROW | INSERT,
    ),
    guard(
        "tombstones_version_only_rises",
        "tombstones",
        "memscope_tombstones_version_only_rises",
        BEFORE | ROW | UPDATE,
    ),
];

/// The triggers that send the UI's change notice (schema v5), each calling `memscope_changed`.
const CHANGE_NOTICES: [&str; 5] = [
    "memories_changed",
    "history_changed",
    "tombstones_changed",
    "pending_changed",
    "reads_changed",
];

/// The functions the guards run, and those they call: a body replaced in place guards nothing.
const GUARD_FUNCTIONS: [&str; 8] = [
    "memscope_memories_no_resurrection",
    "memscope_history_no_content_on_tombstone",
    "memscope_history_append_only",
    "memscope_tombstones_not_over_live",
    "memscope_tombstones_version_only_rises",
    "memscope_identity_lock",
    "memscope_tombstoned",
    "memscope_may_purge",
];

/// A snapshot lent to the check.
pub(super) struct Pg<'a, 'b>(pub(super) &'a mut Transaction<'b>);

/// A value of any type, read only to learn that it is not NULL.
struct Present;

impl<'a> postgres::types::FromSql<'a> for Present {
    fn from_sql(
        _: &Type,
        _: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Present)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

impl CheckRow for Row {
    fn text(&self, i: usize) -> Option<&str> {
        match *self.columns().get(i)?.type_() {
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                self.try_get::<_, Option<&str>>(i).ok().flatten()
            }
            _ => None,
        }
    }

    fn int(&self, i: usize) -> Option<i64> {
        match *self.columns().get(i)?.type_() {
            Type::INT8 => self.try_get::<_, Option<i64>>(i).ok().flatten(),
            Type::INT4 => self
                .try_get::<_, Option<i32>>(i)
                .ok()
                .flatten()
                .map(i64::from),
            Type::INT2 => self
                .try_get::<_, Option<i16>>(i)
                .ok()
                .flatten()
                .map(i64::from),
            _ => None,
        }
    }

    fn is_null(&self, i: usize) -> bool {
        matches!(self.try_get::<_, Option<Present>>(i), Ok(None))
    }

    fn show(&self, i: usize) -> String {
        let Some(column) = self.columns().get(i) else {
            return String::new();
        };
        match *column.type_() {
            Type::TIMESTAMPTZ => self
                .try_get::<_, Option<chrono::DateTime<chrono::Utc>>>(i)
                .ok()
                .flatten()
                .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
                .unwrap_or_default(),
            Type::BOOL => self
                .try_get::<_, Option<bool>>(i)
                .ok()
                .flatten()
                .map(|b| b.to_string())
                .unwrap_or_default(),
            Type::FLOAT8 => self
                .try_get::<_, Option<f64>>(i)
                .ok()
                .flatten()
                .map(|f| f.to_string())
                .unwrap_or_default(),
            _ => match self.int(i) {
                Some(n) => n.to_string(),
                None => self.text(i).unwrap_or_default().to_string(),
            },
        }
    }
}

impl CheckDb for Pg<'_, '_> {
    fn each(
        &mut self,
        sql: &str,
        params: &[&str],
        each: &mut dyn FnMut(&dyn CheckRow) -> Result<bool>,
    ) -> Result<()> {
        let mut rows = self.0.query_raw(sql, params.iter())?;
        while let Some(r) = rows.next()? {
            if !each(&r)? {
                break;
            }
        }
        Ok(())
    }

    fn json_int(&self, expr: &str, key: &str) -> String {
        // No JSON cast: text a raw client wrote may not be JSON, and a failed cast would end
        // the check. memscope writes details with serde_json.
        format!(r#"(substring({expr} from '"{key}"\s*:\s*(\d{{1,18}})'))::bigint"#)
    }

    fn clock(&mut self) -> Result<i64> {
        Ok(crate::model::clock_as_it_stands(
            self.0
                .query_one("SELECT memscope_clock_current()", &[])?
                .get(0),
        ))
    }

    fn schema_problems(&mut self) -> Result<Vec<String>> {
        let mut out = crate::store::check::missing_columns(|table| {
            Ok(self
                .0
                .query(
                    "SELECT a.attname::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                       JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = current_schema() AND c.relname = $1 AND c.relkind IN ('r', 'p')
                        AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                    &[&table],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })?;
        // And what PostgreSQL's schema alone makes: its functions (the guards', the clock's, the
        // write path's), the clock, its own tables — each named by the migrations that create it.
        for &(kind, name) in super::schema::created_objects() {
            let relkind = match kind {
                "function" => None,
                "sequence" => Some("S"),
                _ => Some("r"),
            };
            if kind == "table"
                && crate::store::schema::contract_columns()
                    .iter()
                    .any(|(t, _)| t == name)
            {
                continue;
            }
            let present: bool = match relkind {
                None => self.0.query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                                     WHERE n.nspname = current_schema() AND p.proname = $1)",
                    &[&name],
                )?,
                Some(k) => self.0.query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                                     WHERE n.nspname = current_schema() AND c.relname = $1
                                       AND c.relkind::text = $2)",
                    &[&name, &k],
                )?,
            }
            .get(0);
            if !present {
                out.push(format!("{kind} {name} is missing"));
            }
        }
        Ok(out)
    }

    fn guard_problems(&mut self) -> Result<Vec<String>> {
        Ok(if self.guards_intact()? {
            Vec::new()
        } else {
            vec!["a guard trigger or function, or the identity constraint, was dropped, disabled or changed, or a rule, row policy or trigger of another client sits on the guarded tables".to_string()]
        })
    }

    fn walk(
        &mut self,
        f: &Filter<'_>,
        on: &mut dyn FnMut(&Key, Step<'_>) -> Result<()>,
    ) -> Result<()> {
        // One pass: each identity's last history row carries its current record and whether
        // it has a tombstone (one statement, so the rows stream while the walk reads them).
        let sql = format!(
            "SELECT w.subject, w.predicate, w.scope, w.event, w.version, w.causal_seq, w.detail, w.value,
                    w.last, m.version, m.causal_seq, m.value,
                    CASE WHEN w.last THEN EXISTS (SELECT 1 FROM tombstones t
                        WHERE t.subject = w.subject AND t.predicate = w.predicate AND t.scope = w.scope) END,
                    w.raw, w.source, m.raw, m.source, m.confirm_count, m.confirmed_source, w.at
             FROM (SELECT h.id, h.subject, h.predicate, h.scope, h.event, h.version, h.causal_seq, h.detail, h.value,
                          h.raw, h.source, h.at,
                          lead(h.id) OVER (PARTITION BY h.subject, h.predicate, h.scope ORDER BY h.id) IS NULL AS last
                   FROM history h WHERE {}) w
             LEFT JOIN LATERAL (SELECT m.version, m.causal_seq, m.value, m.raw, m.source, m.confirm_count,
                                       m.confirmed_source FROM memories m
                                WHERE w.last AND m.subject = w.subject AND m.predicate = w.predicate
                                  AND m.scope = w.scope LIMIT 1) m ON true
             ORDER BY w.subject, w.predicate, w.scope, w.id",
            f.sql("h")
        );
        let mut rows = self.0.query_raw(&sql, f.params())?;
        while let Some(r) = rows.next()? {
            let key: Key = (r.show(0), r.show(1), r.show(2));
            on(
                &key,
                Step::Event(HistoryRow {
                    event: r.show(3),
                    version: r.int(4),
                    seq: r.int(5),
                    detail: r.text(6).map(str::to_string),
                    value: r.text(7).map(str::to_string),
                    raw: r.text(13).map(str::to_string),
                    source: r.text(14).map(str::to_string),
                    at: Some(r.show(19)).filter(|t| !t.is_empty()),
                }),
            )?;
            if r.get::<_, Option<bool>>(8) == Some(true) {
                let current = r.int(9).map(|version| CurrentRow {
                    version,
                    causal_seq: r.int(10).unwrap_or(0),
                    value: r.show(11),
                    raw: r.text(15).map(str::to_string),
                    source: r.text(16).map(str::to_string),
                    confirm_count: r.int(17),
                    confirmed_source: r.text(18).map(str::to_string),
                });
                let tombstone = r.get::<_, Option<bool>>(12) == Some(true);
                on(
                    &key,
                    Step::End {
                        current,
                        tombstone: &mut || Ok(tombstone),
                    },
                )?;
            }
        }
        Ok(())
    }
}

impl PgStore {
    /// `init`'s repair of the spellings registry ([`crate::store::check::registry_repairs`]):
    /// the places whose registered spelling it set to the one stored.
    pub fn repair_registry(&mut self) -> Result<Vec<(String, String, String)>> {
        self.in_change_tx(|t| {
            let repairs = crate::store::check::registry_repairs(&mut Pg(t.txn()?))?;
            for (kind, key, spelling) in &repairs {
                t.exec(
                    "INSERT INTO spellings (kind, folded, spelling) VALUES ($1, $2, $3)
                     ON CONFLICT (kind, folded) DO UPDATE SET spelling = EXCLUDED.spelling",
                    &[kind, key, spelling],
                )?;
            }
            Ok(repairs)
        })
    }

    /// Whether memscope's guards stand as its migrations made them, and nothing else hooks the
    /// tables that hold content (`check`'s `schema_guards`).
    pub(super) fn guards_present(&mut self) -> Result<bool> {
        let client = self.connection()?;
        let mut tx = client.build_transaction().read_only(true).start()?;
        let present = Pg(&mut tx).guards_present()?;
        tx.commit()?;
        Ok(present)
    }

    /// Every invariant over the whole database, in one snapshot, plus the health figures; a
    /// refusal of the server (a login that may not read the clock) is one sentence.
    pub fn check(&mut self) -> Result<CheckReport> {
        let report = self.check_snapshot();
        self.explained(report)
    }

    fn check_snapshot(&mut self) -> Result<CheckReport> {
        let address = self.address().clone();
        let (mut report, commit, suspects) = self.snapshot(|t| {
            // Now as an export taken now would say it: rounded to the millisecond as a row's
            // time is stored (`export_snapshot`). A schema that lost `memscope_now` is the
            // report's to name, in a savepoint so that the check still runs.
            t.txn()?.batch_execute("SAVEPOINT now")?;
            let now = t
                .one("SELECT memscope_now()::timestamptz(3)", &[])
                .map(|r| r.get::<_, chrono::DateTime<chrono::Utc>>(0));
            t.txn()?.batch_execute(if now.is_ok() {
                "RELEASE SAVEPOINT now"
            } else {
                "ROLLBACK TO SAVEPOINT now"
            })?;
            let report = check_report(&mut Pg(t.txn()?), now.ok())?;
            let commit: String = t.one("SHOW synchronous_commit", &[])?.get(0);
            // Global records that look like the rule of one place, as on SQLite (`memscope
            // suspects` lists them), in the same snapshot. A health figure: data the scan
            // cannot read (a raw client's detail that is not JSON) leaves it out, in a
            // savepoint so that the report still commits.
            t.txn()?.batch_execute("SAVEPOINT suspects")?;
            let suspects = PgStore::suspect_count(t);
            t.txn()?.batch_execute(if suspects.is_ok() {
                "RELEASE SAVEPOINT suspects"
            } else {
                "ROLLBACK TO SAVEPOINT suspects"
            })?;
            Ok((report, commit, suspects.ok()))
        })?;
        // Durability is the server's: `synchronous_commit` decides when a commit is on disk.
        report.metrics.insert(
            "durability".into(),
            serde_json::json!(format!("server: synchronous_commit={commit}")),
        );
        report
            .metrics
            .insert("backend".into(), serde_json::json!(address.describe()));
        if let Some(found) = suspects {
            report
                .metrics
                .insert("suspects".into(), serde_json::json!(found));
        }
        Ok(report)
    }
}

impl Pg<'_, '_> {
    /// Whether every guard is in place (README, "check"): one query over the catalogs.
    fn guards_intact(&mut self) -> Result<bool> {
        // Each guard on its table, calling memscope's function, firing when and on what the
        // migrations made it fire, with no condition of its own, and enabled as on creation
        // ('O') or always ('A') — disabled ('D') or replica-only ('R') guards nothing. Each
        // function they run holds the body the migrations wrote: one replaced in place by a
        // raw client (CREATE OR REPLACE) guards something else.
        let names: Vec<&str> = TRIGGERS.iter().map(|g| g.name).collect();
        let tables: Vec<&str> = TRIGGERS.iter().map(|g| g.table).collect();
        let functions: Vec<&str> = TRIGGERS.iter().map(|g| g.function).collect();
        let kinds: Vec<i16> = TRIGGERS.iter().map(|g| g.kind).collect();
        let bodies: Vec<&str> = GUARD_FUNCTIONS
            .iter()
            .map(|f| super::schema::function_body(f).unwrap_or_default())
            .collect();
        let row = self.0.query_one(
            &format!("SELECT (SELECT count(DISTINCT t.tgname) FROM pg_trigger t
                       JOIN unnest($1::text[], $2::text[], $3::text[], $4::int2[])
                            AS g(name, tab, function, kind) ON g.name = t.tgname
                     WHERE NOT t.tgisinternal AND t.tgenabled IN ('O', 'A')
                       AND t.tgrelid = to_regclass(g.tab) AND t.tgfoid = to_regproc(g.function)
                       AND t.tgtype = g.kind AND t.tgqual IS NULL AND t.tgattr = ''::int2vector),
                    EXISTS (SELECT 1 FROM pg_constraint c
                            WHERE c.conname = 'memories_identity' AND c.conrelid = to_regclass('memories')
                              AND c.contype = 'u'
                              AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM pg_attribute a
                                   WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey))
                                  = ARRAY['predicate', 'scope', 'subject'])
                    -- And tombstones' key: without it a raw client may store a second
                    -- tombstone of one identity.
                    AND EXISTS ({TOMBSTONE_KEY}),
                    (SELECT count(*) FROM unnest($5::text[], $6::text[]) AS f(name, body)
                     JOIN pg_proc p ON p.oid = to_regproc(f.name)
                     JOIN pg_namespace n ON n.oid = p.pronamespace
                     WHERE p.prosrc = f.body AND NOT p.prosecdef
                       AND p.proconfig = ARRAY['search_path=' || quote_ident(n.nspname) || ', pg_temp']),
                    -- Nothing of a raw client's that can make a guarded statement do nothing or
                    -- hide a row from a guard (a rule, a row policy, another BEFORE trigger), or
                    -- copy what memscope destroys elsewhere (any other trigger on a table that
                    -- holds content): only the guards and the change notices, each calling its
                    -- own function, and that function as the migrations wrote it.
                    NOT EXISTS (SELECT 1 FROM pg_rewrite r WHERE r.ev_class IN
                                (to_regclass('memories'), to_regclass('history'), to_regclass('tombstones')))
                    AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid IN
                                (to_regclass('memories'), to_regclass('history'), to_regclass('tombstones'))
                                AND (c.relrowsecurity OR c.relforcerowsecurity))
                    AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE NOT t.tgisinternal
                                AND t.tgrelid IN (to_regclass('memories'), to_regclass('history'),
                                                  to_regclass('tombstones'), to_regclass('pending'), to_regclass('reads'))
                                AND NOT EXISTS (SELECT 1 FROM unnest($1::text[], $2::text[], $3::text[]) AS g(name, tab, function)
                                                WHERE g.name = t.tgname AND to_regclass(g.tab) = t.tgrelid
                                                  AND to_regproc(g.function) = t.tgfoid)
                                AND NOT (t.tgname = ANY ($7::text[]) AND t.tgfoid = to_regproc('memscope_changed')))
                    AND (SELECT p.prosrc FROM pg_proc p WHERE p.oid = to_regproc('memscope_changed'))
                        IS NOT DISTINCT FROM $8
                    -- The clock's owner-rights function is no login's but memscope's roles'
                    -- (schema v8).
                    AND NOT coalesce(has_function_privilege('public',
                                to_regprocedure('memscope_clock_observe(bigint)'), 'EXECUTE'), false)"),
            &[
                &names,
                &tables,
                &functions,
                &kinds,
                &GUARD_FUNCTIONS.to_vec(),
                &bodies,
                &CHANGE_NOTICES.to_vec(),
                &super::schema::function_body("memscope_changed"),
            ],
        )?;
        Ok(row.get::<_, i64>(0) == TRIGGERS.len() as i64
            && row.get::<_, bool>(1)
            && row.get::<_, i64>(2) == GUARD_FUNCTIONS.len() as i64
            && row.get::<_, bool>(3))
    }
}

/// The catalog query that finds tombstones' key: a primary key or unique constraint on exactly
/// the identity's three columns.
const TOMBSTONE_KEY: &str = "SELECT 1 FROM pg_constraint c
     WHERE c.conrelid = to_regclass('tombstones') AND c.contype IN ('p', 'u')
       AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM pg_attribute a
            WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey))
           = ARRAY['predicate', 'scope', 'subject']";

/// Makes memscope's guard functions and triggers, the identity constraint and the UI's change
/// notices again when the guards are not intact (README, "check": `init` restores the guards);
/// whether anything was done. A rule, row policy or trigger of another client is left alone:
/// `check` goes on reporting it, for its owner to remove.
pub(super) fn restore_guards(tx: &mut Transaction<'_>) -> Result<bool> {
    if Pg(tx).guards_present()? {
        return Ok(false);
    }
    let mut functions: Vec<&str> = GUARD_FUNCTIONS.to_vec();
    functions.push("memscope_changed");
    let mut triggers: Vec<(&str, &str)> = TRIGGERS.iter().map(|g| (g.name, g.table)).collect();
    for notice in CHANGE_NOTICES {
        triggers.push((notice, notice.trim_end_matches("_changed")));
    }
    tx.batch_execute(&super::schema::guard_restore_sql(&functions, &triggers)?)?;
    tx.batch_execute("REVOKE EXECUTE ON FUNCTION memscope_clock_observe(bigint) FROM PUBLIC")?;
    let unique = tx.batch_execute(
        "DO $$ BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_constraint c
                           WHERE c.conname = 'memories_identity' AND c.conrelid = to_regclass('memories')
                             AND c.contype = 'u'
                             AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM pg_attribute a
                                  WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey))
                                 = ARRAY['predicate', 'scope', 'subject']) THEN
                ALTER TABLE memories DROP CONSTRAINT IF EXISTS memories_identity;
                ALTER TABLE memories ADD CONSTRAINT memories_identity UNIQUE (scope, subject, predicate);
            END IF;
        END $$;",
    );
    // Two current records of one identity stand (a client dropped the constraint): the
    // transaction rolls back, and the sentence says how to repair them.
    match unique {
        Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
            bail!(crate::store::check::IDENTITY_NOT_UNIQUE)
        }
        Err(e) => bail!(depended_on(e, "memories", "its identity constraint")),
        done => done?,
    }
    let key = tx.batch_execute(&format!(
        "DO $$ BEGIN
            IF NOT EXISTS ({TOMBSTONE_KEY}) THEN
                ALTER TABLE tombstones DROP CONSTRAINT IF EXISTS tombstones_pkey;
                -- A raw client's primary key on other columns holds the one place a table has
                -- for a primary key: it goes, or the identity's key cannot be made (found by
                -- review: a raw 42P16 error).
                EXECUTE coalesce((SELECT format('ALTER TABLE tombstones DROP CONSTRAINT %I', c.conname)
                                  FROM pg_constraint c
                                  WHERE c.conrelid = to_regclass('tombstones') AND c.contype = 'p'),
                                 'SELECT 1');
                ALTER TABLE tombstones ADD CONSTRAINT tombstones_pkey PRIMARY KEY (subject, predicate, scope);
            END IF;
        END $$;"
    ));
    match key {
        Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
            bail!(crate::store::check::TOMBSTONE_NOT_UNIQUE)
        }
        Err(e) => bail!(depended_on(e, "tombstones", "its identity key")),
        done => done?,
    }
    Ok(true)
}

/// The sentence for a constraint of another client's that `init` must drop to make `what` of
/// `table` again, when another object depends on it (a foreign key, a view: the server's
/// 2BP01, found by review); any other error as it stands.
fn depended_on(e: postgres::Error, table: &str, what: &str) -> anyhow::Error {
    if e.code() != Some(&postgres::error::SqlState::DEPENDENT_OBJECTS_STILL_EXIST) {
        return e.into();
    }
    let detail = e
        .as_db_error()
        .and_then(|d| d.detail())
        .map(crate::model::escape_controls)
        .unwrap_or_default();
    anyhow::anyhow!(
        "cannot give {table} {what} again: another client's constraint on {table} stands in its place, and another object depends on it ({detail}); drop that object with a SQL client, then run init again"
    )
}
