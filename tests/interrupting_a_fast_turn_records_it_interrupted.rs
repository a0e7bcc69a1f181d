//! Property (contract 4): a turn that was interrupted is recorded as interrupted, with the text
//! it had streamed, whatever its agent returned — also when the agent saw the interrupt first
//! and returned its reply (or an error) within the same poll, as an agent busy with a fast
//! stream does. Its caller gets `Interrupted`, and the history agrees.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use support::harness::*;
use turnstile::state::{EventKind, InterruptReason, OutputStatus};
use turnstile::{Agent, AgentError, InMemoryStore, OutcomeKind, Runtime, Store, TurnContext};

/// Streams three chunks, says it is busy, then spins — never yielding — until it sees the
/// interrupt, and answers as if done: with nothing (`Ok("")`), or with an error.
struct SpinningAgent {
    busy: AtomicBool,
}

#[async_trait]
impl Agent for SpinningAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        for chunk in ["a", "b", "c"] {
            turn.emit(chunk).await;
        }
        self.busy.store(true, Ordering::SeqCst);
        while !turn.cancellation().is_cancelled() {
            std::hint::spin_loop();
        }
        match turn.input().as_str() {
            "fail when interrupted" => Err("the stream was cut".into()),
            _ => Ok(String::new()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_returns_after_seeing_the_interrupt_is_recorded_interrupted() {
    for input in ["answer when interrupted", "fail when interrupted"] {
        let agent = Arc::new(SpinningAgent {
            busy: AtomicBool::new(false),
        });
        let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
        let rt = Runtime::builder()
            .agent_arc(agent.clone())
            .store_arc(store.clone())
            .build()
            .unwrap();
        let k = key("ivy", "fast");
        let call = {
            let (rt, k) = (rt.clone(), k.clone());
            tokio::spawn(async move { rt.call(&k, input).await })
        };
        eventually("the agent is busy", || agent.busy.load(Ordering::SeqCst)).await;
        assert!(rt.interrupt(&k), "a turn was running");
        let outcome = within(call).await.unwrap().unwrap();
        assert_eq!(
            outcome.kind,
            OutcomeKind::Interrupted(InterruptReason::Requested),
            "{input}"
        );
        assert_eq!(outcome.output, "abc", "{input}: what was streamed");
        let events = stored_events(store.as_ref(), &k).await;
        let output = events.last().expect("the turn is stored");
        assert!(
            matches!(
                &output.kind,
                EventKind::AgentOutput {
                    text,
                    status: OutputStatus::Interrupted(InterruptReason::Requested),
                    ..
                } if text == "abc"
            ),
            "{input}: {output:?}"
        );
    }
}

#[cfg(all(feature = "openai", feature = "http"))]
mod through_a_model {
    use std::time::Duration;

    use futures::StreamExt;
    use serde_json::{json, Value};

    use super::support::fake_openai::{FakeOpenAi, Reply};
    use super::support::harness::within;
    use super::support::http::{ADMIN, ALICE};
    use super::support::serve::{ModelServe, Serve};

    /// As reported: `turnstile serve` with a model that streams fast, interrupted while
    /// it streams. The stored output is `interrupted`, with text.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn interrupting_a_fast_model_stream_stores_an_interrupted_reply() {
        let fake = FakeOpenAi::start(vec![Reply::Text {
            deltas: (0..200_000).map(|i| format!("w{i} ")).collect(),
            delay: Duration::ZERO,
            usage: None,
        }])
        .await;
        let serve = Serve::model(ModelServe {
            base_url: &fake.base_url,
            key: "sk-test-key-interrupts",
            log: "error",
            extra: &[],
        });
        let client = reqwest::Client::new();
        let response = within(
            client
                .post(serve.url("/v1/sessions/alice/fast/turns"))
                .bearer_auth(ALICE)
                .header("accept", "text/event-stream")
                .json(&json!({"input": "count"}))
                .send(),
        )
        .await
        .unwrap();
        let mut body = response.bytes_stream();
        let first = within(body.next()).await.unwrap().unwrap();
        assert!(
            String::from_utf8_lossy(&first).contains("chunk"),
            "streaming"
        );
        let interrupted: Value = within(
            client
                .post(serve.url("/v1/sessions/alice/fast/interrupt"))
                .bearer_auth(ALICE)
                .send(),
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        assert_eq!(interrupted["interrupted"], true);
        while within(body.next()).await.is_some() {}
        let page: Value = within(
            client
                .get(serve.url("/v1/sessions/alice/fast/events"))
                .bearer_auth(ADMIN)
                .send(),
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        let output = &page["events"][1]["kind"];
        assert_eq!(output["type"], "agent_output", "{page}");
        assert_eq!(
            output["status"],
            json!({"status": "interrupted", "reason": "requested"}),
            "{output}"
        );
        assert!(
            output["text"].as_str().unwrap().starts_with("w0 w1 "),
            "the partial reply is kept: {output}"
        );
    }
}
