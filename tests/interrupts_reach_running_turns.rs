//! Contract 4: `interrupt` cancels only that session's running turn at its next await point,
//! without waiting behind the mailbox; the partial output is kept and marked; the caller gets an
//! `Interrupted` outcome.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use futures::StreamExt;
use support::harness::*;
use tokio::time::Instant;
use turnstile::state::{EventKind, InterruptReason, OutputStatus};
use turnstile::{
    CallOptions, InMemoryStore, MockLlmAgent, OutcomeKind, Runtime, Store, StreamEvent,
};

/// A 10-second mock-LLM turn interrupted after two chunks: the caller sees `Interrupted` at once
/// (no time passes), carrying exactly the chunks streamed so far, and the history keeps them.
#[tokio::test(start_paused = true)]
async fn an_interrupt_cuts_a_long_turn_short_within_milliseconds() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(
            MockLlmAgent::new()
                .with_latency(Duration::from_secs(10))
                .with_chunks(10),
        )
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("mia", "long");
    let mut stream = rt
        .call_streaming(&k, "tell me everything", CallOptions::default())
        .await
        .unwrap();
    let mut chunks = Vec::new();
    while chunks.len() < 2 {
        match within(stream.next()).await {
            Some(StreamEvent::Chunk(c)) => chunks.push(c),
            other => panic!("expected a chunk, got {other:?}"),
        }
    }
    let interrupted_at = Instant::now();
    assert!(rt.interrupt(&k), "a turn was running");
    let outcome = loop {
        match within(stream.next()).await {
            Some(StreamEvent::Outcome(outcome)) => break outcome.unwrap(),
            Some(StreamEvent::Chunk(c)) => chunks.push(c),
            Some(other) => panic!("the mock agent calls no tools: {other:?}"),
            None => panic!("stream ended without an outcome"),
        }
    };
    assert!(
        interrupted_at.elapsed() < Duration::from_millis(5),
        "took {:?}",
        interrupted_at.elapsed()
    );
    assert_eq!(
        outcome.kind,
        OutcomeKind::Interrupted(InterruptReason::Requested)
    );
    assert_eq!(
        outcome.output,
        chunks.concat(),
        "partial output is what was streamed"
    );
    let events = stored_events(store.as_ref(), &k).await;
    match &events.last().unwrap().kind {
        EventKind::AgentOutput { text, status, .. } => {
            assert_eq!(text, &chunks.concat());
            assert_eq!(
                *status,
                OutputStatus::Interrupted(InterruptReason::Requested)
            );
        }
        other => panic!("last event is not the output: {other:?}"),
    }
    assert!(!rt.interrupt(&k), "nothing runs any more");
    let view = rt.state(&k).await.unwrap().unwrap();
    assert!(
        !format!("{:?}", view.record).contains("cancel"),
        "the interrupt flag itself is never persisted"
    );
}

/// Interrupting an idle session, or one that is not live, is a no-op that says so.
#[tokio::test]
async fn interrupting_an_idle_session_does_nothing() {
    let rt = Runtime::builder()
        .agent(MockLlmAgent::new())
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    let k = key("nina", "idle");
    assert!(!rt.interrupt(&k), "not live");
    rt.call(&k, "hi").await.unwrap();
    assert!(!rt.interrupt(&k), "live but idle");
    let next = rt.call(&k, "again").await.unwrap();
    assert_eq!(next.kind, OutcomeKind::Completed, "no interrupt lingers");
}

/// Interrupting half of 1,000 busy sessions never touches the other half.
#[tokio::test(start_paused = true)]
async fn interrupting_half_of_a_thousand_busy_sessions_spares_the_rest() {
    let agent = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    let keys: Vec<_> = (0..1_000).map(|i| key("olga", &format!("s{i}"))).collect();
    let calls: Vec<_> = keys
        .iter()
        .map(|k| {
            let (rt, k) = (rt.clone(), k.clone());
            tokio::spawn(async move { rt.call(&k, "hold").await })
        })
        .collect();
    eventually("all turns running", || {
        agent.entered.load(Ordering::SeqCst) == 1_000
    })
    .await;
    for k in keys.iter().step_by(2) {
        assert!(rt.interrupt(k));
    }
    agent.gate.add_permits(500);
    let outcomes = within(join_all(calls)).await;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let outcome = outcome.unwrap().unwrap();
        if i % 2 == 0 {
            assert_eq!(
                outcome.kind,
                OutcomeKind::Interrupted(InterruptReason::Requested)
            );
            assert_eq!(outcome.output, "working on hold");
        } else {
            assert_eq!(
                outcome.kind,
                OutcomeKind::Completed,
                "session {i} was touched"
            );
            assert_eq!(outcome.output, "done: hold");
        }
    }
    assert_eq!(rt.stats().interrupts, 500);
}

/// An interrupt racing with a turn that is just finishing: whichever wins, the caller's outcome
/// and the stored history agree, and the log stays dense with one output per turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_racing_the_end_of_a_turn_leaves_a_consistent_history() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(
            MockLlmAgent::new()
                .with_latency(Duration::from_micros(200))
                .with_chunks(2),
        )
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("pia", "race");
    let mut kinds = Vec::new();
    for i in 0..200u64 {
        let call = tokio::spawn({
            let (rt, k) = (rt.clone(), k.clone());
            async move { rt.call(&k, format!("m{i}")).await }
        });
        // Spin a varying number of yields so the interrupt lands before, during or after the end.
        for _ in 0..(i % 40) {
            tokio::task::yield_now().await;
        }
        rt.interrupt(&k);
        kinds.push(within(call).await.unwrap().unwrap().kind);
    }
    let events = stored_events(store.as_ref(), &k).await;
    assert_dense(&events);
    let stored: Vec<OutcomeKind> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AgentOutput { status, .. } => Some(match status {
                OutputStatus::Final => OutcomeKind::Completed,
                OutputStatus::Interrupted(r) => OutcomeKind::Interrupted(*r),
                OutputStatus::Incomplete(_) | OutputStatus::Refused => {
                    panic!("the mock agent ends no turn {status:?}")
                }
            }),
            _ => None,
        })
        .collect();
    assert_eq!(
        stored, kinds,
        "each caller's outcome matches its stored turn"
    );
    let inputs = stored_inputs(store.as_ref(), &k).await;
    assert_eq!(inputs.len(), 200);
}
