//! The exec runtime: the shipped Python examples published into a live daemon
//! and called; misbehaving transitions are reported, never committed.

use crate::harness::*;
use serde_json::json;
use std::time::{Duration, Instant};
use world_store::Ref;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/python/manifest.json");

#[test]
fn the_python_examples_publish_through_the_live_daemon_and_run() {
    let lab = Lab::new(LabOptions { episodes: &["py"], ..Default::default() });
    std::fs::write(lab.worktree("py").join("notes.txt"), "one two three\nfour five\n").unwrap();
    let o = lab.publish_manifest(std::path::Path::new(EXAMPLES), false);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("published transition registry revision 2"), "{}", text(&o.stdout));
    // Publishing the same manifest again writes nothing.
    let again = lab.publish_manifest(std::path::Path::new(EXAMPLES), false);
    assert!(text(&again.stdout).starts_with("transition registry UNCHANGED at revision 2"), "{}", text(&again.stdout));

    let client = lab.client(&lab.mint("py", &["world.apply=world:10", "Workspace.Read=worktree:10"]));
    let skills = client.skills();
    assert!(skills.contains(&"examples.word-count".into()) && skills.contains(&"examples.read-stats".into()));

    // Pure: the output is the transition's object plus the world block.
    let r = client.send("wc-1", "examples.word-count", &json!({"text": "a b c\nd"}));
    assert_eq!(
        r.output(),
        &json!({"ok": true, "words": 4, "lines": 2, "chars": 7, "world": {"effects": [], "plan": null}})
    );
    let record = lab.invocation_record(r.entry_index());
    assert_eq!(record["skillId"], "examples.word-count");
    assert_eq!(record["transitionFn"], lab.transition_fn("examples.word-count"));
    // The entry pins the interpreter binary by hash, and the source by hash.
    let python = std::fs::read(std::fs::canonicalize(PYTHON).unwrap()).unwrap();
    let (_, entry) = lab.get(&format!("/v1/log/{}", r.entry_index()));
    assert_eq!(entry["header"]["interpreter"], Ref::of(&python).to_string());
    let source = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/python/word_count.py")).unwrap();
    assert_eq!(entry["header"]["transitionFn"], Ref::of(&source).to_string());

    // Effectful: plan asks Workspace.Read, finish composes the result.
    let r = client.send("rs-1", "examples.read-stats", &json!({"path": "notes.txt"}));
    let out = r.output();
    assert_eq!(
        (&out["ok"], &out["path"], &out["words"], &out["lines"]),
        (&json!(true), &json!("notes.txt"), &json!(5), &json!(2))
    );
    assert_eq!(r.effect_status().as_deref(), Some("ok"));
    let rec = lab.object_json(&r.effect_record().unwrap());
    assert_eq!(
        (&rec["effect"], &rec["allowed"], &rec["budgetBefore"]),
        (&json!("Workspace.Read"), &json!(true), &json!(10))
    );
    let result = lab.object_json(rec["resultRef"].as_str().unwrap());
    assert_eq!(result["content"], "one two three\nfour five\n");
    let plan = lab.object_json(out["world"]["plan"].as_str().unwrap());
    assert_eq!((&plan["plan"], &plan["finish"]), (&json!("world/effect-plan/v1"), &json!(true)));
    let inv = lab.invocation_record(r.entry_index());
    assert_eq!(inv["effects"], json!([r.effect_record().unwrap()]));
    assert_eq!(inv["plan"], out["world"]["plan"]);

    // The handler's refusal reaches the finish phase; the plan's refusal commits with no effect.
    let r = client.send("rs-2", "examples.read-stats", &json!({"path": "missing.txt"}));
    assert_eq!((&r.output()["ok"], r.effect_status().as_deref()), (&json!(false), Some("ok")));
    let r = client.send("rs-3", "examples.read-stats", &json!({"path": "../notes.txt"}));
    assert_eq!(r.output()["refused"], plan_path_refusal("../notes.txt"));
    assert_eq!(r.output()["world"]["effects"], json!([]));
    lab.verify_clean();
}

const SLEEPY: &str = "import time\ntime.sleep(5)\nprint('{}')\n";
const NOT_JSON: &str = "import sys\nsys.stdin.read()\nprint('hello, not json')\n";
const ARRAY: &str = "print('[1, 2]')\n";
const EXITS: &str = "import sys\nsys.stderr.write('boom\\n')\nsys.exit(3)\n";
const WORLD_KEY: &str = "print('{\"world\": 1}')\n";
const SLEEPY_PLAN: &str = "import time\ntime.sleep(5)\n";
/// Leaves a grandchild that would write a file after the phase deadline.
const LINGERING: &str = r#"import subprocess, time
subprocess.Popen(["/bin/sh", "-c", "/bin/sleep 2.6; echo late > MARKER"])
time.sleep(5)
"#;

#[test]
fn misbehaving_transitions_are_killed_or_refused_and_never_committed() {
    let lab = Lab::new(LabOptions { episodes: &["bad"], ..Default::default() });
    let marker = lab.outside.join("late.txt");
    let lingering = LINGERING.replace("MARKER", &marker.display().to_string());
    let manifest = lab.manifest(
        "bad",
        &[
            Transition { id: "t.sleepy", file: "sleepy", source: SLEEPY, effect: None, access: None },
            Transition { id: "t.not-json", file: "not_json", source: NOT_JSON, effect: None, access: None },
            Transition { id: "t.array", file: "array", source: ARRAY, effect: None, access: None },
            Transition { id: "t.exits", file: "exits", source: EXITS, effect: None, access: None },
            Transition { id: "t.world-key", file: "world_key", source: WORLD_KEY, effect: None, access: None },
            Transition { id: "t.lingering", file: "lingering", source: &lingering, effect: None, access: None },
            Transition {
                id: "t.sleepy-plan",
                file: "sleepy_plan",
                source: SLEEPY_PLAN,
                effect: Some("Workspace.Read"),
                access: None,
            },
        ],
    );
    let o = lab.publish_manifest(&manifest, false);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let client = lab.client(&lab.mint("bad", &["world.apply=world:10", "Workspace.Read=worktree:10"]));
    let log_before = lab.log_len();

    let cases = [
        ("t.sleepy", "transition execution failed"),
        ("t.not-json", "transition output is not a JSON object"),
        ("t.array", "transition output is not a JSON object"),
        ("t.exits", "transition execution failed"),
        ("t.world-key", "transition does not implement the invocation calling convention"),
        ("t.sleepy-plan", "transition execution failed"),
    ];
    for (id, message) in cases {
        let r = client.send(&format!("{id}-1"), id, &json!({"x": 1}));
        r.assert_error(-32603, message);
        // Known not committed: a resend says so and runs nothing.
        client
            .send(&format!("{id}-1"), id, &json!({"x": 1}))
            .assert_error(-32603, "invocation was not committed; send a new task id");
    }

    // A phase past its deadline is killed with its whole process group.
    let started = Instant::now();
    client.send("linger-1", "t.lingering", &json!({})).assert_error(-32603, "transition execution failed");
    std::thread::sleep(Duration::from_millis(3500).saturating_sub(started.elapsed()));
    assert!(!marker.exists(), "a grandchild outlived the killed phase");

    assert_eq!(lab.log_len(), log_before, "nothing was committed");
    let report = lab.verify_clean();
    assert_eq!(lab.effect_intents(&report), 0, "no effect was journaled: the plan never finished");
    assert!(lab.daemon.stderr_text().contains("a2a refusal: tasks/send a2a:bad:t.sleepy-1"));
}
