//! The Redis key layout. Pure: builds names, touches nothing.
//!
//! Ids are hex-encoded, so no id can inject `{`, `}`, `:`, `*` or `?` into a key or a pattern.
//! Every key of one user sits behind the hash tag `{u<hex user>}` (anonymous sessions: `{a}`), so
//! in a Cluster they would share a slot; only the application's state and the gc index are global.

use crate::hex;
use crate::key::SessionKey;
use crate::store::StoreError;

/// Longest accepted key prefix; a prefix only separates deployments.
const MAX_PREFIX_BYTES: usize = 64;

/// Names the keys of one store (one prefix).
#[derive(Debug, Clone)]
pub(super) struct Keys {
    prefix: String,
}

impl Keys {
    /// Checks the prefix: ASCII letters, digits, `_`, `-`, `.` and `:` only, so it can never
    /// open a hash tag or a pattern.
    pub(super) fn new(prefix: &str) -> Result<Self, StoreError> {
        let ok = !prefix.is_empty()
            && prefix.len() <= MAX_PREFIX_BYTES
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
        if !ok {
            return Err(StoreError::InvalidRequest(format!(
                "redis key prefix {prefix:?} must be 1..={MAX_PREFIX_BYTES} of A-Z a-z 0-9 _ - . :"
            )));
        }
        Ok(Self {
            prefix: prefix.to_owned(),
        })
    }

    /// A session's head: a hash with `v` (version) and `r` (the record as JSON).
    pub(super) fn head(&self, key: &SessionKey) -> String {
        format!(
            "{}:{{{}}}:h:{}",
            self.prefix,
            user_tag(key.user_id()),
            hex::encode(key.session_id())
        )
    }

    /// A session's log: a list of events as JSON, oldest first.
    pub(super) fn log(&self, key: &SessionKey) -> String {
        format!(
            "{}:{{{}}}:l:{}",
            self.prefix,
            user_tag(key.user_id()),
            hex::encode(key.session_id())
        )
    }

    /// A user's sessions: a sorted set of raw session ids (all score 0, so ordered by id).
    pub(super) fn index(&self, user_id: &str) -> String {
        format!("{}:{{{}}}:idx", self.prefix, user_tag(user_id))
    }

    /// A user's `user:` state: a hash of key to JSON value.
    pub(super) fn user_state(&self, user_id: &str) -> String {
        format!("{}:{{{}}}:state", self.prefix, user_tag(user_id))
    }

    /// The application's `app:` state: a hash of key to JSON value.
    pub(super) fn app(&self) -> String {
        format!("{}:app", self.prefix)
    }

    /// Every session by last update: a sorted set of [`gc_member`]s scored by `updated_ms`.
    pub(super) fn gc(&self) -> String {
        format!("{}:gc", self.prefix)
    }
}

/// The member naming `key` in the gc index.
pub(super) fn gc_member(key: &SessionKey) -> String {
    format!(
        "{}:{}",
        user_tag(key.user_id()),
        hex::encode(key.session_id())
    )
}

/// The key a gc member names; `None` for a member this layout never writes.
pub(super) fn parse_gc_member(member: &str) -> Option<SessionKey> {
    let (user, session) = member.split_once(':')?;
    let session = hex::decode(session)?;
    if user == "a" {
        return SessionKey::anonymous(session).ok();
    }
    SessionKey::new(hex::decode(user.strip_prefix('u')?)?, session).ok()
}

/// The hash-tag body of a user: `u` + hex, or `a` for anonymous sessions (never a hex string).
fn user_tag(user_id: &str) -> String {
    if user_id.is_empty() {
        "a".to_owned()
    } else {
        format!("u{}", hex::encode(user_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_ids_cannot_reach_the_key_syntax() {
        let keys = Keys::new("t").unwrap();
        let key = SessionKey::new("}{*:?", "a}:b{").unwrap();
        let head = keys.head(&key);
        let tag = &head[head.find('{').unwrap()..=head.find('}').unwrap()];
        assert_eq!(tag, "{u7d7b2a3a3f}");
        assert!(!head[head.find('}').unwrap() + 1..].contains(['{', '}', '*', '?']));
        assert_eq!(keys.index("}{*:?"), "t:{u7d7b2a3a3f}:idx");
    }

    #[test]
    fn gc_members_round_trip_and_anonymous_users_are_apart() {
        for key in [
            SessionKey::new("alice", "s:1").unwrap(),
            SessionKey::new("a", "x").unwrap(),
            SessionKey::anonymous("x").unwrap(),
        ] {
            assert_eq!(parse_gc_member(&gc_member(&key)), Some(key));
        }
        let anon = SessionKey::anonymous("x").unwrap();
        let named = SessionKey::new("a", "x").unwrap();
        assert_ne!(gc_member(&anon), gc_member(&named));
        assert_eq!(parse_gc_member("zz:00"), None);
        assert_eq!(parse_gc_member("u6:61"), None);
    }

    #[test]
    fn prefixes_that_could_open_a_tag_are_refused() {
        for bad in ["", "a{b", "a}", "a*", "a b", &"x".repeat(65)] {
            assert!(Keys::new(bad).is_err(), "{bad}");
        }
        assert!(Keys::new("turnstile:prod-1.eu").is_ok());
    }
}
