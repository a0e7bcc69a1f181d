//! Contract 2: when `call` returns `Ok`, the store already holds the turn.

mod support;

use std::sync::Arc;

use support::harness::*;
use turnstile::state::EventKind;
use turnstile::{EchoAgent, MemoryStore, Runtime, Store};

/// Every acknowledged turn is in the store at the moment `call` returns, output included, at
/// the sequence number the outcome names.
#[tokio::test]
async fn the_store_holds_a_turn_before_its_call_returns() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("carol", "durable");
    for i in 0..20 {
        let outcome = rt.call(&k, format!("turn {i}")).await.unwrap();
        let events = stored_events(store.as_ref(), &k).await;
        let answer = events
            .iter()
            .find(|e| e.seq == outcome.seq)
            .expect("the acknowledged output is stored");
        match &answer.kind {
            EventKind::AgentOutput { text, .. } => assert_eq!(text, &format!("turn {i}")),
            other => panic!("seq {} is not an output: {other:?}", outcome.seq),
        }
        assert_eq!(events.len(), 2 * (i + 1));
    }
}
