//! `POST /a2a/`: every row of the seed's A2A error table, and the success
//! shape, byte for byte. (What the coordinator suite already proves in depth —
//! idempotent resends across crashes, EffectsUnrecorded from a republish, the
//! denial labels — is only checked here for its wire form, or not at all.)

use crate::harness::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn lab() -> (Lab, String) {
    let lab = Lab::new(LabOptions { episodes: &["ep1"], ..Default::default() });
    std::fs::write(lab.worktree("ep1").join("hello.txt"), "hello from World\n").unwrap();
    let token = lab.mint("ep1", &["world.apply=world:100", "Workspace.Read=worktree:100"]);
    (lab, token)
}

fn post(lab: &Lab, token: &str, body: &Value) -> Reply {
    lab.a2a_raw(Some(token), &serde_json::to_vec(body).unwrap())
}

/// Asserts an `/a2a/` error reply byte for byte (HTTP 200, JSON).
fn assert_a2a_error(r: &Reply, id: &str, code: i64, message: &str) {
    assert_json_reply(r, 200, &a2a_error(id, code, message));
}

// ---- session denial ----

#[test]
fn a2a_session_denials_are_json_rpc_errors_in_http_200_whatever_the_body() {
    let (lab, token) = lab();
    let expired = lab.expired_token("ep1");
    let good = serde_json::to_vec(&send_body("deny-1", "tools.echo", &json!({}), None)).unwrap();
    let log_len = lab.log_len();
    let absent = "session credential is absent: send Authorization: Bearer <session-credential>";
    let malformed = "malformed Authorization header: expected Bearer <64-hex-credential>";
    for body in [good.as_slice(), b"not json", b"", br#"{"jsonrpc":"1.0","id":5,"method":"nope"}"#] {
        assert_a2a_error(&lab.a2a_raw(None, body), "null", -32001, absent);
        let h = [("Content-Type", "application/json"), ("Authorization", "")];
        assert_a2a_error(&lab.post("/a2a/", &h, body), "null", -32001, absent);
        for bad in [format!("Bearer {}", &token[..10]), format!("Basic {token}"), token.clone()] {
            let h = [("Content-Type", "application/json"), ("Authorization", bad.as_str())];
            assert_a2a_error(&lab.post("/a2a/", &h, body), "null", -32600, malformed);
        }
        assert_a2a_error(&lab.a2a_raw(Some(&"cd".repeat(32)), body), "null", -32001, "unknown session credential");
        assert_a2a_error(&lab.a2a_raw(Some(&expired), body), "null", -32001, "session credential has expired");
    }
    // Go escaping of the denial text, exactly as protocols.md §2.5 shows it.
    assert!(lab.a2a_raw(None, &good).text().contains(r"Bearer \u003csession-credential\u003e"));
    assert_eq!(lab.log_len(), log_len);
    assert!(lab.a2a_raw(Some(&token), &good).json().get("result").is_some());
}

// ---- envelopes, methods, params ----

#[test]
fn bad_envelopes_are_32600_invalid_json_rpc_request() {
    let (lab, token) = lab();
    let invalid = "invalid JSON-RPC request";
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not json".to_vec(), "null"),
        (b"".to_vec(), "null"),
        (b"[]".to_vec(), "null"),
        (br#"[{"jsonrpc":"2.0","id":1,"method":"tasks/send"}]"#.to_vec(), "null"),
        (b"1".to_vec(), "null"),
        (br#""tasks/send""#.to_vec(), "null"),
        (b"null".to_vec(), "null"),
        (br#"{"id":5,"method":"tasks/send","params":{}}"#.to_vec(), "5"),
        (br#"{"jsonrpc":"1.0","id":5,"method":"tasks/send","params":{}}"#.to_vec(), "5"),
        (br#"{"jsonrpc":2.0,"id":"a","method":"tasks/send","params":{}}"#.to_vec(), "\"a\""),
        (br#"{"jsonrpc":"2.0","id":{},"method":"tasks/send","params":{}}"#.to_vec(), "null"),
        (br#"{"jsonrpc":"2.0","id":[1],"method":"tasks/send","params":{}}"#.to_vec(), "null"),
        (br#"{"jsonrpc":"2.0","id":true,"method":"tasks/send","params":{}}"#.to_vec(), "null"),
        (br#"{"jsonrpc":"2.0","id":6}"#.to_vec(), "6"),
        (br#"{"jsonrpc":"2.0","id":6,"method":5}"#.to_vec(), "6"),
        (br#"{"jsonrpc":"2.0","id":6,"method":"tasks/send","params":{}"#.to_vec(), "null"),
    ];
    for (body, id) in cases {
        let r = lab.a2a_raw(Some(&token), &body);
        assert_a2a_error(&r, id, -32600, invalid);
    }
    // Over 1 MiB: refused unread.
    let mut big = serde_json::to_vec(&send_body("big-1", "tools.echo", &json!({}), None)).unwrap();
    big.resize((1 << 20) + 1, b' ');
    assert_a2a_error(&lab.a2a_raw(Some(&token), &big), "null", -32600, invalid);
    let mut fits = serde_json::to_vec(&send_body("big-2", "tools.echo", &json!({}), None)).unwrap();
    fits.resize(1 << 20, b' ');
    assert!(lab.a2a_raw(Some(&token), &fits).json().get("result").is_some());
}

#[test]
fn methods_other_than_the_served_ones_are_32601_method_not_found() {
    let (lab, token) = lab();
    // 0.3 and 1.0 methods are answered (a2a_spec.rs); these are no method at all.
    for m in ["tasks/sendSubscribe", "tasks/list", "cancelTask", "initialize", "", "x"] {
        let r = post(&lab, &token, &json!({"jsonrpc": "2.0", "id": 3, "method": m, "params": {}}));
        assert_a2a_error(&r, "3", -32601, "method not found");
    }
}

#[test]
fn bad_params_are_32602_invalid_params_and_journal_nothing() {
    let (lab, token) = lab();
    let log_len = lab.log_len();
    let journal = lab.journal_counts();
    let part = json!({"type": "data", "data": {}});
    let msg = |parts: Value| json!({"role": "user", "parts": parts});
    let meta = json!({"skill_id": "tools.echo"});
    let p = |id: Value, metadata: Value, message: Value| json!({"id": id, "metadata": metadata, "message": message});
    let cases = vec![
        ("no params", Value::Null),
        ("params an array", json!([1])),
        ("no task id", json!({"metadata": meta, "message": msg(json!([part]))})),
        ("task id a number", p(json!(7), meta.clone(), msg(json!([part])))),
        ("empty task id", p(json!(""), meta.clone(), msg(json!([part])))),
        ("task id 129 chars", p(json!("a".repeat(129)), meta.clone(), msg(json!([part])))),
        ("task id with a space", p(json!("a b"), meta.clone(), msg(json!([part])))),
        ("task id with a slash", p(json!("a/b"), meta.clone(), msg(json!([part])))),
        ("task id with a colon", p(json!("a:b"), meta.clone(), msg(json!([part])))),
        ("task id non-ASCII", p(json!("é"), meta.clone(), msg(json!([part])))),
        ("no metadata", json!({"id": "t-1", "message": msg(json!([part]))})),
        ("metadata not an object", p(json!("t-1"), json!("tools.echo"), msg(json!([part])))),
        ("no skill_id", p(json!("t-1"), json!({}), msg(json!([part])))),
        ("skill_id a number", p(json!("t-1"), json!({"skill_id": 1}), msg(json!([part])))),
        ("empty skill_id", p(json!("t-1"), json!({"skill_id": ""}), msg(json!([part])))),
        ("no message", json!({"id": "t-1", "metadata": meta})),
        ("message not an object", p(json!("t-1"), meta.clone(), json!("hi"))),
        ("no parts", p(json!("t-1"), meta.clone(), json!({"role": "user"}))),
        ("empty parts", p(json!("t-1"), meta.clone(), msg(json!([])))),
        ("two parts", p(json!("t-1"), meta.clone(), msg(json!([part, part])))),
        ("a text part", p(json!("t-1"), meta.clone(), msg(json!([{"type": "text", "text": "{}"}])))),
        ("a file part", p(json!("t-1"), meta.clone(), msg(json!([{"type": "file", "file": {}}])))),
        ("an untyped part", p(json!("t-1"), meta.clone(), msg(json!([{"data": {}}])))),
        ("data an array", p(json!("t-1"), meta.clone(), msg(json!([{"type": "data", "data": [1]}])))),
        ("data a string", p(json!("t-1"), meta.clone(), msg(json!([{"type": "data", "data": "x"}])))),
        ("data null", p(json!("t-1"), meta.clone(), msg(json!([{"type": "data", "data": null}])))),
        ("no data", p(json!("t-1"), meta.clone(), msg(json!([{"type": "data"}])))),
        (
            "transition_fn not hex",
            p(json!("t-1"), json!({"skill_id": "tools.echo", "transition_fn": "sha256:xyz"}), msg(json!([part]))),
        ),
        (
            "transition_fn upper hex",
            p(
                json!("t-1"),
                json!({"skill_id": "tools.echo", "transition_fn": format!("sha256:{}", "A".repeat(64))}),
                msg(json!([part])),
            ),
        ),
        (
            "transition_fn short",
            p(
                json!("t-1"),
                json!({"skill_id": "tools.echo", "transition_fn": format!("sha256:{}", "a".repeat(63))}),
                msg(json!([part])),
            ),
        ),
        (
            "transition_fn other prefix",
            p(
                json!("t-1"),
                json!({"skill_id": "tools.echo", "transition_fn": format!("sha512:{}", "a".repeat(64))}),
                msg(json!([part])),
            ),
        ),
        (
            "transition_fn a number",
            p(json!("t-1"), json!({"skill_id": "tools.echo", "transition_fn": 5}), msg(json!([part]))),
        ),
    ];
    for (what, params) in cases {
        let mut body = json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/send"});
        if !params.is_null() {
            body["params"] = params;
        }
        let r = post(&lab, &token, &body);
        let why = assert_a2a_told(&r, "4", -32602, "invalid params");
        assert!(why["parameter"].as_str().is_some() || !why["detail"].is_null(), "{what}: {why}");
    }
    assert_eq!(lab.log_len(), log_len);
    assert_eq!(lab.journal_counts(), journal, "no task row was written");
    // The limits themselves are accepted: 128 characters from the whole alphabet.
    let id = format!("{}-_.Z9", "a".repeat(123));
    assert_eq!(id.len(), 128);
    let v = lab.send(&token, &id, "tools.echo", &json!({}));
    assert_eq!(v["result"]["id"], json!(id), "{v}");
}

#[test]
fn unknown_and_invisible_skills_are_not_authorized_and_a_wrong_pin_is_a_mismatch() {
    let (lab, token) = lab();
    let echo_only = lab.mint("ep1", &["world.apply=world:5"]);
    let other_scope = lab.mint("ep1", &["Workspace.Read=elsewhere:5"]);
    let log_len = lab.log_len();
    let journal = lab.journal_counts();
    let cases = [
        (&token, "no-such-skill"),
        (&token, "tools_decho"), // the MCP name is not a skill id
        (&token, "ailang-write"),
        (&echo_only, "ailang-read"),
        (&other_scope, "ailang-read"),
        (&other_scope, "tools.echo"),
    ];
    for (n, (t, skill)) in cases.iter().enumerate() {
        let r = post(&lab, t, &send_body(&format!("na-{n}"), skill, &json!({"path": "hello.txt"}), None));
        let why = assert_a2a_told(&r, "1", -32602, "not authorized");
        assert_eq!(why["parameter"], "metadata.skill_id", "{why}");
    }
    let zero = format!("sha256:{}", "0".repeat(64));
    let read_fn = lab.transition_fn("ailang-read");
    for pin in [zero.as_str(), read_fn.as_str()] {
        let r = post(&lab, &token, &send_body("pin-1", "tools.echo", &json!({}), Some(pin)));
        let why = assert_a2a_told(&r, "1", -32602, "proposal does not match the registered transition");
        assert_eq!(why["parameter"], "metadata.transition_fn", "{why}");
    }
    assert_eq!((lab.log_len(), lab.journal_counts()), (log_len, journal), "refused before any task row");
    let echo_fn = lab.transition_fn("tools.echo");
    let v = lab.send_pinned(&token, "pin-1", "tools.echo", &json!({}), Some(&echo_fn));
    assert!(v.get("result").is_some(), "the right pin runs: {v}");
}

#[test]
fn a_task_id_in_flight_is_already_used_and_a_committed_one_replays_its_result() {
    let (lab, token) = lab();
    let gate = Gate::new(&lab.root, "fly");
    let m = lab.manifest(
        "gate",
        &[("gate.py", &gate_source(&gate.dir))],
        json!([exec_entry("t.gate", "gate.py", None, None)]),
    );
    lab.publish_ok(&m, false);
    let reused = |r: &Reply| assert_a2a_told(r, "1", -32602, "task id already used in this session");
    let log_len = lab.log_len();
    let first = std::thread::scope(|s| {
        let first = s.spawn(|| post(&lab, &token, &send_body("fly-1", "t.gate", &json!({"k": 1}), None)));
        gate.wait_started();
        // The same call, and a different one, while the first runs.
        let (a, b) = std::thread::scope(|s2| {
            let a = s2.spawn(|| post(&lab, &token, &send_body("fly-1", "t.gate", &json!({"k": 1}), None)));
            let b = s2.spawn(|| post(&lab, &token, &send_body("fly-1", "tools.echo", &json!({}), None)));
            (a.join().unwrap(), b.join().unwrap())
        });
        reused(&a);
        reused(&b);
        // Asked about while it runs: its outcome is not known yet (a 0.3
        // method, so the reply says why in `data` too).
        let get = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "fly-1"}});
        let asked = a2a_json(&post(&lab, &token, &get));
        assert_eq!(
            rpc_error(&asked),
            (-32603, "invocation outcome is not confirmed; resend the same task id".to_owned())
        );
        assert_eq!(asked["error"]["data"][0]["metadata"]["taskId"], "fly-1", "{asked}");
        gate.open();
        first.join().unwrap()
    });
    let v = a2a_json(&first);
    assert_eq!(v["result"]["artifacts"][0]["parts"][0]["data"]["gated"], json!({"k": 1}), "{v}");
    assert_eq!(lab.log_len(), log_len + 1, "one run, one entry");
    // Resent once committed: the same reply, byte for byte, and nothing runs.
    gate.reset();
    let again = post(&lab, &token, &send_body("fly-1", "t.gate", &json!({"k": 1}), None));
    assert_eq!(again.body, first.body, "the committed reply (a second run would commit another entry)");
    let other = post(&lab, &token, &send_body("fly-1", "t.gate", &json!({"k": 2}), None));
    reused(&other);
    assert_eq!(lab.log_len(), log_len + 1);
}

// ---- internal failures ----

const NO_PLAN_KEY: &str = "import json, sys\njson.loads(sys.stdin.read())\nprint(json.dumps({\"effects\": [], \"result\": {\"ok\": True}}))\n";
const EXITS: &str = "import sys\nsys.stdin.read()\nsys.stderr.write('boom\\n')\nsys.exit(3)\n";
const ARRAY: &str = "import sys\nsys.stdin.read()\nprint('[1, 2]')\n";

#[test]
fn internal_failures_are_32603_with_the_seed_texts() {
    let lab = Lab::new(LabOptions { episodes: &["ep1"], no_genesis: true, ..Default::default() });
    let m = lab.manifest(
        "bad",
        &[("no_plan.py", NO_PLAN_KEY), ("exits.py", EXITS), ("array.py", ARRAY)],
        json!([
            exec_entry("t.no-plan", "no_plan.py", Some("Workspace.Read"), None),
            exec_entry("t.exits", "exits.py", None, None),
            exec_entry("t.array", "array.py", None, None),
        ]),
    );
    lab.publish_ok(&m, false);
    let grants = ["world.apply=world:100", "Workspace.Read=worktree:100"];
    let token = lab.mint("ep1", &grants);
    let ghost = lab.mint("ghost", &grants);
    let send = |t: &str, task: &str, skill: &str| post(&lab, t, &send_body(task, skill, &json!({"path": "a"}), None));

    // No genesis yet: nothing can commit, and nothing is journaled (the id stays free).
    let no_world = "no world is selected; commit a genesis world first";
    assert_a2a_error(&send(&token, "w-1", "tools.echo"), "1", -32603, no_world);
    assert_a2a_error(&send(&token, "w-2", "ailang-read"), "1", -32603, no_world);
    lab.genesis();
    assert!(a2a_json(&send(&token, "w-1", "tools.echo")).get("result").is_some());

    // R8: an episode without a worktree has no handler for its effects.
    let r8 = "transition declares an effect this daemon has no handler for";
    assert_a2a_error(&send(&ghost, "r8-1", "ailang-read"), "1", -32603, r8);
    assert_a2a_error(&send(&ghost, "r8-1", "ailang-read"), "1", -32603, r8);

    let log_len = lab.log_len();
    let not_committed = "invocation was not committed; send a new task id";
    for (task, skill, message) in [
        ("cc-1", "t.no-plan", "transition does not implement the invocation calling convention"),
        ("ex-1", "t.exits", "transition execution failed"),
        ("nj-1", "t.array", "transition output is not a JSON object"),
    ] {
        assert_a2a_error(&send(&token, task, skill), "1", -32603, message);
        // Known not committed: the resend says so and runs nothing.
        assert_a2a_error(&send(&token, task, skill), "1", -32603, not_committed);
        let line = lab.daemon.wait_stderr(&format!("worldd: a2a refusal: tasks/send a2a:ep1:{task}: "));
        assert!(line.len() > 50, "the cause is logged: {line}");
    }
    assert!(lab.daemon.wait_stderr("a2a:ep1:ex-1").contains("boom"), "the capsule's stderr is in the log line");
    assert_eq!(lab.log_len(), log_len, "nothing committed");
    let (_, intents) = lab.journal_counts();
    assert_eq!(intents, 0, "no effect was journaled");
}

#[test]
fn a_head_that_moved_under_a_pure_run_is_not_committed_and_its_task_id_is_spent() {
    let (lab, token) = lab();
    let gate = Gate::new(&lab.root, "moved");
    let v1 = gate_source(&gate.dir);
    let v2 = format!("{v1}# revision 2\n");
    let entry = json!([exec_entry("t.pure", "gate.py", None, None)]);
    lab.publish_ok(&lab.manifest("v1", &[("gate.py", &v1)], entry.clone()), false);
    let v2_manifest = lab.manifest("v2", &[("gate.py", &v2)], entry);
    let v1_fn = lab.transition_fn("t.pure");
    let log_len = lab.log_len();
    let r = std::thread::scope(|s| {
        let call = s.spawn(|| post(&lab, &token, &send_body("hm-1", "t.pure", &json!({}), None)));
        gate.wait_started();
        lab.publish_ok(&v2_manifest, true);
        gate.open();
        call.join().unwrap()
    });
    assert_a2a_error(&r, "1", -32603, "world head moved during invocation; not committed; send a new task id");
    assert_eq!(lab.log_len(), log_len);
    assert_a2a_error(
        &post(&lab, &token, &send_body("hm-1", "t.pure", &json!({}), None)),
        "1",
        -32603,
        "invocation was not committed; send a new task id",
    );
    // A new task id runs under the new revision.
    let v = lab.send(&token, "hm-2", "t.pure", &json!({}));
    let index = v["result"]["metadata"]["entry_index"].as_u64().unwrap();
    let new_fn = lab.transition_fn("t.pure");
    assert_ne!(new_fn, v1_fn);
    assert_eq!(lab.invocation_record(index)["transitionFn"], json!(new_fn));
}

/// A registry object that does not parse (written through the store API):
/// invocation is unavailable, the cause is on stderr, and the other surfaces
/// refuse in their own terms.
#[test]
fn a_registry_that_cannot_be_read_makes_invocation_unavailable_on_every_surface() {
    let (mut lab, token) = lab();
    lab.kill9();
    crate::store::publish_raw(&lab.db, br#"{"registry":"not a registry"}"#.to_vec(), vec![]);
    lab.restart();
    let r = post(&lab, &token, &send_body("na-1", "tools.echo", &json!({}), None));
    assert_a2a_error(&r, "1", -32603, "transition invocation is not available in this daemon");
    let line = lab.daemon.wait_stderr("worldd: a2a refusal: tasks/send a2a:ep1:na-1: ");
    assert!(line.contains("not a valid registry"), "{line}");
    let r = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
    assert_json_reply(&r, 200, &host_failure("4", "host callback failed"));
    lab.daemon.wait_stderr("worldd: mcp refusal: tools: ");
    let r = lab.get_auth("/.well-known/agent.json", &token);
    assert_json_reply(
        &r,
        503,
        "{\"error\":{\"class\":\"ProjectionUnavailable\",\"message\":\"agent card unavailable: a registry read failed\"}}\n",
    );
}

/// Calls of one episode that have effects run one at a time, each under its
/// own 20 s deadline. A slow call (plan 1.6 s + an 8.4 s effect + finish
/// 1.6 s) ahead of two more makes both pass their deadline: the second while
/// its own effect runs, the third while it waits its turn.
const SLOW: &str = r#"import json, os, sys, time
req = json.loads(sys.stdin.read())
if req.get("phase") == "plan":
    time.sleep(1.6)
    effect = {"id": "e1", "effect": "Workspace.Exec", "scope": "worktree", "cost": 1,
              "payload": {"op": "exec", "command": "slow", "args": []}}
    sys.stdout.write(json.dumps({"plan": "world/effect-plan/v1", "effects": [effect], "finish": True}))
else:
    time.sleep(1.6)
    sys.stdout.write(json.dumps({"ok": True}))
"#;

#[test]
fn deadlines_are_32603_over_a2a_with_the_connection_closed_and_timed_out_over_mcp() {
    let lab = Lab::new(LabOptions {
        episodes: &["slow"],
        exec: &[("slow", "#!/bin/sh\nsleep 8.4\necho slow\n")],
        ..Default::default()
    });
    let source = SLOW;
    let access = Some(("Workspace.Exec", "worktree", 0));
    lab.publish_ok(
        &lab.manifest(
            "slow",
            &[("slow.py", source)],
            json!([exec_entry("t.slow", "slow.py", Some("Workspace.Exec"), access)]),
        ),
        false,
    );
    let token = lab.mint("slow", &["Workspace.Exec=worktree:10"]);
    let started = Instant::now();
    let (a2a, mcp) = std::thread::scope(|s| {
        // Two calls ahead hold the episode's effect lock for 2 × 8.4 s, so
        // whichever of the two measured calls comes next cannot finish in 20 s.
        let _first = s.spawn(|| post(&lab, &token, &send_body("slow-1", "t.slow", &json!({}), None)));
        let _second = s.spawn(|| post(&lab, &token, &send_body("slow-0", "t.slow", &json!({}), None)));
        let scratch = lab.root.join("world.db.scratch");
        wait_for("the first two plans to start", Duration::from_secs(20), || runs_in_flight(&scratch) >= 2);
        // A plan phase ends within its 2 s deadline: after this both calls ahead
        // hold or wait for the episode's lock, so the measured calls queue behind them.
        std::thread::sleep(Duration::from_millis(2500));
        let a2a = s.spawn(|| {
            let mut conn = Conn::new(lab.addr());
            let auth = bearer(&token);
            let body = serde_json::to_vec(&send_body("slow-2", "t.slow", &json!({}), None)).unwrap();
            conn.post("/a2a/", &[("Authorization", &auth), ("Content-Type", "application/json")], &body).unwrap()
        });
        let mcp = s.spawn(|| lab.mcp(&token, &call_body(json!(77), "t_dslow", &json!({}))));
        (a2a.join().unwrap(), mcp.join().unwrap())
    });
    assert!(started.elapsed() >= Duration::from_secs(19), "both waited out their deadlines");
    assert_a2a_error(&a2a, "1", -32603, "invocation exceeded its deadline");
    assert_eq!(a2a.header("connection"), Some("close"), "{a2a:?}");
    assert_json_reply(&mcp, 200, &host_failure("77", "host callback timed out"));
    let line = lab.daemon.wait_stderr("\"invocation exceeded its deadline\"");
    assert!(line.starts_with("worldd: mcp refusal: tools/call mcp:slow:"), "the cause is on stderr: {line}");
}

// ---- success ----

#[test]
fn a_success_has_the_seed_shape_and_names_the_entry_and_world_it_committed() {
    let (lab, token) = lab();
    let r = post(&lab, &token, &send_body("read-1", "ailang-read", &json!({"path": "hello.txt"}), None));
    let v = a2a_json(&r);
    let result = &v["result"];
    let output = result["artifacts"][0]["parts"][0]["data"].clone();
    let meta = &result["metadata"];
    let (entry_index, world_ref) = (meta["entry_index"].as_u64().unwrap(), meta["world_ref"].as_str().unwrap());
    let expected = json!({"id": 1, "jsonrpc": "2.0", "result": {
        "id": "read-1", "status": {"state": "completed"},
        "artifacts": [{"parts": [{"type": "data", "data": output}]}],
        "metadata": {"invocation_id": "a2a:ep1:read-1", "world_ref": world_ref, "entry_index": entry_index}}});
    // Keys sorted (Go map order), compact, one trailing newline.
    assert_eq!(r.text(), format!("{expected}\n"));
    assert_eq!((&output["ok"], &output["content"]), (&json!(true), &json!("hello from World\n")));
    assert_eq!(output["world"]["effects"][0]["status"], "ok");

    // entry_index and world_ref agree with the log and the world rows.
    assert_eq!(entry_index as usize, lab.log_len() - 1);
    let entry = lab.get_json(&format!("/v1/log/{entry_index}"));
    assert_eq!(entry["header"]["entryIndex"], json!(entry_index));
    let world = lab.get_json(&format!("/v1/worlds/{world_ref}"));
    assert_eq!((&world["ref"], &world["logHead"]), (&json!(world_ref), &entry["entryHash"]));
    assert_eq!(lab.get("/v1/head").text(), world_ref);
    let inv = lab.object_json(entry["transitionRef"].as_str().unwrap());
    assert_eq!(
        (&inv["invocationId"], &inv["skillId"], &inv["episodeId"]),
        (&json!("a2a:ep1:read-1"), &json!("ailang-read"), &json!("ep1"))
    );
    assert_eq!(lab.object_json(inv["output"].as_str().unwrap()), output);
    assert_eq!(inv["effects"], json!([output["world"]["effects"][0]["record"]]));

    // The JSON-RPC id is echoed whatever its type.
    for (id, wire) in [(json!("s-1"), "\"s-1\""), (json!(0), "0"), (Value::Null, "null")] {
        let mut body = send_body("echo-1", "tools.echo", &json!({"a": "<&>"}), None);
        body["id"] = id;
        let r = post(&lab, &token, &body);
        assert!(r.text().starts_with(&format!("{{\"id\":{wire},\"jsonrpc\":\"2.0\",\"result\":{{")), "{}", r.text());
        assert!(r.text().contains(r#"{"a":"\u003c\u0026\u003e"}"#), "Go escaping: {}", r.text());
    }
}

#[test]
fn each_a2a_generation_answers_in_its_own_shapes_over_one_task_store() {
    let (lab, token) = lab();
    let message = |id: &str, part: Value| json!({"messageId": id, "role": "ROLE_USER", "parts": [part], "metadata": {"skill_id": "ailang-read"}});
    // A2A 1.0: SendMessage answers the SendMessageResponse oneof, GetTask the bare Task.
    let send10 = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": message("v10-1", json!({"data": {"path": "hello.txt"}}))}});
    let sent = a2a_json(&post(&lab, &token, &send10))["result"].clone();
    let task = &sent["task"];
    assert_eq!((&task["id"], &task["contextId"]), (&json!("v10-1"), &json!("v10-1")));
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["artifactId"], "output");
    assert_eq!(task["artifacts"][0]["parts"][0]["data"]["content"], "hello from World\n");
    assert!(task.get("kind").is_none() && task["artifacts"][0]["parts"][0].get("kind").is_none(), "no 0.3 members");
    let get10 = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "v10-1"}});
    let got = a2a_json(&post(&lab, &token, &get10))["result"].clone();
    assert_eq!((&got["status"], &got["artifacts"]), (&task["status"], &task["artifacts"]));
    assert_eq!(got["metadata"]["entry_index"], task["metadata"]["entry_index"]);

    // A2A 0.3: message/send and tasks/get answer the Task with `kind` discriminators.
    let mut m03 = message("v03-1", json!({"kind": "data", "data": {"path": "hello.txt"}}));
    m03["role"] = json!("user");
    m03["kind"] = json!("message");
    let send03 = json!({"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"message": m03}});
    let task03 = a2a_json(&post(&lab, &token, &send03))["result"].clone();
    assert_eq!((&task03["kind"], &task03["status"]["state"]), (&json!("task"), &json!("completed")));
    assert_eq!(task03["artifacts"][0]["parts"][0]["kind"], "data");
    assert_eq!(task03["artifacts"][0]["parts"][0]["data"]["content"], "hello from World\n");
    let get03 = json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": "v03-1"}});
    assert_eq!(a2a_json(&post(&lab, &token, &get03))["result"], task03);

    // One task store: a 1.0 task read through 0.3 speaks 0.3, and the seed's tasks/send is untouched.
    let cross = json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/get", "params": {"id": "v10-1"}});
    assert_eq!(a2a_json(&post(&lab, &token, &cross))["result"]["status"]["state"], "completed");
    let seed = a2a_json(&post(&lab, &token, &send_body("seed-1", "ailang-read", &json!({"path": "hello.txt"}), None)));
    assert_eq!(seed["result"]["status"], json!({"state": "completed"}));
    assert_eq!(seed["result"]["artifacts"][0]["parts"][0]["type"], "data");
}
