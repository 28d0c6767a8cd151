//! `POST /a2a/`: the seed's `tasks/send`, and the A2A 0.3 and 1.0 methods
//! over the same tasks. The wire logic is `world_protocol::a2a`'s; this
//! resolves the session, runs the coordinator and reads the caller's tasks;
//! a stream's first event is made here, its following ones in `streams`.
//!
//! Every task ends within its call, so a cancel always finds a task it
//! cannot stop: one that ended (an effect that ran is never undone; its
//! record stays), or one still running, which is not stopped once started.

use super::agents::{self, CardError, Denied};
use super::{State, reply};
use crate::coordinator::tasks::Followed;
use crate::coordinator::{self, Answered, Call, CallError};
use crate::limits::{LIST_TASKS_SCAN_CHUNK, LIST_TASKS_SCAN_MAX, READ_DEADLINE};
use crate::sessions::Caller;
use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;
use world_protocol::RpcId;
use world_protocol::a2a::{
    self, A2aError, A2aKind, A2aReply, CommittedView, Flavor, ListQuery, PageToken, Refusal, SendRequest,
    TaskStateName, TaskView, Why,
};
use world_protocol::auth;
use world_store::{CancelAsk, Ref, Snapshot, Surface as CallSurface, Task, TaskKey, TaskState};

pub async fn a2a_post(
    axum::extract::State(state): axum::extract::State<State>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let caller = match agents::resolve(&state, &headers).await {
        Ok(c) => c,
        Err(Denied::Session(d)) => return reply(auth::a2a_denial(d).into_http()),
        Err(Denied::Failed(why)) => {
            note!("worldd: a2a refusal: session: {why:?}");
            return reply(A2aError::Unavailable.reply(&RpcId::Null).into_http());
        }
    };
    let body = match agents::read_body(&state, &headers, body, a2a::A2A_BODY_MAX).await {
        Ok(body) => body,
        Err(super::bodies::Unread::Busy) => return reply(super::bodies::busy_a2a()),
        Err(_) => return reply(a2a::body_too_large().into_http()),
    };
    let req = match a2a::parse(&body) {
        Ok(r) => r,
        Err(reply_) => return reply(reply_.into_http()),
    };
    let (id, flavor) = (&req.jsonrpc_id, req.flavor);
    if let Err(refused) = a2a::version_served(headers.get("a2a-version").map(|v| v.as_bytes())) {
        return reply(refused.reply(id, flavor).into_http());
    }
    let out = match req.kind {
        A2aKind::Send(send) => {
            let as_task = send.return_immediately && flavor == Flavor::V10;
            send_message(&state, &caller, flavor, id, send, None, as_task).await.0
        }
        A2aKind::Answer(answer) => answer_task(&state, &caller, flavor, id, answer, false).await.0,
        A2aKind::StreamSend(send) => return stream_send(&state, &caller, flavor, id, Sent::Send(send)).await,
        A2aKind::StreamAnswer(answer) => return stream_send(&state, &caller, flavor, id, Sent::Answer(answer)).await,
        A2aKind::Subscribe { task_id } => return subscribe(&state, &caller, flavor, id, &task_id).await,
        A2aKind::Get { task_id, history_length } => {
            get_task(&state, &caller, flavor, id, &task_id, history_length).await
        }
        A2aKind::Cancel { task_id } => cancel_task(&state, &caller, flavor, id, &task_id).await,
        A2aKind::List(query) => list_tasks(&state, &caller, id, query).await,
        A2aKind::ExtendedCard => match agents::session_card(&state, &headers, &caller).await {
            Ok(card) => a2a::extended_card(id, card),
            Err(e) => {
                let why = match e {
                    CardError::Deadline => "the registry read deadline was exceeded".to_owned(),
                    CardError::Failed(why) => why,
                };
                note!("worldd: a2a refusal: extended card: {why:?}");
                let detail = "the session's card could not be built (the cause is in the daemon's log)";
                A2aError::Unavailable.because(Why::new(detail)).reply(id, flavor)
            }
        },
    };
    reply(out.into_http())
}

fn invocation_id(caller: &Caller, task_id: &str) -> String {
    format!("a2a:{}:{task_id}", caller.session.episode)
}

/// A person's word on the approval task `a.task_id` waits for: the task's
/// request runs again under that answer (the same task id: it runs at most once).
async fn answer_task(
    state: &State,
    caller: &Caller,
    flavor: Flavor,
    id: &RpcId,
    a: a2a::AnswerRequest,
    as_task: bool,
) -> (A2aReply, bool) {
    let waiting = match super::approvals::waiting_on(state, caller, &a.task_id).await {
        Ok(Some(w)) => w,
        Ok(None) => {
            let why = Why::parameter("message.taskId", "a task waiting for approval (input-required) in this session")
                .with("taskId", &a.task_id);
            return (A2aError::TaskNotFound.because(why).reply_explained(id, flavor), false);
        }
        Err(why) => {
            note!("worldd: a2a refusal: approval answer on {}: {why:?}", a.task_id);
            let why = Why::new("the cause is in the daemon's log");
            let refused = A2aError::Unavailable.because(why).reply_explained(id, flavor);
            return (refused, false);
        }
    };
    let verdict = match a.word {
        a2a::ApprovalWord::Approve => crate::approvals::Verdict::Approve,
        a2a::ApprovalWord::ApproveForSession => crate::approvals::Verdict::ApproveForSession,
        a2a::ApprovalWord::Deny => crate::approvals::Verdict::Deny,
    };
    let by = crate::approvals::Decider::Task { credential_id: caller.credential_id.hex(), task_id: a.task_id.clone() };
    let answer = crate::coordinator::Answer { approval_id: waiting.id, verdict: Some(verdict), by };
    let send = SendRequest {
        task_id: a.task_id,
        skill_id: waiting.transition,
        arguments: waiting.arguments,
        transition_fn: None,
        context_id: a.context_id,
        message_id: a.message_id,
        history_length: a.history_length,
        return_immediately: false,
    };
    send_message(state, caller, flavor, id, send, Some(answer), as_task).await
}

/// Runs a send: the reply, and whether its command runs on as a task
/// (`as_task`: a command may).
async fn send_message(
    state: &State,
    caller: &Caller,
    flavor: Flavor,
    id: &RpcId,
    send: SendRequest,
    answer: Option<crate::coordinator::Answer>,
    as_task: bool,
) -> (A2aReply, bool) {
    let SendRequest {
        task_id,
        skill_id,
        arguments,
        transition_fn,
        context_id,
        message_id,
        history_length,
        return_immediately: _,
    } = send;
    let pin = match transition_fn.as_deref().map(Ref::parse) {
        Some(Err(_)) => {
            let why = Why::parameter("metadata.transition_fn", "a sha256 ref");
            return (A2aError::InvalidParams.because(why).reply(id, flavor), false);
        }
        Some(Ok(r)) => Some(r),
        None => None,
    };
    // A continuation is beyond the seed's table: its refusals say why in
    // every flavour.
    let continues = answer.is_some();
    // The seed's reply shows no history: keep no copy of its arguments.
    let request = (flavor != Flavor::Legacy01).then(|| arguments.clone());
    let (sent_message_id, sent_context, skill) = (message_id.clone(), context_id.clone(), skill_id.clone());
    let call = Call {
        surface: CallSurface::A2a,
        episode: caller.session.episode.clone(),
        grants: caller.session.grants.clone(),
        expires_at: caller.session.expires_at,
        task_id: task_id.clone(),
        transition_id: skill_id,
        arguments,
        pin,
        context: context_id,
        message_id,
        credential: caller.credential_id,
        answer,
        // The client names A2A task ids: admission looks for the task's row.
        glanced: None,
        may_run_as_task: as_task,
    };
    let reply = match coordinator::invoke_or_start(&(state.clone() as coordinator::SharedHost), call).await {
        Ok(Answered::Running(started)) => {
            let messages = a2a::task_messages(&task_id, sent_message_id.as_deref(), request.as_ref(), None);
            let followed = Followed::Working {
                started_at: started.started_at,
                deadline_at: started.deadline_at,
                cancel_asked_at: None,
                tail: None,
            };
            let data = super::running::working_data(&followed, crate::clock::now());
            let t =
                working_view(&task_id, sent_context.as_deref(), started.started_at, &data, messages, history_length);
            return (a2a::task_completed(flavor, id, &t), true);
        }
        Ok(Answered::Ended(o)) => {
            let world_ref = o.committed.world_ref.to_string();
            // A resend shows the task as it committed: the first request's ids.
            let messages = a2a::task_messages(&task_id, o.message_id.as_deref(), request.as_ref(), Some(&o.output));
            let t = TaskView {
                task_id: &task_id,
                context_id: o.context.as_deref(),
                state: TaskStateName::Completed,
                timestamp: Some(o.ended_at),
                committed: Some(CommittedView {
                    output: &o.output,
                    invocation_id: &o.invocation_id,
                    world_ref: &world_ref,
                    entry_index: o.committed.entry_index,
                }),
                history: a2a::last(messages, history_length),
                status_message: None,
            };
            a2a::task_completed(flavor, id, &t)
        }
        Err(CallError::ApprovalPending(p)) => {
            // Nothing of the task is durable: the same task id, sent again
            // once the approval is decided, runs (or records the denial) once.
            let data = super::approvals::pending_data(&p);
            let messages = a2a::task_messages(&task_id, sent_message_id.as_deref(), request.as_ref(), None);
            let history = a2a::last(messages, history_length);
            let waiting = waiting_view(&task_id, sent_context.as_deref(), &p.id, &data, crate::clock::now(), history);
            a2a::task_completed(flavor, id, &waiting)
        }
        Err(CallError::TaskEnded(_)) if flavor == Flavor::Legacy01 => A2aError::TaskIdReused
            .because(Why::new(
                "a different call with this task id has ended; the same request sent again replays its answer, \
                 a new request needs a new task id",
            ))
            .reply(id, flavor),
        // The seed's tasks/send keeps its table's -32603; the 0.3 and 1.0
        // methods answer a failed task saying what the daemon lacks.
        Err(CallError::NoHandler { missing }) if flavor != Flavor::Legacy01 => {
            let cause = format!("{} ({missing})", A2aError::NoEffectHandler.message());
            note!("worldd: a2a refusal: tasks/send {}: {cause:?}", invocation_id(caller, &task_id));
            let data = serde_json::json!({
                "notRun": {"skill": skill, "missing": missing},
                "text": agents::cannot_run_text(&skill, &missing),
            });
            let messages = a2a::task_messages(&task_id, sent_message_id.as_deref(), request.as_ref(), None);
            let t = TaskView {
                task_id: &task_id,
                context_id: sent_context.as_deref(),
                state: TaskStateName::Failed,
                timestamp: Some(crate::clock::now()),
                committed: None,
                history: a2a::last(messages, history_length),
                status_message: Some(a2a::MessageView {
                    message_id: format!("{task_id}:status"),
                    role: a2a::Role::Agent,
                    data: &data,
                }),
            };
            a2a::task_completed(flavor, id, &t)
        }
        Err(e) => {
            let refused = call_refusal(&e, &task_id, &invocation_id(caller, &task_id), flavor);
            if continues { refused.reply_explained(id, flavor) } else { refused.reply(id, flavor) }
        }
    };
    (reply, false)
}

/// What a stream sends.
enum Sent {
    Send(SendRequest),
    Answer(a2a::AnswerRequest),
}

/// `SendStreamingMessage` (0.3: `message/stream`): the send's task as the
/// first event; a command runs as a task, followed to its end; any other
/// call has ended (or waits for approval) by then, and the stream closes.
async fn stream_send(state: &State, caller: &Caller, flavor: Flavor, id: &RpcId, sent: Sent) -> Response {
    let permit = match super::streams::admit(state, id, flavor) {
        Ok(p) => p,
        Err(refused) => return reply(refused.into_http()),
    };
    let (reply_, running, task_id, context) = match sent {
        Sent::Send(send) => {
            let (task_id, context) = (send.task_id.clone(), send.context_id.clone());
            let (r, running) = send_message(state, caller, flavor, id, send, None, true).await;
            (r, running, task_id, context)
        }
        Sent::Answer(answer) => {
            let (task_id, context) = (answer.task_id.clone(), answer.context_id.clone());
            let (r, running) = answer_task(state, caller, flavor, id, answer, true).await;
            (r, running, task_id, context)
        }
    };
    if reply_.error_code().is_some() {
        return reply(reply_.into_http());
    }
    let first = a2a::stream_task(flavor, reply_);
    if !running {
        return super::streams::single(&first, permit);
    }
    let key = key(caller, &task_id);
    let tail = state.coordinator.running(&key).map(|r| r.tail.clone());
    let context_id = context.unwrap_or_else(|| task_id.clone());
    let following = super::streams::Following { flavor, id: id.clone(), key, context_id, tail };
    super::streams::follow(state, &first, following, permit)
}

/// `SubscribeToTask` (0.3: `tasks/resubscribe`): a running task's current
/// state as the first event, then its events to its end (its output from
/// what is kept of it now). A task that ended is refused (A2A 1.0 §9.4.6);
/// one waiting for approval is sent as it stands, and the stream closes.
async fn subscribe(state: &State, caller: &Caller, flavor: Flavor, id: &RpcId, task_id: &str) -> Response {
    let permit = match super::streams::admit(state, id, flavor) {
        Ok(p) => p,
        Err(refused) => return reply(refused.into_http()),
    };
    let key = key(caller, task_id);
    let row = {
        let key = key.clone();
        read(state, move |snap| snap.task(&key).map_err(|e| e.to_string())).await
    };
    let task = match row {
        Ok(task) => task,
        Err(why) => {
            note!("worldd: a2a refusal: SubscribeToTask {task_id}: {why:?}");
            let why = Why::new("the task could not be read; the cause is in the daemon's log").with("taskId", task_id);
            return reply(A2aError::Unavailable.because(why).reply(id, flavor).into_http());
        }
    };
    if let Some(task) = &task
        && row_state_name(task).is_terminal()
    {
        let why = Why::new("the task has ended: its stream closed with its end; read it with GetTask")
            .with("taskId", task_id)
            .with("state", row_state_name(task).name(flavor));
        return reply(A2aError::UnsupportedOperation.because(why).reply(id, flavor).into_http());
    }
    let first = get_task(state, caller, flavor, id, task_id, None).await;
    if first.error_code().is_some() {
        return reply(first.into_http());
    }
    let first = a2a::stream_task(flavor, first);
    match task {
        Some(task) if task.run.is_some() && task.state == TaskState::Started => {
            let tail = state.coordinator.running(&key).map(|r| r.tail.clone());
            let context_id = task.context.clone().unwrap_or_else(|| task_id.to_string());
            let following = super::streams::Following { flavor, id: id.clone(), key, context_id, tail };
            super::streams::follow(state, &first, following, permit)
        }
        _ => super::streams::single(&first, permit),
    }
}

/// A failed call as the A2A table answers it, its cause logged where the
/// wire gets a fixed text.
fn call_refusal(e: &CallError, task_id: &str, invocation_id: &str, flavor: Flavor) -> Refusal {
    let log = |cause: &dyn std::fmt::Debug| note!("worldd: a2a refusal: tasks/send {invocation_id}: {cause:?}");
    let (error, why) = match e {
        // Answered as an input-required task by `send_message`.
        CallError::ApprovalPending(p) => (A2aError::NotCommitted, Why::new(super::approvals::pending_text(p))),
        CallError::ApprovalAnswer(why) => (
            A2aError::InvalidParams,
            Why::new(format!("the approval answer decides nothing: {why}; send the request again to be asked afresh")),
        ),
        CallError::NotAuthorized => (
            A2aError::NotAuthorized,
            Why::parameter("metadata.skill_id", "a skill this session's grants admit: one the agent card lists"),
        ),
        CallError::PinMismatch => (
            A2aError::ProposalMismatch,
            Why::parameter("metadata.transition_fn", "the skill's registered transitionFn, or no pin at all"),
        ),
        CallError::TaskIdInUse => (
            A2aError::TaskIdReused,
            Why::new(
                "the task with this id is still running: read it with GetTask once it ends, or send a new task id",
            ),
        ),
        // A2A 1.0 §3.1.1: a message to a terminal task is UnsupportedOperation
        // (the seed's tasks/send keeps its own answer: see send_message).
        CallError::TaskEnded(state) => (
            A2aError::UnsupportedOperation,
            Why::new("the task has ended and takes no more messages; send a new task id (the same request replays it)")
                .with("state", state_name(*state).name(flavor)),
        ),
        CallError::EffectsUnrecorded { records, cause } => {
            log(cause);
            (
                A2aError::EffectsUnrecorded(records.iter().map(|r| r.to_string()).collect()),
                Why::new(
                    "effects ran and are recorded, but the call was not committed to the log; the effect records name what ran",
                ),
            )
        }
        CallError::NoHandler { missing } => {
            log(&format!("{e} ({missing})"));
            (
                A2aError::NoEffectHandler,
                Why::new("this daemon cannot run the skill's effect for this session's episode"),
            )
        }
        CallError::NoWorld => (A2aError::NoWorldSelected, Why::new("nothing can commit before the genesis world")),
        CallError::Convention(why) => {
            log(why);
            (A2aError::CallingConvention, Why::new("nothing was committed; the cause is in the daemon's log"))
        }
        CallError::ExecutionFailed(why) => {
            log(why);
            (A2aError::ExecutionFailed, Why::new("nothing was committed; the cause is in the daemon's log"))
        }
        CallError::NotAnObject => {
            (A2aError::OutputNotObject, Why::new("nothing was committed; a skill's output must be a JSON object"))
        }
        CallError::Deadline => (
            A2aError::DeadlineExceeded,
            Why::new("the call passed its 20 s deadline; send the same request again to learn how it ended"),
        ),
        CallError::Unconfirmed => (
            A2aError::OutcomeUnconfirmed,
            Why::new("whether the commit landed is not known; send the same request with the same task id again"),
        ),
        CallError::NotCommitted(why) => {
            log(why);
            (A2aError::NotCommitted, Why::new("nothing was committed and this task id is spent"))
        }
        CallError::HeadMoved => (
            A2aError::HeadMoved,
            Why::new("the skill was republished while it ran; nothing was committed and this task id is spent"),
        ),
        CallError::Unavailable(why) => {
            log(why);
            (A2aError::Unavailable, Why::new("the cause is in the daemon's log"))
        }
        CallError::OutOfSpace(why) => {
            log(why);
            (A2aError::OutOfSpace, Why::new("nothing was committed; send the same task id again once space is freed"))
        }
        CallError::TasksBusy(why) => (A2aError::Unavailable, Why::new(format!("{why}; nothing ran or was debited"))),
    };
    error.because(why.with("taskId", task_id))
}

/// Runs a read of the caller's tasks on the blocking pool under the read deadline.
async fn read<T: Send + 'static>(
    state: &State,
    f: impl FnOnce(&Snapshot) -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let d = state.clone();
    let work = tokio::task::spawn_blocking(move || f(&d.store.snapshot().map_err(|e| e.to_string())?));
    match tokio::time::timeout(READ_DEADLINE, work).await {
        Err(_) => Err(format!("the store read exceeded its {} s deadline", READ_DEADLINE.as_secs())),
        Ok(Err(join)) => Err(join.to_string()),
        Ok(Ok(r)) => r,
    }
}

fn key(caller: &Caller, task_id: &str) -> TaskKey {
    TaskKey { surface: CallSurface::A2a, episode: caller.session.episode.clone(), task_id: task_id.to_string() }
}

/// The A2A state a task row is in: a task that did not commit failed.
/// A task row's state as A2A names it: a committed task whose command a
/// cancel stopped is canceled.
fn row_state_name(task: &Task) -> TaskStateName {
    let cancelled = task.effects.iter().any(|e| e.status == world_store::EffectStatus::Cancelled);
    match task.state {
        TaskState::Committed if cancelled => TaskStateName::Canceled,
        state => state_name(state),
    }
}

fn state_name(state: TaskState) -> TaskStateName {
    match state {
        TaskState::Started => TaskStateName::Working,
        TaskState::Committed => TaskStateName::Completed,
        TaskState::NotCommitted | TaskState::Uncertain => TaskStateName::Failed,
    }
}

/// A JSON payload, checked against its ref.
fn payload_json(snap: &Snapshot, r: &Ref) -> Result<Value, String> {
    let bytes = snap.payload(r).map_err(|e| e.to_string())?.ok_or_else(|| format!("object {r} is missing"))?;
    if Ref::of(&bytes) != *r {
        return Err(format!("object {r} fails its hash check"));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("object {r}: {e}"))
}

/// What a committed task shows: its output, and (when history is wanted)
/// the arguments its invocation record names as input.
struct Shown {
    output: Value,
    arguments: Option<Value>,
}

fn committed_task(snap: &Snapshot, task: &Task, with_arguments: bool) -> Result<Option<Shown>, String> {
    let (TaskState::Committed, Some(c)) = (task.state, &task.committed) else { return Ok(None) };
    let output = payload_json(snap, &c.output_ref)?;
    let arguments = if with_arguments {
        let entry = snap.log_entry(c.entry_index).map_err(|e| e.to_string())?;
        let entry = entry.ok_or_else(|| format!("entry {} is missing", c.entry_index))?;
        let record = payload_json(snap, &entry.transition_ref)?;
        let input = record.get("input").and_then(Value::as_str).and_then(|s| Ref::parse(s).ok());
        let input = input.ok_or_else(|| format!("invocation record {} names no input", entry.transition_ref))?;
        Some(payload_json(snap, &input)?)
    } else {
        None
    };
    Ok(Some(Shown { output, arguments }))
}

/// A task with no row may have waited for approval (nothing of it is
/// durable but its question and the store's index of its wait): shown
/// `input-required`, with where its approval stands now, whichever call
/// decided, used or closed it since; else it is not found.
async fn waiting_task(state: &State, caller: &Caller, flavor: Flavor, id: &RpcId, task_id: &str) -> A2aReply {
    let refuse = |e: A2aError, detail: &str| e.because(Why::new(detail).with("taskId", task_id)).reply(id, flavor);
    let waiting = match super::approvals::waiting_on(state, caller, task_id).await {
        Ok(Some(w)) => w,
        Ok(None) => return refuse(A2aError::TaskNotFound, "no task with this id in this session's episode"),
        Err(why) => {
            note!("worldd: a2a refusal: tasks/get {task_id}: {why:?}");
            return refuse(A2aError::Unavailable, "the task could not be read; the cause is in the daemon's log");
        }
    };
    let data = super::approvals::waiting_data(&waiting);
    // Nothing durable keeps the context it was sent in: it reads as its own.
    a2a::task_snapshot(flavor, id, &waiting_view(task_id, None, &waiting.id, &data, waiting.asked_at, vec![]))
}

/// A task whose command runs on, `data` saying how far it has got.
fn working_view<'a>(
    task_id: &'a str,
    context_id: Option<&'a str>,
    started_at: u64,
    data: &'a Value,
    messages: Vec<a2a::MessageView<'a>>,
    history_length: Option<u32>,
) -> TaskView<'a> {
    TaskView {
        task_id,
        context_id,
        state: TaskStateName::Working,
        timestamp: Some(started_at),
        committed: None,
        history: a2a::last(messages, history_length),
        status_message: Some(a2a::MessageView {
            message_id: format!("{task_id}:status"),
            role: a2a::Role::Agent,
            data,
        }),
    }
}

/// A task (sent in `context_id`, if it named one) waiting for approval
/// `approval`: `input-required` since `at`, its status message saying what it
/// waits for (`data`).
fn waiting_view<'a>(
    task_id: &'a str,
    context_id: Option<&'a str>,
    approval: &str,
    data: &'a Value,
    at: u64,
    history: Vec<a2a::MessageView<'a>>,
) -> TaskView<'a> {
    TaskView {
        task_id,
        context_id,
        state: TaskStateName::InputRequired,
        timestamp: Some(at),
        committed: None,
        history,
        status_message: Some(a2a::MessageView {
            message_id: format!("{task_id}:approval:{approval}"),
            role: a2a::Role::Agent,
            data,
        }),
    }
}

async fn get_task(
    state: &State,
    caller: &Caller,
    flavor: Flavor,
    id: &RpcId,
    task_id: &str,
    history_length: Option<u32>,
) -> A2aReply {
    let key = key(caller, task_id);
    let running = state.coordinator.in_flight(&key);
    let with_arguments = history_length != Some(0);
    let found = read(state, move |snap| {
        let Some(task) = snap.task(&key).map_err(|e| e.to_string())? else { return Ok(None) };
        let shown = committed_task(snap, &task, with_arguments)?;
        Ok(Some((task, shown)))
    })
    .await;
    let refuse = |e: A2aError, detail: &str| e.because(Why::new(detail).with("taskId", task_id)).reply(id, flavor);
    let (task, shown) = match found {
        Ok(Some(x)) => x,
        // Running, with no durable row yet: its outcome is not known yet.
        Ok(None) if running => {
            return refuse(A2aError::OutcomeUnconfirmed, "the task is running: ask again once it ends");
        }
        Ok(None) => return waiting_task(state, caller, flavor, id, task_id).await,
        Err(why) => {
            note!("worldd: a2a refusal: tasks/get {task_id}: {why:?}");
            return refuse(A2aError::Unavailable, "the task could not be read; the cause is in the daemon's log");
        }
    };
    match (task.state, shown, &task.committed) {
        (TaskState::Started | TaskState::Uncertain, _, _) if task.run.is_some() => {
            run_task(state, caller, flavor, id, task_id, &task).await
        }
        (TaskState::Committed, Some(shown), Some(c)) => {
            let cancelled = task.effects.iter().any(|e| e.status == world_store::EffectStatus::Cancelled);
            let world_ref = c.world_ref.to_string();
            let invocation_id = invocation_id(caller, task_id);
            let messages =
                a2a::task_messages(task_id, task.message_id.as_deref(), shown.arguments.as_ref(), Some(&shown.output));
            let t = TaskView {
                task_id,
                context_id: task.context.as_deref(),
                state: if cancelled { TaskStateName::Canceled } else { TaskStateName::Completed },
                timestamp: task.ended_at,
                committed: Some(CommittedView {
                    output: &shown.output,
                    invocation_id: &invocation_id,
                    world_ref: &world_ref,
                    entry_index: c.entry_index,
                }),
                history: a2a::last(messages, history_length),
                status_message: None,
            };
            a2a::task_snapshot(flavor, id, &t)
        }
        (TaskState::Started, _, _) => {
            refuse(A2aError::OutcomeUnconfirmed, "the task is running: ask again once it ends")
        }
        (TaskState::NotCommitted, _, _) => {
            refuse(A2aError::NotCommitted, "the task failed: nothing was committed and this task id is spent")
        }
        (TaskState::Uncertain, _, _) => refuse(
            A2aError::EffectsUnrecorded(task.effect_records.iter().map(|r| r.to_string()).collect()),
            "the task failed after its effects ran; they are journaled, and the effect records name them",
        ),
        _ => refuse(A2aError::Unavailable, "the task's committed result could not be read"),
    }
}

/// A task whose command runs (or ran) on past its request: working with how
/// far it has got, or failed when its daemon stopped while it ran.
async fn run_task(state: &State, caller: &Caller, flavor: Flavor, id: &RpcId, task_id: &str, task: &Task) -> A2aReply {
    let refuse = |e: A2aError, detail: &str| e.because(Why::new(detail).with("taskId", task_id)).reply(id, flavor);
    let followed =
        match coordinator::tasks::follow(&(state.clone() as coordinator::SharedHost), &key(caller, task_id)).await {
            Ok(Some(f)) => f,
            Ok(None) => return refuse(A2aError::TaskNotFound, "no task with this id in this session's episode"),
            Err(e) => {
                note!("worldd: a2a refusal: tasks/get {task_id}: {e}");
                return refuse(A2aError::Unavailable, "the task could not be read; the cause is in the daemon's log");
            }
        };
    let now = crate::clock::now();
    let data = match &followed {
        Followed::Failed { why, .. } => serde_json::json!({ "failed": why }),
        working => super::running::working_data(working, now),
    };
    let context = task.context.as_deref();
    let t = match &followed {
        Followed::Failed { ended_at, .. } => TaskView {
            state: TaskStateName::Failed,
            timestamp: Some(*ended_at),
            ..working_view(task_id, context, *ended_at, &data, vec![], None)
        },
        _ => working_view(task_id, context, task.started_at, &data, vec![], None),
    };
    a2a::task_snapshot(flavor, id, &t)
}

/// How long a cancel's answer waits for the command to stop, so that it
/// can show the task cancelled; past it the task shows as it stands.
const CANCEL_REPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Asks a running task's command to stop, and answers with the task once it
/// ended (or as it stands after `CANCEL_REPLY_WAIT`).
async fn cancel_run(state: &State, caller: &Caller, flavor: Flavor, id: &RpcId, task_id: &str) -> A2aReply {
    let host = state.clone() as coordinator::SharedHost;
    let key = key(caller, task_id);
    let refuse = |e: A2aError, why: Why| e.because(why.with("taskId", task_id)).reply(id, flavor);
    match coordinator::tasks::cancel(&host, &key).await {
        Ok(CancelAsk::Asked | CancelAsk::AskedBefore(_)) => {}
        Ok(CancelAsk::Ended(ended)) => {
            let why = Why::new("the task ended before the cancel reached it; its record stays");
            return refuse(A2aError::TaskNotCancelable, why.with("state", state_name(ended).name(flavor)));
        }
        Ok(CancelAsk::Unknown | CancelAsk::NotARun) => {
            return refuse(A2aError::TaskNotFound, Why::new("no running task with this id in this session's episode"));
        }
        Err(e) => {
            note!("worldd: a2a refusal: tasks/cancel {task_id}: {e}");
            return refuse(
                A2aError::Unavailable,
                Why::new("the cancel could not be kept; the cause is in the daemon's log"),
            );
        }
    }
    let until = tokio::time::Instant::now() + CANCEL_REPLY_WAIT;
    while tokio::time::Instant::now() < until {
        match coordinator::tasks::follow(&host, &key).await {
            Ok(Some(Followed::Working { .. })) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            _ => break,
        }
    }
    get_task(state, caller, flavor, id, task_id, None).await
}

async fn cancel_task(state: &State, caller: &Caller, flavor: Flavor, id: &RpcId, task_id: &str) -> A2aReply {
    let key = key(caller, task_id);
    let running = state.coordinator.in_flight(&key);
    let found = read(state, move |snap| snap.task(&key).map_err(|e| e.to_string())).await;
    let refuse = |e: A2aError, why: Why| e.because(why.with("taskId", task_id)).reply(id, flavor);
    let task_state = match found {
        Ok(Some(task)) if task.run.is_some() && task.state == TaskState::Started => {
            return cancel_run(state, caller, flavor, id, task_id).await;
        }
        Ok(Some(task)) => row_state_name(&task),
        Ok(None) if running => TaskStateName::Working,
        Ok(None) => return refuse(A2aError::TaskNotFound, Why::new("no task with this id in this session's episode")),
        Err(why) => {
            note!("worldd: a2a refusal: tasks/cancel {task_id}: {why:?}");
            return refuse(
                A2aError::Unavailable,
                Why::new("the task could not be read; the cause is in the daemon's log"),
            );
        }
    };
    let why = if task_state.is_terminal() {
        Why::new(
            "the task has ended (every task here ends within its call); an effect that already ran is never undone; its record stays",
        )
    } else {
        Why::new(
            "the task is running and cannot be stopped: once started, its effect runs to its end and is journaled; an effect that ran is never undone",
        )
    };
    refuse(A2aError::TaskNotCancelable, why.with("state", task_state.name(flavor)))
}

/// One page of the caller's tasks, read from one snapshot.
struct Page {
    tasks: Vec<(String, Task, Option<Shown>)>,
    next: Option<PageToken>,
    total: u64,
}

/// Why a page was not walked.
enum Unwalked {
    /// The store could not be read.
    Read(String),
    /// The page token names more tasks listed above its position than the
    /// episode has calls there: no listing issued it.
    ForgedToken,
}

/// Where a page token resumes (its position, at most the episode's end) and
/// how many tasks it says earlier pages listed. A token the daemon issued
/// counted only tasks at or above its position, and an episode's calls only
/// grow, so `seen` never exceeds the calls from there to the end: any other
/// is refused, and no later sum can overflow.
fn resume_at(token: PageToken, end: u64) -> Option<(u64, u64)> {
    let before = token.before.min(end);
    (token.seen <= end - before).then_some((before, token.seen))
}

/// Whether a task passes the listing's filters. A task sent without a
/// `contextId` is its own context (as its replies say).
fn listed(task_id: &str, task: &Task, q: &ListQuery) -> bool {
    q.context_id.as_deref().is_none_or(|c| c == task.context.as_deref().unwrap_or(task_id))
        && q.status.is_none_or(|s| s == row_state_name(task))
        && q.status_after.is_none_or(|after| task.ended_at.unwrap_or(task.started_at) >= after)
}

/// The caller's tasks are the A2A calls of its session's episode, newest
/// first: the episode index walked down from the end (or from the page
/// token's position), other surfaces skipped, at most `scan_max` positions
/// per request, `chunk` per read.
fn walk(snap: &Snapshot, episode: &str, q: &ListQuery, scan_max: u64, chunk: u64) -> Result<Page, Unwalked> {
    let end = snap.episode(episode).map_err(|e| Unwalked::Read(e.to_string()))?.map_or(0, |r| r.calls);
    let (mut upper, seen) = match q.page_token {
        None => (end, 0),
        Some(t) => resume_at(t, end).ok_or(Unwalked::ForgedToken)?,
    };
    let (mut tasks, mut beyond, mut scanned, mut last) = (vec![], 0u64, 0u64, upper);
    let with_arguments = q.history_length != Some(0);
    while upper > 0 && scanned < scan_max {
        let n = upper.min(chunk).min(scan_max - scanned);
        let from = upper - n;
        let calls = snap.episode_calls(episode, from, n as usize).map_err(|e| Unwalked::Read(e.to_string()))?;
        for (position, key, task) in calls.into_iter().rev() {
            if key.surface != CallSurface::A2a || !listed(&key.task_id, &task, q) {
                continue;
            }
            if tasks.len() < q.page_size as usize {
                let shown = committed_task(snap, &task, with_arguments).map_err(Unwalked::Read)?;
                tasks.push((key.task_id, task, shown));
                last = position;
            } else {
                // Past a full page the walk only counts, for totalSize.
                beyond += 1;
            }
        }
        (scanned, upper) = (scanned + n, from);
    }
    let filters = a2a::filters_digest(q.context_id.as_deref(), q.status, q.status_after);
    let listed = seen + tasks.len() as u64;
    let full = tasks.len() == q.page_size as usize;
    let next = match (full, beyond > 0 || upper > 0) {
        // More below this page's last task.
        (true, true) => Some(PageToken { before: last, seen: listed, filters }),
        // The walk stopped at its bound before the page filled: go on from there.
        (false, true) => Some(PageToken { before: upper, seen: listed, filters }),
        (_, false) => None,
    };
    Ok(Page { tasks, next, total: listed + beyond })
}

async fn list_tasks(state: &State, caller: &Caller, id: &RpcId, q: ListQuery) -> A2aReply {
    let episode = caller.session.episode.clone();
    let (page_size, history_length, include_artifacts) = (q.page_size, q.history_length, q.include_artifacts);
    let walked = read(state, move |snap| Ok(walk(snap, &episode, &q, LIST_TASKS_SCAN_MAX, LIST_TASKS_SCAN_CHUNK)));
    let page = match walked.await.unwrap_or_else(|why| Err(Unwalked::Read(why))) {
        Ok(p) => p,
        Err(Unwalked::ForgedToken) => {
            let why = Why::parameter("pageToken", "a nextPageToken from an earlier ListTasks");
            return A2aError::InvalidParams.because(why).reply(id, Flavor::V10);
        }
        Err(Unwalked::Read(why)) => {
            note!("worldd: a2a refusal: ListTasks {}: {why:?}", caller.session.episode);
            let why = Why::new("the tasks could not be read; the cause is in the daemon's log");
            return A2aError::Unavailable.because(why).reply(id, Flavor::V10);
        }
    };
    let shown: Vec<(String, String)> = page
        .tasks
        .iter()
        .map(|(task_id, task, _)| {
            let world_ref = task.committed.as_ref().map(|c| c.world_ref.to_string()).unwrap_or_default();
            (invocation_id(caller, task_id), world_ref)
        })
        .collect();
    let views: Vec<TaskView<'_>> = page
        .tasks
        .iter()
        .zip(&shown)
        .map(|((task_id, task, result), (invocation_id, world_ref))| {
            let committed = result.as_ref().zip(task.committed.as_ref()).map(|(r, c)| CommittedView {
                output: &r.output,
                invocation_id,
                world_ref,
                entry_index: c.entry_index,
            });
            let messages = match result {
                Some(r) => {
                    a2a::task_messages(task_id, task.message_id.as_deref(), r.arguments.as_ref(), Some(&r.output))
                }
                None => vec![],
            };
            TaskView {
                task_id,
                context_id: task.context.as_deref(),
                state: row_state_name(task),
                timestamp: Some(task.ended_at.unwrap_or(task.started_at)),
                committed,
                history: a2a::last(messages, history_length),
                status_message: None,
            }
        })
        .collect();
    let next = page.next.map(|t| t.encode()).unwrap_or_default();
    a2a::task_list(id, &views, include_artifacts, &next, page_size, page.total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use world_store::{Op, Reads, Store, WorldStore};

    /// An episode of ten calls, seven of them A2A (t0…t6; t1, t3 and t5
    /// failed, the others still running), three MCP, interleaved.
    fn episode() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("world.db"), 1).unwrap();
        let (mut a2a, mut mcp) = (0, 0);
        for position in 0..10u64 {
            let surface = if position % 3 == 2 { CallSurface::Mcp } else { CallSurface::A2a };
            let id = match surface {
                CallSurface::A2a => (format!("t{a2a}"), a2a += 1).0,
                _ => (format!("m{mcp}"), mcp += 1).0,
            };
            let task = TaskKey { surface, episode: "ep".into(), task_id: id.clone() };
            let begin = Op::BeginTask {
                task: task.clone(),
                request_digest: Ref::of(id.as_bytes()),
                at: 100 + position,
                transition: "tools.echo".into(),
                context: Some(format!("ctx-{}", position % 2)),
                message_id: None,
            };
            store.call(begin).unwrap();
            if surface == CallSurface::A2a && a2a % 2 == 0 {
                store.call(Op::EndTask { task, state: TaskState::NotCommitted, at: 200 + position }).unwrap();
            }
        }
        (dir, store)
    }

    fn query(page_size: u32) -> ListQuery {
        ListQuery {
            context_id: None,
            status: None,
            status_after: None,
            page_size,
            page_token: None,
            history_length: None,
            include_artifacts: false,
        }
    }

    /// Every page of `q` under a scan bound: the ids in order, and each page's size and totalSize.
    fn pages(store: &Store, mut q: ListQuery, scan_max: u64) -> (Vec<String>, Vec<(usize, u64)>) {
        let snap = store.snapshot().unwrap();
        let (mut ids, mut sizes) = (vec![], vec![]);
        for _ in 0..20 {
            let page = walk(&snap, "ep", &q, scan_max, 3).ok().unwrap();
            ids.extend(page.tasks.iter().map(|(id, _, _)| id.clone()));
            sizes.push((page.tasks.len(), page.total));
            match page.next {
                Some(t) => q.page_token = Some(t),
                None => return (ids, sizes),
            }
        }
        panic!("no last page");
    }

    #[test]
    fn a_listing_walks_the_episode_down_a_bounded_stretch_at_a_time_and_misses_nothing() {
        let (_dir, store) = episode();
        let newest_first = ["t6", "t5", "t4", "t3", "t2", "t1", "t0"];
        // Unbounded: full pages, the exact total on each.
        let (ids, sizes) = pages(&store, query(3), 100);
        assert_eq!(ids, newest_first);
        assert_eq!(sizes, [(3, 7), (3, 7), (1, 7)]);
        // Four positions per request: pages come short with a token to go on;
        // the totals count what each walk met, exact on the last.
        let (ids, sizes) = pages(&store, query(3), 4);
        assert_eq!(ids, newest_first);
        assert_eq!(sizes, [(3, 3), (2, 5), (2, 7)], "the second page stops at the bound, short");
        // Filters hold across pages and bounds.
        let failed = ListQuery { status: Some(TaskStateName::Failed), ..query(1) };
        for bound in [4, 100] {
            let (ids, sizes) = pages(&store, failed.clone(), bound);
            assert_eq!(ids, ["t5", "t3", "t1"], "bound {bound}");
            assert_eq!(sizes.last().unwrap().1, 3);
        }
        let working = ListQuery { status: Some(TaskStateName::Working), context_id: Some("ctx-0".into()), ..query(2) };
        let (ids, _) = pages(&store, working, 4);
        assert_eq!(ids, ["t4", "t0"], "running, and sent in context ctx-0 (the even positions)");
        // A task's status time is when it ended, or when it started while it runs.
        let late = ListQuery { status_after: Some(205), ..query(10) };
        assert_eq!(pages(&store, late, 100).0, ["t5"]);
    }

    #[test]
    fn a_page_token_claiming_more_tasks_than_lie_above_it_is_refused_and_no_total_wraps() {
        let (_dir, store) = episode();
        let snap = store.snapshot().unwrap();
        let honest = walk(&snap, "ep", &query(3), 100, 3).ok().unwrap().next.unwrap();
        let forged = |before: u64, seen: u64| ListQuery {
            page_token: Some(PageToken { before, seen, filters: honest.filters }),
            ..query(3)
        };
        for (before, seen) in [(honest.before, 1 << 63), (honest.before, u64::MAX), (0, 11), (u64::MAX, 1), (9, 2)] {
            let walked = walk(&snap, "ep", &forged(before, seen), 100, 3);
            assert!(matches!(walked, Err(Unwalked::ForgedToken)), "before {before}, seen {seen}");
        }
        // The bounds themselves are honest positions: the end with none seen, the start with all of them.
        assert_eq!(walk(&snap, "ep", &forged(u64::MAX, 0), 100, 3).ok().unwrap().total, 7);
        assert_eq!(walk(&snap, "ep", &forged(0, 10), 100, 3).ok().unwrap().total, 10);
    }
}
