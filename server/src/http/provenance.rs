//! `GET /v1/objects/{ref}/referrers`: who names an object (objects, entries,
//! worlds; each kind in write order), from the reverse-reference index kept by
//! every commit.

use super::{Rest, State, json, query_pairs, read};
use axum::Router;
use axum::extract::{Path, RawQuery, State as AxState};
use axum::response::Response;
use axum::routing::get;
use serde::Serialize;
use world_protocol::rest::{RestClass, RestError};
use world_store::Ref;
use world_store::tables::{REFERRER_ENTRY, REFERRER_OBJECT, REFERRER_WORLD};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/v1/objects/{object}/referrers", get(referrers))
        .route("/v1/objects/{object}/journal", get(journal))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReferrerOut {
    pub kind: &'static str,
    #[serde(rename = "ref")]
    pub referrer: Ref,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_index: Option<u64>,
}

#[derive(Serialize)]
struct Items {
    items: Vec<ReferrerOut>,
}

fn bad(m: impl Into<String>) -> Rest {
    Rest(RestError::new(RestClass::BadRequest, m))
}

fn kind_code(name: &str) -> Option<u8> {
    match name {
        "object" => Some(REFERRER_OBJECT),
        "entry" => Some(REFERRER_ENTRY),
        "world" => Some(REFERRER_WORLD),
        _ => None,
    }
}

/// `after=<kind>:<ref>` resumes strictly after that item (kinds: object, entry, world).
fn parse_after(text: &str) -> Result<(u8, Ref), Rest> {
    let err = || bad("after must be <kind>:<ref> with kind object, entry or world");
    let (kind, r) = text.split_once(':').ok_or_else(err)?;
    Ok((kind_code(kind).ok_or_else(err)?, Ref::parse(r).map_err(|e| bad(format!("after: {e}")))?))
}

async fn referrers(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, Rest> {
    let Path(text) = path.map_err(|e| bad(e.body_text()))?;
    let target = Ref::parse(&text).map_err(|e| bad(format!("object ref: {e}")))?;
    let pairs = query_pairs(query.as_deref());
    let after = match pairs.iter().find(|(k, _)| k == "after") {
        Some((_, v)) => Some(parse_after(v)?),
        None => None,
    };
    let limit = super::rest::limit_param(&pairs)?;
    let found = read(&state, "/v1/objects/referrers", move |s| {
        // Entry hashes and world refs have referrers too (a world names its entry).
        let known = s.has_object(&target)? || s.entry_index_of(&target)?.is_some() || s.world(&target)?.is_some();
        if !known {
            return Ok(None);
        }
        Ok(Some(s.referrers(&target, after, limit)?))
    })
    .await?;
    let Some(rows) = found else { return Err(Rest(RestError::new(RestClass::NotFound, "object not found"))) };
    let items = rows
        .iter()
        .map(|r| ReferrerOut { kind: r.kind_name(), referrer: r.referrer, entry_index: r.entry_index })
        .collect();
    Ok(json(&Items { items }))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JournalOut {
    invocation_id: String,
    ordinal: u32,
    intent: world_store::EffectIntent,
    outcome: Option<world_store::EffectOutcome>,
    task_state: Option<&'static str>,
    entry_index: Option<u64>,
}

/// The journal item (intent, outcome, task) that carries an effect record:
/// what happened even when no log entry was committed.
async fn journal(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, Rest> {
    let Path(text) = path.map_err(|e| bad(e.body_text()))?;
    let record = Ref::parse(&text).map_err(|e| bad(format!("effect record ref: {e}")))?;
    let found = read(&state, "/v1/objects/journal", move |s| {
        let Some((key, item)) = s.journal_of_record(&record)? else { return Ok(None) };
        let task =
            world_store::TaskKey::from_invocation_id(&key.invocation_id).map(|k| s.task(&k)).transpose()?.flatten();
        // A REST commit's journal item is keyed by its entry.
        let commit = key.invocation_id.strip_prefix(world_store::COMMIT_JOURNAL_PREFIX).and_then(|i| i.parse().ok());
        Ok(Some(JournalOut {
            task_state: task.as_ref().map(|t| t.state.as_str()),
            entry_index: task.and_then(|t| t.committed).map(|c| c.entry_index).or(commit),
            invocation_id: key.invocation_id,
            ordinal: key.ordinal,
            intent: item.intent,
            outcome: item.outcome,
        }))
    })
    .await?;
    found.map(|j| json(&j)).ok_or_else(|| {
        Rest(RestError::new(
            RestClass::NotFound,
            "no journal item carries this effect record (denied effects are recorded without an intent)",
        ))
    })
}
