//! `worldd export` and `worldd import`: the portable stream (backup, move, replica feed).

use super::fail;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use world_store::export;
use world_store::{ReadOnlyStore, Reads};

pub fn export_cmd(db: &Path, out: &Path, with_sessions: bool) -> ExitCode {
    let store = match ReadOnlyStore::open(db) {
        Ok(s) => s,
        Err(e) => return fail(2, format!("export: {e}")),
    };
    let snap = match store.snapshot() {
        Ok(s) => s,
        Err(e) => return fail(2, format!("export: {e}")),
    };
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = std::path::PathBuf::from(tmp);
    let result = (|| -> Result<u64, String> {
        let file = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        let n = export::export(&snap, &mut w, with_sessions, crate::clock::now()).map_err(|e| e.to_string())?;
        let file = w.into_inner().map_err(|e| e.to_string())?;
        file.sync_all().map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, out).map_err(|e| format!("rename to {}: {e}", out.display()))?;
        Ok(n)
    })();
    match result {
        Ok(n) => {
            println!(
                "exported {n} records from {} to {}{}",
                db.display(),
                out.display(),
                if with_sessions { " (with sessions)" } else { "" }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            fail(1, format!("export: {e}"))
        }
    }
}

pub fn import_cmd(db: &Path, input: &Path) -> ExitCode {
    let file = match std::fs::File::open(input) {
        Ok(f) => f,
        Err(e) => return fail(2, format!("import: {}: {e}", input.display())),
    };
    match export::import(db, &mut std::io::BufReader::with_capacity(1 << 20, file)) {
        Ok(n) => {
            println!("imported {n} records from {} into {}", input.display(), db.display());
            let _ = std::io::stdout().flush();
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, format!("import: {e}; nothing was imported")),
    }
}
