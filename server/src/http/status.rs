//! `GET /v1/store`: what the store occupies on disk and in memory, for
//! operators watching a daemon that runs for months.

use super::{State, json};
use axum::Router;
use axum::extract::State as AxState;
use axum::response::Response;
use axum::routing::get;
use serde::Serialize;

pub fn routes() -> Router<State> {
    Router::new().route("/v1/store", get(store_status))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StoreStatus {
    #[serde(flatten)]
    footprint: world_store::Footprint,
    /// The daemon's resident memory (`None` where `/proc` does not say).
    resident_bytes: Option<u64>,
    checkpoints: u64,
    /// Write batches and the requests they carried since the daemon started.
    batches: u64,
    requests: u64,
}

async fn store_status(AxState(state): AxState<State>) -> Response {
    let (batches, requests) = state.store.writer_stats();
    json(&StoreStatus {
        footprint: state.store.footprint(),
        resident_bytes: resident_bytes(),
        checkpoints: state.store.checkpoints(),
        batches,
        requests,
    })
}

/// Resident pages of this process (`/proc/self/statm`, second field), in bytes.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().map(|p| pages * p)
}
