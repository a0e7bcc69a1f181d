//! The Redis store's leases and fenced appends pass the lease conformance checks — one holder
//! at a time, only its writes commit, a former holder can never commit, epochs only grow (also
//! across deletion), renewal per lease, expiry — through two connections that stand for two
//! processes, on a standalone server and on a real Redis Cluster.
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;

use turnstile::store::conformance;

use support::redis_cluster::RedisCluster;
use support::redis_server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_passes_the_lease_checks() {
    let server = RedisServer::start();
    let server = Arc::new(server);
    conformance::run_leases(|| {
        let server = server.clone();
        async move { server.two_handles().await }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_store_passes_the_lease_checks() {
    let cluster = RedisCluster::start();
    let cluster = Arc::new(cluster);
    conformance::run_leases(|| {
        let cluster = cluster.clone();
        async move { cluster.two_handles().await }
    })
    .await;
}
