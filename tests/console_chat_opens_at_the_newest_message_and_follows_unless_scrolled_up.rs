//! In a real browser: a long conversation opens at its newest message (the history scrolled to
//! its end, not to the oldest page shown); a reply follows the end while the reader stays
//! there, and leaves the reader where they are when they scrolled up to read.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use support::browser::*;

/// How far, in pixels, the history is from its end (0 at the end).
const FROM_END: &str = "const h = document.getElementById('history');
    return Math.round(h.scrollHeight - h.scrollTop - h.clientHeight);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_conversation_opens_at_its_end_and_follows_only_a_reader_there() {
    let server = Server::start(Duration::ZERO, 1).await;
    // 30 turns: 60 events, more than the history holds without scrolling.
    let client = reqwest::Client::new();
    for i in 0..30 {
        let answer = client
            .post(server.url("/v1/sessions/alice/long/turns"))
            .bearer_auth(ALICE)
            .json(&serde_json::json!({ "input": format!("message {i}") }))
            .send()
            .await
            .expect("a turn");
        assert!(answer.status().is_success(), "{}", answer.status());
    }
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser.open_session("long").await;
    browser
        .until_stored("the last page of the history is shown", 50)
        .await;
    let scrollable = browser
        .eval("const h = document.getElementById('history'); return h.scrollHeight > 2 * h.clientHeight;")
        .await;
    assert_eq!(
        scrollable,
        serde_json::Value::Bool(true),
        "the history must scroll"
    );
    browser
        .until_true(
            "opened at the newest message",
            "const h = document.getElementById('history');
             return h.scrollHeight - h.scrollTop - h.clientHeight <= 1;",
        )
        .await;

    // At the end: a new reply keeps the end in view.
    browser.send("at the end").await;
    browser.until_stored("the reply is stored", 52).await;
    let from_end = browser.eval(FROM_END).await.as_i64().unwrap();
    assert!(
        from_end <= 1,
        "the reply was not followed: {from_end} px from the end"
    );

    // Scrolled up to read: a new reply leaves the reader where they are.
    browser
        .eval("document.getElementById('history').scrollTop = 0; return true;")
        .await;
    browser.send("while reading").await;
    browser.until_stored("the second reply is stored", 54).await;
    let top = browser
        .eval("return document.getElementById('history').scrollTop;")
        .await;
    assert_eq!(
        top,
        serde_json::json!(0),
        "the reader was moved from where they read"
    );
    browser.stop().await;
    server.stop().await;
}
