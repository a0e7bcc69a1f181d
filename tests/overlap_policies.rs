//! Contract 5: what happens to a message that arrives while its session is busy — `Latest`,
//! `Queue`, `Reject`, `Merge` — set per runtime and overridable per call. Nothing the user said
//! is lost from the history.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use support::harness::*;
use turnstile::state::{EventKind, InputDisposition, InterruptReason, OutputStatus};
use turnstile::{
    CallOptions, Error, InMemoryStore, MockLlmAgent, OutcomeKind, OverlapPolicy, Runtime, Store,
};

/// A runtime over a memory store whose agent records what it started and takes `latency`.
fn recording(latency: Duration) -> (Runtime, Arc<RecordingAgent>, Arc<dyn Store>) {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let agent = Arc::new(RecordingAgent::with_latency(latency));
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .build()
        .unwrap();
    (rt, agent, store)
}

fn latest() -> CallOptions {
    CallOptions::default().with_policy(OverlapPolicy::Latest)
}

/// Three rapid `Latest` messages: the first is interrupted, the second superseded without
/// running, the third completes; the history holds all three inputs, marked.
#[tokio::test(start_paused = true)]
async fn latest_message_wins_and_the_history_keeps_every_input() {
    let (rt, agent, store) = recording(Duration::from_secs(1));
    let k = key("quinn", "typing");
    let first = spawn_calls(&rt, &k, &["first"], latest());
    eventually("the first turn to start", || {
        agent.started_inputs(&k).len() == 1
    })
    .await;
    let rest = within(join_all(
        ["second", "third"].map(|m| rt.call_with(&k, m, latest())),
    ))
    .await;
    let first = within(first).await.unwrap().remove(0).unwrap();
    let [second, third]: [_; 2] = rest.try_into().unwrap();
    let (second, third) = (second.unwrap(), third.unwrap());
    assert_eq!(
        first.kind,
        OutcomeKind::Interrupted(InterruptReason::Superseded)
    );
    assert_eq!(second.kind, OutcomeKind::Superseded);
    assert_eq!(third.kind, OutcomeKind::Completed);
    assert_eq!(third.output, "echo: third");
    assert_eq!(
        agent.started_inputs(&k),
        ["first", "third"],
        "the second never ran"
    );
    let inputs = stored_inputs(store.as_ref(), &k).await;
    assert_eq!(
        inputs,
        [
            ("first".to_owned(), InputDisposition::Answered),
            ("second".to_owned(), InputDisposition::Superseded),
            ("third".to_owned(), InputDisposition::Answered),
        ]
    );
    let events = stored_events(store.as_ref(), &k).await;
    assert_dense(&events);
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::AgentOutput {
            status: OutputStatus::Interrupted(InterruptReason::Superseded),
            ..
        }
    )));
    let second_event = events.iter().find(|e| e.seq == second.seq).unwrap();
    assert_eq!(second_event.text(), Some("second"));
}

/// `Reject` answers `Busy` at once while a turn runs, and the running turn is untouched.
#[tokio::test(start_paused = true)]
async fn reject_answers_busy_at_once() {
    let agent = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .with_policy(OverlapPolicy::Reject)
        .build()
        .unwrap();
    let k = key("rosa", "busy");
    let running = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move { rt.call(&k, "hold").await }
    });
    eventually("the turn to run", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let refused = within(rt.call(&k, "me too")).await;
    assert!(matches!(refused, Err(Error::Busy { .. })), "{refused:?}");
    assert_eq!(
        rt.stats().rejected_busy,
        1,
        "counted where the metrics count it"
    );
    // A per-call policy overrides the runtime's: this one waits its turn.
    let queued = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move {
            rt.call_with(
                &k,
                "patient",
                CallOptions::default().with_policy(OverlapPolicy::Queue),
            )
            .await
        }
    });
    agent.gate.add_permits(1);
    assert_eq!(
        within(running).await.unwrap().unwrap().kind,
        OutcomeKind::Completed
    );
    assert_eq!(
        within(queued).await.unwrap().unwrap().output,
        "done: patient"
    );
}

/// `Merge` hands every waiting message to the next turn together, in order.
#[tokio::test(start_paused = true)]
async fn merge_hands_queued_messages_to_one_turn() {
    let agent = Arc::new(GateAgent::default());
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .with_policy(OverlapPolicy::Merge)
        .build()
        .unwrap();
    let k = key("sam", "burst");
    let running = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move { rt.call(&k, "hold on").await }
    });
    eventually("the turn to run", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let burst = spawn_calls(&rt, &k, &["and", "also", "finally"], CallOptions::default());
    eventually("the burst to queue", || rt.pending(&k) == 4).await;
    agent.gate.add_permits(1);
    within(running).await.unwrap().unwrap();
    let outcomes: Vec<_> = within(burst)
        .await
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let kinds: Vec<_> = outcomes.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        [
            OutcomeKind::Merged,
            OutcomeKind::Merged,
            OutcomeKind::Completed
        ]
    );
    assert!(outcomes
        .iter()
        .all(|o| o.output == "done: and\n\nalso\n\nfinally"));
    let inputs = stored_inputs(store.as_ref(), &k).await;
    assert_eq!(
        inputs,
        [
            ("hold on".to_owned(), InputDisposition::Answered),
            ("and".to_owned(), InputDisposition::Merged),
            ("also".to_owned(), InputDisposition::Merged),
            ("finally".to_owned(), InputDisposition::Merged),
        ]
    );
}

/// `interrupt_with` cuts the running turn short and runs the new input before anything queued.
#[tokio::test(start_paused = true)]
async fn interrupt_with_runs_the_new_input_next() {
    let (rt, agent, _) = recording(Duration::from_secs(5));
    let k = key("tara", "urgent");
    let calls = spawn_calls(&rt, &k, &["slow", "queued"], CallOptions::default());
    eventually("the first turn to start", || {
        agent.started_inputs(&k).len() == 1
    })
    .await;
    eventually("the second to queue", || rt.pending(&k) == 2).await;
    let urgent = within(rt.interrupt_with(&k, "urgent", CallOptions::default()))
        .await
        .unwrap();
    assert_eq!(urgent.kind, OutcomeKind::Completed);
    let earlier = within(calls).await.unwrap();
    assert_eq!(
        earlier[0].as_ref().unwrap().kind,
        OutcomeKind::Interrupted(InterruptReason::Requested)
    );
    assert_eq!(agent.started_inputs(&k), ["slow", "urgent", "queued"]);
}

/// A turn still in the session's mailbox when `interrupt_with` is called (so nothing was
/// running to interrupt yet) is the one it cuts short once it starts: the new input is not left
/// waiting behind it.
#[tokio::test(start_paused = true)]
async fn interrupt_with_cuts_short_a_turn_that_starts_just_before_it() {
    let (rt, agent, _) = recording(Duration::from_secs(5));
    let k = key("tara", "mailbox");
    within(rt.call(&k, "warm up")).await.unwrap();
    let slow = rt.call(&k, "slow");
    tokio::pin!(slow);
    // Sent to the live session's mailbox; the actor has not run since.
    assert!(futures::poll!(slow.as_mut()).is_pending());
    assert_eq!(agent.started_inputs(&k), ["warm up"]);
    let urgent = rt.interrupt_with(&k, "urgent", CallOptions::default());
    let (slow, urgent) = within(async { tokio::join!(slow, urgent) }).await;
    assert_eq!(
        slow.unwrap().kind,
        OutcomeKind::Interrupted(InterruptReason::Requested)
    );
    assert_eq!(urgent.unwrap().kind, OutcomeKind::Completed);
    assert_eq!(agent.started_inputs(&k), ["warm up", "slow", "urgent"]);
}

/// Two `interrupt_with` inputs sent while one turn runs both go ahead of the queue, in the
/// order they were sent.
#[tokio::test(start_paused = true)]
async fn interrupt_with_inputs_keep_their_order() {
    let (rt, agent, _) = recording(Duration::from_secs(1));
    let k = key("tara", "two-urgent");
    let calls = spawn_calls(&rt, &k, &["slow", "queued"], CallOptions::default());
    eventually("the first turn to start", || {
        agent.started_inputs(&k).len() == 1
    })
    .await;
    let first = rt.interrupt_with(&k, "first", CallOptions::default());
    let second = rt.interrupt_with(&k, "second", CallOptions::default());
    let (first, second) = within(async { tokio::join!(first, second) }).await;
    assert_eq!(first.unwrap().kind, OutcomeKind::Completed);
    assert_eq!(second.unwrap().kind, OutcomeKind::Completed);
    within(calls).await.unwrap();
    assert_eq!(
        agent.started_inputs(&k),
        ["slow", "first", "second", "queued"]
    );
}

/// A bounded queue: past `max_queue` waiting messages a call is refused with `Overloaded`.
#[tokio::test(start_paused = true)]
async fn a_full_session_queue_refuses_with_overloaded() {
    let agent = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .with_max_queue(2)
        .build()
        .unwrap();
    let k = key("uma", "flood");
    let waiting: Vec<_> = (0..3)
        .map(|i| {
            let (rt, k) = (rt.clone(), k.clone());
            tokio::spawn(async move { rt.call(&k, format!("hold {i}")).await })
        })
        .collect();
    eventually("the first turn to run", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let refused = rt.call(&k, "one too many").await;
    assert!(
        matches!(refused, Err(Error::Overloaded { queued: 2, .. })),
        "{refused:?}"
    );
    agent.gate.add_permits(3);
    for call in waiting {
        within(call).await.unwrap().unwrap();
    }
    assert_eq!(rt.stats().rejected_overloaded, 1);
}

/// The mock LLM agent stops promptly when a `Latest` message supersedes it.
#[tokio::test(start_paused = true)]
async fn latest_interrupts_a_mock_llm_turn_promptly() {
    let rt = Runtime::builder()
        .agent(MockLlmAgent::new().with_latency(Duration::from_secs(30)))
        .store(InMemoryStore::new())
        .with_policy(OverlapPolicy::Latest)
        .build()
        .unwrap();
    let k = key("vera", "fast");
    let start = tokio::time::Instant::now();
    let both = join_all([rt.call(&k, "a"), rt.call(&k, "b")]);
    // "b" itself takes 30 s; "a" running on would make it 60.
    let outcomes = tokio::time::timeout(Duration::from_secs(60), both)
        .await
        .unwrap();
    assert_eq!(
        outcomes[0].as_ref().unwrap().kind,
        OutcomeKind::Interrupted(InterruptReason::Superseded)
    );
    assert_eq!(outcomes[1].as_ref().unwrap().kind, OutcomeKind::Completed);
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(31),
        "the first turn did not run on: {took:?}"
    );
}
