//! Approval: between the broker's decision and the effect's intent + debit,
//! for an effect under a grant that asks. The call finds (or opens) the
//! approval of its session's exact request and goes on only with a yes:
//! `Approved` (the intent uses it up, in the debit's transaction),
//! `Refused` (a denial recorded under its decision, or no room to ask; never
//! debited), or it stops `Pending` with nothing run, debited or journaled.
//! An approval found past its expiry serves nobody: it is closed (decided
//! expired by the clock, if it was pending) and the call asks afresh.
//! An A2A task that waits is indexed by its id in the store (the ask's
//! transaction), so the task stays findable however the approval ends.

use super::Stop::{self, Failed};
use super::plan::PlannedEffect;
use super::{Answer, CallError, Invocation, PendingApproval};
use crate::approvals::{
    self, Asked, DENIED_APPROVAL, DENIED_NO_ROOM_EPISODE, DENIED_NO_ROOM_SESSION, DENIED_NO_ROOM_STORE,
};
use crate::effects::{self, Denial};
use world_store::*;

/// The approval phase's word on one effect.
pub(super) enum Approval {
    /// Run it under this approval (the intent checks and uses it).
    Approved { using: ApprovalUse, decision: Ref },
    /// Record it denied as `denial` says, naming the decision if there was
    /// one (`remaining`: what the grant has left).
    Refused { denial: Denial, decision: Option<Ref>, remaining: u64 },
}

/// What the episode spent on an effect, the open approval of its request,
/// and the approval its A2A task waits on by the index.
type Standing = (u64, Option<(String, ApprovalRow)>, Option<String>);

/// Asks and answers for one effect at most this many times (an approval
/// found spent or expired is closed and asked afresh).
const ASK_ROUNDS_MAX: usize = 2;

impl Invocation<'_> {
    /// Finds or opens the approval of `e` under a grant asking `who`, whose
    /// budget is `grant_budget`. A person is asked only about what the budget
    /// allows.
    pub(super) async fn approve(
        &mut self,
        e: &PlannedEffect,
        who: Approver,
        grant_budget: u64,
    ) -> Result<Approval, Stop> {
        let mut asked = Asked {
            changed: vec![],
            episode: &self.call.episode,
            credential: self.call.credential,
            transition: &self.d.id,
            effect: &e.effect,
            scope: &e.scope,
            cost: e.cost,
            budget_left: 0,
            payload: &e.payload,
            approver: who,
            arguments: &self.call.arguments,
            task: (self.call.surface == Surface::A2a).then_some(self.call.task_id.as_str()),
        };
        // One read: the spend, and the open approval if there is one (the
        // episode's hold orders this call after every earlier one), so that
        // only a first ask, or an A2A task's first wait on it, writes.
        let digest = asked.digest();
        let (spent, mut found, waits_on) = self.standing(&asked, digest).await?;
        if self.waits_unindexed(&asked, found.as_ref(), waits_on.as_deref()) {
            // Asked through the store, which finds it open and indexes this
            // task as waiting on it in the same transaction.
            found = None;
        }
        asked.budget_left = grant_budget.saturating_sub(spent);
        let remaining = asked.budget_left;
        if e.cost > remaining {
            let denial = self.denial(e, effects::DENIED_BUDGET, Some(grant_budget), remaining, spent);
            return Ok(Approval::Refused { denial, decision: None, remaining });
        }
        let ttl = self.host.approval_ttl();
        // What World's tools changed since the last command is read only for
        // a question a person is to see: not when an approval is usable.
        let mut unread = e.effect == effects::worktree::EXEC;
        for round in 0..ASK_ROUNDS_MAX {
            let now = crate::clock::now();
            let open = if round == 0 { found.take() } else { self.standing(&asked, digest).await?.1 };
            let open = match self.call.answer.clone() {
                Some(answer) => Some(self.answering(open, answer, now).await?),
                None => open,
            };
            let (id, row) = match open {
                Some(found) => found,
                None => match self
                    .store_write(self.shown_changes(&mut asked, &mut unread).await?.ask(digest, now, ttl))
                    .await?
                {
                    Ok(Reply::Approval(id, row)) => (id, *row),
                    Err(e) => match no_room(&e) {
                        Some(label) => {
                            let denial = Denial { label, reason: no_room_reason(&e) };
                            return Ok(Approval::Refused { denial, decision: None, remaining });
                        }
                        None => return Err(Failed(CallError::NotCommitted(format!("asking for approval: {e:?}")))),
                    },
                    Ok(other) => {
                        return Err(Failed(CallError::NotCommitted(format!("asking for approval: {other:?}"))));
                    }
                },
            };
            match self.settled(&id, &row, &mut asked, &mut unread, now).await? {
                Some(Approval::Refused { denial, decision, .. }) => {
                    return Ok(Approval::Refused { denial, decision, remaining });
                }
                Some(approval) => return Ok(approval),
                None => continue,
            }
        }
        Err(Failed(CallError::NotCommitted("the approval kept changing while the call read it".into())))
    }

    /// The approval a carried answer decides: exactly the pending one it
    /// names, found open for this request. Decided, used or expired since it
    /// was asked, the answer decides nothing, runs nothing and opens no new
    /// approval.
    async fn answering(
        &mut self,
        open: Option<(String, ApprovalRow)>,
        answer: Answer,
        now: u64,
    ) -> Result<(String, ApprovalRow), Stop> {
        match open {
            Some((id, row)) if answer.approval_id == id && row.state == ApprovalState::Pending => {
                let row = self.answered(&id, &row, answer, now).await?;
                Ok((id, row))
            }
            _ => Err(Failed(CallError::ApprovalAnswer(format!(
                "approval {} was decided or used already; call again without the answer to be asked afresh",
                answer.approval_id
            )))),
        }
    }

    /// What an open approval means for this call now: `None` when it was
    /// found spent and closed (ask afresh).
    async fn settled(
        &mut self,
        id: &str,
        row: &ApprovalRow,
        asked: &mut Asked<'_>,
        unread: &mut bool,
        now: u64,
    ) -> Result<Option<Approval>, Stop> {
        match row.state {
            ApprovalState::Pending if now < row.expires_at => {
                let asked = self.shown_changes(asked, unread).await?;
                Err(Failed(CallError::ApprovalPending(Box::new(PendingApproval {
                    id: id.to_string(),
                    approver: row.approver,
                    summary: asked.summary(),
                    effect: row.effect.clone(),
                    scope: row.scope.clone(),
                    cost: row.cost,
                    budget_left: asked.budget_left,
                    expires_at: row.expires_at,
                }))))
            }
            ApprovalState::Approved if row.usable(now) => {
                // The store decides an approval only with its decision object.
                let decision = row.decision.ok_or_else(|| {
                    Failed(CallError::NotCommitted(format!("approval {id} is approved but names no decision")))
                })?;
                Ok(Some(Approval::Approved { using: ApprovalUse { id: id.to_string(), digest: row.digest }, decision }))
            }
            ApprovalState::Denied if now < row.expires_at => {
                self.close(id, now).await?;
                let reason = format!(
                    "approval {id} of this exact request was denied, and the denial is recorded. \
                     Nothing ran and nothing was debited."
                );
                let denial = Denial { label: DENIED_APPROVAL, reason };
                Ok(Some(Approval::Refused { denial, decision: row.decision, remaining: 0 }))
            }
            // Past its expiry (a pending one is decided expired by the
            // store), or spent: it serves nobody, and the call asks afresh.
            ApprovalState::Pending | ApprovalState::Approved | ApprovalState::Denied | ApprovalState::Expired => {
                self.close(id, now).await?;
                Ok(None)
            }
        }
    }

    /// `asked`, naming what World's tools changed in the worktree since the
    /// episode's last command ran, read if `unread` (a command's question,
    /// about to be shown).
    async fn shown_changes<'q, 'a>(&self, asked: &'q mut Asked<'a>, unread: &mut bool) -> Result<&'q Asked<'a>, Stop> {
        if std::mem::take(unread) {
            let (host, episode) = (self.host.clone(), self.call.episode.clone());
            let read = tokio::task::spawn_blocking(move || {
                host.store().snapshot().and_then(|snap| super::changes::since_last_command(&snap, &episode))
            });
            asked.changed = match read.await {
                Ok(Ok(changed)) => changed,
                Ok(Err(e)) => {
                    return Err(Failed(CallError::Unavailable(format!("reading the worktree's changes: {e}"))));
                }
                Err(join) => {
                    return Err(Failed(CallError::Unavailable(format!("reading the worktree's changes: {join}"))));
                }
            };
        }
        Ok(asked)
    }

    /// The person's answer carried by this call, written as the decision.
    async fn answered(&mut self, id: &str, row: &ApprovalRow, answer: Answer, now: u64) -> Result<ApprovalRow, Stop> {
        if !answer.by.may_decide(row.approver) {
            return Err(Failed(CallError::ApprovalAnswer(format!(
                "approval {id} is the operator's to decide: `worldd approve {id}`"
            ))));
        }
        let Some(verdict) = answer.verdict else { return Ok(row.clone()) };
        let session_expires_at = self.call.expires_at;
        let ttl = self.host.approval_ttl();
        let op = approvals::decide(id, row, verdict, &answer.by, "", now, (ttl, session_expires_at));
        self.decided(op).await
    }

    async fn decided(&mut self, op: Op) -> Result<ApprovalRow, Stop> {
        decision(Some(self.store_write(op).await?))
    }

    async fn close(&mut self, id: &str, at: u64) -> Result<(), Stop> {
        closed(Some(self.store_write(Op::CloseApproval { id: id.to_string(), at }).await?))
    }

    /// Whether this call would wait on the open approval `found` without
    /// its A2A task being indexed as waiting on it (`waits_on`: the
    /// approval the index names for it). A call that carries an answer
    /// decides the approval instead of waiting on it.
    fn waits_unindexed(
        &self,
        asked: &Asked<'_>,
        found: Option<&(String, ApprovalRow)>,
        waits_on: Option<&str>,
    ) -> bool {
        let now = crate::clock::now();
        let waits = |(id, row): &(String, ApprovalRow)| {
            row.state == ApprovalState::Pending && now < row.expires_at && waits_on != Some(id.as_str())
        };
        asked.task.is_some() && self.call.answer.is_none() && found.is_some_and(waits)
    }

    /// What the episode spent on the effect, the open approval of the
    /// request, and (for an A2A task) the approval the task was last indexed
    /// as waiting on, from one snapshot.
    async fn standing(&self, asked: &Asked<'_>, digest: Ref) -> Result<Standing, Stop> {
        let (host, credential) = (self.host.clone(), asked.credential);
        let (episode, effect, scope) = (asked.episode.to_string(), asked.effect.to_string(), asked.scope.to_string());
        let task = asked.task.map(str::to_string);
        let read = tokio::task::spawn_blocking(move || {
            let snap = host.store().snapshot()?;
            let spent = snap.spent(&episode, &effect, &scope)?;
            let open = snap.open_approval(&credential, &digest)?;
            let waits_on = match &task {
                Some(task) => snap.awaited_approval(&credential, task)?.map(|(id, _)| id),
                None => None,
            };
            Ok::<_, ReadError>((spent, open, waits_on))
        });
        match read.await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(e)) => Err(Failed(CallError::Unavailable(format!("reading the approval: {e}")))),
            Err(join) => Err(Failed(CallError::Unavailable(format!("reading the approval: {join}")))),
        }
    }

    /// One durable request outside the call's own batches: an approval is
    /// the session's, not the task's, and asking writes no task row.
    async fn store_write(&self, op: Op) -> Result<Result<Reply, WriteError>, Stop> {
        match crate::writes::write(self.host.store(), op).await {
            Err(WriteError::OutOfSpace(why)) => Err(Failed(CallError::OutOfSpace(why))),
            Err(WriteError::Unavailable(why)) => {
                Err(Failed(CallError::Unavailable(format!("the store's database is unavailable: {why}"))))
            }
            Err(e @ (WriteError::WriterStopped(_) | WriteError::Unconfirmed(_) | WriteError::Storage(_))) => {
                Err(Failed(CallError::NotCommitted(e.to_string())))
            }
            r => Ok(r),
        }
    }
}

/// The label of a refusal for want of room to ask, naming the bound hit.
fn no_room(e: &WriteError) -> Option<&'static str> {
    match e {
        WriteError::SessionApprovalsFull(_) => Some(DENIED_NO_ROOM_SESSION),
        WriteError::EpisodeApprovalsFull(_) => Some(DENIED_NO_ROOM_EPISODE),
        WriteError::ApprovalsFull(_) => Some(DENIED_NO_ROOM_STORE),
        _ => None,
    }
}

/// Why nobody was asked: the bound the store named. No person said no.
fn no_room_reason(e: &WriteError) -> String {
    format!(
        "nobody was asked for approval: {e}. No person said no: nothing ran and nothing was debited, \
         and once open approvals are decided the same call asks again."
    )
}

/// The approval as a decision left it (`None`: the request never ran).
fn decision(reply: Option<Result<Reply, WriteError>>) -> Result<ApprovalRow, Stop> {
    match reply {
        Some(Ok(Reply::Approval(_, row))) => Ok(*row),
        Some(Err(
            e @ (WriteError::ApprovalRefused { .. } | WriteError::ApprovalExpired { .. } | WriteError::NoApproval(_)),
        )) => Err(Failed(CallError::ApprovalAnswer(e.to_string()))),
        other => Err(Failed(CallError::NotCommitted(format!("deciding an approval: {other:?}")))),
    }
}

/// Whether an approval was closed (`None`: the request never ran).
fn closed(reply: Option<Result<Reply, WriteError>>) -> Result<(), Stop> {
    match reply {
        Some(Ok(_)) => Ok(()),
        other => Err(Failed(CallError::NotCommitted(format!("closing an approval: {other:?}")))),
    }
}
