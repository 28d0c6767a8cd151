//! `worldd verify`: exit 0 clean, 1 faults found, 2 the store cannot be opened.

use super::fail;
use crate::admin::{AdminRequest, AdminResponse};
use crate::stores::StoreSpec;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use world_store::verify::{Options, Report, verify};
use world_store::{ReadOnlyStore, Reads};

pub fn run(spec: &StoreSpec, json: bool, deep: bool) -> ExitCode {
    let db = match spec {
        StoreSpec::Embedded(db) => db,
        StoreSpec::Postgres(url) => return run_shared(url, &spec.label(), json, deep),
    };
    if world_store::export::is_export(db) {
        return run_export(db, json);
    }
    let show_progress = !json && std::io::stderr().is_terminal();
    // A running daemon answers from its own snapshot (`--deep` reads the file
    // itself: it checks the engine's pages, not the daemon's view).
    if !deep {
        match crate::admin::call_streaming(db, &AdminRequest::Verify { json }, |done, total| {
            if show_progress {
                draw_progress(done, total);
            }
        }) {
            Ok(Some(AdminResponse::Verified { output, clean })) => {
                if show_progress {
                    note!();
                }
                note!("verify: answered by the daemon running on this store, from a snapshot of it");
                say_raw!("{output}");
                return if clean { ExitCode::SUCCESS } else { ExitCode::from(1) };
            }
            Ok(Some(AdminResponse::Error { message })) => return fail(2, format!("verify: {message}")),
            Ok(Some(other)) => return fail(2, format!("verify: unexpected daemon reply {other:?}")),
            Err(e) => return fail(2, format!("verify: {e}")),
            Ok(None) => {}
        }
    }
    let store = match ReadOnlyStore::open(db) {
        Ok(s) => s,
        Err(world_store::OpenError::Locked { lock }) if deep => {
            return fail(
                2,
                format!(
                    "verify --deep: a daemon holds this store (lock file {}); --deep reads the engine's pages from the file and needs it stopped; without --deep the running daemon answers",
                    lock.display()
                ),
            );
        }
        Err(e) => return fail(2, format!("verify: {e}")),
    };
    let snapshot = match store.snapshot() {
        Ok(s) => s,
        Err(e) => return fail(2, format!("verify: {e}")),
    };
    let started = std::time::Instant::now();
    let mut report =
        verify(&snapshot, &Options { threads: 0, progress: if show_progress { Some(&draw_progress) } else { None } });
    if show_progress {
        note!();
    }
    if deep && let Err(e) = deep_check(db) {
        report.fault_count += 1;
        report.faults.push(world_store::verify::Fault {
            table: "(engine)",
            key: "-".into(),
            kind: world_store::verify::FaultKind::Engine,
            detail: e,
        });
    }
    print_report(db, &report, json, started.elapsed());
    if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// A PostgreSQL store, from one snapshot: its records walk through the export
/// into a private embedded copy, which the verifier checks.
fn run_shared(url: &str, label: &str, json: bool, deep: bool) -> ExitCode {
    if deep {
        return fail(2, "verify --deep checks the embedded engine's pages; PostgreSQL checks its own (pg_amcheck)");
    }
    let snapshot = match world_store::postgres::read_only(url) {
        Ok(s) => s,
        Err(e) => return fail(2, format!("verify: {e}")),
    };
    let started = std::time::Instant::now();
    let report = verify(&snapshot, &Options::default());
    say_raw!("{}", crate::report::render(label, None, &report, json, started.elapsed()));
    if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn draw_progress(done: u64, total: u64) {
    let width = 30u64;
    let filled = (done * width).checked_div(total).unwrap_or(width).min(width);
    note_raw!(
        "\rhashing objects [{}{}] {done}/{total}",
        "#".repeat(filled as usize),
        " ".repeat((width - filled) as usize)
    );
    let _ = std::io::stderr().flush();
}

fn print_report(db: &Path, report: &Report, json: bool, took: std::time::Duration) {
    say_raw!("{}", crate::report::render_report(db, report, json, took));
}

/// redb's own page-checksum walk, on a private copy so the live file is never written.
fn deep_check(db: &Path) -> Result<(), String> {
    let dir = tempfile_dir()?;
    let copy = dir.join("copy.db");
    std::fs::copy(db, &copy).map_err(|e| format!("copying the store for --deep: {e}"))?;
    let result = (|| {
        let mut database = redb::Database::open(&copy).map_err(|e| format!("engine open: {e}"))?;
        match database.check_integrity() {
            Ok(true) => Ok(()),
            Ok(false) => Err("the storage engine repaired damage in the copy: the file is not intact".to_string()),
            Err(e) => Err(format!("engine integrity check: {e}")),
        }
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn tempfile_dir() -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("worldd-verify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// An export is verified by rebuilding it in a private temporary store (frame
/// checksums, order and count on the way) and verifying that store.
fn run_export(file: &Path, json: bool) -> ExitCode {
    let dir = match tempfile_dir() {
        Ok(d) => d,
        Err(e) => return fail(2, format!("verify: {e}")),
    };
    let target = dir.join("rebuilt.db");
    let input = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) => return fail(2, format!("verify: {}: {e}", file.display())),
    };
    let imported = world_store::export::import(&target, &mut std::io::BufReader::new(input));
    let code = match imported {
        Err(e) => {
            if json {
                say!(
                    "{}",
                    serde_json::json!({"faultCount": 1, "faults": [{"table": "(export)", "key": "-", "kind": "decode", "detail": e.to_string()}]})
                );
            } else {
                say!("fault table=(export) key=- kind=decode: {e}");
                say!("verified {}: 1 fault(s)", file.display());
            }
            ExitCode::from(1)
        }
        Ok(_) => {
            let started = std::time::Instant::now();
            match ReadOnlyStore::open(&target)
                .map_err(|e| e.to_string())
                .and_then(|s| s.snapshot().map_err(|e| e.to_string()))
            {
                Ok(snap) => {
                    let report = verify(&snap, &Options::default());
                    print_report(file, &report, json, started.elapsed());
                    if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(1) }
                }
                Err(e) => fail(2, format!("verify: {e}")),
            }
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    code
}
