//! `cargo bench -p world-server --bench a2a`: A2A `tasks/send` calls per
//! second through a real release `worldd` (see `support/mod.rs` for which
//! binary), end to end: HTTP, session, admission, task row, plan, broker,
//! handler, commit with fsync.
//!
//! Rows: `tools.echo` (pure) and `ailang-read` (one `Workspace.Read` of a
//! 1 KiB file) at 1, 8 and 64 concurrent clients, one episode, each client on
//! its own keep-alive connection sending fresh task ids back to back. After
//! each row, the same number of clients replays that row's committed task ids
//! (same id, same request): an idempotent replay reads the task row and the
//! committed output and runs nothing; a replay counts only if it names the
//! same entry as the original. A third tool row, `ailang-read` under an
//! approval for the session, sends the same read from a session whose grant
//! asks (`--ask Workspace.Read`), approved once with `--for-session` before
//! the row: what finding and checking the approval adds to a call. Error
//! replies are counted apart, never as
//! calls. Beside it, in the same run: the raw fsync rate of the store's
//! directory (append 4 KiB + fdatasync, n = 300), the bound on any durable
//! commit. `BENCH_SECS` sets the seconds per row (default 3).

mod support;

use serde_json::{Value, json};
use std::collections::HashMap;
use support::*;

/// The row of reads from the session whose grant asks.
const ASKED: &str = "ailang-read-asked";

fn row_label(row: &str, kind: &str) -> String {
    if row == ASKED {
        format!("`ailang-read` under an approval for the session, {kind}")
    } else {
        format!("`{row}` {kind}")
    }
}

/// Sends `first` (which waits for approval) and approves it for the session
/// through the command line, so that every identical read runs.
fn approve_for_session(setup: &Setup, first: &Request) {
    let reply = send_once(first);
    let id = reply["result"]["status"]["message"]["parts"][0]["data"]["approval"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("the asking read did not wait for approval: {reply}"))
        .to_string();
    let at = setup.at();
    setup.cli(&["approve", &id, &at[0], &at[1], "--for-session"]);
}

fn main() {
    if !invoked_as_bench("a2a") {
        return;
    }
    let secs = row_secs();
    let setup = Setup::new(1);
    let daemon = setup.start(&[]);
    setup.publish_builtin();
    let token = setup.mint(&setup.episodes[0]);
    let asking = setup.mint_with(&setup.episodes[0], &["--ask", "Workspace.Read"]);
    genesis(&daemon.addr, &token);
    eprintln!("a2a: {} ({secs} s per row), store {}", setup.worldd.display(), setup.db.display());

    let url = format!("http://{}/a2a/", daemon.addr);
    let run = format!("{:x}", std::process::id());
    // `ailang-read-asked` is the read from the session whose grant asks.
    let request = |key: String, row: &str| {
        let (tool, token) = match row {
            ASKED => ("ailang-read", &asking),
            tool => (tool, &token),
        };
        let args = if tool == "tools.echo" { json!({"hello": "world"}) } else { json!({"path": "bench.txt"}) };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {
            "id": key, "metadata": {"skill_id": tool},
            "message": {"role": "user", "parts": [{"type": "data", "data": args}]}}});
        Request {
            method: "POST",
            key,
            url: url.clone(),
            headers: vec![("Authorization", format!("Bearer {token}")), ("Content-Type", "application/json".into())],
            body: serde_json::to_vec(&body).unwrap(),
        }
    };
    approve_for_session(&setup, &request(format!("a{run}"), ASKED));
    // A success: a completed task whose output is the tool's (ok:true for the read); keeps the entry index.
    let success = |tool: &str, body: &[u8]| -> Option<Value> {
        let v: Value = serde_json::from_slice(body).ok()?;

        let out = &v["result"]["artifacts"][0]["parts"][0]["data"];
        let good = v["result"]["status"]["state"] == "completed"
            && out.is_object()
            && (tool == "tools.echo" || out["ok"] == true);
        good.then(|| v["result"]["metadata"]["entry_index"].clone())
    };

    // Warm up connections, caches and the page cache.
    for tool in ["tools.echo", "ailang-read"] {
        run_load("warm-up", 4, 0.5, |c, n| request(format!("w{run}-{tool}-{c}-{n}"), tool), |_, b| success(tool, b));
    }
    let mut rows = vec![];
    // Client counts outermost: the rows compared (a read with and without
    // an approval) run side by side, on a store of about the same size.
    for clients in [1, 8, 64] {
        for tool in ["tools.echo", "ailang-read", ASKED] {
            let label = row_label(tool, "fresh ids");
            let cpu0 = daemon.cpu_secs();
            let fresh = run_load(
                &label,
                clients,
                secs,
                |c, n| request(format!("f{run}-{tool}-{clients}-{c}-{n}"), tool),
                |_, b| success(tool, b),
            );
            let committed: HashMap<String, Value> = fresh.kept.iter().cloned().collect();
            let ids: Vec<&String> = committed.keys().collect();
            assert!(!ids.is_empty(), "{tool} at {clients} clients committed nothing; errors: {}", fresh.errors);
            let cpu1 = daemon.cpu_secs();
            let label = row_label(tool, "replays (same ids)");
            let replay = run_load(
                &label,
                clients,
                secs,
                |c, n| request(ids[(c + n as usize * clients) % ids.len()].clone(), tool),
                |key, b| success(tool, b).filter(|entry| committed.get(key) == Some(entry)),
            );
            let cpu2 = daemon.cpu_secs();
            rows.push((cpu1 - cpu0, fresh));
            rows.push((cpu2 - cpu1, replay));
        }
    }
    let (fsync, fsync_p50, fsync_p99) = fsync_rate(&setup.root);
    drop(daemon);

    println!();
    println!("| workload | clients | calls | errors | calls/s | p50 ms | p99 ms | daemon CPU ms/call |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (cpu, r) in &rows {
        println!(
            "| {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} |",
            r.label,
            r.clients,
            r.calls,
            r.errors,
            r.rate(),
            r.p50(),
            r.p99(),
            1e3 * cpu / r.calls.max(1) as f64
        );
    }
    println!();
    println!(
        "raw fsync in the store's directory (append 4 KiB + fdatasync, n={FSYNC_SAMPLES}): {fsync:.0}/s, p50 {fsync_p50:.2} ms, p99 {fsync_p99:.2} ms; {} core(s)",
        cores()
    );
}
