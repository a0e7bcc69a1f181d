//! Property: a Redis store keeps the head of every session a runtime holds live by default, so
//! each append of a live session is one script. With more live sessions than it keeps heads
//! (4,096 before this test was written), every append of sessions visited in turn first read
//! its head and log tail back: two scripts and the events past the checkpoint, three times the
//! cost per turn (`docs/BENCHMARKS.md`, "Kept heads").
#![cfg(feature = "redis")]

mod support;

use futures::stream::{self, StreamExt};
use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::redis_server::{fresh_prefix, RedisServer};

/// More than the 4,096 heads the store used to keep.
const SESSIONS: usize = 5_000;

#[tokio::test]
async fn each_append_of_five_thousand_live_sessions_visited_in_turn_is_one_script() {
    // A server of its own: the test counts every script the server runs.
    let server = RedisServer::start_private();
    let store = RedisStore::connect(
        server.url(),
        RedisOptions::default().with_prefix(fresh_prefix()),
    )
    .await
    .expect("connect");
    let keys: Vec<SessionKey> = (0..SESSIONS)
        .map(|s| SessionKey::new("heads", format!("s{s}")).expect("key"))
        .collect();

    // Activation, as a runtime does it: a load, then the session's first turn.
    stream::iter(&keys)
        .for_each_concurrent(64, |key| {
            let store = store.clone();
            async move {
                store.load(key, 64).await.expect("load");
                let version = store
                    .append(key, 0, &turn_events(1, "first", None))
                    .await
                    .expect("first append");
                assert_eq!(version, 1);
            }
        })
        .await;

    // Every session's second turn, the sessions in the same order: the least recently used
    // head is always the next one needed.
    server.reset_stats().await;
    stream::iter(&keys)
        .for_each_concurrent(64, |key| {
            let store = store.clone();
            async move {
                let version = store
                    .append(key, 1, &turn_events(3, "second", None))
                    .await
                    .expect("second append");
                assert_eq!(version, 2);
            }
        })
        .await;
    assert_eq!(
        server.scripts_run().await,
        SESSIONS as u64,
        "one append script per turn and nothing read back first"
    );

    // And what was written is whole.
    for key in keys.iter().step_by(499) {
        let loaded = store.load(key, 64).await.expect("load");
        let texts: Vec<_> = loaded.events.iter().filter_map(|e| e.text()).collect();
        assert_eq!(
            texts,
            ["first", "re: first", "second", "re: second"],
            "{key}"
        );
    }
}
