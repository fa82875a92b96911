//! `suspects` on PostgreSQL (README, "suspects"): the current `global` records judged by
//! [`crate::store::suspects`] as on SQLite — the same places (the spellings registry), the
//! same siblings (the scoped records of the subject stored from the same message), the same blast radius and
//! ranking — so the same data gives the same list.

use super::store::{PgStore, Tx};
use crate::model::{MemoryRecord, Scope};
use crate::store::guard::Places;
use crate::store::suspects::{
    blast_radius, place_signals, placed_by_a_human, rank, repos, with_marked_places, Placing,
    Suspect, PLACING_EVENTS,
};
use anyhow::Result;
use std::collections::HashMap;

impl PgStore {
    /// Every current `global` record with a place signal, widest blast radius first. Reads
    /// only, in one snapshot, by a fixed number of statements however many records there are
    /// (a statement a record took 13 s over loopback on 100,000 records).
    pub fn suspects(&mut self) -> Result<Vec<Suspect>> {
        self.snapshot(|t| {
            let known = known_places(t)?;
            let repos = repos(&known);
            let found = candidates(t, &known)?;
            let ids: Vec<i64> = found.iter().map(|f| f.id).collect();
            let subjects: Vec<&str> = found.iter().map(|f| f.subject.as_str()).collect();
            let predicates: Vec<&str> = found.iter().map(|f| f.predicate.as_str()).collect();
            let versions: Vec<i64> = found.iter().map(|f| f.version).collect();
            let mut records: HashMap<i64, MemoryRecord> = HashMap::with_capacity(found.len());
            for r in t.all(
                "SELECT subject, predicate, scope, value, version, source, causal_seq, raw,
                        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        to_char(confirmed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        confirm_count, id
                 FROM memories WHERE id = ANY($1)",
                &[&ids],
            )? {
                records.insert(r.get(12), super::browse::record_from_row(&r)?);
            }
            // The `set` detail of each version the guard marked: the place it was said in.
            let mut marked: Vec<Option<String>> = vec![None; found.len()];
            for r in t.all(
                "SELECT DISTINCT ON (k.i) k.i, h.detail
                 FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS k(subject, predicate, version, i)
                 JOIN history h ON h.subject = k.subject AND h.predicate = k.predicate
                   AND h.scope = 'global' AND h.event = 'set' AND h.version = k.version
                 ORDER BY k.i, h.id DESC",
                &[&subjects, &predicates, &versions],
            )? {
                marked[nth(&r)] = r.get(1);
            }
            let radii = radii(t, &repos, &subjects, &predicates, Some(&versions))?;
            let mut out = Vec::with_capacity(found.len());
            for ((f, detail), radius) in found.into_iter().zip(marked).zip(radii) {
                // A record the snapshot holds, found by its id in the same snapshot.
                let Some(record) = records.remove(&f.id) else {
                    continue;
                };
                let places = with_marked_places(detail.as_deref(), f.places);
                out.push(Suspect::new(record, f.evidence, places, radius));
            }
            rank(&mut out);
            Ok(out)
        })
    }

    /// How many suspects there are: `check`'s health figure, the list without what only the
    /// list shows (blast radii, the places a marked version named).
    pub(super) fn suspect_count(t: &mut Tx<'_>) -> Result<usize> {
        let known = known_places(t)?;
        Ok(candidates(t, &known)?.len())
    }
}

/// A current `global` record the scan found.
struct Found {
    id: i64,
    subject: String,
    predicate: String,
    version: i64,
    evidence: Vec<String>,
    places: Vec<Scope>,
}

/// The current `global` records with a place signal that no human placed, by three
/// statements: the global records, their siblings, and the pending resolutions of those with
/// a signal.
fn candidates(t: &mut Tx<'_>, known: &[Scope]) -> Result<Vec<Found>> {
    let places = Places::new(known);
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
    let mut found = Vec::new();
    for r in t.all(
        "SELECT id, subject, predicate, version, source, raw FROM memories WHERE scope = 'global'
         ORDER BY id",
        &[],
    )? {
        let subject: String = r.get(1);
        let source: String = r.get(4);
        let raw: Option<&str> = r.get(5);
        let same = siblings
            .get(&(subject, source))
            .map_or(&[][..], Vec::as_slice);
        let Some((evidence, places)) = place_signals(&places, raw, same) else {
            continue;
        };
        found.push(Found {
            id: r.get(0),
            subject: r.get(1),
            predicate: r.get(2),
            version: r.get(3),
            evidence,
            places,
        });
    }
    // The events in `global` that may say a person placed each found version.
    let mut placings: Vec<Vec<Placing>> = Vec::new();
    placings.resize_with(found.len(), Vec::new);
    {
        let subjects: Vec<&str> = found.iter().map(|f| f.subject.as_str()).collect();
        let predicates: Vec<&str> = found.iter().map(|f| f.predicate.as_str()).collect();
        let events: Vec<&str> = PLACING_EVENTS.to_vec();
        for r in t.all(
            "SELECT k.i, h.version, h.event, h.detail
             FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(subject, predicate, i)
             JOIN history h ON h.subject = k.subject AND h.predicate = k.predicate
               AND h.scope = 'global' AND h.version IS NOT NULL AND h.event = ANY($3::text[])",
            &[&subjects, &predicates, &events],
        )? {
            placings[nth(&r)].push(Placing::read(r.get(1), r.get(2), r.get(3)));
        }
    }
    Ok(found
        .into_iter()
        .zip(placings)
        .filter(|(f, events)| !placed_by_a_human(f.version, events))
        .map(|(f, _)| f)
        .collect())
}

/// The 0-based index of a row's key, from its first column: `WITH ORDINALITY`'s 1-based one.
fn nth(r: &postgres::Row) -> usize {
    (r.get::<_, i64>(0) - 1) as usize
}

impl PgStore {
    /// The repos a global value of this subject and (canonical) predicate reaches (the
    /// pending queue's warning), judged as `suspects` judges it.
    pub fn blast_radius(&mut self, subject: &str, predicate: &str) -> Result<Vec<String>> {
        self.read(|t| {
            let known = known_places(t)?;
            let mut radii = radii(t, &repos(&known), &[subject], &[predicate], None)?;
            Ok(radii.pop().map(|(radius, _)| radius).unwrap_or_default())
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

/// The blast radius of each (subject, predicate) among `repos` and the read log's readers,
/// and how many logged reads were served the global value: its `versions`', not an earlier one
/// (0 without versions). Three statements, whatever the number of keys; the read log's rows
/// are found by the digests `reads_by_identity` holds (schema 10) and compared whole.
fn radii(
    t: &mut Tx<'_>,
    repos: &[&Scope],
    subjects: &[&str],
    predicates: &[&str],
    versions: Option<&[i64]>,
) -> Result<Vec<(Vec<String>, i64)>> {
    let n = subjects.len();
    let (subjects, predicates) = (subjects.to_vec(), predicates.to_vec());
    // Each key's live scopes other than global: its records' scopes (every current record
    // is live; a tombstoned identity holds none).
    let mut own: Vec<Vec<Scope>> = vec![Vec::new(); n];
    for r in t.all(
        "SELECT k.i, m.scope
         FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(subject, predicate, i)
         JOIN memories m ON m.subject = k.subject AND m.predicate = k.predicate AND m.scope <> 'global'",
        &[&subjects, &predicates],
    )? {
        if let Ok(scope) = Scope::parse(&r.get::<_, String>(1)) {
            own[nth(&r)].push(scope);
        }
    }
    let mut reads = vec![0i64; n];
    if let Some(versions) = versions {
        for r in t.all(
            "SELECT k.i, count(*)
             FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS k(subject, predicate, version, i)
             JOIN reads r ON md5(r.subject) = md5(k.subject) AND md5(r.predicate) = md5(k.predicate)
               AND r.subject = k.subject AND r.predicate = k.predicate
               AND r.scope = 'global' AND r.version = k.version
             GROUP BY k.i",
            &[&subjects, &predicates, &versions],
        )? {
            reads[nth(&r)] = r.get(1);
        }
    }
    let mut readers: Vec<Vec<String>> = vec![Vec::new(); n];
    for r in t.all(
        "SELECT DISTINCT k.i, r.repo
         FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(subject, predicate, i)
         JOIN reads r ON md5(r.subject) = md5(k.subject) AND md5(r.predicate) = md5(k.predicate)
               AND r.subject = k.subject AND r.predicate = k.predicate AND r.repo IS NOT NULL",
        &[&subjects, &predicates],
    )? {
        readers[nth(&r)].push(r.get(1));
    }
    Ok(own
        .into_iter()
        .zip(readers)
        .zip(reads)
        .map(|((own, readers), reads)| (blast_radius(repos, &own, readers), reads))
        .collect())
}
