//! Discord's interactions endpoint (requests signed with Ed25519 by the application's key pair:
//! `X-Signature-Ed25519` over `X-Signature-Timestamp` + body): PINGs answered with PONG, slash
//! commands with a deferred response and then through the interaction's webhook (the original
//! response edited, longer replies continued as follow-up messages).

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    fresh, hex_bytes, parse_body, ApiClient, Inbound, InboundError, Platform, PlatformError,
    Webhook,
};
use crate::channel::{ChannelMessage, ReplyTarget};

const PLATFORM: &str = "discord";

/// The header holding the request's signature.
pub(crate) const SIGNATURE_HEADER: &str = "x-signature-ed25519";
/// The header holding the timestamp the signature covers.
pub(crate) const TIMESTAMP_HEADER: &str = "x-signature-timestamp";

/// Discord's limit on a message's content, in characters.
const MAX_CHARS: usize = 2000;

/// The posted id of an interaction's original response.
const ORIGINAL: &str = "@original";

/// Channel types that are threads: a thread is a session of its parent channel's chat.
const THREAD_TYPES: [u64; 3] = [10, 11, 12];

/// One application's interactions.
pub(crate) struct Discord {
    api: ApiClient,
    api_base: String,
    application_id: String,
    public_key: Vec<u8>,
}

impl std::fmt::Debug for Discord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discord")
            .field("application_id", &self.application_id)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Interaction {
    id: String,
    #[serde(rename = "type")]
    kind: u64,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    channel: Option<Channel>,
    #[serde(default)]
    member: Option<Member>,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    data: Option<Command>,
}

#[derive(Deserialize)]
struct Channel {
    #[serde(rename = "type", default)]
    kind: u64,
    #[serde(default)]
    parent_id: Option<String>,
}

#[derive(Deserialize)]
struct Member {
    user: User,
}

#[derive(Deserialize)]
struct User {
    id: String,
}

#[derive(Deserialize)]
struct Command {
    name: String,
    #[serde(default)]
    options: Vec<CommandOption>,
}

#[derive(Deserialize)]
struct CommandOption {
    #[serde(default)]
    value: Option<Value>,
}

impl Discord {
    pub(crate) fn new(
        api_base: &str,
        application_id: String,
        public_key_hex: &str,
    ) -> Result<Self, String> {
        let public_key = hex_bytes(public_key_hex.trim())
            .filter(|key| key.len() == 32)
            .ok_or("the Discord public_key must be the application's 32-byte key in hex")?;
        Ok(Self {
            api: ApiClient::new(PLATFORM)?,
            api_base: api_base.trim_end_matches('/').to_owned(),
            application_id,
            public_key,
        })
    }

    fn verify(&self, request: &Webhook<'_>, now_ms: u64) -> Result<(), InboundError> {
        let timestamp = request.header(TIMESTAMP_HEADER);
        fresh(PLATFORM, timestamp, now_ms)?;
        let signature = request
            .header(SIGNATURE_HEADER)
            .and_then(hex_bytes)
            .ok_or_else(|| InboundError::Unauthenticated {
                platform: PLATFORM,
                detail: "no signature".into(),
            })?;
        let mut signed = timestamp.unwrap_or_default().as_bytes().to_vec();
        signed.extend_from_slice(request.body());
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &self.public_key)
            .verify(&signed, &signature)
            .map_err(|_| InboundError::Unauthenticated {
                platform: PLATFORM,
                detail: "the signature does not match the application's public key".into(),
            })
    }

    fn read(&self, interaction: Interaction) -> Result<Inbound, InboundError> {
        let malformed = |detail: &str| InboundError::Malformed {
            platform: PLATFORM,
            detail: detail.into(),
        };
        match interaction.kind {
            1 => return Ok(Inbound::Answer(json!({ "type": 1 }))),
            2 => {}
            // Autocomplete: no suggestions.
            4 => return Ok(Inbound::Answer(json!({"type": 8, "data": {"choices": []}}))),
            // Components and modals: acknowledged without a change.
            _ => return Ok(Inbound::Answer(json!({ "type": 6 }))),
        }
        let token = interaction.token.ok_or_else(|| malformed("no token"))?;
        let channel_id = interaction
            .channel_id
            .ok_or_else(|| malformed("no channel_id"))?;
        let user = interaction
            .member
            .map(|m| m.user)
            .or(interaction.user)
            .ok_or_else(|| malformed("no member or user"))?;
        let command = interaction.data.ok_or_else(|| malformed("no data"))?;
        let words: Vec<String> = command
            .options
            .into_iter()
            .filter_map(|option| match option.value {
                Some(Value::String(text)) => Some(text),
                Some(Value::Number(n)) => Some(n.to_string()),
                Some(Value::Bool(b)) => Some(b.to_string()),
                _ => None,
            })
            .collect();
        let input = if words.is_empty() {
            command.name
        } else {
            words.join(" ")
        };
        // A thread is its own channel to Discord; here it is a thread of its parent's chat.
        let parent = interaction
            .channel
            .filter(|c| THREAD_TYPES.contains(&c.kind))
            .and_then(|c| c.parent_id);
        let message = match parent {
            Some(parent) => {
                ChannelMessage::new(PLATFORM, parent, user.id, input).in_thread(channel_id)
            }
            None => ChannelMessage::new(PLATFORM, channel_id, user.id, input),
        };
        Ok(Inbound::Message {
            id: interaction.id,
            message,
            reply_to: ReplyTarget::Discord {
                application_id: self.application_id.clone(),
                token,
            },
        })
    }

    fn webhook(&self, target: &ReplyTarget) -> Result<String, PlatformError> {
        match target {
            ReplyTarget::Discord {
                application_id,
                token,
            } => Ok(format!(
                "{}/webhooks/{application_id}/{token}",
                self.api_base
            )),
            other => Err(PlatformError::Refused {
                platform: PLATFORM,
                detail: format!("not a Discord interaction: {}", target_kind(other)),
            }),
        }
    }

    async fn call(&self, request: reqwest::RequestBuilder) -> Result<Value, PlatformError> {
        let answer = self.api.send(request).await?;
        if (200..300).contains(&answer.status) {
            return Ok(answer.json);
        }
        let retry_after = answer
            .json
            .get("retry_after")
            .and_then(Value::as_f64)
            .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok());
        Err(answer.failure(PLATFORM, retry_after))
    }
}

/// A target's platform, without its token.
fn target_kind(target: &ReplyTarget) -> &'static str {
    match target {
        ReplyTarget::Telegram { .. } => "a Telegram chat",
        ReplyTarget::Slack { .. } => "a Slack conversation",
        ReplyTarget::Discord { .. } => "a Discord interaction",
    }
}

/// A message body: no mention in a reply notifies anyone (a model's `@everyone` stays text).
fn content(text: &str) -> Value {
    json!({ "content": text, "allowed_mentions": { "parse": [] } })
}

#[async_trait]
impl Platform for Discord {
    fn channel(&self) -> &'static str {
        PLATFORM
    }

    fn max_chars(&self) -> usize {
        MAX_CHARS
    }

    fn inbound(&self, request: &Webhook<'_>, now_ms: u64) -> Result<Inbound, InboundError> {
        self.verify(request, now_ms)?;
        self.read(parse_body(PLATFORM, request.body())?)
    }

    fn acknowledgement(&self) -> Value {
        // DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: "thinking…" until the original is edited.
        json!({ "type": 5 })
    }

    fn unanswered_note(&self) -> Option<&'static str> {
        Some("(a newer message is answered instead)")
    }

    async fn post(
        &self,
        target: &ReplyTarget,
        part: usize,
        text: &str,
    ) -> Result<String, PlatformError> {
        let webhook = self.webhook(target)?;
        if part == 0 {
            // The deferred response is the first part: it exists already, and is edited.
            let request = self
                .api
                .http()
                .patch(format!("{webhook}/messages/{ORIGINAL}"))
                .json(&content(text));
            self.call(request).await?;
            return Ok(ORIGINAL.to_owned());
        }
        let request = self.api.http().post(&webhook).json(&content(text));
        let sent = self.call(request).await?;
        sent.get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| PlatformError::Unavailable {
                platform: PLATFORM,
                detail: "the follow-up answered no message id".into(),
            })
    }

    async fn edit(
        &self,
        target: &ReplyTarget,
        posted: &str,
        text: &str,
    ) -> Result<(), PlatformError> {
        let webhook = self.webhook(target)?;
        if posted != ORIGINAL && !posted.bytes().all(|b| b.is_ascii_digit()) {
            return Err(PlatformError::Refused {
                platform: PLATFORM,
                detail: format!("{posted:?} is not a Discord message id"),
            });
        }
        let request = self
            .api
            .http()
            .patch(format!("{webhook}/messages/{posted}"))
            .json(&content(text));
        self.call(request).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::KeyPair;

    fn keys() -> ring::signature::Ed25519KeyPair {
        ring::signature::Ed25519KeyPair::from_seed_unchecked(&[7; 32]).unwrap()
    }

    fn discord() -> Discord {
        let public: String = keys()
            .public_key()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Discord::new("http://127.0.0.1:9", "app1".into(), &public).unwrap()
    }

    fn signed(body: &[u8], timestamp: u64) -> Vec<(String, Vec<u8>)> {
        let mut message = timestamp.to_string().into_bytes();
        message.extend_from_slice(body);
        let signature: String = keys()
            .sign(&message)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        vec![
            (SIGNATURE_HEADER.into(), signature.into_bytes()),
            (TIMESTAMP_HEADER.into(), timestamp.to_string().into_bytes()),
        ]
    }

    #[test]
    fn a_ping_gets_a_pong_and_a_command_in_a_thread_is_a_message() {
        let now = 1_700_000_000;
        let ping = br#"{"id":"1","type":1,"application_id":"app1"}"#;
        let read = discord()
            .inbound(&Webhook::new(&signed(ping, now), ping), now * 1000)
            .unwrap();
        assert!(matches!(read, Inbound::Answer(v) if v == json!({"type": 1})));
        let command = br#"{"id":"i9","type":2,"token":"tok","channel_id":"T1",
            "channel":{"id":"T1","type":11,"parent_id":"C1"},
            "member":{"user":{"id":"U1"}},"data":{"name":"ask","options":[{"name":"q","type":3,"value":"hello there"}]}}"#;
        let read = discord()
            .inbound(&Webhook::new(&signed(command, now), command), now * 1000)
            .unwrap();
        let Inbound::Message { id, message, .. } = read else {
            panic!("not a message: {read:?}");
        };
        assert_eq!(id, "i9");
        assert_eq!(message.chat, "C1");
        assert_eq!(message.thread.as_deref(), Some("T1"));
        assert_eq!(message.input, "hello there");
    }

    #[test]
    fn a_forged_signature_or_an_old_timestamp_is_refused() {
        let now = 1_700_000_000;
        let ping = br#"{"id":"1","type":1}"#;
        let mut headers = signed(ping, now);
        headers[0].1[0] ^= 1;
        assert!(matches!(
            discord().inbound(&Webhook::new(&headers, ping), now * 1000),
            Err(InboundError::Unauthenticated { .. })
        ));
        let old = signed(ping, now - 600);
        assert!(matches!(
            discord().inbound(&Webhook::new(&old, ping), now * 1000),
            Err(InboundError::Unauthenticated { .. })
        ));
    }
}
