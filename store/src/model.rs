//! The store's domain values. Rows are these values encoded by `rows`; the wire
//! shapes (camelCase JSON) come from the same derives.

use crate::refs::Ref;
use crate::tables::{REFERRER_ENTRY, REFERRER_OBJECT, REFERRER_WORLD};
use serde::{Deserialize, Serialize};

/// Metadata of an immutable object. The payload lives in its own table so that
/// metadata reads never load it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    pub interface_hash: Ref,
    pub semantic_id: String,
    pub provenance: String,
    pub size: u64,
}

/// The `object_rows` row: the object's ref, its metadata, its sequence
/// number, and where its `size` payload bytes start in the payload file. It
/// decodes as an `ObjectMeta` too (the extra fields are ignored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRow {
    /// sha256 of the payload: which object the row's number is (up to
    /// format 11 a row of its own, `tables::FORMAT11_OBJECT_SEQ`).
    pub hash: Ref,
    pub interface_hash: Ref,
    pub semantic_id: String,
    pub provenance: String,
    pub size: u64,
    pub seq: u64,
    /// Absent in format 7's rows (their payloads were rows of their own),
    /// which the upgrade rewrites; `verify` checks each row starts where
    /// the one before it ends.
    #[serde(default)]
    pub at: u64,
}

impl ObjectRow {
    pub fn meta(self) -> ObjectMeta {
        ObjectMeta {
            interface_hash: self.interface_hash,
            semantic_id: self.semantic_id,
            provenance: self.provenance,
            size: self.size,
        }
    }
}

/// An object offered for writing. `hash` is what the writer claims; the store
/// rehashes `payload` and refuses a mismatch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewObject {
    pub hash: Ref,
    pub interface_hash: Ref,
    pub semantic_id: String,
    pub provenance: String,
    #[serde(with = "serde_bytes_vec")]
    pub payload: Vec<u8>,
}

impl NewObject {
    /// An object whose hash and interface hash are derived here, the way the
    /// coordinator and broker write them (`interfaceHash = sha256(semanticId)`).
    pub fn derived(semantic_id: &str, provenance: &str, payload: Vec<u8>) -> NewObject {
        NewObject {
            hash: Ref::of(&payload),
            interface_hash: Ref::of(semantic_id.as_bytes()),
            semantic_id: semantic_id.to_string(),
            provenance: provenance.to_string(),
            payload,
        }
    }
}

/// The frozen six-field header of a log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryHeader {
    pub entry_index: u64,
    pub semantics_epoch: u64,
    pub transition_fn: Ref,
    pub interpreter: Ref,
    pub prev_entry_hash: Ref,
    pub written_by: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    pub header: EntryHeader,
    pub entry_hash: Ref,
    pub transition_ref: Ref,
}

/// An immutable world value. `ref` is recomputable from the other three fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct World {
    #[serde(rename = "ref")]
    pub world_ref: Ref,
    pub revision: u64,
    pub state_root: Ref,
    pub log_head: Ref,
}

/// One grant of a session: `EFFECT=SCOPE:BUDGET`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Grant {
    pub effect: String,
    pub scope: String,
    pub budget: u64,
    /// Who must say yes before each effect under this grant runs; none
    /// decides by name, scope, expiry and budget alone. Rows written before
    /// grants could ask read as none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<Approver>,
}

impl Grant {
    /// A grant that decides without asking anyone.
    pub fn new(effect: &str, scope: &str, budget: u64) -> Grant {
        Grant { effect: effect.to_string(), scope: scope.to_string(), budget, ask: None }
    }
}

/// Who may approve an effect under an asking grant.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approver {
    /// The agent's own client may ask its user in-band, or the operator decides.
    Anyone,
    /// Only the operator (the store's owner, through the admin socket or the store).
    Operator,
}

impl Approver {
    pub fn as_str(self) -> &'static str {
        match self {
            Approver::Anyone => "anyone",
            Approver::Operator => "operator",
        }
    }
}

/// Where an approval is in its life.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalState {
    /// Asked, not decided.
    Pending,
    Approved,
    Denied,
    /// Nobody decided before it expired (told to the call that found it so).
    Expired,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Expired => "expired",
        }
    }
}

/// One request for a person's yes, keyed by its approval id. It binds one
/// exact effect request of one session (`digest`), and is found again by
/// `(credential, digest)` while it is open.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRow {
    pub episode: String,
    /// The asking session's credential id.
    pub credential: Ref,
    /// Digest of what is approved: credential, transition, effect, scope,
    /// cost and the effect's canonical payload (never the request's time).
    pub digest: Ref,
    pub transition: String,
    pub effect: String,
    pub scope: String,
    pub cost: u64,
    pub approver: Approver,
    /// The `world/approval-request/v1` object: what a person is shown.
    pub shown: Ref,
    pub requested_at: u64,
    /// Pending: the decision must come before it; approved: the effect must
    /// run before it.
    pub expires_at: u64,
    pub state: ApprovalState,
    /// Approved for every identical request of the session, not just one.
    pub for_session: bool,
    /// The `world/approval/v1` object of the decision (or the expiry).
    pub decision: Option<Ref>,
    pub decided_at: u64,
    /// Effects run under it.
    pub uses: u64,
    /// No call finds it any more: used (once), or its denial or expiry told.
    pub closed: bool,
    /// The A2A task the question was asked on, which a continuation names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

impl ApprovalRow {
    /// Whether an effect may run under it at `now` (approved, unexpired, unused
    /// unless it is for the session).
    pub fn usable(&self, now: u64) -> bool {
        self.state == ApprovalState::Approved && now < self.expires_at && (self.for_session || self.uses == 0)
    }
}

/// A person's (or the clock's) word on a pending approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// `Approved`, `Denied` or `Expired`.
    pub state: ApprovalState,
    pub for_session: bool,
    /// The `world/approval/v1` object that records it.
    pub object: NewObject,
    pub at: u64,
    /// An approved effect must run before this.
    pub use_by: u64,
}

/// A session credential row, keyed by `sha256(token)`; the token itself is never stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub episode: String,
    pub grants: Vec<Grant>,
    pub created_at: u64,
    pub expires_at: u64,
}

impl Session {
    /// The grant that decides `effect` on `scope`: of those naming both, the
    /// largest budget, and one that asks at an equal budget (so a second grant
    /// of the same size never skips the asking).
    pub fn grant_for<'a>(grants: &'a [Grant], effect: &str, scope: &str) -> Option<&'a Grant> {
        let named = grants.iter().filter(|g| g.effect == effect && g.scope == scope);
        named.max_by_key(|g| (g.budget, g.ask.is_some()))
    }

    /// Live means `0 <= now < expiresAt`.
    pub fn is_live(&self, now: u64) -> bool {
        now < self.expires_at
    }
}

/// Which agent surface a task came in on; part of the task key and invocation id.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Surface {
    A2a,
    Mcp,
}

impl Surface {
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::A2a => "a2a",
            Surface::Mcp => "mcp",
        }
    }

    pub fn parse(s: &str) -> Option<Surface> {
        match s {
            "a2a" => Some(Surface::A2a),
            "mcp" => Some(Surface::Mcp),
            _ => None,
        }
    }
}

/// `(surface, episode, taskId)`: one row per task id, ever.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskKey {
    pub surface: Surface,
    pub episode: String,
    pub task_id: String,
}

impl TaskKey {
    /// `<surface>:<episode>:<taskId>`, the invocation id the journal is keyed by.
    pub fn invocation_id(&self) -> String {
        format!("{}:{}:{}", self.surface.as_str(), self.episode, self.task_id)
    }

    /// The id of a call the daemon names itself (MCP has no task ids): 16 hex
    /// digits of `moment` (a count that only rises, e.g. nanoseconds), then
    /// `random` in hex. Ids named later sort after earlier ones, so a task's
    /// row, intents and outcomes are inserted at the end of their episode's
    /// range, into the leaves its last calls wrote, instead of on a random
    /// leaf of tables that grow with every call; the random part keeps ids
    /// unguessable and unique across nodes.
    pub fn ordered_task_id(moment: u64, random: &[u8; 24]) -> String {
        format!("{moment:016x}{}", hex::encode(random))
    }

    /// Inverse of `invocation_id`. Episodes and task ids contain no `:`.
    pub fn from_invocation_id(id: &str) -> Option<TaskKey> {
        let mut parts = id.splitn(3, ':');
        let surface = Surface::parse(parts.next()?)?;
        let episode = parts.next()?.to_string();
        let task_id = parts.next()?.to_string();
        if episode.is_empty() || task_id.is_empty() || task_id.contains(':') {
            return None;
        }
        Some(TaskKey { surface, episode, task_id })
    }
}

/// Task states move only forward: `Started` to exactly one of the other three.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    Started,
    Committed,
    NotCommitted,
    Uncertain,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Started => "started",
            TaskState::Committed => "committed",
            TaskState::NotCommitted => "not-committed",
            TaskState::Uncertain => "uncertain",
        }
    }
}

/// What a committed task produced, enough to answer a resend without running anything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Committed {
    pub entry_index: u64,
    pub entry_hash: Ref,
    pub world_ref: Ref,
    pub output_ref: Ref,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub request_digest: Ref,
    pub state: TaskState,
    pub started_at: u64,
    pub committed: Option<Committed>,
    /// Effect records journaled for this task, named when it ends uncertain.
    pub effect_records: Vec<Ref>,
    /// The transition the call ran (empty on rows written before it was kept).
    #[serde(default)]
    pub transition: String,
    /// When the task left `started`.
    #[serde(default)]
    pub ended_at: Option<u64>,
    /// The call's effects as the episode view tells them, set when it ends.
    #[serde(default)]
    pub effects: Vec<CallEffect>,
    /// The A2A `contextId` the call was sent with (A2A calls that named one);
    /// absent from the encoded row when unset, as on rows written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The A2A `messageId` of the request (A2A 0.3 and 1.0 calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// A call admitted to run as a task its client follows (MCP Tasks, A2A
    /// `returnImmediately`), set when the row is written with its intent;
    /// absent on a call answered in its own request. (An intent the store
    /// then refuses, over budget, leaves it set on a call that was answered
    /// in its request: its client never had a task id.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<TaskRun>,
}

/// What a call run as a task keeps beside its row: its command's own
/// deadline, and the first ask to cancel it. Any node answers a poll from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRun {
    /// When the command is stopped if it has not ended, Unix seconds.
    pub deadline_at: u64,
    /// When a cancel was first asked, Unix seconds; the node running the
    /// command stops it once it sees this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_asked_at: Option<u64>,
    /// How far its command has got, as the node running it last wrote it
    /// for the others (a store several nodes share); dropped when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<TaskProgress>,
}

/// What a running command has written, for the nodes that do not run it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskProgress {
    /// When it was written, Unix seconds.
    pub at: u64,
    /// Every byte of output so far.
    pub output_bytes: u64,
    /// The last of it, at most `TASK_PROGRESS_TAIL_MAX` bytes of text.
    pub tail: String,
}

/// The most of a running command's output its task row keeps.
pub const TASK_PROGRESS_TAIL_MAX: usize = 2 << 10;

/// What an ask to cancel a task came to: every answer is a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CancelAsk {
    /// Asked now; the node running it stops its command.
    Asked,
    /// Asked before (at that time): nothing changed.
    AskedBefore(u64),
    /// The task already ended, in this state: too late to cancel.
    Ended(TaskState),
    /// The call is answered in its own request; it is not a task to cancel.
    NotARun,
    /// No such task.
    Unknown,
}

/// How one planned effect of a call ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EffectStatus {
    Ok,
    Failed,
    /// Refused by the broker; never debited.
    Denied,
    /// Not run: an earlier effect of the plan was denied or failed.
    Skipped,
    /// Recovery found the intent without an outcome.
    Indeterminate,
    /// Stopped by a cancel while it ran; debited, its record holds what
    /// output it had.
    Cancelled,
}

impl EffectStatus {
    pub const ALL: [EffectStatus; 6] = [
        EffectStatus::Ok,
        EffectStatus::Failed,
        EffectStatus::Denied,
        EffectStatus::Skipped,
        EffectStatus::Indeterminate,
        EffectStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EffectStatus::Ok => "ok",
            EffectStatus::Failed => "failed",
            EffectStatus::Denied => "denied",
            EffectStatus::Skipped => "skipped",
            EffectStatus::Indeterminate => "indeterminate",
            EffectStatus::Cancelled => "cancelled",
        }
    }
}

impl From<OutcomeStatus> for EffectStatus {
    fn from(s: OutcomeStatus) -> EffectStatus {
        match s {
            OutcomeStatus::Ok => EffectStatus::Ok,
            OutcomeStatus::Failed => EffectStatus::Failed,
            OutcomeStatus::Indeterminate => EffectStatus::Indeterminate,
            OutcomeStatus::Cancelled => EffectStatus::Cancelled,
        }
    }
}

/// One planned effect of a call: what it asked, how it ended, what it cost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallEffect {
    pub id: String,
    pub effect: String,
    pub scope: String,
    pub cost: u64,
    pub status: EffectStatus,
    /// The broker's label when denied (`denied:budget`, …).
    #[serde(default)]
    pub denial: Option<String>,
    pub budget_before: u64,
    pub budget_after: u64,
    /// Its effect record: none for a skipped effect, nor for one whose
    /// outcome was never recorded (recovery found only its intent).
    #[serde(default)]
    pub record: Option<Ref>,
    /// What it asked its handler (none for a skipped effect): what an
    /// effect without a record still tells.
    #[serde(default)]
    pub request: Option<Ref>,
}

impl CallEffect {
    /// An effect as the journal holds it (a denial travels only with a
    /// commit, so the journal holds none).
    pub fn journaled(item: &JournalItem) -> CallEffect {
        let i = &item.intent;
        let status = item.outcome.as_ref().map_or(EffectStatus::Indeterminate, |o| o.status.into());
        CallEffect {
            id: i.effect_id.clone(),
            effect: i.effect.clone(),
            scope: i.scope.clone(),
            cost: i.cost,
            status,
            denial: None,
            budget_before: i.budget_before,
            budget_after: i.budget_after,
            record: item.outcome.as_ref().and_then(|o| o.record_ref),
            request: Some(i.request_ref),
        }
    }

    /// Units this effect debited: a run effect's cost, nothing else.
    pub fn debited(&self) -> u64 {
        match self.status {
            EffectStatus::Ok | EffectStatus::Failed | EffectStatus::Indeterminate | EffectStatus::Cancelled => {
                self.cost
            }
            EffectStatus::Denied | EffectStatus::Skipped => 0,
        }
    }
}

/// Buckets in an episode's activity histogram (see `Activity`).
pub const ACTIVITY_BUCKETS: usize = 48;
/// The first bucket width, in seconds.
pub const ACTIVITY_WIDTH_MIN: u64 = 60;
/// Most distinct keys an episode's counters keep; the rest count under `other`.
pub const EPISODE_LABELS_MAX: usize = 64;

/// Calls over an episode's life in at most `ACTIVITY_BUCKETS` equal buckets
/// from `origin`: when a call falls past the last bucket, neighbours merge
/// and the width doubles. Bounded whatever the episode's length.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activity {
    pub origin: u64,
    pub width: u64,
    pub counts: Vec<u64>,
}

impl Activity {
    pub fn add(&mut self, at: u64) {
        if self.width == 0 {
            self.width = ACTIVITY_WIDTH_MIN;
            self.origin = at - at % ACTIVITY_WIDTH_MIN;
        }
        let mut i = (at.saturating_sub(self.origin) / self.width) as usize;
        while i >= ACTIVITY_BUCKETS {
            let merged = self.counts.chunks(2).map(|c| c.iter().sum()).collect();
            self.counts = merged;
            self.width = self.width.saturating_mul(2);
            i = (at.saturating_sub(self.origin) / self.width) as usize;
        }
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
    }
}

/// What an episode has done, summed by the writes that make it: kept by the
/// commit (both engines) so that a summary is one row, whatever its length.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpisodeRow {
    /// Tasks ever created; the next call's position in the episode.
    pub calls: u64,
    /// Calls by task state.
    pub states: std::collections::BTreeMap<String, u64>,
    /// Effects by status.
    pub effects: std::collections::BTreeMap<String, u64>,
    /// Denied effects by label.
    pub denials: std::collections::BTreeMap<String, u64>,
    pub first_at: u64,
    pub last_at: u64,
    /// Calls over time, by when they started.
    pub activity: Activity,
}

impl EpisodeRow {
    fn bump(map: &mut std::collections::BTreeMap<String, u64>, key: &str, by: i64) {
        let key = if map.contains_key(key) || map.len() < EPISODE_LABELS_MAX { key } else { "other" };
        let n = map.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add_signed(by);
        if *n == 0 {
            map.remove(key);
        }
    }

    /// A new task at `at`: its position is the count before it.
    pub fn created(&mut self, task: &Task) -> u64 {
        let seq = self.calls;
        self.calls += 1;
        // The earliest start, whichever call it was (nodes' clocks differ).
        self.first_at = if seq == 0 { task.started_at } else { self.first_at.min(task.started_at) };
        self.touch(task.started_at);
        self.activity.add(task.started_at);
        Self::bump(&mut self.states, task.state.as_str(), 1);
        if task.state != TaskState::Started {
            self.ended(task, false);
        }
        seq
    }

    /// A task left `started` (`moved`: it was counted as started until now).
    pub fn ended(&mut self, task: &Task, moved: bool) {
        if moved {
            Self::bump(&mut self.states, TaskState::Started.as_str(), -1);
            Self::bump(&mut self.states, task.state.as_str(), 1);
        }
        self.touch(task.ended_at.unwrap_or(task.started_at));
        for e in &task.effects {
            Self::bump(&mut self.effects, e.status.as_str(), 1);
            if let Some(label) = &e.denial {
                Self::bump(&mut self.denials, label, 1);
            }
        }
    }

    fn touch(&mut self, at: u64) {
        self.last_at = self.last_at.max(at);
    }
}

/// The journal key (invocation id) of the REST commit that made entry
/// `entry_index`: its intent and outcome (ordinal 0) live there. No agent
/// surface spells an invocation id this way.
pub fn commit_journal_id(entry_index: u64) -> String {
    format!("{COMMIT_JOURNAL_PREFIX}{entry_index}")
}

/// What every REST commit's journal key starts with.
pub const COMMIT_JOURNAL_PREFIX: &str = "rest-entry:";

/// Semantic ids only the daemon writes objects under (its invocation and
/// effect records, approvals, the registry and what it names, REST commit
/// records): a REST commit may not use them, and `verify` reports an object
/// under one that no row of the daemon's names.
pub const DAEMON_SEMANTIC_PREFIXES: [&str; 7] = [
    "world/invocation-",
    "world/effect-",
    "world/approval",
    "world/transition-registry/",
    "world/transition-source/",
    "world/interpreter",
    "world/commit-record/",
];

/// Author labels (an entry's `writtenBy`, an object's provenance) only the
/// daemon writes.
pub const DAEMON_AUTHOR_PREFIXES: [&str; 3] = ["coordinator:", "host/", "worldd/"];

/// Whether objects under `semantic_id` are the daemon's alone.
pub fn is_daemon_semantic_id(semantic_id: &str) -> bool {
    DAEMON_SEMANTIC_PREFIXES.iter().any(|p| semantic_id.starts_with(p))
}

/// Whether `label` claims to be the daemon as an author.
pub fn is_daemon_author(label: &str) -> bool {
    DAEMON_AUTHOR_PREFIXES.iter().any(|p| label.starts_with(p))
}

/// What the semantic ids of the daemon's effect records start with; each
/// is named by a journal outcome, a task or an invocation record the
/// daemon committed, and `verify` reports any other as `forged`.
pub const EFFECT_RECORD_PREFIX: &str = "world/effect-record/";
/// What the semantic ids of the daemon's invocation records start with;
/// each is the `transitionRef` of an entry a committed task names.
pub const INVOCATION_RECORD_PREFIX: &str = "world/invocation-record/";

/// The author of the genesis entry `worldd quickstart` commits straight
/// through the store, the one entry claiming the daemon that no row names.
pub const QUICKSTART_AUTHOR: &str = "worldd/quickstart";
/// That genesis entry's goal (its `transitionRef` and state root), as
/// canonical JSON, and its `transitionFn`'s bytes.
pub const QUICKSTART_GOAL: &[u8] = br#"{"createdBy":"worldd/quickstart","world":"genesis"}"#;
pub const QUICKSTART_TRANSITION: &[u8] = b"genesis";

/// Whether entry `index` is the genesis `worldd quickstart` commits: entry
/// 0 by `QUICKSTART_AUTHOR` carrying `QUICKSTART_GOAL`, so the very bytes
/// the daemon writes whoever wrote them, and no forgery of anything.
pub fn is_quickstart_genesis(index: u64, header: &EntryHeader, transition_ref: &Ref) -> bool {
    index == 0
        && header.written_by == QUICKSTART_AUTHOR
        && header.transition_fn == Ref::of(QUICKSTART_TRANSITION)
        && *transition_ref == Ref::of(QUICKSTART_GOAL)
}

/// Whether an entry claims the daemon as its author, so that a committed
/// task must name it (`verify` reports one none names as `forged`).
pub fn entry_claims_daemon(index: u64, header: &EntryHeader, transition_ref: &Ref) -> bool {
    is_daemon_author(&header.written_by) && !is_quickstart_genesis(index, header, transition_ref)
}

/// The durable intent of one effect: written, with its debit, before the handler runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectIntent {
    pub episode: String,
    pub effect_id: String,
    pub effect: String,
    pub scope: String,
    pub cost: u64,
    pub request_ref: Ref,
    pub budget_before: u64,
    pub budget_after: u64,
    pub at: u64,
    /// The session whose grant decided it, so that `verify` can tell an
    /// effect under a grant that asks (intents written before read as none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<Ref>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeStatus {
    /// The handler ran and returned a result (which may itself report `ok:false`).
    Ok,
    /// The handler failed; the debit stands.
    Failed,
    /// Nobody knows whether the effect happened (set by recovery after a crash).
    Indeterminate,
    /// The handler was stopped by a cancel; the debit stands, and its record
    /// holds what output it had.
    Cancelled,
}

impl OutcomeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeStatus::Ok => "ok",
            OutcomeStatus::Failed => "failed",
            OutcomeStatus::Indeterminate => "indeterminate",
            OutcomeStatus::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectOutcome {
    pub status: OutcomeStatus,
    pub record_ref: Option<Ref>,
    pub result_ref: Option<Ref>,
    pub at: u64,
}

/// The receipt of a `rest:` commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub request_digest: Ref,
    /// `None` while only the intent is journaled.
    pub result_ref: Option<Ref>,
}

/// Receipt states exposed by `GET /v1/receipts/{id}`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReceiptState {
    Resolved,
    NotStarted,
    Indeterminate,
}

impl ReceiptState {
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptState::Resolved => "resolved",
            ReceiptState::NotStarted => "not-started",
            ReceiptState::Indeterminate => "indeterminate",
        }
    }
}

/// Where in the journal an effect lives: `(invocationId, ordinal)`. Ordered
/// by invocation id (bytes), then ordinal: an effect record carried by several
/// outcomes (a v1 record names no invocation, so two alike decisions could
/// share one) is indexed under the least key, whatever order they came in.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalKey {
    pub invocation_id: String,
    pub ordinal: u32,
}

/// One intent of an invocation's journal, with its outcome once recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalItem {
    pub ordinal: u32,
    pub intent: EffectIntent,
    pub outcome: Option<EffectOutcome>,
}

/// One thing that names an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Referrer {
    /// `tables::REFERRER_OBJECT`, `REFERRER_ENTRY` or `REFERRER_WORLD`.
    pub kind: u8,
    /// The naming object's ref, entry hash or world ref.
    pub referrer: Ref,
    /// For an entry, its index.
    pub entry_index: Option<u64>,
}

impl Referrer {
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            REFERRER_OBJECT => "object",
            REFERRER_ENTRY => "entry",
            REFERRER_WORLD => "world",
            _ => "unknown",
        }
    }
}

/// Payloads as a CBOR byte string, not an array of numbers.
pub(crate) mod serde_bytes_vec {
    use serde::{Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
        }
        d.deserialize_byte_buf(V)
    }
}

/// The order calls take in an episode the index was not kept for (a store
/// written before it): by start time, then key.
pub fn call_order(a: &(TaskKey, Task), b: &(TaskKey, Task)) -> std::cmp::Ordering {
    (&a.0.episode, a.1.started_at, &a.0).cmp(&(&b.0.episode, b.1.started_at, &b.0))
}

/// The summaries the tasks of one episode make, taken in their positions'
/// order: what the index must hold.
pub fn summarize_calls<'t>(tasks: impl IntoIterator<Item = &'t Task>) -> EpisodeRow {
    let mut row = EpisodeRow::default();
    for t in tasks {
        row.created(t);
    }
    row
}

#[cfg(test)]
mod episode_tests {
    use super::*;

    fn task(started_at: u64, state: TaskState) -> Task {
        Task {
            request_digest: Ref::of(b"d"),
            state,
            started_at,
            committed: None,
            effect_records: vec![],
            transition: "tools.echo".into(),
            ended_at: (state != TaskState::Started).then_some(started_at + 1),
            effects: vec![],
            context: None,
            message_id: None,
            run: None,
        }
    }

    #[test]
    fn an_episode_starts_at_its_earliest_call_whichever_was_numbered_first() {
        let mut row = EpisodeRow::default();
        assert_eq!(row.created(&task(100, TaskState::Started)), 0);
        assert_eq!(row.created(&task(40, TaskState::Committed)), 1);
        assert_eq!((row.first_at, row.last_at, row.calls), (40, 100, 2));
        assert_eq!(row.states.get("started"), Some(&1));
        assert_eq!(row.states.get("committed"), Some(&1));
        row.ended(&task(100, TaskState::Uncertain), true);
        assert_eq!(row.states.get("started"), None, "a count that reaches 0 leaves the map");
        assert_eq!((row.states.get("uncertain"), row.last_at), (Some(&1), 101));
    }

    #[test]
    fn activity_keeps_at_most_its_buckets_by_doubling_their_width() {
        let mut a = Activity::default();
        a.add(60);
        a.add(61);
        assert_eq!((a.origin, a.width, a.counts.clone()), (60, 60, vec![2]));
        a.add(60 + 60 * ACTIVITY_BUCKETS as u64);
        assert_eq!(a.width, 120, "one bucket past the last merges neighbours once");
        assert!(a.counts.len() <= ACTIVITY_BUCKETS);
        assert_eq!(a.counts.iter().sum::<u64>(), 3);
        a.add(u64::MAX);
        assert!(a.counts.len() <= ACTIVITY_BUCKETS);
        assert_eq!(a.counts.iter().sum::<u64>(), 4, "no call is lost, however far");
        let first = a.counts[0];
        a.add(0);
        assert_eq!(a.counts[0], first + 1, "a call before the origin counts in the first bucket");
    }
}
