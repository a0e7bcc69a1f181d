//! In a real browser: on the chat page the first Tab stop is a link that skips the header,
//! the session list and the conversation and puts the keyboard in the message box (it took
//! some 70 Tab stops before), out of sight until it has the focus.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use fantoccini::key::Key;
use support::browser::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_tab_stop_skips_to_the_message_box() {
    let server = Server::start(Duration::ZERO, 1).await;
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser.open_session("skipping").await;
    // Reloaded, the page opens the same session; the keyboard starts at the top.
    browser.client.refresh().await.expect("reload");
    browser
        .until_true(
            "the session is open again",
            "return !document.getElementById('input').disabled;",
        )
        .await;
    let hidden = browser
        .eval("return document.querySelector('.skip').getBoundingClientRect().right <= 0;")
        .await;
    assert_eq!(
        hidden,
        serde_json::Value::Bool(true),
        "the link is out of sight"
    );
    browser.press(Key::Tab).await;
    assert!(
        browser.focused(".skip").await,
        "the first Tab stop is the skip link"
    );
    let shown = browser
        .eval("return document.querySelector('.skip').getBoundingClientRect().left >= 0;")
        .await;
    assert_eq!(
        shown,
        serde_json::Value::Bool(true),
        "focused, the link is in sight"
    );
    browser.press(Key::Enter).await;
    browser
        .until_true(
            "the message box has the keyboard",
            "return document.activeElement === document.getElementById('input');",
        )
        .await;
    browser.stop().await;
    server.stop().await;
}
