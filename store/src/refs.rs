//! Content addresses: `sha256:<64 lowercase hex>`.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::fmt;

/// The canonical text prefix of every ref.
pub const REF_PREFIX: &str = "sha256:";
/// Length of the canonical text form: prefix plus 64 hex digits.
pub const REF_TEXT_LEN: usize = 71;

/// A sha256 content address. Rows store the 32 raw bytes; every text surface uses
/// the canonical `sha256:<hex>` form.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ref(pub [u8; 32]);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("a ref must not be empty")]
    Empty,
    #[error("a ref must be sha256:<64 lowercase hex>")]
    Malformed,
}

impl Ref {
    /// The address of `bytes`.
    pub fn of(bytes: &[u8]) -> Ref {
        Ref(Sha256::digest(bytes).into())
    }

    /// Parses the canonical text form. Uppercase hex, a missing tag or a wrong
    /// length are refused, so that every ref has exactly one spelling.
    pub fn parse(text: &str) -> Result<Ref, RefError> {
        if text.is_empty() {
            return Err(RefError::Empty);
        }
        let hex_part = text.strip_prefix(REF_PREFIX).ok_or(RefError::Malformed)?;
        if hex_part.len() != 64 || !hex_part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(RefError::Malformed);
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).map_err(|_| RefError::Malformed)?;
        Ok(Ref(out))
    }

    /// Parses a ref that may be empty (`""` stands for "none", as in a genesis
    /// `observedHead` or a denied record's `resultRef`).
    pub fn parse_optional(text: &str) -> Result<Option<Ref>, RefError> {
        if text.is_empty() { Ok(None) } else { Ref::parse(text).map(Some) }
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The 64 hex digits, without an allocation.
    fn hex_digits(&self) -> [u8; 64] {
        let mut digits = [0u8; 64];
        hex::encode_to_slice(self.0, &mut digits).expect("64 digits for 32 bytes");
        digits
    }

    /// Appends the canonical text form.
    pub fn write_text(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(REF_PREFIX.as_bytes());
        out.extend_from_slice(&self.hex_digits());
    }
}

/// Renders an optional ref the way the wire does: `""` for none.
pub fn optional_text(r: Option<Ref>) -> String {
    r.map(|r| r.to_string()).unwrap_or_default()
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REF_PREFIX)?;
        let digits = self.hex_digits();
        f.write_str(std::str::from_utf8(&digits).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Ref {
    type Err = RefError;
    fn from_str(s: &str) -> Result<Ref, RefError> {
        Ref::parse(s)
    }
}

// Text in human-readable formats (JSON), 32 raw bytes in binary ones (CBOR rows).
impl Serialize for Ref {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() { s.collect_str(self) } else { s.serialize_bytes(&self.0) }
    }
}

impl<'de> Deserialize<'de> for Ref {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ref, D::Error> {
        struct RefVisitor;
        impl<'de> Visitor<'de> for RefVisitor {
            type Value = Ref;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sha256 ref")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Ref, E> {
                Ref::parse(v).map_err(E::custom)
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Ref, E> {
                let bytes: [u8; 32] = v.try_into().map_err(|_| E::invalid_length(v.len(), &self))?;
                Ok(Ref(bytes))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Ref, E> {
                self.visit_bytes(&v)
            }
        }
        if d.is_human_readable() { d.deserialize_str(RefVisitor) } else { d.deserialize_bytes(RefVisitor) }
    }
}

/// Every distinct canonical ref spelled out in `bytes` (JSON or not), in order
/// of first appearance, at most `max`. This is how the store learns which
/// objects a payload names, whatever its format.
pub fn refs_named_in(bytes: &[u8], max: usize) -> Vec<Ref> {
    let mut out: Vec<Ref> = vec![];
    let prefix = REF_PREFIX.as_bytes();
    let mut i = 0;
    while i + REF_TEXT_LEN <= bytes.len() && out.len() < max {
        // Jump to the next 's'; most payload bytes are skipped here.
        match bytes[i..bytes.len() - REF_TEXT_LEN + 1].iter().position(|&b| b == b's') {
            Some(off) => i += off,
            None => break,
        }
        if &bytes[i..i + prefix.len()] != prefix {
            i += 1;
            continue;
        }
        let hex_part = &bytes[i + prefix.len()..i + REF_TEXT_LEN];
        let mut raw = [0u8; 32];
        let lower = hex_part.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if lower && hex::decode_to_slice(hex_part, &mut raw).is_ok() {
            let r = Ref(raw);
            if !out.contains(&r) {
                out.push(r);
            }
            i += REF_TEXT_LEN;
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_found_in_any_payload() {
        let (a, b) = (Ref::of(b"a"), Ref::of(b"b"));
        let text = format!("3:x{{\"r\":\"{a}\",\"s\":[\"{b}\",\"{a}\"]}} sha256:XYZ {}", &b.to_string()[..60]);
        assert_eq!(refs_named_in(text.as_bytes(), 10), vec![a, b]);
        assert_eq!(refs_named_in(text.as_bytes(), 1), vec![a]);
        assert!(refs_named_in(b"", 10).is_empty());
    }

    #[test]
    fn the_text_form_round_trips() {
        let r = Ref::of(b"genesis");
        assert_eq!(Ref::parse(&r.to_string()).unwrap(), r);
        assert_eq!(r.to_string().len(), REF_TEXT_LEN);
    }

    #[test]
    fn non_canonical_spellings_are_refused() {
        let good = Ref::of(b"x").to_string();
        assert_eq!(Ref::parse(""), Err(RefError::Empty));
        assert_eq!(Ref::parse(&good.to_uppercase()), Err(RefError::Malformed));
        assert_eq!(Ref::parse(&good[7..]), Err(RefError::Malformed));
        assert_eq!(Ref::parse(&good[..70]), Err(RefError::Malformed));
        assert_eq!(Ref::parse(&format!("{good}0")), Err(RefError::Malformed));
        assert_eq!(Ref::parse(&good.replace("sha256", "sha512")), Err(RefError::Malformed));
        assert_eq!(Ref::parse_optional("").unwrap(), None);
    }

    #[test]
    fn known_vector_matches_sha256() {
        assert_eq!(Ref::of(b"").to_string(), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
