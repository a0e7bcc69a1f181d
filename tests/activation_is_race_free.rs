//! Contract 3: concurrent first calls for one key cause exactly one activation and one load.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::future::join_all;
use support::harness::*;
use turnstile::{EchoAgent, InMemoryStore, Runtime};

/// 1,000 concurrent first calls on one key: one activation, one store load, 1,000 turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_first_calls_activate_once() {
    let store = Arc::new(CountingStore::new(Arc::new(InMemoryStore::new())));
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store.clone())
        .with_max_queue(1_000)
        .build()
        .unwrap();
    let k = key("dave", "hot");
    let callers = (0..1_000).map(|i| {
        let (rt, k) = (rt.clone(), k.clone());
        tokio::spawn(async move { rt.call(&k, format!("m{i}")).await })
    });
    for result in within(join_all(callers)).await {
        result.unwrap().unwrap();
    }
    assert_eq!(rt.stats().activations, 1, "exactly one activation");
    assert_eq!(store.loads.load(Ordering::SeqCst), 1, "exactly one load");
    let events = stored_events(store.as_ref(), &k).await;
    assert_eq!(events.len(), 2_000);
    assert_dense(&events);
}
