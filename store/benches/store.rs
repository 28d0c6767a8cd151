//! Store benchmark, one run prints everything:
//! `cargo bench -p world-store --bench store`
//!
//! 1. The disk's raw rate: append 4 KiB + `fdatasync` in a file beside the store.
//! 2. Durable commits of one log entry each, with 1, 8 and 64 concurrent committers.
//!    The measured write is `Op::CommitInvocation` (objects + world row + log entry +
//!    task committed, in one group-committed, fsynced transaction): it rebases onto
//!    whatever head it finds, so concurrent committers never conflict, which is how
//!    the coordinator commits. The tasks are begun beforehand (not timed). A single
//!    committer's REST commit (`Op::CommitWorld`) is shown for reference.
//! 3. `verify` throughput over a store holding 256 MiB of payloads, against the
//!    single-core sha256 rate of the same payloads measured in the same run.
//!
//! Set `WORLD_BENCH_DIR` to put the store on another file system (default: the
//! system temp dir). Every phase is bounded by a count and a time. A trailing
//! argument `commits` or `verify` runs only that part (for profiling).

use sha2::{Digest, Sha256};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use world_store::verify::{Options, verify};
use world_store::*;

#[path = "common/disk.rs"]
mod disk;
use disk::Written;

const FSYNC_N: usize = 500;
const PHASE_TIME_MAX: Duration = Duration::from_secs(6);
const VERIFY_BYTES: usize = 256 << 20;
/// Payload sizes of the verify stores. 64 KiB is the headline. Up to store
/// format 7 payloads were redb rows, and a 64 KiB one (with its key and header)
/// took a 128 KiB page, read and zero-filled whole, while 63 KiB fitted a 64 KiB
/// page; in the payload file the two read alike, which the pair shows.
const VERIFY_SHAPES: [(usize, &str); 2] = [(64 << 10, "64 KiB"), (63 << 10, "63 KiB*")];
const VERIFY_RUNS: usize = 3;

struct Row {
    name: String,
    n: usize,
    per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    per_batch: Option<f64>,
}

fn percentiles(mut lat: Vec<Duration>) -> (f64, f64) {
    lat.sort_unstable();
    let at = |q: f64| {
        lat.get(((lat.len() as f64 * q) as usize).min(lat.len().saturating_sub(1))).map(|d| d.as_secs_f64() * 1e3)
    };
    (at(0.50).unwrap_or(0.0), at(0.99).unwrap_or(0.0))
}

fn raw_fsync(dir: &Path) -> Row {
    let path = dir.join("fsync-probe");
    let mut f = OpenOptions::new().create(true).truncate(true).write(true).open(&path).unwrap();
    let block = vec![0x5au8; 4096];
    let mut lat = Vec::with_capacity(FSYNC_N);
    let start = Instant::now();
    while lat.len() < FSYNC_N && start.elapsed() < PHASE_TIME_MAX {
        let t = Instant::now();
        f.write_all(&block).unwrap();
        f.sync_data().unwrap();
        lat.push(t.elapsed());
    }
    let wall = start.elapsed();
    drop(f);
    std::fs::remove_file(&path).unwrap();
    let n = lat.len();
    let (p50_ms, p99_ms) = percentiles(lat);
    Row {
        name: "raw append 4 KiB + fdatasync".into(),
        n,
        per_sec: n as f64 / wall.as_secs_f64(),
        p50_ms,
        p99_ms,
        per_batch: None,
    }
}

fn rest_commit(head: Option<&World>, content: &str) -> RestCommit {
    let transition = NewObject::derived("world/rest-transition/v1", "bench", content.as_bytes().to_vec());
    let state_root = Ref::of(content.as_bytes());
    RestCommit {
        request_digest: Ref::of(content.as_bytes()),
        ..RestCommit::next(head, transition, state_root, Ref::of(b"fn"), Ref::of(b"interp"), 1, "bench")
    }
}

/// A store with a genesis world and a registry; returns the registered transitionFn.
fn setup(path: &Path) -> (Store, Ref) {
    let (store, _) = Store::open(path, 1).unwrap();
    store.call(Op::CommitWorld(rest_commit(None, "genesis"))).unwrap();
    let source = NewObject::derived("world/transition-source/v1", "bench", b"echo".to_vec());
    let registry = NewObject::derived("world/transition-registry/v1", "bench", b"{\"r\":1}".to_vec());
    let f = source.hash;
    let publish = RegistryPublish {
        name: "world/transition-registry/v1".into(),
        expected: None,
        head: registry.hash,
        objects: vec![source, registry],
        entries: vec![("tools.echo".into(), f)],
    };
    store.call(Op::PublishRegistry(publish)).unwrap();
    (store, f)
}

/// Submits every op without waiting, then waits for all: group-committed setup.
fn pipelined(store: &Store, ops: impl IntoIterator<Item = Op>) {
    let (tx, rx) = mpsc::channel();
    let mut n = 0;
    for op in ops {
        let tx = tx.clone();
        store.submit(
            op,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        n += 1;
    }
    for _ in 0..n {
        rx.recv().unwrap().expect("a setup write succeeds");
    }
}

fn key(prefix: &str, i: usize) -> TaskKey {
    TaskKey { surface: Surface::Mcp, episode: "bench".into(), task_id: format!("{prefix}-{i}") }
}

fn invocation(task: TaskKey, f: Ref) -> InvocationCommit {
    let inv = task.invocation_id();
    let output = NewObject::derived("world/invocation-output/v1", "coordinator:mcp", format!("out {inv}").into_bytes());
    let record = NewObject::derived("world/invocation-record/v1", "coordinator:mcp", format!("rec {inv}").into_bytes());
    InvocationCommit {
        task,
        registry: "world/transition-registry/v1".into(),
        transition_id: "tools.echo".into(),
        transition_fn: f,
        interpreter: f,
        semantics_epoch: 1,
        written_by: "coordinator:mcp".into(),
        transition_ref: record.hash,
        state_root: output.hash,
        objects: vec![output, record],
        effects: vec![],
        at: 1,
    }
}

fn invocation_commits(store: &Arc<Store>, dir: &Path, f: Ref, committers: usize, total: usize) -> Row {
    let prefix = format!("c{committers}");
    for chunk in (0..total).collect::<Vec<_>>().chunks(BATCH_MAX) {
        pipelined(
            store,
            chunk.iter().map(|&i| Op::BeginTask {
                task: key(&prefix, i),
                request_digest: Ref::of(b"d"),
                at: 1,
                transition: "tools.echo".into(),
                context: None,
                message_id: None,
            }),
        );
    }
    let (batches0, requests0) = store.writer_stats();
    let (apply0, wal0, commit0) = store.writer_time();
    let io0 = Written::now("self", dir);
    let barrier = Arc::new(Barrier::new(committers + 1));
    let per_thread = total / committers;
    let threads: Vec<_> = (0..committers)
        .map(|t| {
            let (store, barrier, prefix) = (store.clone(), barrier.clone(), prefix.clone());
            std::thread::spawn(move || {
                let mut lat = Vec::with_capacity(per_thread);
                barrier.wait();
                let deadline = Instant::now() + PHASE_TIME_MAX;
                for i in 0..per_thread {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let op = Op::CommitInvocation(invocation(key(&prefix, t * per_thread + i), f));
                    let start = Instant::now();
                    match store.call(op) {
                        Ok(Reply::Committed(_)) => lat.push(start.elapsed()),
                        other => panic!("commit failed: {other:?}"),
                    }
                }
                lat
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let lat: Vec<Duration> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let wall = start.elapsed();
    let (batches1, requests1) = store.writer_stats();
    let (apply1, wal1, commit1) = store.writer_time();
    let batches = (batches1 - batches0).max(1) as f64;
    eprintln!(
        "  {committers} committer(s): the writer spent {:.0} us/batch applying, {:.0} waiting for the log's write and sync, {:.0} in redb's commit; {} KiB written per commit (this process / the device)",
        (apply1 - apply0).as_secs_f64() * 1e6 / batches,
        (wal1 - wal0).as_secs_f64() * 1e6 / batches,
        (commit1 - commit0).as_secs_f64() * 1e6 / batches,
        Written::now("self", dir).since(io0).per(lat.len())
    );
    let n = lat.len();
    let (p50_ms, p99_ms) = percentiles(lat);
    Row {
        name: format!("invocation commit, {committers} committer{}", if committers == 1 { "" } else { "s" }),
        n,
        per_sec: n as f64 / wall.as_secs_f64(),
        p50_ms,
        p99_ms,
        per_batch: Some((requests1 - requests0) as f64 / (batches1 - batches0).max(1) as f64),
    }
}

fn rest_commits(store: &Store, total: usize) -> Row {
    let (batches0, requests0) = store.writer_stats();
    let mut lat = Vec::with_capacity(total);
    let start = Instant::now();
    while lat.len() < total && start.elapsed() < PHASE_TIME_MAX {
        let head = store.snapshot().unwrap().head_world().unwrap();
        let c = rest_commit(head.as_ref(), &format!("rest {}", lat.len()));
        let t = Instant::now();
        store.call(Op::CommitWorld(c)).unwrap();
        lat.push(t.elapsed());
    }
    let wall = start.elapsed();
    let (batches1, requests1) = store.writer_stats();
    let n = lat.len();
    let (p50_ms, p99_ms) = percentiles(lat);
    Row {
        name: "REST commit, 1 committer".into(),
        n,
        per_sec: n as f64 / wall.as_secs_f64(),
        p50_ms,
        p99_ms,
        per_batch: Some((requests1 - requests0) as f64 / (batches1 - batches0).max(1) as f64),
    }
}

/// Distinct pseudo-random payloads (xorshift), cheap to make.
fn payloads(size: usize) -> Vec<Vec<u8>> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..VERIFY_BYTES / size)
        .map(|_| {
            let mut p = Vec::with_capacity(size);
            while p.len() < size {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                p.extend_from_slice(&x.to_le_bytes());
            }
            p.truncate(size);
            p
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn sha256_one_core(payloads: &[Vec<u8>]) -> f64 {
    let bytes: usize = payloads.iter().map(Vec::len).sum();
    let runs = (0..VERIFY_RUNS)
        .map(|_| {
            let start = Instant::now();
            let mut acc = 0u8;
            for p in payloads {
                acc ^= Sha256::digest(p)[0];
            }
            std::hint::black_box(acc);
            mb_per_s(bytes, start.elapsed())
        })
        .collect();
    median(runs)
}

/// Median MB/s of `verify` with `threads` (0 = all cores), each run on a fresh read-only open.
fn verify_rate(path: &Path, threads: usize, bytes: usize) -> (f64, u64) {
    let mut objects = 0;
    let runs = (0..VERIFY_RUNS)
        .map(|_| {
            // The open is timed too, as `worldd verify` pays it.
            let start = Instant::now();
            let store = ReadOnlyStore::open(path).unwrap();
            let report = verify(&store.snapshot().unwrap(), &Options { threads, progress: None });
            let elapsed = start.elapsed();
            assert!(report.is_clean(), "{:#?}", report.faults);
            assert_eq!(report.counts.payload_bytes, bytes as u64);
            objects = report.counts.objects;
            mb_per_s(report.counts.payload_bytes as usize, elapsed)
        })
        .collect();
    (median(runs), objects)
}

fn print_rows(rows: &[Row], fsync_rate: f64) {
    println!(
        "{:<34} {:>6} {:>10} {:>8} {:>8} {:>9} {:>8}",
        "phase", "n", "per sec", "p50 ms", "p99 ms", "req/batch", "x fsync"
    );
    for r in rows {
        let batch = r.per_batch.map(|b| format!("{b:.1}")).unwrap_or_else(|| "-".into());
        println!(
            "{:<34} {:>6} {:>10.0} {:>8.3} {:>8.3} {:>9} {:>8.2}",
            r.name,
            r.n,
            r.per_sec,
            r.p50_ms,
            r.p99_ms,
            batch,
            r.per_sec / fsync_rate
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument picks one part.
    let only: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let runs = |part: &str| only.as_deref().is_none_or(|o| o == part);
    let base: PathBuf = std::env::var_os("WORLD_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(&base).unwrap();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("world-store benchmark: {cores} cores, store in {}", dir.path().display());
    println!();

    if runs("commits") {
        commit_phases(dir.path());
    }
    if runs("verify") {
        verify_phase(dir.path());
    }
}

fn commit_phases(dir: &Path) {
    let fsync = raw_fsync(dir);
    let fsync_rate = fsync.per_sec;
    let (store, f) = setup(&dir.join("commits.db"));
    let store = Arc::new(store);
    let mut rows = vec![fsync, rest_commits(&store, 1000)];
    for (committers, total) in [(1, 1000), (8, 4000), (64, 16_000)] {
        rows.push(invocation_commits(&store, dir, f, committers, total));
    }
    print_rows(&rows, fsync_rate);
    let single = rows[2].per_sec;
    let sixty_four = rows[4].per_sec;
    println!();
    println!(
        "64 committers / 1 committer: {:.1}x (target >= 10x: {})",
        sixty_four / single,
        if sixty_four >= 10.0 * single { "met" } else { "NOT met" }
    );
    let report = verify(&store.snapshot().unwrap(), &Options::default());
    assert!(report.is_clean(), "the commit store must verify: {:#?}", report.faults);
    println!();
}

fn verify_phase(dir: &Path) {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!(
        "verify over {} MiB of payloads (median of {VERIFY_RUNS}, each timed from a fresh read-only open)",
        VERIFY_BYTES >> 20
    );
    println!("{:<34} {:>7} {:>8} {:>10}", "phase", "objects", "MB/s", "x sha256");
    let mut headline = None;
    for (size, label) in VERIFY_SHAPES {
        let payloads = payloads(size);
        let bytes: usize = payloads.iter().map(Vec::len).sum();
        let verify_path = dir.join(format!("verify-{size}.db"));
        {
            let (store, _) = Store::open(&verify_path, 1).unwrap();
            let objects = payloads.iter().map(|p| NewObject::derived("world/blob/v1", "bench", p.clone()));
            let objects: Vec<NewObject> = objects.collect();
            pipelined(&store, objects.chunks(16).map(|c| Op::PutObjects(c.to_vec())));
        }
        let sha = sha256_one_core(&payloads);
        let (all, objects) = verify_rate(&verify_path, 0, bytes);
        let (one, _) = verify_rate(&verify_path, 1, bytes);
        std::fs::remove_file(&verify_path).unwrap();
        println!("{:<34} {:>7} {:>8.0} {:>10.2}", format!("sha256, 1 core (sha2), {label}"), objects, sha, 1.0);
        println!("{:<34} {:>7} {:>8.0} {:>10.2}", format!("verify, {cores} threads, {label}"), objects, all, all / sha);
        println!("{:<34} {:>7} {:>8.0} {:>10.2}", format!("verify, 1 thread, {label}"), objects, one, one / sha);
        headline.get_or_insert(all / sha);
    }
    let ratio = headline.unwrap_or(0.0);
    println!("* 63 KiB payloads fitted a 64 KiB redb page when payloads were rows; 64 KiB ones took 128 KiB");
    println!();
    println!(
        "verify / single-core sha256 ({}): {ratio:.2}x (target >= 1.5x: {})",
        VERIFY_SHAPES[0].1,
        if ratio >= 1.5 { "met" } else { "NOT met" }
    );
}
