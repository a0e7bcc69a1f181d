//! Fencing on PostgreSQL: should a lease ever be granted with an epoch below one that has
//! already written the session (its epoch counter lost, say), the head's record of the newest
//! writing epoch refuses the write with `Fenced`, and nothing is stored. The lease check alone
//! would let it through: the token is the session's current one.
//!
//! Breakage caught: the fenced append without its epoch check (`fence <= $17` in
//! `src/backend/postgres/sessions/sql.rs`) commits the write.
#![cfg(feature = "postgres")]

mod support;

use std::time::Duration;

use support::postgres::TestDatabase;
use turnstile::backend::{PostgresOptions, PostgresStore};
use turnstile::store::conformance::turn_events;
use turnstile::store::{Claim, Claimant, Lease, Leases};
use turnstile::{SessionKey, Store, StoreError};

const TTL: Duration = Duration::from_secs(60);

async fn grant(store: &PostgresStore, key: &SessionKey, me: &Claimant) -> Lease {
    match store.acquire(key, me, TTL).await.expect("acquire") {
        Claim::Granted(lease) => lease,
        Claim::Held(owner) => panic!("held by {owner:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_below_the_epoch_that_wrote_is_fenced() {
    let database = TestDatabase::create().await;
    let store = database
        .store_with(PostgresOptions::default().with_schema("fence"))
        .await;
    let key = SessionKey::new("alice", "fenced").expect("key");
    let (pa, pb) = (Claimant::new("http://a"), Claimant::new("http://b"));

    let first = grant(&store, &key, &pa).await;
    let v1 = store
        .append_fenced(&key, 0, &turn_events(1, "by a", None), &first)
        .await
        .expect("a writes");
    assert!(store.release(&key, &first).await.expect("release"));
    let second = grant(&store, &key, &pb).await;
    let v2 = store
        .append_fenced(&key, v1, &turn_events(3, "by b", None), &second)
        .await
        .expect("b writes");
    assert!(store.release(&key, &second).await.expect("release"));

    // The counter is lost: the next grant starts below the epoch that wrote the head.
    let admin = database.admin().await;
    let removed = admin
        .execute(
            "DELETE FROM fence.lease_epochs WHERE user_id = $1 AND session_id = $2",
            &[&key.user_id(), &key.session_id()],
        )
        .await
        .expect("delete the epoch counter");
    assert_eq!(removed, 1);
    let low = grant(&store, &key, &pa).await;
    assert!(low.epoch < second.epoch, "{low:?} vs {second:?}");

    match store
        .append_fenced(&key, v2, &turn_events(5, "low epoch", None), &low)
        .await
    {
        Err(StoreError::Fenced { epoch, current, .. }) => {
            assert_eq!((epoch, current), (low.epoch, second.epoch));
        }
        other => panic!("a lower epoch than the head's must be Fenced, got {other:?}"),
    }
    let loaded = store.load(&key, 10).await.expect("load");
    assert_eq!(loaded.record.expect("head").version, v2, "nothing stored");
    let texts: Vec<_> = loaded.events.iter().filter_map(|e| e.text()).collect();
    assert_eq!(texts, ["by a", "re: by a", "by b", "re: by b"]);
}
