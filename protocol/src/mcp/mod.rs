//! `POST /mcp/`: MCP Streamable HTTP, both eras on one endpoint, as a plan
//! that the server executes and then finishes.
//!
//! Each request picks its era ([`select_era`]): a request that
//! carries the modern `_meta` protocol version (or asks `server/discover`) is
//! served by [`modern`] (2026-07-28: stateless, JSON replies, headers that
//! must match the body); everything else, `initialize` included, by
//! [`legacy`], which follows the upstream `mcphttp` handler check for check
//! and text for text. Tool names, schemas and call results come from the
//! same functions in both eras. See the crate docs for the two steps.

pub mod legacy;
pub mod modern;
pub mod tasks;

pub use legacy::{
    BATCH_PROTOCOL_VERSION, DEFAULT_PROTOCOL_VERSION, LATEST_PROTOCOL_VERSION, MSG_EMPTY_BATCH,
    SUPPORTED_PROTOCOL_VERSIONS,
};
pub use modern::MODERN_PROTOCOL_VERSIONS;
pub use tasks::{TaskAnswer, TaskMethod, TaskOutcome, TaskRequest, TaskState, TaskStatus, TaskView};

use crate::json::{self, go_quote};
use crate::rpc::{
    self, CODE_INTERNAL_ERROR, CODE_INVALID_PARAMS, CODE_INVALID_REQUEST, CODE_PARSE_ERROR, ObjectError, RawObject,
};
use crate::surface::Surface;
use crate::{CONTENT_TYPE_JSON, CONTENT_TYPE_TEXT, HEADER_ALLOW, HttpReply, RpcId};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Largest request body read (4 MiB); the server caps its read here.
pub const MCP_BODY_MAX: usize = 4 << 20;

pub const MSG_BAD_CONTENT_TYPE: &str = "Content-Type must be application/json";
pub const MSG_BAD_ACCEPT: &str = "Accept must list both application/json and text/event-stream";
pub const MSG_BAD_JSONRPC: &str = "expected jsonrpc: \"2.0\"";
pub const MSG_NOT_A_MESSAGE: &str = "not a JSON-RPC request, notification or response";
/// Envelope message when the body exceeds [`MCP_BODY_MAX`].
pub const MSG_BODY_INVALID: &str = "invalid MCP request body";
/// Per-item error when a call produced JSON `null`.
pub const MSG_NO_RESULT: &str = "host callback returned no result";
/// Per-item error when a call produced JSON that is not an object.
pub const MSG_INVALID_RESULT: &str = "host callback returned invalid JSON";

/// The request headers `plan` reads. A repeated header should be joined with
/// `", "` (Accept, `Mcp-Method`, `Mcp-Name`: a repeat then never matches the
/// body) or given as its first value (the others).
#[derive(Debug, Clone, Copy, Default)]
pub struct McpHeaders<'a> {
    pub content_type: Option<&'a str>,
    pub accept: Option<&'a str>,
    pub protocol_version: Option<&'a str>,
    /// Every `MCP-Protocol-Version` value, raw: the modern era requires
    /// exactly one, equal to the `_meta` version (`protocol_version` is the
    /// legacy handler's first value).
    pub protocol_version_all: Option<&'a [u8]>,
    /// `Mcp-Method` as raw bytes (the modern era checks its characters).
    pub mcp_method: Option<&'a [u8]>,
    /// `Mcp-Name` as raw bytes, possibly `=?base64?…?=`.
    pub mcp_name: Option<&'a [u8]>,
    /// Every `Mcp-Param-{Name}` header: `{Name}` as sent, the value raw.
    pub mcp_params: &'a [(&'a str, &'a [u8])],
}

/// `serverInfo` of the `initialize` result (and of every modern result's
/// `_meta`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ServerInfo<'a> {
    pub name: &'a str,
    pub version: &'a str,
}

/// Why a host call did not produce a result; each answers the whole POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostFailure {
    /// Any other error (R8, EffectsUnrecorded, coordinator, refused surface).
    Failed,
    /// A deadline passed.
    TimedOut,
    /// The request was cancelled (client gone, shutdown).
    Canceled,
    /// No callback slot became free in time.
    CapacityExceeded,
}

impl HostFailure {
    pub fn message(self) -> &'static str {
        match self {
            HostFailure::Failed => "host callback failed",
            HostFailure::TimedOut => "host callback timed out",
            HostFailure::Canceled => "host callback canceled",
            HostFailure::CapacityExceeded => "host callback capacity exceeded",
        }
    }
}

/// A `tools/call` the server must execute (admission, fresh task id, run).
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub jsonrpc_id: RpcId,
    /// The MCP tool name as called.
    pub tool_name: String,
    /// The decoded transition id.
    pub transition_id: String,
    /// A JSON object, already validated against the input schema.
    pub arguments: Value,
    /// What a modern client said of asking its user (none in the legacy eras).
    pub input: Input,
    /// This request's client capabilities declare the tasks extension
    /// ([`tasks::EXTENSION_TASKS`]); always false in the legacy era. Only
    /// then may the server answer [`CallAnswer::Task`] (a durable task the
    /// client polls with `tasks/get`) instead of running the call to its end
    /// within the POST. When false the server runs the call synchronously
    /// (clients that did not declare it get a plain result); a task answered
    /// anyway is rendered as the -32021 the extension prescribes.
    pub accepts_task: bool,
}

/// A modern `tools/call`'s Multi Round-Trip fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Input {
    /// The client declared form elicitation in this request's capabilities.
    pub can_elicit: bool,
    /// A retry's `requestState`, as echoed.
    pub request_state: Option<String>,
    /// A retry's `inputResponses`, by the keys the server asked with.
    pub responses: Map<String, Value>,
}

/// A response `plan` could give by itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    jsonrpc_id: RpcId,
    error_code: Option<i64>,
    json: Vec<u8>,
}

impl Answer {
    pub fn jsonrpc_id(&self) -> &RpcId {
        &self.jsonrpc_id
    }
    /// The JSON-RPC error code, if this answer is an error.
    pub fn error_code(&self) -> Option<i64> {
        self.error_code
    }
    /// The response object's wire bytes.
    pub fn json(&self) -> &[u8] {
        &self.json
    }
}

/// One request item of the POST, in body order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Answered(Answer),
    Call(Call),
    /// Modern era: a checked `tasks/get`, `tasks/update` or `tasks/cancel`
    /// from a client that declared the tasks extension. The server looks the
    /// task up for this caller and answers with [`finish_task`].
    Task(TaskRequest),
}

/// The checked POST: its steps in order, waiting for the call outcomes.
#[derive(Debug, Clone, PartialEq)]
pub struct McpPlan {
    era: PlanEra,
    steps: Vec<Step>,
}

/// What `finish` needs to know of the request's era.
#[derive(Debug, Clone, PartialEq)]
enum PlanEra {
    Legacy { protocol_version: &'static str, batch: bool },
    Modern { protocol_version: &'static str, server: modern::OwnedServerInfo },
}

/// What the server reports for each [`Call`], in order. After the first
/// `Err` it stops calling; `finish` answers with that failure's envelope.
pub type CallOutcome = Result<CallAnswer, HostFailure>;

/// How one call ended, as the client is told.
#[derive(Debug, Clone, PartialEq)]
pub enum CallAnswer {
    /// The transition's output: the tool's result.
    Output(Value),
    /// A tool execution error that ran nothing: text for the model (and its
    /// user) to act on, `isError` set.
    Refused(String),
    /// Modern era: the client must ask its user first (a Multi Round-Trip
    /// Request), then retry with the answers and the state, byte-exact.
    InputRequired { input_requests: Value, request_state: String },
    /// Modern era: the call goes on as a durable task, rendered as a
    /// `CreateTaskResult` (`resultType: "task"`). Answer it only when
    /// [`Call::accepts_task`] is set and the task is durably created (a
    /// `tasks/get` for it would resolve); to a call that did not declare the
    /// extension it is rendered as -32021 naming the extension, and in the
    /// legacy era as -32603.
    Task(TaskView),
    /// A JSON-RPC error for this call alone.
    Error { code: i64, message: String, data: Option<Value> },
}

impl From<Value> for CallAnswer {
    fn from(output: Value) -> CallAnswer {
        CallAnswer::Output(output)
    }
}

impl McpPlan {
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The calls to execute, in order.
    pub fn calls(&self) -> impl Iterator<Item = &Call> {
        self.steps.iter().filter_map(|s| match s {
            Step::Call(c) => Some(c),
            Step::Answered(_) | Step::Task(_) => None,
        })
    }

    /// The task request to serve, when this plan is one (the modern era
    /// carries one request per POST, so a plan holds at most one). Look the
    /// task up for this caller, then answer with [`finish_task`].
    pub fn task(&self) -> Option<&TaskRequest> {
        self.steps.iter().find_map(|s| match s {
            Step::Task(t) => Some(t),
            Step::Answered(_) | Step::Call(_) => None,
        })
    }

    pub fn call_count(&self) -> usize {
        self.calls().count()
    }

    pub fn is_batch(&self) -> bool {
        matches!(self.era, PlanEra::Legacy { batch: true, .. })
    }

    /// The era that serves this request.
    pub fn era(&self) -> Era {
        match self.era {
            PlanEra::Legacy { .. } => Era::Legacy,
            PlanEra::Modern { .. } => Era::Modern,
        }
    }

    /// The protocol version the request is served under: a legacy header (or
    /// the legacy default), or the modern `_meta` version.
    pub fn protocol_version(&self) -> &'static str {
        match self.era {
            PlanEra::Legacy { protocol_version, .. } | PlanEra::Modern { protocol_version, .. } => protocol_version,
        }
    }

    /// The id the host-failure envelope carries: the request's, `null` for a
    /// batch.
    pub fn envelope_id(&self) -> RpcId {
        if self.is_batch() {
            return RpcId::Null;
        }
        match self.steps.first() {
            Some(Step::Answered(a)) => a.jsonrpc_id.clone(),
            Some(Step::Call(c)) => c.jsonrpc_id.clone(),
            Some(Step::Task(t)) => t.jsonrpc_id.clone(),
            None => RpcId::Null,
        }
    }

    /// The whole-POST failure envelope for this plan.
    pub fn host_failure(&self, failure: HostFailure) -> HttpReply {
        host_failure(&self.envelope_id(), failure)
    }
}

fn json_reply(status: u16, mut body: Vec<u8>) -> HttpReply {
    body.push(b'\n');
    HttpReply::new(status, CONTENT_TYPE_JSON, body)
}

fn bad_request(id: &RpcId, code: i64, message: &str) -> HttpReply {
    json_reply(400, rpc::error_bytes(id, code, message))
}

/// `405` for anything but POST (checked before auth and the body).
pub fn method_not_allowed() -> HttpReply {
    let mut r = HttpReply::new(405, CONTENT_TYPE_TEXT, b"Method Not Allowed\n".to_vec());
    r.headers.push((HEADER_ALLOW, "POST".to_owned()));
    r
}

/// The body exceeded [`MCP_BODY_MAX`]: HTTP 200 envelope, `id: null`, as the
/// upstream handler answers (a declared length over it is refused before auth).
pub fn body_too_large() -> HttpReply {
    json_reply(200, rpc::error_bytes(&RpcId::Null, CODE_INTERNAL_ERROR, MSG_BODY_INVALID))
}

/// The frozen host-failure envelope: HTTP 200, plain JSON (not SSE).
pub fn host_failure(id: &RpcId, failure: HostFailure) -> HttpReply {
    json_reply(200, rpc::error_bytes(id, CODE_INTERNAL_ERROR, failure.message()))
}

/// The envelope before a plan exists (surface refused, no capacity at
/// admission): the id is the body's top-level id when one can be read.
pub fn host_failure_for_body(body: &[u8], failure: HostFailure) -> HttpReply {
    host_failure(&top_level_id(body), failure)
}

/// Best effort: the `id` of a single JSON-RPC object body; `null` for a batch,
/// invalid JSON, or no valid id.
pub fn top_level_id(body: &[u8]) -> RpcId {
    match rpc::parse_object(trim_ascii_space(body)) {
        Ok(obj) => rpc::id_member(&obj).flatten().unwrap_or_default(),
        Err(_) => RpcId::Null,
    }
}

/// Go's `bytes.TrimSpace` over ASCII whitespace.
fn trim_ascii_space(b: &[u8]) -> &[u8] {
    let is_space = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c');
    let start = b.iter().position(|c| !is_space(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !is_space(c)).map_or(start, |i| i + 1);
    &b[start..end]
}

/// The media type of a header value, lowercased, without parameters.
fn media_type(v: &str) -> String {
    v.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

/// The first transport rule the request breaks (Content-Type, then Accept),
/// as its message; both eras check these first.
fn transport_refusal(headers: &McpHeaders<'_>) -> Option<&'static str> {
    if !content_type_ok(headers.content_type) {
        return Some(MSG_BAD_CONTENT_TYPE);
    }
    (!accept_ok(headers.accept)).then_some(MSG_BAD_ACCEPT)
}

fn content_type_ok(v: Option<&str>) -> bool {
    v.is_some_and(|v| media_type(v) == "application/json")
}

fn accept_ok(v: Option<&str>) -> bool {
    let Some(v) = v else { return false };
    let types: Vec<String> = v.split(',').map(media_type).collect();
    // Wildcards do not count: the client must name both explicitly.
    types.iter().any(|t| t == "application/json") && types.iter().any(|t| t == "text/event-stream")
}

/// Which era serves a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2025-11-25 and earlier: `initialize`, SSE replies, the seed's rules.
    Legacy,
    /// 2026-07-28: per-request `_meta`, `server/discover`, JSON replies.
    Modern,
}

/// Picks the era of one POST body.
///
/// The `_meta` protocol version decides, not the header and not `_meta`
/// merely being there (some legacy clients send `"_meta":{}`). A body whose
/// `_meta` names a legacy version stays legacy unless the header names
/// another version (that mismatch is the modern era's -32020).
/// `server/discover` exists only in the modern era, so it is modern even
/// without `_meta` (and is then refused for the missing field). Batches,
/// unparsable bodies and everything else are legacy, which has the seed's
/// answer for each.
pub fn select_era(protocol_version_header: Option<&str>, body: &[u8]) -> Era {
    // Borrowed peeks: the members that decide, without copying the body.
    // A body these cannot read (not one object, a repeated member) is legacy.
    let Ok(peek) = serde_json::from_slice::<PeekRequest<'_>>(trim_ascii_space(body)) else { return Era::Legacy };
    if peek.method.and_then(|m| serde_json::from_str::<String>(m.get()).ok()).as_deref()
        == Some(modern::METHOD_DISCOVER)
    {
        return Era::Modern;
    }
    let meta_version = peek
        .params
        .and_then(|p| serde_json::from_str::<PeekParams<'_>>(p.get()).ok())
        .and_then(|p| p.meta)
        .and_then(|m| serde_json::from_str::<PeekMeta<'_>>(m.get()).ok())
        .and_then(|m| m.protocol_version.map(|v| serde_json::from_str::<String>(v.get()).ok()));
    match meta_version {
        None => Era::Legacy,
        Some(Some(v))
            if SUPPORTED_PROTOCOL_VERSIONS.contains(&v.as_str())
                && protocol_version_header.is_none_or(|h| h.is_empty() || h == v) =>
        {
            Era::Legacy
        }
        Some(_) => Era::Modern,
    }
}

#[derive(serde::Deserialize)]
struct PeekRequest<'a> {
    #[serde(borrow)]
    method: Option<&'a RawValue>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
struct PeekParams<'a> {
    #[serde(borrow, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
struct PeekMeta<'a> {
    #[serde(borrow, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<&'a RawValue>,
}

/// Checks the transport, parses the body and answers what needs no host call,
/// in the era the request speaks.
///
/// `Err(reply)` means "send this now": a 4xx, or the 202 when no item needs
/// an answer. `Ok(plan)`: execute `plan.calls()` in order, then [`finish`].
pub fn plan(
    headers: &McpHeaders<'_>,
    body: &[u8],
    surface: &Surface,
    server: &ServerInfo<'_>,
) -> Result<McpPlan, HttpReply> {
    match select_era(headers.protocol_version, body) {
        Era::Legacy => legacy::plan(headers, body, surface, server),
        Era::Modern => modern::plan(headers, body, surface, server),
    }
}

/// Builds the reply from the plan and the outcomes of its calls, in order.
///
/// Any `Err` outcome (or fewer outcomes than calls) answers the whole POST
/// with the host-failure envelope, in both eras. Otherwise the legacy era
/// answers one SSE event and the modern era one JSON object.
pub fn finish(plan: McpPlan, outcomes: Vec<CallOutcome>) -> HttpReply {
    match &plan.era {
        PlanEra::Legacy { batch, .. } => legacy::finish(&plan, *batch, outcomes),
        PlanEra::Modern { server, .. } => modern::finish(&plan, server, outcomes),
    }
}

/// Builds the reply to a task plan ([`McpPlan::task`]) from the server's
/// answer: a `GetTaskResult`, an acknowledgement, or the error the answer
/// names (see [`TaskAnswer`]); an `Err` is the host-failure envelope, as for
/// a call. A plan that holds no task step is finished as by [`finish`] with
/// no outcomes.
pub fn finish_task(plan: McpPlan, outcome: TaskOutcome) -> HttpReply {
    match (&plan.era, plan.steps.first()) {
        (PlanEra::Modern { server, .. }, Some(Step::Task(request))) => tasks::reply(request, outcome, server),
        _ => finish(plan, Vec::new()),
    }
}

/// What one body item is.
enum Item {
    Request {
        id: RpcId,
        method: String,
        obj: RawObject,
    },
    /// A notification or a response: accepted, never answered.
    Skip,
}

/// A 400 for one item: its id when known, the code and the text.
struct ItemError {
    id: RpcId,
    code: i64,
    message: String,
}

fn classify(raw: &RawValue) -> Result<Item, ItemError> {
    let obj = rpc::object_of(raw).map_err(|e| ItemError {
        id: RpcId::Null,
        code: CODE_PARSE_ERROR,
        message: match e {
            ObjectError::Syntax(e) => format!("invalid JSON: {e}"),
            ObjectError::NotObject(kind) => {
                format!("invalid JSON: cannot unmarshal {kind} into a JSON-RPC message")
            }
        },
    })?;
    let id = rpc::id_member(&obj);
    let known_id = id.clone().flatten().unwrap_or_default();
    if !rpc::is_jsonrpc_2(&obj) {
        return Err(ItemError { id: known_id, code: CODE_INVALID_REQUEST, message: MSG_BAD_JSONRPC.to_owned() });
    }
    let not_a_message =
        || ItemError { id: known_id.clone(), code: CODE_INVALID_REQUEST, message: MSG_NOT_A_MESSAGE.to_owned() };
    let method = match obj.get("method") {
        None => None,
        Some(_) => Some(rpc::str_member(&obj, "method").ok_or_else(not_a_message)?),
    };
    match (method, id) {
        // "id": null counts as present: that is a request.
        (Some(method), Some(Some(id))) => Ok(Item::Request { id, method, obj }),
        (Some(_), Some(None)) => Err(not_a_message()),
        (Some(_), None) => Ok(Item::Skip),
        (None, Some(Some(_))) if obj.contains_key("result") || obj.contains_key("error") => Ok(Item::Skip),
        (None, _) => Err(not_a_message()),
    }
}

fn answer_error(id: RpcId, code: i64, message: &str) -> Step {
    let json = rpc::error_bytes(&id, code, message);
    Step::Answered(Answer { jsonrpc_id: id, error_code: Some(code), json })
}

fn answer_error_data(id: RpcId, code: i64, message: &str, data: &Value) -> Step {
    let json = rpc::error_data_bytes(&id, code, message, data);
    Step::Answered(Answer { jsonrpc_id: id, error_code: Some(code), json })
}

fn answer_result<T: Serialize>(id: RpcId, result: &T) -> Step {
    let json = rpc::result_bytes(&id, result);
    Step::Answered(Answer { jsonrpc_id: id, error_code: None, json })
}

/// The capabilities both eras advertise: tools, whose list never announces
/// changes (a session's view is rebuilt on every request instead); the
/// modern era adds the extensions it serves.
#[derive(Serialize)]
struct Capabilities {
    tools: ToolsCapability,
    #[serde(skip_serializing_if = "Option::is_none")]
    extensions: Option<Extensions>,
}

/// The extensions the modern era serves, each with no settings (`{}`).
#[derive(Serialize)]
struct Extensions {
    #[serde(rename = "io.modelcontextprotocol/tasks")]
    tasks: Empty,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct ToolsCapability {
    #[serde(rename = "listChanged")]
    list_changed: bool,
}

impl Capabilities {
    const TOOLS: Capabilities = Capabilities { tools: ToolsCapability { list_changed: false }, extensions: None };
    const MODERN: Capabilities =
        Capabilities { extensions: Some(Extensions { tasks: Empty {} }), ..Capabilities::TOOLS };
}

#[derive(Serialize)]
struct ToolEntry<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    #[serde(rename = "inputSchema")]
    input_schema: &'a Value,
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    output_schema: Option<&'a Value>,
}

#[derive(Serialize)]
struct ToolsList<'a> {
    tools: Vec<ToolEntry<'a>>,
}

/// The session's tools as both eras list them (the modern era adds its
/// result fields around the same entries).
fn tools_list(surface: &Surface) -> ToolsList<'_> {
    let tools = surface
        .tools()
        .iter()
        .map(|t| ToolEntry {
            name: t.name(),
            description: t.description(),
            input_schema: t.input_schema(),
            output_schema: t.output_schema(),
        })
        .collect();
    ToolsList { tools }
}

fn invalid_params(id: RpcId, detail: &str) -> Step {
    answer_error(id, CODE_INVALID_PARAMS, &format!("invalid params: {detail}"))
}

/// `params` as an object: absent and `null` are `None`; other types refuse.
fn params_object(obj: &RawObject) -> Result<Option<Map<String, Value>>, String> {
    match rpc::value_member(obj, "params") {
        None => Ok(None),
        Some(Err(e)) => Err(e),
        Some(Ok(Value::Null)) => Ok(None),
        Some(Ok(Value::Object(m))) => Ok(Some(m)),
        Some(Ok(_)) => Err("params must be a JSON object".to_owned()),
    }
}

/// A `tools/call` item: the tool looked up in the session's surface and its
/// arguments checked against the input schema, or the protocol error.
/// Why a `tools/call` names no call to run.
enum CallRefusal {
    /// A protocol error in either era (a bad name, an unknown tool,
    /// arguments that are not an object): its message.
    Protocol(String),
    /// Arguments that fail the tool's input schema: the validator's message.
    /// The legacy era answers -32602; the modern one a tool error the model
    /// can read (SEP-1303).
    InvalidArguments(String),
}

/// A `tools/call`'s params as a call of a tool the surface holds, with
/// arguments its schema accepts.
fn resolve_call(id: &RpcId, params: &Map<String, Value>, surface: &Surface) -> Result<Call, CallRefusal> {
    // A missing name is the empty name, which no surface contains.
    let name = match params.get("name") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(CallRefusal::Protocol("invalid params: name must be a string".into())),
    };
    let Some(tool) = surface.lookup(&name) else {
        return Err(CallRefusal::Protocol(format!("unknown tool {}", go_quote(&name))));
    };
    // MCP makes `arguments` optional; absent means no arguments.
    let arguments = params.get("arguments").cloned().unwrap_or_else(|| Value::Object(Default::default()));
    if !arguments.is_object() {
        return Err(CallRefusal::Protocol("invalid params: arguments must be a JSON object".into()));
    }
    tool.validate_arguments(&arguments).map_err(CallRefusal::InvalidArguments)?;
    let transition_id = tool.transition_id().to_owned();
    Ok(Call {
        jsonrpc_id: id.clone(),
        tool_name: name,
        transition_id,
        arguments,
        input: Input::default(),
        accepts_task: false,
    })
}

/// The legacy era's `tools/call`: every refusal is a -32602 protocol error.
fn plan_call(id: RpcId, params: &Map<String, Value>, surface: &Surface) -> Step {
    match resolve_call(&id, params, surface) {
        Ok(call) => Step::Call(call),
        Err(CallRefusal::Protocol(message)) => answer_error(id, CODE_INVALID_PARAMS, &message),
        Err(CallRefusal::InvalidArguments(detail)) => invalid_params(id, &detail),
    }
}

/// The output object as a text block (upstream MCP returns it twice: as
/// text and as `structuredContent`).
#[derive(Serialize)]
struct TextContent {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
}

impl TextContent {
    fn of(output: &Value) -> TextContent {
        TextContent { kind: "text", text: json::to_plain_string(output) }
    }
}

/// Whether a call's output can be a tool result; the per-item error text
/// when it cannot.
fn call_output(output: &Value) -> Result<(), &'static str> {
    match output {
        Value::Object(_) => Ok(()),
        Value::Null => Err(MSG_NO_RESULT),
        _ => Err(MSG_INVALID_RESULT),
    }
}

#[cfg(test)]
mod legacy_tests;
#[cfg(test)]
mod modern_tests;
#[cfg(test)]
mod tasks_tests;
