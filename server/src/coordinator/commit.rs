//! The commit: the effect outcomes made durable (before a finish phase, or
//! with the entry), the committed output composed, the invocation record, and
//! one batch that commits the entry, settled once the episode is let go;
//! `record_end` for a call that ends without one.

use super::Stop::{self, Failed};
use super::broker::Recorded;
use super::execute::Effects;
use super::plan::Plan;
use super::{CallError, Held, INVOCATION_OUTPUT, INVOCATION_RECORD_V1, INVOCATION_RECORD_V2, Invocation, Outcome};
use crate::effects::Denial;
use crate::registry;
use serde_json::{Map, Value, json};
use world_store::canonical::FixedObject;
use world_store::*;

/// What an effectful invocation brings to its commit.
pub(super) struct Ran {
    plan: NewObject,
    /// The effect records, in the order the effects ran.
    records: Vec<Ref>,
    /// Every planned effect as the episode view tells it, in plan order.
    told: Vec<CallEffect>,
    /// Objects only the commit carries (denials).
    objects: Vec<NewObject>,
    /// The episode's effect lock, let go once the commit is queued, and its
    /// hold among nodes, given up once the commit is durable (a task let
    /// both go when its command started).
    held: Option<Held>,
}

impl Ran {
    pub(super) fn of(plan: NewObject, effects: Effects, held: Option<Held>) -> Ran {
        let objects = effects.recorded.iter().flat_map(|b| b.objects.clone()).collect();
        let records = effects.recorded.iter().map(|b| b.record).collect();
        let mut told: Vec<CallEffect> = effects.recorded.iter().map(|b| b.told.clone()).collect();
        told.extend(effects.skipped);
        Ran { plan, records, told, objects, held }
    }
}

impl Invocation<'_> {
    /// The effect outcomes the commit's batch is to carry: all of them,
    /// unless a finish phase runs first.
    pub(super) async fn outcomes_to_commit(&mut self, plan: &Plan, effects: &mut Effects) -> Result<Vec<Op>, Stop> {
        let mut outcomes: Vec<Op> =
            effects.recorded.iter_mut().filter_map(|b| b.outcome.take()).map(Op::RecordOutcome).collect();
        if plan.finish && !outcomes.is_empty() {
            // The finish phase may take its 2 s: make the records durable first.
            self.record_outcomes(std::mem::take(&mut outcomes)).await?;
        }
        Ok(outcomes)
    }

    /// Makes effect outcomes durable on their own (before a finish phase).
    async fn record_outcomes(&mut self, ops: Vec<Op>) -> Result<(), Stop> {
        let records = outcome_records(&ops);
        for (r, rec) in self.write(ops).await?.into_iter().zip(records) {
            match r {
                Ok(_) => self.journaled.push(rec),
                Err(e) => return Err(Failed(self.unrecorded(format!("recording the effect outcome: {e}")))),
            }
        }
        Ok(())
    }

    /// The committed output: handler fields, finish output or refusal result, plus `world`.
    pub(super) async fn compose(
        &self,
        args: &Value,
        plan: &Plan,
        brokered: &[Recorded],
        plan_ref: Ref,
    ) -> Result<Value, CallError> {
        let mut statuses: Vec<Told> =
            brokered.iter().map(|b| (b.id.clone(), b.status, Some(b.record), b.denial.clone())).collect();
        statuses.extend(plan.effects.iter().skip(brokered.len()).map(|e| (e.id.clone(), "skipped", None, None)));
        if plan.effects.is_empty() {
            return Ok(with_world(plan.result.clone().unwrap_or_default(), statuses, Some(plan_ref)));
        }
        if plan.finish {
            let results: Vec<Value> = brokered
                .iter()
                .map(|b| json!({"id": b.id, "effect": b.effect, "status": b.status, "record": b.record.to_string(), "output": b.output}))
                .collect();
            let out = self
                .phase(&json!({"phase": "finish", "args": args, "results": results}))
                .await
                .map_err(|e| self.unrecorded(e))?;
            let Value::Object(out) = out else { return Err(self.unrecorded(CallError::NotAnObject)) };
            if out.contains_key("effects") || out.contains_key("world") {
                return Err(self.unrecorded("the finish output may not carry `effects` or `world`"));
            }
            return Ok(with_world(out, statuses, Some(plan_ref)));
        }
        let fields = match brokered.first().and_then(|b| b.output.clone()) {
            Some(Value::Object(m)) if !m.contains_key("world") => m,
            Some(_) => {
                let mut m = Map::new();
                m.insert("ok".into(), json!(false));
                m.insert("refused".into(), json!("the tool's output used the reserved key `world`"));
                m
            }
            None => Map::new(),
        };
        Ok(with_world(fields, statuses, Some(plan_ref)))
    }

    /// Commits the invocation, after `outcomes` (effect outcomes not yet durable)
    /// in the same batch: one fsync for the records and the entry.
    pub(super) async fn commit(
        &mut self,
        outcomes: Vec<Op>,
        input: NewObject,
        output: Value,
        ran: Option<Ran>,
    ) -> Result<Outcome, Stop> {
        let (plan, records, told, mut objects, held) = match ran {
            Some(r) => (Some(r.plan), r.records, r.told, r.objects, r.held),
            None => (None, vec![], vec![], vec![], None),
        };
        let (episode, hold) = held.map(|h| (h.lock, h.hold)).unzip();
        let output_obj = self.object(INVOCATION_OUTPUT, canonical::to_vec(&output));
        let record = self.invocation_record(&input, &output_obj, plan.as_ref(), &records);
        let commit = InvocationCommit {
            task: self.key.clone(),
            registry: registry::TRANSITION_REGISTRY.into(),
            transition_id: self.d.id.clone(),
            transition_fn: self.d.transition_fn,
            interpreter: self.d.interpreter,
            semantics_epoch: self.d.semantics_epoch,
            written_by: self.provenance(),
            transition_ref: record.hash,
            state_root: output_obj.hash,
            objects: {
                objects.push(input);
                objects.extend(plan);
                objects.push(output_obj);
                objects.push(record);
                objects
            },
            effects: told,
            at: crate::clock::now(),
        };
        let ended_at = commit.at;
        let pending = outcome_records(&outcomes);
        let mut ops = outcomes;
        ops.push(Op::CommitInvocation(commit));
        let queued = self.queue(ops);
        // The episode's next effect may run once this commit is queued: its
        // intent is journaled behind the commit, so it runs only after the
        // commit is durable, and the log keeps the episode's effects in the
        // order they ran.
        drop(episode);
        let settled = self.settle(queued).await;
        drop(hold);
        self.committed(settled?, pending, output, ended_at)
    }

    /// The invocation record: v2 names the plan and the effect records, v1 (a pure call) neither.
    fn invocation_record(
        &self,
        input: &NewObject,
        output: &NewObject,
        plan: Option<&NewObject>,
        records: &[Ref],
    ) -> NewObject {
        let c = self.call;
        let mut rec = FixedObject::new()
            .str("invocationId", &self.invocation_id)
            .str("episodeId", &c.episode)
            .str("skillId", &self.d.id)
            .reference("transitionFn", &self.d.transition_fn)
            .reference("interpreter", &self.d.interpreter)
            .uint("semanticsEpoch", self.d.semantics_epoch)
            .reference("input", &input.hash)
            .reference("output", &output.hash);
        let semantic = match plan {
            Some(p) => {
                let refs: Vec<Value> = records.iter().map(|r| json!(r.to_string())).collect();
                rec = rec.reference("plan", &p.hash).value("effects", &Value::Array(refs));
                INVOCATION_RECORD_V2
            }
            None => INVOCATION_RECORD_V1,
        };
        self.object(semantic, rec.finish())
    }

    /// Reads the commit batch's replies: the outcomes it carried, then the entry.
    fn committed(
        &mut self,
        replies: Vec<Result<Reply, WriteError>>,
        pending: Vec<Ref>,
        output: Value,
        ended_at: u64,
    ) -> Result<Outcome, Stop> {
        let mut replies = replies.into_iter();
        for rec in pending {
            match replies.next() {
                Some(Ok(_)) => self.journaled.push(rec),
                other => return Err(Failed(self.unrecorded(format!("recording the effect outcome: {other:?}")))),
            }
        }
        match replies.next() {
            Some(Ok(Reply::Committed(committed))) => Ok(Outcome {
                invocation_id: self.invocation_id.clone(),
                output,
                committed,
                ended_at,
                context: self.call.context.clone(),
                message_id: self.call.message_id.clone(),
            }),
            Some(Err(WriteError::TransitionChanged { .. })) if !self.ran => Err(Failed(CallError::HeadMoved)),
            Some(Err(e)) => Err(Failed(self.unrecorded(format!("commit: {e}")))),
            other => Err(Failed(self.unrecorded(format!("unexpected writer reply {other:?}")))),
        }
    }

    /// Records how a failed invocation ended, so a resend of its task id says so.
    pub(super) async fn record_end(&mut self, e: &CallError) {
        let state = match e {
            CallError::EffectsUnrecorded { .. } => TaskState::Uncertain,
            CallError::Unconfirmed
            | CallError::Unavailable(_)
            | CallError::TaskIdInUse
            | CallError::TaskEnded(_)
            | CallError::OutOfSpace(_) => {
                return;
            }
            _ => TaskState::NotCommitted,
        };
        let _ = self.write(vec![Op::EndTask { task: self.key.clone(), state, at: crate::clock::now() }]).await;
    }
}

/// The effect records the `RecordOutcome` ops among `ops` would make durable.
fn outcome_records(ops: &[Op]) -> Vec<Ref> {
    ops.iter().filter_map(|o| if let Op::RecordOutcome(o) = o { Some(o.record.hash) } else { None }).collect()
}

/// One effect as the `world` block tells it: its id, status and record, and
/// for a denied one its label and reason.
pub(super) type Told = (String, &'static str, Option<Ref>, Option<Denial>);

/// The output's fields with the `world` block: each effect's status and
/// record (a denied one's `denial` label and `reason` after them), and the plan.
pub(super) fn with_world(mut fields: Map<String, Value>, effects: Vec<Told>, plan: Option<Ref>) -> Value {
    let effects: Vec<Value> = effects
        .into_iter()
        .map(|(id, status, record, denial)| {
            let mut e = json!({"id": id, "status": status, "record": record.map(|r| r.to_string())});
            if let (Some(d), Some(e)) = (denial, e.as_object_mut()) {
                e.insert("denial".into(), json!(d.label));
                e.insert("reason".into(), json!(d.reason));
            }
            e
        })
        .collect();
    fields.insert("world".into(), json!({"effects": effects, "plan": plan.map(|p| p.to_string())}));
    Value::Object(fields)
}
