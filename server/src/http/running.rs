//! A call its client follows as a task (`coordinator::tasks`), as the
//! surfaces tell it while it runs: how long it has run, when it stops, the
//! tail of its output where it runs here, whether a cancel was asked.

use crate::coordinator::SharedHost;
use crate::coordinator::tasks::{self, Followed};
use serde_json::{Value, json};
use world_protocol::a2a::iso8601;
use world_protocol::mcp::{self, HostFailure};
use world_store::{CancelAsk, Surface, TaskKey};

/// A running task's status as data (the A2A status message's data part).
pub(super) fn working_data(f: &Followed, now: u64) -> Value {
    let Followed::Working { started_at, deadline_at, cancel_asked_at, tail } = f else { return Value::Null };
    let mut running = json!({
        "elapsedSeconds": now.saturating_sub(*started_at),
        "stopsAt": iso8601(*deadline_at),
        "cancelAsked": cancel_asked_at.is_some(),
    });
    if let Some((text, bytes)) = tail {
        running["outputTail"] = json!(text);
        running["outputBytes"] = json!(bytes);
    }
    json!({ "running": running })
}

/// A running task's status in words (the MCP `statusMessage`).
pub(super) fn working_text(f: &Followed, now: u64) -> String {
    let Followed::Working { started_at, deadline_at, cancel_asked_at, tail } = f else { return String::new() };
    let mut text = format!(
        "running for {} s; stopped at {} if it has not ended",
        now.saturating_sub(*started_at),
        iso8601(*deadline_at)
    );
    if cancel_asked_at.is_some() {
        text.push_str("; a cancel was asked and is being carried out");
    }
    match tail {
        Some((out, bytes)) if *bytes > 0 => text.push_str(&format!("; {bytes} bytes of output, the last:\n{out}")),
        Some(_) => text.push_str("; no output yet"),
        None => text.push_str("; no output reported yet"),
    }
    text
}

/// How often an MCP client is asked to poll a running task.
const POLL_INTERVAL_MS: u64 = crate::coordinator::tasks::TASK_POLL_INTERVAL.as_millis() as u64;

/// A task just created, as a `CreateTaskResult` tells it.
pub(super) fn created(started: &crate::coordinator::tasks::TaskStarted) -> mcp::TaskView {
    let working = Followed::Working {
        started_at: started.started_at,
        deadline_at: started.deadline_at,
        cancel_asked_at: None,
        tail: None,
    };
    mcp::TaskView {
        task_id: started.task_id.clone(),
        state: mcp::TaskState::Working,
        status_message: Some(working_text(&working, started.started_at)),
        created_at: started.started_at,
        last_updated_at: started.started_at,
        // Tasks are kept with the log: a poll resolves as long as the store does.
        ttl_ms: None,
        poll_interval_ms: POLL_INTERVAL_MS,
    }
}

/// A task as `tasks/get` tells it.
pub(super) fn mcp_view(task_id: &str, created_at: u64, f: Followed, now: u64) -> mcp::TaskView {
    let (state, status_message, last_updated_at) = match f {
        Followed::Working { cancel_asked_at, .. } => {
            let text = working_text(&f, now);
            (mcp::TaskState::Working, Some(text), cancel_asked_at.unwrap_or(created_at))
        }
        Followed::Ended { outcome, cancelled: false } => {
            (mcp::TaskState::Completed { output: outcome.output }, None, outcome.ended_at)
        }
        Followed::Ended { outcome, cancelled: true } => {
            let text = format!(
                "cancelled: its command was stopped and the effect recorded as cancelled, debited once \
                 (log entry {}); what output it had is in its effect record",
                outcome.committed.entry_index
            );
            (mcp::TaskState::Cancelled, Some(text), outcome.ended_at)
        }
        Followed::Failed { ended_at, why, .. } => (mcp::TaskState::failed_internally(why.clone()), Some(why), ended_at),
    };
    mcp::TaskView {
        task_id: task_id.to_string(),
        state,
        status_message,
        created_at,
        last_updated_at,
        ttl_ms: None,
        poll_interval_ms: POLL_INTERVAL_MS,
    }
}

/// The answer to a `tasks/get`, `tasks/update` or `tasks/cancel` of the
/// caller's episode's MCP task `request.task_id`.
pub(super) async fn answer(host: &SharedHost, episode: &str, request: &mcp::TaskRequest) -> mcp::TaskOutcome {
    let key = TaskKey { surface: Surface::Mcp, episode: episode.to_string(), task_id: request.task_id.clone() };
    let now = crate::clock::now();
    let followed = match tasks::follow(host, &key).await {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(mcp::TaskAnswer::NotFound),
        Err(e) => {
            note!("worldd: mcp refusal: {} {}: {e}", request.method.name(), key.invocation_id());
            return Err(HostFailure::Failed);
        }
    };
    let status = |f: &Followed| match f {
        Followed::Working { .. } => mcp::TaskStatus::Working,
        Followed::Ended { cancelled: true, .. } => mcp::TaskStatus::Cancelled,
        Followed::Ended { .. } => mcp::TaskStatus::Completed,
        Followed::Failed { .. } => mcp::TaskStatus::Failed,
    };
    match &request.method {
        mcp::TaskMethod::Get => {
            let created_at = created_at(host, &key).await.unwrap_or(now);
            Ok(mcp::TaskAnswer::Found(mcp_view(&request.task_id, created_at, followed, now)))
        }
        // World asks nothing of a running task: there is no outstanding
        // request to answer, so the responses are ignored, as the spec says.
        mcp::TaskMethod::Update { .. } => match status(&followed) {
            mcp::TaskStatus::Working => Ok(mcp::TaskAnswer::Acknowledged),
            ended => Ok(mcp::TaskAnswer::Ended(ended)),
        },
        mcp::TaskMethod::Cancel => match tasks::cancel(host, &key).await {
            Ok(CancelAsk::Asked | CancelAsk::AskedBefore(_)) => Ok(mcp::TaskAnswer::Acknowledged),
            // Idempotent, as the conformance suite asks: a client may cancel
            // on close what already ended; tasks/get tells how it did.
            Ok(CancelAsk::Ended(_)) => Ok(mcp::TaskAnswer::Acknowledged),
            Ok(CancelAsk::Unknown | CancelAsk::NotARun) => Ok(mcp::TaskAnswer::NotFound),
            Err(e) => {
                note!("worldd: mcp refusal: tasks/cancel {}: {e}", key.invocation_id());
                Err(HostFailure::Failed)
            }
        },
    }
}

/// When the task was created (its row's start).
async fn created_at(host: &SharedHost, key: &TaskKey) -> Option<u64> {
    let (d, key) = (host.clone(), key.clone());
    tokio::task::spawn_blocking(move || d.store().snapshot().and_then(|s| s.task(&key)).ok().flatten())
        .await
        .ok()
        .flatten()
        .map(|t| t.started_at)
}
