//! Every memory store — in memory, a folder, Redis — keeps the `MemoryStore` contract: search
//! across a user's sessions best first, idempotent ingestion, users apart, clear errors for bad
//! searches, deletes by session and by user.

mod support;

use std::sync::Arc;

use turnstile::backend::{FileMemory, RedisMemory};
use turnstile::memory::{conformance, InMemory, MemoryStore};

#[tokio::test]
async fn the_in_memory_store_passes() {
    conformance::run_all(|| async { Arc::new(InMemory::new()) as Arc<dyn MemoryStore> }).await;
}

#[tokio::test]
async fn the_file_store_passes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_path_buf();
    let count = std::sync::atomic::AtomicUsize::new(0);
    conformance::run_all(|| {
        let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let folder = root.join(format!("m{n}"));
        async move { Arc::new(FileMemory::open(folder).expect("open")) as Arc<dyn MemoryStore> }
    })
    .await;
}

#[tokio::test]
async fn the_redis_store_passes() {
    let server = support::redis_server::RedisServer::start();
    let url = server.url().to_owned();
    conformance::run_all(|| {
        let url = url.clone();
        async move {
            let memory = RedisMemory::connect(&url, &support::redis_server::fresh_prefix())
                .await
                .expect("connect");
            Arc::new(memory) as Arc<dyn MemoryStore>
        }
    })
    .await;
}
