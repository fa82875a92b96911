//! Slow work off the draw path. Two threads, each with its own connection: the filter (latest
//! wins — a newer query cancels an older scan between chunks — and results stream back in view
//! order as they are found) and the loader (header counts, per-scope counts, `check`, the read
//! log of the Reads tab — latest wins there too). Replies
//! come back over one channel and the loop applies them; a reply for an outdated filter
//! generation is dropped there. Tests and snapshots use the inline mode instead: the same jobs,
//! run synchronously on the UI's own store.

use super::list::haystack;
use crate::model::{DeletePreview, DeleteTarget, ReadRecord};
use crate::store::{BrowseKey, CheckReport, FilterCandidate, OpenMode, Store, Suspect};
use anyhow::Result;
use chrono::{DateTime, Utc};
use fuzzy_matcher::skim::SkimMatcherV2;
use fuzzy_matcher::FuzzyMatcher;
use rusqlite::InterruptHandle;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// Scores every record (or, when narrowing, the previous matches) against `job.query`.
pub fn run_filter(
    store: &Store,
    job: &FilterJob,
    cancelled: &dyn Fn() -> bool,
    emit: &mut dyn FnMut(Reply) -> bool,
    cache: &mut NarrowCache,
) -> Result<()> {
    let matcher = SkimMatcherV2::default();
    let data_version = store.data_version()?;
    // Every match of "abc" is a match of "ab": a longer query only rescores the last matches.
    let narrow: Option<Vec<i64>> = cache
        .usable(data_version, &job.query)
        .map(|ids| ids.to_vec());
    let mut kept: Option<Vec<i64>> = Some(Vec::new());
    let mut runs: Vec<(String, Vec<i64>)> = Vec::new();
    let mut hay = String::new();
    let mut scanned: u64 = 0;
    let mut after: Option<BrowseKey> = None;
    let mut next_id = 0usize;
    let mut chunk = FIRST_CHUNK;
    let mut last_emit = Instant::now();
    let mut emitted = false;
    loop {
        if cancelled() {
            return Ok(());
        }
        let mut score = |c: &FilterCandidate<'_>| {
            haystack(&mut hay, c.subject, c.predicate, c.value, c.scope);
            if matcher.fuzzy_match(&hay, &job.query).is_none() {
                return;
            }
            match runs.last_mut() {
                Some((scope, ids)) if scope == c.scope => ids.push(c.id),
                _ => runs.push((c.scope.to_string(), vec![c.id])),
            }
            if let Some(k) = kept.as_mut() {
                k.push(c.id);
                if k.len() > NARROW_CAP {
                    kept = None;
                }
            }
        };
        let (n, done) = match &narrow {
            Some(ids) => {
                let end = (next_id + chunk).min(ids.len());
                let n = store.filter_candidates_by_ids(&ids[next_id..end], &mut score)?;
                next_id = end;
                (n, end >= ids.len())
            }
            None => {
                let (n, last) = store.filter_scan(after.as_ref(), chunk, &mut score)?;
                if last.is_some() {
                    after = last;
                }
                (n, n < chunk)
            }
        };
        scanned += n as u64;
        if job.progressive && (done || !emitted || last_emit.elapsed() >= EMIT_EVERY) {
            let reply = Reply::Filter {
                generation: job.generation,
                runs: std::mem::take(&mut runs),
                scanned,
                done,
            };
            if !emit(reply) {
                return Ok(());
            }
            emitted = true;
            last_emit = Instant::now();
        }
        if done {
            if !job.progressive {
                emit(Reply::Filter {
                    generation: job.generation,
                    runs,
                    scanned,
                    done: true,
                });
            }
            *cache = NarrowCache {
                data_version,
                query: job.query.clone(),
                ids: kept,
            };
            return Ok(());
        }
        chunk = (chunk * 2).min(MAX_CHUNK);
    }
}

pub fn run_load(store: &Store, job: Load) -> Reply {
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
                error: format!("{e:#}"),
            })
        }
        Load::Check => match store.check() {
            Ok(r) => Reply::Check(Box::new(r)),
            Err(e) => Reply::Failed {
                job: Failed::Check,
                error: format!("{e:#}"),
            },
        },
        Load::DeletePreview(target) => Reply::DeletePreview {
            preview: store.delete_preview(&target).map_err(|e| format!("{e:#}")),
            target,
        },
        Load::Suspects => Reply::Suspects(store.suspects().map_err(|e| format!("{e:#}"))),
        Load::Reads(query) => Reply::Reads {
            rows: store
                .read_log(&query.words, query.since, query.limit)
                .map_err(|e| format!("{e:#}")),
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
    replies: Receiver<Reply>,
    latest_filter: Arc<AtomicU64>,
    interrupts: Interrupts,
}

type Interrupts = Arc<Mutex<Vec<InterruptHandle>>>;

impl Drop for Threads {
    fn drop(&mut self) {
        // Ends a running scan or count now; the threads exit when the channels close.
        self.latest_filter.store(u64::MAX, Ordering::SeqCst);
        if let Ok(handles) = self.interrupts.lock() {
            for h in handles.iter() {
                h.interrupt();
            }
        }
    }
}

/// Page cache of a worker's connection: its scans are sequential and need little.
const WORKER_CACHE_KIB: i64 = 4096;

impl Workers {
    pub fn threads(path: PathBuf) -> Result<Workers> {
        let (reply_tx, replies) = channel::<Reply>();
        let latest_filter = Arc::new(AtomicU64::new(0));

        let interrupts: Interrupts = Arc::default();

        let (filter, filter_rx) = channel::<FilterJob>();
        let latest = latest_filter.clone();
        let tx = reply_tx.clone();
        let db = Opener {
            path: path.clone(),
            interrupts: interrupts.clone(),
        };
        std::thread::Builder::new()
            .name("memscope-filter".into())
            .spawn(move || filter_thread(db, filter_rx, tx, latest))?;

        let (loader, loader_rx) = channel::<Load>();
        let db = Opener {
            path,
            interrupts: interrupts.clone(),
        };
        std::thread::Builder::new()
            .name("memscope-loader".into())
            .spawn(move || loader_thread(db, loader_rx, reply_tx))?;

        Ok(Workers::Threads(Threads {
            filter,
            loader,
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
    path: PathBuf,
    interrupts: Interrupts,
}

impl Opener {
    fn open(&self, store: &mut Option<Store>) -> Result<()> {
        if store.is_none() {
            let s = Store::open(&self.path, OpenMode::Existing)?;
            s.limit_page_cache(WORKER_CACHE_KIB)?;
            if let Ok(mut handles) = self.interrupts.lock() {
                handles.push(s.interrupt_handle());
            }
            *store = Some(s);
        }
        Ok(())
    }
}

fn filter_thread(db: Opener, rx: Receiver<FilterJob>, tx: Sender<Reply>, latest: Arc<AtomicU64>) {
    let mut store: Option<Store> = None;
    let mut cache = NarrowCache::default();
    while let Ok(mut job) = rx.recv() {
        // Latest wins: only the newest queued query is worth scanning.
        while let Ok(newer) = rx.try_recv() {
            job = newer;
        }
        if latest.load(Ordering::SeqCst) != job.generation {
            continue;
        }
        let result = db.open(&mut store).and_then(|_| match store.as_ref() {
            Some(s) => {
                let generation = job.generation;
                let cancelled = || latest.load(Ordering::SeqCst) != generation;
                run_filter(s, &job, &cancelled, &mut |r| tx.send(r).is_ok(), &mut cache)
            }
            None => Ok(()),
        });
        if let Err(e) = result {
            let _ = tx.send(Reply::Failed {
                job: Failed::Filter,
                error: format!("{e:#}"),
            });
        }
    }
}

fn loader_thread(db: Opener, rx: Receiver<Load>, tx: Sender<Reply>) {
    let mut store: Option<Store> = None;
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
        for job in jobs {
            let reply = match db.open(&mut store) {
                Ok(()) => match store.as_ref() {
                    Some(s) => run_load(s, job),
                    None => continue,
                },
                Err(e) => Reply::Failed {
                    job: Failed::Workers,
                    error: format!("{e:#}"),
                },
            };
            if tx.send(reply).is_err() {
                return;
            }
        }
    }
}
