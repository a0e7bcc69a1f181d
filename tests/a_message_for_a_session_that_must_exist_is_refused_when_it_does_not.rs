//! Property: a message sent with `CallOptions::existing_only` to a session with no event is
//! refused with `NotFound` by the session itself, and nothing of it runs or is stored; once the
//! session has an event (a turn, or an append), such messages run as any other.

mod support;

use std::sync::Arc;

use support::harness::*;
use turnstile::{CallOptions, EchoAgent, Entry, Error, InMemoryStore, Runtime, Store};

#[tokio::test]
async fn a_session_that_must_exist_is_not_started_by_a_message() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("eve", "must-exist");
    let existing = CallOptions::default().existing_only();
    let refused = within(rt.call_with(&k, "hi", existing.clone())).await;
    assert!(
        matches!(&refused, Err(Error::NotFound { key }) if *key == k),
        "{refused:?}"
    );
    assert!(stored_events(store.as_ref(), &k).await.is_empty());
    within(rt.append(&k, vec![Entry::Note("made".into())], Default::default()))
        .await
        .unwrap();
    let answered = within(rt.call_with(&k, "hi", existing)).await.unwrap();
    assert_eq!(answered.output, "hi");
    assert_eq!(stored_events(store.as_ref(), &k).await.len(), 3);
}
