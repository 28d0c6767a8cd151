//! The PostgreSQL engine: one world shared by several `worldd` nodes.
//!
//! Each node has one writer thread that group-commits as the embedded engine
//! does, but a batch is one database transaction (READ COMMITTED) running the
//! same checks and derivations (`ops::apply`): a row lock on `world/selected`
//! orders appends across nodes, unique keys make task ids, intents and
//! sessions exactly-once, and a refused insert or a deadlock runs the batch
//! again. Reads are REPEATABLE READ snapshots on a bounded pool.
//!
//! Nodes hold leases (`nodes`). A batch renews its node's lease in its own
//! transaction and is refused if the lease has lapsed (the node was presumed
//! gone and its calls in flight resolved by another node); each node sweeps,
//! now and then, the calls in flight of nodes whose lease lapsed, as the
//! embedded engine's recovery does at open.

mod conn;
mod episode;
mod rows;
pub mod schema;
pub(crate) mod verify;
mod view;
mod writer;

pub use schema::{Migrated, SCHEMA_VERSION, SchemaError};
pub use view::PgSnapshot;

use crate::backend::{Done, Health, OnFatal, StoreStatus, WorldStore, WriterStats};
use crate::error::{OpenError, ReadError, WriteError};
use crate::export::stream::{FrameError, ImportError, read_frames};
use crate::ops::{Op, RecoveryReport};
use crate::view::{Reads, Snapshot};
use postgres::{Config, NoTls};
use std::str::FromStr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One invocation's journal, each intent with its outcome, in ordinal order
/// ($1: the invocation id): what a batch and a snapshot read alike.
pub(crate) const JOURNAL_OF: &str = "SELECT i.ordinal, i.intent, o.outcome FROM intents i
     LEFT JOIN outcomes o ON o.invocation_id = i.invocation_id AND o.ordinal = i.ordinal
     WHERE i.invocation_id = $1 ORDER BY i.ordinal";

/// The rows `JOURNAL_OF` read, decoded.
pub(crate) fn journal_items(
    invocation_id: &str,
    rows: &[postgres::Row],
) -> Result<Vec<crate::model::JournalItem>, crate::rows::Corruption> {
    rows.iter()
        .map(|row| {
            let ordinal = row.get::<_, i32>(0) as u32;
            let key = format!("{invocation_id}#{ordinal}");
            let outcome: Option<&[u8]> = row.get(2);
            Ok(crate::model::JournalItem {
                ordinal,
                intent: crate::rows::decode("intents", &key, row.get(1))?,
                outcome: outcome.map(|o| crate::rows::decode("outcomes", &key, o)).transpose()?,
            })
        })
        .collect()
}

/// Most connections a node keeps for episode holds (one per episode whose
/// effects it runs or waits to run at once).
pub const EPISODE_HOLDS_MAX: usize = 16;
/// Longest a call waits for another node to give up its episode.
pub const EPISODE_WAIT: Duration = Duration::from_secs(5);
/// Most pooled reader connections a node holds.
pub const POOL_MAX: u32 = 16;
/// Longest wait for a pooled connection before a read is refused.
pub const POOL_WAIT: Duration = Duration::from_secs(5);
/// Longest wait for a new connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest any one statement may run (a lock wait included).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Times a batch is run again after a conflict with another node.
pub const BATCH_RETRIES: u32 = 8;
/// How long a node's lease lasts past its last renewal.
pub const LEASE: Duration = Duration::from_secs(15);
/// How often an idle writer renews its lease.
pub const HEARTBEAT: Duration = Duration::from_secs(3);
/// How often a node looks for calls in flight of nodes whose lease lapsed.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(5);
/// How long a lapsed node's row stays once nothing of it is in flight.
pub const NODE_ROW_KEPT: Duration = Duration::from_secs(3600);
/// First and longest wait between two attempts to reach the database.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(50);
pub const RECONNECT_MAX: Duration = Duration::from_secs(2);

pub(crate) type Pooled = r2d2::PooledConnection<conn::Manager>;

/// The environment variable a password is read from when the URL has none.
pub const PASSWORD_ENV: &str = "PGPASSWORD";

/// Whether `spec` names a PostgreSQL store rather than a file.
pub fn is_url(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

/// How a PostgreSQL store is named wherever a name is shown or kept (messages,
/// logs, `/v1/health`, the workbench, an approval's decision object): the
/// scheme, user, hosts, ports and database read from the URL, and nothing
/// else. A password (in the user part or `?password=`) and every other
/// parameter are left out, and a text that does not parse is not echoed.
pub fn redacted(url: &str) -> String {
    let scheme = if url.starts_with("postgresql://") { "postgresql" } else { "postgres" };
    let parsed = if is_url(url) { Config::from_str(url).ok() } else { None };
    let Some(config) = parsed else {
        return format!("{scheme}://(a store address that does not parse; not shown)");
    };
    let user = config.get_user().map(|u| format!("{}@", plain(u, false))).unwrap_or_default();
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let name = match host {
                postgres::config::Host::Tcp(name) => plain(name, false),
                postgres::config::Host::Unix(path) => plain(&path.to_string_lossy(), true),
            };
            match ports.get(i).or(ports.first()) {
                Some(port) => format!("{name}:{port}"),
                None => name,
            }
        })
        .collect();
    let database = config.get_dbname().map(|d| format!("/{}", plain(d, false))).unwrap_or_default();
    format!("{scheme}://{user}{}{database}", hosts.join(","))
}

/// A user, host or database name as shown: itself when it is made of
/// letters, digits, `.`, `_` and `-` (and `/` in a socket directory, escaped),
/// else `…`. A URL whose query holds an `@` parses with the query read as the
/// user and host, password and all: such a name is never shown.
fn plain(name: &str, path: bool) -> String {
    let ordinary = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') || (path && c == '/');
    // A socket directory's slashes are escaped, as a URL's host spells them.
    if !name.is_empty() && name.chars().all(ordinary) { name.replace('/', "%2F") } else { "…".to_string() }
}

/// The connection settings every connection of the engine uses.
pub(crate) fn config(url: &str) -> Result<Config, OpenError> {
    let mut config = Config::from_str(url)
        .map_err(|e| OpenError::Database { url: redacted(url), detail: format!("not a PostgreSQL URL: {e}") })?;
    // A password kept out of the command line (and so out of process listings
    // and shell history), as libpq's clients read it.
    if config.get_password().is_none()
        && let Some(password) = std::env::var_os(PASSWORD_ENV)
    {
        config.password(password.as_encoded_bytes());
    }
    config
        .connect_timeout(CONNECT_TIMEOUT)
        .application_name("worldd")
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(10))
        .options(&format!(
            "-c statement_timeout={} -c idle_in_transaction_session_timeout={}",
            STATEMENT_TIMEOUT.as_millis(),
            4 * STATEMENT_TIMEOUT.as_millis()
        ));
    Ok(config)
}

/// Creates or upgrades the schema of the database at `url`.
pub fn init(url: &str) -> Result<Migrated, OpenError> {
    let fail = |detail: String| OpenError::Database { url: redacted(url), detail };
    let mut client = config(url)?.connect(NoTls).map_err(|e| fail(e.to_string()))?;
    schema::init(&mut client).map_err(|e| fail(e.to_string()))
}

/// One snapshot of the store at `url` for a one-shot reader (export, listings):
/// no node registers, nothing is written.
pub fn read_only(url: &str) -> Result<Snapshot, OpenError> {
    let fail = |detail: String| OpenError::Database { url: redacted(url), detail };
    let config = config(url)?;
    schema::check(&mut config.connect(NoTls).map_err(|e| fail(e.to_string()))?).map_err(|e| fail(e.to_string()))?;
    let pool = r2d2::Pool::builder()
        .max_size(1)
        .connection_timeout(POOL_WAIT)
        .thread_pool(Arc::new(scheduled_thread_pool::ScheduledThreadPool::new(1)))
        .build(conn::Manager { config })
        .map_err(|e| fail(e.to_string()))?;
    let conn = pool.get().map_err(|e| fail(e.to_string()))?;
    Ok(Box::new(PgSnapshot::begin(conn).map_err(|e| fail(e.to_string()))?))
}

/// The node id recorded on tasks an import brings in still started: no node
/// holds its lease, so the first node to open resolves them, as the embedded
/// engine's next open does.
const IMPORT_NODE: &str = "import";

/// Rebuilds a world in the empty PostgreSQL store at `url` from an export
/// stream, in one transaction: nothing is left behind if the stream does not
/// check out. Returns the number of records.
pub fn import(url: &str, input: &mut impl std::io::Read) -> Result<u64, ImportError> {
    let store = |e: &dyn std::fmt::Display| ImportError::Store(format!("{}: {e}", redacted(url)));
    let mut client = config(url).map_err(|e| store(&e))?.connect(NoTls).map_err(|e| store(&e))?;
    schema::check(&mut client).map_err(|e| store(&e))?;
    client.batch_execute("BEGIN").map_err(|e| store(&e))?;
    let occupied: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM heads) OR EXISTS (SELECT 1 FROM objects) OR EXISTS (SELECT 1 FROM log)",
            &[],
        )
        .map_err(|e| store(&e))?
        .get(0);
    if occupied {
        let _ = client.batch_execute("ROLLBACK");
        return Err(ImportError::Occupied(redacted(url)));
    }
    let mut conn = conn::Conn::new(client);
    let known = rows::Known::default();
    let mut rows = rows::PgRows::new(&mut conn, IMPORT_NODE, &known);
    let mut refused = None;
    let read = read_frames(input, |offset, record| {
        crate::ops::import(&mut rows, record).map_err(|source| {
            let detail = source.to_string();
            refused = Some(ImportError::Refused { offset, source });
            FrameError { offset, detail }
        })
    });
    let read = read.and_then(|count| {
        rows.flush().map_err(|e| FrameError { offset: count, detail: e.to_string() })?;
        Ok(count)
    });
    let client = conn.client();
    let count = match (read, refused) {
        (Ok(count), None) => count,
        (_, Some(e)) => {
            let _ = client.batch_execute("ROLLBACK");
            return Err(e);
        }
        (Err(e), None) => {
            let _ = client.batch_execute("ROLLBACK");
            return Err(e.into());
        }
    };
    client.batch_execute("COMMIT").map_err(|e| store(&e))?;
    Ok(count)
}

/// Shared between the writer thread and the store's handle.
#[derive(Default)]
pub(crate) struct Shared {
    pub health: Mutex<Option<Health>>,
    pub stats: WriterStats,
}

impl Shared {
    pub(crate) fn health(&self) -> Health {
        self.health.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or(Health::Serving)
    }

    pub(crate) fn set_health(&self, h: Health) {
        *self.health.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
    }
}

/// How to open a PostgreSQL store.
#[derive(Default)]
pub struct PgOptions {
    /// Told when this node may write no more (its lease lapsed).
    pub on_fatal: Option<OnFatal>,
    /// How long this node's lease lasts past each renewal (`None`: `LEASE`);
    /// the node renews it at least three times within it. Shorter, other
    /// nodes resolve a vanished node's calls sooner, at more renewals.
    pub lease: Option<Duration>,
}

/// A node's handle on a PostgreSQL store.
pub struct PgStore {
    url: String,
    node: String,
    pool: r2d2::Pool<conn::Manager>,
    shared: Arc<Shared>,
    writer: crate::writer::Writer,
    holds: episode::Holds,
}

impl PgStore {
    /// Connects, checks the schema, registers this node with a fresh lease and
    /// resolves the calls in flight of nodes whose lease lapsed. `now` stamps
    /// what that recovery records (Unix seconds).
    pub fn open(url: &str, now: u64, opts: PgOptions) -> Result<(PgStore, RecoveryReport), OpenError> {
        let fail = |detail: String| OpenError::Database { url: redacted(url), detail };
        let config = config(url)?;
        let mut client = config.connect(NoTls).map_err(|e| fail(e.to_string()))?;
        schema::check(&mut client).map_err(|e| fail(e.to_string()))?;
        let node = node_id();
        let lease = opts.lease.unwrap_or(LEASE);
        writer::register(&mut client, &node, lease).map_err(|e| fail(e.to_string()))?;
        let mut client = conn::Conn::new(client);
        let known = Arc::new(rows::Known::default());
        let report = writer::sweep(&mut client, &node, now, &known).map_err(|e| fail(e.to_string()))?;
        let pool = r2d2::Pool::builder()
            .max_size(POOL_MAX)
            .min_idle(Some(0))
            .connection_timeout(POOL_WAIT)
            .test_on_check_out(false)
            .thread_pool(Arc::new(scheduled_thread_pool::ScheduledThreadPool::new(1)))
            .build_unchecked(conn::Manager { config: config.clone() });
        let shared = Arc::new(Shared::default());
        let holds = episode::Holds::new(config.clone());
        let writer = writer::start(client, config, node.clone(), shared.clone(), known, opts.on_fatal, lease);
        Ok((PgStore { url: redacted(url), node, pool, shared, writer, holds }, report))
    }

    /// This node's id in the `nodes` table.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The store's address, without its password.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// A node id: the host's name and a random suffix, unique per process start.
fn node_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String =
        host.trim().chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.').take(64).collect();
    let mut suffix = [0u8; 8];
    // The suffix only tells apart two starts on one host; the clock and pid suffice if the RNG is unreadable.
    if std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut suffix)).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        suffix = (t ^ u64::from(std::process::id())).to_le_bytes();
    }
    format!("{}-{}", if host.is_empty() { "node" } else { &host }, hex::encode(suffix))
}

impl Reads for PgStore {
    fn snapshot(&self) -> Result<Snapshot, ReadError> {
        let conn =
            self.pool.get().map_err(|e| ReadError::Storage(format!("the store's database is unavailable: {e}")))?;
        Ok(Box::new(PgSnapshot::begin(conn)?))
    }
}

impl WorldStore for PgStore {
    fn submit(&self, op: Op, done: Done) {
        self.writer.submit(op, done);
    }

    fn health(&self) -> Health {
        self.shared.health()
    }

    fn hold_episode(&self, episode: &str) -> Result<crate::backend::EpisodeHold, WriteError> {
        self.holds.hold(episode)
    }

    fn glance(&self) -> Result<Snapshot, ReadError> {
        let conn =
            self.pool.get().map_err(|e| ReadError::Storage(format!("the store's database is unavailable: {e}")))?;
        Ok(Box::new(PgSnapshot::glance(conn)))
    }

    fn stats(&self) -> &WriterStats {
        &self.shared.stats
    }

    fn status(&self) -> StoreStatus {
        let s = &self.shared.stats;
        StoreStatus {
            engine: "postgres",
            footprint: None,
            checkpoints: 0,
            batches: s.batches.load(Ordering::Relaxed),
            requests: s.requests.load(Ordering::Relaxed),
            writer_work_ns: s.work_ns.load(Ordering::Relaxed),
            writer_sync_wait_ns: s.sync_wait_ns.load(Ordering::Relaxed),
            indexes: vec![],
        }
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.writer.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn a_store_s_name_never_holds_a_password_or_any_other_parameter() {
        let named = [
            ("postgres://u:s3cret@db.local:5433/world", "postgres://u@db.local:5433/world"),
            ("postgres://u@db.local/world?password=s3cret", "postgres://u@db.local:5432/world"),
            ("postgresql://u:s3cret@h1:1,h2:2/w?sslmode=disable&password=s3cret", "postgresql://u@h1:1,h2:2/w"),
            ("postgres://u:p%40ss%2Fs3cret@h/w", "postgres://u@h:5432/w"),
            ("postgres://u@%2Ftmp%2Fpg:5432/w", "postgres://u@%2Ftmp%2Fpg:5432/w"),
            ("postgres://h/db?options=a@b&password=s3cret", "postgres://…@…:5432"),
            ("postgres://us%20er:pw@h/d%3Fb", "postgres://…@h:5432/…"),
        ];
        for (url, name) in named {
            assert_eq!(redacted(url), name, "{url}");
        }
        for unparsable in ["host=h password=s3cret dbname=w", "postgres://u:s3cret@h:notaport/w", "s3cret"] {
            let name = redacted(unparsable);
            assert!(!name.contains("s3cret") && name.contains("not shown"), "{unparsable}: {name}");
        }
    }
}
