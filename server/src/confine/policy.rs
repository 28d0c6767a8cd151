//! What one confined process may touch, as plain data: built per process kind
//! by pure functions over a view of the host, applied by the helper.
//!
//! A run sees a root built only from what its policy lists: the read-only
//! system directories, a few files of `/etc`, its program, its writable
//! trees (a command's worktree with every `.git` in it, at any depth and in
//! any case, bound read-only), a minimal `/dev` and its own `/proc`. Everything else of the host
//! (the store directory, the admin socket, token files, other worktrees,
//! `/root`, `/home`) is simply absent.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Directories of the host that every run sees read-only (or as the host's
/// symlink, on merged-`/usr` systems).
pub const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];
/// The `PATH` of a confined command.
pub const RUN_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Entries of `/etc` a run sees: what dynamic linking, interpreters, TLS and
/// name lookup read. Nothing secret (no `shadow`, no keys).
pub const ETC_ENTRIES: &[&str] = &[
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "protocols",
    "python3",
    "python3.11",
    "services",
    "ssl",
    "timezone",
];

/// The entries of `/etc` a pure phase sees: what an interpreter reads to
/// start (dynamic linking, time zone, user names, TLS roots, Debian's
/// `alternatives` links and Python's site hook). Fewer binds, a faster run.
pub const ETC_PURE_ENTRIES: &[&str] =
    &["alternatives", "group", "ld.so.cache", "localtime", "nsswitch.conf", "passwd", "python3.11", "ssl"];

/// Read only when the run may use the network.
pub const ETC_NETWORK_ENTRIES: &[&str] = &["resolv.conf", "gai.conf"];

/// The private `/tmp` of a `workspace-exec` command (tmpfs, so in memory).
pub const EXEC_TMP_BYTES: u64 = 256 << 20;
/// The private scratch directory of a pure phase (tmpfs).
pub const PURE_SCRATCH_BYTES: u64 = 32 << 20;
/// `/dev` and `/dev/shm` of a run.
pub const DEV_BYTES: u64 = 64 << 10;
pub const SHM_BYTES: u64 = 64 << 20;

/// Resource limits of a pure phase (its whole run: the interpreter and any child).
pub const PURE_LIMITS: Limits = Limits {
    cpu_seconds: 3,
    address_space: 2 << 30,
    file_size: 16 << 20,
    open_files: 256,
    processes: 32,
    memory: PURE_MEMORY_BYTES,
    disk_writes: None,
};
/// The memory of a pure phase as a whole (`serve --pure-memory-mib`).
pub const PURE_MEMORY_BYTES: u64 = 512 << 20;
/// The memory of a `workspace-exec` command as a whole, its private `/tmp`
/// and `/dev/shm` included (`serve --exec-memory-mib`): eight at once stay
/// well inside a small machine.
pub const EXEC_MEMORY_BYTES: u64 = 2 << 30;
// A command's private /tmp and /dev/shm are charged to its memory: they fit.
const _: () = assert!(EXEC_MEMORY_BYTES > EXEC_TMP_BYTES + SHM_BYTES && PURE_MEMORY_BYTES > PURE_SCRATCH_BYTES);

/// Resource limits of a `workspace-exec` command.
pub const EXEC_LIMITS: Limits = Limits {
    cpu_seconds: 20,
    address_space: 8 << 30,
    file_size: 1 << 30,
    open_files: 1024,
    processes: 256,
    memory: EXEC_MEMORY_BYTES,
    disk_writes: None,
};

/// Which process this is, which decides its syscall profile.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// A pure transition, or the plan/finish phase of an effectful one.
    Pure,
    /// A `workspace-exec` command.
    Exec,
}

/// What network a run has.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Network {
    /// None at all (no interface, no socket).
    None,
    /// Its own loopback, up, and nothing else: test suites can listen on
    /// 127.0.0.1; nothing outside the run is reachable.
    Loopback,
    /// The host's network (`serve --exec-network`).
    Host,
}

/// One piece of the run's root, applied in order.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(tag = "mount", rename_all = "camelCase")]
pub enum Mount {
    /// A host tree or file at the same path inside; read-only unless `writable`.
    Bind { path: PathBuf, writable: bool },
    /// A host file or tree shown at another path inside, read-only.
    BindAt { src: PathBuf, dst: PathBuf },
    /// `path`, inside the writable `tree` bound earlier, bound read-only over
    /// itself: looked up beneath the tree with no symlink on the way, and
    /// nothing made for it (a `.git` of a worktree).
    Protect { tree: PathBuf, path: PathBuf },
    /// A private, size-limited tmpfs.
    Tmpfs { path: PathBuf, bytes: u64 },
    /// A symlink, as the host has it (`/bin -> usr/bin`).
    Symlink { path: PathBuf, target: PathBuf },
    /// `/dev` with `null`, `zero`, `full`, `random`, `urandom` and the fd links.
    Dev,
    /// A fresh `/proc` of the run's own PID namespace.
    Proc,
}

impl Mount {
    /// Where the mount lands inside the run.
    pub fn target(&self) -> &Path {
        match self {
            Mount::Bind { path, .. }
            | Mount::Protect { path, .. }
            | Mount::Tmpfs { path, .. }
            | Mount::Symlink { path, .. } => path,
            Mount::BindAt { dst, .. } => dst,
            Mount::Dev => Path::new("/dev"),
            Mount::Proc => Path::new("/proc"),
        }
    }
}

/// Parents before children, so no mount hides an earlier one (a worktree
/// under `/tmp` goes over the private `/tmp`, not under it).
fn in_mount_order(mut mounts: Vec<Mount>) -> Vec<Mount> {
    mounts.sort_by_key(|m| m.target().components().count());
    mounts
}

/// Resource limits of one run.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// `RLIMIT_CPU`, tied to the phase deadline.
    pub cpu_seconds: u64,
    /// `RLIMIT_AS` per process.
    pub address_space: u64,
    /// `RLIMIT_FSIZE`: the largest file a process may write.
    pub file_size: u64,
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
    /// Tasks of the whole run (a pids cgroup, or `RLIMIT_NPROC` in the run's user namespace).
    pub processes: u64,
    /// Resident memory of the whole run, swap counted (a memory cgroup, as root).
    pub memory: u64,
    /// Bytes the run's processes together may write to storage (a command:
    /// the room left in its worktree's quota); counted and enforced by the
    /// run's init as it goes.
    #[serde(default)]
    pub disk_writes: Option<u64>,
}

/// Everything the helper needs to build and start one confined run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub kind: Kind,
    /// `argv[0]` is the program's path (the same inside and outside).
    pub argv: Vec<String>,
    /// `KEY=VALUE` pairs; nothing of the daemon's environment.
    pub env: Vec<String>,
    /// The working directory (the same path inside and outside).
    pub cwd: PathBuf,
    /// The root, in order.
    pub mounts: Vec<Mount>,
    /// Trees Landlock lets the run write (everything else is read-only or absent).
    pub writable: Vec<PathBuf>,
    pub network: Network,
    pub limits: Limits,
    /// Wall-clock bound of the whole run; the helper kills every process of it then.
    pub deadline_ms: u64,
}

/// What the builders need to know of the host's filesystem.
pub trait Host {
    fn entry(&self, path: &Path) -> Option<Entry>;
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File,
    Symlink(PathBuf),
}

/// The real filesystem.
pub struct RealHost;

impl Host for RealHost {
    fn entry(&self, path: &Path) -> Option<Entry> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        if meta.file_type().is_symlink() {
            return std::fs::read_link(path).ok().map(Entry::Symlink);
        }
        Some(if meta.is_dir() { Entry::Dir } else { Entry::File })
    }
}

/// What the operator configured for every run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Widening {
    /// Extra read-only trees (`serve --confine-read DIR`).
    pub read_only: Vec<PathBuf>,
    /// `workspace-exec` commands may use the network (`serve --exec-network`).
    pub exec_network: bool,
    /// A run's memory bound other than the default (`--pure-memory-mib`, `--exec-memory-mib`).
    pub pure_memory: Option<u64>,
    pub exec_memory: Option<u64>,
}

/// A pure phase: `interpreter transition` in `work`, a private tmpfs holding
/// the pinned source read-only; no network, nothing else writable.
pub fn pure(host: &impl Host, interpreter: &Path, work: &Path, widening: &Widening, deadline_ms: u64) -> Policy {
    let mut mounts = system(host, ETC_PURE_ENTRIES.iter());
    mounts.extend(program(interpreter));
    mounts.extend(widening.read_only.iter().map(|p| Mount::Bind { path: p.clone(), writable: false }));
    mounts.push(Mount::Tmpfs { path: work.to_path_buf(), bytes: PURE_SCRATCH_BYTES });
    let source = work.join("transition");
    mounts.push(Mount::BindAt { src: source.clone(), dst: source });
    mounts.extend([Mount::Dev, Mount::Proc]);
    let mounts = in_mount_order(mounts);
    Policy {
        kind: Kind::Pure,
        argv: vec![interpreter.display().to_string(), "transition".into()],
        env: vec![],
        cwd: work.to_path_buf(),
        mounts,
        writable: vec![work.to_path_buf()],
        network: Network::None,
        limits: Limits { memory: widening.pure_memory.unwrap_or(PURE_MEMORY_BYTES), ..PURE_LIMITS },
        deadline_ms,
    }
}

/// A `workspace-exec` command: the episode's worktree read-write with every
/// `.git` in it (`git`, as [`super::walk`] found them) read-only, a private
/// `/tmp`, the system read-only.
pub fn exec(
    host: &impl Host,
    program_path: &Path,
    args: &[String],
    worktree: &Path,
    git: &[PathBuf],
    widening: &Widening,
    deadline_ms: u64,
) -> Policy {
    let network = if widening.exec_network { Network::Host } else { Network::Loopback };
    let resolver: &[&str] = if network == Network::Host { ETC_NETWORK_ENTRIES } else { &[] };
    let mut mounts = system(host, ETC_ENTRIES.iter().chain(resolver));
    mounts.extend(program(program_path));
    mounts.extend(widening.read_only.iter().map(|p| Mount::Bind { path: p.clone(), writable: false }));
    mounts.push(Mount::Bind { path: worktree.to_path_buf(), writable: true });
    let tree = worktree.to_path_buf();
    mounts.extend(git.iter().map(|path| Mount::Protect { tree: tree.clone(), path: path.clone() }));
    mounts.push(Mount::Tmpfs { path: "/tmp".into(), bytes: EXEC_TMP_BYTES });
    mounts.extend([Mount::Dev, Mount::Tmpfs { path: "/dev/shm".into(), bytes: SHM_BYTES }, Mount::Proc]);
    let mounts = in_mount_order(mounts);
    let home = worktree.display().to_string();
    Policy {
        kind: Kind::Exec,
        argv: std::iter::once(program_path.display().to_string()).chain(args.iter().cloned()).collect(),
        env: vec![
            format!("PATH={RUN_PATH}"),
            format!("HOME={home}"),
            "LANG=C".into(),
            "LC_ALL=C".into(),
            "TMPDIR=/tmp".into(),
        ],
        cwd: worktree.to_path_buf(),
        mounts,
        writable: vec![worktree.to_path_buf(), "/tmp".into(), "/dev/shm".into()],
        network,
        limits: Limits { memory: widening.exec_memory.unwrap_or(EXEC_MEMORY_BYTES), ..EXEC_LIMITS },
        deadline_ms,
    }
}

/// The system directories and those `/etc` entries that exist on this host.
fn system<'a>(host: &impl Host, etc: impl Iterator<Item = &'a &'a str>) -> Vec<Mount> {
    let paths = SYSTEM_DIRS.iter().map(PathBuf::from).chain(etc.map(|e| Path::new("/etc").join(e)));
    paths
        .filter_map(|path| match host.entry(&path)? {
            Entry::Symlink(target) => Some(Mount::Symlink { path, target }),
            Entry::Dir | Entry::File => Some(Mount::Bind { path, writable: false }),
        })
        .collect()
}

/// The program itself, when it lives outside the system directories.
fn program(path: &Path) -> Option<Mount> {
    let under_system = SYSTEM_DIRS.iter().any(|d| path.starts_with(d));
    (!under_system).then(|| Mount::Bind { path: path.to_path_buf(), writable: false })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A host with merged `/usr`, a few `/etc` files and nothing else.
    struct FakeHost(BTreeMap<PathBuf, Entry>);

    impl Host for FakeHost {
        fn entry(&self, path: &Path) -> Option<Entry> {
            self.0.get(path).cloned()
        }
    }

    fn host() -> FakeHost {
        let mut m = BTreeMap::new();
        m.insert("/usr".into(), Entry::Dir);
        m.insert("/bin".into(), Entry::Symlink("usr/bin".into()));
        m.insert("/lib".into(), Entry::Symlink("usr/lib".into()));
        m.insert("/lib64".into(), Entry::Symlink("usr/lib64".into()));
        m.insert("/etc/ld.so.cache".into(), Entry::File);
        m.insert("/etc/ssl".into(), Entry::Dir);
        m.insert("/etc/passwd".into(), Entry::File);
        m.insert("/etc/shadow".into(), Entry::File);
        m.insert("/etc/resolv.conf".into(), Entry::File);
        FakeHost(m)
    }

    /// `exec` over `wt`, binding the `.git` one walk of it finds.
    fn exec_over(program: &str, args: &[String], wt: &Path, widening: &Widening) -> Result<Policy, String> {
        let walked = super::super::walk::walk(wt, super::super::walk::Look::Git).map_err(|e| e.to_string())?;
        Ok(exec(&host(), Path::new(program), args, wt, &walked.git, widening, 9000))
    }

    fn binds(p: &Policy) -> Vec<(String, bool)> {
        p.mounts
            .iter()
            .filter_map(|m| match m {
                Mount::Bind { path, writable } => Some((path.display().to_string(), *writable)),
                Mount::Protect { path, .. } => Some((path.display().to_string(), false)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_pure_phase_sees_the_system_read_only_and_writes_only_its_scratch() {
        let p = pure(
            &host(),
            Path::new("/usr/bin/python3"),
            Path::new("/s/w.db.scratch/run-1/work"),
            &Widening::default(),
            2000,
        );
        assert_eq!(p.kind, Kind::Pure);
        assert_eq!(p.argv, ["/usr/bin/python3", "transition"]);
        assert!(p.env.is_empty(), "an empty environment");
        assert_eq!(p.cwd, Path::new("/s/w.db.scratch/run-1/work"));
        assert_eq!(p.writable, [PathBuf::from("/s/w.db.scratch/run-1/work")]);
        assert_eq!(p.network, Network::None);
        assert_eq!(p.limits, PURE_LIMITS);
        assert_eq!(
            binds(&p),
            [
                ("/usr".to_string(), false),
                ("/etc/ld.so.cache".into(), false),
                ("/etc/passwd".into(), false),
                ("/etc/ssl".into(), false)
            ],
            "the interpreter under /usr needs no bind of its own; no secret of /etc"
        );
        assert!(p.mounts.contains(&Mount::Symlink { path: "/bin".into(), target: "usr/bin".into() }));
        assert!(
            p.mounts.contains(&Mount::Tmpfs { path: "/s/w.db.scratch/run-1/work".into(), bytes: PURE_SCRATCH_BYTES })
        );
        let source = PathBuf::from("/s/w.db.scratch/run-1/work/transition");
        assert!(p.mounts.contains(&Mount::BindAt { src: source.clone(), dst: source }), "the source, read-only");
        assert!(!p.mounts.iter().any(|m| matches!(m, Mount::Tmpfs { path, .. } if path == Path::new("/tmp"))));
    }

    #[test]
    fn a_pure_phase_sees_fewer_etc_entries_than_a_command_and_never_a_secret() {
        for e in ETC_PURE_ENTRIES {
            assert!(ETC_ENTRIES.contains(e), "{e}");
        }
        for secret in ["shadow", "gshadow", "ssh", "sudoers", "security"] {
            assert!(!ETC_ENTRIES.contains(&secret) && !ETC_NETWORK_ENTRIES.contains(&secret), "{secret}");
        }
        let mut h = host();
        h.0.insert("/etc/hosts".into(), Entry::File);
        let p = pure(&h, Path::new("/usr/bin/python3"), Path::new("/w"), &Widening::default(), 2000);
        assert!(!binds(&p).iter().any(|(b, _)| b == "/etc/hosts"), "a pure phase looks up no host");
        let e = exec(&h, Path::new("/usr/bin/sh"), &[], Path::new("/ws/ep"), &[], &Widening::default(), 9000);
        assert!(binds(&e).iter().any(|(b, _)| b == "/etc/hosts"));
    }

    #[test]
    fn an_interpreter_outside_the_system_directories_is_bound_alone_not_its_directory() {
        let p = pure(&host(), Path::new("/opt/py/bin/python3.11"), Path::new("/w"), &Widening::default(), 2000);
        assert!(binds(&p).contains(&("/opt/py/bin/python3.11".into(), false)));
        assert!(!binds(&p).iter().any(|(b, _)| b == "/opt/py" || b == "/opt/py/bin"));
    }

    #[test]
    fn an_exec_command_writes_its_worktree_and_tmp_and_sees_git_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path().join("ep");
        std::fs::create_dir_all(wt.join(".git")).unwrap();
        std::fs::create_dir_all(wt.join(".GIT")).unwrap();
        std::fs::create_dir_all(wt.join("src")).unwrap();
        std::fs::write(wt.join("git"), "not a git dir").unwrap();
        let args = vec!["-m".to_string(), "pytest".to_string()];
        let p = exec_over("/usr/bin/python3", &args, &wt, &Widening::default()).unwrap();
        assert_eq!(p.kind, Kind::Exec);
        assert_eq!(p.argv, ["/usr/bin/python3", "-m", "pytest"]);
        assert_eq!(p.cwd, wt);
        assert_eq!(p.network, Network::Loopback, "its own loopback, no host network unless the operator allows it");
        assert_eq!(p.limits, EXEC_LIMITS);
        assert_eq!(p.writable, [wt.clone(), "/tmp".into(), "/dev/shm".into()]);
        let b = binds(&p);
        let at = |x: &(String, bool)| b.iter().position(|y| y == x).unwrap();
        let wt_rw = (wt.display().to_string(), true);
        let git_ro = (wt.join(".git").display().to_string(), false);
        assert!(at(&wt_rw) < at(&git_ro), ".git is bound read-only over the writable worktree");
        assert!(b.contains(&(wt.join(".GIT").display().to_string(), false)), "in any case");
        assert!(!b.iter().any(|(p, _)| p.ends_with("/git")));
        assert!(!b.iter().any(|(p, _)| p == "/etc/resolv.conf"), "no resolver without network");
        assert!(p.env.contains(&format!("HOME={}", wt.display())) && p.env.contains(&"TMPDIR=/tmp".to_string()));
        let pos = |t: &Path| p.mounts.iter().position(|m| m.target() == t).unwrap();
        assert!(pos(Path::new("/tmp")) < pos(&wt), "a worktree under /tmp is mounted over the private /tmp");
        assert!(pos(Path::new("/dev")) < pos(Path::new("/dev/shm")));
    }

    #[test]
    fn every_nested_git_in_any_case_is_bound_read_only_but_nothing_a_symlink_leads_to() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path().join("ep");
        for d in [".git/modules/m/.git", "sub/.git/hooks", "deep/x/y/.Git", "other/.gitignore.d", "away/.git"] {
            std::fs::create_dir_all(wt.join(d)).unwrap();
        }
        std::fs::create_dir_all(wt.join("a/b")).unwrap();
        std::fs::write(wt.join("a/b/.GIT"), "gitdir: ../../.git/modules/b\n").unwrap();
        std::fs::write(wt.join("other/.gitignore"), "target\n").unwrap();
        std::os::unix::fs::symlink(wt.join("away"), wt.join("link")).unwrap();
        std::os::unix::fs::symlink("sub/.git", wt.join("c-git")).unwrap();
        std::fs::create_dir_all(wt.join("d")).unwrap();
        std::os::unix::fs::symlink("../sub/.git", wt.join("d/.git")).unwrap();
        let p = exec_over("/usr/bin/sh", &[], &wt, &Widening::default()).unwrap();
        let read_only: Vec<String> = binds(&p)
            .into_iter()
            .filter(|(b, w)| !w && b.starts_with(&*wt.to_string_lossy()))
            .map(|(b, _)| b)
            .collect();
        let expected = [".git", "away/.git", "sub/.git", "a/b/.GIT", "deep/x/y/.Git"];
        assert_eq!(read_only, expected.map(|e| wt.join(e).display().to_string()), "directories and files, any depth");
        let pos = |t: &Path| p.mounts.iter().position(|m| m.target() == t).unwrap();
        assert!(expected.iter().all(|e| pos(&wt) < pos(&wt.join(e))), "each over the writable worktree");
    }

    #[test]
    fn the_operator_widens_exec_with_network_and_extra_read_only_trees() {
        let widening = Widening { read_only: vec!["/opt/tools".into()], exec_network: true, ..Default::default() };
        let p = exec_over("/opt/tools/bin/cargo", &[], Path::new("/ws/ep"), &widening).unwrap();
        assert_eq!(p.network, Network::Host);
        assert!(binds(&p).contains(&("/etc/resolv.conf".into(), false)));
        assert!(binds(&p).contains(&("/opt/tools".into(), false)));
        let pure = pure(&host(), Path::new("/usr/bin/python3"), Path::new("/w"), &widening, 2000);
        assert_eq!(pure.network, Network::None, "the network flag never reaches a pure phase");
        assert!(binds(&pure).contains(&("/opt/tools".into(), false)));
    }

    #[test]
    fn each_kind_of_run_has_its_memory_bound_and_the_operator_may_change_it() {
        let wt = Path::new("/ws/ep");
        let exec_default = exec_over("/usr/bin/sh", &[], wt, &Widening::default()).unwrap();
        let pure_default = pure(&host(), Path::new("/usr/bin/python3"), Path::new("/w"), &Widening::default(), 2000);
        assert_eq!((exec_default.limits.memory, pure_default.limits.memory), (EXEC_MEMORY_BYTES, PURE_MEMORY_BYTES));
        let set = Widening { exec_memory: Some(256 << 20), pure_memory: Some(128 << 20), ..Default::default() };
        assert_eq!(exec_over("/usr/bin/sh", &[], wt, &set).unwrap().limits.memory, 256 << 20);
        assert_eq!(pure(&host(), Path::new("/usr/bin/python3"), Path::new("/w"), &set, 2000).limits.memory, 128 << 20);
    }

    #[test]
    fn a_policy_travels_as_json_unchanged() {
        let p =
            exec_over("/usr/bin/sh", &["-c".into(), "true".into()], Path::new("/ws/ep"), &Widening::default()).unwrap();
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Policy>(&text).unwrap(), p);
    }
}
