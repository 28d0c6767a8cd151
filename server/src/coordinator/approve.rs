//! Approval: between the broker's decision and the effect's intent + debit,
//! for an effect under a grant that asks. The call finds (or opens) the
//! approval of its session's exact request and goes on only with a yes:
//! `Approved` (the intent uses it up, in the debit's transaction),
//! `Refused` (a denial or expiry, recorded under its decision, never
//! debited), or it stops `Pending` with nothing run, debited or journaled.

use super::Stop::{self, Failed};
use super::plan::PlannedEffect;
use super::{Answer, CallError, Invocation, PendingApproval};
use crate::approvals::{self, Asked, DENIED_APPROVAL, DENIED_APPROVAL_EXPIRED, DENIED_NO_APPROVER};
use crate::effects;
use world_store::*;

/// The approval phase's word on one effect.
pub(super) enum Approval {
    /// Run it under this approval (the intent checks and uses it).
    Approved { using: ApprovalUse, decision: Ref },
    /// Record it denied with `label`, naming the decision if there was one
    /// (`remaining`: what the grant has left).
    Refused { label: &'static str, decision: Option<Ref>, remaining: u64 },
}

/// Asks and answers for one effect at most this many times (an approval
/// found spent is closed and asked afresh).
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
        // only a first ask writes.
        let digest = asked.digest();
        let (spent, mut found) = self.standing(&asked, digest).await?;
        asked.budget_left = grant_budget.saturating_sub(spent);
        let remaining = asked.budget_left;
        if e.cost > remaining {
            return Ok(Approval::Refused { label: effects::DENIED_BUDGET, decision: None, remaining });
        }
        let ttl = self.host.approval_ttl();
        for round in 0..ASK_ROUNDS_MAX {
            let now = crate::clock::now();
            let open = if round == 0 { found.take() } else { self.standing(&asked, digest).await?.1 };
            let (id, row) = match open {
                Some(found) => found,
                None => match self.store_write(asked.ask(digest, now, ttl)).await? {
                    Ok(Reply::Approval(id, row)) => (id, *row),
                    Err(
                        WriteError::ApprovalsFull(_)
                        | WriteError::EpisodeApprovalsFull(_)
                        | WriteError::SessionApprovalsFull(_),
                    ) => {
                        return Ok(Approval::Refused { label: DENIED_NO_APPROVER, decision: None, remaining });
                    }
                    other => return Err(Failed(CallError::NotCommitted(format!("asking for approval: {other:?}")))),
                },
            };
            let row = match self.call.answer.clone() {
                Some(answer) if answer.approval_id == id && row.state == ApprovalState::Pending => {
                    self.answered(&id, &row, answer, now).await?
                }
                // An answer is for one pending approval: decided (or used)
                // since it was asked, it decides nothing and runs nothing.
                Some(answer) => {
                    return Err(Failed(CallError::ApprovalAnswer(format!(
                        "approval {} was decided or used already; call again without the answer to be asked afresh",
                        answer.approval_id
                    ))));
                }
                None => row,
            };
            match self.settled(&id, &row, &asked, now).await? {
                Some(Approval::Refused { label, decision, .. }) => {
                    return Ok(Approval::Refused { label, decision, remaining });
                }
                Some(approval) => return Ok(approval),
                None => continue,
            }
        }
        Err(Failed(CallError::NotCommitted("the approval kept changing while the call read it".into())))
    }

    /// What an open approval means for this call now: `None` when it was
    /// found spent and closed (ask afresh).
    async fn settled(
        &mut self,
        id: &str,
        row: &ApprovalRow,
        asked: &Asked<'_>,
        now: u64,
    ) -> Result<Option<Approval>, Stop> {
        match row.state {
            ApprovalState::Pending if now < row.expires_at => {
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
            ApprovalState::Pending => {
                // Decided by the clock and closed in one batch: never expired and still open.
                let decide = approvals::decide(id, row, None, &approvals::Decider::Clock, "", now, (0, 0));
                let close = Op::CloseApproval { id: id.to_string(), at: now };
                let mut replies = match self.store_write(Op::Sequence(vec![decide, close])).await? {
                    Ok(Reply::Sequence(replies)) => replies.into_iter(),
                    other => return Err(Failed(CallError::NotCommitted(format!("expiring an approval: {other:?}")))),
                };
                let expired = decision(replies.next())?;
                closed(replies.next())?;
                Ok(Some(Approval::Refused { label: DENIED_APPROVAL_EXPIRED, decision: expired.decision, remaining: 0 }))
            }
            ApprovalState::Approved if row.usable(now) => {
                // The store decides an approval only with its decision object.
                let decision = row.decision.ok_or_else(|| {
                    Failed(CallError::NotCommitted(format!("approval {id} is approved but names no decision")))
                })?;
                Ok(Some(Approval::Approved { using: ApprovalUse { id: id.to_string(), digest: row.digest }, decision }))
            }
            ApprovalState::Approved => {
                self.close(id, now).await?;
                Ok(None)
            }
            ApprovalState::Denied | ApprovalState::Expired => {
                self.close(id, now).await?;
                let label = if row.state == ApprovalState::Denied { DENIED_APPROVAL } else { DENIED_APPROVAL_EXPIRED };
                Ok(Some(Approval::Refused { label, decision: row.decision, remaining: 0 }))
            }
        }
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
        let op = approvals::decide(id, row, Some(verdict), &answer.by, "", now, (ttl, session_expires_at));
        self.decided(op).await
    }

    async fn decided(&mut self, op: Op) -> Result<ApprovalRow, Stop> {
        decision(Some(self.store_write(op).await?))
    }

    async fn close(&mut self, id: &str, at: u64) -> Result<(), Stop> {
        closed(Some(self.store_write(Op::CloseApproval { id: id.to_string(), at }).await?))
    }

    /// What the episode spent on the effect, and the open approval of the
    /// request, from one snapshot.
    async fn standing(&self, asked: &Asked<'_>, digest: Ref) -> Result<(u64, Option<(String, ApprovalRow)>), Stop> {
        let (host, credential) = (self.host.clone(), asked.credential);
        let (episode, effect, scope) = (asked.episode.to_string(), asked.effect.to_string(), asked.scope.to_string());
        let read = tokio::task::spawn_blocking(move || {
            let snap = host.store().snapshot()?;
            Ok::<_, ReadError>((snap.spent(&episode, &effect, &scope)?, snap.open_approval(&credential, &digest)?))
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
