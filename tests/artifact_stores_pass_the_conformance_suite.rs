//! Every artifact store — memory, files, Redis and Redis Cluster — keeps every promise of the
//! `ArtifactStore` trait: versions that grow and stay loadable, listings, hostile names refused,
//! the size limit, scopes that never mix, deletes per name, scope and user, racing saves.
//!
//! On the cluster, any command that touched keys of two slots would fail with CROSSSLOT: every
//! key of one scope carries one hash tag.

mod support;

use std::sync::Arc;

use turnstile::artifact::{conformance, MemoryArtifactStore};
use turnstile::backend::FileArtifactStore;
use turnstile::ArtifactStore;

/// Small enough that the oversize check stays quick on every store.
const TEST_LIMIT: u64 = 256 * 1024;

#[tokio::test]
async fn memory_artifact_store_passes_the_conformance_suite() {
    conformance::run_all(|| async {
        Arc::new(MemoryArtifactStore::new().with_max_bytes(TEST_LIMIT)) as Arc<dyn ArtifactStore>
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_artifact_store_passes_the_conformance_suite() {
    let parent = Arc::new(tempfile::tempdir().expect("temporary folder"));
    conformance::run_all(|| {
        let root = parent
            .path()
            .join(uuid::Uuid::new_v4().simple().to_string());
        async move {
            let store = FileArtifactStore::open_with_limit(root, TEST_LIMIT).expect("open");
            Arc::new(store) as Arc<dyn ArtifactStore>
        }
    })
    .await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_artifact_store_passes_the_conformance_suite() {
    use support::redis_server::{fresh_prefix, RedisServer};
    use turnstile::backend::RedisArtifactStore;
    use turnstile::backend::RedisOptions;
    let server = RedisServer::start();
    let server = Arc::new(server);
    conformance::run_all(|| {
        let server = server.clone();
        async move {
            let options = RedisOptions::default().with_prefix(fresh_prefix());
            let store = RedisArtifactStore::connect_with_limit(server.url(), &options, TEST_LIMIT)
                .await
                .expect("connect");
            Arc::new(store) as Arc<dyn ArtifactStore>
        }
    })
    .await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_artifact_store_passes_the_conformance_suite() {
    use support::redis_cluster::RedisCluster;
    use support::redis_server::fresh_prefix;
    use turnstile::backend::RedisArtifactStore;
    use turnstile::backend::RedisOptions;
    let cluster = RedisCluster::start();
    let cluster = Arc::new(cluster);
    conformance::run_all(|| {
        let cluster = cluster.clone();
        async move {
            let options = RedisOptions::default().with_prefix(fresh_prefix());
            let store =
                RedisArtifactStore::connect_with_limit(&cluster.url(), &options, TEST_LIMIT)
                    .await
                    .expect("connect");
            Arc::new(store) as Arc<dyn ArtifactStore>
        }
    })
    .await;
}
