//! Indexes keyed by hashes, kept as a young table and sorted runs merged in
//! tiers: the place index (where each object, entry and world sits, by
//! ref) and the semantic index (each semantic id's objects in ref order).
//!
//! A B-tree keyed by hashes takes every insert on a random leaf: on a store
//! of a million calls each insert copied, checksummed and later wrote a 4 KiB
//! leaf of its own. A tiered index keeps the rows written lately in a small
//! young table (a few hundred leaves, always cached, each written once per
//! checkpoint however many rows it took) and the rest in sorted runs that are
//! never changed:
//!
//! - when the young table holds `YOUNG_ROWS_MAX` rows it becomes a run of
//!   level 0 by a rename (nothing is copied) and a new young table starts;
//! - when a level holds `RUNS_PER_MERGE` runs, they are merged into one run of
//!   the next level, built by appends in key order (full pages), a bounded
//!   step after each batch, in proportion to the rows the batch wrote;
//! - a lookup asks the young table, then each run, newest first.
//!
//! An index whose lookups mostly miss (the place index: every new object is
//! looked up before it is written) keeps a Bloom filter of each run's keys,
//! written when the run is complete; a lookup skips a run its filter rules
//! out, so a miss reads the young table and, in about one run in a hundred,
//! a leaf. The writer keeps the filters it read in memory (`Filters`), and
//! the run directory, read again only when its version (`runs_version`)
//! moved.
//!
//! A row is written once and never changed (objects are written once by hash,
//! entries and worlds are new), so a row found in any table is the answer:
//! while a merge runs, a row may sit in its input and in its output, and
//! readers take either. The run directory says which run tables exist, their
//! level, and which are being merged.

use crate::bloom::{Bloom, Probe};
use crate::tables::{Key32, META, PlaceKey, Tiered, open_existing};
use redb::{
    ReadOnlyTable, ReadTransaction, ReadableTable, ReadableTableMetadata, StorageError, Table, TableDefinition,
    WriteTransaction,
};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

/// A run no merge is reading.
pub const RUN_COMPLETE: u8 = 0;
/// A run being merged into the run that is `RUN_BUILDING`.
pub const RUN_MERGING: u8 = 1;
/// The output of the merge in progress: every row up to its last is in it.
pub const RUN_BUILDING: u8 = 2;

/// Rows the young table takes before it becomes a run: small enough that
/// its leaves stay cached and few, large enough that runs are few.
pub const YOUNG_ROWS_MAX: u64 = 16_384;
/// Runs of one level merged into one of the next: each row is rewritten
/// once per level it passes, log8 of the index's rows over `YOUNG_ROWS_MAX`
/// (3 levels for 5M rows, a million calls, where 4 runs a merge made 5);
/// the runs more a lookup passes cost a filter probe each.
pub const RUNS_PER_MERGE: usize = 8;
/// Rows a merge moves per row a batch wrote: more than the levels a row
/// passes through, so merges keep up with the writes.
pub const MERGE_ROWS_PER_ROW: u64 = 8;
/// The highest level: its runs are not merged further.
pub const LEVEL_MAX: u8 = 15;

/// When the young table becomes a run, how many runs a merge takes, and
/// how fast merges go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub young_rows_max: u64,
    pub runs_per_merge: usize,
    pub merge_rows_per_row: u64,
}

/// The store's policy.
pub const POLICY: Policy =
    Policy { young_rows_max: YOUNG_ROWS_MAX, runs_per_merge: RUNS_PER_MERGE, merge_rows_per_row: MERGE_ROWS_PER_ROW };

/// A key or value a tiered index holds: owned, copied, read back as itself.
pub trait Cell: for<'a> redb::Value<SelfType<'a> = Self> + Copy + std::fmt::Debug + 'static {}
impl<T: for<'a> redb::Value<SelfType<'a> = T> + Copy + std::fmt::Debug + 'static> Cell for T {}

/// A key of a tiered index: its order in memory is its order in the tree.
pub trait CellKey: Cell + redb::Key + Ord {}
impl<T: Cell + redb::Key + Ord> CellKey for T {}

/// The table of run `id` of `index`.
pub fn run_name<K: CellKey, V: Cell>(index: &Tiered<K, V>, id: u32) -> String {
    format!("{}{id}", index.run_prefix)
}

fn run_def<K: CellKey, V: Cell>(name: &str) -> TableDefinition<'_, K, V> {
    TableDefinition::new(name)
}

/// One run of the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub id: u32,
    pub level: u8,
    pub state: u8,
}

/// The runs of a directory, newest (highest id) first.
pub fn runs(dir: &impl ReadableTable<u32, (u8, u8)>) -> Result<Vec<Run>, StorageError> {
    let mut out = vec![];
    for item in dir.iter()? {
        let (k, v) = item?;
        let (level, state) = v.value();
        out.push(Run { id: k.value(), level, state });
    }
    out.reverse();
    Ok(out)
}

/// The young table and every run of `index` a read transaction sees, in lookup order.
pub fn open_read<K: CellKey, V: Cell>(
    txn: &ReadTransaction,
    index: &Tiered<K, V>,
) -> Result<Vec<ReadOnlyTable<K, V>>, redb::Error> {
    let mut tables: Vec<_> = open_existing(txn, index.young)?.into_iter().collect();
    let Some(dir) = open_existing(txn, index.runs)? else { return Ok(tables) };
    for run in runs(&dir)? {
        tables.push(txn.open_table(run_def(&run_name(index, run.id)))?);
    }
    Ok(tables)
}

/// The young table of `index` (first: inserts go there) and every run, in lookup order.
pub fn open_write<'t, K: CellKey, V: Cell>(
    txn: &'t WriteTransaction,
    index: &Tiered<K, V>,
) -> Result<Vec<Table<'t, K, V>>, redb::Error> {
    open_write_runs(txn, index, &runs(&txn.open_table(index.runs)?)?)
}

/// A writer's view of a tiered index in one transaction: the young table,
/// where rows are inserted, and the runs, each opened the first time a
/// lookup asks it. A run's filter rules out most lookups (a new object is in
/// no run), and opening a table costs a lookup of its own: a batch that
/// opened every run (up to a few dozen) spent more on that than on its
/// lookups.
pub struct WriteIndex<'t, K: CellKey, V: Cell> {
    txn: &'t WriteTransaction,
    young: Table<'t, K, V>,
    /// Newest first, as lookups ask them.
    runs: Vec<RunTable<'t, K, V>>,
}

/// A run of a `WriteIndex`.
struct RunTable<'t, K: CellKey, V: Cell> {
    name: Arc<str>,
    /// `None`: a run being built, or one whose filter is missing, is always asked.
    filter: Option<Arc<Bloom>>,
    /// Once a lookup asked it.
    table: Option<Table<'t, K, V>>,
}

impl<'t, K: CellKey, V: Cell> WriteIndex<'t, K, V> {
    /// The index as `txn` sees it, its run filters from (and kept in)
    /// `filters`, from at most one read of the run directory: `version` is
    /// the index's `runs_version` as the transaction began, and when
    /// `filters` read the directory at that version it is not read again.
    /// Call before the transaction changes any index: what it reads then is
    /// a committed directory, the only kind `filters` may keep.
    pub fn open(
        txn: &'t WriteTransaction,
        index: &Tiered<K, V>,
        filters: &mut Filters,
        version: u64,
    ) -> Result<Self, redb::Error> {
        let directory = match filters.directory.take() {
            Some(kept) if kept.version == version => kept,
            _ => {
                let all = runs(&txn.open_table(index.runs)?)?;
                let loaded = filters.load_runs(txn, index, &all)?;
                let runs =
                    all.iter().zip(loaded).map(|(run, filter)| (run_name(index, run.id).into(), filter)).collect();
                Directory { version, runs }
            }
        };
        let runs = directory.runs.iter().map(|(name, filter)| RunTable {
            name: name.clone(),
            filter: filter.clone(),
            table: None,
        });
        let index = WriteIndex { txn, young: txn.open_table(index.young)?, runs: runs.collect() };
        filters.directory = Some(directory);
        Ok(index)
    }

    /// The table new rows go to.
    pub fn young(&mut self) -> &mut Table<'t, K, V> {
        &mut self.young
    }

    /// The value of `key` and where it was found: 0 for the young table
    /// (whose rows may be this transaction's own), then 1 for the newest run,
    /// and so on.
    pub fn find_in(&mut self, key: K) -> Result<Option<(usize, V)>, redb::Error> {
        if let Some(v) = self.young.get(key)? {
            return Ok(Some((0, v.value())));
        }
        let probe = probe_of(&key);
        for (i, RunTable { name, filter, table }) in self.runs.iter_mut().enumerate() {
            if filter.as_ref().is_some_and(|f| !f.may_hold(probe)) {
                continue;
            }
            if table.is_none() {
                *table = Some(self.txn.open_table(run_def(name))?);
            }
            if let Some(v) = table.as_ref().expect("opened above").get(key)? {
                return Ok(Some((i + 1, v.value())));
            }
        }
        Ok(None)
    }
}

fn open_write_runs<'t, K: CellKey, V: Cell>(
    txn: &'t WriteTransaction,
    index: &Tiered<K, V>,
    all: &[Run],
) -> Result<Vec<Table<'t, K, V>>, redb::Error> {
    let mut tables = vec![txn.open_table(index.young)?];
    for run in all {
        tables.push(txn.open_table(run_def(&run_name(index, run.id)))?);
    }
    Ok(tables)
}

fn probe_of<K: CellKey>(key: &K) -> Probe {
    Probe::of(K::as_bytes(key).as_ref())
}

/// The value of `key`, from the first of `tables` that has it (a reader's:
/// the writer's lookups go through `WriteIndex`, which skips runs by their
/// filters).
pub fn find<K: CellKey, V: Cell, T: ReadableTable<K, V>>(tables: &[T], key: K) -> Result<Option<V>, StorageError> {
    for t in tables {
        if let Some(v) = t.get(key)? {
            return Ok(Some(v.value()));
        }
    }
    Ok(None)
}

/// Every place of `r` (kind, position), one per kind, in kind order.
pub fn places_of<T: ReadableTable<PlaceKey, u64>>(tables: &[T], r: &Key32) -> Result<Vec<(u8, u64)>, StorageError> {
    let mut out: Vec<(u8, u64)> = vec![];
    for t in tables {
        for item in t.range(PlaceKey(*r, 0)..=PlaceKey(*r, u8::MAX))? {
            let (k, v) = item?;
            let kind = k.value().1;
            if !out.iter().any(|(known, _)| *known == kind) {
                out.push((kind, v.value()));
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The rows between `from` and `to`, in key order, each once: a merge of the
/// young table and the runs (a merge in progress holds some rows twice).
pub fn range<K: CellKey, V: Cell, T: ReadableTable<K, V>>(
    tables: &[T],
    from: Bound<K>,
    to: Bound<K>,
) -> Result<impl Iterator<Item = Result<(K, V), StorageError>> + '_, StorageError> {
    range_with(tables, from, to, vec![])
}

/// One sorted source of a merged range.
type Source<'a, K, V> = Box<dyn Iterator<Item = Result<(K, V), StorageError>> + 'a>;

/// `range`, with `rows` not yet written to any table taken as a source of
/// their own (those of them between `from` and `to`). Where a table holds a
/// key of `rows` too, the table's row is the one taken (so `verify` sees it).
pub fn range_with<'a, K: CellKey, V: Cell, T: ReadableTable<K, V>>(
    tables: &'a [T],
    from: Bound<K>,
    to: Bound<K>,
    mut rows: Vec<(K, V)>,
) -> Result<impl Iterator<Item = Result<(K, V), StorageError>> + 'a, StorageError> {
    rows.retain(|(k, _)| std::ops::RangeBounds::contains(&(from, to), k));
    rows.sort_unstable_by_key(|(k, _)| *k);
    let mut sources: Vec<Source<'a, K, V>> = Vec::with_capacity(tables.len() + 1);
    for t in tables {
        sources.push(Box::new(t.range((from, to))?.map(|item| item.map(|(k, v)| (k.value(), v.value())))));
    }
    sources.push(Box::new(rows.into_iter().map(Ok)));
    Ok(Merged::new(sources))
}

/// A merge of sorted sources, equal keys taken once.
struct Merged<K, V, I: Iterator<Item = Result<(K, V), StorageError>>> {
    sources: Vec<std::iter::Peekable<I>>,
    last: Option<K>,
}

impl<K: CellKey, V: Cell, I: Iterator<Item = Result<(K, V), StorageError>>> Merged<K, V, I> {
    fn new(sources: Vec<I>) -> Self {
        Merged { sources: sources.into_iter().map(Iterator::peekable).collect(), last: None }
    }
}

impl<K: CellKey, V: Cell, I: Iterator<Item = Result<(K, V), StorageError>>> Iterator for Merged<K, V, I> {
    type Item = Result<(K, V), StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let mut least: Option<(usize, K)> = None;
            for (i, s) in self.sources.iter_mut().enumerate() {
                match s.peek() {
                    Some(Err(_)) => return s.next(),
                    Some(Ok((k, _))) if least.is_none_or(|(_, l)| *k < l) => least = Some((i, *k)),
                    _ => {}
                }
            }
            let (i, key) = least?;
            let item = self.sources[i].next();
            if self.last == Some(key) {
                continue;
            }
            self.last = Some(key);
            return item;
        }
    }
}

/// The version of `index`'s run directory and filters in `meta`: raised by
/// every transaction that may change them (`directory_may_change`), so that a
/// committed version names one directory (a transaction begins from the last
/// commit, and one that is dropped takes its raise with it).
pub fn runs_version<K: CellKey, V: Cell>(
    meta: &impl ReadableTable<&'static str, u64>,
    index: &Tiered<K, V>,
) -> Result<u64, StorageError> {
    Ok(meta.get(index.runs_version)?.map_or(0, |v| v.value()))
}

/// Raises `index`'s `runs_version`: called by each of this module's writes
/// that may change the run directory or the filters, before it changes them.
fn directory_may_change<K: CellKey, V: Cell>(txn: &WriteTransaction, index: &Tiered<K, V>) -> Result<(), redb::Error> {
    let mut meta = txn.open_table(META)?;
    let version = runs_version(&meta, index)?;
    meta.insert(index.runs_version, version + 1)?;
    Ok(())
}

/// Creates `index`'s tables (a new store has every table from the start).
pub fn create<K: CellKey, V: Cell>(txn: &WriteTransaction, index: &Tiered<K, V>) -> Result<(), redb::Error> {
    directory_may_change(txn, index)?;
    txn.open_table(index.young)?;
    txn.open_table(index.runs)?;
    if let Some(filters) = index.filters {
        txn.open_table(filters)?;
    }
    Ok(())
}

/// After a batch that wrote `written` rows to `index`: the young table
/// becomes a run when full, and the merge in progress (started when a level
/// holds `RUNS_PER_MERGE` runs) moves up to `MERGE_ROWS_PER_ROW` rows per row written.
/// A batch that wrote none (most batches: rows reach the indexes in passes)
/// leaves the index as it is, without opening its tables.
pub fn maintain<K: CellKey, V: Cell>(
    txn: &WriteTransaction,
    index: &Tiered<K, V>,
    written: u64,
) -> Result<(), redb::Error> {
    maintain_with(txn, index, written, &POLICY)
}

/// `maintain` under another policy.
pub fn maintain_with<K: CellKey, V: Cell>(
    txn: &WriteTransaction,
    index: &Tiered<K, V>,
    written: u64,
    policy: &Policy,
) -> Result<(), redb::Error> {
    if written == 0 {
        return Ok(());
    }
    directory_may_change(txn, index)?;
    let mut dir = txn.open_table(index.runs)?;
    let young_rows = txn.open_table(index.young)?.len()?;
    if young_rows >= policy.young_rows_max {
        let id = next_id(&runs(&dir)?);
        txn.rename_table(index.young, run_def::<K, V>(&run_name(index, id)))?;
        dir.insert(id, (0, RUN_COMPLETE))?;
        write_filter(txn, index, id)?;
    }
    let budget = written.saturating_mul(policy.merge_rows_per_row);
    if budget == 0 {
        return Ok(());
    }
    let mut all = runs(&dir)?;
    if !all.iter().any(|r| r.state == RUN_BUILDING) {
        if !start_merge(&mut dir, &all, policy.runs_per_merge)? {
            return Ok(());
        }
        all = runs(&dir)?;
    }
    merge_step(txn, index, &mut dir, &all, budget)
}

fn next_id(runs: &[Run]) -> u32 {
    runs.iter().map(|r| r.id + 1).max().unwrap_or(0)
}

/// Marks the oldest `count` runs of the lowest level that has as many as
/// inputs of a new run one level up; false when no level has.
fn start_merge(dir: &mut Table<'_, u32, (u8, u8)>, all: &[Run], count: usize) -> Result<bool, redb::Error> {
    let count = count.max(2);
    for level in 0..LEVEL_MAX {
        let mut at: Vec<&Run> = all.iter().filter(|r| r.level == level && r.state == RUN_COMPLETE).collect();
        if at.len() < count {
            continue;
        }
        at.sort_by_key(|r| r.id);
        for run in &at[..count] {
            dir.insert(run.id, (level, RUN_MERGING))?;
        }
        dir.insert(next_id(all), (level + 1, RUN_BUILDING))?;
        return Ok(true);
    }
    Ok(false)
}

/// Appends to the merge's output the next `budget` rows of its inputs in
/// key order; when the inputs hold no row past the output's last, the
/// inputs are dropped and the output is complete.
fn merge_step<K: CellKey, V: Cell>(
    txn: &WriteTransaction,
    index: &Tiered<K, V>,
    dir: &mut Table<'_, u32, (u8, u8)>,
    all: &[Run],
    budget: u64,
) -> Result<(), redb::Error> {
    let Some(output) = all.iter().find(|r| r.state == RUN_BUILDING).copied() else { return Ok(()) };
    let inputs: Vec<Run> = all.iter().filter(|r| r.state == RUN_MERGING).copied().collect();
    let out_name = run_name(index, output.id);
    let mut out = txn.open_table(run_def::<K, V>(&out_name))?;
    let cursor = out.last()?.map(|(k, _)| k.value());
    let names: Vec<String> = inputs.iter().map(|r| run_name(index, r.id)).collect();
    let tables = names.iter().map(|n| txn.open_table(run_def::<K, V>(n))).collect::<Result<Vec<_>, _>>()?;
    let from = cursor.map_or(Bound::Unbounded, Bound::Excluded);
    let mut sources = vec![];
    for t in &tables {
        sources.push(t.range((from, Bound::Unbounded))?.map(|item| item.map(|(k, v)| (k.value(), v.value()))));
    }
    let mut merged = Merged::new(sources);
    let mut moved = 0;
    while moved < budget {
        let Some(row) = merged.next() else { break };
        let (key, value) = row?;
        out.insert(key, value)?;
        moved += 1;
    }
    let done = merged.sources.iter_mut().all(|s| s.peek().is_none());
    drop(merged);
    drop(tables);
    drop(out);
    if done {
        for (run, name) in inputs.iter().zip(&names) {
            txn.delete_table(run_def::<K, V>(name))?;
            dir.remove(run.id)?;
            if let Some(filters) = index.filters {
                txn.open_table(filters)?.remove(run.id)?;
            }
        }
        dir.insert(output.id, (output.level, RUN_COMPLETE))?;
        write_filter(txn, index, output.id)?;
    }
    Ok(())
}

/// Writes the filter of each run of `index` that is not being built and has
/// none: how a store of a format before the filters gets them.
pub fn write_missing_filters<K: CellKey, V: Cell>(
    txn: &WriteTransaction,
    index: &Tiered<K, V>,
) -> Result<(), redb::Error> {
    let Some(def) = index.filters else { return Ok(()) };
    directory_may_change(txn, index)?;
    for run in runs(&txn.open_table(index.runs)?)? {
        if run.state != RUN_BUILDING && txn.open_table(def)?.get(run.id)?.is_none() {
            write_filter(txn, index, run.id)?;
        }
    }
    Ok(())
}

/// Writes the filter of run `id`, which is complete, from its keys (for an
/// index that keeps filters).
fn write_filter<K: CellKey, V: Cell>(txn: &WriteTransaction, index: &Tiered<K, V>, id: u32) -> Result<(), redb::Error> {
    let Some(filters) = index.filters else { return Ok(()) };
    let name = run_name(index, id);
    let run = txn.open_table(run_def::<K, V>(&name))?;
    let mut bloom = Bloom::for_keys(run.len()?);
    for item in run.iter()? {
        bloom.insert(K::as_bytes(&item?.0.value()).as_ref());
    }
    txn.open_table(filters)?.insert(id, bloom.to_bytes().as_slice())?;
    Ok(())
}

/// The filters a writer has read, by run id, kept across its transactions:
/// a run's filter never changes while the run exists, and a run id is never
/// used twice (a new run's id is above every run's there is). Only filters
/// of committed runs enter (they are read as a transaction opens the index),
/// and a writer that reopens its database starts a new `Filters`. One
/// index's: it also keeps that index's run directory as last read.
#[derive(Default)]
pub struct Filters {
    runs: HashMap<u32, Arc<Bloom>>,
    /// The run directory with each run's filter, as a transaction read it
    /// at the start, and the `runs_version` it was read at: the next
    /// transaction that begins at that version finds the same directory
    /// and does not read it (three table opens and a scan a batch).
    directory: Option<Directory>,
    /// Objects' places found in runs, at most `SETTLED_OBJECTS_MAX`: a run
    /// holds rows committed before the transaction that read it began, and
    /// a place never changes, so a much-named object (a transition's
    /// function, an input every call repeats) is looked up in the runs once,
    /// not once a batch.
    objects: HashMap<Key32, u64>,
}

/// A run directory as `Filters` keeps it: each run's table name and filter,
/// newest first.
struct Directory {
    version: u64,
    runs: Vec<(Arc<str>, Option<Arc<Bloom>>)>,
}

/// Most object places a writer keeps across transactions; past it the
/// cache starts again (the much-named objects come back at once).
pub const SETTLED_OBJECTS_MAX: usize = 16_384;

impl Filters {
    /// The place of object `r` if it was found in a run before.
    pub fn settled_object(&self, r: &Key32) -> Option<u64> {
        self.objects.get(r).copied()
    }

    /// Keeps the place of object `r`, found in a run (never in the young
    /// table, whose rows may be this transaction's own).
    pub fn settle_object(&mut self, r: Key32, position: u64) {
        if self.objects.len() >= SETTLED_OBJECTS_MAX {
            self.objects.clear();
        }
        self.objects.insert(r, position);
    }

    /// The filter of each of the runs `all`, in their order, for a transaction that has not changed the index yet;
    /// runs no longer there leave the cache. A filter that is missing or
    /// does not decode is `None` (the run is asked; `verify` reports the
    /// filter).
    fn load_runs<K: CellKey, V: Cell>(
        &mut self,
        txn: &WriteTransaction,
        index: &Tiered<K, V>,
        all: &[Run],
    ) -> Result<Vec<Option<Arc<Bloom>>>, redb::Error> {
        let Some(def) = index.filters else { return Ok(vec![None; all.len()]) };
        self.runs.retain(|id, _| all.iter().any(|r| r.id == *id && r.state != RUN_BUILDING));
        let stored = txn.open_table(def)?;
        let mut out = Vec::with_capacity(all.len());
        for run in all {
            if run.state == RUN_BUILDING {
                out.push(None);
                continue;
            }
            if let Some(f) = self.runs.get(&run.id) {
                out.push(Some(f.clone()));
                continue;
            }
            let bloom = stored.get(run.id)?.and_then(|v| Bloom::from_bytes(v.value())).map(Arc::new);
            if let Some(f) = &bloom {
                self.runs.insert(run.id, f.clone());
            }
            out.push(bloom);
        }
        Ok(out)
    }
}

/// What a tiered index holds and how far its merge has gone: for operators
/// watching a store grow (a merge that falls behind leaves runs piling up).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexStatus {
    pub index: &'static str,
    /// Rows of the young table.
    pub young_rows: u64,
    /// Runs no merge is building (inputs of the merge in progress included),
    /// the rows they hold, and the highest level among them.
    pub runs: u64,
    pub run_rows: u64,
    pub top_level: u8,
    /// The merge in progress: the rows of its inputs and those its output
    /// holds so far (both 0 when none runs).
    pub merge_input_rows: u64,
    pub merge_output_rows: u64,
}

/// The state of `index` a read transaction sees (an index not yet created is empty).
pub fn status<K: CellKey, V: Cell>(txn: &ReadTransaction, index: &Tiered<K, V>) -> Result<IndexStatus, redb::Error> {
    let mut status = IndexStatus { index: index.name, ..IndexStatus::default() };
    if let Some(young) = open_existing(txn, index.young)? {
        status.young_rows = young.len()?;
    }
    let Some(dir) = open_existing(txn, index.runs)? else { return Ok(status) };
    for run in runs(&dir)? {
        let rows = txn.open_table(run_def::<K, V>(&run_name(index, run.id)))?.len()?;
        if run.state == RUN_BUILDING {
            status.merge_output_rows = rows;
            continue;
        }
        status.runs += 1;
        status.run_rows += rows;
        status.top_level = status.top_level.max(run.level);
        if run.state == RUN_MERGING {
            status.merge_input_rows += rows;
        }
    }
    Ok(status)
}

/// The level a run of `rows` rows belongs to: the one whose merges make runs that size.
pub fn level_of(rows: u64, policy: &Policy) -> u8 {
    let mut level = 0;
    let mut size = policy.young_rows_max;
    while rows > size && level < LEVEL_MAX {
        size = size.saturating_mul(policy.runs_per_merge as u64);
        level += 1;
    }
    level
}

/// Writes `rows` (sorted by key, each once) as a new complete run of `index`
/// at the level its size belongs to: how a store of an older format gets
/// its index.
pub fn add_run<K: CellKey, V: Cell>(
    txn: &WriteTransaction,
    index: &Tiered<K, V>,
    rows: impl Iterator<Item = (K, V)>,
) -> Result<(), redb::Error> {
    directory_may_change(txn, index)?;
    let mut dir = txn.open_table(index.runs)?;
    let id = next_id(&runs(&dir)?);
    let name = run_name(index, id);
    let mut run = txn.open_table(run_def::<K, V>(&name))?;
    let mut count = 0;
    for (key, value) in rows {
        run.insert(key, value)?;
        count += 1;
    }
    dir.insert(id, (level_of(count, &POLICY), RUN_COMPLETE))?;
    drop(run);
    write_filter(txn, index, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::PLACES;
    use proptest::prelude::*;
    use redb::{Database, ReadableDatabase};
    use std::collections::BTreeMap;

    type Model = BTreeMap<PlaceKey, u64>;

    fn database() -> Database {
        Database::builder().create_with_backend(redb::backends::InMemoryBackend::new()).unwrap()
    }

    /// A batch writing `rows`, then the index's step under `policy`.
    fn write(db: &Database, rows: &[(PlaceKey, u64)], policy: &Policy) {
        let txn = db.begin_write().unwrap();
        {
            let mut tables = open_write(&txn, &PLACES).unwrap();
            for (key, position) in rows {
                tables[0].insert(*key, *position).unwrap();
            }
        }
        maintain_with(&txn, &PLACES, rows.len() as u64, policy).unwrap();
        txn.commit().unwrap();
    }

    /// What a writer sees through the run filters it keeps (`filters`,
    /// across transactions) agrees with the model too.
    fn check_filtered(db: &Database, filters: &mut Filters, model: &Model, absent: &[Key32]) {
        let txn = db.begin_write().unwrap();
        let mut index = write_index(&txn, filters);
        let kinds = [crate::tables::PLACE_OBJECT, crate::tables::PLACE_ENTRY, crate::tables::PLACE_WORLD];
        let asked: Vec<PlaceKey> = absent.iter().flat_map(|r| kinds.map(|kind| PlaceKey(*r, kind))).collect();
        for key in &asked {
            assert_eq!(index.find_in(*key).unwrap(), None);
        }
        // A run is opened only when a key asked may be in it.
        for RunTable { name, filter, table } in &index.runs {
            let maybe = |f: &Arc<Bloom>| asked.iter().any(|k| f.may_hold(probe_of(k)));
            assert!(table.is_none() || filter.as_ref().is_none_or(maybe), "{name} was opened for nothing");
        }
        for (key, position) in model {
            assert_eq!(index.find_in(*key).unwrap().map(|(_, p)| p), Some(*position), "{key:?}");
        }
        let dir = runs(&txn.open_table(PLACES.runs).unwrap()).unwrap();
        assert_eq!(index.runs.len(), dir.len());
        let filtered = index.runs.iter().filter(|run| run.filter.is_some()).count();
        assert_eq!(filtered, dir.iter().filter(|r| r.state != RUN_BUILDING).count(), "{dir:?}");
        drop(index);
        txn.abort().unwrap();
    }

    /// What a reader sees agrees with the model: each row found, absent keys
    /// not, every kind in key order once, and the directory well formed.
    fn check(db: &Database, model: &Model, absent: &[Key32]) -> Vec<Run> {
        let txn = db.begin_read().unwrap();
        let tables = open_read(&txn, &PLACES).unwrap();
        for (key, position) in model {
            assert_eq!(find(&tables, *key).unwrap(), Some(*position));
        }
        for r in absent {
            assert_eq!(places_of(&tables, r).unwrap(), vec![]);
        }
        let listed: Vec<(PlaceKey, u64)> =
            range(&tables, Bound::Unbounded, Bound::Unbounded).unwrap().map(Result::unwrap).collect();
        assert_eq!(listed, model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
        if let Some((PlaceKey(r, _), _)) = model.iter().nth(model.len() / 2) {
            let from = PlaceKey(*r, 0);
            let to = PlaceKey(*r, u8::MAX);
            let some: Vec<(PlaceKey, u64)> =
                range(&tables, Bound::Included(from), Bound::Included(to)).unwrap().map(Result::unwrap).collect();
            let expected: Vec<(PlaceKey, u64)> = model.range(from..=to).map(|(k, v)| (*k, *v)).collect();
            assert_eq!(some, expected);
        }
        let runs = runs(&txn.open_table(PLACES.runs).unwrap()).unwrap();
        let building = runs.iter().filter(|r| r.state == RUN_BUILDING).count();
        let merging = runs.iter().filter(|r| r.state == RUN_MERGING).count();
        assert!(building <= 1 && (building == 1) == (merging > 0), "{runs:?}");
        // The status counts each row once: a merge's output holds copies of its inputs' rows.
        let told = status(&txn, &PLACES).unwrap();
        assert_eq!(told.young_rows + told.run_rows, model.len() as u64, "{told:?} {runs:?}");
        assert_eq!(told.runs, (runs.len() - building) as u64, "{told:?}");
        assert_eq!(told.merge_input_rows > 0, merging > 0, "{told:?}");
        assert!(told.merge_output_rows <= told.merge_input_rows, "{told:?}");
        assert_eq!(told.top_level, runs.iter().filter(|r| r.state != RUN_BUILDING).map(|r| r.level).max().unwrap_or(0));
        runs
    }

    fn key(seed: u64) -> Key32 {
        *crate::refs::Ref::of(&seed.to_le_bytes()).as_bytes()
    }

    #[test]
    fn rows_written_across_many_runs_and_merges_are_all_found_once() {
        let db = database();
        let policy = Policy { young_rows_max: 16, runs_per_merge: 3, merge_rows_per_row: 2 };
        let mut model = Model::new();
        let mut levels_seen = 0;
        let mut filters = Filters::default();
        for batch in 0..200u64 {
            let rows: Vec<(PlaceKey, u64)> = (0..(batch % 7) + 1)
                .map(|i| (PlaceKey(key(batch * 100 + i), (i % 3 + 1) as u8), batch * 100 + i))
                .collect();
            write(&db, &rows, &policy);
            model.extend(rows);
            check_filtered(&db, &mut filters, &model, &[key(u64::MAX)]);
            let runs = check(&db, &model, &[key(u64::MAX)]);
            levels_seen = levels_seen.max(runs.iter().map(|r| r.level).max().unwrap_or(0));
        }
        assert!(levels_seen >= 2, "merges reached level {levels_seen}");
    }

    /// The place index as a writer opens it, at the version `meta` gives.
    fn write_index<'t>(txn: &'t WriteTransaction, filters: &mut Filters) -> WriteIndex<'t, PlaceKey, u64> {
        let version = runs_version(&txn.open_table(META).unwrap(), &PLACES).unwrap();
        WriteIndex::open(txn, &PLACES, filters, version).unwrap()
    }

    /// The runs a writer's `WriteIndex` asks, newest first.
    fn asked_runs(db: &Database, filters: &mut Filters) -> Vec<String> {
        let txn = db.begin_write().unwrap();
        let index = write_index(&txn, filters);
        let names = index.runs.iter().map(|run| run.name.to_string()).collect();
        drop(index);
        txn.abort().unwrap();
        names
    }

    #[test]
    fn a_writer_reads_the_run_directory_again_only_after_a_commit_that_may_have_changed_it() {
        let db = database();
        let policy = Policy { young_rows_max: 4, runs_per_merge: 8, merge_rows_per_row: 1 };
        let rows = |from: u64| (from..from + 4).map(|n| (PlaceKey(key(n), 1), n)).collect::<Vec<_>>();
        for batch in 0..2 {
            write(&db, &rows(batch * 4), &policy);
        }
        let mut filters = Filters::default();
        let before = asked_runs(&db, &mut filters);
        assert_eq!(before, ["places_run_1", "places_run_0"]);
        // A directory changed without raising the version is not read again
        // (what the version is for: every write of this module raises it).
        let txn = db.begin_write().unwrap();
        txn.open_table(PLACES.runs).unwrap().insert(7, (0, RUN_COMPLETE)).unwrap();
        txn.commit().unwrap();
        assert_eq!(asked_runs(&db, &mut filters), before);
        assert_eq!(asked_runs(&db, &mut Filters::default()), ["places_run_7", "places_run_1", "places_run_0"]);
        // A batch that rolled the young table over and was dropped took its
        // raise with it: the directory kept is still the one asked.
        let txn = db.begin_write().unwrap();
        for (k, position) in rows(100) {
            open_write(&txn, &PLACES).unwrap()[0].insert(k, position).unwrap();
        }
        maintain_with(&txn, &PLACES, 4, &policy).unwrap();
        assert_eq!(runs(&txn.open_table(PLACES.runs).unwrap()).unwrap().len(), 4);
        txn.abort().unwrap();
        assert_eq!(asked_runs(&db, &mut filters), before);
        // A committed batch with index rows raises it, and so does an
        // upgrade's new run: read again each time.
        write(&db, &rows(12), &policy);
        assert_eq!(asked_runs(&db, &mut filters), ["places_run_8", "places_run_7", "places_run_1", "places_run_0"]);
        let txn = db.begin_write().unwrap();
        let mut sorted = rows(200);
        sorted.sort();
        add_run(&txn, &PLACES, sorted.into_iter()).unwrap();
        txn.commit().unwrap();
        assert_eq!(asked_runs(&db, &mut filters)[0], "places_run_9");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn the_index_answers_as_a_map_under_any_policy(
            batches in prop::collection::vec(prop::collection::vec((any::<u16>(), 1u8..=3), 0..12), 1..60),
            young in 1u64..12,
            per_merge in 2usize..5,
            pace in 0u64..4,
        ) {
            let db = database();
            let policy = Policy { young_rows_max: young, runs_per_merge: per_merge, merge_rows_per_row: pace };
            let mut model = Model::new();
            let mut next = 0u64;
            let mut filters = Filters::default();
            for batch in batches {
                let mut rows = vec![];
                for (seed, kind) in batch {
                    let k = PlaceKey(key(u64::from(seed)), kind);
                    // A row is written once.
                    if model.contains_key(&k) || rows.iter().any(|(r, _)| *r == k) {
                        continue;
                    }
                    rows.push((k, next));
                    next += 1;
                }
                write(&db, &rows, &policy);
                model.extend(rows);
                check_filtered(&db, &mut filters, &model, &[key(70_000)]);
            }
            check(&db, &model, &[key(70_000), key(80_000)]);
        }
    }
}
