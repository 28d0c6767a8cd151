//! `worldd quickstart` on a fresh directory: it prints ready-to-paste ways to
//! connect an MCP host, and `--exec-allow` lets the agent run a command in its
//! worktree; without it, the refusal's log line names the flag. `serve`
//! prints the same connections for the address it bound.

use crate::harness::*;
use crate::process::{EXIT_WAIT, STARTUP_WAIT};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

/// A running quickstart: what it printed before listening, and its stderr after.
struct Quickstart {
    child: Child,
    addr: String,
    printed: Vec<String>,
    stderr: mpsc::Receiver<String>,
    _dir: Option<tempfile::TempDir>,
    dir: std::path::PathBuf,
}

impl Drop for Quickstart {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn lines_of(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// `worldd ARGS…` with its stdout and stderr read line by line.
fn spawn_worldd(args: &[&str]) -> (Child, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    spawn_worldd_on(args, &std::env::var_os("PATH").unwrap_or_default())
}

/// The same, with `path` as its `PATH`.
fn spawn_worldd_on(args: &[&str], path: &std::ffi::OsStr) -> (Child, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    spawn_worldd_in(args, path, std::path::Path::new("."))
}

/// The same, run in the directory `cwd`.
fn spawn_worldd_in(
    args: &[&str],
    path: &std::ffi::OsStr,
    cwd: &std::path::Path,
) -> (Child, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    let mut child = Command::new(WORLDD)
        .args(args)
        .current_dir(cwd)
        .env("RUST_LOG", "warn")
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (stdout, stderr) = (lines_of(child.stdout.take().unwrap()), lines_of(child.stderr.take().unwrap()));
    (child, stdout, stderr)
}

fn quickstart(extra: &[&str]) -> Quickstart {
    quickstart_on(extra, &std::env::var_os("PATH").unwrap_or_default())
}

fn quickstart_on(extra: &[&str], path: &std::ffi::OsStr) -> Quickstart {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("qs");
    let mut qs = quickstart_in(&root, extra, path);
    qs._dir = Some(dir);
    qs
}

/// A quickstart in `root`, which may hold what an earlier one made.
fn quickstart_in(root: &std::path::Path, extra: &[&str], path: &std::ffi::OsStr) -> Quickstart {
    let mut args = vec!["--dir", root.to_str().unwrap()];
    args.extend_from_slice(extra);
    quickstart_run(root, &args, path, std::path::Path::new("."))
}

/// `worldd quickstart --bind (a free port) ARGS…` run in `cwd`, making `root`.
fn quickstart_run(root: &std::path::Path, extra: &[&str], path: &std::ffi::OsStr, cwd: &std::path::Path) -> Quickstart {
    let root = root.to_path_buf();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut args = vec!["quickstart", "--bind", &addr];
    args.extend_from_slice(extra);
    let (child, stdout, stderr) = spawn_worldd_in(&args, path, cwd);
    let deadline = Instant::now() + STARTUP_WAIT;
    loop {
        let line = stderr.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("quickstart listens");
        if line.starts_with("worldd listening on http://") {
            break;
        }
    }
    let printed = stdout.try_iter().collect();
    Quickstart { child, addr, printed, stderr, _dir: None, dir: root }
}

impl Quickstart {
    fn token(&self) -> String {
        std::fs::read_to_string(self.dir.join("session")).unwrap().trim().to_string()
    }

    fn send(&self, task: &str, skill: &str, args: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {"id": task,
            "metadata": {"skill_id": skill}, "message": {"role": "user", "parts": [{"type": "data", "data": args}]}}});
        let auth = format!("Bearer {}", self.token());
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        let url = format!("http://{}/a2a/", self.addr);
        send(&agent, "POST", &url, &headers, Some(&serde_json::to_vec(&body).unwrap())).json()
    }

    fn wait_stderr(&self, needle: &str) -> String {
        let deadline = Instant::now() + EXIT_WAIT;
        loop {
            let line = self.stderr.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect(needle);
            if line.contains(needle) {
                return line;
            }
        }
    }
}

#[test]
fn quickstart_prints_ready_to_paste_connections_and_runs_an_allowed_command_for_the_agent() {
    let qs = quickstart(&["--exec-allow", "python3=/usr/bin/python3"]);
    let (url, token) = (format!("http://{}/mcp/", qs.addr), qs.dir.join("session").display().to_string());
    let printed = qs.printed.join("\n");
    let config = format!(
        r#"{{"mcpServers": {{"world": {{"type": "http", "url": "{url}", "headers": {{"Authorization": "Bearer ${{WORLD_TOKEN}}"}}}}}}}}"#
    );
    assert!(printed.contains(&config), "an mcpServers configuration: {printed}");
    assert!(printed.contains(&format!("WORLD_TOKEN=$(cat {token})")), "{printed}");
    let cli = format!("claude mcp add --transport http world {url} --header \"Authorization: Bearer $(cat {token})\"");
    assert!(printed.contains(&cli), "a CLI host's one line: {printed}");
    assert!(printed.contains(&format!("pathlib.Path(\"{token}\")")), "Python SDK code: {printed}");
    assert!(printed.contains(&format!("streamable_http_client(\"{url}\"")), "{printed}");
    assert!(!printed.contains("runs no command until you allow one"), "{printed}");

    let out = qs.send("run-1", "workspace-exec", json!({"command": "python3", "args": ["-c", "print(6 * 7)"]}));
    let out = &out["result"]["artifacts"][0]["parts"][0]["data"];
    assert_eq!((&out["ok"], &out["exit_code"], &out["stdout"]), (&json!(true), &json!(0), &json!("42\n")), "{out}");
    // Its genesis (by the daemon, named by no row) and its call walk and verify.
    let base = format!("http://{}", qs.addr);
    for target in ["0", "head"] {
        let o = worldd(&["why", target, "--addr", &base]);
        assert!(o.status.success(), "why {target}: {}{}", stdout(&o), stderr(&o));
    }
    let o = worldd(&["verify", "--db", qs.dir.join("world.db").to_str().unwrap()]);
    assert!(o.status.success() && stdout(&o).ends_with("; 0 fault(s)\n"), "{}{}", stdout(&o), stderr(&o));
}

/// A version manager's shim, first on PATH: a script under a tree no
/// confined run can read, which starts a program from beside it.
fn shims(name: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("shims")).unwrap();
    let shim = home.path().join("shims").join(name);
    std::fs::write(&shim, format!("#!/usr/bin/env bash\nexec \"$(dirname \"$0\")/../libexec/{name}\" \"$@\"\n"))
        .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    home
}

#[test]
fn a_short_exec_allow_whose_first_match_is_a_shim_runs_the_visible_program_and_says_which() {
    let home = shims("python3");
    let path = std::env::join_paths([home.path().join("shims").as_path(), std::path::Path::new("/usr/bin")]).unwrap();
    let qs = quickstart_on(&["--exec-allow", "python3"], &path);
    let out = qs.send("run-1", "workspace-exec", json!({"command": "python3", "args": ["-c", "print(6 * 7)"]}));
    let out = &out["result"]["artifacts"][0]["parts"][0]["data"];
    assert_eq!((&out["ok"], &out["exit_code"], &out["stdout"]), (&json!(true), &json!(0), &json!("42\n")), "{out}");
    let real = std::fs::canonicalize("/usr/bin/python3").unwrap();
    assert_eq!(out["argv"][0], json!(real.display().to_string()), "{out}");
    drop(qs);
    // The choice was said on stderr before listening; read it from a fresh start.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("qs");
    let (mut child, _stdout, stderr) = spawn_worldd_on(
        &["quickstart", "--dir", dir.to_str().unwrap(), "--bind", "127.0.0.1:0", "--exec-allow", "python3"],
        &path,
    );
    let said = stderr.recv_timeout(STARTUP_WAIT).expect("a note on stderr");
    let _ = child.kill();
    let _ = child.wait();
    assert!(said.contains(&format!("--exec-allow python3: using {}", real.display())), "{said}");
    assert!(said.contains("shims/python3 is first on PATH, but it is a script"), "{said}");
}

#[test]
fn a_short_exec_allow_a_confined_run_cannot_start_refuses_to_start_naming_the_fixes() {
    let home = shims("zzpython");
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("qs");
    let path = home.path().join("shims");
    let o = Command::new(WORLDD)
        .args(["quickstart", "--dir", dir.to_str().unwrap(), "--bind", "127.0.0.1:0", "--exec-allow", "zzpython"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    let shim = std::fs::canonicalize(path.join("zzpython")).unwrap();
    assert!(err.contains(&format!("zzpython resolves to {}", shim.display())), "{err}");
    assert!(
        err.contains("a script (#!/usr/bin/env bash) outside the directories a confined command can read"),
        "{err}"
    );
    assert!(err.contains("--exec-allow zzpython=PATH"), "{err}");
    let tree = std::fs::canonicalize(home.path()).unwrap();
    assert!(err.contains(&format!("--confine-read {}", tree.display())), "{err}");
}

#[test]
fn without_exec_allow_quickstart_says_how_to_allow_a_command_and_the_refusal_names_the_flag() {
    let qs = quickstart(&[]);
    let printed = qs.printed.join("\n");
    assert!(printed.contains("run it again with --exec-allow python3=/usr/bin/python3"), "{printed}");
    let reply = qs.send("run-1", "workspace-exec", json!({"command": "python3", "args": ["-V"]}));
    assert_eq!(reply["error"]["message"], "transition declares an effect this daemon has no handler for", "{reply}");
    let line = qs.wait_stderr("a2a refusal: tasks/send a2a:demo:run-1");
    assert!(line.contains("start the daemon with --exec-allow NAME[=PATH]"), "{line}");
}

#[test]
fn serve_prints_the_connections_for_the_address_it_bound() {
    let store = TempStore::new();
    let (mut child, stdout, stderr) =
        spawn_worldd(&["serve", "--db", store.db.to_str().unwrap(), "--bind", "127.0.0.1:0"]);
    let listening = stderr.recv_timeout(STARTUP_WAIT).expect("serve listens");
    let addr = listening.strip_prefix("worldd listening on http://").unwrap().split(' ').next().unwrap().to_string();
    let mut printed = vec![];
    while let Ok(line) = stdout.recv_timeout(EXIT_WAIT) {
        let last = line.contains("--out agent.token");
        printed.push(line);
        if last {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let printed = printed.join("\n");
    assert!(printed.contains(&format!(r#""url": "http://{addr}/mcp/""#)), "{printed}");
    assert!(printed.contains(&format!("claude mcp add --transport http world http://{addr}/mcp/")), "{printed}");
    // The session the lines name, minted by the command printed for it, as printed.
    let mint = printed.lines().map(str::trim_start).find(|l| l.starts_with("worldd session mint --db")).unwrap();
    let here = std::fs::canonicalize(store.dir.path()).unwrap();
    at_a_terminal(&here, mint, "y\n");
    let token = std::fs::read_to_string(here.join("agent.token")).unwrap();
    assert_eq!(token.trim().len(), 64, "{token}");
    let listed = as_printed(&here, &format!("worldd session list --db {}", store.db.display()));
    assert!(listed.contains("agent"), "{listed}");
}

#[test]
fn a_workspace_root_open_to_other_users_is_named_at_start_with_the_chmod_that_closes_it() {
    use std::os::unix::fs::PermissionsExt;
    let store = TempStore::new();
    let root = std::fs::canonicalize(store.dir.path()).unwrap().join("ws");
    std::fs::create_dir(&root).unwrap();
    let started = |mode: u32| {
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(mode)).unwrap();
        let daemon = Daemon::start_with(&store.db, &["--workspace-root", root.to_str().unwrap()]);
        daemon.stderr_lines().into_iter().filter(|l| l.contains("workspace root")).collect::<Vec<_>>()
    };
    let warned = started(0o755);
    let shown = root.display();
    let line = format!(
        "worldd: warning: the workspace root {shown} is mode 0755: other users may read the worktrees in it; \
         `chmod 700 {shown}` makes it its owner's alone"
    );
    assert_eq!(warned, [line], "one line, naming the path and the chmod");
    let mode = std::fs::metadata(&root).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "the operator's directory is left as the operator made it");
    assert!(started(0o750)[0].contains("is mode 0750"), "open to its group");
    assert_eq!(started(0o700), Vec::<String>::new(), "its owner's alone: nothing to say");
}

#[test]
fn quickstart_ask_gives_the_demo_session_a_grant_that_waits_for_approval() {
    let qs = quickstart(&["--ask", "Workspace.Write"]);
    let waiting = qs.send("w-1", "ailang-write", json!({"path": "asked.txt", "content": "ok"}));
    assert_eq!(waiting["result"]["status"]["state"], json!("input-required"), "{waiting}");
    let id = waiting["result"]["status"]["message"]["parts"][0]["data"]["approval"]["id"].as_str().unwrap().to_string();
    let db = qs.dir.join("world.db");
    let o = Command::new(WORLDD).args(["approve", &id, "--db", db.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let done = qs.send("w-1", "ailang-write", json!({"path": "asked.txt", "content": "ok"}));
    assert_eq!(done["result"]["status"]["state"], json!("completed"), "{done}");
    assert_eq!(std::fs::read_to_string(qs.dir.join("workspace/demo/asked.txt")).unwrap(), "ok");
    // Reads do not ask.
    let read = qs.send("r-1", "ailang-read", json!({"path": "hello.txt"}));
    assert_eq!(read["result"]["status"]["state"], json!("completed"), "{read}");
}

#[test]
fn quickstart_ask_retires_the_demo_credential_it_replaces_and_every_file_it_makes_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("qs");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let first = quickstart_in(&root, &[], &path);
    let old = first.token();
    assert_eq!(
        first.send("r-1", "ailang-read", json!({"path": "hello.txt"}))["result"]["status"]["state"],
        "completed"
    );
    let mode = |p: &str| std::fs::metadata(root.join(p)).unwrap().permissions().mode() & 0o777;
    for private in ["", "workspace", "workspace/demo"] {
        assert_eq!(mode(private), 0o700, "{private:?}");
    }
    for private in ["world.db", "world.db.wal", "world.db.payloads", "world.db.writer.lock", "session"] {
        assert_eq!(mode(private), 0o600, "{private}");
    }
    drop(first);
    let second = quickstart_in(&root, &["--ask", "Workspace.Write"], &path);
    assert_ne!(second.token(), old, "a session that asks replaces the demo session");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {"id": "r-2",
        "metadata": {"skill_id": "ailang-read"}, "message": {"role": "user", "parts": [{"type": "data", "data": {"path": "hello.txt"}}]}}});
    let auth = format!("Bearer {old}");
    let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let url = format!("http://{}/a2a/", second.addr);
    let refused = send(&agent, "POST", &url, &headers, Some(&serde_json::to_vec(&body).unwrap())).json();
    assert_eq!(refused["error"]["code"], -32001, "the replaced credential is revoked: {refused}");
    assert_eq!(refused["error"]["message"], "unknown session credential", "{refused}");
}

#[test]
fn quickstart_with_private_reads_names_the_operator_token_and_its_demo_session_reads_only_demo() {
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let qs = quickstart_run(&home.join("world-quickstart"), &["--private-reads"], &path, &home);
    let file = qs.dir.join("world.db.operator-token");
    let printed = qs.printed.join("\n");
    assert!(printed.contains(&format!("the operator token is in {}", file.display())), "{printed}");
    // The verbs it lists read with the operator token by themselves, from where it ran.
    assert!(printed.contains("the verbs below read with it by themselves"), "{printed}");
    for line in ["worldd episodes", "worldd episode demo", "worldd why head"] {
        assert!(printed.contains(&format!("  {line} ")), "{line}: {printed}");
        as_printed(&home, line);
    }
    let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
    let get = |path: &str, token: Option<&str>| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        send(&agent, "GET", &format!("http://{}{path}", qs.addr), &headers, None).status
    };
    let (session, operator) = (qs.token(), std::fs::read_to_string(&file).unwrap().trim().to_string());
    assert_eq!(get("/v1/episodes", None), 401);
    assert_eq!(get("/v1/episodes", Some(&session)), 403);
    assert_eq!(get("/v1/episodes", Some(&operator)), 200);
    // Let through to the route: its own episode, told before its first call.
    assert_eq!(get("/v1/episodes/demo", Some(&session)), 200);
    assert_eq!(get("/v1/episodes/other", Some(&session)), 403);
    assert_eq!(get("/v1/health", None), 200);
}

/// `line` run by `sh` in `dir`, as a person pastes it into a shell where
/// `worldd` is this build's, and no `WORLD_*` variable is set.
fn shell(dir: &std::path::Path, line: &str) -> std::process::Output {
    let bin = std::path::Path::new(WORLDD).parent().unwrap().to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path))).unwrap();
    Command::new("/bin/sh")
        .args(["-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("WORLD_DB")
        .env_remove("WORLD_STORE")
        .env_remove("WORLD_ADDR")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Runs `line` as printed; it must succeed. Its stdout.
fn as_printed(dir: &std::path::Path, line: &str) -> String {
    let o = shell(dir, line);
    assert!(o.status.success(), "`{line}` as printed: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// Runs `line` as printed, at a terminal a person types `typed` into (mint
/// asks its confirmation there): `script` gives the shell a pseudo-terminal.
fn at_a_terminal(dir: &std::path::Path, line: &str, typed: &str) -> String {
    let bin = std::path::Path::new(WORLDD).parent().unwrap().to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path))).unwrap();
    let mut child = Command::new("script")
        .args(["-qec", line, "/dev/null"])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("WORLD_DB")
        .env_remove("WORLD_STORE")
        .env_remove("WORLD_ADDR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    child.stdin.take().unwrap().write_all(typed.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "`{line}` as printed, at a terminal: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// The `worldd …` commands a text names between backquotes.
fn quoted_commands(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).filter(|c| c.starts_with("worldd ")).map(str::to_string).collect()
}

#[test]
fn every_command_quickstart_and_the_agents_refusal_print_works_as_printed_from_where_quickstart_ran() {
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    let root = home.join("world-quickstart");
    let path = std::env::var_os("PATH").unwrap_or_default();
    // As README has it: no --dir, so ./world-quickstart; a free port rather than 7644.
    let qs = quickstart_run(&root, &["--ask", "Workspace.Write"], &path, &home);
    let printed = qs.printed.join("\n");
    assert!(printed.contains("each command finds this daemon by itself when run from this directory"), "{printed}");

    // The operator's commands quickstart lists, each as printed (the command, then what it does).
    let listed: Vec<String> = qs
        .printed
        .iter()
        .map(|l| l.trim_start())
        .filter(|l| l.starts_with("worldd "))
        .map(|l| l.split("  ").next().unwrap().to_string())
        .collect();
    assert!(listed.len() >= 4, "{printed}");
    for line in &listed {
        as_printed(&home, line);
    }
    // The demo episode is listed before its first call.
    let episodes = as_printed(&home, "worldd episodes");
    assert!(episodes.lines().any(|l| l.starts_with("demo ")), "{episodes}");
    // The ready curl line, as printed.
    let curl = qs.printed.iter().find_map(|l| l.strip_prefix("try:  ")).expect("a curl line");
    let read = as_printed(&home, curl);
    assert!(read.contains("hello from World"), "{read}");
    // The workbench, at the address printed, opens on the demo episode.
    let workbench =
        qs.printed.iter().find_map(|l| l.strip_prefix("Workbench (in a browser): ")).expect("a workbench line");
    let url = workbench.split_whitespace().next().unwrap();
    let page = as_printed(&home, &format!("curl -sf {url}"));
    assert!(page.contains("/workbench/episodes/demo"), "{page}");

    // A call that waits for approval names the commands that decide it; each works as printed.
    let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
    let call = |content: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "ailang-write", "arguments": {"path": "notes.txt", "content": content}}});
        let auth = format!("Bearer {}", qs.token());
        let headers = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        let url = format!("http://{}/mcp/", qs.addr);
        let text = send(&agent, "POST", &url, &headers, Some(&serde_json::to_vec(&body).unwrap())).text();
        let data = text.strip_prefix("event: message\ndata: ").and_then(|t| t.strip_suffix("\n\n")).unwrap();
        serde_json::from_str::<Value>(data).unwrap()["result"].clone()
    };
    let waiting = call("approved\n");
    let text = waiting["content"][0]["text"].as_str().unwrap().to_string();
    let commands = quoted_commands(&text);
    let approve = commands.iter().find(|c| c.starts_with("worldd approve ") && !c.contains("--")).unwrap();
    let deny = commands.iter().find(|c| c.starts_with("worldd deny ")).unwrap();
    for listing in commands.iter().filter(|c| !c.starts_with("worldd approve ") && !c.starts_with("worldd deny ")) {
        let said = as_printed(&home, listing);
        assert!(said.contains("1 open approval(s)") || !listing.contains("approvals"), "{listing}: {said}");
    }
    let said = as_printed(&home, approve);
    assert!(said.contains("approved"), "{said}");
    let ran = call("approved\n");
    assert_eq!(ran["structuredContent"]["world"]["effects"][0]["status"], json!("ok"), "{ran}");
    assert_eq!(std::fs::read_to_string(root.join("workspace/demo/notes.txt")).unwrap(), "approved\n");
    // Another request, denied as its refusal prints it.
    let other = call("denied\n");
    let deny_other = quoted_commands(other["content"][0]["text"].as_str().unwrap())
        .into_iter()
        .find(|c| c.starts_with("worldd deny "))
        .unwrap();
    assert_ne!(&deny_other, deny);
    // The workbench prints the same command for what waits; run as the page prints it.
    let page = as_printed(&home, &format!("curl -sf http://{}/workbench/episodes/demo", qs.addr));
    let shown = page.split("<code>").filter_map(|c| c.split("</code>").next()).find(|c| c.starts_with("worldd deny "));
    assert_eq!(shown, Some(deny_other.as_str()), "{page}");
    as_printed(&home, shown.unwrap());
    let denied = call("denied\n");
    assert_eq!(denied["structuredContent"]["world"]["effects"][0]["status"], json!("denied"), "{denied}");

    // What happened, walked and told as printed.
    let why = as_printed(&home, "worldd why head");
    assert!(why.contains("link(s) verified"), "{why}");
    let episode = as_printed(&home, "worldd episode demo");
    assert!(episode.contains("demo"), "{episode}");

    // Elsewhere, nothing is found, and the error says what would find it.
    let elsewhere = tempfile::tempdir().unwrap();
    for line in ["worldd approvals", "worldd session list"] {
        let o = shell(elsewhere.path(), line);
        assert_eq!(o.status.code(), Some(1), "{line}");
        let err = stderr(&o);
        for hint in ["--db PATH", "--store URL", "WORLD_DB=PATH", "WORLD_STORE=URL", "worldd quickstart"] {
            assert!(err.contains(hint), "{line}: {err}");
        }
    }
    // And one variable, set once, finds it from anywhere.
    let o = Command::new("/bin/sh")
        .args(["-c", "worldd approvals && worldd episodes"])
        .current_dir(elsewhere.path())
        .env("PATH", std::env::join_paths([std::path::Path::new(WORLDD).parent().unwrap()]).unwrap())
        .env("WORLD_DB", root.join("world.db"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).lines().any(|l| l.starts_with("demo ")), "{}", stdout(&o));
}
