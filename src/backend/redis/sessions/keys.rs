//! The Redis key layout (layout version [`LAYOUT_VERSION`]). Pure: builds names, touches nothing.
//!
//! Every key one session's scripts touch carries the hash tag `{T}`, where `T` is the first 16
//! hex digits of the SHA-256 of the session's canonical encoding ([`canonical`]); the rest of
//! the digest follows the tag, so that keys of two sessions differ even if their tags collide.
//! A user's own keys (listing index, `user:` state) carry a tag made the same way from the user
//! id. No id ever appears inside `{}` — or anywhere in a key name — so no id can choose a slot,
//! open a tag or reach a pattern. The application's state, the gc index and the layout version
//! are plain keys of their own. See `docs/stores.md`.

use sha2::{Digest, Sha256};

use crate::hex;
use crate::key::SessionKey;
use crate::store::StoreError;

/// The layout this build writes and the newest it reads, kept in the key [`Keys::layout`].
///
/// Layout 1 (unversioned) tagged keys per user and wrote shared state and indexes in the append
/// script; layout 2 puts each session in a slot of its own, which Redis Cluster needs; layout 3
/// mirrors the newest lease grant's token in the session's head (field `t`), so that a fenced
/// append reads one hash instead of two. Layout-2 data is layout-3 data without the mirrors:
/// this build marks such a prefix as layout 3 on connect when told to ([`UPGRADES_FROM`],
/// `upgrade_from=2`), and refuses it otherwise.
pub(crate) const LAYOUT_VERSION: u32 = 3;

/// The older layout this build takes over as it is, by marking its prefix as
/// [`LAYOUT_VERSION`]. Its builds do not write the mirror, so none may still run on the prefix.
pub(crate) const UPGRADES_FROM: u32 = 2;

/// Hex digits of the digest inside the hash tag: 64 bits spread sessions evenly over the 16,384
/// slots, and are short enough to keep keys small.
const TAG_HEX: usize = 16;

/// Names the keys of one store (one prefix).
#[derive(Debug, Clone)]
pub(super) struct Keys {
    prefix: String,
}

/// The names of one session's keys, all in one hash slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SessionKeys {
    /// Hash: `v` version, `e` incarnation, `u` updated_ms, `n` next_seq, `r` record checkpoint,
    /// `c` its next_seq; fenced writes add `f` (the newest lease epoch that wrote) and `t` (the
    /// newest grant's token, see `append.lua`).
    pub head: String,
    /// List: the events as JSON, oldest first (index = seq − 1).
    pub log: String,
    /// Hash, expiring: the session's lease (`t` token, `a` address, `i` instance, `ep` epoch).
    pub lease: String,
    /// The lease epoch counter: only grows, never expires, survives deletion of the session.
    pub epoch: String,
}

impl Keys {
    /// Checks the prefix: ASCII letters, digits, `_`, `-`, `.` and `:` only, so it can never
    /// open a hash tag or a pattern.
    pub(super) fn new(prefix: &str) -> Result<Self, StoreError> {
        super::errors::check_prefix(prefix).map_err(StoreError::InvalidRequest)?;
        Ok(Self {
            prefix: prefix.to_owned(),
        })
    }

    /// The prefix, for messages.
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// What every key of one session's starts with (its slot's hash tag included).
    fn session_base(&self, key: &SessionKey) -> String {
        format!("{}:s:{}", self.prefix, tagged(&canonical(key)))
    }

    /// A string a replica check writes (`Store::confirm_replicated`): in the session's slot,
    /// expiring within a second, read by nothing.
    pub(super) fn session_marker(&self, key: &SessionKey) -> String {
        format!("{}:mark", self.session_base(key))
    }

    /// The keys of one session.
    pub(super) fn session(&self, key: &SessionKey) -> SessionKeys {
        let base = self.session_base(key);
        SessionKeys {
            head: format!("{base}:h"),
            log: format!("{base}:l"),
            lease: format!("{base}:lease"),
            epoch: format!("{base}:epoch"),
        }
    }

    /// The Redis Cluster hash slot of every key of `key`'s session: that of its hash tag.
    pub(super) fn session_slot(&self, key: &SessionKey) -> u16 {
        let digest = Sha256::digest(canonical(key));
        let mut tag = [0u8; TAG_HEX];
        for (i, byte) in digest.iter().take(TAG_HEX / 2).enumerate() {
            tag[2 * i] = HEX[usize::from(byte >> 4)];
            tag[2 * i + 1] = HEX[usize::from(byte & 0x0f)];
        }
        slot_of_tag(&tag)
    }

    /// A user's sessions: a sorted set of raw session ids (all score 0, so ordered by id).
    /// Anonymous sessions (user `""`) have one of their own.
    pub(super) fn index(&self, user_id: &str) -> String {
        format!("{}:u:{}:idx", self.prefix, tagged(&user_canonical(user_id)))
    }

    /// A user's `user:` state: a hash of key to JSON value. Same slot as the user's index.
    pub(super) fn user_state(&self, user_id: &str) -> String {
        format!(
            "{}:u:{}:state",
            self.prefix,
            tagged(&user_canonical(user_id))
        )
    }

    /// The application's `app:` state: a hash of key to JSON value.
    pub(super) fn app(&self) -> String {
        format!("{}:app", self.prefix)
    }

    /// Every session by last update: a sorted set of [`gc_member`]s scored by `updated_ms`.
    /// A score may lag behind the session (see `docs/stores.md`); it is never ahead of it.
    pub(super) fn gc(&self) -> String {
        format!("{}:gc", self.prefix)
    }

    /// The layout version of everything under the prefix: a string holding a number.
    pub(super) fn layout(&self) -> String {
        format!("{}:layout", self.prefix)
    }
}

/// The canonical encoding of a session key: a kind byte, then each id as its byte length
/// (8 bytes, big-endian) and its bytes, so that no two keys share an encoding.
pub(crate) fn canonical(key: &SessionKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(17 + key.user_id().len() + key.session_id().len());
    out.push(b's');
    for id in [key.user_id(), key.session_id()] {
        out.extend_from_slice(&(id.len() as u64).to_be_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    out
}

/// The canonical encoding of a user, apart from every session's by its kind byte.
fn user_canonical(user_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + user_id.len());
    out.push(b'u');
    out.extend_from_slice(&(user_id.len() as u64).to_be_bytes());
    out.extend_from_slice(user_id.as_bytes());
    out
}

/// Lowercase hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The hash slot Redis Cluster gives a key whose hash tag holds `tag`: CRC16 (the XMODEM
/// variant the cluster specification names: polynomial 0x1021, initial value 0) modulo 16,384.
/// Written out here rather than taken from a crate: it is a dozen lines, fixed by the
/// specification, and checked against the cluster's own `CLUSTER KEYSLOT` in the tests.
pub(super) fn slot_of_tag(tag: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in tag {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16_384
}

/// `{first 16 hex digits}rest`: the SHA-256 of `bytes` in hex with its head as the hash tag.
fn tagged(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = HEX;
    let mut out = String::with_capacity(66);
    out.push('{');
    for (i, byte) in Sha256::digest(bytes).iter().enumerate() {
        if i * 2 == TAG_HEX {
            out.push('}');
        }
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// The member naming `key` in the gc index: `u<hex user>:<hex session>`, or `a:<hex session>`.
pub(super) fn gc_member(key: &SessionKey) -> String {
    let user = if key.is_anonymous() {
        "a".to_owned()
    } else {
        format!("u{}", hex::encode(key.user_id()))
    };
    format!("{user}:{}", hex::encode(key.session_id()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tag_of(name: &str) -> &str {
        &name[name.find('{').unwrap()..=name.find('}').unwrap()]
    }

    #[test]
    fn slots_are_the_cluster_specifications_crc16() {
        // The examples of the Redis Cluster specification and of `CLUSTER KEYSLOT`'s manual.
        // CRC16-XMODEM of "123456789" is 0x31C3, below 16,384.
        assert_eq!(slot_of_tag(b"123456789"), 0x31C3);
        assert_eq!(slot_of_tag(b"somekey"), 11_058);
        assert_eq!(slot_of_tag(b"foo"), 12_182);
        assert_eq!(slot_of_tag(b""), 0);
        let keys = Keys::new("p").expect("prefix");
        let key = SessionKey::new("alice", "s1").expect("key");
        let names = keys.session(&key);
        let tag = tag_of(&names.head);
        assert_eq!(
            keys.session_slot(&key),
            slot_of_tag(tag.trim_matches(|c| c == '{' || c == '}').as_bytes())
        );
    }

    #[test]
    fn a_sessions_keys_share_one_tag_made_only_of_its_digest() {
        let keys = Keys::new("t").unwrap();
        let key = SessionKey::new("}{*:?", "a}:b{").unwrap();
        let names = keys.session(&key);
        let marker = keys.session_marker(&key);
        let all = [&names.head, &names.log, &names.lease, &names.epoch, &marker];
        let tag = tag_of(&names.head);
        assert!(all.iter().all(|name| tag_of(name) == tag));
        assert_eq!(tag.len(), TAG_HEX + 2);
        assert!(tag[1..tag.len() - 1].bytes().all(|b| b.is_ascii_hexdigit()));
        for name in all {
            assert_eq!(name.matches(['{', '}']).count(), 2, "{name}");
            assert!(!name.contains(['*', '?']), "{name}");
        }
        assert_ne!(
            keys.session(&SessionKey::new("}{*:?", "a}:b").unwrap())
                .head,
            names.head
        );
    }

    #[test]
    fn the_canonical_encoding_keeps_the_boundary_between_the_ids() {
        let a = SessionKey::new("ab", "c").unwrap();
        let b = SessionKey::new("a", "bc").unwrap();
        assert_ne!(canonical(&a), canonical(&b));
        let anon = SessionKey::anonymous("x").unwrap();
        let named = SessionKey::new("a", "x").unwrap();
        let keys = Keys::new("t").unwrap();
        assert_ne!(keys.session(&anon).head, keys.session(&named).head);
        assert_ne!(keys.index(""), keys.index("a"));
        assert_eq!(tag_of(&keys.index("a")), tag_of(&keys.user_state("a")));
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
