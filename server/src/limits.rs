//! Every bound the daemon enforces, by name. Values follow the reference
//! system's documented limits unless a comment says otherwise.

use std::time::Duration;

/// Default listen address (loopback only; there is no override).
pub const DEFAULT_BIND: &str = "127.0.0.1:7644";
/// Default daemon address for the client verbs.
pub const DEFAULT_ADDR: &str = "http://127.0.0.1:7644";
/// The daemon's version string, as `/v1/health` and the agent card report it.
pub const DAEMON_VERSION: &str = env!("CARGO_PKG_VERSION");

/// `POST /v1/commit` body cap (8 MiB).
pub const COMMIT_BODY_MAX: usize = 8 << 20;
/// Store reads behind one GET (a whole log page included).
pub const READ_DEADLINE: Duration = Duration::from_secs(10);
/// Store work of one REST commit.
pub const COMMIT_DEADLINE: Duration = Duration::from_secs(3);
/// Resolving one bearer credential.
pub const CREDENTIAL_DEADLINE: Duration = Duration::from_secs(3);
/// Reading a request's body, once its head has come.
pub const HTTP_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// A new connection that has not sent a complete request head this long
/// after it was accepted is closed: an idle socket cannot hold a slot.
pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection idle this long after its last reply (no request in
/// progress, none begun) is closed.
pub const KEEP_ALIVE_IDLE: Duration = Duration::from_secs(30);
/// A response write that makes no progress for this long closes the connection.
pub const HTTP_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Waiting for in-flight requests after SIGINT/SIGTERM.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(10);
/// Open client connections. A connection accepted when all are taken first
/// closes the oldest idle one (no request in progress); only when every
/// connection has a request in progress does it wait for one to end.
pub const CONNECTIONS_MAX: usize = 1024;
/// Request-body bytes read and held at once, across every connection (a
/// body is read only once its request is authenticated). A read that would
/// pass it waits at most `BODY_BUDGET_WAIT`, then the request is refused as
/// busy, in its surface's own shape.
pub const BODY_BYTES_IN_FLIGHT_MAX: usize = 64 << 20;
/// How long a body read waits, in all, for room under `BODY_BYTES_IN_FLIGHT_MAX`.
pub const BODY_BUDGET_WAIT: Duration = Duration::from_secs(2);
// Every body a route accepts fits under the budget on its own.
const _: () = assert!(
    COMMIT_BODY_MAX <= BODY_BYTES_IN_FLIGHT_MAX
        && world_protocol::mcp::MCP_BODY_MAX <= BODY_BYTES_IN_FLIGHT_MAX
        && world_protocol::a2a::A2A_BODY_MAX <= BODY_BYTES_IN_FLIGHT_MAX
);
/// Client verbs give up after this long.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest reply body a client verb reads.
pub const CLIENT_BODY_MAX: u64 = 64 << 20;
/// The most a client verb reads of a token file (a token is 64 hex digits and a newline).
pub const TOKEN_FILE_MAX: u64 = 4096;

/// Session time-to-live when `--ttl` is not given.
pub const SESSION_TTL_DEFAULT_S: u64 = 3600;
/// Longest session time-to-live accepted (one year).
pub const SESSION_TTL_MAX_S: u64 = 366 * 24 * 3600;
/// Most grants in one session.
pub const GRANTS_MAX: usize = 64;
/// Longest effect name or scope in a grant.
pub const GRANT_FIELD_MAX: usize = 256;
/// Most sessions `session list` shows.
pub const SESSIONS_LISTED_MAX: usize = 500;

/// One admin-socket request or response line.
pub const ADMIN_LINE_MAX: usize = 16 << 20;
/// How long an admin client waits for the daemon.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest `worldd verify` or `export` a running daemon answers, and the
/// longest a client waits between two of its lines (hashing reports progress
/// often; the other checks of a large store, and an export, may not).
pub const ADMIN_LONG_DEADLINE: Duration = Duration::from_secs(3600);
/// Progress lines of a daemon-side verify that may wait for the socket; more
/// are dropped (the next one says the same, later).
pub const ADMIN_PROGRESS_QUEUE: usize = 16;

/// Concurrent MCP host callbacks by default (the seed's limit), and the most a
/// `--host-callbacks` flag may set.
pub const HOST_CALLBACKS_DEFAULT: usize = 8;
pub const HOST_CALLBACKS_MAX: usize = 1024;

/// The most connection lanes `serve --workers` may ask for.
pub const WORKERS_MAX: u64 = 256;

/// Threads for blocking work (reads, files) at most, shared out among the
/// lanes (each lane's runtime has a pool of its own), at least
/// `LANE_BLOCKING_THREADS_MIN` a lane: tokio's one pool's bound before lanes.
pub const BLOCKING_THREADS_MAX: usize = 512;
pub const LANE_BLOCKING_THREADS_MIN: usize = 8;

/// The connection lanes when `--workers` is not given: one a core.
pub fn workers_default() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The store's page cache by default (`serve --cache-mib`), and the range the
/// flag accepts: bounded memory whatever the store's size.
pub const CACHE_MIB_DEFAULT: u64 = (world_store::CACHE_BYTES_DEFAULT >> 20) as u64;
pub const CACHE_MIB_MIN: u64 = 4;
pub const CACHE_MIB_MAX: u64 = 64 << 10;

/// Exit status of a daemon that stopped because its store's durability is in
/// doubt (a failed sync of the write-ahead log); restart it to recover.
pub const EXIT_STORE_FAILED: i32 = 75;

/// The most of an episode's calls one A2A `ListTasks` request reads: a page
/// ends early (with a token to go on) rather than read past it, and its
/// `totalSize` counts what the walk met (exact once the walk reached the
/// episode's first call).
pub const LIST_TASKS_SCAN_MAX: u64 = 4096;
/// The episode's calls `ListTasks` reads per store request.
pub const LIST_TASKS_SCAN_CHUNK: u64 = 256;

/// How often the daemon closes the approvals past their expiry (each pass
/// reads the open ones, and writes only when one is due: at most
/// `world_store::APPROVALS_EXPIRED_PER_PASS` of them).
pub const APPROVAL_SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// A2A streams (`SendStreamingMessage`, `SubscribeToTask`) open at once on
/// one daemon; the next is refused until one ends.
pub const A2A_STREAMS_MAX: usize = 64;
/// How often a stream looks for new output of the task it follows.
pub const A2A_STREAM_POLL: Duration = Duration::from_millis(250);
/// How often a stream reads its task's row while the task runs (at every
/// poll once its command has ended here, until the row says how it ended).
pub const A2A_STREAM_STATE_POLL: Duration = Duration::from_secs(1);
/// A stream that has sent nothing for this long sends a comment, well
/// within the 5 s a stock client waits for a byte.
pub const A2A_STREAM_KEEPALIVE: Duration = Duration::from_secs(2);
/// Events a stream holds for a client slow to read them; past it the
/// stream waits, and its output chunks skip what is no longer kept.
pub const A2A_STREAM_QUEUE: usize = 8;
