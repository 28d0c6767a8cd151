//! The embedded engine's rows: every table of `tables`, opened once per
//! write transaction.

use super::apply::{R, Rows};
use super::approvals::ApprovalRows;
use super::episodes::Moves;
use crate::error::{ReadError, WriteError, storage};
use crate::media::WalIo;
use crate::model::*;
use crate::payloads::META_PAYLOAD_LEN;
use crate::referrers::{Indexed, REFERRERS_BEHIND_MAX};
use crate::refs::Ref;
use crate::rows;
use crate::tables::*;
use crate::tiered;
use redb::{ReadableTable, ReadableTableMetadata, Table, TableDefinition, TableHandle, WriteTransaction};

pub(crate) struct W<'t> {
    /// Opened once a transaction: it reads the referrer mark, the place
    /// index's version and the payload file's end, and writes the payload
    /// file's new end, the log frame the database holds and, in an index
    /// pass, the new mark.
    meta: Meta<'t>,
    object_rows: Table<'t, u64, &'static [u8]>,
    /// This batch's payloads, put in the payload file by `finish`.
    appends: crate::payloads::Appends<'t>,
    /// The payload file, read back when the referrers of objects are indexed.
    payloads: &'t dyn WalIo,
    /// How many referrers the writer's batches leave unindexed at most
    /// (`REFERRERS_BEHIND_MAX`); `None` in the transactions of an upgrade, a
    /// recovery or a new store, which leave the index to the next batch, and
    /// once a pass ran in this transaction.
    referrers_behind_max: Option<u64>,
    log: Table<'t, u64, &'static [u8]>,
    world_rows: Table<'t, u64, &'static [u8]>,
    heads: Table<'t, &'static str, Key32>,
    registry_entries: Lazy<'t, (&'static str, &'static str), Key32>,
    intents: Lazy<'t, (&'static str, u32), &'static [u8]>,
    outcomes: Lazy<'t, (&'static str, u32), &'static [u8]>,
    open_intents: Lazy<'t, (&'static str, u32), ()>,
    spend: Lazy<'t, (&'static str, &'static str, &'static str), u64>,
    tasks: Table<'t, (&'static str, &'static str, &'static str), &'static [u8]>,
    open_tasks: Lazy<'t, (&'static str, &'static str, &'static str), ()>,
    sessions: Lazy<'t, Key32, &'static [u8]>,
    receipts: Lazy<'t, &'static str, &'static [u8]>,
    /// Written only by the batches that index referrers (`index_referrers`).
    referrers: Lazy<'t, ReferrerKey, ()>,
    referrers_of_absent: Lazy<'t, (Key32, u8, u64), ()>,
    /// The place index: its young table and its runs, with their filters.
    place_index: tiered::WriteIndex<'t, PlaceKey, u64>,
    /// What the writer keeps across its transactions (`open_with`): the
    /// filters and the run directory, the places of objects found in runs,
    /// and the places of rows the index has not reached.
    kept: Option<&'t mut Kept>,
    /// The places of rows the index has not reached, for a transaction of
    /// no writer's (`open`).
    own_unplaced: Unplaced,
    /// Whether the places of rows past the mark are caught up with this
    /// transaction's mark (`unplaced`).
    unplaced_ready: bool,
    /// The semantic index's young table: written, never read, here, and
    /// only by the batches that index referrers (`index_referrers`).
    semantic: Lazy<'t, SemanticKey, u64>,
    /// Rows this batch wrote to the place and the semantic index (what
    /// their merges are paced by).
    placed: u64,
    semantic_written: u64,
    record_journal: Lazy<'t, u64, &'static [u8]>,
    record_journal_of_absent: Lazy<'t, Key32, &'static [u8]>,
    episodes: Table<'t, &'static str, &'static [u8]>,
    episode_calls: Table<'t, (&'static str, u64), (&'static str, &'static str)>,
    episodes_by_activity: Table<'t, (u64, &'static str), ()>,
    episode_sessions: Lazy<'t, (&'static str, Key32), ()>,
    /// Opened by the first request that needs them (few batches do).
    approval_tables: Option<ApprovalTables<'t>>,
    txn: &'t WriteTransaction,
    /// Tasks started in this batch whose `open_tasks` row is not written yet: a
    /// task that also ends in the batch (the usual create-and-commit) never
    /// touches that table. `finish` writes the rest.
    started: std::collections::HashSet<TaskKey>,
    /// Task rows this batch wrote, put in `tasks` by `finish`: a call begun
    /// and ended in one batch (every pure call) writes its row once, at its
    /// final size. A row inserted at the tree's right edge fills its page,
    /// but one that grows in place splits its full page into two halves.
    task_rows: std::collections::HashMap<TaskKey, Task>,
    /// The next object sequence number, read once per batch.
    next_seq: Option<u64>,
    /// Where referrer targets named in this batch sit (at most
    /// `PLACES_KEPT_MAX`): a much-named target is looked up once a batch.
    places: std::collections::HashMap<Ref, (u8, u64)>,
    /// The batch's episode moves, applied by `finish`: an episode's summary
    /// is read, decoded, moved by all of the batch's calls in it, and written
    /// once a batch, not twice a call.
    moves: Moves,
    /// The summaries of the episodes in `moves` as the batch found them,
    /// decoded at the first move (where a summary that does not decode
    /// refuses that request alone, as any row it reads).
    summaries: std::collections::HashMap<String, Option<EpisodeRow>>,
}

/// Most target places a batch remembers; past it they are looked up again.
const PLACES_KEPT_MAX: usize = 4096;

/// What a writer keeps across its transactions; a writer that reopens its
/// database starts anew.
#[derive(Default)]
pub(crate) struct Kept {
    /// The place index's run filters and run directory, and the places of
    /// objects found in runs.
    pub(crate) filters: tiered::Filters,
    unplaced: Unplaced,
}

/// The places of the rows past the referrer mark (`Indexed`). The place
/// index holds the places of the rows before the mark: the index pass
/// (`W::index_referrers`) writes a row's place with its referrer rows, all
/// of them in key order, so no batch inserts into the index on the commit
/// path. Until then a writer finds the places here, and a reader from the
/// rows themselves (`read.rs`). At most `REFERRERS_BEHIND_MAX` rows and a
/// batch's wait.
#[derive(Default)]
pub(crate) struct Unplaced {
    /// The mark the places were read or pruned at; `None`: not read yet.
    mark: Option<Indexed>,
    /// Where the rows whose places these are end. A transaction that did
    /// not commit (a batch the log could not take) leaves it past where the
    /// rows end: the next one reads the places again.
    ends: Indexed,
    places: std::collections::HashMap<PlaceKey, u64>,
    /// What rows past the mark name, by (kind, position), noted as the
    /// writer wrote them: the index pass takes a noted row's referrer and
    /// semantic rows from here instead of reading and decoding the row (and
    /// an object's payload) back, and reads the rows it finds no note of
    /// (those read again by `catch_up`, those past `NOTED_REFS_MAX`).
    named: std::collections::HashMap<(u8, u64), Named>,
    /// The targets `named` holds, at most `NOTED_REFS_MAX`.
    noted_refs: usize,
}

/// Most targets the writer keeps noted for the index pass (2 MiB of refs):
/// an object may name up to `REFS_INDEXED_PER_OBJECT_MAX` refs, and the
/// rows past them are read back instead.
pub const NOTED_REFS_MAX: usize = 1 << 16;

/// What a row names: the targets of its referrer rows (sorted, each once),
/// and an object's semantic index row.
pub(crate) struct Named {
    targets: Vec<Ref>,
    semantic: Option<SemanticKey>,
}

impl Named {
    fn row(targets: Vec<Ref>) -> Named {
        Named { targets: crate::referrers::each_once(targets), semantic: None }
    }

    fn object(o: &NewObject) -> Named {
        let named = Named::row(crate::referrers::object_targets(&o.hash, &o.payload));
        Named { semantic: Some(semantic_key(&o.semantic_id, &o.hash)), ..named }
    }
}

/// What the rows from a mark up to where they end name, as the index pass
/// writes it: (target, kind, position) per referrer row, and the objects'
/// semantic rows.
type NamedPast = (Vec<(Ref, u8, u64)>, Vec<(SemanticKey, u64)>);

impl Unplaced {
    /// Brings the places up to the committed mark `mark` and the rows that
    /// end at `ends`: those the index has taken since are let go, or, the
    /// first time and whenever the rows are not the ones the places were
    /// made for, all are read from the rows past the mark (`read`). Never
    /// pruned to a mark of the transaction's own: it may not commit.
    fn catch_up(&mut self, mark: Indexed, ends: Indexed, read: impl FnOnce() -> R<Vec<(PlaceKey, u64)>>) -> R<()> {
        match self.mark {
            Some(known) if known == mark && self.ends == ends => {}
            Some(_) if self.ends == ends => {
                self.places.retain(|key, position| *position >= mark.of(key.1));
                self.named.retain(|(kind, position), _| *position >= mark.of(*kind));
                self.noted_refs = self.named.values().map(|n| n.targets.len()).sum();
            }
            _ => {
                self.mark = None;
                self.places.clear();
                self.named.clear();
                self.noted_refs = 0;
                self.places.extend(read()?);
            }
        }
        (self.mark, self.ends) = (Some(mark), ends);
        Ok(())
    }

    fn insert(&mut self, key: PlaceKey, position: u64, named: Named) {
        self.places.insert(key, position);
        if self.noted_refs + named.targets.len() <= NOTED_REFS_MAX {
            self.noted_refs += named.targets.len();
            if let Some(was) = self.named.insert((key.1, position), named) {
                self.noted_refs -= was.targets.len();
            }
        }
        let end = match key.1 {
            PLACE_OBJECT => &mut self.ends.objects,
            PLACE_ENTRY => &mut self.ends.entries,
            _ => &mut self.ends.worlds,
        };
        *end = (*end).max(position + 1);
    }

    /// The places waiting for the index, in key order.
    fn waiting(&self) -> Vec<(PlaceKey, u64)> {
        let mut out: Vec<(PlaceKey, u64)> = self.places.iter().map(|(k, v)| (*k, *v)).collect();
        out.sort_unstable();
        out
    }
}

/// The approval tables of one write transaction.
struct ApprovalTables<'t> {
    approvals: Table<'t, &'static str, &'static [u8]>,
    open_approvals: Table<'t, (Key32, Key32), &'static str>,
    waits: Table<'t, (Key32, &'static str), &'static str>,
    secrets: Table<'t, &'static str, &'static [u8]>,
}

/// A table of the batch opened at its first use. Opening one is a lookup in
/// redb's table of tables, and a pure call touches about half of `W`'s: the
/// rest (intents, spend, sessions, receipts...) are opened by the batches
/// that need them.
struct Lazy<'t, K: redb::Key + 'static, V: redb::Value + 'static> {
    definition: TableDefinition<'static, K, V>,
    table: Option<Table<'t, K, V>>,
}

impl<'t, K: redb::Key + 'static, V: redb::Value + 'static> Lazy<'t, K, V> {
    fn new(definition: TableDefinition<'static, K, V>) -> Self {
        Lazy { definition, table: None }
    }

    fn open(&mut self, txn: &'t WriteTransaction) -> R<&mut Table<'t, K, V>> {
        if self.table.is_none() {
            self.table = Some(txn.open_table(self.definition).map_err(storage)?);
        }
        Ok(self.table.as_mut().expect("opened above"))
    }
}

fn task_key(key: &TaskKey) -> (&str, &str, &str) {
    (key.surface.as_str(), key.episode.as_str(), key.task_id.as_str())
}

/// A task's key in `TASKS`: its id before its episode.
pub(crate) fn task_row_key(key: &TaskKey) -> (&str, &str, &str) {
    (key.surface.as_str(), key.task_id.as_str(), key.episode.as_str())
}

type Meta<'t> = Table<'t, &'static str, u64>;

/// The transaction's handle on `meta` and the place index at the version
/// `meta` gives it, its filters and directory from (and kept in) `filters`.
fn place_index<'t>(
    txn: &'t WriteTransaction,
    filters: &mut tiered::Filters,
) -> R<(Meta<'t>, tiered::WriteIndex<'t, PlaceKey, u64>)> {
    let meta = txn.open_table(META).map_err(storage)?;
    let version = tiered::runs_version(&meta, &PLACES).map_err(storage)?;
    let index = tiered::WriteIndex::open(txn, &PLACES, filters, version).map_err(storage)?;
    Ok((meta, index))
}

/// Where the payload file ends, as the database's rows have it.
pub(crate) fn payload_end(meta: &impl ReadableTable<&'static str, u64>) -> R<u64> {
    Ok(meta.get(META_PAYLOAD_LEN).map_err(storage)?.map(|v| v.value()).unwrap_or(0))
}

fn decoded<T: serde::de::DeserializeOwned>(table: &'static str, key: &dyn std::fmt::Display, bytes: &[u8]) -> R<T> {
    rows::decode(table, key, bytes).map_err(|e| WriteError::Read(e.into()))
}

impl<'t> W<'t> {
    /// The rows of `txn`, for a transaction that has not written yet; the
    /// place index's filters are read from the store.
    /// `payloads` is the payload file the database's object rows point into.
    pub(crate) fn open(txn: &'t WriteTransaction, payloads: &'t dyn WalIo) -> R<W<'t>> {
        let (meta, place_index) = place_index(txn, &mut tiered::Filters::default())?;
        W::with(txn, meta, place_index, None, payloads)
    }

    /// As `open`, keeping what it reads in `kept` (a writer's, across its
    /// transactions); first in its transaction, before any index changed
    /// (`tiered::WriteIndex::open`).
    pub(crate) fn open_with(txn: &'t WriteTransaction, kept: &'t mut Kept, payloads: &'t dyn WalIo) -> R<W<'t>> {
        let (meta, place_index) = place_index(txn, &mut kept.filters)?;
        let mut w = W::with(txn, meta, place_index, Some(kept), payloads)?;
        // Before the transaction writes a row: the places kept are checked
        // against where the committed rows end.
        w.unplaced()?;
        Ok(w)
    }

    fn with(
        txn: &'t WriteTransaction,
        meta: Meta<'t>,
        place_index: tiered::WriteIndex<'t, PlaceKey, u64>,
        kept: Option<&'t mut Kept>,
        payloads: &'t dyn WalIo,
    ) -> R<W<'t>> {
        Ok(W {
            meta,
            place_index,
            referrers_behind_max: kept.is_some().then_some(REFERRERS_BEHIND_MAX),
            kept,
            own_unplaced: Unplaced::default(),
            unplaced_ready: false,
            object_rows: txn.open_table(OBJECT_ROWS).map_err(storage)?,
            appends: crate::payloads::Appends::new(payloads),
            payloads,
            log: txn.open_table(LOG).map_err(storage)?,
            world_rows: txn.open_table(WORLD_ROWS).map_err(storage)?,
            heads: txn.open_table(HEADS).map_err(storage)?,
            registry_entries: Lazy::new(REGISTRY_ENTRIES),
            intents: Lazy::new(INTENTS),
            outcomes: Lazy::new(OUTCOMES),
            open_intents: Lazy::new(OPEN_INTENTS),
            spend: Lazy::new(SPEND),
            tasks: txn.open_table(TASKS).map_err(storage)?,
            open_tasks: Lazy::new(OPEN_TASKS),
            sessions: Lazy::new(SESSIONS),
            receipts: Lazy::new(RECEIPTS),
            referrers: Lazy::new(REFERRERS),
            referrers_of_absent: Lazy::new(REFERRERS_OF_ABSENT),
            semantic: Lazy::new(SEMANTIC.young),
            placed: 0,
            semantic_written: 0,
            record_journal: Lazy::new(RECORD_JOURNAL),
            record_journal_of_absent: Lazy::new(RECORD_JOURNAL_OF_ABSENT),
            episodes: txn.open_table(EPISODES).map_err(storage)?,
            episode_calls: txn.open_table(EPISODE_CALLS).map_err(storage)?,
            episodes_by_activity: txn.open_table(EPISODES_BY_ACTIVITY).map_err(storage)?,
            episode_sessions: Lazy::new(EPISODE_SESSIONS),
            approval_tables: None,
            txn,
            started: Default::default(),
            task_rows: Default::default(),
            next_seq: None,
            places: Default::default(),
            moves: Moves::default(),
            summaries: Default::default(),
        })
    }

    fn approval_tables(&mut self) -> R<&mut ApprovalTables<'t>> {
        if self.approval_tables.is_none() {
            self.approval_tables = Some(ApprovalTables {
                approvals: self.txn.open_table(APPROVALS).map_err(storage)?,
                open_approvals: self.txn.open_table(OPEN_APPROVALS).map_err(storage)?,
                waits: self.txn.open_table(APPROVAL_WAITS).map_err(storage)?,
                secrets: self.txn.open_table(SECRETS).map_err(storage)?,
            });
        }
        Ok(self.approval_tables.as_mut().expect("opened above"))
    }

    /// Records that the database holds the log up to frame `seq`.
    pub(crate) fn record_wal_seq(&mut self, seq: u64) -> R<()> {
        self.meta.insert(META_WAL_SEQ, seq).map_err(storage)?;
        Ok(())
    }

    /// Writes what was deferred to the end of the batch (its payloads, its
    /// task rows), then lets the tiered indexes take their step
    /// (`tiered::maintain`); call before committing. Returns where the
    /// payload file now ends when the batch appended to it (as recorded in
    /// `meta`).
    pub(crate) fn finish(mut self) -> R<Option<u64>> {
        self.apply_moves()?;
        let appended = self.appends.write().map_err(|e| storage(format!("writing the payload file: {e}")))?;
        if let Some(end) = appended {
            self.meta.insert(META_PAYLOAD_LEN, end).map_err(storage)?;
        }
        let mut task_rows: Vec<_> = std::mem::take(&mut self.task_rows).into_iter().collect();
        task_rows.sort_unstable_by(|a, b| task_row_key(&a.0).cmp(&task_row_key(&b.0)));
        for (key, task) in &task_rows {
            self.tasks.insert(task_row_key(key), rows::encode(task).as_slice()).map_err(storage)?;
        }
        for key in std::mem::take(&mut self.started) {
            self.open_tasks.open(self.txn)?.insert(task_key(&key), ()).map_err(storage)?;
        }
        if let Some(behind_max) = self.referrers_behind_max {
            self.index_referrers(behind_max)?;
        }
        let (txn, placed, semantic) = (self.txn, self.placed, self.semantic_written);
        drop(self);
        tiered::maintain(txn, &PLACES, placed).map_err(storage)?;
        tiered::maintain(txn, &SEMANTIC, semantic).map_err(storage)?;
        Ok(appended)
    }

    /// Records that `r`'s place of `kind` is `position` (once per ref and
    /// kind), for the index pass to write (`Unplaced`).
    fn place(&mut self, r: &Ref, kind: u8, position: u64, named: Named) -> R<()> {
        self.unplaced()?.insert(PlaceKey(r.0, kind), position, named);
        Ok(())
    }

    /// Records where the row `r` of `kind` (its place kind, also its
    /// referrer kind) sits, which names `named`. A row before the mark is
    /// one the index passes went past (an import's worlds come in ref order,
    /// not by revision): it is placed and its referrer rows written at once.
    fn place_row(&mut self, r: &Ref, kind: u8, position: u64, named: &[Ref]) -> R<()> {
        if position >= self.mark()?.of(kind) {
            return self.place(r, kind, position, Named::row(named.to_vec()));
        }
        self.place_index.young().insert(PlaceKey(r.0, kind), position).map_err(storage)?;
        self.placed += 1;
        for target in named {
            self.insert_referrer(target, kind, position)?;
        }
        Ok(())
    }

    /// The referrer mark this transaction began at (read once, with the
    /// places past it).
    fn mark(&mut self) -> R<Indexed> {
        Ok(self.unplaced()?.mark.unwrap_or_default())
    }

    /// The places of the rows past the mark, caught up with the mark this
    /// transaction began at (once a transaction).
    fn unplaced(&mut self) -> R<&mut Unplaced> {
        if !self.unplaced_ready {
            let mark = Indexed::read(&self.meta)?;
            let ends = Indexed::ends(&self.object_rows, &self.log, &self.world_rows)?;
            let rows = (&self.object_rows, &self.log, &self.world_rows);
            let unplaced = unplaced_of(&mut self.kept, &mut self.own_unplaced);
            unplaced.catch_up(mark, ends, || rows_past(mark, rows.0, rows.1, rows.2))?;
            self.unplaced_ready = true;
        }
        Ok(unplaced_of(&mut self.kept, &mut self.own_unplaced))
    }

    fn find_place(&mut self, r: &Ref, kind: u8) -> R<Option<u64>> {
        if kind == PLACE_OBJECT {
            return self.object_place(r);
        }
        let key = PlaceKey(r.0, kind);
        if let Some(position) = self.unplaced()?.places.get(&key) {
            return Ok(Some(*position));
        }
        Ok(self.place_index.find_in(key).map_err(storage)?.map(|(_, position)| position))
    }

    /// The sequence number of object `r`: from the places kept across
    /// transactions, else from the index (and kept when a run had it).
    fn object_place(&mut self, r: &Ref) -> R<Option<u64>> {
        if let Some(seq) = self.kept.as_ref().and_then(|kept| kept.filters.settled_object(&r.0)) {
            return Ok(Some(seq));
        }
        let key = PlaceKey(r.0, PLACE_OBJECT);
        if let Some(seq) = self.unplaced()?.places.get(&key) {
            return Ok(Some(*seq));
        }
        let found = self.place_index.find_in(key).map_err(storage)?;
        // Only places found in runs are kept: a run costs a filter check and
        // a read to ask, the young table (table 0) is asked first anyway.
        if let (Some((table, seq)), Some(kept)) = (found, self.kept.as_mut())
            && table > 0
        {
            kept.filters.settle_object(r.0, seq);
        }
        Ok(found.map(|(_, seq)| seq))
    }

    /// Reads the summary of `episode` at its first move in the batch; a
    /// summary that does not decode refuses this request alone.
    fn found_summary(&mut self, episode: &str) -> R<()> {
        if !self.summaries.contains_key(episode) {
            let was = self.episode(episode)?;
            self.summaries.insert(episode.to_string(), was);
        }
        Ok(())
    }

    /// Moves each episode of the batch by its calls, in the order they were
    /// made, and gives each created call its position.
    fn apply_moves(&mut self) -> R<()> {
        for moves in std::mem::take(&mut self.moves).into_episodes() {
            let was = self.summaries.remove(&moves.episode).flatten();
            let moved = moves.apply(was);
            for (key, seq) in &moved.positions {
                let (surface, episode, task_id) = task_key(key);
                self.episode_calls.insert((episode, *seq), (surface, task_id)).map_err(storage)?;
            }
            self.put_episode(&moved.episode, &moved.row, moved.was.as_ref())?;
        }
        Ok(())
    }

    /// An episode's summary.
    fn episode(&mut self, episode: &str) -> R<Option<EpisodeRow>> {
        match self.episodes.get(episode).map_err(storage)? {
            Some(v) => Ok(Some(decoded("episodes", &episode, v.value())?)),
            None => Ok(None),
        }
    }

    /// Writes an episode's summary over `was`, the row it had (or none),
    /// and its place in the activity order.
    fn put_episode(&mut self, episode: &str, row: &EpisodeRow, was: Option<&EpisodeRow>) -> R<()> {
        self.episodes.insert(episode, rows::encode(row).as_slice()).map_err(storage)?;
        match was {
            Some(was) if was.last_at == row.last_at => {}
            Some(was) => {
                self.episodes_by_activity.remove((was.last_at, episode)).map_err(storage)?;
                self.episodes_by_activity.insert((row.last_at, episode), ()).map_err(storage)?;
            }
            None => {
                self.episodes_by_activity.insert((row.last_at, episode), ()).map_err(storage)?;
            }
        }
        Ok(())
    }

    /// Where `target` sits in the store now: an object's sequence number or
    /// an entry's index; `None` when the store holds neither.
    fn place_of(&mut self, target: &Ref) -> R<Option<(u8, u64)>> {
        if let Some(place) = self.places.get(target) {
            return Ok(Some(*place));
        }
        // An object's place, where the store holds one, else an entry's.
        let place = match self.object_place(target)? {
            Some(seq) => Some((TARGET_OBJECT, seq)),
            None => self.find_place(target, PLACE_ENTRY)?.map(|index| (TARGET_ENTRY, index)),
        };
        if let Some(place) = place {
            if self.places.len() >= PLACES_KEPT_MAX {
                self.places.clear();
            }
            self.places.insert(*target, place);
        }
        Ok(place)
    }

    /// Indexes the referrers written since the index last caught up, once
    /// at least `behind_max` of them wait (`referrers`): what each names is
    /// what the writer noted as it wrote it (`Named`), else read from its
    /// own row (the payloads this batch appended are in the file by now),
    /// each object's semantic row is written with them, and how far the
    /// index has got moves in `META`.
    pub(crate) fn index_referrers(&mut self, behind_max: u64) -> R<()> {
        let from = self.mark()?;
        let ends = Indexed::ends(&self.object_rows, &self.log, &self.world_rows)?;
        let behind = from.behind(ends);
        if behind == 0 || behind < behind_max {
            return Ok(());
        }
        let (named, mut semantic) = self.named_past(from, ends)?;
        // Keyed where each target sits, then written in key order.
        let (mut placed, mut absent) = (vec![], vec![]);
        for (target, kind, position) in named {
            match self.place_of(&target)? {
                Some((place, at)) => placed.push(ReferrerKey(place, at, kind, position)),
                None => absent.push((target.0, kind, position)),
            }
        }
        placed.sort_unstable();
        absent.sort_unstable();
        for key in placed {
            self.referrers.open(self.txn)?.insert(key, ()).map_err(storage)?;
        }
        for key in absent {
            self.referrers_of_absent.open(self.txn)?.insert(key, ()).map_err(storage)?;
        }
        semantic.sort_unstable();
        self.semantic_written += semantic.len() as u64;
        for (key, seq) in semantic {
            self.semantic.open(self.txn)?.insert(key, seq).map_err(storage)?;
        }
        let places = self.unplaced()?.waiting();
        self.placed += places.len() as u64;
        for (key, position) in places {
            self.place_index.young().insert(key, position).map_err(storage)?;
        }
        ends.write(&mut self.meta).map_err(storage)?;
        // One pass a transaction: the mark read at its start is behind now.
        self.referrers_behind_max = None;
        Ok(())
    }

    /// What the rows from `from` up to `ends` name: a row's note where the
    /// writer made one (`Named`), else read from the row (and an object's
    /// payload).
    fn named_past(&mut self, from: Indexed, ends: Indexed) -> R<NamedPast> {
        let rows = crate::referrers::Rows {
            object_rows: &self.object_rows,
            log: &self.log,
            world_rows: &self.world_rows,
            payloads: self.payloads,
        };
        let noted = &unplaced_of(&mut self.kept, &mut self.own_unplaced).named;
        let mut out: NamedPast = (vec![], vec![]);
        for kind in [PLACE_OBJECT, PLACE_ENTRY, PLACE_WORLD] {
            for position in from.of(kind)..ends.of(kind) {
                if let Some(named) = noted.get(&(kind, position)) {
                    out.0.extend(named.targets.iter().map(|target| (*target, kind, position)));
                    out.1.extend(named.semantic.map(|key| (key, position)));
                    continue;
                }
                match rows.targets(kind, position) {
                    Ok(targets) => out.0.extend(targets.into_iter().map(|target| (target, kind, position))),
                    // A row that does not decode names nothing here; `verify`
                    // reports it, and the writer goes on.
                    Err(ReadError::Corrupt(_)) => {}
                    Err(e) => return Err(e.into()),
                }
                if kind == PLACE_OBJECT {
                    out.1.extend(rows.semantic_rows(position, position + 1)?);
                }
            }
        }
        Ok(out)
    }

    /// How many of the rows from `from` up to `ends` the writer noted.
    #[cfg(test)]
    fn noted(&mut self, from: Indexed, ends: Indexed) -> usize {
        let noted = &unplaced_of(&mut self.kept, &mut self.own_unplaced).named;
        [PLACE_OBJECT, PLACE_ENTRY, PLACE_WORLD]
            .into_iter()
            .map(|kind| (from.of(kind)..ends.of(kind)).filter(|p| noted.contains_key(&(kind, *p))).count())
            .sum()
    }

    /// Indexes that the referrer of `kind` at `position` names `target`:
    /// under the target's place when the store holds it, else under its hash.
    fn insert_referrer(&mut self, target: &Ref, kind: u8, position: u64) -> R<()> {
        match self.place_of(target)? {
            Some((place, at)) => {
                self.referrers.open(self.txn)?.insert(ReferrerKey(place, at, kind, position), ()).map_err(storage)?
            }
            None => self.referrers_of_absent.open(self.txn)?.insert((target.0, kind, position), ()).map_err(storage)?,
        };
        Ok(())
    }

    /// Indexes that the outcome `key` carries `record`, unless an outcome
    /// that sorts before it already does (the first carrier is the one
    /// named). One row per record: under its sequence number when the store
    /// holds it, else under its hash.
    fn journal_record(&mut self, record: &Ref, key: JournalKey) -> R<()> {
        let seq = self.find_place(record, PLACE_OBJECT)?;
        let by_seq = match seq {
            Some(seq) => self.record_journal.open(self.txn)?.get(seq).map_err(storage)?.map(|v| v.value().to_vec()),
            None => None,
        };
        let by_hash =
            self.record_journal_of_absent.open(self.txn)?.get(record.0).map_err(storage)?.map(|v| v.value().to_vec());
        for known in [by_seq, by_hash].into_iter().flatten() {
            if decoded::<JournalKey>("record_journal", record, &known)? <= key {
                return Ok(());
            }
        }
        let row = rows::encode(&key);
        match seq {
            Some(seq) => {
                self.record_journal.open(self.txn)?.insert(seq, row.as_slice()).map_err(storage)?;
                self.record_journal_of_absent.open(self.txn)?.remove(record.0).map_err(storage)?;
            }
            None => {
                self.record_journal_of_absent.open(self.txn)?.insert(record.0, row.as_slice()).map_err(storage)?;
            }
        }
        Ok(())
    }

    fn next_seq(&mut self) -> R<u64> {
        let seq = match self.next_seq {
            Some(n) => n,
            None => self.object_rows.last().map_err(storage)?.map(|(k, _)| k.value() + 1).unwrap_or(0),
        };
        self.next_seq = Some(seq + 1);
        Ok(seq)
    }
}

impl Rows for W<'_> {
    fn has_object(&mut self, r: &Ref) -> R<bool> {
        Ok(self.find_place(r, PLACE_OBJECT)?.is_some())
    }

    fn insert_object(&mut self, o: &NewObject) -> R<()> {
        if self.has_object(&o.hash)? {
            return Ok(());
        }
        let seq = self.next_seq()?;
        let meta = &self.meta;
        let at = self.appends.push(&o.payload, || payload_end(meta))?;
        let row = ObjectRow {
            hash: o.hash,
            interface_hash: o.interface_hash,
            semantic_id: o.semantic_id.clone(),
            provenance: o.provenance.clone(),
            size: o.payload.len() as u64,
            seq,
            at,
        };
        self.object_rows.insert(seq, rows::encode(&row).as_slice()).map_err(storage)?;
        self.place(&o.hash, PLACE_OBJECT, seq, Named::object(o))?;
        Ok(())
    }

    fn head(&mut self, name: &str) -> R<Option<Ref>> {
        Ok(self.heads.get(name).map_err(storage)?.map(|v| Ref(v.value())))
    }

    fn set_head(&mut self, name: &str, r: Ref) -> R<()> {
        self.heads.insert(name, r.0).map_err(storage)?;
        Ok(())
    }

    fn world(&mut self, r: &Ref) -> R<Option<World>> {
        let Some(revision) = self.find_place(r, PLACE_WORLD)? else { return Ok(None) };
        match self.world_rows.get(revision).map_err(storage)? {
            Some(v) => Ok(Some(decoded("world_rows", &revision, v.value())?)),
            None => Ok(None),
        }
    }

    fn log_len(&mut self) -> R<u64> {
        Ok(self.log.last().map_err(storage)?.map(|(k, _)| k.value() + 1).unwrap_or(0))
    }

    fn insert_entry(&mut self, entry: &LogEntry) -> R<()> {
        let (h, e) = (&entry.header, entry.entry_hash.0);
        self.log.insert(h.entry_index, rows::encode(entry).as_slice()).map_err(storage)?;
        let named = crate::referrers::entry_targets(entry);
        self.place_row(&Ref(e), PLACE_ENTRY, h.entry_index, &named)
    }

    fn insert_world(&mut self, world: &World) -> R<()> {
        self.world_rows.insert(world.revision, rows::encode(world).as_slice()).map_err(storage)?;
        let named = crate::referrers::world_targets(world);
        self.place_row(&world.world_ref, PLACE_WORLD, world.revision, &named)
    }

    fn registry_entry(&mut self, registry: &str, id: &str) -> R<Option<Ref>> {
        Ok(self.registry_entries.open(self.txn)?.get((registry, id)).map_err(storage)?.map(|v| Ref(v.value())))
    }

    fn put_registry_entry(&mut self, registry: &str, id: &str, transition_fn: Ref) -> R<()> {
        self.registry_entries.open(self.txn)?.insert((registry, id), transition_fn.0).map_err(storage)?;
        Ok(())
    }

    fn replace_registry_entries(&mut self, registry: &str, entries: &[(String, Ref)]) -> R<()> {
        let mut old = vec![];
        for item in self.registry_entries.open(self.txn)?.range((registry, "")..).map_err(storage)? {
            let (k, _) = item.map_err(storage)?;
            let (name, id) = k.value();
            if name != registry {
                break;
            }
            old.push(id.to_string());
        }
        for id in &old {
            self.registry_entries.open(self.txn)?.remove((registry, id.as_str())).map_err(storage)?;
        }
        for (id, f) in entries {
            self.put_registry_entry(registry, id, *f)?;
        }
        Ok(())
    }

    fn task(&mut self, key: &TaskKey) -> R<Option<Task>> {
        if let Some(task) = self.task_rows.get(key) {
            return Ok(Some(task.clone()));
        }
        match self.tasks.get(task_row_key(key)).map_err(storage)? {
            Some(v) => Ok(Some(decoded("tasks", &key.invocation_id(), v.value())?)),
            None => Ok(None),
        }
    }

    fn insert_task(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        self.task_rows.insert(key.clone(), task.clone());
        if task.state == TaskState::Started {
            self.started.insert(key.clone());
        }
        Ok(())
    }

    fn update_task(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        self.task_rows.insert(key.clone(), task.clone());
        if task.state != TaskState::Started && !self.started.remove(key) {
            self.open_tasks.open(self.txn)?.remove(task_key(key)).map_err(storage)?;
        }
        Ok(())
    }

    fn call_created(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        self.found_summary(&key.episode)?;
        self.moves.created(key, task);
        Ok(())
    }

    fn call_ended(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        self.found_summary(&key.episode)?;
        self.moves.ended(key, task);
        Ok(())
    }

    fn journal(&mut self, invocation_id: &str) -> R<Vec<JournalItem>> {
        let mut out = vec![];
        for item in
            self.intents.open(self.txn)?.range((invocation_id, 0u32)..=(invocation_id, u32::MAX)).map_err(storage)?
        {
            let (k, v) = item.map_err(storage)?;
            let ordinal = k.value().1;
            let intent = decoded("intents", &format!("{invocation_id}#{ordinal}"), v.value())?;
            out.push(JournalItem { ordinal, intent, outcome: None });
        }
        for item in &mut out {
            if let Some(v) = self.outcomes.open(self.txn)?.get((invocation_id, item.ordinal)).map_err(storage)? {
                item.outcome = Some(decoded("outcomes", &format!("{invocation_id}#{}", item.ordinal), v.value())?);
            }
        }
        Ok(out)
    }

    fn open_tasks(&mut self) -> R<Vec<TaskKey>> {
        let mut out = vec![];
        for item in self.open_tasks.open(self.txn)?.iter().map_err(storage)? {
            let (k, _) = item.map_err(storage)?;
            let (surface, episode, task_id) = k.value();
            // A surface this binary does not know is left for one that does.
            if let Some(surface) = Surface::parse(surface) {
                out.push(TaskKey { surface, episode: episode.to_string(), task_id: task_id.to_string() });
            }
        }
        Ok(out)
    }

    fn close_task(&mut self, key: &TaskKey) -> R<()> {
        self.open_tasks.open(self.txn)?.remove(task_key(key)).map_err(storage)?;
        Ok(())
    }

    fn has_intent(&mut self, invocation_id: &str, ordinal: u32) -> R<bool> {
        Ok(self.intents.open(self.txn)?.get((invocation_id, ordinal)).map_err(storage)?.is_some())
    }

    fn has_intents(&mut self, invocation_id: &str) -> R<bool> {
        Ok(self
            .intents
            .open(self.txn)?
            .range((invocation_id, 0u32)..=(invocation_id, u32::MAX))
            .map_err(storage)?
            .next()
            .is_some())
    }

    fn insert_intent(&mut self, invocation_id: &str, ordinal: u32, intent: &EffectIntent) -> R<()> {
        self.intents
            .open(self.txn)?
            .insert((invocation_id, ordinal), rows::encode(intent).as_slice())
            .map_err(storage)?;
        self.open_intents.open(self.txn)?.insert((invocation_id, ordinal), ()).map_err(storage)?;
        Ok(())
    }

    fn has_outcome(&mut self, invocation_id: &str, ordinal: u32) -> R<bool> {
        Ok(self.outcomes.open(self.txn)?.get((invocation_id, ordinal)).map_err(storage)?.is_some())
    }

    fn insert_outcome(&mut self, invocation_id: &str, ordinal: u32, outcome: &EffectOutcome) -> R<()> {
        self.outcomes
            .open(self.txn)?
            .insert((invocation_id, ordinal), rows::encode(outcome).as_slice())
            .map_err(storage)?;
        self.open_intents.open(self.txn)?.remove((invocation_id, ordinal)).map_err(storage)?;
        if let Some(record) = outcome.record_ref {
            self.journal_record(&record, JournalKey { invocation_id: invocation_id.to_string(), ordinal })?;
        }
        Ok(())
    }

    fn open_intents(&mut self) -> R<Vec<(String, u32)>> {
        let mut out = vec![];
        for item in self.open_intents.open(self.txn)?.iter().map_err(storage)? {
            let (k, _) = item.map_err(storage)?;
            let (inv, ordinal) = k.value();
            out.push((inv.to_string(), ordinal));
        }
        Ok(out)
    }

    fn close_intent(&mut self, invocation_id: &str, ordinal: u32) -> R<()> {
        self.open_intents.open(self.txn)?.remove((invocation_id, ordinal)).map_err(storage)?;
        Ok(())
    }

    fn spent(&mut self, episode: &str, effect: &str, scope: &str) -> R<u64> {
        Ok(self.spend.open(self.txn)?.get((episode, effect, scope)).map_err(storage)?.map(|v| v.value()).unwrap_or(0))
    }

    fn set_spent(&mut self, episode: &str, effect: &str, scope: &str, units: u64) -> R<()> {
        self.spend.open(self.txn)?.insert((episode, effect, scope), units).map_err(storage)?;
        Ok(())
    }

    fn has_session(&mut self, credential_id: &Ref) -> R<bool> {
        Ok(self.sessions.open(self.txn)?.get(credential_id.0).map_err(storage)?.is_some())
    }

    fn insert_session(&mut self, credential_id: &Ref, session: &Session) -> R<()> {
        self.sessions.open(self.txn)?.insert(credential_id.0, rows::encode(session).as_slice()).map_err(storage)?;
        self.episode_sessions
            .open(self.txn)?
            .insert((session.episode.as_str(), credential_id.0), ())
            .map_err(storage)?;
        Ok(())
    }

    fn remove_session(&mut self, credential_id: &Ref) -> R<bool> {
        let Some(removed) = self.sessions.open(self.txn)?.remove(credential_id.0).map_err(storage)? else {
            return Ok(false);
        };
        let session: Session = decoded("sessions", credential_id, removed.value())?;
        drop(removed);
        self.episode_sessions.open(self.txn)?.remove((session.episode.as_str(), credential_id.0)).map_err(storage)?;
        Ok(true)
    }

    fn receipt(&mut self, id: &str) -> R<Option<Receipt>> {
        match self.receipts.open(self.txn)?.get(id).map_err(storage)? {
            Some(v) => Ok(Some(decoded("receipts", &id, v.value())?)),
            None => Ok(None),
        }
    }

    fn put_receipt(&mut self, id: &str, receipt: &Receipt) -> R<()> {
        self.receipts.open(self.txn)?.insert(id, rows::encode(receipt).as_slice()).map_err(storage)?;
        Ok(())
    }

    fn remove_receipt(&mut self, id: &str) -> R<()> {
        self.receipts.open(self.txn)?.remove(id).map_err(storage)?;
        Ok(())
    }
}

/// The writer's places past the mark, or a transaction's own when it is no writer's.
fn unplaced_of<'a>(kept: &'a mut Option<&mut Kept>, own: &'a mut Unplaced) -> &'a mut Unplaced {
    match kept {
        Some(kept) => &mut kept.unplaced,
        None => own,
    }
}

/// The places of the rows past `mark`, read from the ref each row holds
/// (an object's, an entry's hash, a world's). A row that does not decode is
/// left out (`verify` reports it).
fn rows_past<T: ReadableTable<u64, &'static [u8]>>(
    mark: Indexed,
    object_rows: &T,
    log: &T,
    world_rows: &T,
) -> R<Vec<(PlaceKey, u64)>> {
    let mut out = vec![];
    for (kind, table) in [(PLACE_OBJECT, object_rows), (PLACE_ENTRY, log), (PLACE_WORLD, world_rows)] {
        for item in table.range(mark.of(kind)..).map_err(storage)? {
            let (position, row) = item.map_err(storage)?;
            if let Some(r) = crate::referrers::ref_of_row(kind, position.value(), row.value()) {
                out.push((PlaceKey(r.0, kind), position.value()));
            }
        }
    }
    Ok(out)
}

/// Builds the episode index of a store written before it was kept (format
/// 2), from its task and session rows: each episode's calls numbered by
/// start time, and its summary summed from them.
pub(crate) fn index_episodes(txn: &WriteTransaction) -> R<()> {
    txn.delete_table(EPISODES).map_err(storage)?;
    txn.delete_table(EPISODE_CALLS).map_err(storage)?;
    txn.delete_table(EPISODES_BY_ACTIVITY).map_err(storage)?;
    txn.delete_table(EPISODE_SESSIONS).map_err(storage)?;
    let mut w = W::open(txn, &crate::media::NO_FILE)?;
    let mut tasks: Vec<(TaskKey, Task)> = vec![];
    for item in w.tasks.iter().map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        let (surface, task_id, episode) = k.value();
        let Some(surface) = Surface::parse(surface) else { continue };
        let key = TaskKey { surface, episode: episode.to_string(), task_id: task_id.to_string() };
        let task = decoded("tasks", &key.invocation_id(), v.value())?;
        tasks.push((key, task));
    }
    tasks.sort_by(crate::model::call_order);
    // A call that ended before tasks told their effects: its journal's.
    for (key, task) in tasks.iter_mut().filter(|(_, t)| t.state != TaskState::Started && t.effects.is_empty()) {
        task.effects = w.journal(&key.invocation_id())?.iter().map(CallEffect::journaled).collect();
        if !task.effects.is_empty() {
            w.tasks.insert(task_row_key(key), rows::encode(&*task).as_slice()).map_err(storage)?;
        }
    }
    for calls in tasks.chunk_by(|a, b| a.0.episode == b.0.episode) {
        let episode = calls[0].0.episode.as_str();
        for (seq, (key, _)) in calls.iter().enumerate() {
            w.episode_calls
                .insert((episode, seq as u64), (key.surface.as_str(), key.task_id.as_str()))
                .map_err(storage)?;
        }
        let row = crate::model::summarize_calls(calls.iter().map(|(_, t)| t));
        w.put_episode(episode, &row, None)?;
    }
    let mut sessions: Vec<(Ref, String)> = vec![];
    for item in w.sessions.open(w.txn)?.iter().map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        let id = Ref(k.value());
        let session: Session = decoded("sessions", &id, v.value())?;
        sessions.push((id, session.episode));
    }
    for (id, episode) in sessions {
        w.episode_sessions.open(w.txn)?.insert((episode.as_str(), id.0), ()).map_err(storage)?;
    }
    w.finish()?;
    Ok(())
}

/// Moves the rows of a format 4 store keyed by ref (objects' metadata,
/// worlds, entries' hashes, the semantic index) to rows keyed by position
/// and to the tiered indexes: each old table, read in ref order, is one run
/// of the place index, and the semantic index is built from the objects.
pub(crate) fn index_places(txn: &WriteTransaction) -> R<()> {
    rows_by_position(txn, FORMAT11_OBJECT_SEQ, FORMAT4_OBJECTS, OBJECT_ROWS)?;
    rows_by_position(txn, FORMAT4_WORLD_BY_REVISION, FORMAT4_WORLDS, WORLD_ROWS)?;
    let (objects, mut semantic) = format4_objects(txn)?;
    tiered::add_run(txn, &PLACES, objects.into_iter()).map_err(storage)?;
    semantic.sort_unstable();
    tiered::add_run(txn, &SEMANTIC, semantic.into_iter()).map_err(storage)?;
    let mut entries = vec![];
    for item in txn.open_table(FORMAT4_ENTRY_BY_HASH).map_err(storage)?.iter().map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        entries.push((PlaceKey(k.value(), PLACE_ENTRY), v.value()));
    }
    tiered::add_run(txn, &PLACES, entries.into_iter()).map_err(storage)?;
    let mut worlds = vec![];
    for item in txn.open_table(FORMAT4_WORLDS).map_err(storage)?.iter().map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        // A row that does not decode is left for `verify` to report.
        if let Ok(w) = rows::decode::<World>("worlds", &Ref(k.value()), v.value()) {
            worlds.push((PlaceKey(k.value(), PLACE_WORLD), w.revision));
        }
    }
    tiered::add_run(txn, &PLACES, worlds.into_iter()).map_err(storage)?;
    for name in [FORMAT4_OBJECTS.name(), FORMAT4_WORLDS.name()] {
        txn.delete_table(TableDefinition::<Key32, &[u8]>::new(name)).map_err(storage)?;
    }
    txn.delete_table(FORMAT4_ENTRY_BY_HASH).map_err(storage)?;
    txn.delete_table(FORMAT4_WORLD_BY_REVISION).map_err(storage)?;
    txn.delete_table(FORMAT4_BY_SEMANTIC_ID).map_err(storage)?;
    Ok(())
}

/// Moves a format 6 store's task rows, keyed (surface, episode, taskId),
/// into `TASKS`, keyed by task id before episode. First of the steps: the
/// episode index of a format 2 store is built from the moved rows.
pub(crate) fn key_tasks_by_id(txn: &WriteTransaction) -> R<()> {
    {
        let old = txn.open_table(FORMAT6_TASKS).map_err(storage)?;
        let mut tasks = txn.open_table(TASKS).map_err(storage)?;
        for item in old.iter().map_err(storage)? {
            let (k, v) = item.map_err(storage)?;
            let (surface, episode, task_id) = k.value();
            tasks.insert((surface, task_id, episode), v.value()).map_err(storage)?;
        }
    }
    txn.delete_table(FORMAT6_TASKS).map_err(storage)?;
    Ok(())
}

/// Bytes of payloads the upgrade to the payload file writes at once.
const MOVE_WRITE_BYTES: usize = 4 << 20;

/// Moves a format 7 store's payloads, rows of `FORMAT7_PAYLOADS`, into the
/// payload file `io` (empty), in sequence order, and records in each object
/// row where its bytes start. A payload without an object row, or the
/// reverse, is left for `verify` to report. A store without the table has
/// its payloads in the file already.
pub(crate) fn move_payloads_to_file(txn: &WriteTransaction, io: &dyn WalIo) -> R<()> {
    if !has_table(txn, FORMAT7_PAYLOADS)? {
        return Ok(());
    }
    let written = |e: std::io::Error| storage(format!("writing the payload file: {e}"));
    let mut end = 0u64;
    let mut pending: Vec<u8> = Vec::with_capacity(MOVE_WRITE_BYTES);
    {
        let payloads = txn.open_table(FORMAT7_PAYLOADS).map_err(storage)?;
        let mut objects = txn.open_table(OBJECT_ROWS).map_err(storage)?;
        for item in payloads.iter().map_err(storage)? {
            let (k, v) = item.map_err(storage)?;
            let (seq, payload) = (k.value(), v.value());
            let Some(row) = objects.get(seq).map_err(storage)?.map(|r| r.value().to_vec()) else { continue };
            let Ok(mut row) = rows::decode::<ObjectRow>("object_rows", &seq, &row) else { continue };
            row.at = end + pending.len() as u64;
            objects.insert(seq, rows::encode(&row).as_slice()).map_err(storage)?;
            pending.extend_from_slice(payload);
            if pending.len() >= MOVE_WRITE_BYTES {
                io.write_at(end, &pending).map_err(written)?;
                end += pending.len() as u64;
                pending.clear();
            }
        }
    }
    io.write_at(end, &pending).map_err(written)?;
    end += pending.len() as u64;
    txn.open_table(META).map_err(storage)?.insert(META_PAYLOAD_LEN, end).map_err(storage)?;
    txn.delete_table(FORMAT7_PAYLOADS).map_err(storage)?;
    Ok(())
}

/// Moves a format 5 store's record journal rows, keyed by the record's
/// hash, under the record's sequence number where the store holds the
/// record; the rest stay where they are, as rows of records it lacks.
pub(crate) fn index_records_by_place(txn: &WriteTransaction) -> R<()> {
    let places = tiered::open_write(txn, &PLACES).map_err(storage)?;
    let mut by_hash = txn.open_table(RECORD_JOURNAL_OF_ABSENT).map_err(storage)?;
    let mut by_seq = txn.open_table(RECORD_JOURNAL).map_err(storage)?;
    for item in by_hash.iter().map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        if let Some(seq) = tiered::find(&places, PlaceKey(k.value(), PLACE_OBJECT)).map_err(storage)? {
            by_seq.insert(seq, v.value()).map_err(storage)?;
        }
    }
    let mut failure = None;
    by_hash
        .retain(|k, _| match tiered::find(&places, PlaceKey(k, PLACE_OBJECT)) {
            Ok(seq) => seq.is_none(),
            Err(e) => {
                failure.get_or_insert(e);
                true
            }
        })
        .map_err(storage)?;
    failure.map_or(Ok(()), |e| Err(storage(e)))
}

/// Copies each row of `by_ref` to `into`, under the position `positions`
/// gives its ref (a ref no position names is left behind).
fn rows_by_position(
    txn: &WriteTransaction,
    positions: TableDefinition<u64, Key32>,
    by_ref: TableDefinition<Key32, &[u8]>,
    into: TableDefinition<u64, &[u8]>,
) -> R<()> {
    let rows = txn.open_table(by_ref).map_err(storage)?;
    let mut out = txn.open_table(into).map_err(storage)?;
    for item in txn.open_table(positions).map_err(storage)?.iter().map_err(storage)? {
        let (position, r) = item.map_err(storage)?;
        let Some(row) = rows.get(r.value()).map_err(storage)? else { continue };
        out.insert(position.value(), row.value()).map_err(storage)?;
    }
    Ok(())
}

/// Whether `txn` sees table `def` (an older format's, which an upgrade
/// step moves and drops).
fn has_table(txn: &WriteTransaction, def: impl TableHandle) -> R<bool> {
    Ok(txn.list_tables().map_err(storage)?.any(|t| t.name() == def.name()))
}

/// An object row as format 11 and those before it wrote it: without its
/// ref, which a table of its own held (`FORMAT11_OBJECT_SEQ`).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Format11ObjectRow {
    interface_hash: Ref,
    semantic_id: String,
    provenance: String,
    size: u64,
    seq: u64,
    /// Absent in format 7's rows, which `move_payloads_to_file` rewrites.
    #[serde(default)]
    at: u64,
}

/// Moves each object's ref from format 11's table of them into the object's
/// row, and drops that table. A row that does not decode, or that no number
/// names, is left as it was, for `verify` to report.
pub(crate) fn hash_object_rows(txn: &WriteTransaction) -> R<()> {
    if !has_table(txn, FORMAT11_OBJECT_SEQ)? {
        return Ok(());
    }
    {
        let refs = txn.open_table(FORMAT11_OBJECT_SEQ).map_err(storage)?;
        let mut objects = txn.open_table(OBJECT_ROWS).map_err(storage)?;
        for item in refs.iter().map_err(storage)? {
            let (seq, hash) = item.map_err(storage)?;
            let seq = seq.value();
            let Some(raw) = objects.get(seq).map_err(storage)?.map(|v| v.value().to_vec()) else { continue };
            let Ok(old) = rows::decode::<Format11ObjectRow>("object_rows", &seq, &raw) else { continue };
            let row = ObjectRow {
                hash: Ref(hash.value()),
                interface_hash: old.interface_hash,
                semantic_id: old.semantic_id,
                provenance: old.provenance,
                size: old.size,
                seq: old.seq,
                at: old.at,
            };
            objects.insert(seq, rows::encode(&row).as_slice()).map_err(storage)?;
        }
    }
    txn.delete_table(FORMAT11_OBJECT_SEQ).map_err(storage)?;
    Ok(())
}

/// A format 4 store's objects as place rows (in ref order) and semantic rows.
type Format4Objects = (Vec<(PlaceKey, u64)>, Vec<(SemanticKey, u64)>);

fn format4_objects(txn: &WriteTransaction) -> R<Format4Objects> {
    let (mut places, mut semantic) = (vec![], vec![]);
    for item in txn.open_table(FORMAT4_OBJECTS).map_err(storage)?.iter().map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        let r = Ref(k.value());
        if let Ok(row) = rows::decode::<Format11ObjectRow>("objects", &r, v.value()) {
            places.push((PlaceKey(r.0, PLACE_OBJECT), row.seq));
            semantic.push((semantic_key(&row.semantic_id, &r), row.seq));
        }
    }
    Ok((places, semantic))
}

/// Records that the referrer index has got to where the rows end: a store of
/// a format that indexed every referrer in the transaction that wrote it.
pub(crate) fn referrers_all_indexed(txn: &WriteTransaction) -> R<()> {
    // Marks already there are this binary's own (a store marked as older
    // than it is): they stay.
    if Indexed::read(&txn.open_table(META).map_err(storage)?)? != Indexed::default() {
        return Ok(());
    }
    let objects = txn.open_table(OBJECT_ROWS).map_err(storage)?;
    let (log, worlds) = (txn.open_table(LOG).map_err(storage)?, txn.open_table(WORLD_ROWS).map_err(storage)?);
    let ends = Indexed::ends(&objects, &log, &worlds)?;
    ends.write(&mut txn.open_table(META).map_err(storage)?).map_err(storage)?;
    Ok(())
}

/// Moves the referrer index of a format 3 store, keyed by target hash, to
/// the index keyed by where each target sits (`REFERRERS`, and
/// `REFERRERS_OF_ABSENT` for refs the store does not hold).
pub(crate) fn index_referrers_by_place(txn: &WriteTransaction) -> R<()> {
    let mut w = W::open(txn, &crate::media::NO_FILE)?;
    {
        let old = txn.open_table(REFERRERS_BY_HASH).map_err(storage)?;
        for item in old.iter().map_err(storage)? {
            let (k, _) = item.map_err(storage)?;
            let (target, kind, position) = k.value();
            w.insert_referrer(&Ref(target), kind, position)?;
        }
    }
    txn.delete_table(REFERRERS_BY_HASH).map_err(storage)?;
    w.finish()?;
    Ok(())
}

impl W<'_> {
    /// Up to `limit` entries of the open index (of session `credential`, or
    /// all) in key order: each session's credential and the approval's id.
    fn open_index(&mut self, credential: Option<&Ref>, limit: usize) -> R<Vec<(Key32, String)>> {
        let open = &self.approval_tables()?.open_approvals;
        let range = match credential {
            Some(c) => open.range((c.0, [0u8; 32])..=(c.0, [u8::MAX; 32])),
            None => open.iter(),
        }
        .map_err(storage)?;
        range
            .take(limit)
            .map(|item| item.map(|(k, id)| (k.value().0, id.value().to_string())).map_err(storage))
            .collect()
    }

    /// The row an open index entry names.
    fn open_row(&mut self, id: &str) -> R<ApprovalRow> {
        self.approval(id)?.ok_or_else(|| WriteError::Storage(format!("open approval {id} has no row")))
    }
}

impl ApprovalRows for W<'_> {
    fn approval(&mut self, id: &str) -> R<Option<ApprovalRow>> {
        match self.approval_tables()?.approvals.get(id).map_err(storage)? {
            Some(v) => Ok(Some(decoded("approvals", &id, v.value())?)),
            None => Ok(None),
        }
    }

    fn open_approval(&mut self, credential: &Ref, digest: &Ref) -> R<Option<String>> {
        Ok(self
            .approval_tables()?
            .open_approvals
            .get((credential.0, digest.0))
            .map_err(storage)?
            .map(|v| v.value().to_string()))
    }

    fn open_approvals(&mut self) -> R<u64> {
        self.approval_tables()?.open_approvals.len().map_err(storage)
    }

    fn open_approvals_of(&mut self, credential: &Ref, max: u64) -> R<u64> {
        let open = &self.approval_tables()?.open_approvals;
        let range = open.range((credential.0, [0u8; 32])..=(credential.0, [u8::MAX; 32])).map_err(storage)?;
        Ok(range.take(max as usize).count() as u64)
    }

    fn open_approvals_in(&mut self, episode: &str, max: u64) -> R<u64> {
        // The open index is bounded by the store's room: read it whole, one
        // row per session (its approvals share its episode).
        let mut held = 0;
        let mut session: Option<(Key32, bool)> = None;
        for (credential, id) in self.open_index(None, usize::MAX)? {
            let counted = match session {
                Some((s, counted)) if s == credential => counted,
                _ => self.open_row(&id)?.episode == episode,
            };
            session = Some((credential, counted));
            held += u64::from(counted);
            if held >= max {
                break;
            }
        }
        Ok(held)
    }

    fn open_approval_rows(&mut self, credential: Option<&Ref>, limit: usize) -> R<Vec<(String, ApprovalRow)>> {
        let open = self.open_index(credential, limit)?;
        open.into_iter().map(|(_, id)| Ok((id.clone(), self.open_row(&id)?))).collect()
    }

    fn insert_approval(&mut self, id: &str, approval: &ApprovalRow) -> R<()> {
        if self.approval_tables()?.approvals.get(id).map_err(storage)?.is_some() {
            return Err(WriteError::Storage(format!("approval {id} exists already")));
        }
        self.update_approval(id, approval)
    }

    fn update_approval(&mut self, id: &str, approval: &ApprovalRow) -> R<()> {
        self.approval_tables()?.approvals.insert(id, rows::encode(approval).as_slice()).map_err(storage)?;
        let key = (approval.credential.0, approval.digest.0);
        if approval.closed {
            let open =
                self.approval_tables()?.open_approvals.get(key).map_err(storage)?.is_some_and(|v| v.value() == id);
            if open {
                self.approval_tables()?.open_approvals.remove(key).map_err(storage)?;
            }
        } else {
            self.approval_tables()?.open_approvals.insert(key, id).map_err(storage)?;
        }
        Ok(())
    }

    fn put_approval_wait(&mut self, credential: &Ref, task_id: &str, id: &str) -> R<()> {
        self.approval_tables()?.waits.insert((credential.0, task_id), id).map_err(storage)?;
        Ok(())
    }

    fn insert_approval_object(&mut self, o: &NewObject) -> R<()> {
        self.insert_object(o)
    }

    fn secret(&mut self, name: &str) -> R<Option<Vec<u8>>> {
        Ok(self.approval_tables()?.secrets.get(name).map_err(storage)?.map(|v| v.value().to_vec()))
    }

    fn insert_secret(&mut self, name: &str, value: &[u8]) -> R<()> {
        self.approval_tables()?.secrets.insert(name, value).map_err(storage)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;

    fn object(n: u64) -> NewObject {
        NewObject::derived("test/kept", "test", format!("{{\"n\":{n}}}").into_bytes())
    }

    #[test]
    fn the_writer_keeps_the_places_of_objects_found_in_runs_and_not_of_young_ones() {
        let db = redb::Database::builder().create_with_backend(redb::backends::InMemoryBackend::new()).unwrap();
        let (old, young) = (object(1), object(2));
        let file = crate::payloads::MemoryFile::default();
        let txn = db.begin_write().unwrap();
        {
            let mut w = W::open(&txn, &file).unwrap();
            w.insert_object(&old).unwrap();
            w.index_referrers(0).unwrap();
            w.finish().unwrap();
        }
        // Its place moves from the young table into a run, as a full young table's does.
        let placed: Vec<(PlaceKey, u64)> = txn
            .open_table(PLACES.young)
            .unwrap()
            .iter()
            .unwrap()
            .map(|item| item.map(|(k, v)| (k.value(), v.value())).unwrap())
            .collect();
        txn.delete_table(PLACES.young).unwrap();
        tiered::add_run(&txn, &PLACES, placed.into_iter()).unwrap();
        txn.commit().unwrap();

        let mut kept = Kept::default();
        let txn = db.begin_write().unwrap();
        {
            let mut w = W::open_with(&txn, &mut kept, &file).unwrap();
            w.insert_object(&young).unwrap();
            assert!(w.has_object(&old.hash).unwrap() && w.has_object(&young.hash).unwrap());
            assert!(!w.has_object(&object(3).hash).unwrap());
            w.finish().unwrap();
        }
        txn.commit().unwrap();
        assert_eq!(kept.filters.settled_object(&old.hash.0), Some(0));
        assert_eq!(kept.filters.settled_object(&young.hash.0), None, "a young row is asked again");
        assert_eq!(kept.filters.settled_object(&object(3).hash.0), None);

        // A referrer of the kept object is indexed under its place.
        let txn = db.begin_write().unwrap();
        {
            let mut w = W::open_with(&txn, &mut kept, &file).unwrap();
            assert_eq!(w.place_of(&old.hash).unwrap(), Some((TARGET_OBJECT, 0)));
            assert_eq!(w.place_of(&young.hash).unwrap(), Some((TARGET_OBJECT, 1)));
            w.finish().unwrap();
        }
        txn.commit().unwrap();
    }

    /// Pure calls `calls` (each an input, an output and a record naming
    /// them, an entry, a world).
    fn calls(calls: std::ops::Range<u64>) -> Vec<Op> {
        let task = |i: u64| TaskKey { surface: Surface::Mcp, episode: format!("e{}", i % 3), task_id: format!("t{i}") };
        calls.map(|i| crate::sample::pure_call(task(i), &format!("{{\"i\":{i}}}"), "test")).collect()
    }

    fn sorted((mut named, mut semantic): NamedPast) -> NamedPast {
        named.sort_unstable();
        semantic.sort_unstable();
        (named, semantic)
    }

    /// Applies `ops` in one transaction of the writer keeping `kept`
    /// (`pass`: the index pass runs at its end), committed or dropped.
    fn batch(db: &redb::Database, kept: &mut Kept, file: &dyn WalIo, ops: Vec<Op>, pass: bool, commit: bool) {
        let txn = db.begin_write().unwrap();
        {
            let mut w = W::open_with(&txn, kept, file).unwrap();
            for op in ops {
                crate::ops::apply(&mut w, op).unwrap();
            }
            if pass {
                w.index_referrers(0).unwrap();
            }
            w.finish().unwrap();
        }
        if commit {
            txn.commit().unwrap();
        }
    }

    /// What the rows past the mark name, as the index pass would take it,
    /// and how many of those rows the writer keeping `kept` noted.
    fn past(db: &redb::Database, kept: &mut Kept, file: &dyn WalIo) -> (NamedPast, usize, u64) {
        let txn = db.begin_write().unwrap();
        let mut w = W::open_with(&txn, kept, file).unwrap();
        let from = w.mark().unwrap();
        let ends = Indexed::ends(&w.object_rows, &w.log, &w.world_rows).unwrap();
        (sorted(w.named_past(from, ends).unwrap()), w.noted(from, ends), from.behind(ends))
    }

    #[test]
    fn the_index_pass_takes_from_the_writers_notes_what_the_rows_name_and_reads_the_rows_it_has_no_note_of() {
        let db = redb::Database::builder().create_with_backend(redb::backends::InMemoryBackend::new()).unwrap();
        let file = crate::payloads::MemoryFile::default();
        let mut kept = Kept::default();
        // Fewer than REFERRERS_BEHIND_MAX referrers wait: no pass yet.
        batch(&db, &mut kept, &file, [crate::sample::genesis("test").to_vec(), calls(0..40)].concat(), false, true);
        let (noted, all_noted, behind) = past(&db, &mut kept, &file);
        assert!(behind > 200 && all_noted as u64 == behind, "{all_noted} of {behind} noted");
        assert!(noted.0.len() > 9 * 40 && noted.1.len() == 3 * 40 + 4, "{} {}", noted.0.len(), noted.1.len());
        // A writer that read its rows again (as after a reopen) has noted none.
        let (read, none_noted, _) = past(&db, &mut Kept::default(), &file);
        assert_eq!((noted, none_noted), (read, 0));

        // A batch that did not commit leaves no note of its rows behind, and
        // the rows that took their places are noted as they are.
        batch(&db, &mut kept, &file, calls(100..110), false, false);
        batch(&db, &mut kept, &file, calls(40..45), false, true);
        let (noted, some_noted, behind) = past(&db, &mut kept, &file);
        assert_eq!(noted, past(&db, &mut Kept::default(), &file).0);
        assert!(some_noted > 0 && (some_noted as u64) < behind, "{some_noted} of {behind}");

        // After a pass, the rows past its mark are noted again.
        batch(&db, &mut kept, &file, calls(45..50), true, true);
        batch(&db, &mut kept, &file, calls(50..60), false, true);
        let (noted, all_noted, behind) = past(&db, &mut kept, &file);
        assert!(behind > 0 && all_noted as u64 == behind, "{all_noted} of {behind} noted");
        assert_eq!(noted, past(&db, &mut Kept::default(), &file).0);
    }

    #[test]
    fn the_writer_notes_at_most_noted_refs_max_targets_and_leaves_the_rows_past_them_to_be_read() {
        let mut unplaced = Unplaced::default();
        let named = |n: usize| Named { targets: vec![Ref([7; 32]); n], semantic: None };
        for (position, targets) in [(0, NOTED_REFS_MAX - 1), (1, 2), (2, 1)] {
            unplaced.insert(PlaceKey([position as u8; 32], PLACE_OBJECT), position, named(targets));
        }
        let noted: Vec<bool> = (0..3).map(|p| unplaced.named.contains_key(&(PLACE_OBJECT, p))).collect();
        assert_eq!(noted, [true, false, true]);
        assert_eq!((unplaced.noted_refs, unplaced.places.len()), (NOTED_REFS_MAX, 3));
    }
}
