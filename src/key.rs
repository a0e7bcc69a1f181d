//! Session keys: who a conversation belongs to and which one it is.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest accepted user or session id, in bytes. Long enough for a `channel|chat|thread`
/// triple of generous platform ids, short enough that a key always fits a file name once
/// encoded (encoding at most triples the length, and file systems allow 255 bytes per name
/// component, which is why stores hash what does not fit).
pub const MAX_ID_BYTES: usize = 256;

/// Which half of a key an error concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPart {
    /// The user id.
    User,
    /// The session id.
    Session,
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyPart::User => "user id",
            KeyPart::Session => "session id",
        })
    }
}

/// Why a key was refused. Each variant names the rule that was broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The id is the empty string.
    #[error("the {0} is empty; ids must have at least one character")]
    Empty(KeyPart),
    /// The id is longer than [`MAX_ID_BYTES`].
    #[error("the {part} is {len} bytes long; the limit is {MAX_ID_BYTES} bytes")]
    TooLong {
        /// Which id.
        part: KeyPart,
        /// Its length in bytes.
        len: usize,
    },
    /// The id contains a control character (including NUL, newline and tab).
    #[error("the {part} contains a control character at byte {index}; ids must be printable")]
    ControlCharacter {
        /// Which id.
        part: KeyPart,
        /// Byte offset of the offending character.
        index: usize,
    },
    /// A canonical key string did not have the `user/session` form.
    #[error("{input:?} is not a session key; expected `user/session` or `/session` for an anonymous session, with `%` and `/` inside ids written as `%25` and `%2F`")]
    Malformed {
        /// The string that was given.
        input: String,
    },
}

/// Identifies one conversation: the user it belongs to and the session within that user.
///
/// Both ids are validated on construction (non-empty, at most [`MAX_ID_BYTES`] bytes, no control
/// characters), so a `SessionKey` that exists is always safe to hand to a store. Cloning is cheap
/// (one reference count).
///
/// **Anonymous sessions** belong to no user: build them with [`SessionKey::anonymous`]. Their user
/// id is the empty string, which [`SessionKey::new`] refuses, so a named user can never collide
/// with them. Their canonical form starts with `/`.
///
/// The **canonical string form** is `user/session`, with `%` and `/` inside an id written as
/// `%25` and `%2F`; [`SessionKey::from_str`] parses it back.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey(Arc<KeyParts>);

#[derive(PartialEq, Eq, Hash, PartialOrd, Ord)]
struct KeyParts {
    user_id: String,
    session_id: String,
}

impl SessionKey {
    /// Builds a key from a user id and a session id, validating both.
    pub fn new(
        user_id: impl Into<String>,
        session_id: impl Into<String>,
    ) -> Result<Self, KeyError> {
        let user_id = user_id.into();
        let session_id = session_id.into();
        validate_id(&user_id, KeyPart::User)?;
        validate_id(&session_id, KeyPart::Session)?;
        Ok(Self(Arc::new(KeyParts {
            user_id,
            session_id,
        })))
    }

    /// Builds the key of an anonymous session (one that belongs to no user).
    pub fn anonymous(session_id: impl Into<String>) -> Result<Self, KeyError> {
        let session_id = session_id.into();
        validate_id(&session_id, KeyPart::Session)?;
        Ok(Self(Arc::new(KeyParts {
            user_id: String::new(),
            session_id,
        })))
    }

    /// The user id; empty for an anonymous session.
    pub fn user_id(&self) -> &str {
        &self.0.user_id
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.0.session_id
    }

    /// The key as an opaque cursor (both ids in lowercase hexadecimal, joined by `.`): any key
    /// survives a query string or a header unescaped. [`SessionKey::from_cursor`] reads it.
    pub fn cursor(&self) -> String {
        format!(
            "{}.{}",
            crate::hex::encode(self.user_id()),
            crate::hex::encode(self.session_id())
        )
    }

    /// The key a [`SessionKey::cursor`] names; `None` for text no cursor reads as (or a key that
    /// breaks the key rules).
    pub fn from_cursor(cursor: &str) -> Option<Self> {
        let (user, session) = cursor.split_once('.')?;
        let user = crate::hex::decode(user)?;
        let session = crate::hex::decode(session)?;
        Self::new(user, session).ok()
    }

    /// Whether this session belongs to no user.
    pub fn is_anonymous(&self) -> bool {
        self.0.user_id.is_empty()
    }

    /// A bound that sorts before every key of `user_id` (its session id is empty, which no
    /// real key has): where a range over one user's keys starts. Never routed or stored.
    pub(crate) fn first_of(user_id: &str) -> Self {
        Self(Arc::new(KeyParts {
            user_id: user_id.to_owned(),
            session_id: String::new(),
        }))
    }
}

/// Checks one id against the key rules.
pub fn validate_id(id: &str, part: KeyPart) -> Result<(), KeyError> {
    if id.is_empty() {
        return Err(KeyError::Empty(part));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(KeyError::TooLong {
            part,
            len: id.len(),
        });
    }
    if let Some((index, _)) = id.char_indices().find(|(_, c)| c.is_control()) {
        return Err(KeyError::ControlCharacter { part, index });
    }
    Ok(())
}

fn escape_into(out: &mut String, id: &str) {
    for c in id.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            c => out.push(c),
        }
    }
}

fn unescape(part: &str, input: &str) -> Result<String, KeyError> {
    let malformed = || KeyError::Malformed {
        input: input.to_owned(),
    };
    let mut out = String::with_capacity(part.len());
    let mut rest = part;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3).ok_or_else(malformed)?;
        match code {
            "25" => out.push('%'),
            "2F" | "2f" => out.push('/'),
            _ => return Err(malformed()),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::with_capacity(self.0.user_id.len() + self.0.session_id.len() + 1);
        escape_into(&mut out, &self.0.user_id);
        out.push('/');
        escape_into(&mut out, &self.0.session_id);
        f.write_str(&out)
    }
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionKey({self})")
    }
}

impl FromStr for SessionKey {
    type Err = KeyError;

    fn from_str(input: &str) -> Result<Self, KeyError> {
        let (user, session) = input.split_once('/').ok_or_else(|| KeyError::Malformed {
            input: input.to_owned(),
        })?;
        if session.contains('/') {
            return Err(KeyError::Malformed {
                input: input.to_owned(),
            });
        }
        let session = unescape(session, input)?;
        if user.is_empty() {
            return SessionKey::anonymous(session);
        }
        SessionKey::new(unescape(user, input)?, session)
    }
}

impl Serialize for SessionKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SessionKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Starts the user id of every channel session: the sessions of channel `slack` belong to the
/// user id `channel:slack`. Canonical user ids may not start with it (pairings refuse them), so
/// no person's sessions can mix with a channel's.
pub const CHANNEL_USER_PREFIX: &str = "channel:";

/// Separates channel, chat and thread in a channel session id (`slack|C042|1700.1`).
pub const CHANNEL_SEPARATOR: char = '|';

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_names_its_key_and_nothing_else() {
        let key = SessionKey::new("al.ice", "s/1 x").unwrap();
        assert_eq!(SessionKey::from_cursor(&key.cursor()), Some(key));
        for bad in ["", "61", "61.zz", "6.61", "61.", ".61"] {
            assert_eq!(SessionKey::from_cursor(bad), None, "{bad}");
        }
    }

    #[test]
    fn canonical_form_round_trips_including_separators() {
        for (user, session) in [
            ("alice", "s1"),
            ("a/b", "c%d"),
            ("slack", "C123|T9|1700.1"),
            ("ünï", "../x"),
        ] {
            let key = SessionKey::new(user, session).unwrap();
            let text = key.to_string();
            assert_eq!(text.matches('/').count(), 1, "{text}");
            let back: SessionKey = text.parse().unwrap();
            assert_eq!(back, key);
            assert_eq!(back.user_id(), user);
            assert_eq!(back.session_id(), session);
        }
    }

    #[test]
    fn anonymous_keys_have_their_own_form() {
        let key = SessionKey::anonymous("guest-1").unwrap();
        assert!(key.is_anonymous());
        assert_eq!(key.to_string(), "/guest-1");
        assert_eq!("/guest-1".parse::<SessionKey>().unwrap(), key);
        assert_eq!(
            SessionKey::new("", "x").unwrap_err(),
            KeyError::Empty(KeyPart::User)
        );
    }

    #[test]
    fn each_bad_id_names_the_rule_it_broke() {
        assert_eq!(
            SessionKey::new("u", "").unwrap_err(),
            KeyError::Empty(KeyPart::Session)
        );
        let long = "x".repeat(MAX_ID_BYTES + 1);
        assert_eq!(
            SessionKey::new(long.clone(), "s").unwrap_err(),
            KeyError::TooLong {
                part: KeyPart::User,
                len: MAX_ID_BYTES + 1
            }
        );
        assert!(SessionKey::new("x".repeat(MAX_ID_BYTES), "s").is_ok());
        assert_eq!(
            SessionKey::new("u", "a\0b").unwrap_err(),
            KeyError::ControlCharacter {
                part: KeyPart::Session,
                index: 1
            }
        );
        assert!(matches!(
            SessionKey::new("u\n", "s").unwrap_err(),
            KeyError::ControlCharacter { .. }
        ));
        let message = SessionKey::new("u", "a\tb").unwrap_err().to_string();
        assert!(message.contains("control character"), "{message}");
    }

    #[test]
    fn malformed_canonical_strings_are_refused() {
        for bad in ["nouser", "a/b/c", "a/%zz", "a/%2", "a/"] {
            assert!(
                bad.parse::<SessionKey>().is_err(),
                "{bad} should be refused"
            );
        }
    }

    #[test]
    fn keys_serialize_as_their_canonical_string() {
        let key = SessionKey::new("u/1", "s").unwrap();
        let json = serde_json::to_string(&key).unwrap();
        assert_eq!(json, "\"u%2F1/s\"");
        let back: SessionKey = serde_json::from_str(&json).unwrap();
        assert_eq!(back, key);
    }
}
