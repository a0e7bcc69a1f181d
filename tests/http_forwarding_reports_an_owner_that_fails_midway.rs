//! An owner that breaks off its answer, or never answers, is reported as such: an event stream
//! that breaks off ends with an `error` event (`owner_failed`) after the chunks that came
//! through, and an owner silent past the request timeout is answered 504 `timeout`, not held
//! for ever.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, StatusCode};
use serde_json::{json, Value};
use support::gateways::Gateways;
use support::harness::{key, within, TIMEOUT};
use support::http::{EventReader, ALICE};
use turnstile::http::HttpConfig;
use turnstile::store::Claimant;
use turnstile::EchoAgent;

const LEASE_TTL: Duration = Duration::from_secs(5);

/// Serves `app` on a loopback port; its address.
async fn stub(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_that_breaks_off_ends_with_an_error_event() {
    // One chunk; once the test has read it, the connection breaks (the body fails).
    let die = Arc::new(tokio::sync::Notify::new());
    let app = {
        let die = die.clone();
        axum::Router::new().fallback(move || async move {
            let chunk = futures::stream::once(async {
                Ok::<_, std::io::Error>("event: chunk\ndata: {\"text\":\"half\"}\n\n")
            });
            let death = futures::stream::once(async move {
                die.notified().await;
                Err(std::io::Error::other("the owner died"))
            });
            let body = Body::from_stream(futures::StreamExt::chain(chunk, death));
            ([(header::CONTENT_TYPE, "text/event-stream")], body)
        })
    };
    let owner = stub(app).await;
    let cluster = Gateways::start(1, Arc::new(EchoAgent), LEASE_TTL).await;
    let a = &cluster.members[0];
    let leases = cluster.store.leases().expect("leases");
    within(leases.acquire(&key("alice", "s"), &Claimant::new(owner), LEASE_TTL))
        .await
        .expect("the stub's lease");

    let response = within(
        reqwest::Client::new()
            .post(a.url("/v1/sessions/alice/s/turns"))
            .bearer_auth(ALICE)
            .header("accept", "text/event-stream")
            .json(&json!({ "input": "hi" }))
            .send(),
    )
    .await
    .expect("the stream starts");
    assert_eq!(response.status(), StatusCode::OK);
    let mut events = EventReader::new(response);
    let (name, data) = within(events.next()).await.expect("the chunk");
    assert_eq!((name.as_str(), &data), ("chunk", &json!({"text": "half"})));
    die.notify_one();
    let (name, data) = within(events.next()).await.expect("an error event");
    assert_eq!(name, "error");
    assert_eq!(data["error"]["code"], "owner_failed", "{data}");
    assert!(within(events.next()).await.is_none(), "the stream ends");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_silent_past_the_request_timeout_is_answered_504() {
    let app = axum::Router::new().fallback(std::future::pending::<&'static str>);
    let owner = stub(app).await;
    let config = HttpConfig {
        forward: true,
        request_timeout: Duration::from_millis(500),
        ..HttpConfig::default()
    };
    let cluster = Gateways::start_with(1, Arc::new(EchoAgent), LEASE_TTL, config).await;
    let a = &cluster.members[0];
    let leases = cluster.store.leases().expect("leases");
    within(leases.acquire(&key("alice", "s"), &Claimant::new(owner), LEASE_TTL))
        .await
        .expect("the stub's lease");

    let sent = Instant::now();
    let response = within(
        reqwest::Client::new()
            .post(a.url("/v1/sessions/alice/s/turns"))
            .bearer_auth(ALICE)
            .json(&json!({ "input": "hi" }))
            .send(),
    )
    .await
    .expect("an answer");
    let waited = sent.elapsed();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    let body: Value = within(response.json()).await.expect("a JSON body");
    assert_eq!(body["error"]["code"], "timeout");
    assert!(
        waited < TIMEOUT,
        "bounded by the request timeout: {waited:?}"
    );
    cluster.stop().await;
}
