//! The disk quota of each episode's worktree.
//!
//! A worktree's usage (the blocks of everything beneath it, hard links once,
//! not crossing into other filesystems) is measured by one walk the first
//! time the daemon needs it, then kept by the writes World sees: a builtin
//! write or edit adds its exact change; a command's run adds what its
//! processes wrote to storage (an upper bound: rewrites and deletions are not
//! subtracted) and is measured again in the background, off the call's path.
//! A measurement that overlapped a later write is dropped (a generation
//! counter), so the ledger never forgets a write.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An episode's worktree may hold this much (`serve --worktree-quota-mib`).
pub const WORKTREE_QUOTA_BYTES: u64 = 4 << 30;
/// The most entries one measurement visits; a larger worktree is refused.
pub const MEASURE_ENTRIES_MAX: u64 = 2_000_000;
/// How a size is charged: in whole blocks, as the filesystem does.
const BLOCK: u64 = 4096;

#[derive(Debug)]
pub struct Quotas {
    limit: u64,
    ledgers: Mutex<HashMap<PathBuf, Ledger>>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Ledger {
    bytes: u64,
    /// Moves with every write the ledger is told of.
    generation: u64,
    /// A background measurement is running.
    measuring: bool,
}

impl Default for Quotas {
    fn default() -> Quotas {
        Quotas::new(WORKTREE_QUOTA_BYTES)
    }
}

impl Quotas {
    pub fn new(limit: u64) -> Quotas {
        Quotas { limit, ledgers: Mutex::new(HashMap::new()) }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    fn ledgers(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Ledger>> {
        self.ledgers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The worktree's usage in bytes: measured on first use, kept since.
    pub fn usage(&self, dir: &Path) -> Result<u64, String> {
        if let Some(l) = self.ledgers().get(dir) {
            return Ok(l.bytes);
        }
        let bytes = measure(dir)?;
        Ok(self.ledgers().entry(dir.to_path_buf()).or_insert(Ledger { bytes, ..Ledger::default() }).bytes)
    }

    /// What the worktree may still grow by.
    pub fn room(&self, dir: &Path) -> Result<u64, String> {
        Ok(self.limit.saturating_sub(self.usage(dir)?))
    }

    /// A write the daemon made or a run's writes: the usage moved by `delta`.
    /// A worktree not measured yet is left so: its first use measures it,
    /// this write included.
    pub fn changed(&self, dir: &Path, delta: i64) {
        if let Some(l) = self.ledgers().get_mut(dir) {
            l.bytes = l.bytes.saturating_add_signed(delta);
            l.generation += 1;
        }
    }

    /// Measures the worktree now and keeps the figure: at the quota, the
    /// ledger's upper bounds (rewrites, deletions) must not refuse a worktree
    /// that has room.
    pub fn remeasure_now(&self, dir: &Path) -> Result<u64, String> {
        let bytes = measure(dir)?;
        let mut ledgers = self.ledgers();
        let l = ledgers.entry(dir.to_path_buf()).or_default();
        l.bytes = bytes;
        l.generation += 1;
        Ok(self.limit.saturating_sub(bytes))
    }

    /// Measures the worktree again on the blocking pool; the result replaces
    /// the ledger's figure only if no write was told of meanwhile.
    pub fn remeasure_later(self: &Arc<Self>, dir: &Path) {
        let generation = {
            let mut ledgers = self.ledgers();
            // An unmeasured worktree is measured at its first use, never read as empty meanwhile.
            let Some(l) = ledgers.get_mut(dir).filter(|l| !l.measuring) else { return };
            l.measuring = true;
            l.generation
        };
        let (quotas, dir) = (self.clone(), dir.to_path_buf());
        tokio::task::spawn_blocking(move || {
            let measured = measure(&dir);
            let mut ledgers = quotas.ledgers();
            let l = ledgers.entry(dir).or_default();
            l.measuring = false;
            match measured {
                Ok(bytes) if l.generation == generation => l.bytes = bytes,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "measuring a worktree"),
            }
        });
    }
}

/// The blocks a file of `len` bytes takes, once written.
pub fn charged(len: u64) -> u64 {
    len.div_ceil(BLOCK).saturating_mul(BLOCK)
}

/// The bytes a file takes now: its allocated blocks (a sparse file takes
/// fewer than its length says).
pub fn allocated(meta: &std::fs::Metadata) -> u64 {
    meta.blocks().saturating_mul(512)
}

/// One walk: the allocated bytes of every entry beneath `dir`, hard links
/// once, symbolic links not followed, other filesystems not entered.
pub fn measure(dir: &Path) -> Result<u64, String> {
    let root = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut seen_links = std::collections::HashSet::new();
    let (mut bytes, mut entries) = (0u64, 0u64);
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let items = match std::fs::read_dir(&d) {
            Ok(items) => items,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: {e}", d.display())),
        };
        for item in items {
            let item = item.map_err(|e| format!("{}: {e}", d.display()))?;
            entries += 1;
            if entries > MEASURE_ENTRIES_MAX {
                return Err(format!("{} holds more than {MEASURE_ENTRIES_MAX} entries", dir.display()));
            }
            // An entry that cannot be read fails the measurement (the ledger
            // keeps its figure) rather than counting as empty.
            let meta = match item.path().symlink_metadata() {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("{}: {e}", item.path().display())),
            };
            if meta.dev() != root.dev() || (meta.nlink() > 1 && !meta.is_dir() && !seen_links.insert(meta.ino())) {
                continue;
            }
            bytes = bytes.saturating_add(allocated(&meta));
            if meta.is_dir() {
                pending.push(item.path());
            }
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measurement_counts_blocks_once_per_file_and_follows_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::write(d.join("a/b/big"), vec![7u8; 1 << 20]).unwrap();
        std::fs::hard_link(d.join("a/b/big"), d.join("a/again")).unwrap();
        std::os::unix::fs::symlink("/usr", d.join("a/usr")).unwrap();
        let bytes = measure(d).unwrap();
        assert!((1 << 20..(1 << 20) + 64 * 1024).contains(&bytes), "{bytes}");
    }

    #[test]
    fn the_ledger_keeps_every_write_and_a_stale_measurement_never_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let q = Quotas::new(10 << 20);
        assert!(q.usage(dir.path()).unwrap() < 64 * 1024);
        q.changed(dir.path(), 3 << 20);
        let untouched = tempfile::tempdir().unwrap();
        q.changed(untouched.path(), -(1 << 20));
        assert!(q.usage(untouched.path()).is_ok(), "a write to an unmeasured worktree leaves it to be measured");
        assert!(q.room(dir.path()).unwrap() <= 7 << 20);
        q.changed(dir.path(), 20 << 20);
        assert_eq!(q.room(dir.path()).unwrap(), 0, "past the quota there is no room");
        q.changed(dir.path(), -(30 << 20));
        assert_eq!(q.usage(dir.path()).unwrap(), 0, "never below zero");
    }
}
