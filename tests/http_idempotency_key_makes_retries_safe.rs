//! Over HTTP, a turn may carry an `Idempotency-Key` header: a retry with the same key after the
//! store failed is answered with the stored outcome, and the history holds the message once; a
//! key that is not visible ASCII is a 400.

mod support;

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::json;
use support::harness::{key, stored_inputs};
use support::http::*;
use turnstile::store::FaultyStore;
use turnstile::{http::HttpConfig, EchoAgent, InMemoryStore, Runtime, Store};

fn with_key(id: &str, input: &str) -> axum::http::Request<axum::body::Body> {
    let mut request = post(
        "/v1/sessions/alice/s/turns",
        ALICE,
        json!({ "input": input }),
    );
    request
        .headers_mut()
        .insert("idempotency-key", id.parse().expect("header value"));
    request
}

#[tokio::test]
async fn a_retry_after_a_store_failure_is_answered_once() {
    let memory: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let faulty = FaultyStore::new(memory.clone());
    let gw = TestGateway::with_store(
        Runtime::builder().agent(EchoAgent),
        faulty.clone(),
        HttpConfig::default(),
    );
    faulty.fail_next_appends(1);
    let (status, body) = gw.send(with_key("order-7", "pay")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Idempotency-Key"), "{body}");

    let (status, first) = gw.send(with_key("order-7", "pay")).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let (status, again) = gw.send(with_key("order-7", "pay")).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(first["seq"], again["seq"]);
    assert_eq!(first["output"], "pay");
    let inputs: Vec<String> = stored_inputs(memory.as_ref(), &key("alice", "s"))
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(inputs, ["pay"], "one copy");

    let (status, body) = gw.send(with_key("has space", "x")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}
