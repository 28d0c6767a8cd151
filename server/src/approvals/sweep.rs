//! Approvals past their expiry closed without waiting for a call to find
//! them (so they hold no room): every pass at the daemon's start, then one
//! bounded pass each `APPROVAL_SWEEP_INTERVAL`. Each pass reads first and
//! writes only when an approval is due; the store decides which.

use crate::daemon::Daemon;
use crate::limits::APPROVAL_SWEEP_INTERVAL;
use std::sync::{Arc, Weak};
use world_store::{APPROVALS_EXPIRED_PER_PASS, APPROVALS_OPEN_MAX, Op, Reply, WorldStore};

/// Open approvals a pass reads: all of them (a store holds
/// `APPROVALS_OPEN_MAX`; PostgreSQL nodes asking at once may pass it by one each).
const OPEN_READ_MAX: usize = 2 * APPROVALS_OPEN_MAX as usize;

/// Closes every approval past its expiry, a bounded pass at a time. A
/// failure does not stop the daemon (a read may be refused while the store
/// recovers): it is logged, and the periodic pass tries again.
pub async fn at_start(daemon: &Arc<Daemon>) {
    match all_due(daemon).await {
        Ok(0) => {}
        Ok(lapsed) => tracing::info!(lapsed, "closed the approvals that expired while the daemon was down"),
        Err(why) => tracing::warn!(%why, "closing the approvals past their expiry failed; the next pass tries again"),
    }
}

/// Passes until one closes less than its share; answers how many closed.
async fn all_due(daemon: &Arc<Daemon>) -> Result<usize, String> {
    let mut closed = 0;
    // Each full pass closes its share; the open ones are bounded, so are the passes.
    for _ in 0..=(OPEN_READ_MAX / APPROVALS_EXPIRED_PER_PASS) {
        let n = pass(daemon).await?;
        closed += n;
        if n < APPROVALS_EXPIRED_PER_PASS {
            break;
        }
    }
    Ok(closed)
}

/// One pass every `APPROVAL_SWEEP_INTERVAL` while the daemon lives.
pub fn every_interval(daemon: Weak<Daemon>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(APPROVAL_SWEEP_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let Some(d) = daemon.upgrade() else { return };
            if let Err(why) = pass(&d).await {
                tracing::warn!(%why, "closing the approvals past their expiry failed; the next pass tries again");
            }
        }
    })
}

/// Closes up to `APPROVALS_EXPIRED_PER_PASS` approvals past their expiry.
async fn pass(daemon: &Arc<Daemon>) -> Result<usize, String> {
    let now = crate::clock::now();
    let d = daemon.clone();
    let due = tokio::task::spawn_blocking(move || due(d.store.as_ref(), now)).await.map_err(|e| e.to_string())?;
    if !due? {
        return Ok(0);
    }
    match crate::writes::write(daemon.store.as_ref(), Op::ExpireApprovals { at: now }).await {
        Ok(Reply::ApprovalsClosed(ids)) => Ok(ids.len()),
        Ok(other) => Err(format!("unexpected reply {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether an open approval is past its expiry at `now`.
fn due(store: &dyn WorldStore, now: u64) -> Result<bool, String> {
    let snap = store.snapshot().map_err(|e| e.to_string())?;
    let open = snap.open_approvals(OPEN_READ_MAX).map_err(|e| e.to_string())?;
    Ok(open.iter().any(|(_, row)| now >= row.expires_at))
}
