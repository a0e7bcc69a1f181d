//! Sending a chat-completions request: the HTTP client, the API key, and retries with backoff
//! and jitter on 429, 5xx and connection errors, honouring `Retry-After`.
//!
//! Retries happen only here, before a response is accepted, so before any of its chunks reached
//! the turn's stream: a half-streamed answer is never replayed.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Response, StatusCode};

use super::error::{detail, OpenAiError};
use super::wire::ChatRequest;

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
    pub api_key: Option<ApiKey>,
    /// Extra headers sent with every request (gateways' routing or billing headers).
    pub headers: HeaderMap,
    /// The longest wait for the response headers (and, in the agent, between two chunks).
    pub timeout: Duration,
    pub retry: RetryPolicy,
}

impl Transport {
    /// Sends `request` until a response with a success status arrives, retrying what may succeed
    /// later; returns that response with its body unread.
    pub(super) async fn open(&self, request: &ChatRequest<'_>) -> Result<Response, OpenAiError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (error, retry_after) = match self.send_once(request).await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => self.refusal(response, attempts, request.model).await,
                Err(error) => (with_attempts(error, attempts), None),
            };
            if !retryable(&error) || attempts > self.retry.max_retries {
                return Err(error);
            }
            match retry_delay(attempts - 1, retry_after, self.retry, jitter()) {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return Err(error),
            }
            tracing::debug!(url = %self.url, attempts, "retrying the model request");
        }
    }

    async fn send_once(&self, request: &ChatRequest<'_>) -> Result<Response, OpenAiError> {
        let mut builder = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .json(request);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(&key.0);
        }
        match tokio::time::timeout(self.timeout, builder.send()).await {
            Err(_) => Err(OpenAiError::Timeout {
                url: self.url.clone(),
                after: self.timeout,
            }),
            Ok(Err(error)) => Err(OpenAiError::Connection {
                url: self.url.clone(),
                attempts: 1,
                detail: transport_detail(&error),
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
        let secret = self.api_key.as_ref().map(|k| k.0.as_str());
        // A bounded read: an error body is a sentence, and a stalled one must not hang the turn.
        let body = tokio::time::timeout(self.timeout, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let url = self.url.clone();
        let error = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => OpenAiError::Unauthorized {
                url,
                status: status.as_u16(),
            },
            StatusCode::NOT_FOUND => OpenAiError::UnknownModel {
                url,
                model: model.to_owned(),
                detail: detail(&body, secret),
            },
            _ => OpenAiError::Status {
                url,
                status: status.as_u16(),
                attempts,
                detail: detail(&body, secret),
            },
        };
        (error, retry_after)
    }
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
        OpenAiError::Status { status, .. } => {
            *status == 408 || *status == 429 || (500..=599).contains(status)
        }
        OpenAiError::Connection { .. } | OpenAiError::Timeout { .. } => true,
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

/// `Retry-After` in its seconds form (the HTTP-date form is rare from model servers and falls
/// back to backoff).
pub(super) fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// A random number in `0..1` for jitter, from the standard library's randomly keyed hasher (no
/// dependency for one number per retry).
fn jitter() -> f64 {
    let bits = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A transport error with its causes, which is where reqwest says what actually failed.
pub(super) fn transport_detail(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
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
        assert!(retryable(&status(429)) && retryable(&status(503)));
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
