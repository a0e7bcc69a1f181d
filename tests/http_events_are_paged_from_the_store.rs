//! `GET /v1/sessions/{user}/{session}/events?from=&limit=` pages through a session's stored
//! history, oldest first, with `next_from` until the end; users read only their own sessions,
//! and bad pages are 400.

mod support;

use axum::http::StatusCode;
use serde_json::json;
use support::http::*;
use turnstile::EchoAgent;

#[tokio::test]
async fn the_history_comes_back_page_by_page() {
    let gw = TestGateway::new(EchoAgent);
    for input in ["one", "two", "three"] {
        let (status, body) = gw
            .send(post(
                "/v1/sessions/alice/s/turns",
                ALICE,
                json!({ "input": input }),
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, first) = gw
        .send(get("/v1/sessions/alice/s/events?from=1&limit=4", ALICE))
        .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let seqs: Vec<u64> = first["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(first["events"][0]["kind"]["text"], "one");
    assert_eq!(first["next_from"], 5);
    let (_, last) = gw
        .send(get("/v1/sessions/alice/s/events?from=5&limit=4", ALICE))
        .await;
    assert_eq!(last["events"].as_array().expect("events").len(), 2);
    assert!(last["next_from"].is_null(), "{last}");

    let (status, _) = gw.send(get("/v1/sessions/alice/s/events", BOB)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    for bad in [
        "limit=0",
        "from=0",
        "from=9223372036854775808",
        "limit=100000",
        "nope=1",
    ] {
        let (status, body) = gw
            .send(get(&format!("/v1/sessions/alice/s/events?{bad}"), ALICE))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (status, empty) = gw.send(get("/v1/sessions/alice/none/events", ALICE)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(empty["events"], json!([]));
}
