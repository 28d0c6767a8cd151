//! Reads on the embedded engine: a consistent snapshot over one redb read
//! transaction. Readers never wait for the writer.

use crate::error::{ReadError, read_storage};
use crate::model::*;
/// Plain values, defined in `model`; `read::JournalItem` still names them.
pub use crate::model::{JournalItem, Referrer};
use crate::referrers::{self, Indexed};
use crate::refs::Ref;
use crate::rows;
use crate::tables::*;
use crate::tiered;
use crate::view::View;
use redb::{ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition};
use std::ops::Bound;

/// Default page size of every paged read.
pub const PAGE_DEFAULT: usize = 100;
/// Largest page any paged read returns.
pub const PAGE_MAX: usize = 500;

/// Clamps a requested page size: absent or < 1 gives the default, the cap is `PAGE_MAX`.
pub fn page_limit(requested: Option<i64>) -> usize {
    match requested {
        Some(n) if n >= 1 => (n as u64).min(PAGE_MAX as u64) as usize,
        _ => PAGE_DEFAULT,
    }
}

/// The first `limit` of `rows` (in order) strictly after `from`.
fn take_after(
    rows: impl Iterator<Item = Result<(u8, u64), redb::StorageError>>,
    from: Option<(u8, u64)>,
    limit: usize,
) -> Result<Vec<(u8, u64)>, ReadError> {
    let mut out = vec![];
    for row in rows {
        if out.len() >= limit {
            break;
        }
        let row = row.map_err(read_storage)?;
        if from.is_none_or(|from| row > from) {
            out.push(row);
        }
    }
    Ok(out)
}

pub struct RedbSnapshot {
    txn: ReadTransaction,
    /// The payload file the snapshot's object rows point into.
    payloads: std::sync::Arc<dyn crate::media::WalIo>,
    /// The place index's tables, opened by the first lookup by ref.
    places: std::sync::OnceLock<Vec<ReadOnlyTable<PlaceKey, u64>>>,
    /// The semantic index's tables, opened by the first page of it.
    semantic: std::sync::OnceLock<Vec<ReadOnlyTable<SemanticKey, u64>>>,
    /// How far the referrer index has got and where the rows end, read once.
    indexed: std::sync::OnceLock<(Indexed, Indexed)>,
}

/// The rows of a snapshot that say what an unindexed referrer names.
type Unindexed<'a> = referrers::Rows<
    'a,
    ReadOnlyTable<u64, &'static [u8]>,
    ReadOnlyTable<u64, &'static [u8]>,
    ReadOnlyTable<u64, &'static [u8]>,
>;

pub(crate) fn open<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &ReadTransaction,
    def: TableDefinition<K, V>,
) -> Result<Option<ReadOnlyTable<K, V>>, ReadError> {
    open_existing(txn, def).map_err(read_storage)
}

impl RedbSnapshot {
    /// Where rows naming `target` may be indexed: under its object's place
    /// and its entry's place when the store holds them (`Some`), and under its
    /// hash (`None`), where it was named before the store held it.
    fn places_of(&self, target: &Ref) -> Result<Vec<Option<(u8, u64)>>, ReadError> {
        let mut places = vec![None];
        let found = tiered::places_of(self.place_index()?, &target.0).map_err(read_storage)?;
        for kind in [TARGET_OBJECT, TARGET_ENTRY] {
            let place = match found.iter().find(|(k, _)| *k == kind) {
                Some((_, at)) => Some(*at),
                None => self.unindexed_place(target, kind)?,
            };
            places.extend(place.map(|at| Some((kind, at))));
        }
        Ok(places)
    }

    /// The place index's tables, in lookup order.
    fn place_index(&self) -> Result<&[ReadOnlyTable<PlaceKey, u64>], ReadError> {
        if let Some(tables) = self.places.get() {
            return Ok(tables);
        }
        let tables = tiered::open_read(&self.txn, &PLACES).map_err(read_storage)?;
        Ok(self.places.get_or_init(|| tables))
    }

    /// The semantic index's tables, in lookup order.
    fn semantic_index(&self) -> Result<&[ReadOnlyTable<SemanticKey, u64>], ReadError> {
        if let Some(tables) = self.semantic.get() {
            return Ok(tables);
        }
        let tables = tiered::open_read(&self.txn, &SEMANTIC).map_err(read_storage)?;
        Ok(self.semantic.get_or_init(|| tables))
    }

    /// The semantic index's rows between `from` and `to`, in key order,
    /// each once: the index's, and those of the objects it has not reached,
    /// read from their own rows (`referrers`).
    fn semantic_rows(
        &self,
        from: Bound<SemanticKey>,
        to: Bound<SemanticKey>,
    ) -> Result<impl Iterator<Item = Result<(SemanticKey, u64), redb::StorageError>> + '_, ReadError> {
        let (indexed, ends) = self.referrers_indexed()?;
        let unindexed = if indexed.objects < ends.objects {
            self.with_unindexed(|rows| rows.semantic_rows(indexed.objects, ends.objects))?.unwrap_or_default()
        } else {
            vec![]
        };
        tiered::range_with(self.semantic_index()?, from, to, unindexed).map_err(read_storage)
    }

    /// The objects with `semantic_id` (ref, seq), in ref order.
    pub(crate) fn each_object_of<E: From<ReadError>>(
        &self,
        semantic_id: &str,
        mut f: impl FnMut(Ref, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let h = semantic_key(semantic_id, &Ref([0; 32])).0;
        let (from, to) = (Bound::Included(SemanticKey(h, [0; 32])), Bound::Included(SemanticKey(h, [0xff; 32])));
        for item in self.semantic_rows(from, to)? {
            let (SemanticKey(_, r), seq) = item.map_err(read_storage)?;
            f(Ref(r), seq)?;
        }
        Ok(())
    }

    /// Every row of the semantic index, in key order, each once.
    pub(crate) fn each_semantic<E: From<ReadError>>(
        &self,
        mut f: impl FnMut(SemanticKey, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let rows = self.semantic_rows(Bound::Unbounded, Bound::Unbounded)?;
        for item in rows {
            let (key, seq) = item.map_err(read_storage)?;
            f(key, seq)?;
        }
        Ok(())
    }

    /// The position of `r`'s place of `kind`: from the index, else from
    /// the rows it has not reached.
    pub(crate) fn place(&self, r: &Ref, kind: u8) -> Result<Option<u64>, ReadError> {
        match tiered::find(self.place_index()?, PlaceKey(r.0, kind)).map_err(read_storage)? {
            Some(position) => Ok(Some(position)),
            None => self.unindexed_place(r, kind),
        }
    }

    /// The rows of place `kind` the index has not reached (the writer places
    /// them with their referrer rows: `ops::Unplaced`), for `f` in turn, the
    /// newest first; `f` says when to stop.
    fn each_unindexed_row(&self, kind: u8, mut f: impl FnMut(u64, Ref) -> bool) -> Result<(), ReadError> {
        let (from, ends) = self.referrers_indexed()?;
        let range = from.of(kind)..ends.of(kind);
        if range.is_empty() {
            return Ok(());
        }
        let table = match kind {
            PLACE_OBJECT => OBJECT_ROWS,
            PLACE_ENTRY => LOG,
            _ => WORLD_ROWS,
        };
        let Some(t) = open(&self.txn, table)? else { return Ok(()) };
        for item in t.range(range).map_err(read_storage)?.rev() {
            let (position, row) = item.map_err(read_storage)?;
            if let Some(r) = referrers::ref_of_row(kind, position.value(), row.value())
                && f(position.value(), r)
            {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The place of `r` among the rows the index has not reached: at most
    /// `REFERRERS_BEHIND_MAX` and a batch's, the newest (the likeliest
    /// asked for) first.
    fn unindexed_place(&self, r: &Ref, kind: u8) -> Result<Option<u64>, ReadError> {
        let mut found = None;
        self.each_unindexed_row(kind, |position, at| {
            if at == *r {
                found = Some(position);
            }
            found.is_some()
        })?;
        Ok(found)
    }

    /// Every place of `kind`, in ref order, each once.
    pub(crate) fn each_place<E: From<ReadError>>(
        &self,
        kind: u8,
        mut f: impl FnMut(Ref, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut unindexed = vec![];
        self.each_unindexed_row(kind, |position, r| {
            unindexed.push((PlaceKey(r.0, kind), position));
            false
        })?;
        let rows = tiered::range_with(self.place_index()?, Bound::Unbounded, Bound::Unbounded, unindexed)
            .map_err(read_storage)?;
        for item in rows {
            let (PlaceKey(r, found), position) = item.map_err(read_storage)?;
            if found == kind {
                f(Ref(r), position)?;
            }
        }
        Ok(())
    }

    /// The row of the object at `seq`.
    pub(crate) fn object_row(&self, seq: u64) -> Result<Option<ObjectRow>, ReadError> {
        let Some(t) = open(&self.txn, OBJECT_ROWS)? else { return Ok(None) };
        match t.get(seq).map_err(read_storage)? {
            Some(v) => Ok(Some(rows::decode("object_rows", &seq, v.value())?)),
            None => Ok(None),
        }
    }

    /// The world of revision `revision`.
    pub(crate) fn world_row(&self, revision: u64) -> Result<Option<World>, ReadError> {
        let Some(t) = open(&self.txn, WORLD_ROWS)? else { return Ok(None) };
        match t.get(revision).map_err(read_storage)? {
            Some(v) => Ok(Some(rows::decode("world_rows", &revision, v.value())?)),
            None => Ok(None),
        }
    }

    /// The tables that say what a referrer names (`referrers`), for `f`;
    /// `None` where no write has made them.
    fn with_unindexed<T>(
        &self,
        f: impl FnOnce(&Unindexed<'_>) -> Result<T, ReadError>,
    ) -> Result<Option<T>, ReadError> {
        let (Some(object_rows), Some(log), Some(world_rows)) =
            (open(&self.txn, OBJECT_ROWS)?, open(&self.txn, LOG)?, open(&self.txn, WORLD_ROWS)?)
        else {
            return Ok(None);
        };
        let rows = referrers::Rows {
            object_rows: &object_rows,
            log: &log,
            world_rows: &world_rows,
            payloads: self.payloads.as_ref(),
        };
        f(&rows).map(Some)
    }

    /// How far the referrer index has got, and where the rows end (read
    /// once a snapshot: a verify asks it for every world).
    pub(crate) fn referrers_indexed(&self) -> Result<(Indexed, Indexed), ReadError> {
        if let Some(known) = self.indexed.get() {
            return Ok(*known);
        }
        let ends = self.with_unindexed(|rows| Indexed::ends(rows.object_rows, rows.log, rows.world_rows))?;
        let read = match (open(&self.txn, META)?, ends) {
            (Some(meta), Some(ends)) => (Indexed::read(&meta)?, ends),
            _ => Default::default(),
        };
        Ok(*self.indexed.get_or_init(|| read))
    }

    /// Calls `f` with each referrer the index has not reached and the refs
    /// its row names, in (kind, position) order.
    pub(crate) fn each_unindexed(
        &self,
        mut f: impl FnMut(u8, u64, Result<Vec<Ref>, ReadError>) -> Result<(), ReadError>,
    ) -> Result<(), ReadError> {
        let (from, ends) = self.referrers_indexed()?;
        if from.behind(ends) == 0 {
            return Ok(());
        }
        self.with_unindexed(|rows| rows.each_after(from, ends, &mut f))?;
        Ok(())
    }

    /// The referrers the index has not reached that name `target`, in
    /// (kind, position) order.
    fn unindexed_referrers(&self, target: &Ref) -> Result<Vec<(u8, u64)>, ReadError> {
        let mut found = vec![];
        self.each_unindexed(|kind, position, targets| {
            if targets?.contains(target) {
                found.push((kind, position));
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// Whether the referrer of `kind` at `position` is past the index: then
    /// whether it names `target` is its row's to say (`Some`).
    fn unindexed_names(&self, target: &Ref, kind: u8, position: u64) -> Result<Option<bool>, ReadError> {
        if position < self.referrers_indexed()?.0.of(kind) {
            return Ok(None);
        }
        self.with_unindexed(|rows| Ok(rows.targets(kind, position)?.contains(target)))
    }

    /// Whether the referrer of `kind` at `position` is indexed under the
    /// target place `place` (one lookup: for a caller that knows where the
    /// target sits; `has_referrer_at` when it does not).
    pub(crate) fn has_referrer_under(&self, place: (u8, u64), kind: u8, position: u64) -> Result<bool, ReadError> {
        let (place, at) = place;
        match open(&self.txn, REFERRERS)? {
            Some(t) => Ok(t.get(ReferrerKey(place, at, kind, position)).map_err(read_storage)?.is_some()),
            None => Ok(false),
        }
    }

    /// Whether the referrer of `kind` at `position` is indexed as naming
    /// `target`, under any of its places.
    pub(crate) fn has_referrer_at(&self, target: &Ref, kind: u8, position: u64) -> Result<bool, ReadError> {
        if let Some(names) = self.unindexed_names(target, kind, position)? {
            return Ok(names);
        }
        for place in self.places_of(target)? {
            if self.has_referrer_row(target, place, kind, position)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether one place of `target` holds the row of the referrer of `kind`
    /// at `position`: under a place of the store's, or under its hash.
    fn has_referrer_row(
        &self,
        target: &Ref,
        place: Option<(u8, u64)>,
        kind: u8,
        position: u64,
    ) -> Result<bool, ReadError> {
        let Some(place) = place else {
            return match open(&self.txn, REFERRERS_OF_ABSENT)? {
                Some(t) => Ok(t.get((target.0, kind, position)).map_err(read_storage)?.is_some()),
                None => Ok(false),
            };
        };
        self.has_referrer_under(place, kind, position)
    }

    /// At most `limit` (kind, position) rows naming `target` under one of its
    /// places, in order, strictly after `from`.
    fn referrers_at(
        &self,
        target: &Ref,
        place: Option<(u8, u64)>,
        from: Option<(u8, u64)>,
        limit: usize,
    ) -> Result<Vec<(u8, u64)>, ReadError> {
        let (kind, position) = from.unwrap_or((0, 0));
        match place {
            Some((place, at)) => {
                let Some(t) = open(&self.txn, REFERRERS)? else { return Ok(vec![]) };
                let rows = t
                    .range(ReferrerKey(place, at, kind, position)..=ReferrerKey(place, at, u8::MAX, u64::MAX))
                    .map_err(read_storage)?;
                take_after(rows.map(|row| row.map(|(k, _)| (k.value().2, k.value().3))), from, limit)
            }
            None => {
                let Some(t) = open(&self.txn, REFERRERS_OF_ABSENT)? else { return Ok(vec![]) };
                let rows = t.range((target.0, kind, position)..=(target.0, u8::MAX, u64::MAX)).map_err(read_storage)?;
                take_after(rows.map(|row| row.map(|(k, _)| (k.value().1, k.value().2))), from, limit)
            }
        }
    }

    pub(crate) fn begin(
        db: &impl ReadableDatabase,
        payloads: std::sync::Arc<dyn crate::media::WalIo>,
    ) -> Result<RedbSnapshot, ReadError> {
        Ok(RedbSnapshot {
            txn: db.begin_read().map_err(read_storage)?,
            payloads,
            places: Default::default(),
            semantic: Default::default(),
            indexed: Default::default(),
        })
    }

    pub(crate) fn txn(&self) -> &ReadTransaction {
        &self.txn
    }

    pub(crate) fn payload_file(&self) -> &dyn crate::media::WalIo {
        self.payloads.as_ref()
    }
}

impl View for RedbSnapshot {
    fn object_meta(&self, r: &Ref) -> Result<Option<ObjectMeta>, ReadError> {
        let Some(seq) = self.object_seq(r)? else { return Ok(None) };
        let row = self.object_row(seq)?.ok_or_else(|| rows::Corruption {
            table: "places",
            key: r.to_string(),
            detail: format!("object {seq} has no row"),
        })?;
        Ok(Some(row.meta()))
    }

    /// The object's sequence number (its payload's key).
    fn object_seq(&self, r: &Ref) -> Result<Option<u64>, ReadError> {
        self.place(r, PLACE_OBJECT)
    }

    fn payload(&self, r: &Ref) -> Result<Option<Vec<u8>>, ReadError> {
        let Some(seq) = self.object_seq(r)? else { return Ok(None) };
        let Some(row) = self.object_row(seq)? else { return Ok(None) };
        let bytes = crate::payloads::read(self.payloads.as_ref(), row.at, row.size).map_err(|e| rows::Corruption {
            table: "payloads",
            key: r.to_string(),
            detail: format!("{} bytes at {} of the payload file: {e}", row.size, row.at),
        })?;
        Ok(Some(bytes))
    }

    /// The object with sequence number `seq`.
    fn object_at(&self, seq: u64) -> Result<Option<Ref>, ReadError> {
        Ok(self.object_row(seq)?.map(|row| row.hash))
    }

    /// The world of revision `revision`.
    fn world_at(&self, revision: u64) -> Result<Option<Ref>, ReadError> {
        Ok(self.world_row(revision)?.map(|w| w.world_ref))
    }

    fn has_object(&self, r: &Ref) -> Result<bool, ReadError> {
        Ok(self.object_seq(r)?.is_some())
    }

    /// Objects with `semantic_id`, in ascending hash order, strictly after `after`.
    fn objects_by_semantic_id(
        &self,
        semantic_id: &str,
        after: Option<Ref>,
        limit: usize,
    ) -> Result<Vec<(Ref, ObjectMeta)>, ReadError> {
        let limit = limit.min(PAGE_MAX);
        let h = semantic_key(semantic_id, &Ref([0; 32])).0;
        let from = match after {
            Some(r) => Bound::Excluded(SemanticKey(h, r.0)),
            None => Bound::Included(SemanticKey(h, [0; 32])),
        };
        let rows = self.semantic_rows(from, Bound::Included(SemanticKey(h, [0xff; 32])))?;
        let mut out = Vec::with_capacity(limit.min(64));
        for item in rows.take(limit) {
            let (SemanticKey(_, r), seq) = item.map_err(read_storage)?;
            let r = Ref(r);
            let corrupt =
                |detail: String| rows::Corruption { table: "semantic", key: format!("{semantic_id} {r}"), detail };
            let row = self.object_row(seq)?.ok_or_else(|| corrupt(format!("names object {seq}, which has no row")))?;
            if row.semantic_id != semantic_id {
                return Err(corrupt(format!("names object {seq}, whose semanticId is {}", row.semantic_id)).into());
            }
            out.push((r, row.meta()));
        }
        Ok(out)
    }

    fn log_entry(&self, index: u64) -> Result<Option<LogEntry>, ReadError> {
        let Some(t) = open(&self.txn, LOG)? else { return Ok(None) };
        match t.get(index).map_err(read_storage)? {
            Some(v) => Ok(Some(rows::decode("log", &index, v.value())?)),
            None => Ok(None),
        }
    }

    /// Entries from `from`, stopping at the first absent index.
    fn log_range(&self, from: u64, limit: usize) -> Result<Vec<LogEntry>, ReadError> {
        let limit = limit.min(PAGE_MAX);
        let Some(t) = open(&self.txn, LOG)? else { return Ok(vec![]) };
        let mut out = Vec::with_capacity(limit.min(64));
        // An inclusive range ends at the last index instead of overflowing past it.
        for (expected, item) in (from..=u64::MAX).zip(t.range(from..).map_err(read_storage)?) {
            if out.len() >= limit {
                break;
            }
            let (k, v) = item.map_err(read_storage)?;
            if k.value() != expected {
                break;
            }
            out.push(rows::decode("log", &expected, v.value())?);
        }
        Ok(out)
    }

    /// Number of entries: one past the last index (the log is contiguous from 0).
    fn log_len(&self) -> Result<u64, ReadError> {
        let Some(t) = open(&self.txn, LOG)? else { return Ok(0) };
        Ok(t.last().map_err(read_storage)?.map(|(k, _)| k.value() + 1).unwrap_or(0))
    }

    fn world(&self, r: &Ref) -> Result<Option<World>, ReadError> {
        let Some(revision) = self.place(r, PLACE_WORLD)? else { return Ok(None) };
        self.world_row(revision)
    }

    fn head(&self, name: &str) -> Result<Option<Ref>, ReadError> {
        let Some(t) = open(&self.txn, HEADS)? else { return Ok(None) };
        Ok(t.get(name).map_err(read_storage)?.map(|v| Ref(v.value())))
    }

    /// All named heads (registry heads and the selected world), in name order.
    fn heads(&self) -> Result<Vec<(String, Ref)>, ReadError> {
        let Some(t) = open(&self.txn, HEADS)? else { return Ok(vec![]) };
        let mut out = vec![];
        for item in t.iter().map_err(read_storage)? {
            let (k, v) = item.map_err(read_storage)?;
            out.push((k.value().to_string(), Ref(v.value())));
        }
        Ok(out)
    }

    fn registry_entry(&self, registry: &str, id: &str) -> Result<Option<Ref>, ReadError> {
        let Some(t) = open(&self.txn, REGISTRY_ENTRIES)? else { return Ok(None) };
        Ok(t.get((registry, id)).map_err(read_storage)?.map(|v| Ref(v.value())))
    }

    fn session(&self, credential_id: &Ref) -> Result<Option<Session>, ReadError> {
        let Some(t) = open(&self.txn, SESSIONS)? else { return Ok(None) };
        match t.get(credential_id.0).map_err(read_storage)? {
            Some(v) => Ok(Some(rows::decode("sessions", credential_id, v.value())?)),
            None => Ok(None),
        }
    }

    /// Up to `limit` sessions in credential-id order.
    fn sessions(&self, limit: usize) -> Result<Vec<(Ref, Session)>, ReadError> {
        let Some(t) = open(&self.txn, SESSIONS)? else { return Ok(vec![]) };
        let mut out = vec![];
        for item in t.iter().map_err(read_storage)? {
            if out.len() >= limit {
                break;
            }
            let (k, v) = item.map_err(read_storage)?;
            let id = Ref(k.value());
            out.push((id, rows::decode("sessions", &id, v.value())?));
        }
        Ok(out)
    }

    fn approval(&self, id: &str) -> Result<Option<ApprovalRow>, ReadError> {
        let Some(t) = open(&self.txn, APPROVALS)? else { return Ok(None) };
        match t.get(id).map_err(read_storage)? {
            Some(v) => Ok(Some(rows::decode("approvals", &id, v.value())?)),
            None => Ok(None),
        }
    }

    fn open_approval(&self, credential: &Ref, digest: &Ref) -> Result<Option<(String, ApprovalRow)>, ReadError> {
        let Some(t) = open(&self.txn, OPEN_APPROVALS)? else { return Ok(None) };
        let Some(id) = t.get((credential.0, digest.0)).map_err(read_storage)?.map(|v| v.value().to_string()) else {
            return Ok(None);
        };
        Ok(self.approval(&id)?.map(|row| (id, row)))
    }

    fn open_approvals(&self, limit: usize) -> Result<Vec<(String, ApprovalRow)>, ReadError> {
        let Some(t) = open(&self.txn, OPEN_APPROVALS)? else { return Ok(vec![]) };
        let mut out = vec![];
        for item in t.iter().map_err(read_storage)?.take(limit) {
            let (_, v) = item.map_err(read_storage)?;
            let id = v.value().to_string();
            let row = self.approval(&id)?.ok_or_else(|| rows::Corruption {
                table: "open_approvals",
                key: id.clone(),
                detail: "names an approval that has no row".into(),
            })?;
            out.push((id, row));
        }
        Ok(out)
    }

    fn awaited_approval(&self, credential: &Ref, task_id: &str) -> Result<Option<(String, ApprovalRow)>, ReadError> {
        let Some(t) = open(&self.txn, APPROVAL_WAITS)? else { return Ok(None) };
        let Some(id) = t.get((credential.0, task_id)).map_err(read_storage)?.map(|v| v.value().to_string()) else {
            return Ok(None);
        };
        let row = self.approval(&id)?.ok_or_else(|| rows::Corruption {
            table: "approval_waits",
            key: format!("{credential} {task_id}"),
            detail: format!("names approval {id}, which has no row"),
        })?;
        Ok(Some((id, row)))
    }

    fn approvals(&self, after: Option<&str>, limit: usize) -> Result<Vec<(String, ApprovalRow)>, ReadError> {
        let Some(t) = open(&self.txn, APPROVALS)? else { return Ok(vec![]) };
        let range = match after {
            Some(a) => t.range::<&str>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)),
            None => t.range::<&str>(..),
        };
        let mut out = vec![];
        for item in range.map_err(read_storage)?.take(limit) {
            let (k, v) = item.map_err(read_storage)?;
            let id = k.value().to_string();
            let row = rows::decode("approvals", &id, v.value())?;
            out.push((id, row));
        }
        Ok(out)
    }

    fn task(&self, key: &TaskKey) -> Result<Option<Task>, ReadError> {
        let Some(t) = open(&self.txn, TASKS)? else { return Ok(None) };
        let k = (key.surface.as_str(), key.task_id.as_str(), key.episode.as_str());
        match t.get(k).map_err(read_storage)? {
            Some(v) => Ok(Some(rows::decode("tasks", &key.invocation_id(), v.value())?)),
            None => Ok(None),
        }
    }

    fn receipt(&self, id: &str) -> Result<Option<Receipt>, ReadError> {
        let Some(t) = open(&self.txn, RECEIPTS)? else { return Ok(None) };
        match t.get(id).map_err(read_storage)? {
            Some(v) => Ok(Some(rows::decode("receipts", &id, v.value())?)),
            None => Ok(None),
        }
    }

    /// Units spent by `episode` on `(effect, scope)`.
    fn spent(&self, episode: &str, effect: &str, scope: &str) -> Result<u64, ReadError> {
        let Some(t) = open(&self.txn, SPEND)? else { return Ok(0) };
        Ok(t.get((episode, effect, scope)).map_err(read_storage)?.map(|v| v.value()).unwrap_or(0))
    }

    /// The journal of one invocation: each intent with its outcome, in ordinal order.
    fn journal_of(&self, invocation_id: &str) -> Result<Vec<JournalItem>, ReadError> {
        let Some(intents) = open(&self.txn, INTENTS)? else { return Ok(vec![]) };
        let outcomes = open(&self.txn, OUTCOMES)?;
        let mut out = vec![];
        for item in intents.range((invocation_id, 0u32)..=(invocation_id, u32::MAX)).map_err(read_storage)? {
            let (k, v) = item.map_err(read_storage)?;
            let ordinal = k.value().1;
            let key = format!("{invocation_id}#{ordinal}");
            let intent: EffectIntent = rows::decode("intents", &key, v.value())?;
            let outcome = match &outcomes {
                Some(t) => match t.get((invocation_id, ordinal)).map_err(read_storage)? {
                    Some(v) => Some(rows::decode("outcomes", &key, v.value())?),
                    None => None,
                },
                None => None,
            };
            out.push(JournalItem { ordinal, intent, outcome });
        }
        Ok(out)
    }

    /// Who names `target`, by kind (objects, entries, worlds) and then in the
    /// order they were written, strictly after `after`.
    fn referrers(&self, target: &Ref, after: Option<(u8, Ref)>, limit: usize) -> Result<Vec<Referrer>, ReadError> {
        let limit = limit.min(PAGE_MAX);
        let from = match after {
            // A cursor that names nothing known resumes after its whole kind.
            Some((kind, r)) => Some((kind, self.referrer_position(kind, &r)?.unwrap_or(u64::MAX))),
            None => None,
        };
        // Rows naming `target` sit under each place it has had: its object's
        // or entry's, or its hash while the store held neither. Each list is
        // in (kind, position) order; the page is their merge.
        let mut found: Vec<(u8, u64)> = vec![];
        for place in self.places_of(target)? {
            found.extend(self.referrers_at(target, place, from, limit)?);
        }
        found.extend(self.unindexed_referrers(target)?.into_iter().filter(|row| from.is_none_or(|from| *row > from)));
        found.sort_unstable();
        found.dedup();
        found.truncate(limit);
        found.into_iter().map(|(kind, position)| self.referrer_of(target, kind, position)).collect()
    }

    fn has_referrer(&self, target: &Ref, kind: u8, referrer: &Ref) -> Result<bool, ReadError> {
        match self.referrer_position(kind, referrer)? {
            Some(position) => self.has_referrer_at(target, kind, position),
            None => Ok(false),
        }
    }

    /// The index of the entry with hash `entry_hash`.
    fn entry_index_of(&self, entry_hash: &Ref) -> Result<Option<u64>, ReadError> {
        self.place(entry_hash, PLACE_ENTRY)
    }

    fn episode(&self, episode: &str) -> Result<Option<EpisodeRow>, ReadError> {
        let Some(t) = open(&self.txn, EPISODES)? else { return Ok(None) };
        match t.get(episode).map_err(read_storage)? {
            Some(v) => Ok(Some(rows::decode("episodes", &episode, v.value())?)),
            None => Ok(None),
        }
    }

    fn episodes(&self, after: Option<(u64, String)>, limit: usize) -> Result<Vec<(String, EpisodeRow)>, ReadError> {
        let limit = limit.min(PAGE_MAX);
        let Some(t) = open(&self.txn, EPISODES_BY_ACTIVITY)? else { return Ok(vec![]) };
        let range = match &after {
            Some((at, ep)) => t.range(..(*at, ep.as_str())).map_err(read_storage)?,
            None => t.range::<(u64, &str)>(..).map_err(read_storage)?,
        };
        let mut out = vec![];
        for item in range.rev() {
            if out.len() >= limit {
                break;
            }
            let (k, _) = item.map_err(read_storage)?;
            let (at, episode) = k.value();
            let row = self.episode(episode)?.ok_or_else(|| rows::Corruption {
                table: "episodes_by_activity",
                key: format!("{at} {episode}"),
                detail: "names an episode without a summary".into(),
            })?;
            out.push((episode.to_string(), row));
        }
        Ok(out)
    }

    fn episode_calls(&self, episode: &str, from: u64, limit: usize) -> Result<Vec<(u64, TaskKey, Task)>, ReadError> {
        let limit = limit.min(PAGE_MAX);
        let Some(t) = open(&self.txn, EPISODE_CALLS)? else { return Ok(vec![]) };
        let mut out = vec![];
        for item in t.range((episode, from)..=(episode, u64::MAX)).map_err(read_storage)? {
            if out.len() >= limit {
                break;
            }
            let (k, v) = item.map_err(read_storage)?;
            let seq = k.value().1;
            let (surface, task_id) = v.value();
            let corrupt = |detail: &str| rows::Corruption {
                table: "episode_calls",
                key: format!("{episode} {seq}"),
                detail: detail.into(),
            };
            let surface = Surface::parse(surface).ok_or_else(|| corrupt("names an unknown surface"))?;
            let key = TaskKey { surface, episode: episode.to_string(), task_id: task_id.to_string() };
            let task = self.task(&key)?.ok_or_else(|| corrupt("names a task that has no row"))?;
            out.push((seq, key, task));
        }
        Ok(out)
    }

    fn episode_sessions(&self, episode: &str, limit: usize) -> Result<Vec<(Ref, Session)>, ReadError> {
        let Some(t) = open(&self.txn, EPISODE_SESSIONS)? else { return Ok(vec![]) };
        let mut out = vec![];
        for item in t.range((episode, [0u8; 32])..=(episode, [0xffu8; 32])).map_err(read_storage)? {
            if out.len() >= limit {
                break;
            }
            let (k, _) = item.map_err(read_storage)?;
            let id = Ref(k.value().1);
            let session = self.session(&id)?.ok_or_else(|| rows::Corruption {
                table: "episode_sessions",
                key: format!("{episode} {id}"),
                detail: "names a session that has no row".into(),
            })?;
            out.push((id, session));
        }
        Ok(out)
    }

    fn episode_spend(&self, episode: &str) -> Result<Vec<(String, String, u64)>, ReadError> {
        let Some(t) = open(&self.txn, SPEND)? else { return Ok(vec![]) };
        let mut out = vec![];
        for item in t.range((episode, "", "")..).map_err(read_storage)? {
            let (k, v) = item.map_err(read_storage)?;
            let (ep, effect, scope) = k.value();
            if ep != episode {
                break;
            }
            out.push((effect.to_string(), scope.to_string(), v.value()));
        }
        Ok(out)
    }

    fn record_journal(&self, record: &Ref) -> Result<Option<JournalKey>, ReadError> {
        if let (Some(seq), Some(t)) = (self.place(record, PLACE_OBJECT)?, open(&self.txn, RECORD_JOURNAL)?)
            && let Some(v) = t.get(seq).map_err(read_storage)?
        {
            return Ok(Some(rows::decode("record_journal", record, v.value())?));
        }
        let Some(t) = open(&self.txn, RECORD_JOURNAL_OF_ABSENT)? else { return Ok(None) };
        let Some(v) = t.get(record.0).map_err(read_storage)? else { return Ok(None) };
        Ok(Some(rows::decode("record_journal", record, v.value())?))
    }
}
