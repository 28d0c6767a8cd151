//! A2A streams as server-sent events: the task first, then, while its
//! command runs, its output as chunks of one artifact (what is new since the
//! last chunk, read from the running output's kept bytes) and its status
//! changes, and at its end its result and its terminal status; then the
//! stream closes. A stream only reads: the client going away ends the
//! stream, never the task.

use super::State;
use crate::coordinator::SharedHost;
use crate::coordinator::tasks::{self, Followed};
use crate::effects::worktree::{RUNNING_KEPT_BYTES, RunningTail};
use crate::limits::{A2A_STREAM_KEEPALIVE, A2A_STREAM_POLL, A2A_STREAM_QUEUE, A2A_STREAM_STATE_POLL, A2A_STREAMS_MAX};
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use hyper::body::{Bytes, Frame};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::time::Instant;
use world_protocol::RpcId;
use world_protocol::a2a::{self, A2aError, A2aReply, Chunk, ChunkPart, Flavor, TaskStateName, Why};
use world_store::TaskKey;

/// A place among the streams open on this daemon, or the refusal to send
/// (as JSON: nothing has streamed yet).
pub(super) fn admit(state: &State, id: &RpcId, flavor: Flavor) -> Result<OwnedSemaphorePermit, A2aReply> {
    state.a2a_streams.clone().try_acquire_owned().map_err(|_| {
        let why = Why::new(format!(
            "{A2A_STREAMS_MAX} streams are open on this daemon, its limit: read the task with GetTask, or stream once one ends"
        ));
        A2aError::Unavailable.because(why).reply(id, flavor)
    })
}

/// The task a stream follows once its first event is out.
pub(super) struct Following {
    pub flavor: Flavor,
    pub id: RpcId,
    pub key: TaskKey,
    /// The context its events name (the task id when it was sent in none).
    pub context_id: String,
    /// Its command's output, when the command runs on this node.
    pub tail: Option<Arc<RunningTail>>,
}

/// A stream of just `first` (a task that ended, or waits for input).
pub(super) fn single(first: &A2aReply, permit: OwnedSemaphorePermit) -> Response {
    let (tx, rx) = mpsc::channel(1);
    let _ = tx.try_send(Bytes::from(a2a::sse_event(first)));
    drop(permit);
    sse(rx)
}

/// A stream of `first`, then of the task `f` follows, to its end.
pub(super) fn follow(state: &State, first: &A2aReply, f: Following, permit: OwnedSemaphorePermit) -> Response {
    let (tx, rx) = mpsc::channel(A2A_STREAM_QUEUE);
    let _ = tx.try_send(Bytes::from(a2a::sse_event(first)));
    let host = state.clone() as SharedHost;
    tokio::spawn(async move {
        let _permit = permit;
        let mut pump = Pump { out: Out { tx, last: Instant::now() }, offset: 0, chunks: 0, cancel_seen: None };
        pump.run(&host, &f).await;
    });
    sse(rx)
}

fn sse(rx: mpsc::Receiver<Bytes>) -> Response {
    let mut resp = Response::new(Body::new(Events { rx }));
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(world_protocol::CONTENT_TYPE_SSE));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The body: the events as the stream's task sends them, until it drops its end.
struct Events {
    rx: mpsc::Receiver<Bytes>,
}

impl hyper::body::Body for Events {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.rx.poll_recv(cx).map(|next| next.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// The stream's sending end, and when it last sent.
struct Out {
    tx: mpsc::Sender<Bytes>,
    last: Instant,
}

/// The client went away.
struct Gone;

impl Out {
    async fn send(&mut self, bytes: Vec<u8>) -> Result<(), Gone> {
        self.tx.send(Bytes::from(bytes)).await.map_err(|_| Gone)?;
        self.last = Instant::now();
        Ok(())
    }

    async fn event(&mut self, reply: &A2aReply) -> Result<(), Gone> {
        self.send(a2a::sse_event(reply)).await
    }
}

/// What a stream has sent of its task.
struct Pump {
    out: Out,
    /// The output's offset up to which chunks were sent.
    offset: u64,
    /// Output chunks sent.
    chunks: u64,
    /// The cancel ask last told.
    cancel_seen: Option<u64>,
}

impl Pump {
    async fn run(&mut self, host: &SharedHost, f: &Following) {
        let mut next_read = Instant::now() + A2A_STREAM_STATE_POLL;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(A2A_STREAM_POLL) => {}
                _ = self.out.tx.closed() => return,
            }
            if self.output(f, false).await.is_err() {
                return;
            }
            // Once the command has ended here, its row says how at any moment.
            let ended_here = f.tail.is_some() && host.coordinator().running(&f.key).is_none();
            if ended_here || Instant::now() >= next_read {
                next_read = Instant::now() + A2A_STREAM_STATE_POLL;
                match self.state(host, f).await {
                    Ok(true) => {}
                    Ok(false) | Err(Gone) => return,
                }
            }
            if self.out.last.elapsed() >= A2A_STREAM_KEEPALIVE
                && self.out.send(a2a::SSE_KEEPALIVE.to_vec()).await.is_err()
            {
                return;
            }
        }
    }

    /// Sends the output written since the last chunk (`last`: all of it, as
    /// the artifact's last chunk, once the command has ended).
    async fn output(&mut self, f: &Following, last: bool) -> Result<(), Gone> {
        let Some(tail) = &f.tail else { return Ok(()) };
        let since = tail.since(self.offset, RUNNING_KEPT_BYTES);
        let take = if last { since.bytes.len() } else { a2a::complete_utf8_len(&since.bytes) };
        if take == 0 && since.skipped == 0 && !(last && self.chunks > 0) {
            return Ok(());
        }
        let mut text = if since.skipped > 0 { a2a::skipped_note(since.skipped) } else { String::new() };
        text.push_str(&String::from_utf8_lossy(&since.bytes[..take]));
        let chunk = Chunk {
            artifact_id: a2a::LIVE_OUTPUT_ARTIFACT_ID,
            name: Some(a2a::LIVE_OUTPUT_NAME),
            part: ChunkPart::Text(&text),
            append: self.chunks > 0,
            last_chunk: last,
            metadata: Some(json!({"fromByte": since.from, "skippedBytes": since.skipped})),
        };
        self.offset = since.from + take as u64;
        self.chunks += 1;
        let event = a2a::artifact_update(f.flavor, &f.id, &f.key.task_id, &f.context_id, &chunk);
        self.out.event(&event).await
    }

    /// Reads the task's row: `Ok(true)` while it runs (a status event when a
    /// cancel was asked since the last), `Ok(false)` once its end is sent.
    async fn state(&mut self, host: &SharedHost, f: &Following) -> Result<bool, Gone> {
        let (flavor, id, task_id, context) = (f.flavor, &f.id, f.key.task_id.as_str(), f.context_id.as_str());
        let followed = match tasks::follow(host, &f.key).await {
            Ok(Some(followed)) => followed,
            Ok(None) => {
                let why = Why::new("the task is no longer found").with("taskId", task_id);
                self.out.event(&A2aError::TaskNotFound.because(why).reply(id, flavor)).await?;
                return Ok(false);
            }
            Err(e) => {
                // A read that failed once is tried again at the next poll.
                note!("worldd: a2a stream {}: reading the task: {e}", f.key.invocation_id());
                return Ok(true);
            }
        };
        let now = crate::clock::now();
        match &followed {
            Followed::Working { cancel_asked_at, .. } => {
                if *cancel_asked_at != self.cancel_seen {
                    self.cancel_seen = *cancel_asked_at;
                    let data = super::running::working_data(&followed, now);
                    let update =
                        a2a::status_update(flavor, id, task_id, context, TaskStateName::Working, now, Some(&data));
                    self.out.event(&update).await?;
                }
                return Ok(true);
            }
            Followed::Ended { outcome, cancelled } => {
                self.output(f, true).await?;
                let world_ref = outcome.committed.world_ref.to_string();
                let result = Chunk {
                    artifact_id: a2a::ARTIFACT_ID,
                    name: None,
                    part: ChunkPart::Data(&outcome.output),
                    append: false,
                    last_chunk: true,
                    metadata: Some(json!({
                        "invocation_id": outcome.invocation_id,
                        "world_ref": world_ref,
                        "entry_index": outcome.committed.entry_index,
                    })),
                };
                self.out.event(&a2a::artifact_update(flavor, id, task_id, context, &result)).await?;
                let state = if *cancelled { TaskStateName::Canceled } else { TaskStateName::Completed };
                let end = a2a::status_update(flavor, id, task_id, context, state, outcome.ended_at, None);
                self.out.event(&end).await?;
            }
            Followed::Failed { ended_at, why } => {
                self.output(f, true).await?;
                let data: Value = json!({ "failed": why });
                let end =
                    a2a::status_update(flavor, id, task_id, context, TaskStateName::Failed, *ended_at, Some(&data));
                self.out.event(&end).await?;
            }
        }
        Ok(false)
    }
}
