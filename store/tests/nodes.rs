//! Several nodes on one PostgreSQL store: what one node writes, every node
//! sees at once; budgets, task ids and the log's chain hold across nodes; a
//! node whose lease lapsed is fenced and its calls in flight are resolved by
//! the others.

mod common;

use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use world_store::postgres::PgStore;
use world_store::*;

/// A store with a genesis world and the echo registry, and three nodes on it.
fn three_nodes() -> (String, Vec<Arc<PgStore>>, Ref) {
    let url = cluster::fresh_database();
    let first = node(&url);
    first.call(Op::CommitWorld(genesis())).unwrap();
    let f = publish_echo(&first);
    let nodes = vec![Arc::new(first), Arc::new(node(&url)), Arc::new(node(&url))];
    (url, nodes, f)
}

#[test]
fn a_budget_shared_by_three_nodes_pays_for_exactly_its_units() {
    let (_url, nodes, _) = three_nodes();
    const BUDGET: u64 = 25;
    let debited = Arc::new(AtomicUsize::new(0));
    let exhausted = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|s| {
        for (n, store) in nodes.iter().enumerate() {
            for t in 0..4 {
                let (store, debited, exhausted) = (store.clone(), debited.clone(), exhausted.clone());
                s.spawn(move || {
                    for i in 0..6 {
                        let key = task(&format!("n{n}-t{t}-{i}"));
                        let create = Op::create_task(key.clone(), Ref::of(b"d"), 1);
                        let debit =
                            Op::RecordIntent(intent(&key, 0, "Workspace.Write", BUDGET, key.task_id.as_bytes()));
                        let Reply::Sequence(r) = store.call(Op::Sequence(vec![create, debit])).unwrap() else {
                            panic!()
                        };
                        match &r[1] {
                            Ok(Reply::Debited(_)) => debited.fetch_add(1, Ordering::SeqCst),
                            Err(WriteError::BudgetExhausted { remaining: 0 }) => {
                                exhausted.fetch_add(1, Ordering::SeqCst)
                            }
                            other => panic!("{other:?}"),
                        };
                    }
                });
            }
        }
    });
    assert_eq!(debited.load(Ordering::SeqCst) as u64, BUDGET);
    assert_eq!(exhausted.load(Ordering::SeqCst) as u64, 3 * 4 * 6 - BUDGET);
    for store in &nodes {
        assert_eq!(store.snapshot().unwrap().spent("ep1", "Workspace.Write", "worktree").unwrap(), BUDGET);
    }
}

#[test]
fn a_batch_locks_the_log_head_last_and_chains_its_entries_then() {
    let (url, nodes, f) = three_nodes();
    let store = nodes[0].clone();
    // Another writer holds the head row, as another node's batch would.
    let mut holder = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    holder.batch_execute("BEGIN; SELECT ref FROM heads WHERE name = 'world/selected' FOR UPDATE").unwrap();
    let (a, b) = (task("head-first"), task("head-second"));
    let create = |k: &TaskKey| Op::create_task(k.clone(), Ref::of(b"d"), 1);
    let batch = Op::Sequence(vec![
        create(&a),
        Op::CommitInvocation(invocation(&a, f, b"1")),
        create(&b),
        Op::CommitInvocation(invocation(&b, f, b"2")),
    ]);
    let call = std::thread::spawn(move || store.call(batch));
    // While the batch waits for the head, it has written the second task's
    // row already (after the first commit's checks): an insert of that key
    // from elsewhere waits on it.
    let mut probe = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let waited = task_row_is_locked(&mut probe, "head-second", deadline);
    holder.batch_execute("COMMIT").unwrap();
    let Reply::Sequence(replies) = call.join().unwrap().unwrap() else { panic!("not a sequence") };
    assert!(waited, "the batch took the head before writing its other rows");
    let committed: Vec<Committed> = replies
        .into_iter()
        .filter_map(|r| match r.unwrap() {
            Reply::Committed(c) => Some(c),
            _ => None,
        })
        .collect();
    let snap = nodes[1].snapshot().unwrap();
    assert_eq!(committed.len(), 2);
    for (key, c) in [(&a, &committed[0]), (&b, &committed[1])] {
        assert_eq!(snap.log_entry(c.entry_index).unwrap().map(|e| e.entry_hash), Some(c.entry_hash), "{c:?}");
        assert_eq!(snap.task(key).unwrap().unwrap().committed.as_ref(), Some(c));
    }
    assert_eq!(committed[1].entry_index, committed[0].entry_index + 1);
    assert_eq!(snap.selected_head().unwrap(), Some(committed[1].world_ref));
    assert_verifies(nodes[2].as_ref());
}

#[test]
fn batches_creating_calls_in_one_episode_lock_its_summary_only_at_their_end() {
    let (url, nodes, _) = three_nodes();
    begin(nodes[0].as_ref(), &task("first"));
    // Another writer holds the episode's summary, as another node's batch
    // would from its flush to its COMMIT.
    let mut holder = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    holder.batch_execute("BEGIN; SELECT summary FROM episodes WHERE episode = 'ep1' FOR UPDATE").unwrap();
    let create = |k: &str| Op::create_task(task(k), Ref::of(b"d"), 2);
    let calls: Vec<_> = [(0, vec![create("a1"), create("a2")]), (1, vec![create("b1")])]
        .into_iter()
        .map(|(n, ops)| {
            let store = nodes[n].clone();
            std::thread::spawn(move || store.call(Op::Sequence(ops)))
        })
        .collect();
    // While both batches wait for the summary, each has written its task
    // rows already: an insert of those keys from elsewhere waits on them.
    let mut probe = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut waiting = vec![];
    for id in ["a2", "b1"] {
        waiting.push(task_row_is_locked(&mut probe, id, deadline));
    }
    holder.batch_execute("COMMIT").unwrap();
    for call in calls {
        let Reply::Sequence(replies) = call.join().unwrap().unwrap() else { panic!("not a sequence") };
        assert!(replies.iter().all(|r| matches!(r, Ok(Reply::Begun(BeginOutcome::Started)))), "{replies:?}");
    }
    assert_eq!(waiting, [true, true], "a batch waited for the summary before writing its calls");
    let snap = nodes[2].snapshot().unwrap();
    let calls = snap.episode_calls("ep1", 0, PAGE_MAX).unwrap();
    let positions: Vec<u64> = calls.iter().map(|(seq, _, _)| *seq).collect();
    assert_eq!(positions, [0, 1, 2, 3]);
    assert_eq!(calls[0].1, task("first"));
    let a: Vec<&str> = calls.iter().map(|(_, k, _)| k.task_id.as_str()).filter(|id| id.starts_with('a')).collect();
    assert_eq!(a, ["a1", "a2"], "a batch's calls keep their order");
    assert_eq!(snap.episode("ep1").unwrap().unwrap().calls, 4);
    drop(snap);
    assert_verifies(nodes[1].as_ref());
}

#[test]
fn calls_started_and_ended_on_three_nodes_at_once_number_each_episode_without_a_gap() {
    let (_url, nodes, f) = three_nodes();
    std::thread::scope(|s| {
        for (n, store) in nodes.iter().enumerate() {
            for t in 0..3 {
                s.spawn(move || {
                    for i in 0..12 {
                        let key = TaskKey {
                            surface: Surface::Mcp,
                            episode: ["ep1", "ep2"][(n + t + i) % 2].into(),
                            task_id: format!("{n}-{t}-{i}"),
                        };
                        let create = Op::create_task(key.clone(), Ref::of(b"d"), 10 + i as u64);
                        let ops = match i % 3 {
                            0 => vec![create, Op::CommitInvocation(invocation(&key, f, key.task_id.as_bytes()))],
                            1 => {
                                vec![create, Op::EndTask { task: key.clone(), state: TaskState::NotCommitted, at: 30 }]
                            }
                            _ => vec![create],
                        };
                        let Reply::Sequence(replies) = store.call(Op::Sequence(ops)).unwrap() else { panic!() };
                        assert!(replies.iter().all(Result::is_ok), "{replies:?}");
                    }
                });
            }
        }
    });
    let snap = nodes[0].snapshot().unwrap();
    let mut seen = 0;
    for ep in ["ep1", "ep2"] {
        let calls = snap.episode_calls(ep, 0, PAGE_MAX).unwrap();
        assert!(calls.iter().enumerate().all(|(i, (seq, _, _))| *seq == i as u64), "{ep}: positions from 0, no gap");
        let summary = snap.episode(ep).unwrap().unwrap();
        assert_eq!(summary, summarize_calls(calls.iter().map(|(_, _, t)| t)), "{ep}");
        seen += calls.len();
    }
    assert_eq!(seen, 3 * 3 * 12);
    drop(snap);
    assert_verifies(nodes[2].as_ref());
}

#[test]
fn one_task_id_sent_to_three_nodes_at_once_starts_once() {
    let (_url, nodes, f) = three_nodes();
    for round in 0..20 {
        let key = task(&format!("dup-{round}"));
        let replies: Vec<Reply> = std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .iter()
                .map(|store| {
                    let key = key.clone();
                    s.spawn(move || {
                        let create = Op::create_task(key.clone(), Ref::of(b"d"), 1);
                        let commit = Op::CommitInvocation(invocation(&key, f, key.task_id.as_bytes()));
                        store.call(Op::Sequence(vec![create, commit])).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut committed = vec![];
        for reply in &replies {
            let Reply::Sequence(r) = reply else { panic!() };
            match (&r[0], &r[1]) {
                (Ok(Reply::Begun(BeginOutcome::Started)), Ok(Reply::Committed(c))) => committed.push(c.clone()),
                (Err(WriteError::TaskExists(_)), Err(WriteError::Skipped)) => {}
                other => panic!("round {round}: {other:?}"),
            }
        }
        assert_eq!(committed.len(), 1, "round {round}: {replies:?}");
        for store in &nodes {
            let t = store.snapshot().unwrap().task(&key).unwrap().unwrap();
            assert_eq!(t.committed.as_ref(), Some(&committed[0]));
        }
    }
}

#[test]
fn appends_from_three_nodes_at_once_keep_one_contiguous_chain() {
    let (_url, nodes, f) = three_nodes();
    std::thread::scope(|s| {
        for (n, store) in nodes.iter().enumerate() {
            for t in 0..3 {
                s.spawn(move || {
                    for i in 0..10 {
                        begin_and_commit(
                            store.as_ref(),
                            &task(&format!("c{n}-{t}-{i}")),
                            f,
                            format!("{n}{t}{i}").as_bytes(),
                        );
                    }
                });
            }
        }
    });
    let snap = nodes[1].snapshot().unwrap();
    let log = snap.log_range(0, PAGE_MAX).unwrap();
    assert_eq!(log.len(), 1 + 3 * 3 * 10);
    for pair in log.windows(2) {
        assert_eq!(pair[1].header.entry_index, pair[0].header.entry_index + 1);
        assert_eq!(pair[1].header.prev_entry_hash, pair[0].entry_hash);
        assert_eq!(pair[1].entry_hash, canonical::entry_hash(&pair[1].header, &pair[1].transition_ref));
    }
    let head = snap.head_world().unwrap().unwrap();
    assert_eq!((head.revision, head.log_head), (log.len() as u64 - 1, log.last().unwrap().entry_hash));
}

#[test]
fn a_session_minted_or_a_registry_published_on_one_node_is_seen_by_every_node_at_once() {
    let (_url, nodes, _) = three_nodes();
    let id = Ref::of(b"token");
    let session = Session { episode: "ep1".into(), grants: vec![], created_at: 1, expires_at: 99 };
    nodes[0].call(Op::MintSession { credential_id: id, session: session.clone() }).unwrap();
    for store in &nodes {
        assert_eq!(store.snapshot().unwrap().session(&id).unwrap(), Some(session.clone()));
    }
    assert_eq!(nodes[2].call(Op::MintSession { credential_id: id, session }).unwrap_err(), WriteError::SessionExists);
    assert_eq!(nodes[1].call(Op::RevokeSession { credential_id: id, at: 1 }).unwrap(), Reply::Revoked(true));
    assert!(nodes[0].snapshot().unwrap().session(&id).unwrap().is_none());

    let mut next = echo_registry();
    let registry = NewObject::derived("world/transition-registry/v1", "test", b"{\"r\":2}".to_vec());
    next.expected = Some(next.head);
    next.head = registry.hash;
    next.objects.push(registry);
    assert_eq!(nodes[2].call(Op::PublishRegistry(next.clone())).unwrap(), Reply::Published(PublishOutcome::Moved));
    for store in &nodes {
        assert_eq!(store.snapshot().unwrap().head(&next.name).unwrap(), Some(next.head));
    }
    // A publish that raced it from a node that had not seen it: a conflict, not an overwrite.
    let stale = echo_registry();
    let Err(WriteError::RegistryConflict { actual, .. }) = nodes[0].call(Op::PublishRegistry(RegistryPublish {
        head: Ref::of(b"other"),
        objects: vec![NewObject::derived("world/transition-registry/v1", "test", b"other".to_vec())],
        ..stale
    })) else {
        panic!()
    };
    assert_eq!(actual, Some(next.head));
}

#[test]
fn a_node_whose_lease_lapsed_is_fenced_and_its_calls_in_flight_are_resolved_by_another() {
    let (url, nodes, f) = three_nodes();
    let fatal = Arc::new(AtomicUsize::new(0));
    let told = fatal.clone();
    let opts = world_store::postgres::PgOptions {
        on_fatal: Some(Box::new(move |_| {
            told.fetch_add(1, Ordering::SeqCst);
        })),
        ..Default::default()
    };
    let (doomed, _) = PgStore::open(&url, 1, opts).unwrap();
    let journaled = task("in-flight-journaled");
    let bare = task("in-flight-bare");
    begin(&doomed, &journaled);
    doomed.call(Op::RecordIntent(intent(&journaled, 0, "Workspace.Write", 10, b"w"))).unwrap();
    begin(&doomed, &bare);
    // Its lease lapses (a node cut off, or killed): the database says so.
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    admin
        .execute("UPDATE nodes SET lease_until = now() - interval '1 second' WHERE node_id = $1", &[&doomed.node()])
        .unwrap();
    // A node starting now resolves them, as the embedded engine's recovery does at open.
    let (_late, report) = PgStore::open(&url, 9, Default::default()).unwrap();
    assert_eq!(report.indeterminate_effects, vec!["a2a:ep1:in-flight-journaled#0".to_string()]);
    let mut tasks = report.tasks.clone();
    tasks.sort();
    assert_eq!(
        tasks,
        vec![
            ("a2a:ep1:in-flight-bare".to_string(), TaskState::NotCommitted),
            ("a2a:ep1:in-flight-journaled".to_string(), TaskState::Uncertain)
        ]
    );
    // The fenced node writes nothing more, and says so once.
    let late_commit = doomed.call(Op::CommitInvocation(invocation(&journaled, f, b"late")));
    assert!(matches!(late_commit, Err(WriteError::WriterStopped(_))), "{late_commit:?}");
    assert!(matches!(doomed.call(Op::PutObjects(vec![])), Err(WriteError::WriterStopped(_))));
    assert_eq!(fatal.load(Ordering::SeqCst), 1);
    assert!(matches!(doomed.health(), Health::Failed(_)));
    let snap = nodes[0].snapshot().unwrap();
    assert_eq!(snap.task(&journaled).unwrap().unwrap().state, TaskState::Uncertain);
    assert_eq!(snap.spent("ep1", "Workspace.Write", "worktree").unwrap(), 1, "the debit stands");
    assert_eq!(snap.log_len().unwrap(), 1);
}

#[test]
fn a_database_without_the_schema_or_with_a_newer_one_is_refused_and_init_is_idempotent() {
    let url = cluster::fresh_database();
    assert_eq!(world_store::postgres::init(&url).unwrap(), world_store::postgres::Migrated { from: 4, to: 4 });
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    admin.execute("INSERT INTO world_schema (version, name) VALUES (99, 'from the future')", &[]).unwrap();
    let newer = PgStore::open(&url, 1, Default::default()).err().unwrap().to_string();
    assert!(newer.contains("version 99, newer than this binary's 4"), "{newer}");
    assert!(!newer.contains("password"), "{newer}");
    let init = world_store::postgres::init(&url).unwrap_err().to_string();
    assert!(init.contains("newer"), "{init}");

    let bare = cluster::url_of("postgres");
    let missing = PgStore::open(&bare, 1, Default::default()).err().unwrap().to_string();
    assert!(missing.contains("worldd store init"), "{missing}");
}

#[test]
fn first_publishes_racing_on_three_nodes_move_the_registry_once() {
    let url = cluster::fresh_database();
    let nodes: Vec<PgStore> = (0..3).map(|_| node(&url)).collect();
    for round in 0..10 {
        let name = format!("world/transition-registry/race-{round}");
        let outcomes: Vec<Result<Reply, WriteError>> = std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .iter()
                .enumerate()
                .map(|(n, store)| {
                    let name = name.clone();
                    s.spawn(move || {
                        let head =
                            NewObject::derived("world/transition-registry/v1", "test", format!("{n}").into_bytes());
                        let publish = RegistryPublish {
                            name,
                            expected: None,
                            head: head.hash,
                            objects: vec![head],
                            entries: vec![],
                        };
                        store.call(Op::PublishRegistry(publish))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let moved = outcomes.iter().filter(|r| matches!(r, Ok(Reply::Published(PublishOutcome::Moved)))).count();
        let refused = outcomes.iter().filter(|r| matches!(r, Err(WriteError::RegistryConflict { .. }))).count();
        assert_eq!((moved, refused), (1, 2), "round {round}: {outcomes:?}");
    }
}

#[test]
fn a_database_restarted_mid_load_loses_nothing_acknowledged_and_the_nodes_resume_by_themselves() {
    let own = cluster::Private::start();
    let url = own.database();
    let first = node(&url);
    first.call(Op::CommitWorld(genesis())).unwrap();
    let f = publish_echo(&first);
    let nodes = [Arc::new(first), Arc::new(node(&url))];
    let acked = std::sync::Mutex::new(vec![]);
    let refused = AtomicUsize::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for (n, store) in nodes.iter().enumerate() {
            for t in 0..3 {
                let (acked, refused, stop) = (&acked, &refused, &stop);
                s.spawn(move || {
                    let mut i = 0;
                    while !stop.load(Ordering::SeqCst) {
                        i += 1;
                        let key = task(&format!("r{n}-{t}-{i}"));
                        let create = Op::create_task(key.clone(), Ref::of(b"d"), 1);
                        let commit = Op::CommitInvocation(invocation(&key, f, key.task_id.as_bytes()));
                        match store.call(Op::Sequence(vec![create, commit])) {
                            Ok(Reply::Sequence(r)) => match &r[1] {
                                Ok(Reply::Committed(c)) => acked.lock().unwrap().push((key, c.clone())),
                                other => panic!("{other:?}"),
                            },
                            // Typed, and never a hang: the database is away.
                            Err(WriteError::Unavailable(_) | WriteError::Unconfirmed(_)) => {
                                refused.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(std::time::Duration::from_millis(20));
                            }
                            other => panic!("{other:?}"),
                        }
                    }
                });
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        own.restart();
        std::thread::sleep(std::time::Duration::from_secs(2));
        stop.store(true, Ordering::SeqCst);
    });
    let acked = acked.into_inner().unwrap();
    assert!(refused.load(Ordering::SeqCst) > 0, "the restart was seen");
    // Both nodes took writes again by themselves, and say so.
    for store in &nodes {
        begin_and_commit(store.as_ref(), &task(&format!("after-{}", store.node())), f, b"after");
        assert_eq!(store.health(), Health::Serving);
    }
    let snap = nodes[0].snapshot().unwrap();
    for (key, committed) in &acked {
        assert_eq!(snap.task(key).unwrap().unwrap().committed.as_ref(), Some(committed), "{key:?}");
        assert_eq!(snap.log_entry(committed.entry_index).unwrap().unwrap().entry_hash, committed.entry_hash);
    }
    let mut log = vec![];
    while log.len() as u64 != snap.log_len().unwrap() {
        log.extend(snap.log_range(log.len() as u64, PAGE_MAX).unwrap());
    }
    for pair in log.windows(2) {
        assert_eq!(pair[1].header.prev_entry_hash, pair[0].entry_hash);
    }
}

#[test]
fn the_verifier_walks_a_postgres_store_and_finds_a_damaged_payload_and_a_broken_chain() {
    let (url, nodes, f) = three_nodes();
    for i in 0..5 {
        begin_and_commit(nodes[i % 3].as_ref(), &task(&format!("v{i}")), f, format!("{i}").as_bytes());
    }
    assert_verifies(nodes[0].as_ref());
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    // A payload no longer hashing to its ref (one byte changed, same length).
    let output = nodes[0].snapshot().unwrap().log_entry(3).unwrap().unwrap().transition_ref;
    let tamper = "UPDATE objects SET payload = overlay(payload placing '\\x58'::bytea from 1 for 1) WHERE hash = $1";
    assert_eq!(admin.execute(tamper, &[&output.0.as_slice()]).unwrap(), 1);
    let report = world_store::verify::verify(&nodes[1].snapshot().unwrap(), &Default::default());
    assert!(report.faults.iter().any(|f| f.kind == world_store::verify::FaultKind::HashMismatch), "{report:#?}");
    // An entry swapped for another: the chain breaks there.
    let url2 = cluster::fresh_database();
    let other = node(&url2);
    other.call(Op::CommitWorld(genesis())).unwrap();
    let g = publish_echo(&other);
    for i in 0..3 {
        begin_and_commit(&other, &task(&format!("w{i}")), g, format!("{i}").as_bytes());
    }
    let mut admin2 = ::postgres::Client::connect(&url2, ::postgres::NoTls).unwrap();
    admin2
        .batch_execute("UPDATE log SET entry = (SELECT entry FROM log WHERE entry_index = 1) WHERE entry_index = 2")
        .unwrap();
    let report = world_store::verify::verify(&other.snapshot().unwrap(), &Default::default());
    assert!(!report.is_clean(), "{report:#?}");
}

#[test]
fn the_verifier_compares_a_postgres_stores_derived_rows_with_those_its_records_give() {
    let url = cluster::fresh_database();
    let store = node(&url);
    store.call(Op::CommitWorld(genesis())).unwrap();
    let f = publish_echo(&store);
    let key = task("journaled");
    begin(&store, &key);
    store.call(Op::RecordIntent(intent(&key, 0, "Workspace.Write", 5, b"req"))).unwrap();
    let record = NewObject::derived("world/effect-record/v1", "host/broker", b"{\"rec\":1}".to_vec());
    let outcome =
        OutcomeRequest { task: key.clone(), ordinal: 0, status: OutcomeStatus::Ok, record, result: None, at: 2 };
    store.call(Op::RecordOutcome(outcome)).unwrap();
    store.call(Op::CommitInvocation(invocation(&key, f, b"out"))).unwrap();
    assert_verifies(&store);
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    let faults_in = |admin: &mut ::postgres::Client, damage: &str, undo: &str| {
        admin.batch_execute(&format!("BEGIN; {damage}; COMMIT")).unwrap();
        let report = world_store::verify::verify(&store.snapshot().unwrap(), &Default::default());
        admin.batch_execute(&format!("BEGIN; {undo}; COMMIT")).unwrap();
        assert_verifies(&store);
        report.faults.iter().map(|f| (f.table, f.kind)).collect::<Vec<_>>()
    };
    use world_store::verify::FaultKind::{Dangling, Mismatch};
    // One row saying that a log entry names an object, lost.
    let lost = faults_in(
        &mut admin,
        "CREATE TEMP TABLE gone AS SELECT * FROM referrers WHERE kind = 2 LIMIT 1;
         DELETE FROM referrers r USING gone g WHERE (r.target, r.kind, r.position) = (g.target, g.kind, g.position)",
        "INSERT INTO referrers SELECT * FROM gone; DROP TABLE gone",
    );
    assert_eq!(lost, vec![("referrers", Mismatch)]);
    // A referrer moved to a log position that holds nothing.
    let moved = faults_in(
        &mut admin,
        "UPDATE referrers SET position = position + 1000 WHERE kind = 2 AND position = 1",
        "UPDATE referrers SET position = position - 1000 WHERE kind = 2 AND position = 1001",
    );
    assert!(moved.contains(&("referrers", Dangling)), "{moved:?}");
    // A record said to be carried by another outcome.
    let other = faults_in(
        &mut admin,
        "UPDATE record_journal SET ordinal = ordinal + 1",
        "UPDATE record_journal SET ordinal = ordinal - 1",
    );
    assert_eq!(other, vec![("record_journal", Mismatch)]);
    // The episode index: a summary edited, a call renumbered, a session moved.
    let summary = faults_in(
        &mut admin,
        "UPDATE episodes SET summary = summary || '\\x00'::bytea",
        "UPDATE episodes SET summary = substring(summary from 1 for length(summary) - 1)",
    );
    assert!(summary.contains(&("episodes", Mismatch)), "{summary:?}");
    let renumbered = faults_in(&mut admin, "UPDATE tasks SET seq = seq + 7", "UPDATE tasks SET seq = seq - 7");
    assert_eq!(renumbered, vec![("episode_calls", Mismatch)]);
    let session = Session { episode: "ep1".into(), grants: vec![], created_at: 1, expires_at: 100 };
    store.call(Op::MintSession { credential_id: Ref::of(b"a token"), session }).unwrap();
    let moved = faults_in(&mut admin, "UPDATE sessions SET episode = 'another'", "UPDATE sessions SET episode = 'ep1'");
    assert_eq!(moved, vec![("episode_sessions", Mismatch)]);
}

#[test]
fn a_database_of_the_schema_before_the_episode_index_gets_it_built_by_init() {
    let url = cluster::fresh_database();
    let store = node(&url);
    store.call(Op::CommitWorld(genesis())).unwrap();
    let f = publish_echo(&store);
    let (journaled, pure) = (task("journaled"), task("pure"));
    begin(&store, &journaled);
    store.call(Op::RecordIntent(intent(&journaled, 0, "Workspace.Write", 5, b"req"))).unwrap();
    store.call(Op::EndTask { task: journaled.clone(), state: TaskState::Uncertain, at: 3 }).unwrap();
    begin_and_commit(&store, &pure, f, b"out");
    let session = Session { episode: "ep1".into(), grants: vec![], created_at: 1, expires_at: 100 };
    store.call(Op::MintSession { credential_id: Ref::of(b"a token"), session }).unwrap();
    let made = store.snapshot().unwrap().episode("ep1").unwrap().unwrap();
    drop(store);
    // What a database of schema 1 held: no index, tasks that told no effects.
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DROP TABLE episodes; DROP INDEX tasks_by_episode; ALTER TABLE tasks DROP COLUMN seq;
             DROP INDEX sessions_by_episode; ALTER TABLE sessions DROP COLUMN episode;
             DROP TABLE approvals; DROP TABLE secrets; DROP TABLE approval_waits;
             DELETE FROM world_schema WHERE version >= 2",
        )
        .unwrap();
    let older = PgStore::open(&url, 1, Default::default()).err().unwrap().to_string();
    assert!(older.contains("older than this binary's"), "{older}");
    assert_eq!(world_store::postgres::init(&url).unwrap(), world_store::postgres::Migrated { from: 1, to: 4 });
    // (Its sweep resolves the intent the dropped node left without an outcome.)
    let (store, _) = PgStore::open(&url, 9, Default::default()).unwrap();
    let snap = store.snapshot().unwrap();
    let rebuilt = snap.episode("ep1").unwrap().unwrap();
    assert_eq!(rebuilt, made);
    let calls: Vec<String> = snap.episode_calls("ep1", 0, 10).unwrap().into_iter().map(|(_, k, _)| k.task_id).collect();
    assert_eq!(calls, ["journaled", "pure"]);
    assert_eq!(snap.episode_sessions("ep1", 10).unwrap().len(), 1);
    drop(snap);
    assert_verifies(&store);
}

#[test]
fn a_node_gone_for_an_hour_with_nothing_in_flight_leaves_no_row_behind() {
    let (url, nodes, _) = three_nodes();
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    let (gone, recent) = (nodes[1].node().to_string(), nodes[2].node().to_string());
    let lapse = "UPDATE nodes SET lease_until = now() - $2::text::interval WHERE node_id = $1";
    admin.execute(lapse, &[&gone, &"2 hours"]).unwrap();
    admin.execute(lapse, &[&recent, &"1 minute"]).unwrap();
    // The sweep a node runs when it starts.
    let (_late, _) = PgStore::open(&url, 9, Default::default()).unwrap();
    let left: Vec<String> = admin.query("SELECT node_id FROM nodes", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert!(!left.contains(&gone), "{left:?}");
    assert!(left.contains(&recent), "a node lapsed a minute ago is still named: {left:?}");
    assert!(left.contains(&nodes[0].node().to_string()), "a live node keeps its row: {left:?}");
}

/// Takes `episode` on `store` on another thread; the receiver hears when it is held.
fn hold_in_background(store: &Arc<PgStore>, episode: &'static str) -> Waiter {
    let (tx, rx) = std::sync::mpsc::channel();
    let store = store.clone();
    std::thread::spawn(move || {
        let _ = tx.send(store.hold_episode(episode));
    });
    rx
}

type Waiter = std::sync::mpsc::Receiver<Result<EpisodeHold, WriteError>>;

/// The hold the first of two waiters gets, and the other waiter.
fn first_of(a: Waiter, b: Waiter) -> (EpisodeHold, Waiter) {
    let deadline = std::time::Instant::now() + HELD_SOON;
    while std::time::Instant::now() < deadline {
        if let Ok(held) = a.try_recv() {
            return (held.unwrap(), b);
        }
        if let Ok(held) = b.try_recv() {
            return (held.unwrap(), a);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("neither waiter took the episode once it was given up");
}

const HELD_SOON: std::time::Duration = std::time::Duration::from_secs(3);

#[test]
fn one_node_at_a_time_runs_an_episode_and_the_next_waits_until_it_is_given_up() {
    let (_url, nodes, _) = three_nodes();
    let held = nodes[0].hold_episode("ep").unwrap();
    let second = hold_in_background(&nodes[1], "ep");
    let third = hold_in_background(&nodes[2], "ep");
    // Another episode is not held up by this one.
    let other = nodes[1].hold_episode("ep-other").unwrap();
    assert!(second.recv_timeout(std::time::Duration::from_millis(400)).is_err(), "ep taken twice");
    assert!(third.try_recv().is_err(), "ep taken twice");
    drop(held);
    // One waiter gets it; the other, only once that one gives it up.
    let (next, last) = first_of(second, third);
    assert!(last.recv_timeout(std::time::Duration::from_millis(400)).is_err(), "ep taken twice");
    drop(next);
    drop(last.recv_timeout(HELD_SOON).expect("the last node takes ep").unwrap());
    drop(other);
    // Given-up holds leave their connections ready: the same node takes ep again at once.
    drop(nodes[0].hold_episode("ep").unwrap());
}

#[test]
fn an_episode_held_by_a_node_that_lost_its_connection_is_free_for_the_others() {
    let (url, nodes, _) = three_nodes();
    let held = nodes[0].hold_episode("ep").unwrap();
    let waiter = hold_in_background(&nodes[1], "ep");
    assert!(waiter.recv_timeout(std::time::Duration::from_millis(300)).is_err(), "ep taken twice");
    // What a node's death does to its sessions: the server ends them.
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    let ended = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_locks
             WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .unwrap();
    assert_eq!(ended.len(), 1, "one episode hold is held");
    drop(waiter.recv_timeout(HELD_SOON).expect("the waiting node takes ep").unwrap());
    // The dead hold is given up without harm, and its node can hold again.
    drop(held);
    drop(nodes[0].hold_episode("ep").unwrap());
}

#[test]
fn an_episode_held_past_the_bounded_wait_is_refused_as_busy() {
    let (_url, nodes, _) = three_nodes();
    let _held = nodes[0].hold_episode("ep").unwrap();
    let started = std::time::Instant::now();
    let refused = nodes[1].hold_episode("ep").unwrap_err();
    assert!(matches!(refused, WriteError::EpisodeBusy { ref episode, .. } if episode == "ep"), "{refused:?}");
    assert!(started.elapsed() >= world_store::postgres::EPISODE_WAIT.mul_f64(0.9));
    // The refusal left the node's hold connections usable.
    drop(nodes[1].hold_episode("ep-other").unwrap());
}

#[test]
fn the_embedded_engine_needs_no_hold_beyond_its_process() {
    let embedded = fresh(Engine::Embedded);
    let a = embedded.store.hold_episode("ep").unwrap();
    let b = embedded.store.hold_episode("ep").unwrap();
    assert_eq!(format!("{a:?} {b:?}"), "EpisodeHold(empty) EpisodeHold(empty)");
}

#[test]
fn a_node_lapsing_while_others_run_has_even_its_finished_calls_intents_resolved_by_their_sweep() {
    let (url, nodes, f) = three_nodes();
    // The running nodes' first sweep passes first: this lapse is one they meet later.
    std::thread::sleep(world_store::postgres::SWEEP_INTERVAL + std::time::Duration::from_secs(2));
    let (doomed, _) = PgStore::open(&url, 1, Default::default()).unwrap();
    let finished = task("committed-before-its-outcome");
    begin(&doomed, &finished);
    doomed.call(Op::RecordIntent(intent(&finished, 0, "Workspace.Write", 10, b"w"))).unwrap();
    doomed.call(Op::CommitInvocation(invocation(&finished, f, b"out"))).unwrap();
    let mut admin = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
    admin
        .execute("UPDATE nodes SET lease_until = now() - interval '1 second' WHERE node_id = $1", &[&doomed.node()])
        .unwrap();
    let deadline = std::time::Instant::now() + 3 * world_store::postgres::SWEEP_INTERVAL;
    let outcome = loop {
        let journal = nodes[0].snapshot().unwrap().journal_of(&finished.invocation_id()).unwrap();
        if let Some(outcome) = &journal[0].outcome {
            break outcome.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no sweep resolved the lapsed node's intent");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(outcome.status, OutcomeStatus::Indeterminate);
    let task = nodes[0].snapshot().unwrap().task(&finished).unwrap().unwrap();
    assert_eq!(task.state, TaskState::Committed, "a finished call stays as it finished");
}

/// Whether inserting A2A task `task_id` of episode ep1 from `probe` waits on
/// a lock (another transaction wrote that row and holds it), tried until
/// `deadline`; the insert is always rolled back.
fn task_row_is_locked(probe: &mut ::postgres::Client, task_id: &str, deadline: std::time::Instant) -> bool {
    let insert = format!(
        "INSERT INTO tasks (surface, episode, task_id, state, node, task)
         VALUES ('a2a', 'ep1', '{task_id}', 'started', 'probe', '\\x00')"
    );
    loop {
        probe.batch_execute("BEGIN; SET LOCAL lock_timeout = '100ms'").unwrap();
        let outcome = probe.batch_execute(&insert);
        probe.batch_execute("ROLLBACK").unwrap();
        match outcome {
            Err(e) if e.code() == Some(&::postgres::error::SqlState::LOCK_NOT_AVAILABLE) => return true,
            _ if std::time::Instant::now() > deadline => return false,
            _ => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
}
