//! Slow work off the draw path. Two threads, each with its own connection: the filter (latest
//! wins — a newer query cancels an older scan between chunks — and results stream back in view
//! order as they are found; a full scan of a large store brings in a second connection on a
//! scoped thread, `run_filter_with`) and the loader (header counts, per-scope counts, `check`,
//! the read log of the Reads tab — latest wins there too). Replies come back over one channel
//! and the loop applies them; a reply for an outdated filter generation is dropped there.
//! Tests and snapshots use the inline mode instead: the same jobs, run synchronously on the
//! UI's own store.

use super::fuzzy::Pattern;
use crate::model::{DeletePreview, DeleteTarget, ReadRecord};
use crate::store::ui::{Interrupt, Reopen};
use crate::store::{BrowseKey, CheckReport, FilterCandidate, Suspect, UiStore};
use anyhow::Result;
use chrono::{DateTime, Utc};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first chunk is small so the first results land within a frame or two; later chunks grow.
const FIRST_CHUNK: usize = 2_000;
const MAX_CHUNK: usize = 50_000;
/// How often a running scan reports what it found.
const EMIT_EVERY: Duration = Duration::from_millis(40);
/// A finished scan keeps up to this many match ids, so a longer query only rescores them.
const NARROW_CAP: usize = 200_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterJob {
    pub generation: u64,
    pub query: String,
    /// Report as results are found (typing); a refresh re-run reports once, when complete, so
    /// the old results stay on screen until the new ones are whole.
    pub progressive: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    Filter(FilterJob),
    Load(Load),
}

/// What kind of loader job a reply answers. The loader runs repeated jobs once, so the loop
/// tracks kinds waiting for an answer, not a count of jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LoadKind {
    Counts,
    Check,
    DeletePreview,
    Reads,
    Suspects,
}

impl Load {
    pub fn kind(&self) -> LoadKind {
        match self {
            Load::Counts => LoadKind::Counts,
            Load::Check => LoadKind::Check,
            Load::DeletePreview(_) => LoadKind::DeletePreview,
            Load::Reads(_) => LoadKind::Reads,
            Load::Suspects => LoadKind::Suspects,
        }
    }

    /// Only the newest job of this kind is still wanted (what is on screen changed since).
    fn latest_wins(&self) -> bool {
        matches!(self, Load::DeletePreview(_) | Load::Reads(_))
    }
}

/// What the Reads tab asks of the read log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadsQuery {
    /// Every word must appear in the read's agent, subject, predicate, repo or task.
    pub words: Vec<String>,
    pub since: Option<DateTime<Utc>>,
    pub limit: usize,
}

/// The loader's jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Load {
    /// Header figures and per-scope counts (full index scans at a million records).
    Counts,
    /// Every invariant and the health figures.
    Check,
    /// What a delete would destroy (a predicate or a subject is a scan at a million records).
    DeletePreview(DeleteTarget),
    /// The newest reads matching a query (a scan of the read log when the words match few).
    Reads(ReadsQuery),
    /// The suspects (`Store::suspects`: a pass over the current view).
    Suspects,
}

/// The header's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeaderCounts {
    pub memories: i64,
    pub scopes: i64,
    pub pending: i64,
    pub tombstones: i64,
}

#[derive(Debug, Clone)]
pub enum Reply {
    Filter {
        generation: u64,
        runs: Vec<(String, Vec<i64>)>,
        scanned: u64,
        done: bool,
    },
    Counts {
        counts: HeaderCounts,
        scopes: Vec<(String, i64)>,
    },
    Check(Box<CheckReport>),
    DeletePreview {
        target: DeleteTarget,
        preview: Result<DeletePreview, String>,
    },
    Reads {
        query: ReadsQuery,
        rows: Result<Vec<ReadRecord>, String>,
    },
    Suspects(Result<Vec<Suspect>, String>),
    Failed {
        job: Failed,
        error: String,
    },
}

/// Which background work failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    Filter,
    Counts,
    Check,
    /// The worker threads themselves (or opening their connections).
    Workers,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Failed::Filter => "the filter",
            Failed::Counts => "counting",
            Failed::Check => "the check",
            Failed::Workers => "background work",
        })
    }
}

/// Match ids of the last finished scan, reusable while the data has not changed.
#[derive(Debug, Default)]
pub struct NarrowCache {
    data_version: i64,
    query: String,
    ids: Option<Vec<i64>>,
}

impl NarrowCache {
    fn usable(&self, data_version: i64, query: &str) -> Option<&[i64]> {
        let ids = self.ids.as_deref()?;
        (self.data_version == data_version
            && !self.query.is_empty()
            && query.starts_with(&self.query))
        .then_some(ids)
    }
}

/// Finds every record (or, when narrowing, every previous match) that `job.query` matches.
pub fn run_filter(
    store: &dyn UiStore,
    job: &FilterJob,
    cancelled: &dyn Fn() -> bool,
    emit: &mut dyn FnMut(Reply) -> bool,
    cache: &mut NarrowCache,
) -> Result<()> {
    run_filter_with(store, None, job, cancelled, emit, cache)
}

/// A full scan of a span of record ids smaller than this stays in view order (small stores;
/// lib unit tests take the split path always).
const SPLIT_MIN_IDS: i64 = if cfg!(test) { 0 } else { 20_000 };
/// A split scan keeps a bit per id of the span: a sparser table (more than 8 MiB of bits)
/// is scanned in view order.
const SPLIT_MAX_IDS: i64 = 64 << 20;
/// Ids read in table order per statement (a stop is noticed between them).
const TABLE_CHUNK: i64 = 16_384;
/// How often the walk of the view's index checks for a newer query.
const WALK_CHECK_EVERY: usize = 16_384;

/// `run_filter`, with a second connection (`helper`) for the other core. A full scan reads
/// the first rows in view order, so the first results show at once; then the rest is split:
/// every record is tested in table order — a sequential read, far cheaper per row than view
/// order, which looks each row up by its id — into one bit per id, in chunks that this
/// thread and the helper take in turn, while this thread also walks the view's index alone
/// (ids and scopes, no row looked up) for the order. The matches then go out in view order.
/// A newer query stops both between chunks.
pub fn run_filter_with(
    store: &dyn UiStore,
    helper: Option<&mut dyn UiStore>,
    job: &FilterJob,
    cancelled: &dyn Fn() -> bool,
    emit: &mut dyn FnMut(Reply) -> bool,
    cache: &mut NarrowCache,
) -> Result<()> {
    let pattern = Pattern::new(&job.query);
    let data_version = store.data_version()?;
    // Every match of "abc" is a match of "ab": a longer query only retests the last matches.
    let narrow: Option<Vec<i64>> = cache
        .usable(data_version, &job.query)
        .map(|ids| ids.to_vec());
    let mut scan = Scan::new(store, &pattern, job);
    let done = match narrow {
        Some(ids) => scan.narrow(&ids, cancelled, emit)?,
        None => scan.full(helper, cancelled, emit)?,
    };
    if done {
        *cache = NarrowCache {
            data_version,
            query: job.query.clone(),
            ids: scan.found.kept,
        };
    }
    Ok(())
}

/// Whether the filter matches a record: exactly when SkimMatcherV2 would (see `fuzzy`).
fn matches(pattern: &Pattern, c: &FilterCandidate<'_>) -> bool {
    pattern.matches_joined(&[c.subject, c.predicate, c.value, c.scope])
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The table-order half of a split scan: which ids of the span match, one bit each, filled in
/// chunks by whichever thread takes the next one.
struct TableScan<'a> {
    pattern: &'a Pattern,
    from: i64,
    to: i64,
    next: AtomicI64,
    words: Vec<AtomicU64>,
    stop: AtomicBool,
}

impl TableScan<'_> {
    fn bit(&self, id: i64) -> Option<(&AtomicU64, u64)> {
        let i = usize::try_from(id.checked_sub(self.from)?).ok()?;
        Some((self.words.get(i / 64)?, 1 << (i % 64)))
    }

    /// None for an id outside the span (a record added after the span was read).
    fn matched(&self, id: i64) -> Option<bool> {
        let (word, b) = self.bit(id)?;
        Some(word.load(Ordering::Relaxed) & b != 0)
    }

    /// Tests chunks until none is left or the scan stops. On failure, the chunk it was
    /// testing (for the other thread to test again) and the error.
    fn work(&self, store: &dyn UiStore) -> Result<(), (i64, anyhow::Error)> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let lo = self.next.fetch_add(TABLE_CHUNK, Ordering::Relaxed);
            if lo >= self.to {
                return Ok(());
            }
            self.chunk(store, lo).map_err(|e| (lo, e))?;
        }
    }

    fn chunk(&self, store: &dyn UiStore, lo: i64) -> Result<()> {
        let hi = lo.saturating_add(TABLE_CHUNK).min(self.to);
        store.filter_scan_ids(lo, hi, &mut |c| {
            if matches(self.pattern, c) {
                if let Some((word, b)) = self.bit(c.id) {
                    word.fetch_or(b, Ordering::Relaxed);
                }
            }
        })?;
        Ok(())
    }
}

/// Matches found and not yet reported, and the ids kept for narrowing.
struct Found {
    runs: Vec<(String, Vec<i64>)>,
    kept: Option<Vec<i64>>,
}

impl Found {
    fn hit(&mut self, id: i64, scope: &str) {
        match self.runs.last_mut() {
            Some((s, ids)) if s == scope => ids.push(id),
            _ => self.runs.push((scope.to_string(), vec![id])),
        }
        if let Some(k) = self.kept.as_mut() {
            k.push(id);
            if k.len() > NARROW_CAP {
                self.kept = None;
            }
        }
    }
}

/// The view's order after a key: record ids, and where each scope's run starts.
struct Walked {
    ids: Vec<i64>,
    scopes: Vec<(usize, String)>,
}

/// Walks the view's index after the first chunk, which ended at `after` with record `last`.
/// None if a newer query came.
fn walk(
    store: &dyn UiStore,
    (after, last): (&BrowseKey, i64),
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Walked>> {
    let mut w = Walked {
        ids: Vec::new(),
        scopes: Vec::new(),
    };
    let mut stopped = false;
    // The walk starts at the first record (an unbounded walk is half the cost) and skips
    // through `last`; only if `last` is gone meanwhile does it start again after `after`.
    let mut skipping = true;
    for bound in [None, Some(after)] {
        let mut seen = 0usize;
        store.filter_walk(bound, &mut |id, scope| {
            seen += 1;
            if skipping {
                skipping = id != last;
            } else {
                if w.scopes.last().is_none_or(|(_, s)| s != scope) {
                    w.scopes.push((w.ids.len(), scope.to_string()));
                }
                w.ids.push(id);
            }
            stopped = seen.is_multiple_of(WALK_CHECK_EVERY) && cancelled();
            !stopped
        })?;
        if stopped {
            return Ok(None);
        }
        if !skipping {
            break;
        }
        skipping = false;
    }
    Ok(Some(w))
}

/// One filter scan in progress.
struct Scan<'a> {
    store: &'a dyn UiStore,
    pattern: &'a Pattern,
    job: &'a FilterJob,
    found: Found,
    scanned: u64,
    emitted: bool,
    last_emit: Instant,
}

impl<'a> Scan<'a> {
    fn new(store: &'a dyn UiStore, pattern: &'a Pattern, job: &'a FilterJob) -> Scan<'a> {
        Scan {
            store,
            pattern,
            job,
            found: Found {
                runs: Vec::new(),
                kept: Some(Vec::new()),
            },
            scanned: 0,
            emitted: false,
            last_emit: Instant::now(),
        }
    }

    /// Retests the previous matches, chunk by chunk. True when complete.
    fn narrow(
        &mut self,
        ids: &[i64],
        cancelled: &dyn Fn() -> bool,
        emit: &mut dyn FnMut(Reply) -> bool,
    ) -> Result<bool> {
        let mut next = 0usize;
        let mut chunk = FIRST_CHUNK;
        loop {
            if cancelled() {
                return Ok(false);
            }
            let end = (next + chunk).min(ids.len());
            let (pattern, found) = (self.pattern, &mut self.found);
            let n = self
                .store
                .filter_candidates_by_ids(&ids[next..end], &mut |c| {
                    if matches(pattern, c) {
                        found.hit(c.id, c.scope);
                    }
                })?;
            next = end;
            if !self.report(n, end >= ids.len(), emit) {
                return Ok(false);
            }
            if end >= ids.len() {
                return Ok(true);
            }
            chunk = (chunk * 2).min(MAX_CHUNK);
        }
    }

    /// Tests every record: the first chunk in view order, the rest split (`run_filter_with`)
    /// when the table is large, else in view order. True when complete.
    fn full(
        &mut self,
        helper: Option<&mut dyn UiStore>,
        cancelled: &dyn Fn() -> bool,
        emit: &mut dyn FnMut(Reply) -> bool,
    ) -> Result<bool> {
        let span = self
            .store
            .record_id_span()?
            .filter(|(lo, hi)| (SPLIT_MIN_IDS..=SPLIT_MAX_IDS).contains(&(hi - lo)));
        let mut after: Option<BrowseKey> = None;
        let mut chunk = FIRST_CHUNK;
        loop {
            if cancelled() {
                return Ok(false);
            }
            let (store, pattern, found) = (self.store, self.pattern, &mut self.found);
            let mut last_id = 0;
            let (n, last) = store.filter_scan(after.as_ref(), chunk, &mut |c| {
                last_id = c.id;
                if matches(pattern, c) {
                    found.hit(c.id, c.scope);
                }
            })?;
            if last.is_some() {
                after = last;
            }
            let done = n < chunk;
            if !self.report(n, done, emit) {
                return Ok(false);
            }
            if done {
                return Ok(true);
            }
            if let (Some((lo, hi)), Some(after)) = (span, &after) {
                return self.split((lo, hi), (after, last_id), helper, cancelled, emit);
            }
            chunk = (chunk * 2).min(MAX_CHUNK);
        }
    }

    /// The records after the first chunk (`after`: its last key and id), split between table order (the bits, on both threads) and
    /// the walk of the view's index (the order, on this one).
    fn split(
        &mut self,
        (lo, hi): (i64, i64),
        after: (&BrowseKey, i64),
        helper: Option<&mut dyn UiStore>,
        cancelled: &dyn Fn() -> bool,
        emit: &mut dyn FnMut(Reply) -> bool,
    ) -> Result<bool> {
        let table = TableScan {
            pattern: self.pattern,
            from: lo,
            to: hi + 1,
            next: AtomicI64::new(lo),
            words: (0..((hi + 1 - lo) as usize).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            stop: AtomicBool::new(false),
        };
        let store = self.store;
        let walked = std::thread::scope(|threads| -> Result<Option<Walked>> {
            let helping = helper.map(|h| {
                let table = &table;
                threads.spawn(move || table.work(h))
            });
            // However this ends, the helper stops at its next chunk (the scope waits for it).
            let _stop = StopOnDrop(&table.stop);
            let Some(walked) = walk(store, after, cancelled)? else {
                return Ok(None);
            };
            loop {
                if cancelled() {
                    return Ok(None);
                }
                let lo = table.next.fetch_add(TABLE_CHUNK, Ordering::Relaxed);
                if lo >= table.to {
                    break;
                }
                table.chunk(store, lo)?;
            }
            // A chunk the helper failed on is tested again here; a helper that panicked
            // leaves chunks untested, so the scan fails rather than miss matches.
            if let Some(h) = helping {
                match h.join() {
                    Ok(Ok(())) => {}
                    Ok(Err((lo, _))) => table.chunk(store, lo)?,
                    Err(_) => anyhow::bail!("the filter's helper thread panicked"),
                }
            }
            Ok(Some(walked))
        })?;
        let Some(walked) = walked else {
            return Ok(false);
        };
        let (pattern, found) = (self.pattern, &mut self.found);
        let mut scopes = walked.scopes.iter().peekable();
        let mut scope = "";
        for (i, &id) in walked.ids.iter().enumerate() {
            while let Some((_, s)) = scopes.next_if(|(start, _)| *start <= i) {
                scope = s;
            }
            match table.matched(id) {
                Some(true) => found.hit(id, scope),
                Some(false) => {}
                // Added since the span was read: tested on its own.
                None => {
                    store.filter_candidates_by_ids(&[id], &mut |c| {
                        if matches(pattern, c) {
                            found.hit(c.id, c.scope);
                        }
                    })?;
                }
            }
        }
        Ok(self.report(walked.ids.len(), true, emit))
    }

    /// Counts `n` more records scanned and reports what was found when it is time to. False
    /// when the receiver is gone.
    fn report(&mut self, n: usize, done: bool, emit: &mut dyn FnMut(Reply) -> bool) -> bool {
        self.scanned += n as u64;
        let progressive = self.job.progressive;
        let due = !self.emitted || self.last_emit.elapsed() >= EMIT_EVERY;
        if !(done || (progressive && due)) {
            return true;
        }
        let reply = Reply::Filter {
            generation: self.job.generation,
            runs: std::mem::take(&mut self.found.runs),
            scanned: self.scanned,
            done,
        };
        self.emitted = true;
        self.last_emit = Instant::now();
        emit(reply)
    }
}

pub fn run_load(store: &dyn UiStore, job: Load) -> Reply {
    match job {
        Load::Counts => {
            let counts = store.counts().and_then(|c| {
                Ok(Reply::Counts {
                    counts: HeaderCounts {
                        memories: c.memories,
                        scopes: c.scopes,
                        pending: c.pending,
                        tombstones: c.tombstones,
                    },
                    scopes: store.scope_counts()?,
                })
            });
            counts.unwrap_or_else(|e| Reply::Failed {
                job: Failed::Counts,
                error: crate::store::error_text(&e),
            })
        }
        Load::Check => match store.check() {
            Ok(r) => Reply::Check(Box::new(r)),
            Err(e) => Reply::Failed {
                job: Failed::Check,
                error: crate::store::error_text(&e),
            },
        },
        Load::DeletePreview(target) => Reply::DeletePreview {
            preview: store
                .delete_preview(&target)
                .map_err(|e| crate::store::error_text(&e)),
            target,
        },
        Load::Suspects => {
            Reply::Suspects(store.suspects().map_err(|e| crate::store::error_text(&e)))
        }
        Load::Reads(query) => Reply::Reads {
            rows: store
                .read_log(&query.words, query.since, query.limit)
                .map_err(|e| crate::store::error_text(&e)),
            query,
        },
    }
}

/// Where jobs run.
pub enum Workers {
    Threads(Threads),
    /// Jobs wait here until the session runs them on its own store.
    Inline(Vec<Job>),
}

pub struct Threads {
    filter: Sender<FilterJob>,
    loader: Sender<Load>,
    /// The whole-database scans (check, suspects), so a preview or a count never waits
    /// seconds behind one.
    scanner: Sender<Load>,
    replies: Receiver<Reply>,
    latest_filter: Arc<AtomicU64>,
    interrupts: Interrupts,
}

/// The workers' connections, to interrupt when the UI closes; `None` once it has closed, so a
/// connection a worker opens after that (a job it had not started) never runs.
type Interrupts = Arc<Mutex<Option<Vec<Interrupt>>>>;

impl Drop for Threads {
    fn drop(&mut self) {
        // Ends a running scan or count now; the threads exit when the channels close.
        self.latest_filter.store(u64::MAX, Ordering::SeqCst);
        if let Ok(mut handles) = self.interrupts.lock() {
            for interrupt in handles.take().into_iter().flatten() {
                interrupt();
            }
        }
    }
}

impl Workers {
    /// Worker threads, each opening its own connection with `reopen` on its first job.
    pub fn threads(reopen: Reopen) -> Result<Workers> {
        let (reply_tx, replies) = channel::<Reply>();
        let latest_filter = Arc::new(AtomicU64::new(0));

        let interrupts: Interrupts = Arc::new(Mutex::new(Some(Vec::new())));

        let (filter, filter_rx) = channel::<FilterJob>();
        let latest = latest_filter.clone();
        let tx = reply_tx.clone();
        let db = Opener {
            reopen: reopen.clone(),
            interrupts: interrupts.clone(),
        };
        std::thread::Builder::new()
            .name("memscope-filter".into())
            .spawn(move || filter_thread(db, filter_rx, tx, latest))?;

        // Two loader threads, each with its own connection: the quick loads, and the scans.
        let loader_named = |name: &str| -> Result<Sender<Load>> {
            let (jobs, rx) = channel::<Load>();
            let db = Opener {
                reopen: reopen.clone(),
                interrupts: interrupts.clone(),
            };
            let tx = reply_tx.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || loader_thread(db, rx, tx))?;
            Ok(jobs)
        };
        let loader = loader_named("memscope-loader")?;
        let scanner = loader_named("memscope-scanner")?;

        Ok(Workers::Threads(Threads {
            filter,
            loader,
            scanner,
            replies,
            latest_filter,
            interrupts,
        }))
    }

    pub fn submit(&mut self, job: Job) {
        match self {
            Workers::Inline(queue) => queue.push(job),
            Workers::Threads(t) => match job {
                Job::Filter(f) => {
                    t.latest_filter.store(f.generation, Ordering::SeqCst);
                    let _ = t.filter.send(f);
                }
                Job::Load(l @ (Load::Check | Load::Suspects)) => {
                    let _ = t.scanner.send(l);
                }
                Job::Load(l) => {
                    let _ = t.loader.send(l);
                }
            },
        }
    }

    /// Stops any filter scan older than `generation` without starting a new one.
    pub fn cancel_filter(&mut self, generation: u64) {
        match self {
            Workers::Threads(t) => t.latest_filter.store(generation, Ordering::SeqCst),
            Workers::Inline(queue) => queue.retain(|j| !matches!(j, Job::Filter(_))),
        }
    }

    /// Replies that arrived, without waiting. If the worker threads are gone, later jobs run
    /// inline on the UI's store instead (slower, but the UI keeps working).
    pub fn try_replies(&mut self) -> Vec<Reply> {
        let Workers::Threads(t) = self else {
            return Vec::new();
        };
        let mut out = Vec::new();
        loop {
            match t.replies.try_recv() {
                Ok(r) => out.push(r),
                Err(TryRecvError::Empty) => return out,
                Err(TryRecvError::Disconnected) => break,
            }
        }
        *self = Workers::Inline(Vec::new());
        out.push(Reply::Failed {
            job: Failed::Workers,
            error: "the worker threads stopped; slow work now runs in the foreground".into(),
        });
        out
    }
}

/// Opens a worker's own connection on first use and registers it for interruption.
struct Opener {
    reopen: Reopen,
    interrupts: Interrupts,
}

impl Opener {
    fn open(&self, store: &mut Option<Box<dyn UiStore>>) -> Result<()> {
        if store.is_none() {
            let s = (self.reopen)()?;
            match self.interrupts.lock().as_deref_mut() {
                Ok(Some(handles)) => handles.push(s.interrupt()),
                // The UI closed while this worker was opening: nothing is wanted any more.
                _ => anyhow::bail!("the UI closed"),
            }
            *store = Some(s);
        }
        Ok(())
    }
}

fn filter_thread(db: Opener, rx: Receiver<FilterJob>, tx: Sender<Reply>, latest: Arc<AtomicU64>) {
    let mut store: Option<Box<dyn UiStore>> = None;
    // A second connection for the other core's share of a full scan (`run_filter_with`).
    let mut helper: Option<Box<dyn UiStore>> = None;
    let mut cache = NarrowCache::default();
    while let Ok(mut job) = rx.recv() {
        // Latest wins: only the newest queued query is worth scanning.
        while let Ok(newer) = rx.try_recv() {
            job = newer;
        }
        if latest.load(Ordering::SeqCst) != job.generation {
            continue;
        }
        let result = db.open(&mut store).and_then(|_| match store.as_deref() {
            Some(s) => {
                // A job is a turn: a connection a lock held back waits again once it is gone.
                s.turn();
                let generation = job.generation;
                let cancelled = || latest.load(Ordering::SeqCst) != generation;
                // Without it the scan runs on one connection, only slower.
                let helper = db
                    .open(&mut helper)
                    .ok()
                    .and(helper.as_deref_mut().map(|h| {
                        h.turn();
                        h as &mut dyn UiStore
                    }));
                let emit = &mut |r| tx.send(r).is_ok();
                run_filter_with(s, helper, &job, &cancelled, emit, &mut cache)
            }
            None => Ok(()),
        });
        if let Err(e) = result {
            let _ = tx.send(Reply::Failed {
                job: Failed::Filter,
                error: crate::store::error_text(&e),
            });
        }
    }
}

fn loader_thread(db: Opener, rx: Receiver<Load>, tx: Sender<Reply>) {
    let mut store: Option<Box<dyn UiStore>> = None;
    while let Ok(job) = rx.recv() {
        let mut jobs = vec![job];
        while let Ok(more) = rx.try_recv() {
            // Repeats run once; only the newest delete preview and read query are on screen.
            if more.latest_wins() {
                jobs.retain(|j| j.kind() != more.kind());
            }
            if !jobs.contains(&more) {
                jobs.push(more);
            }
        }
        // The jobs taken together are a turn: behind a lock they wait once, and a
        // connection a lock held back waits again once it is gone.
        if let Some(s) = store.as_deref() {
            s.turn();
        }
        for job in jobs {
            let reply = match db.open(&mut store) {
                Ok(()) => match store.as_deref() {
                    Some(s) => run_load(s, job),
                    None => continue,
                },
                Err(e) => Reply::Failed {
                    job: Failed::Workers,
                    error: crate::store::error_text(&e),
                },
            };
            if tx.send(reply).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{BrowseBound, OpenMode, Store};
    use crate::tui::list::haystack;
    use fuzzy_matcher::skim::SkimMatcherV2;
    use fuzzy_matcher::FuzzyMatcher;

    const VALUES: [&str; 6] = [
        "pnpm",
        "回复用中文，技术名词保留英文",
        "☕ 燕麦拿铁 oat latte",
        "Prettier --write",
        "say \\\"hi\\\"",
        "ÉCOLE straße",
    ];

    /// A store of `n` records (more than the first chunk, so a full scan splits: in unit tests
    /// any span does) and a second connection to it.
    fn stores(n: usize) -> (tempfile::TempDir, Store, Store) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let mut store = Store::open(&path, OpenMode::Create).unwrap();
        let mut lines = String::new();
        for i in 0..n {
            let scope = match i % 3 {
                0 => "global".to_string(),
                1 => format!("repo:r{}", i % 7),
                _ => format!("task:t{}", i % 11),
            };
            lines.push_str(&format!(
                r#"{{"subject":"user:{}","predicate":"p{}","value":"{} #{i}","scope":"{scope}","source":"test:{i}"}}"#,
                i / 5,
                i % 5,
                VALUES[i % VALUES.len()],
            ));
            lines.push('\n');
        }
        store
            .apply(std::io::Cursor::new(lines.into_bytes()), |_| Ok(()))
            .unwrap();
        let helper = Store::open(&path, OpenMode::Existing).unwrap();
        (dir, store, helper)
    }

    /// What SkimMatcherV2 alone matches, in view order.
    fn skim_matches(store: &dyn UiStore, query: &str) -> Vec<(String, i64)> {
        let matcher = SkimMatcherV2::default();
        let mut hay = String::new();
        let all = store.browse_after(&BrowseBound::Start, usize::MAX).unwrap();
        all.into_iter()
            .filter(|b| {
                let r = &b.record;
                let value = r.value.as_str().unwrap();
                let scope = r.scope.to_string();
                haystack(&mut hay, &r.subject, &r.predicate, value, &scope);
                query
                    .split_whitespace()
                    .all(|word| matcher.fuzzy_match(&hay, word).is_some())
            })
            .map(|b| (b.record.scope.to_string(), b.id))
            .collect()
    }

    /// The scan's matches in the order they streamed, and whether it said it was done.
    fn scan(
        store: &dyn UiStore,
        helper: Option<&mut dyn UiStore>,
        query: &str,
        cache: &mut NarrowCache,
    ) -> (Vec<(String, i64)>, bool) {
        let job = FilterJob {
            generation: 1,
            query: query.into(),
            progressive: true,
        };
        let mut got = Vec::new();
        let mut done = false;
        run_filter_with(
            store,
            helper,
            &job,
            &|| false,
            &mut |r| {
                if let Reply::Filter { runs, done: d, .. } = r {
                    assert!(!done, "nothing after the last reply");
                    for (scope, ids) in runs {
                        got.extend(ids.into_iter().map(|id| (scope.clone(), id)));
                    }
                    done = d;
                }
                true
            },
            cache,
        )
        .unwrap();
        (got, done)
    }

    #[test]
    fn split_scan_finds_what_skim_finds_in_view_order() {
        let (_dir, store, mut helper) = stores(5_000);
        for q in [
            "p",
            "pnpm",
            "中文",
            "PNPM",
            "Prettier",
            "oat 12",
            "user:1 p3",
            "é",
            "zzz",
            "\"hi",
        ] {
            let want = skim_matches(&store, q);
            for with_helper in [false, true] {
                let h = with_helper.then_some(&mut helper as &mut dyn UiStore);
                let (got, done) = scan(&store, h, q, &mut NarrowCache::default());
                assert!(done, "{q:?}");
                assert_eq!(got, want, "{q:?}, helper {with_helper}");
            }
        }
    }

    #[test]
    fn records_added_after_the_span_was_read_are_tested_on_their_own() {
        let (_dir, store, mut helper) = stores(3_000);
        let (lo, hi) = store.record_id_span().unwrap().unwrap();
        let first = store
            .browse_after(&BrowseBound::Start, 1)
            .unwrap()
            .remove(0);
        let query = "pnpm";
        let job = FilterJob {
            generation: 1,
            query: query.into(),
            progressive: false,
        };
        let pattern = Pattern::new(query);
        let mut scan = Scan::new(&store, &pattern, &job);
        // The split after the first record, as if the last 700 ids came after the span.
        let after = (&BrowseKey::of(&first.record), first.id);
        let mut got = Vec::new();
        let done = scan
            .split(
                (lo, hi - 700),
                after,
                Some(&mut helper),
                &|| false,
                &mut |r| {
                    if let Reply::Filter { runs, .. } = r {
                        for (scope, ids) in runs {
                            got.extend(ids.into_iter().map(|id| (scope.clone(), id)));
                        }
                    }
                    true
                },
            )
            .unwrap();
        assert!(done);
        let mut want = skim_matches(&store, query);
        want.retain(|(_, id)| *id != first.id);
        assert!(want.iter().any(|(_, id)| *id > hi - 700));
        assert_eq!(got, want);
    }

    #[test]
    fn the_walk_starts_after_the_first_chunk_even_if_its_last_record_is_gone() {
        let (_dir, store, _helper) = stores(300);
        let all = store.browse_after(&BrowseBound::Start, usize::MAX).unwrap();
        let key = BrowseKey::of(&all[9].record);
        let rest: Vec<i64> = all[10..].iter().map(|b| b.id).collect();
        for last in [all[9].id, -1] {
            let w = walk(&store, (&key, last), &|| false).unwrap().unwrap();
            assert_eq!(w.ids, rest, "last {last}");
            assert_eq!(w.scopes.first().map(|s| s.0), Some(0));
        }
    }

    #[test]
    fn narrowing_rescans_the_last_matches_only() {
        let (_dir, store, mut helper) = stores(3_000);
        let mut cache = NarrowCache::default();
        let (wide, _) = scan(&store, Some(&mut helper), "p", &mut cache);
        assert_eq!(cache.query, "p");
        assert_eq!(cache.ids.as_ref().map(|ids| ids.len()), Some(wide.len()));
        let (narrow, done) = scan(&store, Some(&mut helper), "pnpm #1", &mut cache);
        assert!(done);
        assert_eq!(narrow, skim_matches(&store, "pnpm #1"));
        assert_eq!(cache.query, "pnpm #1");
    }

    #[test]
    fn a_newer_query_stops_a_split_scan() {
        let (_dir, store, mut helper) = stores(3_000);
        let job = FilterJob {
            generation: 1,
            query: "p".into(),
            progressive: true,
        };
        // Cancelled after the first chunk went out: no further reply, nothing cached.
        let calls = std::cell::Cell::new(0);
        let cancelled = || {
            calls.set(calls.get() + 1);
            calls.get() > 1
        };
        let mut replies = 0;
        let mut cache = NarrowCache::default();
        run_filter_with(
            &store,
            Some(&mut helper),
            &job,
            &cancelled,
            &mut |_| {
                replies += 1;
                true
            },
            &mut cache,
        )
        .unwrap();
        assert_eq!(replies, 1);
        assert!(cache.ids.is_none());
    }
}
