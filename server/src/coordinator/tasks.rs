//! A call its client follows as a task (MCP Tasks, A2A `returnImmediately`):
//! admitted, brokered (approvals included) and debited as any call, then
//! answered as soon as its effect's intent and debit are durable, while its
//! command runs on after the request, to its own deadline. The task row says
//! so (`TaskRun`: the deadline, a cancel once asked), so any node answers a
//! poll from the store; the node running the command keeps the tail of its
//! output and a stop in memory (`Running`), and reads the row for a cancel
//! another node took. A daemon that dies takes its commands with it (each
//! run's init dies with its helper), and recovery ends their tasks
//! `uncertain`: they read failed, their effect indeterminate, debited once,
//! never run again.

use super::admit::committed_output;
use super::{CallError, Coordinator, Outcome, SharedHost};
use crate::confine::RunStop;
use crate::effects::worktree::{RunControl, RunningTail};
use crate::glances::{Unread, glance};
use std::sync::{Arc, Weak};
use std::time::Duration;
use world_store::*;

/// A command's deadline when run as a task, unless `serve --exec-timeout` says.
pub const EXEC_TIMEOUT_DEFAULT: Duration = Duration::from_secs(600);
/// The longest `--exec-timeout` taken.
pub const EXEC_TIMEOUT_MAX: Duration = Duration::from_secs(4 * 3600);
/// Tasks running on one daemon at once, unless `serve --tasks-max` says.
pub const TASKS_RUNNING_MAX: usize = 16;
/// Tasks of one episode running on one daemon at once.
pub const TASKS_PER_EPISODE_MAX: usize = 4;
/// How often a client is asked to poll a running task.
pub const TASK_POLL_INTERVAL: Duration = Duration::from_secs(2);
/// How often a running task's node reads its row for a cancel asked of
/// another node (one asked here stops it at once).
pub const CANCEL_WATCH_INTERVAL: Duration = Duration::from_millis(500);
/// How often the node running a task writes how far its command has got
/// into the task's row, for the other nodes of a shared store.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);
/// Past its command's deadline, the steps that record and commit it.
pub const TASK_FINISH_GRACE: Duration = Duration::from_secs(10);

/// What a daemon allows of tasks.
#[derive(Clone, Copy, Debug)]
pub struct TaskLimits {
    pub exec_timeout: Duration,
    pub running_max: usize,
}

impl Default for TaskLimits {
    fn default() -> TaskLimits {
        TaskLimits { exec_timeout: EXEC_TIMEOUT_DEFAULT, running_max: TASKS_RUNNING_MAX }
    }
}

/// A task whose command runs on this node.
#[derive(Debug)]
pub struct Running {
    pub episode: String,
    pub started_at: u64,
    pub deadline_at: u64,
    pub stop: Arc<RunStop>,
    pub tail: Arc<RunningTail>,
}

/// What the surface answers once a task exists: a poll of its id resolves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskStarted {
    pub task_id: String,
    pub started_at: u64,
    pub deadline_at: u64,
}

/// A task's place among the running ones, given up when its call ends.
pub(super) struct RunningSlot<'a> {
    coordinator: &'a Coordinator,
    key: TaskKey,
    pub(super) running: Arc<Running>,
}

impl Drop for RunningSlot<'_> {
    fn drop(&mut self) {
        self.coordinator.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
    }
}

impl RunningSlot<'_> {
    /// How the command is run: its deadline, its stop and its tail.
    pub(super) fn control(&self, limits: TaskLimits) -> RunControl {
        RunControl {
            deadline: Some(limits.exec_timeout),
            stop: Some(self.running.stop.clone()),
            tail: Some(self.running.tail.clone()),
        }
    }

    pub(super) fn run(&self) -> TaskRun {
        TaskRun { deadline_at: self.running.deadline_at, cancel_asked_at: None, progress: None }
    }
}

impl Coordinator {
    /// The task of `key` if its command runs on this node.
    pub fn running(&self, key: &TaskKey) -> Option<Arc<Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Tasks running on this node.
    pub fn running_count(&self) -> usize {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// A place for a new task, or why there is none (said to the caller).
    pub(super) fn running_slot(&self, key: &TaskKey, limits: TaskLimits) -> Result<RunningSlot<'_>, CallError> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.len() >= limits.running_max {
            return Err(CallError::TasksBusy(format!(
                "{} commands are running as tasks on this daemon, its limit: wait for one to end or cancel one",
                running.len()
            )));
        }
        let here = running.values().filter(|r| r.episode == key.episode).count();
        if here >= TASKS_PER_EPISODE_MAX {
            return Err(CallError::TasksBusy(format!(
                "{here} commands of episode {} are running as tasks, its limit: wait for one to end or cancel one",
                key.episode
            )));
        }
        let started_at = crate::clock::now();
        let running_task = Arc::new(Running {
            episode: key.episode.clone(),
            started_at,
            deadline_at: started_at.saturating_add(limits.exec_timeout.as_secs()),
            stop: Arc::default(),
            tail: Arc::default(),
        });
        running.insert(key.clone(), running_task.clone());
        Ok(RunningSlot { coordinator: self, key: key.clone(), running: running_task })
    }
}

/// Stops the task's command once its row says a cancel was asked (of any
/// node), and on a store other nodes share writes how far the command has
/// got into the row every `PROGRESS_INTERVAL`; ends with the task's run.
pub(super) fn watch(host: &SharedHost, key: TaskKey, running: Weak<Running>) {
    let host = host.clone();
    // One node alone reads an embedded store: its pollers read the tail here.
    let shared = !host.store().glances_are_local();
    let every = (PROGRESS_INTERVAL.as_millis() / CANCEL_WATCH_INTERVAL.as_millis()).max(1) as u64;
    tokio::spawn(async move {
        let (mut tick, mut written) = (0u64, 0u64);
        loop {
            tokio::time::sleep(CANCEL_WATCH_INTERVAL).await;
            let Some(running) = running.upgrade() else { return };
            if running.stop.is_asked() {
                return;
            }
            if let Ok(Some(task)) = read_task(&host, &key).await
                && task.run.is_some_and(|r| r.cancel_asked_at.is_some())
            {
                running.stop.ask();
                return;
            }
            tick += 1;
            if shared && tick.is_multiple_of(every) {
                written = write_progress(&host, &key, &running, written).await;
            }
        }
    });
}

/// Writes the command's progress into its row when it wrote more output
/// since `written` bytes; the count now written.
async fn write_progress(host: &SharedHost, key: &TaskKey, running: &Running, written: u64) -> u64 {
    let (tail, output_bytes) = running.tail.read();
    if output_bytes == written {
        return written;
    }
    let progress = TaskProgress { at: crate::clock::now(), output_bytes, tail };
    match crate::writes::write(host.store(), Op::TaskProgress { task: key.clone(), progress }).await {
        Ok(_) => output_bytes,
        Err(e) => {
            tracing::warn!(invocation = %key.invocation_id(), error = %e, "a task's progress was not written");
            written
        }
    }
}

async fn read_task(host: &SharedHost, key: &TaskKey) -> Result<Option<Task>, CallError> {
    let (d, key) = (host.clone(), key.clone());
    // A task's row is a call's own, which a plain glance may not see yet.
    let read = move || d.store().glance_with_calls().and_then(|s| s.task(&key)).map_err(|e| e.to_string());
    match glance(host.store(), crate::limits::READ_DEADLINE, read).await {
        Err(Unread::Deadline) => Err(CallError::Unavailable("reading the task exceeded its deadline".into())),
        Err(Unread::Failed(why)) => Err(CallError::Unavailable(why)),
        Ok(r) => r.map_err(CallError::Unavailable),
    }
}

/// A task as a poll finds it.
#[derive(Clone, Debug)]
pub enum Followed {
    /// Its command runs (here or on another node).
    Working {
        started_at: u64,
        deadline_at: u64,
        cancel_asked_at: Option<u64>,
        /// The tail of its output and the count of every byte, where it runs here.
        tail: Option<(String, u64)>,
    },
    /// Committed; `cancelled` when its command was stopped by a cancel.
    Ended { outcome: Box<Outcome>, cancelled: bool },
    /// Ended without a commit: what became of its effect.
    Failed { ended_at: u64, why: String },
}

/// What a poll of `key` finds; `None`: no such task, or a call answered
/// in its own request (no task to follow).
pub async fn follow(host: &SharedHost, key: &TaskKey) -> Result<Option<Followed>, CallError> {
    let Some(task) = read_task(host, key).await? else { return Ok(None) };
    let Some(run) = task.run.clone() else { return Ok(None) };
    let ended_at = task.ended_at.unwrap_or(task.started_at);
    Ok(Some(match task.state {
        TaskState::Started => Followed::Working {
            started_at: task.started_at,
            deadline_at: run.deadline_at,
            cancel_asked_at: run.cancel_asked_at,
            // Here where it runs; else as the node running it last wrote it.
            tail: match host.coordinator().running(key) {
                Some(r) => Some(r.tail.read()),
                None => run.progress.map(|p| (p.tail, p.output_bytes)),
            },
        },
        TaskState::Committed => {
            let cancelled = task.effects.iter().any(|e| e.status == EffectStatus::Cancelled);
            let c = task.committed.ok_or_else(|| CallError::Unavailable("committed task without a result".into()))?;
            let output = committed_output(host, c.output_ref).await?;
            let outcome = Outcome {
                invocation_id: key.invocation_id(),
                output,
                committed: c,
                ended_at,
                context: task.context,
                message_id: task.message_id,
            };
            Followed::Ended { outcome: Box::new(outcome), cancelled }
        }
        TaskState::Uncertain => Followed::Failed {
            ended_at,
            why: "the daemon stopped while the command ran: whether it finished is unknown (its effect is \
                  indeterminate); it was debited once and will not run again"
                .into(),
        },
        TaskState::NotCommitted => {
            Followed::Failed { ended_at, why: "the call ended before its command ran; nothing was debited".into() }
        }
    }))
}

/// Asks that a task's command stop: kept in its row (the node running it
/// stops it when it reads it), and at once where it runs here.
pub async fn cancel(host: &SharedHost, key: &TaskKey) -> Result<CancelAsk, CallError> {
    let op = Op::CancelTask { task: key.clone(), at: crate::clock::now() };
    let ask = match crate::writes::queue(host.store(), op).reply().await {
        Ok(Reply::Cancel(ask)) => ask,
        Ok(other) => return Err(CallError::Unavailable(format!("unexpected writer reply {other:?}"))),
        Err(e) => return Err(CallError::Unavailable(format!("store: {e}"))),
    };
    if matches!(ask, CancelAsk::Asked | CancelAsk::AskedBefore(_))
        && let Some(running) = host.coordinator().running(key)
    {
        running.stop.ask();
    }
    Ok(ask)
}

/// What an ask to cancel task `invocation_id` came to, in words: `Err`
/// when there was nothing to cancel.
pub fn said(ask: &CancelAsk, invocation_id: &str) -> Result<String, String> {
    match ask {
        CancelAsk::Asked => Ok(format!(
            "asked task {invocation_id} to stop: the daemon running its command stops it within a second, \
             then it reads cancelled (its debit stays: the command ran)"
        )),
        CancelAsk::AskedBefore(at) => Ok(format!(
            "task {invocation_id} was asked to stop already, at {} UTC; it reads cancelled once its command has stopped",
            crate::clock::utc(*at)
        )),
        CancelAsk::Ended(state) => {
            Err(format!("task {invocation_id} already ended ({}): there is nothing to cancel", state.as_str()))
        }
        CancelAsk::NotARun => Err(format!(
            "{invocation_id} is a call answered in its own request, not a task: it ends within its request's deadline"
        )),
        CancelAsk::Unknown => Err(format!("no task {invocation_id} in this store")),
    }
}
