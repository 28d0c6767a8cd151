//! The named write transactions as plain data: each request (`Op`) and its
//! reply (`Reply`, or a typed `WriteError`: a refusal is a value). `apply`
//! holds their checks and derivations, once for every engine; `episodes` how
//! calls move the episode index; `redb` is the embedded engine's rows.

mod apply;
mod approvals;
pub(crate) mod episodes;
pub(crate) mod record;
mod redb;

pub(crate) use apply::{Append, Pending, R, Rows, apply, chain, import, recover};
pub(crate) use approvals::ApprovalRows;
pub use approvals::{APPROVAL_DECISION, APPROVALS_PROVENANCE, DecisionOf, Lapse};
pub(crate) use redb::{
    Kept, W, hash_object_rows, index_episodes, index_places, index_records_by_place, index_referrers_by_place,
    key_tasks_by_id, move_payloads_to_file, referrers_all_indexed,
};

use crate::canonical;
use crate::error::WriteError;
use crate::model::*;
use crate::refs::Ref;

/// Largest object payload the store accepts.
pub const OBJECT_PAYLOAD_MAX: usize = 64 << 20;
/// Longest `writtenBy`, semantic id or provenance string.
pub const LABEL_MAX: usize = 512;
/// Approvals open at once (pending, or approved and not yet used) in a store:
/// past it a grant that asks is denied as having no approver to ask. An
/// approval past its expiry holds no room (see `APPROVALS_EXPIRED_PER_PASS`).
pub const APPROVALS_OPEN_MAX: u64 = 1024;
/// Approvals one episode may hold open at once, across its sessions: one
/// episode's agents fill a quarter of the store's room at most.
pub const APPROVALS_OPEN_PER_EPISODE_MAX: u64 = 256;
/// Approvals one session may hold open at once: an agent asking again and
/// again, and never coming back, fills its own share and not the store's.
pub const APPROVALS_OPEN_PER_SESSION_MAX: u64 = 64;
/// Approvals past their expiry that one pass closes (`Op::ExpireApprovals`,
/// or an ask that found a bound full): each pending one is decided by the
/// clock, with its decision object, so a pass's writes stay bounded.
pub const APPROVALS_EXPIRED_PER_PASS: usize = 64;
/// Longest secret name and value.
pub const SECRET_NAME_MAX: usize = 64;
pub const SECRET_BYTES_MAX: usize = 1024;
/// Longest approval id.
pub const APPROVAL_ID_MAX: usize = 64;
/// Longest task id an approval's waiting task may have (A2A's own bound).
pub const APPROVAL_TASK_ID_MAX: usize = 128;

/// A REST commit: compare-and-append on the selected head.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RestCommit {
    pub invocation_id: Option<String>,
    /// Digest of the request, compared when a `rest:` id is resent.
    pub request_digest: Ref,
    pub observed_head: Option<Ref>,
    pub objects: Vec<NewObject>,
    pub next_world: World,
    pub entry: LogEntry,
    /// What the commit pays and who made it; a REST commit through the daemon
    /// always carries one (frames and callers written before read as none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charge: Option<Box<CommitCharge>>,
}

/// What a REST commit pays under the grant that names it, and who made it:
/// written in the commit's own transaction (the debit, and one journal item
/// keyed by the entry, its intent and outcome both naming `record`), so a
/// commit is paid exactly once and a refused one not at all.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct CommitCharge {
    /// The committing session's credential id (never its token).
    pub credential: Ref,
    pub episode: String,
    pub effect: String,
    pub scope: String,
    pub cost: u64,
    /// The grant's budget; what remains is this minus the durable spend.
    pub grant_budget: u64,
    /// The commit's record (`world/commit-record/v1`): the entry, its world and
    /// who committed it, as the daemon saw them.
    pub record: NewObject,
    pub at: u64,
}

impl RestCommit {
    /// The commit appending one entry onto `head` (or the genesis when there is
    /// none): the entry names `transition` as its transitionRef, the new world
    /// has `state_root`, and index, previous hash, entry hash and world ref are
    /// derived as the kernel checks them. The request digest is the digest of
    /// the entry preimage.
    pub fn next(
        head: Option<&World>,
        transition: NewObject,
        state_root: Ref,
        transition_fn: Ref,
        interpreter: Ref,
        semantics_epoch: u64,
        written_by: &str,
    ) -> Self {
        let (entry_index, prev_entry_hash) =
            head.map(|w| (w.revision + 1, w.log_head)).unwrap_or((0, Ref::of(b"genesis")));
        let header = EntryHeader {
            entry_index,
            semantics_epoch,
            transition_fn,
            interpreter,
            prev_entry_hash,
            written_by: written_by.to_string(),
        };
        let entry_hash = canonical::entry_hash(&header, &transition.hash);
        let next_world = World {
            world_ref: canonical::world_ref(entry_index, &state_root, &entry_hash),
            revision: entry_index,
            state_root,
            log_head: entry_hash,
        };
        RestCommit {
            invocation_id: None,
            request_digest: Ref::of(&canonical::entry_preimage(&header, &transition.hash)),
            observed_head: head.map(|w| w.world_ref),
            entry: LogEntry { header, entry_hash, transition_ref: transition.hash },
            next_world,
            objects: vec![transition],
            charge: None,
        }
    }

    /// The genesis commit of `goal`: entry 0 naming it as its transitionRef and
    /// world 0 with it as state root.
    pub fn genesis(
        goal: NewObject,
        transition_fn: Ref,
        interpreter: Ref,
        semantics_epoch: u64,
        written_by: &str,
    ) -> Self {
        let state_root = goal.hash;
        RestCommit::next(None, goal, state_root, transition_fn, interpreter, semantics_epoch, written_by)
    }
}

/// Everything a coordinator invocation commits. The writer assigns the entry
/// index and previous hash from the head it finds (rebasing).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct InvocationCommit {
    pub task: TaskKey,
    pub objects: Vec<NewObject>,
    pub registry: String,
    pub transition_id: String,
    pub transition_fn: Ref,
    pub interpreter: Ref,
    pub semantics_epoch: u64,
    pub written_by: String,
    /// The invocation record.
    pub transition_ref: Ref,
    /// The invocation output: the new world's state root.
    pub state_root: Ref,
    /// Every planned effect and how it ended, in plan order (the episode view).
    #[serde(default)]
    pub effects: Vec<CallEffect>,
    /// When the call ended.
    #[serde(default)]
    pub at: u64,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct IntentRequest {
    pub task: TaskKey,
    pub ordinal: u32,
    pub effect_id: String,
    pub effect: String,
    pub scope: String,
    pub cost: u64,
    /// The grant's budget; the remaining budget is this minus the durable spend.
    pub grant_budget: u64,
    pub request: NewObject,
    pub at: u64,
    /// The approval this effect runs under (a grant that asks); the intent
    /// uses it up, so it serves once (or, for the session, while it lasts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalUse>,
    /// The session whose grant decided it (kept in the intent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<Ref>,
}

/// The approval an intent names, and the request digest it must bind.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApprovalUse {
    pub id: String,
    pub digest: Ref,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct OutcomeRequest {
    pub task: TaskKey,
    pub ordinal: u32,
    pub status: OutcomeStatus,
    pub record: NewObject,
    pub result: Option<NewObject>,
    pub at: u64,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RegistryPublish {
    pub name: String,
    pub expected: Option<Ref>,
    pub head: Ref,
    pub objects: Vec<NewObject>,
    /// `(transition id, transitionFn)` of every descriptor of the new revision.
    pub entries: Vec<(String, Ref)>,
}

/// The checks every object a request carries must pass.
pub(crate) fn check_objects(objects: &[NewObject]) -> R<()> {
    for o in objects {
        if o.payload.len() > OBJECT_PAYLOAD_MAX {
            return Err(WriteError::ObjectTooLarge { size: o.payload.len(), max: OBJECT_PAYLOAD_MAX });
        }
        let actual = Ref::of(&o.payload);
        if actual != o.hash {
            return Err(WriteError::HashMismatch { claimed: o.hash, actual });
        }
        if o.semantic_id.is_empty() || o.semantic_id.len() > LABEL_MAX || o.provenance.len() > LABEL_MAX {
            return Err(WriteError::InvalidCommit(format!(
                "object {}: semanticId must be 1-{LABEL_MAX} bytes and provenance at most {LABEL_MAX}",
                o.hash
            )));
        }
    }
    Ok(())
}

impl Op {
    /// Whether this request writes only a call's own rows (its task, intents,
    /// outcomes, objects, entry, episode rows), of a call whose task id the
    /// daemon named (MCP's): rows no glance reads (`WorldStore::glance` reads
    /// sessions, the registry and whether a world is selected), and that no
    /// admission looks up (an A2A client names its task ids, and a resend is
    /// answered from the row), so the writer may answer it before readers
    /// see it (`writer::HOLD_MAX`). Sessions, registries, approvals, REST
    /// commits, cancels and A2A calls are seen by every read that begins
    /// after their answer.
    pub fn is_a_calls_own(&self) -> bool {
        let named_by_the_daemon = |task: &TaskKey| task.surface == Surface::Mcp;
        match self {
            Op::BeginTask { task, .. }
            | Op::CreateTask { task, .. }
            | Op::EndTask { task, .. }
            | Op::TaskProgress { task, .. } => named_by_the_daemon(task),
            Op::RecordIntent(r) => named_by_the_daemon(&r.task),
            Op::RecordOutcome(r) => named_by_the_daemon(&r.task),
            Op::CommitInvocation(c) => named_by_the_daemon(&c.task),
            Op::Sequence(ops) => ops.iter().all(Op::is_a_calls_own),
            _ => false,
        }
    }
}

/// One request to the writer.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Op {
    PutObjects(Vec<NewObject>),
    RestIntent {
        invocation_id: String,
        request_digest: Ref,
    },
    CommitWorld(RestCommit),
    BeginTask {
        task: TaskKey,
        request_digest: Ref,
        at: u64,
        /// The transition the call runs.
        #[serde(default)]
        transition: String,
        /// The A2A `contextId` and `messageId` the call was sent with, kept
        /// in its row (frames written before them read as none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    RecordIntent(IntentRequest),
    RecordOutcome(OutcomeRequest),
    CommitInvocation(InvocationCommit),
    EndTask {
        task: TaskKey,
        state: TaskState,
        /// When the call ended.
        #[serde(default)]
        at: u64,
    },
    /// Like `BeginTask`, but an existing row is a refusal (`TaskExists`), so a
    /// sequence stops there.
    CreateTask {
        task: TaskKey,
        request_digest: Ref,
        at: u64,
        #[serde(default)]
        transition: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// Set for a call its client follows as a task.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run: Option<TaskRun>,
    },
    /// Asks that a task's command stop (`Reply::Cancel`, every answer a
    /// value): kept in its row, so whichever node runs it sees the ask.
    CancelTask {
        task: TaskKey,
        at: u64,
    },
    /// How far a started task's command has got, kept in its row for the
    /// other nodes; a task that ended (or is no task) keeps none (`Done`).
    TaskProgress {
        task: TaskKey,
        progress: TaskProgress,
    },
    /// Several requests applied in order within one durable batch, each with
    /// its own checks; the first refusal stops the rest (`Skipped`). Earlier
    /// steps stay applied: a sequence shares an fsync, not atomicity.
    Sequence(Vec<Op>),
    MintSession {
        credential_id: Ref,
        session: Session,
    },
    /// Removes a session; its open approvals close with it (a pending one
    /// decided expired at `at`: nothing can run under it any more).
    RevokeSession {
        credential_id: Ref,
        #[serde(default)]
        at: u64,
    },
    PublishRegistry(RegistryPublish),
    /// Asks for a person's yes: the open approval of `(credential, digest)`
    /// if there is one, else this new pending one (with the object it shows).
    AskApproval {
        id: String,
        approval: ApprovalRow,
        shown: NewObject,
    },
    /// Decides a pending approval (approved, denied, or expired by the clock).
    DecideApproval {
        id: String,
        decision: ApprovalDecision,
    },
    /// Closes an open approval that serves nobody at `at` (denied, expired,
    /// or past its expiry, when a pending one is decided expired by the
    /// clock): the next identical request asks afresh.
    CloseApproval {
        id: String,
        at: u64,
    },
    /// Closes up to `APPROVALS_EXPIRED_PER_PASS` open approvals past their
    /// expiry at `at`, as `CloseApproval` would each.
    ExpireApprovals {
        at: u64,
    },
    /// The store's secret `name`, made `value` if it has none yet (so every
    /// node of a shared store agrees on it). Never exported.
    EnsureSecret {
        name: String,
        #[serde(with = "crate::model::serde_bytes_vec")]
        value: Vec<u8>,
    },
}

impl Op {
    /// `BeginTask` of a call that tells nothing but its key, digest and start.
    pub fn begin_task(task: TaskKey, request_digest: Ref, at: u64) -> Op {
        Op::BeginTask { task, request_digest, at, transition: String::new(), context: None, message_id: None }
    }

    /// `CreateTask` of a call that tells nothing but its key, digest and start.
    pub fn create_task(task: TaskKey, request_digest: Ref, at: u64) -> Op {
        Op::CreateTask {
            task,
            request_digest,
            at,
            transition: String::new(),
            context: None,
            message_id: None,
            run: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestIntentOutcome {
    /// Journaled (or already journaled by an earlier attempt): go on and commit.
    Journaled,
    /// This id already committed this request.
    Resolved(Ref),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BeginOutcome {
    Started,
    /// The task id exists; the caller compares digests and states.
    Existing(Box<Task>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Debit {
    pub budget_before: u64,
    pub budget_after: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishOutcome {
    Moved,
    Unchanged,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Done,
    RestIntent(RestIntentOutcome),
    Selected(Ref),
    Begun(BeginOutcome),
    Debited(Debit),
    Committed(Committed),
    Revoked(bool),
    Published(PublishOutcome),
    /// An approval as it now stands, with its id.
    Approval(String, Box<ApprovalRow>),
    /// A secret's value.
    Secret(Vec<u8>),
    /// The approvals a pass closed, by id.
    ApprovalsClosed(Vec<String>),
    /// What an ask to cancel a task came to.
    Cancel(CancelAsk),
    Sequence(Vec<Result<Reply, WriteError>>),
}

/// What recovery changed at open; empty after a clean shutdown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub indeterminate_effects: Vec<String>,
    pub tasks: Vec<(String, TaskState)>,
}

impl RecoveryReport {
    pub fn is_empty(&self) -> bool {
        self.indeterminate_effects.is_empty() && self.tasks.is_empty()
    }
}
