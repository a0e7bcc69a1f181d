//! Over HTTP, artifacts follow the sessions' auth: a user token reaches only its own user's
//! session and user artifacts (403 for anyone else's, on every artifact route and method), an
//! admin token reaches all. The owner gets the bytes back with their type, by newest and by
//! `?version=N`, and sees the listing and the versions.
#![cfg(feature = "http")]

mod support;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::json;
use turnstile::artifact::MemoryArtifactStore;
use turnstile::http::HttpConfig;
use turnstile::{EchoAgent, Runtime};

use support::http::{code, get, TestGateway, ADMIN, ALICE, BOB};

fn put(uri: &str, token: &str, body: &'static [u8], mime: &str) -> Request<Body> {
    Request::builder()
        .method(Method::PUT)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, mime)
        .body(Body::from(body))
        .expect("a valid request")
}

fn gateway() -> TestGateway {
    let builder = Runtime::builder()
        .agent(EchoAgent)
        .with_artifacts(Arc::new(MemoryArtifactStore::new()));
    TestGateway::with(builder, HttpConfig::default())
}

#[tokio::test]
async fn the_owner_reads_versions_and_others_are_forbidden() {
    let gw = gateway();
    let session = "/v1/sessions/alice/s1/artifacts";
    let user = "/v1/users/alice/artifacts";
    for base in [session, user] {
        let uri = format!("{base}/report.md");
        let (status, body) = gw.send(put(&uri, ALICE, b"# v1", "text/markdown")).await;
        assert_eq!(
            (status, body.clone()),
            (StatusCode::OK, json!({"version": 1})),
            "{uri}"
        );
        let (_, body) = gw.send(put(&uri, ALICE, b"# v2", "text/markdown")).await;
        assert_eq!(body, json!({"version": 2}));

        let (status, headers, text) = gw.send_raw(get(&uri, ALICE)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(text, "# v2", "the newest by default");
        assert_eq!(headers[header::CONTENT_TYPE], "text/markdown");
        assert_eq!(headers["x-artifact-version"], "2");
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        let (_, _, old) = gw.send_raw(get(&format!("{uri}?version=1"), ALICE)).await;
        assert_eq!(old, "# v1");
        let (status, body) = gw.send(get(&format!("{uri}?version=3"), ALICE)).await;
        assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));

        let (_, listing) = gw.send(get(base, ALICE)).await;
        assert_eq!(listing["artifacts"][0]["name"], "report.md");
        assert_eq!(listing["artifacts"][0]["version"], 2);
        let (_, versions) = gw.send(get(&format!("{uri}/versions"), ALICE)).await;
        assert_eq!(versions["versions"].as_array().map(Vec::len), Some(2));

        // Bob reaches none of it, by any route or method.
        for request in [
            get(&uri, BOB),
            get(base, BOB),
            get(&format!("{uri}/versions"), BOB),
            get(&format!("{uri}?version=1"), BOB),
            put(&uri, BOB, b"overwrite", "text/plain"),
        ] {
            let (status, body) = gw.send(request).await;
            assert_eq!(
                (status, code(&body)),
                (StatusCode::FORBIDDEN, "forbidden"),
                "{uri}"
            );
        }
        let (status, _, text) = gw.send_raw(get(&uri, ADMIN)).await;
        assert_eq!(
            (status, text.as_str()),
            (StatusCode::OK, "# v2"),
            "admin reads all"
        );
    }
    let (_, body) = gw
        .send(get(&format!("{session}/report.md/versions"), ALICE))
        .await;
    assert_eq!(
        body["versions"].as_array().map(Vec::len),
        Some(2),
        "bob wrote nothing"
    );
}

#[tokio::test]
async fn without_an_artifact_store_the_routes_say_so() {
    let gw = TestGateway::new(EchoAgent);
    let (status, body) = gw.send(get("/v1/sessions/alice/s1/artifacts", ALICE)).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "no_artifact_store")
    );
}
