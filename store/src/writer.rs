//! The single writer thread and group commit.
//!
//! Callers queue requests; the thread drains what is queued (up to `BATCH_MAX`),
//! applies each request's checks and writes inside one write transaction, commits
//! once with `Durability::Immediate`, and only then answers every caller. No reply
//! ever precedes the fsync of its batch.

use crate::error::{WriteError, storage};
use crate::ops::{Op, Reply, W};
use redb::{Database, Durability};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Most requests waiting for the writer; one more is refused as `Overloaded`.
pub const WRITE_QUEUE_MAX: usize = 16_384;
/// Most requests applied in one transaction.
pub const BATCH_MAX: usize = 4_096;

/// Called exactly once with the request's result, on the writer thread, after
/// its batch is durable (or failed). Keep it short: send on a channel.
pub type Done = Box<dyn FnOnce(Result<Reply, WriteError>) + Send>;

struct Request {
    op: Op,
    done: Done,
}

#[derive(Default)]
pub struct WriterStats {
    pub batches: AtomicU64,
    pub requests: AtomicU64,
    /// Nanoseconds spent applying requests (checks and inserts).
    pub apply_ns: AtomicU64,
    /// Nanoseconds spent committing (page flush and fsyncs).
    pub commit_ns: AtomicU64,
}

pub(crate) struct Writer {
    queue: Mutex<Option<SyncSender<Request>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    pub(crate) stats: Arc<WriterStats>,
}

impl Writer {
    pub(crate) fn start(db: Arc<Database>) -> Writer {
        let (tx, rx) = sync_channel::<Request>(WRITE_QUEUE_MAX);
        let stats = Arc::new(WriterStats::default());
        let thread_stats = stats.clone();
        let thread = std::thread::Builder::new()
            .name("world-store-writer".into())
            .spawn(move || run(db, rx, thread_stats))
            .expect("spawn the store writer thread");
        Writer { queue: Mutex::new(Some(tx)), thread: Mutex::new(Some(thread)), stats }
    }

    pub(crate) fn submit(&self, op: Op, done: Done) {
        let guard = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = guard.as_ref() else {
            done(Err(WriteError::WriterStopped("the store is closed".into())));
            return;
        };
        match tx.try_send(Request { op, done }) {
            Ok(()) => {}
            Err(TrySendError::Full(r)) => (r.done)(Err(WriteError::Overloaded(WRITE_QUEUE_MAX))),
            Err(TrySendError::Disconnected(r)) => {
                (r.done)(Err(WriteError::WriterStopped("the writer thread exited".into())))
            }
        }
    }

    /// Stops accepting requests, lets the thread finish what is queued, joins it.
    pub(crate) fn stop(&self) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

fn run(db: Arc<Database>, rx: Receiver<Request>, stats: Arc<WriterStats>) {
    let mut stopped: Option<String> = None;
    while let Ok(first) = rx.recv() {
        let mut batch = Vec::with_capacity(64);
        batch.push(first);
        while batch.len() < BATCH_MAX {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        if let Some(reason) = &stopped {
            for r in batch {
                (r.done)(Err(WriteError::WriterStopped(reason.clone())));
            }
            continue;
        }
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats.requests.fetch_add(batch.len() as u64, Ordering::Relaxed);
        if let Err(e) = commit_batch(&db, batch, &stats) {
            // An engine or fsync failure is fatal for this writer: nothing is
            // retried on a store whose durability is in doubt.
            stopped = Some(e.to_string());
        }
    }
}

fn commit_batch(db: &Database, batch: Vec<Request>, stats: &WriterStats) -> Result<(), WriteError> {
    let (ops, dones): (Vec<Op>, Vec<Done>) = batch.into_iter().map(|r| (r.op, r.done)).unzip();
    match apply_batch(db, ops, stats) {
        Ok(results) => {
            debug_assert_eq!(results.len(), dones.len());
            for (done, r) in dones.into_iter().zip(results) {
                done(r);
            }
            Ok(())
        }
        Err(e) => {
            for done in dones {
                done(Err(e.clone()));
            }
            Err(e)
        }
    }
}

/// One transaction for the whole batch; dropping it on an error aborts it.
fn apply_batch(db: &Database, ops: Vec<Op>, stats: &WriterStats) -> Result<Vec<Result<Reply, WriteError>>, WriteError> {
    let started = std::time::Instant::now();
    let mut txn = db.begin_write().map_err(storage)?;
    txn.set_durability(Durability::Immediate).map_err(storage)?;
    let mut results = Vec::with_capacity(ops.len());
    {
        let mut w = W::open(&txn)?;
        for op in ops {
            let r = w.apply(op);
            if let Err(WriteError::Storage(e)) = &r {
                return Err(WriteError::Storage(e.clone()));
            }
            results.push(r);
        }
        w.finish()?;
    }
    let applied = std::time::Instant::now();
    txn.commit().map_err(storage)?;
    stats.apply_ns.fetch_add((applied - started).as_nanos() as u64, Ordering::Relaxed);
    stats.commit_ns.fetch_add(applied.elapsed().as_nanos() as u64, Ordering::Relaxed);
    Ok(results)
}
