//! Predicate aliases on PostgreSQL (README, "seq, alias, export / import"), judged by
//! [`crate::store::alias`] as on SQLite. Writers run concurrently here: adding an alias first
//! locks the alias table ACCESS EXCLUSIVE, which waits for every transaction that has read it —
//! each write maps its predicate through the table inside its own transaction — and holds
//! back new ones until the alias commits. So a write in flight under the new alias's name is
//! committed before the live records are counted (and refuses the alias), and one that starts
//! later reads the alias and stores under the canonical name.

use super::store::PgStore;
use crate::store::alias::{
    judge, normalized_pair, waits_on_deleted_only, AliasAdded, Held, HELD_SQL, HELD_SUBJECTS_SQL,
    MOVED_SHADOWED_SQL, MOVE_PENDING_SQL, MOVE_READS_SQL, RELABEL_SHADOWED_SQL,
    TOMBSTONED_SCOPES_SQL,
};
use anyhow::Result;

impl PgStore {
    /// Adds `alias → canonical` (both normalized); aliases of `alias` then point at
    /// `canonical`, so no chain forms.
    pub fn add_alias(&mut self, alias: &str, canonical: &str) -> Result<AliasAdded> {
        let (alias, canonical) = normalized_pair(alias, canonical)?;
        self.in_change_tx(|t| {
            t.txn()?
                .batch_execute("LOCK TABLE predicate_aliases IN ACCESS EXCLUSIVE MODE")?;
            let target: Option<String> = t
                .opt(
                    "SELECT canonical FROM predicate_aliases WHERE alias = $1",
                    &[&canonical],
                )?
                .map(|r| r.get(0));
            let before: Option<String> = t
                .opt(
                    "SELECT canonical FROM predicate_aliases WHERE alias = $1",
                    &[&alias],
                )?
                .map(|r| r.get(0));
            let counts = t.one(HELD_SQL, &[&alias])?;
            let mut held = Held {
                live: counts.get(0),
                deleted: counts.get(1),
                past_values: counts.get(2),
                past_subjects: Vec::new(),
            };
            if held.past_values > 0 {
                held.past_subjects = t
                    .all(HELD_SUBJECTS_SQL, &[&alias])?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
            }
            judge(&alias, &canonical, target.as_deref(), held)?;
            let repointed = t
                .all(
                    "UPDATE predicate_aliases SET canonical = $2 WHERE canonical = $1 RETURNING alias",
                    &[&alias, &canonical],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let moved: Vec<(i64, String, String, String)> = t
                .all(MOVE_PENDING_SQL, &[&alias, &canonical])?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                .collect();
            let shadowed: Vec<String> = t
                .all(MOVED_SHADOWED_SQL, &[&alias])?
                .iter()
                .map(|r| r.get(0))
                .collect();
            for text in shadowed {
                let relabeled = crate::store::alias::unversioned_labels(&text);
                t.exec(RELABEL_SHADOWED_SQL, &[&alias, &text, &relabeled])?;
            }
            let reads = t.exec(MOVE_READS_SQL, &[&alias, &canonical])? as i64;
            t.exec(
                "INSERT INTO predicate_aliases (alias, canonical, added_at) VALUES ($1, $2, memscope_now())
                 ON CONFLICT (alias) DO UPDATE SET canonical = EXCLUDED.canonical, added_at = EXCLUDED.added_at",
                &[&alias, &canonical],
            )?;
            let mut added = AliasAdded::new(
                alias.clone(),
                canonical.clone(),
                repointed,
                (moved.len() as i64, reads),
                before,
            );
            for (id, subject, candidates, status) in &moved {
                let deleted: Vec<String> = t
                    .all(TOMBSTONED_SCOPES_SQL, &[subject, &canonical])?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                if waits_on_deleted_only(status, candidates, &deleted) {
                    added.dropped_pending +=
                        t.exec("DELETE FROM pending WHERE id = $1", &[id])? as i64;
                }
            }
            let owed = match added.dropped_pending {
                0 => None,
                _ => Some(super::vacuum::owe(t.txn()?)?),
            };
            Ok((added, owed))
        })
        .and_then(|(added, owed)| {
            // Like a delete's, the purge reaches the table files where the role may VACUUM.
            if let Some(owed) = owed {
                super::vacuum::after_purge_paying(self.connection()?, &["pending"], &owed);
            }
            Ok(added)
        })
    }

    /// Removes the alias `alias` ([`crate::store::alias::removed`] says what happened). A
    /// write in flight that read the alias stores under the canonical name, as it would have
    /// a moment earlier.
    pub fn remove_alias(&mut self, alias: &str) -> Result<(String, String)> {
        let alias =
            crate::model::normalize_predicate(alias).map_err(crate::model::InvalidRequest)?;
        let canonical = self.in_change_tx(|t| {
            Ok(t.opt(crate::store::alias::REMOVE_SQL, &[&alias])?
                .map(|r| r.get(0)))
        })?;
        crate::store::alias::removed(alias, canonical)
    }

    /// The alias table, by canonical then alias (bytewise, as SQLite orders them).
    pub fn aliases(&mut self) -> Result<Vec<(String, String)>> {
        self.read(|t| {
            Ok(t.all(
                "SELECT alias, canonical FROM predicate_aliases
                     ORDER BY canonical COLLATE \"C\", alias COLLATE \"C\"",
                &[],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        })
    }
}
