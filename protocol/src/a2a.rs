//! `POST /a2a/` and the agent card.
//!
//! The seed's method is A2A v0.1 `tasks/send`. So that stock SDKs work too,
//! the same endpoint also takes A2A 0.3 (`message/send`, `tasks/get`,
//! `tasks/cancel`, `agent/getAuthenticatedExtendedCard`) and A2A 1.0
//! (`SendMessage`, `GetTask`, `ListTasks`, `CancelTask`,
//! `GetExtendedAgentCard`); replies use the caller's flavour, and the card
//! names both interfaces. What the card says is not offered (streaming, push
//! notifications) is refused with the spec's codes.
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
    /// The state of task `task_id` (the committed result, if any).
    Get {
        task_id: String,
        history_length: Option<u32>,
    },
    /// Stop task `task_id` (every task here ends within its call: refused).
    Cancel {
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

/// Every row of the seed's A2A error table (session denials are
/// [`crate::auth::a2a_denial`]), plus the A2A 0.3/1.0 errors the newer
/// methods answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum A2aError {
    /// -32600: bad envelope, `jsonrpc` not "2.0", bad id.
    InvalidRequest,
    /// -32601: not a served method.
    MethodNotFound,
    /// -32602: bad params, wrong part shape, bad `transition_fn`.
    InvalidParams,
    /// -32602: skill unknown, not visible to the session, or access denied.
    NotAuthorized,
    /// -32602: the `transition_fn` pin does not match.
    ProposalMismatch,
    /// -32602: task id reused for a different call, or still in flight.
    TaskIdReused,
    /// -32603: an effect ran and was recorded, then a post-effect step
    /// failed. Holds the effect record refs. Checked first, whatever the cause.
    EffectsUnrecorded(Vec<String>),
    /// -32603: R8, an effect with no handler in this daemon or episode.
    NoEffectHandler,
    /// -32603: no genesis commit yet.
    NoWorldSelected,
    /// -32603: incompatible transition source.
    CallingConvention,
    /// -32603: the capsule run failed.
    ExecutionFailed,
    /// -32603: the output was not a JSON object.
    OutputNotObject,
    /// -32603: the 20 s deadline; the connection is closed.
    DeadlineExceeded,
    /// -32603: commit outcome uncertain; resend the same task id.
    OutcomeUnconfirmed,
    /// -32603: known not committed.
    NotCommitted,
    /// -32603: head conflict on a pure transition.
    HeadMoved,
    /// -32603: no coordinator, registry read or integrity failure.
    Unavailable,
    /// -32603: the store's disk is full; nothing of the call was committed.
    OutOfSpace,
    /// -32001: no such task in the caller's episode.
    TaskNotFound,
    /// -32002: the task cannot be canceled (ended, or running its effect).
    TaskNotCancelable,
    /// -32003: push notifications are not offered.
    PushNotificationNotSupported,
    /// -32004: not offered (streaming), or a message to a task that ended.
    UnsupportedOperation,
    /// -32005: a part this agent cannot take (text, file).
    ContentTypeNotSupported,
}

impl A2aError {
    pub fn code(&self) -> i64 {
        match self {
            A2aError::InvalidRequest => CODE_INVALID_REQUEST,
            A2aError::MethodNotFound => CODE_METHOD_NOT_FOUND,
            A2aError::InvalidParams | A2aError::NotAuthorized | A2aError::ProposalMismatch | A2aError::TaskIdReused => {
                CODE_INVALID_PARAMS
            }
            A2aError::TaskNotFound => CODE_SESSION_OR_TASK_NOT_FOUND,
            A2aError::TaskNotCancelable => CODE_TASK_NOT_CANCELABLE,
            A2aError::PushNotificationNotSupported => CODE_PUSH_NOTIFICATION_NOT_SUPPORTED,
            A2aError::UnsupportedOperation => CODE_UNSUPPORTED_OPERATION,
            A2aError::ContentTypeNotSupported => CODE_CONTENT_TYPE_NOT_SUPPORTED,
            _ => CODE_INTERNAL_ERROR,
        }
    }

    pub fn message(&self) -> String {
        let fixed = match self {
            A2aError::InvalidRequest => "invalid JSON-RPC request",
            A2aError::MethodNotFound => "method not found",
            A2aError::InvalidParams => "invalid params",
            A2aError::NotAuthorized => "not authorized",
            A2aError::ProposalMismatch => "proposal does not match the registered transition",
            A2aError::TaskIdReused => "task id already used in this session",
            A2aError::EffectsUnrecorded(refs) => {
                return format!(
                    "effects were requested but the invocation was not confirmed committed; effect records: {}",
                    refs.join(" ")
                );
            }
            A2aError::NoEffectHandler => "transition declares an effect this daemon has no handler for",
            A2aError::NoWorldSelected => "no world is selected; commit a genesis world first",
            A2aError::CallingConvention => "transition does not implement the invocation calling convention",
            A2aError::ExecutionFailed => "transition execution failed",
            A2aError::OutputNotObject => "transition output is not a JSON object",
            A2aError::DeadlineExceeded => "invocation exceeded its deadline",
            A2aError::OutcomeUnconfirmed => "invocation outcome is not confirmed; resend the same task id",
            A2aError::NotCommitted => "invocation was not committed; send a new task id",
            A2aError::HeadMoved => "world head moved during invocation; not committed; send a new task id",
            A2aError::Unavailable => "transition invocation is not available in this daemon",
            A2aError::OutOfSpace => MSG_OUT_OF_SPACE,
            A2aError::TaskNotFound => "task not found",
            A2aError::TaskNotCancelable => "task cannot be canceled",
            A2aError::PushNotificationNotSupported => "push notifications are not supported",
            A2aError::UnsupportedOperation => "this operation is not supported",
            A2aError::ContentTypeNotSupported => "incompatible content types",
        };
        fixed.to_owned()
    }

    /// `ErrorInfo.reason`: the A2A error's name in UPPER_SNAKE_CASE without
    /// "Error" (A2A 1.0 §9.5); the JSON-RPC ones as the reference SDK names them.
    pub fn reason(&self) -> &'static str {
        match self {
            A2aError::InvalidRequest => "INVALID_REQUEST",
            A2aError::MethodNotFound => "METHOD_NOT_FOUND",
            A2aError::InvalidParams | A2aError::NotAuthorized | A2aError::ProposalMismatch | A2aError::TaskIdReused => {
                "INVALID_PARAMS"
            }
            A2aError::TaskNotFound => "TASK_NOT_FOUND",
            A2aError::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            A2aError::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            A2aError::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            A2aError::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            _ => "INTERNAL_ERROR",
        }
    }

    /// The reply for request `jsonrpc_id`, as the seed's table has it (no `data`).
    pub fn reply(&self, jsonrpc_id: &RpcId) -> A2aReply {
        let mut r = error(jsonrpc_id, self.code(), &self.message());
        r.close_connection = matches!(self, A2aError::DeadlineExceeded);
        r
    }

    /// This error refusing a request of `flavor`, for the reason `why`.
    pub fn because(self, why: Why) -> Refusal {
        Refusal { error: self, why }
    }
}

/// Why a request was refused, as `error.data` tells it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Why {
    /// The parameter at fault, as a path under `params` (`message.role`).
    pub parameter: Option<String>,
    /// What was expected, or what to do instead, in a sentence.
    pub detail: String,
    /// Further context (`taskId`, `state`), in this order.
    pub context: Vec<(&'static str, String)>,
}

impl Why {
    pub fn new(detail: impl Into<String>) -> Why {
        Why { parameter: None, detail: detail.into(), context: vec![] }
    }
    pub fn parameter(parameter: &str, detail: impl Into<String>) -> Why {
        Why { parameter: Some(parameter.to_owned()), detail: detail.into(), context: vec![] }
    }
    pub fn with(mut self, key: &'static str, value: impl Into<String>) -> Why {
        self.context.push((key, value.into()));
        self
    }
}

/// A refusal with its reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub error: A2aError,
    pub why: Why,
}

impl Refusal {
    /// The reply to a request of `flavor`: the seed's `tasks/send` gets its
    /// table's reply exactly (a part it cannot take is `invalid params`
    /// there); the 0.3 and 1.0 methods get `data` saying why.
    pub fn reply(&self, jsonrpc_id: &RpcId, flavor: Flavor) -> A2aReply {
        if flavor == Flavor::Legacy01 {
            let seed = match &self.error {
                A2aError::ContentTypeNotSupported => &A2aError::InvalidParams,
                e => e,
            };
            return seed.reply(jsonrpc_id);
        }
        let mut r = self.error.reply(jsonrpc_id);
        if let Err(e) = &mut r.outcome {
            e.data = Some(self.data());
        }
        r
    }

    /// `error.data`: the ErrorInfo, then a BadRequest when a parameter is named.
    pub fn data(&self) -> Value {
        let mut metadata = Map::new();
        metadata.insert("detail".into(), json!(self.why.detail));
        if let Some(p) = &self.why.parameter {
            metadata.insert("parameter".into(), json!(p));
        }
        for (k, v) in &self.why.context {
            metadata.insert((*k).into(), json!(v));
        }
        let mut details = vec![json!({
            "@type": ERROR_INFO_TYPE,
            "reason": self.error.reason(),
            "domain": ERROR_DOMAIN,
            "metadata": metadata,
        })];
        if let Some(p) = &self.why.parameter {
            details.push(json!({
                "@type": BAD_REQUEST_TYPE,
                "fieldViolations": [{"field": p, "description": self.why.detail}],
            }));
        }
        Value::Array(details)
    }
}

/// `effects were requested …; effect records: <refs space-separated>`.
pub fn effects_unrecorded<S: AsRef<str>>(jsonrpc_id: &RpcId, refs: &[S]) -> A2aReply {
    A2aError::EffectsUnrecorded(refs.iter().map(|r| r.as_ref().to_owned()).collect()).reply(jsonrpc_id)
}

/// The body exceeded [`A2A_BODY_MAX`]: answered as a bad envelope with
/// `id: null` (the body was never parsed, so no id is known).
pub fn body_too_large() -> A2aReply {
    A2aError::InvalidRequest.reply(&RpcId::Null)
}

/// Whether `s` is a task id: 1–128 characters of `A-Z a-z 0-9 . _ -`.
pub fn is_task_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= TASK_ID_MAX
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Whether `s` is a `sha256:<64 lowercase hex>` ref.
pub fn is_transition_fn(s: &str) -> bool {
    s.strip_prefix(TRANSITION_FN_PREFIX).is_some_and(|h| {
        h.len() == TRANSITION_FN_HEX_LEN && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

// ---- task states ----

/// A2A's task states, as the filter of `ListTasks` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStateName {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    InputRequired,
    Rejected,
    AuthRequired,
}

impl TaskStateName {
    /// Every state, in the proto's numbering (1–8).
    pub const ALL: [TaskStateName; 8] = [
        TaskStateName::Submitted,
        TaskStateName::Working,
        TaskStateName::Completed,
        TaskStateName::Failed,
        TaskStateName::Canceled,
        TaskStateName::InputRequired,
        TaskStateName::Rejected,
        TaskStateName::AuthRequired,
    ];

    /// The 1.0 (ProtoJSON) name.
    pub fn v10(self) -> &'static str {
        match self {
            TaskStateName::Submitted => "TASK_STATE_SUBMITTED",
            TaskStateName::Working => "TASK_STATE_WORKING",
            TaskStateName::Completed => "TASK_STATE_COMPLETED",
            TaskStateName::Failed => "TASK_STATE_FAILED",
            TaskStateName::Canceled => "TASK_STATE_CANCELED",
            TaskStateName::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskStateName::Rejected => "TASK_STATE_REJECTED",
            TaskStateName::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }

    /// The 0.3 name.
    pub fn v03(self) -> &'static str {
        match self {
            TaskStateName::Submitted => "submitted",
            TaskStateName::Working => "working",
            TaskStateName::Completed => "completed",
            TaskStateName::Failed => "failed",
            TaskStateName::Canceled => "canceled",
            TaskStateName::InputRequired => "input-required",
            TaskStateName::Rejected => "rejected",
            TaskStateName::AuthRequired => "auth-required",
        }
    }

    /// The name `flavor` uses.
    pub fn name(self, flavor: Flavor) -> &'static str {
        match flavor {
            Flavor::V10 => self.v10(),
            _ => self.v03(),
        }
    }

    /// Completed, failed, canceled and rejected tasks take no more messages.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStateName::Completed | TaskStateName::Failed | TaskStateName::Canceled | TaskStateName::Rejected
        )
    }
}

// ---- timestamps ----

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix seconds as ISO 8601 in UTC (`2025-10-28T10:30:00Z`), as A2A 1.0 §5.6.1
/// writes timestamps (the store keeps whole seconds, so no fraction).
pub fn iso8601(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z` to Unix seconds (the fraction is
/// dropped; a time before 1970 is 0). Only UTC: A2A 1.0 §5.6.1 allows no offset.
pub fn parse_iso8601(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = &b[19..];
    let rest = match rest.strip_prefix(b".") {
        Some(f) => {
            let digits = f.iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 || digits > 9 {
                return None;
            }
            &f[digits..]
        }
        None => rest,
    };
    if rest != b"Z" {
        return None;
    }
    let month_days =
        [31, 28 + i64::from(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)), 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&mo) || d < 1 || d > month_days[(mo - 1) as usize] || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let t = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec;
    Some(t.max(0) as u64)
}

// ---- page tokens ----

/// Where a `ListTasks` page ends: the next page starts below episode
/// position `before`, `seen` tasks having been listed on earlier pages, for
/// the filters whose digest is `filters`. Opaque to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageToken {
    pub before: u64,
    pub seen: u64,
    pub filters: u64,
}

impl PageToken {
    pub fn encode(&self) -> String {
        let text = format!("{}.{}.{:016x}", self.before, self.seen, self.filters);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
    }

    pub fn decode(token: &str) -> Option<PageToken> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let mut it = text.split('.');
        let before = it.next()?.parse().ok()?;
        let seen = it.next()?.parse().ok()?;
        let filters = it.next().filter(|f| f.len() == 16)?;
        let filters = u64::from_str_radix(filters, 16).ok()?;
        it.next().is_none().then_some(PageToken { before, seen, filters })
    }
}

/// A digest of a listing's filters (FNV-1a), so a token is not taken with
/// other filters than the ones it paged (its counts would be wrong).
pub fn filters_digest(context_id: Option<&str>, status: Option<TaskStateName>, after: Option<u64>) -> u64 {
    let text = format!("{context_id:?}|{:?}|{after:?}", status.map(TaskStateName::v10));
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

// ---- parsing ----

type Bad = Refusal;

fn invalid(parameter: &str, detail: impl Into<String>) -> Bad {
    A2aError::InvalidParams.because(Why::parameter(parameter, detail))
}

fn object<'a>(v: Option<&'a Value>, parameter: &str, what: &str) -> Result<&'a Map<String, Value>, Bad> {
    v.and_then(Value::as_object).ok_or_else(|| invalid(parameter, format!("required: {what}")))
}

const TASK_ID_GRAMMAR: &str = "1 to 128 characters of A-Z a-z 0-9 . _ -";

fn task_id(v: Option<&Value>, parameter: &str) -> Result<String, Bad> {
    match v {
        Some(Value::String(s)) if is_task_id(s) => Ok(s.clone()),
        _ => Err(invalid(parameter, format!("a task id: {TASK_ID_GRAMMAR}"))),
    }
}

/// A metadata string looked up in each place in turn; the first place that
/// has the key decides (so a bad value is not skipped over).
fn metadata_str<'a>(places: &[(&str, Option<&'a Value>)], key: &str) -> Result<Option<&'a str>, Bad> {
    for (name, place) in places {
        let Some(place) = place else { continue };
        let Some(meta) = place.as_object() else {
            return Err(invalid(name, "an object"));
        };
        match meta.get(key) {
            None => continue,
            Some(Value::String(s)) => return Ok(Some(s)),
            Some(_) => return Err(invalid(&format!("{name}.{key}"), "a string")),
        }
    }
    Ok(None)
}

fn skill_and_pin(places: &[(&str, Option<&Value>)]) -> Result<(String, Option<String>), Bad> {
    let skill = metadata_str(places, "skill_id")?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid("metadata.skill_id", SKILL_ID_REQUIRED))?;
    let pin = places
        .iter()
        .find_map(|(name, p)| p.and_then(|p| p.get("transition_fn")).filter(|v| !v.is_null()).map(|v| (*name, v)));
    let pin = match pin {
        None => None,
        Some((_, Value::String(s))) if is_transition_fn(s) => Some(s.clone()),
        Some((name, _)) => {
            return Err(invalid(
                &format!("{name}.transition_fn"),
                "sha256:<64 lowercase hex>: the transitionFn the skill must have",
            ));
        }
    };
    Ok((skill.to_owned(), pin))
}

/// The one part's `data` object; `tag` is the discriminator member
/// (`type` in 0.1, `kind` in 0.3, none in 1.0). A part of another kind is
/// ContentTypeNotSupported; a data part that is not one object, -32602.
fn single_data_part(message: &Map<String, Value>, tag: Option<&str>) -> Result<Value, Bad> {
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("message.parts", format!("required: an array of parts; {TAKES_ONE_DATA_PART}")))?;
    for (i, part) in parts.iter().enumerate() {
        let Some(part) = part.as_object() else {
            return Err(invalid(&format!("message.parts[{i}]"), format!("a Part object; {TAKES_ONE_DATA_PART}")));
        };
        let other = match tag {
            Some(tag) => match part.get(tag).and_then(Value::as_str) {
                Some("data") => None,
                Some(kind @ ("text" | "file")) => Some(kind.to_owned()),
                _ => {
                    return Err(invalid(
                        &format!("message.parts[{i}].{tag}"),
                        format!("\"data\"; {TAKES_ONE_DATA_PART}"),
                    ));
                }
            },
            // 1.0's Part is a oneof: a data part carries no other content.
            None => ["text", "raw", "url", "file"].iter().find(|k| part.contains_key(**k)).map(|k| (*k).to_owned()),
        };
        if let Some(kind) = other {
            let why = Why::parameter(
                &format!("message.parts[{i}]"),
                format!("message has a {kind} part; {TAKES_ONE_DATA_PART}"),
            );
            return Err(A2aError::ContentTypeNotSupported.because(why));
        }
    }
    let [part] = parts.as_slice() else {
        return Err(invalid("message.parts", format!("message has {} parts; {TAKES_ONE_DATA_PART}", parts.len())));
    };
    match part.get("data") {
        Some(d @ Value::Object(_)) => Ok(d.clone()),
        _ => Err(invalid("message.parts[0].data", format!("a JSON object; {TAKES_ONE_DATA_PART}"))),
    }
}

fn parse_tasks_send(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let params = object(params, "params", "an object")?;
    let task_id = task_id(params.get("id"), "id")?;
    let metadata = params.get("metadata");
    if metadata.is_none() {
        return Err(invalid("metadata", SKILL_ID_REQUIRED));
    }
    let (skill_id, transition_fn) = skill_and_pin(&[("metadata", metadata)])?;
    let message = object(params.get("message"), "message", "a Message object")?;
    let arguments = single_data_part(message, Some("type"))?;
    Ok(A2aKind::Send(SendRequest {
        task_id,
        skill_id,
        arguments,
        transition_fn,
        context_id: None,
        message_id: None,
        history_length: None,
    }))
}

/// A `historyLength`-like member: absent or null is `None`; otherwise a
/// non-negative int32, as a number or (ProtoJSON) a decimal string.
fn non_negative(params: &Map<String, Value>, key: &str, parameter: &str) -> Result<Option<u32>, Bad> {
    let v = match params.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let n = match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => s.parse::<i64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if (0..=i64::from(i32::MAX)).contains(&n) => Ok(Some(n as u32)),
        Some(n) if n < 0 => Err(invalid(parameter, format!("a non-negative integer, got {n}"))),
        _ => Err(invalid(parameter, "a non-negative integer")),
    }
}

/// An optional string member, bounded.
fn bounded_str(obj: &Map<String, Value>, key: &str, parameter: &str) -> Result<Option<String>, Bad> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= MESSAGE_ID_MAX => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(invalid(parameter, format!("at most {MESSAGE_ID_MAX} bytes"))),
        Some(_) => Err(invalid(parameter, "a string")),
    }
}

/// `message/send` (0.3) and `SendMessage` (1.0) share everything but the
/// part discriminator, the role's spelling and the `kind` member.
fn parse_message_send(params: Option<&Value>, flavor: Flavor) -> Result<A2aKind, Bad> {
    let params = object(params, "params", "a SendMessageRequest object")?;
    let message = object(params.get("message"), "message", "a Message object")?;
    if flavor == Flavor::V03 && message.get("kind").is_some_and(|k| k.as_str() != Some("message")) {
        return Err(invalid("message.kind", "\"message\""));
    }
    let message_id = match bounded_str(message, "messageId", "message.messageId")? {
        Some(s) if !s.is_empty() => s,
        _ => return Err(invalid("message.messageId", "required: a non-empty string")),
    };
    let user = match flavor {
        Flavor::V03 => "user",
        _ => "ROLE_USER",
    };
    match message.get("role") {
        Some(Value::String(r)) if r == user => {}
        // ProtoJSON also spells an enum by its number (ROLE_USER = 1).
        Some(Value::Number(n)) if flavor == Flavor::V10 && n.as_u64() == Some(1) => {}
        None | Some(Value::Null) => return Err(invalid("message.role", format!("required: {user}"))),
        Some(_) => return Err(invalid("message.role", format!("{user}: the message an agent is sent is the user's"))),
    }
    // The task id is the idempotency key: taskId when given, else the
    // messageId. Either must fit the task-id grammar; a messageId that does
    // not is refused rather than rewritten (no hash is available here, and a
    // lossy rewrite could merge two tasks).
    let task_id = match message.get("taskId") {
        None | Some(Value::Null) => {
            if !is_task_id(&message_id) {
                return Err(invalid(
                    "message.messageId",
                    format!("with no taskId the messageId is the task id: {TASK_ID_GRAMMAR}"),
                ));
            }
            message_id.clone()
        }
        Some(v) => task_id(Some(v), "message.taskId")?,
    };
    let context_id = bounded_str(message, "contextId", "message.contextId")?;
    let (skill_id, transition_fn) =
        skill_and_pin(&[("metadata", params.get("metadata")), ("message.metadata", message.get("metadata"))])?;
    let history_length = match params.get("configuration") {
        None | Some(Value::Null) => None,
        Some(Value::Object(c)) => {
            if c.get("pushNotificationConfig")
                .or_else(|| c.get("taskPushNotificationConfig"))
                .is_some_and(|v| !v.is_null())
            {
                let why = Why::parameter("configuration.taskPushNotificationConfig", PUSH_DETAIL);
                return Err(A2aError::PushNotificationNotSupported.because(why));
            }
            non_negative(c, "historyLength", "configuration.historyLength")?
        }
        Some(_) => return Err(invalid("configuration", "a SendMessageConfiguration object")),
    };
    let tag = match flavor {
        Flavor::V03 => Some("kind"),
        _ => None,
    };
    let arguments = single_data_part(message, tag)?;
    Ok(A2aKind::Send(SendRequest {
        task_id,
        skill_id,
        arguments,
        transition_fn,
        context_id,
        message_id: Some(message_id),
        history_length,
    }))
}

fn parse_get(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let params = object(params, "params", "an object with the task's id")?;
    let task_id = task_id(params.get("id"), "id")?;
    Ok(A2aKind::Get { task_id, history_length: non_negative(params, "historyLength", "historyLength")? })
}

fn parse_cancel(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let params = object(params, "params", "an object with the task's id")?;
    Ok(A2aKind::Cancel { task_id: task_id(params.get("id"), "id")? })
}

fn state_names() -> String {
    TaskStateName::ALL.iter().map(|s| s.v10()).collect::<Vec<_>>().join(", ")
}

fn parse_list(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let empty = Map::new();
    let params = match params {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(p)) => p,
        Some(_) => return Err(invalid("params", "a ListTasksRequest object")),
    };
    let context_id = match params.get("contextId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(invalid("contextId", "a string")),
    };
    let status = match params.get("status") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "TASK_STATE_UNSPECIFIED" => None,
        Some(Value::String(s)) => match TaskStateName::ALL.iter().find(|t| t.v10() == s) {
            Some(t) => Some(*t),
            None => return Err(invalid("status", format!("one of {}, got {s:?}", state_names()))),
        },
        // ProtoJSON also spells an enum by its number.
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) => None,
            Some(k @ 1..=8) => Some(TaskStateName::ALL[(k - 1) as usize]),
            _ => return Err(invalid("status", format!("one of {}", state_names()))),
        },
        Some(_) => return Err(invalid("status", format!("one of {}", state_names()))),
    };
    let page_size = match non_negative(params, "pageSize", "pageSize") {
        Ok(None) => LIST_PAGE_DEFAULT,
        Ok(Some(n)) if (1..=LIST_PAGE_MAX).contains(&n) => n,
        Ok(Some(n)) => return Err(invalid("pageSize", format!("an integer from 1 to {LIST_PAGE_MAX}, got {n}"))),
        Err(_) => return Err(invalid("pageSize", format!("an integer from 1 to {LIST_PAGE_MAX}"))),
    };
    let status_after = match params.get("statusTimestampAfter") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(parse_iso8601(s).ok_or_else(|| {
            invalid(
                "statusTimestampAfter",
                format!("an ISO 8601 UTC timestamp such as 2025-10-28T10:30:00Z, got {s:?}"),
            )
        })?),
        Some(_) => {
            return Err(invalid("statusTimestampAfter", "an ISO 8601 UTC timestamp such as 2025-10-28T10:30:00Z"));
        }
    };
    let filters = filters_digest(context_id.as_deref(), status, status_after);
    let page_token = match params.get("pageToken") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => match PageToken::decode(s) {
            Some(t) if t.filters == filters => Some(t),
            Some(_) => return Err(invalid("pageToken", "a nextPageToken issued for these same filters")),
            None => return Err(invalid("pageToken", "a nextPageToken from an earlier ListTasks")),
        },
        Some(_) => return Err(invalid("pageToken", "a string")),
    };
    let include_artifacts = match params.get("includeArtifacts") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("includeArtifacts", "a boolean")),
    };
    let history_length = non_negative(params, "historyLength", "historyLength")?;
    Ok(A2aKind::List(ListQuery {
        context_id,
        status,
        status_after,
        page_size,
        page_token,
        history_length,
        include_artifacts,
    }))
}

const STREAMING_DETAIL: &str = "streaming is not offered (the card says capabilities.streaming false): send with SendMessage (0.3: message/send), read with GetTask (0.3: tasks/get)";
const PUSH_DETAIL: &str = "push notifications are not offered (the card says capabilities.pushNotifications false): read a task with GetTask (0.3: tasks/get)";

/// The methods served, by name, with the generation that names them.
fn method(name: &str) -> Option<Flavor> {
    Some(match name {
        "tasks/send" => Flavor::Legacy01,
        "message/send"
        | "tasks/get"
        | "tasks/cancel"
        | "agent/getAuthenticatedExtendedCard"
        | "message/stream"
        | "tasks/resubscribe"
        | "tasks/pushNotificationConfig/set"
        | "tasks/pushNotificationConfig/get"
        | "tasks/pushNotificationConfig/list"
        | "tasks/pushNotificationConfig/delete" => Flavor::V03,
        "SendMessage"
        | "GetTask"
        | "ListTasks"
        | "CancelTask"
        | "GetExtendedAgentCard"
        | "SendStreamingMessage"
        | "SubscribeToTask"
        | "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Flavor::V10,
        _ => return None,
    })
}

/// Checks the envelope and the params shape.
///
/// Errors: bad JSON, not an object, `jsonrpc` not "2.0" or an id that is not
/// a string, number or null → -32600 `invalid JSON-RPC request`; another
/// method → -32601; a bad shape → -32602 `invalid params` (with `data`
/// naming the parameter, for the 0.3 and 1.0 methods); a part this agent
/// cannot take → -32005 (`invalid params` for `tasks/send`); streaming →
/// -32004 and push notifications → -32003, neither being offered. A missing
/// id is answered as `null`.
pub fn parse(body: &[u8]) -> Result<A2aRequest, A2aReply> {
    let invalid_request = |id: &RpcId| A2aError::InvalidRequest.reply(id);
    let obj = rpc::parse_object(body).map_err(|_| invalid_request(&RpcId::Null))?;
    let id = match rpc::id_member(&obj) {
        None => RpcId::Null,
        Some(Some(id)) => id,
        Some(None) => return Err(invalid_request(&RpcId::Null)),
    };
    if !rpc::is_jsonrpc_2(&obj) {
        return Err(invalid_request(&id));
    }
    let Some(name) = rpc::str_member(&obj, "method") else {
        return Err(invalid_request(&id));
    };
    let Some(flavor) = method(&name) else { return Err(A2aError::MethodNotFound.reply(&id)) };
    let params = match rpc::value_member(&obj, "params") {
        None => None,
        Some(Ok(v)) => Some(v),
        // Valid JSON but too deep for a Value: a params problem.
        Some(Err(_)) => return Err(invalid("params", "JSON nested less deeply").reply(&id, flavor)),
    };
    let kind = match name.as_str() {
        "tasks/send" => parse_tasks_send(params.as_ref()),
        "message/send" | "SendMessage" => parse_message_send(params.as_ref(), flavor),
        "tasks/get" | "GetTask" => parse_get(params.as_ref()),
        "tasks/cancel" | "CancelTask" => parse_cancel(params.as_ref()),
        "ListTasks" => parse_list(params.as_ref()),
        "agent/getAuthenticatedExtendedCard" | "GetExtendedAgentCard" => Ok(A2aKind::ExtendedCard),
        "message/stream" | "tasks/resubscribe" | "SendStreamingMessage" | "SubscribeToTask" => {
            Err(A2aError::UnsupportedOperation.because(Why::new(STREAMING_DETAIL)))
        }
        _ => Err(A2aError::PushNotificationNotSupported.because(Why::new(PUSH_DETAIL))),
    }
    .map_err(|e| e.reply(&id, flavor))?;
    Ok(A2aRequest { jsonrpc_id: id, flavor, kind })
}

// ---- replies ----

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

fn message_value(flavor: Flavor, task_id: &str, context_id: &str, m: &MessageView<'_>) -> Value {
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
        // The seed's shape; only a committed task is ever shown in it.
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

/// What the agent card is built from.
#[derive(Debug, Clone, Copy)]
pub struct CardInput<'a> {
    /// `scheme://host[:port]` as the client reached the daemon.
    pub base_url: &'a str,
    pub name: &'a str,
    pub description: &'a str,
    pub version: &'a str,
    /// The session's visible transitions, in registry byte order.
    pub skills: &'a [ToolView],
}

/// The session's card for `/.well-known/agent.json` and
/// `/.well-known/agent-card.json`, readable by A2A 1.0 and 0.3 clients alike.
///
/// 1.0 clients pick a transport from `supportedInterfaces` (JSON-RPC at 1.0,
/// listed first, and at 0.3, both on `<base>/a2a/`) and read the bearer scheme
/// from `securitySchemes` / `securityRequirements`; 0.3 clients read `url`,
/// `protocolVersion`, `preferredTransport`, `additionalInterfaces` and
/// `security`. Each security scheme carries both generations' members (0.3's
/// `type` and `scheme`, 1.0's `httpAuthSecurityScheme`), which each client
/// reads while ignoring the other's.
pub fn agent_card(input: CardInput<'_>) -> Value {
    let skills: Vec<Value> = input
        .skills
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "name": s.title,
                "description": s.description,
                "tags": [],
                "examples": [],
            })
        })
        .collect();
    let url = format!("{}{}", input.base_url.trim_end_matches('/'), A2A_PATH);
    let interface = |version: &str| json!({"url": url, "protocolBinding": CARD_BINDING, "protocolVersion": version});
    json!({
        "name": input.name,
        "description": input.description,
        "url": url,
        "version": input.version,
        "protocolVersion": CARD_PROTOCOL_VERSION,
        "preferredTransport": CARD_BINDING,
        "additionalInterfaces": [{"url": url, "transport": CARD_BINDING}],
        "supportedInterfaces": [interface(CARD_INTERFACE_VERSIONS[0]), interface(CARD_INTERFACE_VERSIONS[1])],
        // What is served: no streaming, no push notifications; the extended
        // card is this card (behind the session already), by JSON-RPC too.
        "capabilities": {
            "streaming": false,
            "pushNotifications": false,
            "stateTransitionHistory": false,
            "extendedAgentCard": true,
        },
        "supportsAuthenticatedExtendedCard": true,
        "securitySchemes": {
            CARD_SECURITY_SCHEME: {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": CARD_BEARER_FORMAT,
                "description": CARD_BEARER_DESCRIPTION,
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "bearerFormat": CARD_BEARER_FORMAT,
                    "description": CARD_BEARER_DESCRIPTION,
                },
            },
        },
        "security": [{CARD_SECURITY_SCHEME: []}],
        "securityRequirements": [{"schemes": {CARD_SECURITY_SCHEME: {"list": []}}}],
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": skills,
    })
}

/// The card as an HTTP 200 reply (sorted keys, Go escaping).
pub fn agent_card_reply(input: CardInput<'_>) -> HttpReply {
    card_reply(&agent_card(input))
}

/// A built card as the HTTP 200 reply.
pub fn card_reply(card: &Value) -> HttpReply {
    HttpReply::new(200, CONTENT_TYPE_JSON, json::to_line(card))
}

/// Message of the card's 503.
/// A call refused because the store's disk is full.
pub const MSG_OUT_OF_SPACE: &str =
    "store is out of space; the invocation was not committed; send the same task id again once space is freed";
pub const MSG_CARD_UNAVAILABLE: &str = "agent card unavailable: a registry read failed";
/// Message of the card's 504.
pub const MSG_CARD_DEADLINE: &str = "agent card unavailable: the registry read deadline was exceeded";

/// `503 ProjectionUnavailable`: a registry read failed.
pub fn card_unavailable() -> RestError {
    RestError::new(RestClass::ProjectionUnavailable, MSG_CARD_UNAVAILABLE)
}

/// `504 ProjectionDeadlineExceeded`: the read deadline was hit.
pub fn card_deadline_exceeded() -> RestError {
    RestError::new(RestClass::ProjectionDeadlineExceeded, MSG_CARD_DEADLINE)
}

#[cfg(test)]
mod tests;
