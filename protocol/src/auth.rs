//! The `Authorization: Bearer <credential>` header and the per-surface
//! renderings of a session denial.
//!
//! Parsing is here; resolving the token (sha256, store lookup, expiry) is the
//! server's. The server turns the outcome into a [`SessionDenial`] and renders
//! it with [`mcp_denial`], [`a2a_denial`] or [`rest_denial`].

use crate::a2a::{self, A2aReply};
use crate::rest::{RestClass, RestError};
use crate::{CONTENT_TYPE_TEXT, HttpReply, RpcId};

/// Length of a session credential in lowercase hex digits.
pub const CREDENTIAL_HEX_LEN: usize = 64;

/// The scheme prefix, case-sensitive as the seed writes it, with its one space.
pub const BEARER_PREFIX: &str = "Bearer ";

/// MCP 401 text (and A2A -32001 message) for a missing header.
pub const MSG_SESSION_ABSENT: &str = "session credential is absent: send Authorization: Bearer <session-credential>";
/// MCP 401 text, A2A -32600 message and REST `InvalidSession` message.
pub const MSG_SESSION_MALFORMED: &str = "malformed Authorization header: expected Bearer <64-hex-credential>";
/// Token well-formed but not in the store.
pub const MSG_SESSION_UNKNOWN: &str = "unknown session credential";
/// Token known but past its expiry.
pub const MSG_SESSION_EXPIRED: &str = "session credential has expired";
/// REST `SessionAbsent` message (the agent card route).
pub const MSG_REST_SESSION_ABSENT: &str =
    "a session credential is required: no Authorization Bearer header was present";

/// A well-formed session credential: exactly 64 lowercase hex digits.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Token(String);

impl Token {
    /// The 64-hex credential text (hash it before any lookup).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Consumes the token, giving its text.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Debug for Token {
    // A credential must not reach logs through a stray `{:?}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Why an `Authorization` header yields no token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BearerError {
    #[error("{MSG_SESSION_ABSENT}")]
    Absent,
    #[error("{MSG_SESSION_MALFORMED}")]
    Malformed,
}

/// Parses the raw `Authorization` header value (the first one, if repeated).
///
/// `None` and an empty value are `Absent` (Go's `Header.Get` cannot tell them
/// apart). Anything but the scheme `Bearer` (in any case: RFC 9110 §11.1 makes
/// auth schemes case-insensitive), one space and 64 lowercase hex digits is
/// `Malformed`: no other scheme, no extra spaces, no trailing text, and the
/// bytes must be valid UTF-8.
pub fn parse_bearer(authorization_header: Option<&[u8]>) -> Result<Token, BearerError> {
    let raw = match authorization_header {
        None => return Err(BearerError::Absent),
        Some([]) => return Err(BearerError::Absent),
        Some(b) => b,
    };
    let text = std::str::from_utf8(raw).map_err(|_| BearerError::Malformed)?;
    let hex = strip_scheme(text).ok_or(BearerError::Malformed)?;
    let well_formed =
        hex.len() == CREDENTIAL_HEX_LEN && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return Err(BearerError::Malformed);
    }
    Ok(Token(hex.to_owned()))
}

/// The credential after `Bearer ` when the header starts with that scheme, in
/// any letter case.
fn strip_scheme(header: &str) -> Option<&str> {
    let scheme = header.get(..BEARER_PREFIX.len())?;
    scheme.eq_ignore_ascii_case(BEARER_PREFIX).then(|| &header[BEARER_PREFIX.len()..])
}

/// The `Basic` scheme's prefix (RFC 7617), matched in any letter case.
pub const BASIC_PREFIX: &str = "Basic ";

/// The longest `Basic` credentials read, in base64: a user name of a few
/// hundred bytes beside the 64-hex password.
pub const BASIC_CREDENTIALS_MAX: usize = 512;

/// A credential for the reads a daemon may close: `Bearer <64 hex>`, exactly as
/// [`parse_bearer`] takes it, or `Basic base64(user:<64 hex>)`, what a browser
/// sends once a `Basic` challenge has prompted its user (the user name is not
/// read). Anything else is `Malformed`.
pub fn parse_credential(authorization_header: Option<&[u8]>) -> Result<Token, BearerError> {
    let basic = authorization_header.and_then(|raw| {
        let scheme = raw.get(..BASIC_PREFIX.len())?;
        scheme.eq_ignore_ascii_case(BASIC_PREFIX.as_bytes()).then(|| &raw[BASIC_PREFIX.len()..])
    });
    match basic {
        Some(encoded) => basic_password(encoded).ok_or(BearerError::Malformed),
        None => parse_bearer(authorization_header),
    }
}

/// The 64-hex password of `Basic` credentials (`user:password` in standard base64).
fn basic_password(encoded: &[u8]) -> Option<Token> {
    use base64::Engine;
    if encoded.len() > BASIC_CREDENTIALS_MAX {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
    let (_user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    let well_formed = password.len() == CREDENTIAL_HEX_LEN
        && password.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    well_formed.then(|| Token(password.to_owned()))
}

/// Every way a request can fail to present a live session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionDenial {
    Absent,
    Malformed,
    Unknown,
    Expired,
}

impl From<BearerError> for SessionDenial {
    fn from(e: BearerError) -> Self {
        match e {
            BearerError::Absent => SessionDenial::Absent,
            BearerError::Malformed => SessionDenial::Malformed,
        }
    }
}

impl SessionDenial {
    /// The seed's MCP text for this denial (also the A2A message).
    pub fn message(self) -> &'static str {
        match self {
            SessionDenial::Absent => MSG_SESSION_ABSENT,
            SessionDenial::Malformed => MSG_SESSION_MALFORMED,
            SessionDenial::Unknown => MSG_SESSION_UNKNOWN,
            SessionDenial::Expired => MSG_SESSION_EXPIRED,
        }
    }
}

/// HTTP status of every MCP denial.
pub const MCP_DENIAL_STATUS: u16 = 401;

/// `POST /mcp/` denial: 401, plain text, `msg\n` (as Go's `http.Error`).
pub fn mcp_denial(denial: SessionDenial) -> HttpReply {
    let mut body = denial.message().as_bytes().to_vec();
    body.push(b'\n');
    HttpReply::new(MCP_DENIAL_STATUS, CONTENT_TYPE_TEXT, body)
}

/// A2A code for absent, unknown and expired sessions.
pub const A2A_SESSION_DENIED_CODE: i64 = -32001;
/// A2A code for a malformed header.
pub const A2A_INVALID_REQUEST_CODE: i64 = -32600;

/// `POST /a2a/` denial: a JSON-RPC error with `id: null` (denials come before
/// the body is read), inside HTTP 200.
pub fn a2a_denial(denial: SessionDenial) -> A2aReply {
    let code = match denial {
        SessionDenial::Malformed => A2A_INVALID_REQUEST_CODE,
        _ => A2A_SESSION_DENIED_CODE,
    };
    a2a::error(&RpcId::Null, code, denial.message())
}

/// Agent card denial as a REST envelope.
pub fn rest_denial(denial: SessionDenial) -> RestError {
    match denial {
        SessionDenial::Absent => RestError::new(RestClass::SessionAbsent, MSG_REST_SESSION_ABSENT),
        SessionDenial::Malformed => RestError::new(RestClass::InvalidSession, MSG_SESSION_MALFORMED),
        SessionDenial::Unknown => RestError::new(RestClass::SessionUnknown, MSG_SESSION_UNKNOWN),
        SessionDenial::Expired => RestError::new(RestClass::SessionExpired, MSG_SESSION_EXPIRED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn header(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn well_formed_bearer_gives_the_hex_token() {
        let h = header(&format!("Bearer {HEX}")).unwrap();
        let t = parse_bearer(Some(&h)).unwrap();
        assert_eq!(t.as_str(), HEX);
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
    }

    #[test]
    fn the_scheme_is_matched_in_any_letter_case() {
        for scheme in ["bearer", "BEARER", "BeArEr"] {
            let t = parse_bearer(Some(format!("{scheme} {HEX}").as_bytes())).unwrap();
            assert_eq!(t.as_str(), HEX, "{scheme}");
        }
    }

    #[test]
    fn missing_or_empty_header_is_absent() {
        assert_eq!(parse_bearer(None), Err(BearerError::Absent));
        assert_eq!(parse_bearer(Some(b"")), Err(BearerError::Absent));
    }

    #[test]
    fn anything_but_the_exact_form_is_malformed() {
        let bad = [
            format!("Bearer  {HEX}"),
            format!("bearer\t{HEX}"),
            format!("Bearer {HEX} "),
            format!(" Bearer {HEX}"),
            format!("Bearer\t{HEX}"),
            format!("Bearer {}", HEX.to_uppercase()),
            format!("Bearer {}", &HEX[..63]),
            format!("Bearer {HEX}0"),
            format!("Bearer {}g", &HEX[..63]),
            format!("Basic {HEX}"),
            "Bearer".to_owned(),
            "Bearer ".to_owned(),
            HEX.to_owned(),
        ];
        for b in bad {
            assert_eq!(parse_bearer(Some(b.as_bytes())), Err(BearerError::Malformed), "{b:?}");
        }
    }

    fn basic(user_password: &str) -> Vec<u8> {
        use base64::Engine;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_password)).into_bytes()
    }

    #[test]
    fn a_credential_is_a_bearer_token_or_a_basic_password_under_any_user_name() {
        for header in
            [format!("Bearer {HEX}").into_bytes(), basic(&format!("operator:{HEX}")), basic(&format!(":{HEX}"))]
        {
            assert_eq!(parse_credential(Some(&header)).unwrap().as_str(), HEX);
        }
        let any_case = String::from_utf8(basic(&format!("x:{HEX}"))).unwrap().replacen("Basic", "bAsIc", 1);
        assert_eq!(parse_credential(Some(any_case.as_bytes())).unwrap().as_str(), HEX, "the scheme in any case");
        assert_eq!(parse_credential(None), Err(BearerError::Absent));
        assert_eq!(parse_credential(Some(b"")), Err(BearerError::Absent));
    }

    #[test]
    fn basic_credentials_without_a_64_hex_password_are_malformed() {
        let long_user = format!("{}:{HEX}", "u".repeat(BASIC_CREDENTIALS_MAX));
        let bad = [
            basic(HEX),
            basic(&format!("u:{}", HEX.to_uppercase())),
            basic(&format!("u:{HEX} ")),
            basic(&format!("u:{}", &HEX[..63])),
            basic(&long_user),
            b"Basic !!!not-base64".to_vec(),
            b"Basic ".to_vec(),
            [b"Basic ".as_slice(), &[0xff; 8]].concat(),
        ];
        for b in bad {
            assert_eq!(parse_credential(Some(&b)), Err(BearerError::Malformed), "{:?}", String::from_utf8_lossy(&b));
        }
    }

    #[test]
    fn non_utf8_header_is_malformed() {
        let mut h = b"Bearer ".to_vec();
        h.extend_from_slice(&[0xff; 64]);
        assert_eq!(parse_bearer(Some(&h)), Err(BearerError::Malformed));
    }

    #[test]
    fn mcp_denials_are_401_plain_text_with_the_seed_messages() {
        let cases = [
            (SessionDenial::Absent, "session credential is absent: send Authorization: Bearer <session-credential>\n"),
            (SessionDenial::Malformed, "malformed Authorization header: expected Bearer <64-hex-credential>\n"),
            (SessionDenial::Unknown, "unknown session credential\n"),
            (SessionDenial::Expired, "session credential has expired\n"),
        ];
        for (d, text) in cases {
            let r = mcp_denial(d);
            assert_eq!(r.status, 401);
            assert_eq!(r.body_text(), text);
            assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
            assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        }
    }

    #[test]
    fn a2a_absent_denial_is_32001_with_go_escaped_text() {
        let r = a2a_denial(SessionDenial::Absent).into_http();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(
            r.body_text(),
            "{\"error\":{\"code\":-32001,\"message\":\"session credential is absent: send Authorization: Bearer \\u003csession-credential\\u003e\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n"
        );
    }

    #[test]
    fn a2a_malformed_denial_is_32600() {
        let r = a2a_denial(SessionDenial::Malformed);
        assert_eq!(r.error_code(), Some(-32600));
        assert_eq!(r.error_message(), Some(MSG_SESSION_MALFORMED));
    }

    #[test]
    fn a2a_unknown_and_expired_denials_are_32001() {
        let u = a2a_denial(SessionDenial::Unknown);
        assert_eq!(u.error_code(), Some(-32001));
        assert_eq!(u.error_message(), Some("unknown session credential"));
        let e = a2a_denial(SessionDenial::Expired);
        assert_eq!(e.error_code(), Some(-32001));
        assert_eq!(e.error_message(), Some("session credential has expired"));
    }

    #[test]
    fn card_denials_are_rest_envelopes() {
        let a = rest_denial(SessionDenial::Absent).into_reply();
        assert_eq!(a.status, 401);
        assert_eq!(
            a.body_text(),
            "{\"error\":{\"class\":\"SessionAbsent\",\"message\":\"a session credential is required: no Authorization Bearer header was present\"}}\n"
        );
        let m = rest_denial(SessionDenial::Malformed);
        assert_eq!((m.class, m.status()), (RestClass::InvalidSession, 400));
        let u = rest_denial(SessionDenial::Unknown);
        assert_eq!((u.class, u.status()), (RestClass::SessionUnknown, 401));
        let e = rest_denial(SessionDenial::Expired);
        assert_eq!((e.class, e.status()), (RestClass::SessionExpired, 401));
    }
}
