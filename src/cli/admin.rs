//! `init`, `check`, `alias`, `export`, `import`, `demo`.

use super::{data_dir, errln, outln, print_json, EXIT_FAILED, EXIT_OK};
use crate::store::{
    is_damage, postgres, AnyStore, CheckReport, Integrity, IntegrityMode, OpenMode, Opening, Store,
};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum AliasCommand {
    /// Map ALIAS to CANONICAL (both normalized)
    #[command(after_help = "Example:\n  memscope alias add pkg-mgr package_manager")]
    Add {
        /// The spelling agents may use
        alias: String,
        /// The predicate it stands for
        canonical: String,
    },
    /// Remove ALIAS: its name is a predicate of its own again
    #[command(after_help = "Example:\n  memscope alias remove pkg-mgr")]
    Remove {
        /// The alias to remove (normalized)
        alias: String,
    },
    /// Show the alias table
    #[command(after_help = "Example:\n  memscope alias list --json")]
    List {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

pub fn init(path: &Path) -> Result<i32> {
    if let Some(address) = postgres::Address::recognise(path.as_os_str()) {
        return init_postgres(&address?);
    }
    let existed = path.exists()
        && std::fs::metadata(path)
            .map(|m| m.len() > 0)
            .unwrap_or(false);
    let mut store = Store::open_for(path, OpenMode::Create, Opening::Repair)?;
    if existed {
        // A raw client may have dropped or changed a guard trigger, set the clock back, or
        // changed the spellings registry: init makes the guard again, moves the clock up, sets
        // the registry to the spelling stored and merges a place stored in two spellings
        // (README, "check", invariant 6).
        let restored = store.restore_guards()?;
        let mut clock = match store.version_restored() {
            Some((from, to)) => format!(
                "; set its schema version back to {to} from {from}, which a raw SQL client had set"
            ),
            None => String::new(),
        };
        let indexes = store.restore_indexes()?;
        if !indexes.is_empty() {
            clock += &format!(
                "; made its index(es) {} again, which were missing",
                indexes.join(", ")
            );
        }
        let clock = clock
            + &clock_rewritten(store.clock_setting_rewritten()?)
            + &clock_moved(store.clock_past_stored()?)
            + &registry_set(store.repair_registry()?)
            + &store.merge_places()?.init_clause();
        if restored.is_empty() {
            outln!(
                "{} is already a memscope database (schema up to date){clock}",
                store.path().display()
            );
        } else {
            outln!(
                "{} is already a memscope database (schema up to date); restored its guard(s) {}, which were missing or changed{clock}",
                store.path().display(),
                restored.join(", ")
            );
        }
    } else {
        outln!("created {}", store.path().display());
    }
    Ok(EXIT_OK)
}

/// `memscope --db postgres://… init`: prepares the schema, and says which commands it serves.
fn init_postgres(address: &postgres::Address) -> Result<i32> {
    let version = postgres::schema::SCHEMA_VERSION;
    let place = address.describe();
    let done = match postgres::prepare(address)? {
        postgres::Prepared::Created { from: 0 } => {
            format!("created memscope's PostgreSQL schema {version} in {place}")
        }
        postgres::Prepared::Created { from } => {
            format!(
                "brought memscope's PostgreSQL schema in {place} forward from {from} to {version}"
            )
        }
        postgres::Prepared::UpToDate {
            restored_guards: false,
        } => {
            format!("{place} already holds memscope's PostgreSQL schema {version} (up to date)")
        }
        postgres::Prepared::UpToDate {
            restored_guards: true,
        } => {
            format!("{place} already holds memscope's PostgreSQL schema {version} (up to date); made its guard functions, triggers and identity constraint again, which were missing or changed")
        }
    };
    // A login may have set the clock back (README, "check", invariant 2).
    let mut store = postgres::PgStore::open(address)?;
    let clock = clock_moved(store.clock_past_stored()?)
        + &registry_set(store.repair_registry()?)
        + &store.merge_places()?.init_clause();
    outln!("{done}{clock}; {}", postgres::SERVED);
    Ok(EXIT_OK)
}

/// What `init` says of the spellings it set in the registry, if any.
fn registry_set(set: Vec<(String, String, String)>) -> String {
    if set.is_empty() {
        return String::new();
    }
    let places: Vec<String> = set
        .iter()
        .map(|(kind, _, spelling)| format!("the {kind} {spelling:?}"))
        .collect();
    format!(
        "; registered {} in the spelling stored, which the registry had not",
        places.join(", ")
    )
}

/// What `init` says of a `causal_clock` setting it wrote again, if it did.
fn clock_rewritten(rewritten: Option<(String, i64)>) -> String {
    rewritten.map_or_else(String::new, |(stored, to)| {
        format!(
            "; set the causal clock, whose setting held {}, which is no number from 0 to 2^53, to {to}, the highest number stored",
            crate::model::shorten(&serde_json::Value::from(stored).to_string(), 40)
        )
    })
}

/// What `init` says of the causal clock it moved past every stored number, if it did.
fn clock_moved(moved: Option<(i64, i64)>) -> String {
    moved.map_or_else(String::new, |(from, to)| {
        format!("; moved the causal clock, set back around memscope, from {from} to {to}, the highest number stored")
    })
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
    /// Run SQLite's full integrity check (indexes against their tables too) instead of the quick one (a SQLite file only: PostgreSQL guards its own pages)
    #[arg(long)]
    pub full: bool,
}

/// What is wrong with the header of the SQLite file whose open failed; `None` for another
/// kind of failure, or another kind of file.
fn damaged_header(path: &Path, e: &anyhow::Error) -> Option<String> {
    let file = match e.downcast_ref::<crate::store::NotADatabase>() {
        Some(not) => not.0.clone(),
        None if crate::store::postgres::Address::recognise(path.as_os_str()).is_some() => {
            return None
        }
        None => path.to_path_buf(),
    };
    crate::store::header_problem(&file)
}

pub fn check(path: &Path, args: CheckArgs) -> Result<i32> {
    let mode = if args.full {
        IntegrityMode::Full
    } else {
        IntegrityMode::Quick
    };
    let report = match AnyStore::open_for_check(path) {
        Ok(mut store) => {
            let mut report = store.check(mode)?;
            let sqlite = matches!(store, AnyStore::Sqlite(_));
            drop(store);
            // A header SQLite still opens — a file format write version past 2 (byte 18)
            // makes it open read-only, so every read passes and every write is refused — read
            // now that no connection to the file is left (reading it beside one would drop
            // that connection's locks).
            if sqlite {
                let header = crate::store::header_problem(path);
                if let (Some(field), Some(integrity)) = (header, report.integrity.as_mut()) {
                    report.ok = false;
                    integrity.header_damaged(&field);
                }
            }
            report
        }
        // A file too damaged to open is the check's answer, not an error of the command — its
        // header included (the store's open failed, so no connection to the file is left).
        // A schema version a raw client changed: said as the SCHEMA line, with its way out.
        Err(e) if e.downcast_ref::<crate::store::SchemaDamaged>().is_some() => {
            let damage = e.downcast::<crate::store::SchemaDamaged>()?;
            let mut metrics = std::collections::BTreeMap::from([(
                "schema_problems".to_string(),
                serde_json::json!(damage.problems),
            )]);
            if let Some(way_out) = damage.way_out {
                metrics.insert("schema_way_out".into(), serde_json::json!(way_out));
            }
            CheckReport {
                ok: false,
                integrity: None,
                violations: Vec::new(),
                metrics,
                health: crate::store::exposures(path)
                    .into_iter()
                    .map(Into::into)
                    .collect(),
            }
        }
        Err(e) => {
            let header = damaged_header(path, &e);
            if let (None, Some(not)) = (&header, e.downcast_ref::<crate::store::NotADatabase>()) {
                // check has told which: another kind of file, not a damaged database.
                bail!(
                    "{} is not a SQLite database (no damaged header either: another kind of file) — point --db at a memscope database",
                    not.0.display()
                );
            }
            let problem = match header {
                Some(field) => format!("{}{field}", crate::store::check::HEADER_DAMAGED),
                None if is_damage(&e) => crate::store::cause_text(&e),
                None => return Err(e),
            };
            CheckReport {
                ok: false,
                integrity: Some(Integrity::unreadable(mode, problem)),
                violations: Vec::new(),
                metrics: Default::default(),
                health: crate::store::exposures(path)
                    .into_iter()
                    .map(Into::into)
                    .collect(),
            }
        }
    };
    if args.json {
        print_json(&report)?;
    } else {
        if report.ok && report.integrity.is_some() {
            outln!("ok: the file is intact and all six invariants hold");
        } else if report.ok {
            outln!("ok: all six invariants hold");
        }
        if let Some(integrity) = report.integrity.as_ref().filter(|i| !i.ok) {
            outln!("DAMAGED: {}", integrity.sentence());
        }
        if let Some(problems) = report
            .metrics
            .get("schema_problems")
            .and_then(serde_json::Value::as_array)
        {
            let problems: Vec<String> = problems
                .iter()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect();
            let damage = crate::store::SchemaDamaged {
                problems,
                way_out: report
                    .metrics
                    .get("schema_way_out")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string),
            };
            outln!("SCHEMA: {}", damage.sentence());
        }
        for v in &report.violations {
            outln!(
                "VIOLATION invariant {} ({}): {}",
                v.invariant,
                v.name,
                v.detail
            );
        }
        for e in &report.health {
            outln!("HEALTH: {}", e.sentence());
        }
        if report.metrics.get("schema_guards") == Some(&serde_json::json!("missing")) {
            let problems = report
                .metrics
                .get("schema_guard_problems")
                .and_then(serde_json::Value::as_array)
                .map(|p| {
                    p.iter()
                        .filter_map(serde_json::Value::as_str)
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_default();
            outln!(
                "GUARDS: memscope's guards on this database are not intact ({problems}): until they are, a raw SQL client can rewrite history or bring a deleted memory back unseen — `memscope --db {} init` makes memscope's own again; a trigger, rule or policy memscope did not make is for its owner to remove",
                // A file is named; an address may hold a password, so it is not repeated.
                match crate::store::postgres::Address::recognise(path.as_os_str()) {
                    Some(_) => "…".to_string(),
                    None => crate::model::shell_path(path),
                }
            );
        }
        if let Some(missing) = report
            .metrics
            .get("missing_indexes")
            .and_then(serde_json::Value::as_array)
        {
            let names: Vec<&str> = missing
                .iter()
                .filter_map(serde_json::Value::as_str)
                .collect();
            outln!(
                "INDEXES: memscope's index(es) {} are missing (a raw SQL client dropped them): every command still works, only slower on a large database — `memscope --db {} init` makes them again",
                names.join(", "),
                crate::model::shell_path(path)
            );
        }
        if report.metrics.get("clock_exhausted") == Some(&serde_json::json!(true)) {
            outln!("CLOCK: {}", crate::model::CLOCK_EXHAUSTED);
        }
        let past_limit = report
            .metrics
            .get("ids_past_limit")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0);
        if past_limit > 0 {
            outln!(
                "LIMIT: {}",
                crate::model::ids_past_limit_sentence(past_limit)
            );
        }
        for (k, v) in &report.metrics {
            outln!("  {k}: {v}");
        }
    }
    Ok(if report.ok { EXIT_OK } else { EXIT_FAILED })
}

#[derive(Debug, Subcommand)]
pub enum SettingsCommand {
    /// Change a setting: durability (full | normal), scope_guard (queue | flag | off), retention_days, tombstone_safe_days
    #[command(after_help = "Example:\n  memscope settings set durability normal")]
    Set {
        /// durability, scope_guard, retention_days or tombstone_safe_days
        key: String,
        /// full or normal for durability; queue, flag or off for scope_guard; a number of days from 0 (never) to 4294967295 for the others
        // A negative number of days reaches the setting's own rule, not taken for a flag.
        #[arg(allow_negative_numbers = true)]
        value: String,
    },
}

pub fn settings(path: &Path, command: Option<SettingsCommand>, json: bool) -> Result<i32> {
    match command {
        Some(SettingsCommand::Set { key, value }) => {
            // A value or key the setting refuses is a usage error (exit 2); the server's
            // refusal of the login is not.
            let stored = made_for(path, || {
                AnyStore::open(path, OpenMode::Create)?.set_user_setting(key.trim(), &value)
            })?;
            if json {
                let value = setting_json(key.trim(), stored.clone());
                print_json(&serde_json::json!({ "key": key.trim(), "value": value }))?;
            } else {
                outln!("{} = {stored}", key.trim());
            }
        }
        None => {
            let mut store = AnyStore::open(path, OpenMode::Existing)?;
            let settings = store.user_settings()?;
            let problems: Vec<String> = settings
                .iter()
                .filter_map(|(k, v)| crate::store::stored_setting_problem(k, v))
                .collect();
            print_pairs(settings, json, " = ", |pairs| {
                let map: serde_json::Map<String, serde_json::Value> = pairs
                    .into_iter()
                    .map(|(k, v)| {
                        let v = setting_json(&k, v);
                        (k, v)
                    })
                    .collect();
                map.into()
            })?;
            // Shown as stored; what memscope cannot read is said, and the exit says it too.
            for p in &problems {
                errln!("memscope: {p}");
            }
            if !problems.is_empty() {
                return Ok(EXIT_FAILED);
            }
        }
    }
    Ok(EXIT_OK)
}

/// A setting's value in JSON: the day counts (`retention_days`, `tombstone_safe_days`) as the
/// numbers they are, the words as strings.
fn setting_json(key: &str, value: String) -> serde_json::Value {
    match value.parse::<u64>() {
        Ok(n) if key.ends_with("_days") => n.into(),
        _ => value.into(),
    }
}

pub fn alias(path: &Path, cmd: AliasCommand) -> Result<i32> {
    match cmd {
        AliasCommand::Add { alias, canonical } => {
            let added = made_for(path, || {
                AnyStore::open(path, OpenMode::Create)?.add_alias(&alias, &canonical)
            })?;
            let (a, c) = (&added.alias, &added.canonical);
            let mut line = format!("alias {a} → {c}");
            if let Some(was) = &added.replaced {
                line.push_str(&format!(" (it pointed at {was} before)"));
            }
            match added.repointed.as_slice() {
                [] if added.existed => line.push_str(" was already there: nothing changed"),
                [] => {}
                moved => line.push_str(&format!(
                    "; the {} that pointed at {a} now point{} at {c}: {}",
                    if moved.len() == 1 {
                        "alias".to_string()
                    } else {
                        format!("{} aliases", moved.len())
                    },
                    if moved.len() == 1 { "s" } else { "" },
                    moved.join(", ")
                )),
            }
            let named = [
                (added.moved_pending, "pending item"),
                (added.moved_reads, "logged read"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}{}", if *n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>();
            if !named.is_empty() {
                line.push_str(&format!(
                    "; {} that named {a} now name{} {c}",
                    named.join(" and "),
                    if named.len() == 1 && named[0].starts_with("1 ") {
                        "s"
                    } else {
                        ""
                    }
                ));
            }
            match added.dropped_pending {
                0 => {}
                1 => line.push_str(&format!(
                    "; 1 of them waited on deleted memories of {c} only and was destroyed (such a write is rejected: restore one first)"
                )),
                n => line.push_str(&format!(
                    "; {n} of them waited on deleted memories of {c} only and were destroyed (such a write is rejected: restore one first)"
                )),
            }
            outln!("{line}");
        }
        AliasCommand::Remove { alias } => {
            let mut store = AnyStore::open(path, OpenMode::Existing)?;
            let (alias, canonical) = store.remove_alias(&alias)?;
            outln!("alias {alias} → {canonical} removed: writes of {alias} are stored under {alias} again");
        }
        AliasCommand::List { json } => {
            let mut store = AnyStore::open(path, OpenMode::Existing)?;
            print_pairs(store.aliases()?, json, " → ", |pairs| {
                pairs
                    .iter()
                    .map(|(a, c)| serde_json::json!({ "alias": a, "canonical": c }))
                    .collect()
            })?;
        }
    }
    Ok(EXIT_OK)
}

/// Prints name–value pairs: with `--json` as `to_json` shapes them, else `{name}{sep}{value}`
/// one a line.
fn print_pairs(
    pairs: Vec<(String, String)>,
    json: bool,
    sep: &str,
    to_json: impl FnOnce(Vec<(String, String)>) -> serde_json::Value,
) -> Result<()> {
    if json {
        return print_json(&to_json(pairs));
    }
    for (name, value) in pairs {
        outln!("{name}{sep}{value}");
    }
    Ok(())
}

pub fn export(path: &Path, out: Option<PathBuf>) -> Result<i32> {
    let mut store = AnyStore::open(path, OpenMode::Existing)?;
    let n = match out {
        Some(p) => {
            if let AnyStore::Sqlite(s) = &store {
                if let Some(file) = database_file_named(s.path(), &p) {
                    return Err(super::usage(format!(
                        "--out {} is the database's own {file}: writing the export there would destroy the database; name a new file, e.g. --out memscope-export.jsonl",
                        p.display()
                    )));
                }
            }
            // A regular file is written beside itself and renamed into place once whole: an
            // export that fails half-way (a refused read, damage, a full disk) leaves no
            // half-written file, and an earlier export under that name stays as it was. A pipe
            // or device (`--out /dev/stdout`) is written in place.
            // A link is followed: the export replaces the file it points at, not the link.
            let p = std::fs::canonicalize(&p).unwrap_or(p);
            if let Some(folder) = p.parent().filter(|f| !f.as_os_str().is_empty()) {
                if !folder.is_dir() {
                    anyhow::bail!(
                        "cannot write {}: the folder {} does not exist: create it, or pass --out a file in a folder that does",
                        p.display(),
                        folder.display()
                    );
                }
            }
            if p.is_dir() {
                anyhow::bail!(
                    "cannot write {}: it is a folder: pass --out a file, such as {}; nothing was written",
                    p.display(),
                    crate::model::shell_path(&p.join("memscope-export.jsonl"))
                );
            }
            let in_place = p.exists() && !p.is_file();
            let target = if in_place {
                p.clone()
            } else {
                let mut name = std::ffi::OsString::from(".");
                name.push(p.file_name().unwrap_or_default());
                name.push(format!(".{}.partial", std::process::id()));
                p.with_file_name(name)
            };
            let written = (|| -> Result<u64> {
                // Named as asked: the file beside it is memscope's own business.
                let f = private_file(&target)
                    .with_context(|| format!("cannot write {}", p.display()))?;
                let mut w = std::io::BufWriter::new(f);
                let n = store.export(&mut w)?;
                std::io::Write::flush(&mut w)?;
                if !in_place {
                    w.get_ref().sync_all()?;
                    std::fs::rename(&target, &p)
                        .with_context(|| format!("cannot write {}", p.display()))?;
                }
                Ok(n)
            })();
            if written.is_err() && !in_place {
                let _ = std::fs::remove_file(&target);
            }
            // A failed write names the file and what to do (found by review: a full disk said
            // only "No space left on device (os error 28)").
            let left = if in_place {
                "the export stopped part-way"
            } else {
                "no partial file was left, and an earlier file of that name is as it was"
            };
            written.map_err(|e| match e.downcast_ref::<std::io::Error>().map(|io| io.kind()) {
                Some(std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded) => anyhow::anyhow!(
                    "cannot write {}: the disk is full (or the quota used up): free space there or pass --out a file on another disk; {left}",
                    p.display()
                ),
                // The OS's words, once (the context names the file already).
                Some(_) => anyhow::anyhow!(
                    "cannot write {}: {}: pass --out a file you can write; {left}",
                    p.display(),
                    e.root_cause()
                ),
                None => e,
            })?
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            let written = store
                .export(&mut w)
                .and_then(|n| Ok(std::io::Write::flush(&mut w).map(|()| n)?));
            // Found by review: `export > /dev/full` said only "No space left on device (os
            // error 28)", naming neither what was written nor what to do.
            written.map_err(|e| {
                let Some(io) = e.downcast_ref::<std::io::Error>() else {
                    return e;
                };
                let why = match io.kind() {
                    std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                        "the disk is full (or the quota used up)".to_string()
                    }
                    _ => io.to_string(),
                };
                anyhow::anyhow!(
                    "cannot write the export to standard output: {why}; what was written stops part-way, and `import` refuses it as cut short — send the export where it can be written (a file on a disk with room: --out FILE)"
                )
            })?
        }
    };
    errln!("exported {n} row(s)");
    Ok(EXIT_OK)
}

/// Which of the database's files (`file`, `WAL`, `shared-memory file`) `out` names, by path
/// or by the same file under another name (`stat` only: opening one of them here would drop the
/// store's locks, and truncating it would destroy it).
pub(super) fn database_file_named(db: &Path, out: &Path) -> Option<&'static str> {
    #[cfg(unix)]
    let same_file = |a: &Path, b: &Path| {
        use std::os::unix::fs::MetadataExt;
        let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        id(a).is_some_and(|a| Some(a) == id(b))
    };
    #[cfg(not(unix))]
    let same_file = |_: &Path, _: &Path| false;
    [
        ("file", ""),
        ("WAL", "-wal"),
        ("shared-memory file", "-shm"),
    ]
    .into_iter()
    .find(|(_, suffix)| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        let path = PathBuf::from(name);
        path == out || same_file(&path, out)
    })
    .map(|(file, _)| file)
}

/// Creates (or truncates) `path` for an export, readable by its owner alone: an export holds
/// every stored word. An existing regular file that group or others could read is made private
/// too; a device or pipe (`--out /dev/stdout`) is left as it is.
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let f = options.open(path)?;
        let meta = f.metadata()?;
        if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
            f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        Ok(f)
    }
    #[cfg(not(unix))]
    options.open(path)
}

/// `memscope completions SHELL`: the completion script for the command line as it is.
pub fn completions(shell: clap_complete::Shell) -> Result<i32> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut super::command(), "memscope", &mut script);
    super::output::print_generated(&script)?;
    Ok(EXIT_OK)
}

/// `memscope man`: memscope(1) on stdout, or with `--dir` one page per command in that folder.
pub fn man(dir: Option<PathBuf>) -> Result<i32> {
    match dir {
        Some(dir) => {
            if !dir.is_dir() {
                bail!(
                    "{} is not a folder: create it first, or leave out --dir to print the page",
                    dir.display()
                );
            }
            clap_mangen::generate_to(super::command(), &dir)
                .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
            outln!("wrote the manual pages into {}", dir.display());
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(super::command()).render(&mut page)?;
            super::output::print_generated(&page)?;
        }
    }
    Ok(EXIT_OK)
}

/// `import FILE`: every refusal says that nothing was imported, those before the store opens
/// too (`dump::nothing_imported`).
pub fn import(path: &Path, file: &Path) -> Result<i32> {
    use crate::store::dump::nothing_imported;
    let mut input: Box<dyn std::io::BufRead> = if file == Path::new("-") {
        // Standard input is read like a file: the whole dump is checked inside the import's
        // one transaction, so a dump piped in is as all-or-nothing as a file.
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            return Err(super::usage(
                "import - reads an export from standard input, which is a terminal here: pipe one in (`memscope --db old.db export | memscope --db new.db import -`) or pass its file — nothing was imported",
            ));
        }
        Box::new(std::io::stdin().lock())
    } else {
        if file.is_dir() {
            return Err(nothing_imported(anyhow::anyhow!(
                "cannot import {}: it is a folder, not a file: pass a file written by `memscope export`",
                file.display()
            )));
        }
        // The dump may name the database's own files (`import x.db` into x.db): this handle
        // stays open until `import` returns, after the store below has closed (`made_for`'s
        // body owns it), so its close drops no lock SQLite still holds.
        let f = std::fs::File::open(file)
            .with_context(|| {
                format!(
                    "cannot read {}: pass a file written by `memscope export`, or - for standard input",
                    file.display()
                )
            })
            .map_err(nothing_imported)?;
        Box::new(std::io::BufReader::new(f))
    };
    // A database given for its export (found by review: "line 1 … is not UTF-8 text"), said
    // before anything is created.
    if input
        .fill_buf()
        .is_ok_and(|head| head.starts_with(b"SQLite format 3\0"))
    {
        // Standard input has no path to export from (found by review: the command said
        // `--db standard input`): the database the user redirected is theirs to name.
        let (shown, db) = match file == Path::new("-") {
            true => ("standard input".to_string(), "THAT.db".to_string()),
            false => (
                file.display().to_string(),
                crate::model::shell_word(&file.to_string_lossy()),
            ),
        };
        return Err(nothing_imported(anyhow::anyhow!(
            "cannot import {shown}: it is a SQLite database, not a file written by `memscope export`: export it first (`memscope --db {db} export > dump.jsonl`) and import that file"
        )));
    }
    // Like a new file, a PostgreSQL database gets memscope's schema first (README, "seq, alias,
    // export / import": a refused import leaves it there, empty, for the retry).
    let place = match postgres::Address::recognise(path.as_os_str()) {
        Some(address) => {
            let address = address?;
            postgres::prepare(&address).map_err(nothing_imported)?;
            address.describe()
        }
        None => path.display().to_string(),
    };
    // The store's own refusals say it already; a PostgreSQL commit whose answer was lost is no
    // refusal.
    let report = made_for(path, || {
        AnyStore::open(path, OpenMode::Create)
            .map_err(nothing_imported)?
            .import(&mut input)
    })?;
    let total: u64 = report.rows.values().sum();
    outln!("imported {total} row(s) into {place}: check is clean");
    if report.blanked > 0 {
        outln!(
            "blanked the content of {} history event(s) an earlier release's delete or gc kept (a source of a refused write, what a rescope left of a deleted memory), as this release's delete and gc do; the events stay",
            report.blanked
        );
    }
    if !report.counted {
        outln!("the export has no end line counting its rows (memscope wrote one from 2026-12-03 on): this import could not tell whether the file was whole");
    }
    Ok(EXIT_OK)
}

/// Runs `body`, which opens `path` to change it (creating the file when there is none): when
/// it fails, a file it made goes again with its journals, so a refused command leaves no empty
/// database (nor a folder made for it) behind. (A PostgreSQL address is no file: nothing is
/// removed.)
pub(crate) fn made_for<T>(path: &Path, body: impl FnOnce() -> Result<T>) -> Result<T> {
    let new_file = postgres::Address::recognise(path.as_os_str()).is_none() && !path.exists();
    // The folders opening it would make, deepest first.
    let new_folders: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    let out = body();
    // The store is closed by now (`body` owned it). Another process may have written into the
    // file since: then it stays.
    if out.is_err() && new_file && !crate::store::remove_made_file(path) {
        // Only an empty folder goes: `remove_dir` refuses any other.
        for folder in new_folders {
            let _ = std::fs::remove_dir(folder);
        }
    }
    out
}

/// Builds the demo database fresh (at `--db`, else the data directory's demo.db).
pub fn demo(db: Option<PathBuf>, no_tui: bool, mouse: crate::tui::Mouse) -> Result<i32> {
    // Asked before the build, so a script that forgot `--no-tui` is refused with nothing done
    // (found by review: it built, or rebuilt, the database and then failed).
    if !no_tui && !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        bail!(
            "the terminal UI needs an interactive terminal, so the demo was not built: `memscope demo --no-tui` builds it without opening the UI"
        );
    }
    let path = match db {
        Some(db) => db,
        None => data_dir()?.join("demo.db"),
    };
    if path.exists() {
        // A device or a pipe is said as it is: nothing there would be overwritten.
        let mut store_probe = Store::open(&path, OpenMode::Existing).map_err(|e| {
            if e.is::<crate::store::NotAFile>() {
                return e;
            }
            e.context(format!(
                "{} exists and is not a memscope database; refusing to overwrite it",
                path.display()
            ))
        });
        if let Ok(s) = store_probe.as_mut() {
            if s.counts()?.memories > 0 && !is_demo(s)? {
                bail!(
                    "{} holds memories that are not the demo's: pass another --db for the demo",
                    path.display()
                );
            }
        }
        store_probe?;
        for suffix in ["", "-wal", "-shm"] {
            let p = PathBuf::from(format!("{}{suffix}", path.display()));
            if p.exists() {
                std::fs::remove_file(&p)
                    .with_context(|| format!("cannot replace {}", p.display()))?;
            }
        }
    }
    let mut store = Store::open(&path, OpenMode::Create)?;
    let summary = crate::demo::load(&mut store)?;
    if no_tui {
        outln!("built the demo database at {}", path.display());
        outln!("{summary}");
        outln!(
            "open it with: memscope --db {} tui",
            crate::model::shell_path(&path)
        );
        return Ok(EXIT_OK);
    }
    // The demo opens on the incident: the top suspect (README, "memscope suspects").
    let incident = store.suspects()?.first().map(|s| s.record.identity());
    crate::tui::run(Box::new(store), mouse, incident)
}

fn is_demo(store: &Store) -> Result<bool> {
    Ok(store.setting("demo")?.is_some())
}
