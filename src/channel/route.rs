//! Where a channel message goes: the session key of its chat and the fallback id of an unpaired
//! sender. Pure: no I/O, unit-tested here.

use std::fmt;

use crate::key::{validate_id, KeyPart, SessionKey, MAX_ID_BYTES};

use super::ChannelError;

pub use crate::key::{CHANNEL_SEPARATOR, CHANNEL_USER_PREFIX};

/// Longest channel name, in bytes. Channel names are chosen by the operator (`slack`,
/// `discord`, `web`); 64 bytes leaves room for a suffix such as `slack-eu-workspace-2`.
pub const MAX_CHANNEL_NAME_BYTES: usize = 64;

/// Which part of a channel message an error concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelField {
    /// The channel name.
    Channel,
    /// The chat (conversation, room, group) id.
    Chat,
    /// The thread id.
    Thread,
    /// The sender's id on the channel.
    ChannelUser,
    /// A canonical user id.
    User,
}

impl fmt::Display for ChannelField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Channel => "channel name",
            Self::Chat => "chat id",
            Self::Thread => "thread id",
            Self::ChannelUser => "channel user id",
            Self::User => "user id",
        })
    }
}

/// Checks a channel name: 1 to [`MAX_CHANNEL_NAME_BYTES`] of ASCII letters, digits, `_`, `-`
/// and `.`. Narrow on purpose: the name appears in URLs, user ids and store keys.
pub fn validate_channel(name: &str) -> Result<(), ChannelError> {
    let rule = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_CHANNEL_NAME_BYTES {
        Some("it is longer than 64 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        Some("only ASCII letters, digits, `_`, `-` and `.` are allowed")
    } else {
        None
    };
    match rule {
        Some(rule) => Err(ChannelError::InvalidField {
            field: ChannelField::Channel,
            rule: format!("{name:?}: {rule}"),
        }),
        None => Ok(()),
    }
}

/// Checks an id received from a channel (chat, thread, sender): non-empty, at most
/// [`MAX_ID_BYTES`] bytes, no control characters — the same rules as session ids.
pub fn validate_field(field: ChannelField, value: &str) -> Result<(), ChannelError> {
    let rule = if value.is_empty() {
        Some("it is empty".to_owned())
    } else if value.len() > MAX_ID_BYTES {
        Some(format!(
            "it is {} bytes long; the limit is {MAX_ID_BYTES}",
            value.len()
        ))
    } else {
        value
            .char_indices()
            .find(|(_, c)| c.is_control())
            .map(|(at, _)| format!("it contains a control character at byte {at}"))
    };
    match rule {
        Some(rule) => Err(ChannelError::InvalidField { field, rule }),
        None => Ok(()),
    }
}

/// Checks a canonical user id: a valid user id that does not start with
/// [`CHANNEL_USER_PREFIX`].
pub fn validate_user(user: &str) -> Result<(), ChannelError> {
    validate_id(user, KeyPart::User)?;
    if user.starts_with(CHANNEL_USER_PREFIX) {
        return Err(ChannelError::ReservedUser {
            user: user.to_owned(),
        });
    }
    Ok(())
}

/// The key of the session that a chat (or one thread of it) is.
///
/// The user id is `channel:<channel>` and the session id is `channel|chat|thread`, or
/// `channel|chat` when there is no thread. `%` and `|` inside the chat and thread ids are written
/// `%25` and `%7C`, so that every (chat, thread) pair has its own session id. The sender is left
/// out on purpose: a group chat is one conversation, whoever speaks.
pub fn session_key(
    channel: &str,
    chat: &str,
    thread: Option<&str>,
) -> Result<SessionKey, ChannelError> {
    validate_channel(channel)?;
    validate_field(ChannelField::Chat, chat)?;
    if let Some(thread) = thread {
        validate_field(ChannelField::Thread, thread)?;
    }
    let mut id = String::with_capacity(channel.len() + chat.len() + 16);
    id.push_str(channel);
    id.push(CHANNEL_SEPARATOR);
    escape_into(&mut id, chat);
    if let Some(thread) = thread {
        id.push(CHANNEL_SEPARATOR);
        escape_into(&mut id, thread);
    }
    Ok(SessionKey::new(channel_namespace(channel), id)?)
}

/// The user id that owns every session of `channel`: `channel:<channel>`.
pub fn channel_namespace(channel: &str) -> String {
    format!("{CHANNEL_USER_PREFIX}{channel}")
}

/// The canonical user id of a sender nobody paired: `<channel_user>@<channel>`. Channel names
/// hold no `@`, so the last `@` splits it back; it never starts with `channel:` unless the
/// sender's own id does, and then it still holds an `@`, which no channel namespace does.
pub fn unpaired_user(channel: &str, channel_user: &str) -> String {
    format!("{channel_user}@{channel}")
}

fn escape_into(out: &mut String, id: &str) {
    for c in id.chars() {
        match c {
            '%' => out.push_str("%25"),
            CHANNEL_SEPARATOR => out.push_str("%7C"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_without_a_thread_has_a_two_part_id() {
        let key = session_key("slack", "C042", None).unwrap();
        assert_eq!(key.user_id(), "channel:slack");
        assert_eq!(key.session_id(), "slack|C042");
        let threaded = session_key("slack", "C042", Some("1700.1")).unwrap();
        assert_eq!(threaded.session_id(), "slack|C042|1700.1");
        assert_ne!(key, threaded);
    }

    #[test]
    fn separators_inside_ids_cannot_make_two_chats_collide() {
        let a = session_key("web", "a|b", None).unwrap();
        let b = session_key("web", "a", Some("b")).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.session_id(), "web|a%7Cb");
        let c = session_key("web", "a%7Cb", None).unwrap();
        assert_ne!(a, c, "an escaped-looking id is escaped again");
    }

    #[test]
    fn channel_names_are_narrow() {
        for good in ["slack", "dingtalk", "web-2", "a.b_c"] {
            assert!(validate_channel(good).is_ok(), "{good}");
        }
        for bad in ["", "sl ack", "a/b", "a|b", "a@b", "ä", &"x".repeat(65)] {
            assert!(validate_channel(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_chat_and_thread_ids_name_the_field() {
        let err = session_key("slack", "", None).unwrap_err();
        assert!(err.to_string().contains("chat id"), "{err}");
        let err = session_key("slack", "c", Some("t\n")).unwrap_err();
        assert!(err.to_string().contains("thread id"), "{err}");
        let long = "x".repeat(MAX_ID_BYTES);
        assert!(
            session_key("slack", &long, None).is_err(),
            "too long once prefixed"
        );
    }

    #[test]
    fn canonical_users_cannot_take_a_channel_namespace() {
        assert!(validate_user("alice").is_ok());
        assert!(matches!(
            validate_user("channel:slack"),
            Err(ChannelError::ReservedUser { .. })
        ));
        assert!(validate_user("").is_err());
        let unpaired = unpaired_user("slack", "channel:x");
        assert_ne!(unpaired, channel_namespace("x"));
        assert_eq!(unpaired_user("slack", "U1"), "U1@slack");
    }

    #[test]
    fn a_channel_chat_is_filed_under_itself_and_a_person_under_themselves() {
        use crate::channel::channel_session_key;
        use crate::memory::memory_key;
        let person = crate::key::SessionKey::new("alice", "s1").unwrap();
        assert_eq!(memory_key(&person), person);
        let dm1 = channel_session_key("web", "dm-u1", None).unwrap();
        let dm2 = channel_session_key("web", "dm-u2", None).unwrap();
        let thread = channel_session_key("web", "dm-u1", Some("t1")).unwrap();
        assert_eq!(memory_key(&dm1).user_id(), "channel:web|dm-u1");
        assert_eq!(memory_key(&dm1).session_id(), dm1.session_id());
        assert_ne!(memory_key(&dm1).user_id(), memory_key(&dm2).user_id());
        assert_eq!(
            memory_key(&thread).user_id(),
            memory_key(&dm1).user_id(),
            "a chat's threads share the chat's memory"
        );
        let long = channel_session_key("web", &"c".repeat(250), None).unwrap();
        let filed = memory_key(&long);
        assert!(filed.user_id().starts_with("channel:web|#"), "{filed}");
        assert!(filed.user_id().len() <= crate::key::MAX_ID_BYTES);
    }
}
