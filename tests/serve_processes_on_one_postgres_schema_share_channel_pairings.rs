//! Property: two `turnstile serve` processes on one PostgreSQL schema share channel pairings —
//! a pairing made through one is what the other resolves, moving an account through the other
//! reports the user it had, and deleting a user through either removes their pairings for both.
#![cfg(all(feature = "postgres", feature = "http"))]

mod support;

use serde_json::{json, Value};

use support::http::ADMIN;
use support::postgres::TestDatabase;
use support::serve::Serve;

/// `method` on `serve`'s `path` with the admin token; the status and the JSON body.
async fn admin(
    method: reqwest::Method,
    serve: &Serve,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .request(method, serve.url(path))
        .bearer_auth(ADMIN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("a response");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pairing_made_at_one_process_is_seen_and_removed_at_the_other() {
    use reqwest::Method;
    let database = TestDatabase::create().await;
    let joint = if database.url().contains('?') {
        '&'
    } else {
        '?'
    };
    let store = format!("{}{joint}schema=shared", database.url());
    // Artifacts have no PostgreSQL store: this test needs none.
    let one = Serve::start_on(&store, 0, 1, &["--artifacts", "off"]);
    let two = Serve::start_on(&store, 0, 1, &["--artifacts", "off"]);

    let (status, body) = admin(
        Method::PUT,
        &one,
        "/v1/pairings/slack/U1",
        Some(json!({"user": "alice"})),
    )
    .await;
    assert_eq!((status, &body["previous"]), (200, &Value::Null), "{body}");
    let (status, body) = admin(Method::GET, &two, "/v1/pairings/slack/U1", None).await;
    assert_eq!((status, &body["user"]), (200, &json!("alice")), "{body}");

    let (status, body) = admin(
        Method::PUT,
        &two,
        "/v1/pairings/slack/U1",
        Some(json!({"user": "bob"})),
    )
    .await;
    assert_eq!(
        (status, &body["previous"]),
        (200, &json!("alice")),
        "{body}"
    );
    let (status, body) = admin(Method::GET, &one, "/v1/pairings/slack/U1", None).await;
    assert_eq!((status, &body["user"]), (200, &json!("bob")), "{body}");

    let (status, body) = admin(Method::DELETE, &two, "/v1/users/bob", None).await;
    assert_eq!(
        (status, &body["deleted_pairings"]),
        (200, &json!(1)),
        "{body}"
    );
    let (status, body) = admin(Method::GET, &one, "/v1/pairings/slack/U1", None).await;
    assert_eq!(status, 404, "{body}");
}
