//! The Redis store on a real three-master Redis Cluster keeps every promise of the `Store`
//! trait — listing, `delete_user` and `gc` included, which walk indexes that live in other
//! slots than the sessions they name — and its compare-and-set holds across two connections.
//!
//! Breakage caught: any script or pipeline that touches keys of two slots fails on the cluster
//! with CROSSSLOT (the layout-1 append script, which wrote six keys under two tags, did).
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;

use turnstile::store::conformance;
use turnstile::Store;

use support::redis_cluster::RedisCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_store_passes_the_conformance_suite() {
    let cluster = RedisCluster::start();
    let cluster = Arc::new(cluster);
    conformance::run_all(|| {
        let cluster = cluster.clone();
        async move { Arc::new(cluster.store().await) as Arc<dyn Store> }
    })
    .await;
    conformance::run_two_handles(|| {
        let cluster = cluster.clone();
        async move { cluster.two_handles().await }
    })
    .await;
}
