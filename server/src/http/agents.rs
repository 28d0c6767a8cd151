//! The agent surfaces: MCP at `POST /mcp/` and the session's agent card (A2A
//! at `POST /a2a/` is `super::a2a`). The wire logic is `world_protocol`'s;
//! this is the shell that resolves sessions, builds the view and runs the
//! coordinator.

use super::bodies::{self, Read, Unread};
use super::{Rest, State, Unresolved, reply, resolve_session};
use crate::coordinator::{self, Answered, Call, CallError, Glanced};
use crate::limits::{DAEMON_VERSION, READ_DEADLINE};
use crate::sessions::{self, Caller};
use crate::tools::SessionTools;
use axum::body::Body;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use world_protocol::HttpReply;
use world_protocol::a2a;
use world_protocol::auth::{self, SessionDenial};
use world_protocol::mcp::{self, HostFailure, McpHeaders, ServerInfo};
use world_store::{Snapshot, Surface as CallSurface};

/// The aggregate deadline of one MCP POST.
pub const MCP_POST_DEADLINE: Duration = Duration::from_secs(20);
pub const SERVER_NAME: &str = "worldd";
pub const CARD_DESCRIPTION: &str = "World: the transitions this session's grants admit, each call brokered, journaled and committed to a hash-chained log";

pub(super) enum Denied {
    Session(SessionDenial),
    Failed(String),
}

impl From<Unresolved> for Denied {
    fn from(u: Unresolved) -> Denied {
        match u {
            Unresolved::Denied(d) => Denied::Session(d),
            other => Denied::Failed(other.cause()),
        }
    }
}

pub(super) async fn resolve(state: &State, headers: &HeaderMap) -> Result<Caller, Denied> {
    Ok(resolve_session(state, headers, |_, _, _| ()).await?.0)
}

/// The caller's session and, read from the same snapshot, its tools and
/// what admitting a call reads (`resolve_session`: in place, or one blocking hop).
async fn resolve_with_tools(state: &State, headers: &HeaderMap) -> Result<Resolved, Denied> {
    let tools = |d: &crate::daemon::Daemon, snap: &Snapshot, caller: &Caller| {
        let live = crate::clock::now() < caller.session.expires_at;
        let tools = d.tools.get(&d.coordinator, snap, &caller.session.grants, live)?;
        Ok((tools, d.coordinator.glance(snap)?))
    };
    Ok(resolve_session(state, headers, tools).await?)
}

/// The session's tools (for the agent card), under the read deadline.
pub async fn session_tools(state: &State, caller: &Caller) -> Result<Arc<SessionTools>, String> {
    let d = state.clone();
    let grants = caller.session.grants.clone();
    let live = crate::clock::now() < caller.session.expires_at;
    let work = tokio::task::spawn_blocking(move || -> Result<Arc<SessionTools>, String> {
        let snap = d.store.snapshot().map_err(|e| e.to_string())?;
        d.tools.get(&d.coordinator, &snap, &grants, live)
    });
    match tokio::time::timeout(READ_DEADLINE, work).await {
        Err(_) => Err("deadline".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(r)) => r,
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Reads an authenticated request's body (`super::bodies`): a declared
/// length over `max` is refused unread, and the client has `HTTP_READ_TIMEOUT`.
pub(super) async fn read_body(state: &State, headers: &HeaderMap, body: Body, max: usize) -> Result<Read, Unread> {
    if bodies::declared_over(headers, max) {
        return Err(Unread::TooLarge(body));
    }
    match tokio::time::timeout(crate::limits::HTTP_READ_TIMEOUT, bodies::read(&state.request_bodies, body, max)).await {
        Ok(read) => read,
        Err(_) => Err(Unread::Failed("the body did not come in time".into())),
    }
}

// ---- MCP ----

/// The seed's order: a body over 4 MiB is refused before the credential is
/// looked at (here on its declared length alone, so nothing is read), then
/// the session; the body is read only for a caller with a session.
pub async fn mcp_post(
    axum::extract::State(state): axum::extract::State<State>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if bodies::declared_over(&headers, mcp::MCP_BODY_MAX) {
        return reply(mcp::body_too_large());
    }
    let resolved = match resolve_with_tools(&state, &headers).await {
        Ok(found) => Ok(found),
        Err(Denied::Session(d)) => return reply(auth::mcp_denial(d)),
        Err(Denied::Failed(why)) => Err(why),
    };
    let body = match read_body(&state, &headers, body, mcp::MCP_BODY_MAX).await {
        Ok(body) => body,
        Err(Unread::Busy) => return reply(bodies::busy_mcp()),
        Err(_) => return reply(mcp::body_too_large()),
    };
    let resolved = match resolved {
        Ok(found) => found,
        Err(why) => {
            // The store failed the lookup: the host-failure envelope names the body's id.
            note!("worldd: mcp refusal: session: {why:?}");
            return reply(mcp::host_failure_for_body(&body, HostFailure::Failed));
        }
    };
    let deadline = tokio::time::Instant::now() + MCP_POST_DEADLINE;
    // A call running at the deadline answers (and logs) itself; this catches the steps before any call.
    match tokio::time::timeout_at(deadline, mcp_handle(&state, &headers, resolved, &body, deadline)).await {
        Ok(r) => reply(r),
        Err(_) => {
            note!("worldd: mcp refusal: POST /mcp/: \"the 20 s POST deadline passed\"");
            reply(mcp::host_failure_for_body(&body, HostFailure::TimedOut))
        }
    }
}

pub async fn mcp_other() -> Response {
    reply(mcp::method_not_allowed())
}

/// What `resolve_with_tools` found: the caller, and its tools and admission reads.
type Resolved = (Caller, Result<(Arc<SessionTools>, Glanced), String>);

async fn mcp_handle(
    state: &State,
    headers: &HeaderMap,
    (caller, tools): Resolved,
    body: &[u8],
    deadline: tokio::time::Instant,
) -> HttpReply {
    let (tools, glanced) = match tools {
        Ok(found) => found,
        Err(why) => {
            note!("worldd: mcp refusal: tools: {why:?}");
            return mcp::host_failure_for_body(body, HostFailure::Failed);
        }
    };
    let surface = match &tools.surface {
        Ok(s) => s,
        Err(e) => {
            note!("worldd: mcp refusal: tool surface refused: {e}");
            return mcp::host_failure_for_body(body, HostFailure::Failed);
        }
    };
    let accept = joined_accept(headers);
    let (mcp_method, mcp_name) = (joined(headers, "mcp-method"), joined(headers, "mcp-name"));
    let protocol_version_all = joined(headers, "mcp-protocol-version");
    let mcp_params: Vec<(&str, &[u8])> = headers
        .iter()
        .filter_map(|(n, v)| n.as_str().strip_prefix("mcp-param-").map(|name| (name, v.as_bytes())))
        .collect();
    let mcp_headers = McpHeaders {
        content_type: header_str(headers, header::CONTENT_TYPE),
        accept: accept.as_deref(),
        protocol_version: headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok()),
        protocol_version_all: protocol_version_all.as_deref(),
        mcp_method: mcp_method.as_deref(),
        mcp_name: mcp_name.as_deref(),
        mcp_params: &mcp_params,
    };
    let info = ServerInfo { name: SERVER_NAME, version: DAEMON_VERSION };
    let plan = match mcp::plan(&mcp_headers, body, surface, &info) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    if let Some(request) = plan.task() {
        let host = state.clone() as coordinator::SharedHost;
        let answered = super::running::answer(&host, &caller.session.episode, request).await;
        return mcp::finish_task(plan, answered);
    }
    let mut outcomes = Vec::with_capacity(plan.call_count());
    // The first call is admitted on what the session was resolved on; a
    // later item of a batch runs later, and is admitted afresh.
    let mut glanced = Some(glanced);
    let era = plan.era();
    for call in plan.calls() {
        let outcome = mcp_call(state, &caller, glanced.take(), call, era, deadline).await;
        let failed = outcome.is_err();
        outcomes.push(outcome);
        if failed {
            break;
        }
    }
    mcp::finish(plan, outcomes)
}

fn joined_accept(headers: &HeaderMap) -> Option<String> {
    let values: Vec<&str> = headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// Every value of header `name`, joined with `", "` (so a repeated
/// `Mcp-Method` or `Mcp-Name` never equals the body's value); `None` if absent.
fn joined(headers: &HeaderMap, name: &str) -> Option<Vec<u8>> {
    let values: Vec<&[u8]> = headers.get_all(name).iter().map(|v| v.as_bytes()).collect();
    (!values.is_empty()).then(|| values.join(&b", "[..]))
}

async fn mcp_call(
    state: &State,
    caller: &Caller,
    glanced: Option<Glanced>,
    asked: &mcp::Call,
    era: mcp::Era,
    deadline: tokio::time::Instant,
) -> mcp::CallOutcome {
    let (transition_id, arguments) = (asked.transition_id.clone(), asked.arguments.clone());
    let question = super::approvals::Question::of(caller, &asked.transition_id, &arguments, &asked.input);
    // A retry carries a person's answer: it must be ours, for this call, and
    // its approval still undecided, or nothing runs.
    let answer = match question.answer(state).await {
        Ok(answer) => answer,
        Err(super::approvals::Retry::Bad(why)) => {
            note!("worldd: mcp refusal: tools/call {transition_id}: {why}");
            return Ok(super::approvals::bad_state(&why));
        }
        Err(super::approvals::Retry::Dismissed(id)) => {
            return Ok(mcp::CallAnswer::Refused(super::approvals::dismissed_text(&id)));
        }
    };
    let Ok(_slot) = state.host_callbacks.clone().try_acquire_owned() else {
        note!("worldd: mcp refusal: tools/call {transition_id}: \"all host callback slots are busy\"");
        return Err(HostFailure::CapacityExceeded);
    };
    let task_id = sessions::new_task_id();
    let invocation_id = format!("mcp:{}:{task_id}", caller.session.episode);
    let call = Call {
        surface: CallSurface::Mcp,
        episode: caller.session.episode.clone(),
        grants: caller.session.grants.clone(),
        expires_at: caller.session.expires_at,
        task_id,
        transition_id,
        arguments,
        pin: None,
        context: None,
        message_id: None,
        credential: caller.credential_id,
        answer,
        // The task id was named just above: admission need not look for its row.
        glanced,
        may_run_as_task: asked.accepts_task,
    };
    // The POST deadline covers the call: when it passes first, the refusal names the invocation.
    let host = state.clone() as coordinator::SharedHost;
    let invoked = tokio::time::timeout_at(deadline, coordinator::invoke_or_start(&host, call)).await;
    match invoked.unwrap_or(Err(CallError::Deadline)) {
        Ok(Answered::Ended(outcome)) => Ok(outcome.output.into()),
        Ok(Answered::Running(started)) => Ok(mcp::CallAnswer::Task(super::running::created(&started))),
        Err(CallError::ApprovalPending(p)) => Ok(question.ask(state, &p)),
        Err(CallError::ApprovalAnswer(why)) => Ok(super::approvals::bad_state(&why)),
        Err(CallError::TasksBusy(why)) => Ok(mcp::CallAnswer::Refused(why)),
        Err(e) => {
            let detail = match &e {
                CallError::EffectsUnrecorded { records, .. } => {
                    format!(
                        "{e}; effect records: {}",
                        records.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" ")
                    )
                }
                CallError::NoHandler { missing } => format!("{e} ({missing})"),
                _ => e.to_string(),
            };
            note!("worldd: mcp refusal: tools/call {invocation_id}: {detail:?}");
            match e {
                // The modern era tells the model (and its user) what the
                // daemon lacks; the legacy eras keep the seed's envelope.
                CallError::NoHandler { missing } if era == mcp::Era::Modern => {
                    Ok(mcp::CallAnswer::Refused(cannot_run_text(&asked.transition_id, &missing)))
                }
                CallError::Deadline => Err(HostFailure::TimedOut),
                _ => Err(HostFailure::Failed),
            }
        }
    }
}

/// What an agent is told of a tool this daemon cannot run: the tool, what
/// the daemon lacks and the flag that provides it (the words of its stderr
/// line), and that nothing happened.
pub(super) fn cannot_run_text(tool: &str, missing: &str) -> String {
    format!(
        "Not run: this daemon cannot run {tool}: {missing}. Nothing ran and nothing was debited; \
         the operator can enable it, and the same call then runs."
    )
}

// ---- the agent card ----

/// Why the session's card could not be built.
pub(super) enum CardError {
    Deadline,
    Failed(String),
}

/// The session's card, as the client reached the daemon: for the
/// well-known routes and for `GetExtendedAgentCard` alike.
pub(super) async fn session_card(state: &State, headers: &HeaderMap, caller: &Caller) -> Result<Value, CardError> {
    let tools = match session_tools(state, caller).await {
        Ok(t) => t,
        Err(why) if why == "deadline" => return Err(CardError::Deadline),
        Err(why) => return Err(CardError::Failed(why)),
    };
    let host = header_str(headers, header::HOST).unwrap_or("127.0.0.1:7644");
    let base_url = format!("http://{host}");
    Ok(a2a::agent_card(a2a::CardInput {
        base_url: &base_url,
        name: SERVER_NAME,
        description: CARD_DESCRIPTION,
        version: DAEMON_VERSION,
        skills: &tools.views,
    }))
}

pub async fn agent_card(
    axum::extract::State(state): axum::extract::State<State>,
    headers: HeaderMap,
) -> Result<Response, Rest> {
    let caller = match resolve(&state, &headers).await {
        Ok(c) => c,
        Err(Denied::Session(d)) => return Err(Rest(auth::rest_denial(d))),
        Err(Denied::Failed(why)) => return Err(super::internal("/.well-known/agent.json", &why)),
    };
    match session_card(&state, &headers, &caller).await {
        Ok(card) => Ok(reply(a2a::card_reply(&card))),
        Err(CardError::Deadline) => Err(Rest(a2a::card_deadline_exceeded())),
        Err(CardError::Failed(why)) => {
            tracing::error!(route = "/.well-known/agent.json", cause = %why, "registry read failed");
            Err(Rest(a2a::card_unavailable()))
        }
    }
}

// ---- DNS-rebinding protection ----

fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host
            .rsplit_once(':')
            .map(|(h, p)| if p.bytes().all(|b| b.is_ascii_digit()) { h } else { host })
            .unwrap_or(host),
    };
    let name = name.to_ascii_lowercase();
    name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `Host` must name this machine, and an `Origin`, when present, must be a
/// loopback origin: a web page elsewhere cannot drive the daemon.
pub fn rebinding_check(headers: &HeaderMap) -> Result<(), HttpReply> {
    let forbid = |why: &str| Err(HttpReply::text(403, format!("forbidden: {why}\n")));
    match header_str(headers, header::HOST) {
        Some(h) if loopback_host(h) => {}
        Some(_) => return forbid("the Host header must name a loopback address"),
        None => return forbid("a Host header is required"),
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let Ok(origin) = origin.to_str() else { return forbid("the Origin header is not a loopback origin") };
        let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        if !rest.is_some_and(|r| !r.contains('/') && loopback_host(r)) {
            return forbid("the Origin header is not a loopback origin");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_and_origins_pass() {
        for ok in ["127.0.0.1:7644", "localhost", "LOCALHOST:1", "[::1]:7644", "127.9.9.9"] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in ["evil.example.com", "evil.example.com:7644", "10.0.0.1:80", "localhost.evil.com", "[::2]:1"] {
            assert!(!loopback_host(bad), "{bad}");
        }
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "127.0.0.1:7644".parse().unwrap());
        assert!(rebinding_check(&h).is_ok());
        h.insert(header::ORIGIN, "http://evil.example.com".parse().unwrap());
        assert_eq!(rebinding_check(&h).unwrap_err().status, 403);
        h.insert(header::ORIGIN, "http://localhost:3000".parse().unwrap());
        assert!(rebinding_check(&h).is_ok());
    }
}
