//! What the surface benchmarks (`a2a`, `mcp`) share: the release `worldd`,
//! a store set up as a user would, a closed-loop load generator over
//! keep-alive connections, and the raw fsync rate of the store's directory.
//!
//! Which `worldd`: `$WORLDD_BIN` if set; else the one Cargo builds beside the
//! bench (`CARGO_BIN_EXE_worldd`, set for benches; `cargo bench` builds it in
//! the release profile); else `$CARGO_TARGET_DIR/release/worldd`; else
//! `<CARGO_MANIFEST_DIR>/../target/release/worldd`. Build it with
//! `cargo build --release -p world-server --bin worldd`.

#![allow(dead_code)] // each bench uses its own part

#[path = "../../../tests/common/commit.rs"]
mod commit;
#[path = "../../../store/benches/common/disk.rs"]
mod disk;
pub use disk::Written;

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const FSYNC_SAMPLES: usize = 300;
pub const BUDGET: &str = "1000000000";

pub fn worldd_path() -> PathBuf {
    if let Some(p) = std::env::var_os("WORLDD_BIN") {
        return PathBuf::from(p);
    }
    if let Some(p) = option_env!("CARGO_BIN_EXE_worldd") {
        return PathBuf::from(p);
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(t).join("release").join("worldd");
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/worldd")
}

/// Seconds per measured row: `$BENCH_SECS`, default 3.
pub fn row_secs() -> f64 {
    std::env::var("BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0)
}

/// A running `worldd serve`; dropped, it is killed.
pub struct Daemon {
    child: Child,
    pub addr: String,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU seconds (user + system) the daemon has used so far, from `/proc`.
    pub fn cpu_secs(&self) -> f64 {
        process_cpu_secs(&self.child.id().to_string())
    }

    /// CPU seconds so far by the daemon's threads, grouped by their names.
    pub fn cpu_by_thread(&self) -> ThreadCpu {
        let pid = self.child.id();
        let mut cpu = ThreadCpu { total: self.cpu_secs(), ..ThreadCpu::default() };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return cpu };
        for task in tasks.flatten() {
            let tid = task.file_name().to_string_lossy().into_owned();
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
            let secs = process_cpu_secs(&format!("{pid}/task/{tid}"));
            match comm.trim() {
                "world-store-wri" => cpu.writer += secs,
                lane if lane.starts_with("worldd-lane-") => cpu.lanes += secs,
                _ => {}
            }
        }
        cpu
    }
}

/// A daemon's CPU seconds by thread: the store's writer (which writes and
/// syncs the log too), the lanes that serve connections, and all of them
/// with the rest (the main thread, the blocking pools, threads that ended)
/// in `total`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadCpu {
    pub writer: f64,
    pub lanes: f64,
    pub total: f64,
}

impl std::ops::Sub for ThreadCpu {
    type Output = ThreadCpu;
    fn sub(self, o: ThreadCpu) -> ThreadCpu {
        ThreadCpu { writer: self.writer - o.writer, lanes: self.lanes - o.lanes, total: self.total - o.total }
    }
}

/// CPU seconds (user + system) process `pid` (or `self`) has used so far.
pub fn process_cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the `(comm)`: state is field 3, utime 14 and stime 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(f64::NAN);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

/// What the whole machine and this process (the load generator) spent over
/// a stretch of a run: a row is CPU-bound when the machine is busy, and the
/// generator's own share is CPU the daemon could not use.
#[derive(Clone, Copy, Debug, Default)]
pub struct Load {
    /// Clock ticks of all cores (`/proc/stat`), and those idle or waiting for I/O.
    pub ticks: u64,
    pub idle: u64,
    /// CPU seconds of this process.
    pub own_secs: f64,
}

impl Load {
    pub fn now() -> Load {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let cpu: Vec<u64> =
            stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
        let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
        Load { ticks: cpu.iter().sum(), idle, own_secs: process_cpu_secs("self") }
    }

    /// What was spent between `before` and now.
    pub fn since(before: Load) -> Load {
        let now = Load::now();
        Load {
            ticks: now.ticks.saturating_sub(before.ticks),
            idle: now.idle.saturating_sub(before.idle),
            own_secs: now.own_secs - before.own_secs,
        }
    }

    /// The share of the machine's cores that were busy, 0 to 1.
    pub fn busy(&self) -> f64 {
        1.0 - self.idle as f64 / self.ticks.max(1) as f64
    }
}

impl std::ops::Add for Load {
    type Output = Load;
    fn add(self, other: Load) -> Load {
        Load { ticks: self.ticks + other.ticks, idle: self.idle + other.idle, own_secs: self.own_secs + other.own_secs }
    }
}

impl Daemon {
    /// The daemon's resident memory now (`VmRSS` of `/proc/<pid>/status`), in bytes.
    pub fn resident_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
        kib.unwrap_or(0) * 1024
    }

    /// Bytes written to storage so far: by the daemon (its file writes, not
    /// its socket traffic) and by the device holding `store`.
    pub fn written(&self, store: &Path) -> Written {
        Written::now(&self.child.id().to_string(), store)
    }

    /// Stops the daemon as an operator would (SIGTERM: it drains and closes
    /// its store cleanly) and waits for it to exit.
    pub fn stop(mut self) {
        // SAFETY: a plain syscall on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary store with episodes `bench-0..n`, each holding a 1 KiB `bench.txt`.
pub struct Setup {
    pub worldd: PathBuf,
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub db: PathBuf,
    pub ws: PathBuf,
    pub episodes: Vec<String>,
    /// A PostgreSQL store (`Setup::on_postgres`) instead of the file `db`.
    pub store: Option<String>,
}

impl Setup {
    /// The same set-up on a PostgreSQL store (its schema made here); nodes
    /// start with `start_node`.
    pub fn on_postgres(episodes: usize, url: &str) -> Setup {
        let mut setup = Setup::new(episodes);
        setup.cli(&["store", "init", "--store", url]);
        setup.store = Some(url.to_string());
        setup
    }

    /// The verbs' store arguments: `--db PATH` or `--store URL`.
    pub fn at(&self) -> [String; 2] {
        match &self.store {
            Some(url) => ["--store".into(), url.clone()],
            None => ["--db".into(), self.db.display().to_string()],
        }
    }

    /// Node `i` of the PostgreSQL store, with its own directory.
    pub fn start_node(&self, i: usize, extra: &[&str]) -> Daemon {
        let url = self.store.as_deref().expect("a PostgreSQL set-up");
        let dir = self.root.join(format!("node-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut args = vec!["--store", url, "--dir", dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.spawn(&args)
    }

    pub fn new(episodes: usize) -> Setup {
        let worldd = worldd_path();
        assert!(
            worldd.is_file(),
            "{} not found: build it with `cargo build --release -p world-server --bin worldd` (or set WORLDD_BIN)",
            worldd.display()
        );
        let mut dir = tempfile::tempdir().expect("temp dir");
        if std::env::var_os("BENCH_KEEP_STORE").is_some() {
            dir.disable_cleanup(true);
        }
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (db, ws) = (root.join("world.db"), root.join("ws"));
        let episodes: Vec<String> = (0..episodes).map(|i| format!("bench-{i}")).collect();
        for ep in &episodes {
            std::fs::create_dir_all(ws.join(ep)).unwrap();
            std::fs::write(ws.join(ep).join("bench.txt"), "x".repeat(1023) + "\n").unwrap();
        }
        Setup { worldd, _dir: dir, root, db, ws, episodes, store: None }
    }

    pub fn start(&self, extra: &[&str]) -> Daemon {
        let mut args = vec!["--db", self.db.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.spawn(&args)
    }

    fn spawn(&self, args: &[&str]) -> Daemon {
        let mut child = Command::new(&self.worldd)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(args)
            .arg("--workspace-root")
            .arg(&self.ws)
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.worldd.display()));
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

    pub fn cli(&self, args: &[&str]) -> String {
        let o = Command::new(&self.worldd).args(args).stdin(Stdio::null()).output().expect("run worldd");
        assert!(o.status.success(), "worldd {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn publish_builtin(&self) {
        let at = self.at();
        self.cli(&["publish", &at[0], &at[1], "--builtin"]);
    }

    /// A session for `episode` with Workspace.Read, world.apply and World.Commit (a large budget).
    pub fn mint(&self, episode: &str) -> String {
        self.mint_with(episode, &[])
    }

    /// A session of `episode` with more of `session mint`'s arguments (`--ask …`).
    pub fn mint_with(&self, episode: &str, more: &[&str]) -> String {
        let out = self.root.join(format!("session-{episode}-{}-{}", std::process::id(), more.len()));
        let read = format!("Workspace.Read=worktree:{BUDGET}");
        let apply = format!("world.apply=world:{BUDGET}");
        let commit = format!("World.Commit=log:{BUDGET}");
        let at = self.at();
        let out_s = out.to_str().unwrap();
        self.cli(
            &[
                "session",
                "mint",
                &at[0],
                &at[1],
                "--episode",
                episode,
                "--grant",
                &read,
                "--grant",
                &apply,
                "--grant",
                &commit,
                "--yes",
                "--out",
                out_s,
            ]
            .into_iter()
            .chain(more.iter().copied())
            .collect::<Vec<_>>(),
        );
        let token = std::fs::read_to_string(&out).unwrap().trim().to_string();
        let _ = std::fs::remove_file(out);
        token
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// An honest genesis commit over REST.
pub fn genesis(addr: &str, token: &str) {
    let body = commit::genesis_body("bench");
    let resp = agent()
        .post(&format!("http://{addr}/v1/commit"))
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .send(serde_json::to_vec(&body).unwrap())
        .expect("genesis");
    assert_eq!(resp.status().as_u16(), 200, "genesis");
}

/// Entries in the log: the first absent index (found by doubling, then bisecting).
pub fn log_len(addr: &str) -> u64 {
    let a = agent();
    // The body is read so the connection is reused.
    let exists = |i: u64| {
        a.get(&format!("http://{addr}/v1/log/{i}"))
            .call()
            .map(|mut r| r.body_mut().read_to_vec().is_ok() && r.status() == 200)
            .unwrap_or(false)
    };
    let mut hi = 1;
    while exists(hi - 1) {
        hi *= 2;
    }
    let mut lo = hi / 2; // exists(lo - 1) or lo == 0
    while lo < hi {
        let mid = (lo + hi) / 2;
        if exists(mid) { lo = mid + 1 } else { hi = mid }
    }
    lo
}

/// One measured row.
pub struct Row {
    pub label: String,
    pub clients: usize,
    pub calls: usize,
    pub errors: u64,
    pub secs: f64,
    pub latencies: Vec<Duration>,
    /// What the successful calls returned, when the caller keeps it.
    pub kept: Vec<(String, serde_json::Value)>,
    /// The machine's busy share and this process's CPU while the row ran.
    pub load: Load,
}

impl Row {
    pub fn rate(&self) -> f64 {
        self.calls as f64 / self.secs
    }
    pub fn p50(&self) -> f64 {
        percentile(&self.latencies, 0.5)
    }
    pub fn p99(&self) -> f64 {
        percentile(&self.latencies, 0.99)
    }
}

impl Row {
    /// Slices of one load measured apart (see `ERA_SLICES` in the MCP bench),
    /// as one row: calls, errors and seconds add up, latencies merge.
    pub fn merged(slices: Vec<Row>) -> Row {
        let mut slices = slices.into_iter();
        let mut row = slices.next().expect("at least one slice");
        for s in slices {
            row.calls += s.calls;
            row.errors += s.errors;
            row.secs += s.secs;
            row.latencies.extend(s.latencies);
            row.kept.extend(s.kept);
            row.load = row.load + s.load;
        }
        row.latencies.sort();
        row
    }
}

pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

/// One client's latencies and what it kept.
type ClientResult = (Vec<Duration>, Vec<(String, serde_json::Value)>);

/// What one request is: the URL, headers and body, and a key it is known by.
/// Sends one request and reads its JSON reply (null when there is none).
pub fn send_once(req: &Request) -> serde_json::Value {
    let agent = agent();
    let b = req.headers.iter().fold(agent.post(&req.url), |b, (k, v)| b.header(*k, v));
    let body = b.send(&req.body[..]).ok().and_then(|mut r| r.body_mut().read_to_vec().ok());
    body.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

pub struct Request {
    /// `GET` sends no body; anything else is a `POST` of `body`.
    pub method: &'static str,
    pub key: String,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// The modern MCP era's version.
pub const MCP_MODERN: &str = "2026-07-28";

/// An MCP `tools/call` of `tool` with `arguments` to `url` (`.../mcp/`), as a
/// legacy-era client sends it or, when `modern`, a 2026-07-28 one (its
/// `_meta` and headers); `n` is the JSON-RPC id, `key` what a check reads.
pub fn mcp_tools_call(
    url: &str,
    token: Option<&str>,
    tool: &str,
    arguments: serde_json::Value,
    modern: bool,
    n: u64,
    key: String,
) -> Request {
    let mut params = serde_json::json!({"name": tool, "arguments": arguments});
    let mut headers =
        vec![("Content-Type", "application/json".into()), ("Accept", "application/json, text/event-stream".into())];
    if let Some(token) = token {
        headers.push(("Authorization", format!("Bearer {token}")));
    }
    if modern {
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": MCP_MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        });
        headers.push(("MCP-Protocol-Version", MCP_MODERN.into()));
        headers.push(("Mcp-Method", "tools/call".into()));
        headers.push(("Mcp-Name", tool.into()));
    }
    let body = serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params});
    Request { method: "POST", key, url: url.to_string(), headers, body: serde_json::to_vec(&body).unwrap() }
}

/// A closed loop: `clients` threads, each with its own keep-alive agent,
/// send `make(client, n)` back to back for `secs`. `check` decides whether a
/// reply body is a success (and what to keep of it); anything else is an
/// error, counted apart and never as a call.
pub fn run_load<M, C>(label: &str, clients: usize, secs: f64, make: M, check: C) -> Row
where
    M: Fn(usize, u64) -> Request + Sync,
    C: Fn(&str, &[u8]) -> Option<serde_json::Value> + Sync,
{
    let (start, load) = (Instant::now(), Load::now());
    let deadline = start + Duration::from_secs_f64(secs);
    let errors = std::sync::atomic::AtomicU64::new(0);
    let per_client: Vec<ClientResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (make, check, errors) = (&make, &check, &errors);
                s.spawn(move || {
                    let agent = agent();
                    let (mut lat, mut kept) = (vec![], vec![]);
                    let mut n = 0u64;
                    while Instant::now() < deadline {
                        let req = make(c, n);
                        n += 1;
                        let t0 = Instant::now();
                        let sent = if req.method == "GET" {
                            let b = req.headers.iter().fold(agent.get(&req.url), |b, (k, v)| b.header(*k, v));
                            b.call()
                        } else {
                            let b = req.headers.iter().fold(agent.post(&req.url), |b, (k, v)| b.header(*k, v));
                            b.send(&req.body[..])
                        };
                        let body = sent.ok().and_then(|mut r| r.body_mut().read_to_vec().ok());
                        let took = t0.elapsed();
                        match body.as_deref().and_then(|b| check(&req.key, b)) {
                            Some(v) => {
                                lat.push(took);
                                kept.push((req.key, v));
                            }
                            None => {
                                errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                    (lat, kept)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut latencies: Vec<Duration> = per_client.iter().flat_map(|(l, _)| l.iter().copied()).collect();
    latencies.sort();
    let kept: Vec<(String, serde_json::Value)> = per_client.into_iter().flat_map(|(_, k)| k).collect();
    Row {
        label: label.to_string(),
        clients,
        calls: latencies.len(),
        errors: errors.into_inner(),
        secs,
        latencies,
        kept,
        load: Load::since(load),
    }
}

/// The soak load (`soak`, `grown`): a legacy-era MCP `tools/call`, even
/// calls `tools_decho`, odd ones `ailang-read` of `bench.txt` (one
/// `Workspace.Read` effect), echo only when `pure`.
pub fn soak_call(addr: &str, token: &str, n: u64, pure: bool) -> Request {
    let (tool, args) = match n % 2 {
        1 if !pure => ("ailang-read", serde_json::json!({"path": "bench.txt"})),
        _ => ("tools_decho", serde_json::json!({"soak": n})),
    };
    let body = serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": args}});
    Request {
        method: "POST",
        key: tool.to_string(),
        url: format!("http://{addr}/mcp/"),
        headers: vec![
            ("Authorization", format!("Bearer {token}")),
            ("Content-Type", "application/json".into()),
            ("Accept", "application/json, text/event-stream".into()),
        ],
        body: serde_json::to_vec(&body).unwrap(),
    }
}

/// Whether a soak call's reply is a success: structured content, and `ok`
/// for a read.
pub fn soak_succeeded(tool: &str, body: &[u8]) -> Option<serde_json::Value> {
    let result = sse_result(body)?;
    let out = result.get("structuredContent")?;
    (out.is_object() && (tool == "tools_decho" || out["ok"] == true)).then_some(serde_json::Value::Null)
}

/// What one stretch of soak load came to, beside the calls themselves.
pub struct Soaked {
    pub row: Row,
    /// Disk the store's file took over the stretch (allocated blocks; may be negative).
    pub disk_growth: i64,
    pub written: Written,
    /// CPU seconds (user + system) the daemon spent over the stretch.
    pub cpu_secs: f64,
    /// Resident memory at the end, and the most seen (sampled every 100 ms).
    pub rss: u64,
    pub peak_rss: u64,
    /// What the store's writer did over the stretch, from the daemon's /metrics.
    pub writer: WriterTime,
}

/// The store writer's checkpoints and the seconds they took (write batches
/// wait behind each), and the seconds it was working and waiting for
/// batches' syncs.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriterTime {
    pub checkpoints: f64,
    pub checkpoint_secs: f64,
    pub working_secs: f64,
    pub sync_wait_secs: f64,
}

impl WriterTime {
    /// What the daemon at `addr` has done so far (zero when it serves no /metrics).
    pub fn of(addr: &str) -> WriterTime {
        let text = agent()
            .get(&format!("http://{addr}/metrics"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default();
        let sample = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok()).unwrap_or(0.0)
        };
        WriterTime {
            checkpoints: sample("worldd_store_checkpoint_duration_seconds_count"),
            checkpoint_secs: sample("worldd_store_checkpoint_duration_seconds_sum"),
            working_secs: sample("worldd_store_writer_seconds_total{state=\"working\"}"),
            sync_wait_secs: sample("worldd_store_writer_seconds_total{state=\"waiting_for_sync\"}"),
        }
    }

    /// Milliseconds of checkpoint per second of a stretch `secs` long.
    pub fn checkpoint_ms_per_s(&self, secs: f64) -> f64 {
        1e3 * self.checkpoint_secs / secs.max(1e-9)
    }

    /// The shares of a stretch `secs` long the writer was occupied (working
    /// or waiting for a sync) and waiting for a sync, in percent.
    pub fn occupied_percent(&self, secs: f64) -> (f64, f64) {
        let share = |s: f64| 100.0 * s / secs.max(1e-9);
        (share(self.working_secs + self.sync_wait_secs), share(self.sync_wait_secs))
    }
}

impl std::ops::Add for WriterTime {
    type Output = WriterTime;
    fn add(self, o: WriterTime) -> WriterTime {
        WriterTime {
            checkpoints: self.checkpoints + o.checkpoints,
            checkpoint_secs: self.checkpoint_secs + o.checkpoint_secs,
            working_secs: self.working_secs + o.working_secs,
            sync_wait_secs: self.sync_wait_secs + o.sync_wait_secs,
        }
    }
}

impl std::ops::Sub for WriterTime {
    type Output = WriterTime;
    fn sub(self, o: WriterTime) -> WriterTime {
        WriterTime {
            checkpoints: self.checkpoints - o.checkpoints,
            checkpoint_secs: self.checkpoint_secs - o.checkpoint_secs,
            working_secs: self.working_secs - o.working_secs,
            sync_wait_secs: self.sync_wait_secs - o.sync_wait_secs,
        }
    }
}

impl Soaked {
    /// Disk the file grew by per call.
    pub fn disk_per_call(&self) -> f64 {
        self.disk_growth as f64 / self.row.calls.max(1) as f64
    }

    /// Stretches of one load, one after another, as one (at least one).
    pub fn merged(stretches: Vec<Soaked>) -> Soaked {
        let rss = stretches.last().map_or(0, |s| s.rss);
        let (mut rows, mut disk_growth, mut cpu_secs, mut peak_rss) = (vec![], 0, 0.0, 0);
        let mut written: Option<Written> = None;
        let mut writer = WriterTime::default();
        for s in stretches {
            writer = writer + s.writer;
            disk_growth += s.disk_growth;
            cpu_secs += s.cpu_secs;
            peak_rss = peak_rss.max(s.peak_rss);
            written = Some(written.map_or(s.written, |w| w + s.written));
            rows.push(s.row);
        }
        let written = written.unwrap_or_default();
        Soaked { row: Row::merged(rows), disk_growth, written, cpu_secs, rss, peak_rss, writer }
    }
}

/// `clients` closed-loop clients for `secs` of the soak load against
/// `daemon`, client `c` sending with `tokens[c % tokens.len()]` (one session
/// per episode); the store at `db` is the one whose growth is counted.
pub fn soak(daemon: &Daemon, db: &Path, tokens: &[String], clients: usize, secs: f64, pure: bool) -> Soaked {
    let on_disk = || world_store::FileSizes::of(db).on_disk() as i64;
    let (disk0, written0, cpu0) = (on_disk(), daemon.written(db), daemon.cpu_secs());
    let writer0 = WriterTime::of(&daemon.addr);
    let running = std::sync::atomic::AtomicBool::new(true);
    let (row, peak_rss) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = daemon.resident_bytes();
            while running.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                peak = peak.max(daemon.resident_bytes());
            }
            peak
        });
        let make = |c: usize, n: u64| soak_call(&daemon.addr, &tokens[c % tokens.len()], n, pure);
        let row = run_load("soak", clients, secs, make, soak_succeeded);
        running.store(false, std::sync::atomic::Ordering::Relaxed);
        (row, sampler.join().unwrap())
    });
    let rss = daemon.resident_bytes();
    Soaked {
        disk_growth: on_disk() - disk0,
        written: daemon.written(db).since(written0),
        cpu_secs: daemon.cpu_secs() - cpu0,
        row,
        rss,
        peak_rss: peak_rss.max(rss),
        writer: WriterTime::of(&daemon.addr) - writer0,
    }
}

pub fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// A number of seconds (or anything parsed) from the environment, or `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Appends 4 KiB and fdatasyncs, `FSYNC_SAMPLES` times, in `dir`: the bound
/// on any durable commit. Returns (rate/s, p50 ms, p99 ms).
pub fn fsync_rate(dir: &Path) -> (f64, f64, f64) {
    let path = dir.join("fsync-probe");
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
    let block = vec![0xA5u8; 4096];
    let mut lat = Vec::with_capacity(FSYNC_SAMPLES);
    let start = Instant::now();
    for _ in 0..FSYNC_SAMPLES {
        let t0 = Instant::now();
        f.write_all(&block).unwrap();
        // SAFETY: a plain syscall on an open descriptor.
        let rc = unsafe { libc::fdatasync(f.as_raw_fd()) };
        assert_eq!(rc, 0, "fdatasync");
        lat.push(t0.elapsed());
    }
    let rate = FSYNC_SAMPLES as f64 / start.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    lat.sort();
    (rate, percentile(&lat, 0.5), percentile(&lat, 0.99))
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
}

/// `cargo bench` passes `--bench`; `cargo test --benches` does not (then just say what this is).
/// The JSON-RPC `result` of a single-event SSE reply (legacy-era MCP).
pub fn sse_result(body: &[u8]) -> Option<serde_json::Value> {
    let text = std::str::from_utf8(body).ok()?;
    let data = text.strip_prefix("event: message\ndata: ")?.strip_suffix("\n\n")?;
    let v: serde_json::Value = serde_json::from_str(data).ok()?;
    v.get("result").cloned()
}

pub fn invoked_as_bench(name: &str) -> bool {
    if std::env::args().any(|a| a == "--bench") {
        return true;
    }
    println!("{name}: a benchmark; run it with `cargo bench -p world-server --bench {name}`");
    false
}

/// The durable floor: what the store alone allows, with no HTTP, session or
/// coordinator. `clients` threads in this process each write, back to back,
/// what the daemon writes for one pure call: one `Op::Sequence` of the task
/// row and an invocation commit carrying an input, an output and an
/// invocation record that names four refs, as the coordinator's does. No
/// surface that commits every call durably can be faster than this row.
pub fn store_floor(dir: &Path, clients: usize, secs: f64) -> Row {
    use world_store::*;
    let path = dir.join(format!("floor-{clients}.db"));
    let (store, _) = Store::open(&path, 1).expect("open the floor store");
    for op in world_store::sample::genesis("bench") {
        store.call(op).expect("genesis and registry");
    }
    let call = |client: usize, n: u64| {
        let task = TaskKey { surface: Surface::Mcp, episode: "floor".into(), task_id: format!("c{client}-{n}") };
        world_store::sample::pure_call(task, &format!("{{\"n\":{n}}}"), "coordinator:mcp")
    };
    let (start, load) = (Instant::now(), Load::now());
    let deadline = start + Duration::from_secs_f64(secs);
    let per_client: Vec<Vec<Duration>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (store, call) = (&store, &call);
                s.spawn(move || {
                    let mut lat = vec![];
                    let mut n = 0u64;
                    while Instant::now() < deadline {
                        let op = call(c, n);
                        n += 1;
                        let t0 = Instant::now();
                        match store.call(op) {
                            Ok(Reply::Sequence(r)) if r.iter().all(Result::is_ok) => lat.push(t0.elapsed()),
                            other => panic!("a floor commit failed: {other:?}"),
                        }
                    }
                    lat
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let load = Load::since(load);
    let mut latencies: Vec<Duration> = per_client.into_iter().flatten().collect();
    latencies.sort();
    drop(store);
    let _ = std::fs::remove_file(&path);
    Row {
        label: "store alone (no HTTP): the daemon's write per pure call".into(),
        clients,
        calls: latencies.len(),
        errors: 0,
        secs,
        latencies,
        kept: vec![],
        load,
    }
}
