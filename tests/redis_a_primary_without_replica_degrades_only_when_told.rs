//! `replicas=1` with `replica_policy=degrade`: once the primary (on a Cluster, the session's
//! master) has no replica online at all — after the replica died, or after a failover promoted
//! the only one — its appends are acknowledged on it alone instead of answering `NotReplicated`
//! until a replica rejoins; the default `strict` store keeps answering `NotReplicated`. A
//! replica that is there but stalled still holds appends under either policy, and once a
//! replica is back, `degrade` waits for it again. After the first degraded append, the next
//! ones do not wait the replica timeout.
#![cfg(feature = "redis")]

mod support;

use std::time::{Duration, Instant};

use support::harness::within;
use support::redis_replica::ReplicatedRedis;
use support::redis_server::fresh_prefix;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store, StoreError};

/// The replica timeout of both stores: what the first degraded append waits.
const WAIT: Duration = Duration::from_millis(1500);

fn key(session: &str) -> SessionKey {
    SessionKey::new("u", session).expect("key")
}

/// Appends a turn (two events) after `version` (one append each); answers the store's word.
/// A `NotReplicated` append is stored on the primary all the same: the version after it is
/// `version + 1` either way.
async fn append(store: &dyn Store, k: &SessionKey, version: u64) -> Result<u64, StoreError> {
    let events = turn_events(2 * version + 1, "a turn", None);
    within(store.append(k, version, &events)).await
}

fn short(result: &Result<u64, StoreError>) -> bool {
    matches!(result, Err(StoreError::NotReplicated { acked: 0, .. }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_left_without_replica_degrades_only_when_told() {
    let mut redis = ReplicatedRedis::start();
    let prefix = fresh_prefix();
    let base = format!("replicas=1&replica_timeout_ms={}", WAIT.as_millis());
    let strict = redis.store(&prefix, &base).await.expect("connect");
    let degrade = redis
        .store(&prefix, &format!("{base}&replica_policy=degrade"))
        .await
        .expect("connect");
    let (s, d) = (key("strict"), key("degrade"));
    assert_eq!(append(&strict, &s, 0).await.expect("replicated"), 1);
    assert_eq!(append(&degrade, &d, 0).await.expect("replicated"), 1);

    // A stalled replica is still a replica: both hold the append.
    redis.pause_replica();
    assert!(
        short(&append(&degrade, &d, 1).await),
        "stalled: not acknowledged"
    );
    redis.resume_replica();
    redis.until_replica_caught_up().await;

    // No replica at all: strict holds, degrade acknowledges on the primary alone.
    redis.kill_replica();
    let held = append(&strict, &s, 1).await;
    assert!(short(&held), "strict: {held:?}");
    assert_eq!(append(&degrade, &d, 2).await.expect("degraded"), 3);
    let started = Instant::now();
    assert_eq!(append(&degrade, &d, 3).await.expect("degraded"), 4);
    assert!(
        started.elapsed() < WAIT,
        "a primary known to have no replica is not waited for ({:?})",
        started.elapsed()
    );
    // A retry's check of the turn strict held is acknowledged by degrade too.
    within(degrade.confirm_replicated(&s, 2))
        .await
        .expect("the held turn, checked under degrade");
    within(strict.confirm_replicated(&s, 2))
        .await
        .expect_err("and still held under strict");

    // A replica is back: both wait for it again, and it holds what they acknowledge.
    redis.restart_replica().await;
    assert_eq!(append(&degrade, &d, 4).await.expect("replicated"), 5);
    assert_eq!(append(&strict, &s, 2).await.expect("replicated"), 3);
    redis.pause_replica();
    assert!(
        short(&append(&degrade, &d, 5).await),
        "degrade waits for the replica that is back"
    );
}
