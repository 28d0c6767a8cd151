//! Approvals on the workbench: what waits for a person (and the command
//! that decides it: the workbench decides nothing, its pages are not
//! authenticated), and beside each effect decided under an approval, who
//! decided and when.

use super::{DASH, esc};
use crate::approvals::{self, ApprovalObject, Listed};
use crate::clock::utc;
use crate::episodes::CallsPage;
use std::collections::HashMap;
use world_store::{ReadError, Ref, Snapshot};

/// The open approvals (of `episode`, or all), each with its commands.
pub fn waiting_html(s: &Snapshot, episode: Option<&str>, now: u64) -> Result<String, ReadError> {
    let open: Vec<Listed> =
        approvals::listed(s)?.into_iter().filter(|l| episode.is_none_or(|e| l.episode == e)).collect();
    if open.is_empty() {
        return Ok(String::new());
    }
    let rows: String = open.iter().map(|l| row(l, episode.is_none(), now)).collect();
    let episode_th = if episode.is_none() { "<th>episode</th>" } else { "" };
    Ok(format!(
        "<h2 id=\"approvals\">Waiting for a person: {}</h2><p class=\"muted\">Decide with the commands shown, as the \
         store's owner; the agent's next identical call then runs once (or records the denial).</p>\
         <table id=\"waiting\"><tr><th>approval</th>{episode_th}<th>state</th><th>who decides</th><th>until (UTC)</th>\
         <th>what it would do</th><th>decide with</th></tr>{rows}</table>",
        open.len()
    ))
}

fn row(l: &Listed, with_episode: bool, now: u64) -> String {
    let state = match l.state.as_str() {
        "pending" if now >= l.expires_at => "expired (told at the next call)",
        "approved" if l.for_session => "approved for the session",
        s => s,
    };
    let who = if l.approver == "operator" { "the operator only" } else { "anyone asked" };
    let commands = if l.state == "pending" {
        format!("<code>worldd approve {id}</code> · <code>worldd deny {id}</code>", id = esc(&l.id))
    } else {
        DASH.into()
    };
    let episode = if with_episode {
        format!("<td><a href=\"/workbench/episodes/{e}\">{e}</a></td>", e = esc(&l.episode))
    } else {
        String::new()
    };
    format!(
        "<tr class=\"waiting\" id=\"approval-{id}\"><td class=\"approval-id\">{id}</td>{episode}<td>{}</td><td>{}</td>\
         <td>{}</td><td class=\"approval-summary\">{}</td><td class=\"approval-commands\">{commands}</td></tr>",
        esc(state),
        esc(who),
        esc(&utc(l.expires_at)),
        esc(&l.summary),
        id = esc(&l.id),
    )
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

fn approval_of(s: &Snapshot, record: &Ref) -> Result<Option<String>, ReadError> {
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
