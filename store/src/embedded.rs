//! The embedded engine's handles: `Store` (the writer lock, the database and
//! its log, the writer thread), `ReadOnlyStore` (snapshots of a store no
//! daemon runs on) and `compact`.

use crate::backend::{Done, FileSizes, Footprint, Health, OnFatal, StoreStatus, WorldStore, WriterStats};
use crate::engine::{self, Engine, Replayed, Shared};
use crate::error::{OpenError, ReadError, guard_panic};
use crate::media::{self, FileMedia, Media, lock_path};
use crate::ops::{Op, RecoveryReport};
use crate::read::RedbSnapshot;
use crate::tables::{META, STORE_FORMAT, upgradable};
use crate::view::{Reads, Snapshot};
use crate::wal;
use crate::writer::{CHECKPOINT_WAL_BYTES, Writer};
use redb::{Builder, ConcurrencyMode, ReadOnlyDatabase, ReadableDatabase};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// How to open a store for writing; the defaults are the files at the path.
#[derive(Default)]
pub struct StoreOptions {
    /// Where the bytes live (tests put faults there).
    pub media: Option<Arc<dyn Media>>,
    /// Told when the store stops writing because its durability is in doubt.
    pub on_fatal: Option<OnFatal>,
    /// The database's page cache; `CACHE_BYTES_DEFAULT` when `None`.
    pub cache_bytes: Option<usize>,
    /// Log bytes that trigger a checkpoint; `CHECKPOINT_WAL_BYTES` when `None`.
    pub checkpoint_wal_bytes: Option<u64>,
}

/// The writer's page cache unless `StoreOptions::cache_bytes` says otherwise.
/// redb's own default is 1 GiB, which a daemon running for months fills: its
/// resident memory then grows with the store. This bounds it.
pub const CACHE_BYTES_DEFAULT: usize = 64 << 20;

/// The writing handle. Dropping it drains the queue, checkpoints and
/// releases the lock.
pub struct Store {
    path: PathBuf,
    cache_bytes: usize,
    shared: Arc<Shared>,
    writer: Writer,
    replayed: Replayed,
    _lock: File,
}

impl Store {
    /// Opens (creating if absent) the store for writing, takes the writer lock,
    /// replays the write-ahead log and runs recovery. `now` stamps recovery
    /// outcomes (Unix seconds).
    pub fn open(path: &Path, now: u64) -> Result<(Store, RecoveryReport), OpenError> {
        Store::open_with(path, now, StoreOptions::default())
    }

    pub fn open_with(path: &Path, now: u64, opts: StoreOptions) -> Result<(Store, RecoveryReport), OpenError> {
        let lock = take_lock(path)?;
        let media = opts.media.unwrap_or_else(|| Arc::new(FileMedia { path: path.to_path_buf() }));
        let shared = Arc::new(Shared::default());
        let checkpoint_bytes = opts.checkpoint_wal_bytes.unwrap_or(CHECKPOINT_WAL_BYTES);
        let cache_bytes = opts.cache_bytes.unwrap_or(CACHE_BYTES_DEFAULT);
        let (mut engine, replayed) = Engine::open(media.clone(), shared.clone(), cache_bytes, 2 * checkpoint_bytes)
            .map_err(|f| f.into_open_error(path))?;
        let report = engine.recover(now).map_err(|f| f.into_open_error(path))?;
        let short = !matches!(media.reserve(true), Ok(true));
        let writer = Writer::start(engine, opts.on_fatal, short, checkpoint_bytes);
        if let Some(ask) = writer.commit_asker() {
            *shared.commit_asker.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(ask));
        }
        Ok((Store { path: path.to_path_buf(), cache_bytes, shared, writer, replayed, _lock: lock }, report))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the open found in the write-ahead log.
    pub fn replayed(&self) -> &Replayed {
        &self.replayed
    }

    /// `(batches, requests)` committed so far: the group-commit ratio.
    pub fn writer_stats(&self) -> (u64, u64) {
        let s = &self.shared.stats;
        (s.batches.load(Ordering::Relaxed), s.requests.load(Ordering::Relaxed))
    }

    /// What the store occupies on disk and in memory now.
    pub fn footprint(&self) -> Footprint {
        let dir = self.path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let free_bytes =
            nix::sys::statvfs::statvfs(dir).ok().map(|v| v.blocks_available().saturating_mul(v.fragment_size()));
        Footprint { files: FileSizes::of(&self.path), free_bytes, cache_bytes_max: self.cache_bytes as u64 }
    }

    /// The tiered indexes as the latest snapshot holds them (none when no
    /// snapshot can be read: the status still answers).
    pub fn index_status(&self) -> Vec<crate::tiered::IndexStatus> {
        let Some(db) = self.shared.db_for_reader() else { return vec![] };
        let read = || -> Result<Vec<crate::tiered::IndexStatus>, redb::Error> {
            let txn = redb::ReadableDatabase::begin_read(db.as_ref())?;
            Ok(vec![
                crate::tiered::status(&txn, &crate::tables::PLACES)?,
                crate::tiered::status(&txn, &crate::tables::SEMANTIC)?,
            ])
        };
        read().unwrap_or_default()
    }

    /// Checkpoints run so far.
    pub fn checkpoints(&self) -> u64 {
        self.shared.stats.checkpoints.load(Ordering::Relaxed)
    }

    /// `(applying, waiting for the log, committing)` time of the writer so
    /// far: where a batch's time goes (checks and inserts and encoding; what
    /// remained of the log's write and sync once the batch was applied;
    /// redb's commit).
    pub fn writer_time(&self) -> (std::time::Duration, std::time::Duration, std::time::Duration) {
        let s = &self.shared.stats;
        let d = |a: &std::sync::atomic::AtomicU64| std::time::Duration::from_nanos(a.load(Ordering::Relaxed));
        (d(&s.apply_ns), d(&s.sync_wait_ns), d(&s.commit_ns))
    }
}

impl WorldStore for Store {
    fn submit(&self, op: Op, done: Done) {
        self.writer.submit(op, done);
    }

    fn glances_are_local(&self) -> bool {
        true
    }

    /// The committed state with every batch answered so far but those of the
    /// writer's open group, which write only calls' own rows, which no glance reads
    /// (`Op::is_a_calls_own`); any other batch is committed at once.
    fn glance(&self) -> Result<Snapshot, ReadError> {
        self.snapshot_of(self.shared.db_for_glance())
    }

    fn glance_with_calls(&self) -> Result<Snapshot, ReadError> {
        self.snapshot()
    }

    fn health(&self) -> Health {
        self.shared.health()
    }

    fn stats(&self) -> &WriterStats {
        &self.shared.stats
    }

    fn status(&self) -> StoreStatus {
        let (batches, requests) = self.writer_stats();
        StoreStatus {
            engine: "embedded",
            footprint: Some(self.footprint()),
            checkpoints: self.checkpoints(),
            batches,
            requests,
            writer_work_ns: self.shared.stats.work_ns.load(Ordering::Relaxed),
            writer_sync_wait_ns: self.shared.stats.sync_wait_ns.load(Ordering::Relaxed),
            indexes: self.index_status(),
        }
    }
}

impl Reads for Store {
    fn snapshot(&self) -> Result<Snapshot, ReadError> {
        self.snapshot_of(self.shared.db_for_reader())
    }
}

impl Store {
    /// A read transaction on `db` (as a reader or a glance waited for it).
    fn snapshot_of(&self, db: Option<std::sync::Arc<redb::Database>>) -> Result<Snapshot, ReadError> {
        match (db, self.shared.payload_file()) {
            (Some(db), Some(payloads)) => Ok(Box::new(RedbSnapshot::begin(db.as_ref(), payloads)?)),
            _ => Err(ReadError::Storage(
                "the database is being reopened after an I/O error, or its last batch is not yet committed; retry"
                    .into(),
            )),
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Its queue closes only with every sender gone.
        self.shared.commit_asker.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.writer.stop();
    }
}

/// Takes the exclusive, non-waiting writer lock beside a store.
fn take_lock(path: &Path) -> Result<File, OpenError> {
    let engine = |detail: String| OpenError::Engine { path: path.to_path_buf(), detail };
    let lock_file = lock_path(path);
    let lock = crate::media::open_private(&lock_file, true, false)
        .map_err(|e| engine(format!("open lock file {}: {e}", lock_file.display())))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(OpenError::Locked { lock: lock_file }),
        Err(std::fs::TryLockError::Error(e)) => Err(engine(format!("lock {}: {e}", lock_file.display()))),
    }
}

/// What `compact` did: the database file's size before and after, and what
/// the open that preceded it recovered (as `serve` would have).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compacted {
    pub before: u64,
    pub after: u64,
    /// Frames of the write-ahead log replayed into the database first.
    pub replayed_frames: u64,
    pub recovery: RecoveryReport,
}

/// Gives the database's free pages back to the file system, offline: the log
/// is replayed and recovery runs first (an open and a clean close, as `serve`
/// would), then the engine moves pages down and truncates the file, under the
/// writer lock. A store a daemon runs on is refused (`Locked`), a missing one
/// is `Missing`.
pub fn compact(path: &Path) -> Result<Compacted, OpenError> {
    if !path.exists() {
        return Err(OpenError::Missing { path: path.to_path_buf() });
    }
    let (store, recovery) = Store::open(path, unix_now())?;
    let replayed_frames = store.replayed().frames_applied;
    drop(store);
    let _lock = take_lock(path)?;
    // A daemon may have started, written and died between the close and the
    // lock: its frames are not in the database, and compaction must not run
    // ahead of them.
    if unplayed_frames(path)? {
        return Err(OpenError::Engine {
            path: path.to_path_buf(),
            detail: "the write-ahead log gained frames while compaction began (a daemon ran on the store meanwhile); run compact again".into(),
        });
    }
    let before = FileSizes::of(path).file_bytes;
    engine::compact(&FileMedia { path: path.to_path_buf() }).map_err(|f| f.into_open_error(path))?;
    Ok(Compacted { before, after: FileSizes::of(path).file_bytes, replayed_frames, recovery })
}

/// The format of the store at `path` when a writer's open will upgrade it
/// in place first (one transaction that rewrites what the format moved, so
/// a while on a large store): for telling the operator beforehand. `None`
/// when it is of this binary's format, absent, or cannot be read without a
/// writer (after a crash, or while a daemon runs on it).
pub fn pending_upgrade(path: &Path) -> Option<u64> {
    match ReadOnlyStore::open_file(path) {
        Err(OpenError::NeedsUpgrade { found, .. }) => Some(found),
        _ => None,
    }
}

/// Whether the log beside `path` holds frames the database may lack (a
/// writer stopped without its closing checkpoint). No log, no frames; the log
/// is not created by asking.
fn unplayed_frames(path: &Path) -> Result<bool, OpenError> {
    if !media::wal_path(path).exists() {
        return Ok(false);
    }
    let media = FileMedia { path: path.to_path_buf() };
    media
        .wal()
        .and_then(|log| wal::has_frames(log.as_ref()))
        .map_err(|e| OpenError::Engine { path: path.to_path_buf(), detail: format!("read the write-ahead log: {e}") })
}

/// Page cache of a read-only handle. Those handles serve one-shot scans (verify,
/// export, listings): redb keeps every page read in its cache, so a large cache
/// only makes each page read a fresh, zeroed allocation (page faults), while a
/// small one recycles its buffers. Measured on `verify` over 256 MiB: ~1.3-1.5x
/// faster than redb's 1 GiB default, and 32 MiB instead of up to 1 GiB of memory.
pub const READ_ONLY_CACHE_BYTES: usize = 32 << 20;

/// A read-only handle on a store no daemon is running on. When the last
/// writer stopped without a checkpoint (a crash), opening recovers first, as
/// the next `serve` would: the write-ahead log holds acknowledged writes.
pub struct ReadOnlyStore {
    db: ReadOnlyDatabase,
    payloads: std::sync::Arc<dyn crate::media::WalIo>,
}

impl ReadOnlyStore {
    pub fn open(path: &Path) -> Result<ReadOnlyStore, OpenError> {
        if !path.exists() {
            return Err(OpenError::Missing { path: path.to_path_buf() });
        }
        drop(take_lock(path)?);
        if unplayed_frames(path)? {
            Store::open(path, unix_now())?;
        }
        match ReadOnlyStore::open_file(path) {
            Err(OpenError::NeedsRecovery { .. }) => {
                Store::open(path, unix_now())?;
                ReadOnlyStore::open_file(path)
            }
            other => other,
        }
    }

    fn open_file(path: &Path) -> Result<ReadOnlyStore, OpenError> {
        let engine = |detail: String| OpenError::Engine { path: path.to_path_buf(), detail };
        let db = guard_panic(|| {
            Builder::new()
                .set_cache_size(READ_ONLY_CACHE_BYTES)
                .set_concurrency_mode(ConcurrencyMode::ExclusiveWriter)
                .open_read_only(path)
        })
        .map_err(engine)?
        .map_err(|e| match e {
            redb::DatabaseError::RepairAborted => OpenError::NeedsRecovery { path: path.to_path_buf() },
            other => engine(other.to_string()),
        })?;
        let payloads = media::read_payloads(path).map_err(|e| engine(format!("open the payload file: {e}")))?;
        let store = ReadOnlyStore { db, payloads };
        check_format(
            path,
            store
                .db
                .begin_read()
                .ok()
                .and_then(|t| t.open_table(META).ok())
                .and_then(|t| t.get("format").ok().flatten().map(|v| v.value())),
        )?;
        Ok(store)
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl ReadOnlyStore {
    /// A snapshot as the embedded engine's own, for the readers that walk its tables.
    pub(crate) fn begin(&self) -> Result<RedbSnapshot, ReadError> {
        RedbSnapshot::begin(&self.db, self.payloads.clone())
    }
}

impl Reads for ReadOnlyStore {
    fn snapshot(&self) -> Result<Snapshot, ReadError> {
        Ok(Box::new(self.begin()?))
    }
}

fn check_format(path: &Path, found: Option<u64>) -> Result<(), OpenError> {
    match found {
        Some(STORE_FORMAT) | None => Ok(()),
        Some(found) if upgradable(found) => {
            Err(OpenError::NeedsUpgrade { path: path.to_path_buf(), found, expected: STORE_FORMAT })
        }
        Some(found) => Err(OpenError::Format { path: path.to_path_buf(), found, expected: STORE_FORMAT }),
    }
}
