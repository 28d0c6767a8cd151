//! The session's agent card, and that it and MCP `tools/list` are one view.

use crate::harness::*;
use serde_json::{Value, json};

fn card(lab: &Lab, token: &str) -> Value {
    let r = lab.get_auth("/.well-known/agent.json", token);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.content_type(), "application/json");
    assert!(r.body.ends_with(b"\n"));
    r.json()
}

fn skill_ids(card: &Value) -> Vec<String> {
    card["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect()
}

/// The decoded names of `tools/list`, in list order.
fn tool_ids(lab: &Lab, token: &str) -> Vec<String> {
    let r = lab.mcp(token, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let v = sse(&r);
    v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| world_protocol::names::decode(t["name"].as_str().unwrap()).expect("a decodable name"))
        .collect()
}

/// Transitions whose ids sort differently as ids and as MCP names, with
/// assorted access requirements.
fn publish_fixtures(lab: &Lab) {
    let entries = json!([
        echo_entry("a_b", ("world.apply", "world", 1)),
        echo_entry("a.b", ("world.apply", "world", 1)),
        echo_entry("a/b", ("world.apply", "world", 1)),
        echo_entry("ab", ("Workspace.Write", "worktree", 5)),
        echo_entry("zz.free", ("Workspace.Read", "worktree", 0)),
        echo_entry("net/call", ("Net.Call", "host:127.0.0.1:8080", 1)),
    ]);
    lab.publish_ok(&lab.manifest("card", &[], entries), false);
}

#[test]
fn the_card_lists_exactly_the_admitted_transitions_in_registry_byte_order() {
    let lab = Lab::new(LabOptions { episodes: &["c"], ..Default::default() });
    publish_fixtures(&lab);
    let token = lab.mint("c", &["world.apply=world:5", "Workspace.Read=worktree:5"]);
    let c = card(&lab, &token);
    let ids = skill_ids(&c);
    assert_eq!(
        ids,
        ["a.b", "a/b", "a_b", "ailang-read", "tools.echo", "workspace-list", "workspace-search", "zz.free"],
        "byte order of the ids, only what the grants admit"
    );
    let skills = c["skills"].as_array().unwrap();
    let read = skills.iter().find(|s| s["id"] == "ailang-read").unwrap();
    assert_eq!(
        read,
        &json!({"id": "ailang-read", "name": "Read (sandboxed)", "description": "Read a UTF-8 file of the episode's worktree.", "tags": [], "examples": []})
    );
    let ab = skills.iter().find(|s| s["id"] == "a.b").unwrap();
    assert_eq!((&ab["name"], &ab["description"]), (&json!("a.b title"), &json!("a.b description")));
    assert_eq!(
        c["capabilities"],
        json!({"streaming": true, "pushNotifications": false, "stateTransitionHistory": false, "extendedAgentCard": true})
    );
    assert_eq!(
        (&c["defaultInputModes"], &c["defaultOutputModes"]),
        (&json!(["application/json"]), &json!(["application/json"]))
    );
    assert_eq!(c["name"], "worldd");
    // Keys sorted at every level, as the Go reference writes its maps (a
    // `Value` re-encodes with sorted keys; Go escapes `<`, `>`, `&`).
    let raw = lab.get_auth("/.well-known/agent.json", &token).text();
    let unescaped = raw.replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u0026", "&");
    assert_eq!(unescaped, format!("{}\n", serde_json::to_string(&c).unwrap()));
}

#[test]
fn the_card_offers_json_rpc_at_a2a_1_0_and_0_3_on_the_address_the_client_used_with_a_bearer_scheme() {
    let lab = Lab::new(LabOptions { episodes: &["c"], ..Default::default() });
    let token = lab.mint("c", &["world.apply=world:5"]);
    let url = format!("http://{}/a2a/", lab.addr());
    for path in ["/.well-known/agent-card.json", "/.well-known/agent.json"] {
        let r = lab.get_auth(path, &token);
        assert_eq!(r.status, 200);
        let c = r.json();
        assert_eq!(
            c["supportedInterfaces"],
            json!([
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            ])
        );
        // What 0.3 clients read.
        assert_eq!(
            (&c["url"], &c["protocolVersion"], &c["preferredTransport"]),
            (&json!(url), &json!("0.3.0"), &json!("JSONRPC"))
        );
        assert_eq!(c["securityRequirements"], json!([{"schemes": {"bearer": {"list": []}}}]));
        assert_eq!(c["security"], json!([{"bearer": []}]));
        assert_eq!(c["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer");
        assert_eq!(
            (&c["securitySchemes"]["bearer"]["type"], &c["securitySchemes"]["bearer"]["scheme"]),
            (&json!("http"), &json!("bearer"))
        );
    }
}

#[test]
fn the_card_has_no_skills_before_any_registry_is_published() {
    let lab = Lab::new(LabOptions { no_builtin: true, ..Default::default() });
    let token = lab.mint("c", &["world.apply=world:5"]);
    assert_eq!(card(&lab, &token)["skills"], json!([]));
    let r = lab.mcp(&token, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(sse_data(&r), r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#);
}

#[test]
fn card_session_denials_are_rest_envelopes() {
    let lab = Lab::new(LabOptions::default());
    let expired = lab.expired_token("c");
    let envelope =
        |class: &str, message: &str| format!("{{\"error\":{{\"class\":\"{class}\",\"message\":\"{message}\"}}}}\n");
    for path in ["/.well-known/agent.json", "/.well-known/agent-card.json"] {
        let r = lab.get(path);
        assert_json_reply(
            &r,
            401,
            &envelope("SessionAbsent", "a session credential is required: no Authorization Bearer header was present"),
        );
        let r = http(lab.addr(), "GET", path, &[("Authorization", "Bearer 123")], b"");
        assert_json_reply(
            &r,
            400,
            &envelope(
                "InvalidSession",
                "malformed Authorization header: expected Bearer \\u003c64-hex-credential\\u003e",
            ),
        );
        let r = lab.get_auth(path, &"ef".repeat(32));
        assert_json_reply(&r, 401, &envelope("SessionUnknown", "unknown session credential"));
        let r = lab.get_auth(path, &expired);
        assert_json_reply(&r, 401, &envelope("SessionExpired", "session credential has expired"));
    }
}

#[test]
fn the_card_skills_and_the_mcp_tools_come_from_the_same_view() {
    let lab = Lab::new(LabOptions { episodes: &["c"], ..Default::default() });
    publish_fixtures(&lab);
    let grant_sets: [(&str, &[&str]); 9] = [
        ("none matching", &["Other.Effect=nowhere:5"]),
        ("read only", &["Workspace.Read=worktree:5"]),
        ("read and write", &["Workspace.Read=worktree:5", "Workspace.Write=worktree:5"]),
        (
            "everything",
            &[
                "world.apply=world:5",
                "Workspace.Read=worktree:5",
                "Workspace.Write=worktree:5",
                "Workspace.Exec=worktree:5",
                "Net.Call=host:127.0.0.1:8080:5",
            ],
        ),
        ("budget-0 grants", &["Workspace.Read=worktree:0", "world.apply=world:0"]),
        ("budget under a cost", &["Workspace.Write=worktree:4"]),
        ("another scope", &["Workspace.Read=elsewhere:5", "world.apply=universe:5"]),
        ("a scope with colons", &["Net.Call=host:127.0.0.1:8080:1"]),
        ("a case-different effect", &["workspace.read=worktree:5"]),
    ];
    let mut seen = vec![];
    for (what, grants) in grant_sets {
        let token = lab.mint("c", grants);
        let skills = skill_ids(&card(&lab, &token));
        let tools = tool_ids(&lab, &token);
        let mut sorted_skills = skills.clone();
        sorted_skills.sort();
        assert_eq!(skills, sorted_skills, "{what}: the card is in id order");
        let mut sorted_tools = tools.clone();
        sorted_tools.sort();
        assert_eq!(sorted_tools, skills, "{what}: the same transitions");
        // And each is callable exactly where it is visible (A2A admission is the same view).
        for id in ["tools.echo", "zz.free", "ab"] {
            let v = lab.send(&token, &format!("v-{}-{}", seen.len(), id.replace('.', "-")), id, &json!({}));
            let visible = skills.iter().any(|s| s == id);
            assert_eq!(v.get("result").is_some(), visible, "{what}: {id}: {v}");
        }
        seen.push((what, skills));
    }
    let by = |w: &str| seen.iter().find(|(x, _)| *x == w).unwrap().1.clone();
    assert_eq!(by("none matching"), Vec::<String>::new());
    assert_eq!(by("read only"), ["ailang-read", "workspace-list", "workspace-search", "zz.free"]);
    assert_eq!(
        by("budget-0 grants"),
        ["ailang-read", "workspace-list", "workspace-search", "zz.free"],
        "cost 1 needs budget 1"
    );
    assert_eq!(by("budget under a cost"), ["ailang-edit", "ailang-write"], "ab costs 5");
    assert_eq!(by("another scope"), Vec::<String>::new());
    assert_eq!(by("a scope with colons"), ["net/call"]);
    assert_eq!(by("a case-different effect"), Vec::<String>::new());
    assert_eq!(by("everything").len(), 13, "7 builtins and 6 fixtures");
}

#[test]
fn the_card_is_also_served_at_agent_card_json_and_points_at_a2a() {
    let lab = Lab::new(LabOptions::default());
    let token = lab.mint("c", &["world.apply=world:5"]);
    let a = lab.get_auth("/.well-known/agent.json", &token);
    let b = lab.get_auth("/.well-known/agent-card.json", &token);
    assert_eq!(a.body, b.body);
    let c = a.json();
    assert_eq!(c["url"], format!("http://{}/a2a/", lab.addr()));
    assert_eq!(skill_ids(&c), ["tools.echo"]);
    // The url names the Host the client used.
    let port = lab.addr().rsplit(':').next().unwrap();
    let host = format!("localhost:{port}");
    let r = http(
        lab.addr(),
        "GET",
        "/.well-known/agent-card.json",
        &[("Host", &host), ("Authorization", &bearer(&token))],
        b"",
    );
    assert_eq!(r.json()["url"], format!("http://localhost:{port}/a2a/"));
}
