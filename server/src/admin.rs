//! The local admin socket: lets `worldd session …`, `publish`, `verify` and
//! `export` act on a store whose writer lock a running daemon holds, without
//! stopping it.
//!
//! `<db>.admin.sock`, mode 0600, so only the store's owner can connect. One JSON
//! request line, one JSON response line (a verify sends `progress` lines
//! first), then the connection closes.

use crate::daemon::Daemon;
use crate::limits::{ADMIN_LINE_MAX, ADMIN_LONG_DEADLINE, ADMIN_PROGRESS_QUEUE, ADMIN_TIMEOUT};
use crate::sessions::{self, MintRequest, Minted, SessionRow};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use world_store::{Op, Ref, Reply};

pub fn socket_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".admin.sock");
    PathBuf::from(s)
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum AdminRequest {
    Mint(MintRequest),
    List,
    Revoke {
        credential_id: String,
    },
    Publish(crate::publish::PublishRequest),
    /// Verify the store from the daemon's snapshot, rendered as `verify`
    /// prints it (`json`: the one-line report).
    Verify {
        json: bool,
    },
    /// Write the export stream of the daemon's snapshot to `out` (absolute).
    Export {
        out: PathBuf,
        with_sessions: bool,
    },
    /// The open approvals.
    Approvals,
    /// Stop the command of task `invocation_id` (`mcp:EP:ID`, `a2a:EP:ID`).
    Cancel {
        invocation_id: String,
    },
    /// The operator's word on approval `id`.
    Decide {
        id: String,
        verdict: crate::approvals::Verdict,
        #[serde(default)]
        note: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum AdminResponse {
    Minted(Minted),
    Sessions {
        rows: Vec<SessionRow>,
    },
    Revoked {
        revoked: bool,
    },
    Published {
        summary: String,
    },
    /// Objects hashed so far of a verify in progress.
    Progress {
        done: u64,
        total: u64,
    },
    /// A finished verify: what to print, and whether the store is clean.
    Exported {
        records: u64,
    },
    Verified {
        output: String,
        clean: bool,
    },
    Approvals {
        rows: Vec<crate::approvals::Listed>,
    },
    /// The operator's word taken: what it came to, in one line.
    Decided {
        id: String,
        said: String,
    },
    /// A cancel asked: what it came to.
    Cancelled {
        said: String,
    },
    Error {
        message: String,
    },
}

pub struct AdminSocket {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl AdminSocket {
    pub fn close(self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the socket. A stale socket from a killed daemon is replaced: we hold
/// the writer lock, so no other daemon can be using it.
pub fn listen(daemon: Arc<Daemon>) -> std::io::Result<AdminSocket> {
    let path = socket_path(&daemon.db_path);
    let staging = path.with_extension(format!("sock.{}", std::process::id()));
    let _ = std::fs::remove_file(&staging);
    let listener = std::os::unix::net::UnixListener::bind(&staging)?;
    // Restrict before the socket is reachable under its real name.
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&staging, &path)?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let daemon = daemon.clone();
            tokio::spawn(async move {
                let _ = serve_one(daemon, stream).await;
            });
        }
    });
    Ok(AdminSocket { path, task })
}

/// One connection: the request line and an ordinary answer within
/// `ADMIN_TIMEOUT`, a verify within `ADMIN_LONG_DEADLINE`.
async fn serve_one(daemon: Arc<Daemon>, stream: tokio::net::UnixStream) -> std::io::Result<()> {
    let timed_out = || std::io::Error::from(std::io::ErrorKind::TimedOut);
    let (r, mut w) = stream.into_split();
    let mut line = Vec::new();
    let mut reader = tokio::io::BufReader::new(r).take(ADMIN_LINE_MAX as u64);
    tokio::time::timeout(ADMIN_TIMEOUT, reader.read_until(b'\n', &mut line)).await.map_err(|_| timed_out())??;
    match serde_json::from_slice::<AdminRequest>(&line) {
        Ok(AdminRequest::Verify { json }) => {
            let verified = verify(&daemon, json, &mut w);
            tokio::time::timeout(ADMIN_LONG_DEADLINE, verified).await.map_err(|_| timed_out())??;
        }
        Ok(AdminRequest::Export { out, with_sessions }) => {
            let exported = tokio::time::timeout(ADMIN_LONG_DEADLINE, export(&daemon, out, with_sessions));
            write_line(&mut w, &exported.await.map_err(|_| timed_out())?).await?;
        }
        Ok(AdminRequest::Decide { id, verdict, note }) => {
            // The socket is the owner's (mode 0600): the peer's uid says who decided.
            let uid = peer_uid(&w);
            let decided = decide(&daemon, id, verdict, note, uid);
            let response = tokio::time::timeout(ADMIN_TIMEOUT, decided).await.map_err(|_| timed_out())?;
            write_line(&mut w, &response).await?;
        }
        Ok(req) => {
            let response = tokio::time::timeout(ADMIN_TIMEOUT, handle(&daemon, req)).await.map_err(|_| timed_out())?;
            write_line(&mut w, &response).await?;
        }
        Err(e) => write_line(&mut w, &AdminResponse::Error { message: format!("bad admin request: {e}") }).await?,
    }
    w.shutdown().await
}

fn peer_uid(w: &tokio::net::unix::OwnedWriteHalf) -> u32 {
    w.as_ref().peer_cred().map(|c| c.uid()).unwrap_or(u32::MAX)
}

/// The operator's decision, through this daemon's writer.
async fn decide(
    daemon: &Arc<Daemon>,
    id: String,
    verdict: crate::approvals::Verdict,
    note: String,
    uid: u32,
) -> AdminResponse {
    let d = daemon.clone();
    let by = crate::approvals::Decider::AdminSocket { node: daemon.db_path.display().to_string(), uid };
    let ttl = daemon.approval_ttl_s;
    let decided = tokio::task::spawn_blocking(move || {
        crate::approvals::operator_decide(d.store.as_ref(), &id, verdict, &by, &note, ttl).map(|said| (id, said))
    })
    .await;
    match decided {
        Ok(Ok((id, said))) => AdminResponse::Decided { id, said },
        Ok(Err(e)) => AdminResponse::Error { message: e.to_string() },
        Err(e) => AdminResponse::Error { message: e.to_string() },
    }
}

async fn write_line(w: &mut tokio::net::unix::OwnedWriteHalf, response: &AdminResponse) -> std::io::Result<()> {
    let mut out = serde_json::to_vec(response).unwrap_or_default();
    out.push(b'\n');
    w.write_all(&out).await
}

/// Writes the export of the daemon's snapshot on the blocking pool.
async fn export(daemon: &Arc<Daemon>, out: PathBuf, with_sessions: bool) -> AdminResponse {
    if !out.is_absolute() {
        return AdminResponse::Error { message: format!("{}: an export path must be absolute", out.display()) };
    }
    let d = daemon.clone();
    let work = tokio::task::spawn_blocking(move || {
        let snapshot = d.store.snapshot().map_err(|e| e.to_string())?;
        crate::stores::export_to_file(&snapshot, &out, with_sessions)
    });
    match work.await {
        Ok(Ok(records)) => AdminResponse::Exported { records },
        Ok(Err(message)) => AdminResponse::Error { message },
        Err(e) => AdminResponse::Error { message: format!("export failed: {e}") },
    }
}

/// Verifies the daemon's snapshot on the blocking pool, passing progress on
/// as it comes (dropped when the client reads slower), then the rendered
/// report.
async fn verify(daemon: &Arc<Daemon>, json: bool, w: &mut tokio::net::unix::OwnedWriteHalf) -> std::io::Result<()> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(ADMIN_PROGRESS_QUEUE);
    let d = daemon.clone();
    let work = tokio::task::spawn_blocking(move || -> Result<AdminResponse, String> {
        let started = std::time::Instant::now();
        let snapshot = d.store.snapshot().map_err(|e| e.to_string())?;
        let progress = move |done: u64, total: u64| {
            let _ = tx.try_send(AdminResponse::Progress { done, total });
        };
        let options = world_store::verify::Options { threads: 0, progress: Some(&progress) };
        let report = world_store::verify::verify(&snapshot, &options);
        let output = crate::report::render_report(&d.db_path, &report, json, started.elapsed());
        Ok(AdminResponse::Verified { output, clean: report.is_clean() })
    });
    // The channel closes when the verify ends and drops its sender.
    while let Some(progress) = rx.recv().await {
        write_line(w, &progress).await?;
    }
    let response = match work.await {
        Ok(Ok(verified)) => verified,
        Ok(Err(message)) => AdminResponse::Error { message },
        Err(e) => AdminResponse::Error { message: format!("verify failed: {e}") },
    };
    write_line(w, &response).await
}

async fn handle(daemon: &Arc<Daemon>, req: AdminRequest) -> AdminResponse {
    let err = |message: String| AdminResponse::Error { message };
    match req {
        AdminRequest::Cancel { invocation_id } => {
            let Some(key) = world_store::TaskKey::from_invocation_id(&invocation_id) else {
                return err(format!(
                    "{invocation_id:?} is not a task's invocation id (mcp:EPISODE:ID or a2a:EPISODE:ID)"
                ));
            };
            let host = daemon.clone() as crate::coordinator::SharedHost;
            match crate::coordinator::tasks::cancel(&host, &key).await {
                Ok(ask) => match crate::coordinator::tasks::said(&ask, &invocation_id) {
                    Ok(said) => AdminResponse::Cancelled { said },
                    Err(message) => err(message),
                },
                Err(e) => err(e.to_string()),
            }
        }
        AdminRequest::Mint(m) => {
            if let Err(e) = m.validate() {
                return err(e);
            }
            let token = sessions::new_token();
            let credential_id = sessions::credential_id(&token);
            let session = m.session(crate::clock::now());
            let expires_at = session.expires_at;
            match crate::writes::write(daemon.store.as_ref(), Op::MintSession { credential_id, session }).await {
                Ok(_) => AdminResponse::Minted(Minted { token, credential_id, expires_at, grants: m.grants.len() }),
                Err(e) => err(e.to_string()),
            }
        }
        AdminRequest::List => {
            let d = daemon.clone();
            let rows = tokio::task::spawn_blocking(move || {
                let snap = d.store.snapshot()?;
                sessions::list_rows(&snap, crate::clock::now())
            })
            .await;
            match rows {
                Ok(Ok(rows)) => AdminResponse::Sessions { rows },
                Ok(Err(e)) => err(e.to_string()),
                Err(e) => err(e.to_string()),
            }
        }
        AdminRequest::Publish(req) => {
            let d = daemon.clone();
            match tokio::task::spawn_blocking(move || crate::publish::publish(d.store.as_ref(), &req)).await {
                Ok(Ok(summary)) => AdminResponse::Published { summary },
                Ok(Err(e)) => err(e),
                Err(e) => err(e.to_string()),
            }
        }
        // `serve_one` answers these itself, under their own deadline.
        AdminRequest::Verify { .. } | AdminRequest::Export { .. } | AdminRequest::Decide { .. } => {
            err("answered by serve_one".into())
        }
        AdminRequest::Approvals => {
            let d = daemon.clone();
            let rows = tokio::task::spawn_blocking(move || {
                let snap = d.store.snapshot()?;
                crate::approvals::listed(&snap)
            })
            .await;
            match rows {
                Ok(Ok(rows)) => AdminResponse::Approvals { rows },
                Ok(Err(e)) => err(e.to_string()),
                Err(e) => err(e.to_string()),
            }
        }
        AdminRequest::Revoke { credential_id } => {
            let Ok(id) = parse_credential_id(&credential_id) else {
                return err(format!("credential id {credential_id:?} must be 64 lowercase hex"));
            };
            match crate::writes::write(
                daemon.store.as_ref(),
                Op::RevokeSession { credential_id: id, at: crate::clock::now() },
            )
            .await
            {
                Ok(Reply::Revoked(revoked)) => AdminResponse::Revoked { revoked },
                Ok(other) => err(format!("unexpected writer reply {other:?}")),
                Err(e) => err(e.to_string()),
            }
        }
    }
}

/// A credential id as `session list` prints it: 64 lowercase hex.
pub fn parse_credential_id(text: &str) -> Result<Ref, world_store::RefError> {
    Ref::parse(&format!("sha256:{}", text.strip_prefix("sha256:").unwrap_or(text)))
}

/// Sends one request to the daemon serving `spec`'s store file, if one runs.
/// A shared store is never asked through a node: `Ok(None)`, so the caller
/// works on the database itself, which every node reads.
pub fn call_serving(spec: &crate::stores::StoreSpec, req: &AdminRequest) -> Result<Option<AdminResponse>, String> {
    match spec {
        crate::stores::StoreSpec::Embedded(db) => call(db, req),
        crate::stores::StoreSpec::Postgres(_) => Ok(None),
    }
}

/// Sends one request to a running daemon. `Ok(None)` means no daemon answers
/// on the socket, so the caller may open the store itself.
pub fn call(db: &Path, req: &AdminRequest) -> Result<Option<AdminResponse>, String> {
    call_streaming(db, req, |_, _| {})
}

/// Like [`call`], passing each `progress` line to `on_progress` until the
/// answer; a verify waits up to `ADMIN_LONG_DEADLINE` between lines.
pub fn call_streaming(
    db: &Path,
    req: &AdminRequest,
    mut on_progress: impl FnMut(u64, u64),
) -> Result<Option<AdminResponse>, String> {
    // The daemon names its socket after the canonical store path; so must we.
    let path = socket_path(&std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf()));
    let stream = match std::os::unix::net::UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused) => {
            return Ok(None);
        }
        Err(e) => return Err(format!("admin socket {}: {e}", path.display())),
    };
    let long = matches!(req, AdminRequest::Verify { .. } | AdminRequest::Export { .. });
    let wait = if long { ADMIN_LONG_DEADLINE } else { ADMIN_TIMEOUT };
    stream.set_read_timeout(Some(wait)).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(ADMIN_TIMEOUT)).map_err(|e| e.to_string())?;
    let mut line = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    line.push(b'\n');
    (&stream).write_all(&line).map_err(|e| format!("admin socket {}: {e}", path.display()))?;
    let mut reader = BufReader::new(&stream);
    loop {
        let mut reply = Vec::new();
        (&mut reader)
            .take(ADMIN_LINE_MAX as u64)
            .read_until(b'\n', &mut reply)
            .map_err(|e| format!("admin socket {}: {e}", path.display()))?;
        match serde_json::from_slice(&reply) {
            Ok(AdminResponse::Progress { done, total }) => on_progress(done, total),
            Ok(answer) => return Ok(Some(answer)),
            Err(e) => return Err(format!("admin socket {}: bad reply: {e}", path.display())),
        }
    }
}

use std::io::Read as _;
