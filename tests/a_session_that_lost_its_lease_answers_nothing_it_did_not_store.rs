//! Contract 13 across processes: a session whose write is refused because this process no
//! longer holds its lease answers nothing from what it could not store. Its caller hears
//! `not_owner`; a retry with the same request id, reaching the same process before the session
//! has stopped, hears `not_owner` too — never an acknowledgement of a turn the store does not
//! hold — and the session's view never shows that turn.
//!
//! The renewer is held inside a renewal (its store call does not answer), so it cannot stop the
//! session for a while: the window in which a retry reaches the session that lost its lease is
//! held open on purpose. Time is paused; the lease lapses locally (four fifths of its TTL without
//! a renewal), which is one of the ways a lease is lost.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use support::harness::{key, stored_inputs, LeasesView};
use tokio::sync::Semaphore;
use turnstile::config::Ownership;
use turnstile::store::{ForwardingLeases, Lease, Leases, Renewal};
use turnstile::{CallOptions, EchoAgent, InMemoryStore, Runtime, SessionKey, Store, StoreError};

const LEASE_TTL: Duration = Duration::from_secs(3);

/// Leases whose renewals wait at a gate that never opens.
struct StuckRenewals {
    inner: Arc<dyn Leases>,
    gate: Semaphore,
    entered: AtomicUsize,
}

#[async_trait]
impl ForwardingLeases for StuckRenewals {
    fn forward_to(&self) -> &dyn Leases {
        self.inner.as_ref()
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let _permit = self.gate.acquire().await;
        self.inner.renew(leases, ttl).await
    }
}

async fn call(rt: &Runtime, k: &SessionKey, input: &str, id: &str) -> Result<u64, String> {
    let options = CallOptions::default().with_request_id(id);
    rt.call_with(k, input, options)
        .await
        .map(|outcome| outcome.seq)
        .map_err(|error| error.code().to_owned())
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_the_lease_was_lost_is_refused_not_answered_from_the_window() {
    let shared: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let leases = Arc::new(StuckRenewals {
        inner: shared.leases().expect("memory leases"),
        gate: Semaphore::new(0),
        entered: AtomicUsize::new(0),
    });
    let view: Arc<dyn Store> = Arc::new(LeasesView {
        inner: shared.clone(),
        leases: leases.clone(),
    });
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(view)
        .with_ownership(Ownership::new("http://a").with_lease_ttl(LEASE_TTL))
        .build()
        .expect("runtime");
    let k = key("alice", "lapsed");

    assert_eq!(call(&rt, &k, "one", "r1").await, Ok(2));
    // The renewer's next renewal never answers; past four fifths of the TTL the lease has
    // lapsed here, and this process may not write the session any more.
    tokio::time::sleep(LEASE_TTL / 2).await;
    assert_eq!(
        leases.entered.load(Ordering::SeqCst),
        1,
        "the renewer is held"
    );
    tokio::time::sleep(LEASE_TTL / 2).await;

    assert_eq!(call(&rt, &k, "two", "r2").await, Err("not_owner".into()));
    // The retry reaches the same session: the renewer, held, has not stopped it yet.
    assert!(rt.is_live(&k), "the session has not stopped yet");
    let retried = call(&rt, &k, "two", "r2").await;
    assert_eq!(
        retried,
        Err("not_owner".into()),
        "a turn the store does not hold is never acknowledged"
    );
    if let Some(view) = rt.state(&k).await.expect("a view") {
        let shown: Vec<u64> = view.events.iter().map(|e| e.seq).collect();
        assert_eq!(shown, [1, 2], "the refused turn is not shown");
    }
    let inputs: Vec<String> = stored_inputs(shared.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(inputs, ["one"]);
}
