//! In `strict` mode a turn whose delta writes an undeclared key, or a declared key with a value
//! of the wrong type, fails with `AgentFailed` naming the key, and none of that turn is stored
//! but its input and the failure: no output, none of its other (valid) writes. A turn of
//! declared, well-typed writes goes through.

mod support;

use std::sync::Arc;

use turnstile::state::EventKind;
use turnstile::state_keys::{KeyType, Mode, StateKey, StateKeys};
use turnstile::{Error, InMemoryStore, Runtime, Store};

use support::artifacts::StateAgent;
use support::harness::{key, stored_events};

fn registry() -> StateKeys {
    StateKeys::new(Mode::Strict)
        .declare(StateKey::new("topic", KeyType::String))
        .unwrap()
        .declare(StateKey::new("user:visits", KeyType::Integer))
        .unwrap()
}

#[tokio::test]
async fn an_undeclared_or_mistyped_write_fails_the_turn_and_stores_none_of_it() {
    let store = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(StateAgent)
        .store_arc(store.clone())
        .state_keys(registry())
        .build()
        .expect("runtime");
    let k = key("ada", "s1");
    let cases = [
        (r#"{"topic": "rust", "tpoic": "typo"}"#, "tpoic"),
        (
            r#"{"topic": "rust", "user:visits": "three"}"#,
            "user:visits",
        ),
    ];
    for (input, named) in cases {
        match rt.call(&k, input).await {
            Err(Error::AgentFailed { message, .. }) => {
                assert!(message.contains(named), "{message}");
                assert!(
                    message.contains("none of its output or state writes were stored"),
                    "{message}"
                );
            }
            other => panic!("expected AgentFailed naming {named}, got {other:?}"),
        }
    }
    let stored = stored_events(store.as_ref(), &k).await;
    let kinds: Vec<&str> = stored
        .iter()
        .map(|e| match &e.kind {
            EventKind::UserInput { .. } => "input",
            EventKind::TurnFailed { .. } => "failed",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["input", "failed", "input", "failed"],
        "only the inputs and the failures are stored"
    );
    let view = rt.state(&k).await.expect("state");
    assert!(
        view.is_none_or(|v| !v.record.state.contains_key("topic")),
        "the valid write of a refused turn is not kept either"
    );

    rt.call(
        &k,
        r#"{"topic": "rust", "user:visits": 3, "temp:scratch": 1}"#,
    )
    .await
    .expect("declared, well-typed writes (and temp: keys) pass");
    let view = rt.state(&k).await.expect("state").expect("stored");
    assert_eq!(view.record.state["topic"], "rust");
    assert_eq!(view.user_state["visits"], 3);
    assert_eq!(rt.state_keys().expect("registry").violations(), 2);
    assert_eq!(store.load(&k, 10).await.unwrap().events.len(), 6);
}
