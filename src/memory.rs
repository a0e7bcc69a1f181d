//! Memory across sessions: what a user said in *other* sessions, found again by a search.
//!
//! A [`MemoryStore`] keeps **entries** — the user inputs and agent outputs of a user's sessions,
//! each with the [`SessionKey`] and sequence number of the event it came from — and answers
//! [`MemoryStore::search`] with the best `k` entries of that one user, ranked by BM25 (see
//! `docs/memory.md` for why a small inverted index of our own rather than a search engine).
//!
//! The runtime ingests sessions at the moment [`MemoryOptions::ingest`] names, and hands the
//! results to agents through [`TurnContext::recall`](crate::TurnContext::recall) and, with
//! [`MemoryOptions::auto_recall`], inside the `<memory-context>` block of every turn.
//!
//! Stores: [`InMemory`] (tests, demos), [`FileMemory`] (a folder: one append-only log per user)
//! and, with the `redis` feature, [`RedisMemory`]. Every one passes the same conformance suite
//! (`conformance`, with the `testing` feature).

use async_trait::async_trait;
use sha2::Digest;

use crate::key::SessionKey;
use crate::state::{Author, Event, EventKind, Seq};

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
mod in_memory;
mod index;
mod spec;
mod types;

pub use in_memory::InMemory;
pub use index::{tokenize, UserIndex};
pub use spec::MemorySpec;
pub use types::{Ingest, MemoryEntry, MemoryError, MemoryHit, MemoryOptions, Speaker};

/// Most entries kept per user. Past it, the oldest tenth are forgotten at once (one rebuild per
/// tenth, not one per entry), so that one chatty user cannot grow memory without bound; 100,000
/// entries of at most [`MAX_ENTRY_BYTES`] bound one user's index to a few hundred MB at worst
/// and keep a search within milliseconds.
pub const MAX_ENTRIES_PER_USER: usize = 100_000;

/// Longest text kept for one entry; longer inputs and outputs are cut at a character boundary.
/// A recalled entry is background for a prompt, not a transcript: 4 KiB keeps a long answer's
/// gist while bounding what one entry costs in memory and in every prompt it lands in.
pub const MAX_ENTRY_BYTES: usize = 4_096;

/// Most entries one search returns: recall fills a prompt, and more than a hundred background
/// snippets would crowd out the conversation itself.
pub const MAX_K: usize = 100;

/// Distinct query terms a search ranks by; the rest are ignored. Auto-recall searches with the
/// whole input, which may be long: the first 64 distinct words carry its topic, and the bound
/// keeps a search's cost independent of the input's size.
pub const MAX_QUERY_TERMS: usize = 64;

/// Persistence for memory entries, searched per user. Object-safe: the runtime holds an
/// `Arc<dyn MemoryStore>`.
///
/// Entries are identified by `(session key, seq)`: ingesting one that is already stored changes
/// nothing, so ingestion may be retried or repeated freely. A user's search only ever sees that
/// user's entries. A failed call leaves stored data as it was.
#[async_trait]
pub trait MemoryStore: Send + Sync + 'static {
    /// A short name for logs (`"memory"`, `"file"`, `"redis"`).
    fn name(&self) -> &'static str;

    /// Adds entries; those whose `(key, seq)` is already stored are skipped, also within one
    /// call. Entries of anonymous sessions are refused with [`MemoryError::Anonymous`] (an
    /// anonymous user is nobody in particular, so nothing may be recalled across their
    /// sessions), and nothing of the call is stored. Texts longer than [`MAX_ENTRY_BYTES`] are
    /// cut. Returns how many entries were new. When this returns `Ok`, the entries are as
    /// durable as the store promises (fsync'd for the file store).
    async fn ingest(&self, entries: &[MemoryEntry]) -> Result<usize, MemoryError>;

    /// The highest `seq` stored for the session (0 when none): ingestion of a session resumes
    /// after it, so that each ingestion reads only what is new.
    async fn ingested_through(&self, key: &SessionKey) -> Result<Seq, MemoryError>;

    /// The `k` entries of `user_id` that best match `query`, best first, each with its score
    /// and a snippet around the first matching word. Entries that share no word with the query
    /// are never returned, so fewer than `k` (or none) may come back.
    ///
    /// An empty query (no word in it) is [`MemoryError::EmptyQuery`]; `k` outside
    /// `1..=`[`MAX_K`] is [`MemoryError::InvalidK`]. Only the first [`MAX_QUERY_TERMS`]
    /// distinct words count. Stored data that cannot be read is [`MemoryError::Corrupt`], never
    /// an empty answer.
    async fn search(
        &self,
        user_id: &str,
        query: &str,
        k: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError>;

    /// Removes every entry of one session. Returns how many were removed.
    async fn delete_session(&self, key: &SessionKey) -> Result<u64, MemoryError>;

    /// Removes every entry of a user. Returns how many were removed. Never touches another
    /// user's entries.
    async fn delete_user(&self, user_id: &str) -> Result<u64, MemoryError>;
}

/// The key a session's memory entries are filed under: whose memory they join, and the mark
/// its ingestion resumes from.
///
/// A person's session is filed under itself (its user's memory). A channel chat's session —
/// user `channel:<channel>`, id `<channel>|<chat>[|<thread>]` — is filed under its **chat**:
/// the user `channel:<channel>|<chat>` (with the chat's digest in place of the chat when that
/// would be longer than an id may be) and the session's own id. So what is said in one chat is
/// recalled in that chat (and its threads) only, never in another chat of the channel: every
/// chat of a channel shares its user id, and filing by it would make the channel one memory
/// shared by everyone on it. A paired sender's turns recall that person's memory instead (see
/// [`CallOptions::memory_user`](crate::CallOptions::memory_user)).
pub fn memory_key(key: &SessionKey) -> SessionKey {
    let Some(channel) = key.user_id().strip_prefix(crate::key::CHANNEL_USER_PREFIX) else {
        return key.clone();
    };
    let mut parts = key.session_id().splitn(3, crate::key::CHANNEL_SEPARATOR);
    let chat = match (parts.next(), parts.next()) {
        (Some(named), Some(chat)) if named == channel => chat,
        // Not a session the router made: its own id is its chat.
        _ => key.session_id(),
    };
    let mut user = format!("{}{channel}|{chat}", crate::key::CHANNEL_USER_PREFIX);
    if user.len() > crate::key::MAX_ID_BYTES {
        let digest = sha2::Sha256::digest(chat.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        user = format!("{}{channel}|#{hex}", crate::key::CHANNEL_USER_PREFIX);
    }
    SessionKey::new(user, key.session_id()).unwrap_or_else(|_| key.clone())
}

/// The memory entries of a session's events: its user inputs and agent outputs that carry text.
/// Tool calls, notes and summaries are left out (a summary restates what its events said), and
/// so are failed turns' inputs (never answered; left out of the model's context too).
pub fn entries_of(key: &SessionKey, events: &[Event]) -> Vec<MemoryEntry> {
    // A failed turn's input was never answered: left out, as it is of the model's context.
    let failed = crate::state::in_failed_turns(events);
    events
        .iter()
        .zip(failed)
        .filter(|(_, failed)| !failed)
        .filter_map(|(event, _)| {
            let (speaker, text) = match (&event.kind, event.author) {
                (EventKind::UserInput { text, .. }, _) => (Speaker::User, text),
                (EventKind::AgentOutput { text, .. }, Author::Agent) => (Speaker::Agent, text),
                _ => return None,
            };
            (!text.trim().is_empty()).then(|| MemoryEntry {
                key: key.clone(),
                seq: event.seq,
                speaker,
                text: text.clone(),
                at_ms: event.at_ms,
            })
        })
        .collect()
}

/// Checks a search's arguments: `k` in range, and a query with at least one word.
pub(crate) fn check_search(query: &str, k: usize) -> Result<Vec<String>, MemoryError> {
    if k == 0 || k > MAX_K {
        return Err(MemoryError::InvalidK { k });
    }
    let terms = index::query_terms(query);
    if terms.is_empty() {
        return Err(MemoryError::EmptyQuery);
    }
    Ok(terms)
}

/// Checks that no entry belongs to an anonymous session, and cuts long texts.
pub(crate) fn prepare(entries: &[MemoryEntry]) -> Result<Vec<MemoryEntry>, MemoryError> {
    if let Some(entry) = entries.iter().find(|e| e.key.is_anonymous()) {
        return Err(MemoryError::Anonymous {
            session: entry.key.session_id().to_owned(),
        });
    }
    Ok(entries
        .iter()
        .map(|entry| {
            let mut entry = entry.clone();
            truncate(&mut entry.text, MAX_ENTRY_BYTES);
            entry
        })
        .collect())
}

fn truncate(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}
