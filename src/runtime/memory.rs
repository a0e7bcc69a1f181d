//! The runtime's memory across sessions: explicit ingestion, search, and removal along with
//! the sessions and users it came from.

use std::sync::Arc;

use super::Runtime;
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::memory::{memory_key, MemoryHit, MemoryStore};
use crate::session::ingest_stored;
use crate::store::PageRequest;

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

    /// After a session was deleted: removes its memory too (where [`memory_key`] filed it).
    pub(super) async fn forget_session(&self, key: &SessionKey) -> Result<()> {
        if let Some(memory) = self.memory() {
            memory
                .delete_session(&memory_key(key))
                .await
                .map_err(Error::memory)?;
        }
        Ok(())
    }

    /// After a user was deleted: removes the user's memory too, and for a channel's namespace
    /// the memory of each of its chats (`chats`: the memory users they were filed under, listed
    /// before the sessions went).
    pub(super) async fn forget_user(&self, user_id: &str, chats: &[String]) -> Result<()> {
        if let Some(memory) = self.memory() {
            memory.delete_user(user_id).await.map_err(Error::memory)?;
            for chat in chats {
                memory.delete_user(chat).await.map_err(Error::memory)?;
            }
        }
        Ok(())
    }

    /// The memory users the chats of a channel's namespace `user_id` are filed under (none for
    /// a person, or without a memory store): read before the sessions are deleted.
    pub(super) async fn chat_memories(&self, user_id: &str) -> Result<Vec<String>> {
        if self.memory().is_none() || !user_id.starts_with(crate::key::CHANNEL_USER_PREFIX) {
            return Ok(Vec::new());
        }
        let mut chats = std::collections::BTreeSet::new();
        let mut page = PageRequest {
            limit: crate::store::MAX_PAGE,
            cursor: None,
        };
        loop {
            let listed = self.list(user_id, &page).await?;
            for session in &listed.sessions {
                chats.insert(memory_key(&session.key).user_id().to_owned());
            }
            match listed.next_cursor {
                Some(next) => page.cursor = Some(next),
                None => break,
            }
        }
        Ok(chats.into_iter().collect())
    }
}
