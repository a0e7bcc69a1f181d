//! Property: `serve --capacity N` lets a message for a session that is not live wait for a
//! slot while an idle session is passivated to make room (by default, up to
//! `--capacity-wait`), so that one client taking turns in new sessions one after another is
//! never refused; with `--capacity-wait 0` such a message is refused at once (429
//! `at_capacity`), as before.

#![cfg(feature = "http")]

mod support;

use serde_json::json;
use support::http::ALICE;
use support::serve::{Serve, ServeStore};

/// The statuses of turns in `sessions` new sessions, one after another.
async fn one_after_another(serve: &Serve, sessions: usize) -> Vec<u16> {
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for s in 0..sessions {
        let answer = client
            .post(serve.url(&format!("/v1/sessions/alice/s{s}/turns")))
            .bearer_auth(ALICE)
            .json(&json!({"input": "hi"}))
            .send()
            .await
            .expect("an answer");
        statuses.push(answer.status().as_u16());
    }
    statuses
}

#[tokio::test]
async fn turns_in_new_sessions_one_after_another_wait_for_their_slot() {
    let serve = Serve::start(ServeStore::Memory, 0, 1, &["--capacity", "1"]);
    let statuses = one_after_another(&serve, 20).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
}

#[tokio::test]
async fn with_no_wait_a_full_server_refuses_at_once() {
    let serve = Serve::start(
        ServeStore::Memory,
        0,
        1,
        &["--capacity", "1", "--capacity-wait", "0"],
    );
    let statuses = one_after_another(&serve, 20).await;
    assert!(statuses.contains(&429), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
}
