//! `/` and `/console` are served from the binary with a Content-Security-Policy that allows
//! no inline script and nothing from another origin; every asset they name is served with its
//! type; nothing needs a token to load, and nothing unknown is served.

#![cfg(feature = "http")]

mod support;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use support::http::*;
use turnstile::EchoAgent;

fn plain_get(uri: &str) -> Request<Body> {
    Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(Body::empty())
        .expect("a request")
}

#[tokio::test]
async fn pages_carry_a_strict_csp_and_name_only_served_assets() {
    let gw = TestGateway::new(EchoAgent);
    for page in ["/", "/console", "/inspect"] {
        let (status, headers, html) = gw.send_raw(plain_get(page)).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert!(headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"));
        let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        let assets: Vec<&str> = html
            .split("src=\"")
            .chain(html.split("href=\""))
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .filter(|s| s.starts_with("/assets/"))
            .collect();
        assert!(
            assets.len() >= 3,
            "{page} names its script and style: {assets:?}"
        );
        for asset in assets {
            let (status, headers, body) = gw.send_raw(plain_get(asset)).await;
            assert_eq!(status, StatusCode::OK, "{asset}");
            assert!(!body.is_empty());
            let kind = headers[header::CONTENT_TYPE].to_str().unwrap();
            let want = if asset.ends_with(".js") {
                "text/javascript"
            } else if asset.ends_with(".svg") {
                "image/svg+xml"
            } else {
                "text/css"
            };
            assert!(kind.starts_with(want), "{asset}: {kind}");
        }
    }
}

#[tokio::test]
async fn unknown_assets_are_404_and_api_routes_still_need_tokens() {
    let gw = TestGateway::new(EchoAgent);
    for path in ["/assets/secret.txt", "/assets/..%2FCargo.toml", "/assets/"] {
        let (status, _, _) = gw.send_raw(plain_get(path)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    let (status, _, _) = gw.send_raw(plain_get("/v1/admin/live")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
