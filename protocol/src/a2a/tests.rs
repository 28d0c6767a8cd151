use super::*;
use proptest::prelude::*;

const PIN: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn parse_str(s: &str) -> Result<A2aRequest, A2aReply> {
    parse(s.as_bytes())
}

fn refusal(s: &str) -> A2aReply {
    parse_str(s).expect_err("refusal")
}

fn tasks_send(params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{params}}}"#)
}

fn assert_invalid_params(body: &str) {
    let r = refusal(body);
    assert_eq!(r.error_code(), Some(-32602), "{body}");
    assert_eq!(r.error_message(), Some("invalid params"), "{body}");
}

/// Asserts a 0.3/1.0 refusal: its code, and `error.data` as A2A 1.0 §9.5
/// shapes it (an ErrorInfo first; a BadRequest naming the parameter when
/// one is at fault); returns the detail.
fn assert_refused(body: &str, code: i64, parameter: Option<&str>) -> String {
    let r = refusal(body);
    assert_eq!(r.error_code(), Some(code), "{body}: {}", String::from_utf8_lossy(&r.body()));
    let data = r.error_data().unwrap_or_else(|| panic!("no data: {body}")).as_array().unwrap().clone();
    let info = &data[0];
    assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo", "{body}");
    assert_eq!(info["domain"], "a2a-protocol.org");
    assert!(info["reason"].as_str().unwrap().chars().all(|c| c.is_ascii_uppercase() || c == '_'));
    assert!(
        info["metadata"].as_object().unwrap().values().all(Value::is_string),
        "ErrorInfo.metadata is map<string,string>"
    );
    let detail = info["metadata"]["detail"].as_str().unwrap().to_owned();
    assert!(!detail.is_empty());
    match parameter {
        Some(p) => {
            assert_eq!(info["metadata"]["parameter"], p, "{body}");
            assert_eq!(data[1]["@type"], "type.googleapis.com/google.rpc.BadRequest");
            assert_eq!(data[1]["fieldViolations"], json!([{"field": p, "description": detail}]));
            assert_eq!(data.len(), 2);
        }
        None => assert_eq!(data.len(), 1, "{body}"),
    }
    detail
}

fn send10(message: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"metadata":{{"skill_id":"s"}},"message":{message}}}}}"#
    )
}

fn send03(message: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"metadata":{{"skill_id":"s"}},"message":{message}}}}}"#
    )
}

fn send_request(task_id: &str, skill_id: &str, arguments: Value) -> SendRequest {
    SendRequest {
        task_id: task_id.into(),
        skill_id: skill_id.into(),
        arguments,
        transition_fn: None,
        context_id: None,
        message_id: None,
        history_length: None,
        return_immediately: false,
    }
}

#[test]
fn seed_tasks_send_parses() {
    let req = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"id":"read-1","metadata":{"skill_id":"ailang-read"},"message":{"role":"user","parts":[{"type":"data","data":{"path":"hello.ail"}}]}}}"#).unwrap();
    assert_eq!(
        req,
        A2aRequest {
            jsonrpc_id: RpcId::from(1),
            flavor: Flavor::Legacy01,
            kind: A2aKind::Send(send_request("read-1", "ailang-read", json!({"path": "hello.ail"}))),
        }
    );
}

#[test]
fn transition_fn_pin_is_carried() {
    let body = tasks_send(&format!(
        r#"{{"id":"t","metadata":{{"skill_id":"s","transition_fn":"{PIN}"}},"message":{{"parts":[{{"type":"data","data":{{}}}}]}}}}"#
    ));
    let req = parse_str(&body).unwrap();
    let A2aKind::Send(send) = req.kind else { panic!() };
    assert_eq!(send.transition_fn.as_deref(), Some(PIN));
}

#[test]
fn malformed_transition_fn_is_invalid_params() {
    for pin in [
        "\"sha256:abc\"".to_owned(),
        format!("\"{}\"", PIN.to_uppercase()),
        format!("\"{}\"", PIN.replace("sha256:", "sha512:")),
        "5".to_owned(),
    ] {
        assert_invalid_params(&tasks_send(&format!(
            r#"{{"id":"t","metadata":{{"skill_id":"s","transition_fn":{pin}}},"message":{{"parts":[{{"type":"data","data":{{}}}}]}}}}"#
        )));
    }
}

#[test]
fn bad_json_and_non_objects_are_invalid_request_with_id_null() {
    for body in ["{", "", "[]", "5", "\"x\"", "[{\"jsonrpc\":\"2.0\"}]"] {
        let r = refusal(body);
        assert_eq!(
            String::from_utf8(r.body()).unwrap(),
            "{\"error\":{\"code\":-32600,\"message\":\"invalid JSON-RPC request\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n",
            "{body:?}"
        );
    }
}

#[test]
fn jsonrpc_must_be_2_0() {
    let r = refusal(r#"{"jsonrpc":"1.0","id":7,"method":"tasks/send","params":{}}"#);
    assert_eq!(
        String::from_utf8(r.body()).unwrap(),
        "{\"error\":{\"code\":-32600,\"message\":\"invalid JSON-RPC request\"},\"id\":7,\"jsonrpc\":\"2.0\"}\n"
    );
}

#[test]
fn id_must_be_string_number_or_null() {
    for id in ["{}", "[]", "true"] {
        let r = refusal(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tasks/send"}}"#));
        assert_eq!(r.error_code(), Some(-32600));
        assert_eq!(r.jsonrpc_id(), &RpcId::Null);
    }
    let r = refusal(r#"{"jsonrpc":"2.0","id":"abc","method":"nope"}"#);
    assert_eq!(r.jsonrpc_id(), &RpcId::from("abc"));
}

#[test]
fn missing_method_is_invalid_request() {
    assert_eq!(refusal(r#"{"jsonrpc":"2.0","id":1}"#).error_code(), Some(-32600));
}

#[test]
fn other_methods_are_method_not_found() {
    // 0.3 has no JSON-RPC tasks/list; names are case-sensitive.
    for m in ["tasks/sendSubscribe", "tasks/list", "listTasks", "cancelTask", "initialize", ""] {
        let r = refusal(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{m}"}}"#));
        assert_eq!(
            String::from_utf8(r.body()).unwrap(),
            "{\"error\":{\"code\":-32601,\"message\":\"method not found\"},\"id\":1,\"jsonrpc\":\"2.0\"}\n"
        );
    }
}

#[test]
fn task_id_grammar_is_enforced() {
    let ok = |id: &str| {
        parse_str(&tasks_send(&format!(
            r#"{{"id":"{id}","metadata":{{"skill_id":"s"}},"message":{{"parts":[{{"type":"data","data":{{}}}}]}}}}"#
        )))
        .is_ok()
    };
    assert!(ok("A-z_0.9"));
    assert!(ok(&"a".repeat(128)));
    assert!(!ok(&"a".repeat(129)));
    assert!(!ok(""));
    assert!(!ok("a b"));
    assert!(!ok("a/b"));
    assert!(!ok("é"));
    assert!(is_task_id("read-1"));
}

#[test]
fn tasks_send_shape_errors_are_invalid_params() {
    let bad = [
        r#""x""#,
        r#"{"metadata":{"skill_id":"s"},"message":{"parts":[{"type":"data","data":{}}]}}"#,
        r#"{"id":5,"metadata":{"skill_id":"s"},"message":{"parts":[{"type":"data","data":{}}]}}"#,
        r#"{"id":"t","message":{"parts":[{"type":"data","data":{}}]}}"#,
        r#"{"id":"t","metadata":{},"message":{"parts":[{"type":"data","data":{}}]}}"#,
        r#"{"id":"t","metadata":{"skill_id":""},"message":{"parts":[{"type":"data","data":{}}]}}"#,
        r#"{"id":"t","metadata":{"skill_id":7},"message":{"parts":[{"type":"data","data":{}}]}}"#,
        r#"{"id":"t","metadata":"s","message":{"parts":[{"type":"data","data":{}}]}}"#,
        r#"{"id":"t","metadata":{"skill_id":"s"}}"#,
        r#"{"id":"t","metadata":{"skill_id":"s"},"message":{"parts":[]}}"#,
        r#"{"id":"t","metadata":{"skill_id":"s"},"message":{"parts":[{"type":"data","data":{}},{"type":"data","data":{}}]}}"#,
        r#"{"id":"t","metadata":{"skill_id":"s"},"message":{"parts":[{"type":"text","text":"hi"}]}}"#,
        r#"{"id":"t","metadata":{"skill_id":"s"},"message":{"parts":[{"kind":"data","data":{}}]}}"#,
        r#"{"id":"t","metadata":{"skill_id":"s"},"message":{"parts":[{"type":"data","data":[1]}]}}"#,
        r#"{"id":"t","metadata":{"skill_id":"s"},"message":{"parts":[{"type":"data"}]}}"#,
        r#"{"id":"t","metadata":{"skill_id":"s"},"message":{"parts":"x"}}"#,
    ];
    for params in bad {
        assert_invalid_params(&tasks_send(params));
    }
    assert_invalid_params(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/send"}"#);
}

/// The request `a2a-sdk` 1.3.0 sends through its 0.3 compat transport.
const SDK_03: &str = r#"{"method":"message/send","params":{"configuration":{"blocking":true},"message":{"kind":"message","messageId":"5f0c6a7e-2a3b-4c1d-9e8f-0a1b2c3d4e5f","parts":[{"data":{"message":"hi"},"kind":"data"}],"role":"user"},"metadata":{"skill_id":"tools.echo"}},"id":"9d1e","jsonrpc":"2.0"}"#;

#[test]
fn message_send_from_the_sdk_parses_as_0_3() {
    let req = parse_str(SDK_03).unwrap();
    assert_eq!(req.flavor, Flavor::V03);
    assert_eq!(req.jsonrpc_id, RpcId::from("9d1e"));
    let id = "5f0c6a7e-2a3b-4c1d-9e8f-0a1b2c3d4e5f";
    let want = SendRequest { message_id: Some(id.into()), ..send_request(id, "tools.echo", json!({"message": "hi"})) };
    assert_eq!(req.kind, A2aKind::Send(want));
}

#[test]
fn message_send_prefers_task_id_and_reads_message_metadata() {
    let req = parse_str(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"message":{{"kind":"message","messageId":"m1","taskId":"task-9","contextId":"ctx","role":"user","metadata":{{"skill_id":"s","transition_fn":"{PIN}"}},"parts":[{{"kind":"data","data":{{"a":1}}}}]}}}}}}"#
    ))
    .unwrap();
    let want = SendRequest {
        transition_fn: Some(PIN.into()),
        context_id: Some("ctx".into()),
        message_id: Some("m1".into()),
        ..send_request("task-9", "s", json!({"a": 1}))
    };
    assert_eq!(req.kind, A2aKind::Send(want));
}

#[test]
fn params_metadata_wins_over_message_metadata() {
    let req = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"metadata":{"skill_id":"outer"},"message":{"messageId":"m1","role":"user","metadata":{"skill_id":"inner"},"parts":[{"kind":"data","data":{}}]}}}"#).unwrap();
    let A2aKind::Send(send) = req.kind else { panic!() };
    assert_eq!(send.skill_id, "outer");
}

#[test]
fn message_id_outside_the_task_id_grammar_is_refused() {
    let detail = assert_refused(
        &send03(r#"{"messageId":"has space","role":"user","parts":[{"kind":"data","data":{}}]}"#),
        -32602,
        Some("message.messageId"),
    );
    assert!(detail.contains("with no taskId the messageId is the task id"), "{detail}");
    assert_refused(
        &send03(r#"{"messageId":"ok","taskId":"bad/id","role":"user","parts":[{"kind":"data","data":{}}]}"#),
        -32602,
        Some("message.taskId"),
    );
    // With a taskId, the messageId is any string.
    assert!(
        parse_str(&send03(
            r#"{"messageId":"has space","taskId":"t-1","role":"user","parts":[{"kind":"data","data":{}}]}"#
        ))
        .is_ok()
    );
}

#[test]
fn message_send_shape_errors_are_invalid_params_naming_the_parameter() {
    let long = "x".repeat(MESSAGE_ID_MAX + 1);
    let cases: Vec<(String, &str)> = vec![
        (r#"{"role":"user","parts":[{"kind":"data","data":{}}]}"#.into(), "message.messageId"),
        (r#"{"messageId":"","role":"user","parts":[{"kind":"data","data":{}}]}"#.into(), "message.messageId"),
        (r#"{"messageId":"m","kind":"task","role":"user","parts":[{"kind":"data","data":{}}]}"#.into(), "message.kind"),
        (r#"{"messageId":"m","parts":[{"kind":"data","data":{}}]}"#.into(), "message.role"),
        (r#"{"messageId":"m","role":"agent","parts":[{"kind":"data","data":{}}]}"#.into(), "message.role"),
        (r#"{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"data","data":{}}]}"#.into(), "message.role"),
        (r#"{"messageId":"m","role":"user","parts":[{"type":"data","data":{}}]}"#.into(), "message.parts[0].kind"),
        (
            r#"{"messageId":"m","role":"user","contextId":5,"parts":[{"kind":"data","data":{}}]}"#.into(),
            "message.contextId",
        ),
        (
            format!(
                r#"{{"messageId":"m","role":"user","contextId":"{long}","parts":[{{"kind":"data","data":{{}}}}]}}"#
            ),
            "message.contextId",
        ),
        (r#"{"messageId":"m","role":"user","parts":[]}"#.into(), "message.parts"),
        (r#"{"messageId":"m","role":"user"}"#.into(), "message.parts"),
        (r#"{"messageId":"m","role":"user","parts":[{"kind":"data","data":[1]}]}"#.into(), "message.parts[0].data"),
        (
            r#"{"messageId":"m","role":"user","parts":[{"kind":"data","data":{}},{"kind":"data","data":{}}]}"#.into(),
            "message.parts",
        ),
        (r#""hi""#.into(), "message"),
    ];
    for (message, parameter) in cases {
        assert_refused(&send03(&message), -32602, Some(parameter));
    }
    let no_skill = r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"data","data":{}}]}}}"#;
    assert_eq!(assert_refused(no_skill, -32602, Some("metadata.skill_id")), SKILL_ID_REQUIRED);
    let no_params = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage"}"#;
    assert_refused(no_params, -32602, Some("params"));
    let config = |c: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"metadata":{{"skill_id":"s"}},"configuration":{c},"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"data":{{}}}}]}}}}}}"#
        )
    };
    assert_refused(&config(r#"{"historyLength":-1}"#), -32602, Some("configuration.historyLength"));
    assert_refused(&config(r#"{"historyLength":"x"}"#), -32602, Some("configuration.historyLength"));
    assert_refused(&config("5"), -32602, Some("configuration"));
    // Push notifications are not offered, not even as part of a send.
    let push = r#"{"taskPushNotificationConfig":{"url":"http://127.0.0.1:9/hook"}}"#;
    assert_refused(&config(push), -32003, Some("configuration.taskPushNotificationConfig"));
    let ok = parse_str(&config(r#"{"historyLength":"2","returnImmediately":false,"acceptedOutputModes":[]}"#)).unwrap();
    let A2aKind::Send(send) = ok.kind else { panic!() };
    assert_eq!(send.history_length, Some(2));
}

#[test]
fn a_part_the_agent_cannot_take_is_content_type_not_supported_but_invalid_params_for_tasks_send() {
    for (body, kind) in [
        (send03(r#"{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}"#), "text"),
        (
            send03(r#"{"messageId":"m","role":"user","parts":[{"kind":"data","data":{}},{"kind":"file","file":{}}]}"#),
            "file",
        ),
        (send10(r#"{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}"#), "text"),
        (send10(r#"{"messageId":"m","role":"ROLE_USER","parts":[{"url":"http://x"}]}"#), "url"),
        (send10(r#"{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk="}]}"#), "raw"),
        (send10(r#"{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"a":1},"text":"hi"}]}"#), "text"),
    ] {
        let parameter = if kind == "file" { "message.parts[1]" } else { "message.parts[0]" };
        let detail = assert_refused(&body, -32005, Some(parameter));
        assert_eq!(
            detail,
            format!(
                "message has a {kind} part; this agent takes exactly one data part whose data is the skill's arguments"
            )
        );
        assert_eq!(refusal(&body).error_message(), Some("incompatible content types"));
    }
    // The seed's table: a text part is `invalid params`, its data saying why.
    let seed =
        tasks_send(r#"{"id":"t","metadata":{"skill_id":"s"},"message":{"parts":[{"type":"text","text":"hi"}]}}"#);
    let r = refusal(&seed);
    assert_eq!((r.error_code(), r.error_message()), (Some(-32602), Some("invalid params")));
    let data = r.error_data().expect("a -32602 says why");
    assert_eq!(data[0]["metadata"]["parameter"], "message.parts[0]", "{data}");
}

/// What a 1.0 client sends (`SendMessage`, proto-JSON parts).
const SDK_10: &str = r#"{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"data":{"message":"hi"}}]},"configuration":{},"metadata":{"skill_id":"tools.echo"}}}"#;

#[test]
fn send_message_parses_as_1_0() {
    let req = parse_str(SDK_10).unwrap();
    assert_eq!(req.flavor, Flavor::V10);
    let want =
        SendRequest { message_id: Some("m-1".into()), ..send_request("m-1", "tools.echo", json!({"message": "hi"})) };
    assert_eq!(req.kind, A2aKind::Send(want));
    // ProtoJSON spells ROLE_USER as 1 too.
    assert!(parse_str(&SDK_10.replace(r#""ROLE_USER""#, "1")).is_ok());
}

#[test]
fn send_message_parts_must_be_one_data_object() {
    for (part, parameter) in
        [(r#"{"data":"s"}"#, "message.parts[0].data"), (r#"{}"#, "message.parts[0].data"), ("5", "message.parts[0]")]
    {
        assert_refused(
            &send10(&format!(r#"{{"messageId":"m","role":"ROLE_USER","parts":[{part}]}}"#)),
            -32602,
            Some(parameter),
        );
    }
    for role in [r#""user""#, r#""ROLE_AGENT""#, "2", "null"] {
        assert_refused(
            &send10(&format!(r#"{{"messageId":"m","role":{role},"parts":[{{"data":{{}}}}]}}"#)),
            -32602,
            Some("message.role"),
        );
    }
}

#[test]
fn get_methods_take_an_id() {
    let r = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"read-1","historyLength":0}}"#)
        .unwrap();
    assert_eq!((r.flavor, r.kind), (Flavor::V03, A2aKind::Get { task_id: "read-1".into(), history_length: Some(0) }));
    let r = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"read-1"}}"#).unwrap();
    assert_eq!((r.flavor, r.kind), (Flavor::V10, A2aKind::Get { task_id: "read-1".into(), history_length: None }));
    assert_refused(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}"#, -32602, Some("id"));
    assert_refused(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get"}"#, -32602, Some("params"));
    for bad in ["-1", "1.5", "\"x\"", "true", "2147483648"] {
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{{"id":"t","historyLength":{bad}}}}}"#);
        assert_refused(&body, -32602, Some("historyLength"));
    }
    let r = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"t-1"}}"#).unwrap();
    assert_eq!((r.flavor, r.kind), (Flavor::V03, A2aKind::Cancel { task_id: "t-1".into() }));
    let r = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"t-1"}}"#).unwrap();
    assert_eq!((r.flavor, r.kind), (Flavor::V10, A2aKind::Cancel { task_id: "t-1".into() }));
    assert_refused(r#"{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"a/b"}}"#, -32602, Some("id"));
    for (m, flavor) in [("GetExtendedAgentCard", Flavor::V10), ("agent/getAuthenticatedExtendedCard", Flavor::V03)] {
        let r = parse_str(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{m}"}}"#)).unwrap();
        assert_eq!((r.flavor, r.kind), (flavor, A2aKind::ExtendedCard));
    }
}

#[test]
fn the_streaming_methods_parse_as_their_send_and_subscribe_requests() {
    let message = r#"{"messageId":"m-1","role":"ROLE_USER","parts":[{"data":{"x":1}}]}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{{"message":{message},"metadata":{{"skill_id":"s"}},"configuration":{{}}}}}}"#
    );
    let r = parse_str(&body).unwrap();
    let A2aKind::StreamSend(send) = r.kind else { panic!("{:?}", r.kind) };
    assert_eq!((r.flavor, send.task_id.as_str(), send.skill_id.as_str()), (Flavor::V10, "m-1", "s"));
    let v03 = r#"{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m-2","role":"user","parts":[{"kind":"data","data":{}}]},"metadata":{"skill_id":"s"}}}"#;
    let r = parse_str(v03).unwrap();
    assert!(matches!((r.flavor, &r.kind), (Flavor::V03, A2aKind::StreamSend(s)) if s.task_id == "m-2"), "{r:?}");
    let answer = r#"{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-3","taskId":"t-1","role":"ROLE_USER","parts":[{"data":{"approval":"approve"}}]}}}"#;
    assert!(matches!(parse_str(answer).unwrap().kind, A2aKind::StreamAnswer(a) if a.task_id == "t-1"));
    for (m, flavor) in [("SubscribeToTask", Flavor::V10), ("tasks/resubscribe", Flavor::V03)] {
        let r = parse_str(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{m}","params":{{"id":"t-1"}}}}"#)).unwrap();
        assert_eq!((r.flavor, r.kind), (flavor, A2aKind::Subscribe { task_id: "t-1".into() }));
        assert_refused(
            &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{m}","params":{{"id":"a/b"}}}}"#),
            -32602,
            Some("id"),
        );
        assert_refused(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{m}"}}"#), -32602, Some("params"));
    }
}

fn event_json(reply: &A2aReply) -> Value {
    let event = sse_event(reply);
    let text = String::from_utf8(event).unwrap();
    let data = text.strip_prefix("data: ").unwrap_or_else(|| panic!("one data line: {text:?}"));
    let data = data.strip_suffix("\n\n").unwrap_or_else(|| panic!("a blank line ends it: {text:?}"));
    assert!(!data.contains('\n'), "{text:?}");
    serde_json::from_str(data).unwrap()
}

#[test]
fn stream_events_are_one_json_rpc_reply_each_with_exactly_one_stream_response_member() {
    let id = RpcId::Number("7".into());
    let data = json!({"running": {"cancelAsked": true}});
    let working = status_update(Flavor::V10, &id, "t", "c", TaskStateName::Working, 0, Some(&data));
    let v = event_json(&working);
    assert_eq!((&v["jsonrpc"], &v["id"]), (&json!("2.0"), &json!(7)));
    let result = v["result"].as_object().unwrap();
    assert_eq!(result.keys().collect::<Vec<_>>(), ["statusUpdate"]);
    let update = &result["statusUpdate"];
    assert_eq!((&update["taskId"], &update["contextId"]), (&json!("t"), &json!("c")));
    assert_eq!(update["status"]["state"], json!("TASK_STATE_WORKING"));
    assert_eq!(update["status"]["timestamp"], json!("1970-01-01T00:00:00Z"));
    assert_eq!(update["status"]["message"]["role"], json!("ROLE_AGENT"));
    assert_eq!(update["status"]["message"]["parts"][0]["data"], data);
    assert!(update.get("final").is_none(), "1.0 has no final flag: {update}");
    let done = event_json(&status_update(Flavor::V10, &id, "t", "c", TaskStateName::Completed, 60, None));
    assert_eq!(
        done["result"]["statusUpdate"]["status"],
        json!({"state": "TASK_STATE_COMPLETED", "timestamp": "1970-01-01T00:01:00Z"})
    );
    // Chunks: append and lastChunk only when true, as ProtoJSON writes them.
    let chunk = |append, last_chunk| Chunk {
        artifact_id: LIVE_OUTPUT_ARTIFACT_ID,
        name: Some(LIVE_OUTPUT_NAME),
        part: ChunkPart::Text("one\n"),
        append,
        last_chunk,
        metadata: Some(json!({"fromByte": 0})),
    };
    let first = event_json(&artifact_update(Flavor::V10, &id, "t", "c", &chunk(false, false)));
    let update = &first["result"]["artifactUpdate"];
    assert_eq!(first["result"].as_object().unwrap().len(), 1);
    assert_eq!(update["artifact"]["artifactId"], json!("live-output"));
    assert_eq!(update["artifact"]["parts"], json!([{"text": "one\n"}]));
    assert_eq!(update["artifact"]["metadata"], json!({"fromByte": 0}));
    assert!(update.get("append").is_none() && update.get("lastChunk").is_none(), "{update}");
    let last = event_json(&artifact_update(Flavor::V10, &id, "t", "c", &chunk(true, true)));
    assert_eq!(
        (&last["result"]["artifactUpdate"]["append"], &last["result"]["artifactUpdate"]["lastChunk"]),
        (&json!(true), &json!(true))
    );
    // 0.3: the event itself, tagged by kind; a status says whether it is the last.
    let v03 = event_json(&artifact_update(Flavor::V03, &id, "t", "c", &chunk(true, false)));
    assert_eq!(v03["result"]["kind"], json!("artifact-update"));
    assert_eq!(v03["result"]["artifact"]["parts"], json!([{"kind": "text", "text": "one\n"}]));
    let v03 = event_json(&status_update(Flavor::V03, &id, "t", "c", TaskStateName::Canceled, 0, None));
    assert_eq!((&v03["result"]["kind"], &v03["result"]["final"]), (&json!("status-update"), &json!(true)));
    assert_eq!(v03["result"]["status"]["state"], json!("canceled"));
    // The first event is the Task, wrapped in 1.0 whether a send or a get made it.
    let t = TaskView {
        task_id: "t",
        context_id: None,
        state: TaskStateName::Working,
        timestamp: Some(0),
        committed: None,
        history: vec![],
        status_message: None,
    };
    for reply in [task_completed(Flavor::V10, &id, &t), task_snapshot(Flavor::V10, &id, &t)] {
        let v = event_json(&stream_task(Flavor::V10, reply));
        assert_eq!(v["result"]["task"]["id"], json!("t"), "{v}");
        assert_eq!(v["result"].as_object().unwrap().len(), 1);
    }
    assert_eq!(
        event_json(&stream_task(Flavor::V03, task_snapshot(Flavor::V03, &id, &t)))["result"]["kind"],
        json!("task")
    );
    // An error mid-stream is an error event.
    let refused = A2aError::Unavailable.because(Why::new("x")).reply(&id, Flavor::V10);
    assert!(String::from_utf8(sse_event(&refused)).unwrap().starts_with("event: error\ndata: {\"error\""));
}

#[test]
fn a_character_split_at_a_chunk_s_end_waits_for_the_next_chunk() {
    let text = "añ€😀".as_bytes();
    for cut in 0..=text.len() {
        let sent = complete_utf8_len(&text[..cut]);
        assert!(std::str::from_utf8(&text[..sent]).is_ok(), "cut {cut}: sent {sent}");
        assert!(cut - sent < 4, "at most one incomplete character waits");
        assert!(sent == cut || std::str::from_utf8(&text[..cut]).is_err(), "a whole text is sent whole: {cut}");
    }
    // Bytes that can never become a character are not held back.
    assert_eq!(complete_utf8_len(b"ab\xff"), 3);
    assert_eq!(complete_utf8_len(b"ab\x80\x80\x80"), 5);
    assert_eq!(complete_utf8_len(b""), 0);
}

#[test]
fn what_the_card_does_not_offer_is_refused_with_the_spec_codes() {
    for m in [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
    ] {
        let detail = assert_refused(
            &format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{m}","params":{{"id":"t"}}}}"#),
            -32003,
            None,
        );
        assert!(detail.contains("capabilities.pushNotifications false"), "{detail}");
    }
}

#[test]
fn list_tasks_parses_its_filters_and_refuses_each_bad_one_by_name() {
    let list = |params: &str| format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{params}}}"#);
    let r = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks"}"#).unwrap();
    let want = ListQuery {
        context_id: None,
        status: None,
        status_after: None,
        page_size: LIST_PAGE_DEFAULT,
        page_token: None,
        history_length: None,
        include_artifacts: false,
    };
    assert_eq!((r.flavor, r.kind), (Flavor::V10, A2aKind::List(want.clone())));
    let r = parse_str(&list(
        r#"{"contextId":"c","status":"TASK_STATE_COMPLETED","pageSize":100,"historyLength":1,"includeArtifacts":true,"statusTimestampAfter":"2025-10-28T10:30:00.250Z","tenant":""}"#,
    ))
    .unwrap();
    let full = ListQuery {
        context_id: Some("c".into()),
        status: Some(TaskStateName::Completed),
        status_after: Some(1_761_647_400),
        page_size: 100,
        history_length: Some(1),
        include_artifacts: true,
        ..want.clone()
    };
    assert_eq!(r.kind, A2aKind::List(full.clone()));
    // A token is taken with the filters it was issued for, and no others.
    let token =
        PageToken { before: 7, seen: 3, filters: filters_digest(Some("c"), Some(TaskStateName::Completed), None) };
    let r = parse_str(&list(&format!(r#"{{"contextId":"c","status":3,"pageToken":"{}"}}"#, token.encode()))).unwrap();
    let A2aKind::List(q) = r.kind else { panic!() };
    assert_eq!(q.page_token, Some(token));
    assert_refused(
        &list(&format!(r#"{{"contextId":"d","status":3,"pageToken":"{}"}}"#, token.encode())),
        -32602,
        Some("pageToken"),
    );
    for (params, parameter) in [
        (r#"{"pageSize":0}"#, "pageSize"),
        (r#"{"pageSize":-3}"#, "pageSize"),
        (r#"{"pageSize":101}"#, "pageSize"),
        (r#"{"pageSize":"many"}"#, "pageSize"),
        (r#"{"status":"TASK_STATE_RUNNING"}"#, "status"),
        (r#"{"status":"completed"}"#, "status"),
        (r#"{"status":9}"#, "status"),
        (r#"{"historyLength":-5}"#, "historyLength"),
        (r#"{"pageToken":"not a token"}"#, "pageToken"),
        (r#"{"pageToken":"bm9wZQ"}"#, "pageToken"),
        (r#"{"pageToken":7}"#, "pageToken"),
        (r#"{"contextId":7}"#, "contextId"),
        (r#"{"includeArtifacts":"yes"}"#, "includeArtifacts"),
        (r#"{"statusTimestampAfter":"yesterday"}"#, "statusTimestampAfter"),
        (r#"{"statusTimestampAfter":"2025-10-28T10:30:00+02:00"}"#, "statusTimestampAfter"),
        (r#"{"statusTimestampAfter":"2025-02-30T10:30:00Z"}"#, "statusTimestampAfter"),
        (r#"{"statusTimestampAfter":1761647400}"#, "statusTimestampAfter"),
        ("[]", "params"),
    ] {
        assert_refused(&list(params), -32602, Some(parameter));
    }
    let detail = assert_refused(&list(r#"{"status":"TASK_STATE_RUNNING"}"#), -32602, Some("status"));
    assert!(detail.contains("TASK_STATE_AUTH_REQUIRED") && detail.contains("TASK_STATE_RUNNING"), "{detail}");
}

#[test]
fn timestamps_are_iso_8601_utc_both_ways() {
    for (secs, text) in
        [(0, "1970-01-01T00:00:00Z"), (951_782_400, "2000-02-29T00:00:00Z"), (1_761_647_400, "2025-10-28T10:30:00Z")]
    {
        assert_eq!(iso8601(secs), text);
        assert_eq!(parse_iso8601(text), Some(secs));
    }
    assert_eq!(parse_iso8601("2025-10-28T10:30:00.999999999Z"), Some(1_761_647_400));
    assert_eq!(parse_iso8601("1960-01-01T00:00:00Z"), Some(0));
    for bad in [
        "",
        "2025-10-28",
        "2025-10-28T10:30:00",
        "2025-10-28 10:30:00Z",
        "2025-13-01T00:00:00Z",
        "2025-10-28T24:00:00Z",
        "2025-10-28T10:30:00.Z",
        "2025-10-28T10:30:00ZZ",
        "2023-02-29T00:00:00Z",
    ] {
        assert_eq!(parse_iso8601(bad), None, "{bad}");
    }
}

#[test]
fn page_tokens_round_trip_and_refuse_garbage() {
    let t = PageToken { before: 12, seen: 40, filters: 0xdead_beef };
    assert_eq!(PageToken::decode(&t.encode()), Some(t));
    for bad in ["", "!", "MTIuNDA", "MTIuNDAuMDAwMDAwMDBkZWFkYmVlZi4x"] {
        assert_eq!(PageToken::decode(bad), None, "{bad}");
    }
}

#[test]
fn missing_id_is_answered_as_null() {
    let r = parse_str(r#"{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"x"}}"#).unwrap();
    assert_eq!(r.jsonrpc_id, RpcId::Null);
}

fn done<'a>(output: &'a Value) -> TaskView<'a> {
    TaskView {
        task_id: "read-1",
        context_id: None,
        state: TaskStateName::Completed,
        timestamp: None,
        committed: Some(CommittedView {
            output,
            invocation_id: "a2a:ep1:read-1",
            world_ref: "sha256:abc",
            entry_index: 3,
        }),
        history: vec![],
        status_message: None,
    }
}

#[test]
fn legacy_success_matches_the_seed_with_sorted_keys() {
    let out = json!({"ok": true, "content": "<x>"});
    let r = task_completed(Flavor::Legacy01, &RpcId::from(1), &done(&out)).into_http();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert_eq!(r.header("Connection"), None);
    assert_eq!(
        r.body_text(),
        concat!(
            r#"{"id":1,"jsonrpc":"2.0","result":{"artifacts":[{"parts":[{"data":{"content":"\u003cx\u003e","ok":true},"type":"data"}]}],"#,
            r#""id":"read-1","metadata":{"entry_index":3,"invocation_id":"a2a:ep1:read-1","world_ref":"sha256:abc"},"status":{"state":"completed"}}}"#,
            "\n"
        )
    );
}

#[test]
fn v03_success_is_a_task_the_sdk_can_validate() {
    let out = json!({"a": 1});
    let mut t = done(&out);
    t.context_id = Some("ctx-1");
    let r = task_completed(Flavor::V03, &RpcId::from("9d1e"), &t);
    assert_eq!(
        r.result().unwrap(),
        &json!({
            "kind": "task",
            "id": "read-1",
            "contextId": "ctx-1",
            "status": {"state": "completed"},
            "artifacts": [{"artifactId": "output", "parts": [{"kind": "data", "data": {"a": 1}}]}],
            "metadata": {"invocation_id": "a2a:ep1:read-1", "world_ref": "sha256:abc", "entry_index": 3}
        })
    );
}

#[test]
fn v10_send_wraps_the_task_and_get_does_not() {
    let out = json!({"a": 1});
    let task = json!({
        "id": "read-1",
        "contextId": "read-1",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": "output", "parts": [{"data": {"a": 1}}]}],
        "metadata": {"invocation_id": "a2a:ep1:read-1", "world_ref": "sha256:abc", "entry_index": 3}
    });
    let send = task_completed(Flavor::V10, &RpcId::from(1), &done(&out));
    assert_eq!(send.result().unwrap(), &json!({ "task": task.clone() }));
    let get = task_snapshot(Flavor::V10, &RpcId::from(1), &done(&out));
    assert_eq!(get.result().unwrap(), &task);
    let get03 = task_snapshot(Flavor::V03, &RpcId::from(1), &done(&out));
    assert_eq!(get03.result().unwrap()["kind"], "task");
}

#[test]
fn history_is_the_request_then_the_reply_cut_to_the_last_n_in_each_flavour() {
    let (args, out) = (json!({"path": "a"}), json!({"ok": true}));
    let all = task_messages("t-1", Some("m-1"), Some(&args), Some(&out));
    assert_eq!(last(all.clone(), None).len(), 2);
    assert_eq!(last(all.clone(), Some(5)).len(), 2);
    assert_eq!(last(all.clone(), Some(1)), vec![all[1].clone()]);
    assert!(last(all.clone(), Some(0)).is_empty());
    let mut t = done(&out);
    t.task_id = "t-1";
    t.context_id = Some("ctx");
    t.timestamp = Some(1_761_647_400);
    t.history = all;
    let v10 = task_snapshot(Flavor::V10, &RpcId::from(1), &t).result().unwrap().clone();
    assert_eq!(v10["status"], json!({"state": "TASK_STATE_COMPLETED", "timestamp": "2025-10-28T10:30:00Z"}));
    assert_eq!(
        v10["history"],
        json!([
            {"messageId": "m-1", "contextId": "ctx", "taskId": "t-1", "role": "ROLE_USER", "parts": [{"data": {"path": "a"}}]},
            {"messageId": "t-1.reply", "contextId": "ctx", "taskId": "t-1", "role": "ROLE_AGENT", "parts": [{"data": {"ok": true}}]},
        ])
    );
    let v03 = task_snapshot(Flavor::V03, &RpcId::from(1), &t).result().unwrap().clone();
    assert_eq!(v03["history"][0]["kind"], "message");
    assert_eq!((&v03["history"][0]["role"], &v03["history"][1]["role"]), (&json!("user"), &json!("agent")));
    assert_eq!(v03["history"][1]["parts"], json!([{"kind": "data", "data": {"ok": true}}]));
    // No history asked for: no member at all.
    t.history = vec![];
    assert!(task_snapshot(Flavor::V10, &RpcId::from(1), &t).result().unwrap().get("history").is_none());
    // Without a request message id, the task id stands for it.
    assert_eq!(task_messages("t-2", None, Some(&args), None)[0].message_id, "t-2");
}

#[test]
fn a_list_page_omits_artifacts_unless_asked_and_always_has_a_next_page_token() {
    let out = json!({"a": 1});
    let tasks = [done(&out)];
    let r = task_list(&RpcId::from(1), &tasks, false, "", 50, 1);
    let v = r.result().unwrap();
    assert_eq!((&v["nextPageToken"], &v["pageSize"], &v["totalSize"]), (&json!(""), &json!(50), &json!(1)));
    assert!(v["tasks"][0].get("artifacts").is_none(), "{v}");
    assert_eq!(v["tasks"][0]["status"]["state"], "TASK_STATE_COMPLETED");
    let r = task_list(&RpcId::from(1), &tasks, true, "tok", 1, 9);
    assert_eq!(r.result().unwrap()["tasks"][0]["artifacts"][0]["parts"], json!([{"data": {"a": 1}}]));
}

#[test]
fn every_error_row_has_its_code_and_exact_message() {
    let rows: [(A2aError, i64, &str); 22] = [
        (A2aError::InvalidRequest, -32600, "invalid JSON-RPC request"),
        (A2aError::MethodNotFound, -32601, "method not found"),
        (A2aError::InvalidParams, -32602, "invalid params"),
        (A2aError::NotAuthorized, -32602, "not authorized"),
        (A2aError::ProposalMismatch, -32602, "proposal does not match the registered transition"),
        (A2aError::TaskIdReused, -32602, "task id already used in this session"),
        (
            A2aError::EffectsUnrecorded(vec!["sha256:aa".into(), "sha256:bb".into()]),
            -32603,
            "effects were requested but the invocation was not confirmed committed; effect records: sha256:aa sha256:bb",
        ),
        (A2aError::NoEffectHandler, -32603, "transition declares an effect this daemon has no handler for"),
        (A2aError::NoWorldSelected, -32603, "no world is selected; commit a genesis world first"),
        (A2aError::CallingConvention, -32603, "transition does not implement the invocation calling convention"),
        (A2aError::ExecutionFailed, -32603, "transition execution failed"),
        (A2aError::OutputNotObject, -32603, "transition output is not a JSON object"),
        (A2aError::DeadlineExceeded, -32603, "invocation exceeded its deadline"),
        (A2aError::OutcomeUnconfirmed, -32603, "invocation outcome is not confirmed; resend the same task id"),
        (A2aError::NotCommitted, -32603, "invocation was not committed; send a new task id"),
        (A2aError::HeadMoved, -32603, "world head moved during invocation; not committed; send a new task id"),
        (A2aError::Unavailable, -32603, "transition invocation is not available in this daemon"),
        (A2aError::TaskNotFound, -32001, "task not found"),
        (A2aError::TaskNotCancelable, -32002, "task cannot be canceled"),
        (A2aError::PushNotificationNotSupported, -32003, "push notifications are not supported"),
        (A2aError::UnsupportedOperation, -32004, "this operation is not supported"),
        (A2aError::ContentTypeNotSupported, -32005, "incompatible content types"),
    ];
    for (e, code, msg) in rows {
        let r = e.reply(&RpcId::from(4));
        assert_eq!(r.error_code(), Some(code), "{msg}");
        assert_eq!(r.error_message(), Some(msg));
        let http = r.into_http();
        assert_eq!(http.status, 200);
        assert_eq!(
            http.body_text(),
            format!(
                "{{\"error\":{{\"code\":{code},\"message\":{}}},\"id\":4,\"jsonrpc\":\"2.0\"}}\n",
                String::from_utf8(json::to_vec(msg)).unwrap()
            )
        );
    }
}

#[test]
fn effects_unrecorded_lists_refs_space_separated() {
    let r = effects_unrecorded(&RpcId::Null, &["sha256:01", "sha256:02", "sha256:03"]);
    assert_eq!(
        r.error_message(),
        Some(
            "effects were requested but the invocation was not confirmed committed; effect records: sha256:01 sha256:02 sha256:03"
        )
    );
}

#[test]
fn deadline_error_closes_the_connection() {
    let r = A2aError::DeadlineExceeded.reply(&RpcId::from(1));
    assert!(r.closes_connection());
    assert_eq!(r.into_http().header("Connection"), Some("close"));
    assert!(!A2aError::ExecutionFailed.reply(&RpcId::Null).closes_connection());
}

#[test]
fn generic_error_keeps_code_and_message() {
    let r = error(&RpcId::from("x"), -32099, "custom");
    assert_eq!(
        String::from_utf8(r.body()).unwrap(),
        "{\"error\":{\"code\":-32099,\"message\":\"custom\"},\"id\":\"x\",\"jsonrpc\":\"2.0\"}\n"
    );
}

#[test]
fn a_refusal_carries_data_for_0_3_and_1_0_and_for_the_seed_only_its_32602s() {
    let why = Why::parameter("message.role", "required: ROLE_USER").with("taskId", "t-1");
    let refused = A2aError::InvalidParams.because(why);
    // The seed's tasks/send: its table's code and message, and why for a -32602 ...
    let seed = refused.reply(&RpcId::from(1), Flavor::Legacy01);
    assert_eq!((seed.error_code(), seed.error_message()), (Some(-32602), Some("invalid params")));
    assert_eq!(seed.error_data(), Some(refused.data()).as_ref());
    // ... and the table's reply alone for the others, whose causes go to the daemon's log.
    let failed = A2aError::ExecutionFailed.because(Why::new("the run failed"));
    assert_eq!(failed.reply(&RpcId::from(1), Flavor::Legacy01), A2aError::ExecutionFailed.reply(&RpcId::from(1)));
    let r = refused.reply(&RpcId::from(1), Flavor::V10);
    assert_eq!(
        String::from_utf8(r.body()).unwrap(),
        concat!(
            r#"{"error":{"code":-32602,"data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"a2a-protocol.org","#,
            r#""metadata":{"detail":"required: ROLE_USER","parameter":"message.role","taskId":"t-1"},"reason":"INVALID_PARAMS"},"#,
            r#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"description":"required: ROLE_USER","field":"message.role"}]}],"#,
            r#""message":"invalid params"},"id":1,"jsonrpc":"2.0"}"#,
            "\n"
        )
    );
    assert_eq!(refused.reply(&RpcId::from(1), Flavor::V03), r);
    // The deadline still closes the connection when it carries data.
    let late = A2aError::DeadlineExceeded.because(Why::new("resend the same task id"));
    assert!(late.reply(&RpcId::Null, Flavor::V10).closes_connection());
    assert_eq!(late.data()[0]["reason"], "INTERNAL_ERROR");
}

fn skill(id: &str, title: &str) -> ToolView {
    ToolView {
        id: id.into(),
        title: title.into(),
        description: format!("{title}."),
        input_schema: json!({}),
        output_schema: None,
    }
}

#[test]
fn the_card_names_json_rpc_at_1_0_first_then_0_3_and_keeps_the_0_3_fields() {
    let skills = [skill("ailang-read", "Read (sandboxed)"), skill("tools.echo", "Echo")];
    let input = CardInput {
        base_url: "http://127.0.0.1:7644",
        name: "ailang-worldd",
        description: "World daemon",
        version: "0.1.0",
        skills: &skills,
    };
    let r = agent_card_reply(input);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    let url = "http://127.0.0.1:7644/a2a/";
    let bearer = json!({
        "type": "http", "scheme": "bearer", "bearerFormat": "64-hex session credential",
        "description": "A session credential minted with `worldd session mint`",
        "httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "64-hex session credential",
            "description": "A session credential minted with `worldd session mint`"},
    });
    let want = json!({
        "name": "ailang-worldd", "description": "World daemon", "version": "0.1.0",
        "url": url, "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": url, "transport": "JSONRPC"}],
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "capabilities": {"streaming": true, "pushNotifications": false, "stateTransitionHistory": false, "extendedAgentCard": true},
        "supportsAuthenticatedExtendedCard": true,
        "securitySchemes": {"bearer": bearer},
        "security": [{"bearer": []}],
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["application/json"], "defaultOutputModes": ["application/json"],
        "skills": [
            {"id": "ailang-read", "name": "Read (sandboxed)", "description": "Read (sandboxed).", "tags": [], "examples": []},
            {"id": "tools.echo", "name": "Echo", "description": "Echo.", "tags": [], "examples": []},
        ],
    });
    assert_eq!(serde_json::from_slice::<Value>(&r.body).unwrap(), want);
    // Keys sorted as Go writes a map, one line.
    assert!(r.body_text().starts_with(r#"{"additionalInterfaces":"#) && r.body_text().ends_with("}\n"));
}

#[test]
fn card_errors_are_rest_envelopes() {
    let u = card_unavailable();
    assert_eq!((u.class, u.status()), (RestClass::ProjectionUnavailable, 503));
    let d = card_deadline_exceeded();
    assert_eq!((d.class, d.status()), (RestClass::ProjectionDeadlineExceeded, 504));
}

#[test]
fn body_limit_is_one_mebibyte() {
    assert_eq!(A2A_BODY_MAX, 1_048_576);
    let r = body_too_large();
    assert_eq!(r.error_code(), Some(-32600));
    assert_eq!(r.jsonrpc_id(), &RpcId::Null);
}

#[test]
fn deep_nesting_does_not_panic() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(refusal(&deep).error_code(), Some(-32600));
    let deep_params = tasks_send(&format!(
        r#"{{"id":"t","metadata":{{"skill_id":"s"}},"message":{{"parts":[{{"type":"data","data":{{"a":{}{}}}}}]}}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    ));
    assert_eq!(refusal(&deep_params).error_code(), Some(-32602));
}

proptest! {
    #[test]
    fn parse_never_panics_on_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..512)) {
        match parse(&body) {
            Ok(_) => {}
            Err(r) => { let _ = r.into_http(); }
        }
    }

    #[test]
    fn parse_never_panics_on_near_valid_requests(
        method in prop_oneof![Just("tasks/send"), Just("message/send"), Just("SendMessage"), Just("tasks/get"), Just("GetTask")],
        id in "[ -~]{0,12}",
        skill in prop_oneof![Just("\"s\"".to_owned()), Just("5".to_owned()), Just("null".to_owned())],
        data in prop_oneof![Just("{}".to_owned()), Just("[]".to_owned()), Just("\"x\"".to_owned())],
        tag in prop_oneof![Just("type"), Just("kind"), Just("x")],
    ) {
        let id_json = serde_json::to_string(&id).unwrap();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id_json},"method":"{method}","params":{{"id":{id_json},"metadata":{{"skill_id":{skill}}},"message":{{"messageId":{id_json},"parts":[{{"{tag}":"data","data":{data}}}]}}}}}}"#
        );
        match parse(body.as_bytes()) {
            Ok(req) => prop_assert_eq!(req.jsonrpc_id, RpcId::String(id)),
            Err(r) => prop_assert!(r.error_code().is_some()),
        }
    }
}

#[test]
fn a_message_on_a_task_naming_no_skill_whose_data_is_an_approval_word_is_an_answer() {
    let bare = |message: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{message}}}}}"#)
    };
    let answer = |data: &str| {
        bare(&format!(r#"{{"messageId":"m2","taskId":"t1","role":"ROLE_USER","parts":[{{"data":{data}}}]}}"#))
    };
    for (word, want) in ApprovalWord::ALL {
        let req = parse_str(&answer(&format!(r#"{{"approval":"{word}"}}"#))).unwrap();
        let A2aKind::Answer(a) = req.kind else { panic!("{word}: not an answer") };
        assert_eq!((a.task_id.as_str(), a.word, a.message_id.as_deref()), ("t1", want, Some("m2")));
    }
    assert_refused(&answer(r#"{"approval":"maybe"}"#), -32602, Some("message.parts[0].data.approval"));
    // Other data, or no task id: a call, which needs its skill.
    assert_refused(&answer(r#"{"approval":"approve","more":1}"#), -32602, Some("metadata.skill_id"));
    let no_task = bare(r#"{"messageId":"m2","role":"ROLE_USER","parts":[{"data":{"approval":"approve"}}]}"#);
    assert_refused(&no_task, -32602, Some("metadata.skill_id"));
    // A call that names its skill is a call, whatever its data.
    let call =
        send10(r#"{"messageId":"m2","taskId":"t1","role":"ROLE_USER","parts":[{"data":{"approval":"approve"}}]}"#);
    assert!(matches!(parse_str(&call).unwrap().kind, A2aKind::Send(_)));
}

#[test]
fn a_tasks_send_naming_no_skill_whose_data_is_an_approval_word_continues_its_task() {
    let answer = |data: &str| {
        tasks_send(&format!(
            r#"{{"id":"write-1","message":{{"role":"user","parts":[{{"type":"data","data":{data}}}]}}}}"#
        ))
    };
    for (word, want) in ApprovalWord::ALL {
        let req = parse_str(&answer(&format!(r#"{{"approval":"{word}"}}"#))).unwrap();
        assert_eq!(req.flavor, Flavor::Legacy01);
        let A2aKind::Answer(a) = req.kind else { panic!("{word}: not an answer") };
        assert_eq!((a.task_id.as_str(), a.word), ("write-1", want));
    }
    // A word it does not know: the seed's `invalid params`, saying why.
    let detail = assert_refused(&answer(r#"{"approval":"maybe"}"#), -32602, Some("message.parts[0].data.approval"));
    assert!(detail.contains(r#""approve", "approve-for-session", "deny""#), "{detail}");
    assert_eq!(refusal(&answer(r#"{"approval":"maybe"}"#)).error_message(), Some("invalid params"));
    // Anything else naming no skill is the seed's `invalid params`, saying the skill is missing.
    for data in [r#"{"approval":"approve","more":1}"#, r#"{"path":"a"}"#] {
        let detail = assert_refused(&answer(data), -32602, Some("metadata"));
        assert!(detail.contains("metadata.skill_id is required"), "{data}: {detail}");
    }
    // A send that names its skill is a call, whatever its data.
    let call = tasks_send(
        r#"{"id":"t1","metadata":{"skill_id":"s"},"message":{"role":"user","parts":[{"type":"data","data":{"approval":"approve"}}]}}"#,
    );
    assert!(matches!(parse_str(&call).unwrap().kind, A2aKind::Send(_)));
}

#[test]
fn return_immediately_is_read_from_the_configuration_and_must_be_a_boolean() {
    let send = |configuration: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"configuration":{configuration},"metadata":{{"skill_id":"s"}},"message":{{"messageId":"m-1","role":"ROLE_USER","parts":[{{"data":{{}}}}]}}}}}}"#
        )
    };
    for (configuration, wanted) in
        [(r#"{"returnImmediately":true}"#, true), ("{}", false), (r#"{"returnImmediately":null}"#, false)]
    {
        match parse_str(&send(configuration)).unwrap().kind {
            A2aKind::Send(s) => assert_eq!(s.return_immediately, wanted, "{configuration}"),
            other => panic!("{configuration}: {other:?}"),
        }
    }
    assert_refused(&send(r#"{"returnImmediately":"yes"}"#), -32602, Some("configuration.returnImmediately"));
}

#[test]
fn an_a2a_version_not_served_is_refused_with_its_own_error_and_absent_means_0_3() {
    for served in [None, Some(&b""[..]), Some(b"1.0"), Some(b" 1.0 "), Some(b"0.3"), Some(b"1.0.2")] {
        assert!(version_served(served).is_ok(), "{:?}", served.map(String::from_utf8_lossy));
    }
    for refused in [&b"2.0"[..], b"1.1", b"0.2", b"latest", b"1"] {
        let r = version_served(Some(refused)).unwrap_err();
        assert_eq!(r.error.code(), -32009);
        assert_eq!(r.why.parameter.as_deref(), Some("A2A-Version"));
        assert!(r.why.detail.contains("0.3, 1.0"), "{:?}", r.why);
    }
}
