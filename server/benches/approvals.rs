//! `cargo bench -p world-server --bench approvals`: what binding a command's
//! approval to its worktree costs a call. A command run under a grant that
//! asks (approved for the session once, so every call runs) reads the state
//! of the whole worktree first (`effects::state`: one `stat` per entry);
//! beside it, the same command under a grant that does not ask, through the
//! same daemon, in turns. Worktrees of 10, 2,000 and 20,000 files; the
//! command is `true`, so the run itself is as cheap as a confined run gets.
//!
//! `APPROVALS_BENCH_CALLS` sets the calls per row and turn (default 40).

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::{BUDGET, Setup, agent, env_or, genesis, percentile, sse_result};

const SIZES: [usize; 3] = [10, 2_000, 20_000];
const TURNS: usize = 3;

fn main() {
    if !support::invoked_as_bench("approvals") {
        return;
    }
    let calls: usize = env_or("APPROVALS_BENCH_CALLS", 40);
    println!("workspace-exec `true`, p50 of {calls} calls x {TURNS} turns per row (ms)");
    println!("{:>8} {:>10} {:>10} {:>8} {:>9}", "files", "plain", "asks", "added", "ratio");
    for files in SIZES {
        let setup = Setup::new(1);
        let worktree = setup.ws.join(&setup.episodes[0]);
        fill(&worktree, files);
        let daemon = setup.start(&["--exec-allow", "true=/usr/bin/true"]);
        setup.publish_builtin();
        let exec = format!("Workspace.Exec=worktree:{BUDGET}");
        let plain = setup.mint_with(&setup.episodes[0], &["--grant", &exec]);
        let asks = setup.mint_with(&setup.episodes[0], &["--grant", &exec, "--ask", "Workspace.Exec"]);
        genesis(&daemon.addr, &plain);
        let first = call(&daemon.addr, &asks);
        let id = approval_id(&first).unwrap_or_else(|| panic!("the asking grant asks: {first}"));
        setup.cli(&["approve", &id, "--for-session", "--db", setup.db.to_str().unwrap()]);
        let (mut plain_ms, mut asks_ms) = (vec![], vec![]);
        for _ in 0..TURNS {
            plain_ms.extend(timed(&daemon.addr, &plain, calls));
            asks_ms.extend(timed(&daemon.addr, &asks, calls));
        }
        plain_ms.sort();
        asks_ms.sort();
        let (p, a) = (percentile(&plain_ms, 0.5), percentile(&asks_ms, 0.5));
        println!("{files:>8} {p:>10.2} {a:>10.2} {:>8.2} {:>8.2}x", a - p, a / p);
    }
}

/// `files` files of 100 bytes, 100 to a directory.
fn fill(worktree: &std::path::Path, files: usize) {
    for i in 0..files {
        let dir = worktree.join(format!("d{}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), [b'x'; 100]).unwrap();
    }
}

/// `n` calls back to back; panics on any that did not run.
fn timed(addr: &str, token: &str, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let started = Instant::now();
            let result = call(addr, token);
            let took = started.elapsed();
            let ran = result["structuredContent"]["world"]["effects"][0]["status"] == "ok";
            assert!(ran, "the command ran: {result}");
            took
        })
        .collect()
}

fn call(addr: &str, token: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "workspace-exec", "arguments": {"command": "true"}}});
    let mut reply = agent()
        .post(&format!("http://{addr}/mcp/"))
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .send(&serde_json::to_vec(&body).unwrap()[..])
        .expect("POST /mcp/");
    let bytes = reply.body_mut().read_to_vec().expect("the reply");
    sse_result(&bytes).unwrap_or_else(|| panic!("one SSE result: {}", String::from_utf8_lossy(&bytes)))
}

/// The approval a waiting call's tool result names.
fn approval_id(result: &Value) -> Option<String> {
    let text = result["content"][0]["text"].as_str()?;
    let id = text.split("Approval ").nth(1)?.split(' ').next()?;
    Some(id.to_string())
}
