//! Exactly-once budget debit under contention.

use crate::harness::*;
use serde_json::json;
use std::collections::BTreeSet;

const CALLS: usize = 64;
const BUDGET: u64 = 10;

#[test]
fn sixty_four_concurrent_calls_on_a_budget_of_ten_run_exactly_ten_effects() {
    let lab = Lab::new(LabOptions { episodes: &["race"], ..Default::default() });
    let token = lab.mint("race", &[&format!("Workspace.Write=worktree:{BUDGET}")]);
    let client = lab.client(&token);
    let log_before = lab.log_len();

    let replies: Vec<(usize, A2a)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CALLS)
            .map(|i| {
                let c = client.with_url(&lab.daemon.addr);
                s.spawn(move || {
                    let args = json!({"path": format!("out/f{i}.txt"), "content": format!("call {i}\n")});
                    (i, c.send(&format!("race-{i}"), "ailang-write", &args))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    // Every call committed (a denial is a committed entry too), each at its own index.
    let indices: BTreeSet<u64> = replies.iter().map(|(_, r)| r.entry_index()).collect();
    assert_eq!(indices.len(), CALLS, "distinct entry indices");
    assert_eq!(lab.log_len(), log_before + CALLS, "one entry per call");

    let (mut ran, mut denied) = (vec![], vec![]);
    for (i, r) in &replies {
        let record = lab.object_json(&r.effect_record().expect("a record"));
        match r.effect_status().as_deref() {
            Some("ok") => {
                assert_eq!(r.output()["ok"], true, "{}", r.0);
                assert_eq!(record["allowed"], true);
                assert_eq!(record["budgetAfter"].as_u64().unwrap() + 1, record["budgetBefore"].as_u64().unwrap());
                ran.push((*i, record["budgetBefore"].as_u64().unwrap()));
            }
            Some("denied") => {
                assert_eq!(record["allowed"], false);
                assert_eq!(record["denial"], "denied:budget", "{record}");
                assert_eq!((record["budgetBefore"].as_u64(), record["budgetAfter"].as_u64()), (Some(0), Some(0)));
                assert_eq!(record["resultRef"], "");
                let keys: Vec<&String> = r.output().as_object().unwrap().keys().collect();
                assert_eq!(keys, ["world"], "a denial's output is only the world block");
                denied.push(*i);
            }
            other => panic!("unexpected status {other:?}: {}", r.0),
        }
    }
    assert_eq!(ran.len(), BUDGET as usize, "exactly the budget's worth of effects ran");
    assert_eq!(denied.len(), CALLS - BUDGET as usize, "the rest were recorded denied:budget");
    // Each unit of budget was spent once: budgetBefore runs 10, 9, …, 1 exactly once.
    let befores: BTreeSet<u64> = ran.iter().map(|(_, b)| *b).collect();
    assert_eq!(befores, (1..=BUDGET).collect::<BTreeSet<u64>>());

    // The store's own index of effect records agrees, without going through the replies.
    let (status, page) = lab.get("/v1/objects/by-semantic-id/world/effect-record/v2?limit=500");
    assert_eq!(status, 200, "{page}");
    let stored: Vec<serde_json::Value> =
        page["items"].as_array().unwrap().iter().map(|o| lab.object_json(o["hash"].as_str().unwrap())).collect();
    assert_eq!(stored.len(), CALLS, "one record per call");
    assert_eq!(stored.iter().filter(|r| r["allowed"] == true).count(), BUDGET as usize);

    // Independently, on disk: exactly the allowed calls' files exist, with their content.
    let dir = lab.worktree("race").join("out");
    let mut files = names(&dir);
    let mut expected: Vec<String> = ran.iter().map(|(i, _)| format!("f{i}.txt")).collect();
    files.sort();
    expected.sort();
    assert_eq!(files, expected, "side effects on disk match the allowed records");
    for (i, _) in &ran {
        assert_eq!(std::fs::read_to_string(dir.join(format!("f{i}.txt"))).unwrap(), format!("call {i}\n"));
    }

    // The ledger: ten intents and outcomes in the journal, spend == sum of intents (verify checks it).
    let report = lab.verify_clean();
    assert_eq!(lab.effect_intents(&report), BUDGET, "{report}");
    assert_eq!(report["counts"]["outcomes"].as_u64(), Some(BUDGET + 1), "and the genesis commit's: {report}");

    // A fresh session of the same episode gets no new budget: spend is durable per episode.
    let again = lab.client(&lab.mint("race", &[&format!("Workspace.Write=worktree:{BUDGET}")]));
    let r = again.send("race-after", "ailang-write", &json!({"path": "late.txt", "content": "x"}));
    assert_eq!(r.effect_status().as_deref(), Some("denied"));
    assert!(!lab.worktree("race").join("late.txt").exists());
}
