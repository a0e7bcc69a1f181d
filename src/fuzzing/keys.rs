//! Session keys and channel keys: arbitrary strings give a valid key or a typed error; a valid
//! key round-trips through its canonical string and stays inside the file store's root.

use std::path::{Component, Path};

use crate::backend::file::probe;
use crate::channel::{channel_session_key, ChannelError, CHANNEL_USER_PREFIX};
use crate::key::{validate_id, KeyPart, SessionKey};

/// `text` as a canonical key string (`user/session`).
pub fn check_canonical_key(text: &str) {
    if let Ok(key) = text.parse::<SessionKey>() {
        check_valid_key(&key);
    }
}

/// `user` and `session` as the two ids of a key (an empty user: an anonymous key).
pub fn check_key_parts(user: &str, session: &str) {
    let made = if user.is_empty() {
        SessionKey::anonymous(session)
    } else {
        SessionKey::new(user, session)
    };
    let valid = (user.is_empty() || validate_id(user, KeyPart::User).is_ok())
        && validate_id(session, KeyPart::Session).is_ok();
    match made {
        Ok(key) => {
            assert!(valid, "an invalid id was accepted: {user:?} {session:?}");
            assert_eq!((key.user_id(), key.session_id()), (user, session));
            check_valid_key(&key);
        }
        Err(_) => assert!(!valid, "a valid id was refused: {user:?} {session:?}"),
    }
}

/// A channel message's `(channel, chat, thread)` as a session key.
pub fn check_channel_key(channel: &str, chat: &str, thread: Option<&str>) {
    match channel_session_key(channel, chat, thread) {
        Ok(key) => {
            assert_eq!(key.user_id(), format!("{CHANNEL_USER_PREFIX}{channel}"));
            let parts: Vec<&str> = key.session_id().split('|').collect();
            assert_eq!(parts.len(), 2 + usize::from(thread.is_some()), "{key}");
            assert_eq!(parts[0], channel);
            assert_eq!(unescape(parts[1]), chat);
            if let Some(thread) = thread {
                assert_eq!(unescape(parts[2]), thread);
            }
            check_valid_key(&key);
        }
        Err(ChannelError::InvalidField { .. } | ChannelError::InvalidKey(_)) => {}
        Err(other) => panic!("unexpected error for a channel key: {other}"),
    }
}

fn unescape(part: &str) -> String {
    part.replace("%7C", "|").replace("%25", "%")
}

/// A valid key: canonical round trip, JSON round trip, and file-store folders under the root.
fn check_valid_key(key: &SessionKey) {
    let text = key.to_string();
    let back: SessionKey = text
        .parse()
        .unwrap_or_else(|e| panic!("the canonical form {text:?} does not parse: {e}"));
    assert_eq!(&back, key);
    let json = serde_json::to_string(key).expect("a key serialises");
    let back: SessionKey = serde_json::from_str(&json).expect("a serialised key deserialises");
    assert_eq!(&back, key);
    check_folders(key);
}

fn check_folders(key: &SessionKey) {
    let root = Path::new("/store-root");
    let (dir, head, log) = probe::session_files(root, key);
    for path in [&dir, &head, &log] {
        let inside = path
            .strip_prefix(root)
            .expect("session files live under the root");
        assert!(
            inside
                .components()
                .all(|c| matches!(c, Component::Normal(_))),
            "{path:?} leaves the root"
        );
    }
    assert_eq!(
        dir.components().count(),
        root.components().count() + 4 - usize::from(key.is_anonymous())
    );
    for id in [key.user_id(), key.session_id()]
        .into_iter()
        .filter(|id| !id.is_empty())
    {
        let name = probe::folder_name(id);
        assert!(name.len() <= probe::MAX_FOLDER_NAME_BYTES, "{name}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"%_-~".contains(&b)),
            "{name}"
        );
        match probe::decode_folder_name(&name) {
            Some(decoded) => assert_eq!(decoded, id),
            None => assert!(name.contains('~'), "a plain name does not decode: {name}"),
        }
    }
}
