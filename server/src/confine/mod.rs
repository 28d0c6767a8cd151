//! Confinement: every process the daemon starts for an agent (a pure phase
//! of the exec runtime, a `workspace-exec` command) runs in its own mount,
//! PID, IPC, UTS and network namespaces, under Landlock, a seccomp filter,
//! resource limits and (as root) a pids cgroup, with no capabilities. The
//! daemon starts a single-threaded helper (`worldd confine-run`) that builds
//! all of it and `exec`s the target; see `helper` for the three processes of
//! a run and `policy` for what each kind of process may touch.
//!
//! With `serve --unconfined` the same runs start directly, as plain child
//! processes in their own process group; health and every worktree policy
//! digest say so.

mod cgroup;
pub mod commands;
pub mod helper;
pub mod policy;
mod seccomp;
pub mod walk;

use policy::{Kind, Network, Policy, RealHost, Widening};
use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The hidden subcommand that runs the helper.
pub const HELPER_COMMAND: &str = "confine-run";
/// The uid (and gid) a privileged daemon's pure phases run as: owned by
/// nothing on the host, so it can touch nothing but what the run is given.
pub const PURE_RUN_UID: u32 = 0x7ff0_0000;
/// `RLIMIT_NPROC` while a target still shares its uid with the other runs
/// (before it enters its own user namespace, where its own limit applies).
pub const RUN_UID_TASKS_MAX: u64 = 4096;
/// How long past a run's deadline the daemon waits for its helper before
/// killing the helper itself (the helper enforces the deadline first).
pub const HELPER_GRACE: Duration = Duration::from_secs(2);

/// How a run ended, as its helper reports it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum Outcome {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    /// The deadline struck; every process of the run was killed.
    TimedOut,
    /// The run could not be confined (or started); nothing of it ran.
    SetupFailed {
        error: String,
    },
    /// Its processes together reached the run's memory bound and the kernel
    /// killed what went over (the rest ended with the run).
    MemoryExceeded {
        limit_bytes: u64,
    },
    /// Its processes wrote more to storage than the run was allowed
    /// (`Limits::disk_writes`: the room left in the worktree's quota); the
    /// run was killed when it was seen.
    DiskExceeded {
        written_bytes: u64,
    },
    /// Stopped by its caller (a task's cancel): every process of the run was
    /// killed. The daemon's own word; a helper never reports it.
    Stopped,
}

/// A caller's ask to stop a run before its end (a task's cancel): asked
/// once, seen by the run's wait whenever it is asked.
#[derive(Debug, Default)]
pub struct RunStop {
    asked: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl RunStop {
    pub fn ask(&self) {
        self.asked.store(true, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_asked(&self) -> bool {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Ends once the stop is asked (at once if it was).
    pub async fn asked(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the flag is read, so no ask falls between.
            notified.as_mut().enable();
            if self.is_asked() {
                return;
            }
            notified.await;
        }
    }
}

impl Outcome {
    /// A bounded name of how the run ended, as metrics label it.
    pub fn class(&self) -> &'static str {
        match self {
            Outcome::Exited { code: 0 } => "exited_zero",
            Outcome::Exited { .. } => "exited_nonzero",
            Outcome::Signaled { .. } => "signaled",
            Outcome::TimedOut => "timed_out",
            Outcome::SetupFailed { .. } => "setup_failed",
            Outcome::MemoryExceeded { .. } => "memory_exceeded",
            Outcome::DiskExceeded { .. } => "disk_exceeded",
            Outcome::Stopped => "stopped",
        }
    }
}

/// What the daemon hands the helper: the policy and the run's plumbing.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    pub policy: Policy,
    /// An empty host directory where the run's root is mounted (in the run's
    /// own mount namespace only).
    pub root: PathBuf,
    /// Where the helper writes the [`Outcome`].
    pub outcome: PathBuf,
    /// Where the helper writes the bytes the run wrote to storage.
    pub written: PathBuf,
    /// The run's pids and memory cgroups (a uid-0 daemon); the helper
    /// creates and removes them.
    pub cgroups: Option<cgroup::RunGroups>,
    /// The uid and gid the target runs as, in a user namespace of its own
    /// (a pure phase of a privileged daemon): its tasks are then counted by
    /// `RLIMIT_NPROC`, which the kernel never applies to uid 0.
    pub run_as: Option<u32>,
    /// The daemon holds `CAP_SYS_ADMIN`; otherwise the run gets its own user namespace.
    pub privileged: bool,
    /// The kernel runs x32 syscalls, so the filter must deny their numbers too.
    pub x32: bool,
    /// An empty network namespace the daemon keeps (`/proc/<pid>/fd/<n>`),
    /// entered by a run without network instead of making one; privileged only.
    pub netns: Option<PathBuf>,
}

/// How the operator asked runs to be confined.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub unconfined: bool,
    pub widening: Widening,
}

#[derive(Debug)]
enum Mode {
    Kernel(Kernel),
    Unconfined,
}

/// What a confined run needs of the daemon.
#[derive(Debug)]
struct Kernel {
    helper: PathBuf,
    cgroups: Option<cgroup::Cgroups>,
    privileged: bool,
    x32: bool,
    /// The empty network namespace runs share (privileged only).
    netns: Option<std::fs::File>,
}

/// The daemon's confinement: how to start a run, and what it is called.
#[derive(Debug)]
pub struct Confinement {
    mode: Mode,
    widening: Widening,
    scratch_root: PathBuf,
    /// Where each run's kind, outcome and duration are counted.
    metrics: Arc<crate::metrics::Metrics>,
}

impl Confinement {
    /// Checks that this kernel can confine runs by confining one (a shell
    /// that checks its own restrictions); an error names what is missing.
    pub async fn start(
        opts: Options,
        scratch_root: &Path,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Result<Arc<Confinement>, String> {
        if opts.unconfined {
            return Ok(Arc::new(Confinement {
                mode: Mode::Unconfined,
                widening: opts.widening,
                scratch_root: scratch_root.into(),
                metrics,
            }));
        }
        Confinement::start_kernel(opts, scratch_root, metrics)
            .await
            .map_err(|e| format!("this kernel cannot confine runs: {e}"))
    }

    async fn start_kernel(
        opts: Options,
        scratch_root: &Path,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Result<Arc<Confinement>, String> {
        if !cfg!(target_arch = "x86_64") {
            return Err("confinement is built for x86-64 only".into());
        }
        // The running binary itself, even if the file has since been replaced.
        let helper = PathBuf::from("/proc/self/exe");
        if !helper.exists() {
            return Err("/proc/self/exe is missing (is /proc mounted?)".into());
        }
        let privileged = caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SYS_ADMIN).unwrap_or(false);
        // The kernel never counts uid 0's processes against RLIMIT_NPROC, in any user namespace.
        let cgroups = if nix::unistd::geteuid().is_root() { Some(cgroup::Cgroups::create()?) } else { None };
        if !cgroups.as_ref().is_some_and(cgroup::Cgroups::has_memory) {
            tracing::warn!(
                "no memory cgroup for runs (needs root and a memory controller): a run's memory is bounded per process (RLIMIT_AS), not as a whole"
            );
        }
        let netns = if privileged { Some(empty_network_namespace()?) } else { None };
        let kernel = Kernel { helper, cgroups, privileged, x32: seccomp::kernel_has_x32(), netns };
        let c = Confinement {
            mode: Mode::Kernel(kernel),
            widening: opts.widening,
            scratch_root: scratch_root.into(),
            metrics,
        };
        c.self_check().await?;
        Ok(Arc::new(c))
    }

    pub fn is_confined(&self) -> bool {
        matches!(self.mode, Mode::Kernel { .. })
    }

    /// `"kernel"` or `"unconfined"`, as health and policies show it.
    pub fn mode_name(&self) -> &'static str {
        if self.is_confined() { "kernel" } else { "unconfined" }
    }

    /// What a worktree policy digest covers of the confinement.
    pub fn describe_exec(&self) -> serde_json::Value {
        serde_json::json!({"mode": self.mode_name(), "network": self.widening.exec_network,
            "readOnly": self.widening.read_only})
    }

    /// A fresh run directory under the daemon's scratch root.
    pub fn run_dir(&self) -> Result<RunDir, String> {
        RunDir::create(&self.scratch_root)
    }

    /// The policy of a pure phase whose source is already in `run.work()`.
    pub fn pure_policy(&self, interpreter: &Path, run: &RunDir, deadline: Duration) -> Policy {
        policy::pure(&RealHost, interpreter, &run.work(), &self.widening, deadline.as_millis() as u64)
    }

    /// The policy of a `workspace-exec` command over `worktree`, binding
    /// read-only every `.git` a walk of it found (`git`).
    pub fn exec_policy(
        &self,
        program: &Path,
        args: &[String],
        worktree: &Path,
        git: &[PathBuf],
        deadline: Duration,
    ) -> Policy {
        policy::exec(&RealHost, program, args, worktree, git, &self.widening, deadline.as_millis() as u64)
    }

    /// Starts a run; the caller wires `stdin`/`stdout`/`stderr` first.
    pub fn spawn(
        &self,
        run: &RunDir,
        policy: &Policy,
        stdio: impl FnOnce(&mut tokio::process::Command),
    ) -> Result<Spawned, String> {
        let Some((program, args)) = policy.argv.split_first() else { return Err("a run needs a program".into()) };
        let mut cmd = match &self.mode {
            Mode::Unconfined => {
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args).current_dir(&policy.cwd).env_clear();
                cmd.envs(policy.env.iter().filter_map(|kv| kv.split_once('=')));
                // SAFETY: close_range is async-signal-safe; it runs between fork and exec.
                unsafe {
                    cmd.pre_exec(|| {
                        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
                        Ok(())
                    });
                }
                cmd
            }
            Mode::Kernel(k) => {
                let invocation = Invocation {
                    policy: policy.clone(),
                    root: run.root(),
                    outcome: run.outcome(),
                    written: run.written(),
                    cgroups: k.cgroups.as_ref().map(|c| c.run(&run.name)),
                    run_as: (k.privileged && policy.kind == Kind::Pure).then_some(PURE_RUN_UID),
                    privileged: k.privileged,
                    x32: k.x32,
                    netns: k
                        .netns
                        .as_ref()
                        .filter(|_| policy.network == Network::None)
                        .map(|f| format!("/proc/{}/fd/{}", std::process::id(), f.as_raw_fd()).into()),
                };
                let text = serde_json::to_string(&invocation).map_err(|e| e.to_string())?;
                let mut cmd = tokio::process::Command::new(&k.helper);
                cmd.arg(HELPER_COMMAND).arg(text).env_clear().current_dir("/");
                cmd
            }
        };
        cmd.stdin(std::process::Stdio::null()).process_group(0).kill_on_drop(true);
        stdio(&mut cmd);
        let child = cmd.spawn().map_err(|e| format!("starting {program}: {e}"))?;
        let (kind, started) = (policy.kind, std::time::Instant::now());
        Ok(Spawned { child, deadline: Duration::from_millis(policy.deadline_ms), kind, started })
    }

    /// Waits for a run to end and says how; afterwards nothing of it is left.
    pub async fn wait(&self, run: &RunDir, spawned: Spawned) -> Outcome {
        self.wait_or_stop(run, spawned, None).await
    }

    /// As `wait`, but a run whose `stop` is asked first is killed whole and
    /// ends `Stopped`.
    pub async fn wait_or_stop(&self, run: &RunDir, spawned: Spawned, stop: Option<&RunStop>) -> Outcome {
        let (kind, started) = (spawned.kind, spawned.started);
        let outcome = self.wait_for(run, spawned, stop).await;
        let kind = if kind == Kind::Pure { "pure" } else { "exec" };
        self.metrics.run(kind, outcome.class(), started.elapsed().as_secs_f64());
        outcome
    }

    async fn wait_for(&self, run: &RunDir, spawned: Spawned, stop: Option<&RunStop>) -> Outcome {
        let Spawned { mut child, deadline, .. } = spawned;
        let pgid = child.id();
        let confined = self.is_confined();
        let limit = if confined { deadline + HELPER_GRACE } else { deadline };
        let stopped = async {
            match stop {
                Some(s) => s.asked().await,
                None => std::future::pending().await,
            }
        };
        let status = tokio::select! {
            status = tokio::time::timeout(limit, child.wait()) => Some(status),
            () = stopped => None,
        };
        // The helper's group first; its init's death (`PR_SET_PDEATHSIG`)
        // ends the run's namespace, and the cgroup below goes with the rest.
        kill_group(pgid);
        let Some(status) = status else {
            let _ = child.wait().await;
            self.remove_cgroup(run).await;
            return Outcome::Stopped;
        };
        let outcome = match (status, confined) {
            (Err(_), _) => {
                let _ = child.wait().await;
                Outcome::TimedOut
            }
            (Ok(Err(e)), _) => Outcome::SetupFailed { error: format!("waiting for the run: {e}") },
            (Ok(Ok(status)), false) => status_outcome(status),
            (Ok(Ok(status)), true) => read_outcome(&run.outcome(), status),
        };
        self.remove_cgroup(run).await;
        outcome
    }

    async fn remove_cgroup(&self, run: &RunDir) {
        if let Mode::Kernel(Kernel { cgroups: Some(c), .. }) = &self.mode {
            c.remove(&c.run(&run.name)).await;
        }
    }

    /// The bytes a finished run's processes wrote to storage, as its init
    /// counted them (a run given `Limits::disk_writes`); `None` when no count
    /// came back (the run was cut short, or not counted).
    pub fn written(&self, run: &RunDir) -> Option<u64> {
        std::fs::read_to_string(run.written()).ok().and_then(|t| t.trim().parse().ok())
    }

    async fn self_check(&self) -> Result<(), String> {
        let run = self.run_dir()?;
        // The scratch root is `<db>.scratch`, beside the store file.
        let store = self.scratch_root.display().to_string();
        let store = store.strip_suffix(".scratch").unwrap_or(&store).to_string();
        let script = format!(
            "while read k v rest; do case \"$k\" in NoNewPrivs:) nnp=$v;; Seccomp:) sc=$v;; esac; done < /proc/self/status\n\
             [ \"$nnp\" = 1 ] || {{ echo 'no_new_privs is not set' >&2; exit 3; }}\n\
             [ \"$sc\" = 2 ] || {{ echo 'no seccomp filter' >&2; exit 3; }}\n\
             [ ! -e '{}' ] || {{ echo 'the store is visible' >&2; exit 3; }}\n\
             [ \"$$\" -le 16 ] || {{ echo 'not in its own PID namespace' >&2; exit 3; }}\n\
             n=0; while read line; do n=$((n+1)); done < /proc/self/net/dev\n\
             [ $n -le 3 ] || {{ echo 'network interfaces are visible' >&2; exit 3; }}\n",
            store.replace('\'', "")
        );
        std::fs::write(run.work().join("transition"), script).map_err(|e| format!("self-check: {e}"))?;
        let policy = self.pure_policy(Path::new("/bin/sh"), &run, Duration::from_secs(10));
        let mut spawned = self.spawn(&run, &policy, |cmd| {
            cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
        })?;
        let stderr = spawned.child.stderr.take();
        let outcome = self.wait(&run, spawned).await;
        let mut said = String::new();
        if let Some(mut e) = stderr {
            use tokio::io::AsyncReadExt;
            let _ = (&mut e).take(4096).read_to_string(&mut said).await;
        }
        match outcome {
            Outcome::Exited { code: 0 } => Ok(()),
            Outcome::SetupFailed { error } => Err(error),
            other => Err(format!("the confinement self-check failed ({other:?}): {}", said.trim())),
        }
    }
}

/// A network namespace with nothing in it but a loopback that is down, made
/// once by a short-lived thread (namespaces belong to threads) and held open.
/// Pure phases enter it instead of paying for a namespace each; they cannot
/// bring an interface up (no capabilities) nor open a socket at all.
fn empty_network_namespace() -> Result<std::fs::File, String> {
    std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| format!("unshare(CLONE_NEWNET): {e}"))?;
        std::fs::File::open("/proc/thread-self/ns/net").map_err(|e| format!("opening the network namespace: {e}"))
    })
    .join()
    .map_err(|_| "the network namespace thread panicked".to_string())?
}

fn status_outcome(status: std::process::ExitStatus) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Outcome::Exited { code },
        (_, Some(signal)) => Outcome::Signaled { signal },
        _ => Outcome::SetupFailed { error: format!("unexpected status {status}") },
    }
}

fn read_outcome(path: &Path, helper: std::process::ExitStatus) -> Outcome {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| Outcome::SetupFailed { error: format!("the helper's report is not valid: {e}") }),
        Err(_) => Outcome::SetupFailed { error: format!("the confinement helper ended ({helper}) without a report") },
    }
}

/// A started run: its helper (or, unconfined, the program itself).
pub struct Spawned {
    pub child: tokio::process::Child,
    deadline: Duration,
    kind: Kind,
    started: std::time::Instant,
}

/// One run's private directory beside the store: `work/` (a pure phase's
/// working directory; the source goes there), `root/` (the mount point of
/// the run's root) and the outcome file. Removed when dropped.
pub struct RunDir {
    pub name: String,
    path: PathBuf,
}

impl RunDir {
    fn create(scratch_root: &Path) -> Result<RunDir, String> {
        let name = format!("run-{}", crate::sessions::new_token().get(..24).unwrap_or("x"));
        let path = scratch_root.join(&name);
        for sub in ["work", "root"] {
            std::fs::create_dir_all(path.join(sub)).map_err(|e| format!("run directory {}: {e}", path.display()))?;
        }
        Ok(RunDir { name, path })
    }

    pub fn work(&self) -> PathBuf {
        self.path.join("work")
    }

    fn root(&self) -> PathBuf {
        self.path.join("root")
    }

    /// What the run's processes wrote to storage, as the helper counted it.
    fn written(&self) -> PathBuf {
        self.path.join("written")
    }

    fn outcome(&self) -> PathBuf {
        self.path.join("outcome")
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Kills a process group, so a run's direct children cannot linger (the PID
/// namespace takes care of the rest when confined).
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
