//! JSON encoding with Go `encoding/json` escaping.
//!
//! The upstream daemon is written in Go, whose encoder escapes `<`, `>`, `&`,
//! U+2028 and U+2029 inside strings. Clients that compare bytes (goldens,
//! replay tools) see the same output from us when every wire body goes
//! through [`to_vec`].

use serde::Serialize;
use std::io;

/// A compact formatter that additionally escapes the characters Go escapes.
struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let mut start = 0;
        for (i, ch) in fragment.char_indices() {
            let escape = match ch {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..i])?;
            writer.write_all(escape.as_bytes())?;
            start = i + ch.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

/// Serialises `value` compactly with Go escaping.
///
/// Serialising our own wire types and `serde_json::Value` cannot fail (all
/// map keys are strings); should it ever, the output is JSON `null` rather
/// than a panic.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    if value.serialize(&mut ser).is_err() {
        return b"null".to_vec();
    }
    out
}

/// Like [`to_vec`], plus the trailing newline Go's `json.Encoder` writes.
pub fn to_line<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = to_vec(value);
    out.push(b'\n');
    out
}

/// Compact JSON text without Go escaping, for values embedded as strings
/// (the MCP `text` block); the outer encoder escapes them once.
pub(crate) fn to_plain_string(value: &serde_json::Value) -> String {
    value.to_string()
}

/// Go's `%q` formatting of a string (`strconv.Quote`), used where upstream
/// error texts quote a client-supplied value.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() || c == '\u{feff}' => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn html_characters_are_escaped_like_go() {
        let v = json!({"m": "Bearer <session-credential> & \u{2028}"});
        assert_eq!(to_vec(&v), br#"{"m":"Bearer \u003csession-credential\u003e \u0026 \u2028"}"#.to_vec());
    }

    #[test]
    fn control_characters_keep_json_escapes() {
        let v = json!("a\nb\u{1}\"\\");
        assert_eq!(to_vec(&v), br#""a\nb\u0001\"\\""#.to_vec());
    }

    #[test]
    fn line_ends_with_newline() {
        assert_eq!(to_line(&json!({})), b"{}\n".to_vec());
    }

    #[test]
    fn go_quote_matches_strconv_quote() {
        assert_eq!(go_quote("x"), "\"x\"");
        assert_eq!(go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(go_quote("t\u{1}\n"), "\"t\\x01\\n\"");
        assert_eq!(go_quote("é/ü"), "\"é/ü\"");
        assert_eq!(go_quote("\u{85}"), "\"\\u0085\"");
    }
}
