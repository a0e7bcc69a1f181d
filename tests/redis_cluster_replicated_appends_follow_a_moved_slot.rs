//! With `replicas=N` on a Redis Cluster, an append goes to the master its own map of slots names,
//! on a connection of its own. When a failover or a resharding moved the slot, that master
//! answers `MOVED slot host:port`: the append is sent to the master the reply names, at once,
//! and acknowledged. Before, the map was asked again of a random node — which, a moment after
//! the move, still names the old master — and after two such redirections the turn failed as
//! `store_unavailable` (`Moved: …`), as it did dozens of times in a run with a master killed.
//!
//! A resharding of empty slots makes the move deterministic: the old master answers `MOVED`
//! from the moment it is told, while the other nodes learn it by gossip later.
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::within;
use support::redis_cluster::{log_length_on, ClusterLayout, RedisCluster};
use support::redis_server::fresh_prefix;
use turnstile::backend::RedisOptions;
use turnstile::{EchoAgent, Runtime, SessionKey, Store};

const MOVES: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_whose_slot_moved_goes_where_the_master_says() {
    let cluster = RedisCluster::start_with(ClusterLayout {
        replicas: true,
        args: Vec::new(),
    });
    let prefix = fresh_prefix();
    let options = RedisOptions::default()
        .with_prefix(&prefix)
        .with_replicas(1)
        .with_replica_timeout(Duration::from_secs(5));
    let store: Arc<dyn Store> = Arc::new(cluster.store_with(options).await);
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .build()
        .expect("runtime");
    // The store reads its map of masters with its first replicated append.
    let first = SessionKey::new("u", "first").expect("key");
    within(rt.call(&first, "hello")).await.expect("acked");

    let mut moved = 0;
    for i in 0..200 {
        if moved == MOVES {
            break;
        }
        let key = SessionKey::new("u", format!("moved{i}")).expect("key");
        let from = cluster.master_of(&key);
        let to = *cluster
            .masters()
            .iter()
            .find(|&&m| m != from)
            .expect("another master");
        if !cluster.move_empty_slot(&key, to) {
            continue;
        }
        moved += 1;
        let outcome = within(rt.call(&key, "after the move")).await;
        let outcome = outcome.unwrap_or_else(|e| panic!("{key}, moved from {from} to {to}: {e}"));
        assert_eq!(outcome.seq, 2);
        assert_eq!(
            log_length_on(to, &prefix, &key),
            2,
            "{key}: stored on the new master"
        );
    }
    assert_eq!(moved, MOVES, "enough empty slots to move");
}
