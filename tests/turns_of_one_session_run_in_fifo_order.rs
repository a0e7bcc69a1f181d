//! Contract 1: turns for one key start in the order their calls entered the runtime and never
//! overlap.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use support::harness::*;
use turnstile::state::InputDisposition;
use turnstile::{InMemoryStore, OutcomeKind, Runtime, Store};

/// 100 concurrent calls on one key: the stored history is exactly the entry order, and the
/// agent never saw two turns of that key at once.
#[tokio::test(start_paused = true)]
async fn one_hundred_concurrent_callers_are_served_in_entry_order() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let agent = Arc::new(RecordingAgent::with_latency(Duration::from_millis(5)));
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .with_max_queue(100)
        .build()
        .unwrap();
    let k = key("alice", "fifo");
    // `join_all` polls its futures in order the first time, and a call takes its place in the
    // session's FIFO on its first poll: so index order is entry order.
    let calls = (0..100).map(|i| rt.call(&k, format!("m{i:03}")));
    let outcomes = within(join_all(calls)).await;
    for outcome in &outcomes {
        assert_eq!(outcome.as_ref().unwrap().kind, OutcomeKind::Completed);
    }
    let expected: Vec<String> = (0..100).map(|i| format!("m{i:03}")).collect();
    let stored: Vec<String> = stored_inputs(store.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, disposition)| {
            assert_eq!(disposition, InputDisposition::Answered);
            text
        })
        .collect();
    assert_eq!(stored, expected, "stored history follows entry order");
    assert_eq!(
        agent.started_inputs(&k),
        expected,
        "turns started in entry order"
    );
    assert_eq!(
        agent.overlaps.load(Ordering::SeqCst),
        0,
        "turns never overlap"
    );
    assert_dense(&stored_events(store.as_ref(), &k).await);
    // Each caller got the answer to its own message.
    for (i, outcome) in outcomes.into_iter().enumerate() {
        assert_eq!(outcome.unwrap().output, format!("echo: m{i:03}"));
    }
}

/// Callers on many tasks of a multi-threaded runtime: entry order is taken under a lock that
/// covers the call's first poll; history order matches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_on_many_threads_are_served_in_entry_order() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let agent = Arc::new(RecordingAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("bob", "threads");
    let entry = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (rt, k, entry) = (rt.clone(), k.clone(), entry.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                let input = format!("t{t}-{i}");
                let mut call = Box::pin(rt.call(&k, input.clone()));
                {
                    let mut order = entry.lock().await;
                    // The first poll enqueues the message; record it in the same critical section.
                    let first = futures::poll!(call.as_mut());
                    order.push(input);
                    if let std::task::Poll::Ready(result) = first {
                        result.unwrap();
                        continue;
                    }
                }
                call.await.unwrap();
            }
        }));
    }
    for task in tasks {
        within(task).await.unwrap();
    }
    let expected = entry.lock().await.clone();
    assert_eq!(expected.len(), 200);
    let stored: Vec<String> = stored_inputs(store.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(stored, expected);
    assert_eq!(agent.overlaps.load(Ordering::SeqCst), 0);
}
