//! Channel routing and pairing: how a multi-channel bot (Slack-, Discord-, web-style) turns the
//! messages it receives into turns, without any HTTP.
//!
//! A [`ChannelMessage`] arrives with `(channel, chat, thread, channel_user)`. The
//! [`ChannelRouter`] sends it to the session of its chat — key `channel:<channel>` /
//! `channel|chat|thread` (see [`channel_session_key`]) — and resolves its sender to a canonical
//! user id through a [`PairingStore`], so that one person is recognised on every channel.
//!
//! Why the session belongs to `channel:<channel>` and not to the sender: a group chat is one
//! conversation shared by everyone in it, so its history cannot belong to one of them. Listing
//! or deleting the user `channel:slack` covers every Slack chat (and its `user:` state is shared
//! by all of that channel's chats); deleting a person (`Runtime::delete_user` plus
//! [`PairingStore::remove_user`]) removes their own sessions and pairings but not the group
//! chats they spoke in. See `docs/channels.md`.

#[cfg(feature = "http")]
mod adapters;
#[cfg(feature = "http")]
mod courier;
#[cfg(feature = "http")]
mod platform;
mod route;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::call::{CallOptions, Outcome, OverlapPolicy};
use crate::error::Error;
use crate::key::{KeyError, SessionKey};
use crate::runtime::Runtime;
use crate::stream::TurnStream;

#[cfg(feature = "postgres")]
pub use crate::backend::PostgresPairingStore;
#[cfg(feature = "redis")]
pub use crate::backend::RedisPairingStore;
pub use crate::backend::{open_inbox, FileInbox, INBOX_FOLDER};
pub use crate::backend::{open_pairings, FilePairingStore, PAIRINGS_FILE};
pub use crate::channel_message::ChannelMessage;
pub use crate::inbox::{
    Accepted, Inbox, InboxEntry, InboxError, MemoryInbox, ReplyTarget, DEDUP_RETENTION,
    INBOX_SCHEMA_VERSION, MAX_ENTRIES as MAX_INBOX_ENTRIES, MAX_PENDING as MAX_INBOX_PENDING,
};
pub use crate::pairing::{MemoryPairingStore, Pairing, PairingError, PairingStore};
#[cfg(feature = "http")]
pub use adapters::{
    AdapterError, Adapters, ChannelPolicy, ChannelsConfig, Common as AdapterCommon, DiscordConfig,
    LockScope, ReceiveError, SlackConfig, TelegramConfig, TelegramMode, DEFAULT_PAUSE,
    DEFAULT_POLL_WAIT, DISCORD_API, SLACK_API, TELEGRAM_API,
};
#[cfg(feature = "http")]
pub use courier::DEFAULT_EDIT_INTERVAL;
#[cfg(feature = "http")]
pub use platform::{
    InboundError, PlatformError, Webhook, API_TIMEOUT as PLATFORM_API_TIMEOUT,
    MAX_API_ANSWER_BYTES, MAX_REQUEST_AGE, MAX_RETRY_AFTER,
};
pub use route::{
    channel_namespace, session_key as channel_session_key, unpaired_user, validate_channel,
    validate_field as validate_channel_field, validate_user, ChannelField, CHANNEL_SEPARATOR,
    CHANNEL_USER_PREFIX, MAX_CHANNEL_NAME_BYTES,
};

/// The overlap policy of channel messages unless configured otherwise: in a chat, the newest
/// message wins (people correct themselves and add to what they said; answering a stale
/// message first only delays the answer they want). Superseded messages stay in the history.
pub const DEFAULT_CHANNEL_POLICY: OverlapPolicy = OverlapPolicy::Latest;

/// Where a message was routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRoute {
    /// The session of the message's chat (or thread).
    pub key: SessionKey,
    /// The sender's canonical user id: the paired one, else [`unpaired_user`].
    pub user: String,
    /// Whether the sender is paired.
    pub paired: bool,
}

/// The answer to a channel message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelReply {
    /// Where the message went.
    pub route: ChannelRoute,
    /// The turn's outcome (durable).
    pub outcome: Outcome,
}

/// Why a channel message or pairing was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// A field of the message broke a rule.
    #[error("invalid {field}: {rule}")]
    InvalidField {
        /// Which field.
        field: ChannelField,
        /// The rule it broke.
        rule: String,
    },
    /// A user id or the chat's session id broke a key rule (the error names which).
    #[error("invalid key: {0}")]
    InvalidKey(#[from] KeyError),
    /// The user id starts with [`CHANNEL_USER_PREFIX`], which names channel namespaces.
    #[error("user id {user:?} is reserved: ids starting with `channel:` belong to channels")]
    ReservedUser {
        /// The refused id.
        user: String,
    },
    /// The pairing store failed.
    #[error(transparent)]
    Pairing(#[from] PairingError),
    /// The runtime refused or failed the turn.
    #[error(transparent)]
    Runtime(#[from] Error),
}

/// Turns channel messages into turns: routes each to its chat's session and resolves its sender
/// through the pairing store. Cheap to clone.
///
/// The agent sees who spoke through the turn's attributes: `channel`, `chat`, `thread` (null
/// when none), `channel_user` and `user` (the canonical id), merged over any attributes the
/// caller passed. With a memory store, a paired sender's turn recalls that person's memory
/// ([`CallOptions::memory_user`]) and anyone else's the chat's own: memory is per person or
/// per chat, never per channel (see [`crate::memory::memory_key`]).
#[derive(Clone)]
pub struct ChannelRouter {
    runtime: Runtime,
    pairings: Arc<dyn PairingStore>,
    /// Used when a call's options name no policy.
    policy: OverlapPolicy,
}

impl std::fmt::Debug for ChannelRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelRouter")
            .field("runtime", &self.runtime)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl ChannelRouter {
    /// A router over `runtime` that resolves senders through `pairings`, with
    /// [`DEFAULT_CHANNEL_POLICY`].
    pub fn new(runtime: Runtime, pairings: impl PairingStore) -> Self {
        Self::with_pairings_arc(runtime, Arc::new(pairings))
    }

    /// Like [`ChannelRouter::new`], with a shared pairing store.
    pub fn with_pairings_arc(runtime: Runtime, pairings: Arc<dyn PairingStore>) -> Self {
        Self {
            runtime,
            pairings,
            policy: DEFAULT_CHANNEL_POLICY,
        }
    }

    /// Uses `policy` for messages whose options name none.
    pub fn with_policy(mut self, policy: OverlapPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The runtime turns go to.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The pairing store senders are resolved through.
    pub fn pairings(&self) -> &Arc<dyn PairingStore> {
        &self.pairings
    }

    /// The policy of messages whose options name none.
    pub fn policy(&self) -> OverlapPolicy {
        self.policy
    }

    /// Where `message` goes: its session and its sender's canonical user id. Reads the pairing
    /// store; sends nothing.
    pub async fn route(&self, message: &ChannelMessage) -> Result<ChannelRoute, ChannelError> {
        let key = channel_session_key(&message.channel, &message.chat, message.thread.as_deref())?;
        validate_channel_field(ChannelField::ChannelUser, &message.channel_user)?;
        let paired = self
            .pairings
            .get(&message.channel, &message.channel_user)
            .await?;
        Ok(ChannelRoute {
            key,
            paired: paired.is_some(),
            user: paired.unwrap_or_else(|| unpaired_user(&message.channel, &message.channel_user)),
        })
    }

    /// Sends `message` with the router's policy and waits for the durable outcome.
    pub async fn send(&self, message: ChannelMessage) -> Result<ChannelReply, ChannelError> {
        self.send_with(message, CallOptions::default()).await
    }

    /// Sends `message` with `options` (the router's policy when they name none).
    pub async fn send_with(
        &self,
        message: ChannelMessage,
        options: CallOptions,
    ) -> Result<ChannelReply, ChannelError> {
        let route = self.route(&message).await?;
        let options = self.options_for(&message, &route, options);
        let outcome = self
            .runtime
            .call_with(&route.key, message.input, options)
            .await?;
        Ok(ChannelReply { route, outcome })
    }

    /// Sends `message` and streams the agent's chunks, then the outcome.
    pub async fn send_streaming(
        &self,
        message: ChannelMessage,
        options: CallOptions,
    ) -> Result<(ChannelRoute, TurnStream), ChannelError> {
        let route = self.route(&message).await?;
        let options = self.options_for(&message, &route, options);
        let stream = self
            .runtime
            .call_streaming(&route.key, message.input, options)
            .await?;
        Ok((route, stream))
    }

    /// Pairs `(channel, channel_user)` with the canonical `user`, replacing any earlier pairing
    /// of that account. Returns the user it was paired with before.
    pub async fn pair(
        &self,
        channel: &str,
        channel_user: &str,
        user: &str,
    ) -> Result<Option<String>, ChannelError> {
        validate_account(channel, channel_user)?;
        validate_user(user)?;
        Ok(self.pairings.put(channel, channel_user, user).await?)
    }

    /// Removes the pairing of `(channel, channel_user)`. Returns the user it was paired with.
    pub async fn unpair(
        &self,
        channel: &str,
        channel_user: &str,
    ) -> Result<Option<String>, ChannelError> {
        validate_account(channel, channel_user)?;
        Ok(self.pairings.remove(channel, channel_user).await?)
    }

    /// The canonical user `(channel, channel_user)` is paired with, if any.
    pub async fn paired(
        &self,
        channel: &str,
        channel_user: &str,
    ) -> Result<Option<String>, ChannelError> {
        validate_account(channel, channel_user)?;
        Ok(self.pairings.get(channel, channel_user).await?)
    }

    fn options_for(
        &self,
        message: &ChannelMessage,
        route: &ChannelRoute,
        mut options: CallOptions,
    ) -> CallOptions {
        options.policy = Some(options.policy.unwrap_or(self.policy));
        let mut attributes: HashMap<String, Value> = (*options.attributes).clone();
        attributes.insert("channel".into(), message.channel.clone().into());
        attributes.insert("chat".into(), message.chat.clone().into());
        attributes.insert(
            "thread".into(),
            message.thread.clone().map_or(Value::Null, Value::from),
        );
        attributes.insert("channel_user".into(), message.channel_user.clone().into());
        attributes.insert("user".into(), route.user.clone().into());
        options.attributes = Arc::new(attributes);
        // A paired sender's turn recalls that person's memory; anyone else's, the chat's own
        // (the session's default). Never the channel's: every chat of it shares one user id.
        if route.paired && options.memory_user.is_none() {
            options.memory_user = Some(route.user.clone());
        }
        options
    }
}

/// Checks the `(channel, channel_user)` pair of a pairing.
fn validate_account(channel: &str, channel_user: &str) -> Result<(), ChannelError> {
    validate_channel(channel)?;
    validate_channel_field(ChannelField::ChannelUser, channel_user)
}
