//! The store as the daemon sees it, whichever engine holds the world: named
//! write transactions submitted as plain data (`Op`, answered by a `Reply` or a
//! typed `WriteError`, refusals included), group-committed, and consistent
//! read snapshots (`View`). Both engines (`Store`, `PgStore`) implement it.
//! What a writer reports (`Done`, `Health`, `WriterStats`, the `Footprint`)
//! lives here, below both engines and their writers, which share it.

use crate::error::{ReadError, WriteError};
use crate::histogram::{BATCH_BOUNDS, Histogram, LATENCY_BOUNDS_NS, Snapshot as HistogramSnapshot};
use crate::media::{payloads_path, wal_path};
use crate::ops::{Op, Reply};
use crate::view::{Reads, Snapshot};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Called exactly once with the request's result, on the writer thread, after
/// its batch is durable (or failed). Keep it short: send on a channel.
pub type Done = Box<dyn FnOnce(Result<Reply, WriteError>) + Send>;

/// Whether the store takes writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    Serving,
    /// Reads go on; writes are refused until the cause passes by itself.
    Degraded(String),
    /// Nothing more is written by this process; reopen the store.
    Failed(String),
}

/// Told once, on the writer thread, when the store becomes `Failed`.
pub type OnFatal = Box<dyn Fn(&str) + Send + Sync>;

/// What a writer thread has done, counted as it goes.
pub struct WriterStats {
    pub batches: AtomicU64,
    pub requests: AtomicU64,
    /// Nanoseconds the writer thread spent working: on batches (answers
    /// included) and its own upkeep (checkpoints and index passes; on
    /// PostgreSQL lease renewals and sweeps), neither waiting for requests
    /// nor for a batch's durability (`sync_wait_ns`). The two together,
    /// over a stretch of time, are how occupied the single writer was: near
    /// all of it, and the writer bounds the store's write rate.
    pub work_ns: AtomicU64,
    /// Nanoseconds the writer waited for a batch's durability point once it
    /// had applied the batch: the log's sync, whose device write began
    /// before the apply (PostgreSQL: every COMMIT round trip, a lease
    /// renewal's too).
    pub sync_wait_ns: AtomicU64,
    /// Nanoseconds the embedded writer spent applying requests (checks and
    /// inserts) and encoding frames.
    pub apply_ns: AtomicU64,
    /// Nanoseconds spent in the embedded engine's (non-durable) commit.
    pub commit_ns: AtomicU64,
    /// Checkpoints run.
    pub checkpoints: AtomicU64,
    /// The embedded engine's commits for readers: one a group of batches
    /// (one batch, or those of calls' own rows that joined it:
    /// `writer::HOLD_MAX`).
    pub published: AtomicU64,
    /// Per batch made durable, nanoseconds from the writer taking it up to
    /// its answers: applying it and the log's append and sync (the embedded
    /// engine's commit follows the answers), or, on PostgreSQL, the
    /// transaction with any retries after a conflict. A batch refused
    /// without touching the storage (a failed or full store) is not in it.
    pub commit_seconds: Histogram,
    /// Per batch, the requests it carried (every batch counted in `batches`).
    pub batch_requests: Histogram,
    /// Per batch made durable, nanoseconds the durability point took: on the
    /// embedded engine the log's write and `fdatasync` (the apply between
    /// them not counted); on PostgreSQL the COMMIT round trip, where the
    /// server flushes its own log.
    pub log_sync_seconds: Histogram,
    /// Per checkpoint of the embedded engine, nanoseconds its durable commit
    /// took (the database file's pages written and synced, so that the
    /// write-ahead log can be emptied); batches wait behind it. PostgreSQL
    /// has none.
    pub checkpoint_seconds: Histogram,
}

impl Default for WriterStats {
    fn default() -> WriterStats {
        WriterStats {
            batches: AtomicU64::default(),
            requests: AtomicU64::default(),
            work_ns: AtomicU64::default(),
            sync_wait_ns: AtomicU64::default(),
            apply_ns: AtomicU64::default(),
            commit_ns: AtomicU64::default(),
            checkpoints: AtomicU64::default(),
            published: AtomicU64::default(),
            commit_seconds: Histogram::new(&LATENCY_BOUNDS_NS),
            batch_requests: Histogram::new(&BATCH_BOUNDS),
            log_sync_seconds: Histogram::new(&LATENCY_BOUNDS_NS),
            checkpoint_seconds: Histogram::new(&LATENCY_BOUNDS_NS),
        }
    }
}

impl WriterStats {
    /// The writer thread takes up work (a batch, its upkeep); `Busy::end`
    /// counts the time until then as work, less what it waited for
    /// durability meanwhile.
    pub(crate) fn busy(&self) -> Busy {
        Busy { started: std::time::Instant::now(), waited: self.sync_wait_ns.load(Ordering::Relaxed) }
    }

    /// The histograms as they are now.
    pub fn histograms(&self) -> WriterHistograms {
        WriterHistograms {
            commit_ns: self.commit_seconds.snapshot(),
            batch_requests: self.batch_requests.snapshot(),
            log_sync_ns: self.log_sync_seconds.snapshot(),
            checkpoint_ns: self.checkpoint_seconds.snapshot(),
        }
    }
}

/// A stretch of the writer thread's work in progress (`WriterStats::busy`).
pub(crate) struct Busy {
    started: std::time::Instant,
    /// `sync_wait_ns` when the stretch began.
    waited: u64,
}

impl Busy {
    /// The stretch ends: counted into `stats`, the writer's that began it.
    pub(crate) fn end(self, stats: &WriterStats) {
        let busy = self.started.elapsed().as_nanos() as u64;
        let waiting = stats.sync_wait_ns.load(Ordering::Relaxed).saturating_sub(self.waited);
        stats.work_ns.fetch_add(busy.saturating_sub(waiting), Ordering::Relaxed);
    }
}

/// `WriterStats`' histograms at one moment; latencies in nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterHistograms {
    pub commit_ns: HistogramSnapshot,
    pub batch_requests: HistogramSnapshot,
    pub log_sync_ns: HistogramSnapshot,
    pub checkpoint_ns: HistogramSnapshot,
}

/// A world store: where the daemon's writes go and its reads come from.
pub trait WorldStore: Reads + Send + Sync {
    /// Queues a write; `done` runs once its batch is durable (or refused).
    fn submit(&self, op: Op, done: Done);

    /// Whether the store takes writes.
    fn health(&self) -> Health;

    /// What the store occupies and has done, for operators.
    fn status(&self) -> StoreStatus;

    /// What the store's writer has measured, as it goes.
    fn stats(&self) -> &WriterStats;

    /// Reads for checks that the write transaction makes again (a session's
    /// admission, a call's registry): each read sees the latest committed
    /// state, but two reads may see two states, and a call's own rows
    /// (`Op::is_a_calls_own`: tasks, entries, objects, episodes) may lag
    /// their answer, so read those from a snapshot. Cheaper than a snapshot
    /// where a snapshot costs round trips (PostgreSQL), or waits for the
    /// writer's commit (the embedded engine).
    fn glance(&self) -> Result<Snapshot, ReadError> {
        self.snapshot()
    }

    /// A glance that also sees every call's own rows answered so far (a
    /// task's row, for a resent task id or a task's poll): the glance itself
    /// where it sees them (PostgreSQL), a snapshot where the writer's open
    /// group may not be committed yet (the embedded engine).
    fn glance_with_calls(&self) -> Result<Snapshot, ReadError> {
        self.glance()
    }

    /// Whether a glance's few point reads wait on nothing but this machine's
    /// memory and disk (the embedded engine), so that async code may make
    /// them in place instead of on a blocking pool; a remote database's
    /// wait on the network and on its connection pool.
    fn glances_are_local(&self) -> bool {
        false
    }

    /// Waits until this process alone runs `episode`'s effects, among every
    /// process sharing the store, and keeps it so until the hold is dropped
    /// (after the call's commit is durable). The embedded engine's file
    /// belongs to one process, whose own lock suffices: its hold is empty.
    /// Blocks; refuses with `EpisodeBusy` after a bounded wait.
    fn hold_episode(&self, _episode: &str) -> Result<EpisodeHold, WriteError> {
        Ok(EpisodeHold::empty())
    }

    /// Runs a write and waits for it. Not for async contexts.
    fn call(&self, op: Op) -> Result<Reply, WriteError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.submit(
            op,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or_else(|_| Err(WriteError::WriterStopped("the writer dropped the request".into())))
    }
}

/// A hold on an episode's effects (`WorldStore::hold_episode`), given up
/// when dropped; dropping never blocks.
#[must_use = "the hold is given up when dropped"]
pub struct EpisodeHold(#[allow(dead_code)] Option<Box<dyn Send>>);

impl EpisodeHold {
    /// A hold that needs nothing given up.
    pub fn empty() -> EpisodeHold {
        EpisodeHold(None)
    }

    /// A hold whose `release` gives it up when dropped.
    pub fn new(release: Box<dyn Send>) -> EpisodeHold {
        EpisodeHold(Some(release))
    }
}

impl std::fmt::Debug for EpisodeHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "EpisodeHold(held)" } else { "EpisodeHold(empty)" })
    }
}

/// What `GET /v1/store` reports of the engine under the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreStatus {
    /// `embedded` (one file) or `postgres`.
    pub engine: &'static str,
    /// The embedded engine's files, the room beside them and its cache bound.
    #[serde(flatten)]
    pub footprint: Option<Footprint>,
    pub checkpoints: u64,
    /// Write batches and the requests they carried since the store opened.
    pub batches: u64,
    pub requests: u64,
    /// Nanoseconds the writer worked since the store opened, and those it
    /// waited for batches' durability point (`WriterStats`).
    pub writer_work_ns: u64,
    pub writer_sync_wait_ns: u64,
    /// The embedded engine's tiered indexes: their young tables, runs and
    /// merge in progress (empty for PostgreSQL, or when a snapshot could not
    /// be read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<crate::tiered::IndexStatus>,
}

/// The sizes of a store's files (0 for a file that is not there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSizes {
    /// The database file's length. The engine extends it ahead of use (by
    /// doubling, up to 4 GiB), and the part never written holds no disk.
    pub file_bytes: u64,
    /// Disk the database file occupies (its allocated blocks).
    pub allocated_bytes: u64,
    pub wal_bytes: u64,
    /// The payload file's length: every object's payload bytes.
    pub payload_bytes: u64,
    /// Disk the payload file occupies, with the space set aside ahead of
    /// its end (up to `PAYLOAD_ALLOCATE_BYTES`).
    pub payload_allocated_bytes: u64,
}

impl FileSizes {
    /// The files of the store at `path`, as they are now.
    pub fn of(path: &Path) -> FileSizes {
        use std::os::unix::fs::MetadataExt;
        let db = std::fs::metadata(path).ok();
        let payloads = std::fs::metadata(payloads_path(path)).ok();
        FileSizes {
            file_bytes: db.as_ref().map_or(0, |m| m.len()),
            allocated_bytes: db.as_ref().map_or(0, |m| m.blocks() * 512),
            wal_bytes: std::fs::metadata(wal_path(path)).map_or(0, |m| m.len()),
            payload_bytes: payloads.as_ref().map_or(0, |m| m.len()),
            payload_allocated_bytes: payloads.as_ref().map_or(0, |m| m.blocks() * 512),
        }
    }

    /// Disk the store's data occupies: the database and the payload file.
    pub fn on_disk(&self) -> u64 {
        self.allocated_bytes + self.payload_allocated_bytes
    }
}

/// What a store occupies: its files, the room left beside them, its cache's bound.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Footprint {
    #[serde(flatten)]
    pub files: FileSizes,
    /// Space on the store's file system this process may still use (`None`: unknown).
    pub free_bytes: Option<u64>,
    /// The page cache's bound. What it holds now is not counted: redb counts
    /// it only with its `cache_metrics` feature, which slowed the writer's
    /// apply by about a tenth in the store bench.
    pub cache_bytes_max: u64,
}
