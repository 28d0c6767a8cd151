//! `cargo bench -p world-server --bench nodes`: durable MCP `tools/call` and
//! A2A `tasks/send` per second on the embedded engine and on PostgreSQL, one
//! node and three nodes sharing one database, in the same run, through real
//! release `worldd` processes over loopback HTTP (see `support/mod.rs` for
//! which binary).
//!
//! Rows, on each surface: `tools.echo` (pure) and `ailang-read` (one
//! `Workspace.Read` of a 1 KiB file, one episode) at 1, 8 and 64 clients, each
//! client on its own keep-alive connection, sending back to back (A2A with a
//! fresh task id per call); with three nodes the clients take the nodes in
//! turn. Every row checks that the log grew by exactly the
//! calls counted. The PostgreSQL cluster is `BENCH_POSTGRES` (an admin URL)
//! or a throwaway one started with `scripts/postgres` (fsync on, as the
//! embedded engine syncs every batch). `BENCH_SECS` sets the seconds per row,
//! `BENCH_ROUNDS` how often the whole table runs (medians are printed).

mod support;

use serde_json::json;
use support::*;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres");

/// A throwaway cluster, stopped when dropped.
struct Cluster {
    dir: Option<std::path::PathBuf>,
    admin: String,
}

impl Cluster {
    fn get() -> Cluster {
        if let Ok(admin) = std::env::var("BENCH_POSTGRES") {
            return Cluster { dir: None, admin };
        }
        let dir = std::env::temp_dir().join(format!("world-bench-pg-{}", std::process::id()));
        let out = std::process::Command::new(SCRIPT)
            .arg("start")
            .arg(&dir)
            .env("POSTGRES_FSYNC", "on")
            .output()
            .expect("run scripts/postgres");
        assert!(out.status.success(), "scripts/postgres: {}", String::from_utf8_lossy(&out.stderr));
        Cluster { dir: Some(dir), admin: String::from_utf8(out.stdout).unwrap().trim().to_string() }
    }

    /// A new database's URL.
    fn database(&self, name: &str) -> String {
        let mut c = postgres::Client::connect(&self.admin, postgres::NoTls).expect("connect to the cluster");
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).expect("drop database");
        c.batch_execute(&format!("CREATE DATABASE {name}")).expect("create database");
        format!("{}/{name}", &self.admin[..self.admin.rfind('/').unwrap()])
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::process::Command::new(SCRIPT).arg("stop").arg(dir).status();
        }
    }
}

/// A world on one engine: its nodes (one for the embedded engine) and a session.
struct World {
    setup: Setup,
    nodes: Vec<Daemon>,
    token: String,
}

impl World {
    fn embedded() -> World {
        let setup = Setup::new(1);
        let node = setup.start(&["--host-callbacks", "64"]);
        World::ready(setup, vec![node])
    }

    fn postgres(url: &str, nodes: usize) -> World {
        let setup = Setup::on_postgres(1, url);
        let nodes = (0..nodes).map(|i| setup.start_node(i, &["--host-callbacks", "64"])).collect();
        World::ready(setup, nodes)
    }

    fn ready(setup: Setup, nodes: Vec<Daemon>) -> World {
        setup.publish_builtin();
        let token = setup.mint(&setup.episodes[0]);
        genesis(&nodes[0].addr, &token);
        World { setup, nodes, token }
    }

    /// `clients` clients calling `tool` through `surface` for `secs`, spread over the nodes.
    fn durable(&self, surface: Surface, tool: &str, clients: usize, secs: f64) -> Row {
        let before = log_len(&self.nodes[0].addr);
        let pure = tool == "tools.echo";
        let args = if pure { json!({"hello": "world"}) } else { json!({"path": "bench.txt"}) };
        let run = format!("{:x}-{}", std::process::id(), before);
        let make = |client: usize, n: u64| {
            let addr = &self.nodes[client % self.nodes.len()].addr;
            let mut headers =
                vec![("Authorization", format!("Bearer {}", self.token)), ("Content-Type", "application/json".into())];
            let (path, body) = match surface {
                Surface::Mcp => {
                    headers.push(("Accept", "application/json, text/event-stream".into()));
                    let name = if pure { "tools_decho" } else { tool };
                    (
                        "mcp",
                        json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                        "params": {"name": name, "arguments": args}}),
                    )
                }
                Surface::A2a => (
                    "a2a",
                    json!({"jsonrpc": "2.0", "id": n, "method": "tasks/send", "params": {
                    "id": format!("{run}-{client}-{n}"), "metadata": {"skill_id": tool},
                    "message": {"role": "user", "parts": [{"type": "data", "data": args}]}}}),
                ),
            };
            Request {
                method: "POST",
                key: String::new(),
                url: format!("http://{addr}/{path}/"),
                headers,
                body: serde_json::to_vec(&body).unwrap(),
            }
        };
        let check = |_: &str, body: &[u8]| {
            let out = match surface {
                Surface::Mcp => sse_result(body)?.get("structuredContent").cloned()?,
                Surface::A2a => {
                    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
                    (v["result"]["status"]["state"] == "completed").then_some(())?;
                    v["result"]["artifacts"][0]["parts"][0]["data"].clone()
                }
            };
            (pure || out["ok"] == true).then_some(serde_json::Value::Null)
        };
        let label = format!("{} {tool}", surface.name());
        let row = run_load(&label, clients, secs, make, check);
        let committed = log_len(&self.nodes[0].addr) - before;
        assert_eq!(committed, row.calls as u64, "{label} at {clients}: every call counted is committed");
        row
    }
}

#[derive(Clone, Copy)]
enum Surface {
    Mcp,
    A2a,
}

impl Surface {
    fn name(self) -> &'static str {
        match self {
            Surface::Mcp => "mcp",
            Surface::A2a => "a2a",
        }
    }
}

/// Rounds of the whole table (`BENCH_ROUNDS`, default 1): each figure is
/// the median round's, each ratio the median of the rounds' ratios.
fn rounds() -> usize {
    std::env::var("BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).filter(|&n| n >= 1).unwrap_or(1)
}

fn main() {
    if !invoked_as_bench("nodes") {
        return;
    }
    let (secs, rounds) = (row_secs(), rounds());
    let cluster = Cluster::get();
    let loads: Vec<(Surface, &str, usize)> = [Surface::Mcp, Surface::A2a]
        .into_iter()
        .flat_map(|surface| {
            ["tools.echo", "ailang-read"]
                .into_iter()
                .flat_map(move |tool| [1, 8, 64].into_iter().map(move |clients| (surface, tool, clients)))
        })
        .collect();
    // Every engine's world stands from the start and each load runs on them
    // in turn, so that a ratio compares seconds next to each other on this
    // noisy machine, not minutes apart.
    let worlds = [
        ("embedded", World::embedded()),
        ("postgres, 1 node", World::postgres(&cluster.database("bench_one"), 1)),
        ("postgres, 3 nodes", World::postgres(&cluster.database("bench_three"), 3)),
    ];
    for (name, world) in &worlds {
        eprintln!("nodes: {name}: {} node(s) of {}", world.nodes.len(), world.setup.worldd.display());
    }
    // runs[load][engine]: one row per round.
    let mut runs: Vec<Vec<Vec<Row>>> = loads.iter().map(|_| worlds.iter().map(|_| vec![]).collect()).collect();
    for _ in 0..rounds {
        for (l, (surface, tool, clients)) in loads.iter().enumerate() {
            for (e, (_, world)) in worlds.iter().enumerate() {
                runs[l][e].push(world.durable(*surface, tool, *clients, secs));
            }
        }
    }
    println!("\n{rounds} round(s) of {secs} s per row");
    println!(
        "{:<20} {:<16} {:>7} {:>10} {:>9} {:>9} {:>7} {:>12}",
        "engine", "tool", "clients", "calls/s", "p50 ms", "p99 ms", "errors", "x embedded"
    );
    for (e, (name, _)) in worlds.iter().enumerate() {
        for per_engine in &runs {
            let rows = &per_engine[e];
            let ratios: Vec<f64> = (0..rounds).map(|r| rows[r].rate() / per_engine[0][r].rate()).collect();
            let row = median_by(rows, |r| r.rate());
            println!(
                "{:<20} {:<16} {:>7} {:>10.0} {:>9.2} {:>9.2} {:>7} {:>11.2}x",
                name,
                row.label,
                row.clients,
                row.rate(),
                row.p50(),
                row.p99(),
                rows.iter().map(|r| r.errors).sum::<u64>(),
                median(ratios)
            );
        }
    }
}

fn median_by<T>(items: &[T], key: impl Fn(&T) -> f64) -> &T {
    let mut order: Vec<&T> = items.iter().collect();
    order.sort_by(|a, b| key(a).total_cmp(&key(b)));
    order[order.len() / 2]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
