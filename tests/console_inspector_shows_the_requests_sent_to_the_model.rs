//! What a turn sent its model, through the HTTP API and in a real browser: `GET
//! …/turns/{seq}/model-requests` answers an admin with each round's request as sent (the
//! messages, the model, the options), refuses a user token (the request holds the system prompt
//! and the tools), and says plainly when this process keeps none for the turn. In the inspector,
//! a turn that asked its model offers "Requests sent to the model": opened, it lists the
//! messages (bidi controls written out) and the whole JSON, stays open while a live session is
//! drawn again, and passes axe-core; with a user token it says an admin token is needed.

#![cfg(all(feature = "http", feature = "openai"))]

mod support;

use serde_json::{json, Value};
use support::browser::*;
use support::fake_openai::{FakeOpenAi, Reply};

const SESSION: &str = "/v1/sessions/alice/sent";

async fn turn(server: &Server, input: &str) -> u64 {
    let answer = reqwest::Client::new()
        .post(server.url(&format!("{SESSION}/turns")))
        .bearer_auth(ALICE)
        .json(&json!({ "input": input }))
        .send()
        .await
        .expect("a turn");
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.expect("the turn's JSON");
    body["seq"].as_u64().expect("the turn's seq")
}

async fn get(server: &Server, token: &str, path: &str) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .get(server.url(path))
        .bearer_auth(token)
        .send()
        .await
        .expect("an answer");
    let status = answer.status().as_u16();
    (status, answer.json().await.expect("a JSON body"))
}

/// The texts of the messages listed in the open requests of the turn ending at `seq`.
fn listed(seq: u64) -> String {
    format!(
        "return [...document.querySelectorAll('details.sent-requests[data-seq=\"{seq}\"] .sent-messages li')]
            .map(li => li.dataset.role + '|' + li.textContent);"
    )
}

/// A browser signed in with `token` on the page at `page`, showing alice's session in the
/// inspector.
async fn inspector(server: &Server, page: &str, token: &str) -> Browser {
    let browser = Browser::start().await;
    browser.sign_in(&server.url(page), token, None).await;
    browser
        .client
        .goto(&server.url("/inspect#alice/sent"))
        .await
        .expect("open the inspector");
    browser
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_shows_what_each_turn_sent_its_model_to_an_admin() {
    let fake = FakeOpenAi::start(vec![Reply::text(&["first answer"])]).await;
    let server = Server::with_agent(&[
        "--agent",
        "openai",
        "--base-url",
        &fake.base_url,
        "--model",
        "m-inspected",
    ])
    .await;
    let first = turn(&server, "hello \u{202E}olleh").await;
    let second = turn(&server, "and again").await;

    // The API: an admin reads each round's request as sent.
    let (status, body) = get(
        &server,
        ADMIN,
        &format!("{SESSION}/turns/{second}/model-requests"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["seq"], second);
    let requests = body["requests"].as_array().expect("requests");
    assert_eq!(requests.len(), 1, "{body}");
    let sent = &requests[0];
    assert_eq!(sent["round"], 1);
    assert_eq!(sent["method"], "POST");
    assert_eq!(sent["truncated"], false);
    assert_eq!(sent["body"], fake.requests()[1], "kept as the model got it");
    assert_eq!(sent["body"]["model"], "m-inspected");
    let roles: Vec<&str> = sent["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(
        sent["body_bytes"].as_u64().unwrap() as usize,
        serde_json::to_vec(&fake.requests()[1]).unwrap().len()
    );
    // A user token is refused; a seq that ends no turn and seq 0 are answered plainly.
    let (status, body) = get(
        &server,
        ALICE,
        &format!("{SESSION}/turns/{second}/model-requests"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("admin"));
    let (status, body) = get(
        &server,
        ADMIN,
        &format!("{SESSION}/turns/{}/model-requests", second + 100),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("keeps no model request"),
        "{body}"
    );
    let (status, _) = get(&server, ADMIN, &format!("{SESSION}/turns/0/model-requests")).await;
    assert_eq!(status, 400);

    // The inspector, as an admin.
    let browser = inspector(&server, "/console", ADMIN).await;
    browser
        .until_true(
            "both turns offer what they sent",
            "return document.querySelectorAll('#turns details.sent-requests').length === 2;",
        )
        .await;
    browser
        .click(&format!(
            "details.sent-requests[data-seq=\"{first}\"] > summary"
        ))
        .await;
    browser
        .until_true(
            "the first turn's request is shown",
            &format!(
                "return document.querySelectorAll('details.sent-requests[data-seq=\"{first}\"] .sent-request').length === 1;"
            ),
        )
        .await;
    let title = browser
        .eval(&format!(
            "return document.querySelector('details.sent-requests[data-seq=\"{first}\"] h3').textContent;"
        ))
        .await;
    let title = title.as_str().unwrap();
    assert!(
        title.starts_with("Request 1: POST http://127.0.0.1:")
            && title.ends_with("/v1/chat/completions"),
        "{title}"
    );
    assert_eq!(
        browser.eval(&listed(first)).await,
        json!(["user|user: hello \u{27E6}U+202E\u{27E7}olleh"]),
        "the message listed, its bidi control written out"
    );
    let options = browser
        .eval(&format!(
            "return document.querySelector('details.sent-requests[data-seq=\"{first}\"] .sent-options').textContent;"
        ))
        .await;
    assert!(
        options
            .as_str()
            .unwrap()
            .contains("model = \"m-inspected\""),
        "{options}"
    );
    // The whole JSON is there to read, and it is what was sent.
    let whole = browser
        .eval(&format!(
            "return document.querySelector('details.sent-requests[data-seq=\"{first}\"] pre.json').textContent;"
        ))
        .await;
    let whole: Value = serde_json::from_str(
        &whole
            .as_str()
            .unwrap()
            .replace("\u{27E6}U+202E\u{27E7}", "\u{202E}"),
    )
    .expect("the whole request is JSON");
    assert_eq!(whole, fake.requests()[0]);

    // A new turn draws the live session again: what the reader opened stays open and read.
    let third = turn(&server, "a third").await;
    browser
        .until_true(
            "the new turn is drawn",
            &format!(
                "return !!document.querySelector('details.sent-requests[data-seq=\"{third}\"]');"
            ),
        )
        .await;
    assert_eq!(
        browser
            .eval(&format!(
                "const d = document.querySelector('details.sent-requests[data-seq=\"{first}\"]');
                 return d.open && d.querySelectorAll('.sent-request').length;"
            ))
            .await,
        json!(1)
    );
    let violations = browser.axe_moderate().await;
    assert!(
        violations.is_empty(),
        "the inspector with a turn's requests open: {}",
        violations.join("\n")
    );
    browser.stop().await;

    // As the session's user: the section says what it needs.
    let browser = inspector(&server, "/", ALICE).await;
    browser
        .until_true(
            "the turns are drawn",
            "return document.querySelectorAll('#turns details.sent-requests').length === 3;",
        )
        .await;
    browser
        .click(&format!(
            "details.sent-requests[data-seq=\"{second}\"] > summary"
        ))
        .await;
    browser
        .until_true(
            "the refusal is explained",
            &format!(
                "const d = document.querySelector('details.sent-requests[data-seq=\"{second}\"]');
                 return d.textContent.includes('needs an admin token');"
            ),
        )
        .await;
    browser.stop().await;
}
