//! `GET /v1/store`: what the store occupies on disk and in memory, for
//! operators watching a daemon that runs for months; `GET /metrics`: the
//! daemon's counters for a monitoring stack.

use super::{State, json};
use axum::Router;
use axum::extract::State as AxState;
use axum::response::Response;
use axum::routing::get;
use serde::Serialize;

pub fn routes() -> Router<State> {
    Router::new().route("/v1/store", get(store_status)).route("/metrics", get(metrics))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(flatten)]
    store: world_store::StoreStatus,
    /// The daemon's resident memory (`None` where `/proc` does not say).
    resident_bytes: Option<u64>,
}

async fn store_status(AxState(state): AxState<State>) -> Response {
    json(&Status { store: state.store.status(), resident_bytes: resident_bytes() })
}

/// Resident pages of this process (`/proc/self/statm`, second field), in bytes.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().map(|p| pages * p)
}

/// The OpenMetrics text; the store's state is read as it is scraped.
async fn metrics(AxState(state): AxState<State>) -> Response {
    let degraded = !matches!(state.store.health(), world_store::Health::Serving);
    state.metrics.store_degraded(degraded);
    let mut response = Response::new(axum::body::Body::from(state.metrics.encode()));
    let value = axum::http::HeaderValue::from_static(crate::metrics::CONTENT_TYPE);
    response.headers_mut().insert(axum::http::header::CONTENT_TYPE, value);
    response
}
