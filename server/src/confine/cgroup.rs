//! The cgroups that bound a run as a whole when the daemon runs as root:
//! its tasks (pids; the kernel ignores `RLIMIT_NPROC` for uid 0) and its
//! memory (every process of the run together, swap counted). The daemon owns
//! `<its group>/worldd-<pid>` in each hierarchy (one group under cgroup v2,
//! one per controller under v1); each run gets a child group there, made and
//! removed by its helper, which reads afterwards whether the kernel killed
//! anything of the run for memory.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long removing a finished run's group may wait for its last tasks to be released.
const REMOVE_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub struct Cgroups {
    pids: PathBuf,
    /// `None` when no memory controller is mounted where this process can use it.
    memory: Option<PathBuf>,
}

/// A run's groups: one directory per controller (the same under cgroup v2).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RunGroups {
    pub pids: PathBuf,
    pub memory: Option<PathBuf>,
}

impl RunGroups {
    /// The distinct directories, each made, joined and removed once.
    pub fn dirs(&self) -> Vec<&Path> {
        let mut dirs = vec![self.pids.as_path()];
        dirs.extend(self.memory.as_deref().filter(|m| *m != self.pids));
        dirs
    }

    /// Makes the groups and sets their bounds: `tasks` in pids.max, `memory`
    /// bytes for the run as a whole, swap counted (v1 `memsw`) or off (v2).
    pub fn create(&self, tasks: u64, memory: u64) -> Result<(), String> {
        for dir in self.dirs() {
            std::fs::create_dir(dir).map_err(|e| format!("creating the run's cgroup {}: {e}", dir.display()))?;
        }
        write(&self.pids.join("pids.max"), &tasks.to_string())?;
        let Some(mem) = &self.memory else { return Ok(()) };
        if self.is_v2() {
            write(&mem.join("memory.max"), &memory.to_string())?;
            write(&mem.join("memory.swap.max"), "0").or_else(|e| ignore_absent(&mem.join("memory.swap.max"), e))?;
            // Past the bound the kernel ends the whole run, not one process of it.
            write(&mem.join("memory.oom.group"), "1")?;
        } else {
            write(&mem.join("memory.limit_in_bytes"), &memory.to_string())?;
            let memsw = mem.join("memory.memsw.limit_in_bytes");
            write(&memsw, &memory.to_string()).or_else(|e| ignore_absent(&memsw, e))?;
        }
        Ok(())
    }

    /// One v2 group holds both controllers (v1 keeps one hierarchy each).
    fn is_v2(&self) -> bool {
        self.memory.as_deref() == Some(self.pids.as_path())
    }

    /// Moves the calling thread (single-threaded: the process) into the groups.
    pub fn join(&self) -> Result<(), String> {
        for dir in self.dirs() {
            // cgroup v1 `tasks` moves just this (single) thread and skips the
            // global threadgroup lock whose RCU grace period made
            // `cgroup.procs` cost ~15 ms; v2 has only `cgroup.procs`.
            let tasks = dir.join("tasks");
            let file = if tasks.exists() { tasks } else { dir.join("cgroup.procs") };
            write(&file, "0").map_err(|e| format!("joining the run's cgroup: {e}"))?;
        }
        Ok(())
    }

    /// How many processes of the run the kernel killed for memory.
    pub fn memory_kills(&self) -> u64 {
        let Some(mem) = &self.memory else { return 0 };
        let read = |f: &str| std::fs::read_to_string(mem.join(f)).unwrap_or_default();
        let events = if self.is_v2() { read("memory.events") } else { read("memory.oom_control") };
        events.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    }

    /// Removes the groups (their tasks are gone once the run's init exited).
    pub fn remove(&self) {
        for dir in self.dirs() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("{}: {e}", path.display()))
}

/// Swap accounting may be off (no `memsw` files): there is no swap to count then.
fn ignore_absent(path: &Path, e: String) -> Result<(), String> {
    if path.exists() { Err(e) } else { Ok(()) }
}

impl Cgroups {
    /// Finds the pids and memory controllers (cgroup v1 or v2) and makes the
    /// daemon's groups in them. Without a memory controller runs are bounded
    /// by their tasks and address space alone (said by `has_memory`).
    pub fn create() -> Result<Cgroups, String> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("mountinfo: {e}"))?;
        let membership = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let pids = hierarchy(&mountinfo, &membership, "pids")
            .ok_or("no pids cgroup controller is mounted (needed to bound a run's processes when running as root)")?;
        let pids = daemon_group(&pids, "pids")?;
        let memory = match hierarchy(&mountinfo, &membership, "memory") {
            // One v2 hierarchy: its runs have memory only if the daemon's group passes it down.
            Some(own) if Some(own.as_path()) == pids.parent() => passes_down(&pids, "memory").then(|| pids.clone()),
            Some(own) => daemon_group(&own, "memory").ok(),
            None => None,
        };
        Ok(Cgroups { pids, memory })
    }

    pub fn has_memory(&self) -> bool {
        self.memory.is_some()
    }

    pub fn run(&self, name: &str) -> RunGroups {
        RunGroups { pids: self.pids.join(name), memory: self.memory.as_ref().map(|m| m.join(name)) }
    }

    /// Removes a run's groups once its tasks are gone (the helper normally has).
    pub async fn remove(&self, run: &RunGroups) {
        let until = tokio::time::Instant::now() + REMOVE_WAIT;
        for group in run.dirs() {
            while group.exists() && std::fs::remove_dir(group).is_err() && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

/// Whether a v2 group enables `controller` in its children (its
/// `cgroup.subtree_control`); a v1 group's children always have it.
fn passes_down(group: &Path, controller: &str) -> bool {
    match std::fs::read_to_string(group.join("cgroup.subtree_control")) {
        Ok(enabled) => enabled.split_whitespace().any(|c| c == controller),
        Err(_) => true,
    }
}

/// Makes `<own>/worldd-<pid>` after sweeping the groups of daemons that are gone.
fn daemon_group(own: &Path, controller: &str) -> Result<PathBuf, String> {
    sweep_stale(own);
    let group = own.join(format!("worldd-{}", std::process::id()));
    let _ = std::fs::remove_dir(&group);
    std::fs::create_dir(&group).map_err(|e| format!("creating {controller} cgroup {}: {e}", group.display()))?;
    // cgroup v2 passes controllers down only when asked to.
    let v2 = group.join("cgroup.subtree_control");
    if v2.exists() {
        let available = std::fs::read_to_string(group.join("cgroup.controllers")).unwrap_or_default();
        let wanted: Vec<String> = ["pids", "memory"]
            .iter()
            .filter(|c| available.split_whitespace().any(|a| a == **c))
            .map(|c| format!("+{c}"))
            .collect();
        std::fs::write(&v2, wanted.join(" "))
            .map_err(|e| format!("enabling {} in {}: {e}", wanted.join(" "), group.display()))?;
    }
    Ok(group)
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        remove_with_runs(&self.pids);
        if let Some(memory) = self.memory.as_ref().filter(|m| **m != self.pids) {
            remove_with_runs(memory);
        }
    }
}

/// Removes a daemon's group and the (empty) run groups left in it.
fn remove_with_runs(group: &Path) {
    if let Ok(runs) = std::fs::read_dir(group) {
        for run in runs.flatten().filter(|e| e.path().is_dir()) {
            let _ = std::fs::remove_dir(run.path());
        }
    }
    let _ = std::fs::remove_dir(group);
}

/// Groups of daemons that are gone (killed before they could clean up).
fn sweep_stale(own: &Path) {
    let Ok(items) = std::fs::read_dir(own) else { return };
    for item in items.flatten() {
        let name = item.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("worldd-").and_then(|p| p.parse::<u32>().ok()) else { continue };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        remove_with_runs(&item.path());
    }
}

/// The directory of this process's own group in the hierarchy holding `controller`.
fn hierarchy(mountinfo: &str, membership: &str, controller: &str) -> Option<PathBuf> {
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let Some(mount_point) = left.split(' ').nth(4) else { continue };
        let mut r = right.split(' ');
        let (fstype, super_options) = (r.next().unwrap_or(""), r.nth(1).unwrap_or(""));
        let group = match fstype {
            "cgroup" if super_options.split(',').any(|o| o == controller) => membership.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
                controllers.split(',').any(|c| c == controller).then(|| path.to_string())
            }),
            "cgroup2" => {
                let controllers = std::fs::read_to_string(Path::new(mount_point).join("cgroup.controllers")).ok()?;
                if !controllers.split_whitespace().any(|c| c == controller) {
                    continue;
                }
                membership.lines().find_map(|l| l.strip_prefix("0::").map(String::from))
            }
            _ => continue,
        };
        if let Some(g) = group {
            return Some(Path::new(mount_point).join(g.trim_start_matches('/')));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v2_group_gives_its_runs_memory_only_if_it_passes_the_controller_down() {
        let dir = tempfile::tempdir().unwrap();
        assert!(passes_down(dir.path(), "memory"), "a v1 group has no subtree_control: its children have it");
        std::fs::write(dir.path().join("cgroup.subtree_control"), "pids\n").unwrap();
        assert!(!passes_down(dir.path(), "memory") && passes_down(dir.path(), "pids"));
        std::fs::write(dir.path().join("cgroup.subtree_control"), "memory pids\n").unwrap();
        assert!(passes_down(dir.path(), "memory"));
    }

    #[test]
    fn the_pids_and_memory_hierarchies_are_found_in_a_v1_hybrid() {
        let mountinfo = "\
25 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
";
        let membership = "8:pids:/svc/a\n4:memory:/x\n0::/\n";
        assert_eq!(hierarchy(mountinfo, membership, "pids"), Some(PathBuf::from("/sys/fs/cgroup/pids/svc/a")));
        assert_eq!(hierarchy(mountinfo, membership, "memory"), Some(PathBuf::from("/sys/fs/cgroup/memory/x")));
        assert_eq!(hierarchy("25 1 254:0 / / rw - ext4 /dev/vda rw\n", membership, "pids"), None);
    }
}
