//! Reading request bodies. A body is read only once its request is
//! authenticated, never past its route's cap (a declared length over it is
//! refused before any of it is read), and within one budget of bytes held
//! across every connection (`BODY_BYTES_IN_FLIGHT_MAX`): however many
//! connections send bodies, the daemon holds at most that much of them.
//!
//! The budget is taken as bytes arrive, so a client that declares a large
//! body and sends little holds little. A read that finds no room waits at
//! most `BODY_BUDGET_WAIT` in all, then its request is refused as busy, in
//! its surface's own shape (`busy_rest`, `busy_mcp`, `busy_a2a`).

use crate::limits::{BODY_BUDGET_WAIT, BODY_BYTES_IN_FLIGHT_MAX};
use axum::body::Body;
use axum::http::{HeaderMap, header};
use hyper::body::Body as _;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use world_protocol::rest::{RestClass, RestError};
use world_protocol::{HttpReply, RpcId};

/// The length a request declares (`Content-Length`), when it declares one.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// Whether the request declares a body longer than `max`.
pub fn declared_over(headers: &HeaderMap, max: usize) -> bool {
    declared_length(headers).is_some_and(|n| n > max as u64)
}

/// A body read to its end, holding its share of the budget until dropped.
pub struct Read {
    bytes: Vec<u8>,
    _held: Option<OwnedSemaphorePermit>,
}

impl std::ops::Deref for Read {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Why a body was not read.
pub enum Unread {
    /// Longer than the route's cap; what is left of the body, unread.
    TooLarge(Body),
    /// No room under the budget within `BODY_BUDGET_WAIT`.
    Busy,
    /// The body broke off (the client went away, a malformed chunk) or did not come in time.
    Failed(String),
}

/// Reads `body` to its end: at most `max` bytes, each taken from `budget`
/// before it is kept. The caller bounds the time the client takes.
pub async fn read(budget: &Arc<Semaphore>, mut body: Body, max: usize) -> Result<Read, Unread> {
    let mut bytes = Vec::new();
    // A declared length is exact: one allocation, touched only as bytes come.
    if let Some(n) = body.size_hint().exact().filter(|n| *n <= max as u64) {
        bytes.reserve_exact(n as usize);
    }
    let mut held: Option<OwnedSemaphorePermit> = None;
    let mut wait_left = BODY_BUDGET_WAIT;
    while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| Unread::Failed(e.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        if bytes.len() + data.len() > max {
            return Err(Unread::TooLarge(body));
        }
        let permit = take(budget, data.len(), &mut wait_left).await?;
        match &mut held {
            Some(h) => h.merge(permit),
            None => held = Some(permit),
        }
        bytes.extend_from_slice(&data);
    }
    Ok(Read { bytes, _held: held })
}

/// `n` bytes of the budget, waiting at most what is left of `wait_left`.
async fn take(
    budget: &Arc<Semaphore>,
    n: usize,
    wait_left: &mut std::time::Duration,
) -> Result<OwnedSemaphorePermit, Unread> {
    let n = u32::try_from(n).map_err(|_| Unread::Busy)?;
    if let Ok(p) = budget.clone().try_acquire_many_owned(n) {
        return Ok(p);
    }
    let began = tokio::time::Instant::now();
    let got = tokio::time::timeout(*wait_left, budget.clone().acquire_many_owned(n)).await;
    *wait_left = wait_left.saturating_sub(began.elapsed());
    match got {
        Ok(Ok(p)) => Ok(p),
        _ => Err(Unread::Busy),
    }
}

/// The busy refusal's words, the same on every surface.
pub fn busy_message() -> String {
    format!(
        "the daemon is reading {} MiB of request bodies already; nothing was done, resend shortly",
        BODY_BYTES_IN_FLIGHT_MAX >> 20
    )
}

/// `/v1`: `503 Timeout` (not committed, safe to resend).
pub fn busy_rest() -> RestError {
    RestError::new(RestClass::Timeout, busy_message())
}

/// MCP: the seed's capacity envelope (HTTP 200, `id: null`: the body was never read).
pub fn busy_mcp() -> HttpReply {
    world_protocol::mcp::host_failure(&RpcId::Null, world_protocol::mcp::HostFailure::CapacityExceeded)
}

/// A2A: `-32603` unavailable, `id: null`, its data saying why.
pub fn busy_a2a() -> HttpReply {
    use world_protocol::a2a::{A2aError, Flavor, Why};
    A2aError::Unavailable.because(Why::new(busy_message())).reply(&RpcId::Null, Flavor::V10).into_http()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_is_read_within_its_cap_and_its_budget() {
        let budget = Arc::new(Semaphore::new(10));
        let read = read(&budget, Body::from("hello"), 8).await.ok().unwrap();
        assert_eq!(&*read, b"hello");
        assert_eq!(budget.available_permits(), 5, "held while the body is");
        drop(read);
        assert_eq!(budget.available_permits(), 10);
        assert!(matches!(super::read(&budget, Body::from("too long"), 4).await, Err(Unread::TooLarge(_))));
        assert_eq!(budget.available_permits(), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_with_no_room_under_the_budget_is_busy_after_the_wait() {
        let budget = Arc::new(Semaphore::new(4));
        let held = read(&budget, Body::from("abc"), 8).await.ok().unwrap();
        assert!(matches!(read(&budget, Body::from("de"), 8).await, Err(Unread::Busy)));
        drop(held);
        assert!(read(&budget, Body::from("de"), 8).await.is_ok());
    }
}
