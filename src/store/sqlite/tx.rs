//! The one transaction runner (docs/ARCHITECTURE.md, "The path of one write"): every store
//! operation that writes — the write path, `apply`, pending resolutions, rescope and revert,
//! delete, restore, gc, aliases, settings, import and the read log — runs in
//! [`Store::in_write_tx`] (or its purge variant [`Store::in_purge_tx`], or [`Store::dry_run`]
//! for a preview), which takes the write lock, stamps the time inside it, carries the causal
//! clock and the write path's per-transaction state, folds busy retries into the metrics,
//! asserts invariants when asked, commits and then pays an owed on-disk purge.

use super::hot::HotStmts;
use super::spellings::SpellingMemo;
use super::{explain_sqlite, Store};
use crate::model::Scope;
use crate::store::guard::{Context, GuardMode, Places};
use anyhow::Result;
use rusqlite::{Connection, OptionalExtension};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Causal sequence numbers handed out inside one write transaction. The clock is read once;
/// every history event the transaction logs records the clock as it stands (`history.clock`),
/// so the clock is known from the newest event and `settings.causal_clock` is written only
/// when numbers were handed out that no event recorded (a pending item, `memscope seq`).
/// [`SeqBatch::flush`] runs inside every write transaction, before commit.
#[derive(Debug, Default)]
pub(crate) struct SeqBatch {
    next: Option<i64>,
    /// The highest clock value already durable: in settings or in a history event.
    durable: i64,
}

/// The causal clock as it stands: `settings.causal_clock`, or the clock the newest history
/// event recorded when that is higher (the settings row is written only when no event records
/// the numbers handed out — [`SeqBatch`]). A database without the row (a dump that left it
/// out, a raw client's DELETE) has the highest number its rows hold, and the next write
/// transaction that hands out numbers writes the row again ([`SeqBatch::flush`]): found by
/// review, such a database refused every write while `check` called it clean.
pub(crate) fn clock_now(conn: &Connection) -> Result<i64> {
    // A row that is not a number as memscope writes it (a raw client's `abc`) counts as no row:
    // the clock is then everything stored, pending items' numbers included (found by review:
    // `seq` handed out a number an open item already held). So does a number outside 0 to
    // 2^53, where the clock ends, and a number past it in a row counts for nothing: memscope
    // never writes one, and a clock read from it would be stamped into every later event
    // (found by an exploratory test: a `causal_clock` of 2^53 + 1 was copied into the history
    // of a write that brought its own number). The field rules name such a row.
    let kept: Option<i64> = conn
        .prepare_cached(
            "SELECT CASE WHEN CAST(CAST(value AS INTEGER) AS TEXT) = value
                          AND CAST(value AS INTEGER) BETWEEN 0 AND 9007199254740992
                    THEN max(CAST(value AS INTEGER), coalesce((SELECT clock FROM history
                        WHERE clock BETWEEN 0 AND 9007199254740992 ORDER BY id DESC LIMIT 1), 0)) END
             FROM settings WHERE key = 'causal_clock'",
        )?
        .query_row([], |r| r.get::<_, Option<i64>>(0))
        .optional()?
        .flatten();
    if let Some(clock) = kept {
        return Ok(clock);
    }
    highest_stored(conn)
}

/// The highest causal number the rows hold within 2^53, history's recorded clocks included:
/// the clock of a database whose `causal_clock` setting is missing or unreadable.
pub(crate) fn highest_stored(conn: &Connection) -> Result<i64> {
    let sql = format!(
        "SELECT max(coalesce((SELECT max(clock) FROM history WHERE clock <= 9007199254740992), 0),
                    coalesce(({}), 0))",
        crate::store::check::HIGHEST_STORED_NUMBER
    );
    Ok(conn.prepare_cached(&sql)?.query_row([], |r| r.get(0))?)
}

impl SeqBatch {
    fn load(&mut self, conn: &Connection) -> Result<i64> {
        if let Some(n) = self.next {
            return Ok(n);
        }
        let clock = clock_now(conn)?;
        self.durable = clock;
        self.next = Some(clock);
        Ok(clock)
    }

    /// The clock's current value (the last number handed out or observed).
    pub(crate) fn current(&mut self, conn: &Connection) -> Result<i64> {
        self.load(conn)
    }

    /// The next number, above everything handed out or observed.
    pub(crate) fn alloc(&mut self, conn: &Connection) -> Result<i64> {
        // Numbers stay within 2^53, what every JSON reader holds exactly (and what a writer
        // may bring: `validate`).
        let seq = crate::model::within_clock(self.load(conn)?.saturating_add(1))?;
        self.next = Some(seq);
        Ok(seq)
    }

    /// A writer brought its own number: later allocations stay above it (one the clock may not
    /// take was refused at the write's start: `write::write_in_tx`).
    pub(crate) fn observe(&mut self, conn: &Connection, seq: i64) -> Result<()> {
        if seq > self.load(conn)? {
            self.next = Some(seq);
        }
        Ok(())
    }

    /// The clock to record in a history event being logged now (it becomes durable with it).
    pub(crate) fn stamp(&mut self) -> Option<i64> {
        let n = self.next?;
        self.durable = self.durable.max(n);
        Some(n)
    }

    /// Writes the clock to settings if numbers were handed out that no event recorded; must
    /// run inside the transaction, before commit.
    pub(crate) fn flush(&mut self, conn: &Connection) -> Result<()> {
        if let Some(next) = self.next {
            if next > self.durable {
                conn.prepare_cached(
                    "INSERT INTO settings (key, value) VALUES ('causal_clock', ?1)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value
                     WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)
                        OR CAST(value AS INTEGER) > 9007199254740992",
                )?
                .execute([next])?;
                self.durable = next;
            }
        }
        Ok(())
    }
}

/// What one write transaction carries from one write to the next.
pub(crate) struct TxState {
    pub(crate) seqs: SeqBatch,
    /// Predicates as written → canonical, for this transaction (nothing else can add an alias
    /// while it holds the write lock).
    pub(crate) canonical: HashMap<String, String>,
    /// Whether the last exact write met an identity with no past: while they keep coming (a
    /// bulk load of new memories), each is tried with the one-statement insert first.
    pub(crate) expect_fresh: bool,
    /// The two statements every new memory runs, lent by the store for the transaction.
    pub(crate) hot: HotStmts,
    /// A bulk load: new identities lean on the schema's tombstone guard when it is intact.
    pub(crate) batch: bool,
    /// Whether that guard is intact, once looked up (nothing else can change the schema while
    /// the transaction holds the write lock).
    pub(crate) guard_intact: Option<bool>,
    /// Subjects and scopes in their stored spelling, once looked up or registered.
    pub(crate) spellings: SpellingMemo,
    /// The places the database knows, as the scope guard last read them (lent by the store,
    /// like `spellings`), and whether this transaction has checked they are still current.
    pub(crate) places: Option<KnownPlaces>,
    pub(crate) places_checked: bool,
    /// The scope guard's mode alone, once read.
    pub(crate) guard_mode: Option<GuardMode>,
    /// Which source wrote each current record of a subject in a place, as the scope guard read
    /// them for its sibling lookup ([`PlaceSources`]; lent by the store like `places`), used
    /// and kept only while `keeps_sources`: a transaction of the write path alone (`write`,
    /// `apply`), which keeps them up to date as it writes.
    pub(crate) sources: Sources,
    pub(crate) keeps_sources: bool,
    /// `PRAGMA data_version` as this transaction's scope guard read it.
    pub(crate) data_version: Option<i64>,
    /// The place the last guarded write was made in, as the guard looked it up.
    pub(crate) here: Option<Here>,
}

/// A write's context and the places of it memscope has stored anything in, in their stored
/// spelling, as of a scope-spelling generation.
pub(crate) struct Here {
    pub(crate) context: Context,
    pub(crate) generation: u64,
    pub(crate) places: Vec<Scope>,
}

impl Default for TxState {
    fn default() -> Self {
        TxState {
            seqs: SeqBatch::default(),
            canonical: HashMap::new(),
            expect_fresh: true,
            hot: HotStmts::default(),
            batch: false,
            guard_intact: None,
            spellings: SpellingMemo::default(),
            places: None,
            places_checked: false,
            guard_mode: None,
            sources: Sources::default(),
            keeps_sources: false,
            data_version: None,
            here: None,
        }
    }
}

/// The current records of one subject in one place — which source (message) wrote each
/// predicate — as the scope guard read them to find a write's siblings, kept from one write
/// transaction to the next: reading them is a walk over all the subject's records there (the
/// identity index gives place and subject, the source is in the row), which an MCP server —
/// one subject, one place — would otherwise take at every guarded write. Current while no other
/// connection has committed (`data_version`) and only the write path has written since, which
/// keeps them up to date ([`PlaceSources::set`]).
pub(crate) struct PlaceSources {
    pub(crate) data_version: i64,
    /// Whether every record's source was read, or only those of the sources asked about (the
    /// first question about a place's subject reads only its answer: in an `apply` batch a
    /// message's lines ask it once and few pairs are asked twice; a second question reads all).
    pub(crate) complete: bool,
    /// Source → the predicates of its current records.
    by_source: HashMap<String, BTreeSet<String>>,
    /// Predicate → its record's source, when complete.
    by_predicate: HashMap<String, String>,
}

/// What the scope guard keeps of the records' sources between write-path transactions.
#[derive(Default)]
pub(crate) struct Sources {
    /// Place → subject → its records' sources, as read.
    pub(crate) places: HashMap<Scope, HashMap<String, PlaceSources>>,
    /// Every scoped record's place, subject and source, once the guard has asked often enough
    /// to pay for reading them all ([`ScopedSources`]).
    scoped: Option<ScopedSources>,
    /// Sibling reads since `scoped` was last absent, and at how many to weigh building it.
    reads: u64,
    next_weigh: u64,
}

/// How many places' subjects, and how many records of one, the store keeps ([`PlaceSources`]).
pub(crate) const SOURCES_KEPT: usize = 64;
pub(crate) const SOURCES_ROWS_KEPT: usize = 100_000;

/// The (place, subject, source) of every current scoped record, hashed: a question whose
/// triple is not among them has no sibling, and needs no read. A hash that collides, a record
/// since superseded or deleted, a line rolled back — each only makes a read happen that finds
/// nothing, so the set may hold more than the records, never less. It is built from one scan
/// of the records, added to by the write path's own scoped inserts and supersedes, and dropped
/// with the rest of [`Sources`] (by any other transaction, a failed line) or when another
/// connection commits.
struct ScopedSources {
    data_version: i64,
    hashes: HashSet<u64>,
}

/// The first weighing after this many sibling reads, then at each doubling.
const SCOPED_FIRST_WEIGH: u64 = 64;
/// A sibling read (a statement, a seek, a walk over the subject's records in the place) costs
/// at least what scanning this many records does: the scan is built once the reads done would
/// have paid for it ([`Sources::weigh`]).
const READ_COSTS_ROWS: u64 = 16;
/// Beyond this many records the set is not built (about 16 bytes each in memory).
const SCOPED_ROWS_KEPT: u64 = 2_000_000;

fn triple_hash(place: &str, subject: &str, source: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    // 0xff is never in UTF-8, so the three parts cannot run into each other.
    h.write(place.as_bytes());
    h.write_u8(0xff);
    h.write(subject.as_bytes());
    h.write_u8(0xff);
    h.write(source.as_bytes());
    h.finish()
}

impl Sources {
    /// Forget everything kept (what it was kept from may have changed unseen).
    pub(crate) fn clear(&mut self) {
        *self = Sources::default();
    }

    /// Whether `source` may have written a current record of `subject` in `place`: false only
    /// when every scoped record's source is known (as of `data_version`) and it wrote none.
    pub(crate) fn may_have_written(
        &mut self,
        place: &Scope,
        subject: &str,
        source: &str,
        data_version: i64,
    ) -> bool {
        match &self.scoped {
            Some(s) if s.data_version == data_version => {
                s.hashes
                    .contains(&triple_hash(&place.to_string(), subject, source))
            }
            Some(_) => {
                self.scoped = None;
                self.reads = 0;
                true
            }
            None => true,
        }
    }

    /// Counts one sibling read about to be made, and builds the set of scoped records'
    /// sources when the reads made since it was last absent would have paid for the scan
    /// (the table's highest rowid stands for its size): a long `apply` or a long-lived server
    /// builds it, a one-off write never. Returns whether the set is now there.
    pub(crate) fn weigh(&mut self, conn: &Connection, data_version: i64) -> Result<bool> {
        if self.scoped.is_some() {
            return Ok(true);
        }
        self.reads += 1;
        if self.reads < self.next_weigh.max(SCOPED_FIRST_WEIGH) {
            return Ok(false);
        }
        self.next_weigh = self.reads.saturating_mul(2);
        let rows: Option<i64> = conn
            .prepare_cached("SELECT max(rowid) FROM memories")?
            .query_row([], |r| r.get(0))?;
        let rows = rows.unwrap_or(0).max(0) as u64;
        if rows > SCOPED_ROWS_KEPT || self.reads.saturating_mul(READ_COSTS_ROWS) < rows {
            return Ok(false);
        }
        let mut hashes = HashSet::new();
        let mut stmt = conn.prepare_cached(
            "SELECT scope, subject, source FROM memories WHERE scope <> 'global'",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let text = |i| row.get_ref(i).ok().and_then(|v| v.as_str().ok());
            let (Some(place), Some(subject), Some(source)) = (text(0), text(1), text(2)) else {
                // Not text where the schema says text (a damaged file): the reads stay.
                self.next_weigh = u64::MAX;
                return Ok(false);
            };
            hashes.insert(triple_hash(place, subject, source));
        }
        self.scoped = Some(ScopedSources {
            data_version,
            hashes,
        });
        Ok(true)
    }

    /// `predicate`'s record of `subject` in `place` as now written by `source` (an insert or a
    /// supersede by the write path): what is kept follows it.
    pub(crate) fn wrote(&mut self, place: &Scope, subject: &str, predicate: &str, source: &str) {
        if let Some(kept) = self
            .places
            .get_mut(place)
            .and_then(|by_subject| by_subject.get_mut(subject))
        {
            kept.set(predicate, source);
        }
        if let (Some(scoped), false) = (&mut self.scoped, *place == Scope::Global) {
            scoped
                .hashes
                .insert(triple_hash(&place.to_string(), subject, source));
        }
    }
}

impl PlaceSources {
    /// What `source` wrote of `subject` in `place` (`complete`: false), or every record's
    /// source there (`complete`: true).
    pub(crate) fn read(
        conn: &Connection,
        place: &Scope,
        subject: &str,
        source: Option<&str>,
        data_version: i64,
    ) -> Result<PlaceSources> {
        let mut s = PlaceSources {
            data_version,
            complete: source.is_none(),
            by_source: HashMap::new(),
            by_predicate: HashMap::new(),
        };
        let mut stmt = conn.prepare_cached(
            "SELECT predicate, source FROM memories
             WHERE scope = ?1 AND subject = ?2 AND (?3 IS NULL OR source = ?3)",
        )?;
        let rows = stmt.query_map(rusqlite::params![place.to_string(), subject, source], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        if let Some(source) = source {
            s.by_source.insert(source.to_string(), BTreeSet::new());
        }
        for row in rows {
            let (predicate, source) = row?;
            s.set(&predicate, &source);
        }
        Ok(s)
    }

    /// `predicate`'s record as now written by `source` (an insert or a supersede).
    pub(crate) fn set(&mut self, predicate: &str, source: &str) {
        if !self.complete {
            // Only the sources asked about are known: each keeps or loses the record.
            for (asked, predicates) in self.by_source.iter_mut() {
                if asked == source {
                    predicates.insert(predicate.to_string());
                } else {
                    predicates.remove(predicate);
                }
            }
            return;
        }
        if let Some(old) = self
            .by_predicate
            .insert(predicate.to_string(), source.to_string())
        {
            if let Some(set) = self.by_source.get_mut(&old) {
                set.remove(predicate);
                if set.is_empty() {
                    self.by_source.remove(&old);
                }
            }
        }
        self.by_source
            .entry(source.to_string())
            .or_default()
            .insert(predicate.to_string());
    }

    /// The predicates `source` wrote, in order — `None` when that was not read.
    pub(crate) fn written_by(&self, source: &str) -> Option<Vec<String>> {
        match self.by_source.get(source) {
            Some(set) => Some(set.iter().cloned().collect()),
            None if self.complete => Some(Vec::new()),
            None => None,
        }
    }

    /// How many records it holds.
    pub(crate) fn len(&self) -> usize {
        self.by_source.values().map(BTreeSet::len).sum()
    }
}

/// The repository and task scopes a database knows, ready for the scope guard, kept from one
/// write transaction to the next: reading them all is most of what the guard costs a single
/// write. They are current while no other connection has committed (`PRAGMA data_version`)
/// and no connection of this process has changed the scope spellings
/// (`spellings::scope_spellings_generation`) since they were read — but for the places this
/// store registered itself, which they take in as it goes (`SpellingMemo::new_places`: a
/// store learning its places one write at a time need not read them all again each time);
/// only a committed transaction hands them back to the store.
pub(crate) struct KnownPlaces {
    pub(crate) data_version: i64,
    pub(crate) generation: u64,
    pub(crate) places: Places,
}

/// What every write transaction knows: its time and whether to assert invariants.
pub(crate) struct WriteCtx {
    pub now: String,
    pub assert: bool,
}

/// Ends every write transaction the same way: the causal clock written back, busy retries
/// folded into the metrics, then commit. Returns whether an on-disk purge is owed.
pub(crate) fn finish_write(
    tx: rusqlite::Transaction<'_>,
    seqs: &mut SeqBatch,
    path: &std::path::Path,
) -> Result<bool> {
    seqs.flush(&tx)?;
    let taken = Store::record_busy_retries(&tx)?;
    let committed = super::rows::purge_debt_owed(&tx).and_then(|debt| {
        tx.commit()
            .map(|_| debt)
            .map_err(|e| explain_sqlite(e.into(), path))
    });
    if committed.is_err() {
        Store::unrecord_busy_retries(taken);
    }
    committed
}

impl Store {
    /// Runs `body` in one `BEGIN IMMEDIATE` transaction and ends it the way every write ends
    /// ([`finish_write`]); an error rolls everything back. Pays an owed on-disk purge after.
    pub(crate) fn in_write_tx<T>(
        &mut self,
        body: impl FnOnce(&rusqlite::Transaction<'_>, &WriteCtx, &mut TxState) -> Result<T>,
    ) -> Result<T> {
        Ok(self.run_write_tx(true, body)?.0)
    }

    /// Runs `body` exactly as [`Store::in_write_tx`] would, then rolls everything back: what
    /// an operation would do, decided by the operation itself (a preview of a compound
    /// operation — rescope, revert — that no probe alone can answer).
    pub(crate) fn dry_run<T>(
        &mut self,
        body: impl FnOnce(&rusqlite::Transaction<'_>, &WriteCtx, &mut TxState) -> Result<T>,
    ) -> Result<T> {
        Ok(self.run_write_tx(false, body)?.0)
    }

    fn run_write_tx<T>(
        &mut self,
        commit: bool,
        body: impl FnOnce(&rusqlite::Transaction<'_>, &WriteCtx, &mut TxState) -> Result<T>,
    ) -> Result<(T, bool)> {
        let (clock, assert, fresh) = (self.clock, self.assert_invariants, self.fresh_inserts);
        let path = self.path.clone();
        // The store's prepared statements go with the transaction and come back after it.
        let hot = std::mem::take(&mut self.hot);
        // So do the spellings it has met: a stored spelling never changes, so they stay true
        // across transactions — unless this one rolls back what it registered.
        let spellings = std::mem::take(&mut self.spellings);
        let places = self.known_places.take();
        let sources = std::mem::take(&mut self.place_sources);
        // (Should the lock not come, both are simply prepared and met again next time.)
        let tx = self.begin()?;
        // The time is taken inside the write lock, so event times follow commit order.
        let ctx = WriteCtx {
            now: super::format_time(clock.now()),
            assert,
        };
        let mut st = TxState {
            expect_fresh: fresh,
            hot,
            spellings,
            places,
            sources,
            ..TxState::default()
        };
        let out = body(&tx, &ctx, &mut st);
        let TxState {
            mut seqs,
            hot,
            spellings,
            places,
            sources,
            keeps_sources,
            ..
        } = st;
        let finished = match out {
            Ok(out) if commit => finish_write(tx, &mut seqs, &path).map(|debt| (out, debt)),
            Ok(out) => {
                drop(tx); // a dry run: rolls back
                Ok((out, false))
            }
            Err(e) => {
                drop(tx); // rolls back
                Err(explain_sqlite(e, &path))
            }
        };
        self.hot = hot;
        if commit && finished.is_ok() {
            self.spellings = spellings.bounded();
            self.known_places = places;
            // Any other transaction may have changed the records without telling them.
            if keeps_sources {
                self.place_sources = sources;
            }
        }
        let (out, debt) = finished?;
        // Whether the content is in no file any more: true unless an owed purge stays owed.
        let purged = !debt || self.pay_purge_debt()?;
        Ok((out, purged))
    }

    /// [`Store::in_write_tx`] for an operation that may destroy content (delete, gc, import's
    /// merge): history may be rewritten while `body` runs (the purge gate is open), an on-disk
    /// purge is recorded as owed in the same transaction when it did destroy something, and
    /// after the commit the WAL is checkpointed and truncated. Returns whether that truncation completed (a reader
    /// that blocks it leaves the debt recorded for the next write, open or `gc`).
    pub(crate) fn in_purge_tx<T>(
        &mut self,
        body: impl FnOnce(&rusqlite::Transaction<'_>, &WriteCtx, &mut TxState) -> Result<T>,
        destroyed: impl FnOnce(&T) -> bool,
    ) -> Result<(T, bool)> {
        let gate = self.purge_gate.clone();
        self.run_write_tx(true, |tx, ctx, st| {
            let out = {
                let _open = GateOpen::open(&gate);
                body(tx, ctx, st)?
            };
            // The debt is recorded up front and cleared once the truncation completes — when
            // the operation destroyed anything (`destroyed` says so of its result).
            if destroyed(&out) {
                tx.execute(
                    "INSERT OR IGNORE INTO settings (key, value) VALUES (?1, ?2)",
                    rusqlite::params![super::rows::DEBT_KEY, ctx.now],
                )?;
            }
            Ok(out)
        })
    }
}

/// The purge gate held open (history rows may be rewritten) until dropped, on every path out.
pub(crate) struct GateOpen<'a>(&'a AtomicBool);

impl<'a> GateOpen<'a> {
    pub(crate) fn open(gate: &'a Arc<AtomicBool>) -> GateOpen<'a> {
        gate.store(true, Ordering::SeqCst);
        GateOpen(gate)
    }
}

impl Drop for GateOpen<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}
