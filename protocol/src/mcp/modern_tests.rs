//! The modern era (2026-07-28) and how a request picks its era.

use super::modern::{
    CODE_HEADER_MISMATCH, CODE_UNSUPPORTED_VERSION, DISCOVER_TTL_MS, TOOLS_LIST_TTL_MS, decode_header_value,
};
use super::*;
use crate::surface::{ToolView, build_surface};
use proptest::prelude::*;
use serde_json::json;

pub(super) const SERVER: ServerInfo<'static> = ServerInfo { name: "worldd", version: "0.1.0" };
pub(super) const V: &str = "2026-07-28";

pub(super) fn surface() -> Surface {
    let echo = ToolView {
        id: "tools.echo".into(),
        title: "Echo".into(),
        description: "Echo a message".into(),
        input_schema: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
        output_schema: Some(json!({"type": "object"})),
    };
    let read = ToolView {
        id: "ailang-read".into(),
        title: "Read".into(),
        description: String::new(),
        input_schema: json!({"properties": {"path": {"type": "string"}}}),
        output_schema: None,
    };
    build_surface(&[echo, read]).unwrap()
}

pub(super) fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    })
}

/// A modern request body: `params` plus the standard `_meta`.
pub(super) fn request(id: Value, method: &str, mut params: Value) -> String {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// The headers a conforming modern client sends for `method` (and `name`).
pub(super) fn modern_headers(method: &'static str, name: Option<&'static str>) -> McpHeaders<'static> {
    McpHeaders {
        content_type: Some("application/json"),
        accept: Some("application/json, text/event-stream"),
        protocol_version: Some(V),
        protocol_version_all: Some(V.as_bytes()),
        mcp_method: Some(method.as_bytes()),
        mcp_name: name.map(str::as_bytes),
        mcp_params: &[],
    }
}

/// The same headers with another `MCP-Protocol-Version` (or none).
pub(super) fn with_version(h: McpHeaders<'static>, version: Option<&'static str>) -> McpHeaders<'static> {
    McpHeaders { protocol_version: version, protocol_version_all: version.map(str::as_bytes), ..h }
}

pub(super) fn run(h: &McpHeaders<'_>, body: &str) -> Result<McpPlan, HttpReply> {
    plan(h, body.as_bytes(), &surface(), &SERVER)
}

/// The answered reply (no calls), as status and JSON.
pub(super) fn answer(h: &McpHeaders<'_>, body: &str) -> (u16, Value) {
    let r = match run(h, body) {
        Ok(p) => {
            assert_eq!(p.call_count(), 0);
            finish(p, vec![])
        }
        Err(r) => r,
    };
    assert_eq!(r.header("Content-Type"), Some("application/json"), "{}", r.body_text());
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    (r.status, serde_json::from_slice(&r.body).unwrap_or(Value::Null))
}

pub(super) fn assert_error(reply: (u16, Value), status: u16, id: Value, code: i64) -> Value {
    let (s, body) = reply;
    assert_eq!(s, status, "{body}");
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], id, "errors echo the request id: {body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    body["error"].clone()
}

// ---- which era serves a request ----

#[test]
fn the_meta_protocol_version_picks_the_modern_era_not_the_header() {
    let modern = request(json!(1), "tools/list", json!({}));
    assert_eq!(select_era(Some(V), modern.as_bytes()), Era::Modern);
    assert_eq!(select_era(None, modern.as_bytes()), Era::Modern, "a missing header is the modern era's -32020");
    // A legacy client may send the version header; without the `_meta` key it is legacy.
    let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for header in [None, Some("2025-11-25"), Some(V), Some("v999")] {
        assert_eq!(select_era(header, ping), Era::Legacy, "{header:?}");
    }
}

#[test]
fn an_initialize_is_legacy_even_with_an_empty_meta() {
    let init =
        br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","_meta":{}}}"#;
    assert_eq!(select_era(Some("2025-11-25"), init), Era::Legacy);
    let result = legacy_result(std::str::from_utf8(init).unwrap());
    assert_eq!(result["protocolVersion"], "2025-11-25");
}

#[test]
fn a_legacy_meta_version_stays_legacy_unless_the_header_names_another() {
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}"#;
    assert_eq!(select_era(None, body), Era::Legacy);
    assert_eq!(select_era(Some("2025-11-25"), body), Era::Legacy);
    assert_eq!(select_era(Some(V), body), Era::Modern, "header and body disagree: -32020");
}

#[test]
fn discover_is_modern_even_without_meta_and_batches_and_bad_json_are_legacy() {
    assert_eq!(select_era(None, br#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#), Era::Modern);
    let batch = format!("[{}]", request(json!(1), "tools/list", json!({})));
    assert_eq!(select_era(Some(V), batch.as_bytes()), Era::Legacy);
    for junk in [&b"{not json"[..], b"", b"null", b"42", b"\xff\xfe"] {
        assert_eq!(select_era(Some(V), junk), Era::Legacy);
    }
}

#[test]
fn discover_then_initialize_each_get_their_own_era() {
    let (status, discover) =
        answer(&modern_headers("server/discover", None), &request(json!(1), "server/discover", json!({})));
    assert_eq!(status, 200);
    assert_eq!(discover["result"]["supportedVersions"], json!([V]));
    // A client that initializes after a successful discover is served the legacy handshake.
    let init = r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;
    let p = run(&McpHeaders { protocol_version: None, mcp_method: None, ..modern_headers("", None) }, init).unwrap();
    assert_eq!(p.era(), Era::Legacy);
    let r = finish(p, vec![]);
    assert!(r.body_text().starts_with("event: message\ndata: "), "{}", r.body_text());
    assert!(r.body_text().contains(r#""protocolVersion":"2025-11-25""#));
}

// ---- server/discover ----

#[test]
fn discover_answers_versions_capabilities_identity_and_caching_hints_as_json() {
    let (status, body) =
        answer(&modern_headers("server/discover", None), &request(json!("d-1"), "server/discover", json!({})));
    assert_eq!(status, 200);
    assert_eq!(body["id"], "d-1");
    let result = &body["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"], json!(MODERN_PROTOCOL_VERSIONS));
    let tasks_extension = json!({"io.modelcontextprotocol/tasks": {}});
    assert_eq!(result["capabilities"], json!({"tools": {"listChanged": false}, "extensions": tasks_extension}));
    assert_eq!(result["ttlMs"], DISCOVER_TTL_MS);
    assert_eq!(result["cacheScope"], "public");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"], json!({"name": "worldd", "version": "0.1.0"}));
    assert!(result["instructions"].as_str().is_some_and(|i| !i.is_empty()));
    assert!(result.get("serverInfo").is_none(), "serverInfo lives in _meta in this era");
}

#[test]
fn a_missing_meta_version_or_capabilities_is_400_32602_and_client_info_is_optional() {
    let h = modern_headers("server/discover", None);
    let cases = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": "x"}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": V}}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": 20260728, "io.modelcontextprotocol/clientCapabilities": {}}}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": []}}}),
    ];
    for body in cases {
        let e = assert_error(answer(&h, &body.to_string()), 400, json!(1), -32602);
        assert!(e["message"].as_str().unwrap().starts_with("invalid params: "), "{e}");
    }
    let no_client_info = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}}});
    assert_eq!(answer(&h, &no_client_info.to_string()).0, 200);
}

// ---- versions and headers ----

#[test]
fn an_unsupported_version_is_400_32022_naming_the_supported_and_the_requested() {
    let body = request(json!(9), "tools/list", json!({})).replace(V, "v999.0.0");
    let h = with_version(modern_headers("tools/list", None), Some("v999.0.0"));
    let e = assert_error(answer(&h, &body), 400, json!(9), CODE_UNSUPPORTED_VERSION);
    assert_eq!(e["message"], "Unsupported protocol version");
    assert_eq!(e["data"], json!({"supported": [V], "requested": "v999.0.0"}));
}

#[test]
fn the_version_header_must_be_present_and_equal_the_meta_version() {
    let v999 = request(json!(1), "tools/list", json!({})).replace(V, "v999.0.0");
    let e = assert_error(answer(&modern_headers("tools/list", None), &v999), 400, json!(1), CODE_HEADER_MISMATCH);
    assert!(e["message"].as_str().unwrap().starts_with("Header mismatch: "), "{e}");
    let legacy_meta = request(json!(1), "tools/list", json!({})).replace(V, "2025-11-25");
    assert_error(answer(&modern_headers("tools/list", None), &legacy_meta), 400, json!(1), CODE_HEADER_MISMATCH);
    for missing in [None, Some("")] {
        let h = with_version(modern_headers("tools/list", None), missing);
        assert_error(answer(&h, &request(json!(1), "tools/list", json!({}))), 400, json!(1), CODE_HEADER_MISMATCH);
    }
}

#[test]
fn mcp_method_must_be_present_and_equal_the_method_case_sensitively() {
    let body = request(json!(3), "tools/list", json!({}));
    for bad in
        [None, Some(&b"TOOLS/LIST"[..]), Some(b"tools/call"), Some(b"tools/list, tools/list"), Some(b"tools/\xfflist")]
    {
        let h = McpHeaders { mcp_method: bad, ..modern_headers("tools/list", None) };
        assert_error(answer(&h, &body), 400, json!(3), CODE_HEADER_MISMATCH);
    }
    let padded = McpHeaders { mcp_method: Some(b" tools/list\t"), ..modern_headers("tools/list", None) };
    assert_eq!(answer(&padded, &body).0, 200);
}

#[test]
fn mcp_name_must_mirror_the_tool_name_and_is_decoded_from_base64() {
    let call = |h: &McpHeaders<'_>| {
        run(h, &request(json!(4), "tools/call", json!({"name": "tools_decho", "arguments": {"message": "hi"}})))
    };
    assert_eq!(call(&modern_headers("tools/call", Some("tools_decho"))).unwrap().call_count(), 1);
    assert_eq!(call(&modern_headers("tools/call", Some("  tools_decho "))).unwrap().call_count(), 1);
    // base64("tools_decho")
    assert_eq!(call(&modern_headers("tools/call", Some("=?base64?dG9vbHNfZGVjaG8=?="))).unwrap().call_count(), 1);
    // Unpadded base64 is malformed, not a literal; a value without the sentinel is literal.
    for bad in [
        None,
        Some("tools_decho2"),
        Some("TOOLS_DECHO"),
        Some("=?base64?!!!?="),
        Some("=?base64?/w==?="),
        Some("=?base64?dG9vbHNfZGVjaG8?="),
        Some("dG9vbHNfZGVjaG8="),
    ] {
        let r = call(&modern_headers("tools/call", bad)).unwrap_err();
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!((r.status, body["error"]["code"].as_i64()), (400, Some(CODE_HEADER_MISMATCH)), "{bad:?}");
        assert_eq!(body["id"], 4);
    }
}

#[test]
fn header_values_decode_as_the_sentinel_format_says() {
    assert_eq!(decode_header_value(b"plain").as_deref(), Some("plain"));
    assert_eq!(decode_header_value(b"=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(), Some("Hello, \u{4e16}\u{754c}"));
    assert_eq!(decode_header_value(b"=?base64?IHBhZGRlZCA=?=").as_deref(), Some(" padded "));
    assert_eq!(decode_header_value(b"\t x \t").as_deref(), Some("x"));
    assert_eq!(decode_header_value("caf\u{e9}".as_bytes()), None, "raw non-ASCII must be encoded");
    assert_eq!(decode_header_value(b"a\x01b"), None);
    assert_eq!(decode_header_value(b"=?base64?%%?="), None);
}

// ---- methods ----

#[test]
fn methods_this_era_removed_or_never_had_are_404_32601() {
    for method in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "nope"] {
        let h = McpHeaders { mcp_method: Some(method.as_bytes()), ..modern_headers("", None) };
        let e = assert_error(answer(&h, &request(json!("m"), method, json!({}))), 404, json!("m"), -32601);
        assert_eq!(e["message"], format!("method not found: \"{method}\""));
    }
}

#[test]
fn a_modern_notification_is_202_with_no_body() {
    let body = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": meta()}}).to_string();
    let r = run(&modern_headers("notifications/cancelled", None), &body).unwrap_err();
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
}

#[test]
fn transport_checks_apply_to_the_modern_era_and_echo_the_id() {
    let body = request(json!(5), "tools/list", json!({}));
    let h = McpHeaders { content_type: Some("text/plain"), ..modern_headers("tools/list", None) };
    let e = assert_error(answer(&h, &body), 400, json!(5), -32600);
    assert_eq!(e["message"], MSG_BAD_CONTENT_TYPE);
    let h = McpHeaders { accept: Some("*/*"), ..modern_headers("tools/list", None) };
    let e = assert_error(answer(&h, &body), 400, json!(5), -32600);
    assert_eq!(e["message"], MSG_BAD_ACCEPT);
}

// ---- tools ----

#[test]
fn tools_list_is_the_legacy_list_plus_result_type_and_private_caching_hints() {
    let (status, body) = answer(&modern_headers("tools/list", None), &request(json!(1), "tools/list", json!({})));
    assert_eq!(status, 200);
    let result = &body["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["ttlMs"], TOOLS_LIST_TTL_MS);
    assert_eq!(result["cacheScope"], "private", "a session's tools depend on its grants");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "worldd");
    let legacy = legacy_result(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    assert_eq!(result["tools"], legacy["tools"], "one view feeds both eras");
    assert_eq!(result["tools"][0]["inputSchema"]["type"], "object", "type object added");
}

/// A legacy reply's result, read out of its SSE event.
pub(super) fn legacy_result(body: &str) -> Value {
    let h = McpHeaders {
        content_type: Some("application/json"),
        accept: Some("application/json, text/event-stream"),
        protocol_version: Some("2025-11-25"),
        ..Default::default()
    };
    let r = finish(plan(&h, body.as_bytes(), &surface(), &SERVER).unwrap(), vec![]);
    let text = r.body_text();
    let data = text.strip_prefix("event: message\ndata: ").unwrap().trim_end();
    serde_json::from_str::<Value>(data).unwrap()["result"].clone()
}

pub(super) fn modern_call(output: CallOutcome) -> (u16, Value) {
    let p = run(
        &modern_headers("tools/call", Some("tools_decho")),
        &request(json!(7), "tools/call", json!({"name": "tools_decho", "arguments": {"message": "hi"}})),
    )
    .unwrap();
    let [Step::Call(c)] = p.steps() else { panic!("one call") };
    assert_eq!((c.transition_id.as_str(), &c.arguments), ("tools.echo", &json!({"message": "hi"})));
    let r = finish(p, vec![output]);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    (r.status, serde_json::from_slice(&r.body).unwrap())
}

#[test]
fn a_tool_result_carries_the_output_as_text_and_structured_content_with_is_error_false() {
    let output = json!({"ok": true, "content": "x", "world": {"effects": [], "plan": null}});
    let (status, body) = modern_call(Ok(output.clone().into()));
    assert_eq!(status, 200);
    let result = &body["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["structuredContent"], output);
    assert_eq!(serde_json::from_str::<Value>(result["content"][0]["text"].as_str().unwrap()).unwrap(), output);
    assert_eq!(result["isError"], false);
    assert!(result.get("ttlMs").is_none() && result.get("cacheScope").is_none(), "a call is not cacheable");
}

#[test]
fn a_tools_own_failure_is_a_result_with_is_error_true_carrying_the_output() {
    let refused =
        json!({"ok": false, "refused": "path \"../x\" refused", "world": {"effects": [], "plan": "sha256:00"}});
    let (status, body) = modern_call(Ok(refused.clone().into()));
    assert_eq!(status, 200);
    assert_eq!(body["result"]["isError"], true);
    assert_eq!(body["result"]["structuredContent"], refused);
}

#[test]
fn a_denied_or_failed_effect_is_the_tools_own_failure_and_ok_or_skipped_is_not() {
    use super::modern::is_tool_error;
    let effects = |statuses: &[&str]| {
        let list: Vec<Value> =
            statuses.iter().map(|s| json!({"id": "e1", "status": s, "record": "sha256:00"})).collect();
        json!({"world": {"effects": list, "plan": "sha256:11"}})
    };
    assert!(is_tool_error(&effects(&["denied"])));
    assert!(is_tool_error(&effects(&["ok", "failed", "skipped"])));
    assert!(!is_tool_error(&effects(&["ok", "ok"])));
    assert!(!is_tool_error(&effects(&[])));
    assert!(!is_tool_error(&json!({"echo": {"ok": false}})), "only the top-level ok counts");
    assert!(!is_tool_error(&json!({"world": "not an object", "ok": true})));
    let (_, body) = modern_call(Ok(effects(&["denied"]).into()));
    assert_eq!(body["result"]["isError"], true);
}

#[test]
fn a_denied_effect_tells_its_label_and_reason_in_the_modern_era() {
    let denied = json!({"world": {"effects": [{"id": "e1", "status": "denied", "record": "sha256:00",
        "denial": "denied:budget", "reason": "Workspace.Read on worktree: 2 of 2 spent in episode demo"}],
        "plan": "sha256:11"}});
    let (_, body) = modern_call(Ok(denied.clone().into()));
    assert_eq!(body["result"]["isError"], true);
    assert_eq!(body["result"]["structuredContent"], denied);
    let text: Value = serde_json::from_str(body["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["world"]["effects"][0]["denial"], "denied:budget");
}

#[test]
fn a_host_failure_keeps_the_seed_envelope_in_the_modern_era() {
    for f in [HostFailure::Failed, HostFailure::TimedOut, HostFailure::Canceled, HostFailure::CapacityExceeded] {
        let (status, body) = modern_call(Err(f));
        assert_eq!(status, 200);
        assert_eq!(body, json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": f.message()}}));
    }
    let (_, body) = modern_call(Ok(Value::Null.into()));
    assert_eq!(body["error"]["message"], MSG_NO_RESULT);
}

#[test]
fn unknown_tools_and_arguments_that_are_not_an_object_are_32602_protocol_errors() {
    let h = modern_headers("tools/call", Some("nope"));
    let e = assert_error(answer(&h, &request(json!(1), "tools/call", json!({"name": "nope"}))), 400, json!(1), -32602);
    assert_eq!(e["message"], "unknown tool \"nope\"");
    let h = modern_headers("tools/call", Some("tools_decho"));
    let body = request(json!(2), "tools/call", json!({"name": "tools_decho", "arguments": "message"}));
    let e = assert_error(answer(&h, &body), 400, json!(2), -32602);
    assert_eq!(e["message"], "invalid params: arguments must be a JSON object");
}

#[test]
fn arguments_that_fail_the_schema_are_a_tool_error_the_model_can_read() {
    let h = modern_headers("tools/call", Some("tools_decho"));
    for (id, arguments) in [(2, json!({"message": 5})), (3, json!({}))] {
        let body = request(json!(id), "tools/call", json!({"name": "tools_decho", "arguments": arguments}));
        let (status, reply) = answer(&h, &body);
        assert_eq!(status, 200, "{reply}");
        let result = &reply["result"];
        assert_eq!(
            (&reply["id"], &result["resultType"], &result["isError"]),
            (&json!(id), &json!("complete"), &json!(true))
        );
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("invalid arguments: ") && text.contains("message"), "{text}");
        assert_eq!(result["content"][0]["type"], "text");
        assert!(result.get("structuredContent").is_none(), "{reply}");
        assert!(result["_meta"]["io.modelcontextprotocol/serverInfo"].is_object(), "{reply}");
    }
}

#[test]
fn no_modern_field_leaks_into_a_legacy_reply() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","_meta":{}}}"#,
    ] {
        let result = legacy_result(body);
        for field in ["resultType", "ttlMs", "cacheScope", "_meta", "isError"] {
            assert!(result.get(field).is_none(), "{field} in {result}");
        }
    }
}

proptest! {
    #[test]
    fn any_body_and_headers_get_a_reply_without_panicking(
        body in proptest::collection::vec(any::<u8>(), 0..256),
        method in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..24)),
        name in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..24)),
        version in proptest::option::of("[0-9a-z-]{0,12}"),
    ) {
        let h = McpHeaders {
            protocol_version: version.as_deref(),
            protocol_version_all: version.as_deref().map(str::as_bytes),
            mcp_method: method.as_deref(),
            mcp_name: name.as_deref(),
            ..modern_headers("", None)
        };
        let _ = select_era(h.protocol_version, &body);
        if let Ok(p) = plan(&h, &body, &surface(), &SERVER) {
            let n = p.call_count();
            let r = finish(p, vec![Ok(json!({"ok": true}).into()); n]);
            prop_assert!(r.status == 200);
        }
    }

    #[test]
    fn a_meta_version_that_is_not_served_is_always_refused_in_the_modern_era(version in "[0-9a-zA-Z.-]{1,16}") {
        prop_assume!(version != V && !SUPPORTED_PROTOCOL_VERSIONS.contains(&version.as_str()));
        let body = request(json!(1), "tools/list", json!({})).replace(V, &version);
        let h = with_version(modern_headers("tools/list", None), Some(Box::leak(version.clone().into_boxed_str())));
        let (status, reply) = answer(&h, &body);
        prop_assert_eq!(status, 400);
        prop_assert_eq!(reply["error"]["code"].as_i64(), Some(CODE_UNSUPPORTED_VERSION));
    }
}

#[test]
fn an_unsupported_version_is_named_before_missing_capabilities_are() {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2027-01-01"}}});
    let h = with_version(modern_headers("tools/list", None), Some("2027-01-01"));
    assert_error(answer(&h, &body.to_string()), 400, json!(1), CODE_UNSUPPORTED_VERSION);
}

#[test]
fn a_null_id_is_an_invalid_request_in_this_era() {
    let body = json!({"jsonrpc": "2.0", "id": null, "method": "server/discover", "params": {"_meta": meta()}});
    let e = assert_error(answer(&modern_headers("server/discover", None), &body.to_string()), 400, Value::Null, -32600);
    assert_eq!(e["message"], super::modern::MSG_NULL_ID);
}

#[test]
fn the_version_header_is_trimmed_and_a_repeated_or_non_text_one_is_refused() {
    let body = request(json!(1), "tools/list", json!({}));
    let padded = McpHeaders { protocol_version_all: Some(b" 2026-07-28\t"), ..modern_headers("tools/list", None) };
    assert_eq!(answer(&padded, &body).0, 200);
    for bad in [&b"2026-07-28, 2026-07-28"[..], b"2026-07-28\xff"] {
        let h = McpHeaders { protocol_version_all: Some(bad), ..modern_headers("tools/list", None) };
        assert_error(answer(&h, &body), 400, json!(1), CODE_HEADER_MISMATCH);
    }
}

fn region_surface() -> Surface {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "limit": {"type": "integer", "x-mcp-header": "Limit"},
        "nested": {"type": "object", "properties": {"flag": {"type": "boolean", "x-mcp-header": "Flag"}}},
        "free": {"type": "string"},
    }});
    let tool = ToolView {
        id: "geo".into(),
        title: "Geo".into(),
        description: "d".into(),
        input_schema: schema,
        output_schema: None,
    };
    build_surface(&[tool]).unwrap()
}

#[test]
fn arguments_marked_x_mcp_header_must_arrive_as_matching_mcp_param_headers() {
    let surface = region_surface();
    let call = |args: Value, params: &[(&str, &[u8])]| {
        let h = McpHeaders { mcp_params: params, ..modern_headers("tools/call", Some("geo")) };
        let body = request(json!(8), "tools/call", json!({"name": "geo", "arguments": args}));
        match plan(&h, body.as_bytes(), &surface, &SERVER) {
            Ok(p) => (200, p.call_count() as i64),
            Err(r) => (r.status, serde_json::from_slice::<Value>(&r.body).unwrap()["error"]["code"].as_i64().unwrap()),
        }
    };
    let all = json!({"region": "us-west1", "limit": 42, "nested": {"flag": true}, "free": "x"});
    let good: [(&str, &[u8]); 3] = [("region", b"us-west1"), ("LIMIT", b"42"), ("Flag", b"true")];
    assert_eq!(call(all.clone(), &good), (200, 1), "names compare case-insensitively");
    assert_eq!(call(json!({"free": "x"}), &[]), (200, 1), "no value, no header expected");
    assert_eq!(call(json!({"nested": {}}), &[]), (200, 1), "a nested argument left out expects no header");
    let hello: [(&str, &[u8]); 1] = [("Region", b"=?base64?SGVsbG8=?=")];
    assert_eq!(call(json!({"region": "Hello"}), &hello), (200, 1), "base64 decoded before comparing");
    for bad in [
        &[("region", &b"us-east1"[..]), ("limit", b"42"), ("flag", b"true")][..],
        &[("limit", b"42"), ("flag", b"true")],
        &[("region", b"us-west1"), ("limit", b"41"), ("flag", b"true")],
        &[("region", b"us-west1"), ("limit", b"42"), ("flag", b"True")],
        &[("region", b"=?base64?SGVsbG8?="), ("limit", b"42"), ("flag", b"true")],
    ] {
        assert_eq!(call(all.clone(), bad), (400, CODE_HEADER_MISMATCH), "{bad:?}");
    }
}

/// A `tools/call` whose `_meta` declares `capabilities`, with `extra` params.
pub(super) fn call_with(capabilities: Value, extra: Value) -> Result<McpPlan, HttpReply> {
    let mut params = json!({"name": "tools_decho", "arguments": {"message": "hi"}});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let mut body: Value = serde_json::from_str(&request(json!(7), "tools/call", params)).unwrap();
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
    run(&modern_headers("tools/call", Some("tools_decho")), &body.to_string())
}

fn input_of(p: &McpPlan) -> &Input {
    let [Step::Call(c)] = p.steps() else { panic!("one call") };
    &c.input
}

#[test]
fn a_call_tells_whether_its_client_can_be_asked_and_carries_a_retrys_state_and_answers() {
    let none = call_with(json!({}), json!({})).unwrap();
    assert_eq!(input_of(&none), &Input::default());
    for (caps, can) in [(json!({"elicitation": {}}), true), (json!({"elicitation": {"form": {}, "url": {}}}), true)] {
        assert_eq!(input_of(&call_with(caps, json!({})).unwrap()).can_elicit, can);
    }
    assert!(!input_of(&call_with(json!({"elicitation": {"url": {}}}), json!({})).unwrap()).can_elicit, "url mode only");
    let retry = call_with(
        json!({"elicitation": {}}),
        json!({"requestState": "s.t", "inputResponses": {"approval": {"action": "decline"}}}),
    )
    .unwrap();
    let input = input_of(&retry);
    assert_eq!(input.request_state.as_deref(), Some("s.t"));
    assert_eq!(input.responses["approval"], json!({"action": "decline"}));
    for bad in [json!({"requestState": 1}), json!({"inputResponses": []})] {
        let p = call_with(json!({}), bad).unwrap();
        let r = finish(p, vec![]);
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!((r.status, body["error"]["code"].clone()), (400, json!(-32602)), "{body}");
    }
}

#[test]
fn an_input_required_answer_carries_the_requests_and_the_state_and_a_refusal_is_a_tool_error() {
    let requests = json!({"approval": {"method": "elicitation/create", "params": {"mode": "form", "message": "ok?"}}});
    let (status, body) =
        modern_call(Ok(CallAnswer::InputRequired { input_requests: requests.clone(), request_state: "s.t".into() }));
    assert_eq!(status, 200);
    let r = &body["result"];
    assert_eq!(
        (&r["resultType"], &r["inputRequests"], &r["requestState"]),
        (&json!("input_required"), &requests, &json!("s.t"))
    );
    assert_eq!(r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "worldd");
    let (_, body) = modern_call(Ok(CallAnswer::Refused("waits for approval".into())));
    assert_eq!(body["result"]["isError"], json!(true));
    assert_eq!(body["result"]["content"][0]["text"], json!("waits for approval"));
    assert!(body["result"].get("structuredContent").is_none());
    let bad = CallAnswer::Error {
        code: -32602,
        message: "Invalid or expired requestState".into(),
        data: Some(json!({"reason": "invalid_request_state"})),
    };
    let (status, body) = modern_call(Ok(bad));
    assert_eq!((status, &body["error"]["data"]["reason"]), (400, &json!("invalid_request_state")));
}
