//! `worldd publish --db PATH (--manifest FILE | --builtin) [--replace]`.

use super::fail;
use crate::admin::{self, AdminRequest, AdminResponse};
use crate::publish::{PublishRequest, publish};
use std::path::Path;
use std::process::ExitCode;
use world_store::Store;

pub fn run(db: &Path, manifest: Option<&Path>, builtin: bool, replace: bool) -> ExitCode {
    let manifest = match manifest.map(std::fs::canonicalize).transpose() {
        Ok(m) => m,
        Err(e) => return fail(1, format!("publish: manifest: {e}")),
    };
    let req = PublishRequest { manifest, builtin, replace };
    let summary = match admin::call(db, &AdminRequest::Publish(req.clone())) {
        Ok(Some(AdminResponse::Published { summary })) => Ok(summary),
        Ok(Some(AdminResponse::Error { message })) => Err(message),
        Ok(Some(other)) => Err(format!("unexpected reply {other:?}")),
        Ok(None) => {
            Store::open(db, crate::clock::now()).map_err(|e| e.to_string()).and_then(|(store, _)| publish(&store, &req))
        }
        Err(e) => Err(e),
    };
    match summary {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, format!("publish: {e}")),
    }
}
