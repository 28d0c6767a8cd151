//! The single writer thread: group commit through the write-ahead log.
//!
//! Callers queue requests; the thread drains what is queued (up to
//! `BATCH_MAX`), writes the batch's WAL frames, applies each request's checks
//! and writes inside a redb write transaction while the device writes the
//! frames, fdatasyncs the log, and answers every caller. A batch that wrote
//! only calls' own rows (`Op::is_a_calls_own`) leaves its transaction and
//! its open tables to the batches after it (a group: `HOLD_BATCHES_MAX`,
//! `HOLD_BYTES_MAX`, `HOLD_MAX`): the tables are opened, the deferred
//! writes made and the transaction committed (non-durably) once for them
//! all, those being most of a lone call's writer time. No reply ever
//! precedes the sync of its frames, and no reader that begins after a reply
//! sees the store without its batch: it asks the writer to end the group
//! and waits for its commit (`engine::Visibility`); a glance, which reads
//! no call's own rows, waits only for the others.
//! Checkpoints (durable redb commits) run when `CHECKPOINT_WAL_BYTES` of
//! frames or `CHECKPOINT_INTERVAL` have accumulated, and empty the log.
//!
//! Faults: a full disk refuses the batch as `OutOfSpace`, gives back the space
//! reserve, checkpoints, and leaves the store `Degraded` (reads go on) until a
//! probe finds space again; an engine error after the frames are durable
//! reopens the database and replays the log; anything else (a failed sync)
//! makes the store `Failed`: nothing more is written, and the owner is told.

use crate::backend::{Done, Health, OnFatal, WriterStats};
use crate::engine::{self, Batch, Engine, Fault, Group};
use crate::error::WriteError;
use crate::ops::Op;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most requests waiting for the writer; one more is refused as `Overloaded`.
pub const WRITE_QUEUE_MAX: usize = 16_384;
/// Most requests applied in one transaction.
pub const BATCH_MAX: usize = 4_096;
/// A checkpoint runs once this many bytes of frames wait in the log...
pub const CHECKPOINT_WAL_BYTES: u64 = 4 << 20;
/// ...or once frames have waited this long.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// A batch that wrote only calls' own rows (`Op::is_a_calls_own`) is
/// answered once durable, as every batch is, but the batches after it may
/// join its transaction and its open tables (a group), up to this many in
/// all...
pub const HOLD_BATCHES_MAX: u32 = 64;
/// ...holding up to this many bytes of frames (the payloads the group
/// appends wait in memory until it commits)...
pub const HOLD_BYTES_MAX: u64 = CHECKPOINT_WAL_BYTES;
/// ...for this long after the first was answered, or until a reader waits
/// for one of them: one commit for them all. A snapshot begun after an
/// answer asks for that commit and waits for it; a glance does not.
pub const HOLD_MAX: Duration = Duration::from_millis(40);
/// First and longest wait between two looks for free space on a full disk.
pub const SPACE_PROBE_FIRST: Duration = Duration::from_millis(100);
pub const SPACE_PROBE_MAX: Duration = Duration::from_secs(2);

/// A queued write and who to tell.
pub(crate) struct Request {
    pub op: Op,
    pub done: Done,
}

/// What the writer thread's queue carries: writes, and a reader's word that
/// it waits for a batch of the group the writer runs (`HOLD_MAX`).
// A write is as large as before it had a neighbour; boxing it would cost
// every write an allocation to spare a word no one sends often.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Queued {
    Write(Request),
    Commit,
}

pub(crate) struct Writer {
    queue: Mutex<Option<SyncSender<Queued>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// `short`: the space reserve could not be set aside; start degraded.
    pub(crate) fn start(engine: Engine, on_fatal: Option<OnFatal>, short: bool, checkpoint_bytes: u64) -> Writer {
        let short = short.then(|| {
            engine.set_health(Health::Degraded("the store is out of space: no room for its reserve".into()));
            Short { next_probe: Instant::now(), backoff: SPACE_PROBE_FIRST }
        });
        Writer::spawn("world-store-writer", move |rx| Loop { engine, on_fatal, short, checkpoint_bytes }.run(rx))
    }

    /// The bounded queue (`WRITE_QUEUE_MAX`) and the thread `run` drains it on;
    /// every engine's writer is one.
    pub(crate) fn spawn(name: &str, run: impl FnOnce(Receiver<Queued>) + Send + 'static) -> Writer {
        let (tx, rx) = sync_channel::<Queued>(WRITE_QUEUE_MAX);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(rx))
            .expect("spawn the store writer thread");
        Writer { queue: Mutex::new(Some(tx)), thread: Mutex::new(Some(thread)) }
    }

    pub(crate) fn submit(&self, op: Op, done: Done) {
        let done = caught(done);
        let guard = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = guard.as_ref() else {
            done(Err(WriteError::WriterStopped("the store is closed".into())));
            return;
        };
        let refused = match tx.try_send(Queued::Write(Request { op, done })) {
            Ok(()) => return,
            Err(TrySendError::Full(r)) => (r, WriteError::Overloaded(WRITE_QUEUE_MAX)),
            Err(TrySendError::Disconnected(r)) => (r, WriteError::WriterStopped("the writer thread exited".into())),
        };
        if let (Queued::Write(r), e) = refused {
            (r.done)(Err(e));
        }
    }

    /// A way for readers to ask the writer to commit the group it runs: a
    /// full queue needs no word (the writer is busy, and looks for readers
    /// waiting after every batch), a closed one has no group open.
    pub(crate) fn commit_asker(&self) -> Option<impl Fn() + Send + Sync + 'static> {
        let tx = self.queue.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
        Some(move || {
            let _ = tx.try_send(Queued::Commit);
        })
    }

    /// Stops accepting requests, lets the thread finish what is queued (and
    /// checkpoint, or give up its lease), joins it.
    pub(crate) fn stop(&self) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// `done`, safe for whichever thread answers it (the writer's, the log's,
/// the caller's own on a refusal): a callback that panics is caught, so the
/// others of its batch are answered and that thread lives on.
fn caught(done: Done) -> Done {
    Box::new(move |r| {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| done(r)));
    })
}

/// What the writer thread waits for next.
pub(crate) enum Next {
    /// Up to `BATCH_MAX` requests, in the order they were queued.
    Batch(Vec<Request>),
    /// Nothing came within the wait: time for what is due.
    Idle,
    /// The store is closing and the queue is empty.
    Closed,
}

/// Waits up to `wait` for a request, then takes what else is queued. A
/// reader's word alone (`Queued::Commit`) reads as `Idle`: the writer then
/// ends its group and commits it.
pub(crate) fn next_batch(rx: &Receiver<Queued>, wait: Duration) -> Next {
    let first = match rx.recv_timeout(wait) {
        Ok(Queued::Write(r)) => r,
        Ok(Queued::Commit) | Err(RecvTimeoutError::Timeout) => return Next::Idle,
        Err(RecvTimeoutError::Disconnected) => return Next::Closed,
    };
    let mut batch = Vec::with_capacity(64);
    batch.push(first);
    while batch.len() < BATCH_MAX {
        match rx.try_recv() {
            Ok(Queued::Write(r)) => batch.push(r),
            Ok(Queued::Commit) => {}
            Err(_) => break,
        }
    }
    Next::Batch(batch)
}

/// A batch as the engine takes it, counted in the writer's figures.
fn counted(stats: &WriterStats, batch: Vec<Request>) -> Batch {
    stats.batches.fetch_add(1, Ordering::Relaxed);
    stats.requests.fetch_add(batch.len() as u64, Ordering::Relaxed);
    stats.batch_requests.observe(batch.len() as u64);
    batch.into_iter().map(|r| (r.op, r.done)).unzip()
}

/// A full disk: when to look for space next.
struct Short {
    next_probe: Instant,
    backoff: Duration,
}

struct Loop {
    engine: Engine,
    on_fatal: Option<OnFatal>,
    short: Option<Short>,
    checkpoint_bytes: u64,
}

impl Loop {
    fn run(mut self, rx: Receiver<Queued>) {
        loop {
            match next_batch(&rx, self.idle_wait()) {
                Next::Batch(batch) => self.batch(batch, &rx),
                Next::Idle => {}
                Next::Closed => break,
            }
            let busy = self.engine.shared.stats.busy();
            self.tick();
            busy.end(&self.engine.shared.stats);
        }
        if self.failed().is_none() && self.engine.index_referrers().is_ok() && self.engine.checkpoint().is_ok() {
            let _ = self.engine.trim_payloads();
        }
    }

    fn failed(&self) -> Option<String> {
        match self.engine.health() {
            Health::Failed(reason) => Some(reason),
            _ => None,
        }
    }

    /// How long the thread may sleep: until a checkpoint or a space probe
    /// is due.
    fn idle_wait(&self) -> Duration {
        let mut wait = Duration::from_secs(3600);
        if self.engine.wal_pending() > 0 {
            wait = wait.min(CHECKPOINT_INTERVAL.saturating_sub(self.engine.since_checkpoint()));
        }
        if let Some(s) = &self.short {
            wait = wait.min(s.next_probe.saturating_duration_since(Instant::now()));
        }
        wait.max(Duration::from_micros(50))
    }

    /// Refuses a batch when the store takes no writes, else runs it and
    /// the batches that may join it in one transaction (`Engine::run_group`).
    fn batch(&mut self, batch: Vec<Request>, rx: &Receiver<Queued>) {
        let shared = self.engine.shared.clone();
        let stats = &shared.stats;
        let refusal = if let Some(reason) = self.failed() {
            Some(WriteError::WriterStopped(reason))
        } else if self.short.is_some() && !self.probe_space() {
            Some(WriteError::OutOfSpace(self.degraded_reason()))
        } else {
            None
        };
        let first = counted(stats, batch);
        if let Some(e) = refusal {
            for done in first.1 {
                done(Err(e.clone()));
            }
            return;
        }
        let mut busy = Some(stats.busy());
        // The group waits for its next batch only while it may grow; the
        // wait is not the writer's work.
        let more = |group: &Group| {
            let first_synced = group.first_synced?;
            let may_grow = group.calls_own
                && group.batches < HOLD_BATCHES_MAX
                && group.frame_bytes < HOLD_BYTES_MAX
                && first_synced.elapsed() < HOLD_MAX
                && !shared.visibility.wanted();
            if !may_grow {
                return None;
            }
            if let Some(b) = busy.take() {
                b.end(stats);
            }
            let next = next_batch(rx, HOLD_MAX.saturating_sub(first_synced.elapsed()));
            busy = Some(stats.busy());
            match next {
                Next::Batch(batch) => Some(counted(stats, batch)),
                Next::Idle | Next::Closed => None,
            }
        };
        let ran = self.engine.run_group(first, more);
        if let Some(b) = busy.take() {
            b.end(stats);
        }
        // Those not answered: a batch that failed after its answers is
        // durable, and the fault only stops the ones after it.
        if let Err((fault, unanswered)) = ran {
            let e = self.fault(fault);
            for done in unanswered {
                done(Err(e.clone()));
            }
        }
        if let Some(fault) = self.engine.deferred.take() {
            self.fault(fault);
        }
    }

    fn degraded_reason(&self) -> String {
        match self.engine.health() {
            Health::Degraded(r) | Health::Failed(r) => r,
            Health::Serving => "no space left on the store's device".into(),
        }
    }

    /// Checkpoints when due; looks for space when due.
    fn tick(&mut self) {
        if self.failed().is_some() {
            return;
        }
        if self.short.as_ref().is_some_and(|s| Instant::now() >= s.next_probe) {
            self.probe_space();
        }
        let due = self.engine.wal_pending() >= self.checkpoint_bytes
            || (self.engine.wal_pending() > 0 && self.engine.since_checkpoint() >= CHECKPOINT_INTERVAL);
        if due && let Err(fault) = self.engine.index_referrers().and_then(|()| self.engine.checkpoint()) {
            self.fault(fault);
        }
    }

    /// Turns a fault into the error callers see, and the store's new health.
    fn fault(&mut self, fault: Fault) -> WriteError {
        match fault {
            Fault::OutOfSpace(detail) => {
                let reason = format!("the store is out of space: {detail}");
                self.engine.set_health(Health::Degraded(reason.clone()));
                // Give back the reserve so that the checkpoint that empties the
                // log (and any recovery) can complete on the full disk.
                let _ = self.engine.media.reserve(false);
                if self.engine.wal_pending() > 0 {
                    let _ = self.engine.checkpoint();
                }
                self.short = Some(Short { next_probe: Instant::now() + SPACE_PROBE_FIRST, backoff: SPACE_PROBE_FIRST });
                WriteError::OutOfSpace(reason)
            }
            Fault::Fatal(detail) => {
                let reason = format!("the store's durability is in doubt: {detail}");
                self.engine.set_health(Health::Failed(reason.clone()));
                if let Some(f) = &self.on_fatal {
                    f(&reason);
                }
                WriteError::WriterStopped(reason)
            }
        }
    }

    /// Sets the reserve aside again; when that works, space is back and writes
    /// resume. Returns whether the store takes writes.
    fn probe_space(&mut self) -> bool {
        let Some(short) = &mut self.short else { return true };
        if Instant::now() < short.next_probe {
            return false;
        }
        match self.engine.media.reserve(true) {
            Ok(true) => {
                let caught_up = self.engine.wal_pending() == 0 || self.engine.checkpoint().is_ok();
                if caught_up {
                    self.short = None;
                    self.engine.set_health(Health::Serving);
                    return true;
                }
                let _ = self.engine.media.reserve(false);
            }
            Ok(false) => {}
            Err(e) => {
                let fault = engine::classify(e);
                if let Fault::Fatal(_) = fault {
                    self.fault(fault);
                    return false;
                }
            }
        }
        if let Some(short) = &mut self.short {
            short.backoff = (short.backoff * 2).min(SPACE_PROBE_MAX);
            short.next_probe = Instant::now() + short.backoff;
        }
        false
    }
}
