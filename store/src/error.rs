//! Typed errors of the store: one enum per kind of call.

use crate::model::TaskState;
use crate::refs::Ref;
use crate::rows::Corruption;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "another process already holds writer authority for this store (lock file {lock}); one writer per store is enforced"
    )]
    Locked { lock: PathBuf },
    #[error("store {path} does not exist")]
    Missing { path: PathBuf },
    #[error("cannot open store {path}: {detail}")]
    Engine { path: PathBuf, detail: String },
    #[error(
        "store {path} has format {found}; this binary reads format {expected}; refusing to touch it (carry it over with `worldd export` from the binary that wrote it and `worldd import` with this one)"
    )]
    Format { path: PathBuf, found: u64, expected: u64 },
    #[error(
        "store {path} has format {found}, older than this binary's format {expected}; open it once with a writer (worldd serve) to upgrade it in place"
    )]
    NeedsUpgrade { path: PathBuf, found: u64, expected: u64 },
    #[error("store {path} was not closed cleanly and needs recovery; open it once with a writer (worldd serve)")]
    NeedsRecovery { path: PathBuf },
    #[error("store {path}: {source}")]
    Corrupt { path: PathBuf, source: Corruption },
    /// The PostgreSQL store (its address without the password) could not be
    /// reached or refused this node.
    #[error("cannot open store {url}: {detail}")]
    Database { url: String, detail: String },
}

/// A read failed: the engine failed, or a row did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Corrupt(#[from] Corruption),
    #[error("storage engine: {0}")]
    Storage(String),
}

/// A write request was refused (its own checks failed) or could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("observed head {} is not the selected head {}", opt(.observed), opt(.selected))]
    HeadConflict { observed: Option<Ref>, selected: Option<Ref> },
    #[error("object hash {claimed} does not match its payload, which hashes to {actual}")]
    HashMismatch { claimed: Ref, actual: Ref },
    #[error("object payload of {size} bytes exceeds the limit of {max} bytes")]
    ObjectTooLarge { size: usize, max: usize },
    #[error("{0}")]
    InvalidCommit(String),
    #[error("invocation id {0} was already used for a different commit")]
    RestIdReused(String),
    #[error("no world is selected; commit a genesis world first")]
    NoWorld,
    #[error("transition {id} is no longer the registered one")]
    TransitionChanged { id: String },
    #[error("task {invocation_id} is {} and cannot be changed", .state.map(|s| s.as_str()).unwrap_or("absent"))]
    TaskNotStarted { invocation_id: String, state: Option<TaskState> },
    #[error("effect {invocation_id}#{ordinal} already has an intent")]
    IntentExists { invocation_id: String, ordinal: u32 },
    #[error("effect {invocation_id}#{ordinal} has no intent")]
    NoIntent { invocation_id: String, ordinal: u32 },
    #[error("effect {invocation_id}#{ordinal} already has an outcome")]
    OutcomeExists { invocation_id: String, ordinal: u32 },
    #[error("budget exhausted: {remaining} unit(s) remain")]
    BudgetExhausted { remaining: u64 },
    #[error("registry head {name} is {}, not the expected {}", opt(.actual), opt(.expected))]
    RegistryConflict { name: String, expected: Option<Ref>, actual: Option<Ref> },
    #[error("task {} already exists ({})", .0.request_digest, .0.state.as_str())]
    TaskExists(Box<crate::model::Task>),
    #[error("not applied: an earlier step of its sequence was refused")]
    Skipped,
    #[error("session credential already exists")]
    SessionExists,
    #[error("no approval {0}")]
    NoApproval(String),
    /// The approval cannot take this step: decided already, expired, used,
    /// or bound to another request or episode.
    #[error("approval {id} is {state}: {why}")]
    ApprovalRefused { id: String, state: &'static str, why: String },
    /// A person's word came after the approval expired: nobody decided it
    /// in time, and nothing runs under it.
    #[error("approval {id} expired at {expired_at} (unix seconds) before anyone decided")]
    ApprovalExpired { id: String, expired_at: u64 },
    /// Too many approvals are open: nobody could be asked.
    #[error("{0} approvals are open, the most a store keeps; decide some first")]
    ApprovalsFull(u64),
    /// This episode's sessions hold as many open approvals as one episode may.
    #[error("this episode holds {0} open approvals, the most one episode may; decide some first")]
    EpisodeApprovalsFull(u64),
    /// This session holds as many open approvals as one session may.
    #[error("this session holds {0} open approvals, the most one session may; decide some first")]
    SessionApprovalsFull(u64),
    #[error("the write queue is full ({0} requests waiting)")]
    Overloaded(usize),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("storage engine: {0}")]
    Storage(String),
    /// The disk is full: nothing of the request was written; writes resume
    /// by themselves once space returns.
    #[error("{0}")]
    OutOfSpace(String),
    /// Another node ran the episode's effects for the whole bounded wait:
    /// nothing of the call ran.
    #[error("episode {episode}'s effects are running on another node; waited {waited_ms} ms")]
    EpisodeBusy { episode: String, waited_ms: u64 },
    #[error("the store writer has stopped: {0}")]
    WriterStopped(String),
    /// The database cannot be reached: nothing of the request was written;
    /// writes resume by themselves once it is back.
    #[error("the store's database is unavailable: {0}")]
    Unavailable(String),
    /// The connection was lost while the database committed: the request may
    /// or may not have been written. Resending the same task id answers which.
    #[error(
        "outcome not confirmed: the connection to the store's database was lost during its commit ({0}); resend the same task id"
    )]
    Unconfirmed(String),
}

fn opt(r: &Option<Ref>) -> String {
    r.map(|r| r.to_string()).unwrap_or_else(|| "(none)".into())
}

pub(crate) fn storage<E: std::fmt::Display>(e: E) -> WriteError {
    WriteError::Storage(e.to_string())
}

pub(crate) fn read_storage<E: std::fmt::Display>(e: E) -> ReadError {
    ReadError::Storage(e.to_string())
}

/// The engine may panic on a damaged file; that is a reported failure, not a crash.
pub(crate) fn guard_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        format!("storage engine panicked: {msg}")
    })
}
