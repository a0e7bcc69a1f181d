//! The ids OpenAI's objects carry here: conversations (session ids of the acting user),
//! responses (`resp_<32 hex>_<conversation>`, naming the turn and the session it ran in) and
//! items (`msg_7`: an event's kind and seq).

use sha2::{Digest, Sha256};

use super::ResponsesError;
use crate::key::SessionKey;
use crate::state::Seq;

/// Longest conversation id a client may name: ids are session ids of this alphabet, so that a
/// response id can carry its conversation's.
pub const MAX_CONVERSATION_ID_BYTES: usize = 64;

/// The session of `conversation` under `user`, once the id is checked.
pub fn conversation_key(user: &str, conversation: &str) -> Result<SessionKey, ResponsesError> {
    check_conversation_id(conversation)?;
    Ok(SessionKey::new(user, conversation).map_err(crate::error::Error::from)?)
}

/// A conversation id: 1 to [`MAX_CONVERSATION_ID_BYTES`] letters, digits, `_` or `-`; a 404
/// otherwise (no such conversation can exist).
pub fn check_conversation_id(id: &str) -> Result<(), ResponsesError> {
    let fits = !id.is_empty()
        && id.len() <= MAX_CONVERSATION_ID_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fits {
        return Ok(());
    }
    Err(ResponsesError::not_found(format!(
        "no conversation {id:?}: conversation ids are 1 to {MAX_CONVERSATION_ID_BYTES} letters, \
         digits, `_` or `-`"
    )))
}

/// A fresh id: `prefix` and 32 hex digits, random, or derived from `seed` (an
/// `Idempotency-Key`, so that a retry names what the first attempt made).
pub fn new_id(prefix: &str, seed: Option<&str>) -> String {
    match seed {
        Some(seed) => {
            let mut hasher = Sha256::new();
            hasher.update(prefix.as_bytes());
            hasher.update([0]);
            hasher.update(seed.as_bytes());
            let mut id = String::with_capacity(prefix.len() + 32);
            id.push_str(prefix);
            push_hex(&mut id, &hasher.finalize()[..16]);
            id
        }
        None => format!("{prefix}{}", uuid::Uuid::new_v4().simple()),
    }
}

/// Appends `bytes` to `out` as lowercase hexadecimal.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

/// A response's id, `resp_<32 hex>_<conversation>`: it names the turn (the hex part, the
/// turn's request id) and the session it ran in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseId {
    /// `resp_<32 hex>`: the request id of the turn's message.
    pub turn: String,
    /// The conversation (session id) it ran in.
    pub conversation: String,
}

impl ResponseId {
    const PREFIX: &'static str = "resp_";
    const HEX: usize = 32;

    /// A new response id in `conversation`, derived from `seed` when given.
    pub fn new(conversation: &str, seed: Option<&str>) -> Self {
        Self {
            turn: new_id(
                Self::PREFIX,
                seed.map(|s| format!("{conversation}\0{s}")).as_deref(),
            ),
            conversation: conversation.to_owned(),
        }
    }

    /// Reads an id; `None` when it is not one this server made.
    pub fn parse(id: &str) -> Option<Self> {
        let hex = id.strip_prefix(Self::PREFIX)?;
        let (turn, rest) = hex.split_at_checked(Self::HEX)?;
        let conversation = rest.strip_prefix('_')?;
        let ok = turn.bytes().all(|b| b.is_ascii_hexdigit())
            && check_conversation_id(conversation).is_ok();
        ok.then(|| Self {
            turn: format!("{}{turn}", Self::PREFIX),
            conversation: conversation.to_owned(),
        })
    }
}

impl std::fmt::Display for ResponseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}_{}", self.turn, self.conversation)
    }
}

/// The seq an item id names (`msg_7`, `fc_7`, `fco_7`, `mcp_7`), if it is one of ours.
pub fn item_seq(item: &str) -> Option<Seq> {
    let (kind, seq) = item.rsplit_once('_')?;
    matches!(kind, "msg" | "fc" | "fco" | "mcp")
        .then(|| seq.parse().ok())
        .flatten()
        .filter(|seq| *seq > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_ids_round_trip_and_refuse_foreign_ones() {
        let id = ResponseId::new("conv_abc", None);
        let text = id.to_string();
        assert_eq!(ResponseId::parse(&text), Some(id));
        for bad in [
            "resp_",
            "resp_123_conv",
            "msg_0123456789abcdef0123456789abcdef_conv",
            "resp_0123456789abcdef0123456789abcdef_",
            "resp_0123456789abcdef0123456789abcdef_a/b",
            "resp_0123456789abcdef0123456789abcdefXconv",
        ] {
            assert_eq!(ResponseId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_derived_id_is_its_prefix_and_32_hex_digits() {
        let id = new_id("conv_", Some("k"));
        let hex = id.strip_prefix("conv_").unwrap();
        assert_eq!(hex.len(), 32);
        assert!(hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        let mut out = String::new();
        push_hex(&mut out, &[0x00, 0xab, 0x7f]);
        assert_eq!(out, "00ab7f");
    }

    #[test]
    fn ids_from_the_same_key_are_the_same() {
        assert_eq!(new_id("conv_", Some("k")), new_id("conv_", Some("k")));
        assert_ne!(new_id("conv_", Some("k")), new_id("conv_", Some("l")));
        assert_ne!(new_id("conv_", None), new_id("conv_", None));
        assert_eq!(
            ResponseId::new("c", Some("k")),
            ResponseId::new("c", Some("k"))
        );
        assert_ne!(
            ResponseId::new("c", Some("k")).turn,
            ResponseId::new("d", Some("k")).turn
        );
    }

    #[test]
    fn item_ids_name_their_seq() {
        assert_eq!(item_seq("msg_7"), Some(7));
        assert_eq!(item_seq("fco_12"), Some(12));
        assert_eq!(item_seq("mcp_3"), Some(3));
        for bad in [
            "msg_0",
            "msg_",
            "x_3",
            "msg_-1",
            "msg3",
            "msg_99999999999999999999",
        ] {
            assert_eq!(item_seq(bad), None, "{bad}");
        }
    }
}
