//! `worldd serve`: startup, the accept loop, graceful shutdown.

use crate::admin;
use crate::http;
use crate::limits::*;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use world_store::{Reads, Ref, Store};

/// Everything the handlers share.
pub struct Daemon {
    pub store: Store,
    pub db_path: PathBuf,
    pub interpreter_ref: Option<Ref>,
    pub interpreter_version: String,
    #[allow(dead_code)] // read by the coordinator's worktree handlers
    pub workspace_root: Option<PathBuf>,
}

#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub db: PathBuf,
    pub bind: String,
    pub workspace_root: Option<PathBuf>,
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

pub async fn serve(opts: ServeOptions) -> Result<(), StartupError> {
    let addr = loopback_addr(&opts.bind).map_err(|e| fail("bind-policy", e))?;
    if let Some(root) = &opts.workspace_root
        && !root.is_dir()
    {
        return Err(fail("config", format!("--workspace-root {} is not a directory", root.display())));
    }
    let (store, recovery) = Store::open(&opts.db, crate::clock::now()).map_err(|e| fail("store-open", e))?;
    for effect in &recovery.indeterminate_effects {
        tracing::warn!(effect, "recovery: effect intent had no outcome; recorded indeterminate (its debit stands)");
    }
    for (task, state) in &recovery.tasks {
        tracing::warn!(task, state = state.as_str(), "recovery: task was in flight at the last stop");
    }
    let head = store.snapshot().and_then(|s| s.selected_head()).map_err(|e| fail("store-open", e))?;
    let daemon = Arc::new(Daemon {
        store,
        db_path: std::fs::canonicalize(&opts.db).unwrap_or(opts.db.clone()),
        interpreter_ref: None,
        interpreter_version: String::new(),
        workspace_root: opts.workspace_root.clone(),
    });
    let admin = admin::listen(daemon.clone()).map_err(|e| fail("admin-socket", e))?;
    let listener = TcpListener::bind(addr).await.map_err(|e| fail("listen", format!("{addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| fail("listen", e))?;
    eprintln!(
        "worldd listening on http://{local} (store {}, head {})",
        daemon.db_path.display(),
        head.map(|h| h.to_string()).unwrap_or_else(|| "none".into())
    );
    accept_loop(listener, daemon.clone()).await;
    admin.close();
    // Dropping the last handle drains the writer queue and releases the lock.
    drop(daemon);
    Ok(())
}

async fn accept_loop(listener: TcpListener, daemon: Arc<Daemon>) {
    let app = http::router(daemon);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = &mut shutdown => break,
        };
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
        // Without NODELAY an SSE reply waits ~40 ms on delayed ACK.
        let _ = stream.set_nodelay(true);
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HTTP_READ_TIMEOUT)
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(SHUTDOWN_DRAIN) => tracing::warn!("shutdown drain exceeded {} s; closing remaining connections", SHUTDOWN_DRAIN.as_secs()),
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
