//! In a real browser: session ids that are 250 characters long, or hold bidi controls (U+202E)
//! and zero-width characters, never widen the chat page or the console past the window (at
//! 1280 and at 360 px), and are shown with those characters written out as ⟦U+XXXX⟧, so that
//! an id cannot read as other text; the whole id is in the element's title (on hover). State
//! values and the raw events in the inspector show such characters written out too.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::browser::*;

const BIDI: &str = "invoice\u{202E}fdp.exe";
const ZERO_WIDTH: &str = "ad\u{200B}min";

fn long() -> String {
    "w".repeat(250)
}

/// Every text and title on the page holding one of the ids.
const ID_TEXTS: &str =
    "return [...document.querySelectorAll('.id')].flatMap(e => [e.textContent, e.title]);";

async fn shows_ids_visibly(browser: &Browser, what: &str, width: u32) {
    let texts = browser.eval(ID_TEXTS).await;
    let texts: Vec<&str> = texts
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for text in &texts {
        assert!(
            !text.contains('\u{202E}') && !text.contains('\u{200B}'),
            "{what}: a raw bidi or zero-width character in {text:?}"
        );
    }
    for shown in ["invoice⟦U+202E⟧fdp.exe", "ad⟦U+200B⟧min", &long()] {
        assert!(
            texts.iter().any(|t| t.contains(shown)),
            "{what}: {shown} is not shown; ids on the page: {texts:?}"
        );
    }
    let laid_out = browser.layout_width().await;
    assert!(
        laid_out <= u64::from(width),
        "{what} at {width} px is {laid_out} px wide"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_and_bidi_ids_stay_within_the_page_and_show_their_hidden_characters() {
    let server = Server::start(Duration::from_millis(10), 1).await;
    let client = reqwest::Client::new();
    for id in [BIDI.to_owned(), ZERO_WIDTH.to_owned(), long()] {
        let mut url = reqwest::Url::parse(&server.base).expect("the server's URL");
        url.path_segments_mut()
            .expect("a base URL")
            .extend(["v1", "sessions", "alice", &id, "turns"]);
        let answer = client
            .post(url)
            .bearer_auth(ALICE)
            .json(&json!({"input": "hi"}))
            .send()
            .await
            .expect("a turn");
        assert_eq!(answer.status(), 200, "{id}");
    }
    for (width, height) in [DESKTOP, PHONE] {
        let browser = Browser::sized(width, height).await;
        browser.sign_in(&server.url("/"), ALICE, None).await;
        until("three sessions listed", || async {
            browser
                .eval("return document.querySelectorAll('#session-list button[data-session]').length;")
                .await
                == 3
        })
        .await;
        shows_ids_visibly(&browser, "the chat page", width).await;
        browser
            .click("#session-list button[data-session^=\"www\"]")
            .await;
        until("the long session is open", || async {
            browser
                .eval("return document.getElementById('conv-title').textContent.length;")
                .await
                == 250
        })
        .await;
        shows_ids_visibly(&browser, "the chat page with the long id open", width).await;

        browser.click("#signout").await;
        browser.sign_in(&server.url("/console"), ADMIN, None).await;
        until("three rows", || async {
            browser
                .eval("return document.querySelectorAll('#live-rows tr').length;")
                .await
                == 3
        })
        .await;
        shows_ids_visibly(&browser, "the console", width).await;
        browser.stop().await;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_value_with_a_bidi_control_is_shown_written_out_in_the_inspector() {
    let server = Server::start(Duration::from_millis(10), 1).await;
    let client = reqwest::Client::new();
    let turn = client
        .post(server.url("/v1/sessions/alice/plain/turns"))
        .bearer_auth(ALICE)
        .json(&json!({"input": "hi"}))
        .send()
        .await
        .expect("a turn");
    assert_eq!(turn.status(), 200);
    let answer = client
        .post(server.url("/v1/sessions/alice/plain/state"))
        .bearer_auth(ADMIN)
        .json(&json!({"set": {"file": BIDI}}))
        .send()
        .await
        .expect("a state edit");
    assert_eq!(answer.status(), 200);
    let browser = Browser::start().await;
    browser
        .sign_in(&server.url("/inspect#alice/plain"), ADMIN, None)
        .await;
    until("the state and the log are shown", || async {
        browser
            .eval("return document.querySelectorAll('#state-rows code, #event-rows pre').length;")
            .await
            .as_u64()
            .is_some_and(|n| n >= 2)
    })
    .await;
    let shown = browser
        .eval(
            "return [...document.querySelectorAll('#state-rows code, #event-rows pre')]
                .map(e => e.textContent).join(' ');",
        )
        .await;
    let shown = shown.as_str().expect("text");
    assert!(!shown.contains('\u{202E}'), "a raw bidi control: {shown:?}");
    assert!(shown.contains("invoice⟦U+202E⟧fdp.exe"), "{shown:?}");
    browser.stop().await;
    server.stop().await;
}
