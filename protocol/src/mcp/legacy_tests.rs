use super::*;
use crate::surface::{ToolView, build_surface};
use proptest::prelude::*;
use serde_json::json;

const SERVER: ServerInfo<'static> = ServerInfo { name: "ailang-worldd", version: "0.1.0" };

fn headers(version: Option<&'static str>) -> McpHeaders<'static> {
    McpHeaders {
        content_type: Some("application/json"),
        accept: Some("application/json, text/event-stream"),
        protocol_version: version,
        ..Default::default()
    }
}

fn tool(id: &str, description: &str, schema: Value) -> ToolView {
    ToolView {
        id: id.into(),
        title: id.into(),
        description: description.into(),
        input_schema: schema,
        output_schema: None,
    }
}

fn surface() -> Surface {
    let mut echo = tool(
        "tools.echo",
        "Echo a message",
        json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
    );
    echo.output_schema = Some(json!({"type": "object"}));
    build_surface(&[echo, tool("ailang-read", "", json!({}))]).unwrap()
}

fn run(h: &McpHeaders<'_>, body: &str) -> Result<McpPlan, HttpReply> {
    plan(h, body.as_bytes(), &surface(), &SERVER)
}

/// A plan whose steps are all answered, finished with no calls.
fn answered(h: &McpHeaders<'_>, body: &str) -> HttpReply {
    let p = run(h, body).expect("plan");
    assert_eq!(p.call_count(), 0);
    finish(p, vec![])
}

fn refused(h: &McpHeaders<'_>, body: &str) -> HttpReply {
    run(h, body).expect_err("early reply")
}

fn sse(data: &str) -> String {
    format!("event: message\ndata: {data}\n\n")
}

fn assert_common_headers(r: &HttpReply) {
    assert!(r.header("Content-Type").is_some());
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
}

fn assert_400(r: &HttpReply, body: &str) {
    assert_eq!(r.status, 400);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_common_headers(r);
    assert_eq!(r.body_text(), format!("{body}\n"));
}

#[test]
fn get_gets_405_with_allow_post() {
    let r = method_not_allowed();
    assert_eq!(r.status, 405);
    assert_eq!(r.header("Allow"), Some("POST"));
    assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert_eq!(r.body_text(), "Method Not Allowed\n");
}

#[test]
fn oversized_body_gets_the_invalid_body_envelope() {
    assert_eq!(MCP_BODY_MAX, 4 * 1024 * 1024);
    let r = body_too_large();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(
        r.body_text(),
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"invalid MCP request body\"}}\n"
    );
}

#[test]
fn wrong_or_missing_content_type_is_400() {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let want =
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Content-Type must be application/json"}}"#;
    for ct in [None, Some("text/plain"), Some("application/json-seq"), Some("")] {
        let h = McpHeaders { content_type: ct, ..headers(None) };
        assert_400(&refused(&h, body), want);
    }
}

#[test]
fn content_type_parameters_are_allowed() {
    let h = McpHeaders { content_type: Some("Application/JSON; charset=utf-8"), ..headers(None) };
    let r = answered(&h, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_eq!(r.status, 200);
}

#[test]
fn accept_must_list_both_types() {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let want = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Accept must list both application/json and text/event-stream"}}"#;
    for accept in
        [None, Some("application/json"), Some("text/event-stream"), Some("*/*"), Some("application/*, text/*")]
    {
        let h = McpHeaders { accept, ..headers(None) };
        assert_400(&refused(&h, body), want);
    }
}

#[test]
fn accept_with_parameters_and_extra_types_is_fine() {
    let h = McpHeaders {
        accept: Some("text/html, Application/Json;q=0.9 , text/event-stream;q=0.8, */*"),
        ..headers(None)
    };
    assert_eq!(answered(&h, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).status, 200);
}

#[test]
fn content_type_is_checked_before_accept() {
    let h = McpHeaders { content_type: None, accept: None, protocol_version: Some("bogus"), ..Default::default() };
    let r = refused(&h, "[]");
    assert!(r.body_text().contains("Content-Type must be application/json"));
}

#[test]
fn a_legacy_body_under_another_version_header_is_400_32600_not_32022() {
    // No `_meta` version: a legacy request, whatever the header says.
    let r = refused(&headers(Some("2026-07-28")), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_400(
        &r,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"unsupported MCP-Protocol-Version \"2026-07-28\" (supported: 2025-11-25, 2025-06-18, 2025-03-26)"}}"#,
    );
    assert!(!r.body_text().contains("-32022"));
}

#[test]
fn absent_or_empty_version_means_2025_03_26() {
    let p = run(&headers(None), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
    assert_eq!(p.protocol_version(), "2025-03-26");
    let p = run(&headers(Some("")), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
    assert_eq!(p.protocol_version(), "2025-03-26");
    for v in SUPPORTED_PROTOCOL_VERSIONS {
        let p = run(&headers(Some(v)), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
        assert_eq!(p.protocol_version(), v);
    }
}

#[test]
fn batch_is_refused_under_2025_06_18() {
    let r = refused(&headers(Some("2025-06-18")), r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    assert_400(
        &r,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported under protocol version 2025-06-18"}}"#,
    );
}

#[test]
fn batch_is_refused_under_2025_11_25_even_when_invalid() {
    let r = refused(&headers(Some("2025-11-25")), "  [ not json");
    assert!(r.body_text().contains("batch requests are not supported under protocol version 2025-11-25"));
}

#[test]
fn empty_batch_is_400() {
    assert_400(
        &refused(&headers(None), " [ ] "),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"empty batch"}}"#,
    );
}

#[test]
fn invalid_json_is_400_32700() {
    for body in ["{", "", "nope", "[1,", "{\"a\":1}x"] {
        let r = refused(&headers(None), body);
        assert_eq!(r.status, 400);
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"]["code"], -32700, "{body:?}");
        assert!(v["error"]["message"].as_str().unwrap().starts_with("invalid JSON: "), "{body:?}");
        assert_eq!(v["id"], Value::Null);
    }
}

#[test]
fn jsonrpc_must_be_2_0() {
    for body in [
        r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#,
        r#"{"id":3,"method":"ping"}"#,
        r#"{"jsonrpc":2.0,"id":3,"method":"ping"}"#,
    ] {
        assert_400(
            &refused(&headers(None), body),
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"expected jsonrpc: \"2.0\""}}"#,
        );
    }
}

#[test]
fn non_messages_are_400() {
    for body in [
        r#"{"jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
        r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","result":{}}"#,
    ] {
        let r = refused(&headers(None), body);
        assert_eq!(r.status, 400, "{body}");
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"]["code"], -32600, "{body}");
        assert_eq!(v["error"]["message"], "not a JSON-RPC request, notification or response");
    }
}

#[test]
fn json_that_is_not_an_object_is_a_parse_error() {
    let r = refused(&headers(None), "42");
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["error"]["code"], -32700);
}

#[test]
fn a_bad_item_aborts_the_whole_batch_with_id_null() {
    let r = refused(
        &headers(None),
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"1.0","id":2,"method":"ping"}]"#,
    );
    assert_400(&r, r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"expected jsonrpc: \"2.0\""}}"#);
}

#[test]
fn notifications_and_responses_only_get_202() {
    for body in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"x"}}"#,
        r#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":1,"result":1}]"#,
    ] {
        let r = refused(&headers(None), body);
        assert_eq!(r.status, 202, "{body}");
        assert!(r.body.is_empty());
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    }
}

#[test]
fn notifications_work_under_every_version() {
    for v in SUPPORTED_PROTOCOL_VERSIONS {
        let r = refused(&headers(Some(v)), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(r.status, 202);
    }
}

#[test]
fn ping_is_one_sse_event_with_an_empty_result() {
    let r = answered(&headers(None), r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("text/event-stream"));
    assert_eq!(r.header("Cache-Control"), Some("no-cache"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert_eq!(r.body_text(), "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n");
}

#[test]
fn id_zero_works() {
    let r = answered(&headers(None), r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#);
    assert_eq!(r.body_text(), sse(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#));
}

#[test]
fn id_null_counts_as_present() {
    let r = answered(&headers(None), r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    assert_eq!(r.body_text(), sse(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#));
}

#[test]
fn ids_are_echoed_exactly() {
    for id in ["1.0", "1e3", "-5", "123456789012345678901234567890", "\"abc\"", "\"<&>\""] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        let r = answered(&headers(None), &body);
        let want_id = if id == "\"<&>\"" { "\"\\u003c\\u0026\\u003e\"" } else { id };
        assert_eq!(r.body_text(), sse(&format!(r#"{{"jsonrpc":"2.0","id":{want_id},"result":{{}}}}"#)));
    }
}

#[test]
fn surrounding_whitespace_is_trimmed() {
    let r = answered(&headers(None), "\n\t {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} \r\n");
    assert_eq!(r.status, 200);
}

#[test]
fn initialize_echoes_a_supported_version() {
    let r = answered(
        &headers(None),
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(
        r.body_text(),
        sse(
            r#"{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2025-06-18","serverInfo":{"name":"ailang-worldd","version":"0.1.0"}}}"#
        )
    );
}

#[test]
fn initialize_offers_2025_11_25_for_unsupported_versions() {
    for v in ["\"1999-01-01\"", "\"2099-01-01\"", "\"2026-07-28\"", "5"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":{v}}}}}"#);
        let r = answered(&headers(None), &body);
        assert!(r.body_text().contains("\"protocolVersion\":\"2025-11-25\""), "{v}");
    }
    let r = answered(&headers(None), r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#);
    assert!(r.body_text().contains("\"protocolVersion\":\"2025-11-25\""));
}

#[test]
fn initialize_ignores_the_header_version() {
    let r = answered(
        &headers(Some("2025-11-25")),
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#,
    );
    assert!(r.body_text().contains("\"protocolVersion\":\"2025-03-26\""));
}

#[test]
fn tools_list_is_sorted_with_optional_members() {
    let r = answered(&headers(None), r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert_eq!(
        r.body_text(),
        sse(concat!(
            r#"{"jsonrpc":"2.0","id":2,"result":{"tools":["#,
            r#"{"name":"ailang-read","inputSchema":{"type":"object"}},"#,
            r#"{"name":"tools_decho","description":"Echo a message","inputSchema":{"properties":{"message":{"type":"string"}},"required":["message"],"type":"object"},"outputSchema":{"type":"object"}}"#,
            r#"]}}"#
        ))
    );
}

#[test]
fn tools_list_of_an_empty_surface_is_an_empty_array() {
    let p = plan(&headers(None), br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#, &Surface::default(), &SERVER)
        .unwrap();
    assert_eq!(finish(p, vec![]).body_text(), sse(r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#));
}

#[test]
fn unknown_method_is_32601_with_go_quoting() {
    let r = answered(&headers(None), r#"{"jsonrpc":"2.0","id":4,"method":"resources/list"}"#);
    assert_eq!(
        r.body_text(),
        sse(r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"method not found: \"resources/list\""}}"#)
    );
}

#[test]
fn unknown_or_invisible_tool_is_32602() {
    let r = answered(
        &headers(None),
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"tools.echo","arguments":{}}}"#,
    );
    assert_eq!(
        r.body_text(),
        sse(r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"unknown tool \"tools.echo\""}}"#)
    );
}

#[test]
fn tools_call_with_bad_params_is_invalid_params() {
    for params in [r#""x""#, "[]", r#"{"name":5}"#] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{params}}}"#);
        let p = run(&headers(None), &body).unwrap();
        let Step::Answered(a) = &p.steps()[0] else { panic!("expected an answer") };
        assert_eq!(a.error_code(), Some(-32602));
        let text = String::from_utf8(a.json().to_vec()).unwrap();
        assert!(text.contains("\"message\":\"invalid params: "), "{text}");
    }
}

#[test]
fn tools_call_without_name_is_unknown_empty_tool() {
    let r = answered(&headers(None), r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}"#);
    assert!(r.body_text().contains(r#""message":"unknown tool \"\"""#));
}

#[test]
fn arguments_failing_the_schema_are_invalid_params() {
    let r = answered(
        &headers(None),
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"tools_decho","arguments":{}}}"#,
    );
    assert_eq!(
        r.body_text(),
        sse(
            r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"invalid params: \"message\" is a required property"}}"#
        )
    );
}

#[test]
fn non_object_arguments_are_invalid_params() {
    for args in ["null", "[]", "1", "\"s\""] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"ailang-read","arguments":{args}}}}}"#
        );
        let r = answered(&headers(None), &body);
        assert_eq!(
            r.body_text(),
            sse(
                r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"invalid params: arguments must be a JSON object"}}"#
            ),
            "{args}"
        );
    }
}

#[test]
fn absent_arguments_mean_an_empty_object() {
    let p = run(&headers(None), r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ailang-read"}}"#)
        .unwrap();
    let call = p.calls().next().unwrap();
    assert_eq!(call.arguments, json!({}));
}

#[test]
fn tools_call_becomes_a_call_with_the_decoded_id() {
    let p = run(
        &headers(Some("2025-11-25")),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tools_decho","arguments":{"message":"hi"}}}"#,
    )
    .unwrap();
    let calls: Vec<_> = p.calls().collect();
    assert_eq!(
        calls,
        [&Call {
            jsonrpc_id: RpcId::from(2),
            tool_name: "tools_decho".into(),
            transition_id: "tools.echo".into(),
            arguments: json!({"message": "hi"}),
            input: Input::default(),
            accepts_task: false,
        }]
    );
}

#[test]
fn call_result_is_text_and_structured_content() {
    let p = run(
        &headers(None),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tools_decho","arguments":{"message":"hi"}}}"#,
    )
    .unwrap();
    let r = finish(p, vec![Ok(json!({"ok": true, "echo": "<hi>"}).into())]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("text/event-stream"));
    assert_eq!(
        r.body_text(),
        sse(
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"{\"echo\":\"\u003chi\u003e\",\"ok\":true}"}],"structuredContent":{"echo":"\u003chi\u003e","ok":true}}}"#
        )
    );
    assert!(!r.body_text().contains("isError"));
}

#[test]
fn a_denied_effect_keeps_the_seeds_bytes_here_its_label_and_reason_left_to_the_modern_era() {
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ailang-read"}}"#;
    let effect = json!({"id": "e1", "status": "denied", "record": "sha256:00"});
    let seed = json!({"world": {"effects": [effect.clone()], "plan": "sha256:11"}});
    let mut told = effect;
    told["denial"] = json!("denied:budget");
    told["reason"] = json!("Workspace.Read on worktree: 2 of 2 spent in episode demo, across its sessions");
    let with_reason = json!({"world": {"effects": [told], "plan": "sha256:11"}});
    let seed_bytes = finish(run(&headers(None), body).unwrap(), vec![Ok(seed.into())]).body_text();
    let r = finish(run(&headers(None), body).unwrap(), vec![Ok(with_reason.into())]);
    assert_eq!(r.body_text(), seed_bytes);
    assert!(!seed_bytes.contains("denial") && seed_bytes.contains(r#"\"status\":\"denied\""#), "{seed_bytes}");
}

#[test]
fn non_object_output_is_a_per_item_error() {
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ailang-read"}}"#;
    let r = finish(run(&headers(None), body).unwrap(), vec![Ok(Value::Null.into())]);
    assert_eq!(
        r.body_text(),
        sse(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"host callback returned no result"}}"#)
    );
    let r = finish(run(&headers(None), body).unwrap(), vec![Ok(json!([1]).into())]);
    assert_eq!(
        r.body_text(),
        sse(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"host callback returned invalid JSON"}}"#)
    );
}

#[test]
fn host_failures_answer_the_whole_post_with_the_envelope() {
    let cases = [
        (HostFailure::Failed, "host callback failed"),
        (HostFailure::TimedOut, "host callback timed out"),
        (HostFailure::Canceled, "host callback canceled"),
        (HostFailure::CapacityExceeded, "host callback capacity exceeded"),
    ];
    for (f, msg) in cases {
        let p = run(
            &headers(None),
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ailang-read","arguments":{}}}"#,
        )
        .unwrap();
        let r = finish(p, vec![Err(f)]);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
        assert_eq!(
            r.body_text(),
            format!("{{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{{\"code\":-32603,\"message\":\"{msg}\"}}}}\n")
        );
    }
}

#[test]
fn missing_outcomes_count_as_failed() {
    let p = run(&headers(None), r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"ailang-read"}}"#)
        .unwrap();
    assert_eq!(
        finish(p, vec![]).body_text(),
        "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"error\":{\"code\":-32603,\"message\":\"host callback failed\"}}\n"
    );
}

const BATCH: &str = r#"[
    {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ailang-read","arguments":{"n":1}}},
    {"jsonrpc":"2.0","method":"notifications/initialized"},
    {"jsonrpc":"2.0","id":1,"method":"ping"},
    {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ailang-read","arguments":{"n":3}}}
]"#;

#[test]
fn batch_under_2025_03_26_is_one_event_holding_the_array() {
    let p = run(&headers(None), BATCH).unwrap();
    assert!(p.is_batch());
    assert_eq!(p.call_count(), 2);
    let r = finish(p, vec![Ok(json!({"n": 1}).into()), Ok(json!({"n": 3}).into())]);
    assert_eq!(
        r.body_text(),
        sse(concat!(
            "[",
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"n\":1}"}],"structuredContent":{"n":1}}},"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}},"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"{\"n\":3}"}],"structuredContent":{"n":3}}}"#,
            "]"
        ))
    );
}

#[test]
fn batch_calls_keep_repeated_ids_apart() {
    let p = run(&headers(None), BATCH).unwrap();
    let ids: Vec<_> = p.calls().map(|c| c.jsonrpc_id.clone()).collect();
    assert_eq!(ids, [RpcId::from(1), RpcId::from(3)]);
}

#[test]
fn batch_host_failure_has_id_null() {
    let p = run(&headers(None), BATCH).unwrap();
    let r = finish(p, vec![Ok(json!({}).into()), Err(HostFailure::TimedOut)]);
    assert_eq!(
        r.body_text(),
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"host callback timed out\"}}\n"
    );
}

#[test]
fn single_item_batch_still_answers_an_array() {
    let r = answered(&headers(None), r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    assert_eq!(r.body_text(), sse(r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#));
}

#[test]
fn envelope_before_a_plan_uses_the_top_level_id() {
    let r = host_failure_for_body(br#" {"jsonrpc":"2.0","id":9,"method":"initialize"}"#, HostFailure::Failed);
    assert_eq!(
        r.body_text(),
        "{\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":-32603,\"message\":\"host callback failed\"}}\n"
    );
    assert_eq!(top_level_id(br#"[{"id":1}]"#), RpcId::Null);
    assert_eq!(top_level_id(b"garbage"), RpcId::Null);
    assert_eq!(top_level_id(br#"{"id":[1]}"#), RpcId::Null);
    assert_eq!(top_level_id(br#"{"id":"x"}"#), RpcId::from("x"));
    assert_eq!(
        host_failure_for_body(b"{}", HostFailure::CapacityExceeded).body_text(),
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"host callback capacity exceeded\"}}\n"
    );
}

#[test]
fn plan_envelope_id_matches_the_request() {
    let p = run(&headers(None), r#"{"jsonrpc":"2.0","id":"q","method":"ping"}"#).unwrap();
    assert_eq!(
        p.host_failure(HostFailure::Canceled).body_text(),
        "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"error\":{\"code\":-32603,\"message\":\"host callback canceled\"}}\n"
    );
}

#[test]
fn deep_nesting_does_not_panic() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let r = refused(&headers(None), &deep);
    assert_eq!(r.status, 400);
    let deep_params = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"ailang-read","arguments":{{"a":{}{}}}}}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let p = run(&headers(None), &deep_params).unwrap();
    let Step::Answered(a) = &p.steps()[0] else { panic!("expected an answer") };
    assert_eq!(a.error_code(), Some(-32602));
}

#[test]
fn invalid_utf8_body_is_a_parse_error() {
    let r =
        plan(&headers(None), b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", &surface(), &SERVER).unwrap_err();
    assert_eq!(r.status, 400);
}

fn json_ish() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("0".to_owned()),
        Just("-1.5e3".to_owned()),
        Just("\"2.0\"".to_owned()),
        Just("\"tools/call\"".to_owned()),
        Just("\"initialize\"".to_owned()),
        Just("\"ping\"".to_owned()),
        Just("\"tools/list\"".to_owned()),
        Just("\"ailang-read\"".to_owned()),
        Just("\"tools_decho\"".to_owned()),
        "\"[a-z_/.]{0,8}\"".prop_map(|s| s),
        any::<i64>().prop_map(|n| n.to_string()),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("jsonrpc"),
                        Just("id"),
                        Just("method"),
                        Just("params"),
                        Just("name"),
                        Just("arguments"),
                        Just("result"),
                        Just("error"),
                        Just("protocolVersion"),
                        Just("message"),
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|v| {
                let members: Vec<String> = v.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

proptest! {
    #[test]
    fn plan_never_panics_on_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..512)) {
        for v in [None, Some("2025-06-18")] {
            if let Ok(p) = plan(&headers(v), &body, &surface(), &SERVER) {
                let n = p.call_count();
                let _ = finish(p, vec![Ok(json!({}).into()); n]);
            }
        }
    }

    #[test]
    fn plan_never_panics_on_json_shaped_input(body in json_ish()) {
        for v in [None, Some("2025-11-25")] {
            match plan(&headers(v), body.as_bytes(), &surface(), &SERVER) {
                Ok(p) => {
                    let n = p.call_count();
                    let r = finish(p.clone(), vec![Ok(json!({"x": 1}).into()); n]);
                    prop_assert_eq!(r.status, 200);
                    let r = finish(p, vec![Err(HostFailure::Failed); n]);
                    prop_assert_eq!(r.status, 200);
                }
                Err(r) => prop_assert!(r.status == 400 || r.status == 202),
            }
        }
    }
}
