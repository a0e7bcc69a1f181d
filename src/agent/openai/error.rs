//! [`OpenAiError`]: why a model request failed, in words a person can act on.
//!
//! No variant carries the API key or a request header: messages name the endpoint and what the
//! server said, with the key scrubbed from anything the server sent back.

use std::time::Duration;

use crate::context::TemplateError;

/// Why the OpenAI-compatible agent could not be built or could not answer a turn. A turn that
/// fails with it ends as `Error::AgentFailed` carrying this message.
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
    /// The server answered with another error status; for 429 and 5xx only after the retries.
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
    /// The stream is not a chat-completions stream, or the server reported an error in it.
    #[error("the model server at {url} sent a malformed stream: {detail}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was wrong.
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
    /// The model kept asking for tools past the round limit.
    #[error("the model still asked for tools after {rounds} rounds (the limit)")]
    TooManyToolRounds {
        /// The limit.
        rounds: usize,
    },
}

/// The longest piece of a server's error body kept in a message: enough for its explanation,
/// not a page of HTML.
pub(super) const MAX_DETAIL_CHARS: usize = 300;

/// A server's error body as message detail: its `error.message` if it is JSON, else the text,
/// shortened, with `secret` scrubbed out (some servers echo part of the key).
pub(super) fn detail(body: &str, secret: Option<&str>) -> String {
    let parsed = serde_json::from_str::<serde_json::Value>(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message").or_else(|| v.get("error")))
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| body.trim().to_owned());
    let mut text: String = message.chars().take(MAX_DETAIL_CHARS).collect();
    if let Some(secret) = secret.filter(|s| !s.is_empty()) {
        text = text.replace(secret, "[redacted]");
    }
    if text.is_empty() {
        "no explanation given".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_prefer_the_json_message_and_never_hold_the_key() {
        let body =
            r#"{"error":{"message":"Incorrect API key provided: sk-secret-123","type":"x"}}"#;
        let text = detail(body, Some("sk-secret-123"));
        assert_eq!(text, "Incorrect API key provided: [redacted]");
        assert_eq!(detail("  \n", None), "no explanation given");
        assert_eq!(detail(&"x".repeat(1000), None).len(), MAX_DETAIL_CHARS);
    }
}
