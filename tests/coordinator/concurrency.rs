//! Episodes calling at once all commit onto one valid chain.

use crate::harness::*;
use serde_json::json;
use std::collections::BTreeSet;

const EPISODES: usize = 8;
const CALLS_PER_EPISODE: usize = 4;

#[test]
fn eight_episodes_calling_at_once_all_commit_onto_one_chain() {
    let names_: Vec<String> = (0..EPISODES).map(|i| format!("ep-{i}")).collect();
    let episodes: Vec<&str> = names_.iter().map(String::as_str).collect();
    let lab = Lab::new(LabOptions { episodes: &episodes, ..Default::default() });
    let tokens: Vec<String> = episodes
        .iter()
        .map(|ep| {
            lab.mint(ep, &["Workspace.Write=worktree:100", "Workspace.Read=worktree:100", "world.apply=world:100"])
        })
        .collect();
    let log_before = lab.log_len();

    // Every episode sends all its calls at once: effectful ones (serialised within
    // the episode) and pure ones (not), all episodes interleaved.
    let replies: Vec<(usize, usize, A2a)> = std::thread::scope(|s| {
        let mut handles = vec![];
        for (e, token) in tokens.iter().enumerate() {
            for k in 0..CALLS_PER_EPISODE {
                let client = lab.client(token);
                handles.push(s.spawn(move || {
                    let reply = match k % 2 {
                        0 => client.send(
                            &format!("w{k}"),
                            "ailang-write",
                            &json!({"path": format!("notes/{k}.txt"), "content": format!("episode {e} call {k}\n")}),
                        ),
                        _ => client.send(&format!("echo{k}"), "tools.echo", &json!({"episode": e, "call": k})),
                    };
                    (e, k, reply)
                }));
            }
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let total = EPISODES * CALLS_PER_EPISODE;
    for (e, k, r) in &replies {
        assert!(r.is_ok(), "episode {e} call {k} did not commit: {}", r.0);
        match k % 2 {
            0 => assert_eq!((r.effect_status().as_deref(), &r.output()["ok"]), (Some("ok"), &json!(true)), "{}", r.0),
            _ => assert_eq!(r.output()["echo"], json!({"episode": e, "call": k})),
        }
    }
    let indices: BTreeSet<u64> = replies.iter().map(|(_, _, r)| r.entry_index()).collect();
    let expected: BTreeSet<u64> = (log_before as u64..(log_before + total) as u64).collect();
    assert_eq!(indices, expected, "every call got its own index, contiguously after the head");

    // One valid chain: contiguous indices, each prevEntryHash the previous entryHash, the head world on the last.
    let log = lab.log();
    assert_eq!(log.len(), log_before + total, "genesis plus one entry per call");
    for (i, pair) in log.windows(2).enumerate() {
        assert_eq!(pair[1]["header"]["entryIndex"], i as u64 + 1);
        assert_eq!(pair[1]["header"]["prevEntryHash"], pair[0]["entryHash"], "entry {} chains", i + 1);
    }
    let (_, head) = lab.get("/v1/head");
    let head = head.as_str().unwrap().trim().to_string();
    let (_, world) = lab.get(&format!("/v1/worlds/{head}"));
    assert_eq!(world["logHead"], log.last().unwrap()["entryHash"]);
    assert_eq!(world["revision"], (log.len() - 1) as u64);

    // Each worktree holds exactly its own episode's files.
    for (e, ep) in episodes.iter().enumerate() {
        let dir = lab.worktree(ep).join("notes");
        assert_eq!(names(&dir), ["0.txt", "2.txt"], "{ep}");
        assert_eq!(std::fs::read_to_string(dir.join("2.txt")).unwrap(), format!("episode {e} call 2\n"));
    }
    let report = lab.verify_clean();
    assert_eq!(report["counts"]["logEntries"], (log_before + total) as u64);
}

/// An episode's effects run one at a time, and its entries sit in the log in
/// the order its effects ran: replaying the episode's calls in log order, every
/// read returns what the last write before it wrote. (A call lets the next
/// effect run once its commit is queued, ahead of the next intent.)
#[test]
fn an_episodes_effects_sit_in_the_log_in_the_order_they_ran() {
    const CALLS: usize = 24;
    let lab = Lab::new(LabOptions { episodes: &["ep"], ..Default::default() });
    let token = lab.mint("ep", &["Workspace.Write=worktree:1000", "Workspace.Read=worktree:1000"]);
    let seed = lab.client(&token).send("seed", "ailang-write", &json!({"path": "shared.txt", "content": "seed"}));
    assert!(seed.is_ok(), "{}", seed.0);

    let mut replies: Vec<(usize, A2a)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CALLS)
            .map(|k| {
                let client = lab.client(&token);
                s.spawn(move || {
                    let reply = match k % 2 {
                        0 => client.send(
                            &format!("write-{k}"),
                            "ailang-write",
                            &json!({"path": "shared.txt", "content": format!("written by call {k}")}),
                        ),
                        _ => client.send(&format!("read-{k}"), "ailang-read", &json!({"path": "shared.txt"})),
                    };
                    (k, reply)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    replies.sort_by_key(|(_, r)| r.entry_index());
    let mut content = "seed".to_string();
    for (k, r) in &replies {
        assert!(r.is_ok(), "call {k} did not commit: {}", r.0);
        match k % 2 {
            0 => content = format!("written by call {k}"),
            _ => assert_eq!(
                r.output()["content"],
                json!(content),
                "read {k} (entry {}) saw another write than the last one before it in the log",
                r.entry_index()
            ),
        }
    }
}
