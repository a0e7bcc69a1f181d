//! Memory ingestion from a live session: when it stops (`Ingest::OnPassivation`) and when
//! compaction summarises its older events (`Ingest::OnCompaction`) — and the ingestion of a
//! stored session that `Runtime::remember` shares.

use std::sync::Arc;

use super::Live;
use crate::error::Error;
use crate::key::SessionKey;
use crate::memory::{entries_of, memory_key, Ingest, MemoryStore};
use crate::state::{Event, Seq};
use crate::store::Store;

impl Live {
    /// As a passivation or shutdown ends (every turn written): ingests what the store holds of the
    /// session since its memory mark. A failure is logged and leaves memory as it was; the
    /// next stop tries again from the same mark.
    pub(super) async fn ingest_on_stop(&self) {
        let Some(memory) = &self.deps.memory else {
            return;
        };
        if memory.options.ingest != Ingest::OnPassivation {
            return;
        }
        let store = self.deps.store.as_ref();
        match ingest_stored(store, memory.store.as_ref(), &self.key).await {
            Ok(added) => tracing::debug!(key = %self.key, added, "ingested into memory"),
            Err(error) => tracing::warn!(key = %self.key, %error, "memory ingestion failed"),
        }
    }

    /// The memory store compaction ingests into, if it should.
    pub(super) fn compaction_memory(&self) -> Option<Arc<dyn MemoryStore>> {
        let memory = self.deps.memory.as_ref()?;
        (memory.options.ingest == Ingest::OnCompaction).then(|| memory.store.clone())
    }
}

/// Ingests the events a compaction summarised (read back from the store, so acknowledged). A
/// failure is logged; the events stay in the store for an explicit `remember`.
pub(super) async fn ingest_compacted(memory: &dyn MemoryStore, key: &SessionKey, span: &[Event]) {
    if key.is_anonymous() {
        return;
    }
    let entries = entries_of(&memory_key(key), span);
    if entries.is_empty() {
        return;
    }
    if let Err(error) = memory.ingest(&entries).await {
        tracing::warn!(key = %key, %error, "memory ingestion at compaction failed");
    }
}

/// Events read per store call while ingesting: a page of a long log, not the whole of it.
const INGEST_PAGE: usize = 500;

/// Ingests what `store` holds of the session after its memory mark, page by page, filed under
/// [`memory_key`] (a channel chat under itself, not under its channel). Anonymous sessions have
/// no memory: nothing is read. Returns how many entries were new.
pub(crate) async fn ingest_stored(
    store: &dyn Store,
    memory: &dyn MemoryStore,
    key: &SessionKey,
) -> Result<usize, Error> {
    if key.is_anonymous() {
        return Ok(0);
    }
    let filed = memory_key(key);
    let mut from: Seq = memory
        .ingested_through(&filed)
        .await
        .map_err(Error::memory)?
        + 1;
    let mut added = 0;
    loop {
        let events = store
            .read_events(key, from, INGEST_PAGE)
            .await
            .map_err(|err| Error::store(key, err))?;
        let Some(last) = events.last().map(|e| e.seq) else {
            break;
        };
        let entries = entries_of(&filed, &events);
        if !entries.is_empty() {
            added += memory.ingest(&entries).await.map_err(Error::memory)?;
        }
        if events.len() < INGEST_PAGE {
            break;
        }
        from = last + 1;
    }
    Ok(added)
}
