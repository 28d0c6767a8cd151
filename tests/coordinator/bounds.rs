//! A run is bounded as a whole: eight commands that each try to take a
//! gigabyte at once are each killed at their memory bound, said so in their
//! output, while another episode's calls are served and the store stays sound.

use crate::harness::*;
use serde_json::json;

/// Takes 16 MiB at a time, written (so resident), up to 1 GiB; then says so.
const MEMORY_BOMB: &str = "x = []\nfor _ in range(64):\n    x.append(b'x' * (16 << 20))\nprint('survived')\n";

#[test]
fn eight_memory_bombs_at_once_are_each_killed_at_their_bound_while_another_episode_is_served() {
    let bombs: Vec<String> = (0..8).map(|i| format!("bomb{i}")).collect();
    let mut episodes: Vec<&str> = bombs.iter().map(String::as_str).collect();
    episodes.push("calm");
    let lab = Lab::new(LabOptions {
        episodes: &episodes,
        exec_allow: &["python3=/usr/bin/python3"],
        serve_args: &["--exec-memory-mib", "256"],
        ..Default::default()
    });
    std::fs::write(lab.worktree("calm").join("hello.txt"), "calm\n").unwrap();
    let calm = lab.client(&lab.mint("calm", &["Workspace.Read=worktree:100"]));
    let clients: Vec<Client> =
        bombs.iter().map(|ep| lab.client(&lab.mint(ep, &["Workspace.Exec=worktree:10"]))).collect();
    let (outputs, reads) = std::thread::scope(|s| {
        let runs: Vec<_> = clients
            .iter()
            .map(|c| {
                s.spawn(move || {
                    c.send("bomb", "workspace-exec", &json!({"command": "python3", "args": ["-c", MEMORY_BOMB]}))
                        .output()
                        .clone()
                })
            })
            .collect();
        let reads: Vec<bool> = (0..20)
            .map(|i| {
                calm.send(&format!("read-{i}"), "ailang-read", &json!({"path": "hello.txt"})).output()["ok"] == true
            })
            .collect();
        (runs.into_iter().map(|r| r.join().unwrap()).collect::<Vec<_>>(), reads)
    });
    for out in &outputs {
        assert_eq!((&out["memory_exceeded"], &out["ok"]), (&json!(true), &json!(false)), "{out}");
        let stderr = out["stderr"].as_str().unwrap_or_default();
        assert!(stderr.contains("exceeded its memory bound of 256 MiB"), "{out}");
        assert!(!out["stdout"].as_str().unwrap_or_default().contains("survived"), "{out}");
    }
    assert!(reads.iter().all(|ok| *ok), "another episode's reads: {reads:?}");
    let (status, health) = lab.get("/v1/health");
    assert_eq!(status, 200, "{health}");
    lab.verify_clean();
}
