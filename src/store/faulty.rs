//! A fault-injecting store, written against the public [`Store`] trait through
//! [`ForwardingStore`]: crash and failure tests use it, and so does `turnstile load`'s planted
//! fault (`--fault-drop-one-append`), which checks that the verification pass notices a lost turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::{watch, Semaphore};

use super::{ForwardingStore, Lease, LoadedSession, Store, StoreError};
use crate::key::SessionKey;
use crate::state::{Event, Seq};

/// Wraps a store and injects faults on command: the next N appends, loads or event reads fail
/// with [`StoreError::Unavailable`] without reaching the inner store; the next N appends are
/// acknowledged without being written (a broken store that loses data), or written and then
/// answered `Unavailable` (an answer lost on its way back); appends and loads can be
/// delayed; the next N loads, appends, deletes or event reads can be held at a gate until the test lets them
/// through ([`FaultyStore::hold_next`]). Everything else passes through. Nothing is injected until
/// asked. It also counts loads per session ([`FaultyStore::loads_of`]).
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    /// Every n-th append attempt fails (0: none).
    failing_every: AtomicUsize,
    failing_appends: AtomicUsize,
    failing_loads: AtomicUsize,
    failing_reads: AtomicUsize,
    dropping_appends: AtomicUsize,
    /// Appends to write through whose answer is then lost (an outcome the caller cannot know).
    losing_answers: AtomicUsize,
    append_delay: Mutex<Option<Duration>>,
    load_delay: Mutex<Option<Duration>>,
    appends_attempted: AtomicUsize,
    appends_failed: AtomicUsize,
    /// Loads asked for, per session: what ordering tests look at ("no load before …").
    loads: Mutex<HashMap<SessionKey, usize>>,
    /// One gate per kind of call that can be held, indexed by [`StoreCall`].
    gates: [Gate; 4],
}

/// A kind of store call that [`FaultyStore::hold_next`] can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreCall {
    /// [`Store::load`].
    Load,
    /// [`Store::append`].
    Append,
    /// [`Store::delete`].
    Delete,
    /// [`Store::read_events`].
    ReadEvents,
}

/// Holds calls of one kind until they are released.
struct Gate {
    /// Calls still to be held (a countdown, like the other faults).
    to_hold: AtomicUsize,
    /// One permit lets one held call through; released permits wait for calls not there yet.
    permits: Semaphore,
    /// Calls waiting at the gate now; watched by [`FaultyStore::until_held`].
    waiting: watch::Sender<usize>,
}

impl Gate {
    fn new() -> Self {
        Self {
            to_hold: AtomicUsize::new(0),
            permits: Semaphore::new(0),
            waiting: watch::Sender::new(0),
        }
    }

    /// Waits for a permit if this call is one of those to hold.
    async fn pass(&self) {
        if !take_one(&self.to_hold) {
            return;
        }
        // Counted while waiting, also if the caller gives up (its future is dropped).
        struct Waiting<'a>(&'a watch::Sender<usize>);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.send_modify(|n| *n -= 1);
            }
        }
        self.waiting.send_modify(|n| *n += 1);
        let _waiting = Waiting(&self.waiting);
        self.permits
            .acquire()
            .await
            .expect("the gate's semaphore is never closed")
            .forget();
    }
}

impl FaultyStore {
    /// Wraps `inner`, injecting nothing until told to.
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            failing_appends: AtomicUsize::new(0),
            failing_every: AtomicUsize::new(0),
            failing_loads: AtomicUsize::new(0),
            failing_reads: AtomicUsize::new(0),
            dropping_appends: AtomicUsize::new(0),
            losing_answers: AtomicUsize::new(0),
            append_delay: Mutex::new(None),
            load_delay: Mutex::new(None),
            appends_attempted: AtomicUsize::new(0),
            appends_failed: AtomicUsize::new(0),
            loads: Mutex::new(HashMap::new()),
            gates: [Gate::new(), Gate::new(), Gate::new(), Gate::new()],
        })
    }

    fn gate(&self, kind: StoreCall) -> &Gate {
        &self.gates[kind as usize]
    }

    /// Holds the next `n` calls of `kind` at a gate, each until [`FaultyStore::release`] lets it
    /// through. Only calls that would reach the inner store are held: a call failed or dropped
    /// by another fault is not, and a delay comes before the gate.
    pub fn hold_next(&self, kind: StoreCall, n: usize) {
        self.gate(kind).to_hold.store(n, Ordering::SeqCst);
    }

    /// Lets one held call of `kind` through — or, when none waits, the next one to be held.
    pub fn release(&self, kind: StoreCall) {
        self.gate(kind).permits.add_permits(1);
    }

    /// Calls of `kind` waiting at the gate now.
    pub fn held(&self, kind: StoreCall) -> usize {
        *self.gate(kind).waiting.borrow()
    }

    /// Waits until at least `n` calls of `kind` wait at the gate.
    pub async fn until_held(&self, kind: StoreCall, n: usize) {
        let mut waiting = self.gate(kind).waiting.subscribe();
        // The sender lives as long as `self`, so the wait cannot fail.
        let _ = waiting.wait_for(|held| *held >= n).await;
    }

    /// Loads of `key` asked for so far (failed and held ones included).
    pub fn loads_of(&self, key: &SessionKey) -> usize {
        self.loads.lock().get(key).copied().unwrap_or(0)
    }

    /// Makes the next `n` appends fail with [`StoreError::Unavailable`], writing nothing.
    pub fn fail_next_appends(&self, n: usize) {
        self.failing_appends.store(n, Ordering::SeqCst);
    }

    /// Makes every `n`-th append attempt fail with [`StoreError::Unavailable`], writing nothing,
    /// from now on (0 stops it): a steady trickle of store failures for soak runs.
    pub fn fail_every_nth_append(&self, n: usize) {
        self.failing_every.store(n, Ordering::SeqCst);
    }

    /// Makes the next `n` loads fail with [`StoreError::Unavailable`].
    pub fn fail_next_loads(&self, n: usize) {
        self.failing_loads.store(n, Ordering::SeqCst);
    }

    /// The next `n` [`Store::read_events`] calls fail with [`StoreError::Unavailable`].
    pub fn fail_next_reads(&self, n: usize) {
        self.failing_reads.store(n, Ordering::SeqCst);
    }

    /// The next `n` appends reach the inner store, which commits them, and then answer
    /// [`StoreError::Unavailable`] as a timeout or a lost connection would: the caller cannot
    /// tell whether they committed.
    pub fn lose_next_answers(&self, n: usize) {
        self.losing_answers.store(n, Ordering::SeqCst);
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

impl FaultyStore {
    /// The faults an append (fenced or not) meets before it reaches the inner store: a delay,
    /// an injected failure, a dropped write, a gate. `None` means "go on to the inner store".
    async fn append_fault(
        &self,
        key: &SessionKey,
        base_version: u64,
    ) -> Option<Result<u64, StoreError>> {
        let attempt = self.appends_attempted.fetch_add(1, Ordering::SeqCst) + 1;
        let every = self.failing_every.load(Ordering::SeqCst);
        if every > 0 && attempt.is_multiple_of(every) {
            self.appends_failed.fetch_add(1, Ordering::SeqCst);
            return Some(Err(injected("append")));
        }
        let delay = *self.append_delay.lock();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        if take_one(&self.failing_appends) {
            self.appends_failed.fetch_add(1, Ordering::SeqCst);
            return Some(Err(injected("append")));
        }
        if take_one(&self.dropping_appends) {
            tracing::warn!(%key, "fault injection: acknowledging an append without writing it");
            return Some(Ok(base_version + 1));
        }
        self.gate(StoreCall::Append).pass().await;
        None
    }
}

impl FaultyStore {
    /// An answer the store gave, lost on its way back when [`FaultyStore::lose_next_answers`]
    /// asked for it.
    fn lose_answer(&self, written: Result<u64, StoreError>) -> Result<u64, StoreError> {
        if written.is_ok() && take_one(&self.losing_answers) {
            self.appends_failed.fetch_add(1, Ordering::SeqCst);
            return Err(injected("answer (the append committed)"));
        }
        written
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
        *self.loads.lock().entry(key.clone()).or_default() += 1;
        let delay = *self.load_delay.lock();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        if take_one(&self.failing_loads) {
            return Err(injected("load"));
        }
        self.gate(StoreCall::Load).pass().await;
        self.inner.load(key, window).await
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        if let Some(faulted) = self.append_fault(key, base_version).await {
            return faulted;
        }
        let written = self.inner.append(key, base_version, events).await;
        self.lose_answer(written)
    }

    async fn append_fenced(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        lease: &Lease,
    ) -> Result<u64, StoreError> {
        if let Some(faulted) = self.append_fault(key, base_version).await {
            return faulted;
        }
        let written = self
            .inner
            .append_fenced(key, base_version, events, lease)
            .await;
        self.lose_answer(written)
    }

    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        if take_one(&self.failing_reads) {
            return Err(injected("read"));
        }
        self.gate(StoreCall::ReadEvents).pass().await;
        self.inner.read_events(key, from, limit).await
    }

    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        self.gate(StoreCall::Delete).pass().await;
        self.inner.delete(key).await
    }
}

impl std::fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore")
            .field(
                "appends_attempted",
                &self.appends_attempted.load(Ordering::SeqCst),
            )
            .field(
                "appends_failed",
                &self.appends_failed.load(Ordering::SeqCst),
            )
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::turn_events;
    use crate::store::InMemoryStore;

    #[tokio::test]
    async fn each_fault_hits_only_the_calls_it_was_asked_for() {
        let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
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

    #[tokio::test]
    async fn a_held_call_waits_for_its_release_and_loads_are_counted_per_key() {
        let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
        let (a, b) = (
            SessionKey::new("u", "a").unwrap(),
            SessionKey::new("u", "b").unwrap(),
        );
        faulty.fail_next_appends(1);
        faulty.hold_next(StoreCall::Append, 1);
        let store: Arc<dyn Store> = faulty.clone();
        let failed = store.append(&a, 0, &turn_events(1, "x", None)).await;
        assert!(failed.is_err(), "a failed call is not held");
        let held = tokio::spawn({
            let (store, a) = (store.clone(), a.clone());
            async move { store.append(&a, 0, &turn_events(1, "x", None)).await }
        });
        faulty.until_held(StoreCall::Append, 1).await;
        assert_eq!(faulty.held(StoreCall::Append), 1);
        assert!(
            faulty.inner().load(&a, 4).await.unwrap().record.is_none(),
            "not written yet"
        );
        assert_eq!(
            store
                .append(&b, 0, &turn_events(1, "y", None))
                .await
                .unwrap(),
            1,
            "only the next call is held"
        );
        faulty.release(StoreCall::Append);
        assert_eq!(held.await.unwrap().unwrap(), 1);
        assert_eq!(faulty.held(StoreCall::Append), 0);

        // A release ahead of the call lets it through at once.
        faulty.hold_next(StoreCall::Delete, 1);
        faulty.release(StoreCall::Delete);
        assert!(store.delete(&b).await.unwrap());

        store.load(&a, 1).await.unwrap();
        store.load(&a, 1).await.unwrap();
        assert_eq!((faulty.loads_of(&a), faulty.loads_of(&b)), (2, 0));
    }
}
