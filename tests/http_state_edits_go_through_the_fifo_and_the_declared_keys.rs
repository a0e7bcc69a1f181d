//! `POST /v1/sessions/{u}/{s}/state` sets session state without a turn: an admin any session
//! key of its declared type, a user token only keys declared `editable` on its own sessions.
//! The change is one logged event, written after a running turn (never inside it) and before
//! the messages waiting behind that turn, and the next turn's system prompt is filled from it.

#![cfg(feature = "openai")]

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::fake_openai::{FakeOpenAi, Reply, GOOD_KEY};
use support::harness::{eventually, key, stored_events, within, GateAgent};
use support::http::{code, get, post, TestGateway, ADMIN, ALICE, BOB};
use turnstile::http::HttpConfig;
use turnstile::state::EventKind;
use turnstile::state_keys::{KeyType, Mode, StateKey, StateKeys};
use turnstile::{OpenAiAgent, Runtime};

fn registry() -> StateKeys {
    StateKeys::new(Mode::Strict)
        .declare(StateKey::new("tone", KeyType::String).editable())
        .unwrap()
        .declare(StateKey::new("plan", KeyType::String).with_default("free"))
        .unwrap()
}

const STATE: &str = "/v1/sessions/alice/s1/state";

#[tokio::test]
async fn admins_and_users_set_what_they_may_and_the_next_prompt_uses_it() {
    let fake = FakeOpenAi::start(vec![Reply::text(&["one"]), Reply::text(&["two"])]).await;
    let agent = OpenAiAgent::builder(&fake.base_url, "fake-model")
        .with_api_key(GOOD_KEY)
        .with_system_prompt("Speak {tone}. Plan {plan}.")
        .build()
        .unwrap();
    let builder = Runtime::builder().agent(agent).state_keys(registry());
    let gateway = TestGateway::with(builder, HttpConfig::default());
    let turn = |text: &str| post("/v1/sessions/alice/s1/turns", ALICE, json!({"input": text}));

    // No session yet: refused, and none is made.
    let (status, body) = gateway
        .send(post(STATE, ADMIN, json!({"set": {"tone": "x"}})))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(
        gateway.send(get("/v1/sessions/alice/s1", ADMIN)).await.0,
        StatusCode::NOT_FOUND
    );

    assert_eq!(gateway.send(turn("hello")).await.0, StatusCode::OK);
    let (status, body) = gateway
        .send(post(STATE, ALICE, json!({"set": {"tone": "warmly"}})))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"]["tone"], "warmly");
    assert_eq!(body["state"]["plan"], "free", "declared defaults show");

    // What the user may not set, and what nobody may, leave the state as it was.
    for (token, set, expected) in [
        (ALICE, json!({"plan": "pro"}), StatusCode::FORBIDDEN),
        (BOB, json!({"tone": "coldly"}), StatusCode::FORBIDDEN),
        (ADMIN, json!({"tone": 3}), StatusCode::BAD_REQUEST),
        (ADMIN, json!({"undeclared": 1}), StatusCode::BAD_REQUEST),
        (ADMIN, json!({"user:name": "x"}), StatusCode::BAD_REQUEST),
    ] {
        let (status, body) = gateway.send(post(STATE, token, json!({"set": set}))).await;
        assert_eq!(status, expected, "{set}: {body}");
        assert!(!code(&body).is_empty(), "a typed error: {body}");
    }
    let (status, body) = gateway
        .send(post(STATE, ADMIN, json!({"set": {"plan": "pro"}})))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], json!({"tone": "warmly", "plan": "pro"}));

    // The log says who set what, with the delta on that event.
    let events = stored_events(gateway.store.as_ref(), &key("alice", "s1")).await;
    let notes: Vec<(String, Value)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Note { text } => Some((text.clone(), json!(e.state_delta))),
            _ => None,
        })
        .collect();
    assert_eq!(
        notes,
        [
            (
                "state set by its user: tone".to_owned(),
                json!({"tone": "warmly"})
            ),
            (
                "state set by an admin: plan".to_owned(),
                json!({"plan": "pro"})
            ),
        ]
    );

    // The next turn's prompt is filled from it.
    assert_eq!(gateway.send(turn("again")).await.0, StatusCode::OK);
    let requests = fake.requests();
    let system = |i: usize| requests[i]["messages"][0]["content"].clone();
    assert_eq!(system(0), "Speak . Plan free.");
    assert_eq!(system(1), "Speak warmly. Plan pro.");
}

/// An edit sent while a turn runs waits for that turn to be written — it never lands inside a
/// turn, and its change is applied after the turn's own — then goes ahead of the message that
/// waited behind the turn. Both are put in the session's mailbox (their futures polled once)
/// before the turn is let go, so the order is decided, not raced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_during_a_turn_waits_for_it_and_goes_before_the_next_message() {
    let agent = Arc::new(GateAgent::default());
    let builder = Runtime::builder().agent_arc(agent.clone());
    let gateway = Arc::new(TestGateway::with(builder, HttpConfig::default()));
    let runtime = gateway.runtime().clone();
    let session = key("alice", "s1");
    let turn = |text: &str| post("/v1/sessions/alice/s1/turns", ALICE, json!({"input": text}));
    assert_eq!(gateway.send(turn("first")).await.0, StatusCode::OK);
    let held = tokio::spawn({
        let gateway = gateway.clone();
        async move { gateway.send(turn("hold")).await }
    });
    eventually("the turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;

    let mut after = Box::pin(runtime.call(&session, "after"));
    assert!(
        futures::poll!(&mut after).is_pending(),
        "waits behind the turn"
    );
    let set: turnstile::state::StateDelta = [("mood".to_owned(), json!("calm"))].into();
    let note = turnstile::Entry::Note("set by the test".into());
    let mut edit = Box::pin(runtime.append_between_turns(&session, vec![note], set));
    assert!(futures::poll!(&mut edit).is_pending(), "waits for the turn");
    for _ in 0..100 {
        tokio::task::yield_now().await;
        assert!(
            futures::poll!(&mut edit).is_pending(),
            "not written inside the turn"
        );
    }

    agent.gate.add_permits(1);
    let (status, held) = within(held).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{held}");
    let edited = within(edit).await.expect("the edit is written");
    let after = within(after).await.expect("the waiting message ran");
    let held = held["seq"].as_u64().unwrap();
    assert!(
        held < edited,
        "the turn's output {held} before the edit {edited}"
    );
    let events = stored_events(gateway.store.as_ref(), &session).await;
    let input_of_after = events
        .iter()
        .find(|e| matches!(&e.kind, EventKind::UserInput { text, .. } if text == "after"))
        .map(|e| e.seq)
        .expect("the later message is stored");
    assert!(
        edited < input_of_after && input_of_after < after.seq,
        "the edit {edited} before the later turn {input_of_after}..{}",
        after.seq
    );

    // Over HTTP the same: an edit while a turn runs is answered after it.
    let held = tokio::spawn({
        let gateway = gateway.clone();
        async move { gateway.send(turn("hold again")).await }
    });
    eventually("the second turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 2
    })
    .await;
    let edit = tokio::spawn({
        let gateway = gateway.clone();
        async move {
            gateway
                .send(post(STATE, ADMIN, json!({"set": {"mood": "warm"}})))
                .await
        }
    });
    agent.gate.add_permits(1);
    let (status, turn) = within(held).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{turn}");
    let (status, edited) = within(edit).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["state"]["mood"], "warm");
    assert!(
        edited["seq"].as_u64() > turn["seq"].as_u64(),
        "{edited} after {turn}"
    );
}

/// `GET /v1/state-keys` tells any valid token the declared keys, and which a user may set.
#[tokio::test]
async fn the_declared_keys_are_listed_for_any_token() {
    let builder = Runtime::builder()
        .agent(GateAgent::default())
        .state_keys(registry());
    let gateway = TestGateway::with(builder, HttpConfig::default());
    for token in [ADMIN, ALICE] {
        let (status, body) = gateway.send(get("/v1/state-keys", token)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            body,
            json!({"mode": "strict", "keys": [
                {"name": "plan", "type": "string", "default": "free", "description": "",
                 "editable": false},
                {"name": "tone", "type": "string", "default": null, "description": "",
                 "editable": true},
            ]})
        );
    }
    let (status, _) = gateway.send(get("/v1/state-keys", "not-a-token")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let bare = TestGateway::new(GateAgent::default());
    let (status, body) = bare.send(get("/v1/state-keys", ALICE)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"mode": null, "keys": []}));
}
