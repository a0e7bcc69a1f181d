//! The Redis store's key layout is versioned (`P:layout`): a prefix marked by a newer turnstile
//! is refused with `NewerLayout`, and data of the older, unversioned layout (which this build no
//! longer reads) with a clear `InvalidRequest` — both before anything is read or written. A
//! fresh prefix is marked with this build's version.
#![cfg(feature = "redis")]

mod support;

use turnstile::store::{RedisOptions, RedisStore};
use turnstile::StoreError;

use support::redis_server::{fresh_prefix, RedisServer};

#[tokio::test]
async fn newer_and_unversioned_layouts_are_refused_and_fresh_prefixes_are_marked() {
    let server = RedisServer::start();
    let mut conn = server.connection().await;
    let connect = |prefix: &str| {
        RedisStore::connect(
            server.url(),
            RedisOptions::default().with_prefix(prefix.to_owned()),
        )
    };

    let fresh = fresh_prefix();
    connect(&fresh).await.expect("a fresh prefix");
    let mark: String = redis::cmd("GET")
        .arg(format!("{fresh}:layout"))
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(mark, "2");
    connect(&fresh).await.expect("its own layout again");

    let newer = fresh_prefix();
    let _: () = redis::cmd("SET")
        .arg(format!("{newer}:layout"))
        .arg(3)
        .query_async(&mut conn)
        .await
        .expect("SET");
    match connect(&newer).await {
        Err(StoreError::NewerLayout {
            found, supported, ..
        }) => assert_eq!((found, supported), (3, 2)),
        other => panic!("a newer layout must be refused, got {other:?}"),
    }

    let old = fresh_prefix();
    let _: i64 = redis::cmd("ZADD")
        .arg(format!("{old}:gc"))
        .arg(1)
        .arg("u61:73")
        .query_async(&mut conn)
        .await
        .expect("ZADD");
    match connect(&old).await {
        Err(StoreError::InvalidRequest(message)) => {
            assert!(message.contains("layout version 1"), "{message}");
        }
        other => panic!("unversioned data must be refused, got {other:?}"),
    }
    let marked: i64 = redis::cmd("EXISTS")
        .arg(format!("{old}:layout"))
        .query_async(&mut conn)
        .await
        .expect("EXISTS");
    assert_eq!(marked, 0, "the old prefix is left as it was");
}
