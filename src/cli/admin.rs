//! `init`, `check`, `alias`, `export`, `import`, `demo`.

use super::{data_dir, print_json, EXIT_FAILED, EXIT_OK};
use crate::store::{OpenMode, Store};
use anyhow::{bail, Context, Result};
use clap::Subcommand;
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
        println!(
            "{} is already a memscope database (schema up to date)",
            store.path().display()
        );
    } else {
        println!("created {}", store.path().display());
    }
    Ok(EXIT_OK)
}

pub fn check(store: &Store, json: bool) -> Result<i32> {
    let report = store.check()?;
    if json {
        print_json(&report)?;
    } else {
        if report.ok {
            println!("ok: all six invariants hold");
        }
        for v in &report.violations {
            println!(
                "VIOLATION invariant {} ({}): {}",
                v.invariant, v.name, v.detail
            );
        }
        for (k, v) in &report.metrics {
            println!("  {k}: {v}");
        }
    }
    Ok(if report.ok { EXIT_OK } else { EXIT_FAILED })
}

pub fn alias(path: &Path, cmd: AliasCommand) -> Result<i32> {
    match cmd {
        AliasCommand::Add { alias, canonical } => {
            let mut store = Store::open(path, OpenMode::Create)?;
            let (a, c) = store.add_alias(&alias, &canonical)?;
            println!("alias {a} → {c}");
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
                    println!("{a} → {c}");
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
    eprintln!("exported {n} row(s)");
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
    println!(
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
        println!("built the demo database at {}", path.display());
        println!("{summary}");
        println!("open it with: memscope --db {} tui", path.display());
        return Ok(EXIT_OK);
    }
    crate::tui::run(store)
}

fn is_demo(store: &Store) -> Result<bool> {
    Ok(store.setting("demo")?.is_some())
}
