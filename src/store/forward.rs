//! Store wrappers without boilerplate: implement [`ForwardingStore`] (name the inner store, and
//! override only the methods the wrapper changes) and the type is a [`Store`] that forwards every
//! other call unchanged. Fault injection, counting and metering wrappers are written this way;
//! [`ForwardingLeases`] does the same for [`Leases`].

use std::time::Duration;

use async_trait::async_trait;

use super::{
    Claim, Claimant, GcPolicy, GcReport, Lease, Leases, LoadedSession, Owner, Page, PageRequest,
    Renewal, Store, StoreError,
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
/// use turnstile::{InMemoryStore, SessionKey, Store, StoreError};
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
///     inner: Arc::new(InMemoryStore::new()),
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

    /// See [`Store::ping`].
    async fn ping(&self) -> Result<(), StoreError> {
        self.forward_to().ping().await
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

    async fn ping(&self) -> Result<(), StoreError> {
        ForwardingStore::ping(self).await
    }
}

/// Leases that wrap another's, as [`ForwardingStore`] wraps a store: every method forwards to
/// [`ForwardingLeases::forward_to`] unless overridden, and the type is [`Leases`] through a
/// blanket implementation. An activation's claim ([`ForwardingLeases::acquire_and_load`]) goes
/// through this trait's [`ForwardingLeases::acquire`] (overridden or not) and reads nothing
/// unless the wrapper says otherwise, so that an override of `acquire` sees every claim; the
/// activation then loads the session with a command of its own (on Redis, one more per
/// activation than the store's one-script claim).
///
/// Use the wrapper as [`Leases`] (an `Arc<dyn Leases>`, or with only `Leases` imported): with
/// both traits in scope, calling `acquire` on the concrete type is ambiguous.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use async_trait::async_trait;
/// use turnstile::store::{Claim, Claimant, ForwardingLeases, Lease, Leases};
/// use turnstile::{InMemoryStore, SessionKey, Store, StoreError};
///
/// /// Counts releases; everything else goes straight through.
/// struct CountReleases {
///     inner: Arc<dyn Leases>,
///     releases: AtomicU64,
/// }
///
/// #[async_trait]
/// impl ForwardingLeases for CountReleases {
///     fn forward_to(&self) -> &dyn Leases {
///         self.inner.as_ref()
///     }
///
///     async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
///         self.releases.fetch_add(1, Ordering::Relaxed);
///         self.forward_to().release(key, lease).await
///     }
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = InMemoryStore::new();
/// let counted = Arc::new(CountReleases {
///     inner: store.leases().expect("the memory store keeps leases"),
///     releases: AtomicU64::new(0),
/// });
/// let leases: Arc<dyn Leases> = counted.clone();
/// let key = SessionKey::new("alice", "s1").unwrap();
/// let me = Claimant::new("http://127.0.0.1:8080");
/// let Claim::Granted(lease) = leases.acquire(&key, &me, Duration::from_secs(5)).await? else {
///     unreachable!("nobody else holds it")
/// };
/// assert!(leases.release(&key, &lease).await?);
/// assert_eq!(counted.releases.load(Ordering::Relaxed), 1);
/// # Ok::<(), StoreError>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait ForwardingLeases: Send + Sync + 'static {
    /// The leases calls are forwarded to.
    fn forward_to(&self) -> &dyn Leases;

    /// See [`Leases::acquire`].
    async fn acquire(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
    ) -> Result<Claim, StoreError> {
        self.forward_to().acquire(key, me, ttl).await
    }

    /// See [`Leases::acquire_and_load`]. Claims through [`ForwardingLeases::acquire`] and reads
    /// nothing; a wrapper that keeps the inner leases' claim-and-read overrides this to call
    /// `self.forward_to().acquire_and_load(…)`.
    async fn acquire_and_load(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
        window: usize,
    ) -> Result<(Claim, Option<LoadedSession>), StoreError> {
        let _ = window;
        Ok((ForwardingLeases::acquire(self, key, me, ttl).await?, None))
    }

    /// See [`Leases::renew`].
    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        self.forward_to().renew(leases, ttl).await
    }

    /// See [`Leases::release`].
    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
        self.forward_to().release(key, lease).await
    }

    /// See [`Leases::owner`].
    async fn owner(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        self.forward_to().owner(key).await
    }
}

#[async_trait]
impl<T: ForwardingLeases> Leases for T {
    async fn acquire(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
    ) -> Result<Claim, StoreError> {
        ForwardingLeases::acquire(self, key, me, ttl).await
    }

    async fn acquire_and_load(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
        window: usize,
    ) -> Result<(Claim, Option<LoadedSession>), StoreError> {
        ForwardingLeases::acquire_and_load(self, key, me, ttl, window).await
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        ForwardingLeases::renew(self, leases, ttl).await
    }

    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
        ForwardingLeases::release(self, key, lease).await
    }

    async fn owner(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        ForwardingLeases::owner(self, key).await
    }
}

/// Another store's leases, claiming without reading: a wrapper's activations then go through
/// its own [`Store::load`] rather than past it, inside the wrapped store's claim.
struct ClaimsOnly(std::sync::Arc<dyn Leases>);

impl ForwardingLeases for ClaimsOnly {
    fn forward_to(&self) -> &dyn Leases {
        self.0.as_ref()
    }
}
