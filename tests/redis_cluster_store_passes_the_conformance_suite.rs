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

/// The same on a cluster whose masters each have a replica, with `replicas=1`: committing on
/// dedicated connections to each session's master, followed by `WAIT`, changes nothing but
/// when an append is acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_store_waiting_for_replicas_passes_the_conformance_suite() {
    use std::time::Duration;

    use support::redis_cluster::ClusterLayout;
    use support::redis_server::fresh_prefix;
    use turnstile::backend::RedisOptions;

    let cluster = Arc::new(RedisCluster::start_with(ClusterLayout {
        replicas: true,
        args: Vec::new(),
    }));
    let options = || {
        RedisOptions::default()
            .with_prefix(fresh_prefix())
            .with_replicas(1)
            .with_replica_timeout(Duration::from_secs(5))
    };
    conformance::run_all(|| {
        let (cluster, options) = (cluster.clone(), options());
        async move { Arc::new(cluster.store_with(options).await) as Arc<dyn Store> }
    })
    .await;
    conformance::run_two_handles(|| {
        let (cluster, options) = (cluster.clone(), options());
        async move {
            let a = cluster.store_with(options.clone()).await;
            let b = cluster.store_with(options).await;
            (Arc::new(a) as Arc<dyn Store>, Arc::new(b) as Arc<dyn Store>)
        }
    })
    .await;
}
