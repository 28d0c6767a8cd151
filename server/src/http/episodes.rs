//! `GET /v1/episodes`, `/v1/episodes/{episode}` and
//! `/v1/episodes/{episode}/calls`: what each episode did and paid, from the
//! episode index every commit keeps (see `crate::episodes`). Open on
//! loopback like the other `/v1` reads, unless reads are private
//! (`super::reads`: then a session reads its own episode).

use super::rest::param;
use super::{Rest, State, json, query_pairs, read};
use crate::episodes;
use axum::Router;
use axum::extract::{Path, RawQuery, State as AxState};
use axum::response::Response;
use axum::routing::get;
use world_protocol::rest::{RestClass, RestError};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/v1/episodes", get(list))
        .route("/v1/episodes/{episode}", get(one))
        .route("/v1/episodes/{episode}/calls", get(calls))
}

fn bad(m: impl Into<String>) -> Rest {
    Rest(RestError::new(RestClass::BadRequest, m))
}

fn not_found() -> Rest {
    Rest(RestError::new(RestClass::NotFound, "the store has seen no call of this episode"))
}

/// `limit=` between 1 and `max`; absent, `default`.
fn limit(pairs: &[(String, String)], default: usize, max: usize) -> Result<usize, Rest> {
    match param(pairs, "limit") {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(bad(format!("limit must be an integer from 1 to {max}"))),
        },
    }
}

fn episode_of(path: Result<Path<String>, axum::extract::rejection::PathRejection>) -> Result<String, Rest> {
    let Path(episode) = path.map_err(|e| bad(e.body_text()))?;
    if episode.is_empty() || episode.len() > world_store::LABEL_MAX {
        return Err(bad(format!("episode must be 1-{} bytes", world_store::LABEL_MAX)));
    }
    Ok(episode)
}

async fn list(AxState(state): AxState<State>, RawQuery(query): RawQuery) -> Result<Response, Rest> {
    let pairs = query_pairs(query.as_deref());
    let after = param(&pairs, "after").map(episodes::parse_cursor).transpose().map_err(|e| bad(e.to_string()))?;
    let limit = limit(&pairs, episodes::EPISODES_PAGE_DEFAULT, episodes::EPISODES_PAGE_MAX)?;
    let now = crate::clock::now();
    let page = read(&state, "/v1/episodes", move |s| episodes::list(s, after, limit, now)).await?;
    Ok(json(&page))
}

async fn one(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, Rest> {
    let episode = episode_of(path)?;
    let now = crate::clock::now();
    let found = read(&state, "/v1/episodes/{episode}", move |s| episodes::summary(s, &episode, now)).await?;
    found.map(|summary| json(&summary)).ok_or_else(not_found)
}

async fn calls(
    AxState(state): AxState<State>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, Rest> {
    let episode = episode_of(path)?;
    let pairs = query_pairs(query.as_deref());
    let from = match param(&pairs, "from") {
        Some(f) => f.parse::<u64>().map_err(|_| bad("from must be a non-negative integer"))?,
        None => 0,
    };
    let limit = limit(&pairs, episodes::CALLS_PAGE_DEFAULT, episodes::CALLS_PAGE_MAX)?;
    let found =
        read(&state, "/v1/episodes/{episode}/calls", move |s| episodes::calls(s, &episode, from, limit)).await?;
    found.map(|page| json(&episodes::with_running_output(page, &state.coordinator))).ok_or_else(not_found)
}
