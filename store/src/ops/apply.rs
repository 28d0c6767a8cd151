//! The named write transactions' checks and derivations, written once over the
//! `Rows` an engine offers inside its write transaction. Entry hashes, world
//! refs, budgets and task states come from this code whichever engine stores
//! the rows, so both engines build byte-identical worlds.
//!
//! Each request first runs all of its checks, then writes; a request that
//! fails a check writes nothing and spoils nothing else in its batch (one
//! exception, kept on purpose: a REST commit that fails its checks drops its
//! own receipt). Only an engine error aborts the batch.

use super::approvals;
use super::record::Record;
use super::*;
use crate::canonical;
use crate::error::WriteError;
use crate::model::*;
use crate::refs::Ref;
use crate::tables::SELECTED_HEAD;
use std::collections::HashSet;

pub(crate) type R<T> = Result<T, WriteError>;

/// An invocation whose checks passed, not yet chained: its commit and its
/// task as started.
pub(crate) struct Pending {
    pub commit: InvocationCommit,
    pub task: Task,
}

/// An invocation chained onto the log (see `chain`).
pub(crate) struct Chained {
    pub key: TaskKey,
    pub objects: Vec<NewObject>,
    pub entry: LogEntry,
    pub world: World,
    pub committed: Committed,
    pub task: Task,
}

/// What a commit writes after its checks (see `Rows::append`).
pub(crate) struct Append<'a> {
    pub objects: &'a [NewObject],
    pub entry: &'a LogEntry,
    pub world: &'a World,
    pub task: Option<(&'a TaskKey, &'a Task)>,
}

/// The rows of one write transaction, by domain. An engine implements these
/// primitives; a row it is asked to insert as new that another writer created
/// meanwhile is an engine error (the batch is retried), never an overwrite.
pub(crate) trait Rows: approvals::ApprovalRows {
    fn has_object(&mut self, r: &Ref) -> R<bool>;
    /// Writes an object, with its indexes, unless the store has it already
    /// (immutable, first writer wins: an existing object keeps its metadata).
    fn insert_object(&mut self, o: &NewObject) -> R<()>;
    /// `insert_object` for each, in order.
    fn insert_objects(&mut self, objects: &[NewObject]) -> R<()> {
        objects.iter().try_for_each(|o| self.insert_object(o))
    }

    fn head(&mut self, name: &str) -> R<Option<Ref>>;
    fn set_head(&mut self, name: &str, r: Ref) -> R<()>;
    fn world(&mut self, r: &Ref) -> R<Option<World>>;
    /// One past the last entry's index.
    fn log_len(&mut self) -> R<u64>;
    fn insert_entry(&mut self, entry: &LogEntry) -> R<()>;
    fn insert_world(&mut self, world: &World) -> R<()>;
    /// A commit's writes once its checks passed, which an engine may send
    /// as one: its new objects, the entry, its world (selected), and an
    /// invocation's task in its end state.
    fn append(&mut self, a: Append<'_>) -> R<()> {
        self.insert_objects(a.objects)?;
        self.insert_entry(a.entry)?;
        self.insert_world(a.world)?;
        self.set_head(SELECTED_HEAD, a.world.world_ref)?;
        match a.task {
            Some((key, task)) => self.update_task(key, task),
            None => Ok(()),
        }
    }
    /// Whether a world is selected (one stays selected for good).
    fn world_selected(&mut self) -> R<bool> {
        Ok(self.head(SELECTED_HEAD)?.is_some())
    }
    /// Chains and writes an invocation whose checks passed. An engine may
    /// defer it to the end of its batch (so that the head is locked last),
    /// answering a placeholder it replaces once the batch's entries are
    /// chained.
    fn append_invocation(&mut self, p: Pending) -> R<Committed> {
        let head = selected_world(self)?.ok_or(WriteError::NoWorld)?;
        let c = chain(&head, p);
        debug_assert_eq!(self.log_len()?, c.entry.header.entry_index, "revision tracks the entry index");
        self.append(Append { objects: &c.objects, entry: &c.entry, world: &c.world, task: Some((&c.key, &c.task)) })?;
        Ok(c.committed)
    }

    fn registry_entry(&mut self, registry: &str, id: &str) -> R<Option<Ref>>;
    fn put_registry_entry(&mut self, registry: &str, id: &str, transition_fn: Ref) -> R<()>;
    /// Makes `entries` the registry's whole set of entries.
    fn replace_registry_entries(&mut self, registry: &str, entries: &[(String, Ref)]) -> R<()>;

    fn task(&mut self, key: &TaskKey) -> R<Option<Task>>;
    /// A task row that did not exist; a started one joins the open tasks.
    /// Its call is then told to the episode index (`call_created`).
    fn insert_task(&mut self, key: &TaskKey, task: &Task) -> R<()>;
    /// Inserts `task` unless the key has a row: `None` when inserted, else
    /// the existing row (which this transaction then holds).
    fn create_task(&mut self, key: &TaskKey, task: &Task) -> R<Option<Task>> {
        if let Some(existing) = self.task(key)? {
            return Ok(Some(existing));
        }
        self.insert_task(key, task)?;
        Ok(None)
    }
    /// A call whose task row this transaction just wrote: it takes its
    /// episode's next position and moves the episode's summary, as
    /// `episodes::Move` says. An engine may keep the moves until the end of
    /// its batch (`episodes::Moves`).
    fn call_created(&mut self, key: &TaskKey, task: &Task) -> R<()>;
    /// A call that left `started` as `task`: its episode's counts move
    /// (at once or later, as `call_created`'s).
    fn call_ended(&mut self, key: &TaskKey, task: &Task) -> R<()>;
    /// The journal of one invocation: each intent with its outcome.
    fn journal(&mut self, invocation_id: &str) -> R<Vec<JournalItem>>;
    /// An existing task row; one no longer started leaves the open tasks.
    fn update_task(&mut self, key: &TaskKey, task: &Task) -> R<()>;
    /// Tasks still started (what recovery looks at).
    fn open_tasks(&mut self) -> R<Vec<TaskKey>>;
    fn close_task(&mut self, key: &TaskKey) -> R<()>;

    fn has_intent(&mut self, invocation_id: &str, ordinal: u32) -> R<bool>;
    fn has_intents(&mut self, invocation_id: &str) -> R<bool>;
    /// A new intent, open until its outcome is recorded.
    fn insert_intent(&mut self, invocation_id: &str, ordinal: u32, intent: &EffectIntent) -> R<()>;
    fn has_outcome(&mut self, invocation_id: &str, ordinal: u32) -> R<bool>;
    /// A new outcome: closes its intent and maps its record (if any) to it.
    fn insert_outcome(&mut self, invocation_id: &str, ordinal: u32, outcome: &EffectOutcome) -> R<()>;
    /// Intents still waiting for an outcome.
    fn open_intents(&mut self) -> R<Vec<(String, u32)>>;
    fn close_intent(&mut self, invocation_id: &str, ordinal: u32) -> R<()>;
    fn spent(&mut self, episode: &str, effect: &str, scope: &str) -> R<u64>;
    fn set_spent(&mut self, episode: &str, effect: &str, scope: &str, units: u64) -> R<()>;

    fn has_session(&mut self, credential_id: &Ref) -> R<bool>;
    fn insert_session(&mut self, credential_id: &Ref, session: &Session) -> R<()>;
    fn remove_session(&mut self, credential_id: &Ref) -> R<bool>;

    fn receipt(&mut self, id: &str) -> R<Option<Receipt>>;
    fn put_receipt(&mut self, id: &str, receipt: &Receipt) -> R<()>;
    fn remove_receipt(&mut self, id: &str) -> R<()>;
}

/// Applies one request to `rows`.
pub(crate) fn apply(rows: &mut impl Rows, op: Op) -> R<Reply> {
    match op {
        Op::PutObjects(objects) => put_objects(rows, &objects).map(|_| Reply::Done),
        Op::RestIntent { invocation_id, request_digest } => {
            rest_intent(rows, &invocation_id, request_digest).map(Reply::RestIntent)
        }
        Op::CommitWorld(c) => commit_world(rows, c).map(Reply::Selected),
        Op::BeginTask { task, request_digest, at, transition, context, message_id } => {
            begin_task(rows, &task, started(request_digest, at, transition, context, message_id)).map(Reply::Begun)
        }
        Op::RecordIntent(i) => record_intent(rows, i).map(Reply::Debited),
        Op::RecordOutcome(o) => record_outcome(rows, o).map(|_| Reply::Done),
        Op::CommitInvocation(c) => commit_invocation(rows, c).map(Reply::Committed),
        Op::EndTask { task, state, at } => end_task(rows, &task, state, at).map(|_| Reply::Done),
        Op::CreateTask { task, request_digest, at, transition, context, message_id, run } => {
            let row = Task { run, ..started(request_digest, at, transition, context, message_id) };
            match begin_task(rows, &task, row)? {
                BeginOutcome::Started => Ok(Reply::Begun(BeginOutcome::Started)),
                BeginOutcome::Existing(t) => Err(WriteError::TaskExists(t)),
            }
        }
        Op::CancelTask { task, at } => cancel_task(rows, &task, at).map(Reply::Cancel),
        Op::TaskProgress { task, progress } => task_progress(rows, &task, progress).map(|_| Reply::Done),
        Op::Sequence(ops) => sequence(rows, ops).map(Reply::Sequence),
        Op::MintSession { credential_id, session } => mint_session(rows, &credential_id, &session).map(|_| Reply::Done),
        Op::RevokeSession { credential_id, at } => revoke_session(rows, &credential_id, at).map(Reply::Revoked),
        Op::PublishRegistry(p) => publish_registry(rows, p).map(Reply::Published),
        Op::AskApproval { id, approval, shown } => approvals::ask(rows, &id, approval, &shown),
        Op::DecideApproval { id, decision } => approvals::decide(rows, &id, decision),
        Op::CloseApproval { id, at } => approvals::close(rows, &id, at),
        Op::ExpireApprovals { at } => approvals::expire(rows, at),
        Op::EnsureSecret { name, value } => approvals::ensure_secret(rows, &name, value).map(Reply::Secret),
    }
}

/// A revoked session's approvals close with it: nothing can run under them.
fn revoke_session(rows: &mut impl Rows, credential_id: &Ref, at: u64) -> R<bool> {
    approvals::revoked(rows, credential_id, at)?;
    rows.remove_session(credential_id)
}

fn sequence(rows: &mut impl Rows, ops: Vec<Op>) -> R<Vec<Result<Reply, WriteError>>> {
    let mut out = Vec::with_capacity(ops.len());
    let mut refused = false;
    for op in ops {
        if refused {
            out.push(Err(WriteError::Skipped));
            continue;
        }
        let r = match op {
            Op::Sequence(_) => Err(WriteError::InvalidCommit("sequences do not nest".into())),
            op => apply(rows, op),
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

fn object_exists(rows: &mut impl Rows, r: &Ref, offered: &[NewObject]) -> R<bool> {
    Ok(offered.iter().any(|o| o.hash == *r) || rows.has_object(r)?)
}

fn selected_world<Q: Rows + ?Sized>(rows: &mut Q) -> R<Option<World>> {
    let Some(head) = rows.head(SELECTED_HEAD)? else { return Ok(None) };
    match rows.world(&head)? {
        Some(w) => Ok(Some(w)),
        None => Err(WriteError::Storage(format!("selected head {head} has no world row"))),
    }
}

fn started_task(rows: &mut impl Rows, key: &TaskKey) -> R<Task> {
    match rows.task(key)? {
        Some(t) if t.state == TaskState::Started => Ok(t),
        other => Err(WriteError::TaskNotStarted { invocation_id: key.invocation_id(), state: other.map(|t| t.state) }),
    }
}

// ---- writes ----

fn write_objects(rows: &mut impl Rows, objects: &[NewObject]) -> R<()> {
    rows.insert_objects(objects)
}

fn put_objects(rows: &mut impl Rows, objects: &[NewObject]) -> R<()> {
    check_objects(objects)?;
    write_objects(rows, objects)
}

fn rest_intent(rows: &mut impl Rows, id: &str, digest: Ref) -> R<RestIntentOutcome> {
    match rows.receipt(id)? {
        Some(r) if r.request_digest != digest => Err(WriteError::RestIdReused(id.to_string())),
        Some(Receipt { result_ref: Some(world), .. }) => Ok(RestIntentOutcome::Resolved(world)),
        Some(_) => Ok(RestIntentOutcome::Journaled),
        None => {
            rows.put_receipt(id, &Receipt { request_digest: digest, result_ref: None })?;
            Ok(RestIntentOutcome::Journaled)
        }
    }
}

fn commit_world(rows: &mut impl Rows, c: RestCommit) -> R<Ref> {
    if let Some(id) = &c.invocation_id {
        match rows.receipt(id)? {
            Some(r) if r.request_digest != c.request_digest => return Err(WriteError::RestIdReused(id.clone())),
            Some(Receipt { result_ref: Some(world), .. }) => return Ok(world),
            _ => {}
        }
    }
    let checked = check_rest_commit(rows, &c).and_then(|()| c.charge.as_ref().map(|ch| debit_of(rows, ch)).transpose());
    let debit = match checked {
        Ok(debit) => debit,
        Err(e) => {
            // Definitely not committed: drop this attempt's intent, so the
            // receipt reads not-started and the id can be used again.
            if let Some(id) = &c.invocation_id {
                rows.remove_receipt(id)?;
            }
            return Err(e);
        }
    };
    rows.append(Append { objects: &c.objects, entry: &c.entry, world: &c.next_world, task: None })?;
    if let (Some(charge), Some(debit)) = (&c.charge, debit) {
        journal_commit(rows, charge, debit, c.entry.header.entry_index)?;
    }
    if let Some(id) = &c.invocation_id {
        let receipt = Receipt { request_digest: c.request_digest, result_ref: Some(c.next_world.world_ref) };
        rows.put_receipt(id, &receipt)?;
    }
    Ok(c.next_world.world_ref)
}

/// What a REST commit's charge would debit, checked before anything is
/// written: the spend it finds, and the debit.
fn debit_of(rows: &mut impl Rows, charge: &CommitCharge) -> R<(u64, Debit)> {
    check_objects(std::slice::from_ref(&charge.record))?;
    let spent = rows.spent(&charge.episode, &charge.effect, &charge.scope)?;
    let remaining = charge.grant_budget.saturating_sub(spent);
    if charge.cost > remaining {
        return Err(WriteError::BudgetExhausted { remaining });
    }
    Ok((spent, Debit { budget_before: remaining, budget_after: remaining - charge.cost }))
}

/// The commit's journal item (intent and outcome, both naming its record,
/// keyed by the entry) and its debit, in the commit's transaction.
fn journal_commit(
    rows: &mut impl Rows,
    charge: &CommitCharge,
    (spent, debit): (u64, Debit),
    entry_index: u64,
) -> R<()> {
    let key = crate::model::commit_journal_id(entry_index);
    write_objects(rows, std::slice::from_ref(&charge.record))?;
    let intent = EffectIntent {
        episode: charge.episode.clone(),
        effect_id: "commit".into(),
        effect: charge.effect.clone(),
        scope: charge.scope.clone(),
        cost: charge.cost,
        request_ref: charge.record.hash,
        budget_before: debit.budget_before,
        budget_after: debit.budget_after,
        at: charge.at,
        credential: Some(charge.credential),
    };
    rows.insert_intent(&key, 0, &intent)?;
    let outcome = EffectOutcome {
        status: OutcomeStatus::Ok,
        record_ref: Some(charge.record.hash),
        result_ref: None,
        at: charge.at,
    };
    rows.insert_outcome(&key, 0, &outcome)?;
    rows.set_spent(&charge.episode, &charge.effect, &charge.scope, spent + charge.cost)
}

/// The kernel derives and checks chain integrity itself instead of trusting the caller.
fn check_rest_commit(rows: &mut impl Rows, c: &RestCommit) -> R<()> {
    let selected = rows.head(SELECTED_HEAD)?;
    if c.observed_head != selected {
        return Err(WriteError::HeadConflict { observed: c.observed_head, selected });
    }
    let h = &c.entry.header;
    let next = rows.log_len()?;
    let bad = |m: String| Err(WriteError::InvalidCommit(m));
    if h.entry_index != next {
        return bad(format!("entry.header.entryIndex must be {next}, the next log index"));
    }
    if h.written_by.is_empty() || h.written_by.len() > LABEL_MAX {
        return bad(format!("entry.header.writtenBy must be 1-{LABEL_MAX} bytes"));
    }
    if let Some(world) = selected_world(rows)?
        && h.prev_entry_hash != world.log_head
    {
        return bad(format!("entry.header.prevEntryHash must be {}, the selected world's logHead", world.log_head));
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
    check_objects(&c.objects)?;
    if !object_exists(rows, &c.entry.transition_ref, &c.objects)? {
        return bad("entry.transitionRef must name an object in this commit or in the store".into());
    }
    // verify requires these of every coordinator-written entry; refuse what it would flag.
    if h.written_by.starts_with("coordinator:") {
        for (field, r) in [("transitionFn", &h.transition_fn), ("interpreter", &h.interpreter)] {
            if !object_exists(rows, r, &c.objects)? {
                return bad(format!("entry.header.{field} must name an object when writtenBy is coordinator:*"));
            }
        }
    }
    Ok(())
}

/// The row of a task that starts now.
fn started(digest: Ref, at: u64, transition: String, context: Option<String>, message_id: Option<String>) -> Task {
    Task {
        request_digest: digest,
        state: TaskState::Started,
        started_at: at,
        committed: None,
        effect_records: vec![],
        transition,
        ended_at: None,
        effects: vec![],
        context,
        message_id,
        run: None,
    }
}

/// A started task's progress replaces the last in its row; for a task that
/// ended, or is no task, nothing is written. Its tail is cut to its bound.
fn task_progress(rows: &mut impl Rows, key: &TaskKey, mut progress: TaskProgress) -> R<()> {
    let Some(mut task) = rows.task(key)? else { return Ok(()) };
    let Some(run) = task.run.as_mut().filter(|_| task.state == TaskState::Started) else { return Ok(()) };
    if progress.tail.len() > TASK_PROGRESS_TAIL_MAX {
        let mut cut = progress.tail.len() - TASK_PROGRESS_TAIL_MAX;
        while !progress.tail.is_char_boundary(cut) {
            cut += 1;
        }
        progress.tail.drain(..cut);
    }
    run.progress = Some(progress);
    rows.update_task(key, &task)
}

/// A task that ends keeps no progress: only a running one needs it.
fn without_progress(task: &mut Task) {
    if let Some(run) = task.run.as_mut() {
        run.progress = None;
    }
}

/// The first ask to cancel a started task is kept in its row; a later one,
/// or one for a task that ended or is no task, changes nothing.
fn cancel_task(rows: &mut impl Rows, key: &TaskKey, at: u64) -> R<CancelAsk> {
    let Some(mut task) = rows.task(key)? else { return Ok(CancelAsk::Unknown) };
    if task.state != TaskState::Started {
        return Ok(CancelAsk::Ended(task.state));
    }
    let Some(run) = task.run.as_mut() else { return Ok(CancelAsk::NotARun) };
    if let Some(first) = run.cancel_asked_at {
        return Ok(CancelAsk::AskedBefore(first));
    }
    run.cancel_asked_at = Some(at);
    rows.update_task(key, &task)?;
    Ok(CancelAsk::Asked)
}

fn begin_task(rows: &mut impl Rows, key: &TaskKey, task: Task) -> R<BeginOutcome> {
    // The journal is keyed by the invocation id; two keys with one id would share it.
    if TaskKey::from_invocation_id(&key.invocation_id()).as_ref() != Some(key) {
        return Err(WriteError::InvalidCommit(format!(
            "task key {}: episode and task id must be non-empty and contain no ':'",
            key.invocation_id()
        )));
    }
    match create_call(rows, key, &task)? {
        Some(existing) => Ok(BeginOutcome::Existing(Box::new(existing))),
        None => Ok(BeginOutcome::Started),
    }
}

fn record_intent(rows: &mut impl Rows, i: IntentRequest) -> R<Debit> {
    started_task(rows, &i.task)?;
    let inv = i.task.invocation_id();
    if rows.has_intent(&inv, i.ordinal)? {
        return Err(WriteError::IntentExists { invocation_id: inv, ordinal: i.ordinal });
    }
    check_objects(std::slice::from_ref(&i.request))?;
    let spent = rows.spent(&i.task.episode, &i.effect, &i.scope)?;
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
        credential: i.credential,
    };
    if let Some(approval) = &i.approval {
        approvals::check_use(rows, approval, &i.task.episode, i.at)?;
    }
    write_objects(rows, std::slice::from_ref(&i.request))?;
    if let Some(approval) = &i.approval {
        approvals::use_once(rows, approval)?;
    }
    rows.insert_intent(&inv, i.ordinal, &intent)?;
    rows.set_spent(&i.task.episode, &i.effect, &i.scope, spent + i.cost)?;
    Ok(debit)
}

fn record_outcome(rows: &mut impl Rows, o: OutcomeRequest) -> R<()> {
    let inv = o.task.invocation_id();
    if !rows.has_intent(&inv, o.ordinal)? {
        return Err(WriteError::NoIntent { invocation_id: inv, ordinal: o.ordinal });
    }
    if rows.has_outcome(&inv, o.ordinal)? {
        return Err(WriteError::OutcomeExists { invocation_id: inv, ordinal: o.ordinal });
    }
    let mut objects = vec![o.record.clone()];
    objects.extend(o.result.iter().cloned());
    check_objects(&objects)?;
    let task = rows.task(&o.task)?;
    write_objects(rows, &objects)?;
    let outcome = EffectOutcome {
        status: o.status,
        record_ref: Some(o.record.hash),
        result_ref: o.result.as_ref().map(|r| r.hash),
        at: o.at,
    };
    rows.insert_outcome(&inv, o.ordinal, &outcome)?;
    if let Some(mut task) = task {
        task.effect_records.push(o.record.hash);
        rows.update_task(&o.task, &task)?;
    }
    Ok(())
}

fn commit_invocation(rows: &mut impl Rows, c: InvocationCommit) -> R<Committed> {
    let task = started_task(rows, &c.task)?;
    if rows.registry_entry(&c.registry, &c.transition_id)? != Some(c.transition_fn) {
        return Err(WriteError::TransitionChanged { id: c.transition_id });
    }
    if !rows.world_selected()? {
        return Err(WriteError::NoWorld);
    }
    check_objects(&c.objects)?;
    let effects = &c.effects;
    if let Some(bad) = effects.iter().find(|e| e.debited() > 0 && e.record.is_none()) {
        return Err(WriteError::InvalidCommit(format!("effect {} ran, so it has a record", bad.id)));
    }
    for (what, r) in [
        ("invocation record", &c.transition_ref),
        ("output", &c.state_root),
        ("transitionFn", &c.transition_fn),
        ("interpreter", &c.interpreter),
    ] {
        if !object_exists(rows, r, &c.objects)? {
            return Err(WriteError::InvalidCommit(format!("the {what} {r} is not in the commit or the store")));
        }
    }
    let mut task = task;
    without_progress(&mut task);
    task.ended_at = Some(c.at);
    task.effects = c.effects.clone();
    if task.transition.is_empty() {
        task.transition = c.transition_id.clone();
    }
    task.state = TaskState::Committed;
    let (key, told) = (c.task.clone(), task.clone());
    let committed = rows.append_invocation(Pending { commit: c, task })?;
    rows.call_ended(&key, &told)?;
    Ok(committed)
}

/// Chains an invocation onto `head`, the selected world: its entry, the
/// world it selects, what its caller is told, and its task as committed. The
/// one place an invocation's entry hash and world ref are derived.
pub(crate) fn chain(head: &World, p: Pending) -> Chained {
    let c = p.commit;
    let entry_index = head.revision + 1;
    let header = EntryHeader {
        entry_index,
        semantics_epoch: c.semantics_epoch,
        transition_fn: c.transition_fn,
        interpreter: c.interpreter,
        prev_entry_hash: head.log_head,
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
    let committed = Committed { entry_index, entry_hash, world_ref: world.world_ref, output_ref: c.state_root };
    let mut task = p.task;
    task.state = TaskState::Committed;
    task.committed = Some(committed.clone());
    Chained { key: c.task, objects: c.objects, entry, world, committed, task }
}

fn end_task(rows: &mut impl Rows, key: &TaskKey, state: TaskState, at: u64) -> R<()> {
    if !matches!(state, TaskState::NotCommitted | TaskState::Uncertain) {
        return Err(WriteError::InvalidCommit(format!("a task cannot be ended as {}", state.as_str())));
    }
    let mut task = started_task(rows, key)?;
    task.state = state;
    finish_task(rows, key, task, at)
}

/// A started task leaves `started` without a commit: its effects as
/// journaled, its end time, the episode's counts.
fn finish_task(rows: &mut impl Rows, key: &TaskKey, mut task: Task, at: u64) -> R<()> {
    without_progress(&mut task);
    task.ended_at = Some(at);
    task.effects = effects_from_journal(rows, key)?;
    rows.call_ended(key, &task)?;
    rows.update_task(key, &task)
}

fn mint_session(rows: &mut impl Rows, id: &Ref, session: &Session) -> R<()> {
    if rows.has_session(id)? {
        return Err(WriteError::SessionExists);
    }
    rows.insert_session(id, session)
}

fn publish_registry(rows: &mut impl Rows, p: RegistryPublish) -> R<PublishOutcome> {
    if p.name == SELECTED_HEAD {
        return Err(WriteError::InvalidCommit(format!("{SELECTED_HEAD} holds the selected world, not a registry")));
    }
    let current = rows.head(&p.name)?;
    if current == Some(p.head) {
        return Ok(PublishOutcome::Unchanged);
    }
    if current != p.expected {
        return Err(WriteError::RegistryConflict { name: p.name, expected: p.expected, actual: current });
    }
    check_objects(&p.objects)?;
    if !object_exists(rows, &p.head, &p.objects)? {
        return Err(WriteError::InvalidCommit(format!("registry head {} is not in the publish or the store", p.head)));
    }
    let mut seen = HashSet::new();
    if let Some((dup, _)) = p.entries.iter().find(|(id, _)| !seen.insert(id.as_str())) {
        return Err(WriteError::InvalidCommit(format!("transition id {dup} appears twice")));
    }
    for (id, f) in &p.entries {
        if !object_exists(rows, f, &p.objects)? {
            return Err(WriteError::InvalidCommit(format!(
                "transition {id}: transitionFn {f} is not in the publish or the store"
            )));
        }
    }
    write_objects(rows, &p.objects)?;
    rows.set_head(&p.name, p.head)?;
    rows.replace_registry_entries(&p.name, &p.entries)?;
    Ok(PublishOutcome::Moved)
}

// ---- the episode index ----
//
// Kept by the writes that start and end calls: each episode's summary row
// (`EpisodeRow`) and each call's position among its episode's calls, moved
// as `episodes` says, once for both engines. `index_episodes` derives it
// from the task rows alone (an upgraded store), and the verifier checks it
// against them.

/// A new task row of `key`'s episode, told to the index. `None` when the
/// row was new, else the row already there (nothing is written).
fn create_call(rows: &mut impl Rows, key: &TaskKey, task: &Task) -> R<Option<Task>> {
    if let Some(existing) = rows.create_task(key, task)? {
        return Ok(Some(existing));
    }
    rows.call_created(key, task)?;
    Ok(None)
}

/// A task row written whole (an import): a new position, its state counted.
fn call_imported(rows: &mut impl Rows, key: &TaskKey, task: &Task) -> R<()> {
    rows.insert_task(key, task)?;
    rows.call_created(key, task)
}

/// A call that ended without committing: its effects as the journal holds
/// them (a denial travels only with a commit, so none is here).
fn effects_from_journal(rows: &mut impl Rows, key: &TaskKey) -> R<Vec<CallEffect>> {
    Ok(rows.journal(&key.invocation_id())?.iter().map(CallEffect::journaled).collect())
}

// ---- recovery ----

/// Fail-closed recovery after a restart: every intent without an outcome becomes
/// `indeterminate` (its debit stays), every task left `started` ends `uncertain`
/// if it journaled an effect and `not-committed` otherwise. Idempotent.
pub(crate) fn recover(rows: &mut impl Rows, at: u64) -> R<RecoveryReport> {
    let mut report = RecoveryReport::default();
    for (inv, ordinal) in rows.open_intents()? {
        if rows.has_outcome(&inv, ordinal)? {
            rows.close_intent(&inv, ordinal)?;
            continue;
        }
        let outcome = EffectOutcome { status: OutcomeStatus::Indeterminate, record_ref: None, result_ref: None, at };
        rows.insert_outcome(&inv, ordinal, &outcome)?;
        report.indeterminate_effects.push(format!("{inv}#{ordinal}"));
    }
    for key in rows.open_tasks()? {
        let inv = key.invocation_id();
        match rows.task(&key)? {
            Some(mut task) if task.state == TaskState::Started => {
                task.state = if rows.has_intents(&inv)? { TaskState::Uncertain } else { TaskState::NotCommitted };
                report.tasks.push((inv, task.state));
                finish_task(rows, &key, task, at)?;
            }
            _ => rows.close_task(&key)?,
        }
    }
    Ok(report)
}

// ---- import ----

/// Writes one record of an export stream into a fresh store. Derived rows
/// (indexes, open sets) are rebuilt here, never taken from the stream.
pub(crate) fn import(rows: &mut impl Rows, record: Record) -> R<()> {
    use Record as X;
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
            put_objects(rows, &[o])
        }
        X::Entry(e) => rows.insert_entry(&e),
        X::World(w) => rows.insert_world(&w),
        X::Head { name, head } => rows.set_head(&name, head),
        X::RegistryEntry { registry, id, transition_fn } => rows.put_registry_entry(&registry, &id, transition_fn),
        X::Intent { invocation_id, ordinal, intent } => {
            rows.insert_intent(&invocation_id, ordinal, &intent)?;
            if rows.has_outcome(&invocation_id, ordinal)? {
                rows.close_intent(&invocation_id, ordinal)?;
            }
            Ok(())
        }
        X::Outcome { invocation_id, ordinal, outcome } => {
            if !rows.has_intent(&invocation_id, ordinal)? {
                return Err(WriteError::NoIntent { invocation_id, ordinal });
            }
            rows.insert_outcome(&invocation_id, ordinal, &outcome)
        }
        X::Spend { episode, effect, scope, units } => rows.set_spent(&episode, &effect, &scope, units),
        X::Task { key, task } => call_imported(rows, &key, &task),
        X::Receipt { id, receipt } => rows.put_receipt(&id, &receipt),
        X::Session { credential_id, session } => mint_session(rows, &credential_id, &session),
        X::Approval { id, approval } => rows.insert_approval(&id, &approval),
        X::ApprovalWait { credential_id, task_id, approval } => {
            rows.put_approval_wait(&credential_id, &task_id, &approval)
        }
    }
}
