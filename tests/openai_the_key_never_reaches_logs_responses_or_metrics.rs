//! Property (through a real `turnstile serve` logging at `trace`): whatever a model upstream
//! echoes of the API key — whole or in part, in a refusal's body, an error object inside the
//! stream, a chunk that is not chat-completions, a server error's page with line breaks — the
//! key appears in no response, in no stored event (what the pages and `sessions show` print),
//! in no metric and in no log line; and every log line is one record.

#![cfg(all(feature = "openai", feature = "http"))]

mod support;

use serde_json::{json, Value};
use support::fake_openai::{content, data, FakeOpenAi, Reply};
use support::harness::*;
use support::http::{ADMIN, ALICE};
use support::serve::{ModelServe, Serve};

const KEY: &str = "sk-proj-Zq7hidden0secret1value2abcd";

/// Every run of 8 characters of the key: what must appear nowhere.
fn fragments() -> Vec<&'static str> {
    (0..=KEY.len() - 8).map(|at| &KEY[at..at + 8]).collect()
}

fn assert_no_key(what: &str, text: &str) {
    for fragment in fragments() {
        assert!(
            !text.contains(fragment),
            "{what} holds {fragment:?} of the key:\n{text}"
        );
    }
}

fn echoing_paths() -> Vec<Reply> {
    let partial = format!("{}****{}", &KEY[..12], &KEY[KEY.len() - 4..]);
    vec![
        // A refused key, named whole in the body.
        Reply::RawStatus {
            status: 401,
            retry_after: None,
            body: json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}})
                .to_string(),
        },
        // A refusal naming the key in part, as dashboards show it.
        Reply::RawStatus {
            status: 403,
            retry_after: None,
            body: json!({"error": {"message": format!("key {partial} may not use m")}}).to_string(),
        },
        // An error object inside the stream, after part of the answer.
        Reply::Raw(vec![
            content("Half an "),
            data(
                &json!({"error": {"message": format!("quota of {KEY} used up"),
                                    "code": "insufficient_quota"}}),
            ),
        ]),
        // A chunk whose parse error would quote it.
        Reply::Raw(vec![data(&json!({"choices": KEY}))]),
        // A server error page with line breaks, past the retries.
        Reply::RawStatus {
            status: 500,
            retry_after: None,
            body: format!("<html>\nupstream for {KEY}\nfell over\n</html>"),
        },
        Reply::RawStatus {
            status: 500,
            retry_after: None,
            body: format!("<html>\nupstream for {KEY}\nfell over\n</html>"),
        },
        Reply::RawStatus {
            status: 500,
            retry_after: None,
            body: format!("<html>\nupstream for {KEY}\nfell over\n</html>"),
        },
        Reply::RawStatus {
            status: 500,
            retry_after: None,
            body: format!("<html>\nupstream for {KEY}\nfell over\n</html>"),
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_key_is_scrubbed_from_every_path() {
    let fake = FakeOpenAi::start(echoing_paths()).await;
    let serve = Serve::model(ModelServe {
        base_url: &fake.base_url,
        key: KEY,
        log: "trace",
        extra: &[],
    });
    let client = reqwest::Client::new();
    let mut answers = Vec::new();
    for turn in 0..5 {
        let response = within(
            client
                .post(serve.url("/v1/sessions/alice/s/turns"))
                .bearer_auth(ALICE)
                .json(&json!({"input": format!("turn {turn}")}))
                .send(),
        )
        .await
        .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert_no_key(&format!("the answer to turn {turn}"), &body);
        answers.push((status, body));
    }
    // The child writes its log from its own thread: wait for the last record to arrive.
    eventually("the upstream's words in the log", || {
        serve.logs().contains("fell over")
    })
    .await;
    let logs = serve.logs();
    assert!(
        logs.contains("TRACE") || logs.contains("trace"),
        "the child logged at trace level"
    );
    assert!(
        logs.contains("fell over"),
        "the upstream's words are logged:\n{logs}"
    );
    assert_no_key("the log", &logs);
    for line in logs.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            !line.contains('\u{1b}'),
            "no terminal colours when stderr is not a terminal: {line:?}"
        );
    }
    let metrics = serve.metrics().await;
    assert_no_key("the metrics", &metrics);
    assert!(
        metrics.contains("code=\"model_refused\""),
        "errors are counted by their codes:\n{metrics}"
    );

    let history = within(
        client
            .get(serve.url("/v1/sessions/alice/s/events"))
            .bearer_auth(ADMIN)
            .send(),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert_no_key("the history", &history);
    let history: Value = serde_json::from_str(&history).unwrap();
    let reasons: Vec<&str> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"]["reason"].as_str())
        .collect();
    assert_eq!(reasons.len(), 5, "{history}");
    // The history says what kind of failure each was; the server's words, scrubbed, are in
    // the log (for operators), never in the history.
    assert_eq!(
        reasons[0], "the model server refused the request",
        "{reasons:?}"
    );
    assert!(
        reasons.iter().all(|r| !r.contains("used up")),
        "{reasons:?}"
    );
    assert!(
        logs.contains("[redacted] used up"),
        "the scrubbed words are logged:\n{logs}"
    );

    let codes: Vec<(u16, String)> = answers
        .iter()
        .map(|(status, body)| {
            let body: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            (
                *status,
                body["error"]["code"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            (502, "model_refused".to_owned()),
            (502, "model_refused".to_owned()),
            // A used-up quota is not mended by sending again later.
            (502, "model_refused".to_owned()),
            (502, "model_malformed".to_owned()),
            (502, "model_unavailable".to_owned()),
        ]
    );
}
