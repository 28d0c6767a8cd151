//! `cargo bench -p world-server --bench peers`: a durable MCP `tools/call`
//! through a real release `worldd` (see `support/mod.rs` for which binary)
//! beside the official Rust MCP SDK (`rmcp` 3.11) serving an in-memory `echo`
//! tool, both over loopback HTTP and driven by the same client code.
//!
//! The peer is the small crate `server/benches/peers/rmcp-echo` (outside the
//! workspace, so no workspace build or `cargo tree` includes rmcp): rmcp's
//! `StreamableHttpService` on axum with `legacy_session_mode: false` and
//! `json_response: true`, its stateless streamable HTTP answered in JSON.
//! `$RMCP_ECHO_BIN` names a built one; otherwise this bench builds it in
//! release into its own target directory (`$CARGO_TARGET_DIR`, else the
//! workspace's `target`).
//!
//! Both servers are spoken to in the same MCP era, by default the legacy
//! one, on which `worldd` spends a little less CPU per call (the bench prints
//! its two eras side by side first, in turns at 8 clients): a `tools/call` with no `_meta` and no version
//! header, answered by `worldd` as one SSE event and by rmcp as JSON. rmcp
//! serves it statelessly with no `initialize` (an absent version header reads
//! as 2025-03-26). `PEERS_ERA=modern` speaks 2026-07-28 to both instead,
//! where each request stands alone by design: `_meta` carries the protocol
//! version, client capabilities and client info, and the
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers repeat what the
//! body says; both answer one JSON body. Either way rmcp needs `Accept` to
//! name both `application/json` and `text/event-stream`, and a loopback `Host`.
//! `worldd` also gets the session's bearer token. A reply counts as a call
//! only if it is a complete, non-error result whose `structuredContent` holds
//! the arguments sent (under `echo` for `worldd`) and whose first content
//! block is text; anything else is counted apart as an error.
//!
//! Each round measures each server at 1 client (p50, p99) and at 8 (req/s),
//! with the server process's CPU (user + system from `/proc/PID/stat`) per
//! call at both; the servers take turns, the order flipping every round so
//! drift on a shared machine falls on both alike. `PEERS_ROUNDS` rounds
//! (default 3), `BENCH_SECS` per row (default 3); each round also measures a
//! raw 4 KiB append + `fdatasync` in the store's directory. Every durable row
//! checks that the log grew by exactly the calls it counted. The summary is
//! the medians across rounds and the project's goals for the durable call
//! against the peer: at 8 clients at least 0.5x its req/s; at 1 client a p50
//! within 1.25x of (its p50 + one append + `fdatasync` p50); the daemon's CPU
//! per call at most 0.10 ms at 8 clients and 0.25 ms at 1. The bench prints;
//! it asserts no timing. Each `worldd` row also tells the daemon's CPU by
//! thread (the store's writer, which also writes and syncs the log, the
//! connection lanes, the rest). `PEERS_PROFILE=N` runs `worldd` alone at N clients for one row,
//! printing its pid first (for `perf record -p`), and stops there.

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use support::*;

/// Rounds unless `PEERS_ROUNDS` says otherwise.
const ROUNDS: usize = 3;
/// The two loads each server is measured under.
const LATENCY_CLIENTS: usize = 1;
const RATE_CLIENTS: usize = 8;
/// The goals the durable call is measured against.
const GOAL_RATE_RATIO: f64 = 0.5;
const GOAL_P50_FACTOR: f64 = 1.25;
const GOAL_CPU_MS_AT_8: f64 = 0.10;
const GOAL_CPU_MS_AT_1: f64 = 0.25;

/// The two servers.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Server {
    Worldd,
    Rmcp,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Worldd => "worldd durable `tools_decho`",
            Server::Rmcp => "rmcp 3.11 in-memory `echo`",
        }
    }
}

/// The MCP era a request to `worldd` speaks (the era probe compares them).
#[derive(Clone, Copy, PartialEq)]
enum Era {
    Legacy,
    Modern,
}

impl Era {
    fn other(self) -> Era {
        match self {
            Era::Legacy => Era::Modern,
            Era::Modern => Era::Legacy,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Era::Legacy => "the legacy era (no `_meta`, no version header)",
            Era::Modern => "2026-07-28",
        }
    }
}

/// A `tools/call` of `tool` with arguments `{"hello": "world", "n": n}`.
fn tools_call(url: &str, token: Option<&str>, tool: &str, era: Era, n: u64) -> Request {
    let arguments = json!({"hello": "world", "n": n});
    mcp_tools_call(url, token, tool, arguments, era == Era::Modern, n, n.to_string())
}

/// Whether a reply is a successful echo of call `key`'s arguments.
fn echoed(server: Server, era: Era, key: &str, body: &[u8]) -> Option<Value> {
    // One JSON body, or (worldd's legacy era) one SSE event.
    let result = match serde_json::from_slice::<Value>(body) {
        Ok(v) => v.get("result").cloned()?,
        Err(_) => sse_result(body)?,
    };
    // The legacy era's result has no `resultType` and may leave `isError` out.
    let complete = match era {
        Era::Legacy => result["isError"] != true,
        Era::Modern => result["resultType"] == "complete" && result["isError"] == false,
    };
    let out = match server {
        Server::Worldd => &result["structuredContent"]["echo"],
        Server::Rmcp => &result["structuredContent"],
    };
    let same = out["hello"] == "world" && out["n"].as_u64().map(|n| n.to_string()).as_deref() == Some(key);
    let good = complete && result["content"][0]["type"] == "text" && same;
    good.then_some(Value::Null)
}

/// An MCP `ping` to `worldd` (the legacy era), with the session's token.
fn ping(url: &str, token: &str, n: u64) -> Request {
    let headers = vec![
        ("Content-Type", "application/json".into()),
        ("Accept", "application/json, text/event-stream".into()),
        ("Authorization", format!("Bearer {token}")),
    ];
    let body = json!({"jsonrpc": "2.0", "id": n, "method": "ping"});
    Request {
        method: "POST",
        key: n.to_string(),
        url: url.to_string(),
        headers,
        body: serde_json::to_vec(&body).unwrap(),
    }
}

/// Whether a reply is `ping`'s empty result (one JSON body or one SSE event).
fn pinged(_key: &str, body: &[u8]) -> Option<Value> {
    let result = match serde_json::from_slice::<Value>(body) {
        Ok(v) => v.get("result").cloned()?,
        Err(_) => sse_result(body)?,
    };
    (result == json!({})).then_some(Value::Null)
}

/// The rmcp echo server's crate, beside this file.
fn rmcp_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/rmcp-echo/Cargo.toml")
}

/// `$RMCP_ECHO_BIN`, or the rmcp echo server built now (release) into the
/// bench's target directory.
fn rmcp_echo_path() -> PathBuf {
    if let Some(p) = std::env::var_os("RMCP_ECHO_BIN") {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("peers: building the rmcp echo server (release, {})", rmcp_manifest().display());
    let status = Command::new(cargo)
        .args(["build", "--release", "--locked", "--manifest-path"])
        .arg(rmcp_manifest())
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("run cargo");
    assert!(status.success(), "building the rmcp echo server failed (or set RMCP_ECHO_BIN)");
    target.join("release").join("rmcp-echo")
}

/// A running rmcp echo server; dropped, it is killed.
struct Peer {
    child: Child,
    url: String,
}

impl Peer {
    fn start(bin: &Path) -> Peer {
        let mut child = Command::new(bin)
            .arg("127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines.next().expect("rmcp-echo exited before listening").expect("stderr");
            if let Some(rest) = line.strip_prefix("rmcp-echo listening on ") {
                break rest.trim().to_string();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        Peer { child, url }
    }

    fn cpu_secs(&self) -> f64 {
        process_cpu_secs(&self.child.id().to_string())
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One server's row in one round.
struct Measured {
    server: Server,
    round: usize,
    row: Row,
    /// Server CPU seconds during the row.
    cpu: f64,
    /// Entries the log grew by during the row (`worldd` only).
    committed: Option<u64>,
    /// The daemon's CPU by thread during the row (`worldd` only).
    threads: Option<ThreadCpu>,
}

impl Measured {
    fn cpu_ms_per_call(&self) -> f64 {
        1e3 * self.cpu / self.row.calls.max(1) as f64
    }

    /// The daemon's CPU a call by thread, as "writer / lanes / rest" ms.
    fn threads_per_call(&self) -> String {
        let Some(t) = self.threads else { return "—".into() };
        let ms = |s: f64| 1e3 * s / self.row.calls.max(1) as f64;
        let rest = t.total - t.writer - t.lanes;
        format!("{:.3} / {:.3} / {:.3}", ms(t.writer), ms(t.lanes), ms(rest))
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (v[(n - 1) / 2] + v[n / 2]) / 2.0
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "not met" }
}

fn main() {
    if !invoked_as_bench("peers") {
        return;
    }
    let secs = row_secs();
    let rounds = env_or("PEERS_ROUNDS", ROUNDS).max(1);
    let era = match std::env::var("PEERS_ERA").as_deref() {
        Ok("modern") => Era::Modern,
        _ => Era::Legacy,
    };
    let rmcp_bin = rmcp_echo_path();
    let setup = Setup::new(1);
    let daemon = setup.start(&[]);
    setup.publish_builtin();
    let token = setup.mint(&setup.episodes[0]);
    genesis(&daemon.addr, &token);
    let peer = Peer::start(&rmcp_bin);
    let worldd_url = format!("http://{}/mcp/", daemon.addr);
    eprintln!(
        "peers: {} on {worldd_url}, store {}; {} on {}; {rounds} rounds, {secs} s per row",
        setup.worldd.display(),
        setup.db.display(),
        rmcp_bin.display(),
        peer.url
    );

    // One call each, checked, so a misconfigured server fails loudly here
    // rather than as a row of errors.
    for (server, url, token) in [(Server::Worldd, &worldd_url, Some(token.as_str())), (Server::Rmcp, &peer.url, None)] {
        let tool = if server == Server::Worldd { "tools_decho" } else { "echo" };
        let req = tools_call(url, token, tool, era, 7);
        let b = req.headers.iter().fold(agent().post(&req.url), |b, (k, v)| b.header(*k, v));
        let body = b.send(&req.body[..]).ok().and_then(|mut r| r.body_mut().read_to_vec().ok()).unwrap_or_default();
        let reply = String::from_utf8_lossy(&body);
        assert!(echoed(server, era, "7", &body).is_some(), "{}: one call answered {reply}", server.name());
    }

    let measure = |server: Server, era: Era, round: usize, clients: usize, secs: f64| -> Measured {
        let (url, token, tool) = match server {
            Server::Worldd => (worldd_url.as_str(), Some(token.as_str()), "tools_decho"),
            Server::Rmcp => (peer.url.as_str(), None, "echo"),
        };
        let cpu_now = || match server {
            Server::Worldd => daemon.cpu_secs(),
            Server::Rmcp => peer.cpu_secs(),
        };
        let before = (server == Server::Worldd).then(|| log_len(&daemon.addr));
        let threads = (server == Server::Worldd).then(|| daemon.cpu_by_thread());
        let cpu = cpu_now();
        let row = run_load(
            server.name(),
            clients,
            secs,
            |_, n| tools_call(url, token, tool, era, n),
            |key, b| echoed(server, era, key, b),
        );
        let cpu = cpu_now() - cpu;
        let threads = threads.map(|t| daemon.cpu_by_thread() - t);
        let committed = before.map(|b| log_len(&daemon.addr) - b);
        Measured { server, round, row, cpu, committed, threads }
    };
    let check_committed = |m: &Measured| {
        if let Some(c) = m.committed {
            assert_eq!(c, m.row.calls as u64, "{}: every counted call committed exactly one entry", m.row.label);
        }
    };

    // Warm up connections, caches and the page cache.
    for server in [Server::Worldd, Server::Rmcp] {
        check_committed(&measure(server, era, 0, 4, 0.5));
    }
    check_committed(&measure(Server::Worldd, era.other(), 0, 4, 0.5));

    // A profiling run: worldd alone at the given clients, its pid printed
    // for `perf record -p`, its CPU by thread after.
    // `PEERS_PROFILE_PING=1`: MCP `ping` instead, the floor of HTTP,
    // session and JSON-RPC under any call.
    if let Some(clients) = std::env::var("PEERS_PROFILE").ok().and_then(|c| c.parse::<usize>().ok()) {
        eprintln!("peers: profiling worldd (pid {}) at {clients} client(s) for {secs} s", daemon.pid());
        let m = if std::env::var_os("PEERS_PROFILE_PING").is_some() {
            let threads = daemon.cpu_by_thread();
            let row = run_load("worldd `ping`", clients.max(1), secs, |_, n| ping(&worldd_url, &token, n), pinged);
            let threads = daemon.cpu_by_thread() - threads;
            Measured {
                server: Server::Worldd,
                round: 1,
                row,
                cpu: threads.total,
                committed: None,
                threads: Some(threads),
            }
        } else {
            measure(Server::Worldd, era, 1, clients.max(1), secs)
        };
        check_committed(&m);
        println!(
            "{} at {clients}: {} calls, {} errors, {:.0} req/s, p50 {:.3} ms, {:.3} ms CPU/call (writer / lanes / rest: {})",
            m.row.label,
            m.row.calls,
            m.row.errors,
            m.row.rate(),
            m.row.p50(),
            m.cpu_ms_per_call(),
            m.threads_per_call()
        );
        return;
    }

    // Which of worldd's eras is cheaper, in turns at 8 clients.
    let probe = secs / 2.0;
    let mut eras = [vec![], vec![]];
    for _ in 0..2 {
        for (i, era) in [Era::Legacy, Era::Modern].into_iter().enumerate() {
            let m = measure(Server::Worldd, era, 0, RATE_CLIENTS, probe);
            check_committed(&m);
            eras[i].push(m);
        }
    }
    let era_line = |ms: &[Measured]| {
        let (calls, cpu, secs) =
            ms.iter().fold((0, 0.0, 0.0), |(c, u, s), m| (c + m.row.calls, u + m.cpu, s + m.row.secs));
        format!("{:.0} calls/s, {:.3} ms daemon CPU/call", calls as f64 / secs, 1e3 * cpu / calls.max(1) as f64)
    };
    let era_summary = format!(
        "worldd's eras at {RATE_CLIENTS} clients, durable `tools_decho` ({} s each, in turns): legacy (SSE) {}; 2026-07-28 (JSON) {}",
        2.0 * probe,
        era_line(&eras[0]),
        era_line(&eras[1])
    );
    eprintln!("peers: {era_summary}");

    let mut rows: Vec<Measured> = vec![];
    let mut fsync_p50s = vec![];
    for round in 1..=rounds {
        let order = if round % 2 == 1 { [Server::Worldd, Server::Rmcp] } else { [Server::Rmcp, Server::Worldd] };
        for server in order {
            for clients in [LATENCY_CLIENTS, RATE_CLIENTS] {
                let m = measure(server, era, round, clients, secs);
                eprintln!(
                    "peers: round {round} {} at {clients}: {:.0} req/s, p50 {:.3} ms, {:.3} ms CPU/call (writer / lanes / rest: {})",
                    server.name(),
                    m.row.rate(),
                    m.row.p50(),
                    m.cpu_ms_per_call(),
                    m.threads_per_call()
                );
                rows.push(m);
            }
        }
        fsync_p50s.push(fsync_rate(&setup.root).1);
    }
    drop(peer);
    drop(daemon);

    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!();
    println!(
        "| round | server | clients | calls | errors | committed | req/s | p50 ms | p99 ms | server CPU ms/call | bench CPU ms/call | machine busy |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for m in &rows {
        let r = &m.row;
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0}% |",
            m.round,
            r.label,
            r.clients,
            r.calls,
            r.errors,
            m.committed.map_or_else(|| "—".into(), |c| c.to_string()),
            r.rate(),
            r.p50(),
            r.p99(),
            m.cpu_ms_per_call(),
            1e3 * r.load.own_secs / r.calls.max(1) as f64,
            100.0 * r.load.busy()
        );
    }
    for m in &rows {
        check_committed(m);
    }

    // Medians across rounds.
    let med = |server: Server, clients: usize, f: fn(&Measured) -> f64| {
        median(rows.iter().filter(|m| m.server == server && m.row.clients == clients).map(f).collect())
    };
    let fsync_p50 = median(fsync_p50s);
    println!();
    println!(
        "| server | p50 ms, 1 client | p99 ms, 1 client | req/s, 8 clients | CPU ms/call, 1 client | CPU ms/call, 8 clients |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for server in [Server::Worldd, Server::Rmcp] {
        println!(
            "| {} | {:.3} | {:.3} | {:.0} | {:.3} | {:.3} |",
            server.name(),
            med(server, LATENCY_CLIENTS, |m| m.row.p50()),
            med(server, LATENCY_CLIENTS, |m| m.row.p99()),
            med(server, RATE_CLIENTS, |m| m.row.rate()),
            med(server, LATENCY_CLIENTS, Measured::cpu_ms_per_call),
            med(server, RATE_CLIENTS, Measured::cpu_ms_per_call)
        );
    }
    println!("| raw 4 KiB append + `fdatasync`, p50 | {fsync_p50:.3} | | | | |");
    println!();
    for clients in [LATENCY_CLIENTS, RATE_CLIENTS] {
        let part = |f: fn(&ThreadCpu) -> f64| {
            let of = rows.iter().filter(|m| m.server == Server::Worldd && m.row.clients == clients);
            median(of.filter_map(|m| m.threads.map(|t| 1e3 * f(&t) / m.row.calls.max(1) as f64)).collect())
        };
        println!(
            "- worldd CPU ms/call by thread at {clients} client(s), medians: writer (the log's write and sync in it) {:.3}, connection lanes {:.3}, the rest {:.3}",
            part(|t| t.writer),
            part(|t| t.lanes),
            part(|t| t.total - t.writer - t.lanes)
        );
    }

    let (w_rate, r_rate) =
        (med(Server::Worldd, RATE_CLIENTS, |m| m.row.rate()), med(Server::Rmcp, RATE_CLIENTS, |m| m.row.rate()));
    let ratio = w_rate / r_rate;
    println!(
        "- worldd / rmcp req/s at {RATE_CLIENTS} clients: {w_rate:.0} / {r_rate:.0} = {ratio:.2}x (goal ≥ {GOAL_RATE_RATIO}x): {}",
        met(ratio >= GOAL_RATE_RATIO)
    );
    let (w_p50, r_p50) =
        (med(Server::Worldd, LATENCY_CLIENTS, |m| m.row.p50()), med(Server::Rmcp, LATENCY_CLIENTS, |m| m.row.p50()));
    let bound = (r_p50 + fsync_p50) * GOAL_P50_FACTOR;
    println!(
        "- worldd p50 at {LATENCY_CLIENTS} client: {w_p50:.3} ms against (rmcp p50 {r_p50:.3} + fsync p50 {fsync_p50:.3}) x {GOAL_P50_FACTOR} = {bound:.3} ms ({:.2}x the sum): {}",
        w_p50 / (r_p50 + fsync_p50),
        met(w_p50 <= bound)
    );
    for (clients, goal) in [(RATE_CLIENTS, GOAL_CPU_MS_AT_8), (LATENCY_CLIENTS, GOAL_CPU_MS_AT_1)] {
        let (w, r) = (
            med(Server::Worldd, clients, Measured::cpu_ms_per_call),
            med(Server::Rmcp, clients, Measured::cpu_ms_per_call),
        );
        println!(
            "- worldd CPU per durable call at {clients} client(s): {w:.3} ms (goal ≤ {goal:.2} ms; rmcp {r:.3} ms, {:.1}x): {}",
            w / r,
            met(w <= goal)
        );
    }
    println!("- {era_summary}");
    println!(
        "both servers spoken to in MCP {}; medians of {rounds} round(s), {secs} s per row, {} core(s), load average at the end {}",
        era.name(),
        cores(),
        loadavg.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
}
