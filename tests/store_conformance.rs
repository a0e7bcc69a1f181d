//! Every store passes the same conformance suite.

mod support;

use std::sync::Arc;

use turnstile::store::{conformance, FileStore};
use turnstile::{MemoryStore, Store};

#[cfg(feature = "postgres")]
use support::postgres::TestDatabase;
#[cfg(feature = "redis")]
use support::redis_server::RedisServer;

/// The memory store keeps every promise of the `Store` trait.
#[tokio::test]
async fn memory_store_passes_the_conformance_suite() {
    conformance::run_all(|| async { Arc::new(MemoryStore::new()) as Arc<dyn Store> }).await;
}

/// The file store keeps every promise of the `Store` trait, each check in a fresh folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_store_passes_the_conformance_suite() {
    let parent = tempfile::tempdir().expect("temporary folder");
    let parent = Arc::new(parent);
    conformance::run_all(|| {
        let root = parent
            .path()
            .join(uuid::Uuid::new_v4().simple().to_string());
        async move { Arc::new(FileStore::open(root).expect("open file store")) as Arc<dyn Store> }
    })
    .await;
}

/// The Redis store keeps every promise of the `Store` trait, each check under a fresh prefix.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_passes_the_conformance_suite() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let server = Arc::new(server);
    conformance::run_all(|| {
        let server = server.clone();
        async move { Arc::new(server.store().await) as Arc<dyn Store> }
    })
    .await;
}

/// The PostgreSQL store keeps every promise of the `Store` trait, each check in a fresh schema
/// of a database created for this run.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_passes_the_conformance_suite() {
    let database = Arc::new(TestDatabase::create().await);
    conformance::run_all(|| {
        let database = database.clone();
        async move { Arc::new(database.store().await) as Arc<dyn Store> }
    })
    .await;
}
