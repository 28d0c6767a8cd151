//! The modern era (2026-07-28): no handshake and no session; every request
//! carries its protocol version and the client's capabilities in
//! `params._meta`, mirrored into headers that must match the body. Replies
//! are one JSON object; every result says its `resultType` and carries the
//! server's identity in `_meta`, and lists carry caching hints.

use super::tasks::{self, TaskMethodName};
use super::{
    Answer, Call, CallOutcome, CallRefusal, Capabilities, Item, McpHeaders, McpPlan, PlanEra, ServerInfo, Step,
    TextContent, answer_error, answer_result, call_output, classify, host_failure, json_reply, params_object,
    resolve_call, tools_list, top_level_id, transport_refusal, trim_ascii_space,
};
use crate::json::go_quote;
use crate::rpc::{
    self, CODE_INTERNAL_ERROR, CODE_INVALID_PARAMS, CODE_INVALID_REQUEST, CODE_METHOD_NOT_FOUND, CODE_PARSE_ERROR,
};
use crate::surface::Surface;
use crate::{CONTENT_TYPE_JSON, HttpReply, RpcId};
use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// Modern protocol versions served, newest first.
pub const MODERN_PROTOCOL_VERSIONS: [&str; 1] = ["2026-07-28"];

/// `_meta` key of the request's protocol version (required).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities (required; `{}` is none).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the server's identity on every result.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The headers are missing, malformed, or do not match the body.
pub const CODE_HEADER_MISMATCH: i64 = -32020;
/// A capability the server needs was not declared: the tasks extension, for
/// `tasks/*` (and for a task answered to a call that did not declare it).
pub const CODE_MISSING_CAPABILITY: i64 = -32021;
/// The requested protocol version is not served.
pub const CODE_UNSUPPORTED_VERSION: i64 = -32022;

/// How long a client may keep `server/discover`'s answer: it changes only
/// when the daemon is upgraded.
pub const DISCOVER_TTL_MS: u64 = 3_600_000;
/// How long a client may keep `tools/list`'s answer. The list changes when a
/// registry is published or the session expires; a stale list grants
/// nothing, because every call is admitted afresh.
pub const TOOLS_LIST_TTL_MS: u64 = 60_000;

/// A request id of `null` (allowed by the legacy handler, not by this era).
pub const MSG_NULL_ID: &str = "invalid request: id must be a string or a number";

/// The method every modern server answers, and the only one that selects
/// the modern era without the `_meta` version.
pub const METHOD_DISCOVER: &str = "server/discover";
/// The methods whose `Mcp-Name` header mirrors `params.name` or `params.uri`.
const NAMED_METHODS: [&str; 3] = ["tools/call", "resources/read", "prompts/get"];
/// The methods whose `Mcp-Name` header mirrors `params.taskId` (the tasks
/// extension's routing header).
const TASK_METHODS: [&str; 3] = [tasks::METHOD_TASKS_GET, tasks::METHOD_TASKS_UPDATE, tasks::METHOD_TASKS_CANCEL];

/// What `server/discover` tells a model about this server.
pub const INSTRUCTIONS: &str = "Each tool is a transition of this World. A call is admitted against this \
session's grants, brokered, journaled and committed to a hash-chained log; the result's `world` block names \
its effects and their records. A refused effect is a result with isError set, not a protocol error.";

const BASE64_SENTINEL_START: &str = "=?base64?";
const BASE64_SENTINEL_END: &str = "?=";
/// Standard alphabet with canonical padding: a value missing its padding is
/// malformed, not a literal.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);
/// Deepest `properties` chain searched for `x-mcp-header` annotations, and
/// most annotations honoured per tool: a schema is publisher-supplied.
pub const PARAM_HEADER_DEPTH_MAX: usize = 8;
pub const PARAM_HEADERS_MAX: usize = 32;

/// The server's identity, owned by the plan so `finish` can stamp results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct OwnedServerInfo {
    name: String,
    version: String,
}

/// The HTTP status of a modern error reply, by its code: a malformed or
/// mismatched request is 400, a method not served 404; anything else
/// (-32603 and the host failures) travels in a 200.
pub fn error_status(code: i64) -> u16 {
    match code {
        CODE_METHOD_NOT_FOUND => 404,
        CODE_PARSE_ERROR
        | CODE_INVALID_REQUEST
        | CODE_INVALID_PARAMS
        | CODE_HEADER_MISMATCH
        | CODE_MISSING_CAPABILITY
        | CODE_UNSUPPORTED_VERSION => 400,
        _ => 200,
    }
}

pub(super) fn error_reply(id: &RpcId, code: i64, message: &str) -> HttpReply {
    json_reply(error_status(code), rpc::error_bytes(id, code, message))
}

fn header_mismatch(id: &RpcId, message: &str) -> HttpReply {
    error_reply(id, CODE_HEADER_MISMATCH, &format!("Header mismatch: {message}"))
}

/// A header value as text: visible ASCII, space and tab only.
fn header_text(raw: &[u8]) -> Option<&str> {
    raw.iter().all(|b| matches!(b, b'\t' | b' '..=b'~')).then(|| std::str::from_utf8(raw).ok()).flatten()
}

/// An `Mcp-Name` or `Mcp-Param-*` value: surrounding whitespace dropped,
/// then `=?base64?…?=` decoded to UTF-8 text.
pub fn decode_header_value(raw: &[u8]) -> Option<String> {
    let text = header_text(raw)?.trim_matches([' ', '\t']);
    match text.strip_prefix(BASE64_SENTINEL_START).and_then(|t| t.strip_suffix(BASE64_SENTINEL_END)) {
        Some(encoded) => String::from_utf8(BASE64.decode(encoded).ok()?).ok(),
        None => Some(text.to_owned()),
    }
}

/// The `_meta` protocol version, required first: a client of another
/// revision learns the versions served (-32022) before anything else.
fn meta_version(params: &Map<String, Value>) -> Result<String, String> {
    let meta = match params.get("_meta") {
        Some(Value::Object(m)) => m,
        Some(_) => return Err("params._meta must be a JSON object".to_owned()),
        None => {
            return Err(format!(
                "params._meta is required and must carry {META_PROTOCOL_VERSION} and {META_CLIENT_CAPABILITIES}"
            ));
        }
    };
    match meta.get(META_PROTOCOL_VERSION) {
        Some(Value::String(v)) => Ok(v.clone()),
        Some(_) => Err(format!("_meta {META_PROTOCOL_VERSION} must be a string")),
        None => Err(format!("_meta {META_PROTOCOL_VERSION} is required")),
    }
}

/// The client's capabilities must be declared (`{}` is none): World asks
/// the client for nothing, so any object will do.
fn check_capabilities(params: &Map<String, Value>) -> Result<(), String> {
    match params.get("_meta").and_then(|m| m.get(META_CLIENT_CAPABILITIES)) {
        Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(format!("_meta {META_CLIENT_CAPABILITIES} must be a JSON object")),
        None => Err(format!("_meta {META_CLIENT_CAPABILITIES} is required")),
    }
}

/// `MCP-Protocol-Version` (every value, raw) must equal the `_meta`
/// version, which must be served.
fn check_version(id: &RpcId, header: Option<&[u8]>, requested: &str) -> Result<&'static str, HttpReply> {
    let header = match header.map(|raw| header_text(raw).map(|h| h.trim_matches([' ', '\t']))) {
        None | Some(Some("")) => return Err(header_mismatch(id, "the MCP-Protocol-Version header is required")),
        Some(None) => return Err(header_mismatch(id, "the MCP-Protocol-Version header has invalid characters")),
        Some(Some(h)) => h,
    };
    if header != requested {
        let m = format!(
            "MCP-Protocol-Version header value {} does not match body value {}",
            go_quote(header),
            go_quote(requested)
        );
        return Err(header_mismatch(id, &m));
    }
    MODERN_PROTOCOL_VERSIONS.iter().find(|v| **v == requested).copied().ok_or_else(|| {
        let data = json!({"supported": MODERN_PROTOCOL_VERSIONS, "requested": requested});
        let body = rpc::error_data_bytes(id, CODE_UNSUPPORTED_VERSION, "Unsupported protocol version", &data);
        json_reply(error_status(CODE_UNSUPPORTED_VERSION), body)
    })
}

/// `Mcp-Method` must be the body's method; `Mcp-Name` the body's
/// `params.name` (or `params.uri`) for the methods that name a target, and
/// `params.taskId` for `tasks/*`.
fn check_mirrored_headers(
    id: &RpcId,
    headers: &McpHeaders<'_>,
    method: &str,
    params: &Map<String, Value>,
) -> Result<(), HttpReply> {
    let Some(raw) = headers.mcp_method else {
        return Err(header_mismatch(id, "the Mcp-Method header is required"));
    };
    let Some(header) = header_text(raw).map(|h| h.trim_matches([' ', '\t'])) else {
        return Err(header_mismatch(id, "the Mcp-Method header has invalid characters"));
    };
    if header != method {
        let m = format!("Mcp-Method header value {} does not match body value {}", go_quote(header), go_quote(method));
        return Err(header_mismatch(id, &m));
    }
    let keys: &[&str] = if NAMED_METHODS.contains(&method) {
        &["name", "uri"]
    } else if TASK_METHODS.contains(&method) {
        &["taskId"]
    } else {
        return Ok(());
    };
    let target = keys.iter().find_map(|k| params.get(*k).and_then(Value::as_str));
    match (headers.mcp_name, target) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(header_mismatch(id, "the Mcp-Name header is required")),
        (Some(raw), target) => {
            let Some(name) = decode_header_value(raw) else {
                return Err(header_mismatch(id, "the Mcp-Name header has invalid characters or bad base64"));
            };
            if Some(name.as_str()) == target {
                return Ok(());
            }
            let body = target.map_or_else(|| "none".to_owned(), go_quote);
            Err(header_mismatch(
                id,
                &format!("Mcp-Name header value {} does not match body value {body}", go_quote(&name)),
            ))
        }
    }
}

/// The modern era's checks, in order: transport (Content-Type, Accept), the
/// JSON-RPC envelope (notifications get 202; an id must be a string or a
/// number), the `_meta` version (400 -32602), the version header (-32020) and
/// version (-32022), the client capabilities (-32602), the mirrored headers
/// (-32020), then the method (404 -32601 if not served) and, for a tool call,
/// its `Mcp-Param-*` headers (-32020); for `tasks/*`, the tasks extension
/// declared (-32021), then `taskId` and `inputResponses` (-32602).
pub(super) fn plan(
    headers: &McpHeaders<'_>,
    body: &[u8],
    surface: &Surface,
    server: &ServerInfo<'_>,
) -> Result<McpPlan, HttpReply> {
    if let Some(message) = transport_refusal(headers) {
        return Err(error_reply(&top_level_id(body), CODE_INVALID_REQUEST, message));
    }
    // `select_era` chose this era only for a body that parses as one object.
    let raw: Box<serde_json::value::RawValue> = serde_json::from_slice(trim_ascii_space(body))
        .map_err(|e| error_reply(&RpcId::Null, CODE_PARSE_ERROR, &format!("invalid JSON: {e}")))?;
    let (id, method, obj) = match classify(&raw) {
        Ok(Item::Request { id: RpcId::Null, .. }) => {
            return Err(error_reply(&RpcId::Null, CODE_INVALID_REQUEST, MSG_NULL_ID));
        }
        Ok(Item::Request { id, method, obj }) => (id, method, obj),
        Ok(Item::Skip) => return Err(HttpReply::new(202, CONTENT_TYPE_JSON, Vec::new())),
        Err(e) => return Err(error_reply(&e.id, e.code, &e.message)),
    };
    let invalid = |e: String| error_reply(&id, CODE_INVALID_PARAMS, &format!("invalid params: {e}"));
    let params = params_object(&obj).map_err(invalid)?.unwrap_or_default();
    let requested = meta_version(&params).map_err(invalid)?;
    let protocol_version = check_version(&id, headers.protocol_version_all, &requested)?;
    check_capabilities(&params).map_err(invalid)?;
    check_mirrored_headers(&id, headers, &method, &params)?;
    let server_info = OwnedServerInfo { name: server.name.to_owned(), version: server.version.to_owned() };
    let step = dispatch(id, &method, &params, surface, &server_info)?;
    if let Step::Call(call) = &step {
        let schema = surface.lookup(&call.tool_name).map(|t| t.input_schema());
        check_param_headers(&call.jsonrpc_id, headers.mcp_params, schema, &call.arguments)?;
    }
    Ok(McpPlan { era: PlanEra::Modern { protocol_version, server: server_info }, steps: vec![step] })
}

/// Every argument a tool's input schema marks `x-mcp-header` must arrive,
/// when the call gives it a value, as `Mcp-Param-{Name}` with that value.
fn check_param_headers(
    id: &RpcId,
    params: &[(&str, &[u8])],
    schema: Option<&Value>,
    arguments: &Value,
) -> Result<(), HttpReply> {
    let mut annotated = Vec::new();
    if let Some(schema) = schema {
        param_headers(schema, &mut Vec::new(), &mut annotated);
    }
    for (name, path) in annotated {
        let Some(expected) = header_form(path.iter().try_fold(arguments, |v, k| v.get(k))) else { continue };
        let header = format!("Mcp-Param-{name}");
        let Some((_, raw)) = params.iter().find(|(n, _)| n.eq_ignore_ascii_case(&name)) else {
            return Err(header_mismatch(id, &format!("the {header} header is required")));
        };
        let Some(value) = decode_header_value(raw) else {
            return Err(header_mismatch(id, &format!("the {header} header has invalid characters or bad base64")));
        };
        if value != expected {
            let m =
                format!("{header} header value {} does not match body value {}", go_quote(&value), go_quote(&expected));
            return Err(header_mismatch(id, &m));
        }
    }
    Ok(())
}

/// The `x-mcp-header` names of a schema's statically reachable properties
/// (a chain of `properties` keys), with their paths, within the bounds.
fn param_headers(schema: &Value, path: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
    for (key, property) in properties {
        if out.len() >= PARAM_HEADERS_MAX {
            return;
        }
        path.push(key.clone());
        if let Some(name) = property.get("x-mcp-header").and_then(Value::as_str) {
            out.push((name.to_owned(), path.clone()));
        }
        if path.len() < PARAM_HEADER_DEPTH_MAX {
            param_headers(property, path, out);
        }
        path.pop();
    }
}

/// An argument as its header carries it: strings as they are, integers in
/// decimal, booleans in lower case; absent, `null` and other types expect no
/// header.
fn header_form(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// A result's `_meta`: the server's identity.
#[derive(Serialize)]
pub(super) struct ResultMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/serverInfo")]
    pub(super) server_info: &'a OwnedServerInfo,
}

/// A complete result of a cacheable operation: the body's own members framed
/// by `resultType`, the caching hints and the server's identity.
#[derive(Serialize)]
struct Cacheable<'a, T: Serialize> {
    #[serde(rename = "resultType")]
    result_type: &'static str,
    #[serde(flatten)]
    body: T,
    #[serde(rename = "ttlMs")]
    ttl_ms: u64,
    #[serde(rename = "cacheScope")]
    cache_scope: &'static str,
    #[serde(rename = "_meta")]
    meta: ResultMeta<'a>,
}

#[derive(Serialize)]
struct Discovery {
    #[serde(rename = "supportedVersions")]
    supported_versions: &'static [&'static str],
    capabilities: Capabilities,
    instructions: &'static str,
}

pub(super) const COMPLETE: &str = "complete";

fn dispatch(
    id: RpcId,
    method: &str,
    params: &Map<String, Value>,
    surface: &Surface,
    server: &OwnedServerInfo,
) -> Result<Step, HttpReply> {
    if let Some(name) = TaskMethodName::of(method) {
        return Ok(tasks::plan(id, name, params));
    }
    let meta = ResultMeta { server_info: server };
    Ok(match method {
        METHOD_DISCOVER => answer_result(
            id,
            &Cacheable {
                result_type: COMPLETE,
                body: Discovery {
                    supported_versions: &MODERN_PROTOCOL_VERSIONS,
                    capabilities: Capabilities::MODERN,
                    instructions: INSTRUCTIONS,
                },
                ttl_ms: DISCOVER_TTL_MS,
                cache_scope: "public",
                meta,
            },
        ),
        // `private`: a session's tools depend on its grants.
        "tools/list" => answer_result(
            id,
            &Cacheable {
                result_type: COMPLETE,
                body: tools_list(surface),
                ttl_ms: TOOLS_LIST_TTL_MS,
                cache_scope: "private",
                meta,
            },
        ),
        "tools/call" => plan_call(id, params, surface, meta),
        // Removed in this era (initialize, ping, logging/setLevel, …) or never served.
        other => {
            return Err(error_reply(&id, CODE_METHOD_NOT_FOUND, &format!("method not found: {}", go_quote(other))));
        }
    })
}

/// The modern era's `tools/call`: arguments that fail the tool's schema are
/// a tool execution error (HTTP 200, `isError`, the validator's message as
/// text), so that the model sees what it got wrong (SEP-1303); the rest are
/// -32602 protocol errors as in the legacy era.
fn plan_call(id: RpcId, params: &Map<String, Value>, surface: &Surface, meta: ResultMeta<'_>) -> Step {
    match resolve_call(&id, params, surface) {
        Ok(call) => match input_of(params) {
            Ok(input) => Step::Call(Call { input, accepts_task: tasks::declared(params), ..call }),
            Err(message) => answer_error(id, CODE_INVALID_PARAMS, &message),
        },
        Err(CallRefusal::Protocol(message)) => answer_error(id, CODE_INVALID_PARAMS, &message),
        Err(CallRefusal::InvalidArguments(detail)) => {
            answer_result(id, &ToolError::of(format!("invalid arguments: {detail}"), meta))
        }
    }
}

/// The Multi Round-Trip fields of a `tools/call`: whether the client can be
/// asked for a form, and a retry's state and answers.
fn input_of(params: &Map<String, Value>) -> Result<super::Input, String> {
    let elicitation = params
        .get("_meta")
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get("elicitation"))
        .and_then(Value::as_object);
    // `{}` declares form mode alone; otherwise form must be named.
    let can_elicit = elicitation.is_some_and(|e| e.is_empty() || e.contains_key("form"));
    let request_state = match params.get("requestState") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("invalid params: requestState must be a string".into()),
    };
    let responses = match params.get("inputResponses") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err("invalid params: inputResponses must be a JSON object".into()),
    };
    Ok(super::Input { can_elicit, request_state, responses })
}

/// A tool execution error that never ran: no `structuredContent` (there is
/// no output to conform to the tool's output schema).
#[derive(Serialize)]
struct ToolError<'a> {
    #[serde(rename = "resultType")]
    result_type: &'static str,
    content: [TextContent; 1],
    #[serde(rename = "isError")]
    is_error: bool,
    #[serde(rename = "_meta")]
    meta: ResultMeta<'a>,
}

impl<'a> ToolError<'a> {
    fn of(text: String, meta: ResultMeta<'a>) -> ToolError<'a> {
        ToolError { result_type: COMPLETE, content: [TextContent { kind: "text", text }], is_error: true, meta }
    }
}

/// A `CallToolResult`: what a synchronous call answers, and what a completed
/// task carries as its `result`.
#[derive(Serialize)]
pub(super) struct CallResult<'a> {
    #[serde(rename = "resultType")]
    result_type: &'static str,
    content: [TextContent; 1],
    #[serde(rename = "structuredContent")]
    structured_content: &'a Value,
    #[serde(rename = "isError")]
    is_error: bool,
    #[serde(rename = "_meta")]
    meta: ResultMeta<'a>,
}

/// Whether a transition's output is the tool's own failure: a handler's
/// `"ok": false` (a refused path, a failed command), or an effect of its
/// `world` block that the broker denied or that failed.
pub fn is_tool_error(output: &Value) -> bool {
    let effects = output.pointer("/world/effects").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    output.get("ok") == Some(&Value::Bool(false))
        || effects.iter().any(|e| matches!(e.get("status").and_then(Value::as_str), Some("denied" | "failed")))
}

/// A call's answer: its result, a tool error, an `input_required` result, a
/// task (only to a client that declared the extension) or a JSON-RPC error.
fn answer_reply(call: &Call, answer: super::CallAnswer, server: &OwnedServerInfo) -> HttpReply {
    use super::CallAnswer;
    let id = &call.jsonrpc_id;
    let meta = ResultMeta { server_info: server };
    match answer {
        CallAnswer::Task(view) if call.accepts_task => json_reply(200, tasks::created_bytes(id, &view, meta)),
        CallAnswer::Task(_) => json_reply(error_status(CODE_MISSING_CAPABILITY), tasks::missing_capability_bytes(id)),
        CallAnswer::Output(output) => json_reply(200, call_response(id, &output, server)),
        CallAnswer::Refused(text) => json_reply(200, rpc::result_bytes(id, &ToolError::of(text, meta))),
        CallAnswer::InputRequired { input_requests, request_state } => json_reply(
            200,
            rpc::result_bytes(
                id,
                &InputRequiredResult {
                    result_type: INPUT_REQUIRED,
                    input_requests: &input_requests,
                    request_state: &request_state,
                    meta,
                },
            ),
        ),
        CallAnswer::Error { code, message, data: Some(data) } => {
            json_reply(error_status(code), rpc::error_data_bytes(id, code, &message, &data))
        }
        CallAnswer::Error { code, message, data: None } => error_reply(id, code, &message),
    }
}

const INPUT_REQUIRED: &str = "input_required";

/// MCP 2026-07-28's Multi Round-Trip answer to a `tools/call`.
#[derive(Serialize)]
struct InputRequiredResult<'a> {
    #[serde(rename = "resultType")]
    result_type: &'static str,
    #[serde(rename = "inputRequests")]
    input_requests: &'a Value,
    #[serde(rename = "requestState")]
    request_state: &'a str,
    #[serde(rename = "_meta")]
    meta: ResultMeta<'a>,
}

/// The `CallToolResult` of a transition's output, or the -32603 message
/// when the output cannot be one (JSON `null`, not an object).
pub(super) fn call_result<'a>(output: &'a Value, server: &'a OwnedServerInfo) -> Result<CallResult<'a>, &'static str> {
    call_output(output)?;
    Ok(CallResult {
        result_type: COMPLETE,
        content: [TextContent::of(output)],
        structured_content: output,
        is_error: is_tool_error(output),
        meta: ResultMeta { server_info: server },
    })
}

fn call_response(id: &RpcId, output: &Value, server: &OwnedServerInfo) -> Vec<u8> {
    match call_result(output, server) {
        Ok(result) => rpc::result_bytes(id, &result),
        Err(message) => rpc::error_bytes(id, CODE_INTERNAL_ERROR, message),
    }
}

/// The one response as a JSON object (a protocol error with its status); a
/// failed host call is the seed's host-failure envelope, as in the legacy era.
pub(super) fn finish(plan: &McpPlan, server: &OwnedServerInfo, outcomes: Vec<CallOutcome>) -> HttpReply {
    let envelope_id = plan.envelope_id();
    let mut outcomes = outcomes.into_iter();
    match plan.steps.first() {
        Some(Step::Answered(Answer { json, error_code, .. })) => {
            json_reply(error_code.map_or(200, error_status), json.clone())
        }
        Some(Step::Call(c)) => match outcomes.next() {
            Some(Ok(answer)) => answer_reply(c, answer, server),
            Some(Err(f)) => host_failure(&envelope_id, f),
            None => host_failure(&envelope_id, super::HostFailure::Failed),
        },
        // A task step is answered by `finish_task`; call outcomes cannot answer it.
        Some(Step::Task(_)) | None => host_failure(&envelope_id, super::HostFailure::Failed),
    }
}
