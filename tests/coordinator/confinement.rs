//! Hostile paths: each refused with its message, nothing outside the worktree touched.

use crate::harness::*;
use serde_json::{Value, json};
use std::os::unix::fs::symlink;

enum Expect {
    /// Refused by the plan phase: a committed entry with no effect and the exact text.
    Plan(String),
    /// The effect ran (status ok) and the handler refused: `ok:false`, `refused` containing this.
    Handler(&'static str),
}

/// Passes `path` to the handler unchecked, so the handler's own confinement is what is tested.
const RAW_WRITE: &str = r#"import json, sys
req = json.loads(sys.stdin.read())
a = req["args"]
effect = {"id": "e1", "effect": "Workspace.Write", "scope": "worktree", "cost": 1,
          "payload": {"op": "write", "path": a["path"], "content": "escaped\n"}}
sys.stdout.write(json.dumps({"plan": "world/effect-plan/v1", "effects": [effect], "finish": False, "result": None}))
"#;

const RAW_READ: &str = r#"import json, sys
req = json.loads(sys.stdin.read())
effect = {"id": "e1", "effect": "Workspace.Read", "scope": "worktree", "cost": 1,
          "payload": {"op": "read", "path": req["args"]["path"]}}
sys.stdout.write(json.dumps({"plan": "world/effect-plan/v1", "effects": [effect], "finish": False, "result": None}))
"#;

#[test]
fn hostile_paths_are_refused_and_nothing_outside_the_worktree_changes() {
    let lab = Lab::new(LabOptions { episodes: &["jail"], ..Default::default() });
    let wt = lab.worktree("jail");
    std::fs::create_dir_all(wt.join("src")).unwrap();
    std::fs::create_dir_all(wt.join(".git")).unwrap();
    std::fs::write(wt.join("src/a.txt"), "inside\n").unwrap();
    std::fs::write(wt.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(wt.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(lab.outside.join("sub")).unwrap();
    std::fs::write(lab.outside.join("canary.txt"), "canary\n").unwrap();
    symlink(&lab.outside, wt.join("out-dir")).unwrap();
    symlink(lab.outside.join("canary.txt"), wt.join("out-file")).unwrap();
    symlink(lab.outside.join("nothing.txt"), wt.join("dangling-out")).unwrap();
    symlink("/etc/passwd", wt.join("abs-link")).unwrap();
    symlink("../..", wt.join("up-link")).unwrap();
    symlink(".git", wt.join("git-link")).unwrap();
    symlink("src", wt.join("inner-link")).unwrap();

    let manifest = lab.manifest(
        "raw",
        &[
            Transition {
                id: "raw-read",
                file: "raw_read",
                source: RAW_READ,
                effect: Some("Workspace.Read"),
                access: None,
            },
            Transition {
                id: "raw-write",
                file: "raw_write",
                source: RAW_WRITE,
                effect: Some("Workspace.Write"),
                access: None,
            },
        ],
    );
    let o = lab.publish_manifest(&manifest, false);
    assert!(o.status.success(), "{}", text(&o.stderr));

    let token = lab.mint("jail", &["Workspace.Read=worktree:1000", "Workspace.Write=worktree:1000"]);
    let client = lab.client(&token);
    let outside_before = tree(&lab.outside);
    let root_before = names(&lab.root);
    let git_before = tree(&wt.join(".git"));

    let long = "a/".repeat(2049);
    let outside_abs = lab.outside.join("escape-abs.txt").display().to_string();
    let w = |p: &str| json!({"path": p, "content": "pwned\n"});
    let r = |p: &str| json!({"path": p});
    let e = |p: &str| json!({"path": p, "old_text": "canary", "new_text": "pwned"});
    let plan = |p: &str| Expect::Plan(plan_path_refusal(p));
    const ESCAPES: &str = "escapes sandbox";
    const GIT: &str = ".git/ is read-only to World's tools";
    let table: Vec<(&str, Value, Expect)> = vec![
        // The plan law: relative, non-empty, no "..", no leading "-" (NUL and > 4096 bytes too).
        ("ailang-read", r("/etc/passwd"), plan("/etc/passwd")),
        ("ailang-write", w(&outside_abs), plan(&outside_abs)),
        ("ailang-read", r("../outside/canary.txt"), plan("../outside/canary.txt")),
        ("ailang-write", w("src/../../../outside/escape-dots.txt"), plan("src/../../../outside/escape-dots.txt")),
        ("ailang-edit", e("../../outside/canary.txt"), plan("../../outside/canary.txt")),
        ("ailang-write", w("a\0b"), plan("a\0b")),
        ("ailang-write", w(&long), plan(&long)),
        ("ailang-write", w("-rf"), plan("-rf")),
        ("ailang-read", r(""), plan("")),
        ("workspace-list", r("../"), plan("../")),
        // Symlinks that lead out.
        ("ailang-read", r("out-file"), Expect::Handler(ESCAPES)),
        ("ailang-read", r("out-dir/canary.txt"), Expect::Handler(ESCAPES)),
        ("ailang-read", r("abs-link"), Expect::Handler(ESCAPES)),
        ("ailang-read", r("up-link/outside/canary.txt"), Expect::Handler(ESCAPES)),
        ("ailang-write", w("out-file"), Expect::Handler(ESCAPES)),
        ("ailang-write", w("out-dir/escape-link.txt"), Expect::Handler(ESCAPES)),
        ("ailang-write", w("out-dir/sub/escape-deep.txt"), Expect::Handler(ESCAPES)),
        ("ailang-write", w("dangling-out"), Expect::Handler(ESCAPES)),
        ("ailang-edit", e("out-file"), Expect::Handler(ESCAPES)),
        ("workspace-list", r("out-dir"), Expect::Handler(ESCAPES)),
        ("workspace-search", json!({"query": "canary", "path": "out-dir"}), Expect::Handler(ESCAPES)),
        // .git is read-only, in any spelling and through an inside symlink.
        ("ailang-write", w(".git/config"), Expect::Handler(GIT)),
        ("ailang-write", w(".GIT/HEAD"), Expect::Handler(GIT)),
        ("ailang-write", w("sub/.Git/x"), Expect::Handler(GIT)),
        ("ailang-write", w("git-link/config"), Expect::Handler(GIT)),
        ("ailang-edit", json!({"path": ".git/HEAD", "old_text": "main", "new_text": "evil"}), Expect::Handler(GIT)),
        // A transition that does not check paths itself: the handler still confines.
        ("raw-write", w("nonexistent/../../escape-raw.txt"), Expect::Handler("")),
        ("raw-write", w("new/dir/../../../../outside/escape-raw2.txt"), Expect::Handler("")),
        ("raw-write", w("../escape-raw3.txt"), Expect::Handler("")),
        ("raw-write", w(&outside_abs), Expect::Handler("")),
        ("raw-write", w("-x"), Expect::Handler("")),
        ("raw-write", w("a\0b"), Expect::Handler("")),
        ("raw-write", w("out-dir/escape-raw4.txt"), Expect::Handler(ESCAPES)),
        ("raw-write", w(".git/hooks/pre-commit"), Expect::Handler(GIT)),
        ("raw-read", r("../outside/canary.txt"), Expect::Handler("")),
        ("raw-read", r(&lab.outside.join("canary.txt").display().to_string()), Expect::Handler("")),
    ];

    for (n, (tool, args, expect)) in table.iter().enumerate() {
        let reply = client.send(&format!("hostile-{n}"), tool, args);
        let out = reply.output();
        let shown = serde_json::to_string(args).unwrap();
        let shown = &shown[..shown.len().min(120)];
        assert_eq!(out["ok"], false, "{tool} {shown}: {out}");
        match expect {
            Expect::Plan(text) => {
                assert_eq!(out["refused"], text.as_str(), "{tool} {shown}");
                assert_eq!(out["world"]["effects"], json!([]), "{tool} {shown}: refused before any effect");
                assert!(out["world"]["plan"].is_string());
            }
            Expect::Handler(needle) => {
                assert_eq!(reply.effect_status().as_deref(), Some("ok"), "{tool} {shown}: {out}");
                let refused = out["refused"].as_str().unwrap_or_else(|| panic!("{tool} {shown}: {out}"));
                assert!(refused.contains(needle), "{tool} {shown}: {refused:?} should contain {needle:?}");
            }
        }
        // Every refusal is a committed entry.
        lab.invocation_record(reply.entry_index());
    }

    // Inside the worktree the same tools work, inside symlinks included.
    let ok = |tool: &str, args: Value| {
        let reply = client.send(&format!("inside-{}", rand_id()), tool, &args);
        assert_eq!(reply.output()["ok"], true, "{tool} {args}: {}", reply.0);
        reply
    };
    assert_eq!(ok("ailang-read", r("src/a.txt")).output()["content"], "inside\n");
    assert_eq!(ok("ailang-read", r("inner-link/a.txt")).output()["content"], "inside\n");
    assert_eq!(ok("ailang-read", r(".git/HEAD")).output()["content"], "ref: refs/heads/main\n");
    ok("ailang-write", w("notes/fine.txt"));
    ok("raw-write", w("notes/raw-fine.txt"));
    assert_eq!(std::fs::read_to_string(wt.join("notes/raw-fine.txt")).unwrap(), "escaped\n");

    // Nothing outside the worktree changed, and .git is as it was.
    assert_eq!(tree(&lab.outside), outside_before, "the outside directory is untouched");
    assert_eq!(std::fs::read_to_string(lab.outside.join("canary.txt")).unwrap(), "canary\n");
    assert_eq!(names(&lab.ws), ["jail"], "no new file beside the worktree");
    assert_eq!(names(&lab.root), root_before, "no new file in the lab directory");
    assert_eq!(tree(&wt.join(".git")), git_before, ".git is read-only");
    assert_eq!(files_named_like(&lab.root, "escape"), Vec::<String>::new(), "no escaped write anywhere");
    assert_eq!(files_named_like(&wt, "pwned"), Vec::<String>::new());
    lab.verify_clean();
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}
