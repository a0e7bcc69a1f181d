//! Memory ingestion from a live session: when it stops (`Ingest::OnPassivation`) and when
//! compaction summarises its older events (`Ingest::OnCompaction`).

use std::sync::Arc;

use super::Live;
use crate::key::SessionKey;
use crate::memory::{entries_of, ingest_stored, Ingest, MemoryStore};
use crate::state::Event;

impl Live {
    /// After the final flush of a passivation or shutdown: ingests what the store holds of the
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
    let entries = entries_of(key, span);
    if entries.is_empty() {
        return;
    }
    if let Err(error) = memory.ingest(&entries).await {
        tracing::warn!(key = %key, %error, "memory ingestion at compaction failed");
    }
}
