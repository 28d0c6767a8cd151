//! The replies: a task (its status, artifact and history) in the caller's
//! flavour, a page of tasks, the extended card.

use super::*;

/// Who said a message of a task's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
}

/// One message of a task's history: the request, or the agent's reply.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageView<'a> {
    pub message_id: String,
    pub role: Role,
    /// Its one data part's data: the skill's arguments, or the output.
    pub data: &'a Value,
}

/// What a committed task produced.
#[derive(Debug, Clone, Copy)]
pub struct CommittedView<'a> {
    /// The transition's output object.
    pub output: &'a Value,
    /// `a2a:<episode>:<task>`.
    pub invocation_id: &'a str,
    pub world_ref: &'a str,
    pub entry_index: u64,
}

/// A task as the replies show it.
#[derive(Debug, Clone)]
pub struct TaskView<'a> {
    pub task_id: &'a str,
    /// The request's `contextId`; the task id when absent.
    pub context_id: Option<&'a str>,
    pub state: TaskStateName,
    /// When the task reached its state (Unix seconds).
    pub timestamp: Option<u64>,
    pub committed: Option<CommittedView<'a>>,
    /// The messages shown, oldest first (already cut to `historyLength`).
    pub history: Vec<MessageView<'a>>,
    /// The agent's word with the state (what an `input-required` task waits for).
    pub status_message: Option<MessageView<'a>>,
}

/// A task's messages: the request (when its arguments are known) and the
/// agent's reply (when it committed).
pub fn task_messages<'a>(
    task_id: &str,
    message_id: Option<&str>,
    arguments: Option<&'a Value>,
    output: Option<&'a Value>,
) -> Vec<MessageView<'a>> {
    let request = arguments.map(|data| MessageView {
        message_id: message_id.unwrap_or(task_id).to_owned(),
        role: Role::User,
        data,
    });
    let reply = output.map(|data| MessageView {
        message_id: format!("{task_id}{REPLY_MESSAGE_SUFFIX}"),
        role: Role::Agent,
        data,
    });
    request.into_iter().chain(reply).collect()
}

/// The last `n` of `messages` (all when `n` is absent, as A2A 1.0 §3.2.4 allows).
pub fn last<T>(mut messages: Vec<T>, n: Option<u32>) -> Vec<T> {
    if let Some(n) = n {
        let keep = (n as usize).min(messages.len());
        messages.drain(..messages.len() - keep);
    }
    messages
}

pub(super) fn message_value(flavor: Flavor, task_id: &str, context_id: &str, m: &MessageView<'_>) -> Value {
    let role = match (flavor, m.role) {
        (Flavor::V10, Role::User) => "ROLE_USER",
        (Flavor::V10, Role::Agent) => "ROLE_AGENT",
        (_, Role::User) => "user",
        (_, Role::Agent) => "agent",
    };
    match flavor {
        Flavor::V10 => json!({
            "messageId": m.message_id, "contextId": context_id, "taskId": task_id, "role": role,
            "parts": [{"data": m.data}],
        }),
        _ => json!({
            "kind": "message", "messageId": m.message_id, "contextId": context_id, "taskId": task_id,
            "role": role, "parts": [{"kind": "data", "data": m.data}],
        }),
    }
}

fn task_value(flavor: Flavor, t: &TaskView<'_>, artifacts: bool) -> Value {
    let metadata = t.committed.map(|c| {
        json!({
            "invocation_id": c.invocation_id,
            "world_ref": c.world_ref,
            "entry_index": c.entry_index,
        })
    });
    let output = t.committed.map(|c| c.output);
    if flavor == Flavor::Legacy01 {
        // The seed's shape: a committed task, or one waiting for input.
        if let Some(m) = &t.status_message {
            let message = json!({"role": "agent", "parts": [{"type": "data", "data": m.data}]});
            return json!({"id": t.task_id, "status": {"state": t.state.v03(), "message": message}});
        }
        return json!({
            "id": t.task_id,
            "status": {"state": t.state.v03()},
            "artifacts": [{"parts": [{"type": "data", "data": output}]}],
            "metadata": metadata,
        });
    }
    let context_id = t.context_id.unwrap_or(t.task_id);
    let mut status = Map::new();
    status.insert("state".into(), json!(t.state.name(flavor)));
    if let Some(at) = t.timestamp {
        status.insert("timestamp".into(), json!(iso8601(at)));
    }
    if let Some(m) = &t.status_message {
        status.insert("message".into(), message_value(flavor, t.task_id, context_id, m));
    }
    let mut task = Map::new();
    task.insert("id".into(), json!(t.task_id));
    task.insert("contextId".into(), json!(context_id));
    task.insert("status".into(), Value::Object(status));
    if let (true, Some(output)) = (artifacts, output) {
        let part = match flavor {
            Flavor::V10 => json!({"data": output}),
            _ => json!({"kind": "data", "data": output}),
        };
        task.insert("artifacts".into(), json!([{"artifactId": ARTIFACT_ID, "parts": [part]}]));
    }
    if !t.history.is_empty() {
        let history = t.history.iter().map(|m| message_value(flavor, t.task_id, context_id, m)).collect();
        task.insert("history".into(), Value::Array(history));
    }
    if let Some(m) = metadata {
        task.insert("metadata".into(), m);
    }
    if flavor == Flavor::V03 {
        task.insert("kind".into(), json!("task"));
    }
    Value::Object(task)
}

/// The reply to a send: the Task (1.0 wraps it as `{"task":…}`, the
/// `SendMessageResponse` oneof).
pub fn task_completed(flavor: Flavor, jsonrpc_id: &RpcId, task: &TaskView<'_>) -> A2aReply {
    let t = task_value(flavor, task, true);
    match flavor {
        Flavor::V10 => result(jsonrpc_id, json!({ "task": t })),
        _ => result(jsonrpc_id, t),
    }
}

/// The reply to a get: the Task itself, in every flavour.
pub fn task_snapshot(flavor: Flavor, jsonrpc_id: &RpcId, task: &TaskView<'_>) -> A2aReply {
    result(jsonrpc_id, task_value(flavor, task, true))
}

/// One page of `ListTasks` (1.0's `ListTasksResponse`): artifacts only when
/// asked for (then the field is omitted, not empty); `next_page_token` empty
/// on the last page.
pub fn task_list(
    jsonrpc_id: &RpcId,
    tasks: &[TaskView<'_>],
    include_artifacts: bool,
    next_page_token: &str,
    page_size: u32,
    total_size: u64,
) -> A2aReply {
    let tasks: Vec<Value> = tasks.iter().map(|t| task_value(Flavor::V10, t, include_artifacts)).collect();
    result(
        jsonrpc_id,
        json!({"tasks": tasks, "nextPageToken": next_page_token, "pageSize": page_size, "totalSize": total_size}),
    )
}

/// The reply to `GetExtendedAgentCard`: the card itself.
pub fn extended_card(jsonrpc_id: &RpcId, card: Value) -> A2aReply {
    result(jsonrpc_id, card)
}
