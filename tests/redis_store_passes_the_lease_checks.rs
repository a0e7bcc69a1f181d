//! The Redis store's leases and fenced appends pass the lease conformance checks — one holder
//! at a time, only its writes commit, a former holder can never commit, epochs only grow (also
//! across deletion), renewal per lease, expiry — through two connections that stand for two
//! processes, on a standalone server and on a real Redis Cluster.
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;

use turnstile::store::{conformance, RedisOptions, RedisStore};
use turnstile::Store;

use support::redis_cluster::{fresh_prefix, RedisCluster};
use support::redis_server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_passes_the_lease_checks() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let server = Arc::new(server);
    conformance::run_leases(|| {
        let server = server.clone();
        async move {
            let options = RedisOptions::default().with_prefix(fresh_prefix());
            let connect = || RedisStore::connect(server.url(), options.clone());
            let a: Arc<dyn Store> = Arc::new(connect().await.expect("connect"));
            let b: Arc<dyn Store> = Arc::new(connect().await.expect("connect"));
            (a, b)
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_store_passes_the_lease_checks() {
    let Some(cluster) = RedisCluster::start() else {
        return;
    };
    let cluster = Arc::new(cluster);
    conformance::run_leases(|| {
        let cluster = cluster.clone();
        async move {
            let options = RedisOptions::default().with_prefix(fresh_prefix());
            let a: Arc<dyn Store> = Arc::new(cluster.store_with(options.clone()).await);
            let b: Arc<dyn Store> = Arc::new(cluster.store_with(options).await);
            (a, b)
        }
    })
    .await;
}
