//! Property: the official `openai` npm package (the Node SDK), pointed at `turnstile serve`,
//! works as it does against OpenAI — models (auto-paged), conversations and their items (paged
//! newest first), responses (plain, streamed with every typed event in `sequence_number` order,
//! through the SDK's stream helper, retrieved with their input items, continued with
//! `previous_response_id` into a fork), chat completions (plain and streamed with usage), and
//! errors typed by the SDK (`NotFoundError` across users, `AuthenticationError` for a bad
//! token). The conversations it made are alice's sessions.

#![cfg(feature = "http")]

mod support;

use support::http::{ALICE, BOB};
use support::openai_sdk::run_node_script;
use support::serve::{Serve, ServeStore};

#[tokio::test]
async fn the_node_sdk_drives_conversations_responses_and_chat() {
    let serve = Serve::start(ServeStore::File, 20, 4, &[]);
    let ids = {
        let base = serve.base.clone();
        tokio::task::spawn_blocking(move || run_node_script("sdk_session.js", &[&base, ALICE, BOB]))
            .await
            .expect("the script's thread")
    };
    let client = reqwest::Client::new();
    // The conversation: its first item and three turns; the fork: at least its own turn.
    for (which, least_events) in [("conversation", 7), ("fork", 2)] {
        let id = ids[which].as_str().expect("an id");
        let session = client
            .get(serve.url(&format!("/v1/sessions/alice/{id}")))
            .bearer_auth(ALICE)
            .send()
            .await
            .expect("GET the session");
        assert_eq!(session.status(), 200, "the {which} is alice's session");
        let session: serde_json::Value = session.json().await.expect("a session body");
        let events = session["meta"]["events"].as_u64().expect("an event count");
        assert!(
            events >= least_events,
            "the {which} holds its turns: {session:#}"
        );
        let bobs = client
            .get(serve.url(&format!("/v1/sessions/alice/{id}")))
            .bearer_auth(BOB)
            .send()
            .await
            .expect("GET as bob");
        assert_eq!(bobs.status(), 403, "bob does not read alice's {which}");
    }
}
