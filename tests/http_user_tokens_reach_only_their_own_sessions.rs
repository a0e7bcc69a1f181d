//! Bearer-token auth: a user token reaches only its own user's sessions (everything else is
//! 403), an admin token reaches all, and without tokens the server serves loopback only.

#![cfg(feature = "http")]

mod support;

use axum::http::{Method, StatusCode};
use serde_json::json;
use support::http::*;
use turnstile::{
    channel::ChannelRouter, channel::MemoryPairingStore, http::Gateway, http::ServeError,
    EchoAgent, InMemoryStore, Runtime,
};

#[tokio::test]
async fn a_user_token_is_refused_on_every_route_of_another_user() {
    // Property: each session and user route answers 403 to a token of another user, and
    // nothing of bob's is read or changed.
    let gw = TestGateway::new(EchoAgent);
    let (status, _) = gw
        .send(post(
            "/v1/sessions/bob/s/turns",
            BOB,
            json!({"input": "mine"}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let turn = Some(json!({"input": "x"}));
    let attempts = [
        (Method::POST, "/v1/sessions/bob/s/turns", turn.clone()),
        (Method::POST, "/v1/sessions/bob/s/interrupt", None),
        (Method::GET, "/v1/sessions/bob/s", None),
        (Method::POST, "/v1/sessions/bob/s/clear", None),
        (
            Method::POST,
            "/v1/sessions/bob/s/fork",
            Some(json!({"to": "stolen"})),
        ),
        (Method::DELETE, "/v1/sessions/bob/s", None),
        (Method::GET, "/v1/users/bob/sessions", None),
        (Method::DELETE, "/v1/users/bob", None),
    ];
    for (method, uri, body) in attempts {
        let (status, answer) = gw
            .send(request(method.clone(), uri, Some(ALICE), body))
            .await;
        assert_eq!(
            (status, code(&answer)),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{method} {uri}"
        );
    }
    let (status, body) = gw.send(get("/v1/sessions/bob/s", BOB)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["meta"]["events"], 2, "bob's session is untouched");
}

#[tokio::test]
async fn admin_routes_and_other_channels_are_403_to_user_tokens() {
    // Property: pairing changes and /metrics need an admin token; a user token posts only to
    // the channels it lists.
    let gw = TestGateway::new(EchoAgent);
    let pair = Some(json!({"user": "alice"}));
    for (method, uri, body) in [
        (Method::PUT, "/v1/pairings/slack/U1", pair),
        (Method::DELETE, "/v1/pairings/slack/U1", None),
        (Method::GET, "/metrics", None),
    ] {
        let (status, _) = gw
            .send(request(method.clone(), uri, Some(ALICE), body))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}");
    }
    let message = json!({"chat": "C1", "user": "U1", "input": "hi"});
    let (status, _) = gw
        .send(post("/v1/channels/slack/messages", ALICE, message.clone()))
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "alice's token lists no channel"
    );
    let (status, _) = gw
        .send(post(
            "/v1/channels/web/messages",
            SLACK_BOT,
            message.clone(),
        ))
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "the bot may post to slack only"
    );
    let (status, _) = gw
        .send(post("/v1/channels/slack/messages", SLACK_BOT, message))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_user_token_sees_only_pairings_to_itself() {
    // Property: GET of a pairing answers a user token only when the account is paired with
    // that user; otherwise 403, whether the account is paired with someone else or not at all.
    let gw = TestGateway::new(EchoAgent);
    for (account, user) in [("U1", "alice"), ("U2", "bob")] {
        let uri = format!("/v1/pairings/slack/{account}");
        let body = Some(json!({ "user": user }));
        assert_eq!(
            gw.send(request(Method::PUT, &uri, Some(ADMIN), body))
                .await
                .0,
            StatusCode::OK
        );
    }
    let (status, body) = gw.send(get("/v1/pairings/slack/U1", ALICE)).await;
    assert_eq!(
        (status, body["user"].as_str()),
        (StatusCode::OK, Some("alice"))
    );
    assert_eq!(
        gw.send(get("/v1/pairings/slack/U2", ALICE)).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        gw.send(get("/v1/pairings/slack/U9", ALICE)).await.0,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn an_admin_token_reaches_every_user() {
    // Property: the admin token passes every user check.
    let gw = TestGateway::new(EchoAgent);
    let (status, _) = gw
        .send(post(
            "/v1/sessions/bob/s/turns",
            ADMIN,
            json!({"input": "x"}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        gw.send(get("/v1/users/bob/sessions", ADMIN)).await.0,
        StatusCode::OK
    );
    assert_eq!(
        gw.send(delete("/v1/users/bob", ADMIN)).await.0,
        StatusCode::OK
    );
}

fn open_gateway() -> Gateway {
    let runtime = Runtime::builder()
        .agent(EchoAgent)
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    Gateway::new(ChannelRouter::new(runtime, MemoryPairingStore::new()))
}

#[tokio::test]
async fn without_tokens_the_server_refuses_any_address_but_loopback() {
    // Property: with no tokens configured, serving on a non-loopback address is refused with
    // a message that says why and what to do.
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let err = open_gateway()
        .serve(listener, std::future::pending())
        .await
        .unwrap_err();
    assert!(matches!(err, ServeError::OpenOnNonLoopback { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("--tokens") && message.contains("127.0.0.1"),
        "{message}"
    );
}

#[tokio::test]
async fn without_tokens_every_request_is_allowed_on_loopback() {
    // Property: an open gateway needs no Authorization header.
    use tower::ServiceExt;
    let gateway = open_gateway();
    let response = gateway
        .router()
        .oneshot(request(
            Method::GET,
            "/v1/users/anyone/sessions",
            None,
            None,
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[test]
fn the_binary_without_tokens_refuses_a_public_address_and_says_why() {
    // Property: `turnstile serve` with no tokens file and a non-loopback address exits with a
    // failure before serving, naming the remedy.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["serve", "--addr", "0.0.0.0:0", "--store", "memory"])
        .env_remove("TURNSTILE_TOKENS")
        .output()
        .expect("run turnstile serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing") && stderr.contains("--tokens"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");
}
