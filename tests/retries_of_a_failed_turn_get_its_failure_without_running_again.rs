//! Property (contract 12 with failed turns recorded): a turn that failed is in the history
//! (its input, with the request id, and a `turn_failed` event), so a retry with the same request
//! id is answered with the same failure — kind and message — without running the agent again,
//! also after passivation; a new request id runs the message again.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use support::harness::{eventually, key, stored_inputs, within, TIMEOUT};
use turnstile::{
    Agent, AgentError, AgentFailure, CallOptions, Error, FailureKind, InMemoryStore, Runtime,
    Store, TurnContext,
};

/// Fails its first turn as a rate-limited model would; answers the ones after.
#[derive(Default)]
struct FailsOnce {
    runs: AtomicUsize,
}

#[async_trait]
impl Agent for FailsOnce {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            let failure = AgentFailure::new(FailureKind::ModelRateLimited, "slow down")
                .with_retry_after(Duration::from_secs(9));
            return Err(Box::new(failure));
        }
        Ok(format!("re: {}", turn.input()))
    }
}

fn with_id(id: &str) -> CallOptions {
    CallOptions::default().with_request_id(id)
}

fn runtime(agent: Arc<FailsOnce>, store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent_arc(agent)
        .store_arc(store)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_retried_failed_turn_is_answered_with_its_failure_and_never_runs_again() {
    let agent = Arc::new(FailsOnce::default());
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let k = key("wes", "retry");
    let rt = runtime(agent.clone(), store.clone());
    let first = within(rt.call_with(&k, "hello", with_id("req-1"))).await;
    let Err(Error::AgentFailed {
        kind,
        message,
        retry_after,
        ..
    }) = first
    else {
        panic!("expected a failed turn, got {first:?}")
    };
    assert_eq!(kind, FailureKind::ModelRateLimited);
    assert_eq!(retry_after, Some(Duration::from_secs(9)));

    for runtime_round in 0..2 {
        let again = within(rt.call_with(&k, "hello", with_id("req-1"))).await;
        match again {
            Err(Error::AgentFailed {
                kind: again_kind,
                message: again_message,
                ..
            }) => {
                assert_eq!(again_kind, kind, "round {runtime_round}");
                assert_eq!(again_message, message, "round {runtime_round}");
            }
            other => panic!("round {runtime_round}: expected the stored failure, got {other:?}"),
        }
        assert_eq!(agent.runs.load(Ordering::SeqCst), 1, "the agent ran once");
        if runtime_round == 0 {
            assert!(
                rt.passivate(&k),
                "passivated, so the retry reads the stored log"
            );
            eventually("the session stopped", || rt.live_sessions() == 0).await;
        }
    }
    let answered = within(rt.call_with(&k, "hello", with_id("req-2")))
        .await
        .expect("a new request id runs it again");
    assert_eq!(answered.output, "re: hello");
    let inputs: Vec<String> = stored_inputs(store.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(
        inputs,
        ["hello", "hello"],
        "the failed message is stored once"
    );
    within(rt.drain(TIMEOUT)).await;
}
