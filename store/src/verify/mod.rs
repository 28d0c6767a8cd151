//! The offline verifier: rehashes every payload (in parallel), walks the log's
//! hash chain, recomputes every world ref, checks that every ref an entry or a
//! record names resolves, that the journal pairs up, that spend equals the sum
//! of intents, and that committed tasks point at real entries.
//!
//! It reads one snapshot, so it runs beside a live writer. Engine errors and
//! panics while reading are reported as faults, never a crash of the tool.
//!
//! An embedded store is walked (`redb`); a PostgreSQL store is verified
//! through an embedded copy (`postgres::verify`). What they report
//! (`report`) lies below both; this module, which picks a snapshot's
//! engine, lies above them.

mod approvals;
pub mod derived;
mod objects;
mod owners;
pub(crate) mod redb;
pub(crate) mod report;

pub use report::{Counts, FAULTS_KEPT_MAX, Fault, FaultKind, Options, Report, TableFootprint};

use crate::postgres::PgSnapshot;
use crate::read::RedbSnapshot;
use crate::view::Snapshot;

/// Verifies everything visible in `snapshot`.
pub fn verify(snapshot: &Snapshot, opts: &Options<'_>) -> Report {
    let engine = snapshot.as_any();
    if let Some(snap) = engine.downcast_ref::<PgSnapshot>() {
        return crate::postgres::verify::verify(snap, opts);
    }
    let Some(snap) = engine.downcast_ref::<RedbSnapshot>() else {
        let detail = "the snapshot is of no engine the verifier knows".into();
        return Report {
            fault_count: 1,
            faults: vec![Fault { table: "-", key: "-".into(), kind: FaultKind::Engine, detail }],
            ..Report::default()
        };
    };
    redb::verify(snap, opts)
}
