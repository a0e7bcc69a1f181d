//! `/metrics` renders the Prometheus text of the installed recorder: the gateway's request
//! counters and the runtime's own metrics, and the counters an operator alerts on at 0 from the
//! start. Admin only; 404 when no recorder is given.

#![cfg(feature = "http")]

mod support;

use axum::http::StatusCode;
use metrics_exporter_prometheus::PrometheusBuilder;
use serde_json::json;
use support::http::*;
use turnstile::EchoAgent;

#[tokio::test]
async fn metrics_show_requests_and_turns_in_prometheus_text() {
    // Property: after a turn, the scrape lists the HTTP request counter labelled by route and
    // status, and the runtime's turn metrics, as `text/plain` exposition.
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .expect("this test binary installs the only recorder");
    let gw = TestGateway::new(EchoAgent);
    let gw = TestGateway {
        gateway: gw.gateway.clone().with_metrics(handle),
        ..gw
    };
    let (status, _) = gw
        .send(post(
            "/v1/sessions/alice/s/turns",
            ALICE,
            json!({"input": "hi"}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);

    let (status, headers, text) = gw.send_raw(get("/metrics", ADMIN)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    // Other tests of this binary record into the same global recorder: look for our line.
    let request_line = text
        .lines()
        .filter(|l| l.starts_with("turnstile_http_requests_total{"))
        .find(|l| l.contains(r#"route="/v1/sessions/{user}/{session}/turns""#))
        .unwrap_or_else(|| panic!("no request counter for the turn route in:\n{text}"));
    assert!(request_line.contains(r#"status="200""#), "{request_line}");
    assert!(text.contains("turnstile_activations_total"), "{text}");
    // The write of a turn's events, timed by the store that took them (the memory store here).
    assert!(
        text.lines()
            .any(|l| l.starts_with("turnstile_store_write_seconds")
                && l.contains(r#"store="memory""#)),
        "{text}"
    );

    // What an operator alerts on is there from the start, at 0, before anything happened.
    for series in [
        r#"turnstile_turn_errors_total{code="store"} 0"#,
        r#"turnstile_turn_errors_total{code="model_unavailable"} 0"#,
        r#"turnstile_leases_lost_total{reason="lapsed"} 0"#,
        r#"turnstile_lease_renewals_total{outcome="unanswered"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == series), "no {series} in:\n{text}");
    }

    let (status, _) = gw.send(get("/metrics", ALICE)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn without_a_recorder_metrics_are_404() {
    // Property: a gateway built without a metrics handle says so instead of answering empty.
    let gw = TestGateway::new(EchoAgent);
    let (status, body) = gw.send(get("/metrics", ADMIN)).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));
}
