//! In a real browser, in the light and the dark colour scheme (`prefers-color-scheme`, which
//! the pages follow) at 1280 and 360 CSS pixels: the chat page with a rendered Markdown reply,
//! the console and the inspector, signed in, have no moderate, serious or critical violation by
//! axe-core (colour contrast included) and are never wider than the window. Screenshots of
//! each go to `target/console-screenshots/` (`docs/console.md` shows some).

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use support::browser::*;

const REPLY: &str = "A **reply** with `code`, a [link](https://example.com/doc) and a table:\n\n\
| name | count |\n|---|--:|\n| apples | 2 |\n\n```text\nsome code\n```\n\n> a quote";

async fn check(browser: &Browser, what: &str, width: u32) {
    let violations = browser.axe_moderate().await;
    assert!(
        violations.is_empty(),
        "{what} at {width} px: moderate or worse axe-core violations:\n{}",
        violations.join("\n")
    );
    let laid_out = browser.layout_width().await;
    assert!(
        laid_out <= u64::from(width),
        "{what} at {width} px is {laid_out} px wide"
    );
}

async fn pages(server: &Server, (width, height): (u32, u32), dark: bool) {
    let args: &[&str] = if dark { &["--force-dark-mode"] } else { &[] };
    let browser = Browser::sized_with(width, height, args).await;
    let scheme = if dark { "dark" } else { "light" };
    browser.client.goto(&server.url("/")).await.expect("open");
    let matches = browser
        .eval(&format!(
            "return matchMedia('(prefers-color-scheme: {scheme})').matches;"
        ))
        .await;
    assert_eq!(matches, true, "the browser prefers the {scheme} scheme");

    browser.sign_in(&server.url("/"), ALICE, None).await;
    let id = format!("colours-{scheme}-{width}");
    browser.open_session(&id).await;
    browser.send_whole(REPLY).await;
    browser.until_stored("the reply is stored", 2).await;
    let background = browser
        .eval("return getComputedStyle(document.body).backgroundColor;")
        .await;
    let expected = if dark {
        "rgb(18, 22, 29)"
    } else {
        "rgb(247, 250, 252)"
    };
    assert_eq!(background, expected, "the {scheme} page background");
    check(&browser, &format!("/ ({scheme}) with a reply"), width).await;
    browser
        .screenshot(&format!("chat-{scheme}-{width}px"))
        .await;

    browser
        .client
        .goto(&server.url(&format!("/inspect#alice/{id}")))
        .await
        .expect("open the inspector");
    browser
        .until_true(
            "the inspector shows the session",
            "return document.querySelectorAll('#event-rows tr').length === 2
                && document.querySelectorAll('#turns .turn').length === 1;",
        )
        .await;
    check(&browser, &format!("/inspect ({scheme})"), width).await;
    browser
        .screenshot(&format!("inspect-{scheme}-{width}px"))
        .await;

    browser.click("#signout").await;
    browser.sign_in(&server.url("/console"), ADMIN, None).await;
    browser
        .visible(&format!(
            "#live-rows tr[data-key=\"alice/{id}\"] button.passivate"
        ))
        .await;
    check(&browser, &format!("/console ({scheme})"), width).await;
    browser
        .screenshot(&format!("console-{scheme}-{width}px"))
        .await;
    browser.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_passes_axe_in_both_schemes_at_both_widths() {
    let server = Server::start(Duration::from_millis(20), 2).await;
    for size in [DESKTOP, PHONE] {
        for dark in [false, true] {
            pages(&server, size, dark).await;
        }
    }
    server.stop().await;
}
