//! Readiness follows the store: `GET /readyz` of a `serve` whose Redis is gone turns `503
//! store_unavailable` within a few seconds (three unanswered probes, one a second), while
//! `GET /healthz` stays `200` (the process is alive and recovers by itself); once Redis is back
//! the process is ready again. A load balancer checking `/readyz` stops sending turns to a
//! process that could only fail them.
#![cfg(all(feature = "http", feature = "redis"))]

mod support;

use std::time::{Duration, Instant};

use support::harness::eventually_ok_within;
use support::redis_server::RedisServer;
use support::serve::Serve;

/// Three probes a second apart, each bounded by a second, plus the time to notice.
const WITHIN: Duration = Duration::from_secs(10);

async fn probe(client: &reqwest::Client, url: &str) -> (u16, serde_json::Value) {
    let response = client
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("the process answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_while_the_store_is_down_and_200_once_it_is_back() {
    let mut redis = RedisServer::start_private();
    let serve = Serve::start_on(redis.url(), 1, 1, &[]);
    let client = reqwest::Client::new();
    let (readyz, healthz) = (serve.url("/readyz"), serve.url("/healthz"));
    assert_eq!(probe(&client, &readyz).await.0, 200);

    redis.stop();
    let gone = Instant::now();
    let body = eventually_ok_within(
        "/readyz to say 503",
        WITHIN,
        Duration::from_millis(100),
        || async {
            match probe(&client, &readyz).await {
                (503, body) => Ok(body),
                (status, body) => Err(format!("{status}: {body}")),
            }
        },
    )
    .await;
    println!(
        "/readyz said 503 {:?} after the store went away",
        gone.elapsed()
    );
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("has not answered"), "{body}");
    assert!(
        !message.contains("127.0.0.1"),
        "no store address leaks: {body}"
    );
    assert_eq!(probe(&client, &healthz).await.0, 200, "still alive");

    redis.restart();
    eventually_ok_within(
        "/readyz to say 200 again",
        WITHIN,
        Duration::from_millis(100),
        || async {
            match probe(&client, &readyz).await {
                (200, _) => Ok(()),
                (status, body) => Err(format!("{status}: {body}")),
            }
        },
    )
    .await;
}
