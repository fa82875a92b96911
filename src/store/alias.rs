//! The rules of a predicate alias (README, "seq, alias, export / import"), one judge for both
//! backends: both sides normalized, never the same, never a chain, and never over a name that
//! still has live records (a write could no longer reach them). The backends read what the
//! rule needs inside their transaction and write the pair.

use anyhow::{bail, Result};

/// `alias` and `canonical` normalized; refused when they are the same.
pub(crate) fn normalized_pair(alias: &str, canonical: &str) -> Result<(String, String)> {
    let alias = crate::model::normalize_predicate(alias).map_err(crate::model::InvalidRequest)?;
    let canonical =
        crate::model::normalize_predicate(canonical).map_err(crate::model::InvalidRequest)?;
    if alias == canonical {
        bail!("alias '{alias}' and canonical '{canonical}' are the same after normalization: nothing to add");
    }
    Ok((alias, canonical))
}

/// Whether `alias → canonical` may be added, given what `canonical` is itself an alias of (if
/// anything) and how many live records are stored under `alias`. Aliases that pointed at
/// `alias` are then pointed at `canonical` by the backend, so no chain forms either way.
pub(crate) fn judge(
    alias: &str,
    canonical: &str,
    canonical_is_alias_of: Option<&str>,
    live: i64,
) -> Result<()> {
    if let Some(target) = canonical_is_alias_of {
        if target == alias {
            // `baz → foo_bar` over `foo_bar → baz`: a cycle, not a chain to shorten.
            bail!("'{canonical}' is already an alias of '{alias}', so the two names already meet: writes under either are stored under '{alias}', and an alias back would make a cycle — nothing to add");
        }
        bail!("'{canonical}' is itself an alias of '{target}': add '{alias}' → '{target}' instead");
    }
    if live > 0 {
        bail!(
            "'{alias}' is used by {live} live record(s): delete or rewrite them under '{canonical}' before making it an alias"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alias_back_is_a_cycle_and_says_nothing_needs_adding() {
        // `foo_bar → baz` stored; `baz → foo_bar` asked.
        let e = judge("baz", "foo_bar", Some("baz"), 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("already meet"), "{e}");
        assert!(e.contains("nothing to add"), "{e}");
        assert!(
            !e.contains("add 'baz' → 'baz'"),
            "the advice must not be refused: {e}"
        );
        // A chain still names the name to point at.
        let e = judge("qux", "foo_bar", Some("baz"), 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("add 'qux' → 'baz' instead"), "{e}");
    }
}
