//! The reversible escape between transition ids and MCP tool names.
//!
//! `_` → `_u`, `.` → `_d`, `/` → `_s`; every other allowed character maps to
//! itself. Because `_` only ever starts an escape, the code is prefix-free and
//! therefore injective: two different ids never share a tool name.

/// Longest MCP tool name (bytes) the surface may carry.
pub const MCP_TOOL_NAME_MAX: usize = 64;

/// Why a tool name or a transition id is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("name is empty")]
    Empty,
    #[error("name is {len} bytes long, over the {MCP_TOOL_NAME_MAX}-byte limit")]
    TooLong { len: usize },
    #[error("character {ch:?} at byte {at} is not allowed")]
    InvalidChar { ch: char, at: usize },
    #[error("name ends with a dangling '_'")]
    DanglingEscape,
    #[error("unknown escape '_{ch}' at byte {at}")]
    UnknownEscape { ch: char, at: usize },
}

/// Whether `c` may appear in a transition id.
fn is_id_char(c: char) -> bool {
    matches!(c, 'a'..='z' | '0'..='9' | '-' | '.' | '_' | '/')
}

/// Encodes a transition id as an MCP tool name. Total: characters outside the
/// id alphabet pass through unchanged (validate first if that matters).
pub fn encode(id: &str) -> String {
    let mut out = String::with_capacity(id.len() + 8);
    for c in id.chars() {
        match c {
            '_' => out.push_str("_u"),
            '.' => out.push_str("_d"),
            '/' => out.push_str("_s"),
            c => out.push(c),
        }
    }
    out
}

/// Decodes an MCP tool name back to its transition id.
///
/// Accepts only `a-z 0-9 -` and the three escapes; rejects the empty name,
/// names over [`MCP_TOOL_NAME_MAX`] bytes, a trailing `_`, unknown escapes
/// and uppercase.
pub fn decode(name: &str) -> Result<String, NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MCP_TOOL_NAME_MAX {
        return Err(NameError::TooLong { len: name.len() });
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            'a'..='z' | '0'..='9' | '-' => out.push(c),
            '_' => match chars.next() {
                Some((_, 'u')) => out.push('_'),
                Some((_, 'd')) => out.push('.'),
                Some((_, 's')) => out.push('/'),
                Some((at, ch)) => return Err(NameError::UnknownEscape { ch, at }),
                None => return Err(NameError::DanglingEscape),
            },
            ch => return Err(NameError::InvalidChar { ch, at }),
        }
    }
    Ok(out)
}

/// Checks a transition id: non-empty, only `a-z 0-9 - . _ /`, and an encoded
/// form of at most [`MCP_TOOL_NAME_MAX`] bytes.
pub fn validate_transition_id(id: &str) -> Result<(), NameError> {
    if id.is_empty() {
        return Err(NameError::Empty);
    }
    if let Some((at, ch)) = id.char_indices().find(|&(_, c)| !is_id_char(c)) {
        return Err(NameError::InvalidChar { ch, at });
    }
    let len = encoded_len(id);
    if len > MCP_TOOL_NAME_MAX {
        return Err(NameError::TooLong { len });
    }
    Ok(())
}

/// Byte length of `encode(id)` without allocating.
pub fn encoded_len(id: &str) -> usize {
    id.chars()
        .map(|c| match c {
            '_' | '.' | '/' => 2,
            c => c.len_utf8(),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escapes_match_the_documented_examples() {
        assert_eq!(encode("tools.echo"), "tools_decho");
        assert_eq!(encode("a_b.c/d"), "a_ub_dc_sd");
        assert_eq!(encode("world/recovery-transition/v1"), "world_srecovery-transition_sv1");
        assert_eq!(encode("ailang-read"), "ailang-read");
    }

    #[test]
    fn decode_inverts_the_examples() {
        assert_eq!(decode("tools_decho").unwrap(), "tools.echo");
        assert_eq!(decode("a_ub_dc_sd").unwrap(), "a_b.c/d");
        assert_eq!(decode("ailang-read").unwrap(), "ailang-read");
    }

    #[test]
    fn decode_rejects_empty_long_dangling_unknown_and_uppercase() {
        assert_eq!(decode(""), Err(NameError::Empty));
        assert_eq!(decode(&"a".repeat(65)), Err(NameError::TooLong { len: 65 }));
        assert!(decode(&"a".repeat(64)).is_ok());
        assert_eq!(decode("abc_"), Err(NameError::DanglingEscape));
        assert_eq!(decode("a_x"), Err(NameError::UnknownEscape { ch: 'x', at: 2 }));
        assert_eq!(decode("Tools"), Err(NameError::InvalidChar { ch: 'T', at: 0 }));
        assert_eq!(decode("a.b"), Err(NameError::InvalidChar { ch: '.', at: 1 }));
        assert!(matches!(decode("a_U"), Err(NameError::UnknownEscape { .. })));
        assert!(matches!(decode("é"), Err(NameError::InvalidChar { .. })));
    }

    #[test]
    fn transition_ids_allow_only_the_id_alphabet() {
        assert!(validate_transition_id("world/recovery-transition/v1").is_ok());
        assert!(validate_transition_id("a_b.c").is_ok());
        assert_eq!(validate_transition_id(""), Err(NameError::Empty));
        assert_eq!(validate_transition_id("Tools.echo"), Err(NameError::InvalidChar { ch: 'T', at: 0 }));
        assert!(validate_transition_id("a b").is_err());
        assert!(validate_transition_id("a:b").is_err());
    }

    #[test]
    fn transition_id_limit_counts_the_encoded_bytes() {
        assert!(validate_transition_id(&"a".repeat(64)).is_ok());
        // 32 dots encode to 64 bytes; 33 to 66.
        assert!(validate_transition_id(&".".repeat(32)).is_ok());
        assert_eq!(validate_transition_id(&".".repeat(33)), Err(NameError::TooLong { len: 66 }));
        assert_eq!(encoded_len("a/b_c"), encode("a/b_c").len());
    }

    fn id_strategy() -> impl Strategy<Value = String> {
        "[a-z0-9._/-]{1,32}"
    }

    proptest! {
        #[test]
        fn decode_inverts_encode_for_every_valid_id(id in id_strategy()) {
            prop_assume!(validate_transition_id(&id).is_ok());
            prop_assert_eq!(decode(&encode(&id)).unwrap(), id);
        }

        #[test]
        fn encode_is_injective(a in id_strategy(), b in id_strategy()) {
            prop_assume!(a != b);
            prop_assert_ne!(encode(&a), encode(&b));
        }

        #[test]
        fn encoded_names_use_only_the_tool_name_alphabet(id in id_strategy()) {
            let name = encode(&id);
            prop_assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'));
            prop_assert_eq!(name.len(), encoded_len(&id));
        }

        #[test]
        fn decode_never_panics(name in ".{0,80}") {
            let _ = decode(&name);
        }
    }
}
