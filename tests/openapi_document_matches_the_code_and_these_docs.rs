//! Property: the OpenAPI document served at `/openapi.json` is the one generated from the code,
//! `docs/openapi.json` is that same document (so a change to a route or a body that is not
//! checked in fails here), and every endpoint `docs/http-api.md` lists is in it with its method.
//! `TURNSTILE_BLESS=1` rewrites `docs/openapi.json` from the code instead of comparing.

#![cfg(feature = "http")]

mod support;

use axum::body::Body;
use axum::http::Request;
use serde_json::Value;

use support::harness::RecordingAgent;
use support::http::TestGateway;

const CHECKED_IN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json");
const HTTP_DOCS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/http-api.md");

#[tokio::test]
async fn the_served_document_is_the_generated_one() {
    let gateway = TestGateway::new(RecordingAgent::default());
    let request = Request::get("/openapi.json").body(Body::empty()).unwrap();
    let (status, headers, body) = gateway.send_raw(request).await;
    assert_eq!(status, 200, "GET /openapi.json needs no token");
    assert_eq!(headers["content-type"], "application/json");
    let served: Value = serde_json::from_str(&body).expect("the document is JSON");
    let generated: Value = serde_json::from_str(&turnstile::http::openapi_json()).unwrap();
    assert_eq!(served, generated);
    assert_eq!(served["openapi"], "3.1.0");
}

#[test]
fn the_checked_in_document_is_the_generated_one() {
    let generated = turnstile::http::openapi_json() + "\n";
    if std::env::var_os("TURNSTILE_BLESS").is_some() {
        std::fs::write(CHECKED_IN, &generated).expect("write docs/openapi.json");
        return;
    }
    let checked_in = std::fs::read_to_string(CHECKED_IN).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/openapi.json differs from the document the code generates; if the API change is \
         meant, regenerate it with `TURNSTILE_BLESS=1 cargo test --test \
         openapi_document_matches_the_code_and_these_docs` and add a CHANGELOG entry"
    );
}

#[test]
fn every_endpoint_the_docs_list_is_in_the_document() {
    let document: Value = serde_json::from_str(&turnstile::http::openapi_json()).unwrap();
    let docs = std::fs::read_to_string(HTTP_DOCS).expect("read docs/http-api.md");
    let mut listed = 0;
    for line in docs.lines() {
        let Some(endpoint) = documented_endpoint(line) else {
            continue;
        };
        let (method, path) = endpoint;
        listed += 1;
        let operation = &document["paths"][path][method.to_ascii_lowercase()];
        assert!(
            operation.is_object(),
            "docs/http-api.md lists `{method} {path}`, which the OpenAPI document lacks"
        );
    }
    assert!(
        listed >= 15,
        "found only {listed} endpoints in docs/http-api.md"
    );
}

/// `### \`METHOD /path?query\`` headings and `| \`METHOD /path\` |` table rows.
fn documented_endpoint(line: &str) -> Option<(&str, &str)> {
    let rest = line
        .strip_prefix("### `")
        .or_else(|| line.strip_prefix("| `"))?;
    let (method, rest) = rest.split_once(' ')?;
    if !["GET", "POST", "PUT", "DELETE", "PATCH"].contains(&method) {
        return None;
    }
    let path = rest.split(['`', '?']).next()?;
    path.starts_with('/').then_some((method, path))
}
