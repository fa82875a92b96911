//! The store: the one judge of what memory holds (docs/ARCHITECTURE.md). `decide` is its
//! backend-neutral core — the write rules and the resolution chain, no SQL; `sqlite` is the
//! backend that probes, applies and keeps the data (schema, guards, statements, the
//! transaction runner, checkpoint and purge debt). A second backend is a folder beside it:
//! `postgres` holds PostgreSQL's groundwork (address, connection, schema and guards).

pub mod decide;
pub(crate) mod events;
pub mod guard;
pub mod postgres;
pub(crate) mod prepared;
mod sqlite;

pub use sqlite::*;
