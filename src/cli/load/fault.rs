//! A planted fault for testing the verification pass (`--fault-drop-one-append`, hidden): a store
//! that acknowledges its first append without writing it, the way a broken store might. Written
//! against the public `Store` trait, like any store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use turnstile::state::{Event, Seq};
use turnstile::store::{GcPolicy, GcReport, LoadedSession, Page, PageRequest};
use turnstile::{SessionKey, Store, StoreError};

/// Wraps a store; drops the first append and answers it as if it had been written.
pub struct DropOneAppend {
    inner: Arc<dyn Store>,
    dropped: AtomicBool,
}

impl DropOneAppend {
    /// The wrapped store, as the runtime takes it.
    pub fn wrap(inner: Arc<dyn Store>) -> Arc<dyn Store> {
        Arc::new(Self {
            inner,
            dropped: AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl Store for DropOneAppend {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        self.inner.load(key, window).await
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        if !self.dropped.swap(true, Ordering::SeqCst) {
            tracing::warn!(%key, "fault injection: acknowledging an append without writing it");
            // The version a real write would have produced; the session's next write then
            // conflicts, fails and reloads, which is what a lost write looks like from outside.
            return Ok(base_version + 1);
        }
        self.inner.append(key, base_version, events).await
    }

    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.inner.read_events(key, from, limit).await
    }

    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        self.inner.delete(key).await
    }

    async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page, StoreError> {
        self.inner.list(user_id, page).await
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, StoreError> {
        self.inner.delete_user(user_id).await
    }

    async fn gc(&self, policy: &GcPolicy, now_ms: u64) -> Result<GcReport, StoreError> {
        self.inner.gc(policy, now_ms).await
    }
}
