//! Export and import: a portable stream that rebuilds the same store, and
//! refuses damage at the frame where it is.

mod common;

use world_store::export::{self, FrameError, ImportError, MAGIC};
use world_store::verify::{Options, verify};
use world_store::*;

fn populated() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(&dir.path().join("src.db"), 1).unwrap();
    let goal = NewObject::derived("world/demo/genesis-goal", "test", b"{\"goal\":1}".to_vec());
    let commit = RestCommit {
        invocation_id: Some("rest:g".into()),
        ..RestCommit::genesis(goal, Ref::of(b"fn"), Ref::of(b"i"), 1, "test")
    };
    store.call(Op::CommitWorld(commit)).unwrap();
    let key = TaskKey { surface: Surface::A2a, episode: "ep".into(), task_id: "t1".into() };
    store.call(Op::begin_task(key.clone(), Ref::of(b"r"), 1)).unwrap();
    let request = NewObject::derived("world/effect-request/v1", "host/broker", b"req".to_vec());
    let intent = IntentRequest {
        task: key.clone(),
        ordinal: 0,
        effect_id: "e1".into(),
        effect: "Workspace.Read".into(),
        scope: "worktree".into(),
        cost: 1,
        grant_budget: 5,
        request,
        at: 1,
        approval: None,
        credential: None,
    };
    store.call(Op::RecordIntent(intent)).unwrap();
    let record = NewObject::derived("world/effect-record/v1", "host/broker", b"{\"rec\":1}".to_vec());
    let outcome =
        OutcomeRequest { task: key.clone(), ordinal: 0, status: OutcomeStatus::Ok, record, result: None, at: 2 };
    store.call(Op::RecordOutcome(outcome)).unwrap();
    store.call(Op::EndTask { task: key, state: TaskState::Uncertain, at: 0 }).unwrap();
    let session = Session { episode: "ep".into(), grants: vec![], created_at: 1, expires_at: 9 };
    store.call(Op::MintSession { credential_id: Ref::of(b"tok"), session }).unwrap();
    // One approval decided, one pending: both travel.
    for (id, digest) in [("ap-1", b"d1"), ("ap-2", b"d2")] {
        store.call(common::ask_approval(id, "ep", Ref::of(b"tok"), Ref::of(digest), (1, 9))).unwrap();
    }
    let object = NewObject::derived("world/approval/v1", "host/approvals", b"{\"denied\":1}".to_vec());
    let decision = ApprovalDecision { state: ApprovalState::Denied, for_session: false, object, at: 2, use_by: 0 };
    store.call(Op::DecideApproval { id: "ap-1".into(), decision }).unwrap();
    // Two A2A tasks wait on ap-2, asking the identical request: both waits travel.
    for task in ["t-asked", "t-found"] {
        let mut ask = common::ask_approval("ap-3", "ep", Ref::of(b"tok"), Ref::of(b"d2"), (1, 9));
        if let Op::AskApproval { approval, .. } = &mut ask {
            approval.task = Some(task.into());
        }
        store.call(ask).unwrap();
    }
    (dir, store)
}

fn exported(store: &dyn WorldStore, with_sessions: bool) -> Vec<u8> {
    let mut out = Vec::new();
    export::export(&store.snapshot().unwrap(), &mut out, with_sessions, 7).unwrap();
    out
}

#[test]
fn an_export_imports_into_the_same_store_and_verifies_clean() {
    let (dir, store) = populated();
    let bytes = exported(&store, true);
    let target = dir.path().join("copy.db");
    let n = export::import(&target, &mut bytes.as_slice()).unwrap();
    assert!(n > 5);
    let copy = ReadOnlyStore::open(&target).unwrap();
    let (a, b) = (store.snapshot().unwrap(), copy.snapshot().unwrap());
    assert_eq!(a.selected_head().unwrap(), b.selected_head().unwrap());
    assert_eq!(a.log_range(0, 10).unwrap(), b.log_range(0, 10).unwrap());
    assert_eq!(
        a.spent("ep", "Workspace.Read", "worktree").unwrap(),
        b.spent("ep", "Workspace.Read", "worktree").unwrap()
    );
    assert_eq!(a.journal_of("a2a:ep:t1").unwrap(), b.journal_of("a2a:ep:t1").unwrap());
    assert_eq!(a.sessions(10).unwrap(), b.sessions(10).unwrap());
    assert_eq!(a.receipt_state("rest:g").unwrap(), b.receipt_state("rest:g").unwrap());
    assert_eq!(a.approvals(None, 10).unwrap().len(), 2);
    assert_eq!(a.approvals(None, 10).unwrap(), b.approvals(None, 10).unwrap());
    assert_eq!(a.open_approvals(10).unwrap(), b.open_approvals(10).unwrap());
    assert_waits_travelled(&a, &b);
    let report = verify(&b, &Options::default());
    assert!(report.is_clean(), "{:#?}", report.faults);
    assert_eq!(report.counts.objects, verify(&a, &Options::default()).counts.objects);
}

/// `populated`'s two A2A tasks wait on ap-2 in both snapshots.
fn assert_waits_travelled(a: &Snapshot, b: &Snapshot) {
    for task in ["t-asked", "t-found"] {
        let waits = a.awaited_approval(&Ref::of(b"tok"), task).unwrap();
        assert_eq!(waits.as_ref().map(|(id, _)| id.as_str()), Some("ap-2"), "{task}");
        assert_eq!(waits, b.awaited_approval(&Ref::of(b"tok"), task).unwrap(), "{task}");
    }
}

#[test]
fn sessions_are_left_out_unless_asked_for() {
    let (dir, store) = populated();
    let target = dir.path().join("nosessions.db");
    export::import(&target, &mut exported(&store, false).as_slice()).unwrap();
    assert!(ReadOnlyStore::open(&target).unwrap().snapshot().unwrap().sessions(10).unwrap().is_empty());
}

fn import_err(dir: &tempfile::TempDir, bytes: &[u8], name: &str) -> (ImportError, std::path::PathBuf) {
    let target = dir.path().join(name);
    let e = export::import(&target, &mut &bytes[..]).unwrap_err();
    (e, target)
}

fn nothing_left(dir: &tempfile::TempDir, target: &std::path::Path) {
    assert!(!target.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("importing"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_truncated_export_is_refused_and_nothing_half_imported_remains() {
    let (dir, store) = populated();
    let bytes = exported(&store, false);
    for cut in [bytes.len() - 1, bytes.len() / 2, MAGIC.len() + 10, MAGIC.len()] {
        let (e, target) = import_err(&dir, &bytes[..cut], &format!("t{cut}.db"));
        match e {
            ImportError::Frame(FrameError { offset, detail }) => {
                assert!(offset as usize <= cut, "offset {offset} past the cut {cut}");
                assert!(detail.contains("truncated") || detail.contains("ends"), "{detail}");
            }
            other => panic!("expected a frame error, got {other}"),
        }
        nothing_left(&dir, &target);
    }
}

#[test]
fn a_flipped_bit_is_refused_at_its_frame() {
    let (dir, store) = populated();
    let bytes = exported(&store, false);
    let mut flipped = bytes.clone();
    let at = bytes.len() / 2;
    flipped[at] ^= 0x10;
    let (e, target) = import_err(&dir, &flipped, "flip.db");
    match e {
        ImportError::Frame(FrameError { offset, .. }) => assert!(offset as usize <= at),
        other => panic!("expected a frame error, got {other}"),
    }
    nothing_left(&dir, &target);
    let mut bad_magic = bytes.clone();
    bad_magic[0] = b'X';
    assert!(matches!(import_err(&dir, &bad_magic, "magic.db").0, ImportError::Frame(FrameError { offset: 0, .. })));
    let mut trailing = bytes;
    trailing.push(0);
    assert!(matches!(import_err(&dir, &trailing, "trail.db").0, ImportError::Frame(_)));
}

#[test]
fn an_import_never_overwrites_an_existing_store() {
    let (dir, store) = populated();
    let bytes = exported(&store, false);
    let existing = dir.path().join("src.db");
    assert!(matches!(export::import(&existing, &mut bytes.as_slice()), Err(ImportError::Exists(_))));
}

#[test]
fn an_import_refuses_a_path_beside_which_another_stores_log_lies() {
    let (dir, store) = populated();
    let bytes = exported(&store, false);
    let target = dir.path().join("fresh.db");
    std::fs::write(world_store::media::wal_path(&target), b"another store's log").unwrap();
    match export::import(&target, &mut bytes.as_slice()) {
        Err(ImportError::Exists(p)) => assert!(p.ends_with("fresh.db.wal"), "{}", p.display()),
        other => panic!("expected Exists naming the log, got {other:?}"),
    }
    assert!(!target.exists());
}

#[test]
fn a_world_moves_between_the_engines_with_the_same_head_and_the_same_export() {
    let (dir, store) = populated();
    let bytes = exported(&store, true);
    let url = common::cluster::fresh_database();
    // A damaged stream leaves the database as it was: empty.
    let cut = &bytes[..bytes.len() - 3];
    assert!(matches!(world_store::postgres::import(&url, &mut &cut[..]), Err(ImportError::Frame(_))));
    let n = world_store::postgres::import(&url, &mut bytes.as_slice()).unwrap();
    assert!(n > 5);
    assert!(matches!(world_store::postgres::import(&url, &mut bytes.as_slice()), Err(ImportError::Occupied(_))));
    let (pg, report) = world_store::postgres::PgStore::open(&url, 1, Default::default()).unwrap();
    assert!(report.is_empty(), "{report:?}");
    common::assert_same_world(&store, &pg);
    assert_waits_travelled(&store.snapshot().unwrap(), &pg.snapshot().unwrap());
    assert_eq!(exported(&pg, true), bytes, "both engines export the same records in the same order");
    let back = dir.path().join("back.db");
    export::import(&back, &mut exported(&pg, true).as_slice()).unwrap();
    let (back, _) = Store::open(&back, 1).unwrap();
    common::assert_same_world(&store, &back);
    assert_waits_travelled(&store.snapshot().unwrap(), &back.snapshot().unwrap());
    common::assert_verifies(&back);
}

#[test]
fn an_export_of_more_rows_than_an_index_pass_takes_imports_whole_and_verifies_clean() {
    use world_store::referrers::REFERRERS_BEHIND_MAX;
    let dir = tempfile::tempdir().unwrap();
    let (store, f) = common::echo_store(&dir.path().join("src.db"), StoreOptions::default());
    // Worlds of more than one import batch: the import indexes in passes,
    // and its worlds arrive in ref order, not by revision.
    let calls = export::IMPORT_BATCH as u64 + REFERRERS_BEHIND_MAX;
    for n in 0..calls {
        common::begin_and_commit(&store, &common::task(&format!("call-{n}")), f, format!("{{\"n\":{n}}}").as_bytes());
    }
    let bytes = exported(&store, false);
    let target = dir.path().join("copy.db");
    export::import(&target, &mut bytes.as_slice()).unwrap();
    let copy = ReadOnlyStore::open(&target).unwrap();
    let (a, b) = (store.snapshot().unwrap(), copy.snapshot().unwrap());
    let report = verify(&b, &Options::default());
    assert!(report.is_clean(), "{:#?}", report.faults);
    for revision in 0..=calls {
        let world = a.world_at(revision).unwrap().unwrap();
        assert_eq!(b.world(&world).unwrap().map(|w| w.revision), Some(revision), "world {revision}");
    }
    let mut again = Vec::new();
    export::export(&b, &mut again, false, 7).unwrap();
    assert_eq!(again, bytes, "the copy exports the same stream");
}
