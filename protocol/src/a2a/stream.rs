//! Streams (`SendStreamingMessage`, `SubscribeToTask`; 0.3's
//! `message/stream`, `tasks/resubscribe`): each event one JSON-RPC reply
//! whose result is a `StreamResponse` (1.0: exactly one of `task`,
//! `message`, `statusUpdate`, `artifactUpdate`; 0.3: the Task or the event
//! itself, tagged by `kind`), framed as one server-sent event.

use super::*;

/// The artifact a running command's output streams as: stdout and stderr
/// interleaved as they came, one text part per chunk.
pub const LIVE_OUTPUT_ARTIFACT_ID: &str = "live-output";
/// That artifact's name.
pub const LIVE_OUTPUT_NAME: &str = "output as it came (stdout and stderr interleaved)";
/// A comment line a stream sends when it has had nothing to say for a
/// while, so that a client's read timeout does not end it.
pub const SSE_KEEPALIVE: &[u8] = b": keepalive\n\n";

/// The first event of a stream: the Task (1.0 wraps it as `{"task":…}`).
/// `reply` is the reply a send gives the task (already wrapped) or a get
/// (the bare Task); an error passes through.
pub fn stream_task(flavor: Flavor, reply: A2aReply) -> A2aReply {
    match (flavor, reply.outcome) {
        (Flavor::V10, Ok(task)) if task.get("task").is_none() => {
            A2aReply { outcome: Ok(json!({ "task": task })), ..reply }
        }
        (_, outcome) => A2aReply { outcome, ..reply },
    }
}

/// A status change of task `task_id` (`TaskStatusUpdateEvent`): `data`, if
/// any, is its status message's one data part. 0.3 also says whether it is
/// the stream's last event (`final`).
pub fn status_update(
    flavor: Flavor,
    jsonrpc_id: &RpcId,
    task_id: &str,
    context_id: &str,
    state: TaskStateName,
    at: u64,
    data: Option<&Value>,
) -> A2aReply {
    let mut status = json!({"state": state.name(flavor), "timestamp": iso8601(at)});
    if let Some(data) = data {
        let m = MessageView { message_id: format!("{task_id}:status:{at}"), role: Role::Agent, data };
        status["message"] = message_value(flavor, task_id, context_id, &m);
    }
    let event = json!({"taskId": task_id, "contextId": context_id, "status": status});
    match flavor {
        Flavor::V10 => result(jsonrpc_id, json!({ "statusUpdate": event })),
        _ => {
            let mut event = event;
            event["kind"] = json!("status-update");
            event["final"] = json!(state.is_terminal() || state == TaskStateName::InputRequired);
            result(jsonrpc_id, event)
        }
    }
}

/// One chunk of an artifact as it streams.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk<'a> {
    pub artifact_id: &'a str,
    pub name: Option<&'a str>,
    pub part: ChunkPart<'a>,
    /// Adds to the chunks before it (every chunk after an artifact's first).
    pub append: bool,
    /// The artifact's last chunk.
    pub last_chunk: bool,
    /// The artifact's metadata (where in the output this chunk starts).
    pub metadata: Option<Value>,
}

/// A chunk's one part.
#[derive(Debug, Clone, PartialEq)]
pub enum ChunkPart<'a> {
    Text(&'a str),
    Data(&'a Value),
}

/// A chunk of task `task_id`'s artifact (`TaskArtifactUpdateEvent`);
/// `append` and `lastChunk` are omitted when false, as ProtoJSON does.
pub fn artifact_update(
    flavor: Flavor,
    jsonrpc_id: &RpcId,
    task_id: &str,
    context_id: &str,
    chunk: &Chunk<'_>,
) -> A2aReply {
    let part = match (flavor, &chunk.part) {
        (Flavor::V10, ChunkPart::Text(t)) => json!({ "text": t }),
        (Flavor::V10, ChunkPart::Data(d)) => json!({ "data": d }),
        (_, ChunkPart::Text(t)) => json!({"kind": "text", "text": t}),
        (_, ChunkPart::Data(d)) => json!({"kind": "data", "data": d}),
    };
    let mut artifact = json!({"artifactId": chunk.artifact_id, "parts": [part]});
    if let Some(name) = chunk.name {
        artifact["name"] = json!(name);
    }
    if let Some(m) = &chunk.metadata {
        artifact["metadata"] = m.clone();
    }
    let mut event = json!({"taskId": task_id, "contextId": context_id, "artifact": artifact});
    if chunk.append {
        event["append"] = json!(true);
    }
    if chunk.last_chunk {
        event["lastChunk"] = json!(true);
    }
    match flavor {
        Flavor::V10 => result(jsonrpc_id, json!({ "artifactUpdate": event })),
        _ => {
            event["kind"] = json!("artifact-update");
            result(jsonrpc_id, event)
        }
    }
}

/// One reply as a server-sent event: `data: <the reply>` and a blank line
/// (an error reply, as `event: error`). The JSON is written on one line,
/// so one `data:` line carries it.
pub fn sse_event(reply: &A2aReply) -> Vec<u8> {
    let body = reply.body();
    let json = body.strip_suffix(b"\n").unwrap_or(&body);
    let mut out = Vec::with_capacity(json.len() + 24);
    if reply.outcome.is_err() {
        out.extend_from_slice(b"event: error\n");
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    out
}

/// How much of `bytes` to send as text now: all of it but an incomplete
/// UTF-8 character at its end (kept for the next chunk, so that no
/// character is split across two; any other bad byte is sent as U+FFFD).
pub fn complete_utf8_len(bytes: &[u8]) -> usize {
    // A character is at most 4 bytes: only the last 3 can start an incomplete one.
    let from = bytes.len().saturating_sub(3);
    for start in (from..bytes.len()).rev() {
        let b = bytes[start];
        let width = match b {
            0x00..=0x7f => return bytes.len(),
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            // A continuation byte: look further back for its lead.
            0x80..=0xbf => continue,
            _ => return bytes.len(),
        };
        return if bytes.len() - start < width { start } else { bytes.len() };
    }
    bytes.len()
}

/// What a chunk says of output the stream could not keep up with, before its text.
pub fn skipped_note(bytes: u64) -> String {
    format!("… [{bytes} bytes skipped: the stream fell behind the command] …\n")
}
