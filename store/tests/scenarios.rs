//! Store scenarios, through the public API only: most run on both engines
//! (`on_both_engines!`), the rest reopen the embedded engine's file.

mod common;

use common::*;
use std::time::{Duration, Instant};
use world_store::*;

on_both_engines! {
    fn a_genesis_commit_selects_its_world_and_reads_back(store) {
        let c = genesis();
        let world = c.next_world.clone();
        assert_eq!(store.call(Op::CommitWorld(c.clone())).unwrap(), Reply::Selected(world.world_ref));
        let snap = store.snapshot().unwrap();
        assert_eq!(snap.selected_head().unwrap(), Some(world.world_ref));
        assert_eq!(snap.world(&world.world_ref).unwrap(), Some(world));
        assert_eq!(snap.log_range(0, 10).unwrap(), vec![c.entry.clone()]);
        let meta = snap.object_meta(&c.objects[0].hash).unwrap().unwrap();
        assert_eq!(meta.semantic_id, "world/demo/genesis-goal");
        assert_eq!(snap.payload(&c.objects[0].hash).unwrap().unwrap(), c.objects[0].payload);
    }

    fn a_stale_observed_head_is_a_head_conflict_carrying_both_heads(store) {
        let c = genesis();
        store.call(Op::CommitWorld(c.clone())).unwrap();
        let err = store.call(Op::CommitWorld(c.clone())).unwrap_err();
        assert_eq!(err, WriteError::HeadConflict { observed: None, selected: Some(c.next_world.world_ref) });
    }

    fn a_dishonest_entry_hash_is_refused_and_nothing_is_written(store) {
        let mut c = genesis();
        c.entry.entry_hash = Ref::of(b"made up");
        assert!(matches!(store.call(Op::CommitWorld(c)), Err(WriteError::InvalidCommit(_))));
        assert_eq!(store.snapshot().unwrap().log_len().unwrap(), 0);
    }

    fn a_payload_that_does_not_hash_to_its_ref_is_refused(store) {
        let mut c = genesis();
        c.objects[0].payload.push(b' ');
        assert!(matches!(store.call(Op::CommitWorld(c)), Err(WriteError::HashMismatch { .. })));
    }

    fn a_rest_id_is_idempotent_for_the_same_commit_and_refused_for_another(store) {
        let mut c = genesis();
        c.invocation_id = Some("rest:demo-1".into());
        let intent = Op::RestIntent { invocation_id: "rest:demo-1".into(), request_digest: c.request_digest };
        assert_eq!(store.call(intent.clone()).unwrap(), Reply::RestIntent(RestIntentOutcome::Journaled));
        assert_eq!(store.snapshot().unwrap().receipt_state("rest:demo-1").unwrap().0, ReceiptState::Indeterminate);
        let world = c.next_world.world_ref;
        assert_eq!(store.call(Op::CommitWorld(c.clone())).unwrap(), Reply::Selected(world));
        assert_eq!(store.call(Op::CommitWorld(c.clone())).unwrap(), Reply::Selected(world));
        assert_eq!(store.call(intent).unwrap(), Reply::RestIntent(RestIntentOutcome::Resolved(world)));
        let other = Op::RestIntent { invocation_id: "rest:demo-1".into(), request_digest: Ref::of(b"other") };
        assert_eq!(store.call(other).unwrap_err(), WriteError::RestIdReused("rest:demo-1".into()));
        assert_eq!(store.snapshot().unwrap().receipt_state("rest:demo-1").unwrap(), (ReceiptState::Resolved, Some(world)));
        assert_eq!(store.snapshot().unwrap().receipt_state("rest:nope").unwrap().0, ReceiptState::NotStarted);
    }

    fn an_invocation_rebases_onto_the_current_head_and_commits_once(store) {
        store.call(Op::CommitWorld(genesis())).unwrap();
        let f = publish_echo(store);
        for (i, id) in ["t1", "t2"].iter().enumerate() {
            let key = task(id);
            let begun =
                store.call(Op::begin_task(key.clone(), Ref::of(id.as_bytes()), 5)).unwrap();
            assert_eq!(begun, Reply::Begun(BeginOutcome::Started));
            let Reply::Committed(c) = store.call(Op::CommitInvocation(invocation(&key, f, id.as_bytes()))).unwrap() else {
                panic!()
            };
            assert_eq!(c.entry_index, i as u64 + 1);
            let again =
                store.call(Op::begin_task(key.clone(), Ref::of(id.as_bytes()), 6)).unwrap();
            let Reply::Begun(BeginOutcome::Existing(t)) = again else { panic!() };
            assert_eq!((t.state, t.committed), (TaskState::Committed, Some(c)));
            assert!(matches!(
                store.call(Op::CommitInvocation(invocation(&key, f, b"again"))),
                Err(WriteError::TaskNotStarted { .. })
            ));
        }
    }

    fn budget_is_debited_exactly_to_the_grant_and_never_below_zero(store) {
        store.call(Op::CommitWorld(genesis())).unwrap();
        let key = task("spend");
        store.call(Op::begin_task(key.clone(), Ref::of(b"d"), 1)).unwrap();
        let intent = |ordinal: u32| intent(&key, ordinal, "Workspace.Read", 2, format!("req{ordinal}").as_bytes());
        assert_eq!(
            store.call(Op::RecordIntent(intent(0))).unwrap(),
            Reply::Debited(Debit { budget_before: 2, budget_after: 1 })
        );
        assert_eq!(
            store.call(Op::RecordIntent(intent(1))).unwrap(),
            Reply::Debited(Debit { budget_before: 1, budget_after: 0 })
        );
        assert_eq!(store.call(Op::RecordIntent(intent(2))).unwrap_err(), WriteError::BudgetExhausted { remaining: 0 });
        assert_eq!(store.snapshot().unwrap().spent("ep1", "Workspace.Read", "worktree").unwrap(), 2);
        let outcome = OutcomeRequest {
            task: key.clone(),
            ordinal: 0,
            status: OutcomeStatus::Ok,
            record: NewObject::derived("world/effect-record/v1", "host/broker", b"rec0".to_vec()),
            result: Some(NewObject::derived("world/effect-result/v1", "host/broker", b"res0".to_vec())),
            at: 2,
        };
        store.call(Op::RecordOutcome(outcome.clone())).unwrap();
        assert!(matches!(store.call(Op::RecordOutcome(outcome)), Err(WriteError::OutcomeExists { .. })));
    }

    fn a_record_carried_by_two_outcomes_is_indexed_under_the_least_journal_key_whatever_their_order(store) {
        // A v1 effect record names no invocation: two alike decisions made it
        // once for both. Such stores keep verifying, and the index (which the
        // engines compare) does not depend on the order the outcomes came in.
        store.call(Op::CommitWorld(genesis())).unwrap();
        let record = NewObject::derived("world/effect-record/v1", "host/broker", b"alike".to_vec());
        for id in ["t-b", "t-a", "t-c"] {
            let key = task(id);
            store.call(Op::begin_task(key.clone(), Ref::of(id.as_bytes()), 1)).unwrap();
            store.call(Op::RecordIntent(intent(&key, 0, "Workspace.Read", 5, b"alike"))).unwrap();
            store.call(Op::RecordOutcome(outcome(&key, 0, record.clone()))).unwrap();
        }
        let indexed = store.snapshot().unwrap().record_journal(&record.hash).unwrap();
        assert_eq!(indexed, Some(JournalKey { invocation_id: "a2a:ep1:t-a".into(), ordinal: 0 }));
    }

    fn every_commit_indexes_who_names_each_object(store) {
        store.call(Op::CommitWorld(genesis())).unwrap();
        let f = publish_echo(store);
        let key = task("walk");
        store.call(Op::begin_task(key.clone(), Ref::of(b"w"), 1)).unwrap();
        let inv = invocation(&key, f, b"{\"out\":1}");
        let (record, output) = (inv.transition_ref, inv.state_root);
        // The record names the output only if its payload spells the ref out.
        let mut inv = inv;
        let rec_payload = format!("{{\"output\":\"{output}\"}}").into_bytes();
        let rec = NewObject::derived("world/invocation-record/v1", "coordinator:a2a", rec_payload);
        inv.transition_ref = rec.hash;
        inv.objects.retain(|o| o.hash != record);
        inv.objects.push(rec.clone());
        let Reply::Committed(c) = store.call(Op::CommitInvocation(inv)).unwrap() else { panic!() };
        let snap = store.snapshot().unwrap();
        let of_output = snap.referrers(&output, None, 100).unwrap();
        let kinds: Vec<(&str, Ref)> = of_output.iter().map(|r| (r.kind_name(), r.referrer)).collect();
        assert_eq!(kinds, vec![("object", rec.hash), ("world", c.world_ref)]);
        let of_record = snap.referrers(&rec.hash, None, 100).unwrap();
        assert_eq!(of_record.len(), 1);
        assert_eq!(
            (of_record[0].kind_name(), of_record[0].referrer, of_record[0].entry_index),
            ("entry", c.entry_hash, Some(1))
        );
        assert_eq!(snap.entry_index_of(&c.entry_hash).unwrap(), Some(1));
        let after = snap.referrers(&output, Some((of_output[0].kind, of_output[0].referrer)), 100).unwrap();
        assert_eq!(after.len(), 1);
    }

    fn a_ref_named_before_and_after_it_is_stored_lists_both_referrers_in_order(store) {
        let target = NewObject::derived("world/demo/later", "test", b"{\"later\":1}".to_vec());
        let naming = |n: u32| {
            let payload = format!("{{\"n\":{n},\"names\":\"{}\"}}", target.hash);
            NewObject::derived("world/demo/naming", "test", payload.into_bytes())
        };
        let (before, after) = (naming(1), naming(2));
        store.call(Op::PutObjects(vec![before.clone()])).unwrap();
        store.call(Op::PutObjects(vec![target.clone()])).unwrap();
        store.call(Op::PutObjects(vec![after.clone()])).unwrap();
        let snap = store.snapshot().unwrap();
        let all: Vec<Ref> = snap.referrers(&target.hash, None, 10).unwrap().iter().map(|r| r.referrer).collect();
        assert_eq!(all, vec![before.hash, after.hash]);
        // Paged one at a time, the cursor crosses from one place to the other.
        let first = snap.referrers(&target.hash, None, 1).unwrap();
        assert_eq!(first.iter().map(|r| r.referrer).collect::<Vec<_>>(), vec![before.hash]);
        let next = snap.referrers(&target.hash, Some((first[0].kind, first[0].referrer)), 1).unwrap();
        assert_eq!(next.iter().map(|r| r.referrer).collect::<Vec<_>>(), vec![after.hash]);
        assert!(snap.referrers(&target.hash, Some((next[0].kind, next[0].referrer)), 1).unwrap().is_empty());
        assert!(snap.referrers(&target.hash, None, 0).unwrap().is_empty(), "a page of none is empty");
        for r in [before.hash, after.hash] {
            assert!(snap.has_referrer(&target.hash, world_store::tables::REFERRER_OBJECT, &r).unwrap(), "{r}");
        }
    }

    fn a_sequence_shares_one_batch_and_stops_at_the_first_refusal(store) {
        store.call(Op::CommitWorld(genesis())).unwrap();
        let f = publish_echo(store);
        let key = task("seq");
        let create = Op::create_task(key.clone(), Ref::of(b"s"), 1);
        let commit = Op::CommitInvocation(invocation(&key, f, b"{\"seq\":1}"));
        let Reply::Sequence(replies) = store.call(Op::Sequence(vec![create.clone(), commit.clone()])).unwrap() else {
            panic!()
        };
        assert_eq!(replies[0], Ok(Reply::Begun(BeginOutcome::Started)));
        let Ok(Reply::Committed(c)) = &replies[1] else { panic!("{:?}", replies[1]) };
        assert_eq!(c.entry_index, 1);
        // The same task again: the existing row refuses the sequence, nothing else runs.
        let Reply::Sequence(again) = store.call(Op::Sequence(vec![create, commit])).unwrap() else { panic!() };
        let Err(WriteError::TaskExists(t)) = &again[0] else { panic!("{:?}", again[0]) };
        assert_eq!(t.state, TaskState::Committed);
        assert_eq!(again[1], Err(WriteError::Skipped));
        assert_eq!(store.snapshot().unwrap().log_len().unwrap(), 2);
        let nested = store.call(Op::Sequence(vec![Op::Sequence(vec![])])).unwrap();
        assert!(matches!(nested, Reply::Sequence(ref r) if matches!(r[0], Err(WriteError::InvalidCommit(_)))));
    }

    fn a_commit_checks_the_registry_as_an_earlier_publish_in_its_batch_left_it(store) {
        store.call(Op::CommitWorld(genesis())).unwrap();
        let f = publish_echo(store);
        // A publish moving tools.echo elsewhere, then a commit planned against the old entry.
        let mut moved = echo_registry();
        let source = NewObject::derived("world/transition-source/v1", "test", b"echo v2".to_vec());
        let registry = NewObject::derived("world/transition-registry/v1", "test", b"{\"r\":2}".to_vec());
        moved.expected = Some(moved.head);
        moved.head = registry.hash;
        moved.entries = vec![("tools.echo".into(), source.hash)];
        moved.objects = vec![source, registry];
        let key = task("behind");
        let create = Op::create_task(key.clone(), Ref::of(b"s"), 1);
        let commit = Op::CommitInvocation(invocation(&key, f, b"{\"late\":1}"));
        let batch = Op::Sequence(vec![Op::PublishRegistry(moved), create, commit]);
        let Reply::Sequence(r) = store.call(batch).unwrap() else { panic!() };
        assert_eq!(r[0], Ok(Reply::Published(PublishOutcome::Moved)));
        assert!(matches!(r[2], Err(WriteError::TransitionChanged { .. })), "{:?}", r[2]);
        assert_eq!(store.snapshot().unwrap().log_len().unwrap(), 1);
    }
}

#[test]
fn recovery_marks_unfinished_work_fail_closed_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    {
        let (store, _) = Store::open(&path, 1).unwrap();
        store.call(Op::CommitWorld(genesis())).unwrap();
        for id in ["with-effect", "without"] {
            store.call(Op::begin_task(task(id), Ref::of(b"d"), 1)).unwrap();
        }
        let i = intent(&task("with-effect"), 0, "Workspace.Write", 5, b"w");
        store.call(Op::RecordIntent(i)).unwrap();
    }
    let (store, report) = Store::open(&path, 9).unwrap();
    assert_eq!(report.indeterminate_effects, vec!["a2a:ep1:with-effect#0".to_string()]);
    let mut tasks = report.tasks.clone();
    tasks.sort();
    assert_eq!(
        tasks,
        vec![("a2a:ep1:with-effect".into(), TaskState::Uncertain), ("a2a:ep1:without".into(), TaskState::NotCommitted)]
    );
    let snap = store.snapshot().unwrap();
    let journal = snap.journal_of("a2a:ep1:with-effect").unwrap();
    assert_eq!(journal[0].outcome.as_ref().unwrap().status, OutcomeStatus::Indeterminate);
    assert_eq!(snap.spent("ep1", "Workspace.Write", "worktree").unwrap(), 1);
    assert_verifies(&store);
    drop(store);
    let (_store, again) = Store::open(&path, 10).unwrap();
    assert!(again.is_empty());
}

#[test]
fn a_second_writer_and_a_reader_beside_a_live_writer_are_refused_at_once_naming_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    let (store, _) = Store::open(&path, 1).unwrap();
    store.call(Op::CommitWorld(genesis())).unwrap();
    match Store::open(&path, 1) {
        Err(OpenError::Locked { lock }) => assert!(lock.ends_with("world.db.writer.lock")),
        other => panic!("expected Locked, got {:?}", other.map(|_| ())),
    }
    // The writer owns the file: a reader asks it (the daemon's admin socket).
    match ReadOnlyStore::open(&path) {
        Err(OpenError::Locked { lock }) => assert!(lock.ends_with("world.db.writer.lock")),
        other => panic!("expected Locked, got {:?}", other.map(|_| ())),
    }
    drop(store);
    let reader = ReadOnlyStore::open(&path).unwrap();
    assert!(reader.snapshot().unwrap().selected_head().unwrap().is_some());
}

#[test]
fn the_open_task_set_holds_exactly_the_started_tasks_whichever_batches_write_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    {
        let (store, _) = Store::open(&path, 1).unwrap();
        store.call(Op::CommitWorld(genesis())).unwrap();
        let f = publish_echo(&store);
        let create = |key: &TaskKey| Op::create_task(key.clone(), Ref::of(b"o"), 1);
        let intent = |key: &TaskKey| intent(key, 0, "Workspace.Read", 10, key.task_id.as_bytes());
        let outcome = |key: &TaskKey| OutcomeRequest {
            task: key.clone(),
            ordinal: 0,
            status: OutcomeStatus::Ok,
            record: NewObject::derived("world/effect-record/v1", "host/broker", key.task_id.clone().into_bytes()),
            result: None,
            at: 2,
        };
        // Created and committed in one batch: never open.
        let one = task("one-batch");
        store.call(Op::Sequence(vec![create(&one), Op::CommitInvocation(invocation(&one, f, b"1"))])).unwrap();
        // Created with its intent, its outcome recorded (still started) and committed in later batches.
        let spread = task("spread");
        store.call(Op::Sequence(vec![create(&spread), Op::RecordIntent(intent(&spread))])).unwrap();
        store.call(Op::RecordOutcome(outcome(&spread))).unwrap();
        store.call(Op::CommitInvocation(invocation(&spread, f, b"2"))).unwrap();
        // The coordinator's way: intent with the row, then outcome and commit in one batch.
        let usual = task("usual");
        store.call(Op::Sequence(vec![create(&usual), Op::RecordIntent(intent(&usual))])).unwrap();
        let finish = vec![Op::RecordOutcome(outcome(&usual)), Op::CommitInvocation(invocation(&usual, f, b"4"))];
        let Reply::Sequence(r) = store.call(Op::Sequence(finish)).unwrap() else { panic!() };
        assert!(r.iter().all(Result::is_ok), "{r:?}");
        // Created in a sequence whose commit is refused: it stays open.
        let refused = task("refused");
        let mut bad = invocation(&refused, f, b"3");
        bad.transition_fn = Ref::of(b"not registered");
        let Reply::Sequence(r) = store.call(Op::Sequence(vec![create(&refused), Op::CommitInvocation(bad)])).unwrap()
        else {
            panic!()
        };
        assert!(matches!(r[1], Err(WriteError::TransitionChanged { .. })), "{:?}", r[1]);
        // Created and ended in one batch.
        let ended = task("ended");
        let end = Op::EndTask { task: ended.clone(), state: TaskState::NotCommitted, at: 0 };
        store.call(Op::Sequence(vec![create(&ended), end])).unwrap();
    }
    let (store, report) = Store::open(&path, 9).unwrap();
    assert_eq!(report.tasks, vec![("a2a:ep1:refused".to_string(), TaskState::NotCommitted)]);
    let snap = store.snapshot().unwrap();
    let state = |id: &str| snap.task(&task(id)).unwrap().unwrap().state;
    assert_eq!(
        [state("one-batch"), state("spread"), state("usual"), state("refused"), state("ended")],
        [
            TaskState::Committed,
            TaskState::Committed,
            TaskState::Committed,
            TaskState::NotCommitted,
            TaskState::NotCommitted
        ]
    );
    assert_verifies(&store);
}

on_both_engines! {
    fn the_writer_measures_each_batch_it_makes_durable(store) {
        let (before, seen) = (store.status(), store.stats().histograms());
        store.call(Op::CommitWorld(genesis())).unwrap();
        let f = publish_echo(store);
        // Queued at once, so that a batch may carry several of them.
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..16 {
            let (tx, key) = (tx.clone(), task(&format!("t{i}")));
            let commit = Op::Sequence(vec![
                Op::begin_task(key.clone(), Ref::of(b"d"), 1),
                Op::CommitInvocation(invocation(&key, f, format!("{i}").as_bytes())),
            ]);
            store.submit(commit, Box::new(move |r| tx.send(r).unwrap()));
        }
        drop(tx);
        assert!(rx.iter().all(|r| r.is_ok()));
        let (after, h) = (store.status(), store.stats().histograms());
        let (batches, requests) = (after.batches - before.batches, after.requests - before.requests);
        assert_eq!(requests, 1 + 2 + 16);
        assert!(batches >= 4, "the calls waited for theirs, at least");
        // Every batch here was made durable, so each histogram has one per batch.
        assert_eq!(h.commit_ns.count() - seen.commit_ns.count(), batches);
        assert_eq!(h.log_sync_ns.count() - seen.log_sync_ns.count(), batches);
        assert_eq!(h.batch_requests.count() - seen.batch_requests.count(), batches);
        assert_eq!(h.batch_requests.sum - seen.batch_requests.sum, requests);
        // A batch's commit holds its sync.
        let sync = h.log_sync_ns.sum - seen.log_sync_ns.sum;
        assert!(sync > 0 && h.commit_ns.sum - seen.commit_ns.sum >= sync, "{h:?}");
    }
}

on_both_engines! {
    fn the_writer_counts_its_work_and_its_waits_for_durability_and_not_its_idle_time(store) {
        let before = store.status();
        // Idle: no request for the writer to wait on is counted.
        std::thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        store.call(Op::CommitWorld(genesis())).unwrap();
        let f = publish_echo(store);
        for i in 0..4 {
            let key = task(&format!("t{i}"));
            let commit = Op::Sequence(vec![
                Op::begin_task(key.clone(), Ref::of(b"d"), 1),
                Op::CommitInvocation(invocation(&key, f, format!("{i}").as_bytes())),
            ]);
            store.call(commit).unwrap();
        }
        // The last batch's iteration ends after its answer.
        std::thread::sleep(Duration::from_millis(100));
        let (after, stretch) = (store.status(), started.elapsed());
        let work = after.writer_work_ns - before.writer_work_ns;
        let waited = after.writer_sync_wait_ns - before.writer_sync_wait_ns;
        assert!(work > 0 && waited > 0, "{before:?} {after:?}");
        // One thread is occupied no longer than the time that passed (the
        // slack is a margin: no upkeep falls due in the idle stretch).
        let occupied = Duration::from_nanos(work + waited);
        assert!(occupied <= stretch + Duration::from_millis(50), "{occupied:?} in {stretch:?}");
    }
}

/// A pending approval of `digest` for credential `c`, as the daemon asks it.
fn ask(id: &str, c: &[u8], digest: &[u8], expires_at: u64) -> Op {
    ask_approval(id, "ep", Ref::of(c), Ref::of(digest), (1, expires_at))
}

fn decide(id: &str, state: ApprovalState, for_session: bool, at: u64, use_by: u64) -> Op {
    let object =
        NewObject::derived("world/approval/v1", "host/approvals", format!("{{\"{id}\":\"{state:?}\"}}").into_bytes());
    Op::DecideApproval { id: id.into(), decision: ApprovalDecision { state, for_session, object, at, use_by } }
}

fn asked(reply: Result<Reply, WriteError>) -> (String, ApprovalRow) {
    match reply {
        Ok(Reply::Approval(id, row)) => (id, *row),
        other => panic!("not an approval: {other:?}"),
    }
}

/// `ask`, by the A2A task `task`.
fn ask_by(task: &str, id: &str, c: &[u8], digest: &[u8]) -> Op {
    let mut op = ask(id, c, digest, 100);
    if let Op::AskApproval { approval, .. } = &mut op {
        approval.task = Some(task.into());
    }
    op
}

/// The approval session `c`'s A2A task `task` waits on, by the index.
fn awaited(store: &dyn WorldStore, c: &[u8], task: &str) -> Option<(String, ApprovalRow)> {
    store.snapshot().unwrap().awaited_approval(&Ref::of(c), task).unwrap()
}

/// The id of the approval `awaited` names.
fn awaited_id(store: &dyn WorldStore, c: &[u8], task: &str) -> Option<String> {
    awaited(store, c, task).map(|(id, _)| id)
}

/// An intent running under approval `id` of `digest`, in a task of its own.
fn intent_under(store: &dyn WorldStore, task_id: &str, id: &str, digest: &[u8], at: u64) -> Result<Reply, WriteError> {
    let key = TaskKey { surface: Surface::Mcp, episode: "ep".into(), task_id: task_id.into() };
    store.call(Op::begin_task(key.clone(), Ref::of(task_id.as_bytes()), at)).unwrap();
    let mut i = intent(&key, 0, "Workspace.Write", 10, task_id.as_bytes());
    i.at = at;
    i.approval = Some(ApprovalUse { id: id.into(), digest: Ref::of(digest) });
    store.call(Op::RecordIntent(i))
}

on_both_engines! {
    fn an_a2a_task_waits_on_the_approval_its_ask_opened_or_found_whatever_ends_it(store) {
        assert_eq!(asked(store.call(ask_by("t1", "ap-1", b"c", b"d"))).0, "ap-1");
        // The identical request by another task: the same approval, and a wait of its own.
        assert_eq!(asked(store.call(ask_by("t2", "ap-2", b"c", b"d"))).0, "ap-1");
        assert_eq!((awaited_id(store, b"c", "t1"), awaited_id(store, b"c", "t2")), (Some("ap-1".into()), Some("ap-1".into())));
        assert_eq!(store.snapshot().unwrap().approval("ap-2").unwrap(), None);
        // Another session's task of the same id is its own; an ask with no task indexes none.
        asked(store.call(ask("ap-3", b"c", b"other", 100)));
        assert_eq!((awaited_id(store, b"x", "t1"), awaited_id(store, b"c", "")), (None, None));
        // A refused ask writes no wait: the wait is written in the ask's own transaction.
        let long = "t".repeat(APPROVAL_TASK_ID_MAX + 1);
        assert!(matches!(store.call(ask_by(&long, "ap-4", b"c", b"e")), Err(WriteError::InvalidCommit(_))));
        assert!(matches!(store.call(ask_by("t3", "ap-1", b"c", b"e")), Err(WriteError::ApprovalRefused { .. })));
        assert_eq!((awaited_id(store, b"c", &long), awaited_id(store, b"c", "t3")), (None, None));
        // Used by a call with no task (as over MCP): closed, and both tasks still find it.
        asked(store.call(decide("ap-1", ApprovalState::Approved, false, 10, 50)));
        intent_under(store, "mcp-1", "ap-1", b"d", 11).unwrap();
        let (id, row) = awaited(store, b"c", "t2").unwrap();
        assert_eq!((id.as_str(), row.closed, row.uses), ("ap-1", true, 1));
        // A task that asks again waits on the new approval; the other keeps the old one.
        asked(store.call(ask_by("t1", "ap-5", b"c", b"d")));
        assert_eq!((awaited_id(store, b"c", "t1"), awaited_id(store, b"c", "t2")), (Some("ap-5".into()), Some("ap-1".into())));
    }

    fn one_request_keeps_one_open_approval_until_it_is_used_once(store) {
        let (id, row) = asked(store.call(ask("ap-1", b"c", b"d", 100)));
        assert_eq!((id.as_str(), row.state), ("ap-1", ApprovalState::Pending));
        // The same session and request finds it; another credential or request asks anew.
        assert_eq!(asked(store.call(ask("ap-2", b"c", b"d", 100))).0, "ap-1");
        assert_eq!(asked(store.call(ask("ap-3", b"other", b"d", 100))).0, "ap-3");
        // Pending runs nothing, and nothing is debited.
        let refused = intent_under(store, "t0", "ap-1", b"d", 5).unwrap_err();
        assert!(matches!(refused, WriteError::ApprovalRefused { ref why, .. } if why.contains("only an approved")), "{refused:?}");
        assert_eq!(store.snapshot().unwrap().spent("ep", "Workspace.Write", "worktree").unwrap(), 0);

        let (_, row) = asked(store.call(decide("ap-1", ApprovalState::Approved, false, 10, 50)));
        assert_eq!((row.state, row.expires_at, row.decision.is_some()), (ApprovalState::Approved, 50, true));
        assert!(matches!(store.call(decide("ap-1", ApprovalState::Denied, false, 11, 0)), Err(WriteError::ApprovalRefused { .. })));
        // Bound to its request: another digest does not run under it.
        assert!(matches!(intent_under(store, "t1", "ap-1", b"not d", 12), Err(WriteError::ApprovalRefused { .. })));
        assert!(matches!(intent_under(store, "t2", "ap-1", b"d", 12), Ok(Reply::Debited(_))));
        // Used once: closed, and the same request asks afresh.
        assert!(matches!(intent_under(store, "t3", "ap-1", b"d", 13), Err(WriteError::ApprovalRefused { ref why, .. }) if why.contains("used")));
        let snap = store.snapshot().unwrap();
        let row = snap.approval("ap-1").unwrap().unwrap();
        assert_eq!((row.uses, row.closed), (1, true));
        assert_eq!(snap.spent("ep", "Workspace.Write", "worktree").unwrap(), 1);
        assert_eq!(snap.open_approvals(10).unwrap().iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), vec!["ap-3"]);
        assert_eq!(asked(store.call(ask("ap-4", b"c", b"d", 100))).0, "ap-4");
        assert_eq!(snap.approvals(None, 10).unwrap().len(), 2, "the snapshot predates ap-4");
        assert_eq!(store.snapshot().unwrap().approvals(Some("ap-1"), 10).unwrap().len(), 2);
    }

    fn one_session_holds_at_most_its_share_of_open_approvals(store) {
        let max = APPROVALS_OPEN_PER_SESSION_MAX;
        let sequence = (0..max).map(|i| ask(&format!("ap-{i}"), b"c", format!("d{i}").as_bytes(), 100)).collect();
        let Reply::Sequence(replies) = store.call(Op::Sequence(sequence)).unwrap() else { panic!() };
        assert!(replies.iter().all(|r| matches!(r, Ok(Reply::Approval(..)))), "{replies:?}");
        // One more of its own is refused; the same request finds its open one;
        // another session still asks.
        let full = store.call(ask("ap-more", b"c", b"d-more", 100)).unwrap_err();
        assert!(matches!(full, WriteError::SessionApprovalsFull(n) if n == max), "{full:?}");
        assert_eq!(asked(store.call(ask("ap-again", b"c", b"d0", 100))).0, "ap-0");
        assert_eq!(asked(store.call(ask("ap-other", b"other", b"d0", 100))).0, "ap-other");
        // Decided and closed, one frees its place.
        asked(store.call(decide("ap-0", ApprovalState::Denied, false, 10, 0)));
        asked(store.call(Op::CloseApproval { id: "ap-0".into(), at: 10 }));
        assert_eq!(asked(store.call(ask("ap-more", b"c", b"d-more", 100))).0, "ap-more");
    }

    fn an_approval_for_the_session_serves_until_its_use_by_time(store) {
        asked(store.call(ask("ap-1", b"c", b"d", 100)));
        asked(store.call(decide("ap-1", ApprovalState::Approved, true, 10, 40)));
        for (i, at) in [20, 30].iter().enumerate() {
            assert!(matches!(intent_under(store, &format!("t{i}"), "ap-1", b"d", *at), Ok(Reply::Debited(_))));
        }
        assert!(matches!(intent_under(store, "late", "ap-1", b"d", 40), Err(WriteError::ApprovalRefused { .. })));
        // Still serving: it closes only once spent.
        assert!(matches!(store.call(Op::CloseApproval { id: "ap-1".into(), at: 39 }), Err(WriteError::ApprovalRefused { .. })));
        let (_, row) = asked(store.call(Op::CloseApproval { id: "ap-1".into(), at: 40 }));
        assert_eq!((row.uses, row.closed, row.for_session), (2, true, true));
    }

    fn a_denial_or_an_expiry_is_decided_once_then_closed(store) {
        asked(store.call(ask("ap-1", b"c", b"d", 100)));
        // Not before its time, and a yes comes too late after it.
        assert!(matches!(store.call(decide("ap-1", ApprovalState::Expired, false, 99, 0)), Err(WriteError::ApprovalRefused { .. })));
        assert_eq!(
            store.call(decide("ap-1", ApprovalState::Approved, false, 100, 200)),
            Err(WriteError::ApprovalExpired { id: "ap-1".into(), expired_at: 100 })
        );
        let (_, row) = asked(store.call(decide("ap-1", ApprovalState::Expired, false, 100, 0)));
        assert_eq!((row.state, row.closed), (ApprovalState::Expired, false));
        assert!(matches!(intent_under(store, "t", "ap-1", b"d", 101), Err(WriteError::ApprovalRefused { .. })));
        asked(store.call(Op::CloseApproval { id: "ap-1".into(), at: 101 }));
        asked(store.call(Op::CloseApproval { id: "ap-1".into(), at: 102 }));
        asked(store.call(ask("ap-2", b"c", b"d", 300)));
        let (_, row) = asked(store.call(decide("ap-2", ApprovalState::Denied, false, 150, 0)));
        assert_eq!(row.state, ApprovalState::Denied);
        assert!(matches!(store.call(Op::CloseApproval { id: "nope".into(), at: 1 }), Err(WriteError::NoApproval(_))));
        assert!(matches!(store.call(ask("", b"x", b"y", 1)), Err(WriteError::InvalidCommit(_))));
    }
}

/// `n` approvals asked at `at`, pending until `expires_at`: `per_session` for
/// each session of each episode, in one batch; the ids asked.
fn fill(
    store: &dyn WorldStore,
    episodes: &[&str],
    per_session: u64,
    n: u64,
    (at, expires_at): (u64, u64),
) -> Vec<String> {
    let sessions = n.div_ceil(per_session);
    let mut ids = vec![];
    let asks = (0..n)
        .map(|i| {
            let session = i / per_session;
            let episode = episodes[(session * episodes.len() as u64 / sessions) as usize];
            let id = format!("ap-fill-{at}-{i}");
            ids.push(id.clone());
            let credential = Ref::of(format!("{episode}-session-{session}").as_bytes());
            ask_approval(&id, episode, credential, Ref::of(format!("request {i}").as_bytes()), (at, expires_at))
        })
        .collect();
    let Reply::Sequence(replies) = store.call(Op::Sequence(asks)).unwrap() else { panic!() };
    assert!(replies.iter().all(|r| matches!(r, Ok(Reply::Approval(..)))), "{:?}", replies.iter().find(|r| r.is_err()));
    ids
}

/// A fresh request of `credential` in `episode`, asked at `at`.
fn ask_at(store: &dyn WorldStore, id: &str, episode: &str, credential: &str, at: u64) -> Result<Reply, WriteError> {
    store.call(ask_approval(id, episode, Ref::of(credential.as_bytes()), Ref::of(id.as_bytes()), (at, at + 100)))
}

/// The decision object approval `id` closed under, as JSON.
fn decision_of(store: &dyn WorldStore, id: &str) -> serde_json::Value {
    let snap = store.snapshot().unwrap();
    let row = snap.approval(id).unwrap().unwrap();
    assert_eq!((row.state, row.closed), (ApprovalState::Expired, true), "{id}");
    let object = snap.payload(&row.decision.unwrap()).unwrap().unwrap();
    serde_json::from_slice(&object).unwrap()
}

on_both_engines! {
    fn approvals_past_their_expiry_hold_no_room_so_a_full_session_asks_again_once_they_expire(store) {
        let max = APPROVALS_OPEN_PER_SESSION_MAX;
        let ids = fill(store, &["ep"], max, max, (1, 100));
        let full = ask_at(store, "ap-next", "ep", "ep-session-0", 99).unwrap_err();
        assert_eq!(full, WriteError::SessionApprovalsFull(max));
        // Expired, they count for nothing: the ask closes them, each decided by the clock.
        assert_eq!(asked(ask_at(store, "ap-next", "ep", "ep-session-0", 100)).0, "ap-next");
        let decision = decision_of(store, &ids[0]);
        assert_eq!((decision["decision"].as_str(), decision["decidedBy"]["via"].as_str()), (Some("expired"), Some("clock")));
        assert_eq!(decision["decidedAt"], serde_json::json!(100));
        assert_eq!(store.snapshot().unwrap().open_approvals(1000).unwrap().len(), 1);
    }

    fn one_episode_holds_at_most_its_share_of_the_store_across_its_sessions(store) {
        let (max, per_session) = (APPROVALS_OPEN_PER_EPISODE_MAX, APPROVALS_OPEN_PER_SESSION_MAX);
        assert!(per_session < max && max < APPROVALS_OPEN_MAX, "each bound below the next");
        fill(store, &["busy"], per_session, max, (1, 100));
        // A new session of the same episode has room of its own, but the episode has none.
        let full = ask_at(store, "ap-new-session", "busy", "busy-session-new", 2).unwrap_err();
        assert_eq!(full, WriteError::EpisodeApprovalsFull(max));
        // Another episode still asks, though not through a session of this one.
        assert_eq!(asked(ask_at(store, "ap-other", "calm", "calm-session", 2)).0, "ap-other");
        let elsewhere = ask_at(store, "ap-elsewhere", "calm", "busy-session-0", 2).unwrap_err();
        assert!(matches!(elsewhere, WriteError::InvalidCommit(ref why) if why.contains("its own episode")), "{elsewhere:?}");
        // Once the busy episode's approvals expire, it asks again.
        assert_eq!(asked(ask_at(store, "ap-new-session", "busy", "busy-session-new", 100)).0, "ap-new-session");
    }

    fn a_store_filled_to_its_room_takes_new_asks_again_once_its_approvals_expire(store) {
        let episodes = ["e0", "e1", "e2", "e3"];
        fill(store, &episodes, APPROVALS_OPEN_PER_SESSION_MAX, APPROVALS_OPEN_MAX, (1, 100));
        let full = ask_at(store, "ap-late", "e4", "e4-session", 2).unwrap_err();
        assert_eq!(full, WriteError::ApprovalsFull(APPROVALS_OPEN_MAX));
        assert_eq!(asked(ask_at(store, "ap-late", "e4", "e4-session", 100)).0, "ap-late");
    }

    fn a_pass_closes_at_most_its_share_of_the_approvals_past_their_expiry(store) {
        let per_pass = APPROVALS_EXPIRED_PER_PASS as u64;
        fill(store, &["ep"], 32, per_pass + 6, (1, 100));
        let waiting = asked(ask_at(store, "ap-waits", "ep", "another", 1)).0;
        let pass = |at: u64| match store.call(Op::ExpireApprovals { at }).unwrap() {
            Reply::ApprovalsClosed(ids) => ids,
            other => panic!("{other:?}"),
        };
        assert_eq!(pass(99), Vec::<String>::new(), "nothing has expired yet");
        assert_eq!(pass(100).len() as u64, per_pass);
        assert_eq!(pass(100).len(), 6);
        assert_eq!(pass(100).len(), 0);
        let open = store.snapshot().unwrap().open_approvals(1000).unwrap();
        assert_eq!(open.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(), vec![waiting], "it waits until 101");
        assert_eq!(decision_of(store, "ap-fill-1-0")["decidedByText"], serde_json::json!("nobody: it expired"));
    }

    fn revoking_a_session_closes_its_approvals_and_nothing_runs_under_them(store) {
        let c = Ref::of(b"c");
        let session = Session { episode: "ep".into(), grants: vec![], created_at: 1, expires_at: 1000 };
        store.call(Op::MintSession { credential_id: c, session }).unwrap();
        asked(store.call(ask("ap-pending", b"c", b"d1", 100)));
        asked(store.call(ask("ap-approved", b"c", b"d2", 100)));
        asked(store.call(decide("ap-approved", ApprovalState::Approved, true, 10, 500)));
        asked(store.call(ask("ap-theirs", b"other", b"d1", 100)));
        assert_eq!(store.call(Op::RevokeSession { credential_id: c, at: 50 }).unwrap(), Reply::Revoked(true));
        let decision = decision_of(store, "ap-pending");
        assert_eq!((decision["decision"].as_str(), decision["decidedBy"]["via"].as_str()), (Some("expired"), Some("revocation")));
        let snap = store.snapshot().unwrap();
        let approved = snap.approval("ap-approved").unwrap().unwrap();
        assert_eq!((approved.state, approved.closed), (ApprovalState::Approved, true));
        assert!(matches!(intent_under(store, "t", "ap-approved", b"d2", 60), Err(WriteError::ApprovalRefused { .. })));
        let open = snap.open_approvals(10).unwrap();
        assert_eq!(open.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), vec!["ap-theirs"]);
    }

    fn closing_a_pending_approval_past_its_expiry_decides_it_expired_once(store) {
        asked(store.call(ask("ap-1", b"c", b"d", 100)));
        assert!(matches!(store.call(Op::CloseApproval { id: "ap-1".into(), at: 99 }), Err(WriteError::ApprovalRefused { .. })));
        let (_, row) = asked(store.call(Op::CloseApproval { id: "ap-1".into(), at: 120 }));
        assert_eq!((row.state, row.closed, row.decided_at), (ApprovalState::Expired, true, 120));
        // Again: the same row, no second decision.
        let (_, again) = asked(store.call(Op::CloseApproval { id: "ap-1".into(), at: 130 }));
        assert_eq!(again, row);
        assert!(matches!(store.call(decide("ap-1", ApprovalState::Denied, false, 131, 0)), Err(WriteError::ApprovalRefused { .. })));
    }
}

on_both_engines! {
    fn a_secret_is_made_once_and_every_later_ask_gets_the_first(store) {
        let ensure = |v: &[u8]| store.call(Op::EnsureSecret { name: "key".into(), value: v.to_vec() }).unwrap();
        assert_eq!(ensure(b"first"), Reply::Secret(b"first".to_vec()));
        assert_eq!(ensure(b"second"), Reply::Secret(b"first".to_vec()));
        let empty = store.call(Op::EnsureSecret { name: "key".into(), value: vec![] });
        assert!(matches!(empty, Err(WriteError::InvalidCommit(_))), "{empty:?}");
    }
}

/// The rows of `table` in a store that verifies clean, as `verify` counts them.
fn verified_rows(store: &Store, table: &str) -> u64 {
    let report = world_store::verify::verify(&store.snapshot().unwrap(), &Default::default());
    assert!(report.is_clean(), "{:#?}", report.faults);
    report.tables.iter().find(|t| t.table == table).map_or(0, |t| t.rows)
}

#[test]
fn referrers_past_the_index_are_named_from_their_rows_until_the_index_reaches_them() {
    use world_store::referrers::REFERRERS_BEHIND_MAX;
    use world_store::tables::REFERRER_OBJECT;
    let dir = tempfile::tempdir().unwrap();
    let (store, f) = echo_store(&dir.path().join("world.db"), StoreOptions::default());
    let target = begin_and_commit(&store, &task("named"), f, b"{\"first\":true}").output_ref;
    let index_rows = |store: &Store| verified_rows(store, "referrers_by_target");
    let before = index_rows(&store);
    // Each call's output names the target: every one is named, past the
    // index and in it, until a batch (or an idle checkpoint) indexes them.
    let (mut calls, mut outputs) = (0u64, vec![]);
    loop {
        let output = format!("{{\"names\":\"{target}\",\"call\":{calls}}}");
        outputs.push(begin_and_commit(&store, &task(&format!("call-{calls}")), f, output.as_bytes()).output_ref);
        calls += 1;
        let snap = store.snapshot().unwrap();
        let checked = if calls % 16 == 0 { &outputs[..] } else { &outputs[outputs.len() - 1..] };
        for output in checked {
            assert!(snap.has_referrer(&target, REFERRER_OBJECT, output).unwrap(), "after {calls} calls: {output}");
        }
        if calls % 16 == 0 && index_rows(&store) > before {
            break;
        }
        assert!(calls < REFERRERS_BEHIND_MAX, "the index never reached the calls' referrers");
    }
}

#[test]
fn places_past_the_index_are_found_from_their_rows_until_the_index_pass_writes_them() {
    use world_store::referrers::REFERRERS_BEHIND_MAX;
    let dir = tempfile::tempdir().unwrap();
    let (store, f) = echo_store(&dir.path().join("world.db"), StoreOptions::default());
    let young_rows = |store: &Store| verified_rows(store, "places_young");
    let before = young_rows(&store);
    // No call inserts into the place index: each call's object, entry and
    // world are found where they are, from their rows, until a batch's
    // index pass writes their places with their referrer rows.
    let (mut calls, mut committed) = (0u64, vec![]);
    loop {
        let key = task(&format!("call-{calls}"));
        committed.push(begin_and_commit(&store, &key, f, format!("{{\"call\":{calls}}}").as_bytes()));
        calls += 1;
        let snap = store.snapshot().unwrap();
        let checked = if calls % 16 == 0 { &committed[..] } else { &committed[committed.len() - 1..] };
        for c in checked {
            assert!(snap.object_seq(&c.output_ref).unwrap().is_some(), "after {calls} calls: {}", c.output_ref);
            assert_eq!(snap.entry_index_of(&c.entry_hash).unwrap(), Some(c.entry_index), "after {calls} calls");
            assert!(snap.world(&c.world_ref).unwrap().is_some(), "after {calls} calls: {}", c.world_ref);
        }
        assert_eq!(snap.object_seq(&Ref::of(b"never stored")).unwrap(), None);
        if calls % 16 == 0 {
            let young = young_rows(&store);
            if young > before {
                // The pass placed every row it reached: four a call (two
                // objects, an entry, a world).
                assert!(young - before >= 4 * (calls - 16), "{young} young rows after {calls} calls");
                break;
            }
            assert_eq!(young, before, "a call placed a row on its commit path");
        }
        assert!(calls < REFERRERS_BEHIND_MAX, "the index never reached the calls' places");
    }
}

#[test]
fn a_read_begun_after_a_write_is_answered_sees_the_write_though_the_answer_precedes_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (store, f) = echo_store(&dir.path().join("world.db"), StoreOptions::default());
    // The writer answers each call before committing its transaction; a
    // snapshot taken the moment the answer arrives still has the call.
    for n in 0..300 {
        let key = task(&format!("seen-{n}"));
        begin(&store, &key);
        let committed = match store.call(Op::CommitInvocation(invocation(&key, f, b"{}"))).unwrap() {
            Reply::Committed(c) => c,
            other => panic!("call {n} was not committed: {other:?}"),
        };
        let snap = store.snapshot().unwrap();
        assert_eq!(snap.log_len().unwrap(), committed.entry_index + 1, "call {n}");
        assert_eq!(snap.selected_head().unwrap(), Some(committed.world_ref), "call {n}");
        assert!(snap.task(&key).unwrap().is_some_and(|t| t.state != TaskState::Started), "call {n}");
    }
}

/// What a REST commit pays under `World.Commit=log:budget`, as the daemon charges it.
fn commit_charge(c: &RestCommit, cost: u64, budget: u64) -> CommitCharge {
    let record = format!("{{\"entryHash\":\"{}\",\"cost\":{cost}}}", c.entry.entry_hash);
    CommitCharge {
        credential: Ref::of(b"committer"),
        episode: "ep1".into(),
        effect: "World.Commit".into(),
        scope: "log".into(),
        cost,
        grant_budget: budget,
        record: NewObject::derived("world/commit-record/v1", "host/broker", record.into_bytes()),
        at: 7,
    }
}

/// A REST commit of one object onto `head`.
fn next_commit(head: &World, label: &str) -> RestCommit {
    let object = NewObject::derived("demo/step", "test", label.as_bytes().to_vec());
    let state_root = object.hash;
    RestCommit::next(Some(head), object, state_root, Ref::of(b"fn"), Ref::of(b"interp"), 1, "test")
}

on_both_engines! {
    fn a_rest_commit_is_debited_and_journaled_once_and_a_refused_one_not_at_all(store) {
        let mut c = genesis();
        c.invocation_id = Some("rest:paid".into());
        c.charge = Some(Box::new(commit_charge(&c, 2, 3)));
        let world = c.next_world.clone();
        assert_eq!(store.call(Op::CommitWorld(c.clone())).unwrap(), Reply::Selected(world.world_ref));
        // Resent: answered from its receipt, not paid again.
        assert_eq!(store.call(Op::CommitWorld(c.clone())).unwrap(), Reply::Selected(world.world_ref));
        let snap = store.snapshot().unwrap();
        assert_eq!(snap.spent("ep1", "World.Commit", "log").unwrap(), 2);
        let record = c.charge.as_ref().unwrap().record.hash;
        let (key, item) = snap.journal_of_record(&record).unwrap().expect("the commit's journal item");
        assert_eq!((key.invocation_id.as_str(), key.ordinal), ("rest-entry:0", 0));
        assert_eq!(item.intent.credential, Some(Ref::of(b"committer")));
        assert_eq!((item.intent.budget_before, item.intent.budget_after), (3, 1));
        assert_eq!(item.outcome.map(|o| o.status), Some(OutcomeStatus::Ok));
        // Over what is left: refused, nothing written, nothing debited.
        let mut over = next_commit(&world, "over");
        over.charge = Some(Box::new(commit_charge(&over, 2, 3)));
        assert_eq!(store.call(Op::CommitWorld(over)).unwrap_err(), WriteError::BudgetExhausted { remaining: 1 });
        let snap = store.snapshot().unwrap();
        assert_eq!((snap.log_len().unwrap(), snap.spent("ep1", "World.Commit", "log").unwrap()), (1, 2));
        // A commit refused for another reason debits nothing either.
        let mut stale = next_commit(&world, "stale");
        stale.observed_head = None;
        stale.charge = Some(Box::new(commit_charge(&stale, 1, 3)));
        assert!(matches!(store.call(Op::CommitWorld(stale)), Err(WriteError::HeadConflict { .. })));
        let mut last = next_commit(&world, "last");
        last.charge = Some(Box::new(commit_charge(&last, 1, 3)));
        store.call(Op::CommitWorld(last)).unwrap();
        assert_eq!(store.snapshot().unwrap().spent("ep1", "World.Commit", "log").unwrap(), 3);
    }
}

#[test]
fn verify_reports_approvals_and_commit_records_that_no_row_of_the_daemon_s_names() {
    for engine in [Engine::Embedded, Engine::Postgres] {
        if matches!(engine, Engine::Postgres) && std::env::var_os("WORLD_TEST_POSTGRES").is_none() {
            continue;
        }
        let fresh = fresh(engine);
        let store = fresh.store.as_ref();
        let genesis = genesis();
        store.call(Op::CommitWorld(genesis.clone())).unwrap();
        // What a REST commit could write before the daemon's names were reserved:
        // a decision "by the operator" that no approval row made, and a commit
        // record no journal item carries.
        let approval = NewObject::derived(
            "world/approval/v1",
            "host/approvals",
            br#"{"approvalId":"ap-forged","decision":"approved","decidedByText":"the operator"}"#.to_vec(),
        );
        let record = NewObject::derived("world/commit-record/v1", "host/broker", b"{\"entryIndex\":1}".to_vec());
        let mut forged = RestCommit::next(
            Some(&genesis.next_world),
            approval.clone(),
            approval.hash,
            Ref::of(b"fn"),
            Ref::of(b"interp"),
            1,
            "a-rest-client",
        );
        forged.objects.push(record.clone());
        store.call(Op::CommitWorld(forged)).unwrap();
        let report = world_store::verify::verify(&store.snapshot().unwrap(), &Default::default());
        let mut forged: Vec<String> = report
            .faults
            .iter()
            .filter(|f| f.kind == world_store::verify::FaultKind::Forged)
            .map(|f| f.key.clone())
            .collect();
        let mut expected = vec![approval.hash.to_string(), record.hash.to_string()];
        expected.sort();
        forged.sort();
        assert_eq!(forged, expected, "{:#?}", report.faults);
    }
}

#[test]
fn an_a2a_task_s_wait_survives_a_reopen_and_verify_reports_one_naming_no_approval() {
    for engine in [Engine::Embedded, Engine::Postgres] {
        if matches!(engine, Engine::Postgres) && std::env::var_os("WORLD_TEST_POSTGRES").is_none() {
            continue;
        }
        let Fresh { store, dir, url } = fresh(engine);
        asked(store.call(ask_by("t1", "ap-1", b"c", b"d")));
        drop(store);
        let reopened: Box<dyn WorldStore> = match (&dir, &url) {
            (Some(dir), _) => Box::new(Store::open(&dir.path().join("world.db"), 1).unwrap().0),
            (_, Some(url)) => Box::new(node(url)),
            _ => unreachable!("a fresh store is one of the two"),
        };
        assert_eq!(awaited_id(reopened.as_ref(), b"c", "t1"), Some("ap-1".into()), "{engine:?}");
        assert_verifies(reopened.as_ref());
        // A wait naming an approval the store does not hold, behind the store's back.
        let report = match (&dir, &url) {
            (Some(dir), _) => {
                drop(reopened);
                let path = dir.path().join("world.db");
                let db = redb::Database::create(&path).unwrap();
                let txn = db.begin_write().unwrap();
                txn.open_table(tables::APPROVAL_WAITS).unwrap().insert((Ref::of(b"c").0, "t2"), "ap-gone").unwrap();
                txn.commit().unwrap();
                drop(db);
                let store = ReadOnlyStore::open(&path).unwrap();
                verify::verify(&store.snapshot().unwrap(), &Default::default())
            }
            (_, Some(url)) => {
                let mut admin = ::postgres::Client::connect(url, ::postgres::NoTls).unwrap();
                admin
                    .execute(
                        "INSERT INTO approval_waits (credential, task_id, approval) VALUES ($1, 't2', 'ap-gone')",
                        &[&Ref::of(b"c").0.as_slice()],
                    )
                    .unwrap();
                verify::verify(&reopened.snapshot().unwrap(), &Default::default())
            }
            _ => unreachable!("a fresh store is one of the two"),
        };
        let key = format!("{} t2", Ref::of(b"c"));
        let dangling = |f: &&verify::Fault| {
            (f.table, f.key.as_str(), f.kind) == ("approval_waits", key.as_str(), verify::FaultKind::Dangling)
        };
        assert_eq!(report.faults.iter().filter(dangling).count(), 1, "{engine:?}: {:#?}", report.faults);
        assert_eq!(report.fault_count, 1, "{engine:?}: {:#?}", report.faults);
    }
}

/// The report's `forged` faults' keys, sorted.
fn forged_keys(store: &dyn WorldStore) -> Vec<String> {
    let report = world_store::verify::verify(&store.snapshot().unwrap(), &Default::default());
    let mut keys: Vec<String> = report
        .faults
        .iter()
        .filter(|f| f.kind == world_store::verify::FaultKind::Forged)
        .map(|f| f.key.clone())
        .collect();
    keys.sort();
    keys
}

/// The engines a scenario that expects faults runs on: PostgreSQL too where
/// `WORLD_TEST_POSTGRES` names a cluster.
fn engines() -> Vec<Engine> {
    match std::env::var_os("WORLD_TEST_POSTGRES") {
        Some(_) => vec![Engine::Embedded, Engine::Postgres],
        None => vec![Engine::Embedded],
    }
}

/// An effect record of effect `ordinal` of `key`, as the broker spells the
/// fields the verifier reads (v1: naming no invocation).
fn effect_record(key: &TaskKey, ordinal: u32, semantic_id: &str, allowed: bool) -> NewObject {
    let invocation = key.invocation_id();
    let payload = match semantic_id {
        "world/effect-record/v1" => format!("{{\"allowed\":{allowed},\"of\":\"{invocation}#{ordinal}\"}}"),
        _ => format!("{{\"allowed\":{allowed},\"invocationId\":\"{invocation}\",\"ordinal\":{ordinal}}}"),
    };
    NewObject::derived(semantic_id, "host/broker", payload.into_bytes())
}

/// How the episode view tells an effect that ran (`record` journaled) or was denied.
fn told(id: &str, status: EffectStatus, record: Ref) -> CallEffect {
    CallEffect {
        id: id.into(),
        effect: "Workspace.Read".into(),
        scope: "worktree".into(),
        cost: 1,
        status,
        denial: (status == EffectStatus::Denied).then(|| "denied:scope".into()),
        budget_before: 10,
        budget_after: if status == EffectStatus::Denied { 10 } else { 9 },
        record: Some(record),
        request: None,
    }
}

/// A call as the coordinator commits it: effect 0 ran (intent, then its
/// outcome carrying its record), effect 1 was denied (its record travels
/// with the commit), and the invocation record (v2) lists both. Its task
/// row tells the effects only if `tells` (rows written before they were
/// kept do not); `denied_as` is the denial's record's semantic id.
fn effectful_call(store: &dyn WorldStore, f: Ref, id: &str, tells: bool, denied_as: &str) {
    let key = task(id);
    begin(store, &key);
    store.call(Op::RecordIntent(intent(&key, 0, "Workspace.Read", 10, id.as_bytes()))).unwrap();
    let ran = effect_record(&key, 0, "world/effect-record/v2", true);
    store.call(Op::RecordOutcome(outcome(&key, 0, ran.clone()))).unwrap();
    let denied = effect_record(&key, 1, denied_as, false);
    let mut c = invocation(&key, f, id.as_bytes());
    let record =
        format!("{{\"invocationId\":\"{}\",\"effects\":[\"{}\",\"{}\"]}}", key.invocation_id(), ran.hash, denied.hash);
    let record = NewObject::derived("world/invocation-record/v2", "coordinator:a2a", record.into_bytes());
    c.transition_ref = record.hash;
    c.objects.retain(|o| o.semantic_id != "world/invocation-record/v1");
    c.objects.extend([record, denied.clone()]);
    if tells {
        c.effects = vec![told("read", EffectStatus::Ok, ran.hash), told("denied", EffectStatus::Denied, denied.hash)];
    }
    assert!(matches!(store.call(Op::CommitInvocation(c)).unwrap(), Reply::Committed(_)));
}

/// What the daemon writes, each way it writes it: REST commits (one paid,
/// with its commit record), calls committed with and without effects, a
/// denial told by its task row or listed only by its invocation record (v1
/// and v2 records), and a call left uncertain with its effect journaled.
fn the_daemon_s_writes(store: &dyn WorldStore) -> Ref {
    let g = genesis();
    store.call(Op::CommitWorld(g.clone())).unwrap();
    let mut paid = next_commit(&g.next_world, "paid");
    paid.invocation_id = Some("rest:paid".into());
    paid.charge = Some(Box::new(commit_charge(&paid, 1, 5)));
    store.call(Op::CommitWorld(paid)).unwrap();
    let f = publish_echo(store);
    begin_and_commit(store, &task("pure"), f, b"pure");
    effectful_call(store, f, "told", true, "world/effect-record/v2");
    effectful_call(store, f, "untold", false, "world/effect-record/v2");
    effectful_call(store, f, "untold-v1", false, "world/effect-record/v1");
    let uncertain = task("uncertain");
    begin(store, &uncertain);
    store.call(Op::RecordIntent(intent(&uncertain, 0, "Workspace.Read", 10, b"u"))).unwrap();
    let record = effect_record(&uncertain, 0, "world/effect-record/v2", true);
    store.call(Op::RecordOutcome(outcome(&uncertain, 0, record))).unwrap();
    store.call(Op::EndTask { task: uncertain, state: TaskState::Uncertain, at: 3 }).unwrap();
    f
}

on_both_engines! {
    fn every_write_of_the_daemon_s_is_owned_by_a_row_of_its_own_and_none_is_reported_forged(store) {
        the_daemon_s_writes(store);
        assert_eq!(forged_keys(store), Vec::<String>::new());
    }

    fn the_sample_calls_the_benches_write_verify_clean(store) {
        for op in world_store::sample::genesis("bench") {
            store.call(op).unwrap();
        }
        for n in 0..20 {
            let key = TaskKey { surface: Surface::Mcp, episode: "bench".into(), task_id: format!("call-{n}") };
            store.call(world_store::sample::pure_call(key, &format!("{{\"n\":{n}}}"), "coordinator:mcp")).unwrap();
        }
    }

    fn the_genesis_quickstart_commits_claims_the_daemon_and_verifies_clean(store) {
        let goal = NewObject::derived("world/genesis/v1", QUICKSTART_AUTHOR, QUICKSTART_GOAL.to_vec());
        let c = RestCommit::genesis(goal, Ref::of(QUICKSTART_TRANSITION), Ref::of(b"interp"), 1, QUICKSTART_AUTHOR);
        store.call(Op::CommitWorld(c)).unwrap();
    }
}

#[test]
fn verify_reports_entries_and_records_claiming_the_daemon_that_no_row_of_the_daemon_s_names() {
    for engine in engines() {
        let fresh = fresh(engine);
        let store = fresh.store.as_ref();
        let f = the_daemon_s_writes(store);
        let head = store.snapshot().unwrap().head_world().unwrap().unwrap();
        // What a REST commit could write before the daemon's names were
        // reserved: an entry by "the coordinator" carrying an invocation
        // record no task committed, which lists an effect record no journal
        // item carries, naming a real call that does not list it.
        let effect = effect_record(&task("told"), 7, "world/effect-record/v2", true);
        let record = format!("{{\"invocationId\":\"a2a:ep1:never\",\"effects\":[\"{}\"]}}", effect.hash);
        let record = NewObject::derived("world/invocation-record/v2", "coordinator:x", record.into_bytes());
        let mut forged = RestCommit::next(Some(&head), record.clone(), record.hash, f, f, 1, "coordinator:x");
        forged.objects.push(effect.clone());
        let index = forged.entry.header.entry_index;
        store.call(Op::CommitWorld(forged)).unwrap();
        let mut expected = vec![index.to_string(), record.hash.to_string(), effect.hash.to_string()];
        expected.sort();
        assert_eq!(forged_keys(store), expected, "{engine:?}");
    }
}

#[test]
fn an_entry_by_the_quickstart_s_author_that_is_not_its_genesis_is_reported_forged() {
    for engine in engines() {
        let fresh = fresh(engine);
        let store = fresh.store.as_ref();
        let goal = NewObject::derived("world/genesis/v1", QUICKSTART_AUTHOR, b"{\"world\":\"mine\"}".to_vec());
        let c = RestCommit::genesis(goal, Ref::of(QUICKSTART_TRANSITION), Ref::of(b"interp"), 1, QUICKSTART_AUTHOR);
        store.call(Op::CommitWorld(c.clone())).unwrap();
        let next = RestCommit::next(
            Some(&c.next_world),
            NewObject::derived("demo/step", "test", b"2".to_vec()),
            Ref::of(b"2"),
            Ref::of(QUICKSTART_TRANSITION),
            Ref::of(b"interp"),
            1,
            "host/anything",
        );
        store.call(Op::CommitWorld(next)).unwrap();
        assert_eq!(forged_keys(store), vec!["0".to_string(), "1".to_string()], "{engine:?}");
    }
}

/// The commits that made groups of batches visible to readers so far.
fn commits_for_readers(store: &Store) -> u64 {
    store.stats().published.load(std::sync::atomic::Ordering::Relaxed)
}

/// A task whose id the daemon names (MCP's): no admission looks its rows up,
/// so its batches may join a group.
fn mcp_task(id: &str) -> TaskKey {
    TaskKey { surface: Surface::Mcp, ..task(id) }
}

/// Calls' own batches are answered once durable and committed for readers
/// several at a time; a snapshot begun after an answer still sees it (it asks
/// the writer to commit), and a session minted among them is seen by a
/// glance as soon as it is answered.
#[test]
fn calls_batches_share_one_commit_and_every_answer_is_read_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store, f) = echo_store(&dir.path().join("world.db"), StoreOptions::default());
    let published = || commits_for_readers(&store);
    let task = mcp_task;
    let before = published();
    for i in 0..8 {
        begin_and_commit(&store, &task(&format!("held-{i}")), f, format!("{{\"n\":{i}}}").as_bytes());
    }
    assert!(published() - before < 16, "MCP calls' batches are held");
    let before = published();
    for i in 8..16 {
        begin_and_commit(&store, &task(&format!("held-{i}")), f, format!("{{\"n\":{i}}}").as_bytes());
    }
    let commits = published() - before;
    assert!(commits < 16, "16 batches of calls' own rows took {commits} commits");
    let credential = Ref::of(b"a credential minted among held batches");
    let session = Session { episode: "held".into(), grants: vec![], created_at: 1, expires_at: 1000 };
    store.call(Op::MintSession { credential_id: credential, session: session.clone() }).unwrap();
    assert_eq!(store.glance().unwrap().session(&credential).unwrap(), Some(session));
    for i in 0..8 {
        let committed = begin_and_commit(&store, &task(&format!("read-{i}")), f, b"{}");
        let snap = store.snapshot().unwrap();
        assert_eq!(snap.log_len().unwrap(), committed.entry_index + 1, "an answered entry is read back");
        assert!(snap.task(&task(&format!("read-{i}"))).unwrap().is_some());
    }
    assert_verifies(&store);
}

/// A group stops growing once its frames hold `HOLD_BYTES_MAX` bytes (the
/// payloads it appends wait in memory until it commits): calls of half a
/// MiB of output each, one after another, commit at least once every few
/// calls, where small ones share a commit until the group's batch or time
/// bound.
#[test]
fn a_group_of_calls_commits_once_its_frames_hold_its_bytes_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (store, f) = echo_store(&dir.path().join("world.db"), StoreOptions::default());
    let published = || commits_for_readers(&store);
    let task = mcp_task;
    let calls = 32u64;
    let mut outputs = vec![];
    let before = published();
    for i in 0..calls {
        let output = vec![b'a' + (i % 26) as u8; 512 << 10];
        let committed = begin_and_commit(&store, &task(&format!("big-{i}")), f, &output);
        outputs.push((task(&format!("big-{i}")), output, committed));
    }
    // Each call's frames carry its output and its record: over 1 MiB, so a
    // group ends after this many calls at most.
    let per_group = world_store::HOLD_BYTES_MAX.div_ceil(1 << 20);
    let commits = published() - before;
    assert!(commits >= calls / per_group, "{calls} calls of 1 MiB of frames took {commits} commits");
    assert_reads_back(&store, &outputs);
    assert_verifies(&store);
}

/// The batches of a group share one transaction's open tables and its
/// deferred writes: a task begun in one batch and committed in a later one
/// leaves no open-task row, one begun and never ended keeps its row, each
/// batch's objects read back from the payload file at the offsets the group
/// gave them, and the store verifies before and after a reopen.
#[test]
fn a_groups_batches_share_their_tables_and_their_deferred_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    let (store, f) = echo_store(&path, StoreOptions::default());
    let published = || commits_for_readers(&store);
    let task = mcp_task;
    let before = published();
    begin(&store, &task("begun-early"));
    begin(&store, &task("left-open"));
    let mut outputs = vec![];
    for i in 0..6 {
        let output = format!("{{\"call\":{i},\"pad\":\"{}\"}}", "x".repeat(100 * i)).into_bytes();
        let committed = begin_and_commit(&store, &task(&format!("call-{i}")), f, &output);
        outputs.push((task(&format!("call-{i}")), output, committed));
    }
    let late = match store.call(Op::CommitInvocation(invocation(&task("begun-early"), f, b"late"))).unwrap() {
        Reply::Committed(c) => c,
        other => panic!("not committed: {other:?}"),
    };
    outputs.push((task("begun-early"), b"late".to_vec(), late));
    let batches = 2 + 2 * 6 + 1;
    assert!(published() - before < batches, "{batches} batches took {} commits", published() - before);
    let reads_back = |store: &Store, left_open: TaskState| {
        assert_reads_back(store, &outputs);
        assert_eq!(store.snapshot().unwrap().task(&task("left-open")).unwrap().unwrap().state, left_open);
        assert_verifies(store);
    };
    reads_back(&store, TaskState::Started);
    drop(store);
    // A task left started is ended by the reopen's recovery, which finds it
    // by its open-task row.
    let (store, _) = Store::open_with(&path, 1, StoreOptions::default()).unwrap();
    reads_back(&store, TaskState::NotCommitted);
}
