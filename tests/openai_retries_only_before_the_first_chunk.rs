//! Retries: a 429 (honouring its `Retry-After`) or a 5xx before anything streamed is sent again
//! and the turn succeeds; a failure after part of the answer streamed fails the turn and is never
//! sent again, so no text is repeated; a server that keeps failing is reported with the attempts.

#![cfg(feature = "openai")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use turnstile::{Error, InMemoryStore, OpenAiAgent, Runtime};

fn runtime(fake: &FakeOpenAi) -> Runtime {
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        // Backoff short enough for a test; `Retry-After` is what the first test waits for.
        .with_retries(3, Duration::from_millis(5), Duration::from_secs(5))
        .build()
        .unwrap();
    Runtime::builder()
        .agent(agent)
        .store_arc(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap()
}

fn refusal(status: u16, retry_after: Option<u64>) -> Reply {
    Reply::Status {
        status,
        retry_after,
        message: "slow down".into(),
    }
}

#[tokio::test]
async fn a_429_before_streaming_is_retried_after_its_retry_after() {
    let fake = FakeOpenAi::start(vec![refusal(429, Some(1)), Reply::text(&["made ", "it"])]).await;
    let rt = runtime(&fake);
    let started = Instant::now();
    let outcome = within(rt.call(&key("rory", "retry"), "hi")).await.unwrap();
    assert_eq!(outcome.output, "made it");
    assert_eq!(fake.requests().len(), 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "the retry waited for Retry-After: 1 ({:?})",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_server_error_is_retried_with_backoff() {
    let fake = FakeOpenAi::start(vec![
        refusal(503, None),
        refusal(500, None),
        Reply::text(&["ok"]),
    ])
    .await;
    let rt = runtime(&fake);
    let outcome = within(rt.call(&key("rory", "5xx"), "hi")).await.unwrap();
    assert_eq!(outcome.output, "ok");
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn a_rate_limit_after_the_first_chunk_fails_the_turn_without_a_replay() {
    let fake = FakeOpenAi::start(vec![Reply::TextThenError {
        deltas: vec!["Half an ".into(), "answer".into()],
        code: 429,
    }])
    .await;
    let rt = runtime(&fake);
    let err = within(rt.call(&key("rory", "mid"), "hi"))
        .await
        .unwrap_err();
    let Error::AgentFailed { message, .. } = err else {
        panic!("expected AgentFailed, got {err:?}")
    };
    assert!(message.contains("Rate limit reached"), "{message}");
    assert_eq!(
        fake.requests().len(),
        1,
        "a half-streamed answer is never requested again"
    );
}

#[tokio::test]
async fn a_server_that_keeps_failing_is_reported_with_its_attempts() {
    let fake = FakeOpenAi::start((0..4).map(|_| refusal(502, None)).collect()).await;
    let rt = runtime(&fake);
    let err = within(rt.call(&key("rory", "down"), "hi"))
        .await
        .unwrap_err();
    let Error::AgentFailed { message, .. } = err else {
        panic!("expected AgentFailed, got {err:?}")
    };
    assert!(message.contains("502 after 4 attempt(s)"), "{message}");
    assert_eq!(fake.requests().len(), 4, "one request and three retries");
}

#[tokio::test]
async fn a_retry_after_longer_than_the_policy_waits_is_reported_at_once() {
    let fake = FakeOpenAi::start(vec![refusal(429, Some(3600))]).await;
    let rt = runtime(&fake);
    let err = within(rt.call(&key("rory", "hour"), "hi"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("429"), "{err}");
    assert_eq!(fake.requests().len(), 1);
}
