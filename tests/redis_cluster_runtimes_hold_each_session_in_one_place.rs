//! Two runtimes, each with its own connection to one Redis Cluster (as two processes would
//! have), hold each session in one place at a time: the second is told who owns a live
//! session and runs nothing; once the owner drains (giving its leases back), the second takes
//! the session over and continues its history. The runtime's ownership protocol, on the Redis
//! store's leases and fenced appends, across the cluster's slots.
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::{key, within, TIMEOUT};
use support::redis_cluster::RedisCluster;
use support::redis_server::fresh_prefix;
use turnstile::backend::RedisOptions;
use turnstile::config::Ownership;
use turnstile::{EchoAgent, Error, Placement, Runtime, Store};

fn runtime(store: Arc<dyn Store>, address: &str) -> Runtime {
    Runtime::builder()
        .agent_arc(Arc::new(EchoAgent))
        .store_arc(store)
        .with_ownership(Ownership::new(address).with_lease_ttl(Duration::from_secs(5)))
        .build()
        .expect("runtime")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_live_in_one_runtime_and_moves_when_its_owner_drains() {
    let cluster = RedisCluster::start();
    let options = RedisOptions::default().with_prefix(fresh_prefix());
    let store_a: Arc<dyn Store> = Arc::new(cluster.store_with(options.clone()).await);
    let store_b: Arc<dyn Store> = Arc::new(cluster.store_with(options).await);
    let a = runtime(store_a, "http://a");
    let b = runtime(store_b.clone(), "http://b");
    let keys: Vec<_> = (0..8).map(|i| key("alice", &format!("s{i}"))).collect();

    for k in &keys {
        within(a.call(k, "one")).await.expect("a serves it");
        match within(b.call(k, "refused")).await {
            Err(Error::OwnedElsewhere { owner, .. }) => assert_eq!(owner.address, "http://a"),
            other => panic!("{k}: expected OwnedElsewhere, got {other:?}"),
        }
    }
    within(a.drain(TIMEOUT)).await;
    for k in &keys {
        assert_eq!(b.placement(k).await.expect("placement"), Placement::Unowned);
        let outcome = within(b.call(k, "two")).await.expect("b takes it over");
        assert_eq!(outcome.seq, 4, "{k}: b continues a's history");
        let loaded = store_b.load(k, 10).await.expect("load");
        let inputs: Vec<_> = loaded
            .events
            .iter()
            .filter(|e| e.author == turnstile::state::Author::User)
            .filter_map(|e| e.text())
            .collect();
        assert_eq!(
            inputs,
            ["one", "two"],
            "{k}: nothing ran on b while a owned it"
        );
    }
    within(b.drain(TIMEOUT)).await;
}
