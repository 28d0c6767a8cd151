//! The invocation coordinator: one agent call in, one committed log entry out.
//!
//! admit (fresh grant-filtered view) → task row durable → R8 → plan (≤ 2 s) →
//! broker (name → scope → liveness → budget; intent + debit in one
//! transaction) → handler → outcome + record → finish (≤ 2 s) → commit.
//! A call runs on its caller's task and, should the caller go away first,
//! on a task of its own (`detach`), so a client that disconnects cannot
//! cancel it half-way; once an effect's intent is durable, the remaining steps
//! have a 4 s budget, and any failure there is `EffectsUnrecorded`.
//!
//! Each phase is a file, read in the order a call goes through them: `admit`
//! (→ `Admitted`, or a resent task id's stored `Outcome`), `plan` (→
//! `Planned`), `broker` (one effect → `Brokered`: its intent and debit
//! durable, or its denial; for a grant that asks, `approve` first finds or
//! opens the approval of the exact request and goes on only with a yes, or
//! stops the call `ApprovalPending` with nothing run or debited), `execute`
//! (the handler → the effect's
//! `Recorded`), `commit` (the output, the invocation record, the entry).
//! `write` queues and settles the call's durable batches for all of them. A
//! phase uses this module's items and earlier phases, never a later one.

mod admit;
mod approve;
mod broker;
mod changes;
mod commit;
mod detach;
mod execute;
mod plan;
pub mod tasks;
mod write;

use crate::effects::worktree::Worktrees;
use crate::registry::{self, Descriptor, Registry};
use crate::runtime::Runtimes;
use admit::{InFlight, admit, request_digest, resume, task_key};
use commit::with_world;
use detach::RunsToEnd;
use plan::Planned;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasks::{RunningSlot, TaskLimits, TaskStarted};
use world_store::*;

/// What a call runs against. The daemon provides it; the coordinator knows
/// nothing else of the daemon (nor of HTTP).
pub trait Host: Send + Sync + 'static {
    fn store(&self) -> &dyn WorldStore;
    fn coordinator(&self) -> &Coordinator;
    fn runtimes(&self) -> &Runtimes;
    fn worktrees(&self) -> &Worktrees;
    fn metrics(&self) -> &crate::metrics::Metrics;
    /// How long an approval waits for a person, and an approved effect to run.
    fn approval_ttl(&self) -> u64;
    /// What this daemon allows of tasks.
    fn task_limits(&self) -> TaskLimits;
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
    /// The session's credential id: an approval binds it.
    pub credential: Ref,
    /// A person's answer to the approval this call asked for earlier, as the
    /// surface read it (an MCP client's elicitation result, an A2A message).
    pub answer: Option<Answer>,
    /// Admission's reads that do not depend on the call, when the surface
    /// took them on the snapshot that resolved the session and named the
    /// task id itself (so no row of it can exist): admission then reads
    /// nothing more (no second glance, and on a remote store no second hop
    /// to the blocking pool). The call's write checks each of them again.
    pub glanced: Option<Glanced>,
    /// The client can follow a task (MCP with the Tasks extension declared
    /// on this request, A2A `returnImmediately`): a command then runs as
    /// one (`invoke_or_start`).
    pub may_run_as_task: bool,
}

/// What admission reads for any call: the registry and whether a world is
/// selected (`Coordinator::glance`).
#[derive(Clone, Debug)]
pub struct Glanced {
    registry: Option<Arc<Registry>>,
    has_world: bool,
}

/// A person's answer, carried by the call that retries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub approval_id: String,
    /// `None`: the person dismissed the question (nothing decided).
    pub verdict: Option<crate::approvals::Verdict>,
    pub by: crate::approvals::Decider,
}

/// A call waiting for a person: nothing ran, nothing was debited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingApproval {
    pub id: String,
    /// Only the operator may decide.
    pub approver: Approver,
    /// What the person is asked, in words.
    pub summary: String,
    pub effect: String,
    pub scope: String,
    pub cost: u64,
    pub budget_left: u64,
    pub expires_at: u64,
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
    /// An effect waits for a person's approval; nothing ran or was debited.
    #[error("approval {} is pending: {}", .0.id, .0.summary)]
    ApprovalPending(Box<PendingApproval>),
    /// The answer the call carried cannot decide its approval (decided or
    /// used already, expired, another request's, not the caller's to give).
    #[error("{0}")]
    ApprovalAnswer(String),
    /// The call would run as a task, and as many run as allowed: nothing
    /// ran or was debited.
    #[error("{0}")]
    TasksBusy(String),
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
            CallError::ApprovalPending(_) => "approval_pending",
            CallError::ApprovalAnswer(_) => "approval_answer",
            CallError::TasksBusy(_) => "tasks_busy",
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
    /// Tasks whose commands run on this node.
    running: Mutex<HashMap<TaskKey, Arc<tasks::Running>>>,
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

    /// Admission's call-independent reads, on `snap`.
    pub fn glance(&self, snap: &Snapshot) -> Result<Glanced, String> {
        let registry = self.registry(snap).map_err(|e| e.to_string())?;
        let has_world = self.has_world(snap).map_err(|e| e.to_string())?;
        Ok(Glanced { registry, has_world })
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

    /// Whether `id` names a transition of the registry last read: only such ids
    /// become metric labels, so a caller cannot fill the label set with names
    /// of its own making.
    fn registered(&self, id: &str) -> bool {
        let cache = self.registry_cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.as_ref().is_some_and(|(_, registry)| registry.get(id).is_some())
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

/// The metric label of a call whose tool id the registry does not hold.
const UNKNOWN_TOOL_LABEL: &str = "unknown";

/// How a call that may run as a task was answered.
#[derive(Debug)]
pub enum Answered {
    Ended(Outcome),
    /// Its command runs on as a task: a poll of its id resolves.
    Running(TaskStarted),
}

/// Runs one call to completion in its own task, bounded by the invocation deadline.
pub async fn invoke(host: &SharedHost, call: Call) -> Result<Outcome, CallError> {
    invoke_measured(host, call, None).await
}

/// As `invoke`, but a call that runs a command and may run as a task is
/// answered once its intent and debit are durable: its command runs on,
/// past the request, to the task's own deadline.
pub async fn invoke_or_start(host: &SharedHost, call: Call) -> Result<Answered, CallError> {
    if !call.may_run_as_task {
        return invoke(host, call).await.map(Answered::Ended);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let ended = invoke_measured(host, call, Some(tx));
    tokio::pin!(ended);
    tokio::select! {
        biased;
        // Dropping the call here hands it to a task of its own (`RunsToEnd`).
        Ok(started) = rx => Ok(Answered::Running(started)),
        r = &mut ended => r.map(Answered::Ended),
    }
}

async fn invoke_measured(
    host: &SharedHost,
    call: Call,
    started: Option<tokio::sync::oneshot::Sender<TaskStarted>>,
) -> Result<Outcome, CallError> {
    if !host.metrics().is_on() {
        return invoke_detached(host, call, started).await;
    }
    let (surface, tool) = (call.surface, call.transition_id.clone());
    let began = std::time::Instant::now();
    let _in_flight = host.metrics().in_flight();
    let ended = invoke_detached(host, call, started).await;
    let outcome = match &ended {
        Ok(_) => "committed",
        Err(e) => e.kind(),
    };
    let tool = if host.coordinator().registered(&tool) { tool.as_str() } else { UNKNOWN_TOOL_LABEL };
    host.metrics().call(surface.as_str(), tool, outcome, began.elapsed().as_secs_f64());
    ended
}

async fn invoke_detached(
    host: &SharedHost,
    call: Call,
    started: Option<tokio::sync::oneshot::Sender<TaskStarted>>,
) -> Result<Outcome, CallError> {
    let d = host.clone();
    let task = RunsToEnd::new(async move { run(&d, call, started).await });
    match tokio::time::timeout(INVOCATION_DEADLINE, task).await {
        Err(_) => Err(CallError::Deadline),
        Ok(Err(_panic)) => Err(CallError::Unavailable("invocation task failed: it panicked".into())),
        Ok(Ok(r)) => r,
    }
}

/// One call, admission to commit, run to its end by `invoke_detached`.
async fn run(
    host: &SharedHost,
    call: Call,
    started: Option<tokio::sync::oneshot::Sender<TaskStarted>>,
) -> Result<Outcome, CallError> {
    let admitted = admit(host, &call).await?;
    // The arguments' canonical bytes: the input object, and the digest's part.
    let input = canonical::to_vec(&call.arguments);
    let digest = request_digest(&call, &input);
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
    // Only a command runs long enough to be worth a task.
    let runs_command = d.declared_effects.iter().any(|e| e.effect == crate::effects::worktree::EXEC);
    let task = match started {
        Some(started) if runs_command => {
            Some(AsTask { slot: host.coordinator().running_slot(&key, host.task_limits())?, started: Some(started) })
        }
        _ => None,
    };
    let mut inv = Invocation {
        host,
        call: &call,
        d: &d,
        invocation_id: key.invocation_id(),
        key,
        digest,
        created: false,
        ran: false,
        journaled: vec![],
        task,
        held: None,
    };
    let ended = inv.complete(input).await;
    if inv.task.is_some() {
        let status = match &ended {
            Ok(o) if o.output["cancelled"] == true => "cancelled",
            Ok(_) => "completed",
            Err(_) => "failed",
        };
        host.metrics().task_ended(status);
    }
    match ended {
        Ok(outcome) => Ok(outcome),
        Err(Resumed(task)) => resume(host, &call, *task, digest).await,
        // Nothing of the call is durable: no task row, intent or debit.
        Err(Failed(e @ (CallError::ApprovalPending(_) | CallError::ApprovalAnswer(_)))) if !inv.created => Err(e),
        Err(Failed(e)) => {
            inv.record_end(&e).await;
            Err(e)
        }
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
    /// The key's invocation id, spelled once.
    invocation_id: String,
    digest: Ref,
    /// The task row is durable.
    created: bool,
    /// An effect's intent is durable: from here on, failures are EffectsUnrecorded.
    ran: bool,
    /// Effect records whose outcomes are durable.
    journaled: Vec<Ref>,
    /// Set when the call runs as a task.
    task: Option<AsTask<'a>>,
    /// The episode's effect lock and its hold among nodes, while held.
    held: Option<Held>,
}

/// A call run as a task: its place among the running ones, and the word
/// its surface waits for.
struct AsTask<'a> {
    slot: RunningSlot<'a>,
    /// Taken when the task is told started.
    started: Option<tokio::sync::oneshot::Sender<TaskStarted>>,
}

/// The episode's effect lock and its hold among nodes (in a mutex only so
/// that the call's state may be shared across its awaits).
struct Held {
    lock: tokio::sync::OwnedMutexGuard<()>,
    hold: Mutex<EpisodeHold>,
}

impl Invocation<'_> {
    /// The admitted call, phase by phase, to its commit; `input` is its
    /// arguments' canonical bytes.
    async fn complete(&mut self, input: Vec<u8>) -> Result<Outcome, Stop> {
        let args = &self.call.arguments;
        let input = self.object(INVOCATION_INPUT, input);
        let plan = match self.plan(args).await? {
            // A pure call is one batch: its task row and its commit.
            Planned::Pure(result) => return self.commit(vec![], input, with_world(result, vec![], None), None).await,
            Planned::Effects(plan) => plan,
        };
        let plan_obj = self.object(EFFECT_PLAN, plan.bytes.clone());
        // The effects of one episode run one at a time: its worktree and budget
        // are shared. Planning needs no lock (plans are pure), and commits are
        // rebased, so calls of one episode still share group commits.
        let lock = self.host.coordinator().episode_lock(&self.call.episode).lock_owned().await;
        // Other nodes sharing the store run the episode's effects only once
        // this call's commit is durable: their writers do not queue behind ours.
        let hold = self.hold_episode().await?;
        self.held = Some(Held { lock, hold: Mutex::new(hold) });
        let mut effects = self.effects(&plan).await?;
        let ran = self.ran;
        let post = async {
            let outcomes = self.outcomes_to_commit(&plan, &mut effects).await?;
            let output = self.compose(args, &plan, &effects.recorded, plan_obj.hash).await?;
            let ran = commit::Ran::of(plan_obj, effects, self.held.take());
            self.commit(outcomes, input, output, Some(ran)).await
        };
        // Once an intent is durable the rest is bounded apart: past the budget
        // the call answers EffectsUnrecorded, naming the records journaled.
        if !ran {
            return post.await;
        }
        match tokio::time::timeout(POST_EFFECT_BUDGET, post).await {
            Ok(r) => r,
            Err(_) => Err(Failed(self.unrecorded("the post-effect steps exceeded their 4 s budget"))),
        }
    }

    fn provenance(&self) -> String {
        format!("coordinator:{}", self.call.surface.as_str())
    }

    fn object(&self, semantic_id: &str, payload: Vec<u8>) -> NewObject {
        NewObject::derived(semantic_id, &self.provenance(), payload)
    }

    /// After an effect ran, every failure is EffectsUnrecorded naming the records.
    fn unrecorded(&self, cause: impl std::fmt::Display) -> CallError {
        if !self.ran {
            return CallError::NotCommitted(cause.to_string());
        }
        CallError::EffectsUnrecorded { records: self.journaled.clone(), cause: cause.to_string() }
    }
}

#[cfg(test)]
mod tests {
    /// Dependencies point one way: the coordinator is below the daemon and
    /// the HTTP shell, and reaches them only through `Host`.
    #[test]
    fn the_coordinator_imports_neither_the_daemon_nor_http() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/coordinator");
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let source = std::fs::read_to_string(&path).unwrap();
            let code: String = source.split("#[cfg(test)]").next().unwrap().to_string();
            let file = path.file_name().unwrap().to_string_lossy();
            for layer in ["crate::daemon", "crate::http", "super::daemon", "super::http"] {
                assert!(!code.contains(layer), "coordinator/{file} names {layer}");
            }
            // Grouped imports too: `use crate::{daemon, http}`.
            let uses = code.split(';').filter(|s| s.trim_start().starts_with("use crate::{"));
            for u in uses {
                assert!(!u.contains("daemon") && !u.contains("http"), "coordinator/{file} imports {u}");
            }
            files += 1;
        }
        assert!(files > 1, "the coordinator's phases are files in {dir}");
    }
}
