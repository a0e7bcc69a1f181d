//! A finished reply hands its connection back for the next request: the agent reads a response
//! to its end after `[DONE]` instead of dropping it half-read, so consecutive turns (and tool
//! rounds) do not each open a new connection to the model server.

#![cfg(feature = "openai")]

mod support;

use std::sync::Arc;

use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use turnstile::{InMemoryStore, OpenAiAgent, Runtime};

#[tokio::test]
async fn consecutive_turns_use_one_connection() {
    let fake = FakeOpenAi::start(vec![Reply::text(&["one"]), Reply::text(&["two"])]).await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .build()
        .unwrap();
    let rt = Runtime::builder()
        .agent(agent)
        .store_arc(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    let k = key("cy", "reuse");
    for _ in 0..3 {
        within(rt.call(&k, "again")).await.unwrap();
        // The server dropped the body only after sending all of it.
        assert!(fake.next_body_end().await.finished);
    }
    let peers = fake.peers();
    assert_eq!(peers.len(), 3);
    assert!(
        peers.iter().all(|p| *p == peers[0]),
        "each turn opened its own connection: {peers:?}"
    );
}
