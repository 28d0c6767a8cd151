//! The exec runtime: a pinned interpreter runs pinned source as a subprocess.
//!
//! Input on stdin, output on stdout, an empty environment, a fresh scratch
//! working directory, no inherited descriptors, a deadline per phase, a cap on
//! I/O, and the whole process group killed on timeout. At most
//! `SUBPROCESSES_MAX` run at once.

use super::PhaseError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use world_store::Ref;

/// Bytes in and out of one phase.
pub const EXEC_IO_MAX: usize = 1 << 20;
/// Most stderr kept for the log line of a failed run.
pub const STDERR_KEPT_MAX: usize = 16 << 10;
/// Subprocesses running at once, over all transitions.
pub const SUBPROCESSES_MAX: usize = 8;

/// What identifies a file's bytes cheaply; a change forces a rehash.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: u64,
}

pub struct ExecRuntime {
    slots: Semaphore,
    verified: Mutex<HashMap<PathBuf, (Stamp, Ref)>>,
    scratch_root: PathBuf,
}

impl ExecRuntime {
    pub fn new(scratch_root: &Path) -> ExecRuntime {
        ExecRuntime {
            slots: Semaphore::new(SUBPROCESSES_MAX),
            verified: Mutex::new(HashMap::new()),
            scratch_root: scratch_root.to_path_buf(),
        }
    }

    /// The interpreter must still be the binary that was pinned at publish.
    fn check_pin(&self, interpreter: &Path, pinned: Ref) -> Result<(), PhaseError> {
        use std::os::unix::fs::MetadataExt;
        let fail = |why: String| PhaseError::Failed(format!("interpreter {}: {why}", interpreter.display()));
        let meta = std::fs::metadata(interpreter).map_err(|e| fail(e.to_string()))?;
        let stamp = Stamp { len: meta.len(), modified: meta.modified().ok(), inode: meta.ino() };
        let mut cache = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if cache.get(interpreter) == Some(&(stamp, pinned)) {
            return Ok(());
        }
        let bytes = std::fs::read(interpreter).map_err(|e| fail(e.to_string()))?;
        let actual = Ref(Sha256::digest(&bytes).into());
        if actual != pinned {
            return Err(fail(format!("hashes to {actual}, not the pinned {pinned}; republish the transition")));
        }
        cache.insert(interpreter.to_path_buf(), (stamp, pinned));
        Ok(())
    }

    pub async fn run(
        &self,
        interpreter: &Path,
        pinned: Ref,
        source: &[u8],
        input: &[u8],
        deadline: Duration,
    ) -> Result<Vec<u8>, PhaseError> {
        if input.len() > EXEC_IO_MAX {
            return Err(PhaseError::Failed(format!("phase input of {} bytes exceeds {EXEC_IO_MAX}", input.len())));
        }
        let started = tokio::time::Instant::now();
        let _slot = tokio::time::timeout(deadline, self.slots.acquire())
            .await
            .map_err(|_| PhaseError::Failed(format!("all {SUBPROCESSES_MAX} subprocess slots stayed busy")))?
            .map_err(|_| PhaseError::Failed("runtime closed".into()))?;
        self.check_pin(interpreter, pinned)?;
        let scratch = Scratch::create(&self.scratch_root).map_err(PhaseError::Failed)?;
        std::fs::write(scratch.path.join("transition"), source)
            .map_err(|e| PhaseError::Failed(format!("scratch: {e}")))?;
        let remaining = deadline.saturating_sub(started.elapsed());
        run_child(interpreter, &scratch.path, input, remaining).await
    }
}

/// A private working directory, removed when dropped.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn create(root: &Path) -> Result<Scratch, String> {
        let name = format!("run-{}", crate::sessions::new_token().get(..24).unwrap_or("x"));
        let path = root.join(name);
        std::fs::create_dir_all(&path).map_err(|e| format!("scratch {}: {e}", path.display()))?;
        Ok(Scratch { path })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

async fn run_child(interpreter: &Path, dir: &Path, input: &[u8], deadline: Duration) -> Result<Vec<u8>, PhaseError> {
    let mut cmd = tokio::process::Command::new(interpreter);
    cmd.arg("transition")
        .current_dir(dir)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: close_range is async-signal-safe; it runs in the child between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| PhaseError::Failed(format!("spawn {}: {e}", interpreter.display())))?;
    let pgid = child.id();
    let (mut stdin, mut stdout, mut stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
        (Some(i), Some(o), Some(e)) => (i, o, e),
        _ => return Err(PhaseError::Failed("child pipes missing".into())),
    };
    let input = input.to_vec();
    let work = async move {
        let feed = async {
            let _ = stdin.write_all(&input).await;
            drop(stdin);
        };
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut out_limited = (&mut stdout).take(EXEC_IO_MAX as u64 + 1);
        let mut err_limited = (&mut stderr).take(STDERR_KEPT_MAX as u64);
        let read_out = out_limited.read_to_end(&mut out);
        let read_err = err_limited.read_to_end(&mut err);
        let (_, o, _) = tokio::join!(feed, read_out, read_err);
        o.map_err(|e| PhaseError::Failed(format!("reading stdout: {e}")))?;
        if out.len() > EXEC_IO_MAX {
            return Err(PhaseError::Failed(format!("output exceeds {EXEC_IO_MAX} bytes")));
        }
        let status = child.wait().await.map_err(|e| PhaseError::Failed(format!("wait: {e}")))?;
        if !status.success() {
            let tail = String::from_utf8_lossy(&err);
            return Err(PhaseError::Failed(format!("{status}; stderr: {}", tail.trim())));
        }
        Ok(out)
    };
    match tokio::time::timeout(deadline, work).await {
        Ok(r) => {
            kill_group(pgid);
            r
        }
        Err(_) => {
            kill_group(pgid);
            Err(PhaseError::Failed(format!("killed after {} ms (phase deadline)", deadline.as_millis())))
        }
    }
}

/// Kills the child's whole process group, so grandchildren cannot linger.
pub(crate) fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok())
        && pgid > 0
    {
        // SAFETY: plain syscall; a group that already exited just yields ESRCH.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}
