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

fn keeper_over_leases(leases: Arc<dyn Leases>) -> LeaseKeeper {
    let ownership = Ownership::new("http://a").with_lease_ttl(TTL);
    LeaseKeeper::new(leases, ownership, "memory")
}
