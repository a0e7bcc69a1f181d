//! Property: a Redis that is down, goes away, or stops answering makes the store answer
//! `Unavailable` within its timeouts — never a hang, never another error.
#![cfg(feature = "redis")]

mod support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store, StoreError};

use support::redis_server::{free_port, RedisServer};

/// Generous bound for "quickly": the configured timeouts below are 300 ms.
const BOUND: Duration = Duration::from_secs(3);

fn options() -> RedisOptions {
    RedisOptions::default()
        .with_connect_timeout(Duration::from_millis(300))
        .with_response_timeout(Duration::from_millis(300))
}

fn is_unavailable<T: std::fmt::Debug>(result: &Result<T, StoreError>) -> bool {
    matches!(
        result,
        Err(StoreError::Unavailable {
            backend: "redis",
            ..
        })
    )
}

#[tokio::test]
async fn connecting_to_a_redis_that_is_down_fails_quickly() {
    let url = format!("redis://127.0.0.1:{}/", free_port());
    let started = Instant::now();
    let result = RedisStore::connect(&url, options()).await;
    assert!(is_unavailable(&result), "{result:?}");
    assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_redis_that_goes_away_makes_calls_unavailable_quickly() {
    // A server of this test's own, even when `REDIS_URL` names one: the test stops it.
    let mut server = RedisServer::start_private();
    let store = server.store_with(options()).await;
    let key = SessionKey::new("u", "s").expect("key");
    store
        .append(&key, 0, &turn_events(1, "hi", None))
        .await
        .expect("append");
    server.stop();
    for _ in 0..3 {
        let started = Instant::now();
        let appended = store.append(&key, 1, &turn_events(3, "lost?", None)).await;
        assert!(is_unavailable(&appended), "{appended:?}");
        let loaded = store.load(&key, 5).await;
        assert!(is_unavailable(&loaded), "{loaded:?}");
        assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
    }
}

#[tokio::test]
async fn a_redis_that_accepts_but_never_answers_is_unavailable_not_a_hang() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    // Accepts connections and holds them open without ever replying.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(16) {
            held.push(stream);
        }
    });
    let started = Instant::now();
    let result = RedisStore::connect(&format!("redis://127.0.0.1:{port}/"), options()).await;
    assert!(is_unavailable(&result), "{result:?}");
    assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
}
