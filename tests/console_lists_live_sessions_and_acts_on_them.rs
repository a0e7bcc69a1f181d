//! In a real browser: the operator console lists a session as running while its slow turn
//! runs and idle after it, its charts take a point from each stats snapshot, "Passivate"
//! removes the session from the live list (the keyboard then on the notice that says so, not
//! lost with the row), and a user token is sent back to the sign-in card
//! with a message asking for an admin token.
//! A screenshot of the console is written under `target/console-screenshots/`.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::browser::*;

fn row_state(key: &str) -> String {
    format!(
        "const tr = document.querySelector('#live-rows tr[data-key=\"{key}\"]');
         return tr ? tr.dataset.state : null;"
    )
}

const CHART_POINTS: &str =
    "return Number(document.getElementById('chart-live').dataset.points || 0);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_follows_a_slow_turn_and_passivates_the_session() {
    let server = Server::start(Duration::from_secs(4), 4).await;
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/console"), ADMIN, None).await;
    browser
        .until_true(
            "the stats stream is live",
            "return document.getElementById('stream-state').textContent === 'live';",
        )
        .await;

    let client = reqwest::Client::new();
    let turn = client
        .post(server.url("/v1/sessions/alice/slow/turns"))
        .bearer_auth(ALICE)
        .json(&json!({"input": "take your time"}))
        .send();
    let turn = tokio::spawn(turn);
    until("the session is listed as running", || async {
        browser.eval(&row_state("alice/slow")).await == "running"
    })
    .await;
    let points = browser.eval(CHART_POINTS).await.as_u64().unwrap_or(0);
    let answer = turn
        .await
        .expect("the turn task")
        .expect("the turn's answer");
    assert_eq!(answer.status(), 200);
    until("the session is listed as idle", || async {
        browser.eval(&row_state("alice/slow")).await == "idle"
    })
    .await;
    until("the chart took new points", || async {
        browser.eval(CHART_POINTS).await.as_u64().unwrap_or(0) > points
    })
    .await;
    let shot = browser.screenshot("console").await;
    assert!(shot.exists());

    browser
        .click("#live-rows tr[data-key=\"alice/slow\"] button.passivate")
        .await;
    until("the passivated session leaves the list", || async {
        browser.eval(&row_state("alice/slow")).await == Value::Null
    })
    .await;
    // The button pressed went with its row: the keyboard is on the notice saying what
    // happened, not at the top of the page.
    browser
        .until_true(
            "the focus is on the notice",
            "const n = document.getElementById('notice');
             return document.activeElement === n && n.textContent.startsWith('Passivating');",
        )
        .await;

    browser.click("#signout").await;
    browser.sign_in(&server.url("/console"), ALICE, None).await;
    browser
        .until_true(
            "a user token is asked for an admin token at once",
            "const n = document.getElementById('notice');
             return !n.hidden && n.textContent.includes('needs an admin token')
                 && !document.getElementById('signin').hidden;",
        )
        .await;
    browser.stop().await;
    server.stop().await;
}
