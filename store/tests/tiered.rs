//! The tiered indexes at the store's own sizes: enough objects that the
//! place and semantic indexes' young tables become runs several times and a
//! merge completes, then every object is found where it was written, and
//! listed in ref order once, across a reopen; and a store whose index passes
//! all come from checkpoints keeps its young tables to their size.

mod common;

use redb::ReadableTable;
use world_store::tables::{PLACES, SEMANTIC};
use world_store::tiered::{RUN_BUILDING, RUN_COMPLETE, RUNS_PER_MERGE, YOUNG_ROWS_MAX};
use world_store::*;

/// Objects per request: a batch of them is placed at once.
const OBJECTS_PER_PUT: u64 = 1024;

fn object(i: u64) -> NewObject {
    NewObject::derived("test/placed", "test", format!("{{\"n\":{i}}}").into_bytes())
}

/// Each index's run directory as (level, state) per run.
fn runs(path: &std::path::Path) -> [Vec<(u8, u8)>; 2] {
    let db = redb::Database::open(path).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let listed = |dir| world_store::tiered::runs(&txn.open_table(dir).unwrap()).unwrap();
    [listed(PLACES.runs), listed(SEMANTIC.runs)].map(|runs| runs.iter().map(|r| (r.level, r.state)).collect())
}

#[test]
fn index_passes_that_only_checkpoints_run_still_turn_the_young_tables_into_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    // Puts well under `REFERRERS_BEHIND_MAX` with a checkpoint after each:
    // no batch makes an index pass of its own, every pass is a checkpoint's,
    // and the indexes' steps must follow those passes too.
    let per_put = world_store::referrers::REFERRERS_BEHIND_MAX / 4;
    let total = YOUNG_ROWS_MAX + 2 * per_put;
    {
        let opts = StoreOptions { checkpoint_wal_bytes: Some(1), ..StoreOptions::default() };
        let (store, _) = Store::open_with(&path, 1, opts).unwrap();
        for (put, first) in (0..total).step_by(per_put as usize).enumerate() {
            let objects = (first..(first + per_put).min(total)).map(object).collect();
            assert_eq!(store.call(Op::PutObjects(objects)).unwrap(), Reply::Done);
            // A put is answered before the checkpoint after it: one may lag.
            assert!(store.checkpoints() >= put as u64, "a checkpoint after each put but the last");
        }
        common::assert_verifies(&store);
    }
    for runs in runs(&path) {
        assert_eq!(runs, vec![(0, RUN_COMPLETE)], "the young table became a run");
    }
}

#[test]
fn objects_placed_through_several_runs_and_a_merge_are_each_found_where_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    // `RUNS_PER_MERGE` young tables become runs of level 0, and their merge
    // into one of level 1 completes (it moves eight rows per row placed).
    let total = YOUNG_ROWS_MAX * (RUNS_PER_MERGE as u64 + 1) + YOUNG_ROWS_MAX / 2;
    {
        let (store, _) = Store::open(&path, 1).unwrap();
        for first in (0..total).step_by(OBJECTS_PER_PUT as usize) {
            let objects = (first..(first + OBJECTS_PER_PUT).min(total)).map(object).collect();
            assert_eq!(store.call(Op::PutObjects(objects)).unwrap(), Reply::Done);
        }
        // Written again, an object keeps its place.
        store.call(Op::PutObjects((0..8).map(object).collect())).unwrap();
        common::assert_verifies(&store);
    }
    for runs in runs(&path) {
        assert!(runs.contains(&(1, RUN_COMPLETE)), "a merged run: {runs:?}");
        assert!(runs.iter().all(|(_, state)| *state != RUN_BUILDING), "{runs:?}");
    }

    let (store, _) = Store::open(&path, 1).unwrap();
    let snap = store.snapshot().unwrap();
    for i in 0..total {
        let o = object(i);
        assert_eq!(snap.object_at(i).unwrap(), Some(o.hash), "object {i} keeps its number");
        assert_eq!(snap.object_seq(&o.hash).unwrap(), Some(i));
    }
    assert!(!snap.has_object(&object(total).hash).unwrap());
    let mut listed = vec![];
    let mut after = None;
    loop {
        let page = snap.objects_by_semantic_id("test/placed", after, PAGE_MAX).unwrap();
        listed.extend(page.iter().map(|(r, _)| *r));
        match page.last() {
            Some((r, _)) if page.len() == PAGE_MAX => after = Some(*r),
            _ => break,
        }
    }
    let mut exported = vec![];
    export::export(&snap, &mut exported, false, 0).unwrap();
    let mut objects = vec![];
    export::read_frames(&mut exported.as_slice(), |_, record| {
        if let export::Record::Object { hash, .. } = record {
            objects.push(hash);
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(objects.len() as u64, total, "each object exported once");
    assert!(objects.windows(2).all(|w| w[0] < w[1]), "in ref order");
    assert_eq!(listed, objects, "its semantic id pages list every object in ref order");
    drop(snap);
    drop(store);

    // Each complete run's filter is checked against the run's keys.
    let filters = PLACES.filters.expect("the place index keeps filters");
    let ids: Vec<u32> = {
        let db = redb::Database::open(&path).unwrap();
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let listed = world_store::tiered::runs(&txn.open_table(PLACES.runs).unwrap()).unwrap();
        listed.iter().map(|r| r.id).collect()
    };
    type Filters<'t> = redb::Table<'t, u32, &'static [u8]>;
    let faults_after = |damage: &dyn Fn(&mut Filters)| {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        damage(&mut txn.open_table(filters).unwrap());
        txn.commit().unwrap();
        drop(db);
        let store = ReadOnlyStore::open(&path).unwrap();
        let report = verify::verify(&store.snapshot().unwrap(), &verify::Options::default());
        report.faults.iter().map(|f| (f.table.to_string(), f.key.clone(), f.kind)).collect::<Vec<_>>()
    };
    let (first, second) = (ids[0], ids[1]);
    let kept = std::cell::RefCell::new(vec![]);
    let emptied = faults_after(&|t| {
        let bytes = t.get(first).unwrap().unwrap().value().to_vec();
        let empty = world_store::bloom::Bloom::from_bytes(&[&bytes[..1], &vec![0; bytes.len() - 1]].concat()).unwrap();
        t.insert(first, empty.to_bytes().as_slice()).unwrap();
        kept.borrow_mut().push(bytes);
    });
    assert_eq!(emptied, vec![("place_filters".to_string(), first.to_string(), verify::FaultKind::Mismatch)]);
    let lost = faults_after(&|t| {
        t.insert(first, kept.borrow()[0].as_slice()).unwrap();
        t.remove(second).unwrap();
    });
    assert_eq!(lost, vec![("place_filters".to_string(), second.to_string(), verify::FaultKind::Missing)]);
    let stray = faults_after(&|t| {
        let bytes = t.get(first).unwrap().unwrap().value().to_vec();
        t.insert(second, bytes.as_slice()).unwrap();
        t.insert(9_999, bytes.as_slice()).unwrap();
    });
    assert!(
        stray.contains(&("place_filters".to_string(), "9999".to_string(), verify::FaultKind::Dangling)),
        "{stray:?}"
    );
}
