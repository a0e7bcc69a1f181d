//! The channels file (`serve --channels FILE`) and the adapters' errors.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::call::OverlapPolicy;
use crate::channel::platform::InboundError;
use crate::channel::InboxError;

/// Telegram's default API.
pub const TELEGRAM_API: &str = "https://api.telegram.org";
/// Slack's default Web API.
pub const SLACK_API: &str = "https://slack.com/api";
/// Discord's default API.
pub const DISCORD_API: &str = "https://discord.com/api/v10";

/// How long one Telegram long poll waits for an update (Telegram allows up to 50 s).
pub const DEFAULT_POLL_WAIT: Duration = Duration::from_secs(25);

/// `serve --channels FILE`: which platforms the bot lives on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelsConfig {
    /// A Telegram bot.
    #[serde(default)]
    pub telegram: Option<TelegramConfig>,
    /// A Slack app.
    #[serde(default)]
    pub slack: Option<SlackConfig>,
    /// A Discord application.
    #[serde(default)]
    pub discord: Option<DiscordConfig>,
}

/// How a Telegram bot receives its updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TelegramMode {
    /// Telegram posts each update to `/channels/telegram/webhook` (set with `setWebhook`).
    #[default]
    Webhook,
    /// The bot asks with `getUpdates`: for a bot with no public URL.
    Polling,
}

/// What every platform's section shares.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Common {
    /// How this platform's chats take their messages (default: `serve --channel-policy`).
    #[serde(default)]
    pub policy: Option<ChannelPolicy>,
    /// With `debounce` or `burst`: how long a chat must be quiet, in milliseconds, before its
    /// gathered messages are answered (default 2,000).
    #[serde(default)]
    pub pause_ms: Option<u64>,
    /// Which messages wait for each other: `thread` (default; each thread is its own session and
    /// runs beside the others) or `chat` (one turn at a time in the whole chat, threads
    /// included, in arrival order).
    #[serde(default)]
    pub lock: Option<LockScope>,
    /// Milliseconds between two edits of one chat's streaming reply (default 1,000).
    #[serde(default)]
    pub edit_interval_ms: Option<u64>,
}

/// How a platform's chats take their messages: the runtime's overlap policies, or one that
/// waits for the chat to pause first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChannelPolicy {
    /// Each message in turn ([`OverlapPolicy::Queue`]).
    Queue,
    /// A newer message interrupts the running turn ([`OverlapPolicy::Latest`]).
    Latest,
    /// A message for a busy chat is refused ([`OverlapPolicy::Reject`]).
    Reject,
    /// Messages that queued up are answered together ([`OverlapPolicy::Merge`]).
    Merge,
    /// Wait until the chat is quiet for `pause_ms`, then answer the last message; the earlier
    /// ones are in the history before it, answered by that reply.
    Debounce,
    /// Wait until the chat is quiet for `pause_ms`, then answer the whole burst as one message
    /// (its lines in order).
    Burst,
}

impl ChannelPolicy {
    /// The runtime's policy for this one, when it is one of the runtime's.
    pub fn overlap(self) -> Option<OverlapPolicy> {
        match self {
            Self::Queue => Some(OverlapPolicy::Queue),
            Self::Latest => Some(OverlapPolicy::Latest),
            Self::Reject => Some(OverlapPolicy::Reject),
            Self::Merge => Some(OverlapPolicy::Merge),
            Self::Debounce | Self::Burst => None,
        }
    }
}

/// Which messages of a platform wait for each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockScope {
    /// Each thread (and the chat outside threads) on its own.
    #[default]
    Thread,
    /// The whole chat: one turn at a time across its threads.
    Chat,
}

/// How long a chat must be quiet before gathered messages are answered, unless configured.
pub const DEFAULT_PAUSE: Duration = Duration::from_secs(2);

/// `[telegram]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// The environment variable holding the bot token.
    pub bot_token_env: String,
    /// The environment variable holding the webhook's secret token (the `secret_token` given to
    /// `setWebhook`); required in webhook mode.
    #[serde(default)]
    pub secret_token_env: Option<String>,
    /// `webhook` (default) or `polling`.
    #[serde(default)]
    pub mode: TelegramMode,
    /// The Bot API's base URL (default `https://api.telegram.org`).
    #[serde(default)]
    pub api_base: Option<String>,
    /// Seconds one long poll waits (default 25).
    #[serde(default)]
    pub poll_wait_s: Option<u64>,
    /// Policy and pacing.
    #[serde(flatten)]
    pub common: Common,
}

/// `[slack]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    /// The environment variable holding the bot token (`xoxb-…`).
    pub bot_token_env: String,
    /// The environment variable holding the app's signing secret.
    pub signing_secret_env: String,
    /// The Web API's base URL (default `https://slack.com/api`).
    #[serde(default)]
    pub api_base: Option<String>,
    /// Policy and pacing.
    #[serde(flatten)]
    pub common: Common,
}

/// `[discord]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordConfig {
    /// The application's id.
    pub application_id: String,
    /// The application's public key, in hex (it is public: it only verifies signatures).
    pub public_key: String,
    /// The API's base URL (default `https://discord.com/api/v10`).
    #[serde(default)]
    pub api_base: Option<String>,
    /// Policy and pacing.
    #[serde(flatten)]
    pub common: Common,
}

/// Why the channel adapters could not be built or started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdapterError {
    /// The configuration file could not be read or parsed.
    #[error("channels file {path}: {detail}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// A secret's environment variable is not set.
    #[error("[{section}] {field} names the environment variable {var}, which is not set")]
    MissingSecret {
        /// The section.
        section: &'static str,
        /// The field naming the variable.
        field: &'static str,
        /// The variable.
        var: String,
    },
    /// A setting is not usable.
    #[error("[{section}]: {detail}")]
    Invalid {
        /// The section.
        section: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The inbox failed.
    #[error(transparent)]
    Inbox(#[from] InboxError),
}

/// Why a platform's request was not acknowledged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiveError {
    /// No adapter for this platform is configured.
    #[error("no {0} adapter is configured (serve --channels FILE)")]
    NotConfigured(String),
    /// The request failed its platform's check or is malformed.
    #[error(transparent)]
    Inbound(#[from] InboundError),
    /// The message could not be stored: the platform should retry later.
    #[error(transparent)]
    Inbox(#[from] InboxError),
    /// The server is stopping: the platform should retry later.
    #[error("the server is stopping and takes no new messages")]
    Stopping,
}

impl ChannelsConfig {
    /// Reads a channels file.
    pub fn load(path: &Path) -> Result<Self, AdapterError> {
        let config_error = |detail: String| AdapterError::Config {
            path: path.display().to_string(),
            detail,
        };
        let text = std::fs::read_to_string(path).map_err(|e| config_error(e.to_string()))?;
        let config: Self = toml::from_str(&text).map_err(|e| config_error(e.to_string()))?;
        if config.telegram.is_none() && config.slack.is_none() && config.discord.is_none() {
            return Err(config_error(
                "names no platform: add a [telegram], [slack] or [discord] section".into(),
            ));
        }
        Ok(config)
    }
}
