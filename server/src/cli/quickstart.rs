//! `worldd quickstart`: everything a fresh machine needs, then serve.

use super::fail;
use super::session::write_token_file;
use crate::publish::{PublishRequest, publish};
use crate::serve::ServeOptions;
use crate::sessions::{self, MintRequest};
use crate::stores::StoreSpec;
use std::path::Path;
use std::process::ExitCode;
use world_store::{
    Grant, NewObject, Op, QUICKSTART_AUTHOR, QUICKSTART_GOAL, QUICKSTART_TRANSITION, Ref, RestCommit, WriteError,
};

/// The demo episode and its sessions' lifetime (30 days).
pub const DEMO_EPISODE: &str = "demo";
pub const DEMO_TTL_S: u64 = 30 * 24 * 3600;
pub const DEMO_BUDGET: u64 = 1000;

/// The genesis commit: entry 0, world revision 0, by `QUICKSTART_AUTHOR`
/// (`verify` knows it by its bytes: no row names it).
pub fn genesis() -> RestCommit {
    let goal = NewObject::derived("world/genesis/v1", QUICKSTART_AUTHOR, QUICKSTART_GOAL.to_vec());
    RestCommit::genesis(
        goal,
        Ref::of(QUICKSTART_TRANSITION),
        crate::registry::builtin_interpreter().hash,
        crate::registry::SEMANTICS_EPOCH,
        QUICKSTART_AUTHOR,
    )
}

/// The demo session's grants, those `asks` names asking first.
fn demo_grants(asks: &super::session::Asks<'_>) -> Result<Vec<Grant>, String> {
    let grants = [
        ("Workspace.Read", "worktree"),
        ("Workspace.Write", "worktree"),
        ("Workspace.Exec", "worktree"),
        ("world.apply", "world"),
        // The seed's REST flows commit with the demo session.
        (crate::effects::commit::COMMIT_EFFECT, crate::effects::commit::COMMIT_SCOPE),
    ]
    .iter()
    .map(|(e, s)| Grant::new(e, s, DEMO_BUDGET))
    .collect();
    asks.apply(grants)
}

/// Creates what is missing (in the database too: its schema, the genesis
/// world, the builtin tools); reuses what exists, so that a second node
/// started the same way joins the same world. Returns whether a session was minted.
fn prepare(dir: &Path, spec: &StoreSpec, grants: Vec<Grant>) -> Result<bool, String> {
    // The worktrees hold the agent's files: its user's alone, as the store is.
    let worktree = dir.join("workspace").join(DEMO_EPISODE);
    crate::effects::worktree::create_private(&worktree).map_err(|e| format!("{}: {e}", worktree.display()))?;
    private_dir(&dir.join("workspace"))?;
    private_dir(&worktree)?;
    let sample = worktree.join("hello.txt");
    if !sample.exists() {
        std::fs::write(&sample, "hello from World\n").map_err(|e| format!("{}: {e}", sample.display()))?;
    }
    if let StoreSpec::Postgres(url) = spec {
        let m = world_store::postgres::init(url).map_err(|e| e.to_string())?;
        if m.from != m.to {
            say!("created the store's schema (version {}) in {}", m.to, spec.label());
        }
    }
    let opened = spec.open(crate::clock::now(), None, None).map_err(|e| e.to_string())?;
    let store = opened.store.as_ref();
    if store.snapshot().and_then(|s| s.selected_head()).map_err(|e| e.to_string())?.is_none() {
        match store.call(Op::CommitWorld(genesis())) {
            Ok(_) => say!("committed the genesis world"),
            // Another node committed it first.
            Err(WriteError::HeadConflict { observed: None, selected: Some(_) }) => {}
            Err(e) => return Err(format!("genesis: {e}")),
        }
    }
    let builtin = PublishRequest { manifest: None, builtin: true, replace: true };
    // A node publishing at the same moment moves the head under this one: once more sees it.
    let published = publish(store, &builtin).or_else(|_| publish(store, &builtin))?;
    say!("{published}");
    let session_file = dir.join("session");
    let mut replaced = None;
    if let Ok(token) = std::fs::read_to_string(&session_file) {
        let id = sessions::credential_id(token.trim());
        let live = store.snapshot().and_then(|s| s.session(&id)).map_err(|e| e.to_string())?;
        // Reused while it lives and grants what was asked for (`--ask` changes that).
        if live.as_ref().is_some_and(|s| s.is_live(crate::clock::now() + 60) && s.grants == grants) {
            return Ok(false);
        }
        replaced = live.is_some().then_some(id);
    }
    super::session::tell_asks(&grants);
    let req = MintRequest { episode: DEMO_EPISODE.into(), grants, ttl_s: DEMO_TTL_S };
    let token = sessions::new_token();
    let session = req.session(crate::clock::now());
    store
        .call(Op::MintSession { credential_id: sessions::credential_id(&token), session })
        .map_err(|e| format!("mint: {e}"))?;
    write_token_file(&session_file, &token)?;
    // The credential replaced stops working: it granted what the new one asks first.
    if let Some(old) = replaced {
        let revoke = Op::RevokeSession { credential_id: old, at: crate::clock::now() };
        store.call(revoke).map_err(|e| format!("revoking the old session: {e}"))?;
        say!("revoked the demo session it replaces ({})", old.hex());
    }
    Ok(true)
}

/// The operator's verbs, as they work from here: from the directory holding
/// `./world-quickstart` they find this daemon and its store themselves
/// (`locate`); from elsewhere, once `WORLD_DB` names them. A PostgreSQL
/// store is named by its URL alone (`WORLD_STORE`), and then the daemon by `WORLD_ADDR`.
/// And where `worldd` is, when the shell would not find it by that name.
fn operator_commands(dir: &Path, local: &Path, spec: &StoreSpec, bind: &str) -> String {
    let here =
        std::env::current_dir().ok().and_then(|d| std::fs::canonicalize(d.join(super::locate::QUICKSTART_DIR)).ok());
    let mut text = String::from("Operate it with worldd (each command finds this daemon by itself ");
    let mut once = vec![];
    if here.as_deref() != Some(dir) {
        // Not in ./world-quickstart: the daemon (its address and token beside `local`) is named once.
        once.push(format!("{}={}", super::locate::ENV_DB, local.display()));
    }
    if let StoreSpec::Postgres(_) = spec {
        // The database is named by its URL only, which holds what no file here should.
        once = vec![format!("{}=<the --store URL>", super::locate::ENV_STORE)];
        if here.as_deref() != Some(dir) {
            once.push(format!("{}=http://{bind}", super::locate::ENV_ADDR));
        }
    }
    if once.is_empty() {
        text.push_str("when run from this directory):\n");
    } else {
        text.push_str(&format!("once the shell has it: export {}):\n", once.join(" ")));
    }
    let episode = format!("worldd episode {DEMO_EPISODE}");
    for (command, what) in [
        ("worldd episodes", "what each episode did and paid"),
        (episode.as_str(), "one episode: its calls, effects and spend"),
        ("worldd approvals", "what waits for a person's approval (then worldd approve ID, or worldd deny ID)"),
        ("worldd why head", "the newest log entry's provenance, every hash recomputed"),
        ("worldd session list", "the session credentials"),
    ] {
        text.push_str(&format!("  {command:<22} {what}\n"));
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(bin) = exe.parent()
        && !on_path(&exe)
    {
        text.push_str(&format!(
            "  (worldd is {}: put it on PATH with export PATH=\"{}:$PATH\", or cargo install --path server)",
            exe.display(),
            bin.display()
        ));
    }
    text.trim_end().to_string()
}

/// Whether the shell finds this very `worldd` by its name on `PATH`.
fn on_path(exe: &Path) -> bool {
    let Some(path) = std::env::var_os("PATH") else { return false };
    std::env::split_paths(&path).any(|d| {
        std::fs::canonicalize(d.join("worldd")).is_ok_and(|found| std::fs::canonicalize(exe).is_ok_and(|e| e == found))
    })
}

/// Makes `dir` (quickstart's own, or its workspace) its owner's alone: mode 0700.
fn private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| format!("{}: {e}", dir.display()))
}

pub fn run(
    dir: &Path,
    store: Option<String>,
    bind: &str,
    exec_allow: Vec<String>,
    asks: &super::session::Asks<'_>,
    reads: super::ReadsArgs,
    confine: super::ConfineArgs,
) -> ExitCode {
    let grants = match demo_grants(asks) {
        Ok(g) => g,
        Err(e) => return fail(1, format!("quickstart: {e}")),
    };
    if let Err(e) = crate::serve::loopback_addr(bind) {
        return fail(2, format!("quickstart: {e}"));
    }
    if let Err(e) = crate::effects::worktree::create_private(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))
        .and_then(|()| private_dir(dir))
    {
        return fail(2, format!("quickstart: {e}"));
    }
    let dir = match std::fs::canonicalize(dir) {
        Ok(d) => d,
        Err(e) => return fail(2, format!("quickstart: {}: {e}", dir.display())),
    };
    let (spec, local) = match store {
        None => (StoreSpec::Embedded(dir.join("world.db")), dir.join("world.db")),
        Some(url) => match StoreSpec::from_args(None, Some(url)) {
            Ok(spec) => (spec, dir.join("node")),
            Err(e) => return fail(1, format!("quickstart: {e}")),
        },
    };
    let minted = match prepare(&dir, &spec, grants) {
        Ok(m) => m,
        Err(e) => return fail(2, format!("quickstart: {e}")),
    };
    let session = dir.join("session");
    say!(
        "{} session for episode {DEMO_EPISODE} in {} (mode 0600)",
        if minted { "minted a" } else { "reusing the" },
        session.display()
    );
    let mcp_url = format!("http://{bind}/mcp/");
    say!("MCP:  {mcp_url}");
    say!("A2A:  http://{bind}/a2a/  (card: http://{bind}/.well-known/agent.json)");
    say!("Workbench (in a browser): http://{bind}/workbench  (what each episode did and paid, and what waits for you)");
    say!(
        "try:  curl -s -H \"Authorization: Bearer $(cat {})\" -H 'Content-Type: application/json' -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/send\",\"params\":{{\"id\":\"read-1\",\"metadata\":{{\"skill_id\":\"ailang-read\"}},\"message\":{{\"role\":\"user\",\"parts\":[{{\"type\":\"data\",\"data\":{{\"path\":\"hello.txt\"}}}}]}}}}}}' http://{bind}/a2a/",
        session.display()
    );
    say!("{}", crate::serve::connection_snippets(&mcp_url, &session));
    if reads.private_reads {
        let token = crate::operator::token_path(&local);
        say!(
            "reads are private: the operator token is in {} (written at start, mode 0600); open \
             http://{bind}/workbench with it as the password (any user name); the verbs below read \
             with it by themselves (or give --token-file {})",
            token.display(),
            token.display()
        );
    }
    say!("{}", operator_commands(&dir, &local, &spec, bind));
    if exec_allow.is_empty() {
        say!(
            "workspace-exec runs no command until you allow one: stop this and run it again with \
             --exec-allow python3=/usr/bin/python3"
        );
    }
    super::serve(ServeOptions {
        approval_ttl_s: crate::approvals::APPROVAL_TTL_DEFAULT_S,
        store: spec,
        local,
        bind: bind.to_string(),
        workspace_root: Some(dir.join("workspace")),
        exec_allow,
        host_callbacks: crate::limits::HOST_CALLBACKS_DEFAULT,
        cache_bytes: world_store::CACHE_BYTES_DEFAULT,
        metrics: true,
        confine: confine.options(),
        worktree_quota_bytes: confine.worktree_quota_bytes(),
        task_limits: confine.task_limits(),
        print_connections: false,
        private_reads: reads.private_reads,
        connections_max: crate::limits::CONNECTIONS_MAX,
        workers: crate::limits::workers_default(),
    })
}
