//! In several forwarding processes, the OpenAI routes reach the process that owns the
//! conversation, like the session routes: responses run there (FIFO, one owner), a retry with
//! the same `Idempotency-Key` through another process is stored once, a cancel sent to another
//! process interrupts the running response, and reads through any process see the owner's
//! answer.
//!
//! The "processes" are gateways on real loopback sockets, each over its own runtime with
//! ownership, sharing one memory store as processes share a Redis.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use support::gateways::{Gateways, Member};
use support::harness::{eventually, key, stored_inputs, within, GateAgent};
use support::http::{EventReader, ALICE};
use turnstile::http::SERVED_BY_HEADER;

const LEASE_TTL: Duration = Duration::from_secs(5);

/// An answer: status, who served it, JSON body.
struct Answer {
    status: StatusCode,
    served_by: String,
    body: Value,
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = within(request.bearer_auth(ALICE).send())
        .await
        .expect("the gateway answers");
    let status = response.status();
    let served_by = response
        .headers()
        .get(SERVED_BY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = within(response.json()).await.unwrap_or(Value::Null);
    Answer {
        status,
        served_by,
        body,
    }
}

fn post(member: &Member, path: &str, body: Value) -> reqwest::RequestBuilder {
    reqwest::Client::new().post(member.url(path)).json(&body)
}

fn get(member: &Member, path: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new().get(member.url(path))
}

/// One response in `conversation` through `member`, answered by `owner`.
async fn respond(member: &Member, conversation: &str, input: &str, owner: &Member) -> Value {
    let answer = send(post(
        member,
        "/v1/responses",
        json!({"conversation": conversation, "input": input}),
    ))
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.served_by, owner.base, "run by the owner");
    answer.body
}

fn output_text(response: &Value) -> &str {
    response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_reads_and_chat_completions_run_at_the_owner_in_order() {
    let cluster = Gateways::start(3, Arc::new(GateAgent::default()), LEASE_TTL).await;
    let [a, b, c] = &cluster.members[..] else {
        panic!("three processes")
    };
    let created = send(post(a, "/v1/conversations", json!({}))).await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.body);
    let conversation = created.body["id"].as_str().expect("an id").to_owned();
    // The first response takes the session where it is sent; the rest follow it there.
    let mut ids = Vec::new();
    for (i, member) in [a, b, c, b, c].into_iter().enumerate() {
        let response = respond(member, &conversation, &format!("m{i}"), a).await;
        assert_eq!(output_text(&response), format!("done: m{i}"));
        ids.push(response["id"].as_str().expect("an id").to_owned());
    }
    let turns = stored_inputs(cluster.store.as_ref(), &key("alice", &conversation)).await;
    let inputs: Vec<&str> = turns.iter().map(|(input, _)| input.as_str()).collect();
    assert_eq!(
        inputs,
        ["m0", "m1", "m2", "m3", "m4"],
        "in order, once each"
    );

    // Reads through a process that does not own it are the owner's answers.
    let retrieved = send(get(c, &format!("/v1/responses/{}", ids[2]))).await;
    assert_eq!(retrieved.status, StatusCode::OK, "{}", retrieved.body);
    assert_eq!(retrieved.served_by, a.base);
    assert_eq!(output_text(&retrieved.body), "done: m2");
    let items = send(get(
        b,
        &format!("/v1/conversations/{conversation}/items?order=asc&limit=3"),
    ))
    .await;
    assert_eq!(items.served_by, a.base);
    assert_eq!(items.body["has_more"], true, "{}", items.body);
    assert_eq!(items.body["data"][0]["content"][0]["text"], "m0");

    // `previous_response_id` names the conversation too: it runs at the owner.
    let next = send(post(
        c,
        "/v1/responses",
        json!({"previous_response_id": ids[4], "input": "m5"}),
    ))
    .await;
    assert_eq!(next.status, StatusCode::OK, "{}", next.body);
    assert_eq!(next.served_by, a.base);
    assert_eq!(next.body["conversation"]["id"], conversation.as_str());

    // A refusal made at the owner comes back as the owner shaped it, naming the field.
    let refused = send(post(
        b,
        "/v1/responses",
        json!({"conversation": conversation, "input": "x", "model": "m".repeat(300)}),
    ))
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert_eq!(refused.served_by, a.base);
    assert_eq!(refused.body["error"]["param"], "model", "{}", refused.body);
    assert_eq!(refused.body["error"]["type"], "invalid_request_error");

    // A chat completion bound to a session runs at that session's owner.
    let chat = |member: &Member| {
        post(
            member,
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "hi"}]}),
        )
        .header("x-session-id", "bound")
    };
    let first = send(chat(b)).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    for member in [a, c] {
        let again = send(chat(member)).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.body);
        assert_eq!(again.served_by, b.base, "the session stays where it began");
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_response_through_another_process_is_stored_once() {
    let cluster = Gateways::start(3, Arc::new(GateAgent::default()), LEASE_TTL).await;
    let members = &cluster.members;
    // A new conversation each time, made by the first attempt where it landed.
    let attempt = |member: &Member| {
        post(member, "/v1/responses", json!({"input": "pay"})).header("idempotency-key", "r-1")
    };
    let first = send(attempt(&members[2])).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    for member in &members[..2] {
        let again = send(attempt(member)).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.body);
        assert_eq!(again.served_by, members[2].base, "forwarded to the owner");
        assert_eq!(again.body["id"], first.body["id"], "the first response");
    }
    let conversation = first.body["conversation"]["id"]
        .as_str()
        .expect("its conversation");
    let inputs = stored_inputs(cluster.store.as_ref(), &key("alice", conversation)).await;
    assert_eq!(inputs.len(), 1, "stored once: {inputs:?}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_sent_to_another_process_interrupts_the_running_response() {
    let agent = Arc::new(GateAgent::default());
    let cluster = Gateways::start(3, agent.clone(), LEASE_TTL).await;
    let [a, b, c] = &cluster.members[..] else {
        panic!("three processes")
    };
    let created = send(post(a, "/v1/conversations", json!({}))).await;
    let conversation = created.body["id"].as_str().expect("an id").to_owned();
    respond(a, &conversation, "warm", a).await;
    // Streamed through b, run at a, held by the agent until cancelled.
    let streamed = within(
        post(
            b,
            "/v1/responses",
            json!({"conversation": conversation, "input": "hold on", "stream": true}),
        )
        .bearer_auth(ALICE)
        .send(),
    )
    .await
    .expect("the stream opens");
    assert_eq!(streamed.status(), StatusCode::OK);
    let mut events = EventReader::new(streamed);
    let (_, created) = within(events.next()).await.expect("response.created");
    let id = created["response"]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    eventually("the agent holds the turn", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;

    let cancelled = send(post(c, &format!("/v1/responses/{id}/cancel"), json!({}))).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    assert_eq!(cancelled.served_by, a.base, "sent to where it runs");
    assert_eq!(cancelled.body["status"], "cancelled", "{}", cancelled.body);
    let mut last = String::new();
    while let Some((name, _)) = within(events.next()).await {
        last = name;
    }
    assert_eq!(last, "response.incomplete", "the stream ends cut short");
    // The session goes on at its owner.
    respond(c, &conversation, "after", a).await;
    cluster.stop().await;
}
