//! `POST /mcp/`: MCP Streamable HTTP (legacy era, stateless), as a plan that
//! the server executes and then finishes.
//!
//! Behaviour follows the upstream `mcphttp` handler: the checks run in its
//! order and the texts are its texts. See the crate docs for the two steps.

use crate::json::{self, go_quote};
use crate::rpc::{
    self, CODE_INTERNAL_ERROR, CODE_INVALID_PARAMS, CODE_INVALID_REQUEST, CODE_METHOD_NOT_FOUND, CODE_PARSE_ERROR,
    ObjectError, RawObject,
};
use crate::surface::Surface;
use crate::{
    CONTENT_TYPE_JSON, CONTENT_TYPE_SSE, CONTENT_TYPE_TEXT, HEADER_ALLOW, HEADER_CACHE_CONTROL, HttpReply, RpcId,
};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Largest request body read (4 MiB); the server caps its read here.
pub const MCP_BODY_MAX: usize = 4 << 20;

/// Protocol versions served, newest first (the order of the error text).
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Assumed when `MCP-Protocol-Version` is absent or empty.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-03-26";
/// Answered to `initialize` when the requested version is not served.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
/// The only version under which JSON arrays (batches) are accepted.
pub const BATCH_PROTOCOL_VERSION: &str = "2025-03-26";

pub const MSG_BAD_CONTENT_TYPE: &str = "Content-Type must be application/json";
pub const MSG_BAD_ACCEPT: &str = "Accept must list both application/json and text/event-stream";
pub const MSG_EMPTY_BATCH: &str = "empty batch";
pub const MSG_BAD_JSONRPC: &str = "expected jsonrpc: \"2.0\"";
pub const MSG_NOT_A_MESSAGE: &str = "not a JSON-RPC request, notification or response";
/// Envelope message when the body exceeds [`MCP_BODY_MAX`].
pub const MSG_BODY_INVALID: &str = "invalid MCP request body";
/// Per-item error when a call produced JSON `null`.
pub const MSG_NO_RESULT: &str = "host callback returned no result";
/// Per-item error when a call produced JSON that is not an object.
pub const MSG_INVALID_RESULT: &str = "host callback returned invalid JSON";

/// The request headers `plan` reads. A repeated header should be joined with
/// `", "` (Accept) or given as its first value (the others).
#[derive(Debug, Clone, Copy, Default)]
pub struct McpHeaders<'a> {
    pub content_type: Option<&'a str>,
    pub accept: Option<&'a str>,
    pub protocol_version: Option<&'a str>,
}

/// `serverInfo` of the `initialize` result.
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
}

/// The checked POST: its steps in order, waiting for the call outcomes.
#[derive(Debug, Clone, PartialEq)]
pub struct McpPlan {
    protocol_version: &'static str,
    batch: bool,
    steps: Vec<Step>,
}

/// What the server reports for each [`Call`], in order. After the first
/// `Err` it stops calling; `finish` answers with that failure's envelope.
pub type CallOutcome = Result<Value, HostFailure>;

impl McpPlan {
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The calls to execute, in order.
    pub fn calls(&self) -> impl Iterator<Item = &Call> {
        self.steps.iter().filter_map(|s| match s {
            Step::Call(c) => Some(c),
            Step::Answered(_) => None,
        })
    }

    pub fn call_count(&self) -> usize {
        self.calls().count()
    }

    pub fn is_batch(&self) -> bool {
        self.batch
    }

    /// The negotiated transport version (header, or the default).
    pub fn protocol_version(&self) -> &'static str {
        self.protocol_version
    }

    /// The id the host-failure envelope carries: the request's, `null` for a
    /// batch.
    pub fn envelope_id(&self) -> RpcId {
        if self.batch {
            return RpcId::Null;
        }
        match self.steps.first() {
            Some(Step::Answered(a)) => a.jsonrpc_id.clone(),
            Some(Step::Call(c)) => c.jsonrpc_id.clone(),
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
/// upstream handler answers (the read happens before auth).
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

fn content_type_ok(v: Option<&str>) -> bool {
    v.is_some_and(|v| media_type(v) == "application/json")
}

fn accept_ok(v: Option<&str>) -> bool {
    let Some(v) = v else { return false };
    let types: Vec<String> = v.split(',').map(media_type).collect();
    // Wildcards do not count: the client must name both explicitly.
    types.iter().any(|t| t == "application/json") && types.iter().any(|t| t == "text/event-stream")
}

fn negotiate_version(v: Option<&str>) -> Result<&'static str, String> {
    match v {
        None | Some("") => Ok(DEFAULT_PROTOCOL_VERSION),
        Some(v) => SUPPORTED_PROTOCOL_VERSIONS.iter().find(|s| **s == v).copied().ok_or_else(|| {
            format!(
                "unsupported MCP-Protocol-Version {} (supported: {})",
                go_quote(v),
                SUPPORTED_PROTOCOL_VERSIONS.join(", ")
            )
        }),
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

/// Checks the transport, parses the body and answers what needs no host call.
///
/// `Err(reply)` means "send this now": a 400, or the 202 when no item needs an
/// answer. `Ok(plan)`: execute `plan.calls()` in order, then [`finish`].
pub fn plan(
    headers: &McpHeaders<'_>,
    body: &[u8],
    surface: &Surface,
    server: &ServerInfo<'_>,
) -> Result<McpPlan, HttpReply> {
    if !content_type_ok(headers.content_type) {
        return Err(bad_request(&RpcId::Null, CODE_INVALID_REQUEST, MSG_BAD_CONTENT_TYPE));
    }
    if !accept_ok(headers.accept) {
        return Err(bad_request(&RpcId::Null, CODE_INVALID_REQUEST, MSG_BAD_ACCEPT));
    }
    let version =
        negotiate_version(headers.protocol_version).map_err(|m| bad_request(&RpcId::Null, CODE_INVALID_REQUEST, &m))?;

    let body = trim_ascii_space(body);
    let batch = body.first() == Some(&b'[');
    let items: Vec<Box<RawValue>> = if batch {
        if version != BATCH_PROTOCOL_VERSION {
            let m = format!("batch requests are not supported under protocol version {version}");
            return Err(bad_request(&RpcId::Null, CODE_INVALID_REQUEST, &m));
        }
        let items: Vec<Box<RawValue>> = serde_json::from_slice(body)
            .map_err(|e| bad_request(&RpcId::Null, CODE_PARSE_ERROR, &format!("invalid JSON: {e}")))?;
        if items.is_empty() {
            return Err(bad_request(&RpcId::Null, CODE_INVALID_REQUEST, MSG_EMPTY_BATCH));
        }
        items
    } else {
        let item: Box<RawValue> = serde_json::from_slice(body)
            .map_err(|e| bad_request(&RpcId::Null, CODE_PARSE_ERROR, &format!("invalid JSON: {e}")))?;
        vec![item]
    };

    let mut steps = Vec::new();
    for raw in &items {
        match classify(raw) {
            Ok(Item::Skip) => {}
            Ok(Item::Request { id, method, obj }) => {
                steps.push(dispatch(id, &method, &obj, surface, server));
            }
            Err(e) => {
                // Any 400 aborts the whole POST; a batch's id is null.
                let id = if batch { RpcId::Null } else { e.id };
                return Err(bad_request(&id, e.code, &e.message));
            }
        }
    }
    if steps.is_empty() {
        return Err(HttpReply::new(202, CONTENT_TYPE_JSON, Vec::new()));
    }
    Ok(McpPlan { protocol_version: version, batch, steps })
}

fn answer_error(id: RpcId, code: i64, message: &str) -> Step {
    let json = rpc::error_bytes(&id, code, message);
    Step::Answered(Answer { jsonrpc_id: id, error_code: Some(code), json })
}

fn answer_result<T: Serialize>(id: RpcId, result: &T) -> Step {
    let json = rpc::result_bytes(&id, result);
    Step::Answered(Answer { jsonrpc_id: id, error_code: None, json })
}

#[derive(Serialize)]
struct ToolsCapability {
    #[serde(rename = "listChanged")]
    list_changed: bool,
}

#[derive(Serialize)]
struct Capabilities {
    tools: ToolsCapability,
}

// Field order is the sorted key order of the upstream result.
#[derive(Serialize)]
struct InitializeResult<'a> {
    capabilities: Capabilities,
    #[serde(rename = "protocolVersion")]
    protocol_version: &'a str,
    #[serde(rename = "serverInfo")]
    server_info: &'a ServerInfo<'a>,
}

#[derive(Serialize)]
struct Empty {}

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

fn invalid_params(id: RpcId, detail: &str) -> Step {
    answer_error(id, CODE_INVALID_PARAMS, &format!("invalid params: {detail}"))
}

fn dispatch(id: RpcId, method: &str, obj: &RawObject, surface: &Surface, server: &ServerInfo<'_>) -> Step {
    match method {
        "initialize" => {
            let params = match params_object(obj) {
                Ok(p) => p,
                Err(e) => return invalid_params(id, &e),
            };
            // Echo a supported version; otherwise offer the newest.
            let requested = params.as_ref().and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
            let version = requested
                .and_then(|r| SUPPORTED_PROTOCOL_VERSIONS.iter().find(|s| **s == r))
                .copied()
                .unwrap_or(LATEST_PROTOCOL_VERSION);
            answer_result(
                id,
                &InitializeResult {
                    capabilities: Capabilities { tools: ToolsCapability { list_changed: false } },
                    protocol_version: version,
                    server_info: server,
                },
            )
        }
        "ping" => answer_result(id, &Empty {}),
        "tools/list" => {
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
            answer_result(id, &ToolsList { tools })
        }
        "tools/call" => plan_call(id, obj, surface),
        other => answer_error(id, CODE_METHOD_NOT_FOUND, &format!("method not found: {}", go_quote(other))),
    }
}

/// `params` as an object: absent and `null` are `None`; other types refuse.
fn params_object(obj: &RawObject) -> Result<Option<serde_json::Map<String, Value>>, String> {
    match rpc::value_member(obj, "params") {
        None => Ok(None),
        Some(Err(e)) => Err(e),
        Some(Ok(Value::Null)) => Ok(None),
        Some(Ok(Value::Object(m))) => Ok(Some(m)),
        Some(Ok(_)) => Err("params must be a JSON object".to_owned()),
    }
}

fn plan_call(id: RpcId, obj: &RawObject, surface: &Surface) -> Step {
    let params = match params_object(obj) {
        Ok(p) => p.unwrap_or_default(),
        Err(e) => return invalid_params(id, &e),
    };
    // A missing name is the empty name, which no surface contains.
    let name = match params.get("name") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return invalid_params(id, "name must be a string"),
    };
    let Some(tool) = surface.lookup(&name) else {
        return answer_error(id, CODE_INVALID_PARAMS, &format!("unknown tool {}", go_quote(&name)));
    };
    // MCP makes `arguments` optional; absent means no arguments.
    let arguments = params.get("arguments").cloned().unwrap_or_else(|| Value::Object(Default::default()));
    if let Err(e) = tool.validate_arguments(&arguments) {
        return invalid_params(id, &e);
    }
    Step::Call(Call { jsonrpc_id: id, tool_name: name, transition_id: tool.transition_id().to_owned(), arguments })
}

#[derive(Serialize)]
struct TextContent {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
}

#[derive(Serialize)]
struct CallResult<'a> {
    content: [TextContent; 1],
    #[serde(rename = "structuredContent")]
    structured_content: &'a Value,
}

fn call_response(id: &RpcId, output: &Value) -> Vec<u8> {
    match output {
        Value::Object(_) => rpc::result_bytes(
            id,
            &CallResult {
                content: [TextContent { kind: "text", text: json::to_plain_string(output) }],
                structured_content: output,
            },
        ),
        Value::Null => rpc::error_bytes(id, CODE_INTERNAL_ERROR, MSG_NO_RESULT),
        _ => rpc::error_bytes(id, CODE_INTERNAL_ERROR, MSG_INVALID_RESULT),
    }
}

/// Builds the reply from the plan and the outcomes of its calls, in order.
///
/// Any `Err` outcome (or fewer outcomes than calls) answers the whole POST
/// with the host-failure envelope; results of earlier items are dropped.
/// Otherwise: one SSE event, whose data is the response object, or the array
/// of responses for a batch.
pub fn finish(plan: McpPlan, outcomes: Vec<CallOutcome>) -> HttpReply {
    let envelope_id = plan.envelope_id();
    let mut outcomes = outcomes.into_iter();
    let mut responses: Vec<Vec<u8>> = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        match step {
            Step::Answered(a) => responses.push(a.json.clone()),
            Step::Call(c) => match outcomes.next() {
                Some(Ok(output)) => responses.push(call_response(&c.jsonrpc_id, &output)),
                Some(Err(f)) => return host_failure(&envelope_id, f),
                None => return host_failure(&envelope_id, HostFailure::Failed),
            },
        }
    }
    let mut data = Vec::new();
    if plan.batch {
        data.push(b'[');
        for (i, r) in responses.iter().enumerate() {
            if i > 0 {
                data.push(b',');
            }
            data.extend_from_slice(r);
        }
        data.push(b']');
    } else if let Some(r) = responses.first() {
        data.extend_from_slice(r);
    }
    sse_reply(&data)
}

/// One SSE event `event: message` carrying `data` (compact JSON, one line).
fn sse_reply(data: &[u8]) -> HttpReply {
    let mut body = Vec::with_capacity(data.len() + 24);
    body.extend_from_slice(b"event: message\ndata: ");
    body.extend_from_slice(data);
    body.extend_from_slice(b"\n\n");
    let mut r = HttpReply::new(200, CONTENT_TYPE_SSE, body);
    r.headers.push((HEADER_CACHE_CONTROL, "no-cache".to_owned()));
    r
}

#[cfg(test)]
mod tests;
