//! The `Workspace.*` handlers, confined to `<workspace-root>/<episode>`.
//!
//! Confinement: paths are relative, without `..` or a leading `-`; every
//! existing component is resolved, and one that is a symlink must land inside
//! the worktree; the final open never follows a symlink; anything under `.git`
//! (any case) is read-only. An episode without a real worktree directory has
//! no handlers, so its effectful calls are refused before planning (R8).

use crate::confine::{Confinement, Outcome};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Largest file `read` returns, and the largest `write`/`edit` content.
pub const FILE_BYTES_MAX: u64 = 1 << 20;
/// Most entries one `list` returns.
pub const LIST_ENTRIES_MAX: usize = 1000;
/// `search` bounds: files looked at, bytes per file, matches returned.
pub const SEARCH_FILES_MAX: usize = 10_000;
pub const SEARCH_MATCHES_MAX: usize = 100;
/// `exec`: deadline, and how much of each stream is kept (head + tail).
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(9);
pub const EXEC_HEAD_BYTES: usize = 8 << 10;
pub const EXEC_TAIL_BYTES: usize = 56 << 10;
/// Handler results larger than this are a handler failure.
pub const RESULT_BYTES_MAX: usize = 2 << 20;

pub const READ: &str = "Workspace.Read";
pub const WRITE: &str = "Workspace.Write";
pub const EXEC: &str = "Workspace.Exec";

/// The daemon's worktree configuration.
#[derive(Clone, Debug, Default)]
pub struct Worktrees {
    /// Canonical workspace root, if configured.
    pub root: Option<PathBuf>,
    /// Command name → absolute program path (the operator's allow-list).
    pub exec_allow: BTreeMap<String, PathBuf>,
    /// The `tool` field of every result: the handler's identity.
    pub tool: String,
    /// How `exec` commands are confined; without it there is no exec handler.
    pub confinement: Option<std::sync::Arc<Confinement>>,
}

/// One episode's worktree, checked to be a real directory inside the root.
#[derive(Clone, Debug)]
pub struct Worktree {
    pub dir: PathBuf,
    pub policy_digest: String,
}

impl Worktrees {
    pub fn worktree(&self, episode: &str) -> Option<Worktree> {
        let root = self.root.as_ref()?;
        let dir = root.join(episode);
        let meta = std::fs::symlink_metadata(&dir).ok()?;
        if !meta.is_dir() || meta.file_type().is_symlink() {
            return None;
        }
        let canon = std::fs::canonicalize(&dir).ok()?;
        if canon != dir {
            return None;
        }
        let confinement = self.confinement.as_ref().map(|c| c.describe_exec());
        let policy = json!({"worktree": canon.display().to_string(), "gitReadOnly": true, "symlinks": "confined",
            "exec": self.exec_allow.keys().collect::<Vec<_>>(), "confinement": confinement});
        let policy_digest = hex::encode(Sha256::digest(world_store::canonical::to_vec(&policy)));
        Some(Worktree { dir: canon, policy_digest })
    }

    /// R8: what keeps `effect` from having a handler in this episode, said so
    /// that an operator knows what to change; `None` when it has one.
    pub fn missing(&self, episode: &str, effect: &str) -> Option<String> {
        if !matches!(effect, READ | WRITE | EXEC) {
            return Some(format!(
                "this daemon handles Workspace.Read, Workspace.Write and Workspace.Exec, not {effect}"
            ));
        }
        let Some(root) = &self.root else {
            return Some("no worktrees: start the daemon with --workspace-root DIR".into());
        };
        if self.worktree(episode).is_none() {
            let dir = root.join(episode);
            return Some(format!("episode {episode} has no worktree: create the directory {}", dir.display()));
        }
        if effect == EXEC && (self.exec_allow.is_empty() || self.confinement.is_none()) {
            return Some(
                "workspace-exec runs only allowed commands: start the daemon with --exec-allow NAME[=PATH]".into(),
            );
        }
        None
    }

    /// Runs one effect. `Ok` is the handler's output object (refusals included,
    /// as `ok:false`); `Err` is a handler failure.
    pub async fn run(&self, episode: &str, effect: &str, payload: &Value) -> Result<Value, String> {
        let wt = self.worktree(episode).ok_or_else(|| format!("episode {episode} has no worktree"))?;
        let op = payload.get("op").and_then(Value::as_str).unwrap_or("");
        let allowed =
            matches!((effect, op), (READ, "read" | "list" | "search") | (WRITE, "write" | "edit") | (EXEC, "exec"));
        if !allowed {
            return Err(format!("op {op:?} is not allowed for {effect}"));
        }
        let mut out = if op == "exec" {
            self.exec(&wt, payload).await?
        } else {
            let (wt2, payload) = (wt.clone(), payload.clone());
            let op = op.to_string();
            tokio::task::spawn_blocking(move || file_op(&wt2, &op, &payload)).await.map_err(|e| e.to_string())??
        };
        out.insert("tool".into(), json!(self.tool));
        out.insert("policy_digest".into(), json!(wt.policy_digest));
        Ok(Value::Object(out))
    }

    async fn exec(&self, wt: &Worktree, payload: &Value) -> Result<serde_json::Map<String, Value>, String> {
        let command = payload["command"].as_str().unwrap_or_default();
        let args: Vec<String> = payload["args"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let Some(program) = self.exec_allow.get(command) else {
            return Ok(refusal(format!("command {command:?} is not on this daemon's exec allow-list")));
        };
        let confinement = self.confinement.as_ref().ok_or("no exec confinement is configured")?;
        run_exec(confinement, program, &args, &wt.dir).await
    }
}

fn refusal(reason: String) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(false));
    m.insert("refused".into(), json!(reason));
    m
}

fn is_git(c: &str) -> bool {
    c.eq_ignore_ascii_case(".git")
}

/// Resolves `rel` inside `root` without letting a symlink lead out. For a
/// write, missing trailing components are allowed (they will be created).
pub fn confine(root: &Path, rel: &str, for_write: bool) -> Result<PathBuf, String> {
    if rel.is_empty() || rel.starts_with('/') || rel.starts_with('-') || rel.contains('\0') {
        return Err("must be relative and non-empty, with no leading \"-\"".into());
    }
    let mut cur = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    // Checked for every segment up front: a write joins the segments after the
    // first missing one unresolved, so a later ".." would climb out of the root.
    if parts.contains(&"..") {
        return Err("has a \"..\" segment".into());
    }
    for (i, part) in parts.iter().enumerate() {
        let next = cur.join(part);
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::canonicalize(&next)
                    .map_err(|_| format!("escapes sandbox {:?}", root.display().to_string()))?;
                if !target.starts_with(root) {
                    return Err(format!("escapes sandbox {:?}", root.display().to_string()));
                }
                cur = target;
            }
            Ok(_) => cur = next,
            Err(_) if for_write => {
                cur = next;
                // Pushed one by one: joining an empty rest would add a trailing
                // "/", and opening "new.txt/" to create it fails (EISDIR).
                cur.extend(&parts[i + 1..]);
                break;
            }
            Err(_) => return Err("does not exist".into()),
        }
    }
    if !cur.starts_with(root) {
        return Err(format!("escapes sandbox {:?}", root.display().to_string()));
    }
    Ok(cur)
}

fn under_git(root: &Path, path: &Path) -> bool {
    path.strip_prefix(root)
        .map(|p| p.components().any(|c| matches!(c, Component::Normal(s) if is_git(&s.to_string_lossy()))))
        .unwrap_or(false)
}

fn file_op(wt: &Worktree, op: &str, payload: &Value) -> Result<serde_json::Map<String, Value>, String> {
    let rel = payload["path"].as_str().unwrap_or_default();
    let for_write = matches!(op, "write" | "edit");
    let git_named = rel.split('/').any(is_git);
    if for_write && git_named {
        return Ok(refusal(format!("{op} {rel}: .git/ is read-only to the lane's tools")));
    }
    let path = match confine(&wt.dir, rel, for_write) {
        Ok(p) => p,
        Err(why) => return Ok(refusal(format!("{op} {rel}: path {rel:?} {why}"))),
    };
    if for_write && under_git(&wt.dir, &path) {
        return Ok(refusal(format!("{op} {rel}: .git/ is read-only to the lane's tools")));
    }
    match op {
        "read" => read_file(&path, rel),
        "write" => write_file(&path, rel, payload["content"].as_str().unwrap_or_default().as_bytes()),
        "edit" => edit_file(&path, rel, payload),
        "list" => list_dir(&wt.dir, &path, rel),
        "search" => search(&wt.dir, &path, payload["query"].as_str().unwrap_or_default()),
        _ => Err(format!("unknown op {op}")),
    }
}

fn open_nofollow(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)
}

fn read_limited(path: &Path) -> Result<Result<Vec<u8>, String>, String> {
    let f = match open_nofollow(path) {
        Ok(f) => f,
        Err(e) => return Ok(Err(e.to_string())),
    };
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Ok(Err("is a directory".into()));
    }
    let mut buf = Vec::new();
    f.take(FILE_BYTES_MAX + 1).read_to_end(&mut buf).map_err(|e| e.to_string())?;
    if buf.len() as u64 > FILE_BYTES_MAX {
        return Ok(Err(format!("is larger than {FILE_BYTES_MAX} bytes")));
    }
    Ok(Ok(buf))
}

fn read_file(path: &Path, rel: &str) -> Result<serde_json::Map<String, Value>, String> {
    let bytes = match read_limited(path)? {
        Ok(b) => b,
        Err(why) => return Ok(refusal(format!("read {rel}: {why}"))),
    };
    let Ok(text) = String::from_utf8(bytes) else { return Ok(refusal(format!("read {rel}: not UTF-8 text"))) };
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(true));
    m.insert("content".into(), json!(text));
    Ok(m)
}

fn write_file(path: &Path, rel: &str, content: &[u8]) -> Result<serde_json::Map<String, Value>, String> {
    if content.len() as u64 > FILE_BYTES_MAX {
        return Ok(refusal(format!("write {rel}: content is larger than {FILE_BYTES_MAX} bytes")));
    }
    if let Some(parent) = path.parent()
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        return Ok(refusal(format!("write {rel}: {e}")));
    }
    let opened =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).custom_flags(libc::O_NOFOLLOW).open(path);
    let mut f = match opened {
        Ok(f) => f,
        Err(e) => return Ok(refusal(format!("write {rel}: {e}"))),
    };
    std::io::Write::write_all(&mut f, content).map_err(|e| format!("write {rel}: {e}"))?;
    f.sync_all().map_err(|e| format!("write {rel}: {e}"))?;
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(true));
    m.insert("bytes".into(), json!(content.len()));
    Ok(m)
}

fn edit_file(path: &Path, rel: &str, payload: &Value) -> Result<serde_json::Map<String, Value>, String> {
    let old = payload["old_text"].as_str().unwrap_or_default();
    let new = payload["new_text"].as_str().unwrap_or_default();
    let bytes = match read_limited(path)? {
        Ok(b) => b,
        Err(why) => return Ok(refusal(format!("edit {rel}: {why}"))),
    };
    let Ok(text) = String::from_utf8(bytes) else { return Ok(refusal(format!("edit {rel}: not UTF-8 text"))) };
    match text.matches(old).count() {
        0 => Ok(refusal("old_text not found — the file may have changed; read it again".into())),
        1 => write_file(path, rel, text.replacen(old, new, 1).as_bytes()),
        n => Ok(refusal(format!("edit {rel}: old_text occurs {n} times; give more context so it occurs once"))),
    }
}

fn kind(meta: &std::fs::Metadata) -> &'static str {
    if meta.file_type().is_symlink() {
        "symlink"
    } else if meta.is_dir() {
        "dir"
    } else {
        "file"
    }
}

fn list_dir(root: &Path, path: &Path, rel: &str) -> Result<serde_json::Map<String, Value>, String> {
    let rd = match std::fs::read_dir(path) {
        Ok(r) => r,
        Err(e) => return Ok(refusal(format!("list {rel}: {e}"))),
    };
    let mut entries = vec![];
    let mut truncated = false;
    for item in rd.flatten() {
        if entries.len() >= LIST_ENTRIES_MAX {
            truncated = true;
            break;
        }
        let Ok(meta) = item.path().symlink_metadata() else { continue };
        let name = item.path().strip_prefix(root).map(|p| p.display().to_string()).unwrap_or_default();
        entries.push(json!({"path": name, "kind": kind(&meta), "size": meta.len()}));
    }
    entries.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(true));
    m.insert("entries".into(), Value::Array(entries));
    m.insert("truncated".into(), json!(truncated));
    Ok(m)
}

fn search(root: &Path, start: &Path, query: &str) -> Result<serde_json::Map<String, Value>, String> {
    let mut matches = vec![];
    let mut stack = vec![start.to_path_buf()];
    let mut files = 0usize;
    let mut truncated = false;
    'walk: while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        let mut items: Vec<_> = rd.flatten().collect();
        items.sort_by_key(|e| e.file_name());
        for item in items {
            let p = item.path();
            let Ok(meta) = p.symlink_metadata() else { continue };
            if meta.file_type().is_symlink() || is_git(&item.file_name().to_string_lossy()) {
                continue;
            }
            if meta.is_dir() {
                stack.push(p);
                continue;
            }
            files += 1;
            if files > SEARCH_FILES_MAX || matches.len() >= SEARCH_MATCHES_MAX {
                truncated = true;
                break 'walk;
            }
            let Ok(Ok(bytes)) = read_limited(&p) else { continue };
            let Ok(text) = std::str::from_utf8(&bytes) else { continue };
            for (n, line) in text.lines().enumerate() {
                if line.contains(query) {
                    let rel = p.strip_prefix(root).map(|r| r.display().to_string()).unwrap_or_default();
                    matches.push(json!({"path": rel, "line": n + 1, "text": truncate_line(line)}));
                    if matches.len() >= SEARCH_MATCHES_MAX {
                        truncated = true;
                        break 'walk;
                    }
                }
            }
        }
    }
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(true));
    m.insert("matches".into(), Value::Array(matches));
    m.insert("truncated".into(), json!(truncated));
    Ok(m)
}

fn truncate_line(line: &str) -> String {
    const LINE_MAX: usize = 512;
    if line.len() <= LINE_MAX {
        return line.to_string();
    }
    let mut end = LINE_MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// Keeps the head and tail of a stream, counts and hashes all of it.
struct Captured {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: u64,
    hash: Sha256,
}

impl Captured {
    fn new() -> Captured {
        Captured { head: vec![], tail: Default::default(), total: 0, hash: Sha256::new() }
    }

    fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.hash.update(chunk);
        let room = EXEC_HEAD_BYTES - self.head.len();
        let take = room.min(chunk.len());
        self.head.extend_from_slice(&chunk[..take]);
        chunk = &chunk[take..];
        self.tail.extend(chunk);
        while self.tail.len() > EXEC_TAIL_BYTES {
            self.tail.pop_front();
        }
    }

    fn into_fields(self, name: &str, m: &mut serde_json::Map<String, Value>) {
        let truncated = self.total > (self.head.len() + self.tail.len()) as u64;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if truncated {
            text.push_str(&format!(
                "\n… [{} bytes omitted] …\n",
                self.total - (self.head.len() + self.tail.len()) as u64
            ));
        }
        let tail: Vec<u8> = self.tail.into_iter().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        m.insert(name.into(), json!(text));
        m.insert(format!("{name}_bytes"), json!(self.total));
        m.insert(format!("{name}_truncated"), json!(truncated));
        m.insert(format!("{name}_sha256"), json!(hex::encode(self.hash.finalize())));
    }
}

async fn drain(mut r: impl tokio::io::AsyncRead + Unpin) -> Captured {
    let mut c = Captured::new();
    let mut buf = vec![0u8; 16 << 10];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        c.push(&buf[..n]);
    }
    c
}

async fn run_exec(
    confinement: &Confinement,
    program: &Path,
    args: &[String],
    cwd: &Path,
) -> Result<serde_json::Map<String, Value>, String> {
    let started = std::time::Instant::now();
    let run = confinement.run_dir()?;
    let policy = confinement.exec_policy(program, args, cwd, EXEC_TIMEOUT);
    let mut spawned = confinement.spawn(&run, &policy, |cmd| {
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    })?;
    let (out, err) = (spawned.child.stdout.take(), spawned.child.stderr.take());
    let (Some(out), Some(err)) = (out, err) else { return Err("child pipes missing".into()) };
    // Both pipes end when the run does (its deadline included); the wait reports how.
    let ((stdout, stderr), outcome) =
        tokio::join!(async { tokio::join!(drain(out), drain(err)) }, async { confinement.wait(&run, spawned).await });
    let (code, signal, timed_out, memory) = match outcome {
        Outcome::Exited { code } => (Some(code), None, false, None),
        Outcome::Signaled { signal } => (None, Some(signal), false, None),
        Outcome::TimedOut => (None, None, true, None),
        Outcome::MemoryExceeded { limit_bytes } => (None, Some(libc::SIGKILL), false, Some(limit_bytes)),
        Outcome::SetupFailed { error } => return Err(format!("workspace-exec could not start the command: {error}")),
    };
    let mut stderr = stderr;
    if let Some(limit) = memory {
        let note = format!(
            "\nworldd: the command's processes together exceeded its memory bound of {} MiB; the kernel killed them\n",
            limit >> 20
        );
        stderr.push(note.as_bytes());
    }
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(code == Some(0)));
    m.insert("exit_code".into(), json!(code));
    if let Some(s) = signal {
        m.insert("signal".into(), json!(s));
    }
    m.insert("timed_out".into(), json!(timed_out));
    m.insert("memory_exceeded".into(), json!(memory.is_some()));
    m.insert("duration_ms".into(), json!(started.elapsed().as_millis() as u64));
    m.insert(
        "argv".into(),
        json!(std::iter::once(program.display().to_string()).chain(args.iter().cloned()).collect::<Vec<_>>()),
    );
    stdout.into_fields("stdout", &mut m);
    stderr.into_fields("stderr", &mut m);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("ep/src")).unwrap();
        std::fs::create_dir_all(root.join("ep/.git")).unwrap();
        std::fs::write(root.join("ep/src/a.txt"), "hello\n").unwrap();
        std::fs::write(root.join("secret"), "outside").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), root.join("ep/out")).unwrap();
        std::os::unix::fs::symlink("src", root.join("ep/inner")).unwrap();
        (dir, root)
    }

    #[test]
    fn symlinks_may_point_inside_but_never_out() {
        let (_d, root) = setup();
        let wt = root.join("ep");
        assert_eq!(confine(&wt, "inner/a.txt", false).unwrap(), wt.join("src/a.txt"));
        assert!(confine(&wt, "out", false).unwrap_err().contains("escapes sandbox"));
        assert!(confine(&wt, "../secret", false).is_err());
        assert!(confine(&wt, "/etc/hosts", false).is_err());
        assert!(confine(&wt, "-rf", false).is_err());
        assert!(confine(&wt, "a\0b", true).is_err());
        assert_eq!(confine(&wt, "new/dir/f.txt", true).unwrap(), wt.join("new/dir/f.txt"));
        assert!(confine(&wt, "missing/../../secret", true).is_err(), "a \"..\" after a missing segment");
        // Compared as bytes: `PathBuf` equality ignores a trailing "/", the kernel does not.
        let new_file = confine(&wt, "src/new.txt", true).unwrap();
        assert_eq!(new_file.as_os_str(), wt.join("src/new.txt").as_os_str());
    }

    #[tokio::test]
    async fn git_is_read_only_in_any_spelling() {
        let (_d, root) = setup();
        let w =
            Worktrees { root: Some(root.clone()), exec_allow: BTreeMap::new(), tool: "t".into(), confinement: None };
        for p in [".git/config", ".GIT/HEAD", "src/../.git/x", "sub/.Git/y"] {
            let out = w.run("ep", WRITE, &json!({"op": "write", "path": p, "content": "x"})).await.unwrap();
            assert_eq!(out["ok"], false, "{p}");
        }
        assert!(!root.join("ep/.git/config").exists());
        let out = w.run("ep", WRITE, &json!({"op": "write", "path": "out", "content": "x"})).await.unwrap();
        assert_eq!(out["ok"], false);
        assert_eq!(std::fs::read_to_string(root.join("secret")).unwrap(), "outside");
    }

    #[tokio::test]
    async fn edit_replaces_exactly_one_occurrence() {
        let (_d, root) = setup();
        let w =
            Worktrees { root: Some(root.clone()), exec_allow: BTreeMap::new(), tool: "t".into(), confinement: None };
        let edit = |old: &str| json!({"op": "edit", "path": "src/a.txt", "old_text": old, "new_text": "bye"});
        assert_eq!(w.run("ep", WRITE, &edit("hello")).await.unwrap()["ok"], true);
        assert_eq!(std::fs::read_to_string(root.join("ep/src/a.txt")).unwrap(), "bye\n");
        let out = w.run("ep", WRITE, &edit("hello")).await.unwrap();
        assert_eq!(out["refused"], "old_text not found — the file may have changed; read it again");
    }

    #[test]
    fn an_episode_without_a_real_directory_has_no_handlers() {
        let (_d, root) = setup();
        std::os::unix::fs::symlink(root.join("ep"), root.join("alias")).unwrap();
        let w = Worktrees { root: Some(root), exec_allow: BTreeMap::new(), tool: "t".into(), confinement: None };
        assert!(w.missing("ep", READ).is_none());
        assert!(w.missing("alias", READ).is_some());
        assert!(w.missing("missing", READ).is_some());
        assert!(w.missing("ep", EXEC).unwrap().contains("--exec-allow NAME[=PATH]"), "no exec allow-list configured");
        let ghost = w.missing("ghost", READ).unwrap();
        assert!(ghost.contains("episode ghost has no worktree") && ghost.ends_with("/ghost"), "{ghost}");
        assert!(w.missing("ep", "Net.Fetch").unwrap().contains("not Net.Fetch"));
        let rootless = Worktrees::default();
        assert!(rootless.missing("ep", READ).unwrap().contains("--workspace-root DIR"));
        assert!(w.missing("ep", "Net.Call").is_some());
    }
}
