//! Private reads (`serve --private-reads`): who may read what of the `/v1`
//! reads, `/metrics` and the workbench. Without the flag they are open on
//! loopback, as they always were; with it each needs a credential, given as
//! `Authorization: Bearer <token>` or as the password of `Basic` credentials
//! (what a browser sends once prompted):
//!
//! - the operator's token (`crate::operator`) reads everything;
//! - a live session reads its own episode (`/v1/episodes/{its episode}` and
//!   its `/calls`) and what a REST commit needs to be made and reconciled
//!   (`/v1/head`, `/v1/worlds/{ref}`, `/v1/receipts/{id}`: hashes, numbers
//!   and states, no content); nothing else, since objects, the log and the
//!   worlds are shared by every episode;
//! - `/v1/health` (health checks) and `POST /v1/commit` (which checks its own
//!   session) stay open.
//!
//! A refusal is decided before the route's handler runs, so it reads and
//! changes nothing.

use super::{Rest, State, internal};
use crate::glances::{Unread, glance};
use crate::limits::CREDENTIAL_DEADLINE;
use crate::operator::PrivateReads;
use crate::sessions::{self, ResolveError};
use axum::extract::{MatchedPath, RawPathParams, Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use world_protocol::auth::{BearerError, MSG_SESSION_EXPIRED, parse_credential};
use world_protocol::rest::{RestClass, RestError};

/// Who may read a route when reads are private.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// No credential needed.
    Anyone,
    /// Any live session, or the operator.
    AnySession,
    /// A live session of the episode the path names, or the operator.
    OwnEpisode,
    /// The operator alone.
    Operator,
}

#[cfg(test)]
impl Reader {
    /// The name `docs/openapi.json` gives it (`x-private-reads`).
    pub fn as_str(self) -> &'static str {
        match self {
            Reader::Anyone => "anyone",
            Reader::AnySession => "session",
            Reader::OwnEpisode => "episode",
            Reader::Operator => "operator",
        }
    }
}

/// Who may read `route` (an axum path); a route not named here is the operator's.
pub fn reader(route: &str) -> Reader {
    match route {
        "/v1/health" | "/v1/commit" => Reader::Anyone,
        "/v1/head" | "/v1/worlds/{ref}" | "/v1/receipts/{id}" => Reader::AnySession,
        "/v1/episodes/{episode}" | "/v1/episodes/{episode}/calls" => Reader::OwnEpisode,
        _ => Reader::Operator,
    }
}

/// Who presented a credential.
enum Who {
    Operator,
    Session { episode: String },
}

/// The middleware on every read route (see the module comment).
pub async fn gate(
    AxState(state): AxState<State>,
    route: Option<MatchedPath>,
    params: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
    req: Request,
    next: Next,
) -> Response {
    let Some(private) = &state.private_reads else { return next.run(req).await };
    let route = route.as_ref().map_or("", |m| m.as_str());
    let needs = reader(route);
    if needs == Reader::Anyone {
        return next.run(req).await;
    }
    let refused: Rest = match (who(&state, private, req.headers()).await, needs) {
        (Ok(Who::Operator), _) | (Ok(Who::Session { .. }), Reader::AnySession) => return next.run(req).await,
        (Ok(Who::Session { episode }), Reader::OwnEpisode) => {
            let named = params.ok().and_then(|p| p.iter().find(|(k, _)| *k == "episode").map(|(_, v)| v.to_owned()));
            if named.as_deref() == Some(episode.as_str()) {
                return next.run(req).await;
            }
            let why = format!("reads are private on this daemon: a session reads its own episode ({episode}) only");
            Rest(RestError::new(RestClass::OtherEpisode, why))
        }
        (Ok(Who::Session { .. }), _) => Rest(RestError::new(
            RestClass::OperatorOnly,
            "reads are private on this daemon: this one needs the operator's token; a session reads its own episode, \
             the head, worlds and receipts",
        )),
        (Err(refused), _) => refused,
    };
    refusal(route, refused)
}

/// The operator, or the live session the credential names.
async fn who(state: &State, private: &PrivateReads, headers: &HeaderMap) -> Result<Who, Rest> {
    let absent = || {
        let why = format!(
            "reads are private on this daemon: send Authorization: Bearer <token>, a session's (its own episode) \
             or the operator's (in {})",
            private.token_file.display()
        );
        Rest(RestError::new(RestClass::SessionAbsent, why))
    };
    let token = match parse_credential(headers.get(header::AUTHORIZATION).map(|v| v.as_bytes())) {
        Ok(t) => t,
        Err(BearerError::Absent) => return Err(absent()),
        Err(BearerError::Malformed) => {
            let why = "malformed Authorization header: expected Bearer <64-hex-credential>, or Basic credentials \
                       whose password is the credential";
            return Err(Rest(RestError::new(RestClass::InvalidSession, why)));
        }
    };
    if private.is_operator(token.as_str()) {
        return Ok(Who::Operator);
    }
    let d = state.clone();
    let resolve = move || {
        let snap = d.store.glance().map_err(ResolveError::Read)?;
        sessions::lookup(&snap, &token, crate::clock::now())
    };
    match glance(state.store.as_ref(), CREDENTIAL_DEADLINE, resolve).await {
        Ok(Ok(caller)) => Ok(Who::Session { episode: caller.session.episode }),
        Ok(Err(ResolveError::Denied(world_protocol::auth::SessionDenial::Expired))) => {
            Err(Rest(RestError::new(RestClass::SessionExpired, MSG_SESSION_EXPIRED)))
        }
        Ok(Err(ResolveError::Denied(_))) => Err(Rest(RestError::new(
            RestClass::SessionUnknown,
            "unknown credential: neither a session nor this daemon's operator token (made anew at every start)",
        ))),
        Ok(Err(ResolveError::Read(e))) => Err(internal("private reads", &e)),
        Err(Unread::Failed(why)) => Err(internal("private reads", &why)),
        Err(Unread::Deadline) => Err(Rest(RestError::new(
            RestClass::Timeout,
            format!("credential lookup exceeded its {} s deadline", CREDENTIAL_DEADLINE.as_secs()),
        ))),
    }
}

/// The refusal in the route's own form: a REST envelope, or a workbench page.
/// A 401 challenges for `Basic` credentials too, so that a browser prompts.
fn refusal(route: &str, Rest(error): Rest) -> Response {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = if route.starts_with("/workbench") {
        super::workbench::refusal(status, error.wire_message())
    } else {
        Rest(error).into_response()
    };
    if status == StatusCode::UNAUTHORIZED {
        let headers = response.headers_mut();
        headers.append(header::WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE_BASIC));
        headers.append(header::WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE_BEARER));
    }
    response
}

/// The challenges of a refused read: a browser prompts for `Basic`, whose
/// password is then the token; other clients send `Bearer`.
const CHALLENGE_BASIC: &str = "Basic realm=\"worldd\", charset=\"UTF-8\"";
const CHALLENGE_BEARER: &str = "Bearer realm=\"worldd\"";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_health_and_commit_stay_open_and_an_unnamed_route_is_the_operators() {
        assert_eq!(reader("/v1/health"), Reader::Anyone);
        assert_eq!(reader("/v1/commit"), Reader::Anyone);
        assert_eq!(reader("/v1/episodes/{episode}/calls"), Reader::OwnEpisode);
        for route in ["/v1/episodes", "/v1/objects/{ref}", "/v1/log", "/metrics", "/workbench", "/v1/new-route", ""] {
            assert_eq!(reader(route), Reader::Operator, "{route}");
        }
    }

    #[test]
    fn the_openapi_document_says_who_may_read_each_route_as_the_gate_does() {
        let doc: serde_json::Value = serde_json::from_str(include_str!("../../../docs/openapi.json")).unwrap();
        for (path, item) in doc["paths"].as_object().unwrap() {
            let route = item["x-axum-path"].as_str().unwrap();
            assert_eq!(item["x-private-reads"], reader(route).as_str(), "{path}");
            let closed = reader(route) != Reader::Anyone;
            for (method, op) in item.as_object().unwrap().iter().filter(|(m, _)| !m.starts_with("x-")) {
                assert_eq!(op["responses"].get("401").is_some(), closed || route == "/v1/commit", "{method} {path}");
            }
        }
    }
}
