//! A fault-injecting store, written against the public [`Store`] trait through
//! [`ForwardingStore`]: crash and failure tests use it, and so does `turnstile load`'s planted
//! fault (`--fault-drop-one-append`), which checks that the verification pass notices a lost turn.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::{ForwardingStore, LoadedSession, Store, StoreError};
use crate::key::SessionKey;
use crate::state::Event;

/// Wraps a store and injects faults on command: the next N appends or loads fail with
/// [`StoreError::Unavailable`] without reaching the inner store; the next N appends are
/// acknowledged without being written (a broken store that loses data); appends and loads can be
/// delayed. Everything else passes through. Nothing is injected until asked.
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    failing_appends: AtomicUsize,
    failing_loads: AtomicUsize,
    dropping_appends: AtomicUsize,
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
            dropping_appends: AtomicUsize::new(0),
            append_delay: Mutex::new(None),
            load_delay: Mutex::new(None),
            appends_attempted: AtomicUsize::new(0),
            appends_failed: AtomicUsize::new(0),
        })
    }

    /// Makes the next `n` appends fail with [`StoreError::Unavailable`], writing nothing.
    pub fn fail_next_appends(&self, n: usize) {
        self.failing_appends.store(n, Ordering::SeqCst);
    }

    /// Makes the next `n` loads fail with [`StoreError::Unavailable`].
    pub fn fail_next_loads(&self, n: usize) {
        self.failing_loads.store(n, Ordering::SeqCst);
    }

    /// Makes the next `n` appends answer `Ok` with the version a real write would have produced,
    /// without writing anything: the data loss a verification must catch. The session's next
    /// write then conflicts, which is what a lost write looks like from outside.
    pub fn drop_next_appends(&self, n: usize) {
        self.dropping_appends.store(n, Ordering::SeqCst);
    }

    /// Delays every append by `delay` before it runs (`None`: no delay).
    pub fn delay_appends(&self, delay: Option<Duration>) {
        *self.append_delay.lock() = delay;
    }

    /// Delays every load by `delay` before it runs (`None`: no delay).
    pub fn delay_loads(&self, delay: Option<Duration>) {
        *self.load_delay.lock() = delay;
    }

    /// Appends attempted so far, failed and dropped ones included.
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
}

/// Takes one from a countdown; `false` when it is already at zero.
fn take_one(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

fn injected(what: &str) -> StoreError {
    StoreError::Unavailable {
        backend: "faulty",
        detail: format!("injected {what} failure"),
    }
}

#[async_trait]
impl ForwardingStore for FaultyStore {
    fn forward_to(&self) -> &dyn Store {
        self.inner.as_ref()
    }

    fn name(&self) -> &'static str {
        "faulty"
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        let delay = *self.load_delay.lock();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        if take_one(&self.failing_loads) {
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
        if take_one(&self.failing_appends) {
            self.appends_failed.fetch_add(1, Ordering::SeqCst);
            return Err(injected("append"));
        }
        if take_one(&self.dropping_appends) {
            tracing::warn!(%key, "fault injection: acknowledging an append without writing it");
            return Ok(base_version + 1);
        }
        self.inner.append(key, base_version, events).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::turn_events;
    use crate::store::MemoryStore;

    #[tokio::test]
    async fn each_fault_hits_only_the_calls_it_was_asked_for() {
        let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
        let store: &dyn Store = faulty.as_ref();
        let key = SessionKey::new("u", "s").unwrap();
        faulty.fail_next_appends(1);
        faulty.fail_next_loads(1);
        assert!(store
            .append(&key, 0, &turn_events(1, "a", None))
            .await
            .is_err());
        assert!(store.load(&key, 4).await.is_err());
        assert!(store.load(&key, 4).await.unwrap().record.is_none());
        assert_eq!(
            store
                .append(&key, 0, &turn_events(1, "a", None))
                .await
                .unwrap(),
            1
        );

        faulty.drop_next_appends(1);
        let dropped = store.append(&key, 1, &turn_events(3, "b", None)).await;
        assert_eq!(dropped.unwrap(), 2, "acknowledged as if written");
        let stored = faulty.inner().read_events(&key, 1, 10).await.unwrap();
        assert_eq!(stored.len(), 2, "but nothing was written");
        assert_eq!(
            (faulty.appends_attempted(), faulty.appends_failed()),
            (3, 1)
        );
        assert_eq!(store.name(), "faulty");
    }
}
