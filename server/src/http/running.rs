//! A call its client follows as a task (`coordinator::tasks`), as the
//! surfaces tell it while it runs: how long it has run, when it stops, the
//! tail of its output where it runs here, whether a cancel was asked.

use crate::coordinator::tasks::Followed;
use serde_json::{Value, json};
use world_protocol::a2a::iso8601;

/// A running task's status as data (the A2A status message's data part).
pub(super) fn working_data(f: &Followed, now: u64) -> Value {
    let Followed::Working { started_at, deadline_at, cancel_asked_at, tail } = f else { return Value::Null };
    let mut running = json!({
        "elapsedSeconds": now.saturating_sub(*started_at),
        "stopsAt": iso8601(*deadline_at),
        "cancelAsked": cancel_asked_at.is_some(),
    });
    if let Some((text, bytes)) = tail {
        running["outputTail"] = json!(text);
        running["outputBytes"] = json!(bytes);
    }
    json!({ "running": running })
}

/// A running task's status in words (the MCP `statusMessage`).
pub(super) fn working_text(f: &Followed, now: u64) -> String {
    let Followed::Working { started_at, deadline_at, cancel_asked_at, tail } = f else { return String::new() };
    let mut text = format!(
        "running for {} s; stopped at {} if it has not ended",
        now.saturating_sub(*started_at),
        iso8601(*deadline_at)
    );
    if cancel_asked_at.is_some() {
        text.push_str("; a cancel was asked and is being carried out");
    }
    match tail {
        Some((out, bytes)) if *bytes > 0 => text.push_str(&format!("; {bytes} bytes of output, the last:\n{out}")),
        Some(_) => text.push_str("; no output yet"),
        None => text.push_str("; its output is seen on the node that runs it"),
    }
    text
}
