//! Contract 10, for Redis: a session head written by a newer turnstile (a `schema_version` above
//! this one's) is refused with `Schema` — by `load`, `append` and `list` — and never overwritten:
//! every key of the store is byte-for-byte what it was. The Redis twin of the file store's
//! `a_head_from_a_newer_turnstile_is_refused_and_never_overwritten`.
//!
//! Breakage caught (verified by hand): decoding the Redis head without the schema check
//! (`store/redis/codec.rs`), which loads the newer head and lets an append write over it.
#![cfg(feature = "redis")]

mod support;

use serde_json::json;
use turnstile::backend::RedisOptions;
use turnstile::state::SCHEMA_VERSION;
use turnstile::store::conformance::turn_events;
use turnstile::store::PageRequest;
use turnstile::{SessionKey, Store, StoreError};

use support::redis_server::{dump, fresh_prefix, RedisServer};

fn is_schema<T: std::fmt::Debug>(result: &Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::Schema { .. }))
}

#[tokio::test]
async fn a_head_from_a_newer_turnstile_is_refused_and_never_overwritten() {
    let server = RedisServer::start();
    let prefix = fresh_prefix();
    let options = RedisOptions::default().with_prefix(prefix.clone());
    let key = SessionKey::new("alice", "s").expect("key");
    let writer = server.store_with(options.clone()).await;
    let v1 = writer
        .append(&key, 0, &turn_events(1, "m0", None))
        .await
        .expect("append");
    let version = writer
        .append(&key, v1, &turn_events(3, "m1", None))
        .await
        .expect("append");

    // Rewrite the head's record as a newer turnstile would have written it.
    let mut conn = server.connection().await;
    let head = server.only_session_head(&prefix).await;
    let record: String = redis::cmd("HGET")
        .arg(&head)
        .arg("r")
        .query_async(&mut conn)
        .await
        .expect("HGET");
    let mut record: serde_json::Value = serde_json::from_str(&record).expect("the record is JSON");
    record["schema_version"] = json!(SCHEMA_VERSION + 1);
    record["future_field"] = json!("keep me");
    let _: i64 = redis::cmd("HSET")
        .arg(&head)
        .arg("r")
        .arg(record.to_string())
        .query_async(&mut conn)
        .await
        .expect("HSET");
    let before = dump(&mut conn, &prefix).await;

    // A process that starts now, with nothing cached.
    let reader = server.store_with(options).await;
    let loaded = reader.load(&key, 10).await;
    assert!(is_schema(&loaded), "load: {loaded:?}");
    let message = loaded.expect_err("refused").to_string();
    assert!(message.contains("alice/s"), "names the session: {message}");
    assert!(message.contains("upgrade turnstile"), "{message}");
    let appended = reader
        .append(&key, version, &turn_events(5, "m2", None))
        .await;
    assert!(is_schema(&appended), "append: {appended:?}");
    let fresh = reader
        .append(&key, 0, &turn_events(1, "fresh?", None))
        .await;
    assert!(is_schema(&fresh), "append on base 0: {fresh:?}");
    let listed = reader.list("alice", &PageRequest::default()).await;
    assert!(is_schema(&listed), "list: {listed:?}");

    assert_eq!(
        dump(&mut conn, &prefix).await,
        before,
        "every key is byte-for-byte unchanged"
    );
}
