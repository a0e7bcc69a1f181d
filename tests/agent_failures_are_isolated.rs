//! Contract 8: a panic or error in one turn fails that turn only; the session goes on from its
//! last persisted state and other sessions never notice. The failed turn is recorded as failed
//! (its input and a `turn_failed` event with the reason), with none of its state writes.

mod support;

use std::sync::Arc;

use futures::future::join_all;
use serde_json::json;
use support::harness::*;
use turnstile::state::EventKind;
use turnstile::{Error, FailureKind, InMemoryStore, Runtime, Store};

#[tokio::test]
async fn a_panicking_turn_fails_alone_and_the_session_goes_on() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(FlakyAgent)
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("ivan", "flaky");
    rt.call(&k, "one").await.unwrap();
    let others: Vec<_> = (0..20).map(|i| key("judy", &format!("s{i}"))).collect();
    let (panicked, neighbours) = tokio::join!(
        rt.call(&k, "panic"),
        join_all(others.iter().map(|o| rt.call(o, "fine")))
    );
    match panicked {
        Err(Error::AgentFailed {
            key, message, kind, ..
        }) => {
            assert_eq!(key, k);
            assert!(message.contains("on purpose"), "{message}");
            assert_eq!(
                kind,
                FailureKind::Agent,
                "an unclassified failure is the agent's"
            );
        }
        other => panic!("expected AgentFailed, got {other:?}"),
    }
    assert!(
        neighbours.iter().all(Result::is_ok),
        "other sessions never notice"
    );
    let failed = rt.call(&k, "fail").await;
    assert!(
        matches!(failed, Err(Error::AgentFailed { .. })),
        "{failed:?}"
    );
    let next = rt.call(&k, "two").await.unwrap();
    assert_eq!(next.output, "echo: two");
    let inputs: Vec<String> = stored_inputs(store.as_ref(), &k)
        .await
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(
        inputs,
        ["one", "panic", "fail", "two"],
        "failed turns keep their input"
    );
    let failures: Vec<(String, String)> = stored_events(store.as_ref(), &k)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::TurnFailed { code, reason, .. } => Some((code, reason)),
            _ => None,
        })
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures.iter().all(|(code, _)| code == "agent_failed"));
    // The history says what kind of failure it was; the agent's own words (a panic's message,
    // an error's text) are for operators and the embedder, not for whoever reads the history.
    assert!(
        failures
            .iter()
            .all(|(_, reason)| reason == "the agent failed"),
        "{failures:?}"
    );
    let view = rt.state(&k).await.unwrap().unwrap();
    assert_eq!(view.record.stats.failed, 2);
    assert_eq!(
        view.record.stats.turns, 2,
        "failed turns are not answered turns"
    );
    let view = rt.state(&k).await.unwrap().unwrap();
    assert_eq!(view.record.state["last"], json!("two"));
    assert_eq!(
        rt.stats().unexpected_stops,
        0,
        "the actor itself never died"
    );
    assert_dense(&stored_events(store.as_ref(), &k).await);
}
