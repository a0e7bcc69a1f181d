//! A model's reply reaches an HTTP client token by token: each delta the model server streams is
//! one `chunk` event on `serve`'s event stream, sent before the model has finished, and the whole
//! reply is the outcome and the stored output. The usage the stream reports lands in the
//! session's statistics.

#![cfg(all(feature = "openai", feature = "http"))]

mod support;

use std::time::Duration;

use serde_json::json;
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use support::http::{client_post, EventReader, Served, TestGateway, ALICE};
use turnstile::OpenAiAgent;

#[tokio::test]
async fn deltas_arrive_as_chunk_events_before_the_model_is_done() {
    let deltas = ["The ", "answer ", "is ", "forty-", "two."];
    let fake = FakeOpenAi::start(vec![Reply::Text {
        deltas: deltas.iter().map(|d| (*d).to_owned()).collect(),
        // Long enough that the client holds the first chunk well before the last is sent.
        delay: Duration::from_millis(150),
        usage: Some((21, 5)),
    }])
    .await;
    let agent = OpenAiAgent::builder(&fake.base_url, "fake-model")
        .without_api_key()
        .build()
        .unwrap();
    let test = TestGateway::new(agent);
    let runtime = test.runtime().clone();
    let served = Served::start(test.gateway).await;
    let client = reqwest::Client::new();
    let response = within(
        client_post(
            &client,
            &served,
            "/v1/sessions/alice/s1/turns",
            ALICE,
            json!({"input": "?"}),
        )
        .header("accept", "text/event-stream")
        .send(),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let mut reader = EventReader::new(response);

    let (name, first) = within(reader.next()).await.expect("a first event");
    assert_eq!((name.as_str(), &first["text"]), ("chunk", &json!("The ")));
    assert!(
        fake.try_body_end().is_none(),
        "the first chunk reached the client while the model was still streaming"
    );
    let mut chunks = vec![first["text"].as_str().unwrap().to_owned()];
    let outcome = loop {
        match within(reader.next())
            .await
            .expect("the stream ends with an outcome")
        {
            (name, data) if name == "chunk" => chunks.push(data["text"].as_str().unwrap().into()),
            (name, data) => {
                assert_eq!(name, "outcome", "{data}");
                break data;
            }
        }
    };
    assert_eq!(chunks, deltas);
    assert_eq!(outcome["outcome"], "completed");
    assert_eq!(outcome["output"], deltas.concat());

    let view = runtime
        .state(&key("alice", "s1"))
        .await
        .unwrap()
        .expect("the session exists");
    assert_eq!(view.record.stats.input_tokens, 21);
    assert_eq!(view.record.stats.output_tokens, 5);
    served.stop().await;
}
