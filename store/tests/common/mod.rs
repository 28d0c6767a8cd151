//! What the store's test suites share: requests built the way the daemon
//! builds them, the verify check, and a fresh store on either engine.
#![allow(dead_code)]

pub mod cluster;

use world_store::verify::{Options, verify};
use world_store::*;

/// The engines a conformance scenario runs on.
#[derive(Clone, Copy, Debug)]
pub enum Engine {
    Embedded,
    Postgres,
}

/// A fresh, empty store (and what keeps it alive).
pub struct Fresh {
    pub store: Box<dyn WorldStore>,
    /// The embedded store's directory.
    pub dir: Option<tempfile::TempDir>,
    /// The PostgreSQL store's URL.
    pub url: Option<String>,
}

pub fn fresh(engine: Engine) -> Fresh {
    match engine {
        Engine::Embedded => {
            let dir = tempfile::tempdir().unwrap();
            let (store, report) = Store::open(&dir.path().join("world.db"), 1).unwrap();
            assert!(report.is_empty());
            Fresh { store: Box::new(store), dir: Some(dir), url: None }
        }
        Engine::Postgres => {
            let url = cluster::fresh_database();
            Fresh { store: Box::new(node(&url)), dir: None, url: Some(url) }
        }
    }
}

/// Another node on the PostgreSQL store at `url`.
pub fn node(url: &str) -> world_store::postgres::PgStore {
    let (store, report) = world_store::postgres::PgStore::open(url, 1, Default::default()).unwrap();
    assert!(report.is_empty(), "{report:?}");
    store
}

/// Both stores hold the same world: the same log, head and worlds, byte for byte.
pub fn assert_same_world(a: &dyn WorldStore, b: &dyn WorldStore) {
    let (a, b) = (a.snapshot().unwrap(), b.snapshot().unwrap());
    assert_eq!(a.log_len().unwrap(), b.log_len().unwrap());
    assert_eq!(a.log_range(0, PAGE_MAX).unwrap(), b.log_range(0, PAGE_MAX).unwrap());
    assert_eq!(a.head_world().unwrap(), b.head_world().unwrap());
    assert_eq!(a.heads().unwrap(), b.heads().unwrap());
}

/// Declares scenarios, each run as two tests: `NAME::embedded` and
/// `NAME::postgres`; the verifier then checks the store, and the PostgreSQL
/// one must hold the same world, byte for byte, as the same scenario built on
/// a fresh embedded store.
#[macro_export]
macro_rules! on_both_engines {
    ($($(#[$meta:meta])* fn $name:ident($store:ident) $body:block)*) => {$(
        $(#[$meta])*
        mod $name {
            use super::*;

            fn scenario($store: &dyn WorldStore) $body

            #[test]
            fn embedded() {
                let embedded = fresh(Engine::Embedded);
                scenario(embedded.store.as_ref());
                assert_verifies(embedded.store.as_ref());
            }

            #[test]
            fn postgres() {
                let postgres = fresh(Engine::Postgres);
                scenario(postgres.store.as_ref());
                assert_verifies(postgres.store.as_ref());
                let embedded = fresh(Engine::Embedded);
                scenario(embedded.store.as_ref());
                assert_same_world(postgres.store.as_ref(), embedded.store.as_ref());
            }
        }
    )*};
}

/// A REST genesis commit built the way a client must build it.
pub fn genesis() -> RestCommit {
    let goal = NewObject::derived("world/demo/genesis-goal", "test", b"{\"goal\":\"demo\"}".to_vec());
    RestCommit::genesis(goal, Ref::of(b"fn"), Ref::of(b"interp"), 1, "test")
}

pub fn assert_verifies(store: &dyn WorldStore) {
    let report = verify(&store.snapshot().unwrap(), &Options::default());
    assert!(report.is_clean(), "{:#?}", report.faults);
}

/// Each committed call reads back: its output's bytes, its task row
/// committed as it was answered, and the entry it names.
pub fn assert_reads_back(store: &dyn WorldStore, committed: &[(TaskKey, Vec<u8>, Committed)]) {
    let snap = store.snapshot().unwrap();
    for (key, output, c) in committed {
        assert_eq!(snap.payload(&c.output_ref).unwrap().as_deref(), Some(&output[..]), "{key:?}");
        let row = snap.task(key).unwrap();
        assert_eq!(row.as_ref().map(|t| t.state), Some(TaskState::Committed), "{key:?}");
        assert_eq!(row.and_then(|t| t.committed), Some(c.clone()), "{key:?}");
        assert_eq!(snap.log_entry(c.entry_index).unwrap().map(|e| e.entry_hash), Some(c.entry_hash));
    }
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
        approval: None,
        credential: None,
    }
}

/// An `ok` outcome of effect `ordinal` of `key` carrying `record` (no result, at 2).
pub fn outcome(key: &TaskKey, ordinal: u32, record: NewObject) -> OutcomeRequest {
    OutcomeRequest { task: key.clone(), ordinal, status: OutcomeStatus::Ok, record, result: None, at: 2 }
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

pub fn publish_echo(store: &dyn WorldStore) -> Ref {
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
        effects: vec![],
        at: 1,
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
pub fn begin(store: &dyn WorldStore, key: &TaskKey) {
    store.call(Op::begin_task(key.clone(), Ref::of(b"d"), 1)).unwrap();
}

/// Starts task `key` and commits an echo invocation of it returning `output`.
pub fn begin_and_commit(store: &dyn WorldStore, key: &TaskKey, f: Ref, output: &[u8]) -> Committed {
    begin(store, key);
    match store.call(Op::CommitInvocation(invocation(key, f, output))).unwrap() {
        Reply::Committed(c) => c,
        other => panic!("{key:?} was not committed: {other:?}"),
    }
}

/// The request asking for approval `id` of `digest` by `credential` in
/// `episode` (a `Workspace.Write` of cost 1 on `worktree`, anyone may
/// decide), asked at `requested_at` and pending until `expires_at`, with the
/// object it shows.
pub fn ask_approval(
    id: &str,
    episode: &str,
    credential: Ref,
    digest: Ref,
    (requested_at, expires_at): (u64, u64),
) -> Op {
    let shown = NewObject::derived("world/approval-request/v1", "host/approvals", id.as_bytes().to_vec());
    let approval = ApprovalRow {
        episode: episode.into(),
        credential,
        digest,
        transition: "tool".into(),
        effect: "Workspace.Write".into(),
        scope: "worktree".into(),
        cost: 1,
        approver: Approver::Anyone,
        shown: shown.hash,
        requested_at,
        expires_at,
        state: ApprovalState::Pending,
        for_session: false,
        decision: None,
        decided_at: 0,
        uses: 0,
        closed: false,
        task: None,
    };
    Op::AskApproval { id: id.into(), approval, shown }
}
