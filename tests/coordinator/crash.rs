//! SIGKILL while effects run: a resent task id never runs its effect again, and
//! every reply a client received before the kill stays true.

use crate::harness::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ROUNDS: usize = 8;
const EPISODES: [&str; 4] = ["crash-a", "crash-b", "crash-c", "crash-d"];
const CALLS_PER_EPISODE: usize = 3;
/// Per round: kill once this many effects of the round have started, so some
/// rounds die at the first effect and others after replies were received.
const KILL_AFTER: [usize; ROUNDS] = [1, 5, 2, 6, 9, 3, 7, 10];
/// Appends its argument to the worktree's counter, then stays busy long enough
/// for the kill to land while the effect is running.
const COUNT_SCRIPT: &str = "#!/bin/sh\necho \"$1\" >> counter.txt\nsleep 0.2\necho \"counted $1\"\n";

/// An episode index, a task id, and the reply received before the kill (if any).
type Attempt = (usize, String, Option<A2a>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Final {
    Committed,
    /// EffectsUnrecorded: an intent was journaled, the outcome of the run is not known.
    Unrecorded,
    /// Known not committed, no effect journaled.
    NotCommitted,
}

fn counter_lines(lab: &Lab) -> Vec<String> {
    EPISODES
        .iter()
        .flat_map(|ep| {
            std::fs::read_to_string(lab.worktree(ep).join("counter.txt"))
                .unwrap_or_default()
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_resent_task_id_never_runs_its_effect_twice_across_sigkill() {
    let mut lab = Lab::new(LabOptions { episodes: &EPISODES, exec: &[("count", COUNT_SCRIPT)], ..Default::default() });
    let tokens: Vec<String> = EPISODES.iter().map(|ep| lab.mint(ep, &["Workspace.Exec=worktree:100000"])).collect();
    let mut finals: BTreeMap<String, (usize, Final)> = BTreeMap::new();
    let mut received: Vec<(usize, String, A2a)> = vec![];

    for (round, kill_after) in KILL_AFTER.into_iter().enumerate() {
        let lines_before = counter_lines(&lab).len();
        let attempts: Arc<Mutex<Vec<Attempt>>> = Arc::default();
        let finished = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for (e, token) in tokens.iter().enumerate() {
                let (client, attempts, finished) = (lab.client(token), attempts.clone(), &finished);
                s.spawn(move || {
                    for k in 0..CALLS_PER_EPISODE {
                        let id = format!("r{round}-e{e}-{k}");
                        let reply =
                            client.try_send(&id, "workspace-exec", &json!({"command": "count", "args": [id]}), None);
                        let failed = reply.is_err();
                        attempts.lock().unwrap().push((e, id, reply.ok()));
                        if failed {
                            break;
                        }
                    }
                    finished.fetch_add(1, Ordering::SeqCst);
                });
            }
            // Kill right after the kill_after-th effect of this round started: it is mid-run.
            wait_for("effects to start", Duration::from_secs(30), || {
                counter_lines(&lab).len() >= lines_before + kill_after
                    || finished.load(Ordering::SeqCst) == EPISODES.len()
            });
            lab.daemon.kill9();
        });
        lab.crash_and_restart();

        let attempts = std::mem::take(&mut *attempts.lock().unwrap());
        let resent: Vec<(usize, String, Option<A2a>, A2a, A2a)> = std::thread::scope(|s| {
            let handles: Vec<_> = attempts
                .into_iter()
                .map(|(e, id, before)| {
                    let client = lab.client(&tokens[e]);
                    s.spawn(move || {
                        let args = json!({"command": "count", "args": [id]});
                        let first = client.send(&id, "workspace-exec", &args);
                        let second = client.send(&id, "workspace-exec", &args);
                        (e, id, before, first, second)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (e, id, before, first, second) in resent {
            assert_eq!(first.0, second.0, "{id}: resending is stable");
            if let Some(b) = &before {
                assert!(b.is_ok(), "{id}: a reply before the kill was an error: {}", b.0);
                assert_eq!(first.entry_index(), b.entry_index(), "{id}: same entry after the crash");
                assert_eq!(first.output(), b.output(), "{id}: same output after the crash");
                assert_eq!(first.result()["metadata"], b.result()["metadata"], "{id}");
                received.push((e, id.clone(), b.clone()));
            }
            let state = if first.is_ok() {
                assert_eq!(first.output()["world"]["effects"][0]["status"], "ok", "{}", first.0);
                Final::Committed
            } else {
                let (code, message) = first.error();
                assert_eq!(code, -32603, "{id}: {message}");
                if message.starts_with("effects were requested but the invocation was not confirmed committed") {
                    Final::Unrecorded
                } else {
                    assert_eq!(message, "invocation was not committed; send a new task id", "{id}");
                    Final::NotCommitted
                }
            };
            finals.insert(id, (e, state));
        }
    }

    // Orphaned scripts of the killed daemons finish their sleep, then the counters are final.
    std::thread::sleep(Duration::from_millis(400));
    let mut runs: BTreeMap<String, usize> = BTreeMap::new();
    for line in counter_lines(&lab) {
        *runs.entry(line).or_default() += 1;
    }
    for (id, (_, state)) in &finals {
        let n = runs.get(id).copied().unwrap_or(0);
        match state {
            Final::Committed => assert_eq!(n, 1, "{id}: a committed effect ran exactly once"),
            Final::NotCommitted => assert_eq!(n, 0, "{id}: nothing journaled, nothing ran"),
            Final::Unrecorded => assert!(n <= 1, "{id}: ran {n} times"),
        }
    }
    assert!(runs.values().all(|n| *n == 1), "no effect ran twice: {runs:?}");
    let unrecorded = finals.values().filter(|(_, s)| *s == Final::Unrecorded).count();
    assert!(unrecorded >= 1, "at least one kill landed while an effect ran: {finals:?}");
    assert!(!received.is_empty(), "some replies arrived before a kill: {finals:?}");

    // Replies received before a kill are still true at the end, and name their entries.
    for (e, id, before) in &received {
        let again = lab.client(&tokens[*e]).send(id, "workspace-exec", &json!({"command": "count", "args": [id]}));
        assert_eq!(again.0, before.0, "{id}");
        let record = lab.invocation_record(before.entry_index());
        assert_eq!(record["invocationId"], format!("a2a:{}:{id}", EPISODES[*e]));
    }
    let committed = finals.values().filter(|(_, s)| *s == Final::Committed).count();
    assert_eq!(lab.log_len(), 1 + committed, "genesis plus one entry per committed task");
    lab.verify_clean();
    eprintln!(
        "crash: {} task ids over {ROUNDS} rounds: {committed} committed, {unrecorded} unrecorded, {} not committed; {} replies received before a kill",
        finals.len(),
        finals.values().filter(|(_, s)| *s == Final::NotCommitted).count(),
        received.len()
    );
}
