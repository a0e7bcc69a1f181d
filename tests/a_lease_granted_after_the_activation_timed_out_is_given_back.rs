//! A claim that outlives the activation timeout may still be granted (a script already sent to
//! Redis runs). Such a grant belongs to no session: the runtime gives it back as soon as the
//! answer arrives, rather than leaving the session unavailable to every process until the lease
//! expires. Breaking it: dropping the timed-out claim leaves the late grant in place, and another
//! runtime is told "owned elsewhere" for the lease's whole TTL; and sending a new claim while the
//! late one is still on its way lets the late one replace the new grant, which giving it back then
//! leaves the session without a lease.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use support::harness::{eventually_ok, key, within, LeasesView};
use tokio::sync::Semaphore;
use turnstile::config::Ownership;
use turnstile::store::{Claim, Claimant, ForwardingLeases, Lease, Leases};
use turnstile::{
    EchoAgent, Error, InMemoryStore, Placement, Runtime, SessionKey, Store, StoreError,
};

/// Far longer than the test: a lease gone before this was given back, not expired.
const LEASE_TTL: Duration = Duration::from_secs(600);
/// Long enough for a claim answered at once on a busy machine; a held claim waits past any.
const ACTIVATION_TIMEOUT: Duration = Duration::from_secs(2);

/// Leases whose claims are answered only when the test lets them: with `hold`, the store grants
/// at once and the answer is held back (a slow reply); with `hold_before`, the claim itself is
/// held back before it reaches the store (a slow request).
struct LateAnswers {
    inner: Arc<dyn Leases>,
    hold: AtomicBool,
    hold_before: AtomicBool,
    answers: Semaphore,
    /// Releases that reached the store, whatever they found.
    releases: AtomicUsize,
}

#[async_trait]
impl ForwardingLeases for LateAnswers {
    fn forward_to(&self) -> &dyn Leases {
        self.inner.as_ref()
    }

    async fn acquire(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
    ) -> Result<Claim, StoreError> {
        if self.hold_before.load(Ordering::SeqCst) {
            self.answers.acquire().await.expect("open").forget();
        }
        let claim = self.inner.acquire(key, me, ttl).await;
        if self.hold.load(Ordering::SeqCst) {
            self.answers.acquire().await.expect("open").forget();
        }
        claim
    }

    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
        let released = self.inner.release(key, lease).await;
        self.releases.fetch_add(1, Ordering::SeqCst);
        released
    }
}

struct Setup {
    store: Arc<dyn Store>,
    late: Arc<LateAnswers>,
    a: Runtime,
    b: Runtime,
}

/// Runtime `a` sees the store's leases through [`LateAnswers`] and times activations out early;
/// runtime `b` sees the store as it is.
fn setup(hold_before: bool) -> Setup {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let late = Arc::new(LateAnswers {
        inner: store.leases().expect("memory leases"),
        hold: AtomicBool::new(!hold_before),
        hold_before: AtomicBool::new(hold_before),
        answers: Semaphore::new(0),
        releases: AtomicUsize::new(0),
    });
    let view: Arc<dyn Store> = Arc::new(LeasesView {
        inner: store.clone(),
        leases: late.clone(),
    });
    let runtime = |store: Arc<dyn Store>, address: &str| {
        Runtime::builder()
            .agent(EchoAgent)
            .store_arc(store)
            .with_activation_timeout(ACTIVATION_TIMEOUT)
            .with_ownership(Ownership::new(address).with_lease_ttl(LEASE_TTL))
            .build()
            .expect("runtime")
    };
    Setup {
        a: runtime(view, "http://a"),
        b: runtime(store.clone(), "http://b"),
        store,
        late,
    }
}

/// The session `a` timed out on is served by `b` once `a`'s late grant has arrived, long before
/// the lease would have expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_grant_is_released_and_another_runtime_takes_the_session() {
    let Setup { store, late, a, b } = setup(false);
    let k = key("alice", "late");

    match within(a.call(&k, "times out")).await {
        Err(error) => assert_eq!(error.code(), "activation", "{error}"),
        Ok(outcome) => panic!("activation should have timed out: {outcome:?}"),
    }
    assert_eq!(a.leases_held(), 0, "a timed-out claim is not held");
    let leases = store.leases().expect("leases");
    let owner = leases.owner(&k).await.expect("owner");
    assert_eq!(
        owner.map(|o| o.address).as_deref(),
        Some("http://a"),
        "the store granted the claim whose answer is still on its way"
    );

    late.answers.add_permits(1);
    let outcome = eventually_ok(
        "b to take the session",
        Duration::from_millis(20),
        || async {
            match b.call(&k, "served by b").await {
                Err(refused @ Error::OwnedElsewhere { .. }) => Err(refused),
                other => Ok(other),
            }
        },
    )
    .await
    .expect("b serves the session");
    assert_eq!(outcome.seq, 2, "nothing ran on a");
    assert_eq!(b.placement(&k).await.expect("placement"), Placement::Here);
}

/// A claim held back on its way to the store: the next activation of the session waits for it
/// (and times out while it is still held) instead of racing it; once it is answered and given
/// back, the next activation takes the lease and keeps it. Giving the late grant back never
/// takes the lease from that activation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_claim_waits_for_a_late_one_instead_of_racing_it() {
    let Setup { store, late, a, b } = setup(true);
    let k = key("alice", "raced");

    let timed_out = within(a.call(&k, "times out")).await;
    assert!(timed_out.is_err(), "{timed_out:?}");
    late.hold_before.store(false, Ordering::SeqCst);
    // New claims would go straight through now; the held one has not reached the store yet.
    match within(a.call(&k, "one")).await {
        Err(error) => {
            assert_eq!(error.code(), "activation", "{error}");
            assert!(error.to_string().contains("an earlier claim"), "{error}");
        }
        Ok(outcome) => panic!("a claim overtook the one still on its way: {outcome:?}"),
    }

    late.answers.add_permits(1);
    support::harness::eventually("the late grant to be given back", || {
        late.releases.load(Ordering::SeqCst) == 1
    })
    .await;
    within(a.call(&k, "two"))
        .await
        .expect("a takes the lease now");
    within(a.call(&k, "three")).await.expect("and keeps it");
    let leases = store.leases().expect("leases");
    assert_eq!(
        leases
            .owner(&k)
            .await
            .expect("owner")
            .map(|o| o.address)
            .as_deref(),
        Some("http://a")
    );
    assert_eq!(a.leases_held(), 1);
    match within(b.call(&k, "refused")).await {
        Err(Error::OwnedElsewhere { owner, .. }) => assert_eq!(owner.address, "http://a"),
        other => panic!("expected OwnedElsewhere, got {other:?}"),
    }
}
