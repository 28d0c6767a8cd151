//! The offline verifier: rehashes every payload (in parallel), walks the log's
//! hash chain, recomputes every world ref, checks that every ref an entry or a
//! record names resolves, that the journal pairs up, that spend equals the sum
//! of intents, and that committed tasks point at real entries.
//!
//! It reads one snapshot, so it runs beside a live writer. Engine errors and
//! panics while reading are reported as faults, never a crash of the tool.
//!
//! An embedded store is walked (`redb`); a PostgreSQL store is verified
//! through an embedded copy (`postgres::verify`). Each engine answers for
//! its own walk (`view::Walks`); what they report (`report`) lies below
//! both, and so does this module, which names no engine.

mod approvals;
pub mod derived;
mod objects;
mod owners;
pub(crate) mod redb;
pub(crate) mod report;

pub use report::{Counts, FAULTS_KEPT_MAX, Fault, FaultKind, Options, Report, TableFootprint};

use crate::view::Snapshot;

/// Verifies everything visible in `snapshot`, by its own engine's walk.
pub fn verify(snapshot: &Snapshot, opts: &Options<'_>) -> Report {
    snapshot.verify(opts)
}
