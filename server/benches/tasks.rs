//! `cargo bench -p world-server --bench tasks`: what following a command as
//! a task costs, through a real release `worldd` and MCP 2026-07-28.
//!
//! - a command answered in its request (`sh -c true`, no Tasks extension)
//!   beside the same command as a task: the time to its `CreateTaskResult`,
//!   and to the poll that first reads it completed (polls 5 ms apart), in
//!   turns through one daemon;
//! - a poll (`tasks/get`) of a running task: its latency and the daemon's
//!   CPU a poll;
//! - a cancel: from `tasks/cancel` to the first poll that reads the task
//!   cancelled (the command, `sleep 60`, killed and its entry committed).
//!
//! `TASKS_BENCH_CALLS` sets the calls per row and turn (default 30).

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::{BUDGET, Setup, agent, env_or, genesis, percentile};

const TURNS: usize = 3;
const POLL_GAP: Duration = Duration::from_millis(5);
const EXTENSION: &str = "io.modelcontextprotocol/tasks";

fn main() {
    if !support::invoked_as_bench("tasks") {
        return;
    }
    let calls: usize = env_or("TASKS_BENCH_CALLS", 30);
    let setup = Setup::new(1);
    let daemon = setup.start(&["--exec-allow", "sh=/bin/sh", "--tasks-max", "64"]);
    setup.publish_builtin();
    let token = setup.mint_with(&setup.episodes[0], &["--grant", &format!("Workspace.Exec=worktree:{BUDGET}")]);
    genesis(&daemon.addr, &token);
    let addr = &daemon.addr;

    let (mut sync, mut created, mut ended) = (vec![], vec![], vec![]);
    for _ in 0..TURNS {
        for _ in 0..calls {
            let started = Instant::now();
            let r = exec(addr, &token, "true", false);
            sync.push(started.elapsed());
            assert_eq!(r["result"]["resultType"], "complete", "{r}");
        }
        for _ in 0..calls {
            let started = Instant::now();
            let id = task_id(&exec(addr, &token, "true", true));
            created.push(started.elapsed());
            until(addr, &token, &id, "completed");
            ended.push(started.elapsed());
        }
    }
    for v in [&mut sync, &mut created, &mut ended] {
        v.sort();
    }
    println!("workspace-exec `sh -c true`, {calls} calls x {TURNS} turns (ms)");
    println!("{:<44} {:>8} {:>8} {:>8}", "", "p50", "p99", "ratio");
    let base = percentile(&sync, 0.5);
    for (label, v) in [
        ("answered in its request", &sync),
        ("as a task: CreateTaskResult", &created),
        ("as a task: first poll that reads it ended", &ended),
    ] {
        let (p50, p99) = (percentile(v, 0.5), percentile(v, 0.99));
        println!("{label:<44} {p50:>8.2} {p99:>8.2} {:>7.2}x", p50 / base);
    }

    // Polls of a running task.
    let id = task_id(&exec(addr, &token, "sleep 60", true));
    let (cpu_before, mut polls) = (daemon.cpu_secs(), vec![]);
    for _ in 0..calls * TURNS * 4 {
        let started = Instant::now();
        let r = get(addr, &token, &id);
        polls.push(started.elapsed());
        assert_eq!(r["result"]["status"], "working", "{r}");
    }
    let cpu_ms = (daemon.cpu_secs() - cpu_before) * 1e3 / polls.len() as f64;
    polls.sort();
    println!(
        "{:<44} {:>8.2} {:>8.2}   daemon CPU {cpu_ms:.3} ms a poll",
        "tasks/get of a running task",
        percentile(&polls, 0.5),
        percentile(&polls, 0.99)
    );
    cancel(addr, &token, &id);
    until(addr, &token, &id, "cancelled");

    // Cancels: from the ask to the first poll that reads it cancelled.
    let mut cancels = vec![];
    for _ in 0..calls {
        let id = task_id(&exec(addr, &token, "sleep 60", true));
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        cancel(addr, &token, &id);
        until(addr, &token, &id, "cancelled");
        cancels.push(started.elapsed());
    }
    cancels.sort();
    println!(
        "{:<44} {:>8.2} {:>8.2}",
        "tasks/cancel to a poll that reads cancelled",
        percentile(&cancels, 0.5),
        percentile(&cancels, 0.99)
    );
}

/// A 2026-07-28 request, the Tasks extension declared when `tasks` is set.
fn modern(addr: &str, token: &str, method: &str, mut params: Value, name: &str, tasks: bool) -> Value {
    let extensions = if tasks { json!({EXTENSION: {}}) } else { json!({}) };
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut reply = agent()
        .post(&format!("http://{addr}/mcp/"))
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .header("Mcp-Name", name)
        .send(&serde_json::to_vec(&body).unwrap()[..])
        .expect("POST /mcp/");
    serde_json::from_slice(&reply.body_mut().read_to_vec().expect("the reply")).expect("JSON")
}

fn exec(addr: &str, token: &str, script: &str, tasks: bool) -> Value {
    let params = json!({"name": "workspace-exec", "arguments": {"command": "sh", "args": ["-c", script]}});
    modern(addr, token, "tools/call", params, "workspace-exec", tasks)
}

fn get(addr: &str, token: &str, id: &str) -> Value {
    modern(addr, token, "tasks/get", json!({"taskId": id}), id, true)
}

fn cancel(addr: &str, token: &str, id: &str) {
    let r = modern(addr, token, "tasks/cancel", json!({"taskId": id}), id, true);
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
}

fn task_id(r: &Value) -> String {
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    r["result"]["taskId"].as_str().unwrap().to_string()
}

/// Polls `POLL_GAP` apart until the task reads `status`.
fn until(addr: &str, token: &str, id: &str, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = get(addr, token, id);
        if r["result"]["status"] == status {
            return;
        }
        assert!(r["result"]["status"] == "working" && Instant::now() < deadline, "{r}");
        std::thread::sleep(POLL_GAP);
    }
}
