//! Channel adapters: the bots `serve --channels FILE` runs on Telegram, Slack and Discord, built
//! from a TOML file whose secrets are named by environment variables.
//!
//! An adapter takes the platform's request ([`Adapters::receive`]), checks that the platform
//! sent it, stores the message in the inbox (deduplicated by the platform's id) and only then
//! answers the platform; the turn and the reply follow in the background (the courier). HTTP
//! only passes the request in and writes the answer out.

mod config;
mod polling;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use config::{
    AdapterError, ChannelPolicy, ChannelsConfig, Common, DiscordConfig, LockScope, ReceiveError,
    SlackConfig, TelegramConfig, TelegramMode, DEFAULT_PAUSE, DEFAULT_POLL_WAIT, DISCORD_API,
    SLACK_API, TELEGRAM_API,
};

use super::courier::{Courier, Gather, Gathering, DEFAULT_EDIT_INTERVAL};
use super::platform::{Discord, Inbound, InboundError, Platform, Slack, Telegram, Webhook};
use super::{Accepted, ChannelRouter, Inbox, InboxEntry, InboxError};

/// How often answered inbox entries older than [`super::DEDUP_RETENTION`] are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

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

/// The gathering `debounce` and `burst` ask for, with their pause.
fn gathering(common: &Common, section: &'static str) -> Result<Option<Gathering>, AdapterError> {
    let kind = match common.policy {
        Some(ChannelPolicy::Debounce) => Gather::Debounce,
        Some(ChannelPolicy::Burst) => Gather::Burst,
        _ if common.pause_ms.is_some() => {
            return Err(AdapterError::Invalid {
                section,
                detail: "pause_ms goes with policy = \"debounce\" or \"burst\"".into(),
            })
        }
        _ => return Ok(None),
    };
    let pause = match common.pause_ms {
        None => DEFAULT_PAUSE,
        Some(ms @ 1..=60_000) => Duration::from_millis(ms),
        Some(_) => {
            return Err(AdapterError::Invalid {
                section,
                detail: "pause_ms must be 1 to 60,000 milliseconds".into(),
            })
        }
    };
    Ok(Some(Gathering { kind, pause }))
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
            let router = match common.policy.and_then(ChannelPolicy::overlap) {
                Some(policy) => router.clone().with_policy(policy),
                None => router.clone(),
            };
            Ok::<_, AdapterError>(Courier::new(
                router,
                inbox.clone(),
                platform,
                interval(common, section)?,
                gathering(common, section)?,
                common.lock == Some(LockScope::Chat),
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
                // Telegram waits at most 50 s; a poll that does not wait would spin.
                let wait = telegram
                    .poll_wait_s
                    .map_or(DEFAULT_POLL_WAIT, Duration::from_secs)
                    .clamp(Duration::from_secs(1), Duration::from_secs(50));
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
            courier.tasks().spawn(polling::poll_loop(
                courier.clone(),
                bot.clone(),
                *wait,
                stop,
            ));
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

/// Stores `entry` and, when it is new, hands it to the courier. Runs as a task of its own: a
/// request dropped meanwhile (its deadline, a platform hanging up) must not leave the message
/// stored and not handed over, which its retry, a duplicate then, would not mend.
pub(super) async fn accept(courier: &Courier, entry: InboxEntry) -> Result<Accepted, InboxError> {
    let courier = courier.clone();
    let task = tokio::spawn(async move {
        let accepted = courier.inbox().accept(&entry).await?;
        if accepted == Accepted::New {
            courier.enqueue(entry);
        }
        Ok(accepted)
    });
    task.await.map_err(|e| InboxError::Unavailable {
        backend: "channel",
        detail: format!("the accepting task did not finish: {e}"),
    })?
}

/// Milliseconds since the Unix epoch, strictly increasing in this process: the order of the
/// inbox's entries (a restart answers pending ones oldest first) never rests on a tie.
pub(super) fn now_ms() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let previous = LAST
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
            Some(wall.max(last + 1))
        })
        .unwrap_or_else(|last| last);
    wall.max(previous + 1)
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
