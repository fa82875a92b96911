//! Suspects in the existing data (issue 16; README, "memscope suspects"): current `global`
//! records whose own words or whose message's other records point at one place, judged by the
//! scope guard's core ([`crate::store::guard`]) and ranked by how many repositories would get
//! the value without a rule of their own.

use super::rows::{memory_from_row, MEMORY_COLUMNS};
use super::Store;
use crate::model::{MemoryRecord, Scope};
use crate::store::guard::{judge, Cues, Evidence, GuardMode, Verdict};
use anyhow::Result;
use serde::Serialize;
use std::collections::HashMap;

/// One current `global` record that looks like a rule of one place.
#[derive(Debug, Clone, Serialize)]
pub struct Suspect {
    pub record: MemoryRecord,
    /// Why, one sentence per signal.
    pub evidence: Vec<String>,
    /// Where it probably belongs: the place its evidence points at first (a rescope target).
    pub suggested_scope: Option<Scope>,
    /// Repositories memscope knows that have no rule of their own for this subject and
    /// predicate: resolution serves them this global value.
    pub blast_radius: Vec<String>,
    /// Logged reads that were served this global value.
    pub reads: i64,
}

impl Store {
    /// Every current `global` record with a place signal, widest blast radius first. Reads
    /// only; one pass over the current view.
    pub fn suspects(&self) -> Result<Vec<Suspect>> {
        let conn = &self.conn;
        // Places the database knows: the spellings registry holds every repo and task scope
        // memscope ever stored.
        let known: Vec<Scope> = {
            let mut stmt =
                conn.prepare("SELECT spelling FROM spellings WHERE kind = 'scope' ORDER BY spelling")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.filter_map(|s| s.ok().and_then(|s| Scope::parse(&s).ok()))
                .collect()
        };
        let repos: Vec<&Scope> = known
            .iter()
            .filter(|s| matches!(s, Scope::Repo(_)))
            .collect();
        // The scoped records, by the message that wrote them and by what they are about.
        let mut by_source: HashMap<String, Vec<(String, Scope)>> = HashMap::new();
        let mut scoped: HashMap<(String, String), Vec<Scope>> = HashMap::new();
        {
            let mut stmt = conn.prepare(
                "SELECT source, subject, predicate, scope FROM memories WHERE scope <> 'global'",
            )?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let Ok(scope) = Scope::parse(&r.get::<_, String>(3)?) else {
                    continue;
                };
                let (subject, predicate): (String, String) = (r.get(1)?, r.get(2)?);
                by_source
                    .entry(r.get(0)?)
                    .or_default()
                    .push((predicate.clone(), scope.clone()));
                scoped.entry((subject, predicate)).or_default().push(scope);
            }
        }
        let cues = Cues::shipped();
        let mut out = Vec::new();
        let mut stmt = conn.prepare(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE scope = 'global'"
        ))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let record = memory_from_row(r)?;
            let siblings = by_source.get(&record.source).map(Vec::as_slice).unwrap_or(&[]);
            let ev = Evidence {
                raw: record.raw.as_deref(),
                context: None,
                known_places: &known,
                siblings,
            };
            let Verdict::Suspect { evidence, places } =
                judge(cues, &Scope::Global, &ev, GuardMode::Flag)
            else {
                continue;
            };
            let own = scoped
                .get(&(record.subject.clone(), record.predicate.clone()))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let blast_radius = repos
                .iter()
                .filter(|r| !own.contains(r))
                .map(|r| r.to_string())
                .collect();
            let suggested_scope = places.into_iter().next();
            out.push(Suspect {
                record,
                evidence,
                suggested_scope,
                blast_radius,
                reads: 0,
            });
        }
        drop(rows);
        // The read log adds the repositories whose agents asked for it, and how often they
        // were served the global value.
        let mut reads = conn.prepare_cached(
            "SELECT count(*) FROM reads WHERE subject = ?1 AND predicate = ?2 AND scope = 'global'",
        )?;
        let mut readers = conn.prepare_cached(
            "SELECT DISTINCT repo FROM reads WHERE subject = ?1 AND predicate = ?2 AND repo IS NOT NULL",
        )?;
        for s in &mut out {
            let key = [&s.record.subject, &s.record.predicate];
            s.reads = reads.query_row(key, |r| r.get(0))?;
            let own = scoped
                .get(&(s.record.subject.clone(), s.record.predicate.clone()))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let asked: Vec<String> = readers
                .query_map(key, |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<_>>()?;
            for repo in asked {
                let place = Scope::Repo(repo);
                let name = place.to_string();
                if !own.contains(&place) && !s.blast_radius.contains(&name) {
                    s.blast_radius.push(name);
                }
            }
            s.blast_radius.sort();
        }
        out.sort_by(|a, b| {
            (b.blast_radius.len(), b.reads)
                .cmp(&(a.blast_radius.len(), a.reads))
                .then_with(|| {
                    (&a.record.subject, &a.record.predicate)
                        .cmp(&(&b.record.subject, &b.record.predicate))
                })
        });
        Ok(out)
    }
}
