//! `worldd approvals | approve ID | deny ID`: the operator's view of what
//! waits for a person, and their word on it. Through a running daemon's
//! admin socket (owner only) when there is one, else on the store itself
//! (a PostgreSQL store is always decided on directly: every node reads it).

use super::fail;
use crate::admin::{self, AdminRequest, AdminResponse};
use crate::approvals::{self, Decider, Listed, Verdict};
use crate::stores::StoreSpec;
use std::process::ExitCode;

pub fn list(spec: &StoreSpec, json: bool) -> ExitCode {
    let rows = match admin::call_serving(spec, &AdminRequest::Approvals) {
        Ok(Some(AdminResponse::Approvals { rows })) => rows,
        Ok(Some(AdminResponse::Error { message })) => return fail(1, format!("approvals: {message}")),
        Ok(Some(other)) => return fail(1, format!("approvals: unexpected reply {other:?}")),
        Ok(None) => match list_offline(spec) {
            Ok(rows) => rows,
            Err(e) => return fail(1, format!("approvals: {e}")),
        },
        Err(e) => return fail(1, format!("approvals: {e}")),
    };
    if json {
        say!("{}", serde_json::to_string(&rows).unwrap_or_else(|_| "[]".into()));
        return ExitCode::SUCCESS;
    }
    let now = crate::clock::now();
    for r in &rows {
        say!("{}", line(r, now));
    }
    say!("{}", tally(&rows, now));
    ExitCode::SUCCESS
}

/// Whether a listed approval has run out of time: nobody can decide it any
/// more (a pending one), or nothing runs under it (an approved one).
fn lapsed(r: &Listed, now: u64) -> bool {
    now >= r.expires_at
}

/// One approval in a line: id, state, who may decide, until when, and what.
fn line(r: &Listed, now: u64) -> String {
    let state = match r.state.as_str() {
        _ if lapsed(r, now) => "expired",
        "approved" if r.for_session => "approved for the session",
        s => s,
    };
    let who = if r.approver == "operator" { "operator only" } else { "anyone" };
    let until = if lapsed(r, now) { "at" } else { "until" };
    format!(
        "{} {state} ({who}) {until} {} UTC, episode {}: {}",
        r.id,
        crate::clock::utc(r.expires_at),
        r.episode,
        printable(&r.summary)
    )
}

/// The closing line: how many wait for a word (open: pending, not expired),
/// how many were approved and wait for their call, how many expired.
fn tally(rows: &[Listed], now: u64) -> String {
    let count = |f: &dyn Fn(&Listed) -> bool| rows.iter().filter(|r| f(r)).count();
    let open = count(&|r| r.state == "pending" && !lapsed(r, now));
    let approved = count(&|r| r.state == "approved" && !lapsed(r, now));
    let expired = count(&|r| lapsed(r, now));
    let mut line = format!("{open} open approval(s)");
    if approved > 0 {
        line.push_str(&format!(", {approved} approved and not yet used"));
    }
    if expired > 0 {
        line.push_str(&format!(", {expired} expired (nothing runs under them)"));
    }
    line
}

/// `text` on one line: control characters escaped (`\n`), nothing else (a
/// quote stays a quote).
fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

fn list_offline(spec: &StoreSpec) -> Result<Vec<Listed>, String> {
    approvals::listed(&spec.read_only_snapshot()?).map_err(|e| e.to_string())
}

/// `approve ID [--for-session]` and `deny ID [--note TEXT]`.
pub fn decide(spec: &StoreSpec, id: &str, verdict: Verdict, note: &str) -> ExitCode {
    let verb = if verdict == Verdict::Deny { "deny" } else { "approve" };
    if !approvals::valid_id(id) {
        return fail(1, format!("{verb}: {id:?} is not an approval id (ap- and 16 hex digits)"));
    }
    let req = AdminRequest::Decide { id: id.to_string(), verdict, note: note.to_string() };
    let said = match admin::call_serving(spec, &req) {
        Ok(Some(AdminResponse::Decided { said, .. })) => said,
        Ok(Some(AdminResponse::Error { message })) => return fail(1, format!("{verb}: {message}")),
        Ok(Some(other)) => return fail(1, format!("{verb}: unexpected reply {other:?}")),
        Ok(None) => match decide_offline(spec, id, verdict, note) {
            Ok(said) => said,
            Err(e) => return fail(1, format!("{verb}: {e}")),
        },
        Err(e) => return fail(1, format!("{verb}: {e}")),
    };
    say!("{said}");
    ExitCode::SUCCESS
}

/// Decides on the store itself: no daemon holds it (a file), or it is shared.
fn decide_offline(spec: &StoreSpec, id: &str, verdict: Verdict, note: &str) -> Result<String, String> {
    let store = spec.open(crate::clock::now(), None, None).map_err(|e| e.to_string())?.store;
    let by = Decider::Store { store: spec.label(), uid: nix::unistd::getuid().as_raw() };
    approvals::operator_decide(store.as_ref(), id, verdict, &by, note, approvals::APPROVAL_TTL_DEFAULT_S)
        .map_err(|e| e.to_string())
}
