//! The rules of a predicate alias (README, "seq, alias, export / import"), one judge for both
//! backends: both sides normalized, never the same, never a chain, and never over a name that
//! still holds memories — live records (a write could no longer reach them), tombstones, or the
//! values of memories no longer current (no command could read or delete them under either
//! name). Pending items and logged reads under the name are moved to the canonical name with
//! the alias, so a delete of the canonical name reaches them. The backends read what the rule
//! needs inside their transaction and write the pair.

use anyhow::{bail, Result};

/// `alias` and `canonical` normalized; refused when they are the same.
pub(crate) fn normalized_pair(alias: &str, canonical: &str) -> Result<(String, String)> {
    let alias = crate::model::normalize_predicate(alias).map_err(crate::model::InvalidRequest)?;
    let canonical =
        crate::model::normalize_predicate(canonical).map_err(crate::model::InvalidRequest)?;
    // Both are predicates a write may store (an alias's name, once it is removed).
    crate::model::within_id_limit("alias", &alias).map_err(crate::model::InvalidRequest)?;
    crate::model::within_id_limit("canonical predicate", &canonical)
        .map_err(crate::model::InvalidRequest)?;
    if alias == canonical {
        bail!("alias '{alias}' and canonical '{canonical}' are the same after normalization: nothing to add");
    }
    Ok((alias, canonical))
}

/// What a predicate name holds that an alias over it would cut off: live records (a write
/// could no longer reach them), tombstones (a write of a deleted memory would be stored under
/// the canonical name, out of its tombstone's reach), and history events that still hold a
/// value or the user's words (no command could show or delete them under either name).
#[derive(Debug, Clone, Default)]
pub(crate) struct Held {
    pub live: i64,
    pub deleted: i64,
    pub past_values: i64,
    /// Some subjects those history events are of (at most [`HELD_SUBJECTS`]), for the advice.
    pub past_subjects: Vec<String>,
}

/// How many subjects the refusal over past values names.
pub(crate) const HELD_SUBJECTS: i64 = 3;

/// The SQL both backends read [`Held`] with: `$1` the alias name. Columns: live records,
/// tombstones, history events with content, and up to [`HELD_SUBJECTS`] of their subjects
/// (one per row of the second statement, [`HELD_SUBJECTS_SQL`]).
pub(crate) const HELD_SQL: &str = "SELECT (SELECT count(*) FROM memories WHERE predicate = $1),
        (SELECT count(*) FROM tombstones WHERE predicate = $1),
        (SELECT count(*) FROM history
         WHERE predicate = $1 AND (value IS NOT NULL OR raw IS NOT NULL))";

/// The subjects of the history events with content under `$1`, a few, in byte order.
pub(crate) const HELD_SUBJECTS_SQL: &str = "SELECT DISTINCT subject FROM history
     WHERE predicate = $1 AND (value IS NOT NULL OR raw IS NOT NULL)
     ORDER BY 1 LIMIT 3";

/// What adding an alias did: the pair, the aliases that pointed at `alias` and now point at
/// `canonical` (so no chain forms), the pending items and logged reads that named `alias` and
/// now name `canonical`, of those pending items the open ones destroyed because every place
/// they wait on is a deleted memory of `canonical` ([`waits_on_deleted_only`]), and whether
/// the pair was already there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasAdded {
    pub alias: String,
    pub canonical: String,
    pub repointed: Vec<String>,
    pub moved_pending: i64,
    pub moved_reads: i64,
    pub dropped_pending: i64,
    pub existed: bool,
    /// The predicate the alias pointed at before, when it pointed at another one: the add
    /// re-pointed it (found by review: that happened without a word).
    pub replaced: Option<String>,
}

impl AliasAdded {
    pub(crate) fn new(
        alias: String,
        canonical: String,
        mut repointed: Vec<String>,
        moved: (i64, i64),
        before: Option<String>,
    ) -> AliasAdded {
        repointed.sort();
        AliasAdded {
            existed: before.as_deref() == Some(canonical.as_str()),
            replaced: before.filter(|b| *b != canonical),
            alias,
            canonical,
            repointed,
            moved_pending: moved.0,
            moved_reads: moved.1,
            dropped_pending: 0,
        }
    }
}

/// The statement that moves the name's pending items to the canonical name (`$1` the alias,
/// `$2` the canonical name), returning each moved item: `(id, subject, candidates, status)`.
pub(crate) const MOVE_PENDING_SQL: &str =
    "UPDATE pending SET predicate = $2 WHERE predicate = $1 RETURNING id, subject, candidates, status";

/// The scopes of `($1 subject, $2 predicate)` that are deleted (tombstoned).
pub(crate) const TOMBSTONED_SCOPES_SQL: &str =
    "SELECT scope FROM tombstones WHERE subject = $1 AND predicate = $2";

/// Whether a moved item now waits on deleted places only: open, and every candidate scope a
/// deleted memory of the canonical name. The write path refuses to queue such a write (it is
/// `rejected`: restore one first), so the moved item goes — destroyed, as the delete of those
/// memories destroyed the items it found — and no open item is left that no answer could
/// apply. An item with a live candidate left stays, as the write path would have queued it.
pub(crate) fn waits_on_deleted_only(status: &str, candidates: &str, deleted: &[String]) -> bool {
    let candidates: Vec<String> = serde_json::from_str(candidates).unwrap_or_default();
    status == "open" && !candidates.is_empty() && candidates.iter().all(|c| deleted.contains(c))
}

/// The statement that moves the logged reads under `$1` to `$2` when the alias is added (the
/// pending items move by [`MOVE_PENDING_SQL`]): each names its rows by predicate only, and
/// after the alias no command could reach them under `$1` — a delete of `$2` must destroy
/// them. The version a moved read got was one of the memories `$1` held — all gone, or the
/// alias would be refused — not `$2`'s: the read keeps the scope it got and drops the number,
/// so neither a replay nor `check` takes it for a version of `$2` (found by an exploratory
/// test: a read of `tool` v1 became `test_runner global v1`, another memory's first version,
/// and the UI's replay said the read log agreed). Its shadowed labels drop theirs too
/// ([`RELABEL_SHADOWED_SQL`], run first).
pub(crate) const MOVE_READS_SQL: &str =
    "UPDATE reads SET predicate = $2, version = NULL WHERE predicate = $1";

/// The shadowed labels (`scope@vN`) of the reads under `$1` that name a version: each distinct
/// text is rewritten by [`RELABEL_SHADOWED_SQL`] to [`unversioned_labels`] before the move.
pub(crate) const MOVED_SHADOWED_SQL: &str =
    "SELECT DISTINCT shadowed FROM reads WHERE predicate = $1 AND shadowed LIKE '%@v%'";

/// Rewrites the shadowed text `$2` of the reads under `$1` to `$3`.
pub(crate) const RELABEL_SHADOWED_SQL: &str =
    "UPDATE reads SET shadowed = $3 WHERE predicate = $1 AND shadowed = $2";

/// A read's shadowed labels without their versions (`["repo:web@v2"]` → `["repo:web"]`); a
/// text memscope did not write is left as it is (`check` names it).
pub(crate) fn unversioned_labels(shadowed: &str) -> String {
    match serde_json::from_str::<Vec<String>>(shadowed) {
        Ok(labels) => {
            let scopes: Vec<&str> = labels
                .iter()
                .map(|l| {
                    // `scope@v3`; a label already without its version stays as it is, even
                    // when its id holds `@v` (`repo:me@vps`).
                    l.rsplit_once("@v")
                        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                        .map_or(l.as_str(), |(scope, _)| scope)
                })
                .collect();
            serde_json::to_string(&scopes).unwrap_or_else(|_| shadowed.to_string())
        }
        Err(_) => shadowed.to_string(),
    }
}

/// What `alias remove` did: `removed` is the canonical name the alias stood for, `None` when
/// `alias` (normalized) is no alias — refused in one sentence.
pub(crate) fn removed(alias: String, removed: Option<String>) -> Result<(String, String)> {
    match removed {
        Some(canonical) => Ok((alias, canonical)),
        None => Err(crate::model::InvalidRequest(format!(
            "'{alias}' is not an alias, so nothing was removed: `memscope alias list` shows the aliases"
        ))
        .into()),
    }
}

/// The statement that removes an alias and returns the name it stood for (`$1` the alias).
pub(crate) const REMOVE_SQL: &str =
    "DELETE FROM predicate_aliases WHERE alias = $1 RETURNING canonical";

/// Whether `alias → canonical` may be added, given what `canonical` is itself an alias of (if
/// anything) and what is stored under `alias`. Aliases that pointed at `alias` are then
/// pointed at `canonical` by the backend, so no chain forms either way.
pub(crate) fn judge(
    alias: &str,
    canonical: &str,
    canonical_is_alias_of: Option<&str>,
    held: Held,
) -> Result<()> {
    let Held {
        live,
        deleted,
        past_values,
        past_subjects,
    } = held;
    if let Some(target) = canonical_is_alias_of {
        if target == alias {
            // `baz → foo_bar` over `foo_bar → baz`: a cycle, not a chain to shorten.
            bail!("'{canonical}' is already an alias of '{alias}', so the two names already meet: writes under either are stored under '{alias}', and an alias back would make a cycle — nothing to add");
        }
        bail!("'{canonical}' is itself an alias of '{target}': add '{alias}' → '{target}' instead");
    }
    if live > 0 {
        bail!(
            "'{alias}' is used by {live} live record(s): write each value again under '{canonical}' (`memscope write --predicate {canonical} …`) and delete the records under '{alias}' (`memscope delete --subject S --predicate {alias}`) before making it an alias"
        );
    }
    if deleted > 0 {
        bail!(
            "'{alias}' has {deleted} deleted memor{} (tombstone{}): as an alias, a write of {} would be stored under '{canonical}', out of the tombstone's reach — let `memscope gc --tombstone-safe-days N` collect the tombstone{} before making it an alias",
            if deleted == 1 { "y" } else { "ies" },
            if deleted == 1 { "" } else { "s" },
            if deleted == 1 { "it" } else { "them" },
            if deleted == 1 { "" } else { "s" },
        );
    }
    if past_values > 0 {
        let word = crate::model::shell_word;
        let subject = past_subjects.first().map_or("SUBJECT".into(), |s| word(s));
        let others: Vec<String> = past_subjects.iter().skip(1).map(|s| word(s)).collect();
        let more = match others.as_slice() {
            [] => String::new(),
            _ if past_subjects.len() as i64 >= HELD_SUBJECTS => {
                format!(", and so for {} and others", others.join(", "))
            }
            _ => format!(", and so for {}", others.join(", ")),
        };
        bail!(
            "'{alias}' still keeps the values of memories no longer current ({past_values} history event{}): as an alias, no command could show or delete them under either name — delete them first (`memscope delete --subject {subject} --predicate {} --yes`{more}), then let `memscope gc --tombstone-safe-days N` collect the tombstones",
            if past_values == 1 { "" } else { "s" },
            word(alias),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::unversioned_labels;

    #[test]
    fn a_moved_read_keeps_its_shadowed_scopes_without_versions() {
        assert_eq!(
            unversioned_labels(r#"["repo:web@v2","global@v13","repo:me@vps@v1"]"#),
            r#"["repo:web","global","repo:me@vps"]"#
        );
        // Moved again: a label already without its version stays, whatever its id holds.
        assert_eq!(
            unversioned_labels(r#"["repo:me@vps","task:仓库@v"]"#),
            r#"["repo:me@vps","task:仓库@v"]"#
        );
        assert_eq!(unversioned_labels("not json"), "not json");
    }

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
            deleted: 1,
            ..Held::default()
        };
        let e = judge("diet", "food_pref", None, held)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 deleted memory (tombstone)"), "{e}");
        assert!(
            e.contains("let `memscope gc --tombstone-safe-days N`"),
            "{e}"
        );
        assert!(judge("diet", "food_pref", None, Held::default()).is_ok());
    }

    #[test]
    fn a_name_whose_history_keeps_values_names_the_deletes_that_free_it() {
        let held = |subjects: &[&str]| Held {
            past_values: 4,
            past_subjects: subjects.iter().map(|s| s.to_string()).collect(),
            ..Held::default()
        };
        let e = judge("diet", "food_pref", None, held(&["user:42"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("(4 history events)"), "{e}");
        assert!(
            e.contains("`memscope delete --subject user:42 --predicate diet --yes`)"),
            "{e}"
        );
        // A subject a shell would split is quoted; more subjects are named, then "others".
        let e = judge("diet", "food_pref", None, held(&["my team", "u:1", "u:2"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "--subject 'my team' --predicate diet --yes`, and so for u:1, u:2 and others)"
            ),
            "{e}"
        );
    }
}
