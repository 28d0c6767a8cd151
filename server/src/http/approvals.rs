//! How the agent surfaces tell a call that waits for a person, and a bad
//! answer to one.

use crate::clock;
use crate::coordinator::PendingApproval;
use serde_json::json;
use world_protocol::mcp::CallAnswer;
use world_store::Approver;

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

/// A retry whose answer cannot decide its approval: a JSON-RPC error, and
/// nothing runs.
pub fn bad_state(why: &str) -> CallAnswer {
    CallAnswer::Error {
        code: CODE_INVALID_PARAMS,
        message: "Invalid or expired requestState".into(),
        data: Some(json!({"reason": "invalid_request_state", "detail": why})),
    }
}
