//! The pids cgroup that bounds how many tasks one run may hold when the
//! daemon runs as root (where `RLIMIT_NPROC` is ignored). The daemon owns
//! `<its pids cgroup>/worldd-<pid>`; each run gets a child group there, made
//! and removed by its helper.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long removing a finished run's group may wait for its last tasks to be released.
const REMOVE_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub struct Cgroups {
    parent: PathBuf,
}

impl Cgroups {
    /// Finds the pids controller (cgroup v1 or v2) and makes the daemon's group in it.
    pub fn create() -> Result<Cgroups, String> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("mountinfo: {e}"))?;
        let membership = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let own = pids_hierarchy(&mountinfo, &membership)
            .ok_or("no pids cgroup controller is mounted (needed to bound a run's processes when running as root)")?;
        sweep_stale(&own);
        let parent = own.join(format!("worldd-{}", std::process::id()));
        let _ = std::fs::remove_dir(&parent);
        std::fs::create_dir(&parent).map_err(|e| format!("creating pids cgroup {}: {e}", parent.display()))?;
        // cgroup v2 passes the controller down only when asked to.
        let v2 = parent.join("cgroup.subtree_control");
        if v2.exists() {
            std::fs::write(&v2, "+pids").map_err(|e| format!("enabling pids in {}: {e}", parent.display()))?;
        }
        Ok(Cgroups { parent })
    }

    pub fn run(&self, name: &str) -> PathBuf {
        self.parent.join(name)
    }

    /// Removes a run's group once its tasks are gone (the helper normally has).
    pub async fn remove(&self, group: &Path) {
        let until = tokio::time::Instant::now() + REMOVE_WAIT;
        while group.exists() && std::fs::remove_dir(group).is_err() && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        remove_with_runs(&self.parent);
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

/// The directory of this process's own group in the pids hierarchy.
fn pids_hierarchy(mountinfo: &str, membership: &str) -> Option<PathBuf> {
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let Some(mount_point) = left.split(' ').nth(4) else { continue };
        let mut r = right.split(' ');
        let (fstype, super_options) = (r.next().unwrap_or(""), r.nth(1).unwrap_or(""));
        let group = match fstype {
            "cgroup" if super_options.split(',').any(|o| o == "pids") => membership.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
                controllers.split(',').any(|c| c == "pids").then(|| path.to_string())
            }),
            "cgroup2" => {
                let controllers = std::fs::read_to_string(Path::new(mount_point).join("cgroup.controllers")).ok()?;
                if !controllers.split_whitespace().any(|c| c == "pids") {
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
    fn the_pids_hierarchy_is_found_in_a_v1_hybrid() {
        let mountinfo = "\
25 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
";
        let membership = "8:pids:/svc/a\n4:memory:/x\n0::/\n";
        assert_eq!(pids_hierarchy(mountinfo, membership), Some(PathBuf::from("/sys/fs/cgroup/pids/svc/a")));
        assert_eq!(pids_hierarchy("25 1 254:0 / / rw - ext4 /dev/vda rw\n", membership), None);
    }
}
