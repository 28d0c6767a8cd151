//! Commands that outlast their request: an A2A `SendMessage` with
//! `returnImmediately` answers with a working task once the command's intent
//! and debit are durable, and the command runs on past the 9 s a call
//! answered in its own request gets; `GetTask` tells how far it has got and
//! then its result; `CancelTask` stops it, its whole process tree, and it
//! reads canceled; a daemon killed mid-run takes the command with it, and
//! after a restart the task reads failed, debited once, never run again.

use crate::approvals::{EP, Lab, lab, start};
use crate::episodes::{Minted, mint_with};
use crate::harness::*;
use serde_json::{Value, json};
use std::io::Read as _;
use std::time::{Duration, Instant};

const GRANTS: [&str; 2] = ["Workspace.Exec=worktree:10", "world.apply=world:10"];

fn shell_lab() -> (Lab, Minted) {
    let lab = lab(&["--exec-allow", "sh=/bin/sh"]);
    let s = mint_with(&lab.db, EP, &GRANTS, &[], None);
    (lab, s)
}

pub(crate) fn a2a_v1(d: &Daemon, token: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json"), ("A2A-Version", "1.0")];
    d.request("POST", "/a2a/", &headers, Some(&serde_json::to_vec(&body).unwrap())).json()
}

/// Sends `sh -c script` as task `task`, answered at once.
pub(crate) fn send_script(d: &Daemon, token: &str, task: &str, script: &str) -> Value {
    let message = json!({"messageId": task, "taskId": task, "role": "ROLE_USER",
        "parts": [{"data": {"command": "sh", "args": ["-c", script]}}]});
    let params = json!({"message": message, "metadata": {"skill_id": "workspace-exec"},
        "configuration": {"returnImmediately": true}});
    a2a_v1(d, token, "SendMessage", params)
}

fn get(d: &Daemon, token: &str, task: &str) -> Value {
    a2a_v1(d, token, "GetTask", json!({"id": task}))
}

pub(crate) fn state(reply: &Value) -> &str {
    task_of(reply)["status"]["state"].as_str().unwrap_or_else(|| panic!("a task: {reply}"))
}

/// Asks `probe` every `gap` until it answers `Ok`, for at most `within`;
/// past that, fails with its last `Err`.
pub(crate) fn eventually<T>(within: Duration, gap: Duration, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let until = Instant::now() + within;
    loop {
        match probe() {
            Ok(found) => return found,
            Err(last) => assert!(Instant::now() < until, "not within {within:?}: {last}"),
        }
        std::thread::sleep(gap);
    }
}

/// Polls the task until its state is no longer working.
fn until_ended(d: &Daemon, token: &str, task: &str, within: Duration) -> Value {
    eventually(within, Duration::from_millis(200), || {
        let r = get(d, token, task);
        if state(&r) == "TASK_STATE_WORKING" { Err(format!("still working: {r}")) } else { Ok(r) }
    })
}

/// Waits until no process holds `marker` (a run killed takes a moment to be reaped).
pub(crate) fn until_gone(marker: &str) {
    eventually(Duration::from_secs(5), Duration::from_millis(100), || match processes_with(marker).as_slice() {
        [] => Ok(()),
        left => Err(format!("still running: {left:?}")),
    })
}

/// Processes on this machine whose command line holds `marker`.
pub(crate) fn processes_with(marker: &str) -> Vec<String> {
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(marker) {
                found.push(cmdline);
            }
        }
    }
    found
}

/// The task a reply carries: `SendMessage` wraps it, `GetTask` and `CancelTask` do not.
fn task_of(reply: &Value) -> &Value {
    if reply["result"]["task"].is_object() { &reply["result"]["task"] } else { &reply["result"] }
}

fn output(reply: &Value) -> &Value {
    &task_of(reply)["artifacts"][0]["parts"][0]["data"]
}

#[test]
fn a_command_sent_to_return_immediately_runs_as_a_task_past_the_request_deadline() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    let sent = send_script(d, &s.token, "long-1", "echo begun; sleep 11; echo done");
    assert_eq!(state(&sent), "TASK_STATE_WORKING", "{sent}");
    assert_eq!(lab.spent(), 1, "debited before the task was answered");
    // While it runs, a poll tells how far it has got.
    std::thread::sleep(Duration::from_millis(1500));
    let polled = get(d, &s.token, "long-1");
    assert_eq!(state(&polled), "TASK_STATE_WORKING", "{polled}");
    let running = &polled["result"]["status"]["message"]["parts"][0]["data"]["running"];
    assert!(running["outputTail"].as_str().is_some_and(|t| t.contains("begun")), "{polled}");
    assert!(running["elapsedSeconds"].as_u64().is_some(), "{polled}");
    // It outlives the 9 s a command answered in its own request gets.
    let ended = until_ended(d, &s.token, "long-1", Duration::from_secs(40));
    assert_eq!(state(&ended), "TASK_STATE_COMPLETED", "{ended}");
    let out = output(&ended);
    assert_eq!(out["exit_code"], json!(0), "{ended}");
    assert_eq!(out["stdout"], json!("begun\ndone\n"), "{ended}");
    assert_eq!(out["timed_out"], json!(false), "{ended}");
    assert_eq!(lab.spent(), 1, "debited once");
    assert_verifies(&lab.db);
}

#[test]
fn a_cancelled_task_stops_its_whole_command_reads_canceled_and_stays_debited() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    // A child of the shell, in the background: the whole tree must go.
    let sent = send_script(d, &s.token, "cancel-1", "echo started; sleep 313 & sleep 313; echo never");
    assert_eq!(state(&sent), "TASK_STATE_WORKING", "{sent}");
    std::thread::sleep(Duration::from_millis(1000));
    assert!(!processes_with("sleep 313").is_empty(), "the command runs");
    let cancelled = a2a_v1(d, &s.token, "CancelTask", json!({"id": "cancel-1"}));
    assert_eq!(state(&cancelled), "TASK_STATE_CANCELED", "{cancelled}");
    let out = output(&cancelled);
    assert_eq!(out["cancelled"], json!(true), "{cancelled}");
    assert_eq!(out["stdout"], json!("started\n"), "what output it had is kept: {cancelled}");
    assert!(processes_with("sleep 313").is_empty(), "no process of the command remains");
    assert_eq!(state(&get(d, &s.token, "cancel-1")), "TASK_STATE_CANCELED");
    // Cancelling an ended task is refused; the budget stays debited.
    let again = a2a_v1(d, &s.token, "CancelTask", json!({"id": "cancel-1"}));
    assert_eq!(again["error"]["code"], json!(-32002), "{again}");
    assert_eq!(lab.spent(), 1);
    assert_verifies(&lab.db);
}

#[test]
fn a_daemon_killed_mid_task_takes_the_command_with_it_and_the_task_reads_failed_after_restart() {
    let (mut lab, s) = shell_lab();
    let sent = send_script(&lab.daemon, &s.token, "orphan-1", "sleep 317");
    assert_eq!(state(&sent), "TASK_STATE_WORKING", "{sent}");
    std::thread::sleep(Duration::from_millis(1000));
    assert!(!processes_with("sleep 317").is_empty(), "the command runs");
    lab.daemon.signal_and_wait("KILL");
    until_gone("sleep 317");
    lab.daemon = start(&lab.store.db, &lab.root, &["--exec-allow", "sh=/bin/sh"]);
    let after = get(&lab.daemon, &s.token, "orphan-1");
    assert_eq!(state(&after), "TASK_STATE_FAILED", "{after}");
    let why = after["result"]["status"]["message"]["parts"][0]["data"]["failed"].as_str().unwrap_or_default();
    assert!(why.contains("the daemon stopped while the command ran"), "{after}");
    assert!(why.contains("debited once") && why.contains("will not run again"), "{after}");
    assert_eq!(lab.spent(), 1, "debited once");
    // The same task id sent again does not run it again.
    let resent = send_script(&lab.daemon, &s.token, "orphan-1", "sleep 317");
    assert!(resent["error"].is_object(), "{resent}");
    assert!(processes_with("sleep 317").is_empty(), "never run again");
    assert_eq!(lab.spent(), 1);
    assert_verifies(&lab.db);
}

#[test]
fn an_a2a_version_the_agent_does_not_serve_is_refused_and_nothing_runs() {
    let (lab, s) = shell_lab();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "t-1"}});
    let auth = format!("Bearer {}", s.token);
    for (version, code) in [("2.0", Some(-32009)), ("1.0", None), ("0.3", None)] {
        let headers =
            [("Authorization", auth.as_str()), ("Content-Type", "application/json"), ("A2A-Version", version)];
        let r = lab.daemon.request("POST", "/a2a/", &headers, Some(&serde_json::to_vec(&body).unwrap()));
        assert_eq!(r.status, 200, "JSON-RPC errors travel in a 200");
        let v = r.json();
        match code {
            Some(code) => assert_eq!(v["error"]["code"], json!(code), "{version}: {v}"),
            None => assert_eq!(v["error"]["code"], json!(-32001), "{version} is served (the task is unknown): {v}"),
        }
    }
}

#[test]
fn list_tasks_and_metrics_show_running_tasks_working_and_cancelled_ones_canceled() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    assert_eq!(state(&send_script(d, &s.token, "listed-run", "sleep 331")), "TASK_STATE_WORKING");
    assert_eq!(state(&send_script(d, &s.token, "listed-stop", "sleep 332")), "TASK_STATE_WORKING");
    let metrics = d.get("/metrics").text();
    assert!(metrics.contains("worldd_tasks_running 2"), "{metrics}");
    let cancelled = a2a_v1(d, &s.token, "CancelTask", json!({"id": "listed-stop"}));
    assert_eq!(state(&cancelled), "TASK_STATE_CANCELED", "{cancelled}");
    let listed = a2a_v1(d, &s.token, "ListTasks", json!({}));
    let states: Vec<(String, String)> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| (t["id"].as_str().unwrap().to_string(), t["status"]["state"].as_str().unwrap().to_string()))
        .collect();
    assert!(states.contains(&("listed-run".into(), "TASK_STATE_WORKING".into())), "{states:?}");
    assert!(states.contains(&("listed-stop".into(), "TASK_STATE_CANCELED".into())), "{states:?}");
    let working = a2a_v1(d, &s.token, "ListTasks", json!({"status": "TASK_STATE_WORKING"}));
    assert_eq!(working["result"]["tasks"].as_array().map(Vec::len), Some(1), "{working}");
    assert_eq!(state(&a2a_v1(d, &s.token, "CancelTask", json!({"id": "listed-run"}))), "TASK_STATE_CANCELED");
    assert!(processes_with("sleep 331").is_empty() && processes_with("sleep 332").is_empty());
    // A call's end is counted just after its commit, which the reply waited for.
    let ended = ["worldd_tasks_running 0", "worldd_tasks_total{status=\"cancelled\"} 2"];
    eventually(Duration::from_secs(5), Duration::from_millis(50), || {
        let metrics = d.get("/metrics").text();
        if ended.iter().all(|l| metrics.contains(l)) { Ok(()) } else { Err(metrics) }
    });
}

#[test]
fn the_operator_cancels_a_running_task_by_its_invocation_id() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    assert_eq!(state(&send_script(d, &s.token, "op-1", "sleep 337")), "TASK_STATE_WORKING");
    let invocation = format!("a2a:{EP}:op-1");
    let said = lab.worldd_ok(&["cancel", &invocation]);
    assert!(said.contains(&format!("asked task {invocation} to stop")), "{said}");
    let ended = until_ended(d, &s.token, "op-1", Duration::from_secs(10));
    assert_eq!(state(&ended), "TASK_STATE_CANCELED", "{ended}");
    assert!(processes_with("sleep 337").is_empty(), "no process of the command remains");
    // Nothing left to cancel: said so, with a failing exit.
    let again = worldd(&["cancel", &invocation, "--db", &lab.db]);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(stderr(&again).contains("already ended (committed): there is nothing to cancel"), "{}", stderr(&again));
    let unknown = worldd(&["cancel", "a2a:asks:nothing", "--db", &lab.db]);
    assert!(stderr(&unknown).contains("no task a2a:asks:nothing"), "{}", stderr(&unknown));
    let malformed = worldd(&["cancel", "op-1", "--db", &lab.db]);
    assert!(stderr(&malformed).contains("is not a task's invocation id"), "{}", stderr(&malformed));
}

#[test]
fn the_episode_views_show_a_running_task_with_its_last_output_and_the_command_that_stops_it() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    let sent = send_script(d, &s.token, "shown-1", "echo compiling crate one; echo linking; sleep 341");
    assert_eq!(state(&sent), "TASK_STATE_WORKING", "{sent}");
    let cancel = format!("worldd cancel a2a:{EP}:shown-1");
    let call = eventually(Duration::from_secs(5), Duration::from_millis(100), || {
        let page = d.get(&format!("/v1/episodes/{EP}/calls")).ok_json();
        let call = page["calls"].as_array().unwrap().iter().find(|c| c["taskId"] == json!("shown-1")).cloned();
        let call = call.unwrap_or_else(|| panic!("{page}"));
        if call["run"]["lastOutput"] == json!("linking") { Ok(call) } else { Err(call.to_string()) }
    });
    assert_eq!(call["state"], json!("started"), "{call}");
    assert_eq!(call["run"]["lastOutput"], json!("linking"), "{call}");
    assert_eq!(call["run"]["cancel"], json!(cancel), "{call}");
    let page = d.get(&format!("/workbench/episodes/{EP}")).text();
    assert!(page.contains(&cancel) && page.contains("linking"), "the workbench shows it");
    let printed = worldd(&["episode", EP, "--addr", &d.base_url()]);
    assert!(stdout(&printed).contains(&format!("stop it: {cancel}")), "{}{}", stdout(&printed), stderr(&printed));
    // The command printed stops it, as printed, in a shell that named the store once.
    let o =
        std::process::Command::new(WORLDD).args(cancel.split(' ').skip(1)).env("WORLD_DB", &lab.db).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let ended = until_ended(d, &s.token, "shown-1", Duration::from_secs(10));
    assert_eq!(state(&ended), "TASK_STATE_CANCELED");
    let page = d.get(&format!("/v1/episodes/{EP}/calls")).ok_json();
    let call = page["calls"].as_array().unwrap().iter().find(|c| c["taskId"] == json!("shown-1")).unwrap().clone();
    assert_eq!(call["run"]["cancel"], Value::Null, "nothing to stop once ended: {call}");
    assert_eq!(call["effects"][0]["status"], json!("cancelled"), "{call}");
}

// ---- A2A streams ----

/// Longest wait for a byte of a stream: the stock Python client's read timeout.
const STREAM_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// An A2A stream read off the wire: the chunked body decoded, its events
/// parsed, keep-alive comments counted.
pub(crate) struct Sse {
    raw: Raw,
    /// Bytes read and not yet decoded from the chunked framing.
    framed: Vec<u8>,
    /// Decoded bytes not yet parsed into events.
    body: Vec<u8>,
    ended: bool,
    keepalives: usize,
}

/// Opens a stream (`SendStreamingMessage`, `SubscribeToTask`); a reply that
/// is not a stream is returned as its JSON.
pub(crate) fn open_stream(d: &Daemon, token: &str, method: &str, params: Value) -> Result<Sse, Value> {
    let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": "s-1", "method": method, "params": params})).unwrap();
    let head = format!(
        "Authorization: Bearer {token}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n\
         Accept: text/event-stream\r\nCache-Control: no-store\r\nContent-Length: {}\r\n",
        body.len()
    );
    let mut raw = Raw::connect(&d.addr);
    raw.send(&[raw_head("POST", &d.addr, "/a2a/", head.as_bytes()), body].concat());
    let (status, headers) = raw.read_head();
    assert_eq!(status, 200, "{headers:?}");
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or_default();
    if header("content-type").starts_with("application/json") {
        let len: usize = header("content-length").parse().unwrap();
        let mut body = raw.take_buffered();
        while body.len() < len {
            let mut chunk = [0u8; 4096];
            let n = raw.stream.read(&mut chunk).unwrap();
            assert!(n > 0, "closed inside the body");
            body.extend_from_slice(&chunk[..n]);
        }
        return Err(serde_json::from_slice(&body[..len]).unwrap());
    }
    assert_eq!(header("content-type"), "text/event-stream", "{headers:?}");
    assert_eq!(header("transfer-encoding"), "chunked", "{headers:?}");
    raw.stream.set_read_timeout(Some(STREAM_READ_TIMEOUT)).unwrap();
    let framed = raw.take_buffered();
    Ok(Sse { raw, framed, body: vec![], ended: false, keepalives: 0 })
}

impl Sse {
    /// Decodes what chunks are whole; false once the body has ended.
    fn decode(&mut self) -> bool {
        loop {
            let Some(eol) = self.framed.windows(2).position(|w| w == b"\r\n") else { return !self.ended };
            let size = usize::from_str_radix(std::str::from_utf8(&self.framed[..eol]).unwrap().trim(), 16).unwrap();
            if size == 0 {
                self.ended = true;
                return false;
            }
            if self.framed.len() < eol + 2 + size + 2 {
                return true;
            }
            self.body.extend_from_slice(&self.framed[eol + 2..eol + 2 + size]);
            self.framed.drain(..eol + 2 + size + 2);
        }
    }

    /// The next event's data, or `None` once the stream has closed. A
    /// stream silent for longer than a stock client waits fails the test.
    pub(crate) fn next(&mut self) -> Option<Value> {
        loop {
            let open = self.decode();
            if let Some(end) = self.body.windows(2).position(|w| w == b"\n\n") {
                let block = String::from_utf8(self.body.drain(..end + 2).collect()).unwrap();
                if block.starts_with(':') {
                    self.keepalives += 1;
                    continue;
                }
                let data =
                    block.trim_end().strip_prefix("data: ").unwrap_or_else(|| panic!("one data line: {block:?}"));
                return Some(serde_json::from_str(data).unwrap());
            }
            if !open {
                assert!(self.body.is_empty(), "a partial event at the end: {:?}", String::from_utf8_lossy(&self.body));
                return None;
            }
            let mut chunk = [0u8; 16 << 10];
            match self.raw.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.framed.extend_from_slice(&chunk[..n]),
                Err(e) => panic!("no byte of the stream within {STREAM_READ_TIMEOUT:?}: {e}"),
            }
        }
    }

    /// Every event up to the stream's close.
    pub(crate) fn rest(&mut self) -> Vec<Value> {
        std::iter::from_fn(|| self.next()).collect()
    }
}

fn script_message(task: &str, script: &str) -> Value {
    let message = json!({"messageId": task, "taskId": task, "role": "ROLE_USER",
        "parts": [{"data": {"command": "sh", "args": ["-c", script]}}]});
    json!({"message": message, "metadata": {"skill_id": "workspace-exec"}, "configuration": {}})
}

/// The one member of an event's StreamResponse, by name.
pub(crate) fn member(event: &Value) -> (&str, &Value) {
    let result = event["result"].as_object().unwrap_or_else(|| panic!("a result: {event}"));
    assert_eq!(result.len(), 1, "exactly one member: {event}");
    let (name, value) = result.iter().next().unwrap();
    (name.as_str(), value)
}

/// Checks the live output's chunks (one artifact id, `append` after the
/// first, `lastChunk` on the last and only there) and returns their texts.
fn live_output(events: &[Value]) -> Vec<String> {
    let chunks: Vec<&Value> = events
        .iter()
        .map(member)
        .filter(|(name, u)| *name == "artifactUpdate" && u["artifact"]["artifactId"] == json!("live-output"))
        .map(|(_, u)| u)
        .collect();
    assert!(!chunks.is_empty(), "{events:?}");
    for (i, c) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        assert_eq!(c["append"].as_bool().unwrap_or(false), i > 0, "append after the first: {c}");
        assert_eq!(c["lastChunk"].as_bool().unwrap_or(false), last, "lastChunk on the last only: {c}");
    }
    chunks.iter().map(|c| c["artifact"]["parts"][0]["text"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_streamed_command_sends_its_task_then_its_output_as_it_comes_then_its_end_and_closes() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    let auth = format!("Bearer {}", s.token);
    let card = d.request("GET", "/.well-known/agent-card.json", &[("Authorization", auth.as_str())], None).ok_json();
    assert_eq!(card["capabilities"]["streaming"], json!(true), "{card}");
    let began = Instant::now();
    let script = "echo one; sleep 2; echo two; sleep 11; echo three";
    let mut sse = open_stream(d, &s.token, "SendStreamingMessage", script_message("streamed-1", script))
        .unwrap_or_else(|refused| panic!("{refused}"));
    let first = sse.next().unwrap();
    let (name, task) = member(&first);
    assert_eq!(
        (name, &task["id"], &task["status"]["state"]),
        ("task", &json!("streamed-1"), &json!("TASK_STATE_WORKING"))
    );
    assert_eq!(first["id"], json!("s-1"), "each event answers the request's id");
    // "one" comes while the command sleeps, long before it ends.
    let early = sse.next().unwrap();
    assert_eq!(member(&early).0, "artifactUpdate", "{early}");
    assert!(began.elapsed() < Duration::from_secs(5), "the first output came at once");
    let mut events = vec![early];
    events.extend(sse.rest());
    assert!(began.elapsed() > Duration::from_secs(12), "the stream lasted as long as the command");
    assert!(sse.keepalives >= 3, "comments kept the 11 s of silence alive: {}", sse.keepalives);
    let texts = live_output(&events);
    assert_eq!(texts.concat(), "one\ntwo\nthree\n", "{texts:?}");
    let at = |word: &str| texts.iter().position(|t| t.contains(word)).unwrap();
    assert!(at("one") < at("two") && at("two") < at("three"), "each as it came, in order: {texts:?}");
    let updates: Vec<(&str, &Value)> = events.iter().map(member).collect();
    let (last_name, last) = updates[updates.len() - 1];
    assert_eq!(last_name, "statusUpdate", "{events:?}");
    assert_eq!((&last["taskId"], &last["contextId"]), (&json!("streamed-1"), &json!("streamed-1")));
    assert_eq!(last["status"]["state"], json!("TASK_STATE_COMPLETED"), "{last}");
    let (result_name, result) = updates[updates.len() - 2];
    assert_eq!((result_name, &result["artifact"]["artifactId"]), ("artifactUpdate", &json!("output")));
    assert_eq!(result["artifact"]["parts"][0]["data"]["stdout"], json!("one\ntwo\nthree\n"), "{result}");
    assert_eq!(state(&get(d, &s.token, "streamed-1")), "TASK_STATE_COMPLETED");
    assert_eq!(lab.spent(), 1, "debited once");
}

#[test]
fn a_stream_whose_client_goes_away_leaves_its_task_running_to_its_end() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    let mut sse = open_stream(d, &s.token, "SendStreamingMessage", script_message("left-1", "echo a; sleep 3; echo b"))
        .unwrap_or_else(|refused| panic!("{refused}"));
    assert_eq!(member(&sse.next().unwrap()).0, "task");
    drop(sse);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(state(&get(d, &s.token, "left-1")), "TASK_STATE_WORKING", "the task runs on");
    let ended = until_ended(d, &s.token, "left-1", Duration::from_secs(20));
    assert_eq!(state(&ended), "TASK_STATE_COMPLETED", "{ended}");
    assert_eq!(output(&ended)["stdout"], json!("a\nb\n"), "{ended}");
}

#[test]
fn a_streamed_task_cancelled_mid_run_closes_its_live_output_and_ends_canceled() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    let script = "echo started; sleep 353";
    let mut sse = open_stream(d, &s.token, "SendStreamingMessage", script_message("stream-stop", script))
        .unwrap_or_else(|refused| panic!("{refused}"));
    assert_eq!(member(&sse.next().unwrap()).0, "task");
    let chunk = sse.next().unwrap();
    assert_eq!(member(&chunk).1["artifact"]["parts"][0]["text"], json!("started\n"), "{chunk}");
    let cancelled = a2a_v1(d, &s.token, "CancelTask", json!({"id": "stream-stop"}));
    assert_eq!(state(&cancelled), "TASK_STATE_CANCELED", "{cancelled}");
    let events = sse.rest();
    let statuses: Vec<&Value> =
        events.iter().map(member).filter(|(n, _)| *n == "statusUpdate").map(|(_, u)| &u["status"]).collect();
    // A working status comes only if the stream read the task between the
    // ask and the stop; if it does, it says a cancel was asked.
    let (last, before) = statuses.split_last().unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(last["state"], json!("TASK_STATE_CANCELED"), "{events:?}");
    for asked in before {
        assert_eq!(asked["state"], json!("TASK_STATE_WORKING"), "{events:?}");
        assert_eq!(asked["message"]["parts"][0]["data"]["running"]["cancelAsked"], json!(true), "{events:?}");
    }
    let texts = live_output(&[vec![chunk], events].concat());
    assert_eq!(texts.concat(), "started\n", "the output came before the cancel: {texts:?}");
    assert!(processes_with("sleep 353").is_empty(), "no process of the command remains");
}

#[test]
fn a_stream_that_falls_behind_skips_saying_how_much_and_streams_past_the_limit_wait_for_one_to_end() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    // Ten megabytes at once, then a long wait: far more than a stream keeps.
    let script = "yes streamed | head -c 10000000; sleep 359";
    let mut slow = open_stream(d, &s.token, "SendStreamingMessage", script_message("crowd-1", script))
        .unwrap_or_else(|refused| panic!("{refused}"));
    std::thread::sleep(Duration::from_millis(1500));
    // The unread stream held nothing back: the command wrote all of it.
    let running = get(d, &s.token, "crowd-1");
    assert_eq!(running["result"]["status"]["message"]["parts"][0]["data"]["running"]["outputBytes"], json!(10_000_000));
    assert_eq!(member(&slow.next().unwrap()).0, "task");
    let skipped = std::iter::from_fn(|| slow.next())
        .map(|e| member(&e).1["artifact"].clone())
        .find(|a| a["metadata"]["skippedBytes"].as_u64().is_some_and(|n| n > 0))
        .expect("a chunk that says it skipped");
    let text = skipped["parts"][0]["text"].as_str().unwrap();
    let n = skipped["metadata"]["skippedBytes"].as_u64().unwrap();
    assert!(text.starts_with(&format!("… [{n} bytes skipped: the stream fell behind the command] …\n")), "{text:.120}");
    // 64 streams open at once (this one and 63 subscriptions); the next is refused, as JSON.
    let mut open: Vec<Sse> = (0..63)
        .map(|_| {
            open_stream(d, &s.token, "SubscribeToTask", json!({"id": "crowd-1"})).unwrap_or_else(|r| panic!("{r}"))
        })
        .collect();
    let refused = open_stream(d, &s.token, "SubscribeToTask", json!({"id": "crowd-1"})).err().expect("refused");
    assert_eq!(refused["error"]["code"], json!(-32603), "{refused}");
    let detail = refused["error"]["data"][0]["metadata"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("64 streams are open on this daemon"), "{refused}");
    // One client goes away: its place is taken again.
    drop(open.pop());
    let until = Instant::now() + Duration::from_secs(10);
    let again = loop {
        match open_stream(d, &s.token, "SubscribeToTask", json!({"id": "crowd-1"})) {
            Ok(sse) => break sse,
            Err(r) => assert!(Instant::now() < until, "no place freed: {r}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(state(&a2a_v1(d, &s.token, "CancelTask", json!({"id": "crowd-1"}))), "TASK_STATE_CANCELED");
    drop((slow, open, again));
}

#[test]
fn a_subscription_streams_a_running_task_from_its_state_now_to_its_end_and_an_ended_task_is_refused() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    assert_eq!(state(&send_script(d, &s.token, "sub-1", "echo first; sleep 3; echo second")), "TASK_STATE_WORKING");
    std::thread::sleep(Duration::from_millis(800));
    let mut sse = open_stream(d, &s.token, "SubscribeToTask", json!({"id": "sub-1"}))
        .unwrap_or_else(|refused| panic!("{refused}"));
    let first = sse.next().unwrap();
    let (name, task) = member(&first);
    assert_eq!((name, &task["id"], &task["status"]["state"]), ("task", &json!("sub-1"), &json!("TASK_STATE_WORKING")));
    let events = sse.rest();
    let texts = live_output(&events);
    assert_eq!(texts.concat(), "first\nsecond\n", "the output kept so far, then the rest: {texts:?}");
    let chunk = events.iter().map(member).find(|(n, _)| *n == "artifactUpdate").unwrap().1;
    assert_eq!(chunk["artifact"]["metadata"], json!({"fromByte": 0, "skippedBytes": 0}), "{chunk}");
    let (name, last) = member(events.last().unwrap());
    assert_eq!((name, &last["status"]["state"]), ("statusUpdate", &json!("TASK_STATE_COMPLETED")));
    // An ended task has no stream (A2A 1.0 §9.4.6); an unknown one is not found. Both as JSON.
    let ended = open_stream(d, &s.token, "SubscribeToTask", json!({"id": "sub-1"})).err().expect("refused");
    assert_eq!(ended["error"]["code"], json!(-32004), "{ended}");
    assert_eq!(ended["error"]["data"][0]["metadata"]["state"], json!("TASK_STATE_COMPLETED"), "{ended}");
    let unknown = open_stream(d, &s.token, "SubscribeToTask", json!({"id": "nothing-here"})).err().expect("refused");
    assert_eq!(unknown["error"]["code"], json!(-32001), "{unknown}");
}

// ---- MCP 2026-07-28 with the Tasks extension ----

const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// A 2026-07-28 request, declaring the Tasks extension when `tasks` is set.
fn mcp_modern(d: &Daemon, token: &str, method: &str, params: Value, tasks: bool) -> Value {
    let extensions = if tasks { json!({TASKS_EXTENSION: {}}) } else { json!({}) };
    d.mcp_modern(token, method, params, json!({"extensions": extensions}))
}

fn exec_call(d: &Daemon, token: &str, script: &str, tasks: bool) -> Value {
    let params = json!({"name": "workspace-exec", "arguments": {"command": "sh", "args": ["-c", script]}});
    mcp_modern(d, token, "tools/call", params, tasks)
}

fn task_get(d: &Daemon, token: &str, task: &str) -> Value {
    mcp_modern(d, token, "tasks/get", json!({"taskId": task}), true)
}

fn mcp_until_ended(d: &Daemon, token: &str, task: &str, within: Duration) -> Value {
    eventually(within, Duration::from_millis(200), || {
        let r = task_get(d, token, task);
        if r["result"]["status"] == json!("working") { Err(format!("still working: {r}")) } else { Ok(r) }
    })
}

#[test]
fn an_mcp_client_declaring_tasks_gets_a_task_it_polls_to_the_command_s_result() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    let discover = mcp_modern(d, &s.token, "server/discover", json!({}), false);
    assert_eq!(discover["result"]["capabilities"]["extensions"][TASKS_EXTENSION], json!({}), "{discover}");
    let created = exec_call(d, &s.token, "echo begun; sleep 11; echo done", true);
    let task = &created["result"];
    assert_eq!((&task["resultType"], &task["status"]), (&json!("task"), &json!("working")), "{created}");
    assert_eq!(task["ttlMs"], Value::Null, "kept with the log: {created}");
    assert_eq!(task["pollIntervalMs"], json!(2000), "{created}");
    let id = task["taskId"].as_str().unwrap().to_string();
    assert_eq!(lab.spent(), 1, "debited before the task was answered");
    std::thread::sleep(Duration::from_millis(1500));
    let polled = task_get(d, &s.token, &id);
    assert_eq!((&polled["result"]["resultType"], &polled["result"]["status"]), (&json!("complete"), &json!("working")));
    let message = polled["result"]["statusMessage"].as_str().unwrap_or_default();
    assert!(message.starts_with("running for") && message.contains("begun"), "{polled}");
    let ended = mcp_until_ended(d, &s.token, &id, Duration::from_secs(40));
    assert_eq!(ended["result"]["status"], json!("completed"), "{ended}");
    let result = &ended["result"]["result"];
    assert_eq!(result["resultType"], json!("complete"), "the inner result carries its own type: {ended}");
    assert_eq!(result["structuredContent"]["stdout"], json!("begun\ndone\n"), "{ended}");
    assert_eq!(result["isError"], json!(false), "{ended}");
    assert_eq!(lab.spent(), 1, "debited once");
    // A client that does not declare the extension is answered in its request,
    // and may not poll.
    let quick = exec_call(d, &s.token, "echo quick", false);
    assert_eq!(quick["result"]["resultType"], json!("complete"), "{quick}");
    assert_eq!(quick["result"]["structuredContent"]["stdout"], json!("quick\n"), "{quick}");
    let undeclared = mcp_modern(d, &s.token, "tasks/get", json!({"taskId": id}), false);
    assert_eq!(undeclared["error"]["code"], json!(-32021), "{undeclared}");
    // Another episode's session cannot see the task.
    let other = mint_with(&lab.db, "elsewhere", &GRANTS, &[], None);
    let hidden = task_get(d, &other.token, &id);
    assert_eq!(hidden["error"]["code"], json!(-32602), "{hidden}");
    assert_eq!(hidden["error"]["message"], json!("Failed to retrieve task: Task not found"), "{hidden}");
    assert_verifies(&lab.db);
}

#[test]
fn an_mcp_task_cancelled_mid_run_stops_its_command_and_reads_cancelled() {
    let (lab, s) = shell_lab();
    let d = &lab.daemon;
    let created = exec_call(d, &s.token, "echo started; sleep 347", true);
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();
    std::thread::sleep(Duration::from_millis(800));
    assert!(!processes_with("sleep 347").is_empty(), "the command runs");
    let ack = mcp_modern(d, &s.token, "tasks/cancel", json!({"taskId": id}), true);
    assert_eq!(ack["result"]["resultType"], json!("complete"), "{ack}");
    let ended = mcp_until_ended(d, &s.token, &id, Duration::from_secs(10));
    assert_eq!(ended["result"]["status"], json!("cancelled"), "{ended}");
    assert!(processes_with("sleep 347").is_empty(), "no process of the command remains");
    // Cancelling what ended is acknowledged again and changes nothing.
    let again = mcp_modern(d, &s.token, "tasks/cancel", json!({"taskId": id}), true);
    assert_eq!(again["result"]["resultType"], json!("complete"), "{again}");
    assert_eq!(task_get(d, &s.token, &id)["result"]["status"], json!("cancelled"));
    assert_eq!(lab.spent(), 1, "the command started: its debit stays");
}

#[test]
fn a_command_the_broker_denies_is_answered_in_its_request_and_is_no_task() {
    let lab = lab(&["--exec-allow", "sh=/bin/sh"]);
    let s = mint_with(&lab.db, EP, &["Workspace.Exec=worktree:0", "world.apply=world:10"], &[], None);
    let sent = send_script(&lab.daemon, &s.token, "denied-1", "sleep 359");
    assert_eq!(state(&sent), "TASK_STATE_COMPLETED", "answered in its request: {sent}");
    assert_eq!(output(&sent)["world"]["effects"][0]["status"], json!("denied"), "{sent}");
    let page = lab.daemon.get(&format!("/v1/episodes/{EP}/calls")).ok_json();
    assert_eq!(page["calls"][0]["run"]["cancel"], Value::Null, "nothing runs: {page}");
    let created = exec_call(&lab.daemon, &s.token, "sleep 359", true);
    assert_eq!(created["result"]["resultType"], json!("complete"), "{created}");
    assert!(processes_with("sleep 359").is_empty());
    assert_eq!(lab.spent(), 0);
}
