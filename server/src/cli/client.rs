//! Client verbs: one bounded request to a running daemon each, with the
//! credential the verb was given or found (`--token-file`, or the operator
//! token beside `--db`), for a daemon whose reads are private.

use super::{DaemonArgs, fail};
use crate::limits::{CLIENT_BODY_MAX, CLIENT_TIMEOUT, TOKEN_FILE_MAX};
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use world_protocol::auth::CREDENTIAL_HEX_LEN;

/// A running daemon, and the credential its reads are made with.
pub struct Client {
    pub addr: String,
    /// How the address was named (`locate::Daemon::named_by`), for an unreachable daemon's message.
    named_by: String,
    /// Set once a request found no daemon at `addr`: the cause.
    unreached: std::cell::RefCell<Option<String>>,
    agent: ureq::Agent,
    /// `Bearer <token>`, when a credential was given or found.
    authorization: Option<String>,
}

impl Client {
    /// The daemon `args` names (or `locate::daemon` finds), with the
    /// credential of `--token-file`, or else the operator token beside its
    /// store when the daemon wrote one (without it the reads go without a
    /// credential, as an open daemon takes them).
    pub fn new(args: &DaemonArgs) -> Result<Client, String> {
        let daemon = super::locate::daemon(args.addr.clone(), args.db.clone())?;
        let token = match (&args.token_file, &daemon.local) {
            (Some(file), _) => Some(read_token(file)?),
            (None, Some(db)) => {
                let file = crate::operator::token_path(db);
                match std::fs::symlink_metadata(&file) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    _ => Some(read_token(&file)?),
                }
            }
            (None, None) => None,
        };
        let agent =
            ureq::Agent::config_builder().timeout_global(Some(CLIENT_TIMEOUT)).http_status_as_error(false).build();
        Ok(Client {
            addr: daemon.addr,
            named_by: daemon.named_by,
            unreached: Default::default(),
            agent: agent.into(),
            authorization: token.map(|t| format!("Bearer {t}")),
        })
    }

    /// Why no daemon answered at `addr`, once a request found none: the
    /// address, how it was named and what names another.
    pub fn unreached(&self) -> Option<String> {
        self.unreached.borrow().as_ref().map(|why| unreachable_text(&self.addr, &self.named_by, why))
    }

    /// GETs `path`: the status and the body.
    pub fn get(&self, path: &str) -> Result<(u16, Vec<u8>), Unanswered> {
        let url = format!("{}{path}", self.addr.trim_end_matches('/'));
        let mut request = self.agent.get(&url);
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut resp = request.call().map_err(|e| {
            *self.unreached.borrow_mut() = Some(e.to_string());
            Unanswered::Unreachable(unreachable_text(&self.addr, &self.named_by, &e.to_string()))
        })?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(CLIENT_BODY_MAX)
            .read_to_vec()
            .map_err(|e| Unanswered::Unread(path.to_string(), e.to_string()))?;
        Ok((status, body))
    }

    /// An error reply in one line (`describe_error`), with what to give when
    /// the daemon asked for a credential and none was sent.
    pub fn describe(&self, path: &str, status: u16, body: &[u8]) -> String {
        let mut line = describe_error(path, status, body);
        if status == 401 && self.authorization.is_none() {
            line.push_str(
                " (reads are private on this daemon: give --token-file FILE, or --db PATH of its store (or set WORLD_DB=PATH))",
            );
        }
        line
    }
}

/// The message for a daemon that did not answer at `addr`.
fn unreachable_text(addr: &str, named_by: &str, why: &str) -> String {
    format!(
        "cannot reach the daemon at {addr} ({named_by}): {why}; is it running? From the directory where \
         `worldd quickstart` ran, the verbs find its daemon; else name it with --addr URL (or set {}=URL), \
         or its store with --db PATH (or {}=PATH)",
        super::locate::ENV_ADDR,
        super::locate::ENV_DB
    )
}

/// Why a GET has no reply to show.
pub enum Unanswered {
    /// No connection to the address, or no reply on it: the whole message.
    Unreachable(String),
    /// The reply's body could not be read: the path and the cause.
    Unread(String, String),
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::Unreachable(text) => f.write_str(text),
            Unanswered::Unread(path, why) => write!(f, "{path}: reading the response: {why}"),
        }
    }
}

/// The token a file holds: 64 lowercase hex digits, whitespace around them
/// ignored. What the file holds otherwise is never echoed.
fn read_token(file: &Path) -> Result<String, String> {
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(TOKEN_FILE_MAX).read_to_string(&mut text))
        .map_err(|e| format!("token file {}: {e}", file.display()))?;
    let token = text.trim();
    let well_formed =
        token.len() == CREDENTIAL_HEX_LEN && token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return Err(format!("token file {} does not hold a token (64 lowercase hex digits)", file.display()));
    }
    Ok(token.to_string())
}

/// GETs `path` and prints the body; an HTTP error becomes
/// `worldd: <path> returned HTTP <status> <Class>: <message>` and exit 1.
pub fn get_and_print(client: &Client, path: &str) -> ExitCode {
    let (status, body) = match client.get(path) {
        Ok(reply) => reply,
        Err(e) => return fail(1, e),
    };
    if (200..300).contains(&status) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&body);
        if !body.ends_with(b"\n") {
            let _ = out.write_all(b"\n");
        }
        return ExitCode::SUCCESS;
    }
    fail(1, client.describe(path, status, &body))
}

fn describe_error(path: &str, status: u16, body: &[u8]) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let err = parsed.as_ref().and_then(|v| v.get("error"));
    let class = err.and_then(|e| e.get("class")).and_then(|c| c.as_str()).unwrap_or("");
    let message = err.and_then(|e| e.get("message")).and_then(|m| m.as_str()).map(str::to_string);
    let message = message.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    let mut line = format!("{path} returned HTTP {status} {class}: {message}");
    if let (Some(o), Some(s)) = (err.and_then(|e| e.get("observedHead")), err.and_then(|e| e.get("selectedHead"))) {
        line.push_str(&format!(
            " (observedHead={} selectedHead={})",
            o.as_str().unwrap_or(""),
            s.as_str().unwrap_or("")
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_holds_64_lowercase_hex_and_nothing_else_is_echoed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        let token = crate::sessions::new_token();
        std::fs::write(&file, format!("{token}\n")).unwrap();
        assert_eq!(read_token(&file).unwrap(), token);
        for bad in ["secret-ish text", &token.to_uppercase(), &token[..63], ""] {
            std::fs::write(&file, bad).unwrap();
            let e = read_token(&file).unwrap_err();
            assert!(e.contains("does not hold a token"), "{e}");
            assert!(bad.is_empty() || !e.contains(bad), "{e}");
        }
        assert!(read_token(&dir.path().join("absent")).unwrap_err().starts_with("token file "));
    }
}
