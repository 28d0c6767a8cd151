//! `cargo bench -p world-server --bench invoke`: invocations per second through
//! a real `worldd`, end to end (HTTP, session, admission, task row, plan,
//! broker, handler, commit with fsync).
//!
//! It starts the release `worldd` that `cargo bench` builds beside this bench
//! (`<target>/release/worldd`: the bench executable is
//! `<target>/release/deps/invoke-<hash>`, so two directories up; Cargo also sets
//! `CARGO_BIN_EXE_worldd` for benches, which is used when present). The store
//! lives in a temporary directory (on the same filesystem as `$TMPDIR`).
//!
//! Workloads: `tools.echo` (pure) and `ailang-read` (one `Workspace.Read`
//! effect on a 1 KiB file), each at 1, 8 and 64 concurrent A2A clients sending
//! `tasks/send` with fresh task ids over keep-alive connections. Effectful calls
//! of one episode are serialised by design (its worktree and budget are shared),
//! so one more row spreads 64 clients over 8 episodes. Error replies are counted
//! apart, never as calls. Beside it: the raw fsync rate of the store's
//! directory (append 4 KiB + fdatasync), which bounds any durable commit.
//!
//! The cost of confinement: a second pair of daemons, one confined (the
//! default) and one `--unconfined`, run the exec runtime (the shipped Python
//! `examples.word-count`, pure) and `workspace-exec` (`sh -c true`), at 1
//! client and at 8 clients over 8 episodes, interleaved in the same run; the
//! table ends with the p50 each confined row adds.
//!
//! `INVOKE_BENCH_SECS` sets the seconds per row (default 3).

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{FSYNC_SAMPLES, agent, fsync_rate, genesis, percentile, worldd_path};

const BUDGET: &str = "100000000";

struct Daemon {
    child: Child,
    addr: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(worldd: &Path, db: &Path, ws: &Path, extra: &[&str]) -> Daemon {
    let mut child = Command::new(worldd)
        .args(["serve", "--bind", "127.0.0.1:0", "--db"])
        .arg(db)
        .arg("--workspace-root")
        .arg(ws)
        .args(extra)
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("spawn {}: {e} (build it: cargo build --release -p world-server)", worldd.display())
        });
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("worldd exited before listening").expect("stderr");
        if let Some(rest) = line.strip_prefix("worldd listening on http://") {
            break rest.split(' ').next().unwrap().to_string();
        }
    };
    // Keep draining stderr so the daemon never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    Daemon { child, addr }
}

fn cli(worldd: &Path, args: &[&str]) -> String {
    let o = Command::new(worldd).args(args).stdin(Stdio::null()).output().expect("run worldd");
    assert!(o.status.success(), "worldd {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn mint(worldd: &Path, db: &Path, dir: &Path, episode: &str) -> String {
    let out = dir.join(format!("session-{episode}"));
    let (db, out_s) = (db.to_str().unwrap(), out.to_str().unwrap());
    let read = format!("Workspace.Read=worktree:{BUDGET}");
    let apply = format!("world.apply=world:{BUDGET}");
    let exec = format!("Workspace.Exec=worktree:{BUDGET}");
    let commit = format!("World.Commit=log:{BUDGET}");
    cli(
        worldd,
        &[
            "session",
            "mint",
            "--db",
            db,
            "--episode",
            episode,
            "--grant",
            &read,
            "--grant",
            &apply,
            "--grant",
            &exec,
            "--grant",
            &commit,
            "--yes",
            "--out",
            out_s,
        ],
    );
    std::fs::read_to_string(out).unwrap().trim().to_string()
}

/// What one row measured.
struct Row {
    tool: String,
    clients: usize,
    episodes: usize,
    calls: usize,
    errors: u64,
    secs: f64,
    latencies: Vec<Duration>,
}

static TASK: AtomicU64 = AtomicU64::new(0);

fn run_row(addr: &str, tokens: &[String], tool: &'static str, clients: usize, secs: f64) -> Row {
    let args = match tool {
        "tools.echo" => json!({"hello": "world"}),
        "examples.word-count" => json!({"text": "one two three"}),
        "workspace-exec" => json!({"command": "sh", "args": ["-c", "true"]}),
        _ => json!({"path": "bench.txt"}),
    };
    let run = format!("{:x}", std::process::id());
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let errors = AtomicU64::new(0);
    let latencies: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (token, args, run, errors) = (&tokens[c % tokens.len()], &args, &run, &errors);
                s.spawn(move || {
                    let agent = agent();
                    let url = format!("http://{addr}/a2a/");
                    let mut mine = vec![];
                    while Instant::now() < deadline {
                        let id = format!("b{run}-{}", TASK.fetch_add(1, Ordering::Relaxed));
                        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {
                            "id": id, "metadata": {"skill_id": tool},
                            "message": {"role": "user", "parts": [{"type": "data", "data": args}]}}});
                        let t0 = Instant::now();
                        let reply = agent
                            .post(&url)
                            .header("Authorization", &format!("Bearer {token}"))
                            .header("Content-Type", "application/json")
                            .send(serde_json::to_vec(&body).unwrap())
                            .ok()
                            .and_then(|mut r| r.body_mut().read_to_vec().ok())
                            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
                        let ok = reply.as_ref().is_some_and(|v| {
                            let out = &v["result"]["artifacts"][0]["parts"][0]["data"];
                            out.is_object() && (tool == "tools.echo" || out["ok"] == true)
                        });
                        if ok {
                            mine.push(t0.elapsed());
                        } else {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut latencies = latencies;
    latencies.sort();
    let tool = tool.to_string();
    Row { tool, clients, episodes: tokens.len(), calls: latencies.len(), errors: errors.into_inner(), secs, latencies }
}

/// A world for the confinement rows: a store, 8 worktrees, the builtin and
/// example transitions, one token per episode, and a daemon.
struct Lab {
    daemon: Daemon,
    tokens: Vec<String>,
}

fn lab(worldd: &Path, root: &Path, name: &str, extra: &[&str]) -> Lab {
    let dir = root.join(name);
    let (db, ws) = (dir.join("world.db"), dir.join("ws"));
    let episodes: Vec<String> = (0..8).map(|i| format!("bench-{i}")).collect();
    for ep in &episodes {
        std::fs::create_dir_all(ws.join(ep)).unwrap();
    }
    let mut args = vec!["--exec-allow", "sh=/bin/sh"];
    args.extend_from_slice(extra);
    let daemon = start(worldd, &db, &ws, &args);
    let db_s = db.to_str().unwrap();
    cli(worldd, &["publish", "--db", db_s, "--builtin"]);
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/python/manifest.json");
    cli(worldd, &["publish", "--db", db_s, "--manifest", examples]);
    let tokens: Vec<String> = episodes.iter().map(|ep| mint(worldd, &db, &dir, ep)).collect();
    genesis(&daemon.addr, &tokens[0]);
    Lab { daemon, tokens }
}

/// Confined and unconfined rows of each exec workload, interleaved.
fn confinement_rows(worldd: &Path, root: &Path, secs: f64) -> Vec<(Row, Row)> {
    let confined = lab(worldd, root, "confined", &[]);
    let unconfined = lab(worldd, root, "unconfined", &["--unconfined"]);
    let mut pairs = vec![];
    for tool in ["examples.word-count", "workspace-exec"] {
        for l in [&confined, &unconfined] {
            run_row(&l.daemon.addr, &l.tokens, tool, 2, 0.5);
        }
        for (clients, episodes) in [(1, 1), (8, 8)] {
            let c = run_row(&confined.daemon.addr, &confined.tokens[..episodes], tool, clients, secs);
            let u = run_row(&unconfined.daemon.addr, &unconfined.tokens[..episodes], tool, clients, secs);
            pairs.push((c, u));
        }
    }
    pairs
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("invoke: a benchmark; run it with `cargo bench -p world-server --bench invoke`");
        return;
    }
    let secs: f64 = std::env::var("INVOKE_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let worldd = worldd_path();
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (db, ws) = (root.join("world.db"), root.join("ws"));
    let episodes: Vec<String> = (0..8).map(|i| format!("bench-{i}")).collect();
    for ep in &episodes {
        std::fs::create_dir_all(ws.join(ep)).unwrap();
        std::fs::write(ws.join(ep).join("bench.txt"), "x".repeat(1023) + "\n").unwrap();
    }
    let daemon = start(&worldd, &db, &ws, &[]);
    cli(&worldd, &["publish", "--db", db.to_str().unwrap(), "--builtin"]);
    let tokens: Vec<String> = episodes.iter().map(|ep| mint(&worldd, &db, &root, ep)).collect();
    genesis(&daemon.addr, &tokens[0]);

    eprintln!("invoke: {} ({secs} s per row), store {}", worldd.display(), db.display());
    // Warm up connections, caches and the page cache.
    run_row(&daemon.addr, &tokens[..1], "ailang-read", 4, 0.5);
    run_row(&daemon.addr, &tokens[..1], "tools.echo", 4, 0.5);
    let mut rows = vec![];
    for tool in ["tools.echo", "ailang-read"] {
        for clients in [1, 8, 64] {
            rows.push(run_row(&daemon.addr, &tokens[..1], tool, clients, secs));
        }
    }
    rows.push(run_row(&daemon.addr, &tokens, "ailang-read", 64, secs));
    drop(daemon);
    let pairs = confinement_rows(&worldd, &root, secs);
    let (fsync, fsync_p50, fsync_p99) = fsync_rate(&root);

    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!();
    println!("| transition | clients | episodes | calls | errors | invocations/s | p50 ms | p99 ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| `{}` | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} |",
            r.tool,
            r.clients,
            r.episodes,
            r.calls,
            r.errors,
            r.calls as f64 / r.secs,
            percentile(&r.latencies, 0.5),
            percentile(&r.latencies, 0.99)
        );
    }
    println!();
    println!(
        "| run | clients | episodes | confined/s | unconfined/s | ratio | confined p50 ms | unconfined p50 ms | added p50 ms | errors |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (c, u) in &pairs {
        let (cr, ur) = (c.calls as f64 / c.secs, u.calls as f64 / u.secs);
        let (cp, up) = (percentile(&c.latencies, 0.5), percentile(&u.latencies, 0.5));
        println!(
            "| `{}` | {} | {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:+.2} | {} |",
            c.tool,
            c.clients,
            c.episodes,
            cr,
            ur,
            cr / ur.max(f64::MIN_POSITIVE),
            cp,
            up,
            cp - up,
            c.errors + u.errors
        );
    }
    println!();
    println!(
        "raw fsync in the store's directory (append 4 KiB + fdatasync, n={FSYNC_SAMPLES}): {fsync:.0}/s, p50 {fsync_p50:.2} ms, p99 {fsync_p99:.2} ms; {cores} core(s)"
    );
}
