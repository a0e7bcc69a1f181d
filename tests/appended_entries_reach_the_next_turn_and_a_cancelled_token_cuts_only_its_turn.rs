//! Properties of the library calls the OpenAI front door stands on:
//! - `Runtime::append` adds user inputs, agent outputs and notes (with a session-state change)
//!   without running a turn; they are stored, in order, and the next turn's context holds them.
//! - `CallOptions::with_cancellation`: cancelling the token interrupts that message's turn —
//!   also when it is still queued behind another — and never another turn of the session.

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::json;
use support::harness::{key, stored_events, within};
use tokio_util::sync::CancellationToken;
use turnstile::state::EventKind;
use turnstile::{
    Agent, AgentError, CallOptions, Entry, Error, InMemoryStore, OutcomeKind, Runtime, StreamEvent,
    TurnContext,
};

/// Records the texts of the events its context holds; streams a chunk, then waits (200 ms for
/// the input `first`, 30 s otherwise) at a point an interrupt reaches.
#[derive(Default)]
struct ContextAgent {
    seen: Mutex<Vec<Vec<String>>>,
}

#[async_trait]
impl Agent for ContextAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let texts: Vec<String> = turn
            .history()
            .iter()
            .filter_map(|e| e.text().map(str::to_owned))
            .collect();
        self.seen.lock().push(texts);
        turn.emit("partial ").await;
        let latency = if turn.input() == "first" {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(30)
        };
        tokio::select! {
            () = tokio::time::sleep(latency) => Ok(format!("answered {}", turn.input())),
            () = turn.cancellation().cancelled() => Ok("partial ".into()),
        }
    }
}

#[tokio::test]
async fn appended_entries_are_stored_and_reach_the_next_turns_context() {
    let agent = Arc::new(ContextAgent::default());
    let store = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("ada", "c1");
    let state = [("topic".to_owned(), json!("intro"))].into();
    let first = rt
        .append(
            &k,
            vec![
                Entry::Note("opened".into()),
                Entry::User("my name is Ada".into()),
                Entry::Agent("hello Ada".into()),
            ],
            state,
        )
        .await
        .unwrap();
    assert_eq!(first, 1);
    let outcome = rt.call(&k, "first").await.unwrap();
    assert_eq!(outcome.kind, OutcomeKind::Completed);
    let seen = agent.seen.lock().clone();
    assert_eq!(seen.len(), 1, "appending ran no turn");
    assert!(
        seen[0].contains(&"my name is Ada".to_owned()) && seen[0].contains(&"hello Ada".to_owned()),
        "the turn's context holds the appended messages: {seen:?}"
    );
    let events = stored_events(store.as_ref(), &k).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e.kind {
            EventKind::Note { .. } => "note",
            EventKind::UserInput { .. } => "user_input",
            EventKind::AgentOutput { .. } => "agent_output",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "note",
            "user_input",
            "agent_output",
            "user_input",
            "agent_output"
        ]
    );
    let view = rt.state(&k).await.unwrap().expect("the session exists");
    assert_eq!(view.record.state["topic"], "intro");

    // Refused before anything is stored: scoped keys, and nothing at all.
    let scoped = [("user:name".to_owned(), json!("x"))].into();
    assert!(matches!(
        rt.append(&k, vec![], scoped).await,
        Err(Error::InvalidRequest(_))
    ));
    assert!(matches!(
        rt.append(&k, vec![], Default::default()).await,
        Err(Error::InvalidRequest(_))
    ));
    assert_eq!(stored_events(store.as_ref(), &k).await.len(), events.len());
}

#[tokio::test]
async fn a_cancelled_token_interrupts_its_own_turn_only_even_while_queued() {
    let rt = Runtime::builder()
        .agent(ContextAgent::default())
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    let k = key("ada", "c2");
    // A running turn, and one queued behind it whose token is cancelled at once.
    let running = CancellationToken::new();
    let mut first = rt
        .call_streaming(
            &k,
            "first",
            CallOptions::default().with_cancellation(running),
        )
        .await
        .unwrap();
    while !matches!(
        within(futures::StreamExt::next(&mut first)).await,
        Some(StreamEvent::Chunk(_))
    ) {}
    let queued = CancellationToken::new();
    let second = {
        let (rt, k, queued) = (rt.clone(), k.clone(), queued.clone());
        tokio::spawn(async move {
            rt.call_with(
                &k,
                "second",
                CallOptions::default().with_cancellation(queued),
            )
            .await
        })
    };
    queued.cancel();
    let first = within(first.outcome()).await.unwrap();
    assert_eq!(
        (first.kind, first.output.as_str()),
        (OutcomeKind::Completed, "answered first"),
        "the running turn is not cut by another message's token"
    );
    let second = within(second).await.unwrap().unwrap();
    assert_eq!(
        second.kind.as_str(),
        "interrupted",
        "the queued turn started cut"
    );

    // A running turn's own token cuts it, keeping its partial output.
    let token = CancellationToken::new();
    let mut third = rt
        .call_streaming(
            &k,
            "third",
            CallOptions::default().with_cancellation(token.clone()),
        )
        .await
        .unwrap();
    while !matches!(
        within(futures::StreamExt::next(&mut third)).await,
        Some(StreamEvent::Chunk(_))
    ) {}
    token.cancel();
    let third = within(third.outcome()).await.unwrap();
    assert_eq!(third.kind.as_str(), "interrupted");
    assert_eq!(third.output, "partial ");
}
