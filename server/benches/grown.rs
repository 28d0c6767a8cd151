//! `cargo bench -p world-server --bench grown`: does a durable call cost the
//! same on a store holding a million calls as on a fresh one?
//!
//! First the soak load (`support::soak`: 8 clients over four episodes' MCP
//! sessions, even calls `tools_decho`, odd ones `ailang-read` with its one
//! `Workspace.Read` effect, every call durable) runs for `BENCH_SECS` on a
//! fresh store. Then a second store is grown: `worldd` serves it long enough
//! for the registry, the sessions, the genesis and two real calls per episode;
//! then, the daemon stopped, `GROWN_CALLS` calls are appended through the store
//! API, each written as the coordinator writes it (an echo: the task row and
//! the commit in one request; a read: the task row with the effect's intent,
//! then its outcome with the commit), their objects spelled as the real
//! calls' (checked: the real calls' records are built again from their parts)
//! and their transitions, sessions and budgets taken from them, thousands of
//! requests in flight so that the writer group-commits them; the rate and the
//! store's size are printed every tenth. Last, `worldd` serves the grown store
//! and the same load runs for the same time.
//!
//! Each run is printed in stretches of `BENCH_INTERVAL_SECS` (default 10): a
//! daemon that has just opened a large store fills its page cache in the
//! first. A table then sets the two stores side by side, with the ratio
//! grown/fresh: calls/s, p50 (the whole run, the first and the last stretch),
//! p99, bytes written per call by the daemon and by the device, the daemon's
//! CPU per call, resident memory at most, and the disk the file took per call.
//! Figures, never assertions.
//!
//! `GROWN_CALLS` (default 1,000,000) calls to grow by; `BENCH_SECS` (default
//! 30) of load on each store; `GROWN_SERVE_ARGS` adds `serve` flags (on both);
//! `GROWN_STORE=/path/world.db` serves a store grown before (kept with
//! `BENCH_KEEP_STORE=1`, which leaves both stores' directories behind and
//! prints their paths) where it lies instead of growing one: its episodes'
//! worktrees are made afresh, and the load's calls are added to it.

mod support;

use rand::RngCore;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use support::*;
use world_store::canonical::{self, FixedObject};
use world_store::*;

const CLIENTS: usize = 8;
const EPISODES: usize = 4;
/// Requests kept queued to the store's writer while growing: a few of its
/// batches (`BATCH_MAX`), well inside its queue (`WRITE_QUEUE_MAX`).
const IN_FLIGHT: usize = 8192;
const REGISTRY: &str = "world/transition-registry/v1";
const PROVENANCE: &str = "coordinator:mcp";
const BROKER: &str = "host/broker";

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// One registered transition as a committed entry names it.
#[derive(Clone)]
struct Transition {
    id: String,
    f: Ref,
    interpreter: Ref,
    epoch: u64,
}

/// What a real `ailang-read` wrote that every read repeats: its input, plan
/// and result objects are the same for every read of `bench.txt`.
struct Read {
    transition: Transition,
    input: NewObject,
    plan: NewObject,
    result: NewObject,
    effect_id: String,
    effect: String,
    scope: String,
    cost: u64,
    /// The effect's payload as its request carries it (canonical JSON).
    payload: Vec<u8>,
}

/// One episode of the grown store: its session, and the budget it has spent.
struct Episode {
    name: String,
    credential: Ref,
    grant_budget: u64,
    spent: u64,
}

/// What the real calls wrote, read back from the store, which the synthetic
/// calls copy.
struct Real {
    echo: Transition,
    read: Read,
    episodes: Vec<Episode>,
}

/// The soak load's two tools, one real call of each per episode, over MCP.
fn real_calls(addr: &str, tokens: &[String]) {
    let agent = agent();
    for (e, token) in tokens.iter().enumerate() {
        for n in [0, 1] {
            let req = soak_call(addr, token, n, false);
            let b = req.headers.iter().fold(agent.post(&req.url), |b, (k, v)| b.header(*k, v));
            let reply = b.send(&req.body[..]).ok().and_then(|mut r| r.body_mut().read_to_vec().ok());
            let ok = reply.is_some_and(|body| soak_succeeded(&req.key, &body).is_some());
            assert!(ok, "a real {} in episode {e} failed", req.key);
        }
    }
}

fn object(snap: &Snapshot, r: &Ref) -> NewObject {
    let meta = snap.object_meta(r).unwrap().unwrap_or_else(|| panic!("object {r} is missing"));
    NewObject::derived(&meta.semantic_id, &meta.provenance, snap.payload(r).unwrap().unwrap())
}

fn json_of(o: &NewObject) -> Value {
    serde_json::from_slice(&o.payload).unwrap_or_else(|e| panic!("{} is not JSON: {e}", o.semantic_id))
}

fn ref_in(v: &Value, key: &str) -> Ref {
    v[key].as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no ref `{key}` in {v}"))
}

/// Reads back what the real calls of every episode wrote; each one's
/// invocation record (and a read's effect record) is built again here from
/// its parts, so a daemon that spells them differently stops the bench
/// rather than growing a store it would not write.
fn read_real(snap: &Snapshot, episodes: &[String]) -> Real {
    let (mut echo, mut read, mut grown) = (None, None, vec![]);
    for name in episodes {
        let mut credential = None;
        for (_, task, row) in snap.episode_calls(name, 0, 16).unwrap() {
            let entry = snap.log_entry(row.committed.expect("a real call committed").entry_index).unwrap().unwrap();
            let rec = json_of(&object(snap, &entry.transition_ref));
            let transition = Transition {
                id: row.transition.clone(),
                f: entry.header.transition_fn,
                interpreter: entry.header.interpreter,
                epoch: entry.header.semantics_epoch,
            };
            let input = object(snap, &ref_in(&rec, "input"));
            let journal = snap.journal_of(&task.invocation_id()).unwrap();
            let Some(item) = journal.first() else {
                let again = echo_objects(&transition, &task, &json_of(&input));
                assert_eq!(again[2].hash, entry.transition_ref, "a real echo is not spelled as grown.rs spells it");
                echo = Some(transition);
                continue;
            };
            let outcome = item.outcome.as_ref().expect("a real read's outcome");
            let request = object(snap, &item.intent.request_ref);
            let parsed = canonical::parse_request(&request.payload).expect("a real effect request");
            let r = Read {
                transition,
                input,
                plan: object(snap, &ref_in(&rec, "plan")),
                result: object(snap, &outcome.result_ref.expect("a real read's result")),
                effect_id: item.intent.effect_id.clone(),
                effect: item.intent.effect.clone(),
                scope: item.intent.scope.clone(),
                cost: item.intent.cost,
                payload: parsed.payload.to_vec(),
            };
            let debit = Debit { budget_before: item.intent.budget_before, budget_after: item.intent.budget_after };
            let [record, _, invocation] = read_objects(&r, &task, request.hash, debit);
            assert_eq!(
                Some(record.hash),
                outcome.record_ref,
                "a real effect record is not spelled as grown.rs spells it"
            );
            assert_eq!(invocation.hash, entry.transition_ref, "a real read is not spelled as grown.rs spells it");
            credential = item.intent.credential;
            read = Some(r);
        }
        let credential = credential.expect("a real read in every episode");
        let r = read.as_ref().unwrap();
        let session = snap.session(&credential).unwrap().expect("the read's session");
        let grant = Session::grant_for(&session.grants, &r.effect, &r.scope).expect("the read's grant");
        let spent = snap.spent(name, &r.effect, &r.scope).unwrap();
        grown.push(Episode { name: name.clone(), credential, grant_budget: grant.budget, spent });
    }
    Real { echo: echo.expect("a real echo"), read: read.expect("a real read"), episodes: grown }
}

/// A new MCP call's task key (its id drawn as the daemon draws one) and
/// request digest (`coordinator::admit::request_digest`).
fn new_task(episode: &str, transition: &str, args: &Value) -> (TaskKey, Ref) {
    let mut random = [0u8; 24];
    rand::rng().fill_bytes(&mut random);
    let moment = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let task_id = TaskKey::ordered_task_id(moment, &random);
    let task = TaskKey { surface: Surface::Mcp, episode: episode.into(), task_id };
    let digest = json!({"transition": transition, "arguments": args, "transitionFn": ""});
    (task, Ref::of(&canonical::to_vec(&digest)))
}

fn create(task: &TaskKey, digest: Ref, transition: &str, at: u64) -> Op {
    Op::CreateTask {
        task: task.clone(),
        request_digest: digest,
        at,
        transition: transition.into(),
        context: None,
        message_id: None,
        run: None,
    }
}

/// The committed output: the handler's fields and the `world` block
/// (`coordinator::commit::with_world`).
fn output(mut fields: Map<String, Value>, effects: Vec<Value>, plan: Option<Ref>) -> NewObject {
    fields.insert("world".into(), json!({"effects": effects, "plan": plan.map(|p| p.to_string())}));
    NewObject::derived("world/invocation-output/v1", PROVENANCE, canonical::to_vec(&Value::Object(fields)))
}

/// The invocation record (`coordinator::commit::invocation_record`): v2 when
/// the call planned effects.
fn invocation_record(
    task: &TaskKey,
    t: &Transition,
    input: &NewObject,
    output: &NewObject,
    effects: Option<(Ref, Ref)>,
) -> NewObject {
    let mut rec = FixedObject::new()
        .str("invocationId", &task.invocation_id())
        .str("episodeId", &task.episode)
        .str("skillId", &t.id)
        .str("transitionFn", &t.f.to_string())
        .str("interpreter", &t.interpreter.to_string())
        .uint("semanticsEpoch", t.epoch)
        .str("input", &input.hash.to_string())
        .str("output", &output.hash.to_string());
    let semantic = match effects {
        Some((plan, record)) => {
            rec = rec.str("plan", &plan.to_string()).value("effects", &json!([record.to_string()]));
            "world/invocation-record/v2"
        }
        None => "world/invocation-record/v1",
    };
    NewObject::derived(semantic, PROVENANCE, rec.finish())
}

fn commit(task: &TaskKey, t: &Transition, objects: Vec<NewObject>, effects: Vec<CallEffect>, at: u64) -> Op {
    let (record, output) = (objects[objects.len() - 1].hash, objects[objects.len() - 2].hash);
    Op::CommitInvocation(InvocationCommit {
        task: task.clone(),
        registry: REGISTRY.into(),
        transition_id: t.id.clone(),
        transition_fn: t.f,
        interpreter: t.interpreter,
        semantics_epoch: t.epoch,
        written_by: PROVENANCE.into(),
        transition_ref: record,
        state_root: output,
        objects,
        effects,
        at,
    })
}

/// What a `tools_decho` of `args` commits: input, output, invocation record.
fn echo_objects(t: &Transition, task: &TaskKey, args: &Value) -> Vec<NewObject> {
    let input = NewObject::derived("world/invocation-input/v1", PROVENANCE, canonical::to_vec(args));
    let mut fields = Map::new();
    fields.insert("echo".into(), args.clone());
    let output = output(fields, vec![], None);
    let record = invocation_record(task, t, &input, &output, None);
    vec![input, output, record]
}

/// The `j`-th `tools_decho` call: its task row and commit, one request.
/// Each argument serves 8 calls, as the soak's 8 clients each send every
/// value once (the same input and output: objects are stored once); negative,
/// so that nothing the measured load sends (0, 2, 4, …) is stored already.
fn echo_call(t: &Transition, episode: &str, j: u64, at: u64) -> Op {
    let args = json!({"soak": -1 - (j / CLIENTS as u64) as i64});
    let (task, digest) = new_task(episode, &t.id, &args);
    let objects = echo_objects(t, &task, &args);
    Op::Sequence(vec![create(&task, digest, &t.id, at), commit(&task, t, objects, vec![], at)])
}

/// The effect record of a read that went `ok` (`effects::Record::to_bytes`).
fn effect_record(r: &Read, task: &TaskKey, request: Ref, debit: Debit) -> NewObject {
    let payload = FixedObject::new()
        .str("effect", &r.effect)
        .str("scope", &r.scope)
        .uint("cost", r.cost)
        .uint("budgetBefore", debit.budget_before)
        .uint("budgetAfter", debit.budget_after)
        .bool("allowed", true)
        .bool("failed", false)
        .str("denial", "")
        .str("requestRef", &request.to_string())
        .str("resultRef", &r.result.hash.to_string())
        .str("invocationId", &task.invocation_id())
        .uint("ordinal", 0)
        .str("effectId", &r.effect_id)
        .finish();
    NewObject::derived("world/effect-record/v2", BROKER, payload)
}

/// What a read that went `ok` writes beside its request: its effect record,
/// the committed output and the invocation record.
fn read_objects(r: &Read, task: &TaskKey, request: Ref, debit: Debit) -> [NewObject; 3] {
    let record = effect_record(r, task, request, debit);
    let Value::Object(fields) = json_of(&r.result) else { panic!("a read's result is an object") };
    let status = json!({"id": r.effect_id, "status": "ok", "record": record.hash.to_string()});
    let output = output(fields, vec![status], Some(r.plan.hash));
    let invocation = invocation_record(task, &r.transition, &r.input, &output, Some((r.plan.hash, record.hash)));
    [record, output, invocation]
}

/// An `ailang-read` call, as two requests: the task row with the effect's
/// intent and debit, then its outcome with the commit.
fn read_call(r: &Read, ep: &mut Episode, at: u64) -> [Op; 2] {
    let t = &r.transition;
    let (task, digest) = new_task(&ep.name, &t.id, &json_of(&r.input));
    let remaining = ep.grant_budget - ep.spent;
    let debit = Debit { budget_before: remaining, budget_after: remaining - r.cost };
    ep.spent += r.cost;
    let request = NewObject::derived(
        "world/effect-request/v1",
        BROKER,
        canonical::request_bytes(&r.effect, &r.scope, r.cost, at, &r.payload),
    );
    let intent = IntentRequest {
        task: task.clone(),
        ordinal: 0,
        effect_id: r.effect_id.clone(),
        effect: r.effect.clone(),
        scope: r.scope.clone(),
        cost: r.cost,
        grant_budget: ep.grant_budget,
        request: request.clone(),
        at,
        approval: None,
        credential: Some(ep.credential),
    };
    let [record, output, invocation] = read_objects(r, &task, request.hash, debit);
    let told = CallEffect {
        id: r.effect_id.clone(),
        effect: r.effect.clone(),
        scope: r.scope.clone(),
        cost: r.cost,
        status: EffectStatus::Ok,
        denial: None,
        budget_before: debit.budget_before,
        budget_after: debit.budget_after,
        record: Some(record.hash),
        request: Some(request.hash),
    };
    let outcome = OutcomeRequest {
        task: task.clone(),
        ordinal: 0,
        status: OutcomeStatus::Ok,
        record,
        result: Some(r.result.clone()),
        at,
    };
    let objects = vec![r.input.clone(), r.plan.clone(), output, invocation];
    [
        Op::Sequence(vec![create(&task, digest, &t.id, at), Op::RecordIntent(intent)]),
        Op::Sequence(vec![Op::RecordOutcome(outcome), commit(&task, t, objects, vec![told], at)]),
    ]
}

/// Queues `op` to the writer, first waiting for an answer whenever
/// `IN_FLIGHT` requests are queued; every answer must be a success.
struct Pipeline<'s> {
    store: &'s Store,
    tx: mpsc::Sender<Result<Reply, WriteError>>,
    rx: mpsc::Receiver<Result<Reply, WriteError>>,
    queued: usize,
}

impl<'s> Pipeline<'s> {
    fn new(store: &'s Store) -> Pipeline<'s> {
        let (tx, rx) = mpsc::channel();
        Pipeline { store, tx, rx, queued: 0 }
    }

    fn submit(&mut self, op: Op) {
        if self.queued == IN_FLIGHT {
            self.settle();
        }
        let tx = self.tx.clone();
        self.store.submit(op, Box::new(move |r| drop(tx.send(r))));
        self.queued += 1;
    }

    fn settle(&mut self) {
        match self.rx.recv().unwrap() {
            Ok(Reply::Sequence(r)) if r.iter().all(Result::is_ok) => self.queued -= 1,
            other => panic!("a grown call was refused: {other:?}"),
        }
    }

    fn drain(&mut self) {
        while self.queued > 0 {
            self.settle();
        }
    }
}

/// Appends `calls` calls to the store at `db`, one episode after another and,
/// in each, an echo then a read in turn, printing the rate and the store's
/// size every tenth; returns the seconds it took, the store closed.
fn grow(db: &Path, episodes: &[String], calls: u64) -> f64 {
    let started = Instant::now();
    let (store, _) = Store::open(db, now()).expect("open the store to grow");
    let mut real = read_real(&store.snapshot().unwrap(), episodes);
    let mut pipeline = Pipeline::new(&store);
    let tenth = (calls / 10).max(1);
    let mut last = (Instant::now(), 0u64);
    for n in 0..calls {
        let (at, e) = (now(), n as usize % EPISODES);
        if (n / EPISODES as u64).is_multiple_of(2) {
            // The echoes before this one: half of every round of the episodes.
            let j = n / (2 * EPISODES as u64) * EPISODES as u64 + n % EPISODES as u64;
            pipeline.submit(echo_call(&real.echo, &real.episodes[e].name, j, at));
        } else {
            read_call(&real.read, &mut real.episodes[e], at).into_iter().for_each(|op| pipeline.submit(op));
        }
        if (n + 1).is_multiple_of(tenth) || n + 1 == calls {
            // Counted once written, not once queued.
            pipeline.drain();
            let sizes = FileSizes::of(db);
            let rate = (n + 1 - last.1) as f64 / last.0.elapsed().as_secs_f64();
            println!(
                "grown {:>9} calls in {:>6.1} s: {rate:>5.0} calls/s this stretch; file {:.0} MiB, {:.0} MiB on disk, log {:.0} MiB",
                n + 1,
                started.elapsed().as_secs_f64(),
                mib(sizes.file_bytes),
                mib(sizes.on_disk()),
                mib(sizes.wal_bytes)
            );
            last = (Instant::now(), n + 1);
        }
    }
    drop(pipeline);
    drop(store);
    started.elapsed().as_secs_f64()
}

/// Serves the store of `setup`, set up first if `fresh` (the builtin
/// registry, the genesis); a new session per episode either way.
fn serve(setup: &Setup, args: &[&str], fresh: bool) -> (Daemon, Vec<String>) {
    let daemon = setup.start(args);
    if fresh {
        setup.publish_builtin();
    }
    let tokens: Vec<String> = setup.episodes.iter().map(|ep| setup.mint(ep)).collect();
    if fresh {
        genesis(&daemon.addr, &tokens[0]);
    }
    (daemon, tokens)
}

/// A store grown in `setup` by `calls` calls after the real ones.
fn grown_store(setup: &Setup, args: &[&str], calls: u64) {
    let (daemon, tokens) = serve(setup, args, true);
    real_calls(&daemon.addr, &tokens);
    daemon.stop();
    let secs = grow(&setup.db, &setup.episodes, calls);
    let sizes = FileSizes::of(&setup.db);
    println!(
        "grew {calls} calls in {secs:.1} s ({:.0} calls/s, the store closed): file {:.0} MiB, {:.0} MiB on disk = {:.0} B per call",
        calls as f64 / secs,
        mib(sizes.file_bytes),
        mib(sizes.on_disk()),
        sizes.on_disk() as f64 / calls.max(1) as f64
    );
}

/// What one store came to under the load.
struct Measured {
    entries: u64,
    on_disk: u64,
    /// Calls/s and p50 ms of the first and the last stretch.
    first: (f64, f64),
    last: (f64, f64),
    soaked: Soaked,
}

/// The soak load on the store of `setup` for `secs`, in stretches of
/// `interval` (each printed: a store that has just been opened warms its
/// cache in the first).
fn measure(setup: &Setup, args: &[&str], fresh: bool, secs: f64, interval: f64) -> Measured {
    let (daemon, tokens) = serve(setup, args, fresh);
    let (entries, on_disk) = (log_len(&daemon.addr), FileSizes::of(&setup.db).on_disk());
    println!("{entries} entries, {:.0} MiB on disk; load {}", mib(on_disk), loadavg());
    let (mut stretches, mut elapsed) = (vec![], 0.0);
    while elapsed < secs {
        let s = soak(&daemon, &setup.db, &tokens, CLIENTS, interval.min(secs - elapsed), false);
        elapsed += s.row.secs;
        println!(
            "  {elapsed:>4.0} s: {:>5.0} calls/s, {} errors, p50 {:.2} ms, p99 {:.2} ms, {} KiB written per call, {:.2} ms CPU per call, {:.0} checkpoints ({:.0} ms per s)",
            s.row.rate(),
            s.row.errors,
            s.row.p50(),
            s.row.p99(),
            s.written.per(s.row.calls),
            1e3 * s.cpu_secs / s.row.calls.max(1) as f64,
            s.writer.checkpoints,
            s.writer.checkpoint_ms_per_s(s.row.secs)
        );
        stretches.push(s);
    }
    daemon.stop();
    let pace = |s: &Soaked| (s.row.rate(), s.row.p50());
    let (first, last) = (pace(&stretches[0]), pace(&stretches[stretches.len() - 1]));
    Measured { entries, on_disk, first, last, soaked: Soaked::merged(stretches) }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string()
}

/// The table's rows: what, decimals, and whether a ratio means anything.
const ROWS: [(&str, usize, bool); 15] = [
    ("entries in the log at start", 0, false),
    ("MiB on disk at start", 0, false),
    ("calls/s", 0, true),
    ("calls/s, first stretch", 0, true),
    ("calls/s, last stretch", 0, true),
    ("p50 ms", 2, true),
    ("p50 ms, first stretch", 2, true),
    ("p50 ms, last stretch", 2, true),
    ("p99 ms", 2, true),
    ("written KiB per call (daemon)", 1, true),
    ("written KiB per call (device)", 1, true),
    ("daemon CPU ms per call", 2, true),
    ("resident memory MiB, at most", 1, true),
    ("on-disk growth B per call", 0, true),
    ("errors", 0, false),
];

/// One store's figures, in the order of `ROWS`.
fn figures(m: &Measured) -> [f64; 15] {
    let (row, written) = (&m.soaked.row, m.soaked.written);
    let per_call = |x: f64| x / row.calls.max(1) as f64;
    [
        m.entries as f64,
        mib(m.on_disk),
        row.rate(),
        m.first.0,
        m.last.0,
        row.p50(),
        m.first.1,
        m.last.1,
        row.p99(),
        per_call(written.process as f64 / 1024.0),
        written.device.map_or(f64::NAN, |d| per_call(d as f64 / 1024.0)),
        per_call(1e3 * m.soaked.cpu_secs),
        mib(m.soaked.peak_rss),
        m.soaked.disk_per_call(),
        row.errors as f64,
    ]
}

fn table(fresh: &Measured, grown: &Measured) {
    println!();
    println!("| {CLIENTS} clients, durable | fresh | grown | grown/fresh |");
    println!("|---|---:|---:|---:|");
    for ((what, digits, ratio), (f, g)) in ROWS.iter().zip(figures(fresh).into_iter().zip(figures(grown))) {
        let r = if *ratio { format!("{:.2}x", g / f) } else { String::new() };
        println!("| {what} | {f:.digits$} | {g:.digits$} | {r} |");
    }
}

fn main() {
    if !invoked_as_bench("grown") {
        return;
    }
    let calls: u64 = env_or("GROWN_CALLS", 1_000_000);
    let (secs, interval): (f64, f64) = (env_or("BENCH_SECS", 30.0), env_or("BENCH_INTERVAL_SECS", 10.0));
    let args = std::env::var("GROWN_SERVE_ARGS").unwrap_or_default();
    let args: Vec<&str> = args.split_whitespace().collect();
    println!(
        "# grown: {} ({} cores, load {}); {secs} s of {CLIENTS} clients over {EPISODES} episodes on each store, serve {args:?}",
        worldd_path().display(),
        cores(),
        loadavg()
    );
    let fresh = Setup::new(EPISODES);
    println!("fresh store {}", fresh.db.display());
    let fresh = measure(&fresh, &args, true, secs, interval);
    let mut grown = Setup::new(EPISODES);
    match std::env::var_os("GROWN_STORE") {
        // Served where it lies: a copy would come into the page cache in
        // large folios, and the daemon be charged whole folios for its writes.
        Some(db) => grown.db = db.into(),
        None => grown_store(&grown, &args, calls),
    }
    println!("grown store {}", grown.db.display());
    let grown = measure(&grown, &args, false, secs, interval);
    table(&fresh, &grown);
}
