//! The Tasks extension (`io.modelcontextprotocol/tasks`) in the modern era,
//! and its absence from the legacy one.

use super::modern::{CODE_HEADER_MISMATCH, CODE_MISSING_CAPABILITY};
use super::modern_tests::{
    SERVER, answer, assert_error, call_with, legacy_result, meta, modern_call, modern_headers, run, surface,
};
use super::tasks::{
    EXTENSION_TASKS, INPUT_RESPONSES_BYTES_MAX, INPUT_RESPONSES_DEPTH_MAX, MSG_ANSWER_UNFIT, TASK_ID_MAX_BYTES,
    TIMESTAMP_SECS_MAX,
};
use super::*;
use proptest::prelude::*;
use serde_json::json;

const TASK: &str = "task-7f3a";

/// Client capabilities that declare the extension.
fn declaring() -> Value {
    json!({"extensions": {EXTENSION_TASKS: {}}})
}

/// A modern `method` request whose `_meta` declares `capabilities`.
fn request_with(capabilities: Value, id: Value, method: &str, params: Value) -> String {
    let mut params = params;
    params["_meta"] = meta();
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A `tasks/*` request from a declaring client, with the headers a stock client sends.
fn task_plan(method: &'static str, params: Value) -> Result<McpPlan, HttpReply> {
    run(&modern_headers(method, Some(TASK)), &request_with(declaring(), json!(9), method, params))
}

fn reply_json(r: &HttpReply) -> (u16, Value) {
    assert_eq!(r.header("Content-Type"), Some("application/json"), "{}", r.body_text());
    (r.status, serde_json::from_slice(&r.body).unwrap())
}

/// The reply to `tasks/<method>` of [`TASK`] when the server answers `outcome`.
fn task_reply(method: &'static str, params: Value, outcome: TaskOutcome) -> (u16, Value) {
    let p = task_plan(method, params).unwrap();
    assert!(p.task().is_some(), "a task step");
    reply_json(&finish_task(p, outcome))
}

fn get(outcome: TaskOutcome) -> (u16, Value) {
    task_reply("tasks/get", json!({"taskId": TASK}), outcome)
}

fn cancel(outcome: TaskOutcome) -> (u16, Value) {
    task_reply("tasks/cancel", json!({"taskId": TASK}), outcome)
}

fn update(outcome: TaskOutcome) -> (u16, Value) {
    task_reply("tasks/update", json!({"taskId": TASK, "inputResponses": {"k": {"action": "accept"}}}), outcome)
}

/// 2026-12-07T10:30:00Z and ten minutes later.
const CREATED: u64 = 1_796_639_400;
const UPDATED: u64 = CREATED + 600;

fn view(state: TaskState) -> TaskView {
    TaskView {
        task_id: TASK.into(),
        state,
        status_message: None,
        created_at: CREATED,
        last_updated_at: UPDATED,
        ttl_ms: Some(3_600_000),
        poll_interval_ms: 500,
    }
}

fn found(state: TaskState) -> TaskOutcome {
    Ok(TaskAnswer::Found(view(state)))
}

// ---- capabilities ----

#[test]
fn discover_advertises_the_tasks_extension_as_an_empty_object_and_initialize_does_not() {
    let h = modern_headers("server/discover", None);
    let (_, body) = answer(&h, &request_with(json!({}), json!(1), "server/discover", json!({})));
    assert_eq!(body["result"]["capabilities"]["extensions"], json!({"io.modelcontextprotocol/tasks": {}}));
    let init =
        legacy_result(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#);
    assert_eq!(init["capabilities"], json!({"tools": {"listChanged": false}}), "the legacy era has no extensions");
}

#[test]
fn a_call_accepts_a_task_only_when_its_own_capabilities_declare_the_extension() {
    let accepts = |caps: Value| {
        let p = call_with(caps, json!({})).unwrap();
        let [Step::Call(c)] = p.steps() else { panic!("one call") };
        c.accepts_task
    };
    assert!(accepts(declaring()));
    assert!(accepts(json!({"elicitation": {}, "extensions": {EXTENSION_TASKS: {}, "other/ext": {}}})));
    for caps in [
        json!({}),
        json!({"extensions": {}}),
        json!({"extensions": {"io.modelcontextprotocol/other": {}}}),
        json!({"extensions": {EXTENSION_TASKS: true}}),
        json!({"extensions": {EXTENSION_TASKS: null}}),
        json!({"extensions": [EXTENSION_TASKS]}),
        json!({"tasks": {}}),
    ] {
        assert!(!accepts(caps.clone()), "{caps}");
    }
}

#[test]
fn a_legacy_call_never_accepts_a_task_even_with_the_extension_in_its_meta() {
    let h = McpHeaders {
        content_type: Some("application/json"),
        accept: Some("application/json, text/event-stream"),
        protocol_version: Some("2025-11-25"),
        ..Default::default()
    };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "tools_decho",
        "arguments": {"message": "hi"}, "_meta": {"io.modelcontextprotocol/clientCapabilities": declaring()}}});
    let p = plan(&h, body.to_string().as_bytes(), &surface(), &SERVER).unwrap();
    assert_eq!(p.era(), Era::Legacy);
    let [Step::Call(c)] = p.steps() else { panic!("one call") };
    assert!(!c.accepts_task);
    let r = finish(p, vec![Ok(CallAnswer::Task(view(TaskState::Working)))]);
    assert!(r.body_text().contains(r#""code":-32603"#), "{}", r.body_text());
    assert!(!r.body_text().contains(r#""resultType""#), "{}", r.body_text());
}

// ---- CreateTaskResult ----

/// The reply to a declaring `tools/call` the server answers with `answer`.
fn declaring_call(answer: CallAnswer) -> (u16, Value) {
    let p = call_with(declaring(), json!({})).unwrap();
    reply_json(&finish(p, vec![Ok(answer)]))
}

#[test]
fn a_task_answer_is_a_create_task_result_with_iso_timestamps_ttl_poll_interval_and_server_identity() {
    let mut v = view(TaskState::Working);
    v.status_message = Some("running".into());
    let (status, body) = declaring_call(CallAnswer::Task(v));
    assert_eq!(status, 200);
    assert_eq!(body["id"], 7);
    assert_eq!(
        body["result"],
        json!({
            "resultType": "task",
            "taskId": TASK,
            "status": "working",
            "statusMessage": "running",
            "createdAt": "2026-12-07T10:30:00Z",
            "lastUpdatedAt": "2026-12-07T10:40:00Z",
            "ttlMs": 3_600_000,
            "pollIntervalMs": 500,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "worldd", "version": "0.1.0"}},
        })
    );
}

#[test]
fn an_unlimited_ttl_is_sent_as_null_and_no_status_payload_goes_in_a_create_task_result() {
    let mut v = view(TaskState::Completed { output: json!({"ok": true}) });
    v.ttl_ms = None;
    let (_, body) = declaring_call(CallAnswer::Task(v));
    let r = &body["result"];
    assert_eq!((&r["ttlMs"], &r["status"]), (&Value::Null, &json!("completed")));
    assert!(r.as_object().unwrap().contains_key("ttlMs"), "ttlMs is required, null or not");
    assert!(r.get("result").is_none() && r.get("statusMessage").is_none(), "{r}");
}

#[test]
fn a_task_answer_to_a_call_that_did_not_declare_the_extension_is_400_32021_naming_it() {
    let p = call_with(json!({}), json!({})).unwrap();
    let (status, body) = reply_json(&finish(p, vec![Ok(CallAnswer::Task(view(TaskState::Working)))]));
    let e = assert_error((status, body), 400, json!(7), CODE_MISSING_CAPABILITY);
    assert_eq!(e["message"], "Missing required client capability");
    assert_eq!(e["data"], json!({"requiredCapabilities": {"extensions": {EXTENSION_TASKS: {}}}}));
}

#[test]
fn timestamps_are_iso_8601_utc_and_clamped_to_the_last_four_digit_year() {
    let mut v = view(TaskState::Working);
    (v.created_at, v.last_updated_at) = (0, u64::MAX);
    let (_, body) = declaring_call(CallAnswer::Task(v));
    assert_eq!(body["result"]["createdAt"], "1970-01-01T00:00:00Z");
    assert_eq!(body["result"]["lastUpdatedAt"], "9999-12-31T23:59:59Z");
    assert_eq!(crate::a2a::iso8601(TIMESTAMP_SECS_MAX), "9999-12-31T23:59:59Z");
}

// ---- tasks/* requests ----

#[test]
fn tasks_get_update_and_cancel_are_planned_as_task_steps_naming_the_task() {
    let get = task_plan("tasks/get", json!({"taskId": TASK})).unwrap();
    let expected = TaskRequest { jsonrpc_id: RpcId::Number("9".into()), task_id: TASK.into(), method: TaskMethod::Get };
    assert_eq!(get.task(), Some(&expected));
    assert_eq!((get.call_count(), get.envelope_id()), (0, RpcId::Number("9".into())));
    let cancel = task_plan("tasks/cancel", json!({"taskId": TASK})).unwrap();
    assert_eq!(cancel.task().map(|t| &t.method), Some(&TaskMethod::Cancel));
    let responses = json!({"name": {"action": "accept", "content": {"name": "Luca"}}});
    let update = task_plan("tasks/update", json!({"taskId": TASK, "inputResponses": responses})).unwrap();
    let Some(TaskMethod::Update { input_responses }) = update.task().map(|t| &t.method) else { panic!("update") };
    assert_eq!(Value::Object(input_responses.clone()), responses);
    assert_eq!(update.task().unwrap().method.name(), "tasks/update");
}

#[test]
fn a_task_id_missing_empty_too_long_or_not_a_string_is_400_32602() {
    let long = "x".repeat(TASK_ID_MAX_BYTES + 1);
    let cases = [
        (json!({}), "invalid params: taskId is required"),
        (json!({"taskId": ""}), "invalid params: taskId must not be empty"),
        (json!({"taskId": long}), "invalid params: taskId is longer than 256 bytes"),
        (json!({"taskId": 7}), "invalid params: taskId must be a string"),
        (json!({"taskId": {"id": TASK}}), "invalid params: taskId must be a string"),
    ];
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        for (params, message) in &cases {
            let mut params = params.clone();
            params["inputResponses"] = json!({});
            let body = request_with(declaring(), json!(3), method, params.clone());
            // A string taskId is mirrored in Mcp-Name; otherwise none is sent.
            let name = params["taskId"].as_str().map(|s| &*Box::leak(s.to_owned().into_boxed_str()));
            let h = McpHeaders { mcp_method: Some(method.as_bytes()), ..modern_headers("", name) };
            let e = assert_error(answer(&h, &body), 400, json!(3), -32602);
            assert_eq!(e["message"], *message, "{method} {params}");
        }
    }
    let longest = "x".repeat(TASK_ID_MAX_BYTES);
    let body = request_with(declaring(), json!(3), "tasks/get", json!({"taskId": longest}));
    let h = modern_headers("tasks/get", Some(Box::leak(longest.into_boxed_str())));
    assert!(run(&h, &body).unwrap().task().is_some(), "exactly the bound is accepted");
}

#[test]
fn mcp_name_must_mirror_the_task_id_and_is_decoded_from_base64() {
    let body = request_with(declaring(), json!(4), "tasks/get", json!({"taskId": "t-1"}));
    assert!(run(&modern_headers("tasks/get", Some("t-1")), &body).unwrap().task().is_some());
    // base64("t-1")
    assert!(run(&modern_headers("tasks/get", Some("=?base64?dC0x?=")), &body).unwrap().task().is_some());
    for bad in [None, Some("t-2"), Some("T-1"), Some("tools_decho"), Some("t-1, t-1")] {
        let e = assert_error(answer(&modern_headers("tasks/get", bad), &body), 400, json!(4), CODE_HEADER_MISMATCH);
        assert!(e["message"].as_str().unwrap().starts_with("Header mismatch: "), "{bad:?}: {e}");
    }
    let h = McpHeaders { mcp_method: Some(b"tasks/cancel"), ..modern_headers("tasks/get", Some("t-1")) };
    assert_error(answer(&h, &body), 400, json!(4), CODE_HEADER_MISMATCH);
}

#[test]
fn a_tasks_request_whose_capabilities_lack_the_extension_is_400_32021_with_the_required_capability() {
    for caps in [json!({}), json!({"extensions": {}}), json!({"extensions": {EXTENSION_TASKS: "yes"}})] {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let body = request_with(caps.clone(), json!("c"), method, json!({"taskId": TASK, "inputResponses": {}}));
            let h = McpHeaders { mcp_method: Some(method.as_bytes()), ..modern_headers("", Some(TASK)) };
            let e = assert_error(answer(&h, &body), 400, json!("c"), CODE_MISSING_CAPABILITY);
            assert_eq!(e["message"], "Missing required client capability");
            assert_eq!(
                e["data"],
                json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
            );
        }
    }
}

#[test]
fn tasks_update_needs_an_input_responses_object_bounded_in_depth_and_size() {
    let refused = |responses: Option<Value>| {
        let mut params = json!({"taskId": TASK});
        if let Some(r) = responses {
            params["inputResponses"] = r;
        }
        let body = request_with(declaring(), json!(5), "tasks/update", params);
        let e = assert_error(answer(&modern_headers("tasks/update", Some(TASK)), &body), 400, json!(5), -32602);
        e["message"].as_str().unwrap().to_owned()
    };
    assert_eq!(refused(None), "invalid params: inputResponses is required");
    for not_object in [json!([]), json!("x"), json!(null), json!(1)] {
        assert_eq!(refused(Some(not_object)), "invalid params: inputResponses must be a JSON object");
    }
    let nest = |levels: usize| (0..levels).fold(json!(1), |inner, _| json!([inner]));
    let deepest = json!({"k": nest(INPUT_RESPONSES_DEPTH_MAX - 1)});
    assert!(task_plan("tasks/update", json!({"taskId": TASK, "inputResponses": deepest})).unwrap().task().is_some());
    let too_deep = json!({"k": nest(INPUT_RESPONSES_DEPTH_MAX)});
    assert_eq!(refused(Some(too_deep)), "invalid params: inputResponses nests deeper than 32 levels");
    let too_big = json!({"k": "x".repeat(INPUT_RESPONSES_BYTES_MAX)});
    assert_eq!(
        refused(Some(too_big)),
        format!("invalid params: inputResponses is larger than {INPUT_RESPONSES_BYTES_MAX} bytes")
    );
    let just_fits = json!({"k": "x".repeat(INPUT_RESPONSES_BYTES_MAX - r#"{"k":""}"#.len())});
    assert!(task_plan("tasks/update", json!({"taskId": TASK, "inputResponses": just_fits})).unwrap().task().is_some());
}

#[test]
fn tasks_methods_are_method_not_found_in_the_legacy_era() {
    let h = McpHeaders {
        content_type: Some("application/json"),
        accept: Some("application/json, text/event-stream"),
        protocol_version: Some("2025-11-25"),
        ..Default::default()
    };
    for method in ["tasks/get", "tasks/update", "tasks/cancel", "tasks/list", "tasks/result"] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"taskId": TASK}});
        let p = plan(&h, body.to_string().as_bytes(), &surface(), &SERVER).unwrap();
        assert!(p.task().is_none(), "{method}");
        let text = finish(p, vec![]).body_text();
        assert!(text.contains(&format!(r#""code":-32601,"message":"method not found: \"{method}\"""#)), "{text}");
    }
}

#[test]
fn the_old_tasks_methods_the_extension_dropped_are_404_in_the_modern_era() {
    for method in ["tasks/list", "tasks/result"] {
        let body = request_with(declaring(), json!(1), method, json!({"taskId": TASK}));
        let h = McpHeaders { mcp_method: Some(method.as_bytes()), ..modern_headers("", None) };
        assert_error(answer(&h, &body), 404, json!(1), -32601);
    }
}

// ---- tasks/get ----

#[test]
fn tasks_get_of_a_working_task_is_complete_with_the_task_fields_and_server_identity() {
    let (status, body) = get(found(TaskState::Working));
    assert_eq!(status, 200);
    assert_eq!(body["id"], 9);
    assert_eq!(
        body["result"],
        json!({
            "resultType": "complete",
            "taskId": TASK,
            "status": "working",
            "createdAt": "2026-12-07T10:30:00Z",
            "lastUpdatedAt": "2026-12-07T10:40:00Z",
            "ttlMs": 3_600_000,
            "pollIntervalMs": 500,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "worldd", "version": "0.1.0"}},
        })
    );
}

#[test]
fn a_completed_tasks_result_is_exactly_what_the_synchronous_call_answers() {
    for output in [
        json!({"ok": true, "content": "x", "world": {"effects": [], "plan": null}}),
        json!({"ok": false, "refused": "path refused", "world": {"effects": [], "plan": "sha256:00"}}),
        json!({"world": {"effects": [{"id": "e1", "status": "denied", "record": "sha256:00"}], "plan": "sha256:11"}}),
    ] {
        let (_, sync) = modern_call(Ok(output.clone().into()));
        let (status, body) = get(found(TaskState::Completed { output: output.clone() }));
        assert_eq!(status, 200);
        let r = &body["result"];
        assert_eq!((&r["resultType"], &r["status"]), (&json!("complete"), &json!("completed")));
        assert_eq!(r["result"], sync["result"], "one rendering for both");
        assert_eq!(r["result"]["resultType"], "complete", "the stock client needs it inside too");
        assert_eq!(r["result"]["isError"], sync["result"]["isError"]);
        assert!(r.get("error").is_none() && r.get("inputRequests").is_none());
    }
    let (_, body) = get(found(TaskState::Completed { output: json!({"ok": false}) }));
    assert_eq!((&body["result"]["status"], &body["result"]["result"]["isError"]), (&json!("completed"), &json!(true)));
}

#[test]
fn a_completed_task_whose_output_is_not_an_object_is_failed_with_the_synchronous_error() {
    for (output, message) in [(Value::Null, MSG_NO_RESULT), (json!([1]), MSG_INVALID_RESULT)] {
        let (_, sync) = modern_call(Ok(output.clone().into()));
        let (status, body) = get(found(TaskState::Completed { output }));
        assert_eq!(status, 200);
        let r = &body["result"];
        assert_eq!((&r["status"], &r["statusMessage"]), (&json!("failed"), &json!(message)));
        assert_eq!(r["error"], sync["error"]);
        assert!(r.get("result").is_none());
    }
}

#[test]
fn a_failed_task_carries_the_json_rpc_error_and_a_status_message() {
    let failed = TaskState::Failed { code: -32603, message: "host callback timed out".into(), data: None };
    let (status, body) = get(found(failed.clone()));
    assert_eq!(status, 200);
    let r = &body["result"];
    assert_eq!((&r["resultType"], &r["status"]), (&json!("complete"), &json!("failed")));
    assert_eq!(r["error"], json!({"code": -32603, "message": "host callback timed out"}));
    assert_eq!(r["statusMessage"], "host callback timed out", "the error's message when none is given");
    let mut v = view(TaskState::Failed { code: -32000, message: "m".into(), data: Some(json!({"why": 1})) });
    v.status_message = Some("Tool execution failed".into());
    let (_, body) = get(Ok(TaskAnswer::Found(v)));
    assert_eq!(body["result"]["error"], json!({"code": -32000, "message": "m", "data": {"why": 1}}));
    assert_eq!(body["result"]["statusMessage"], "Tool execution failed");
    assert!(body["result"].get("result").is_none());
}

#[test]
fn a_cancelled_task_carries_no_payload_and_an_input_required_one_its_requests() {
    let mut v = view(TaskState::Cancelled);
    v.status_message = Some("cancelled by the client".into());
    let (_, body) = get(Ok(TaskAnswer::Found(v)));
    let r = &body["result"];
    assert_eq!((&r["status"], &r["statusMessage"]), (&json!("cancelled"), &json!("cancelled by the client")));
    for k in ["result", "error", "inputRequests"] {
        assert!(r.get(k).is_none(), "{k}");
    }
    let requests = json!({"name": {"method": "elicitation/create", "params": {"mode": "form", "message": "Name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}});
    let (_, body) = get(found(TaskState::InputRequired { input_requests: requests.clone() }));
    assert_eq!((&body["result"]["status"], &body["result"]["inputRequests"]), (&json!("input_required"), &requests));
}

// ---- acknowledgements and refusals ----

#[test]
fn update_and_cancel_are_acknowledged_with_result_type_complete_and_server_identity() {
    let ack = json!({"resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "worldd", "version": "0.1.0"}}});
    for (status, body) in [update(Ok(TaskAnswer::Acknowledged)), cancel(Ok(TaskAnswer::Acknowledged))] {
        assert_eq!(status, 200);
        assert_eq!((&body["id"], &body["result"]), (&json!(9), &ack));
    }
}

#[test]
fn an_unknown_task_is_400_32602_naming_what_failed() {
    for (reply, message) in [
        (get(Ok(TaskAnswer::NotFound)), "Failed to retrieve task: Task not found"),
        (update(Ok(TaskAnswer::NotFound)), "Failed to update task: Task not found"),
        (cancel(Ok(TaskAnswer::NotFound)), "Failed to cancel task: Task not found"),
    ] {
        let e = assert_error(reply, 400, json!(9), -32602);
        assert_eq!(e["message"], message);
        assert!(e.get("data").is_none());
    }
}

#[test]
fn cancelling_or_updating_an_ended_task_is_400_32602_naming_its_status() {
    for status in [TaskStatus::Completed, TaskStatus::Failed, TaskStatus::Cancelled] {
        let e = assert_error(cancel(Ok(TaskAnswer::Ended(status))), 400, json!(9), -32602);
        assert_eq!(e["message"], format!("Cannot cancel task: it already ended ({})", status.as_str()));
        let e = assert_error(update(Ok(TaskAnswer::Ended(status))), 400, json!(9), -32602);
        assert_eq!(e["message"], format!("Cannot update task: it already ended ({})", status.as_str()));
    }
}

#[test]
fn an_answer_that_does_not_fit_the_request_is_a_32603_not_a_wrong_reply() {
    let mut other = view(TaskState::Working);
    other.task_id = "someone-elses".into();
    for reply in [
        get(Ok(TaskAnswer::Acknowledged)),
        get(Ok(TaskAnswer::Ended(TaskStatus::Completed))),
        get(Ok(TaskAnswer::Found(other))),
        cancel(found(TaskState::Working)),
        update(found(TaskState::Working)),
        cancel(Ok(TaskAnswer::Ended(TaskStatus::Working))),
        update(Ok(TaskAnswer::Ended(TaskStatus::InputRequired))),
    ] {
        let e = assert_error(reply, 200, json!(9), -32603);
        assert_eq!(e["message"], MSG_ANSWER_UNFIT);
    }
}

#[test]
fn a_server_error_is_sent_with_its_code_data_and_the_status_its_code_has() {
    let expired =
        TaskAnswer::Error { code: -32602, message: "Failed to retrieve task: Task has expired".into(), data: None };
    let e = assert_error(get(Ok(expired)), 400, json!(9), -32602);
    assert_eq!(e["message"], "Failed to retrieve task: Task has expired");
    let busy =
        TaskAnswer::Error { code: -32603, message: "store unavailable".into(), data: Some(json!({"retry": true})) };
    let e = assert_error(cancel(Ok(busy)), 200, json!(9), -32603);
    assert_eq!(e["data"], json!({"retry": true}));
}

#[test]
fn a_host_failure_on_a_task_step_is_the_seed_envelope() {
    for f in [HostFailure::Failed, HostFailure::TimedOut, HostFailure::Canceled, HostFailure::CapacityExceeded] {
        let (status, body) = get(Err(f));
        assert_eq!(status, 200);
        assert_eq!(body, json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32603, "message": f.message()}}));
    }
}

#[test]
fn finish_and_finish_task_each_refuse_the_others_plan_without_a_wrong_reply() {
    // Call outcomes cannot answer a task step.
    let p = task_plan("tasks/get", json!({"taskId": TASK})).unwrap();
    let (status, body) = reply_json(&finish(p, vec![Ok(json!({"ok": true}).into())]));
    assert_eq!((status, &body["error"]["message"]), (200, &json!(HostFailure::Failed.message())));
    // A task answer cannot answer a call, and an answered plan keeps its answer.
    let p = call_with(declaring(), json!({})).unwrap();
    assert_eq!(reply_json(&finish_task(p, Ok(TaskAnswer::Acknowledged))).1["error"]["code"], -32603);
    let p = run(&modern_headers("tools/list", None), &request_with(declaring(), json!(2), "tools/list", json!({})));
    let (status, body) = reply_json(&finish_task(p.unwrap(), Ok(TaskAnswer::Acknowledged)));
    assert_eq!((status, &body["result"]["resultType"]), (200, &json!("complete")));
    assert!(body["result"]["tools"].is_array());
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(".{0,4}", inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_task_params_get_a_reply_without_panicking(
        method in prop_oneof![Just("tasks/get"), Just("tasks/update"), Just("tasks/cancel")],
        task_id in json_value(),
        responses in json_value(),
        declare in any::<bool>(),
    ) {
        let caps = if declare { declaring() } else { json!({}) };
        let body = request_with(caps, json!(1), method, json!({"taskId": task_id, "inputResponses": responses}));
        let name = task_id.as_str().map(|s| &*Box::leak(s.to_owned().into_boxed_str()));
        let h = McpHeaders { mcp_method: Some(method.as_bytes()), ..modern_headers("", name) };
        let reply = match run(&h, &body) {
            Ok(p) if p.task().is_some() => finish_task(p, Ok(TaskAnswer::Acknowledged)),
            Ok(p) => finish(p, vec![]),
            Err(r) => r,
        };
        prop_assert!(matches!(reply.status, 200 | 400), "{}", reply.status);
        prop_assert!(serde_json::from_slice::<Value>(&reply.body).is_ok());
    }
}
