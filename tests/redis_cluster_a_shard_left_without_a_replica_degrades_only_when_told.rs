//! The case on a real Redis Cluster with a replica per master and `replicas=1`: a
//! master dies, its replica is promoted, and the shard has no replica. A `strict` store (the
//! default) answers its sessions' appends `NotReplicated` until the failed node rejoins; a
//! `degrade` store acknowledges them on the promoted master alone. Once the failed node is back
//! as the new master's replica, both wait for it again.
#![cfg(feature = "redis")]

mod support;

use std::time::Duration;

use support::harness::{eventually, within};
use support::redis_cluster::{ClusterLayout, RedisCluster};
use support::redis_server::fresh_prefix;
use turnstile::backend::{RedisOptions, ReplicaPolicy};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store, StoreError};

/// Appends a turn after `version` (one append each); answers the store's word. A
/// `NotReplicated` append is stored on the master all the same.
async fn append(store: &dyn Store, k: &SessionKey, version: u64) -> Result<u64, StoreError> {
    let events = turn_events(2 * version + 1, "a turn", None);
    within(store.append(k, version, &events)).await
}

/// Appends until the shard answers something other than `store_unavailable` (its master is
/// dead until the replica is promoted, and the store's map catches up); answers that.
async fn append_once_served(
    store: &dyn Store,
    k: &SessionKey,
    version: u64,
) -> Result<u64, StoreError> {
    for _ in 0..100 {
        match append(store, k, version).await {
            Err(StoreError::Unavailable { .. }) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
    panic!("{k}: the shard never answered after its master died");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_whose_master_died_degrades_only_when_told() {
    let mut cluster = RedisCluster::start_with(ClusterLayout {
        replicas: true,
        args: Vec::new(),
    });
    let prefix = fresh_prefix();
    let options = RedisOptions::default()
        .with_prefix(&prefix)
        .with_replicas(1)
        .with_replica_timeout(Duration::from_secs(3));
    let strict = cluster.store_with(options.clone()).await;
    let degrade = cluster
        .store_with(options.with_replica_policy(ReplicaPolicy::Degrade))
        .await;
    let s = SessionKey::new("u", "strict").expect("key");
    // A session on the same master as `s`.
    let d = (0..1000)
        .map(|i| SessionKey::new("u", format!("degrade{i}")).expect("key"))
        .find(|k| cluster.master_of(k) == cluster.master_of(&s))
        .expect("a session on the same master");
    let victim = cluster.master_of(&s);
    let promoted = cluster.replica_of(victim);
    cluster.until_replica_synced(promoted);
    assert_eq!(append(&strict, &s, 0).await.expect("replicated"), 1);
    assert_eq!(append(&degrade, &d, 0).await.expect("replicated"), 1);

    cluster.kill(victim);
    eventually("the replica takes over", || {
        cluster.master_of(&s) == promoted
    })
    .await;
    cluster.until_healed();

    let held = append_once_served(&strict, &s, 1).await;
    assert!(
        matches!(held, Err(StoreError::NotReplicated { acked: 0, .. })),
        "strict: {held:?}"
    );
    let served = append_once_served(&degrade, &d, 1).await;
    assert_eq!(
        served.expect("degrade: acknowledged on the promoted master"),
        2
    );
    assert_eq!(append(&degrade, &d, 2).await.expect("degraded"), 3);

    cluster.restart(victim);
    cluster.until_replica_synced(victim);
    assert_eq!(append(&degrade, &d, 3).await.expect("replicated"), 4);
    assert_eq!(append(&strict, &s, 2).await.expect("replicated"), 3);
    cluster.pause(victim);
    let stalled = append(&degrade, &d, 4).await;
    cluster.resume(victim);
    assert!(
        matches!(stalled, Err(StoreError::NotReplicated { .. })),
        "degrade waits for the replica that is back: {stalled:?}"
    );
}
