//! `worldd export` and `worldd import`: the portable stream (backup, move, replica feed).

use super::fail;
use crate::admin::{AdminRequest, AdminResponse};
use crate::stores::StoreSpec;
use crate::stores::export_to_file;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use world_store::export;
use world_store::{ReadOnlyStore, Reads};

pub fn export_cmd(spec: &StoreSpec, out: &Path, with_sessions: bool) -> ExitCode {
    let db = match spec {
        StoreSpec::Embedded(db) => db,
        // A shared database is read directly, from one snapshot.
        StoreSpec::Postgres(url) => {
            let result = world_store::postgres::read_only(url)
                .map_err(|e| e.to_string())
                .and_then(|snap| export_to_file(&snap, out, with_sessions));
            return exported(spec, out, with_sessions, result);
        }
    };
    let result = match through_daemon(db, out, with_sessions) {
        Ok(Some(n)) => Ok(n),
        Err(e) => Err(e),
        // No daemon: the file itself.
        Ok(None) => {
            let opened = ReadOnlyStore::open(db).map_err(|e| e.to_string());
            let snap = match opened.and_then(|store| store.snapshot().map_err(|e| e.to_string())) {
                Ok(s) => s,
                Err(e) => return fail(2, format!("export: {e}")),
            };
            export_to_file(&snap, out, with_sessions)
        }
    };
    exported(spec, out, with_sessions, result)
}

fn exported(spec: &StoreSpec, out: &Path, with_sessions: bool, result: Result<u64, String>) -> ExitCode {
    match result {
        Ok(n) => {
            say!(
                "exported {n} records from {} to {}{}",
                spec.label(),
                out.display(),
                if with_sessions { " (with sessions)" } else { "" }
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, format!("export: {e}")),
    }
}

/// A running daemon writes the export from a snapshot of its own; `Ok(None)`
/// when none runs. The path goes absolute: the daemon has its own directory.
fn through_daemon(db: &Path, out: &Path, with_sessions: bool) -> Result<Option<u64>, String> {
    let out = std::path::absolute(out).map_err(|e| format!("{}: {e}", out.display()))?;
    match crate::admin::call(db, &AdminRequest::Export { out, with_sessions })? {
        None => Ok(None),
        Some(AdminResponse::Exported { records }) => {
            note!("export: written by the daemon running on this store, from a snapshot of it");
            Ok(Some(records))
        }
        Some(AdminResponse::Error { message }) => Err(message),
        Some(other) => Err(format!("unexpected daemon reply {other:?}")),
    }
}

pub fn import_cmd(spec: &StoreSpec, input: &Path) -> ExitCode {
    let file = match std::fs::File::open(input) {
        Ok(f) => f,
        Err(e) => return fail(2, format!("import: {}: {e}", input.display())),
    };
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let imported = match spec {
        StoreSpec::Embedded(db) => export::import(db, &mut reader),
        StoreSpec::Postgres(url) => world_store::postgres::import(url, &mut reader),
    };
    match imported {
        Ok(n) => {
            say!("imported {n} records from {} into {}", input.display(), spec.label());
            let _ = std::io::stdout().flush();
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, format!("import: {e}; nothing was imported")),
    }
}
