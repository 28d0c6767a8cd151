//! The episode index, seen from outside: a known mix of calls on both agent
//! surfaces (pure, effectful, denied three ways, failed, not committed, a
//! resent task id, calls refused before they reach the store), then exactly
//! what `GET /v1/episodes/{episode}`, its `/calls` pages, the listing and the
//! `worldd episodes` / `worldd episode` verbs say of them; and, on
//! PostgreSQL, one episode's calls made through two nodes.

use crate::cluster;
use crate::fixture;
use crate::harness::*;
use base64::Engine;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Command;

const EP: &str = "mix";
const PYTHON: &str = "/usr/bin/python3";

/// Plans one Workspace.Read of hello.txt: admitted by `world.apply` alone, so
/// the broker (not admission) meets a session without the right grant.
const PROBE_READ: &str = r#"import json, sys
json.loads(sys.stdin.read())
effect = {"id": "e1", "effect": "Workspace.Read", "scope": "worktree", "cost": 1,
          "payload": {"op": "read", "path": "hello.txt"}}
sys.stdout.write(json.dumps({"plan": "world/effect-plan/v1", "effects": [effect], "finish": False, "result": None}))
"#;
/// Plans a Workspace.Write the handler cannot do: debited, then failed.
const PROBE_BAD_OP: &str = r#"import json, sys
json.loads(sys.stdin.read())
effect = {"id": "e1", "effect": "Workspace.Write", "scope": "worktree", "cost": 1, "payload": {"op": "bogus"}}
sys.stdout.write(json.dumps({"plan": "world/effect-plan/v1", "effects": [effect], "finish": False, "result": None}))
"#;
/// A pure transition that fails: the call ends not committed.
const PROBE_CRASH: &str = "import sys\nsys.exit(3)\n";

/// A session minted through the command line.
pub(crate) struct Minted {
    pub(crate) token: String,
    pub(crate) credential_id: String,
    pub(crate) expires_at: u64,
}

pub(crate) fn mint(db: &str, episode: &str, grants: &[&str], ttl: Option<u64>) -> Minted {
    mint_with(db, episode, grants, &[], ttl)
}

/// `mint` with more arguments (`--ask …`).
pub(crate) fn mint_with(db: &str, episode: &str, grants: &[&str], more: &[&str], ttl: Option<u64>) -> Minted {
    let mut args = vec!["session", "mint", "--db", db, "--episode", episode, "--yes"];
    for g in grants {
        args.extend(["--grant", g]);
    }
    args.extend(more);
    let ttl = ttl.map(|t| t.to_string());
    if let Some(t) = &ttl {
        args.extend(["--ttl", t.as_str()]);
    }
    let o = worldd(&args);
    assert!(o.status.success(), "mint: {}", stderr(&o));
    // stderr: `worldd session mint: credential_id=HEX (episode EP, N grant(s), expires YYYY-MM-DD HH:MM:SS UTC)`
    let err = stderr(&o);
    let field = |after: &str, until: char| {
        let rest = err.split(after).nth(1).unwrap_or_else(|| panic!("no {after:?} in {err:?}"));
        rest.split(until).next().unwrap().to_string()
    };
    Minted {
        token: stdout(&o).trim().to_string(),
        credential_id: field("credential_id=", ' '),
        expires_at: unix_seconds(&field("expires ", ')')),
    }
}

/// `tasks/send`: the whole JSON-RPC reply.
pub(crate) fn a2a(d: &Daemon, token: &str, task: &str, skill: &str, args: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {"id": task,
        "metadata": {"skill_id": skill}, "message": {"role": "user", "parts": [{"type": "data", "data": args}]}}});
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    d.request("POST", "/a2a/", &headers, Some(&serde_json::to_vec(&body).unwrap())).json()
}

/// A legacy-era MCP `tools/call`: the JSON-RPC message of its one SSE event.
pub(crate) fn mcp(d: &Daemon, token: &str, tool: &str, args: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}});
    let auth = format!("Bearer {token}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let r = d.request("POST", "/mcp/", &headers, Some(&serde_json::to_vec(&body).unwrap()));
    let text = r.text();
    let data = text
        .strip_prefix("event: message\ndata: ")
        .and_then(|t| t.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("one SSE event: {text:?}"));
    serde_json::from_str(data).unwrap()
}

/// The `world` block of a committed call's output, on either surface.
fn world_block(reply: &Value) -> &Value {
    let a2a = &reply["result"]["artifacts"][0]["parts"][0]["data"]["world"];
    if a2a.is_object() { a2a } else { &reply["result"]["structuredContent"]["world"] }
}

/// What a call of the mix is known to have done.
struct Sent {
    surface: &'static str,
    transition: &'static str,
    /// The A2A task id (an MCP call's is the daemon's own).
    task: Option<String>,
    state: &'static str,
    /// (effect, status, denial) of each planned effect.
    effects: Vec<(&'static str, &'static str, Option<&'static str>)>,
    reply: Value,
}

/// A daemon on a store whose episode `mix` saw the known mix of calls.
struct Mix {
    _store: TempStore,
    daemon: Daemon,
    sent: Vec<Sent>,
    /// Unix seconds just before the first call and just after the last.
    before: u64,
    after: u64,
}

fn manifest(dir: &std::path::Path) -> std::path::PathBuf {
    let probes = [
        ("probe.read", "probe_read", PROBE_READ, Some("Workspace.Read")),
        ("probe.bad-op", "probe_bad_op", PROBE_BAD_OP, Some("Workspace.Write")),
        ("probe.crash", "probe_crash", PROBE_CRASH, None),
    ];
    let items: Vec<Value> = probes
        .iter()
        .map(|(id, file, source, effect)| {
            std::fs::write(dir.join(format!("{file}.py")), source).unwrap();
            let declared: Vec<Value> =
                effect.iter().map(|e| json!({"effect": e, "scope": "worktree", "cost": 1})).collect();
            json!({"id": id, "title": id, "description": "an episode-index probe",
                "transitionFnFile": format!("{file}.py"), "runtime": {"exec": {"interpreter": PYTHON}},
                "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
                "access": {"effect": "world.apply", "scope": "world", "cost": 0}, "declaredEffects": declared})
        })
        .collect();
    let path = dir.join("probes.json");
    std::fs::write(&path, serde_json::to_vec(&items).unwrap()).unwrap();
    path
}

fn mixed() -> Mix {
    let store = TempStore::new();
    let root = store.dir.path().join("ws");
    std::fs::create_dir_all(root.join(EP)).unwrap();
    std::fs::write(root.join(EP).join("hello.txt"), "hello\n").unwrap();
    let daemon = Daemon::start_with(&store.db, &["--workspace-root", root.to_str().unwrap()]);
    let db = store.db.to_str().unwrap().to_string();
    for publish in [vec!["--builtin"], vec!["--manifest", manifest(store.dir.path()).to_str().unwrap()]] {
        let mut args = vec!["publish", "--db", db.as_str()];
        args.extend(publish);
        let o = worldd(&args);
        assert!(o.status.success(), "publish: {}", stderr(&o));
    }
    // A session that lapses before the index is read: its grants are no live budget.
    let lapsed = mint(&db, EP, &["Workspace.Read=worktree:100", "Workspace.Exec=worktree:9"], Some(1));
    let main =
        mint(&db, EP, &["Workspace.Read=worktree:3", "Workspace.Write=worktree:5", "world.apply=world:10"], None);
    let scope = mint(&db, EP, &["world.apply=world:4", "Workspace.Read=elsewhere:7"], None);
    let name = mint(&db, EP, &["world.apply=world:2"], None);
    let revoked = mint(&db, EP, &["Workspace.Read=worktree:50"], None);
    let o = worldd(&["session", "revoke", "--db", &db, &revoked.credential_id]);
    assert!(o.status.success(), "revoke: {}", stderr(&o));
    // The genesis world, through REST, by a session of another episode: a REST
    // commit is no call of an episode, and pays under its own.
    let committer = mint(&db, "genesis", &["World.Commit=log:1"], None);
    assert_eq!(daemon.commit(&fixture::genesis("episodes").bytes(), Some(&committer.token)).status, 200);

    let before = fixture::now();
    let (read, write) = (("Workspace.Read", "ok", None), ("Workspace.Write", "ok", None));
    let steps: Vec<Step> = vec![
        Step::mcp(&main, "tools.echo", json!({"n": 0}), "committed", vec![]),
        Step::a2a(&main, "read-1", "ailang-read", json!({"path": "hello.txt"}), "committed", vec![read]),
        Step::a2a(
            &main,
            "write-1",
            "ailang-write",
            json!({"path": "notes.txt", "content": "one\n"}),
            "committed",
            vec![write],
        ),
        Step::mcp(
            &main,
            "ailang-edit",
            json!({"path": "notes.txt", "old_text": "one", "new_text": "two"}),
            "committed",
            vec![write],
        ),
        Step::a2a(&main, "read-2", "ailang-read", json!({"path": "hello.txt"}), "committed", vec![read]),
        // The third read spends the grant's last unit; the fourth is denied.
        Step::mcp(&main, "ailang-read", json!({"path": "hello.txt"}), "committed", vec![read]),
        Step::a2a(
            &main,
            "read-3",
            "ailang-read",
            json!({"path": "hello.txt"}),
            "committed",
            vec![("Workspace.Read", "denied", Some("denied:budget"))],
        ),
        Step::a2a(
            &scope,
            "scope-1",
            "probe.read",
            json!({}),
            "committed",
            vec![("Workspace.Read", "denied", Some("denied:scope"))],
        ),
        Step::a2a(
            &name,
            "name-1",
            "probe.read",
            json!({}),
            "committed",
            vec![("Workspace.Read", "denied", Some("denied:effect-name"))],
        ),
        Step::a2a(&main, "bad-op-1", "probe.bad-op", json!({}), "committed", vec![("Workspace.Write", "failed", None)]),
        Step::a2a(&main, "crash-1", "probe.crash", json!({}), "not-committed", vec![]),
    ];
    let sent: Vec<Sent> = steps.into_iter().map(|s| s.send(&daemon)).collect();
    for s in &sent {
        let committed = s.reply.get("result").is_some();
        assert_eq!(committed, s.state == "committed", "{} {:?}: {}", s.transition, s.task, s.reply);
    }

    // None of these reaches the index: a resend of a committed task id (its
    // result again), a task id reused for other arguments, calls their
    // session may not make, and a revoked session.
    let again = a2a(&daemon, &main.token, "read-1", "ailang-read", json!({"path": "hello.txt"}));
    assert_eq!(again["result"], sent[1].reply["result"], "a resend answers the committed result");
    let reused = a2a(&daemon, &main.token, "read-1", "ailang-read", json!({"path": "notes.txt"}));
    assert_eq!(reused["error"]["message"], "task id already used in this session", "{reused}");
    let refused = a2a(&daemon, &name.token, "write-x", "ailang-write", json!({"path": "x", "content": "x"}));
    assert_eq!(refused["error"]["message"], "not authorized", "{refused}");
    let refused = mcp(&daemon, &name.token, "ailang-read", json!({"path": "hello.txt"}));
    assert!(refused.get("error").is_some(), "{refused}");
    let gone = a2a(&daemon, &revoked.token, "gone-1", "ailang-read", json!({"path": "hello.txt"}));
    assert_eq!(gone["error"]["message"], "unknown session credential", "{gone}");
    let after = fixture::now();
    // Read once the lapsed session has expired, whatever the calls took.
    while fixture::now() < lapsed.expires_at {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Mix { _store: store, daemon, sent, before, after }
}

/// One call of the mix, before it is sent.
struct Step {
    token: String,
    task: Option<String>,
    transition: &'static str,
    args: Value,
    state: &'static str,
    effects: Vec<(&'static str, &'static str, Option<&'static str>)>,
}

type Effects = Vec<(&'static str, &'static str, Option<&'static str>)>;

impl Step {
    fn a2a(
        who: &Minted,
        task: &str,
        transition: &'static str,
        args: Value,
        state: &'static str,
        effects: Effects,
    ) -> Step {
        Step { token: who.token.clone(), task: Some(task.into()), transition, args, state, effects }
    }

    fn mcp(who: &Minted, transition: &'static str, args: Value, state: &'static str, effects: Effects) -> Step {
        Step { token: who.token.clone(), task: None, transition, args, state, effects }
    }

    fn send(self, d: &Daemon) -> Sent {
        let (surface, reply) = match &self.task {
            Some(task) => ("a2a", a2a(d, &self.token, task, self.transition, self.args)),
            // MCP names a tool by its transition id escaped: `.` is `_d`.
            None => ("mcp", mcp(d, &self.token, &self.transition.replace('_', "_u").replace('.', "_d"), self.args)),
        };
        Sent { surface, transition: self.transition, task: self.task, state: self.state, effects: self.effects, reply }
    }
}

// ---- reading what the daemon says ----

fn summary(d: &Daemon, episode: &str) -> Value {
    d.get(&format!("/v1/episodes/{episode}")).ok_json()
}

/// Every call of `episode`, page by page.
fn all_calls(d: &Daemon, episode: &str) -> Vec<Value> {
    let mut calls: Vec<Value> = vec![];
    loop {
        let page = d.get(&format!("/v1/episodes/{episode}/calls?from={}&limit=500", calls.len())).ok_json();
        calls.extend(page["calls"].as_array().unwrap().iter().cloned());
        if page["next"].is_null() {
            return calls;
        }
    }
}

/// The invocation record the log entry at `index` carries, as JSON.
fn invocation_record(d: &Daemon, index: u64) -> Value {
    let entry = d.get(&format!("/v1/log/{index}")).ok_json();
    let record = entry["transitionRef"].as_str().unwrap();
    let object = d.get(&format!("/v1/objects/{record}?payload=true")).ok_json();
    let payload = base64::engine::general_purpose::STANDARD.decode(object["payload"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&payload).unwrap()
}

fn counts(pairs: &[(&str, u64)]) -> Value {
    Value::Object(pairs.iter().map(|(k, n)| (k.to_string(), json!(n))).collect())
}

// ---- the summary ----

#[test]
fn an_episodes_summary_counts_each_call_that_reached_the_store_once_with_its_effects_denials_spend_and_sessions() {
    let m = mixed();
    let s = summary(&m.daemon, EP);
    assert_eq!(s["episode"], EP);
    // Eleven calls reached the store; the resend, the reused task id and the
    // refused calls did not.
    assert_eq!(s["calls"], 11, "{s}");
    assert_eq!(s["states"], counts(&[("committed", 10), ("not-committed", 1)]), "{s}");
    assert_eq!(s["effects"], counts(&[("ok", 5), ("failed", 1), ("denied", 3)]), "{s}");
    assert_eq!(s["denials"], counts(&[("denied:budget", 1), ("denied:scope", 1), ("denied:effect-name", 1)]), "{s}");
    // Budgets are the live sessions' (the lapsed one's larger Read budget and
    // its Exec grant are gone, the revoked one's never counts).
    assert_eq!(
        s["spend"],
        json!([
            {"effect": "Workspace.Read", "scope": "elsewhere", "spent": 0, "budget": 7, "remaining": 7},
            {"effect": "Workspace.Read", "scope": "worktree", "spent": 3, "budget": 3, "remaining": 0},
            {"effect": "Workspace.Write", "scope": "worktree", "spent": 3, "budget": 5, "remaining": 2},
            {"effect": "world.apply", "scope": "world", "spent": 0, "budget": 10, "remaining": 10},
        ]),
        "{s}"
    );
    assert_eq!(s["sessions"], json!({"live": 3, "total": 4}), "{s}");
    let (first, last) = (s["firstAt"].as_u64().unwrap(), s["lastAt"].as_u64().unwrap());
    assert!(m.before <= first && first <= last && last <= m.after, "{} <= {first} <= {last} <= {}", m.before, m.after);
    let calls = all_calls(&m.daemon, EP);
    assert_eq!(s["firstAt"], calls[0]["startedAt"]);
    assert_eq!(Some(last), calls.iter().map(|c| c["endedAt"].as_u64().unwrap()).max());
    let activity: u64 = s["activity"]["counts"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(activity, 11, "every call is in the activity: {s}");
    // The listing tells the same summary.
    // (After it, the episode whose live session committed the genesis over REST: no call.)
    let listed = m.daemon.get("/v1/episodes").ok_json();
    assert_eq!(listed["episodes"][0], s, "{listed}");
    assert_eq!((&listed["episodes"][1]["episode"], &listed["episodes"][1]["calls"]), (&json!("genesis"), &json!(0)));
    assert_eq!(listed["episodes"].as_array().unwrap().len(), 2, "{listed}");
    assert!(listed["next"].is_null());
}

// ---- the calls ----

#[test]
fn an_episodes_calls_come_in_the_order_sent_each_with_its_log_entry_and_the_budget_it_left() {
    let m = mixed();
    let calls = all_calls(&m.daemon, EP);
    assert_eq!(calls.len(), m.sent.len());
    let mut entries = vec![];
    for (i, (call, sent)) in calls.iter().zip(&m.sent).enumerate() {
        let what = format!("call {i} ({} {:?})", sent.transition, sent.task);
        assert_eq!(call["position"], i, "{what}: {call}");
        assert_eq!(call["surface"], sent.surface, "{what}: {call}");
        assert_eq!(call["transition"], sent.transition, "{what}: {call}");
        assert_eq!(call["state"], sent.state, "{what}: {call}");
        if let Some(task) = &sent.task {
            assert_eq!(call["taskId"], json!(task), "{what}");
            assert_eq!(call["invocationId"], json!(format!("a2a:{EP}:{task}")), "{what}");
        } else {
            assert!(call["invocationId"].as_str().unwrap().starts_with(&format!("mcp:{EP}:")), "{what}: {call}");
        }
        let effects: Vec<(String, String, Option<String>)> = call["effects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["effect"].as_str().unwrap().into(),
                    e["status"].as_str().unwrap().into(),
                    e["denial"].as_str().map(String::from),
                )
            })
            .collect();
        let expected: Vec<(String, String, Option<String>)> =
            sent.effects.iter().map(|(e, st, d)| (e.to_string(), st.to_string(), d.map(String::from))).collect();
        assert_eq!(effects, expected, "{what}: {call}");
        if sent.state != "committed" {
            assert!(call["entryIndex"].is_null() && call["output"].is_null(), "{what}: {call}");
            continue;
        }
        // The entry it names carries its invocation record.
        let index = call["entryIndex"].as_u64().unwrap_or_else(|| panic!("{what}: {call}"));
        let record = invocation_record(&m.daemon, index);
        assert_eq!(record["invocationId"], call["invocationId"], "{what}: entry {index}: {record}");
        assert_eq!(record["output"], call["output"], "{what}: entry {index}: {record}");
        if sent.surface == "a2a" {
            assert_eq!(sent.reply["result"]["metadata"]["entry_index"], index, "{what}");
        }
        // The records the reply named are the call's.
        let named: Vec<&Value> =
            world_block(&sent.reply)["effects"].as_array().unwrap().iter().map(|e| &e["record"]).collect();
        let told: Vec<&Value> = call["effects"].as_array().unwrap().iter().map(|e| &e["record"]).collect();
        assert_eq!(told, named, "{what}: {call}\n{}", sent.reply);
        entries.push(index);
    }
    // Sent one after another, the committed calls are entries 1.. in order (0 is the genesis).
    assert_eq!(entries, (1..=entries.len() as u64).collect::<Vec<_>>());

    // Each grant's budget, walked call by call: what ran was debited from
    // what the last one left; a denial debits nothing.
    let s = summary(&m.daemon, EP);
    let mut left: BTreeMap<(String, String), u64> = BTreeMap::from([
        (("Workspace.Read".into(), "worktree".into()), 3),
        (("Workspace.Write".into(), "worktree".into()), 5),
    ]);
    let mut spent: BTreeMap<(String, String), u64> = BTreeMap::new();
    for e in calls.iter().flat_map(|c| c["effects"].as_array().unwrap()) {
        let pair = (e["effect"].as_str().unwrap().to_string(), e["scope"].as_str().unwrap().to_string());
        let (before, after, cost) =
            (e["budgetBefore"].as_u64().unwrap(), e["budgetAfter"].as_u64().unwrap(), e["cost"].as_u64().unwrap());
        match e["status"].as_str().unwrap() {
            "ok" | "failed" => {
                assert_eq!(
                    (before, after, e["debited"].as_u64().unwrap()),
                    (left[&pair], left[&pair] - cost, cost),
                    "{e}"
                );
                *left.get_mut(&pair).unwrap() = after;
                *spent.entry(pair).or_default() += cost;
            }
            "denied" => {
                assert_eq!((before, after, e["debited"].as_u64().unwrap()), (before, before, 0), "{e}");
                if e["denial"] == "denied:budget" {
                    assert_eq!(before, left[&pair], "{e}");
                }
            }
            other => panic!("no {other} effect was sent: {e}"),
        }
    }
    for p in s["spend"].as_array().unwrap() {
        let pair = (p["effect"].as_str().unwrap().to_string(), p["scope"].as_str().unwrap().to_string());
        assert_eq!(p["spent"], spent.get(&pair).copied().unwrap_or(0), "{p}");
        if let Some(left) = left.get(&pair) {
            assert_eq!(p["remaining"], *left, "{p}");
        }
    }
}

#[test]
fn calls_are_paged_by_position_with_next_and_total_and_bad_parameters_are_400() {
    let m = mixed();
    let d = &m.daemon;
    let positions = |page: &Value| -> Vec<u64> {
        page["calls"].as_array().unwrap().iter().map(|c| c["position"].as_u64().unwrap()).collect()
    };
    let page = d.get(&format!("/v1/episodes/{EP}/calls?from=0&limit=4")).ok_json();
    assert_eq!(
        (positions(&page), &page["next"], &page["total"], &page["from"]),
        (vec![0, 1, 2, 3], &json!(4), &json!(11), &json!(0))
    );
    let page = d.get(&format!("/v1/episodes/{EP}/calls?from=4&limit=4")).ok_json();
    assert_eq!((positions(&page), &page["next"]), (vec![4, 5, 6, 7], &json!(8)));
    let page = d.get(&format!("/v1/episodes/{EP}/calls?from=8&limit=4")).ok_json();
    assert_eq!((positions(&page), &page["next"], &page["total"]), (vec![8, 9, 10], &Value::Null, &json!(11)));
    let page = d.get(&format!("/v1/episodes/{EP}/calls?from=10&limit=1")).ok_json();
    assert_eq!((positions(&page), &page["next"]), (vec![10], &Value::Null), "the last call ends the pages");
    let page = d.get(&format!("/v1/episodes/{EP}/calls")).ok_json();
    assert_eq!(
        (positions(&page), &page["next"]),
        ((0..11).collect::<Vec<u64>>(), &Value::Null),
        "defaults: from 0, 100 calls"
    );
    for from in [11, 500] {
        let page = d.get(&format!("/v1/episodes/{EP}/calls?from={from}")).ok_json();
        assert_eq!(
            (positions(&page), &page["next"], &page["total"]),
            (vec![], &Value::Null, &json!(11)),
            "from={from}"
        );
    }
    assert_eq!(d.get(&format!("/v1/episodes/{EP}/calls?limit=500")).ok_json()["calls"].as_array().unwrap().len(), 11);
    for query in ["limit=0", "limit=501", "limit=-1", "limit=x", "from=-1", "from=x", "from=1.5"] {
        assert_error(&d.get(&format!("/v1/episodes/{EP}/calls?{query}")), 400, "BadRequest", None);
    }
    for query in ["limit=0", "limit=201", "after=bogus", "after=x.mix", "after=17."] {
        assert_error(&d.get(&format!("/v1/episodes?{query}")), 400, "BadRequest", None);
    }
    let long = "e".repeat(513);
    assert_error(&d.get(&format!("/v1/episodes/{long}")), 400, "BadRequest", None);
    for path in
        ["/v1/episodes/nobody", "/v1/episodes/nobody/calls", "/v1/episodes/mi", "/v1/episodes/mixx/calls?from=0"]
    {
        assert_error(&d.get(path), 404, "NotFound", Some("the store has seen no call of this episode"));
    }
}

// ---- the listing ----

#[test]
fn episodes_are_listed_most_recently_active_first_and_paged_one_by_one_with_cursors() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let db = store.db.to_str().unwrap();
    let o = worldd(&["publish", "--db", db, "--builtin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tokens: BTreeMap<&str, String> = ["one", "two", "three", "four"]
        .into_iter()
        .map(|ep| (ep, mint(db, ep, &["world.apply=world:10"], None).token))
        .collect();
    let committer = mint(db, "genesis", &["World.Commit=log:1"], None);
    assert_eq!(d.commit(&fixture::genesis("listing").bytes(), Some(&committer.token)).status, 200);
    let echo = |ep: &str, task: &str| {
        let r = a2a(&d, &tokens[ep], task, "tools.echo", json!({"ep": ep}));
        assert!(r.get("result").is_some(), "{r}");
    };
    for ep in ["one", "two", "three", "four"] {
        echo(ep, "first");
    }
    // Once the clock has moved past every call so far, `two` becomes the most recently active.
    let latest =
        ["one", "two", "three", "four"].iter().map(|ep| summary(&d, ep)["lastAt"].as_u64().unwrap()).max().unwrap();
    while fixture::now() <= latest {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    echo("two", "again");
    let whole = d.get("/v1/episodes").ok_json();
    assert!(whole["next"].is_null(), "{whole}");
    let listed: Vec<Value> = whole["episodes"].as_array().unwrap().clone();
    let names: Vec<&str> = listed.iter().map(|e| e["episode"].as_str().unwrap()).collect();
    assert_eq!(names[0], "two", "{names:?}");
    assert_eq!(listed[0]["calls"], 2);
    // The order is (last activity, episode), both descending, whatever the ties.
    let mut expected: Vec<(u64, &str)> =
        listed.iter().map(|e| (e["lastAt"].as_u64().unwrap(), e["episode"].as_str().unwrap())).collect();
    expected.sort_by(|a, b| b.cmp(a));
    assert_eq!(names, expected.iter().map(|(_, e)| *e).collect::<Vec<_>>());
    for e in &listed {
        assert_eq!(e, &summary(&d, e["episode"].as_str().unwrap()), "a listed summary is the episode's own");
    }
    // One at a time, each page's `next` names where the next one starts.
    let mut paged = vec![];
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(cursor) => format!("/v1/episodes?limit=1&after={cursor}"),
            None => "/v1/episodes?limit=1".to_string(),
        };
        let page = d.get(&path).ok_json();
        let episodes = page["episodes"].as_array().unwrap();
        assert_eq!(episodes.len(), 1, "{page}");
        paged.push(episodes[0].clone());
        match page["next"].as_str() {
            Some(next) => {
                let e = &episodes[0];
                assert_eq!(next, format!("{}.{}", e["lastAt"], e["episode"].as_str().unwrap()), "{page}");
                after = Some(next.to_string());
            }
            None => break,
        }
        assert!(paged.len() < 10, "the pages never end");
    }
    assert_eq!(paged, listed);
    let two = d.get("/v1/episodes?limit=2").ok_json();
    assert_eq!(two["episodes"].as_array().unwrap()[..], listed[..2]);
    let rest = d.get(&format!("/v1/episodes?limit={}&after={}", listed.len() - 2, two["next"].as_str().unwrap()));
    let rest = rest.ok_json();
    assert_eq!(rest["episodes"].as_array().unwrap()[..], listed[2..]);
    assert!(rest["next"].is_null(), "{rest}");
}

// ---- the verbs ----

/// `date -u` of Unix seconds, as the verbs print a time: a calendar
/// other than the daemon's, to check it by.
pub(crate) fn utc(secs: u64) -> String {
    let o = Command::new("date").args(["-u", "-d", &format!("@{secs}"), "+%F %T"]).output().unwrap();
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// The Unix seconds of a time the verbs printed (`YYYY-MM-DD HH:MM:SS UTC`), by `date -u`.
pub(crate) fn unix_seconds(printed: &str) -> u64 {
    let o = Command::new("date").args(["-u", "-d", printed, "+%s"]).output().unwrap();
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap_or_else(|_| panic!("not a time: {printed:?}"))
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn the_episodes_and_episode_verbs_print_the_numbers_the_daemon_serves() {
    let m = mixed();
    let base = m.daemon.base_url();
    let s = summary(&m.daemon, EP);
    let last = utc(s["lastAt"].as_u64().unwrap());

    let o = worldd(&["episodes", "--addr", &base]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.iter().all(|l| l.chars().count() <= 100), "{out}");
    assert_eq!(
        words(lines[0]),
        ["EPISODE", "CALLS", "C/R/U", "OK/F/D", "LAST", "ACTIVITY", "(UTC)", "SPEND", "USED/BUDGET"]
    );
    let row = words(lines[1]);
    assert_eq!(row[..6], ["mix", "11", "10/1/0", "5/1/3", &last[..10], &last[11..]], "{out}");
    // Spent pairs first; Workspace.Read is spent under two scopes, so each names its own.
    // The cell is cut at 100 columns, and says so.
    assert_eq!(row[6..], ["Workspace.Read@worktree", "3/3,", "Workspace.Write", "3…"], "{out}");
    // Then the genesis committer's episode (a live session, no call yet) and the legend.
    assert_eq!(words(lines[2])[..3], ["genesis", "0", "0/0/0"], "{out}");
    assert_eq!(lines.len(), 4, "two episodes and the legend: {out}");
    let o = worldd(&["episodes", "--addr", &base, "--json", "--limit", "7"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(serde_json::from_str::<Value>(&stdout(&o)).unwrap(), m.daemon.get("/v1/episodes?limit=7").ok_json());

    let o = worldd(&["episode", EP, "--addr", &base, "--calls", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    for expected in [
        "episode   mix",
        "calls     11: committed 10, not-committed 1",
        "effects   ok 5, failed 1, denied 3",
        "denials   denied:budget 1, denied:effect-name 1, denied:scope 1",
        "sessions  3 live of 4",
        &format!("activity  first {} UTC, last {last} UTC", utc(s["firstAt"].as_u64().unwrap())),
        "the last 3 of 11 call(s):",
    ] {
        assert!(out.lines().any(|l| l == expected), "{expected:?} in\n{out}");
    }
    let line = |first: &str| -> Vec<&str> {
        out.lines().map(words).find(|w| w.first() == Some(&first)).unwrap_or_else(|| panic!("no {first} in\n{out}"))
    };
    assert_eq!(line("Workspace.Read")[1..], ["elsewhere", "0/7", "(7)"], "{out}");
    assert_eq!(line("Workspace.Write")[1..], ["worktree", "3/5", "(2)"], "{out}");
    assert_eq!(line("world.apply")[1..], ["world", "0/10", "(10)"], "{out}");
    assert!(out.lines().map(words).any(|w| w[..] == ["Workspace.Read", "worktree", "3/3", "(0)"]), "{out}");
    let calls = all_calls(&m.daemon, EP);
    let at = |i: usize| utc(calls[i]["startedAt"].as_u64().unwrap());
    let (at8, at9, at10) = (at(8), at(9), at(10));
    let expected_rows: [Vec<&str>; 3] = [
        vec![
            "8",
            &at8[..10],
            &at8[11..],
            "a2a",
            "probe.read",
            "committed",
            "denied:effect-name",
            "cost",
            "1,",
            "0",
            "left",
            "9",
        ],
        vec![
            "9",
            &at9[..10],
            &at9[11..],
            "a2a",
            "probe.bad-op",
            "committed",
            "failed",
            "cost",
            "1,",
            "2",
            "left",
            "10",
        ],
        vec!["10", &at10[..10], &at10[11..], "a2a", "probe.crash", "not-committed", "-", "-"],
    ];
    for expected in expected_rows {
        assert_eq!(line(expected[0]), expected, "{out}");
    }
    assert!(!out.lines().map(words).any(|w| w.first() == Some(&"7")), "only the last 3 calls: {out}");

    // --json: the summary's body, then the page of the last calls, as served.
    let o = worldd(&["episode", EP, "--addr", &base, "--json", "--calls", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bodies: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(bodies, [s, m.daemon.get(&format!("/v1/episodes/{EP}/calls?from=9&limit=2")).ok_json()]);

    let o = worldd(&["episode", "nobody", "--addr", &base]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "worldd: no call of episode nobody has reached this store\n");
    assert!(stdout(&o).is_empty());
    // A port nothing listens on: the error names the address and the flag.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let nowhere = format!("http://127.0.0.1:{port}");
    for args in [vec!["episodes", "--addr", &nowhere], vec!["episode", EP, "--addr", &nowhere]] {
        let o = worldd(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert!(err.starts_with(&format!("worldd: cannot reach the daemon at {nowhere} (")), "{err}");
        assert!(err.contains("name it with --addr URL (or set WORLD_ADDR=URL)"), "{err}");
    }
}

// ---- two nodes, one database ----

#[test]
fn one_episodes_calls_through_two_nodes_on_one_database_are_numbered_without_gaps_and_told_alike_by_both() {
    let url = cluster::fresh_database();
    let root = tempfile::tempdir().unwrap();
    let nodes: Vec<(Daemon, std::path::PathBuf)> = (0..2)
        .map(|i| {
            let dir = root.path().join(format!("node-{i}"));
            let mut cmd = Command::new(WORLDD);
            cmd.args(["quickstart", "--store", &url, "--dir", dir.to_str().unwrap(), "--bind", "127.0.0.1:0"]);
            let daemon = Daemon::spawn(cmd);
            let worktree = dir.join("workspace").join("shared");
            std::fs::create_dir_all(&worktree).unwrap();
            std::fs::write(worktree.join("hello.txt"), "shared\n").unwrap();
            (daemon, dir)
        })
        .collect();
    let o = worldd(&[
        "session",
        "mint",
        "--store",
        &url,
        "--episode",
        "shared",
        "--grant",
        "Workspace.Read=worktree:100",
        "--grant",
        "world.apply=world:100",
        "--yes",
    ]);
    assert!(o.status.success(), "mint: {}", stderr(&o));
    let token = stdout(&o).trim().to_string();
    // Each node sends its calls while the other sends its own: pure calls
    // take their positions at once, reads one node at a time.
    let sent: Vec<(String, &str)> = std::thread::scope(|s| {
        let load: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(n, (d, _))| {
                let token = &token;
                s.spawn(move || {
                    (0..8)
                        .map(|i| {
                            let task = format!("n{n}-{i}");
                            let (skill, args) = if i % 2 == 0 {
                                ("tools.echo", json!({"i": i}))
                            } else {
                                ("ailang-read", json!({"path": "hello.txt"}))
                            };
                            let r = a2a(d, token, &task, skill, args);
                            assert!(r.get("result").is_some(), "{task}: {r}");
                            (task, skill)
                        })
                        .chain((0..2).map(|i| {
                            let r = mcp(d, token, "tools_decho", json!({"node": n, "i": i}));
                            assert!(r.get("result").is_some(), "{r}");
                            (String::new(), "tools.echo")
                        }))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        load.into_iter().flat_map(|l| l.join().unwrap()).collect()
    });
    let n = sent.len() as u64;
    let reads = sent.iter().filter(|(_, skill)| *skill == "ailang-read").count() as u64;
    let mut told = vec![];
    for (i, (d, _)) in nodes.iter().enumerate() {
        let s = summary(d, "shared");
        assert_eq!(s["calls"], n, "node {i}: {s}");
        assert_eq!(s["states"], counts(&[("committed", n)]), "node {i}: {s}");
        assert_eq!(s["effects"], counts(&[("ok", reads)]), "node {i}: {s}");
        let read = s["spend"].as_array().unwrap().iter().find(|p| p["effect"] == "Workspace.Read").unwrap().clone();
        assert_eq!(
            read,
            json!({"effect": "Workspace.Read", "scope": "worktree", "spent": reads, "budget": 100, "remaining": 100 - reads}),
            "node {i}"
        );
        let calls = all_calls(d, "shared");
        let positions: Vec<u64> = calls.iter().map(|c| c["position"].as_u64().unwrap()).collect();
        assert_eq!(positions, (0..n).collect::<Vec<_>>(), "node {i}: numbered 0..{n} without gaps");
        let mut tasks: Vec<&str> =
            calls.iter().filter(|c| c["surface"] == "a2a").map(|c| c["taskId"].as_str().unwrap()).collect();
        tasks.sort();
        let mut expected: Vec<&str> = sent.iter().filter(|(t, _)| !t.is_empty()).map(|(t, _)| t.as_str()).collect();
        expected.sort();
        assert_eq!(tasks, expected, "node {i}");
        assert_eq!(calls.iter().filter(|c| c["surface"] == "mcp").count(), 4, "node {i}");
        // One entry per call, each carrying that call's record.
        let mut entries: Vec<u64> = calls.iter().map(|c| c["entryIndex"].as_u64().unwrap()).collect();
        for c in &calls {
            let record = invocation_record(d, c["entryIndex"].as_u64().unwrap());
            assert_eq!(record["invocationId"], c["invocationId"], "node {i}: {c}");
        }
        entries.sort();
        entries.dedup();
        assert_eq!(entries.len() as u64, n, "node {i}");
        // The listing reads the same rows: the one episode with calls, then
        // those with a live session and no call (the genesis committer's).
        let listed = d.get("/v1/episodes").ok_json();
        assert_eq!(listed["episodes"][0], s, "node {i}");
        let rest = &listed["episodes"].as_array().unwrap()[1..];
        assert!(rest.iter().all(|e| e["calls"] == json!(0) && e["episode"] != s["episode"]), "node {i}: {listed}");
        told.push((s, calls));
    }
    assert_eq!(told[0], told[1], "both nodes tell the episode alike");
    // Metrics are each node's own: its calls, not the database's.
    for (i, (d, _)) in nodes.iter().enumerate() {
        let text = d.get("/metrics").text();
        let committed: f64 = text
            .lines()
            .filter(|l| l.starts_with("worldd_calls_total{") && l.contains("outcome=\"committed\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        assert_eq!(committed, (n / 2) as f64, "node {i} counts the calls it served:\n{text}");
        assert!(
            text.lines().any(|l| l.starts_with("worldd_build_info{") && l.contains("engine=\"postgres\"")),
            "{text}"
        );
    }
}

#[test]
fn an_episode_with_a_live_session_is_listed_before_its_first_call_and_not_once_its_session_is_revoked() {
    let lab = crate::approvals::lab(&[]);
    let s = mint(&lab.db, "fresh", &["Workspace.Read=worktree:7"], None);
    let sessions: Value = serde_json::from_str(&lab.worldd_ok(&["session", "list", "--json"])).unwrap();
    let row = sessions.as_array().unwrap().iter().find(|r| r["credentialId"] == json!(s.credential_id)).unwrap();
    let minted_at = row["createdAt"].as_u64().unwrap();

    let page = lab.daemon.get("/v1/episodes").ok_json();
    let listed = page["episodes"].as_array().unwrap();
    let fresh = listed.iter().find(|e| e["episode"] == json!("fresh")).unwrap_or_else(|| panic!("{page}"));
    assert_eq!((&fresh["calls"], &fresh["lastAt"]), (&json!(0), &json!(minted_at)), "{fresh}");
    let spend = &fresh["spend"][0];
    assert_eq!((&spend["effect"], &spend["spent"], &spend["budget"]), (&json!("Workspace.Read"), &json!(0), &json!(7)));
    // Its place in the order is its session's minting, and the page's cursor goes on past it.
    let keys: Vec<(u64, String)> =
        listed.iter().map(|e| (e["lastAt"].as_u64().unwrap(), e["episode"].as_str().unwrap().to_string())).collect();
    assert!(keys.windows(2).all(|w| w[0] > w[1]), "most recently active first: {keys:?}");
    let first = lab.daemon.get("/v1/episodes?limit=1").ok_json();
    let after = first["next"].as_str().map(|n| lab.daemon.get(&format!("/v1/episodes?after={n}")).ok_json());
    let paged: Vec<Value> = first["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .chain(after.iter().flat_map(|p| p["episodes"].as_array().unwrap()))
        .cloned()
        .collect();
    assert_eq!(&paged[..], listed, "two pages hold what one does");
    assert_eq!(lab.daemon.get("/v1/episodes/fresh").ok_json()["calls"], json!(0));
    let o = worldd(&["episodes", "--addr", &lab.daemon.base_url()]);
    assert!(stdout(&o).lines().any(|l| l.starts_with("fresh ")), "{}", stdout(&o));
    let o = worldd(&["episode", "fresh", "--addr", &lab.daemon.base_url()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The workbench lists it and opens its page, with no call yet.
    assert!(lab.daemon.get("/workbench/episodes").text().contains("/workbench/episodes/fresh"));
    let page = lab.daemon.get("/workbench/episodes/fresh");
    assert_eq!(page.status, 200, "{}", page.text());
    let text = page.text();
    assert!(text.contains("No calls yet") && text.contains("none yet (a session was minted"), "{text}");
    let spend = text.split("id=\"spend\"").nth(1).unwrap_or_else(|| panic!("its spend: {text}"));
    assert!(spend.contains("Workspace.Read") && spend.contains("<span class=\"grant-budget\">7</span>"), "{spend}");

    // No live session, no call: nothing to list.
    lab.worldd_ok(&["session", "revoke", &s.credential_id]);
    let page = lab.daemon.get("/v1/episodes").ok_json();
    assert!(!page["episodes"].as_array().unwrap().iter().any(|e| e["episode"] == json!("fresh")), "{page}");
    assert_eq!(lab.daemon.get("/v1/episodes/fresh").status, 404);
    assert_eq!(lab.daemon.get("/workbench/episodes/fresh").status, 404);
}
