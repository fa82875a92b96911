//! memscope: a correct write path, precedence resolution and a terminal UI over the shared
//! memory database of coding agents — a SQLite file, or PostgreSQL for a team.
//!
//! `store` is the only code that speaks SQL; `model` holds the plain domain types; `cli` prints
//! what `store` returns; `tui` draws it.
// Every line is printed by `frontend::output`, which escapes the control characters of stored words.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod cli;
pub mod demo;
pub mod frontend;
pub mod json_scan;
pub mod mcp;
pub mod model;
pub mod spelling;
pub mod store;
pub mod strict_json;
pub mod tui;

pub use model::*;
pub use store::{Clock, OpenMode, Store};
