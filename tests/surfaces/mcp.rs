//! `POST /mcp/`, rule by rule as the seed states it: status, Content-Type and
//! the exact bytes of every reply.

use crate::harness::*;
use serde_json::{Value, json};
use std::time::Duration;

const PING: &[u8] = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
const PING_SSE: &str = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
const SUPPORTED: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

fn lab() -> (Lab, String) {
    let lab = Lab::new(LabOptions { episodes: &["mcp"], ..Default::default() });
    std::fs::write(lab.worktree("mcp").join("hello.txt"), "hello from World\n").unwrap();
    let token =
        lab.mint("mcp", &["world.apply=world:100", "Workspace.Read=worktree:100", "Workspace.Write=worktree:100"]);
    (lab, token)
}

fn headers(auth: &str) -> Vec<(&str, &str)> {
    vec![("Authorization", auth), ("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)]
}

fn bad_request(message: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{{\"code\":-32600,\"message\":{}}}}}\n", json!(message))
}

// ---- authorization ----

#[test]
fn mcp_session_denials_are_401_plain_text_with_the_four_seed_texts() {
    let (lab, token) = lab();
    let expired = lab.expired_token("mcp");
    let unknown = "0123456789abcdef".repeat(4);
    let cases: Vec<(Option<String>, &str)> = vec![
        (None, "session credential is absent: send Authorization: Bearer <session-credential>\n"),
        (Some(String::new()), "session credential is absent: send Authorization: Bearer <session-credential>\n"),
        (Some(format!("Basic {token}")), "malformed Authorization header: expected Bearer <64-hex-credential>\n"),
        (
            Some(format!("Bearer {}", token.to_uppercase())),
            "malformed Authorization header: expected Bearer <64-hex-credential>\n",
        ),
        (
            Some(format!("Bearer {}", &token[..63])),
            "malformed Authorization header: expected Bearer <64-hex-credential>\n",
        ),
        (Some(format!("Bearer  {token}")), "malformed Authorization header: expected Bearer <64-hex-credential>\n"),
        (Some(format!("Basic {token}")), "malformed Authorization header: expected Bearer <64-hex-credential>\n"),
        (Some(token.clone()), "malformed Authorization header: expected Bearer <64-hex-credential>\n"),
        (Some(bearer(&unknown)), "unknown session credential\n"),
        (Some(bearer(&expired)), "session credential has expired\n"),
    ];
    for (auth, text) in cases {
        let mut h = vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)];
        if let Some(a) = &auth {
            h.push(("Authorization", a.as_str()));
        }
        let r = lab.mcp_raw(&h, PING);
        assert_text_reply(&r, 401, text);
    }
    // The credential works, so the 401s above were about the credential alone.
    assert_eq!(lab.mcp_raw(&headers(&bearer(&token)), PING).text(), PING_SSE);
}

/// A request variant: what it is, its headers (no Authorization), its body.
type Variant<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<u8>);

#[test]
fn an_unauthorised_mcp_caller_gets_the_same_401_whatever_else_the_request_says() {
    let (lab, token) = lab();
    let expired = lab.expired_token("mcp");
    let denials = [
        (None, "session credential is absent: send Authorization: Bearer <session-credential>\n"),
        (Some("Bearer nope".to_string()), "malformed Authorization header: expected Bearer <64-hex-credential>\n"),
        (Some(bearer(&"ab".repeat(32))), "unknown session credential\n"),
        (Some(bearer(&expired)), "session credential has expired\n"),
    ];
    let log_len = lab.log_len();
    let call = serde_json::to_vec(&call_body(json!(1), "tools_decho", &json!({"a": 1}))).unwrap();
    let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#;
    // Each variant is refused with its own 400 once authorised (or runs); unauthorised, only the 401 shows.
    let variants: Vec<Variant> = vec![
        ("ping", vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)], PING.to_vec()),
        ("a tools/call", vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)], call.clone()),
        ("no Content-Type", vec![("Accept", ACCEPT_BOTH)], PING.to_vec()),
        ("text/plain", vec![("Content-Type", "text/plain"), ("Accept", ACCEPT_BOTH)], PING.to_vec()),
        ("no Accept", vec![("Content-Type", "application/json")], PING.to_vec()),
        ("Accept */*", vec![("Content-Type", "application/json"), ("Accept", "*/*")], PING.to_vec()),
        (
            "version 2026-07-28",
            vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH), ("MCP-Protocol-Version", "2026-07-28")],
            PING.to_vec(),
        ),
        (
            "batch under 2025-11-25",
            vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH), ("MCP-Protocol-Version", "2025-11-25")],
            batch.to_vec(),
        ),
        ("invalid JSON", vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)], b"{not json".to_vec()),
        ("empty body", vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)], vec![]),
        ("empty batch", vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)], b"[]".to_vec()),
        (
            "a notification",
            vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)],
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
        ),
        (
            "jsonrpc 1.0",
            vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)],
            br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#.to_vec(),
        ),
        (
            "a loopback Origin",
            vec![("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH), ("Origin", "http://localhost:3000")],
            PING.to_vec(),
        ),
    ];
    for (auth, expected) in &denials {
        for (what, h, body) in &variants {
            let mut h = h.clone();
            if let Some(a) = auth {
                h.push(("Authorization", a.as_str()));
            }
            let r = lab.mcp_raw(&h, body);
            assert_eq!(r.headers.iter().filter(|(n, _)| n.starts_with("mcp-")).count(), 0, "{what}: {r:?}");
            assert_text_reply(&r, 401, expected);
        }
    }
    assert_eq!(lab.log_len(), log_len, "nothing ran");
    // The same variants, authorised, are told apart: the 401s hid them.
    let auth = bearer(&token);
    let answers: Vec<u16> = variants
        .iter()
        .map(|(_, h, body)| {
            let mut h = h.clone();
            h.push(("Authorization", auth.as_str()));
            lab.mcp_raw(&h, body).status
        })
        .collect();
    assert_eq!(answers, [200, 200, 400, 400, 400, 400, 400, 400, 400, 400, 400, 202, 400, 200]);
}

/// Two checks run before authorization, as the upstream handler (protocols.md
/// §2.1) orders them: a method other than POST is 405, and a body declared
/// over 4 MiB is refused before the credential is looked at (on its length
/// alone: no byte of a body is read without a session). The Host/Origin guard
/// also runs first. These are the only things an unauthorised caller can learn.
#[test]
fn method_body_size_and_origin_checks_run_before_authorization() {
    let (lab, _) = lab();
    for path in ["/mcp/", "/mcp"] {
        let r = http(lab.addr(), "GET", path, &[], b"");
        assert_text_reply(&r, 405, "Method Not Allowed\n");
        assert_eq!(r.header("allow"), Some("POST"));
    }
    let big = vec![b' '; (4 << 20) + 1];
    let r = lab.mcp_raw(&[("Content-Type", "application/json"), ("Accept", ACCEPT_BOTH)], &big);
    assert_json_reply(&r, 200, &host_failure("null", "invalid MCP request body"));
    let r = lab.mcp_raw(&[("Origin", "http://evil.example.com")], PING);
    assert_text_reply(&r, 403, "forbidden: the Origin header is not a loopback origin\n");
}

// ---- transport ----

#[test]
fn content_type_must_be_application_json() {
    let (lab, token) = lab();
    let auth = bearer(&token);
    let refused = bad_request("Content-Type must be application/json");
    for ct in [None, Some("text/plain"), Some("application/jsonx"), Some("application/x-www-form-urlencoded"), Some("")]
    {
        let mut h = vec![("Authorization", auth.as_str()), ("Accept", ACCEPT_BOTH)];
        if let Some(ct) = ct {
            h.push(("Content-Type", ct));
        }
        assert_json_reply(&lab.mcp_raw(&h, PING), 400, &refused);
    }
    for ok in ["application/json", "application/json; charset=utf-8", "Application/JSON"] {
        let h = [("Authorization", auth.as_str()), ("Accept", ACCEPT_BOTH), ("Content-Type", ok)];
        assert_eq!(lab.mcp_raw(&h, PING).text(), PING_SSE, "{ok}");
    }
}

#[test]
fn accept_must_list_both_json_and_event_stream_and_wildcards_do_not_count() {
    let (lab, token) = lab();
    let auth = bearer(&token);
    let refused = bad_request("Accept must list both application/json and text/event-stream");
    let bad: [&[&str]; 7] = [
        &[],
        &["application/json"],
        &["text/event-stream"],
        &["*/*"],
        &["application/*, text/*"],
        &["*/*, text/event-stream"],
        &["application/json-seq, text/event-streams"],
    ];
    for accept in bad {
        let mut h = vec![("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        h.extend(accept.iter().map(|a| ("Accept", *a)));
        assert_json_reply(&lab.mcp_raw(&h, PING), 400, &refused);
    }
    let good: [&[&str]; 4] = [
        &["application/json, text/event-stream"],
        &["text/event-stream;q=0.9, application/json;q=1"],
        &["application/json", "text/event-stream"],
        &["*/*, application/json, text/event-stream"],
    ];
    for accept in good {
        let mut h = vec![("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        h.extend(accept.iter().map(|a| ("Accept", *a)));
        assert_eq!(lab.mcp_raw(&h, PING).text(), PING_SSE, "{accept:?}");
    }
}

#[test]
fn the_three_protocol_versions_are_accepted_and_any_other_is_400_with_a_32600_body() {
    let (lab, token) = lab();
    let auth = bearer(&token);
    for v in SUPPORTED {
        let mut h = headers(&auth);
        h.push(("MCP-Protocol-Version", v));
        assert_eq!(lab.mcp_raw(&h, PING).text(), PING_SSE, "{v}");
    }
    // Absent or empty: 2025-03-26, the only version that takes a batch.
    let batch = br#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#;
    let batch_sse = "event: message\ndata: [{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}]\n\n";
    assert_eq!(lab.mcp_raw(&headers(&auth), batch).text(), batch_sse);
    let mut h = headers(&auth);
    h.push(("MCP-Protocol-Version", ""));
    assert_eq!(lab.mcp_raw(&h, batch).text(), batch_sse);
    for v in ["2026-07-28", "2024-11-05", "2025-3-26", "latest"] {
        let mut h = headers(&auth);
        h.push(("MCP-Protocol-Version", v));
        let r = lab.mcp_raw(&h, PING);
        let message =
            format!("unsupported MCP-Protocol-Version \"{v}\" (supported: 2025-11-25, 2025-06-18, 2025-03-26)");
        assert_json_reply(&r, 400, &bad_request(&message));
        let body = r.json();
        assert!(body["error"].get("data").is_none(), "no modern-era data member: {body}");
        assert_ne!(body["error"]["code"], -32022, "never the modern unsupported-version code");
    }
}

#[test]
fn a_body_over_4_mib_is_refused_and_one_of_4_mib_is_read() {
    let (lab, token) = lab();
    let auth = bearer(&token);
    // Exactly 4 MiB: a ping padded with whitespace.
    let mut body = PING.to_vec();
    body.resize(4 << 20, b' ');
    assert_eq!(lab.mcp_raw(&headers(&auth), &body).text(), PING_SSE);
    body.push(b' ');
    let r = lab.mcp_raw(&headers(&auth), &body);
    assert_json_reply(&r, 200, &host_failure("null", "invalid MCP request body"));
}

#[test]
fn methods_other_than_post_are_405_with_allow_post() {
    let (lab, token) = lab();
    let auth = bearer(&token);
    for method in ["GET", "DELETE", "PUT", "PATCH"] {
        for path in ["/mcp/", "/mcp"] {
            let r = http(lab.addr(), method, path, &headers(&auth), b"");
            assert_text_reply(&r, 405, "Method Not Allowed\n");
            assert_eq!(r.header("allow"), Some("POST"), "{method} {path}");
        }
    }
}

// ---- methods ----

#[test]
fn initialize_echoes_a_supported_version_or_offers_the_newest_and_advertises_no_list_changes() {
    let (lab, token) = lab();
    let init = |v: Value| {
        let mut params = json!({"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
        if !v.is_null() {
            params["protocolVersion"] = v;
        }
        lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}))
    };
    let result = |v: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"capabilities\":{{\"tools\":{{\"listChanged\":false}}}},\"protocolVersion\":\"{v}\",\"serverInfo\":{{\"name\":\"worldd\",\"version\":\"{}\"}}}}}}",
            env!("CARGO_PKG_VERSION")
        )
    };
    for v in SUPPORTED {
        let r = init(json!(v));
        assert_eq!(sse_data(&r), result(v));
        assert!(r.header("mcp-session-id").is_none(), "stateless: no session header");
    }
    for other in [json!("1999-01-01"), json!("2099-01-01"), json!("2026-07-28"), json!(5), Value::Null] {
        assert_eq!(sse_data(&init(other.clone())), result("2025-11-25"), "{other}");
    }
    // The header is not compared with the params.
    let r = lab.mcp_version(
        &token,
        Some("2025-06-18"),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(sse_data(&r), result("2025-03-26"));
}

#[test]
fn ping_answers_an_empty_result_for_any_id() {
    let (lab, token) = lab();
    for (id, wire) in [(json!(7), "7"), (json!(0), "0"), (json!("abc"), "\"abc\""), (json!(-1.5), "-1.5")] {
        let r = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        assert_eq!(
            r.text(),
            format!("event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{wire},\"result\":{{}}}}\n\n")
        );
    }
}

#[test]
fn notifications_and_responses_are_accepted_with_202_and_no_body() {
    let (lab, token) = lab();
    let log_len = lab.log_len();
    let bodies = [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "tools_decho", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 4, "result": {}}),
        json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "m"}}),
        json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}, {"jsonrpc": "2.0", "id": 1, "result": {}}]),
    ];
    for b in bodies {
        let r = lab.mcp(&token, &b);
        assert_eq!((r.status, r.body.len()), (202, 0), "{b}: {r:?}");
        assert_eq!(r.content_type(), "application/json");
    }
    assert_eq!(lab.log_len(), log_len, "a notification is never run, not even tools/call");
}

#[test]
fn an_unknown_method_is_32601_method_not_found() {
    let (lab, token) = lab();
    for (m, quoted) in [("x", r#"\"x\""#), ("resources/list", r#"\"resources/list\""#), ("a\"b", r#"\"a\\\"b\""#)] {
        let r = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 3, "method": m}));
        let expected =
            format!(r#"{{"jsonrpc":"2.0","id":3,"error":{{"code":-32601,"message":"method not found: {quoted}"}}}}"#);
        assert_eq!(sse_data(&r), expected, "{m}");
    }
}

#[test]
fn unknown_and_invisible_tools_are_32602_unknown_tool() {
    let (lab, token) = lab();
    let echo_only = lab.mint("mcp", &["world.apply=world:5"]);
    let log_len = lab.log_len();
    let unknown = |t: &str, name: &str| {
        let r = lab.mcp(t, &call_body(json!(9), name, &json!({"path": "hello.txt", "content": "x"})));
        let message = format!("unknown tool {}", json!(name));
        let expected = format!(r#"{{"jsonrpc":"2.0","id":9,"error":{{"code":-32602,"message":{}}}}}"#, json!(message));
        assert_eq!(sse_data(&r), expected, "{name}");
    };
    unknown(&token, "nope");
    unknown(&token, "tools.echo"); // the transition id, not its MCP name
    unknown(&token, "");
    // Visible to one session, invisible to the other: the same answer as a tool that does not exist.
    assert!(lab.mcp_call_ok(&token, "ailang-read", &json!({"path": "hello.txt"}))["structuredContent"]["ok"] == true);
    unknown(&echo_only, "ailang-read");
    unknown(&echo_only, "ailang-write");
    assert_eq!(lab.log_len(), log_len + 1, "only the visible call ran");
    assert!(!lab.worktree("mcp").join("x").exists());
}

#[test]
fn bad_tools_call_params_are_32602_invalid_params() {
    let (lab, token) = lab();
    let log_len = lab.log_len();
    let cases = [
        (json!([1]), "invalid params: params must be a JSON object"),
        (json!("s"), "invalid params: params must be a JSON object"),
        (json!({"name": 5}), "invalid params: name must be a string"),
        (json!({"name": "tools_decho", "arguments": [1]}), "invalid params: arguments must be a JSON object"),
        (json!({"name": "tools_decho", "arguments": "x"}), "invalid params: arguments must be a JSON object"),
        (json!({"name": "tools_decho", "arguments": null}), "invalid params: arguments must be a JSON object"),
    ];
    for (params, message) in cases {
        let r = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}));
        let expected = format!(r#"{{"jsonrpc":"2.0","id":5,"error":{{"code":-32602,"message":{}}}}}"#, json!(message));
        assert_eq!(sse_data(&r), expected, "{params}");
    }
    // Absent arguments are no arguments.
    let r =
        lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "tools_decho"}}));
    assert_eq!(sse(&r)["result"]["structuredContent"]["echo"], json!({}));
    assert_eq!(lab.log_len(), log_len + 1);
}

#[test]
fn arguments_failing_the_input_schema_are_refused_before_anything_is_journaled() {
    let (lab, token) = lab();
    let log_len = lab.log_len();
    let journal = lab.journal_counts();
    let cases = [
        ("ailang-read", json!({}), "invalid params: \"path\" is a required property"),
        ("ailang-read", json!({"path": 5}), "invalid params: at /path: 5 is not of type \"string\""),
        ("ailang-write", json!({"path": "a.txt"}), "invalid params: \"content\" is a required property"),
    ];
    for (tool, args, message) in cases {
        let r = lab.mcp(&token, &call_body(json!(6), tool, &args));
        let expected = format!(r#"{{"jsonrpc":"2.0","id":6,"error":{{"code":-32602,"message":{}}}}}"#, json!(message));
        assert_eq!(sse_data(&r), expected, "{tool} {args}");
    }
    // An extra argument where the schema forbids it.
    let r = lab.mcp(&token, &call_body(json!(6), "ailang-read", &json!({"path": "hello.txt", "extra": 1})));
    let (code, message) = rpc_error(&sse(&r));
    assert_eq!(code, -32602);
    assert!(message.starts_with("invalid params: ") && message.contains("extra"), "{message}");
    assert_eq!(lab.log_len(), log_len, "nothing committed");
    assert_eq!(lab.journal_counts(), journal, "no task row, no effect intent");
    assert!(!lab.worktree("mcp").join("a.txt").exists());
}

// ---- results ----

#[test]
fn a_tools_call_result_is_one_sse_event_with_the_output_as_text_and_as_structured_content() {
    let (lab, token) = lab();
    let args = json!({"s": "<a & b>", "n": 12345678901234567890u64, "u": "é\u{2028}"});
    let r = lab.mcp(&token, &call_body(json!(2), "tools_decho", &args));
    let output = json!({"echo": args, "world": {"effects": [], "plan": null}});
    // The text is the output's compact JSON; the whole event is Go-escaped once.
    let text = serde_json::to_string(&output).unwrap();
    let go = |s: String| {
        s.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026").replace('\u{2028}', "\\u2028")
    };
    let expected = format!(
        "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":{}}}],\"structuredContent\":{}}}}}\n\n",
        go(serde_json::to_string(&text).unwrap()),
        go(text.clone())
    );
    assert_eq!(r.text(), expected);
    let result = &sse(&r)["result"];
    assert_eq!(serde_json::from_str::<Value>(result["content"][0]["text"].as_str().unwrap()).unwrap(), output);
    assert!(result.get("isError").is_none());

    // A coding tool: the handler's fields plus the world block; the record walks back to the entry.
    let result = lab.mcp_call_ok(&token, "ailang-read", &json!({"path": "hello.txt"}));
    let out = &result["structuredContent"];
    assert_eq!(serde_json::from_str::<Value>(result["content"][0]["text"].as_str().unwrap()).unwrap(), *out);
    assert_eq!((&out["ok"], &out["content"]), (&json!(true), &json!("hello from World\n")));
    assert!(out["tool"].as_str().unwrap().starts_with("sha256:"), "{out}");
    assert_eq!(out["policy_digest"].as_str().unwrap().len(), 64, "{out}");
    let effects = out["world"]["effects"].as_array().unwrap();
    assert_eq!(effects.len(), 1);
    assert_eq!((&effects[0]["id"], &effects[0]["status"]), (&json!("e1"), &json!("ok")));
    let record = effects[0]["record"].as_str().unwrap();
    assert!(!result.to_string().contains("entry_index"), "an MCP result carries no entry index");
    let meta = lab.get_json(&format!("/v1/objects/{record}"));
    assert_eq!(meta["semanticId"], "world/effect-record/v2");
    let entry = lab.log().into_iter().rev().find(|e| {
        let inv = lab.object_json(e["transitionRef"].as_str().unwrap());
        inv["effects"].as_array().is_some_and(|refs| refs.contains(&json!(record)))
    });
    let inv = lab.object_json(entry.expect("an entry carries the record")["transitionRef"].as_str().unwrap());
    assert_eq!((&inv["skillId"], &inv["plan"]), (&json!("ailang-read"), &out["world"]["plan"]));
    assert_eq!(lab.object_json(inv["output"].as_str().unwrap()), *out, "the committed output is the reply");
    let invocation = inv["invocationId"].as_str().unwrap();
    let task = invocation.strip_prefix("mcp:mcp:").unwrap_or_else(|| panic!("{invocation}"));
    assert!(task.len() == 64 && task.bytes().all(|b| b.is_ascii_hexdigit()), "a random 64-hex task id: {task}");

    // A plan refusal: the plan's result plus a world block with no effects.
    let out = &lab.mcp_call_ok(&token, "ailang-read", &json!({"path": "../etc/passwd"}))["structuredContent"];
    assert_eq!(out["ok"], false);
    assert_eq!(out["world"]["effects"], json!([]));
    assert!(out["world"]["plan"].as_str().unwrap().starts_with("sha256:"));
}

#[test]
fn mcp_request_ids_give_no_idempotency_every_call_is_a_new_invocation() {
    let (lab, token) = lab();
    let log_len = lab.log_len();
    let body = call_body(json!(1), "ailang-write", &json!({"path": "w.txt", "content": "x"}));
    for _ in 0..3 {
        assert_eq!(sse(&lab.mcp(&token, &body))["result"]["structuredContent"]["ok"], true);
    }
    let records = lab.invocation_records();
    let ids: std::collections::BTreeSet<&str> =
        records[log_len - 1..].iter().map(|r| r["invocationId"].as_str().unwrap()).collect();
    assert_eq!((lab.log_len(), ids.len()), (log_len + 3, 3), "three calls, three invocations");
    assert_eq!(lab.journal_counts().1, 3, "the effect ran three times");
}

// ---- batches ----

#[test]
fn batches_are_refused_with_400_under_2025_06_18_and_2025_11_25() {
    let (lab, token) = lab();
    let log_len = lab.log_len();
    let batch = json!([call_body(json!(1), "tools_decho", &json!({}))]);
    for v in ["2025-06-18", "2025-11-25"] {
        let r = lab.mcp_version(&token, Some(v), &batch);
        assert_json_reply(
            &r,
            400,
            &bad_request(&format!("batch requests are not supported under protocol version {v}")),
        );
    }
    assert_eq!(lab.log_len(), log_len);
    let r = lab.mcp_version(&token, Some("2025-03-26"), &batch);
    assert_eq!(sse(&r).as_array().unwrap().len(), 1);
}

#[test]
fn a_batch_runs_its_calls_in_order_each_a_new_invocation_even_with_repeated_ids() {
    let (lab, token) = lab();
    let log_len = lab.log_len();
    let batch = json!([
        call_body(json!(1), "tools_decho", &json!({"n": 1})),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call_body(json!(1), "tools_decho", &json!({"n": 2})),
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        call_body(json!(1), "ailang-write", &json!({"path": "b.txt", "content": "batch"})),
        {"jsonrpc": "2.0", "id": 1, "method": "nope"},
        call_body(json!(1), "ailang-read", &json!({"path": "b.txt"})),
        {"jsonrpc": "2.0", "id": 1, "result": {}},
    ]);
    let r = lab.mcp(&token, &batch);
    let items = sse(&r);
    let items = items.as_array().expect("one event holding the array");
    assert_eq!(items.len(), 6, "one response per request, none for the notification or the response");
    assert!(items.iter().all(|i| i["id"] == 1 && i["jsonrpc"] == "2.0"));
    assert_eq!(items[0]["result"]["structuredContent"]["echo"], json!({"n": 1}));
    assert_eq!(items[1]["result"]["structuredContent"]["echo"], json!({"n": 2}));
    assert_eq!(items[2]["result"], json!({}));
    assert_eq!(items[3]["result"]["structuredContent"]["ok"], true);
    assert_eq!(items[4]["error"]["code"], -32601);
    // Sequential: the read saw the write of the item before it.
    assert_eq!(items[5]["result"]["structuredContent"]["content"], "batch");

    let records = lab.invocation_records();
    assert_eq!(lab.log_len(), log_len + 4, "the log grew by the number of calls");
    let ids: Vec<&str> = records[log_len - 1..].iter().map(|r| r["invocationId"].as_str().unwrap()).collect();
    let distinct: std::collections::BTreeSet<&&str> = ids.iter().collect();
    assert_eq!(distinct.len(), 4, "a new random task id per call: {ids:?}");
    assert!(ids.iter().all(|id| id.starts_with("mcp:mcp:") && id.len() == "mcp:mcp:".len() + 64), "{ids:?}");
    let skills: Vec<&str> = records[log_len - 1..].iter().map(|r| r["skillId"].as_str().unwrap()).collect();
    assert_eq!(skills, ["tools.echo", "tools.echo", "ailang-write", "ailang-read"], "run in body order");
}

#[test]
fn a_batch_with_a_failing_call_gets_one_plain_json_envelope_with_id_null_after_earlier_items_committed() {
    let (lab, _) = lab();
    // An episode with no worktree: its coding tools are visible but have no handler (R8).
    let ghost = lab.mint("ghost", &["world.apply=world:5", "Workspace.Read=worktree:5"]);
    let log_len = lab.log_len();
    let batch = json!([
        call_body(json!(1), "tools_decho", &json!({"first": true})),
        call_body(json!(2), "ailang-read", &json!({"path": "hello.txt"})),
        call_body(json!(3), "tools_decho", &json!({"third": true})),
    ]);
    let r = lab.mcp(&ghost, &batch);
    assert_json_reply(&r, 200, &host_failure("null", "host callback failed"));
    assert_eq!(r.header("cache-control"), None, "not SSE");
    let records = lab.invocation_records();
    assert_eq!(lab.log_len(), log_len + 1, "the first item committed; the third never ran");
    assert_eq!(records.last().unwrap()["skillId"], "tools.echo");
    let input = lab.object_json(records.last().unwrap()["input"].as_str().unwrap());
    assert_eq!(input, json!({"first": true}));
    lab.daemon.wait_stderr("worldd: mcp refusal: tools/call mcp:ghost:");
}

/// Admission runs again for each item when it runs: a tool the registry
/// stops admitting between two items of one batch refuses the second.
#[test]
fn each_batch_item_is_admitted_afresh_when_it_runs() {
    let (lab, token) = lab();
    let gate = Gate::new(&lab.root, "batch");
    let source = gate_source(&gate.dir);
    let v1 = lab.manifest(
        "v1",
        &[("gate.py", &source)],
        json!([exec_entry("t.gate", "gate.py", None, None), echo_entry("t.victim", ("world.apply", "world", 1))]),
    );
    lab.publish_ok(&v1, false);
    let v2 = lab.manifest("v2", &[], json!([echo_entry("t.victim", ("Nobody.Has", "this", 1))]));
    let log_len = lab.log_len();
    let batch = json!([call_body(json!(1), "t_dgate", &json!({"k": 1})), call_body(json!(2), "t_dvictim", &json!({}))]);
    let r = std::thread::scope(|s| {
        let call = s.spawn(|| lab.mcp(&token, &batch));
        gate.wait_started();
        // Both items were admitted by the surface when the POST began; now the second loses its grant.
        lab.publish_ok(&v2, true);
        gate.open();
        call.join().unwrap()
    });
    assert_json_reply(&r, 200, &host_failure("null", "host callback failed"));
    assert_eq!(lab.log_len(), log_len + 1, "the first item committed");
    assert_eq!(lab.invocation_records().last().unwrap()["skillId"], "t.gate");
    let line = lab.daemon.wait_stderr("\"not authorized\"");
    assert!(line.starts_with("worldd: mcp refusal: tools/call mcp:mcp:"), "{line}");
}

// ---- tool names and schemas ----

#[test]
fn tool_names_are_the_transition_ids_with_the_reversible_escape() {
    let (lab, token) = lab();
    let ids = ["a_b.c/d", "world/recovery-transition/v1", &"n".repeat(64), "x-y"];
    let entries: Vec<Value> = ids.iter().map(|id| echo_entry(id, ("world.apply", "world", 1))).collect();
    lab.publish_ok(&lab.manifest("names", &[], Value::Array(entries)), false);
    let r = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let tools = sse(&r)["result"]["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted by name");
    for expected in
        ["a_ub_dc_sd", "world_srecovery-transition_sv1", &"n".repeat(64), "x-y", "tools_decho", "ailang-read"]
    {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    for t in &tools {
        let keys: Vec<&String> = t.as_object().unwrap().keys().collect();
        assert!(
            keys.iter().all(|k| ["name", "description", "inputSchema", "outputSchema"].contains(&k.as_str())),
            "{t}"
        );
    }
    let log_len = lab.log_len();
    let out = &lab.mcp_call_ok(&token, "a_ub_dc_sd", &json!({"v": 1}))["structuredContent"];
    assert_eq!(out["echo"], json!({"v": 1}));
    assert_eq!(lab.invocation_record(log_len as u64)["skillId"], "a_b.c/d");
    lab.mcp_call_ok(&token, &"n".repeat(64), &json!({}));
}

#[test]
fn a_transition_whose_escaped_name_exceeds_64_bytes_refuses_the_whole_surface() {
    let (mut lab, token) = lab();
    let long = format!("a{}", "/".repeat(32)); // escapes to 65 bytes
    // Publishing refuses it outright.
    let m = lab.manifest("long", &[], json!([echo_entry(&long, ("world.apply", "world", 1))]));
    let o = lab.publish_manifest(&m, false);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("name is 65 bytes long, over the 64-byte limit"), "{}", text(&o.stderr));

    // A registry holding one anyway (written through the store API on the stopped daemon).
    let long65 = "l".repeat(65);
    let other = lab.mint("mcp", &["world.apply=world:5"]);
    let sees_it = lab.mint("mcp", &["world.apply=world:5", "Long.Name=x:1"]);
    lab.kill9();
    crate::store::add_descriptor(&lab.db, "tools.echo", &long65, ("Long.Name", "x", 0));
    lab.restart();
    let log_len = lab.log_len();
    let bodies = [
        json!({"jsonrpc": "2.0", "id": 11, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}),
        json!({"jsonrpc": "2.0", "id": 12, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 13, "method": "tools/list"}),
        call_body(json!(14), "tools_decho", &json!({})),
    ];
    for b in &bodies {
        let r = lab.mcp(&sees_it, b);
        assert_json_reply(&r, 200, &host_failure(&b["id"].to_string(), "host callback failed"));
    }
    let line = lab.daemon.wait_stderr("worldd: mcp refusal: tool surface refused: ");
    assert!(line.contains(&long65) && line.contains("65 bytes"), "{line}");
    assert_eq!(lab.log_len(), log_len, "nothing ran");
    // Sessions that do not see the long name keep their whole surface.
    let r = lab.mcp(&other, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(sse(&r)["result"]["tools"].as_array().unwrap().len(), 1);
    let r = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert!(sse(&r)["result"]["tools"].as_array().unwrap().len() > 1);
    // A2A is not the MCP surface: the skill id is verbatim and callable.
    let v = lab.send(&sees_it, "long-1", &long65, &json!({"x": 1}));
    assert_eq!(v["result"]["artifacts"][0]["parts"][0]["data"]["echo"], json!({"x": 1}), "{v}");
}

/// `worldd publish` accepts any JSON object as an input schema; one whose
/// `type` is not `"object"` refuses the MCP surface of every session that sees it.
#[test]
fn an_input_schema_of_another_type_refuses_the_whole_surface() {
    let (mut lab, token) = lab();
    let mut entry = echo_entry("t.array", ("Array.Schema", "x", 0));
    entry["inputSchema"] = json!({"type": "array"});
    // Publishing refuses it outright.
    let o = lab.publish_manifest(&lab.manifest("array", &[], json!([entry])), false);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("inputSchema.type must be \"object\""), "{}", text(&o.stderr));
    // A registry holding one anyway (written through the store API on the stopped daemon).
    let sees_it = lab.mint("mcp", &["world.apply=world:5", "Array.Schema=x:1"]);
    lab.kill9();
    crate::store::add_descriptor_with(&lab.db, "tools.echo", "t.array", ("Array.Schema", "x", 0), |d| {
        d["inputSchema"] = json!({"type": "array"});
    });
    lab.restart();
    let r = lab.mcp(&sees_it, &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert_json_reply(&r, 200, &host_failure("3", "host callback failed"));
    let line = lab.daemon.wait_stderr("worldd: mcp refusal: tool surface refused: ");
    assert!(line.contains("t.array") && line.contains("expected \"object\""), "{line}");
    let r = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert!(sse(&r)["result"]["tools"].as_array().is_some(), "sessions that do not see it are unaffected");
}

#[test]
fn an_input_schema_without_a_top_level_type_gains_type_object_and_keeps_its_constraints() {
    let (lab, token) = lab();
    let mut entry = echo_entry("t.schema", ("world.apply", "world", 1));
    entry["inputSchema"] = json!({"properties": {"a": {"type": "string", "maxLength": 3}}, "required": ["a"]});
    let mut typed = echo_entry("t.typed", ("world.apply", "world", 1));
    typed["inputSchema"] = json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 123456789012345678901234567890u128 as f64}}});
    lab.publish_ok(&lab.manifest("schema", &[], json!([entry, typed])), false);
    let r = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let data = sse_data(&r);
    assert!(
        data.contains(
            r#""inputSchema":{"properties":{"a":{"maxLength":3,"type":"string"}},"required":["a"],"type":"object"}"#
        ),
        "{data}"
    );
    let tools = sse(&r)["result"]["tools"].clone();
    let typed_tool = tools.as_array().unwrap().iter().find(|t| t["name"] == "t_dtyped").unwrap();
    assert_eq!(typed_tool["inputSchema"]["type"], "object");
    // The constraints still bind.
    for (args, message) in [
        (json!({}), "invalid params: \"a\" is a required property"),
        (json!({"a": "abcd"}), "invalid params: at /a: \"abcd\" is longer than 3 characters"),
        (json!({"a": 1}), "invalid params: at /a: 1 is not of type \"string\""),
    ] {
        let r = lab.mcp(&token, &call_body(json!(1), "t_dschema", &args));
        assert_eq!(rpc_error(&sse(&r)), (-32602, message.to_string()), "{args}");
    }
    assert_eq!(
        lab.mcp_call_ok(&token, "t_dschema", &json!({"a": "ab"}))["structuredContent"]["echo"],
        json!({"a": "ab"})
    );
}

// ---- host failures ----

#[test]
fn r8_is_the_host_failure_envelope_in_plain_json_with_the_cause_on_stderr() {
    let (lab, _) = lab();
    let ghost = lab.mint("ghost", &["world.apply=world:5", "Workspace.Read=worktree:5"]);
    let log_len = lab.log_len();
    for (id, wire) in [(json!(2), "2"), (json!("req-a"), "\"req-a\"")] {
        let r = lab.mcp(&ghost, &call_body(id, "ailang-read", &json!({"path": "hello.txt"})));
        assert_json_reply(&r, 200, &host_failure(wire, "host callback failed"));
        assert_eq!(r.header("cache-control"), None, "plain JSON, not SSE");
    }
    let line = lab.daemon.wait_stderr("worldd: mcp refusal: tools/call mcp:ghost:");
    let rest = line.strip_prefix("worldd: mcp refusal: tools/call mcp:ghost:").unwrap();
    let (task, cause) = rest.split_once(": ").unwrap();
    assert!(task.len() == 64 && task.bytes().all(|b| b.is_ascii_hexdigit()), "{line}");
    let expected = format!(
        "\"transition declares an effect this daemon has no handler for (episode ghost has no worktree: create the directory {})\"",
        lab.ws.join("ghost").display()
    );
    assert_eq!(cause, expected, "the line says what is missing and how to provide it");
    assert_eq!(lab.log_len(), log_len);
}

#[test]
fn capacity_exceeded_answers_at_once_when_every_host_callback_slot_is_busy() {
    let lab = Lab::new(LabOptions { host_callbacks: Some(1), ..Default::default() });
    let token = lab.mint("cap", &["world.apply=world:100"]);
    let gate = Gate::new(&lab.root, "cap");
    lab.publish_ok(
        &lab.manifest(
            "gate",
            &[("gate.py", &gate_source(&gate.dir))],
            json!([exec_entry("t.gate", "gate.py", None, None)]),
        ),
        false,
    );
    let log_len = lab.log_len();
    let (first, second, a2a) = std::thread::scope(|s| {
        let slow = s.spawn(|| lab.mcp(&token, &call_body(json!(1), "t_dgate", &json!({}))));
        gate.wait_started();
        let second = lab.mcp(&token, &call_body(json!(2), "tools_decho", &json!({})));
        // The limit is MCP's: A2A calls do not take host callback slots.
        let a2a = lab.send(&token, "cap-a2a", "tools.echo", &json!({}));
        gate.open();
        (slow.join().unwrap(), second, a2a)
    });
    assert_json_reply(&second, 200, &host_failure("2", "host callback capacity exceeded"));
    assert_eq!(sse(&first)["result"]["structuredContent"]["gated"], json!({}));
    assert!(a2a.get("result").is_some(), "{a2a}");
    assert_eq!(lab.log_len(), log_len + 2, "the refused call never ran");
    // The slot is free again.
    lab.mcp_call_ok(&token, "tools_decho", &json!({}));
    lab.daemon.wait_stderr("host callback slots are busy");
}

#[test]
fn eight_host_callbacks_run_at_once_by_default_and_the_ninth_is_refused() {
    let lab = Lab::new(LabOptions::default());
    let token = lab.mint("cap", &["world.apply=world:100"]);
    let gate = Gate::new(&lab.root, "cap8");
    lab.publish_ok(
        &lab.manifest(
            "gate",
            &[("gate.py", &gate_source(&gate.dir))],
            json!([exec_entry("t.gate", "gate.py", None, None)]),
        ),
        false,
    );
    let log_len = lab.log_len();
    let (held, ninth) = std::thread::scope(|s| {
        let held: Vec<_> = (0..8)
            .map(|i| {
                let (lab, token) = (&lab, &token);
                s.spawn(move || lab.mcp(token, &call_body(json!(i), "t_dgate", &json!({"i": i}))))
            })
            .collect();
        gate.wait_started_n(8);
        let ninth = lab.mcp(&token, &call_body(json!(9), "tools_decho", &json!({})));
        gate.open();
        (held.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>(), ninth)
    });
    assert_json_reply(&ninth, 200, &host_failure("9", "host callback capacity exceeded"));
    for (i, r) in held.iter().enumerate() {
        assert_eq!(sse(r)["result"]["structuredContent"]["gated"], json!({"i": i}));
    }
    assert_eq!(lab.log_len(), log_len + 8);
}

const GATE_EFFECT: &str = r#"#!/bin/sh
echo run >> gate-runs.txt
: > started
i=0
while [ ! -e go ] && [ "$i" -lt 300 ]; do sleep 0.02; i=$((i+1)); done
rm -f started
echo gated
"#;

const GATED_EXEC: &str = r#"import json, sys
json.loads(sys.stdin.read())
effect = {"id": "e1", "effect": "Workspace.Exec", "scope": "worktree", "cost": 1,
          "payload": {"op": "exec", "command": "gate", "args": []}}
sys.stdout.write(json.dumps({"plan": "world/effect-plan/v1", "effects": [effect], "finish": False, "result": None}))
"#;

/// EffectsUnrecorded over MCP: the caller sees only `host callback failed`;
/// the records are on stderr and in the store.
#[test]
fn effects_unrecorded_over_mcp_is_host_callback_failed_with_the_records_on_stderr() {
    let lab = Lab::new(LabOptions { episodes: &["gate"], exec: &[("gate", GATE_EFFECT)], ..Default::default() });
    let wt = lab.worktree("gate");
    let v2_source = format!("{GATED_EXEC}# revision 2\n");
    let entry = exec_entry("gated-exec", "g.py", Some("Workspace.Exec"), Some(("Workspace.Exec", "worktree", 0)));
    lab.publish_ok(&lab.manifest("v1", &[("g.py", GATED_EXEC)], json!([entry.clone()])), false);
    let v2 = lab.manifest("v2", &[("g.py", &v2_source)], json!([entry]));
    let token = lab.mint("gate", &["Workspace.Exec=worktree:5"]);
    let log_len = lab.log_len();
    let r = std::thread::scope(|s| {
        let call = s.spawn(|| lab.mcp(&token, &call_body(json!(8), "gated-exec", &json!({}))));
        wait_for("the effect to start", Duration::from_secs(20), || wt.join("started").exists());
        lab.publish_ok(&v2, true);
        std::fs::write(wt.join("go"), "").unwrap();
        call.join().unwrap()
    });
    assert_json_reply(&r, 200, &host_failure("8", "host callback failed"));
    let line = lab.daemon.wait_stderr("; effect records: ");
    assert!(line.starts_with("worldd: mcp refusal: tools/call mcp:gate:"), "{line}");
    assert!(line.contains("effects were requested but the invocation was not confirmed committed"), "{line}");
    let record = line.rsplit("effect records: ").next().unwrap().trim_end_matches('"');
    let rec = lab.object_json(record);
    assert_eq!((&rec["allowed"], &rec["budgetBefore"], &rec["budgetAfter"]), (&json!(true), &json!(5), &json!(4)));
    assert_eq!(lab.log_len(), log_len, "no entry committed");
    assert_eq!(std::fs::read_to_string(wt.join("gate-runs.txt")).unwrap(), "run\n", "the effect ran once");
}

// ---- DNS rebinding ----

#[test]
fn a_non_loopback_origin_or_host_is_403_on_every_agent_route() {
    let (lab, token) = lab();
    let auth = bearer(&token);
    for path in ["/mcp/", "/a2a/", "/.well-known/agent.json"] {
        let method = if path.starts_with("/.well") { "GET" } else { "POST" };
        for (name, value, text) in [
            ("Origin", "http://evil.example.com", "forbidden: the Origin header is not a loopback origin\n"),
            ("Origin", "null", "forbidden: the Origin header is not a loopback origin\n"),
            ("Origin", "http://127.0.0.1.evil.com", "forbidden: the Origin header is not a loopback origin\n"),
            ("Host", "evil.example.com", "forbidden: the Host header must name a loopback address\n"),
            ("Host", "10.0.0.1:7644", "forbidden: the Host header must name a loopback address\n"),
        ] {
            let mut h = headers(&auth);
            h.push((name, value));
            let r = http(lab.addr(), method, path, &h, if method == "POST" { PING } else { b"" });
            assert_text_reply(&r, 403, text);
        }
    }
    let port = lab.addr().rsplit(':').next().unwrap().to_string();
    for (name, value) in [
        ("Origin", "http://localhost:3000".to_string()),
        ("Origin", format!("http://127.0.0.1:{port}")),
        ("Origin", "https://[::1]".to_string()),
        ("Host", format!("localhost:{port}")),
        ("Host", format!("[::1]:{port}")),
    ] {
        let mut h = headers(&auth);
        h.push((name, &value));
        assert_eq!(http(lab.addr(), "POST", "/mcp/", &h, PING).text(), PING_SSE, "{name}: {value}");
    }
}
