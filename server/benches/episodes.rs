//! `cargo bench -p world-server --bench episodes`: what an episode's pages
//! cost as the episode grows. One store holds an episode of `BIG` calls and
//! one of `SMALL`, written through the store API with the ops the coordinator
//! writes for a committed `ailang-read` (`CreateTask`, then
//! `CommitInvocation` carrying the input, output, effect record and
//! invocation record, and the call's one effect); then the release `worldd`
//! serves it (see `support/mod.rs` for which binary). First one reader
//! follows `next` through every call of the big episode (their positions run
//! without a gap); then one client on one keep-alive connection measures, for
//! `BENCH_SECS` (default 3) per row, each request below on the big and the
//! small episode in turn (so that both meet the same moments of a noisy
//! machine):
//!
//! - `GET /v1/episodes/{ep}/calls?from=X&limit=100`, X drawn at random in the episode;
//! - `…/calls?from=X&limit=10`, X drawn where ten calls follow (the same page in both);
//! - the last page (`from` = the episode's last 100 calls);
//! - `GET /v1/episodes/{ep}` (the summary).
//!
//! `BENCH_ROUNDS` (default 3) runs the table that many times; the medians
//! over rounds of p50 and p99 are printed, with the ratio big/small. A page
//! should not cost more in a long episode than in a short one: every read is
//! an index range or one row.

mod support;

use rand::Rng;
use std::time::{Duration, Instant};
use support::*;
use world_store::*;

const BIG: u64 = 100_000;
const SMALL: u64 = 10;
const PAGE: u64 = 100;
/// Writes the builder keeps queued to the store's writer (group commits).
const IN_FLIGHT: usize = 512;
const REGISTRY: &str = "world/transition-registry/v1";
const PROVENANCE: &str = "coordinator:a2a";

/// One committed `ailang-read` call of `episode`, number `n`, as the coordinator writes it.
fn call(episode: &str, n: u64, at: u64, f: Ref, interp: Ref) -> Op {
    let task = TaskKey { surface: Surface::A2a, episode: episode.into(), task_id: format!("read-{n}") };
    let input = NewObject::derived("world/invocation-input/v1", PROVENANCE, b"{\"path\":\"bench.txt\"}".to_vec());
    let record = NewObject::derived(
        "world/effect-record/v2",
        "broker",
        format!("{{\"effect\":\"Workspace.Read\",\"invocationId\":\"{}\",\"ordinal\":0}}", task.invocation_id())
            .into_bytes(),
    );
    let out = format!(
        "{{\"ok\":true,\"content\":\"x\",\"world\":{{\"effects\":[{{\"id\":\"e1\",\"record\":\"{}\",\"status\":\"ok\"}}]}}}}",
        record.hash
    );
    let output = NewObject::derived("world/invocation-output/v1", PROVENANCE, out.into_bytes());
    let rec = format!(
        "{{\"invocationId\":\"{}\",\"transitionFn\":\"{f}\",\"interpreter\":\"{interp}\",\"input\":\"{}\",\"output\":\"{}\",\"effects\":[\"{}\"]}}",
        task.invocation_id(),
        input.hash,
        output.hash,
        record.hash
    );
    let invocation = NewObject::derived("world/invocation-record/v2", PROVENANCE, rec.into_bytes());
    let effect = CallEffect {
        id: "e1".into(),
        effect: "Workspace.Read".into(),
        scope: "worktree".into(),
        cost: 1,
        status: EffectStatus::Ok,
        denial: None,
        budget_before: BIG + SMALL - n,
        budget_after: BIG + SMALL - n - 1,
        record: Some(record.hash),
        request: Some(Ref::of(format!("request {n}").as_bytes())),
    };
    let commit = InvocationCommit {
        task: task.clone(),
        registry: REGISTRY.into(),
        transition_id: "ailang-read".into(),
        transition_fn: f,
        interpreter: interp,
        semantics_epoch: 1,
        written_by: PROVENANCE.into(),
        transition_ref: invocation.hash,
        state_root: output.hash,
        objects: vec![input, record, output, invocation],
        effects: vec![effect],
        at,
    };
    Op::Sequence(vec![
        Op::CreateTask {
            task,
            request_digest: Ref::of(format!("{episode} {n}").as_bytes()),
            at,
            transition: "ailang-read".into(),
            context: None,
            message_id: None,
            run: None,
        },
        Op::CommitInvocation(commit),
    ])
}

/// Writes the two episodes into a new store at `db` (genesis, a registry
/// naming `ailang-read`, then every call); returns the seconds it took.
fn build(db: &std::path::Path) -> f64 {
    let started = Instant::now();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let (store, _) = Store::open(db, now).expect("open the bench store");
    let goal = NewObject::derived("world/demo/genesis-goal", "bench", b"{\"goal\":\"episodes\"}".to_vec());
    store.call(Op::CommitWorld(RestCommit::genesis(goal, Ref::of(b"fn"), Ref::of(b"interp"), 1, "bench"))).unwrap();
    let source = NewObject::derived("world/transition-source/v1", "bench", b"builtin:ailang-read".to_vec());
    let interpreter = NewObject::derived("world/interpreter/v1", "bench", b"builtin".to_vec());
    let registry = NewObject::derived(REGISTRY, "bench", b"{\"episodes\":1}".to_vec());
    let (f, interp) = (source.hash, interpreter.hash);
    store
        .call(Op::PublishRegistry(RegistryPublish {
            name: REGISTRY.into(),
            expected: None,
            head: registry.hash,
            objects: vec![source, interpreter, registry],
            entries: vec![("ailang-read".into(), f)],
        }))
        .unwrap();
    // Ten calls a second for the big one, so that its activity spans its life.
    let start = now - BIG / 10 - 60;
    let calls = (0..BIG).map(|n| ("big", n, start + n / 10)).chain((0..SMALL).map(|n| ("small", n, now - SMALL + n)));
    let (tx, rx) = std::sync::mpsc::channel();
    let settle = |r: Result<Reply, WriteError>| match r {
        Ok(Reply::Sequence(r)) if r.iter().all(Result::is_ok) => {}
        other => panic!("a bench call was refused: {other:?}"),
    };
    let mut queued = 0;
    for (episode, n, at) in calls {
        if queued == IN_FLIGHT {
            settle(rx.recv().unwrap());
            queued -= 1;
        }
        let tx = tx.clone();
        store.submit(call(episode, n, at, f, interp), Box::new(move |r| tx.send(r).unwrap()));
        queued += 1;
    }
    for _ in 0..queued {
        settle(rx.recv().unwrap());
    }
    drop(store);
    started.elapsed().as_secs_f64()
}

#[derive(Clone, Copy)]
enum Kind {
    /// A page of calls from a random position.
    Random,
    /// Ten calls from a random position that has ten after it: pages of
    /// one size in both episodes (the small one's is its whole).
    RandomTen,
    /// The page of the episode's last calls.
    Last,
    Summary,
}

const KINDS: [(Kind, &str); 4] = [
    (Kind::Random, "calls?from=random&limit=100"),
    (Kind::RandomTen, "calls?from=random&limit=10"),
    (Kind::Last, "calls, the last page"),
    (Kind::Summary, "summary"),
];

/// The path of one request of `kind` on `episode` of `total` calls, and the
/// count its body must hold (calls on the page, or the episode's calls).
fn request(kind: Kind, episode: &str, total: u64) -> (String, u64) {
    match kind {
        Kind::Random => {
            let from = rand::rng().random_range(0..total);
            (format!("/v1/episodes/{episode}/calls?from={from}&limit={PAGE}"), (total - from).min(PAGE))
        }
        Kind::RandomTen => {
            let from = rand::rng().random_range(0..=total - SMALL);
            (format!("/v1/episodes/{episode}/calls?from={from}&limit={SMALL}"), SMALL)
        }
        Kind::Last => {
            (format!("/v1/episodes/{episode}/calls?from={}&limit={PAGE}", total.saturating_sub(PAGE)), total.min(PAGE))
        }
        Kind::Summary => (format!("/v1/episodes/{episode}"), total),
    }
}

/// The count a reply holds: the calls on a page, or a summary's `calls`.
fn count(body: &[u8]) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    match v.get("calls")? {
        serde_json::Value::Array(calls) => Some(calls.len() as u64),
        n => n.as_u64(),
    }
}

/// One client on one keep-alive connection, for `secs`: a request of `kind`
/// on each episode in turn, so that both meet the same moments of a noisy
/// machine. Every reply must hold what was asked. The latencies, sorted, by
/// episode.
fn alternate(addr: &str, kind: Kind, episodes: &[(&str, u64)], secs: f64) -> Vec<Vec<Duration>> {
    let agent = agent();
    let mut lat = vec![vec![]; episodes.len()];
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < deadline {
        for (e, (episode, total)) in episodes.iter().enumerate() {
            let (path, expected) = request(kind, episode, *total);
            let t0 = Instant::now();
            let mut reply = agent.get(&format!("http://{addr}{path}")).call().expect("GET");
            let body = reply.body_mut().with_config().limit(64 << 20).read_to_vec().expect("body");
            lat[e].push(t0.elapsed());
            assert_eq!(reply.status().as_u16(), 200, "{path}");
            assert_eq!(count(&body), Some(expected), "{path}: not the page asked for");
        }
    }
    for l in &mut lat {
        l.sort();
    }
    lat
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if !invoked_as_bench("episodes") {
        return;
    }
    let secs = row_secs();
    let rounds: usize = std::env::var("BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let setup = Setup::new(0);
    // `serve --workspace-root` needs the directory, though no call runs here.
    std::fs::create_dir_all(&setup.ws).unwrap();
    let built = build(&setup.db);
    println!(
        "# episode pages: {BIG} and {SMALL} calls written through the store API in {built:.1} s ({:.0} calls/s); \
         {} cores, {secs} s a row, {rounds} round(s)",
        (BIG + SMALL) as f64 / built,
        cores()
    );
    let daemon = setup.start(&[]);
    let addr = daemon.addr.as_str();
    // Every call of the big episode once, page by page as a reader follows
    // `next`: their positions run 0.. without a gap.
    let walked = Instant::now();
    let (mut from, a) = (Some(0u64), agent());
    let mut seen = 0u64;
    while let Some(f) = from {
        let url = format!("http://{addr}/v1/episodes/big/calls?from={f}&limit=500");
        let body = a.get(&url).call().unwrap().body_mut().with_config().limit(64 << 20).read_to_vec().unwrap();
        let page: serde_json::Value = serde_json::from_slice(&body).unwrap();
        for c in page["calls"].as_array().unwrap() {
            assert_eq!(c["position"], seen, "a gap in the positions");
            seen += 1;
        }
        from = page["next"].as_u64();
    }
    assert_eq!(seen, BIG);
    let store_mib = std::fs::metadata(&setup.db).map(|m| m.len()).unwrap_or(0) as f64 / f64::from(1u32 << 20);
    println!(
        "# the store: {store_mib:.0} MiB; every call of the big episode read once, 500 a page: {:.1} s",
        walked.elapsed().as_secs_f64()
    );
    let episodes = [("big", BIG), ("small", SMALL)];
    // [kind][episode]: the p50s and p99s of the rounds.
    let mut p50 = vec![vec![vec![]; episodes.len()]; KINDS.len()];
    let mut p99 = p50.clone();
    for round in 1..=rounds {
        for (k, (kind, what)) in KINDS.iter().enumerate() {
            let lat = alternate(addr, *kind, &episodes, secs);
            for (e, ((episode, total), lat)) in episodes.iter().zip(lat).enumerate() {
                let (median, tail) = (percentile(&lat, 0.5), percentile(&lat, 0.99));
                println!(
                    "round {round}  {:<48} {:>7} reqs  p50 {median:>6.3} ms  p99 {tail:>6.3} ms",
                    format!("{episode} ({total} calls): {what}"),
                    lat.len(),
                );
                p50[k][e].push(median);
                p99[k][e].push(tail);
            }
        }
    }
    println!();
    println!("| request | big p50 ms | big p99 ms | small p50 ms | small p99 ms | big/small p50 | big/small p99 |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (k, (_, what)) in KINDS.iter().enumerate() {
        let (b50, b99) = (median(p50[k][0].clone()), median(p99[k][0].clone()));
        let (s50, s99) = (median(p50[k][1].clone()), median(p99[k][1].clone()));
        println!("| {what} | {b50:.3} | {b99:.3} | {s50:.3} | {s99:.3} | {:.2} | {:.2} |", b50 / s50, b99 / s99);
    }
}
