//! The sealed `requestState` of an MCP approval round: which credential,
//! tool, arguments and pending approval a question was about, and until
//! when. The client holds it and echoes it back; the daemon trusts it only
//! if its HMAC (keyed by a secret kept in the store, so every node of a
//! shared store checks it alike) recomputes. Sealing gives integrity, not
//! single use: that comes from the approval row, decided once.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use world_store::Ref;

/// The store's secret the seal is keyed by.
pub const KEY_NAME: &str = "approval-request-state";
pub const KEY_BYTES: usize = 32;
/// Longest state accepted back (a sealed state is a few hundred bytes).
pub const STATE_MAX: usize = 2048;
const VERSION: u32 = 1;

/// A fresh key, from the OS generator.
pub fn new_key() -> [u8; KEY_BYTES] {
    let mut key = [0u8; KEY_BYTES];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
    key
}

/// The key a stored secret holds, if it is one.
pub fn key_of(bytes: &[u8]) -> Option<[u8; KEY_BYTES]> {
    bytes.try_into().ok()
}

/// What a sealed state binds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub v: u32,
    /// The credential id the question was asked of.
    pub credential: String,
    /// The tool (transition id) called.
    pub transition: String,
    /// Digest of the call's canonical arguments.
    pub arguments: String,
    /// The pending approval asked about.
    pub approval: String,
    /// Unix seconds after which the state is refused.
    pub expires_at: u64,
}

impl State {
    pub fn new(credential: &Ref, transition: &str, arguments: Ref, approval: &str, expires_at: u64) -> State {
        State {
            v: VERSION,
            credential: credential.hex(),
            transition: transition.to_string(),
            arguments: arguments.hex(),
            approval: approval.to_string(),
            expires_at,
        }
    }
}

/// Why a state was refused (for the log and the error's detail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsealed {
    #[error("the request state is malformed")]
    Malformed,
    #[error("the request state's seal does not verify")]
    Tampered,
    #[error("the request state expired")]
    Expired,
    #[error("the request state was issued to another credential")]
    Foreign,
    #[error("the request state belongs to another tool or other arguments")]
    OtherCall,
}

fn mac(key: &[u8; KEY_BYTES]) -> Hmac<Sha256> {
    // HMAC takes a key of any length: this cannot fail.
    <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC key")
}

/// `base64url(json) "." base64url(hmac)`.
pub fn seal(key: &[u8; KEY_BYTES], state: &State) -> String {
    let body = serde_json::to_vec(state).unwrap_or_default();
    let mut m = mac(key);
    m.update(&body);
    format!("{}.{}", B64.encode(&body), B64.encode(m.finalize().into_bytes()))
}

/// The call a state must belong to: credential, tool, arguments digest.
pub type Belongs<'a> = (&'a Ref, &'a str, Ref);

/// The state `text` seals, if its seal verifies (in constant time) and it is
/// unexpired, for this credential, tool and arguments.
pub fn unseal(
    key: &[u8; KEY_BYTES],
    text: &str,
    now: u64,
    (credential, transition, arguments): Belongs<'_>,
) -> Result<State, Unsealed> {
    if text.len() > STATE_MAX {
        return Err(Unsealed::Malformed);
    }
    let (body, tag) = text.split_once('.').ok_or(Unsealed::Malformed)?;
    let body = B64.decode(body).map_err(|_| Unsealed::Malformed)?;
    let tag = B64.decode(tag).map_err(|_| Unsealed::Malformed)?;
    let mut m = mac(key);
    m.update(&body);
    m.verify_slice(&tag).map_err(|_| Unsealed::Tampered)?;
    let state: State = serde_json::from_slice(&body).map_err(|_| Unsealed::Malformed)?;
    if state.v != VERSION {
        return Err(Unsealed::Malformed);
    }
    if now >= state.expires_at {
        return Err(Unsealed::Expired);
    }
    if state.credential != credential.hex() {
        return Err(Unsealed::Foreign);
    }
    if state.transition != transition || state.arguments != arguments.hex() {
        return Err(Unsealed::OtherCall);
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; KEY_BYTES] = [7; KEY_BYTES];

    fn state() -> State {
        State::new(&Ref::of(b"cred"), "tool", Ref::of(b"args"), "ap-0123456789abcdef", 100)
    }

    fn check(text: &str, now: u64) -> Result<State, Unsealed> {
        unseal(&KEY, text, now, (&Ref::of(b"cred"), "tool", Ref::of(b"args")))
    }

    #[test]
    fn a_sealed_state_opens_for_its_own_call_until_it_expires() {
        let sealed = seal(&KEY, &state());
        assert_eq!(check(&sealed, 99), Ok(state()));
        assert_eq!(check(&sealed, 100), Err(Unsealed::Expired));
    }

    #[test]
    fn a_state_changed_by_one_field_or_sealed_with_another_key_is_tampered() {
        let sealed = seal(&KEY, &state());
        let (body, tag) = sealed.split_once('.').unwrap();
        let mut forged: State = serde_json::from_slice(&B64.decode(body).unwrap()).unwrap();
        forged.approval = "ap-ffffffffffffffff".into();
        let forged = format!("{}.{tag}", B64.encode(serde_json::to_vec(&forged).unwrap()));
        assert_eq!(check(&forged, 1), Err(Unsealed::Tampered));
        assert_eq!(check(&seal(&[8; KEY_BYTES], &state()), 1), Err(Unsealed::Tampered));
        for junk in ["", ".", "abc", "a.b.c", &"x".repeat(STATE_MAX + 1)] {
            assert!(check(junk, 1).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn a_state_is_refused_for_another_credential_tool_or_arguments() {
        let sealed = seal(&KEY, &state());
        let other = |c: &[u8], t: &str, a: &[u8]| unseal(&KEY, &sealed, 1, (&Ref::of(c), t, Ref::of(a)));
        assert_eq!(other(b"someone else", "tool", b"args"), Err(Unsealed::Foreign));
        assert_eq!(other(b"cred", "other-tool", b"args"), Err(Unsealed::OtherCall));
        assert_eq!(other(b"cred", "tool", b"other args"), Err(Unsealed::OtherCall));
    }
}
