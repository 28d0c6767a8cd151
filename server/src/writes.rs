//! Writes to the store from async code: a request is queued at once, behind
//! every request queued before it (the writer applies and journals them in
//! that order), and its reply is awaited without holding a thread. Used by
//! the coordinator, the REST commit and the admin socket alike.

use world_store::{Op, Reply, WorldStore, WriteError};

/// A write queued for the writer.
pub struct QueuedWrite(tokio::sync::oneshot::Receiver<Result<Reply, WriteError>>);

impl QueuedWrite {
    /// The write's reply, once its batch is durable (or refused).
    pub async fn reply(self) -> Result<Reply, WriteError> {
        self.0.await.unwrap_or_else(|_| Err(WriteError::WriterStopped("the writer dropped the request".into())))
    }
}

/// Queues a write now and returns its reply to await.
pub fn queue(store: &dyn WorldStore, op: Op) -> QueuedWrite {
    let (tx, rx) = tokio::sync::oneshot::channel();
    store.submit(
        op,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    QueuedWrite(rx)
}

/// Queues a write and waits for its durable answer.
pub async fn write(store: &dyn WorldStore, op: Op) -> Result<Reply, WriteError> {
    queue(store, op).reply().await
}
