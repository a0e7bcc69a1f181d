//! Recall in a turn: searching the user's memory, and what the turn found, which goes into its
//! `<memory-context>` block.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::TurnContext;
use crate::memory::{check_search, memory_key, MemoryError, MemoryHit, MemoryStore};

/// Longest an automatic recall may hold a turn back: memory is background, and a slow store
/// should cost the turn its recalled context, not its answer.
const AUTO_RECALL_TIMEOUT: Duration = Duration::from_secs(2);

/// A turn's access to the user's memory.
pub(crate) struct Recall {
    store: Arc<dyn MemoryStore>,
    /// Entries to recall with the input before the turn runs, if any.
    auto: Option<usize>,
    /// Everything recalled in this turn so far, without repeats, in the order found.
    found: Mutex<Vec<MemoryHit>>,
    /// Whose memory is searched, when not the session's own (see [`memory_key`]).
    user: Option<String>,
}

impl std::fmt::Debug for Recall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recall")
            .field("store", &self.store.name())
            .field("auto", &self.auto)
            .field("found", &self.found.lock().len())
            .finish()
    }
}

impl Recall {
    pub(crate) fn new(store: Arc<dyn MemoryStore>, auto: Option<usize>) -> Self {
        Self {
            store,
            auto,
            found: Mutex::new(Vec::new()),
            user: None,
        }
    }

    /// The same, searching `user`'s memory when given.
    pub(crate) fn for_user(mut self, user: Option<String>) -> Self {
        self.user = user;
        self
    }
}

impl TurnContext {
    /// Searches the user's memory — every session of this user, this one included, and never
    /// another user's — for the `k` entries that best match `query`, best first. What is found
    /// is also added to this turn's `<memory-context>` block (see [`TurnContext::messages`]).
    ///
    /// The memory searched is the session's user's; for a channel chat, the chat's own (what
    /// was said in it), or the paired sender's when the call named one (see
    /// [`CallOptions::memory_user`](crate::CallOptions::memory_user)): never the whole channel's.
    ///
    /// An empty query or `k` outside `1..=`[`MAX_K`](crate::memory::MAX_K) is an error. Without
    /// a memory store, and in anonymous sessions (which have no memory), nothing is found.
    pub async fn recall(&self, query: &str, k: usize) -> Result<Vec<MemoryHit>, MemoryError> {
        check_search(query, k)?;
        let Some(recall) = &self.memory else {
            return Ok(Vec::new());
        };
        if self.key.is_anonymous() {
            return Ok(Vec::new());
        }
        let filed = memory_key(&self.key);
        let user = recall.user.as_deref().unwrap_or(filed.user_id());
        let hits = recall.store.search(user, query, k).await?;
        let mut found = recall.found.lock();
        for hit in &hits {
            let known = found
                .iter()
                .any(|f| f.entry.key == hit.entry.key && f.entry.seq == hit.entry.seq);
            if !known {
                found.push(hit.clone());
            }
        }
        Ok(hits)
    }

    /// Everything recalled in this turn so far (automatically, and by [`TurnContext::recall`]).
    pub fn recalled(&self) -> Vec<MemoryHit> {
        self.memory
            .as_ref()
            .map(|recall| recall.found.lock().clone())
            .unwrap_or_default()
    }

    /// Automatic recall before the agent runs, with the turn's input as the query. A failure
    /// (or an input with no word in it) leaves the turn without recalled entries; it never
    /// fails the turn.
    pub(crate) async fn auto_recall(&self) {
        let Some(k) = self.memory.as_ref().and_then(|recall| recall.auto) else {
            return;
        };
        let input = self.input();
        if crate::memory::tokenize(&input).next().is_none() {
            return;
        }
        match tokio::time::timeout(AUTO_RECALL_TIMEOUT, self.recall(&input, k)).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::warn!(key = %self.key, %error, "automatic recall failed"),
            Err(_) => tracing::warn!(key = %self.key, "automatic recall timed out"),
        }
    }
}
