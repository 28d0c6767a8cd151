//! `GET /v1/store`: what the store occupies on disk and in memory, for
//! operators watching a daemon that runs for months; `GET /metrics`: the
//! daemon's counters for a monitoring stack.

use super::{State, json};
use axum::Router;
use axum::extract::State as AxState;
use axum::response::{IntoResponse, Response};
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

/// The OpenMetrics text (the classic format for a scraper that does not
/// ask for OpenMetrics); the store's state is read as it is scraped.
async fn metrics(AxState(state): AxState<State>, headers: axum::http::HeaderMap) -> Response {
    if !state.metrics.is_on() {
        return (axum::http::StatusCode::NOT_FOUND, "metrics are off (serve --no-metrics)\n").into_response();
    }
    let scrape = crate::metrics::Scrape {
        degraded: !matches!(state.store.health(), world_store::Health::Serving),
        store: state.store.status(),
        writer: state.store.stats().histograms(),
        callbacks_in_use: state.host_callbacks_max.saturating_sub(state.host_callbacks.available_permits()) as u64,
        tasks_running: state.coordinator.running_count() as u64,
    };
    state.metrics.observe(&scrape);
    let accept = headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let (body, content_type) = if accept.contains("application/openmetrics-text") {
        (state.metrics.encode(), crate::metrics::CONTENT_TYPE)
    } else {
        (crate::metrics::classic(&state.metrics.encode()), crate::metrics::CONTENT_TYPE_CLASSIC)
    };
    let mut response = Response::new(axum::body::Body::from(body));
    let value = axum::http::HeaderValue::from_static(content_type);
    response.headers_mut().insert(axum::http::header::CONTENT_TYPE, value);
    response
}
