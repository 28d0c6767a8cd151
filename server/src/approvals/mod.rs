//! Approvals, as values: what a person is shown, the decision object the
//! chain keeps, and the store requests that ask and decide. The coordinator's
//! `approve` phase asks; the operator's verbs and an MCP client's answer
//! decide.

pub mod state;
pub mod sweep;

use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use world_store::*;

/// A decision, as the chain keeps it; the effect record of an effect run
/// (or denied) under it names it.
pub const APPROVAL: &str = APPROVAL_DECISION;
/// What a person was shown when asked.
pub const APPROVAL_REQUEST: &str = "world/approval-request/v1";
pub const PROVENANCE: &str = APPROVALS_PROVENANCE;
/// The field of a command's request, under a grant that asks, naming the
/// state of the worktree it runs over (`effects::state`): the approval's
/// digest binds it, so a change to the worktree asks again.
pub const WORKTREE_STATE: &str = "worktreeState";

/// How long a pending approval waits for a person, and an approved one for
/// its effect to run (`serve --approval-ttl`).
pub const APPROVAL_TTL_DEFAULT_S: u64 = 300;
pub const APPROVAL_TTL_MAX_S: u64 = 86_400;
/// Longest note an operator may give with a denial.
pub const NOTE_MAX: usize = 1024;
/// Most of a write's content or a request's JSON shown to a person.
const SHOWN_TEXT_MAX: usize = 2000;

pub const DENIED_APPROVAL: &str = "denied:approval";
/// Nobody could be asked: the session's, the episode's or the store's open
/// approvals are at their bound (each its own label, so that the agent and
/// the operator can tell which).
pub const DENIED_NO_ROOM_SESSION: &str = "denied:approval-unavailable-session";
pub const DENIED_NO_ROOM_EPISODE: &str = "denied:approval-unavailable-episode";
pub const DENIED_NO_ROOM_STORE: &str = "denied:approval-unavailable-store";

/// A fresh approval id: `ap-` and 16 random hex digits.
pub fn new_id() -> String {
    let mut bytes = [0u8; 8];
    rand::rng().fill_bytes(&mut bytes);
    format!("ap-{}", hex::encode(bytes))
}

/// Whether `id` could be an approval id (checked before any lookup).
pub fn valid_id(id: &str) -> bool {
    id.len() == 19 && id.starts_with("ap-") && id[3..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// One effect request, as a person judges it.
pub struct Asked<'a> {
    pub episode: &'a str,
    pub credential: Ref,
    pub transition: &'a str,
    pub effect: &'a str,
    pub scope: &'a str,
    pub cost: u64,
    pub budget_left: u64,
    pub payload: &'a Value,
    pub approver: Approver,
    /// The tool's arguments: what a continuation runs again.
    pub arguments: &'a Value,
    /// The A2A task asked on, if any.
    pub task: Option<&'a str>,
    /// For a command: what World's tools changed in its worktree since the
    /// episode's last command ran, oldest first.
    pub changed: Vec<String>,
}

impl Asked<'_> {
    pub fn digest(&self) -> Ref {
        let payload = canonical::to_vec(self.payload);
        canonical::approval_digest(&self.credential, self.transition, self.effect, self.scope, self.cost, &payload)
    }

    /// One sentence a person can judge: tool, effect, scope, cost, budget
    /// left, and the request itself.
    pub fn summary(&self) -> String {
        let changed = match self.changed.as_slice() {
            [] => String::new(),
            changes => format!("; changed through World since the episode's last command: {}", changes.join(", ")),
        };
        format!(
            "tool {} asks to {} (effect {} on {}, cost {} of {} left in episode {}){changed}",
            self.transition,
            describe(self.effect, self.payload),
            self.effect,
            self.scope,
            self.cost,
            self.budget_left,
            self.episode,
        )
    }

    /// The `world/approval-request/v1` object: what was shown.
    pub fn shown(&self) -> NewObject {
        let shown = json!({
            "summary": self.summary(),
            "episode": self.episode,
            "credentialId": self.credential.to_string(),
            "transition": self.transition,
            "effect": self.effect,
            "scope": self.scope,
            "cost": self.cost,
            "budgetLeft": self.budget_left,
            "request": self.payload,
            "approver": self.approver.as_str(),
            "arguments": self.arguments,
            "taskId": self.task,
        });
        NewObject::derived(APPROVAL_REQUEST, PROVENANCE, canonical::to_vec(&shown))
    }

    /// The store request asking for it, `digest` being [`Asked::digest`] (the
    /// open one of the same request is answered instead, if there is one).
    pub fn ask(&self, digest: Ref, now: u64, ttl: u64) -> Op {
        let shown = self.shown();
        let approval = ApprovalRow {
            episode: self.episode.to_string(),
            credential: self.credential,
            digest,
            transition: self.transition.to_string(),
            effect: self.effect.to_string(),
            scope: self.scope.to_string(),
            cost: self.cost,
            approver: self.approver,
            shown: shown.hash,
            requested_at: now,
            expires_at: now.saturating_add(ttl),
            state: ApprovalState::Pending,
            for_session: false,
            decision: None,
            decided_at: 0,
            uses: 0,
            closed: false,
            task: self.task.map(str::to_string),
        };
        Op::AskApproval { id: new_id(), approval, shown }
    }
}

/// The request in words: the command line, the path and size (or the
/// edit), else the request's JSON.
fn describe(effect: &str, payload: &Value) -> String {
    let text = |k: &str| payload.get(k).and_then(Value::as_str).unwrap_or("");
    match payload.get("op").and_then(Value::as_str) {
        Some("exec") => {
            let args: Vec<&str> =
                payload.get("args").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            let line = std::iter::once(text("command")).chain(args).collect::<Vec<_>>().join(" ");
            match payload.get(WORKTREE_STATE).and_then(Value::as_str) {
                Some(state) => format!(
                    "run `{line}` in the episode's worktree as it is now (state {}…): any change to its files \
                     before it runs asks again",
                    state.get(..19).unwrap_or(state)
                ),
                None => format!("run `{line}` in the episode's worktree"),
            }
        }
        Some("write") => {
            let content = text("content");
            format!("write {} bytes to {}: {}", content.len(), text("path"), clipped(content))
        }
        Some("edit") => format!("edit {}:\n{}", text("path"), clipped(&diff(text("old_text"), text("new_text")))),
        Some(op) => format!("{op} {}", text("path")),
        None => format!("perform {effect} with {}", clipped(&String::from_utf8_lossy(&canonical::to_vec(payload)))),
    }
}

fn diff(old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new).unified_diff().context_radius(2).to_string()
}

fn clipped(s: &str) -> String {
    if s.len() <= SHOWN_TEXT_MAX {
        return s.to_string();
    }
    let mut end = SHOWN_TEXT_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &s[..end], s.len())
}

/// Who decided, and how they were known to be who they are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "via")]
pub enum Decider {
    /// The operator, through a daemon's admin socket (owner only).
    AdminSocket { node: String, uid: u32 },
    /// The operator, on the store itself (`--store URL` or `--db PATH`).
    Store { store: String, uid: u32 },
    /// The user of the MCP client holding the session's credential, asked
    /// through elicitation.
    Elicitation { credential_id: String },
    /// The A2A client holding the session's credential, on the task.
    Task { credential_id: String, task_id: String },
    /// Nobody decided before the approval expired.
    Clock,
    /// Nobody decided before the session was revoked.
    Revocation,
}

impl Decider {
    pub fn describe(&self) -> String {
        match self {
            Decider::AdminSocket { node, uid } => {
                format!("the operator (uid {uid}) through the admin socket of {node}")
            }
            Decider::Store { store, uid } => format!("the operator (uid {uid}) on the store {store}"),
            Decider::Elicitation { credential_id } => {
                format!("the user of the MCP client of credential {}, through elicitation", short(credential_id))
            }
            Decider::Task { credential_id, task_id } => {
                format!("the A2A client of credential {} on task {task_id}", short(credential_id))
            }
            Decider::Clock => Lapse::Clock.decided_by().1.into(),
            Decider::Revocation => Lapse::Revocation.decided_by().1.into(),
        }
    }

    /// Whether an approver of this kind may decide under a grant asking `who`.
    pub fn may_decide(&self, who: Approver) -> bool {
        match self {
            Decider::AdminSocket { .. } | Decider::Store { .. } | Decider::Clock | Decider::Revocation => true,
            Decider::Elicitation { .. } | Decider::Task { .. } => who == Approver::Anyone,
        }
    }
}

fn short(credential_id: &str) -> &str {
    credential_id.get(..12).unwrap_or(credential_id)
}

/// A person's word, as the operator's verbs and the surfaces give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Approve,
    ApproveForSession,
    Deny,
}

impl Verdict {
    fn decision(self) -> &'static str {
        match self {
            Verdict::Approve => "approved",
            Verdict::ApproveForSession => "approved-for-session",
            Verdict::Deny => "denied",
        }
    }
}

/// The store request deciding `row` (id `id`): the decision object and the
/// row's new state. An approved effect must run within `ttl` seconds; one
/// approved for the session, before the session expires. (The clock's
/// decision, when nobody decided in time, is the store's: `Lapse`.)
pub fn decide(
    id: &str,
    row: &ApprovalRow,
    verdict: Verdict,
    by: &Decider,
    note: &str,
    at: u64,
    (ttl, session_expires_at): (u64, u64),
) -> Op {
    let state = if verdict == Verdict::Deny { ApprovalState::Denied } else { ApprovalState::Approved };
    let for_session = verdict == Verdict::ApproveForSession;
    let use_by = if for_session { session_expires_at } else { at.saturating_add(ttl) };
    let decided_by = serde_json::to_value(by).unwrap_or(Value::Null);
    let object = DecisionOf {
        id,
        row,
        decision: verdict.decision(),
        decided_by: &decided_by,
        decided_by_text: &by.describe(),
        note,
        at,
        expires_at: if state == ApprovalState::Approved { use_by } else { row.expires_at },
    }
    .object();
    Op::DecideApproval { id: id.to_string(), decision: ApprovalDecision { state, for_session, object, at, use_by } }
}

/// An approval decision object read back (for `why`, the workbench, verify).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalObject {
    pub approval_id: String,
    pub episode: String,
    pub credential_id: String,
    pub transition: String,
    pub effect: String,
    pub scope: String,
    pub cost: u64,
    pub request_digest: String,
    pub decision: String,
    pub decided_by_text: String,
    pub note: String,
    pub requested_at: u64,
    pub decided_at: u64,
    pub expires_at: u64,
}

impl ApprovalObject {
    pub fn parse(payload: &[u8]) -> Option<ApprovalObject> {
        serde_json::from_slice(payload).ok()
    }
}

/// One approval as the operator's verbs and the workbench list it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    pub id: String,
    pub episode: String,
    pub credential_id: String,
    pub state: String,
    pub approver: String,
    pub transition: String,
    pub effect: String,
    pub scope: String,
    pub cost: u64,
    pub requested_at: u64,
    pub expires_at: u64,
    pub for_session: bool,
    pub uses: u64,
    /// What is left of the grant's budget now (as the summary says it), when
    /// its session is still in the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_left: Option<u64>,
    /// What the person is asked, in words, with the cost and the budget left
    /// as they are now, not as they were when it was asked.
    pub summary: String,
}

/// The open approvals, oldest first, as listed.
pub fn listed(snap: &Snapshot) -> Result<Vec<Listed>, ReadError> {
    let mut out = vec![];
    for (id, row) in snap.open_approvals(APPROVALS_OPEN_MAX as usize)? {
        let shown = snap.payload(&row.shown)?.and_then(|p| serde_json::from_slice::<Value>(&p).ok());
        let mut summary =
            shown.as_ref().and_then(|v| v.get("summary").and_then(Value::as_str)).unwrap_or_default().to_string();
        // The budget moves while the question waits (other calls spend it):
        // say what is left now, in the words the question used.
        let grant = snap
            .session(&row.credential)?
            .and_then(|s| Session::grant_for(&s.grants, &row.effect, &row.scope).map(|g| g.budget));
        let budget_left = match grant {
            Some(budget) => Some(budget.saturating_sub(snap.spent(&row.episode, &row.effect, &row.scope)?)),
            None => None,
        };
        if let (Some(now_left), Some(then_left)) =
            (budget_left, shown.as_ref().and_then(|v| v.get("budgetLeft")).and_then(Value::as_u64))
        {
            let said = |left: u64| format!("cost {} of {left} left in episode {})", row.cost, row.episode);
            summary = summary.replacen(&said(then_left), &said(now_left), 1);
        }
        out.push(Listed {
            id,
            episode: row.episode.clone(),
            credential_id: row.credential.hex(),
            state: row.state.as_str().into(),
            approver: row.approver.as_str().into(),
            transition: row.transition.clone(),
            effect: row.effect.clone(),
            scope: row.scope.clone(),
            cost: row.cost,
            requested_at: row.requested_at,
            expires_at: row.expires_at,
            for_session: row.for_session,
            uses: row.uses,
            budget_left,
            summary,
        });
    }
    out.sort_by_key(|l| (l.requested_at, l.id.clone()));
    Ok(out)
}

/// Why an operator's decision was not taken.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("{0:?} is not an approval id (ap- and 16 hex digits)")]
    BadId(String),
    #[error("no approval {0}")]
    Unknown(String),
    #[error("the note is longer than {NOTE_MAX} bytes")]
    NoteTooLong,
    /// A yes after nobody decided in time: it cannot serve any more.
    #[error("{0}; nothing runs under it, and the agent's next identical call asks again")]
    Lapsed(String),
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The store refused it (decided already, say).
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Rounds of the operator's decision: an approval that expires between
/// the read and the write is read again, once.
const OPERATOR_ROUNDS: usize = 2;

/// The operator's word on approval `id`, written to `store` (blocking): the
/// line that tells what it came to. A denial of an approval that expired
/// before anyone decided closes it as expired (idempotently); a yes to one
/// is refused (`Lapsed`). The session's expiry bounds an approval for the
/// session.
pub fn operator_decide(
    store: &dyn WorldStore,
    id: &str,
    verdict: Verdict,
    by: &Decider,
    note: &str,
    ttl: u64,
) -> Result<String, DecideError> {
    if !valid_id(id) {
        return Err(DecideError::BadId(id.to_string()));
    }
    if note.len() > NOTE_MAX {
        return Err(DecideError::NoteTooLong);
    }
    for _ in 0..OPERATOR_ROUNDS {
        let snap = store.snapshot()?;
        let row = snap.approval(id)?.ok_or_else(|| DecideError::Unknown(id.to_string()))?;
        let now = crate::clock::now();
        let lapsed =
            row.state == ApprovalState::Expired || (row.state == ApprovalState::Pending && now >= row.expires_at);
        let op = match (lapsed, verdict) {
            (true, Verdict::Deny) if row.closed => return Ok(told(id, &row)),
            (true, Verdict::Deny) => Op::CloseApproval { id: id.to_string(), at: now },
            (true, _) => return Err(DecideError::Lapsed(lapsed_text(id, &row))),
            (false, _) => {
                let session_expires_at = snap.session(&row.credential)?.map(|s| s.expires_at).unwrap_or(0);
                decide(id, &row, verdict, by, note, now, (ttl, session_expires_at))
            }
        };
        match store.call(op) {
            Ok(Reply::Approval(_, row)) => return Ok(told(id, &row)),
            Err(WriteError::ApprovalExpired { .. }) => continue,
            Err(e) => return Err(e.into()),
            Ok(other) => return Err(WriteError::Storage(format!("unexpected reply {other:?}")).into()),
        }
    }
    Err(WriteError::Storage(format!("approval {id} kept changing while it was decided")).into())
}

/// What a decided approval means now, in one line.
pub fn told(id: &str, row: &ApprovalRow) -> String {
    match row.state {
        ApprovalState::Approved if row.for_session => {
            format!("approval {id}: approved; each identical call of the session runs, until the session expires")
        }
        ApprovalState::Approved => format!("approval {id}: approved; the agent's next identical call runs it once"),
        ApprovalState::Denied => {
            format!("approval {id}: denied; the agent's next identical call is told, and records the denial")
        }
        ApprovalState::Expired | ApprovalState::Pending => format!(
            "{}; nothing can run under it, and the agent's next identical call asks again",
            lapsed_text(id, row)
        ),
    }
}

/// When and why an approval nobody decided stopped serving.
fn lapsed_text(id: &str, row: &ApprovalRow) -> String {
    if row.state == ApprovalState::Expired && row.decided_at < row.expires_at {
        format!("approval {id} lapsed at {} UTC, when its session was revoked", crate::clock::utc(row.decided_at))
    } else {
        format!("approval {id} expired at {} UTC before anyone decided", crate::clock::utc(row.expires_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(payload: &Value) -> Asked<'_> {
        Asked {
            episode: "ep",
            credential: Ref::of(b"token"),
            transition: "tool",
            effect: "Workspace.Exec",
            scope: "worktree",
            cost: 2,
            budget_left: 10,
            payload,
            approver: Approver::Anyone,
            arguments: &Value::Null,
            task: None,
            changed: vec![],
        }
    }

    #[test]
    fn an_approval_binds_the_exact_request_and_never_its_time() {
        let a = json!({"op": "exec", "command": "git", "args": ["status"]});
        let b = json!({"op": "exec", "command": "git", "args": ["push"]});
        assert_eq!(asked(&a).digest(), asked(&a).digest());
        assert_ne!(asked(&a).digest(), asked(&b).digest());
        let mut other = asked(&a);
        other.credential = Ref::of(b"another");
        assert_ne!(other.digest(), asked(&a).digest());
    }

    #[test]
    fn a_person_is_shown_the_command_line_and_the_budget() {
        let a = json!({"op": "exec", "command": "git", "args": ["status", "--short"]});
        let s = asked(&a).summary();
        assert!(s.contains("run `git status --short`"), "{s}");
        assert!(s.contains("cost 2 of 10 left"), "{s}");
        let w = json!({"op": "edit", "path": "a.txt", "old_text": "one\n", "new_text": "two\n"});
        let s = asked(&w).summary();
        assert!(s.contains("-one") && s.contains("+two"), "{s}");
    }

    #[test]
    fn the_clock_and_a_revocation_are_named_as_the_store_names_them_in_its_decisions() {
        for (decider, lapse) in [(Decider::Clock, Lapse::Clock), (Decider::Revocation, Lapse::Revocation)] {
            let (by, text) = lapse.decided_by();
            assert_eq!(serde_json::to_value(&decider).unwrap(), by);
            assert_eq!(decider.describe(), text);
        }
    }

    #[test]
    fn approval_ids_are_checked_before_any_lookup() {
        assert!(valid_id(&new_id()));
        for bad in ["", "ap-", "ap-zzzzzzzzzzzzzzzz", "../etc/passwd", "ap-0123456789abcdef0"] {
            assert!(!valid_id(bad), "{bad}");
        }
    }
}
