//! Writes of the shapes the daemon makes, for the tests and benches that
//! drive the store without it: a genesis world with a registry of one
//! transition, and a pure call of that transition as the coordinator
//! commits it.

use crate::model::{NewObject, TaskKey};
use crate::ops::{InvocationCommit, Op, RegistryPublish, RestCommit};
use crate::refs::Ref;

/// The registry `genesis` publishes and `pure_call` names.
pub const REGISTRY: &str = "world/transition-registry/v1";
/// The one transition in it.
pub const TRANSITION: &str = "tools.echo";

/// The transition's function and interpreter payloads.
const SOURCE: &[u8] = b"builtin:tools.echo";
const INTERPRETER: &[u8] = b"builtin";

/// The transition's function and interpreter objects.
pub fn transition(provenance: &str) -> (NewObject, NewObject) {
    (
        NewObject::derived("world/transition-source/v1", provenance, SOURCE.to_vec()),
        NewObject::derived("world/interpreter/v1", provenance, INTERPRETER.to_vec()),
    )
}

/// The refs of the transition's function and interpreter (an object's ref
/// is its payload's hash), hashed once for every call that names them.
fn transition_refs() -> (Ref, Ref) {
    static REFS: std::sync::LazyLock<(Ref, Ref)> = std::sync::LazyLock::new(|| (Ref::of(SOURCE), Ref::of(INTERPRETER)));
    *REFS
}

/// A genesis world, then a registry of `TRANSITION` (its function and
/// interpreter from `transition`).
pub fn genesis(provenance: &str) -> [Op; 2] {
    let goal = NewObject::derived("world/demo/genesis-goal", provenance, b"{\"goal\":\"sample\"}".to_vec());
    let registry = NewObject::derived(REGISTRY, provenance, b"{\"sample\":1}".to_vec());
    let (source, interpreter) = transition(provenance);
    let (f, interp) = (source.hash, interpreter.hash);
    [
        Op::CommitWorld(RestCommit::genesis(goal, f, interp, 1, provenance)),
        Op::PublishRegistry(RegistryPublish {
            name: REGISTRY.into(),
            expected: None,
            head: registry.hash,
            objects: vec![source, interpreter, registry],
            entries: vec![(TRANSITION.into(), f)],
        }),
    ]
}

/// One pure call of `TRANSITION` on `task`, given `input` (JSON): its task
/// row, then its commit of an input, an output echoing it and an
/// invocation record naming both and the transition's two refs.
pub fn pure_call(task: TaskKey, input: &str, provenance: &str) -> Op {
    let (f, interp) = transition_refs();
    let output = format!("{{\"echo\":{input},\"world\":{{\"effects\":[],\"plan\":null}}}}");
    let input = NewObject::derived("world/invocation-input/v1", provenance, input.as_bytes().to_vec());
    let output = NewObject::derived("world/invocation-output/v1", provenance, output.into_bytes());
    let record = format!(
        "{{\"invocationId\":\"{}\",\"transitionFn\":\"{f}\",\"interpreter\":\"{interp}\",\"input\":\"{}\",\"output\":\"{}\"}}",
        task.invocation_id(),
        input.hash,
        output.hash
    );
    let record = NewObject::derived("world/invocation-record/v1", provenance, record.into_bytes());
    let commit = InvocationCommit {
        task: task.clone(),
        registry: REGISTRY.into(),
        transition_id: TRANSITION.into(),
        transition_fn: f,
        interpreter: interp,
        semantics_epoch: 1,
        written_by: provenance.into(),
        transition_ref: record.hash,
        state_root: output.hash,
        objects: vec![input, output, record],
        effects: vec![],
        at: 1,
    };
    Op::Sequence(vec![
        Op::CreateTask {
            task,
            request_digest: Ref::of(provenance.as_bytes()),
            at: 1,
            transition: TRANSITION.into(),
            context: None,
            message_id: None,
            run: None,
        },
        Op::CommitInvocation(commit),
    ])
}
