//! End to end on a real socket (127.0.0.1:0): concurrent clients run their turns in parallel,
//! an event stream delivers chunks as the agent emits them, and an interrupt from another
//! connection cuts a streamed turn short.

#![cfg(feature = "http")]

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{json, Value};
use support::harness::*;
use support::http::*;
use turnstile::{http::HttpConfig, Runtime};

const CLIENTS: usize = 8;

fn served_gateway(agent: Arc<GateAgent>) -> TestGateway {
    TestGateway::with(Runtime::builder().agent_arc(agent), HttpConfig::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_run_in_parallel_and_each_gets_its_answer() {
    // Property: turns of different sessions from different connections run at the same time
    // (all are inside the agent at once), and each client gets its own answer.
    let agent = Arc::new(GateAgent::default());
    let gw = served_gateway(agent.clone());
    let served = Served::start(gw.gateway.clone()).await;
    let client = reqwest::Client::new();
    let calls: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let request = client_post(
                &client,
                &served,
                &format!("/v1/sessions/alice/parallel-{i}/turns"),
                ALICE,
                json!({ "input": format!("hold {i}") }),
            );
            tokio::spawn(async move {
                let response = request.send().await.expect("send");
                (
                    response.status(),
                    response.json::<Value>().await.expect("json"),
                )
            })
        })
        .collect();
    eventually("every turn is inside the agent at once", || {
        agent.entered.load(Ordering::SeqCst) == CLIENTS
    })
    .await;
    agent.gate.add_permits(CLIENTS);
    for (i, call) in calls.into_iter().enumerate() {
        let (status, body) = within(call).await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["output"], format!("done: hold {i}"));
    }
    assert!(served.stop().await.clean);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_turn_is_interrupted_from_another_connection() {
    // Property: the first chunk arrives while the turn still runs; an interrupt sent on another
    // connection answers {"interrupted": true}, and the stream ends with one `outcome` event,
    // interrupted, whose output is what was streamed.
    let agent = Arc::new(GateAgent::default());
    let gw = served_gateway(agent.clone());
    let served = Served::start(gw.gateway.clone()).await;
    let client = reqwest::Client::new();
    let response = client_post(
        &client,
        &served,
        "/v1/sessions/alice/live/turns",
        ALICE,
        json!({"input": "hold on"}),
    )
    .header("accept", "text/event-stream")
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut events = EventReader::new(response);
    let (name, data) = within(events.next()).await.expect("a first event");
    assert_eq!(
        (name.as_str(), data["text"].as_str()),
        ("chunk", Some("working on hold on"))
    );
    // The agent counts itself in just after its chunk: wait for it, so that the interrupt
    // below finds the turn parked at its gate.
    eventually("the turn to wait at its gate", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;

    let interrupt = client
        .post(served.url("/v1/sessions/alice/live/interrupt"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(
        interrupt.json::<Value>().await.unwrap(),
        json!({"interrupted": true})
    );

    let (name, outcome) = within(events.next()).await.expect("the outcome");
    assert_eq!(name, "outcome");
    assert_eq!(outcome["outcome"], "interrupted");
    assert_eq!(outcome["reason"], "requested");
    assert_eq!(outcome["output"], "working on hold on");
    assert!(
        within(events.next()).await.is_none(),
        "the outcome is the last event"
    );

    // The history agrees with what the client saw.
    let session = client
        .get(served.url("/v1/sessions/alice/live"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let last = session["events"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["kind"]["text"], "working on hold on", "{last}");
    assert!(served.stop().await.clean);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_messages_stream_over_the_socket_too() {
    // Property: a channel message asked as an event stream ends with an outcome that names the
    // session it went to.
    let agent = Arc::new(GateAgent::default());
    let gw = served_gateway(agent);
    let served = Served::start(gw.gateway.clone()).await;
    let client = reqwest::Client::new();
    let body = json!({"chat": "C1", "thread": "T1", "user": "U1", "input": "hello"});
    let response = client_post(
        &client,
        &served,
        "/v1/channels/slack/messages",
        SLACK_BOT,
        body,
    )
    .header("accept", "text/event-stream")
    .send()
    .await
    .unwrap();
    let mut events = EventReader::new(response);
    let mut names = Vec::new();
    let mut last = Value::Null;
    while let Some((name, data)) = within(events.next()).await {
        names.push(name);
        last = data;
    }
    assert_eq!(names, ["chunk", "outcome"]);
    assert_eq!(last["session"]["session"], "slack|C1|T1");
    assert_eq!(last["output"], "done: hello");
    assert!(served.stop().await.clean);
}
