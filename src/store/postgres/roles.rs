//! `memscope roles` on PostgreSQL: the two group roles a team's connections log in through —
//! `memscope_agent`, which writes through memscope's write path and reads, and
//! `memscope_curator`, which may do everything memscope does, deleting and purging included —
//! their privileges on memscope's tables, and optionally a login that is a member of one.
//!
//! Roles belong to the whole server (the cluster), privileges to one database: running this in
//! a second database reuses the roles and grants them that database's tables. Everything is one
//! transaction, run again it changes nothing and says so, and before committing it checks what
//! each role may do now (`has_table_privilege`), so a privilege reaching a role some other way
//! (granted to PUBLIC, or an agent login that also owns the tables) is refused, not reported
//! as done.

use super::schema::{self, CURATOR_ROLE, TABLES};
use super::Address;
use anyhow::{anyhow, bail, Result};
use postgres::error::SqlState;
use postgres::Transaction;
use serde::Serialize;

/// The agent's group role.
pub const AGENT_ROLE: &str = "memscope_agent";

/// Table privileges, in the order PostgreSQL names them; the ones not listed for a role are
/// checked to be absent.
pub const TABLE_PRIVILEGES: &[&str] = &[
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "TRUNCATE",
    "REFERENCES",
    "TRIGGER",
];

const S: &str = "SELECT";
const I: &str = "INSERT";
const U: &str = "UPDATE";
const D: &str = "DELETE";

/// What each group role may do to each of memscope's tables (docs/SCHEMA.md, "Roles"). The
/// agent writes what the write path writes — records, their events, pending items, the read
/// log, spellings, metrics — and changes nothing else; no one is given TRUNCATE, REFERENCES
/// or TRIGGER, and only the owner may alter or drop a table or its triggers.
pub const PRIVILEGES: &[(&str, &[&str], &[&str])] = &[
    // (table, memscope_agent, memscope_curator)
    ("memscope_schema", &[S], &[S]),
    ("settings", &[S], &[S, I, U, D]),
    ("metrics", &[S, I, U], &[S, I, U, D]),
    ("predicate_aliases", &[S], &[S, I, U, D]),
    ("memories", &[S, I, U], &[S, I, U, D]),
    ("history", &[S, I], &[S, I, U, D]),
    ("tombstones", &[S], &[S, I, U, D]),
    ("pending", &[S, I], &[S, I, U, D]),
    ("reads", &[S, I], &[S, I, U, D]),
    ("spellings", &[S, I], &[S, I, U, D]),
    // A UI run by either role registers and unregisters its connection.
    ("watchers", &[S, I, D], &[S, I, D]),
];

/// Privileges on the id sequences of `memories`, `history`, `pending` and `reads` and on the
/// causal clock (`memscope_clock`): reading and taking numbers; the curator may also set them
/// (an import keeps the ids it brings). The clock is moved up by `memscope_clock_observe`,
/// which runs as the owner, so an agent cannot move it down.
const AGENT_SEQUENCE: &str = "USAGE, SELECT";
const CURATOR_SEQUENCE: &str = "USAGE, SELECT, UPDATE";

/// The tables memscope's delete vacuums, which the curator may MAINTAIN on PostgreSQL 17 and
/// newer.
const VACUUMED: &[&str] = &["memories", "history", "pending", "reads"];

/// Key of the advisory transaction lock that serializes `roles` on one database.
const ROLES_LOCK: i64 = 0x6d65_6d73_726f_6c65; // "memsrole"

/// Which group role a login joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Agent,
    Curator,
}

impl Kind {
    /// The group role's name.
    pub fn role(self) -> &'static str {
        match self {
            Kind::Agent => AGENT_ROLE,
            Kind::Curator => CURATOR_ROLE,
        }
    }
}

/// A login to create (or find) and make a member of a group role.
#[derive(Clone)]
pub struct Login {
    pub name: String,
    pub kind: Kind,
    /// Set as the login's password when given (sent as a SCRAM verifier, never in clear).
    pub password: Option<String>,
}

/// What `roles` found and did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `USER@HOST:PORT/DATABASE`.
    pub database: String,
    /// The schema memscope's tables are in.
    pub schema: String,
    /// Whether anything changed: a role or login created, a privilege or membership changed.
    pub changed: bool,
    pub roles: Vec<GroupRole>,
    /// Whether the group roles' privileges in this database changed.
    pub grants_changed: bool,
    pub login: Option<LoginReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupRole {
    pub name: &'static str,
    pub created: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoginReport {
    pub name: String,
    pub member_of: &'static str,
    pub created: bool,
    /// It existed and became a member now (or was given LOGIN).
    pub granted: bool,
    /// A password was given and set (again, when the login existed: its old one is not known).
    pub password_set: bool,
}

/// Creates the group roles (when missing), gives them exactly their privileges on the tables
/// of the address's database, and makes `login` a member of its role. One transaction;
/// retried when another process creates the same roles at the same moment.
pub fn apply(address: &Address, login: Option<&Login>) -> Result<Report> {
    if let Some(login) = login {
        if login.name.is_empty() {
            bail!("the login's name is empty: name the role to log in as");
        }
        if [AGENT_ROLE, CURATOR_ROLE].contains(&login.name.as_str()) {
            bail!(
                "\"{}\" is one of memscope's group roles, which do not log in: name a login of its own, which memscope makes a member of {}",
                login.name,
                login.kind.role()
            );
        }
    }
    let mut client = address.connect()?;
    // Refused up front when the role does not own the tables: where nothing needs changing,
    // its grants would only warn, and it would report privileges it cannot keep. (Creating a
    // role needs CREATEROLE too: that is refused when it is tried.)
    let owns: Option<bool> = client
        .query_opt(
            "SELECT pg_has_role(current_user, c.relowner, 'USAGE') FROM pg_class c
              WHERE c.oid = to_regclass(quote_ident(current_schema()) || '.memories')",
            &[],
        )
        .map_err(|e| explain(address, e.into()))?
        // No such table: the schema check says so.
        .map(|row| row.get(0));
    if owns == Some(false) {
        return Err(may_not(address, Step::Grant));
    }
    let mut attempt = 0;
    loop {
        let mut tx = client.transaction()?;
        match apply_in(&mut tx, address, login).and_then(|r| {
            tx.commit()?;
            Ok(r)
        }) {
            Ok(report) => return Ok(report),
            Err(e) if attempt < 5 && raced(&e) => attempt += 1,
            Err(e) => return Err(explain(address, e)),
        }
    }
}

/// Another process created the same role, or changed the same catalog row, at the same moment
/// (roles belong to the cluster, so the database's advisory lock does not serialize them).
fn raced(e: &anyhow::Error) -> bool {
    let Some(db) = e
        .downcast_ref::<postgres::Error>()
        .and_then(postgres::Error::as_db_error)
    else {
        return false;
    };
    *db.code() == SqlState::DUPLICATE_OBJECT
        || (*db.code() == SqlState::UNIQUE_VIOLATION && db.message().contains("pg_authid"))
        || (*db.code() == SqlState::UNIQUE_VIOLATION && db.message().contains("pg_auth_members"))
        || db.message().contains("tuple concurrently updated")
}

/// One step of the command, named in its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    CreateRole,
    Grant,
    Membership,
}

#[derive(Debug)]
struct StepError(Step);

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Step::CreateRole => "creating a role",
            Step::Grant => "granting privileges",
            Step::Membership => "granting a role's membership",
        })
    }
}

impl std::error::Error for StepError {}

/// Runs `sql` as part of `step`.
fn run(tx: &mut Transaction<'_>, step: Step, sql: &str) -> Result<()> {
    tx.batch_execute(sql)
        .map_err(|e| anyhow::Error::new(e).context(StepError(step)))
}

/// An identifier quoted by the server, for the statements that cannot bind one (CREATE ROLE,
/// GRANT): the only text formatted into SQL here.
fn quoted(tx: &mut Transaction<'_>, name: &str) -> Result<String> {
    Ok(tx.query_one("SELECT quote_ident($1)", &[&name])?.get(0))
}

fn apply_in(tx: &mut Transaction<'_>, address: &Address, login: Option<&Login>) -> Result<Report> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ROLES_LOCK])?;
    let schema_name: Option<String> = tx.query_one("SELECT current_schema()::text", &[])?.get(0);
    let no_schema =
        "it holds no memscope schema yet: run `memscope --db … init` as the database's owner first";
    match schema::state_in(tx, schema::SCHEMA_VERSION)? {
        schema::State::Current => {}
        schema::State::Empty => bail!(no_schema),
        schema::State::Older(v) => bail!(
            "it holds memscope PostgreSQL schema {v}: run `memscope --db … init` as the owner of its tables to bring it to {} first",
            schema::SCHEMA_VERSION
        ),
        schema::State::Newer(v) => bail!(
            "it holds memscope PostgreSQL schema {v}, newer than this memscope understands ({}): upgrade memscope to use it",
            schema::SCHEMA_VERSION
        ),
        schema::State::Foreign(names) => bail!(
            "it holds tables memscope did not create ({}): point the address at memscope's database",
            names.join(", ")
        ),
    }
    // Tables were found in the current schema, so there is one.
    let Some(schema_name) = schema_name else {
        bail!(no_schema)
    };
    let before = snapshot(tx, &schema_name)?;

    let mut roles = Vec::new();
    for role in [AGENT_ROLE, CURATOR_ROLE] {
        roles.push(GroupRole {
            name: role,
            created: ensure_group(tx, role)?,
        });
    }
    grant(tx, &schema_name)?;
    let login = login.map(|l| ensure_login(tx, l)).transpose()?;
    verify(tx, &schema_name, login.as_ref())?;

    let after = snapshot(tx, &schema_name)?;
    let grants_changed = before.grants != after.grants;
    let changed = grants_changed
        || roles.iter().any(|r| r.created)
        || login.as_ref().is_some_and(|l| l.created || l.granted);
    Ok(Report {
        database: address.describe(),
        schema: schema_name,
        changed,
        roles,
        grants_changed,
        login,
    })
}

/// The group roles' privileges in this database as text, to compare before and after (ACL
/// items sorted, since revoking and granting again may reorder them). A login's membership is
/// the login's report.
struct Snapshot {
    grants: Vec<String>,
}

fn snapshot(tx: &mut Transaction<'_>, schema_name: &str) -> Result<Snapshot> {
    let roles = [AGENT_ROLE, CURATOR_ROLE];
    let grants = tx
        .query(
            "WITH ours AS (SELECT r.oid FROM pg_roles r WHERE r.rolname = ANY($2))
             SELECT format('%s %s', c.relname, a.grantee::regrole)
                    || ' ' || a.privilege_type
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
                    aclexplode(c.relacl) a
              WHERE n.nspname = $1 AND a.grantee IN (SELECT oid FROM ours)
                AND (c.relname = ANY($3) OR c.relkind = 'S')
             UNION ALL
             SELECT format('schema %s', a.grantee::regrole) || ' ' || a.privilege_type
               FROM pg_namespace n, aclexplode(n.nspacl) a
              WHERE n.nspname = $1 AND a.grantee IN (SELECT oid FROM ours)
             UNION ALL
             SELECT format('database %s', a.grantee::regrole) || ' ' || a.privilege_type
               FROM pg_database d, aclexplode(d.datacl) a
              WHERE d.datname = current_database() AND a.grantee IN (SELECT oid FROM ours)
             ORDER BY 1",
            &[&schema_name, &&roles[..], &TABLES],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(Snapshot { grants })
}

/// Creates the NOLOGIN group role `role` when it does not exist; true when it did now. A role
/// of that name that can log in or is a superuser is not memscope's, and is refused.
fn ensure_group(tx: &mut Transaction<'_>, role: &str) -> Result<bool> {
    let found = tx.query_opt(
        "SELECT rolsuper, rolcanlogin FROM pg_roles WHERE rolname = $1",
        &[&role],
    )?;
    match found.map(|r| (r.get::<_, bool>(0), r.get::<_, bool>(1))) {
        None => {
            let q = quoted(tx, role)?;
            run(tx, Step::CreateRole, &format!("CREATE ROLE {q} NOLOGIN"))?;
            Ok(true)
        }
        Some((true, _)) => bail!(
            "the server already has a role \"{role}\" that is a superuser, so it would bypass every privilege and guard: memscope did not create it — rename or drop it, or make it NOSUPERUSER NOLOGIN"
        ),
        Some((_, true)) => bail!(
            "the server already has a role \"{role}\" that can log in, and memscope's group roles do not: memscope did not create it — make it NOLOGIN (ALTER ROLE {role} NOLOGIN) and log in through a member instead"
        ),
        Some(_) => Ok(false),
    }
}

/// The identity sequences of memscope's tables and the causal clock, quoted and qualified.
fn sequences(tx: &mut Transaction<'_>, schema_name: &str) -> Result<Vec<String>> {
    Ok(tx
        .query(
            "SELECT pg_get_serial_sequence(format('%I.%I', n.nspname, c.relname), a.attname)
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attidentity <> '' AND NOT a.attisdropped
              WHERE n.nspname = $1 AND c.relname = ANY($2)
             UNION
             SELECT format('%I.%I', n.nspname, c.relname)
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = $1 AND c.relname = 'memscope_clock' AND c.relkind = 'S'
              ORDER BY 1",
            &[&schema_name, &TABLES],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

/// Gives each group role exactly its privileges: all it held on memscope's tables and their
/// sequences is revoked, then the table's are granted (a grant someone added by hand goes).
fn grant(tx: &mut Transaction<'_>, schema_name: &str) -> Result<()> {
    let schema_q = quoted(tx, schema_name)?;
    let database: String = tx
        .query_one("SELECT quote_ident(current_database())", &[])?
        .get(0);
    let sequences = sequences(tx, schema_name)?.join(", ");
    // PostgreSQL 17's MAINTAIN lets the curator's delete vacuum what it purged; before 17
    // only the owner may, and the server skips the vacuum with a warning.
    let maintain: bool = tx
        .query_one(
            "SELECT current_setting('server_version_num')::int >= 170000",
            &[],
        )?
        .get(0);
    let mut sql = String::new();
    for (role, sequence_privileges) in [
        (AGENT_ROLE, AGENT_SEQUENCE),
        (CURATOR_ROLE, CURATOR_SEQUENCE),
    ] {
        let role_q = quoted(tx, role)?;
        for (table, agent, curator) in PRIVILEGES {
            let table_q = format!("{schema_q}.{}", quoted(tx, table)?);
            let mut privileges = if role == AGENT_ROLE { agent } else { curator }.to_vec();
            if maintain && role == CURATOR_ROLE && VACUUMED.contains(table) {
                privileges.push("MAINTAIN");
            }
            sql += &format!(
                "REVOKE ALL ON TABLE {table_q} FROM {role_q};
                 GRANT {} ON TABLE {table_q} TO {role_q};\n",
                privileges.join(", ")
            );
        }
        if !sequences.is_empty() {
            sql += &format!(
                "REVOKE ALL ON SEQUENCE {sequences} FROM {role_q};
                 GRANT {sequence_privileges} ON SEQUENCE {sequences} TO {role_q};\n"
            );
        }
        // The clock's one function that runs as the owner: every writer moves the clock up
        // to a causal number it brings; no other login may (schema v8).
        sql += &format!(
            "GRANT USAGE ON SCHEMA {schema_q} TO {role_q};
             GRANT CONNECT ON DATABASE {database} TO {role_q};
             GRANT EXECUTE ON FUNCTION {schema_q}.memscope_clock_observe(bigint) TO {role_q};\n"
        );
    }
    run(tx, Step::Grant, &sql)
}

/// Creates `login` (or finds it) and makes it a member of its group role.
fn ensure_login(tx: &mut Transaction<'_>, login: &Login) -> Result<LoginReport> {
    let role = login.kind.role();
    let q = quoted(tx, &login.name)?;
    let group_q = quoted(tx, role)?;
    let verifier = login
        .password
        .as_ref()
        .map(|p| postgres_protocol::password::scram_sha_256(p.as_bytes()));
    // The verifier is base64 and `$:`, safe inside a literal; the password itself never
    // reaches the server, its statement log or its error messages.
    let password = verifier
        .as_ref()
        .map(|v| format!(" PASSWORD '{v}'"))
        .unwrap_or_default();
    let found = tx.query_opt(
        "SELECT rolcanlogin, pg_has_role(oid, $2::text, 'MEMBER') FROM pg_roles WHERE rolname = $1",
        &[&login.name, &role],
    )?;
    let (created, granted) = match found.map(|r| (r.get::<_, bool>(0), r.get::<_, bool>(1))) {
        None => {
            run(
                tx,
                Step::CreateRole,
                &format!("CREATE ROLE {q} LOGIN{password}"),
            )?;
            run(tx, Step::Membership, &format!("GRANT {group_q} TO {q}"))?;
            (true, false)
        }
        Some((can_login, member)) => {
            let mut alter = String::new();
            if !can_login {
                alter += " LOGIN";
            }
            alter += &password;
            if !alter.is_empty() {
                run(tx, Step::CreateRole, &format!("ALTER ROLE {q}{alter}"))?;
            }
            if !member {
                run(tx, Step::Membership, &format!("GRANT {group_q} TO {q}"))?;
            }
            (false, !member || !can_login)
        }
    };
    Ok(LoginReport {
        name: login.name.clone(),
        member_of: role,
        created,
        granted,
        password_set: verifier.is_some(),
    })
}

/// Checks, before committing, what each role may now do to each table: exactly its row of
/// [`PRIVILEGES`] for the group roles and an agent's login, at least its row for a curator's
/// login; and that no agent is a curator or the tables' owner.
fn verify(tx: &mut Transaction<'_>, schema_name: &str, login: Option<&LoginReport>) -> Result<()> {
    let mut checks: Vec<(String, Kind, bool)> = vec![
        (AGENT_ROLE.to_string(), Kind::Agent, true),
        (CURATOR_ROLE.to_string(), Kind::Curator, true),
    ];
    if let Some(l) = login {
        let kind = if l.member_of == AGENT_ROLE {
            Kind::Agent
        } else {
            Kind::Curator
        };
        checks.push((l.name.clone(), kind, kind == Kind::Agent));
    }
    for (role, kind, exact) in &checks {
        if *kind == Kind::Agent {
            let r = tx.query_one(
                "SELECT pg_has_role($1::text, $2::text, 'MEMBER'),
                        pg_has_role($1::text, c.relowner, 'MEMBER'),
                        c.relowner::regrole::text
                   FROM pg_class c WHERE c.oid = format('%I.history', $3::text)::regclass",
                &[role, &CURATOR_ROLE, &schema_name],
            )?;
            let (curator, owner, owner_name): (bool, bool, String) = (r.get(0), r.get(1), r.get(2));
            // A superuser is a member of every role: the owner's sentence is the one that holds.
            if owner {
                bail!("the role \"{role}\" owns memscope's tables (or is a superuser, or a member of their owner \"{owner_name}\"), so as an agent it could still drop their guards: name a login of its own for the agent");
            }
            if curator {
                bail!("the role \"{role}\" is a member of {CURATOR_ROLE}, so as an agent it could still delete and purge: REVOKE {CURATOR_ROLE} FROM {role}, or name another login");
            }
        } else if role != CURATOR_ROLE {
            // An agent's login made a curator would hand every agent holding its password the
            // right to delete what the others wrote.
            let agent: bool = tx
                .query_one(
                    "SELECT pg_has_role($1::text, $2::text, 'MEMBER')
                        AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = $1)",
                    &[role, &AGENT_ROLE],
                )?
                .get(0);
            if agent {
                bail!("the login \"{role}\" is a member of {AGENT_ROLE}, so making it a curator would let the agents that log in with it delete and purge: name another login for the curator, or REVOKE {AGENT_ROLE} FROM {role} first");
            }
        }
        for (table, agent, curator) in PRIVILEGES {
            let wanted = if *kind == Kind::Agent { agent } else { curator };
            for privilege in TABLE_PRIVILEGES {
                let has: bool = tx
                    .query_one(
                        "SELECT has_table_privilege($1::text, format('%I.%I', $2::text, $3::text), $4)",
                        &[role, &schema_name, table, privilege],
                    )?
                    .get(0);
                let should = wanted.contains(privilege);
                if has && !should && *exact {
                    bail!(
                        "the role \"{role}\" may still {privilege} on {table} after memscope's grants (granted to PUBLIC, or through another role it belongs to): revoke that, then run `memscope roles` again"
                    );
                }
                if should && !has {
                    bail!(
                        "the role \"{role}\" may not {privilege} on {table} even after memscope's grants: check that the address logs in as the owner of memscope's tables"
                    );
                }
            }
        }
    }
    Ok(())
}

/// One sentence for a step the address's role may not take, and what to do.
fn may_not(address: &Address, step: Step) -> anyhow::Error {
    let user = address.user();
    match step {
        Step::CreateRole => anyhow!(
            "the PostgreSQL address logs in as user \"{user}\", which may not create or alter roles on the server at {}: connect as a role with CREATEROLE (or a superuser), such as the one that created the database",
            address.server()
        ),
        Step::Membership => anyhow!(
            "the PostgreSQL address logs in as user \"{user}\", which may not grant membership in memscope's roles on the server at {}: connect as a role with CREATEROLE that may administer them (on PostgreSQL 16 and newer, the role that created them)",
            address.server()
        ),
        Step::Grant => anyhow!(
            "the PostgreSQL address logs in as user \"{user}\", which may not grant privileges on memscope's tables in {}: connect as their owner (the role that ran `memscope --db … init`)",
            address.describe()
        ),
    }
}

/// One sentence for a failure, naming the address and what to do.
fn explain(address: &Address, e: anyhow::Error) -> anyhow::Error {
    let step = e.downcast_ref::<StepError>().map(|s| s.0);
    let code = e
        .downcast_ref::<postgres::Error>()
        .and_then(|p| p.code().cloned());
    let place = address.describe();
    if code == Some(SqlState::INSUFFICIENT_PRIVILEGE) {
        return may_not(address, step.unwrap_or(Step::Grant));
    }
    let detail = match e.downcast_ref::<postgres::Error>() {
        Some(p) => p
            .as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_else(|| p.to_string()),
        None => format!("{e:#}"),
    };
    anyhow!("the PostgreSQL address reaches {place}, but {detail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_of_memscope_has_its_privileges() {
        let named: Vec<&str> = PRIVILEGES.iter().map(|p| p.0).collect();
        assert_eq!(named, TABLES);
        for (table, agent, curator) in PRIVILEGES {
            assert!(agent.iter().all(|p| curator.contains(p)), "{table}");
            assert!(agent
                .iter()
                .chain(curator.iter())
                .all(|p| TABLE_PRIVILEGES.contains(p)));
        }
    }
}
