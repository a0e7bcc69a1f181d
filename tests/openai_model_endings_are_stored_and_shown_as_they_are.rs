//! A model's answer that is not a whole answer is stored and shown as what it is: a reply cut at
//! the token limit (`finish_reason: "length"`) or by a content filter ends `incomplete` with its
//! reason, and a refusal is kept as a refusal (its text, not an empty answer), on the native
//! turns route, in the session's events and turn read, and on the OpenAI routes (`incomplete`
//! with `incomplete_details`, a `refusal` content part and its stream events, chat's
//! `finish_reason` and `message.refusal`). Before, all three were stored `final` and answered
//! `completed`, and the refusal's text was dropped.

#![cfg(all(feature = "openai", feature = "http"))]

mod support;

use serde_json::{json, Value};
use support::fake_openai::{chunk, content, FakeOpenAi, Reply};
use support::harness::*;
use support::http::ADMIN;
use support::serve::{ModelServe, Serve};

const DONE: &str = "data: [DONE]\n\n";

/// A reply of `text` that ends with `finish`.
fn ending(text: &str, finish: &str) -> Reply {
    Reply::Raw(vec![
        content(text),
        chunk(json!({}), Some(finish)),
        DONE.into(),
    ])
}

/// A refusal, in two pieces as models stream it.
fn refusal() -> Reply {
    Reply::Raw(vec![
        chunk(json!({"role": "assistant", "refusal": "I can't "}), None),
        chunk(json!({"refusal": "help with that."}), None),
        chunk(json!({}), Some("stop")),
        DONE.into(),
    ])
}

async fn post(serve: &Serve, path: &str, body: Value) -> Value {
    let answer = within(
        reqwest::Client::new()
            .post(serve.url(path))
            .bearer_auth(ADMIN)
            .json(&body)
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 200, "POST {path}");
    answer.json().await.unwrap()
}

async fn get(serve: &Serve, path: &str) -> Value {
    let answer = within(
        reqwest::Client::new()
            .get(serve.url(path))
            .bearer_auth(ADMIN)
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 200, "GET {path}");
    answer.json().await.unwrap()
}

/// The events of a streamed response, by name, with their data.
async fn streamed(serve: &Serve, body: Value) -> Vec<(String, Value)> {
    let answer = within(
        reqwest::Client::new()
            .post(serve.url("/v1/responses"))
            .bearer_auth(ADMIN)
            .json(&body)
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 200);
    let text = within(answer.text()).await.unwrap();
    let mut events = Vec::new();
    let mut name = String::new();
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_owned();
        } else if let Some(data) = line.strip_prefix("data: ") {
            events.push((name.clone(), serde_json::from_str(data).unwrap()));
        }
    }
    events
}

fn start(fake: &FakeOpenAi) -> Serve {
    Serve::model(ModelServe {
        base_url: &fake.base_url,
        key: "sk-unused-key-0000",
        log: "error",
        extra: &[],
    })
}

#[tokio::test]
async fn the_native_route_and_the_log_keep_incomplete_and_refused_endings() {
    let fake = FakeOpenAi::start(vec![
        ending("cut sh", "length"),
        ending("filtered", "content_filter"),
        refusal(),
    ])
    .await;
    let serve = start(&fake);
    let turns = "/v1/sessions/ada/s/turns";

    let cut = post(&serve, turns, json!({"input": "write a long essay"})).await;
    assert_eq!(cut["outcome"], "incomplete", "{cut}");
    assert_eq!(cut["reason"], "max_tokens", "{cut}");
    assert_eq!(cut["output"], "cut sh");
    let filtered = post(&serve, turns, json!({"input": "something filtered"})).await;
    assert_eq!(filtered["outcome"], "incomplete", "{filtered}");
    assert_eq!(filtered["reason"], "content_filter", "{filtered}");
    let refused = post(&serve, turns, json!({"input": "something refused"})).await;
    assert_eq!(refused["outcome"], "refused", "{refused}");
    assert_eq!(refused["output"], "I can't help with that.");
    assert!(refused.get("reason").is_none(), "{refused}");

    let events = get(&serve, "/v1/sessions/ada/s/events").await;
    let outputs: Vec<&Value> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"]["type"] == "agent_output")
        .collect();
    let statuses: Vec<&Value> = outputs.iter().map(|e| &e["kind"]["status"]).collect();
    assert_eq!(
        statuses,
        [
            &json!({"status": "incomplete", "reason": "max_tokens"}),
            &json!({"status": "incomplete", "reason": "content_filter"}),
            &json!({"status": "refused"}),
        ]
    );
    assert_eq!(outputs[2]["kind"]["text"], "I can't help with that.");

    let seq = refused["seq"].as_u64().unwrap();
    let turn = get(&serve, &format!("/v1/sessions/ada/s/turns/{seq}")).await;
    assert_eq!(turn["status"], "refused", "{turn}");
    let seq = cut["seq"].as_u64().unwrap();
    let turn = get(&serve, &format!("/v1/sessions/ada/s/turns/{seq}")).await;
    assert_eq!(turn["status"], "incomplete", "{turn}");
    assert_eq!(turn["reason"], "max_tokens", "{turn}");
}

#[tokio::test]
async fn the_openai_routes_answer_incomplete_and_refusals_as_openai_does() {
    let fake = FakeOpenAi::start(vec![
        ending("cut sh", "length"),
        refusal(),
        ending("filtered", "content_filter"),
        refusal(),
        refusal(),
        ending("cut sh", "length"),
    ])
    .await;
    let serve = start(&fake);

    let cut = post(&serve, "/v1/responses", json!({"input": "long essay"})).await;
    assert_eq!(cut["status"], "incomplete", "{cut}");
    assert_eq!(cut["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(cut["output"][0]["content"][0]["text"], "cut sh");

    let refused = post(&serve, "/v1/responses", json!({"input": "refuse"})).await;
    assert_eq!(refused["status"], "completed", "{refused}");
    let part = &refused["output"][0]["content"][0];
    assert_eq!(part["type"], "refusal", "{refused}");
    assert_eq!(part["refusal"], "I can't help with that.");
    let id = refused["id"].as_str().unwrap();
    let again = get(&serve, &format!("/v1/responses/{id}")).await;
    assert_eq!(again["output"], refused["output"], "retrieve reads the log");

    let chat =
        |input: &str| json!({"model": "m", "messages": [{"role": "user", "content": input}]});
    let filtered = post(&serve, "/v1/chat/completions", chat("filtered")).await;
    assert_eq!(filtered["choices"][0]["finish_reason"], "content_filter");
    let declined = post(&serve, "/v1/chat/completions", chat("refuse")).await;
    let message = &declined["choices"][0]["message"];
    assert_eq!(message["refusal"], "I can't help with that.", "{declined}");
    assert_eq!(message["content"], Value::Null, "{declined}");
    assert_eq!(declined["choices"][0]["finish_reason"], "stop");

    let events = streamed(&serve, json!({"input": "refuse", "stream": true})).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "response.refusal.delta",
        "response.refusal.done",
        "response.completed",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let (_, done) = events
        .iter()
        .find(|(n, _)| n == "response.refusal.done")
        .unwrap();
    assert_eq!(done["refusal"], "I can't help with that.");
    let (_, last) = events.last().unwrap();
    assert_eq!(
        last["response"]["output"][0]["content"][0]["type"], "refusal",
        "{last}"
    );

    let events = streamed(&serve, json!({"input": "long essay", "stream": true})).await;
    let (name, last) = events.last().unwrap();
    assert_eq!(name, "response.incomplete", "{last}");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
}
