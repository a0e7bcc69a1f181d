//! In a real browser: a message holding HTML (`<img src=x onerror=alert(1)>`, a `<script>`) is
//! shown as the text it is, in the user's message and in the reply that quotes it, live and
//! after a reload; no element is created from it and no script runs.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::browser::*;

const HOSTILE: &str = "<img src=x onerror=alert(1)><script>window.ran = true</script>";

/// Replaces `alert` so that a call is recorded instead of blocking the page; WebDriver's own
/// scripts are not bound by the page's CSP.
const TRAP: &str = "window.alerted = false; window.ran = false;
    window.alert = () => { window.alerted = true; }; return true;";

const NOTHING_RAN: &str =
    "return document.querySelectorAll('#history img, #history script').length === 0
    && window.alerted === false && window.ran === false;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_in_a_message_is_shown_as_text_and_never_runs() {
    let server = Server::start(Duration::from_millis(300), 2).await;
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser.open_session("xss").await;
    browser.eval(TRAP).await;
    browser.send(HOSTILE).await;
    browser.until_stored("the stored turn is shown", 2).await;
    let items = browser.eval(HISTORY).await;
    assert_eq!(items[0]["text"], HOSTILE, "the message is its own text");
    assert!(items[1]["text"]
        .as_str()
        .is_some_and(|t| t.ends_with(HOSTILE)));
    assert_eq!(browser.eval(NOTHING_RAN).await, Value::Bool(true));
    assert!(
        browser.client.get_alert_text().await.is_err(),
        "no alert is open"
    );

    browser.client.refresh().await.expect("reload");
    browser.eval(TRAP).await;
    browser
        .until_stored("the stored turn is shown again", 2)
        .await;
    let items = browser.eval(HISTORY).await;
    assert_eq!(items[0]["text"], HOSTILE);
    assert_eq!(browser.eval(NOTHING_RAN).await, Value::Bool(true));
    assert!(
        browser.client.get_alert_text().await.is_err(),
        "no alert is open"
    );
    browser.stop().await;
    server.stop().await;
}
