//! `POST /v1/conversations` with an `Idempotency-Key`: a retry gets the conversation the first
//! attempt made, but a request whose items the route refuses is refused (400) even when an
//! earlier request with the same key created a conversation — the key never lets a body past
//! the checks. (Found by the API fuzzer: an item without `content` sent with a key already used
//! was answered 200 with the earlier conversation.)

mod support;

use axum::http::{header, Method, StatusCode};
use serde_json::json;
use support::http::*;
use turnstile::EchoAgent;

fn create(key: &str, body: serde_json::Value) -> axum::http::Request<axum::body::Body> {
    let mut request = request(Method::POST, "/v1/conversations", Some(ALICE), Some(body));
    request
        .headers_mut()
        .insert("idempotency-key", key.parse().unwrap());
    assert!(request.headers().contains_key(header::AUTHORIZATION));
    request
}

#[tokio::test]
async fn a_retry_with_items_the_route_refuses_is_refused_not_answered_with_the_first() {
    let gw = TestGateway::new(EchoAgent);
    let good = json!({"items": [{"role": "user", "content": "hello"}]});
    let (status, first) = gw.send(create("k-1", good.clone())).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let id = first["id"].as_str().expect("an id").to_owned();

    // The same key, a good body: the same conversation.
    let (status, retry) = gw.send(create("k-1", good)).await;
    assert_eq!(status, StatusCode::OK, "{retry}");
    assert_eq!(retry["id"], id.as_str());

    // The same key, items without content or with a role the route refuses: 400, naming items.
    for items in [
        json!([{"role": "user"}]),
        json!([{"role": "R", "content": "x"}]),
        json!([{"type": "function_call_output", "role": "user", "content": "x"}]),
    ] {
        let (status, body) = gw.send(create("k-1", json!({ "items": items }))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{items} -> {body}");
        assert!(body.to_string().contains("items"), "{body}");
    }

    // The conversation holds the first request's message only.
    let (status, listed) = gw
        .send(get(&format!("/v1/conversations/{id}/items"), ALICE))
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let texts: Vec<String> = listed["data"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|item| item["content"][0]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(texts, vec!["hello".to_owned()]);
}
