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

/// What a predicate name holds that an alias over it would cut off: live records (a write
/// could no longer reach them) and tombstones (a write of a deleted memory would be stored
/// under the canonical name, out of its tombstone's reach).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Held {
    pub live: i64,
    pub deleted: i64,
}

/// What adding an alias did: the pair, the aliases that pointed at `alias` and now point at
/// `canonical` (so no chain forms), and whether the pair was already there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasAdded {
    pub alias: String,
    pub canonical: String,
    pub repointed: Vec<String>,
    pub existed: bool,
}

impl AliasAdded {
    pub(crate) fn new(
        alias: String,
        canonical: String,
        mut repointed: Vec<String>,
        existed: bool,
    ) -> AliasAdded {
        repointed.sort();
        AliasAdded {
            alias,
            canonical,
            repointed,
            existed,
        }
    }
}

/// Whether `alias → canonical` may be added, given what `canonical` is itself an alias of (if
/// anything) and what is stored under `alias`. Aliases that pointed at `alias` are then
/// pointed at `canonical` by the backend, so no chain forms either way.
pub(crate) fn judge(
    alias: &str,
    canonical: &str,
    canonical_is_alias_of: Option<&str>,
    held: Held,
) -> Result<()> {
    let Held { live, deleted } = held;
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
    if deleted > 0 {
        bail!(
            "'{alias}' has {deleted} deleted memor{} (tombstone{}): as an alias, a write of {} would be stored under '{canonical}', out of the tombstone's reach — restore {} or let `memscope gc` collect the tombstone{} before making it an alias",
            if deleted == 1 { "y" } else { "ies" },
            if deleted == 1 { "" } else { "s" },
            if deleted == 1 { "it" } else { "them" },
            if deleted == 1 { "it" } else { "them" },
            if deleted == 1 { "" } else { "s" },
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
        let e = judge("baz", "foo_bar", Some("baz"), Held::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("already meet"), "{e}");
        assert!(e.contains("nothing to add"), "{e}");
        assert!(
            !e.contains("add 'baz' → 'baz'"),
            "the advice must not be refused: {e}"
        );
        // A chain still names the name to point at.
        let e = judge("qux", "foo_bar", Some("baz"), Held::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("add 'qux' → 'baz' instead"), "{e}");
    }

    #[test]
    fn a_name_with_deleted_memories_is_not_made_an_alias() {
        let held = Held {
            live: 0,
            deleted: 1,
        };
        let e = judge("diet", "food_pref", None, held)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 deleted memory (tombstone)"), "{e}");
        assert!(e.contains("restore it or let `memscope gc`"), "{e}");
        assert!(judge("diet", "food_pref", None, Held::default()).is_ok());
    }
}
