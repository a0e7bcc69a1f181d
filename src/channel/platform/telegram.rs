//! Telegram's Bot API: updates by webhook (checked by the secret token Telegram sends in
//! `X-Telegram-Bot-Api-Secret-Token`) or by long polling (`getUpdates`), replies by
//! `sendMessage` and `editMessageText`.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    parse_body, same_secret, ApiClient, Inbound, InboundError, Platform, PlatformError, Webhook,
};
use crate::channel::{ChannelMessage, ReplyTarget};

const PLATFORM: &str = "telegram";

/// The header Telegram sends a webhook's secret token in.
pub(crate) const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Telegram's limit on a message's text, in characters.
const MAX_CHARS: usize = 4096;

/// Most updates one `getUpdates` call asks for (Telegram's own maximum).
const UPDATES_PER_POLL: usize = 100;

/// The Bot API of one bot.
pub(crate) struct Telegram {
    api: ApiClient,
    /// `<api_base>/bot<token>`: holds the token, so it is never logged.
    base: String,
    /// The webhook's secret token; `None` when the bot polls (then the webhook is refused).
    secret: Option<Vec<u8>>,
}

impl std::fmt::Debug for Telegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telegram").finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Update {
    update_id: i64,
    #[serde(default)]
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    message_id: i64,
    #[serde(default)]
    message_thread_id: Option<i64>,
    #[serde(default)]
    is_topic_message: Option<bool>,
    #[serde(default)]
    from: Option<User>,
    chat: Chat,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct User {
    id: i64,
    #[serde(default)]
    is_bot: bool,
}

#[derive(Deserialize)]
struct Chat {
    id: i64,
}

impl Telegram {
    pub(crate) fn new(api_base: &str, token: &str, secret: Option<String>) -> Result<Self, String> {
        Ok(Self {
            api: ApiClient::new(PLATFORM)?,
            base: format!("{}/bot{token}", api_base.trim_end_matches('/')),
            secret: secret.map(String::into_bytes),
        })
    }

    fn read(update: Update) -> Inbound {
        let Some(message) = update.message else {
            return Inbound::Ignored("not a new message");
        };
        let Some(text) = message.text.filter(|t| !t.trim().is_empty()) else {
            return Inbound::Ignored("no text");
        };
        let Some(from) = message.from.filter(|from| !from.is_bot) else {
            return Inbound::Ignored("sent by a bot");
        };
        // A forum topic is a thread; elsewhere `message_thread_id` marks a reply chain, which
        // stays in its chat's conversation.
        let thread = message
            .message_thread_id
            .filter(|_| message.is_topic_message == Some(true));
        let mut channel_message = ChannelMessage::new(
            PLATFORM,
            message.chat.id.to_string(),
            from.id.to_string(),
            text,
        );
        channel_message.thread = thread.map(|t| t.to_string());
        Inbound::Message {
            id: update.update_id.to_string(),
            message: channel_message,
            reply_to: ReplyTarget::Telegram {
                chat_id: message.chat.id,
                thread_id: thread,
                message_id: message.message_id,
            },
        }
    }

    /// Reads one update of a `getUpdates` answer; its id even when the rest is malformed, so
    /// that polling moves past it.
    fn read_polled(update: &Value) -> (Option<i64>, Result<Inbound, InboundError>) {
        let id = update.get("update_id").and_then(Value::as_i64);
        let read = serde_json::from_value::<Update>(update.clone())
            .map(Self::read)
            .map_err(|e| InboundError::Malformed {
                platform: PLATFORM,
                detail: e.to_string(),
            });
        (id, read)
    }

    /// One long poll: the updates after `offset` (which also confirms every update before it to
    /// Telegram), waiting up to `wait` for one. Each comes with its id, to move the offset past.
    pub(crate) async fn poll(
        &self,
        offset: i64,
        wait: Duration,
    ) -> Result<Vec<(Option<i64>, Result<Inbound, InboundError>)>, PlatformError> {
        let body = json!({
            "offset": offset,
            "timeout": wait.as_secs(),
            "limit": UPDATES_PER_POLL,
            "allowed_updates": ["message"],
        });
        let request = self
            .api
            .http()
            .post(format!("{}/getUpdates", self.base))
            .timeout(wait + super::API_TIMEOUT)
            .json(&body);
        let result = self.call(request).await?;
        let updates = result
            .as_array()
            .ok_or_else(|| PlatformError::Unavailable {
                platform: PLATFORM,
                detail: "getUpdates answered no list".into(),
            })?;
        Ok(updates
            .iter()
            .take(UPDATES_PER_POLL)
            .map(Self::read_polled)
            .collect())
    }

    /// Calls a Bot API method: its `result`, or the error Telegram's answer describes.
    async fn call(&self, request: reqwest::RequestBuilder) -> Result<Value, PlatformError> {
        let answer = self.api.send(request).await?;
        if answer.status == 200 && answer.json.get("ok") == Some(&Value::Bool(true)) {
            return Ok(answer.json.get("result").cloned().unwrap_or(Value::Null));
        }
        let retry_after = answer
            .json
            .pointer("/parameters/retry_after")
            .and_then(Value::as_f64)
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
        Err(answer.failure(PLATFORM, retry_after))
    }
}

#[async_trait]
impl Platform for Telegram {
    fn channel(&self) -> &'static str {
        PLATFORM
    }

    fn max_chars(&self) -> usize {
        MAX_CHARS
    }

    fn inbound(&self, request: &Webhook<'_>, _now_ms: u64) -> Result<Inbound, InboundError> {
        let Some(secret) = &self.secret else {
            return Err(InboundError::Unauthenticated {
                platform: PLATFORM,
                detail: "this bot reads its updates by polling; its webhook takes none".into(),
            });
        };
        let given = request.header(SECRET_HEADER).unwrap_or_default();
        if !same_secret(given.as_bytes(), secret) {
            return Err(InboundError::Unauthenticated {
                platform: PLATFORM,
                detail: format!("missing or wrong {SECRET_HEADER}"),
            });
        }
        Ok(Self::read(parse_body(PLATFORM, request.body())?))
    }

    async fn post(
        &self,
        target: &ReplyTarget,
        part: usize,
        text: &str,
    ) -> Result<String, PlatformError> {
        let (chat_id, thread_id, message_id) = telegram_target(target)?;
        let mut body = json!({ "chat_id": chat_id, "text": text });
        if let Some(thread) = thread_id {
            body["message_thread_id"] = thread.into();
        }
        if part == 0 {
            body["reply_parameters"] =
                json!({ "message_id": message_id, "allow_sending_without_reply": true });
        }
        let request = self
            .api
            .http()
            .post(format!("{}/sendMessage", self.base))
            .json(&body);
        let sent = self.call(request).await?;
        sent.get("message_id")
            .and_then(Value::as_i64)
            .map(|id| id.to_string())
            .ok_or_else(|| PlatformError::Unavailable {
                platform: PLATFORM,
                detail: "sendMessage answered no message_id".into(),
            })
    }

    async fn edit(
        &self,
        target: &ReplyTarget,
        posted: &str,
        text: &str,
    ) -> Result<(), PlatformError> {
        let (chat_id, _, _) = telegram_target(target)?;
        let message_id: i64 = posted.parse().map_err(|_| PlatformError::Refused {
            platform: PLATFORM,
            detail: format!("{posted:?} is not a Telegram message id"),
        })?;
        let body = json!({ "chat_id": chat_id, "message_id": message_id, "text": text });
        let request = self
            .api
            .http()
            .post(format!("{}/editMessageText", self.base))
            .json(&body);
        match self.call(request).await {
            Ok(_) => Ok(()),
            // An edit to the text it already has (a reply resumed after a restart).
            Err(PlatformError::Refused { detail, .. })
                if detail.contains("message is not modified") =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

fn telegram_target(target: &ReplyTarget) -> Result<(i64, Option<i64>, i64), PlatformError> {
    match target {
        ReplyTarget::Telegram {
            chat_id,
            thread_id,
            message_id,
        } => Ok((*chat_id, *thread_id, *message_id)),
        _ => Err(PlatformError::Refused {
            platform: PLATFORM,
            detail: "the reply's target is not a Telegram chat".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn telegram(secret: Option<&str>) -> Telegram {
        Telegram::new("http://127.0.0.1:9", "123:abc", secret.map(str::to_owned)).unwrap()
    }

    fn update(body: Value) -> Vec<u8> {
        serde_json::to_vec(&body).unwrap()
    }

    #[test]
    fn a_text_message_in_a_forum_topic_is_a_thread_of_its_chat() {
        let body = update(json!({"update_id": 9, "message": {
            "message_id": 5, "message_thread_id": 77, "is_topic_message": true,
            "from": {"id": 42, "is_bot": false, "first_name": "A"},
            "chat": {"id": -100, "type": "supergroup"}, "date": 0, "text": "hi"}}));
        let headers = vec![(SECRET_HEADER.to_owned(), b"s3cret".to_vec())];
        let read = telegram(Some("s3cret"))
            .inbound(&Webhook::new(&headers, &body), 0)
            .unwrap();
        let Inbound::Message {
            id,
            message,
            reply_to,
        } = read
        else {
            panic!("not a message: {read:?}");
        };
        assert_eq!(id, "9");
        assert_eq!(message.chat, "-100");
        assert_eq!(message.thread.as_deref(), Some("77"));
        assert_eq!(message.channel_user, "42");
        assert_eq!(
            reply_to,
            ReplyTarget::Telegram {
                chat_id: -100,
                thread_id: Some(77),
                message_id: 5
            }
        );
    }

    #[test]
    fn a_wrong_or_missing_secret_is_refused_and_bots_are_ignored() {
        let body = update(json!({"update_id": 1, "message": {"message_id": 1,
            "from": {"id": 1, "is_bot": true}, "chat": {"id": 1}, "text": "x"}}));
        let wrong = vec![(SECRET_HEADER.to_owned(), b"nope".to_vec())];
        let bot = telegram(Some("s3cret"));
        assert!(matches!(
            bot.inbound(&Webhook::new(&wrong, &body), 0),
            Err(InboundError::Unauthenticated { .. })
        ));
        assert!(matches!(
            bot.inbound(&Webhook::new(&[], &body), 0),
            Err(InboundError::Unauthenticated { .. })
        ));
        let right = vec![(SECRET_HEADER.to_owned(), b"s3cret".to_vec())];
        assert!(matches!(
            bot.inbound(&Webhook::new(&right, &body), 0),
            Ok(Inbound::Ignored(_))
        ));
        // A polling bot takes nothing by webhook.
        assert!(matches!(
            telegram(None).inbound(&Webhook::new(&right, &body), 0),
            Err(InboundError::Unauthenticated { .. })
        ));
    }

    #[test]
    fn a_malformed_polled_update_still_gives_its_id() {
        let (id, read) = Telegram::read_polled(&json!({"update_id": 3, "message": "?"}));
        assert_eq!(id, Some(3));
        assert!(read.is_err());
    }
}
