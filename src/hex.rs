//! Lowercase hexadecimal of ids: safe inside any Redis key, field or pattern, whatever the id
//! holds. Shared by the Redis session store and the Redis pairing store, which must encode ids
//! the same way. Pure.

/// `id` as lowercase hexadecimal, two digits per byte.
pub(crate) fn encode(id: &str) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(id.len() * 2);
    for byte in id.bytes() {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// The id [`encode`] encoded; `None` for text it cannot have produced.
pub(crate) fn decode(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_only_hex_digits_come_out() {
        for id in ["", "alice", "}{*:? ", "é/%"] {
            let text = encode(id);
            assert!(text
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            assert_eq!(decode(&text).as_deref(), Some(id));
        }
        assert_eq!(encode("a}"), "617d");
    }

    #[test]
    fn text_encode_cannot_produce_is_refused() {
        for bad in ["6", "zz", "6g", "ff"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
