//! A retry sent with the same `Idempotency-Key` through a process that does not own the session
//! is forwarded with its key, so the owner recognises it: the turn is stored once and the retry
//! gets the first answer's `seq` — for JSON turns, event-stream turns and channel messages.
//!
//! The "processes" are gateways on real loopback sockets, each over its own runtime with
//! ownership, sharing one memory store as processes share a Redis.

mod support;

use std::sync::Arc;
use std::time::Duration;

use reqwest::{RequestBuilder, StatusCode};
use serde_json::{json, Value};
use support::gateways::{Gateways, Member};
use support::harness::{key, stored_inputs, within};
use support::http::{parse_events, ADMIN, ALICE};
use turnstile::http::SERVED_BY_HEADER;
use turnstile::EchoAgent;

const LEASE_TTL: Duration = Duration::from_secs(2);

/// Sends `request` with `idempotency_key`; answers the status, who served it and the outcome
/// (the JSON body, or an event stream's `outcome` event).
async fn send(request: RequestBuilder, idempotency_key: &str) -> (StatusCode, String, Value) {
    let response = within(request.header("idempotency-key", idempotency_key).send())
        .await
        .expect("the gateway answers");
    let status = response.status();
    let served_by = response
        .headers()
        .get(SERVED_BY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let events = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let text = within(response.text()).await.expect("a whole body");
    let outcome = if events {
        parse_events(&text)
            .into_iter()
            .find_map(|(name, data)| (name == "outcome").then_some(data))
            .unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::Null)
    };
    (status, served_by, outcome)
}

fn turn(member: &Member, session: &str, input: &str, stream: bool) -> RequestBuilder {
    let request = reqwest::Client::new()
        .post(member.url(&format!("/v1/sessions/alice/{session}/turns")))
        .bearer_auth(ALICE)
        .json(&json!({ "input": input }));
    if stream {
        request.header("accept", "text/event-stream")
    } else {
        request
    }
}

/// Sends a message with one key to the owner, then the same message with the same key through
/// each of the other processes; every answer must be the first one.
async fn retried_through_every_process(
    members: &[Member],
    request: impl Fn(&Member) -> RequestBuilder,
    idempotency_key: &str,
) -> Value {
    let (owner, others) = members.split_first().expect("several processes");
    let (status, served_by, first) = send(request(owner), idempotency_key).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(served_by, owner.base, "the first receiver took the session");
    for other in others {
        let (status, served_by, again) = send(request(other), idempotency_key).await;
        assert_eq!(status, StatusCode::OK, "{again}");
        assert_eq!(served_by, owner.base, "forwarded to the owner");
        assert_eq!(
            again["seq"], first["seq"],
            "the retry is the first turn's answer"
        );
        assert_eq!(again["output"], first["output"]);
    }
    first
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_turn_retried_through_a_non_owner_is_stored_once() {
    let cluster = Gateways::start(3, Arc::new(EchoAgent), LEASE_TTL).await;
    let members = &cluster.members;
    retried_through_every_process(members, |m| turn(m, "json", "pay", false), "order-1").await;
    let inputs = stored_inputs(cluster.store.as_ref(), &key("alice", "json")).await;
    assert_eq!(inputs.len(), 1, "stored once: {inputs:?}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_turn_retried_through_a_non_owner_is_stored_once() {
    let cluster = Gateways::start(3, Arc::new(EchoAgent), LEASE_TTL).await;
    let members = &cluster.members;
    let first =
        retried_through_every_process(members, |m| turn(m, "sse", "ship", true), "order-2").await;
    assert_eq!(first["output"], "ship", "the stream ended with its outcome");
    let inputs = stored_inputs(cluster.store.as_ref(), &key("alice", "sse")).await;
    assert_eq!(inputs.len(), 1, "stored once: {inputs:?}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_message_retried_through_a_non_owner_is_stored_once() {
    let cluster = Gateways::start(3, Arc::new(EchoAgent), LEASE_TTL).await;
    let message = |member: &Member| {
        reqwest::Client::new()
            .post(member.url("/v1/channels/slack/messages"))
            .bearer_auth(ADMIN)
            .json(&json!({ "chat": "C9", "user": "U1", "input": "hello" }))
    };
    retried_through_every_process(&cluster.members, message, "msg-3").await;
    let session = turnstile::channel::channel_session_key("slack", "C9", None).expect("a key");
    let inputs = stored_inputs(cluster.store.as_ref(), &session).await;
    assert_eq!(inputs.len(), 1, "stored once: {inputs:?}");
    cluster.stop().await;
}
