//! The rows an engine derives from the records rather than receives: who
//! names an object (`referrers`) and which outcome carries an effect record
//! (`record_journal`). Each table is summed up as its row count and an
//! order-free digest of its rows, each row spelled by refs rather than by
//! engine-local positions (an object's sequence number differs between two
//! engines holding the same objects). Two engines holding the same records
//! and deriving the same rows have equal sums; a row missing, extra or
//! naming something else changes them.

use crate::model::JournalKey;
use crate::read::RedbSnapshot;
use crate::refs::Ref;
use crate::rows;
use crate::tables::{
    EPISODE_CALLS, EPISODE_SESSIONS, EPISODES, OBJECT_ROWS, RECORD_JOURNAL, RECORD_JOURNAL_OF_ABSENT, REFERRERS,
    REFERRERS_OF_ABSENT, ReferrerKey, TARGET_ENTRY, TARGET_OBJECT,
};
use crate::view::View;
use redb::ReadableTable;

/// A table's rows: how many, and the lane-wise wrapping sum of each row's
/// BLAKE3 hash (so the order rows are read in does not matter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowSum {
    pub rows: u64,
    lanes: [u64; 4],
}

impl RowSum {
    /// Adds one row, given as its fields (each length-prefixed, so that no
    /// two rows spell the same bytes).
    pub fn add(&mut self, fields: &[&[u8]]) {
        let mut h = blake3::Hasher::new();
        for f in fields {
            h.update(&(f.len() as u64).to_le_bytes());
            h.update(f);
        }
        let digest = h.finalize();
        for (lane, chunk) in self.lanes.iter_mut().zip(digest.as_bytes().chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *lane = lane.wrapping_add(u64::from_le_bytes(b));
        }
        self.rows += 1;
    }

    /// A referrer row: `referrer` (of `kind`) names `target`.
    pub fn add_referrer(&mut self, target: &Ref, kind: u8, referrer: &Ref) {
        self.add(&[&target.0, &[kind], &referrer.0]);
    }

    /// A record journal row: `record` is carried by `key`'s outcome.
    pub fn add_record(&mut self, record: &Ref, key: &JournalKey) {
        self.add(&[&record.0, key.invocation_id.as_bytes(), &key.ordinal.to_be_bytes()]);
    }
}

/// The derived tables of one store, summed up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Derived {
    pub referrers: RowSum,
    pub record_journal: RowSum,
    /// Each episode's summary, as its encoded row.
    pub episodes: RowSum,
    /// Each call's position in its episode: (episode, position, surface, task id).
    pub episode_calls: RowSum,
    /// Each session under its episode.
    pub episode_sessions: RowSum,
}

impl RowSum {
    pub fn add_episode(&mut self, episode: &str, summary: &[u8]) {
        self.add(&[episode.as_bytes(), summary]);
    }

    pub fn add_call(&mut self, episode: &str, position: u64, surface: &str, task_id: &str) {
        self.add(&[episode.as_bytes(), &position.to_be_bytes(), surface.as_bytes(), task_id.as_bytes()]);
    }

    pub fn add_session(&mut self, episode: &str, credential_id: &Ref) {
        self.add(&[episode.as_bytes(), &credential_id.0]);
    }
}

/// The object or entry at a referrer row's target place.
fn target_at(snap: &RedbSnapshot, place: u8, at: u64) -> Result<Option<Ref>, String> {
    let found = match place {
        TARGET_OBJECT => snap.object_at(at),
        TARGET_ENTRY => snap.log_entry(at).map(|e| e.map(|e| e.entry_hash)),
        _ => Ok(None),
    };
    found.map_err(|e| e.to_string())
}

/// Adds that the referrer of `kind` at `position` names `target`.
fn add_referrer(snap: &RedbSnapshot, sum: &mut RowSum, target: &Ref, kind: u8, position: u64) -> Result<(), String> {
    let referrer = snap
        .referrer_at(kind, position)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("referrer {target} {kind} {position} names nothing"))?;
    sum.add_referrer(target, kind, &referrer);
    Ok(())
}

/// The derived tables of an embedded store. A referrer row naming a position
/// that holds nothing is an error here: the embedded verifier's own checks
/// say where.
pub(crate) fn of_embedded(snap: &RedbSnapshot) -> Result<Derived, String> {
    let mut derived = Derived::default();
    if let Some(t) = open(snap, REFERRERS)? {
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, _) = item.map_err(|e| e.to_string())?;
            let ReferrerKey(place, at, kind, position) = k.value();
            let target = target_at(snap, place, at)?
                .ok_or_else(|| format!("referrer row {place} {at} {kind} {position} names no target"))?;
            add_referrer(snap, &mut derived.referrers, &target, kind, position)?;
        }
    }
    if let Some(t) = open(snap, REFERRERS_OF_ABSENT)? {
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, _) = item.map_err(|e| e.to_string())?;
            let (target, kind, position) = k.value();
            add_referrer(snap, &mut derived.referrers, &Ref(target), kind, position)?;
        }
    }
    // The referrers past the index's mark, as their rows name them.
    let mut unindexed = vec![];
    snap.each_unindexed(|kind, position, targets| {
        unindexed.extend(targets?.into_iter().map(|target| (target, kind, position)));
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    for (target, kind, position) in unindexed {
        add_referrer(snap, &mut derived.referrers, &target, kind, position)?;
    }
    if let Some(t) = open(snap, RECORD_JOURNAL)? {
        let object_rows = open(snap, OBJECT_ROWS)?;
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            // A row under a number no object holds sums as the zero ref's,
            // which no outcome names: the sums differ.
            let record = crate::referrers::object_ref(object_rows.as_ref(), k.value())
                .map_err(|e| e.to_string())?
                .unwrap_or(Ref([0; 32]));
            let key: JournalKey = rows::decode("record_journal", &record, v.value()).map_err(|e| e.to_string())?;
            derived.record_journal.add_record(&record, &key);
        }
    }
    if let Some(t) = open(snap, RECORD_JOURNAL_OF_ABSENT)? {
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let record = Ref(k.value());
            let key: JournalKey = rows::decode("record_journal", &record, v.value()).map_err(|e| e.to_string())?;
            derived.record_journal.add_record(&record, &key);
        }
    }
    if let Some(t) = open(snap, EPISODES)? {
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            derived.episodes.add_episode(k.value(), v.value());
        }
    }
    if let Some(t) = open(snap, EPISODE_CALLS)? {
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let ((episode, position), (surface, task_id)) = (k.value(), v.value());
            derived.episode_calls.add_call(episode, position, surface, task_id);
        }
    }
    if let Some(t) = open(snap, EPISODE_SESSIONS)? {
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, _) = item.map_err(|e| e.to_string())?;
            let (episode, id) = k.value();
            derived.episode_sessions.add_session(episode, &Ref(id));
        }
    }
    Ok(derived)
}

fn open<K: redb::Key + 'static, V: redb::Value + 'static>(
    snap: &RedbSnapshot,
    def: redb::TableDefinition<K, V>,
) -> Result<Option<redb::ReadOnlyTable<K, V>>, String> {
    crate::read::open(snap.txn(), def).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_ignores_order_and_sees_a_changed_field() {
        let (a, b, c) = (Ref::of(b"a"), Ref::of(b"b"), Ref::of(b"c"));
        let (mut one, mut two, mut other) = (RowSum::default(), RowSum::default(), RowSum::default());
        one.add_referrer(&a, 1, &b);
        one.add_referrer(&a, 2, &c);
        two.add_referrer(&a, 2, &c);
        two.add_referrer(&a, 1, &b);
        other.add_referrer(&a, 1, &b);
        other.add_referrer(&a, 3, &c);
        assert_eq!(one, two);
        assert_ne!(one, other);
        assert_eq!(other.rows, 2);
    }
}
