//! How the agent surfaces tell a call that waits for a person, and a bad
//! answer to one.

use super::State;
use crate::approvals::state::{self as sealed, Belongs};
use crate::approvals::{Decider, Verdict};
use crate::clock;
use crate::coordinator::{Answer, PendingApproval};
use crate::sessions::Caller;
use serde_json::{Value, json};
use world_protocol::mcp::{CallAnswer, Input};
use world_store::{ApprovalRow, ApprovalState, Approver, Ref, Surface, TaskKey, canonical};

/// The key of the one input request an approval question asks.
const INPUT_KEY: &str = "approval";

/// One MCP call, as far as asking its user goes.
pub struct Question<'a> {
    credential: Ref,
    transition: &'a str,
    arguments: Ref,
    input: &'a Input,
}

impl<'a> Question<'a> {
    pub fn of(caller: &Caller, transition: &'a str, arguments: &Value, input: &'a Input) -> Question<'a> {
        let arguments = Ref::of(&canonical::to_vec(arguments));
        Question { credential: caller.credential_id, transition, arguments, input }
    }

    fn belongs(&self) -> Belongs<'_> {
        (&self.credential, self.transition, self.arguments)
    }

    /// The answer a retry carries, checked: its state sealed by this store,
    /// unexpired, the caller's, for this tool and these arguments, and its
    /// approval still pending. `Ok(None)` for a first call.
    pub async fn answer(&self, state: &State) -> Result<Option<Answer>, Retry> {
        let Some(text) = &self.input.request_state else { return Ok(None) };
        let bad = |why: String| Retry::Bad(why);
        let opened =
            sealed::unseal(&state.approval_key, text, clock::now(), self.belongs()).map_err(|e| bad(e.to_string()))?;
        let d = state.clone();
        let id = opened.approval.clone();
        let row = tokio::task::spawn_blocking(move || d.store.snapshot().and_then(|s| s.approval(&id)))
            .await
            .map_err(|e| bad(e.to_string()))?
            .map_err(|e| bad(e.to_string()))?;
        match row {
            Some(r) if r.credential == self.credential && r.state == ApprovalState::Pending && !r.closed => {}
            Some(_) => return Err(bad(format!("approval {} was decided or used already", opened.approval))),
            None => return Err(bad(format!("no approval {}", opened.approval))),
        }
        let by = Decider::Elicitation { credential_id: self.credential.hex() };
        match response(self.input.responses.get(INPUT_KEY)) {
            Response::Dismissed => Err(Retry::Dismissed(opened.approval)),
            Response::Missing => Ok(Some(Answer { approval_id: opened.approval, verdict: None, by })),
            Response::Said(v) => Ok(Some(Answer { approval_id: opened.approval, verdict: Some(v), by })),
        }
    }

    /// How a call waiting for approval `p` answers: a question for the
    /// client's user when it can ask one and the grant lets its user decide,
    /// else a tool error naming the approval for the operator.
    pub fn ask(&self, state: &State, p: &PendingApproval) -> CallAnswer {
        if !self.input.can_elicit || p.approver != Approver::Anyone {
            return CallAnswer::Refused(pending_text(p));
        }
        let state_of = sealed::State::new(&self.credential, self.transition, self.arguments, &p.id, p.expires_at);
        CallAnswer::InputRequired {
            input_requests: json!({INPUT_KEY: {"method": "elicitation/create", "params": form(p)}}),
            request_state: sealed::seal(&state.approval_key, &state_of),
        }
    }
}

/// Why a retry runs nothing.
pub enum Retry {
    /// Its state or answer is not good for anything: a JSON-RPC error.
    Bad(String),
    /// The person dismissed the question (approval id): told, not asked
    /// again at once (a client would ask its user again and again).
    Dismissed(String),
}

/// What an elicitation result says.
enum Response {
    /// No usable answer: ask again.
    Missing,
    /// `cancel`: the person closed the question without deciding.
    Dismissed,
    Said(Verdict),
}

/// A person's word in an elicitation result: accept with a decision, or
/// decline (no); cancel dismisses; anything else decides nothing.
fn response(r: Option<&Value>) -> Response {
    let action = r.and_then(|r| r.get("action")).and_then(Value::as_str);
    let decision = r.and_then(|r| r.pointer("/content/decision")).and_then(Value::as_str);
    match (action, decision) {
        (Some("decline"), _) | (Some("accept"), Some("deny")) => Response::Said(Verdict::Deny),
        (Some("accept"), Some("approve")) => Response::Said(Verdict::Approve),
        (Some("accept"), Some("approve-for-session")) => Response::Said(Verdict::ApproveForSession),
        (Some("cancel"), _) => Response::Dismissed,
        _ => Response::Missing,
    }
}

/// What a call whose question was dismissed answers: nothing ran, and how
/// to go on.
pub fn dismissed_text(approval: &str) -> String {
    format!(
        "Not run: the approval question was dismissed without a decision. Nothing ran and nothing was debited. \
         Call this tool again with the same arguments to be asked again, or the operator decides with \
         `worldd approve {approval}` or `worldd deny {approval}`."
    )
}

/// The form a client shows its user: what will happen, and three choices.
fn form(p: &PendingApproval) -> Value {
    let message = format!(
        "Approve this? {}. It runs once if you approve; nothing runs if you deny. (Approval {}, open until {} UTC.)",
        p.summary,
        p.id,
        clock::utc(p.expires_at)
    );
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "description": "Approve once, approve this exact request (same tool, same arguments) for the rest of the session, or deny.",
                    "oneOf": [
                        {"const": "approve", "title": "Approve once"},
                        {"const": "approve-for-session", "title": "Approve this exact request for the session"},
                        {"const": "deny", "title": "Deny"}
                    ]
                }
            },
            "required": ["decision"]
        }
    })
}

/// JSON-RPC "invalid params": the answer or state a retry carried is not
/// (or no longer) good for anything.
const CODE_INVALID_PARAMS: i64 = -32602;

/// What the agent (and its user) read when a call waits for approval:
/// what it asked, that nothing ran, who decides and how, and what to do next.
pub fn pending_text(p: &PendingApproval) -> String {
    let who = match p.approver {
        Approver::Operator => "the operator only",
        Approver::Anyone => "a person",
    };
    format!(
        "Not run: this call needs approval first, from {who}. {summary}. Nothing ran and nothing was debited. \
         Approval {id} waits until {until} UTC. The operator decides with `worldd approve {id}` \
         (or `worldd approve {id} --for-session`, or `worldd deny {id}`); `worldd approvals` lists what waits. \
         Once it is approved, call this tool again with the same arguments: it runs once.",
        summary = p.summary,
        id = p.id,
        until = clock::utc(p.expires_at),
    )
}

/// An A2A `input-required` status message's data: the approval, and what
/// to do.
pub fn pending_data(p: &PendingApproval) -> serde_json::Value {
    approval_data(p, "pending", pending_text(p))
}

/// The status message's data of a task that waits on `w`: asked, decided
/// and not yet told to the task (which then goes on when sent again), or
/// ended by another call of the session with the identical request (used,
/// or its denial recorded), or lapsed: the task then never ran, and sent
/// again it is asked afresh.
pub fn waiting_data(w: &Waiting) -> serde_json::Value {
    let (p, asked_afresh) = (&w.pending, "Send this task again with the same request to be asked afresh.");
    match w.stands {
        Stands::Pending => pending_data(p),
        Stands::Approved => approval_data(
            p,
            "approved",
            format!(
                "Approved, not run yet: {}. Send this task again with the same request (and no answer) \
                 before {} UTC and it runs once.",
                p.summary,
                clock::utc(p.expires_at)
            ),
        ),
        Stands::Used => approval_data(
            p,
            "used",
            format!(
                "Approved and used by another call of this session with the identical request: {}. \
                 This task did not run; nothing of it was recorded or debited. {asked_afresh}",
                p.summary
            ),
        ),
        Stands::Denied => approval_data(
            p,
            "denied",
            format!(
                "Denied: {}. Nothing ran and nothing was debited; send this task again with the same request \
                 and the denial is recorded.",
                p.summary
            ),
        ),
        Stands::DenialRecorded => approval_data(
            p,
            "denied",
            format!(
                "Denied: {}. The denial was recorded by another call of this session with the identical request; \
                 this task did not run and nothing was debited. {asked_afresh}",
                p.summary
            ),
        ),
        Stands::Expired => approval_data(
            p,
            "expired",
            format!(
                "Expired at {} UTC with nothing run under it: {}. Nothing ran and nothing was debited. {asked_afresh}",
                clock::utc(p.expires_at),
                p.summary
            ),
        ),
    }
}

/// The data of a status message about approval `p`, in `state`.
fn approval_data(p: &PendingApproval, state: &str, text: String) -> serde_json::Value {
    json!({
        "approval": {
            "id": p.id,
            "state": state,
            "approver": p.approver.as_str(),
            "summary": p.summary,
            "effect": p.effect,
            "scope": p.scope,
            "cost": p.cost,
            "budgetLeft": p.budget_left,
            "expiresAt": world_protocol::a2a::iso8601(p.expires_at),
        },
        "text": text,
    })
}

/// Where an approval a task waited on stands for that task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stands {
    /// Asked, undecided, unexpired.
    Pending,
    /// Approved and still usable: the task sent again runs.
    Approved,
    /// Approved and used up by another call with the identical request.
    Used,
    /// Denied and not yet told: the task sent again records the denial.
    Denied,
    /// Denied, the denial recorded by another call with the identical request.
    DenialRecorded,
    /// Expired (undecided, or approved and unused in time).
    Expired,
}

impl Stands {
    /// Where approval `row` stands at `now`.
    pub fn of(row: &ApprovalRow, now: u64) -> Stands {
        match row.state {
            ApprovalState::Pending if now < row.expires_at => Stands::Pending,
            ApprovalState::Approved if row.usable(now) && !row.closed => Stands::Approved,
            ApprovalState::Approved if row.uses > 0 && !row.for_session => Stands::Used,
            ApprovalState::Denied if row.closed => Stands::DenialRecorded,
            ApprovalState::Denied if now < row.expires_at => Stands::Denied,
            ApprovalState::Pending | ApprovalState::Approved | ApprovalState::Denied | ApprovalState::Expired => {
                Stands::Expired
            }
        }
    }
}

/// An approval an A2A task waits on: its id, and the call to run again.
pub struct Waiting {
    pub id: String,
    /// Where it stands for the task.
    pub stands: Stands,
    pub transition: String,
    pub arguments: Value,
    /// What the task's status tells of it.
    pub pending: PendingApproval,
    /// When it was asked.
    pub asked_at: u64,
}

/// The approval the caller's A2A task `task_id` last waited on (by the
/// store's index of waits, whichever call since decided, used or closed it),
/// with the request it asked about (from what was shown); none once the
/// task has a row (it ran, or its denial was recorded: it waits no more).
pub async fn waiting_on(state: &State, caller: &Caller, task_id: &str) -> Result<Option<Waiting>, String> {
    let (d, credential) = (state.clone(), caller.credential_id);
    let key = TaskKey { surface: Surface::A2a, episode: caller.session.episode.clone(), task_id: task_id.to_string() };
    let found = tokio::task::spawn_blocking(move || -> Result<Option<Waiting>, world_store::ReadError> {
        let snap = d.store.snapshot()?;
        if snap.task(&key)?.is_some() {
            return Ok(None);
        }
        let Some((id, row)) = snap.awaited_approval(&credential, &key.task_id)? else { return Ok(None) };
        let shown: Value = snap.payload(&row.shown)?.and_then(|p| serde_json::from_slice(&p).ok()).unwrap_or_default();
        let arguments = shown.get("arguments").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
        let pending = PendingApproval {
            id: id.clone(),
            approver: row.approver,
            summary: shown.get("summary").and_then(Value::as_str).unwrap_or_default().to_string(),
            effect: row.effect.clone(),
            scope: row.scope.clone(),
            cost: row.cost,
            budget_left: shown.get("budgetLeft").and_then(Value::as_u64).unwrap_or_default(),
            expires_at: row.expires_at,
        };
        let stands = Stands::of(&row, clock::now());
        Ok(Some(Waiting { id, stands, transition: row.transition, arguments, pending, asked_at: row.requested_at }))
    });
    found.await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
}

/// A retry whose answer cannot decide its approval: a JSON-RPC error, and
/// nothing runs.
pub fn bad_state(why: &str) -> CallAnswer {
    CallAnswer::Error {
        code: CODE_INVALID_PARAMS,
        message: "Invalid or expired requestState".into(),
        data: Some(json!({"reason": "invalid_request_state", "detail": why})),
    }
}
