//! The agent is told why: a denied effect says its label and its reason
//! (the budget's figures, the episode's, across its sessions; a person's no
//! apart from nobody being asked) in MCP 2026-07-28 and on A2A, while the
//! legacy MCP eras keep the seed's bytes; a tool this daemon cannot run is
//! a tool result naming the missing flag in the modern era and a failed
//! task over A2A 1.0; the seed's `tasks/send` continues a task waiting for
//! approval exactly as the README shows.

use crate::approvals::{EP, Lab, lab};
use crate::episodes::{Minted, a2a, mcp, mint_with};
use crate::harness::*;
use crate::tasks::{a2a_v1, eventually};
use serde_json::{Value, json};

/// A 2026-07-28 `tools/call`, as a conforming client without elicitation sends it.
fn modern_call(d: &Daemon, token: &str, tool: &str, arguments: Value) -> Value {
    d.mcp_modern(token, "tools/call", json!({"name": tool, "arguments": arguments}), json!({}))
}

/// The raw bytes of a legacy-era `tools/call` reply.
fn legacy_bytes(d: &Daemon, token: &str, tool: &str, arguments: Value) -> String {
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let auth = format!("Bearer {token}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    d.request("POST", "/mcp/", &headers, Some(&serde_json::to_vec(&body).unwrap())).text()
}

fn writes(lab: &Lab, grants: &[&str], more: &[&str]) -> Minted {
    mint_with(&lab.db, EP, grants, more, None)
}

fn write_args(content: &str) -> Value {
    json!({"path": "notes.txt", "content": content})
}

/// The one effect of an MCP result's `world` block.
fn mcp_effect(reply: &Value) -> &Value {
    &reply["result"]["structuredContent"]["world"]["effects"][0]
}

/// The one effect of an A2A task's output.
fn a2a_effect(task: &Value) -> &Value {
    &task["artifacts"][0]["parts"][0]["data"]["world"]["effects"][0]
}

#[test]
fn a_budget_denial_says_its_label_and_the_episode_s_spend_across_its_sessions() {
    let lab = lab(&[]);
    let first = writes(&lab, &["Workspace.Write=worktree:2"], &[]);
    for n in 0..2 {
        assert_eq!(
            mcp_effect(&mcp(&lab.daemon, &first.token, "ailang-write", write_args(&n.to_string())))["status"],
            "ok"
        );
    }
    // A second session of the episode spends from the same budget.
    let second = writes(&lab, &["Workspace.Write=worktree:2"], &[]);
    let said = "Workspace.Write on worktree: 2 of 2 spent in episode asks, across its sessions; \
                this call costs 1 and 0 remain. Nothing ran and nothing was debited.";

    let modern = modern_call(&lab.daemon, &second.token, "ailang-write", write_args("modern"));
    assert_eq!(modern["result"]["isError"], json!(true), "{modern}");
    let effect = mcp_effect(&modern);
    assert_eq!(
        (&effect["status"], &effect["denial"], &effect["reason"]),
        (&json!("denied"), &json!("denied:budget"), &json!(said))
    );
    let text = modern["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("denied:budget") && text.contains("across its sessions"), "{text}");

    let sent = a2a(&lab.daemon, &second.token, "over-budget", "ailang-write", write_args("a2a"));
    assert_eq!(a2a_effect(&sent["result"])["denial"], json!("denied:budget"), "{sent}");
    assert_eq!(a2a_effect(&sent["result"])["reason"], json!(said), "{sent}");
    let message = json!({"messageId": "m-1", "taskId": "over-budget-1", "role": "ROLE_USER",
        "parts": [{"data": write_args("a2a 1.0")}]});
    let v1 = a2a_v1(
        &lab.daemon,
        &second.token,
        "SendMessage",
        json!({"message": message, "metadata": {"skill_id": "ailang-write"}}),
    );
    assert_eq!(a2a_effect(&v1["result"]["task"])["reason"], json!(said), "{v1}");
    // Read back later, the task says the same: the reason is in the committed output.
    let got = a2a_v1(&lab.daemon, &second.token, "GetTask", json!({"id": "over-budget-1"}));
    assert_eq!(a2a_effect(&got["result"])["reason"], json!(said), "{got}");
    let replayed = a2a(&lab.daemon, &second.token, "over-budget", "ailang-write", write_args("a2a"));
    assert_eq!(replayed["result"], sent["result"], "a resend answers the committed result");

    // The legacy eras keep the seed's bytes: `id`, `record`, `status` alone.
    let legacy = legacy_bytes(&lab.daemon, &second.token, "ailang-write", write_args("legacy"));
    assert!(legacy.contains(r#"\"status\":\"denied\""#), "{legacy}");
    assert!(!legacy.contains("denial") && !legacy.contains("reason") && !legacy.contains("across"), "{legacy}");
    let data: Value = serde_json::from_str(legacy.trim_start_matches("event: message\ndata: ").trim_end()).unwrap();
    let keys: Vec<&String> = mcp_effect(&data).as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "record", "status"], "{legacy}");

    // The summary agrees: one budget, spent across both sessions.
    let summary = lab.daemon.get(&format!("/v1/episodes/{EP}")).ok_json();
    assert_eq!(summary["denials"]["denied:budget"], json!(4), "{summary}");

    // A larger grant of a third session spends past the first's budget: the
    // first is told the episode's spend as it is, not its own budget's worth.
    let larger = writes(&lab, &["Workspace.Write=worktree:10"], &[]);
    for n in 0..3 {
        let ran = modern_call(&lab.daemon, &larger.token, "ailang-write", write_args(&format!("l{n}")));
        assert_eq!(mcp_effect(&ran)["status"], "ok", "{ran}");
    }
    let told = modern_call(&lab.daemon, &first.token, "ailang-write", write_args("past"));
    let reason = mcp_effect(&told)["reason"].as_str().unwrap().to_string();
    assert!(reason.starts_with("Workspace.Write on worktree: 5 of 2 spent in episode asks"), "{reason}");
}

#[test]
fn a_person_s_no_and_no_room_to_ask_are_told_apart() {
    let lab = lab(&[]);
    let s = writes(&lab, &["Workspace.Write=worktree:100"], &["--ask-operator", "Workspace.Write=worktree"]);
    let waiting = modern_call(&lab.daemon, &s.token, "ailang-write", write_args("no\n"));
    let text = waiting["result"]["content"][0]["text"].as_str().unwrap();
    let id = text.split("Approval ").nth(1).and_then(|t| t.split(' ').next()).unwrap().to_string();
    lab.worldd_ok(&["deny", &id]);
    let denied = modern_call(&lab.daemon, &s.token, "ailang-write", write_args("no\n"));
    let effect = mcp_effect(&denied);
    assert_eq!(effect["denial"], json!("denied:approval"), "{denied}");
    let reason = effect["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("approval {id} of this exact request was denied")), "{reason}");

    // 64 open approvals fill the session's share: the next call asks nobody.
    for n in 0..64 {
        let r = mcp(&lab.daemon, &s.token, "ailang-write", write_args(&format!("ask {n}\n")));
        assert_eq!(r["result"]["isError"], json!(true), "{r}");
    }
    let full = modern_call(&lab.daemon, &s.token, "ailang-write", write_args("one more\n"));
    let effect = mcp_effect(&full);
    assert_eq!(effect["denial"], json!("denied:approval-unavailable-session"), "{full}");
    let reason = effect["reason"].as_str().unwrap();
    assert!(reason.starts_with("nobody was asked for approval: this session holds 64 open approvals"), "{reason}");
    assert!(reason.contains("No person said no"), "{reason}");
    assert_eq!(lab.spent(), 0);
}

#[test]
fn a_tool_this_daemon_cannot_run_names_the_missing_flag_in_the_modern_era_and_on_a2a() {
    // A worktree, but no `--exec-allow`: workspace-exec has no handler here.
    let lab = lab(&[]);
    let s = writes(&lab, &["Workspace.Exec=worktree:5"], &[]);
    let args = json!({"command": "sh", "args": ["-c", "echo hi"]});
    let flag = "start the daemon with --exec-allow NAME[=PATH]";

    let modern = modern_call(&lab.daemon, &s.token, "workspace-exec", args.clone());
    let result = &modern["result"];
    assert_eq!((&result["resultType"], &result["isError"]), (&json!("complete"), &json!(true)), "{modern}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Not run: this daemon cannot run workspace-exec: ") && text.contains(flag), "{text}");
    assert!(text.contains("Nothing ran and nothing was debited"), "{text}");
    // The daemon's stderr says it in the same words (read by a thread of its own).
    eventually(std::time::Duration::from_secs(10), std::time::Duration::from_millis(50), || {
        let logged = lab.daemon.stderr_lines();
        let said = logged.iter().any(|l| l.contains("mcp refusal") && l.contains(flag));
        if said { Ok(()) } else { Err(format!("{logged:?}")) }
    });

    // The legacy eras keep the seed's envelope.
    let legacy = legacy_bytes(&lab.daemon, &s.token, "workspace-exec", args.clone());
    assert_eq!(
        legacy.trim_end(),
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"host callback failed"}}"#
    );

    // A2A 1.0: a failed task saying why; the seed's tasks/send keeps its table.
    let message = json!({"messageId": "exec-1", "taskId": "exec-1", "role": "ROLE_USER", "parts": [{"data": args}]});
    let v1 = a2a_v1(
        &lab.daemon,
        &s.token,
        "SendMessage",
        json!({"message": message, "metadata": {"skill_id": "workspace-exec"}}),
    );
    let status = &v1["result"]["task"]["status"];
    assert_eq!(status["state"], json!("TASK_STATE_FAILED"), "{v1}");
    let data = &status["message"]["parts"][0]["data"];
    assert!(data["text"].as_str().unwrap().contains(flag), "{v1}");
    assert_eq!(data["notRun"]["skill"], json!("workspace-exec"), "{v1}");
    let seed = a2a(&lab.daemon, &s.token, "exec-2", "workspace-exec", args);
    assert_eq!(
        seed["error"],
        json!({"code": -32603, "message": "transition declares an effect this daemon has no handler for"})
    );
    assert_eq!(lab.spent(), 0);
}

/// The README's continuation, byte for byte.
const README_CONTINUATION: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tasks/send","params":{"id":"write-1","message":{"role":"user","parts":[{"type":"data","data":{"approval":"approve"}}]}}}"#;

#[test]
fn the_seed_s_tasks_send_continues_a_task_waiting_for_approval_as_the_readme_shows() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    assert!(readme.contains(README_CONTINUATION), "the README shows this continuation");
    let lab = lab(&[]);
    let s = writes(&lab, &["Workspace.Write=worktree:5"], &["--ask", "Workspace.Write"]);
    let auth = format!("Bearer {}", s.token);
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let post = |body: &str| lab.daemon.request("POST", "/a2a/", &headers, Some(body.as_bytes())).json();

    let waiting = a2a(&lab.daemon, &s.token, "write-1", "ailang-write", write_args("approved\n"));
    assert_eq!(waiting["result"]["status"]["state"], json!("input-required"), "{waiting}");
    let done = post(README_CONTINUATION);
    assert_eq!(done["result"]["status"], json!({"state": "completed"}), "{done}");
    assert_eq!(a2a_effect(&done["result"])["status"], json!("ok"), "{done}");
    let written = std::fs::read_to_string(lab.root.join(EP).join("notes.txt")).unwrap();
    assert_eq!((written.as_str(), lab.spent()), ("approved\n", 1));

    // Sent again, the continuation finds no task waiting: refused, saying why.
    let again = post(README_CONTINUATION);
    assert_eq!(again["error"]["code"], json!(-32001), "{again}");
    let why = &again["error"]["data"][0]["metadata"];
    assert_eq!((&why["parameter"], &why["taskId"]), (&json!("message.taskId"), &json!("write-1")), "{again}");
    assert!(why["detail"].as_str().unwrap().contains("waiting for approval"), "{again}");
    assert_eq!(lab.spent(), 1);
}
