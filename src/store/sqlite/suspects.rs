//! Suspects in the existing data (issue 16; README, "memscope suspects"): current `global`
//! records whose own words or whose message's other records point at one place, judged by the
//! scope guard's core ([`crate::store::guard`]) and ranked by how many repositories would get
//! the value without a rule of their own.

use super::rows::{memory_from_row, MEMORY_COLUMNS};
use super::Store;
use crate::model::Scope;
use crate::store::guard::Places;
use crate::store::suspects::{
    blast_radius, place_signals, placed_by_a_human, rank, repos, with_marked_places, Suspect,
};
use anyhow::Result;
use rusqlite::OptionalExtension;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

impl Store {
    /// Every current `global` record with a place signal, widest blast radius first. Reads
    /// only; one pass over the current view.
    pub fn suspects(&self) -> Result<Vec<Suspect>> {
        let conn = &self.conn;
        // Places the database knows: the spellings registry holds every repo and task scope
        // memscope ever stored.
        let known = super::spellings::known_places(conn)?;
        let repos = repos(&known);
        // The scoped records' messages, by a hash of their subject and source (no string kept
        // per record: a database holds hundreds of thousands); a global record whose subject
        // and source hash alike has its siblings — the scoped records of its subject the same
        // message wrote, as at write time — looked up by rowid, then checked.
        // (hash, rowid) pairs sorted by hash: 16 bytes a scoped record, one allocation.
        let mut by_source: Vec<(u64, i64)> = Vec::new();
        {
            let mut stmt = conn
                .prepare("SELECT rowid, subject, source FROM memories WHERE scope <> 'global'")?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let subject = r.get_ref(1)?.as_str().unwrap_or_default();
                let source = r.get_ref(2)?.as_str().unwrap_or_default();
                by_source.push((hash(subject, source), r.get(0)?));
            }
        }
        by_source.sort_unstable();
        // Where each hash's run starts in `by_source`: one probe a global record instead of a
        // binary search over every scoped record (a quarter of the scan at 1M records).
        let mut run_of: HashMap<u64, usize, BuildHasherDefault<Spread>> =
            HashMap::with_capacity_and_hasher(by_source.len(), Default::default());
        for (i, &(k, _)) in by_source.iter().enumerate().rev() {
            run_of.insert(k, i);
        }
        let mut sibling = conn.prepare_cached(
            "SELECT subject, source, predicate, scope FROM memories WHERE rowid = ?1",
        )?;
        let places = Places::new(&known);
        // (rowid, evidence, places) of each suspect; the records are read after the scan.
        let mut found: Vec<(i64, Vec<String>, Vec<Scope>)> = Vec::new();
        {
            let mut stmt = conn.prepare(
                "SELECT rowid, subject, source, raw FROM memories WHERE scope = 'global'",
            )?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let subject = r.get_ref(1)?.as_str().unwrap_or_default();
                let source = r.get_ref(2)?.as_str().unwrap_or_default();
                let raw = r.get_ref(3)?.as_str().ok();
                let mut siblings: Vec<(String, Scope)> = Vec::new();
                let h = hash(subject, source);
                let from = run_of.get(&h).copied().unwrap_or(by_source.len());
                let same = by_source[from..].iter().take_while(|&&(k, _)| k == h);
                for (_, id) in same {
                    let (su, s, p, sc): (String, String, String, String) = sibling
                        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
                    if su == subject && s == source {
                        if let Ok(scope) = Scope::parse(&sc) {
                            siblings.push((p, scope));
                        }
                    }
                }
                if let Some((evidence, places)) = place_signals(&places, raw, &siblings) {
                    found.push((r.get(0)?, evidence, places));
                }
            }
        }
        let mut record = conn.prepare_cached(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE rowid = ?1"
        ))?;
        let mut resolutions = conn.prepare_cached(
            "SELECT json_extract(detail, '$.outcome') FROM history
             WHERE subject = ?1 AND predicate = ?2 AND scope = 'global' AND event = 'pending_resolved' AND version = ?3",
        )?;
        let mut marked = conn.prepare_cached(
            "SELECT detail FROM history
             WHERE subject = ?1 AND predicate = ?2 AND scope = 'global' AND event = 'set' AND version = ?3
             ORDER BY id DESC LIMIT 1",
        )?;
        let mut out = Vec::with_capacity(found.len());
        for (rowid, evidence, places) in found {
            let record = record.query_row([rowid], memory_from_row)?;
            let outcomes = resolutions
                .query_map(
                    rusqlite::params![record.subject, record.predicate, record.version],
                    |r| r.get::<_, Option<String>>(0),
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            if placed_by_a_human(outcomes.iter().map(Option::as_deref)) {
                continue;
            }
            let detail: Option<String> = marked
                .query_row(
                    rusqlite::params![record.subject, record.predicate, record.version],
                    |r| r.get(0),
                )
                .optional()?
                .flatten();
            let places = with_marked_places(detail.as_deref(), places);
            let radius = self.radius(
                &repos,
                &record.subject,
                &record.predicate,
                Some(record.version),
            )?;
            out.push(Suspect::new(record, evidence, places, radius));
        }
        rank(&mut out);
        Ok(out)
    }
}

impl Store {
    /// The repositories that would be served the global value of `subject · predicate`
    /// because they have no rule of their own: every repository memscope knows, and every
    /// one whose agents read it (the read log), less those with a record of their own.
    pub fn blast_radius(&self, subject: &str, predicate: &str) -> Result<Vec<String>> {
        let known = super::spellings::known_places(&self.conn)?;
        Ok(self.radius(&repos(&known), subject, predicate, None)?.0)
    }

    /// The blast radius among `repos` (and the read log's readers), sorted, and how many
    /// logged reads were served the global value: its `version`, not an earlier one (0
    /// without a version).
    fn radius(
        &self,
        repos: &[&Scope],
        subject: &str,
        predicate: &str,
        version: Option<i64>,
    ) -> Result<(Vec<String>, i64)> {
        let own: Vec<Scope> = self
            .live_scopes_of(subject, predicate)?
            .into_iter()
            .map(|r| r.scope)
            .filter(|s| *s != Scope::Global)
            .collect();
        let key = [subject, predicate];
        let reads: i64 = match version {
            Some(v) => self
                .conn
                .prepare_cached(
                    "SELECT count(*) FROM reads
                     WHERE subject = ?1 AND predicate = ?2 AND scope = 'global' AND version = ?3",
                )?
                .query_row(rusqlite::params![subject, predicate, v], |r| r.get(0))?,
            None => 0,
        };
        let mut readers = self.conn.prepare_cached(
            "SELECT DISTINCT repo FROM reads WHERE subject = ?1 AND predicate = ?2 AND repo IS NOT NULL",
        )?;
        let asked = readers
            .query_map(key, |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<String>>>()?;
        Ok((blast_radius(repos, &own, asked), reads))
    }
}

fn hash(subject: &str, source: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (subject, source).hash(&mut h);
    h.finish()
}

/// The hasher of [`HashMap`]s keyed by a [`hash`]: its keys are already spread evenly over 64
/// bits, so the key is its own hash.
#[derive(Default)]
struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (a `u64` key); any other key folds its bytes in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
