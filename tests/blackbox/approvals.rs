//! Grants that ask, answered by the operator: a call under an asking grant
//! runs nothing and debits nothing until `worldd approve`; the next identical
//! call runs once and its effect record names the decision; a denial is
//! recorded and costs nothing; a pending approval outlives a restart, and
//! once expired is closed and asked afresh; approvals nobody answers cannot
//! jam the gate; `why` tells who approved; `verify` stays clean.

use crate::episodes::{Minted, a2a, mcp, mint_with};
use crate::fixture;
use crate::harness::*;
use serde_json::{Value, json};
use std::path::Path;

pub(crate) const EP: &str = "asks";

/// A daemon with a worktree for episode `EP`, the builtin tools published and
/// a genesis world committed.
pub(crate) struct Lab {
    pub(crate) store: TempStore,
    pub(crate) daemon: Daemon,
    pub(crate) root: std::path::PathBuf,
    pub(crate) db: String,
}

pub(crate) fn lab(extra: &[&str]) -> Lab {
    let store = TempStore::new();
    let root = store.dir.path().join("ws");
    std::fs::create_dir_all(root.join(EP)).unwrap();
    let daemon = start(&store.db, &root, extra);
    let db = store.db.to_str().unwrap().to_string();
    let o = worldd(&["publish", "--db", &db, "--builtin"]);
    assert!(o.status.success(), "publish: {}", stderr(&o));
    let lab = Lab { store, daemon, root, db };
    let committer = crate::episodes::mint(&lab.db, "genesis", &["World.Commit=log:1"], None);
    assert_eq!(lab.daemon.commit(&fixture::genesis("approvals").bytes(), Some(&committer.token)).status, 200);
    lab
}

pub(crate) fn start(db: &Path, root: &Path, extra: &[&str]) -> Daemon {
    let mut args = vec!["--workspace-root", root.to_str().unwrap()];
    args.extend(extra);
    Daemon::start_with(db, &args)
}

impl Lab {
    fn session(&self, more: &[&str]) -> Minted {
        mint_with(&self.db, EP, &["Workspace.Write=worktree:5", "world.apply=world:10"], more, None)
    }

    fn write(&self, s: &Minted, content: &str) -> Value {
        mcp(&self.daemon, &s.token, "ailang-write", json!({"path": "notes.txt", "content": content}))
    }

    fn notes(&self) -> Option<String> {
        std::fs::read_to_string(self.root.join(EP).join("notes.txt")).ok()
    }

    /// What the episode spent (an episode that made no call has no summary: nothing).
    pub(crate) fn spent(&self) -> u64 {
        let r = self.daemon.get(&format!("/v1/episodes/{EP}"));
        if r.status == 404 {
            return 0;
        }
        let summary = r.json();
        summary["spend"].as_array().into_iter().flatten().map(|g| g["spent"].as_u64().unwrap_or(0)).sum()
    }

    pub(crate) fn worldd_ok(&self, args: &[&str]) -> String {
        let mut all = args.to_vec();
        all.extend(["--db", &self.db]);
        let o = worldd(&all);
        assert!(o.status.success(), "worldd {args:?}: {}", stderr(&o));
        stdout(&o)
    }

    fn approvals(&self) -> Vec<Value> {
        serde_json::from_str(&self.worldd_ok(&["approvals", "--json"])).unwrap()
    }
}

/// The approval id a waiting call's tool result names.
fn waiting_id(reply: &Value) -> String {
    let result = &reply["result"];
    assert_eq!(result["isError"], json!(true), "a waiting call is a tool error: {reply}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Nothing ran and nothing was debited"), "{text}");
    let id = text.split("Approval ").nth(1).and_then(|t| t.split(' ').next()).unwrap();
    assert!(id.starts_with("ap-") && id.len() == 19, "{text}");
    id.to_string()
}

fn effect(reply: &Value) -> &Value {
    &reply["result"]["structuredContent"]["world"]["effects"][0]
}

/// An effect's record, fetched with its payload, as JSON.
fn record(d: &Daemon, r: &str) -> (String, Value) {
    let meta = d.get(&format!("/v1/objects/{r}?payload=true")).ok_json();
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, meta["payload"].as_str().unwrap());
    (meta["semanticId"].as_str().unwrap().to_string(), serde_json::from_slice(&bytes.unwrap()).unwrap())
}

#[test]
fn an_asking_grant_runs_nothing_until_the_operator_approves_then_runs_once() {
    let lab = lab(&[]);
    let s = lab.session(&["--ask", "Workspace.Write"]);
    let listed = worldd(&["session", "list", "--db", &lab.db]);
    assert!(stdout(&listed).contains("Workspace.Write=worktree:5 (asks)"), "{}", stdout(&listed));

    let first = lab.write(&s, "one\n");
    let id = waiting_id(&first);
    assert_eq!((lab.notes(), lab.spent()), (None, 0), "nothing ran, nothing was debited");
    // Asking again finds the same approval: one request, one question.
    assert_eq!(waiting_id(&lab.write(&s, "one\n")), id);
    let open = lab.approvals();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!((open[0]["id"].as_str(), open[0]["state"].as_str()), (Some(id.as_str()), Some("pending")));
    let summary = open[0]["summary"].as_str().unwrap();
    assert!(summary.contains("write 4 bytes to notes.txt") && summary.contains("cost 1 of 5 left"), "{summary}");

    // The workbench shows what waits and the command that decides it.
    let page = lab.daemon.get("/workbench/episodes").text();
    assert!(page.contains(&format!("<code>worldd approve {id}</code>")), "{page}");
    let said = lab.worldd_ok(&["approve", &id]);
    assert!(said.contains("approved"), "{said}");
    // Another request is not approved by it.
    assert_ne!(waiting_id(&lab.write(&s, "other\n")), id);
    let ran = lab.write(&s, "one\n");
    assert_eq!(effect(&ran)["status"], json!("ok"), "{ran}");
    assert_eq!((lab.notes().as_deref(), lab.spent()), (Some("one\n"), 1));
    let summary = lab.daemon.get(&format!("/v1/episodes/{EP}")).ok_json();
    let write = summary["spend"].as_array().unwrap().iter().find(|g| g["effect"] == "Workspace.Write").unwrap().clone();
    assert_eq!(write["asks"], json!("anyone"), "{summary}");
    let (kind, rec) = record(&lab.daemon, effect(&ran)["record"].as_str().unwrap());
    assert_eq!(kind, "world/effect-record/v3");
    let (kind, approval) = record(&lab.daemon, rec["approvalRef"].as_str().unwrap());
    assert_eq!(kind, "world/approval/v1");
    assert_eq!((approval["approvalId"].as_str(), approval["decision"].as_str()), (Some(id.as_str()), Some("approved")));
    assert_eq!(approval["decidedBy"]["via"], json!("adminSocket"), "{approval}");
    assert_eq!(approval["credentialId"], json!(format!("sha256:{}", s.credential_id)));

    let page = lab.daemon.get(&format!("/workbench/episodes/{EP}")).text();
    assert!(page.contains("approved by the operator (uid ") && page.contains(&format!("({id})</div>")), "{page}");
    // The record's page, and its entry's beside the effect, say who approved it.
    let page = lab.daemon.get(&format!("/workbench?object={}", effect(&ran)["record"].as_str().unwrap())).text();
    assert!(page.contains("id=\"happened-approval\">approved by the operator (uid "), "{page}");
    let entry = page.split("href=\"/workbench?entry=").nth(1).and_then(|t| t.split('"').next()).unwrap().to_string();
    let page = lab.daemon.get(&format!("/workbench?entry={entry}")).text();
    assert!(page.contains("<td class=\"effect-approval\">approved by the operator (uid "), "{page}");
    // Used once: the same request asks afresh.
    let again = waiting_id(&lab.write(&s, "one\n"));
    assert_ne!(again, id);
    assert_eq!(lab.spent(), 1);

    let why = worldd(&["why", effect(&ran)["record"].as_str().unwrap(), "--addr", &lab.daemon.base_url()]);
    assert!(why.status.success(), "why: {}{}", stdout(&why), stderr(&why));
    let told = stdout(&why);
    assert!(told.contains("approved by the operator (uid ") && told.contains(&id), "{told}");
    assert_verifies(&lab.db);
}

#[test]
fn the_workbench_counts_only_the_approvals_that_still_wait() {
    let lab = lab(&["--approval-ttl", "2"]);
    let s = lab.session(&["--ask", "Workspace.Write"]);
    let count = |page: &str| {
        let after = page.split("id=\"waiting-count\">").nth(1)?;
        after.split('<').next().map(String::from)
    };
    // One nobody answered in time, one approved and not yet used, one that waits.
    waiting_id(&lab.write(&s, "too late\n"));
    std::thread::sleep(std::time::Duration::from_secs(3));
    let approved = waiting_id(&lab.write(&s, "approved\n"));
    lab.worldd_ok(&["approve", &approved]);
    let waits = waiting_id(&lab.write(&s, "waits\n"));
    let page = lab.daemon.get("/workbench/episodes").text();
    assert_eq!(count(&page).as_deref(), Some("1"), "{page}");
    assert!(page.contains(&format!("<code>worldd approve {waits}</code>")), "{page}");
    assert!(page.contains("1 approved and not yet used"), "{page}");
    // The approved one runs, and is used: one still waits.
    assert_eq!(effect(&lab.write(&s, "approved\n"))["status"], json!("ok"));
    let page = lab.daemon.get(&format!("/workbench/episodes/{EP}")).text();
    assert_eq!(count(&page).as_deref(), Some("1"), "{page}");
    assert!(!page.contains("approved and not yet used"), "{page}");
}

#[test]
fn a_denial_is_recorded_under_its_decision_and_costs_nothing() {
    let lab = lab(&[]);
    let s = lab.session(&["--ask-operator", "Workspace.Write=worktree"]);
    let id = waiting_id(&lab.write(&s, "no\n"));
    let text = lab.write(&s, "no\n")["result"]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(text.contains("the operator only"), "{text}");
    lab.worldd_ok(&["deny", &id, "--note", "not today"]);
    let denied = lab.write(&s, "no\n");
    assert_eq!(effect(&denied)["status"], json!("denied"), "{denied}");
    assert_eq!((lab.notes(), lab.spent()), (None, 0));
    let (kind, rec) = record(&lab.daemon, effect(&denied)["record"].as_str().unwrap());
    assert_eq!((kind.as_str(), rec["allowed"].clone()), ("world/effect-record/v3", json!(false)));
    assert_eq!(rec["denial"], json!("denied:approval"), "{rec}");
    let (_, approval) = record(&lab.daemon, rec["approvalRef"].as_str().unwrap());
    assert_eq!((approval["decision"].as_str(), approval["note"].as_str()), (Some("denied"), Some("not today")));
    // Told once: the next identical call asks again.
    assert_ne!(waiting_id(&lab.write(&s, "no\n")), id);
    // A decided approval takes no second word.
    let o = worldd(&["approve", &id, "--db", &lab.db]);
    assert!(!o.status.success() && stderr(&o).contains("decided already"), "{}", stderr(&o));
    for bad in ["ap-nothex", "../../etc", "ap-0000000000000000"] {
        let o = worldd(&["approve", bad, "--db", &lab.db]);
        assert!(!o.status.success(), "{bad} must be refused");
    }
}

#[test]
fn a_pending_approval_outlives_a_restart_and_once_expired_the_next_identical_call_asks_afresh() {
    let mut lab = lab(&["--approval-ttl", "2"]);
    let s = lab.session(&["--ask", "Workspace.Write"]);
    let id = waiting_id(&lab.write(&s, "later\n"));
    lab.daemon.signal_and_wait("TERM");
    // With no daemon the verbs work on the store itself.
    assert_eq!(lab.approvals()[0]["id"], json!(id));
    lab.worldd_ok(&["approve", &id, "--for-session"]);
    lab.daemon = start(&lab.store.db, &lab.root, &["--approval-ttl", "2"]);
    for _ in 0..2 {
        let ran = lab.write(&s, "later\n");
        assert_eq!(effect(&ran)["status"], json!("ok"), "approved for the session: {ran}");
    }
    assert_eq!(lab.spent(), 2);
    let (_, rec) = record(&lab.daemon, effect(&lab.write(&s, "later\n"))["record"].as_str().unwrap());
    let (_, approval) = record(&lab.daemon, rec["approvalRef"].as_str().unwrap());
    assert_eq!(
        (approval["decision"].as_str(), approval["decidedBy"]["via"].as_str()),
        (Some("approved-for-session"), Some("store"))
    );

    // Nobody answers this one in time: the next identical call is asked afresh.
    let late = waiting_id(&lab.write(&s, "too late\n"));
    std::thread::sleep(std::time::Duration::from_secs(3));
    let afresh = waiting_id(&lab.write(&s, "too late\n"));
    assert_ne!(afresh, late, "an expired approval serves nobody");
    assert_eq!(lab.spent(), 3);
    // The operator's late word: a denial says it expired (and says so again);
    // a yes is refused, naming the expiry.
    for _ in 0..2 {
        let said = lab.worldd_ok(&["deny", &late]);
        assert!(
            said.contains(&format!("approval {late} expired at ")) && said.contains("nothing can run under it"),
            "{said}"
        );
    }
    let o = worldd(&["approve", &late, "--db", &lab.db]);
    let told = stderr(&o);
    assert!(!o.status.success() && told.contains("expired at ") && told.contains("asks again"), "{told}");

    // A2A's seed method waits too, and runs nothing.
    let args = json!({"path": "a2a.txt", "content": "x"});
    let reply = a2a(&lab.daemon, &s.token, "t-1", "ailang-write", args.clone());
    let status = &reply["result"]["status"];
    assert_eq!(status["state"], json!("input-required"), "{reply}");
    let asked = &status["message"]["parts"][0]["data"]["approval"];
    let id = asked["id"].as_str().unwrap().to_string();
    assert!(asked["summary"].as_str().unwrap().contains("write 1 bytes to a2a.txt"), "{asked}");
    assert!(!lab.root.join(EP).join("a2a.txt").exists());
    // Decided out of band, the same task id sent again runs once; a resend replays.
    lab.worldd_ok(&["approve", &id]);
    for _ in 0..2 {
        let done = a2a(&lab.daemon, &s.token, "t-1", "ailang-write", args.clone());
        assert_eq!(done["result"]["status"]["state"], json!("completed"), "{done}");
    }
    assert_eq!(std::fs::read_to_string(lab.root.join(EP).join("a2a.txt")).unwrap(), "x");
    assert_eq!(lab.spent(), 4);
    assert_verifies(&lab.db);
}

#[test]
fn an_approved_command_runs_only_over_the_worktree_it_was_approved_for() {
    let lab = lab(&["--exec-allow", "python3=/usr/bin/python3"]);
    let grants = ["Workspace.Write=worktree:10", "Workspace.Exec=worktree:10", "world.apply=world:10"];
    let s = mint_with(&lab.db, EP, &grants, &["--ask", "Workspace.Exec"], None);
    let write = |content: &str| {
        let wrote = mcp(&lab.daemon, &s.token, "ailang-write", json!({"path": "t.py", "content": content}));
        assert_eq!(effect(&wrote)["status"], json!("ok"), "writes do not ask: {wrote}");
    };
    let run = || mcp(&lab.daemon, &s.token, "workspace-exec", json!({"command": "python3", "args": ["t.py"]}));
    write("print('approved')\n");
    let first = waiting_id(&run());
    let open = lab.approvals();
    let summary = open[0]["summary"].as_str().unwrap();
    assert!(summary.contains("run `python3 t.py` in the episode's worktree as it is now (state sha256:"), "{summary}");
    assert!(summary.contains("any change to its files before it runs asks again"), "{summary}");
    lab.worldd_ok(&["approve", &first, "--for-session"]);

    // The agent rewrites the script after the approval: the approval does not cover it.
    write("print('rewritten')\n");
    let second = waiting_id(&run());
    assert_ne!(second, first, "the rewritten worktree is asked about afresh");
    // The question names what World's tools changed since the last command ran.
    let open = lab.approvals();
    let asked = open.iter().find(|a| a["id"] == json!(second)).unwrap_or_else(|| panic!("{open:?}"));
    let summary = asked["summary"].as_str().unwrap();
    let changed =
        "changed through World since the episode's last command: write t.py (18 bytes), write t.py (19 bytes)";
    assert!(summary.contains(changed), "{summary}");
    assert_eq!(lab.spent(), 2, "the two writes; no command ran");
    lab.worldd_ok(&["approve", &second, "--for-session"]);
    let ran = run();
    assert_eq!(effect(&ran)["status"], json!("ok"), "{ran}");
    assert_eq!(ran["result"]["structuredContent"]["stdout"], json!("rewritten\n"), "{ran}");
    // Nothing changed since: the approval for the session covers the same command again.
    let again = run();
    assert_eq!(effect(&again)["status"], json!("ok"), "{again}");
    // A change after that run is all the next question names.
    write("print('third')\n");
    let third = waiting_id(&run());
    let open = lab.approvals();
    let asked = open.iter().find(|a| a["id"] == json!(third)).unwrap_or_else(|| panic!("{open:?}"));
    let summary = asked["summary"].as_str().unwrap();
    assert!(summary.ends_with("since the episode's last command: write t.py (15 bytes)"), "{summary}");
    let o = worldd(&["verify", "--db", &lab.db]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

/// Writes `n` distinct requests under `s`, each left waiting; their approval ids.
fn asks(lab: &Lab, s: &Minted, n: u64, tag: &str) -> Vec<String> {
    (0..n).map(|i| waiting_id(&lab.write(s, &format!("{tag} {i}\n")))).collect()
}

/// The open approvals' ids, sorted.
fn open_ids(lab: &Lab) -> Vec<String> {
    let mut ids: Vec<String> = lab.approvals().iter().map(|a| a["id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

#[test]
fn a_session_that_asks_and_never_comes_back_fills_its_own_share_and_revoking_it_frees_it() {
    let lab = lab(&[]);
    let asks_all = |l: &Lab| l.session(&["--ask", "Workspace.Write"]);
    let (greedy, other) = (asks_all(&lab), asks_all(&lab));
    let held = asks(&lab, &greedy, 64, "greedy");
    // Its share is full: refused, naming the bound, nothing spent.
    let refused = lab.write(&greedy, "one more\n");
    assert_eq!(effect(&refused)["status"], json!("denied"), "{refused}");
    let (_, rec) = record(&lab.daemon, effect(&refused)["record"].as_str().unwrap());
    assert_eq!(rec["denial"], json!("denied:approval-unavailable-session"), "{rec}");
    // Another session of the same episode is still asked.
    let theirs = waiting_id(&lab.write(&other, "mine\n"));
    assert_eq!(open_ids(&lab).len(), 65);

    lab.worldd_ok(&["session", "revoke", &greedy.credential_id]);
    assert_eq!(open_ids(&lab), vec![theirs], "the revoked session's approvals are closed");
    let said = lab.worldd_ok(&["deny", &held[0]]);
    assert!(said.contains("when its session was revoked") && said.contains("nothing can run under it"), "{said}");
    assert_eq!(lab.spent(), 0);
    assert_verifies(&lab.db);
}

#[test]
fn approvals_nobody_answered_are_closed_once_expired_so_the_gate_never_jams() {
    let mut lab = lab(&["--approval-ttl", "2"]);
    let s = lab.session(&["--ask", "Workspace.Write"]);
    asks(&lab, &s, 64, "first");
    std::thread::sleep(std::time::Duration::from_secs(3));
    // Its share was full of expired approvals: they hold no room.
    waiting_id(&lab.write(&s, "after they expired\n"));
    // Nobody calls: the daemon closes them all the same.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !open_ids(&lab).is_empty() {
        assert!(std::time::Instant::now() < deadline, "still open: {:?}", lab.approvals());
        std::thread::sleep(std::time::Duration::from_millis(500));
    }

    // Left open while the daemon is down, they are closed as it starts.
    let mut waiting = asks(&lab, &s, 3, "before the restart");
    waiting.sort();
    lab.daemon.signal_and_wait("TERM");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(open_ids(&lab), waiting, "nothing closes them while no daemon runs");
    lab.daemon = start(&lab.store.db, &lab.root, &["--approval-ttl", "2"]);
    assert_eq!(open_ids(&lab), Vec::<String>::new());
    let said = lab.worldd_ok(&["deny", &waiting[0]]);
    assert!(said.contains("expired at ") && said.contains("before anyone decided"), "{said}");
    assert_eq!(lab.spent(), 0);
    assert_verifies(&lab.db);
}

#[test]
fn the_approvals_listing_tells_the_budget_left_now_and_counts_as_open_only_what_may_still_be_decided() {
    let mut lab = lab(&["--approval-ttl", "6"]);
    let s = lab.session(&["--ask", "Workspace.Write"]);
    let first = waiting_id(&lab.write(&s, "it's\n"));
    let second = waiting_id(&lab.write(&s, "spent meanwhile\n"));
    lab.worldd_ok(&["approve", &second]);
    assert_eq!(effect(&lab.write(&s, "spent meanwhile\n"))["status"], json!("ok"));
    assert_eq!(lab.spent(), 1, "one unit of the five spent while the first question waits");

    let text = lab.worldd_ok(&["approvals"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with(&format!("{first} pending (anyone) until ")), "{text}");
    // Said as written (a control character escaped, a quote not), with what is left now.
    assert!(lines[0].contains("write 5 bytes to notes.txt: it's\\n (effect"), "{text}");
    assert!(!lines[0].contains("\\'"), "no stray backslash: {text}");
    assert!(lines[0].contains("cost 1 of 4 left in episode asks)"), "{text}");
    assert_eq!(lines[1], "1 open approval(s)");
    let listed = lab.approvals();
    assert_eq!(listed[0]["budgetLeft"], json!(4), "{listed:?}");

    // Nobody decides in time (no daemon runs to close it): it is listed as expired, not open.
    lab.daemon.signal_and_wait("TERM");
    let expires = listed[0]["expiresAt"].as_u64().unwrap();
    while fixture::now() <= expires {
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let text = lab.worldd_ok(&["approvals"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with(&format!("{first} expired (anyone) at ")), "{text}");
    assert_eq!(lines[1], "0 open approval(s), 1 expired (nothing runs under them)");
}
