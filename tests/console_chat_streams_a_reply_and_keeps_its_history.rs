//! In a real browser: a wrong token is refused with a message, and a user token signed in
//! with another user's id chats as its own user, saying so (the inspector test shows another
//! user's session refused); a user signs in with a token, opens a session, sends a message, sees the reply's chunks appear
//! before the final reply, and after a reload sees the conversation again (read back from the
//! server). The token never appears in the page's URL. A screenshot
//! of the chat page is written under `target/console-screenshots/`.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::browser::*;

const NOTICE_WRONG_TOKEN: &str = "const n = document.getElementById('notice');
    return !n.hidden && n.textContent.includes('wrong or has expired');";

const NOTICE_ONLY_ALICE: &str = "const n = document.getElementById('notice');
    return !n.hidden && n.textContent.includes('speaks for alice only')
        && document.getElementById('who').textContent === 'signed in as alice';";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_streams_in_and_the_history_survives_a_reload() {
    let server = Server::start(Duration::from_millis(2_400), 6).await;
    let browser = Browser::start().await;
    browser
        .sign_in(&server.url("/"), "not-a-token-of-this-server", None)
        .await;
    browser
        .until_true(
            "a wrong token is refused with a message",
            NOTICE_WRONG_TOKEN,
        )
        .await;
    browser.sign_in(&server.url("/"), ALICE, Some("bob")).await;
    browser
        .until_true(
            "asking for bob's sessions with alice's token shows alice's, saying so",
            NOTICE_ONLY_ALICE,
        )
        .await;
    browser.click("#signout").await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser
        .until_true(
            "signed in as alice",
            "return document.getElementById('who').textContent.includes('alice');",
        )
        .await;
    browser.open_session("first").await;
    browser.send("hello browser").await;

    // A part of the reply is on the page while the turn still runs.
    let partial = browser.streamed_part().await;

    browser
        .until_true(
            "the stored reply replaces the streamed one",
            "const li = [...document.querySelectorAll('#history li')];
             return li.length === 2 && li.every(x => x.dataset.state === 'stored');",
        )
        .await;
    let items = browser.eval(HISTORY).await;
    assert_eq!(items[0]["text"], "hello browser");
    let full = items[1]["text"].as_str().expect("the reply").to_owned();
    assert!(
        full.starts_with("mock reply #") && full.ends_with("to: hello browser"),
        "{full}"
    );
    assert!(
        full.starts_with(&partial) && partial.len() < full.len(),
        "streamed {partial:?} of {full:?}"
    );
    let shot = browser.screenshot("chat").await;
    assert!(shot.exists());

    browser.client.refresh().await.expect("reload");
    browser
        .until_stored("the history is shown again after a reload", 2)
        .await;
    let items = browser.eval(HISTORY).await;
    assert_eq!(items[0]["text"], "hello browser");
    assert_eq!(items[1]["text"], full);
    let url = browser.client.current_url().await.expect("the URL");
    assert!(
        !url.as_str().contains(ALICE),
        "the token is never in a URL: {url}"
    );
    let listed = browser
        .eval("return document.querySelector('#session-list [data-session=first]') !== null;")
        .await;
    assert_eq!(listed, Value::Bool(true), "the session is in the list");
    browser.stop().await;
    server.stop().await;
}
