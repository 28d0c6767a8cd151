//! `/workbench/episodes`: one row per episode, most recently active first;
//! `/workbench/episodes/<episode>`: its summary, spend over time against the
//! budget, denials, a page of its calls, what those calls changed and ran.
//! Everything comes from the episode index (`crate::episodes`) and the objects
//! of the calls shown: each page reads a bounded number of rows and objects,
//! whatever the episode's length.

use super::approvals;
use super::changes;
use super::svg::{self, Mark, Steps};
use super::{Page, check_params, dash, entry_link, index, obj_link_short, respond};
use crate::clock::utc;
use crate::episodes::{self, Activity, Call, CallsPage, Summary};
use crate::http::{State, query_pairs, read};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use std::collections::{BTreeMap, HashMap};
use world_store::{ReadError, Snapshot};

/// Episodes per page of the list.
pub const EPISODES_SHOWN: usize = 25;
/// Calls per page of an episode's timeline.
pub const CALLS_SHOWN: u64 = 50;
/// Calls after the shown page read to set its spend chart on the episode's
/// running total; when more follow, the chart starts from zero and says so.
pub const SPEND_TAIL_CALLS: usize = 500;

/// `after=<cursor>` of a previous page, or nothing.
fn parse_list(pairs: &[(String, String)]) -> Result<Option<(u64, String)>, String> {
    check_params(pairs, &["after"])?;
    let after = pairs.first().map(|(_, v)| episodes::parse_cursor(v)).transpose();
    after.map_err(|e| e.to_string())
}

/// `from=N`, or nothing (the newest page).
fn parse_calls(pairs: &[(String, String)]) -> Result<Option<u64>, String> {
    check_params(pairs, &["from"])?;
    pairs.first().map(|(_, v)| index("from", v)).transpose()
}

fn bad(m: &str) -> Response {
    super::html(Page::error(StatusCode::BAD_REQUEST, m))
}

pub async fn list(AxState(state): AxState<State>, RawQuery(query): RawQuery) -> Response {
    let after = match parse_list(&query_pairs(query.as_deref())) {
        Ok(a) => a,
        Err(m) => return bad(&m),
    };
    let now = crate::clock::now();
    respond(read(&state, "/workbench/episodes", move |s| list_view(s, after, now)).await)
}

pub async fn one(
    AxState(state): AxState<State>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Response {
    let episode = match path {
        Ok(Path(e)) => e,
        Err(e) => return bad(&e.body_text()),
    };
    let from =
        match crate::sessions::validate_episode(&episode).and_then(|()| parse_calls(&query_pairs(query.as_deref()))) {
            Ok(f) => f,
            Err(m) => return bad(&m),
        };
    let now = crate::clock::now();
    let daemon = state.clone();
    let view = move |s: &Snapshot| episode_view(s, &episode, from, now, &daemon.coordinator);
    respond(read(&state, "/workbench/episodes/{episode}", view).await)
}

/// A length of time in its largest whole unit (bucket widths are 60 s doubled).
fn span(seconds: u64) -> String {
    match seconds {
        s if s % 3600 == 0 => format!("{} h", s / 3600),
        s if s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// `committed 5 · not-committed 1`, or a dash.
fn counts(map: &BTreeMap<String, u64>) -> Markup {
    if map.is_empty() {
        return dash();
    }
    html! { @for (i, (k, n)) in map.iter().enumerate() { @if i > 0 { " · " } (k) " " (n) } }
}

fn episode_href(episode: &str) -> String {
    format!("/workbench/episodes/{episode}")
}

fn calls_word(n: u64) -> &'static str {
    if n == 1 { "call" } else { "calls" }
}

/// Calls over the episode's life, one column per bucket.
fn activity_svg(a: &Activity, calls: u64) -> Markup {
    let marks: Vec<Mark> = a
        .counts
        .iter()
        .enumerate()
        .map(|(i, n)| Mark {
            value: *n,
            title: format!("{} for {}: {n} {}", utc(a.origin + i as u64 * a.width), span(a.width), calls_word(*n)),
        })
        .collect();
    svg::columns(&marks, &format!("{calls} {} over time, in buckets of {}", calls_word(calls), span(a.width)))
}

/// One line per grant: its name, its meter, its figures.
fn grants_html(summary: &Summary) -> Markup {
    if summary.spend.is_empty() {
        return dash();
    }
    html! {
        @for g in &summary.spend {
            @let budget = g.budget.map_or_else(|| "no live grant".to_string(), |b| b.to_string());
            @let title = format!("{} on {}: {} spent of {budget}", g.effect, g.scope, g.spent);
            div.grant {
                span.grant-effect { (g.effect) } " "
                span.grant-scope.muted { (g.scope) } " "
                (svg::meter(g.spent, g.budget, &title)) " "
                span.grant-spent { (g.spent) } " / " span.grant-budget { (budget) }
            }
        }
    }
}

fn episode_row(e: &Summary) -> Markup {
    html! {
        tr.episode id={ "episode-" (e.episode) } {
            td { a.episode-link href=(episode_href(&e.episode)) { (e.episode) } }
            td.calls { (e.calls) }
            td.states { (counts(&e.states)) }
            td.effects { (counts(&e.effects)) }
            td.grants { (grants_html(e)) }
            td.activity {
                (activity_svg(&e.activity, e.calls))
                div.muted { "last active " span.when { (utc(e.last_at)) } }
            }
        }
    }
}

fn list_view(s: &Snapshot, after: Option<(u64, String)>, now: u64) -> Result<Page, ReadError> {
    let first = after.is_none();
    let page = episodes::list(s, after, EPISODES_SHOWN, now)?;
    let older = page.next.as_ref().map(|next| {
        format!("/workbench/episodes?after={}", form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>())
    });
    let body = html! {
        h1 { "Episodes" }
        (approvals::waiting_html(s, None, now)?)
        p.muted { "Most recently active first. Spend is against the largest budget a live session of the episode holds." }
        table #episodes {
            tr {
                th { "episode" } th { "calls" } th { "states" } th { "effects" } th { "grants: spent / budget" }
                th { "activity" }
            }
            @for e in &page.episodes { (episode_row(e)) }
            @if page.episodes.is_empty() { tr { td.muted colspan="6" { "no episode has made a call yet" } } }
        }
        p.pager {
            @if !first { a #newest-episodes href="/workbench/episodes" { "« most recent" } }
            @if let Some(href) = older { a #older-episodes href=(href) { "less recent ›" } }
        }
    };
    Ok(Page::ok("episodes", body))
}

fn episode_view(
    s: &Snapshot,
    episode: &str,
    from: Option<u64>,
    now: u64,
    coordinator: &crate::coordinator::Coordinator,
) -> Result<Page, ReadError> {
    let unknown = || Page::error(StatusCode::NOT_FOUND, "the store has seen no call of this episode");
    let Some(summary) = episodes::summary(s, episode, now)? else { return Ok(unknown()) };
    let from = from.unwrap_or_else(|| newest_from(summary.calls));
    let Some(page) = episodes::calls(s, episode, from, CALLS_SHOWN as usize)? else { return Ok(unknown()) };
    let page = episodes::with_running_output(page, coordinator);
    // The calls after the page, if few enough to read, set its spend on the running total.
    let end = page_end(&page);
    let tail = if end < summary.calls { episodes::calls(s, episode, end, SPEND_TAIL_CALLS)? } else { None };
    let decided = approvals::decisions(s, &page)?;
    let told = changes::told(s, episode, &page)?;
    let body = html! {
        h1 { "Episode " span #episode-name { (episode) } }
        (summary_html(&summary))
        (approvals::waiting_html(s, Some(episode), now)?)
        (timeline_html(&page, &decided, &told))
        (spend_html(&summary, &page, tail.as_ref()))
        (denials_html(&summary))
    };
    Ok(Page::ok(format!("episode {episode}"), body))
}

/// Where the newest page of an episode of `calls` calls starts.
fn newest_from(calls: u64) -> u64 {
    calls.saturating_sub(CALLS_SHOWN)
}

fn summary_html(summary: &Summary) -> Markup {
    super::kv(
        "summary",
        &[
            ("calls", html! { span #summary-calls { (summary.calls) } }),
            ("states", counts(&summary.states)),
            ("effects", counts(&summary.effects)),
            ("sessions", html! { (summary.sessions.live) " live of " (summary.sessions.total) }),
            ("first call", first_call(summary)),
            ("last active", html! { (utc(summary.last_at)) }),
            ("calls over time", activity_svg(&summary.activity, summary.calls)),
        ],
    )
}

/// When the first call came, or, before it, that none has and when the
/// episode's newest session was minted (its activity until then).
fn first_call(summary: &Summary) -> Markup {
    if summary.calls == 0 {
        return html! { span.muted #no-call-yet { "none yet (a session was minted " (utc(summary.first_at)) ")" } };
    }
    html! { (utc(summary.first_at)) }
}

/// Where the calls of a page stand: the first and one past the last position.
fn page_end(page: &CallsPage) -> u64 {
    page.calls.last().map_or(page.from, |c| c.position + 1)
}

/// Units each (effect, scope) was debited by `calls`.
fn debits<'a>(calls: impl IntoIterator<Item = &'a Call>) -> HashMap<(String, String), u64> {
    let mut out = HashMap::new();
    for e in calls.into_iter().flat_map(|c| &c.effects) {
        *out.entry((e.effect.clone(), e.scope.clone())).or_insert(0) += e.debited;
    }
    out
}

/// The page's debits against one grant, as running totals in call end order.
fn spend_points(page: &CallsPage, effect: &str, scope: &str, start: u64) -> Vec<(u64, Mark)> {
    let mut debited: Vec<(u64, &Call, u64)> = page
        .calls
        .iter()
        .map(|c| {
            let units = c.effects.iter().filter(|e| e.effect == effect && e.scope == scope).map(|e| e.debited).sum();
            (c.ended_at.unwrap_or(c.started_at), c, units)
        })
        .filter(|(_, _, units)| *units > 0)
        .collect();
    debited.sort_by_key(|(at, c, _)| (*at, c.position));
    let mut total = start;
    let mut points = vec![];
    for (at, c, units) in debited {
        total += units;
        let title = format!("#{} {} ended {}: {total} spent (+{units})", c.position, c.transition, utc(at));
        points.push((at, Mark { value: total, title }));
    }
    points
}

/// The calls of a non-empty page, as the spend charts span them.
struct Window {
    first: u64,
    last: u64,
    from: (u64, String),
    to: (u64, String),
}

impl Window {
    fn of(page: &CallsPage) -> Option<Window> {
        let (first, last) = (page.calls.first()?.position, page.calls.last()?.position);
        let t0 = page.calls.iter().map(|c| c.started_at).min()?;
        let t1 = page.calls.iter().map(|c| c.ended_at.unwrap_or(c.started_at)).max()?;
        Some(Window { first, last, from: (t0, utc(t0)), to: (t1, utc(t1)) })
    }
}

/// A figure, or a dash when it is not known.
fn figure(v: Option<u64>) -> Markup {
    match v {
        Some(v) => html! { (v) },
        None => dash(),
    }
}

/// One grant's figures; `before`: what was spent before the page, if known.
fn spend_row(g: &episodes::Spend, before: Option<u64>, page_units: u64) -> Markup {
    html! {
        tr.spend-row {
            td.spend-effect {
                (g.effect)
                @match g.asks.as_deref() {
                    Some("operator") => { " " span.asks { "asks the operator" } }
                    Some(_) => { " " span.asks { "asks a person" } }
                    None => {}
                }
            }
            td.spend-scope { (g.scope) }
            td.spend-before { (figure(before)) }
            td.spend-page { (page_units) }
            td.spend-after { (figure(before.map(|b| b + page_units))) }
            td.spend-total { (g.spent) }
            td.spend-budget { (figure(g.budget)) }
            td.spend-remaining { (figure(g.remaining)) }
        }
    }
}

/// One grant's running total over the page, from `start`, against its budget.
fn spend_chart(g: &episodes::Spend, w: &Window, page: &CallsPage, start: u64) -> Markup {
    let points = spend_points(page, &g.effect, &g.scope, start);
    let title = format!("{} on {}: spent over calls #{}–#{}", g.effect, g.scope, w.first, w.last);
    let limit = g.budget.map(|b| (b, format!("budget {b} (the largest a live session holds)")));
    let (from, to) = ((w.from.0, w.from.1.as_str()), (w.to.0, w.to.1.as_str()));
    let chart = svg::steps(&Steps { title: &title, from, to, start, points: &points, limit });
    let end = points.last().map_or(start, |(_, m)| m.value);
    html! {
        figure.spend-chart {
            (chart)
            figcaption {
                span.spend-name { (g.effect) " " span.muted { (g.scope) } }
                div.spend-words {
                    (start) " → " (end) " over these calls"
                    @if let (Some(b), Some(r)) = (g.budget, g.remaining) { "; " (g.spent) " of " (b) " spent, " (r) " left" }
                }
            }
        }
    }
}

/// Spend per grant over the page's calls; `tail`: the calls after them, all of
/// them (its `next` is none) or the first of many.
fn spend_html(summary: &Summary, page: &CallsPage, tail: Option<&CallsPage>) -> Markup {
    let Some(w) = Window::of(page) else {
        return html! { h2 #spend { "Spend" } p.muted { "no calls on this page; the grants as they stand:" } (grants_html(summary)) };
    };
    let known = tail.is_none_or(|t| t.next.is_none());
    let (on_page, after) = (debits(&page.calls), debits(tail.iter().flat_map(|t| &t.calls)));
    let (mut charts, mut rows) = (vec![], vec![]);
    for g in &summary.spend {
        let units = |of: &HashMap<(String, String), u64>| of.get(&(g.effect.clone(), g.scope.clone())).copied();
        let (page_units, after_units) = (units(&on_page).unwrap_or(0), units(&after).unwrap_or(0));
        let before = known.then(|| g.spent.saturating_sub(page_units + after_units));
        rows.push(spend_row(g, before, page_units));
        if page_units > 0 {
            charts.push(spend_chart(g, &w, page, before.unwrap_or(0)));
        }
    }
    let said = if known {
        format!(
            "Running totals over the calls shown (#{}–#{}), by when each call ended; each chart spans what was spent \
             then, with the budget written above it (and drawn, dashed, when it is near).",
            w.first, w.last
        )
    } else {
        format!(
            "Debits of the calls shown (#{}–#{}) only, from 0: more than {SPEND_TAIL_CALLS} calls follow them, so \
             what was spent before them is not read here (the newest page starts from the episode's total).",
            w.first, w.last
        )
    };
    html! {
        h2 #spend { "Spend" }
        p.muted #spend-said { (said) }
        div.charts { @for c in &charts { (c) } }
        table #spend-table {
            tr {
                th { "effect" } th { "scope" } th { "before #" (w.first) } th { "on this page" } th { "after #" (w.last) }
                th { "spent now" } th { "budget" } th { "remaining" }
            }
            @for r in &rows { (r) }
        }
    }
}

fn denials_html(summary: &Summary) -> Markup {
    if summary.denials.is_empty() {
        return html! { h2 #denials { "Denials" } p #denials-none.muted { "no effect of this episode was denied" } };
    }
    let rows: Vec<(String, u64)> = summary.denials.iter().map(|(k, n)| (k.clone(), *n)).collect();
    html! {
        h2 #denials { "Denials" }
        (svg::bars(&rows, "denied effects by the broker's label"))
        table #denials-table {
            tr { th { "label" } th { "denied effects" } }
            @for (label, n) in &rows { tr.denial { td.denial-label { (label) } td.denial-count { (n) } } }
        }
    }
}

/// `#5–#9`, or `#5` alone.
fn range(first: u64, last: u64) -> String {
    if first == last { format!("#{first}") } else { format!("#{first}–#{last}") }
}

/// Links to the other pages of calls, each saying which calls it shows.
fn calls_pager(page: &CallsPage) -> Markup {
    let href = |from: u64| format!("{}?from={from}", episode_href(&page.episode));
    let end = page_end(page);
    let earlier = page.from.saturating_sub(CALLS_SHOWN);
    let newest = newest_from(page.total);
    let later_end = end.saturating_add(CALLS_SHOWN).min(page.total);
    html! {
        p.pager {
            @if end < page.total {
                a #newest-calls href=(episode_href(&page.episode)) {
                    "« newest (" (range(newest, page.total - 1)) ")"
                }
                a #later-calls href=(href(end)) { "‹ newer: " (range(end, later_end - 1)) }
            }
            @if page.from > 0 {
                a #earlier-calls href=(href(earlier)) { "older: " (range(earlier, page.from - 1)) " ›" }
                a #first-calls href=(href(0)) { "oldest (" (range(0, CALLS_SHOWN.min(page.total) - 1)) ") »" }
            }
        }
    }
}

/// One cell's lines, one per effect of the call.
fn per_effect(c: &Call, f: impl Fn(&episodes::Effect) -> Markup) -> Markup {
    if c.effects.is_empty() {
        return dash();
    }
    super::lines(c.effects.iter().map(f))
}

/// A running task's word under its state: when it stops, how to stop it,
/// its last line of output.
fn run_note(c: &Call) -> Markup {
    let Some(run) = c.run.as_ref().filter(|r| r.cancel.is_some()) else { return html! {} };
    html! {
        div.run.muted {
            "stops at " span.when { (utc(run.deadline_at)) " UTC" }
            @if run.cancel_asked_at.is_some() { " · cancel asked" }
            @if let Some(cancel) = &run.cancel { br; code.cancel { (cancel) } }
            @if let Some(line) = &run.last_output { br; code.last-output { (line) } }
        }
    }
}

/// What the call did, one line per effect, each with what it showed a click away.
fn story(c: &Call, told: &HashMap<changes::At, changes::Told>) -> Markup {
    let tool = if c.transition.is_empty() { "a tool" } else { c.transition.as_str() };
    html! {
        @for (i, e) in c.effects.iter().enumerate() {
            div.said {
                @match told.get(&(c.position, i)) {
                    Some(t) => {
                        (t.said)
                        @if let Some((what, more)) = &t.more { details { summary { (what) } (more) } }
                    }
                    None => { (tool) ": " (e.effect) " on " (e.scope) }
                }
            }
        }
        @if c.effects.is_empty() { div.said { "called " (tool) ", which asked for no effect" } }
        (run_note(c))
    }
}

fn call_row(c: &Call, decided: &HashMap<String, String>, told: &HashMap<changes::At, changes::Told>) -> Markup {
    let took =
        c.ended_at.map_or_else(|| "running".to_string(), |e| format!("took {} s", e.saturating_sub(c.started_at)));
    html! {
        tr.call id={ "call-" (c.position) } {
            td.position { (c.position) }
            td.when { (utc(c.started_at)) div.muted { (took) } }
            td.story { (story(c, told)) }
            td.outcome {
                span class={ "state " (c.state) } { (c.state) }
                div.call-status {
                    (per_effect(c, |e| html! {
                        span class=(e.status) { (e.status) }
                        @if let Some(label) = &e.denial { " " (label) }
                        @if let Some(by) = e.record.as_ref().and_then(|r| decided.get(r)) { div.approval.muted { (by) } }
                    }))
                }
            }
            // What was debited; a denied effect asked for its cost and paid nothing.
            td.call-cost {
                (per_effect(c, |e| html! {
                    (e.debited) @if e.debited != e.cost { " " span.muted { "of " (e.cost) " asked" } }
                }))
            }
            td.call-budget { (per_effect(c, |e| html! { (e.budget_after) })) }
            td.task-cell { (super::short_id("task", &c.task_id)) div.muted { (c.surface) " · " (c.transition) } }
            td.links {
                (per_effect(c, |e| match e.record.as_deref().and_then(|r| world_store::Ref::parse(r).ok()) {
                    Some(r) => obj_link_short(&r, "effect-link"),
                    None => dash(),
                }))
                div { "entry " @if let Some(i) = c.entry_index { (entry_link(i)) } @else { (dash()) } }
            }
        }
    }
}

fn timeline_html(
    page: &CallsPage,
    decided: &HashMap<String, String>,
    told: &HashMap<changes::At, changes::Told>,
) -> Markup {
    let end = page_end(page);
    if page.total == 0 {
        return html! {
            h2 #calls { "No calls yet" }
            p.muted #calls-none { "The agent's calls show here, newest first, as they are made." }
        };
    }
    let heading = if page.calls.is_empty() {
        format!("Calls: none from #{} ({} in all)", page.from, page.total)
    } else {
        format!("Calls {} of {}, newest first", range(page.from, end - 1), page.total)
    };
    html! {
        h2 #calls { (heading) }
        p.muted {
            "What each call did, in words; its diff or its output opens under it. A write is compared with what \
             World last wrote to the same path (its later edits applied) within the "
            (changes::WRITE_LOOKBACK_CALLS) " calls before this page and the page itself; a command run in between \
             may have changed the file too."
        }
        (calls_pager(page))
        table #timeline {
            tr {
                th { "#" } th { "started (UTC)" } th { "what happened" } th { "outcome" } th { "paid" }
                th { "budget left" } th { "task" } th { "record, entry" }
            }
            @for c in page.calls.iter().rev() { (call_row(c, decided, told)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(q: &str) -> Vec<(String, String)> {
        query_pairs(Some(q))
    }

    const EVIL: &str = "<script>alert('x')</script>\"&";
    const EVIL_ESCAPED: &str = "&lt;script&gt;alert('x')&lt;/script&gt;&quot;&amp;";
    const WRITE: &str = "Workspace.Write";

    fn effect(name: &str, status: &'static str, debited: u64, denial: Option<&str>) -> episodes::Effect {
        episodes::Effect {
            id: "e1".into(),
            effect: name.into(),
            scope: "worktree".into(),
            status: status.into(),
            denial: denial.map(String::from),
            cost: 1,
            debited,
            budget_before: 9,
            budget_after: 9 - debited,
            record: Some(world_store::Ref::of(b"r").to_string()),
            request: Some(world_store::Ref::of(b"q").to_string()),
        }
    }

    fn call(position: u64, at: u64, transition: &str, effects: Vec<episodes::Effect>) -> Call {
        Call {
            position,
            task_id: format!("t{position}"),
            invocation_id: format!("a2a:ep:t{position}"),
            surface: "a2a".into(),
            transition: transition.into(),
            started_at: at,
            ended_at: Some(at + 1),
            state: "committed".into(),
            entry_index: Some(position + 1),
            output: None,
            effects,
            run: None,
        }
    }

    fn page(from: u64, calls: Vec<Call>, next: Option<u64>, total: u64) -> CallsPage {
        CallsPage { episode: "ep".into(), from, calls, next, total }
    }

    fn summary(spent: u64) -> Summary {
        Summary {
            episode: "ep".into(),
            calls: 9,
            states: BTreeMap::from([("committed".into(), 9)]),
            effects: BTreeMap::from([("ok".into(), 8), ("denied".into(), 1)]),
            denials: BTreeMap::from([("denied:budget".into(), 1), (EVIL.into(), 2)]),
            spend: vec![
                episodes::Spend {
                    effect: WRITE.into(),
                    scope: "worktree".into(),
                    spent,
                    budget: Some(10),
                    remaining: Some(10 - spent),
                    asks: None,
                },
                episodes::Spend {
                    effect: EVIL.into(),
                    scope: EVIL.into(),
                    spent: 0,
                    budget: None,
                    remaining: None,
                    asks: Some("operator".into()),
                },
            ],
            sessions: episodes::Sessions { live: 1, total: 2 },
            first_at: 1_796_418_679,
            last_at: 1_796_418_779,
            activity: Activity { origin: 1_796_418_660, width: 60, counts: vec![3, 0, 6] },
        }
    }

    /// The text of the first cell of `class` in the row that holds `key`.
    fn cell<'a>(html: &'a str, key: &str, class: &str) -> &'a str {
        let row = &html[html.find(key).unwrap()..];
        let at = row.find(&format!("class=\"{class}\">")).unwrap() + class.len() + 9;
        &row[at..at + row[at..].find('<').unwrap()]
    }

    #[test]
    fn spend_sets_the_page_on_the_running_total_when_the_calls_after_it_are_read() {
        let shown = page(
            5,
            vec![
                call(5, 100, "ailang-write", vec![effect(WRITE, "ok", 1, None)]),
                call(6, 120, "ailang-edit", vec![effect(WRITE, "ok", 1, None)]),
                call(7, 130, "ailang-write", vec![effect(WRITE, "denied", 0, Some("denied:budget"))]),
            ],
            Some(8),
            9,
        );
        let tail = page(8, vec![call(8, 140, "ailang-write", vec![effect(WRITE, "ok", 1, None)])], None, 9);
        let html = spend_html(&summary(7), &shown, Some(&tail)).into_string();
        // A grant that asks says so beside its effect.
        assert!(html.contains("<span class=\"asks\">asks the operator</span>"), "{html}");
        let figures: Vec<&str> =
            ["spend-before", "spend-page", "spend-after", "spend-total", "spend-budget", "spend-remaining"]
                .iter()
                .map(|c| cell(&html, "Workspace.Write</td>", c))
                .collect();
        assert_eq!(figures, ["4", "2", "6", "7", "10", "3"]);
        assert!(html.contains("<title>#5 ailang-write ended 1970-01-01 00:01:41: 5 spent (+1)</title>"), "{html}");
        assert!(html.contains("<title>#6 ailang-edit ended 1970-01-01 00:02:01: 6 spent (+1)</title>"), "{html}");
        assert!(html.contains("<title>budget 10 (the largest a live session holds)</title>"), "{html}");
        assert!(html.contains("4 → 6 over these calls; 7 of 10 spent, 3 left"), "{html}");
        assert_eq!(html.matches("<svg class=\"steps\"").count(), 1, "a chart only for a grant the page spent on");
        assert!(html.contains("Running totals over the calls shown (#5–#7)"), "{html}");

        // More calls follow than are read: the page's debits alone, from 0.
        let many = page(8, tail.calls.clone(), Some(9), 9);
        let html = spend_html(&summary(7), &shown, Some(&many)).into_string();
        assert_eq!(cell(&html, "Workspace.Write</td>", "spend-page"), "2");
        assert!(cell(&html, "Workspace.Write</td>", "spend-before").is_empty(), "a dash, not a number: {html}");
        assert!(html.contains("<title>#6 ailang-edit ended 1970-01-01 00:02:01: 2 spent (+1)</title>"), "{html}");
        assert!(html.contains(&format!("more than {SPEND_TAIL_CALLS} calls follow them")), "{html}");
        assert!(spend_html(&summary(7), &page(20, vec![], None, 9), None).0.contains("no calls on this page"));
    }

    #[test]
    fn the_pager_reaches_the_first_earlier_later_and_newest_calls() {
        let calls: Vec<Call> = (50..100).map(|p| call(p, 100, "x", vec![])).collect();
        let p = calls_pager(&page(50, calls, Some(100), 130)).into_string();
        for (id, href, says) in [
            ("first-calls", "?from=0", "oldest (#0–#49) »"),
            ("earlier-calls", "?from=0", "older: #0–#49 ›"),
            ("later-calls", "?from=100", "‹ newer: #100–#129"),
            ("newest-calls", "", "« newest (#80–#129)"),
        ] {
            assert!(p.contains(&format!("id=\"{id}\" href=\"/workbench/episodes/ep{href}\">{says}</a>")), "{id}: {p}");
        }
        let newest =
            calls_pager(&page(80, (80..130).map(|p| call(p, 1, "x", vec![])).collect(), None, 130)).into_string();
        assert!(
            newest.contains("earlier-calls\" href=\"/workbench/episodes/ep?from=30\"") && !newest.contains("later")
        );
        assert_eq!(
            calls_pager(&page(0, vec![call(0, 1, "x", vec![])], None, 1)).into_string(),
            "<p class=\"pager\"></p>"
        );
        assert_eq!((newest_from(0), newest_from(CALLS_SHOWN), newest_from(130)), (0, 0, 130 - CALLS_SHOWN));
    }

    #[test]
    fn every_part_of_an_episode_escapes_what_it_shows_and_writes_its_numbers() {
        let mut hostile = call(3, 1_796_418_679, EVIL, vec![effect(EVIL, "denied", 0, Some(EVIL))]);
        hostile.task_id = EVIL.into();
        let shown =
            page(3, vec![hostile, call(4, 1_796_418_680, "ailang-write", vec![effect(WRITE, "ok", 1, None)])], None, 5);
        let mut s = summary(3);
        s.episode = EVIL.into();
        // A decision shown beside an effect is escaped too.
        let decided = HashMap::from([(world_store::Ref::of(b"r").to_string(), EVIL.to_string())]);
        let told = HashMap::from([(
            (4, 0),
            changes::Told { said: html! { "wrote " code { (EVIL) } }, more: Some(("diff", html! { pre { (EVIL) } })) },
        )]);
        let parts = [
            episode_row(&s),
            summary_html(&s),
            spend_html(&s, &shown, None),
            denials_html(&s),
            timeline_html(&shown, &decided, &told),
        ]
        .map(Markup::into_string);
        for p in &parts {
            assert!(!p.contains("<script"), "{p}");
        }
        for p in [&parts[0], &parts[2], &parts[3], &parts[4]] {
            assert!(p.contains(EVIL_ESCAPED), "{p}");
        }
        let row = &parts[0];
        assert_eq!(cell(row, "<tr", "calls"), "9");
        assert!(row.contains("<span class=\"grant-spent\">3</span> / <span class=\"grant-budget\">10</span>"), "{row}");
        assert!(row.contains("<title>Workspace.Write on worktree: 3 spent of 10</title>"), "{row}");
        assert!(row.contains("<title>2026-12-04 21:13:00 for 1 min: 6 calls</title>"), "{row}");
        assert!(row.contains("denied 1 · ok 8"), "{row}");
        assert_eq!(cell(&parts[3], "\"denial-label\">denied:budget", "denial-count"), "1");
        assert_eq!(cell(&parts[3], &format!("\"denial-label\">{EVIL_ESCAPED}"), "denial-count"), "2");
        let timeline = &parts[4];
        assert!(timeline.contains("Calls #3–#4 of 5, newest first"), "{timeline}");
        assert!(timeline.find("id=\"call-4\"") < timeline.find("id=\"call-3\""), "newest first: {timeline}");
        // The task id is short on the page and whole in its title and text.
        assert!(timeline.contains(&format!("<code class=\"id task\" title=\"{EVIL_ESCAPED}\">{EVIL_ESCAPED}</code>")));
        // A told effect, with what it showed a click away; an untold one in the words it has.
        assert!(
            timeline.contains(&format!("wrote <code>{EVIL_ESCAPED}</code><details><summary>diff</summary><pre>")),
            "{timeline}"
        );
        assert!(timeline.contains(&format!("{EVIL_ESCAPED}: {EVIL_ESCAPED} on worktree")), "{timeline}");
        assert!(timeline.contains(&format!("<div class=\"approval muted\">{EVIL_ESCAPED}</div>")), "{timeline}");
        assert_eq!(cell(timeline, "id=\"call-4\"", "call-budget"), "8");
        assert!(timeline.contains(&format!("href=\"/workbench?object={}\"", world_store::Ref::of(b"r"))));
        assert!(timeline.contains("href=\"/workbench?entry=5\""), "{timeline}");
    }

    #[test]
    fn spans_read_in_their_largest_whole_unit() {
        assert_eq!(
            (span(60), span(7680), span(7200), span(45)),
            ("1 min".into(), "128 min".into(), "2 h".into(), "45 s".into())
        );
    }

    #[test]
    fn the_list_takes_only_a_cursor() {
        assert_eq!(parse_list(&pairs("")), Ok(None));
        assert_eq!(parse_list(&pairs("after=17.demo")), Ok(Some((17, "demo".into()))));
        for bad in ["after=17", "after=x.demo", "after=", "after=1.a&after=2.b", "from=0", "after=1.a&x=1"] {
            assert!(parse_list(&pairs(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_episode_page_takes_only_from() {
        assert_eq!(parse_calls(&pairs("")), Ok(None));
        assert_eq!(parse_calls(&pairs("from=0")), Ok(Some(0)));
        assert_eq!(parse_calls(&pairs("from=150")), Ok(Some(150)));
        for bad in ["from=", "from=-1", "from=+1", "from=1.5", "from=1&from=2", "after=1.a", "from=1&limit=2", "x"] {
            assert!(parse_calls(&pairs(bad)).is_err(), "{bad}");
        }
    }
}
