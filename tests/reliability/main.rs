//! The long-running reliability tests (issues 5 and 11): crashes, a full disk, foreign writers,
//! hostile input, agents' parallel MCP calls, the model-based property test, concurrent opens,
//! a purge blocked by a reader, curation (pending resolutions and reverts) racing writes and the
//! soak. Each module's comment says its knobs.
//!
//! Run: `MEMSCOPE_ASSERT_INVARIANTS=1 cargo test --release --test reliability` (one module:
//! `--test reliability -- soak:: --nocapture`).

#[path = "../support/mod.rs"]
mod support;

mod clock;
mod crash;
mod curation_race;
mod disk_full;
mod foreign;
mod gc_race;
mod guard;
mod hostile;
mod mcp;
mod model;
mod open;
mod purge_blocked;
mod purge_empties;
mod rescope_delete;
mod respell;
mod soak;
mod spellings;
