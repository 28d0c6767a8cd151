//! `POST /mcp/` in the 2026-07-28 era, beside the legacy era on the same
//! endpoint: what a modern client sees over the wire of the real daemon, and
//! that the seed's rules (authorization first, the limits, the host-failure
//! envelope) hold in this era too.

use crate::harness::*;
use serde_json::{Value, json};

const V: &str = "2026-07-28";

fn lab() -> (Lab, String) {
    let lab = Lab::new(LabOptions { episodes: &["mod"], ..Default::default() });
    std::fs::write(lab.worktree("mod").join("hello.txt"), "hello from World\n").unwrap();
    let token = lab.mint("mod", &["world.apply=world:100", "Workspace.Read=worktree:2"]);
    (lab, token)
}

fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "blackbox", "version": "1"},
    })
}

/// A modern request as a conforming client sends it: `_meta` in the body,
/// the version, method and (for tools/call) name mirrored into headers.
fn modern(lab: &Lab, token: &str, id: Value, method: &str, params: Value) -> Reply {
    modern_with(lab, token, id, method, params, json!({}))
}

/// `modern` from a client declaring `capabilities`.
pub(crate) fn modern_with(
    lab: &Lab,
    token: &str,
    id: Value,
    method: &str,
    mut params: Value,
    capabilities: Value,
) -> Reply {
    params["_meta"] = meta(capabilities);
    let name = params.get("name").and_then(Value::as_str).map(str::to_owned);
    let auth = bearer(token);
    let mut h = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", ACCEPT_BOTH),
        ("MCP-Protocol-Version", V),
        ("Mcp-Method", method),
    ];
    if let Some(n) = &name {
        h.push(("Mcp-Name", n.as_str()));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    lab.mcp_raw(&h, &serde_json::to_vec(&body).unwrap())
}

pub(crate) fn result(r: &Reply) -> Value {
    assert_eq!((r.status, r.content_type()), (200, "application/json"), "{}", r.text());
    let body = r.json();
    assert!(body.get("error").is_none(), "{body}");
    body["result"].clone()
}

#[test]
fn a_modern_client_discovers_lists_and_calls_and_each_call_commits_one_entry() {
    let (lab, token) = lab();
    let discover = result(&modern(&lab, &token, json!(1), "server/discover", json!({})));
    assert_eq!(discover["supportedVersions"], json!([V]));
    assert_eq!(discover["capabilities"]["tools"], json!({"listChanged": false}));
    assert_eq!((&discover["resultType"], &discover["cacheScope"]), (&json!("complete"), &json!("public")));
    assert_eq!(discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "worldd");

    let list = result(&modern(&lab, &token, json!(2), "tools/list", json!({})));
    assert_eq!(list["cacheScope"], "private");
    assert!(list["ttlMs"].as_u64().is_some());
    let legacy =
        sse(&lab.mcp_version(&token, Some("2025-11-25"), &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})));
    assert_eq!(list["tools"], legacy["result"]["tools"], "the same tools, names and schemas in both eras");

    let before = lab.log_len();
    let call =
        result(&modern(&lab, &token, json!(3), "tools/call", json!({"name": "tools_decho", "arguments": {"a": 1}})));
    assert_eq!(call["resultType"], "complete");
    assert_eq!(call["isError"], false);
    assert_eq!(call["structuredContent"]["echo"], json!({"a": 1}));
    assert_eq!(lab.log_len(), before + 1, "one committed entry per call");

    let read = result(&modern(
        &lab,
        &token,
        json!(4),
        "tools/call",
        json!({"name": "ailang-read", "arguments": {"path": "hello.txt"}}),
    ));
    assert_eq!(
        (&read["isError"], &read["structuredContent"]["content"]),
        (&json!(false), &json!("hello from World\n"))
    );
    let effect = &read["structuredContent"]["world"]["effects"][0];
    assert_eq!(effect["status"], "ok");
    assert!(effect["record"].as_str().unwrap().starts_with("sha256:"), "the record walks back to its entry");
    lab.verify_clean();
}

#[test]
fn a_refused_path_and_a_denied_effect_are_results_with_is_error_not_protocol_errors() {
    let (lab, token) = lab();
    let call = |id: i64, path: &str| {
        result(&modern(
            &lab,
            &token,
            json!(id),
            "tools/call",
            json!({"name": "ailang-read", "arguments": {"path": path}}),
        ))
    };
    let refused = call(1, "../outside.txt");
    assert_eq!((&refused["isError"], &refused["structuredContent"]["ok"]), (&json!(true), &json!(false)));
    assert!(refused["structuredContent"]["refused"].as_str().unwrap().contains("refused"));
    // The session's Workspace.Read budget is 2: the third read is denied by the broker.
    assert_eq!(call(2, "hello.txt")["isError"], false);
    assert_eq!(call(3, "hello.txt")["isError"], false);
    let denied = call(4, "hello.txt");
    assert_eq!(denied["isError"], true, "{denied}");
    assert_eq!(denied["structuredContent"]["world"]["effects"][0]["status"], "denied");
}

#[test]
fn authorization_comes_first_in_the_modern_era_too() {
    let (lab, token) = lab();
    let r = modern(&lab, &"ab".repeat(32), json!(1), "server/discover", json!({}));
    assert_text_reply(&r, 401, "unknown session credential\n");
    let body = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta(json!({}))}}),
    )
    .unwrap();
    let r = lab
        .mcp_raw(&[("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH), ("MCP-Protocol-Version", V)], &body);
    assert_text_reply(&r, 401, "session credential is absent: send Authorization: Bearer <session-credential>\n");
    let r = lab.mcp_raw(&[("Origin", "http://evil.example.com"), ("MCP-Protocol-Version", V)], &body);
    assert_eq!(r.status, 403);
    assert_eq!(result(&modern(&lab, &token, json!(1), "server/discover", json!({})))["resultType"], "complete");
}

#[test]
fn modern_protocol_errors_carry_their_status_and_echo_the_id() {
    let (lab, token) = lab();
    let auth = bearer(&token);
    let post = |headers: &[(&str, &str)], body: Value| {
        let mut h =
            vec![("Authorization", auth.as_str()), ("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)];
        h.extend_from_slice(headers);
        let r = lab.mcp_raw(&h, &serde_json::to_vec(&body).unwrap());
        let v = r.json();
        (r.status, v["id"].clone(), v["error"]["code"].as_i64().unwrap_or(0))
    };
    let discover = |m: Value| json!({"jsonrpc": "2.0", "id": "x", "method": "server/discover", "params": {"_meta": m}});
    let headers = [("MCP-Protocol-Version", V), ("Mcp-Method", "server/discover")];
    assert_eq!(post(&headers, discover(json!({}))), (400, json!("x"), -32602), "missing _meta members");
    let v999 = json!({"io.modelcontextprotocol/protocolVersion": "v999.0.0", "io.modelcontextprotocol/clientCapabilities": {}});
    let h999 = [("MCP-Protocol-Version", "v999.0.0"), ("Mcp-Method", "server/discover")];
    assert_eq!(post(&h999, discover(v999.clone())), (400, json!("x"), -32022));
    assert_eq!(post(&headers, discover(v999)), (400, json!("x"), -32020), "header and _meta disagree");
    assert_eq!(
        post(&[("MCP-Protocol-Version", V), ("Mcp-Method", "TOOLS/LIST")], discover(meta(json!({})))),
        (400, json!("x"), -32020)
    );
    let init = json!({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"_meta": meta(json!({}))}});
    assert_eq!(post(&[("MCP-Protocol-Version", V), ("Mcp-Method", "initialize")], init), (404, json!(9), -32601));
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope", "_meta": meta(json!({}))}});
    let h = [("MCP-Protocol-Version", V), ("Mcp-Method", "tools/call"), ("Mcp-Name", "nope")];
    assert_eq!(post(&h, call.clone()), (400, json!(5), -32602), "unknown tool");
    let h = [("MCP-Protocol-Version", V), ("Mcp-Method", "tools/call"), ("Mcp-Name", "=?base64?bm9wZQ==?=")];
    assert_eq!(
        post(&h, call.clone()),
        (400, json!(5), -32602),
        "a base64 Mcp-Name is decoded, then the tool is unknown"
    );
    let h = [("MCP-Protocol-Version", V), ("Mcp-Method", "tools/call")];
    assert_eq!(post(&h, call), (400, json!(5), -32020), "Mcp-Name is required for tools/call");
}

const EXITS: &str = "import sys\nsys.stdin.read()\nsys.exit(3)\n";

#[test]
fn a_host_failure_in_the_modern_era_is_the_seed_envelope_with_the_cause_on_stderr() {
    let (lab, token) = lab();
    let m = lab.manifest("exits", &[("exits.py", EXITS)], json!([exec_entry("t.exits", "exits.py", None, None)]));
    lab.publish_ok(&m, false);
    let log_len = lab.log_len();
    let r = modern(&lab, &token, json!("h"), "tools/call", json!({"name": "t_dexits", "arguments": {}}));
    assert_json_reply(&r, 200, &host_failure("\"h\"", "host callback failed"));
    lab.daemon.wait_stderr("worldd: mcp refusal: tools/call mcp:mod:");
    assert_eq!(lab.log_len(), log_len);
}

#[test]
fn a_tool_this_daemon_cannot_run_is_a_tool_error_naming_what_is_missing_in_the_modern_era() {
    let (lab, _) = lab();
    let ghost = lab.mint("ghost", &["world.apply=world:5", "Workspace.Read=worktree:5"]);
    let log_len = lab.log_len();
    let call = json!({"name": "ailang-read", "arguments": {"path": "hello.txt"}});
    let told = result(&modern(&lab, &ghost, json!("h"), "tools/call", call.clone()));
    assert_eq!((&told["resultType"], &told["isError"]), (&json!("complete"), &json!(true)), "{told}");
    let text = told["content"][0]["text"].as_str().unwrap();
    let missing = "episode ghost has no worktree: create the directory";
    assert!(text.starts_with("Not run: this daemon cannot run ailang-read: ") && text.contains(missing), "{text}");
    // The stderr line says it in the same words.
    assert!(lab.daemon.wait_stderr("worldd: mcp refusal: tools/call mcp:ghost:").contains(missing));
    // The legacy eras keep the seed's envelope.
    let legacy = lab.mcp_version(
        &ghost,
        Some("2025-11-25"),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}),
    );
    assert_json_reply(&legacy, 200, &host_failure("3", "host callback failed"));
    assert_eq!(lab.log_len(), log_len);
}

#[test]
fn a_legacy_client_is_served_exactly_as_before_beside_modern_traffic() {
    let (lab, token) = lab();
    result(&modern(&lab, &token, json!(1), "server/discover", json!({})));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "_meta": {}}});
    let r = lab.mcp_version(&token, None, &init);
    assert_eq!(r.content_type(), "text/event-stream");
    assert_eq!(
        sse_data(&r),
        r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2025-11-25","serverInfo":{"name":"worldd","version":"0.1.0"}}}"#
    );
    let call = sse(&lab.mcp_version(
        &token,
        Some("2025-11-25"),
        &call_body(json!(2), "ailang-read", &json!({"path": "../x"})),
    ));
    for field in ["resultType", "isError", "_meta"] {
        assert!(call["result"].get(field).is_none(), "no {field} in a legacy reply: {call}");
    }
}
