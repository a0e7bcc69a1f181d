//! Property: a response is in the service's map of running responses only while its turn runs
//! — streamed, answered once stored, in the background, or refused — so the map is bounded by
//! the turns in flight, and retrieving a response afterwards reads it from the log.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::harness::*;
use turnstile::responses::{new_id, Created, ItemOrder, ResponseId, ResponseRequest, Responses};
use turnstile::{EchoAgent, InMemoryStore, Runtime, SessionKey};

/// The OpenAI rules over a runtime whose agent echoes, on a memory store.
fn echo_responses() -> Responses {
    let runtime = Runtime::builder()
        .agent(EchoAgent)
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    Responses::new(runtime, "m")
}

#[tokio::test]
async fn the_map_of_running_responses_empties_as_turns_end() {
    let responses = echo_responses();
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

/// A plain response is waited on by the request that made it; one whose request goes away —
/// before it waited at all, or while its turn runs — still runs to its end, is stored, and
/// leaves the map.
#[tokio::test]
async fn a_plain_response_whose_request_went_away_still_ends_and_is_stored() {
    let responses = echo_responses();
    let mut conversations = Vec::new();
    for (n, waited) in [(0, false), (1, true), (2, false), (3, true)] {
        let conversation =
            within(responses.create_conversation("u", &[], Default::default(), None))
                .await
                .unwrap();
        let body = json!({"input": format!("gone {n}"), "conversation": conversation.id});
        let created =
            within(responses.create("u", ResponseRequest::from_json(body).unwrap(), None))
                .await
                .unwrap();
        let Created::Finished(mut finished) = created else {
            panic!("a plain response is answered once stored");
        };
        if waited {
            // Waited on once: its turn, admitted by `create`, runs on the session's task.
            assert!(futures::poll!(&mut finished).is_pending());
        }
        drop(finished);
        conversations.push((n, conversation.id));
    }
    eventually("every running response is forgotten", || {
        responses.running() == 0
    })
    .await;
    for (n, id) in conversations {
        let page = within(responses.items("u", &id, 10, None, ItemOrder::Asc))
            .await
            .unwrap();
        let said: Vec<_> = page
            .data
            .iter()
            .map(|item| (item["role"].as_str(), item["content"][0]["text"].as_str()))
            .collect();
        let text = format!("gone {n}");
        assert_eq!(
            said,
            [
                (Some("user"), Some(text.as_str())),
                (Some("assistant"), Some(text.as_str()))
            ],
            "{id}"
        );
    }
}

/// At capacity a response's turn waits for a free slot. A plain one waits inside its
/// `Finished`: a request that goes away hands the wait on, and the turn runs once a slot frees.
/// A streamed one waits inside `create`: a request that goes away then takes it out of the map
/// (nothing of it runs, and nothing would ever end it).
#[tokio::test]
async fn a_response_whose_request_went_away_while_it_waited_for_a_slot_is_not_left_running() {
    let agent = Arc::new(GateAgent::default());
    let runtime = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .with_capacity(1)
        .with_capacity_wait(Duration::from_secs(30))
        .build()
        .unwrap();
    let responses = Responses::new(runtime.clone(), "m");
    // The one slot is held by a running turn.
    let busy = tokio::spawn({
        let runtime = runtime.clone();
        async move {
            runtime
                .call(&SessionKey::new("u", "busy").unwrap(), "hold")
                .await
        }
    });
    eventually("the busy turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;

    let streamed = json!({"input": "streamed", "stream": true});
    let streamed = ResponseRequest::from_json(streamed).unwrap();
    let gone = tokio::time::timeout(
        Duration::from_millis(100),
        responses.create("u", streamed, None),
    )
    .await;
    assert!(gone.is_err(), "a streamed response waits for its slot");
    assert_eq!(responses.running(), 0, "the streamed response left the map");

    let plain = ResponseRequest::from_json(json!({"input": "plain"})).unwrap();
    let created = within(responses.create("u", plain, Some("k")))
        .await
        .unwrap();
    let Created::Finished(finished) = created else {
        panic!("a plain response is answered once stored");
    };
    assert_eq!(responses.running(), 1);
    drop(finished);
    agent.gate.add_permits(1);
    within(busy).await.unwrap().unwrap();
    eventually(
        "the plain response ran once a slot freed, and left the map",
        || responses.running() == 0,
    )
    .await;
    let seed = "u\0k";
    let id = ResponseId::new(&new_id("conv_", Some(seed)), Some(seed)).to_string();
    let object = within(responses.retrieve("u", &id)).await.unwrap();
    assert_eq!(object.status(), "completed", "{:?}", object.to_value());
}
