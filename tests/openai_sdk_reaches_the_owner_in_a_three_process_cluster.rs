//! Property: three `turnstile serve --cluster` processes on one Redis, each with its own official
//! `openai` Python client, behave as one OpenAI endpoint: every response of a conversation runs
//! at the process that owns it (whichever process the client reached), a conversation's items
//! read through another process are in order, a streamed response is cancelled through a third
//! process, and the SDK's `Idempotency-Key` sent to all three stores one turn.

#![cfg(all(feature = "http", feature = "redis"))]

mod support;

use support::cluster::{Cluster, ClusterOptions};
use support::harness::{key, stored_inputs};
use support::openai_sdk::run_script;

/// The user an open gateway's OpenAI routes act for.
const USER: &str = turnstile::http::DEFAULT_USER;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_answer_one_sdk_conversation_at_its_owner() {
    // Replies take 600 ms over 6 chunks, so that a cancel after the first lands mid-stream.
    let options = ClusterOptions {
        latency_ms: 600,
        chunks: 6,
        request_timeout: 30.0,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start(3, options).await;
    let bases: Vec<String> = cluster.members.iter().map(|m| m.base.clone()).collect();
    let ids = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = bases.iter().map(String::as_str).collect();
        run_script("sdk_cluster.py", &args)
    })
    .await
    .expect("the script's thread");

    let store = cluster.store().await;
    let conversation = ids["conversation"].as_str().expect("a conversation id");
    let inputs: Vec<String> = stored_inputs(store.as_ref(), &key(USER, conversation))
        .await
        .into_iter()
        .map(|(input, _)| input)
        .collect();
    assert_eq!(
        inputs,
        ["m0", "m1", "m2", "m3", "m4", "a long answer"],
        "every response once, in the order sent"
    );
    let retried = ids["retried"].as_str().expect("the retried conversation");
    let once = stored_inputs(store.as_ref(), &key(USER, retried)).await;
    assert_eq!(once.len(), 1, "stored once: {once:?}");
}
