//! The hostile-program corpus: `tests/hostile/escape.py` (and `escape.sh` for
//! the shell) makes one escape attempt per call, as a pure transition and as a
//! `workspace-exec` command. The kernel must block every one: the program says
//! `DENIED <name>`, the call fails the way any failed run fails, and nothing
//! outside the sandbox changes. A control against `worldd serve --unconfined`
//! proves the corpus does see escapes when nothing blocks them.

use crate::harness::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const ESCAPE_PY: &str = include_str!("../hostile/escape.py");
const ESCAPE_SH: &str = include_str!("../hostile/escape.sh");

/// The serve flag that turns confinement off, for the control.
const UNCONFINED: &[&str] = &["--unconfined"];

/// Bounds that only turn a hang into a failure; nothing asserts speed.
const GONE_WAIT: Duration = Duration::from_secs(10);
const STDERR_WAIT: Duration = Duration::from_secs(10);
/// A lingering grandchild writes its late file 3 s after it starts; its
/// traces are looked for once that has had time to happen.
const LINGER_SETTLE: Duration = Duration::from_millis(4500);

// ---------------------------------------------------------------------------
// The corpus: every attempt, the params it is given, and where it runs.
// ---------------------------------------------------------------------------

const PURE: u8 = 1;
const COMMAND: u8 = 2;
const BOTH: u8 = PURE | COMMAND;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Published as a pure transition and called over A2A.
    Pure,
    /// Run by `workspace-exec` in the episode's worktree.
    Command,
}

#[derive(Clone, Copy)]
enum Program {
    /// `escape.py`: params as one JSON object.
    Py,
    /// `escape.sh`: params as positional arguments, in the listed order.
    Sh,
}

/// A param an attempt is given; its value comes from the lab (and the mode).
#[derive(Clone, Copy)]
enum P {
    /// Unique per call: names its files and processes.
    Marker,
    /// The lab's `outside/` directory.
    Outside,
    /// The store file, `world.db`.
    Store,
    /// The directory holding the store.
    StoreDir,
    /// The caller's own session token file.
    Token,
    /// `<db>.admin.sock`.
    AdminSocket,
    /// The daemon's TCP port on 127.0.0.1.
    Port,
    /// A UDP port on 127.0.0.1 where the test listens and echoes.
    UdpPort,
    DaemonPid,
    /// A file in another episode's worktree.
    Neighbour,
    /// Where a lingering grandchild writes: `outside/` (pure), the worktree (command).
    LateDir,
    /// A symlink in the worktree pointing outside.
    Link,
}

struct Attempt {
    name: &'static str,
    program: Program,
    params: &'static [P],
    modes: u8,
    /// Leaves a grandchild that would act 3 s later.
    lingers: bool,
}

const fn py(name: &'static str, modes: u8, params: &'static [P]) -> Attempt {
    Attempt { name, program: Program::Py, params, modes, lingers: false }
}

const fn sh(name: &'static str, params: &'static [P]) -> Attempt {
    Attempt { name, program: Program::Sh, params, modes: COMMAND, lingers: false }
}

impl Attempt {
    const fn lingers(self) -> Attempt {
        Attempt { lingers: true, ..self }
    }
}

use P::*;

const ATTEMPTS: &[Attempt] = &[
    // Files outside the sandbox.
    py("write-outside", BOTH, &[Outside, Marker]),
    py("write-tmp", PURE, &[Marker]),
    py("read-shadow", BOTH, &[]),
    py("read-store", BOTH, &[Store]),
    py("write-store", BOTH, &[Store]),
    py("read-token", BOTH, &[Token]),
    py("list-store-dir", BOTH, &[StoreDir, Store]),
    py("read-other-episode", BOTH, &[Neighbour]),
    py("follow-symlink", COMMAND, &[Link]),
    py("read-daemon-environ", BOTH, &[DaemonPid]),
    py("write-git-config", COMMAND, &[Marker]),
    py("rename-git", COMMAND, &[Marker]),
    // Sockets.
    py("connect-daemon", BOTH, &[Port]),
    py("connect-admin-socket", BOTH, &[AdminSocket]),
    py("connect-outbound", BOTH, &[]),
    py("udp-loopback", BOTH, &[UdpPort, Marker]),
    // Resources.
    py("fork-bomb", BOTH, &[Marker]),
    py("alloc-8g", BOTH, &[]),
    py("file-size", BOTH, &[Marker]),
    // Processes and the kernel.
    py("setsid-linger", BOTH, &[LateDir, Marker, DaemonPid]).lingers(),
    py("signal-daemon", BOTH, &[DaemonPid]),
    py("ptrace-daemon", BOTH, &[DaemonPid]),
    py("unshare-user", BOTH, &[]),
    py("io-uring", BOTH, &[]),
    // The shell.
    sh("sh-write-outside", &[Outside, Marker]),
    sh("sh-setsid-linger", &[LateDir, Marker, DaemonPid]).lingers(),
    sh("sh-fork-bomb", &[Marker]),
];

/// What the control must see succeed with confinement off, in both modes.
const ESCAPE_WHEN_UNCONFINED: &[&str] =
    &["read-store", "list-store-dir", "connect-admin-socket", "connect-daemon", "write-outside"];

fn attempt(name: &str) -> &'static Attempt {
    ATTEMPTS.iter().find(|a| a.name == name).unwrap_or_else(|| panic!("no attempt {name}"))
}

// ---------------------------------------------------------------------------
// The scenarios.
// ---------------------------------------------------------------------------

#[test]
fn every_escape_attempt_of_a_pure_transition_fails_as_a_failed_phase() {
    let _one = one_corpus_at_a_time();
    let corpus = Corpus::new(&[]);
    let outcomes = corpus.run_all(Mode::Pure);
    assert_all_blocked(Mode::Pure, &outcomes);
}

#[test]
fn every_escape_attempt_of_a_workspace_exec_command_fails_with_its_own_exit() {
    let _one = one_corpus_at_a_time();
    let corpus = Corpus::new(&[]);
    let outcomes = corpus.run_all(Mode::Command);
    assert_all_blocked(Mode::Command, &outcomes);
}

/// An ordinary user's daemon: each run gets a user namespace of its own,
/// where `RLIMIT_NPROC` bounds the run's tasks.
#[test]
fn every_escape_attempt_fails_the_same_when_the_daemon_runs_as_an_ordinary_user() {
    let _one = one_corpus_at_a_time();
    let corpus = Corpus::new_as(&[], Some(NOBODY));
    for mode in [Mode::Pure, Mode::Command] {
        let outcomes = corpus.run_all(mode);
        assert_all_blocked(mode, &outcomes);
    }
}

#[test]
fn with_confinement_off_the_corpus_sees_the_escapes() {
    let _one = one_corpus_at_a_time();
    let corpus = Corpus::new(UNCONFINED);
    for mode in [Mode::Pure, Mode::Command] {
        for name in ESCAPE_WHEN_UNCONFINED {
            let o = corpus.run(attempt(name), mode);
            assert!(matches!(o.verdict, Verdict::Allowed(_)), "{mode:?} {name} should escape unconfined: {o}");
        }
        // The grandchild outlives the run and writes its late file.
        let o = corpus.run(attempt("setsid-linger"), mode);
        assert!(matches!(o.verdict, Verdict::Allowed(_)), "{mode:?} setsid-linger: {o}");
        assert!(o.violations.iter().any(|v| v.contains("outlived the run")), "{mode:?} setsid-linger: {o}");
        assert!(o.violations.iter().any(|v| v.contains("late-")), "{mode:?} setsid-linger: {o}");
    }
    // (Each run killed what it left behind; the lab directory goes with the lab.)
    assert_eq!(processes_with(&corpus.run_id), Vec::<(i32, String)>::new());
}

const BENIGN_COMMAND: &str = r#"import json, subprocess, tempfile, threading
with open("input.txt") as f:
    text = f.read()
with open("output.txt", "w") as f:
    f.write(text.upper())
hi = subprocess.run(["/bin/sh", "-c", "echo hi"], capture_output=True, text=True, check=True).stdout.strip()
with tempfile.TemporaryDirectory() as d:
    with tempfile.NamedTemporaryFile("w+", dir=d) as t:
        t.write("scratch")
        t.flush()
        t.seek(0)
        scratch = t.read()
sums = [0] * 4
def work(i):
    sums[i] = sum(range(i * 1000, (i + 1) * 1000))
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"words": len(text.split()), "hi": hi, "scratch": scratch, "sum": sum(sums)}))
"#;

const BENIGN_PURE: &str = r#"import json, sys, threading
n = json.loads(sys.stdin.read())["n"]
parts = [None] * 4
def work(i):
    parts[i] = sum(range(i, n, 4))
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sys.stdout.write(json.dumps({"sum": sum(parts), "threads": len(threads)}))
"#;

/// Serves the worktree over HTTP on 127.0.0.1 and fetches a file from itself by name.
const LOCAL_SERVER: &str = r#"import http.server, threading, urllib.request
server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=server.serve_forever, daemon=True).start()
body = urllib.request.urlopen("http://localhost:%d/input.txt" % server.server_port).read().decode()
print("input.txt:", body, end="")
"#;

#[test]
fn benign_programs_still_work_when_confined() {
    let lab = Lab::new(LabOptions { episodes: &["benign"], exec_allow: EXEC_ALLOW, ..Default::default() });
    let wt = lab.worktree("benign");
    std::fs::write(wt.join("input.txt"), "alpha beta\n").unwrap();
    std::fs::write(wt.join("benign.py"), BENIGN_COMMAND).unwrap();
    let manifest = lab.manifest(
        "benign",
        &[Transition { id: "benign.threads", file: "threads", source: BENIGN_PURE, effect: None, access: None }],
    );
    let o = lab.publish_manifest(&manifest, false);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let client = lab.client(&lab.mint("benign", &["world.apply=world:10", "Workspace.Exec=worktree:10"]));

    // A command reads and writes its worktree, runs a subprocess, uses tempfile and threads.
    let r = client.send("benign-1", "workspace-exec", &json!({"command": "python3", "args": ["benign.py"]}));
    let out = r.output();
    assert_eq!((&out["ok"], &out["exit_code"], &out["timed_out"]), (&json!(true), &json!(0), &json!(false)), "{out}");
    let printed: Value = serde_json::from_str(out["stdout"].as_str().unwrap()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(printed, json!({"words": 2, "hi": "hi", "scratch": "scratch", "sum": 7_998_000}));
    assert_eq!(std::fs::read_to_string(wt.join("output.txt")).unwrap(), "ALPHA BETA\n");

    // A test suite may serve on its own loopback (nothing outside the run is reachable).
    let r = client.send("benign-3", "workspace-exec", &json!({"command": "python3", "args": ["-c", LOCAL_SERVER]}));
    let out = r.output();
    assert_eq!((&out["exit_code"], &out["stdout"]), (&json!(0), &json!("input.txt: alpha beta\n")), "{out}");

    // A pure transition uses threads and json.
    let r = client.send("benign-2", "benign.threads", &json!({"n": 1000}));
    assert_eq!(r.output(), &json!({"sum": 499_500, "threads": 4, "world": {"effects": [], "plan": null}}));
    lab.verify_clean();
}

/// Tries to change every `.git` below the top, then writes beside them; says what it managed.
const NESTED_GIT_SCRIPT: &str = r#"for f in sub/.git/HEAD a/b/.git lib/.GIT/config; do
  (echo evil >> "$f") 2>/dev/null && echo "WROTE $f"
done
(echo x > sub/.git/new) 2>/dev/null && echo "WROTE sub/.git/new"
mv sub/.git sub/moved 2>/dev/null && echo MOVED
rm -f a/b/.git 2>/dev/null; [ -e a/b/.git ] || echo REMOVED
echo fine > sub/ok.txt && echo OK
"#;

#[test]
fn a_command_cannot_change_a_nested_git_at_any_depth_in_any_case() {
    let lab = Lab::new(LabOptions { episodes: &["nested"], exec_allow: &["sh=/bin/sh"], ..Default::default() });
    let wt = lab.worktree("nested");
    for d in ["sub/.git", "a/b", "lib/.GIT"] {
        std::fs::create_dir_all(wt.join(d)).unwrap();
    }
    std::fs::write(wt.join("sub/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(wt.join("a/b/.git"), "gitdir: ../../.git/modules/b\n").unwrap();
    std::fs::write(wt.join("lib/.GIT/config"), "[core]\n").unwrap();
    let before = [tree(&wt.join("sub")), tree(&wt.join("a")), tree(&wt.join("lib"))];
    let client = lab.client(&lab.mint("nested", &["Workspace.Exec=worktree:10"]));
    let r = client.send("nested-1", "workspace-exec", &json!({"command": "sh", "args": ["-c", NESTED_GIT_SCRIPT]}));
    let out = r.output();
    assert_eq!((&out["exit_code"], &out["stdout"]), (&json!(0), &json!("OK\n")), "{out}");
    let wrote = std::fs::read_to_string(wt.join("sub/ok.txt")).unwrap();
    assert_eq!(wrote, "fine\n", "the rest of the worktree stays writable");
    std::fs::remove_file(wt.join("sub/ok.txt")).unwrap();
    let after = [tree(&wt.join("sub")), tree(&wt.join("a")), tree(&wt.join("lib"))];
    assert_eq!(after, before, "every nested .git is as it was");

    // More .git than a run may bind (GIT_BINDS_MAX, 256): the command is refused, not run half protected.
    for n in 0..256 {
        std::fs::create_dir_all(wt.join(format!("many/{n}/.git"))).unwrap();
    }
    let r = client.send("nested-2", "workspace-exec", &json!({"command": "sh", "args": ["-c", "echo ran > ran.txt"]}));
    let refused = r.output()["refused"].as_str().unwrap_or_default().to_string();
    assert!(refused.starts_with("workspace-exec refused: the worktree has more than"), "{}", r.0);
    assert!(refused.ends_with("so no command runs in it"), "{refused}");
    assert!(!wt.join("ran.txt").exists());
    lab.verify_clean();
}

// ---------------------------------------------------------------------------
// Running the corpus.
// ---------------------------------------------------------------------------

const EXEC_ALLOW: &[&str] = &["python3=/usr/bin/python3", "sh=/bin/sh"];
const EPISODE: &str = "hostile";
const NEIGHBOUR: &str = "neighbour";
const SKILL: &str = "hostile.escape";

/// The corpus allocates 8 GiB and forks thousands of processes when nothing
/// stops it: one run at a time.
fn one_corpus_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A lab set up for the corpus: the `hostile` episode's worktree holds the
/// programs, a `.git` and a symlink out; a `neighbour` episode holds a secret;
/// `escape.py` is published as a pure transition; one session may call both.
struct Corpus {
    lab: Lab,
    client: Client,
    token_file: PathBuf,
    echo: Echo,
    /// Prefix of every marker of this corpus.
    run_id: String,
    calls: AtomicUsize,
}

enum Verdict {
    /// The program reported the block.
    Denied(String),
    /// The program reported the escape.
    Allowed(String),
    /// Neither: killed, timed out, crashed, or an unexpected reply.
    Other(String),
}

struct Outcome {
    name: &'static str,
    mode: Mode,
    verdict: Verdict,
    /// What changed that must not have, after the call.
    violations: Vec<String>,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match self.mode {
            Mode::Pure => "pure",
            Mode::Command => "command",
        };
        match &self.verdict {
            Verdict::Denied(why) => write!(f, "{mode:<7} {:<21} DENIED  {why}", self.name)?,
            Verdict::Allowed(why) => write!(f, "{mode:<7} {:<21} ALLOWED {why}", self.name)?,
            Verdict::Other(why) => write!(f, "{mode:<7} {:<21} NEITHER {why}", self.name)?,
        }
        for v in &self.violations {
            write!(f, "\n{:<30} and {v}", "")?;
        }
        Ok(())
    }
}

/// Every attempt must be DENIED and leave nothing changed; the failure lists them all.
fn assert_all_blocked(mode: Mode, outcomes: &[Outcome]) {
    let table: Vec<String> = outcomes.iter().map(|o| o.to_string()).collect();
    eprintln!("hostile corpus, {mode:?}:\n{}", table.join("\n"));
    let failed: Vec<&Outcome> =
        outcomes.iter().filter(|o| !matches!(o.verdict, Verdict::Denied(_)) || !o.violations.is_empty()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} escape attempts ({mode:?}) were not blocked cleanly:\n{}",
        failed.len(),
        outcomes.len(),
        failed.iter().map(|o| o.to_string()).collect::<Vec<_>>().join("\n")
    );
}

/// The uid of `nobody` on Debian.
const NOBODY: u32 = 65534;

impl Corpus {
    fn new(serve_args: &[&str]) -> Corpus {
        Corpus::new_as(serve_args, None)
    }

    fn new_as(serve_args: &[&str], user: Option<u32>) -> Corpus {
        let lab = Lab::new(LabOptions {
            episodes: &[EPISODE, NEIGHBOUR],
            exec_allow: EXEC_ALLOW,
            serve_args,
            user,
            ..Default::default()
        });
        let wt = lab.worktree(EPISODE);
        write_script(&wt.join("escape.py"), ESCAPE_PY);
        write_script(&wt.join("escape.sh"), ESCAPE_SH);
        std::fs::create_dir_all(wt.join(".git")).unwrap();
        std::fs::write(wt.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(wt.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(lab.outside.join("canary.txt"), "canary\n").unwrap();
        symlink(lab.outside.join("canary.txt"), wt.join("out-link")).unwrap();
        std::fs::write(lab.worktree(NEIGHBOUR).join("secret.txt"), "the neighbour's secret\n").unwrap();

        let manifest = lab.manifest(
            "hostile",
            &[Transition { id: SKILL, file: "escape", source: ESCAPE_PY, effect: None, access: None }],
        );
        let o = lab.publish_manifest(&manifest, false);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let token = lab.mint(EPISODE, &["world.apply=world:1000", "Workspace.Exec=worktree:1000"]);
        let token_file = lab
            .session_files()
            .into_iter()
            .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.trim() == token))
            .expect("the session's token file");
        let client = lab.client(&token);
        Corpus { lab, client, token_file, echo: Echo::start(), run_id: run_id(), calls: AtomicUsize::new(0) }
    }

    fn run_all(&self, mode: Mode) -> Vec<Outcome> {
        let bit = match mode {
            Mode::Pure => PURE,
            Mode::Command => COMMAND,
        };
        ATTEMPTS.iter().filter(|a| a.modes & bit != 0).map(|a| self.run(a, mode)).collect()
    }

    /// One call of one attempt, then every check of what it must not have changed.
    fn run(&self, a: &'static Attempt, mode: Mode) -> Outcome {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let marker = format!("{}{}{n:02}", self.run_id, if mode == Mode::Pure { 'p' } else { 'c' });
        let before = Snapshot::take(self);
        let started = Instant::now();
        let verdict = match mode {
            Mode::Pure => self.call_pure(a, &marker),
            Mode::Command => self.call_command(a, &marker),
        };
        if a.lingers {
            std::thread::sleep(LINGER_SETTLE.saturating_sub(started.elapsed()));
        }
        let violations = self.aftermath(&before, &marker, mode, a.lingers);
        Outcome { name: a.name, mode, verdict, violations }
    }

    fn param(&self, p: P, mode: Mode, marker: &str) -> Value {
        let lab = &self.lab;
        let path = |p: &Path| json!(p.display().to_string());
        match p {
            Marker => json!(marker),
            Outside => path(&lab.outside),
            Store => path(&lab.db),
            StoreDir => path(lab.db.parent().unwrap()),
            Token => path(&self.token_file),
            AdminSocket => path(&lab.admin_socket()),
            Port => json!(lab.daemon.addr.rsplit_once(':').unwrap().1.parse::<u16>().unwrap()),
            UdpPort => json!(self.echo.port),
            DaemonPid => json!(lab.daemon.pid()),
            Neighbour => path(&lab.worktree(NEIGHBOUR).join("secret.txt")),
            LateDir => match mode {
                Mode::Pure => path(&lab.outside),
                Mode::Command => json!("."),
            },
            Link => json!("out-link"),
        }
    }

    fn param_key(p: P) -> &'static str {
        match p {
            Marker => "marker",
            Outside => "outside",
            Store => "store",
            StoreDir => "store_dir",
            Token => "token",
            AdminSocket => "admin_socket",
            Port => "port",
            UdpPort => "udp_port",
            DaemonPid => "daemon_pid",
            Neighbour => "neighbour",
            LateDir => "late_dir",
            Link => "link",
        }
    }

    fn params_object(&self, a: &Attempt, mode: Mode, marker: &str) -> serde_json::Map<String, Value> {
        a.params.iter().map(|p| (Self::param_key(*p).to_string(), self.param(*p, mode, marker))).collect()
    }

    /// Pure: a blocked attempt is error -32603 "transition execution failed",
    /// and the daemon's log line for the task carries the program's `DENIED`.
    fn call_pure(&self, a: &Attempt, marker: &str) -> Verdict {
        let mut args = self.params_object(a, Mode::Pure, marker);
        args.insert("attempt".into(), json!(a.name));
        let task = format!("pure-{}-{marker}", a.name);
        let reply = self.client.send(&task, SKILL, &Value::Object(args));
        if reply.is_ok() {
            let out = reply.output();
            return if out["escaped"] == a.name {
                Verdict::Allowed(format!("exit 0, committed {out}"))
            } else {
                Verdict::Other(format!("committed an unexpected output {out}"))
            };
        }
        let (code, message) = reply.error();
        if (code, message.as_str()) != (-32603, "transition execution failed") {
            return Verdict::Other(format!("A2A error {code} {message:?}"));
        }
        let needle = format!("tasks/send a2a:{EPISODE}:{task}:");
        let line = wait_line(&self.lab, &needle).unwrap_or_else(|| format!("(no daemon stderr line has {needle:?})"));
        let denied = format!("DENIED {} ", a.name);
        match line.split_once(&denied) {
            Some((_, why)) => Verdict::Denied(why.split(['\\', '"']).next().unwrap_or_default().to_string()),
            None => Verdict::Other(format!("failed phase without DENIED: {}", tail(&line, 400))),
        }
    }

    /// Command: a blocked attempt is `ok:false`, `exit_code: 3` and `DENIED <name>` on its stderr.
    fn call_command(&self, a: &Attempt, marker: &str) -> Verdict {
        let (command, mut args) = match a.program {
            Program::Py => ("python3", vec!["escape.py".to_string(), a.name.to_string()]),
            Program::Sh => ("sh", vec!["escape.sh".to_string(), a.name.to_string()]),
        };
        match a.program {
            Program::Py => args.push(Value::Object(self.params_object(a, Mode::Command, marker)).to_string()),
            Program::Sh => args.extend(a.params.iter().map(|p| match self.param(*p, Mode::Command, marker) {
                Value::String(s) => s,
                v => v.to_string(),
            })),
        }
        let task = format!("command-{}-{marker}", a.name);
        let reply = self.client.send(&task, "workspace-exec", &json!({"command": command, "args": args}));
        if !reply.is_ok() {
            return Verdict::Other(format!("workspace-exec replied {}", reply.0));
        }
        let out = reply.output();
        let stderr = out["stderr"].as_str().unwrap_or_default();
        let said = |word: &str| {
            let prefix = format!("{word} {} ", a.name);
            stderr.lines().find_map(|l| l.strip_prefix(&prefix)).map(String::from)
        };
        match (&out["ok"], out["exit_code"].as_i64(), said("DENIED"), said("ALLOWED")) {
            (Value::Bool(false), Some(3), Some(why), _) => Verdict::Denied(why),
            (Value::Bool(true), Some(0), _, Some(why)) => Verdict::Allowed(why),
            _ => Verdict::Other(format!(
                "ok {} exit_code {} timed_out {} stderr {:?}",
                out["ok"],
                out["exit_code"],
                out["timed_out"],
                tail(stderr, 400)
            )),
        }
    }

    /// Everything an attempt must have left as it was; one line per thing that changed.
    fn aftermath(&self, before: &Snapshot, marker: &str, mode: Mode, lingers: bool) -> Vec<String> {
        let lab = &self.lab;
        let mut v = vec![];
        // The daemon still serves, and is the same process.
        let (status, body) = lab.get("/v1/health");
        if status != 200 {
            v.push(format!("GET /v1/health answered {status} {body}"));
        }
        if !alive(lab.daemon.pid()) {
            v.push(format!("the daemon (pid {}) is gone", lab.daemon.pid()));
        }
        lab.verify_clean();
        // No process carries the marker: no grandchild, no forked child, not the command itself.
        // A lingering attempt has already had its 4.5 s; the others get a bounded wait for the kill.
        let left = if lingers { processes_with(marker) } else { wait_gone(marker) };
        if !left.is_empty() {
            v.push(format!("processes outlived the run (now killed): {left:?}"));
            kill_all(&left);
        }
        // No file named after the marker: in the lab (late files, escapes, big files) or in /tmp.
        let in_lab = files_named_like(&lab.root, marker);
        if !in_lab.is_empty() {
            v.push(format!("files appeared: {in_lab:?}"));
        }
        let in_tmp: Vec<PathBuf> = names(Path::new("/tmp"))
            .into_iter()
            .filter(|n| n.contains(marker))
            .map(|n| Path::new("/tmp").join(n))
            .collect();
        if !in_tmp.is_empty() {
            v.push(format!("files appeared in /tmp (now removed): {in_tmp:?}"));
            for f in &in_tmp {
                let _ = std::fs::remove_file(f);
            }
        }
        let after = Snapshot::take(self);
        v.extend(before.changes(&after, mode));
        v
    }
}

/// What must not change across an attempt.
struct Snapshot {
    outside: BTreeMap<PathBuf, Vec<u8>>,
    worktree: BTreeMap<PathBuf, Vec<u8>>,
    neighbour: BTreeMap<PathBuf, Vec<u8>>,
    tokens: BTreeMap<PathBuf, Vec<u8>>,
    root_names: Vec<String>,
    /// (device, inode) of the store file.
    store: (u64, u64),
    log_len: usize,
    datagrams: usize,
}

impl Snapshot {
    fn take(c: &Corpus) -> Snapshot {
        let lab = &c.lab;
        let meta = std::fs::metadata(&lab.db).expect("the store file");
        Snapshot {
            outside: tree(&lab.outside),
            worktree: tree(&lab.worktree(EPISODE)),
            neighbour: tree(&lab.worktree(NEIGHBOUR)),
            tokens: lab.session_files().into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect(),
            root_names: names(&lab.root),
            store: (meta.dev(), meta.ino()),
            log_len: lab.log_len(),
            datagrams: c.echo.received.lock().unwrap().len(),
        }
    }

    fn changes(&self, after: &Snapshot, mode: Mode) -> Vec<String> {
        let mut v = vec![];
        let mut compare = |what: &str, a: &BTreeMap<PathBuf, Vec<u8>>, b: &BTreeMap<PathBuf, Vec<u8>>| {
            let changed: Vec<String> = a
                .keys()
                .chain(b.keys().filter(|k| !a.contains_key(*k)))
                .filter(|k| a.get(*k) != b.get(*k))
                .map(|k| k.display().to_string())
                .collect();
            if !changed.is_empty() {
                v.push(format!("{what} changed: {changed:?}"));
            }
        };
        compare("outside/", &self.outside, &after.outside);
        compare("the worktree (.git included)", &self.worktree, &after.worktree);
        compare("the other episode's worktree", &self.neighbour, &after.neighbour);
        compare("the session token files", &self.tokens, &after.tokens);
        if self.root_names != after.root_names {
            v.push(format!("the lab directory changed: {:?} -> {:?}", self.root_names, after.root_names));
        }
        if self.store != after.store {
            v.push("the store file was replaced".into());
        }
        // A failed pure phase commits nothing; a command's call is one entry.
        let own = usize::from(mode == Mode::Command);
        if after.log_len != self.log_len + own {
            v.push(format!("the log went from {} to {} entries (the call's own: {own})", self.log_len, after.log_len));
        }
        if after.datagrams != self.datagrams {
            v.push(format!("{} datagrams reached the host's loopback", after.datagrams - self.datagrams));
        }
        v
    }
}

/// A UDP listener on 127.0.0.1 that records and echoes every datagram.
struct Echo {
    port: u16,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl Echo {
    fn start() -> Echo {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind UDP");
        socket.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let port = socket.local_addr().unwrap().port();
        let (received, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (log, done) = (received.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !done.load(Ordering::Relaxed) {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    log.lock().unwrap().push(buf[..n].to_vec());
                    let _ = socket.send_to(&buf[..n], from);
                }
            }
        });
        Echo { port, received, stop }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------
// Processes and files.
// ---------------------------------------------------------------------------

/// Live processes whose command line or name (`comm`) contains `marker`; zombies are dead.
fn processes_with(marker: &str) -> Vec<(i32, String)> {
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
        if matches!(state, Some('Z' | 'X') | None) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = text(&cmdline).replace('\0', " ");
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if cmdline.contains(marker) || comm.contains(marker) {
            found.push((pid, format!("{}: {}", comm.trim(), cmdline.trim())));
        }
    }
    found
}

/// Waits (bounded) until no process carries `marker`; returns those that stayed.
fn wait_gone(marker: &str) -> Vec<(i32, String)> {
    let deadline = Instant::now() + GONE_WAIT;
    loop {
        let left = processes_with(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs these processes, each with its process group when it leads one
/// (a setsid grandchild's own children go with it).
fn kill_all(procs: &[(i32, String)]) {
    for (pid, _) in procs {
        // SAFETY: plain syscalls on process ids this test found carrying its own marker.
        unsafe {
            if libc::getpgid(*pid) == *pid {
                libc::kill(-*pid, libc::SIGKILL);
            }
            libc::kill(*pid, libc::SIGKILL);
        }
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next()))
        .is_some_and(|state| !matches!(state, 'Z' | 'X'))
}

/// Waits (bounded) for the daemon's stderr line containing `needle`.
fn wait_line(lab: &Lab, needle: &str) -> Option<String> {
    let deadline = Instant::now() + STDERR_WAIT;
    loop {
        if let Some(l) = lab.daemon.stderr_lines().into_iter().find(|l| l.contains(needle)) {
            return Some(l);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn tail(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Six hex digits, different per run: with the mode letter and call number,
/// a marker is at most 15 bytes (it also names forked children's `comm`).
fn run_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("hx{:06x}", (nanos ^ std::process::id().rotate_left(12)) & 0xff_ffff)
}
