//! Admission, idempotency, R8, the pin, refusals and denials: what the
//! coordinator decides before (or instead of) running an effect.

use crate::harness::*;
use serde_json::json;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const COUNT: &str = "#!/bin/sh\necho \"$1\" >> counter.txt\necho \"ran $1\"\n";

fn counter(lab: &Lab, episode: &str) -> Vec<String> {
    let text = std::fs::read_to_string(lab.worktree(episode).join("counter.txt")).unwrap_or_default();
    text.lines().map(String::from).collect()
}

#[test]
fn a_resent_task_id_returns_the_committed_result_and_runs_nothing() {
    let lab = Lab::new(LabOptions { episodes: &["idem", "other"], exec: &[("count", COUNT)], ..Default::default() });
    let client = lab.client(&lab.mint("idem", &["Workspace.Exec=worktree:10", "world.apply=world:10"]));
    let args = json!({"command": "count", "args": ["first"]});
    let first = client.send("task-1", "workspace-exec", &args);
    assert_eq!(first.output()["stdout"], "ran first\n", "{}", first.0);
    let log_len = lab.log_len();

    for _ in 0..3 {
        let again = client.send("task-1", "workspace-exec", &args);
        assert_eq!(again.0, first.0, "same id and request: the committed reply, byte for byte");
    }
    // A new session of the same episode shares the task id space.
    let client2 = lab.client(&lab.mint("idem", &["Workspace.Exec=worktree:10"]));
    assert_eq!(client2.send("task-1", "workspace-exec", &args).entry_index(), first.entry_index());

    // Same id, different request: refused, nothing runs.
    let other_args = json!({"command": "count", "args": ["second"]});
    client.send("task-1", "workspace-exec", &other_args).assert_error(-32602, "task id already used in this session");
    client.send("task-1", "tools.echo", &json!({})).assert_error(-32602, "task id already used in this session");
    assert_eq!(counter(&lab, "idem"), ["first"], "the effect ran once");
    assert_eq!(lab.log_len(), log_len, "nothing new committed");

    // Task ids are scoped to the episode: another episode's task-1 is its own call.
    let other = lab.client(&lab.mint("other", &["Workspace.Exec=worktree:10"]));
    let r = other.send("task-1", "workspace-exec", &args);
    assert_ne!(r.entry_index(), first.entry_index());
    assert_eq!(r.result()["metadata"]["invocation_id"], "a2a:other:task-1");
    assert_eq!(counter(&lab, "other"), ["first"]);
    let report = lab.verify_clean();
    assert_eq!(lab.effect_intents(&report), 2);
}

#[test]
fn an_episode_without_a_worktree_is_refused_before_anything_is_journaled() {
    let lab = Lab::new(LabOptions { episodes: &["real"], ..Default::default() });
    std::os::unix::fs::symlink(lab.worktree("real"), lab.ws.join("alias")).unwrap();
    let before = lab.verify_clean();
    let log_len = lab.log_len();
    let no_handler = "transition declares an effect this daemon has no handler for";
    let grants = ["Workspace.Read=worktree:5", "Workspace.Exec=worktree:5", "world.apply=world:5"];

    // No directory at all, and a symlink where the directory should be: no handlers (R8).
    for episode in ["ghost", "alias"] {
        let client = lab.client(&lab.mint(episode, &grants));
        assert!(client.skills().contains(&"ailang-read".to_string()), "visibility does not depend on handlers");
        client.send("r8-read", "ailang-read", &json!({"path": "x.txt"})).assert_error(-32603, no_handler);
        // Pure transitions need no handler.
        assert!(client.send("r8-echo", "tools.echo", &json!({})).is_ok());
    }
    // A real worktree, but this daemon has no exec allow-list: no Workspace.Exec handler.
    let real = lab.client(&lab.mint("real", &grants));
    real.send("r8-exec", "workspace-exec", &json!({"command": "ls"})).assert_error(-32603, no_handler);

    let after = lab.verify_clean();
    assert_eq!(lab.log_len(), log_len + 2, "only the two echo calls committed");
    assert_eq!(after["counts"]["intents"], before["counts"]["intents"], "no effect journaled");
    assert_eq!(after["counts"]["tasks"].as_u64().unwrap(), before["counts"]["tasks"].as_u64().unwrap() + 2);
    // Nothing was journaled for the refused ids: a resend is refused the same way, not "already used".
    let ghost = lab.client(&lab.mint("ghost", &grants));
    ghost.send("r8-read", "ailang-read", &json!({"path": "x.txt"})).assert_error(-32603, no_handler);
}

#[test]
fn a_store_without_genesis_refuses_calls_until_one_is_committed() {
    let lab = Lab::new(LabOptions { episodes: &["early"], no_genesis: true, ..Default::default() });
    let (status, _) = lab.get("/v1/head");
    assert_eq!(status, 404);
    let client = lab.client(&lab.mint("early", &["world.apply=world:5", "Workspace.Read=worktree:5"]));
    let no_world = "no world is selected; commit a genesis world first";
    client.send("e-1", "tools.echo", &json!({"a": 1})).assert_error(-32603, no_world);
    client.send("e-2", "ailang-read", &json!({"path": "x"})).assert_error(-32603, no_world);
    assert_eq!(lab.log_len(), 0);

    lab.genesis();
    let r = client.send("e-1", "tools.echo", &json!({"a": 1}));
    assert_eq!((r.entry_index(), &r.output()["echo"]), (1, &json!({"a": 1})));
    lab.verify_clean();
}

#[test]
fn the_transition_fn_pin_must_name_the_registered_source() {
    let lab = Lab::new(LabOptions { episodes: &["pin"], ..Default::default() });
    std::fs::write(lab.worktree("pin").join("a.txt"), "pinned\n").unwrap();
    let client = lab.client(&lab.mint("pin", &["world.apply=world:5", "Workspace.Read=worktree:5"]));
    let echo_fn = lab.transition_fn("tools.echo");
    let read_fn = lab.transition_fn("ailang-read");
    let log_len = lab.log_len();

    let zero = format!("sha256:{}", "0".repeat(64));
    let mismatch = "proposal does not match the registered transition";
    client.send_pinned("p-1", "tools.echo", &json!({}), &zero).assert_error(-32602, mismatch);
    client.send_pinned("p-2", "tools.echo", &json!({}), &read_fn).assert_error(-32602, mismatch);
    client.send_pinned("p-3", "tools.echo", &json!({}), "sha256:not-hex").assert_error(-32602, "invalid params");
    assert_eq!(lab.log_len(), log_len, "a refused pin commits nothing");

    let r = client.send_pinned("p-4", "tools.echo", &json!({"x": 1}), &echo_fn);
    assert_eq!(lab.invocation_record(r.entry_index())["transitionFn"], echo_fn);
    let r = client.send_pinned("p-5", "ailang-read", &json!({"path": "a.txt"}), &read_fn);
    assert_eq!(r.output()["content"], "pinned\n");
}

#[test]
fn a_plan_refusal_is_a_committed_entry_with_no_effects() {
    let lab = Lab::new(LabOptions { episodes: &["refuse"], ..Default::default() });
    let client = lab.client(&lab.mint("refuse", &["Workspace.Read=worktree:5", "Workspace.Write=worktree:5"]));
    let cases = [
        ("ailang-read", json!({"path": "../secret"}), plan_path_refusal("../secret")),
        (
            "ailang-read",
            json!({"path": "a", "extra": 1}),
            "unknown argument \"extra\"; ailang-read admits only: path".into(),
        ),
        ("ailang-write", json!({"path": "a"}), "missing required argument \"content\"".into()),
        ("ailang-read", json!({"path": 7}), "argument \"path\" must be a string".into()),
    ];
    for (n, (tool, args, refused)) in cases.iter().enumerate() {
        let r = client.send(&format!("refuse-{n}"), tool, args);
        let out = r.output();
        assert_eq!(out["ok"], false);
        assert_eq!(out["refused"], refused.as_str());
        assert_eq!(out["world"]["effects"], json!([]));
        let record = lab.invocation_record(r.entry_index());
        assert_eq!(record["effects"], json!([]), "an invocation-record/v2 with no effects");
        assert_eq!(record["plan"], out["world"]["plan"]);
        assert_eq!(&lab.object_json(record["output"].as_str().unwrap()), out, "the output object is the reply");
        let plan = lab.object_json(record["plan"].as_str().unwrap());
        assert_eq!((&plan["effects"], &plan["result"]["refused"]), (&json!([]), &out["refused"]));
    }
    let report = lab.verify_clean();
    assert_eq!(lab.effect_intents(&report), 0, "a refusal spends nothing");
}

/// Plans one Workspace.Read, but is admitted by `world.apply`: the broker, not
/// admission, decides the effect.
const PROBE: &str = r#"import json, sys
req = json.loads(sys.stdin.read())
effect = {"id": "e1", "effect": "Workspace.Read", "scope": "worktree", "cost": 1,
          "payload": {"op": "read", "path": req["args"]["path"]}}
sys.stdout.write(json.dumps({"plan": "world/effect-plan/v1", "effects": [effect], "finish": False, "result": None}))
"#;
/// The same, after 1.5 s of planning (inside the 2 s phase deadline).
const SLOW_PROBE: &str = r#"import json, sys, time
req = json.loads(sys.stdin.read())
time.sleep(1.5)
effect = {"id": "e1", "effect": "Workspace.Read", "scope": "worktree", "cost": 1,
          "payload": {"op": "read", "path": req["args"]["path"]}}
sys.stdout.write(json.dumps({"plan": "world/effect-plan/v1", "effects": [effect], "finish": False, "result": None}))
"#;

#[test]
fn grants_decide_visibility_and_the_broker_records_each_denial_label() {
    let lab = Lab::new(LabOptions { episodes: &["deny"], ..Default::default() });
    std::fs::write(lab.worktree("deny").join("a.txt"), "secret\n").unwrap();
    let probe = Some(("world.apply", "world", 0));
    let manifest = lab.manifest(
        "probes",
        &[
            Transition {
                id: "probe.read",
                file: "probe",
                source: PROBE,
                effect: Some("Workspace.Read"),
                access: probe,
            },
            Transition {
                id: "probe.slow-read",
                file: "slow_probe",
                source: SLOW_PROBE,
                effect: Some("Workspace.Read"),
                access: probe,
            },
        ],
    );
    let o = lab.publish_manifest(&manifest, false);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let not_authorized = "not authorized";

    // Read only: write tools are invisible and not callable; unknown skills neither.
    let read_only = lab.client(&lab.mint("deny", &["Workspace.Read=worktree:5"]));
    let skills = read_only.skills();
    assert!(skills.contains(&"ailang-read".into()) && !skills.contains(&"ailang-write".into()), "{skills:?}");
    read_only.send("d-1", "ailang-write", &json!({"path": "x", "content": "y"})).assert_error(-32602, not_authorized);
    read_only.send("d-2", "no-such-tool", &json!({})).assert_error(-32602, not_authorized);
    // A grant for another scope admits nothing at scope worktree.
    let elsewhere = lab.client(&lab.mint("deny", &["Workspace.Read=elsewhere:5"]));
    assert!(!elsewhere.skills().contains(&"ailang-read".into()));
    elsewhere.send("d-3", "ailang-read", &json!({"path": "a.txt"})).assert_error(-32602, not_authorized);

    // The broker's labels, each recorded without a debit and with only the world block as output.
    let label_of = |client: &Client, id: &str, tool: &str| {
        let r = client.send(id, tool, &json!({"path": "a.txt"}));
        assert_eq!(r.effect_status().as_deref(), Some("denied"), "{}", r.0);
        let keys: Vec<&String> = r.output().as_object().unwrap().keys().collect();
        assert_eq!(keys, ["world"], "{}", r.0);
        let record = lab.object_json(&r.effect_record().unwrap());
        assert_eq!(
            (&record["allowed"], &record["failed"], &record["resultRef"]),
            (&json!(false), &json!(false), &json!(""))
        );
        assert_eq!(record["budgetBefore"], record["budgetAfter"], "a denial is never debited");
        lab.invocation_record(r.entry_index());
        record
    };
    let zero = lab.client(&lab.mint("deny", &["Workspace.Read=worktree:0"]));
    assert!(zero.skills().contains(&"ailang-read".into()), "a budget-0 grant still shows the tool");
    let record = label_of(&zero, "d-4", "ailang-read");
    assert_eq!((&record["denial"], &record["budgetBefore"]), (&json!("denied:budget"), &json!(0)));

    let apply_only = lab.client(&lab.mint("deny", &["world.apply=world:5"]));
    let record = label_of(&apply_only, "d-5", "probe.read");
    assert_eq!(record["denial"], "denied:effect-name");

    let wrong_scope = lab.client(&lab.mint("deny", &["world.apply=world:5", "Workspace.Read=elsewhere:5"]));
    let record = label_of(&wrong_scope, "d-6", "probe.read");
    assert_eq!(record["denial"], "denied:scope");

    // denied:expired: admitted while the session is live, brokered after it expired.
    let (token, expires_at) = lab.mint_ttl("deny", &["world.apply=world:5", "Workspace.Read=worktree:5"], Some(2));
    let start = Duration::from_secs(expires_at - 1) + Duration::from_millis(50);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    std::thread::sleep(start.saturating_sub(now));
    let record = label_of(&lab.client(&token), "d-7", "probe.slow-read");
    assert_eq!((&record["denial"], &record["budgetBefore"]), (&json!("denied:expired"), &json!(5)));

    let report = lab.verify_clean();
    assert_eq!(lab.effect_intents(&report), 0, "no denial journaled a debit");
}
