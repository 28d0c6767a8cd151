//! `worldd publish`: what it refuses before anything is written.

use crate::harness::*;

fn manifest(dir: &std::path::Path, input_schema: serde_json::Value) -> std::path::PathBuf {
    let m = serde_json::json!([{"id": "t.typed", "title": "T", "description": "", "runtime": {"builtin": {"name": "tools.echo"}},
        "inputSchema": input_schema, "outputSchema": {"type": "object"},
        "access": {"effect": "world.apply", "scope": "world", "cost": 1}, "declaredEffects": []}]);
    let path = dir.join("manifest.json");
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
    path
}

#[test]
fn publish_refuses_an_input_schema_whose_type_is_not_object_and_writes_nothing() {
    let store = TempStore::new();
    let _daemon = Daemon::start(&store.db);
    let db = store.db.to_str().unwrap();
    let bad = manifest(store.dir.path(), serde_json::json!({"type": "string"}));
    let o = worldd(&["publish", "--db", db, "--manifest", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("inputSchema.type must be \"object\""), "{}", stderr(&o));
    let good = manifest(store.dir.path(), serde_json::json!({"properties": {"a": {"type": "string"}}}));
    let o = worldd(&["publish", "--db", db, "--manifest", good.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("revision 1"), "the refused publish wrote nothing: {}", stdout(&o));
}
