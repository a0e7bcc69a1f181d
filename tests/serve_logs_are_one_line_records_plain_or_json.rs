//! Property: `turnstile serve` writes its log to stderr one record per line, without terminal
//! colours when stderr is not a terminal — also when a model server's error it logs holds line
//! breaks and escape sequences — and with `--log-format json` one JSON object per line, up to
//! the last line it writes as it exits (`drained, exiting`).

#![cfg(all(feature = "openai", feature = "http"))]

mod support;

use serde_json::{json, Value};
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use support::http::ALICE;
use support::serve::{ModelServe, Serve};

/// What the model server says: two lines and a colour escape.
const UPSTREAM: &str = "first line\nsecond line \u{1b}[31mred";

/// Runs one turn the model refuses, with `extra` flags, and returns the server and its log
/// once the refusal is in it.
async fn failing_turn(extra: &[&str]) -> (Serve, String) {
    let fake = FakeOpenAi::start(vec![Reply::Status {
        status: 400,
        retry_after: None,
        message: UPSTREAM.into(),
    }])
    .await;
    let serve = Serve::model(ModelServe {
        base_url: &fake.base_url,
        key: "sk-test-key-for-the-log-format",
        log: "warn",
        extra,
    });
    let status = within(
        reqwest::Client::new()
            .post(serve.url("/v1/sessions/alice/logs/turns"))
            .bearer_auth(ALICE)
            .json(&json!({"input": "hi"}))
            .send(),
    )
    .await
    .unwrap()
    .status();
    assert_eq!(status, 502);
    let logs = eventually_ok(
        "the failure is logged",
        std::time::Duration::from_millis(5),
        || {
            let logs = serve.logs();
            async move {
                match logs.contains("second line") {
                    true => Ok(logs),
                    false => Err(logs),
                }
            }
        },
    )
    .await;
    (serve, logs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_records_are_single_uncoloured_lines() {
    // Plain is the default.
    let (_serve, logs) = failing_turn(&[]).await;
    assert!(!logs.contains('\u{1b}'), "no escape sequences: {logs:?}");
    for line in logs.lines().filter(|l| !l.is_empty()) {
        assert!(
            line.starts_with(|c: char| c.is_ascii_digit()),
            "every line is a record, starting with its time: {line:?}"
        );
    }
    let record = logs
        .lines()
        .find(|l| l.contains("first line"))
        .expect("the upstream's words are logged");
    assert!(
        record.contains("second line"),
        "one record, one line: {record:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_records_are_one_object_per_line() {
    let (mut serve, _) = failing_turn(&["--log-format", "json"]).await;
    let status = serve.terminate(std::time::Duration::from_secs(20));
    assert!(status.success(), "{status}");
    let logs = serve.logs();
    let records: Vec<Value> = logs
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(!records.is_empty());
    assert!(
        records.iter().all(|r| r["level"].is_string()),
        "{records:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r.to_string().contains("second line") && r["level"] == "WARN"),
        "{records:?}"
    );
    assert!(
        records.iter().any(|r| r["level"] == "INFO"
            && r["fields"]["message"] == "turnstile serve: drained, exiting"),
        "the last line is a record too: {records:?}"
    );
}
