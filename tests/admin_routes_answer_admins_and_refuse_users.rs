//! The operator routes: `GET /v1/admin/live` pages through this process's live sessions with
//! their state, `POST /v1/admin/sessions/{u}/{s}/passivate` stops one, and
//! `GET /v1/admin/stats/stream` sends a JSON snapshot a second over a real socket. All of them
//! answer 403 to a user token and 401 without one; bad queries are 400; `/v1/me` tells a token
//! what it reaches.

#![cfg(feature = "http")]

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use support::harness::{eventually, within, GateAgent};
use support::http::*;
use turnstile::http::HttpConfig;
use turnstile::{EchoAgent, Runtime};

async fn turn(gw: &TestGateway, user: &str, session: &str, token: &str) {
    let uri = format!("/v1/sessions/{user}/{session}/turns");
    let (status, body) = gw.send(post(&uri, token, json!({"input": "hi"}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn user_tokens_get_403_and_no_token_401_on_every_admin_route() {
    let gw = TestGateway::new(EchoAgent);
    turn(&gw, "alice", "s", ALICE).await;
    let routes = [
        (Method::GET, "/v1/admin/live"),
        (Method::POST, "/v1/admin/sessions/alice/s/passivate"),
        (Method::GET, "/v1/admin/stats/stream"),
    ];
    for (method, uri) in routes {
        let (status, body) = gw
            .send(request(method.clone(), uri, Some(ALICE), None))
            .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{uri}"
        );
        let (status, _) = gw.send(request(method.clone(), uri, None, None)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}");
    }
    assert!(
        gw.runtime().is_live(&support::harness::key("alice", "s")),
        "still live"
    );
    let (status, me) = gw.send(get("/v1/me", ALICE)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        me,
        json!({"grant": "user", "user": "alice", "channels": []})
    );
    let (_, me) = gw.send(get("/v1/me", ADMIN)).await;
    assert_eq!(me, json!({"grant": "admin"}));
}

fn rows(body: &Value) -> Vec<String> {
    body["sessions"]
        .as_array()
        .expect("a sessions array")
        .iter()
        .map(|s| {
            format!(
                "{}/{}",
                s["user"].as_str().unwrap(),
                s["session"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn the_live_list_pages_by_key_filters_by_user_and_refuses_bad_queries() {
    let gw = TestGateway::new(EchoAgent);
    for (user, session, token) in [
        ("bob", "b1", BOB),
        ("alice", "a2", ALICE),
        ("alice", "a1", ALICE),
    ] {
        turn(&gw, user, session, token).await;
    }
    let (status, first) = gw.send(get("/v1/admin/live?limit=2", ADMIN)).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(rows(&first), ["alice/a1", "alice/a2"]);
    assert_eq!(first["total"], 3);
    let row = &first["sessions"][0];
    assert_eq!(row["state"], "idle");
    assert_eq!(row["turns"], 1);
    assert_eq!(row["unsaved"], 0);
    assert!(row["bytes"].as_u64().unwrap() > 0);
    assert!(row["idle_ms"].is_u64() && row["last_active_ms"].is_u64());
    let cursor = first["next_cursor"].as_str().expect("a cursor");
    let (_, second) = gw
        .send(get(
            &format!("/v1/admin/live?limit=2&cursor={cursor}"),
            ADMIN,
        ))
        .await;
    assert_eq!(rows(&second), ["bob/b1"]);
    assert_eq!(second["next_cursor"], Value::Null);
    let (_, bobs) = gw.send(get("/v1/admin/live?user=bob", ADMIN)).await;
    assert_eq!(rows(&bobs), ["bob/b1"]);
    for bad in [
        "/v1/admin/live?limit=0",
        "/v1/admin/live?limit=1001",
        "/v1/admin/live?cursor=nothex",
        "/v1/admin/live?colour=red",
    ] {
        let (status, body) = gw.send(get(bad, ADMIN)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
}

#[tokio::test]
async fn passivate_stops_a_session_after_its_running_turn() {
    let agent = Arc::new(GateAgent::default());
    let gw = TestGateway::with(
        Runtime::builder().agent_arc(agent.clone()),
        HttpConfig::default(),
    );
    let served = Served::start(gw.gateway.clone()).await;
    let client = reqwest::Client::new();
    let running = client_post(
        &client,
        &served,
        "/v1/sessions/alice/s/turns",
        ALICE,
        json!({"input": "hold"}),
    )
    .send();
    let running = tokio::spawn(running);
    eventually("the turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let (_, live) = gw.send(get("/v1/admin/live", ADMIN)).await;
    assert_eq!(live["sessions"][0]["state"], "running");
    let (status, body) = gw
        .send(request(
            Method::POST,
            "/v1/admin/sessions/alice/s/passivate",
            Some(ADMIN),
            None,
        ))
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"passivating": true}))
    );
    let (_, live) = gw.send(get("/v1/admin/live", ADMIN)).await;
    assert_eq!(live["sessions"][0]["state"], "stopping");
    agent.gate.add_permits(1);
    let answer = within(running).await.expect("task").expect("answer");
    assert_eq!(answer.status(), StatusCode::OK, "the running turn finished");
    let k = support::harness::key("alice", "s");
    eventually("the session stopped", || {
        !gw.runtime().is_live(&k) && gw.runtime().live_sessions() == 0
    })
    .await;
    let (_, body) = gw
        .send(request(
            Method::POST,
            "/v1/admin/sessions/alice/s/passivate",
            Some(ADMIN),
            None,
        ))
        .await;
    assert_eq!(body, json!({"passivating": false}), "no longer live");
    served.stop().await;
}

#[tokio::test]
async fn the_stats_stream_sends_a_snapshot_a_second_with_turn_figures() {
    let gw = TestGateway::new(EchoAgent);
    let served = Served::start(gw.gateway.clone()).await;
    let client = reqwest::Client::new();
    let response = client
        .get(served.url("/v1/admin/stats/stream"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("open the stream");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut events = EventReader::new(response);
    let (name, first) = within(events.next()).await.expect("a first snapshot");
    assert_eq!(name, "stats");
    assert_eq!(first["live_sessions"], 0);
    for i in 0..5 {
        let answer = client_post(
            &client,
            &served,
            &format!("/v1/sessions/alice/s{i}/turns"),
            ALICE,
            json!({"input": "x"}),
        )
        .send()
        .await
        .expect("a turn");
        assert_eq!(answer.status(), StatusCode::OK);
    }
    // The snapshots that follow (one about every second) cover the turns just answered: their
    // rates add up to five turns.
    let mut counted = 0.0;
    let mut timed = false;
    let last = loop {
        let (_, snapshot) = within(events.next()).await.expect("a snapshot");
        assert!(snapshot["interval_s"].as_f64().unwrap() > 0.5, "{snapshot}");
        counted +=
            snapshot["turns_per_s"].as_f64().unwrap() * snapshot["interval_s"].as_f64().unwrap();
        timed |= snapshot["turn_p50_ms"].is_f64() && snapshot["turn_p99_ms"].is_f64();
        if snapshot["totals"]["turns"] == 5 {
            break snapshot;
        }
    };
    assert!(
        (counted - 5.0).abs() < 0.01,
        "rates add up to the turns: {counted}"
    );
    assert!(timed, "a snapshot with turns has their percentiles");
    assert_eq!(last["live_sessions"], 5);
    for reason in ["overloaded", "at_capacity", "draining", "busy"] {
        assert_eq!(last["rejections"][reason], 0);
    }
    // The stream ends when the server drains, so it never holds a shutdown up.
    let stopping = tokio::spawn(served.stop());
    loop {
        if within(events.next()).await.is_none() {
            break;
        }
    }
    within(stopping).await.expect("the server stopped");
}
