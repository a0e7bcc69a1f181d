//! What memory stores keep and answer, when the runtime ingests, and how they fail.

use serde::{Deserialize, Serialize};

use crate::key::SessionKey;
use crate::state::Seq;

/// Who said an entry's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    /// The user (a `user_input` event).
    User,
    /// The agent (an `agent_output` event).
    Agent,
}

/// One remembered message: the text of one event of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryEntry {
    /// The session it was said in; its user is whose memory this is.
    pub key: SessionKey,
    /// The event's sequence number in that session's log.
    pub seq: Seq,
    /// Who said it.
    pub speaker: Speaker,
    /// What was said (at most [`MAX_ENTRY_BYTES`](super::MAX_ENTRY_BYTES) once stored).
    pub text: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryHit {
    /// The entry found.
    pub entry: MemoryEntry,
    /// Its BM25 score for the query: higher is better; comparable only within one search.
    pub score: f32,
    /// A short excerpt of the text around the first matching word.
    pub snippet: String,
}

/// When the runtime ingests a session into memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Ingest {
    /// When the session stops (idle or LRU passivation, drain, shutdown): everything it stored
    /// since its last ingestion.
    #[default]
    OnPassivation,
    /// When compaction summarises older events: the events it summarised.
    OnCompaction,
    /// Only when [`Runtime::remember`](crate::Runtime::remember) is called.
    Explicit,
}

/// How a runtime uses its memory store; see
/// [`RuntimeBuilder::with_memory`](crate::RuntimeBuilder::with_memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryOptions {
    /// When sessions are ingested.
    pub ingest: Ingest,
    /// Before each turn, search the user's memory with the turn's input and put the best `k`
    /// entries into the `<memory-context>` block. `None`: only explicit
    /// [`TurnContext::recall`](crate::TurnContext::recall).
    pub auto_recall: Option<usize>,
}

/// A memory store failure. Every variant says what it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The query holds no word to search for.
    #[error("the memory query is empty: give at least one word to search for")]
    EmptyQuery,
    /// `k` is outside `1..=MAX_K`.
    #[error("k = {k} is outside 1..={max}: ask for at least one entry and at most {max}", max = super::MAX_K)]
    InvalidK {
        /// The `k` asked for.
        k: usize,
    },
    /// An entry of an anonymous session: anonymous sessions have no memory across sessions.
    #[error("session {session:?} is anonymous: only a user's sessions are remembered; nothing was stored")]
    Anonymous {
        /// The anonymous session.
        session: String,
    },
    /// Stored memory could not be read; it was left in place, and nothing was answered from it.
    #[error("memory of user {user:?} is corrupt ({detail}); it was left in place for inspection")]
    Corrupt {
        /// Whose memory.
        user: String,
        /// What is wrong, where.
        detail: String,
    },
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or folder.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The memory folder is in use by another open store (another process, or another
    /// `FileMemory` in this one): its indexes would not see each other's writes.
    #[error(
        "memory folder {} is in use by another process (or another open memory store); stop \
         it or choose another folder",
        path.display()
    )]
    Locked {
        /// The folder.
        path: std::path::PathBuf,
    },
    /// The backend could not be reached or did not answer in time; nothing was acknowledged.
    #[error("{backend} memory store is unavailable: {detail}")]
    Unavailable {
        /// Which backend.
        backend: &'static str,
        /// Why.
        detail: String,
    },
}
