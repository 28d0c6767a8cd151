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

#[test]
fn seed_tasks_send_parses() {
    let req = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"id":"read-1","metadata":{"skill_id":"ailang-read"},"message":{"role":"user","parts":[{"type":"data","data":{"path":"hello.ail"}}]}}}"#).unwrap();
    assert_eq!(
        req,
        A2aRequest {
            jsonrpc_id: RpcId::from(1),
            flavor: Flavor::Legacy01,
            kind: A2aKind::Send {
                task_id: "read-1".into(),
                skill_id: "ailang-read".into(),
                arguments: json!({"path": "hello.ail"}),
                transition_fn: None,
                context_id: None,
            },
        }
    );
}

#[test]
fn transition_fn_pin_is_carried() {
    let body = tasks_send(&format!(
        r#"{{"id":"t","metadata":{{"skill_id":"s","transition_fn":"{PIN}"}},"message":{{"parts":[{{"type":"data","data":{{}}}}]}}}}"#
    ));
    let req = parse_str(&body).unwrap();
    let A2aKind::Send { transition_fn, .. } = req.kind else { panic!() };
    assert_eq!(transition_fn.as_deref(), Some(PIN));
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
    for m in ["tasks/cancel", "tasks/sendSubscribe", "message/stream", "CancelTask", ""] {
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
const SDK_03: &str = r#"{"method":"message/send","params":{"configuration":{"blocking":true},"message":{"kind":"message","messageId":"5f0c6a7e-2a3b-4c1d-9e8f-0a1b2c3d4e5f","parts":[{"data":{"message":"hi"},"kind":"data"}],"role":"agent"},"metadata":{"skill_id":"tools.echo"}},"id":"9d1e","jsonrpc":"2.0"}"#;

#[test]
fn message_send_from_the_sdk_parses_as_0_3() {
    let req = parse_str(SDK_03).unwrap();
    assert_eq!(req.flavor, Flavor::V03);
    assert_eq!(req.jsonrpc_id, RpcId::from("9d1e"));
    assert_eq!(
        req.kind,
        A2aKind::Send {
            task_id: "5f0c6a7e-2a3b-4c1d-9e8f-0a1b2c3d4e5f".into(),
            skill_id: "tools.echo".into(),
            arguments: json!({"message": "hi"}),
            transition_fn: None,
            context_id: None,
        }
    );
}

#[test]
fn message_send_prefers_task_id_and_reads_message_metadata() {
    let req = parse_str(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"message":{{"kind":"message","messageId":"m1","taskId":"task-9","contextId":"ctx","role":"user","metadata":{{"skill_id":"s","transition_fn":"{PIN}"}},"parts":[{{"kind":"data","data":{{"a":1}}}}]}}}}}}"#
    ))
    .unwrap();
    assert_eq!(
        req.kind,
        A2aKind::Send {
            task_id: "task-9".into(),
            skill_id: "s".into(),
            arguments: json!({"a": 1}),
            transition_fn: Some(PIN.into()),
            context_id: Some("ctx".into()),
        }
    );
}

#[test]
fn params_metadata_wins_over_message_metadata() {
    let req = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"metadata":{"skill_id":"outer"},"message":{"messageId":"m1","metadata":{"skill_id":"inner"},"parts":[{"kind":"data","data":{}}]}}}"#).unwrap();
    let A2aKind::Send { skill_id, .. } = req.kind else { panic!() };
    assert_eq!(skill_id, "outer");
}

#[test]
fn message_id_outside_the_task_id_grammar_is_refused() {
    assert_invalid_params(
        r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"metadata":{"skill_id":"s"},"message":{"messageId":"has space","parts":[{"kind":"data","data":{}}]}}}"#,
    );
    assert_invalid_params(
        r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"metadata":{"skill_id":"s"},"message":{"messageId":"ok","taskId":"bad/id","parts":[{"kind":"data","data":{}}]}}}"#,
    );
}

#[test]
fn message_send_shape_errors_are_invalid_params() {
    for message in [
        r#"{"parts":[{"kind":"data","data":{}}]}"#,
        r#"{"messageId":"m","kind":"task","parts":[{"kind":"data","data":{}}]}"#,
        r#"{"messageId":"m","parts":[{"kind":"text","text":"hi"}]}"#,
        r#"{"messageId":"m","parts":[{"type":"data","data":{}}]}"#,
        r#"{"messageId":"m","contextId":5,"parts":[{"kind":"data","data":{}}]}"#,
    ] {
        assert_invalid_params(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{{"metadata":{{"skill_id":"s"}},"message":{message}}}}}"#
        ));
    }
    assert_invalid_params(
        r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","parts":[{"kind":"data","data":{}}]}}}"#,
    );
}

/// What a 1.0 client sends (`SendMessage`, proto-JSON parts).
const SDK_10: &str = r#"{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"data":{"message":"hi"}}]},"configuration":{},"metadata":{"skill_id":"tools.echo"}}}"#;

#[test]
fn send_message_parses_as_1_0() {
    let req = parse_str(SDK_10).unwrap();
    assert_eq!(req.flavor, Flavor::V10);
    assert_eq!(
        req.kind,
        A2aKind::Send {
            task_id: "m-1".into(),
            skill_id: "tools.echo".into(),
            arguments: json!({"message": "hi"}),
            transition_fn: None,
            context_id: None,
        }
    );
}

#[test]
fn send_message_parts_must_be_one_data_object() {
    for part in [r#"{"text":"hi"}"#, r#"{"data":{"a":1},"text":"hi"}"#, r#"{"data":"s"}"#, r#"{"url":"http://x"}"#] {
        assert_invalid_params(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"metadata":{{"skill_id":"s"}},"message":{{"messageId":"m","role":"ROLE_USER","parts":[{part}]}}}}}}"#
        ));
    }
}

#[test]
fn get_methods_take_an_id() {
    let r = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"read-1","historyLength":0}}"#)
        .unwrap();
    assert_eq!((r.flavor, r.kind), (Flavor::V03, A2aKind::Get { task_id: "read-1".into() }));
    let r = parse_str(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"read-1"}}"#).unwrap();
    assert_eq!((r.flavor, r.kind), (Flavor::V10, A2aKind::Get { task_id: "read-1".into() }));
    assert_invalid_params(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}"#);
    assert_invalid_params(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get"}"#);
}

#[test]
fn missing_id_is_answered_as_null() {
    let r = parse_str(r#"{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"x"}}"#).unwrap();
    assert_eq!(r.jsonrpc_id, RpcId::Null);
}

fn done<'a>(output: &'a Value) -> CompletedTask<'a> {
    CompletedTask {
        task_id: "read-1",
        context_id: None,
        output,
        invocation_id: "a2a:ep1:read-1",
        world_ref: "sha256:abc",
        entry_index: 3,
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
fn every_error_row_has_its_code_and_exact_message() {
    let rows: [(A2aError, i64, &str); 18] = [
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
        "capabilities": {"streaming": false, "pushNotifications": false, "stateTransitionHistory": false},
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
