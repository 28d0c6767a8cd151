//! Provenance: `worldd why` from an effect record to its entry and world,
//! every hash recomputed; what it says when a link is broken or nothing is
//! found; and export → import → verify through the command line.

use crate::fixture;
use crate::harness::*;
use serde_json::{Value, json};
use world_store::Ref;

/// A daemon with a genesis world, the builtin tools, a worktree for episode
/// `bb` holding hello.txt, and a session that may read it.
struct World {
    store: TempStore,
    daemon: Daemon,
    token: String,
}

fn world() -> World {
    let store = TempStore::new();
    let root = store.dir.path().join("ws");
    std::fs::create_dir_all(root.join("bb")).unwrap();
    std::fs::write(root.join("bb/hello.txt"), "hello\n").unwrap();
    let daemon = Daemon::start_with(&store.db, &["--workspace-root", root.to_str().unwrap()]);
    let db = store.db.to_str().unwrap();
    let o = worldd(&["publish", "--db", db, "--builtin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = worldd(&[
        "session",
        "mint",
        "--db",
        db,
        "--episode",
        "bb",
        "--grant",
        "Workspace.Read=worktree:5",
        "--grant",
        "World.Commit=log:1",
        "--yes",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let token = stdout(&o).trim().to_string();
    let g = fixture::genesis("provenance");
    assert_eq!(daemon.commit(&g.bytes(), Some(&token)).status, 200);
    World { store, daemon, token }
}

/// Reads hello.txt over A2A; returns the effect record's ref.
fn read_hello(w: &World, task: &str) -> Ref {
    read_hello_as(w, &w.token, task)
}

fn read_hello_as(w: &World, token: &str, task: &str) -> Ref {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {"id": task,
        "metadata": {"skill_id": "ailang-read"},
        "message": {"role": "user", "parts": [{"type": "data", "data": {"path": "hello.txt"}}]}}});
    let auth = format!("Bearer {token}");
    let r = send(
        &w.daemon.agent(),
        "POST",
        &w.daemon.url("/a2a/"),
        &[("Authorization", &auth), ("Content-Type", "application/json")],
        Some(&serde_json::to_vec(&body).unwrap()),
    );
    let v: Value = r.json();
    let record = &v["result"]["artifacts"][0]["parts"][0]["data"]["world"]["effects"][0]["record"];
    record.as_str().unwrap_or_else(|| panic!("{v}")).parse().unwrap()
}

fn why(w: &World, target: &str, json_out: bool) -> std::process::Output {
    let base = w.daemon.base_url();
    let mut args = vec!["why", target, "--addr", base.as_str()];
    if json_out {
        args.push("--json");
    }
    worldd(&args)
}

#[test]
fn why_walks_from_an_effect_record_to_its_entry_and_world_verifying_every_link() {
    let w = world();
    let record = read_hello(&w, "walk-1");
    let o = why(&w, &record.to_string(), false);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    assert!(out.contains("entry 1 hash recomputes"), "{out}");
    assert!(out.contains("world stateRoot is the invocation output"), "{out}");
    assert!(out.contains("transition ailang-read"), "{out}");
    assert!(out.contains("episode bb, invocation a2a:bb:walk-1"), "{out}");
    assert!(out.contains("effect Workspace.Read/worktree ok: cost 1, budget 5 -> 4"), "{out}");
    assert!(!out.contains('✗'), "{out}");
    assert!(out.lines().last().unwrap().starts_with("all ") && out.contains("link(s) verified"), "{out}");
    let j: Value = serde_json::from_str(&stdout(&why(&w, &record.to_string(), true))).unwrap();
    assert_eq!(j["verified"], true);
    assert_eq!(j["invocation"]["entryIndex"], 1);
    assert_eq!(j["committed"], true);
    for target in ["1", "head"] {
        assert!(why(&w, target, false).status.success(), "why {target}");
    }
}

/// Two sessions of one episode whose grants leave the same budget: each pair
/// of reads is alike to the byte (effect, scope, cost, budget 5 -> 4, request,
/// decision second), yet every effect has a record of its own that walks to
/// exactly its call, and the store verifies.
#[test]
fn alike_effects_through_two_sessions_of_one_episode_each_have_a_record_that_walks_to_its_own_call() {
    let w = world();
    let db = w.store.db.to_str().unwrap();
    let o =
        worldd(&["session", "mint", "--db", db, "--episode", "bb", "--grant", "Workspace.Read=worktree:6", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let second = stdout(&o).trim().to_string();
    let mut records = vec![];
    for pair in 0..3 {
        records.push((format!("x{pair}"), read_hello(&w, &format!("x{pair}"))));
        records.push((format!("y{pair}"), read_hello_as(&w, &second, &format!("y{pair}"))));
    }
    let distinct: std::collections::HashSet<&Ref> = records.iter().map(|(_, r)| r).collect();
    assert_eq!(distinct.len(), records.len(), "two effects share a record: {records:?}");
    for (task, record) in &records {
        let o = why(&w, &record.to_string(), true);
        assert!(o.status.success(), "{task}: {}{}", stdout(&o), stderr(&o));
        let j: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(j["invocation"]["invocationId"], json!(format!("a2a:bb:{task}")), "{j}");
        let journal = j["links"].as_array().unwrap().iter().any(|l| {
            l["ok"] == true
                && l["check"].as_str().unwrap().contains(&format!("is the effect it names (a2a:bb:{task}#0)"))
        });
        assert!(journal, "{task}: the journal item was not checked: {j}");
    }
    let o = worldd(&["verify", "--db", db]);
    assert!(o.status.success() && stdout(&o).ends_with("; 0 fault(s)\n"), "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn why_exits_2_for_a_ref_nothing_in_the_store_names() {
    let w = world();
    let o = why(&w, &Ref::of(b"nothing").to_string(), false);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("not an object, entry hash or world"), "{}", stderr(&o));
}

#[test]
fn why_exits_1_and_names_the_link_when_a_stored_payload_was_altered() {
    let mut w = world();
    let record = read_hello(&w, "walk-2");
    assert!(w.daemon.signal_and_wait("TERM").success());
    {
        let seq = {
            let store = world_store::ReadOnlyStore::open(&w.store.db).unwrap();
            world_store::Reads::snapshot(&store).unwrap().object_seq(&record).unwrap().expect("the record is stored")
        };
        let at = {
            use redb::ReadableDatabase;
            let db = redb::Database::open(&w.store.db).unwrap();
            let txn = db.begin_read().unwrap();
            let raw =
                txn.open_table(world_store::tables::OBJECT_ROWS).unwrap().get(seq).unwrap().unwrap().value().to_vec();
            world_store::rows::decode::<world_store::model::ObjectRow>("object_rows", &seq, &raw).unwrap().at
        };
        let path = world_store::media::payloads_path(&w.store.db);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at as usize + 1] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
    }
    w.daemon = Daemon::start_with(&w.store.db, &[]);
    let o = why(&w, &record.to_string(), false);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", stderr(&o));
    assert!(out.contains(&format!("✗ object {record} rehashes")), "{out}");
    assert!(out.contains("FAILED"), "{out}");
}

#[test]
fn an_export_beside_a_live_daemon_imports_into_a_store_that_verifies_clean() {
    let mut w = world();
    read_hello(&w, "export-1");
    let (db, dir) = (w.store.db.to_str().unwrap().to_owned(), w.store.dir.path().to_owned());
    let (db, dir) = (db.as_str(), dir.as_path());
    let export = dir.join("world.export");
    let o = worldd(&["export", "--db", db, "--out", export.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("written by the daemon running on this store"), "{}", stderr(&o));
    let live_records = stdout(&o).split_whitespace().nth(1).unwrap().to_owned();
    // A relative --out is the caller's, not the daemon's working directory.
    let o = std::process::Command::new(WORLDD)
        .current_dir(dir)
        .args(["export", "--db", db, "--out", "relative.export"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("relative.export").is_file() && !dir.join("relative.export.partial").exists());
    // The daemon itself refuses a relative path (its directory is not the caller's).
    let socket = w.store.socket();
    let answer = admin_line(&socket, r#"{"op":"export","out":"elsewhere.export","with_sessions":false}"#);
    assert!(answer.contains("an export path must be absolute"), "{answer}");
    assert!(admin_line(&socket, r#"{"op":"export","out":7}"#).contains("bad admin request"));
    let o = worldd(&["verify", "--db", export.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
    let copy = dir.join("copy.db");
    let o = worldd(&["import", "--db", copy.to_str().unwrap(), "--in", export.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = worldd(&["verify", "--db", copy.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stdout(&o));
    let report: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["faultCount"], 0);
    assert_eq!(report["counts"]["logEntries"], 2);
    let bytes = std::fs::read(&export).unwrap();
    let truncated = dir.join("truncated.export");
    std::fs::write(&truncated, &bytes[..bytes.len() - 10]).unwrap();
    let o = worldd(&["verify", "--db", truncated.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("truncated"), "{}", stdout(&o));
    let again = dir.join("again.db");
    let o = worldd(&["import", "--db", again.to_str().unwrap(), "--in", truncated.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("byte offset"), "{}", stderr(&o));
    // With the daemon stopped, the file itself: the same records.
    assert!(w.daemon.signal_and_wait("TERM").success());
    let offline = dir.join("offline.export");
    let o = worldd(&["export", "--db", db, "--out", offline.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("written by the daemon"), "{}", stderr(&o));
    assert_eq!(stdout(&o).split_whitespace().nth(1), Some(live_records.as_str()));
    assert!(!again.exists(), "nothing half-imported remains");
}

/// One raw request line on the admin socket, and the answer line.
fn admin_line(socket: &std::path::Path, line: &str) -> String {
    use std::io::{BufRead, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    stream.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut answer = String::new();
    std::io::BufReader::new(stream).read_line(&mut answer).unwrap();
    answer
}

/// What a REST commit could write before the daemon's names were reserved,
/// written here through the store itself: an entry by "the coordinator"
/// carrying an invocation record of a call that never was. `why` fails the
/// link to its task, and `verify` reports both as forged.
#[test]
fn an_entry_posing_as_the_coordinator_that_no_task_committed_fails_why_and_verify() {
    use world_store::{NewObject, Op, WorldStore};
    let store = TempStore::new();
    let payload = br#"{"invocationId":"a2a:bb:never","effects":[]}"#.to_vec();
    let record = NewObject::derived("world/invocation-record/v2", "coordinator:a2a", payload);
    fixture::with_store(&store.db, |s| {
        let g = fixture::genesis("g");
        s.call(Op::CommitWorld(g.rest_commit())).unwrap();
        let mut posing = fixture::step_by(Some(&g.world), "posing", record.clone(), "coordinator:a2a").rest_commit();
        // A coordinator's entry names objects as its transitionFn and interpreter.
        let named = [&b"blackbox transition"[..], b"blackbox interpreter"];
        posing.objects.extend(named.map(|p| NewObject::derived("demo/fn", "me", p.to_vec())));
        s.call(Op::CommitWorld(posing)).unwrap();
    });
    let d = Daemon::start(&store.db);
    let o = worldd(&["why", "1", "--addr", &d.base_url()]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("task a2a:bb:never committed entry 1 (no such task)"), "{}", stdout(&o));
    let o = worldd(&["verify", "--db", store.db.to_str().unwrap(), "--json"]);
    let report: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    let mut forged: Vec<&str> = report["faults"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "forged")
        .map(|f| f["key"].as_str().unwrap())
        .collect();
    forged.sort();
    let record = record.hash.to_string();
    let mut expected = vec!["1", record.as_str()];
    expected.sort();
    assert_eq!(forged, expected, "{report}");
}
