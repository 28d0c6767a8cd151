//! The `Workspace.*` handlers, confined to `<workspace-root>/<episode>`.
//!
//! Confinement: paths are relative, without `..` or a leading `-`, and the
//! kernel opens them beneath a descriptor of the worktree (`beneath`): a
//! symlink may lead anywhere inside by a relative target, never out, and
//! nothing swapped in mid-call redirects a read or a write. Anything inside a
//! directory named `.git` (any case, any depth, reached by any path) is
//! read-only. An episode without a real worktree directory has no handlers,
//! so its effectful calls are refused before planning (R8).

use super::beneath::{self, Beneath, Refusal};
use super::quota::{self, Quotas};
use crate::confine::policy::Policy;
use crate::confine::walk::{self, Look};
use crate::confine::{Confinement, Outcome};
use nix::fcntl::OFlag;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Largest file `read` returns, and the largest `write`/`edit` content.
pub const FILE_BYTES_MAX: u64 = 1 << 20;
/// Most entries one `list` returns.
pub const LIST_ENTRIES_MAX: usize = 1000;
/// `search` bounds: files looked at, bytes per file, matches returned.
pub const SEARCH_FILES_MAX: usize = 10_000;
pub const SEARCH_MATCHES_MAX: usize = 100;
/// Directories one `search` descends at most (each holds a descriptor open).
pub const SEARCH_DEPTH_MAX: usize = 64;
/// `exec`: deadline, and how much of each stream is kept (head + tail).
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(9);
pub const EXEC_HEAD_BYTES: usize = 8 << 10;
pub const EXEC_TAIL_BYTES: usize = 56 << 10;
/// Handler results larger than this are a handler failure.
pub const RESULT_BYTES_MAX: usize = 2 << 20;
/// The last bytes of a running command's output its task's pollers are
/// shown (stdout and stderr as they come, interleaved).
pub const RUNNING_TAIL_BYTES: usize = 2 << 10;
/// The last bytes of a running command's output kept for its streams: a
/// stream that falls further behind skips to what is kept, and says so.
pub const RUNNING_KEPT_BYTES: usize = 64 << 10;
const _: () = assert!(RUNNING_TAIL_BYTES <= RUNNING_KEPT_BYTES);

/// How a command is run: a call answered in its own request gets
/// `EXEC_TIMEOUT` and nothing more; a task its own deadline, a stop its
/// client can pull, and the tail of its output as it comes.
#[derive(Clone, Debug, Default)]
pub struct RunControl {
    /// `None`: `EXEC_TIMEOUT`.
    pub deadline: Option<Duration>,
    pub stop: Option<std::sync::Arc<crate::confine::RunStop>>,
    pub tail: Option<std::sync::Arc<RunningTail>>,
}

impl RunControl {
    pub fn deadline(&self) -> Duration {
        self.deadline.unwrap_or(EXEC_TIMEOUT)
    }
}

/// The last `RUNNING_KEPT_BYTES` a running command wrote, and how many in
/// all: a byte's offset is its place in the whole output, so a reader asks
/// for what came after the last byte it had. Writing never waits on a reader.
#[derive(Debug, Default)]
pub struct RunningTail {
    kept: std::sync::Mutex<(std::collections::VecDeque<u8>, u64)>,
}

/// What a reader gets of a running command's output past an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Since {
    /// The bytes kept past the offset asked for, at most the bound asked for.
    pub bytes: Vec<u8>,
    /// The offset of `bytes`' first byte.
    pub from: u64,
    /// Bytes past the offset asked for that are no longer kept.
    pub skipped: u64,
    /// How many bytes were written in all.
    pub total: u64,
}

impl RunningTail {
    fn push(&self, chunk: &[u8]) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.1 = kept.1.saturating_add(chunk.len() as u64);
        let skip = chunk.len().saturating_sub(RUNNING_KEPT_BYTES);
        kept.0.extend(&chunk[skip..]);
        let over = kept.0.len().saturating_sub(RUNNING_KEPT_BYTES);
        kept.0.drain(..over);
    }

    /// The last `RUNNING_TAIL_BYTES` as text (a split character shown as
    /// U+FFFD), and the count of every byte written.
    pub fn read(&self) -> (String, u64) {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let skip = kept.0.len().saturating_sub(RUNNING_TAIL_BYTES);
        let tail: Vec<u8> = kept.0.range(skip..).copied().collect();
        (String::from_utf8_lossy(&tail).into_owned(), kept.1)
    }

    /// At most `max` of the bytes written after the first `offset` (an
    /// offset past the end reads nothing), saying how many of those are no
    /// longer kept.
    pub fn since(&self, offset: u64, max: usize) -> Since {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let total = kept.1;
        let start = total.saturating_sub(kept.0.len() as u64);
        let from = offset.clamp(start, total);
        // `from - start` is at most the kept length, a usize.
        let at = usize::try_from(from - start).unwrap_or(usize::MAX);
        let bytes = kept.0.range(at.min(kept.0.len())..).take(max).copied().collect();
        Since { bytes, from, skipped: start.saturating_sub(offset), total }
    }
}

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
    /// Each worktree's disk quota and what it holds.
    pub quotas: std::sync::Arc<Quotas>,
}

/// One episode's worktree, checked to be a real directory inside the root.
#[derive(Clone, Debug)]
pub struct Worktree {
    pub dir: PathBuf,
    pub policy_digest: String,
    pub quotas: std::sync::Arc<Quotas>,
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
        let policy = json!({"worktree": canon.display().to_string(), "gitReadOnly": true, "symlinks": "beneath",
            "exec": self.exec_allow.keys().collect::<Vec<_>>(), "confinement": confinement});
        let policy_digest = hex::encode(Sha256::digest(world_store::canonical::to_vec(&policy)));
        Some(Worktree { dir: canon, policy_digest, quotas: self.quotas.clone() })
    }

    /// Why the workspace root is open to other users (its mode lets its group
    /// or others in), with the `chmod` that closes it; `None` when it is its
    /// owner's alone, or there is none. Said at start: the worktrees hold the
    /// agents' files, and an operator's directory is not changed behind their back.
    pub fn root_open_to_others(&self) -> Option<String> {
        use std::os::unix::fs::PermissionsExt;
        let root = self.root.as_ref()?;
        let mode = std::fs::metadata(root).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then(|| {
            format!(
                "the workspace root {} is mode {mode:04o}: other users may read the worktrees in it; \
                 `chmod 700 {}` makes it its owner's alone",
                root.display(),
                root.display()
            )
        })
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
    #[cfg(test)]
    pub async fn run(&self, episode: &str, effect: &str, payload: &Value) -> Result<Value, String> {
        self.run_over(episode, effect, payload, None, &RunControl::default()).await
    }

    /// Runs one effect; a command binds read-only the `.git` of `walked`, the
    /// walk its approval was bound to, or else walks the worktree first, and
    /// runs as `control` says (its deadline, a stop, its output's tail).
    pub async fn run_over(
        &self,
        episode: &str,
        effect: &str,
        payload: &Value,
        walked: Option<Vec<PathBuf>>,
        control: &RunControl,
    ) -> Result<Value, String> {
        let wt = self.worktree(episode).ok_or_else(|| format!("episode {episode} has no worktree"))?;
        let op = payload.get("op").and_then(Value::as_str).unwrap_or("");
        let allowed =
            matches!((effect, op), (READ, "read" | "list" | "search") | (WRITE, "write" | "edit") | (EXEC, "exec"));
        if !allowed {
            return Err(format!("op {op:?} is not allowed for {effect}"));
        }
        let mut out = if op == "exec" {
            self.exec(&wt, payload, walked, control).await?
        } else {
            let (wt2, payload) = (wt.clone(), payload.clone());
            let op = op.to_string();
            tokio::task::spawn_blocking(move || file_op(&wt2, &op, &payload)).await.map_err(|e| e.to_string())??
        };
        out.insert("tool".into(), json!(self.tool));
        out.insert("policy_digest".into(), json!(wt.policy_digest));
        Ok(Value::Object(out))
    }

    async fn exec(
        &self,
        wt: &Worktree,
        payload: &Value,
        walked: Option<Vec<PathBuf>>,
        control: &RunControl,
    ) -> Result<serde_json::Map<String, Value>, String> {
        let command = payload["command"].as_str().unwrap_or_default();
        let args: Vec<String> = payload["args"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let Some(program) = self.exec_allow.get(command) else {
            return Ok(refusal(format!("command {command:?} is not on this daemon's exec allow-list")));
        };
        let confinement = self.confinement.clone().ok_or("no exec confinement is configured")?;
        // Walks the worktree for every `.git` to bind read-only (unless the
        // approval's walk found them), and (once) to measure it: off the
        // async threads.
        let (c, program, cwd, quotas) = (confinement.clone(), program.clone(), wt.dir.clone(), wt.quotas.clone());
        let deadline = control.deadline();
        let built = tokio::task::spawn_blocking(move || {
            // At the quota the ledger's upper bounds are measured away first.
            let room = match quotas.room(&cwd)? {
                0 => quotas.remeasure_now(&cwd)?,
                room => room,
            };
            let git = match walked {
                Some(git) => git,
                None => walk::walk(&cwd, Look::Git).map_err(|e| e.to_string())?.git,
            };
            Ok::<_, String>((c.exec_policy(&program, &args, &cwd, &git, deadline), room))
        });
        let (mut policy, room) = match built.await.map_err(|e| e.to_string())? {
            Ok(built) => built,
            Err(why) => return Ok(refusal(format!("workspace-exec refused: {why}"))),
        };
        if room == 0 {
            return Ok(quota_full(&wt.quotas, &wt.dir, &policy.argv));
        }
        // No one file may outgrow the room left; the run as a whole is held to it as it goes.
        policy.limits.file_size = policy.limits.file_size.min(room);
        policy.limits.disk_writes = Some(room);
        let ran = run_exec(&confinement, &policy, control).await;
        // A run that reported no count (cut short, or failed) may have used
        // all its room: charged so until the background measurement says.
        let written = ran.as_ref().ok().and_then(|(_, w)| *w).unwrap_or(room);
        if written > 0 {
            wt.quotas.changed(&wt.dir, i64::try_from(written).unwrap_or(i64::MAX));
            wt.quotas.remeasure_later(&wt.dir);
        }
        ran.map(|(out, _)| out)
    }
}

/// Makes the directory `dir` (and what is missing above it) mode 0700 from its
/// creation: a worktree World makes is never open to other users, not even
/// for a moment. An existing directory is left as it is.
pub fn create_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// A command that cannot run because its worktree is at its quota: a
/// command's output, saying why on stderr.
fn quota_full(quotas: &Quotas, dir: &Path, argv: &[String]) -> serde_json::Map<String, Value> {
    let used = quotas.usage(dir).unwrap_or(0);
    let note = format!(
        "worldd: the worktree holds {} MiB, at its quota of {} MiB: the command did not run; remove files to make room\n",
        used >> 20,
        quotas.limit() >> 20
    );
    let end = CommandEnd { quota_exceeded: true, ..CommandEnd::default() };
    command_output(&end, 0, argv, Captured::new(), Captured::new(), &note)
}

/// How a command ended, as its output says.
#[derive(Default)]
struct CommandEnd {
    code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    memory_exceeded: bool,
    quota_exceeded: bool,
    /// Stopped by its task's cancel (told only when so).
    cancelled: bool,
}

/// A command's output object; `note`, if any, ends its stderr.
fn command_output(
    end: &CommandEnd,
    duration_ms: u64,
    argv: &[String],
    stdout: Captured,
    mut stderr: Captured,
    note: &str,
) -> serde_json::Map<String, Value> {
    stderr.push(note.as_bytes());
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(end.code == Some(0)));
    m.insert("exit_code".into(), json!(end.code));
    if let Some(s) = end.signal {
        m.insert("signal".into(), json!(s));
    }
    m.insert("timed_out".into(), json!(end.timed_out));
    if end.cancelled {
        m.insert("cancelled".into(), json!(true));
    }
    m.insert("memory_exceeded".into(), json!(end.memory_exceeded));
    m.insert("quota_exceeded".into(), json!(end.quota_exceeded));
    m.insert("duration_ms".into(), json!(duration_ms));
    m.insert("argv".into(), json!(argv));
    stdout.into_fields("stdout", &mut m);
    stderr.into_fields("stderr", &mut m);
    m
}

fn refusal(reason: String) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(false));
    m.insert("refused".into(), json!(reason));
    m
}

fn is_git(c: &str) -> bool {
    beneath::is_git(c.as_bytes())
}

/// The components of a tool's path, after the checks made before any lookup:
/// relative, non-empty, no NUL, no leading `-`, no `..` segment.
fn components(rel: &str) -> Result<Vec<&str>, String> {
    if rel.is_empty() || rel.starts_with('/') || rel.starts_with('-') || rel.contains('\0') {
        return Err("must be relative and non-empty, with no leading \"-\"".into());
    }
    let parts: Vec<&str> = rel.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    if parts.contains(&"..") {
        return Err("has a \"..\" segment".into());
    }
    Ok(parts)
}

/// Why a file tool did not do what it was asked, before it is worded.
enum Refused {
    /// The path was not opened.
    Path(Refusal),
    /// Said after `"<op> <path>: "`.
    Said(String),
    /// Said in full.
    Whole(String),
    /// Not a refusal: the handler failed (e.g. a write that did not reach the disk).
    Failed(String),
}

impl From<Refusal> for Refused {
    fn from(r: Refusal) -> Refused {
        Refused::Path(r)
    }
}

type Done = Result<serde_json::Map<String, Value>, Refused>;

/// A refusal's text, as the handlers have always worded it.
fn worded(op: &str, rel: &str, root: &Path, why: Refused) -> Result<String, String> {
    let path = |what: String| format!("{op} {rel}: path {rel:?} {what}");
    Ok(match why {
        Refused::Path(Refusal::Escapes) => path(format!("escapes sandbox {:?}", root.display().to_string())),
        Refused::Path(Refusal::Missing(_)) if matches!(op, "read" | "list" | "search") => path("does not exist".into()),
        Refused::Path(Refusal::Missing(e) | Refusal::Os(e)) => format!("{op} {rel}: {e}"),
        Refused::Path(Refusal::Git) => format!("{op} {rel}: .git/ is read-only to World's tools"),
        Refused::Path(Refusal::NoOpenat2) => {
            format!("{op} {rel}: this kernel has no openat2 (Linux 5.6 or later), so the file tools open nothing")
        }
        Refused::Path(Refusal::Changed) => format!("{op} {rel}: the worktree changed while the path was looked up"),
        Refused::Said(s) => format!("{op} {rel}: {s}"),
        Refused::Whole(s) => s,
        Refused::Failed(s) => return Err(s),
    })
}

fn file_op(wt: &Worktree, op: &str, payload: &Value) -> Result<serde_json::Map<String, Value>, String> {
    let rel = payload["path"].as_str().unwrap_or_default();
    if matches!(op, "write" | "edit") && rel.split('/').any(is_git) {
        return Ok(refusal(format!("{op} {rel}: .git/ is read-only to World's tools")));
    }
    let parts = match components(rel) {
        Ok(p) => p,
        Err(why) => return Ok(refusal(format!("{op} {rel}: path {rel:?} {why}"))),
    };
    let room = Room { quotas: &wt.quotas, dir: &wt.dir };
    let done = Beneath::open(&wt.dir).map_err(Refused::from).and_then(|b| match op {
        "read" => read_file(&b, &parts),
        "write" => write_file(&b, &parts, rel, payload["content"].as_str().unwrap_or_default().as_bytes(), &room),
        "edit" => edit_file(&b, &parts, rel, payload, &room),
        "list" => list_dir(&b, &parts),
        "search" => search(&b, &parts, payload["query"].as_str().unwrap_or_default()),
        _ => Err(Refused::Failed(format!("unknown op {op}"))),
    });
    match done {
        Ok(m) => Ok(m),
        Err(why) => worded(op, rel, &wt.dir, why).map(refusal),
    }
}

/// All of a regular file, if it has at most [`FILE_BYTES_MAX`] bytes.
fn read_limited(f: &std::fs::File) -> Result<Vec<u8>, Refused> {
    let meta = f.metadata().map_err(|e| Refused::Said(e.to_string()))?;
    if meta.is_dir() {
        return Err(Refused::Said("is a directory".into()));
    }
    if !meta.is_file() {
        return Err(Refused::Said("is not a regular file".into()));
    }
    let mut buf = Vec::new();
    f.take(FILE_BYTES_MAX + 1).read_to_end(&mut buf).map_err(|e| Refused::Failed(e.to_string()))?;
    if buf.len() as u64 > FILE_BYTES_MAX {
        return Err(Refused::Said(format!("is larger than {FILE_BYTES_MAX} bytes")));
    }
    Ok(buf)
}

fn read_file(b: &Beneath, parts: &[&str]) -> Done {
    let bytes = read_limited(&b.open_read(parts)?)?;
    let Ok(text) = String::from_utf8(bytes) else { return Err(Refused::Said("not UTF-8 text".into())) };
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(true));
    m.insert("content".into(), json!(text));
    Ok(m)
}

/// The quota a write answers to: its worktree's ledger.
struct Room<'a> {
    quotas: &'a Quotas,
    dir: &'a Path,
}

impl Room<'_> {
    /// How much a file taking `old` bytes (allocated) grows the worktree when
    /// it holds `new` bytes; refused past the quota (measured again first).
    fn admit(&self, old: u64, new: u64) -> Result<i64, Refused> {
        let (old, new) =
            (i64::try_from(old).unwrap_or(i64::MAX), i64::try_from(quota::charged(new)).unwrap_or(i64::MAX));
        let delta = new.saturating_sub(old);
        let grows = u64::try_from(delta).unwrap_or(0);
        let mut room = if grows > 0 { self.quotas.room(self.dir).map_err(Refused::Failed)? } else { u64::MAX };
        if grows > room {
            room = self.quotas.remeasure_now(self.dir).map_err(Refused::Failed)?;
        }
        if grows > room {
            let used = self.quotas.usage(self.dir).unwrap_or(0);
            return Err(Refused::Said(format!(
                "the worktree would grow past its quota of {} MiB ({} MiB in use); remove files to make room",
                self.quotas.limit() >> 20,
                used >> 20
            )));
        }
        Ok(delta)
    }
}

/// Replaces what `f` holds with `content`, durably, within the quota.
fn replace_contents(mut f: &std::fs::File, rel: &str, content: &[u8], room: &Room) -> Done {
    use std::io::{Seek, Write};
    let failed = |e: std::io::Error| Refused::Failed(format!("write {rel}: {e}"));
    let delta = room.admit(quota::allocated(&f.metadata().map_err(failed)?), content.len() as u64)?;
    f.set_len(0).map_err(failed)?;
    f.rewind().map_err(failed)?;
    f.write_all(content).map_err(failed)?;
    f.sync_all().map_err(failed)?;
    room.quotas.changed(room.dir, delta);
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(true));
    m.insert("bytes".into(), json!(content.len()));
    Ok(m)
}

fn too_large(rel: &str) -> Refused {
    Refused::Whole(format!("write {rel}: content is larger than {FILE_BYTES_MAX} bytes"))
}

fn write_file(b: &Beneath, parts: &[&str], rel: &str, content: &[u8], room: &Room) -> Done {
    if content.len() as u64 > FILE_BYTES_MAX {
        return Err(too_large(rel));
    }
    // Past the quota nothing is made, not even a parent directory.
    let existing = b.open_read(parts).ok().and_then(|f| f.metadata().ok()).map_or(0, |m| quota::allocated(&m));
    room.admit(existing, content.len() as u64)?;
    let dir = b.make_dirs(&parts[..parts.len().saturating_sub(1)])?;
    let target = b.write_target(dir, parts)?;
    let f = b.open_target(&target, OFlag::O_WRONLY | OFlag::O_CREAT)?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Err(Refused::Said("is not a regular file".into()));
    }
    replace_contents(&f, rel, content, room)
}

fn edit_file(b: &Beneath, parts: &[&str], rel: &str, payload: &Value, room: &Room) -> Done {
    let old = payload["old_text"].as_str().unwrap_or_default();
    let new = payload["new_text"].as_str().unwrap_or_default();
    let dir = b.open_dir(&parts[..parts.len().saturating_sub(1)])?;
    let f = b.open_target(&b.write_target(dir, parts)?, OFlag::O_RDWR)?;
    let Ok(text) = String::from_utf8(read_limited(&f)?) else { return Err(Refused::Said("not UTF-8 text".into())) };
    match text.matches(old).count() {
        0 => Err(Refused::Whole("old_text not found — the file may have changed; read it again".into())),
        1 => {
            let edited = text.replacen(old, new, 1);
            if edited.len() as u64 > FILE_BYTES_MAX {
                return Err(too_large(rel));
            }
            replace_contents(&f, rel, edited.as_bytes(), room)
        }
        n => Err(Refused::Said(format!("old_text occurs {n} times; give more context so it occurs once"))),
    }
}

fn kind(e: &beneath::Entry) -> &'static str {
    if e.is_symlink() {
        "symlink"
    } else if e.is_dir() {
        "dir"
    } else {
        "file"
    }
}

/// A directory to list or search: what `parts` names, if it is one.
fn open_listed(b: &Beneath, parts: &[&str]) -> Result<std::fs::File, Refused> {
    let f = b.open_read(parts)?;
    match f.metadata() {
        Ok(m) if m.is_dir() => Ok(f),
        Ok(_) => Err(Refusal::Os(std::io::Error::from_raw_os_error(libc::ENOTDIR)).into()),
        Err(e) => Err(Refusal::Os(e).into()),
    }
}

fn list_dir(b: &Beneath, parts: &[&str]) -> Done {
    let dir = open_listed(b, parts)?;
    // Entries are named from the worktree, by where the directory really is.
    let base = b.name_of(dir.as_fd()).unwrap_or_else(|| parts.iter().collect());
    let (_, found, truncated) = beneath::entries(dir, LIST_ENTRIES_MAX)?;
    let mut entries: Vec<Value> = found
        .iter()
        .map(|e| {
            let name = base.join(std::ffi::OsStr::from_bytes(&e.name)).display().to_string();
            json!({"path": name, "kind": kind(e), "size": e.stat.st_size})
        })
        .collect();
    entries.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(true));
    m.insert("entries".into(), Value::Array(entries));
    m.insert("truncated".into(), json!(truncated));
    Ok(m)
}

/// One directory of a search: its descriptor, its entries by name, the next to look at.
struct Level {
    dir: std::os::fd::OwnedFd,
    entries: Vec<beneath::Entry>,
    next: usize,
    /// Where it is, from the worktree (for the matches' paths).
    path: PathBuf,
}

/// What a search has found so far.
#[derive(Default)]
struct Found {
    matches: Vec<Value>,
    files: usize,
    truncated: bool,
}

/// What one step of a search does next.
enum Step {
    Next,
    Descend(std::fs::File, PathBuf),
    Stop,
}

fn search(b: &Beneath, parts: &[&str], query: &str) -> Done {
    let mut found = Found::default();
    let start = b.open_read(parts)?;
    // A file, not a directory: nothing to search, as before.
    if start.metadata().is_ok_and(|m| m.is_dir()) {
        let base = b.name_of(start.as_fd()).unwrap_or_else(|| parts.iter().collect());
        walk(b, start, base, query, &mut found);
    }
    let mut m = serde_json::Map::new();
    m.insert("ok".into(), json!(true));
    m.insert("matches".into(), Value::Array(found.matches));
    m.insert("truncated".into(), json!(found.truncated));
    Ok(m)
}

/// Depth first, entries in name order, each directory opened from its
/// parent's descriptor; symlinks and `.git` are skipped.
fn walk(b: &Beneath, start: std::fs::File, base: PathBuf, query: &str, found: &mut Found) {
    let mut stack: Vec<Level> = level(start, base, found).into_iter().collect();
    loop {
        let deep = stack.len() >= SEARCH_DEPTH_MAX;
        let Some(top) = stack.last_mut() else { return };
        match step(b, top, deep, query, found) {
            None => {
                stack.pop();
            }
            Some(Step::Next) => {}
            Some(Step::Descend(dir, path)) => stack.extend(level(dir, path, found)),
            Some(Step::Stop) => return,
        }
    }
}

fn level(dir: std::fs::File, path: PathBuf, found: &mut Found) -> Option<Level> {
    let (dir, mut entries, more) = beneath::entries(dir, SEARCH_FILES_MAX).ok()?;
    found.truncated |= more;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Some(Level { dir, entries, next: 0, path })
}

/// Looks at the next entry of `top`; `None` when it has none left.
fn step(b: &Beneath, top: &mut Level, deep: bool, query: &str, found: &mut Found) -> Option<Step> {
    let e = top.entries.get(top.next)?;
    top.next += 1;
    if e.is_symlink() || beneath::is_git(&e.name) {
        return Some(Step::Next);
    }
    let path = top.path.join(std::ffi::OsStr::from_bytes(&e.name));
    if e.is_dir() {
        found.truncated |= deep;
        let opened = (!deep).then(|| b.open_entry(top.dir.as_fd(), &e.name, OFlag::O_RDONLY | OFlag::O_DIRECTORY));
        return Some(opened.and_then(Result::ok).map_or(Step::Next, |dir| Step::Descend(dir, path)));
    }
    found.files += 1;
    if found.files > SEARCH_FILES_MAX || found.matches.len() >= SEARCH_MATCHES_MAX {
        found.truncated = true;
        return Some(Step::Stop);
    }
    if !e.is_file() {
        return Some(Step::Next);
    }
    let Ok(f) = b.open_entry(top.dir.as_fd(), &e.name, OFlag::O_RDONLY) else { return Some(Step::Next) };
    let Ok(bytes) = read_limited(&f) else { return Some(Step::Next) };
    let Ok(text) = std::str::from_utf8(&bytes) else { return Some(Step::Next) };
    for (n, line) in text.lines().enumerate().filter(|(_, l)| l.contains(query)) {
        found.matches.push(json!({"path": path.display().to_string(), "line": n + 1, "text": truncate_line(line)}));
        if found.matches.len() >= SEARCH_MATCHES_MAX {
            found.truncated = true;
            return Some(Step::Stop);
        }
    }
    Some(Step::Next)
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

async fn drain(mut r: impl tokio::io::AsyncRead + Unpin, tail: Option<&RunningTail>) -> Captured {
    let mut c = Captured::new();
    let mut buf = vec![0u8; 16 << 10];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        c.push(&buf[..n]);
        if let Some(t) = tail {
            t.push(&buf[..n]);
        }
    }
    c
}

/// Runs a command; its output object and what it wrote to storage, if counted.
async fn run_exec(
    confinement: &Confinement,
    policy: &Policy,
    control: &RunControl,
) -> Result<(serde_json::Map<String, Value>, Option<u64>), String> {
    let started = std::time::Instant::now();
    let run = confinement.run_dir()?;
    let mut spawned = confinement.spawn(&run, policy, |cmd| {
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    })?;
    let (out, err) = (spawned.child.stdout.take(), spawned.child.stderr.take());
    let (Some(out), Some(err)) = (out, err) else { return Err("child pipes missing".into()) };
    // Both pipes end when the run does (its deadline included); the wait reports how.
    let tail = control.tail.as_deref();
    let stop = control.stop.as_deref();
    let ((stdout, stderr), outcome) = tokio::join!(async { tokio::join!(drain(out, tail), drain(err, tail)) }, async {
        confinement.wait_or_stop(&run, spawned, stop).await
    });
    let written = confinement.written(&run);
    let killed = Some(libc::SIGKILL);
    let (end, note) = match outcome {
        Outcome::Exited { code } => (CommandEnd { code: Some(code), ..CommandEnd::default() }, String::new()),
        Outcome::Signaled { signal } => (CommandEnd { signal: Some(signal), ..CommandEnd::default() }, String::new()),
        Outcome::TimedOut => (CommandEnd { timed_out: true, ..CommandEnd::default() }, String::new()),
        Outcome::MemoryExceeded { limit_bytes } => (
            CommandEnd { signal: killed, memory_exceeded: true, ..CommandEnd::default() },
            format!(
                "\nworldd: the command's processes together exceeded its memory bound of {} MiB; the kernel killed them\n",
                limit_bytes >> 20
            ),
        ),
        Outcome::DiskExceeded { written_bytes } => (
            CommandEnd { signal: killed, quota_exceeded: true, ..CommandEnd::default() },
            format!(
                "\nworldd: the command wrote {} MiB to the worktree, past the {} MiB left in its quota; it was killed\n",
                written_bytes >> 20,
                policy.limits.disk_writes.unwrap_or(0) >> 20
            ),
        ),
        Outcome::Stopped => (
            CommandEnd { signal: killed, cancelled: true, ..CommandEnd::default() },
            format!(
                "\nworldd: the command was cancelled after {} s; its processes were killed\n",
                started.elapsed().as_secs()
            ),
        ),
        Outcome::SetupFailed { error } => return Err(format!("workspace-exec could not start the command: {error}")),
    };
    let duration_ms = started.elapsed().as_millis() as u64;
    Ok((command_output(&end, duration_ms, &policy.argv, stdout, stderr, &note), written))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

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
    fn a_reader_of_a_running_output_gets_what_came_after_its_offset_and_is_told_what_was_dropped() {
        let tail = RunningTail::default();
        tail.push(b"one\n");
        let first = tail.since(0, usize::MAX);
        assert_eq!((first.bytes.as_slice(), first.from, first.skipped, first.total), (&b"one\n"[..], 0, 0, 4));
        tail.push(b"two\n");
        let next = tail.since(first.from + first.bytes.len() as u64, usize::MAX);
        assert_eq!((next.bytes.as_slice(), next.from, next.skipped), (&b"two\n"[..], 4, 0));
        assert_eq!(tail.since(8, usize::MAX).bytes, b"", "nothing new");
        assert_eq!(tail.since(u64::MAX, usize::MAX).from, 8, "an offset past the end reads nothing");
        assert_eq!(tail.since(2, 3).bytes, b"e\nt", "at most what was asked for");
        // A reader that fell behind the kept bytes skips to them, told how many it lost.
        let big = vec![b'x'; RUNNING_KEPT_BYTES + 100];
        tail.push(&big);
        let behind = tail.since(8, usize::MAX);
        assert_eq!(behind.skipped, 100, "the bytes from offset 8 to the first one kept");
        assert_eq!((behind.from, behind.bytes.len()), (108, RUNNING_KEPT_BYTES));
        assert_eq!(behind.total, 8 + big.len() as u64);
        // Pollers are still shown only the last bytes.
        let (shown, total) = tail.read();
        assert_eq!((shown.len(), total), (RUNNING_TAIL_BYTES, behind.total));
    }

    #[test]
    fn symlinks_may_point_inside_but_never_out() {
        let (_d, root) = setup();
        let wt = worktree_of(&root);
        let escapes = format!("escapes sandbox {:?}", wt.dir.display().to_string());
        assert_eq!(call(&wt, "read", json!({"path": "inner/a.txt"})).unwrap()["content"], "hello\n");
        assert_eq!(refused(&wt, "read", json!({"path": "out"})), format!("read out: path \"out\" {escapes}"));
        assert!(refused(&wt, "read", json!({"path": "../secret"})).contains("has a \"..\" segment"));
        assert!(refused(&wt, "read", json!({"path": "/etc/hosts"})).contains("must be relative"));
        assert!(refused(&wt, "read", json!({"path": "-rf"})).contains("no leading \"-\""));
        assert!(refused(&wt, "write", json!({"path": "a\0b", "content": ""})).contains("must be relative"));
        let why = refused(&wt, "write", json!({"path": "missing/../../secret", "content": "x"}));
        assert!(why.contains("has a \"..\" segment"), "a \"..\" after a missing segment: {why}");
        call(&wt, "write", json!({"path": "new/dir/f.txt", "content": "f"})).unwrap();
        assert_eq!(std::fs::read_to_string(wt.dir.join("new/dir/f.txt")).unwrap(), "f");
        call(&wt, "write", json!({"path": "src/new.txt/", "content": "n"})).unwrap();
        assert_eq!(std::fs::read_to_string(wt.dir.join("src/new.txt")).unwrap(), "n");
        assert_eq!(
            refused(&wt, "read", json!({"path": "src/nothing"})),
            "read src/nothing: path \"src/nothing\" does not exist"
        );
        assert_eq!(refused(&wt, "read", json!({"path": "src"})), "read src: is a directory");
        assert_eq!(std::fs::read_to_string(root.join("secret")).unwrap(), "outside");
    }

    #[tokio::test]
    async fn git_is_read_only_in_any_spelling() {
        let (_d, root) = setup();
        let w = Worktrees { root: Some(root.clone()), tool: "t".into(), ..Default::default() };
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
        let w = Worktrees { root: Some(root.clone()), tool: "t".into(), ..Default::default() };
        let edit = |old: &str| json!({"op": "edit", "path": "src/a.txt", "old_text": old, "new_text": "bye"});
        assert_eq!(w.run("ep", WRITE, &edit("hello")).await.unwrap()["ok"], true);
        assert_eq!(std::fs::read_to_string(root.join("ep/src/a.txt")).unwrap(), "bye\n");
        let out = w.run("ep", WRITE, &edit("hello")).await.unwrap();
        assert_eq!(out["refused"], "old_text not found — the file may have changed; read it again");
    }

    #[test]
    fn past_the_quota_a_write_or_edit_refuses_and_makes_nothing_while_shrinking_is_allowed() {
        let (_dir, root) = setup();
        let wt = Worktree { quotas: std::sync::Arc::new(Quotas::new(1 << 20)), ..worktree_of(&root) };
        let kib = |n: usize| "x".repeat(n << 10);
        call(&wt, "write", json!({"path": "a.txt", "content": format!("start{}", kib(400))})).unwrap();
        call(&wt, "write", json!({"path": "c.txt", "content": kib(400)})).unwrap();
        let why = call(&wt, "write", json!({"path": "new/dir/b.txt", "content": kib(300)})).unwrap_err();
        assert!(why.contains("would grow past its quota of 1 MiB"), "{why}");
        assert!(!root.join("ep/new").exists(), "not even a parent directory was made");
        let why = call(&wt, "edit", json!({"path": "a.txt", "old_text": "start", "new_text": kib(300)})).unwrap_err();
        assert!(why.contains("past its quota"), "{why}");
        assert_eq!(std::fs::metadata(root.join("ep/a.txt")).unwrap().len(), (400 << 10) + 5, "the file is unchanged");
        call(&wt, "write", json!({"path": "c.txt", "content": "small"})).unwrap();
        call(&wt, "write", json!({"path": "new/dir/b.txt", "content": kib(300)})).unwrap();
    }

    #[test]
    fn a_sparse_file_emptied_by_a_write_gives_back_only_the_blocks_it_held() {
        let (_dir, root) = setup();
        let wt = Worktree { quotas: std::sync::Arc::new(Quotas::new(1 << 20)), ..worktree_of(&root) };
        call(&wt, "write", json!({"path": "real.txt", "content": "x".repeat(400 << 10)})).unwrap();
        // A file 100 MiB long that holds no block (as `truncate -s` makes).
        std::fs::File::create(root.join("ep/sparse")).unwrap().set_len(100 << 20).unwrap();
        call(&wt, "write", json!({"path": "sparse", "content": ""})).unwrap();
        let why = call(&wt, "write", json!({"path": "more.txt", "content": "x".repeat(700 << 10)})).unwrap_err();
        assert!(why.contains("past its quota"), "the 400 KiB written still count: {why}");
    }

    fn worktree_of(root: &Path) -> Worktree {
        Worktree { dir: root.join("ep"), policy_digest: String::new(), quotas: Default::default() }
    }

    /// One file tool call; a refusal is its text, success the output object.
    fn call(wt: &Worktree, op: &str, args: Value) -> Result<serde_json::Map<String, Value>, String> {
        let mut payload = args;
        payload["op"] = json!(op);
        let out = file_op(wt, op, &payload).expect("no handler failure");
        match out.get("refused") {
            Some(why) => Err(why.as_str().unwrap_or_default().to_string()),
            None => Ok(out),
        }
    }

    fn refused(wt: &Worktree, op: &str, args: Value) -> String {
        call(wt, op, args.clone()).err().unwrap_or_else(|| panic!("{op} {args} should be refused"))
    }

    /// Exchanges `a` and `b` (a directory and a symlink) atomically, over and
    /// over, until `stop`; returns how many exchanges it made.
    fn keep_exchanging(a: PathBuf, b: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
        use std::os::unix::ffi::OsStrExt;
        std::thread::spawn(move || {
            let a = std::ffi::CString::new(a.as_os_str().as_bytes()).unwrap();
            let b = std::ffi::CString::new(b.as_os_str().as_bytes()).unwrap();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: two NUL-terminated paths that outlive the call.
                let r = unsafe {
                    libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE)
                };
                n += u64::from(r == 0);
            }
            n
        })
    }

    #[test]
    fn a_parent_swapped_for_an_outside_symlink_mid_call_never_leaks_a_byte() {
        let (_d, root) = setup();
        let (wt, outside) = (worktree_of(&root), root.join("outside"));
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("f.txt"), "OUTSIDE\n").unwrap();
        std::fs::write(outside.join("leak-marker.txt"), "OUTSIDE\n").unwrap();
        std::fs::create_dir_all(wt.dir.join("d")).unwrap();
        std::fs::write(wt.dir.join("d/f.txt"), "inside\n").unwrap();
        std::os::unix::fs::symlink(&outside, wt.dir.join("swap")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = keep_exchanging(wt.dir.join("d"), wt.dir.join("swap"), stop.clone());
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        let mut calls = 0;
        while std::time::Instant::now() < deadline {
            if let Ok(out) = call(&wt, "read", json!({"path": "d/f.txt"})) {
                assert_eq!(out["content"], "inside\n", "read a byte from outside");
            }
            if let Ok(out) = call(&wt, "list", json!({"path": "d"})) {
                assert!(!out["entries"].to_string().contains("leak-marker"), "listed outside: {out:?}");
            }
            if let Ok(out) = call(&wt, "search", json!({"path": "d", "query": "OUTSIDE"})) {
                assert_eq!(out["matches"], json!([]), "searched outside");
            }
            let _ = call(&wt, "write", json!({"path": "d/w.txt", "content": "pwned\n"}));
            let _ = call(&wt, "write", json!({"path": "d/new/deeper.txt", "content": "pwned\n"}));
            let _ = call(&wt, "edit", json!({"path": "d/f.txt", "old_text": "OUTSIDE", "new_text": "pwned"}));
            calls += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert!(swaps > 1000 && calls > 100, "the race ran: {swaps} exchanges, {calls} rounds of calls");
        assert_eq!(names_in(&outside), ["f.txt", "leak-marker.txt"], "nothing was written outside");
        assert_eq!(std::fs::read_to_string(outside.join("f.txt")).unwrap(), "OUTSIDE\n");
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn links_out_of_the_worktree_are_refused_as_escapes() {
        let (_d, root) = setup();
        let wt = worktree_of(&root);
        let link = |target: &str, name: &str| std::os::unix::fs::symlink(target, wt.dir.join(name)).unwrap();
        link("/etc", "etc-link");
        link("..", "up");
        link("src/../..", "up-deep");
        link("/proc/self/root", "proc-root");
        link("/proc/self/cwd", "proc-cwd");
        link(&wt.dir.join("src").display().to_string(), "abs-inside");
        let escapes = format!("escapes sandbox {:?}", wt.dir.display().to_string());
        for path in [
            "etc-link/passwd",
            "out",
            "up/secret",
            "up-deep/secret",
            "proc-root/etc/passwd",
            "proc-cwd/Cargo.toml",
            "abs-inside/a.txt",
        ] {
            for op in ["read", "list", "search"] {
                let why = refused(&wt, op, json!({"path": path, "query": "x"}));
                assert!(why.contains(&escapes), "{op} {path}: {why}");
            }
            let why = refused(&wt, "write", json!({"path": path, "content": "pwned"}));
            assert!(why.contains(&escapes), "write {path}: {why}");
        }
        for dir in ["etc-link", "up", "proc-root", "abs-inside"] {
            let why = refused(&wt, "write", json!({"path": format!("{dir}/new/f.txt"), "content": "pwned"}));
            assert!(why.contains(&escapes), "write {dir}/new/f.txt: {why}");
        }
        assert_eq!(
            refused(&wt, "read", json!({"path": "../secret"})),
            "read ../secret: path \"../secret\" has a \"..\" segment"
        );
        assert_eq!(std::fs::read_to_string(root.join("secret")).unwrap(), "outside");
        assert!(!root.join("new").exists() && !Path::new("/etc/new").exists());
    }

    #[test]
    fn links_inside_the_worktree_still_work_for_every_tool() {
        let (_d, root) = setup();
        let wt = worktree_of(&root);
        std::os::unix::fs::symlink("src/a.txt", wt.dir.join("a-link")).unwrap();
        std::os::unix::fs::symlink("../src", wt.dir.join("src/self")).unwrap();
        assert_eq!(call(&wt, "read", json!({"path": "inner/a.txt"})).unwrap()["content"], "hello\n");
        assert_eq!(call(&wt, "read", json!({"path": "a-link"})).unwrap()["content"], "hello\n");
        assert_eq!(call(&wt, "read", json!({"path": "src/self/self/a.txt"})).unwrap()["content"], "hello\n");
        call(&wt, "write", json!({"path": "inner/new/b.txt", "content": "b\n"})).unwrap();
        assert_eq!(std::fs::read_to_string(wt.dir.join("src/new/b.txt")).unwrap(), "b\n");
        call(&wt, "edit", json!({"path": "a-link", "old_text": "hello", "new_text": "bye"})).unwrap();
        assert_eq!(std::fs::read_to_string(wt.dir.join("src/a.txt")).unwrap(), "bye\n");
        assert!(wt.dir.join("a-link").is_symlink(), "written through, not replaced");
        call(&wt, "write", json!({"path": "a-link", "content": "again\n"})).unwrap();
        assert_eq!(std::fs::read_to_string(wt.dir.join("src/a.txt")).unwrap(), "again\n");
        let listed = call(&wt, "list", json!({"path": "inner"})).unwrap();
        let paths: Vec<&str> =
            listed["entries"].as_array().unwrap().iter().filter_map(|e| e["path"].as_str()).collect();
        assert_eq!(paths, ["src/a.txt", "src/new", "src/self"], "named by where they are");
        let found = call(&wt, "search", json!({"path": "inner", "query": "again"})).unwrap();
        assert_eq!(found["matches"], json!([{"path": "src/a.txt", "line": 1, "text": "again"}]));
    }

    #[test]
    fn no_link_lets_a_write_or_edit_reach_a_git_directory_at_any_depth() {
        let (_d, root) = setup();
        let wt = worktree_of(&root);
        for dir in [".git/hooks", "sub/.git", "a/b/.GIT"] {
            std::fs::create_dir_all(wt.dir.join(dir)).unwrap();
        }
        std::fs::write(wt.dir.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(wt.dir.join("sub/.git/config"), "[core]\n").unwrap();
        std::fs::write(wt.dir.join("sub/.git/HEAD"), "ref: main\n").unwrap();
        let link = |target: &str, name: &str| std::os::unix::fs::symlink(target, wt.dir.join(name)).unwrap();
        link(".git", "git-link");
        link(".git/config", "config-link");
        link(".git/hooks/pre-commit", "hook-link");
        link("sub/.git", "sub-git-link");
        link("sub/.git/HEAD", "sub-head-link");
        link("a/b/.GIT", "deep-git-link");
        link("../.git", "src/up-git");
        let git = ".git/ is read-only to World's tools";
        for path in [
            "git-link/config",
            "git-link/hooks/new",
            "git-link/newdir/f",
            "config-link",
            "hook-link",
            "sub/.git/config",
            "sub/.GIT/new",
            "a/b/.GIT/config",
            "sub-git-link/config",
            "sub-git-link/newdir/f",
            "sub-head-link",
            "deep-git-link/x",
            "src/up-git/config",
            "inner/up-git/newdir/f",
        ] {
            let why = refused(&wt, "write", json!({"path": path, "content": "pwned"}));
            assert!(why.contains(git), "write {path}: {why}");
            // An edit makes no directory: a missing one is just missing.
            let why = refused(&wt, "edit", json!({"path": path, "old_text": "core", "new_text": "pwned"}));
            assert!(
                why.contains(git) || path.contains("newdir/") && why.contains("(os error 2)"),
                "edit {path}: {why}"
            );
        }
        assert_eq!(std::fs::read_to_string(wt.dir.join(".git/config")).unwrap(), "[core]\n");
        assert_eq!(std::fs::read_to_string(wt.dir.join("sub/.git/config")).unwrap(), "[core]\n");
        assert_eq!(std::fs::read_to_string(wt.dir.join("sub/.git/HEAD")).unwrap(), "ref: main\n");
        assert_eq!(names_in(&wt.dir.join(".git")), ["config", "hooks"]);
        assert!(names_in(&wt.dir.join(".git/hooks")).is_empty());
        assert_eq!(names_in(&wt.dir.join("sub/.git")), ["HEAD", "config"]);
        assert!(names_in(&wt.dir.join("a/b/.GIT")).is_empty());
        assert_eq!(call(&wt, "read", json!({"path": "sub-head-link"})).unwrap()["content"], "ref: main\n");
    }

    #[test]
    fn a_fifo_in_the_worktree_neither_blocks_a_read_nor_a_search() {
        let (_d, root) = setup();
        let wt = worktree_of(&root);
        nix::unistd::mkfifo(&wt.dir.join("src/pipe"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let wt2 = wt.clone();
        std::thread::spawn(move || {
            let read = refused(&wt2, "read", json!({"path": "src/pipe"}));
            let found = call(&wt2, "search", json!({"path": ".", "query": "hello"})).unwrap();
            let written = refused(&wt2, "write", json!({"path": "src/pipe", "content": "x"}));
            let _ = tx.send((read, found, written));
        });
        let (read, found, written) = rx.recv_timeout(Duration::from_secs(10)).expect("the tools did not block");
        assert_eq!(read, "read src/pipe: is not a regular file");
        assert_eq!(found["matches"], json!([{"path": "src/a.txt", "line": 1, "text": "hello"}]));
        assert!(written.starts_with("write src/pipe: "), "{written}");
    }

    /// Runs `f` on a thread whose `openat2` fails with ENOSYS, as on a kernel without it.
    fn without_openat2<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
        std::thread::spawn(move || {
            let rules = [(libc::SYS_openat2, vec![])].into_iter().collect();
            let enosys = SeccompAction::Errno(libc::ENOSYS as u32);
            let filter = SeccompFilter::new(rules, SeccompAction::Allow, enosys, TargetArch::x86_64).unwrap();
            let program: BpfProgram = filter.try_into().unwrap();
            // SAFETY: a plain prctl on this thread; it only forbids gaining privileges.
            assert_eq!(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }, 0);
            seccompiler::apply_filter(&program).unwrap();
            f()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn without_openat2_every_file_tool_refuses_and_nothing_falls_back() {
        let (_d, root) = setup();
        let wt = worktree_of(&root);
        let answers = without_openat2(move || {
            let calls = [
                ("read", json!({"path": "src/a.txt"})),
                ("write", json!({"path": "src/a.txt", "content": "x"})),
                ("write", json!({"path": "new/f.txt", "content": "x"})),
                ("edit", json!({"path": "src/a.txt", "old_text": "hello", "new_text": "x"})),
                ("list", json!({"path": "src"})),
                ("search", json!({"path": ".", "query": "hello"})),
            ];
            calls.map(|(op, args)| refused(&wt, op, args))
        });
        for why in answers {
            assert!(
                why.ends_with(": this kernel has no openat2 (Linux 5.6 or later), so the file tools open nothing"),
                "{why}"
            );
        }
        assert_eq!(std::fs::read_to_string(root.join("ep/src/a.txt")).unwrap(), "hello\n");
        assert!(!root.join("ep/new").exists());
    }

    #[test]
    fn an_episode_without_a_real_directory_has_no_handlers() {
        let (_d, root) = setup();
        std::os::unix::fs::symlink(root.join("ep"), root.join("alias")).unwrap();
        let w = Worktrees { root: Some(root), tool: "t".into(), ..Default::default() };
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
