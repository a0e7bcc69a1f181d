//! [`InMemory`]: memory entries in the process, lost on exit. For tests and demos.

use std::collections::HashMap;

use async_trait::async_trait;
use parking_lot::RwLock;

use super::{check_search, prepare, MemoryEntry, MemoryError, MemoryHit, MemoryStore, UserIndex};
use crate::key::SessionKey;
use crate::state::Seq;

/// Keeps every user's entries in an in-process index. Searches of different users, and of one
/// user, run side by side; an ingestion holds its user's index alone for the time it takes.
#[derive(Debug, Default)]
pub struct InMemory {
    users: RwLock<HashMap<String, UserIndex>>,
}

impl InMemory {
    /// An empty memory.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Adds `entries` (already prepared) to the indexes in `users`, enforcing the per-user bound.
/// Returns how many were new.
pub(super) fn add_all(users: &mut HashMap<String, UserIndex>, entries: Vec<MemoryEntry>) -> usize {
    let mut added = 0;
    let mut grown = Vec::new();
    for entry in entries {
        let user = entry.key.user_id().to_owned();
        let index = users.entry(user.clone()).or_default();
        if index.insert(entry) {
            added += 1;
            grown.push(user);
        }
    }
    grown.sort_unstable();
    grown.dedup();
    for user in grown {
        if let Some(index) = users.get_mut(&user) {
            index.forget_oldest();
        }
    }
    added
}

#[async_trait]
impl MemoryStore for InMemory {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn ingest(&self, entries: &[MemoryEntry]) -> Result<usize, MemoryError> {
        let entries = prepare(entries)?;
        Ok(add_all(&mut self.users.write(), entries))
    }

    async fn ingested_through(&self, key: &SessionKey) -> Result<Seq, MemoryError> {
        Ok(self
            .users
            .read()
            .get(key.user_id())
            .map_or(0, |index| index.mark(key)))
    }

    async fn search(
        &self,
        user_id: &str,
        query: &str,
        k: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let terms = check_search(query, k)?;
        Ok(self
            .users
            .read()
            .get(user_id)
            .map(|index| index.search(&terms, k))
            .unwrap_or_default())
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<u64, MemoryError> {
        let mut users = self.users.write();
        let Some(index) = users.get_mut(key.user_id()) else {
            return Ok(0);
        };
        let removed = index.remove_session(key);
        if index.is_empty() && index.marks().next().is_none() {
            users.remove(key.user_id());
        }
        Ok(removed)
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, MemoryError> {
        Ok(self
            .users
            .write()
            .remove(user_id)
            .map_or(0, |index| index.len() as u64))
    }
}
