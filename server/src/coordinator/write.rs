//! The call's durable batches, for every phase: the task row goes first in
//! whichever batch needs it first; a batch is queued at once, in order
//! behind every earlier write, and settled (awaited, its replies read) apart,
//! so that a phase can let go of what it holds in between.

use super::Stop::{Failed, Resumed};
use super::{CallError, Invocation, Stop};
use crate::writes;
use world_store::*;

/// A batch handed to the writer, not yet durable.
pub(super) struct Queued {
    /// The batch begins with the task row.
    creating: bool,
    reply: writes::QueuedWrite,
}

impl Invocation<'_> {
    /// The task row, written in the same batch as whatever needs it first.
    /// A call run as a task says so in its row when the row comes with its
    /// intent (the task is then told started); one denied, or ending before
    /// its effect, was answered in its request.
    fn create_op(&self, ops: &[Op]) -> Option<Op> {
        let with_intent = ops.iter().any(|op| matches!(op, Op::RecordIntent(_)));
        (!self.created).then(|| Op::CreateTask {
            task: self.key.clone(),
            request_digest: self.digest,
            at: crate::clock::now(),
            transition: self.d.id.clone(),
            context: self.call.context.clone(),
            message_id: self.call.message_id.clone(),
            run: self.task.as_ref().filter(|_| with_intent).map(|t| t.slot.run()),
        })
    }

    /// Runs `ops` (the task row first if it is not yet durable) as one durable batch.
    pub(super) async fn write(&mut self, ops: Vec<Op>) -> Result<Vec<Result<Reply, WriteError>>, Stop> {
        let queued = self.queue(ops);
        self.settle(queued).await
    }

    /// Queues `ops` (the task row first if it is not yet durable) as one batch
    /// for the writer, behind every write queued before it: the writer applies
    /// and journals requests in the order they were queued.
    pub(super) fn queue(&self, ops: Vec<Op>) -> Queued {
        let mut all: Vec<Op> = self.create_op(&ops).into_iter().collect();
        let creating = !all.is_empty();
        all.extend(ops);
        Queued { creating, reply: writes::queue(self.host.store(), Op::Sequence(all)) }
    }

    /// Waits for a queued batch to be durable (or refused) and reads its replies.
    pub(super) async fn settle(&mut self, queued: Queued) -> Result<Vec<Result<Reply, WriteError>>, Stop> {
        let replies = match queued.reply.reply().await {
            Ok(Reply::Sequence(r)) => r,
            Ok(other) => return Err(Failed(CallError::Unavailable(format!("unexpected writer reply {other:?}")))),
            // The writer stopped with our batch in hand: nobody can say whether it landed.
            Err(e @ WriteError::WriterStopped(_)) if !self.ran => {
                tracing::error!(invocation = %self.key.invocation_id(), error = %e, "commit outcome unknown");
                return Err(Failed(CallError::Unconfirmed));
            }
            // The database lost the connection during its commit.
            Err(WriteError::Unconfirmed(why)) if !self.ran => {
                tracing::error!(invocation = %self.key.invocation_id(), why, "commit outcome unknown");
                return Err(Failed(CallError::Unconfirmed));
            }
            // Refused before anything of the batch was written.
            Err(WriteError::OutOfSpace(why)) if !self.ran => return Err(Failed(CallError::OutOfSpace(why))),
            Err(WriteError::Unavailable(why)) if !self.ran => {
                return Err(Failed(CallError::Unavailable(format!("the store's database is unavailable: {why}"))));
            }
            Err(e) => return Err(Failed(self.unrecorded(format!("store: {e}")))),
        };
        let mut replies = replies.into_iter();
        if queued.creating {
            match replies.next() {
                Some(Ok(_)) => self.created = true,
                Some(Err(WriteError::TaskExists(task))) => return Err(Resumed(task)),
                Some(Err(e)) => return Err(Failed(CallError::Unavailable(format!("task row: {e}")))),
                None => return Err(Failed(CallError::Unavailable("empty sequence reply".into()))),
            }
        }
        Ok(replies.collect())
    }
}
