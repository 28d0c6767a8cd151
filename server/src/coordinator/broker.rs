//! The broker: one planned effect decided under the call's grants (name →
//! scope → liveness in `effects::decide`), then its intent and debit made
//! durable in one batch, the budget checked inside the store. A denial is
//! recorded, never debited. Runs under the episode's lock and hold.

use super::Stop::{self, Failed};
use super::approve::Approval;
use super::plan::{PlannedEffect, planned};
use super::{CallError, Invocation};
use crate::effects::{self, Decision, Denial, Record};
use serde_json::Value;
use std::path::PathBuf;
use world_store::*;

/// The broker's word on one effect.
pub(super) enum Brokered {
    /// Its intent (which carries the request) and debit are durable: the
    /// handler runs next (a command bound to its worktree over the `.git`
    /// of the walk its request names, `walked`).
    Allowed { request: Ref, debit: Debit, approval: Option<Ref>, walked: Option<Vec<PathBuf>> },
    /// Denied, by a grant or by the budget.
    Denied(Box<Recorded>),
}

/// What one brokered effect came to: ran, failed or denied.
pub(super) struct Recorded {
    pub(super) id: String,
    pub(super) effect: String,
    pub(super) status: &'static str,
    pub(super) record: Ref,
    pub(super) output: Option<Value>,
    /// A denied effect's label and reason, as the agent is told them.
    pub(super) denial: Option<Denial>,
    /// Objects the commit must carry (denials are journaled nowhere else).
    pub(super) objects: Vec<NewObject>,
    /// The outcome still to be made durable (with the commit, when possible).
    pub(super) outcome: Option<OutcomeRequest>,
    /// How the episode view tells it.
    pub(super) told: CallEffect,
}

impl Invocation<'_> {
    /// Waits, on the blocking pool, until this node alone among the store's
    /// nodes runs the episode's effects.
    pub(super) async fn hold_episode(&self) -> Result<EpisodeHold, Stop> {
        let host = self.host.clone();
        let episode = self.call.episode.clone();
        match tokio::task::spawn_blocking(move || host.store().hold_episode(&episode)).await {
            Ok(Ok(hold)) => Ok(hold),
            Ok(Err(WriteError::Unavailable(why))) => {
                Err(Failed(CallError::Unavailable(format!("the store's database is unavailable: {why}"))))
            }
            Ok(Err(e)) => Err(Failed(CallError::NotCommitted(e.to_string()))),
            Err(join) => Err(Failed(CallError::Unavailable(format!("episode hold: {join}")))),
        }
    }

    /// Decides one effect; an allowed one leaves with its intent and debit durable.
    pub(super) async fn broker(&mut self, e: &PlannedEffect) -> Result<Brokered, Stop> {
        let now = crate::clock::now();
        let decision = effects::decide(&self.call.grants, self.call.expires_at, now, &e.effect, &e.scope);
        let (mut bound, mut walked) = (None, None);
        let e = match decision {
            Decision::Allow { ask: Some(_), .. } if e.effect == crate::effects::worktree::EXEC => {
                let (e, git) = self.bound_to_worktree(e).await?;
                walked = Some(git);
                &*bound.insert(e)
            }
            _ => e,
        };
        let payload = canonical::to_vec(&e.payload);
        let request = NewObject::derived(
            effects::EFFECT_REQUEST,
            effects::BROKER_PROVENANCE,
            effects::request_bytes(&e.effect, &e.scope, e.cost, now, &payload),
        );
        let (grant_budget, ask) = match decision {
            Decision::Deny { label, grant_budget } => {
                let spent = match grant_budget {
                    Some(_) => self.spent(&e.effect, &e.scope).await?,
                    None => 0,
                };
                let remaining = grant_budget.map_or(0, |b| b.saturating_sub(spent));
                let denial = self.denial(e, label, grant_budget, remaining, spent);
                return Ok(Brokered::Denied(Box::new(self.denied(e, request, denial, remaining, None))));
            }
            Decision::Allow { grant_budget, ask } => (grant_budget, ask),
        };
        let approval = match ask {
            None => None,
            Some(who) => match self.approve(e, who, grant_budget).await? {
                Approval::Approved { using, decision } => Some((using, decision)),
                Approval::Refused { denial, decision, remaining } => {
                    return Ok(Brokered::Denied(Box::new(self.denied(e, request, denial, remaining, decision))));
                }
            },
        };
        let intent = IntentRequest {
            task: self.key.clone(),
            ordinal: 0,
            effect_id: e.id.clone(),
            effect: e.effect.clone(),
            scope: e.scope.clone(),
            cost: e.cost,
            grant_budget,
            request: request.clone(),
            at: now,
            approval: approval.as_ref().map(|(using, _)| using.clone()),
            credential: Some(self.call.credential),
        };
        // The task row and the intent + debit share one durable batch; the row
        // still precedes the intent, and both precede the effect.
        let debit = match self.write(vec![Op::RecordIntent(intent)]).await?.pop() {
            Some(Ok(Reply::Debited(d))) => d,
            Some(Err(WriteError::BudgetExhausted { remaining })) => {
                let decision = approval.map(|(_, d)| d);
                // The episode's spend, for the reason (another session's grant may have passed this one's budget).
                let spent = self.spent(&e.effect, &e.scope).await.unwrap_or(grant_budget.saturating_sub(remaining));
                let denial = self.denial(e, effects::DENIED_BUDGET, Some(grant_budget), remaining, spent);
                return Ok(Brokered::Denied(Box::new(self.denied(e, request, denial, remaining, decision))));
            }
            // Used up or expired since it was read: nothing ran; the call
            // can be sent again, and asks afresh.
            Some(Err(e @ WriteError::ApprovalRefused { .. })) if self.call.answer.is_some() => {
                return Err(Failed(CallError::ApprovalAnswer(e.to_string())));
            }
            Some(Err(e @ WriteError::ApprovalRefused { .. })) => {
                return Err(Failed(CallError::NotCommitted(format!("{e}; call again to be asked afresh"))));
            }
            other => return Err(Failed(CallError::NotCommitted(format!("journaling the effect intent: {other:?}")))),
        };
        self.ran = true;
        let approval = approval.map(|(_, d)| d);
        Ok(Brokered::Allowed { request: request.hash, debit, approval, walked })
    }

    /// A command under a grant that asks, bound to the worktree it would run
    /// over: its request names the worktree's state (`effects::state`), so an
    /// approval of it covers that state alone, and any change since asks
    /// again. With it, every `.git` the same walk found: the run binds those,
    /// and walks the worktree no second time.
    async fn bound_to_worktree(&self, e: &PlannedEffect) -> Result<(PlannedEffect, Vec<PathBuf>), Stop> {
        let wt = self.host.worktrees().worktree(&self.call.episode);
        let dir = wt.map(|w| w.dir).ok_or_else(|| {
            Failed(CallError::NoHandler { missing: format!("episode {} has no worktree", self.call.episode) })
        })?;
        let read = tokio::task::spawn_blocking(move || effects::state::worktree_state(&dir));
        let bound = read
            .await
            .map_err(|join| Failed(CallError::Unavailable(format!("reading the worktree's state: {join}"))))?
            .map_err(|e| Failed(CallError::ExecutionFailed(e.to_string())))?;
        let mut payload = e.payload.clone();
        if let Some(fields) = payload.as_object_mut() {
            fields.insert(crate::approvals::WORKTREE_STATE.into(), Value::String(bound.state.to_string()));
        }
        Ok((PlannedEffect { payload, ..e.clone() }, bound.git))
    }

    async fn spent(&self, effect: &str, scope: &str) -> Result<u64, CallError> {
        let d = self.host.clone();
        let (ep, ef, sc) = (self.call.episode.clone(), effect.to_string(), scope.to_string());
        tokio::task::spawn_blocking(move || d.store().snapshot().and_then(|s| s.spent(&ep, &ef, &sc)))
            .await
            .map_err(|e| CallError::Unavailable(e.to_string()))?
            .map_err(|e| CallError::Unavailable(e.to_string()))
    }

    /// What the agent is told of `e` denied with `label` by the grants or
    /// the budget: the grant's `budget`, of which the episode has `remaining`,
    /// having `spent` across its sessions.
    pub(super) fn denial(
        &self,
        e: &PlannedEffect,
        label: &'static str,
        budget: Option<u64>,
        remaining: u64,
        spent: u64,
    ) -> Denial {
        let denied = effects::Denied {
            label,
            effect: &e.effect,
            scope: &e.scope,
            cost: e.cost,
            episode: &self.call.episode,
            budget,
            remaining,
            spent,
            expires_at: self.call.expires_at,
        };
        denied.told()
    }

    /// A denial is recorded, never debited; it travels with the commit, and
    /// the call's output tells its label and reason.
    fn denied(
        &self,
        e: &PlannedEffect,
        request: NewObject,
        denial: Denial,
        remaining: u64,
        approval: Option<Ref>,
    ) -> Recorded {
        let label = denial.label;
        self.host.metrics().effect(&e.effect, &e.scope, "denied", e.cost, Some(label));
        let nothing = Debit { budget_before: remaining, budget_after: remaining };
        let record = self.effect_record(e, nothing, Err(label), request.hash, None, approval);
        let told = CallEffect {
            status: EffectStatus::Denied,
            denial: Some(label.to_string()),
            budget_before: remaining,
            budget_after: remaining,
            record: Some(record.hash),
            request: Some(request.hash),
            ..planned(e)
        };
        Recorded {
            id: e.id.clone(),
            effect: e.effect.clone(),
            status: "denied",
            record: record.hash,
            output: None,
            denial: Some(denial),
            objects: vec![request, record],
            outcome: None,
            told,
        }
    }

    /// The effect record of `e` in this invocation: allowed (`Ok(failed)`),
    /// or denied (`Err(label)`), with the budget before and after it.
    pub(super) fn effect_record(
        &self,
        e: &PlannedEffect,
        debit: Debit,
        allowed: Result<bool, &str>,
        request: Ref,
        result: Option<Ref>,
        approval: Option<Ref>,
    ) -> NewObject {
        let record = Record {
            invocation_id: &self.invocation_id,
            ordinal: 0,
            effect_id: &e.id,
            effect: &e.effect,
            scope: &e.scope,
            cost: e.cost,
            budget_before: debit.budget_before,
            budget_after: debit.budget_after,
            allowed: allowed.is_ok(),
            failed: allowed.unwrap_or(false),
            denial: allowed.err().unwrap_or(""),
            request_ref: request,
            result_ref: result,
            approval,
        };
        NewObject::derived(record.semantic_id(), effects::BROKER_PROVENANCE, record.to_bytes())
    }
}
