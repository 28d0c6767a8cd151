//! The invocation coordinator: one agent call in, one committed log entry out.
//!
//! admit (fresh grant-filtered view) → task row durable → R8 → plan (≤ 2 s) →
//! broker (name → scope → liveness → budget; intent + debit in one
//! transaction) → handler → outcome + record → finish (≤ 2 s) → commit.
//! Everything runs in a task of its own, so a client that disconnects cannot
//! cancel it half-way; once an effect's intent is durable, the remaining steps
//! have a 4 s budget, and any failure there is `EffectsUnrecorded`.

use crate::effects::worktree::Worktrees;
use crate::effects::{self, Decision, Record};
use crate::registry::{self, Descriptor, Registry};
use crate::runtime::{PhaseError, Runtimes};
use crate::writes;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use world_store::canonical::FixedObject;
use world_store::*;

/// What a call runs against. The daemon provides it; the coordinator knows
/// nothing else of the daemon (nor of HTTP).
pub trait Host: Send + Sync + 'static {
    fn store(&self) -> &dyn WorldStore;
    fn coordinator(&self) -> &Coordinator;
    fn runtimes(&self) -> &Runtimes;
    fn worktrees(&self) -> &Worktrees;
    fn metrics(&self) -> &crate::metrics::Metrics;
}

/// The host a call runs against, shared with the call's own task.
pub type SharedHost = Arc<dyn Host>;

/// The whole invocation, admission to commit.
pub const INVOCATION_DEADLINE: Duration = Duration::from_secs(20);
/// Admission reads.
pub const ADMISSION_DEADLINE: Duration = Duration::from_secs(10);
/// Everything after an effect's intent is durable.
pub const POST_EFFECT_BUDGET: Duration = Duration::from_secs(4);
/// A handler's own bound (exec handlers stop at 9 s).
pub const HANDLER_DEADLINE: Duration = Duration::from_secs(10);
/// Plan laws.
pub const PLAN_EFFECTS_MAX: usize = 1;
pub const PLAN_PAYLOAD_MAX: usize = 1 << 20;
/// Episode locks kept before idle ones are dropped.
const EPISODE_LOCKS_SOFT_MAX: usize = 1024;
/// Transition sources kept in memory.
const SOURCES_CACHED_MAX: usize = 256;

pub const INVOCATION_INPUT: &str = "world/invocation-input/v1";
pub const INVOCATION_OUTPUT: &str = "world/invocation-output/v1";
pub const INVOCATION_RECORD_V1: &str = "world/invocation-record/v1";
pub const INVOCATION_RECORD_V2: &str = "world/invocation-record/v2";
pub const EFFECT_PLAN: &str = "world/effect-plan/v1";

/// One admitted call, as a surface hands it over.
#[derive(Clone, Debug)]
pub struct Call {
    pub surface: Surface,
    pub episode: String,
    pub grants: Vec<Grant>,
    pub expires_at: u64,
    pub task_id: String,
    pub transition_id: String,
    pub arguments: Value,
    pub pin: Option<Ref>,
    /// The A2A `contextId` and `messageId` the call was sent with, kept in its
    /// task row for the task's later readers (neither is part of the request
    /// digest: a resend may carry another message id).
    pub context: Option<String>,
    pub message_id: Option<String>,
}

/// A committed invocation (fresh, or the stored one for a resent task id).
#[derive(Clone, Debug)]
pub struct Outcome {
    pub invocation_id: String,
    pub output: Value,
    pub committed: Committed,
    /// When the task ended (its commit), Unix seconds.
    pub ended_at: u64,
    /// The A2A `contextId` and `messageId` of the request that committed it
    /// (for a resend, the first one's, from its row).
    pub context: Option<String>,
    pub message_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("not authorized")]
    NotAuthorized,
    #[error("proposal does not match the registered transition")]
    PinMismatch,
    #[error("task id already used in this session")]
    TaskIdInUse,
    /// The task id names a task that ended, and this is another request
    /// (the same request replays the committed result instead).
    #[error("task id already used in this session")]
    TaskEnded(TaskState),
    #[error("effects were requested but the invocation was not confirmed committed ({cause})")]
    EffectsUnrecorded { records: Vec<Ref>, cause: String },
    /// R8. `missing` says what the operator lacks (for the log, never the wire).
    #[error("transition declares an effect this daemon has no handler for")]
    NoHandler { missing: String },
    #[error("no world is selected; commit a genesis world first")]
    NoWorld,
    #[error("transition does not implement the invocation calling convention: {0}")]
    Convention(String),
    #[error("transition execution failed: {0}")]
    ExecutionFailed(String),
    #[error("transition output is not a JSON object")]
    NotAnObject,
    #[error("invocation exceeded its deadline")]
    Deadline,
    #[error("invocation outcome is not confirmed; resend the same task id")]
    Unconfirmed,
    #[error("invocation was not committed; send a new task id ({0})")]
    NotCommitted(String),
    #[error("world head moved during invocation; not committed; send a new task id")]
    HeadMoved,
    #[error("transition invocation is not available in this daemon: {0}")]
    Unavailable(String),
    /// The store's disk is full; nothing of the call is durable.
    #[error("{0}")]
    OutOfSpace(String),
}

impl CallError {
    /// A bounded name of the error's kind, as metrics label it.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::NotAuthorized => "not_authorized",
            CallError::PinMismatch => "pin_mismatch",
            CallError::TaskIdInUse | CallError::TaskEnded(_) => "task_id_in_use",
            CallError::EffectsUnrecorded { .. } => "effects_unrecorded",
            CallError::NoHandler { .. } => "no_handler",
            CallError::NoWorld => "no_world",
            CallError::Convention(_) => "convention",
            CallError::ExecutionFailed(_) => "execution_failed",
            CallError::NotAnObject => "not_an_object",
            CallError::Deadline => "deadline",
            CallError::Unconfirmed => "unconfirmed",
            CallError::NotCommitted(_) => "not_committed",
            CallError::HeadMoved => "head_moved",
            CallError::Unavailable(_) => "unavailable",
            CallError::OutOfSpace(_) => "out_of_space",
        }
    }
}

/// Coordinator state shared by every call.
#[derive(Default)]
pub struct Coordinator {
    episode_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    registry_cache: Mutex<Option<(Ref, Arc<Registry>)>>,
    sources: Mutex<HashMap<Ref, Arc<Vec<u8>>>>,
    in_flight: Mutex<std::collections::HashSet<TaskKey>>,
    /// A world was seen selected: it stays so (heads are never removed), so
    /// admission stops asking.
    world_seen: std::sync::atomic::AtomicBool,
}

impl Coordinator {
    /// Whether the store has a selected world, asked of `snap` until one is seen.
    fn has_world(&self, snap: &Snapshot) -> Result<bool, ReadError> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.world_seen.load(Relaxed) {
            return Ok(true);
        }
        let seen = snap.selected_head()?.is_some();
        self.world_seen.fetch_or(seen, Relaxed);
        Ok(seen)
    }

    /// The current registry, parsed once per head.
    pub fn registry(&self, snap: &Snapshot) -> Result<Option<Arc<Registry>>, registry::LoadError> {
        Ok(self.registry_at(snap)?.map(|(_, r)| r))
    }

    /// The current registry with the head it was read from.
    pub fn registry_at(&self, snap: &Snapshot) -> Result<Option<(Ref, Arc<Registry>)>, registry::LoadError> {
        let Some(head) = snap.head(registry::TRANSITION_REGISTRY)? else { return Ok(None) };
        if let Some((h, r)) = self.registry_cache.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            && *h == head
        {
            return Ok(Some((head, r.clone())));
        }
        let Some((head, parsed)) = registry::load(snap)? else { return Ok(None) };
        let parsed = Arc::new(parsed);
        *self.registry_cache.lock().unwrap_or_else(|p| p.into_inner()) = Some((head, parsed.clone()));
        Ok(Some((head, parsed)))
    }

    /// Is a call with this task id running now (its row may not be durable yet)?
    pub fn in_flight(&self, key: &TaskKey) -> bool {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).contains(key)
    }

    fn episode_lock(&self, episode: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.episode_locks.lock().unwrap_or_else(|p| p.into_inner());
        if locks.len() > EPISODE_LOCKS_SOFT_MAX {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        locks.entry(episode.to_string()).or_default().clone()
    }

    fn cached_source(&self, r: &Ref) -> Option<Arc<Vec<u8>>> {
        self.sources.lock().unwrap_or_else(|p| p.into_inner()).get(r).cloned()
    }

    fn source(&self, snap: &Snapshot, r: &Ref) -> Result<Arc<Vec<u8>>, String> {
        if let Some(s) = self.cached_source(r) {
            return Ok(s);
        }
        let bytes = snap
            .payload(r)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("transition source {r} is not in the store"))?;
        if Ref::of(&bytes) != *r {
            return Err(format!("transition source {r} does not hash to its ref"));
        }
        let bytes = Arc::new(bytes);
        let mut cache = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= SOURCES_CACHED_MAX {
            cache.clear();
        }
        cache.insert(*r, bytes.clone());
        Ok(bytes)
    }
}

/// Runs one call to completion in its own task, bounded by the invocation deadline.
pub async fn invoke(host: &SharedHost, call: Call) -> Result<Outcome, CallError> {
    if !host.metrics().is_on() {
        return invoke_detached(host, call).await;
    }
    let (surface, tool) = (call.surface, call.transition_id.clone());
    let started = std::time::Instant::now();
    let _in_flight = host.metrics().in_flight();
    let ended = invoke_detached(host, call).await;
    let outcome = match &ended {
        Ok(_) => "committed",
        Err(e) => e.kind(),
    };
    host.metrics().call(surface.as_str(), &tool, outcome, started.elapsed().as_secs_f64());
    ended
}

async fn invoke_detached(host: &SharedHost, call: Call) -> Result<Outcome, CallError> {
    let d = host.clone();
    let task = tokio::spawn(async move { run(&d, call).await });
    match tokio::time::timeout(INVOCATION_DEADLINE, task).await {
        Err(_) => Err(CallError::Deadline),
        Ok(Err(join)) => Err(CallError::Unavailable(format!("invocation task failed: {join}"))),
        Ok(Ok(r)) => r,
    }
}

/// What admission found: the descriptor, and whether the world and handlers exist.
struct Admitted {
    descriptor: Descriptor,
    existing: Option<Task>,
    has_world: bool,
}

fn request_digest(call: &Call) -> Ref {
    let pin = call.pin.map(|p| p.to_string()).unwrap_or_default();
    let v = json!({"transition": call.transition_id, "arguments": call.arguments, "transitionFn": pin});
    Ref::of(&canonical::to_vec(&v))
}

fn task_key(call: &Call) -> TaskKey {
    TaskKey { surface: call.surface, episode: call.episode.clone(), task_id: call.task_id.clone() }
}

async fn admit(host: &SharedHost, call: &Call) -> Result<Admitted, CallError> {
    let (d, id, key) = (host.clone(), call.transition_id.clone(), task_key(call));
    let work = tokio::task::spawn_blocking(move || -> Result<_, String> {
        // Each of these is checked again inside the call's write transaction.
        let snap = d.store().glance().map_err(|e| e.to_string())?;
        let registry = d.coordinator().registry(&snap).map_err(|e| e.to_string())?;
        let descriptor = registry.and_then(|r| r.get(&id).cloned());
        let existing = snap.task(&key).map_err(|e| e.to_string())?;
        let has_world = d.coordinator().has_world(&snap).map_err(|e| e.to_string())?;
        Ok((descriptor, existing, has_world))
    });
    let (descriptor, existing, has_world) = match tokio::time::timeout(ADMISSION_DEADLINE, work).await {
        Err(_) => return Err(CallError::Unavailable("admission read exceeded its deadline".into())),
        Ok(Err(e)) => return Err(CallError::Unavailable(e.to_string())),
        Ok(Ok(Err(e))) => return Err(CallError::Unavailable(e)),
        Ok(Ok(Ok(x))) => x,
    };
    let live = crate::clock::now() < call.expires_at;
    let descriptor =
        descriptor.filter(|d| registry::grants_admit(&call.grants, live, &d.access)).ok_or(CallError::NotAuthorized)?;
    if call.pin.is_some_and(|p| p != descriptor.transition_fn) {
        return Err(CallError::PinMismatch);
    }
    Ok(Admitted { descriptor, existing, has_world })
}

/// A resent task id: the committed result, or why it cannot be given.
async fn resume(host: &SharedHost, call: &Call, task: Task, digest: Ref) -> Result<Outcome, CallError> {
    if task.request_digest != digest {
        return Err(match task.state {
            TaskState::Started => CallError::TaskIdInUse,
            ended => CallError::TaskEnded(ended),
        });
    }
    match task.state {
        TaskState::Started => Err(CallError::TaskIdInUse),
        TaskState::NotCommitted => Err(CallError::NotCommitted("an earlier attempt with this task id".into())),
        TaskState::Uncertain => Err(CallError::EffectsUnrecorded {
            records: task.effect_records,
            cause: "an earlier attempt with this task id ran effects and did not commit".into(),
        }),
        TaskState::Committed => {
            let c = task.committed.ok_or_else(|| CallError::Unavailable("committed task without a result".into()))?;
            let d = host.clone();
            let out_ref = c.output_ref;
            let bytes = tokio::task::spawn_blocking(move || d.store().snapshot().and_then(|s| s.payload(&out_ref)))
                .await
                .map_err(|e| CallError::Unavailable(e.to_string()))?
                .map_err(|e| CallError::Unavailable(e.to_string()))?
                .ok_or_else(|| CallError::Unavailable(format!("committed output {out_ref} is missing")))?;
            if Ref::of(&bytes) != out_ref {
                return Err(CallError::Unavailable(format!("committed output {out_ref} fails its hash check")));
            }
            let output = serde_json::from_slice(&bytes).map_err(|e| CallError::Unavailable(e.to_string()))?;
            let ended_at = task.ended_at.unwrap_or(task.started_at);
            Ok(Outcome {
                invocation_id: task_key(call).invocation_id(),
                output,
                committed: c,
                ended_at,
                context: task.context,
                message_id: task.message_id,
            })
        }
    }
}

async fn run(host: &SharedHost, call: Call) -> Result<Outcome, CallError> {
    let admitted = admit(host, &call).await?;
    let digest = request_digest(&call);
    if let Some(task) = admitted.existing {
        return resume(host, &call, task, digest).await;
    }
    if !admitted.has_world {
        return Err(CallError::NoWorld);
    }
    let d = admitted.descriptor;
    if let Some(missing) = d.declared_effects.iter().find_map(|e| host.worktrees().missing(&call.episode, &e.effect)) {
        return Err(CallError::NoHandler { missing });
    }
    let key = task_key(&call);
    // A task id in flight here has no durable row yet (the row is written with
    // the first effect's intent, or with the commit): catch the duplicate in memory.
    let Some(_in_flight) = InFlight::claim(host.coordinator(), &key) else { return Err(CallError::TaskIdInUse) };
    let mut inv = Invocation { host, call: &call, d: &d, key, digest, created: false, ran: false, journaled: vec![] };
    match inv.execute().await {
        Ok(outcome) => Ok(outcome),
        Err(Resumed(task)) => resume(host, &call, *task, digest).await,
        Err(Failed(e)) => {
            inv.record_end(&e).await;
            Err(e)
        }
    }
}

/// A task id claimed by a running call; released when the call ends.
struct InFlight<'a> {
    coordinator: &'a Coordinator,
    key: TaskKey,
}

impl<'a> InFlight<'a> {
    fn claim(coordinator: &'a Coordinator, key: &TaskKey) -> Option<InFlight<'a>> {
        let fresh = coordinator.in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone());
        fresh.then(|| InFlight { coordinator, key: key.clone() })
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.coordinator.in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
    }
}

/// How an invocation ends short of a fresh commit.
enum Stop {
    /// The task id turned out to exist already: answer as for a resend.
    Resumed(Box<Task>),
    Failed(CallError),
}
use Stop::{Failed, Resumed};

impl From<CallError> for Stop {
    fn from(e: CallError) -> Stop {
        Failed(e)
    }
}

/// One invocation in progress.
struct Invocation<'a> {
    host: &'a SharedHost,
    call: &'a Call,
    d: &'a Descriptor,
    key: TaskKey,
    digest: Ref,
    /// The task row is durable.
    created: bool,
    /// An effect's intent is durable: from here on, failures are EffectsUnrecorded.
    ran: bool,
    /// Effect records whose outcomes are durable.
    journaled: Vec<Ref>,
}

/// One planned effect.
struct PlannedEffect {
    id: String,
    effect: String,
    scope: String,
    cost: u64,
    payload: Value,
}

struct Plan {
    effects: Vec<PlannedEffect>,
    finish: bool,
    result: Option<Map<String, Value>>,
    bytes: Vec<u8>,
}

/// What brokering one effect produced.
struct Brokered {
    id: String,
    effect: String,
    status: &'static str,
    record: Ref,
    output: Option<Value>,
    /// Objects the commit must carry (denials are journaled nowhere else).
    objects: Vec<NewObject>,
    /// The outcome still to be made durable (with the commit, when possible).
    outcome: Option<OutcomeRequest>,
    /// How the episode view tells it.
    told: CallEffect,
}

fn phase_error(e: PhaseError) -> CallError {
    match e {
        PhaseError::Failed(why) => CallError::ExecutionFailed(why),
        PhaseError::NotAnObject => CallError::NotAnObject,
        PhaseError::Convention(why) => CallError::Convention(why),
    }
}

impl Invocation<'_> {
    fn provenance(&self) -> String {
        format!("coordinator:{}", self.call.surface.as_str())
    }

    fn object(&self, semantic_id: &str, payload: Vec<u8>) -> NewObject {
        NewObject::derived(semantic_id, &self.provenance(), payload)
    }

    async fn phase(&self, input: &Value) -> Result<Value, CallError> {
        // Only an exec transition reads its source: a builtin needs no snapshot.
        let source = match self.d.runtime {
            registry::RuntimeSpec::Exec { .. } => Some(self.source().await?),
            registry::RuntimeSpec::Builtin { .. } => None,
        };
        let source = |_: &Ref| match source {
            Some(s) => s.map(|s| s.to_vec()),
            None => Err("a builtin transition has no source to read".to_string()),
        };
        self.host.runtimes().run(self.d, source, input).await.map_err(phase_error)
    }

    /// Waits, on the blocking pool, until this node alone among the store's
    /// nodes runs the episode's effects.
    async fn hold_episode(&self) -> Result<EpisodeHold, Stop> {
        let host = self.host.clone();
        let episode = self.call.episode.clone();
        match tokio::task::spawn_blocking(move || host.store().hold_episode(&episode)).await {
            Ok(Ok(hold)) => Ok(hold),
            Ok(Err(WriteError::Unavailable(why))) => {
                Err(Failed(CallError::Unavailable(format!("the store's database is unavailable: {why}"))))
            }
            Ok(Err(e)) => Err(Failed(CallError::NotCommitted(e.to_string()))),
            Err(join) => Err(Failed(CallError::Unavailable(format!("episode hold: {join}")))),
        }
    }

    /// The exec transition's source: cached, or read on the blocking pool
    /// (an engine's reads may block, and no snapshot is held over the run).
    async fn source(&self) -> Result<Result<Arc<Vec<u8>>, String>, CallError> {
        let r = self.d.transition_fn;
        if let Some(s) = self.host.coordinator().cached_source(&r) {
            return Ok(Ok(s));
        }
        let host = self.host.clone();
        let read = tokio::task::spawn_blocking(move || {
            let snap = host.store().snapshot().map_err(|e| CallError::Unavailable(e.to_string()))?;
            Ok(host.coordinator().source(&snap, &r))
        });
        read.await.map_err(|e| CallError::Unavailable(e.to_string()))?
    }

    /// After an effect ran, every failure is EffectsUnrecorded naming the records.
    fn unrecorded(&self, cause: impl std::fmt::Display) -> CallError {
        if !self.ran {
            return CallError::NotCommitted(cause.to_string());
        }
        CallError::EffectsUnrecorded { records: self.journaled.clone(), cause: cause.to_string() }
    }

    /// The task row, written in the same batch as whatever needs it first.
    fn create_op(&self) -> Option<Op> {
        (!self.created).then(|| Op::CreateTask {
            task: self.key.clone(),
            request_digest: self.digest,
            at: crate::clock::now(),
            transition: self.d.id.clone(),
            context: self.call.context.clone(),
            message_id: self.call.message_id.clone(),
        })
    }

    /// Runs `ops` (the task row first if it is not yet durable) as one durable batch.
    async fn write(&mut self, ops: Vec<Op>) -> Result<Vec<Result<Reply, WriteError>>, Stop> {
        let queued = self.queue(ops);
        self.settle(queued).await
    }

    /// Queues `ops` (the task row first if it is not yet durable) as one batch
    /// for the writer, behind every write queued before it: the writer applies
    /// and journals requests in the order they were queued.
    fn queue(&self, ops: Vec<Op>) -> Queued {
        let mut all: Vec<Op> = self.create_op().into_iter().collect();
        let creating = !all.is_empty();
        all.extend(ops);
        Queued { creating, reply: writes::queue(self.host.store(), Op::Sequence(all)) }
    }

    /// Waits for a queued batch to be durable (or refused) and reads its replies.
    async fn settle(&mut self, queued: Queued) -> Result<Vec<Result<Reply, WriteError>>, Stop> {
        let replies = match queued.reply.reply().await {
            Ok(Reply::Sequence(r)) => r,
            Ok(other) => return Err(Failed(CallError::Unavailable(format!("unexpected writer reply {other:?}")))),
            // The writer stopped with our batch in hand: nobody can say whether it landed.
            Err(e @ WriteError::WriterStopped(_)) if !self.ran => {
                tracing::error!(invocation = %self.key.invocation_id(), error = %e, "commit outcome unknown");
                return Err(Failed(CallError::Unconfirmed));
            }
            // The database lost the connection during its commit.
            Err(WriteError::Unconfirmed(why)) if !self.ran => {
                tracing::error!(invocation = %self.key.invocation_id(), why, "commit outcome unknown");
                return Err(Failed(CallError::Unconfirmed));
            }
            // Refused before anything of the batch was written.
            Err(WriteError::OutOfSpace(why)) if !self.ran => return Err(Failed(CallError::OutOfSpace(why))),
            Err(WriteError::Unavailable(why)) if !self.ran => {
                return Err(Failed(CallError::Unavailable(format!("the store's database is unavailable: {why}"))));
            }
            Err(e) => return Err(Failed(self.unrecorded(format!("store: {e}")))),
        };
        let mut replies = replies.into_iter();
        if queued.creating {
            match replies.next() {
                Some(Ok(_)) => self.created = true,
                Some(Err(WriteError::TaskExists(task))) => return Err(Resumed(task)),
                Some(Err(e)) => return Err(Failed(CallError::Unavailable(format!("task row: {e}")))),
                None => return Err(Failed(CallError::Unavailable("empty sequence reply".into()))),
            }
        }
        Ok(replies.collect())
    }

    /// Records how a failed invocation ended, so a resend of its task id says so.
    async fn record_end(&mut self, e: &CallError) {
        let state = match e {
            CallError::EffectsUnrecorded { .. } => TaskState::Uncertain,
            CallError::Unconfirmed
            | CallError::Unavailable(_)
            | CallError::TaskIdInUse
            | CallError::TaskEnded(_)
            | CallError::OutOfSpace(_) => {
                return;
            }
            _ => TaskState::NotCommitted,
        };
        let _ = self.write(vec![Op::EndTask { task: self.key.clone(), state, at: crate::clock::now() }]).await;
    }

    async fn execute(&mut self) -> Result<Outcome, Stop> {
        let args = self.call.arguments.clone();
        let input = self.object(INVOCATION_INPUT, canonical::to_vec(&args));
        if self.d.is_pure() {
            let result = self.phase(&args).await?;
            let result = reserve_world(result)?;
            let output = with_world(result, vec![], None);
            return self.commit(vec![], input, output, None).await;
        }
        let plan = self.plan(&args).await?;
        let plan_obj = self.object(EFFECT_PLAN, plan.bytes.clone());
        // The effects of one episode run one at a time: its worktree and budget
        // are shared. Planning needs no lock (plans are pure), and commits are
        // rebased, so calls of one episode still share group commits.
        let lock = self.host.coordinator().episode_lock(&self.call.episode);
        let guard = lock.lock().await;
        // Other nodes sharing the store run the episode's effects only once
        // this call's commit is durable: their writers do not queue behind ours.
        let hold = self.hold_episode().await?;
        let mut brokered = vec![];
        let mut pending = plan.effects.iter();
        for e in pending.by_ref() {
            let b = self.broker(e).await?;
            let stop = b.status != "ok";
            brokered.push(b);
            if stop {
                break;
            }
        }
        // What the loop left is what `compose` reports `skipped`. With
        // `PLAN_EFFECTS_MAX` at 1 nothing is left today: the one effect is
        // the last, whatever became of it.
        let skipped: Vec<CallEffect> = pending
            .inspect(|e| self.host.metrics().effect(&e.effect, &e.scope, "skipped", 0, None))
            .map(planned)
            .collect();
        let ran = self.ran;
        let post = async {
            let mut outcomes: Vec<Op> =
                brokered.iter_mut().filter_map(|b| b.outcome.take()).map(Op::RecordOutcome).collect();
            if plan.finish && !outcomes.is_empty() {
                // The finish phase may take its 2 s: make the records durable first.
                self.outcomes(std::mem::take(&mut outcomes)).await?;
            }
            let output = self.compose(&args, &plan, &brokered, plan_obj.hash).await?;
            let objects: Vec<NewObject> = brokered.iter().flat_map(|b| b.objects.clone()).collect();
            let records = brokered.iter().map(|b| b.record).collect();
            let mut told: Vec<CallEffect> = brokered.iter().map(|b| b.told.clone()).collect();
            told.extend(skipped);
            // The episode's next effect may run once this commit is queued:
            // its intent is journaled behind the commit, so it runs only after
            // the commit is durable, and the log keeps the episode's effects
            // in the order they ran.
            let ran = Ran { plan: plan_obj, records, told, objects, episode: guard, hold };
            self.commit(outcomes, input, output, Some(ran)).await
        };
        if !ran {
            return post.await;
        }
        match tokio::time::timeout(POST_EFFECT_BUDGET, post).await {
            Ok(r) => r,
            Err(_) => Err(Failed(self.unrecorded("the post-effect steps exceeded their 4 s budget"))),
        }
    }

    /// Makes effect outcomes durable on their own (before a finish phase).
    async fn outcomes(&mut self, ops: Vec<Op>) -> Result<(), Stop> {
        let records = outcome_records(&ops);
        for (r, rec) in self.write(ops).await?.into_iter().zip(records) {
            match r {
                Ok(_) => self.journaled.push(rec),
                Err(e) => return Err(Failed(self.unrecorded(format!("recording the effect outcome: {e}")))),
            }
        }
        Ok(())
    }

    async fn plan(&self, args: &Value) -> Result<Plan, CallError> {
        let out = self.phase(&json!({"phase": "plan", "args": args})).await?;
        check_plan(out, self.d)
    }

    async fn broker(&mut self, e: &PlannedEffect) -> Result<Brokered, Stop> {
        let now = crate::clock::now();
        let payload = canonical::to_vec(&e.payload);
        let request = NewObject::derived(
            effects::EFFECT_REQUEST,
            effects::BROKER_PROVENANCE,
            effects::request_bytes(&e.effect, &e.scope, e.cost, now, &payload),
        );
        let decision = effects::decide(&self.call.grants, self.call.expires_at, now, &e.effect, &e.scope);
        let grant_budget = match decision {
            Decision::Deny { label, grant_budget } => {
                let remaining = match grant_budget {
                    Some(b) => b.saturating_sub(self.spent(&e.effect, &e.scope).await?),
                    None => 0,
                };
                return Ok(self.denied(e, request, label, remaining));
            }
            Decision::Allow { grant_budget } => grant_budget,
        };
        let intent = IntentRequest {
            task: self.key.clone(),
            ordinal: 0,
            effect_id: e.id.clone(),
            effect: e.effect.clone(),
            scope: e.scope.clone(),
            cost: e.cost,
            grant_budget,
            request: request.clone(),
            at: now,
        };
        // The task row and the intent + debit share one durable batch; the row
        // still precedes the intent, and both precede the effect.
        let debit = match self.write(vec![Op::RecordIntent(intent)]).await?.pop() {
            Some(Ok(Reply::Debited(d))) => d,
            Some(Err(WriteError::BudgetExhausted { remaining })) => {
                return Ok(self.denied(e, request, effects::DENIED_BUDGET, remaining));
            }
            other => return Err(Failed(CallError::NotCommitted(format!("journaling the effect intent: {other:?}")))),
        };
        self.ran = true;
        let ran = tokio::time::timeout(
            HANDLER_DEADLINE,
            self.host.worktrees().run(&self.call.episode, &e.effect, &e.payload),
        )
        .await;
        let (failed, output) = match ran {
            Ok(Ok(v))
                if serde_json::to_vec(&v).map(|b| b.len()).unwrap_or(usize::MAX)
                    <= effects::worktree::RESULT_BYTES_MAX =>
            {
                (false, Some(v))
            }
            Ok(Ok(_)) => (true, None),
            Ok(Err(why)) => {
                tracing::warn!(invocation = %self.key.invocation_id(), effect = %e.effect, %why, "effect handler failed");
                (true, None)
            }
            Err(_) => (true, None),
        };
        let result = output
            .as_ref()
            .map(|v| NewObject::derived(effects::EFFECT_RESULT, effects::BROKER_PROVENANCE, canonical::to_vec(v)));
        let invocation_id = self.key.invocation_id();
        let record = Record {
            invocation_id: &invocation_id,
            ordinal: 0,
            effect_id: &e.id,
            effect: &e.effect,
            scope: &e.scope,
            cost: e.cost,
            budget_before: debit.budget_before,
            budget_after: debit.budget_after,
            allowed: true,
            failed,
            denial: "",
            request_ref: request.hash,
            result_ref: result.as_ref().map(|r| r.hash),
        };
        let record = NewObject::derived(effects::EFFECT_RECORD, effects::BROKER_PROVENANCE, record.to_bytes());
        let record_ref = record.hash;
        let status = if failed { OutcomeStatus::Failed } else { OutcomeStatus::Ok };
        let label = if failed { "failed" } else { "ok" };
        self.host.metrics().effect(&e.effect, &e.scope, label, e.cost, None);
        let outcome =
            OutcomeRequest { task: self.key.clone(), ordinal: 0, status, record, result, at: crate::clock::now() };
        let told = CallEffect {
            status: if failed { EffectStatus::Failed } else { EffectStatus::Ok },
            budget_before: debit.budget_before,
            budget_after: debit.budget_after,
            record: Some(record_ref),
            request: Some(request.hash),
            ..planned(e)
        };
        Ok(Brokered {
            id: e.id.clone(),
            effect: e.effect.clone(),
            status: if failed { "failed" } else { "ok" },
            record: record_ref,
            output,
            objects: vec![],
            outcome: Some(outcome),
            told,
        })
    }

    async fn spent(&self, effect: &str, scope: &str) -> Result<u64, CallError> {
        let d = self.host.clone();
        let (ep, ef, sc) = (self.call.episode.clone(), effect.to_string(), scope.to_string());
        tokio::task::spawn_blocking(move || d.store().snapshot().and_then(|s| s.spent(&ep, &ef, &sc)))
            .await
            .map_err(|e| CallError::Unavailable(e.to_string()))?
            .map_err(|e| CallError::Unavailable(e.to_string()))
    }

    /// A denial is recorded, never debited; it travels with the commit.
    fn denied(&self, e: &PlannedEffect, request: NewObject, label: &'static str, remaining: u64) -> Brokered {
        self.host.metrics().effect(&e.effect, &e.scope, "denied", e.cost, Some(label));
        let invocation_id = self.key.invocation_id();
        let record = Record {
            invocation_id: &invocation_id,
            ordinal: 0,
            effect_id: &e.id,
            effect: &e.effect,
            scope: &e.scope,
            cost: e.cost,
            budget_before: remaining,
            budget_after: remaining,
            allowed: false,
            failed: false,
            denial: label,
            request_ref: request.hash,
            result_ref: None,
        };
        let record = NewObject::derived(effects::EFFECT_RECORD, effects::BROKER_PROVENANCE, record.to_bytes());
        let told = CallEffect {
            status: EffectStatus::Denied,
            denial: Some(label.to_string()),
            budget_before: remaining,
            budget_after: remaining,
            record: Some(record.hash),
            request: Some(request.hash),
            ..planned(e)
        };
        Brokered {
            id: e.id.clone(),
            effect: e.effect.clone(),
            status: "denied",
            record: record.hash,
            output: None,
            objects: vec![request, record],
            outcome: None,
            told,
        }
    }

    /// The committed output: handler fields, finish output or refusal result, plus `world`.
    async fn compose(
        &self,
        args: &Value,
        plan: &Plan,
        brokered: &[Brokered],
        plan_ref: Ref,
    ) -> Result<Value, CallError> {
        let mut statuses: Vec<(String, &'static str, Option<Ref>)> =
            brokered.iter().map(|b| (b.id.clone(), b.status, Some(b.record))).collect();
        statuses.extend(plan.effects.iter().skip(brokered.len()).map(|e| (e.id.clone(), "skipped", None)));
        if plan.effects.is_empty() {
            return Ok(with_world(plan.result.clone().unwrap_or_default(), statuses, Some(plan_ref)));
        }
        if plan.finish {
            let results: Vec<Value> = brokered
                .iter()
                .map(|b| json!({"id": b.id, "effect": b.effect, "status": b.status, "record": b.record.to_string(), "output": b.output}))
                .collect();
            let out = self
                .phase(&json!({"phase": "finish", "args": args, "results": results}))
                .await
                .map_err(|e| self.unrecorded(e))?;
            let Value::Object(out) = out else { return Err(self.unrecorded(CallError::NotAnObject)) };
            if out.contains_key("effects") || out.contains_key("world") {
                return Err(self.unrecorded("the finish output may not carry `effects` or `world`"));
            }
            return Ok(with_world(out, statuses, Some(plan_ref)));
        }
        let fields = match brokered.first().and_then(|b| b.output.clone()) {
            Some(Value::Object(m)) if !m.contains_key("world") => m,
            Some(_) => {
                let mut m = Map::new();
                m.insert("ok".into(), json!(false));
                m.insert("refused".into(), json!("the handler output used the reserved key `world`"));
                m
            }
            None => Map::new(),
        };
        Ok(with_world(fields, statuses, Some(plan_ref)))
    }

    /// Commits the invocation, after `outcomes` (effect outcomes not yet durable)
    /// in the same batch: one fsync for the records and the entry.
    async fn commit(
        &mut self,
        outcomes: Vec<Op>,
        input: NewObject,
        output: Value,
        ran: Option<Ran<'_>>,
    ) -> Result<Outcome, Stop> {
        let (plan, records, told, mut objects, episode, hold) = match ran {
            Some(r) => (Some(r.plan), r.records, r.told, r.objects, Some(r.episode), Some(r.hold)),
            None => (None, vec![], vec![], vec![], None, None),
        };
        let output_obj = self.object(INVOCATION_OUTPUT, canonical::to_vec(&output));
        let c = self.call;
        let mut rec = FixedObject::new()
            .str("invocationId", &self.key.invocation_id())
            .str("episodeId", &c.episode)
            .str("skillId", &self.d.id)
            .str("transitionFn", &self.d.transition_fn.to_string())
            .str("interpreter", &self.d.interpreter.to_string())
            .uint("semanticsEpoch", self.d.semantics_epoch)
            .str("input", &input.hash.to_string())
            .str("output", &output_obj.hash.to_string());
        let semantic = match &plan {
            Some(p) => {
                let refs: Vec<Value> = records.iter().map(|r| json!(r.to_string())).collect();
                rec = rec.str("plan", &p.hash.to_string()).value("effects", &Value::Array(refs));
                INVOCATION_RECORD_V2
            }
            None => INVOCATION_RECORD_V1,
        };
        let record = self.object(semantic, rec.finish());
        let commit = InvocationCommit {
            task: self.key.clone(),
            registry: registry::TRANSITION_REGISTRY.into(),
            transition_id: self.d.id.clone(),
            transition_fn: self.d.transition_fn,
            interpreter: self.d.interpreter,
            semantics_epoch: self.d.semantics_epoch,
            written_by: self.provenance(),
            transition_ref: record.hash,
            state_root: output_obj.hash,
            objects: {
                objects.push(input);
                objects.extend(plan);
                objects.push(output_obj);
                objects.push(record);
                objects
            },
            effects: told,
            at: crate::clock::now(),
        };
        let ended_at = commit.at;
        let pending = outcome_records(&outcomes);
        let mut ops = outcomes;
        ops.push(Op::CommitInvocation(commit));
        let queued = self.queue(ops);
        drop(episode);
        let settled = self.settle(queued).await;
        drop(hold);
        let mut replies = settled?.into_iter();
        for rec in pending {
            match replies.next() {
                Some(Ok(_)) => self.journaled.push(rec),
                other => return Err(Failed(self.unrecorded(format!("recording the effect outcome: {other:?}")))),
            }
        }
        match replies.next() {
            Some(Ok(Reply::Committed(committed))) => Ok(Outcome {
                invocation_id: self.key.invocation_id(),
                output,
                committed,
                ended_at,
                context: self.call.context.clone(),
                message_id: self.call.message_id.clone(),
            }),
            Some(Err(WriteError::TransitionChanged { .. })) if !self.ran => Err(Failed(CallError::HeadMoved)),
            Some(Err(e)) => Err(Failed(self.unrecorded(format!("commit: {e}")))),
            other => Err(Failed(self.unrecorded(format!("unexpected writer reply {other:?}")))),
        }
    }
}

/// What an effectful invocation brings to its commit.
struct Ran<'g> {
    plan: NewObject,
    /// The effect records, in the order the effects ran.
    records: Vec<Ref>,
    /// Every planned effect as the episode view tells it, in plan order.
    told: Vec<CallEffect>,
    /// Objects only the commit carries (denials).
    objects: Vec<NewObject>,
    /// The episode's effect lock, let go once the commit is queued.
    episode: tokio::sync::MutexGuard<'g, ()>,
    /// The episode's hold among nodes, given up once the commit is durable.
    hold: EpisodeHold,
}

/// A batch handed to the writer, not yet durable.
struct Queued {
    /// The batch begins with the task row.
    creating: bool,
    reply: writes::QueuedWrite,
}

/// A planned effect as the episode view tells it, before it is brokered
/// (as it stays when it is skipped: an earlier one was denied or failed).
fn planned(e: &PlannedEffect) -> CallEffect {
    CallEffect {
        id: e.id.clone(),
        effect: e.effect.clone(),
        scope: e.scope.clone(),
        cost: e.cost,
        status: EffectStatus::Skipped,
        denial: None,
        budget_before: 0,
        budget_after: 0,
        record: None,
        request: None,
    }
}

/// The effect records the `RecordOutcome` ops among `ops` would make durable.
fn outcome_records(ops: &[Op]) -> Vec<Ref> {
    ops.iter().filter_map(|o| if let Op::RecordOutcome(o) = o { Some(o.record.hash) } else { None }).collect()
}

/// `world` is reserved in every transition output.
fn reserve_world(v: Value) -> Result<Map<String, Value>, CallError> {
    match v {
        Value::Object(m) if m.contains_key("world") => {
            Err(CallError::Convention("the output used the reserved key `world`".into()))
        }
        Value::Object(m) => Ok(m),
        _ => Err(CallError::NotAnObject),
    }
}

fn with_world(
    mut fields: Map<String, Value>,
    effects: Vec<(String, &'static str, Option<Ref>)>,
    plan: Option<Ref>,
) -> Value {
    let effects: Vec<Value> = effects
        .into_iter()
        .map(|(id, status, record)| json!({"id": id, "status": status, "record": record.map(|r| r.to_string())}))
        .collect();
    fields.insert("world".into(), json!({"effects": effects, "plan": plan.map(|p| p.to_string())}));
    Value::Object(fields)
}

fn is_effect_id(s: &str) -> bool {
    (1..=16).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// The plan laws of this release.
fn check_plan(out: Value, d: &Descriptor) -> Result<Plan, CallError> {
    let bad = |why: String| Err(CallError::Convention(why));
    let Value::Object(m) = &out else { return Err(CallError::NotAnObject) };
    if m.get("plan").and_then(Value::as_str) != Some(EFFECT_PLAN) {
        return bad(format!("the plan phase must return {{\"plan\":\"{EFFECT_PLAN}\",…}}"));
    }
    let finish = match m.get("finish") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return bad("plan.finish must be a boolean".into()),
    };
    let items = match m.get("effects") {
        Some(Value::Array(a)) => a,
        _ => return bad("plan.effects must be an array".into()),
    };
    if items.len() > PLAN_EFFECTS_MAX {
        return bad(format!("a plan may request at most {PLAN_EFFECTS_MAX} effect"));
    }
    let mut effects = vec![];
    let mut ids = std::collections::HashSet::new();
    for item in items {
        let id = item.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        if !is_effect_id(&id) || !ids.insert(id.clone()) {
            return bad(format!("effect id {id:?} must be unique and match [a-z0-9]{{1,16}}"));
        }
        let effect = item.get("effect").and_then(Value::as_str).unwrap_or_default().to_string();
        let scope = item.get("scope").and_then(Value::as_str).unwrap_or_default().to_string();
        let cost = item.get("cost").and_then(Value::as_u64);
        let Some(cost) = cost else { return bad(format!("effect {id}: cost must be a non-negative integer")) };
        let triple = registry::Access { effect: effect.clone(), scope: scope.clone(), cost };
        if !d.declared_effects.contains(&triple) {
            return bad(format!("effect {id}: ({effect}, {scope}, {cost}) is not one of the declared effects"));
        }
        let payload = item.get("payload").cloned().unwrap_or(Value::Null);
        if !payload.is_object() || canonical::to_vec(&payload).len() > PLAN_PAYLOAD_MAX {
            return bad(format!("effect {id}: payload must be a JSON object of at most {PLAN_PAYLOAD_MAX} bytes"));
        }
        effects.push(PlannedEffect { id, effect, scope, cost, payload });
    }
    let result = match m.get("result") {
        None | Some(Value::Null) => None,
        Some(r) => Some(reserve_world(r.clone())?),
    };
    if effects.is_empty() && result.is_none() {
        return bad("a plan without effects must carry a result".into());
    }
    Ok(Plan { effects, finish, result, bytes: canonical::to_vec(&out) })
}

#[cfg(test)]
mod tests {
    /// Dependencies point one way: the coordinator is below the daemon and
    /// the HTTP shell, and reaches them only through `Host`.
    #[test]
    fn the_coordinator_imports_neither_the_daemon_nor_http() {
        let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/coordinator.rs")).unwrap();
        let code: String = source.split("#[cfg(test)]").next().unwrap().to_string();
        for layer in ["crate::daemon", "crate::http", "super::daemon", "super::http"] {
            assert!(!code.contains(layer), "coordinator.rs names {layer}");
        }
        // Grouped imports too: `use crate::{daemon, http}`.
        let uses = code.split(';').filter(|s| s.trim_start().starts_with("use crate::{"));
        for u in uses {
            assert!(!u.contains("daemon") && !u.contains("http"), "coordinator.rs imports {u}");
        }
    }
}
