//! Client verbs: one bounded request to a running daemon each.

use super::fail;
use crate::limits::CLIENT_TIMEOUT;
use std::io::Write;
use std::process::ExitCode;

pub(super) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().timeout_global(Some(CLIENT_TIMEOUT)).http_status_as_error(false).build().into()
}

/// GETs `path` and prints the body; an HTTP error becomes
/// `worldd: <path> returned HTTP <status> <Class>: <message>` and exit 1.
pub fn get_and_print(addr: &str, path: &str) -> ExitCode {
    let url = format!("{}{path}", addr.trim_end_matches('/'));
    let mut resp = match agent().get(&url).call() {
        Ok(r) => r,
        Err(e) => return fail(1, format!("cannot reach {addr}: {e}")),
    };
    let status = resp.status().as_u16();
    let body = match resp.body_mut().with_config().limit(64 << 20).read_to_vec() {
        Ok(b) => b,
        Err(e) => return fail(1, format!("{path}: reading the response: {e}")),
    };
    if (200..300).contains(&status) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&body);
        if !body.ends_with(b"\n") {
            let _ = out.write_all(b"\n");
        }
        return ExitCode::SUCCESS;
    }
    fail(1, describe_error(path, status, &body))
}

pub(super) fn describe_error(path: &str, status: u16, body: &[u8]) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let err = parsed.as_ref().and_then(|v| v.get("error"));
    let class = err.and_then(|e| e.get("class")).and_then(|c| c.as_str()).unwrap_or("");
    let message = err.and_then(|e| e.get("message")).and_then(|m| m.as_str()).map(str::to_string);
    let message = message.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    let mut line = format!("{path} returned HTTP {status} {class}: {message}");
    if let (Some(o), Some(s)) = (err.and_then(|e| e.get("observedHead")), err.and_then(|e| e.get("selectedHead"))) {
        line.push_str(&format!(
            " (observedHead={} selectedHead={})",
            o.as_str().unwrap_or(""),
            s.as_str().unwrap_or("")
        ));
    }
    line
}
