//! The HTTP shell: routing, limits, and the bridge from async handlers to the
//! store's blocking reads (writes are queued through `crate::writes`).

mod a2a;
pub mod agents;
mod approvals;
pub mod bodies;
mod episodes;
mod provenance;
mod reads;
pub mod rest;
mod running;
pub mod status;
mod streams;
pub mod workbench;

use crate::daemon::Daemon;
use crate::glances::{Unread, glance};
use crate::limits::{CREDENTIAL_DEADLINE, READ_DEADLINE};
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode};
use axum::response::IntoResponse;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use world_protocol::HttpReply;
use world_protocol::rest::{RestClass, RestError};
use world_store::{ReadError, Snapshot};

pub type State = Arc<Daemon>;

pub fn router(state: State) -> Router {
    use axum::routing::{get, post};
    // Only these routes pass the private-reads gate; the agent surfaces check their own sessions.
    let read_routes = rest::routes()
        .merge(provenance::routes())
        .merge(episodes::routes())
        .merge(status::routes())
        .merge(workbench::routes())
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), reads::gate));
    read_routes
        .route("/mcp", post(agents::mcp_post).fallback(agents::mcp_other))
        .route("/mcp/", post(agents::mcp_post).fallback(agents::mcp_other))
        .route("/a2a", post(a2a::a2a_post))
        .route("/a2a/", post(a2a::a2a_post))
        .route("/.well-known/agent.json", get(agents::agent_card))
        .route("/.well-known/agent-card.json", get(agents::agent_card))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(rebinding_guard))
        .layer(axum::middleware::from_fn(close_unless_body_read))
        .with_state(state)
}

/// A reply sent before its request's body was read to the end (a refused host
/// or session, a body too large to drain) says `Connection: close`. The server closes such
/// a connection rather than wait for the rest of the body, and a client that was
/// not told would send its next request on it and see it fail.
async fn close_unless_body_read(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use hyper::body::Body as _;
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let ended = Arc::new(AtomicBool::new(false));
    let req = req.map(|inner| Body::new(Watched { inner, ended: ended.clone() }));
    let mut resp = next.run(req).await;
    if !ended.load(Ordering::Relaxed) {
        resp.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// A request body that notes when it has been read to its end.
struct Watched {
    inner: Body,
    ended: Arc<AtomicBool>,
}

impl hyper::body::Body for Watched {
    type Data = hyper::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None)) || self.inner.is_end_stream() {
            self.ended.store(true, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// DNS-rebinding protection on every route.
async fn rebinding_guard(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    match agents::rebinding_check(req.headers()) {
        Ok(()) => next.run(req).await,
        Err(r) => reply(r),
    }
}

async fn not_found() -> Rest {
    Rest(RestError::new(RestClass::NotFound, "no such route"))
}

/// A REST envelope as an axum response.
pub struct Rest(pub RestError);

impl IntoResponse for Rest {
    fn into_response(self) -> axum::response::Response {
        reply(self.0.into_reply())
    }
}

impl From<RestError> for Rest {
    fn from(e: RestError) -> Rest {
        Rest(e)
    }
}

/// Copies a protocol reply onto the wire.
pub fn reply(r: HttpReply) -> axum::response::Response {
    let mut resp = Response::new(Body::from(r.body));
    *resp.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in r.headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            resp.headers_mut().append(name, v);
        }
    }
    resp
}

/// `200 application/json` with Go-compatible encoding and a trailing newline.
pub fn json<T: serde::Serialize>(value: &T) -> axum::response::Response {
    reply(HttpReply::json(200, world_protocol::json::to_line(value)))
}

/// Logs the cause on stderr and returns the fixed `Internal` envelope.
/// Why a request's session was not resolved.
pub enum Unresolved {
    /// The credential is absent, malformed, unknown or expired.
    Denied(world_protocol::auth::SessionDenial),
    /// The lookup did not finish within `CREDENTIAL_DEADLINE`.
    Timeout,
    /// The store could not be read.
    Failed(String),
}

impl Unresolved {
    /// What failed, for the log line of a refusal.
    pub fn cause(&self) -> String {
        match self {
            Unresolved::Denied(d) => format!("{d:?}"),
            Unresolved::Timeout => "credential lookup exceeded its 3 s deadline".into(),
            Unresolved::Failed(why) => why.clone(),
        }
    }
}

/// Resolves the bearer session from a glance (`glances::glance`, under the
/// credential deadline), then runs `then` on the same snapshot: every
/// surface resolves sessions through this one function and maps
/// `Unresolved` its own way.
pub async fn resolve_session<T: Send + 'static>(
    state: &State,
    headers: &axum::http::HeaderMap,
    then: impl FnOnce(&Daemon, &Snapshot, &crate::sessions::Caller) -> T + Send + 'static,
) -> Result<(crate::sessions::Caller, T), Unresolved> {
    use crate::sessions::ResolveError;
    let auth = headers.get(axum::http::header::AUTHORIZATION).map(|v| v.as_bytes().to_vec());
    let d = state.clone();
    let resolve = move || {
        // A session and its view are checked again by the call's own write.
        let snap = d.store.glance().map_err(ResolveError::Read)?;
        let caller = crate::sessions::resolve(&snap, auth.as_deref(), crate::clock::now())?;
        let extra = then(&d, &snap, &caller);
        Ok::<_, ResolveError>((caller, extra))
    };
    match glance(state.store.as_ref(), CREDENTIAL_DEADLINE, resolve).await {
        Err(Unread::Deadline) => Err(Unresolved::Timeout),
        Err(Unread::Failed(why)) => Err(Unresolved::Failed(why)),
        Ok(Err(ResolveError::Denied(d))) => Err(Unresolved::Denied(d)),
        Ok(Err(ResolveError::Read(e))) => Err(Unresolved::Failed(e.to_string())),
        Ok(Ok(found)) => Ok(found),
    }
}

pub fn internal(route: &str, cause: &dyn std::fmt::Display) -> Rest {
    tracing::error!(route, %cause, "internal error");
    Rest(RestError::internal())
}

pub fn read_error(route: &str, e: ReadError) -> Rest {
    internal(route, &e)
}

/// Runs a store read on the blocking pool under the read deadline.
pub async fn read<T, F>(state: &State, route: &'static str, f: F) -> Result<T, Rest>
where
    T: Send + 'static,
    F: FnOnce(&Snapshot) -> Result<T, ReadError> + Send + 'static,
{
    let daemon = state.clone();
    let work = tokio::task::spawn_blocking(move || {
        let snap = daemon.store.snapshot()?;
        f(&snap)
    });
    match tokio::time::timeout(READ_DEADLINE, work).await {
        Err(_) => Err(Rest(RestError::new(
            RestClass::Timeout,
            format!("store read exceeded its {} s deadline", READ_DEADLINE.as_secs()),
        ))),
        Ok(Err(join)) => Err(internal(route, &join)),
        Ok(Ok(r)) => r.map_err(|e| read_error(route, e)),
    }
}

/// Query parameters in order, percent-decoded; repeated names are kept.
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes()).into_owned().collect()
}
