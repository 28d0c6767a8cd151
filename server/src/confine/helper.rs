//! The confinement helper: `worldd confine-run INVOCATION`, started by the
//! daemon for each run. It is single-threaded from its first instruction, so
//! everything below may allocate after `fork`.
//!
//! Three processes make a run:
//! - the **helper** stays in the daemon's namespaces: it makes the run's pids
//!   and memory cgroups, creates the PID namespace, enforces the wall-clock
//!   deadline and writes the outcome file (a run the kernel cut for memory
//!   ended `memoryExceeded`);
//! - the **init**, pid 1 of the new PID namespace (dies with the helper by
//!   `PR_SET_PDEATHSIG`), joins the cgroup, enters new mount, IPC, UTS and
//!   network namespaces, builds the run's root and pivots into it, then
//!   starts the target and reaps until it ends (a pure phase's init becomes
//!   the target itself). When the init exits the kernel kills every process
//!   left in the namespace, whatever its session or process group;
//! - the **target**: a new session, resource limits, no capabilities,
//!   Landlock, a seccomp filter, then `execve`.

use super::policy::{Kind, Mount, Network, Policy};
use super::{Invocation, Outcome};
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The Landlock ABI a run requires (kernel 6.12): filesystem, TCP and the
/// scoping of abstract unix sockets and signals. Never silently weaker.
pub const LANDLOCK_ABI: ABI = ABI::V6;
/// The exit code of a helper that could not run at all.
pub const HELPER_FAILED: u8 = 125;
/// Device nodes a run sees under `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];
/// The root tmpfs only holds mount points.
const ROOT_TMPFS_BYTES: u64 = 1 << 20;

type Result<T> = std::result::Result<T, String>;

fn ctx<E: std::fmt::Display>(what: impl std::fmt::Display) -> impl FnOnce(E) -> String {
    move |e| format!("{what}: {e}")
}

/// The helper's `main`: runs the invocation and writes its outcome file.
pub fn main(invocation: &str) -> std::process::ExitCode {
    let inv: Invocation = match serde_json::from_str(invocation) {
        Ok(i) => i,
        Err(e) => {
            note!("worldd confine-run: the invocation is not valid: {e}");
            return std::process::ExitCode::from(HELPER_FAILED);
        }
    };
    let mut outcome = helper(&inv).unwrap_or_else(|error| Outcome::SetupFailed { error });
    if let Some(groups) = &inv.cgroups {
        // The kernel killed part of the run for memory: that is how it ended.
        if groups.memory_kills() > 0 && !matches!(outcome, Outcome::SetupFailed { .. }) {
            outcome = Outcome::MemoryExceeded { limit_bytes: inv.policy.limits.memory };
        }
        groups.remove();
    }
    let written = serde_json::to_vec(&outcome).map_err(|e| e.to_string()).and_then(|bytes| {
        let tmp = inv.outcome.with_extension("tmp");
        std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, &inv.outcome)).map_err(|e| e.to_string())
    });
    if let Err(e) = written {
        note!("worldd confine-run: writing {}: {e}", inv.outcome.display());
        return std::process::ExitCode::from(HELPER_FAILED);
    }
    std::process::ExitCode::SUCCESS
}

fn helper(inv: &Invocation) -> Result<Outcome> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(ctx("prctl(PR_SET_PDEATHSIG)"))?;
    if nix::unistd::getppid() == Pid::from_raw(1) {
        return Err("the daemon that started this run is gone".into());
    }
    let started = Instant::now();
    if let Some(groups) = &inv.cgroups {
        groups.create(inv.policy.limits.processes, inv.policy.limits.memory)?;
    }
    if !inv.privileged {
        enter_user_namespace()?;
    }
    let netns = match &inv.netns {
        Some(path) => Some(std::fs::File::open(path).map_err(ctx("opening the daemon's network namespace"))?),
        None => None,
    };
    let (report_r, report_w) = std::io::pipe().map_err(ctx("pipe"))?;
    let (alive_r, alive_w) = std::io::pipe().map_err(ctx("pipe"))?;
    unshare(CloneFlags::CLONE_NEWPID).map_err(ctx("unshare(CLONE_NEWPID)"))?;
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&chld), None).map_err(ctx("sigprocmask"))?;
    // SAFETY: this process is single-threaded (the helper never starts a thread).
    match unsafe { fork() }.map_err(ctx("fork"))? {
        ForkResult::Child => {
            drop((report_r, alive_w));
            let code = init(inv, netns, report_w, alive_r);
            // SAFETY: leaving the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop((report_w, alive_r));
            let deadline = started + Duration::from_millis(inv.policy.deadline_ms);
            let ended = wait_until(child, &chld, deadline)?;
            let mut report = String::new();
            let _ = (&report_r).take(64 << 10).read_to_string(&mut report);
            drop(alive_w);
            if let Some(n) = report.lines().find_map(|l| l.strip_prefix("written ")) {
                let _ = std::fs::write(&inv.written, n);
            }
            match ended {
                None => Ok(Outcome::TimedOut),
                Some(status) => Ok(parse_report(&report, status)),
            }
        }
    }
}

/// Waits for the init; past the deadline kills it (and so the whole run).
/// Returns how the init ended, or `None` when the deadline struck.
fn wait_until(child: Pid, chld: &SigSet, deadline: Instant) -> Result<Option<WaitStatus>> {
    loop {
        match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(status) => return Ok(Some(status)),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("waitpid: {e}")),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
            // The init's exit waits until the kernel has reaped every process of the namespace.
            while let Err(nix::errno::Errno::EINTR) = waitpid(child, None) {}
            return Ok(None);
        }
        let ts = libc::timespec { tv_sec: left.as_secs() as libc::time_t, tv_nsec: left.subsec_nanos() as i64 };
        // SAFETY: plain syscall on a valid signal set and timespec.
        unsafe { libc::sigtimedwait(chld.as_ref(), std::ptr::null_mut(), &ts) };
    }
}

/// The init's and target's lines (`setup <error>`, `exit <code>`,
/// `signal <n>`), else how the init itself ended: a pure phase's target is
/// the init (it `exec`s in place, see `init_run`).
fn parse_report(report: &str, init: WaitStatus) -> Outcome {
    if let Some(error) = report.lines().find_map(|l| l.strip_prefix("setup ")) {
        return Outcome::SetupFailed { error: error.to_string() };
    }
    let last = report.lines().last().unwrap_or("");
    if let Some(written_bytes) = last.strip_prefix("disk ").and_then(|n| n.trim().parse().ok()) {
        return Outcome::DiskExceeded { written_bytes };
    }
    let number = |p: &str| last.strip_prefix(p).and_then(|n| n.trim().parse::<i32>().ok());
    match (number("exit "), number("signal "), init) {
        (Some(code), _, _) => Outcome::Exited { code },
        (_, Some(signal), _) => Outcome::Signaled { signal },
        (None, None, WaitStatus::Exited(_, code)) if last.is_empty() => Outcome::Exited { code },
        (None, None, WaitStatus::Signaled(_, sig, _)) if last.is_empty() => Outcome::Signaled { signal: sig as i32 },
        _ => Outcome::SetupFailed { error: format!("the run ended without a report ({last:?}, {init:?})") },
    }
}

/// Maps the daemon's uid and gid to themselves in a new user namespace, where
/// this process holds the capabilities it needs to build the run.
fn enter_user_namespace() -> Result<()> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    unshare(CloneFlags::CLONE_NEWUSER).map_err(ctx("unshare(CLONE_NEWUSER)"))?;
    std::fs::write("/proc/self/setgroups", "deny").map_err(ctx("/proc/self/setgroups"))?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")).map_err(ctx("/proc/self/uid_map"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")).map_err(ctx("/proc/self/gid_map"))?;
    Ok(())
}

fn init(
    inv: &Invocation,
    netns: Option<std::fs::File>,
    mut report: std::io::PipeWriter,
    alive: std::io::PipeReader,
) -> i32 {
    match init_run(inv, netns, &mut report, &alive) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(report, "setup {}", e.replace('\n', " "));
            1
        }
    }
}

fn init_run(
    inv: &Invocation,
    netns: Option<std::fs::File>,
    report: &mut std::io::PipeWriter,
    alive: &std::io::PipeReader,
) -> Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(ctx("prctl(PR_SET_PDEATHSIG)"))?;
    if helper_gone(alive) {
        return Err("the helper is gone".into());
    }
    if let Some(groups) = &inv.cgroups {
        groups.join()?;
    }
    let mut flags = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS;
    match (inv.policy.network, netns) {
        (Network::Host, _) => {}
        (Network::None, Some(ns)) => {
            nix::sched::setns(ns, CloneFlags::CLONE_NEWNET).map_err(ctx("entering the empty network namespace"))?;
        }
        (Network::None | Network::Loopback, _) => flags |= CloneFlags::CLONE_NEWNET,
    }
    unshare(flags).map_err(ctx("unshare(mount, IPC, UTS, network namespaces)"))?;
    if inv.policy.network == Network::Loopback {
        loopback_up()?;
    }
    build_root(&inv.root, &inv.policy, inv.run_as)?;
    nix::unistd::sethostname("world").map_err(ctx("sethostname"))?;
    if inv.policy.kind == Kind::Pure {
        // Deterministic code needs no reaper of its own: it becomes pid 1,
        // and the kernel ends the namespace (and every process in it) with it.
        return Err(target(inv));
    }
    // SAFETY: single-threaded (see the module header).
    match unsafe { fork() }.map_err(ctx("fork"))? {
        ForkResult::Child => {
            let error = target(inv);
            let _ = writeln!(report, "setup {}", error.replace('\n', " "));
            // SAFETY: see above.
            unsafe { libc::_exit(127) }
        }
        ForkResult::Parent { child } => {
            release_stdio();
            let line = match inv.policy.limits.disk_writes {
                None => reap_until(child),
                Some(allowed) => reap_within(child, allowed, report),
            };
            let _ = writeln!(report, "{line}");
            Ok(())
        }
    }
}

/// Brings up `lo` in the run's fresh network namespace (its only interface).
fn loopback_up() -> Result<()> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
    let s = socket(AddressFamily::Inet, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None).map_err(ctx("socket"))?;
    // SAFETY: a zeroed ifreq naming "lo", read then written back by two ioctls on a valid socket.
    unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo") {
            *dst = *src as libc::c_char;
        }
        if libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(format!("reading lo's flags: {}", std::io::Error::last_os_error()));
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(format!("bringing lo up: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

fn helper_gone(alive: &std::io::PipeReader) -> bool {
    let mut fds = [libc::pollfd { fd: alive.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) };
    n != 0 && fds[0].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLIN) != 0
}

/// Only the target keeps the daemon's pipes, so their end is the target's end.
fn release_stdio() {
    for fd in 0..3 {
        // SAFETY: closing our own standard descriptors.
        unsafe { libc::close(fd) };
    }
}

/// Reaps every child (orphans of the run land here) until the target ends.
fn reap_until(target: Pid) -> String {
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(status) => match target_end(status, target) {
                Some(line) => return line,
                None => continue,
            },
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return format!("setup waiting for the target: {e}"),
        }
    }
}

/// The report line of the target's end (`exit <code>`, `signal <n>`), if
/// `status` is it.
fn target_end(status: WaitStatus, target: Pid) -> Option<String> {
    match status {
        WaitStatus::Exited(pid, code) if pid == target => Some(format!("exit {code}")),
        WaitStatus::Signaled(pid, sig, _) if pid == target => Some(format!("signal {}", sig as i32)),
        _ => None,
    }
}

/// How often the init counts what the run wrote while it waits.
const WRITES_POLL: Duration = Duration::from_millis(20);

/// Reaps like [`reap_until`], counting on the way what the run's processes
/// wrote to storage; past `allowed` it kills every process of the namespace
/// (the init is its pid 1) and reports `disk <bytes>`. Always reports
/// `written <bytes>` first.
fn reap_within(target: Pid, allowed: u64, report: &mut std::io::PipeWriter) -> String {
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    let ts = libc::timespec { tv_sec: 0, tv_nsec: WRITES_POLL.as_nanos() as i64 };
    let ended = loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => {}
            Ok(status) => match target_end(status, target) {
                Some(line) => break line,
                None => continue,
            },
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return format!("setup waiting for the target: {e}"),
        }
        let written = written_in_namespace();
        if written > allowed {
            // SAFETY: kill(-1) from pid 1 signals every other process of the namespace.
            unsafe { libc::kill(-1, libc::SIGKILL) };
            let _ = reap_until(target);
            let _ = writeln!(report, "written {written}");
            return format!("disk {written}");
        }
        // SAFETY: plain syscall on a valid signal set and timespec (SIGCHLD is blocked).
        unsafe { libc::sigtimedwait(chld.as_ref(), std::ptr::null_mut(), &ts) };
    };
    // What was written since the last look, or by a child left behind, counts too.
    let written = written_in_namespace();
    let _ = writeln!(report, "written {written}");
    if written > allowed { format!("disk {written}") } else { ended }
}

/// What the processes of this PID namespace wrote to storage: each live
/// process's `write_bytes` less its `cancelled_write_bytes` (truncated before
/// writeback), which include the children it reaped. Only the worktree is on
/// storage in a run; `/tmp` and `/dev/shm` are memory.
fn written_in_namespace() -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut total = 0u64;
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(io) = std::fs::read_to_string(e.path().join("io")) else { continue };
        let field = |name: &str| {
            io.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0)
        };
        total = total.saturating_add(field("write_bytes:").saturating_sub(field("cancelled_write_bytes:")));
    }
    total
}

// ---- the run's root ----

fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

fn build_root(root: &Path, policy: &Policy, run_as: Option<u32>) -> Result<()> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none).map_err(ctx("making / private"))?;
    let size = format!("size={ROOT_TMPFS_BYTES},mode=0755");
    mount(Some("tmpfs"), root, Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some(size.as_str()))
        .map_err(ctx(format!("mounting the run's root at {}", root.display())))?;
    for m in &policy.mounts {
        apply(root, m, run_as).map_err(|e| format!("{m:?}: {e}"))?;
    }
    if policy.mounts.contains(&Mount::Dev) {
        remount_read_only(&root.join("dev"), MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC)?;
    }
    let old = root.join(".old");
    std::fs::create_dir(&old).map_err(ctx("mkdir .old"))?;
    nix::unistd::pivot_root(root, &old).map_err(ctx("pivot_root"))?;
    nix::unistd::chdir("/").map_err(ctx("chdir /"))?;
    umount2("/.old", MntFlags::MNT_DETACH).map_err(ctx("detaching the host's root"))?;
    std::fs::remove_dir("/.old").map_err(ctx("rmdir /.old"))?;
    mount(none, "/", none, MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV, none)
        .map_err(ctx("remounting / read-only"))?;
    Ok(())
}

fn apply(root: &Path, m: &Mount, run_as: Option<u32>) -> Result<()> {
    let none: Option<&str> = None;
    match m {
        Mount::Bind { path, writable } => bind(path, &inside(root, path), *writable),
        Mount::BindAt { src, dst } => bind(src, &inside(root, dst), false),
        Mount::Protect { tree, path } => {
            let rel =
                path.strip_prefix(tree).map_err(|_| format!("{} is not in {}", path.display(), tree.display()))?;
            protect(&inside(root, tree), rel)
        }
        Mount::Tmpfs { path, bytes } => {
            let dst = inside(root, path);
            std::fs::create_dir_all(&dst).map_err(ctx("mkdir"))?;
            let owner = run_as.map(|id| format!(",uid={id},gid={id}")).unwrap_or_default();
            let data = format!("size={bytes},mode=1777{owner}");
            mount(Some("tmpfs"), &dst, Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some(data.as_str()))
                .map_err(ctx("mount tmpfs"))
        }
        Mount::Symlink { path, target } => {
            let dst = inside(root, path);
            mkdir_parent(&dst)?;
            std::os::unix::fs::symlink(target, &dst).map_err(ctx("symlink"))
        }
        Mount::Dev => {
            let dev = root.join("dev");
            std::fs::create_dir_all(&dev).map_err(ctx("mkdir /dev"))?;
            let data = format!("size={},mode=0755", super::policy::DEV_BYTES);
            mount(Some("tmpfs"), &dev, Some("tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC, Some(data.as_str()))
                .map_err(ctx("mount /dev"))?;
            for name in DEVICES {
                let host = Path::new("/dev").join(name);
                std::fs::write(dev.join(name), b"").map_err(ctx(format!("/dev/{name}")))?;
                mount(Some(&host), &dev.join(name), none, MsFlags::MS_BIND, none)
                    .map_err(ctx(format!("/dev/{name}")))?;
            }
            for (name, target) in [
                ("fd", "/proc/self/fd"),
                ("stdin", "/proc/self/fd/0"),
                ("stdout", "/proc/self/fd/1"),
                ("stderr", "/proc/self/fd/2"),
            ] {
                std::os::unix::fs::symlink(target, dev.join(name)).map_err(ctx(format!("/dev/{name}")))?;
            }
            std::fs::create_dir(dev.join("shm")).map_err(ctx("/dev/shm"))
        }
        Mount::Proc => {
            let proc = root.join("proc");
            std::fs::create_dir_all(&proc).map_err(ctx("mkdir /proc"))?;
            let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
            mount(Some("proc"), &proc, Some("proc"), flags, none).map_err(ctx("mount /proc"))?;
            // Kernel tunables stay read-only even to a uid 0 without capabilities.
            for sub in ["sys", "sysrq-trigger", "irq", "bus"] {
                let p = proc.join(sub);
                if p.exists() {
                    mount(Some(&p), &p, none, MsFlags::MS_BIND | MsFlags::MS_REC, none).map_err(ctx("bind /proc"))?;
                    remount_read_only(&p, flags)?;
                }
            }
            Ok(())
        }
    }
}

fn mkdir_parent(dst: &Path) -> Result<()> {
    match dst.parent() {
        Some(p) => std::fs::create_dir_all(p).map_err(ctx(format!("mkdir {}", p.display()))),
        None => Ok(()),
    }
}

/// Binds exactly the object `src` names (its last component is not followed,
/// so a symlink swapped in after the policy was built cannot redirect it).
fn bind(src: &Path, dst: &Path, writable: bool) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let none: Option<&str> = None;
    let fd = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(src)
        .map_err(ctx(format!("opening {}", src.display())))?;
    let meta = fd.metadata().map_err(ctx("stat"))?;
    if meta.file_type().is_symlink() {
        return Err(format!("{} is a symlink", src.display()));
    }
    mkdir_parent(dst)?;
    if meta.is_dir() {
        std::fs::create_dir_all(dst).map_err(ctx("mkdir"))?;
    } else if !dst.exists() {
        std::fs::write(dst, b"").map_err(ctx("mount point"))?;
    }
    let by_fd = format!("/proc/self/fd/{}", fd.as_raw_fd());
    mount(Some(by_fd.as_str()), dst, none, MsFlags::MS_BIND | MsFlags::MS_REC, none).map_err(ctx("bind"))?;
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if !writable {
        flags |= MsFlags::MS_RDONLY;
    }
    remount(dst, flags)
}

/// Binds what `rel` names beneath `tree` (a writable bind of the run) read-
/// only over itself. It is looked up beneath the tree with no symlink on the
/// way and nothing is made for it, so a component swapped for a symlink
/// after the policy was built fails the run instead of moving the bind; the
/// remount goes through a descriptor of the new mount (a lookup that meets
/// anything else is no mount root, and the remount fails).
fn protect(tree: &Path, rel: &Path) -> Result<()> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    let none: Option<&str> = None;
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let dir =
        nix::fcntl::open(tree, flags, nix::sys::stat::Mode::empty()).map_err(ctx(format!("{}", tree.display())))?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let open = || nix::fcntl::openat2(&dir, rel, how).map_err(ctx(format!("{} in {}", rel.display(), tree.display())));
    let by_fd = |fd: &std::os::fd::OwnedFd| PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    let target = open()?;
    mount(Some(&by_fd(&target)), &by_fd(&target), none, MsFlags::MS_BIND, none).map_err(ctx("bind"))?;
    let mounted = open()?;
    remount_read_only(&by_fd(&mounted), MsFlags::MS_NOSUID | MsFlags::MS_NODEV)
}

fn remount_read_only(path: &Path, flags: MsFlags) -> Result<()> {
    remount(path, flags | MsFlags::MS_RDONLY)
}

/// Remounts a bind with `flags`, keeping the flags the kernel locks on it.
fn remount(path: &Path, flags: MsFlags) -> Result<()> {
    use nix::sys::statvfs::FsFlags;
    let none: Option<&str> = None;
    let st = nix::sys::statvfs::statvfs(path).map_err(ctx("statvfs"))?;
    let mut keep = MsFlags::empty();
    for (has, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
    ] {
        if st.flags().contains(has) {
            keep |= ms;
        }
    }
    mount(none, path, none, MsFlags::MS_BIND | MsFlags::MS_REMOUNT | flags | keep, none)
        .map_err(ctx(format!("remounting {}", path.display())))
}

// ---- the target ----

/// Applies everything to this process and `execve`s; returns only on failure.
fn target(inv: &Invocation) -> String {
    match prepare_target(inv) {
        Ok((argv, env)) => match nix::unistd::execve(&argv[0], &argv, &env) {
            Err(e) => format!("execve {}: {e}", inv.policy.argv[0]),
        },
        Err(e) => e,
    }
}

fn prepare_target(inv: &Invocation) -> Result<(Vec<CString>, Vec<CString>)> {
    let policy = &inv.policy;
    let cstrings = |v: &[String]| -> Result<Vec<CString>> {
        v.iter().map(|s| CString::new(s.as_bytes()).map_err(|_| format!("{s:?} holds a NUL byte"))).collect()
    };
    let (argv, env) = (cstrings(&policy.argv)?, cstrings(&policy.env)?);
    if argv.is_empty() {
        return Err("empty argv".into());
    }
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).map_err(ctx("sigprocmask"))?;
    // SAFETY: restoring the default disposition the program expects (Rust ignores SIGPIPE).
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    nix::unistd::setsid().map_err(ctx("setsid"))?;
    set_limits(policy, inv.run_as.is_some())?;
    nix::unistd::chdir(&policy.cwd).map_err(ctx(format!("chdir {}", policy.cwd.display())))?;
    lock_out_root()?;
    if let Some(id) = inv.run_as {
        become_unprivileged(id, policy.limits.processes)?;
    }
    clear_capabilities()?;
    landlock(policy)?;
    // SAFETY: plain syscall; marks every descriptor above stderr close-on-exec.
    let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if r != 0 {
        return Err(format!("close_range: {}", std::io::Error::last_os_error()));
    }
    let main = super::seccomp::filter(policy.kind, inv.x32)?;
    seccompiler::apply_filter(&super::seccomp::clone3_filter(inv.x32)?).map_err(ctx("seccomp"))?;
    if policy.kind == Kind::Exec {
        seccompiler::apply_filter(&super::seccomp::fallocate_filter(inv.x32)?).map_err(ctx("seccomp"))?;
    }
    seccompiler::apply_filter(&main).map_err(ctx("seccomp"))?;
    Ok((argv, env))
}

/// The run's resource limits. A target that will switch uid first gets a
/// wide task limit: until it is in its own user namespace its uid's count
/// spans every run.
fn set_limits(policy: &Policy, switching_uid: bool) -> Result<()> {
    use nix::sys::resource::{Resource, setrlimit};
    let l = policy.limits;
    // In the run's own user namespace the count is the run's alone (ignored
    // for uid 0, which the pids cgroup bounds instead).
    let tasks = if switching_uid { super::RUN_UID_TASKS_MAX } else { l.processes + 2 };
    for (r, v) in [
        (Resource::RLIMIT_CPU, l.cpu_seconds),
        (Resource::RLIMIT_AS, l.address_space),
        (Resource::RLIMIT_FSIZE, l.file_size),
        (Resource::RLIMIT_NOFILE, l.open_files),
        (Resource::RLIMIT_CORE, 0),
        (Resource::RLIMIT_NPROC, tasks),
    ] {
        setrlimit(r, v, v).map_err(ctx(format!("setrlimit({r:?})")))?;
    }
    Ok(())
}

/// uid 0 gains nothing at `execve`: the bounding set is emptied and the
/// root exemptions locked off (needs `CAP_SETPCAP`; a target without it has
/// no capability to lose).
fn lock_out_root() -> Result<()> {
    use caps::{CapSet, Capability};
    // NOROOT, NO_SETUID_FIXUP and their locks, and KEEP_CAPS locked off.
    const SECBITS_LOCKED_NOROOT: libc::c_ulong = 0x2f;
    if !caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false) {
        return Ok(());
    }
    // SAFETY: plain prctl.
    let r = unsafe { libc::prctl(libc::PR_SET_SECUREBITS, SECBITS_LOCKED_NOROOT, 0, 0, 0) };
    if r != 0 {
        return Err(format!("PR_SET_SECUREBITS: {}", std::io::Error::last_os_error()));
    }
    for cap in caps::read(None, CapSet::Bounding).map_err(ctx("reading capabilities"))? {
        caps::drop(None, CapSet::Bounding, cap).map_err(ctx("dropping a bounding capability"))?;
    }
    Ok(())
}

/// Becomes `id` (no supplementary groups), then enters a user namespace of
/// its own, where `RLIMIT_NPROC` counts this run's tasks alone.
fn become_unprivileged(id: u32, tasks: u64) -> Result<()> {
    use nix::unistd::{Gid, Uid, setgroups, setresgid, setresuid};
    setgroups(&[]).map_err(ctx("setgroups"))?;
    let (uid, gid) = (Uid::from_raw(id), Gid::from_raw(id));
    setresgid(gid, gid, gid).map_err(ctx("setresgid"))?;
    setresuid(uid, uid, uid).map_err(ctx("setresuid"))?;
    unshare(CloneFlags::CLONE_NEWUSER).map_err(ctx("unshare(CLONE_NEWUSER)"))?;
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NPROC, tasks + 2, tasks + 2)
        .map_err(ctx("setrlimit(RLIMIT_NPROC)"))
}

/// No capability is left in any set.
fn clear_capabilities() -> Result<()> {
    use caps::CapSet;
    for set in [CapSet::Ambient, CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        caps::clear(None, set).map_err(ctx(format!("clearing {set:?} capabilities")))?;
    }
    Ok(())
}

/// Read and execute everywhere in the run's root, write only the policy's
/// trees and the harmless devices; no TCP unless allowed; no signal or
/// abstract socket outside the run.
fn landlock(policy: &Policy) -> Result<()> {
    let abi = LANDLOCK_ABI;
    let fail = ctx("landlock");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?;
    // TCP is refused outright where the run has no network; on its own
    // loopback or the host's the network namespace decides what it reaches.
    if policy.network == Network::None {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi)).map_err(ctx("landlock"))?;
    }
    let mut created =
        ruleset.scope(Scope::from_all(abi)).map_err(ctx("landlock"))?.create().map_err(ctx("landlock"))?;
    let open = |p: &Path| PathFd::new(p).map_err(ctx(format!("landlock: opening {}", p.display())));
    created =
        created.add_rule(PathBeneath::new(open(Path::new("/"))?, AccessFs::from_read(abi))).map_err(ctx("landlock"))?;
    for w in &policy.writable {
        created = created.add_rule(PathBeneath::new(open(w)?, AccessFs::from_all(abi))).map_err(ctx("landlock"))?;
    }
    if policy.mounts.contains(&Mount::Dev) {
        let device = AccessFs::from_file(abi) & !AccessFs::Execute;
        for name in DEVICES {
            let p = Path::new("/dev").join(name);
            created = created.add_rule(PathBeneath::new(open(&p)?, device)).map_err(ctx("landlock"))?;
        }
    }
    let status = created.restrict_self().map_err(ctx("landlock"))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(format!("landlock is only {:?} on this kernel", status.ruleset));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread in a mount namespace of its own; `None` without
    /// the privilege to make one.
    fn in_own_mount_namespace<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let none: Option<&str> = None;
        let run = move || {
            unshare(CloneFlags::CLONE_NEWNS).ok()?;
            mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none).ok()?;
            Some(f())
        };
        std::thread::spawn(run).join().expect("the namespace thread")
    }

    #[test]
    fn a_git_bind_is_read_only_and_never_follows_a_symlink_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (wt, outside) = (root.join("wt"), root.join("outside"));
        for d in ["wt/sub/.git", "outside/.git"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(wt.join("sub/.git/HEAD"), "main\n").unwrap();
        std::os::unix::fs::symlink(&outside, wt.join("link")).unwrap();
        std::os::unix::fs::symlink("sub/.git", wt.join("git-link")).unwrap();
        let (wt2, outside2) = (wt.clone(), outside.clone());
        let seen = in_own_mount_namespace(move || {
            let bound = protect(&wt2, Path::new("sub/.git"));
            let written = std::fs::write(wt2.join("sub/.git/HEAD"), "evil\n").map_err(|e| e.raw_os_error());
            let refused = ["link/.git", "git-link", "../outside/.git"].map(|p| protect(&wt2, Path::new(p)).is_err());
            let outside_written = std::fs::write(outside2.join(".git/HEAD"), "not bound\n").is_ok();
            (bound, written, refused, outside_written)
        });
        let Some((bound, written, refused, outside_written)) = seen else {
            note!("skipped: making a mount namespace needs CAP_SYS_ADMIN");
            return;
        };
        assert_eq!(bound, Ok(()));
        assert_eq!(written, Err(Some(libc::EROFS)), "bound read-only");
        assert_eq!(refused, [true; 3], "through a symlink, a trailing symlink, out of the tree: refused");
        assert!(outside_written, "nothing outside was bound");
        assert_eq!(std::fs::read_to_string(wt.join("sub/.git/HEAD")).unwrap(), "main\n");
    }

    #[test]
    fn the_report_names_the_target_end_and_a_setup_failure_wins() {
        let pid = Pid::from_raw(7);
        let (ok, failed) = (WaitStatus::Exited(pid, 0), WaitStatus::Exited(pid, 1));
        assert_eq!(parse_report("exit 0\n", ok), Outcome::Exited { code: 0 });
        assert_eq!(parse_report("exit 3\n", ok), Outcome::Exited { code: 3 });
        assert_eq!(parse_report("signal 9\n", ok), Outcome::Signaled { signal: 9 });
        assert_eq!(
            parse_report("setup landlock: ABI 3\nexit 127\n", failed),
            Outcome::SetupFailed { error: "landlock: ABI 3".into() }
        );
        assert!(matches!(parse_report("exit x", ok), Outcome::SetupFailed { .. }));
        // A pure phase's target is the init: no line, its own status.
        assert_eq!(parse_report("", WaitStatus::Exited(pid, 4)), Outcome::Exited { code: 4 });
        assert_eq!(
            parse_report("", WaitStatus::Signaled(pid, Signal::SIGKILL, false)),
            Outcome::Signaled { signal: 9 }
        );
    }
}
