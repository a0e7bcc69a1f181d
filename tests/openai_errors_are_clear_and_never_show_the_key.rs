//! Failures a person must act on end the turn as `AgentFailed` with a message that says what to
//! fix, and never holds the API key: a refused key (401), an unknown model (404), a malformed
//! stream, a server that stalls past the timeout, a server that cannot be reached. A failed turn
//! leaves no output in the history.

#![cfg(feature = "openai")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use turnstile::state::EventKind;
use turnstile::{Error, InMemoryStore, OpenAiAgent, OpenAiBuilder, Runtime, Store};

const WRONG_KEY: &str = "sk-wrong-secret-value-9876";

async fn failure(builder: OpenAiBuilder) -> (String, Arc<dyn Store>) {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(builder.build().unwrap())
        .store_arc(store.clone())
        .build()
        .unwrap();
    let err = within(rt.call(&key("fay", "s"), "hello"))
        .await
        .unwrap_err();
    match err {
        Error::AgentFailed { message, .. } => (message, store),
        other => panic!("expected AgentFailed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_refused_key_says_so_without_showing_the_key() {
    let fake = FakeOpenAi::start_with(vec![], true).await;
    let builder = OpenAiAgent::builder(&fake.base_url, "m").with_api_key(WRONG_KEY);
    let (message, store) = failure(builder).await;
    assert!(message.contains("refused the API key (401)"), "{message}");
    assert!(
        !message.contains(WRONG_KEY) && !message.contains("sk-wrong"),
        "{message}"
    );
    assert_eq!(fake.requests().len(), 1, "a 401 is not retried");
    let outputs = stored_events(store.as_ref(), &key("fay", "s"))
        .await
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::AgentOutput { .. }))
        .count();
    assert_eq!(outputs, 0, "a failed turn leaves no output");
}

#[tokio::test]
async fn an_unknown_model_is_named() {
    let fake = FakeOpenAi::start(vec![Reply::Status {
        status: 404,
        retry_after: None,
        message: "The model `gpt-nope` does not exist".into(),
    }])
    .await;
    let (message, _) =
        failure(OpenAiAgent::builder(&fake.base_url, "gpt-nope").without_api_key()).await;
    assert!(
        message.contains("does not serve model \"gpt-nope\""),
        "{message}"
    );
    assert!(
        message.contains("does not exist"),
        "the server's reason is kept: {message}"
    );
}

#[tokio::test]
async fn a_malformed_chunk_fails_the_turn() {
    let fake = FakeOpenAi::start(vec![Reply::Malformed]).await;
    let (message, _) = failure(OpenAiAgent::builder(&fake.base_url, "m").without_api_key()).await;
    assert!(message.contains("malformed stream"), "{message}");
    assert!(message.contains("not chat-completions JSON"), "{message}");
    assert_eq!(
        fake.requests().len(),
        1,
        "a malformed stream is not retried"
    );
}

#[tokio::test]
async fn a_stalled_stream_times_out() {
    let fake = FakeOpenAi::start(vec![Reply::Stall {
        deltas: vec!["so ".into()],
    }])
    .await;
    let builder = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_timeout(Duration::from_millis(300));
    // The fake keeps sending keep-alive comments: the timeout counts from the last data.
    let (message, _) = failure(builder).await;
    assert!(message.contains("sent nothing for 300ms"), "{message}");
}

#[tokio::test]
async fn an_unreachable_server_is_reported_after_retries() {
    // A port that was just free: bound, then released.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let builder = OpenAiAgent::builder(format!("http://{addr}/v1"), "m")
        .without_api_key()
        .with_retries(2, Duration::from_millis(1), Duration::from_millis(10));
    let (message, _) = failure(builder).await;
    assert!(
        message.contains("cannot reach the model server"),
        "{message}"
    );
    assert!(message.contains("after 3 attempt(s)"), "{message}");
}
