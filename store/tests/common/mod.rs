//! What the store's test suites share: requests built the way the daemon
//! builds them, and the verify check.
#![allow(dead_code)]

use world_store::verify::{Options, verify};
use world_store::*;

/// A REST genesis commit built the way a client must build it.
pub fn genesis() -> RestCommit {
    let goal = NewObject::derived("world/demo/genesis-goal", "test", b"{\"goal\":\"demo\"}".to_vec());
    RestCommit::genesis(goal, Ref::of(b"fn"), Ref::of(b"interp"), 1, "test")
}

pub fn assert_verifies(store: &Store) {
    let report = verify(&store.snapshot().unwrap(), &Options::default());
    assert!(report.is_clean(), "{:#?}", report.faults);
}

pub fn intent(key: &TaskKey, ordinal: u32, effect: &str, grant_budget: u64, request: &[u8]) -> IntentRequest {
    IntentRequest {
        task: key.clone(),
        ordinal,
        effect_id: "e1".into(),
        effect: effect.into(),
        scope: "worktree".into(),
        cost: 1,
        grant_budget,
        request: NewObject::derived("world/effect-request/v1", "host/broker", request.to_vec()),
        at: 1,
    }
}

pub fn task(id: &str) -> TaskKey {
    TaskKey { surface: Surface::A2a, episode: "ep1".into(), task_id: id.into() }
}

/// The first publish of a registry holding `tools.echo`; its transitionFn is
/// `entries[0].1`.
pub fn echo_registry() -> RegistryPublish {
    let source = NewObject::derived("world/transition-source/v1", "test", b"echo".to_vec());
    let registry = NewObject::derived("world/transition-registry/v1", "test", b"{\"r\":1}".to_vec());
    let f = source.hash;
    RegistryPublish {
        name: "world/transition-registry/v1".into(),
        expected: None,
        head: registry.hash,
        objects: vec![source, registry],
        entries: vec![("tools.echo".into(), f)],
    }
}

pub fn publish_echo(store: &Store) -> Ref {
    let p = echo_registry();
    let f = p.entries[0].1;
    assert_eq!(store.call(Op::PublishRegistry(p.clone())).unwrap(), Reply::Published(PublishOutcome::Moved));
    assert_eq!(store.call(Op::PublishRegistry(p)).unwrap(), Reply::Published(PublishOutcome::Unchanged));
    f
}

pub fn invocation(key: &TaskKey, f: Ref, output: &[u8]) -> InvocationCommit {
    let out = NewObject::derived("world/invocation-output/v1", "coordinator:a2a", output.to_vec());
    let record = NewObject::derived("world/invocation-record/v1", "coordinator:a2a", [b"rec:", output].concat());
    InvocationCommit {
        task: key.clone(),
        registry: "world/transition-registry/v1".into(),
        transition_id: "tools.echo".into(),
        transition_fn: f,
        interpreter: f,
        semantics_epoch: 1,
        written_by: "coordinator:a2a".into(),
        transition_ref: record.hash,
        state_root: out.hash,
        objects: vec![out, record],
    }
}

/// A store at `path` holding a genesis world and the echo registry, and
/// `tools.echo`'s transitionFn.
pub fn echo_store(path: &std::path::Path, opts: StoreOptions) -> (Store, Ref) {
    let (store, _) = Store::open_with(path, 1, opts).unwrap();
    store.call(Op::CommitWorld(genesis())).unwrap();
    let f = publish_echo(&store);
    (store, f)
}

/// Starts task `key` (digest `d`, at 1).
pub fn begin(store: &Store, key: &TaskKey) {
    store.call(Op::BeginTask { task: key.clone(), request_digest: Ref::of(b"d"), at: 1 }).unwrap();
}

/// Starts task `key` and commits an echo invocation of it returning `output`.
pub fn begin_and_commit(store: &Store, key: &TaskKey, f: Ref, output: &[u8]) -> Committed {
    begin(store, key);
    match store.call(Op::CommitInvocation(invocation(key, f, output))).unwrap() {
        Reply::Committed(c) => c,
        other => panic!("{key:?} was not committed: {other:?}"),
    }
}
