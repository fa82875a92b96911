//! The command line as scripts, agents and people meet it, on the real binary: the contract
//! (JSON Lines, `--json` shapes, exit codes), bad input, hostile text on a terminal, the layout
//! of the text, the guards a new user relies on and answers that used to be wrong.
//!
//! Run: `cargo test --release --test cli` (one module: `--test cli -- contract::`).

#[path = "../support/mod.rs"]
mod support;

mod bad_input;
mod contract;
mod guards;
mod hostile_text;
mod id_limit;
mod layout;
mod round_trips;
mod scope_guard;
mod suspects;
mod wrong_answers;
