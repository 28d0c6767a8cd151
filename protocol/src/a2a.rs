//! `POST /a2a/` and the agent card.
//!
//! The seed's method is A2A v0.1 `tasks/send`. So that stock SDKs work too,
//! the same endpoint also takes A2A 0.3 (`message/send`, `tasks/get`) and
//! A2A 1.0 (`SendMessage`, `GetTask`); replies use the caller's flavour, and
//! the card names both interfaces.
//! Every reply is a JSON-RPC object inside HTTP 200.

use crate::rest::{RestClass, RestError};
use crate::rpc::{self, CODE_INTERNAL_ERROR, CODE_INVALID_PARAMS, CODE_INVALID_REQUEST, CODE_METHOD_NOT_FOUND};
use crate::surface::ToolView;
use crate::{CONTENT_TYPE_JSON, HEADER_CONNECTION, HttpReply, RpcId, json};
use serde_json::{Map, Value, json};

/// Largest request body read (1 MiB).
pub const A2A_BODY_MAX: usize = 1 << 20;
/// Longest task id, in characters (all ASCII).
pub const TASK_ID_MAX: usize = 128;
/// The prefix of a `transition_fn` pin.
pub const TRANSITION_FN_PREFIX: &str = "sha256:";
/// Hex digits after the prefix.
pub const TRANSITION_FN_HEX_LEN: usize = 64;
/// The single artifact's id in 0.3 and 1.0 tasks (the schema requires one;
/// a task has exactly one output).
pub const ARTIFACT_ID: &str = "output";
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

/// A2A code for session denial and, in A2A's own table, TaskNotFound.
pub const CODE_SESSION_OR_TASK_NOT_FOUND: i64 = -32001;

/// Which A2A generation the request spoke; the reply speaks the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// v0.1 `tasks/send`, the seed's method.
    Legacy01,
    /// v0.3 `message/send` and `tasks/get`.
    V03,
    /// v1.0 `SendMessage` and `GetTask`.
    V10,
}

/// What the caller asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum A2aKind {
    /// Run (or replay, if committed) transition `skill_id` as task `task_id`.
    Send {
        task_id: String,
        skill_id: String,
        /// Always a JSON object.
        arguments: Value,
        /// A validated `sha256:<64 hex>` pin, if given.
        transition_fn: Option<String>,
        /// `message.contextId` (0.3, 1.0), echoed in the reply.
        context_id: Option<String>,
    },
    /// The state of task `task_id` (the committed result, if any).
    Get { task_id: String },
}

/// A parsed, shape-checked `/a2a/` request.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aRequest {
    pub jsonrpc_id: RpcId,
    pub flavor: Flavor,
    pub kind: A2aKind,
}

/// A JSON-RPC reply for `/a2a/`, always sent as HTTP 200 JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aReply {
    id: RpcId,
    outcome: Result<Value, (i64, String)>,
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
        self.outcome.as_ref().err().map(|(c, _)| *c)
    }
    pub fn error_message(&self) -> Option<&str> {
        self.outcome.as_ref().err().map(|(_, m)| m.as_str())
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
            Err((code, message)) => {
                out.extend_from_slice(b"{\"error\":");
                out.extend_from_slice(&json::to_vec(&json!({"code": code, "message": message})));
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
    A2aReply { id: jsonrpc_id.clone(), outcome: Err((code, message.to_owned())), close_connection: false }
}

fn result(jsonrpc_id: &RpcId, value: Value) -> A2aReply {
    A2aReply { id: jsonrpc_id.clone(), outcome: Ok(value), close_connection: false }
}

/// Every row of the seed's A2A error table (session denials are
/// [`crate::auth::a2a_denial`]), plus TaskNotFound for the get methods.
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
    /// -32001: `tasks/get`/`GetTask` for a task with no committed result.
    TaskNotFound,
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
        };
        fixed.to_owned()
    }

    /// The reply for request `jsonrpc_id`.
    pub fn reply(&self, jsonrpc_id: &RpcId) -> A2aReply {
        let mut r = error(jsonrpc_id, self.code(), &self.message());
        r.close_connection = matches!(self, A2aError::DeadlineExceeded);
        r
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

type Bad = A2aError;

fn object(v: Option<&Value>) -> Result<&Map<String, Value>, Bad> {
    v.and_then(Value::as_object).ok_or(Bad::InvalidParams)
}

fn task_id(v: Option<&Value>) -> Result<String, Bad> {
    match v {
        Some(Value::String(s)) if is_task_id(s) => Ok(s.clone()),
        _ => Err(Bad::InvalidParams),
    }
}

/// A metadata string looked up in each place in turn; the first place that
/// has the key decides (so a bad value is not skipped over).
fn metadata_str<'a>(places: &[Option<&'a Value>], key: &str) -> Result<Option<&'a str>, Bad> {
    for place in places.iter().flatten() {
        let Some(meta) = place.as_object() else {
            return Err(Bad::InvalidParams);
        };
        match meta.get(key) {
            None => continue,
            Some(Value::String(s)) => return Ok(Some(s)),
            Some(_) => return Err(Bad::InvalidParams),
        }
    }
    Ok(None)
}

fn skill_and_pin(places: &[Option<&Value>]) -> Result<(String, Option<String>), Bad> {
    let skill = metadata_str(places, "skill_id")?.filter(|s| !s.is_empty()).ok_or(Bad::InvalidParams)?;
    let pin = match places.iter().flatten().filter_map(|p| p.get("transition_fn")).find(|v| !v.is_null()) {
        None => None,
        Some(Value::String(s)) if is_transition_fn(s) => Some(s.clone()),
        Some(_) => return Err(Bad::InvalidParams),
    };
    Ok((skill.to_owned(), pin))
}

/// The one part's `data` object; `tag` is the discriminator member
/// (`type` in 0.1, `kind` in 0.3, none in 1.0).
fn single_data_part(message: &Map<String, Value>, tag: Option<&str>) -> Result<Value, Bad> {
    let parts = message.get("parts").and_then(Value::as_array).ok_or(Bad::InvalidParams)?;
    let [part] = parts.as_slice() else {
        return Err(Bad::InvalidParams);
    };
    let part = part.as_object().ok_or(Bad::InvalidParams)?;
    match tag {
        Some(tag) => {
            if part.get(tag).and_then(Value::as_str) != Some("data") {
                return Err(Bad::InvalidParams);
            }
        }
        // 1.0's Part is a oneof: a data part carries no other content.
        None => {
            if ["text", "raw", "url", "file"].iter().any(|k| part.contains_key(*k)) {
                return Err(Bad::InvalidParams);
            }
        }
    }
    match part.get("data") {
        Some(d @ Value::Object(_)) => Ok(d.clone()),
        _ => Err(Bad::InvalidParams),
    }
}

fn parse_tasks_send(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let params = object(params)?;
    let task_id = task_id(params.get("id"))?;
    let metadata = params.get("metadata");
    if metadata.is_none() {
        return Err(Bad::InvalidParams);
    }
    let (skill_id, transition_fn) = skill_and_pin(&[metadata])?;
    let message = object(params.get("message"))?;
    let arguments = single_data_part(message, Some("type"))?;
    Ok(A2aKind::Send { task_id, skill_id, arguments, transition_fn, context_id: None })
}

/// `message/send` (0.3) and `SendMessage` (1.0) share everything but the
/// part discriminator and the `kind` member.
fn parse_message_send(params: Option<&Value>, flavor: Flavor) -> Result<A2aKind, Bad> {
    let params = object(params)?;
    let message = object(params.get("message"))?;
    if flavor == Flavor::V03 && message.get("kind").is_some_and(|k| k.as_str() != Some("message")) {
        return Err(Bad::InvalidParams);
    }
    let message_id = match message.get("messageId") {
        Some(Value::String(s)) if !s.is_empty() => s.as_str(),
        _ => return Err(Bad::InvalidParams),
    };
    // The task id is the idempotency key: taskId when given, else the
    // messageId. Either must fit the task-id grammar; a messageId that does
    // not is refused rather than rewritten (no hash is available here, and a
    // lossy rewrite could merge two tasks).
    let task_id = match message.get("taskId") {
        None | Some(Value::Null) => task_id(Some(&Value::String(message_id.to_owned())))?,
        Some(v) => task_id(Some(v))?,
    };
    let context_id = match message.get("contextId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(Bad::InvalidParams),
    };
    let (skill_id, transition_fn) = skill_and_pin(&[params.get("metadata"), message.get("metadata")])?;
    let tag = match flavor {
        Flavor::V03 => Some("kind"),
        _ => None,
    };
    let arguments = single_data_part(message, tag)?;
    Ok(A2aKind::Send { task_id, skill_id, arguments, transition_fn, context_id })
}

fn parse_get(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let params = object(params)?;
    Ok(A2aKind::Get { task_id: task_id(params.get("id"))? })
}

/// Checks the envelope and the params shape.
///
/// Errors: bad JSON, not an object, `jsonrpc` not "2.0" or an id that is not
/// a string, number or null → -32600 `invalid JSON-RPC request`; another
/// method → -32601; a bad shape → -32602 `invalid params`. A missing id is
/// answered as `null`.
pub fn parse(body: &[u8]) -> Result<A2aRequest, A2aReply> {
    let invalid = |id: &RpcId| A2aError::InvalidRequest.reply(id);
    let obj = rpc::parse_object(body).map_err(|_| invalid(&RpcId::Null))?;
    let id = match rpc::id_member(&obj) {
        None => RpcId::Null,
        Some(Some(id)) => id,
        Some(None) => return Err(invalid(&RpcId::Null)),
    };
    if !rpc::is_jsonrpc_2(&obj) {
        return Err(invalid(&id));
    }
    let Some(method) = rpc::str_member(&obj, "method") else {
        return Err(invalid(&id));
    };
    let flavor = match method.as_str() {
        "tasks/send" => Flavor::Legacy01,
        "message/send" | "tasks/get" => Flavor::V03,
        "SendMessage" | "GetTask" => Flavor::V10,
        _ => return Err(A2aError::MethodNotFound.reply(&id)),
    };
    let params = match rpc::value_member(&obj, "params") {
        None => None,
        Some(Ok(v)) => Some(v),
        // Valid JSON but too deep for a Value: a params problem.
        Some(Err(_)) => return Err(A2aError::InvalidParams.reply(&id)),
    };
    let kind = match method.as_str() {
        "tasks/send" => parse_tasks_send(params.as_ref()),
        "message/send" | "SendMessage" => parse_message_send(params.as_ref(), flavor),
        _ => parse_get(params.as_ref()),
    }
    .map_err(|e| e.reply(&id))?;
    Ok(A2aRequest { jsonrpc_id: id, flavor, kind })
}

/// What a committed task produced.
#[derive(Debug, Clone, Copy)]
pub struct CompletedTask<'a> {
    pub task_id: &'a str,
    /// The request's `contextId`; the task id when absent.
    pub context_id: Option<&'a str>,
    /// The transition's output object.
    pub output: &'a Value,
    /// `a2a:<episode>:<task>`.
    pub invocation_id: &'a str,
    pub world_ref: &'a str,
    pub entry_index: u64,
}

fn task_value(flavor: Flavor, t: &CompletedTask<'_>) -> Value {
    let metadata = json!({
        "invocation_id": t.invocation_id,
        "world_ref": t.world_ref,
        "entry_index": t.entry_index,
    });
    let context_id = t.context_id.unwrap_or(t.task_id);
    match flavor {
        Flavor::Legacy01 => json!({
            "id": t.task_id,
            "status": {"state": "completed"},
            "artifacts": [{"parts": [{"type": "data", "data": t.output}]}],
            "metadata": metadata,
        }),
        Flavor::V03 => json!({
            "kind": "task",
            "id": t.task_id,
            "contextId": context_id,
            "status": {"state": "completed"},
            "artifacts": [{"artifactId": ARTIFACT_ID, "parts": [{"kind": "data", "data": t.output}]}],
            "metadata": metadata,
        }),
        Flavor::V10 => json!({
            "id": t.task_id,
            "contextId": context_id,
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": ARTIFACT_ID, "parts": [{"data": t.output}]}],
            "metadata": metadata,
        }),
    }
}

/// The reply to a send: the completed Task (1.0 wraps it as `{"task":…}`,
/// the `SendMessageResponse` oneof).
pub fn task_completed(flavor: Flavor, jsonrpc_id: &RpcId, task: &CompletedTask<'_>) -> A2aReply {
    let t = task_value(flavor, task);
    match flavor {
        Flavor::V10 => result(jsonrpc_id, json!({ "task": t })),
        _ => result(jsonrpc_id, t),
    }
}

/// The reply to a get: the Task itself, in every flavour.
pub fn task_snapshot(flavor: Flavor, jsonrpc_id: &RpcId, task: &CompletedTask<'_>) -> A2aReply {
    result(jsonrpc_id, task_value(flavor, task))
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
        "capabilities": {
            "streaming": false,
            "pushNotifications": false,
            "stateTransitionHistory": false,
        },
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
    HttpReply::new(200, CONTENT_TYPE_JSON, json::to_line(&agent_card(input)))
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
