//! Admission: the registry read from a fresh glance, the grant check, the
//! pin; a resent task id answered from its row (`resume`); a task id claimed
//! in memory while its call runs (`InFlight`).

use super::{ADMISSION_DEADLINE, Call, CallError, Coordinator, Outcome, SharedHost};
use crate::glances::{Unread, glance};
use crate::registry::{self, Descriptor};
use serde_json::Value;
use world_store::*;

/// What admission found: the descriptor, and whether the world and handlers exist.
pub(super) struct Admitted {
    pub(super) descriptor: Descriptor,
    pub(super) existing: Option<Task>,
    pub(super) has_world: bool,
}

/// The digest a task row keeps of its request: the canonical JSON of
/// `{"arguments", "transition", "transitionFn"}` (keys in canonical order),
/// with `input`, the arguments' canonical bytes the call's input object
/// holds, embedded as they are rather than encoded a second time.
pub(super) fn request_digest(call: &Call, input: &[u8]) -> Ref {
    digest_of(&call.transition_id, call.pin, input)
}

fn digest_of(transition: &str, pin: Option<Ref>, input: &[u8]) -> Ref {
    let pin = pin.map(|p| p.to_string()).unwrap_or_default();
    let request = canonical::FixedObject::new()
        .raw("arguments", input)
        .str("transition", transition)
        .str("transitionFn", &pin)
        .finish();
    Ref::of(&request)
}

pub(super) fn task_key(call: &Call) -> TaskKey {
    TaskKey { surface: call.surface, episode: call.episode.clone(), task_id: call.task_id.clone() }
}

pub(super) async fn admit(host: &SharedHost, call: &Call) -> Result<Admitted, CallError> {
    let (descriptor, existing, has_world) = match &call.glanced {
        Some(g) => (g.registry.as_ref().and_then(|r| r.get(&call.transition_id).cloned()), None, g.has_world),
        None => read(host, call).await?,
    };
    let live = crate::clock::now() < call.expires_at;
    let descriptor =
        descriptor.filter(|d| registry::grants_admit(&call.grants, live, &d.access)).ok_or(CallError::NotAuthorized)?;
    if call.pin.is_some_and(|p| p != descriptor.transition_fn) {
        return Err(CallError::PinMismatch);
    }
    Ok(Admitted { descriptor, existing, has_world })
}

/// Admission's reads from a fresh glance (`glances::glance`, under the
/// admission deadline): the transition's descriptor, the task's row,
/// whether a world is selected.
async fn read(host: &SharedHost, call: &Call) -> Result<(Option<Descriptor>, Option<Task>, bool), CallError> {
    let (d, id, key) = (host.clone(), call.transition_id.clone(), task_key(call));
    let read = move || -> Result<_, String> {
        // Each of these is checked again inside the call's write transaction.
        // The task's row is a call's own, which a plain glance may not see
        // yet (`world_store::Op::is_a_calls_own`), and a resent task id is
        // answered from it without running again.
        let snap = d.store().glance_with_calls().map_err(|e| e.to_string())?;
        let glanced = d.coordinator().glance(&snap)?;
        let descriptor = glanced.registry.and_then(|r| r.get(&id).cloned());
        let existing = snap.task(&key).map_err(|e| e.to_string())?;
        Ok((descriptor, existing, glanced.has_world))
    };
    match glance(host.store(), ADMISSION_DEADLINE, read).await {
        Err(Unread::Deadline) => Err(CallError::Unavailable("admission read exceeded its deadline".into())),
        Err(Unread::Failed(why)) => Err(CallError::Unavailable(why)),
        Ok(r) => r.map_err(CallError::Unavailable),
    }
}

/// A resent task id: the committed result, or why it cannot be given.
pub(super) async fn resume(host: &SharedHost, call: &Call, task: Task, digest: Ref) -> Result<Outcome, CallError> {
    if task.request_digest != digest {
        return Err(match task.state {
            TaskState::Started => CallError::TaskIdInUse,
            ended => CallError::TaskEnded(ended),
        });
    }
    match task.state {
        TaskState::Started => Err(CallError::TaskIdInUse),
        TaskState::NotCommitted => Err(CallError::NotCommitted("an earlier attempt with this task id".into())),
        TaskState::Uncertain => Err(CallError::EffectsUnrecorded {
            records: task.effect_records,
            cause: "an earlier attempt with this task id ran effects and did not commit".into(),
        }),
        TaskState::Committed => {
            let c = task.committed.ok_or_else(|| CallError::Unavailable("committed task without a result".into()))?;
            let output = committed_output(host, c.output_ref).await?;
            let ended_at = task.ended_at.unwrap_or(task.started_at);
            Ok(Outcome {
                invocation_id: task_key(call).invocation_id(),
                output,
                committed: c,
                ended_at,
                context: task.context,
                message_id: task.message_id,
            })
        }
    }
}

/// A committed call's output, read back and checked against its ref.
pub(super) async fn committed_output(host: &SharedHost, out_ref: Ref) -> Result<Value, CallError> {
    let d = host.clone();
    let bytes = tokio::task::spawn_blocking(move || d.store().snapshot().and_then(|s| s.payload(&out_ref)))
        .await
        .map_err(|e| CallError::Unavailable(e.to_string()))?
        .map_err(|e| CallError::Unavailable(e.to_string()))?
        .ok_or_else(|| CallError::Unavailable(format!("committed output {out_ref} is missing")))?;
    if Ref::of(&bytes) != out_ref {
        return Err(CallError::Unavailable(format!("committed output {out_ref} fails its hash check")));
    }
    serde_json::from_slice(&bytes).map_err(|e| CallError::Unavailable(e.to_string()))
}

/// A task id claimed by a running call; released when the call ends.
pub(super) struct InFlight<'a> {
    coordinator: &'a Coordinator,
    key: TaskKey,
}

impl<'a> InFlight<'a> {
    pub(super) fn claim(coordinator: &'a Coordinator, key: &TaskKey) -> Option<InFlight<'a>> {
        let fresh = coordinator.in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone());
        fresh.then(|| InFlight { coordinator, key: key.clone() })
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.coordinator.in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Task rows written before keep the digest of the whole request as one
    /// canonical JSON value: a resend must still match them byte for byte.
    #[test]
    fn a_request_digest_is_the_one_task_rows_have_always_kept() {
        let pin = Some(Ref::of(b"transition source"));
        let arguments = [
            json!({}),
            json!({"hello": "world", "n": 7}),
            json!({"z": [1, 2.5, -3, null, true], "a": {"é\u{1F600}\"\n": "\u{7f}\u{0}"}, "m": 1e300}),
        ];
        for args in arguments {
            for pin in [None, pin] {
                let whole = json!({
                    "transition": "tools_decho",
                    "arguments": args,
                    "transitionFn": pin.map(|p| p.to_string()).unwrap_or_default(),
                });
                let kept = Ref::of(&canonical::to_vec(&whole));
                assert_eq!(digest_of("tools_decho", pin, &canonical::to_vec(&args)), kept, "{args}");
            }
        }
    }
}
