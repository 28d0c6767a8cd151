//! A real full disk: the store on a small tmpfs, filled through the daemon.
//! Calls are refused with the typed out-of-space error, reads go on, health
//! says degraded; once space is freed, writes resume without a restart, and
//! nothing acknowledged was lost. Needs `mount` (root); skipped, saying so,
//! where it is refused.

use crate::harness::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Size of the file system the store lives on.
const TMPFS_BYTES: u64 = 48 << 20;
/// Room left beside the filler: a few calls fit, then the disk is full.
const ROOM: u64 = 3 << 20;
/// How long writes may take to resume once space is back (the probe backs off to 2 s).
const RESUME_WAIT: Duration = Duration::from_secs(20);

struct Tmpfs {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Tmpfs {
    fn mount(bytes: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .status();
        status.is_ok_and(|s| s.success()).then_some(Tmpfs { _dir: dir, path })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Free bytes on the file system holding `dir`.
fn available(dir: &Path) -> u64 {
    let out = Command::new("df").args(["--output=avail", "-B1"]).arg(dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().nth(1).and_then(|l| l.trim().parse().ok()).expect("df prints the free bytes")
}

/// Fills `path` with up to `len` bytes; stops quietly when the disk is full.
fn fill(path: &Path, len: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![7u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = chunk.len().min(left as usize);
        if f.write_all(&chunk[..n]).is_err() {
            break;
        }
        left -= n as u64;
    }
}

fn health(lab: &Lab) -> (u16, serde_json::Value) {
    let r = lab.get("/v1/health");
    (r.status, r.json())
}

#[test]
fn a_full_disk_refuses_calls_typed_keeps_serving_reads_and_writes_resume_by_themselves() {
    let Some(fs) = Tmpfs::mount(TMPFS_BYTES) else {
        eprintln!("skipped: mounting a tmpfs was refused (this test needs root)");
        return;
    };
    let lab = Lab::new(LabOptions { store_dir: Some(&fs.path), ..Default::default() });
    let token = lab.mint("ep1", &["world.apply=world:100000"]);
    let before = lab.send(&token, "before", "tools.echo", &json!({"note": "before the disk filled"}));
    assert!(before.get("result").is_some(), "{before}");
    assert_eq!(health(&lab).0, 200);

    let filler = fs.path.join("filler");
    fill(&filler, available(&fs.path).saturating_sub(ROOM));
    // Each call carries its own 200 KiB (objects are stored once per content).
    let blob = |i: usize| format!("{i}:{}", "x".repeat(200 << 10));
    let refused = (0..64)
        .map(|i| (i, lab.send(&token, &format!("fill-{i}"), "tools.echo", &json!({"blob": blob(i)}))))
        .find(|(_, v)| v.get("error").is_some());
    let Some((refused_at, v)) = refused else {
        panic!(
            "the disk did not fill up within 64 calls; df: {} free\n{}",
            available(&fs.path),
            lab.daemon.stderr_text()
        )
    };
    eprintln!("the disk filled at call {refused_at}");
    assert_eq!(
        rpc_error(&v),
        (-32603, world_protocol::a2a::MSG_OUT_OF_SPACE.to_string()),
        "{v}\n{}",
        lab.daemon.stderr_text()
    );

    // Degraded, not dead: health says why; reads, replays and listings are served.
    let (status, h) = health(&lab);
    assert_eq!(status, 503, "{h}");
    assert_eq!(h["status"], "degraded");
    assert!(h["reason"].as_str().unwrap().contains("out of space"), "{h}");
    let head = lab.get("/v1/head");
    assert_eq!(head.status, 200, "{}", head.text());
    assert_eq!(lab.send(&token, "before", "tools.echo", &json!({"note": "before the disk filled"})), before);
    let list = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert!(sse(&list)["result"]["tools"].is_array(), "{}", list.text());
    assert_eq!(lab.get_auth("/.well-known/agent.json", &token).status, 200);
    // Still full: the same typed refusal, nothing half-written.
    let again = lab.send(&token, "while-full", "tools.echo", &json!({"blob": blob(1000)}));
    assert_eq!(rpc_error(&again).1, world_protocol::a2a::MSG_OUT_OF_SPACE);

    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + RESUME_WAIT;
    while health(&lab).0 != 200 {
        assert!(Instant::now() < deadline, "writes did not resume within {RESUME_WAIT:?}: {}", health(&lab).1);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(health(&lab).1["status"], "ok");
    // The refused task id was never committed: sent again, it runs now.
    let retried = lab.send(&token, &format!("fill-{refused_at}"), "tools.echo", &json!({"blob": blob(refused_at)}));
    assert!(retried.get("result").is_some(), "{retried}");
    let after = lab.send(&token, "after", "tools.echo", &json!({"note": "after"}));
    assert!(after.get("result").is_some(), "{after}");
    // Every acknowledged call is still answered exactly as before.
    for i in 0..refused_at {
        let id = format!("fill-{i}");
        let v = lab.send(&token, &id, "tools.echo", &json!({"blob": blob(i)}));
        assert!(v.get("result").is_some(), "{id}: {v}");
    }
    lab.verify_clean();
}
