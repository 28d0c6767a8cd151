//! Row codecs: every value row is one format-version byte followed by CBOR.
//!
//! This module and `canonical` are the on-disk format. A row that does not decode,
//! or carries a version this binary does not know, is a typed corruption naming
//! its table and key; it is never a panic.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The only row format version written by this binary.
pub const ROW_VERSION: u8 = 1;
/// Rows larger than this are refused on decode (payloads live elsewhere).
pub const ROW_BYTES_MAX: usize = 16 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt row in table {table} at key {key}: {detail}")]
pub struct Corruption {
    pub table: &'static str,
    pub key: String,
    pub detail: String,
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![ROW_VERSION];
    // Writing CBOR into a Vec cannot fail for these plain data types.
    ciborium::into_writer(value, &mut out).expect("CBOR encoding into memory");
    out
}

pub fn decode<T: DeserializeOwned>(
    table: &'static str,
    key: &dyn std::fmt::Display,
    bytes: &[u8],
) -> Result<T, Corruption> {
    let corrupt = |detail: String| Corruption { table, key: key.to_string(), detail };
    let (&version, body) = bytes.split_first().ok_or_else(|| corrupt("empty row".into()))?;
    if version != ROW_VERSION {
        return Err(corrupt(format!("unknown row format version {version}")));
    }
    if bytes.len() > ROW_BYTES_MAX {
        return Err(corrupt(format!("row of {} bytes exceeds {ROW_BYTES_MAX}", bytes.len())));
    }
    let mut reader = body;
    let value: T = ciborium::from_reader(&mut reader).map_err(|e| corrupt(format!("CBOR: {e}")))?;
    if !reader.is_empty() {
        return Err(corrupt(format!("{} trailing bytes after the row", reader.len())));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ObjectMeta, Session};
    use crate::refs::Ref;

    #[test]
    fn a_row_round_trips() {
        let meta = ObjectMeta {
            interface_hash: Ref::of(b"i"),
            semantic_id: "world/x".into(),
            provenance: "test".into(),
            size: 3,
        };
        let bytes = encode(&meta);
        assert_eq!(bytes[0], ROW_VERSION);
        assert_eq!(decode::<ObjectMeta>("objects", &"k", &bytes).unwrap(), meta);
    }

    #[test]
    fn bad_rows_are_typed_corruption_naming_table_and_key() {
        let good = encode(&Session { episode: "e".into(), grants: vec![], created_at: 1, expires_at: 2 });
        let mut wrong_version = good.clone();
        wrong_version[0] = 9;
        let e = decode::<Session>("sessions", &"abc", &wrong_version).unwrap_err();
        assert_eq!((e.table, e.key.as_str()), ("sessions", "abc"));
        assert!(e.detail.contains("version 9"));
        assert!(decode::<Session>("sessions", &"abc", &[]).is_err());
        assert!(decode::<Session>("sessions", &"abc", &good[..good.len() - 1]).is_err());
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(decode::<Session>("sessions", &"abc", &trailing).is_err());
    }
}
