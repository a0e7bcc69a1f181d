//! The Redis store writes a session's whole record only now and then (a checkpoint) and folds
//! the events logged since on load. A process that never saw the session loads exactly the
//! record the writer folded turn by turn — version, counters, state and all — at any window,
//! and can append on top of it.
//!
//! Breakage caught: a checkpoint left more than the load reads behind the log's end, or a fold
//! on load that starts at the wrong event, gives another record or a `Corrupt` error.
#![cfg(feature = "redis")]

mod support;

use serde_json::json;
use turnstile::backend::RedisOptions;
use turnstile::state::{SessionRecord, StateDelta};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::redis_server::{fresh_prefix, RedisServer};

#[tokio::test]
async fn a_reader_rebuilds_the_record_the_writer_folded() {
    let server = RedisServer::start();
    let options = RedisOptions::default().with_prefix(fresh_prefix());
    let writer = server.store_with(options.clone()).await;
    let key = SessionKey::new("ann", "long").expect("key");
    let mut expected = None::<SessionRecord>;
    let mut version = 0;
    for turn in 0..150u64 {
        let delta: StateDelta = [("count".to_owned(), json!(turn))].into();
        let events = turn_events(1 + 2 * turn, &format!("m{turn}"), Some(delta));
        let record =
            expected.get_or_insert_with(|| SessionRecord::new(key.clone(), events[0].at_ms));
        for event in &events {
            record.apply(event);
        }
        version = writer.append(&key, version, &events).await.expect("append");
        record.version = version;

        if turn % 7 == 0 || turn > 140 {
            let reader = server.store_with(options.clone()).await;
            for window in [0, 1, 5, 200, 400] {
                let loaded = reader.load(&key, window).await.expect("load");
                assert_eq!(loaded.record.as_ref(), expected.as_ref(), "turn {turn}");
                let newest = usize::try_from(2 * (turn + 1)).expect("small").min(window);
                assert_eq!(loaded.events.len(), newest, "turn {turn}, window {window}");
            }
        }
    }
    let reader = server.store_with(options).await;
    reader.load(&key, 1).await.expect("load");
    let next = reader
        .append(&key, version, &turn_events(301, "from the reader", None))
        .await
        .expect("the reader appends on the rebuilt record");
    let loaded = writer.load(&key, 2).await.expect("load");
    assert_eq!(loaded.record.expect("head").version, next);
}
