//! Property: two processes sharing a Redis never lose each other's updates — a write based on a
//! stale head is a `Conflict`, even when the session was deleted and created again up to the
//! same version in between (the store's cached heads are a shortcut, never a source of truth).
#![cfg(feature = "redis")]

mod support;

use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, StoreError};

use support::redis_server::RedisServer;

fn is_conflict(result: &Result<u64, StoreError>) -> bool {
    matches!(result, Err(StoreError::Conflict { .. }))
}

#[tokio::test]
async fn a_write_based_on_a_head_another_process_replaced_is_refused() {
    let server = RedisServer::start();
    let (a, b) = server.two_handles().await;
    let key = SessionKey::new("shared", "s").expect("key");
    let v1 = a
        .append(&key, 0, &turn_events(1, "a1", None))
        .await
        .expect("a appends");
    let v2 = b
        .append(&key, v1, &turn_events(3, "b1", None))
        .await
        .expect("b appends");
    let stale = a.append(&key, v1, &turn_events(3, "a2", None)).await;
    assert!(is_conflict(&stale), "{stale:?}");
    let loaded = a.load(&key, 10).await.expect("load");
    assert_eq!(loaded.record.expect("head").version, v2);
    assert_eq!(loaded.events[2].text(), Some("b1"));
}

#[tokio::test]
async fn a_session_deleted_and_recreated_to_the_same_version_is_not_written_over() {
    let server = RedisServer::start();
    let (a, b) = server.two_handles().await;
    let key = SessionKey::new("shared", "t").expect("key");
    let v1 = a
        .append(&key, 0, &turn_events(1, "old", None))
        .await
        .expect("a appends");
    assert!(b.delete(&key).await.expect("b deletes"));
    let again = b
        .append(&key, 0, &turn_events(1, "new", None))
        .await
        .expect("b recreates");
    assert_eq!(again, v1, "the new incarnation reaches the same version");
    let stale = a.append(&key, v1, &turn_events(3, "lost?", None)).await;
    assert!(is_conflict(&stale), "{stale:?}");
    let events = b.read_events(&key, 1, 10).await.expect("read");
    assert_eq!(events.len(), 2, "only the new incarnation's events");
    assert_eq!(events[0].text(), Some("new"));
    let fresh = a.load(&key, 10).await.expect("load").record.expect("head");
    a.append(&key, fresh.version, &turn_events(3, "after reload", None))
        .await
        .expect("after a reload the write goes through");
}
