//! Honest commits, and stores prepared through the store API before a daemon starts.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use std::path::Path;
use world_store::canonical::{entry_hash, world_ref};
use world_store::{
    EntryHeader, LogEntry, NewObject, Op, Ref, RegistryPublish, RestCommit, Session, Store, World, WorldStore,
    canonical,
};

pub const SEMANTIC_ID: &str = "blackbox/record/v1";
pub const WRITTEN_BY: &str = "blackbox";

pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// One commit: the body to send, and what it should produce.
#[derive(Clone, Debug)]
pub struct Step {
    pub body: Value,
    pub object: NewObject,
    pub entry: LogEntry,
    pub world: World,
}

impl Step {
    pub fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.body).unwrap()
    }

    /// The same commit under a `rest:` invocation id.
    pub fn with_id(mut self, id: &str) -> Step {
        self.body["invocationId"] = json!(id);
        self
    }

    /// The digest the daemon keys a `rest:` receipt by: sha256 of the body's canonical JSON.
    pub fn digest(&self) -> Ref {
        Ref::of(&canonical::to_vec(&self.body))
    }

    /// The commit as the store API takes it.
    pub fn rest_commit(&self) -> RestCommit {
        RestCommit {
            invocation_id: self.body.get("invocationId").and_then(|v| v.as_str()).map(String::from),
            request_digest: self.digest(),
            observed_head: self.body["observedHead"].as_str().filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()),
            objects: vec![self.object.clone()],
            next_world: self.world.clone(),
            entry: self.entry.clone(),
            charge: None,
        }
    }
}

/// The genesis commit (entry 0, `observedHead` empty).
pub fn genesis(label: &str) -> Step {
    step(None, label, label.as_bytes().to_vec())
}

/// The commit after `prev`.
pub fn next(prev: &World, label: &str) -> Step {
    step(Some(prev), label, label.as_bytes().to_vec())
}

/// A commit whose one object carries `payload`.
pub fn step(prev: Option<&World>, label: &str, payload: Vec<u8>) -> Step {
    step_by(prev, label, NewObject::derived(SEMANTIC_ID, "blackbox test", payload), WRITTEN_BY)
}

/// An honest commit of `object`, its entry written by `written_by`.
pub fn step_by(prev: Option<&World>, label: &str, object: NewObject, written_by: &str) -> Step {
    let index = prev.map(|w| w.revision + 1).unwrap_or(0);
    let header = EntryHeader {
        entry_index: index,
        semantics_epoch: 1,
        transition_fn: Ref::of(b"blackbox transition"),
        interpreter: Ref::of(b"blackbox interpreter"),
        prev_entry_hash: prev.map(|w| w.log_head).unwrap_or(Ref::of(b"")),
        written_by: written_by.to_string(),
    };
    let transition_ref = object.hash;
    let hash = entry_hash(&header, &transition_ref);
    let entry = LogEntry { header, entry_hash: hash, transition_ref };
    let state_root = Ref::of(format!("state after {label}").as_bytes());
    let world = World { world_ref: world_ref(index, &state_root, &hash), revision: index, state_root, log_head: hash };
    let body = json!({
        "observedHead": prev.map(|w| w.world_ref.to_string()).unwrap_or_default(),
        "objects": [{
            "hash": object.hash.to_string(),
            "interfaceHash": object.interface_hash.to_string(),
            "semanticId": object.semantic_id,
            "provenance": object.provenance,
            "payload": BASE64.encode(&object.payload),
        }],
        "nextWorld": world,
        "entry": entry,
    });
    Step { body, object, entry, world }
}

/// Opens the (closed) store for writing, runs `f`, and closes it again.
pub fn with_store<T>(db: &Path, f: impl FnOnce(&Store) -> T) -> T {
    let (store, _) = Store::open(db, now()).expect("open the store through the store API");
    let out = f(&store);
    drop(store);
    out
}

/// Commits `n` chained worlds in one group commit; returns them in order.
pub fn commit_chain(store: &Store, n: usize) -> Vec<World> {
    let mut steps = Vec::with_capacity(n);
    let mut prev: Option<World> = None;
    for i in 0..n {
        let s = step(prev.as_ref(), &format!("chain {i}"), format!("chain payload {i}").into_bytes());
        prev = Some(s.world.clone());
        steps.push(s);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    for s in &steps {
        let tx = tx.clone();
        store.submit(Op::CommitWorld(s.rest_commit()), Box::new(move |r| tx.send(r).unwrap()));
    }
    for _ in 0..n {
        rx.recv().unwrap().expect("chain commit");
    }
    steps.into_iter().map(|s| s.world).collect()
}

/// Writes a session row for `token` directly (how an expired session is made without waiting).
pub fn put_session(store: &Store, token: &str, created_at: u64, expires_at: u64) {
    let session = Session {
        episode: "bb".into(),
        grants: vec![
            world_store::Grant::new("world.apply", "world", 1),
            world_store::Grant::new("World.Commit", "log", 1000),
        ],
        created_at,
        expires_at,
    };
    store.call(Op::MintSession { credential_id: Ref::of(token.as_bytes()), session }).expect("mint via the store");
}

/// Publishes a registry head naming a fresh object; returns the head.
pub fn publish_registry(store: &Store, name: &str) -> Ref {
    let object = NewObject::derived("blackbox/registry/v1", "blackbox test", format!("registry {name}").into_bytes());
    let head = object.hash;
    let p = RegistryPublish { name: name.into(), expected: None, head, objects: vec![object], entries: vec![] };
    store.call(Op::PublishRegistry(p)).expect("publish");
    head
}

/// A token nobody minted.
pub fn random_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    hex::encode(b)
}
