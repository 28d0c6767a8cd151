//! Shared JSON-RPC 2.0 envelope pieces: raw member access and response bytes.

use crate::{RpcId, json};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

pub(crate) const CODE_PARSE_ERROR: i64 = -32700;
pub(crate) const CODE_INVALID_REQUEST: i64 = -32600;
pub(crate) const CODE_METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const CODE_INVALID_PARAMS: i64 = -32602;
pub(crate) const CODE_INTERNAL_ERROR: i64 = -32603;

/// A JSON object whose members are kept as raw JSON text, so ids can be
/// echoed exactly and `"id": null` is distinguishable from no id.
pub(crate) type RawObject = BTreeMap<String, Box<RawValue>>;

/// Why raw bytes are not a JSON object.
pub(crate) enum ObjectError {
    /// Not JSON at all (syntax, depth, encoding).
    Syntax(String),
    /// Valid JSON of another type; names the type found.
    NotObject(&'static str),
}

/// Name of a JSON value's type, from its first byte.
pub(crate) fn kind_of(raw: &RawValue) -> &'static str {
    match raw.get().trim_start().as_bytes().first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "boolean",
        Some(b'n') => "null",
        _ => "number",
    }
}

/// Parses one JSON value that must be an object.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<RawObject, ObjectError> {
    let raw: Box<RawValue> = serde_json::from_slice(bytes).map_err(|e| ObjectError::Syntax(e.to_string()))?;
    object_of(&raw)
}

/// Interprets an already-valid raw value as an object.
pub(crate) fn object_of(raw: &RawValue) -> Result<RawObject, ObjectError> {
    let kind = kind_of(raw);
    if kind != "object" {
        return Err(ObjectError::NotObject(kind));
    }
    serde_json::from_str(raw.get()).map_err(|e| ObjectError::Syntax(e.to_string()))
}

/// The member as a string, if it is one.
pub(crate) fn str_member(obj: &RawObject, key: &str) -> Option<String> {
    let raw = obj.get(key)?;
    serde_json::from_str::<String>(raw.get()).ok()
}

/// Whether `jsonrpc` is exactly the string "2.0".
pub(crate) fn is_jsonrpc_2(obj: &RawObject) -> bool {
    str_member(obj, "jsonrpc").as_deref() == Some("2.0")
}

/// The member parsed as a `Value` (subject to serde_json's depth limit).
pub(crate) fn value_member(obj: &RawObject, key: &str) -> Option<Result<Value, String>> {
    let raw = obj.get(key)?;
    Some(serde_json::from_str(raw.get()).map_err(|e| e.to_string()))
}

/// `id` handling: `None` = absent, `Some(None)` = present but not a valid id.
pub(crate) fn id_member(obj: &RawObject) -> Option<Option<RpcId>> {
    obj.get("id").map(|raw| RpcId::from_raw(raw))
}

/// A JSON-RPC error object: `{code, message, data?}`.
#[derive(Serialize)]
pub(crate) struct ErrorObject<'a> {
    pub(crate) code: i64,
    pub(crate) message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<&'a Value>,
}

#[derive(Serialize)]
struct ErrorResponse<'a> {
    jsonrpc: &'static str,
    id: &'a RpcId,
    error: ErrorObject<'a>,
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…}}` (MCP order).
pub(crate) fn error_bytes(id: &RpcId, code: i64, message: &str) -> Vec<u8> {
    json::to_vec(&ErrorResponse { jsonrpc: "2.0", id, error: ErrorObject { code, message, data: None } })
}

/// An error response whose error object carries `data`.
pub(crate) fn error_data_bytes(id: &RpcId, code: i64, message: &str, data: &Value) -> Vec<u8> {
    json::to_vec(&ErrorResponse { jsonrpc: "2.0", id, error: ErrorObject { code, message, data: Some(data) } })
}

#[derive(Serialize)]
struct ResultResponse<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RpcId,
    result: &'a T,
}

/// `{"jsonrpc":"2.0","id":…,"result":…}` (MCP order).
pub(crate) fn result_bytes<T: Serialize>(id: &RpcId, result: &T) -> Vec<u8> {
    json::to_vec(&ResultResponse { jsonrpc: "2.0", id, result })
}
