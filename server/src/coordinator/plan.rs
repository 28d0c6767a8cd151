//! The plan phase: a transition's phases run through its runtime, and what
//! the first asks for. A pure transition's one phase is its whole output; an
//! effectful one returns a plan, held to the plan laws (`check_plan`).

use super::{CallError, EFFECT_PLAN, Invocation, PLAN_EFFECTS_MAX, PLAN_PAYLOAD_MAX};
use crate::registry::{self, Descriptor};
use crate::runtime::PhaseError;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use world_store::*;

/// What the first phase asks for.
pub(super) enum Planned {
    /// A pure transition's output fields: nothing to broker.
    Pure(Map<String, Value>),
    /// The effects to broker, and how the call ends after them.
    Effects(Plan),
}

/// One planned effect.
#[derive(Clone)]
pub(super) struct PlannedEffect {
    pub(super) id: String,
    pub(super) effect: String,
    pub(super) scope: String,
    pub(super) cost: u64,
    pub(super) payload: Value,
}

pub(super) struct Plan {
    pub(super) effects: Vec<PlannedEffect>,
    pub(super) finish: bool,
    pub(super) result: Option<Map<String, Value>>,
    pub(super) bytes: Vec<u8>,
}

/// A planned effect as the episode view tells it, before it is brokered
/// (as it stays when it is skipped: an earlier one was denied or failed).
pub(super) fn planned(e: &PlannedEffect) -> CallEffect {
    CallEffect {
        id: e.id.clone(),
        effect: e.effect.clone(),
        scope: e.scope.clone(),
        cost: e.cost,
        status: EffectStatus::Skipped,
        denial: None,
        budget_before: 0,
        budget_after: 0,
        record: None,
        request: None,
    }
}

fn phase_error(e: PhaseError) -> CallError {
    match e {
        PhaseError::Failed(why) => CallError::ExecutionFailed(why),
        PhaseError::NotAnObject => CallError::NotAnObject,
        PhaseError::Convention(why) => CallError::Convention(why),
    }
}

impl Invocation<'_> {
    pub(super) async fn plan(&self, args: &Value) -> Result<Planned, CallError> {
        if self.d.is_pure() {
            let result = self.phase(args).await?;
            return Ok(Planned::Pure(reserve_world(result)?));
        }
        let out = self.phase(&json!({"phase": "plan", "args": args})).await?;
        check_plan(out, self.d).map(Planned::Effects)
    }

    /// Runs one phase of the transition (its only one, `plan`, or `finish`).
    pub(super) async fn phase(&self, input: &Value) -> Result<Value, CallError> {
        // Only an exec transition reads its source: a builtin needs no snapshot.
        let source = match self.d.runtime {
            registry::RuntimeSpec::Exec { .. } => Some(self.source().await?),
            registry::RuntimeSpec::Builtin { .. } => None,
        };
        let source = |_: &Ref| match source {
            Some(s) => s.map(|s| s.to_vec()),
            None => Err("a builtin transition has no source to read".to_string()),
        };
        self.host.runtimes().run(self.d, source, input).await.map_err(phase_error)
    }

    /// The exec transition's source: cached, or read on the blocking pool
    /// (an engine's reads may block, and no snapshot is held over the run).
    async fn source(&self) -> Result<Result<Arc<Vec<u8>>, String>, CallError> {
        let r = self.d.transition_fn;
        if let Some(s) = self.host.coordinator().cached_source(&r) {
            return Ok(Ok(s));
        }
        let host = self.host.clone();
        let read = tokio::task::spawn_blocking(move || {
            let snap = host.store().snapshot().map_err(|e| CallError::Unavailable(e.to_string()))?;
            Ok(host.coordinator().source(&snap, &r))
        });
        read.await.map_err(|e| CallError::Unavailable(e.to_string()))?
    }
}

/// `world` is reserved in every transition output.
fn reserve_world(v: Value) -> Result<Map<String, Value>, CallError> {
    match v {
        Value::Object(m) if m.contains_key("world") => {
            Err(CallError::Convention("the output used the reserved key `world`".into()))
        }
        Value::Object(m) => Ok(m),
        _ => Err(CallError::NotAnObject),
    }
}

fn is_effect_id(s: &str) -> bool {
    (1..=16).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// A plan that breaks a law of the calling convention.
fn bad<T>(why: String) -> Result<T, CallError> {
    Err(CallError::Convention(why))
}

/// The plan laws of this release.
fn check_plan(out: Value, d: &Descriptor) -> Result<Plan, CallError> {
    let Value::Object(m) = &out else { return Err(CallError::NotAnObject) };
    if m.get("plan").and_then(Value::as_str) != Some(EFFECT_PLAN) {
        return bad(format!("the plan phase must return {{\"plan\":\"{EFFECT_PLAN}\",…}}"));
    }
    let finish = match m.get("finish") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return bad("plan.finish must be a boolean".into()),
    };
    let items = match m.get("effects") {
        Some(Value::Array(a)) => a,
        _ => return bad("plan.effects must be an array".into()),
    };
    if items.len() > PLAN_EFFECTS_MAX {
        return bad(format!("a plan may request at most {PLAN_EFFECTS_MAX} effect"));
    }
    let mut ids = HashSet::new();
    let effects = items.iter().map(|item| check_effect(item, d, &mut ids)).collect::<Result<Vec<_>, _>>()?;
    let result = match m.get("result") {
        None | Some(Value::Null) => None,
        Some(r) => Some(reserve_world(r.clone())?),
    };
    if effects.is_empty() && result.is_none() {
        return bad("a plan without effects must carry a result".into());
    }
    Ok(Plan { effects, finish, result, bytes: canonical::to_vec(&out) })
}

/// One item of `plan.effects`: a fresh id, one of the declared effects, an object payload.
fn check_effect(item: &Value, d: &Descriptor, ids: &mut HashSet<String>) -> Result<PlannedEffect, CallError> {
    let id = item.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
    if !is_effect_id(&id) || !ids.insert(id.clone()) {
        return bad(format!("effect id {id:?} must be unique and match [a-z0-9]{{1,16}}"));
    }
    let effect = item.get("effect").and_then(Value::as_str).unwrap_or_default().to_string();
    let scope = item.get("scope").and_then(Value::as_str).unwrap_or_default().to_string();
    let cost = item.get("cost").and_then(Value::as_u64);
    let Some(cost) = cost else { return bad(format!("effect {id}: cost must be a non-negative integer")) };
    let triple = registry::Access { effect: effect.clone(), scope: scope.clone(), cost };
    if !d.declared_effects.contains(&triple) {
        return bad(format!("effect {id}: ({effect}, {scope}, {cost}) is not one of the declared effects"));
    }
    let payload = item.get("payload").cloned().unwrap_or(Value::Null);
    if !payload.is_object() || canonical::to_vec(&payload).len() > PLAN_PAYLOAD_MAX {
        return bad(format!("effect {id}: payload must be a JSON object of at most {PLAN_PAYLOAD_MAX} bytes"));
    }
    Ok(PlannedEffect { id, effect, scope, cost, payload })
}
