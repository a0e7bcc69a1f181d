//! The platforms a bot lives on, as a channel adapter speaks to them: each reads the platform's
//! inbound requests (verifying that the platform sent them) and posts and edits reply messages
//! through the platform's Web API.
//!
//! Everything a platform sends is untrusted input: bodies are parsed into typed values with
//! bounded sizes, answers from its API are read up to [`MAX_API_ANSWER_BYTES`], every call has
//! a deadline, and a `429` names the wait the adapter honours.

mod discord;
mod slack;
mod telegram;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

pub(crate) use discord::Discord;
pub(crate) use slack::Slack;
pub(crate) use telegram::Telegram;

use super::ChannelMessage;
use super::ReplyTarget;

/// Largest answer read from a platform's API: replies to `sendMessage`, `chat.postMessage` and
/// the like are a few kilobytes; anything past this is refused as a broken peer.
pub const MAX_API_ANSWER_BYTES: usize = 256 * 1024;

/// How long one call to a platform's API may take, connection included.
pub const API_TIMEOUT: Duration = Duration::from_secs(15);

/// Longest wait a platform's `429` is honoured for before the call counts as failed: a platform
/// asking for more is treated as unavailable rather than holding a reply for minutes.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Why a platform call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PlatformError {
    /// The platform answered 429: wait `retry_after`, then try again.
    #[error("{platform} asked to slow down: retry after {retry_after:?}")]
    RateLimited {
        /// Which platform.
        platform: &'static str,
        /// How long it asked to wait.
        retry_after: Duration,
    },
    /// The platform refused the call for good (a 4xx other than 429): trying again will not
    /// help.
    #[error("{platform} refused the call: {detail}")]
    Refused {
        /// Which platform.
        platform: &'static str,
        /// Its answer, shortened.
        detail: String,
    },
    /// The platform could not be reached, failed (5xx) or answered nonsense: worth retrying.
    #[error("{platform} is unavailable: {detail}")]
    Unavailable {
        /// Which platform.
        platform: &'static str,
        /// What happened.
        detail: String,
    },
}

impl PlatformError {
    /// The label of its kind in metrics.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "rate_limited",
            Self::Refused { .. } => "refused",
            Self::Unavailable { .. } => "unavailable",
        }
    }
}

/// Why an inbound request was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboundError {
    /// The request does not prove the platform sent it (a missing or wrong secret or signature,
    /// or a timestamp outside the allowed window).
    #[error("{platform}: {detail}")]
    Unauthenticated {
        /// Which platform.
        platform: &'static str,
        /// What was wrong, without any secret.
        detail: String,
    },
    /// The body is not what the platform sends.
    #[error("{platform}: malformed request: {detail}")]
    Malformed {
        /// Which platform.
        platform: &'static str,
        /// What was wrong.
        detail: String,
    },
}

/// What an inbound request asks of the bot.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A message to answer.
    Message {
        /// The platform's id for it.
        id: String,
        /// The message.
        message: ChannelMessage,
        /// Where its reply goes.
        reply_to: ReplyTarget,
    },
    /// A request the platform wants answered with this body at once (Slack's URL check,
    /// Discord's PING).
    Answer(Value),
    /// Something the bot does not answer (its own messages, edits, joins): acknowledged only.
    Ignored(&'static str),
}

/// A request as the adapter receives it: its headers (names in lower case) and raw body.
#[derive(Debug, Clone, Copy)]
pub struct Webhook<'a> {
    headers: &'a [(String, Vec<u8>)],
    body: &'a [u8],
}

impl<'a> Webhook<'a> {
    /// A request with these headers (names compared case-insensitively) and body.
    pub fn new(headers: &'a [(String, Vec<u8>)], body: &'a [u8]) -> Self {
        Self { headers, body }
    }

    /// The first value of header `name`, if present and UTF-8.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// The raw body.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }
}

/// One platform: its inbound requests and its reply messages.
#[async_trait]
pub(crate) trait Platform: Send + Sync + 'static {
    /// The channel name its messages are routed under (`telegram`, `slack`, `discord`).
    fn channel(&self) -> &'static str;

    /// Longest message the platform takes, in characters: longer replies are split.
    fn max_chars(&self) -> usize;

    /// Checks that the platform sent `request` and reads what it asks.
    fn inbound(&self, request: &Webhook<'_>, now_ms: u64) -> Result<Inbound, InboundError>;

    /// What a platform is answered once its message is stored (Discord: a deferred response).
    fn acknowledgement(&self) -> Value {
        Value::Object(Default::default())
    }

    /// What a message whose reply is another's (superseded, merged) shows, when the platform
    /// was promised an answer to every message (Discord's deferred response, "thinking…"
    /// until edited); `None` where nothing needs to be shown.
    fn unanswered_note(&self) -> Option<&'static str> {
        None
    }

    /// Posts part `part` (0 first) of the reply to `target`; returns the posted message's id.
    async fn post(
        &self,
        target: &ReplyTarget,
        part: usize,
        text: &str,
    ) -> Result<String, PlatformError>;

    /// Replaces the text of the posted message `posted`.
    async fn edit(
        &self,
        target: &ReplyTarget,
        posted: &str,
        text: &str,
    ) -> Result<(), PlatformError>;
}

/// The HTTP client of one platform's API, with its bounds.
#[derive(Debug, Clone)]
pub(crate) struct ApiClient {
    platform: &'static str,
    http: reqwest::Client,
}

impl ApiClient {
    pub(crate) fn new(platform: &'static str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(API_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the {platform} API client: {e}"))?;
        Ok(Self { platform, http })
    }

    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Sends `request` and reads its answer: the status, the `Retry-After` header in seconds
    /// when present, and the body as JSON (`Null` when empty or not JSON).
    pub(crate) async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<ApiAnswer, PlatformError> {
        let unavailable = |detail: String| PlatformError::Unavailable {
            platform: self.platform,
            detail,
        };
        let mut response = request
            .send()
            .await
            .map_err(|e| unavailable(without_url(e)))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| unavailable(without_url(e)))?
        {
            if body.len() + chunk.len() > MAX_API_ANSWER_BYTES {
                return Err(unavailable(format!(
                    "its answer is longer than {MAX_API_ANSWER_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(ApiAnswer {
            status,
            retry_after,
            json,
        })
    }
}

/// A reqwest error without the URL, which holds a bot token on Telegram's API.
fn without_url(error: reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connection failed"
    } else if error.is_body() || error.is_decode() {
        "the answer broke off"
    } else {
        "the request failed"
    };
    format!("{kind}: {}", error.without_url())
}

/// An answer of a platform's API.
#[derive(Debug)]
pub(crate) struct ApiAnswer {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) json: Value,
}

impl ApiAnswer {
    /// The error a failed answer is, by its status: 429 rate limited (the wait from
    /// `retry_after` or the header, else a second), other 4xx refused, the rest unavailable.
    pub(crate) fn failure(
        &self,
        platform: &'static str,
        retry_after: Option<Duration>,
    ) -> PlatformError {
        let detail = shorten(&self.json.to_string(), 300);
        match self.status {
            429 => PlatformError::RateLimited {
                platform,
                retry_after: retry_after
                    .or(self.retry_after)
                    .unwrap_or(Duration::from_secs(1)),
            },
            400..=499 => PlatformError::Refused {
                platform,
                detail: format!("{}: {detail}", self.status),
            },
            _ => PlatformError::Unavailable {
                platform,
                detail: format!("{}: {detail}", self.status),
            },
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Compares two secrets in time that does not depend on where they differ.
pub(crate) fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

/// A JSON body, parsed with the platform named in the error.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(
    platform: &'static str,
    body: &[u8],
) -> Result<T, InboundError> {
    serde_json::from_slice(body).map_err(|e| InboundError::Malformed {
        platform,
        detail: e.to_string(),
    })
}

/// `text` split into parts of at most `max` characters counted as UTF-16 code units (Telegram
/// counts so; for the others, whose limits count code points, it errs short), at a line break
/// or space in the last fifth of each part when there is one. Empty text is one empty part.
pub(crate) fn split_reply(text: &str, max: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    loop {
        // The byte offsets where the part would reach `max` and its last fifth begins.
        let (mut units, mut hard, mut soft_floor) = (0, None, 0);
        for (at, c) in rest.char_indices() {
            if units <= max * 4 / 5 {
                soft_floor = at;
            }
            units += c.len_utf16();
            if units > max {
                hard = Some(at);
                break;
            }
        }
        let Some(hard) = hard.filter(|at| *at > 0) else {
            parts.push(rest);
            return parts;
        };
        let window = &rest[..hard];
        let cut = window
            .rfind('\n')
            .filter(|at| *at >= soft_floor)
            .or_else(|| window.rfind(' ').filter(|at| *at >= soft_floor))
            .map_or(hard, |at| at + 1);
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
}

/// Bytes from lower- or upper-case hex; `None` when it is not hex.
pub(crate) fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

/// Whether a platform's timestamp (seconds since the Unix epoch, as text) is within
/// [`MAX_REQUEST_AGE`] of `now_ms`, either way: an older request is a replay.
pub(crate) fn fresh(
    platform: &'static str,
    timestamp: Option<&str>,
    now_ms: u64,
) -> Result<(), InboundError> {
    let unauthenticated = |detail: String| InboundError::Unauthenticated { platform, detail };
    let seconds: u64 = timestamp
        .ok_or_else(|| unauthenticated("no request timestamp".into()))?
        .trim()
        .parse()
        .map_err(|_| unauthenticated("the request timestamp is not a number".into()))?;
    let age = (now_ms / 1000).abs_diff(seconds);
    if age > MAX_REQUEST_AGE.as_secs() {
        return Err(unauthenticated(format!(
            "the request timestamp is {age} s away from this server's clock (at most {} s): a \
             replayed request, or a clock that is off",
            MAX_REQUEST_AGE.as_secs()
        )));
    }
    Ok(())
}

/// How far a signed request's timestamp may be from the server's clock (Slack's rule, used for
/// Discord too): past it the request is refused as a replay.
pub const MAX_REQUEST_AGE: Duration = Duration::from_secs(5 * 60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_split_at_the_limit_preferring_line_breaks_and_lose_nothing() {
        let text = format!("{}\n{}", "a".repeat(90), "b".repeat(50));
        let parts = split_reply(&text, 100);
        assert_eq!(parts, vec![&text[..91], &text[91..]]);
        // No break near the end: cut hard, in characters (not bytes).
        let wide = "é".repeat(250);
        let parts = split_reply(&wide, 100);
        assert_eq!(
            parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            vec![100, 100, 50]
        );
        assert_eq!(parts.concat(), wide);
        assert_eq!(split_reply("", 10), vec![""]);
        // An emoji is two UTF-16 units: 50 of them fill a part of 100.
        let emoji = "😀".repeat(60);
        let parts = split_reply(&emoji, 100);
        assert_eq!(
            parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            vec![50, 10]
        );
        assert_eq!(split_reply("short", 10), vec!["short"]);
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
    }
}
