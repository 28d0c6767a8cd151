//! A node's writer thread on PostgreSQL: drains the queue into batches, runs
//! each batch as one transaction (again after a conflict with another node),
//! renews the node's lease, and sweeps the calls in flight of lapsed nodes.

use super::conn::Conn;
use super::rows::{Known, PgRows, RECOVERY_ROWS_MAX, placeholder_of};
use super::*;
use crate::error::WriteError;
use crate::model::Committed;
use crate::ops::{Reply, apply, recover};
use crate::writer::{Next, Queued, Request, Writer, next_batch};
use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};
use std::sync::mpsc::Receiver;
use std::time::Instant;

/// Registers `node` with a fresh lease of `lease`.
pub(crate) fn register(client: &mut Client, node: &str, lease: Duration) -> Result<(), postgres::Error> {
    client.execute(
        "INSERT INTO nodes (node_id, started_at, lease_until) VALUES ($1, now(), now() + $2 * interval '1 second')",
        &[&node, &(lease.as_secs_f64())],
    )?;
    Ok(())
}

/// Resolves the calls in flight of nodes whose lease lapsed, in one
/// transaction that first locks those nodes' rows (so that none of them can
/// renew and write meanwhile).
pub(crate) fn sweep(conn: &mut Conn, node: &str, now: u64, known: &Known) -> Result<RecoveryReport, String> {
    sweep_lapsed(conn, node, now, known, None).map(|(report, _)| report)
}

/// `sweep`, given the lapsed nodes this node's last sweep resolved (`None`:
/// none yet). A lapsed node writes no more, so once its finished calls'
/// intents are resolved none appear again: only a sweep that meets a newly
/// lapsed node searches the whole journal for them; the others look at the
/// started tasks alone (an index). Returns the lapsed nodes it resolved.
fn sweep_lapsed(
    conn: &mut Conn,
    node: &str,
    now: u64,
    known: &Known,
    swept: Option<&[String]>,
) -> Result<(RecoveryReport, Vec<String>), String> {
    conn.client().batch_execute("BEGIN").map_err(|e| e.to_string())?;
    let result = (|| {
        let lapsed: Vec<String> = conn
            .query("SELECT node_id FROM nodes WHERE lease_until < now() ORDER BY node_id FOR UPDATE", &[])
            .map_err(|e| e.to_string())?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut rows = PgRows::new(conn, node, known);
        rows.finished_calls = swept.is_none_or(|swept| lapsed.iter().any(|n| !swept.contains(n)));
        let report = recover(&mut rows, now).map_err(|e| e.to_string())?;
        rows.flush().map_err(|e| e.to_string())?;
        // Nodes long gone with nothing left in flight: their rows go.
        conn.query(
            "DELETE FROM nodes n WHERE lease_until < now() - $1 * interval '1 second'
             AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.node = n.node_id AND t.state = 'started')",
            &[(&NODE_ROW_KEPT.as_secs_f64(), postgres::types::Type::FLOAT8)],
        )
        .map_err(|e| e.to_string())?;
        conn.client().batch_execute("COMMIT").map_err(|e| e.to_string())?;
        // A full page may have left some behind: search all again next time.
        let whole = report.indeterminate_effects.len() < RECOVERY_ROWS_MAX as usize
            && report.tasks.len() < RECOVERY_ROWS_MAX as usize;
        Ok((report, if whole { lapsed } else { Vec::new() }))
    })();
    if result.is_err() {
        let _ = conn.client().batch_execute("ROLLBACK");
    }
    result
}

/// Starts a node's writer thread.
pub(crate) fn start(
    client: Conn,
    config: Config,
    node: String,
    shared: Arc<Shared>,
    known: Arc<Known>,
    on_fatal: Option<OnFatal>,
    lease: Duration,
) -> Writer {
    let mut run = Loop {
        lease,
        // Renewed often enough that a slow renewal or two does not lose it.
        heartbeat: HEARTBEAT.min(lease / 3),
        client: Some(client),
        config,
        node,
        shared,
        known,
        on_fatal,
        next_connect: Instant::now(),
        backoff: RECONNECT_FIRST,
        last_renewal: Instant::now(),
        last_sweep: Instant::now(),
        swept: None,
        fenced: None,
    };
    Writer::spawn("world-store-pg-writer", move |rx| run.run(rx))
}

/// Why a batch's transaction did not commit.
enum Abort {
    /// Another node got there first (a unique key, a deadlock): run it again.
    Conflict(String),
    /// The connection broke before COMMIT was sent: nothing was written.
    Lost(String),
    /// The connection broke during COMMIT: the outcome is unknown.
    LostInCommit(String),
    /// This node's lease lapsed: it may write no more.
    Fenced,
    /// Anything else the database refused.
    Failed(String),
}

fn classify(e: &postgres::Error) -> Abort {
    let conflict = [SqlState::UNIQUE_VIOLATION, SqlState::T_R_DEADLOCK_DETECTED, SqlState::T_R_SERIALIZATION_FAILURE];
    match e.code() {
        Some(code) if conflict.contains(code) => Abort::Conflict(e.to_string()),
        Some(code) if *code == SqlState::ADMIN_SHUTDOWN || *code == SqlState::CRASH_SHUTDOWN => {
            Abort::Lost(e.to_string())
        }
        Some(_) => Abort::Failed(e.to_string()),
        None => Abort::Lost(e.to_string()),
    }
}

struct Loop {
    /// `None` while the database is unreachable.
    client: Option<Conn>,
    config: Config,
    node: String,
    shared: Arc<Shared>,
    known: Arc<Known>,
    on_fatal: Option<OnFatal>,
    /// How long the lease lasts past each renewal, and how often it is renewed while idle.
    lease: Duration,
    heartbeat: Duration,
    next_connect: Instant,
    backoff: Duration,
    last_renewal: Instant,
    last_sweep: Instant,
    /// The lapsed nodes the last periodic sweep resolved.
    swept: Option<Vec<String>>,
    /// Set once the lease lapsed: every later request is refused with it.
    fenced: Option<String>,
}

type Results = Vec<Result<Reply, WriteError>>;

impl Loop {
    fn run(&mut self, rx: Receiver<Queued>) {
        loop {
            let next = next_batch(&rx, self.heartbeat);
            let busy = self.shared.stats.busy();
            match next {
                Next::Batch(batch) => self.answer(batch),
                Next::Idle => {}
                Next::Closed => break,
            }
            self.tick();
            busy.end(&self.shared.stats);
        }
        self.leave();
    }

    /// Runs a batch and answers each of its callers.
    fn answer(&mut self, batch: Vec<Request>) {
        let (ops, dones): (Vec<Op>, Vec<_>) = batch.into_iter().map(|r| (r.op, r.done)).unzip();
        self.shared.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.shared.stats.requests.fetch_add(ops.len() as u64, Ordering::Relaxed);
        self.shared.stats.batch_requests.observe(ops.len() as u64);
        let results = self.batch(ops);
        debug_assert_eq!(results.len(), dones.len());
        for (done, r) in dones.into_iter().zip(results) {
            done(r);
        }
    }

    /// Renews the lease and sweeps lapsed nodes when due.
    fn tick(&mut self) {
        if self.fenced.is_some() {
            return;
        }
        if self.last_renewal.elapsed() >= self.heartbeat {
            let _ = self.batch(vec![]);
        }
        let (node, known, swept) = (self.node.clone(), self.known.clone(), self.swept.take());
        if self.last_sweep.elapsed() >= SWEEP_INTERVAL
            && let Some(client) = self.connected()
        {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            if let Ok((_, lapsed)) = sweep_lapsed(client, &node, now, &known, swept.as_deref()) {
                self.swept = Some(lapsed);
                self.last_sweep = Instant::now();
                return;
            }
        }
        self.swept = swept;
    }

    /// A clean stop: the lease is given up at once, so that other nodes
    /// resolve at their next sweep whatever this node leaves in flight.
    fn leave(&mut self) {
        let node = self.node.clone();
        if self.fenced.is_none()
            && let Some(client) = self.connected()
        {
            let give_up = "UPDATE nodes SET lease_until = now() - interval '1 second' WHERE node_id = $1";
            let _ = client.client().execute(give_up, &[&node]);
        }
    }

    /// The connection, reconnecting (with backoff between attempts) if it broke.
    fn connected(&mut self) -> Option<&mut Conn> {
        if self.client.as_mut().is_some_and(|c| c.client().is_closed()) {
            self.client = None;
        }
        if self.client.is_none() && Instant::now() >= self.next_connect {
            match self.config.connect(NoTls) {
                Ok(c) => {
                    self.client = Some(Conn::new(c));
                    self.backoff = RECONNECT_FIRST;
                }
                Err(e) => {
                    self.unavailable(e.to_string());
                }
            }
        }
        self.client.as_mut()
    }

    fn unavailable(&mut self, detail: String) {
        self.client = None;
        self.next_connect = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(RECONNECT_MAX);
        self.shared.set_health(Health::Degraded(format!("the store's database is unreachable: {detail}")));
    }

    /// Runs a batch (an empty one only renews the lease), again after conflicts.
    fn batch(&mut self, ops: Vec<Op>) -> Results {
        let started = Instant::now();
        let n = ops.len();
        let all = |e: WriteError| (0..n).map(|_| Err(e.clone())).collect::<Results>();
        if let Some(reason) = &self.fenced {
            return all(WriteError::WriterStopped(reason.clone()));
        }
        let mut last = String::new();
        for attempt in 0..=BATCH_RETRIES {
            let (node, known, lease) = (self.node.clone(), self.known.clone(), self.lease);
            let Some(client) = self.connected() else {
                let health = self.shared.health();
                let why = match health {
                    Health::Degraded(r) | Health::Failed(r) => r,
                    Health::Serving => "the store's database is unreachable".into(),
                };
                return all(WriteError::Unavailable(why));
            };
            match transaction(client, &node, lease, &known, ops.clone()) {
                Ok((results, commit)) => {
                    self.last_renewal = Instant::now();
                    self.shared.stats.sync_wait_ns.fetch_add(commit.as_nanos() as u64, Ordering::Relaxed);
                    // An empty batch only renews the lease: it is no write batch.
                    if n > 0 {
                        self.shared.stats.log_sync_seconds.observe_duration(commit);
                        self.shared.stats.commit_seconds.observe_duration(started.elapsed());
                    }
                    if self.shared.health() != Health::Serving {
                        self.shared.set_health(Health::Serving);
                    }
                    return results;
                }
                Err(Abort::Conflict(e)) => {
                    last = e;
                    // Let the other node's transaction finish first.
                    std::thread::sleep(Duration::from_millis(1 << attempt.min(6)));
                }
                // Nothing of it was written: run it again on a new connection
                // (at once; an unreachable database answers `Unavailable`).
                Err(Abort::Lost(e)) => {
                    self.client = None;
                    last = e;
                }
                Err(Abort::LostInCommit(e)) => {
                    self.unavailable(e.clone());
                    return all(WriteError::Unconfirmed(e));
                }
                Err(Abort::Fenced) => {
                    let reason = format!(
                        "this node's lease ({}) lapsed and other nodes resolved its calls in flight; restart it",
                        self.node
                    );
                    self.fenced = Some(reason.clone());
                    self.shared.set_health(Health::Failed(reason.clone()));
                    if let Some(f) = &self.on_fatal {
                        f(&reason);
                    }
                    return all(WriteError::WriterStopped(reason));
                }
                Err(Abort::Failed(e)) => return all(WriteError::Storage(e)),
            }
        }
        all(WriteError::Unavailable(format!("the batch kept conflicting with other nodes' writes: {last}")))
    }
}

/// One batch as one transaction: renew the lease for `lease` (refused if it lapsed), apply
/// every request, commit. The lease is renewed inside the transaction, so a
/// node that another node is sweeping waits for the sweep and then finds its
/// lease gone. Also returns how long the COMMIT took: the round trip in
/// which the server flushes its log, this engine's durability point.
fn transaction(
    conn: &mut Conn,
    node: &str,
    lease: Duration,
    known: &Known,
    ops: Vec<Op>,
) -> Result<(Results, Duration), Abort> {
    // One round trip for both; the node id is this process's own ([A-Za-z0-9.-]).
    let begin = format!(
        "BEGIN; UPDATE nodes SET lease_until = now() + interval '{} milliseconds' \
         WHERE node_id = '{node}' AND lease_until >= now() RETURNING 1",
        lease.as_millis()
    );
    let renewed = conn.client().simple_query(&begin).map_err(|e| classify(&e))?;
    if !renewed.iter().any(|m| matches!(m, postgres::SimpleQueryMessage::Row(_))) {
        let _ = conn.client().batch_execute("ROLLBACK");
        return Err(Abort::Fenced);
    }
    let mut rows = PgRows::new(conn, node, known);
    let mut results = match apply_batch(&mut rows, ops) {
        Ok(results) => results,
        Err(e) => {
            let detail = match e {
                WriteError::Storage(detail) => detail,
                other => other.to_string(),
            };
            let abort = rows.failure.take().map(|e| classify(&e)).unwrap_or(Abort::Failed(detail));
            let _ = conn.client().batch_execute("ROLLBACK");
            return Err(abort);
        }
    };
    let chained = std::mem::take(&mut rows.chained);
    results.iter_mut().for_each(|r| answer_placeholders(r, &chained));
    let (inserted, worlds) = (std::mem::take(&mut rows.inserted), std::mem::take(&mut rows.worlds));
    let committing = Instant::now();
    match conn.client().batch_execute("COMMIT") {
        Ok(()) => {
            let commit = committing.elapsed();
            known.add_objects(inserted);
            worlds.iter().for_each(|w| known.add_world(w));
            Ok((results, commit))
        }
        Err(e) => Err(match classify(&e) {
            Abort::Lost(d) => Abort::LostInCommit(d),
            other => other,
        }),
    }
}

/// Applies every request of a batch, then chains its invocations onto the
/// head, locked only then. An engine error ends the batch.
fn apply_batch(rows: &mut PgRows, ops: Vec<Op>) -> Result<Results, WriteError> {
    rows.read_registry_entries(&registry_entries_checked(&ops))?;
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        let r = apply(rows, op);
        if let Err(WriteError::Storage(detail)) = &r {
            return Err(WriteError::Storage(detail.clone()));
        }
        results.push(r);
    }
    rows.flush()?;
    Ok(results)
}

/// The registry entries the commits of `ops` check, each once.
fn registry_entries_checked(ops: &[Op]) -> Vec<(&str, &str)> {
    let mut wanted: Vec<(&str, &str)> = vec![];
    let flat = ops.iter().flat_map(|op| match op {
        Op::Sequence(inner) => inner.as_slice(),
        op => std::slice::from_ref(op),
    });
    for op in flat {
        if let Op::CommitInvocation(c) = op {
            let pair = (c.registry.as_str(), c.transition_id.as_str());
            if !wanted.contains(&pair) {
                wanted.push(pair);
            }
        }
    }
    wanted
}

/// Replaces a deferred invocation's placeholder answer (in a sequence too)
/// with what `flush` chained.
fn answer_placeholders(result: &mut Result<Reply, WriteError>, chained: &[Committed]) {
    match result {
        Ok(Reply::Committed(c)) => {
            if let Some(n) = placeholder_of(c) {
                debug_assert!(n < chained.len(), "every deferred invocation was chained");
                *result = chained
                    .get(n)
                    .cloned()
                    .map(Reply::Committed)
                    .ok_or_else(|| WriteError::Storage(format!("deferred invocation {n} was not chained")));
            }
        }
        Ok(Reply::Sequence(inner)) => inner.iter_mut().for_each(|r| answer_placeholders(r, chained)),
        _ => {}
    }
}
