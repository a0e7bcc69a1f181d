//! Store wrappers without boilerplate: implement [`ForwardingStore`] (name the inner store, and
//! override only the methods the wrapper changes) and the type is a [`Store`] that forwards every
//! other call unchanged. Fault injection, counting and metering wrappers are written this way.

use std::time::Duration;

use async_trait::async_trait;

use super::{
    Claim, Claimant, GcPolicy, GcReport, Lease, Leases, LoadedSession, Owner, Page, PageRequest,
    Store, StoreError,
};
use crate::key::SessionKey;
use crate::state::{Event, Seq};

/// A store that wraps another. Every method has a default that forwards to
/// [`ForwardingStore::forward_to`]; a wrapper overrides the ones it changes, and gets [`Store`]
/// (with the same contracts) through a blanket implementation.
///
/// Use the wrapper as a [`Store`] (an `Arc<dyn Store>`, or with only `Store` imported): with both
/// traits in scope, calling `load` on the concrete type is ambiguous.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// use async_trait::async_trait;
/// use turnstile::store::{ForwardingStore, LoadedSession};
/// use turnstile::{MemoryStore, SessionKey, Store, StoreError};
///
/// /// Counts loads; everything else goes straight through.
/// struct CountLoads {
///     inner: Arc<dyn Store>,
///     loads: AtomicU64,
/// }
///
/// #[async_trait]
/// impl ForwardingStore for CountLoads {
///     fn forward_to(&self) -> &dyn Store {
///         self.inner.as_ref()
///     }
///
///     async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
///         self.loads.fetch_add(1, Ordering::Relaxed);
///         self.forward_to().load(key, window).await
///     }
/// }
///
/// let store: Arc<dyn Store> = Arc::new(CountLoads {
///     inner: Arc::new(MemoryStore::new()),
///     loads: AtomicU64::new(0),
/// });
/// assert_eq!(store.name(), "memory");
/// ```
#[async_trait]
pub trait ForwardingStore: Send + Sync + 'static {
    /// The store calls are forwarded to.
    fn forward_to(&self) -> &dyn Store;

    /// See [`Store::name`]; the inner store's name unless overridden.
    fn name(&self) -> &'static str {
        self.forward_to().name()
    }

    /// See [`Store::load`].
    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        self.forward_to().load(key, window).await
    }

    /// See [`Store::append`].
    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        self.forward_to().append(key, base_version, events).await
    }

    /// See [`Store::read_events`].
    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.forward_to().read_events(key, from, limit).await
    }

    /// See [`Store::delete`].
    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        self.forward_to().delete(key).await
    }

    /// See [`Store::list`].
    async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page, StoreError> {
        self.forward_to().list(user_id, page).await
    }

    /// See [`Store::delete_user`].
    async fn delete_user(&self, user_id: &str) -> Result<u64, StoreError> {
        self.forward_to().delete_user(user_id).await
    }

    /// See [`Store::gc`].
    async fn gc(&self, policy: &GcPolicy, now_ms: u64) -> Result<GcReport, StoreError> {
        self.forward_to().gc(policy, now_ms).await
    }

    /// See [`Store::leases`]; the inner store's leases, except that they read nothing with a
    /// claim ([`Leases::acquire_and_load`]): activations then load through this wrapper.
    fn leases(&self) -> Option<std::sync::Arc<dyn Leases>> {
        let inner = self.forward_to().leases()?;
        Some(std::sync::Arc::new(ClaimsOnly(inner)))
    }

    /// See [`Store::append_fenced`].
    async fn append_fenced(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        lease: &Lease,
    ) -> Result<u64, StoreError> {
        self.forward_to()
            .append_fenced(key, base_version, events, lease)
            .await
    }

    /// See [`Store::confirm_replicated`].
    async fn confirm_replicated(&self, key: &SessionKey, version: u64) -> Result<(), StoreError> {
        self.forward_to().confirm_replicated(key, version).await
    }
}

#[async_trait]
impl<T: ForwardingStore> Store for T {
    fn name(&self) -> &'static str {
        ForwardingStore::name(self)
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        ForwardingStore::load(self, key, window).await
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        ForwardingStore::append(self, key, base_version, events).await
    }

    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        ForwardingStore::read_events(self, key, from, limit).await
    }

    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        ForwardingStore::delete(self, key).await
    }

    async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page, StoreError> {
        ForwardingStore::list(self, user_id, page).await
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, StoreError> {
        ForwardingStore::delete_user(self, user_id).await
    }

    async fn gc(&self, policy: &GcPolicy, now_ms: u64) -> Result<GcReport, StoreError> {
        ForwardingStore::gc(self, policy, now_ms).await
    }

    fn leases(&self) -> Option<std::sync::Arc<dyn Leases>> {
        ForwardingStore::leases(self)
    }

    async fn append_fenced(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        lease: &Lease,
    ) -> Result<u64, StoreError> {
        ForwardingStore::append_fenced(self, key, base_version, events, lease).await
    }

    async fn confirm_replicated(&self, key: &SessionKey, version: u64) -> Result<(), StoreError> {
        ForwardingStore::confirm_replicated(self, key, version).await
    }
}

/// Another store's leases, claiming without reading: a wrapper's activations then go through
/// its own [`Store::load`] rather than past it, inside the wrapped store's claim.
struct ClaimsOnly(std::sync::Arc<dyn Leases>);

#[async_trait]
impl Leases for ClaimsOnly {
    async fn acquire(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
    ) -> Result<Claim, StoreError> {
        self.0.acquire(key, me, ttl).await
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<bool>, StoreError> {
        self.0.renew(leases, ttl).await
    }

    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
        self.0.release(key, lease).await
    }

    async fn owner(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        self.0.owner(key).await
    }
}
