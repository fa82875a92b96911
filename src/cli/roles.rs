//! `roles`: memscope's two PostgreSQL group roles and their privileges, and optionally a login.

use super::{outln, print_json, usage, EXIT_OK};
use crate::store::postgres::{self, roles};
use anyhow::{bail, Result};
use clap::{ArgGroup, Args};
use std::path::Path;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("login").args(["agent_login", "curator_login"])))]
pub struct RolesArgs {
    /// Also create (or find) this login and make it a member of memscope_agent
    #[arg(long, value_name = "NAME")]
    pub agent_login: Option<String>,
    /// Also create (or find) this login and make it a member of memscope_curator
    #[arg(long, value_name = "NAME")]
    pub curator_login: Option<String>,
    /// Set the login's password to the value of this environment variable
    #[arg(long, value_name = "VAR", requires = "login")]
    pub password_from_env: Option<String>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(path: &Path, args: RolesArgs) -> Result<i32> {
    let Some(address) = postgres::Address::recognise(path.as_os_str()) else {
        bail!(
            "`memscope roles` creates PostgreSQL roles, and {} is a SQLite file, which has none (its file mode, 0600, is its access control): give a postgres:// address with --db",
            path.display()
        );
    };
    let address = address?;
    // Read before connecting: a missing variable is the caller's mistake, not the server's.
    let password = args
        .password_from_env
        .as_deref()
        .map(|var| match std::env::var(var) {
            Ok(p) if !p.is_empty() => Ok(p),
            Ok(_) => Err(usage(format!("--password-from-env: ${var} is empty"))),
            Err(std::env::VarError::NotPresent) => {
                Err(usage(format!("--password-from-env: ${var} is not set")))
            }
            Err(std::env::VarError::NotUnicode(_)) => Err(usage(format!(
                "--password-from-env: ${var} is not valid UTF-8"
            ))),
        })
        .transpose()?;
    let login = match (args.agent_login, args.curator_login) {
        (Some(name), _) => Some((name, roles::Kind::Agent)),
        (None, Some(name)) => Some((name, roles::Kind::Curator)),
        (None, None) => None,
    }
    .map(|(name, kind)| roles::Login {
        name,
        kind,
        password,
    });
    let report = roles::apply(&address, login.as_ref())?;
    if args.json {
        print_json(&report)?;
        return Ok(EXIT_OK);
    }
    let place = format!("{} (schema {})", report.database, report.schema);
    for role in report.roles.iter().filter(|r| r.created) {
        outln!("created the group role {} (NOLOGIN)", role.name);
    }
    if report.grants_changed {
        outln!(
            "granted {} and {} their privileges on memscope's tables in {place}",
            roles::AGENT_ROLE,
            postgres::schema::CURATOR_ROLE
        );
    }
    if let Some(login) = &report.login {
        let from = args
            .password_from_env
            .as_deref()
            .map(|var| format!(", with the password from ${var}"))
            .unwrap_or_default();
        if login.created {
            outln!(
                "created the login {}, a member of {}{from}",
                login.name,
                login.member_of
            );
        } else if login.granted {
            outln!(
                "made the login {} a member of {}{from}",
                login.name,
                login.member_of
            );
        } else if let Some(var) = args.password_from_env.as_deref() {
            outln!(
                "{} is already a member of {}; set its password again from ${var}",
                login.name,
                login.member_of
            );
        }
    }
    if !report.changed {
        let login = report.login.as_ref();
        let member = login
            .filter(|l| !l.password_set)
            .map(|l| format!(", and {} is a member of {}", l.name, l.member_of))
            .unwrap_or_default();
        let nothing = if login.is_some_and(|l| l.password_set) {
            "nothing else changed"
        } else {
            "nothing changed"
        };
        outln!(
            "{} and {} already hold exactly their privileges in {place}{member}: {nothing}",
            roles::AGENT_ROLE,
            postgres::schema::CURATOR_ROLE
        );
    }
    Ok(EXIT_OK)
}
