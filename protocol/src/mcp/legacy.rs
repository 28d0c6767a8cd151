//! The legacy era (2025-11-25, 2025-06-18, 2025-03-26): the upstream
//! `mcphttp` handler's checks in its order, with its texts, answered as one
//! SSE event. Nothing of the modern era shows here.

use super::{
    CallOutcome, Capabilities, HostFailure, Item, McpHeaders, McpPlan, PlanEra, ServerInfo, Step, TextContent,
    answer_error, answer_result, bad_request, call_output, classify, host_failure, invalid_params, params_object,
    plan_call, tools_list, transport_refusal, trim_ascii_space,
};
use crate::json::go_quote;
use crate::rpc::{self, CODE_INTERNAL_ERROR, CODE_INVALID_REQUEST, CODE_METHOD_NOT_FOUND, CODE_PARSE_ERROR, RawObject};
use crate::surface::Surface;
use crate::{CONTENT_TYPE_JSON, CONTENT_TYPE_SSE, HEADER_CACHE_CONTROL, HttpReply, RpcId};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Protocol versions served, newest first (the order of the error text).
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Assumed when `MCP-Protocol-Version` is absent or empty.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-03-26";
/// Answered to `initialize` when the requested version is not served.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
/// The only version under which JSON arrays (batches) are accepted.
pub const BATCH_PROTOCOL_VERSION: &str = "2025-03-26";

pub const MSG_EMPTY_BATCH: &str = "empty batch";

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

/// The legacy era's transport checks, body parse and answers.
pub(super) fn plan(
    headers: &McpHeaders<'_>,
    body: &[u8],
    surface: &Surface,
    server: &ServerInfo<'_>,
) -> Result<McpPlan, HttpReply> {
    if let Some(message) = transport_refusal(headers) {
        return Err(bad_request(&RpcId::Null, CODE_INVALID_REQUEST, message));
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
    Ok(McpPlan { era: PlanEra::Legacy { protocol_version: version, batch }, steps })
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
                &InitializeResult { capabilities: Capabilities::TOOLS, protocol_version: version, server_info: server },
            )
        }
        "ping" => answer_result(id, &Empty {}),
        "tools/list" => answer_result(id, &tools_list(surface)),
        "tools/call" => match params_object(obj) {
            Ok(params) => plan_call(id, &params.unwrap_or_default(), surface),
            Err(e) => invalid_params(id, &e),
        },
        other => answer_error(id, CODE_METHOD_NOT_FOUND, &format!("method not found: {}", go_quote(other))),
    }
}

#[derive(Serialize)]
struct CallResult<'a> {
    content: [TextContent; 1],
    #[serde(rename = "structuredContent")]
    structured_content: &'a Value,
}

/// A call's answer in this era: its result, a tool error, or a JSON-RPC
/// error (these eras have no `input_required` and no tasks; the server
/// never answers either here, since [`super::Call::accepts_task`] is false).
fn answer_response(id: &RpcId, answer: super::CallAnswer) -> Vec<u8> {
    use super::CallAnswer;
    match answer {
        CallAnswer::Output(output) => call_response(id, &output),
        CallAnswer::Refused(text) => {
            rpc::result_bytes(id, &ToolError { content: [TextContent { kind: "text", text }], is_error: true })
        }
        CallAnswer::InputRequired { .. } => {
            rpc::error_bytes(id, CODE_INTERNAL_ERROR, "this protocol version cannot ask the client for input")
        }
        CallAnswer::Task(_) => {
            rpc::error_bytes(id, CODE_INTERNAL_ERROR, "this protocol version cannot answer with a task")
        }
        CallAnswer::Error { code, message, data: Some(data) } => rpc::error_data_bytes(id, code, &message, &data),
        CallAnswer::Error { code, message, data: None } => rpc::error_bytes(id, code, &message),
    }
}

/// A tool execution error that ran nothing.
#[derive(Serialize)]
struct ToolError {
    content: [TextContent; 1],
    #[serde(rename = "isError")]
    is_error: bool,
}

fn call_response(id: &RpcId, output: &Value) -> Vec<u8> {
    let output = &as_the_seed_tells(output);
    match call_output(output) {
        Ok(()) => rpc::result_bytes(id, &CallResult { content: [TextContent::of(output)], structured_content: output }),
        Err(message) => rpc::error_bytes(id, CODE_INTERNAL_ERROR, message),
    }
}

/// The keys a denied effect of the `world` block carries beyond the seed's
/// `id`, `status` and `record`: the modern era and A2A tell them.
pub const DENIAL_KEYS: [&str; 2] = ["denial", "reason"];

/// The output as the seed fixes these eras' bytes: each effect of its
/// `world` block with `id`, `status` and `record` alone.
pub fn as_the_seed_tells(output: &Value) -> std::borrow::Cow<'_, Value> {
    let effects = output.pointer("/world/effects").and_then(Value::as_array);
    let told = |e: &Value| e.as_object().is_some_and(|e| DENIAL_KEYS.iter().any(|k| e.contains_key(*k)));
    if !effects.is_some_and(|effects| effects.iter().any(told)) {
        return std::borrow::Cow::Borrowed(output);
    }
    let mut output = output.clone();
    if let Some(effects) = output.pointer_mut("/world/effects").and_then(Value::as_array_mut) {
        for e in effects.iter_mut().filter_map(Value::as_object_mut) {
            for k in DENIAL_KEYS {
                e.remove(k);
            }
        }
    }
    std::borrow::Cow::Owned(output)
}

/// One SSE event whose data is the response object, or the array of
/// responses for a batch; any failed call answers the whole POST with the
/// host-failure envelope (results of earlier items are dropped).
pub(super) fn finish(plan: &McpPlan, batch: bool, outcomes: Vec<CallOutcome>) -> HttpReply {
    let envelope_id = plan.envelope_id();
    let mut outcomes = outcomes.into_iter();
    let mut responses: Vec<Vec<u8>> = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        match step {
            Step::Answered(a) => responses.push(a.json.clone()),
            Step::Call(c) => match outcomes.next() {
                Some(Ok(answer)) => responses.push(answer_response(&c.jsonrpc_id, answer)),
                Some(Err(f)) => return host_failure(&envelope_id, f),
                None => return host_failure(&envelope_id, HostFailure::Failed),
            },
            // Never planned in this era: `tasks/*` is method-not-found here.
            Step::Task(_) => return host_failure(&envelope_id, HostFailure::Failed),
        }
    }
    let mut data = Vec::new();
    if batch {
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
