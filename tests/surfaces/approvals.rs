//! A person asked in-band (MCP 2026-07-28 Multi Round-Trip Requests): a
//! modern client that declared elicitation gets `input_required` with one
//! form and a sealed `requestState`; its retry with the answer runs the
//! effect once (or records the denial). A tampered, foreign, replayed or
//! mismatched state is a JSON-RPC error that runs nothing; a client that
//! cannot be asked, or a grant only the operator answers, gets a tool error
//! naming the approval.

use crate::harness::*;
use crate::mcp_modern::{modern_with, result};
use serde_json::{Value, json};

const EP: &str = "ask";
const ELICITS: fn() -> Value = || json!({"elicitation": {}});

struct Asker {
    lab: Lab,
    token: String,
}

fn asker(more: &[&str]) -> Asker {
    asker_serving(more, &[])
}

/// `asker`, its daemon served with `serve_args`.
fn asker_serving(more: &[&str], serve_args: &[&str]) -> Asker {
    let lab = Lab::new(LabOptions { episodes: &[EP], serve_args, ..Default::default() });
    let token = lab.mint_with(EP, &["world.apply=world:100", "Workspace.Write=worktree:5"], None, more);
    Asker { lab, token }
}

impl Asker {
    fn call(&self, params: Value, capabilities: Value) -> Reply {
        modern_with(&self.lab, &self.token, json!(1), "tools/call", params, capabilities)
    }

    fn write(&self, content: &str) -> Value {
        json!({"name": "ailang-write", "arguments": {"path": "notes.txt", "content": content}})
    }

    /// Asks, and answers the form with `response`: the retry's reply.
    fn answer(&self, content: &str, response: Value) -> (Reply, String) {
        self.answer_call(self.write(content), response)
    }

    /// The tool call `params` asked, and its form answered with `response`.
    fn answer_call(&self, params: Value, response: Value) -> (Reply, String) {
        let asked = result(&self.call(params.clone(), ELICITS()));
        let state = asked["requestState"].as_str().unwrap().to_string();
        let mut retry = params;
        retry["requestState"] = json!(state);
        retry["inputResponses"] = json!({"approval": response});
        (self.call(retry, ELICITS()), state)
    }

    fn notes(&self) -> Option<String> {
        std::fs::read_to_string(self.lab.worktree(EP).join("notes.txt")).ok()
    }

    /// What the episode spent (an episode that made no call has no summary: nothing).
    fn spent(&self) -> u64 {
        let r = self.lab.get(&format!("/v1/episodes/{EP}"));
        if r.status == 404 {
            return 0;
        }
        let summary = r.json();
        summary["spend"].as_array().into_iter().flatten().map(|g| g["spent"].as_u64().unwrap_or(0)).sum()
    }
}

fn accept(decision: &str) -> Value {
    json!({"action": "accept", "content": {"decision": decision}})
}

fn refused_state(r: &Reply) -> Value {
    assert_eq!(r.status, 400, "{}", r.text());
    let body = r.json();
    assert_eq!(body["error"]["code"], json!(-32602), "{body}");
    assert_eq!(body["error"]["message"], json!("Invalid or expired requestState"), "{body}");
    assert_eq!(body["error"]["data"]["reason"], json!("invalid_request_state"), "{body}");
    body
}

#[test]
fn a_client_that_can_elicit_is_asked_and_its_approval_runs_the_effect_once() {
    let a = asker(&["--ask", "Workspace.Write"]);
    let asked = result(&a.call(a.write("one\n"), ELICITS()));
    assert_eq!(asked["resultType"], json!("input_required"), "{asked}");
    let request = &asked["inputRequests"]["approval"];
    assert_eq!(request["method"], json!("elicitation/create"));
    assert_eq!(request["params"]["mode"], json!("form"));
    let message = request["params"]["message"].as_str().unwrap();
    assert!(message.contains("write 4 bytes to notes.txt") && message.contains("cost 1 of 5 left"), "{message}");
    assert_eq!(request["params"]["requestedSchema"]["required"], json!(["decision"]));
    assert_eq!((a.notes(), a.spent()), (None, 0), "asking runs and debits nothing");

    let (done, state) = a.answer("one\n", accept("approve"));
    let done = result(&done);
    assert_eq!(done["resultType"], json!("complete"), "{done}");
    assert_eq!(done["structuredContent"]["world"]["effects"][0]["status"], json!("ok"), "{done}");
    assert_eq!((a.notes().as_deref(), a.spent()), (Some("one\n"), 1));
    let record = done["structuredContent"]["world"]["effects"][0]["record"].as_str().unwrap();
    let meta = a.lab.get_json(&format!("/v1/objects/{record}"));
    assert_eq!(meta["semanticId"], json!("world/effect-record/v3"));

    // The same state again: its approval was used; nothing runs.
    let mut replay = a.write("one\n");
    replay["requestState"] = json!(state);
    replay["inputResponses"] = json!({"approval": accept("approve")});
    refused_state(&a.call(replay, ELICITS()));
    assert_eq!(a.spent(), 1);
}

#[test]
fn a_declined_or_denied_question_records_the_denial_and_a_dismissed_one_is_told_not_run() {
    let a = asker(&["--ask", "Workspace.Write"]);
    let (denied, _) = a.answer("no\n", json!({"action": "decline"}));
    let denied = result(&denied);
    assert_eq!(denied["isError"], json!(true), "{denied}");
    assert_eq!(denied["structuredContent"]["world"]["effects"][0]["status"], json!("denied"));
    let (denied, _) = a.answer("no\n", accept("deny"));
    assert_eq!(result(&denied)["structuredContent"]["world"]["effects"][0]["status"], json!("denied"));
    let (dismissed, _) = a.answer("no\n", json!({"action": "cancel"}));
    let dismissed = result(&dismissed);
    assert_eq!((dismissed["resultType"].clone(), dismissed["isError"].clone()), (json!("complete"), json!(true)));
    assert!(dismissed["content"][0]["text"].as_str().unwrap().contains("dismissed"), "{dismissed}");
    // No answer at all (or one the form did not offer): asked again.
    let (again, _) = a.answer("no\n", json!({"action": "accept", "content": {"decision": "maybe"}}));
    assert_eq!(result(&again)["resultType"], json!("input_required"));
    assert_eq!((a.notes(), a.spent()), (None, 0));
}

#[test]
fn for_the_session_approves_the_same_request_again_but_not_another() {
    let a = asker(&["--ask", "Workspace.Write"]);
    let (done, _) = a.answer("same\n", accept("approve-for-session"));
    assert_eq!(result(&done)["resultType"], json!("complete"));
    let again = result(&a.call(a.write("same\n"), ELICITS()));
    assert_eq!(again["structuredContent"]["world"]["effects"][0]["status"], json!("ok"), "{again}");
    assert_eq!(result(&a.call(a.write("other\n"), ELICITS()))["resultType"], json!("input_required"));
    assert_eq!(a.spent(), 2);
}

#[test]
fn a_tampered_foreign_or_mismatched_state_is_refused_and_runs_nothing() {
    let a = asker(&["--ask", "Workspace.Write"]);
    let asked = result(&a.call(a.write("x\n"), ELICITS()));
    let state = asked["requestState"].as_str().unwrap().to_string();
    let retry = |params: Value, state: &str, token: &str| {
        let mut p = params;
        p["requestState"] = json!(state);
        p["inputResponses"] = json!({"approval": accept("approve")});
        modern_with(&a.lab, token, json!(2), "tools/call", p, ELICITS())
    };
    // One character changed in the seal.
    let mut tampered = state.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    refused_state(&retry(a.write("x\n"), &String::from_utf8(tampered).unwrap(), &a.token));
    // Another session's credential, even of the same episode and grants.
    let other = a.lab.mint_with(
        EP,
        &["world.apply=world:100", "Workspace.Write=worktree:5"],
        None,
        &["--ask", "Workspace.Write"],
    );
    refused_state(&retry(a.write("x\n"), &state, &other));
    // Other arguments under the same state.
    refused_state(&retry(a.write("y\n"), &state, &a.token));
    // Not a string.
    let mut p = a.write("x\n");
    p["requestState"] = json!(7);
    let r = a.call(p, ELICITS());
    assert_eq!((r.status, r.json()["error"]["code"].clone()), (400, json!(-32602)), "{}", r.text());
    assert_eq!((a.notes(), a.spent()), (None, 0));
    // The honest retry still works.
    let honest = result(&retry(a.write("x\n"), &state, &a.token));
    assert_eq!(honest["resultType"], json!("complete"), "{honest}");
}

#[test]
fn a_client_without_elicitation_or_an_operator_only_grant_gets_a_tool_error_naming_the_approval() {
    let a = asker(&["--ask", "Workspace.Write"]);
    let told = result(&a.call(a.write("z\n"), json!({})));
    assert_eq!((told["resultType"].clone(), told["isError"].clone()), (json!("complete"), json!(true)), "{told}");
    assert!(told["content"][0]["text"].as_str().unwrap().contains("worldd approve ap-"), "{told}");
    let op = asker(&["--ask-operator", "Workspace.Write"]);
    let told = result(&op.call(op.write("z\n"), ELICITS()));
    let text = told["content"][0]["text"].as_str().unwrap();
    assert!(told["isError"] == json!(true) && text.contains("the operator only"), "{told}");
}

/// One A2A 1.0 JSON-RPC call; the reply parsed.
fn a2a(a: &Asker, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    a2a_json(&a.lab.a2a_raw(Some(&a.token), &serde_json::to_vec(&body).unwrap()))
}

fn send(a: &Asker, message_id: &str, task: &str, content: &str) -> Value {
    send_in(a, message_id, task, None, content)
}

/// `send`, in the A2A context `context` when one is named.
fn send_in(a: &Asker, message_id: &str, task: &str, context: Option<&str>, content: &str) -> Value {
    let data = json!({"path": "a2a.txt", "content": content});
    let mut message = json!({"messageId": message_id, "taskId": task, "role": "ROLE_USER", "parts": [{"data": data}]});
    if let Some(context) = context {
        message["contextId"] = json!(context);
    }
    a2a(a, "SendMessage", json!({"message": message, "metadata": {"skill_id": "ailang-write"}}))
}

fn answer(a: &Asker, message_id: &str, task: &str, word: &str) -> Value {
    let message =
        json!({"messageId": message_id, "taskId": task, "role": "ROLE_USER", "parts": [{"data": {"approval": word}}]});
    a2a(a, "SendMessage", json!({"message": message}))
}

#[test]
fn an_a2a_task_waits_input_required_and_a_message_on_it_with_the_answer_runs_it_once() {
    let a = asker(&["--ask", "Workspace.Write"]);
    let asked = send_in(&a, "m1", "task-1", Some("ctx-7"), "hi");
    let task = &asked["result"]["task"];
    assert_eq!(task["status"]["state"], json!("TASK_STATE_INPUT_REQUIRED"), "{asked}");
    assert_eq!(task["contextId"], json!("ctx-7"), "the context it was sent in: {asked}");
    let waits = &task["status"]["message"]["parts"][0]["data"]["approval"];
    assert_eq!(waits["state"], json!("pending"), "{asked}");
    assert!(waits["summary"].as_str().unwrap().contains("write 2 bytes to a2a.txt"), "{waits}");
    assert_eq!(task["status"]["message"]["role"], json!("ROLE_AGENT"));
    assert!(!a.lab.worktree(EP).join("a2a.txt").exists());
    // Read back while it waits: input-required, naming the same approval.
    let got = a2a(&a, "GetTask", json!({"id": "task-1"}));
    assert_eq!(got["result"]["status"]["state"], json!("TASK_STATE_INPUT_REQUIRED"), "{got}");
    assert_eq!(got["result"]["status"]["message"]["parts"][0]["data"]["approval"]["id"], waits["id"], "{got}");
    assert_eq!(a2a(&a, "GetTask", json!({"id": "task-9"}))["error"]["code"], json!(-32001));

    let done = answer(&a, "m2", "task-1", "approve");
    assert_eq!(done["result"]["task"]["status"]["state"], json!("TASK_STATE_COMPLETED"), "{done}");
    assert_eq!(std::fs::read_to_string(a.lab.worktree(EP).join("a2a.txt")).unwrap(), "hi");
    // The task id stays the idempotency key: the request resent replays, runs nothing.
    let again = send(&a, "m3", "task-1", "hi");
    assert_eq!(again["result"]["task"]["status"]["state"], json!("TASK_STATE_COMPLETED"), "{again}");
    assert_eq!(a.spent(), 1);
    // Nothing waits on it any more.
    assert_eq!(answer(&a, "m4", "task-1", "approve")["error"]["code"], json!(-32001));
}

#[test]
fn an_a2a_denial_on_the_task_is_recorded_and_a_bad_word_or_an_operator_only_grant_decides_nothing() {
    let a = asker(&["--ask", "Workspace.Write"]);
    send(&a, "m1", "task-2", "no");
    let bad = answer(&a, "m2", "task-2", "maybe");
    assert_eq!(bad["error"]["code"], json!(-32602), "{bad}");
    let denied = answer(&a, "m3", "task-2", "deny");
    let task = &denied["result"]["task"];
    assert_eq!(task["status"]["state"], json!("TASK_STATE_COMPLETED"), "{denied}");
    assert_eq!(task["artifacts"][0]["parts"][0]["data"]["world"]["effects"][0]["status"], json!("denied"), "{denied}");
    assert_eq!(a.spent(), 0);

    let op = asker(&["--ask-operator", "Workspace.Write"]);
    send(&op, "m1", "task-3", "x");
    let refused = answer(&op, "m2", "task-3", "approve");
    assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
    assert!(refused.to_string().contains("the operator's to decide"), "{refused}");
    assert!(!op.lab.worktree(EP).join("a2a.txt").exists());
}

/// The approval an `input-required` A2A task names.
fn waits_on(reply: &Value) -> String {
    let task = reply["result"].get("task").unwrap_or(&reply["result"]);
    assert_eq!(task["status"]["state"], json!("TASK_STATE_INPUT_REQUIRED"), "{reply}");
    task["status"]["message"]["parts"][0]["data"]["approval"]["id"].as_str().unwrap().to_string()
}

#[test]
fn an_a2a_task_sent_again_after_its_approval_expired_is_asked_afresh_under_the_same_id() {
    let a = asker_serving(&["--ask", "Workspace.Write"], &["--approval-ttl", "1"]);
    let first = waits_on(&send(&a, "m1", "task-5", "late"));
    std::thread::sleep(std::time::Duration::from_secs(2));
    // Not a recorded expiry that spends the task id: a new question.
    let again = waits_on(&send(&a, "m2", "task-5", "late"));
    assert_ne!(again, first);
    assert!(!a.lab.worktree(EP).join("a2a.txt").exists());
    assert_eq!(a.spent(), 0, "nothing of the task was recorded or spent");
}

/// The state and text of the approval an `input-required` A2A task waits on.
fn waits_in(reply: &Value) -> (String, String) {
    let waits_on_it = waits_on(reply);
    let task = reply["result"].get("task").unwrap_or(&reply["result"]);
    let data = &task["status"]["message"]["parts"][0]["data"];
    assert_eq!(data["approval"]["id"], json!(waits_on_it));
    (data["approval"]["state"].as_str().unwrap().into(), data["text"].as_str().unwrap().into())
}

#[test]
fn an_a2a_task_whose_approval_the_operator_decided_keeps_its_identity_and_a_late_answer_opens_nothing() {
    let a = asker(&["--ask", "Workspace.Write"]);
    let get = |task: &str| a2a(&a, "GetTask", json!({"id": task}));
    let approved = waits_on(&send(&a, "m1", "task-6", "yes"));
    let denied = waits_on(&send(&a, "m1", "task-7", "no"));
    worldd_ok(&["approve", &approved, "--db", a.lab.db_str()]);
    worldd_ok(&["deny", &denied, "--db", a.lab.db_str()]);
    // Decided, not yet told to the task: still the task, saying what comes next.
    let (state, text) = waits_in(&get("task-6"));
    assert!(state == "approved" && text.contains("runs once"), "{state}: {text}");
    let (state, text) = waits_in(&get("task-7"));
    assert!(state == "denied" && text.contains("the denial is recorded"), "{state}: {text}");
    // An answer now decides nothing and opens no new approval.
    let late = answer(&a, "m2", "task-6", "deny");
    assert_eq!(late["error"]["code"], json!(-32602), "{late}");
    assert!(late.to_string().contains("decided or used already"), "{late}");
    let open = worldd_ok(&["approvals", "--json", "--db", a.lab.db_str()]);
    let open: Vec<Value> = serde_json::from_str(&open).unwrap();
    assert_eq!(open.iter().filter(|o| o["state"] == json!("pending")).count(), 0, "{open:?}");
    // Sent again, each goes on as decided.
    let ran = send(&a, "m3", "task-6", "yes");
    assert_eq!(ran["result"]["task"]["status"]["state"], json!("TASK_STATE_COMPLETED"), "{ran}");
    let refused = send(&a, "m3", "task-7", "no");
    let task = &refused["result"]["task"];
    assert_eq!(task["artifacts"][0]["parts"][0]["data"]["world"]["effects"][0]["status"], json!("denied"), "{refused}");
    assert_eq!(get("task-7")["result"]["status"]["state"], json!("TASK_STATE_COMPLETED"));
    assert_eq!(a.spent(), 1);
}

/// The MCP call identical to `send`'s A2A request (same tool, same arguments).
fn write_as_sent(content: &str) -> Value {
    json!({"name": "ailang-write", "arguments": {"path": "a2a.txt", "content": content}})
}

#[test]
fn an_a2a_task_whose_approval_an_identical_mcp_call_used_or_denied_keeps_its_identity() {
    let a = asker(&["--ask", "Workspace.Write"]);
    let get = |task: &str| a2a(&a, "GetTask", json!({"id": task}));
    let waited = waits_on(&send(&a, "m1", "task-8", "over mcp"));
    // The same session makes the identical call over MCP: asked about the
    // same approval, its user approves in-band and the MCP call uses it.
    let (done, _) = a.answer_call(write_as_sent("over mcp"), accept("approve"));
    let done = result(&done);
    assert_eq!(done["structuredContent"]["world"]["effects"][0]["status"], json!("ok"), "{done}");
    assert_eq!(a.spent(), 1);
    // The task never ran: still itself, input-required, told its approval served another call.
    let got = get("task-8");
    assert_eq!(waits_on(&got), waited, "{got}");
    let (state, text) = waits_in(&got);
    assert!(state == "used" && text.contains("This task did not run"), "{state}: {text}");
    // Sent again, it is asked afresh: an approval serves once.
    let afresh = waits_on(&send(&a, "m2", "task-8", "over mcp"));
    assert_ne!(afresh, waited);
    assert_eq!(waits_on(&get("task-8")), afresh);

    // Denied in-band over MCP: the MCP call records the denial and closes it.
    let waited = waits_on(&send(&a, "m1", "task-9", "no over mcp"));
    let (denied, _) = a.answer_call(write_as_sent("no over mcp"), json!({"action": "decline"}));
    assert_eq!(result(&denied)["structuredContent"]["world"]["effects"][0]["status"], json!("denied"));
    let got = get("task-9");
    assert_eq!(waits_on(&got), waited, "{got}");
    let (state, text) = waits_in(&got);
    assert!(state == "denied" && text.contains("recorded by another call"), "{state}: {text}");
    // An answer on it now decides nothing and opens nothing.
    let late = answer(&a, "m2", "task-9", "approve");
    assert_eq!(late["error"]["code"], json!(-32602), "{late}");
    assert!(late.to_string().contains("decided or used already"), "{late}");
    assert_eq!(a.spent(), 1);
    a.lab.verify_clean();
}

#[test]
fn two_a2a_tasks_waiting_on_one_approval_are_each_found_by_their_own_id() {
    let a = asker(&["--ask", "Workspace.Write"]);
    let get = |task: &str| a2a(&a, "GetTask", json!({"id": task}));
    let first = waits_on(&send(&a, "m1", "task-10", "twice"));
    let second = waits_on(&send(&a, "m2", "task-11", "twice"));
    assert_eq!(first, second, "the identical request waits on one approval");
    for task in ["task-10", "task-11"] {
        let got = get(task);
        assert_eq!(got["result"]["id"], json!(task), "{got}");
        assert_eq!(waits_in(&got).0, "pending", "{got}");
    }
    // The second task's own answer runs it; the first is told its approval served it.
    let done = answer(&a, "m3", "task-11", "approve");
    assert_eq!(done["result"]["task"]["status"]["state"], json!("TASK_STATE_COMPLETED"), "{done}");
    assert_eq!(get("task-11")["result"]["status"]["state"], json!("TASK_STATE_COMPLETED"));
    let (state, _) = waits_in(&get("task-10"));
    assert_eq!(state, "used");
    assert_eq!(a.spent(), 1);
    a.lab.verify_clean();
}
