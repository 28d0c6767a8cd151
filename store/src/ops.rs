//! The named write transactions. Each request first runs all of its checks, then
//! writes; a request that fails a check writes nothing and spoils nothing else in
//! its batch. Only an engine error aborts the batch (and stops the writer).

use crate::canonical;
use crate::error::{WriteError, storage};
use crate::model::*;
use crate::refs::Ref;
use crate::rows;
use crate::tables::*;
use redb::{ReadableTable, Table, WriteTransaction};
use std::collections::HashSet;

/// Largest object payload the store accepts.
pub const OBJECT_PAYLOAD_MAX: usize = 64 << 20;
/// Longest `writtenBy`, semantic id or provenance string.
pub const LABEL_MAX: usize = 512;

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
    },
    RecordIntent(IntentRequest),
    RecordOutcome(OutcomeRequest),
    CommitInvocation(InvocationCommit),
    EndTask {
        task: TaskKey,
        state: TaskState,
    },
    /// Like `BeginTask`, but an existing row is a refusal (`TaskExists`), so a
    /// sequence stops there.
    CreateTask {
        task: TaskKey,
        request_digest: Ref,
        at: u64,
    },
    /// Several requests applied in order within one durable batch, each with
    /// its own checks; the first refusal stops the rest (`Skipped`). Earlier
    /// steps stay applied: a sequence shares an fsync, not atomicity.
    Sequence(Vec<Op>),
    MintSession {
        credential_id: Ref,
        session: Session,
    },
    RevokeSession {
        credential_id: Ref,
    },
    PublishRegistry(RegistryPublish),
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
    Existing(Task),
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
    Sequence(Vec<Result<Reply, WriteError>>),
}

/// All tables, opened once per batch.
pub(crate) struct W<'t> {
    objects: Table<'t, Key32, &'static [u8]>,
    payloads: Table<'t, u64, &'static [u8]>,
    object_seq: Table<'t, u64, Key32>,
    by_semantic_id: Table<'t, (&'static str, Key32), ()>,
    log: Table<'t, u64, &'static [u8]>,
    worlds: Table<'t, Key32, &'static [u8]>,
    world_by_revision: Table<'t, u64, Key32>,
    heads: Table<'t, &'static str, Key32>,
    registry_entries: Table<'t, (&'static str, &'static str), Key32>,
    intents: Table<'t, (&'static str, u32), &'static [u8]>,
    outcomes: Table<'t, (&'static str, u32), &'static [u8]>,
    open_intents: Table<'t, (&'static str, u32), ()>,
    spend: Table<'t, (&'static str, &'static str, &'static str), u64>,
    tasks: Table<'t, (&'static str, &'static str, &'static str), &'static [u8]>,
    open_tasks: Table<'t, (&'static str, &'static str, &'static str), ()>,
    sessions: Table<'t, Key32, &'static [u8]>,
    receipts: Table<'t, &'static str, &'static [u8]>,
    referrers: Table<'t, (Key32, u8, u64), ()>,
    entry_by_hash: Table<'t, Key32, u64>,
    record_journal: Table<'t, Key32, &'static [u8]>,
    /// Tasks started in this batch whose `open_tasks` row is not written yet: a
    /// task that also ends in the batch (the usual create-and-commit) never
    /// touches that table. `finish` writes the rest.
    started: std::collections::HashSet<TaskKey>,
    /// The next object sequence number, read once per batch.
    next_seq: Option<u64>,
}

type R<T> = Result<T, WriteError>;

impl<'t> W<'t> {
    pub(crate) fn open(txn: &'t WriteTransaction) -> R<W<'t>> {
        Ok(W {
            objects: txn.open_table(OBJECTS).map_err(storage)?,
            payloads: txn.open_table(PAYLOADS).map_err(storage)?,
            object_seq: txn.open_table(OBJECT_SEQ).map_err(storage)?,
            by_semantic_id: txn.open_table(BY_SEMANTIC_ID).map_err(storage)?,
            log: txn.open_table(LOG).map_err(storage)?,
            worlds: txn.open_table(WORLDS).map_err(storage)?,
            world_by_revision: txn.open_table(WORLD_BY_REVISION).map_err(storage)?,
            heads: txn.open_table(HEADS).map_err(storage)?,
            registry_entries: txn.open_table(REGISTRY_ENTRIES).map_err(storage)?,
            intents: txn.open_table(INTENTS).map_err(storage)?,
            outcomes: txn.open_table(OUTCOMES).map_err(storage)?,
            open_intents: txn.open_table(OPEN_INTENTS).map_err(storage)?,
            spend: txn.open_table(SPEND).map_err(storage)?,
            tasks: txn.open_table(TASKS).map_err(storage)?,
            open_tasks: txn.open_table(OPEN_TASKS).map_err(storage)?,
            sessions: txn.open_table(SESSIONS).map_err(storage)?,
            receipts: txn.open_table(RECEIPTS).map_err(storage)?,
            referrers: txn.open_table(REFERRERS).map_err(storage)?,
            entry_by_hash: txn.open_table(ENTRY_BY_HASH).map_err(storage)?,
            record_journal: txn.open_table(RECORD_JOURNAL).map_err(storage)?,
            started: Default::default(),
            next_seq: None,
        })
    }

    /// Writes what was deferred to the end of the batch; call before committing.
    pub(crate) fn finish(mut self) -> R<()> {
        for key in std::mem::take(&mut self.started) {
            self.open_tasks
                .insert((key.surface.as_str(), key.episode.as_str(), key.task_id.as_str()), ())
                .map_err(storage)?;
        }
        Ok(())
    }

    pub(crate) fn apply(&mut self, op: Op) -> R<Reply> {
        match op {
            Op::PutObjects(objects) => self.put_objects(objects).map(|_| Reply::Done),
            Op::RestIntent { invocation_id, request_digest } => {
                self.rest_intent(&invocation_id, request_digest).map(Reply::RestIntent)
            }
            Op::CommitWorld(c) => self.commit_world(c).map(Reply::Selected),
            Op::BeginTask { task, request_digest, at } => self.begin_task(&task, request_digest, at).map(Reply::Begun),
            Op::RecordIntent(i) => self.record_intent(i).map(Reply::Debited),
            Op::RecordOutcome(o) => self.record_outcome(o).map(|_| Reply::Done),
            Op::CommitInvocation(c) => self.commit_invocation(c).map(Reply::Committed),
            Op::EndTask { task, state } => self.end_task(&task, state).map(|_| Reply::Done),
            Op::CreateTask { task, request_digest, at } => match self.begin_task(&task, request_digest, at)? {
                BeginOutcome::Started => Ok(Reply::Begun(BeginOutcome::Started)),
                BeginOutcome::Existing(t) => Err(WriteError::TaskExists(Box::new(t))),
            },
            Op::Sequence(ops) => self.sequence(ops).map(Reply::Sequence),
            Op::MintSession { credential_id, session } => {
                self.mint_session(credential_id, &session).map(|_| Reply::Done)
            }
            Op::RevokeSession { credential_id } => {
                Ok(Reply::Revoked(self.sessions.remove(credential_id.0).map_err(storage)?.is_some()))
            }
            Op::PublishRegistry(p) => self.publish_registry(p).map(Reply::Published),
        }
    }

    fn sequence(&mut self, ops: Vec<Op>) -> R<Vec<Result<Reply, WriteError>>> {
        let mut out = Vec::with_capacity(ops.len());
        let mut refused = false;
        for op in ops {
            if refused {
                out.push(Err(WriteError::Skipped));
                continue;
            }
            let r = match op {
                Op::Sequence(_) => Err(WriteError::InvalidCommit("sequences do not nest".into())),
                op => self.apply(op),
            };
            if let Err(WriteError::Storage(e)) = &r {
                return Err(WriteError::Storage(e.clone()));
            }
            refused = r.is_err();
            out.push(r);
        }
        Ok(out)
    }

    // ---- checks shared by several transactions (read-only) ----

    fn check_objects(objects: &[NewObject]) -> R<()> {
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

    fn object_exists(&self, r: &Ref, offered: &[NewObject]) -> R<bool> {
        Ok(offered.iter().any(|o| o.hash == *r) || self.objects.get(r.0).map_err(storage)?.is_some())
    }

    fn selected(&self) -> R<Option<Ref>> {
        Ok(self.heads.get(SELECTED_HEAD).map_err(storage)?.map(|v| Ref(v.value())))
    }

    fn world(&self, r: &Ref) -> R<Option<World>> {
        match self.worlds.get(r.0).map_err(storage)? {
            Some(v) => Ok(Some(rows::decode("worlds", r, v.value()).map_err(|e| WriteError::Read(e.into()))?)),
            None => Ok(None),
        }
    }

    fn next_index(&self) -> R<u64> {
        Ok(self.log.last().map_err(storage)?.map(|(k, _)| k.value() + 1).unwrap_or(0))
    }

    fn task(&self, key: &TaskKey) -> R<Option<Task>> {
        let k = (key.surface.as_str(), key.episode.as_str(), key.task_id.as_str());
        match self.tasks.get(k).map_err(storage)? {
            Some(v) => Ok(Some(
                rows::decode("tasks", &key.invocation_id(), v.value()).map_err(|e| WriteError::Read(e.into()))?,
            )),
            None => Ok(None),
        }
    }

    fn started_task(&self, key: &TaskKey) -> R<Task> {
        match self.task(key)? {
            Some(t) if t.state == TaskState::Started => Ok(t),
            other => {
                Err(WriteError::TaskNotStarted { invocation_id: key.invocation_id(), state: other.map(|t| t.state) })
            }
        }
    }

    // ---- writes ----

    fn next_seq(&mut self) -> R<u64> {
        let seq = match self.next_seq {
            Some(n) => n,
            None => self.object_seq.last().map_err(storage)?.map(|(k, _)| k.value() + 1).unwrap_or(0),
        };
        self.next_seq = Some(seq + 1);
        Ok(seq)
    }

    fn write_objects(&mut self, objects: &[NewObject]) -> R<()> {
        for o in objects {
            // Immutable and first-writer-wins: an existing object keeps its metadata.
            if self.objects.get(o.hash.0).map_err(storage)?.is_some() {
                continue;
            }
            let seq = self.next_seq()?;
            let row = ObjectRow {
                interface_hash: o.interface_hash,
                semantic_id: o.semantic_id.clone(),
                provenance: o.provenance.clone(),
                size: o.payload.len() as u64,
                seq,
            };
            self.objects.insert(o.hash.0, rows::encode(&row).as_slice()).map_err(storage)?;
            self.payloads.insert(seq, o.payload.as_slice()).map_err(storage)?;
            self.object_seq.insert(seq, o.hash.0).map_err(storage)?;
            self.by_semantic_id.insert((o.semantic_id.as_str(), o.hash.0), ()).map_err(storage)?;
            for target in crate::refs::refs_named_in(&o.payload, REFS_INDEXED_PER_OBJECT_MAX) {
                if target != o.hash {
                    self.referrers.insert((target.0, REFERRER_OBJECT, seq), ()).map_err(storage)?;
                }
            }
        }
        Ok(())
    }

    /// A task row that did not exist: a started one joins the open-task set.
    fn write_new_task(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        let k = (key.surface.as_str(), key.episode.as_str(), key.task_id.as_str());
        self.tasks.insert(k, rows::encode(task).as_slice()).map_err(storage)?;
        if task.state == TaskState::Started {
            self.started.insert(key.clone());
        }
        Ok(())
    }

    /// An existing task row: once it is no longer started it leaves the open-task set.
    fn write_task(&mut self, key: &TaskKey, task: &Task) -> R<()> {
        let k = (key.surface.as_str(), key.episode.as_str(), key.task_id.as_str());
        self.tasks.insert(k, rows::encode(task).as_slice()).map_err(storage)?;
        if task.state != TaskState::Started && !self.started.remove(key) {
            self.open_tasks.remove(k).map_err(storage)?;
        }
        Ok(())
    }

    fn append(&mut self, entry: &LogEntry, world: &World) -> R<()> {
        self.append_entry(entry)?;
        self.insert_world(world)?;
        self.heads.insert(SELECTED_HEAD, world.world_ref.0).map_err(storage)?;
        Ok(())
    }

    fn append_entry(&mut self, entry: &LogEntry) -> R<()> {
        let (h, e) = (&entry.header, entry.entry_hash.0);
        self.log.insert(h.entry_index, rows::encode(entry).as_slice()).map_err(storage)?;
        self.entry_by_hash.insert(e, h.entry_index).map_err(storage)?;
        for target in [entry.transition_ref, h.transition_fn, h.interpreter] {
            self.referrers.insert((target.0, REFERRER_ENTRY, h.entry_index), ()).map_err(storage)?;
        }
        Ok(())
    }

    fn insert_world(&mut self, world: &World) -> R<()> {
        self.worlds.insert(world.world_ref.0, rows::encode(world).as_slice()).map_err(storage)?;
        self.world_by_revision.insert(world.revision, world.world_ref.0).map_err(storage)?;
        for target in [world.state_root, world.log_head] {
            self.referrers.insert((target.0, REFERRER_WORLD, world.revision), ()).map_err(storage)?;
        }
        Ok(())
    }

    /// Writes one record of an export stream into a fresh store. Derived rows
    /// (indexes, open sets) are rebuilt here, never taken from the stream.
    pub(crate) fn import(&mut self, record: crate::export::Record) -> R<()> {
        use crate::export::Record as X;
        match record {
            X::Header { .. } | X::End { .. } => Ok(()),
            X::Object { hash, meta, payload } => {
                if meta.size != payload.len() as u64 {
                    return Err(WriteError::InvalidCommit(format!(
                        "object {hash}: size {} but {} payload bytes",
                        meta.size,
                        payload.len()
                    )));
                }
                let o = NewObject {
                    hash,
                    interface_hash: meta.interface_hash,
                    semantic_id: meta.semantic_id,
                    provenance: meta.provenance,
                    payload,
                };
                self.put_objects(vec![o])
            }
            X::Entry(e) => self.append_entry(&e),
            X::World(w) => self.insert_world(&w),
            X::Head { name, head } => self.heads.insert(name.as_str(), head.0).map(|_| ()).map_err(storage),
            X::RegistryEntry { registry, id, transition_fn } => self
                .registry_entries
                .insert((registry.as_str(), id.as_str()), transition_fn.0)
                .map(|_| ())
                .map_err(storage),
            X::Intent { invocation_id, ordinal, intent } => {
                let k = (invocation_id.as_str(), ordinal);
                self.intents.insert(k, rows::encode(&intent).as_slice()).map_err(storage)?;
                if self.outcomes.get(k).map_err(storage)?.is_none() {
                    self.open_intents.insert(k, ()).map_err(storage)?;
                }
                Ok(())
            }
            X::Outcome { invocation_id, ordinal, outcome } => {
                let k = (invocation_id.as_str(), ordinal);
                if self.intents.get(k).map_err(storage)?.is_none() {
                    return Err(WriteError::NoIntent { invocation_id, ordinal });
                }
                self.outcomes.insert(k, rows::encode(&outcome).as_slice()).map_err(storage)?;
                self.open_intents.remove(k).map_err(storage)?;
                if let Some(rec) = outcome.record_ref {
                    let jk = JournalKey { invocation_id: invocation_id.clone(), ordinal };
                    self.record_journal.insert(rec.0, rows::encode(&jk).as_slice()).map_err(storage)?;
                }
                Ok(())
            }
            X::Spend { episode, effect, scope, units } => self
                .spend
                .insert((episode.as_str(), effect.as_str(), scope.as_str()), units)
                .map(|_| ())
                .map_err(storage),
            X::Task { key, task } => self.write_new_task(&key, &task),
            X::Receipt { id, receipt } => {
                self.receipts.insert(id.as_str(), rows::encode(&receipt).as_slice()).map(|_| ()).map_err(storage)
            }
            X::Session { credential_id, session } => self.mint_session(credential_id, &session),
        }
    }

    fn put_objects(&mut self, objects: Vec<NewObject>) -> R<()> {
        Self::check_objects(&objects)?;
        self.write_objects(&objects)
    }

    fn rest_intent(&mut self, id: &str, digest: Ref) -> R<RestIntentOutcome> {
        match self.receipt(id)? {
            Some(r) if r.request_digest != digest => Err(WriteError::RestIdReused(id.to_string())),
            Some(Receipt { result_ref: Some(world), .. }) => Ok(RestIntentOutcome::Resolved(world)),
            Some(_) => Ok(RestIntentOutcome::Journaled),
            None => {
                let receipt = Receipt { request_digest: digest, result_ref: None };
                self.receipts.insert(id, rows::encode(&receipt).as_slice()).map_err(storage)?;
                Ok(RestIntentOutcome::Journaled)
            }
        }
    }

    fn receipt(&self, id: &str) -> R<Option<Receipt>> {
        match self.receipts.get(id).map_err(storage)? {
            Some(v) => Ok(Some(rows::decode("receipts", &id, v.value()).map_err(|e| WriteError::Read(e.into()))?)),
            None => Ok(None),
        }
    }

    fn commit_world(&mut self, c: RestCommit) -> R<Ref> {
        if let Some(id) = &c.invocation_id {
            match self.receipt(id)? {
                Some(r) if r.request_digest != c.request_digest => {
                    return Err(WriteError::RestIdReused(id.clone()));
                }
                Some(Receipt { result_ref: Some(world), .. }) => return Ok(world),
                _ => {}
            }
        }
        match self.check_rest_commit(&c) {
            Ok(()) => {}
            Err(e) => {
                // Definitely not committed: drop this attempt's intent, so the
                // receipt reads not-started and the id can be used again.
                if let Some(id) = &c.invocation_id {
                    self.receipts.remove(id.as_str()).map_err(storage)?;
                }
                return Err(e);
            }
        }
        self.write_objects(&c.objects)?;
        self.append(&c.entry, &c.next_world)?;
        if let Some(id) = &c.invocation_id {
            let receipt = Receipt { request_digest: c.request_digest, result_ref: Some(c.next_world.world_ref) };
            self.receipts.insert(id.as_str(), rows::encode(&receipt).as_slice()).map_err(storage)?;
        }
        Ok(c.next_world.world_ref)
    }

    /// The kernel derives and checks chain integrity itself instead of trusting the caller.
    fn check_rest_commit(&self, c: &RestCommit) -> R<()> {
        let selected = self.selected()?;
        if c.observed_head != selected {
            return Err(WriteError::HeadConflict { observed: c.observed_head, selected });
        }
        let h = &c.entry.header;
        let next = self.next_index()?;
        let bad = |m: String| Err(WriteError::InvalidCommit(m));
        if h.entry_index != next {
            return bad(format!("entry.header.entryIndex must be {next}, the next log index"));
        }
        if h.written_by.is_empty() || h.written_by.len() > LABEL_MAX {
            return bad(format!("entry.header.writtenBy must be 1-{LABEL_MAX} bytes"));
        }
        if let Some(head) = selected {
            let world = self
                .world(&head)?
                .ok_or_else(|| WriteError::Storage(format!("selected head {head} has no world row")))?;
            if h.prev_entry_hash != world.log_head {
                return bad(format!(
                    "entry.header.prevEntryHash must be {}, the selected world's logHead",
                    world.log_head
                ));
            }
        }
        let entry_hash = canonical::entry_hash(h, &c.entry.transition_ref);
        if c.entry.entry_hash != entry_hash {
            return bad(format!("entry.entryHash does not match its canonical preimage; it hashes to {entry_hash}"));
        }
        let w = &c.next_world;
        if w.revision != h.entry_index {
            return bad(format!("nextWorld.revision must equal entry.header.entryIndex ({})", h.entry_index));
        }
        if w.log_head != entry_hash {
            return bad("nextWorld.logHead must equal entry.entryHash".into());
        }
        let world_ref = canonical::world_ref(w.revision, &w.state_root, &w.log_head);
        if w.world_ref != world_ref {
            return bad(format!("nextWorld.ref does not match its canonical preimage; it hashes to {world_ref}"));
        }
        Self::check_objects(&c.objects)?;
        if !self.object_exists(&c.entry.transition_ref, &c.objects)? {
            return bad("entry.transitionRef must name an object in this commit or in the store".into());
        }
        // verify requires these of every coordinator-written entry; refuse what it would flag.
        if h.written_by.starts_with("coordinator:") {
            for (field, r) in [("transitionFn", &h.transition_fn), ("interpreter", &h.interpreter)] {
                if !self.object_exists(r, &c.objects)? {
                    return bad(format!("entry.header.{field} must name an object when writtenBy is coordinator:*"));
                }
            }
        }
        Ok(())
    }

    fn begin_task(&mut self, key: &TaskKey, digest: Ref, at: u64) -> R<BeginOutcome> {
        // The journal is keyed by the invocation id; two keys with one id would share it.
        if TaskKey::from_invocation_id(&key.invocation_id()).as_ref() != Some(key) {
            return Err(WriteError::InvalidCommit(format!(
                "task key {}: episode and task id must be non-empty and contain no ':'",
                key.invocation_id()
            )));
        }
        if let Some(existing) = self.task(key)? {
            return Ok(BeginOutcome::Existing(existing));
        }
        let task = Task {
            request_digest: digest,
            state: TaskState::Started,
            started_at: at,
            committed: None,
            effect_records: vec![],
        };
        self.write_new_task(key, &task)?;
        Ok(BeginOutcome::Started)
    }

    fn record_intent(&mut self, i: IntentRequest) -> R<Debit> {
        self.started_task(&i.task)?;
        let inv = i.task.invocation_id();
        if self.intents.get((inv.as_str(), i.ordinal)).map_err(storage)?.is_some() {
            return Err(WriteError::IntentExists { invocation_id: inv, ordinal: i.ordinal });
        }
        Self::check_objects(std::slice::from_ref(&i.request))?;
        let spend_key = (i.task.episode.as_str(), i.effect.as_str(), i.scope.as_str());
        let spent = self.spend.get(spend_key).map_err(storage)?.map(|v| v.value()).unwrap_or(0);
        let remaining = i.grant_budget.saturating_sub(spent);
        if i.cost > remaining {
            return Err(WriteError::BudgetExhausted { remaining });
        }
        let debit = Debit { budget_before: remaining, budget_after: remaining - i.cost };
        let intent = EffectIntent {
            episode: i.task.episode.clone(),
            effect_id: i.effect_id,
            effect: i.effect.clone(),
            scope: i.scope.clone(),
            cost: i.cost,
            request_ref: i.request.hash,
            budget_before: debit.budget_before,
            budget_after: debit.budget_after,
            at: i.at,
        };
        self.write_objects(std::slice::from_ref(&i.request))?;
        self.intents.insert((inv.as_str(), i.ordinal), rows::encode(&intent).as_slice()).map_err(storage)?;
        self.open_intents.insert((inv.as_str(), i.ordinal), ()).map_err(storage)?;
        let spend_key = (i.task.episode.as_str(), i.effect.as_str(), i.scope.as_str());
        self.spend.insert(spend_key, spent + i.cost).map_err(storage)?;
        Ok(debit)
    }

    fn record_outcome(&mut self, o: OutcomeRequest) -> R<()> {
        let inv = o.task.invocation_id();
        if self.intents.get((inv.as_str(), o.ordinal)).map_err(storage)?.is_none() {
            return Err(WriteError::NoIntent { invocation_id: inv, ordinal: o.ordinal });
        }
        if self.outcomes.get((inv.as_str(), o.ordinal)).map_err(storage)?.is_some() {
            return Err(WriteError::OutcomeExists { invocation_id: inv, ordinal: o.ordinal });
        }
        let mut objects = vec![o.record.clone()];
        objects.extend(o.result.iter().cloned());
        Self::check_objects(&objects)?;
        let task = self.task(&o.task)?;
        self.write_objects(&objects)?;
        let outcome = EffectOutcome {
            status: o.status,
            record_ref: Some(o.record.hash),
            result_ref: o.result.as_ref().map(|r| r.hash),
            at: o.at,
        };
        self.outcomes.insert((inv.as_str(), o.ordinal), rows::encode(&outcome).as_slice()).map_err(storage)?;
        self.open_intents.remove((inv.as_str(), o.ordinal)).map_err(storage)?;
        let jk = JournalKey { invocation_id: inv.clone(), ordinal: o.ordinal };
        self.record_journal.insert(o.record.hash.0, rows::encode(&jk).as_slice()).map_err(storage)?;
        if let Some(mut task) = task {
            task.effect_records.push(o.record.hash);
            self.write_task(&o.task, &task)?;
        }
        Ok(())
    }

    fn commit_invocation(&mut self, c: InvocationCommit) -> R<Committed> {
        let mut task = self.started_task(&c.task)?;
        let registered = self
            .registry_entries
            .get((c.registry.as_str(), c.transition_id.as_str()))
            .map_err(storage)?
            .map(|v| Ref(v.value()));
        if registered != Some(c.transition_fn) {
            return Err(WriteError::TransitionChanged { id: c.transition_id });
        }
        let head = self.selected()?.ok_or(WriteError::NoWorld)?;
        let head_world =
            self.world(&head)?.ok_or_else(|| WriteError::Storage(format!("selected head {head} has no world row")))?;
        Self::check_objects(&c.objects)?;
        for (what, r) in [
            ("invocation record", &c.transition_ref),
            ("output", &c.state_root),
            ("transitionFn", &c.transition_fn),
            ("interpreter", &c.interpreter),
        ] {
            if !self.object_exists(r, &c.objects)? {
                return Err(WriteError::InvalidCommit(format!("the {what} {r} is not in the commit or the store")));
            }
        }
        let entry_index = self.next_index()?;
        debug_assert_eq!(entry_index, head_world.revision + 1, "revision tracks the entry index");
        let header = EntryHeader {
            entry_index,
            semantics_epoch: c.semantics_epoch,
            transition_fn: c.transition_fn,
            interpreter: c.interpreter,
            prev_entry_hash: head_world.log_head,
            written_by: c.written_by,
        };
        let entry_hash = canonical::entry_hash(&header, &c.transition_ref);
        let world = World {
            world_ref: canonical::world_ref(entry_index, &c.state_root, &entry_hash),
            revision: entry_index,
            state_root: c.state_root,
            log_head: entry_hash,
        };
        let entry = LogEntry { header, entry_hash, transition_ref: c.transition_ref };
        self.write_objects(&c.objects)?;
        self.append(&entry, &world)?;
        let committed = Committed { entry_index, entry_hash, world_ref: world.world_ref, output_ref: c.state_root };
        task.state = TaskState::Committed;
        task.committed = Some(committed.clone());
        self.write_task(&c.task, &task)?;
        Ok(committed)
    }

    fn end_task(&mut self, key: &TaskKey, state: TaskState) -> R<()> {
        if !matches!(state, TaskState::NotCommitted | TaskState::Uncertain) {
            return Err(WriteError::InvalidCommit(format!("a task cannot be ended as {}", state.as_str())));
        }
        let mut task = self.started_task(key)?;
        task.state = state;
        self.write_task(key, &task)
    }

    fn mint_session(&mut self, id: Ref, session: &Session) -> R<()> {
        if self.sessions.get(id.0).map_err(storage)?.is_some() {
            return Err(WriteError::SessionExists);
        }
        self.sessions.insert(id.0, rows::encode(session).as_slice()).map_err(storage)?;
        Ok(())
    }

    fn publish_registry(&mut self, p: RegistryPublish) -> R<PublishOutcome> {
        if p.name == SELECTED_HEAD {
            return Err(WriteError::InvalidCommit(format!("{SELECTED_HEAD} holds the selected world, not a registry")));
        }
        let current = self.heads.get(p.name.as_str()).map_err(storage)?.map(|v| Ref(v.value()));
        if current == Some(p.head) {
            return Ok(PublishOutcome::Unchanged);
        }
        if current != p.expected {
            return Err(WriteError::RegistryConflict { name: p.name, expected: p.expected, actual: current });
        }
        Self::check_objects(&p.objects)?;
        if !self.object_exists(&p.head, &p.objects)? {
            return Err(WriteError::InvalidCommit(format!(
                "registry head {} is not in the publish or the store",
                p.head
            )));
        }
        let mut seen = HashSet::new();
        if let Some((dup, _)) = p.entries.iter().find(|(id, _)| !seen.insert(id.as_str())) {
            return Err(WriteError::InvalidCommit(format!("transition id {dup} appears twice")));
        }
        for (id, f) in &p.entries {
            if !self.object_exists(f, &p.objects)? {
                return Err(WriteError::InvalidCommit(format!(
                    "transition {id}: transitionFn {f} is not in the publish or the store"
                )));
            }
        }
        self.write_objects(&p.objects)?;
        self.heads.insert(p.name.as_str(), p.head.0).map_err(storage)?;
        let old: Vec<String> = {
            let range = self.registry_entries.range((p.name.as_str(), "")..).map_err(storage)?;
            let mut ids = vec![];
            for item in range {
                let (k, _) = item.map_err(storage)?;
                let (name, id) = k.value();
                if name != p.name {
                    break;
                }
                ids.push(id.to_string());
            }
            ids
        };
        for id in &old {
            self.registry_entries.remove((p.name.as_str(), id.as_str())).map_err(storage)?;
        }
        for (id, f) in &p.entries {
            self.registry_entries.insert((p.name.as_str(), id.as_str()), f.0).map_err(storage)?;
        }
        Ok(PublishOutcome::Moved)
    }

    // ---- recovery ----

    /// Fail-closed recovery after a restart: every intent without an outcome becomes
    /// `indeterminate` (its debit stays), every task left `started` ends `uncertain`
    /// if it journaled an effect and `not-committed` otherwise. Idempotent.
    pub(crate) fn recover(&mut self, at: u64) -> R<RecoveryReport> {
        let mut report = RecoveryReport::default();
        let open: Vec<(String, u32)> = collect_keys(&self.open_intents, |k: (&str, u32)| (k.0.to_string(), k.1))?;
        for (inv, ordinal) in open {
            if self.outcomes.get((inv.as_str(), ordinal)).map_err(storage)?.is_none() {
                let outcome =
                    EffectOutcome { status: OutcomeStatus::Indeterminate, record_ref: None, result_ref: None, at };
                self.outcomes.insert((inv.as_str(), ordinal), rows::encode(&outcome).as_slice()).map_err(storage)?;
                report.indeterminate_effects.push(format!("{inv}#{ordinal}"));
            }
            self.open_intents.remove((inv.as_str(), ordinal)).map_err(storage)?;
        }
        let open: Vec<(String, String, String)> = collect_keys(&self.open_tasks, |k: (&str, &str, &str)| {
            (k.0.to_string(), k.1.to_string(), k.2.to_string())
        })?;
        for (surface, episode, task_id) in open {
            let Some(surface) = Surface::parse(&surface) else { continue };
            let key = TaskKey { surface, episode, task_id };
            let inv = key.invocation_id();
            let journaled =
                self.intents.range((inv.as_str(), 0u32)..=(inv.as_str(), u32::MAX)).map_err(storage)?.next().is_some();
            match self.task(&key)? {
                Some(mut task) if task.state == TaskState::Started => {
                    task.state = if journaled { TaskState::Uncertain } else { TaskState::NotCommitted };
                    report.tasks.push((inv, task.state));
                    self.write_task(&key, &task)?;
                }
                _ => {
                    let k = (key.surface.as_str(), key.episode.as_str(), key.task_id.as_str());
                    self.open_tasks.remove(k).map_err(storage)?;
                }
            }
        }
        Ok(report)
    }
}

fn collect_keys<K: redb::Key + 'static, T>(table: &Table<'_, K, ()>, f: impl Fn(K::SelfType<'_>) -> T) -> R<Vec<T>> {
    let mut out = vec![];
    for item in table.iter().map_err(storage)? {
        let (k, _) = item.map_err(storage)?;
        out.push(f(k.value()));
    }
    Ok(out)
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
