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

    /// What a session's history says of a failure of this kind when the agent gave no words
    /// of its own: short, and nothing of the agent's or the upstream's own text (which may name
    /// hosts or hold what a user should not read).
    pub fn public_reason(self) -> &'static str {
        match self {
            Self::Agent => "the agent failed",
            Self::ModelRateLimited => "the model server was rate limiting this service",
            Self::ModelUnavailable => "the model server failed or could not be reached",
            Self::ModelTimeout => "the model server did not answer in time",
            Self::ModelRefused => "the model server refused the request",
            Self::ModelMalformed => "the model server sent a reply this service cannot use",
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
/// The **message** is stored and shown to whoever reads the session's history (the session's
/// own user included): write it for them, and keep hosts and secrets out of it. The
/// **detail** ([`AgentFailure::with_detail`]; for any other error, its text) is for operators:
/// it is logged and handed to the embedder in `Error::AgentFailed`, never stored.
#[derive(Debug, Clone)]
pub struct AgentFailure {
    kind: FailureKind,
    message: String,
    detail: Option<String>,
    retry_after: Option<Duration>,
    source: Option<Arc<dyn StdError + Send + Sync>>,
}

impl AgentFailure {
    /// A failure of `kind` that says `message`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            detail: None,
            retry_after: None,
            source: None,
        }
    }

    /// What operators should know beyond the message (an upstream's answer, an endpoint):
    /// logged and returned to the embedder, never stored in the session's history.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
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

    /// What happened, for the session's history.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What operators should know: the detail, else the message.
    pub fn detail(&self) -> &str {
        self.detail.as_deref().unwrap_or(&self.message)
    }

    /// The wait the upstream asked for, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The failure an agent's error stands for: the first `AgentFailure` in `error` or its
    /// sources gives the kind, the wait and the message; `error`'s own text is the detail. An
    /// error with none is [`FailureKind::Agent`], with that kind's
    /// [`public_reason`](FailureKind::public_reason) as its message: an error's text may say
    /// what a user must not read.
    pub fn of(error: &(dyn StdError + 'static)) -> Self {
        let mut found = None;
        let mut next = Some(error);
        while let Some(current) = next {
            if let Some(failure) = current.downcast_ref::<AgentFailure>() {
                found = Some(failure);
                break;
            }
            next = current.source();
        }
        let text = error.to_string();
        match found {
            Some(failure) => Self {
                kind: failure.kind,
                message: failure.message.clone(),
                detail: Some(failure.detail.clone().unwrap_or(text)),
                retry_after: failure.retry_after,
                source: None,
            },
            None => Self {
                kind: FailureKind::Agent,
                message: FailureKind::Agent.public_reason().to_owned(),
                detail: Some(text),
                retry_after: None,
                source: None,
            },
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
    fn a_failure_is_found_in_the_sources_and_the_outer_text_is_its_detail() {
        let inner = AgentFailure::new(FailureKind::ModelRateLimited, "slow down")
            .with_retry_after(Duration::from_secs(7));
        let outer = Wrapper(inner);
        let found = AgentFailure::of(&outer);
        assert_eq!(found.kind(), FailureKind::ModelRateLimited);
        assert_eq!(found.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(
            found.message(),
            "slow down",
            "the agent's words for the history"
        );
        assert_eq!(
            found.detail(),
            "wrapped: slow down",
            "the whole text for operators"
        );
    }

    #[test]
    fn a_plain_errors_text_is_only_its_detail() {
        let plain = std::io::Error::other("GET http://10.0.0.9:4000 failed: key sk-123");
        let failure = AgentFailure::of(&plain);
        assert_eq!(failure.kind(), FailureKind::Agent);
        assert_eq!(failure.message(), FailureKind::Agent.public_reason());
        assert!(failure.detail().contains("10.0.0.9"));
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
