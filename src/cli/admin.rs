//! `init`, `check`, `alias`, `export`, `import`, `demo`.

use super::{data_dir, errln, outln, print_json, EXIT_FAILED, EXIT_OK};
use crate::store::{is_damage, CheckReport, Integrity, IntegrityMode, OpenMode, Store};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum AliasCommand {
    /// Map ALIAS to CANONICAL (both normalized)
    Add { alias: String, canonical: String },
    /// Show the alias table
    List {
        #[arg(long)]
        json: bool,
    },
}

pub fn init(path: &Path) -> Result<i32> {
    let existed = path.exists()
        && std::fs::metadata(path)
            .map(|m| m.len() > 0)
            .unwrap_or(false);
    let store = Store::open(path, OpenMode::Create)?;
    if existed {
        outln!(
            "{} is already a memscope database (schema up to date)",
            store.path().display()
        );
    } else {
        outln!("created {}", store.path().display());
    }
    Ok(EXIT_OK)
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
    /// Run SQLite's full integrity check (indexes against their tables too) instead of the quick one
    #[arg(long)]
    pub full: bool,
}

pub fn check(path: &Path, args: CheckArgs) -> Result<i32> {
    let mode = if args.full {
        IntegrityMode::Full
    } else {
        IntegrityMode::Quick
    };
    let report = match Store::open(path, OpenMode::Existing) {
        Ok(store) => store.check_with(mode)?,
        // A file too damaged to open is the check's answer, not an error of the command.
        Err(e) if is_damage(&e) => CheckReport {
            ok: false,
            integrity: Some(Integrity::unreadable(mode, format!("{e:#}"))),
            violations: Vec::new(),
            metrics: Default::default(),
        },
        Err(e) => return Err(e),
    };
    if args.json {
        print_json(&report)?;
    } else {
        if report.ok {
            outln!("ok: the file is intact and all six invariants hold");
        }
        if let Some(integrity) = report.integrity.as_ref().filter(|i| !i.ok) {
            outln!("DAMAGED: {}", integrity.sentence());
        }
        for v in &report.violations {
            outln!(
                "VIOLATION invariant {} ({}): {}",
                v.invariant,
                v.name,
                v.detail
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
    /// Change a setting: durability (full | normal), retention_days, tombstone_safe_days
    Set { key: String, value: String },
}

pub fn settings(path: &Path, command: Option<SettingsCommand>, json: bool) -> Result<i32> {
    match command {
        Some(SettingsCommand::Set { key, value }) => {
            let mut store = Store::open(path, OpenMode::Create)?;
            let stored = store
                .set_user_setting(key.trim(), &value)
                .map_err(|e| super::usage(format!("{e:#}")))?;
            if json {
                print_json(&serde_json::json!({ "key": key.trim(), "value": stored }))?;
            } else {
                outln!("{} = {stored}", key.trim());
            }
        }
        None => {
            let store = Store::open(path, OpenMode::Existing)?;
            let settings = store.user_settings()?;
            if json {
                let map: serde_json::Map<String, serde_json::Value> = settings
                    .into_iter()
                    .map(|(k, v)| (k, serde_json::Value::String(v)))
                    .collect();
                print_json(&map)?;
            } else {
                for (k, v) in settings {
                    outln!("{k} = {v}");
                }
            }
        }
    }
    Ok(EXIT_OK)
}

pub fn alias(path: &Path, cmd: AliasCommand) -> Result<i32> {
    match cmd {
        AliasCommand::Add { alias, canonical } => {
            let mut store = Store::open(path, OpenMode::Create)?;
            let (a, c) = store.add_alias(&alias, &canonical)?;
            outln!("alias {a} → {c}");
        }
        AliasCommand::List { json } => {
            let store = Store::open(path, OpenMode::Existing)?;
            let aliases = store.aliases()?;
            if json {
                let rows: Vec<_> = aliases
                    .iter()
                    .map(|(a, c)| serde_json::json!({ "alias": a, "canonical": c }))
                    .collect();
                print_json(&rows)?;
            } else {
                for (a, c) in aliases {
                    outln!("{a} → {c}");
                }
            }
        }
    }
    Ok(EXIT_OK)
}

pub fn export(store: &Store, out: Option<PathBuf>) -> Result<i32> {
    let n = match out {
        Some(p) => {
            let f = std::fs::File::create(&p)
                .with_context(|| format!("cannot create {}", p.display()))?;
            let mut w = std::io::BufWriter::new(f);
            let n = store.export(&mut w)?;
            std::io::Write::flush(&mut w)?;
            n
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            let n = store.export(&mut w)?;
            std::io::Write::flush(&mut w)?;
            n
        }
    };
    errln!("exported {n} row(s)");
    Ok(EXIT_OK)
}

pub fn import(path: &Path, file: &Path) -> Result<i32> {
    let f = std::fs::File::open(file).with_context(|| {
        format!(
            "cannot read {}: pass a file written by `memscope export`",
            file.display()
        )
    })?;
    let mut store = Store::open(path, OpenMode::Create)?;
    let report = store.import(&mut std::io::BufReader::new(f))?;
    let total: u64 = report.rows.values().sum();
    outln!(
        "imported {total} row(s) into {}: check is clean",
        store.path().display()
    );
    Ok(EXIT_OK)
}

/// Builds the demo database fresh (at `--db`, else the data directory's demo.db).
pub fn demo(db: Option<PathBuf>, no_tui: bool) -> Result<i32> {
    let path = db.unwrap_or_else(|| data_dir().join("demo.db"));
    if path.exists() {
        let mut store_probe = Store::open(&path, OpenMode::Existing).with_context(|| {
            format!(
                "{} exists and is not a memscope database; refusing to overwrite it",
                path.display()
            )
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
        outln!("open it with: memscope --db {} tui", path.display());
        return Ok(EXIT_OK);
    }
    crate::tui::run(store)
}

fn is_demo(store: &Store) -> Result<bool> {
    Ok(store.setting("demo")?.is_some())
}
