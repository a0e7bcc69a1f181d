//! In a real browser at 1280 and at 360 CSS pixels: `/` and `/console`, signed out and signed
//! in, and `/inspect` signed out (its own test looks at it signed in), have no serious or critical accessibility violation by axe-core, and are never wider than
//! the window (nothing to scroll sideways, a console row's buttons on screen). Signed out, the
//! chat is not drawn under the sign-in card: it is not displayed and Tab never reaches it. The
//! browser's profile folder is gone once the browser stopped.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use serde_json::json;
use support::browser::*;

/// What axe found and how wide the page is, failing with every violation named.
async fn check(browser: &Browser, what: &str, width: u32) {
    let violations = browser.axe_serious().await;
    assert!(
        violations.is_empty(),
        "{what} at {width} px: serious or critical axe-core violations:\n{}",
        violations.join("\n")
    );
    let laid_out = browser.layout_width().await;
    assert!(
        laid_out <= u64::from(width),
        "{what} at {width} px is {laid_out} px wide"
    );
}

/// Signed out: the sign-in card shows, the app is not displayed, and no control of it can be
/// focused by Tab.
async fn signed_out(browser: &Browser, url: &str, what: &str, width: u32) {
    browser.client.goto(url).await.expect("open the page");
    browser.visible("#token").await;
    let app_shown = browser
        .eval("return getComputedStyle(document.getElementById('app')).display;")
        .await;
    assert_eq!(app_shown, "none", "{what}: the app under the sign-in card");
    // Tab through the whole page: never into the app.
    for _ in 0..12 {
        browser.press(fantoccini::key::Key::Tab).await;
        assert!(
            !browser.focused("#app *").await,
            "{what}: Tab reached the app behind the sign-in card"
        );
    }
    check(browser, &format!("{what}, signed out"), width).await;
}

async fn at_width(server: &Server, (width, height): (u32, u32)) {
    let browser = Browser::sized(width, height).await;
    let profile = browser.profile();
    assert!(profile.is_dir(), "Chromium uses the profile folder given");
    signed_out(&browser, &server.url("/"), "/", width).await;
    signed_out(&browser, &server.url("/console"), "/console", width).await;
    signed_out(&browser, &server.url("/inspect"), "/inspect", width).await;

    browser.sign_in(&server.url("/"), ALICE, None).await;
    let long = format!("long-{}", "x".repeat(240));
    browser.open_session(&long).await;
    browser.send("hello from a narrow screen").await;
    browser.until_stored("the reply is stored", 2).await;
    check(&browser, "/ signed in with a conversation", width).await;

    browser.click("#signout").await;
    browser.sign_in(&server.url("/console"), ADMIN, None).await;
    let key = format!("alice/{long}");
    let passivate = format!("#live-rows tr[data-key=\"{key}\"] button.passivate");
    browser.visible(&passivate).await;
    check(&browser, "/console signed in with a live session", width).await;
    let right = browser
        .eval(&format!(
            "return document.querySelector({}).getBoundingClientRect().right;",
            json!(passivate)
        ))
        .await
        .as_f64()
        .expect("a position");
    assert!(
        right <= f64::from(width),
        "Passivate ends at {right} px, off a {width} px screen"
    );
    browser.screenshot(&format!("console-{width}px")).await;
    browser.stop().await;
    assert!(!profile.exists(), "{} is left behind", profile.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_pass_axe_at_desktop_and_phone_widths_signed_in_and_out() {
    let server = Server::start(Duration::from_millis(50), 2).await;
    at_width(&server, DESKTOP).await;
    at_width(&server, PHONE).await;
    server.stop().await;
}
