//! A call that outlives its caller: polled on the caller's own task (no
//! task of its own to spawn, schedule and join for every call: at one
//! client that cost the runtime about 55 us of CPU a call), and handed to
//! a task of its own only if the caller goes away before it ends (its
//! connection dropped, its deadline passed). So a call is never cut short
//! between its durable steps, and a panic in it is caught and told.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

type Call<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// `call`, run to its end whatever becomes of its caller.
pub(super) struct RunsToEnd<T: Send + 'static> {
    /// `None` once it ended (or panicked).
    call: Option<Call<T>>,
}

impl<T: Send + 'static> RunsToEnd<T> {
    pub(super) fn new(call: impl Future<Output = T> + Send + 'static) -> Self {
        RunsToEnd { call: Some(Box::pin(call)) }
    }
}

impl<T: Send + 'static> Future for RunsToEnd<T> {
    /// The call's output, or the panic that ended it.
    type Output = std::thread::Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(call) = self.call.as_mut() else { return Poll::Pending };
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx)));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => {
                self.call = None;
                Poll::Ready(Ok(out))
            }
            Err(panic) => {
                self.call = None;
                Poll::Ready(Err(panic))
            }
        }
    }
}

impl<T: Send + 'static> Drop for RunsToEnd<T> {
    fn drop(&mut self) {
        // Outside a runtime (it is shutting down) nothing could run the
        // rest: the process is ending, and recovery at the next open
        // settles a call left started.
        if let (Some(call), Ok(runtime)) = (self.call.take(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(call);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn a_call_whose_caller_stays_answers_it() {
        let out = RunsToEnd::new(async { 7 }).await;
        assert_eq!(out.ok(), Some(7));
    }

    #[tokio::test]
    async fn a_call_whose_caller_goes_away_runs_to_its_end() {
        let (tx, rx) = oneshot::channel();
        let (go, wait) = oneshot::channel::<()>();
        let call = RunsToEnd::new(async move {
            let _ = wait.await;
            let _ = tx.send("ended");
        });
        // The caller's deadline passes first (the call cannot end before
        // `go`, however slow the machine), and it drops the call.
        assert!(tokio::time::timeout(Duration::from_millis(5), call).await.is_err());
        go.send(()).expect("the dropped call still waits, spawned");
        assert_eq!(tokio::time::timeout(Duration::from_secs(5), rx).await.ok().and_then(|r| r.ok()), Some("ended"));
    }

    #[tokio::test]
    async fn a_call_that_panics_is_told_and_not_run_again() {
        let out = RunsToEnd::new(async {
            if std::hint::black_box(true) {
                panic!("a step failed");
            }
        })
        .await;
        assert!(out.is_err());
    }
}
