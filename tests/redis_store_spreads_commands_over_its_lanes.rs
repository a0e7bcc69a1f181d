//! Property: a Redis store opened with `lanes=N` talks to its server over N connections and
//! uses every one of them (sessions are spread over the lanes by their keys), and sessions
//! written concurrently through it keep every turn, in order.
#![cfg(feature = "redis")]

mod support;

use futures::future::join_all;
use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::redis_server::{fresh_prefix, RedisServer};

const LANES: usize = 3;
/// Enough that every lane gets sessions: all of them missing one lane has odds below 1e-10.
const SESSIONS: usize = 60;
const TURNS: u64 = 10;

/// The server's clients other than the one asking, each as its `CLIENT LIST` line.
async fn other_clients(server: &RedisServer) -> Vec<String> {
    let mut conn = server.connection().await;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .expect("CLIENT LIST");
    list.lines()
        .filter(|line| !line.contains("cmd=client|list"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn every_lane_carries_commands_and_no_session_loses_or_reorders_a_turn() {
    let server = RedisServer::start();
    let url = format!("{}?lanes={LANES}", server.url());
    let store = RedisStore::connect(&url, RedisOptions::default().with_prefix(fresh_prefix()))
        .await
        .expect("connect with lanes");

    let writers = (0..SESSIONS).map(|s| {
        let store = store.clone();
        async move {
            let key = SessionKey::new("lanes", format!("s{s}")).expect("key");
            let mut version = 0;
            for turn in 0..TURNS {
                version = store
                    .append(
                        &key,
                        version,
                        &turn_events(turn * 2 + 1, &format!("t{turn}"), None),
                    )
                    .await
                    .expect("append");
            }
            key
        }
    });
    let keys = join_all(writers).await;

    let lanes = other_clients(&server).await;
    assert_eq!(lanes.len(), LANES, "one connection per lane: {lanes:#?}");
    for lane in &lanes {
        assert!(
            !lane.contains("cmd=NULL") && !lane.contains("cmd=client|setinfo"),
            "a lane that never carried a store command: {lane}"
        );
    }
    for key in keys {
        let loaded = store.load(&key, 100).await.expect("load");
        let texts: Vec<_> = loaded
            .events
            .iter()
            .filter(|e| e.seq % 2 == 1)
            .map(|e| e.text().unwrap_or_default().to_owned())
            .collect();
        let expected: Vec<_> = (0..TURNS).map(|t| format!("t{t}")).collect();
        assert_eq!(texts, expected, "{key}: every turn, in order");
        assert_eq!(loaded.record.expect("head").version, TURNS);
    }
}
