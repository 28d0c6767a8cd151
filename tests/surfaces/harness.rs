//! The surface suite's harness: a lab directory (store, workspace root,
//! scripts, manifests), a real `worldd serve` on it, the command line for
//! publish / mint / verify, and a raw HTTP/1.1 client, so every header and
//! every byte sent and received is the test's own.
//!
//! The store is set up as a user would: `serve` creates it, `publish` and
//! `session mint` go through the daemon's admin socket, genesis is an honest
//! `POST /v1/commit`.

use base64::Engine as _;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};
use world_store::Ref;

pub use crate::process::{Daemon, text, worldd, worldd_ok, write_script};

/// The Python the shipped examples name.
pub const PYTHON: &str = "/usr/bin/python3";
/// The `Accept` every well-behaved MCP request here sends.
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";
pub const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

/// Bounds that only turn a hang into a failure; nothing asserts speed.
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

// ---- the command line ----

// ---- the lab ----

/// What a lab starts with.
#[derive(Default)]
pub struct LabOptions<'a> {
    /// Episodes that get a worktree directory `<ws>/<episode>`.
    pub episodes: &'a [&'a str],
    /// `workspace-exec` allow-list: command name → shell script body.
    pub exec: &'a [(&'a str, &'a str)],
    /// Skip the genesis commit.
    pub no_genesis: bool,
    /// Skip `publish --builtin`.
    pub no_builtin: bool,
    /// `--host-callbacks N`.
    pub host_callbacks: Option<usize>,
    /// Where the store goes (its own file system, say); the lab directory otherwise.
    pub store_dir: Option<&'a Path>,
    /// Further `serve` arguments.
    pub serve_args: &'a [&'a str],
}

/// Confined runs in flight: each has a run directory beside the store
/// (`<db>.scratch/run-*`) from just before it starts until it has ended.
pub fn runs_in_flight(scratch: &Path) -> usize {
    std::fs::read_dir(scratch)
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("run-")).count())
        .unwrap_or(0)
}

/// Where gates live; confined runs may read it.
const GATES: &str = "gates";

/// A temporary world: store, workspace root, daemon.
pub struct Lab {
    _dir: tempfile::TempDir,
    /// Canonical lab directory.
    pub root: PathBuf,
    pub db: PathBuf,
    pub ws: PathBuf,
    pub daemon: Daemon,
    serve_args: Vec<String>,
}

impl Lab {
    pub fn new(opts: LabOptions<'_>) -> Lab {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, bin) = (root.join("ws"), root.join("bin"));
        let db = opts.store_dir.unwrap_or(&root).join("world.db");
        for d in [&ws, &bin] {
            std::fs::create_dir_all(d).unwrap();
        }
        for ep in opts.episodes {
            std::fs::create_dir_all(ws.join(ep)).unwrap();
        }
        std::fs::create_dir_all(root.join(GATES)).unwrap();
        let mut serve_args = vec!["--workspace-root".to_string(), ws.display().to_string()];
        serve_args.extend(["--confine-read".to_string(), root.join(GATES).display().to_string()]);
        for (name, body) in opts.exec {
            let path = bin.join(format!("{name}.sh"));
            write_script(&path, body);
            serve_args.push("--exec-allow".into());
            serve_args.push(format!("{name}={}", path.display()));
        }
        if let Some(n) = opts.host_callbacks {
            serve_args.extend(["--host-callbacks".to_string(), n.to_string()]);
        }
        serve_args.extend(opts.serve_args.iter().map(|a| a.to_string()));
        let daemon = Daemon::start(&db, &serve_args);
        let lab = Lab { _dir: dir, root, db, ws, daemon, serve_args };
        if !opts.no_builtin {
            worldd_ok(&["publish", "--db", lab.db_str(), "--builtin"]);
        }
        if !opts.no_genesis {
            lab.genesis();
        }
        lab
    }

    pub fn db_str(&self) -> &str {
        self.db.to_str().unwrap()
    }

    pub fn addr(&self) -> &str {
        &self.daemon.addr
    }

    pub fn worktree(&self, episode: &str) -> PathBuf {
        self.ws.join(episode)
    }

    /// SIGKILL the daemon (the store stays as it is on disk).
    pub fn kill9(&mut self) {
        self.daemon.kill9();
    }

    /// Starts a new daemon on the same store and options (after [`Lab::kill9`]).
    pub fn restart(&mut self) {
        self.daemon.kill9();
        self.daemon = Daemon::start(&self.db, &self.serve_args);
    }

    pub fn publish_manifest(&self, manifest: &Path, replace: bool) -> Output {
        let mut args = vec!["publish", "--db", self.db_str(), "--manifest", manifest.to_str().unwrap()];
        if replace {
            args.push("--replace");
        }
        worldd(&args)
    }

    pub fn publish_ok(&self, manifest: &Path, replace: bool) {
        let o = self.publish_manifest(manifest, replace);
        assert!(o.status.success(), "publish {}: {}{}", manifest.display(), text(&o.stdout), text(&o.stderr));
    }

    /// Mints a session through the command line (the daemon's admin socket) and returns its token.
    pub fn mint(&self, episode: &str, grants: &[&str]) -> String {
        self.mint_ttl(episode, grants, None)
    }

    pub fn mint_ttl(&self, episode: &str, grants: &[&str], ttl: Option<u64>) -> String {
        self.mint_with(episode, grants, ttl, &[])
    }

    /// A mint with more of its arguments (`--ask …`).
    pub fn mint_with(&self, episode: &str, grants: &[&str], ttl: Option<u64>, more: &[&str]) -> String {
        let out = self.root.join(format!("session-{episode}-{}", unique()));
        let ttl = ttl.map(|t| t.to_string());
        let mut args = vec!["session", "mint", "--db", self.db_str(), "--episode", episode, "--yes"];
        for g in grants {
            args.extend(["--grant", g]);
        }
        args.extend(more);
        if let Some(t) = &ttl {
            args.extend(["--ttl", t.as_str()]);
        }
        args.extend(["--out", out.to_str().unwrap()]);
        worldd_ok(&args);
        let token = std::fs::read_to_string(&out).unwrap().trim().to_string();
        assert_eq!(token.len(), 64, "{token:?}");
        token
    }

    /// A token whose session has expired: minted with `--ttl 1`, then waited out.
    pub fn expired_token(&self, episode: &str) -> String {
        let token = self.mint_ttl(episode, &["world.apply=world:1"], Some(1));
        wait_for("the session to expire", Duration::from_secs(10), || {
            let r = self.get_auth("/.well-known/agent.json", &token);
            r.status == 401 && r.text().contains("SessionExpired")
        });
        token
    }

    /// An honest genesis (entry 0, world revision 0), committed over REST.
    pub fn genesis(&self) {
        let token = self.mint("genesis", &["World.Commit=log:1"]);
        let body = serde_json::to_vec(&genesis_body()).unwrap();
        let r =
            self.post("/v1/commit", &[("Authorization", &bearer(&token)), ("Content-Type", "application/json")], &body);
        assert_eq!(r.status, 200, "genesis: {}", r.text());
    }

    // ---- HTTP ----

    pub fn get(&self, path: &str) -> Reply {
        http(self.addr(), "GET", path, &[], b"")
    }

    pub fn get_auth(&self, path: &str, token: &str) -> Reply {
        http(self.addr(), "GET", path, &[("Authorization", &bearer(token))], b"")
    }

    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        http(self.addr(), "POST", path, headers, body)
    }

    /// `GET path` that must be 200 JSON.
    pub fn get_json(&self, path: &str) -> Value {
        let r = self.get(path);
        assert_eq!(r.status, 200, "GET {path}: {}", r.text());
        r.json()
    }

    /// `POST /mcp/` with exactly these headers.
    pub fn mcp_raw(&self, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        self.post("/mcp/", headers, body)
    }

    /// `POST /mcp/` as a well-behaved client (no version header: 2025-03-26).
    pub fn mcp(&self, token: &str, body: &Value) -> Reply {
        self.mcp_version(token, None, body)
    }

    pub fn mcp_version(&self, token: &str, version: Option<&str>, body: &Value) -> Reply {
        let auth = bearer(token);
        let mut h =
            vec![("Authorization", auth.as_str()), ("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)];
        if let Some(v) = version {
            h.push(("MCP-Protocol-Version", v));
        }
        self.mcp_raw(&h, &serde_json::to_vec(body).unwrap())
    }

    /// `tools/call` that must succeed; returns the JSON-RPC `result`.
    pub fn mcp_call_ok(&self, token: &str, tool: &str, args: &Value) -> Value {
        let r = self.mcp(token, &call_body(json!(1), tool, args));
        let v = sse(&r);
        assert!(v.get("result").is_some(), "tools/call {tool}: {v}");
        v["result"].clone()
    }

    /// `POST /a2a/` with the bearer and a JSON body.
    pub fn a2a_raw(&self, token: Option<&str>, body: &[u8]) -> Reply {
        let auth = token.map(bearer);
        let mut h = vec![("Content-Type", "application/json")];
        if let Some(a) = &auth {
            h.push(("Authorization", a.as_str()));
        }
        self.post("/a2a/", &h, body)
    }

    /// `tasks/send`; the whole JSON-RPC reply (asserted 200 JSON).
    pub fn send(&self, token: &str, task: &str, skill: &str, args: &Value) -> Value {
        self.send_pinned(token, task, skill, args, None)
    }

    pub fn send_pinned(&self, token: &str, task: &str, skill: &str, args: &Value, pin: Option<&str>) -> Value {
        let r = self.a2a_raw(Some(token), &serde_json::to_vec(&send_body(task, skill, args, pin)).unwrap());
        a2a_json(&r)
    }

    // ---- the store, seen from outside ----

    /// Every log entry, paged.
    pub fn log(&self) -> Vec<Value> {
        let mut all: Vec<Value> = vec![];
        loop {
            let page = self.get_json(&format!("/v1/log?from={}&limit=500", all.len()));
            let items = page["items"].as_array().unwrap().clone();
            if items.is_empty() {
                return all;
            }
            all.extend(items);
        }
    }

    pub fn log_len(&self) -> usize {
        self.log().len()
    }

    /// An object's payload bytes, checked against its ref.
    pub fn payload(&self, r: &str) -> Vec<u8> {
        let v = self.get_json(&format!("/v1/objects/{r}?payload=true"));
        let bytes = base64::engine::general_purpose::STANDARD.decode(v["payload"].as_str().unwrap()).unwrap();
        assert_eq!(Ref::of(&bytes).to_string(), r, "payload rehashes to its ref");
        bytes
    }

    pub fn object_json(&self, r: &str) -> Value {
        serde_json::from_slice(&self.payload(r)).unwrap()
    }

    /// The invocation record an entry points at.
    pub fn invocation_record(&self, entry_index: u64) -> Value {
        let e = self.get_json(&format!("/v1/log/{entry_index}"));
        self.object_json(e["transitionRef"].as_str().unwrap())
    }

    /// The invocation records of every entry after genesis, in log order.
    pub fn invocation_records(&self) -> Vec<Value> {
        self.log().iter().skip(1).map(|e| self.object_json(e["transitionRef"].as_str().unwrap())).collect()
    }

    /// The transitionFn the registry holds for `id`.
    pub fn transition_fn(&self, id: &str) -> String {
        let head = self.get_json("/v1/registry/world/transition-registry/v1");
        let reg = self.object_json(head["head"].as_str().unwrap());
        let d = reg["transitions"].as_array().unwrap().iter().find(|d| d["id"] == id).expect("registered");
        d["transitionFn"].as_str().unwrap().to_string()
    }

    /// `worldd verify --json`: asserts a clean report and returns it.
    pub fn verify_clean(&self) -> Value {
        let o = worldd(&["verify", "--db", self.db_str(), "--json"]);
        let report: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("verify output is not JSON ({e}): {}{}", text(&o.stdout), text(&o.stderr)));
        assert!(o.status.success() && report["faultCount"] == 0, "verify found faults: {report}");
        report
    }

    /// `(tasks, intents)` as `worldd verify` counts them.
    /// Tasks, and intents of the agents' effects (each REST commit, the
    /// genesis included, journals an intent of its own: not counted).
    pub fn journal_counts(&self) -> (u64, u64) {
        let r = self.verify_clean();
        let commits = self.get_json("/v1/objects/by-semantic-id/world/commit-record/v1?limit=500")["items"]
            .as_array()
            .map_or(0, |items| items.len() as u64);
        (r["counts"]["tasks"].as_u64().unwrap(), r["counts"]["intents"].as_u64().unwrap() - commits)
    }

    /// Writes `files` and a manifest of `entries` into the lab; returns the manifest path.
    pub fn manifest(&self, name: &str, files: &[(&str, &str)], entries: Value) -> PathBuf {
        let dir = self.root.join(format!("manifest-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        for (file, source) in files {
            std::fs::write(dir.join(file), source).unwrap();
        }
        let path = dir.join("manifest.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&entries).unwrap()).unwrap();
        path
    }
}

/// A manifest entry for an exec (Python) transition. `effect` is its one
/// declared effect at scope worktree, cost 1; `access` defaults to
/// `world.apply=world` cost 1.
pub fn exec_entry(id: &str, file: &str, effect: Option<&str>, access: Option<(&str, &str, u64)>) -> Value {
    let (e, s, c) = access.unwrap_or(("world.apply", "world", 1));
    let declared: Vec<Value> = effect.iter().map(|e| json!({"effect": e, "scope": "worktree", "cost": 1})).collect();
    json!({"id": id, "title": format!("{id} title"), "description": format!("{id} description"),
        "transitionFnFile": file, "runtime": {"exec": {"interpreter": PYTHON}},
        "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
        "access": {"effect": e, "scope": s, "cost": c}, "declaredEffects": declared})
}

/// A manifest entry running the builtin echo under another id.
pub fn echo_entry(id: &str, access: (&str, &str, u64)) -> Value {
    json!({"id": id, "title": format!("{id} title"), "description": format!("{id} description"),
        "runtime": {"builtin": {"name": "tools.echo"}},
        "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
        "access": {"effect": access.0, "scope": access.1, "cost": access.2}, "declaredEffects": []})
}

/// A pure transition that writes `started` into `dir`, then waits (at most
/// 1.7 s, inside the 2 s phase deadline) for the test to create `go` there,
/// and returns `{"gated": <args>}`. The test decides when it ends.
pub fn gate_source(dir: &Path) -> String {
    format!(
        r#"import json, os, sys, time
args = json.loads(sys.stdin.read())
d = {dir:?}
t = time.time()
while not os.path.exists(os.path.join(d, "go")) and time.time() - t < 1.7:
    time.sleep(0.005)
sys.stdout.write(json.dumps({{"gated": args}}))
"#,
        dir = dir.display().to_string()
    )
}

/// A gate: `open()` lets the gated runs finish. A confined run can only read
/// the gate (`serve --confine-read <lab>/gates`), so a run is seen to have
/// started by its run directory beside the store (`<db>.scratch/run-*`).
pub struct Gate {
    pub dir: PathBuf,
    scratch: PathBuf,
}

impl Gate {
    pub fn new(root: &Path, name: &str) -> Gate {
        let dir = root.join(GATES).join(format!("gate-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        Gate { dir, scratch: root.join("world.db.scratch") }
    }

    fn runs(&self) -> usize {
        runs_in_flight(&self.scratch)
    }

    pub fn wait_started(&self) {
        self.wait_started_n(1);
    }

    /// Waits until `n` gated runs are in flight.
    pub fn wait_started_n(&self, n: usize) {
        wait_for(&format!("{n} gated runs to start"), Duration::from_secs(20), || self.runs() >= n);
    }

    pub fn open(&self) {
        std::fs::write(self.dir.join("go"), "").unwrap();
    }

    pub fn reset(&self) {
        let _ = std::fs::remove_file(self.dir.join("go"));
    }
}

fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The REST body of this suite's genesis commit.
pub fn genesis_body() -> Value {
    crate::commit::genesis_body("surface-tests")
}

// ---- wire helpers ----

pub fn call_body(id: Value, tool: &str, args: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
}

pub fn send_body(task: &str, skill: &str, args: &Value, pin: Option<&str>) -> Value {
    let mut metadata = json!({"skill_id": skill});
    if let Some(p) = pin {
        metadata["transition_fn"] = json!(p);
    }
    json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {
        "id": task, "metadata": metadata,
        "message": {"role": "user", "parts": [{"type": "data", "data": args}]}}})
}

/// Asserts one SSE event exactly as the seed frames it (`event: message`,
/// one `data:` line, a blank line, nothing else) and returns the JSON-RPC data.
pub fn sse(r: &Reply) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.content_type(), "text/event-stream", "{}", r.text());
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    let body = r.text();
    let data = body
        .strip_prefix("event: message\ndata: ")
        .and_then(|rest| rest.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("not one SSE event: {body:?}"));
    assert!(!data.contains('\n'), "one data line: {body:?}");
    serde_json::from_str(data).unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {data:?}"))
}

/// The data line of an SSE reply, as text.
pub fn sse_data(r: &Reply) -> String {
    sse(r);
    let body = r.text();
    body["event: message\ndata: ".len()..body.len() - 2].to_string()
}

/// Asserts a plain-JSON reply (`application/json`, nosniff) with exactly `body`.
pub fn assert_json_reply(r: &Reply, status: u16, body: &str) {
    assert_eq!((r.status, r.text().as_str()), (status, body), "{r:?}");
    assert_eq!(r.content_type(), "application/json");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
}

/// Asserts a plain-text reply with exactly `body`.
pub fn assert_text_reply(r: &Reply, status: u16, body: &str) {
    assert_eq!((r.status, r.text().as_str()), (status, body), "{r:?}");
    assert_eq!(r.content_type(), TEXT_PLAIN);
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
}

/// The MCP host-failure envelope, byte for byte.
pub fn host_failure(id: &str, message: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32603,\"message\":\"{message}\"}}}}\n")
}

/// An A2A error reply (Go map order: error, id, jsonrpc), byte for byte.
pub fn a2a_error(id: &str, code: i64, message: &str) -> String {
    let m = serde_json::to_string(message).unwrap().replace('<', "\\u003c").replace('>', "\\u003e");
    format!("{{\"error\":{{\"code\":{code},\"message\":{m}}},\"id\":{id},\"jsonrpc\":\"2.0\"}}\n")
}

/// A refusal of the seed's `tasks/send` with a -32602: the table's code and
/// message exactly, its id, and `data` saying why (an ErrorInfo with a
/// detail). Returns the ErrorInfo's metadata.
pub fn assert_a2a_told(r: &Reply, id: &str, code: i64, message: &str) -> Value {
    let v = a2a_json(r);
    assert_eq!((&v["error"]["code"], &v["error"]["message"]), (&json!(code), &json!(message)), "{v}");
    assert_eq!(v["id"].to_string(), id, "{v}");
    let info = &v["error"]["data"][0];
    assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo", "the reason in data: {v}");
    assert!(info["metadata"]["detail"].as_str().is_some_and(|d| !d.is_empty()), "{v}");
    info["metadata"].clone()
}

/// An `/a2a/` reply: always HTTP 200 JSON; the body parsed.
pub fn a2a_json(r: &Reply) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.content_type(), "application/json");
    assert!(r.body.ends_with(b"\n"));
    r.json()
}

/// `(code, message)` of a JSON-RPC error.
pub fn rpc_error(v: &Value) -> (i64, String) {
    let e = v.get("error").unwrap_or_else(|| panic!("expected an error, got {v}"));
    (e["code"].as_i64().unwrap(), e["message"].as_str().unwrap().to_string())
}

/// Waits (bounded) until `cond` holds.
pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

// ---- a raw HTTP/1.1 client ----

/// A reply as the tests look at it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }

    pub fn text(&self) -> String {
        text(&self.body)
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }
}

/// One request on a fresh connection, with exactly `headers` (plus `Host`
/// unless given, `Content-Length` for a POST, and `Connection: close`). The
/// body is written from another thread, so a server that answers before
/// reading it all cannot deadlock the test.
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(HTTP_TIMEOUT)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    if method != "GET" || !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("write head");
    let writer = {
        let mut s = stream.try_clone().unwrap();
        let body = body.to_vec();
        std::thread::spawn(move || {
            let _ = s.write_all(&body);
        })
    };
    let mut raw = Vec::new();
    // A reset after a complete reply (the server closed with body bytes unread) is not a failure.
    let _ = stream.read_to_end(&mut raw);
    let _ = writer.join();
    parse_reply(&raw).unwrap_or_else(|| panic!("{method} {path}: no complete reply in {:?}", text(&raw)))
}

fn parse_reply(raw: &[u8]) -> Option<Reply> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &raw[end + 4..];
    let body = match headers.iter().find(|(n, _)| n == "content-length") {
        Some((_, v)) => {
            let len: usize = v.parse().ok()?;
            if rest.len() < len {
                return None;
            }
            rest[..len].to_vec()
        }
        None => rest.to_vec(),
    };
    Some(Reply { status, headers, body })
}

/// A keep-alive HTTP/1.1 connection for load (the reliability test).
pub struct Conn {
    addr: String,
    stream: Option<BufReader<TcpStream>>,
}

impl Conn {
    pub fn new(addr: &str) -> Conn {
        Conn { addr: addr.to_string(), stream: None }
    }

    /// POSTs `body`; `Err` is a transport failure (the connection is dropped).
    pub fn post(&mut self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<Reply, String> {
        let r = self.try_post(path, headers, body);
        if r.is_err() {
            self.stream = None;
        }
        r
    }

    fn try_post(&mut self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<Reply, String> {
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.addr).map_err(|e| e.to_string())?;
            s.set_read_timeout(Some(HTTP_TIMEOUT)).map_err(|e| e.to_string())?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            self.stream = Some(BufReader::new(s));
        }
        let reader = self.stream.as_mut().unwrap();
        let mut req = format!("POST {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        reader.get_mut().write_all(&bytes).map_err(|e| e.to_string())?;
        let mut status_line = String::new();
        if reader.read_line(&mut status_line).map_err(|e| e.to_string())? == 0 {
            return Err("connection closed".into());
        }
        let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or("bad status line")?;
        let mut headers = vec![];
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).map_err(|e| e.to_string())?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((n, v)) = line.split_once(':') {
                headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .ok_or("no content-length")?;
        let mut body = vec![0; len];
        reader.read_exact(&mut body).map_err(|e| e.to_string())?;
        if headers.iter().any(|(n, v)| n == "connection" && v.eq_ignore_ascii_case("close")) {
            self.stream = None;
        }
        Ok(Reply { status, headers, body })
    }
}
