//! `worldd publish`: a manifest (or the shipped builtin package) into the
//! transition registry, by compare-and-swap on its head.

use crate::registry::{self, ManifestEntry};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use world_store::{Op, Reply, WorldStore, WriteError};

/// Largest manifest file read.
pub const MANIFEST_BYTES_MAX: u64 = 4 << 20;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublishRequest {
    /// Absolute path of a manifest; `None` with `builtin` set.
    pub manifest: Option<PathBuf>,
    pub builtin: bool,
    pub replace: bool,
}

fn read_manifest(path: &Path) -> Result<Vec<ManifestEntry>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("manifest {}: {e}", path.display()))?;
    if meta.len() > MANIFEST_BYTES_MAX {
        return Err(format!("manifest {} is larger than {MANIFEST_BYTES_MAX} bytes", path.display()));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("manifest {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("manifest {}: {e}", path.display()))
}

/// Publishes and returns the one-line summary. Blocking.
pub fn publish(store: &dyn WorldStore, req: &PublishRequest) -> Result<String, String> {
    let (entries, base) = match (&req.manifest, req.builtin) {
        (Some(path), false) => (read_manifest(path)?, path.parent().map(Path::to_path_buf).unwrap_or_default()),
        (None, true) => (registry::builtin_manifest(), PathBuf::new()),
        _ => return Err("give exactly one of --manifest FILE and --builtin".into()),
    };
    if entries.is_empty() {
        return Err("the manifest lists no transitions".into());
    }
    let snap = store.snapshot().map_err(|e| e.to_string())?;
    let prepared: Result<Vec<_>, String> = entries.into_iter().map(|e| registry::prepare(e, &base, &snap)).collect();
    let current = registry::load(&snap).map_err(|e| e.to_string())?;
    let plan = registry::plan_publish(current, prepared?, req.replace)?;
    if let Some(p) = plan.publish.clone() {
        match store.call(Op::PublishRegistry(p)) {
            Ok(Reply::Published(_)) => {}
            Ok(other) => return Err(format!("unexpected writer reply {other:?}")),
            Err(WriteError::RegistryConflict { .. }) => {
                return Err(
                    "the registry moved while publishing (another publish); nothing written, run it again".into()
                );
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(plan.summary())
}
