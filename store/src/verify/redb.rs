//! The walk of an embedded snapshot, table by table; the PostgreSQL verifier
//! runs it over an embedded copy of its store (`postgres::verify`).

use super::report::{Counts, FAULTS_KEPT_MAX, Fault, FaultKind, Options, Report, TableFootprint};
use crate::canonical;
use crate::error::guard_panic;
use crate::model::*;
use crate::read::RedbSnapshot;
use crate::refs::Ref;
use crate::rows;
use crate::tables::*;
use crate::tiered;
use crate::view::{View, Walks};
use redb::{ReadOnlyTable, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) struct Sink {
    faults: Mutex<Vec<Fault>>,
    count: AtomicU64,
}

impl Sink {
    pub(super) fn push(&self, table: &'static str, key: impl ToString, kind: FaultKind, detail: impl Into<String>) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut faults = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        if faults.len() < FAULTS_KEPT_MAX {
            faults.push(Fault { table, key: key.to_string(), kind, detail: detail.into() });
        }
    }

    fn engine(&self, table: &'static str, e: impl std::fmt::Display) {
        self.push(table, "-", FaultKind::Engine, e.to_string());
    }

    pub(super) fn corrupt(&self, c: rows::Corruption) {
        self.push(c.table, c.key, FaultKind::Decode, c.detail);
    }
}

/// The embedded engine walks its own tables, for the verifier and the export.
impl Walks for RedbSnapshot {
    fn verify(&self, opts: &Options<'_>) -> Report {
        verify(self, opts)
    }

    fn records(
        &self,
        with_sessions: bool,
        put: &mut dyn FnMut(crate::ops::record::Record) -> Result<(), crate::export::stream::ExportError>,
    ) -> Result<(), crate::export::stream::ExportError> {
        crate::export::redb::records(self, with_sessions, put)
    }
}

/// Verifies everything visible in an embedded snapshot. The objects and the
/// journal are walked on one side, the log and what hangs off it (worlds,
/// heads, tasks, episodes) on another: the two share no step. Each side's
/// long passes run on threads of their own (`in_ranges`).
pub(crate) fn verify(snapshot: &RedbSnapshot, opts: &Options<'_>) -> Report {
    let sink = Sink { faults: Mutex::new(vec![]), count: AtomicU64::new(0) };
    let (mut counts, mut log_side) = (Counts::default(), Counts::default());
    let mut tables = vec![];
    let (mut held, mut trusted) = (None, None);
    std::thread::scope(|s| {
        let objects_side = Verifier { snap: snapshot, sink: &sink };
        let (counts, tables, held) = (&mut counts, &mut tables, &mut held);
        s.spawn(move || *held = objects_side.objects_and_journal(opts, counts, tables));
        trusted = Verifier { snap: snapshot, sink: &sink }.log_and_calls(opts.threads, &mut log_side);
    });
    counts.add(&log_side);
    // Only when both sides read all they needed: a pass cut short by the
    // engine (reported) would leave records looking unnamed.
    if let (Some(held), Some(trusted)) = (held, trusted) {
        Verifier { snap: snapshot, sink: &sink }.guarded("objects", |v| v.owned_records(&held, &trusted));
    }
    let mut faults = sink.faults.into_inner().unwrap_or_else(|p| p.into_inner());
    faults.sort_by(|a, b| (a.table, &a.key).cmp(&(b.table, &b.key)));
    Report { counts, tables, fault_count: sink.count.load(Ordering::Relaxed), faults }
}

/// What a set of index rows sums to: their count, and the wrapping sum of
/// a hash of each (key, value). Two walks that sum alike hold the same rows
/// (short of a forged collision), whatever order they were read in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RowSum {
    pub(super) rows: u64,
    pub(super) sum: u128,
}

impl RowSum {
    pub(super) fn add(&mut self, key: &SemanticKey, value: u64) {
        let mut h = blake3::Hasher::new();
        h.update(&key.0).update(&key.1).update(&value.to_le_bytes());
        let digest = h.finalize();
        let low: [u8; 16] = digest.as_bytes()[..16].try_into().expect("16 of 32 bytes");
        self.rows += 1;
        self.sum = self.sum.wrapping_add(u128::from_le_bytes(low));
    }
}

/// An entry's record's object number where it names no object.
pub(super) const NO_OBJECT: u64 = u64::MAX;

/// The records claiming the daemon that the object pass found and the
/// journal does not name, to be owned by a row of the daemon's
/// (`owned_records`).
#[derive(Default)]
pub(super) struct Held {
    /// The object numbers of the invocation records, ascending.
    pub(super) invocations: Vec<u64>,
    /// The effect records no journal outcome carries (the denied ones).
    pub(super) effects: Vec<Ref>,
}

/// The object numbers of the records carried by the entries a committed
/// task names, ascending.
fn trusted_records(committed: &[bool], record_seqs: &[u64]) -> Vec<u64> {
    let mut trusted: Vec<u64> = committed
        .iter()
        .zip(record_seqs)
        .filter(|(named, seq)| **named && **seq != NO_OBJECT)
        .map(|(_, seq)| *seq)
        .collect();
    trusted.sort_unstable();
    trusted
}

/// Most refs the log walk remembers as present before it forgets them all.
const PRESENT_KEPT_MAX: usize = 4096;

/// A task row's key, spelled out only when a fault names it.
struct TaskName<'k>(&'k str, &'k str, &'k str);

impl std::fmt::Display for TaskName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.0, self.1, self.2)
    }
}

/// An intent's or outcome's key, spelled out only when a fault names it.
struct JournalName<'k>(&'k str, u32);

impl std::fmt::Display for JournalName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.0, self.1)
    }
}

pub(super) struct Verifier<'a> {
    pub(super) snap: &'a RedbSnapshot,
    pub(super) sink: &'a Sink,
}

pub(super) type Step = Result<(), String>;

impl<'a> Verifier<'a> {
    /// Payloads, object rows and their index, the journal and the approvals
    /// it names, and each table's footprint; returns the records claiming
    /// the daemon that the journal does not name (none: the object pass
    /// was cut short).
    fn objects_and_journal(
        mut self,
        opts: &Options<'_>,
        counts: &mut Counts,
        tables: &mut Vec<TableFootprint>,
    ) -> Option<Held> {
        let (mut semantic, mut held) = (RowSum::default(), Held::default());
        let walked = self.guarded("objects", |v| v.objects(opts, counts, &mut semantic, &mut held));
        self.guarded("semantic", |v| v.semantic_index(&semantic));
        self.guarded("intents", |v| v.journal(counts));
        self.guarded("receipts", |v| v.receipts(counts));
        self.guarded("approvals", |v| v.approval_rows());
        self.guarded("approval_waits", |v| v.approval_waits());
        self.guarded("approvals", |v| v.approved_records());
        self.guarded("objects", |v| v.owned_objects());
        self.guarded("intents", |v| v.asked_intents());
        self.guarded("(footprint)", |v| {
            *tables = v.footprint()?;
            Ok(())
        });
        walked.then_some(held)
    }

    /// The log's chain, then the worlds, heads, registry, tasks, sessions and
    /// episodes, which are checked against it; then the entries claiming the
    /// daemon against the tasks that committed them. Returns the object
    /// numbers of the invocation records the committed tasks' entries carry
    /// (none: a pass they come from was cut short).
    fn log_and_calls(mut self, threads: usize, counts: &mut Counts) -> Option<Vec<u64>> {
        let mut logged = Logged::default();
        let log_read = self.guarded("log", |v| {
            logged = v.log(counts, threads)?;
            Ok(())
        });
        let Logged { hashes: entry_hashes, records, claimed } = logged;
        let (mut world_refs, mut record_seqs) = (vec![], vec![]);
        let worlds_read = self.guarded("worlds", |v| {
            (world_refs, record_seqs) = v.worlds(&entry_hashes, records, counts, threads)?;
            Ok(())
        });
        // The place index beside the rest, which shares no step with it.
        let (mut calls, mut committed) = (Counts::default(), vec![false; entry_hashes.len()]);
        let mut tasks_read = false;
        let (snap, sink) = (self.snap, self.sink);
        std::thread::scope(|s| {
            let (hashes, calls, committed, tasks_read) = (&entry_hashes, &mut calls, &mut committed, &mut tasks_read);
            s.spawn(move || {
                let mut v = Verifier { snap, sink };
                v.guarded("heads", |v| v.heads(hashes.len() as u64, calls));
                v.guarded("registry_entries", |v| v.registry_entries());
                *tasks_read = v.guarded("tasks", |v| v.tasks(hashes, calls, committed));
                v.guarded("sessions", |v| v.sessions(calls));
                v.guarded("episodes", |v| v.episodes(calls));
                v.guarded("meta", |v| v.referrers_indexed());
            });
            self.guarded("places", |v| v.places(&entry_hashes, &world_refs, counts));
        });
        counts.add(&calls);
        if !(log_read && worlds_read && tasks_read) {
            return None;
        }
        self.forged_entries(&claimed, &committed);
        Some(trusted_records(&committed, &record_seqs))
    }

    /// The referrer index has got no further than the rows go: past its
    /// mark, readers name referrers from the rows themselves.
    fn referrers_indexed(&self) -> Step {
        let (from, ends) = self.snap.referrers_indexed().map_err(|e| e.to_string())?;
        if !from.within(ends) {
            let detail = format!("the referrer index claims {from:?}, past where the rows end ({ends:?})");
            self.sink.push("meta", "referrers_indexed", FaultKind::Mismatch, detail);
        }
        Ok(())
    }

    /// Runs one step, an engine error or panic reported as a fault; says
    /// whether it ran to its end.
    fn guarded(&mut self, table: &'static str, f: impl FnOnce(&mut Self) -> Step) -> bool {
        match guard_panic(|| f(self)) {
            Ok(Ok(())) => true,
            Ok(Err(e)) | Err(e) => {
                self.sink.engine(table, e);
                false
            }
        }
    }

    pub(super) fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<Option<ReadOnlyTable<K, V>>, String> {
        open_existing(self.snap.txn(), def).map_err(|e| e.to_string())
    }

    /// Each table's rows and pages, from the engine's own accounting (a walk
    /// of every table's tree).
    fn footprint(&self) -> Result<Vec<TableFootprint>, String> {
        let txn = self.snap.txn();
        let mut tables = vec![];
        for handle in txn.list_tables().map_err(|e| e.to_string())? {
            let table = txn.open_untyped_table(handle).map_err(|e| e.to_string())?;
            let stats = table.stats().map_err(|e| e.to_string())?;
            tables.push(TableFootprint {
                table: redb::TableHandle::name(&table).to_string(),
                rows: table.len().map_err(|e| e.to_string())?,
                stored_bytes: stats.stored_bytes(),
                metadata_bytes: stats.metadata_bytes(),
                fragmented_bytes: stats.fragmented_bytes(),
            });
        }
        tables.sort_by_key(|t| std::cmp::Reverse(t.page_bytes()));
        Ok(tables)
    }

    pub(super) fn has_object(&self, r: &Ref) -> bool {
        self.snap.has_object(r).unwrap_or(false)
    }

    /// The semantic index holds exactly one row per object, (sha256 of its
    /// semanticId, ref) → seq: its rows, with those of the objects it has not
    /// reached, sum to what the object rows sum to (`objects`). Only when they
    /// do not is each row and each indexed object looked up, to name the faults.
    fn semantic_index(&self, expected: &RowSum) -> Step {
        let mut found = RowSum::default();
        self.snap
            .each_semantic(|key, seq| {
                found.add(&key, seq);
                Ok::<(), crate::error::ReadError>(())
            })
            .map_err(|e| e.to_string())?;
        if found == *expected {
            return Ok(());
        }
        self.snap
            .each_semantic(|SemanticKey(h, r), seq| {
                let r = Ref(r);
                let row = self.snap.object_row(seq)?;
                let named = self.snap.object_at(seq)?;
                match row {
                    Some(row) if named == Some(r) && semantic_key(&row.semantic_id, &r).0 == h => {}
                    Some(_) => self.sink.push(
                        "semantic",
                        r,
                        FaultKind::Mismatch,
                        format!("names object {seq}, which is another or has another semanticId"),
                    ),
                    None => self.sink.push(
                        "semantic",
                        r,
                        FaultKind::Dangling,
                        format!("names object {seq}, which has no row"),
                    ),
                }
                Ok::<(), crate::error::ReadError>(())
            })
            .map_err(|e| e.to_string())?;
        let Some(objects) = self.table(OBJECT_ROWS)? else { return Ok(()) };
        let semantic = tiered::open_read(self.snap.txn(), &SEMANTIC).map_err(|e| e.to_string())?;
        // The objects the index has not reached have no row in it yet.
        let indexed = self.snap.referrers_indexed().map_err(|e| e.to_string())?.0.objects;
        for item in objects.range(..indexed).map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let seq = k.value();
            let Ok(row) = rows::decode::<ObjectRow>("object_rows", &seq, v.value()) else { continue };
            let r = row.hash;
            let key = semantic_key(&row.semantic_id, &r);
            if tiered::find(&semantic, key).map_err(|e| e.to_string())? != Some(seq) {
                self.sink.push(
                    "semantic",
                    format!("{} {r}", row.semantic_id),
                    FaultKind::Missing,
                    "object is not indexed",
                );
            }
        }
        Ok(())
    }

    /// The log's entries and its hash chain, walked in ranges of indexes on
    /// `threads` threads and joined where the ranges meet; returns each
    /// entry's hash by index (zero where an entry is missing or unreadable),
    /// the records to resolve and the entries claiming the daemon.
    fn log(&self, counts: &mut Counts, threads: usize) -> Result<Logged, String> {
        let Some(log) = self.table(LOG)? else { return Ok(Logged::default()) };
        let end = log.last().map_err(|e| e.to_string())?.map(|(k, _)| k.value().saturating_add(1)).unwrap_or(0);
        drop(log);
        let parts = in_ranges(end, threads, |range| {
            let mut walked = LogWalked::default();
            if let Err(e) = self.walk_log(range, &mut walked) {
                walked.error = Some(e);
            }
            walked
        });
        let (mut hashes, mut records, mut claimed): (Vec<Ref>, Vec<Wanted>, Vec<u64>) = (vec![], vec![], vec![]);
        for part in parts {
            if let Some(e) = part.error {
                return Err(e);
            }
            counts.log_entries += part.entries;
            records.extend(part.records);
            claimed.extend(part.claimed);
            let Some((index, prev_entry_hash)) = part.first else { continue };
            let expected = hashes.len() as u64;
            if index != expected {
                self.sink.push("log", index, FaultKind::ChainBreak, format!("entries {expected}..{index} are missing"));
            }
            hashes.resize(index as usize, Ref([0; 32]));
            // The chain across the ranges' seam: the walk checked the rest.
            if let (Some(claimed), Some(pi)) = (prev_entry_hash, index.checked_sub(1))
                && let Some(ph) = hashes.get(pi as usize).filter(|h| h.0 != [0; 32])
                && claimed != *ph
            {
                let detail = format!("prevEntryHash {claimed} is not entry {pi}'s hash {ph}");
                self.sink.push("log", index, FaultKind::ChainBreak, detail);
            }
            hashes.extend(part.hashes);
        }
        Ok(Logged { hashes, records, claimed })
    }

    /// The entries with indexes in `range`.
    fn walk_log(&self, range: Range<u64>, walked: &mut LogWalked) -> Step {
        let Some(log) = self.table(LOG)? else { return Ok(()) };
        let mut prev: Option<(u64, Ref)> = None;
        let mut present = HashSet::new();
        for item in log.range(range).map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let index = k.value();
            walked.entries += 1;
            let decoded: Result<LogEntry, _> = rows::decode("log", &index, v.value());
            let first = *walked.first.get_or_insert((index, decoded.as_ref().ok().map(|e| e.header.prev_entry_hash)));
            let expected = first.0 + walked.hashes.len() as u64;
            if index != expected {
                self.sink.push("log", index, FaultKind::ChainBreak, format!("entries {expected}..{index} are missing"));
            }
            let at = (index - first.0) as usize;
            let entry = match decoded {
                Ok(e) => e,
                Err(c) => {
                    self.sink.corrupt(c);
                    walked.hashes.resize(at + 1, Ref([0; 32]));
                    prev = None;
                    continue;
                }
            };
            self.entry(index, &entry, prev, &mut present, &mut walked.records);
            if entry_claims_daemon(index, &entry.header, &entry.transition_ref) {
                walked.claimed.push(index);
            }
            walked.hashes.resize(at, Ref([0; 32]));
            walked.hashes.push(entry.entry_hash);
            prev = Some((index, entry.entry_hash));
        }
        Ok(())
    }

    /// One entry: its hash, its link to the one before, and the refs it
    /// names. Its record (`transitionRef`) is queued in `records` to be
    /// resolved with the rest (`resolve_objects`); the transitions it names
    /// again and again are looked up once each.
    fn entry(
        &self,
        index: u64,
        entry: &LogEntry,
        prev: Option<(u64, Ref)>,
        present: &mut HashSet<Ref>,
        records: &mut Vec<Wanted>,
    ) {
        let h = &entry.header;
        if h.entry_index != index {
            self.sink.push("log", index, FaultKind::Mismatch, format!("header says entryIndex {}", h.entry_index));
        }
        let recomputed = canonical::entry_hash(h, &entry.transition_ref);
        if recomputed != entry.entry_hash {
            self.sink.push(
                "log",
                index,
                FaultKind::HashMismatch,
                format!("entryHash {} recomputes to {recomputed}", entry.entry_hash),
            );
        }
        if let Some((pi, ph)) = prev
            && pi + 1 == index
            && h.prev_entry_hash != ph
        {
            self.sink.push(
                "log",
                index,
                FaultKind::ChainBreak,
                format!("prevEntryHash {} is not entry {pi}'s hash {ph}", h.prev_entry_hash),
            );
        }
        records.push(Wanted { r: entry.transition_ref, owner: index, world: None });
        let mut must_resolve = vec![];
        if h.written_by.starts_with("coordinator:") {
            must_resolve.push(("transitionFn", h.transition_fn));
            must_resolve.push(("interpreter", h.interpreter));
        }
        // Entries name a few transitions over and over: each is looked up once.
        must_resolve.retain(|(_, r)| !present.contains(r));
        for (field, r) in must_resolve {
            if !self.has_object(&r) {
                self.sink.push("log", index, FaultKind::Dangling, format!("{field} {r} names no object"));
                continue;
            }
            if present.len() >= PRESENT_KEPT_MAX {
                present.clear();
            }
            present.insert(r);
        }
    }

    /// The worlds, each against the entry it heads; returns each world's ref
    /// by revision, and the object number of each entry's record by index
    /// (`NO_OBJECT` where it names none). Ranges of revisions are walked on
    /// `threads` threads.
    fn worlds(
        &self,
        entry_hashes: &[Ref],
        records: Vec<Wanted>,
        counts: &mut Counts,
        threads: usize,
    ) -> Result<(Vec<Ref>, Vec<u64>), String> {
        // No world rows still leaves the log's records to resolve.
        let end = match self.table(WORLD_ROWS)? {
            Some(worlds) => worlds.last().map_err(|e| e.to_string())?.map(|(k, _)| k.value().saturating_add(1)),
            None => None,
        };
        let end = end.unwrap_or(0);
        let parts = in_ranges(end, threads, |range| {
            let mut walked = WorldsWalked::default();
            if let Err(e) = self.walk_worlds(range, entry_hashes, &mut walked) {
                walked.error = Some(e);
            }
            walked
        });
        let mut refs = vec![];
        let mut heads_seen = vec![false; entry_hashes.len()];
        let mut wanted = records;
        for part in parts {
            if let Some(e) = part.error {
                return Err(e);
            }
            counts.worlds += part.worlds;
            wanted.extend(part.roots);
            for (at, r) in part.kept {
                refs.resize(refs.len().max(at + 1), Ref([0; 32]));
                refs[at] = r;
            }
            for revision in part.heads_seen {
                heads_seen[revision] = true;
            }
        }
        for (i, h) in entry_hashes.iter().enumerate() {
            if !heads_seen[i] && h.0 != [0; 32] {
                self.sink.push("log", i, FaultKind::Missing, "no world has this entry as its logHead");
            }
        }
        let mut record_seqs = vec![NO_OBJECT; entry_hashes.len()];
        for (wanted, seq) in self.resolve_objects(wanted)? {
            match (wanted.world, seq) {
                (None, None) => {
                    let detail = format!("transitionRef {} names no object", wanted.r);
                    self.sink.push("log", wanted.owner, FaultKind::Dangling, detail);
                }
                (None, Some(seq)) => {
                    if let Some(at) = usize::try_from(wanted.owner).ok().and_then(|at| record_seqs.get_mut(at)) {
                        *at = seq;
                    }
                }
                (Some(world), seq) => {
                    self.world_referrer(wanted.r, seq.map(|seq| (TARGET_OBJECT, seq)), wanted.owner, world)
                }
            }
        }
        Ok((refs, record_seqs))
    }

    /// Every wanted object ref with its sequence number (none: the store
    /// holds no such object), by one pass over the place index in key order
    /// against the refs sorted: a merge, not a lookup per ref.
    fn resolve_objects(&self, mut wanted: Vec<Wanted>) -> Result<Vec<(Wanted, Option<u64>)>, String> {
        wanted.sort_unstable_by_key(|w| w.r);
        let mut seqs: Vec<Option<u64>> = vec![None; wanted.len()];
        let mut at = 0;
        self.snap
            .each_place(PLACE_OBJECT, |r, seq| {
                while at < wanted.len() && wanted[at].r < r {
                    at += 1;
                }
                while at < wanted.len() && wanted[at].r == r {
                    seqs[at] = Some(seq);
                    at += 1;
                }
                Ok::<(), crate::error::ReadError>(())
            })
            .map_err(|e| e.to_string())?;
        Ok(wanted.into_iter().zip(seqs).collect())
    }

    /// That world `r` at `revision` is indexed as naming `target`: looked up
    /// first where the target sits (`place`), then under each of its places.
    fn world_referrer(&self, target: Ref, place: Option<(u8, u64)>, revision: u64, r: Ref) {
        // Past the index, a world is its own referrer row (`referrers`).
        if self.snap.referrers_indexed().is_ok_and(|(from, _)| revision >= from.worlds) {
            return;
        }
        let under = |place| self.snap.has_referrer_under(place, REFERRER_WORLD, revision).unwrap_or(false);
        if place.is_some_and(under) || self.snap.has_referrer_at(&target, REFERRER_WORLD, revision).unwrap_or(false) {
            return;
        }
        let key = format!("{target} <- world {r}");
        self.sink.push("referrers", key, FaultKind::Missing, "the world is not indexed as a referrer");
    }

    /// The world rows with revisions in `range`.
    fn walk_worlds(&self, range: Range<u64>, entry_hashes: &[Ref], walked: &mut WorldsWalked) -> Step {
        let Some(worlds) = self.table(WORLD_ROWS)? else { return Ok(()) };
        for item in worlds.range(range).map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            walked.worlds += 1;
            let revision = k.value();
            let w: World = match rows::decode("world_rows", &revision, v.value()) {
                Ok(w) => w,
                Err(c) => {
                    self.sink.corrupt(c);
                    continue;
                }
            };
            let r = w.world_ref;
            let recomputed = canonical::world_ref(w.revision, &w.state_root, &w.log_head);
            if recomputed != r {
                self.sink.push("worlds", r, FaultKind::HashMismatch, format!("world ref recomputes to {recomputed}"));
            }
            if w.revision != revision {
                let detail = format!("world {r} says revision {}", w.revision);
                self.sink.push("world_rows", revision, FaultKind::Mismatch, detail);
            }
            // A revision past the log heads no entry (reported below); it is not kept.
            if let Some(at) = usize::try_from(revision).ok().filter(|at| *at < entry_hashes.len()) {
                walked.kept.push((at, r));
            }
            // The entry this world heads, when its log head is the hash of
            // the entry at its revision: then that is where the log head's
            // referrer row sits; the state root's place is found with the
            // rest (`resolve_objects`).
            let heads = usize::try_from(w.revision).ok().filter(|at| entry_hashes.get(*at) == Some(&w.log_head));
            self.world_referrer(w.log_head, heads.map(|_| (TARGET_ENTRY, w.revision)), w.revision, r);
            walked.roots.push(Wanted { r: w.state_root, owner: w.revision, world: Some(r) });
            match heads {
                Some(at) => walked.heads_seen.push(at),
                None => self.sink.push(
                    "worlds",
                    r,
                    FaultKind::Dangling,
                    format!("logHead {} is not the hash of entry {}", w.log_head, w.revision),
                ),
            }
        }
        Ok(())
    }

    /// The place index: its directory names run tables that exist and at
    /// most one merge; each of its rows names an object, entry or world that
    /// has that ref; and it places as many of each as the store holds (so,
    /// its rows being distinct, every one). Only when a count differs is
    /// each object, entry or world looked up, to name the unplaced.
    fn places(&self, entry_hashes: &[Ref], world_refs: &[Ref], counts: &Counts) -> Step {
        self.place_runs()?;
        let object_rows = self.table(OBJECT_ROWS)?;
        let named_at = |seq: u64| crate::referrers::object_ref(object_rows.as_ref(), seq).map_err(|e| e.to_string());
        let at = |refs: &[Ref], i: u64| usize::try_from(i).ok().and_then(|i| refs.get(i)).copied();
        let objects = object_rows.as_ref().map(|t| t.len()).transpose().map_err(|e| e.to_string())?;
        for (kind, what, held) in [
            (PLACE_OBJECT, "object", objects.unwrap_or(0)),
            (PLACE_ENTRY, "entry", counts.log_entries),
            (PLACE_WORLD, "world", counts.worlds),
        ] {
            let mut placed = 0u64;
            self.snap
                .each_place(kind, |r, position| {
                    placed += 1;
                    let there = match kind {
                        PLACE_OBJECT => named_at(position).map_err(crate::error::ReadError::Storage)?,
                        PLACE_ENTRY => at(entry_hashes, position),
                        _ => at(world_refs, position),
                    };
                    if there != Some(r) {
                        let detail = match there {
                            Some(other) => format!("places it at {what} {position}, which is {other}"),
                            None => format!("places it at {what} {position}, which the store does not hold"),
                        };
                        self.sink.push("places", r, FaultKind::Dangling, detail);
                    }
                    Ok::<(), crate::error::ReadError>(())
                })
                .map_err(|e| e.to_string())?;
            if placed != held {
                self.name_unplaced(kind, what, entry_hashes, world_refs, &named_at)?;
            }
        }
        Ok(())
    }

    /// Each object, entry or world of `kind` the place index does not place where it is.
    fn name_unplaced(
        &self,
        kind: u8,
        what: &str,
        entry_hashes: &[Ref],
        world_refs: &[Ref],
        named_at: &dyn Fn(u64) -> Result<Option<Ref>, String>,
    ) -> Step {
        let held: Vec<(u64, Ref)> = match kind {
            PLACE_OBJECT => {
                let Some(rows) = self.table(OBJECT_ROWS)? else { return Ok(()) };
                let mut out = vec![];
                for item in rows.iter().map_err(|e| e.to_string())? {
                    let seq = item.map_err(|e| e.to_string())?.0.value();
                    if let Some(r) = named_at(seq)? {
                        out.push((seq, r));
                    }
                }
                out
            }
            PLACE_ENTRY => (0..).zip(entry_hashes.iter().copied()).collect(),
            _ => (0..).zip(world_refs.iter().copied()).collect(),
        };
        for (position, r) in held.into_iter().filter(|(_, r)| r.0 != [0; 32]) {
            let placed = self.snap.place(&r, kind).map_err(|e| e.to_string())?;
            if placed != Some(position) {
                self.sink.push("places", r, FaultKind::Missing, format!("{what} {position} is not placed"));
            }
        }
        Ok(())
    }

    /// The run directory: each run's table exists, and a run being merged
    /// has exactly one output to go to.
    fn place_runs(&self) -> Step {
        let Some(dir) = self.table(PLACES.runs)? else { return Ok(()) };
        let runs = tiered::runs(&dir).map_err(|e| e.to_string())?;
        let building = runs.iter().filter(|r| r.state == tiered::RUN_BUILDING).count();
        let merging = runs.iter().filter(|r| r.state == tiered::RUN_MERGING).count();
        if building > 1 || (building == 1) != (merging > 0) {
            let detail = format!("{building} merge output(s) for {merging} run(s) being merged");
            self.sink.push("place_runs", "-", FaultKind::Mismatch, detail);
        }
        for run in &runs {
            let name = tiered::run_name(&PLACES, run.id);
            match self.table(TableDefinition::<PlaceKey, u64>::new(&name))? {
                None => self.sink.push(
                    "place_runs",
                    run.id,
                    FaultKind::Missing,
                    format!("names table {name}, which is absent"),
                ),
                Some(table) if run.state != tiered::RUN_BUILDING => self.place_filter(run.id, &table)?,
                Some(_) => {}
            }
        }
        let Some(filters) = PLACES.filters else { return Ok(()) };
        if let Some(filters) = self.table(filters)? {
            for item in filters.iter().map_err(|e| e.to_string())? {
                let id = item.map_err(|e| e.to_string())?.0.value();
                if !runs.iter().any(|r| r.id == id && r.state != tiered::RUN_BUILDING) {
                    self.sink.push("place_filters", id, FaultKind::Dangling, "a filter of no complete run");
                }
            }
        }
        Ok(())
    }

    /// A complete run has a filter, and the filter holds each of its keys
    /// (one it lacked would hide a row from the writer, which would then
    /// write an object twice).
    fn place_filter(&self, id: u32, run: &redb::ReadOnlyTable<PlaceKey, u64>) -> Step {
        let stored = match PLACES.filters {
            Some(def) => self.table(def)?.and_then(|t| t.get(id).ok().flatten().map(|v| v.value().to_vec())),
            None => return Ok(()),
        };
        let Some(bloom) = stored.as_deref().and_then(crate::bloom::Bloom::from_bytes) else {
            let detail = if stored.is_some() { "does not decode" } else { "is absent" };
            self.sink.push("place_filters", id, FaultKind::Missing, format!("the filter of a complete run {detail}"));
            return Ok(());
        };
        for item in run.iter().map_err(|e| e.to_string())? {
            let key = item.map_err(|e| e.to_string())?.0.value();
            if !bloom.may_contain(<PlaceKey as redb::Value>::as_bytes(&key).as_ref()) {
                let detail = format!("rules out {} (kind {}), which the run holds", Ref(key.0), key.1);
                self.sink.push("place_filters", id, FaultKind::Mismatch, detail);
                break;
            }
        }
        Ok(())
    }

    fn heads(&self, log_len: u64, counts: &mut Counts) -> Step {
        let heads = self.snap.heads().map_err(|e| e.to_string())?;
        counts.heads = heads.len() as u64;
        for (name, r) in heads {
            if name == SELECTED_HEAD {
                match self.snap.world(&r) {
                    Ok(Some(w)) if w.revision + 1 == log_len => {}
                    Ok(Some(w)) => self.sink.push(
                        "heads",
                        &name,
                        FaultKind::Mismatch,
                        format!("selected world has revision {} but the log has {log_len} entries", w.revision),
                    ),
                    Ok(None) => self.sink.push("heads", &name, FaultKind::Dangling, format!("names absent world {r}")),
                    Err(e) => self.sink.push("worlds", r, FaultKind::Decode, e.to_string()),
                }
            } else if !self.has_object(&r) {
                self.sink.push("heads", &name, FaultKind::Dangling, format!("names absent object {r}"));
            }
        }
        if log_len > 0 && self.snap.selected_head().ok().flatten().is_none() {
            self.sink.push("heads", SELECTED_HEAD, FaultKind::Missing, "the log has entries but no world is selected");
        }
        Ok(())
    }

    fn registry_entries(&self) -> Step {
        let Some(t) = self.table(REGISTRY_ENTRIES)? else { return Ok(()) };
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let (name, id) = k.value();
            if !self.has_object(&Ref(v.value())) {
                self.sink.push(
                    "registry_entries",
                    format!("{name} {id}"),
                    FaultKind::Dangling,
                    "transitionFn names no object",
                );
            }
        }
        Ok(())
    }

    fn journal(&self, counts: &mut Counts) -> Step {
        let Some(intents) = self.table(INTENTS)? else { return Ok(()) };
        let outcomes = self.table(OUTCOMES)?;
        let open = self.table(OPEN_INTENTS)?;
        let mut spend: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        for item in intents.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            counts.intents += 1;
            let (inv, ord) = k.value();
            let key = JournalName(inv, ord);
            let intent: EffectIntent = match rows::decode("intents", &key, v.value()) {
                Ok(i) => i,
                Err(c) => {
                    self.sink.corrupt(c);
                    continue;
                }
            };
            *spend.entry((intent.episode.clone(), intent.effect.clone(), intent.scope.clone())).or_default() +=
                intent.cost;
            if !self.has_object(&intent.request_ref) {
                self.sink.push(
                    "intents",
                    &key,
                    FaultKind::Dangling,
                    format!("requestRef {} names no object", intent.request_ref),
                );
            }
            if intent.budget_before < intent.cost || intent.budget_after != intent.budget_before - intent.cost {
                self.sink.push("intents", &key, FaultKind::Mismatch, "budgetAfter is not budgetBefore - cost");
            }
            let has_outcome = outcomes.as_ref().and_then(|t| t.get((inv, ord)).ok().flatten()).is_some();
            let is_open = open.as_ref().and_then(|t| t.get((inv, ord)).ok().flatten()).is_some();
            if has_outcome == is_open {
                let detail =
                    if has_outcome { "has an outcome but is still open" } else { "has no outcome and is not open" };
                self.sink.push("intents", &key, FaultKind::Mismatch, detail);
            }
            if let Some(task) = TaskKey::from_invocation_id(inv)
                && self.snap.task(&task).ok().flatten().is_none()
            {
                self.sink.push("intents", &key, FaultKind::Dangling, "its task does not exist");
            }
        }
        if let Some(outcomes) = outcomes {
            for item in outcomes.iter().map_err(|e| e.to_string())? {
                let (k, v) = item.map_err(|e| e.to_string())?;
                counts.outcomes += 1;
                let (inv, ord) = k.value();
                let key = JournalName(inv, ord);
                if intents.get((inv, ord)).map_err(|e| e.to_string())?.is_none() {
                    self.sink.push("outcomes", &key, FaultKind::Dangling, "outcome without an intent");
                }
                match rows::decode::<EffectOutcome>("outcomes", &key, v.value()) {
                    Ok(o) => {
                        if let Some(rec) = o.record_ref {
                            // The index names this outcome, or (a record that names no
                            // invocation, shared by alike decisions) another carrying it.
                            let own = |k: &JournalKey| k.invocation_id == inv && k.ordinal == ord;
                            let carried = match self.snap.record_journal(&rec).ok().flatten() {
                                Some(k) if own(&k) => true,
                                Some(_) => {
                                    let mapped = self.snap.journal_of_record(&rec).ok().flatten();
                                    mapped.is_some_and(|(_, item)| item.outcome.and_then(|o| o.record_ref) == Some(rec))
                                }
                                None => false,
                            };
                            if !carried {
                                self.sink.push(
                                    "record_journal",
                                    rec,
                                    FaultKind::Missing,
                                    format!("does not map back to {key}"),
                                );
                            }
                        }
                        for r in o.record_ref.iter().chain(o.result_ref.iter()) {
                            if !self.has_object(r) {
                                self.sink.push("outcomes", &key, FaultKind::Dangling, format!("{r} names no object"));
                            }
                        }
                    }
                    Err(c) => self.sink.corrupt(c),
                }
            }
        }
        self.record_journal_rows()?;
        self.spend(&spend)
    }

    /// Each record journal row names an outcome that carries its record; a
    /// row keyed by hash is for a record the store does not hold (the
    /// outcomes' walk checks the other way: each record maps to a carrier).
    fn record_journal_rows(&self) -> Step {
        let outcomes = self.table(OUTCOMES)?;
        // The row of `record` at `at` in `table`, whose bytes are `row`.
        let check = |table: &'static str, at: &dyn std::fmt::Display, record: &Ref, row: &[u8]| -> Step {
            let key = match rows::decode::<JournalKey>(table, at, row) {
                Ok(key) => key,
                Err(c) => {
                    self.sink.corrupt(c);
                    return Ok(());
                }
            };
            let name = JournalName(&key.invocation_id, key.ordinal);
            let carried = match outcomes.as_ref() {
                Some(t) => {
                    t.get((key.invocation_id.as_str(), key.ordinal)).map_err(|e| e.to_string())?.is_some_and(|v| {
                        rows::decode::<EffectOutcome>("outcomes", &name, v.value())
                            .is_ok_and(|o| o.record_ref == Some(*record))
                    })
                }
                None => false,
            };
            if !carried {
                self.sink.push(table, at, FaultKind::Dangling, format!("names {name}, which does not carry {record}"));
            }
            Ok(())
        };
        if let Some(rows_by_seq) = self.table(RECORD_JOURNAL)? {
            let object_rows = self.table(OBJECT_ROWS)?;
            for item in rows_by_seq.iter().map_err(|e| e.to_string())? {
                let (k, v) = item.map_err(|e| e.to_string())?;
                let seq = k.value();
                match crate::referrers::object_ref(object_rows.as_ref(), seq).map_err(|e| e.to_string())? {
                    Some(record) => check("record_journal_by_seq", &seq, &record, v.value())?,
                    None => {
                        self.sink.push("record_journal_by_seq", seq, FaultKind::Dangling, "no object has this number")
                    }
                }
            }
        }
        if let Some(rows_by_hash) = self.table(RECORD_JOURNAL_OF_ABSENT)? {
            for item in rows_by_hash.iter().map_err(|e| e.to_string())? {
                let (k, v) = item.map_err(|e| e.to_string())?;
                let record = Ref(k.value());
                if self.has_object(&record) {
                    let detail = "a held record's row is keyed by its hash";
                    self.sink.push("record_journal", record, FaultKind::Mismatch, detail);
                }
                check("record_journal", &record, &record, v.value())?;
            }
        }
        Ok(())
    }

    fn spend(&self, expected: &BTreeMap<(String, String, String), u64>) -> Step {
        let mut stored: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        if let Some(t) = self.table(SPEND)? {
            for item in t.iter().map_err(|e| e.to_string())? {
                let (k, v) = item.map_err(|e| e.to_string())?;
                let (a, b, c) = k.value();
                stored.insert((a.to_string(), b.to_string(), c.to_string()), v.value());
            }
        }
        let keys: HashSet<_> = expected.keys().chain(stored.keys()).collect();
        for key in keys {
            let (want, have) = (expected.get(key).copied().unwrap_or(0), stored.get(key).copied().unwrap_or(0));
            if want != have {
                let name = format!("{} {} {}", key.0, key.1, key.2);
                self.sink.push(
                    "spend",
                    name,
                    FaultKind::Mismatch,
                    format!("spend is {have} but intents sum to {want}"),
                );
            }
        }
        Ok(())
    }

    /// Each task row against the entry it committed; marks in `committed`
    /// each entry a committed task names (by index and hash).
    fn tasks(&self, entry_hashes: &[Ref], counts: &mut Counts, committed: &mut [bool]) -> Step {
        let Some(tasks) = self.table(TASKS)? else { return Ok(()) };
        let open = self.table(OPEN_TASKS)?;
        for item in tasks.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            counts.tasks += 1;
            let (surface, task_id, episode) = k.value();
            let key = TaskName(surface, episode, task_id);
            let task: Task = match rows::decode("tasks", &key, v.value()) {
                Ok(t) => t,
                Err(c) => {
                    self.sink.corrupt(c);
                    continue;
                }
            };
            let is_open = open.as_ref().and_then(|t| t.get((surface, episode, task_id)).ok().flatten()).is_some();
            if is_open != (task.state == TaskState::Started) {
                self.sink.push(
                    "tasks",
                    &key,
                    FaultKind::Mismatch,
                    format!("state {} disagrees with the open-task set", task.state.as_str()),
                );
            }
            match (&task.state, &task.committed) {
                (TaskState::Committed, Some(c)) => {
                    let at =
                        usize::try_from(c.entry_index).ok().filter(|at| entry_hashes.get(*at) == Some(&c.entry_hash));
                    if let Some(named) = at.and_then(|at| committed.get_mut(at)) {
                        *named = true;
                    } else {
                        self.sink.push(
                            "tasks",
                            &key,
                            FaultKind::Dangling,
                            format!("committed entry {} is not in the log", c.entry_index),
                        );
                    }
                    // The world of its entry, as a commit makes it; else any world by that ref.
                    let at_its_entry = self.snap.world_at(c.entry_index).ok().flatten() == Some(c.world_ref);
                    if !at_its_entry && self.snap.world(&c.world_ref).ok().flatten().is_none() {
                        self.sink.push(
                            "tasks",
                            &key,
                            FaultKind::Dangling,
                            format!("world {} does not exist", c.world_ref),
                        );
                    }
                }
                (TaskState::Committed, None) => {
                    self.sink.push("tasks", &key, FaultKind::Missing, "committed without a result")
                }
                (_, Some(_)) => {
                    self.sink.push("tasks", &key, FaultKind::Mismatch, "a result on a task that is not committed")
                }
                _ => {}
            }
            for r in &task.effect_records {
                if !self.has_object(r) {
                    self.sink.push("tasks", &key, FaultKind::Dangling, format!("effect record {r} names no object"));
                }
            }
        }
        Ok(())
    }

    /// The episode index against the task and session rows: each episode's
    /// calls numbered from 0 without a gap, each naming a task of that
    /// episode, no task twice and none left out; its summary the one those
    /// tasks make in that order; one activity row per summary, at its last
    /// activity; the session index naming each session under its episode.
    fn episodes(&self, counts: &Counts) -> Step {
        let (Some(calls), Some(tasks)) = (self.table(EPISODE_CALLS)?, self.table(TASKS)?) else {
            if counts.tasks > 0 {
                self.sink.push(
                    "episode_calls",
                    "-",
                    FaultKind::Missing,
                    format!("{} tasks, none numbered", counts.tasks),
                );
            }
            return Ok(());
        };
        let summaries = self.table(EPISODES)?;
        let mut numbered: HashSet<[u8; 16]> = HashSet::new();
        let mut episodes: Vec<(String, EpisodeRow)> = vec![];
        for item in calls.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let ((episode, seq), (surface, task_id)) = (k.value(), v.value());
            let key = format!("{episode} {seq}");
            if episodes.last().is_none_or(|(e, _)| e != episode) {
                episodes.push((episode.to_string(), EpisodeRow::default()));
            }
            let row = &mut episodes.last_mut().expect("pushed above").1;
            if seq != row.calls {
                self.sink.push("episode_calls", &key, FaultKind::Missing, format!("position {} is missing", row.calls));
            }
            let id = blake3::hash(format!("{surface}:{episode}:{task_id}").as_bytes());
            if !numbered.insert(id.as_bytes()[..16].try_into().expect("16 bytes")) {
                self.sink.push("episode_calls", &key, FaultKind::Mismatch, format!("task {task_id} is numbered twice"));
            }
            match tasks.get((surface, task_id, episode)).map_err(|e| e.to_string())? {
                Some(t) => match rows::decode::<Task>("tasks", &key, t.value()) {
                    Ok(task) => {
                        row.created(&task);
                    }
                    Err(c) => self.sink.corrupt(c),
                },
                None => self.sink.push("episode_calls", &key, FaultKind::Dangling, "names a task that has no row"),
            }
            row.calls = seq + 1;
        }
        if numbered.len() as u64 != counts.tasks {
            let detail = format!("{} tasks, {} numbered in their episodes", counts.tasks, numbered.len());
            self.sink.push("episode_calls", "-", FaultKind::Mismatch, detail);
        }
        self.summaries(&episodes, summaries.as_ref())?;
        self.episode_sessions()
    }

    /// Each episode's summary row and activity row, against what its calls make.
    fn summaries(
        &self,
        episodes: &[(String, EpisodeRow)],
        summaries: Option<&ReadOnlyTable<&'static str, &'static [u8]>>,
    ) -> Step {
        let stored = summaries.map(|t| t.len()).transpose().map_err(|e| e.to_string())?.unwrap_or(0);
        if stored != episodes.len() as u64 {
            let detail = format!("{stored} summaries for {} episodes with calls", episodes.len());
            self.sink.push("episodes", "-", FaultKind::Mismatch, detail);
        }
        let activity = self.table(EPISODES_BY_ACTIVITY)?;
        for (episode, made) in episodes {
            let found = match summaries.map(|t| t.get(episode.as_str())).transpose().map_err(|e| e.to_string())? {
                Some(Some(v)) => rows::decode::<EpisodeRow>("episodes", episode, v.value()),
                _ => {
                    self.sink.push("episodes", episode, FaultKind::Missing, "an episode with calls has no summary");
                    continue;
                }
            };
            match found {
                Ok(found) if found != *made => self.sink.push(
                    "episodes",
                    episode,
                    FaultKind::Mismatch,
                    format!(
                        "the summary says {} calls, {:?}, {:?}; its calls make {} calls, {:?}, {:?}",
                        found.calls, found.states, found.effects, made.calls, made.states, made.effects
                    ),
                ),
                Ok(_) => {}
                Err(c) => self.sink.corrupt(c),
            }
            let listed = activity.as_ref().map(|t| t.get((made.last_at, episode.as_str()))).transpose();
            if !matches!(listed.map_err(|e| e.to_string())?, Some(Some(_))) {
                let detail = format!("not listed at its last activity {}", made.last_at);
                self.sink.push("episodes_by_activity", episode, FaultKind::Missing, detail);
            }
        }
        let listed = activity.map(|t| t.len()).transpose().map_err(|e| e.to_string())?.unwrap_or(0);
        if listed != episodes.len() as u64 {
            let detail = format!("{listed} rows for {} episodes", episodes.len());
            self.sink.push("episodes_by_activity", "-", FaultKind::Mismatch, detail);
        }
        Ok(())
    }

    /// The session index: each session under its episode, and nothing else.
    fn episode_sessions(&self) -> Step {
        let indexed = self.table(EPISODE_SESSIONS)?;
        let mut sessions = 0u64;
        if let Some(t) = self.table(SESSIONS)? {
            for item in t.iter().map_err(|e| e.to_string())? {
                let (k, v) = item.map_err(|e| e.to_string())?;
                let id = Ref(k.value());
                let Ok(session) = rows::decode::<Session>("sessions", &id, v.value()) else { continue };
                sessions += 1;
                let found = indexed.as_ref().map(|t| t.get((session.episode.as_str(), id.0))).transpose();
                if !matches!(found.map_err(|e| e.to_string())?, Some(Some(_))) {
                    let key = format!("{} {id}", session.episode);
                    self.sink.push(
                        "episode_sessions",
                        key,
                        FaultKind::Missing,
                        "a session is not listed under its episode",
                    );
                }
            }
        }
        let listed = indexed.map(|t| t.len()).transpose().map_err(|e| e.to_string())?.unwrap_or(0);
        if listed != sessions {
            let detail = format!("{listed} rows for {sessions} sessions");
            self.sink.push("episode_sessions", "-", FaultKind::Mismatch, detail);
        }
        Ok(())
    }

    fn sessions(&self, counts: &mut Counts) -> Step {
        let Some(t) = self.table(SESSIONS)? else { return Ok(()) };
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            counts.sessions += 1;
            if let Err(c) = rows::decode::<Session>("sessions", &Ref(k.value()), v.value()) {
                self.sink.corrupt(c);
            }
        }
        Ok(())
    }

    fn receipts(&self, counts: &mut Counts) -> Step {
        let Some(t) = self.table(RECEIPTS)? else { return Ok(()) };
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            counts.receipts += 1;
            let id = k.value();
            match rows::decode::<Receipt>("receipts", &id, v.value()) {
                Ok(Receipt { result_ref: Some(w), .. }) if self.snap.world(&w).ok().flatten().is_none() => {
                    self.sink.push("receipts", id, FaultKind::Dangling, format!("resolved to absent world {w}"));
                }
                Ok(_) => {}
                Err(c) => self.sink.corrupt(c),
            }
        }
        Ok(())
    }
}

/// What a range of log entries held.
#[derive(Default)]
struct LogWalked {
    entries: u64,
    /// The range's first entry's index, and the hash it names as the one
    /// before it (none: the entry does not decode).
    first: Option<(u64, Option<Ref>)>,
    /// Each entry's hash from the first on (zero: missing or unreadable).
    hashes: Vec<Ref>,
    /// Each entry's record, to be resolved (`resolve_objects`).
    records: Vec<Wanted>,
    /// The indexes of the entries claiming the daemon as their author.
    claimed: Vec<u64>,
    error: Option<String>,
}

/// What the log walk gives the checks after it.
#[derive(Default)]
struct Logged {
    /// Each entry's hash by index (zero: missing or unreadable).
    hashes: Vec<Ref>,
    /// Each entry's record, to be resolved (`resolve_objects`).
    records: Vec<Wanted>,
    /// The indexes of the entries claiming the daemon as their author
    /// (`model::entry_claims_daemon`), ascending.
    claimed: Vec<u64>,
}

/// An object ref a check needs resolved: an entry's record (`owner` is the
/// entry's index) or a world's state root (`owner` is its revision, `world`
/// its ref).
struct Wanted {
    r: Ref,
    owner: u64,
    world: Option<Ref>,
}

/// What a range of world rows held.
#[derive(Default)]
struct WorldsWalked {
    worlds: u64,
    /// (revision, world ref) of each world whose revision heads an entry.
    kept: Vec<(usize, Ref)>,
    /// The revisions whose world names its entry's hash as its log head.
    heads_seen: Vec<usize>,
    /// Each world's state root, to be resolved (`resolve_objects`).
    roots: Vec<Wanted>,
    error: Option<String>,
}

/// Ranges per thread of `in_ranges`: a thread takes the next range when
/// done with one, so one that meets slower rows does not hold the rest up.
const RANGES_PER_THREAD: u64 = 16;

/// Walks `0..end` in ranges on `threads` threads (0: one per core); what
/// each range gave, in range order.
pub(super) fn in_ranges<T: Send>(end: u64, threads: usize, walk: impl Fn(Range<u64>) -> T + Sync) -> Vec<T> {
    let threads = match threads {
        0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        n => n,
    }
    .clamp(1, 64) as u64;
    let ranges = (threads * RANGES_PER_THREAD).min(end.max(1));
    let next = AtomicU64::new(0);
    let take = || {
        let mut out = vec![];
        loop {
            let range = next.fetch_add(1, Ordering::Relaxed);
            if range >= ranges {
                return out;
            }
            out.push((range, walk(split(end, range, ranges)..split(end, range + 1, ranges))));
        }
    };
    let mut parts: Vec<(u64, T)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(take)).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    parts.sort_unstable_by_key(|(range, _)| *range);
    parts.into_iter().map(|(_, t)| t).collect()
}

/// The start of part `part` of `parts` of the range `0..end`.
fn split(end: u64, part: u64, parts: u64) -> u64 {
    (end as u128 * part as u128 / parts as u128) as u64
}
