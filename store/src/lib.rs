//! `world-store`: World's durable, content-addressed store.
//!
//! One redb file holds the objects, the append-only hash-chained log, the worlds
//! and heads, the effect journal and ledger, tasks, sessions and receipts. One
//! process writes (an exclusive, non-waiting lock on `<db>.writer.lock`), through
//! one writer thread that group-commits; any number of read-only handles, in this
//! process or others, read consistent snapshots without waiting.
//!
//! The store knows nothing of HTTP or async runtimes: writes are submitted with a
//! completion callback (`Store::submit`) or run blocking (`Store::call`).

pub mod canonical;
pub mod error;
pub mod export;
pub mod fuzz;
pub mod model;
pub mod ops;
pub mod read;
pub mod refs;
pub mod rows;
pub mod tables;
pub mod verify;
mod writer;

pub use error::{OpenError, ReadError, WriteError};
pub use model::*;
pub use ops::*;
pub use read::{JournalItem, PAGE_DEFAULT, PAGE_MAX, Referrer, Snapshot, page_limit};
pub use refs::{Ref, RefError};
pub use writer::{BATCH_MAX, Done, WRITE_QUEUE_MAX, WriterStats};

use redb::{Builder, ConcurrencyMode, Database, Durability, ReadOnlyDatabase, ReadableDatabase, ReadableTable};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tables::{META, STORE_FORMAT};

/// The path of the writer lock beside a store.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".writer.lock");
    PathBuf::from(s)
}

/// Anything that can take a read snapshot.
pub trait Reads {
    fn snapshot(&self) -> Result<Snapshot, ReadError>;
}

/// The writing handle. Dropping it drains the queue and releases the lock.
pub struct Store {
    path: PathBuf,
    db: Arc<Database>,
    writer: writer::Writer,
    _lock: File,
}

impl Store {
    /// Opens (creating if absent) the store for writing, takes the writer lock,
    /// and runs recovery. `now` stamps recovery outcomes (Unix seconds).
    pub fn open(path: &Path, now: u64) -> Result<(Store, ops::RecoveryReport), OpenError> {
        let engine = |detail: String| OpenError::Engine { path: path.to_path_buf(), detail };
        let lock_file = lock_path(path);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_file)
            .map_err(|e| engine(format!("open lock file {}: {e}", lock_file.display())))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(OpenError::Locked { lock: lock_file }),
            Err(std::fs::TryLockError::Error(e)) => return Err(engine(format!("lock {}: {e}", lock_file.display()))),
        }
        let db = guard_panic(|| Builder::new().set_concurrency_mode(ConcurrencyMode::SingleWriter).create(path))
            .map_err(engine)?
            .map_err(|e| engine(e.to_string()))?;
        let report = initialise(path, &db, now)?;
        let db = Arc::new(db);
        let writer = writer::Writer::start(db.clone());
        Ok((Store { path: path.to_path_buf(), db, writer, _lock: lock }, report))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues a write; `done` runs once its batch is durable (or failed).
    pub fn submit(&self, op: Op, done: Done) {
        self.writer.submit(op, done);
    }

    /// Runs a write and waits for it. Not for async contexts.
    pub fn call(&self, op: Op) -> Result<Reply, WriteError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.submit(
            op,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or_else(|_| Err(WriteError::WriterStopped("the writer dropped the request".into())))
    }

    /// `(batches, requests)` committed so far: the group-commit ratio.
    pub fn writer_stats(&self) -> (u64, u64) {
        let s = &self.writer.stats;
        (s.batches.load(Ordering::Relaxed), s.requests.load(Ordering::Relaxed))
    }

    /// `(applying, committing)` time of the writer so far: where a batch's time goes.
    pub fn writer_time(&self) -> (std::time::Duration, std::time::Duration) {
        let s = &self.writer.stats;
        let d = |a: &std::sync::atomic::AtomicU64| std::time::Duration::from_nanos(a.load(Ordering::Relaxed));
        (d(&s.apply_ns), d(&s.commit_ns))
    }
}

impl Reads for Store {
    fn snapshot(&self) -> Result<Snapshot, ReadError> {
        Snapshot::begin(self.db.as_ref())
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.writer.stop();
    }
}

/// Page cache of a read-only handle. Those handles serve one-shot scans (verify,
/// export, listings): redb keeps every page read in its cache, so a large cache
/// only makes each page read a fresh, zeroed allocation (page faults), while a
/// small one recycles its buffers. Measured on `verify` over 256 MiB: ~1.3-1.5x
/// faster than redb's 1 GiB default, and 32 MiB instead of up to 1 GiB of memory.
pub const READ_ONLY_CACHE_BYTES: usize = 32 << 20;

/// A read-only handle; coexists with a live writer in another process.
pub struct ReadOnlyStore {
    db: ReadOnlyDatabase,
}

impl ReadOnlyStore {
    pub fn open(path: &Path) -> Result<ReadOnlyStore, OpenError> {
        if !path.exists() {
            return Err(OpenError::Missing { path: path.to_path_buf() });
        }
        let engine = |detail: String| OpenError::Engine { path: path.to_path_buf(), detail };
        let db = guard_panic(|| {
            Builder::new()
                .set_cache_size(READ_ONLY_CACHE_BYTES)
                .set_concurrency_mode(ConcurrencyMode::SingleWriter)
                .open_read_only(path)
        })
        .map_err(engine)?
        .map_err(|e| match e {
            redb::DatabaseError::RepairAborted => {
                engine("the store needs recovery; open it once with a writer (worldd serve)".into())
            }
            other => engine(other.to_string()),
        })?;
        let store = ReadOnlyStore { db };
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

impl Reads for ReadOnlyStore {
    fn snapshot(&self) -> Result<Snapshot, ReadError> {
        Snapshot::begin(&self.db)
    }
}

fn check_format(path: &Path, found: Option<u64>) -> Result<(), OpenError> {
    match found {
        Some(STORE_FORMAT) | None => Ok(()),
        Some(found) => Err(OpenError::Format { path: path.to_path_buf(), found, expected: STORE_FORMAT }),
    }
}

/// Creates every table, checks the format, runs recovery: one durable transaction.
fn initialise(path: &Path, db: &Database, now: u64) -> Result<ops::RecoveryReport, OpenError> {
    let engine = |detail: String| OpenError::Engine { path: path.to_path_buf(), detail };
    let mut txn = db.begin_write().map_err(|e| engine(e.to_string()))?;
    txn.set_durability(Durability::Immediate).map_err(|e| engine(e.to_string()))?;
    let report = {
        let mut meta = txn.open_table(META).map_err(|e| engine(e.to_string()))?;
        let found = meta.get("format").map_err(|e| engine(e.to_string()))?.map(|v| v.value());
        check_format(path, found)?;
        if found.is_none() {
            meta.insert("format", STORE_FORMAT).map_err(|e| engine(e.to_string()))?;
        }
        drop(meta);
        let mut w = ops::W::open(&txn).map_err(|e| engine(e.to_string()))?;
        let report = w.recover(now).map_err(|e| engine(e.to_string()))?;
        w.finish().map_err(|e| engine(e.to_string()))?;
        report
    };
    txn.commit().map_err(|e| engine(e.to_string()))?;
    Ok(report)
}

/// The engine may panic on a damaged file; that is a reported failure, not a crash.
pub(crate) fn guard_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        format!("storage engine panicked: {msg}")
    })
}
