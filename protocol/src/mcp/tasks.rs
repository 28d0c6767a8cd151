//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`), modern era
//! only: a `tools/call` may be answered with a durable task
//! ([`super::CallAnswer::Task`], rendered as a `CreateTaskResult`), which the
//! client then polls with `tasks/get`, feeds with `tasks/update` and stops
//! with `tasks/cancel`.
//!
//! How the server uses it:
//! - `server/discover` advertises the extension as `{}` (the stock client
//!   turns tasks off for any other value).
//! - A planned [`super::Call`] says in `accepts_task` whether its request
//!   declared the extension; only then may the server answer
//!   [`super::CallAnswer::Task`], once a `tasks/get` for it would resolve.
//! - A `tasks/*` request becomes [`super::Step::Task`] with a
//!   [`TaskRequest`] (already checked: extension declared, `Mcp-Name`
//!   mirroring `taskId`, the id and `inputResponses` bounded). The server
//!   looks the task up for this caller and hands a [`TaskAnswer`] to
//!   [`super::finish_task`].
//!
//! The legacy era knows none of this: `tasks/*` stays method-not-found and a
//! legacy call never accepts a task.

use super::modern::{COMPLETE, CallResult, OwnedServerInfo, ResultMeta, call_result, error_reply, error_status};
use super::{HostFailure, Step, answer_error, answer_error_data, host_failure, json_reply};
use crate::a2a::iso8601;
use crate::rpc::{self, CODE_INTERNAL_ERROR, CODE_INVALID_PARAMS, ErrorObject};
use crate::{HttpReply, RpcId};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The extension's identifier: the key under `capabilities.extensions`, in
/// `server/discover` and in a request's `_meta` client capabilities.
pub const EXTENSION_TASKS: &str = "io.modelcontextprotocol/tasks";
pub const METHOD_TASKS_GET: &str = "tasks/get";
pub const METHOD_TASKS_UPDATE: &str = "tasks/update";
pub const METHOD_TASKS_CANCEL: &str = "tasks/cancel";

/// Longest `params.taskId` accepted, in bytes (World's task ids are far
/// shorter; a longer one cannot name a task, so it is refused unread).
pub const TASK_ID_MAX_BYTES: usize = 256;
/// Deepest nesting of arrays and objects in a `tasks/update`'s
/// `inputResponses` (the object itself is the first level).
pub const INPUT_RESPONSES_DEPTH_MAX: usize = 32;
/// Largest `inputResponses` of a `tasks/update`, as compact JSON bytes.
pub const INPUT_RESPONSES_BYTES_MAX: usize = 256 << 10;
/// The latest instant a timestamp is written as (9999-12-31T23:59:59Z, the
/// last one with a four-digit year); later ones are written as this.
pub const TIMESTAMP_SECS_MAX: u64 = 253_402_300_799;

/// The -32021 message when a request's capabilities lack the extension.
pub const MSG_MISSING_CAPABILITY: &str = "Missing required client capability";
/// The -32603 message when the server's [`TaskAnswer`] does not fit the
/// request (an acknowledgement to `tasks/get`, another task's view, …).
pub const MSG_ANSWER_UNFIT: &str = "host callback answered the task request with an answer that does not fit it";

/// A `tasks/*` method, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum TaskMethodName {
    Get,
    Update,
    Cancel,
}

impl TaskMethodName {
    pub(super) fn of(method: &str) -> Option<TaskMethodName> {
        match method {
            METHOD_TASKS_GET => Some(TaskMethodName::Get),
            METHOD_TASKS_UPDATE => Some(TaskMethodName::Update),
            METHOD_TASKS_CANCEL => Some(TaskMethodName::Cancel),
            _ => None,
        }
    }
}

/// A checked `tasks/get`, `tasks/update` or `tasks/cancel`.
///
/// The server must find `task_id` among this caller's tasks only (another
/// caller's task is [`TaskAnswer::NotFound`], never its state), then answer
/// with [`super::finish_task`].
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRequest {
    pub jsonrpc_id: RpcId,
    /// `params.taskId`: non-empty, at most [`TASK_ID_MAX_BYTES`] bytes, and
    /// equal to the `Mcp-Name` header.
    pub task_id: String,
    pub method: TaskMethod,
}

/// What a [`TaskRequest`] asks of its task, and the answers that fit it.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskMethod {
    /// `tasks/get`: answer [`TaskAnswer::Found`] with the task as it stands.
    Get,
    /// `tasks/update`: deliver the client's answers to the task's
    /// outstanding `inputRequests` (keys the task is not waiting on should
    /// be ignored), then [`TaskAnswer::Acknowledged`]. The object is bounded
    /// by [`INPUT_RESPONSES_BYTES_MAX`] and [`INPUT_RESPONSES_DEPTH_MAX`].
    Update { input_responses: Map<String, Value> },
    /// `tasks/cancel`: ask the task to stop (cooperatively), then
    /// [`TaskAnswer::Acknowledged`]. For a task that already ended the
    /// server picks: [`TaskAnswer::Acknowledged`] again (cancellation as
    /// idempotent, which the MCP conformance suite's
    /// `tasks-cancel-terminal-idempotent-ack` expects, and which the stock
    /// client's best-effort cancel on close meets) or [`TaskAnswer::Ended`]
    /// to refuse it naming the status.
    Cancel,
}

impl TaskMethod {
    /// The JSON-RPC method name.
    pub fn name(&self) -> &'static str {
        match self {
            TaskMethod::Get => METHOD_TASKS_GET,
            TaskMethod::Update { .. } => METHOD_TASKS_UPDATE,
            TaskMethod::Cancel => METHOD_TASKS_CANCEL,
        }
    }
}

/// A task's status as the extension names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    /// The wire name (`working`, `input_required`, `completed`, `failed`,
    /// `cancelled`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Completed, failed and cancelled are final.
    pub fn is_terminal(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled)
    }
}

/// Where a task stands, with what its status carries in a `tasks/get`.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskState {
    Working,
    /// Waiting on the client: the `inputRequests` object as it goes on the
    /// wire (World settles approvals before it creates a task, so it has no
    /// use for this today).
    InputRequired {
        input_requests: Value,
    },
    /// The call ended with a result: the transition's output, rendered as
    /// the `CallToolResult` a synchronous call would have answered (a tool's
    /// own failure is `isError: true` inside it, still `completed`). An
    /// output that is not a JSON object is rendered as `failed` with the
    /// -32603 the synchronous call would have answered.
    Completed {
        output: Value,
    },
    /// The call ended with a JSON-RPC error (never a tool's own failure).
    /// Without a `status_message` on the view, the error's message is sent
    /// as the `statusMessage` too.
    Failed {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    Cancelled,
}

impl TaskState {
    /// A task whose call ended with an internal error (-32603), `message`
    /// saying why (its daemon stopped while it ran, its call failed).
    pub fn failed_internally(message: String) -> TaskState {
        TaskState::Failed { code: crate::rpc::CODE_INTERNAL_ERROR, message, data: None }
    }

    pub fn status(&self) -> TaskStatus {
        match self {
            TaskState::Working => TaskStatus::Working,
            TaskState::InputRequired { .. } => TaskStatus::InputRequired,
            TaskState::Completed { .. } => TaskStatus::Completed,
            TaskState::Failed { .. } => TaskStatus::Failed,
            TaskState::Cancelled => TaskStatus::Cancelled,
        }
    }
}

/// A task as the client is told of it: in a `CreateTaskResult` (the fields
/// of the task alone, `state`'s payload left out) or a `GetTaskResult` (with
/// the payload of its status).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// Unguessable: it is all a client needs to reach the task.
    pub task_id: String,
    pub state: TaskState,
    /// Optional text for any status (progress, why it was cancelled, …).
    pub status_message: Option<String>,
    /// Unix seconds, written as ISO 8601 UTC (`2026-12-07T10:30:00Z`).
    pub created_at: u64,
    /// Unix seconds of the last change of state, written likewise.
    pub last_updated_at: u64,
    /// How long after creation the task may be discarded; `None` is
    /// unlimited (`ttlMs: null`; the field is always sent).
    pub ttl_ms: Option<u64>,
    /// How often the client should poll (the stock client polls every
    /// second without it).
    pub poll_interval_ms: u64,
}

/// The server's answer to a [`TaskRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum TaskAnswer {
    /// `tasks/get`: the task, as a `GetTaskResult`. Its `task_id` must be
    /// the request's (anything else is -32603).
    Found(TaskView),
    /// `tasks/update` or `tasks/cancel` accepted: `{resultType: "complete"}`.
    Acknowledged,
    /// No task by that id for this caller (never created, purged, expired or
    /// another caller's): -32602, "Failed to retrieve task: Task not found"
    /// (or "update"/"cancel").
    NotFound,
    /// `tasks/update` or `tasks/cancel` of a task that already ended, with
    /// its terminal status: -32602, "Cannot cancel task: it already ended
    /// (completed)" (see [`TaskMethod::Cancel`] on acknowledging instead).
    Ended(TaskStatus),
    /// Any other JSON-RPC error, sent as given.
    Error { code: i64, message: String, data: Option<Value> },
}

/// What the server reports for a task step; an `Err` answers with the
/// host-failure envelope, as for a call.
pub type TaskOutcome = Result<TaskAnswer, HostFailure>;

/// Whether the request's `_meta` client capabilities declare the extension
/// (`extensions["io.modelcontextprotocol/tasks"]` an object; `{}` today).
pub(super) fn declared(params: &Map<String, Value>) -> bool {
    params
        .get("_meta")
        .and_then(|m| m.get(super::modern::META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION_TASKS))
        .is_some_and(Value::is_object)
}

/// The -32021 `data`: the extension the request must declare.
fn required_capabilities() -> Value {
    json!({"requiredCapabilities": {"extensions": {EXTENSION_TASKS: {}}}})
}

/// The -32021 error response for `id`.
pub(super) fn missing_capability_bytes(id: &RpcId) -> Vec<u8> {
    rpc::error_data_bytes(id, super::modern::CODE_MISSING_CAPABILITY, MSG_MISSING_CAPABILITY, &required_capabilities())
}

/// A `tasks/*` request's checks, in order: the extension declared (-32021),
/// `taskId` (-32602), and for an update its `inputResponses` (-32602).
pub(super) fn plan(id: RpcId, name: TaskMethodName, params: &Map<String, Value>) -> Step {
    if !declared(params) {
        let code = super::modern::CODE_MISSING_CAPABILITY;
        return answer_error_data(id, code, MSG_MISSING_CAPABILITY, &required_capabilities());
    }
    let checked = task_id(params).and_then(|task_id| {
        let method = match name {
            TaskMethodName::Get => TaskMethod::Get,
            TaskMethodName::Cancel => TaskMethod::Cancel,
            TaskMethodName::Update => TaskMethod::Update { input_responses: input_responses(params)? },
        };
        Ok((task_id, method))
    });
    match checked {
        Ok((task_id, method)) => Step::Task(TaskRequest { jsonrpc_id: id, task_id, method }),
        Err(detail) => answer_error(id, CODE_INVALID_PARAMS, &format!("invalid params: {detail}")),
    }
}

fn task_id(params: &Map<String, Value>) -> Result<String, String> {
    match params.get("taskId") {
        None => Err("taskId is required".into()),
        Some(Value::String(s)) if s.is_empty() => Err("taskId must not be empty".into()),
        Some(Value::String(s)) if s.len() > TASK_ID_MAX_BYTES => {
            Err(format!("taskId is longer than {TASK_ID_MAX_BYTES} bytes"))
        }
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err("taskId must be a string".into()),
    }
}

fn input_responses(params: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let responses = match params.get("inputResponses") {
        None => return Err("inputResponses is required".into()),
        Some(Value::Object(m)) => m,
        Some(_) => return Err("inputResponses must be a JSON object".into()),
    };
    // The object itself is the first level.
    if !responses.values().all(|r| depth_within(r, INPUT_RESPONSES_DEPTH_MAX - 1)) {
        return Err(format!("inputResponses nests deeper than {INPUT_RESPONSES_DEPTH_MAX} levels"));
    }
    if !size_within(responses, INPUT_RESPONSES_BYTES_MAX) {
        return Err(format!("inputResponses is larger than {INPUT_RESPONSES_BYTES_MAX} bytes"));
    }
    Ok(responses.clone())
}

/// Whether `v` nests arrays and objects at most `levels` deep (a scalar is
/// level 0); the walk never goes deeper than that.
fn depth_within(v: &Value, levels: usize) -> bool {
    let Some(below) = levels.checked_sub(1) else { return !(v.is_array() || v.is_object()) };
    match v {
        Value::Array(items) => items.iter().all(|i| depth_within(i, below)),
        Value::Object(members) => members.values().all(|m| depth_within(m, below)),
        _ => true,
    }
}

/// Whether `v` serializes compactly to at most `max` bytes; counting stops
/// at the bound.
fn size_within(v: &impl Serialize, max: usize) -> bool {
    struct Counter {
        left: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.left = self.left.checked_sub(buf.len()).ok_or(std::io::ErrorKind::FileTooLarge)?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Counter { left: max }, v).is_ok()
}

// ---- rendering ----

/// A timestamp as the extension writes it: ISO 8601 UTC, whole seconds.
fn timestamp(secs: u64) -> String {
    iso8601(secs.min(TIMESTAMP_SECS_MAX))
}

/// The `Task` fields every task shape carries.
#[derive(Serialize)]
struct TaskFields<'a> {
    #[serde(rename = "taskId")]
    task_id: &'a str,
    status: &'static str,
    #[serde(rename = "statusMessage", skip_serializing_if = "Option::is_none")]
    status_message: Option<&'a str>,
    #[serde(rename = "createdAt")]
    created_at: String,
    #[serde(rename = "lastUpdatedAt")]
    last_updated_at: String,
    #[serde(rename = "ttlMs")]
    ttl_ms: Option<u64>,
    #[serde(rename = "pollIntervalMs")]
    poll_interval_ms: u64,
}

impl<'a> TaskFields<'a> {
    fn of(view: &'a TaskView, status: TaskStatus, status_message: Option<&'a str>) -> TaskFields<'a> {
        TaskFields {
            task_id: &view.task_id,
            status: status.as_str(),
            status_message,
            created_at: timestamp(view.created_at),
            last_updated_at: timestamp(view.last_updated_at),
            ttl_ms: view.ttl_ms,
            poll_interval_ms: view.poll_interval_ms,
        }
    }
}

/// `CreateTaskResult`: `resultType: "task"` and the task's fields.
#[derive(Serialize)]
struct CreateTaskResult<'a> {
    #[serde(rename = "resultType")]
    result_type: &'static str,
    #[serde(flatten)]
    task: TaskFields<'a>,
    #[serde(rename = "_meta")]
    meta: ResultMeta<'a>,
}

/// The `CreateTaskResult` response for a call answered with a task.
pub(super) fn created_bytes(id: &RpcId, view: &TaskView, meta: ResultMeta<'_>) -> Vec<u8> {
    let status_message = view.status_message.as_deref();
    let task = TaskFields::of(view, view.state.status(), status_message);
    rpc::result_bytes(id, &CreateTaskResult { result_type: "task", task, meta })
}

/// `GetTaskResult`: `resultType: "complete"`, the task's fields and the
/// payload of its status.
#[derive(Serialize)]
struct GetTaskResult<'a> {
    #[serde(rename = "resultType")]
    result_type: &'static str,
    #[serde(flatten)]
    task: TaskFields<'a>,
    #[serde(rename = "inputRequests", skip_serializing_if = "Option::is_none")]
    input_requests: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<CallResult<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorObject<'a>>,
    #[serde(rename = "_meta")]
    meta: ResultMeta<'a>,
}

fn get_result<'a>(view: &'a TaskView, server: &'a OwnedServerInfo) -> GetTaskResult<'a> {
    let message = view.status_message.as_deref();
    let mut r = GetTaskResult {
        result_type: COMPLETE,
        task: TaskFields::of(view, view.state.status(), message),
        input_requests: None,
        result: None,
        error: None,
        meta: ResultMeta { server_info: server },
    };
    match &view.state {
        TaskState::Working | TaskState::Cancelled => {}
        TaskState::InputRequired { input_requests } => r.input_requests = Some(input_requests),
        TaskState::Completed { output } => match call_result(output, server) {
            Ok(result) => r.result = Some(result),
            // What the synchronous call would have answered: a JSON-RPC error.
            Err(unfit) => {
                r.task = TaskFields::of(view, TaskStatus::Failed, Some(message.unwrap_or(unfit)));
                r.error = Some(ErrorObject { code: CODE_INTERNAL_ERROR, message: unfit, data: None });
            }
        },
        TaskState::Failed { code, message: error, data } => {
            r.task.status_message = Some(message.unwrap_or(error));
            r.error = Some(ErrorObject { code: *code, message: error, data: data.as_ref() });
        }
    }
    r
}

/// `UpdateTaskResult` / `CancelTaskResult`: an empty acknowledgement.
#[derive(Serialize)]
struct Acknowledgement<'a> {
    #[serde(rename = "resultType")]
    result_type: &'static str,
    #[serde(rename = "_meta")]
    meta: ResultMeta<'a>,
}

/// The reply to a task step from the server's answer.
pub(super) fn reply(request: &TaskRequest, outcome: TaskOutcome, server: &OwnedServerInfo) -> HttpReply {
    let id = &request.jsonrpc_id;
    let answer = match outcome {
        Ok(answer) => answer,
        Err(failure) => return host_failure(id, failure),
    };
    match (&request.method, answer) {
        (TaskMethod::Get, TaskAnswer::Found(view)) if view.task_id == request.task_id => {
            json_reply(200, rpc::result_bytes(id, &get_result(&view, server)))
        }
        (TaskMethod::Update { .. } | TaskMethod::Cancel, TaskAnswer::Acknowledged) => {
            let ack = Acknowledgement { result_type: COMPLETE, meta: ResultMeta { server_info: server } };
            json_reply(200, rpc::result_bytes(id, &ack))
        }
        (method, TaskAnswer::NotFound) => {
            error_reply(id, CODE_INVALID_PARAMS, &format!("Failed to {} task: Task not found", verb(method)))
        }
        (TaskMethod::Update { .. } | TaskMethod::Cancel, TaskAnswer::Ended(status)) if status.is_terminal() => {
            let verb = verb(&request.method);
            error_reply(id, CODE_INVALID_PARAMS, &format!("Cannot {verb} task: it already ended ({})", status.as_str()))
        }
        (_, TaskAnswer::Error { code, message, data: Some(data) }) => {
            json_reply(error_status(code), rpc::error_data_bytes(id, code, &message, &data))
        }
        (_, TaskAnswer::Error { code, message, data: None }) => error_reply(id, code, &message),
        _ => error_reply(id, CODE_INTERNAL_ERROR, MSG_ANSWER_UNFIT),
    }
}

/// The verb of a method's error messages.
fn verb(method: &TaskMethod) -> &'static str {
    match method {
        TaskMethod::Get => "retrieve",
        TaskMethod::Update { .. } => "update",
        TaskMethod::Cancel => "cancel",
    }
}
