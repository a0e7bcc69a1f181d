//! Channel adapters: the bots `serve --channels FILE` runs on Telegram, Slack and Discord, built
//! from a TOML file whose secrets are named by environment variables.
//!
//! An adapter takes the platform's request ([`Adapters::receive`]), checks that the platform
//! sent it, stores the message in the inbox (deduplicated by the platform's id) and only then
//! answers the platform; the turn and the reply follow in the background (the courier). HTTP
//! only passes the request in and writes the answer out.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::courier::{Courier, DEFAULT_EDIT_INTERVAL};
use super::platform::{Discord, Inbound, InboundError, Platform, Slack, Telegram, Webhook};
use super::{Accepted, ChannelRouter, Inbox, InboxEntry, InboxError};
use crate::call::OverlapPolicy;

/// Telegram's default API.
pub const TELEGRAM_API: &str = "https://api.telegram.org";
/// Slack's default Web API.
pub const SLACK_API: &str = "https://slack.com/api";
/// Discord's default API.
pub const DISCORD_API: &str = "https://discord.com/api/v10";

/// How long one Telegram long poll waits for an update (Telegram allows up to 50 s).
pub const DEFAULT_POLL_WAIT: Duration = Duration::from_secs(25);

/// How often answered inbox entries older than [`super::DEDUP_RETENTION`] are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

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
    /// The overlap policy of this platform's chats (default: `serve --channel-policy`).
    #[serde(default)]
    pub policy: Option<OverlapPolicy>,
    /// Milliseconds between two edits of one chat's streaming reply (default 1,000).
    #[serde(default)]
    pub edit_interval_ms: Option<u64>,
}

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

/// The configured adapters with their couriers. Cheap to clone.
#[derive(Clone)]
pub struct Adapters {
    inner: Arc<AdaptersInner>,
}

struct AdaptersInner {
    couriers: Vec<Courier>,
    /// Stops the polling and pruning loops (first, at [`Adapters::stop`]).
    loops: tokio_util::sync::CancellationToken,
    /// The Telegram bot, when it polls.
    polling: Option<(Arc<Telegram>, Duration)>,
}

impl std::fmt::Debug for Adapters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let channels: Vec<&str> = self
            .inner
            .couriers
            .iter()
            .map(|c| c.platform().channel())
            .collect();
        f.debug_struct("Adapters")
            .field("channels", &channels)
            .finish_non_exhaustive()
    }
}

fn secret(section: &'static str, field: &'static str, var: &str) -> Result<String, AdapterError> {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| AdapterError::MissingSecret {
            section,
            field,
            var: var.to_owned(),
        })
}

fn interval(common: &Common, section: &'static str) -> Result<Duration, AdapterError> {
    match common.edit_interval_ms {
        None => Ok(DEFAULT_EDIT_INTERVAL),
        Some(0) => Err(AdapterError::Invalid {
            section,
            detail: "edit_interval_ms must be at least 1".into(),
        }),
        Some(ms) => Ok(Duration::from_millis(ms)),
    }
}

fn invalid(section: &'static str) -> impl FnOnce(String) -> AdapterError {
    move |detail| AdapterError::Invalid { section, detail }
}

impl Adapters {
    /// Builds the adapters `config` names over `router` (each platform with its own policy when
    /// it names one) and `inbox`, reading their secrets from the environment. Starts nothing:
    /// see [`Adapters::start`].
    pub fn build(
        config: &ChannelsConfig,
        router: &ChannelRouter,
        inbox: Arc<dyn Inbox>,
    ) -> Result<Self, AdapterError> {
        let mut couriers = Vec::new();
        let mut polling = None;
        let courier = |platform: Arc<dyn Platform>, common: &Common, section| {
            let router = match common.policy {
                Some(policy) => router.clone().with_policy(policy),
                None => router.clone(),
            };
            Ok::<_, AdapterError>(Courier::new(
                router,
                inbox.clone(),
                platform,
                interval(common, section)?,
            ))
        };
        if let Some(telegram) = &config.telegram {
            const SECTION: &str = "telegram";
            let token = secret(SECTION, "bot_token_env", &telegram.bot_token_env)?;
            let secret_token = match (&telegram.secret_token_env, telegram.mode) {
                (Some(var), _) => Some(secret(SECTION, "secret_token_env", var)?),
                (None, TelegramMode::Polling) => None,
                (None, TelegramMode::Webhook) => {
                    return Err(AdapterError::Invalid {
                        section: SECTION,
                        detail: "a webhook needs secret_token_env (the secret_token given to \
                                 setWebhook): without it anyone could post updates"
                            .into(),
                    })
                }
            };
            let webhook_secret = secret_token.filter(|_| telegram.mode == TelegramMode::Webhook);
            let api_base = telegram.api_base.as_deref().unwrap_or(TELEGRAM_API);
            let bot = Arc::new(
                Telegram::new(api_base, &token, webhook_secret).map_err(invalid(SECTION))?,
            );
            if telegram.mode == TelegramMode::Polling {
                let wait = telegram
                    .poll_wait_s
                    .map_or(DEFAULT_POLL_WAIT, Duration::from_secs)
                    .min(Duration::from_secs(50));
                polling = Some((bot.clone(), wait));
            }
            couriers.push(courier(bot, &telegram.common, SECTION)?);
        }
        if let Some(slack) = &config.slack {
            const SECTION: &str = "slack";
            let token = secret(SECTION, "bot_token_env", &slack.bot_token_env)?;
            let signing = secret(SECTION, "signing_secret_env", &slack.signing_secret_env)?;
            let api_base = slack.api_base.as_deref().unwrap_or(SLACK_API);
            let app = Slack::new(api_base, token, &signing).map_err(invalid(SECTION))?;
            couriers.push(courier(Arc::new(app), &slack.common, SECTION)?);
        }
        if let Some(discord) = &config.discord {
            const SECTION: &str = "discord";
            let api_base = discord.api_base.as_deref().unwrap_or(DISCORD_API);
            let app = Discord::new(
                api_base,
                discord.application_id.clone(),
                &discord.public_key,
            )
            .map_err(invalid(SECTION))?;
            couriers.push(courier(Arc::new(app), &discord.common, SECTION)?);
        }
        Ok(Self {
            inner: Arc::new(AdaptersInner {
                couriers,
                loops: tokio_util::sync::CancellationToken::new(),
                polling,
            }),
        })
    }

    /// The channels served (`telegram`, `slack`, `discord`).
    pub fn channels(&self) -> Vec<&'static str> {
        self.inner
            .couriers
            .iter()
            .map(|c| c.platform().channel())
            .collect()
    }

    /// Answers the messages left pending by an earlier run, starts polling (a Telegram bot in
    /// polling mode) and the pruning of old answered entries. Returns how many were resumed.
    pub async fn start(&self) -> Result<usize, AdapterError> {
        let mut resumed = 0;
        for courier in &self.inner.couriers {
            let count = courier.resume().await?;
            if count > 0 {
                tracing::info!(
                    channel = courier.platform().channel(),
                    count,
                    "answering the messages an earlier run left unanswered"
                );
            }
            resumed += count;
        }
        if let Some(courier) = self.inner.couriers.first() {
            let inbox = courier.inbox().clone();
            courier
                .tasks()
                .spawn(prune_loop(inbox, self.inner.loops.clone()));
        }
        if let Some((bot, wait)) = &self.inner.polling {
            let courier = self
                .courier("telegram")
                .expect("a polling bot has its courier");
            let stop = self.inner.loops.clone();
            courier
                .tasks()
                .spawn(poll_loop(courier.clone(), bot.clone(), *wait, stop));
        }
        Ok(resumed)
    }

    /// Stops taking messages and waits up to `grace` for replies in flight; what is not
    /// written by then stays pending and is answered at the next start.
    pub async fn stop(&self, grace: Duration) {
        self.inner.loops.cancel();
        for courier in &self.inner.couriers {
            courier.tasks().close();
        }
        let all_done = futures::future::join_all(
            self.inner
                .couriers
                .iter()
                .map(|courier| courier.tasks().wait()),
        );
        if tokio::time::timeout(grace, all_done).await.is_err() {
            tracing::warn!(
                ?grace,
                "replies still being written at exit are left pending"
            );
        }
        for courier in &self.inner.couriers {
            courier.stop_token().cancel();
        }
        let stopped = futures::future::join_all(
            self.inner
                .couriers
                .iter()
                .map(|courier| courier.tasks().wait()),
        );
        let _ = tokio::time::timeout(Duration::from_secs(1), stopped).await;
    }

    fn courier(&self, channel: &str) -> Option<&Courier> {
        self.inner
            .couriers
            .iter()
            .find(|c| c.platform().channel() == channel)
    }

    /// Takes one request of `channel`'s platform: checks it, stores its message (once per
    /// platform id), and returns the body to answer the platform with (status 200).
    pub async fn receive(
        &self,
        channel: &str,
        request: Webhook<'_>,
    ) -> Result<Value, ReceiveError> {
        let courier = self
            .courier(channel)
            .ok_or_else(|| ReceiveError::NotConfigured(channel.to_owned()))?;
        let platform = courier.platform();
        let read = platform.inbound(&request, now_ms());
        let counted = |result: &'static str| {
            metrics::counter!("turnstile_channel_messages_total",
                "channel" => platform.channel(), "result" => result)
            .increment(1);
        };
        let inbound = match read {
            Ok(inbound) => inbound,
            Err(e) => {
                counted(match e {
                    InboundError::Unauthenticated { .. } => "unauthenticated",
                    _ => "malformed",
                });
                tracing::warn!(channel, error = %e, "a platform request was refused");
                return Err(e.into());
            }
        };
        if courier.stop_token().is_cancelled() || courier.tasks().is_closed() {
            return Err(ReceiveError::Stopping);
        }
        match inbound {
            Inbound::Answer(body) => Ok(body),
            Inbound::Ignored(why) => {
                counted("ignored");
                tracing::debug!(channel, why, "a platform request needs no reply");
                Ok(Value::Object(Default::default()))
            }
            Inbound::Message {
                id,
                message,
                reply_to,
            } => {
                let entry = InboxEntry::new(id, message, reply_to, now_ms());
                match accept(courier, entry).await {
                    Ok(Accepted::New) => counted("accepted"),
                    Ok(Accepted::Duplicate) => counted("duplicate"),
                    Err(e) => {
                        counted("refused");
                        return Err(e.into());
                    }
                }
                Ok(platform.acknowledgement())
            }
        }
    }
}

/// Stores `entry` and, when it is new, hands it to the courier.
async fn accept(courier: &Courier, entry: InboxEntry) -> Result<Accepted, InboxError> {
    let accepted = courier.inbox().accept(&entry).await?;
    if accepted == Accepted::New {
        courier.enqueue(entry);
    }
    Ok(accepted)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Long-polls Telegram until stopped: each update is stored before the next poll confirms it.
async fn poll_loop(
    courier: Courier,
    bot: Arc<Telegram>,
    wait: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut offset = 0i64;
    let mut failures = 0u32;
    loop {
        let polled = tokio::select! {
            polled = bot.poll(offset, wait) => polled,
            () = stop.cancelled() => return,
        };
        let updates = match polled {
            Ok(updates) => {
                failures = 0;
                updates
            }
            Err(e) => {
                failures += 1;
                let pause = match &e {
                    super::PlatformError::RateLimited { retry_after, .. } => *retry_after,
                    _ => Duration::from_millis(500) * 2u32.pow(failures.min(6)),
                };
                tracing::warn!(channel = "telegram", error = %e, ?pause, "getUpdates failed");
                tokio::select! {
                    () = tokio::time::sleep(pause.min(super::platform::MAX_RETRY_AFTER)) => continue,
                    () = stop.cancelled() => return,
                }
            }
        };
        for (id, read) in updates {
            // Stored before the offset moves past it: the next poll confirms it to Telegram.
            if !store_polled(&courier, read).await {
                // Not stored: poll again from here (Telegram sends it again).
                break;
            }
            if let Some(id) = id {
                offset = offset.max(id + 1);
            }
        }
    }
}

/// Stores one polled update; whether the poll may move past it.
async fn store_polled(courier: &Courier, read: Result<Inbound, InboundError>) -> bool {
    let counted = |result: &'static str| {
        metrics::counter!("turnstile_channel_messages_total",
            "channel" => "telegram", "result" => result)
        .increment(1);
    };
    match read {
        Ok(Inbound::Message {
            id,
            message,
            reply_to,
        }) => {
            let entry = InboxEntry::new(id, message, reply_to, now_ms());
            match accept(courier, entry).await {
                Ok(Accepted::New) => counted("accepted"),
                Ok(Accepted::Duplicate) => counted("duplicate"),
                Err(e) => {
                    counted("refused");
                    tracing::warn!(channel = "telegram", error = %e, "an update could not be stored");
                    return false;
                }
            }
        }
        Ok(_) => counted("ignored"),
        Err(e) => {
            counted("malformed");
            tracing::warn!(channel = "telegram", error = %e, "a malformed update was skipped");
        }
    }
    true
}

/// Forgets answered entries past the retention, every [`PRUNE_EVERY`], until stopped.
async fn prune_loop(inbox: Arc<dyn Inbox>, stop: tokio_util::sync::CancellationToken) {
    let retention = u64::try_from(super::DEDUP_RETENTION.as_millis()).unwrap_or(u64::MAX);
    loop {
        if let Err(e) = inbox.prune(now_ms().saturating_sub(retention)).await {
            tracing::warn!(error = %e, "old inbox entries could not be pruned");
        }
        tokio::select! {
            () = tokio::time::sleep(PRUNE_EVERY) => {}
            () = stop.cancelled() => return,
        }
    }
}
