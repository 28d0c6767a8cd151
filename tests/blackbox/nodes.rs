//! Several `worldd` nodes on one PostgreSQL store, each started the way an
//! operator starts one (`worldd quickstart --store URL --dir D`): one world,
//! sessions minted anywhere used everywhere, one budget, one run per task id,
//! and nodes that keep serving when one of them is killed.

use crate::cluster;
use crate::harness::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

/// A node and its directory (worktree, session file, admin socket).
struct Node {
    daemon: Daemon,
    dir: PathBuf,
}

/// `n` nodes started one after another on a fresh database.
fn nodes(n: usize) -> (String, tempfile::TempDir, Vec<Node>) {
    nodes_on(cluster::fresh_database(), n)
}

fn nodes_on(url: String, n: usize) -> (String, tempfile::TempDir, Vec<Node>) {
    nodes_with(url, n, &[])
}

/// `nodes_on`, each node started with `extra` quickstart arguments.
fn nodes_with(url: String, n: usize, extra: &[&str]) -> (String, tempfile::TempDir, Vec<Node>) {
    let root = tempfile::tempdir().unwrap();
    let nodes = (0..n)
        .map(|i| {
            let dir = root.path().join(format!("node-{i}"));
            let mut cmd = Command::new(WORLDD);
            cmd.args(["quickstart", "--store", &url, "--dir", dir.to_str().unwrap(), "--bind", "127.0.0.1:0"]);
            cmd.args(extra);
            Node { daemon: Daemon::spawn(cmd), dir }
        })
        .collect();
    (url, root, nodes)
}

/// Mints a session on the store itself (no node involved) and returns its token.
fn mint(url: &str, grant: &str) -> String {
    let o = worldd(&["session", "mint", "--store", url, "--episode", "demo", "--grant", grant, "--yes"]);
    assert!(o.status.success(), "mint: {}", stderr(&o));
    stdout(&o).trim().to_string()
}

/// Mints a session of `episode` on the store and gives every node a worktree
/// for it holding hello.txt.
fn mint_in(url: &str, nodes: &[Node], episode: &str, grant: &str) -> String {
    mint_in_with(url, nodes, episode, grant, &[])
}

/// `mint_in` with more of `session mint`'s arguments (`--ask …`).
fn mint_in_with(url: &str, nodes: &[Node], episode: &str, grant: &str, more: &[&str]) -> String {
    for node in nodes {
        let worktree = node.dir.join("workspace").join(episode);
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(worktree.join("hello.txt"), "shared\n").unwrap();
    }
    let mut args = vec!["session", "mint", "--store", url, "--episode", episode, "--grant", grant, "--yes"];
    args.extend(more);
    let o = worldd(&args);
    assert!(o.status.success(), "mint: {}", stderr(&o));
    stdout(&o).trim().to_string()
}

/// The effect record a committed call's answer names, if it names one.
fn record_of(reply: &Value) -> Option<String> {
    reply["result"]["artifacts"][0]["parts"][0]["data"]["world"]["effects"][0]["record"].as_str().map(String::from)
}

fn read(node: &Node, token: &str, task: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {"id": task,
        "metadata": {"skill_id": "ailang-read"},
        "message": {"role": "user", "parts": [{"type": "data", "data": {"path": "hello.txt"}}]}}});
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    node.daemon.request("POST", "/a2a/", &headers, Some(&serde_json::to_vec(&body).unwrap())).json()
}

/// `n` calls at once, call `i` made by `call(i)`; their answers in order.
fn at_once<T: Send>(n: usize, call: impl Fn(usize) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..n)
            .map(|i| {
                s.spawn({
                    let call = &call;
                    move || call(i)
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    })
}

fn read_ok(reply: &Value) -> bool {
    reply["result"]["artifacts"][0]["parts"][0]["data"]["ok"] == json!(true)
}

/// The node's selected world (ref, revision, ...).
fn head(node: &Node) -> Value {
    let head = node.daemon.get("/v1/head").text();
    node.daemon.get(&format!("/v1/worlds/{head}")).ok_json()
}

#[test]
fn nodes_started_by_quickstart_on_one_database_serve_one_world_and_a_session_minted_anywhere() {
    let (url, _root, nodes) = nodes(3);
    let first = std::fs::read_to_string(nodes[0].dir.join("session")).unwrap().trim().to_string();
    let minted_later = mint(&url, "Workspace.Read=worktree:10");
    for (i, node) in nodes.iter().enumerate() {
        assert!(read_ok(&read(node, &first, &format!("first-{i}"))), "node {i}");
        assert!(read_ok(&read(node, &minted_later, &format!("later-{i}"))), "node {i}");
    }
    let heads: Vec<Value> = nodes.iter().map(head).collect();
    assert!(heads.iter().all(|h| *h == heads[0]), "{heads:?}");
    // genesis, then two calls on each node.
    assert_eq!(heads[0]["revision"], json!(6), "{heads:?}");
    let store = nodes[1].daemon.get("/v1/store").ok_json();
    assert_eq!(store["engine"], "postgres", "{store}");
}

#[test]
fn a_budget_shared_by_three_nodes_pays_for_exactly_its_units() {
    let (url, _root, nodes) = nodes(3);
    let token = mint(&url, "Workspace.Read=worktree:5");
    let replies = at_once(15, |i| read(&nodes[i % 3], &token, &format!("budget-{i}")));
    let paid = replies.iter().filter(|r| read_ok(r)).count();
    assert_eq!(paid, 5, "{replies:#?}");
    // A call whose effect the budget denied still commits, saying so.
    assert_eq!(head(&nodes[0])["revision"], json!(15));
}

#[test]
fn one_task_id_sent_to_three_nodes_at_once_runs_once_and_every_answer_is_that_run_or_in_flight() {
    let (url, _root, nodes) = nodes(3);
    let token = mint(&url, "Workspace.Read=worktree:100");
    for round in 0..5 {
        let task = format!("same-{round}");
        let replies = at_once(nodes.len(), |i| read(&nodes[i], &token, &task));
        let done: Vec<&Value> = replies.iter().filter(|r| read_ok(r)).collect();
        assert!(!done.is_empty(), "round {round}: {replies:#?}");
        assert!(done.iter().all(|r| r["result"] == done[0]["result"]), "round {round}: {replies:#?}");
        // The others found the task in flight: the typed refusal a resend on one node gets too.
        for r in replies.iter().filter(|r| !read_ok(r)) {
            assert_eq!(r["error"]["message"], "task id already used in this session", "round {round}: {r}");
        }
        // Resent to any node afterwards: the one committed result.
        for node in &nodes {
            assert_eq!(read(node, &token, &task)["result"], done[0]["result"], "round {round}");
        }
    }
    assert_eq!(head(&nodes[2])["revision"], json!(5), "one entry per task id");
}

/// `read`, or `None` when the node gave no answer (it died mid-call).
fn try_read(node: &Node, token: &str, task: &str) -> Option<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {"id": task,
        "metadata": {"skill_id": "ailang-read"},
        "message": {"role": "user", "parts": [{"type": "data", "data": {"path": "hello.txt"}}]}}});
    let request = ureq::http::Request::builder()
        .method("POST")
        .uri(node.daemon.url("/a2a/"))
        .header("Authorization", format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    let mut reply = node.daemon.agent().run(request).ok()?;
    serde_json::from_slice(&reply.body_mut().read_to_vec().ok()?).ok()
}

/// The typed answers a call whose outcome the store could not settle gets:
/// in flight elsewhere, not committed, effects without a commit, or the
/// store unreachable. Anything else (a hang, a bare failure) is a fault.
fn typed_refusal(reply: &Value) -> bool {
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    [
        "task id already used in this session",
        "invocation was not committed; send a new task id",
        "effects were requested but the invocation was not confirmed committed",
        "invocation outcome is not confirmed; resend the same task id",
        "transition invocation is not available in this daemon",
    ]
    .iter()
    .any(|typed| message.starts_with(typed))
}

/// `verify --store` finds nothing wrong.
fn assert_store_verifies(url: &str) {
    let verified = worldd(&["verify", "--store", url]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), stderr(&verified));
    assert!(stdout(&verified).ends_with("; 0 fault(s)\n"), "{}", stdout(&verified));
}

/// Resends every task id through `node`: each acknowledged result comes back
/// unchanged, every other id settles to a result or a typed refusal. Returns
/// how many ids hold a committed result.
fn replay(node: &Node, token: &str, answers: &[(String, Option<Value>)]) -> usize {
    let mut committed = 0;
    for (task, first) in answers {
        let again = read(node, token, task);
        match first {
            Some(r) if read_ok(r) => assert_eq!(again["result"], r["result"], "{task}: an acknowledged result changed"),
            _ => assert!(read_ok(&again) || typed_refusal(&again), "{task}: {again}"),
        }
        committed += usize::from(read_ok(&again));
    }
    committed
}

#[test]
fn a_node_killed_mid_load_leaves_the_others_serving_and_its_calls_settle_on_resend_elsewhere() {
    let (url, _root, mut nodes) = nodes(3);
    let token = mint(&url, "Workspace.Read=worktree:1000");
    let answers: Vec<(String, Option<Value>)> = std::thread::scope(|s| {
        let load: Vec<_> = [0usize, 1, 2]
            .into_iter()
            .map(|n| {
                let (node, token) = (&nodes[n], &token);
                s.spawn(move || {
                    let mut answers = vec![];
                    for i in 0..20 {
                        let task = format!("load-{n}-{i}");
                        let reply = try_read(node, token, &task);
                        let gone = reply.is_none();
                        answers.push((task, reply));
                        if gone {
                            break;
                        }
                    }
                    answers
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(150));
        let victim = Command::new("kill").args(["-KILL", &nodes[1].daemon.pid().to_string()]).status().unwrap();
        assert!(victim.success());
        load.into_iter().flat_map(|l| l.join().unwrap()).collect()
    });
    nodes[1].daemon.wait_exit();
    for (task, reply) in answers.iter().filter(|(t, _)| !t.starts_with("load-1-")) {
        assert!(reply.as_ref().is_some_and(read_ok), "{task}: the others kept serving: {reply:?}");
    }
    // The dead node's call in flight settles once its lease lapses and a live node sweeps it.
    let (in_flight, _) = answers.iter().find(|(_, r)| r.is_none()).expect("the victim was killed mid-call");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    loop {
        let again = read(&nodes[0], &token, in_flight);
        if again["error"]["message"] != "task id already used in this session" {
            assert!(read_ok(&again) || typed_refusal(&again), "{again}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the dead node's task never settled");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert_store_verifies(&url);
    let committed = replay(&nodes[2], &token, &answers);
    assert_eq!(replay(&nodes[0], &token, &answers), committed);
    assert_eq!(head(&nodes[0]), head(&nodes[2]));
    assert_eq!(head(&nodes[0])["revision"], json!(committed), "one entry per committed task id");
}

#[test]
fn a_database_restarted_mid_load_under_three_nodes_loses_nothing_acknowledged_and_runs_nothing_twice() {
    let own = cluster::Private::start();
    let (url, _root, nodes) = nodes_on(own.database(), 3);
    let token = mint(&url, "Workspace.Read=worktree:100000");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let answers: Vec<(String, Option<Value>)> = std::thread::scope(|s| {
        let load: Vec<_> = (0..6)
            .map(|t| {
                let (node, token, stop) = (&nodes[t % 3], &token, &stop);
                s.spawn(move || {
                    let mut answers = vec![];
                    for i in 0.. {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let task = format!("restart-{t}-{i}");
                        let started = std::time::Instant::now();
                        let reply = read(node, token, &task);
                        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{task} hung");
                        assert!(read_ok(&reply) || typed_refusal(&reply), "{task}: {reply}");
                        answers.push((task, Some(reply)));
                    }
                    answers
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(500));
        own.restart();
        std::thread::sleep(std::time::Duration::from_millis(3000));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        load.into_iter().flat_map(|l| l.join().unwrap()).collect()
    });
    let refused = answers.iter().filter(|(_, r)| !r.as_ref().is_some_and(read_ok)).count();
    eprintln!("{} calls during the restart, {refused} refused", answers.len());
    assert!(refused < answers.len(), "no call succeeded");
    // Every node comes back by itself.
    for (i, node) in nodes.iter().enumerate() {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while node.daemon.get("/v1/health").status != 200 {
            assert!(std::time::Instant::now() < deadline, "node {i} stayed degraded");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    assert_store_verifies(&url);
    // Through a node other than the one that answered first, and again through another.
    let committed = replay(&nodes[1], &token, &answers);
    assert_eq!(replay(&nodes[2], &token, &answers), committed);
    assert_eq!(head(&nodes[0])["revision"], json!(committed), "one entry per committed task id");
}

#[test]
fn verify_export_and_import_take_store_and_a_world_moves_to_a_file_with_its_head() {
    let (url, root, nodes) = nodes(2);
    let token = mint(&url, "Workspace.Read=worktree:10");
    for (i, node) in nodes.iter().enumerate() {
        assert!(read_ok(&read(node, &token, &format!("moved-{i}"))));
    }
    let verified = worldd(&["verify", "--store", &url]);
    assert!(verified.status.success(), "{}{}", stdout(&verified), stderr(&verified));
    assert!(
        stdout(&verified).contains("3 log entries") && stdout(&verified).ends_with("; 0 fault(s)\n"),
        "{}",
        stdout(&verified)
    );
    let file = root.path().join("world.export");
    let exported = worldd(&["export", "--store", &url, "--out", file.to_str().unwrap(), "--with-sessions"]);
    assert!(exported.status.success(), "{}", stderr(&exported));
    let db = root.path().join("moved.db");
    let imported = worldd(&["import", "--db", db.to_str().unwrap(), "--in", file.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    let again = worldd(&["import", "--store", &url, "--in", file.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1), "an occupied database is refused: {}", stderr(&again));
    assert!(stderr(&again).contains("already holds a world"), "{}", stderr(&again));
    let copy = Daemon::start(&db);
    assert_eq!(copy.get("/v1/head").text(), nodes[0].daemon.get("/v1/head").text());
    let moved = read(&Node { daemon: copy, dir: root.path().to_path_buf() }, &token, "moved-0");
    assert_eq!(moved["result"], read(&nodes[0], &token, "moved-0")["result"], "a committed task replays on the file");
}

#[test]
fn while_the_database_is_down_calls_are_refused_typed_health_says_degraded_and_the_nodes_resume_by_themselves() {
    let own = cluster::Private::start();
    let (url, _root, nodes) = nodes_on(own.database(), 2);
    let token = mint(&url, "Workspace.Read=worktree:100");
    let before: Vec<Value> = nodes.iter().enumerate().map(|(i, n)| read(n, &token, &format!("before-{i}"))).collect();
    assert!(before.iter().all(read_ok), "{before:?}");
    own.pause();
    for (i, node) in nodes.iter().enumerate() {
        let started = std::time::Instant::now();
        let refused = read(node, &token, &format!("during-{i}"));
        assert!(refused.get("error").is_some(), "node {i}: {refused}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "answered, not hung: {:?}", started.elapsed());
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for node in &nodes {
        loop {
            let health = node.daemon.get("/v1/health");
            if health.status == 503 {
                assert_eq!(health.json()["status"], "degraded", "{}", health.text());
                break;
            }
            assert!(std::time::Instant::now() < deadline, "health never said degraded: {}", health.text());
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    own.resume();
    for (i, node) in nodes.iter().enumerate() {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let reply = read(node, &token, &format!("after-{i}-{}", deadline.elapsed().as_millis()));
            if read_ok(&reply) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "node {i} did not resume: {reply}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        assert_eq!(node.daemon.get("/v1/health").status, 200);
        // What was acknowledged before is what a resend answers now.
        assert_eq!(read(node, &token, &format!("before-{i}"))["result"], before[i]["result"]);
    }
}

#[test]
fn the_effects_of_one_episode_run_on_one_node_at_a_time() {
    let (url, _root, nodes) = nodes(2);
    let token = mint(&url, "Workspace.Read=worktree:1000");
    let done = std::sync::atomic::AtomicBool::new(false);
    let (held, most) = std::thread::scope(|s| {
        // Episode holds are advisory locks: watch them while both nodes run the episode.
        let watch = s.spawn(|| {
            let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let (mut held, mut most) = (0u32, 0i64);
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let granted: i64 = db
                    .query_one(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
                         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                        &[],
                    )
                    .unwrap()
                    .get(0);
                held += u32::from(granted > 0);
                most = most.max(granted);
            }
            (held, most)
        });
        let load: Vec<_> = (0..6)
            .map(|t| {
                let (node, token) = (&nodes[t % 2], &token);
                s.spawn(move || (0..10).filter(|i| read_ok(&read(node, token, &format!("ep-{t}-{i}")))).count())
            })
            .collect();
        let ran: usize = load.into_iter().map(|l| l.join().unwrap()).sum();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(ran, 60);
        watch.join().unwrap()
    });
    assert!(held > 0, "no node ever held the episode");
    assert_eq!(most, 1, "two nodes held one episode at once");
    assert_eq!(head(&nodes[0])["revision"], json!(60));
}

#[test]
fn a_registry_published_into_the_database_is_served_by_every_node_at_once() {
    let (url, root, nodes) = nodes(3);
    let token = mint(&url, "world.apply=world:10");
    let call = |node: &Node, task: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": {"id": task,
            "metadata": {"skill_id": "t.shared"},
            "message": {"role": "user", "parts": [{"type": "data", "data": {"said": task}}]}}});
        let auth = format!("Bearer {token}");
        let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        node.daemon.request("POST", "/a2a/", &headers, Some(&serde_json::to_vec(&body).unwrap())).json()
    };
    let before = call(&nodes[1], "before");
    assert!(before.get("error").is_some(), "not published yet: {before}");
    let manifest = root.path().join("manifest.json");
    let entry = json!([{"id": "t.shared", "title": "Shared", "description": "echo, published once for every node",
        "runtime": {"builtin": {"name": "tools.echo"}}, "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"}, "access": {"effect": "world.apply", "scope": "world", "cost": 1},
        "declaredEffects": []}]);
    std::fs::write(&manifest, serde_json::to_vec(&entry).unwrap()).unwrap();
    let published = worldd(&["publish", "--store", &url, "--manifest", manifest.to_str().unwrap()]);
    assert!(published.status.success(), "{}", stderr(&published));
    for (i, node) in nodes.iter().enumerate() {
        let task = format!("after-{i}");
        let reply = call(node, &task);
        assert_eq!(
            reply["result"]["artifacts"][0]["parts"][0]["data"]["echo"]["said"],
            json!(task),
            "node {i}: {reply}"
        );
    }
}

/// Two sessions of one episode on three nodes, racing: the second session's
/// grant leaves the same budget the first one's did, so its reads are alike
/// to the first's to the byte but for the call. Every effect that ran or was
/// denied has a record of its own, and `verify --store` is clean every round
/// (before records named their call, 5 runs in 6 found a fault).
#[test]
fn alike_effects_racing_on_three_nodes_each_get_their_own_record_and_the_store_verifies_every_round() {
    let (url, _root, nodes) = nodes(3);
    for round in 0..4 {
        let episode = format!("shared{round}");
        let first = mint_in(&url, &nodes, &episode, "Workspace.Read=worktree:5");
        let replies = at_once(24, |i| read(&nodes[i % 3], &first, &format!("b-{i}")));
        assert_eq!(replies.iter().filter(|r| read_ok(r)).count(), 5, "round {round}");
        let second = mint_in(&url, &nodes, &episode, "Workspace.Read=worktree:15");
        let mut later = at_once(10, |i| read(&nodes[i % 2], &second, &format!("c-{}", i / 2)));
        later.extend((5..13).map(|i| read(&nodes[2], &second, &format!("c-{i}"))));
        let ran_later: std::collections::HashSet<String> =
            later.iter().filter(|r| read_ok(r)).filter_map(record_of).collect();
        // The episode spent 5 of the second grant's 15: ten more run.
        assert_eq!(ran_later.len(), 10, "round {round}: {later:#?}");
        // Every call that committed names one record; no two calls share one.
        let mut seen = std::collections::HashMap::new();
        for reply in replies.iter().chain(&later) {
            if let (Some(record), Some(task)) = (record_of(reply), reply["result"]["id"].as_str()) {
                let first_task = seen.entry(record.clone()).or_insert_with(|| task.to_string());
                assert_eq!(first_task, task, "round {round}: {record} records two calls");
            }
        }
        assert_eq!(seen.len(), 24 + 13, "round {round}: one record per call");
        assert_store_verifies(&url);
    }
}

/// A 2026-07-28 `tools/call` of `ailang-read` from a client that declares
/// elicitation, with `extra` params (a retry's state and answers).
fn modern_read(node: &Node, token: &str, extra: Value) -> Value {
    let mut params = json!({"name": "ailang-read", "arguments": {"path": "hello.txt"}});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    node.daemon.mcp_modern(token, "tools/call", params, json!({"elicitation": {}}))
}

#[test]
fn an_approval_asked_on_one_node_is_decided_on_the_store_and_answered_on_another() {
    let (url, _root, nodes) = nodes(2);
    let token = mint_in(&url, &nodes, "asks", "Workspace.Read=worktree:10");
    let asks = mint_in_with(&url, &nodes, "asks", "Workspace.Read=worktree:10", &["--ask", "Workspace.Read"]);
    assert!(read_ok(&read(&nodes[0], &token, "plain")), "a grant that does not ask runs at once");

    // Out of band: asked through node 0, approved on the store, run through node 1.
    let waiting = read(&nodes[0], &asks, "t1");
    assert_eq!(waiting["result"]["status"]["state"], json!("input-required"), "{waiting}");
    let id = waiting["result"]["status"]["message"]["parts"][0]["data"]["approval"]["id"].as_str().unwrap().to_string();
    let listed = worldd(&["approvals", "--store", &url, "--json"]);
    assert!(stdout(&listed).contains(&id), "{}", stdout(&listed));
    let o = worldd(&["approve", &id, "--store", &url]);
    assert!(o.status.success(), "approve: {}", stderr(&o));
    let ran = read(&nodes[1], &asks, "t1");
    assert!(read_ok(&ran), "{ran}");
    let again = read(&nodes[0], &asks, "t1");
    assert_eq!(record_of(&again), record_of(&ran), "a resend elsewhere replays the one run");

    // In band: the question sealed by node 0 is answered through node 1 (one key per store).
    let asked = modern_read(&nodes[0], &asks, json!({}));
    assert_eq!(asked["result"]["resultType"], json!("input_required"), "{asked}");
    let answer = json!({"requestState": asked["result"]["requestState"],
        "inputResponses": {"approval": {"action": "accept", "content": {"decision": "approve"}}}});
    let done = modern_read(&nodes[1], &asks, answer);
    assert_eq!(done["result"]["structuredContent"]["world"]["effects"][0]["status"], json!("ok"), "{done}");
    let summary = nodes[0].daemon.get("/v1/episodes/asks").ok_json();
    let spent: u64 = summary["spend"].as_array().unwrap().iter().map(|s| s["spent"].as_u64().unwrap()).sum();
    assert_eq!(spent, 3, "one plain read and two approved ones");
    assert_store_verifies(&url);
}

#[test]
fn a_database_password_appears_in_no_line_page_record_or_export() {
    const SECRET: &str = "pw-S3CRET-never-shown";
    let url = cluster::fresh_database();
    let with_password = url.replacen("postgres://postgres@", &format!("postgres://postgres:{SECRET}@"), 1);
    assert_ne!(with_password, url);
    let (_, root, nodes) = nodes_on(with_password.clone(), 1);
    let node = &nodes[0];
    let mut seen = String::new();
    let mut run = |args: &[&str]| {
        let o = worldd(args);
        seen.push_str(&format!("{}{}", stdout(&o), stderr(&o)));
        o
    };
    // An operator's decision names the store it was made on.
    let asks = mint_in_with(
        &with_password,
        &nodes,
        "asks",
        "Workspace.Read=worktree:10",
        &["--ask-operator", "Workspace.Read"],
    );
    let waiting = read(node, &asks, "t1");
    let id = waiting["result"]["status"]["message"]["parts"][0]["data"]["approval"]["id"].as_str().unwrap().to_string();
    assert!(run(&["approvals", "--store", &with_password]).status.success());
    assert!(run(&["approve", &id, "--store", &with_password]).status.success());
    assert!(read_ok(&read(node, &asks, "t1")));
    let export = root.path().join("store.export");
    assert!(run(&["export", "--store", &with_password, "--out", export.to_str().unwrap()]).status.success());
    assert!(run(&["verify", "--store", &with_password]).status.success());
    // Refusals that name the store: a database nobody serves, a query parameter, no URL at all.
    let unreachable = format!("postgres://postgres:{SECRET}@127.0.0.1:1/nowhere");
    let in_query = format!("{url}?password={SECRET}");
    let not_a_url = format!("host=127.0.0.1 password={SECRET}");
    for store in [&unreachable, &in_query, &not_a_url] {
        run(&["session", "list", "--store", store]);
    }
    // Everything a person or an agent can read.
    for path in ["/v1/health", "/v1/store", "/metrics", "/workbench", "/workbench/episodes", "/workbench/episodes/asks"]
    {
        seen.push_str(&node.daemon.get(path).text());
    }
    seen.push_str(&node.daemon.stderr_lines().join("\n"));
    let exported = std::fs::read(&export).unwrap();
    seen.push_str(&String::from_utf8_lossy(&exported));
    assert!(!seen.contains(SECRET), "the password shows:\n{seen}");
    let named = url.split_once('?').map_or(url.as_str(), |(u, _)| u);
    let decision = String::from_utf8_lossy(&exported);
    assert!(decision.contains(named), "the decision names the store without its password ({named})");
}

#[test]
fn a_task_started_on_one_node_is_polled_and_cancelled_on_another_and_a_dead_node_s_task_reads_failed() {
    use crate::tasks::{a2a_v1, eventually, processes_with, send_script, state, until_gone};
    use std::time::Duration;
    let (url, _root, mut nodes) = nodes_with(cluster::fresh_database(), 2, &["--exec-allow", "sh=/bin/sh"]);
    let more = ["--grant", "world.apply=world:10"];
    let token = mint_in_with(&url, &nodes, "long", "Workspace.Exec=worktree:10", &more);
    let (first, second) = (&nodes[0].daemon, &nodes[1].daemon);
    assert_eq!(state(&send_script(first, &token, "far-1", "echo begun; sleep 353")), "TASK_STATE_WORKING");
    // Any node answers a poll: working, from the store, with the output the
    // running node last wrote there.
    let polled = eventually(Duration::from_secs(8), Duration::from_millis(250), || {
        let r = a2a_v1(second, &token, "GetTask", json!({"id": "far-1"}));
        let running = &r["result"]["status"]["message"]["parts"][0]["data"]["running"];
        let told = running["outputTail"] == json!("begun\n") && running["outputBytes"] == json!(6);
        if state(&r) == "TASK_STATE_WORKING" && told { Ok(r) } else { Err(r.to_string()) }
    });
    assert_eq!(state(&polled), "TASK_STATE_WORKING", "{polled}");
    // A cancel sent to the other node reaches the node that runs the command.
    let asked = std::time::Instant::now();
    let cancelled = a2a_v1(second, &token, "CancelTask", json!({"id": "far-1"}));
    assert_eq!(state(&cancelled), "TASK_STATE_CANCELED", "{cancelled} after {:?}", asked.elapsed());
    assert!(processes_with("sleep 353").is_empty(), "no process of the command remains");
    // The node running a command dies: the command dies with it, and once
    // its lease lapses the other node answers for its task.
    assert_eq!(state(&send_script(first, &token, "far-2", "sleep 354")), "TASK_STATE_WORKING");
    std::thread::sleep(std::time::Duration::from_millis(500));
    nodes[0].daemon.signal_and_wait("KILL");
    until_gone("sleep 354");
    let failed = eventually(Duration::from_secs(60), Duration::from_millis(500), || {
        let r = a2a_v1(&nodes[1].daemon, &token, "GetTask", json!({"id": "far-2"}));
        if state(&r) == "TASK_STATE_WORKING" { Err(format!("still working after its node died: {r}")) } else { Ok(r) }
    });
    assert_eq!(state(&failed), "TASK_STATE_FAILED", "{failed}");
    let why = failed["result"]["status"]["message"]["parts"][0]["data"]["failed"].as_str().unwrap_or_default();
    assert!(why.contains("the daemon stopped while the command ran"), "{failed}");
    assert_store_verifies(&url);
}

#[test]
fn a_task_running_on_one_node_streams_its_status_and_result_to_a_subscriber_on_another() {
    use crate::tasks::{member, open_stream, send_script};
    let (url, _root, nodes) = nodes_with(cluster::fresh_database(), 2, &["--exec-allow", "sh=/bin/sh"]);
    let token = mint_in(&url, &nodes, "streams", "Workspace.Exec=worktree:10");
    let sent = send_script(&nodes[0].daemon, &token, "far-1", "echo far; sleep 3; echo done");
    assert_eq!(sent["result"]["task"]["status"]["state"], json!("TASK_STATE_WORKING"), "{sent}");
    let mut sse = open_stream(&nodes[1].daemon, &token, "SubscribeToTask", json!({"id": "far-1"}))
        .unwrap_or_else(|refused| panic!("{refused}"));
    let first = sse.next().unwrap();
    assert_eq!((member(&first).0, &member(&first).1["status"]["state"]), ("task", &json!("TASK_STATE_WORKING")));
    let events = sse.rest();
    let names: Vec<&str> = events.iter().map(|e| member(e).0).collect();
    // Its output is seen on the node that runs it: here, its result and its end.
    assert_eq!(names, ["artifactUpdate", "statusUpdate"], "{events:?}");
    assert_eq!(member(&events[0]).1["artifact"]["parts"][0]["data"]["stdout"], json!("far\ndone\n"));
    assert_eq!(member(&events[1]).1["status"]["state"], json!("TASK_STATE_COMPLETED"));
}
