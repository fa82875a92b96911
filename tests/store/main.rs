//! The store's contract, on real database files, through the library and the real binary: the
//! write decision and its invariants, precedence, deletion that destroys the bytes, migrations,
//! spelling of ids, the incident loop (as-of, read log, rescope, revert), export/import, the
//! seed articles' scenarios, a foreign SQL client against the schema's guards, and PostgreSQL
//! under faults and from several network hosts.
//!
//! Run: `cargo test --release --test store` (one module: `--test store -- migration::`).

#[path = "../support/mod.rs"]
mod support;

mod apply_equivalence;
mod foreign_client;
mod guard_batch;
mod incident;
mod migration;
mod moved_file;
mod postgres;
mod postgres_admin;
mod postgres_apply;
mod postgres_check;
mod postgres_faults;
mod postgres_incident;
mod postgres_roles;
mod postgres_tls;
mod postgres_transfer;
mod postgres_ui;
mod postgres_write;
mod precedence;
mod previews;
mod purge_on_disk;
mod scenarios;
mod spelling;
mod timelines;
mod transfer;
mod write_invariants;
