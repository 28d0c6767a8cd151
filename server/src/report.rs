//! What `verify` prints for a report: the CLI prints it, and a running
//! daemon renders it the same way for the clients of its admin socket.

use std::path::Path;
use world_store::verify::Report;

/// What `verify` prints for a report: one JSON line, or a line per fault and
/// the summary. A running daemon renders it the same way for its clients.
pub fn render_report(db: &Path, report: &Report, json: bool, took: std::time::Duration) -> String {
    render(&db.display().to_string(), Some(world_store::FileSizes::of(db)), report, json, took)
}

/// The report of a store named `name`; `files` for the embedded engine.
pub fn render(
    name: &str,
    files: Option<world_store::FileSizes>,
    report: &Report,
    json: bool,
    took: std::time::Duration,
) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if json {
        let mut v = serde_json::to_value(report).unwrap_or_default();
        if let Some(o) = v.as_object_mut()
            && let Some(files) = files
        {
            o.insert("logicalBytes".into(), report.logical_bytes().into());
            o.insert("pageBytes".into(), report.page_bytes().into());
            o.insert("fileBytes".into(), files.file_bytes.into());
            o.insert("allocatedBytes".into(), files.allocated_bytes.into());
            o.insert("walBytes".into(), files.wal_bytes.into());
            o.insert("payloadFileBytes".into(), files.payload_bytes.into());
        }
        let _ = writeln!(out, "{v}");
        return out;
    }
    for f in &report.faults {
        let _ = writeln!(
            out,
            "fault table={} key={} kind={}: {}",
            f.table,
            f.key,
            serde_json::to_value(f.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
            f.detail
        );
    }
    let c = &report.counts;
    let _ = writeln!(
        out,
        "verified {} in {:.2} s: {} objects ({} bytes rehashed), {} log entries, {} worlds, {} heads, {} intents, {} outcomes, {} tasks, {} sessions, {} receipts{}; {} fault(s)",
        name,
        took.as_secs_f64(),
        c.objects,
        c.payload_bytes,
        c.log_entries,
        c.worlds,
        c.heads,
        c.intents,
        c.outcomes,
        c.tasks,
        c.sessions,
        c.receipts,
        files.map(|f| format!("; {}", footprint(report.logical_bytes(), report.page_bytes(), f))).unwrap_or_default(),
        report.fault_count
    );
    out
}

/// Logical bytes against what holds them: `--json` has the breakdown per table.
fn footprint(logical: u64, pages: u64, files: world_store::FileSizes) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let (file, allocated, payloads) = (files.file_bytes, files.allocated_bytes, files.payload_bytes);
    let held = allocated + payloads;
    let ratio = if logical == 0 { 0.0 } else { held as f64 / logical as f64 };
    format!(
        "{:.2} MiB of rows and payloads: {:.2} MiB of table pages ({:.2} MiB on disk in a {:.2} MiB file) and a {:.2} MiB payload file ({ratio:.2}x the logical bytes)",
        mib(logical),
        mib(pages),
        mib(allocated),
        mib(file),
        mib(payloads)
    )
}
