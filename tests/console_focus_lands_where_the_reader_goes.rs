//! In a real browser, by keyboard: signing in from the form puts the focus on the page's
//! content (not on the body the hidden form leaves); loading the last page of older messages
//! puts it on the oldest message (the button it was on is gone), and the inspector's Older,
//! disabled on its first page, hands it to Newer; arming a console Delete says
//! so to a screen reader (the button's name and a live region), not only by its colour.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use fantoccini::key::Key;
use serde_json::json;
use support::browser::*;

/// Signs in by typing the token and pressing Enter, as a keyboard user does.
async fn sign_in_by_keyboard(browser: &Browser, url: &str, token: &str) {
    browser.client.goto(url).await.expect("open the page");
    browser.type_into("#token", token).await;
    browser.press(Key::Enter).await;
    browser
        .until_true(
            "signed in",
            "return !document.getElementById('app').hidden;",
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn focus_follows_sign_in_the_last_older_page_and_an_armed_delete() {
    let server = Server::start(Duration::ZERO, 1).await;
    // 30 turns: 60 events, one page (50) shown and one older page to load.
    let client = reqwest::Client::new();
    for i in 0..30 {
        let answer = client
            .post(server.url("/v1/sessions/alice/paged/turns"))
            .bearer_auth(ALICE)
            .json(&json!({ "input": format!("message {i}") }))
            .send()
            .await
            .expect("a turn");
        assert!(answer.status().is_success(), "{}", answer.status());
    }
    let browser = Browser::start().await;

    for page in ["/", "/inspect#alice/paged"] {
        sign_in_by_keyboard(&browser, &server.url(page), ALICE).await;
        browser
            .until_true(
                "the focus is on the page's content",
                "return document.activeElement === document.getElementById('app');",
            )
            .await;
        browser.press(Key::Tab).await;
        assert!(
            browser.focused("#app *").await,
            "{page}: the next Tab stays in the content"
        );
        browser.click("#signout").await;
    }

    sign_in_by_keyboard(&browser, &server.url("/"), ALICE).await;
    browser.open_session("paged").await;
    browser.until_stored("the newest page", 50).await;
    browser
        .eval("document.getElementById('older').focus(); return true;")
        .await;
    browser.press(Key::Enter).await;
    browser.until_stored("every message", 60).await;
    browser
        .until_true(
            "the focus is on the oldest message",
            "const first = document.querySelector('#history li');
             return document.getElementById('older').hidden
                 && document.activeElement === first && first.dataset.seq === '1';",
        )
        .await;

    // The inspector's Older, pressed until the first page: it goes disabled, and the keyboard
    // goes to Newer.
    browser
        .client
        .goto(&server.url("/inspect#alice/paged"))
        .await
        .expect("open the inspector");
    browser
        .until_true(
            "the newest page of the log",
            "return document.querySelector('#event-rows tr')?.dataset.seq === '11';",
        )
        .await;
    browser
        .eval("document.getElementById('events-older').focus(); return true;")
        .await;
    browser.press(Key::Enter).await;
    browser
        .until_true(
            "the first page, the focus on Newer",
            "return document.querySelector('#event-rows tr')?.dataset.seq === '1'
                 && document.getElementById('events-older').disabled
                 && document.activeElement === document.getElementById('events-newer');",
        )
        .await;
    browser.click("#signout").await;

    sign_in_by_keyboard(&browser, &server.url("/console"), ADMIN).await;
    let delete = "#live-rows tr[data-key=\"alice/paged\"] button.danger";
    browser.visible(delete).await;
    browser
        .eval(&format!(
            "document.querySelector({}).focus(); return true;",
            json!(delete)
        ))
        .await;
    browser.press(Key::Enter).await;
    browser
        .until_true(
            "the armed button says what a second press does",
            &format!(
                "const b = document.querySelector({});
                 return b.getAttribute('aria-label').startsWith('Really delete alice/paged?')
                     && document.getElementById('announce').textContent.includes('again');",
                json!(delete)
            ),
        )
        .await;
    assert!(browser.focused(delete).await, "the button keeps the focus");
    browser.press(Key::Enter).await;
    browser
        .until_true(
            "deleted, the focus on the notice saying so",
            "const n = document.getElementById('notice');
             return !document.querySelector('#live-rows tr[data-key=\"alice/paged\"]')
                 && document.activeElement === n && n.textContent.includes('Deleted');",
        )
        .await;
    browser.stop().await;
    server.stop().await;
}
