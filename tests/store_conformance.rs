//! Every store passes the same conformance suite, including the checks that write through two
//! handles on one store's data (`run_two_handles`): a stale write from a handle whose own view
//! is out of date must be refused by the store's atomic compare-and-set. With the Redis store's
//! version check taken out of `append.lua`, the Redis run of those checks fails (the Rust-side
//! head check of one handle cannot see what the other wrote).

mod support;

use std::sync::Arc;

use turnstile::backend::FileStore;
use turnstile::store::conformance;
use turnstile::{InMemoryStore, Store};

#[cfg(feature = "postgres")]
use support::postgres::TestDatabase;
#[cfg(feature = "redis")]
use support::redis_server::RedisServer;

/// The memory store keeps every promise of the `Store` trait.
#[tokio::test]
async fn memory_store_passes_the_conformance_suite() {
    conformance::run_all(|| async { Arc::new(InMemoryStore::new()) as Arc<dyn Store> }).await;
}

/// Two handles on one memory store are one store: its compare-and-set is its only check.
#[tokio::test]
async fn memory_store_refuses_stale_writes_from_a_second_handle() {
    conformance::run_two_handles(|| async {
        let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
        (store.clone(), store)
    })
    .await;
}

/// The memory store's leases: one holder at a time, fenced writes from anyone else refused,
/// epochs that only grow, expiry.
#[tokio::test]
async fn memory_store_passes_the_lease_checks() {
    conformance::run_leases(|| async {
        let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
        (store.clone(), store)
    })
    .await;
}

/// A store that keeps no leases refuses a fenced write with a clear error and writes nothing.
#[tokio::test]
async fn a_store_without_leases_refuses_fenced_writes() {
    let folder = tempfile::tempdir().expect("temporary folder");
    let store = turnstile::FileStore::open(folder.path()).expect("open");
    assert!(store.leases().is_none());
    let key = turnstile::SessionKey::new("u", "s").expect("key");
    let lease = turnstile::store::Lease {
        token: "t".to_owned(),
        epoch: 1,
    };
    let refused = store
        .append_fenced(&key, 0, &conformance::turn_events(1, "x", None), &lease)
        .await;
    match refused {
        Err(turnstile::StoreError::InvalidRequest(message)) => {
            assert!(message.contains("cannot fence"), "{message}");
        }
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
    assert!(store.load(&key, 10).await.expect("load").record.is_none());
}

/// The file store admits one opener per root, so its second handle is the same store (clones
/// share it); its check under the session lock is its only check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_store_refuses_stale_writes_from_a_second_handle() {
    let parent = Arc::new(tempfile::tempdir().expect("temporary folder"));
    conformance::run_two_handles(|| {
        let root = parent
            .path()
            .join(uuid::Uuid::new_v4().simple().to_string());
        async move {
            let store: Arc<dyn Store> = Arc::new(FileStore::open(root).expect("open file store"));
            (store.clone(), store)
        }
    })
    .await;
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
    let server = RedisServer::start();
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

/// Two Redis stores on one prefix are two connections with their own cached heads, as two
/// processes would have: a stale write passes the writer's own head check and must be refused
/// by the append script's compare-and-set.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_refuses_stale_writes_from_a_second_connection() {
    let server = RedisServer::start();
    let server = Arc::new(server);
    conformance::run_two_handles(|| {
        let server = server.clone();
        async move { server.two_handles().await }
    })
    .await;
}

/// Two PostgreSQL stores on one schema are two pools with their own cached heads, as two
/// processes would have: a stale write passes the writer's own head check and must be refused
/// by the append statement's compare-and-set.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_refuses_stale_writes_from_a_second_pool() {
    use turnstile::backend::PostgresOptions;
    let database = Arc::new(TestDatabase::create().await);
    conformance::run_two_handles(|| {
        let database = database.clone();
        async move {
            let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
            let options = PostgresOptions::default().with_schema(schema);
            let a = database.store_with(options.clone()).await;
            let b = database.store_with(options).await;
            (Arc::new(a) as Arc<dyn Store>, Arc::new(b) as Arc<dyn Store>)
        }
    })
    .await;
}

/// PostgreSQL keeps leases too: two pools on one schema see one holder at a time, fenced writes
/// of anyone else are refused, epochs only grow, and leases expire by the server's clock.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_passes_the_lease_checks() {
    use turnstile::backend::PostgresOptions;
    let database = Arc::new(TestDatabase::create().await);
    conformance::run_leases(|| {
        let database = database.clone();
        async move {
            let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
            let options = PostgresOptions::default().with_schema(schema);
            let a = database.store_with(options.clone()).await;
            let b = database.store_with(options).await;
            (Arc::new(a) as Arc<dyn Store>, Arc::new(b) as Arc<dyn Store>)
        }
    })
    .await;
}
