//! The terminal UI (issue 3).

use crate::store::Store;
use anyhow::Result;

pub fn run(store: Store) -> Result<i32> {
    anyhow::bail!(
        "the terminal UI is not available in this build yet; use the CLI (memscope --help) for {}",
        store.path().display()
    )
}
