//! Streaming: chunks arrive as the agent emits them, then the outcome; a dropped stream does not
//! cancel its turn unless the caller asked for that.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use support::harness::*;
use turnstile::state::{EventKind, InterruptReason, OutputStatus};
use turnstile::{
    CallOptions, InMemoryStore, MockLlmAgent, OutcomeKind, Runtime, Store, StreamEvent,
};

fn runtime(store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent(
            MockLlmAgent::new()
                .with_latency(Duration::from_millis(400))
                .with_chunks(4),
        )
        .store_arc(store)
        .build()
        .unwrap()
}

async fn last_output(store: &dyn Store, k: &turnstile::SessionKey) -> (String, OutputStatus) {
    let events = stored_events(store, k).await;
    events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::AgentOutput { text, status, .. } => Some((text.clone(), *status)),
            _ => None,
        })
        .expect("an output is stored")
}

#[tokio::test(start_paused = true)]
async fn chunks_arrive_in_order_and_the_outcome_comes_last() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(store.clone());
    let k = key("wes", "stream");
    let stream = rt
        .call_streaming(&k, "hello there", CallOptions::default())
        .await
        .unwrap();
    let events: Vec<StreamEvent> = within(stream.collect()).await;
    let (last, chunks) = events.split_last().unwrap();
    let text: String = chunks
        .iter()
        .map(|e| match e {
            StreamEvent::Chunk(c) => c.clone(),
            other => panic!("only chunks come before the outcome: {other:?}"),
        })
        .collect();
    assert_eq!(chunks.len(), 4);
    let StreamEvent::Outcome(Ok(outcome)) = last else {
        panic!("expected an outcome, got {last:?}");
    };
    assert_eq!(outcome.kind, OutcomeKind::Completed);
    assert_eq!(outcome.output, text);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_stream_does_not_cancel_its_turn() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(store.clone());
    let k = key("xia", "gone");
    let mut stream = rt
        .call_streaming(&k, "hi", CallOptions::default())
        .await
        .unwrap();
    assert!(matches!(
        within(stream.next()).await,
        Some(StreamEvent::Chunk(_))
    ));
    drop(stream);
    // The session still finishes the turn: the next call queues behind it and sees it stored.
    rt.call(&k, "next").await.unwrap();
    let inputs = stored_inputs(store.as_ref(), &k).await;
    assert_eq!(inputs.len(), 2);
    let events = stored_events(store.as_ref(), &k).await;
    assert!(matches!(
        events[1].kind,
        EventKind::AgentOutput {
            status: OutputStatus::Final,
            ..
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_stream_cancels_its_turn_when_asked() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(store.clone());
    let k = key("yan", "cancel");
    let mut stream = rt
        .call_streaming(&k, "hi", CallOptions::default().with_cancel_on_drop())
        .await
        .unwrap();
    let Some(StreamEvent::Chunk(first)) = within(stream.next()).await else {
        panic!("expected a chunk");
    };
    drop(stream);
    eventually_stored(store.as_ref(), &k, 1).await;
    let (text, status) = last_output(store.as_ref(), &k).await;
    assert_eq!(
        status,
        OutputStatus::Interrupted(InterruptReason::Requested)
    );
    assert_eq!(text, first);
}
