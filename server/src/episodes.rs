//! What an episode did, as people read it: its summary (calls, effects by
//! status, denials by label, spend against the budget of its live grants,
//! sessions, activity) and its calls, page by page. Everything comes from the
//! episode index the store's commits keep (`View::episode`,
//! `View::episode_calls`), never from a walk of the log, so a page costs the
//! same in an episode of ten calls and in one of a million. The REST routes,
//! the CLI and the workbench all tell episodes through this module.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use world_store::*;

/// Most sessions of one episode read for its summary: past it, `sessions`
/// and the budgets count the first ones by credential id.
pub const EPISODE_SESSIONS_MAX: usize = 1000;
/// Default and largest page of calls.
pub const CALLS_PAGE_DEFAULT: usize = 100;
pub const CALLS_PAGE_MAX: usize = PAGE_MAX;
/// Default and largest page of episodes.
pub const EPISODES_PAGE_DEFAULT: usize = 50;
pub const EPISODES_PAGE_MAX: usize = 200;
/// Most sessions a listing reads to find the episodes that have a live
/// session and no call yet (each listing page reads them all, up to this).
pub const SESSIONS_SCANNED_MAX: usize = 4096;

/// Units spent on one (effect, scope), beside what the episode's live grants allow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    pub effect: String,
    pub scope: String,
    pub spent: u64,
    /// The largest budget a live session of the episode holds for the pair
    /// (what the broker checks a call of that session against); none when no
    /// live grant names it.
    pub budget: Option<u64>,
    pub remaining: Option<u64>,
    /// Who a live session's grant for the pair asks before each effect
    /// (`operator` when any asks only the operator, else `anyone`); absent
    /// when none asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asks: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sessions {
    pub live: u64,
    pub total: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    /// Start of the first bucket (Unix seconds).
    pub origin: u64,
    /// Width of each bucket, in seconds.
    pub width: u64,
    /// Calls started in each bucket.
    pub counts: Vec<u64>,
}

/// One episode's summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub episode: String,
    /// Calls ever started (committed, refused, uncertain, in flight).
    pub calls: u64,
    /// Calls by state: `started`, `committed`, `not-committed`, `uncertain`.
    pub states: BTreeMap<String, u64>,
    /// Effects by status: `ok`, `failed`, `denied`, `skipped`, `indeterminate`.
    pub effects: BTreeMap<String, u64>,
    /// Denied effects by the broker's label.
    pub denials: BTreeMap<String, u64>,
    pub spend: Vec<Spend>,
    pub sessions: Sessions,
    pub first_at: u64,
    pub last_at: u64,
    pub activity: Activity,
}

/// One effect of a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Effect {
    pub id: String,
    pub effect: String,
    pub scope: String,
    pub status: String,
    pub denial: Option<String>,
    pub cost: u64,
    /// What the call debited: its cost if it ran, else nothing.
    pub debited: u64,
    pub budget_before: u64,
    pub budget_after: u64,
    pub record: Option<String>,
    /// The request object it handed its handler (none for a skipped effect).
    pub request: Option<String>,
}

/// One call of an episode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    /// Its place among the episode's calls, from 0.
    pub position: u64,
    pub task_id: String,
    pub invocation_id: String,
    pub surface: String,
    pub transition: String,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    pub state: String,
    /// The log entry it committed as.
    pub entry_index: Option<u64>,
    pub output: Option<String>,
    pub effects: Vec<Effect>,
    /// Set for a call its client follows as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<CallRun>,
}

/// A call run as a task, as its episode shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRun {
    /// Unix seconds: when its command is stopped if it has not ended.
    pub deadline_at: u64,
    /// Unix seconds: when a cancel was first asked.
    pub cancel_asked_at: Option<u64>,
    /// While it runs, the operator's command that stops it.
    pub cancel: Option<String>,
    /// While it runs on the daemon answering, its output's last line.
    pub last_output: Option<String>,
}

/// The most of a running command's last line an episode view shows.
pub const LAST_OUTPUT_CHARS: usize = 160;

/// The last non-empty line of `tail`, at most `LAST_OUTPUT_CHARS` of its end.
pub fn last_line(tail: &str) -> String {
    let line = tail.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    let skip = line.chars().count().saturating_sub(LAST_OUTPUT_CHARS);
    line.chars().skip(skip).collect()
}

/// The last line of output of each running call of `page` whose command
/// runs on this daemon.
pub fn with_running_output(mut page: CallsPage, coordinator: &crate::coordinator::Coordinator) -> CallsPage {
    for call in &mut page.calls {
        let Some(run) = call.run.as_mut().filter(|_| call.state == TaskState::Started.as_str()) else { continue };
        let running = TaskKey::from_invocation_id(&call.invocation_id).and_then(|k| coordinator.running(&k));
        run.last_output = running.map(|r| last_line(&r.tail.read().0));
    }
    page
}

/// A page of an episode's calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallsPage {
    pub episode: String,
    pub from: u64,
    pub calls: Vec<Call>,
    /// Where the next page starts, when there is one.
    pub next: Option<u64>,
    /// Calls in the episode when the page was read.
    pub total: u64,
}

/// A page of episodes, most recently active first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpisodesPage {
    pub episodes: Vec<Summary>,
    /// The cursor of the next page (`after=`), when there is one.
    pub next: Option<String>,
}

/// An `after=` cursor that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("after must be a cursor from a previous page's `next` (<lastAt>.<episode>)")]
pub struct BadCursor;

/// The cursor naming the place after `s` in the activity order.
pub fn cursor_after(s: &Summary) -> String {
    format!("{}.{}", s.last_at, s.episode)
}

pub fn parse_cursor(text: &str) -> Result<(u64, String), BadCursor> {
    let (at, episode) = text.split_once('.').ok_or(BadCursor)?;
    let at = at.parse().map_err(|_| BadCursor)?;
    if episode.is_empty() {
        return Err(BadCursor);
    }
    Ok((at, episode.to_string()))
}

/// The summary of `episode`, or `None` when the store has seen no call of it
/// and it has paid for nothing (a session that only commits over REST pays
/// under its episode without a call: its summary is what it spent).
pub fn summary(snap: &Snapshot, episode: &str, now: u64) -> Result<Option<Summary>, ReadError> {
    let row = match snap.episode(episode)? {
        Some(row) => row,
        None => {
            let sessions = snap.episode_sessions(episode, EPISODE_SESSIONS_MAX)?;
            let newest = sessions.iter().filter(|(_, s)| s.is_live(now)).map(|(_, s)| s.created_at).max();
            match newest {
                Some(at) => before_first_call(at),
                None if !snap.episode_spend(episode)?.is_empty() => EpisodeRow::default(),
                None => return Ok(None),
            }
        }
    };
    summarize(snap, episode.to_string(), row, now).map(Some)
}

/// The summary row of an episode that has a live session and no call yet:
/// nothing done, its activity the newest live session's minting.
fn before_first_call(minted_at: u64) -> EpisodeRow {
    EpisodeRow { first_at: minted_at, last_at: minted_at, ..EpisodeRow::default() }
}

/// The episodes that have a live session but no summary row (no call yet),
/// each with `before_first_call`'s row. The store keeps summaries as calls
/// commit, so these come from the sessions (at most `SESSIONS_SCANNED_MAX`).
fn awaiting_first_call(snap: &Snapshot, now: u64) -> Result<Vec<(String, EpisodeRow)>, ReadError> {
    let mut newest: BTreeMap<String, u64> = BTreeMap::new();
    for (_, s) in snap.sessions(SESSIONS_SCANNED_MAX)? {
        if s.is_live(now) {
            let at = newest.entry(s.episode).or_insert(s.created_at);
            *at = (*at).max(s.created_at);
        }
    }
    let mut out = vec![];
    for (episode, at) in newest {
        if snap.episode(&episode)?.is_none() {
            out.push((episode, before_first_call(at)));
        }
    }
    Ok(out)
}

/// Episodes by last activity, most recent first, after `after`: those with
/// calls, and those whose session is live but that made no call yet.
pub fn list(snap: &Snapshot, after: Option<(u64, String)>, limit: usize, now: u64) -> Result<EpisodesPage, ReadError> {
    let limit = limit.clamp(1, EPISODES_PAGE_MAX);
    let key = |(episode, row): &(String, EpisodeRow)| (row.last_at, episode.clone());
    let mut rows = snap.episodes(after.clone(), limit + 1)?;
    let waiting = awaiting_first_call(snap, now)?.into_iter();
    rows.extend(waiting.filter(|r| after.as_ref().is_none_or(|a| key(r) < *a)));
    // The store's order: last activity, then the episode's bytes, both descending.
    rows.sort_by_key(|r| std::cmp::Reverse(key(r)));
    let more = rows.len() > limit;
    let episodes = rows
        .into_iter()
        .take(limit)
        .map(|(episode, row)| summarize(snap, episode, row, now))
        .collect::<Result<Vec<_>, _>>()?;
    let next = if more { episodes.last().map(cursor_after) } else { None };
    Ok(EpisodesPage { episodes, next })
}

fn summarize(snap: &Snapshot, episode: String, row: EpisodeRow, now: u64) -> Result<Summary, ReadError> {
    let sessions = snap.episode_sessions(&episode, EPISODE_SESSIONS_MAX)?;
    let live: Vec<&Session> = sessions.iter().map(|(_, s)| s).filter(|s| s.is_live(now)).collect();
    let budget_of = |effect: &str, scope: &str| {
        live.iter().flat_map(|s| &s.grants).filter(|g| g.effect == effect && g.scope == scope).map(|g| g.budget).max()
    };
    let asks_of = |effect: &str, scope: &str| {
        let asks = live.iter().flat_map(|s| &s.grants).filter(|g| g.effect == effect && g.scope == scope);
        // The operator-only ask is the stricter one: it names the pair.
        asks.filter_map(|g| g.ask).max_by_key(|a| *a == world_store::Approver::Operator).map(|a| a.as_str().to_string())
    };
    let mut spend: Vec<Spend> = snap
        .episode_spend(&episode)?
        .into_iter()
        .map(|(effect, scope, spent)| {
            let budget = budget_of(&effect, &scope);
            let asks = asks_of(&effect, &scope);
            Spend { remaining: budget.map(|b| b.saturating_sub(spent)), budget, effect, scope, spent, asks }
        })
        .collect();
    // Live grants not yet spent on are part of the picture too.
    for g in live.iter().flat_map(|s| &s.grants) {
        if !spend.iter().any(|s| s.effect == g.effect && s.scope == g.scope) {
            let budget = budget_of(&g.effect, &g.scope);
            let asks = asks_of(&g.effect, &g.scope);
            spend.push(Spend {
                effect: g.effect.clone(),
                scope: g.scope.clone(),
                spent: 0,
                budget,
                remaining: budget,
                asks,
            });
        }
    }
    spend.sort_by(|a, b| (&a.effect, &a.scope).cmp(&(&b.effect, &b.scope)));
    Ok(Summary {
        episode,
        calls: row.calls,
        states: row.states,
        effects: row.effects,
        denials: row.denials,
        spend,
        sessions: Sessions { live: live.len() as u64, total: sessions.len() as u64 },
        first_at: row.first_at,
        last_at: row.last_at,
        activity: Activity { origin: row.activity.origin, width: row.activity.width, counts: row.activity.counts },
    })
}

/// A page of `episode`'s calls from position `from`; `None` when the store has
/// seen no call of it.
pub fn calls(snap: &Snapshot, episode: &str, from: u64, limit: usize) -> Result<Option<CallsPage>, ReadError> {
    let row = match snap.episode(episode)? {
        Some(row) => row,
        // Known to the store (a session, a spend) but no call yet: no call to page.
        None if !snap.episode_sessions(episode, 1)?.is_empty() || !snap.episode_spend(episode)?.is_empty() => {
            EpisodeRow::default()
        }
        None => return Ok(None),
    };
    let limit = limit.clamp(1, CALLS_PAGE_MAX);
    let calls: Vec<Call> = snap.episode_calls(episode, from, limit)?.into_iter().map(call).collect();
    let end = calls.last().map_or(from, |c| c.position + 1);
    let next = (end < row.calls && !calls.is_empty()).then_some(end);
    Ok(Some(CallsPage { episode: episode.to_string(), from, calls, next, total: row.calls }))
}

fn call((position, key, task): (u64, TaskKey, Task)) -> Call {
    let committed = task.committed.as_ref();
    Call {
        position,
        task_id: key.task_id.clone(),
        invocation_id: key.invocation_id(),
        surface: key.surface.as_str().into(),
        transition: task.transition.clone(),
        started_at: task.started_at,
        ended_at: task.ended_at,
        state: task.state.as_str().into(),
        entry_index: committed.map(|c| c.entry_index),
        output: committed.map(|c| c.output_ref.to_string()),
        effects: task.effects.iter().map(effect).collect(),
        run: task.run.as_ref().map(|r| CallRun {
            deadline_at: r.deadline_at,
            cancel_asked_at: r.cancel_asked_at,
            cancel: (task.state == TaskState::Started).then(|| format!("worldd cancel {}", key.invocation_id())),
            last_output: None,
        }),
    }
}

fn effect(e: &CallEffect) -> Effect {
    Effect {
        id: e.id.clone(),
        effect: e.effect.clone(),
        scope: e.scope.clone(),
        status: e.status.as_str().into(),
        denial: e.denial.clone(),
        cost: e.cost,
        debited: e.debited(),
        budget_before: e.budget_before,
        budget_after: e.budget_after,
        record: e.record.map(|r| r.to_string()),
        request: e.request.map(|r| r.to_string()),
    }
}

/// The request and result objects an effect record names (a denied or
/// failed effect has no result).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectObjects {
    pub request: Option<Ref>,
    pub result: Option<Ref>,
}

/// What an effect asked for, as its request object spells it.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub effect: String,
    pub scope: String,
    pub cost: u64,
    /// When the broker decided (Unix seconds).
    pub at: u64,
    /// The handler's payload (`op`, `path`, `content`, `old_text`, `args`, …).
    pub payload: serde_json::Value,
}

fn json_object(snap: &Snapshot, r: &Ref) -> Result<Option<serde_json::Value>, ReadError> {
    Ok(snap.payload(r)?.and_then(|p| serde_json::from_slice(&p).ok()))
}

/// The objects `record` names; `None` when it is not a readable effect record.
pub fn effect_objects(snap: &Snapshot, record: &Ref) -> Result<Option<EffectObjects>, ReadError> {
    let Some(v) = json_object(snap, record)? else { return Ok(None) };
    let named = |k: &str| v[k].as_str().and_then(|t| Ref::parse(t).ok());
    Ok(Some(EffectObjects { request: named("requestRef"), result: named("resultRef") }))
}

/// The request object `request`, read back; `None` when absent or not a request.
pub fn effect_request(snap: &Snapshot, request: &Ref) -> Result<Option<Request>, ReadError> {
    let Some(bytes) = snap.payload(request)? else { return Ok(None) };
    let Some(r) = crate::effects::parse_request(&bytes) else { return Ok(None) };
    let Ok(payload) = serde_json::from_slice(r.payload) else { return Ok(None) };
    Ok(Some(Request { effect: r.effect.into(), scope: r.scope.into(), cost: r.cost, at: r.at, payload }))
}

/// The handler's output an effect result object holds (a JSON object).
pub fn effect_result(snap: &Snapshot, result: &Ref) -> Result<Option<serde_json::Value>, ReadError> {
    json_object(snap, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_what_it_names() {
        assert_eq!(parse_cursor("17.ep.one").unwrap(), (17, "ep.one".to_string()));
        assert!(parse_cursor("x.ep").is_err());
        assert!(parse_cursor("17.").is_err());
        assert!(parse_cursor("17").is_err());
    }
}
