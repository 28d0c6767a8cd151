//! `POST /a2a/` as A2A 1.0 (and 0.3 where it names the method) has it: what
//! the card offers is served and what it does not is refused with the spec's
//! code; every refusal of a 0.3/1.0 method says why in `error.data`;
//! `CancelTask`, `GetTask` with `historyLength`, `ListTasks`.

use crate::harness::*;
use serde_json::{Value, json};

const EXITS: &str = "import sys\nsys.stdin.read()\nsys.exit(3)\n";

fn lab() -> (Lab, String) {
    let lab = Lab::new(LabOptions { episodes: &["ep1"], ..Default::default() });
    std::fs::write(lab.worktree("ep1").join("hello.txt"), "hello from World\n").unwrap();
    let token = lab.mint("ep1", &["world.apply=world:100", "Workspace.Read=worktree:100"]);
    (lab, token)
}

/// One JSON-RPC call; the reply parsed.
fn rpc(lab: &Lab, token: &str, method: &str, params: Value) -> Value {
    let mut body = json!({"jsonrpc": "2.0", "id": 7, "method": method});
    if !params.is_null() {
        body["params"] = params;
    }
    a2a_json(&lab.a2a_raw(Some(token), &serde_json::to_vec(&body).unwrap()))
}

/// Asserts a refusal's code and its `error.data` (A2A 1.0 §9.5: an ErrorInfo,
/// then a BadRequest naming the parameter when one is at fault); returns
/// the ErrorInfo's metadata.
fn refused(v: &Value, code: i64, parameter: Option<&str>) -> Value {
    assert_eq!(v["error"]["code"], code, "{v}");
    let data = v["error"]["data"].as_array().unwrap_or_else(|| panic!("no data: {v}"));
    assert_eq!(data[0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo", "{v}");
    assert_eq!(data[0]["domain"], "a2a-protocol.org", "{v}");
    let metadata = data[0]["metadata"].clone();
    assert!(!metadata["detail"].as_str().unwrap().is_empty(), "{v}");
    match parameter {
        Some(p) => {
            assert_eq!(metadata["parameter"], p, "{v}");
            assert_eq!(data[1]["fieldViolations"][0]["field"], p, "{v}");
        }
        None => assert_eq!(data.len(), 1, "{v}"),
    }
    metadata
}

fn message10(id: &str, skill: &str, args: Value) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"data": args}]}, "metadata": {"skill_id": skill}})
}

fn message03(id: &str, skill: &str, args: Value) -> Value {
    json!({"message": {"kind": "message", "messageId": id, "role": "user", "parts": [{"kind": "data", "data": args}]},
           "metadata": {"skill_id": skill}})
}

#[test]
fn the_card_says_what_is_served_and_each_method_it_implies_answers_as_the_card_says() {
    let (lab, token) = lab();
    let card = lab.get_auth("/.well-known/agent-card.json", &token).json();
    let caps = &card["capabilities"];
    // Every interface the card names is the one endpoint, at the versions whose method names follow.
    let versions: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["protocolVersion"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["1.0", "0.3"]);
    rpc(&lab, &token, "SendMessage", message10("card-1", "tools.echo", json!({})));
    for (version, core) in [
        ("1.0", [("SendMessage", message10("card-2", "tools.echo", json!({}))), ("GetTask", json!({"id": "card-1"}))]),
        (
            "0.3",
            [("message/send", message03("card-3", "tools.echo", json!({}))), ("tasks/get", json!({"id": "card-1"}))],
        ),
    ] {
        for (m, params) in core {
            assert!(rpc(&lab, &token, m, params)["result"].is_object(), "{version} {m}");
        }
    }
    // ListTasks (1.0 only: 0.3 has no JSON-RPC tasks/list) and CancelTask answer in their own terms.
    assert!(rpc(&lab, &token, "ListTasks", json!({}))["result"]["tasks"].is_array());
    for m in ["CancelTask", "tasks/cancel"] {
        refused(&rpc(&lab, &token, m, json!({"id": "card-1"})), -32002, None);
    }
    // Streams are served: a call that ends within its request streams its
    // completed Task as the one event, and the stream closes; an ended task
    // has no stream to subscribe to (A2A 1.0 §9.4.6).
    assert_eq!((&caps["streaming"], &caps["pushNotifications"]), (&json!(true), &json!(false)));
    for (m, params, wrapped) in [
        ("SendStreamingMessage", message10("card-4", "tools.echo", json!({})), true),
        ("message/stream", message03("card-5", "tools.echo", json!({})), false),
    ] {
        let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": m, "params": params})).unwrap();
        let r = lab.a2a_raw(Some(&token), &body);
        assert_eq!((r.status, r.header("content-type")), (200, Some("text/event-stream")), "{m}");
        // The body as sent (chunked, to its last chunk): one event.
        let text = String::from_utf8(r.body.clone()).unwrap();
        assert_eq!(text.matches("data: ").count(), 1, "{m}: one event: {text:?}");
        assert!(text.ends_with("\r\n0\r\n\r\n"), "{m}: the stream closed: {text:?}");
        let data = text.split("data: ").nth(1).and_then(|e| e.split("\n\n").next()).unwrap();
        let event: Value = serde_json::from_str(data).unwrap();
        let task = if wrapped { &event["result"]["task"] } else { &event["result"] };
        assert_eq!(
            task["status"]["state"],
            json!(if wrapped { "TASK_STATE_COMPLETED" } else { "completed" }),
            "{m}: {event}"
        );
    }
    for (m, id) in [("SubscribeToTask", "card-4"), ("tasks/resubscribe", "card-5")] {
        let v = rpc(&lab, &token, m, json!({"id": id}));
        assert_eq!(v["error"]["message"], "this operation is not supported");
        assert!(refused(&v, -32004, None)["detail"].as_str().unwrap().contains("the task has ended"), "{v}");
    }
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
        let v = rpc(&lab, &token, m, json!({"taskId": "card-1", "id": "c"}));
        assert_eq!(v["error"]["message"], "push notifications are not supported");
        refused(&v, -32003, None);
    }
    // The extended card is declared, and it is the session's card itself.
    assert_eq!((&caps["extendedAgentCard"], &card["supportsAuthenticatedExtendedCard"]), (&json!(true), &json!(true)));
    for m in ["GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"] {
        assert_eq!(rpc(&lab, &token, m, Value::Null)["result"], card, "{m}");
    }
    let narrow = lab.mint("ep1", &["Workspace.Read=worktree:1"]);
    let skills = rpc(&lab, &narrow, "GetExtendedAgentCard", Value::Null)["result"]["skills"].clone();
    let ids: Vec<&str> = skills.as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert!(!ids.contains(&"tools.echo") && ids.contains(&"ailang-read"), "the session's own skills: {ids:?}");
    // Authentication still comes first, with the seed's bytes.
    let absent = "session credential is absent: send Authorization: Bearer <session-credential>";
    for m in ["CancelTask", "ListTasks", "GetExtendedAgentCard", "SendStreamingMessage"] {
        let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": m, "params": {}})).unwrap();
        assert_json_reply(&lab.a2a_raw(None, &body), 200, &a2a_error("null", -32001, absent));
    }
}

#[test]
fn bad_0_3_and_1_0_requests_are_refused_naming_the_parameter_and_journal_nothing() {
    let (lab, token) = lab();
    let log_len = lab.log_len();
    let journal = lab.journal_counts();
    let mut no_role = message10("v-1", "tools.echo", json!({}));
    no_role["message"].as_object_mut().unwrap().remove("role");
    let mut agent = message10("v-2", "tools.echo", json!({}));
    agent["message"]["role"] = json!("ROLE_AGENT");
    let mut no_role03 = message03("v-3", "tools.echo", json!({}));
    no_role03["message"].as_object_mut().unwrap().remove("role");
    let mut no_skill = message10("v-4", "tools.echo", json!({}));
    no_skill.as_object_mut().unwrap().remove("metadata");
    let mut two = message10("v-5", "tools.echo", json!({}));
    two["message"]["parts"] = json!([{"data": {}}, {"data": {}}]);
    let mut negative = message10("v-6", "tools.echo", json!({}));
    negative["configuration"] = json!({"historyLength": -1});
    let cases = [
        ("SendMessage", no_role, "message.role"),
        ("SendMessage", agent, "message.role"),
        ("message/send", no_role03, "message.role"),
        ("SendMessage", no_skill, "metadata.skill_id"),
        ("SendMessage", two, "message.parts"),
        ("SendMessage", negative, "configuration.historyLength"),
        ("SendMessage", json!({"message": "hi"}), "message"),
        ("GetTask", json!({"id": "v-1", "historyLength": -1}), "historyLength"),
        ("tasks/get", json!({"id": "v-1", "historyLength": "all"}), "historyLength"),
        ("GetTask", json!({"id": 5}), "id"),
        ("CancelTask", json!({}), "id"),
        ("ListTasks", json!({"pageSize": 0}), "pageSize"),
    ];
    for (method, params, parameter) in cases {
        let v = rpc(&lab, &token, method, params);
        assert_eq!(v["error"]["message"], "invalid params", "{method}: {v}");
        let meta = refused(&v, -32602, Some(parameter));
        if parameter == "metadata.skill_id" {
            assert_eq!(meta["detail"], "metadata.skill_id is required: the skill to run");
        }
    }
    // A part this agent cannot take: the spec's ContentTypeNotSupported, saying what it takes.
    for (method, part, kind) in [
        ("SendMessage", json!({"text": "hi"}), "text"),
        ("SendMessage", json!({"url": "http://127.0.0.1/x"}), "url"),
        ("message/send", json!({"kind": "text", "text": "hi"}), "text"),
        ("message/send", json!({"kind": "file", "file": {"uri": "http://127.0.0.1/x"}}), "file"),
    ] {
        let mut params = if method == "SendMessage" {
            message10("ct-1", "tools.echo", json!({}))
        } else {
            message03("ct-1", "tools.echo", json!({}))
        };
        params["message"]["parts"] = json!([part]);
        let v = rpc(&lab, &token, method, params);
        assert_eq!(v["error"]["message"], "incompatible content types");
        let meta = refused(&v, -32005, Some("message.parts[0]"));
        assert_eq!(
            meta["detail"],
            format!(
                "message has a {kind} part; this agent takes exactly one data part whose data is the skill's arguments"
            )
        );
    }
    // The seed's tasks/send keeps its table's code and message: a text part is
    // `invalid params`, with data saying which part and what it takes.
    let mut seed = send_body("seed-1", "tools.echo", &json!({}), None);
    seed["params"]["message"]["parts"] = json!([{"type": "text", "text": "hi"}]);
    let why =
        assert_a2a_told(&lab.a2a_raw(Some(&token), &serde_json::to_vec(&seed).unwrap()), "1", -32602, "invalid params");
    assert_eq!(why["parameter"], "message.parts[0]", "{why}");
    // A skill the session cannot see, and a wrong pin: the seed's messages, and data naming the parameter.
    let v = rpc(&lab, &token, "SendMessage", message10("na-1", "ailang-write", json!({"path": "x", "content": ""})));
    assert_eq!(v["error"]["message"], "not authorized");
    refused(&v, -32602, Some("metadata.skill_id"));
    let mut pinned = message10("pin-1", "tools.echo", json!({}));
    pinned["metadata"]["transition_fn"] = json!(format!("sha256:{}", "0".repeat(64)));
    let v = rpc(&lab, &token, "SendMessage", pinned);
    assert_eq!(v["error"]["message"], "proposal does not match the registered transition");
    refused(&v, -32602, Some("metadata.transition_fn"));
    assert_eq!((lab.log_len(), lab.journal_counts()), (log_len, journal), "nothing ran, no task row");
}

#[test]
fn a_task_is_never_canceled_an_ended_one_says_its_state_and_a_running_one_runs_on() {
    let (lab, token) = lab();
    let gate = Gate::new(&lab.root, "cancel");
    let m = lab.manifest(
        "cancel",
        &[("gate.py", &gate_source(&gate.dir)), ("exits.py", EXITS)],
        json!([exec_entry("t.gate", "gate.py", None, None), exec_entry("t.exits", "exits.py", None, None)]),
    );
    lab.publish_ok(&m, false);
    for m in ["CancelTask", "tasks/cancel"] {
        let v = rpc(&lab, &token, m, json!({"id": "nobody"}));
        assert_eq!(v["error"]["message"], "task not found", "{m}");
        assert_eq!(refused(&v, -32001, None)["taskId"], "nobody");
    }
    rpc(&lab, &token, "SendMessage", message10("done-1", "ailang-read", json!({"path": "hello.txt"})));
    let failed = rpc(&lab, &token, "SendMessage", message10("fail-1", "t.exits", json!({})));
    assert_eq!(failed["error"]["message"], "transition execution failed", "{failed}");
    let log_len = lab.log_len();
    for (m, task, state) in [
        ("CancelTask", "done-1", "TASK_STATE_COMPLETED"),
        ("tasks/cancel", "done-1", "completed"),
        ("CancelTask", "fail-1", "TASK_STATE_FAILED"),
        ("tasks/cancel", "fail-1", "failed"),
    ] {
        let v = rpc(&lab, &token, m, json!({"id": task}));
        assert_eq!(v["error"]["message"], "task cannot be canceled");
        let meta = refused(&v, -32002, None);
        assert_eq!((&meta["state"], &meta["taskId"]), (&json!(state), &json!(task)), "{m}");
        let detail = meta["detail"].as_str().unwrap();
        assert!(detail.contains("an effect that already ran is never undone; its record stays"), "{detail}");
    }
    // A cancel changes nothing: the committed task reads as before.
    let got = rpc(&lab, &token, "GetTask", json!({"id": "done-1"}));
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    // While it runs: not cancelable, and it runs to its end.
    let ran = std::thread::scope(|s| {
        let call = s.spawn(|| rpc(&lab, &token, "SendMessage", message10("fly-1", "t.gate", json!({"k": 1}))));
        gate.wait_started();
        for (m, state) in [("CancelTask", "TASK_STATE_WORKING"), ("tasks/cancel", "working")] {
            let meta = refused(&rpc(&lab, &token, m, json!({"id": "fly-1"})), -32002, None);
            assert_eq!(meta["state"], state);
            assert!(meta["detail"].as_str().unwrap().contains("is running and cannot be stopped"), "{meta}");
        }
        gate.open();
        call.join().unwrap()
    });
    assert_eq!(ran["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{ran}");
    assert_eq!(lab.log_len(), log_len + 1);
}

#[test]
fn get_task_returns_the_last_history_length_messages_of_the_request_and_the_reply() {
    let (lab, token) = lab();
    let args = json!({"path": "hello.txt"});
    let mut send = message10("h-1", "ailang-read", args.clone());
    send["configuration"] = json!({"historyLength": 0});
    let sent = rpc(&lab, &token, "SendMessage", send)["result"]["task"].clone();
    assert!(sent.get("history").is_none(), "historyLength 0: no history: {sent}");
    let output = sent["artifacts"][0]["parts"][0]["data"].clone();
    let timestamp = sent["status"]["timestamp"].as_str().unwrap().to_owned();
    assert!(timestamp.len() == 20 && timestamp.ends_with('Z'), "{timestamp}");
    let user = json!({"messageId": "h-1", "contextId": "h-1", "taskId": "h-1", "role": "ROLE_USER", "parts": [{"data": args}]});
    let agent = json!({"messageId": "h-1.reply", "contextId": "h-1", "taskId": "h-1", "role": "ROLE_AGENT", "parts": [{"data": output}]});
    for (n, want) in [(None, json!([user, agent])), (Some(5), json!([user, agent])), (Some(1), json!([agent]))] {
        let mut params = json!({"id": "h-1"});
        if let Some(n) = n {
            params["historyLength"] = json!(n);
        }
        let got = rpc(&lab, &token, "GetTask", params)["result"].clone();
        assert_eq!(got["history"], want, "historyLength {n:?}");
        assert_eq!(got["status"]["timestamp"], timestamp.as_str());
    }
    let got = rpc(&lab, &token, "GetTask", json!({"id": "h-1", "historyLength": 0}))["result"].clone();
    assert!(got.get("history").is_none(), "{got}");
    // 0.3 speaks its own shapes; the seed's tasks/send task has a history too (its id is its message id).
    let got03 = rpc(&lab, &token, "tasks/get", json!({"id": "h-1", "historyLength": 1}))["result"].clone();
    assert_eq!(got03["history"][0]["role"], "agent");
    assert_eq!(got03["history"][0]["parts"][0]["kind"], "data");
    lab.send(&token, "seed-1", "tools.echo", &json!({"x": 1}));
    let seed = rpc(&lab, &token, "GetTask", json!({"id": "seed-1"}))["result"].clone();
    assert_eq!(seed["history"][0]["messageId"], "seed-1");
    assert_eq!(seed["history"][0]["parts"][0]["data"], json!({"x": 1}));
    // Unknown: TaskNotFound with data.
    refused(&rpc(&lab, &token, "GetTask", json!({"id": "nope"})), -32001, None);
}

/// `ListTasks` through every page of `pageSize`, following `nextPageToken`.
fn list_all(lab: &Lab, token: &str, mut params: Value, page_size: u64) -> (Vec<Value>, Vec<u64>) {
    params["pageSize"] = json!(page_size);
    let (mut tasks, mut totals) = (vec![], vec![]);
    for _ in 0..50 {
        let page = rpc(lab, token, "ListTasks", params.clone())["result"].clone();
        assert_eq!(page["pageSize"], page_size, "{page}");
        assert!(page["tasks"].as_array().unwrap().len() as u64 <= page_size);
        tasks.extend(page["tasks"].as_array().unwrap().iter().cloned());
        totals.push(page["totalSize"].as_u64().unwrap());
        let next = page["nextPageToken"].as_str().unwrap();
        if next.is_empty() {
            return (tasks, totals);
        }
        params["pageToken"] = json!(next);
    }
    panic!("no last page");
}

fn ids(tasks: &[Value]) -> Vec<&str> {
    tasks.iter().map(|t| t["id"].as_str().unwrap()).collect()
}

#[test]
fn list_tasks_pages_the_sessions_a2a_tasks_newest_first_with_filters() {
    let (lab, token) = lab();
    let m = lab.manifest("exits", &[("exits.py", EXITS)], json!([exec_entry("t.exits", "exits.py", None, None)]));
    lab.publish_ok(&m, false);
    let other = lab.mint("ep2", &["world.apply=world:100"]);
    rpc(&lab, &token, "SendMessage", message10("l-1", "ailang-read", json!({"path": "hello.txt"})));
    lab.send(&token, "l-2", "tools.echo", &json!({"n": 2}));
    lab.mcp_call_ok(&token, "tools_decho", &json!({"n": "mcp"}));
    rpc(&lab, &token, "SendMessage", message10("l-3", "t.exits", json!({})));
    rpc(&lab, &token, "message/send", message03("l-4", "tools.echo", json!({"n": 4})));
    rpc(&lab, &other, "SendMessage", message10("o-1", "tools.echo", json!({})));

    let all = rpc(&lab, &token, "ListTasks", json!({}))["result"].clone();
    assert_eq!((&all["pageSize"], &all["totalSize"], &all["nextPageToken"]), (&json!(50), &json!(4), &json!("")));
    let tasks = all["tasks"].as_array().unwrap();
    assert_eq!(ids(tasks), ["l-4", "l-3", "l-2", "l-1"], "this episode's A2A tasks, newest first, no MCP call");
    let states: Vec<&Value> = tasks.iter().map(|t| &t["status"]["state"]).collect();
    assert_eq!(
        states,
        [
            &json!("TASK_STATE_COMPLETED"),
            &json!("TASK_STATE_FAILED"),
            &json!("TASK_STATE_COMPLETED"),
            &json!("TASK_STATE_COMPLETED")
        ]
    );
    assert!(tasks.iter().all(|t| t.get("artifacts").is_none()), "artifacts only when asked for");
    assert!(tasks.iter().all(|t| t["status"]["timestamp"].as_str().is_some_and(|s| s.ends_with('Z'))));
    assert_eq!(tasks[0]["history"].as_array().unwrap().len(), 2);
    assert!(tasks[1].get("history").is_none(), "a failed task kept no messages");
    // The other session's episode sees only its own.
    assert_eq!(ids(rpc(&lab, &other, "ListTasks", json!({}))["result"]["tasks"].as_array().unwrap()), ["o-1"]);

    // Pages: the same tasks in the same order, whatever the page size; the total on every page.
    for size in [1, 2, 3, 100] {
        let (paged, totals) = list_all(&lab, &token, json!({}), size);
        assert_eq!(ids(&paged), ids(tasks), "pageSize {size}");
        assert!(totals.iter().all(|t| *t == 4), "pageSize {size}: {totals:?}");
    }
    // Filters, also across pages.
    let (completed, totals) = list_all(&lab, &token, json!({"status": "TASK_STATE_COMPLETED"}), 2);
    assert_eq!((ids(&completed), totals), (vec!["l-4", "l-2", "l-1"], vec![3, 3]));
    let failed = rpc(&lab, &token, "ListTasks", json!({"status": "TASK_STATE_FAILED"}))["result"].clone();
    assert_eq!((ids(failed["tasks"].as_array().unwrap()), &failed["totalSize"]), (vec!["l-3"], &json!(1)));
    let working = rpc(&lab, &token, "ListTasks", json!({"status": "TASK_STATE_WORKING"}))["result"].clone();
    assert_eq!((&working["tasks"], &working["totalSize"]), (&json!([]), &json!(0)));
    let ctx = rpc(&lab, &token, "ListTasks", json!({"contextId": "l-2"}))["result"].clone();
    assert_eq!(ids(ctx["tasks"].as_array().unwrap()), ["l-2"], "a task sent without a context is its own");
    let later =
        rpc(&lab, &token, "ListTasks", json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}))["result"].clone();
    assert_eq!(later["tasks"], json!([]));
    let earlier =
        rpc(&lab, &token, "ListTasks", json!({"statusTimestampAfter": "2000-01-01T00:00:00.5Z"}))["result"].clone();
    assert_eq!(earlier["totalSize"], 4);
    // Artifacts and history when asked for.
    let full =
        rpc(&lab, &token, "ListTasks", json!({"includeArtifacts": true, "historyLength": 1, "pageSize": 1}))["result"]
            .clone();
    let t = &full["tasks"][0];
    assert_eq!(t["artifacts"][0]["parts"][0]["data"]["echo"], json!({"n": 4}), "{t}");
    assert_eq!(t["history"].as_array().unwrap().len(), 1);
    assert_eq!(t["history"][0]["role"], "ROLE_AGENT");
    assert_eq!(rpc(&lab, &token, "GetTask", json!({"id": "l-4"}))["result"]["artifacts"], t["artifacts"]);
    // A token is bound to its filters; bad parameters are named.
    let token_of = full["nextPageToken"].as_str().unwrap().to_owned();
    assert!(!token_of.is_empty());
    refused(
        &rpc(&lab, &token, "ListTasks", json!({"pageToken": token_of, "status": "TASK_STATE_FAILED"})),
        -32602,
        Some("pageToken"),
    );
    for (params, parameter) in [
        (json!({"pageSize": 101}), "pageSize"),
        (json!({"pageSize": -1}), "pageSize"),
        (json!({"pageToken": "garbage"}), "pageToken"),
        (json!({"status": "TASK_STATE_RUNNING"}), "status"),
        (json!({"historyLength": -1}), "historyLength"),
        (json!({"statusTimestampAfter": "2025-13-01T00:00:00Z"}), "statusTimestampAfter"),
        (json!({"includeArtifacts": 1}), "includeArtifacts"),
    ] {
        refused(&rpc(&lab, &token, "ListTasks", params), -32602, Some(parameter));
    }
}

#[test]
fn a_task_id_that_ended_replays_the_same_request_and_refuses_another_as_the_spec_and_the_seed_each_say() {
    let (lab, token) = lab();
    let m = lab.manifest("exits", &[("exits.py", EXITS)], json!([exec_entry("t.exits", "exits.py", None, None)]));
    lab.publish_ok(&m, false);
    let first =
        rpc(&lab, &token, "SendMessage", message10("r-1", "tools.echo", json!({"a": 1})))["result"]["task"].clone();
    let failed = rpc(&lab, &token, "SendMessage", message10("r-2", "t.exits", json!({})));
    assert_eq!(failed["error"]["message"], "transition execution failed");
    let log_len = lab.log_len();
    // The same request: its committed result, nothing run again.
    let again =
        rpc(&lab, &token, "SendMessage", message10("r-1", "tools.echo", json!({"a": 1})))["result"]["task"].clone();
    assert_eq!((&again["metadata"], &again["artifacts"]), (&first["metadata"], &first["artifacts"]));
    // Another request naming an ended task: UnsupportedOperation, in either generation.
    let mut named = message10("m-9", "tools.echo", json!({"a": 2}));
    named["message"]["taskId"] = json!("r-1");
    let mut named03 = message03("m-10", "tools.echo", json!({"a": 2}));
    named03["message"]["taskId"] = json!("r-1");
    let mut failed_named = message10("m-11", "tools.echo", json!({}));
    failed_named["message"]["taskId"] = json!("r-2");
    for (method, params, state) in [
        ("SendMessage", named, "TASK_STATE_COMPLETED"),
        ("SendMessage", message10("r-1", "tools.echo", json!({"a": 3})), "TASK_STATE_COMPLETED"),
        ("message/send", named03, "completed"),
        ("SendMessage", failed_named, "TASK_STATE_FAILED"),
    ] {
        let v = rpc(&lab, &token, method, params);
        assert_eq!(v["error"]["message"], "this operation is not supported", "{method}: {v}");
        let meta = refused(&v, -32004, None);
        assert_eq!((&meta["state"], &meta["taskId"].as_str().is_some()), (&json!(state), &true), "{v}");
        assert!(meta["detail"].as_str().unwrap().contains("send a new task id"), "{meta}");
    }
    // The same failed request: the seed's answer (the id is spent).
    let v = rpc(&lab, &token, "SendMessage", message10("r-2", "t.exits", json!({})));
    assert_eq!(rpc_error(&v), (-32603, "invocation was not committed; send a new task id".to_owned()));
    // The seed's tasks/send keeps its table's code and message, and says why.
    let r = lab
        .a2a_raw(Some(&token), &serde_json::to_vec(&send_body("r-1", "tools.echo", &json!({"a": 4}), None)).unwrap());
    let why = assert_a2a_told(&r, "1", -32602, "task id already used in this session");
    assert!(why["detail"].as_str().unwrap().contains("new task id"), "{why}");
    assert_eq!(lab.log_len(), log_len, "nothing ran again");
}

#[test]
fn a_tasks_context_and_message_id_are_kept_with_it_and_list_tasks_filters_on_the_context() {
    let (mut lab, token) = lab();
    let send = |lab: &Lab, task: &str, message: &str, context: Option<&str>, n: u64| {
        let mut params = message10(message, "tools.echo", json!({"n": n}));
        params["message"]["taskId"] = json!(task);
        if let Some(c) = context {
            params["message"]["contextId"] = json!(c);
        }
        rpc(lab, &token, "SendMessage", params)["result"]["task"].clone()
    };
    let sent = send(&lab, "c-1", "m-1", Some("conv-a"), 1);
    assert_eq!(sent["contextId"], "conv-a");
    assert_eq!(sent["history"][0]["messageId"], "m-1");
    send(&lab, "c-2", "m-2", Some("conv-b"), 2);
    send(&lab, "c-3", "m-3", Some("conv-a"), 3);
    send(&lab, "c-4", "m-4", None, 4);
    // A resend of the same request under another message id is the task as it committed.
    let again = send(&lab, "c-1", "m-1-again", Some("conv-a"), 1);
    assert_eq!((&again["history"][0]["messageId"], &again["metadata"]), (&json!("m-1"), &sent["metadata"]));
    // Kept in the task's row: read back after the daemon was killed and restarted.
    lab.kill9();
    lab.restart();
    let got = rpc(&lab, &token, "GetTask", json!({"id": "c-1"}))["result"].clone();
    assert_eq!((&got["contextId"], &got["history"][0]["messageId"]), (&json!("conv-a"), &json!("m-1")));
    assert_eq!(got["history"][1]["contextId"], "conv-a");
    let got03 = rpc(&lab, &token, "tasks/get", json!({"id": "c-3"}))["result"].clone();
    assert_eq!(got03["contextId"], "conv-a");
    let listed = |context: &str| {
        let page = rpc(&lab, &token, "ListTasks", json!({"contextId": context}))["result"].clone();
        ids(page["tasks"].as_array().unwrap()).iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(listed("conv-a"), ["c-3", "c-1"]);
    assert_eq!(listed("conv-b"), ["c-2"]);
    assert_eq!(listed("c-4"), ["c-4"], "sent without a context: its own");
    assert_eq!(listed("c-1"), Vec::<String>::new(), "a task with a context is not its own");
    let (paged, totals) = list_all(&lab, &token, json!({"contextId": "conv-a"}), 1);
    assert_eq!((ids(&paged), totals), (vec!["c-3", "c-1"], vec![2, 2]));
}
