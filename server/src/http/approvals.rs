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
use world_store::{ApprovalState, Approver, Ref, canonical};

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
    pub async fn answer(&self, state: &State) -> Result<Option<Answer>, String> {
        let Some(text) = &self.input.request_state else { return Ok(None) };
        let opened =
            sealed::unseal(&state.approval_key, text, clock::now(), self.belongs()).map_err(|e| e.to_string())?;
        let d = state.clone();
        let id = opened.approval.clone();
        let row = tokio::task::spawn_blocking(move || d.store.snapshot().and_then(|s| s.approval(&id)))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        match row {
            Some(r) if r.credential == self.credential && r.state == ApprovalState::Pending && !r.closed => {}
            Some(_) => return Err(format!("approval {} was decided or used already", opened.approval)),
            None => return Err(format!("no approval {}", opened.approval)),
        }
        let by = Decider::Elicitation { credential_id: self.credential.hex() };
        Ok(Some(Answer { approval_id: opened.approval, verdict: verdict(self.input.responses.get(INPUT_KEY)), by }))
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

/// A person's word in an elicitation result: accept with a decision, or
/// decline (no); cancel, or anything else, decides nothing (ask again).
fn verdict(response: Option<&Value>) -> Option<Verdict> {
    let r = response?;
    match r.get("action").and_then(Value::as_str)? {
        "decline" => Some(Verdict::Deny),
        "accept" => match r.pointer("/content/decision").and_then(Value::as_str)? {
            "approve" => Some(Verdict::Approve),
            "approve-for-session" => Some(Verdict::ApproveForSession),
            "deny" => Some(Verdict::Deny),
            _ => None,
        },
        _ => None,
    }
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
        "Not run: this call needs {who}'s approval first. {summary}. Nothing ran and nothing was debited. \
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
    json!({
        "approval": {
            "id": p.id,
            "state": "pending",
            "approver": p.approver.as_str(),
            "summary": p.summary,
            "effect": p.effect,
            "scope": p.scope,
            "cost": p.cost,
            "budgetLeft": p.budget_left,
            "expiresAt": world_protocol::a2a::iso8601(p.expires_at),
        },
        "text": pending_text(p),
    })
}

/// An approval an A2A task waits on: its id, and the call to run again.
pub struct Waiting {
    pub id: String,
    pub transition: String,
    pub arguments: Value,
}

/// The pending approval the caller's task `task_id` was asked on, with the
/// request it asked about (from what was shown).
pub async fn waiting_on(state: &State, caller: &Caller, task_id: &str) -> Result<Option<Waiting>, String> {
    let (d, credential, task) = (state.clone(), caller.credential_id, task_id.to_string());
    let found = tokio::task::spawn_blocking(move || -> Result<Option<Waiting>, world_store::ReadError> {
        let snap = d.store.snapshot()?;
        let open = snap.open_approvals(world_store::APPROVALS_OPEN_MAX as usize)?;
        let Some((id, row)) = open.into_iter().find(|(_, r)| {
            r.credential == credential && r.task.as_deref() == Some(task.as_str()) && r.state == ApprovalState::Pending
        }) else {
            return Ok(None);
        };
        let shown: Value = snap.payload(&row.shown)?.and_then(|p| serde_json::from_slice(&p).ok()).unwrap_or_default();
        let arguments = shown.get("arguments").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
        Ok(Some(Waiting { id, transition: row.transition, arguments }))
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
