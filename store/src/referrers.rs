//! Who names what, and how far the embedded referrer index has got.
//!
//! The embedded engine writes referrer rows behind the commit path: a batch
//! writes its objects, log entries and worlds, and the rows saying which
//! refs each of them names are written once `REFERRERS_BEHIND_MAX` of them
//! wait, all together at the end of that batch, with the semantic index's
//! rows of the same objects. A call then dirties none of
//! the index's pages in its own transaction (at one call per batch, each
//! table a batch touches costs a copy of its path and a checksum of each
//! copied page at commit). How far the index has got is kept in `META`
//! (`Indexed`), in the same transactions as the rows; a reader names the
//! referrers after it from their own rows, which name their targets, so a
//! read is never short and the index is never wrong, only behind (so for
//! the semantic index: an object's row names its semanticId).

use crate::error::{ReadError, read_storage};
use crate::media::WalIo;
use crate::model::{LogEntry, ObjectRow, World};
use crate::refs::Ref;
use crate::rows;
use crate::tables::{
    REFERRER_ENTRY, REFERRER_OBJECT, REFERRER_WORLD, REFS_INDEXED_PER_OBJECT_MAX, SemanticKey, semantic_key,
};
use redb::ReadableTable;

/// Most referrers (objects, entries and worlds together) a batch may leave
/// unindexed; one that leaves more indexes them all at its end. A reader
/// reads at most this many rows, plus one batch's, to name the referrers
/// after the index.
pub const REFERRERS_BEHIND_MAX: u64 = 1024;

const META_OBJECTS: &str = "referrers_indexed_objects";
const META_ENTRIES: &str = "referrers_indexed_entries";
const META_WORLDS: &str = "referrers_indexed_worlds";

/// A position of each referrer kind: the first not yet indexed (`META`), or
/// where the rows end. A store without the rows in `META` indexed nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Indexed {
    pub objects: u64,
    pub entries: u64,
    pub worlds: u64,
}

impl Indexed {
    pub(crate) fn read(meta: &impl ReadableTable<&'static str, u64>) -> Result<Indexed, ReadError> {
        let get = |key| Ok::<_, ReadError>(meta.get(key).map_err(read_storage)?.map_or(0, |v| v.value()));
        Ok(Indexed { objects: get(META_OBJECTS)?, entries: get(META_ENTRIES)?, worlds: get(META_WORLDS)? })
    }

    pub(crate) fn write(self, meta: &mut redb::Table<&'static str, u64>) -> Result<(), redb::StorageError> {
        meta.insert(META_OBJECTS, self.objects)?;
        meta.insert(META_ENTRIES, self.entries)?;
        meta.insert(META_WORLDS, self.worlds)?;
        Ok(())
    }

    /// Where the rows of `objects` (by sequence number), `log` and `worlds` end.
    pub(crate) fn ends(
        objects: &impl ReadableTable<u64, &'static [u8]>,
        log: &impl ReadableTable<u64, &'static [u8]>,
        worlds: &impl ReadableTable<u64, &'static [u8]>,
    ) -> Result<Indexed, ReadError> {
        let end = |last: Option<(redb::AccessGuard<u64>, _)>| last.map_or(0, |(k, _)| k.value() + 1);
        Ok(Indexed {
            objects: end(objects.last().map_err(read_storage)?),
            entries: end(log.last().map_err(read_storage)?),
            worlds: end(worlds.last().map_err(read_storage)?),
        })
    }

    /// The first position of `kind` not indexed (a referrer kind, or the
    /// place kind of the same rows: they are the same numbers).
    pub fn of(self, kind: u8) -> u64 {
        match kind {
            REFERRER_OBJECT => self.objects,
            REFERRER_ENTRY => self.entries,
            REFERRER_WORLD => self.worlds,
            _ => u64::MAX,
        }
    }

    /// How many referrers sit between `self` and `ends`.
    pub(crate) fn behind(self, ends: Indexed) -> u64 {
        ends.objects.saturating_sub(self.objects)
            + ends.entries.saturating_sub(self.entries)
            + ends.worlds.saturating_sub(self.worlds)
    }

    /// Whether no position is past `ends` (what `verify` checks).
    pub fn within(self, ends: Indexed) -> bool {
        self.objects <= ends.objects && self.entries <= ends.entries && self.worlds <= ends.worlds
    }
}

// A place's kind is its row's referrer kind (`Indexed::of` takes either).
const _: () = assert!(
    crate::tables::PLACE_OBJECT == REFERRER_OBJECT
        && crate::tables::PLACE_ENTRY == REFERRER_ENTRY
        && crate::tables::PLACE_WORLD == REFERRER_WORLD
);

/// The ref an object's (`REFERRER_OBJECT`), a log entry's or a world's row
/// holds: the object's, the entry hash or the world ref; `None` for a row
/// that does not decode (`verify` reports it).
pub(crate) fn ref_of_row(kind: u8, position: u64, bytes: &[u8]) -> Option<Ref> {
    /// An object row read for its ref alone (its other fields are skipped).
    #[derive(serde::Deserialize)]
    struct ObjectRef {
        hash: Ref,
    }
    match kind {
        REFERRER_OBJECT => rows::decode::<ObjectRef>("object_rows", &position, bytes).ok().map(|o| o.hash),
        REFERRER_ENTRY => rows::decode::<LogEntry>("log", &position, bytes).ok().map(|e| e.entry_hash),
        _ => rows::decode::<World>("world_rows", &position, bytes).ok().map(|w| w.world_ref),
    }
}

/// The ref the row of the object at `seq` holds; `None` where there is no
/// such row or it does not decode (`verify` reports it).
pub(crate) fn object_ref<T: ReadableTable<u64, &'static [u8]>>(
    object_rows: Option<&T>,
    seq: u64,
) -> Result<Option<Ref>, ReadError> {
    let Some(t) = object_rows else { return Ok(None) };
    let row = t.get(seq).map_err(read_storage)?;
    Ok(row.and_then(|v| ref_of_row(REFERRER_OBJECT, seq, v.value())))
}

/// The refs an object names: those its payload spells out, but itself.
pub fn object_targets(hash: &Ref, payload: &[u8]) -> Vec<Ref> {
    let mut targets = crate::refs::refs_named_in(payload, REFS_INDEXED_PER_OBJECT_MAX);
    targets.retain(|t| t != hash);
    targets
}

/// A referrer's targets as the index holds them: sorted, each once.
pub(crate) fn each_once(mut targets: Vec<Ref>) -> Vec<Ref> {
    targets.sort_unstable();
    targets.dedup();
    targets
}

/// The refs a log entry names.
pub fn entry_targets(entry: &LogEntry) -> [Ref; 3] {
    [entry.transition_ref, entry.header.transition_fn, entry.header.interpreter]
}

/// The refs a world names.
pub fn world_targets(world: &World) -> [Ref; 2] {
    [world.state_root, world.log_head]
}

/// The tables a referrer's own row is read from.
pub(crate) struct Rows<'a, O, L, Wr> {
    pub object_rows: &'a O,
    pub log: &'a L,
    pub world_rows: &'a Wr,
    pub payloads: &'a dyn WalIo,
}

impl<O, L, Wr> Rows<'_, O, L, Wr>
where
    O: ReadableTable<u64, &'static [u8]>,
    L: ReadableTable<u64, &'static [u8]>,
    Wr: ReadableTable<u64, &'static [u8]>,
{
    /// The refs the referrer of `kind` at `position` names, read from its
    /// row, each once (as the index holds them); none where there is no row.
    pub(crate) fn targets(&self, kind: u8, position: u64) -> Result<Vec<Ref>, ReadError> {
        Ok(each_once(self.named(kind, position)?))
    }

    /// The semantic index's rows of the objects from `from` up to `to`, in
    /// sequence order: indexed with the objects' referrer rows. An object
    /// whose row does not decode has no semanticId to be indexed under and
    /// is left out (`verify` reports the row).
    pub(crate) fn semantic_rows(&self, from: u64, to: u64) -> Result<Vec<(SemanticKey, u64)>, ReadError> {
        let mut out = Vec::with_capacity(to.saturating_sub(from) as usize);
        for seq in from..to {
            match self.object(seq) {
                Ok(Some(row)) => out.push((semantic_key(&row.semantic_id, &row.hash), seq)),
                Ok(None) | Err(ReadError::Corrupt(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// The row of the object at `seq`.
    fn object(&self, seq: u64) -> Result<Option<ObjectRow>, ReadError> {
        let Some(row) = self.object_rows.get(seq).map_err(read_storage)? else { return Ok(None) };
        Ok(Some(rows::decode("object_rows", &seq, row.value())?))
    }

    fn named(&self, kind: u8, position: u64) -> Result<Vec<Ref>, ReadError> {
        match kind {
            REFERRER_OBJECT => {
                let Some(row) = self.object(position)? else { return Ok(vec![]) };
                let payload = crate::payloads::read(self.payloads, row.at, row.size).map_err(|e| rows::Corruption {
                    table: "payloads",
                    key: position.to_string(),
                    detail: format!("{} bytes at {} of the payload file: {e}", row.size, row.at),
                })?;
                Ok(object_targets(&row.hash, &payload))
            }
            REFERRER_ENTRY => match self.log.get(position).map_err(read_storage)? {
                Some(v) => Ok(entry_targets(&rows::decode::<LogEntry>("log", &position, v.value())?).to_vec()),
                None => Ok(vec![]),
            },
            REFERRER_WORLD => match self.world_rows.get(position).map_err(read_storage)? {
                Some(v) => Ok(world_targets(&rows::decode::<World>("world_rows", &position, v.value())?).to_vec()),
                None => Ok(vec![]),
            },
            _ => Ok(vec![]),
        }
    }

    /// Calls `f` with every (kind, position) from `from` up to `ends` and
    /// what its row names (or why that could not be read), in (kind,
    /// position) order.
    pub(crate) fn each_after(
        &self,
        from: Indexed,
        ends: Indexed,
        mut f: impl FnMut(u8, u64, Result<Vec<Ref>, ReadError>) -> Result<(), ReadError>,
    ) -> Result<(), ReadError> {
        for kind in [REFERRER_OBJECT, REFERRER_ENTRY, REFERRER_WORLD] {
            for position in from.of(kind)..ends.of(kind) {
                f(kind, position, self.targets(kind, position))?;
            }
        }
        Ok(())
    }
}
