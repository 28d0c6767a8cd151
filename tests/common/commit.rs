//! The REST body of an honest genesis commit, as a client builds it (the
//! shape of `POST /v1/commit`), for the suites that start from an empty store.

use base64::Engine as _;
use serde_json::{Value, json};
use world_store::{NewObject, Ref, RestCommit, canonical};

/// Genesis by `by`: a `world/genesis/v1` goal object, entry 0 and world 0,
/// with every hash derived the way the daemon checks it.
pub fn genesis_body(by: &str) -> Value {
    let goal =
        NewObject::derived("world/genesis/v1", by, canonical::to_vec(&json!({"world": "genesis", "createdBy": by})));
    let c = RestCommit::genesis(goal, Ref::of(b"genesis"), Ref::of(b"genesis"), 1, by);
    let goal = &c.objects[0];
    json!({
        "observedHead": "",
        "objects": [{"hash": goal.hash.to_string(), "interfaceHash": goal.interface_hash.to_string(),
            "semanticId": goal.semantic_id, "provenance": goal.provenance,
            "payload": base64::engine::general_purpose::STANDARD.encode(&goal.payload)}],
        "nextWorld": {"ref": c.next_world.world_ref.to_string(), "revision": 0,
            "stateRoot": c.next_world.state_root.to_string(), "logHead": c.next_world.log_head.to_string()},
        "entry": {"header": serde_json::to_value(&c.entry.header).unwrap(),
            "entryHash": c.entry.entry_hash.to_string(), "transitionRef": c.entry.transition_ref.to_string()},
    })
}
