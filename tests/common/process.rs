//! What the black-box suites share about processes: the `worldd` binary, a
//! running `worldd serve` whose stderr is drained for its whole life, and
//! running a command to completion without ever hanging a test. Each suite
//! includes this file with `#[path]` and uses its own part.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

pub const WORLDD: &str = env!("CARGO_BIN_EXE_worldd");

/// Bounds that only turn a hang into a failure; nothing asserts speed.
pub const STARTUP_WAIT: Duration = Duration::from_secs(60);
pub const EXIT_WAIT: Duration = Duration::from_secs(30);
const STDERR_WAIT: Duration = Duration::from_secs(20);

/// A running `worldd serve`; dropping it kills the process.
pub struct Daemon {
    child: Option<Child>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    pub fn start(db: &Path, extra: &[String]) -> Daemon {
        Daemon::start_with(db, extra, |_| {})
    }

    /// The serve command line, as [`Daemon::start`] runs it.
    pub fn command(db: &Path, extra: &[String]) -> Command {
        let mut cmd = Command::new(WORLDD);
        cmd.arg("serve")
            .arg("--db")
            .arg(db)
            .args(["--bind", "127.0.0.1:0"])
            .args(extra)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    /// Like [`Daemon::start`], with the command adjusted first (a changed
    /// user, a restricted process) by `prepare`.
    pub fn start_with(db: &Path, extra: &[String], prepare: impl FnOnce(&mut Command)) -> Daemon {
        let mut cmd = Daemon::command(db, extra);
        prepare(&mut cmd);
        let mut child = cmd.spawn().expect("spawn worldd serve");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        let pipe = child.stderr.take().expect("stderr pipe");
        let lines = stderr.clone();
        // Drains stderr for the daemon's whole life, so it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + STARTUP_WAIT;
        let listening = loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
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
        Daemon { child: Some(child), addr, stderr }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon is running").id()
    }

    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// Waits (bounded) for a stderr line containing `needle`; returns it.
    pub fn wait_stderr(&self, needle: &str) -> String {
        let deadline = Instant::now() + STDERR_WAIT;
        loop {
            if let Some(l) = self.stderr_lines().into_iter().find(|l| l.contains(needle)) {
                return l;
            }
            assert!(Instant::now() < deadline, "no stderr line contains {needle:?}: {:#?}", self.stderr_lines());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILL: no drain, no cleanup; waits until the process is gone.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL worldd");
            child.wait().expect("reap worldd");
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Runs `worldd ARGS…` to completion with stdin null (no terminal answers a prompt).
pub fn worldd(args: &[&str]) -> Output {
    run(Command::new(WORLDD).args(args))
}

/// Runs `worldd ARGS…` with its standard output a pipe whose reader has already
/// gone (`worldd … | head -0`), so its first line meets a closed pipe; stderr
/// is captured as usual and stdout comes back empty.
pub fn worldd_into_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    run_with_stdout(Command::new(WORLDD).args(args), Stdio::from(writer))
}

/// Runs a command to completion with stdin null, failing the test instead of hanging.
pub fn run(cmd: &mut Command) -> Output {
    run_with_stdout(cmd, Stdio::piped())
}

fn run_with_stdout(cmd: &mut Command, stdout: Stdio) -> Output {
    let mut child = cmd
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command");
    let (out, mut err) = (child.stdout.take(), child.stderr.take().unwrap());
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(mut out) = out {
            let _ = out.read_to_end(&mut v);
        }
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + EXIT_WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output { status, stdout: out_reader.join().unwrap(), stderr: err_reader.join().unwrap() }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `worldd ARGS…` that must succeed; returns stdout.
pub fn worldd_ok(args: &[&str]) -> String {
    let o = worldd(args);
    assert!(o.status.success(), "worldd {args:?} failed: {}{}", text(&o.stdout), text(&o.stderr));
    text(&o.stdout)
}

/// Writes an executable (mode 0755) script.
pub fn write_script(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
