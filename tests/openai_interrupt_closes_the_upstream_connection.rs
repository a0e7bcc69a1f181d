//! An interrupt reaches the model: the turn's upstream request is dropped, so the model server
//! sees its connection close within 100 ms and nothing more is read; the history keeps what had
//! streamed, marked interrupted. A tool call cut short is closed with a `cancelled` result.

#![cfg(feature = "openai")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use tokio::sync::mpsc;
use turnstile::state::{EventKind, InterruptReason, OutputStatus, ToolStatus};
use turnstile::{
    CallOptions, InMemoryStore, OpenAiAgent, OutcomeKind, Runtime, SessionKey, Store, StreamEvent,
    Tool, ToolError,
};

/// How soon after `interrupt` the model server must see the connection close.
const CLOSE_WITHIN: Duration = Duration::from_millis(100);

fn runtime(agent: OpenAiAgent, store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent(agent)
        .store_arc(store)
        .build()
        .unwrap()
}

async fn last_output(store: &dyn Store, k: &SessionKey) -> (String, OutputStatus) {
    stored_events(store, k)
        .await
        .into_iter()
        .rev()
        .find_map(|e| match e.kind {
            EventKind::AgentOutput { text, status, .. } => Some((text, status)),
            _ => None,
        })
        .expect("an output is stored")
}

/// Interrupts `k` once its first chunk arrived and checks that the server saw the body cut off
/// promptly; returns the first chunk.
async fn interrupt_after_first_chunk(rt: &Runtime, fake: &FakeOpenAi, k: &SessionKey) -> String {
    let mut stream = rt
        .call_streaming(k, "tell me a long story", CallOptions::default())
        .await
        .unwrap();
    let Some(StreamEvent::Chunk(first)) = within(stream.next()).await else {
        panic!("expected a chunk first");
    };
    let asked = Instant::now();
    assert!(rt.interrupt(k), "a turn was running");
    let end = fake.next_body_end().await;
    assert!(!end.finished, "the server did not finish the body");
    let after = end.at.saturating_duration_since(asked);
    assert!(
        after < CLOSE_WITHIN,
        "the connection closed {after:?} after the interrupt"
    );
    let outcome = loop {
        match within(stream.next()).await.expect("an outcome") {
            StreamEvent::Outcome(outcome) => break outcome.unwrap(),
            _ => continue,
        }
    };
    assert!(
        matches!(outcome.kind, OutcomeKind::Interrupted(_)),
        "{outcome:?}"
    );
    first
}

#[tokio::test]
async fn an_interrupt_closes_a_streaming_response_and_keeps_the_partial_reply() {
    let deltas: Vec<String> = (0..200).map(|i| format!("word{i} ")).collect();
    let fake = FakeOpenAi::start(vec![Reply::Text {
        deltas: deltas.clone(),
        delay: Duration::from_millis(10),
        usage: None,
    }])
    .await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .build()
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(agent, store.clone());
    let k = key("iris", "story");
    let first = interrupt_after_first_chunk(&rt, &fake, &k).await;
    assert_eq!(first, "word0 ");
    let (text, status) = last_output(store.as_ref(), &k).await;
    assert_eq!(
        status,
        OutputStatus::Interrupted(InterruptReason::Requested)
    );
    assert!(
        text.starts_with("word0 ") && deltas.concat().starts_with(&text),
        "{text}"
    );
    assert!(
        text.len() < deltas.concat().len(),
        "the reply was cut short"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn an_interrupt_closes_a_stalled_response() {
    let fake = FakeOpenAi::start(vec![Reply::Stall {
        deltas: vec!["thinking".into()],
    }])
    .await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .build()
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(agent, store.clone());
    let k = key("iris", "stall");
    interrupt_after_first_chunk(&rt, &fake, &k).await;
    assert_eq!(last_output(store.as_ref(), &k).await.0, "thinking");
}

/// Tells the test it started, then never finishes.
struct Forever(mpsc::UnboundedSender<()>);

#[async_trait]
impl Tool for Forever {
    fn name(&self) -> &str {
        "forever"
    }
    fn description(&self) -> &str {
        "Never returns."
    }
    fn parameters(&self) -> Value {
        serde_json::json!({"type": "object"})
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        let _ = self.0.send(());
        std::future::pending().await
    }
}

#[tokio::test]
async fn an_interrupt_during_a_tool_call_records_it_as_cancelled() {
    let fake = FakeOpenAi::start(vec![Reply::ToolCalls(vec![(
        "f1".into(),
        "forever".into(),
        "{}".into(),
    )])])
    .await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_tool(Forever(started_tx))
        .build()
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(agent, store.clone());
    let k = key("iris", "tool");
    let call = {
        let (rt, k) = (rt.clone(), k.clone());
        tokio::spawn(async move { rt.call(&k, "wait").await })
    };
    within(started.recv()).await.expect("the tool started");
    assert!(rt.interrupt(&k));
    let outcome = within(call).await.unwrap().unwrap();
    assert!(
        matches!(outcome.kind, OutcomeKind::Interrupted(_)),
        "{outcome:?}"
    );
    let cancelled = stored_events(store.as_ref(), &k)
        .await
        .into_iter()
        .any(|e| {
            matches!(
                e.kind,
                EventKind::ToolResult {
                    status: ToolStatus::Cancelled,
                    ..
                }
            )
        });
    assert!(cancelled, "the open call is closed as cancelled");
}
