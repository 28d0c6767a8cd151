//! The daemon's shared state: what every surface, the admin socket and the
//! coordinator (as its `Host`) reach through one `Arc<Daemon>`. Below
//! `serve` (which builds it) and the surfaces (which use it).

use crate::coordinator::Coordinator;
use crate::effects::worktree::Worktrees;
use crate::runtime::Runtimes;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Semaphore;
use world_store::{Ref, WorldStore};

/// Everything the handlers share.
pub struct Daemon {
    pub store: Box<dyn WorldStore>,
    /// The store as messages name it (a file, or a URL without password).
    pub store_label: String,
    /// This node's local path (see `ServeOptions::local`).
    pub db_path: PathBuf,
    pub interpreter_ref: Option<Ref>,
    pub interpreter_version: String,
    pub coordinator: Coordinator,
    pub runtimes: Runtimes,
    pub worktrees: Worktrees,
    /// MCP host callbacks running at once; the next one is refused at once.
    pub host_callbacks: Arc<Semaphore>,
    /// How many slots `host_callbacks` has.
    pub host_callbacks_max: usize,
    /// Request-body bytes held at once, one permit a byte (`BODY_BYTES_IN_FLIGHT_MAX`).
    pub request_bodies: Arc<Semaphore>,
    /// A2A streams open at once, one permit a stream (`A2A_STREAMS_MAX`).
    pub a2a_streams: Arc<Semaphore>,
    /// Session tool views, built once per registry revision and visible set.
    pub tools: crate::tools::ToolsCache,
    /// What `GET /metrics` serves.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// `serve --approval-ttl`.
    pub approval_ttl_s: u64,
    /// `serve --exec-timeout` and `--tasks-max`.
    pub task_limits: crate::coordinator::tasks::TaskLimits,
    /// Seals the questions asked of MCP clients (the store's secret).
    pub approval_key: [u8; crate::approvals::state::KEY_BYTES],
    /// `serve --private-reads`: the reads need a credential (`http::reads`).
    pub private_reads: Option<crate::operator::PrivateReads>,
}

impl crate::coordinator::Host for Daemon {
    fn store(&self) -> &dyn WorldStore {
        self.store.as_ref()
    }
    fn coordinator(&self) -> &Coordinator {
        &self.coordinator
    }
    fn runtimes(&self) -> &Runtimes {
        &self.runtimes
    }
    fn worktrees(&self) -> &Worktrees {
        &self.worktrees
    }
    fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }
    fn approval_ttl(&self) -> u64 {
        self.approval_ttl_s
    }
    fn task_limits(&self) -> crate::coordinator::tasks::TaskLimits {
        self.task_limits
    }
}
