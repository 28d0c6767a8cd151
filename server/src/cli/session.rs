//! `worldd session mint|list|revoke`: through a running daemon's admin socket
//! when there is one, otherwise on the store directly.

use super::fail;
use crate::admin::{self, AdminRequest, AdminResponse};
use crate::sessions::{self, MintRequest, Minted, SessionRow};
use crate::stores::StoreSpec;
use std::io::{BufRead, Write};

use std::path::Path;
use std::process::ExitCode;
use world_store::{Op, Reply};

fn require_store(spec: &StoreSpec) -> Result<(), ExitCode> {
    let StoreSpec::Embedded(db) = spec else { return Ok(()) };
    if db.exists() {
        Ok(())
    } else {
        Err(fail(
            1,
            format!("store {} does not exist; create it with worldd serve --db {} first", db.display(), db.display()),
        ))
    }
}

/// Asks `y/N` on the controlling terminal; without one, minting needs `--yes`.
fn confirm(prompt: &str) -> Result<(), ExitCode> {
    let tty = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty");
    let mut tty = match tty {
        Ok(t) => t,
        Err(e) => {
            return Err(fail(
                1,
                format!(
                    "session mint: refusing: no controlling terminal (open /dev/tty: {e}); confirm at a terminal or pass --yes"
                ),
            ));
        }
    };
    let _ = write!(tty, "{prompt} [y/N] ");
    let _ = tty.flush();
    let mut answer = String::new();
    let _ = std::io::BufReader::new(&tty).read_line(&mut answer);
    match answer.trim() {
        "y" | "yes" => Ok(()),
        _ => Err(fail(1, "session mint: aborted (not confirmed)")),
    }
}

/// `--ask` and `--ask-operator`, as given.
pub struct Asks<'a> {
    pub anyone: &'a [String],
    pub operator: &'a [String],
}

impl Asks<'_> {
    pub(super) fn apply(&self, mut grants: Vec<world_store::Grant>) -> Result<Vec<world_store::Grant>, String> {
        for a in self.anyone {
            sessions::ask(&mut grants, a, world_store::Approver::Anyone)?;
        }
        for a in self.operator {
            sessions::ask(&mut grants, a, world_store::Approver::Operator)?;
        }
        Ok(grants)
    }
}

pub fn mint(
    spec: &StoreSpec,
    episode: &str,
    grants: &[String],
    asks: &Asks<'_>,
    ttl: u64,
    out: Option<&Path>,
    yes: bool,
) -> ExitCode {
    let grants: Result<Vec<_>, _> = grants.iter().map(|g| sessions::parse_grant(g)).collect();
    let req = match grants.and_then(|g| asks.apply(g)) {
        Ok(grants) => MintRequest { episode: episode.to_string(), grants, ttl_s: ttl },
        Err(e) => return fail(1, format!("session mint: {e}")),
    };
    if let Err(e) = req.validate() {
        return fail(1, format!("session mint: {e}"));
    }
    if let Err(code) = require_store(spec) {
        return code;
    }
    if !yes {
        let prompt = format!(
            "Confirm mint for episode {episode} ({} grant(s), expiry +{ttl}s) with a session credential?",
            req.grants.len()
        );
        if let Err(code) = confirm(&prompt) {
            return code;
        }
    }
    let db = match spec {
        StoreSpec::Embedded(db) => db.as_path(),
        // Every node reads sessions from the database: minting there is live at once.
        StoreSpec::Postgres(_) => {
            tell_asks(&req.grants);
            return match mint_offline(spec, &req) {
                Ok(m) => emit(&m, episode, out),
                Err(e) => fail(1, format!("session mint: {e}")),
            };
        }
    };
    let minted = match admin::call(db, &AdminRequest::Mint(req.clone())) {
        Ok(Some(AdminResponse::Minted(m))) => m,
        Ok(Some(AdminResponse::Error { message })) => return fail(1, format!("session mint: {message}")),
        Ok(Some(other)) => return fail(1, format!("session mint: unexpected reply {other:?}")),
        Ok(None) => match mint_offline(spec, &req) {
            Ok(m) => m,
            Err(e) => return fail(1, format!("session mint: {e}")),
        },
        Err(e) => return fail(1, format!("session mint: {e}")),
    };
    tell_asks(&req.grants);
    emit(&minted, episode, out)
}

/// Says, for each grant that asks, whose answer counts: what `--ask` stops and
/// what only `--ask-operator` does (README, "Who can approve").
pub fn tell_asks(grants: &[world_store::Grant]) {
    for g in grants {
        let who = match g.ask {
            None => continue,
            Some(world_store::Approver::Anyone) => {
                "its caller's client may answer (stops a model acting unseen by its user, not an agent that holds \
                 its own token: use --ask-operator for that)"
            }
            Some(world_store::Approver::Operator) => "only the operator may answer (worldd approve / deny)",
        };
        note!("worldd: grant {}={} asks before each effect: {who}", g.effect, g.scope);
    }
}

/// Mints on the store itself: no daemon holds it (a file), or it is shared (PostgreSQL).
fn mint_offline(spec: &StoreSpec, req: &MintRequest) -> Result<Minted, String> {
    let store = spec.open(crate::clock::now(), None, None).map_err(|e| e.to_string())?.store;
    let token = sessions::new_token();
    let credential_id = sessions::credential_id(&token);
    let session = req.session(crate::clock::now());
    let expires_at = session.expires_at;
    store.call(Op::MintSession { credential_id, session }).map_err(|e| e.to_string())?;
    Ok(Minted { token, credential_id, expires_at, grants: req.grants.len() })
}

fn emit(m: &Minted, episode: &str, out: Option<&Path>) -> ExitCode {
    note!(
        "worldd session mint: credential_id={} (episode {episode}, {} grant(s), expires {} UTC)",
        m.credential_id.hex(),
        m.grants,
        crate::clock::utc(m.expires_at)
    );
    match out {
        Some(path) => {
            if let Err(e) = write_token_file(path, &m.token) {
                return fail(1, format!("session mint: {e}"));
            }
            say!(
                "minted session credential for episode {episode}: {} grant(s), expires {} UTC, written to {}",
                m.grants,
                crate::clock::utc(m.expires_at),
                path.display()
            );
        }
        None => say!("{}", m.token),
    }
    ExitCode::SUCCESS
}

/// Writes the token to a new file of mode 0600 (`stores::write_private`):
/// never through a link planted at `path`, never into another user's file.
pub fn write_token_file(path: &Path, token: &str) -> Result<(), String> {
    crate::stores::write_private(path, |f| {
        f.write_all(token.as_bytes()).and_then(|()| f.write_all(b"\n")).map_err(|e| e.to_string())
    })
}

pub fn list(spec: &StoreSpec, json: bool) -> ExitCode {
    if let Err(code) = require_store(spec) {
        return code;
    }
    let asked = admin::call_serving(spec, &AdminRequest::List);
    let rows = match asked {
        Ok(Some(AdminResponse::Sessions { rows })) => rows,
        Ok(Some(AdminResponse::Error { message })) => return fail(1, format!("session list: {message}")),
        Ok(Some(other)) => return fail(1, format!("session list: unexpected reply {other:?}")),
        Ok(None) => match list_offline(spec) {
            Ok(rows) => rows,
            Err(e) => return fail(1, format!("session list: {e}")),
        },
        Err(e) => return fail(1, format!("session list: {e}")),
    };
    if json {
        say!("{}", serde_json::to_string(&rows).unwrap_or_else(|_| "[]".into()));
        return ExitCode::SUCCESS;
    }
    for r in &rows {
        let grants: Vec<String> = r.grants.iter().map(sessions::format_grant).collect();
        say!(
            "{} {} {} expires {} UTC {}",
            r.credential_id,
            r.episode,
            if r.live { "live" } else { "expired" },
            crate::clock::utc(r.expires_at),
            grants.join(" ")
        );
    }
    say!("{} session credential(s)", rows.len());
    ExitCode::SUCCESS
}

fn list_offline(spec: &StoreSpec) -> Result<Vec<SessionRow>, String> {
    sessions::list_rows(&spec.read_only_snapshot()?, crate::clock::now()).map_err(|e| e.to_string())
}

pub fn revoke(spec: &StoreSpec, credential_id: &str) -> ExitCode {
    if let Err(code) = require_store(spec) {
        return code;
    }
    let Ok(id) = admin::parse_credential_id(credential_id) else {
        return fail(1, format!("session revoke: credential id {credential_id:?} must be 64 lowercase hex"));
    };
    let req = AdminRequest::Revoke { credential_id: id.hex() };
    let asked = admin::call_serving(spec, &req);
    let revoked = match asked {
        Ok(Some(AdminResponse::Revoked { revoked })) => revoked,
        Ok(Some(AdminResponse::Error { message })) => return fail(1, format!("session revoke: {message}")),
        Ok(Some(other)) => return fail(1, format!("session revoke: unexpected reply {other:?}")),
        Ok(None) => {
            let r = spec.open(crate::clock::now(), None, None).map_err(|e| e.to_string()).and_then(|o| {
                let revoke = Op::RevokeSession { credential_id: id, at: crate::clock::now() };
                o.store.call(revoke).map_err(|e| e.to_string())
            });
            match r {
                Ok(Reply::Revoked(b)) => b,
                Ok(other) => return fail(1, format!("session revoke: unexpected reply {other:?}")),
                Err(e) => return fail(1, format!("session revoke: {e}")),
            }
        }
        Err(e) => return fail(1, format!("session revoke: {e}")),
    };
    if !revoked {
        return fail(
            1,
            format!(
                "session revoke: refusing: no session credential {} in {} (already revoked, or minted in another store); nothing was revoked",
                id.hex(),
                spec.label()
            ),
        );
    }
    say!("revoked session credential {}", id.hex());
    ExitCode::SUCCESS
}
