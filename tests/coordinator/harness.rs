//! The coordinator suite's own small harness: a lab directory (store,
//! workspace root, an `outside` directory, scripts), a real `worldd serve` on
//! it, the command line for publish / mint / verify, and A2A and REST clients.
//! The store is set up as a user would: `serve` creates it, `publish` and
//! `session mint` go through the daemon's admin socket, genesis is an honest
//! `POST /v1/commit`.

use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};
use world_store::Ref;

pub use crate::process::{Daemon, text, worldd, worldd_ok, write_script};

/// The Python the shipped examples name.
pub const PYTHON: &str = "/usr/bin/python3";

/// Bounds that only turn a hang into a failure; nothing asserts speed.
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(HTTP_TIMEOUT)).build().into()
}

/// What a lab starts with.
#[derive(Default)]
pub struct LabOptions<'a> {
    /// Episodes that get a worktree directory `<ws>/<episode>`.
    pub episodes: &'a [&'a str],
    /// `workspace-exec` allow-list: command name → shell script body.
    pub exec: &'a [(&'a str, &'a str)],
    /// More `workspace-exec` allow-list entries as `NAME=PATH`, passed as they
    /// are (e.g. `"python3=/usr/bin/python3"`).
    pub exec_allow: &'a [&'a str],
    /// More `worldd serve` flags (e.g. `"--unconfined"`).
    pub serve_args: &'a [&'a str],
    /// Skip the genesis commit.
    pub no_genesis: bool,
    /// Run the daemon as this uid (and gid) instead of the test's user; the
    /// lab directory is given to it first.
    pub user: Option<u32>,
}

/// A temporary world: store, workspace root, daemon.
pub struct Lab {
    _dir: tempfile::TempDir,
    /// Canonical lab directory.
    pub root: PathBuf,
    pub db: PathBuf,
    pub ws: PathBuf,
    /// A directory outside the workspace root (targets of hostile symlinks).
    pub outside: PathBuf,
    pub daemon: Daemon,
    serve_args: Vec<String>,
}

impl Lab {
    pub fn new(opts: LabOptions<'_>) -> Lab {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (db, ws, outside, bin) = (root.join("world.db"), root.join("ws"), root.join("outside"), root.join("bin"));
        for d in [&ws, &outside, &bin] {
            std::fs::create_dir_all(d).unwrap();
        }
        for ep in opts.episodes {
            std::fs::create_dir_all(ws.join(ep)).unwrap();
        }
        let mut serve_args = vec!["--workspace-root".to_string(), ws.display().to_string()];
        for (name, body) in opts.exec {
            let path = bin.join(format!("{name}.sh"));
            write_script(&path, body);
            serve_args.push("--exec-allow".into());
            serve_args.push(format!("{name}={}", path.display()));
        }
        for entry in opts.exec_allow {
            serve_args.push("--exec-allow".into());
            serve_args.push(entry.to_string());
        }
        serve_args.extend(opts.serve_args.iter().map(|a| a.to_string()));
        let daemon = match opts.user {
            None => Daemon::start(&db, &serve_args),
            Some(uid) => {
                chown_tree(&root, uid);
                Daemon::start_with(&db, &serve_args, |cmd| {
                    std::os::unix::process::CommandExt::uid(cmd, uid);
                    std::os::unix::process::CommandExt::gid(cmd, uid);
                })
            }
        };
        let lab = Lab { _dir: dir, root, db, ws, outside, daemon, serve_args };
        lab.publish_builtin();
        if !opts.no_genesis {
            lab.genesis();
        }
        lab
    }

    pub fn db_str(&self) -> &str {
        self.db.to_str().unwrap()
    }

    pub fn worktree(&self, episode: &str) -> PathBuf {
        self.ws.join(episode)
    }

    /// The daemon's admin socket, `<db>.admin.sock`.
    pub fn admin_socket(&self) -> PathBuf {
        PathBuf::from(format!("{}.admin.sock", self.db.display()))
    }

    /// The token files [`Lab::mint`] wrote (`<root>/session-*`), sorted.
    pub fn session_files(&self) -> Vec<PathBuf> {
        names(&self.root).into_iter().filter(|n| n.starts_with("session-")).map(|n| self.root.join(n)).collect()
    }

    /// SIGKILL the daemon and start a new one on the same store (it runs recovery).
    pub fn crash_and_restart(&mut self) {
        self.daemon.kill9();
        self.daemon = Daemon::start(&self.db, &self.serve_args);
    }

    pub fn publish_builtin(&self) -> String {
        worldd_ok(&["publish", "--db", self.db_str(), "--builtin"])
    }

    pub fn publish_manifest(&self, manifest: &Path, replace: bool) -> Output {
        let mut args = vec!["publish", "--db", self.db_str(), "--manifest", manifest.to_str().unwrap()];
        if replace {
            args.push("--replace");
        }
        worldd(&args)
    }

    /// Mints a session through the command line (the daemon's admin socket) and returns its token.
    pub fn mint(&self, episode: &str, grants: &[&str]) -> String {
        self.mint_ttl(episode, grants, None).0
    }

    /// Like [`Lab::mint`] with `--ttl`; also returns the session's `expiresAt` (Unix seconds).
    pub fn mint_ttl(&self, episode: &str, grants: &[&str], ttl: Option<u64>) -> (String, u64) {
        let out = self.root.join(format!("session-{episode}-{}", rand_suffix()));
        let ttl = ttl.map(|t| t.to_string());
        let mut args = vec!["session", "mint", "--db", self.db_str(), "--episode", episode, "--yes"];
        for g in grants {
            args.push("--grant");
            args.push(g);
        }
        if let Some(t) = &ttl {
            args.extend(["--ttl", t.as_str()]);
        }
        args.push("--out");
        args.push(out.to_str().unwrap());
        let stdout = worldd_ok(&args);
        let token = std::fs::read_to_string(&out).unwrap().trim().to_string();
        assert_eq!(token.len(), 64, "{token:?}");
        // `… expires YYYY-MM-DD HH:MM:SS UTC, written to …`, read back by `date -u`.
        let printed = stdout.split(", expires ").nth(1).and_then(|rest| rest.split(',').next());
        let printed = printed.unwrap_or_else(|| panic!("no expiry in {stdout:?}"));
        let o = std::process::Command::new("date").args(["-u", "-d", printed, "+%s"]).output().unwrap();
        let expires = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap_or_else(|_| panic!("{printed:?}"));
        (token, expires)
    }

    pub fn client(&self, token: &str) -> Client {
        Client { agent: agent(), url: format!("http://{}/a2a/", self.daemon.addr), token: token.to_string() }
    }

    /// An honest genesis (entry 0, world revision 0), committed over REST.
    pub fn genesis(&self) {
        let token = self.mint("genesis", &["World.Commit=log:1"]);
        let (status, body) = self.post_json("/v1/commit", &token, &genesis_body());
        assert_eq!(status, 200, "genesis: {body}");
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        let mut resp = agent().get(&format!("http://{}{path}", self.daemon.addr)).call().expect("GET");
        let status = resp.status().as_u16();
        let body = resp.body_mut().with_config().limit(64 << 20).read_to_vec().expect("body");
        (status, serde_json::from_slice(&body).unwrap_or(Value::String(text(&body))))
    }

    pub fn post_json(&self, path: &str, token: &str, body: &Value) -> (u16, Value) {
        let mut resp = agent()
            .post(&format!("http://{}{path}", self.daemon.addr))
            .header("Authorization", &format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .send(serde_json::to_vec(body).unwrap())
            .expect("POST");
        let status = resp.status().as_u16();
        let body = resp.body_mut().read_to_vec().expect("body");
        (status, serde_json::from_slice(&body).unwrap_or(Value::String(text(&body))))
    }

    /// An object's payload bytes, checked against its ref.
    pub fn payload(&self, r: &str) -> Vec<u8> {
        let (status, v) = self.get(&format!("/v1/objects/{r}?payload=true"));
        assert_eq!(status, 200, "object {r}: {v}");
        let bytes = base64::engine::general_purpose::STANDARD.decode(v["payload"].as_str().unwrap()).unwrap();
        assert_eq!(Ref::of(&bytes).to_string(), r, "payload rehashes to its ref");
        bytes
    }

    pub fn object_json(&self, r: &str) -> Value {
        serde_json::from_slice(&self.payload(r)).unwrap()
    }

    /// Every log entry, paged.
    pub fn log(&self) -> Vec<Value> {
        let mut all: Vec<Value> = vec![];
        loop {
            let (status, page) = self.get(&format!("/v1/log?from={}&limit=500", all.len()));
            assert_eq!(status, 200, "{page}");
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

    /// The invocation record an entry points at.
    pub fn invocation_record(&self, entry_index: u64) -> Value {
        let (status, e) = self.get(&format!("/v1/log/{entry_index}"));
        assert_eq!(status, 200, "{e}");
        self.object_json(e["transitionRef"].as_str().unwrap())
    }

    /// The transitionFn the registry holds for `id`.
    pub fn transition_fn(&self, id: &str) -> String {
        let (status, head) = self.get("/v1/registry/world/transition-registry/v1");
        assert_eq!(status, 200, "{head}");
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

    /// The intents of the agents' effects in a verify report: each REST
    /// commit (the genesis included) journals one of its own, not counted.
    pub fn effect_intents(&self, report: &Value) -> u64 {
        let (_, page) = self.get("/v1/objects/by-semantic-id/world/commit-record/v1?limit=500");
        let commits = page["items"].as_array().map_or(0, |items| items.len() as u64);
        report["counts"]["intents"].as_u64().expect("an intent count") - commits
    }

    /// Writes test transitions (Python sources) and their manifest into the lab; returns the manifest path.
    pub fn manifest(&self, name: &str, entries: &[Transition<'_>]) -> PathBuf {
        let dir = self.root.join(format!("manifest-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let items: Vec<Value> = entries
            .iter()
            .map(|t| {
                std::fs::write(dir.join(format!("{}.py", t.file)), t.source).unwrap();
                let access = match t.access {
                    Some((e, s, c)) => json!({"effect": e, "scope": s, "cost": c}),
                    None => match t.effect {
                        Some(e) => json!({"effect": e, "scope": "worktree", "cost": 0}),
                        None => json!({"effect": "world.apply", "scope": "world", "cost": 1}),
                    },
                };
                let declared: Vec<Value> =
                    t.effect.iter().map(|e| json!({"effect": e, "scope": "worktree", "cost": 1})).collect();
                json!({"id": t.id, "title": t.id, "description": "a test transition",
                    "transitionFnFile": format!("{}.py", t.file),
                    "runtime": {"exec": {"interpreter": PYTHON}},
                    "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
                    "access": access, "declaredEffects": declared})
            })
            .collect();
        let path = dir.join("manifest.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&items).unwrap()).unwrap();
        path
    }
}

/// One test transition for [`Lab::manifest`].
pub struct Transition<'a> {
    pub id: &'a str,
    pub file: &'a str,
    pub source: &'a str,
    /// The one declared effect (scope worktree, cost 1), if effectful.
    pub effect: Option<&'a str>,
    /// `access`; by default the declared effect at cost 0, or `world.apply=world` cost 1 when pure.
    pub access: Option<(&'a str, &'a str, u64)>,
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// The REST body of this suite's genesis commit.
pub fn genesis_body() -> Value {
    crate::commit::genesis_body("coordinator-tests")
}

/// An A2A client bound to one session.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    pub url: String,
    token: String,
}

impl Client {
    pub fn with_url(&self, addr: &str) -> Client {
        Client { agent: agent(), url: format!("http://{addr}/a2a/"), token: self.token.clone() }
    }

    /// `tasks/send`; `Err` is a transport failure (no JSON-RPC reply arrived).
    pub fn try_send(&self, task_id: &str, skill: &str, args: &Value, pin: Option<&str>) -> Result<A2a, String> {
        let mut metadata = json!({"skill_id": skill});
        if let Some(p) = pin {
            metadata["transition_fn"] = json!(p);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {
            "id": task_id, "metadata": metadata,
            "message": {"role": "user", "parts": [{"type": "data", "data": args}]}}});
        let mut resp = self
            .agent
            .post(&self.url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .header("Content-Type", "application/json")
            .send(serde_json::to_vec(&body).unwrap())
            .map_err(|e| e.to_string())?;
        if resp.status().as_u16() != 200 {
            return Err(format!("HTTP {}", resp.status()));
        }
        let bytes = resp.body_mut().with_config().limit(8 << 20).read_to_vec().map_err(|e| e.to_string())?;
        serde_json::from_slice(&bytes).map(A2a).map_err(|e| format!("reply is not JSON ({e}): {}", text(&bytes)))
    }

    pub fn send(&self, task_id: &str, skill: &str, args: &Value) -> A2a {
        self.try_send(task_id, skill, args, None).unwrap_or_else(|e| panic!("tasks/send {task_id}: {e}"))
    }

    pub fn send_pinned(&self, task_id: &str, skill: &str, args: &Value, pin: &str) -> A2a {
        self.try_send(task_id, skill, args, Some(pin)).unwrap_or_else(|e| panic!("tasks/send {task_id}: {e}"))
    }

    /// `GET /.well-known/agent.json`: the ids of the skills this session sees.
    pub fn skills(&self) -> Vec<String> {
        let url = self.url.replace("/a2a/", "/.well-known/agent.json");
        let mut resp =
            self.agent.get(&url).header("Authorization", &format!("Bearer {}", self.token)).call().expect("card");
        assert_eq!(resp.status().as_u16(), 200);
        let card: Value = serde_json::from_slice(&resp.body_mut().read_to_vec().unwrap()).unwrap();
        card["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect()
    }
}

/// One JSON-RPC reply of `/a2a/`.
#[derive(Clone, Debug)]
pub struct A2a(pub Value);

impl A2a {
    pub fn is_ok(&self) -> bool {
        self.0.get("result").is_some()
    }

    pub fn result(&self) -> &Value {
        assert!(self.is_ok(), "expected a result, got {}", self.0);
        &self.0["result"]
    }

    /// The transition's committed output.
    pub fn output(&self) -> &Value {
        &self.result()["artifacts"][0]["parts"][0]["data"]
    }

    pub fn entry_index(&self) -> u64 {
        self.result()["metadata"]["entry_index"].as_u64().expect("entry_index")
    }

    /// `(code, message)` of an error reply.
    pub fn error(&self) -> (i64, String) {
        let e = self.0.get("error").unwrap_or_else(|| panic!("expected an error, got {}", self.0));
        (e["code"].as_i64().unwrap(), e["message"].as_str().unwrap().to_string())
    }

    pub fn assert_error(&self, code: i64, message: &str) {
        assert_eq!(self.error(), (code, message.to_string()), "{}", self.0);
    }

    /// Status of the one effect in `world.effects` (None for a zero-effect output).
    pub fn effect_status(&self) -> Option<String> {
        self.output()["world"]["effects"].get(0).map(|e| e["status"].as_str().unwrap().to_string())
    }

    pub fn effect_record(&self) -> Option<String> {
        self.output()["world"]["effects"].get(0).and_then(|e| e["record"].as_str()).map(String::from)
    }
}

/// The plan-phase path refusal, exactly as the reference words it.
pub fn plan_path_refusal(p: &str) -> String {
    format!(
        "path {} refused: it must be relative and non-empty, with no \"..\" segment and no leading \"-\"",
        serde_json::to_string(p).unwrap()
    )
}

/// Every file under `dir` (not following symlinks) with its contents, for before/after comparisons.
pub fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for item in std::fs::read_dir(&d).unwrap().flatten() {
            let p = item.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if meta.is_dir() {
                out.insert(rel, b"<dir>".to_vec());
                stack.push(p);
            } else if meta.file_type().is_symlink() {
                out.insert(rel, format!("<symlink {}>", std::fs::read_link(&p).unwrap().display()).into_bytes());
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// The names directly inside `dir`.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// Gives every file under `dir` (and `dir`) to `uid`:`uid`, not following symlinks.
pub fn chown_tree(dir: &Path, uid: u32) {
    std::os::unix::fs::lchown(dir, Some(uid), Some(uid)).unwrap();
    for item in std::fs::read_dir(dir).unwrap().flatten() {
        let p = item.path();
        std::os::unix::fs::lchown(&p, Some(uid), Some(uid)).unwrap();
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            chown_tree(&p, uid);
        }
    }
}

/// Every path under `dir` (not following symlinks) whose name contains `needle`.
pub fn files_named_like(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for item in rd.flatten() {
            let p = item.path();
            if item.file_name().to_string_lossy().contains(needle) {
                found.push(p.display().to_string());
            }
            if std::fs::symlink_metadata(&p).map(|m| m.is_dir()).unwrap_or(false) {
                stack.push(p);
            }
        }
    }
    found
}

/// Waits (bounded) until `cond` holds.
pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}
