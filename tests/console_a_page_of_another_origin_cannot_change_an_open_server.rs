//! Property: a `serve` without tokens (the default on loopback) takes no state-changing request
//! from a page of another origin. In a real Chromium, a page served from a second origin posts
//! to the server as an attacker's page would — a form's body-less POST (`…/clear`, which needs
//! no JSON body) and a `no-cors` fetch — and both are refused (403, nothing cleared), while the
//! same request from a page of the server's own origin clears the session. A page that reaches
//! the server under a name of its own resolving to loopback (DNS rebinding: Chromium maps the
//! name to 127.0.0.1), which the browser takes for that page's own origin, is refused too,
//! reads included.

#![cfg(feature = "http")]

mod support;

use axum::response::Html;
use axum::routing::get;
use serde_json::{json, Value};
use support::browser::{Browser, Server};

/// The session's stored events.
async fn events(server: &Server) -> Vec<Value> {
    let page: Value = reqwest::get(server.url("/v1/sessions/alice/chat/events"))
        .await
        .expect("read the events")
        .json()
        .await
        .expect("JSON");
    page["events"].as_array().cloned().expect("events")
}

fn cleared(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| e["kind"]["type"] == "context_cleared")
        .count()
}

/// Serves the attacker's pages on another origin (another port of loopback): `/form` posts a
/// form to `target` as it loads, `/fetch` sends it a `no-cors` POST and says when it was sent.
async fn other_origin(target: String) -> String {
    let form = format!(
        "<!doctype html><title>form</title><form id=f method=post action=\"{target}\"></form>\
         <script>document.getElementById('f').submit()</script>"
    );
    let fetch = format!(
        "<!doctype html><title>fetch</title><script>fetch({target:?}, {{method: 'POST', mode: \
         'no-cors'}}).then(() => document.title = 'sent', () => document.title = 'failed')\
         </script>"
    );
    let app = axum::Router::new()
        .route("/form", get(move || async move { Html(form) }))
        .route("/fetch", get(move || async move { Html(fetch) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the other origin");
    let base = format!("http://{}", listener.local_addr().expect("its address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// A `serve` without tokens whose session `alice/chat` holds one turn.
async fn open_server_with_a_turn() -> Server {
    let server = Server::open().await;
    let answer = reqwest::Client::new()
        .post(server.url("/v1/sessions/alice/chat/turns"))
        .json(&json!({"input": "remember this"}))
        .send()
        .await
        .expect("a turn");
    assert_eq!(answer.status(), 200);
    server
}

#[tokio::test]
async fn a_page_of_another_origin_cannot_clear_a_session_of_an_open_server() {
    let server = open_server_with_a_turn().await;
    let target = server.url("/v1/sessions/alice/chat/clear");
    let attacker = other_origin(target.clone()).await;
    let browser = Browser::start().await;

    // A no-cors fetch: sent, and refused.
    browser
        .client
        .goto(&format!("{attacker}/fetch"))
        .await
        .expect("open the fetch page");
    browser
        .until_true("the fetch was sent", "return document.title === 'sent';")
        .await;
    // A form post: the browser shows the server's answer.
    browser
        .client
        .goto(&format!("{attacker}/form"))
        .await
        .expect("open the form page");
    browser
        .until_true(
            "the server's refusal is shown",
            "return location.href.endsWith('/clear') && document.body.innerText.includes('another origin');",
        )
        .await;
    let shown = browser.eval("return document.body.innerText;").await;
    assert!(
        shown.as_str().is_some_and(|t| t.contains("forbidden")),
        "{shown}"
    );
    assert_eq!(
        cleared(&events(&server).await),
        0,
        "a page of another origin cleared the session"
    );

    // The same request from a page of the server's own origin goes through.
    browser
        .client
        .goto(&server.url("/healthz"))
        .await
        .expect("open a page of the server");
    let status = browser
        .eval(&format!(
            "return await fetch({target:?}, {{method: 'POST'}}).then(r => r.status);"
        ))
        .await;
    assert_eq!(status, json!(200));
    assert_eq!(
        cleared(&events(&server).await),
        1,
        "the session was cleared"
    );
    browser.stop().await;
    server.stop().await;
}

#[tokio::test]
async fn a_page_under_a_name_rebound_to_loopback_is_refused_reads_included() {
    let server = open_server_with_a_turn().await;
    let port = server.base.rsplit(':').next().expect("a port").to_owned();
    let browser = Browser::with_args(&["--host-resolver-rules=MAP rebound.test 127.0.0.1"]).await;
    // The page the browser believes is rebound.test's own: the server answers it under that
    // name.
    let rebound = format!("http://rebound.test:{port}");
    browser
        .client
        .goto(&format!("{rebound}/healthz"))
        .await
        .expect("open the rebound page");
    let read = browser
        .eval(&format!(
            "return await fetch('{rebound}/v1/sessions/alice/chat/events').then(r => r.status);"
        ))
        .await;
    assert_eq!(read, json!(403), "a read under the rebound name");
    let clear = browser
        .eval(&format!(
            "return await fetch('{rebound}/v1/sessions/alice/chat/clear', {{method: 'POST'}})\
             .then(r => r.text());"
        ))
        .await;
    let clear = clear.as_str().unwrap_or_default().to_owned();
    assert!(
        clear.contains("forbidden") && clear.contains("rebound.test"),
        "{clear}"
    );
    assert_eq!(
        cleared(&events(&server).await),
        0,
        "a page under a rebound name cleared the session"
    );
    browser.stop().await;
    server.stop().await;
}
