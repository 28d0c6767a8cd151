//! Reliability of `tasks/send` as an idempotency key under load and a crash:
//! the same 200 task ids from 16 concurrent clients, twice over, with a
//! SIGKILL of the daemon in between.

use crate::harness::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const TASKS: usize = 200;
const CLIENTS: usize = 16;
const EPISODES: [&str; 4] = ["rel-0", "rel-1", "rel-2", "rel-3"];
/// Appends its argument to the worktree's counter: one line per execution.
const COUNT: &str = "#!/bin/sh\necho \"$1\" >> counter.txt\necho \"counted $1\"\n";
const IN_USE: &str = "task id already used in this session";

fn task_id(i: usize) -> String {
    format!("rel-task-{i:03}")
}

fn episode_of(i: usize) -> usize {
    i % EPISODES.len()
}

/// Every client sends every task id once, each client starting at another
/// offset, so each id is in flight from several clients at once.
fn round(lab: &Lab, tokens: &[String]) -> Vec<(usize, Value)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                s.spawn(move || {
                    let mut conn = Conn::new(lab.addr());
                    let mut out = Vec::with_capacity(TASKS);
                    for k in 0..TASKS {
                        let i = (c * 37 + k) % TASKS;
                        let id = task_id(i);
                        let auth = bearer(&tokens[episode_of(i)]);
                        let body = send_body(&id, "workspace-exec", &json!({"command": "count", "args": [id]}), None);
                        let h = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
                        let r = conn
                            .post("/a2a/", &h, &serde_json::to_vec(&body).unwrap())
                            .unwrap_or_else(|e| panic!("{id}: {e}"));
                        out.push((i, a2a_json(&r)));
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn two_hundred_task_ids_from_sixteen_clients_twice_over_a_sigkill_run_each_effect_once() {
    let mut lab = Lab::new(LabOptions { episodes: &EPISODES, exec: &[("count", COUNT)], ..Default::default() });
    let tokens: Vec<String> = EPISODES.iter().map(|ep| lab.mint(ep, &["Workspace.Exec=worktree:100000"])).collect();
    let log_before = lab.log_len();

    // Round 1: one client runs each id; the others see it in flight or committed.
    let mut committed: BTreeMap<usize, Value> = BTreeMap::new();
    let mut in_use = 0;
    for (i, v) in round(&lab, &tokens) {
        if v.get("result").is_some() {
            let prev = committed.entry(i).or_insert_with(|| v.clone());
            assert_eq!(prev["result"], v["result"], "{}: every success is the same result", task_id(i));
        } else {
            assert_eq!(rpc_error(&v), (-32602, IN_USE.to_string()), "{}: {v}", task_id(i));
            in_use += 1;
        }
    }
    assert_eq!(committed.len(), TASKS, "every task id got a result in round 1");

    // SIGKILL right after the last reply: nothing is drained, nothing flushed on the way out.
    lab.kill9();
    lab.restart();

    // Round 2: every reply is the committed result received before the crash.
    for (i, v) in round(&lab, &tokens) {
        assert!(v.get("result").is_some(), "{}: {v}", task_id(i));
        assert_eq!(v["result"], committed[&i]["result"], "{}: the reply stays true across the crash", task_id(i));
    }

    // Exactly one execution per id, counted where the effect lands.
    let mut runs: BTreeMap<String, usize> = BTreeMap::new();
    for ep in EPISODES {
        for line in std::fs::read_to_string(lab.worktree(ep).join("counter.txt")).unwrap().lines() {
            *runs.entry(line.to_string()).or_default() += 1;
        }
    }
    let expected: BTreeSet<String> = (0..TASKS).map(task_id).collect();
    assert_eq!(runs.keys().cloned().collect::<BTreeSet<_>>(), expected);
    assert!(runs.values().all(|n| *n == 1), "an effect ran twice: {runs:?}");

    // Exactly one committed entry per id, and it is the one the replies name.
    let records = lab.invocation_records();
    assert_eq!(lab.log_len(), log_before + TASKS);
    let mut by_invocation: BTreeMap<String, (u64, Value)> = BTreeMap::new();
    for (n, inv) in records.iter().enumerate().skip(log_before - 1) {
        let id = inv["invocationId"].as_str().unwrap().to_string();
        let effects = inv["effects"].as_array().unwrap().clone();
        assert_eq!(effects.len(), 1, "{id}");
        assert!(
            by_invocation.insert(id.clone(), ((n + 1) as u64, effects[0].clone())).is_none(),
            "{id} committed twice"
        );
    }
    let mut allowed_records = BTreeSet::new();
    for (i, v) in &committed {
        let id = task_id(*i);
        let invocation = format!("a2a:{}:{id}", EPISODES[episode_of(*i)]);
        let (index, record) = by_invocation.get(&invocation).unwrap_or_else(|| panic!("{invocation} not in the log"));
        let meta = &v["result"]["metadata"];
        assert_eq!((&meta["invocation_id"], &meta["entry_index"]), (&json!(invocation), &json!(index)));
        let out = &v["result"]["artifacts"][0]["parts"][0]["data"];
        assert_eq!(out["stdout"], format!("counted {id}\n"));
        assert_eq!(&out["world"]["effects"][0]["record"], record);
        let rec = lab.object_json(record.as_str().unwrap());
        assert_eq!((&rec["allowed"], &rec["failed"]), (&json!(true), &json!(false)), "{id}");
        allowed_records.insert(record.as_str().unwrap().to_string());
    }
    assert_eq!(allowed_records.len(), TASKS, "one allowed effect record per task id");
    let page = lab.get_json("/v1/objects/by-semantic-id/world/effect-record/v2?limit=500");
    assert_eq!(page["items"].as_array().unwrap().len(), TASKS, "and no other effect record exists");

    let report = lab.verify_clean();
    // And the genesis commit's journal item.
    assert_eq!(
        (&report["counts"]["intents"], &report["counts"]["outcomes"]),
        (&json!(TASKS + 1), &json!(TASKS + 1)),
        "{report}"
    );
    eprintln!("reliability: {TASKS} ids x {CLIENTS} clients x 2 rounds; {in_use} in-flight refusals in round 1");
}
