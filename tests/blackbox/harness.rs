//! Starting `worldd`, talking to it, and reading what it says.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::process::{EXIT_WAIT, STARTUP_WAIT};

/// The modern MCP era.
pub const MCP_MODERN: &str = "2026-07-28";
pub use crate::process::{WORLDD, worldd, worldd_into_closed_pipe};

/// A bound that only turns a hang into a failure; nothing asserts speed.
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

/// A temporary directory holding `world.db` (not yet created).
pub struct TempStore {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
}

impl TempStore {
    pub fn new() -> TempStore {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("world.db");
        TempStore { dir, db }
    }

    pub fn socket(&self) -> PathBuf {
        let mut s = self.db.as_os_str().to_owned();
        s.push(".admin.sock");
        PathBuf::from(s)
    }

    pub fn lock(&self) -> PathBuf {
        let mut s = self.db.as_os_str().to_owned();
        s.push(".writer.lock");
        PathBuf::from(s)
    }
}

/// Removes terminal colour sequences, so log lines compare as plain text.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A running `worldd serve`. Dropping it kills the process.
pub struct Daemon {
    child: Option<Child>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The `worldd listening on …` line.
    pub listening: String,
    stderr: Arc<Mutex<Vec<String>>>,
    agent: ureq::Agent,
}

impl Daemon {
    pub fn start(db: &Path) -> Daemon {
        Daemon::start_with(db, &[])
    }

    /// Starts `worldd serve --db DB --bind 127.0.0.1:0 EXTRA…` and waits for its listening line.
    pub fn start_with(db: &Path, extra: &[&str]) -> Daemon {
        let mut cmd = Command::new(WORLDD);
        cmd.arg("serve").arg("--db").arg(db).args(["--bind", "127.0.0.1:0"]).args(extra);
        Daemon::spawn(cmd)
    }

    /// Starts `cmd` (a `worldd` that serves: `serve`, `quickstart`) and waits for its listening line.
    pub fn spawn(mut cmd: Command) -> Daemon {
        let mut child = cmd
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worldd");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        let pipe = child.stderr.take().expect("stderr pipe");
        let lines = stderr.clone();
        // Drains stderr for the daemon's whole life, so it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let line = strip_ansi(&line);
                lines.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + STARTUP_WAIT;
        let listening = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.starts_with("worldd listening on http://") => break line,
                Ok(_) => continue,
                Err(e) => {
                    let _ = child.kill();
                    let status = child.wait();
                    panic!("worldd serve did not report listening ({e}); exit {status:?}; stderr: {:?}", stderr.lock());
                }
            }
        };
        let addr = listening
            .strip_prefix("worldd listening on http://")
            .and_then(|rest| rest.split_once(' '))
            .map(|(addr, _)| addr.to_string())
            .unwrap_or_else(|| panic!("unexpected listening line {listening:?}"));
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(HTTP_TIMEOUT))
            .allow_non_standard_methods(true)
            .build()
            .into();
        Daemon { child: Some(child), addr, listening, stderr, agent }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    pub fn agent(&self) -> ureq::Agent {
        self.agent.clone()
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], None)
    }

    /// `POST /v1/commit` with `Authorization: Bearer TOKEN` when a token is given.
    pub fn commit(&self, body: &[u8], token: Option<&str>) -> Reply {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        self.request("POST", "/v1/commit", &headers, Some(body))
    }

    /// An MCP 2026-07-28 request as a conforming client sends it: the era and
    /// the client's `capabilities` in `_meta`, the era's headers, `Mcp-Name`
    /// mirroring the tool's name or the task's id. Returns the JSON reply.
    pub fn mcp_modern(
        &self,
        token: &str,
        method: &str,
        mut params: serde_json::Value,
        capabilities: serde_json::Value,
    ) -> serde_json::Value {
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": MCP_MODERN,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let name = params.get("name").or_else(|| params.get("taskId")).and_then(|n| n.as_str()).map(str::to_owned);
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", MCP_MODERN),
            ("Mcp-Method", method),
        ];
        if let Some(n) = &name {
            headers.push(("Mcp-Name", n.as_str()));
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.request("POST", "/mcp/", &headers, Some(&serde_json::to_vec(&body).unwrap())).json()
    }

    /// One request; the reply is checked against `docs/openapi.json` before it is returned.
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Reply {
        let reply = send(&self.agent, method, &self.url(path), headers, body);
        crate::openapi::check(method, path, &reply);
        reply
    }

    /// Sends `signal` (e.g. `TERM`) and waits for the process to exit.
    pub fn signal_and_wait(&mut self, signal: &str) -> ExitStatus {
        let pid = self.pid().to_string();
        let sent = Command::new("kill").arg(format!("-{signal}")).arg(&pid).status().expect("run kill");
        assert!(sent.success(), "kill -{signal} {pid} failed");
        self.wait_exit()
    }

    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + EXIT_WAIT;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("worldd did not exit; stderr: {:?}", self.stderr_lines());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

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
        String::from_utf8(self.body.clone()).expect("UTF-8 body")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    /// A 200 `application/json` reply ending with a newline, parsed.
    pub fn ok_json(&self) -> serde_json::Value {
        assert_eq!(self.status, 200, "{}", String::from_utf8_lossy(&self.body));
        assert_json_headers(self);
        self.json()
    }
}

pub fn assert_json_headers(r: &Reply) {
    assert_eq!(r.content_type(), "application/json");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert!(r.body.ends_with(b"\n"), "JSON bodies end with a newline");
}

/// Asserts a REST error envelope: status, JSON headers, class, and the message
/// when given. Returns the `error` object.
pub fn assert_error(r: &Reply, status: u16, class: &str, message: Option<&str>) -> serde_json::Value {
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    assert_json_headers(r);
    let v = r.json();
    let err = v["error"].clone();
    assert_eq!(v.as_object().map(|o| o.len()), Some(1), "only `error` at the top: {v}");
    assert_eq!(err["class"], class, "{v}");
    assert!(err["message"].is_string(), "{v}");
    if let Some(m) = message {
        assert_eq!(err["message"], m, "{v}");
    }
    err
}

/// Like [`assert_error`], but the message only has to start with `prefix`.
pub fn assert_error_starts(r: &Reply, status: u16, class: &str, prefix: &str) {
    let err = assert_error(r, status, class, None);
    let m = err["message"].as_str().unwrap();
    assert!(m.starts_with(prefix), "message {m:?} should start with {prefix:?}");
}

pub fn send(agent: &ureq::Agent, method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Reply {
    let mut builder = ureq::http::Request::builder().method(method).uri(url);
    for (n, v) in headers {
        builder = builder.header(*n, *v);
    }
    let result = match body {
        Some(b) => agent.run(builder.body(b.to_vec()).expect("request")),
        None => agent.run(builder.body(()).expect("request")),
    };
    let mut resp = result.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let body = resp.body_mut().with_config().limit(64 << 20).read_to_vec().expect("read body");
    Reply { status, headers, body }
}

/// A hand-driven HTTP/1.1 connection, for what a well-behaved client library
/// will not send (odd header bytes, partial bodies, `Expect: 100-continue`).
pub struct Raw {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    pub fn connect(addr: &str) -> Raw {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(HTTP_TIMEOUT)).unwrap();
        Raw { stream, buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write request");
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16 << 10];
        match self.stream.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) => panic!("reading the reply: {e} (have {:?})", String::from_utf8_lossy(&self.buf)),
        }
    }

    /// Everything left on the connection, up to the daemon's close.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        while self.fill() {}
        std::mem::take(&mut self.buf)
    }

    /// Reads one response head: status and headers.
    pub fn read_head(&mut self) -> (u16, Vec<(String, String)>) {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            assert!(self.fill(), "connection closed before a response head: {:?}", String::from_utf8_lossy(&self.buf));
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).expect("ASCII head");
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status code");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers)
    }

    /// What was read past the last response head and not yet taken.
    pub fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Reads one complete response (skipping any `100 Continue`); the body is
    /// read by `Content-Length`.
    pub fn read_reply(&mut self) -> Reply {
        self.read_reply_after_continue(true)
    }

    /// Like [`Raw::read_reply`]; with `skip_continue` false a `100 Continue` fails the test.
    pub fn read_reply_after_continue(&mut self, skip_continue: bool) -> Reply {
        loop {
            let (status, headers) = self.read_head();
            if status == 100 {
                assert!(skip_continue, "the daemon asked for the body with 100 Continue");
                continue;
            }
            let len: usize = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .map(|(_, v)| v.parse().expect("content-length"))
                .unwrap_or(0);
            while self.buf.len() < len {
                assert!(self.fill(), "connection closed inside the body");
            }
            let body = self.buf.drain(..len).collect();
            return Reply { status, headers, body };
        }
    }
}

/// The head of a request with the headers every request here needs.
pub fn raw_head(method: &str, addr: &str, path: &str, extra: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n").into_bytes();
    out.extend_from_slice(extra);
    out.extend_from_slice(b"\r\n");
    out
}

/// `worldd verify --db DB` finds nothing wrong.
pub fn assert_verifies(db: &str) {
    let verified = crate::process::worldd(&["verify", "--db", db]);
    assert!(verified.status.success(), "verify: {}{}", stdout(&verified), stderr(&verified));
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("UTF-8 stdout")
}

pub fn stderr(o: &Output) -> String {
    strip_ansi(&String::from_utf8(o.stderr.clone()).expect("UTF-8 stderr"))
}

/// Mints a session for episode `bb` through the command line (through the
/// daemon's admin socket when one runs) and returns the token. It may commit
/// over REST (`World.Commit`, 1000 units).
pub fn mint(db: &Path) -> String {
    let db = db.to_str().unwrap();
    let grants = ["--grant", "world.apply=world:10", "--grant", "World.Commit=log:1000"];
    let o = worldd(&[&["session", "mint", "--db", db, "--episode", "bb", "--yes"][..], &grants].concat());
    assert!(o.status.success(), "mint failed: {}", stderr(&o));
    let token = stdout(&o).trim_end().to_string();
    assert_eq!(token.len(), 64, "{token:?}");
    token
}

/// Waits until nothing accepts connections on `addr` any more.
pub fn wait_until_refused(addr: &str) {
    let deadline = Instant::now() + EXIT_WAIT;
    while TcpStream::connect(addr).is_ok() {
        assert!(Instant::now() < deadline, "{addr} still accepts connections");
        std::thread::sleep(Duration::from_millis(20));
    }
}
