//! MCP and A2A wire logic for World, as pure functions over values.
//!
//! Nothing here performs I/O: bytes and values come in, [`HttpReply`]s and
//! values go out. The server crate is a thin shell around these functions.
//!
//! # MCP: a two-step design
//!
//! `POST /mcp/` may have to run transitions, which is slow and asynchronous,
//! so the handler is split in two pure steps with the server's work between:
//!
//! 1. [`mcp::plan`] checks the transport (Content-Type, Accept, protocol
//!    version), parses the body (single message or batch) and answers every
//!    item it can on its own (`initialize`, `ping`, `tools/list`, protocol
//!    errors). Items that need a transition become [`mcp::Call`]s.
//! 2. The server executes the calls in order (fresh admission, fresh task id
//!    for each) and stops at the first failure.
//! 3. [`mcp::finish`] turns the plan plus the outcomes into the one SSE reply,
//!    or into the frozen host-failure envelope if a call failed.
//!
//! Before planning, the server answers non-POST with
//! [`mcp::method_not_allowed`], an over-long body with [`mcp::body_too_large`],
//! a session denial with [`auth::mcp_denial`], and a refused tool surface
//! ([`surface::build_surface`] failing) with [`mcp::host_failure_for_body`].
//!
//! # A2A
//!
//! `POST /a2a/` is one request, one reply: [`a2a::parse`] gives an
//! [`a2a::A2aRequest`] (or the error reply), the server runs or looks up the
//! task, then renders with [`a2a::task_completed`], [`a2a::task_snapshot`] or
//! an [`a2a::A2aError`]. The agent card is [`a2a::agent_card`].
//!
//! # REST
//!
//! [`rest::RestError`] renders the `{"error":{"class","message"}}` envelope
//! used by the `/v1` routes and the agent card.
//!
//! All JSON on the wire is encoded like Go's `encoding/json` (compact, with
//! `<`, `>` and `&` escaped), because the upstream daemon is Go and its
//! byte-level behaviour is the contract.

pub mod a2a;
pub mod auth;
pub mod json;
pub mod mcp;
pub mod names;
pub mod rest;
mod rpc;
pub mod surface;

/// An HTTP response as plain data; the server copies it onto the wire.
///
/// `headers` always includes an explicit `Content-Type` and
/// `X-Content-Type-Options: nosniff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl HttpReply {
    /// A reply with the given content type and the nosniff header.
    pub fn new(status: u16, content_type: &str, body: Vec<u8>) -> Self {
        HttpReply {
            status,
            headers: vec![(HEADER_CONTENT_TYPE, content_type.to_owned()), (HEADER_NOSNIFF, "nosniff".to_owned())],
            body,
        }
    }

    /// `application/json` with the nosniff header.
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        HttpReply::new(status, "application/json", body)
    }

    /// `text/plain; charset=utf-8` with the nosniff header.
    pub fn text(status: u16, body: impl Into<String>) -> Self {
        HttpReply::new(status, "text/plain; charset=utf-8", body.into().into_bytes())
    }

    /// The first value of header `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as UTF-8 text (lossy), mostly for tests and logs.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub const HEADER_CONTENT_TYPE: &str = "Content-Type";
pub const HEADER_NOSNIFF: &str = "X-Content-Type-Options";
pub const HEADER_CACHE_CONTROL: &str = "Cache-Control";
pub const HEADER_ALLOW: &str = "Allow";
pub const HEADER_CONNECTION: &str = "Connection";

pub const CONTENT_TYPE_JSON: &str = "application/json";
pub const CONTENT_TYPE_TEXT: &str = "text/plain; charset=utf-8";
pub const CONTENT_TYPE_SSE: &str = "text/event-stream";

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON-RPC id exactly as the client sent it.
///
/// Numbers keep their original text (`1.0`, `1e3`, `123456789012345678901`
/// are echoed as sent, not through `f64`); strings are re-encoded (same
/// value, Go escaping). Ids of any other JSON type are invalid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum RpcId {
    /// `"id": null`, or no usable id (error replies to unparsable input).
    #[default]
    Null,
    /// The number's JSON text as sent.
    Number(String),
    String(String),
}

impl RpcId {
    /// Reads an id from its raw JSON; `None` for objects, arrays, booleans.
    pub(crate) fn from_raw(raw: &RawValue) -> Option<RpcId> {
        let text = raw.get().trim();
        match text.as_bytes().first()? {
            b'n' => Some(RpcId::Null),
            b'"' => serde_json::from_str::<String>(text).ok().map(RpcId::String),
            b'-' | b'0'..=b'9' => Some(RpcId::Number(text.to_owned())),
            _ => None,
        }
    }

    /// Converts a parsed value (numbers go through their `Value` text).
    pub fn from_value(v: &Value) -> Option<RpcId> {
        match v {
            Value::Null => Some(RpcId::Null),
            Value::Number(n) => Some(RpcId::Number(n.to_string())),
            Value::String(s) => Some(RpcId::String(s.clone())),
            _ => None,
        }
    }

    /// The id as a `serde_json::Value` (may round a huge number).
    pub fn to_value(&self) -> Value {
        match self {
            RpcId::Null => Value::Null,
            RpcId::String(s) => Value::String(s.clone()),
            RpcId::Number(n) => serde_json::from_str(n).unwrap_or(Value::Null),
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, RpcId::Null)
    }
}

impl From<i64> for RpcId {
    fn from(n: i64) -> Self {
        RpcId::Number(n.to_string())
    }
}

impl From<&str> for RpcId {
    fn from(s: &str) -> Self {
        RpcId::String(s.to_owned())
    }
}

impl Serialize for RpcId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RpcId::Null => serializer.serialize_unit(),
            RpcId::String(s) => serializer.serialize_str(s),
            RpcId::Number(n) => match RawValue::from_string(n.clone()) {
                Ok(raw) => raw.serialize(serializer),
                Err(_) => serializer.serialize_unit(),
            },
        }
    }
}
