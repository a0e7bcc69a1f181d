//! On Redis, a turn's `user:`/`app:` changes and index entries are written after the session's
//! atomic commit, in other slots. When such a write fails, the turn is still committed and
//! durable, so `append` answers `Ok` (a caller that retried would store the turn twice); the
//! changes not written are sent again with the session's next append.
//!
//! The failure is real: the `app:` state key is made to hold a string, so Redis answers
//! `WRONGTYPE` to the store's `HSET`.
#![cfg(feature = "redis")]

mod support;

use serde_json::json;
use turnstile::backend::RedisOptions;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::redis_server::{fresh_prefix, RedisServer};

fn app_delta(key: &str, value: i64) -> Option<StateDelta> {
    Some([(format!("app:{key}"), json!(value))].into())
}

#[tokio::test]
async fn a_committed_turn_is_acknowledged_and_its_shared_changes_are_sent_again() {
    let server = RedisServer::start();
    let prefix = fresh_prefix();
    let store = server
        .store_with(RedisOptions::default().with_prefix(prefix.clone()))
        .await;
    let mut conn = server.connection().await;
    let app_key = format!("{prefix}:app");
    let _: () = redis::cmd("SET")
        .arg(&app_key)
        .arg("not a hash")
        .query_async(&mut conn)
        .await
        .expect("SET");

    let key = SessionKey::new("ann", "s").expect("key");
    let v1 = store
        .append(&key, 0, &turn_events(1, "first", app_delta("a", 1)))
        .await
        .expect("the committed turn is acknowledged although its app: write failed");
    let stored = store.read_events(&key, 1, 10).await.expect("read");
    assert_eq!(stored.len(), 2, "the turn is stored");

    let _: i64 = redis::cmd("DEL")
        .arg(&app_key)
        .query_async(&mut conn)
        .await
        .expect("DEL");
    store
        .append(&key, v1, &turn_events(3, "second", app_delta("b", 2)))
        .await
        .expect("append");
    let loaded = store.load(&key, 10).await.expect("load");
    assert_eq!(loaded.app_state.get("a"), Some(&json!(1)), "sent again");
    assert_eq!(loaded.app_state.get("b"), Some(&json!(2)));
    assert_eq!(loaded.events.len(), 4);
}
