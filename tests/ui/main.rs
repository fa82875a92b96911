//! The terminal UI on its state, without a terminal: keys → actions → state, paging through the
//! store, and rendered frames (insta snapshots in `tests/snapshots/`).
//!
//! Run: `cargo test --release --test ui` (one module: `--test ui -- keys::`).

#[path = "../support/mod.rs"]
mod support;

mod dialogs;
mod failures;
mod filters;
mod header;
mod held_keys;
mod keys;
mod paging;
mod probe;
mod reads;
mod repairs;
mod snapshots;
mod suspects;
mod timeline;
mod welcome;
