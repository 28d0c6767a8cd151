//! Execution: each allowed effect's handler run in the episode's worktree
//! (≤ 10 s), then its effect record and the outcome still to be made
//! durable; the plan's effects in order, up to the first that did not go `ok`.

use super::broker::{Brokered, Recorded};
use super::plan::{Plan, PlannedEffect, planned};
use super::tasks::{self, TaskStarted};
use super::{HANDLER_DEADLINE, Invocation, Stop};
use crate::effects;
use crate::effects::worktree::RunControl;
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
                    self.task_started();
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

    /// A call run as a task, its intent and debit durable: its surface is
    /// told (a poll of its id now resolves), and the episode's lock and hold
    /// are let go, so that the episode's other calls run beside its command.
    fn task_started(&mut self) {
        let Some(task) = self.task.as_mut() else { return };
        let Some(started) = task.started.take() else { return };
        self.held = None;
        let running = &task.slot.running;
        tasks::watch(self.host, self.key.clone(), std::sync::Arc::downgrade(running));
        let _ = started.send(TaskStarted {
            task_id: self.key.task_id.clone(),
            started_at: running.started_at,
            deadline_at: running.deadline_at,
        });
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
        let cancelled = output.as_ref().is_some_and(|o| o["cancelled"] == true);
        let result = output
            .as_ref()
            .map(|v| NewObject::derived(effects::EFFECT_RESULT, effects::BROKER_PROVENANCE, canonical::to_vec(v)));
        let record = self.effect_record(e, debit, Ok(failed), request, result.as_ref().map(|r| r.hash), approval);
        let record_ref = record.hash;
        let (status, told, label) = match (failed, cancelled) {
            (true, _) => (OutcomeStatus::Failed, EffectStatus::Failed, "failed"),
            (false, true) => (OutcomeStatus::Cancelled, EffectStatus::Cancelled, "cancelled"),
            (false, false) => (OutcomeStatus::Ok, EffectStatus::Ok, "ok"),
        };
        self.host.metrics().effect(&e.effect, &e.scope, label, e.cost, None);
        let outcome =
            OutcomeRequest { task: self.key.clone(), ordinal: 0, status, record, result, at: crate::clock::now() };
        let told = CallEffect {
            status: told,
            budget_before: debit.budget_before,
            budget_after: debit.budget_after,
            record: Some(record_ref),
            request: Some(request),
            ..planned(e)
        };
        Recorded {
            id: e.id.clone(),
            effect: e.effect.clone(),
            status: label,
            record: record_ref,
            output,
            denial: None,
            objects: vec![],
            outcome: Some(outcome),
            told,
        }
    }

    /// The handler's output; `None` when it failed, overran its deadline or
    /// answered more than `RESULT_BYTES_MAX`.
    async fn handle(&self, e: &PlannedEffect, walked: Option<Vec<PathBuf>>) -> Option<Value> {
        let (control, deadline) = match &self.task {
            Some(task) => {
                let limits = self.host.task_limits();
                (task.slot.control(limits), limits.exec_timeout + tasks::TASK_FINISH_GRACE)
            }
            None => (RunControl::default(), HANDLER_DEADLINE),
        };
        let ran = tokio::time::timeout(
            deadline,
            self.host.worktrees().run_over(&self.call.episode, &e.effect, &e.payload, walked, &control),
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
