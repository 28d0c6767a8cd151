//! The store as the daemon sees it, whichever engine holds the world: named
//! write transactions submitted as plain data (`Op`, answered by a `Reply` or a
//! typed `WriteError`, refusals included), group-committed, and consistent
//! read snapshots (`View`). The embedded engine (`Store`) implements it.

use crate::Footprint;
use crate::error::WriteError;
use crate::ops::{Op, Reply};
use crate::view::Reads;
use crate::writer::{Done, Health};
use serde::Serialize;

/// A world store: where the daemon's writes go and its reads come from.
pub trait WorldStore: Reads + Send + Sync {
    /// Queues a write; `done` runs once its batch is durable (or refused).
    fn submit(&self, op: Op, done: Done);

    /// Whether the store takes writes.
    fn health(&self) -> Health;

    /// What the store occupies and has done, for operators.
    fn status(&self) -> StoreStatus;

    /// Reads for checks that the write transaction makes again (a session's
    /// admission, a call's): each read sees the latest committed state, but
    /// two reads may see two states. Cheaper than a snapshot where a snapshot
    /// costs round trips; the embedded engine's is a snapshot.
    fn glance(&self) -> Result<crate::view::Snapshot, crate::error::ReadError> {
        self.snapshot()
    }

    /// Waits until this process alone runs `episode`'s effects, among every
    /// process sharing the store, and keeps it so until the hold is dropped
    /// (after the call's commit is durable). The embedded engine's file
    /// belongs to one process, whose own lock suffices: its hold is empty.
    /// Blocks; refuses with `EpisodeBusy` after a bounded wait.
    fn hold_episode(&self, _episode: &str) -> Result<EpisodeHold, WriteError> {
        Ok(EpisodeHold::empty())
    }

    /// Runs a write and waits for it. Not for async contexts.
    fn call(&self, op: Op) -> Result<Reply, WriteError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.submit(
            op,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or_else(|_| Err(WriteError::WriterStopped("the writer dropped the request".into())))
    }
}

/// A hold on an episode's effects (`WorldStore::hold_episode`), given up
/// when dropped; dropping never blocks.
#[must_use = "the hold is given up when dropped"]
pub struct EpisodeHold(#[allow(dead_code)] Option<Box<dyn Send>>);

impl EpisodeHold {
    /// A hold that needs nothing given up.
    pub fn empty() -> EpisodeHold {
        EpisodeHold(None)
    }

    /// A hold whose `release` gives it up when dropped.
    pub fn new(release: Box<dyn Send>) -> EpisodeHold {
        EpisodeHold(Some(release))
    }
}

impl std::fmt::Debug for EpisodeHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "EpisodeHold(held)" } else { "EpisodeHold(empty)" })
    }
}

/// What `GET /v1/store` reports of the engine under the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreStatus {
    /// `embedded` (one file) or `postgres`.
    pub engine: &'static str,
    /// The embedded engine's files, the room beside them and its cache bound.
    #[serde(flatten)]
    pub footprint: Option<Footprint>,
    pub checkpoints: u64,
    /// Write batches and the requests they carried since the store opened.
    pub batches: u64,
    pub requests: u64,
}
