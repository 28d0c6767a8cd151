//! Reads from async code of what a write checks again (a request's session,
//! a call's admission): in place where the store's glances are local (the
//! embedded engine: a few point reads of cached pages cost less than the hop
//! to the blocking pool and back, about 60 µs of a 0.2 ms `ping` on the
//! 2-core machine the benches run on: `docs/benchmarks-journal.md`, "Task
//! rows written once, sessions and admission read in place (store format
//! 7)"), else on the blocking pool under a deadline (a remote database waits
//! on the network and its pool).

use std::time::Duration;
use world_store::WorldStore;

/// Why a glance gave no answer.
#[derive(Debug)]
pub enum Unread {
    /// The blocking pool's read outlived its deadline.
    Deadline,
    /// The read's task failed.
    Failed(String),
}

/// `read`'s answer, in place or from the blocking pool within `deadline`.
pub async fn glance<T: Send + 'static>(
    store: &dyn WorldStore,
    deadline: Duration,
    read: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Unread> {
    if store.glances_are_local() {
        return Ok(read());
    }
    match tokio::time::timeout(deadline, tokio::task::spawn_blocking(read)).await {
        Err(_) => Err(Unread::Deadline),
        Ok(Err(join)) => Err(Unread::Failed(join.to_string())),
        Ok(Ok(answer)) => Ok(answer),
    }
}
