//! Property: when a response fails because the model server rate limits, it is answered as
//! OpenAI answers a rate limit — 429 with `Retry-After` — so that the official `openai` Python
//! package backs off, retries on its own with the request's `Idempotency-Key` and then raises
//! `RateLimitError`; the retries are answered from the stored failure: the turn ran once (the
//! model server saw only its attempts) and is stored once. (The file keeps its name from when
//! the answer was a 503.)

#![cfg(all(feature = "http", feature = "openai"))]

mod support;

use serde_json::Value;
use support::fake_openai::{FakeOpenAi, Reply};
use support::http::ALICE;
use support::openai_sdk::run_script;
use support::serve::{ModelServe, Serve};

#[tokio::test]
async fn the_sdks_retries_of_a_503_reach_a_turn_stored_once() {
    // The agent's own four attempts are all refused; a fifth request would be answered.
    let refusal = Reply::Status {
        status: 429,
        retry_after: Some(0),
        message: "slow down".into(),
    };
    let upstream = FakeOpenAi::start(vec![refusal; 4]).await;
    let serve = Serve::model(ModelServe {
        base_url: &upstream.base_url,
        key: "sk-test",
        log: "error",
        extra: &[],
    });
    let ids = {
        let base = serve.base.clone();
        tokio::task::spawn_blocking(move || run_script("sdk_retry.py", &[&base, ALICE]))
            .await
            .expect("the script's thread")
    };
    assert_eq!(
        upstream.requests().len(),
        4,
        "the SDK's retries never ran the turn again"
    );
    let metrics = serve.metrics().await;
    let refused: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("turnstile_http_requests_total"))
        .filter(|l| l.contains("route=\"/v1/responses\"") && l.contains("status=\"429\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert_eq!(
        refused, 3.0,
        "the SDK sent the request three times:\n{metrics}"
    );
    let conversation = ids["conversation"].as_str().expect("a conversation id");
    let events: Value = reqwest::Client::new()
        .get(serve.url(&format!("/v1/sessions/alice/{conversation}/events")))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("GET the events")
        .json()
        .await
        .expect("an events page");
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"]["type"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["note", "user_input", "turn_failed"],
        "one turn, stored once: {events:#}"
    );
}
