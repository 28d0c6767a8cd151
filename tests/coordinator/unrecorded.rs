//! EffectsUnrecorded, produced honestly from outside: the transition is
//! republished while its effect runs, so the commit after the effect must fail.

use crate::harness::*;
use serde_json::json;
use std::time::Duration;

/// Waits (bounded) for the test to create `go` in the worktree, so the test
/// decides exactly when the effect ends.
const GATE: &str = r#"#!/bin/sh
echo run >> gate-runs.txt
: > started
i=0
while [ ! -e go ] && [ "$i" -lt 300 ]; do sleep 0.02; i=$((i+1)); done
rm -f started
echo gated
"#;

const GATED_EXEC: &str = r#"import json, sys
json.loads(sys.stdin.read())
effect = {"id": "e1", "effect": "Workspace.Exec", "scope": "worktree", "cost": 1,
          "payload": {"op": "exec", "command": "gate", "args": []}}
sys.stdout.write(json.dumps({"plan": "world/effect-plan/v1", "effects": [effect], "finish": False, "result": None}))
"#;

const PREFIX: &str = "effects were requested but the invocation was not confirmed committed; effect records: ";

#[test]
fn republishing_during_an_effect_reports_effects_unrecorded_with_resolvable_records() {
    let lab = Lab::new(LabOptions { episodes: &["gate"], exec: &[("gate", GATE)], ..Default::default() });
    let wt = lab.worktree("gate");
    let v2_source = format!("{GATED_EXEC}# revision 2\n");
    fn gated(source: &str) -> Transition<'_> {
        Transition { id: "gated-exec", file: "gated_exec", source, effect: Some("Workspace.Exec"), access: None }
    }
    let v1 = lab.manifest("v1", &[gated(GATED_EXEC)]);
    let v2 = lab.manifest("v2", &[gated(&v2_source)]);
    assert!(lab.publish_manifest(&v1, false).status.success());
    let v1_fn = lab.transition_fn("gated-exec");
    let client = lab.client(&lab.mint("gate", &["Workspace.Exec=worktree:5"]));
    let log_len = lab.log_len();

    let reply = std::thread::scope(|s| {
        let call = s.spawn(|| client.send("u-1", "gated-exec", &json!({})));
        wait_for("the effect to start", Duration::from_secs(20), || wt.join("started").exists());
        // The effect is running now: publish a new revision of the transition it was admitted under.
        let o = lab.publish_manifest(&v2, true);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(text(&o.stdout).starts_with("published transition registry revision 3"), "{}", text(&o.stdout));
        std::fs::write(wt.join("go"), "").unwrap();
        call.join().unwrap()
    });
    let (code, message) = reply.error();
    assert_eq!(code, -32603, "{message}");
    let records: Vec<String> = message
        .strip_prefix(PREFIX)
        .unwrap_or_else(|| panic!("not EffectsUnrecorded: {message}"))
        .split(' ')
        .map(String::from)
        .collect();
    assert_eq!(records.len(), 1, "{message}");
    assert_ne!(lab.transition_fn("gated-exec"), v1_fn);

    // The effect ran and was recorded, and debited once; no entry was committed.
    let (status, meta) = lab.get(&format!("/v1/objects/{}", records[0]));
    assert_eq!((status, &meta["semanticId"]), (200, &json!("world/effect-record/v2")));
    let record = lab.object_json(&records[0]);
    assert_eq!((&record["allowed"], &record["failed"]), (&json!(true), &json!(false)), "{record}");
    assert_eq!((&record["budgetBefore"], &record["budgetAfter"]), (&json!(5), &json!(4)));
    let result = lab.object_json(record["resultRef"].as_str().unwrap());
    assert_eq!(result["stdout"], "gated\n");
    lab.payload(record["requestRef"].as_str().unwrap());
    assert_eq!(lab.log_len(), log_len, "nothing committed");
    assert_eq!(std::fs::read_to_string(wt.join("gate-runs.txt")).unwrap(), "run\n");

    // The provenance walk from the record shows the journal and says no entry carries it.
    let addr = format!("http://{}", lab.daemon.addr);
    let walk = worldd(&["why", &records[0], "--addr", &addr]);
    let text = String::from_utf8_lossy(&walk.stdout).into_owned();
    assert!(walk.status.success(), "{text}");
    assert!(text.contains("journal a2a:gate:u-1#0: intent e1"), "{text}");
    assert!(text.contains("budget 5 -> 4; outcome ok"), "{text}");
    assert!(
        text.contains("no log entry carries this effect: the invocation was not committed (EffectsUnrecorded)"),
        "{text}"
    );

    // Resending the id names the same records and runs nothing.
    let again = client.send("u-1", "gated-exec", &json!({}));
    assert_eq!(again.error(), (code, message.clone()));
    assert_eq!(std::fs::read_to_string(wt.join("gate-runs.txt")).unwrap(), "run\n");
    assert!(lab.daemon.stderr_text().contains("a2a refusal: tasks/send a2a:gate:u-1"), "{}", lab.daemon.stderr_text());

    // A new task id runs under the new revision and commits.
    let r = client.send("u-2", "gated-exec", &json!({}));
    assert_eq!(lab.invocation_record(r.entry_index())["transitionFn"], lab.transition_fn("gated-exec"));
    let report = lab.verify_clean();
    assert_eq!(lab.effect_intents(&report), 2, "both runs debited, each once");
}
