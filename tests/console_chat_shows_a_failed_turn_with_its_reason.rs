//! In a real browser: a turn the model fails is shown in the chat page as what the history
//! holds — the message, and the failed turn with its code and reason — and the page says what
//! the client was told; after a reload it is still there.

#![cfg(all(feature = "http", feature = "openai"))]

mod support;

use support::browser::*;
use support::fake_openai::{FakeOpenAi, Reply};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_is_shown_with_its_code_and_reason() {
    let fake = FakeOpenAi::start(vec![Reply::Status {
        status: 404,
        retry_after: None,
        message: "The model `m` does not exist".into(),
    }])
    .await;
    let server = Server::with_agent(&[
        "--agent",
        "openai",
        "--base-url",
        &fake.base_url,
        "--model",
        "m",
    ])
    .await;
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser.open_session("failing").await;
    browser.send("hello?").await;
    for moment in ["after the turn", "after a reload"] {
        browser.until_stored(moment, 2).await;
        let items = browser.eval(HISTORY).await;
        assert_eq!(items[0]["text"], "hello?", "{moment}: {items}");
        let failed = &items[1];
        assert!(
            failed["cls"].as_str().unwrap().contains("failed"),
            "{moment}: {items}"
        );
        // The kind's own words; the server's answer (which names the endpoint) is in the log.
        assert_eq!(
            failed["text"].as_str(),
            Some("the model server refused the request"),
            "{moment}: the reason is shown: {items}"
        );
        let meta = browser
            .eval("return document.querySelectorAll('#history li .meta')[1].textContent;")
            .await;
        assert!(
            meta.as_str()
                .unwrap()
                .contains("turn failed (model_refused)"),
            "{moment}: {meta}"
        );
        if moment == "after the turn" {
            let notice = browser
                .eval("return document.querySelector('.notice')?.textContent ?? '';")
                .await;
            assert!(
                notice.as_str().unwrap().contains("refused the request"),
                "the page says what the client was told: {notice}"
            );
            browser.client.refresh().await.expect("reload");
        }
    }
    browser.stop().await;
    server.stop().await;
}
