//! `GET /workbench`: a read-only HTML view for operators. Server-rendered from
//! one store snapshot per request; no scripts, no external assets, a strict
//! Content-Security-Policy. Pages are `maud` templates: every value is escaped
//! as it is written, and only the style sheet is written as is.
//!
//! Views, chosen by the query (an unknown or repeated parameter is a 400):
//! - none, or `from=N`: the most recently active episodes, a page of the log
//!   (the newest, or from entry N), newest first, the head and health;
//! - `entry=N`: the entry, its invocation record with its effect records (who
//!   approved each), its world;
//! - `object=REF` (`payload=0|1`, `refsAfter=<kind>:<ref>`): for an effect
//!   record what happened, then metadata, referrers, payload;
//! - `world=REF`: the world row.
//!
//! `/workbench/episodes` and `/workbench/episodes/<episode>` tell what each
//! episode did and paid (`episodes.rs`), with charts drawn as inline SVG
//! (`svg.rs`) and each call told in words with its diff or output (`changes.rs`).

mod approvals;

mod changes;
mod episodes;
mod svg;

use super::{Rest, State, query_pairs, read};
use crate::limits::DAEMON_VERSION;
use axum::Router;
use axum::extract::{RawQuery, State as AxState};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde_json::Value;
use std::path::PathBuf;
use world_store::tables::{REFERRER_ENTRY, REFERRER_OBJECT, REFERRER_WORLD};
use world_store::{ReadError, Ref, Snapshot};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/workbench", get(workbench))
        .route("/workbench/episodes", get(episodes::list))
        .route("/workbench/episodes/{episode}", get(episodes::one))
}

/// Log entries per page.
const LOG_PAGE: u64 = 50;
/// The most recently active episodes the first page shows.
const HOME_EPISODES: usize = 5;
/// Referrers per page.
const REFS_PAGE: usize = 50;
/// Payload bytes shown at most; the rest is left to `GET /v1/objects/{ref}?payload=true`.
const PAYLOAD_SHOWN_MAX: usize = 1 << 20;
const PARAMS: &[&str] = &["world", "object", "from", "entry", "payload", "refsAfter"];
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";
const RECORD_V1: &str = "world/invocation-record/v1";
const RECORD_V2: &str = "world/invocation-record/v2";
/// What every effect record's semantic id starts with (v1, v2 and v3).
const EFFECT_RECORD: &str = "world/effect-record/";

#[derive(Debug, PartialEq, Eq)]
enum View {
    /// A page of the log from `from`, or the newest page.
    Log {
        from: Option<u64>,
    },
    Entry(u64),
    Object {
        target: Ref,
        payload: bool,
        refs_after: Option<(u8, Ref)>,
    },
    World(Ref),
}

fn index(name: &str, text: &str) -> Result<u64, String> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    text.parse::<u64>().ok().filter(|_| digits).ok_or_else(|| format!("{name} must be a non-negative integer"))
}

fn parse_ref(name: &str, text: &str) -> Result<Ref, String> {
    Ref::parse(text).map_err(|e| format!("{name}: {e}"))
}

/// `<kind>:<ref>`, kinds object, entry, world (as `after` of the referrers route).
fn parse_refs_after(text: &str) -> Result<(u8, Ref), String> {
    let err = || "refsAfter must be <kind>:<ref> with kind object, entry or world".to_string();
    let (kind, r) = text.split_once(':').ok_or_else(err)?;
    let kind = match kind {
        "object" => REFERRER_OBJECT,
        "entry" => REFERRER_ENTRY,
        "world" => REFERRER_WORLD,
        _ => return Err(err()),
    };
    Ok((kind, parse_ref("refsAfter", r)?))
}

/// Every parameter is one of `known`, and none is repeated.
fn check_params(pairs: &[(String, String)], known: &[&str]) -> Result<(), String> {
    for (i, (k, _)) in pairs.iter().enumerate() {
        if !known.contains(&k.as_str()) {
            return Err(format!("unknown query parameter {k:?}; known: {}", known.join(", ")));
        }
        if pairs[..i].iter().any(|(earlier, _)| earlier == k) {
            return Err(format!("query parameter {k:?} is repeated"));
        }
    }
    Ok(())
}

fn parse_view(pairs: &[(String, String)]) -> Result<View, String> {
    check_params(pairs, PARAMS)?;
    let get = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    if ["world", "object", "entry"].iter().filter(|n| get(n).is_some()).count() > 1 {
        return Err("give at most one of world, object and entry".into());
    }
    if get("object").is_none() && (get("payload").is_some() || get("refsAfter").is_some()) {
        return Err("payload and refsAfter go with object".into());
    }
    if get("from").is_some() && pairs.len() > 1 {
        return Err("from pages the log; it goes alone".into());
    }
    if let Some(r) = get("world") {
        return Ok(View::World(parse_ref("world", r)?));
    }
    if let Some(n) = get("entry") {
        return Ok(View::Entry(index("entry", n)?));
    }
    if let Some(r) = get("object") {
        let payload = match get("payload") {
            None | Some("0") => false,
            Some("1") => true,
            Some(_) => return Err("payload must be 0 or 1".into()),
        };
        let refs_after = get("refsAfter").map(parse_refs_after).transpose()?;
        return Ok(View::Object { target: parse_ref("object", r)?, payload, refs_after });
    }
    Ok(View::Log { from: get("from").map(|f| index("from", f)).transpose()? })
}

/// What health shows, copied out of the daemon for the blocking read.
struct Health {
    db_path: PathBuf,
    interpreter: Option<Ref>,
}

struct Page {
    status: StatusCode,
    title: String,
    body: Markup,
}

impl Page {
    fn ok(title: impl Into<String>, body: Markup) -> Page {
        Page { status: StatusCode::OK, title: title.into(), body }
    }

    fn error(status: StatusCode, message: &str) -> Page {
        let body = html! { h1 { (status.as_u16()) } p #error { (message) } };
        Page { status, title: format!("{status}"), body }
    }
}

async fn workbench(AxState(state): AxState<State>, RawQuery(query): RawQuery) -> Response {
    let view = match parse_view(&query_pairs(query.as_deref())) {
        Ok(v) => v,
        Err(m) => return html(Page::error(StatusCode::BAD_REQUEST, &m)),
    };
    let health = Health { db_path: state.db_path.clone(), interpreter: state.interpreter_ref };
    let now = crate::clock::now();
    let rendered = read(&state, "/workbench", move |s| match view {
        View::Log { from } => log_view(s, &health, from, now),
        View::Entry(n) => entry_view(s, n),
        View::Object { target, payload, refs_after } => object_view(s, &target, payload, refs_after),
        View::World(r) => world_view(s, &r),
    })
    .await;
    respond(rendered)
}

/// A read refused before it was made (`http::reads`), as a page.
pub fn refusal(status: StatusCode, message: &str) -> Response {
    html(Page::error(status, message))
}

/// A rendered page, or the read's failure as an error page.
fn respond(rendered: Result<Page, Rest>) -> Response {
    match rendered {
        Ok(page) => html(page),
        Err(Rest(e)) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            html(Page::error(status, e.wire_message()))
        }
    }
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}\
header{background:#243b53;color:#fff;padding:.5em 1.5em}header a{color:#fff;font-weight:600;text-decoration:none}\
main{max-width:1200px;margin:0 auto;padding:.5em 1.5em 2em}h1{font-size:1.3em}h2{font-size:1.05em;margin-top:1.6em}\
table{border-collapse:collapse;width:100%;background:#fff}th,td{border:1px solid #d9dee3;padding:.25em .5em;\
text-align:left;vertical-align:top}th{background:#eef1f4;font-weight:600}table.kv th{width:11em}\
code,pre,.ref{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}.ref{word-break:break-all}\
pre{background:#fff;border:1px solid #d9dee3;padding:.75em;overflow:auto;max-height:70vh;white-space:pre-wrap;\
word-break:break-all}a{color:#0b5cad}.ok{color:#1a7f37;font-weight:600}.denied,.failed{color:#b42318;font-weight:600}\
.pager a{margin-right:1.5em}.muted{color:#6b7280}header a+a{margin-left:1.5em;font-weight:400}\
svg{vertical-align:middle}svg .track{fill:#e5e7eb}svg .fill,svg .col,svg .dot{fill:#2f6fb0}\
svg.meter.full .fill,svg .bar{fill:#b42318}svg .line{fill:none;stroke:#2f6fb0;stroke-width:2}\
svg .limit{stroke:#b42318;stroke-width:1.5;stroke-dasharray:5 3}svg .axis{stroke:#9aa5b1}\
svg text{font:11px system-ui,sans-serif;fill:#52606d}.grant{white-space:nowrap}\
.grant-effect{display:inline-block;min-width:9em}.grant-scope{display:inline-block;min-width:4.5em}\
.charts{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0;background:#fff;border:1px solid #d9dee3;padding:.5em}\
pre.diff span{display:block}pre.diff .add{background:#e6ffec;color:#116329}\
pre.diff .del{background:#ffebe9;color:#82071e}pre.diff .hunk,pre.diff .more,pre.diff .same{color:#6b7280}\
pre.diff span.eol{display:inline;color:#6b7280}.change{margin:1em 0}.change-head{margin:.25em 0}\
.output pre{max-height:12em;margin:.2em 0}.charts{margin-bottom:1em}\
code.arg{background:#eef1f4;padding:0 .3em;border-radius:3px}.when{white-space:nowrap}\
code.id{display:inline-block;max-width:10ch;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;\
vertical-align:bottom}td.approval-id,td.approval-commands code{white-space:nowrap}td.story{min-width:22em}td.links,td.links .ref,td.call-cost{white-space:nowrap;word-break:normal}.said+.said{margin-top:.3em}details{margin:.15em 0}\
summary{cursor:pointer;color:#0b5cad;font-size:12.5px}td.story pre{max-height:20em}.lines{color:#52606d}\
figcaption .spend-words{font-size:12.5px;color:#52606d}svg text.budget{fill:#b42318}";

/// The whole document around a page's body.
fn document(page: &Page) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (page.title) " · worldd workbench" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    a #home href="/workbench" { "worldd workbench" }
                    a #nav-episodes href="/workbench/episodes" { "episodes" }
                }
                main { (page.body) }
            }
        }
    }
}

fn html(page: Page) -> Response {
    let doc = document(&page).into_string() + "\n";
    (
        page.status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        doc,
    )
        .into_response()
}

// ---- small HTML pieces ----

/// An empty value.
fn dash() -> Markup {
    html! { span.muted { "—" } }
}

/// A long id in little room: the page shows its first characters, the
/// whole id is its title (on hover) and its text (so it copies whole).
fn short_id(class: &str, id: &str) -> Markup {
    html! { code class={ "id " (class) } title=(id) { (id) } }
}

/// An episode's name, linked to its page when it is a valid name.
fn episode_link(episode: &str) -> Markup {
    if crate::sessions::validate_episode(episode).is_ok() {
        html! { a.episode-link href={ "/workbench/episodes/" (episode) } { (episode) } }
    } else {
        html! { (episode) }
    }
}

fn a(href: &str, class: &str, text: &str) -> Markup {
    html! { a class=(class) href=(href) { (text) } }
}

/// A ref as a link, in full, or shortened to 12 hex digits (the full ref in its title).
fn ref_a(href: &str, class: &str, r: &Ref, short: bool) -> Markup {
    let full = r.to_string();
    let shown = if short { format!("{}…", &full[..19]) } else { full.clone() };
    html! { a class={ "ref " (class) } href=(href) title=(full) { (shown) } }
}

fn obj_link(r: &Ref, class: &str) -> Markup {
    ref_a(&format!("/workbench?object={r}"), class, r, false)
}

fn obj_link_short(r: &Ref, class: &str) -> Markup {
    ref_a(&format!("/workbench?object={r}"), class, r, true)
}

fn entry_link(n: u64) -> Markup {
    a(&format!("/workbench?entry={n}"), "entry-link", &n.to_string())
}

fn world_link(r: &Ref) -> Markup {
    ref_a(&format!("/workbench?world={r}"), "world-link", r, false)
}

/// Key–value rows.
fn kv(id: &str, rows: &[(&str, Markup)]) -> Markup {
    html! {
        table.kv id=(id) {
            @for (k, v) in rows { tr { th { (k) } td { (v) } } }
        }
    }
}

/// Items one a line.
fn lines(items: impl IntoIterator<Item = Markup>) -> Markup {
    html! { @for (i, item) in items.into_iter().enumerate() { @if i > 0 { br; } (item) } }
}

/// A JSON value as plain text: strings bare, everything else as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A JSON field holding a ref: a link when it is one, a dash when empty.
fn ref_cell(v: &Value, class: &str, short: bool) -> Markup {
    match v {
        Value::Null => dash(),
        Value::String(t) if t.is_empty() => dash(),
        Value::String(t) => match Ref::parse(t) {
            Ok(r) => ref_a(&format!("/workbench?object={r}"), class, &r, short),
            Err(_) => html! { (t) },
        },
        other => html! { (other.to_string()) },
    }
}

/// Text with every `sha256:<64 hex>` in it as an object link.
fn link_refs(text: &str) -> Markup {
    let mut parts = vec![];
    let mut rest = text;
    while let Some(at) = rest.find("sha256:") {
        match rest.get(at..at + 71).and_then(|c| Ref::parse(c).ok()) {
            Some(r) => {
                parts.push((&rest[..at], Some(r)));
                rest = &rest[at + 71..];
            }
            None => {
                parts.push((&rest[..at + 7], None));
                rest = &rest[at + 7..];
            }
        }
    }
    parts.push((rest, None));
    html! { @for (t, r) in parts { (t) @if let Some(r) = r { (obj_link(&r, "ref-link")) } } }
}

fn json_payload(s: &Snapshot, r: &Ref) -> Result<Option<Value>, ReadError> {
    Ok(s.payload(r)?.and_then(|p| serde_json::from_slice(&p).ok()))
}

// ---- views ----

/// `#5–#9`, or `#5` alone.
fn range(first: u64, last: u64) -> String {
    if first == last { format!("#{first}") } else { format!("#{first}–#{last}") }
}

/// The first page: the newest episodes, then a page of the log (the newest
/// by default), newest first, then the head and the daemon's health.
fn log_view(s: &Snapshot, health: &Health, from: Option<u64>, now: u64) -> Result<Page, ReadError> {
    let len = s.log_len()?;
    let newest = len.saturating_sub(LOG_PAGE);
    let from = from.unwrap_or(newest);
    let head = match s.head_world()? {
        Some(w) => kv(
            "head",
            &[
                ("selected world", world_link(&w.world_ref)),
                ("revision", html! { (w.revision) }),
                ("log length", html! { (len) }),
            ],
        ),
        None => html! { p #head { "no world head has been selected yet" } },
    };
    let heads: Vec<Markup> = s
        .heads()?
        .into_iter()
        .filter(|(name, _)| name != world_store::tables::SELECTED_HEAD)
        .map(|(name, r)| html! { (name) " " (obj_link(&r, "head-link")) })
        .collect();
    let health = kv(
        "health",
        &[
            ("daemon version", html! { (DAEMON_VERSION) }),
            ("store", html! { code { (health.db_path.display()) } }),
            ("interpreter", health.interpreter.map(|r| obj_link(&r, "ref-link")).unwrap_or_else(dash)),
            ("registry heads", lines(heads)),
        ],
    );
    let episodes = crate::episodes::list(s, None, HOME_EPISODES, now)?;
    let mut rows = vec![];
    let entries = s.log_range(from, LOG_PAGE as usize)?;
    for e in entries.iter().rev() {
        let meta = s.object_meta(&e.transition_ref)?;
        let record = match meta.as_ref().map(|m| m.semantic_id.as_str()) {
            Some(RECORD_V1 | RECORD_V2) => json_payload(s, &e.transition_ref)?,
            _ => None,
        };
        let (skill, episode) = match &record {
            Some(v) => (text(&v["skillId"]), text(&v["episodeId"])),
            None => (String::new(), String::new()),
        };
        rows.push(html! {
            tr {
                td { (entry_link(e.header.entry_index)) }
                td.skill { (skill) }
                td.episode { @if episode.is_empty() { (dash()) } @else { (episode_link(&episode)) } }
                td { (e.header.written_by) }
                td { (meta.map(|m| m.semantic_id).unwrap_or_default()) }
                td.ref { (obj_link_short(&e.transition_ref, "ref-link")) }
            }
        });
    }
    let heading = match (entries.first(), entries.last()) {
        (Some(f), Some(l)) => {
            format!("Log entries {} of {len}, newest first", range(f.header.entry_index, l.header.entry_index))
        }
        _ => format!("Log: no entries from #{from} ({len} in all)"),
    };
    let older = from.saturating_sub(LOG_PAGE);
    // `from` is the reader's: no sum with it may wrap.
    let newer = from.checked_add(LOG_PAGE).filter(|next| *next < len);
    let body = html! {
        h1 { "World" }
        h2 #newest-episodes { "Most recently active episodes" }
        table #home-episodes {
            tr { th { "episode" } th { "calls" } th { "effects" } th { "last active (UTC)" } }
            @for e in &episodes.episodes {
                tr {
                    td { (episode_link(&e.episode)) }
                    td { (e.calls) }
                    td { @for (i, (k, n)) in e.effects.iter().enumerate() { @if i > 0 { " · " } (k) " " (n) } }
                    td.when { (crate::clock::utc(e.last_at)) }
                }
            }
            @if episodes.episodes.is_empty() { tr { td.muted colspan="4" { "no episode has made a call yet" } } }
        }
        p {
            a #episodes-link href="/workbench/episodes" { "All episodes" }
            ": what each episode did and paid, its calls, what they changed and ran."
        }
        h2 #log-heading { (heading) }
        (log_pager(from, newest, older, newer))
        table #log {
            tr {
                th { "#" } th { "skill" } th { "episode" } th { "written by" } th { "transitionRef kind" }
                th { "transitionRef" }
            }
            @for row in &rows { (row) }
            @if entries.is_empty() { tr { td.muted colspan="6" { "no entries from " (from) } } }
        }
        h2 { "Head" } (head)
        h2 { "Health" } (health)
    };
    Ok(Page::ok("home", body))
}

/// Links to the other pages of the log, each saying which entries it shows.
fn log_pager(from: u64, newest: u64, older: u64, newer: Option<u64>) -> Markup {
    html! {
        p.pager {
            @if let Some(newer) = newer {
                a #last-page href="/workbench" { "« newest" }
                a #next-page href={ "/workbench?from=" (newer) } {
                    "‹ newer: " (range(newer, newer.saturating_add(LOG_PAGE - 1).min(newest + LOG_PAGE - 1)))
                }
            }
            @if from > 0 {
                a #prev-page href={ "/workbench?from=" (older) } { "older: " (range(older, from - 1)) " ›" }
                a #first-page href="/workbench?from=0" { "oldest »" }
            }
        }
    }
}

fn entry_view(s: &Snapshot, n: u64) -> Result<Page, ReadError> {
    let Some(e) = s.log_entry(n)? else { return Ok(Page::error(StatusCode::NOT_FOUND, "log entry not found")) };
    let h = &e.header;
    let prev = match n {
        0 => html! { span.ref { (h.prev_entry_hash) } },
        _ => html! { (obj_link(&h.prev_entry_hash, "ref-link")) " (entry " (entry_link(n - 1)) ")" },
    };
    // Referrers are ordered by kind: start past every entry-kind one to reach the worlds.
    let worlds: Vec<Markup> = s
        .referrers(&e.entry_hash, Some((REFERRER_WORLD - 1, Ref([0xff; 32]))), 8)?
        .into_iter()
        .filter(|r| r.kind == REFERRER_WORLD)
        .map(|r| world_link(&r.referrer))
        .collect();
    let entry = kv(
        "entry",
        &[
            ("entryIndex", html! { span #entry-index { (h.entry_index) } }),
            ("semanticsEpoch", html! { (h.semantics_epoch) }),
            ("transitionFn", obj_link(&h.transition_fn, "ref-link")),
            ("interpreter", obj_link(&h.interpreter, "ref-link")),
            ("prevEntryHash", prev),
            ("writtenBy", html! { (h.written_by) }),
            ("entryHash", html! { span.ref { (e.entry_hash) } }),
            ("transitionRef", obj_link(&e.transition_ref, "transition-link")),
            ("world", if worlds.is_empty() { dash() } else { lines(worlds) }),
        ],
    );
    let meta = s.object_meta(&e.transition_ref)?;
    let record = match meta.as_ref().map(|m| m.semantic_id.as_str()) {
        Some(RECORD_V1 | RECORD_V2) => json_payload(s, &e.transition_ref)?,
        _ => None,
    };
    let Some(rec) = record else {
        let kind = meta.map(|m| m.semantic_id).unwrap_or_else(|| "absent".into());
        let body = html! {
            h1 { "Entry " (n) } (entry)
            p #no-record { "transitionRef is not an invocation record (its object: " (kind) ")." }
        };
        return Ok(Page::ok(format!("entry {n}"), body));
    };
    let mut rows: Vec<(&str, Markup)> = ["invocationId", "episodeId", "skillId", "semanticsEpoch"]
        .iter()
        .map(|k| match *k {
            "episodeId" => (*k, html! { span #record-episodeId { (episode_link(&text(&rec[*k]))) } }),
            _ => (*k, html! { span id={ "record-" (k) } { (text(&rec[*k])) } }),
        })
        .collect();
    for (k, class) in [("transitionFn", "ref-link"), ("interpreter", "ref-link")] {
        rows.push((k, ref_cell(&rec[k], class, false)));
    }
    for k in ["input", "output", "plan"] {
        if rec.get(k).is_some() {
            rows.push((k, ref_cell(&rec[k], &format!("{k}-link"), false)));
        }
    }
    let effects = match rec["effects"].as_array() {
        Some(effects) => effects_table(s, effects)?,
        None => html! {},
    };
    let body = html! {
        h1 { "Entry " (n) } (entry)
        h2 { "Invocation record" } (kv("record", &rows))
        (effects)
    };
    Ok(Page::ok(format!("entry {n}"), body))
}

fn effects_table(s: &Snapshot, effects: &[Value]) -> Result<Markup, ReadError> {
    let mut rows = vec![];
    for e in effects {
        let Some(r) = e.as_str().and_then(|t| Ref::parse(t).ok()) else {
            rows.push(html! { tr.effect-row { td colspan="10" { (text(e)) } } });
            continue;
        };
        let v = json_payload(s, &r)?.unwrap_or(Value::Null);
        let status = match (&v["allowed"], &v["failed"]) {
            (Value::Bool(false), _) => "denied",
            (_, Value::Bool(true)) => "failed",
            (Value::Bool(true), _) => "ok",
            _ => "unreadable",
        };
        let denial = text(&v["denial"]);
        let approved = approvals::approval_of(s, &r)?;
        rows.push(html! {
            tr.effect-row {
                td.ref { (obj_link_short(&r, "effect-link")) }
                td { (text(&v["effect"])) }
                td { (text(&v["scope"])) }
                td class={ "effect-status " (status) } { (status) }
                td.effect-cost { (text(&v["cost"])) }
                td.effect-budget { (text(&v["budgetBefore"])) " → " (text(&v["budgetAfter"])) }
                td { @if denial.is_empty() { (dash()) } @else { (denial) } }
                td.effect-approval { @if let Some(by) = approved { (by) } @else { span.muted { "not asked" } } }
                td.ref { (ref_cell(&v["requestRef"], "request-link", true)) }
                td.ref { (ref_cell(&v["resultRef"], "result-link", true)) }
            }
        });
    }
    Ok(html! {
        h2 { "Effects (" (effects.len()) ")" }
        table #effect-records {
            tr {
                th { "record" } th { "effect" } th { "scope" } th { "status" } th { "cost" }
                th { "budget before → after" } th { "denial" } th { "approved by" } th { "request" } th { "result" }
            }
            @for row in &rows { (row) }
        }
    })
}

fn referrer_link(r: &world_store::Referrer) -> Markup {
    match (r.kind, r.entry_index) {
        (REFERRER_ENTRY, Some(i)) => html! { "entry " (entry_link(i)) " " span.ref.muted { (r.referrer) } },
        (REFERRER_WORLD, _) => world_link(&r.referrer),
        _ => obj_link(&r.referrer, "referrer-link"),
    }
}

fn object_view(s: &Snapshot, target: &Ref, payload: bool, after: Option<(u8, Ref)>) -> Result<Page, ReadError> {
    let meta = s.object_meta(target)?;
    let about = match &meta {
        Some(m) => kv(
            "meta",
            &[
                ("semanticId", html! { span #semantic-id { (m.semantic_id) } }),
                ("interfaceHash", html! { span.ref { (m.interface_hash) } }),
                ("provenance", html! { (m.provenance) }),
                ("size", html! { (m.size) " bytes" }),
            ],
        ),
        None => {
            let note = match (s.entry_index_of(target)?, s.world(target)?) {
                (Some(i), _) => html! { "not an object: the hash of log entry " (entry_link(i)) },
                (None, Some(w)) => html! { "not an object: the world " (world_link(&w.world_ref)) },
                (None, None) => {
                    return Ok(Page::error(StatusCode::NOT_FOUND, "not an object, entry hash or world in this store"));
                }
            };
            html! { p #meta { (note) } }
        }
    };
    let happened = match &meta {
        Some(m) if m.semantic_id.starts_with(EFFECT_RECORD) => what_happened(s, target)?,
        _ => html! {},
    };
    let mut refs = s.referrers(target, after, REFS_PAGE + 1)?;
    let more = refs.len() > REFS_PAGE;
    refs.truncate(REFS_PAGE);
    let mut rows = vec![];
    for r in &refs {
        let what = match r.kind {
            REFERRER_OBJECT => s.object_meta(&r.referrer)?.map(|m| m.semantic_id).unwrap_or_default(),
            _ => String::new(),
        };
        rows.push(html! { tr.referrer { td { (r.kind_name()) } td.ref { (referrer_link(r)) } td { (what) } } });
    }
    let p = if payload { "&payload=1" } else { "" };
    let next_refs = refs
        .last()
        .filter(|_| more)
        .map(|last| format!("/workbench?object={target}{p}&refsAfter={}:{}", last.kind_name(), last.referrer));
    let shown = match (&meta, payload) {
        (None, _) => html! {},
        (Some(_), true) => html! { h2 { "Payload" } (payload_html(&s.payload(target)?.unwrap_or_default())) },
        (Some(_), false) => html! {
            h2 { "Payload" }
            p { (a(&format!("/workbench?object={target}&payload=1"), "payload-link", "show the payload")) }
        },
    };
    let body = html! {
        h1 { "Object" }
        p.ref #object-ref { (target) }
        (happened)
        (about)
        h2 { "Referrers" }
        table #referrers {
            tr { th { "kind" } th { "referrer" } th { "what" } }
            @for row in &rows { (row) }
            @if refs.is_empty() { tr { td.muted colspan="3" { "none" } } }
        }
        @if let Some(href) = next_refs { p.pager { a #next-refs href=(href) { "more referrers →" } } }
        (shown)
    };
    Ok(Page::ok(format!("object {target}"), body))
}

/// An effect record told: what was asked and decided, what it cost, who
/// approved it, and the call, entry and episode it belongs to.
fn what_happened(s: &Snapshot, record: &Ref) -> Result<Markup, ReadError> {
    let Some(v) = json_payload(s, record)? else { return Ok(html! {}) };
    // The invocation record that lists it, and the entry that commits that.
    let mut call = None;
    for r in s.referrers(record, None, REFS_PAGE)?.iter().filter(|r| r.kind == REFERRER_OBJECT) {
        let kind = s.object_meta(&r.referrer)?.map(|m| m.semantic_id);
        if matches!(kind.as_deref(), Some(RECORD_V1 | RECORD_V2)) {
            call = Some(r.referrer);
            break;
        }
    }
    let (invocation, entry) = match call {
        Some(c) => {
            let rec = json_payload(s, &c)?.unwrap_or(Value::Null);
            let entry = s.referrers(&c, None, REFS_PAGE)?.into_iter().find_map(|r| match (r.kind, r.entry_index) {
                (REFERRER_ENTRY, Some(i)) => Some(i),
                _ => None,
            });
            (Some((c, rec)), entry)
        }
        None => (None, None),
    };
    let decision = match (&v["allowed"], &v["failed"]) {
        (Value::Bool(false), _) => format!("denied ({})", text(&v["denial"])),
        (_, Value::Bool(true)) => "allowed; it failed".into(),
        (Value::Bool(true), _) => "allowed; it ran".into(),
        _ => "unreadable".into(),
    };
    let episode = invocation.as_ref().map(|(_, rec)| text(&rec["episodeId"])).unwrap_or_default();
    let approved = approvals::approval_of(s, record)?;
    Ok(html! {
        h2 { "What happened" }
        (kv(
            "what-happened",
            &[
                ("effect", html! { span #happened-effect { (text(&v["effect"])) } " on " (text(&v["scope"])) }),
                ("decision", html! { span #happened-decision { (decision) } }),
                ("cost", html! { span #happened-cost { (text(&v["cost"])) } }),
                ("budget", html! {
                    span #happened-budget { (text(&v["budgetBefore"])) " → " (text(&v["budgetAfter"])) }
                }),
                ("approved by", html! {
                    span #happened-approval { @if let Some(by) = approved { (by) } @else { "no approval was asked" } }
                }),
                ("call", match &invocation {
                    Some((c, rec)) => html! {
                        span #happened-call { (text(&rec["invocationId"])) } " (" (text(&rec["skillId"])) ") "
                        (obj_link_short(c, "call-link"))
                    },
                    None => html! { (text(&v["invocationId"])) },
                }),
                ("entry", entry.map_or_else(dash, entry_link)),
                ("episode", if episode.is_empty() { dash() } else { html! { span #happened-episode { (episode_link(&episode)) } } }),
                ("request", ref_cell(&v["requestRef"], "request-link", false)),
                ("result", ref_cell(&v["resultRef"], "result-link", false)),
            ],
        ))
        h2 { "Object" }
    })
}

/// Pretty JSON when it parses as JSON, else UTF-8 text (lossy); refs become links.
fn payload_html(bytes: &[u8]) -> Markup {
    let shown = &bytes[..bytes.len().min(PAYLOAD_SHOWN_MAX)];
    let json = (shown.len() == bytes.len()).then(|| serde_json::from_slice::<Value>(bytes).ok()).flatten();
    let (kind, text) = match json {
        Some(v) => ("JSON", serde_json::to_string_pretty(&v).unwrap_or_default()),
        None => ("not JSON; shown as UTF-8 text", String::from_utf8_lossy(shown).into_owned()),
    };
    html! {
        p #payload-info {
            (bytes.len()) " bytes, " (kind)
            @if shown.len() < bytes.len() { ", first " (shown.len()) " shown" }
        }
        pre #payload { (link_refs(&text)) }
    }
}

fn world_view(s: &Snapshot, r: &Ref) -> Result<Page, ReadError> {
    let Some(w) = s.world(r)? else { return Ok(Page::error(StatusCode::NOT_FOUND, "world not found")) };
    let entry = match s.entry_index_of(&w.log_head)? {
        Some(i) => html! { (obj_link(&w.log_head, "ref-link")) " (entry " (entry_link(i)) ")" },
        None => obj_link(&w.log_head, "ref-link"),
    };
    let selected = if s.selected_head()? == Some(w.world_ref) { "yes" } else { "no" };
    let body = html! {
        h1 { "World" }
        (kv(
            "world",
            &[
                ("ref", html! { span.ref { (w.world_ref) } }),
                ("revision", html! { (w.revision) }),
                ("stateRoot", obj_link(&w.state_root, "state-link")),
                ("logHead", entry),
                ("selected head", html! { (selected) }),
            ],
        ))
    };
    Ok(Page::ok(format!("world {r}"), body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use world_store::{EntryHeader, LogEntry, NewObject, Op, Reads, RestCommit, Store, World, WorldStore, canonical};

    fn pairs(q: &str) -> Vec<(String, String)> {
        query_pairs(Some(q))
    }

    /// What the templates write for a value: text, never markup, in an element and in an attribute.
    #[test]
    fn a_value_is_text_in_an_element_and_in_an_attribute() {
        let hostile = r#""><script>alert(1)</script>&amp;"#;
        assert_eq!(
            a(hostile, hostile, hostile).into_string(),
            "<a class=\"&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;\" \
             href=\"&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;\">\
             &quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;</a>"
        );
        assert_eq!(
            kv("k", &[("plain é ✓", html! { "sha256:00" })]).into_string(),
            "<table class=\"kv\" id=\"k\"><tr><th>plain é ✓</th><td>sha256:00</td></tr></table>"
        );
    }

    #[test]
    fn the_query_picks_one_view() {
        let r = Ref::of(b"x");
        assert_eq!(parse_view(&pairs("")), Ok(View::Log { from: None }));
        assert_eq!(parse_view(&pairs("from=50")), Ok(View::Log { from: Some(50) }));
        assert_eq!(parse_view(&pairs("entry=3")), Ok(View::Entry(3)));
        assert_eq!(parse_view(&pairs(&format!("world={r}"))), Ok(View::World(r)));
        assert_eq!(
            parse_view(&pairs(&format!("object={r}&payload=1&refsAfter=entry:{r}"))),
            Ok(View::Object { target: r, payload: true, refs_after: Some((REFERRER_ENTRY, r)) })
        );
        assert_eq!(
            parse_view(&pairs(&format!("payload=0&object={r}"))),
            Ok(View::Object { target: r, payload: false, refs_after: None })
        );
    }

    #[test]
    fn the_log_pager_says_which_entries_each_page_shows() {
        // 130 entries, the page from #30: newer from #80 (the newest page), older from #0.
        let p = log_pager(30, 80, 0, Some(80)).into_string();
        assert!(p.contains("<a id=\"next-page\" href=\"/workbench?from=80\">‹ newer: #80–#129</a>"), "{p}");
        assert!(p.contains("<a id=\"prev-page\" href=\"/workbench?from=0\">older: #0–#29 ›</a>"), "{p}");
        assert!(p.contains("id=\"last-page\" href=\"/workbench\"") && p.contains("id=\"first-page\""), "{p}");
        // The newest page of 4 entries has neither.
        assert_eq!(log_pager(0, 0, 0, None).into_string(), "<p class=\"pager\"></p>");
    }

    #[test]
    fn unknown_repeated_and_malformed_parameters_are_refused() {
        let r = Ref::of(b"x");
        let refused = [
            "x=1".to_string(),
            "commitsAfter=1".into(),
            "limit=5".into(),
            "from=1&from=2".into(),
            "from=1&%66rom=2".into(),
            format!("object={r}&object={r}"),
            format!("object={r}&payload=1&payload=1"),
            "from".into(),
            "from=".into(),
            "from=-1".into(),
            "from=+1".into(),
            "from=1.0".into(),
            "entry=99999999999999999999999".into(),
            "entry=1&from=2".into(),
            format!("entry=1&object={r}"),
            format!("world={r}&entry=1"),
            "payload=1".into(),
            format!("refsAfter=entry:{r}"),
            format!("object={r}&payload=true"),
            format!("object={r}&payload=2"),
            format!("object={r}&refsAfter={r}"),
            format!("object={r}&refsAfter=log:{r}"),
            "object=sha256:abc".into(),
            format!("world={}", r.to_string().to_uppercase()),
        ];
        for q in refused {
            assert!(parse_view(&pairs(&q)).is_err(), "{q} was accepted");
        }
    }

    #[test]
    fn every_page_carries_the_strict_headers() {
        for page in [Page::ok("<t>", html! {}), Page::error(StatusCode::NOT_FOUND, "x")] {
            let status = page.status;
            let r = html(page);
            assert_eq!(r.status(), status);
            let h = r.headers();
            assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
            assert_eq!(h[header::CACHE_CONTROL], "no-store");
            assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP);
            assert!(CSP.starts_with("default-src 'none';") && !CSP.contains("script-src"));
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
        }
    }

    #[test]
    fn an_error_page_escapes_what_the_caller_sent() {
        let m = parse_view(&pairs("%3Cscript%3Ealert(1)%3C%2Fscript%3E=1")).unwrap_err();
        let page = document(&Page::error(StatusCode::BAD_REQUEST, &m)).into_string();
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{page}");
        assert!(!page.contains("<script"));
    }

    #[test]
    fn refs_in_payload_text_become_links_and_nothing_else_does() {
        let out = link_refs("<b>sha256:</b>").into_string();
        assert_eq!(out, "&lt;b&gt;sha256:&lt;/b&gt;");
        let r = Ref::of(b"x");
        let text = format!("a {r} b sha256:short sha256:");
        let out = link_refs(&text).into_string();
        let link = format!("<a class=\"ref ref-link\" href=\"/workbench?object={r}\" title=\"{r}\">{r}</a>");
        assert_eq!(out, format!("a {link} b sha256:short sha256:"));
    }

    #[test]
    fn payloads_are_pretty_json_or_escaped_text() {
        let out = payload_html(br#"{"content":"<script>alert(1)</script>","n":1}"#).into_string();
        assert!(out.contains("45 bytes, JSON"), "{out}");
        assert!(
            out.contains("{\n  &quot;content&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;,\n  &quot;n"),
            "{out}"
        );
        let out = payload_html(b"5:x<y>\xff'").into_string();
        assert!(out.contains("8 bytes, not JSON"), "{out}");
        assert!(out.contains("5:x&lt;y&gt;\u{fffd}'"), "{out}");
        assert!(!out.contains("<y>"));
    }

    /// A store whose every value is hostile HTML, rendered through each view.
    #[test]
    fn every_view_escapes_stored_values() {
        const EVIL: &str = "<script>alert('x')</script>\"&";
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("w.db"), 1).unwrap();
        let request = NewObject::derived(EVIL, EVIL, format!("5:{EVIL}").into_bytes());
        let effect = NewObject::derived(
            "world/effect-record/v1",
            EVIL,
            serde_json::to_vec(&serde_json::json!({"effect": EVIL, "scope": EVIL, "cost": 1, "budgetBefore": 7,
                "budgetAfter": 6, "allowed": false, "failed": false, "denial": EVIL,
                "requestRef": request.hash.to_string(), "resultRef": ""}))
            .unwrap(),
        );
        let record = NewObject::derived(
            RECORD_V2,
            EVIL,
            serde_json::to_vec(&serde_json::json!({"invocationId": EVIL, "episodeId": EVIL, "skillId": EVIL,
                "transitionFn": EVIL, "interpreter": EVIL, "semanticsEpoch": EVIL, "input": EVIL,
                "output": EVIL, "plan": EVIL, "effects": [effect.hash.to_string(), EVIL]}))
            .unwrap(),
        );
        let header = EntryHeader {
            entry_index: 0,
            semantics_epoch: 1,
            transition_fn: Ref::of(b"f"),
            interpreter: Ref::of(b"i"),
            prev_entry_hash: Ref::of(b"genesis"),
            written_by: EVIL.into(),
        };
        let entry_hash = canonical::entry_hash(&header, &record.hash);
        let world = World {
            world_ref: canonical::world_ref(0, &record.hash, &entry_hash),
            revision: 0,
            state_root: record.hash,
            log_head: entry_hash,
        };
        let (w, rec, eff, req) = (world.world_ref, record.hash, effect.hash, request.hash);
        store
            .call(Op::CommitWorld(RestCommit {
                invocation_id: None,
                request_digest: Ref::of(b"d"),
                observed_head: None,
                entry: LogEntry { header, entry_hash, transition_ref: record.hash },
                next_world: world,
                objects: vec![request, effect, record],
                charge: None,
            }))
            .unwrap();
        let s = store.snapshot().unwrap();
        let health = Health { db_path: PathBuf::from(EVIL), interpreter: None };
        let pages = [
            log_view(&s, &health, None, 0).unwrap(),
            entry_view(&s, 0).unwrap(),
            object_view(&s, &rec, true, None).unwrap(),
            object_view(&s, &eff, true, None).unwrap(),
            object_view(&s, &req, true, None).unwrap(),
            object_view(&s, &entry_hash, false, None).unwrap(),
            world_view(&s, &w).unwrap(),
        ];
        let bodies: Vec<String> = pages.iter().map(|p| p.body.clone().into_string()).collect();
        for (i, (p, body)) in pages.iter().zip(&bodies).enumerate() {
            assert_eq!(p.status, StatusCode::OK, "{body}");
            assert!(!body.contains("<script") && !body.contains("\"&\""), "{body}");
            // The entry-hash and world pages show only refs and numbers.
            if i < 5 {
                assert!(body.contains("&lt;script&gt;alert('x')&lt;/script&gt;&quot;&amp;"), "{body}");
            }
        }
        assert!(bodies[1].contains("class=\"effect-status denied\""), "{}", bodies[1]);
        assert!(bodies[1].contains("7 → 6"));
        assert!(bodies[2].contains("href=\"/workbench?entry=0\""), "the record names its entry");
        // The effect record's page tells it, its hostile texts inert, and names its entry.
        assert!(bodies[3].contains("id=\"happened-decision\">denied (&lt;script&gt;"), "{}", bodies[3]);
        assert!(
            bodies[3].contains("<th>entry</th><td><a class=\"entry-link\" href=\"/workbench?entry=0\">"),
            "{}",
            bodies[3]
        );
        // A hostile episode name is text, never a link whose path it would break.
        assert!(!bodies[1].contains("href=\"/workbench/episodes/&lt;"), "{}", bodies[1]);
        assert!(bodies[3].contains(&format!("href=\"/workbench?object={rec}\"")), "the effect names its record");
        assert_eq!(entry_view(&s, 1).unwrap().status, StatusCode::NOT_FOUND);
        assert_eq!(object_view(&s, &Ref::of(b"none"), false, None).unwrap().status, StatusCode::NOT_FOUND);
        assert_eq!(world_view(&s, &Ref::of(b"none")).unwrap().status, StatusCode::NOT_FOUND);
    }
}
