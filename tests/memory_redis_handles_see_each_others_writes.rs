//! Two processes' handles on one Redis see each other's memory writes: a handle's cached index
//! is dropped as soon as the user's entries change elsewhere (on a private redis-server).

mod support;

use turnstile::backend::RedisMemory;
use turnstile::memory::conformance::entry;
use turnstile::memory::MemoryStore;

use support::redis_server::{fresh_prefix, RedisServer};

#[tokio::test]
async fn a_cached_index_follows_writes_of_another_handle() {
    let server = RedisServer::start();
    let prefix = fresh_prefix();
    let a = RedisMemory::connect(server.url(), &prefix).await.unwrap();
    let b = RedisMemory::connect(server.url(), &prefix).await.unwrap();
    a.ingest(&[entry("pam", "s", 1, "violet flowers")])
        .await
        .unwrap();
    assert_eq!(a.search("pam", "flowers", 5).await.unwrap().len(), 1);
    b.ingest(&[entry("pam", "t", 1, "yellow flowers")])
        .await
        .unwrap();
    assert_eq!(
        a.search("pam", "flowers", 5).await.unwrap().len(),
        2,
        "stale cache"
    );
    b.delete_session(&entry("pam", "s", 0, "").key)
        .await
        .unwrap();
    let hits = a.search("pam", "flowers", 5).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].entry.key.session_id(), "t");
    b.delete_user("pam").await.unwrap();
    assert!(a.search("pam", "flowers", 5).await.unwrap().is_empty());
}
