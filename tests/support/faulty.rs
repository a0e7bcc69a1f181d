//! A store that fails or slows down on command, written against the public `Store` trait.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use turnstile::state::{Event, Seq};
use turnstile::store::{GcPolicy, GcReport, LoadedSession, Page, PageRequest};
use turnstile::{SessionKey, Store, StoreError};

/// Wraps a store and injects faults into it: the next N appends (or loads) fail with
/// `Unavailable` without reaching the inner store, and appends and loads can be delayed. Everything else
/// passes through.
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    failing_appends: AtomicUsize,
    failing_loads: AtomicUsize,
    append_delay: Mutex<Option<Duration>>,
    load_delay: Mutex<Option<Duration>>,
    appends_attempted: AtomicUsize,
    appends_failed: AtomicUsize,
}

impl FaultyStore {
    /// Wraps `inner`, injecting nothing until told to.
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            failing_appends: AtomicUsize::new(0),
            failing_loads: AtomicUsize::new(0),
            append_delay: Mutex::new(None),
            load_delay: Mutex::new(None),
            appends_attempted: AtomicUsize::new(0),
            appends_failed: AtomicUsize::new(0),
        })
    }

    /// Makes the next `n` appends fail with `StoreError::Unavailable`, writing nothing.
    pub fn fail_next_appends(&self, n: usize) {
        self.failing_appends.store(n, Ordering::SeqCst);
    }

    /// Makes the next `n` loads fail with `StoreError::Unavailable`.
    pub fn fail_next_loads(&self, n: usize) {
        self.failing_loads.store(n, Ordering::SeqCst);
    }

    /// Delays every append by `delay` before it runs (`None`: no delay).
    pub fn delay_appends(&self, delay: Option<Duration>) {
        *self.append_delay.lock() = delay;
    }

    /// Delays every load by `delay` before it runs (`None`: no delay).
    pub fn delay_loads(&self, delay: Option<Duration>) {
        *self.load_delay.lock() = delay;
    }

    /// Appends attempted so far, failed ones included.
    pub fn appends_attempted(&self) -> usize {
        self.appends_attempted.load(Ordering::SeqCst)
    }

    /// Appends this wrapper failed on purpose so far.
    pub fn appends_failed(&self) -> usize {
        self.appends_failed.load(Ordering::SeqCst)
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn take_one(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

fn injected(what: &str) -> StoreError {
    StoreError::Unavailable {
        backend: "faulty",
        detail: format!("injected {what} failure"),
    }
}

#[async_trait]
impl Store for FaultyStore {
    fn name(&self) -> &'static str {
        "faulty"
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        let delay = *self.load_delay.lock();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        if Self::take_one(&self.failing_loads) {
            return Err(injected("load"));
        }
        self.inner.load(key, window).await
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        self.appends_attempted.fetch_add(1, Ordering::SeqCst);
        let delay = *self.append_delay.lock();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        if Self::take_one(&self.failing_appends) {
            self.appends_failed.fetch_add(1, Ordering::SeqCst);
            return Err(injected("append"));
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
