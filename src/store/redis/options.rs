//! How a Redis store connects and names its keys.

use std::time::Duration;

/// How a [`RedisStore`](super::RedisStore) connects and names its keys.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Starts every key, so that deployments (or tests) sharing a Redis stay apart.
    pub(super) prefix: String,
    /// Expiry of a session's head and log after its last write; `None` keeps them forever.
    pub(super) session_ttl: Option<Duration>,
    /// Bound on one connection attempt.
    pub(super) connect_timeout: Duration,
    /// Bound on one command's answer.
    pub(super) response_timeout: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            prefix: "turnstile".to_owned(),
            session_ttl: None,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            response_timeout: Self::DEFAULT_RESPONSE_TIMEOUT,
        }
    }
}

impl RedisOptions {
    /// Default bound on connecting: long enough for a distant server, short enough that a
    /// caller learns quickly that Redis is down.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
    /// Default bound on one command's answer; a turn's write is one command.
    pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

    /// Starts every key with `prefix` (default `turnstile`): ASCII letters, digits, `_ - . :`.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The key prefix (default `turnstile`); other data kept beside the sessions, such as the
    /// Redis pairing store's, goes under the same one.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Expires a session's head and log `ttl` after its last write (default: never).
    pub fn with_session_ttl(mut self, ttl: Duration) -> Self {
        self.session_ttl = Some(ttl);
        self
    }

    /// Bounds each connection attempt (default [`Self::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Bounds each command's answer (default [`Self::DEFAULT_RESPONSE_TIMEOUT`]).
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }
}
