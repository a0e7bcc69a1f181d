//! Slack's Events API (requests signed with the app's signing secret: `v0` HMAC-SHA256 over
//! `v0:<timestamp>:<body>`) and Web API (`chat.postMessage`, `chat.update`).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    fresh, hex_bytes, parse_body, ApiClient, Inbound, InboundError, Platform, PlatformError,
    Webhook,
};
use crate::channel::{ChannelMessage, ReplyTarget};

const PLATFORM: &str = "slack";

/// The headers Slack signs a request with.
pub(crate) const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The timestamp the signature covers.
pub(crate) const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

/// Where Slack truncates a message's text (it takes 40,000 characters but advises 4,000, and
/// clients fold longer ones).
const MAX_CHARS: usize = 4000;

/// The Events and Web APIs of one Slack app.
pub(crate) struct Slack {
    api: ApiClient,
    api_base: String,
    /// The bot token (`xoxb-…`), sent as a bearer token; never logged.
    token: String,
    signing: ring::hmac::Key,
}

impl std::fmt::Debug for Slack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slack")
            .field("api_base", &self.api_base)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Envelope {
    UrlVerification {
        challenge: String,
    },
    EventCallback {
        event: Event,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    bot_id: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    thread_ts: Option<String>,
}

impl Slack {
    pub(crate) fn new(api_base: &str, token: String, signing_secret: &str) -> Result<Self, String> {
        Ok(Self {
            api: ApiClient::new(PLATFORM)?,
            api_base: api_base.trim_end_matches('/').to_owned(),
            token,
            signing: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, signing_secret.as_bytes()),
        })
    }

    fn verify(&self, request: &Webhook<'_>, now_ms: u64) -> Result<(), InboundError> {
        let unauthenticated = |detail: &str| InboundError::Unauthenticated {
            platform: PLATFORM,
            detail: detail.into(),
        };
        let timestamp = request.header(TIMESTAMP_HEADER);
        fresh(PLATFORM, timestamp, now_ms)?;
        let given = request
            .header(SIGNATURE_HEADER)
            .and_then(|s| s.strip_prefix("v0="))
            .and_then(hex_bytes)
            .ok_or_else(|| unauthenticated("no v0 signature"))?;
        let mut signed = format!("v0:{}:", timestamp.unwrap_or_default()).into_bytes();
        signed.extend_from_slice(request.body());
        ring::hmac::verify(&self.signing, &signed, &given)
            .map_err(|_| unauthenticated("the signature does not match the signing secret"))
    }

    fn read(event: Event) -> Inbound {
        if !matches!(event.kind.as_str(), "message" | "app_mention") {
            return Inbound::Ignored("not a message");
        }
        // Edits, joins, bots' messages (this bot's own replies among them) are not answered.
        if event.subtype.is_some() || event.bot_id.is_some() {
            return Inbound::Ignored("not a person's new message");
        }
        let (Some(user), Some(channel), Some(ts)) = (event.user, event.channel, event.ts) else {
            return Inbound::Ignored("no sender, conversation or timestamp");
        };
        let Some(text) = event.text.filter(|t| !t.trim().is_empty()) else {
            return Inbound::Ignored("no text");
        };
        let mut message = ChannelMessage::new(PLATFORM, channel.clone(), user, text);
        message.thread = event.thread_ts.clone();
        Inbound::Message {
            // A message is one conversation's `ts`: Slack's retries of an event carry it, and
            // so do the `message` and `app_mention` events of one message, answered once.
            id: format!("{channel}:{ts}"),
            message,
            reply_to: ReplyTarget::Slack {
                channel,
                thread_ts: event.thread_ts,
            },
        }
    }

    async fn call(&self, method: &str, body: Value) -> Result<Value, PlatformError> {
        let request = self
            .api
            .http()
            .post(format!("{}/{method}", self.api_base))
            .bearer_auth(&self.token)
            .json(&body);
        let answer = self.api.send(request).await?;
        if answer.status == 200 && answer.json.get("ok") == Some(&Value::Bool(true)) {
            return Ok(answer.json);
        }
        let error = answer.json.get("error").and_then(Value::as_str);
        match (answer.status, error) {
            (200, Some("ratelimited")) => Err(PlatformError::RateLimited {
                platform: PLATFORM,
                retry_after: answer.retry_after.unwrap_or(Duration::from_secs(1)),
            }),
            (
                200,
                Some("internal_error" | "fatal_error" | "service_unavailable" | "request_timeout"),
            ) => Err(PlatformError::Unavailable {
                platform: PLATFORM,
                detail: format!("{method}: {}", error.unwrap_or_default()),
            }),
            (200, _) => Err(PlatformError::Refused {
                platform: PLATFORM,
                detail: format!("{method}: {}", error.unwrap_or("no error named")),
            }),
            _ => Err(answer.failure(PLATFORM, None)),
        }
    }
}

/// Slack reads `&`, `<` and `>` as markup (`<!channel>` notifies everyone): a reply shows them
/// as written.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn slack_target(target: &ReplyTarget) -> Result<(&str, Option<&str>), PlatformError> {
    match target {
        ReplyTarget::Slack { channel, thread_ts } => Ok((channel, thread_ts.as_deref())),
        _ => Err(PlatformError::Refused {
            platform: PLATFORM,
            detail: "the reply's target is not a Slack conversation".into(),
        }),
    }
}

#[async_trait]
impl Platform for Slack {
    fn channel(&self) -> &'static str {
        PLATFORM
    }

    fn max_chars(&self) -> usize {
        MAX_CHARS
    }

    fn inbound(&self, request: &Webhook<'_>, now_ms: u64) -> Result<Inbound, InboundError> {
        self.verify(request, now_ms)?;
        Ok(match parse_body(PLATFORM, request.body())? {
            Envelope::UrlVerification { challenge } => {
                Inbound::Answer(json!({ "challenge": challenge }))
            }
            Envelope::EventCallback { event } => Self::read(event),
            Envelope::Other => Inbound::Ignored("not an event"),
        })
    }

    async fn post(
        &self,
        target: &ReplyTarget,
        _part: usize,
        text: &str,
    ) -> Result<String, PlatformError> {
        let (channel, thread_ts) = slack_target(target)?;
        let mut body = json!({ "channel": channel, "text": escape(text) });
        if let Some(thread) = thread_ts {
            body["thread_ts"] = thread.into();
        }
        let sent = self.call("chat.postMessage", body).await?;
        sent.get("ts")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| PlatformError::Unavailable {
                platform: PLATFORM,
                detail: "chat.postMessage answered no ts".into(),
            })
    }

    async fn edit(
        &self,
        target: &ReplyTarget,
        posted: &str,
        text: &str,
    ) -> Result<(), PlatformError> {
        let (channel, _) = slack_target(target)?;
        let body = json!({ "channel": channel, "ts": posted, "text": escape(text) });
        self.call("chat.update", body).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

    fn signed(body: &[u8], timestamp: u64) -> Vec<(String, Vec<u8>)> {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET.as_bytes());
        let mut base = format!("v0:{timestamp}:").into_bytes();
        base.extend_from_slice(body);
        let tag = ring::hmac::sign(&key, &base);
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        vec![
            (TIMESTAMP_HEADER.into(), timestamp.to_string().into_bytes()),
            (SIGNATURE_HEADER.into(), format!("v0={hex}").into_bytes()),
        ]
    }

    fn slack() -> Slack {
        Slack::new("http://127.0.0.1:9", "xoxb-test".into(), SECRET).unwrap()
    }

    #[test]
    fn a_signed_message_in_a_thread_is_read_and_a_forged_or_old_one_refused() {
        let body = br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"message",
            "user":"U1","text":"hi","channel":"C1","ts":"2.0","thread_ts":"1.0"}}"#;
        let now = 1_700_000_000;
        let headers = signed(body, now);
        let read = slack()
            .inbound(&Webhook::new(&headers, body), now * 1000)
            .unwrap();
        let Inbound::Message { id, message, .. } = read else {
            panic!("not a message: {read:?}");
        };
        assert_eq!(id, "C1:2.0");
        assert_eq!(message.thread.as_deref(), Some("1.0"));
        // Another body under the same signature.
        let forged = br#"{"type":"event_callback","event":{"type":"message"}}"#;
        assert!(matches!(
            slack().inbound(&Webhook::new(&headers, forged), now * 1000),
            Err(InboundError::Unauthenticated { .. })
        ));
        // Signed correctly, but six minutes old.
        let old = signed(body, now - 360);
        assert!(matches!(
            slack().inbound(&Webhook::new(&old, body), now * 1000),
            Err(InboundError::Unauthenticated { .. })
        ));
    }

    #[test]
    fn the_url_check_is_answered_and_bot_messages_ignored() {
        let now = 1_700_000_000;
        let check = br#"{"type":"url_verification","challenge":"abc","token":"t"}"#;
        let read = slack()
            .inbound(&Webhook::new(&signed(check, now), check), now * 1000)
            .unwrap();
        assert!(matches!(read, Inbound::Answer(v) if v == json!({"challenge": "abc"})));
        let own = br#"{"type":"event_callback","event":{"type":"message","bot_id":"B1",
            "user":"U9","text":"a reply","channel":"C1","ts":"3.0"}}"#;
        let read = slack()
            .inbound(&Webhook::new(&signed(own, now), own), now * 1000)
            .unwrap();
        assert!(matches!(read, Inbound::Ignored(_)));
    }

    #[test]
    fn markup_in_a_reply_is_shown_as_written() {
        assert_eq!(
            escape("<!channel> & <@U1>"),
            "&lt;!channel&gt; &amp; &lt;@U1&gt;"
        );
    }
}
