//! Token usage reported by the model is counted in `turnstile_tokens_total{kind}`, prompt
//! tokens as `input` and completion tokens as `output`, summed over a turn's requests.

#![cfg(all(feature = "openai", feature = "http"))]

mod support;

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusBuilder;
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use turnstile::{InMemoryStore, OpenAiAgent, Runtime};

#[tokio::test]
async fn prompt_and_completion_tokens_reach_the_counter() {
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .expect("this test binary installs the only recorder");
    let fake = FakeOpenAi::start(vec![
        Reply::Text {
            deltas: vec!["a".into()],
            delay: std::time::Duration::ZERO,
            usage: Some((40, 2)),
        },
        Reply::Text {
            deltas: vec!["b".into()],
            delay: std::time::Duration::ZERO,
            usage: Some((50, 3)),
        },
    ])
    .await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .build()
        .unwrap();
    let rt = Runtime::builder()
        .agent(agent)
        .store_arc(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    within(rt.call(&key("mo", "s"), "one")).await.unwrap();
    within(rt.call(&key("mo", "s"), "two")).await.unwrap();
    let text = handle.render();
    assert!(
        text.contains("turnstile_tokens_total{kind=\"input\"} 90"),
        "{text}"
    );
    assert!(
        text.contains("turnstile_tokens_total{kind=\"output\"} 5"),
        "{text}"
    );
}
