//! The inbox: a platform's messages, kept durably from the moment they are acknowledged until
//! their reply is written.
//!
//! A platform (Telegram, Slack, Discord) gives a bot a few seconds to acknowledge a message and
//! retries when it does not hear back. So a channel adapter stores the message here, keyed by
//! the platform's own id, *before* its 2xx; the turn and the reply follow. A retry of a message
//! the inbox holds is a [`Accepted::Duplicate`] and is acknowledged without running again. An
//! entry whose reply was not finished (the process stopped or was killed) is still
//! [`Inbox::pending`] after a restart and is answered then: the turn runs with the entry's
//! request id ([`InboxEntry::request_id`]), so a turn that was already stored is answered from
//! the log, and the reply messages already posted ([`InboxEntry::posted`]) are edited rather
//! than posted again.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::channel_message::ChannelMessage;

/// Most entries of one channel waiting for their reply. Past it a platform's message is refused
/// (`503`, the platform retries later) instead of growing a backlog the bot can never answer.
pub const MAX_PENDING: usize = 10_000;

/// Most entries one channel's inbox keeps, answered or not (answered ones only to recognise a
/// platform's retries). Past it the oldest answered entries are forgotten first.
pub const MAX_ENTRIES: usize = 100_000;

/// How long an answered entry is kept so that a platform's retry of it is recognised: Slack
/// retries within an hour and Telegram redelivers an unacknowledged update for a day.
pub const DEDUP_RETENTION: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The inbox format this build writes and reads up to.
pub const INBOX_SCHEMA_VERSION: u32 = 1;

/// A platform message as the inbox keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxEntry {
    /// The platform's id for the message (Telegram's `update_id`, Slack's channel and `ts`,
    /// Discord's interaction id): unique within the channel, the key retries are recognised by.
    pub id: String,
    /// The message, routed like any channel message.
    pub message: ChannelMessage,
    /// Where the reply goes.
    pub reply_to: ReplyTarget,
    /// When it was accepted, in milliseconds since the Unix epoch.
    pub received_ms: u64,
    /// The platform's ids of the reply messages posted so far, in order: a reply resumed after
    /// a restart edits these instead of posting again.
    #[serde(default)]
    pub posted: Vec<String>,
    /// Whether the reply is written (or was given up on); a done entry is kept only to
    /// recognise retries.
    #[serde(default)]
    pub done: bool,
    /// The id of the message whose turn answers this one too, when they were gathered into one
    /// turn (`debounce`, `burst`): kept before the turn runs, so that a restart makes the same
    /// turn of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

impl InboxEntry {
    /// A new entry, not answered yet.
    pub fn new(id: String, message: ChannelMessage, reply_to: ReplyTarget, now_ms: u64) -> Self {
        Self {
            id,
            message,
            reply_to,
            received_ms: now_ms,
            posted: Vec::new(),
            done: false,
            answered_by: None,
        }
    }

    /// The request id its turn runs with: the same after a restart, so that a turn already
    /// stored is answered from the log and never runs twice.
    pub fn request_id(&self) -> String {
        // Request ids are at most 128 visible bytes; a platform id can be longer, so long ones
        // are hashed (the id is unique within the channel, so is its hash).
        let plain = format!("{}:{}", self.message.channel, self.id);
        if plain.len() <= crate::call::MAX_REQUEST_ID_BYTES
            && plain.bytes().all(|b| b.is_ascii_graphic())
        {
            return plain;
        }
        use sha2::Digest;
        let digest = sha2::Sha256::digest(plain.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}:{hex}", self.message.channel)
    }
}

/// Where a reply goes, as each platform names it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "platform", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReplyTarget {
    /// A Telegram chat (and forum topic), replying to the message.
    Telegram {
        /// The chat.
        chat_id: i64,
        /// The forum topic, if the message was in one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_id: Option<i64>,
        /// The message answered.
        message_id: i64,
    },
    /// A Slack conversation (and thread).
    Slack {
        /// The conversation.
        channel: String,
        /// The thread, if the message was in one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_ts: Option<String>,
    },
    /// A Discord interaction, answered through its webhook (valid for 15 minutes).
    Discord {
        /// The application the interaction belongs to.
        application_id: String,
        /// The interaction's token (it authorises the follow-up; kept only in the inbox).
        token: String,
    },
}

impl std::fmt::Debug for ReplyTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Telegram {
                chat_id,
                thread_id,
                message_id,
            } => f
                .debug_struct("Telegram")
                .field("chat_id", chat_id)
                .field("thread_id", thread_id)
                .field("message_id", message_id)
                .finish(),
            Self::Slack { channel, thread_ts } => f
                .debug_struct("Slack")
                .field("channel", channel)
                .field("thread_ts", thread_ts)
                .finish(),
            // The token authorises replies to the interaction: never printed.
            Self::Discord { application_id, .. } => f
                .debug_struct("Discord")
                .field("application_id", application_id)
                .finish_non_exhaustive(),
        }
    }
}

/// What [`Inbox::accept`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// The entry is stored: acknowledge the platform, then answer it.
    New,
    /// The inbox already holds a message with this id (a platform's retry): acknowledge it,
    /// and do nothing more.
    Duplicate,
}

/// An inbox failure. Nothing was accepted or changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The channel has [`MAX_PENDING`] messages waiting: refuse the platform's message, it
    /// retries later.
    #[error("the {channel} inbox has {pending} messages waiting for a reply (at most {MAX_PENDING}); try again later")]
    Full {
        /// The channel.
        channel: String,
        /// How many wait.
        pending: usize,
    },
    /// A file-system operation failed.
    #[error("inbox: {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or folder.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A stored entry could not be read; it was left in place.
    #[error("inbox entry {place} is corrupt ({detail}); it was left in place")]
    Corrupt {
        /// The file.
        place: String,
        /// What is wrong.
        detail: String,
    },
    /// A stored entry was written by a newer turnstile; it was left in place.
    #[error("inbox entry {place} has schema version {found}; this turnstile reads up to {INBOX_SCHEMA_VERSION} (upgrade it)")]
    Schema {
        /// The file.
        place: String,
        /// The version found.
        found: u32,
    },
    /// The inbox could not be reached; nothing was changed.
    #[error("the {backend} inbox is unavailable: {detail}")]
    Unavailable {
        /// Which backend.
        backend: &'static str,
        /// Why.
        detail: String,
    },
}

/// Where a channel's platform messages wait for their reply. Object-safe: adapters hold an
/// `Arc<dyn Inbox>`.
///
/// Every method is atomic and durable when it returns `Ok` (to the degree the backend
/// promises: fsync'd for the file inbox). Ids are taken as given; an implementation encodes them
/// so that none can reach another's entry.
#[async_trait]
pub trait Inbox: Send + Sync + 'static {
    /// A short name for logs (`"memory"`, `"file"`).
    fn name(&self) -> &'static str;

    /// Stores `entry` unless its channel already holds an entry with its id; refuses it with
    /// [`InboxError::Full`] when the channel has [`MAX_PENDING`] entries waiting.
    async fn accept(&self, entry: &InboxEntry) -> Result<Accepted, InboxError>;

    /// Replaces the stored entry with the same channel and id (its posted replies, or done).
    async fn update(&self, entry: &InboxEntry) -> Result<(), InboxError>;

    /// The entries of `channel` not done, oldest first.
    async fn pending(&self, channel: &str) -> Result<Vec<InboxEntry>, InboxError>;

    /// Forgets done entries received before `before_ms`: a retry of them is then a new message.
    /// Returns how many were forgotten.
    async fn prune(&self, before_ms: u64) -> Result<u64, InboxError>;
}

/// What an inbox knows of one entry without reading it: enough to count, order and prune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryMeta {
    pub(crate) received_ms: u64,
    pub(crate) done: bool,
}

impl EntryMeta {
    pub(crate) fn of(entry: &InboxEntry) -> Self {
        Self {
            received_ms: entry.received_ms,
            done: entry.done,
        }
    }
}

/// One channel's entries as metadata, by a name unique per id: the bookkeeping every inbox
/// shares (the cap on pending entries, the oldest done ones forgotten first). Pure.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    entries: HashMap<String, EntryMeta>,
    pending: usize,
    /// New entries being written (counted against the cap until they are in `entries`).
    reserved: usize,
}

impl Ledger {
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending
    }

    /// Whether one more pending entry fits.
    pub(crate) fn has_room(&self) -> bool {
        self.pending + self.reserved < MAX_PENDING
    }

    /// Counts a new entry against the cap while it is written; `false` when it does not fit.
    pub(crate) fn reserve(&mut self) -> bool {
        let room = self.has_room();
        self.reserved += usize::from(room);
        room
    }

    /// Ends a [`Ledger::reserve`] (the entry is in, or was not written).
    pub(crate) fn release(&mut self) {
        self.reserved = self.reserved.saturating_sub(1);
    }

    pub(crate) fn set(&mut self, name: &str, meta: EntryMeta) {
        if let Some(old) = self.entries.insert(name.to_owned(), meta) {
            self.pending -= usize::from(!old.done);
        }
        self.pending += usize::from(!meta.done);
    }

    pub(crate) fn remove(&mut self, name: &str) {
        if let Some(old) = self.entries.remove(name) {
            self.pending -= usize::from(!old.done);
        }
    }

    /// Names of entries to forget: done ones received before `before_ms`, and then the oldest
    /// done ones while more than [`MAX_ENTRIES`] remain.
    pub(crate) fn expired(&self, before_ms: u64) -> Vec<String> {
        let mut done: Vec<(u64, &String)> = self
            .entries
            .iter()
            .filter(|(_, meta)| meta.done)
            .map(|(name, meta)| (meta.received_ms, name))
            .collect();
        done.sort_unstable();
        let over = self.entries.len().saturating_sub(MAX_ENTRIES);
        done.iter()
            .enumerate()
            .take_while(|(at, (received, _))| *received < before_ms || *at < over)
            .map(|(_, (_, name))| (*name).clone())
            .collect()
    }

    /// Names of entries not done, oldest first.
    pub(crate) fn waiting(&self) -> Vec<String> {
        let mut waiting: Vec<(u64, &String)> = self
            .entries
            .iter()
            .filter(|(_, meta)| !meta.done)
            .map(|(name, meta)| (meta.received_ms, name))
            .collect();
        waiting.sort_unstable();
        waiting.into_iter().map(|(_, name)| name.clone()).collect()
    }
}

/// An inbox in process memory, for tests, demos and the memory session store: lost on exit
/// (and with it the guarantee that a message acknowledged before a crash is answered). Cloning
/// is cheap and shares the inbox.
#[derive(Debug, Clone, Default)]
pub struct MemoryInbox {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

#[derive(Debug, Default)]
struct Channel {
    ledger: Ledger,
    entries: HashMap<String, InboxEntry>,
}

impl MemoryInbox {
    /// An empty inbox.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Inbox for MemoryInbox {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn accept(&self, entry: &InboxEntry) -> Result<Accepted, InboxError> {
        let mut channels = self.channels.lock();
        let channel = channels.entry(entry.message.channel.clone()).or_default();
        if channel.ledger.contains(&entry.id) {
            return Ok(Accepted::Duplicate);
        }
        if !entry.done && !channel.ledger.has_room() {
            return Err(InboxError::Full {
                channel: entry.message.channel.clone(),
                pending: channel.ledger.pending(),
            });
        }
        channel.ledger.set(&entry.id, EntryMeta::of(entry));
        channel.entries.insert(entry.id.clone(), entry.clone());
        Ok(Accepted::New)
    }

    async fn update(&self, entry: &InboxEntry) -> Result<(), InboxError> {
        let mut channels = self.channels.lock();
        let channel = channels.entry(entry.message.channel.clone()).or_default();
        channel.ledger.set(&entry.id, EntryMeta::of(entry));
        channel.entries.insert(entry.id.clone(), entry.clone());
        Ok(())
    }

    async fn pending(&self, channel: &str) -> Result<Vec<InboxEntry>, InboxError> {
        let channels = self.channels.lock();
        let Some(channel) = channels.get(channel) else {
            return Ok(Vec::new());
        };
        Ok(channel
            .ledger
            .waiting()
            .iter()
            .filter_map(|id| channel.entries.get(id).cloned())
            .collect())
    }

    async fn prune(&self, before_ms: u64) -> Result<u64, InboxError> {
        let mut forgotten = 0;
        for channel in self.channels.lock().values_mut() {
            for id in channel.ledger.expired(before_ms) {
                channel.ledger.remove(&id);
                channel.entries.remove(&id);
                forgotten += 1;
            }
        }
        Ok(forgotten)
    }
}

/// The conformance suite every inbox passes (used by the tests of each backend).
#[cfg(test)]
pub(crate) mod conformance {
    use crate::channel_message::ChannelMessage;
    use crate::inbox::{Accepted, Inbox, InboxEntry, ReplyTarget};

    pub(crate) fn entry(channel: &str, id: &str, at: u64) -> InboxEntry {
        InboxEntry::new(
            id.into(),
            ChannelMessage::new(channel, "chat-1", "u1", format!("message {id}")),
            ReplyTarget::Telegram {
                chat_id: 1,
                thread_id: None,
                message_id: 7,
            },
            at,
        )
    }

    pub(crate) async fn run(inbox: &dyn Inbox) {
        // A message is accepted once; its retry is a duplicate and changes nothing.
        let first = entry("telegram", "100", 10);
        assert_eq!(inbox.accept(&first).await.unwrap(), Accepted::New);
        let mut retry = first.clone();
        retry.message.input = "changed".into();
        assert_eq!(inbox.accept(&retry).await.unwrap(), Accepted::Duplicate);
        assert_eq!(
            inbox.pending("telegram").await.unwrap(),
            vec![first.clone()]
        );
        // The same id on another channel is another message.
        assert_eq!(
            inbox.accept(&entry("slack", "100", 11)).await.unwrap(),
            Accepted::New
        );
        // Pending is oldest first and leaves out done entries; an update is kept.
        let second = entry("telegram", "101", 5);
        inbox.accept(&second).await.unwrap();
        let mut posted = first.clone();
        posted.posted.push("55".into());
        inbox.update(&posted).await.unwrap();
        assert_eq!(
            inbox.pending("telegram").await.unwrap(),
            vec![second.clone(), posted.clone()]
        );
        let mut done = posted.clone();
        done.done = true;
        inbox.update(&done).await.unwrap();
        assert_eq!(
            inbox.pending("telegram").await.unwrap(),
            vec![second.clone()]
        );
        // A done entry still recognises retries until pruned; pruning spares pending ones.
        assert_eq!(inbox.accept(&first).await.unwrap(), Accepted::Duplicate);
        assert_eq!(inbox.prune(1_000).await.unwrap(), 1);
        assert_eq!(inbox.pending("telegram").await.unwrap(), vec![second]);
        assert_eq!(inbox.accept(&first).await.unwrap(), Accepted::New);
        // Ids of any bytes stay apart.
        for id in ["../x", "a/b", "", "é", "x".repeat(300).as_str()] {
            assert_eq!(
                inbox.accept(&entry("discord", id, 1)).await.unwrap(),
                Accepted::New,
                "{id:?}"
            );
        }
        assert_eq!(inbox.pending("discord").await.unwrap().len(), 5);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_memory_inbox_passes_the_conformance_suite() {
        conformance::run(&MemoryInbox::new()).await;
    }

    #[tokio::test]
    async fn a_full_channel_refuses_new_messages_and_keeps_taking_retries() {
        let inbox = MemoryInbox::new();
        for at in 0..MAX_PENDING as u64 {
            let entry = conformance::entry("telegram", &at.to_string(), at);
            inbox.accept(&entry).await.unwrap();
        }
        let over = conformance::entry("telegram", "over", 0);
        assert!(matches!(
            inbox.accept(&over).await,
            Err(InboxError::Full { pending, .. }) if pending == MAX_PENDING
        ));
        let retry = conformance::entry("telegram", "0", 0);
        assert_eq!(inbox.accept(&retry).await.unwrap(), Accepted::Duplicate);
        // Another channel has room of its own.
        let other = conformance::entry("slack", "over", 0);
        assert_eq!(inbox.accept(&other).await.unwrap(), Accepted::New);
    }

    #[test]
    fn past_the_entry_cap_the_oldest_answered_entries_go_first() {
        let mut ledger = Ledger::default();
        for at in 0..(MAX_ENTRIES as u64 + 3) {
            let done = at != 1;
            ledger.set(
                &at.to_string(),
                EntryMeta {
                    received_ms: at,
                    done,
                },
            );
        }
        // Three over the cap: the three oldest done ones (0, 2, 3), never the pending 1.
        assert_eq!(ledger.expired(0), vec!["0", "2", "3"]);
        assert_eq!(ledger.waiting(), vec!["1"]);
        assert_eq!(ledger.pending(), 1);
    }

    #[test]
    fn request_ids_stay_valid_whatever_the_platform_id() {
        let short = conformance::entry("telegram", "100", 0);
        assert_eq!(short.request_id(), "telegram:100");
        for id in ["x".repeat(200), "a b".into(), "é".into()] {
            let entry = conformance::entry("telegram", &id, 0);
            let request = entry.request_id();
            crate::call::check_request_id(&request).unwrap();
            assert_ne!(
                request,
                conformance::entry("telegram", "other", 0).request_id()
            );
        }
    }
}
