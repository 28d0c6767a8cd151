//! `worldd cancel INVOCATION_ID`: the operator stops a task's command.
//! Through the daemon that serves the store when there is one (it stops a
//! command it runs at once); else written to the store itself, where the
//! node running the command reads it within `CANCEL_WATCH_INTERVAL`.

use super::fail;
use crate::admin::{self, AdminRequest, AdminResponse};
use crate::coordinator::tasks;
use crate::stores::StoreSpec;
use std::process::ExitCode;
use world_store::{Op, Reply, TaskKey};

pub fn cancel(spec: &StoreSpec, invocation_id: &str) -> ExitCode {
    if TaskKey::from_invocation_id(invocation_id).is_none() {
        let why = "is not a task's invocation id: mcp:EPISODE:ID or a2a:EPISODE:ID, as `worldd episodes` names it";
        return fail(1, format!("cancel: {invocation_id:?} {why}"));
    }
    let req = AdminRequest::Cancel { invocation_id: invocation_id.to_string() };
    let said = match admin::call_serving(spec, &req) {
        Ok(Some(AdminResponse::Cancelled { said })) => said,
        Ok(Some(AdminResponse::Error { message })) => return fail(1, format!("cancel: {message}")),
        Ok(Some(other)) => return fail(1, format!("cancel: unexpected reply {other:?}")),
        Ok(None) => match cancel_offline(spec, invocation_id) {
            Ok(said) => said,
            Err(e) => return fail(1, format!("cancel: {e}")),
        },
        Err(e) => return fail(1, format!("cancel: {e}")),
    };
    say!("{said}");
    ExitCode::SUCCESS
}

/// The ask written to the store itself: no daemon serves it here.
fn cancel_offline(spec: &StoreSpec, invocation_id: &str) -> Result<String, String> {
    let key = TaskKey::from_invocation_id(invocation_id).ok_or("not an invocation id")?;
    let store = spec.open(crate::clock::now(), None, None).map_err(|e| e.to_string())?.store;
    let (tx, rx) = std::sync::mpsc::channel();
    let op = Op::CancelTask { task: key, at: crate::clock::now() };
    store.submit(op, Box::new(move |r| drop(tx.send(r))));
    match rx.recv().map_err(|_| "the store's writer stopped".to_string())? {
        Ok(Reply::Cancel(ask)) => tasks::said(&ask, invocation_id),
        Ok(other) => Err(format!("unexpected reply {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}
