//! [`AgentFailure`]: an agent's failure with a class a caller can act on, and the
//! [`FailureKind`]s the runtime tells apart.
//!
//! An agent returns any error ([`AgentError`](crate::AgentError)); the runtime looks for an
//! `AgentFailure` in it and in its sources. When it finds one, the turn fails with that class
//! (`model_rate_limited`, `model_timeout`…) and, for a rate limit, the wait the upstream asked
//! for; any other error is [`FailureKind::Agent`]. `OpenAiAgent` fails this way, and custom
//! agents can too.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

/// What kind of failure ended a turn: the class a caller acts on. Its [`code`](Self::code) is
/// `Error::code()`, the HTTP error code and the `code` of the `turn_failed` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The agent itself failed: an error without a class, a panic, a refused state write.
    Agent,
    /// The model server is rate limiting (429, or an in-stream rate-limit error) past the
    /// agent's retries: try again later, after `retry_after` when it is known.
    ModelRateLimited,
    /// The model server failed or could not be reached (5xx or a connection failure past the
    /// retries, a stream that broke, an error it reported inside the stream).
    ModelUnavailable,
    /// The model server sent nothing for the agent's attempt timeout, or the turn's model-time
    /// budget ran out.
    ModelTimeout,
    /// The model server refused the request: the key (401, 403), the model (404) or the request
    /// itself (400, 422…). Sending it again will not help; the configuration needs fixing.
    ModelRefused,
    /// The model server sent something that is not a chat-completions stream, or that broke a
    /// bound (too many tool calls, an index or arguments past their limits, tools past the round
    /// limit).
    ModelMalformed,
}

impl FailureKind {
    /// Every kind, in a stable order.
    pub const ALL: [FailureKind; 6] = [
        FailureKind::Agent,
        FailureKind::ModelRateLimited,
        FailureKind::ModelUnavailable,
        FailureKind::ModelTimeout,
        FailureKind::ModelRefused,
        FailureKind::ModelMalformed,
    ];

    /// The stable code: `agent_failed`, `model_rate_limited`, `model_unavailable`,
    /// `model_timeout`, `model_refused` or `model_malformed`.
    pub fn code(self) -> &'static str {
        match self {
            Self::Agent => "agent_failed",
            Self::ModelRateLimited => "model_rate_limited",
            Self::ModelUnavailable => "model_unavailable",
            Self::ModelTimeout => "model_timeout",
            Self::ModelRefused => "model_refused",
            Self::ModelMalformed => "model_malformed",
        }
    }

    /// The kind whose [`code`](Self::code) this is; an unknown code (written by a newer build)
    /// is [`FailureKind::Agent`].
    pub fn from_code(code: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|kind| kind.code() == code)
            .unwrap_or(Self::Agent)
    }
}

/// An agent's failure, classified. Return it (boxed, as any [`AgentError`](crate::AgentError))
/// from [`Agent::run`](crate::Agent::run), or keep it in your error's sources, and the turn
/// fails with its [`FailureKind`]: callers get `Error::AgentFailed` with that kind, HTTP
/// clients its own code and status, and the session's history a `turn_failed` event with its
/// code and message.
///
/// The message is stored and shown to whoever reads the session's history: keep secrets out
/// of it.
#[derive(Debug, Clone)]
pub struct AgentFailure {
    kind: FailureKind,
    message: String,
    retry_after: Option<Duration>,
    source: Option<Arc<dyn StdError + Send + Sync>>,
}

impl AgentFailure {
    /// A failure of `kind` that says `message`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
            source: None,
        }
    }

    /// The wait the upstream asked for before trying again (a rate limit's `Retry-After`).
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    /// Keeps `source` as the cause (for callers that downcast, such as to `OpenAiError`).
    pub fn with_source(mut self, source: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The class.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// What happened.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The wait the upstream asked for, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The failure an agent's error stands for: the first `AgentFailure` in `error` or its
    /// sources gives the kind and the wait, and `error`'s own text the message; an error with
    /// none is [`FailureKind::Agent`].
    pub fn of(error: &(dyn StdError + 'static)) -> Self {
        let mut found = None;
        let mut next = Some(error);
        while let Some(current) = next {
            if let Some(failure) = current.downcast_ref::<AgentFailure>() {
                found = Some((failure.kind, failure.retry_after));
                break;
            }
            next = current.source();
        }
        let (kind, retry_after) = found.unwrap_or((FailureKind::Agent, None));
        Self {
            kind,
            message: error.to_string(),
            retry_after,
            source: None,
        }
    }
}

impl std::fmt::Display for AgentFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for AgentFailure {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}

/// A failure's message as a `turn_failed` event keeps it: on one line (control characters
/// become spaces, so that it never splits a log record or a page's line) and at most
/// [`MAX_FAILURE_REASON_BYTES`](crate::config::MAX_FAILURE_REASON_BYTES) bytes, cut at a
/// character boundary.
pub(crate) fn stored_reason(message: &str) -> String {
    let max = crate::config::MAX_FAILURE_REASON_BYTES;
    let mut text = String::with_capacity(message.len().min(max));
    for c in message.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if text.len() + c.len_utf8() > max {
            break;
        }
        text.push(c);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("wrapped: {0}")]
    struct Wrapper(#[source] AgentFailure);

    #[test]
    fn codes_round_trip_and_an_unknown_one_is_an_agent_failure() {
        for kind in FailureKind::ALL {
            assert_eq!(FailureKind::from_code(kind.code()), kind);
        }
        assert_eq!(
            FailureKind::from_code("from_the_future"),
            FailureKind::Agent
        );
    }

    #[test]
    fn a_failure_is_found_in_the_sources_and_the_outer_text_is_kept() {
        let inner = AgentFailure::new(FailureKind::ModelRateLimited, "slow down")
            .with_retry_after(Duration::from_secs(7));
        let outer = Wrapper(inner);
        let found = AgentFailure::of(&outer);
        assert_eq!(found.kind(), FailureKind::ModelRateLimited);
        assert_eq!(found.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(found.message(), "wrapped: slow down");
        let plain = std::io::Error::other("disk");
        assert_eq!(AgentFailure::of(&plain).kind(), FailureKind::Agent);
    }

    #[test]
    fn a_stored_reason_is_one_bounded_line() {
        assert_eq!(stored_reason("a\nb\r\u{1b}[31mc"), "a b  [31mc");
        let long = "é".repeat(crate::config::MAX_FAILURE_REASON_BYTES);
        let cut = stored_reason(&long);
        assert!(cut.len() <= crate::config::MAX_FAILURE_REASON_BYTES);
        assert!(cut.len() > crate::config::MAX_FAILURE_REASON_BYTES - 2);
    }
}
