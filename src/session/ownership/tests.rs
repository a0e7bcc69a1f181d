//! The keeper against the memory store's leases, in paused time.

use super::*;
use crate::store::{Claimant, InMemoryStore, Store};

const TTL: Duration = Duration::from_secs(10);

fn keeper(store: &InMemoryStore, address: &str) -> LeaseKeeper {
    let ownership = Ownership::new(address).with_lease_ttl(TTL);
    LeaseKeeper::new(store.leases().expect("memory leases"), ownership, "memory")
}

fn key(s: &str) -> SessionKey {
    SessionKey::new("u", s).expect("key")
}

#[tokio::test(start_paused = true)]
async fn a_lease_fences_writes_until_four_fifths_of_its_ttl_without_renewal() {
    let store = InMemoryStore::new();
    let keeper = keeper(&store, "http://a");
    let k = key("s");
    keeper.acquire(&k).await.expect("granted");
    assert!(keeper.fence(&k).is_ok());
    tokio::time::advance(TTL * 4 / 5 - Duration::from_millis(1)).await;
    assert!(keeper.fence(&k).is_ok(), "still inside the margin");
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(
        matches!(
            keeper.fence(&k),
            Err(StoreError::NotOwner { owner: None, .. })
        ),
        "past the local deadline nothing is written, though the store's lease still lasts"
    );
}

#[tokio::test(start_paused = true)]
async fn renewal_extends_the_local_deadline_from_before_the_request() {
    let store = InMemoryStore::new();
    let keeper = keeper(&store, "http://a");
    let k = key("s");
    keeper.acquire(&k).await.expect("granted");
    tokio::time::advance(TTL / 2).await;
    keeper.renew_all().await;
    assert!(keeper.take_lost().is_empty());
    tokio::time::advance(TTL * 4 / 5 - Duration::from_millis(1)).await;
    assert!(keeper.fence(&k).is_ok(), "renewed at TTL/2");
}

/// Leases whose renewals of some sessions (or of all) are not answered, as when the store
/// node that keeps them is down.
struct Unanswered {
    inner: Arc<dyn Leases>,
    /// Sessions whose renewals go unanswered; `None`: the whole batch fails.
    only: Option<Vec<SessionKey>>,
}

#[async_trait::async_trait]
impl crate::store::ForwardingLeases for Unanswered {
    fn forward_to(&self) -> &dyn Leases {
        self.inner.as_ref()
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        let Some(only) = &self.only else {
            return Err(StoreError::Unavailable {
                backend: "test",
                detail: "partitioned".into(),
            });
        };
        let answers = self.inner.renew(leases, ttl).await?;
        Ok(leases
            .iter()
            .zip(answers)
            .map(|((key, _), answer)| {
                if only.contains(key) {
                    Renewal::Unanswered
                } else {
                    answer
                }
            })
            .collect())
    }
}

fn keeper_over(leases: Unanswered) -> LeaseKeeper {
    keeper_over_leases(Arc::new(leases))
}

#[tokio::test(start_paused = true)]
async fn an_idle_lease_whose_renewals_fail_is_reported_lost_at_its_local_deadline() {
    let store = InMemoryStore::new();
    let inner = store.leases().expect("memory leases");
    let keeper = keeper_over(Unanswered { inner, only: None });
    let k = key("idle");
    keeper.acquire(&k).await.expect("granted");
    tokio::time::advance(TTL / 3).await;
    keeper.renew_all().await;
    assert!(keeper.take_lost().is_empty(), "still inside its deadline");
    tokio::time::advance(TTL * 4 / 5 - TTL / 3).await;
    keeper.renew_all().await;
    assert_eq!(
        keeper.take_lost(),
        std::slice::from_ref(&k),
        "no write needed: the renewer stops it"
    );
    assert_eq!(keeper.held(), 0);
    assert!(keeper.fence(&k).is_err());
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_renewal_stops_only_its_own_session() {
    let store = InMemoryStore::new();
    let inner = store.leases().expect("memory leases");
    let (down, up) = (key("on-a-node-that-is-down"), key("elsewhere"));
    let keeper = keeper_over(Unanswered {
        inner,
        only: Some(vec![down.clone()]),
    });
    keeper.acquire(&down).await.expect("granted");
    keeper.acquire(&up).await.expect("granted");
    for _ in 0..3 {
        tokio::time::advance(TTL / 3).await;
        keeper.renew_all().await;
    }
    assert_eq!(
        keeper.take_lost(),
        std::slice::from_ref(&down),
        "only the unanswered one"
    );
    assert!(keeper.fence(&up).is_ok(), "its renewals were answered");
    assert!(keeper.fence(&down).is_err());
}

#[tokio::test(start_paused = true)]
async fn a_lease_taken_by_another_process_is_reported_lost_and_forgotten() {
    let store = InMemoryStore::new();
    let a = keeper(&store, "http://a");
    let k = key("s");
    a.acquire(&k).await.expect("granted");
    // a's process stalls past the store's expiry; b takes the session.
    tokio::time::advance(TTL + Duration::from_millis(1)).await;
    let b = keeper(&store, "http://b");
    b.acquire(&k).await.expect("b takes the expired lease");
    a.renew_all().await;
    assert_eq!(a.take_lost(), std::slice::from_ref(&k));
    assert_eq!(a.held(), 0);
    assert!(a.fence(&k).is_err());
    match a.acquire(&k).await {
        Err(StoreError::NotOwner {
            owner: Some(owner), ..
        }) => assert_eq!(owner.address, "http://b"),
        other => panic!("expected the owner to be named, got {other:?}"),
    }
    assert!(b.fence(&k).is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_release_forgets_the_lease_and_frees_the_session() {
    let store = InMemoryStore::new();
    let a = keeper(&store, "http://a");
    let k = key("s");
    a.acquire(&k).await.expect("granted");
    a.release(&k).await;
    assert_eq!(a.held(), 0);
    let other = Claimant::new("http://b");
    let claim = store
        .leases()
        .expect("leases")
        .acquire(&k, &other, TTL)
        .await
        .expect("acquire");
    assert!(matches!(claim, Claim::Granted(_)), "{claim:?}");
}

#[tokio::test(start_paused = true)]
async fn a_stale_report_never_stops_a_session_that_holds_its_lease() {
    let store = InMemoryStore::new();
    let keeper = keeper(&store, "http://a");
    let k = key("s");
    let first = keeper.acquire(&k).await.expect("granted");
    // The session lost `first`, stopped, and was activated again with a new lease; a write of
    // the old activation that was refused reports late.
    keeper.report_lost(&k, Some(&first));
    assert_eq!(keeper.take_lost(), std::slice::from_ref(&k));
    let second = keeper.acquire(&k).await.expect("granted again");
    keeper.report_lost(&k, Some(&first));
    keeper.report_lost(&k, None);
    assert!(
        keeper.take_lost().is_empty(),
        "the new activation holds its lease"
    );
    assert!(keeper.fence(&k).is_ok());
    keeper.report_lost(&k, Some(&second));
    assert_eq!(keeper.take_lost(), std::slice::from_ref(&k));
}

/// Leases whose renewal batches go unanswered while the time since `start` is inside one of
/// `windows` (in seconds), as when the store's connection stops answering for a moment.
struct UnansweredAt {
    inner: Arc<dyn Leases>,
    start: Instant,
    windows: Vec<(f64, f64)>,
}

#[async_trait::async_trait]
impl crate::store::ForwardingLeases for UnansweredAt {
    fn forward_to(&self) -> &dyn Leases {
        self.inner.as_ref()
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        let at = self.start.elapsed().as_secs_f64();
        if self.windows.iter().any(|&(from, to)| at >= from && at < to) {
            return Err(StoreError::Unavailable {
                backend: "test",
                detail: "not answering for a moment".into(),
            });
        }
        self.inner.renew(leases, ttl).await
    }
}

/// Runs the renewer's schedule for `span` in steps of 10 ms of paused time (a round every
/// third of the TTL; after a round that left a lease unanswered, the next one `retry` later)
/// and returns the first moment a write of `k` would have been refused.
async fn first_refusal(
    keeper: &LeaseKeeper,
    k: &SessionKey,
    span: Duration,
    retry: Option<Duration>,
) -> Option<Duration> {
    let step = Duration::from_millis(10);
    let start = Instant::now();
    let mut next_round = start + keeper.renew_every();
    while start.elapsed() < span {
        tokio::time::advance(step).await;
        if Instant::now() >= next_round {
            let unanswered = keeper.renew_all().await;
            next_round = Instant::now()
                + match retry {
                    Some(retry) if unanswered => retry,
                    _ => keeper.renew_every(),
                };
        }
        if keeper.fence(k).is_err() {
            return Some(start.elapsed());
        }
    }
    None
}

#[tokio::test(start_paused = true)]
async fn a_round_left_unanswered_is_tried_again_soon_so_two_short_failures_cost_no_lease() {
    // Two moments without answers, each hitting one of the thirds-of-the-TTL rounds (at 3.3 s
    // and 6.7 s with a TTL of 10 s): on that cadence alone the lease's last renewal is the grant
    // itself, and writes are refused from 8 s. Tried again a tenth of the TTL later (the first
    // moment fails two rounds in a row, at 3.3 s and 4.3 s; 5.3 s is answered), the lease never
    // stops fencing.
    let windows = vec![(3.0, 4.5), (6.5, 7.0)];
    let run = |retry: bool| {
        let windows = windows.clone();
        async move {
            let store = InMemoryStore::new();
            let keeper = keeper_over_windows(&store, windows);
            let k = key("s");
            keeper.acquire(&k).await.expect("granted");
            let retry = retry.then(|| keeper.retry_after());
            first_refusal(&keeper, &k, TTL * 2, retry).await
        }
    };
    let without = run(false).await;
    assert!(
        without.is_some_and(|at| at >= TTL * 4 / 5 && at < TTL),
        "the thirds alone lose the lease at its local deadline: {without:?}"
    );
    assert_eq!(run(true).await, None, "tried again soon, it holds");
}

#[tokio::test(start_paused = true)]
async fn a_round_says_whether_a_lease_still_held_went_unanswered() {
    let store = InMemoryStore::new();
    let (down, up) = (key("on-a-node-that-is-down"), key("elsewhere"));
    let keeper = keeper_over(Unanswered {
        inner: store.leases().expect("memory leases"),
        only: Some(vec![down.clone()]),
    });
    keeper.acquire(&up).await.expect("granted");
    assert!(!keeper.renew_all().await, "every renewal answered");
    keeper.acquire(&down).await.expect("granted");
    assert!(keeper.renew_all().await, "one left unanswered, still held");
    tokio::time::advance(TTL * 4 / 5).await;
    assert!(
        !keeper.renew_all().await,
        "unanswered again, but past its deadline: nothing to try again"
    );
    assert_eq!(keeper.take_lost(), std::slice::from_ref(&down));
    assert!(keeper.fence(&up).is_ok(), "the other is renewed all along");
    let idle = keeper_over(Unanswered {
        inner: store.leases().expect("memory leases"),
        only: None,
    });
    assert!(
        !idle.renew_all().await,
        "no lease held, nothing to try again"
    );
}

fn keeper_over_windows(store: &InMemoryStore, windows: Vec<(f64, f64)>) -> LeaseKeeper {
    keeper_over_leases(Arc::new(UnansweredAt {
        inner: store.leases().expect("memory leases"),
        start: Instant::now(),
        windows,
    }))
}

fn keeper_over_leases(leases: Arc<dyn Leases>) -> LeaseKeeper {
    let ownership = Ownership::new("http://a").with_lease_ttl(TTL);
    LeaseKeeper::new(leases, ownership, "memory")
}
