//! The Redis store's gc index may lag behind a session (its score is written when the session
//! is created, once per activation and at each checkpoint, not on every append), so gc must
//! judge by the head itself: a session updated after the score gc saw is never removed, and its
//! score is moved up to the truth; once it really is old, gc removes it.
//!
//! Breakage caught: `delete.lua` trusting gc's score instead of the head's `updated_ms` removes
//! the session at the first gc.
#![cfg(feature = "redis")]

mod support;

use std::time::Duration;

use turnstile::store::conformance::turn_events;
use turnstile::store::GcPolicy;
use turnstile::{SessionKey, Store};

use support::redis_server::RedisServer;

/// One turn whose events happen at `at_ms`.
fn turn_at(seq: u64, at_ms: u64) -> Vec<turnstile::state::Event> {
    let mut events = turn_events(seq, "hello", None);
    for event in &mut events {
        event.at_ms = at_ms;
    }
    events
}

#[tokio::test]
async fn a_lagging_gc_score_never_removes_a_recently_updated_session() {
    let server = RedisServer::start();
    let store = server.store().await;
    let busy = SessionKey::new("kim", "busy").expect("key");
    let idle = SessionKey::new("kim", "idle").expect("key");
    let v1 = store
        .append(&busy, 0, &turn_at(1, 1_000))
        .await
        .expect("create");
    store
        .append(&busy, v1, &turn_at(3, 50_000))
        .await
        .expect("a later turn, which leaves the gc score at the creation's 1,000");
    store
        .append(&idle, 0, &turn_at(1, 10_000))
        .await
        .expect("create");

    // By age: busy's score (1,000) is past the cutoff (40,000); busy itself (50,000) is not.
    let by_age = GcPolicy {
        max_age: Some(Duration::from_millis(20_000)),
        max_sessions: None,
    };
    let report = store.gc(&by_age, 60_000).await.expect("gc");
    assert_eq!(report.removed, vec![idle.clone()], "only the idle session");
    assert_eq!(store.load(&busy, 10).await.expect("load").events.len(), 4);

    // By count: the least recently updated goes, judged by the heads, not the scores.
    store
        .append(&idle, 0, &turn_at(1, 10_000))
        .await
        .expect("create again");
    let by_count = GcPolicy {
        max_age: None,
        max_sessions: Some(1),
    };
    let report = store.gc(&by_count, 60_000).await.expect("gc");
    assert_eq!(
        report.removed,
        vec![idle.clone()],
        "the idle one, not the busy one"
    );

    // Once busy really is older than the cutoff, it goes.
    let report = store.gc(&by_age, 80_000).await.expect("gc");
    assert_eq!(report.removed, vec![busy.clone()]);
    assert!(store.load(&busy, 10).await.expect("load").record.is_none());
}
