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

/// Writes 16 MiB files, one after another, up to 512 MiB; then says so.
const DISK_FILLER: &str = "import os\nfor i in range(32):\n    with open(f'fill-{i}', 'wb') as f:\n        f.write(os.urandom(1 << 20) * 16)\nprint('filled')\n";

/// The bytes the files beneath `dir` hold.
fn bytes_beneath(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

#[test]
fn a_disk_filler_is_stopped_at_its_worktrees_quota_and_then_nothing_grows_it_while_another_episode_is_served() {
    let lab = Lab::new(LabOptions {
        episodes: &["filler", "calm"],
        exec_allow: &["python3=/usr/bin/python3"],
        serve_args: &["--worktree-quota-mib", "64"],
        ..Default::default()
    });
    std::fs::write(lab.worktree("calm").join("hello.txt"), "calm\n").unwrap();
    let filler = lab.client(&lab.mint("filler", &["Workspace.Exec=worktree:10", "Workspace.Write=worktree:10"]));
    let calm = lab.client(&lab.mint("calm", &["Workspace.Read=worktree:10"]));
    let run = |task: &str| {
        filler
            .send(task, "workspace-exec", &json!({"command": "python3", "args": ["-c", DISK_FILLER]}))
            .output()
            .clone()
    };
    let out = run("fill-1");
    assert_eq!((&out["quota_exceeded"], &out["ok"]), (&json!(true), &json!(false)), "{out}");
    assert!(out["stderr"].as_str().unwrap().contains("MiB left in its quota; it was killed"), "{out}");
    assert!(!out["stdout"].as_str().unwrap().contains("filled"), "{out}");
    let held = bytes_beneath(&lab.worktree("filler"));
    assert!(held < 128 << 20, "the worktree holds {held} bytes: no file outgrew the room, and the run was cut");
    // At its quota: the next command does not run, and the file tools grow nothing.
    let again = run("fill-2");
    assert_eq!((&again["quota_exceeded"], &again["exit_code"]), (&json!(true), &json!(null)), "{again}");
    assert!(again["stderr"].as_str().unwrap().contains("the command did not run"), "{again}");
    assert_eq!(bytes_beneath(&lab.worktree("filler")), held, "a refused command wrote nothing");
    let write = filler.send("write-1", "ailang-write", &json!({"path": "more.txt", "content": "x".repeat(8192)}));
    assert!(
        write.output()["refused"].as_str().unwrap_or_default().contains("past its quota of 64 MiB"),
        "{:?}",
        write.output()
    );
    assert!(!lab.worktree("filler").join("more.txt").exists());
    assert_eq!(calm.send("read-1", "ailang-read", &json!({"path": "hello.txt"})).output()["content"], "calm\n");
    let (status, health) = lab.get("/v1/health");
    assert_eq!(status, 200, "{health}");
    lab.verify_clean();
}

/// `fallocate -n` reserves blocks without writing them (and, keeping the
/// size, past any file-size limit): a command's `fallocate` is refused, so
/// nothing reaches the worktree that its count of writes cannot see.
#[test]
fn a_command_cannot_reserve_blocks_its_worktrees_quota_would_not_see() {
    let lab = Lab::new(LabOptions {
        episodes: &["reserver"],
        exec_allow: &["fallocate=/usr/bin/fallocate"],
        serve_args: &["--worktree-quota-mib", "64"],
        ..Default::default()
    });
    let client = lab.client(&lab.mint("reserver", &["Workspace.Exec=worktree:10"]));
    std::fs::write(lab.worktree("reserver").join("big"), "").unwrap();
    let out =
        client.send("reserve", "workspace-exec", &json!({"command": "fallocate", "args": ["-n", "-l", "256M", "big"]}));
    let out = out.output();
    assert_eq!(out["ok"], false, "{out}");
    assert!(out["stderr"].as_str().unwrap_or_default().contains("unsupported"), "{out}");
    let held = std::fs::metadata(lab.worktree("reserver").join("big")).map_or(0, |m| {
        use std::os::unix::fs::MetadataExt;
        m.blocks() * 512
    });
    assert!(held < 64 << 20, "{held} bytes reserved");
}
