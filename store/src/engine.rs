//! The database and its log, as the writer drives them: open and replay,
//! commit a batch through the log, checkpoint, reopen after an engine error.

use crate::backend::{Done, Health, WriterStats};
use crate::error::{OpenError, WriteError, guard_panic};
use crate::media::{Media, is_out_of_space};
use crate::ops::{Op, RecoveryReport, Reply, W};
use crate::payloads::{META_PAYLOAD_LEN, PayloadFile};
use crate::tables::{
    META, META_WAL_SEQ, STORE_FORMAT, STORE_FORMAT_BEFORE_EPISODES, STORE_FORMAT_BEFORE_OBJECT_HASHES,
    STORE_FORMAT_BEFORE_PAYLOAD_FILE, STORE_FORMAT_BEFORE_PLACES, STORE_FORMAT_BEFORE_RECORD_PLACES,
    STORE_FORMAT_BEFORE_REFERRERS_BEHIND, STORE_FORMAT_BEFORE_TARGET_PLACES, STORE_FORMAT_BEFORE_TASKS_BY_ID,
    upgradable,
};
use crate::wal::{AppendError, Frame, FrameBuilder, Wal, WalScan};
use redb::ReadableTable;
use redb::{Builder, ConcurrencyMode, Database, Durability, ReadableDatabase};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Attempts to reopen the database after an engine error (a reader may still
/// hold the old handle for a moment), `REOPEN_WAIT` apart.
const REOPEN_ATTEMPTS: u32 = 50;
const REOPEN_WAIT: Duration = Duration::from_millis(20);
/// How long a reader waits for a reopen before it is refused.
const READER_REOPEN_WAIT: Duration = Duration::from_secs(2);

/// Shared between the writer and the store's readers.
#[derive(Default)]
pub(crate) struct Shared {
    /// `None` while the database is being reopened.
    pub db: RwLock<Option<Arc<Database>>>,
    /// The payload file the database's object rows point into (set with `db`).
    pub payload_file: RwLock<Option<Arc<dyn crate::media::WalIo>>>,
    pub health: Mutex<Option<Health>>,
    pub stats: WriterStats,
    pub visibility: Visibility,
    /// Asks the writer to end the group it runs and commit it (set once it
    /// runs, taken before it stops, so that its queue can close).
    pub commit_asker: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

/// A batch is answered once its frames are durable and its requests
/// decided, then committed to the database; a reader that begins after an
/// answer waits for that commit, so no one reads a state older than one they
/// were told of.
#[derive(Default)]
pub(crate) struct Visibility {
    /// The last log frame of the last batch answered.
    answered: AtomicU64,
    /// The same, of the last batch answered that wrote more than calls'
    /// own rows (`Op::is_a_calls_own`): what a glance must see.
    answered_shared: AtomicU64,
    /// The last log frame readers can see.
    visible: AtomicU64,
    /// Readers waiting for an answered batch: the writer then ends its
    /// group and commits it at once.
    waiting: std::sync::atomic::AtomicUsize,
    lock: Mutex<()>,
    changed: Condvar,
}

impl Visibility {
    /// Called before the batch ending at `last` is answered; `calls_own`:
    /// it wrote only calls' own rows.
    fn answering(&self, last: u64, calls_own: bool) {
        self.answered.store(last, Ordering::Release);
        if !calls_own {
            self.answered_shared.store(last, Ordering::Release);
        }
    }

    /// Called once the batch ending at `last` is committed (or the database
    /// reopened with it, or given up on: readers then find no database).
    fn reached(&self, last: u64) {
        self.visible.store(last, Ordering::Release);
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.changed.notify_all();
    }

    /// Waits until every batch answered so far is visible; `false` when
    /// `deadline` passed first. No lock is taken when nothing is pending.
    /// (`ask` tells the writer that a reader waits, once.)
    fn wait(&self, deadline: Instant, ask: impl FnOnce()) -> bool {
        self.wait_for(self.answered.load(Ordering::Acquire), deadline, ask)
    }

    /// Waits until every batch answered so far that wrote more than calls'
    /// own rows is visible (committed at once, so never for long).
    fn wait_shared(&self, deadline: Instant) -> bool {
        self.wait_for(self.answered_shared.load(Ordering::Acquire), deadline, || {})
    }

    fn wait_for(&self, answered: u64, deadline: Instant, ask: impl FnOnce()) -> bool {
        if self.visible.load(Ordering::Acquire) >= answered {
            return true;
        }
        // Counted before asking: the writer, woken, sees a reader waits.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        ask();
        let mut held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen = true;
        while self.visible.load(Ordering::Acquire) < answered {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                seen = false;
                break;
            };
            held = self.changed.wait_timeout(held, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        seen
    }

    /// Whether a reader waits for a batch the writer answered.
    pub(crate) fn wanted(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }
}

impl Shared {
    pub(crate) fn db(&self) -> Option<Arc<Database>> {
        self.db.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The database with every answered batch in it, waiting out the
    /// commit of the last one and a reopen (together bounded by
    /// `READER_REOPEN_WAIT`).
    pub(crate) fn db_for_reader(&self) -> Option<Arc<Database>> {
        self.db_seeing(false)
    }

    /// As `db_for_reader`, for a glance: every batch answered that wrote
    /// more than calls' own rows is in it, not always the calls' own ones
    /// of the group the writer has not committed yet.
    pub(crate) fn db_for_glance(&self) -> Option<Arc<Database>> {
        self.db_seeing(true)
    }

    fn db_seeing(&self, glance: bool) -> Option<Arc<Database>> {
        let deadline = Instant::now() + READER_REOPEN_WAIT;
        let ask = || {
            if let Some(ask) = self.commit_asker.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                ask();
            }
        };
        let seen = if glance { self.visibility.wait_shared(deadline) } else { self.visibility.wait(deadline, ask) };
        if !seen {
            return None;
        }
        loop {
            if let Some(db) = self.db() {
                return Some(db);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(REOPEN_WAIT / 4);
        }
    }

    /// The payload file, once the database is open.
    pub(crate) fn payload_file(&self) -> Option<Arc<dyn crate::media::WalIo>> {
        self.payload_file.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn health(&self) -> Health {
        self.health.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or(Health::Serving)
    }
}

/// Why a batch or a checkpoint could not be made durable.
#[derive(Debug)]
pub(crate) enum Fault {
    /// The disk is full: nothing of the batch is durable; later writes may succeed.
    OutOfSpace(String),
    /// Durability is in doubt (a failed sync, an engine that cannot be reopened).
    Fatal(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::OutOfSpace(detail) | Fault::Fatal(detail) => f.write_str(detail),
        }
    }
}

pub(crate) fn classify(e: std::io::Error) -> Fault {
    if is_out_of_space(&e) { Fault::OutOfSpace(e.to_string()) } else { Fault::Fatal(e.to_string()) }
}

fn redb_fault(e: impl Into<redb::Error>) -> Fault {
    match e.into() {
        redb::Error::Io(io) => classify(io),
        other => Fault::Fatal(other.to_string()),
    }
}

/// What opening found in the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    pub scan: WalScan,
    /// Frames applied to the database (the others it already contained).
    pub frames_applied: u64,
}

pub(crate) struct Engine {
    pub(crate) shared: Arc<Shared>,
    pub(crate) media: Arc<dyn Media>,
    log: Wal,
    payloads: PayloadFile,
    next_seq: u64,
    last_checkpoint: Instant,
    cache_bytes: usize,
    wal_prealloc: u64,
    /// A fault met after a batch was already durable: it stops later batches.
    pub(crate) deferred: Option<Fault>,
    /// What the writer keeps across its transactions (new after a reopen).
    kept: crate::ops::Kept,
}

impl Engine {
    /// Opens the database (refusing another format), reads the log and
    /// replays the frames the database does not contain.
    pub(crate) fn open(
        media: Arc<dyn Media>,
        shared: Arc<Shared>,
        cache_bytes: usize,
        wal_prealloc: u64,
    ) -> Result<(Engine, Replayed), OpenFailure> {
        let (wal, payloads, next_seq, replayed) = open_parts(media.as_ref(), &shared, cache_bytes, wal_prealloc)?;
        let engine = Engine {
            shared,
            media,
            log: wal,
            payloads,
            next_seq,
            last_checkpoint: Instant::now(),
            cache_bytes,
            wal_prealloc,
            deferred: None,
            kept: Default::default(),
        };
        Ok((engine, replayed))
    }

    /// The open-time transaction: creates what is missing, records the
    /// format, runs intent and task recovery; durable, so it is a checkpoint.
    pub(crate) fn recover(&mut self, now: u64) -> Result<RecoveryReport, OpenFailure> {
        let db = self.shared.db().ok_or_else(|| OpenFailure::Engine("the database is not open".into()))?;
        let engine = |e: &dyn std::fmt::Display| OpenFailure::Engine(e.to_string());
        let mut txn = db.begin_write().map_err(|e| engine(&e))?;
        txn.set_durability(Durability::Immediate).map_err(|e| engine(&e))?;
        let (report, appended) = {
            let mut meta = txn.open_table(META).map_err(|e| engine(&e))?;
            let was = meta.get("format").map_err(|e| engine(&e))?.map(|v| v.value());
            meta.insert("format", STORE_FORMAT).map_err(|e| engine(&e))?;
            meta.insert(META_WAL_SEQ, self.next_seq - 1).map_err(|e| engine(&e))?;
            drop(meta);
            debug_assert!(was.is_none_or(|f| f == STORE_FORMAT), "upgraded before the log was replayed");
            let mut w = W::open(&txn, self.payloads.io().as_ref()).map_err(|e| engine(&e))?;
            let report = crate::ops::recover(&mut w, now).map_err(|e| engine(&e))?;
            let appended = w.finish().map_err(|e| engine(&e))?;
            (report, appended)
        };
        self.payloads.sync().map_err(|e| engine(&format!("syncing the payload file: {e}")))?;
        txn.commit().map_err(|e| engine(&e))?;
        if let Some(end) = appended {
            self.payloads.advance(end);
        }
        let next = self.next_seq;
        self.log.reset(next).map_err(|e| engine(&e))?;
        self.last_checkpoint = Instant::now();
        Ok(report)
    }

    pub(crate) fn health(&self) -> Health {
        self.shared.health()
    }

    pub(crate) fn set_health(&self, h: Health) {
        *self.shared.health.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
    }

    pub(crate) fn wal_pending(&self) -> u64 {
        self.log.pending_bytes
    }

    pub(crate) fn since_checkpoint(&self) -> Duration {
        self.last_checkpoint.elapsed()
    }

    fn db(&mut self) -> Result<Arc<Database>, Fault> {
        match self.shared.db() {
            Some(db) => Ok(db),
            None => {
                self.reopen()?;
                self.shared.db().ok_or_else(|| Fault::Fatal("the database did not reopen".into()))
            }
        }
    }

    /// Journals and applies a group of batches in one write transaction
    /// through one set of open tables (`W`): `first`, then each batch `more`
    /// gives while it sees the group may grow (the writer: calls' own rows
    /// only, `writer::HOLD_BATCHES_MAX`, `HOLD_BYTES_MAX`, `HOLD_MAX`, no reader
    /// waiting). Each batch's frames are written and the device asked to
    /// start on them before the batch is applied (a frame holds the
    /// requests, not their effects), then synced, and its callers answered:
    /// no one before the sync. What no result depends on (`W::finish`:
    /// payloads, task rows, episode summaries, the indexes' steps) is
    /// written once, after the group's last batch, and one commit makes the
    /// group visible: readers that must see an answered batch ask for it
    /// (`Visibility`). A failure after answers reopens the database from the
    /// log, which has every answered batch. An error comes with the callers
    /// of the batch it stopped, not answered.
    pub(crate) fn run_group(
        &mut self,
        first: Batch,
        more: impl FnMut(&Group) -> Option<Batch>,
    ) -> Result<(), (Fault, Vec<Done>)> {
        let db = match self.db() {
            Ok(db) => db,
            Err(fault) => return Err((fault, first.1)),
        };
        let txn = match begin_nondurable(&db) {
            Ok(txn) => txn,
            Err(fault) => return Err((fault, first.1)),
        };
        let io = self.payloads.io().clone();
        let mut kept = std::mem::take(&mut self.kept);
        // Nothing is journaled yet when the tables do not open.
        let ended = match W::open_with(&txn, &mut kept, io.as_ref()) {
            Ok(w) => self.fill_group(w, first, more),
            Err(e) => Ended::Empty(Some((write_fault(e), first.1))),
        };
        self.kept = kept;
        match ended {
            Ended::Finished { appended, last, synced, stopped } => {
                let committed = self.commit_group(txn, appended, last, synced);
                with_stopped(committed, stopped)
            }
            Ended::Empty(stopped) => with_stopped(Ok(()), stopped),
            Ended::LogFailed { error, unanswered, answered } => {
                drop(txn);
                drop(db);
                if answered {
                    // The transaction held answered batches: it is dropped,
                    // and the database catches up from the log, which has
                    // them (not the batch whose write failed).
                    if let Err(fault) = self.reopen() {
                        return Err((fault, unanswered));
                    }
                    self.shared.visibility.reached(self.next_seq.saturating_sub(1));
                }
                Err((log_fault(error), unanswered))
            }
            // Answered, so it happened: the database catches up from the
            // log, opened again once this handle (which locks the file) is gone.
            Ended::Failed { fault, last, stopped } => {
                drop(txn);
                drop(db);
                let caught_up = self.caught_up(fault, last);
                with_stopped(caught_up, stopped)
            }
            // The engine failed before the batch was decided, and the log
            // has it: only a restart's replay can tell its results.
            Ended::Undecided(fault, dones) => {
                Err((Fault::Fatal(format!("applying a journaled batch: {fault}")), dones))
            }
        }
    }

    /// The batches of a group, applied through `w`, then its deferred writes.
    fn fill_group(&mut self, mut w: W<'_>, first: Batch, mut more: impl FnMut(&Group) -> Option<Batch>) -> Ended {
        let mut group = Group { batches: 0, first_synced: None, calls_own: true, frame_bytes: 0 };
        let mut applied: Option<(u64, Instant)> = None;
        let mut batch = first;
        loop {
            let (ops, dones) = batch;
            match self.journal_and_apply(&mut w, ops, dones, &mut group.frame_bytes) {
                Step::Nothing => {}
                Step::Applied { last, synced, calls_own } => {
                    applied = Some((last, synced));
                    group.batches += 1;
                    group.first_synced.get_or_insert(synced);
                    group.calls_own &= calls_own;
                }
                Step::Stopped(fault, dones) => {
                    let Some((last, synced)) = applied else { return Ended::Empty(Some((fault, dones))) };
                    return finished(w, last, synced, Some((fault, dones)));
                }
                Step::LogFailed(error, unanswered) => {
                    return Ended::LogFailed { error, unanswered, answered: applied.is_some() };
                }
                Step::Undecided(fault, dones) => return Ended::Undecided(fault, dones),
            }
            match more(&group) {
                Some(next) => batch = next,
                None => break,
            }
        }
        match applied {
            Some((last, synced)) => finished(w, last, synced, None),
            None => Ended::Empty(None),
        }
    }

    /// One batch of a group: its frames written, applied through `w` while
    /// the device writes them, synced, answered.
    fn journal_and_apply(&mut self, w: &mut W<'_>, ops: Vec<Op>, dones: Vec<Done>, reserved: &mut u64) -> Step {
        let started = Instant::now();
        let mut frames = FrameBuilder::new(self.next_seq);
        // A request that cannot be journaled is not applied either.
        let ops: Vec<Option<Op>> = ops.into_iter().map(|op| frames.push(&op).then_some(op)).collect();
        let Some(last) = frames.last_seq() else {
            for done in dones {
                done(Err(too_large()));
            }
            return Step::Nothing;
        };
        // The frames hold every payload the batch may append: room for them
        // is set aside before anything is durable, so applying a journaled
        // batch cannot meet a full disk in the payload file.
        *reserved += frames.bytes();
        if let Err(e) = self.payloads.reserve(*reserved) {
            return Step::Stopped(classify(e), dones);
        }
        let (frames, link) = frames.seal(self.log.link);
        let calls_own = ops.iter().flatten().all(Op::is_a_calls_own);
        // The device writes the frames while the batch is applied; the sync
        // after it waits for what is left, and for the device's cache.
        let written = match self.log.write(&frames) {
            Ok(written) => written,
            Err(e) => return Step::LogFailed(e, dones),
        };
        let wrote = started.elapsed();
        let applied = apply_ops(w, ops);
        let applied_at = Instant::now();
        let logged = self.log.sync(written, link);
        let synced = Instant::now();
        // Not durable, so no one was answered: the callers are told why.
        if let Err(e) = logged {
            return Step::LogFailed(e, dones);
        }
        let stats = &self.shared.stats;
        stats.log_sync_seconds.observe_duration(wrote + (synced - applied_at));
        stats.apply_ns.fetch_add((applied_at - started).as_nanos() as u64, Ordering::Relaxed);
        stats.sync_wait_ns.fetch_add((synced - applied_at).as_nanos() as u64, Ordering::Relaxed);
        match applied {
            Ok(answers) => {
                self.next_seq = last + 1;
                self.answer(last, calls_own, started, dones, answers);
                Step::Applied { last, synced, calls_own }
            }
            Err(fault) => Step::Undecided(fault, dones),
        }
    }

    /// Tells the callers of a batch that is durable and decided, up to
    /// frame `last`, what became of their requests.
    fn answer(&self, last: u64, calls_own: bool, started: Instant, dones: Vec<Done>, answers: Answers) {
        debug_assert_eq!(dones.len(), answers.len());
        self.shared.stats.commit_seconds.observe_duration(started.elapsed());
        self.shared.visibility.answering(last, calls_own);
        // Callbacks come from `Writer::submit`, which catches their panics.
        for (done, r) in dones.into_iter().zip(answers) {
            done(r);
        }
    }

    /// Commits a group's transaction for readers. Its frames are durable, so
    /// its batches happened whatever this meets: an engine error brings the
    /// database up to the log by a reopen (which learns the payload file's
    /// end from it), and a full disk stops the batches after it.
    fn commit_group(
        &mut self,
        txn: redb::WriteTransaction,
        appended: Option<u64>,
        last: u64,
        synced: Instant,
    ) -> Result<(), Fault> {
        let committed = match txn.commit() {
            Ok(()) => {
                self.shared.stats.published.fetch_add(1, Ordering::Relaxed);
                if let Some(end) = appended {
                    self.payloads.advance(end);
                }
                self.shared.visibility.reached(last);
                Ok(())
            }
            Err(e) => self.caught_up(redb_fault(e), last),
        };
        self.shared.stats.commit_ns.fetch_add(synced.elapsed().as_nanos() as u64, Ordering::Relaxed);
        committed
    }

    /// After an engine error on a batch that is durable in the log (up to
    /// frame `last`): the database is reopened, which replays the log, and a
    /// full disk stops the batches after it.
    fn caught_up(&mut self, fault: Fault, last: u64) -> Result<(), Fault> {
        let reopened = self.reopen();
        if reopened.is_ok()
            && let Fault::OutOfSpace(_) = fault
        {
            self.deferred = Some(fault);
        }
        // Also when the reopen failed: readers then find no database and
        // are refused rather than kept waiting.
        self.shared.visibility.reached(last);
        reopened
    }

    /// Indexes every referrer the batches left behind (`referrers`), in a
    /// transaction the next checkpoint makes durable: run before the
    /// checkpoints of an idle moment and of a clean close, so that a store
    /// at rest has its whole index.
    pub(crate) fn index_referrers(&mut self) -> Result<(), Fault> {
        let db = self.db()?;
        let txn = begin_nondurable(&db)?;
        let mut w = W::open_with(&txn, &mut self.kept, self.payloads.io().as_ref()).map_err(write_fault)?;
        w.index_referrers(0).map_err(write_fault)?;
        // The indexes' step, paced by the rows the pass wrote.
        w.finish().map_err(write_fault)?;
        txn.commit().map_err(redb_fault)
    }

    /// A durable commit of everything so far; then the log is emptied.
    pub(crate) fn checkpoint(&mut self) -> Result<(), Fault> {
        let started = Instant::now();
        let db = self.db()?;
        let mut txn = db.begin_write().map_err(redb_fault)?;
        txn.set_durability(Durability::Immediate).map_err(redb_fault)?;
        record_seq(&txn, self.next_seq - 1)?;
        // A durable database never names payload bytes the disk may lack.
        self.payloads.sync().map_err(|e| Fault::Fatal(format!("syncing the payload file: {e}")))?;
        if let Err(e) = txn.commit() {
            let fault = redb_fault(e);
            drop(db);
            // The handle is spent after an I/O error; the log still has every frame.
            self.reopen()?;
            return Err(fault);
        }
        let next = self.next_seq;
        self.log.reset(next).map_err(classify)?;
        self.last_checkpoint = Instant::now();
        self.shared.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.shared.stats.checkpoint_seconds.observe_duration(started.elapsed());
        Ok(())
    }

    /// Gives back the room made ahead of the payload file's end (a clean
    /// close: the file then holds exactly the store's payloads).
    pub(crate) fn trim_payloads(&mut self) -> std::io::Result<()> {
        self.payloads.trim()
    }

    /// Closes the database and opens it again from the files: redb's last
    /// durable commit, then every frame of the log after it.
    fn reopen(&mut self) -> Result<(), Fault> {
        let held = self.shared.db.write().unwrap_or_else(|p| p.into_inner()).take();
        // What the writer kept describes the handle it lets go of.
        self.kept = Default::default();
        self.let_go(held)
            .map_err(|e| Fault::Fatal(format!("syncing the payload file before reopening the database: {e}")))?;
        let mut last = String::new();
        for _ in 0..REOPEN_ATTEMPTS {
            match open_parts(self.media.as_ref(), &self.shared, self.cache_bytes, self.wal_prealloc) {
                Ok((wal, payloads, next_seq, _)) => {
                    self.log = wal;
                    self.payloads = payloads;
                    self.next_seq = next_seq;
                    return Ok(());
                }
                Err(OpenFailure::Format(f)) => return Err(Fault::Fatal(format!("the store's format became {f}"))),
                Err(OpenFailure::Engine(e)) => last = e,
            }
            std::thread::sleep(REOPEN_WAIT);
        }
        Err(Fault::Fatal(format!("reopening the database after an I/O error failed: {last}")))
    }

    /// Gives up a hold on the database that may be the last one. Closing a
    /// handle makes its non-durable commits durable (redb promotes them at
    /// close), and their object rows name payloads that only a checkpoint
    /// syncs: the payload file goes to disk first. A handle whose payloads
    /// could not be synced is never closed (its batches are in the log,
    /// which the next open replays).
    fn let_go(&self, held: Option<Arc<Database>>) -> std::io::Result<()> {
        if let Err(e) = self.payloads.sync() {
            std::mem::forget(held);
            return Err(e);
        }
        Ok(())
    }
}

/// An engine that stops without its closing checkpoint (a failed store, a
/// checkpoint that failed) leaves a handle whose close makes commits durable:
/// see `let_go`. Readers keep the handle meanwhile.
impl Drop for Engine {
    fn drop(&mut self) {
        let held = self.shared.db();
        let _ = self.let_go(held);
    }
}

/// Opens the database (creating it whole when there is none), refuses
/// another format, reads the log and replays what the database lacks.
fn open_parts(
    media: &dyn Media,
    shared: &Shared,
    cache_bytes: usize,
    wal_prealloc: u64,
) -> Result<(Wal, PayloadFile, u64, Replayed), OpenFailure> {
    let io = |what: &str, e: std::io::Error| OpenFailure::Engine(format!("{what}: {e}"));
    let created = media.database_is_new().map_err(|e| io("look for the database", e))?;
    if created {
        create_database(media)?;
    }
    let db = open_database(media, cache_bytes)?;
    let meta = read_meta(&db)?;
    if let Some(found) = meta.format.filter(|f| *f != STORE_FORMAT && !upgradable(*f)) {
        return Err(OpenFailure::Format(found));
    }
    let log = media.wal().map_err(|e| io("open the log", e))?;
    let (wal, frames, scan) =
        Wal::open(log, meta.wal_seq + 1, wal_prealloc).map_err(|e| OpenFailure::Engine(e.to_string()))?;
    if created && scan.frames > 0 {
        return Err(OpenFailure::Engine(format!(
            "its write-ahead log holds {} frame(s) but the database has none of its history; the log belongs to another store (move it away)",
            scan.frames
        )));
    }
    let file = media.payloads().map_err(|e| io("open the payload file", e))?;
    let mut payloads = PayloadFile::open(file, meta.payload_len).map_err(|e| io("open the payload file", e))?;
    if let Some(found) = meta.format.filter(|f| upgradable(*f)) {
        upgrade(&db, found, &payloads)?;
    }
    let frames_applied = replay(&db, meta.wal_seq, frames, &payloads)?;
    let replayed_end = read_meta(&db)?.payload_len;
    payloads.advance(replayed_end);
    let next_seq = meta.wal_seq.max(scan.last_seq) + 1;
    *shared.payload_file.write().unwrap_or_else(|p| p.into_inner()) = Some(payloads.io().clone());
    *shared.db.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(db));
    Ok((wal, payloads, next_seq, Replayed { scan, frames_applied }))
}

/// Each request's result, in the batch's order.
pub(crate) type Answers = Vec<Result<Reply, WriteError>>;

/// A batch for the engine: its requests, and who to tell, in order.
pub(crate) type Batch = (Vec<Op>, Vec<Done>);

/// A group so far (`Engine::run_group`), for the writer to decide whether
/// it takes one more batch.
pub(crate) struct Group {
    /// Batches journaled and applied in the group's transaction.
    pub(crate) batches: u32,
    /// When the first of them was durable.
    pub(crate) first_synced: Option<Instant>,
    /// Every one of them wrote only calls' own rows (`Op::is_a_calls_own`).
    pub(crate) calls_own: bool,
    /// Bytes of their frames: room set aside in the payload file for what
    /// their payloads may append (its end moves only when the group commits).
    pub(crate) frame_bytes: u64,
}

/// A batch that could not be journaled for want of room, with its callers.
type Stopped = Option<(Fault, Vec<Done>)>;

/// How one batch of a group went (`Engine::journal_and_apply`).
enum Step {
    /// Nothing could be journaled: each request was refused.
    Nothing,
    /// Durable and applied; its callers are answered (or about to be).
    Applied { last: u64, synced: Instant, calls_own: bool },
    /// No room for its payloads: not journaled, its callers not answered.
    Stopped(Fault, Vec<Done>),
    /// The log's write or sync failed: its callers not answered.
    LogFailed(AppendError, Vec<Done>),
    /// The engine failed before the batch, durable, was decided.
    Undecided(Fault, Vec<Done>),
}

/// How a group ended (`Engine::fill_group`), for `run_group` to commit
/// its transaction or recover, once the group's tables are closed.
enum Ended {
    /// Applied, its deferred writes done, up to frame `last`: to commit.
    Finished {
        appended: Option<u64>,
        last: u64,
        synced: Instant,
        stopped: Stopped,
    },
    /// Nothing applied.
    Empty(Stopped),
    /// `answered`: the transaction holds batches answered before this one.
    LogFailed {
        error: AppendError,
        unanswered: Vec<Done>,
        answered: bool,
    },
    /// An engine error after the batches up to frame `last` were answered.
    Failed {
        fault: Fault,
        last: u64,
        stopped: Stopped,
    },
    Undecided(Fault, Vec<Done>),
}

/// The group's deferred writes, after its last batch (frame `last`).
fn finished(mut w: W<'_>, last: u64, synced: Instant, stopped: Stopped) -> Ended {
    match w.record_wal_seq(last).and_then(|()| w.finish()) {
        Ok(appended) => Ended::Finished { appended, last, synced, stopped },
        Err(e) => Ended::Failed { fault: write_fault(e), last, stopped },
    }
}

/// What the writer learns of a group that went as `went`, and of the
/// batch it could not journal, if any (whose callers it answers).
fn with_stopped(went: Result<(), Fault>, stopped: Stopped) -> Result<(), (Fault, Vec<Done>)> {
    match stopped {
        Some((fault, dones)) => Err((went.err().unwrap_or(fault), dones)),
        None => went.map_err(|fault| (fault, vec![])),
    }
}

fn log_fault(e: AppendError) -> Fault {
    match e {
        AppendError::Write(e) if is_out_of_space(&e) => Fault::OutOfSpace(e.to_string()),
        AppendError::Write(e) => Fault::Fatal(format!("writing the log: {e}")),
        AppendError::Sync(e) => Fault::Fatal(format!("syncing the log: {e}")),
    }
}

fn too_large() -> WriteError {
    WriteError::InvalidCommit("the request is too large to journal".into())
}

/// Applies a batch's journaled requests (`None`: one that could not be, and
/// is refused) through `w`: a live batch, or a frame replayed at open.
/// Returns every request's result, in order.
fn apply_ops(w: &mut W<'_>, ops: Vec<Option<Op>>) -> Result<Answers, Fault> {
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        let Some(op) = op else {
            results.push(Err(too_large()));
            continue;
        };
        // Every applied request is journaled, refused ones too: a
        // refusal may write (a failed REST commit drops its receipt).
        let r = crate::ops::apply(w, op);
        if let Err(WriteError::Storage(e)) = &r {
            return Err(Fault::Fatal(e.clone()));
        }
        results.push(r);
    }
    Ok(results)
}

/// A write transaction whose commit is made durable by the log (frames
/// first) and the next checkpoint.
fn begin_nondurable(db: &Database) -> Result<redb::WriteTransaction, Fault> {
    let mut txn = db.begin_write().map_err(redb_fault)?;
    txn.set_durability(Durability::None).map_err(redb_fault)?;
    Ok(txn)
}

fn record_seq(txn: &redb::WriteTransaction, seq: u64) -> Result<(), Fault> {
    let mut meta = txn.open_table(META).map_err(redb_fault)?;
    meta.insert(META_WAL_SEQ, seq).map_err(redb_fault)?;
    Ok(())
}

fn write_fault(e: WriteError) -> Fault {
    Fault::Fatal(e.to_string())
}

/// Why the engine did not open.
#[derive(Debug)]
pub(crate) enum OpenFailure {
    Format(u64),
    Engine(String),
}

impl OpenFailure {
    pub(crate) fn into_open_error(self, path: &std::path::Path) -> OpenError {
        match self {
            OpenFailure::Format(found) => OpenError::Format { path: path.to_path_buf(), found, expected: STORE_FORMAT },
            OpenFailure::Engine(detail) => OpenError::Engine { path: path.to_path_buf(), detail },
        }
    }
}

/// Page cache while a database is created or compacted: one pass, little reuse.
const MAINTENANCE_CACHE_BYTES: usize = 16 << 20;

/// Compacts a database no one else has open and whose log holds no frames
/// past its last checkpoint (the caller closed a store on it cleanly).
pub(crate) fn compact(media: &dyn Media) -> Result<(), OpenFailure> {
    let mut db = open_database(media, MAINTENANCE_CACHE_BYTES)?;
    let engine = |e: &dyn std::fmt::Display| OpenFailure::Engine(format!("compact the database: {e}"));
    guard_panic(|| db.compact()).map_err(|e| engine(&e))?.map_err(|e| engine(&e))?;
    Ok(())
}

/// Builds a new database whole (every table, the format) beside the path,
/// then puts it in place.
fn create_database(media: &dyn Media) -> Result<(), OpenFailure> {
    let engine = |e: &dyn std::fmt::Display| OpenFailure::Engine(format!("create the database: {e}"));
    let backend = media.new_database().map_err(|e| engine(&e))?;
    let db = on_backend(backend, MAINTENANCE_CACHE_BYTES).map_err(|e| engine(&e))?;
    let mut txn = db.begin_write().map_err(|e| engine(&e))?;
    txn.set_durability(Durability::Immediate).map_err(|e| engine(&e))?;
    {
        let mut meta = txn.open_table(META).map_err(|e| engine(&e))?;
        meta.insert("format", STORE_FORMAT).map_err(|e| engine(&e))?;
        meta.insert(META_WAL_SEQ, 0).map_err(|e| engine(&e))?;
        drop(meta);
        W::open(&txn, &crate::media::NO_FILE).and_then(W::finish).map_err(|e| engine(&e))?;
        crate::tiered::create(&txn, &crate::tables::PLACES).map_err(|e| engine(&e))?;
        crate::tiered::create(&txn, &crate::tables::SEMANTIC).map_err(|e| engine(&e))?;
    }
    txn.commit().map_err(|e| engine(&e))?;
    drop(db);
    media.install_new_database().map_err(|e| engine(&e))
}

fn open_database(media: &dyn Media, cache_bytes: usize) -> Result<Database, OpenFailure> {
    let backend = media.database().map_err(|e| OpenFailure::Engine(format!("open the database file: {e}")))?;
    on_backend(backend, cache_bytes).map_err(OpenFailure::Engine)
}

/// The engine on `backend`, owning it alone (`ExclusiveWriter`: non-durable
/// commits); an engine panic on a damaged file is an error.
fn on_backend(backend: Box<dyn redb::StorageBackend>, cache_bytes: usize) -> Result<Database, String> {
    let mut builder = Builder::new();
    builder.set_concurrency_mode(ConcurrencyMode::ExclusiveWriter);
    builder.set_cache_size(cache_bytes);
    guard_panic(|| builder.create_with_backend(crate::media::Backend(backend)))?.map_err(|e| e.to_string())
}

struct Meta {
    format: Option<u64>,
    wal_seq: u64,
    payload_len: u64,
}

fn read_meta(db: &Database) -> Result<Meta, OpenFailure> {
    let engine = |e: &dyn std::fmt::Display| OpenFailure::Engine(e.to_string());
    let txn = db.begin_read().map_err(|e| engine(&e))?;
    let Some(meta) = crate::tables::open_existing(&txn, META).map_err(|e| engine(&e))? else {
        return Ok(Meta { format: None, wal_seq: 0, payload_len: 0 });
    };
    let get = |k: &str| meta.get(k).map(|v| v.map(|v| v.value()));
    Ok(Meta {
        format: get("format").map_err(|e| engine(&e))?,
        wal_seq: get(META_WAL_SEQ).map_err(|e| engine(&e))?.unwrap_or(0),
        payload_len: get(META_PAYLOAD_LEN).map_err(|e| engine(&e))?.unwrap_or(0),
    })
}

/// Brings a store of an older format to this binary's, in one durable
/// transaction, before the log is replayed: the log's frames are requests,
/// applied by this binary to its own layout. Each step reads the layout
/// the steps before it left (the referrer index resolves targets through
/// the place index).
fn upgrade(db: &Database, found: u64, payloads: &PayloadFile) -> Result<(), OpenFailure> {
    let engine =
        |e: &dyn std::fmt::Display| OpenFailure::Engine(format!("upgrading the store from format {found}: {e}"));
    let mut txn = db.begin_write().map_err(|e| engine(&e))?;
    txn.set_durability(Durability::Immediate).map_err(|e| engine(&e))?;
    if found <= STORE_FORMAT_BEFORE_TASKS_BY_ID {
        crate::ops::key_tasks_by_id(&txn).map_err(|e| engine(&e))?;
    }
    if found == STORE_FORMAT_BEFORE_EPISODES {
        crate::ops::index_episodes(&txn).map_err(|e| engine(&e))?;
    }
    if found <= STORE_FORMAT_BEFORE_PLACES {
        crate::ops::index_places(&txn).map_err(|e| engine(&e))?;
    }
    // Before any step reads an object's row as this binary writes it.
    if found <= STORE_FORMAT_BEFORE_OBJECT_HASHES {
        crate::ops::hash_object_rows(&txn).map_err(|e| engine(&e))?;
    }
    // Every row is placed and its referrers are (or, below, will be)
    // indexed: the mark goes where the rows end before any step looks a
    // place up, so none reads the places of the whole store into memory.
    if found <= STORE_FORMAT_BEFORE_REFERRERS_BEHIND {
        crate::ops::referrers_all_indexed(&txn).map_err(|e| engine(&e))?;
    }
    if found <= STORE_FORMAT_BEFORE_TARGET_PLACES {
        crate::ops::index_referrers_by_place(&txn).map_err(|e| engine(&e))?;
    }
    if found <= STORE_FORMAT_BEFORE_RECORD_PLACES {
        crate::ops::index_records_by_place(&txn).map_err(|e| engine(&e))?;
        crate::tiered::write_missing_filters(&txn, &crate::tables::PLACES).map_err(|e| engine(&e))?;
    }
    if found <= STORE_FORMAT_BEFORE_PAYLOAD_FILE {
        crate::ops::move_payloads_to_file(&txn, payloads.io().as_ref()).map_err(|e| engine(&e))?;
        payloads.sync().map_err(|e| engine(&format!("syncing the payload file: {e}")))?;
    }
    txn.open_table(META).map_err(|e| engine(&e))?.insert("format", STORE_FORMAT).map_err(|e| engine(&e))?;
    txn.commit().map_err(|e| engine(&e))
}

/// Applies, in order and one transaction each, the frames after `applied`.
/// Requests are deterministic, so this reproduces exactly what was
/// acknowledged; each transaction records its frame, so a crash while
/// replaying replays again from there.
fn replay(db: &Database, applied: u64, frames: Vec<Frame>, payloads: &PayloadFile) -> Result<u64, OpenFailure> {
    let engine = |e: &dyn std::fmt::Display| OpenFailure::Engine(format!("replaying the log: {e}"));
    let mut count = 0;
    let mut kept = crate::ops::Kept::default();
    for frame in frames.into_iter().filter(|f| f.seq > applied) {
        if frame.seq != applied + count + 1 {
            return Err(OpenFailure::Engine(format!(
                "the log's frame {} does not follow frame {} of the database",
                frame.seq,
                applied + count
            )));
        }
        let ops = frame.ops.into_iter().map(Some).collect();
        let txn = begin_nondurable(db).map_err(|f| engine(&f))?;
        {
            let mut w = W::open_with(&txn, &mut kept, payloads.io().as_ref()).map_err(|e| engine(&e))?;
            apply_ops(&mut w, ops).map_err(|f| engine(&f))?;
            w.record_wal_seq(frame.seq).map_err(|e| engine(&e))?;
            w.finish().map_err(|e| engine(&e))?;
        }
        txn.commit().map_err(|e| engine(&e))?;
        count += 1;
    }
    Ok(count)
}
