//! What the kernel counts as written for the store's own writes. Operators
//! read `/proc/<pid>/io` (iotop, container metrics) to see what a daemon costs
//! the disk; if the store's files sat in the page cache as large folios, every
//! 4 KiB page dirtied would be counted as the whole folio (up to 2 MiB), and a
//! commit of under a kilobyte of log would show as hundreds of KiB written.
//! One test in its own binary: `/proc/self/io` counts the whole process.

mod common;

use common::*;
use world_store::*;

/// Far above what a commit writes (a log page, its share of a checkpoint),
/// far below what a single large folio dirtied would count.
const WRITTEN_PER_COMMIT_MAX: u64 = 32 << 10;
const COMMITS: usize = 300;

fn written() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    io.lines().find_map(|l| l.strip_prefix("write_bytes: ")).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// Bytes counted per invocation commit over `COMMITS` of them.
fn written_per_commit(store: &Store, f: Ref, round: &str) -> u64 {
    let before = written();
    for i in 0..COMMITS {
        begin_and_commit(store, &task(&format!("{round}-{i}")), f, format!("{round}-{i}").as_bytes());
    }
    (written() - before) / COMMITS as u64
}

#[test]
fn a_commit_is_counted_as_the_pages_it_writes_not_whole_folios() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.db");
    let (store, f) = echo_store(&path, StoreOptions::default());
    let fresh = written_per_commit(&store, f, "fresh");
    drop(store);
    // Reopened, the log and the database have been read back: the case
    // where readahead would have filled the cache with large folios.
    let (store, _) = Store::open(&path, 2).unwrap();
    let reopened = written_per_commit(&store, f, "reopened");
    assert!(
        fresh <= WRITTEN_PER_COMMIT_MAX && reopened <= WRITTEN_PER_COMMIT_MAX,
        "bytes counted as written per commit: {fresh} on a new store, {reopened} after reopening (at most {WRITTEN_PER_COMMIT_MAX})"
    );
    assert_verifies(&store);
}
