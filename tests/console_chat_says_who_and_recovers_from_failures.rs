//! In a real browser, the chat page and the console after failures and with the wrong token:
//! a user token shows its own user ("signed in as alice", even if "bob" was typed); the open
//! session is highlighted and the status line of a streaming session stays with it when
//! another is opened; a refused send (409 busy) gives the typed text back and its banner
//! clears with the next send; a send to a server that is gone says the server could not be
//! reached (not the browser's "Failed to fetch") and keeps the text, and once the server is
//! back the text goes out and that banner clears; `/console` with a user token asks for an
//! admin token at once; `/favicon.ico` is served.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::browser::*;

const NOTICE: &str = "const n = document.getElementById('notice');
                      return n.hidden ? null : n.textContent;";
const STATUS: &str = "return document.getElementById('status').textContent;";
const INPUT: &str = "return document.getElementById('input').value;";

fn current(id: &str) -> String {
    format!(
        "const b = document.querySelector('#session-list button[data-session=\"{id}\"]');
         return b !== null && b.classList.contains('current')
             && b.getAttribute('aria-current') === 'true';"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_page_says_who_keeps_text_and_clears_banners() {
    let server = Server::start(Duration::from_millis(5000), 10).await;
    let favicon = reqwest::get(server.url("/favicon.ico"))
        .await
        .expect("GET /favicon.ico");
    assert_eq!(favicon.status(), 200);
    assert_eq!(favicon.headers()["content-type"], "image/svg+xml");

    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, Some("bob")).await;
    browser
        .until_true(
            "signed in as alice",
            "return document.getElementById('who').textContent === 'signed in as alice';",
        )
        .await;
    let warned = browser.eval(NOTICE).await;
    assert!(
        warned.as_str().is_some_and(|n| n.contains("alice only")),
        "typing bob with alice's token is answered: {warned}"
    );

    browser.open_session("first").await;
    browser.send("a slow one").await;
    browser.streamed_part().await;
    browser.open_session("second").await;
    browser
        .until_true("second is highlighted", &current("second"))
        .await;
    assert_eq!(browser.eval(&current("first")).await, Value::Bool(false));
    let status = browser.eval(STATUS).await;
    assert!(
        !status.as_str().unwrap_or_default().contains("streaming"),
        "the first session's status shows on the second: {status}"
    );

    // Busy: a second message to `first` with the policy `reject` while its turn runs.
    browser
        .click("#session-list button[data-session=\"first\"]")
        .await;
    browser
        .until_true("first is highlighted", &current("first"))
        .await;
    browser
        .until_true(
            "first's own status is back",
            "return document.getElementById('status').textContent === 'streaming…';",
        )
        .await;
    browser
        .eval("document.getElementById('policy').value = 'reject'; return true;")
        .await;
    browser.send("refused, but kept").await;
    until(
        "the busy refusal is shown and the text given back",
        || async {
            browser
                .eval(NOTICE)
                .await
                .as_str()
                .is_some_and(|n| !n.is_empty())
                && browser.eval(INPUT).await == "refused, but kept"
        },
    )
    .await;
    browser.until_stored("the slow reply is stored", 2).await;
    browser
        .eval("document.getElementById('policy').value = ''; return true;")
        .await;
    browser.click("#send").await;
    browser.until_stored("the kept text was sent", 4).await;
    assert_eq!(
        browser.eval(NOTICE).await,
        Value::Null,
        "the banner cleared after the good answer"
    );

    // The server goes away: the page says so plainly and keeps the text.
    browser.click("#signout").await;
    browser.sign_in(&server.url("/console"), ALICE, None).await;
    browser
        .until_true(
            "a user token on /console is asked for an admin token",
            "const n = document.getElementById('notice');
             return !n.hidden && n.textContent.includes('admin token')
                 && !document.getElementById('signin').hidden;",
        )
        .await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser.open_session("third").await;
    let base = server.base.clone();
    server.stop().await;
    browser.send("typed while the server is gone").await;
    until("the failure is explained and the text kept", || async {
        let notice = browser.eval(NOTICE).await;
        notice
            .as_str()
            .is_some_and(|n| n.contains("could not be reached"))
            && browser.eval(INPUT).await == "typed while the server is gone"
    })
    .await;
    let notice = browser.eval(NOTICE).await;
    assert!(
        !notice
            .as_str()
            .unwrap_or_default()
            .contains("Failed to fetch"),
        "{notice}"
    );

    // The server comes back: the kept text goes out and the banner clears.
    let server = Server::restart_at(&base).await;
    browser.click("#send").await;
    browser.until_stored("the kept text was sent", 2).await;
    assert_eq!(
        browser.eval(NOTICE).await,
        Value::Null,
        "the banner cleared"
    );
    browser.stop().await;
    server.stop().await;
}
