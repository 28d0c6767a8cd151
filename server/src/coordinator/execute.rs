//! Execution: each allowed effect's handler run in the episode's worktree
//! (≤ 10 s), then its effect record and the outcome still to be made
//! durable; the plan's effects in order, up to the first that did not go `ok`.

use super::broker::{Brokered, Recorded};
use super::plan::{Plan, PlannedEffect, planned};
use super::{HANDLER_DEADLINE, Invocation, Stop};
use crate::effects;
use serde_json::Value;
use std::path::PathBuf;
use world_store::*;

/// What the plan's effects came to, in plan order.
pub(super) struct Effects {
    /// The brokered ones: run, failed or denied.
    pub(super) recorded: Vec<Recorded>,
    /// The ones left after one that did not go `ok`, as the episode view tells them.
    pub(super) skipped: Vec<CallEffect>,
}

impl Invocation<'_> {
    /// Brokers each planned effect and runs the allowed ones.
    pub(super) async fn effects(&mut self, plan: &Plan) -> Result<Effects, Stop> {
        let mut recorded = vec![];
        let mut pending = plan.effects.iter();
        for e in pending.by_ref() {
            let r = match self.broker(e).await? {
                Brokered::Allowed { request, debit, approval, walked } => {
                    self.execute(e, request, debit, approval, walked).await
                }
                Brokered::Denied(r) => *r,
            };
            let stop = r.status != "ok";
            recorded.push(r);
            if stop {
                break;
            }
        }
        // What the loop left is what `compose` reports `skipped`. With
        // `PLAN_EFFECTS_MAX` at 1 nothing is left today: the one effect is
        // the last, whatever became of it.
        let skipped = pending
            .inspect(|e| self.host.metrics().effect(&e.effect, &e.scope, "skipped", 0, None))
            .map(planned)
            .collect();
        Ok(Effects { recorded, skipped })
    }

    /// Runs an allowed effect's handler: its record, and its outcome for the commit.
    async fn execute(
        &self,
        e: &PlannedEffect,
        request: Ref,
        debit: Debit,
        approval: Option<Ref>,
        walked: Option<Vec<PathBuf>>,
    ) -> Recorded {
        let output = self.handle(e, walked).await;
        let failed = output.is_none();
        let result = output
            .as_ref()
            .map(|v| NewObject::derived(effects::EFFECT_RESULT, effects::BROKER_PROVENANCE, canonical::to_vec(v)));
        let record = self.effect_record(e, debit, Ok(failed), request, result.as_ref().map(|r| r.hash), approval);
        let record_ref = record.hash;
        let status = if failed { OutcomeStatus::Failed } else { OutcomeStatus::Ok };
        let label = if failed { "failed" } else { "ok" };
        self.host.metrics().effect(&e.effect, &e.scope, label, e.cost, None);
        let outcome =
            OutcomeRequest { task: self.key.clone(), ordinal: 0, status, record, result, at: crate::clock::now() };
        let told = CallEffect {
            status: if failed { EffectStatus::Failed } else { EffectStatus::Ok },
            budget_before: debit.budget_before,
            budget_after: debit.budget_after,
            record: Some(record_ref),
            request: Some(request),
            ..planned(e)
        };
        Recorded {
            id: e.id.clone(),
            effect: e.effect.clone(),
            status: if failed { "failed" } else { "ok" },
            record: record_ref,
            output,
            objects: vec![],
            outcome: Some(outcome),
            told,
        }
    }

    /// The handler's output; `None` when it failed, overran its deadline or
    /// answered more than `RESULT_BYTES_MAX`.
    async fn handle(&self, e: &PlannedEffect, walked: Option<Vec<PathBuf>>) -> Option<Value> {
        let ran = tokio::time::timeout(
            HANDLER_DEADLINE,
            self.host.worktrees().run_over(&self.call.episode, &e.effect, &e.payload, walked),
        )
        .await;
        match ran {
            Ok(Ok(v))
                if serde_json::to_vec(&v).map(|b| b.len()).unwrap_or(usize::MAX)
                    <= effects::worktree::RESULT_BYTES_MAX =>
            {
                Some(v)
            }
            Ok(Ok(_)) => None,
            Ok(Err(why)) => {
                tracing::warn!(invocation = %self.key.invocation_id(), effect = %e.effect, %why, "effect handler failed");
                None
            }
            Err(_) => None,
        }
    }
}
