//! `memscope mcp`: its arguments and a raw JSON-RPC session on the real binary, and a client that
//! is not ours (the official Python MCP SDK) writing exactly what the CLI writes.
//!
//! Run: `cargo test --release --test mcp` (one module: `--test mcp -- args::`).

#[path = "../support/mod.rs"]
mod support;

mod args;
mod guard;
mod python;
