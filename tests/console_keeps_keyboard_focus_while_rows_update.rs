//! In a real browser, keyboard only: the console's live table is read again every second but
//! its rows are updated in place, so a Passivate button reached with Tab keeps the focus across
//! several updates and Enter on it passivates that session; the sort headings are buttons that
//! Tab reaches and Enter works.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use fantoccini::key::Key;
use serde_json::{json, Value};
use support::browser::*;

const DRAWN: &str = "return Number(document.getElementById('live-rows').dataset.drawn || 0);";

const ORDER: &str =
    "return [...document.querySelectorAll('#live-rows tr')].map(tr => tr.dataset.key);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_focused_passivate_button_survives_updates_and_enter_passivates() {
    let server = Server::start(Duration::from_millis(20), 1).await;
    let client = reqwest::Client::new();
    for id in ["k-1", "k-2", "k-3"] {
        let answer = client
            .post(server.url(&format!("/v1/sessions/alice/{id}/turns")))
            .bearer_auth(ALICE)
            .json(&json!({"input": "hello"}))
            .send()
            .await
            .expect("a turn");
        assert_eq!(answer.status(), 200);
    }
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/console"), ADMIN, None).await;
    until("three rows", || async {
        browser.eval(ORDER).await.as_array().map(Vec::len) == Some(3)
    })
    .await;

    // Sort by session, then reverse it, with the keyboard.
    browser.tab_to("th[data-sort=session] button", 40).await;
    browser.press(Key::Enter).await;
    browser.press(Key::Enter).await;
    until("sorted by session, descending", || async {
        browser
            .eval(
                "return document.querySelector('th[data-sort=session]').getAttribute('aria-sort');",
            )
            .await
            == "descending"
            && browser.eval(ORDER).await == json!(["alice/k-3", "alice/k-2", "alice/k-1"])
    })
    .await;

    let target = "#live-rows tr[data-key=\"alice/k-2\"] button.passivate";
    browser.tab_to(target, 40).await;
    // A turn on another session changes its row while the focus waits.
    let answer = client
        .post(server.url("/v1/sessions/alice/k-1/turns"))
        .bearer_auth(ALICE)
        .json(&json!({"input": "again"}))
        .send()
        .await
        .expect("a turn");
    assert_eq!(answer.status(), 200);
    let drawn = browser.eval(DRAWN).await.as_u64().expect("a count");
    until("the table was updated three more times", || async {
        browser.eval(DRAWN).await.as_u64().unwrap_or(0) >= drawn + 3
    })
    .await;
    assert!(
        browser.focused(target).await,
        "the focus left the Passivate button when the table was updated"
    );
    browser.press(Key::Enter).await;
    until("Enter passivated the focused row's session", || async {
        browser
            .eval(
                "return document.querySelector('#live-rows tr[data-key=\"alice/k-2\"]') === null;",
            )
            .await
            == Value::Bool(true)
    })
    .await;
    let left = browser.eval(ORDER).await;
    assert_eq!(left, json!(["alice/k-3", "alice/k-1"]), "only k-2 left");
    browser.stop().await;
    server.stop().await;
}
