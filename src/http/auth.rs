//! Bearer tokens: the tokens file, and who a request speaks for.
//!
//! The file has one token a line: `<token> admin`, or `<token> user:<id>` optionally followed
//! by `channels:<a>,<b>`; `#` starts a comment. Tokens are kept as SHA-256 digests, so a lookup
//! compares digests, not secrets, and a memory dump holds no usable token.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::gateway::Gateway;
use crate::channel::validate_channel;
use crate::key::{validate_id, KeyPart, SessionKey};

/// Shortest accepted token, in bytes: 16 random characters are beyond guessing over HTTP, and
/// a shorter one is more likely a placeholder left in the file by mistake.
pub const MIN_TOKEN_BYTES: usize = 16;

/// What a token allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// Every route, every user.
    Admin,
    /// The sessions, listing and deletion of one user, plus posting to the listed channels.
    User {
        /// The user id the token speaks for.
        id: String,
        /// Channels whose `/v1/channels/{channel}/messages` route the token may post to.
        channels: Vec<String>,
    },
}

/// Why a tokens file was refused. Messages name the line, never the token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokensError {
    /// The file could not be read.
    #[error("cannot read the tokens file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line does not follow the format.
    #[error("tokens file line {line}: {reason}; expected `<token> admin` or `<token> user:<id> [channels:<a>,<b>]`")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// The configured bearer tokens. Empty means no authentication (loopback only; see
/// [`super::Gateway::serve`]).
#[derive(Clone, Default)]
pub struct Tokens {
    by_digest: HashMap<[u8; 32], Grant>,
}

/// Counts only: a token's digest is as good as a token to an offline guesser of short ones.
impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("tokens", &self.by_digest.len())
            .finish()
    }
}

impl Tokens {
    /// No tokens: every request is allowed.
    pub fn none() -> Self {
        Self::default()
    }

    /// Reads a tokens file.
    pub fn load(path: &Path) -> Result<Self, TokensError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses the text of a tokens file.
    pub fn parse(text: &str) -> Result<Self, TokensError> {
        let mut by_digest = HashMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let bad = |reason: String| TokensError::Line { line, reason };
            // A control character (other than the tab that separates words) is never part of a
            // token a person meant to write: a pasted escape sequence or a stray NUL.
            if raw.chars().any(|c| c.is_control() && c != '\t') {
                return Err(bad("the line holds a control character".into()));
            }
            let content = strip_comment(raw);
            let mut words = content.split_whitespace();
            let Some(token) = words.next() else { continue };
            if token.len() < MIN_TOKEN_BYTES {
                return Err(bad(format!(
                    "the token is shorter than {MIN_TOKEN_BYTES} bytes"
                )));
            }
            let grant = parse_grant(words.collect()).map_err(bad)?;
            if by_digest.insert(digest(token), grant).is_some() {
                return Err(bad("this token is already listed on an earlier line".into()));
            }
        }
        Ok(Self { by_digest })
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// How many tokens are configured.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// What `token` allows, if it is configured.
    pub fn grant(&self, token: &str) -> Option<&Grant> {
        self.by_digest.get(&digest(token))
    }
}

/// The line without its comment: `#` starts one at the start of the line or after whitespace,
/// so a token may contain `#` (cutting it there would silently shorten the token).
fn strip_comment(line: &str) -> &str {
    let mut previous_blank = true;
    for (at, c) in line.char_indices() {
        if c == '#' && previous_blank {
            return &line[..at];
        }
        previous_blank = c.is_whitespace();
    }
    line
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn parse_grant(words: Vec<&str>) -> Result<Grant, String> {
    match words.as_slice() {
        ["admin"] => Ok(Grant::Admin),
        [user] | [user, _] if user.starts_with("user:") => {
            let id = &user["user:".len()..];
            validate_id(id, KeyPart::User).map_err(|e| e.to_string())?;
            if id.starts_with(crate::channel::CHANNEL_USER_PREFIX) {
                // That user owns every chat of the channel; only an admin token may reach it.
                return Err(format!(
                    "user ids starting with `{}` belong to channels; use an admin token",
                    crate::channel::CHANNEL_USER_PREFIX
                ));
            }
            let channels = match words.get(1) {
                None => Vec::new(),
                Some(list) => parse_channels(list)?,
            };
            Ok(Grant::User {
                id: id.to_owned(),
                channels,
            })
        }
        [] => Err("the token has no grant".into()),
        _ => Err("unrecognised grant".into()),
    }
}

fn parse_channels(word: &str) -> Result<Vec<String>, String> {
    let list = word
        .strip_prefix("channels:")
        .ok_or_else(|| format!("{word:?} is not `channels:<a>,<b>`"))?;
    list.split(',')
        .map(|channel| {
            validate_channel(channel)
                .map(|()| channel.to_owned())
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Who a request speaks for, from its `Authorization: Bearer` header.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// No tokens are configured: everything is allowed.
    Open,
    /// An admin token.
    Admin,
    /// A user token.
    User { id: String, channels: Vec<String> },
}

impl Caller {
    pub(super) fn is_admin(&self) -> bool {
        matches!(self, Self::Open | Self::Admin)
    }

    pub(super) fn require_admin(&self) -> Result<(), ApiError> {
        if self.is_admin() {
            return Ok(());
        }
        Err(ApiError::Forbidden(
            "this route needs an admin token".into(),
        ))
    }

    /// Allows the admin and the user `user` itself.
    pub(super) fn require_user(&self, user: &str) -> Result<(), ApiError> {
        match self {
            Self::User { id, .. } if id != user => Err(ApiError::Forbidden(
                "this token reaches only its own user's sessions".into(),
            )),
            _ => Ok(()),
        }
    }

    /// Allows the admin and user tokens that list `channel`.
    pub(super) fn require_channel(&self, channel: &str) -> Result<(), ApiError> {
        match self {
            Self::User { channels, .. } if !channels.iter().any(|c| c == channel) => {
                Err(ApiError::Forbidden(format!(
                    "this token may not post to the channel {channel:?}"
                )))
            }
            _ => Ok(()),
        }
    }
}

impl FromRequestParts<Gateway> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, gateway: &Gateway) -> Result<Self, ApiError> {
        let tokens = gateway.tokens();
        if tokens.is_empty() {
            return Ok(Self::Open);
        }
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or(ApiError::Unauthorized(
                "an `Authorization: Bearer` token is needed",
            ))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .ok_or(ApiError::Unauthorized(
                "the Authorization header must be `Bearer <token>`",
            ))?;
        match tokens.grant(token) {
            Some(Grant::Admin) => Ok(Self::Admin),
            Some(Grant::User { id, channels }) => Ok(Self::User {
                id: id.clone(),
                channels: channels.clone(),
            }),
            None => Err(ApiError::Unauthorized("the token is not valid")),
        }
    }
}

/// Checks the caller may reach `user`'s sessions, then builds the key (a bad id is a 400).
pub(crate) fn session_key(
    caller: &Caller,
    user: String,
    session: String,
) -> Result<SessionKey, ApiError> {
    caller.require_user(&user)?;
    Ok(SessionKey::new(user, session)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "admin-token-0123456789";
    const ALICE: &str = "alice-token-0123456789";

    #[test]
    fn a_tokens_file_grants_admin_users_and_channels() {
        let text =
            format!("# operators\n{ADMIN} admin\n\n{ALICE} user:alice channels:slack,web  # bot\n");
        let tokens = Tokens::parse(&text).unwrap();
        assert_eq!(tokens.len(), 2);
        assert_eq!(tokens.grant(ADMIN), Some(&Grant::Admin));
        assert_eq!(
            tokens.grant(ALICE),
            Some(&Grant::User {
                id: "alice".into(),
                channels: vec!["slack".into(), "web".into()]
            })
        );
        assert_eq!(tokens.grant("alice-token-01234567890"), None);
    }

    #[test]
    fn bad_lines_are_refused_by_number_without_echoing_the_token() {
        for (text, line) in [
            (format!("{ADMIN} root"), 1),
            ("# c\nshort admin".to_owned(), 2),
            (format!("{ADMIN} admin\n{ADMIN} user:x"), 2),
            (format!("{ALICE} user:"), 1),
            (format!("{ALICE} user:a channels:sl ack"), 1),
            (format!("{ALICE} user:a slack"), 1),
            (format!("{ALICE} user:channel:slack"), 1),
            (ALICE.to_owned(), 1),
            (format!("{ADMIN}\u{1b}[0m admin"), 1),
            (format!("# ok\n{ALICE}\0 user:alice"), 2),
        ] {
            let err = Tokens::parse(&text).unwrap_err();
            let message = err.to_string();
            assert!(
                matches!(err, TokensError::Line { line: l, .. } if l == line),
                "{text:?}: {message}"
            );
            assert!(!message.contains("0123456789"), "{message}");
        }
    }

    #[test]
    fn a_hash_inside_a_token_is_part_of_it() {
        let token = "abc#defghijklmnopqrstuvwxyz";
        let tokens = Tokens::parse(&format!("{token} admin # the operator\n")).unwrap();
        assert_eq!(tokens.grant(token), Some(&Grant::Admin));
        assert_eq!(tokens.grant("abc"), None);
    }

    #[test]
    fn user_callers_reach_only_their_own_user_and_channels() {
        let caller = Caller::User {
            id: "alice".into(),
            channels: vec!["slack".into()],
        };
        assert!(caller.require_user("alice").is_ok());
        assert!(caller.require_user("bob").is_err());
        assert!(caller.require_admin().is_err());
        assert!(caller.require_channel("slack").is_ok());
        assert!(caller.require_channel("web").is_err());
        assert!(Caller::Admin.require_user("bob").is_ok());
        assert!(Caller::Open.require_admin().is_ok());
    }
}
