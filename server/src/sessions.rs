//! The session authority: bearer tokens, grants, minting and resolution.
//!
//! A token is 32 random bytes as 64 lowercase hex, shown once at mint. The store
//! keeps only `credential_id = sha256(token hex)`. Lookups go by that hash, so the
//! time a lookup takes depends on the hash, never on how much of a guessed token
//! is right: no byte-by-byte comparison of secrets ever happens.

use crate::limits::*;
use rand::RngCore;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use world_protocol::auth::{BearerError, SessionDenial, Token, parse_bearer};
use world_store::{Approver, Grant, ReadError, Ref, Session, Snapshot, TaskKey};

/// `^[a-z0-9][a-z0-9-]{0,63}$`.
pub fn validate_episode(episode: &str) -> Result<(), String> {
    let b = episode.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 64
        && matches!(b[0], b'a'..=b'z' | b'0'..=b'9')
        && b.iter().all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'-'));
    if ok { Ok(()) } else { Err(format!("episode {episode:?} must match ^[a-z0-9][a-z0-9-]{{0,63}}$")) }
}

/// Parses `EFFECT=SCOPE:BUDGET`; the budget is the last `:` segment, so scopes may contain `:`.
pub fn parse_grant(text: &str) -> Result<Grant, String> {
    let bad = |why: &str| Err(format!("grant {text:?} {why}; expected EFFECT=SCOPE:BUDGET"));
    let Some((effect, rest)) = text.split_once('=') else { return bad("has no '='") };
    let Some((scope, budget)) = rest.rsplit_once(':') else { return bad("has no ':BUDGET'") };
    if effect.is_empty()
        || effect.len() > GRANT_FIELD_MAX
        || effect.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return bad(&format!("needs an effect name of 1-{GRANT_FIELD_MAX} visible characters"));
    }
    if scope.is_empty() || scope.len() > GRANT_FIELD_MAX || scope.chars().any(char::is_control) {
        return bad(&format!("needs a scope of 1-{GRANT_FIELD_MAX} characters"));
    }
    let Ok(budget) = budget.parse::<u64>() else { return bad("needs a non-negative integer budget") };
    Ok(Grant::new(effect, scope, budget))
}

/// Marks the grants `EFFECT[=SCOPE]` names as asking `who` first; each must
/// name at least one grant.
pub fn ask(grants: &mut [Grant], text: &str, who: Approver) -> Result<(), String> {
    let (effect, scope) = match text.split_once('=') {
        Some((e, s)) => (e, Some(s)),
        None => (text, None),
    };
    let mut named = 0;
    for g in grants.iter_mut().filter(|g| g.effect == effect && scope.is_none_or(|s| s == g.scope)) {
        // The operator-only ask is the stricter one and wins.
        g.ask = Some(if g.ask == Some(Approver::Operator) { Approver::Operator } else { who });
        named += 1;
    }
    if named == 0 {
        return Err(format!("ask {text:?} names no grant; expected EFFECT[=SCOPE] of a --grant"));
    }
    Ok(())
}

pub fn format_grant(g: &Grant) -> String {
    let asks = match g.ask {
        None => "",
        Some(Approver::Anyone) => " (asks)",
        Some(Approver::Operator) => " (asks the operator)",
    };
    format!("{}={}:{}{asks}", g.effect, g.scope, g.budget)
}

/// A fresh token: 32 random bytes from the OS generator, as lowercase hex.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// A new MCP call's task id (`TaskKey::ordered_task_id`): a moment in
/// nanoseconds that rises with every id this process names, even if the wall
/// clock steps back, then 24 random bytes.
pub fn new_task_id() -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut last = LAST.load(Ordering::Relaxed);
    let moment = loop {
        let moment = now.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, moment, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break moment,
            Err(seen) => last = seen,
        }
    };
    let mut random = [0u8; 24];
    rand::rng().fill_bytes(&mut random);
    TaskKey::ordered_task_id(moment, &random)
}

pub fn credential_id(token: &str) -> Ref {
    Ref::of(token.as_bytes())
}

/// What a mint asks for, validated.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, Serialize)]
pub struct MintRequest {
    pub episode: String,
    pub grants: Vec<Grant>,
    pub ttl_s: u64,
}

impl MintRequest {
    pub fn validate(&self) -> Result<(), String> {
        validate_episode(&self.episode)?;
        if self.grants.is_empty() || self.grants.len() > GRANTS_MAX {
            return Err(format!("a session needs 1-{GRANTS_MAX} grants"));
        }
        if self.ttl_s == 0 || self.ttl_s > SESSION_TTL_MAX_S {
            return Err(format!("--ttl must be 1-{SESSION_TTL_MAX_S} seconds"));
        }
        Ok(())
    }

    pub fn session(&self, now: u64) -> Session {
        Session {
            episode: self.episode.clone(),
            grants: self.grants.clone(),
            created_at: now,
            expires_at: now + self.ttl_s,
        }
    }
}

/// What a mint hands back, once.
#[derive(Clone, Debug, serde::Deserialize, Serialize)]
pub struct Minted {
    pub token: String,
    pub credential_id: Ref,
    pub expires_at: u64,
    pub grants: usize,
}

/// One row of `session list`; never the token.
#[derive(Clone, Debug, serde::Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    pub credential_id: String,
    pub episode: String,
    pub live: bool,
    pub created_at: u64,
    pub expires_at: u64,
    pub grants: Vec<Grant>,
}

pub fn list_rows(snapshot: &Snapshot, now: u64) -> Result<Vec<SessionRow>, ReadError> {
    Ok(snapshot
        .sessions(SESSIONS_LISTED_MAX)?
        .into_iter()
        .map(|(id, s)| SessionRow {
            credential_id: id.hex(),
            episode: s.episode.clone(),
            live: s.is_live(now),
            created_at: s.created_at,
            expires_at: s.expires_at,
            grants: s.grants,
        })
        .collect())
}

/// A resolved caller.
#[derive(Clone, Debug)]
#[allow(dead_code)] // the coordinator reads both
pub struct Caller {
    pub credential_id: Ref,
    pub session: Session,
}

#[derive(Debug)]
pub enum ResolveError {
    Denied(SessionDenial),
    Read(ReadError),
}

/// Authorization: `Bearer <64 hex>`, nothing else read. Absent, malformed,
/// unknown and expired are told apart so each surface can map them.
pub fn resolve(snapshot: &Snapshot, authorization: Option<&[u8]>, now: u64) -> Result<Caller, ResolveError> {
    let token = parse_bearer(authorization).map_err(|e| {
        ResolveError::Denied(match e {
            BearerError::Absent => SessionDenial::Absent,
            BearerError::Malformed => SessionDenial::Malformed,
        })
    })?;
    lookup(snapshot, &token, now)
}

/// The live session a well-formed token names: unknown and expired told apart.
pub fn lookup(snapshot: &Snapshot, token: &Token, now: u64) -> Result<Caller, ResolveError> {
    let id = credential_id(token.as_str());
    let session =
        snapshot.session(&id).map_err(ResolveError::Read)?.ok_or(ResolveError::Denied(SessionDenial::Unknown))?;
    if !session.is_live(now) {
        return Err(ResolveError::Denied(SessionDenial::Expired));
    }
    Ok(Caller { credential_id: id, session })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_last_colon_segment() {
        let g = parse_grant("Net.Call=host:127.0.0.1:8080:25").unwrap();
        assert_eq!((g.effect.as_str(), g.scope.as_str(), g.budget), ("Net.Call", "host:127.0.0.1:8080", 25));
        assert_eq!(format_grant(&g), "Net.Call=host:127.0.0.1:8080:25");
    }

    #[test]
    fn malformed_grants_are_refused_with_the_expected_syntax() {
        for bad in
            ["", "Read", "Read=worktree", "=worktree:1", "Read=:1", "Read=worktree:-1", "Read=worktree:x", "Re ad=w:1"]
        {
            let e = parse_grant(bad).unwrap_err();
            assert!(e.contains("EFFECT=SCOPE:BUDGET"), "{bad}: {e}");
        }
    }

    #[test]
    fn episodes_follow_the_documented_grammar() {
        for ok in ["a", "demo", "ep-1", "0", &"a".repeat(64)] {
            validate_episode(ok).unwrap();
        }
        for bad in ["", "-a", "A", "a_b", "a.b", "a/b", &"a".repeat(65), "é"] {
            assert!(validate_episode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn task_ids_named_later_sort_after_earlier_ones_and_stay_64_hex() {
        let ids: Vec<String> = (0..1000).map(|_| new_task_id()).collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{} then {}", pair[0], pair[1]);
        }
        for id in &ids {
            assert_eq!(id.len(), 64);
            assert!(id.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)), "{id}");
        }
        // The random tail differs even when two ids share a moment's prefix.
        assert_ne!(ids[0][16..], ids[1][16..]);
    }

    #[test]
    fn tokens_are_64_lowercase_hex_and_distinct() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        assert_ne!(a, b);
        assert_eq!(credential_id(&a), Ref::of(a.as_bytes()));
    }
}
