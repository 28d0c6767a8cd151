//! Episode holds across nodes: one node at a time runs an episode's effects.
//!
//! A hold is a session-level advisory lock keyed by the episode, taken on a
//! connection kept for holds alone and given up (`pg_advisory_unlock`) when
//! the hold is dropped, after the call's commit is durable. A node that dies
//! loses its connections, and PostgreSQL lets its locks go with them; a hold
//! whose unlock fails closes its connection for the same reason. Waiters
//! queue in the server, in order, up to `EPISODE_WAIT`.

use super::{EPISODE_HOLDS_MAX, EPISODE_WAIT, POOL_WAIT};
use crate::backend::EpisodeHold;
use crate::error::WriteError;
use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};
use sha2::{Digest, Sha256};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// The lock key of an episode: a hash, in a space of its own (two keys may
/// collide; then those two episodes take turns, which is harmless).
pub(crate) fn lock_key(episode: &str) -> i64 {
    let digest = Sha256::new().chain_update(b"world/episode-hold\0").chain_update(episode.as_bytes()).finalize();
    i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// The node's connections for holds: at most `EPISODE_HOLDS_MAX`, idle ones
/// kept, and a thread that gives holds up so that dropping one never blocks.
pub(crate) struct Holds {
    config: Config,
    slots: Arc<Slots>,
    release: Mutex<Sender<Held>>,
}

#[derive(Default)]
struct Slots {
    /// Connections out plus idle ones.
    state: Mutex<(usize, Vec<Client>)>,
    freed: Condvar,
}

struct Held {
    client: Client,
    key: i64,
}

impl Holds {
    pub(crate) fn new(config: Config) -> Holds {
        let slots = Arc::new(Slots::default());
        let (tx, rx) = channel();
        let releaser = slots.clone();
        std::thread::Builder::new()
            .name("world-episode-holds".into())
            .spawn(move || give_up_holds(rx, &releaser))
            .expect("spawn the episode hold thread");
        Holds { config, slots, release: Mutex::new(tx) }
    }

    /// Waits until this node holds `episode`, at most `EPISODE_WAIT`.
    pub(crate) fn hold(&self, episode: &str) -> Result<EpisodeHold, WriteError> {
        let started = Instant::now();
        let mut client = self.connection()?;
        let key = lock_key(episode);
        let left = EPISODE_WAIT.saturating_sub(started.elapsed()).as_millis().max(1);
        let taken = client
            .batch_execute(&format!("SET lock_timeout = {left}"))
            .and_then(|()| client.query_one("SELECT pg_advisory_lock($1)", &[&key]).map(|_| ()));
        match taken {
            Ok(()) => {
                let release = self.release.lock().unwrap_or_else(|p| p.into_inner()).clone();
                Ok(EpisodeHold::new(Box::new(Release { held: Some(Held { client, key }), to: release })))
            }
            Err(e) => {
                let busy = e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE);
                self.slots.put_back(busy.then_some(client));
                Err(if busy {
                    WriteError::EpisodeBusy { episode: episode.to_string(), waited_ms: EPISODE_WAIT.as_millis() as u64 }
                } else {
                    WriteError::Unavailable(e.to_string())
                })
            }
        }
    }

    /// An idle connection, or a new one while fewer than the most are out.
    fn connection(&self) -> Result<Client, WriteError> {
        let mut state = self.slots.state.lock().unwrap_or_else(|p| p.into_inner());
        let deadline = Instant::now() + POOL_WAIT;
        loop {
            if let Some(client) = state.1.pop() {
                if !client.is_closed() {
                    return Ok(client);
                }
                state.0 -= 1;
                continue;
            }
            if state.0 < EPISODE_HOLDS_MAX {
                state.0 += 1;
                drop(state);
                return self.config.connect(NoTls).map_err(|e| {
                    self.slots.put_back(None);
                    WriteError::Unavailable(e.to_string())
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(WriteError::Unavailable(format!(
                    "all {EPISODE_HOLDS_MAX} connections for episode holds are busy"
                )));
            }
            state = self.slots.freed.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

impl Slots {
    /// Returns a connection (or, with `None`, its slot) to the pool.
    fn put_back(&self, client: Option<Client>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match client {
            Some(c) if !c.is_closed() => state.1.push(c),
            _ => state.0 -= 1,
        }
        self.freed.notify_one();
    }
}

/// Gives up each hold sent here; a connection whose unlock fails is closed,
/// which gives the lock up too.
fn give_up_holds(rx: Receiver<Held>, slots: &Slots) {
    for Held { mut client, key } in rx {
        let unlocked = client.query_one("SELECT pg_advisory_unlock($1)", &[&key]).map(|row| row.get::<_, bool>(0));
        match unlocked {
            Ok(true) => slots.put_back(Some(client)),
            // Not held any more (the session was reset) or unreachable: the
            // connection is not trusted again.
            Ok(false) | Err(_) => slots.put_back(None),
        }
    }
}

/// Sends the hold to the releasing thread when dropped.
struct Release {
    held: Option<Held>,
    to: Sender<Held>,
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            // If the thread is gone the connection closes here, which also gives the lock up.
            let _ = self.to.send(held);
        }
    }
}
