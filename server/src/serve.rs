//! `worldd serve`: startup (the store, confinement, the allowed commands,
//! the admin socket), the accept loop that hands connections to the lanes
//! (`lanes`), graceful shutdown.

use crate::admin;
use crate::approvals::state;
use crate::coordinator::Coordinator;
use crate::daemon::Daemon;
use crate::effects::worktree::Worktrees;
use crate::http;
use crate::limits::*;
use crate::operator::PrivateReads;
use crate::runtime::Runtimes;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

mod conns;
mod lanes;

#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub store: crate::stores::StoreSpec,
    /// This node's own files sit beside this path (`<local>.admin.sock`,
    /// `<local>.scratch`); with the embedded engine it is the store file.
    pub local: PathBuf,
    pub bind: String,
    pub workspace_root: Option<PathBuf>,
    /// `NAME` or `NAME=PATH`: the commands `workspace-exec` may run.
    pub exec_allow: Vec<String>,
    /// Concurrent MCP host callbacks (the seed's limit is 8).
    pub host_callbacks: usize,
    /// The store's page cache.
    pub cache_bytes: usize,
    /// Count calls, effects and runs, and serve `/metrics` (off: `--no-metrics`).
    pub metrics: bool,
    /// How runs for agents are confined.
    pub confine: crate::confine::Options,
    /// What each episode's worktree may hold.
    pub worktree_quota_bytes: u64,
    /// How long a command run as a task may take, and how many run at once.
    pub task_limits: crate::coordinator::tasks::TaskLimits,
    /// Print ready-to-paste agent connections on stdout once listening
    /// (`quickstart` prints its own, with its token file, before serving).
    pub print_connections: bool,
    /// How long an approval waits for a person, and an approved effect to run.
    pub approval_ttl_s: u64,
    /// Reads need a credential: a session's, or the operator token written at start.
    pub private_reads: bool,
    /// Open connections at most (`CONNECTIONS_MAX`; smaller in tests).
    pub connections_max: usize,
    /// The connection lanes (`--workers`; `limits::workers_default`).
    pub workers: usize,
}

/// The key that seals approval questions, made once per store (every node
/// of a shared store reads the same one).
async fn approval_key(store: &dyn world_store::WorldStore) -> Result<[u8; state::KEY_BYTES], String> {
    let op = world_store::Op::EnsureSecret { name: state::KEY_NAME.into(), value: state::new_key().to_vec() };
    match crate::writes::write(store, op).await {
        Ok(world_store::Reply::Secret(bytes)) => {
            state::key_of(&bytes).ok_or_else(|| format!("the store's {} secret is not a key", state::KEY_NAME))
        }
        Ok(other) => Err(format!("unexpected reply {other:?}")),
        Err(e) => Err(format!("the store's {} secret: {e}", state::KEY_NAME)),
    }
}

/// A startup failure: the stage it happened at and why. Exit code 2.
#[derive(Debug)]
pub struct StartupError {
    pub stage: &'static str,
    pub detail: String,
}

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "daemon startup failed at {}: {}", self.stage, self.detail)
    }
}

fn fail(stage: &'static str, detail: impl std::fmt::Display) -> StartupError {
    StartupError { stage, detail: detail.to_string() }
}

/// The file beside a store (or a node's local path) where its daemon wrote
/// the address it listens on.
pub fn addr_path(local: &Path) -> PathBuf {
    let mut s = local.as_os_str().to_owned();
    s.push(".addr");
    PathBuf::from(s)
}

/// Records the address a daemon listens on beside its store (mode 0600, never through a link).
pub fn write_addr(local: &Path, addr: &std::net::SocketAddr) -> Result<PathBuf, String> {
    let file = addr_path(local);
    crate::stores::write_private(&file, |f| {
        use std::io::Write;
        writeln!(f, "http://{addr}").map_err(|e| e.to_string())
    })?;
    Ok(file)
}

/// Accepts only loopback binds: `127.0.0.1`, `::1` (bracketed) or `localhost`.
pub fn loopback_addr(bind: &str) -> Result<SocketAddr, String> {
    let (host, port) = bind.rsplit_once(':').ok_or_else(|| format!("bind address {bind:?} must be host:port"))?;
    let port: u16 = port.parse().map_err(|_| format!("bind port {port:?} is not a port number"))?;
    let ip: std::net::IpAddr = match host {
        "localhost" => [127, 0, 0, 1].into(),
        h => h
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| format!("bind host {h:?} is not loopback (use 127.0.0.1, ::1 or localhost)"))?,
    };
    if !ip.is_loopback() {
        return Err(format!("bind host {host:?} is not loopback; World serves only this machine"));
    }
    Ok(SocketAddr::new(ip, port))
}

/// The store cannot vouch for its durability any more (a failed sync): stop
/// at once, non-zero, so that a supervisor restarts the daemon and recovery
/// brings back every acknowledged call from the write-ahead log.
fn store_failed(reason: &str) {
    note!("worldd: stopping: {reason}");
    std::process::exit(EXIT_STORE_FAILED);
}

pub async fn serve(opts: ServeOptions) -> Result<(), StartupError> {
    let addr = loopback_addr(&opts.bind).map_err(|e| fail("bind-policy", e))?;
    if let Some(root) = &opts.workspace_root
        && !root.is_dir()
    {
        return Err(fail("config", format!("--workspace-root {} is not a directory", root.display())));
    }
    let mut worktrees = worktrees(&opts).map_err(|e| fail("config", e))?;
    // An engine's open may block (a database client runs its own runtime).
    let (spec, cache_bytes) = (opts.store.clone(), opts.cache_bytes);
    let upgrading = spec.pending_upgrade();
    if let Some(found) = upgrading {
        tracing::warn!(
            from = found,
            to = world_store::tables::STORE_FORMAT,
            "upgrading the store in place before serving: one transaction, which takes a while on a large store"
        );
    }
    let opening = std::time::Instant::now();
    let (opened, head) = tokio::task::spawn_blocking(move || {
        let opened = spec.open(crate::clock::now(), Some(Box::new(store_failed)), Some(cache_bytes))?;
        let head = opened.store.snapshot().and_then(|s| s.selected_head()).map_err(|e| e.to_string());
        Ok::<_, world_store::OpenError>((opened, head))
    })
    .await
    .map_err(|e| fail("store-open", e))?
    .map_err(|e| fail("store-open", e))?;
    let head = head.map_err(|e| fail("store-open", e))?;
    if upgrading.is_some() {
        tracing::warn!(seconds = opening.elapsed().as_secs_f64(), "the store was upgraded");
    }
    let (store, recovery) = (opened.store, opened.recovery);
    if opened.replayed_frames > 0 || opened.torn_bytes > 0 {
        tracing::warn!(
            frames = opened.replayed_frames,
            torn_bytes = opened.torn_bytes,
            "recovery: replayed the write-ahead log after an unclean stop (a torn tail was never acknowledged)"
        );
    }
    for effect in &recovery.indeterminate_effects {
        tracing::warn!(effect, "recovery: effect intent had no outcome; recorded indeterminate (its debit stands)");
    }
    for (task, state) in &recovery.tasks {
        tracing::warn!(task, state = state.as_str(), "recovery: task was in flight at the last stop");
    }
    let approval_key = approval_key(store.as_ref()).await.map_err(|e| fail("store-open", e))?;
    let db_path = std::fs::canonicalize(&opts.local).unwrap_or(opts.local.clone());
    // Made once the store's lock is held, so a second daemon never replaces the first one's token.
    let private_reads = opts.private_reads.then(|| PrivateReads::issue(&db_path)).transpose();
    let private_reads = private_reads.map_err(|e| fail("operator-token", e))?;
    let scratch = scratch_dir(&db_path).map_err(|e| fail("config", e))?;
    let metrics = Arc::new(if opts.metrics {
        crate::metrics::Metrics::new(DAEMON_VERSION, opts.store.engine())
    } else {
        crate::metrics::Metrics::off(DAEMON_VERSION, opts.store.engine())
    });
    let confinement = start_confinement(&opts, &db_path, worktrees.root.as_deref(), &scratch, metrics.clone()).await?;
    worktrees.confinement = Some(confinement.clone());
    let interpreter = crate::registry::builtin_interpreter();
    let host_callbacks = opts.host_callbacks.clamp(1, HOST_CALLBACKS_MAX);
    let daemon = Arc::new(Daemon {
        store,
        store_label: opts.store.label(),
        db_path,
        interpreter_ref: Some(interpreter.hash),
        interpreter_version: String::from_utf8_lossy(&interpreter.payload).into_owned(),
        coordinator: Coordinator::default(),
        runtimes: Runtimes::new(confinement),
        worktrees,
        host_callbacks: Arc::new(Semaphore::new(host_callbacks)),
        host_callbacks_max: host_callbacks,
        request_bodies: Arc::new(Semaphore::new(BODY_BYTES_IN_FLIGHT_MAX)),
        a2a_streams: Arc::new(Semaphore::new(crate::limits::A2A_STREAMS_MAX)),
        tools: Default::default(),
        metrics,
        approval_ttl_s: opts.approval_ttl_s,
        task_limits: opts.task_limits,
        approval_key,
        private_reads,
    });
    crate::approvals::sweep::at_start(&daemon).await;
    let sweeping = crate::approvals::sweep::every_interval(Arc::downgrade(&daemon));
    let admin = admin::listen(daemon.clone()).map_err(|e| fail("admin-socket", e))?;
    let listener = TcpListener::bind(addr).await.map_err(|e| fail("listen", format!("{addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| fail("listen", e))?;
    let lanes = lanes::Lanes::start(opts.workers).map_err(|e| fail("runtime", format!("the connection lanes: {e}")))?;
    // The client verbs read it to find this daemon without being told (`cli::locate`).
    let addr_file = match write_addr(&daemon.db_path, &local) {
        Ok(file) => Some(file),
        Err(e) => {
            note!("worldd: warning: the address is not recorded ({e}): the client verbs need --addr");
            None
        }
    };
    // Handlers go in before the listening line: a signal sent as soon as it appears is a graceful stop.
    let shutdown = shutdown_signal();
    if let Some(private) = &daemon.private_reads {
        note!(
            "worldd: reads are private: a session reads its own episode; the operator token is in {} (mode 0600)",
            private.token_file.display()
        );
    }
    note!(
        "worldd listening on http://{local} (store {}, head {})",
        daemon.store_label,
        head.map(|h| h.to_string()).unwrap_or_else(|| "none".into())
    );
    if opts.print_connections {
        let token = std::path::Path::new(SERVE_TOKEN_FILE);
        say!("MCP:  http://{local}/mcp/   A2A:  http://{local}/a2a/");
        say!("{}", connection_snippets(&format!("http://{local}/mcp/"), token));
        let store = match &opts.store {
            crate::stores::StoreSpec::Embedded(_) => format!("--db {}", daemon.db_path.display()),
            crate::stores::StoreSpec::Postgres(_) => format!("--store {}", daemon.store_label),
        };
        // A command that runs as printed; the episode and grants are an
        // example the operator adjusts.
        say!(
            "A session for {SERVE_TOKEN_FILE} (pick its episode and grants; see worldd session mint --help):\n  \
             worldd session mint {store} --episode agent --grant Workspace.Read=worktree:100 \
             --grant Workspace.Write=worktree:100 --out {SERVE_TOKEN_FILE}"
        );
    }
    accept_loop(listener, daemon.clone(), shutdown, opts.connections_max, &lanes).await;
    // What the connections left running ends with their lanes, before the store is let go.
    drop(lanes);
    sweeping.abort();
    admin.close();
    if let Some(file) = addr_file {
        let _ = std::fs::remove_file(file);
    }
    // Dropping the last handle drains the writer queue and releases the lock.
    drop(daemon);
    Ok(())
}

/// Checks the kernel can confine runs (or notes loudly that it will not).
async fn start_confinement(
    opts: &ServeOptions,
    db_path: &std::path::Path,
    workspace: Option<&std::path::Path>,
    scratch: &std::path::Path,
    metrics: Arc<crate::metrics::Metrics>,
) -> Result<Arc<crate::confine::Confinement>, StartupError> {
    let options = opts.confine.clone();
    let store_dir = db_path.parent().unwrap_or(std::path::Path::new("/"));
    for dir in &options.widening.read_only {
        let canon =
            std::fs::canonicalize(dir).map_err(|e| fail("config", format!("--confine-read {}: {e}", dir.display())))?;
        if store_dir.starts_with(&canon) || workspace.is_some_and(|w| w.starts_with(&canon) || canon.starts_with(w)) {
            return Err(fail(
                "config",
                format!("--confine-read {} would show runs the store or the worktrees", dir.display()),
            ));
        }
    }
    let confinement = crate::confine::Confinement::start(options, scratch, metrics).await.map_err(|e| {
        fail("confinement", format!("{e}; pass --unconfined to run transitions and exec commands without confinement"))
    })?;
    if !confinement.is_confined() {
        tracing::warn!(
            "confinement is OFF (--unconfined): transitions and exec commands can reach everything this user can"
        );
    }
    Ok(confinement)
}

/// Exec scratch directories live beside the store, never inside a worktree.
fn scratch_dir(db: &std::path::Path) -> Result<PathBuf, String> {
    let mut s = db.as_os_str().to_owned();
    s.push(".scratch");
    let dir = PathBuf::from(s);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("scratch directory {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The worktree handlers' configuration. The store must not live inside the
/// workspace root, or agents could edit it through their tools.
fn worktrees(opts: &ServeOptions) -> Result<Worktrees, String> {
    let interpreter = crate::registry::builtin_interpreter();
    let mut w = Worktrees {
        root: None,
        exec_allow: Default::default(),
        tool: interpreter.hash.to_string(),
        confinement: None,
        quotas: Arc::new(crate::effects::quota::Quotas::new(opts.worktree_quota_bytes)),
    };
    if let Some(root) = &opts.workspace_root {
        let root = std::fs::canonicalize(root).map_err(|e| format!("--workspace-root {}: {e}", root.display()))?;
        let db_dir = opts.local.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        let db_dir = std::fs::canonicalize(db_dir).map_err(|e| format!("store directory {}: {e}", db_dir.display()))?;
        if db_dir.starts_with(&root) {
            return Err(format!(
                "the store {} must not be inside --workspace-root {}",
                opts.local.display(),
                root.display()
            ));
        }
        w.root = Some(root);
        if let Some(open) = w.root_open_to_others() {
            note!("worldd: warning: {open}");
        }
    }
    let visible = crate::confine::commands::Visible::of(&opts.confine);
    let search = std::env::var_os("PATH");
    for item in &opts.exec_allow {
        let allowed = crate::confine::commands::resolve(item, search.as_deref(), &visible)?;
        if let Some(note) = &allowed.note {
            note!("worldd: {note}");
        }
        w.exec_allow.insert(allowed.name, allowed.program);
    }
    Ok(w)
}

async fn accept_loop(
    listener: TcpListener,
    daemon: Arc<Daemon>,
    shutdown: impl std::future::Future<Output = ()>,
    connections_max: usize,
    lanes: &lanes::Lanes,
) {
    let app = http::router(daemon);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let conns = conns::Conns::new(connections_max);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Accepted first, so that at the cap an idle connection makes room for it.
        let slot = tokio::select! {
            slot = conns.admit() => Arc::new(slot),
            _ = &mut shutdown => break,
        };
        // Without NODELAY an SSE reply waits ~40 ms on delayed ACK.
        let _ = stream.set_nodelay(true);
        // The socket moves to its lane's reactor.
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accepted connection could not be handed to a lane");
                continue;
            }
        };
        let (app, watcher) = (app.clone(), graceful.watcher());
        lanes.serve(async move {
            let stream = match tokio::net::TcpStream::from_std(stream) {
                Ok(s) => s,
                Err(e) => return tracing::warn!(error = %e, "accepted connection could not join its lane"),
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                // The connection's slot bounds the wait for a head (`conns`): hyper's own timer stays off.
                .header_read_timeout(None)
                .serve_connection(
                    TokioIo::new(conns::Flushes::new(WriteTimeout::new(stream, HTTP_WRITE_TIMEOUT), slot.clone())),
                    tracked(app, slot.clone()),
                );
            let conn = watcher.watch(conn);
            tokio::select! {
                _ = conn => {}
                _ = slot.idled_out() => {}
            }
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(SHUTDOWN_DRAIN) => tracing::warn!("shutdown drain exceeded {} s; closing remaining connections", SHUTDOWN_DRAIN.as_secs()),
    }
}

/// The router, serving one connection: each request is in progress on its
/// slot from its head until its reply's body is done.
fn tracked(
    app: axum::Router,
    slot: Arc<conns::Slot>,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = hyper::Response<conns::Replying>,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<hyper::Response<conns::Replying>, std::convert::Infallible>> + Send,
> {
    hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let busy = slot.busy();
        let reply = tower::ServiceExt::oneshot(app.clone(), req);
        async move {
            let resp = reply.await?;
            Ok(resp.map(|body| conns::Replying::new(body, busy)))
        }
    })
}

/// Resolves at the first SIGINT or SIGTERM. Both handlers are installed when this
/// is called, not when the future is first polled.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let handlers = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
    async move {
        match handlers {
            (Ok(mut int), Ok(mut term)) => tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            },
            _ => std::future::pending().await,
        }
    }
}

/// A connection whose writes give up after `HTTP_WRITE_TIMEOUT` without
/// progress: a client that stops reading cannot hold its slot for ever.
struct WriteTimeout<T> {
    inner: T,
    limit: std::time::Duration,
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<T> WriteTimeout<T> {
    fn new(inner: T, limit: std::time::Duration) -> WriteTimeout<T> {
        WriteTimeout { inner, limit, stalled: None }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteTimeout<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> WriteTimeout<T> {
    /// Passes a ready result through (and disarms the timer); on `Pending`,
    /// arms the timer and fails the write once it fires.
    fn watch<R>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        r: std::task::Poll<std::io::Result<R>>,
    ) -> std::task::Poll<std::io::Result<R>> {
        use std::task::Poll;
        match r {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let limit = self.limit;
                let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the client stopped reading (write timeout)",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteTimeout<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, r)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Ready-to-paste ways to point an MCP host at `mcp_url`, the token being in `token`.
/// The token file `serve`'s connection lines name, minted by the command it prints.
pub const SERVE_TOKEN_FILE: &str = "agent.token";

pub fn connection_snippets(mcp_url: &str, token: &std::path::Path) -> String {
    let token = token.display();
    format!(
        r#"Connect an MCP host (the token is in {token}):
  any client's mcpServers configuration (WORLD_TOKEN=$(cat {token}); paste the token itself where variables are not expanded):
    {{"mcpServers": {{"world": {{"type": "http", "url": "{mcp_url}", "headers": {{"Authorization": "Bearer ${{WORLD_TOKEN}}"}}}}}}}}
  Claude Code:
    claude mcp add --transport http world {mcp_url} --header "Authorization: Bearer $(cat {token})"
  Python (pip install mcp):
    import asyncio, pathlib, httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    async def main():
        token = pathlib.Path("{token}").read_text().strip()
        async with httpx2.AsyncClient(headers={{"Authorization": f"Bearer {{token}}"}}) as http:
            async with Client(streamable_http_client("{mcp_url}", http_client=http)) as world:
                print([t.name for t in (await world.list_tools()).tools])
                print((await world.call_tool("ailang-read", {{"path": "hello.txt"}})).structured_content)
    asyncio.run(main())
  Python, answering an approval in-band (a grant that asks: quickstart --ask Workspace.Write):
    import asyncio, pathlib, httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import ElicitResult
    async def ask_me(context, params):  # the daemon's question: what runs, its cost, the budget left
        print(params.message)
        decision = input("approve, approve-for-session or deny? ").strip()
        return ElicitResult(action="accept", content={{"decision": decision}})
    async def main():
        token = pathlib.Path("{token}").read_text().strip()
        async with httpx2.AsyncClient(headers={{"Authorization": f"Bearer {{token}}"}}) as http:
            async with Client(streamable_http_client("{mcp_url}", http_client=http), elicitation_callback=ask_me) as world:
                result = await world.call_tool("ailang-write", {{"path": "notes.txt", "content": "hello\n"}})
                print(result.structured_content or result.content)
    asyncio.run(main())"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_write_that_makes_no_progress_fails_after_the_write_timeout() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (near, mut far) = tokio::io::duplex(64);
        let mut w = WriteTimeout::new(near, std::time::Duration::from_millis(50));
        let err = w.write_all(&[0u8; 4096]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        // A reader that keeps up never trips it.
        let (near, mut far2) = tokio::io::duplex(64);
        let mut w = WriteTimeout::new(near, std::time::Duration::from_millis(50));
        let reader = tokio::spawn(async move {
            let mut sink = Vec::new();
            far2.read_to_end(&mut sink).await.map(|_| sink.len())
        });
        w.write_all(&[1u8; 4096]).await.unwrap();
        w.shutdown().await.unwrap();
        assert_eq!(reader.await.unwrap().unwrap(), 4096);
        let _ = far.read(&mut [0u8; 1]).await;
    }

    #[test]
    fn only_loopback_binds_are_accepted() {
        for ok in ["127.0.0.1:7644", "localhost:0", "[::1]:7644", "127.0.0.2:80"] {
            loopback_addr(ok).unwrap();
        }
        for bad in ["0.0.0.0:7644", "192.168.1.1:80", "example.com:80", "127.0.0.1", "127.0.0.1:x", "[::]:1"] {
            assert!(loopback_addr(bad).is_err(), "{bad}");
        }
    }
}
