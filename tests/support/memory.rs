//! Agents and wrappers for the memory tests.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use turnstile::memory::{MemoryEntry, MemoryStore};
use turnstile::state::Seq;
use turnstile::{Agent, AgentError, MemoryError, MemoryHit, SessionKey, TurnContext};

/// What one turn saw of memory.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// `TurnContext::memory_context()` as the turn started (auto-recall included).
    pub block: Option<String>,
    /// What `TurnContext::recall` answered, when the input asked for it.
    pub recalled: Vec<MemoryHit>,
    /// The first chat message, as an LLM would get it.
    pub first_message: Option<String>,
}

/// An agent that replies `ok: <input>` and records, per session, what each turn saw of memory.
/// An input of the form `recall: QUERY` also calls `recall(QUERY, 5)`.
#[derive(Default)]
pub struct MemoryAgent {
    pub seen: Mutex<HashMap<SessionKey, Vec<Seen>>>,
}

impl MemoryAgent {
    /// What the latest turn of `key` saw.
    pub fn last(&self, key: &SessionKey) -> Seen {
        self.seen
            .lock()
            .get(key)
            .and_then(|turns| turns.last().cloned())
            .expect("the session ran a turn")
    }
}

#[async_trait]
impl Agent for MemoryAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let mut seen = Seen {
            block: turn.memory_context(),
            first_message: turn.messages().first().map(|m| m.content.clone()),
            ..Seen::default()
        };
        if let Some(query) = turn.input().strip_prefix("recall: ") {
            seen.recalled = turn.recall(query, 5).await?;
        }
        self.seen
            .lock()
            .entry(turn.key().clone())
            .or_default()
            .push(seen);
        Ok(format!("ok: {}", turn.input()))
    }
}

/// A memory store wrapper that records every ingestion call.
pub struct CountingMemory {
    pub inner: Arc<dyn MemoryStore>,
    /// Entries handed to `ingest`, per call.
    pub calls: Mutex<Vec<Vec<(SessionKey, Seq)>>>,
    /// Sum of what `ingest` reported as new.
    pub added: AtomicUsize,
}

impl CountingMemory {
    pub fn new(inner: Arc<dyn MemoryStore>) -> Self {
        Self {
            inner,
            calls: Mutex::new(Vec::new()),
            added: AtomicUsize::new(0),
        }
    }

    pub fn added(&self) -> usize {
        self.added.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl MemoryStore for CountingMemory {
    fn name(&self) -> &'static str {
        "counting"
    }

    async fn ingest(&self, entries: &[MemoryEntry]) -> Result<usize, MemoryError> {
        self.calls
            .lock()
            .push(entries.iter().map(|e| (e.key.clone(), e.seq)).collect());
        let added = self.inner.ingest(entries).await?;
        self.added.fetch_add(added, Ordering::SeqCst);
        Ok(added)
    }

    async fn ingested_through(&self, key: &SessionKey) -> Result<Seq, MemoryError> {
        self.inner.ingested_through(key).await
    }

    async fn search(
        &self,
        user_id: &str,
        query: &str,
        k: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        self.inner.search(user_id, query, k).await
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<u64, MemoryError> {
        self.inner.delete_session(key).await
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, MemoryError> {
        self.inner.delete_user(user_id).await
    }
}
