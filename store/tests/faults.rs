//! Fault injection with a countdown. The store's three files live on a simulated
//! disk that counts every write, sync and resize; a scripted workload runs with
//! the Nth of them failing (a full disk or an I/O error, optionally torn: only
//! a prefix of the write lands), for every N up to the workload's I/O count.
//! Then the store is reopened from what the disk holds (or, for a power loss,
//! from only what was synced) and checked:
//!
//! - it opens and `verify` is clean;
//! - every request acknowledged before the fault is there, exactly as
//!   acknowledged (worlds, registry, intents and their debits, outcomes,
//!   committed tasks);
//! - no intent is left without an outcome (recovery records `indeterminate`).
//!
//! And the two ways the writer meets a fault while it runs: a full disk
//! (typed refusals, reads go on, writes resume by themselves) and a failed
//! sync (the store stops writing and tells its owner, once).

mod common;

use common::*;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use world_store::verify::{Options, verify};
use world_store::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    NoSpace,
    Io,
}

#[derive(Clone, Copy, Debug)]
struct Fault {
    at: u64,
    kind: Kind,
    /// A failing write lands half of its bytes first.
    torn: bool,
}

#[derive(Clone, Default)]
struct Image {
    live: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Default)]
struct DiskState {
    db: Image,
    /// A database being built, before it takes `db`'s place.
    fresh: Image,
    wal: Image,
    payloads: Image,
    /// Writes, syncs, resizes and allocations so far.
    ops: u64,
    fault: Option<Fault>,
    /// Every write of the log, and every write past the payload file's end,
    /// fails for lack of space, and no reserve fits.
    full: bool,
    /// Every sync of the log fails.
    failing_syncs: bool,
    /// Only writes past the payload file's end fail for lack of space.
    payloads_full: bool,
    /// The next writes of payloads into the payload file (not the zeros
    /// that set room aside) fail with an I/O error.
    failing_payload_writes: u32,
}

/// The files, in memory, with what a power loss would keep.
#[derive(Clone, Default)]
struct Disk(Arc<Mutex<DiskState>>);

#[derive(Clone, Copy, Debug)]
enum Which {
    Db,
    Fresh,
    Wal,
    Payloads,
}

/// What the disk holds of the database, the log and the payload file.
type Images = (Vec<u8>, Vec<u8>, Vec<u8>);

impl Disk {
    fn from_images((db, wal, payloads): Images) -> Disk {
        let d = Disk::default();
        {
            let mut s = d.0.lock().unwrap();
            s.db = Image { live: db.clone(), durable: db };
            s.wal = Image { live: wal.clone(), durable: wal };
            s.payloads = Image { live: payloads.clone(), durable: payloads };
        }
        d
    }

    fn images(&self, power_loss: bool) -> Images {
        let s = self.0.lock().unwrap();
        let pick = |i: &Image| if power_loss { i.durable.clone() } else { i.live.clone() };
        (pick(&s.db), pick(&s.wal), pick(&s.payloads))
    }

    fn ops(&self) -> u64 {
        self.0.lock().unwrap().ops
    }

    /// Counts one mutating operation; the error when it is the faulty one.
    fn tick(s: &mut DiskState) -> Option<Fault> {
        s.ops += 1;
        s.fault.filter(|f| f.at == s.ops)
    }

    fn error(kind: Kind) -> io::Error {
        match kind {
            Kind::NoSpace => io::Error::from(io::ErrorKind::StorageFull),
            Kind::Io => io::Error::other("injected I/O error"),
        }
    }

    fn len(&self, w: Which) -> u64 {
        let s = self.0.lock().unwrap();
        image(&s, w).live.len() as u64
    }

    fn read(&self, w: Which, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let s = self.0.lock().unwrap();
        let live = &image(&s, w).live;
        let end = offset as usize + out.len();
        if end > live.len() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        out.copy_from_slice(&live[offset as usize..end]);
        Ok(())
    }

    fn write(&self, w: Which, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut s = self.0.lock().unwrap();
        // Bytes the file already holds (the payload file's room, set aside
        // with zeros before a batch is journaled) are overwritten in place
        // on a full disk too; a write past the file's end needs new space.
        let extends = offset as usize + data.len() > image(&s, w).live.len();
        let no_room = match w {
            Which::Wal => s.full,
            Which::Payloads => (s.full || s.payloads_full) && extends,
            Which::Db | Which::Fresh => false,
        };
        if no_room {
            return Err(Disk::error(Kind::NoSpace));
        }
        if matches!(w, Which::Payloads) && s.failing_payload_writes > 0 && carries_payloads(data) {
            s.failing_payload_writes -= 1;
            return Err(Disk::error(Kind::Io));
        }
        let fault = Disk::tick(&mut s);
        let data = match fault {
            Some(f) if f.torn => &data[..data.len() / 2],
            Some(f) => return Err(Disk::error(f.kind)),
            None => data,
        };
        let live = &mut image_mut(&mut s, w).live;
        let end = offset as usize + data.len();
        if live.len() < end {
            live.resize(end, 0);
        }
        live[offset as usize..end].copy_from_slice(data);
        match fault {
            Some(f) => Err(Disk::error(f.kind)),
            None => Ok(()),
        }
    }

    fn set_len(&self, w: Which, len: u64) -> io::Result<()> {
        let mut s = self.0.lock().unwrap();
        if let Some(f) = Disk::tick(&mut s) {
            return Err(Disk::error(f.kind));
        }
        image_mut(&mut s, w).live.resize(len as usize, 0);
        Ok(())
    }

    fn sync(&self, w: Which) -> io::Result<()> {
        let mut s = self.0.lock().unwrap();
        if s.failing_syncs && matches!(w, Which::Wal) {
            return Err(Disk::error(Kind::Io));
        }
        if let Some(f) = Disk::tick(&mut s) {
            return Err(Disk::error(f.kind));
        }
        let i = image_mut(&mut s, w);
        i.durable = i.live.clone();
        Ok(())
    }
}

/// A write of payloads into the payload file, not of the zeros that set
/// room aside ahead of a batch.
fn carries_payloads(data: &[u8]) -> bool {
    data.iter().any(|b| *b != 0)
}

fn image(s: &DiskState, w: Which) -> &Image {
    match w {
        Which::Db => &s.db,
        Which::Fresh => &s.fresh,
        Which::Wal => &s.wal,
        Which::Payloads => &s.payloads,
    }
}

fn image_mut(s: &mut DiskState, w: Which) -> &mut Image {
    match w {
        Which::Db => &mut s.db,
        Which::Fresh => &mut s.fresh,
        Which::Wal => &mut s.wal,
        Which::Payloads => &mut s.payloads,
    }
}

#[derive(Debug)]
struct SimFile {
    disk: Disk,
    which: Which,
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Disk")
    }
}

impl redb::StorageBackend for SimFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.disk.len(self.which))
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.disk.read(self.which, offset, out)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.disk.set_len(self.which, len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.disk.sync(self.which)
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.disk.write(self.which, offset, data)
    }
}

impl WalIo for SimFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.disk.len(self.which))
    }
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.disk.read(self.which, offset, out)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.disk.write(self.which, offset, data)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.disk.sync(self.which)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.disk.set_len(self.which, len)
    }
}

struct SimMedia(Disk);

impl Media for SimMedia {
    fn database(&self) -> io::Result<Box<dyn redb::StorageBackend>> {
        Ok(Box::new(SimFile { disk: self.0.clone(), which: Which::Db }))
    }
    fn database_is_new(&self) -> io::Result<bool> {
        Ok(self.0.len(Which::Db) == 0)
    }
    fn new_database(&self) -> io::Result<Box<dyn redb::StorageBackend>> {
        self.0.0.lock().unwrap().fresh = Image::default();
        Ok(Box::new(SimFile { disk: self.0.clone(), which: Which::Fresh }))
    }
    /// A rename: atomic, and durable once the directory is synced (one operation).
    fn install_new_database(&self) -> io::Result<()> {
        let mut s = self.0.0.lock().unwrap();
        if let Some(f) = Disk::tick(&mut s) {
            return Err(Disk::error(f.kind));
        }
        s.db = std::mem::take(&mut s.fresh);
        s.db.live = s.db.durable.clone();
        Ok(())
    }
    fn wal(&self) -> io::Result<Box<dyn WalIo>> {
        Ok(Box::new(SimFile { disk: self.0.clone(), which: Which::Wal }))
    }
    fn payloads(&self) -> io::Result<Box<dyn WalIo>> {
        Ok(Box::new(SimFile { disk: self.0.clone(), which: Which::Payloads }))
    }
    fn reserve(&self, keep: bool) -> io::Result<bool> {
        Ok(!keep || !self.0.0.lock().unwrap().full)
    }
}

/// Log bytes between checkpoints in these runs (the workload writes several times this).
const CHECKPOINT_BYTES: u64 = 4 << 10;

fn open(path: &Path, disk: &Disk) -> Result<(Store, RecoveryReport), OpenError> {
    // A small log: checkpoints (and log resets) happen within the workload.
    let opts = StoreOptions {
        media: Some(Arc::new(SimMedia(disk.clone()))),
        checkpoint_wal_bytes: Some(CHECKPOINT_BYTES),
        ..StoreOptions::default()
    };
    Store::open_with(path, 10, opts)
}

/// What the workload was told, to be found again after the reopen.
#[derive(Default)]
struct Acked {
    worlds: Vec<Ref>,
    registry: Option<Ref>,
    intents: Vec<(TaskKey, u32, Debit)>,
    outcomes: Vec<(TaskKey, u32)>,
    committed: Vec<(TaskKey, Committed)>,
}

/// A small day of a store: a genesis, a publish, REST commits, and tasks that
/// debit, record outcomes and commit. Stops at the first refusal.
fn workload(store: &Store) -> Acked {
    let mut acked = Acked::default();
    let Ok(Reply::Selected(w)) = store.call(Op::CommitWorld(genesis())) else { return acked };
    acked.worlds.push(w);
    let publish = echo_registry();
    let f = publish.entries[0].1;
    let Ok(Reply::Published(_)) = store.call(Op::PublishRegistry(publish.clone())) else { return acked };
    acked.registry = Some(publish.head);
    for i in 0..3 {
        let key = task(&format!("t{i}"));
        let begin = Op::Sequence(vec![
            Op::create_task(key.clone(), Ref::of(key.task_id.as_bytes()), 1),
            Op::RecordIntent(intent(&key, 0, "Workspace.Write", 10, format!("req {i}").as_bytes())),
        ]);
        let Ok(Reply::Sequence(r)) = store.call(begin) else { return acked };
        let Some(Ok(Reply::Debited(d))) = r.get(1) else { return acked };
        acked.intents.push((key.clone(), 0, *d));
        let record = NewObject::derived("world/effect-record/v1", "host/broker", format!("rec {i}").into_bytes());
        let outcome =
            OutcomeRequest { task: key.clone(), ordinal: 0, status: OutcomeStatus::Ok, record, result: None, at: 2 };
        let Ok(_) = store.call(Op::RecordOutcome(outcome)) else { return acked };
        acked.outcomes.push((key.clone(), 0));
        let Ok(Reply::Committed(c)) =
            store.call(Op::CommitInvocation(invocation(&key, f, format!("{{\"n\":{i}}}").as_bytes())))
        else {
            return acked;
        };
        acked.committed.push((key, c));
    }
    acked
}

fn check(snap: &Snapshot, acked: &Acked, what: &str) {
    let report = verify(snap, &Options::default());
    assert!(report.is_clean(), "{what}: {:#?}", report.faults);
    for w in &acked.worlds {
        assert!(snap.world(w).unwrap().is_some(), "{what}: acknowledged world {w} is gone");
    }
    if let Some(head) = acked.registry {
        assert_eq!(snap.head("world/transition-registry/v1").unwrap(), Some(head), "{what}: registry head");
    }
    for (key, ordinal, debit) in &acked.intents {
        let journal = snap.journal_of(&key.invocation_id()).unwrap();
        let item = journal.iter().find(|i| i.ordinal == *ordinal);
        let item = item.unwrap_or_else(|| panic!("{what}: acknowledged intent {key:?} is gone"));
        assert_eq!(item.intent.budget_after, debit.budget_after, "{what}: debit of {key:?}");
        assert!(item.outcome.is_some(), "{what}: intent of {key:?} without an outcome");
    }
    for (key, ordinal) in &acked.outcomes {
        let journal = snap.journal_of(&key.invocation_id()).unwrap();
        let o = journal.iter().find(|i| i.ordinal == *ordinal).and_then(|i| i.outcome.clone());
        assert_eq!(o.map(|o| o.status), Some(OutcomeStatus::Ok), "{what}: outcome of {key:?}");
    }
    for (key, receipt) in &acked.committed {
        let t = snap.task(key).unwrap().unwrap_or_else(|| panic!("{what}: committed task {key:?} is gone"));
        assert_eq!(t.state, TaskState::Committed, "{what}: task {key:?}");
        assert_eq!(t.committed.as_ref(), Some(receipt), "{what}: commit of {key:?}");
    }
}

/// One run: fault at `fault` (none: count the I/O), then reopen and check.
fn run(fault: Option<Fault>, power_loss: bool) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::default();
    disk.0.lock().unwrap().fault = fault;
    let what = format!("{fault:?} power_loss={power_loss}");
    let acked = match open(&dir.path().join("a.db"), &disk) {
        Ok((store, _)) => {
            let acked = workload(&store);
            if power_loss {
                // The power goes now: what was not synced is lost.
                let images = disk.images(true);
                drop(store);
                reopen_and_check(dir.path(), images, &acked, &what);
                return disk.ops();
            }
            drop(store);
            acked
        }
        Err(_) => Acked::default(),
    };
    reopen_and_check(dir.path(), disk.images(false), &acked, &what);
    disk.ops()
}

fn reopen_and_check(dir: &Path, images: Images, acked: &Acked, what: &str) {
    let disk = Disk::from_images(images);
    let path = dir.join("b.db");
    let (store, _) = open(&path, &disk).unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    check(&store.snapshot().unwrap(), acked, what);
    // Recovery is idempotent: a second open finds nothing more to do.
    drop(store);
    let (store, report) = open(&path, &disk).unwrap_or_else(|e| panic!("{what}: second reopen failed: {e}"));
    assert!(report.is_empty(), "{what}: second recovery found {report:?}");
    check(&store.snapshot().unwrap(), acked, what);
}

#[test]
fn a_fault_at_every_write_sync_and_resize_loses_nothing_acknowledged() {
    let total = run(None, false);
    assert!(total > 20, "the workload did only {total} writes, syncs and resizes");
    eprintln!("faulting each of {total} writes, syncs and resizes in turn");
    for at in 1..=total {
        for (kind, torn) in [(Kind::NoSpace, false), (Kind::Io, false), (Kind::Io, true)] {
            run(Some(Fault { at, kind, torn }), false);
        }
    }
}

#[test]
fn a_power_loss_after_a_fault_at_any_point_loses_nothing_acknowledged() {
    let total = run(None, true);
    for at in 1..=total {
        for (kind, torn) in [(Kind::NoSpace, true), (Kind::Io, false)] {
            run(Some(Fault { at, kind, torn }), true);
        }
    }
}

fn echo_publish(label: &str) -> Op {
    let registry = NewObject::derived("world/transition-registry/v1", "test", label.as_bytes().to_vec());
    Op::PublishRegistry(RegistryPublish {
        name: format!("registry/{label}"),
        expected: None,
        head: registry.hash,
        objects: vec![registry],
        entries: vec![],
    })
}

/// A store on a fresh simulated disk (`a.db` in the directory), its genesis committed.
fn started() -> (tempfile::TempDir, Disk, Store) {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::default();
    let (store, _) = open(&dir.path().join("a.db"), &disk).unwrap();
    store.call(Op::CommitWorld(genesis())).unwrap();
    (dir, disk, store)
}

#[test]
fn a_full_disk_refuses_writes_typed_keeps_reads_and_resumes_once_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::default();
    let (store, _) = open(&dir.path().join("a.db"), &disk).unwrap();
    let world = match store.call(Op::CommitWorld(genesis())) {
        Ok(Reply::Selected(w)) => w,
        other => panic!("genesis: {other:?}"),
    };
    disk.0.lock().unwrap().full = true;
    match store.call(echo_publish("refused")) {
        Err(WriteError::OutOfSpace(why)) => assert!(why.contains("out of space"), "{why}"),
        other => panic!("expected OutOfSpace, got {other:?}"),
    }
    assert!(matches!(store.health(), Health::Degraded(r) if r.contains("out of space")));
    // Refused at once while degraded, without touching the disk; reads go on.
    assert!(matches!(store.call(echo_publish("still")), Err(WriteError::OutOfSpace(_))));
    assert_eq!(store.snapshot().unwrap().selected_head().unwrap(), Some(world));
    disk.0.lock().unwrap().full = false;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match store.call(echo_publish("after")) {
            Ok(Reply::Published(_)) => break,
            Err(WriteError::OutOfSpace(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            other => panic!("writes did not resume: {other:?}"),
        }
    }
    assert_eq!(store.health(), Health::Serving);
    let snap = store.snapshot().unwrap();
    assert!(snap.head("registry/refused").unwrap().is_none(), "a refused write left a trace");
    assert!(snap.head("registry/after").unwrap().is_some());
    // Sent again, the refused write is written whole: the writer took none
    // of what its refused batch applied as written.
    assert!(matches!(store.call(echo_publish("refused")), Ok(Reply::Published(_))));
    let snap = store.snapshot().unwrap();
    let head = snap.head("registry/refused").unwrap().expect("the head moved");
    assert!(snap.has_object(&head).unwrap(), "the registry object {head} was not written");
    assert_verifies(&store);
}

#[test]
fn a_batch_whose_payloads_find_no_room_is_refused_before_its_frames_are_written() {
    let (dir, disk, store) = started();
    // More than the room set aside ahead, so this batch must set more aside.
    let big = NewObject::derived("test/big", "test", vec![7u8; 2 * payloads::PAYLOAD_ALLOCATE_BYTES as usize]);
    disk.0.lock().unwrap().payloads_full = true;
    match store.call(Op::PutObjects(vec![big.clone()])) {
        Err(WriteError::OutOfSpace(why)) => assert!(why.contains("out of space"), "{why}"),
        other => panic!("expected OutOfSpace, got {other:?}"),
    }
    drop(store);
    // Had its frames been written, the reopen would replay them.
    disk.0.lock().unwrap().payloads_full = false;
    let (store, _) = open(&dir.path().join("b.db"), &Disk::from_images(disk.images(false))).unwrap();
    assert!(!store.snapshot().unwrap().has_object(&big.hash).unwrap(), "a refused batch left a trace");
    assert_verifies(&store);
    store.call(Op::PutObjects(vec![big.clone()])).unwrap();
    assert_eq!(store.snapshot().unwrap().payload(&big.hash).unwrap().map(|p| p.len()), Some(big.payload.len()));
}

#[test]
fn a_batch_answered_before_its_payload_write_failed_is_replayed_into_the_room_set_aside_on_a_full_disk() {
    let (dir, disk, store) = started();
    let late = NewObject::derived("test/late", "test", b"answered, then its payload write failed".to_vec());
    {
        let mut s = disk.0.lock().unwrap();
        // The disk is full past the payload file's end, and the batch's own
        // append fails: the reopen's replay has only the room set aside.
        s.payloads_full = true;
        s.failing_payload_writes = 1;
    }
    store.call(Op::PutObjects(vec![late.clone()])).unwrap();
    assert_eq!(store.snapshot().unwrap().payload(&late.hash).unwrap(), Some(late.payload.clone()));
    assert_eq!(store.health(), Health::Serving);
    drop(store);
    disk.0.lock().unwrap().payloads_full = false;
    let (store, _) = open(&dir.path().join("b.db"), &Disk::from_images(disk.images(true))).unwrap();
    assert_eq!(store.snapshot().unwrap().payload(&late.hash).unwrap(), Some(late.payload.clone()));
    assert_verifies(&store);
}

#[test]
fn a_callback_that_panics_leaves_the_other_callers_answered_and_the_store_writing() {
    let (_dir, _disk, store) = started();
    let first = NewObject::derived("test/first", "test", b"its caller's callback panics".to_vec());
    store.submit(Op::PutObjects(vec![first.clone()]), Box::new(|_| panic!("a caller's callback failed")));
    let second = NewObject::derived("test/second", "test", b"asked after it".to_vec());
    store.call(Op::PutObjects(vec![second.clone()])).unwrap();
    let snap = store.snapshot().unwrap();
    assert_eq!(snap.payload(&first.hash).unwrap(), Some(first.payload.clone()));
    assert_eq!(snap.payload(&second.hash).unwrap(), Some(second.payload.clone()));
    assert_eq!(store.health(), Health::Serving);
}

/// The store's own files, where the next writes of payloads into the
/// payload file (not the zeros that set room aside) fail with an I/O error.
/// Real files, so the database is locked while open, as in the daemon.
struct FlakyPayloads {
    files: FileMedia,
    failing: Arc<AtomicU32>,
}

#[derive(Debug)]
struct FlakyFile {
    file: Box<dyn WalIo>,
    failing: Arc<AtomicU32>,
}

impl WalIo for FlakyFile {
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.file.read_at(offset, out)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let fails = carries_payloads(data)
            && self.failing.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if fails {
            return Err(io::Error::other("injected I/O error"));
        }
        self.file.write_at(offset, data)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
}

impl Media for FlakyPayloads {
    fn database(&self) -> io::Result<Box<dyn redb::StorageBackend>> {
        self.files.database()
    }
    fn database_is_new(&self) -> io::Result<bool> {
        self.files.database_is_new()
    }
    fn new_database(&self) -> io::Result<Box<dyn redb::StorageBackend>> {
        self.files.new_database()
    }
    fn install_new_database(&self) -> io::Result<()> {
        self.files.install_new_database()
    }
    fn wal(&self) -> io::Result<Box<dyn WalIo>> {
        self.files.wal()
    }
    fn payloads(&self) -> io::Result<Box<dyn WalIo>> {
        Ok(Box::new(FlakyFile { file: self.files.payloads()?, failing: self.failing.clone() }))
    }
    fn reserve(&self, keep: bool) -> io::Result<bool> {
        self.files.reserve(keep)
    }
}

#[test]
fn a_batch_answered_before_its_payloads_are_written_survives_their_failure_and_the_store_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    let failing = Arc::new(AtomicU32::new(0));
    let media = FlakyPayloads { files: FileMedia { path: path.clone() }, failing: failing.clone() };
    let opts = StoreOptions { media: Some(Arc::new(media)), ..StoreOptions::default() };
    let (store, _) = Store::open_with(&path, 10, opts).unwrap();
    store.call(Op::CommitWorld(genesis())).unwrap();
    let late = NewObject::derived("test/late", "test", b"written after the answer".to_vec());
    failing.store(1, Ordering::SeqCst);
    // Its frames are durable and its request decided before the payload file
    // is written: the answer stands, and the database is reopened (the file
    // locked by the old handle given up first) and caught up from the log.
    store.call(Op::PutObjects(vec![late.clone()])).unwrap();
    // A reader waits for the batch to be committed, here by the reopen.
    let snap = store.snapshot().unwrap();
    assert_eq!(failing.load(Ordering::SeqCst), 0, "the payload write was not attempted");
    assert_eq!(store.health(), Health::Serving);
    assert_eq!(snap.payload(&late.hash).unwrap(), Some(late.payload.clone()));
    assert!(matches!(store.call(echo_publish("after")), Ok(Reply::Published(_))));
    assert_verifies(&store);
    drop((snap, store));
    let (store, _) = Store::open(&path, 1).unwrap();
    assert_eq!(store.snapshot().unwrap().payload(&late.hash).unwrap(), Some(late.payload.clone()));
    assert_verifies(&store);
}

/// A store on a fresh simulated disk holding one object committed and not
/// checkpointed (none comes within a test: only a closing handle can make
/// the object's batch durable).
fn one_object_not_checkpointed() -> (tempfile::TempDir, Disk, Store, NewObject) {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::default();
    let opts = StoreOptions { media: Some(Arc::new(SimMedia(disk.clone()))), ..StoreOptions::default() };
    let (store, _) = Store::open_with(&dir.path().join("a.db"), 10, opts).unwrap();
    let first = NewObject::derived("test/first", "test", b"committed, not yet checkpointed".to_vec());
    store.call(Op::PutObjects(vec![first.clone()])).unwrap();
    (dir, disk, store, first)
}

#[test]
fn a_reopen_after_the_answers_syncs_the_payloads_its_closed_handle_makes_durable_before_a_power_loss() {
    let (dir, disk, store, first) = one_object_not_checkpointed();
    disk.0.lock().unwrap().failing_payload_writes = 1;
    let late = NewObject::derived("test/late", "test", b"written after the answer".to_vec());
    store.call(Op::PutObjects(vec![late.clone()])).unwrap();
    // The reopen closed the old handle, which made `first`'s commit durable.
    store.snapshot().unwrap();
    let images = disk.images(true);
    drop(store);
    let (store, _) = open(&dir.path().join("b.db"), &Disk::from_images(images)).unwrap();
    let snap = store.snapshot().unwrap();
    assert_eq!(snap.payload(&first.hash).unwrap(), Some(first.payload.clone()));
    assert_eq!(snap.payload(&late.hash).unwrap(), Some(late.payload.clone()));
    assert_verifies(&store);
}

#[test]
fn a_failed_store_syncs_the_payloads_its_closing_handle_makes_durable_before_a_power_loss() {
    let (dir, disk, store, first) = one_object_not_checkpointed();
    disk.0.lock().unwrap().failing_syncs = true;
    assert!(matches!(store.call(echo_publish("doubt")), Err(WriteError::WriterStopped(_))));
    // A failed store skips its closing checkpoint, but its handle still closes.
    drop(store);
    let (store, _) = open(&dir.path().join("b.db"), &Disk::from_images(disk.images(true))).unwrap();
    let snap = store.snapshot().unwrap();
    assert_eq!(snap.payload(&first.hash).unwrap(), Some(first.payload.clone()));
    assert_verifies(&store);
}

#[test]
fn a_failed_sync_of_the_log_fails_the_store_and_tells_its_owner_once() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::default();
    let told = Arc::new(Mutex::new(vec![]));
    let seen = told.clone();
    let opts = StoreOptions {
        media: Some(Arc::new(SimMedia(disk.clone()))),
        on_fatal: Some(Box::new(move |why: &str| seen.lock().unwrap().push(why.to_string()))),
        ..StoreOptions::default()
    };
    let (store, _) = Store::open_with(&dir.path().join("a.db"), 10, opts).unwrap();
    store.call(Op::CommitWorld(genesis())).unwrap();
    disk.0.lock().unwrap().failing_syncs = true;
    assert!(matches!(store.call(echo_publish("doubt")), Err(WriteError::WriterStopped(_))));
    disk.0.lock().unwrap().failing_syncs = false;
    // Nothing more is written by this handle, even once the disk behaves.
    assert!(matches!(store.call(echo_publish("later")), Err(WriteError::WriterStopped(_))));
    assert!(matches!(store.health(), Health::Failed(r) if r.contains("injected I/O error")));
    let told = told.lock().unwrap().clone();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("durability is in doubt"), "{told:?}");
}

#[test]
fn a_damaged_frame_that_whole_frames_follow_is_refused_not_cut_away() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::default();
    let (store, _) = open(&dir.path().join("a.db"), &disk).unwrap();
    store.call(Op::CommitWorld(genesis())).unwrap();
    store.call(echo_publish("one")).unwrap();
    store.call(echo_publish("two")).unwrap();
    // The power goes: the three batches are in the log only.
    let (db, mut wal, payloads) = disk.images(true);
    drop(store);
    let intact = Disk::from_images((db.clone(), wal.clone(), payloads.clone()));
    let (reopened, _) = open(&dir.path().join("b.db"), &intact).unwrap();
    assert!(reopened.snapshot().unwrap().head("registry/two").unwrap().is_some());
    drop(reopened);
    // A bit flips inside the first frame's requests; acknowledged frames follow it.
    wal[16 + 44 + 20] ^= 0x40;
    let damaged = Disk::from_images((db, wal, payloads));
    match open(&dir.path().join("c.db"), &damaged) {
        Err(OpenError::Engine { detail, .. }) => {
            assert!(detail.contains("damaged") && detail.contains("follows it whole"), "{detail}")
        }
        other => panic!("expected the damage to be refused, got {:?}", other.map(|_| ())),
    }
}

/// Calls' batches held in one open transaction when the disk fills: the
/// batch after them is refused, and the held ones, answered and in the log,
/// are read back at once (the refusal commits them for readers).
#[test]
fn batches_held_when_the_disk_fills_are_read_back_at_once() {
    let (_dir, disk, store) = started();
    let f = common::publish_echo(&store);
    let keys: Vec<TaskKey> = (0..3).map(|i| TaskKey { surface: Surface::Mcp, ..task(&format!("held-{i}")) }).collect();
    for key in &keys {
        begin_and_commit(&store, key, f, b"{}");
    }
    disk.0.lock().unwrap().full = true;
    let refused = task("refused");
    assert!(matches!(store.call(Op::create_task(refused.clone(), Ref::of(b"r"), 1)), Err(WriteError::OutOfSpace(_))));
    let started = std::time::Instant::now();
    let snap = store.snapshot().expect("the answered batches are readable");
    assert!(started.elapsed() < std::time::Duration::from_secs(1), "the read waited {:?}", started.elapsed());
    for key in &keys {
        assert_eq!(snap.task(key).unwrap().map(|t| t.state), Some(TaskState::Committed), "{key:?}");
    }
    assert!(snap.task(&refused).unwrap().is_none(), "the refused batch left a trace");
    disk.0.lock().unwrap().full = false;
    assert_verifies(&store);
}
