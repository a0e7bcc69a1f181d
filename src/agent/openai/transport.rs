//! Sending a chat-completions request: the HTTP client, the API key, and retries with backoff
//! and jitter on 429, 5xx and connection errors, honouring `Retry-After`.
//!
//! Retries happen only here, before a response is accepted, so before any of its chunks reached
//! the turn's stream: a half-streamed answer is never replayed.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use tokio::time::Instant;

use super::error::{detail, OpenAiError};
use super::secrets::Secrets;
use super::wire::ChatRequest;
use crate::agent::{ModelRequestId, TurnContext};

/// The most bytes of an error response's body read: an explanation is a sentence or a small
/// JSON object, and a server that answers an error with megabytes (or without end) must not
/// hold the turn's memory or time.
pub(super) const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// How a request is retried.
#[derive(Debug, Clone, Copy)]
pub(super) struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff; it doubles per retry.
    pub base: Duration,
    /// The longest backoff, and the longest `Retry-After` waited for: a server that asks for
    /// longer gets its error reported at once instead of a turn hanging.
    pub max_wait: Duration,
}

/// The API key, kept out of `Debug` output.
#[derive(Clone)]
pub(super) struct ApiKey(pub String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// One model endpoint and how to talk to it.
#[derive(Debug)]
pub(super) struct Transport {
    pub client: reqwest::Client,
    /// `<base URL>/chat/completions`.
    pub url: String,
    /// `url` as errors and logs show it: without user info or query.
    pub shown: String,
    pub api_key: Option<ApiKey>,
    /// What is scrubbed from everything the server sends back before it is shown or logged.
    pub secrets: Secrets,
    /// Extra headers sent with every request (gateways' routing or billing headers).
    pub headers: HeaderMap,
    /// The longest wait for the response headers (and, in the agent, between two chunks).
    pub timeout: Duration,
    pub retry: RetryPolicy,
}

impl Transport {
    /// Sends `request` until a response with a success status arrives, retrying what may succeed
    /// later (but never past `deadline`, the turn's budget); returns that response with its body
    /// unread, and the mark of its attempt in `turn`'s record, which the caller ends once the
    /// body is read. Each attempt is marked in the record as request `round`'s; every failed
    /// one is logged at WARN.
    pub(super) async fn open(
        &self,
        request: &ChatRequest<'_>,
        deadline: Instant,
        turn: &TurnContext,
        round: u32,
    ) -> Result<(Response, ModelRequestId), OpenAiError> {
        // Written once: every retry sends the same bytes, and the turn keeps them for reading.
        let body = serde_json::to_vec(request).map_err(|error| {
            OpenAiError::Config(format!("the request could not be written as JSON: {error}"))
        })?;
        turn.model_request_sent(self.as_sent(round, &body));
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mark = turn.model_request_started(round, attempts);
            let sent = self.send_once(body.clone()).await;
            if let Ok(response) = &sent {
                turn.model_request_answered(mark, response.status().as_u16());
            }
            let (error, retry_after) = match sent {
                Ok(response) if response.status().is_success() => return Ok((response, mark)),
                Ok(response) => self.refusal(response, attempts, request.model).await,
                Err(error) => (with_attempts(error, attempts), None),
            };
            turn.model_request_ended(mark);
            let delay = match retryable(&error) && attempts <= self.retry.max_retries {
                true => retry_delay(attempts - 1, retry_after, self.retry, jitter())
                    .filter(|delay| Instant::now() + *delay < deadline),
                false => None,
            };
            match delay {
                Some(delay) => {
                    tracing::warn!(
                        url = %self.shown, attempt = attempts, %error, retry_in = ?delay,
                        "a model request failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                }
                None => {
                    tracing::warn!(
                        url = %self.shown, attempt = attempts, %error,
                        "a model request failed; not retried"
                    );
                    return Err(with_wait(error, retry_after));
                }
            }
        }
    }

    /// The request of round `round` with body `body` as an operator may read it: the URL
    /// without user info or query, the API key and the extra headers' values redacted, and
    /// every secret taken out of the body.
    fn as_sent(&self, round: u32, body: &[u8]) -> crate::agent::SentRequest {
        let mut headers = Vec::with_capacity(2 + self.headers.len());
        if !self.headers.contains_key(reqwest::header::CONTENT_TYPE) {
            headers.push(("content-type".to_owned(), "application/json".to_owned()));
        }
        if self.api_key.is_some() {
            headers.push(("authorization".to_owned(), "Bearer [redacted]".to_owned()));
        }
        headers.extend(
            self.headers
                .keys()
                .map(|name| (name.as_str().to_owned(), "[redacted]".to_owned())),
        );
        let text = String::from_utf8_lossy(body);
        let text = self.secrets.redact(&text);
        let mut sent = crate::agent::SentRequest::new(round, "POST", &self.shown, headers, &text);
        // The length sent, not the redacted copy's.
        sent.body_bytes = body.len();
        sent
    }

    async fn send_once(&self, body: Vec<u8>) -> Result<Response, OpenAiError> {
        let mut builder = self.client.post(&self.url).headers(self.headers.clone());
        // As `RequestBuilder::json` did: a content type the operator set stays the only one.
        if !self.headers.contains_key(reqwest::header::CONTENT_TYPE) {
            builder = builder.header(reqwest::header::CONTENT_TYPE, "application/json");
        }
        let mut builder = builder.body(body);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(&key.0);
        }
        match tokio::time::timeout(self.timeout, builder.send()).await {
            Err(_) => Err(OpenAiError::Timeout {
                url: self.shown.clone(),
                after: self.timeout,
            }),
            Ok(Err(error)) => Err(OpenAiError::Connection {
                url: self.shown.clone(),
                attempts: 1,
                detail: self.secrets.scrub(&transport_detail(error)),
            }),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// The error for a response with a failure status, and the wait it asked for.
    async fn refusal(
        &self,
        response: Response,
        attempts: u32,
        model: &str,
    ) -> (OpenAiError, Option<Duration>) {
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        // A bounded read: an error body is a sentence, and a stalled or endless one must not
        // hang the turn or fill its memory.
        let body = tokio::time::timeout(self.timeout, read_bounded(response))
            .await
            .unwrap_or_default();
        let url = self.shown.clone();
        let detail = detail(&body, &self.secrets);
        let error = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => OpenAiError::Unauthorized {
                url,
                status: status.as_u16(),
            },
            StatusCode::NOT_FOUND => OpenAiError::UnknownModel {
                url,
                model: self.secrets.scrub(model),
                detail,
            },
            StatusCode::TOO_MANY_REQUESTS => OpenAiError::RateLimited {
                url,
                attempts,
                retry_after,
                detail,
            },
            _ => OpenAiError::Status {
                url,
                status: status.as_u16(),
                attempts,
                detail,
            },
        };
        (error, retry_after)
    }
}

/// At most [`MAX_ERROR_BODY_BYTES`] of a response's body, as text (lossily: it is only shown).
async fn read_bounded(response: Response) -> String {
    let mut body = response.bytes_stream();
    let mut bytes = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        let room = MAX_ERROR_BODY_BYTES - bytes.len();
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if bytes.len() >= MAX_ERROR_BODY_BYTES {
            break;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `error` with the wait the server asked for, when it is a rate limit.
fn with_wait(mut error: OpenAiError, asked: Option<Duration>) -> OpenAiError {
    if let OpenAiError::RateLimited { retry_after, .. } = &mut error {
        *retry_after = retry_after.or(asked);
    }
    error
}

/// `error` with the number of attempts made, where it counts them.
fn with_attempts(mut error: OpenAiError, made: u32) -> OpenAiError {
    if let OpenAiError::Connection { attempts, .. } = &mut error {
        *attempts = made;
    }
    error
}

/// Whether `error` may go away if the request is sent again: rate limits, server errors,
/// timeouts and connection failures.
fn retryable(error: &OpenAiError) -> bool {
    match error {
        OpenAiError::Status { status, .. } => *status == 408 || (500..=599).contains(status),
        OpenAiError::RateLimited { .. }
        | OpenAiError::Connection { .. }
        | OpenAiError::Timeout { .. } => true,
        _ => false,
    }
}

/// The wait before retry number `retry + 1`: the server's `Retry-After` when it gave one (`None`
/// if that is longer than the policy waits), else exponential backoff with jitter (`jitter` in
/// `0..1` picks a point in the upper half, so that clients that failed together spread out).
pub(super) fn retry_delay(
    retry: u32,
    retry_after: Option<Duration>,
    policy: RetryPolicy,
    jitter: f64,
) -> Option<Duration> {
    if let Some(wait) = retry_after {
        return (wait <= policy.max_wait).then_some(wait);
    }
    let backoff = policy
        .base
        .saturating_mul(1u32 << retry.min(16))
        .min(policy.max_wait);
    Some(backoff.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0)))
}

/// The longest wait a server's `Retry-After` is taken at: it is passed on to clients (HTTP
/// `Retry-After`) and to the agent's own retries, and a peer must not be able to tell them to
/// wait for years. An hour is longer than any rate limit a model server sets.
pub(super) const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// `Retry-After` in its seconds form, at most [`MAX_RETRY_AFTER`] (the HTTP-date form is rare
/// from model servers and falls back to backoff).
pub(super) fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    Duration::try_from_secs_f64(seconds)
        .ok()
        .map(|wait| wait.min(MAX_RETRY_AFTER))
}

/// A random number in `0..1` for jitter, from the standard library's randomly keyed hasher (no
/// dependency for one number per retry).
fn jitter() -> f64 {
    let bits = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A transport error with its causes, which is where reqwest says what actually failed; without
/// the URL (it is named elsewhere, without its credentials).
pub(super) fn transport_detail(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy = RetryPolicy {
        max_retries: 3,
        base: Duration::from_millis(100),
        max_wait: Duration::from_secs(2),
    };

    #[test]
    fn backoff_doubles_with_jitter_in_its_upper_half_and_is_capped() {
        assert_eq!(
            retry_delay(0, None, POLICY, 0.0),
            Some(Duration::from_millis(50))
        );
        assert_eq!(
            retry_delay(0, None, POLICY, 1.0),
            Some(Duration::from_millis(100))
        );
        assert_eq!(
            retry_delay(2, None, POLICY, 1.0),
            Some(Duration::from_millis(400))
        );
        assert_eq!(retry_delay(30, None, POLICY, 1.0), Some(POLICY.max_wait));
        let j = jitter();
        assert!((0.0..1.0).contains(&j));
    }

    #[test]
    fn retry_after_is_honoured_unless_longer_than_the_policy_waits() {
        let asked = parse_retry_after(" 1 ");
        assert_eq!(asked, Some(Duration::from_secs(1)));
        assert_eq!(retry_delay(0, asked, POLICY, 0.3), asked);
        assert_eq!(retry_delay(0, parse_retry_after("60"), POLICY, 0.3), None);
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn only_transient_failures_are_retried() {
        let status = |status| OpenAiError::Status {
            url: String::new(),
            status,
            attempts: 1,
            detail: String::new(),
        };
        let limited = OpenAiError::RateLimited {
            url: String::new(),
            attempts: 1,
            retry_after: None,
            detail: String::new(),
        };
        assert!(retryable(&limited) && retryable(&status(503)));
        assert!(!retryable(&status(400)));
        assert!(!retryable(&OpenAiError::Unauthorized {
            url: String::new(),
            status: 401
        }));
    }

    #[test]
    fn the_key_is_not_in_debug_output() {
        assert!(!format!("{:?}", ApiKey("sk-123".into())).contains("sk-123"));
    }
}
