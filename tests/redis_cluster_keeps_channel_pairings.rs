//! Channel pairings on a real Redis Cluster: `serve --store redis+cluster://…` keeps them in the
//! cluster like a single server would — shared by every process, surviving a reopen — with
//! every pairing key under one hash tag, so no script crosses slots.
#![cfg(feature = "redis")]

mod support;

use turnstile::channel::{PairingStore, RedisPairingStore};

use support::redis_cluster::RedisCluster;
use support::redis_server::fresh_prefix;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairings_round_trip_on_a_cluster_and_survive_a_reopen() {
    let cluster = RedisCluster::start();
    let prefix = fresh_prefix();
    let store = RedisPairingStore::connect(&cluster.url(), &prefix)
        .await
        .expect("pairings on the cluster");
    store.put("slack", "U1", "alice").await.expect("put");
    store.put("discord", "D1", "alice").await.expect("put");
    store.put("slack", "U2", "bob").await.expect("put");
    // A second process (a second connection) sees the same pairings.
    let other = RedisPairingStore::connect(&cluster.url(), &prefix)
        .await
        .expect("reopen");
    assert_eq!(
        other.get("slack", "U1").await.expect("get").as_deref(),
        Some("alice")
    );
    assert_eq!(other.of_user("alice").await.expect("of_user").len(), 2);
    // Moving an account to another user updates both indexes.
    other.put("slack", "U1", "bob").await.expect("move");
    assert_eq!(store.of_user("alice").await.expect("of_user").len(), 1);
    assert_eq!(store.of_user("bob").await.expect("of_user").len(), 2);
    assert_eq!(store.remove_user("bob").await.expect("remove_user"), 2);
    assert_eq!(store.get("slack", "U2").await.expect("get"), None);
    assert_eq!(
        store.get("discord", "D1").await.expect("get").as_deref(),
        Some("alice"),
        "another user's pairing is untouched"
    );
}
