//! Canonical JSON: the byte form every semantic object and every hash preimage uses.
//!
//! Compact (no whitespace), object keys in ascending byte order (except the fixed-order
//! preimages below), strings escaped the way Go's `encoding/json` escapes them
//! (`<`, `>`, `&`, U+2028 and U+2029 as `\u00XX`/`\u20XX`, so hashes agree with
//! verifiers written against the reference system). Numbers are written as
//! `serde_json` prints them: integers exactly, floats in shortest round-trip form.

use crate::model::{EntryHeader, LogEntry};
use crate::refs::Ref;
use serde_json::Value;

/// Appends `s` as a JSON string literal with Go-compatible escaping.
pub fn write_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    // Most strings (refs, ids, names) escape nothing: copied at once. 0xE2
    // starts U+2028 and U+2029, which are escaped.
    if !s.bytes().any(|b| b < 0x20 || matches!(b, b'"' | b'\\' | b'<' | b'>' | b'&' | 0xE2)) {
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    for ch in s.chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => push_unicode_escape(out, ch as u32),
            c if (c as u32) < 0x20 => push_unicode_escape(out, c as u32),
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn push_unicode_escape(out: &mut Vec<u8>, code: u32) {
    out.extend_from_slice(format!("\\u{code:04x}").as_bytes());
}

/// Appends the canonical form of `value`.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            // Sort explicitly: the map's own order depends on serde_json features.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, key);
                out.push(b':');
                write_value(out, &map[key]);
            }
            out.push(b'}');
        }
    }
}

/// The canonical bytes of `value`.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value);
    out
}

/// Writes a JSON object whose keys come in the given (fixed) order.
pub struct FixedObject {
    out: Vec<u8>,
    first: bool,
}

impl FixedObject {
    pub fn new() -> FixedObject {
        FixedObject { out: vec![b'{'], first: true }
    }

    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_string(&mut self.out, key);
        self.out.push(b':');
        &mut self.out
    }

    pub fn uint(mut self, key: &str, v: u64) -> Self {
        // Writing into a Vec cannot fail.
        let _ = std::io::Write::write_fmt(self.key(key), format_args!("{v}"));
        self
    }

    pub fn str(mut self, key: &str, v: &str) -> Self {
        let out = self.key(key);
        write_string(out, v);
        self
    }

    /// A ref, in its text form (`sha256:<hex>`, nothing to escape).
    pub fn reference(mut self, key: &str, r: &Ref) -> Self {
        let out = self.key(key);
        out.push(b'"');
        r.write_text(out);
        out.push(b'"');
        self
    }

    pub fn bool(mut self, key: &str, v: bool) -> Self {
        self.key(key).extend_from_slice(if v { b"true" } else { b"false" });
        self
    }

    pub fn value(mut self, key: &str, v: &Value) -> Self {
        let out = self.key(key);
        write_value(out, v);
        self
    }

    /// Embeds bytes that are already canonical JSON.
    pub fn raw(mut self, key: &str, canonical_json: &[u8]) -> Self {
        self.key(key).extend_from_slice(canonical_json);
        self
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(b'}');
        self.out
    }
}

impl Default for FixedObject {
    fn default() -> Self {
        FixedObject::new()
    }
}

/// `entryHash` preimage: the six header fields in header order, then `transitionRef`.
pub fn entry_preimage(header: &EntryHeader, transition_ref: &Ref) -> Vec<u8> {
    FixedObject::new()
        .uint("entryIndex", header.entry_index)
        .uint("semanticsEpoch", header.semantics_epoch)
        .reference("transitionFn", &header.transition_fn)
        .reference("interpreter", &header.interpreter)
        .reference("prevEntryHash", &header.prev_entry_hash)
        .str("writtenBy", &header.written_by)
        .reference("transitionRef", transition_ref)
        .finish()
}

pub fn entry_hash(header: &EntryHeader, transition_ref: &Ref) -> Ref {
    Ref::of(&entry_preimage(header, transition_ref))
}

/// World ref preimage: `{"revision":N,"stateRoot":ref,"logHead":ref}`.
pub fn world_preimage(revision: u64, state_root: &Ref, log_head: &Ref) -> Vec<u8> {
    FixedObject::new()
        .uint("revision", revision)
        .reference("stateRoot", state_root)
        .reference("logHead", log_head)
        .finish()
}

pub fn world_ref(revision: u64, state_root: &Ref, log_head: &Ref) -> Ref {
    Ref::of(&world_preimage(revision, state_root, log_head))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PreimageError {
    #[error("preimage is not JSON of the expected shape: {0}")]
    Shape(String),
    #[error("preimage is valid JSON but not in canonical form")]
    NotCanonical,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EntryPreimageFields {
    entry_index: u64,
    semantics_epoch: u64,
    transition_fn: Ref,
    interpreter: Ref,
    prev_entry_hash: Ref,
    written_by: String,
    transition_ref: Ref,
}

/// Parses `entryHash` preimage bytes back into an entry, accepting only the exact
/// canonical bytes (re-encoding must reproduce the input). Third parties use the
/// same rule, so two encodings of one entry can never hash differently unnoticed.
pub fn parse_entry_preimage(bytes: &[u8]) -> Result<LogEntry, PreimageError> {
    let f: EntryPreimageFields = serde_json::from_slice(bytes).map_err(|e| PreimageError::Shape(e.to_string()))?;
    let header = EntryHeader {
        entry_index: f.entry_index,
        semantics_epoch: f.semantics_epoch,
        transition_fn: f.transition_fn,
        interpreter: f.interpreter,
        prev_entry_hash: f.prev_entry_hash,
        written_by: f.written_by,
    };
    if entry_preimage(&header, &f.transition_ref) != bytes {
        return Err(PreimageError::NotCanonical);
    }
    let entry_hash = Ref::of(bytes);
    Ok(LogEntry { header, entry_hash, transition_ref: f.transition_ref })
}

/// What an approval binds: one session's exact effect request under one
/// transition (never the request's time, so a retry of the same call finds
/// it). `payload` is the effect's canonical JSON payload.
pub fn approval_digest(
    credential: &Ref,
    transition: &str,
    effect: &str,
    scope: &str,
    cost: u64,
    payload: &[u8],
) -> Ref {
    let preimage = FixedObject::new()
        .reference("credentialId", credential)
        .str("transition", transition)
        .str("effect", effect)
        .str("scope", scope)
        .uint("cost", cost)
        .raw("payload", payload)
        .finish();
    Ref::of(&preimage)
}

/// `"<len(effect)>:<effect><len(scope)>:<scope><cost>:<now>:" + payload`, the
/// request encoding of the reference system.
pub fn request_bytes(effect: &str, scope: &str, cost: u64, now: u64, payload_canonical: &[u8]) -> Vec<u8> {
    let mut out = format!("{}:{effect}{}:{scope}{cost}:{now}:", effect.len(), scope.len()).into_bytes();
    out.extend_from_slice(payload_canonical);
    out
}

/// A request object read back: effect, scope, cost, when, and the canonical
/// JSON payload (the inverse of [`request_bytes`]); `None` if it is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedRequest<'a> {
    pub effect: &'a str,
    pub scope: &'a str,
    pub cost: u64,
    pub at: u64,
    pub payload: &'a [u8],
}

pub fn parse_request(bytes: &[u8]) -> Option<ParsedRequest<'_>> {
    // `<digits>:` then the rest.
    fn number(b: &[u8]) -> Option<(u64, &[u8])> {
        let colon = b.iter().position(|c| *c == b':')?;
        let digits = &b[..colon];
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some((std::str::from_utf8(digits).ok()?.parse().ok()?, &b[colon + 1..]))
    }
    fn sized(b: &[u8]) -> Option<(&str, &[u8])> {
        let (len, rest) = number(b)?;
        let len = usize::try_from(len).ok().filter(|l| *l <= rest.len())?;
        Some((std::str::from_utf8(&rest[..len]).ok()?, &rest[len..]))
    }
    let (effect, rest) = sized(bytes)?;
    let (scope, rest) = sized(rest)?;
    let (cost, rest) = number(rest)?;
    let (at, payload) = number(rest)?;
    Some(ParsedRequest { effect, scope, cost, at, payload })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_quickstart_goal_is_the_canonical_json_quickstart_always_wrote() {
        let goal = json!({"world": "genesis", "createdBy": crate::model::QUICKSTART_AUTHOR});
        assert_eq!(to_vec(&goal), crate::model::QUICKSTART_GOAL);
    }

    #[test]
    fn strings_are_escaped_like_go() {
        let mut out = Vec::new();
        write_string(&mut out, "a<b>&c\u{2028}\"\\\n\u{1}\u{8}é");
        assert_eq!(String::from_utf8(out).unwrap(), "\"a\\u003cb\\u003e\\u0026c\\u2028\\\"\\\\\\n\\u0001\\bé\"");
    }

    #[test]
    fn each_character_that_escapes_is_escaped_alone_in_an_otherwise_plain_string() {
        let written = |s: &str| {
            let mut out = Vec::new();
            write_string(&mut out, s);
            String::from_utf8(out).unwrap()
        };
        for (plain, escaped) in [
            ("sha256:00ff", "\"sha256:00ff\""),
            ("é日本\u{2030}", "\"é日本\u{2030}\""),
            ("x\u{2029}", "\"x\\u2029\""),
            ("x<", "\"x\\u003c\""),
            ("x&", "\"x\\u0026\""),
            ("x\u{1f}", "\"x\\u001f\""),
            ("x\"", "\"x\\\"\""),
            ("x\\", "\"x\\\\\""),
        ] {
            assert_eq!(written(plain), escaped, "{plain:?}");
        }
        let r = Ref::of(b"r");
        let mut out = Vec::new();
        r.write_text(&mut out);
        assert_eq!(out, r.to_string().into_bytes());
        assert_eq!(
            FixedObject::new().reference("r", &r).finish(),
            FixedObject::new().str("r", &r.to_string()).finish()
        );
    }

    #[test]
    fn objects_come_out_with_sorted_keys_and_no_spaces() {
        let v = json!({"b": 1, "a": [true, null, "x"], "B": {"z": 1.5, "y": -2}});
        assert_eq!(String::from_utf8(to_vec(&v)).unwrap(), r#"{"B":{"y":-2,"z":1.5},"a":[true,null,"x"],"b":1}"#);
    }

    fn header() -> EntryHeader {
        EntryHeader {
            entry_index: 5,
            semantics_epoch: 1,
            transition_fn: Ref::of(b"fn"),
            interpreter: Ref::of(b"interp"),
            prev_entry_hash: Ref::of(b"prev"),
            written_by: "coordinator:mcp".into(),
        }
    }

    #[test]
    fn the_entry_preimage_has_the_documented_field_order() {
        let bytes = entry_preimage(&header(), &Ref::of(b"record"));
        let text = String::from_utf8(bytes).unwrap();
        let expected = format!(
            "{{\"entryIndex\":5,\"semanticsEpoch\":1,\"transitionFn\":\"{}\",\"interpreter\":\"{}\",\"prevEntryHash\":\"{}\",\"writtenBy\":\"coordinator:mcp\",\"transitionRef\":\"{}\"}}",
            Ref::of(b"fn"),
            Ref::of(b"interp"),
            Ref::of(b"prev"),
            Ref::of(b"record")
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn the_world_preimage_has_the_documented_field_order() {
        let (s, l) = (Ref::of(b"s"), Ref::of(b"l"));
        let text = String::from_utf8(world_preimage(3, &s, &l)).unwrap();
        assert_eq!(text, format!("{{\"revision\":3,\"stateRoot\":\"{s}\",\"logHead\":\"{l}\"}}"));
    }

    #[test]
    fn an_entry_preimage_parses_back_only_in_canonical_form() {
        let bytes = entry_preimage(&header(), &Ref::of(b"record"));
        let entry = parse_entry_preimage(&bytes).unwrap();
        assert_eq!(entry.header, header());
        assert_eq!(entry.entry_hash, Ref::of(&bytes));
        let mut spaced = bytes.clone();
        spaced.insert(1, b' ');
        assert_eq!(parse_entry_preimage(&spaced), Err(PreimageError::NotCanonical));
        assert!(matches!(parse_entry_preimage(b"{}"), Err(PreimageError::Shape(_))));
    }
}
