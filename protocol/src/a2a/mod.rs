//! `POST /a2a/` and the agent card.
//!
//! The seed's method is A2A v0.1 `tasks/send`. So that stock SDKs work too,
//! the same endpoint also takes A2A 0.3 (`message/send`, `tasks/get`,
//! `tasks/cancel`, `agent/getAuthenticatedExtendedCard`) and A2A 1.0
//! (`SendMessage`, `GetTask`, `ListTasks`, `CancelTask`,
//! `GetExtendedAgentCard`); replies use the caller's flavour, and the card
//! names both interfaces. Streams are server-sent events (`stream`); what
//! the card says is not offered (push notifications) is refused with the
//! spec's code.
//! Every reply is a JSON-RPC object inside HTTP 200.
//!
//! A refusal of a 0.3 or 1.0 method says why in `error.data`, in the one
//! shape A2A 1.0 §9.5 gives it: an array of typed details, first a
//! `google.rpc.ErrorInfo` (`reason` the A2A error's name, `domain`
//! `a2a-protocol.org`, `metadata` with `detail` and, where a parameter is at
//! fault, `parameter`), then for a bad parameter a `google.rpc.BadRequest`
//! naming it. The seed's `tasks/send` replies stay exactly as the seed fixes
//! them, without `data`.

use crate::rest::{RestClass, RestError};
use crate::rpc::{self, CODE_INTERNAL_ERROR, CODE_INVALID_PARAMS, CODE_INVALID_REQUEST, CODE_METHOD_NOT_FOUND};
use crate::surface::ToolView;
use crate::{CONTENT_TYPE_JSON, HEADER_CONNECTION, HttpReply, RpcId, json};
use base64::Engine as _;
use serde_json::{Map, Value, json};

/// Largest request body read (1 MiB).
pub const A2A_BODY_MAX: usize = 1 << 20;
/// Longest task id, in characters (all ASCII).
pub const TASK_ID_MAX: usize = 128;
/// Longest `contextId` or `messageId` kept with a task, in bytes: both are
/// stored in its row.
pub const MESSAGE_ID_MAX: usize = 256;
/// The prefix of a `transition_fn` pin.
pub const TRANSITION_FN_PREFIX: &str = "sha256:";
/// Hex digits after the prefix.
pub const TRANSITION_FN_HEX_LEN: usize = 64;
/// The single artifact's id in 0.3 and 1.0 tasks (the schema requires one;
/// a task has exactly one output).
pub const ARTIFACT_ID: &str = "output";
/// Appended to a task id to name the agent's reply message in its history.
pub const REPLY_MESSAGE_SUFFIX: &str = ".reply";
/// A2A protocol version announced to 0.3 clients (`protocolVersion`).
pub const CARD_PROTOCOL_VERSION: &str = "0.3.0";
/// The `supportedInterfaces` versions, preferred first: 1.0 clients take the
/// first whose version they speak.
pub const CARD_INTERFACE_VERSIONS: [&str; 2] = ["1.0", "0.3"];
/// The one protocol binding served.
pub const CARD_BINDING: &str = "JSONRPC";
/// The name of the card's one security scheme.
pub const CARD_SECURITY_SCHEME: &str = "bearer";
const CARD_BEARER_FORMAT: &str = "64-hex session credential";
const CARD_BEARER_DESCRIPTION: &str = "A session credential minted with `worldd session mint`";
/// The path the card points SDK clients at, under the base URL.
pub const A2A_PATH: &str = "/a2a/";
/// `ListTasks` page size when the caller names none (A2A 1.0's default).
pub const LIST_PAGE_DEFAULT: u32 = 50;
/// The largest `ListTasks` page (A2A 1.0's bound).
pub const LIST_PAGE_MAX: u32 = 100;

/// A2A code for session denial and, in A2A's own table, TaskNotFound.
pub const CODE_SESSION_OR_TASK_NOT_FOUND: i64 = -32001;
/// A2A TaskNotCancelableError.
pub const CODE_TASK_NOT_CANCELABLE: i64 = -32002;
/// A2A PushNotificationNotSupportedError.
pub const CODE_PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
/// A2A UnsupportedOperationError.
pub const CODE_UNSUPPORTED_OPERATION: i64 = -32004;
/// `VersionNotSupportedError` (A2A 1.0 §5.4).
pub const CODE_VERSION_NOT_SUPPORTED: i64 = -32009;
/// The `A2A-Version` values served (`Major.Minor`; a patch is not compared).
/// An absent or empty header is 0.3, as the spec says.
pub const A2A_VERSIONS: [&str; 2] = ["0.3", "1.0"];

/// Whether the request's `A2A-Version` header (`None`: absent) names a
/// version served; the refusal lists those that are.
pub fn version_served(header: Option<&[u8]>) -> Result<(), Refusal> {
    let text = header.map(|h| String::from_utf8_lossy(h).trim().to_owned()).unwrap_or_default();
    if text.is_empty() {
        return Ok(());
    }
    let major_minor: Vec<&str> = text.splitn(3, '.').take(2).collect();
    if A2A_VERSIONS.contains(&major_minor.join(".").as_str()) {
        return Ok(());
    }
    let shown: String = text.chars().take(32).collect();
    let why = Why::parameter("A2A-Version", format!("one of {}", A2A_VERSIONS.join(", "))).with("requested", shown);
    Err(A2aError::VersionNotSupported.because(why))
}
/// A2A ContentTypeNotSupportedError.
pub const CODE_CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;

/// The `@type` of the detail every 0.3/1.0 refusal leads with.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// The `@type` of the detail naming a bad parameter.
pub const BAD_REQUEST_TYPE: &str = "type.googleapis.com/google.rpc.BadRequest";
/// `ErrorInfo.domain` of every refusal (A2A 1.0 §9.5).
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// What this agent takes, said wherever a message is refused for its parts.
pub const TAKES_ONE_DATA_PART: &str = "this agent takes exactly one data part whose data is the skill's arguments";
/// Why a send without a skill is refused.
pub const SKILL_ID_REQUIRED: &str = "metadata.skill_id is required: the skill to run";

/// Which A2A generation the request spoke; the reply speaks the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// v0.1 `tasks/send`, the seed's method.
    Legacy01,
    /// v0.3 `message/send`, `tasks/get`, `tasks/cancel`.
    V03,
    /// v1.0 `SendMessage`, `GetTask`, `ListTasks`, `CancelTask`.
    V10,
}

/// A send: run (or replay, if committed) transition `skill_id` as task `task_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct SendRequest {
    pub task_id: String,
    pub skill_id: String,
    /// Always a JSON object.
    pub arguments: Value,
    /// A validated `sha256:<64 hex>` pin, if given.
    pub transition_fn: Option<String>,
    /// `message.contextId` (0.3, 1.0), kept with the task.
    pub context_id: Option<String>,
    /// `message.messageId` (0.3, 1.0), kept with the task.
    pub message_id: Option<String>,
    /// `configuration.historyLength`: how much of the task's history the reply carries.
    pub history_length: Option<u32>,
    /// `configuration.returnImmediately`: answer with the task as soon as it
    /// exists (a command then runs on as a task the client polls).
    pub return_immediately: bool,
}

/// The continuation of an `input-required` task with a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerRequest {
    pub task_id: String,
    /// `approve`, `approve-for-session` or `deny`.
    pub word: ApprovalWord,
    pub context_id: Option<String>,
    pub message_id: Option<String>,
    pub history_length: Option<u32>,
}

/// What an approval answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalWord {
    Approve,
    ApproveForSession,
    Deny,
}

impl ApprovalWord {
    pub const ALL: [(&'static str, ApprovalWord); 3] = [
        ("approve", ApprovalWord::Approve),
        ("approve-for-session", ApprovalWord::ApproveForSession),
        ("deny", ApprovalWord::Deny),
    ];

    fn parse(text: &str) -> Option<ApprovalWord> {
        ApprovalWord::ALL.iter().find(|(w, _)| *w == text).map(|(_, a)| *a)
    }
}

/// `ListTasks`: which of the caller's tasks, and which page of them.
#[derive(Debug, Clone, PartialEq)]
pub struct ListQuery {
    pub context_id: Option<String>,
    pub status: Option<TaskStateName>,
    /// Tasks whose status time is at or after this (Unix seconds).
    pub status_after: Option<u64>,
    pub page_size: u32,
    pub page_token: Option<PageToken>,
    pub history_length: Option<u32>,
    pub include_artifacts: bool,
}

/// What the caller asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum A2aKind {
    Send(SendRequest),
    /// A person's word on the approval an `input-required` task waits for:
    /// a message on that task whose one data part is `{"approval": WORD}`
    /// and which names no skill.
    Answer(AnswerRequest),
    /// The state of task `task_id` (the committed result, if any).
    Get {
        task_id: String,
        history_length: Option<u32>,
    },
    /// Stop task `task_id`.
    Cancel {
        task_id: String,
    },
    /// A send whose reply is a stream of the task's events.
    StreamSend(SendRequest),
    /// An approval answer whose reply is a stream of the task's events.
    StreamAnswer(AnswerRequest),
    /// A stream of a running task's events, from its current state.
    Subscribe {
        task_id: String,
    },
    List(ListQuery),
    /// The session's card (`GetExtendedAgentCard`).
    ExtendedCard,
}

/// A parsed, shape-checked `/a2a/` request.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aRequest {
    pub jsonrpc_id: RpcId,
    pub flavor: Flavor,
    pub kind: A2aKind,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

/// A JSON-RPC reply for `/a2a/`, always sent as HTTP 200 JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aReply {
    id: RpcId,
    outcome: Result<Value, RpcError>,
    close_connection: bool,
}

impl A2aReply {
    pub fn jsonrpc_id(&self) -> &RpcId {
        &self.id
    }
    pub fn result(&self) -> Option<&Value> {
        self.outcome.as_ref().ok()
    }
    pub fn error_code(&self) -> Option<i64> {
        self.outcome.as_ref().err().map(|e| e.code)
    }
    pub fn error_message(&self) -> Option<&str> {
        self.outcome.as_ref().err().map(|e| e.message.as_str())
    }
    /// The error's `data`, if it has one.
    pub fn error_data(&self) -> Option<&Value> {
        self.outcome.as_ref().err().and_then(|e| e.data.as_ref())
    }
    /// Whether the server should close the connection after replying (the
    /// deadline error does).
    pub fn closes_connection(&self) -> bool {
        self.close_connection
    }

    /// The body: keys sorted as Go's map encoding writes them, newline-ended.
    pub fn body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        match &self.outcome {
            Ok(result) => {
                out.extend_from_slice(b"{\"id\":");
                out.extend_from_slice(&json::to_vec(&self.id));
                out.extend_from_slice(b",\"jsonrpc\":\"2.0\",\"result\":");
                out.extend_from_slice(&json::to_vec(result));
                out.push(b'}');
            }
            Err(e) => {
                let mut error = Map::new();
                error.insert("code".into(), json!(e.code));
                if let Some(data) = &e.data {
                    error.insert("data".into(), data.clone());
                }
                error.insert("message".into(), json!(e.message));
                out.extend_from_slice(b"{\"error\":");
                out.extend_from_slice(&json::to_vec(&error));
                out.extend_from_slice(b",\"id\":");
                out.extend_from_slice(&json::to_vec(&self.id));
                out.extend_from_slice(b",\"jsonrpc\":\"2.0\"}");
            }
        }
        out.push(b'\n');
        out
    }

    pub fn into_http(self) -> HttpReply {
        let mut r = HttpReply::new(200, CONTENT_TYPE_JSON, self.body());
        if self.close_connection {
            r.headers.push((HEADER_CONNECTION, "close".to_owned()));
        }
        r
    }
}

/// Any JSON-RPC error reply.
pub fn error(jsonrpc_id: &RpcId, code: i64, message: &str) -> A2aReply {
    A2aReply {
        id: jsonrpc_id.clone(),
        outcome: Err(RpcError { code, message: message.to_owned(), data: None }),
        close_connection: false,
    }
}

fn result(jsonrpc_id: &RpcId, value: Value) -> A2aReply {
    A2aReply { id: jsonrpc_id.clone(), outcome: Ok(value), close_connection: false }
}

mod card;
mod errors;
mod parse;
mod replies;
mod stream;
mod tasks;

pub use card::*;
pub use errors::*;
pub use parse::*;
pub use replies::*;
pub use stream::*;
pub use tasks::*;

#[cfg(test)]
mod tests;
