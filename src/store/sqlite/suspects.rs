//! Suspects in the existing data (issue 16; README, "memscope suspects"): current `global`
//! records whose own words or whose message's other records point at one place, judged by the
//! scope guard's core ([`crate::store::guard`]) and ranked by how many repositories would get
//! the value without a rule of their own.

use super::rows::{memory_from_row, MEMORY_COLUMNS};
use super::Store;
use crate::model::{MemoryRecord, Scope};
use crate::store::guard::Places;
use crate::store::suspects::{
    blast_radius, place_signals, placed_by_a_human, rank, repos, with_marked_places, Placing,
    Suspect, PLACING_EVENTS,
};
use anyhow::Result;
use rusqlite::OptionalExtension;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

impl Store {
    /// Every current `global` record with a place signal, widest blast radius first. Reads
    /// only, in one snapshot.
    pub fn suspects(&self) -> Result<Vec<Suspect>> {
        self.read_snapshot(|| {
            let known = super::spellings::known_places(&self.conn)?;
            let repos = repos(&known);
            let mut record = self.conn.prepare_cached(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE rowid = ?1"
            ))?;
            let mut marked = self.conn.prepare_cached(
                "SELECT detail FROM history
                 WHERE subject = ?1 AND predicate = ?2 AND scope = 'global' AND event = 'set' AND version = ?3
                 ORDER BY id DESC LIMIT 1",
            )?;
            let found = self.suspect_candidates(&known)?;
            let mut records = Vec::with_capacity(found.len());
            for f in &found {
                records.push(record.query_row([f.rowid], memory_from_row)?);
            }
            // Each record's rules of its own elsewhere (its subject and predicate's scoped
            // records) by one scan, and the read log's queries only when it holds a read: a
            // query or three a suspect took 15 s on 300,000 suspects.
            let own = OwnScopes::read(&self.conn, &records)?;
            let logged: bool =
                self.conn
                    .query_row("SELECT EXISTS (SELECT 1 FROM reads)", [], |r| r.get(0))?;
            let mut out = Vec::with_capacity(found.len());
            for (found, record) in found.into_iter().zip(records) {
                let detail: Option<String> = marked
                    .query_row(
                        rusqlite::params![record.subject, record.predicate, record.version],
                        |r| r.get(0),
                    )
                    .optional()?
                    .flatten();
                let places = with_marked_places(detail.as_deref(), found.places);
                let radius = self.radius_among(
                    &repos,
                    own.of(&record.subject, &record.predicate),
                    (&record.subject, &record.predicate),
                    Some(record.version),
                    logged,
                )?;
                out.push(Suspect::new(record, found.evidence, places, radius));
            }
            rank(&mut out);
            Ok(out)
        })
    }

    /// How many suspects there are: `check`'s health figure, the list without what only the
    /// list shows (blast radii, the places a marked version named). Runs in the caller's
    /// snapshot when one is open.
    pub(crate) fn suspect_count(&self) -> Result<usize> {
        self.read_snapshot(|| {
            let known = super::spellings::known_places(&self.conn)?;
            Ok(self.suspect_candidates(&known)?.len())
        })
    }

    /// The current `global` records with a place signal that no human placed: one pass over
    /// the scoped records (their messages), one over the global ones.
    fn suspect_candidates(&self, known: &[Scope]) -> Result<Vec<Found>> {
        let conn = &self.conn;
        let messages = Messages::read(conn)?;
        let places = Places::new(known);
        let mut placings = conn.prepare_cached(
            "SELECT version, event, detail FROM history
             WHERE subject = ?1 AND predicate = ?2 AND scope = 'global' AND version IS NOT NULL
               AND event IN (?3, ?4, ?5)",
        )?;
        let mut found = Vec::new();
        let mut stmt = conn.prepare(
            "SELECT rowid, subject, source, raw, predicate, version FROM memories
             WHERE scope = 'global'",
        )?;
        let mut rows = stmt.query([])?;
        let mut siblings: Vec<(String, Scope)> = Vec::new();
        while let Some(r) = rows.next()? {
            let subject = r.get_ref(1)?.as_str().unwrap_or_default();
            let source = r.get_ref(2)?.as_str().unwrap_or_default();
            let raw = r.get_ref(3)?.as_str().ok();
            siblings.clear();
            siblings.extend(messages.siblings(subject, source));
            let Some((evidence, places)) = place_signals(&places, raw, &siblings) else {
                continue;
            };
            let predicate = r.get_ref(4)?.as_str().unwrap_or_default();
            let version: i64 = r.get(5)?;
            let [e1, e2, e3] = PLACING_EVENTS;
            let events = placings
                .query_map(rusqlite::params![subject, predicate, e1, e2, e3], |r| {
                    Ok(Placing::read(
                        r.get(0)?,
                        r.get(1)?,
                        r.get_ref(2)?.as_str_or_null().ok().flatten(),
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            if placed_by_a_human(version, &events) {
                continue;
            }
            found.push(Found {
                rowid: r.get(0)?,
                evidence,
                places,
            });
        }
        Ok(found)
    }
}

/// A current `global` record the scan found: its rowid, evidence and the places it points at.
struct Found {
    rowid: i64,
    evidence: Vec<String>,
    places: Vec<Scope>,
}

/// The scoped records by their message: for each subject and source, the predicate and scope
/// of every scoped record it wrote, in the order they were stored — what a global record of
/// that subject and source has for siblings, as at write time.
///
/// A database holds hundreds of thousands of scoped records, so no string is kept per record:
/// a subject and source is a 128-bit hash under keys drawn for this scan (no text can be made
/// to collide with another's on purpose, and two of a million collide by chance with a
/// probability near 10^-27), and the predicates and scopes are interned (a database has few of
/// each). 24 bytes a scoped record, and no query per sibling: a global record whose every
/// line shares one message has thousands of siblings in all.
struct Messages {
    /// (hash of subject and source, predicate, scope) sorted by hash, stably: a message's
    /// records stay in the order they were stored.
    records: Vec<(u128, u32, u32)>,
    /// Where each hash's run starts in `records`: one probe a global record.
    run_of: HashMap<u128, usize, BuildHasherDefault<Spread>>,
    predicates: Vec<String>,
    scopes: Vec<Scope>,
    keys: (RandomState, RandomState),
}

impl Messages {
    fn read(conn: &rusqlite::Connection) -> Result<Messages> {
        let keys = (RandomState::new(), RandomState::new());
        let mut records = Vec::new();
        let mut predicates = Vec::new();
        let mut scopes = Vec::new();
        let mut predicate_ids: HashMap<String, u32> = HashMap::new();
        let mut scope_ids: HashMap<String, Option<u32>> = HashMap::new();
        let mut stmt = conn.prepare(
            "SELECT subject, source, predicate, scope FROM memories
             WHERE scope <> 'global' ORDER BY rowid",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let subject = r.get_ref(0)?.as_str().unwrap_or_default();
            let source = r.get_ref(1)?.as_str().unwrap_or_default();
            let predicate = r.get_ref(2)?.as_str().unwrap_or_default();
            let scope = r.get_ref(3)?.as_str().unwrap_or_default();
            // A scope that does not parse is no place (`check` names it).
            let scope = match scope_ids.get(scope) {
                Some(id) => *id,
                None => {
                    let id = Scope::parse(scope).ok().map(|parsed| {
                        scopes.push(parsed);
                        (scopes.len() - 1) as u32
                    });
                    scope_ids.insert(scope.to_string(), id);
                    id
                }
            };
            let Some(scope) = scope else { continue };
            let predicate = match predicate_ids.get(predicate) {
                Some(id) => *id,
                None => {
                    predicates.push(predicate.to_string());
                    let id = (predicates.len() - 1) as u32;
                    predicate_ids.insert(predicate.to_string(), id);
                    id
                }
            };
            records.push((key(&keys, subject, source), predicate, scope));
        }
        records.sort_by_key(|&(k, _, _)| k);
        let mut run_of: HashMap<u128, usize, BuildHasherDefault<Spread>> =
            HashMap::with_capacity_and_hasher(records.len(), Default::default());
        for (i, &(k, _, _)) in records.iter().enumerate().rev() {
            run_of.insert(k, i);
        }
        Ok(Messages {
            records,
            run_of,
            predicates,
            scopes,
            keys,
        })
    }

    /// The (predicate, scope) of each scoped record `subject` and `source` wrote.
    fn siblings<'a>(
        &'a self,
        subject: &str,
        source: &str,
    ) -> impl Iterator<Item = (String, Scope)> + 'a {
        let k = key(&self.keys, subject, source);
        let from = self.run_of.get(&k).copied().unwrap_or(self.records.len());
        self.records[from..]
            .iter()
            .take_while(move |&&(h, _, _)| h == k)
            .map(|&(_, p, s)| {
                (
                    self.predicates[p as usize].clone(),
                    self.scopes[s as usize].clone(),
                )
            })
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
        self.radius_among(repos, &own, (subject, predicate), version, true)
    }

    /// [`Store::radius`] with the identity's scopes other than global (`own`) known, and
    /// `logged`: whether the read log holds any read (without one, no query of it).
    fn radius_among(
        &self,
        repos: &[&Scope],
        own: &[Scope],
        (subject, predicate): (&str, &str),
        version: Option<i64>,
        logged: bool,
    ) -> Result<(Vec<String>, i64)> {
        if !logged {
            return Ok((blast_radius(repos, own, Vec::new()), 0));
        }
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
        Ok((blast_radius(repos, own, asked), reads))
    }
}

/// The scopes other than global of each record's subject and predicate — the rules of its
/// own a repository has, which keep it out of the blast radius — read by one scan of the
/// scoped records for a set of records (by a keyed 128-bit hash, as [`Messages`]).
struct OwnScopes {
    by_key: HashMap<u128, Vec<Scope>, BuildHasherDefault<Spread>>,
    keys: (RandomState, RandomState),
}

impl OwnScopes {
    fn read(conn: &rusqlite::Connection, records: &[MemoryRecord]) -> Result<OwnScopes> {
        let keys = (RandomState::new(), RandomState::new());
        let mut by_key: HashMap<u128, Vec<Scope>, BuildHasherDefault<Spread>> =
            HashMap::with_capacity_and_hasher(records.len(), Default::default());
        for r in records {
            by_key.insert(key(&keys, &r.subject, &r.predicate), Vec::new());
        }
        if by_key.is_empty() {
            return Ok(OwnScopes { by_key, keys });
        }
        let mut parsed: HashMap<String, Option<Scope>> = HashMap::new();
        let mut stmt =
            conn.prepare("SELECT subject, predicate, scope FROM memories WHERE scope <> 'global'")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let subject = r.get_ref(0)?.as_str().unwrap_or_default();
            let predicate = r.get_ref(1)?.as_str().unwrap_or_default();
            let Some(own) = by_key.get_mut(&key(&keys, subject, predicate)) else {
                continue;
            };
            let scope = r.get_ref(2)?.as_str().unwrap_or_default();
            let scope = match parsed.get(scope) {
                Some(s) => s.clone(),
                None => {
                    let s = Scope::parse(scope).ok();
                    parsed.insert(scope.to_string(), s.clone());
                    s
                }
            };
            own.extend(scope);
        }
        Ok(OwnScopes { by_key, keys })
    }

    fn of(&self, subject: &str, predicate: &str) -> &[Scope] {
        self.by_key
            .get(&key(&self.keys, subject, predicate))
            .map_or(&[], Vec::as_slice)
    }
}

/// A subject and source's (or subject and predicate's) 128-bit key under `keys`.
fn key(keys: &(RandomState, RandomState), subject: &str, source: &str) -> u128 {
    let half = |k: &RandomState| k.hash_one((subject, source));
    (u128::from(half(&keys.0)) << 64) | u128::from(half(&keys.1))
}

/// The hasher of [`HashMap`]s keyed by a [`key`]: its keys are already spread evenly over 128
/// bits, so the key's low half is its own hash.
#[derive(Default)]
struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is used (a `u128` key); any other key folds its bytes in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}
