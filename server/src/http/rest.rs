//! The frozen `/v1` REST table.

use super::{Rest, State, internal, json, query_pairs, read, reply};
use crate::effects::commit;
use crate::limits::{COMMIT_BODY_MAX, COMMIT_DEADLINE, DAEMON_VERSION};
use crate::sessions;
use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::{MethodRouter, get, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use world_protocol::HttpReply;
use world_protocol::auth::rest_denial;
use world_protocol::rest::{RestClass, RestError};
use world_store::*;

/// The frozen `/v1` table: (method, axum path). The router is built from this
/// table and nothing else, and `docs/openapi.json` is checked against it, so the
/// served routes, this list and the document cannot drift apart.
pub const V1_ROUTES: &[(&str, &str)] = &[
    ("GET", "/v1/health"),
    ("GET", "/v1/head"),
    ("GET", "/v1/worlds/{ref}"),
    ("GET", "/v1/objects/{ref}"),
    ("GET", "/v1/objects/by-semantic-id/{*name}"),
    ("GET", "/v1/log/{index}"),
    ("GET", "/v1/log"),
    ("GET", "/v1/registry/{*name}"),
    ("POST", "/v1/commit"),
    ("GET", "/v1/receipts/{id}"),
];

pub fn routes() -> Router<State> {
    V1_ROUTES
        .iter()
        .fold(Router::new(), |router, &(method, path)| router.route(path, handler(method, path)))
        // `{*name}` never matches an empty name; give that one the route's own 400, not the router's 404.
        .route("/v1/objects/by-semantic-id/", get(empty_semantic_id))
}

async fn empty_semantic_id() -> Rest {
    bad("semantic id must not be empty")
}

/// The handler of one row of [`V1_ROUTES`]; a row without one fails every test that builds the router.
fn handler(method: &str, path: &str) -> MethodRouter<State> {
    match (method, path) {
        ("GET", "/v1/health") => get(health),
        ("GET", "/v1/head") => get(head),
        ("GET", "/v1/worlds/{ref}") => get(world),
        ("GET", "/v1/objects/{ref}") => get(object),
        ("GET", "/v1/objects/by-semantic-id/{*name}") => get(by_semantic_id),
        ("GET", "/v1/log/{index}") => get(log_entry),
        ("GET", "/v1/log") => get(log_page),
        ("GET", "/v1/registry/{*name}") => get(registry),
        ("POST", "/v1/commit") => post(commit),
        ("GET", "/v1/receipts/{id}") => get(receipt),
        _ => panic!("V1_ROUTES lists {method} {path}, which has no handler"),
    }
}

fn bad(message: impl Into<String>) -> Rest {
    Rest(RestError::new(RestClass::BadRequest, message))
}

fn not_found(message: &str) -> Rest {
    Rest(RestError::new(RestClass::NotFound, message))
}

fn parse_ref(field: &str, text: &str) -> Result<Ref, Rest> {
    Ref::parse(text).map_err(|e| bad(format!("{field}: {e}")))
}

fn parse_optional_ref(field: &str, text: &str) -> Result<Option<Ref>, Rest> {
    Ref::parse_optional(text).map_err(|e| bad(format!("{field}: {e}")))
}

/// Paging: `limit` absent or < 1 is the default, capped at the maximum; a
/// non-integer is a 400.
pub(super) fn limit_param(pairs: &[(String, String)]) -> Result<usize, Rest> {
    match pairs.iter().find(|(k, _)| k == "limit") {
        None => Ok(page_limit(None)),
        Some((_, v)) => v.parse::<i64>().map(|n| page_limit(Some(n))).map_err(|_| bad("limit must be an integer")),
    }
}

pub(super) fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[derive(Serialize)]
struct Health<'a> {
    status: &'a str,
    /// Why writes are refused, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    daemon_version: &'a str,
    db_path: String,
    interpreter_ref: String,
    interpreter_version: &'a str,
    confinement: &'static str,
}

/// 200 `ok` while the store takes writes; 503 `degraded` (reads still served,
/// writes resume by themselves) or `failed` (the daemon is stopping), with the reason.
async fn health(AxState(state): AxState<State>) -> Response {
    let (status, reason) = match state.store.health() {
        world_store::Health::Serving => ("ok", None),
        world_store::Health::Degraded(r) => ("degraded", Some(r)),
        world_store::Health::Failed(r) => ("failed", Some(r)),
    };
    let mut response = json(&Health {
        status,
        reason,
        daemon_version: DAEMON_VERSION,
        db_path: state.db_path.display().to_string(),
        interpreter_ref: state.interpreter_ref.map(|r| r.to_string()).unwrap_or_default(),
        interpreter_version: &state.interpreter_version,
        confinement: state.runtimes.exec.confinement().mode_name(),
    });
    if status != "ok" {
        *response.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
    }
    response
}

async fn head(AxState(state): AxState<State>) -> Result<Response, Rest> {
    match read(&state, "/v1/head", |s| s.selected_head()).await? {
        Some(r) => Ok(reply(HttpReply::text(200, r.to_string()))),
        None => Err(not_found("no world head has been selected yet")),
    }
}

async fn world(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, Rest> {
    let Path(text) = path.map_err(|e| bad(e.body_text()))?;
    let r = parse_ref("world ref", &text)?;
    match read(&state, "/v1/worlds", move |s| s.world(&r)).await? {
        Some(w) => Ok(json(&w)),
        None => Err(not_found("world not found")),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectOut {
    pub hash: Ref,
    pub interface_hash: Ref,
    pub semantic_id: String,
    pub provenance: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
}

impl ObjectOut {
    pub fn new(hash: Ref, meta: ObjectMeta, payload: Option<Vec<u8>>) -> ObjectOut {
        ObjectOut {
            hash,
            interface_hash: meta.interface_hash,
            semantic_id: meta.semantic_id,
            provenance: meta.provenance,
            payload: payload.map(|p| BASE64.encode(p)),
        }
    }
}

async fn object(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, Rest> {
    let Path(text) = path.map_err(|e| bad(e.body_text()))?;
    let r = parse_ref("object ref", &text)?;
    let pairs = query_pairs(query.as_deref());
    let with_payload = match param(&pairs, "payload") {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(bad("payload must be true or false")),
    };
    let found = read(&state, "/v1/objects", move |s| {
        let Some(meta) = s.object_meta(&r)? else { return Ok(None) };
        let payload = if with_payload { s.payload(&r)? } else { None };
        Ok(Some(ObjectOut::new(r, meta, payload)))
    })
    .await?;
    found.map(|o| json(&o)).ok_or_else(|| not_found("object not found"))
}

#[derive(Serialize)]
struct Items<T> {
    items: Vec<T>,
}

async fn by_semantic_id(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, Rest> {
    let Path(name) = path.map_err(|e| bad(e.body_text()))?;
    if name.is_empty() {
        return Err(bad("semantic id must not be empty"));
    }
    let pairs = query_pairs(query.as_deref());
    let after = match param(&pairs, "after") {
        Some(a) => parse_optional_ref("after", a)?,
        None => None,
    };
    let limit = limit_param(&pairs)?;
    let items = read(&state, "/v1/objects/by-semantic-id", move |s| {
        Ok(s.objects_by_semantic_id(&name, after, limit)?
            .into_iter()
            .map(|(r, m)| ObjectOut::new(r, m, None))
            .collect())
    })
    .await?;
    Ok(json(&Items::<ObjectOut> { items }))
}

fn parse_index(text: &str) -> Result<u64, Rest> {
    text.parse::<u64>().map_err(|_| bad("log index must be a non-negative integer"))
}

async fn log_entry(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, Rest> {
    let Path(text) = path.map_err(|e| bad(e.body_text()))?;
    let index = parse_index(&text)?;
    match read(&state, "/v1/log", move |s| s.log_entry(index)).await? {
        Some(e) => Ok(json(&e)),
        None => Err(not_found("log entry not found")),
    }
}

async fn log_page(AxState(state): AxState<State>, RawQuery(query): RawQuery) -> Result<Response, Rest> {
    let pairs = query_pairs(query.as_deref());
    let from = match param(&pairs, "from") {
        Some(f) => f.parse::<u64>().map_err(|_| bad("from must be a non-negative integer"))?,
        None => 0,
    };
    let limit = limit_param(&pairs)?;
    let items = read(&state, "/v1/log", move |s| s.log_range(from, limit)).await?;
    Ok(json(&Items { items }))
}

#[derive(Serialize)]
struct RegistryHead {
    name: String,
    head: Ref,
}

async fn registry(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, Rest> {
    let Path(name) = path.map_err(|e| bad(e.body_text()))?;
    if name.is_empty() || name == world_store::tables::SELECTED_HEAD {
        return Err(not_found("registry head not found"));
    }
    let lookup = name.clone();
    match read(&state, "/v1/registry", move |s| s.head(&lookup)).await? {
        Some(head) => Ok(json(&RegistryHead { name, head })),
        None => Err(not_found("registry head not found")),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReceiptOut {
    invocation_id: String,
    state: &'static str,
    result_ref: String,
}

async fn receipt(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, Rest> {
    let Path(id) = path.map_err(|e| bad(e.body_text()))?;
    validate_rest_id(&id).map_err(|_| bad("receipt id must be rest:<id>"))?;
    let lookup = id.clone();
    let (st, result) = read(&state, "/v1/receipts", move |s| s.receipt_state(&lookup)).await?;
    Ok(json(&ReceiptOut { invocation_id: id, state: st.as_str(), result_ref: refs::optional_text(result) }))
}

/// Longest `rest:<id>`.
const REST_ID_MAX: usize = 256;

fn validate_rest_id(id: &str) -> Result<(), String> {
    let Some(rest) = id.strip_prefix("rest:") else { return Err("invocationId must start with rest:".into()) };
    if rest.is_empty() || id.len() > REST_ID_MAX || rest.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "invocationId must be rest:<id>, at most {REST_ID_MAX} bytes, without spaces or control characters"
        ));
    }
    Ok(())
}

// ---- POST /v1/commit ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CommitBody {
    #[serde(default)]
    invocation_id: Option<String>,
    observed_head: String,
    #[serde(default)]
    objects: Vec<ObjectIn>,
    next_world: WorldIn,
    entry: EntryIn,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ObjectIn {
    hash: String,
    interface_hash: String,
    semantic_id: String,
    provenance: String,
    payload: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WorldIn {
    #[serde(rename = "ref")]
    world_ref: String,
    revision: u64,
    state_root: String,
    log_head: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EntryIn {
    header: HeaderIn,
    entry_hash: String,
    transition_ref: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct HeaderIn {
    entry_index: u64,
    semantics_epoch: u64,
    transition_fn: String,
    interpreter: String,
    prev_entry_hash: String,
    written_by: String,
}

/// Parses and validates a commit body into the store's request, naming the
/// offending field in every refusal.
fn parse_commit(body: &[u8]) -> Result<RestCommit, Rest> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| bad(format!("invalid commit JSON: {e}")))?;
    if !value.is_object() {
        return Err(bad("the commit body must be one JSON object"));
    }
    let c: CommitBody = serde_json::from_value(value.clone()).map_err(|e| bad(format!("invalid commit: {e}")))?;
    if let Some(id) = &c.invocation_id {
        validate_rest_id(id).map_err(bad)?;
    }
    let mut objects = Vec::with_capacity(c.objects.len());
    for (i, o) in c.objects.into_iter().enumerate() {
        let field = |f: &str| format!("objects[{i}].{f}");
        let payload = BASE64
            .decode(o.payload.as_bytes())
            .map_err(|e| bad(format!("{}: not standard base64: {e}", field("payload"))))?;
        objects.push(NewObject {
            hash: parse_ref(&field("hash"), &o.hash)?,
            interface_hash: parse_ref(&field("interfaceHash"), &o.interface_hash)?,
            semantic_id: o.semantic_id,
            provenance: o.provenance,
            payload,
        });
    }
    let w = c.next_world;
    let next_world = World {
        world_ref: parse_ref("nextWorld.ref", &w.world_ref)?,
        revision: w.revision,
        state_root: parse_ref("nextWorld.stateRoot", &w.state_root)?,
        log_head: parse_ref("nextWorld.logHead", &w.log_head)?,
    };
    let h = c.entry.header;
    let entry = LogEntry {
        header: EntryHeader {
            entry_index: h.entry_index,
            semantics_epoch: h.semantics_epoch,
            transition_fn: parse_ref("entry.header.transitionFn", &h.transition_fn)?,
            interpreter: parse_ref("entry.header.interpreter", &h.interpreter)?,
            prev_entry_hash: parse_ref("entry.header.prevEntryHash", &h.prev_entry_hash)?,
            written_by: h.written_by,
        },
        entry_hash: parse_ref("entry.entryHash", &c.entry.entry_hash)?,
        transition_ref: parse_ref("entry.transitionRef", &c.entry.transition_ref)?,
    };
    Ok(RestCommit {
        invocation_id: c.invocation_id,
        request_digest: Ref::of(&canonical::to_vec(&value)),
        observed_head: parse_optional_ref("observedHead", &c.observed_head)?,
        objects,
        next_world,
        entry,
        charge: None,
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Selected {
    selected_head: Ref,
}

/// Authorization first: nothing about the request is looked at before the session resolves.
pub async fn require_session(state: &State, headers: &HeaderMap) -> Result<sessions::Caller, Rest> {
    match super::resolve_session(state, headers, |_, _, _| ()).await {
        Ok((caller, ())) => Ok(caller),
        Err(super::Unresolved::Denied(d)) => Err(Rest(rest_denial(d))),
        Err(super::Unresolved::Timeout) => {
            Err(Rest(RestError::new(RestClass::Timeout, "credential lookup exceeded its 3 s deadline")))
        }
        Err(super::Unresolved::Failed(why)) => Err(internal("session", &why)),
    }
}

async fn commit(AxState(state): AxState<State>, headers: HeaderMap, body: Body) -> Result<Response, Rest> {
    let caller = require_session(&state, &headers).await?;
    let read = tokio::time::timeout(crate::limits::HTTP_READ_TIMEOUT, read_commit_body(&state, &headers, body));
    let bytes = read.await.map_err(|_| {
        Rest(RestError::new(
            RestClass::Timeout,
            format!(
                "reading the commit body exceeded {} s; nothing was committed",
                crate::limits::HTTP_READ_TIMEOUT.as_secs()
            ),
        ))
    })??;
    let mut c = parse_commit(&bytes)?;
    let charge = commit::charge(&c, caller.credential_id, &caller.session, crate::clock::now());
    c.charge = Some(Box::new(charge.map_err(refused)?));
    let deadline = tokio::time::Instant::now() + COMMIT_DEADLINE;
    if let Some(id) = c.invocation_id.clone() {
        let intent = Op::RestIntent { invocation_id: id.clone(), request_digest: c.request_digest };
        match tokio::time::timeout_at(deadline, crate::writes::write(state.store.as_ref(), intent)).await {
            Err(_) => return Err(uncertain(Some(&id), c.entry.header.entry_index)),
            Ok(Ok(Reply::RestIntent(RestIntentOutcome::Resolved(world)))) => {
                return Ok(json(&Selected { selected_head: world }));
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(commit_error(e)),
        }
    }
    let (id, index) = (c.invocation_id.clone(), c.entry.header.entry_index);
    match tokio::time::timeout_at(deadline, crate::writes::write(state.store.as_ref(), Op::CommitWorld(c))).await {
        Err(_) => Err(uncertain(id.as_deref(), index)),
        Ok(Ok(Reply::Selected(world))) => Ok(json(&Selected { selected_head: world })),
        Ok(Ok(other)) => Err(internal("/v1/commit", &format!("unexpected writer reply {other:?}"))),
        Ok(Err(e)) => Err(commit_error(e)),
    }
}

/// How much of a refused (over-cap) commit body is still read and thrown away.
/// Most clients write their whole body before they read the reply; closing on
/// them mid-body resets the connection and they never see the 413.
const COMMIT_DISCARD_MAX: u64 = COMMIT_BODY_MAX as u64;

/// Reads the commit body (`super::bodies`); over the cap it is `413
/// PayloadTooLarge`, answered at once. The rest of a refused body is drained
/// after the answer (at most [`COMMIT_DISCARD_MAX`] bytes, within the commit
/// deadline) so the client can read it, unless it sent `Expect: 100-continue`
/// and is waiting for the answer before sending anything.
async fn read_commit_body(state: &State, headers: &HeaderMap, body: Body) -> Result<super::bodies::Read, Rest> {
    use super::bodies::{Unread, declared_length};
    let too_large =
        || Rest(RestError::new(RestClass::PayloadTooLarge, format!("commit body exceeds {COMMIT_BODY_MAX} bytes")));
    let max = COMMIT_BODY_MAX as u64;
    let waits = headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if let Some(n) = declared_length(headers).filter(|n| *n > max) {
        if !waits && n <= max + COMMIT_DISCARD_MAX {
            tokio::spawn(discard(body, n));
        }
        return Err(too_large());
    }
    match super::bodies::read(&state.request_bodies, body, COMMIT_BODY_MAX).await {
        Ok(read) => Ok(read),
        Err(Unread::TooLarge(rest)) => {
            tokio::spawn(discard(rest, COMMIT_DISCARD_MAX));
            Err(too_large())
        }
        Err(Unread::Busy) => Err(Rest(super::bodies::busy_rest())),
        Err(Unread::Failed(e)) => Err(bad(format!("reading the commit body: {e}"))),
    }
}

/// Reads and drops up to `limit` more body bytes, giving up at the commit deadline.
async fn discard(mut body: Body, limit: u64) {
    let drain = async {
        let mut seen = 0u64;
        while seen < limit {
            match std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
                Some(Ok(frame)) => seen += frame.data_ref().map_or(0, |d| d.len() as u64),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(COMMIT_DEADLINE, drain).await;
}

/// The request reached the writer but its answer did not come back in time.
fn uncertain(id: Option<&str>, entry_index: u64) -> Rest {
    let how = match id {
        Some(id) => format!("GET /v1/receipts/{id}"),
        None => format!("GET /v1/log/{entry_index} compared field by field"),
    };
    Rest(RestError::new(
        RestClass::CommitUncertain,
        format!(
            "commit outcome is not confirmed within {} s; reconcile with {how} before resending",
            COMMIT_DEADLINE.as_secs()
        ),
    ))
}

/// A commit the session may not make: 403 without the grant, 400 naming a
/// field that claims the daemon.
fn refused(why: commit::CommitRefusal) -> Rest {
    match why {
        commit::CommitRefusal::Reserved { .. } => bad(why.to_string()),
        _ => Rest(RestError::new(RestClass::NotGranted, why.to_string())),
    }
}

fn commit_error(e: WriteError) -> Rest {
    match e {
        WriteError::BudgetExhausted { remaining } => Rest(RestError::new(
            RestClass::BudgetExhausted,
            format!(
                "the session's {}={} grant has {remaining} unit(s) left, less than this commit costs \
                 (a unit per started KiB of its objects' payloads); nothing was committed",
                commit::COMMIT_EFFECT,
                commit::COMMIT_SCOPE
            ),
        )),
        WriteError::HeadConflict { observed, selected } => Rest(RestError::head_conflict(
            "observed head is not the selected head",
            refs::optional_text(observed),
            refs::optional_text(selected),
        )),
        WriteError::HashMismatch { .. }
        | WriteError::InvalidCommit(_)
        | WriteError::RestIdReused(_)
        | WriteError::ObjectTooLarge { .. } => bad(e.to_string()),
        WriteError::Overloaded(_) => {
            Rest(RestError::new(RestClass::Timeout, "the store is overloaded; nothing was committed, resend later"))
        }
        WriteError::OutOfSpace(why) => {
            note!("worldd: /v1/commit refused: {why}");
            Rest(RestError::new(
                RestClass::Timeout,
                "store is out of space; nothing was committed; resend once space is freed",
            ))
        }
        WriteError::Unavailable(why) => {
            note!("worldd: /v1/commit refused: {why}");
            Rest(RestError::new(
                RestClass::Timeout,
                "the store's database is unavailable; nothing was committed; resend later",
            ))
        }
        WriteError::Unconfirmed(why) => {
            note!("worldd: /v1/commit outcome unknown: {why}");
            Rest(RestError::new(
                RestClass::Timeout,
                "commit outcome not confirmed: the store's database connection was lost during its commit; resend the same invocation id",
            ))
        }
        other => internal("/v1/commit", &other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_ids_must_carry_the_rest_prefix() {
        validate_rest_id("rest:demo-1").unwrap();
        for bad in ["demo", "rest:", "a2a:x:y", "rest:a b", &format!("rest:{}", "x".repeat(300))] {
            assert!(validate_rest_id(bad).is_err(), "{bad}");
        }
    }

    /// `docs/openapi.json`, the committed description of this table.
    const OPENAPI: &str = include_str!("../../../docs/openapi.json");

    fn openapi() -> serde_json::Value {
        serde_json::from_str(OPENAPI).expect("docs/openapi.json is JSON")
    }

    /// Follows one local `$ref` (`#/components/...`).
    fn resolve<'a>(doc: &'a serde_json::Value, v: &'a serde_json::Value) -> &'a serde_json::Value {
        match v.get("$ref").and_then(|r| r.as_str()) {
            Some(r) => doc.pointer(r.trim_start_matches('#')).unwrap_or_else(|| panic!("dangling $ref {r}")),
            None => v,
        }
    }

    #[test]
    fn every_row_of_the_route_table_has_a_handler() {
        let _ = routes();
        let mut seen = std::collections::HashSet::new();
        for row in V1_ROUTES {
            assert!(seen.insert(row), "{row:?} is listed twice");
        }
    }

    #[test]
    fn the_openapi_document_describes_exactly_the_served_routes() {
        let doc = openapi();
        assert_eq!(doc["openapi"], "3.1.0");
        let mut documented = vec![];
        for (path, item) in doc["paths"].as_object().expect("paths") {
            let axum_path = item["x-axum-path"].as_str().unwrap_or_else(|| panic!("{path}: no x-axum-path"));
            assert_eq!(path, &axum_path.replace("{*", "{"), "{path}: x-axum-path {axum_path} is another route");
            for (method, operation) in item.as_object().unwrap() {
                if method.starts_with("x-") {
                    continue;
                }
                documented.push((method.to_uppercase(), axum_path.to_string()));
                let declared: Vec<&str> = operation["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| resolve(&doc, p))
                    .filter(|p| p["in"] == "path")
                    .map(|p| p["name"].as_str().unwrap())
                    .collect();
                let in_template: Vec<&str> =
                    path.split('/').filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}')).collect();
                assert_eq!(declared, in_template, "{method} {path}: path parameters");
            }
        }
        let frozen: Vec<(String, String)> = V1_ROUTES.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
        let mut served = frozen.clone();
        served.extend(v1_route_literals());
        documented.sort();
        served.sort();
        assert_eq!(documented, served, "docs/openapi.json against the routes the daemon serves");
        for (path, item) in doc["paths"].as_object().unwrap() {
            let axum_path = item["x-axum-path"].as_str().unwrap();
            let in_table = frozen.iter().any(|(_, p)| p == axum_path);
            assert_eq!(item["x-frozen"], in_table, "{path}: x-frozen must say whether it is in V1_ROUTES");
        }
    }

    /// Paths registered outside the table that are only another spelling of a table route.
    const ALIASES: &[&str] = &["/v1/objects/by-semantic-id/"];

    /// Every `/v1` route registered with a literal path anywhere under `server/src`
    /// (additive routes live beside the frozen table), as (METHOD, path).
    fn v1_route_literals() -> Vec<(String, String)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let mut files = vec![];
        walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        let needle = concat!(".route(", "\"/v1");
        let mut found = vec![];
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (at, _) in text.match_indices(needle) {
                let (path, rest) = text[at + ".route(\"".len()..].split_once('"').unwrap();
                if ALIASES.contains(&path) {
                    continue;
                }
                let call = rest.lines().next().unwrap_or("");
                let methods: Vec<&str> = ["get", "post", "put", "patch", "delete"]
                    .into_iter()
                    .filter(|m| {
                        call.match_indices(&format!("{m}("))
                            .any(|(i, _)| !call[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':'))
                    })
                    .collect();
                assert!(!methods.is_empty(), "{}: cannot tell the methods of route {path}", file.display());
                found.extend(methods.into_iter().map(|m| (m.to_uppercase(), path.to_string())));
            }
        }
        found
    }

    #[test]
    fn the_openapi_error_classes_are_the_envelope_classes_with_their_statuses() {
        let doc = openapi();
        let names: Vec<&str> = RestClass::ALL.iter().map(|c| c.as_str()).collect();
        let documented: Vec<&str> = doc["components"]["schemas"]["ErrorClass"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(documented, names);
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap().iter().filter(|(m, _)| !m.starts_with("x-")) {
                for (code, response) in operation["responses"].as_object().unwrap() {
                    // Health's 503 is its status report, not an error envelope.
                    if code.starts_with('2') || response["x-status-report"] == true {
                        continue;
                    }
                    let response = resolve(&doc, response);
                    let schema = resolve(&doc, &response["content"]["application/json"]["schema"]);
                    let classes = schema["properties"]["error"]["properties"]["class"]["enum"]
                        .as_array()
                        .unwrap_or_else(|| panic!("{method} {path} {code}: no error classes"));
                    for class in classes {
                        let class = RestClass::ALL
                            .into_iter()
                            .find(|c| c.as_str() == class)
                            .unwrap_or_else(|| panic!("{method} {path} {code}: unknown class {class}"));
                        assert_eq!(class.status().to_string(), *code, "{method} {path}: {class}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_commit_body_with_an_unknown_field_or_trailing_value_is_refused() {
        assert!(parse_commit(b"{\"observedHead\":\"\",\"bogus\":1}").is_err());
        assert!(parse_commit(b"{} {}").is_err());
        assert!(parse_commit(b"[]").is_err());
    }
}
