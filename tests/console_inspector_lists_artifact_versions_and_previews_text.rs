//! In a real browser, the inspector's artifacts: each name with its type, and on opening, every
//! version newest first with its size, type and local time, a Download button and, for text,
//! a Preview that shows the version's text as text (markup stays characters, a bidi control
//! is written out) and hides it again; an image has no preview (the page shows no uploaded
//! media).

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::browser::*;

async fn put(server: &Server, name: &str, mime: &str, body: &[u8]) {
    let answer = reqwest::Client::new()
        .put(server.url(&format!("/v1/sessions/alice/arts/artifacts/{name}")))
        .bearer_auth(ALICE)
        .header("content-type", mime)
        .body(body.to_vec())
        .send()
        .await
        .expect("an upload");
    assert_eq!(answer.status(), 200, "upload {name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_versions_are_listed_and_text_is_previewed_as_text() {
    let server = Server::start(Duration::ZERO, 1).await;
    let answer = reqwest::Client::new()
        .post(server.url("/v1/sessions/alice/arts/turns"))
        .bearer_auth(ALICE)
        .json(&json!({ "input": "hello" }))
        .send()
        .await
        .expect("a turn");
    assert_eq!(answer.status(), 200);
    put(&server, "notes.txt", "text/plain", b"first version").await;
    put(
        &server,
        "notes.txt",
        "text/plain",
        "second <b>bold</b>\u{202E}evil".as_bytes(),
    )
    .await;
    put(
        &server,
        "pic.png",
        "image/png",
        b"\x89PNG\r\n\x1a\nnot really",
    )
    .await;

    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser
        .client
        .goto(&server.url("/inspect#alice/arts"))
        .await
        .expect("open the inspector");
    browser
        .click("#artifacts li[data-artifact=\"notes.txt\"] summary")
        .await;
    browser
        .until_true(
            "both versions are listed, newest first",
            "const v = [...document.querySelectorAll('#artifacts li[data-artifact=\"notes.txt\"] li[data-version]')];
             return v.map(x => x.dataset.version).join() === '2,1';",
        )
        .await;
    let times = browser
        .eval(
            "return [...document.querySelectorAll('#artifacts li[data-version] time')]
                 .map(t => t.textContent === new Date(t.dateTime).toLocaleString());",
        )
        .await;
    assert_eq!(times, json!([true, true]), "local times");

    let version =
        |n: u32| format!("#artifacts li[data-artifact=\"notes.txt\"] li[data-version=\"{n}\"]");
    browser
        .click(&format!("{} button.preview", version(1)))
        .await;
    browser
        .click(&format!("{} button.preview", version(2)))
        .await;
    browser
        .until_true(
            "both previews are shown",
            "return document.querySelectorAll('#artifacts pre.preview').length === 2;",
        )
        .await;
    let shown = browser
        .eval(&format!(
            "const one = document.querySelector({});
             const two = document.querySelector({});
             return [one.querySelector('pre').textContent, two.querySelector('pre').textContent,
                     document.querySelectorAll('#artifacts b').length,
                     two.querySelector('button.preview').getAttribute('aria-expanded')];",
            json!(version(1)),
            json!(version(2))
        ))
        .await;
    assert_eq!(
        shown,
        json!([
            "first version",
            "second <b>bold</b>\u{27E6}U+202E\u{27E7}evil",
            0,
            "true"
        ])
    );
    browser
        .click(&format!("{} button.preview", version(2)))
        .await;
    browser
        .until_true(
            "a second press hides the preview",
            "return document.querySelectorAll('#artifacts pre.preview').length === 1;",
        )
        .await;

    browser
        .click("#artifacts li[data-artifact=\"pic.png\"] summary")
        .await;
    browser
        .until_true(
            "the image's version is listed",
            "return !!document.querySelector('#artifacts li[data-artifact=\"pic.png\"] li[data-version=\"1\"]');",
        )
        .await;
    let image = browser
        .eval(
            "const li = document.querySelector('#artifacts li[data-artifact=\"pic.png\"] li[data-version=\"1\"]');
             return [!!li.querySelector('button.preview'), li.querySelector('button').textContent];",
        )
        .await;
    assert_eq!(image, json!([false, "Download"]), "no preview of an image");
    assert_eq!(
        browser
            .eval("return document.querySelectorAll('#artifacts img').length;")
            .await,
        Value::from(0)
    );
    browser.stop().await;
    server.stop().await;
}
