//! Registries `worldd publish` would refuse, written through the store's own
//! API (`world_store::Store::open` + `Op::PublishRegistry`) while no daemon
//! holds the store: the only way to put such a registry in front of the
//! surfaces without editing the daemon.

use serde_json::{Value, json};
use std::path::Path;
use world_store::{NewObject, Op, Reads, Ref, RegistryPublish, Store, WorldStore, canonical};

const REGISTRY: &str = "world/transition-registry/v1";

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// Replaces the registry head with an object holding `payload` (any bytes).
pub fn publish_raw(db: &Path, payload: Vec<u8>, entries: Vec<(String, Ref)>) {
    let (store, _) = Store::open(db, now()).expect("open the stopped daemon's store");
    let expected = store.snapshot().unwrap().head(REGISTRY).unwrap();
    let object = NewObject::derived(REGISTRY, "surface-tests", payload);
    let head = object.hash;
    let p = RegistryPublish { name: REGISTRY.into(), expected, head, objects: vec![object], entries };
    store.call(Op::PublishRegistry(p)).expect("publish the registry");
}

/// The current registry payload as JSON.
pub fn current(db: &Path) -> Value {
    let (store, _) = Store::open(db, now()).expect("open the stopped daemon's store");
    let snap = store.snapshot().unwrap();
    let head = snap.head(REGISTRY).unwrap().expect("a registry head");
    serde_json::from_slice(&snap.payload(&head).unwrap().unwrap()).unwrap()
}

/// Adds a copy of descriptor `from` under `id` with `access` (no id check:
/// this is how a too-long name gets into a registry).
pub fn add_descriptor(db: &Path, from: &str, id: &str, access: (&str, &str, u64)) {
    add_descriptor_with(db, from, id, access, |_| {});
}

/// Like `add_descriptor`, with `edit` applied to the copy (e.g. a schema
/// `worldd publish` would refuse).
pub fn add_descriptor_with(db: &Path, from: &str, id: &str, access: (&str, &str, u64), edit: impl FnOnce(&mut Value)) {
    let mut reg = current(db);
    let transitions = reg["transitions"].as_array_mut().unwrap();
    let mut d = transitions.iter().find(|d| d["id"] == from).expect("descriptor to copy").clone();
    d["id"] = json!(id);
    d["access"] = json!({"effect": access.0, "scope": access.1, "cost": access.2});
    edit(&mut d);
    transitions.push(d);
    transitions.sort_by(|a, b| a["id"].as_str().unwrap().cmp(b["id"].as_str().unwrap()));
    let entries = transitions
        .iter()
        .map(|d| (d["id"].as_str().unwrap().to_string(), Ref::parse(d["transitionFn"].as_str().unwrap()).unwrap()))
        .collect();
    reg["revision"] = json!(reg["revision"].as_u64().unwrap() + 1);
    publish_raw(db, canonical::to_vec(&reg), entries);
}
