//! [`OpenAiError`]: why a model request failed, in words a person can act on, and the
//! [`FailureKind`] it is to callers.
//!
//! No variant carries the API key or a request header: messages name the endpoint (without
//! user info or query) and what the server said, with every secret scrubbed from anything the
//! server sent back (see `secrets`).

use std::time::Duration;

use super::secrets::Secrets;
use crate::agent::FailureKind;
use crate::context::TemplateError;

/// Why the OpenAI-compatible agent could not be built or could not answer a turn. A turn that
/// fails with it ends as `Error::AgentFailed` carrying this message and its
/// [`kind`](OpenAiError::kind); the agent returns it inside an
/// [`AgentFailure`](crate::AgentFailure) (as its source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenAiError {
    /// The agent's settings are not usable (a bad URL, header or template).
    #[error("invalid OpenAI agent setting: {0}")]
    Config(String),
    /// The environment variable meant to hold the API key is not set.
    #[error(
        "the API key variable {var} is not set; export it or choose another with --api-key-env"
    )]
    MissingApiKey {
        /// The variable's name.
        var: String,
    },
    /// The system prompt could not be filled from the session's state.
    #[error("the system prompt could not be rendered: {0}")]
    Template(#[from] TemplateError),
    /// The server refused the credentials (401 or 403).
    #[error(
        "the model server at {url} refused the API key ({status}); check the key's variable \
         and that the key is valid for this server"
    )]
    Unauthorized {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// The server does not know the model (404, or an error that names the model).
    #[error("the model server at {url} does not serve model {model:?}: {detail}")]
    UnknownModel {
        /// The endpoint.
        url: String,
        /// The model asked for.
        model: String,
        /// What the server said.
        detail: String,
    },
    /// The server kept answering 429 (rate limited) past the retries, or asked for a longer wait
    /// than the agent waits.
    #[error(
        "the model server at {url} is rate limiting (429 after {attempts} attempt(s){}): {detail}",
        wait_text(*retry_after)
    )]
    RateLimited {
        /// The endpoint.
        url: String,
        /// Requests sent, retries included.
        attempts: u32,
        /// The wait its last `Retry-After` asked for.
        retry_after: Option<Duration>,
        /// What the server said.
        detail: String,
    },
    /// The server answered with another error status; for 408 and 5xx only after the retries.
    #[error("the model server at {url} answered {status} after {attempts} attempt(s): {detail}")]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// Requests sent, retries included.
        attempts: u32,
        /// What the server said.
        detail: String,
    },
    /// The server could not be reached (after the retries).
    #[error("cannot reach the model server at {url} after {attempts} attempt(s): {detail}")]
    Connection {
        /// The endpoint.
        url: String,
        /// Requests tried.
        attempts: u32,
        /// The transport's reason.
        detail: String,
    },
    /// The server sent nothing for longer than the timeout.
    #[error("the model server at {url} sent nothing for {after:?} (the request timeout)")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// The turn's model time ran out (the agent's turn timeout): requests, retries and their
    /// waits, streaming and tools together.
    #[error("the model did not finish the turn within {budget:?} (the turn timeout) at {url}")]
    TurnTimeout {
        /// The endpoint.
        url: String,
        /// The budget.
        budget: Duration,
    },
    /// The stream is not a chat-completions stream, or it broke one of the agent's bounds (tool
    /// calls per response, an index, the size of a name, id or arguments).
    #[error("the model server at {url} sent a malformed stream: {detail}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was wrong.
        detail: String,
    },
    /// The server reported an error inside the stream (an `{"error": …}` object), after the
    /// response had started; it is not retried.
    #[error("the model server at {url} reported an error in its stream: {detail}")]
    InStream {
        /// The endpoint.
        url: String,
        /// The class the error's code or type names.
        kind: FailureKind,
        /// What the server said.
        detail: String,
    },
    /// The stream broke after part of the answer was streamed; it is not replayed.
    #[error(
        "the stream from {url} broke after part of the answer was sent ({detail}); it is not \
         retried, so that no text is repeated"
    )]
    Broken {
        /// The endpoint.
        url: String,
        /// The transport's reason.
        detail: String,
    },
    /// A turn attribute the agent reads (`openai.tools`, `openai.temperature`…) is malformed,
    /// or names a tool the agent has already.
    #[error("the turn's {name} is not usable: {detail}")]
    TurnOption {
        /// The attribute.
        name: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The model kept asking for tools past the round limit.
    #[error("the model still asked for tools after {rounds} rounds (the limit)")]
    TooManyToolRounds {
        /// The limit.
        rounds: usize,
    },
}

fn wait_text(wait: Option<Duration>) -> String {
    match wait {
        Some(wait) => format!("; it asked to wait {wait:?}"),
        None => String::new(),
    }
}

impl OpenAiError {
    /// What kind of failure this is to callers (HTTP codes, `Error::AgentFailed::kind`).
    pub fn kind(&self) -> FailureKind {
        match self {
            Self::Config(_)
            | Self::MissingApiKey { .. }
            | Self::Template(_)
            | Self::TurnOption { .. } => FailureKind::Agent,
            Self::Unauthorized { .. } | Self::UnknownModel { .. } => FailureKind::ModelRefused,
            Self::RateLimited { .. } => FailureKind::ModelRateLimited,
            Self::Status { status, .. } => status_kind(*status),
            Self::Connection { .. } | Self::Broken { .. } => FailureKind::ModelUnavailable,
            Self::Timeout { .. } | Self::TurnTimeout { .. } => FailureKind::ModelTimeout,
            Self::Malformed { .. } | Self::TooManyToolRounds { .. } => FailureKind::ModelMalformed,
            Self::InStream { kind, .. } => *kind,
        }
    }

    /// The wait the server asked for (a rate limit's `Retry-After`), if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The class of an HTTP status from the model server.
pub(super) fn status_kind(status: u16) -> FailureKind {
    match status {
        429 => FailureKind::ModelRateLimited,
        408 => FailureKind::ModelTimeout,
        500..=599 => FailureKind::ModelUnavailable,
        _ => FailureKind::ModelRefused,
    }
}

/// The class of an in-stream error object, from its `code` (a status number or a name such as
/// `rate_limit_exceeded`) or its `type` (`server_error`…): an error the server reports while it
/// streams is its own failure unless it says otherwise.
pub(super) fn in_stream_kind(error: &serde_json::Value) -> FailureKind {
    let code = error.get("code").or_else(|| error.get("status"));
    let status = code.and_then(|code| {
        code.as_u64()
            .or_else(|| code.as_str().and_then(|s| s.trim().parse().ok()))
    });
    if let Some(status) = status {
        return u16::try_from(status).map_or(FailureKind::ModelUnavailable, status_kind);
    }
    let names = [code, error.get("type")]
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>();
    // Errors that sending again will not mend: the request, the key, the account's quota.
    const REFUSED: [&str; 6] = [
        "invalid_request",
        "context_length",
        "insufficient_quota",
        "authentication",
        "permission",
        "not_found",
    ];
    if names.iter().any(|name| name.contains("rate_limit")) {
        FailureKind::ModelRateLimited
    } else if names
        .iter()
        .any(|name| REFUSED.iter().any(|refused| name.contains(refused)))
    {
        FailureKind::ModelRefused
    } else if names.iter().any(|name| name.contains("timeout")) {
        FailureKind::ModelTimeout
    } else {
        FailureKind::ModelUnavailable
    }
}

/// A server's error body, or an in-stream error object, as message detail: its `message` (or
/// `error.message`) if it is JSON, else the text — scrubbed of every secret and shortened (see
/// [`Secrets::scrub`]).
pub(super) fn detail(body: &str, secrets: &Secrets) -> String {
    let parsed = serde_json::from_str::<serde_json::Value>(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("error"))
        })
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| body.trim().to_owned());
    let text = secrets.scrub(&message);
    if text.trim().is_empty() {
        "no explanation given".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn details_prefer_the_json_message_and_never_hold_the_key() {
        let secrets = Secrets::new(
            Some("sk-secret-123456"),
            &Default::default(),
            &reqwest::Url::parse("http://127.0.0.1:9/").unwrap(),
        );
        let body =
            r#"{"error":{"message":"Incorrect API key provided: sk-secret-123456","type":"x"}}"#;
        let text = detail(body, &secrets);
        assert_eq!(text, "Incorrect API key provided: [redacted]");
        assert_eq!(detail("  \n", &secrets), "no explanation given");
        let none = Secrets::new(
            None,
            &Default::default(),
            &reqwest::Url::parse("http://127.0.0.1:9/").unwrap(),
        );
        assert_eq!(
            detail(&"x".repeat(1000), &none).chars().count(),
            super::super::secrets::MAX_DETAIL_CHARS
        );
    }

    #[test]
    fn every_failure_has_the_class_a_caller_acts_on() {
        let url = String::new;
        assert_eq!(status_kind(429), FailureKind::ModelRateLimited);
        assert_eq!(status_kind(503), FailureKind::ModelUnavailable);
        assert_eq!(status_kind(400), FailureKind::ModelRefused);
        assert_eq!(status_kind(408), FailureKind::ModelTimeout);
        let unauthorized = OpenAiError::Unauthorized {
            url: url(),
            status: 401,
        };
        assert_eq!(unauthorized.kind(), FailureKind::ModelRefused);
        let limited = OpenAiError::RateLimited {
            url: url(),
            attempts: 4,
            retry_after: Some(Duration::from_secs(30)),
            detail: "slow".into(),
        };
        assert_eq!(limited.kind(), FailureKind::ModelRateLimited);
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(30)));
        assert!(
            limited.to_string().contains("asked to wait 30s"),
            "{limited}"
        );
        let rounds = OpenAiError::TooManyToolRounds { rounds: 8 };
        assert_eq!(rounds.kind(), FailureKind::ModelMalformed);
    }

    #[test]
    fn an_in_stream_error_is_classed_by_its_code_or_type() {
        let kind = |value| in_stream_kind(&value);
        assert_eq!(kind(json!({"code": 429})), FailureKind::ModelRateLimited);
        assert_eq!(
            kind(json!({"code": "rate_limit_exceeded"})),
            FailureKind::ModelRateLimited
        );
        assert_eq!(kind(json!({"code": 401})), FailureKind::ModelRefused);
        assert_eq!(
            kind(json!({"type": "server_error"})),
            FailureKind::ModelUnavailable
        );
        assert_eq!(kind(json!({"message": "?"})), FailureKind::ModelUnavailable);
    }
}
