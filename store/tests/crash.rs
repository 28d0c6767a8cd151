//! Crash test. A child process (this test binary, re-executed to run `child_loop`)
//! commits from several threads: REST commits, and tasks that journal budgeted
//! intents and outcomes and then commit an invocation or end. After every write the
//! store acknowledged (returned `Ok`), the child appends a line to an ack file and
//! fsyncs it. The parent kills the child with SIGKILL after a random 30-180 ms
//! (each round draws how often the child checkpoints, from constantly to rarely,
//! so kills land before, during and after checkpoints); in a third of the rounds
//! it then starts a child that only opens the store (replaying the write-ahead
//! log and recovering) and kills that one too, 0-20 ms in. Then it reopens the
//! store and checks, for `ROUNDS` rounds:
//!
//! - `verify` is clean. It covers "nothing unacknowledged is half-present": every
//!   entry has its world and objects, tasks point at real entries, receipts at real
//!   worlds, no outcome lacks its intent, and spend equals the sum of intents;
//! - every acknowledged write is present exactly as acknowledged (log entry, world,
//!   receipt, task state, intent, outcome), and recovery left nothing started/open;
//! - the log only grew: every entry seen after an earlier round is unchanged;
//! - recovery is idempotent: a second open reports nothing to recover.
//!
//! The same runs on PostgreSQL, over fewer rounds: each child is a node on one
//! database, with a short lease; once its lease has lapsed, a new node opens
//! (its sweep resolves the killed node's calls in flight) and the parent checks
//! the same invariants. The embedded engine's checkpoints and replay have no
//! counterpart there.
//!
//! Set `WORLD_STORE_CRASH_SEED` to replay a run; the seed is printed on failure.

mod common;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use world_store::postgres::{PgOptions, PgStore};
use world_store::verify::{Options, verify};
use world_store::*;

const DB_ENV: &str = "WORLD_STORE_CRASH_DB";
const PG_URL_ENV: &str = "WORLD_STORE_CRASH_PG_URL";
const ACK_ENV: &str = "WORLD_STORE_CRASH_ACK";
const CHILD_SEED_ENV: &str = "WORLD_STORE_CRASH_CHILD_SEED";
const ROUND_ENV: &str = "WORLD_STORE_CRASH_ROUND";
const SEED_ENV: &str = "WORLD_STORE_CRASH_SEED";

const CHECKPOINT_ENV: &str = "WORLD_STORE_CRASH_CHECKPOINT_BYTES";
const RECOVER_ONLY_ENV: &str = "WORLD_STORE_CRASH_RECOVER_ONLY";

const ROUNDS: u64 = 100;
/// Only turns a hang into a failure; all `ROUNDS` must run.
const TIME_BOUND: Duration = Duration::from_secs(300);
/// Log bytes between checkpoints, drawn per round: checkpoints all the time,
/// now and then, or (the default) rarely within a round.
const CHECKPOINT_CHOICES: [u64; 3] = [16 << 10, 256 << 10, CHECKPOINT_WAL_BYTES];
/// The child gives up by itself after this long, in case its parent died.
const CHILD_LIFETIME_MAX: Duration = Duration::from_secs(20);

/// Fewer rounds on PostgreSQL: each waits for the killed node's lease to lapse.
const PG_ROUNDS: u64 = 8;
const PG_TIME_BOUND: Duration = Duration::from_secs(240);
/// The killed node's lease: the parent waits this long, at most, before the
/// node it opens may resolve the killed node's calls.
const PG_CHILD_LEASE: Duration = Duration::from_secs(2);
/// A node takes longer than a file to get going (connections, registration,
/// a sweep): the kill lands this many ms in, plus up to `PG_KILL_SPREAD_MS`.
const PG_KILL_AFTER_MS: u64 = 150;
const PG_KILL_SPREAD_MS: u64 = 600;

const REGISTRY: &str = "world/transition-registry/v1";
const TRANSITION: &str = "tools.echo";
const EFFECT: &str = "Workspace.Write";
const SCOPE: &str = "worktree";
const GRANT_BUDGET: u64 = 1 << 40;

/// xorshift64*: enough randomness for timings and choices, reproducible by seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn registry_objects() -> (NewObject, NewObject) {
    let source = NewObject::derived("world/transition-source/v1", "crash-test", b"echo".to_vec());
    let head = NewObject::derived("world/transition-registry/v1", "crash-test", b"{\"registry\":\"crash\"}".to_vec());
    (source, head)
}

/// The next REST commit on top of `head` (or a genesis), carrying fresh content.
fn next_rest_commit(head: Option<&World>, content: &str, invocation_id: Option<String>) -> RestCommit {
    let transition = NewObject::derived("world/rest-transition/v1", "crash-test", content.as_bytes().to_vec());
    let state_root = Ref::of(format!("state {content}").as_bytes());
    RestCommit {
        invocation_id,
        request_digest: Ref::of(content.as_bytes()),
        ..RestCommit::next(head, transition, state_root, Ref::of(b"fn"), Ref::of(b"interp"), 1, "crash-test")
    }
}

// ------------------------------------------------------------------ child ----

struct Acks(Mutex<File>);

impl Acks {
    /// Appends one acknowledged write, durably, before the writer goes on.
    fn ack(&self, line: String) {
        let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let ok = f.write_all(format!("{line}\n").as_bytes()).and_then(|()| f.sync_data());
        if let Err(e) = ok {
            fail(&format!("ack file: {e}"));
        }
    }
}

/// An unexpected result in the child: exit at once with a code the parent reports.
fn fail(what: &str) -> ! {
    eprintln!("crash child: {what}");
    std::process::exit(3)
}

fn rest_loop(store: &dyn WorldStore, acks: &Acks, rng: &mut Rng, tag: &str, deadline: Instant) {
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let content = format!("{tag} {n}");
        let id = (rng.below(3) == 0).then(|| format!("rest:{tag}-{n}").replace(' ', "-"));
        loop {
            if let Some(id) = &id {
                let intent = Op::RestIntent { invocation_id: id.clone(), request_digest: Ref::of(content.as_bytes()) };
                match store.call(intent) {
                    Ok(Reply::RestIntent(RestIntentOutcome::Journaled)) => {}
                    other => fail(&format!("rest intent {id}: {other:?}")),
                }
            }
            let head =
                store.snapshot().and_then(|s| s.head_world()).unwrap_or_else(|e| fail(&format!("read head: {e}")));
            let c = next_rest_commit(head.as_ref(), &content, id.clone());
            let (index, hash, world) = (c.entry.header.entry_index, c.entry.entry_hash, c.next_world.world_ref);
            match store.call(Op::CommitWorld(c)) {
                Ok(Reply::Selected(w)) if w == world => {
                    acks.ack(format!("rest {index} {hash} {world} {}", id.as_deref().unwrap_or("-")));
                    break;
                }
                Err(WriteError::HeadConflict { .. }) => continue,
                other => fail(&format!("rest commit {content}: {other:?}")),
            }
        }
    }
}

fn task_loop(store: &dyn WorldStore, acks: &Acks, rng: &mut Rng, tag: &str, deadline: Instant, transition_fn: Ref) {
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let key = TaskKey {
            surface: if n.is_multiple_of(2) { Surface::A2a } else { Surface::Mcp },
            episode: format!("ep{}", rng.below(2)),
            task_id: format!("{tag}-{n}"),
        };
        let inv = key.invocation_id();
        let begin = Op::begin_task(key.clone(), Ref::of(inv.as_bytes()), now());
        match store.call(begin) {
            Ok(Reply::Begun(BeginOutcome::Started)) => acks.ack(format!("begin {inv}")),
            other => fail(&format!("begin {inv}: {other:?}")),
        }
        for ordinal in 0..rng.below(3) as u32 {
            let cost = 1 + rng.below(3);
            let request = NewObject::derived(
                "world/effect-request/v1",
                "host/broker",
                format!("req {inv}#{ordinal}").into_bytes(),
            );
            let intent = IntentRequest {
                task: key.clone(),
                ordinal,
                effect_id: format!("{inv}#{ordinal}"),
                effect: EFFECT.into(),
                scope: SCOPE.into(),
                cost,
                grant_budget: GRANT_BUDGET,
                request,
                at: now(),
                approval: None,
                credential: None,
            };
            match store.call(Op::RecordIntent(intent)) {
                Ok(Reply::Debited(_)) => acks.ack(format!("intent {inv} {ordinal} {} {cost}", key.episode)),
                other => fail(&format!("intent {inv}#{ordinal}: {other:?}")),
            }
            if rng.below(5) == 0 {
                continue; // no outcome: the effect's fate is unknown
            }
            let outcome = OutcomeRequest {
                task: key.clone(),
                ordinal,
                status: OutcomeStatus::Ok,
                record: NewObject::derived(
                    "world/effect-record/v1",
                    "host/broker",
                    format!("rec {inv}#{ordinal}").into_bytes(),
                ),
                result: Some(NewObject::derived(
                    "world/effect-result/v1",
                    "host/broker",
                    format!("res {inv}#{ordinal}").into_bytes(),
                )),
                at: now(),
            };
            match store.call(Op::RecordOutcome(outcome)) {
                Ok(Reply::Done) => acks.ack(format!("outcome {inv} {ordinal}")),
                other => fail(&format!("outcome {inv}#{ordinal}: {other:?}")),
            }
        }
        if rng.below(5) == 0 {
            match store.call(Op::EndTask { task: key.clone(), state: TaskState::NotCommitted, at: 0 }) {
                Ok(Reply::Done) => acks.ack(format!("end {inv}")),
                other => fail(&format!("end {inv}: {other:?}")),
            }
            continue;
        }
        let provenance = format!("coordinator:{}", key.surface.as_str());
        let output = NewObject::derived("world/invocation-output/v1", &provenance, format!("out {inv}").into_bytes());
        let record = NewObject::derived("world/invocation-record/v1", &provenance, format!("rec {inv}").into_bytes());
        let commit = InvocationCommit {
            task: key.clone(),
            registry: REGISTRY.into(),
            transition_id: TRANSITION.into(),
            transition_fn,
            interpreter: transition_fn,
            semantics_epoch: 1,
            written_by: provenance,
            transition_ref: record.hash,
            state_root: output.hash,
            objects: vec![output, record],
            effects: vec![],
            at: now(),
        };
        match store.call(Op::CommitInvocation(commit)) {
            Ok(Reply::Committed(c)) => {
                acks.ack(format!("commit {inv} {} {} {}", c.entry_index, c.entry_hash, c.world_ref))
            }
            other => fail(&format!("commit {inv}: {other:?}")),
        }
    }
}

/// Where the crash test's world lives.
#[derive(Clone, Debug)]
enum Target {
    Embedded(PathBuf),
    /// A database of this test's own.
    Postgres(String),
}

/// The child's store: on PostgreSQL a node with a short lease, so that the
/// parent need not wait long for another node to take over its calls.
fn open_child(target: &Target, checkpoint_bytes: u64) -> Arc<dyn WorldStore> {
    let open = |e: OpenError| -> ! { fail(&format!("open: {e}")) };
    match target {
        Target::Embedded(db) => {
            let opts = StoreOptions { checkpoint_wal_bytes: Some(checkpoint_bytes), ..StoreOptions::default() };
            Arc::new(Store::open_with(db, now(), opts).unwrap_or_else(|e| open(e)).0)
        }
        Target::Postgres(url) => {
            let opts = PgOptions { lease: Some(PG_CHILD_LEASE), ..PgOptions::default() };
            Arc::new(PgStore::open(url, now(), opts).unwrap_or_else(|e| open(e)).0)
        }
    }
}

fn child(target: &Target, ack: &Path, seed: u64, round: u64, checkpoint_bytes: u64) {
    let deadline = Instant::now() + CHILD_LIFETIME_MAX;
    let store = open_child(target, checkpoint_bytes);
    let file =
        OpenOptions::new().create(true).append(true).open(ack).unwrap_or_else(|e| fail(&format!("ack file: {e}")));
    let acks = Acks(Mutex::new(file));
    let (source, head) = registry_objects();
    let transition_fn = source.hash;
    let publish = RegistryPublish {
        name: REGISTRY.into(),
        expected: None,
        head: head.hash,
        objects: vec![source, head],
        entries: vec![(TRANSITION.into(), transition_fn)],
    };
    match store.call(Op::PublishRegistry(publish)) {
        Ok(Reply::Published(_)) => {}
        other => fail(&format!("publish: {other:?}")),
    }
    if store.snapshot().and_then(|s| s.selected_head()).unwrap_or_else(|e| fail(&format!("read: {e}"))).is_none() {
        let genesis = next_rest_commit(None, "genesis", None);
        let (hash, world) = (genesis.entry.entry_hash, genesis.next_world.world_ref);
        match store.call(Op::CommitWorld(genesis)) {
            Ok(Reply::Selected(_)) => acks.ack(format!("rest 0 {hash} {world} -")),
            other => fail(&format!("genesis: {other:?}")),
        }
    }
    let acks = Arc::new(acks);
    let threads: Vec<_> = (0..5u64)
        .map(|t| {
            let (store, acks) = (store.clone(), acks.clone());
            let mut rng = Rng::new(seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let tag = format!("r{round}t{t}");
            std::thread::spawn(move || {
                if t < 2 {
                    rest_loop(store.as_ref(), &acks, &mut rng, &tag, deadline);
                } else {
                    task_loop(store.as_ref(), &acks, &mut rng, &tag, deadline, transition_fn);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// The child half: does nothing unless the parent set the environment.
#[test]
#[ignore = "the child half of the crash test; the parent runs it with the environment set"]
fn child_loop() {
    let Some(ack) = std::env::var_os(ACK_ENV) else { return };
    let target = match (std::env::var_os(DB_ENV), std::env::var(PG_URL_ENV)) {
        (Some(db), _) => Target::Embedded(PathBuf::from(db)),
        (None, Ok(url)) => Target::Postgres(url),
        (None, Err(_)) => return,
    };
    if let (Target::Embedded(db), Some(_)) = (&target, std::env::var_os(RECOVER_ONLY_ENV)) {
        // Only the open (replay and recovery), to be killed while it runs.
        let _store = Store::open(db, now()).unwrap_or_else(|e| fail(&format!("open: {e}")));
        std::thread::sleep(CHILD_LIFETIME_MAX);
        return;
    }
    let num = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(1u64);
    let checkpoint_bytes = num(CHECKPOINT_ENV);
    child(&target, Path::new(&ack), num(CHILD_SEED_ENV), num(ROUND_ENV), checkpoint_bytes);
}

// ----------------------------------------------------------------- parent ----

#[derive(Default)]
struct Acked {
    rest: Vec<(u64, Ref, Ref, Option<String>)>,
    begun: Vec<String>,
    /// (invocation, ordinal) → (episode, cost)
    intents: BTreeMap<(String, u32), (String, u64)>,
    outcomes: Vec<(String, u32)>,
    commits: Vec<(String, u64, Ref, Ref)>,
    ended: Vec<String>,
}

fn parse_acks(path: &Path) -> Acked {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut acked = Acked::default();
    // A line without its newline was cut by the kill; its write was acknowledged
    // but the ack itself is not, so it is not counted.
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    // The next round appends to the same file: its first line must not be
    // glued to the cut one.
    if complete.len() != text.len() {
        std::fs::write(path, complete).expect("drop the cut ack line");
    }
    let r = |s: &str| Ref::parse(s).unwrap_or_else(|e| panic!("ack {s}: {e}"));
    for line in complete.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["rest", i, h, w, id] => {
                acked.rest.push((i.parse().unwrap(), r(h), r(w), (*id != "-").then(|| id.to_string())));
            }
            ["begin", inv] => acked.begun.push(inv.to_string()),
            ["intent", inv, ord, ep, cost] => {
                acked.intents.insert((inv.to_string(), ord.parse().unwrap()), (ep.to_string(), cost.parse().unwrap()));
            }
            ["outcome", inv, ord] => acked.outcomes.push((inv.to_string(), ord.parse().unwrap())),
            ["commit", inv, i, h, w] => acked.commits.push((inv.to_string(), i.parse().unwrap(), r(h), r(w))),
            ["end", inv] => acked.ended.push(inv.to_string()),
            _ => panic!("unreadable ack line {line:?}"),
        }
    }
    acked
}

fn task_of(snap: &Snapshot, inv: &str) -> Task {
    let key = TaskKey::from_invocation_id(inv).unwrap_or_else(|| panic!("bad invocation id {inv}"));
    snap.task(&key).unwrap().unwrap_or_else(|| panic!("acknowledged task {inv} is missing"))
}

/// Every acknowledged write is present as acknowledged; recovery left nothing open.
fn check_acknowledged(snap: &Snapshot, acked: &Acked) {
    for (index, hash, world, id) in &acked.rest {
        let entry = snap.log_entry(*index).unwrap().unwrap_or_else(|| panic!("acknowledged entry {index} is missing"));
        assert_eq!(entry.entry_hash, *hash, "entry {index} is not the acknowledged one");
        assert!(snap.world(world).unwrap().is_some(), "acknowledged world {world} is missing");
        if let Some(id) = id {
            assert_eq!(snap.receipt_state(id).unwrap(), (ReceiptState::Resolved, Some(*world)), "receipt {id}");
        }
    }
    for inv in &acked.begun {
        let task = task_of(snap, inv);
        assert_ne!(task.state, TaskState::Started, "task {inv} is still started after recovery");
    }
    let mut journals: BTreeMap<&str, Vec<JournalItem>> = BTreeMap::new();
    for (inv, _) in acked.intents.keys() {
        journals.entry(inv).or_insert_with(|| snap.journal_of(inv).unwrap());
    }
    let mut acked_spend: BTreeMap<&str, u64> = BTreeMap::new();
    for ((inv, ordinal), (episode, cost)) in &acked.intents {
        let item = journals[inv.as_str()].iter().find(|i| i.ordinal == *ordinal);
        let item = item.unwrap_or_else(|| panic!("acknowledged intent {inv}#{ordinal} is missing"));
        assert_eq!(item.intent.cost, *cost, "intent {inv}#{ordinal}");
        assert!(item.outcome.is_some(), "intent {inv}#{ordinal} has no outcome after recovery");
        *acked_spend.entry(episode).or_default() += cost;
    }
    for (episode, acked_cost) in acked_spend {
        let spent = snap.spent(episode, EFFECT, SCOPE).unwrap();
        assert!(spent >= acked_cost, "episode {episode} spent {spent}, less than the {acked_cost} acknowledged");
    }
    for (inv, ordinal) in &acked.outcomes {
        let item = journals[inv.as_str()].iter().find(|i| i.ordinal == *ordinal).expect("intent checked above");
        let status = item.outcome.as_ref().map(|o| o.status);
        assert_eq!(status, Some(OutcomeStatus::Ok), "acknowledged outcome {inv}#{ordinal}");
    }
    for (inv, index, hash, world) in &acked.commits {
        let task = task_of(snap, inv);
        assert_eq!(task.state, TaskState::Committed, "task {inv}");
        let c = task.committed.unwrap_or_else(|| panic!("task {inv} has no result"));
        assert_eq!((c.entry_index, c.entry_hash, c.world_ref), (*index, *hash, *world), "task {inv}");
        let entry = snap.log_entry(*index).unwrap().unwrap_or_else(|| panic!("acknowledged entry {index} is missing"));
        assert_eq!(entry.entry_hash, *hash, "entry {index} of task {inv}");
    }
    for inv in &acked.ended {
        assert_eq!(task_of(snap, inv).state, TaskState::NotCommitted, "task {inv}");
    }
}

fn all_entry_hashes(snap: &Snapshot) -> Vec<Ref> {
    let mut hashes = vec![];
    loop {
        let page = snap.log_range(hashes.len() as u64, PAGE_MAX).unwrap();
        if page.is_empty() {
            return hashes;
        }
        hashes.extend(page.iter().map(|e| e.entry_hash));
    }
}

/// Opens the store after a crash, as the daemon would: on PostgreSQL a new
/// node, whose sweep resolves the calls of nodes whose lease lapsed.
fn reopen(target: &Target) -> (Box<dyn WorldStore>, RecoveryReport) {
    match target {
        Target::Embedded(db) => {
            let (store, report) = Store::open(db, now()).expect("reopen after the crash");
            (Box::new(store), report)
        }
        Target::Postgres(url) => {
            let (store, report) = PgStore::open(url, now(), PgOptions::default()).expect("open a node after the crash");
            (Box::new(store), report)
        }
    }
}

/// Waits until no node holds a lease on the database at `url` any more (the
/// killed child's lapses `PG_CHILD_LEASE` after its last renewal).
fn wait_for_leases_to_lapse(url: &str) {
    let mut admin = ::postgres::Client::connect(url, ::postgres::NoTls).expect("connect to the test database");
    let deadline = Instant::now() + 5 * PG_CHILD_LEASE;
    loop {
        let held: i64 = admin.query_one("SELECT count(*) FROM nodes WHERE lease_until >= now()", &[]).unwrap().get(0);
        if held == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "a killed node's lease never lapsed");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What one round saw: acknowledged commits so far, and calls the reopen resolved.
struct Round {
    acked_commits: usize,
    resolved: usize,
}

fn run_round(target: &Target, dir: &Path, round: u64, rng: &mut Rng, seen: &mut Vec<Ref>) -> Round {
    let ack = dir.join("acks.txt");
    let stderr_path = dir.join(format!("child-{round}.stderr"));
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["child_loop", "--exact", "--nocapture", "--test-threads=1", "--ignored"])
        .env(ACK_ENV, &ack)
        .env(CHILD_SEED_ENV, rng.next().to_string())
        .env(ROUND_ENV, round.to_string())
        .stdout(Stdio::null())
        .stderr(File::create(&stderr_path).unwrap());
    let delay = match target {
        Target::Embedded(db) => {
            command.env(DB_ENV, db).env(CHECKPOINT_ENV, CHECKPOINT_CHOICES[rng.below(3) as usize].to_string());
            30 + rng.below(151)
        }
        Target::Postgres(url) => {
            command.env_remove(DB_ENV).env(PG_URL_ENV, url);
            PG_KILL_AFTER_MS + rng.below(PG_KILL_SPREAD_MS + 1)
        }
    };
    let mut child = command.spawn().expect("re-execute the test binary as the child");
    std::thread::sleep(Duration::from_millis(delay));
    child.kill().expect("SIGKILL the child");
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert_eq!(
        status.signal(),
        Some(9),
        "round {round}: the child ended by itself ({status}) before the kill:\n{stderr}"
    );

    match target {
        Target::Embedded(db) => {
            if rng.below(3) == 0 {
                kill_during_recovery(db, rng.below(20));
            }
        }
        Target::Postgres(url) => wait_for_leases_to_lapse(url),
    }
    let (store, recovery) = reopen(target);
    let snap = store.snapshot().unwrap();
    let report = verify(&snap, &Options::default());
    assert!(report.is_clean(), "round {round} (killed after {delay} ms): verify found {:#?}", report.faults);
    let acked = parse_acks(&ack);
    check_acknowledged(&snap, &acked);
    let hashes = all_entry_hashes(&snap);
    assert!(hashes.len() >= seen.len(), "round {round}: the log shrank from {} to {}", seen.len(), hashes.len());
    assert_eq!(hashes[..seen.len()], seen[..], "round {round}: an entry that existed before the crash changed");
    *seen = hashes;
    drop(snap);
    // On PostgreSQL a clean drop gives the lease up at once: the next node's
    // sweep would take up whatever the first left unresolved.
    drop(store);
    let (_store, again) = reopen(target);
    assert!(again.is_empty(), "round {round}: recovery was not idempotent: {again:?}");
    Round {
        acked_commits: acked.rest.len() + acked.commits.len(),
        resolved: recovery.tasks.len() + recovery.indeterminate_effects.len(),
    }
}

/// Opens the store in a child, which replays the log and recovers, and kills
/// it `after_ms` into that: recovery itself must survive a crash.
fn kill_during_recovery(db: &Path, after_ms: u64) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_loop", "--exact", "--nocapture", "--test-threads=1", "--ignored"])
        .env(DB_ENV, db)
        .env(ACK_ENV, "/dev/null")
        .env(RECOVER_ONLY_ENV, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("re-execute the test binary as the recovering child");
    std::thread::sleep(Duration::from_millis(after_ms));
    child.kill().expect("SIGKILL the recovering child");
    let _ = child.wait();
}

/// Runs rounds of kill, reopen and check on `target` until `rounds` are done.
fn crash_rounds(target: &Target, dir: &Path, rounds_wanted: u64, time_bound: Duration) {
    let seed = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7));
    eprintln!("crash test seed {seed} on {target:?} (set {SEED_ENV}={seed} to replay)");
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let mut seen = vec![];
    let mut rounds = 0;
    let mut committed = 0;
    let mut resolved = 0;
    while rounds < rounds_wanted && started.elapsed() < time_bound {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_round(target, dir, rounds, &mut rng, &mut seen)
        }));
        match result {
            Ok(round) => {
                committed = round.acked_commits;
                resolved += round.resolved;
            }
            Err(p) => {
                eprintln!("crash test failed in round {rounds}; seed {seed} (set {SEED_ENV}={seed} to replay)");
                std::panic::resume_unwind(p);
            }
        }
        rounds += 1;
    }
    eprintln!(
        "{rounds} rounds, {committed} acknowledged commits, {} log entries, {resolved} calls resolved by reopening, {:?}",
        seen.len(),
        started.elapsed()
    );
    assert!(rounds >= rounds_wanted, "only {rounds} of {rounds_wanted} rounds fit in {time_bound:?}");
    assert!(committed > 0, "no commit was ever acknowledged; the child never got going");
    // Some kill must have caught calls in flight, or recovery went untested.
    assert!(resolved > 0, "no kill ever left a call in flight to resolve");
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_write_and_leaves_the_store_verifiable() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::Embedded(dir.path().join("world.db"));
    crash_rounds(&target, dir.path(), ROUNDS, TIME_BOUND);
}

#[test]
fn sigkill_of_a_postgres_node_at_random_moments_loses_no_acknowledged_write_and_another_node_resolves_its_calls() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::Postgres(common::cluster::fresh_database());
    crash_rounds(&target, dir.path(), PG_ROUNDS, PG_TIME_BOUND);
}
