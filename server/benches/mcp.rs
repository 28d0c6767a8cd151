//! `cargo bench -p world-server --bench mcp`: MCP `tools/call` per second
//! through a real release `worldd` (see `support/mod.rs` for which binary)
//! over loopback HTTP, each call durably committed (checked after every row:
//! the log grew by exactly the calls counted), and beside it the same load
//! against a minimal in-process axum JSON-RPC echo handler with no store.
//!
//! Durable rows: `tools_decho` (pure) and `ailang-read` (one `Workspace.Read`
//! of a 1 KiB file, one episode) at 1 and 8 concurrent clients under the
//! default 8 host callbacks, `tools_decho` in both MCP eras (the legacy era
//! answers one SSE event; 2026-07-28 carries `_meta` and the `Mcp-*` headers
//! and answers JSON; the two eras alternate in slices, as do their
//! `tools/list` rows, which show the eras' own costs without a store write), and at 64 clients with `--host-callbacks 64`
//! (a second daemon on the same store). Each client has its own keep-alive
//! connection (a `ureq` agent) and sends back to back. A call answered with
//! an error envelope (or anything but a successful SSE result) is counted
//! apart, never as a call. A `ping` row through the same daemon (session,
//! view and surface, no call) shows what the transport costs before any
//! invocation. Each row also prints the CPU this process (the load
//! generator) spent per call and how busy the machine's cores were: a row
//! whose machine is busy is bound by CPU, the generator's share included.
//!
//! The floor: the store alone, in this process, at 1 and 8 committer threads
//! writing exactly what the daemon writes per pure call (`store_floor`): the
//! bound any durable surface meets before HTTP, sessions or admission.
//!
//! The ceiling: the same client code and headers against an axum router in
//! this process, served by the daemon's own HTTP/1 stack (hyper-util,
//! `TCP_NODELAY`), whose handler parses the JSON-RPC body and answers one SSE
//! event echoing the arguments as `content` + `structuredContent`: HTTP and
//! JSON, no session, no store, no fsync. The goal is a durable path at 8
//! clients of at least 25% of that ceiling. `BENCH_SECS` sets the seconds per
//! row (default 3).
//!
//! `BENCH_METRICS=1` runs instead what the metrics cost: the durable rows
//! (`tools_decho` at 1 and 8 clients, `ailang-read` at 8) against a daemon
//! with metrics and one started with `--no-metrics` (nothing counted on the
//! call path, no `/metrics`), each round on a fresh store, in
//! `METRICS_ROUNDS` rounds each, alternating (on off, off on, …: drift falls
//! on both alike); per row the medians of each side's rounds and their ratio.

mod support;

use axum::body::Bytes;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use support::*;

/// The era a durable row speaks.
#[derive(Clone, Copy, PartialEq)]
enum Era {
    Legacy,
    Modern,
}

fn success(tool: &str, era: Era, body: &[u8]) -> Option<Value> {
    let result = match era {
        Era::Legacy => sse_result(body)?,
        Era::Modern => {
            let result = serde_json::from_slice::<Value>(body).ok()?.get("result").cloned()?;
            (result["resultType"] == "complete" && result["isError"] == false).then_some(result)?
        }
    };
    let out = result.get("structuredContent")?;
    let text_ok = result["content"][0]["type"] == "text";
    let good = text_ok && out.is_object() && (tool == "tools_decho" || out["ok"] == true);
    good.then_some(Value::Null)
}

/// A `tools/call` of `tool` (`tools_decho` or `ailang-read`) in `era`.
fn tools_call(addr: &str, token: &str, tool: &str, era: Era, n: u64) -> Request {
    let args = if tool == "tools_decho" { json!({"hello": "world"}) } else { json!({"path": "bench.txt"}) };
    let url = format!("http://{addr}/mcp/");
    mcp_tools_call(&url, Some(token), tool, args, era == Era::Modern, n, String::new())
}

async fn echo(body: Bytes) -> Response {
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return (axum::http::StatusCode::BAD_REQUEST, "bad json").into_response();
    };
    let out = json!({"echo": v["params"]["arguments"], "world": {"effects": [], "plan": null}});
    let reply = json!({"jsonrpc": "2.0", "id": v["id"], "result": {
        "content": [{"type": "text", "text": out.to_string()}], "structuredContent": out}});
    let body = format!("event: message\ndata: {reply}\n\n");
    let mut r = body.into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// Serves the echo router on 127.0.0.1:0 from a runtime of its own, the
/// way `worldd` serves (hyper-util HTTP/1, one task per connection, NODELAY).
fn start_echo() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().to_string()).unwrap();
            let app = axum::Router::new().route("/mcp/", axum::routing::post(echo));
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let _ = stream.set_nodelay(true);
                let svc = hyper_util::service::TowerToHyperService::new(app.clone());
                tokio::spawn(async move {
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
                    let _ = conn.await;
                });
            }
        });
    });
    rx.recv().unwrap()
}

struct Measured {
    row: Row,
    /// Entries the log grew by during the row (durable rows only).
    committed: Option<u64>,
    /// Daemon CPU seconds used during the row (rows against `worldd`).
    cpu: Option<f64>,
    /// Bytes written to storage during the row (durable rows): by the
    /// daemon, and by the store's device.
    disk: Option<Written>,
}

/// Slices per era in the era comparison rows (legacy, modern, legacy, …).
const ERA_SLICES: usize = 4;

impl Measured {
    fn merged(slices: Vec<Measured>) -> Measured {
        let add = |a: Option<_>, b: Option<_>| a.zip(b).map(|(a, b)| a + b);
        let committed = slices.iter().map(|m| m.committed).reduce(add).flatten();
        let disk = slices.iter().map(|m| m.disk).reduce(|a, b| a.zip(b).map(|(a, b)| a + b)).flatten();
        let cpu = slices.iter().map(|m| m.cpu).reduce(|a, b| a.zip(b).map(|(a, b)| a + b)).flatten();
        Measured { row: Row::merged(slices.into_iter().map(|m| m.row).collect()), committed, cpu, disk }
    }
}

fn main() {
    if !invoked_as_bench("mcp") {
        return;
    }
    let secs = row_secs();
    if std::env::var_os("BENCH_METRICS").is_some() {
        metrics_cost(secs);
        return;
    }
    let setup = Setup::new(1);
    let mut daemon = setup.start(&[]);
    setup.publish_builtin();
    let token = setup.mint(&setup.episodes[0]);
    genesis(&daemon.addr, &token);
    let echo_addr = start_echo();
    eprintln!(
        "mcp: {} ({secs} s per row), store {}; echo ceiling on {echo_addr}",
        setup.worldd.display(),
        setup.db.display()
    );

    let request = |addr: &str, tool: &str, era: Era, n: u64| tools_call(addr, &token, tool, era, n);
    let durable_in = |d: &Daemon, label: &str, tool: &str, era: Era, clients: usize, secs: f64| {
        let before = log_len(&d.addr);
        let (cpu, disk) = (d.cpu_secs(), d.written(&setup.db));
        let row = run_load(label, clients, secs, |_, n| request(&d.addr, tool, era, n), |_, b| success(tool, era, b));
        let (cpu, disk) = (d.cpu_secs() - cpu, d.written(&setup.db).since(disk));
        let committed = log_len(&d.addr) - before;
        Measured { row, committed: Some(committed), cpu: Some(cpu), disk: Some(disk) }
    };
    let durable = |d: &Daemon, label: &str, tool: &str, clients: usize, secs: f64| {
        durable_in(d, label, tool, Era::Legacy, clients, secs)
    };
    let ceiling = |clients: usize, secs: f64| Measured {
        row: run_load(
            "echo ceiling (in-process axum, no store)",
            clients,
            secs,
            |_, n| request(&echo_addr, "tools_decho", Era::Legacy, n),
            |_, b| success("tools_decho", Era::Legacy, b),
        ),
        committed: None,
        cpu: None,
        disk: None,
    };

    // MCP `ping` through the daemon: session, view and surface, no call, no store write.
    let ping = |d: &Daemon, clients: usize, secs: f64| {
        let addr = d.addr.as_str();
        let cpu = d.cpu_secs();
        let row = run_load(
            "`ping` (session + view, no call)",
            clients,
            secs,
            |_, n| {
                let mut r = request(addr, "tools_decho", Era::Legacy, n);
                r.body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": n, "method": "ping"})).unwrap();
                r
            },
            |_, b| sse_result(b).filter(|r| r == &json!({})),
        );
        Measured { row, committed: None, cpu: Some(d.cpu_secs() - cpu), disk: None }
    };

    // `GET /v1/health`: the HTTP stack and routing alone, the floor under any MCP request.
    let health = |d: &Daemon, clients: usize, secs: f64| {
        let addr = d.addr.as_str();
        let row = run_load(
            "`GET /v1/health` (no session, no MCP)",
            clients,
            secs,
            |_, _| Request {
                method: "GET",
                key: String::new(),
                url: format!("http://{addr}/v1/health"),
                headers: vec![],
                body: vec![],
            },
            |_, b| serde_json::from_slice::<Value>(b).ok().filter(|v| v["status"] == "ok").map(|_| Value::Null),
        );
        Measured { row, committed: None, cpu: None, disk: None }
    };

    // `tools/list` in each era: the whole wire path (session, view, surface,
    // era checks, reply framing) with no call, so the eras' own costs show.
    let list = |d: &Daemon, era: Era, clients: usize, secs: f64| {
        let addr = d.addr.as_str();
        let label = match era {
            Era::Legacy => "`tools/list` legacy (SSE)",
            Era::Modern => "`tools/list` 2026-07-28 (JSON)",
        };
        // Built once: the client's own work per request is the same in both eras.
        let mut template = request(addr, "tools_decho", era, 1);
        let mut body: Value = serde_json::from_slice(&template.body).unwrap();
        body["method"] = json!("tools/list");
        body["params"].as_object_mut().unwrap().retain(|k, _| k == "_meta");
        template.headers.retain(|(h, _)| *h != "Mcp-Name");
        template.headers.iter_mut().filter(|(h, _)| *h == "Mcp-Method").for_each(|(_, v)| *v = "tools/list".into());
        template.body = serde_json::to_vec(&body).unwrap();
        let row = run_load(
            label,
            clients,
            secs,
            |_, _| Request {
                method: template.method,
                key: String::new(),
                url: template.url.clone(),
                headers: template.headers.clone(),
                body: template.body.clone(),
            },
            |_, b| {
                let result = match era {
                    Era::Legacy => sse_result(b)?,
                    Era::Modern => serde_json::from_slice::<Value>(b).ok()?.get("result").cloned()?,
                };
                result["tools"].as_array().is_some_and(|t| !t.is_empty()).then_some(Value::Null)
            },
        );
        Measured { row, committed: None, cpu: None, disk: None }
    };

    // Warm up connections, caches and the page cache.
    durable(&daemon, "warm-up", "tools_decho", 4, 0.5);
    durable(&daemon, "warm-up", "ailang-read", 4, 0.5);
    durable_in(&daemon, "warm-up", "tools_decho", Era::Modern, 4, 0.5);
    ceiling(4, 0.5);
    let mut rows = vec![];
    for clients in [1, 8] {
        rows.push(ceiling(clients, secs));
        rows.push(health(&daemon, clients, secs));
        rows.push(ping(&daemon, clients, secs));
        // The eras alternate in slices, so drift on a shared machine falls on both alike.
        let slice = secs / ERA_SLICES as f64;
        let (mut lists, mut calls) = ([vec![], vec![]], [vec![], vec![]]);
        for _ in 0..ERA_SLICES {
            for (i, era) in [Era::Legacy, Era::Modern].into_iter().enumerate() {
                lists[i].push(list(&daemon, era, clients, slice));
                let label = match era {
                    Era::Legacy => "`tools_decho`, 8 host callbacks",
                    Era::Modern => "`tools_decho` 2026-07-28 (JSON), 8 host callbacks",
                };
                calls[i].push(durable_in(&daemon, label, "tools_decho", era, clients, slice));
            }
        }
        for measured in lists.into_iter().chain(calls) {
            rows.push(Measured::merged(measured));
        }
        rows.push(durable(&daemon, "`ailang-read`, 8 host callbacks", "ailang-read", clients, secs));
        rows.push(Measured { row: store_floor(&setup.root, clients, secs), committed: None, cpu: None, disk: None });
    }
    drop(daemon);
    daemon = setup.start(&["--host-callbacks", "64"]);
    durable(&daemon, "warm-up", "tools_decho", 4, 0.5);
    rows.push(ceiling(64, secs));
    rows.push(durable(&daemon, "`tools_decho`, `--host-callbacks 64`", "tools_decho", 64, secs));
    rows.push(durable(&daemon, "`ailang-read`, `--host-callbacks 64`", "ailang-read", 64, secs));
    let (fsync, fsync_p50, fsync_p99) = fsync_rate(&setup.root);
    drop(daemon);

    println!();
    println!(
        "| target | clients | calls | errors | committed | calls/s | p50 ms | p99 ms | daemon CPU ms/call | bench CPU ms/call | machine busy | disk KiB/call (daemon / device) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for m in &rows {
        let r = &m.row;
        let committed = m.committed.map(|c| c.to_string()).unwrap_or_else(|| "—".into());
        let cpu = m.cpu.map(|c| format!("{:.2}", 1e3 * c / r.calls.max(1) as f64)).unwrap_or_else(|| "—".into());
        let disk = m.disk.map(|w| w.per(r.calls)).unwrap_or_else(|| "—".into());
        let bench = format!("{:.2}", 1e3 * r.load.own_secs / r.calls.max(1) as f64);
        let busy = format!("{:.0}%", 100.0 * r.load.busy());
        println!(
            "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {} | {} | {} | {} |",
            r.label,
            r.clients,
            r.calls,
            r.errors,
            committed,
            r.rate(),
            r.p50(),
            r.p99(),
            cpu,
            bench,
            busy,
            disk
        );
        if let Some(c) = m.committed {
            assert_eq!(c, r.calls as u64, "{}: every counted call committed exactly one entry", r.label);
        }
    }
    let find = |clients: usize, label: &str| {
        rows.iter().find(|m| m.row.clients == clients && m.row.label.starts_with(label)).unwrap()
    };
    let at = |clients: usize, label: &str| find(clients, label).row.rate();
    let ceiling8 = at(8, "echo ceiling");
    println!();
    println!(
        "at 8 clients: `tools_decho` {:.0}% and `ailang-read` {:.0}% of the echo ceiling ({ceiling8:.0} calls/s); goal ≥ 25%",
        100.0 * at(8, "`tools_decho`") / ceiling8,
        100.0 * at(8, "`ailang-read`") / ceiling8
    );
    let (call8, ping8) = (find(8, "`tools_decho`, 8"), find(8, "`ping`"));
    let per_call = |secs: f64| 1e3 * secs / call8.row.calls.max(1) as f64;
    println!(
        "at 8 clients a durable `tools_decho` is {:.2} of `ping` ({:.0} of {:.0} calls/s; goal ≥ 0.5): per call the daemon spends {:.3} ms of CPU and this load generator {:.3} ms, the machine {:.0}% busy",
        call8.row.rate() / ping8.row.rate(),
        call8.row.rate(),
        ping8.row.rate(),
        per_call(call8.cpu.unwrap_or(f64::NAN)),
        per_call(call8.row.load.own_secs),
        100.0 * call8.row.load.busy()
    );
    for clients in [1, 8] {
        let (legacy, modern) = (at(clients, "`tools_decho`, 8"), at(clients, "`tools_decho` 2026"));
        let (list_legacy, list_modern) = (at(clients, "`tools/list` legacy"), at(clients, "`tools/list` 2026"));
        println!(
            "at {clients} client(s), 2026-07-28 over legacy: `tools_decho` {modern:.0}/{legacy:.0} calls/s = {:.2}x; `tools/list` {list_modern:.0}/{list_legacy:.0} = {:.2}x",
            modern / legacy,
            list_modern / list_legacy
        );
    }
    let p50 = |clients: usize, label: &str| find(clients, label).row.p50();
    let (call1, health1) = (p50(1, "`tools_decho`, 8"), p50(1, "`GET /v1/health`"));
    println!(
        "at 1 client a durable `tools_decho` p50 is {call1:.2} ms = {:.1}x (`GET /v1/health` p50 {health1:.2} ms + one raw append+fdatasync p50 {fsync_p50:.2} ms)",
        call1 / (health1 + fsync_p50)
    );
    let disk8 = call8.disk.map(|w| w.per(call8.row.calls)).unwrap_or_default();
    println!(
        "at 8 clients a durable `tools_decho` writes {disk8} KiB per call (the daemon's /proc write_bytes / the store device's sectors written)"
    );
    let floor8 = at(8, "store alone");
    println!(
        "at 8 clients the store alone commits {floor8:.0} calls/s ({:.0}% of the echo ceiling): no durable surface can pass that; `tools_decho` reaches {:.0}% of it",
        100.0 * floor8 / ceiling8,
        100.0 * at(8, "`tools_decho`") / floor8
    );
    println!(
        "raw fsync in the store's directory (append 4 KiB + fdatasync, n={FSYNC_SAMPLES}): {fsync:.0}/s, p50 {fsync_p50:.2} ms, p99 {fsync_p99:.2} ms; {} core(s)",
        cores()
    );
}

/// Rounds per side in the `BENCH_METRICS` comparison: even, so that the
/// order on off off on … puts both sides' medians at the same mean position.
const METRICS_ROUNDS: usize = 4;

/// One side's measurement of one row in one round.
#[derive(Clone, Copy)]
struct Sample {
    rate: f64,
    p50: f64,
    p99: f64,
    /// Daemon CPU per call, ms: steadier than a rate on a shared machine.
    cpu: f64,
}

/// The durable rows with metrics on and off (`BENCH_METRICS`): each round a
/// fresh store and daemon (a store growing across rounds slows later ones),
/// the sides in the order on off off on on off off on; per row and side the
/// median of the rounds' calls/s, p50, p99 and daemon CPU per call, and
/// on/off ratios of those medians.
fn metrics_cost(secs: f64) {
    let rows: [(&str, &str, usize); 3] =
        [("`tools_decho`", "tools_decho", 1), ("`tools_decho`", "tools_decho", 8), ("`ailang-read`", "ailang-read", 8)];
    // [row][side: 0 on, 1 off], one sample per round.
    let mut seen: Vec<[Vec<Sample>; 2]> = vec![[vec![], vec![]]; rows.len()];
    let order = (0..METRICS_ROUNDS).flat_map(|r| if r % 2 == 0 { [true, false] } else { [false, true] });
    eprintln!("mcp, metrics on and off: {} ({secs} s per row)", worldd_path().display());
    println!();
    println!("| round | metrics | target | clients | calls | calls/s | p50 ms | p99 ms | daemon CPU ms/call |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|");
    for (round, on) in order.enumerate() {
        let setup = Setup::new(1);
        let daemon = setup.start(if on { &[] } else { &["--no-metrics"] });
        setup.publish_builtin();
        let token = setup.mint(&setup.episodes[0]);
        genesis(&daemon.addr, &token);
        let metrics = agent().get(&format!("http://{}/metrics", daemon.addr)).call().expect("GET /metrics");
        assert_eq!(metrics.status().as_u16(), if on { 200 } else { 404 }, "metrics on: {on}");
        let durable = |label: &str, tool: &str, clients: usize, secs: f64| {
            let (before, cpu) = (log_len(&daemon.addr), daemon.cpu_secs());
            let row = run_load(
                label,
                clients,
                secs,
                |_, n| tools_call(&daemon.addr, &token, tool, Era::Legacy, n),
                |_, b| success(tool, Era::Legacy, b),
            );
            let cpu = 1e3 * (daemon.cpu_secs() - cpu) / row.calls.max(1) as f64;
            assert_eq!(
                log_len(&daemon.addr) - before,
                row.calls as u64,
                "{label}: every counted call committed one entry"
            );
            (row, cpu)
        };
        durable("warm-up", "tools_decho", 4, 0.5);
        durable("warm-up", "ailang-read", 4, 0.5);
        for (i, (label, tool, clients)) in rows.iter().enumerate() {
            let (r, cpu) = durable(label, tool, *clients, secs);
            let side = if on { "on" } else { "off" };
            let sample = Sample { rate: r.rate(), p50: r.p50(), p99: r.p99(), cpu };
            println!(
                "| {} | {side} | {label} | {clients} | {} | {:.0} | {:.2} | {:.2} | {cpu:.3} |",
                round + 1,
                r.calls,
                sample.rate,
                sample.p50,
                sample.p99
            );
            seen[i][usize::from(!on)].push(sample);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        (v[(n - 1) / 2] + v[n / 2]) / 2.0
    };
    println!();
    println!(
        "| target | clients | calls/s on | off | on/off | p50 ms on | off | on/off | p99 ms on | off | on/off | CPU ms/call on | off | on/off |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut spreads = vec![];
    let fields: [fn(&Sample) -> f64; 4] = [|s| s.rate, |s| s.p50, |s| s.p99, |s| s.cpu];
    for ((label, _, clients), sides) in rows.iter().zip(seen) {
        let mut cells = vec![];
        for f in fields {
            let (on, off) = (median(sides[0].iter().map(f).collect()), median(sides[1].iter().map(f).collect()));
            cells.push(format!("{on:.3} | {off:.3} | {:.3}", on / off));
        }
        println!("| {label} | {clients} | {} |", cells.join(" | "));
        // How far apart one side's own rounds are: a ratio inside it is noise.
        let spread = |side: &[Sample]| {
            let rates = side.iter().map(|s| s.rate);
            rates.clone().fold(f64::MIN, f64::max) / rates.fold(f64::MAX, f64::min)
        };
        spreads.push(format!("{label} at {clients}: on {:.3}, off {:.3}", spread(&sides[0]), spread(&sides[1])));
    }
    println!(
        "medians of {METRICS_ROUNDS} rounds per side, {secs} s per row, {} core(s); each side's own spread of calls/s (max/min over its rounds): {}",
        cores(),
        spreads.join("; ")
    );
}
