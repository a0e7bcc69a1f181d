//! Property: on the OpenAI routes an `Idempotency-Key` names one request. A retry with the same
//! body is answered with the first attempt's response (or chat completion, which keeps its
//! `chatcmpl-` id) and stored once; the same key with another body is refused with 422
//! `request_mismatch`, never answered with the first request's outcome and never run.

#![cfg(feature = "http")]

mod support;

use serde_json::{json, Value};
use support::http::ALICE;
use support::serve::{Serve, ServeStore};

async fn post(
    serve: &Serve,
    path: &str,
    key: &str,
    body: Value,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(serve.url(path))
        .bearer_auth(ALICE)
        .header("Idempotency-Key", key)
        .json(&body);
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the request");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON body"))
}

#[tokio::test]
async fn a_key_reused_with_another_body_is_refused_and_a_retry_is_answered_once() {
    let serve = Serve::start(ServeStore::Memory, 0, 1, &[]);
    let (status, conversation) =
        post(&serve, "/v1/conversations", "conv-key", json!({}), &[]).await;
    assert_eq!(status, 200, "{conversation}");
    let conversation = conversation["id"].as_str().expect("an id").to_owned();

    let body = json!({"model": "m", "input": "once", "conversation": conversation});
    let (status, first) = post(&serve, "/v1/responses", "resp-key", body.clone(), &[]).await;
    assert_eq!(status, 200, "{first}");
    let (status, again) = post(&serve, "/v1/responses", "resp-key", body, &[]).await;
    assert_eq!(
        (status, &again["id"], &again["output"]),
        (200, &first["id"], &first["output"])
    );
    let other = json!({"model": "m", "input": "something else", "conversation": conversation});
    let (status, refused) = post(&serve, "/v1/responses", "resp-key", other, &[]).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "request_mismatch");
    assert_eq!(refused["error"]["type"], "invalid_request_error");

    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let session = [("X-Session-Id", conversation.as_str())];
    let (status, completion) = post(
        &serve,
        "/v1/chat/completions",
        "chat-key",
        chat.clone(),
        &session,
    )
    .await;
    assert_eq!(status, 200, "{completion}");
    let (_, retried) = post(&serve, "/v1/chat/completions", "chat-key", chat, &session).await;
    assert_eq!(
        retried["id"], completion["id"],
        "a retry keeps its first id"
    );
    assert_eq!(retried["choices"], completion["choices"]);
    let changed = json!({"model": "m", "messages": [{"role": "user", "content": "bye"}]});
    let (status, refused) = post(
        &serve,
        "/v1/chat/completions",
        "chat-key",
        changed,
        &session,
    )
    .await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (422, &json!("request_mismatch"))
    );

    let items: Value = reqwest::Client::new()
        .get(serve.url(&format!("/v1/conversations/{conversation}/items?order=asc")))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("the items")
        .json()
        .await
        .expect("a page");
    let said: Vec<&str> = items["data"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["role"] == "user")
        .filter_map(|i| i["content"][0]["text"].as_str())
        .collect();
    assert_eq!(
        said,
        ["once", "hi"],
        "each request stored once, the refused ones never"
    );
}
