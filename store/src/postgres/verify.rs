//! Verifying a PostgreSQL store. Its records stream, in the embedded
//! engine's order and from one snapshot, through the export format into a
//! private embedded copy: the import checks every frame and every object's
//! hash as it rebuilds, and the embedded verifier then walks the copy (the
//! chain, world refs, heads, journal pairs, spend against intents, tasks and
//! receipts). Rows the engines derive (referrers, the record index) are
//! rebuilt by the import; the store's own are then compared with them, as
//! sums (`verify::derived`), and each referrer must name something.

use super::PgSnapshot;
use crate::error::WriteError;
use crate::export::stream::{self, ExportError, ImportError};
use crate::read::RedbSnapshot;
use crate::verify::report::{Fault, FaultKind, Options, Report};
use crate::view::Walks;
use std::io::{BufReader, BufWriter, Write};

/// A PostgreSQL store is verified through an embedded copy, and streams its
/// records straight from its tables.
impl Walks for PgSnapshot {
    fn verify(&self, opts: &Options<'_>) -> Report {
        verify(self, opts)
    }

    fn records(
        &self,
        with_sessions: bool,
        put: &mut dyn FnMut(crate::ops::record::Record) -> Result<(), ExportError>,
    ) -> Result<(), ExportError> {
        PgSnapshot::records(self, with_sessions, put)
    }
}

pub(crate) fn verify(snap: &PgSnapshot, opts: &Options<'_>) -> Report {
    let dir = std::env::temp_dir().join(format!(
        "world-verify-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
    ));
    let report = match std::fs::create_dir(&dir) {
        Ok(()) => through_copy(snap, &dir.join("copy.db"), opts),
        Err(e) => one_fault("-", FaultKind::Engine, format!("a private directory for the copy: {e}")),
    };
    let _ = std::fs::remove_dir_all(&dir);
    report
}

fn through_copy(snap: &PgSnapshot, copy: &std::path::Path, opts: &Options<'_>) -> Report {
    let (reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return one_fault("-", FaultKind::Engine, format!("a pipe: {e}")),
    };
    let (imported, exported) = std::thread::scope(|s| {
        let exporter = s.spawn(move || {
            let mut out = BufWriter::with_capacity(1 << 20, writer);
            let n = stream::write(&mut out, true, 0, |put| snap.records(true, put))?;
            out.flush()?;
            Ok::<u64, ExportError>(n)
        });
        let imported = crate::export::redb::import(copy, &mut BufReader::with_capacity(1 << 20, reader));
        (imported, exporter.join())
    });
    match (exported, imported) {
        (Err(_), _) => one_fault("-", FaultKind::Engine, "the export of the snapshot panicked"),
        (Ok(Err(e)), _) => one_fault("-", FaultKind::Engine, format!("reading the store: {e}")),
        (Ok(Ok(_)), Err(e)) => refused(e),
        (Ok(Ok(_)), Ok(_)) => match crate::embedded::ReadOnlyStore::open(copy)
            .map_err(|e| e.to_string())
            .and_then(|c| c.begin().map_err(|e| e.to_string()))
        {
            Ok(copy) => {
                let mut report = Report { tables: vec![], ..crate::verify::redb::verify(&copy, opts) };
                for fault in derived_faults(snap, &copy) {
                    report.fault_count += 1;
                    report.faults.push(fault);
                }
                report
            }
            Err(e) => one_fault("-", FaultKind::Engine, format!("the private copy: {e}")),
        },
    }
}

/// Where the store's derived rows differ from those the copy derived from
/// the same records (see `verify::derived`).
fn derived_faults(snap: &PgSnapshot, copy: &RedbSnapshot) -> Vec<Fault> {
    let rebuilt = match crate::verify::derived::of_embedded(copy) {
        Ok(d) => d,
        Err(e) => return vec![fault("referrers", "-", FaultKind::Engine, format!("the copy's derived rows: {e}"))],
    };
    let (found, dangling, dangling_count) = match snap.derived() {
        Ok(d) => d,
        Err(e) => return vec![fault("referrers", "-", FaultKind::Engine, format!("reading the derived rows: {e}"))],
    };
    let mut faults: Vec<Fault> = dangling
        .into_iter()
        .map(|key| fault("referrers", key, FaultKind::Dangling, "the row names a position that holds nothing"))
        .collect();
    if dangling_count > faults.len() as u64 {
        let more = dangling_count - faults.len() as u64;
        faults.push(fault("referrers", "-", FaultKind::Dangling, format!("{more} more rows name nothing")));
    }
    let tables = [
        ("referrers", found.referrers, rebuilt.referrers),
        ("record_journal", found.record_journal, rebuilt.record_journal),
        ("episodes", found.episodes, rebuilt.episodes),
        ("episode_calls", found.episode_calls, rebuilt.episode_calls),
        ("episode_sessions", found.episode_sessions, rebuilt.episode_sessions),
    ];
    for (table, found, rebuilt) in tables {
        if found != rebuilt {
            let detail = format!(
                "{} rows, where the records give {}{}",
                found.rows,
                rebuilt.rows,
                if found.rows == rebuilt.rows { " naming other things" } else { "" }
            );
            faults.push(fault(table, "-", FaultKind::Mismatch, detail));
        }
    }
    faults
}

fn fault(table: &'static str, key: impl Into<String>, kind: FaultKind, detail: impl Into<String>) -> Fault {
    Fault { table, key: key.into(), kind, detail: detail.into() }
}

/// What the rebuild refused: the first fault of the store.
fn refused(e: ImportError) -> Report {
    match e {
        ImportError::Refused { source: WriteError::HashMismatch { claimed, actual }, .. } => {
            one_fault("objects", FaultKind::HashMismatch, format!("{claimed}: payload hashes to {actual}"))
        }
        ImportError::Refused { offset, source } => {
            one_fault("-", FaultKind::Mismatch, format!("record {offset} of the walk refused: {source}"))
        }
        ImportError::Frame(f) => one_fault("-", FaultKind::Decode, f.to_string()),
        other => one_fault("-", FaultKind::Engine, other.to_string()),
    }
}

fn one_fault(table: &'static str, kind: FaultKind, detail: impl Into<String>) -> Report {
    Report { fault_count: 1, faults: vec![fault(table, "-", kind, detail)], ..Report::default() }
}
