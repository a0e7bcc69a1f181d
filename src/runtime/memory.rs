//! The runtime's memory across sessions: explicit ingestion, search, and removal along with
//! the sessions and users it came from.

use std::sync::Arc;

use super::Runtime;
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::memory::{MemoryHit, MemoryStore};
use crate::session::ingest_stored;

impl Runtime {
    /// The memory store, when the runtime has one
    /// ([`RuntimeBuilder::with_memory`](crate::RuntimeBuilder::with_memory)).
    pub fn memory(&self) -> Option<&Arc<dyn MemoryStore>> {
        self.registry().deps.memory.as_ref().map(|m| &m.store)
    }

    /// Ingests what the store holds of the session (its acknowledged turns) into memory, from
    /// where its last ingestion stopped. Idempotent: entries already in memory are not added
    /// again. Returns how many entries were new; an anonymous session has no memory (0).
    /// Without a memory store this is [`Error::InvalidRequest`].
    pub async fn remember(&self, key: &SessionKey) -> Result<usize> {
        let memory = self.memory_or_refuse()?;
        ingest_stored(self.store().as_ref(), memory.as_ref(), key).await
    }

    /// Searches a user's memory, as [`TurnContext::recall`](crate::TurnContext::recall) does
    /// from inside a turn. Without a memory store this is [`Error::InvalidRequest`].
    pub async fn search_memory(
        &self,
        user_id: &str,
        query: &str,
        k: usize,
    ) -> Result<Vec<MemoryHit>> {
        let memory = self.memory_or_refuse()?;
        memory
            .search(user_id, query, k)
            .await
            .map_err(Error::memory)
    }

    fn memory_or_refuse(&self) -> Result<&Arc<dyn MemoryStore>> {
        self.memory().ok_or_else(|| {
            Error::InvalidRequest("this runtime has no memory store (see with_memory)".into())
        })
    }

    /// After a session was deleted: removes its memory too.
    pub(super) async fn forget_session(&self, key: &SessionKey) -> Result<()> {
        if let Some(memory) = self.memory() {
            memory.delete_session(key).await.map_err(Error::memory)?;
        }
        Ok(())
    }

    /// After a user was deleted: removes the user's memory too.
    pub(super) async fn forget_user(&self, user_id: &str) -> Result<()> {
        if let Some(memory) = self.memory() {
            memory.delete_user(user_id).await.map_err(Error::memory)?;
        }
        Ok(())
    }
}
