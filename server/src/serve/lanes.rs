//! The threads that serve connections. Each lane is a thread running a
//! runtime of its own; a connection, and every task its requests start,
//! stays on the lane it was given. No lane takes another's work, so a call
//! wakes its lane when its request arrives and when the store's writer
//! answers, and nothing else: a shared work-stealing pool also woke a
//! second worker to look for work at each of those (BENCHMARKS).

use crate::limits::{BLOCKING_THREADS_MAX, LANE_BLOCKING_THREADS_MIN};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::oneshot;

/// The lanes of a daemon; dropping them stops every lane and waits for its
/// thread, which drops what its connections left running.
pub struct Lanes {
    lanes: Vec<Lane>,
}

struct Lane {
    handle: tokio::runtime::Handle,
    /// Connections served on this lane now.
    open: Arc<AtomicUsize>,
    /// Dropped to stop the lane: its thread then drops its runtime.
    stop: oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Lanes {
    /// `count` lanes (at least one), each with its runtime started.
    pub fn start(count: usize) -> std::io::Result<Lanes> {
        let count = count.max(1);
        let blocking = (BLOCKING_THREADS_MAX / count).max(LANE_BLOCKING_THREADS_MIN);
        let lanes = (0..count).map(|i| Lane::start(i, blocking)).collect::<std::io::Result<Vec<_>>>()?;
        Ok(Lanes { lanes })
    }

    /// Serves `connection` on the lane with the fewest open connections.
    pub fn serve(&self, connection: impl Future<Output = ()> + Send + 'static) {
        let lane = self.lanes.iter().min_by_key(|l| l.open.load(Ordering::Relaxed)).expect("at least one lane");
        let open = Open::counted(&lane.open);
        lane.handle.spawn(async move {
            let _open = open;
            connection.await
        });
    }

    #[cfg(test)]
    fn open(&self) -> Vec<usize> {
        self.lanes.iter().map(|l| l.open.load(Ordering::Relaxed)).collect()
    }
}

impl Lane {
    /// Returns once the lane's thread has its name and its runtime.
    fn start(index: usize, blocking_threads: usize) -> std::io::Result<Lane> {
        let (stop, stopped) = oneshot::channel::<()>();
        let (started, runs) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new().name(format!("worldd-lane-{index}")).spawn(move || {
            let built = tokio::runtime::Builder::new_current_thread()
                .max_blocking_threads(blocking_threads)
                .enable_all()
                .build();
            let runtime = match built {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = started.send(Err(e));
                    return;
                }
            };
            let _ = started.send(Ok(runtime.handle().clone()));
            runtime.block_on(async {
                let _ = stopped.await;
            });
        })?;
        let handle = runs.recv().map_err(|_| std::io::Error::other("the lane's thread ended before it ran"))??;
        Ok(Lane { handle, open: Arc::default(), stop, thread })
    }
}

impl Drop for Lanes {
    fn drop(&mut self) {
        // Every lane told first, so that they wind down together.
        let threads: Vec<_> = self
            .lanes
            .drain(..)
            .map(|lane| {
                drop(lane.stop);
                lane.thread
            })
            .collect();
        for thread in threads {
            let _ = thread.join();
        }
    }
}

/// One connection counted on its lane until its task ends (or is dropped).
struct Open(Arc<AtomicUsize>);

impl Open {
    fn counted(open: &Arc<AtomicUsize>) -> Open {
        open.fetch_add(1, Ordering::Relaxed);
        Open(open.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn connections_go_to_the_least_busy_lane_and_stay_on_its_thread() {
        let lanes = Lanes::start(2).unwrap();
        let (release, held) = tokio::sync::watch::channel(false);
        let (seen, mut threads) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..4 {
            let (mut held, seen) = (held.clone(), seen.clone());
            lanes.serve(async move {
                let first = std::thread::current().name().map(str::to_owned);
                let _ = held.wait_for(|released| *released).await;
                let _ = seen.send((first, std::thread::current().name().map(str::to_owned)));
            });
        }
        assert_eq!(lanes.open(), [2, 2], "each new connection took the lane with fewer");
        release.send(true).unwrap();
        let mut names = vec![];
        for _ in 0..4 {
            let (first, last) = threads.blocking_recv().unwrap();
            assert_eq!(first, last, "a connection's task stays on its lane");
            names.push(first.unwrap());
        }
        names.sort();
        assert_eq!(names, ["worldd-lane-0", "worldd-lane-0", "worldd-lane-1", "worldd-lane-1"]);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while lanes.open() != [0, 0] && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(lanes.open(), [0, 0], "a connection that ended leaves its lane");
    }

    #[test]
    fn dropping_the_lanes_ends_their_threads_and_drops_what_they_left_running() {
        let lanes = Lanes::start(1).unwrap();
        let (kept, mut dropped) = tokio::sync::oneshot::channel::<()>();
        lanes.serve(async move {
            let _kept = kept;
            std::future::pending::<()>().await
        });
        drop(lanes);
        assert!(dropped.try_recv().is_err_and(|e| e == tokio::sync::oneshot::error::TryRecvError::Closed));
    }
}
