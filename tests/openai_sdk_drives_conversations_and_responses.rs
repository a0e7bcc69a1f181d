//! Property: the official `openai` Python package, pointed at `turnstile serve`, works as it
//! does against OpenAI — models, conversations (create, items, metadata, paging), responses
//! (plain, streamed with every typed event in `sequence_number` order, retrieved, cancelled
//! mid-stream with the partial output kept, continued with `previous_response_id` in place or
//! in a fork), chat completions (streamed and not), errors in OpenAI's shape, user isolation,
//! and an `Idempotency-Key` retry stored once — and a conversation it made is the same session
//! through `/v1/sessions/…` and `turnstile sessions show`.

#![cfg(feature = "http")]

mod support;

use std::time::Duration;

use support::cli::turnstile_json;
use support::http::{ALICE, BOB};
use support::openai_sdk::run_script;
use support::serve::{Serve, ServeStore};

#[tokio::test]
async fn the_python_sdk_drives_conversations_responses_and_chat() {
    // Turns take 1.5 s over 10 chunks, so that a cancel lands mid-stream.
    let mut serve = Serve::start(ServeStore::File, 1500, 10, &[]);
    let ids = {
        let base = serve.base.clone();
        tokio::task::spawn_blocking(move || run_script("sdk_session.py", &[&base, ALICE, BOB]))
            .await
            .expect("the script's thread")
    };
    let conversation = ids["conversation"].as_str().expect("a conversation id");

    // The same session through the session routes: alice's, with the conversation's turns.
    let session = reqwest::Client::new()
        .get(serve.url(&format!("/v1/sessions/alice/{conversation}")))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("GET the session");
    assert_eq!(session.status(), 200);
    let session: serde_json::Value = session.json().await.expect("a session body");
    assert_eq!(session["session"], conversation);
    assert_eq!(
        session["state"]["openai.metadata"]["topic"], "greetings",
        "the conversation's metadata is session state"
    );
    let events = session["meta"]["events"].as_u64().expect("an event count");
    assert!(
        events >= 15,
        "the session holds the conversation's log: {session:#}"
    );

    // And through `turnstile sessions show`, once serve has let go of the store.
    assert!(serve.terminate(Duration::from_secs(20)).success());
    let store = format!("file:{}", serve.data_dir().display());
    let key = format!("alice/{conversation}");
    let (run, shown) = turnstile_json(&[
        "sessions", "--json", "--store", &store, "show", &key, "--events", "100",
    ]);
    assert!(run.success, "sessions show: {}", run.stderr);
    assert_eq!(shown["key"], key);
    let text = shown.to_string();
    for said in [
        "my name is Ada",
        "hello Ada",
        "first question",
        "a long answer please",
    ] {
        assert!(text.contains(said), "{said:?} is in the session: {shown:#}");
    }
    assert_eq!(
        shown["record"]["stats"]["interrupted"], 1,
        "the cancelled response is the session's interrupted turn: {shown:#}"
    );
}
