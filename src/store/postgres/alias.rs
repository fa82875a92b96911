//! Predicate aliases on PostgreSQL (README, "seq, alias, export / import"), judged by
//! [`crate::store::alias`] as on SQLite. Writers run concurrently here: adding an alias first
//! locks the alias table ACCESS EXCLUSIVE, which waits for every transaction that has read it —
//! each write maps its predicate through the table inside its own transaction — and holds
//! back new ones until the alias commits. So a write in flight under the new alias's name is
//! committed before the live records are counted (and refuses the alias), and one that starts
//! later reads the alias and stores under the canonical name.

use super::store::PgStore;
use crate::store::alias::{judge, normalized_pair, AliasAdded, Held};
use anyhow::Result;

impl PgStore {
    /// Adds `alias → canonical` (both normalized); aliases of `alias` then point at
    /// `canonical`, so no chain forms.
    pub fn add_alias(&mut self, alias: &str, canonical: &str) -> Result<AliasAdded> {
        let (alias, canonical) = normalized_pair(alias, canonical)?;
        self.in_tx(|t| {
            t.txn()?
                .batch_execute("LOCK TABLE predicate_aliases IN ACCESS EXCLUSIVE MODE")?;
            let target: Option<String> = t
                .opt(
                    "SELECT canonical FROM predicate_aliases WHERE alias = $1",
                    &[&canonical],
                )?
                .map(|r| r.get(0));
            let held = t.one(
                "SELECT (SELECT count(*) FROM memories WHERE predicate = $1),
                        (SELECT count(*) FROM tombstones WHERE predicate = $1),
                        EXISTS (SELECT 1 FROM predicate_aliases WHERE alias = $1 AND canonical = $2)",
                &[&alias, &canonical],
            )?;
            let existed: bool = held.get(2);
            let held = Held {
                live: held.get(0),
                deleted: held.get(1),
            };
            judge(&alias, &canonical, target.as_deref(), held)?;
            let repointed = t
                .all(
                    "UPDATE predicate_aliases SET canonical = $2 WHERE canonical = $1 RETURNING alias",
                    &[&alias, &canonical],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            t.exec(
                "INSERT INTO predicate_aliases (alias, canonical, added_at) VALUES ($1, $2, memscope_now())
                 ON CONFLICT (alias) DO UPDATE SET canonical = EXCLUDED.canonical, added_at = EXCLUDED.added_at",
                &[&alias, &canonical],
            )?;
            Ok(AliasAdded::new(alias.clone(), canonical.clone(), repointed, existed))
        })
    }

    /// The alias table, by canonical then alias (bytewise, as SQLite orders them).
    pub fn aliases(&mut self) -> Result<Vec<(String, String)>> {
        self.in_tx(|t| {
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
