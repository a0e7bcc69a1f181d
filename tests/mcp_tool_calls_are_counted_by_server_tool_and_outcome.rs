//! Property: every MCP tool call is counted on `/metrics` by server, tool and outcome
//! (`turnstile_mcp_tool_calls_total`) with its duration (`turnstile_mcp_tool_call_seconds`).

#![cfg(all(feature = "mcp", feature = "http"))]

mod support;

use serde_json::json;
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use support::http::ALICE;
use support::mcp::{asks, everything};
use support::serve::{ModelServe, Serve};

/// The value of the sample of `metric` whose labels include all of `labels`.
fn sample(page: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    page.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .find(|l| labels.iter().all(|label| l.contains(label)))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

#[tokio::test]
async fn calls_are_counted_with_their_outcome_and_duration() {
    let fake = FakeOpenAi::start(vec![
        Reply::ToolCalls(vec![
            ("a".into(), "echo".into(), r#"{"message":"one"}"#.into()),
            (
                "b".into(),
                "get-sum".into(),
                r#"{"a":"not a number","b":1}"#.into(),
            ),
        ]),
        Reply::text(&["counted"]),
        asks("echo", r#"{"message":"two"}"#),
        Reply::text(&["counted again"]),
    ])
    .await;
    let spec = format!("everything=stdio:{} stdio", everything().display());
    let serve = Serve::model(ModelServe {
        base_url: &fake.base_url,
        key: "sk-unused-key-0000",
        log: "warn",
        extra: &["--mcp", &spec, "--mcp-allow", "echo,get-sum"],
    });
    for input in ["count", "again"] {
        let response = within(
            reqwest::Client::new()
                .post(serve.url("/v1/sessions/alice/metrics/turns"))
                .bearer_auth(ALICE)
                .json(&json!({"input": input}))
                .send(),
        )
        .await
        .unwrap();
        assert_eq!(response.status(), 200);
    }
    let page = serve.metrics().await;
    let calls = "turnstile_mcp_tool_calls_total";
    let server = "server=\"everything\"";
    assert_eq!(
        sample(&page, calls, &[server, "tool=\"echo\"", "outcome=\"ok\""]),
        Some(2.0),
        "{page}"
    );
    assert_eq!(
        sample(
            &page,
            calls,
            &[server, "tool=\"get-sum\"", "outcome=\"error\""]
        ),
        Some(1.0),
        "{page}"
    );
    assert_eq!(
        sample(
            &page,
            "turnstile_mcp_tool_call_seconds_count",
            &[server, "tool=\"echo\""]
        ),
        Some(2.0),
        "{page}"
    );
}
