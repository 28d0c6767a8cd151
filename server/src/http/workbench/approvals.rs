//! Approvals on the workbench: what waits for a person (and the command
//! that decides it: the workbench decides nothing, its pages are not
//! authenticated), and beside each effect decided under an approval, who
//! decided and when.

use super::dash;
use crate::approvals::{self, ApprovalObject, Listed};
use crate::clock::utc;
use crate::episodes::CallsPage;
use maud::{Markup, html};
use std::collections::HashMap;
use world_store::{ReadError, Ref, Snapshot};

/// Whether `l` still waits for a person's word: pending, and not expired.
fn waits(l: &Listed, now: u64) -> bool {
    l.state == "pending" && now < l.expires_at
}

/// The open approvals (of `episode`, or all), each with its commands: the
/// ones that wait first, counted in the heading; then those approved and not
/// yet used, and those that expired undecided, said apart.
pub fn waiting_html(s: &Snapshot, episode: Option<&str>, now: u64) -> Result<Markup, ReadError> {
    let mut open: Vec<Listed> =
        approvals::listed(s)?.into_iter().filter(|l| episode.is_none_or(|e| l.episode == e)).collect();
    if open.is_empty() {
        return Ok(html! {});
    }
    // Stable: within each group, oldest first as listed.
    open.sort_by_key(|l| !waits(l, now));
    let waiting = open.iter().filter(|l| waits(l, now)).count();
    let expired = open.iter().filter(|l| l.state == "pending" && !waits(l, now)).count();
    let approved = open.len() - waiting - expired;
    let mut also = vec![];
    if approved > 0 {
        also.push(format!("{approved} approved and not yet used"));
    }
    if expired > 0 {
        also.push(format!("{expired} expired before anyone decided"));
    }
    Ok(html! {
        h2 #approvals { "Waiting for a person: " span #waiting-count { (waiting) } }
        p.muted {
            @if !also.is_empty() { "Also listed: " (also.join(", ")) ". " }
            "Decide with the commands shown, as the store's owner; the agent's next identical call then runs once \
             (or records the denial)."
        }
        table #waiting {
            tr {
                th { "approval" } @if episode.is_none() { th { "episode" } } th { "state" } th { "who decides" }
                th { "until (UTC)" } th { "what it would do" } th { "decide with" }
            }
            @for l in &open { (row(l, episode.is_none(), now)) }
        }
    })
}

fn row(l: &Listed, with_episode: bool, now: u64) -> Markup {
    let state = match l.state.as_str() {
        "pending" if now >= l.expires_at => "expired (told at the next call)",
        "approved" if l.for_session => "approved for the session",
        s => s,
    };
    let who = if l.approver == "operator" { "the operator only" } else { "anyone asked" };
    html! {
        tr.waiting id={ "approval-" (l.id) } {
            td.approval-id { (l.id) }
            @if with_episode { td { a href={ "/workbench/episodes/" (l.episode) } { (l.episode) } } }
            td { (state) }
            td { (who) }
            td.when { (utc(l.expires_at)) }
            td.approval-summary { (l.summary) }
            td.approval-commands {
                @if l.state == "pending" {
                    code { "worldd approve " (l.id) } " · " code { "worldd deny " (l.id) }
                } @else { (dash()) }
            }
        }
    }
}

/// For each effect record of `page` decided under an approval: who decided, and when.
pub fn decisions(s: &Snapshot, page: &CallsPage) -> Result<HashMap<String, String>, ReadError> {
    let mut out = HashMap::new();
    let records = page.calls.iter().flat_map(|c| &c.effects).filter_map(|e| e.record.clone());
    for record in records {
        let Ok(r) = Ref::parse(&record) else { continue };
        let Some(approval) = approval_of(s, &r)? else { continue };
        out.insert(record, approval);
    }
    Ok(out)
}

pub fn approval_of(s: &Snapshot, record: &Ref) -> Result<Option<String>, ReadError> {
    let json = |r: &Ref| -> Result<Option<serde_json::Value>, ReadError> {
        Ok(s.payload(r)?.and_then(|p| serde_json::from_slice(&p).ok()))
    };
    let Some(rec) = json(record)? else { return Ok(None) };
    let Some(a) = rec["approvalRef"].as_str().and_then(|t| Ref::parse(t).ok()) else { return Ok(None) };
    let Some(obj) = s.payload(&a)?.and_then(|p| ApprovalObject::parse(&p)) else { return Ok(None) };
    let verb = match obj.decision.as_str() {
        "approved" => "approved",
        "approved-for-session" => "approved for the session",
        "denied" => "denied",
        _ => "expired undecided",
    };
    Ok(Some(format!("{verb} by {} at {} UTC ({})", obj.decided_by_text, utc(obj.decided_at), obj.approval_id)))
}
