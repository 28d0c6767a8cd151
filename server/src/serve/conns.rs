//! The open connections: at most a cap of them, each closed once it has been
//! idle too long, and the oldest idle one closed to make room when a new one
//! comes at the cap. Idle means no request in progress: from the accept (or
//! the end of the last reply) to the next complete request head. A request
//! is in progress from its head until the last byte of its reply has been
//! written to the socket, so no reply is ever cut short to make room.

use crate::limits::{KEEP_ALIVE_IDLE, REQUEST_HEAD_TIMEOUT};
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Every open connection, by the order it was accepted in.
pub struct Conns {
    table: Mutex<Table>,
    max: usize,
    /// Told when a connection closes or goes idle: the accept loop may be waiting for either.
    changed: Notify,
}

#[derive(Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Entry>,
}

struct Entry {
    /// Requests in progress (more than one only while a reply finishes).
    busy: u32,
    /// A reply's body is done but some of it may still wait in hyper's
    /// buffer: set as the last request ends, cleared once the socket is flushed.
    finishing: Arc<AtomicBool>,
    /// Since when it has had none.
    idle_since: Instant,
    /// Whether a request has come: the idle limit is then `KEEP_ALIVE_IDLE`.
    served: bool,
    /// Chosen to close, to make room.
    shed: bool,
    /// Wakes the connection's watch (`Slot::idled_out`).
    wake: Arc<Notify>,
}

impl Entry {
    fn idle(&self) -> bool {
        self.busy == 0 && !self.finishing.load(Ordering::Acquire)
    }

    /// When an idle connection is closed.
    fn deadline(&self) -> Instant {
        self.idle_since + if self.served { KEEP_ALIVE_IDLE } else { REQUEST_HEAD_TIMEOUT }
    }
}

impl Conns {
    pub fn new(max: usize) -> Arc<Conns> {
        Arc::new(Conns { table: Mutex::default(), max: max.max(1), changed: Notify::new() })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // A panic elsewhere while holding it leaves plain counters: still usable.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Room for one more connection: at once below the cap; at the cap, once
    /// the oldest idle connection has closed, or, when none is idle, once
    /// any closes or goes idle.
    pub async fn admit(self: &Arc<Self>) -> Slot {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut t = self.table();
                if t.open.len() < self.max {
                    return self.register(&mut t);
                }
                shed_oldest_idle(&mut t);
            }
            changed.await;
        }
    }

    fn register(self: &Arc<Self>, t: &mut Table) -> Slot {
        let id = t.next;
        t.next += 1;
        let (wake, finishing) = (Arc::new(Notify::new()), Arc::new(AtomicBool::new(false)));
        let entry = Entry {
            busy: 0,
            finishing: finishing.clone(),
            idle_since: Instant::now(),
            served: false,
            shed: false,
            wake: wake.clone(),
        };
        t.open.insert(id, entry);
        Slot { conns: self.clone(), id, wake, finishing }
    }

    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.table().open.len()
    }
}

/// Marks the oldest idle connection to close, unless one already is.
fn shed_oldest_idle(t: &mut Table) {
    if t.open.values().any(|e| e.shed && e.idle()) {
        return;
    }
    if let Some(e) = t.open.values_mut().find(|e| e.idle()) {
        e.shed = true;
        e.wake.notify_one();
    }
}

/// One open connection's place; dropping it gives the place back.
pub struct Slot {
    conns: Arc<Conns>,
    id: u64,
    wake: Arc<Notify>,
    finishing: Arc<AtomicBool>,
}

impl Slot {
    /// A request has come: held until its reply is done.
    pub fn busy(&self) -> Busy {
        let mut t = self.conns.table();
        if let Some(e) = t.open.get_mut(&self.id) {
            e.busy += 1;
            if std::mem::take(&mut e.shed) {
                // It was to make room and no longer can: the accept loop picks another.
                self.conns.changed.notify_waiters();
            }
        }
        Busy { conns: self.conns.clone(), id: self.id }
    }

    /// The socket has been flushed: a reply that was finishing is out, and
    /// the connection is idle from now.
    fn flushed(&self) {
        if !self.finishing.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut t = self.conns.table();
        let Some(e) = t.open.get_mut(&self.id) else { return };
        if e.busy == 0 {
            e.idle_since = Instant::now();
            e.served = true;
            e.wake.notify_one();
            self.conns.changed.notify_waiters();
        }
    }

    /// Resolves when this connection is to close: idle past its limit, or
    /// chosen to make room while idle.
    pub async fn idled_out(&self) {
        loop {
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let deadline = {
                let t = self.conns.table();
                match t.open.get(&self.id) {
                    None => return,
                    Some(e) if !e.idle() => None,
                    Some(e) if e.shed => return,
                    Some(e) => Some(e.deadline()),
                }
            };
            match deadline {
                None => woken.await,
                Some(at) if Instant::now() >= at => return,
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = woken => {}
                    }
                }
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conns.table().open.remove(&self.id);
        self.conns.changed.notify_waiters();
    }
}

/// A request in progress on a connection.
pub struct Busy {
    conns: Arc<Conns>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut t = self.conns.table();
        let Some(e) = t.open.get_mut(&self.id) else { return };
        e.busy = e.busy.saturating_sub(1);
        if e.busy == 0 {
            // Idle once what hyper buffered of the reply is written (`Slot::flushed`).
            e.finishing.store(true, Ordering::Release);
        }
    }
}

/// The connection's socket, telling its slot when it has been flushed:
/// hyper flushes the socket only once its own buffer is empty.
pub struct Flushes<T> {
    inner: T,
    slot: Arc<Slot>,
}

impl<T> Flushes<T> {
    pub fn new(inner: T, slot: Arc<Slot>) -> Flushes<T> {
        Flushes { inner, slot }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Flushes<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Flushes<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        if matches!(r, Poll::Ready(Ok(()))) {
            self.slot.flushed();
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A reply's body that keeps its request in progress until it is done.
pub struct Replying {
    body: axum::body::Body,
    _busy: Busy,
}

impl Replying {
    pub fn new(body: axum::body::Body, busy: Busy) -> Replying {
        Replying { body, _busy: busy }
    }
}

impl hyper::body::Body for Replying {
    type Data = hyper::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_with_no_request_is_closed_after_the_head_timeout() {
        let conns = Conns::new(4);
        let slot = conns.admit().await;
        let began = Instant::now();
        slot.idled_out().await;
        assert_eq!(began.elapsed(), REQUEST_HEAD_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_progress_keeps_its_connection_and_the_keep_alive_limit_follows_it() {
        let conns = Conns::new(4);
        let slot = Arc::new(conns.admit().await);
        let busy = slot.busy();
        let watch = tokio::spawn({
            let slot = slot.clone();
            async move { slot.idled_out().await }
        });
        tokio::time::sleep(KEEP_ALIVE_IDLE * 3).await;
        assert!(!watch.is_finished(), "busy connections are never idle");
        drop(busy);
        tokio::time::sleep(KEEP_ALIVE_IDLE * 3).await;
        assert!(!watch.is_finished(), "nor is one whose reply may not be all written yet");
        slot.flushed();
        let ended = Instant::now();
        watch.await.unwrap();
        assert_eq!(ended.elapsed(), KEEP_ALIVE_IDLE);
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let conns = Conns::new(3);
        let oldest = Arc::new(conns.admit().await);
        let busy_slot = conns.admit().await;
        let _busy = busy_slot.busy();
        let younger = conns.admit().await;
        // The fourth waits until the oldest idle one (not the busy one) has closed.
        let waiting = tokio::spawn({
            let conns = conns.clone();
            async move { conns.admit().await }
        });
        let watch = oldest.clone();
        tokio::time::timeout(std::time::Duration::from_millis(1), watch.idled_out()).await.expect("the oldest is shed");
        assert!(!waiting.is_finished(), "no room until it has closed");
        drop(watch);
        drop(Arc::into_inner(oldest).unwrap());
        let _fourth = waiting.await.unwrap();
        assert_eq!(conns.open(), 3);
        drop(younger);
        assert_eq!(conns.open(), 2);
    }
}
