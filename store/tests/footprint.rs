//! What the store occupies: a page cache far smaller than the store still
//! serves every read exactly, and compaction gives free pages back without
//! changing a byte of what the store holds.

mod common;

use common::*;
use world_store::*;

/// A payload big enough that a few hundred of them dwarf a small cache.
const PAYLOAD: usize = 48 << 10;
const CACHE: usize = 1 << 20;

/// `n` committed invocations whose outputs are `PAYLOAD` bytes each, with
/// what each returned.
fn commit_outputs(store: &Store, f: Ref, round: &str, n: usize) -> Vec<(TaskKey, Vec<u8>, Committed)> {
    (0..n)
        .map(|i| {
            let key = task(&format!("{round}-{i}"));
            let output: Vec<u8> = format!("{round}-{i}:").bytes().cycle().take(PAYLOAD).collect();
            let c = begin_and_commit(store, &key, f, &output);
            (key, output, c)
        })
        .collect()
}

#[test]
fn a_store_many_times_its_page_cache_reads_back_exactly_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    let opts = || StoreOptions { cache_bytes: Some(CACHE), ..StoreOptions::default() };
    let (store, f) = echo_store(&path, opts());
    let committed = commit_outputs(&store, f, "big", 300);
    drop(store);

    let (store, _) = Store::open_with(&path, 2, opts()).unwrap();
    let footprint = store.footprint();
    let store_bytes = footprint.files.file_bytes + footprint.files.payload_bytes;
    assert!(store_bytes > 10 * CACHE as u64, "the store ({store_bytes} bytes) dwarfs the cache");
    assert_reads_back(&store, &committed);
    assert_eq!(store.footprint().cache_bytes_max, CACHE as u64);
    assert_verifies(&store);
}

#[test]
fn compaction_gives_free_pages_back_and_keeps_every_byte_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    let (store, f) = echo_store(&path, StoreOptions::default());
    let committed = commit_outputs(&store, f, "kept", 200);
    // Tasks begun and then ended without a commit: their open-task rows come
    // and go, and the pages that held them are left free.
    for i in 0..3000 {
        begin(&store, &task(&format!("ended-{i}")));
    }
    for i in 0..3000 {
        let key = task(&format!("ended-{i}"));
        store.call(Op::EndTask { task: key, state: TaskState::NotCommitted, at: 0 }).unwrap();
    }
    // A task still running at the stop: the open before compaction recovers
    // it, and says so.
    begin(&store, &task("running"));
    let head = store.snapshot().unwrap().selected_head().unwrap();
    drop(store);

    let compacted = compact(&path).unwrap();
    assert!(compacted.after < compacted.before, "compaction shrank nothing: {compacted:?}");
    assert_eq!(compacted.recovery.tasks.len(), 1, "{:?}", compacted.recovery);
    assert_eq!(compacted.recovery.tasks[0].1, TaskState::NotCommitted);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), compacted.after);

    let (store, _) = Store::open(&path, 2).unwrap();
    assert_eq!(store.snapshot().unwrap().selected_head().unwrap(), head);
    assert_reads_back(&store, &committed);
    assert_verifies(&store);
    // A resent task id answers with the same committed result as before.
    let (key, output, c) = &committed[7];
    let replayed = store.call(Op::begin_task(key.clone(), Ref::of(b"d"), 3)).unwrap();
    let Reply::Begun(BeginOutcome::Existing(task)) = replayed else { panic!("{replayed:?}") };
    assert_eq!(task.committed.as_ref(), Some(c));
    assert_eq!(store.snapshot().unwrap().payload(&c.output_ref).unwrap().as_deref(), Some(&output[..]));
}

#[test]
fn compaction_is_refused_beside_a_writer_and_for_a_missing_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    assert!(matches!(compact(&path), Err(OpenError::Missing { .. })));
    let (store, _) = Store::open(&path, 1).unwrap();
    assert!(matches!(compact(&path), Err(OpenError::Locked { .. })));
    drop(store);
    assert!(compact(&path).is_ok());
}

/// Pure calls as the daemon writes them: each one's task row and commit in
/// one request, task ids rising with the moment each call was admitted
/// (`TaskKey::ordered_task_id`), episodes taking turns, and the calls of a
/// batch queued in another order than they were admitted in (as concurrent
/// callers' are).
#[test]
fn the_task_rows_of_pure_calls_fill_their_pages() {
    const BATCHES: u64 = 500;
    const ADMITTED_ORDER: [u64; 4] = [2, 0, 3, 1];
    let dir = tempfile::tempdir().unwrap();
    let (store, f) = echo_store(&dir.path().join("world.db"), StoreOptions::default());
    for batch in 0..BATCHES {
        let mut ops = vec![];
        for i in ADMITTED_ORDER.map(|n| batch * 4 + n) {
            let task_id = TaskKey::ordered_task_id(1_000 + i, &[(i % 251) as u8; 24]);
            let key = TaskKey { surface: Surface::Mcp, episode: format!("ep{}", i % 8), task_id };
            ops.push(Op::create_task(key.clone(), Ref::of(b"d"), 1));
            ops.push(Op::CommitInvocation(invocation(&key, f, format!("{{\"i\":{i}}}").as_bytes())));
        }
        match store.call(Op::Sequence(ops)).unwrap() {
            Reply::Sequence(replies) => assert!(replies.iter().all(Result::is_ok), "{replies:?}"),
            other => panic!("{other:?}"),
        }
    }
    let report = world_store::verify::verify(&store.snapshot().unwrap(), &Default::default());
    assert!(report.is_clean(), "{:#?}", report.faults);
    let tasks = report.tables.iter().find(|t| t.table == "tasks_by_id").expect("the task table's footprint");
    assert_eq!(tasks.rows, BATCHES * 4);
    // Written once, in key order, at the end of the tree, a page holds rows
    // up to its end. A row written at a call's start and rewritten larger at
    // its end, or inserted behind a later one, or keyed by episode first,
    // splits a full page into two halves that nothing fills again.
    let fill = tasks.stored_bytes as f64 / tasks.page_bytes() as f64;
    assert!(fill > 0.8, "task rows fill {:.0}% of their pages: {tasks:?}", fill * 100.0);
}

#[test]
fn the_payload_file_of_a_cleanly_closed_store_holds_exactly_its_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    let (store, f) = echo_store(&path, StoreOptions::default());
    let committed = commit_outputs(&store, f, "exact", 20);
    let file = media::payloads_path(&path);
    let payloads = |store: &dyn Reads| {
        world_store::verify::verify(&store.snapshot().unwrap(), &Default::default()).counts.payload_bytes
    };
    // While it runs, room is made ahead of the end: zeros, written once.
    let held = payloads(&store);
    assert!(std::fs::metadata(&file).unwrap().len() > held);
    drop(store);
    let store = ReadOnlyStore::open(&path).unwrap();
    assert_eq!(std::fs::metadata(&file).unwrap().len(), payloads(&store));
    assert_eq!(payloads(&store), held);
    drop(store);
    let (store, _) = Store::open(&path, 1).unwrap();
    assert_reads_back(&store, &committed);
    assert_verifies(&store);
}
