//! The exec runtime: a pinned interpreter runs pinned source as a confined
//! subprocess (see `confine`).
//!
//! Input on stdin, output on stdout, an empty environment, a private scratch
//! working directory, a deadline per phase, a cap on I/O, and every process
//! of the run killed when the phase ends. At most `SUBPROCESSES_MAX` run at once.

use super::PhaseError;
use crate::confine::{Confinement, Outcome};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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
/// Most interpreter pins remembered (path → verified hash).
pub const PINS_CACHED_MAX: usize = 256;

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
    confinement: Arc<Confinement>,
}

impl ExecRuntime {
    pub fn new(confinement: Arc<Confinement>) -> ExecRuntime {
        ExecRuntime { slots: Semaphore::new(SUBPROCESSES_MAX), verified: Mutex::new(HashMap::new()), confinement }
    }

    pub fn confinement(&self) -> &Confinement {
        &self.confinement
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
        if cache.len() >= PINS_CACHED_MAX {
            cache.clear();
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
        let run = self.confinement.run_dir().map_err(PhaseError::Failed)?;
        std::fs::write(run.work().join("transition"), source)
            .map_err(|e| PhaseError::Failed(format!("scratch: {e}")))?;
        let remaining = deadline.saturating_sub(started.elapsed());
        let policy = self.confinement.pure_policy(interpreter, &run, remaining);
        let spawned = self
            .confinement
            .spawn(&run, &policy, |cmd| {
                use std::process::Stdio;
                cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
            })
            .map_err(PhaseError::Failed)?;
        self.exchange(&run, spawned, input, remaining).await
    }

    /// Feeds the input, collects bounded output, and maps how the run ended.
    async fn exchange(
        &self,
        run: &crate::confine::RunDir,
        mut spawned: crate::confine::Spawned,
        input: &[u8],
        deadline: Duration,
    ) -> Result<Vec<u8>, PhaseError> {
        let child = &mut spawned.child;
        let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(PhaseError::Failed("child pipes missing".into()));
        };
        let feed = async {
            let _ = stdin.write_all(input).await;
            drop(stdin);
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut out_limited, mut err_limited) =
            ((&mut stdout).take(EXEC_IO_MAX as u64 + 1), (&mut stderr).take(STDERR_KEPT_MAX as u64));
        let read_out = out_limited.read_to_end(&mut out);
        let read_err = err_limited.read_to_end(&mut err);
        let io = async { tokio::join!(feed, read_out, read_err) };
        // The run's own deadline ends it (and so its pipes); this only guards the daemon.
        let read = tokio::time::timeout(deadline + crate::confine::HELPER_GRACE, io).await;
        if out.len() > EXEC_IO_MAX {
            crate::confine::kill_group(spawned.child.id());
        }
        let outcome = self.confinement.wait(run, spawned).await;
        let tail = || String::from_utf8_lossy(&err).trim().to_string();
        match outcome {
            Outcome::Exited { code: 0 } => {}
            Outcome::TimedOut => {
                return Err(PhaseError::Failed(format!("killed after {} ms (phase deadline)", deadline.as_millis())));
            }
            Outcome::SetupFailed { error } => return Err(PhaseError::Failed(format!("confinement: {error}"))),
            Outcome::MemoryExceeded { limit_bytes } => {
                return Err(PhaseError::Failed(format!(
                    "killed by the kernel: the phase's processes together exceeded its memory bound of {} MiB",
                    limit_bytes >> 20
                )));
            }
            Outcome::DiskExceeded { written_bytes } => {
                return Err(PhaseError::Failed(format!("killed after writing {written_bytes} bytes to storage")));
            }
            Outcome::Exited { code } => {
                return Err(PhaseError::Failed(format!("exit status: {code}; stderr: {}", tail())));
            }
            Outcome::Signaled { signal } => {
                return Err(PhaseError::Failed(format!("killed by signal {signal}; stderr: {}", tail())));
            }
            // A phase is never given a stop.
            Outcome::Stopped => return Err(PhaseError::Failed("stopped before its end".into())),
        }
        match read {
            Ok((_, Ok(_), _)) if out.len() <= EXEC_IO_MAX => Ok(out),
            Ok((_, Ok(_), _)) => Err(PhaseError::Failed(format!("output exceeds {EXEC_IO_MAX} bytes"))),
            Ok((_, Err(e), _)) => Err(PhaseError::Failed(format!("reading stdout: {e}"))),
            Err(_) => Err(PhaseError::Failed("the run's output did not end with it".into())),
        }
    }
}
