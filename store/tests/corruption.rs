//! Corruption tests: a store is built through the public API and closed; a raw
//! writer then damages it behind the store's back, through redb directly (with the
//! public `world_store::tables` definitions and `world_store::rows` codecs) or by
//! flipping bytes in the file; `verify` must name each fault by table, key and kind.

mod common;

use common::echo_registry;
use redb::{Builder, ConcurrencyMode, ReadableDatabase, ReadableTable, ReadableTableMetadata, WriteTransaction};
use std::path::{Path, PathBuf};
use world_store::tables::*;
use world_store::verify::{FaultKind, Options, Report, verify};
use world_store::*;

/// What the fixture wrote, for naming keys in the assertions.
struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// Entry hashes by index; entries 0-4 are REST commits, entry 5 an invocation.
    entries: Vec<Ref>,
    worlds: Vec<Ref>,
    payload: NewObject,
    task: TaskKey,
    session: Ref,
}

const PAYLOAD_MARKER: &[u8] = b"corruption-test payload marker: 6f1c0e9ab7d2 -- find me in the file";
const EFFECT: &str = "Workspace.Write";
const SCOPE: &str = "worktree";

fn rest_commit(head: Option<&World>, content: &str, id: Option<&str>) -> RestCommit {
    let transition = NewObject::derived("world/rest-transition/v1", "test", content.as_bytes().to_vec());
    let state_root = Ref::of(content.as_bytes());
    RestCommit {
        invocation_id: id.map(String::from),
        request_digest: Ref::of(content.as_bytes()),
        ..RestCommit::next(head, transition, state_root, Ref::of(b"fn"), Ref::of(b"interp"), 1, "test")
    }
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    let (store, _) = Store::open(&path, 1).unwrap();
    let mut head: Option<World> = None;
    let mut worlds = vec![];
    for i in 0..5 {
        let id = (i == 3).then_some("rest:fixture");
        let c = rest_commit(head.as_ref(), &format!("commit {i}"), id);
        store.call(Op::CommitWorld(c.clone())).unwrap();
        worlds.push(c.next_world.world_ref);
        head = Some(c.next_world);
    }
    let payload = NewObject::derived("world/note/v1", "test", PAYLOAD_MARKER.to_vec());
    store.call(Op::PutObjects(vec![payload.clone()])).unwrap();

    let publish = echo_registry();
    let f = publish.entries[0].1;
    store.call(Op::PublishRegistry(publish)).unwrap();

    let task = TaskKey { surface: Surface::A2a, episode: "ep1".into(), task_id: "t1".into() };
    store.call(Op::begin_task(task.clone(), Ref::of(b"t1"), 1)).unwrap();
    let intent = IntentRequest {
        task: task.clone(),
        ordinal: 0,
        effect_id: "e0".into(),
        effect: EFFECT.into(),
        scope: SCOPE.into(),
        cost: 2,
        grant_budget: 10,
        request: NewObject::derived("world/effect-request/v1", "host/broker", b"write a file".to_vec()),
        at: 1,
        approval: None,
        credential: None,
    };
    store.call(Op::RecordIntent(intent)).unwrap();
    let outcome = OutcomeRequest {
        task: task.clone(),
        ordinal: 0,
        status: OutcomeStatus::Ok,
        record: NewObject::derived("world/effect-record/v1", "host/broker", b"wrote it".to_vec()),
        result: None,
        at: 2,
    };
    store.call(Op::RecordOutcome(outcome)).unwrap();
    let commit = common::invocation(&task, f, b"out");
    let Reply::Committed(committed) = store.call(Op::CommitInvocation(commit)).unwrap() else {
        panic!("not committed")
    };
    worlds.push(committed.world_ref);

    let session = Ref::of(b"a token");
    let s = Session { episode: "ep1".into(), grants: vec![], created_at: 1, expires_at: 100 };
    store.call(Op::MintSession { credential_id: session, session: s }).unwrap();

    let snap = store.snapshot().unwrap();
    let entries: Vec<LogEntry> = snap.log_range(0, PAGE_MAX).unwrap();
    assert_eq!(entries.len(), 6);
    let report = verify(&snap, &Options::default());
    assert!(report.is_clean(), "the fixture itself must verify: {:#?}", report.faults);
    drop(snap);
    drop(store);
    Fixture { _dir: dir, path, entries: entries.iter().map(|e| e.entry_hash).collect(), worlds, payload, task, session }
}

/// Damages the closed store through redb directly, in one durable transaction.
fn tamper(path: &Path, f: impl FnOnce(&WriteTransaction)) {
    let db = Builder::new().set_concurrency_mode(ConcurrencyMode::SingleWriter).create(path).unwrap();
    let txn = db.begin_write().unwrap();
    f(&txn);
    txn.commit().unwrap();
}

/// Verifies the damaged store the way `worldd verify` does: read-only, offline.
fn verify_offline(path: &Path) -> Report {
    let store = ReadOnlyStore::open(path).unwrap();
    verify(&store.snapshot().unwrap(), &Options::default())
}

#[track_caller]
fn assert_fault(report: &Report, table: &str, key: &str, kind: FaultKind) {
    assert!(!report.is_clean(), "verify reported a damaged store as clean");
    assert!(report.fault_count >= report.faults.len() as u64);
    assert!(
        report.faults.iter().any(|f| f.table == table && f.key == key && f.kind == kind),
        "no {kind:?} fault at {table} {key}; verify reported {:#?}",
        report.faults
    );
}

fn invocation(fx: &Fixture) -> String {
    fx.task.invocation_id()
}

/// The sequence number that keys the fixture payload.
fn payload_seq(fx: &Fixture) -> u64 {
    let store = ReadOnlyStore::open(&fx.path).unwrap();
    store.snapshot().unwrap().object_seq(&fx.payload.hash).unwrap().expect("the payload object has a number")
}

/// Where the fixture payload's bytes sit in the payload file: (start, length).
fn payload_span(fx: &Fixture) -> (u64, u64) {
    let seq = payload_seq(fx);
    let db = Builder::new().set_concurrency_mode(ConcurrencyMode::SingleWriter).create(&fx.path).unwrap();
    let txn = db.begin_read().unwrap();
    let raw = txn.open_table(OBJECT_ROWS).unwrap().get(seq).unwrap().unwrap().value().to_vec();
    let row: ObjectRow = rows::decode("object_rows", &seq, &raw).unwrap();
    (row.at, row.size)
}

/// Damages the closed store's payload file.
fn tamper_payloads(fx: &Fixture, f: impl FnOnce(&mut Vec<u8>)) {
    let path = world_store::media::payloads_path(&fx.path);
    let mut bytes = std::fs::read(&path).unwrap();
    f(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
}

#[test]
fn a_flipped_payload_byte_is_a_hash_mismatch_naming_the_payload() {
    let fx = fixture();
    let (at, _) = payload_span(&fx);
    tamper_payloads(&fx, |file| file[at as usize + 10] ^= 0x01);
    let report = verify_offline(&fx.path);
    assert_fault(&report, "payloads", &fx.payload.hash.to_string(), FaultKind::HashMismatch);
    assert_eq!(report.fault_count, 1, "{:#?}", report.faults);
}

#[test]
fn bytes_flipped_in_the_payload_file_are_read_back_unnoticed_but_not_by_verify() {
    let fx = fixture();
    let mut hits = 0;
    tamper_payloads(&fx, |file| {
        let mut at = 0;
        while let Some(i) = file[at..].windows(PAYLOAD_MARKER.len()).position(|w| w == PAYLOAD_MARKER) {
            file[at + i + 20] ^= 0x20;
            at += i + PAYLOAD_MARKER.len();
            hits += 1;
        }
    });
    assert_eq!(hits, 1, "the payload is stored verbatim, once, in the payload file");
    let store = ReadOnlyStore::open(&fx.path).unwrap();
    let snap = store.snapshot().unwrap();
    let read = snap.payload(&fx.payload.hash).unwrap().unwrap();
    assert_ne!(read, PAYLOAD_MARKER, "a read hands back the damaged bytes without an error");
    let report = verify(&snap, &Options::default());
    assert_fault(&report, "payloads", &fx.payload.hash.to_string(), FaultKind::HashMismatch);
}

#[test]
fn a_payload_file_cut_short_is_named_by_verify_and_refused_by_a_writer() {
    let fx = fixture();
    let (at, _) = payload_span(&fx);
    tamper_payloads(&fx, |file| file.truncate(at as usize + 3));
    let report = verify_offline(&fx.path);
    assert_fault(&report, "payloads", &fx.payload.hash.to_string(), FaultKind::Missing);
    let store = ReadOnlyStore::open(&fx.path).unwrap();
    let read = store.snapshot().unwrap().payload(&fx.payload.hash);
    assert!(matches!(read, Err(ReadError::Corrupt(_))), "{read:?}");
    drop(store);
    // A writer would append after a hole: it refuses, and says why.
    let told = Store::open(&fx.path, 1).err().expect("a writer refuses a cut payload file").to_string();
    assert!(told.contains("payload file holds") && told.contains("cut short"), "{told}");
}

#[test]
fn an_object_row_pointing_elsewhere_in_the_payload_file_is_reported() {
    let fx = fixture();
    let seq = payload_seq(&fx);
    tamper(&fx.path, |txn| {
        let mut t = txn.open_table(OBJECT_ROWS).unwrap();
        let raw = t.get(seq).unwrap().unwrap().value().to_vec();
        let mut row: ObjectRow = rows::decode("object_rows", &seq, &raw).unwrap();
        row.at += 1;
        t.insert(seq, rows::encode(&row).as_slice()).unwrap();
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "object_rows", &seq.to_string(), FaultKind::Mismatch);
    assert_fault(&report, "payloads", &fx.payload.hash.to_string(), FaultKind::HashMismatch);
}

#[test]
fn an_object_row_naming_another_ref_is_reported() {
    let fx = fixture();
    let seq = payload_seq(&fx);
    tamper(&fx.path, |txn| {
        let mut t = txn.open_table(OBJECT_ROWS).unwrap();
        let raw = t.get(seq).unwrap().unwrap().value().to_vec();
        let mut row: ObjectRow = rows::decode("object_rows", &seq, &raw).unwrap();
        row.hash = Ref([7u8; 32]);
        t.insert(seq, rows::encode(&row).as_slice()).unwrap();
    });
    let report = verify_offline(&fx.path);
    // The payload no longer hashes to the row's ref, and the place index
    // places the real object at a number whose row names another.
    assert_fault(&report, "payloads", &Ref([7u8; 32]).to_string(), FaultKind::HashMismatch);
    assert_fault(&report, "places", &fx.payload.hash.to_string(), FaultKind::Dangling);
}

#[test]
fn a_place_naming_another_object_and_a_lost_place_are_reported() {
    let fx = fixture();
    let seq = payload_seq(&fx);
    tamper(&fx.path, |txn| {
        let mut young = txn.open_table(PLACES.young).unwrap();
        young.insert(PlaceKey(fx.payload.hash.0, PLACE_OBJECT), seq + 1).unwrap();
        young.remove(PlaceKey(fx.entries[2].0, PLACE_ENTRY)).unwrap().expect("entry 2 was placed");
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "places", &fx.payload.hash.to_string(), FaultKind::Dangling);
    assert_fault(&report, "places", &fx.entries[2].to_string(), FaultKind::Missing);
}

#[test]
fn an_object_left_out_of_the_semantic_index_is_reported() {
    let fx = fixture();
    let store = ReadOnlyStore::open(&fx.path).unwrap();
    let meta = Reads::snapshot(&store).unwrap().object_meta(&fx.payload.hash).unwrap().unwrap();
    drop(store);
    tamper(&fx.path, |txn| {
        let key = semantic_key(&meta.semantic_id, &fx.payload.hash);
        txn.open_table(SEMANTIC.young).unwrap().remove(key).unwrap().expect("the object was indexed");
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "semantic", &format!("{} {}", meta.semantic_id, fx.payload.hash), FaultKind::Missing);
}

#[test]
fn an_unindexed_object_whose_row_does_not_decode_is_reported_and_leaves_other_semantic_ids_listed() {
    let fx = fixture();
    let seq = payload_seq(&fx);
    tamper(&fx.path, |txn| {
        let mut t = txn.open_table(OBJECT_ROWS).unwrap();
        let mut b = t.get(seq).unwrap().unwrap().value().to_vec();
        b[0] = 9;
        t.insert(seq, b.as_slice()).unwrap();
        // The index has not reached the payload and the objects after it.
        txn.open_table(META).unwrap().insert("referrers_indexed_objects", seq).unwrap();
    });
    let store = ReadOnlyStore::open(&fx.path).unwrap();
    let snap = store.snapshot().unwrap();
    let registry = echo_registry();
    let listed = snap.objects_by_semantic_id("world/transition-registry/v1", None, PAGE_MAX).unwrap();
    assert_eq!(listed.iter().map(|(r, _)| *r).collect::<Vec<_>>(), vec![registry.head]);
    let report = verify(&snap, &Options::default());
    assert_fault(&report, "object_rows", &seq.to_string(), FaultKind::Decode);
}

#[test]
fn an_effect_record_whose_journal_row_was_lost_or_names_another_outcome_is_reported() {
    let record = Ref::of(b"wrote it");
    for damage in ["lost", "another outcome"] {
        let fx = fixture();
        tamper(&fx.path, |txn| {
            let mut by_seq = txn.open_table(RECORD_JOURNAL).unwrap();
            let (seq, row) = {
                let (k, v) = by_seq.first().unwrap().expect("the record's row, under its number");
                (k.value(), v.value().to_vec())
            };
            by_seq.remove(seq).unwrap();
            if damage == "another outcome" {
                let key: JournalKey = rows::decode("record_journal", &seq, &row).unwrap();
                let other = JournalKey { ordinal: key.ordinal + 1, ..key };
                by_seq.insert(seq, rows::encode(&other).as_slice()).unwrap();
            }
        });
        let report = verify_offline(&fx.path);
        assert_fault(&report, "record_journal", &record.to_string(), FaultKind::Missing);
    }
}

#[test]
fn a_journal_row_for_a_record_no_outcome_carries_or_keyed_by_a_held_records_hash_is_reported() {
    let fx = fixture();
    let seq = payload_seq(&fx);
    let record = Ref::of(b"wrote it");
    tamper(&fx.path, |txn| {
        let row = txn.open_table(RECORD_JOURNAL).unwrap().first().unwrap().unwrap().1.value().to_vec();
        // The outcome's key, filed under an object that is no record of it,
        // and again under the record's hash although the store holds it.
        txn.open_table(RECORD_JOURNAL).unwrap().insert(seq, row.as_slice()).unwrap();
        txn.open_table(RECORD_JOURNAL_OF_ABSENT).unwrap().insert(record.0, row.as_slice()).unwrap();
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "record_journal_by_seq", &seq.to_string(), FaultKind::Dangling);
    assert_fault(&report, "record_journal", &record.to_string(), FaultKind::Mismatch);
    assert_eq!(report.fault_count, 2, "{:#?}", report.faults);
}

#[test]
fn a_run_the_directory_names_but_the_store_lacks_is_reported() {
    let fx = fixture();
    tamper(&fx.path, |txn| {
        txn.open_table(PLACES.runs).unwrap().insert(7, (0, 0)).unwrap();
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "place_runs", "7", FaultKind::Missing);
}

#[test]
fn a_log_row_deleted_from_the_middle_is_a_chain_break_at_the_next_index() {
    let fx = fixture();
    tamper(&fx.path, |txn| {
        txn.open_table(LOG).unwrap().remove(2u64).unwrap().expect("entry 2 existed");
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "log", "3", FaultKind::ChainBreak);
    // The orphaned world of entry 2 is named too.
    assert_fault(&report, "worlds", &fx.worlds[2].to_string(), FaultKind::Dangling);
}

fn rewrite_entry(path: &Path, index: u64, f: impl FnOnce(&mut LogEntry)) {
    tamper(path, |txn| {
        let mut t = txn.open_table(LOG).unwrap();
        let bytes = t.get(index).unwrap().unwrap().value().to_vec();
        let mut entry: LogEntry = rows::decode("log", &index, &bytes).unwrap();
        f(&mut entry);
        t.insert(index, rows::encode(&entry).as_slice()).unwrap();
    });
}

#[test]
fn a_replaced_prev_entry_hash_is_a_chain_break_and_a_hash_mismatch_at_that_entry() {
    let fx = fixture();
    rewrite_entry(&fx.path, 2, |e| e.header.prev_entry_hash = Ref::of(b"forged"));
    let report = verify_offline(&fx.path);
    assert_fault(&report, "log", "2", FaultKind::ChainBreak);
    assert_fault(&report, "log", "2", FaultKind::HashMismatch);
}

#[test]
fn a_forged_entry_whose_hash_recomputes_still_breaks_the_link_to_the_next_entry() {
    let fx = fixture();
    rewrite_entry(&fx.path, 2, |e| {
        e.header.prev_entry_hash = Ref::of(b"forged");
        e.entry_hash = canonical::entry_hash(&e.header, &e.transition_ref);
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "log", "2", FaultKind::ChainBreak);
    assert_fault(&report, "log", "3", FaultKind::ChainBreak);
    assert!(!report.faults.iter().any(|f| f.key == "2" && f.kind == FaultKind::HashMismatch), "{:#?}", report.faults);
    // Entry 2's world no longer matches the entry.
    assert_fault(&report, "worlds", &fx.worlds[2].to_string(), FaultKind::Dangling);
    assert_ne!(fx.entries[2], Ref::of(b"forged"));
}

#[test]
fn a_row_with_an_unknown_version_byte_is_a_decode_fault_naming_its_table_and_key() {
    let fx = fixture();
    let inv = invocation(&fx);
    let seq = payload_seq(&fx);
    let bump = |bytes: &[u8]| {
        let mut b = bytes.to_vec();
        b[0] = 9;
        b
    };
    tamper(&fx.path, |txn| {
        let mut t = txn.open_table(OBJECT_ROWS).unwrap();
        let b = bump(t.get(seq).unwrap().unwrap().value());
        t.insert(seq, b.as_slice()).unwrap();
        let mut t = txn.open_table(LOG).unwrap();
        let b = bump(t.get(1u64).unwrap().unwrap().value());
        t.insert(1u64, b.as_slice()).unwrap();
        let mut t = txn.open_table(WORLD_ROWS).unwrap();
        let b = bump(t.get(1u64).unwrap().unwrap().value());
        t.insert(1u64, b.as_slice()).unwrap();
        for def in [INTENTS, OUTCOMES] {
            let mut t = txn.open_table(def).unwrap();
            let b = bump(t.get((inv.as_str(), 0u32)).unwrap().unwrap().value());
            t.insert((inv.as_str(), 0u32), b.as_slice()).unwrap();
        }
        let mut t = txn.open_table(TASKS).unwrap();
        let k = ("a2a", "t1", "ep1"); // (surface, taskId, episode)
        let b = bump(t.get(k).unwrap().unwrap().value());
        t.insert(k, b.as_slice()).unwrap();
        let mut t = txn.open_table(SESSIONS).unwrap();
        let b = bump(t.get(fx.session.0).unwrap().unwrap().value());
        t.insert(fx.session.0, b.as_slice()).unwrap();
        let mut t = txn.open_table(RECEIPTS).unwrap();
        let b = bump(t.get("rest:fixture").unwrap().unwrap().value());
        t.insert("rest:fixture", b.as_slice()).unwrap();
    });
    let report = verify_offline(&fx.path);
    let effect = format!("{inv}#0");
    for (table, key) in [
        ("object_rows", seq.to_string()),
        ("log", "1".to_string()),
        ("world_rows", "1".to_string()),
        ("intents", effect.clone()),
        ("outcomes", effect),
        ("tasks", inv.clone()),
        ("sessions", fx.session.to_string()),
        ("receipts", "rest:fixture".to_string()),
    ] {
        assert_fault(&report, table, &key, FaultKind::Decode);
        let fault =
            report.faults.iter().find(|f| f.table == table && f.key == key && f.kind == FaultKind::Decode).unwrap();
        assert!(fault.detail.contains("version 9"), "{fault:?}");
    }
}

#[test]
fn a_truncated_row_is_a_decode_fault() {
    let fx = fixture();
    tamper(&fx.path, |txn| {
        let mut t = txn.open_table(SESSIONS).unwrap();
        let mut b = t.get(fx.session.0).unwrap().unwrap().value().to_vec();
        b.truncate(b.len() - 3);
        t.insert(fx.session.0, b.as_slice()).unwrap();
    });
    assert_fault(&verify_offline(&fx.path), "sessions", &fx.session.to_string(), FaultKind::Decode);
}

#[test]
fn a_changed_spend_counter_is_a_spend_mismatch() {
    let fx = fixture();
    tamper(&fx.path, |txn| {
        let mut t = txn.open_table(SPEND).unwrap();
        let k = ("ep1", EFFECT, SCOPE);
        let v = t.get(k).unwrap().unwrap().value();
        assert_eq!(v, 2);
        t.insert(k, v + 1).unwrap();
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "spend", &format!("ep1 {EFFECT} {SCOPE}"), FaultKind::Mismatch);
    assert_eq!(report.fault_count, 1, "{:#?}", report.faults);
}

#[test]
fn an_outcome_whose_intent_was_deleted_is_dangling_and_spend_no_longer_adds_up() {
    let fx = fixture();
    let inv = invocation(&fx);
    tamper(&fx.path, |txn| {
        txn.open_table(INTENTS).unwrap().remove((inv.as_str(), 0u32)).unwrap().expect("the intent existed");
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "outcomes", &format!("{inv}#0"), FaultKind::Dangling);
    assert_fault(&report, "spend", &format!("ep1 {EFFECT} {SCOPE}"), FaultKind::Mismatch);
}

#[test]
fn a_selected_head_naming_no_world_is_dangling() {
    let fx = fixture();
    tamper(&fx.path, |txn| {
        txn.open_table(HEADS).unwrap().insert(SELECTED_HEAD, Ref::of(b"nowhere").0).unwrap();
    });
    assert_fault(&verify_offline(&fx.path), "heads", SELECTED_HEAD, FaultKind::Dangling);
}

#[test]
fn a_committed_task_whose_entry_was_rewritten_points_at_nothing() {
    let fx = fixture();
    rewrite_entry(&fx.path, 5, |e| {
        e.transition_ref = Ref::of(b"another record");
        e.entry_hash = canonical::entry_hash(&e.header, &e.transition_ref);
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "tasks", &invocation(&fx), FaultKind::Dangling);
    assert_fault(&report, "log", "5", FaultKind::Dangling);
}

#[test]
fn garbage_over_every_page_is_reported_or_refused_never_a_panic() {
    let fx = fixture();
    let mut file = std::fs::read(&fx.path).unwrap();
    // Leave redb's header page alone; damage one byte in every later 4 KiB page.
    for page in (4096..file.len()).step_by(4096) {
        file[page + 1000] ^= 0x5a;
    }
    std::fs::write(&fx.path, &file).unwrap();
    let outcome = std::panic::catch_unwind(|| match ReadOnlyStore::open(&fx.path) {
        Err(e) => Err(e.to_string()),
        Ok(store) => match store.snapshot() {
            Err(e) => Err(e.to_string()),
            Ok(snap) => Ok(verify(&snap, &Options::default())),
        },
    });
    match outcome {
        Err(_) => panic!("reading a damaged store panicked instead of reporting"),
        Ok(Err(refused)) => assert!(!refused.is_empty()),
        Ok(Ok(report)) => assert!(!report.is_clean(), "verify called a damaged store clean"),
    }
}

#[test]
fn a_store_reopened_by_the_raw_writer_without_changes_still_verifies_clean() {
    // The control case: the harness itself must not be what verify complains about.
    let fx = fixture();
    tamper(&fx.path, |_| {});
    let report = verify_offline(&fx.path);
    assert!(report.is_clean(), "{:#?}", report.faults);
    let db = Builder::new().set_concurrency_mode(ConcurrencyMode::SingleWriter).open_read_only(&fx.path).unwrap();
    assert_eq!(db.begin_read().unwrap().open_table(LOG).unwrap().len().unwrap(), fx.entries.len() as u64);
}

#[test]
fn a_call_dropped_from_its_episodes_numbering_is_reported_and_the_summary_no_longer_adds_up() {
    let fx = fixture();
    tamper(&fx.path, |txn| {
        txn.open_table(EPISODE_CALLS).unwrap().remove(("ep1", 0u64)).unwrap().expect("the fixture's call is numbered");
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "episode_calls", "-", FaultKind::Mismatch);
    assert_fault(&report, "episodes", "-", FaultKind::Mismatch);
}

#[test]
fn a_summary_that_no_longer_matches_its_calls_is_a_mismatch_naming_the_episode() {
    let fx = fixture();
    tamper(&fx.path, |txn| {
        let mut t = txn.open_table(EPISODES).unwrap();
        let mut row: EpisodeRow = rows::decode("episodes", &"ep1", t.get("ep1").unwrap().unwrap().value()).unwrap();
        assert_eq!(row.states.get("committed"), Some(&1), "the fixture's call committed: {row:?}");
        row.states.insert("committed".into(), 0);
        t.insert("ep1", rows::encode(&row).as_slice()).unwrap();
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "episodes", "ep1", FaultKind::Mismatch);
    assert_eq!(report.fault_count, 1, "{:#?}", report.faults);
}

#[test]
fn an_episode_missing_from_the_activity_order_or_a_session_from_its_episode_is_reported() {
    let fx = fixture();
    tamper(&fx.path, |txn| {
        let mut t = txn.open_table(EPISODES_BY_ACTIVITY).unwrap();
        let keys: Vec<(u64, String)> =
            t.iter().unwrap().map(|i| i.unwrap().0).map(|k| (k.value().0, k.value().1.to_string())).collect();
        assert_eq!(keys.len(), 1);
        t.remove((keys[0].0, keys[0].1.as_str())).unwrap();
        txn.open_table(EPISODE_SESSIONS).unwrap().remove(("ep1", fx.session.0)).unwrap().expect("indexed");
    });
    let report = verify_offline(&fx.path);
    assert_fault(&report, "episodes_by_activity", "ep1", FaultKind::Missing);
    assert_fault(&report, "episode_sessions", &format!("ep1 {}", fx.session), FaultKind::Missing);
}

#[test]
fn a_store_of_the_format_before_the_episode_index_gets_it_built_at_open() {
    let fx = fixture();
    let (made, listed) = {
        let store = ReadOnlyStore::open(&fx.path).unwrap();
        let snap = store.snapshot().unwrap();
        (snap.episode("ep1").unwrap().unwrap(), snap.episode_calls("ep1", 0, 10).unwrap())
    };
    // What a store written before the index held: no index tables, format 2.
    tamper(&fx.path, |txn| {
        txn.delete_table(EPISODES).unwrap();
        txn.delete_table(EPISODE_CALLS).unwrap();
        txn.delete_table(EPISODES_BY_ACTIVITY).unwrap();
        txn.delete_table(EPISODE_SESSIONS).unwrap();
        txn.open_table(META).unwrap().insert("format", STORE_FORMAT_BEFORE_EPISODES).unwrap();
    });
    let read_only = ReadOnlyStore::open(&fx.path).err().expect("a store without its index is not read as it is");
    assert!(read_only.to_string().contains("open it once with a writer"), "{read_only}");
    let (store, _) = Store::open(&fx.path, 1).unwrap();
    let snap = store.snapshot().unwrap();
    // Written before tasks told their effects, the call gets its journal's.
    let rebuilt = snap.episode("ep1").unwrap().unwrap();
    assert_eq!(made.effects.get("ok"), None);
    assert_eq!(rebuilt.effects.get("ok"), Some(&1), "{rebuilt:?}");
    assert_eq!((rebuilt.calls, &rebuilt.states, rebuilt.last_at), (made.calls, &made.states, made.last_at));
    let calls = snap.episode_calls("ep1", 0, 10).unwrap();
    assert_eq!(
        calls.iter().map(|(n, k, _)| (n, k)).collect::<Vec<_>>(),
        listed.iter().map(|(n, k, _)| (n, k)).collect::<Vec<_>>()
    );
    assert_eq!(calls[0].2.effects.len(), 1);
    assert_eq!(snap.episode_sessions("ep1", 10).unwrap().len(), 1);
    let report = verify(&snap, &Options::default());
    assert!(report.is_clean(), "{:#?}", report.faults);
}

#[test]
fn a_world_missing_from_the_referrers_of_its_state_root_and_of_its_log_head_is_reported_for_both() {
    let fx = fixture();
    let world_ref = fx.worlds[2];
    let (world, root_seq) = {
        let store = ReadOnlyStore::open(&fx.path).unwrap();
        let snap = store.snapshot().unwrap();
        let world = snap.world(&world_ref).unwrap().expect("the fixture's world");
        let seq = snap.object_seq(&world.state_root).unwrap().expect("its state root is an object");
        (world, seq)
    };
    tamper(&fx.path, |txn| {
        let mut referrers = txn.open_table(REFERRERS).unwrap();
        let root = world_store::keys::ReferrerKey(TARGET_OBJECT, root_seq, REFERRER_WORLD, world.revision);
        let head = world_store::keys::ReferrerKey(TARGET_ENTRY, world.revision, REFERRER_WORLD, world.revision);
        assert!(referrers.remove(root).unwrap().is_some() && referrers.remove(head).unwrap().is_some());
    });
    let report = verify_offline(&fx.path);
    for target in [world.state_root, world.log_head] {
        assert_fault(&report, "referrers", &format!("{target} <- world {world_ref}"), FaultKind::Missing);
    }
}
