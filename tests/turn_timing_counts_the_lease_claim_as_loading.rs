//! With several processes, a session is servable only once its lease is held: the first turn's
//! `load_ms` counts from the claim of the lease, whether the store reads the session with the
//! claim (Redis: then the actor reads nothing) or the actor reads it afterwards. Time is paused,
//! so the figures are exact.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use support::harness::{key, stored_events, within, LeasesView};
use turnstile::config::Ownership;
use turnstile::store::{Claim, Claimant, ForwardingLeases, Leases, LoadedSession};
use turnstile::{EchoAgent, InMemoryStore, Runtime, SessionKey, Store, StoreError};

/// How long each claim takes to be answered.
const CLAIM: Duration = Duration::from_millis(30);

/// The store's leases, answering each claim after [`CLAIM`]; with `read_with_claim`, the
/// session is read with the claim, as the Redis store does.
struct SlowClaims {
    inner: Arc<dyn Leases>,
    store: Arc<dyn Store>,
    read_with_claim: AtomicBool,
}

#[async_trait]
impl ForwardingLeases for SlowClaims {
    fn forward_to(&self) -> &dyn Leases {
        self.inner.as_ref()
    }

    async fn acquire_and_load(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
        window: usize,
    ) -> Result<(Claim, Option<LoadedSession>), StoreError> {
        tokio::time::sleep(CLAIM).await;
        let claim = self.inner.acquire(key, me, ttl).await?;
        if !self.read_with_claim.load(Ordering::SeqCst) || !matches!(claim, Claim::Granted(_)) {
            return Ok((claim, None));
        }
        let loaded = self.store.load(key, window).await?;
        Ok((claim, Some(loaded)))
    }
}

async fn first_turns_load_ms(read_with_claim: bool) -> Option<u32> {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let leases = Arc::new(SlowClaims {
        inner: store.leases().expect("memory leases"),
        store: store.clone(),
        read_with_claim: AtomicBool::new(read_with_claim),
    });
    let view: Arc<dyn Store> = Arc::new(LeasesView {
        inner: store.clone(),
        leases,
    });
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(view)
        .with_ownership(Ownership::new("http://a"))
        .build()
        .expect("runtime");
    let session = key("alice", "s1");
    within(rt.call(&session, "hello")).await.expect("a turn");
    let events = stored_events(store.as_ref(), &session).await;
    let last = events.last().expect("the turn's events");
    let timing = last.timing.as_ref().expect("the turn's timing record");
    assert!(
        timing.queued_ms >= timing.load_ms.unwrap_or(0),
        "loading is part of the wait: {timing:?}"
    );
    timing.load_ms
}

#[tokio::test(start_paused = true)]
async fn a_session_read_with_its_lease_counts_the_claim_as_loading() {
    assert_eq!(first_turns_load_ms(true).await, Some(30));
}

#[tokio::test(start_paused = true)]
async fn a_session_read_after_its_lease_counts_the_claim_too() {
    assert_eq!(first_turns_load_ms(false).await, Some(30));
}
