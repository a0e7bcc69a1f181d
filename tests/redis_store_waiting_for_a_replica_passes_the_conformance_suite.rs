//! The Redis store with `replicas=1`, against a primary with a live replica, keeps every
//! promise of the `Store` trait — the suite, the checks through two handles, and the lease and
//! fenced-write checks — so committing on dedicated connections with `WAIT` changes nothing
//! but when an append is acknowledged.
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;

use turnstile::store::conformance;
use turnstile::Store;

use support::redis_replica::ReplicatedRedis;

const QUERY: &str = "replicas=1&replica_timeout_ms=5000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_waiting_for_a_replica_passes_the_conformance_suite() {
    let redis = ReplicatedRedis::start();
    let redis = Arc::new(redis);
    let one = || {
        let redis = redis.clone();
        async move { Arc::new(redis.fresh_store(QUERY).await) as Arc<dyn Store> }
    };
    conformance::run_all(one).await;
    let two = || {
        let redis = redis.clone();
        async move { redis.two_handles(QUERY).await }
    };
    conformance::run_two_handles(two).await;
    conformance::run_leases(two).await;
}
