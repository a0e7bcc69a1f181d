//! In a real browser: pressing Stop during a slow reply interrupts the turn; the page shows
//! the turn as interrupted, and the part of the reply streamed before Stop stays in the
//! conversation (stored, so it is there after a reload too). The same by keyboard only: a
//! session opened and a message sent with Enter, Stop reached with Tab and pressed with Enter.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use fantoccini::key::Key;
use support::browser::*;

async fn shows_the_interrupted_reply(browser: &Browser) {
    browser
        .until_true(
            "the stored, interrupted reply is shown",
            "const li = document.querySelectorAll('#history li');
             return li.length === 2 && li[1].dataset.state === 'stored'
                 && li[1].classList.contains('interrupted');",
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_interrupts_a_slow_reply_and_keeps_what_was_streamed() {
    // Eight chunks over eight seconds: Stop lands long before the end.
    let server = Server::start(Duration::from_secs(8), 8).await;
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser.open_session("slow").await;
    browser.send("tell me a long story").await;
    let partial = browser.streamed_part().await;
    browser.click("#stop").await;

    shows_the_interrupted_reply(&browser).await;
    let items = browser.eval(HISTORY).await;
    let kept = items[1]["text"].as_str().expect("the reply's text");
    assert!(
        kept.starts_with(&partial),
        "what was shown stays: {partial:?} → {kept:?}"
    );
    assert!(
        !kept.ends_with("tell me a long story"),
        "the reply was cut short: {kept:?}"
    );
    let status = browser
        .eval("return document.getElementById('status').textContent;")
        .await;
    assert!(
        status.as_str().is_some_and(|s| s.contains("interrupted")),
        "{status}"
    );

    browser.client.refresh().await.expect("reload");
    browser
        .until_true(
            "the interrupted reply is still there after a reload",
            "const li = document.querySelectorAll('#history li.interrupted');
             return li.length === 1;",
        )
        .await;
    let items = browser.eval(HISTORY).await;
    assert_eq!(items[1]["text"].as_str(), Some(kept));
    browser.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_keyboard_only_a_message_is_sent_and_stopped() {
    let server = Server::start(Duration::from_secs(8), 8).await;
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser.type_into("#new-session-id", "keyed").await;
    browser.press(Key::Enter).await;
    browser
        .until_true(
            "the session is open",
            "return !document.getElementById('send').disabled;",
        )
        .await;
    browser.tab_to("#input", 40).await;
    browser.type_into("#input", "a story by keyboard").await;
    browser.press(Key::Enter).await;
    let partial = browser.streamed_part().await;
    browser.tab_to("#stop", 40).await;
    browser.press(Key::Enter).await;
    shows_the_interrupted_reply(&browser).await;
    // Stop is disabled once the reply ended: the keyboard is in the message box, not lost.
    browser
        .until_true(
            "the focus is in the message box",
            "return document.activeElement === document.getElementById('input');",
        )
        .await;
    let items = browser.eval(HISTORY).await;
    assert_eq!(items[0]["text"].as_str(), Some("a story by keyboard"));
    let kept = items[1]["text"].as_str().expect("the reply's text");
    assert!(kept.starts_with(&partial), "{partial:?} → {kept:?}");
    browser.stop().await;
    server.stop().await;
}
