//! Property: a session whose load from the store never returns does not hold its callers: after
//! `activation_timeout` every waiting call is answered with an activation error that names the
//! store as unavailable, the slot is freed, and a later call activates the session afresh once
//! the store answers again. Breaking it: without the timeout the callers wait for ever (the test
//! times out in `within`).

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use turnstile::store::FaultyStore;
use turnstile::{CallOptions, EchoAgent, Error, InMemoryStore, Runtime, StoreError};

#[tokio::test(start_paused = true)]
async fn a_load_that_never_returns_is_answered_after_the_activation_timeout() {
    let store = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store.clone())
        .with_activation_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let k = key("ines", "stuck");
    // A load that would take a day: the store is stuck.
    store.delay_loads(Some(Duration::from_secs(86_400)));
    let calls = spawn_calls(&rt, &k, &["a", "b", "c"], CallOptions::default());
    for answer in within(calls).await.unwrap() {
        match answer {
            Err(Error::Activation { source, .. }) => {
                assert!(
                    matches!(source.as_ref(), StoreError::Unavailable { detail, .. }
                        if detail.contains("activation_timeout")),
                    "{source}"
                );
            }
            other => panic!("a stuck load must answer its callers: {other:?}"),
        }
    }
    eventually("the slot to be freed", || rt.live_sessions() == 0).await;
    assert_eq!(
        rt.stats().activation_failures,
        1,
        "one activation, all callers"
    );
    // The store answers again: the next call activates the session afresh.
    store.delay_loads(None);
    let outcome = within(rt.call(&k, "again")).await.unwrap();
    assert_eq!(outcome.output, "again");
    rt.shutdown().await;
}

#[tokio::test]
async fn the_activation_timeout_must_be_positive() {
    let built = Runtime::builder()
        .agent(EchoAgent)
        .store(InMemoryStore::new())
        .with_activation_timeout(Duration::ZERO)
        .build();
    let err = built.unwrap_err().to_string();
    assert!(err.contains("activation_timeout"), "{err}");
}
