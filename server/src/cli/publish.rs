//! `worldd publish (--db PATH | --store URL) (--manifest FILE | --builtin) [--replace]`.

use super::fail;
use crate::admin::{self, AdminRequest, AdminResponse};
use crate::publish::{PublishRequest, publish};
use crate::stores::StoreSpec;
use std::path::Path;
use std::process::ExitCode;

pub fn run(spec: &StoreSpec, manifest: Option<&Path>, builtin: bool, replace: bool) -> ExitCode {
    let manifest = match manifest.map(std::fs::canonicalize).transpose() {
        Ok(m) => m,
        Err(e) => return fail(1, format!("publish: manifest: {e}")),
    };
    let req = PublishRequest { manifest, builtin, replace };
    // A file's daemon publishes for us; a shared database is written directly
    // (every node serves it from its next request).
    let asked = admin::call_serving(spec, &AdminRequest::Publish(req.clone()));
    let summary = match asked {
        Ok(Some(AdminResponse::Published { summary })) => Ok(summary),
        Ok(Some(AdminResponse::Error { message })) => Err(message),
        Ok(Some(other)) => Err(format!("unexpected reply {other:?}")),
        Ok(None) => spec
            .open(crate::clock::now(), None, None)
            .map_err(|e| e.to_string())
            .and_then(|opened| publish(opened.store.as_ref(), &req)),
        Err(e) => Err(e),
    };
    match summary {
        Ok(s) => {
            say!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, format!("publish: {e}")),
    }
}
