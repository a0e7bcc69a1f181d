//! What the model is sent: the system prompt filled from scoped state, the `<memory-context>`
//! block, the window's events, then every input of a merged turn; the API key as a bearer token,
//! extra headers, temperature and max tokens; `stream` with usage asked for.

#![cfg(feature = "openai")]

mod support;

use std::sync::Arc;

use serde_json::{json, Value};
use support::fake_openai::{FakeOpenAi, Reply, GOOD_KEY};
use support::harness::*;
use turnstile::state::{Author, Event, EventKind, InputDisposition, OutputStatus, ScopedState};
use turnstile::{Agent, OpenAiAgent, TurnContext};

fn event(seq: u64, author: Author, kind: EventKind) -> Event {
    Event::new(seq, author, 0, kind)
}

#[tokio::test]
async fn the_request_holds_prompt_memory_window_and_merged_inputs_in_order() {
    let fake = FakeOpenAi::start(vec![Reply::text(&["fine"])]).await;
    let agent = OpenAiAgent::builder(&fake.base_url, "fake-model")
        .with_api_key(GOOD_KEY)
        .with_header("x-gateway-route", "blue")
        .with_system_prompt("You help {user:name}. Tier {app:tier}. Mood {temp:none}.")
        .with_temperature(0.25)
        .with_max_tokens(64)
        .build()
        .unwrap();
    let mut state = ScopedState::default();
    state.user.insert("name".into(), json!("Ada"));
    state.app.insert("tier".into(), json!(3));
    let history = vec![
        event(
            1,
            Author::User,
            EventKind::UserInput {
                text: "earlier question".into(),
                disposition: InputDisposition::Answered,
            },
        ),
        event(
            2,
            Author::Agent,
            EventKind::AgentOutput {
                text: "earlier answer".into(),
                status: OutputStatus::Final,
                duration_ms: 1,
                usage: None,
            },
        ),
    ];
    let (turn, recording) = TurnContext::builder(key("ada", "prompt"))
        .history(history)
        .summary("we talked about owls")
        .state(Arc::new(state))
        .input("first")
        .input("second")
        .build();
    let reply = within(agent.run(turn)).await.unwrap();
    assert_eq!(reply, "fine");
    assert_eq!(recording.output(), "fine");

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0];
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["max_tokens"], 64);
    let messages = body["messages"].as_array().unwrap();
    let pairs: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(pairs[0], ("system", "You help Ada. Tier 3. Mood ."));
    assert_eq!(pairs[1].0, "system");
    assert!(pairs[1].1.starts_with("<memory-context>") && pairs[1].1.contains("owls"));
    assert_eq!(
        pairs[2..],
        [
            ("user", "earlier question"),
            ("assistant", "earlier answer"),
            ("user", "first"),
            ("user", "second"),
        ]
    );
    let headers = &fake.headers()[0];
    assert_eq!(
        headers["authorization"],
        format!("Bearer {GOOD_KEY}").as_str()
    );
    assert_eq!(headers["x-gateway-route"], "blue");
    assert!(
        body.get("tools").is_none(),
        "no tools registered, none sent"
    );
    let _: &Value = body;
}
