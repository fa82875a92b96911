//! `suspects` on PostgreSQL (README, "suspects"): the current `global` records judged by
//! [`crate::store::suspects`] as on SQLite — the same places (the spellings registry), the
//! same siblings (the scoped records of the subject stored from the same message), the same blast radius and
//! ranking — so the same data gives the same list.

use super::store::{PgStore, Tx};
use crate::model::Scope;
use crate::store::guard::Places;
use crate::store::suspects::{
    blast_radius, place_signals, placed_by_a_human, rank, repos, with_marked_places, Suspect,
};
use crate::store::ListFilter;
use anyhow::Result;
use std::collections::HashMap;

impl PgStore {
    /// Every current `global` record with a place signal, widest blast radius first. Reads
    /// only.
    pub fn suspects(&mut self) -> Result<Vec<Suspect>> {
        let globals = self.list(&ListFilter {
            scope: Some(Scope::Global),
            subject: None,
            predicate: None,
        })?;
        self.read(|t| {
            let known = known_places(t)?;
            let repos = repos(&known);
            let places = Places::new(&known);
            // The scoped records of each global record's subject its message wrote (as at write
            // time), in the order they were stored.
            let mut siblings: HashMap<(String, String), Vec<(String, Scope)>> = HashMap::new();
            for r in t.all(
                "SELECT s.subject, s.source, s.predicate, s.scope FROM memories s
                 WHERE s.scope <> 'global'
                   AND (s.subject, s.source) IN (SELECT g.subject, g.source FROM memories g WHERE g.scope = 'global')
                 ORDER BY s.id",
                &[],
            )? {
                if let Ok(scope) = Scope::parse(&r.get::<_, String>(3)) {
                    siblings
                        .entry((r.get(0), r.get(1)))
                        .or_default()
                        .push((r.get(2), scope));
                }
            }
            let mut out = Vec::new();
            for record in globals.iter() {
                let same = siblings
                    .get(&(record.subject.clone(), record.source.clone()))
                    .map_or(&[][..], Vec::as_slice);
                let Some((evidence, places)) = place_signals(&places, record.raw.as_deref(), same)
                else {
                    continue;
                };
                let outcomes: Vec<Option<String>> = t
                    .all(
                        "SELECT detail::json->>'outcome' FROM history
                         WHERE subject = $1 AND predicate = $2 AND scope = 'global'
                           AND event = 'pending_resolved' AND version = $3",
                        &[&record.subject, &record.predicate, &record.version],
                    )?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                if placed_by_a_human(outcomes.iter().map(Option::as_deref)) {
                    continue;
                }
                let detail: Option<String> = t
                    .opt(
                        "SELECT detail FROM history
                         WHERE subject = $1 AND predicate = $2 AND scope = 'global'
                           AND event = 'set' AND version = $3
                         ORDER BY id DESC LIMIT 1",
                        &[&record.subject, &record.predicate, &record.version],
                    )?
                    .and_then(|r| r.get(0));
                let places = with_marked_places(detail.as_deref(), places);
                let radius = radius(
                    t,
                    &repos,
                    &record.subject,
                    &record.predicate,
                    Some(record.version),
                )?;
                out.push(Suspect::new(record.clone(), evidence, places, radius));
            }
            rank(&mut out);
            Ok(out)
        })
    }
}

impl PgStore {
    /// The repos a global value of this subject and (canonical) predicate reaches (the
    /// pending queue's warning), judged as `suspects` judges it.
    pub fn blast_radius(&mut self, subject: &str, predicate: &str) -> Result<Vec<String>> {
        self.read(|t| {
            let known = known_places(t)?;
            Ok(radius(t, &repos(&known), subject, predicate, None)?.0)
        })
    }
}

/// The places the database knows: the spellings registry's repo and task scopes, bytewise
/// ordered as on SQLite.
fn known_places(t: &mut Tx<'_>) -> Result<Vec<Scope>> {
    Ok(t.all(
        "SELECT spelling FROM spellings WHERE kind = 'scope' ORDER BY spelling COLLATE \"C\"",
        &[],
    )?
    .iter()
    .filter_map(|r| Scope::parse(&r.get::<_, String>(0)).ok())
    .collect())
}

/// The blast radius among `repos` and the read log's readers, and how many logged reads were
/// served the global value: its `version`, not an earlier one (0 without a version).
fn radius(
    t: &mut Tx<'_>,
    repos: &[&Scope],
    subject: &str,
    predicate: &str,
    version: Option<i64>,
) -> Result<(Vec<String>, i64)> {
    let own: Vec<Scope> = t
        .all(super::browse::LIVE_SCOPES, &[&subject, &predicate])?
        .iter()
        .filter_map(|r| Scope::parse(&r.get::<_, String>(0)).ok())
        .filter(|s| *s != Scope::Global)
        .collect();
    let reads: i64 = match version {
        Some(v) => t
            .one(
                "SELECT count(*) FROM reads
                 WHERE subject = $1 AND predicate = $2 AND scope = 'global' AND version = $3",
                &[&subject, &predicate, &v],
            )?
            .get(0),
        None => 0,
    };
    let readers: Vec<String> = t
        .all(
            "SELECT DISTINCT repo FROM reads WHERE subject = $1 AND predicate = $2 AND repo IS NOT NULL",
            &[&subject, &predicate],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok((blast_radius(repos, &own, readers), reads))
}
