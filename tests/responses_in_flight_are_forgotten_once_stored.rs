//! Property: a response is in the service's map of running responses only while its turn runs
//! — streamed, answered once stored, in the background, or refused — so the map is bounded by
//! the turns in flight, and retrieving a response afterwards reads it from the log.

mod support;

use serde_json::json;
use support::harness::*;
use turnstile::responses::{Created, ResponseRequest, Responses};
use turnstile::{EchoAgent, InMemoryStore, Runtime};

#[tokio::test]
async fn the_map_of_running_responses_empties_as_turns_end() {
    let runtime = Runtime::builder()
        .agent(EchoAgent)
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    let responses = Responses::new(runtime, "m");
    let request = |body: serde_json::Value| ResponseRequest::from_json(body).unwrap();
    let mut ids = Vec::new();
    for n in 0..50 {
        let body = match n % 3 {
            0 => json!({"input": format!("plain {n}")}),
            1 => json!({"input": format!("streamed {n}"), "stream": true}),
            _ => json!({"input": format!("background {n}"), "background": true}),
        };
        match within(responses.create("u", request(body), None))
            .await
            .unwrap()
        {
            Created::Finished(finished) => {
                ids.push(within(finished).await.unwrap().id().to_owned())
            }
            Created::Events(mut events) => while within(events.next()).await.is_some() {},
            Created::Background(object) => ids.push(object.id().to_owned()),
            _ => unreachable!("a new kind of answer"),
        }
    }
    let refused = responses
        .create(
            "u",
            request(json!({"input": "x", "conversation": "conv_missing"})),
            None,
        )
        .await;
    if let Ok(Created::Finished(finished)) = refused {
        assert!(within(finished).await.is_err(), "no such conversation");
    }
    eventually("every running response is forgotten", || {
        responses.running() == 0
    })
    .await;
    for id in ids {
        let object = within(responses.retrieve("u", &id)).await.unwrap();
        assert_eq!(object.status(), "completed", "{id}");
    }
}
