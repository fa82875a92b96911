//! The merge of a place stored in two spellings into one (README, "One spelling per place"),
//! decided once for both backends: which spelling a place keeps, which record an identity
//! keeps, and what becomes of the others. SQLite runs it when it migrates a schema v3 database
//! or imports an old dump (`sqlite::spellings::merge_spellings`), and `init` runs it on both
//! backends for a place a raw client's change left in two spellings; the backends only move
//! the rows.

use crate::model::same_value;
use crate::spelling::fold;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// What a merge did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MergeReport {
    /// Spellings that now coincide with an earlier one and were stored as it.
    pub merged_spellings: i64,
    /// Values two spellings of one identity disagreed on, queued for a human.
    pub queued_conflicts: i64,
    /// Second spellings of a deleted identity, whose content was destroyed with it.
    pub purged_spellings: i64,
    /// Of `merged_spellings`, those only the read log held: its rows now name the place as
    /// it is registered (a read logged before its name was written kept the reader's case).
    pub respelled_reads: i64,
    /// Places stored in more than one written spelling, now stored in one.
    pub merged_places: i64,
    /// Why a deleted memory's content may linger on disk after the merge, if it may
    /// (PostgreSQL: the login may not VACUUM).
    pub disk_note: Option<String>,
}

impl MergeReport {
    /// What `init` says of the places it merged, one clause (empty when it merged none).
    pub fn init_clause(&self) -> String {
        let places = self.merged_places;
        if places <= 0 {
            return String::new();
        }
        let spellings = self.merged_spellings - self.respelled_reads + places;
        let mut said = if places == 1 {
            format!("; merged 1 place stored in {spellings} spellings into its registered spelling")
        } else {
            format!("; merged {places} places stored in {spellings} spellings into their registered spellings")
        };
        match self.queued_conflicts {
            0 => {}
            1 => {
                said +=
                    "; 1 value they disagreed on waits in the pending queue (`memscope pending`)"
            }
            n => {
                said += &format!(
                    "; {n} values they disagreed on wait in the pending queue (`memscope pending`)"
                )
            }
        }
        if self.purged_spellings > 0 {
            said += &format!(
                "; the memory stays deleted, and what {} other spelling(s) held of it was destroyed",
                self.purged_spellings
            );
        }
        if let Some(note) = &self.disk_note {
            said += &format!("; {note}");
        }
        said
    }
}

/// A spelling of one place as the database holds it, with when it was first seen.
pub(crate) struct Seen {
    pub spelling: String,
    /// The id of its oldest history event (`i64::MAX` when history holds none).
    pub first: i64,
    /// Stored by a write (a record, its history, a tombstone, the queue), not only named by a
    /// logged read: a written spelling comes first; a name only the read log holds is
    /// registered too, as a logged read registers it (`prepared::read_spellings`).
    pub written: bool,
}

/// The spellings of one kind a merge brings together.
#[derive(Default)]
pub(crate) struct Choice {
    /// Each other spelling → the one its place keeps.
    pub renames: HashMap<String, String>,
    /// Of `renames`, how many only the read log held.
    pub read_only: i64,
    /// Folded key → spelling, for each place the registry had no row for.
    pub register: Vec<(String, String)>,
    /// Places with a second written spelling.
    pub places: i64,
}

/// The spelling each place of one kind keeps: the one registered (`registered`, folded key →
/// spelling), else the written spelling with the oldest event, else the first one a logged
/// read named. A name no write could store (`prepared::registrable`) is left as it is.
pub(crate) fn choose(kind: &str, seen: Vec<Seen>, registered: &BTreeMap<String, String>) -> Choice {
    let mut by_key: BTreeMap<String, Vec<Seen>> = BTreeMap::new();
    for s in seen {
        by_key.entry(fold(&s.spelling)).or_default().push(s);
    }
    let mut choice = Choice::default();
    for (folded, mut spellings) in by_key {
        // Written spellings first, then by first appearance.
        spellings.sort_by(|a, b| {
            (!a.written, a.first, &a.spelling).cmp(&(!b.written, b.first, &b.spelling))
        });
        let first = match registered.get(&folded) {
            Some(registered) => registered.clone(),
            None if !spellings[0].written
                && !crate::store::prepared::registrable(kind, &spellings[0].spelling) =>
            {
                continue
            }
            None => {
                let first = spellings[0].spelling.clone();
                choice.register.push((folded, first.clone()));
                first
            }
        };
        let mut written = false;
        for s in spellings {
            if s.spelling != first {
                written |= s.written;
                choice.read_only += i64::from(!s.written);
                choice.renames.insert(s.spelling, first.clone());
            }
        }
        choice.places += i64::from(written);
    }
    choice
}

/// An identity as stored: subject, predicate, scope.
pub(crate) type Key = (String, String, String);

/// The identity a stored key names (a scope memscope cannot read is taken as `global`, as the
/// merge logs its events there: `check` names such a scope on its own).
pub(crate) fn identity(key: &Key) -> crate::model::Identity {
    crate::model::Identity {
        subject: key.0.clone(),
        predicate: key.1.clone(),
        scope: crate::model::Scope::parse(&key.2).unwrap_or(crate::model::Scope::Global),
    }
}

/// The identity `id` becomes once its subject and scope take their places' spellings.
pub(crate) fn target(
    id: &Key,
    subjects: &HashMap<String, String>,
    scopes: &HashMap<String, String>,
) -> Key {
    (
        subjects.get(&id.0).unwrap_or(&id.0).clone(),
        id.1.clone(),
        scopes.get(&id.2).unwrap_or(&id.2).clone(),
    )
}

/// How a merged event names the spelling it came from.
pub(crate) fn label(id: &Key) -> String {
    format!("{} · {} @ {}", id.0, id.1, id.2)
}

/// A spelling's current record.
pub(crate) struct Live {
    pub value: Value,
    pub raw: Option<String>,
    pub source: String,
    pub causal_seq: i64,
}

impl Live {
    /// A record as stored: its value's JSON text (text that is not JSON is kept as a string —
    /// a raw client may have stored anything, and `check` names it).
    pub(crate) fn stored(
        value: String,
        raw: Option<String>,
        source: String,
        causal_seq: i64,
    ) -> Live {
        Live {
            value: serde_json::from_str(&value).unwrap_or(Value::String(value)),
            raw,
            source,
            causal_seq,
        }
    }
}

/// One spelling of an identity a merge makes one.
pub(crate) struct Member {
    pub key: Key,
    /// The id of its oldest history event (`i64::MAX` when none).
    pub first_event: i64,
    pub tombstoned: bool,
    pub live: Option<Live>,
}

/// What becomes of a spelling that is not kept.
pub(crate) enum Fate {
    /// The identity stays deleted: the spelling's content is destroyed.
    Purged,
    /// Nothing of it waits for a human: no current record, or the kept one's value.
    Folded,
    /// Its current value differs from the one kept: it waits in the pending queue.
    Queued(Live),
}

/// The spellings of one identity, decided.
pub(crate) struct Kept {
    /// The spelling whose record (or tombstone) stays.
    pub owner: Key,
    /// Whether the identity stays deleted.
    pub deleted: bool,
    pub others: Vec<(Key, Fate)>,
}

/// Which record of the identity `to` stays (README, "One spelling per place"): a deleted
/// identity stays deleted; else the first current record, the registered spelling's first,
/// then by first event. The other spellings' events stay on it as `merged` events; a current
/// value that differs from the one kept waits for a human.
pub(crate) fn keep(to: &Key, mut members: Vec<Member>) -> Kept {
    members.sort_by_key(|m| (m.key != *to, m.first_event));
    let owner = members
        .iter()
        .position(|m| m.tombstoned)
        .or_else(|| members.iter().position(|m| m.live.is_some()))
        .unwrap_or(0);
    let owner = members.remove(owner);
    let deleted = owner.tombstoned;
    let others = members
        .into_iter()
        .map(|m| {
            let fate = match m.live {
                _ if deleted => Fate::Purged,
                Some(live)
                    if !owner
                        .live
                        .as_ref()
                        .is_some_and(|o| same_value(&o.value, &live.value)) =>
                {
                    Fate::Queued(live)
                }
                _ => Fate::Folded,
            };
            (m.key, fate)
        })
        .collect();
    Kept {
        owner: owner.key,
        deleted,
        others,
    }
}

/// The `merged` event logged beside a value queued for a human.
pub(crate) fn queued_detail(from: &Key, pending_id: i64) -> Value {
    json!({ "from": label(from), "pending_id": pending_id, "reason": "two spellings held different values" })
}

/// A pending item's candidate scopes in their places' spellings, in order, without repeats;
/// `None` when none changes.
pub(crate) fn respelled_candidates(
    list: Vec<String>,
    scopes: &HashMap<String, String>,
) -> Option<Vec<String>> {
    if !list.iter().any(|c| scopes.contains_key(c)) {
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for c in list {
        let c = scopes.get(&c).cloned().unwrap_or(c);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Some(out)
}

/// What moves the kept record of a spelling `($1, $2, $3)` to the identity's spelling
/// (`$4` subject, `$5` scope), in order; one SQL both backends run. A tombstone never changes
/// its identity in place (a schema guard): it is copied here, and the old one goes with
/// [`DROP_OTHER_SQL`]'s first statement.
pub(crate) const MOVE_KEPT_SQL: [&str; 3] = [
    "UPDATE memories SET subject = $4, scope = $5 WHERE subject = $1 AND predicate = $2 AND scope = $3",
    "UPDATE history SET subject = $4, scope = $5 WHERE subject = $1 AND predicate = $2 AND scope = $3",
    "INSERT INTO tombstones (subject, predicate, scope, version, reason, deleted_at)
     SELECT $4, predicate, $5, version, reason, deleted_at FROM tombstones
     WHERE subject = $1 AND predicate = $2 AND scope = $3",
];

/// What removes the record and tombstone of a spelling `($1, $2, $3)` not kept (its events
/// stay, as `merged` events).
pub(crate) const DROP_OTHER_SQL: [&str; 2] = [
    "DELETE FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = $3",
    "DELETE FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3",
];

/// Whether the identity `($1, $2, $3)` holds a row: then it is one of the spellings merged.
pub(crate) const HAS_DATA_SQL: &str =
    "SELECT EXISTS (SELECT 1 FROM memories WHERE subject = $1 AND predicate = $2 AND scope = $3)
         OR EXISTS (SELECT 1 FROM history WHERE subject = $1 AND predicate = $2 AND scope = $3)
         OR EXISTS (SELECT 1 FROM tombstones WHERE subject = $1 AND predicate = $2 AND scope = $3)";
