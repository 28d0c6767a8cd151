//! The export: every record of a store, from one snapshot, as a portable,
//! append-only stream (`stream`). An export is taken from one snapshot, so it
//! is consistent even beside a live writer; both engines write the same
//! records in the same order. Import rebuilds every derived row (indexes,
//! open sets) and writes into a temporary file renamed into place only when
//! the whole stream checked out: nothing half-imported ever remains
//! (`redb`; a PostgreSQL store imports in one transaction, `postgres::import`).
//!
//! `stream` and `redb` lie below the PostgreSQL engine, which uses them (its
//! records are framed by `stream`; its verifier imports into an embedded copy
//! through `redb`); this module names no engine: each streams its own
//! records (`view::Walks`).

pub(crate) mod redb;
pub(crate) mod stream;

pub use crate::ops::record::Record;
pub use redb::{IMPORT_BATCH, import};
pub use stream::{
    EXPORT_FORMAT, ExportError, FRAME_BODY_MAX, FrameError, ImportError, MAGIC, encode_records, is_export, read_frames,
};

use crate::view::Snapshot;
use std::io::Write;

/// Writes the whole snapshot; returns the number of records. Each engine
/// streams its own records (`view::Walks`), all in the same order.
pub fn export(snap: &Snapshot, out: &mut impl Write, with_sessions: bool, now: u64) -> Result<u64, ExportError> {
    stream::write(out, with_sessions, now, |put| snap.records(with_sessions, put))
}
